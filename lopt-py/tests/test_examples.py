"""The examples in `examples/` run end to end on small generated data, and their output equals HF.

Each example runs as a user would run it (`python examples/X.py ...`, a subprocess); outputs are
checked against `tokenizers` (ids and character offsets), and the `datasets` example is run twice
to show that its cache is kept (the map function hashes the same in a new process).
"""

import json
import os
import subprocess
import sys

import pytest
import tokenizers
from fixture_paths import ROOT, tokenizer_dir

EXAMPLES = ROOT / "examples"
TEXTS = [
    "Hello, world! Ünïcödé — 你好，世界。 🤗",
    "",
    "def f(x):\n    return x ** 2  # tabs\tand  spaces",
    "The quick brown fox jumps over the lazy dog. " * 40,
    "Ελληνικά, русский, עברית, العربية, हिन्दी.",
]


def write_corpus(path, docs=20):
    with open(path, "w", encoding="utf-8") as f:
        for i in range(docs):
            f.write(json.dumps({"id": f"doc-{i}", "text": f"{i}: {TEXTS[i % len(TEXTS)]}" * (1 + i % 3)}) + "\n")
    return {f"doc-{i}": json.loads(line)["text"] for i, line in enumerate(open(path, encoding="utf-8"))}


def run_example(name, *args, env=None):
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    assert out.returncode == 0, f"{name} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def test_ray_data_example_writes_ids_and_offsets(tmp_path):
    pytest.importorskip("ray")
    pq = pytest.importorskip("pyarrow.parquet")
    texts = write_corpus(tmp_path / "in.jsonl")
    model = tokenizer_dir("qwen3")
    run_example("ray_data_tokenize.py", "--tokenizer", model, tmp_path / "in.jsonl", tmp_path / "out")

    table = pq.read_table(tmp_path / "out")
    assert table.column_names == ["id", "input_ids", "offsets"]
    rows = table.to_pylist()
    assert sorted(r["id"] for r in rows) == sorted(texts)
    hf = tokenizers.Tokenizer.from_file(str(model / "tokenizer.json"))
    for row in rows:
        expected = hf.encode(texts[row["id"]])
        assert row["input_ids"] == expected.ids, row["id"]
        assert [tuple(o) for o in row["offsets"]] == expected.offsets, row["id"]


@pytest.mark.parametrize("kind", ["transformers_folder", "tokenizer_json"])
def test_datasets_example_matches_and_keeps_its_cache(tmp_path, kind):
    datasets = pytest.importorskip("datasets")
    texts = write_corpus(tmp_path / "in.jsonl")
    model = tokenizer_dir("bert-base-uncased")  # small: each run pickles it to its workers
    source = model if kind == "transformers_folder" else model / "tokenizer.json"
    cache = tmp_path / "hf_cache"
    env = {"HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}

    first = run_example("datasets_map.py", "--tokenizer", source, tmp_path / "in.jsonl", tmp_path / "out1", env=env)
    cached = sorted(str(p) for p in cache.rglob("cache-*.arrow"))
    second = run_example("datasets_map.py", "--tokenizer", source, tmp_path / "in.jsonl", tmp_path / "out2", env=env)
    fingerprints = [line for out in (first, second) for line in out.stdout.splitlines() if line.startswith("fingerprint")]
    assert len(fingerprints) == 2 and fingerprints[0] == fingerprints[1], fingerprints
    assert cached and sorted(str(p) for p in cache.rglob("cache-*.arrow")) == cached, "the second run recomputed"
    assert "couldn't be hashed properly" not in first.stderr + second.stderr

    out = datasets.load_from_disk(str(tmp_path / "out2"))
    hf = tokenizers.Tokenizer.from_file(str(model / "tokenizer.json"))
    for row in out:
        expected = hf.encode(texts[row["id"]])
        assert row["input_ids"] == expected.ids, row["id"]
        assert [tuple(o) for o in row["offsets"]] == expected.offsets, row["id"]
