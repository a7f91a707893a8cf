"""lopt: lossless parallel tokenization.

``lopt.Tokenizer`` is a drop-in for ``tokenizers.Tokenizer``: same methods, arguments and
results (character offsets included), exactly what HF ``tokenizers`` gives, but a long text is
cut at provably safe places and encoded on all cores, with the GIL released::

    import lopt
    tok = lopt.Tokenizer.from_file("tokenizer.json")
    enc = tok.encode(long_text)          # lopt.Encoding: ids, tokens, offsets, word_ids, ...
    ids = tok.encode_ids(long_text)      # numpy.uint32, no per-token Python objects

Errors are ``lopt.LoptError`` (a ``ValueError``) with a one-line message.
"""

from ._lopt import MAX_PADDING_LENGTH, Encoding, LoptError
from ._tokenizer import SequentialWarning, Tokenizer, default_threads
from ._transformers import accelerate, is_accelerated, patch_transformers, unpatch_transformers

__version__ = "0.1.0"

__all__ = [
    "Encoding",
    "LoptError",
    "MAX_PADDING_LENGTH",
    "SequentialWarning",
    "Tokenizer",
    "accelerate",
    "default_threads",
    "is_accelerated",
    "patch_transformers",
    "unpatch_transformers",
]
