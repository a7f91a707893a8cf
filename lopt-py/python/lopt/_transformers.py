"""lopt as the encode path of transformers fast tokenizers.

Job: `accelerate(tok)` makes every encode of a transformers fast tokenizer (`__call__`, `encode`,
`tokenize`, `batch_encode_plus`, `apply_chat_template(tokenize=True)`, ...) run on a
`lopt.Tokenizer` built from the same tokenizer.json, while everything else stays on the real
`tokenizers.Tokenizer`; `patch_transformers()` does the same for every tokenizer that
`AutoTokenizer.from_pretrained` returns until `unpatch_transformers()`.

How: transformers reaches the backend only through `self._tokenizer`, and its encode path is one
method (`_encode_plus` in v5, `_batch_encode_plus` in v4) that adjusts truncation/padding and then
calls `self._tokenizer.encode_batch(...)`. `accelerate` moves the instance to a subclass of its own
class (same name, so `save_pretrained`, `repr` and `isinstance` see no difference) whose
`_tokenizer` is a property: inside that encode method, in that thread or asyncio task only (a
context variable), it returns an `_EncodeView` that sends `encode_batch` to lopt and everything
else to the real object; everywhere else it returns the real `tokenizers.Tokenizer`. So callers
that need the real object keep it: vLLM's `DecodeStream.step(tokenizer._tokenizer, id)` type
checks it, `decode`, `save`, component objects and `type(backend.model).__name__` are untouched.

Invariants:
- The real backend's state changes exactly as it would without lopt (the view forwards every
  `enable_*`/`no_*`/`encode_special_tokens` call to it), so later unaccelerated uses see the same.
- lopt encodes with the settings that this call chose (kept in the view, not read back from the
  shared object): threads sharing one tokenizer cannot mix settings. Calls with the same settings
  encode side by side; a call with other settings waits for those in flight.
- The lopt tokenizer mirrors the real one: it is rebuilt when the real object is replaced, when
  tokens are added through transformers (`add_tokens`, `add_special_tokens`), or when its
  normalizer, pre-tokenizer or post-processor changes (compared on every call, a few µs).
  Documented limit: a direct `backend_tokenizer.add_tokens(...)` or a model swap on the backend
  object is not seen; call `accelerate(tok)` again after such an edit.
- Nothing is stored on transformers' classes or module: `unpatch_transformers()` restores the one
  attribute that `patch_transformers()` replaced, the very same object.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import os
import threading
import warnings
import weakref
from typing import Any

import tokenizers

__all__ = ["accelerate", "is_accelerated", "patch_transformers", "unpatch_transformers"]

# (transformers tokenizer, view) while that tokenizer's encode method runs in this context.
_ACTIVE: contextvars.ContextVar[tuple[Any, _EncodeView] | None] = contextvars.ContextVar(
    "lopt_active_encode", default=None
)
# Methods that are the whole encode path of a transformers fast tokenizer (v5, v4).
_ENCODE_METHODS = ("_encode_plus", "_batch_encode_plus")
_ROUTE_ATTR = "_lopt_route"

_CLASSES: dict[type, type] = {}
_CLASSES_LOCK = threading.Lock()


def _truncation_dict(max_length, stride=0, strategy="longest_first", direction="right"):
    """`tokenizers.Tokenizer.enable_truncation`'s arguments as its `truncation` getter shows them."""
    return {"max_length": max_length, "stride": stride, "strategy": strategy, "direction": direction}


def _padding_dict(
    direction="right", pad_id=0, pad_type_id=0, pad_token="[PAD]", length=None, pad_to_multiple_of=None
):
    """`tokenizers.Tokenizer.enable_padding`'s arguments as its `padding` getter shows them."""
    return {
        "length": length,
        "pad_to_multiple_of": pad_to_multiple_of,
        "pad_id": pad_id,
        "pad_token": pad_token,
        "pad_type_id": pad_type_id,
        "direction": direction,
    }


def _fingerprint(real: tokenizers.Tokenizer) -> tuple:
    """The serialized pipeline components that transformers or a server may replace after load."""
    parts = []
    for name in ("normalizer", "pre_tokenizer", "post_processor"):
        component = getattr(real, name)
        parts.append(None if component is None else component.__getstate__())
    return tuple(parts)


class _Route:
    """The lopt tokenizer behind one transformers tokenizer, and the settings last applied to it.

    Calls with the settings in force encode at once, side by side (lopt's tokenizer may be shared
    between threads); a call with other settings, or one that finds the real tokenizer changed,
    waits until the encodes in flight are done, then applies its settings or rebuilds.
    """

    def __init__(self, source: tokenizers.Tokenizer, options: dict[str, Any], engine=None, fingerprint=None):
        self._reset_after_fork()
        self.options = dict(options)
        self.source = source
        self.stale = False
        self.applied = None
        if engine is None:
            self.rebuild(source)
        else:
            self.engine, self.fingerprint = engine, fingerprint
        _ROUTES.add(self)

    def _reset_after_fork(self) -> None:
        # A fork while another thread encoded would leave the child waiting for that encode.
        self.changing = threading.Condition()
        self.in_flight = 0

    def rebuild(self, source: tokenizers.Tokenizer) -> None:
        """Builds the lopt tokenizer from the real one's JSON (its current settings included).

        # Errors
        `lopt.LoptError` when lopt cannot load that JSON.
        """
        from . import Tokenizer

        fingerprint = _fingerprint(source)
        self.engine = Tokenizer.from_str(source.to_str(), **self.options)
        self.source, self.fingerprint, self.stale, self.applied = source, fingerprint, False, None

    def encode_batch(self, real, inputs, add_special_tokens, is_pretokenized, settings):
        with self.changing:
            while True:
                outdated = self.stale or self.source is not real or _fingerprint(real) != self.fingerprint
                if not outdated and settings == self.applied:
                    break
                if self.in_flight == 0:
                    if outdated:
                        self.rebuild(real)
                    self._apply(settings)
                    break
                self.changing.wait()
            self.in_flight += 1
            engine = self.engine
        try:
            return engine.encode_batch(inputs, add_special_tokens=add_special_tokens, is_pretokenized=is_pretokenized)
        finally:
            with self.changing:
                self.in_flight -= 1
                self.changing.notify_all()

    def _apply(self, settings) -> None:
        truncation, padding, split_special = settings
        if truncation is None:
            self.engine.no_truncation()
        else:
            self.engine.enable_truncation(**truncation)
        if padding is None:
            self.engine.no_padding()
        else:
            self.engine.enable_padding(**padding)
        self.engine.encode_special_tokens = split_special
        self.applied = settings

    def __reduce__(self):
        # The condition cannot be pickled or copied; everything else travels (the lopt tokenizer
        # through its own pickle/deepcopy support, so a copy need not rebuild it).
        return (_Route._revive, (self.source, self.options, self.engine, self.fingerprint))

    @staticmethod
    def _revive(source, options, engine, fingerprint):
        return _Route(source, options, engine=engine, fingerprint=fingerprint)


_ROUTES: weakref.WeakSet[_Route] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    global _CLASSES_LOCK, _patch_lock
    _CLASSES_LOCK, _patch_lock = threading.Lock(), threading.Lock()
    for route in list(_ROUTES):
        route._reset_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _EncodeView:
    """What `self._tokenizer` is inside one encode call: lopt encodes, the real object does the rest.

    Settings changes go to the real object too (so its state is as without lopt) and are kept
    here, so lopt encodes with this call's settings even if another thread changes the real one.
    """

    __slots__ = ("_real", "_route", "_truncation", "_padding", "_split_special")

    def __init__(self, real: tokenizers.Tokenizer, route: _Route):
        set_slot = object.__setattr__
        set_slot(self, "_real", real)
        set_slot(self, "_route", route)
        truncation, padding = real.truncation, real.padding
        set_slot(self, "_truncation", None if truncation is None else _truncation_dict(**truncation))
        set_slot(self, "_padding", None if padding is None else _padding_dict(**padding))
        set_slot(self, "_split_special", bool(real.encode_special_tokens))

    @property
    def truncation(self):
        return None if self._truncation is None else dict(self._truncation)

    @property
    def padding(self):
        return None if self._padding is None else dict(self._padding)

    def enable_truncation(self, *args, **kwargs):
        self._real.enable_truncation(*args, **kwargs)
        object.__setattr__(self, "_truncation", _truncation_dict(*args, **kwargs))

    def no_truncation(self):
        self._real.no_truncation()
        object.__setattr__(self, "_truncation", None)

    def enable_padding(self, *args, **kwargs):
        self._real.enable_padding(*args, **kwargs)
        object.__setattr__(self, "_padding", _padding_dict(*args, **kwargs))

    def no_padding(self):
        self._real.no_padding()
        object.__setattr__(self, "_padding", None)

    @property
    def encode_special_tokens(self):
        return self._split_special

    @encode_special_tokens.setter
    def encode_special_tokens(self, value):
        self._real.encode_special_tokens = value
        object.__setattr__(self, "_split_special", bool(value))

    def encode_batch(self, inputs, add_special_tokens=True, is_pretokenized=False):
        settings = (self._truncation, self._padding, self._split_special)
        return self._route.encode_batch(self._real, inputs, add_special_tokens, is_pretokenized, settings)

    def encode(self, sequence, pair=None, is_pretokenized=False, add_special_tokens=True):
        inputs = [sequence if pair is None else (sequence, pair)]
        return self.encode_batch(inputs, add_special_tokens, is_pretokenized)[0]

    def __getattr__(self, name):
        return getattr(self._real, name)

    def __setattr__(self, name, value):
        # Our own properties (`encode_special_tokens`) keep this call's value; the rest is the
        # real object's (e.g. `post_processor`).
        if isinstance(getattr(type(self), name, None), property):
            object.__setattr__(self, name, value)
        else:
            setattr(self._real, name, value)


def _route_of(tok) -> _Route | None:
    """The instance's route, built on first use (after unpickling or for instances that
    transformers itself creates from an accelerated one, e.g. `train_new_from_iterator`)."""
    route = tok.__dict__.get(_ROUTE_ATTR)
    if route is None:
        real = tok.__dict__.get("_tokenizer")
        if not isinstance(real, tokenizers.Tokenizer):
            return None
        with _CLASSES_LOCK:
            route = tok.__dict__.get(_ROUTE_ATTR)
            if route is None:
                route = _Route(real, {})
                tok.__dict__[_ROUTE_ATTR] = route
    return route


def _wrap_encode(method):
    @functools.wraps(method)
    def encode_through_lopt(self, *args, **kwargs):
        active = _ACTIVE.get()
        if active is not None and active[0] is self:
            return method(self, *args, **kwargs)  # v4: _encode_plus calls _batch_encode_plus
        route = _route_of(self)
        if route is None:
            return method(self, *args, **kwargs)
        token = _ACTIVE.set((self, _EncodeView(self.__dict__["_tokenizer"], route)))
        try:
            return method(self, *args, **kwargs)
        finally:
            _ACTIVE.reset(token)

    return encode_through_lopt


def _wrap_add_tokens(method):
    @functools.wraps(method)
    def add_tokens_then_resync(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        finally:
            route = self.__dict__.get(_ROUTE_ATTR)
            if route is not None:
                route.stale = True

    return add_tokens_then_resync


def _accelerated_class(base: type) -> type:
    """The subclass of `base` that routes encoding to lopt (one per base class, cached)."""
    if getattr(base, "_lopt_base", None) is not None:
        return base
    with _CLASSES_LOCK:
        cls = _CLASSES.get(base)
        if cls is not None:
            return cls
        missing = object()
        default = getattr(base, "_tokenizer", missing)

        def backend(self):
            active = _ACTIVE.get()
            if active is not None and active[0] is self:
                return active[1]
            try:
                return self.__dict__["_tokenizer"]
            except KeyError:
                if default is missing:
                    raise AttributeError("_tokenizer") from None
                return default

        def set_backend(self, value):
            self.__dict__["_tokenizer"] = value

        def del_backend(self):
            del self.__dict__["_tokenizer"]

        namespace = {
            "__module__": base.__module__,
            "__qualname__": base.__qualname__,
            "__doc__": base.__doc__,
            "_lopt_base": base,
            "_tokenizer": property(backend, set_backend, del_backend),
            "__reduce__": _reduce_accelerated,
        }
        for name in _ENCODE_METHODS:
            method = getattr(base, name, None)
            if method is not None:
                namespace[name] = _wrap_encode(method)
        if hasattr(base, "_add_tokens"):
            namespace["_add_tokens"] = _wrap_add_tokens(base._add_tokens)
        cls = type(base.__name__, (base,), namespace)
        if "<locals>" not in base.__qualname__:
            # Findable by name (`_accelerated.<key>`), so pickle and dill store the class by
            # reference: `datasets` hashes a map function with dill, which would otherwise
            # serialize a generated class by value, closures and context variable included.
            cls.__module__ = __name__
            cls.__qualname__ = f"_accelerated.{_class_key(base)}"
        _CLASSES[base] = cls
        return cls


def _class_key(base: type) -> str:
    return f"{base.__module__}:{base.__qualname__}".replace(".", "|")


class _AcceleratedClasses:
    """`_accelerated.<key>`: the accelerated class of the base class that `<key>` names."""

    def __getattr__(self, key):
        module_name, sep, qualname = key.replace("|", ".").partition(":")
        if not sep:
            raise AttributeError(key)
        base = importlib.import_module(module_name)
        for part in qualname.split("."):
            base = getattr(base, part)
        return _accelerated_class(base)


_accelerated = _AcceleratedClasses()


def _reduce_accelerated(self):
    """Pickles (and copies) as the original class plus the route; the copy is accelerated again."""
    base = type(self)._lopt_base
    route = self.__dict__.get(_ROUTE_ATTR)
    if base.__reduce__ is not object.__reduce__:
        # The original class has its own recipe (vLLM's CachedTokenizer is a local class that
        # pickles as `get_cached_tokenizer(tokenizer)`): follow it, then accelerate the result.
        recipe = base.__reduce__(self)
        if isinstance(recipe, tuple) and len(recipe) == 2:
            return (_reaccelerate, (recipe[0], recipe[1], route))
    state = {key: value for key, value in self.__dict__.items() if key != _ROUTE_ATTR}
    return (_restore, (base, state, route))


def _restore(base, state, route):
    tok = base.__new__(base)
    tok.__dict__.update(state)
    tok.__class__ = _accelerated_class(base)
    if route is not None:
        tok.__dict__[_ROUTE_ATTR] = route
    return tok


def _reaccelerate(factory, args, route):
    tok = factory(*args)
    tok.__class__ = _accelerated_class(type(tok))
    if route is not None:
        tok.__dict__[_ROUTE_ATTR] = route
    return tok


def _fast_backend(tok) -> tokenizers.Tokenizer | None:
    real = getattr(tok, "__dict__", {}).get("_tokenizer")
    return real if isinstance(real, tokenizers.Tokenizer) else None


def is_accelerated(tok) -> bool:
    """Whether `tok` encodes through lopt (after `accelerate` or a patched `from_pretrained`)."""
    return getattr(type(tok), "_lopt_base", None) is not None


def accelerate(tok, **options):
    """Makes a transformers fast tokenizer encode with lopt; returns the same object.

    Every transformers call gives the same result as before (same `BatchEncoding`, same decoded
    text); encoding runs on all cores and releases the GIL. `tok._tokenizer` and
    `tok.backend_tokenizer` stay the real `tokenizers.Tokenizer` outside encoding, so vLLM's
    `DecodeStream.step(tok._tokenizer, id)` and anything else that needs the real object keep
    working. `options` go to `lopt.Tokenizer.from_str` (e.g. `threads=4`, `prefix_cache="256MiB"`). Calling it again
    rebuilds lopt's copy (needed only after editing `tok.backend_tokenizer` directly).

    # Errors
    `TypeError` when `tok` has no `tokenizers.Tokenizer` backend (a slow tokenizer);
    `lopt.LoptError` when lopt cannot load the tokenizer's JSON.
    """
    real = _fast_backend(tok)
    if real is None:
        raise TypeError(
            f"lopt.accelerate needs a transformers fast tokenizer (a tokenizers.Tokenizer in "
            f"`_tokenizer`); got {type(tok).__name__}"
        )
    route = _Route(real, options)
    tok.__class__ = _accelerated_class(type(tok))
    tok.__dict__[_ROUTE_ATTR] = route
    return tok


_patch_lock = threading.Lock()
_patch: tuple[type, Any] | None = None


def patch_transformers(**options):
    """Accelerates every fast tokenizer that `AutoTokenizer.from_pretrained` returns from now on.

    For servers that load their own tokenizer (SGLang, scripts). Replaces one attribute,
    `transformers.AutoTokenizer.from_pretrained`, in this process only; other ways of loading
    (`PreTrainedTokenizerFast.from_pretrained`, a model class's `from_pretrained`, a tokenizer
    object built by hand) are not touched, nor are slow tokenizers. A tokenizer that lopt cannot
    load is returned unaccelerated with a warning. Calling it twice is a no-op. Returns an object
    usable as a context manager that unpatches on exit.
    """
    global _patch
    from transformers import AutoTokenizer

    with _patch_lock:
        if _patch is None:
            original = AutoTokenizer.__dict__["from_pretrained"]
            load = original.__func__

            @functools.wraps(load)
            def from_pretrained(cls, *args, **kwargs):
                return _accelerate_or_warn(load(cls, *args, **kwargs), options)

            AutoTokenizer.from_pretrained = classmethod(from_pretrained)
            _patch = (AutoTokenizer, original)
    return _Unpatcher()


def unpatch_transformers() -> None:
    """Undoes `patch_transformers()`: `AutoTokenizer.from_pretrained` is the original object again.

    Tokenizers loaded while patched stay accelerated. A no-op when not patched.
    """
    global _patch
    with _patch_lock:
        if _patch is not None:
            owner, original = _patch
            owner.from_pretrained = original
            _patch = None


class _Unpatcher:
    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        unpatch_transformers()


def _accelerate_or_warn(tok, options):
    if _fast_backend(tok) is None:
        return tok
    from . import LoptError

    try:
        return accelerate(tok, **options)
    except LoptError as err:
        warnings.warn(f"lopt: {type(tok).__name__} left on tokenizers: {err}", stacklevel=3)
        return tok
