"""Fixtures for the lopt Python tests: the fixture tokenizers and corpus samples, found as the Rust
tests find them (``$LOPT_SHARED`` or ``../shared`` beside the repository, else
``fixtures/tokenizers``). Missing fixtures are skipped with a visible reason, never silently."""

from __future__ import annotations

import json
import os
import warnings
from functools import lru_cache
from pathlib import Path

import pytest
import tokenizers

import lopt

ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    return Path(os.environ.get("LOPT_SHARED") or ROOT.parent / "shared")


def fixture_dirs() -> "list[Path]":
    return [shared_dir() / "tokenizers", ROOT / "fixtures" / "tokenizers"]


@lru_cache(maxsize=None)
def fixture_paths() -> "dict[str, Path]":
    """Every fixture tokenizer present, by folder name."""
    found: "dict[str, Path]" = {}
    for directory in fixture_dirs():
        if not directory.is_dir():
            continue
        for sub in sorted(directory.iterdir()):
            path = sub / "tokenizer.json"
            if path.is_file():
                found.setdefault(sub.name, path)
    return found


FIXTURES = sorted(fixture_paths()) or ["<none>"]


@lru_cache(maxsize=None)
def corpus_samples(docs: int = 2, max_bytes: int = 24 * 1024) -> "list[tuple[str, str]]":
    """The first ``docs`` documents of every corpus, cut to ``max_bytes`` of UTF-8 (whole
    characters); a few generated texts when the corpora are absent."""
    samples = []
    directory = shared_dir() / "corpora"
    for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else []:
        with path.open(encoding="utf-8") as lines:
            for i, line in enumerate(lines):
                if i >= docs:
                    break
                text = json.loads(line)["text"]
                cut = text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
                samples.append((f"{path.stem}#{i}", cut))
    if not samples:
        samples = [(f"generated#{i}", generated_text(i, max_bytes)) for i in range(4)]
    return samples


def generated_text(seed: int, size: int) -> str:
    """Mixed-script text with the traps of parallel tokenization (spaces, digits, newlines)."""
    pieces = ["Hello, world!", "  indented", "\n\n", "数字 12345 and 3.14", "émigré naïve café",
              "😀 emoji 👍🏽", "\tTabs\tand  spaces ", "don't won't it's", "<|endoftext|>", "[CLS] x [SEP]"]
    out, i = [], seed
    while sum(len(p) for p in out) < size:
        out.append(pieces[i % len(pieces)])
        i = i * 7 + 3
    return " ".join(out)[:size]


def load_pair(name: str, threads: int = 2) -> "tuple[lopt.Tokenizer, tokenizers.Tokenizer]":
    if name not in fixture_paths():
        pytest.skip(f"fixture tokenizer {name} not found under {fixture_dirs()}")
    path = fixture_paths()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lopt.SequentialWarning)
        ours = lopt.Tokenizer.from_file(path, threads=threads)
    return ours, tokenizers.Tokenizer.from_file(str(path))


@pytest.fixture(scope="session")
def pairs():
    """Tokenizers by fixture name, loaded once per session: (lopt, HF)."""
    cache: "dict[str, tuple[lopt.Tokenizer, tokenizers.Tokenizer]]" = {}

    def get(name: str):
        if name not in cache:
            cache[name] = load_pair(name)
        return cache[name]

    return get


FIELDS = ("ids", "type_ids", "tokens", "offsets", "attention_mask", "special_tokens_mask", "word_ids",
          "sequence_ids", "n_sequences")


def assert_same_encoding(ours, theirs, where: str = "", helpers: bool = True) -> None:
    """Every field, and the overflowing parts, equal; with ``helpers``, also the char/word/token
    helpers at the first and last tokens, words and characters."""
    assert type(ours).__name__ == "Encoding"
    for field in FIELDS:
        a, b = getattr(ours, field), getattr(theirs, field)
        assert a == b, f"{where}: {field} differ at {first_difference(a, b)}"
    assert len(ours) == len(theirs), where
    assert len(ours.overflowing) == len(theirs.overflowing), f"{where}: overflowing count"
    for k, (a, b) in enumerate(zip(ours.overflowing, theirs.overflowing)):
        assert_same_encoding(a, b, f"{where} overflowing[{k}]", helpers)
    if not helpers:
        return
    n = len(theirs)
    for i in list(range(min(n, 64))) + list(range(max(64, n - 64), n + 2)):
        for helper in ("token_to_chars", "token_to_word", "token_to_sequence"):
            assert getattr(ours, helper)(i) == getattr(theirs, helper)(i), f"{where}: {helper}({i})"
    words = [w for w in theirs.word_ids if w is not None]
    for w in sorted(set(words[:32] + words[-32:])) + [max(words, default=0) + 1]:
        for seq in range(theirs.n_sequences):
            assert ours.word_to_tokens(w, seq) == theirs.word_to_tokens(w, seq), f"{where}: word_to_tokens({w})"
            assert ours.word_to_chars(w, seq) == theirs.word_to_chars(w, seq), f"{where}: word_to_chars({w})"
    ends = [e for _, e in theirs.offsets]
    for c in sorted(set(range(0, 40)) | set(range(max(0, max(ends, default=0) - 40), max(ends, default=0) + 2))):
        for seq in range(theirs.n_sequences):
            assert ours.char_to_token(c, seq) == theirs.char_to_token(c, seq), f"{where}: char_to_token({c})"
            assert ours.char_to_word(c, seq) == theirs.char_to_word(c, seq), f"{where}: char_to_word({c})"


def first_difference(a, b):
    if not isinstance(a, list):
        return (a, b)
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i, x, y
    return min(len(a), len(b)), len(a), len(b)
