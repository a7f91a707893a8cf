"""``prefix_cache=``: the Rust builder's prefix cache from Python. Outputs equal ``tokenizers``
over a growing conversation (each turn's text is the previous one plus a new turn, long enough to
be encoded in parallel, so the cache is used); the counters move; copies start empty; bad sizes
are ``ValueError``s."""

from __future__ import annotations

import copy
import pickle
import warnings

import pytest
import tokenizers

import lopt
from conftest import assert_same_encoding, corpus_samples, fixture_dirs, fixture_paths

# A byte-level BPE and a WordPiece tokenizer (both cut at pre-token boundaries) and a
# SentencePiece-style one (cuts inside words, segments after a cut without the prefix `▁`): all
# three use the cache.
NAMES = ["qwen3", "bert-base-uncased", "llama2"]


def load(name: str, **options) -> "tuple[lopt.Tokenizer, tokenizers.Tokenizer]":
    path = fixture_paths().get(name)
    if path is None:
        pytest.skip(f"fixture tokenizer {name} not found under {fixture_dirs()}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lopt.SequentialWarning)
        ours = lopt.Tokenizer.from_file(path, threads=2, **options)
    return ours, tokenizers.Tokenizer.from_file(str(path))


def conversation(turns: int) -> "list[str]":
    """``turns`` texts, each the previous one plus a turn; the first is over 16 KiB (the parallel
    threshold, below which the cache is not used)."""
    pieces = [text for _, text in corpus_samples()]
    base = " ".join(pieces)[:20_000]
    texts = [base]
    for i in range(1, turns):
        turn = pieces[i % len(pieces)][: 300 + 97 * i]
        texts.append(f"{texts[-1]}\n\nUser {i}: {turn}\nAssistant: ok.")
    return texts


@pytest.mark.parametrize("name", NAMES)
def test_growing_conversation_equals_tokenizers(name):
    ours, theirs = load(name, prefix_cache="64MiB")
    stats = ours.prefix_cache_stats()
    assert stats is not None and stats["capacity"] == 64 << 20 and stats["hits"] == 0
    texts = conversation(6)
    for i, text in enumerate(texts):
        for special in (True, False):
            want = theirs.encode(text, add_special_tokens=special)
            # Ids-only first, so that it meets the previous turn's entry rather than this text's.
            ids = ours.encode_ids(text, add_special_tokens=special)
            assert ids.tolist() == want.ids, f"{name} turn {i} special={special}: encode_ids"
            assert_same_encoding(
                ours.encode(text, add_special_tokens=special),
                want,
                f"{name} turn {i} special={special}",
                helpers=False,
            )
    # Settings and batches go through the cache too.
    for tok in (ours, theirs):
        tok.enable_truncation(4096, stride=64)
        tok.enable_padding(pad_to_multiple_of=8)
    try:
        for i, (a, b) in enumerate(zip(ours.encode_batch(texts[1:]), theirs.encode_batch(texts[1:]))):
            assert_same_encoding(a, b, f"{name} batch item {i}", helpers=False)
    finally:
        for tok in (ours, theirs):
            tok.no_truncation()
            tok.no_padding()
    stats = ours.prefix_cache_stats()
    assert stats["hits"] > 0 and stats["bytes_reused"] > 0, stats
    assert stats["entries"] > 0 and 0 < stats["bytes_held"] <= stats["capacity"], stats


def test_copies_start_with_an_empty_cache():
    ours, _ = load("qwen3", prefix_cache=1 << 26)
    texts = conversation(2)
    for text in texts:
        ours.encode(text)
    assert ours.prefix_cache_stats()["entries"] > 0
    for clone in (pickle.loads(pickle.dumps(ours)), copy.deepcopy(ours), copy.copy(ours)):
        assert clone.prefix_cache == ours.prefix_cache == 1 << 26
        assert clone.prefix_cache_stats() == {
            "hits": 0, "misses": 0, "bytes_reused": 0, "bytes_encoded": 0, "bytes_held": 0, "entries": 0,
            "capacity": 1 << 26,
        }
        assert clone.encode(texts[1]).ids == ours.encode(texts[1]).ids
        assert clone.prefix_cache_stats()["misses"] == 1


def test_off_by_default_and_every_constructor_takes_it(tmp_path):
    ours, theirs = load("bert-base-uncased")
    assert ours.prefix_cache == 0 and ours.prefix_cache_stats() is None
    json = theirs.to_str()
    (tmp_path / "tokenizer.json").write_text(json)
    built = [
        lopt.Tokenizer.from_str(json, prefix_cache="1MiB"),
        lopt.Tokenizer.from_buffer(json.encode(), prefix_cache="1 MB"),
        lopt.Tokenizer.from_file(tmp_path / "tokenizer.json", prefix_cache=1 << 20),
        lopt.Tokenizer.from_pretrained(str(tmp_path), prefix_cache="1m"),
        lopt.Tokenizer(tokenizers.Tokenizer.from_str(json), prefix_cache="1024KiB"),
        lopt.Tokenizer.from_str(json, prefix_cache=None),
    ]
    assert [t.prefix_cache for t in built] == [1 << 20, 10**6, 1 << 20, 1 << 20, 1 << 20, 0]
    assert built[-1].prefix_cache_stats() is None


@pytest.mark.parametrize("bad", ["12 parsecs", "MiB", "", "-1", "1.5GiB", -1, 1.5, True, [1]])
def test_bad_sizes_are_value_errors(bad):
    _, theirs = load("bert-base-uncased")
    with pytest.raises(ValueError):
        lopt.Tokenizer.from_str(theirs.to_str(), prefix_cache=bad)
    with pytest.raises(lopt.LoptError):
        lopt.Tokenizer.from_str(theirs.to_str(), prefix_cache=bad)


def test_accelerate_takes_prefix_cache():
    transformers = pytest.importorskip("transformers")
    from fixture_paths import tokenizer_dir

    folder = str(tokenizer_dir("qwen3"))
    stock = transformers.AutoTokenizer.from_pretrained(folder)
    fast = lopt.accelerate(transformers.AutoTokenizer.from_pretrained(folder), prefix_cache="64MiB")
    for text in conversation(3):
        assert fast(text)["input_ids"] == stock(text)["input_ids"]
    engine = fast.__dict__["_lopt_route"].engine
    assert engine.prefix_cache_stats()["hits"] > 0
    with pytest.raises(ValueError):
        lopt.accelerate(transformers.AutoTokenizer.from_pretrained(folder), prefix_cache="lots")
