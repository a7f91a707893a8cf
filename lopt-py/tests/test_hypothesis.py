"""Generated texts (hypothesis) on every fixture tokenizer: lopt.Tokenizer equals
tokenizers.Tokenizer field for field, singly and in batches, with and without truncation, and the
character offsets (converted from lopt's byte offsets) equal HF's on any mix of scripts."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, assert_same_encoding

# Characters where tokenizers disagree most: spaces of every kind, newlines, digits,
# punctuation, combining marks, multi-byte scripts, emoji with modifiers and joiners, and pieces
# of special tokens.
ALPHABET = st.sampled_from(
    list(" \t\n\r\x0b\x0c\u00a0\u3000 ")
    + list("aeiouAEIOU0123456789.,;:!?'\"()[]{}<>|/\\-_=+*&^%$#@~`")
    + list("éèçñüößø\u0301\u0308\u200d\ufe0f")
    + list("数字中文日本語한국어Привет世界مرحباשלוםनमस्ते")
    + ["😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "<|endoftext|>", "[CLS]", "<s>", "</s>", "<|begin_of_text|>", "  ", "\n\n"]
)
TEXTS = st.lists(ALPHABET, max_size=80).map("".join)

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("name", FIXTURES)
@SETTINGS
@given(text=TEXTS, special=st.booleans())
def test_generated_text_equals_tokenizers(pairs, name, text, special):
    ours, theirs = pairs(name)
    assert_same_encoding(
        ours.encode(text, add_special_tokens=special), theirs.encode(text, add_special_tokens=special), repr(text)
    )


@pytest.mark.parametrize("name", FIXTURES)
@SETTINGS
@given(texts=st.lists(TEXTS, min_size=1, max_size=4), max_length=st.integers(1, 12), stride=st.integers(0, 3),
       left=st.booleans())
def test_generated_batch_with_truncation_equals_tokenizers(pairs, name, texts, max_length, stride, left):
    ours, theirs = pairs(name)
    truncation = dict(max_length=max_length + stride + 3, stride=stride, direction="left" if left else "right")
    try:
        for tok in (ours, theirs):
            tok.enable_truncation(**truncation)
            tok.enable_padding(pad_to_multiple_of=4)
        for i, (a, b) in enumerate(zip(ours.encode_batch(texts), theirs.encode_batch(texts))):
            assert_same_encoding(a, b, f"{texts!r} item {i}", helpers=False)
    finally:
        for tok in (ours, theirs):
            tok.no_truncation()
            tok.no_padding()
