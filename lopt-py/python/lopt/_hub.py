"""Finding a model's ``tokenizer.json``: a local path, the local HuggingFace cache (offline, no
``huggingface_hub`` needed), else a download through ``huggingface_hub`` when it is installed."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from ._lopt import LoptError

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def hub_cache() -> Path:
    """The HuggingFace Hub cache directory, resolved as ``huggingface_hub`` does."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return Path(os.environ[variable]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(cache).expanduser() / "huggingface" / "hub"


def cached_tokenizer_json(identifier: str, revision: str = "main") -> Optional[Path]:
    """``tokenizer.json`` of ``identifier`` at ``revision`` in the local cache, if there."""
    repo = hub_cache() / ("models--" + identifier.replace("/", "--"))
    ref = repo / "refs" / revision
    commit = ref.read_text().strip() if ref.is_file() else revision if _COMMIT.match(revision) else None
    if commit is None:
        return None
    path = repo / "snapshots" / commit / "tokenizer.json"
    return path if path.is_file() else None


def find_tokenizer_json(identifier: str, revision: str = "main", token: Optional[str] = None) -> str:
    """The path of the ``tokenizer.json`` that ``Tokenizer.from_pretrained`` loads.

    Raises ``LoptError`` when it is neither local nor cached and ``huggingface_hub`` is absent
    or cannot fetch it."""
    local = Path(identifier).expanduser()
    if local.is_file():
        return str(local)
    if (local / "tokenizer.json").is_file():
        return str(local / "tokenizer.json")
    cached = cached_tokenizer_json(identifier, revision)
    if cached is not None:
        return str(cached)
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise LoptError(
            f"{identifier!r} is not a local path and its tokenizer.json is not in the HuggingFace "
            f"cache ({hub_cache()}); install huggingface_hub to download it"
        ) from None
    try:
        return str(hf_hub_download(identifier, "tokenizer.json", revision=revision, token=token))
    except Exception as err:  # noqa: BLE001 - any download failure is the same one-line error
        raise LoptError(f"cannot get tokenizer.json of {identifier!r}: {' '.join(str(err).split())}") from None
