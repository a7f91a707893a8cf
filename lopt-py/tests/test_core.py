"""lopt.Tokenizer against tokenizers.Tokenizer on every fixture tokenizer: every Encoding field and
helper, singles, batches, pairs, pre-tokenized input, truncation and padding variants, numpy."""

from __future__ import annotations

import copy
import pickle
import types

import numpy as np
import pytest
import tokenizers

import lopt
from conftest import FIXTURES, assert_same_encoding, corpus_samples, fixture_paths, generated_text

SHORT = [
    "",
    " ",
    "Hello, world!",
    "  leading and trailing spaces  ",
    "héllo wörld — ünïcödé “quotes” …",
    "数字 12345 和中文混合的文本。",
    "emoji 😀👍🏽 and ZWJ 👨‍👩‍👧 sequences",
    "line\nbreaks\r\n\r\nand\ttabs\t",
    "<|endoftext|> [CLS] [SEP] <s></s> <|begin_of_text|>",
    "don't won't it's I'm we'll",
    "a" * 3000 + " " + "b" * 10,
]


def texts():
    return SHORT + [text for _, text in corpus_samples()]


@pytest.mark.parametrize("name", FIXTURES)
def test_encode_equals_tokenizers(pairs, name):
    ours, theirs = pairs(name)
    for i, text in enumerate(texts()):
        for special in (True, False):
            assert_same_encoding(
                ours.encode(text, add_special_tokens=special),
                theirs.encode(text, add_special_tokens=special),
                f"{name} text {i} special={special}",
            )


@pytest.mark.parametrize("name", FIXTURES)
def test_encode_batch_equals_tokenizers(pairs, name):
    ours, theirs = pairs(name)
    batch = texts()
    got, want = ours.encode_batch(batch), theirs.encode_batch(batch)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert_same_encoding(a, b, f"{name} batch item {i}")
    got = ours.encode_batch(tuple(batch[:3]), add_special_tokens=False)
    want = theirs.encode_batch(tuple(batch[:3]), add_special_tokens=False)
    for i, (a, b) in enumerate(zip(got, want)):
        assert_same_encoding(a, b, f"{name} tuple batch item {i}")


@pytest.mark.parametrize("name", FIXTURES)
def test_pairs_and_pretokenized_equal_tokenizers(pairs, name):
    ours, theirs = pairs(name)
    a, b = "The first sequence, héllo.", "And its pair: 数字 😀"
    assert_same_encoding(ours.encode(a, b), theirs.encode(a, b), f"{name} pair")
    words = ["Pre", "tokenized", "wörds", "数字"]
    assert_same_encoding(
        ours.encode(words, is_pretokenized=True), theirs.encode(words, is_pretokenized=True), f"{name} pretok"
    )
    mixed = ["single", (a, b), "another single"]
    for i, (x, y) in enumerate(zip(ours.encode_batch(mixed), theirs.encode_batch(mixed))):
        assert_same_encoding(x, y, f"{name} mixed batch {i}")
    pretok = [words, (words, words[:2])]
    got = ours.encode_batch(pretok, is_pretokenized=True)
    for i, (x, y) in enumerate(zip(got, theirs.encode_batch(pretok, is_pretokenized=True))):
        assert_same_encoding(x, y, f"{name} pretokenized batch {i}")


TRUNCATIONS = [
    dict(max_length=1),
    dict(max_length=7, stride=2),
    dict(max_length=16, stride=3, direction="left"),
    dict(max_length=64, strategy="only_first"),
    dict(max_length=33, stride=5, strategy="longest_first", direction="right"),
]
PADDINGS = [
    dict(),
    dict(length=96, direction="left", pad_id=3, pad_token="<pad>"),
    dict(pad_to_multiple_of=8, pad_type_id=1),
]


def both(ours, theirs, method, **kwargs):
    getattr(ours, method)(**kwargs)
    getattr(theirs, method)(**kwargs)


@pytest.mark.parametrize("name", FIXTURES)
def test_truncation_and_padding_equal_tokenizers(pairs, name):
    ours, theirs = pairs(name)
    batch = [text[:3000] for text in texts()[:8]] + ["short", ""]
    try:
        for truncation in TRUNCATIONS + [None]:
            for padding in PADDINGS + [None]:
                check_settings(ours, theirs, batch, truncation, padding, f"{name} truncation={truncation} padding={padding}")
    finally:
        for tok in (ours, theirs):
            tok.no_truncation()
            tok.no_padding()


def check_settings(ours, theirs, batch, truncation, padding, where):
    if truncation is None:
        both(ours, theirs, "no_truncation")
    else:
        both(ours, theirs, "enable_truncation", **truncation)
    if padding is None:
        both(ours, theirs, "no_padding")
    else:
        both(ours, theirs, "enable_padding", **padding)
    assert ours.truncation == theirs.truncation
    assert ours.padding == theirs.padding
    for special in (True, False):
        try:
            want = theirs.encode_batch(batch, add_special_tokens=special)
        except BaseException as err:  # noqa: BLE001 - HF panics on some settings
            with pytest.raises(lopt.LoptError):
                ours.encode_batch(batch, add_special_tokens=special)
            assert "max_len" in str(err) or "stride" in str(err), where
            continue
        got = ours.encode_batch(batch, add_special_tokens=special)
        for i, (a, b) in enumerate(zip(got, want)):
            assert_same_encoding(a, b, f"{where} special={special} item {i}", helpers=i == 0)
        assert_same_encoding(
            ours.encode(batch[0], add_special_tokens=special),
            theirs.encode(batch[0], add_special_tokens=special),
            f"{where} single",
            helpers=False,
        )
        assert_same_encoding(
            ours.encode(batch[1], batch[2], add_special_tokens=special),
            theirs.encode(batch[1], batch[2], add_special_tokens=special),
            f"{where} pair",
        )


def test_settings_dicts_round_trip(pairs):
    ours, _ = pairs(FIXTURES[0])
    clone = copy.deepcopy(ours)
    assert clone.truncation is None and clone.padding is None
    clone.enable_truncation(10, stride=2, strategy="only_first", direction="left")
    clone.enable_padding(length=12, pad_to_multiple_of=4, pad_id=1, pad_token="<p>", pad_type_id=2, direction="left")
    t, p = clone.truncation, clone.padding
    clone.no_truncation()
    clone.no_padding()
    assert clone.truncation is None and clone.padding is None
    clone.enable_truncation(**t)
    clone.enable_padding(**p)
    assert clone.truncation == t and clone.padding == p
    t["max_length"] = 99  # a copy: changing it changes nothing
    assert clone.truncation["max_length"] == 10


@pytest.mark.parametrize("name", FIXTURES)
def test_numpy_paths_equal_ids(pairs, name):
    ours, theirs = pairs(name)
    batch = texts()
    for text in batch[:4] + batch[-2:]:
        ids = ours.encode_ids(text)
        assert ids.dtype == np.uint32
        assert ids.tolist() == theirs.encode(text).ids
    ids, rows = ours.encode_batch_ids(batch, add_special_tokens=False)
    assert ids.dtype == np.uint32 and rows.dtype == np.int64 and len(rows) == len(batch) + 1
    want = theirs.encode_batch(batch, add_special_tokens=False)
    for i, encoding in enumerate(want):
        assert ids[rows[i] : rows[i + 1]].tolist() == encoding.ids
    ids[:1] = 7  # writable, owned by the caller


@pytest.mark.parametrize("name", FIXTURES[:2])
def test_long_encodings_ids_are_shared_ints_of_the_same_values(pairs, name):
    """`.ids` of an encoding of at least 16,384 tokens comes from the shared table of `int`s
    (`lopt-py/src/ints.rs`): the same values as HF's, reading it twice gives the same objects, and
    the list is the caller's own (changing it changes no later read)."""
    ours, theirs = pairs(name)
    text = generated_text(11, 120_000)
    encoding = ours.encode(text)
    first, second = encoding.ids, encoding.ids
    assert len(first) >= 16_384, len(first)
    assert first == theirs.encode(text).ids
    assert all(a is b for a, b in zip(first[:1000], second[:1000]))
    first[0] = -1
    assert encoding.ids[0] == second[0] != -1


@pytest.mark.parametrize("name", FIXTURES)
def test_ids_only_takes_add_special_tokens(pairs, name):
    """Ids-only calls with and without special tokens, through the tokenizer (its prebuilt
    options) and through the native core with no options (the tokenizer.json's own settings,
    `Tokenizer::encode_ids_default`, nothing built per call)."""
    ours, theirs = pairs(name)
    batch = texts()
    core = ours._live()
    for special in (True, False):
        for text in batch[:4] + batch[-2:]:
            want = theirs.encode(text, add_special_tokens=special).ids
            assert ours.encode_ids(text, add_special_tokens=special).tolist() == want, (text[:40], special)
            assert np.frombuffer(core.encode_ids(text, special), dtype=np.uint32).tolist() == want
        ids, rows = core.encode_batch_ids(batch, special)
        ids, rows = np.frombuffer(ids, dtype=np.uint32), np.frombuffer(rows, dtype=np.int64)
        for i, encoding in enumerate(theirs.encode_batch(batch, add_special_tokens=special)):
            assert ids[rows[i] : rows[i + 1]].tolist() == encoding.ids, (i, special)


def test_encoding_methods_equal_tokenizers(pairs):
    ours, theirs = pairs(FIXTURES[0])
    text = "Hello there, wörld! " * 20
    for method, kwargs in [
        ("pad", dict(length=300, direction="left", pad_id=5, pad_token="<p>")),
        ("pad", dict(length=300)),
        ("truncate", dict(max_length=20, stride=3)),
        ("truncate", dict(max_length=20, direction="left")),
    ]:
        a, b = ours.encode(text), theirs.encode(text)
        getattr(a, method)(**kwargs)
        getattr(b, method)(**kwargs)
        assert_same_encoding(a, b, f"{method} {kwargs}")
    # HF keeps sequence ranges in a hash map and searches it in its (random) order, so after
    # set_sequence_id only the order-free fields are comparable.
    a, b = ours.encode(text), theirs.encode(text)
    a.set_sequence_id(1)
    b.set_sequence_id(1)
    assert (a.n_sequences, a.ids) == (b.n_sequences, b.ids)
    parts = [ours.encode("one two"), ours.encode("three")]
    hf_parts = [theirs.encode("one two"), theirs.encode("three")]
    for growing in (True, False):
        assert_same_encoding(lopt.Encoding.merge(parts, growing), tokenizers.Encoding.merge(hf_parts, growing))
    with pytest.raises(lopt.LoptError):
        ours.encode(text).truncate(2, stride=5)
    with pytest.raises(ValueError):
        ours.encode(text).pad(10, direction="up")
    assert repr(ours.encode("abc")) == repr(theirs.encode("abc"))
    with pytest.warns(DeprecationWarning):
        assert ours.encode("abc").words == theirs.encode("abc").word_ids


def test_encoding_pickles(pairs):
    ours, theirs = pairs(FIXTURES[0])
    text = generated_text(3, 2000)
    encoding = ours.encode(text)
    for clone in (pickle.loads(pickle.dumps(encoding)), copy.deepcopy(encoding)):
        assert_same_encoding(clone, theirs.encode(text), "pickled encoding")
    hf = tokenizers.Encoding()
    hf.__setstate__(encoding.__getstate__())
    assert_same_encoding(encoding, hf, "HF from lopt state")


def test_tokenizer_pickles_and_deep_copies(pairs):
    ours, theirs = pairs(FIXTURES[0])
    ours = copy.deepcopy(ours)
    ours.enable_truncation(5)
    ours.add_tokens(["zzqqxx"])
    text = "a zzqqxx b " * 10
    for clone in (pickle.loads(pickle.dumps(ours)), copy.deepcopy(ours), copy.copy(ours)):
        assert isinstance(clone, lopt.Tokenizer)
        assert clone.truncation == ours.truncation
        assert clone.encode(text).ids == ours.encode(text).ids
        clone.no_truncation()
        assert ours.truncation is not None  # independent objects
    assert ours.__getstate__() == ours.backend.__getstate__()


def test_add_tokens_rebuilds(pairs):
    ours, theirs = pairs(FIXTURES[0])
    ours, theirs = copy.deepcopy(ours), tokenizers.Tokenizer.from_str(theirs.to_str())
    text = "say qqxyzzy and <<special>> now, qqxyzzy!"
    assert ours.add_tokens(["qqxyzzy"]) == theirs.add_tokens(["qqxyzzy"]) == 1
    assert ours.add_special_tokens([tokenizers.AddedToken("<<special>>", special=True)]) == 1
    theirs.add_special_tokens([tokenizers.AddedToken("<<special>>", special=True)])
    assert_same_encoding(ours.encode(text), theirs.encode(text), "after add_tokens")
    assert ours.get_vocab_size() == theirs.get_vocab_size()
    assert ours.get_added_tokens_decoder() == theirs.get_added_tokens_decoder()
    assert ours.decode(ours.encode(text).ids) == theirs.decode(theirs.encode(text).ids)


@pytest.mark.parametrize("name", FIXTURES)
def test_vocabulary_and_decoding_equal_tokenizers(pairs, name):
    ours, theirs = pairs(name)
    assert ours.get_vocab() == theirs.get_vocab()
    assert ours.get_vocab(with_added_tokens=False) == theirs.get_vocab(with_added_tokens=False)
    assert ours.get_vocab_size() == theirs.get_vocab_size()
    assert ours.num_special_tokens_to_add(False) == theirs.num_special_tokens_to_add(False)
    assert ours.num_special_tokens_to_add(True) == theirs.num_special_tokens_to_add(True)
    ids = theirs.encode(texts()[-1][:2000]).ids
    assert ours.decode(ids) == theirs.decode(ids)
    assert ours.decode(ids, skip_special_tokens=False) == theirs.decode(ids, skip_special_tokens=False)
    assert ours.decode_batch([ids, ids[:5]]) == theirs.decode_batch([ids, ids[:5]])
    assert ours.token_to_id(theirs.id_to_token(ids[0])) == ids[0]
    assert ours.id_to_token(ids[0]) == theirs.id_to_token(ids[0])
    assert ours.to_str() == theirs.to_str()
    for component in ("model", "normalizer", "pre_tokenizer", "post_processor", "decoder"):
        assert type(getattr(ours, component)) is type(getattr(theirs, component))
    assert ours.encode_special_tokens is False


@pytest.mark.parametrize("name", FIXTURES)
def test_encode_special_tokens_equal_tokenizers(pairs, name):
    ours, theirs = pairs(name)
    text = "<|endoftext|> [CLS] <s> <|begin_of_text|> <bos> text"
    try:
        ours.encode_special_tokens = theirs.encode_special_tokens = True
        assert_same_encoding(ours.encode(text), theirs.encode(text), f"{name} encode_special_tokens")
    finally:
        ours.encode_special_tokens = theirs.encode_special_tokens = False
    assert_same_encoding(ours.encode(text), theirs.encode(text), f"{name} encode_special_tokens off")


def test_errors_are_lopt_errors(tmp_path):
    assert issubclass(lopt.LoptError, ValueError)
    with pytest.raises(lopt.LoptError, match="not a valid tokenizer.json"):
        lopt.Tokenizer.from_str('{"version": "1.0", "model": ')
    with pytest.raises(FileNotFoundError):
        lopt.Tokenizer.from_file(tmp_path / "missing.json")
    with pytest.raises(lopt.LoptError):
        lopt.Tokenizer.from_pretrained("no-such-org/no-such-model-xyz", revision="main")


def test_a_buffer_that_is_not_utf8_is_a_lopt_error():
    with pytest.raises(lopt.LoptError, match="not a valid tokenizer.json"):
        lopt.Tokenizer.from_buffer(b'{"version": "\xff"}')


def test_a_core_refused_beside_the_parse_is_built_again_from_to_str(monkeypatch):
    # from_file builds the native core on a thread of its own while HF parses; when that core
    # fails, the tokenizer is built as the object path builds it (from HF's to_str()).
    import lopt._tokenizer as module

    real = module._lopt
    calls = []

    class Refused:
        def join(self):
            raise lopt.LoptError("refused")

    class Core:
        @staticmethod
        def start(json, threads, size):
            calls.append("start")
            return Refused()

        @staticmethod
        def from_str(json, threads, size):
            calls.append("from_str")
            return real.Core.from_str(json, threads, size)

    shim = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")})
    shim.Core = Core
    monkeypatch.setattr(module, "_lopt", shim)
    path = fixture_paths().get(FIXTURES[0])
    if path is None:
        pytest.skip("no fixture tokenizer found")
    ours, theirs = lopt.Tokenizer.from_file(path, threads=1), tokenizers.Tokenizer.from_file(str(path))
    assert calls == ["start", "from_str"]
    assert_same_encoding(ours.encode(SHORT[4]), theirs.encode(SHORT[4]), "rebuilt core")


def test_a_core_started_from_bytes_or_text_is_joined_once():
    path = fixture_paths().get(FIXTURES[0])
    if path is None:
        pytest.skip("no fixture tokenizer found")
    data = path.read_bytes()
    for source in (data, data.decode("utf-8")):
        pending = lopt._lopt.Core.start(source, 1, 0)
        assert pending.join().engine == lopt._lopt.Core.from_str(data.decode("utf-8"), 1, 0).engine
        with pytest.raises(lopt.LoptError, match="already joined"):
            pending.join()
    with pytest.raises(TypeError):
        lopt._lopt.Core.start(bytearray(data), 1, 0)
    with pytest.raises(lopt.LoptError):
        lopt._lopt.Core.start(b"{not json", 1, 0).join()


def test_save_and_from_buffer_round_trip(pairs, tmp_path):
    ours, theirs = pairs(FIXTURES[0])
    path = tmp_path / "tokenizer.json"
    ours.save(str(path))
    again = lopt.Tokenizer.from_buffer(path.read_bytes(), threads=1)
    assert again.threads == 1
    assert again.to_str() == theirs.to_str()
    assert lopt.Tokenizer.from_pretrained(str(tmp_path)).to_str() == theirs.to_str()


def test_from_pretrained_reads_the_local_cache(pairs, tmp_path, monkeypatch):
    ours, _ = pairs(FIXTURES[0])
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--some-org--some-model"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    ours.save(str(repo / "snapshots" / commit / "tokenizer.json"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert lopt.Tokenizer.from_pretrained("some-org/some-model").to_str() == ours.to_str()
    assert lopt.Tokenizer.from_pretrained("some-org/some-model", revision=commit).to_str() == ours.to_str()


def test_threads_default_follows_the_environment(monkeypatch):
    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    assert lopt.default_threads() is None
    monkeypatch.setenv("RAYON_NUM_THREADS", "3")
    assert lopt.default_threads() == 3
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    assert lopt.default_threads() == 1
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    assert lopt.default_threads() == 3


def test_constructors_take_hf_objects(pairs):
    _, theirs = pairs(FIXTURES[0])
    hf = tokenizers.Tokenizer.from_str(theirs.to_str())
    ours = lopt.Tokenizer(hf, threads=2)
    assert ours.backend is hf and ours.threads == 2
    assert lopt.Tokenizer(ours).to_str() == theirs.to_str()
    with pytest.raises(lopt.LoptError):
        lopt.Tokenizer(hf, threads=0)
