"""lopt as a vLLM tokenizer mode: `vllm serve MODEL --tokenizer-mode lopt`.

Job: `register()` adds the mode `lopt` to vLLM's tokenizer registry (and, where vLLM picks its
renderer by tokenizer mode, maps `lopt` to the renderer of mode `hf`). vLLM calls it in every
process through the `vllm.general_plugins` entry point that the lopt wheel declares, so installing
lopt is enough; `import lopt.vllm; lopt.vllm.register()` does it by hand (e.g. for `vllm.LLM` in a
script). The mode's class `LoptTokenizer` loads the tokenizer exactly as vLLM's `hf` mode does
(`CachedHfTokenizer`), then `lopt.accelerate`s it: prompts are encoded by lopt, while
`tokenizer._tokenizer` stays the real `tokenizers.Tokenizer` that vLLM's streaming detokenizer
(`DecodeStream.step`) requires.

vLLM is imported lazily, only inside these functions: importing this module needs no vLLM.
Registry locations differ between vLLM versions; the ones known are tried in order.
"""

from __future__ import annotations

import importlib

from ._transformers import _accelerate_or_warn

__all__ = ["MODE", "LoptTokenizer", "register"]

MODE = "lopt"

# Newest first: where vLLM keeps its tokenizer registry, its HF tokenizer loader, its renderers.
_TOKENIZER_REGISTRIES = ("vllm.frontend.processing.tokenizers.registry", "vllm.tokenizers.registry")
_HF_LOADERS = ("vllm.frontend.processing.tokenizers.hf", "vllm.tokenizers.hf")
_RENDERER_REGISTRIES = ("vllm.frontend.processing.renderers.registry", "vllm.renderers.registry")


def _first_module(names):
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


class LoptTokenizer:
    """The class vLLM loads for `--tokenizer-mode lopt`."""

    @classmethod
    def from_pretrained(cls, path_or_repo_id, *args, **kwargs):
        """vLLM's own HF loading (`CachedHfTokenizer`), then `lopt.accelerate`.

        Without vLLM (tests, scripts): `AutoTokenizer.from_pretrained` with the same arguments.
        A tokenizer lopt cannot load is returned as vLLM's `hf` mode would, with a warning.

        # Errors
        Whatever vLLM's or transformers' loading raises.
        """
        loader = _first_module(_HF_LOADERS)
        if loader is not None:
            tok = loader.CachedHfTokenizer.from_pretrained(path_or_repo_id, *args, **kwargs)
        else:
            from transformers import AutoTokenizer

            download_dir = kwargs.pop("download_dir", None)
            if download_dir is not None:
                kwargs.setdefault("cache_dir", download_dir)
            tok = AutoTokenizer.from_pretrained(path_or_repo_id, *args, **kwargs)
        return _accelerate_or_warn(tok, {})


def register(mode: str = MODE) -> None:
    """Registers `mode` (default `lopt`) with vLLM's tokenizer registry.

    # Errors
    `ImportError` when vLLM (or a registry location this module knows) is not installed.
    """
    registry_module = _first_module(_TOKENIZER_REGISTRIES)
    if registry_module is None:
        raise ImportError("lopt.vllm.register: vLLM's TokenizerRegistry was not found (is vllm installed?)")
    registry_module.TokenizerRegistry.register(mode, __name__, LoptTokenizer.__name__)

    renderers = _first_module(_RENDERER_REGISTRIES)
    registry = getattr(renderers, "RENDERER_REGISTRY", None)
    table = getattr(registry, "renderers", None)
    if isinstance(table, dict) and "hf" in table and mode not in table:
        registry.register(mode, *table["hf"])
