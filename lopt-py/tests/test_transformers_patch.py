"""`lopt.patch_transformers()` / `unpatch_transformers()`: scope of the patch and a clean undo."""

import warnings

import pytest
from fixture_paths import tokenizer_dir

import lopt
from lopt import _transformers

transformers = pytest.importorskip("transformers")
from transformers import AutoTokenizer, PreTrainedTokenizerFast  # noqa: E402

NAME = "bert-base-uncased"  # loads in a fraction of a second


def class_dicts(*classes):
    """Each class's own attributes, by identity: what a leak or a stray attribute would change."""
    return {cls: {key: id(value) for key, value in vars(cls).items()} for cls in classes}


def path():
    return str(tokenizer_dir(NAME))


@pytest.fixture(autouse=True)
def always_unpatched():
    yield
    lopt.unpatch_transformers()


def test_patch_accelerates_auto_loads_and_unpatch_restores_exactly():
    stock = AutoTokenizer.from_pretrained(path())
    watched = (AutoTokenizer, type(stock), PreTrainedTokenizerFast, *type(stock).__mro__[1:-1])
    before = class_dicts(*watched)
    original = AutoTokenizer.__dict__["from_pretrained"]

    lopt.patch_transformers()
    lopt.patch_transformers()  # idempotent
    patched = AutoTokenizer.from_pretrained(path())
    assert lopt.is_accelerated(patched) and not lopt.is_accelerated(stock)
    assert patched("Hello there, world!").encodings[0].__class__ is lopt.Encoding
    assert patched("Hello there, world!") == stock("Hello there, world!")

    lopt.unpatch_transformers()
    lopt.unpatch_transformers()  # idempotent
    assert AutoTokenizer.__dict__["from_pretrained"] is original
    assert class_dicts(*watched) == before
    assert not lopt.is_accelerated(AutoTokenizer.from_pretrained(path()))
    # Loaded while patched: stays accelerated (documented).
    assert lopt.is_accelerated(patched)


def test_patch_does_not_reach_other_loads():
    with lopt.patch_transformers():
        direct = PreTrainedTokenizerFast.from_pretrained(path())
        by_class = type(AutoTokenizer.from_pretrained(path())).__mro__[1].from_pretrained(path())
        assert not lopt.is_accelerated(direct)
        assert not lopt.is_accelerated(by_class)
    assert AutoTokenizer.__dict__["from_pretrained"].__func__.__module__.startswith("transformers")


def test_context_manager_unpatches():
    with lopt.patch_transformers():
        assert lopt.is_accelerated(AutoTokenizer.from_pretrained(path()))
    assert not lopt.is_accelerated(AutoTokenizer.from_pretrained(path()))


def test_tokenizer_lopt_cannot_load_stays_stock_with_warning(monkeypatch):
    def refuse(self, source):
        raise lopt.LoptError("refused for this test")

    monkeypatch.setattr(_transformers._Route, "rebuild", refuse)
    with lopt.patch_transformers(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tok = AutoTokenizer.from_pretrained(path())
    assert not lopt.is_accelerated(tok)
    assert any("refused for this test" in str(w.message) for w in caught)
    assert tok("still works")["input_ids"]
