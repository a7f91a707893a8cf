"""transformers drop-in: `lopt.accelerate(tok)` gives the same `BatchEncoding` as the stock tokenizer.

Every case runs on two tokenizers loaded with `AutoTokenizer.from_pretrained(fixture_dir)`, one
stock and one accelerated, and compares everything the call returns: the dict, the `Encoding`
objects behind it (every field, overflow included) and the helpers that read them. The set of
tokenizers is `$LOPT_TRANSFORMERS_TOKENIZERS` (comma separated) or all of `TOKENIZERS`; the test
script runs a smaller set under transformers 4.57.
"""

import copy
import os
import pickle
import threading

import numpy as np
import pytest
import tokenizers
from conftest import assert_same_encoding
from fixture_paths import tokenizer_dir
from tokenizers.decoders import DecodeStream

import lopt

transformers = pytest.importorskip("transformers")
from transformers import AutoTokenizer  # noqa: E402

TOKENIZERS = ["qwen3", "llama3_1", "bert-base-uncased", "llama2"]
SELECTED = [n for n in os.environ.get("LOPT_TRANSFORMERS_TOKENIZERS", ",".join(TOKENIZERS)).split(",") if n]

TEXT = "Hello, world! Ünïcödé — 你好，世界。 🤗 tabs\tand  spaces. It's 3.14 o'clock, isn't it?"
LONG = " ".join(["The quick brown fox jumps over the lazy dog, again and again."] * 12)
BATCH = [TEXT, "Short one.", "", LONG]
FIRSTS = [TEXT, "Short one.", LONG]
SECONDS = ["A second segment that is long enough to be cut " * 3, LONG, "And yet another second segment " * 4]
WORDS = [["Hello", "world", "!"], ["Ünïcödé", "你好", "tabs\tand", "o'clock"], ["one"]]


def load(name):
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir(name)))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token  # llama3_1, llama2: no pad token of their own
    return tok


def fresh_pair(name="bert-base-uncased"):
    """(stock, accelerated) of a tokenizer that loads fast, for tests that copy or change it."""
    return load(name), lopt.accelerate(load(name))


@pytest.fixture(scope="module", params=SELECTED)
def pair(request):
    """(stock, accelerated) for one fixture tokenizer, loaded the same way."""
    return load(request.param), lopt.accelerate(load(request.param))


def with_attr(tok, name, value, call):
    old = getattr(tok, name)
    setattr(tok, name, value)
    try:
        return call()
    finally:
        setattr(tok, name, old)


def special_text(tok):
    return f"before {tok.eos_token} middle{tok.pad_token}after"


CASES = {
    "single": lambda t: t(TEXT),
    "batch": lambda t: t(BATCH),
    "no_special_tokens": lambda t: t(BATCH, add_special_tokens=False),
    "pad_longest": lambda t: t(BATCH, padding=True),
    "pad_max_length_left": lambda t: t(BATCH, padding="max_length", max_length=40, truncation=True, padding_side="left"),
    "pad_side_attribute_left": lambda t: with_attr(t, "padding_side", "left", lambda: t(BATCH, padding=True)),
    "pad_to_multiple_of": lambda t: t(BATCH, padding=True, pad_to_multiple_of=8),
    "truncate": lambda t: t(BATCH, truncation=True, max_length=12),
    "truncate_left": lambda t: with_attr(t, "truncation_side", "left", lambda: t(BATCH, truncation=True, max_length=12)),
    "overflow_stride": lambda t: t(BATCH, truncation=True, max_length=16, stride=4, return_overflowing_tokens=True),
    "overflow_single_padded_np": lambda t: t(
        LONG, truncation=True, max_length=16, stride=3, return_overflowing_tokens=True, padding=True, return_tensors="np"
    ),
    "pairs": lambda t: t(FIRSTS, SECONDS, padding=True, return_token_type_ids=True),
    "pairs_longest_first": lambda t: t(FIRSTS, SECONDS, truncation=True, max_length=20),
    "pairs_only_second_overflow": lambda t: t(
        FIRSTS[:2], SECONDS[:2], truncation="only_second", max_length=64, stride=2, return_overflowing_tokens=True
    ),
    "pairs_only_first": lambda t: t([LONG, LONG], ["short", "pair"], truncation="only_first", max_length=24),
    "pair_single_offsets": lambda t: t(TEXT, "and a pair", return_offsets_mapping=True),
    "offsets_and_masks": lambda t: t(
        BATCH,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        return_length=True,
        return_attention_mask=True,
        return_token_type_ids=True,
    ),
    "numpy": lambda t: t(BATCH, padding=True, return_tensors="np"),
    "words_batch": lambda t: t(WORDS, is_split_into_words=True, padding=True, return_offsets_mapping=True),
    "words_single": lambda t: t(WORDS[1], is_split_into_words=True),
    "words_pairs": lambda t: t(WORDS, WORDS[::-1], is_split_into_words=True, padding=True),
    "special_tokens_kept": lambda t: t(special_text(t)),
    "split_special_tokens": lambda t: t([special_text(t), TEXT], split_special_tokens=True),
    "split_special_then_not": lambda t: (t(special_text(t), split_special_tokens=True), t(special_text(t))),
    "encode": lambda t: t.encode(TEXT),
    "encode_pair_truncated": lambda t: t.encode(TEXT, LONG, truncation=True, max_length=30),
    "tokenize": lambda t: t.tokenize(TEXT),
    "chat_template": lambda t: (
        t.apply_chat_template([{"role": "user", "content": TEXT}], tokenize=True) if t.chat_template else None
    ),
}


def assert_same(a, b, where="result"):
    """Deep equality of two call results (BatchEncoding, dict, list, numpy array, str)."""
    assert type(a) is type(b), f"{where}: {type(a)} vs {type(b)}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), where
    elif isinstance(a, transformers.BatchEncoding):
        assert list(a.keys()) == list(b.keys()), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
        assert (a.encodings is None) == (b.encodings is None), where
        for i, (ea, eb) in enumerate(zip(a.encodings or [], b.encodings or [])):
            assert type(eb) is lopt.Encoding, f"{where}: not encoded by lopt ({type(eb)})"
            assert_same_encoding(eb, ea, f"{where}.encodings[{i}]")
            assert a.tokens(i) == b.tokens(i) and a.word_ids(i) == b.word_ids(i), where
            assert a.sequence_ids(i) == b.sequence_ids(i), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.mark.parametrize("case", list(CASES))
def test_call_matrix_same_batch_encoding(pair, case):
    stock, fast = pair
    assert_same(CASES[case](stock), CASES[case](fast), case)


@pytest.mark.parametrize("skip_special_tokens", [False, True])
@pytest.mark.parametrize("clean_up", [False, True, None])
def test_decode_same(pair, skip_special_tokens, clean_up):
    stock, fast = pair
    ids = stock(special_text(stock) + " " + TEXT + " , . ? !")["input_ids"]
    kwargs = {"skip_special_tokens": skip_special_tokens, "clean_up_tokenization_spaces": clean_up}
    assert stock.decode(ids, **kwargs) == fast.decode(ids, **kwargs)
    assert stock.batch_decode([ids, ids[:3]], **kwargs) == fast.batch_decode([ids, ids[:3]], **kwargs)


def test_real_backend_outside_encode_and_decode_stream(pair):
    """vLLM streams detokenization with `DecodeStream.step(tokenizer._tokenizer, id)`, which
    accepts only a real `tokenizers.Tokenizer`."""
    stock, fast = pair
    assert type(fast._tokenizer) is tokenizers.Tokenizer
    assert fast.backend_tokenizer is fast._tokenizer
    assert type(fast.backend_tokenizer.model).__name__ == type(stock.backend_tokenizer.model).__name__
    ids = fast(TEXT)["input_ids"]
    streams = {}
    for name, tok in (("stock", stock), ("fast", fast)):
        stream = DecodeStream(skip_special_tokens=False)
        streams[name] = [stream.step(tok._tokenizer, i) for i in ids]
    assert streams["fast"] == streams["stock"]
    assert "".join(p for p in streams["fast"] if p) == fast.decode(ids, skip_special_tokens=False)


def test_backend_settings_change_as_without_lopt(pair):
    stock, fast = pair
    for tok in pair:
        tok(BATCH, truncation=True, max_length=9, padding="max_length", split_special_tokens=True)
    assert fast._tokenizer.truncation == stock._tokenizer.truncation is not None
    assert fast._tokenizer.padding == stock._tokenizer.padding is not None
    assert fast._tokenizer.encode_special_tokens == stock._tokenizer.encode_special_tokens
    for tok in pair:
        tok(TEXT)
    assert fast._tokenizer.truncation == stock._tokenizer.truncation is None
    assert fast._tokenizer.padding == stock._tokenizer.padding is None


def test_same_class_name_repr_and_saved_files(pair, tmp_path):
    stock, fast = pair
    assert type(fast).__name__ == type(stock).__name__ and isinstance(fast, type(stock))
    assert repr(fast) == repr(stock)
    stock.save_pretrained(tmp_path / "stock")
    fast.save_pretrained(tmp_path / "fast")
    for path in sorted((tmp_path / "stock").iterdir()):
        assert path.read_bytes() == (tmp_path / "fast" / path.name).read_bytes(), path.name


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_copies_stay_accelerated(how):
    stock, fast = fresh_pair()  # a small tokenizer: copying a large one is slow, and alike
    clone = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": lambda t: pickle.loads(pickle.dumps(t))}[how](fast)
    assert lopt.is_accelerated(clone) and type(clone).__name__ == type(stock).__name__
    assert_same(stock(BATCH, padding=True, return_offsets_mapping=True), clone(BATCH, padding=True, return_offsets_mapping=True))
    stream = DecodeStream(skip_special_tokens=False)
    assert stream.step(clone._tokenizer, clone(TEXT)["input_ids"][0]) is not None


def test_threads_with_different_settings_share_one_tokenizer(pair):
    """8 threads call one accelerated tokenizer with different truncation/padding settings at
    once; each gets exactly the stock result for its own settings."""
    stock, fast = pair
    settings = [
        {"truncation": True, "max_length": 5 + 3 * i, "padding": "max_length" if i % 2 else True,
         "padding_side": "left" if i % 3 else "right", "return_offsets_mapping": True}
        for i in range(8)
    ]
    expected = [stock(BATCH, **kw) for kw in settings]
    failures = []

    def work(i):
        for _ in range(15):
            try:
                assert_same(expected[i], fast(BATCH, **settings[i]), f"thread {i}")
            except AssertionError as err:  # noqa: PERF203 - collect, the main thread reports
                failures.append(err)
                return

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]


def test_accelerate_needs_a_fast_tokenizer():
    with pytest.raises(TypeError, match="fast tokenizer"):
        lopt.accelerate(object())


# Changes to the tokenizer after `accelerate` reach lopt (these tests load their own pair: they
# mutate it).


def test_added_tokens_reach_lopt():
    stock, fast = fresh_pair()
    text = "hello loptnewword and <lopt_special> there"
    assert_same(stock(text), fast(text))
    for tok in (stock, fast):
        assert tok.add_tokens(["loptnewword"]) == 1
        assert tok.add_tokens([tokenizers.AddedToken("<lopt_special>", special=True)], special_tokens=True) == 1
    assert_same(stock([text, TEXT], return_offsets_mapping=True), fast([text, TEXT], return_offsets_mapping=True))
    assert fast.decode(fast(text)["input_ids"], skip_special_tokens=True) == stock.decode(
        stock(text)["input_ids"], skip_special_tokens=True
    )


def test_component_swap_on_backend_reaches_lopt():
    """SGLang assigns `backend_tokenizer.pre_tokenizer` after load; lopt must follow."""
    stock, fast = fresh_pair()
    for tok in (stock, fast):
        tok.backend_tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    assert_same(stock(BATCH, return_offsets_mapping=True), fast(BATCH, return_offsets_mapping=True))
    for tok in (stock, fast):
        tok.backend_tokenizer.normalizer = tokenizers.normalizers.Lowercase()
    assert_same(stock(BATCH, return_offsets_mapping=True), fast(BATCH, return_offsets_mapping=True))


def test_replaced_backend_reaches_lopt():
    stock, fast = fresh_pair()
    other = load("llama2")
    for tok in (stock, fast):
        tok._tokenizer = tokenizers.Tokenizer.from_str(other.backend_tokenizer.to_str())
    assert_same(stock(BATCH), fast(BATCH))


def test_other_threads_see_the_real_backend_while_one_encodes():
    """vLLM encodes on an executor thread while its event loop streams detokenization with
    `DecodeStream.step(tokenizer._tokenizer, id)`: the view must stay in the encoding thread."""
    stock, fast = fresh_pair()
    ids = stock(TEXT)["input_ids"]
    done = threading.Event()
    results = []

    def encode_in_background():
        while not done.is_set():
            results.append(fast([LONG * 20] * 4, truncation=True, max_length=4096)["input_ids"][0][:4])

    worker = threading.Thread(target=encode_in_background)
    worker.start()
    try:
        for _ in range(200):
            assert type(fast._tokenizer) is tokenizers.Tokenizer
            stream = DecodeStream(skip_special_tokens=False)
            assert "".join(p for p in (stream.step(fast._tokenizer, i) for i in ids) if p) == stock.decode(ids)
    finally:
        done.set()
        worker.join()
    assert results and all(r == results[0] for r in results)
