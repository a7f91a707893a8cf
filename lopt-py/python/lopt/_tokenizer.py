"""``lopt.Tokenizer``: a drop-in for ``tokenizers.Tokenizer`` that encodes long texts on all cores.

Design (see the README's Python section for the table of what runs where):

* A real ``tokenizers.Tokenizer`` (``_hf``) is kept inside, built from the same JSON. It is the
  source of truth for the tokenizer's definition and settings: every setter is applied to it
  first, so its ``truncation``/``padding`` dictionaries, ``to_str()``, ``save()`` and pickling are
  HF's own. Everything lopt has no native code for is handed to it (exact, sequential).
* ``_core`` is the native lopt tokenizer built from ``_hf.to_str()``. It is rebuilt only when the
  definition changes (``add_tokens``, a new component, ``train``), never for truncation or
  padding.
* ``_state`` is an immutable snapshot of the per-call settings, replaced (under ``_lock``) when one
  changes and read once per call without the lock: an encode never waits for a setter and always
  sees one consistent set of settings.
* ``_lock`` serialises the calls into ``_hf`` that release the GIL and the calls that change it,
  which is what makes HF raise "Already borrowed" when threads share one object.
* Fork safety: a forked child has no thread-pool threads. ``os.register_at_fork`` bumps a
  generation counter; a tokenizer used in a child from before the fork leaks its old core
  (tearing its pool down could wait on a lock held at the fork) and builds a new one.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import threading
import warnings
from typing import Any, NamedTuple, Optional

import tokenizers
import tokenizers.models
import tokenizers.pre_tokenizers

from . import _lopt
from ._lopt import Encoding, LoptError

__all__ = ["Tokenizer", "SequentialWarning", "default_threads"]


class SequentialWarning(UserWarning):
    """A tokenizer has a component lopt cannot cut at: its texts are encoded whole (still exact)."""


# Values of TOKENIZERS_PARALLELISM that turn parallelism off, as HF `tokenizers` reads them.
_OFF = {"", "off", "false", "f", "no", "n", "0"}

_fork_generation = 0


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def default_threads() -> Optional[int]:
    """Threads for a tokenizer built without ``threads=``: 1 when ``TOKENIZERS_PARALLELISM`` is
    off, else ``RAYON_NUM_THREADS`` when set, else ``None`` (one per available core)."""
    parallelism = os.environ.get("TOKENIZERS_PARALLELISM")
    if parallelism is not None and parallelism.strip().lower() in _OFF:
        return 1
    rayon = os.environ.get("RAYON_NUM_THREADS", "").strip()
    if rayon.isdigit() and int(rayon) > 0:
        return int(rayon)
    return None


def _check_threads(threads: Any) -> None:
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise LoptError(f"threads must be a positive integer, not {threads!r}")


def _resolved(threads: Optional[int]) -> Optional[int]:
    """The native core's thread count for ``threads=`` (``None``: ``default_threads()``)."""
    return threads if threads is not None else default_threads()


class _State(NamedTuple):
    truncation: Optional[dict]
    padding: Optional[dict]
    encode_special_tokens: bool
    # Whether the native core encodes texts with these settings.
    native: bool
    # The settings as the native core takes them.
    options: "_lopt.Options"


@functools.lru_cache(maxsize=1)
def overflow_like_lopt() -> bool:
    """Whether the installed ``tokenizers`` truncates as the Rust crate lopt is built on
    (0.23.0 to 0.23.2: the model stops at ``max_length`` whole pre-tokens, so the overflow holds
    only what it produced, and left truncation renumbers words). 0.23.3 tokenizes everything
    first; with it, lopt hands truncating calls to the inner tokenizer, so results stay those of
    the installed release."""
    probe = tokenizers.Tokenizer(tokenizers.models.WordLevel({"a": 0, "b": 1}, unk_token="a"))
    probe.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    probe.enable_truncation(1)
    return len(probe.encode("a b").overflowing) == 0


def prefix_cache_bytes(value: Any) -> int:
    """The prefix cache's bound in bytes from ``prefix_cache=``: ``None`` or 0 (off), a whole
    number of bytes, or a size such as ``"256MiB"`` (the CLI's ``--prefix-cache`` syntax: B, KB,
    MB, GB, KiB, MiB, GiB). Anything else raises ``LoptError`` (a ``ValueError``)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return _lopt.parse_byte_size(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise LoptError(f"prefix_cache must be a number of bytes or a size such as '256MiB', not {value!r}")


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside this package (warnings point at the user's
    line, whichever constructor they called)."""
    package = os.path.dirname(__file__)
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == package:
        frame, level = frame.f_back, level + 1
    return level


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _reraise(err: BaseException) -> None:
    """HF's panics derive from BaseException (``except Exception`` misses them): make them
    ``LoptError``s; re-raise everything else unchanged."""
    if type(err).__name__ == "PanicException":
        raise LoptError(f"tokenizers panicked: {_one_line(str(err))}") from None
    raise err


def _wrap(encoding: Any) -> Encoding:
    return Encoding._from_state(encoding.__getstate__())


def _unwrap(encoding: Any) -> tokenizers.Encoding:
    if isinstance(encoding, tokenizers.Encoding):
        return encoding
    hf = tokenizers.Encoding()
    hf.__setstate__(encoding.__getstate__())
    return hf


class Tokenizer:
    """A ``tokenizers.Tokenizer`` with the same methods and results, encoding long texts on all
    cores (``threads=``, default: ``RAYON_NUM_THREADS``, else every core; 1 when
    ``TOKENIZERS_PARALLELISM`` is off).

    ``Tokenizer(obj)`` takes a ``tokenizers.Tokenizer`` (which it keeps and owns from then on:
    change it through this object only) or a ``tokenizers.models`` model.

    ``prefix_cache=`` (every constructor) keeps the tokens of recently encoded long texts, up to
    that many bytes of memory (an int, or a size such as ``"256MiB"``; default 0: off), so that a
    text sharing a long prefix with one of them (the next turn of a conversation) encodes only
    what follows; outputs are the same either way. ``prefix_cache_stats()`` reports it. A copy
    (pickle, ``copy.deepcopy``) starts with an empty cache of the same size.
    """

    def __init__(self, tokenizer: Any, threads: Optional[int] = None, prefix_cache: "int | str | None" = 0) -> None:
        if isinstance(tokenizer, Tokenizer):
            hf = tokenizers.Tokenizer.from_str(tokenizer.to_str())
            hf.encode_special_tokens = tokenizer.encode_special_tokens
        elif isinstance(tokenizer, tokenizers.Tokenizer):
            hf = tokenizer
        else:
            hf = tokenizers.Tokenizer(tokenizer)
        self._adopt(hf, threads, prefix_cache)

    # ----------------------------------------------------------------------------- loading

    @classmethod
    def from_str(cls, json: str, threads: Optional[int] = None, prefix_cache: "int | str | None" = 0) -> "Tokenizer":
        """Builds a tokenizer from the text of a ``tokenizer.json``."""
        return cls._from_json(tokenizers.Tokenizer.from_str, json, threads, prefix_cache)

    @classmethod
    def from_file(
        cls, path: "str | os.PathLike[str]", threads: Optional[int] = None, prefix_cache: "int | str | None" = 0
    ) -> "Tokenizer":
        """Loads a ``tokenizer.json`` file."""
        with open(path, "rb") as file:
            return cls.from_buffer(file.read(), threads, prefix_cache)

    @classmethod
    def from_buffer(
        cls, buffer: bytes, threads: Optional[int] = None, prefix_cache: "int | str | None" = 0
    ) -> "Tokenizer":
        """Builds a tokenizer from the bytes of a ``tokenizer.json``."""
        return cls._from_json(tokenizers.Tokenizer.from_buffer, buffer, threads, prefix_cache)

    @classmethod
    def from_pretrained(
        cls,
        identifier: str,
        revision: str = "main",
        token: Optional[str] = None,
        threads: Optional[int] = None,
        prefix_cache: "int | str | None" = 0,
    ) -> "Tokenizer":
        """Loads ``tokenizer.json`` of a HuggingFace Hub model: a local directory or file, else
        the local HuggingFace cache (offline), else a download through ``huggingface_hub`` when
        it is installed."""
        from ._hub import find_tokenizer_json

        return cls.from_file(find_tokenizer_json(identifier, revision, token), threads, prefix_cache)

    @classmethod
    def _from_json(cls, load: Any, source: Any, threads: Optional[int], prefix_cache: Any) -> "Tokenizer":
        """Builds the inner HF tokenizer with ``load(source)`` on this thread while a native
        thread, which never takes the GIL, builds the core from the same ``tokenizer.json`` text
        or bytes (``Core.start``), so that loading takes about as long as HF's parse alone (it
        took 1.5-1.9x: the two parses one after the other, and HF's ``to_str()`` in between). A
        core that fails to build there is built again as any other, from ``to_str()``, so that
        errors and results are those of the one-thread path."""
        _check_threads(threads)
        size = prefix_cache_bytes(prefix_cache)
        try:
            pending = _lopt.Core.start(source, _resolved(threads), size)
        except (TypeError, ValueError):
            pending = None  # neither str nor bytes, or no UTF-8: built from to_str() below
        hf = cls._load(load, source)
        core = None
        if pending is not None:
            try:
                core = pending.join()
            except LoptError:
                pass  # rebuilt from to_str(), which reports it
        tokenizer = cls.__new__(cls)
        tokenizer._adopt(hf, threads, prefix_cache, core)
        return tokenizer

    @staticmethod
    def _load(load: Any, source: Any) -> tokenizers.Tokenizer:
        try:
            return load(source)
        except BaseException as err:  # noqa: BLE001 - PanicException is a BaseException
            if isinstance(err, (KeyboardInterrupt, SystemExit, MemoryError)):
                raise
            raise LoptError(f"not a valid tokenizer.json: {_one_line(str(err))}") from None

    def _adopt(
        self, hf: tokenizers.Tokenizer, threads: Optional[int], prefix_cache: Any, core: "Optional[_lopt.Core]" = None
    ) -> None:
        _check_threads(threads)
        self._prefix_cache = prefix_cache_bytes(prefix_cache)
        self._hf = hf
        self._threads = threads
        self._lock = threading.Lock()
        self._generation = _fork_generation
        self._warned = False
        self._build(core)

    def _build(self, core: "Optional[_lopt.Core]" = None) -> None:
        """(Re)builds the native core from the inner tokenizer, or installs ``core``, already
        built from the same JSON (caller holds ``_lock`` or owns the object)."""
        if core is None:
            core = _lopt.Core.from_str(self._hf.to_str(), _resolved(self._threads), self._prefix_cache)
        reason = core.sequential_reason
        if reason is not None and not self._warned:
            self._warned = True
            warnings.warn(
                f"lopt encodes this tokenizer's texts whole, one thread per text (exact, not "
                f"parallel): {reason}",
                SequentialWarning,
                stacklevel=_caller_level(),
            )
        self._core = core
        self._refresh()

    def _refresh(self) -> None:
        hf = self._hf
        truncation, padding, special = hf.truncation, hf.padding, hf.encode_special_tokens
        native = not special and (truncation is None or overflow_like_lopt())
        self._state = _State(truncation, padding, special, native, _lopt.Options(truncation, padding))

    def _live(self) -> "_lopt.Core":
        if self._generation != _fork_generation:
            self._after_fork()
        return self._core

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._core.leak()
        self._generation = _fork_generation
        self._build()

    def _locked(self) -> threading.Lock:
        self._live()
        return self._lock

    def _call_hf(self, name: str, *args: Any, **kwargs: Any) -> Any:
        with self._locked():
            try:
                return getattr(self._hf, name)(*args, **kwargs)
            except BaseException as err:  # noqa: BLE001
                _reraise(err)

    def _change(self, name: str, *args: Any, rebuild: bool = False, **kwargs: Any) -> Any:
        """Applies a change to the inner tokenizer, then refreshes the settings snapshot (and
        rebuilds the core when the tokenizer's definition changed)."""
        with self._locked():
            try:
                result = getattr(self._hf, name)(*args, **kwargs)
            except BaseException as err:  # noqa: BLE001
                _reraise(err)
            if rebuild:
                self._build()
            else:
                self._refresh()
            return result

    # ----------------------------------------------------------------------------- encoding

    def encode(
        self,
        sequence: Any,
        pair: Any = None,
        is_pretokenized: bool = False,
        add_special_tokens: bool = True,
    ) -> Encoding:
        """Encodes a text (or a pair, or pre-tokenized input) as ``tokenizers.Tokenizer.encode``
        does; offsets are character offsets. A single text is encoded by lopt with the GIL
        released, with the current truncation and padding; anything else by the inner HF
        tokenizer."""
        state = self._state
        if state.native and pair is None and not is_pretokenized and isinstance(sequence, str):
            try:
                return self._live().encode(sequence, add_special_tokens, state.options)
            except LoptError:
                pass  # HF decides: it may accept what lopt refuses (see _native_refused)
        return _wrap(self._call_hf("encode", sequence, pair, is_pretokenized, add_special_tokens))

    def encode_batch(
        self, input: Any, is_pretokenized: bool = False, add_special_tokens: bool = True
    ) -> "list[Encoding]":
        """Encodes a batch as ``tokenizers.Tokenizer.encode_batch`` does. A list of texts is
        encoded by lopt (all texts' chunks share the thread pool); pairs and pre-tokenized input
        by the inner HF tokenizer."""
        state = self._state
        if state.native and not is_pretokenized and not isinstance(input, str):
            try:
                encodings = self._live().encode_batch(input, add_special_tokens, state.options)
            except LoptError:
                encodings = None  # HF decides: it may accept what lopt refuses
            if encodings is not None:
                return encodings
        return [_wrap(e) for e in self._call_hf("encode_batch", input, is_pretokenized, add_special_tokens)]

    def encode_batch_fast(
        self, input: Any, is_pretokenized: bool = False, add_special_tokens: bool = True
    ) -> "list[Encoding]":
        """As ``tokenizers``: like ``encode_batch`` without offsets (handed to HF)."""
        return [_wrap(e) for e in self._call_hf("encode_batch_fast", input, is_pretokenized, add_special_tokens)]

    async def async_encode(
        self, sequence: Any, pair: Any = None, is_pretokenized: bool = False, add_special_tokens: bool = True
    ) -> Encoding:
        """``encode`` on a worker thread (the GIL is released while lopt encodes)."""
        call = functools.partial(self.encode, sequence, pair, is_pretokenized, add_special_tokens)
        return await asyncio.get_running_loop().run_in_executor(None, call)

    async def async_encode_batch(
        self, input: Any, is_pretokenized: bool = False, add_special_tokens: bool = True
    ) -> "list[Encoding]":
        """``encode_batch`` on a worker thread."""
        call = functools.partial(self.encode_batch, input, is_pretokenized, add_special_tokens)
        return await asyncio.get_running_loop().run_in_executor(None, call)

    async def async_encode_batch_fast(
        self, input: Any, is_pretokenized: bool = False, add_special_tokens: bool = True
    ) -> "list[Encoding]":
        """``encode_batch_fast`` on a worker thread."""
        call = functools.partial(self.encode_batch_fast, input, is_pretokenized, add_special_tokens)
        return await asyncio.get_running_loop().run_in_executor(None, call)

    def encode_ids(self, text: str, add_special_tokens: bool = True) -> Any:
        """The ids of one text as a ``numpy.uint32`` array, without building Python objects per
        token (needs numpy)."""
        import numpy as np

        state = self._state
        if state.native and isinstance(text, str):
            try:
                ids = self._live().encode_ids(text, add_special_tokens, state.options)
                return np.frombuffer(ids, dtype=np.uint32)
            except LoptError:
                pass  # HF decides, through encode
        return np.asarray(self.encode(text, add_special_tokens=add_special_tokens).ids, dtype=np.uint32)

    def encode_batch_ids(self, texts: Any, add_special_tokens: bool = True) -> "tuple[Any, Any]":
        """The ids of many texts as one flat ``numpy.uint32`` array and ``int64`` row offsets
        (``len(texts) + 1``; row ``i`` is ``ids[offsets[i]:offsets[i + 1]]``) (needs numpy)."""
        import numpy as np

        state = self._state
        if state.native and not isinstance(texts, str):
            try:
                out = self._live().encode_batch_ids(texts, add_special_tokens, state.options)
            except LoptError:
                out = None  # HF decides, through encode_batch
            if out is not None:
                ids, rows = out
                return np.frombuffer(ids, dtype=np.uint32), np.frombuffer(rows, dtype=np.int64)
        encodings = self.encode_batch(texts, add_special_tokens=add_special_tokens)
        rows = np.zeros(len(encodings) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encodings], out=rows[1:])
        ids = np.fromiter((i for e in encodings for i in e.ids), dtype=np.uint32, count=int(rows[-1]))
        return ids, rows

    def post_process(self, encoding: Any, pair: Any = None, add_special_tokens: bool = True) -> Encoding:
        """As ``tokenizers``: truncation, post-processor and padding on existing encodings."""
        pair = None if pair is None else _unwrap(pair)
        return _wrap(self._call_hf("post_process", _unwrap(encoding), pair, add_special_tokens))

    # ----------------------------------------------------------------------------- decoding

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        """Decodes ids (handed to the inner HF tokenizer)."""
        return self._call_hf("decode", ids, skip_special_tokens)

    def decode_batch(self, sequences: Any, skip_special_tokens: bool = True) -> "list[str]":
        """Decodes a batch of id lists (handed to the inner HF tokenizer)."""
        return self._call_hf("decode_batch", sequences, skip_special_tokens)

    async def async_decode_batch(self, sequences: Any, skip_special_tokens: bool = True) -> "list[str]":
        """``decode_batch`` on a worker thread."""
        call = functools.partial(self.decode_batch, sequences, skip_special_tokens)
        return await asyncio.get_running_loop().run_in_executor(None, call)

    # ----------------------------------------------------------------------------- settings

    def enable_truncation(self, max_length: int, **kwargs: Any) -> None:
        """As ``tokenizers`` (``stride``, ``strategy``, ``direction``); does not rebuild."""
        self._change("enable_truncation", max_length, **kwargs)

    def no_truncation(self) -> None:
        self._change("no_truncation")

    @property
    def truncation(self) -> Optional[dict]:
        """The truncation settings, with HF's keys (``enable_truncation(**t)`` restores them)."""
        truncation = self._state.truncation
        return None if truncation is None else dict(truncation)

    def enable_padding(self, **kwargs: Any) -> None:
        """As ``tokenizers`` (``direction``, ``pad_id``, ``pad_type_id``, ``pad_token``,
        ``length``, ``pad_to_multiple_of``); does not rebuild. Lengths over
        ``lopt.MAX_PADDING_LENGTH`` are refused."""
        for key in ("length", "pad_to_multiple_of"):
            value = kwargs.get(key)
            if isinstance(value, int) and value > _lopt.MAX_PADDING_LENGTH:
                raise LoptError(f"padding {key} {value} is over lopt's limit of {_lopt.MAX_PADDING_LENGTH} tokens")
        self._change("enable_padding", **kwargs)

    def no_padding(self) -> None:
        self._change("no_padding")

    @property
    def padding(self) -> Optional[dict]:
        """The padding settings, with HF's keys (``enable_padding(**p)`` restores them)."""
        padding = self._state.padding
        return None if padding is None else dict(padding)

    @property
    def encode_special_tokens(self) -> bool:
        """Whether special tokens in the text are split like ordinary text."""
        return self._state.encode_special_tokens

    @encode_special_tokens.setter
    def encode_special_tokens(self, value: bool) -> None:
        with self._locked():
            self._hf.encode_special_tokens = value
            self._refresh()

    # ----------------------------------------------------------------------------- definition

    def add_tokens(self, tokens: Any) -> int:
        """Adds tokens (as ``tokenizers``) and rebuilds the native tokenizer."""
        return self._change("add_tokens", tokens, rebuild=True)

    def add_special_tokens(self, tokens: Any) -> int:
        """Adds special tokens (as ``tokenizers``) and rebuilds the native tokenizer."""
        return self._change("add_special_tokens", tokens, rebuild=True)

    def train(self, files: Any, trainer: Any = None) -> None:
        self._change("train", files, trainer, rebuild=True)

    def train_from_iterator(self, iterator: Any, trainer: Any = None, length: Optional[int] = None) -> None:
        self._change("train_from_iterator", iterator, trainer, length, rebuild=True)

    def _component(name: str, rebuild: bool) -> property:  # type: ignore[misc]  # noqa: N805
        def get(self: "Tokenizer") -> Any:
            return getattr(self._hf, name)

        def set_(self: "Tokenizer", value: Any) -> None:
            with self._locked():
                setattr(self._hf, name, value)
                if rebuild:
                    self._build()

        return property(get, set_, doc=f"The inner tokenizer's {name} (a ``tokenizers`` object); "
                        "assigning one rebuilds the native tokenizer.")

    model = _component("model", True)
    normalizer = _component("normalizer", True)
    pre_tokenizer = _component("pre_tokenizer", True)
    post_processor = _component("post_processor", True)
    decoder = _component("decoder", False)
    del _component

    def refresh(self) -> None:
        """Rebuilds the native tokenizer from the inner one: call it after changing a component
        object in place (``tok.pre_tokenizer.add_prefix_space = ...``), which lopt cannot see."""
        with self._locked():
            self._build()

    # ----------------------------------------------------------------------------- vocabulary

    def token_to_id(self, token: str) -> Optional[int]:
        return self._hf.token_to_id(token)

    def id_to_token(self, id: int) -> Optional[str]:
        return self._hf.id_to_token(id)

    def get_vocab(self, with_added_tokens: bool = True) -> "dict[str, int]":
        return self._hf.get_vocab(with_added_tokens)

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return self._hf.get_vocab_size(with_added_tokens)

    def get_added_tokens_decoder(self) -> "dict[int, tokenizers.AddedToken]":
        return self._hf.get_added_tokens_decoder()

    def num_special_tokens_to_add(self, is_pair: bool) -> int:
        return self._hf.num_special_tokens_to_add(is_pair)

    # ----------------------------------------------------------------------------- saving

    def to_str(self, pretty: bool = False) -> str:
        return self._hf.to_str(pretty)

    def save(self, path: str, pretty: bool = True) -> None:
        self._hf.save(os.fspath(path), pretty)

    def __getstate__(self) -> bytes:
        """HF's state (the ``tokenizer.json`` bytes, settings included)."""
        return self._hf.__getstate__()

    def __setstate__(self, state: bytes) -> None:
        self._adopt(tokenizers.Tokenizer.from_buffer(bytes(state)), None, 0)

    def __reduce__(self) -> Any:
        return (_restore, (self.__getstate__(), self._threads, self.encode_special_tokens, self._prefix_cache))

    def __deepcopy__(self, memo: Any) -> "Tokenizer":
        return _restore(self.__getstate__(), self._threads, self.encode_special_tokens, self._prefix_cache)

    def __copy__(self) -> "Tokenizer":
        return self.__deepcopy__({})

    # ----------------------------------------------------------------------------- lopt's own

    @property
    def threads(self) -> int:
        """The number of threads lopt encodes with."""
        return self._live().threads

    @property
    def engine(self) -> str:
        """lopt's engine for this tokenizer: ``bpe``, ``wordpiece`` or ``hf``."""
        return self._live().engine

    @property
    def sequential_reason(self) -> Optional[str]:
        """Why this tokenizer's texts are encoded whole (``None`` when lopt cuts them)."""
        return self._live().sequential_reason

    def prefix_cache_stats(self) -> Optional[dict]:
        """The prefix cache's counters (``None`` when ``prefix_cache`` is off): ``hits`` and
        ``misses`` (texts that did or did not reuse a cached prefix), ``bytes_reused`` and
        ``bytes_encoded`` (text bytes whose tokens were reused or encoded), ``bytes_held``,
        ``entries`` (texts held now) and ``capacity`` (the bound in bytes)."""
        return self._live().prefix_cache_stats()

    @property
    def prefix_cache(self) -> int:
        """The prefix cache's bound in bytes (0: off)."""
        return self._prefix_cache

    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The inner ``tokenizers.Tokenizer`` (read it; change settings through this object)."""
        return self._hf

    def __repr__(self) -> str:
        return f"lopt.Tokenizer(engine={self.engine!r}, threads={self.threads})"


def _restore(state: bytes, threads: Optional[int], encode_special_tokens: bool, prefix_cache: int = 0) -> Tokenizer:
    """Unpickles (and deep-copies): same definition, settings and threads; the prefix cache, if
    any, starts empty with the same bound."""
    hf = tokenizers.Tokenizer.from_buffer(bytes(state))
    hf.encode_special_tokens = encode_special_tokens
    return Tokenizer(hf, threads, prefix_cache)
