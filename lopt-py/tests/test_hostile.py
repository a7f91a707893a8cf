"""Hostile tokenizer files and settings end in lopt.LoptError (a ValueError, caught by
``except Exception``), never in HF's PanicException (a BaseException) or a dead process."""

from __future__ import annotations

import json
import warnings

import pytest

import lopt


def word_level(pre_tokenizer=None, normalizer=None, **extra) -> dict:
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1, "[UNK]": 2}, "unk_token": "[UNK]"},
    }
    tokenizer.update(extra)
    return tokenizer


def load(tokenizer) -> lopt.Tokenizer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lopt.SequentialWarning)
        return lopt.Tokenizer.from_str(tokenizer if isinstance(tokenizer, str) else json.dumps(tokenizer))


BACKTRACKING = "a" * 5000 + "!"
SPLIT = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False}
REPLACE = {"type": "Replace", "pattern": {"Regex": "(a+)+$"}, "content": "b"}


@pytest.mark.parametrize("tokenizer", [word_level(SPLIT), word_level({"type": "WhitespaceSplit"}, REPLACE)],
                         ids=["split", "replace"])
def test_backtracking_regex_is_a_lopt_error(tokenizer):
    tok = load(tokenizer)
    with pytest.raises(lopt.LoptError):
        tok.encode(BACKTRACKING)
    with pytest.raises(lopt.LoptError):
        tok.encode_batch(["a", BACKTRACKING])
    with pytest.raises(lopt.LoptError):  # a pair goes to the inner HF tokenizer, which panics
        tok.encode(BACKTRACKING, "a")
    with pytest.raises(lopt.LoptError):
        tok.encode_ids(BACKTRACKING)
    assert tok.encode("a b").ids == tok.backend.encode("a b").ids  # still usable


def padding(strategy, multiple=None) -> dict:
    return {"strategy": strategy, "direction": "Right", "pad_to_multiple_of": multiple, "pad_id": 0,
            "pad_type_id": 0, "pad_token": "a"}


@pytest.mark.parametrize("setting", [padding({"Fixed": 10**12}), padding("BatchLongest", 2**40)],
                         ids=["fixed", "multiple"])
def test_huge_padding_in_the_file_is_refused(setting):
    with pytest.raises(lopt.LoptError, match="padding"):
        load(word_level({"type": "WhitespaceSplit"}, padding=setting))


def test_huge_padding_settings_are_refused():
    tok = load(word_level({"type": "WhitespaceSplit"}))
    with pytest.raises(lopt.LoptError, match="padding length"):
        tok.enable_padding(length=10**12)
    with pytest.raises(lopt.LoptError, match="pad_to_multiple_of"):
        tok.enable_padding(pad_to_multiple_of=10**12)
    assert tok.padding is None
    enc = tok.encode("a b a")
    with pytest.raises(lopt.LoptError):
        enc.pad(10**12)
    tok.enable_padding(length=lopt.MAX_PADDING_LENGTH // 1024)
    assert len(tok.encode("a")) == lopt.MAX_PADDING_LENGTH // 1024


def hf_or_panic(tok, *args):
    try:
        return tok.backend.encode(*args).ids
    except BaseException as err:  # noqa: BLE001 - PanicException is a BaseException
        if type(err).__name__ != "PanicException":
            raise
        return None


def test_stride_not_below_max_length():
    """HF accepts these settings and panics on texts whose truncation needs the stride: lopt
    refuses them at load or raises LoptError on such a text, and agrees with HF elsewhere."""
    texts = ["a", "a b a b a b a b", "ab ab ab", "a b"]
    for max_length, stride in [(4, 4), (4, 9), (1, 1), (2, 2)]:
        truncation = {"direction": "Right", "max_length": max_length, "strategy": "LongestFirst", "stride": stride}
        try:
            tok = load(word_level({"type": "WhitespaceSplit"}, truncation=truncation))
        except lopt.LoptError as err:
            assert "stride" in str(err)
            continue
        for text in texts:
            want = hf_or_panic(tok, text)
            if want is None:
                with pytest.raises(lopt.LoptError):
                    tok.encode(text)
            else:
                assert tok.encode(text).ids == want
    tok = load(word_level({"type": "WhitespaceSplit"}))
    with pytest.raises(ValueError, match="stride"):  # HF refuses it when it is set, and so does lopt
        tok.enable_truncation(3, stride=5)
    assert tok.truncation is None and tok.encode("a b a b").ids == [0, 1, 0, 1]


def test_zero_truncation_equals_tokenizers():
    truncation = {"direction": "Right", "max_length": 0, "strategy": "LongestFirst", "stride": 0}
    tok = load(word_level({"type": "WhitespaceSplit"}, truncation=truncation))
    got, want = tok.encode("a b a"), tok.backend.encode("a b a")
    assert (got.ids, [o.ids for o in got.overflowing]) == (want.ids, [o.ids for o in want.overflowing])


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(word_level())[:100],
        "[" * 100000 + "]" * 100000,
        json.dumps(word_level(model={"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]})),
        json.dumps(word_level({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated",
                               "invert": False})),
        json.dumps(word_level(model={"type": "Quantum", "vocab": {}})),
        "not json at all",
        "",
    ],
    ids=["truncated", "deep", "merges-oov", "bad-regex", "unknown-model", "not-json", "empty"],
)
def test_broken_files_are_lopt_errors(text):
    with pytest.raises(lopt.LoptError):
        load(text)
    with pytest.raises(lopt.LoptError):
        lopt.Tokenizer.from_buffer(text.encode())


def test_empty_added_token_equals_tokenizers():
    added = [{"id": 3, "content": "", "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}]
    try:
        tok = load(word_level({"type": "WhitespaceSplit"}, added_tokens=added))
    except lopt.LoptError:
        return
    for text in ["a b", "", "ab ba"]:
        assert tok.encode(text).ids == tok.backend.encode(text).ids


def test_decode_of_unknown_ids_is_not_a_panic():
    tok = load(word_level({"type": "WhitespaceSplit"}))
    try:
        assert isinstance(tok.decode([0, 1, 10**6]), str)
    except lopt.LoptError:
        pass
