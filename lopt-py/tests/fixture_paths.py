"""Where the fixture tokenizers and corpora are, found the way the Rust tests find them.

`$LOPT_SHARED/tokenizers/<name>/` (default `../shared` beside the repository root), else
`fixtures/tokenizers/<name>/` that `scripts/fetch-fixtures.sh` fills on a machine without shared/.
"""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    return Path(os.environ.get("LOPT_SHARED", ROOT.parent / "shared"))


def tokenizer_dir(name: str) -> Path:
    """The folder holding `<name>`'s tokenizer.json (and tokenizer_config.json where it has one);
    skips the test with a visible reason when the fixture is absent."""
    for base in (shared_dir() / "tokenizers", ROOT / "fixtures" / "tokenizers"):
        if (base / name / "tokenizer.json").is_file():
            return base / name
    pytest.skip(f"fixture tokenizer {name} not found (run scripts/fetch-fixtures.sh)")
