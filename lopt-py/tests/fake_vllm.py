"""A stand-in for the few parts of vLLM that `lopt.vllm` meets, written from vLLM's documented
behaviour (vLLM itself needs a GPU build and is not installed in CI):

- a tokenizer registry: `register(mode, module, class_name)`, then `from_pretrained` of that class;
- a renderer registry whose entries are `(module, class_name)` by mode, with an `hf` entry;
- `get_cached_tokenizer`: a shallow copy moved to a local subclass that caches `get_vocab()` and
  pickles as `get_cached_tokenizer(original)`;
- `make_thread_pool`: deep copies of the tokenizer that serve `__call__` (vLLM's renderer does this
  to avoid "Already borrowed" errors);
- the fast incremental detokenizer: `DecodeStream.step(tokenizer._tokenizer, id)`.
"""

import copy
import importlib
import queue

from tokenizers.decoders import DecodeStream


class _Registry:
    def __init__(self, entries):
        self.entries = dict(entries)

    def register(self, mode, module, class_name):
        self.entries[mode] = (module, class_name)

    def load_class(self, mode):
        module, class_name = self.entries[mode]
        return getattr(importlib.import_module(module), class_name)


class TokenizerRegistryType(_Registry):
    tokenizers = property(lambda self: self.entries)

    def load_tokenizer(self, mode, *args, **kwargs):
        return self.load_class(mode).from_pretrained(*args, **kwargs)


class RendererRegistryType(_Registry):
    renderers = property(lambda self: self.entries)


TokenizerRegistry = TokenizerRegistryType({"hf": (__name__, "CachedHfTokenizer")})
RENDERER_REGISTRY = RendererRegistryType({"hf": ("fake_vllm_renderers", "HfRenderer")})


def get_cached_tokenizer(tokenizer):
    vocab = tokenizer.get_vocab()
    cached = copy.copy(tokenizer)

    class CachedTokenizer(tokenizer.__class__):
        def get_vocab(self):
            return vocab

        def __reduce__(self):
            return get_cached_tokenizer, (tokenizer,)

    CachedTokenizer.__name__ = f"Cached{tokenizer.__class__.__name__}"
    cached.__class__ = CachedTokenizer
    return cached


class CachedHfTokenizer:
    @classmethod
    def from_pretrained(cls, path, *args, trust_remote_code=False, revision=None, download_dir=None, **kwargs):
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(
            path, *args, trust_remote_code=trust_remote_code, revision=revision, cache_dir=download_dir, **kwargs
        )
        return get_cached_tokenizer(tok)


def make_thread_pool(tokenizer, copies):
    pool = queue.Queue()
    for _ in range(copies):
        pool.put(copy.deepcopy(tokenizer))

    class TokenizerPool(tokenizer.__class__):
        def __call__(self, *args, **kwargs):
            tok = pool.get()
            try:
                return tok(*args, **kwargs)
            finally:
                pool.put(tok)

    tokenizer.__class__ = TokenizerPool
    return tokenizer, pool


def stream_detokenize(tokenizer, ids, skip_special_tokens=False):
    stream = DecodeStream(skip_special_tokens=skip_special_tokens)
    return "".join(piece for piece in (stream.step(tokenizer._tokenizer, i) for i in ids) if piece)
