"""The cost of the Python layer on one long prompt: ``lopt.Tokenizer.encode(text)`` (a full
``lopt.Encoding``, same threads) against ``lopt bench`` (the Rust engine, no Python) on the same
documents.

Usage::

    python lopt-py/bench/overhead.py --lopt target/release/lopt --tokenizer T.json \\
        --corpus ../shared/corpora/en_verylong.jsonl --tokens 128000 --threads 2 --rounds 9

It cuts ``rounds + 1`` different documents of the corpus to ~``tokens`` tokens each (fresh
documents: each is encoded once; the first one warms up), writes them as JSONL, runs ``lopt
bench`` on that file, then encodes the same documents in this process, once with ``encode``
(the ``Encoding`` object only) and once with ``encode(...).ids`` (a Python list of ints too).
Prints the per-call medians and their ratios as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import lopt


def documents(corpus: str, tokens: int, count: int, tok: "lopt.Tokenizer") -> "list[str]":
    out = []
    with open(corpus, encoding="utf-8") as lines:
        for line in lines:
            text = json.loads(line)["text"]
            ids = tok.encode_ids(text, add_special_tokens=False)
            if len(ids) < tokens:
                continue
            # Cut at the character where the `tokens`-th token starts.
            cut = tok.encode(text).offsets[tokens][0]
            out.append(text[:cut])
            if len(out) == count:
                return out
    raise SystemExit(f"fewer than {count} documents of {tokens} tokens in {corpus}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lopt", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--tokens", type=int, default=128_000)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seed-cache", choices=["background", "sync", "off"], default="background",
                        help="`lopt bench --seed-cache` of the Rust runs")
    args = parser.parse_args()

    tok = lopt.Tokenizer.from_file(args.tokenizer, threads=args.threads)
    docs = documents(args.corpus, args.tokens, args.rounds + 1, tok)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps({"text": doc}) + "\n")

    def bench() -> float:
        command = [args.lopt, "bench", "--tokenizer", args.tokenizer, "--threads", str(args.threads),
                   "--seed-cache", args.seed_cache, f.name]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        return json.loads(out)["median_us"]

    # lopt bench before and after the Python runs: the machine may be shared.
    rust_runs = [bench()]

    # A fresh process would be fairer still; a new tokenizer at least starts with cold caches.
    tok = lopt.Tokenizer.from_file(args.tokenizer, threads=args.threads)
    tok.encode(docs[0])  # warm-up, as lopt bench
    encode, ids = [], []
    for doc in docs[1:]:
        start = time.perf_counter()
        tok.encode(doc)
        encode.append(time.perf_counter() - start)
    tok = lopt.Tokenizer.from_file(args.tokenizer, threads=args.threads)
    tok.encode(docs[0])
    for doc in docs[1:]:
        start = time.perf_counter()
        tok.encode(doc).ids
        ids.append(time.perf_counter() - start)
    rust_runs.append(bench())
    os.unlink(f.name)
    rust_us = statistics.median(rust_runs)
    result = {
        "tokens_per_doc": args.tokens,
        "docs": len(docs) - 1,
        "threads": args.threads,
        "engine": tok.engine,
        "lopt_bench_median_ms_runs": [r / 1000 for r in rust_runs],
        "lopt_bench_median_ms": rust_us / 1000,
        "python_encode_median_ms": statistics.median(encode) * 1000,
        "python_encode_ids_median_ms": statistics.median(ids) * 1000,
        "encode_over_bench": statistics.median(encode) * 1e6 / rust_us,
        "encode_ids_over_bench": statistics.median(ids) * 1e6 / rust_us,
        "python": sys.version.split()[0],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
