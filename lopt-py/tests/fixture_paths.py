"""The fixture tokenizers as folders (tokenizer.json + tokenizer_config.json where one exists), for
`AutoTokenizer.from_pretrained(folder)`; found by conftest's lookup ($LOPT_SHARED or ../shared,
else fixtures/tokenizers)."""

from pathlib import Path

import pytest
from conftest import ROOT, fixture_dirs, fixture_paths

__all__ = ["ROOT", "tokenizer_dir"]


def tokenizer_dir(name: str) -> Path:
    """The folder holding `name`'s tokenizer.json; skips the test, saying why, when it is absent."""
    path = fixture_paths().get(name)
    if path is None:
        pytest.skip(f"fixture tokenizer {name} not found under {fixture_dirs()}")
    return path.parent
