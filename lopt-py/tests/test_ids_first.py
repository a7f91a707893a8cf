"""Ids-first encodings: `lopt.Tokenizer.encode` and `encode_batch` without truncation or padding
encode ids only, and the first read of anything but `ids`, `len`, `attention_mask`,
`n_sequences` and `overflowing` encodes the text again in full. Every field still equals
`tokenizers`', and a tokenizer whose encodings needed the full result encodes in full from then
on."""

from __future__ import annotations

import os
import pickle

import pytest

from conftest import FIXTURES, assert_same_encoding, corpus_samples, fixture_paths, load_pair
from test_concurrency import long_text, wait_for

SAMPLES = [
    "",
    "Hello, world!",
    "héllo wörld — ünïcödé “quotes” …",
    "数字 12345 和中文混合的文本。",
    "<|endoftext|> [CLS] [SEP] <s></s> <|begin_of_text|>",
]

# Fixtures whose encodings must come ids-first (a native engine, no truncation or padding in
# their tokenizer.json).
IDS_FIRST = ("qwen3", "llama3_1", "bert-base-uncased")


def samples() -> "list[str]":
    return SAMPLES + [text for _, text in corpus_samples()] + [long_text(40_000)]


@pytest.mark.parametrize("name", FIXTURES)
def test_ids_first_encodings_equal_tokenizers(name):
    ours, theirs = load_pair(name)  # a fresh one: none of its encodings needed the full result
    texts = samples()
    # Everything is encoded before anything is compared: the first full read turns the mode off.
    runs = [
        (special, [ours.encode(t, add_special_tokens=special) for t in texts],
         ours.encode_batch(texts, add_special_tokens=special))
        for special in (True, False)
    ]
    deferred = 0
    for special, singles, batch in runs:
        for i, (text, one, in_batch) in enumerate(zip(texts, singles, batch)):
            where = f"{name} text {i} special={special}"
            expected = theirs.encode(text, add_special_tokens=special)
            if one._ids_first:
                deferred += 1
                assert one.ids == expected.ids, where
                assert len(one) == len(expected), where
                assert one.attention_mask == expected.attention_mask, where
                assert one.n_sequences == expected.n_sequences, where
                assert one.overflowing == [] == expected.overflowing, where
                assert one._ids_first, f"{where}: those reads need no full encode"
            assert_same_encoding(one, expected, where)
            assert not one._ids_first, where
            assert_same_encoding(in_batch, expected, f"{where} (batch)")
    if name in IDS_FIRST:
        assert deferred == 2 * len(texts), f"{name}: every single encode was ids-first"
        assert not ours.encode(texts[1])._ids_first, "the full mode after a full read"


@pytest.mark.parametrize("name", [n for n in IDS_FIRST if n in fixture_paths()] or ["<none>"])
def test_ids_first_encodings_change_pickle_and_merge_as_tokenizers(name):
    ours, theirs = load_pair(name)
    text = "Hello, world! 数字 12345 " * 50
    made = [ours.encode(text) for _ in range(4)]
    assert all(e._ids_first for e in made)
    expected = theirs.encode(text)
    padded, truncated, pickled, merged = made
    assert pickle.loads(pickle.dumps(pickled)).ids == expected.ids
    padded.pad(len(expected) + 7, pad_id=3, pad_token="[X]")
    expected_padded = theirs.encode(text)
    expected_padded.pad(len(expected) + 7, pad_id=3, pad_token="[X]")
    assert_same_encoding(padded, expected_padded, f"{name} pad")
    truncated.truncate(17, stride=3)
    expected_truncated = theirs.encode(text)
    expected_truncated.truncate(17, stride=3)
    assert_same_encoding(truncated, expected_truncated, f"{name} truncate")
    both = type(merged).merge([merged, ours.encode(text)], True)
    assert both.ids == expected.ids * 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_an_ids_first_encoding_read_in_a_forked_child_equals_tokenizers():
    # The parent's pool has no threads in the child: the full encode must not wait for them.
    name = next((n for n in IDS_FIRST if n in fixture_paths()), FIXTURES[0])
    ours, theirs = load_pair(name, threads=2)
    text = long_text(100_000)  # over the parallel threshold
    encoding = ours.encode(text)
    expected = theirs.encode(text)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            ok = encoding.offsets == expected.offsets and encoding.word_ids == expected.word_ids
            code = 0 if ok and encoding.ids == expected.ids else 1
        finally:
            os._exit(code)
    assert wait_for(pid) == 0
    assert_same_encoding(encoding, expected, f"{name} in the parent", helpers=False)
