"""`lopt.vllm`: the `lopt` tokenizer mode, against a stand-in of vLLM's registries (fake_vllm)."""

import copy
import pickle
import sys
import types

import pytest
from fixture_paths import tokenizer_dir

import lopt
import lopt.vllm

pytest.importorskip("transformers")
import fake_vllm  # noqa: E402

NAME = "bert-base-uncased"  # loads and copies fast; the mechanics do not depend on the model
PROMPTS = ["Hello, world! Ünïcödé 你好 🤗", "A second prompt, a little longer than the first one."]


@pytest.fixture
def vllm_stub(monkeypatch):
    for name in ("vllm", "vllm.tokenizers", "vllm.renderers"):
        package = types.ModuleType(name)
        package.__path__ = []
        monkeypatch.setitem(sys.modules, name, package)
    for name in ("vllm.tokenizers.registry", "vllm.tokenizers.hf", "vllm.renderers.registry"):
        monkeypatch.setitem(sys.modules, name, fake_vllm)
    monkeypatch.setattr(fake_vllm, "TokenizerRegistry", fake_vllm.TokenizerRegistryType(fake_vllm.TokenizerRegistry.entries))
    monkeypatch.setattr(fake_vllm, "RENDERER_REGISTRY", fake_vllm.RendererRegistryType(fake_vllm.RENDERER_REGISTRY.entries))
    return fake_vllm


def vllm_call(tok):
    """What vLLM's renderer asks of the tokenizer for a batch of completion prompts."""
    return tok(PROMPTS, add_special_tokens=True, truncation=True, max_length=12, return_offsets_mapping=True)


def test_mode_registers_and_loads_an_accelerated_tokenizer(vllm_stub):
    lopt.vllm.register()
    assert vllm_stub.TokenizerRegistry.tokenizers["lopt"] == ("lopt.vllm", "LoptTokenizer")
    assert vllm_stub.RENDERER_REGISTRY.renderers["lopt"] == vllm_stub.RENDERER_REGISTRY.renderers["hf"]

    path = str(tokenizer_dir(NAME))
    stock = vllm_stub.TokenizerRegistry.load_tokenizer("hf", path, truncation_side="left")
    tok = vllm_stub.TokenizerRegistry.load_tokenizer("lopt", path, truncation_side="left")
    assert lopt.is_accelerated(tok) and not lopt.is_accelerated(stock)
    assert type(tok).__name__ == type(stock).__name__ and type(tok).__name__.startswith("Cached")
    out = vllm_call(tok)
    assert out == vllm_call(stock)
    assert all(type(e) is lopt.Encoding for e in out.encodings)

    # The streaming detokenizer gets the real tokenizers.Tokenizer from `_tokenizer`.
    ids = out["input_ids"][0]
    assert fake_vllm.stream_detokenize(tok, ids) == fake_vllm.stream_detokenize(stock, ids) == tok.decode(ids)

    # Thread pool of deep copies, and pickling through vLLM's own `__reduce__`.
    pooled, pool = fake_vllm.make_thread_pool(copy.copy(tok), 2)
    assert vllm_call(pooled) == vllm_call(stock)
    assert all(lopt.is_accelerated(pool.get()) for _ in range(2))
    revived = pickle.loads(pickle.dumps(tok))
    assert lopt.is_accelerated(revived) and type(revived).__name__ == type(tok).__name__
    assert vllm_call(revived) == vllm_call(stock)


def test_register_without_vllm_raises_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match="vllm"):
        lopt.vllm.register()


def test_loader_without_vllm_uses_auto_tokenizer(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    tok = lopt.vllm.LoptTokenizer.from_pretrained(str(tokenizer_dir("bert-base-uncased")), download_dir=None)
    assert lopt.is_accelerated(tok)
    assert type(tok("hello world").encodings[0]) is lopt.Encoding
