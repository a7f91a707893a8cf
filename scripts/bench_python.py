#!/usr/bin/env python3
"""Python-side benchmark of lopt: fresh-document throughput of every Python way to tokenize, and
the latency of one long prompt through transformers `__call__`, stock vs `lopt.accelerate`.

    python3 -m venv target/bench-venv
    target/bench-venv/bin/pip install target/py-wheels/lopt-*.whl transformers==5.24.0 jinja2 \\
        tiktoken fastokens gigatoken nanotoken
    target/bench-venv/bin/python scripts/bench_python.py \\
        --corpus ../shared/corpora/en_verylong.jsonl --tokenizers qwen3 bert-base-uncased \\
        --docs 6 --max-bytes 1000000 --rounds 3 --latency-tokens 131072

Part 1 is `scripts/bench_peers.py` (each cell in its own process, first document warms up, every
other document is encoded once, median over rounds in rotating order, ids hashed and compared with
HF `tokenizers`' `encode`) with the Python methods added: `tokenizers` `encode` and `encode_batch`,
transformers `__call__` stock and accelerated, tiktoken (where the vocabulary allows), fastokens,
gigatoken (BPE), nanotoken (WordPiece), `lopt.Tokenizer.encode` and `encode_batch`, and the
`lopt` CLI; lopt at 1 thread and all threads.

Part 2 builds `--rounds + 1` distinct prompts of about `--latency-tokens` tokens from the corpus
(a prompt is never encoded twice: fresh documents), loads the tokenizer's folder twice with
`AutoTokenizer.from_pretrained` (one stock, one `lopt.accelerate`d), warms both up on the first
prompt, then times `tok(prompt)` on each other prompt, alternating which goes first, and checks
that both return the same `input_ids`. Not part of CI.

Part 3 (`--short-sizes 256 1024 4096`) is the per-call cost of the Python layer on short texts:
`lopt.Tokenizer.encode_ids(t)`, `encode(t)` (the `Encoding` object only), `encode(t).ids`,
`encode(t).offsets` and `tokenizers`' `encode(t).ids`, 1 thread, on `--short-texts` consecutive
slices of the corpus per size, each text encoded once by one method (fresh texts; methods take
turns in a random order per round of methods), median per call. With `--short-baseline DIR` (another build of the package,
e.g. an unpacked wheel of main) every round runs both builds, each in its own process (the
baseline through `PYTHONPATH=DIR`), alternating which goes first, and prints both medians and
their ratio:

    python3 -m zipfile -e OLD.whl /tmp/before
    target/py-venv/bin/python scripts/bench_python.py --corpus ../shared/corpora/en_verylong.jsonl \
        --tokenizers qwen3 --methods --latency-tokens 0 --short-sizes 256 1024 4096 \
        --short-baseline /tmp/before --rounds 3
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_peers  # noqa: E402

METHODS = ["hf", "hf-batch", "transformers", "transformers-lopt", "tiktoken", "fastokens", "gigatoken",
           "nanotoken", "lopt-py", "lopt-py-batch", "lopt"]


def prompts_from(corpus, tokenizer_json, tokens, count):
    """`count` distinct prompts of about `tokens` tokens: consecutive slices of the corpus."""
    import tokenizers

    hf = tokenizers.Tokenizer.from_file(tokenizer_json)
    text = ""
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            text += json.loads(line)["text"] + "\n\n"
            sample = text[:200_000]
            chars_per_token = len(sample) / max(1, len(hf.encode(sample, add_special_tokens=False)))
            if len(text) > count * tokens * chars_per_token * 1.05:
                break
    size = int(tokens * chars_per_token)
    prompts = [text[i * size:(i + 1) * size] for i in range(count)]
    if len(prompts[-1]) < size:
        raise SystemExit(f"{corpus}: not enough text for {count} prompts of {tokens} tokens")
    return prompts


def latency(name, corpus, tokens, rounds):
    from transformers import AutoTokenizer

    import lopt

    path = bench_peers.tokenizer_path(name)
    folder = os.path.dirname(path)
    prompts = prompts_from(corpus, path, tokens, rounds + 1)
    stock = AutoTokenizer.from_pretrained(folder)
    fast = lopt.accelerate(AutoTokenizer.from_pretrained(folder))
    stock(prompts[0])
    fast(prompts[0])
    times = {"stock": [], "lopt": []}
    counts = []
    for i, prompt in enumerate(prompts[1:]):
        order = [("stock", stock), ("lopt", fast)]
        ids = {}
        for label, tok in (order if i % 2 == 0 else order[::-1]):
            start = time.perf_counter()
            ids[label] = tok(prompt)["input_ids"]
            times[label].append(time.perf_counter() - start)
        if ids["stock"] != ids["lopt"]:
            raise SystemExit(f"{name}: accelerated input_ids differ from stock on prompt {i + 1}")
        counts.append(len(ids["stock"]))
    row = {"tokenizer": name, "tokens": int(statistics.median(counts)), "rounds": rounds,
           "stock_ms": round(statistics.median(times["stock"]) * 1e3, 1),
           "lopt_ms": round(statistics.median(times["lopt"]) * 1e3, 1),
           "threads": fast.__dict__["_lopt_route"].engine.threads}
    row["speedup"] = round(row["stock_ms"] / row["lopt_ms"], 2)
    print(json.dumps(row), flush=True)
    return row


SHORT_METHODS = ["encode_ids", "encode", "encode.ids", "encode.offsets", "hf encode.ids"]


def short_child(name, corpus, size, count):
    """Part 3 in this process: one JSON line, `{method: median seconds per call}`."""
    import tokenizers

    import lopt

    path = bench_peers.tokenizer_path(name)
    tok = lopt.Tokenizer.from_file(path, threads=1)
    hf = tokenizers.Tokenizer.from_file(path)
    calls = {
        "encode_ids": lambda t: tok.encode_ids(t),
        "encode": lambda t: tok.encode(t),
        "encode.ids": lambda t: tok.encode(t).ids,
        "encode.offsets": lambda t: tok.encode(t).offsets,
        "hf encode.ids": lambda t: hf.encode(t).ids,
    }
    need = (count + 1) * len(calls) * size
    text = ""
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            text += json.loads(line)["text"] + "\n\n"
            if len(text) > need:
                break
    if len(text) < need:
        raise SystemExit(f"{corpus}: not enough text for {count} texts of {size} characters per method")
    texts = [text[i * size:(i + 1) * size] for i in range(need // size)]
    for call in calls.values():  # warm-up, on texts not timed
        call(texts[0])
    times = {label: [] for label in calls}
    labels = list(calls)
    rest = iter(texts[1:])
    order = random.Random(7)
    for _ in range(count):
        # Each block runs every method once, in a new random order, so that no method mostly
        # follows the same one (HF's slow call leaves the caches cold for the next).
        order.shuffle(labels)
        for label in labels:
            t = next(rest)
            start = time.perf_counter()
            calls[label](t)
            times[label].append(time.perf_counter() - start)
    print(json.dumps({label: statistics.median(v) for label, v in times.items()}), flush=True)


def short_calls(names, corpus, sizes, count, rounds, baseline):
    """Part 3: each size and build in a child process, `rounds` times, builds alternating."""
    builds = [("this", None)] + ([("baseline", baseline)] if baseline else [])
    rows = []
    for name in names:
        for size in sizes:
            results = {label: {m: [] for m in SHORT_METHODS} for label, _ in builds}
            for r in range(rounds):
                for label, pythonpath in (builds if r % 2 == 0 else builds[::-1]):
                    env = dict(os.environ)
                    if pythonpath:
                        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
                    out = subprocess.run(
                        [sys.executable, os.path.abspath(__file__), "--short-child", name, str(size), str(count),
                         "--corpus", corpus], env=env, check=True, capture_output=True, text=True).stdout
                    for method, seconds in json.loads(out.strip().splitlines()[-1]).items():
                        results[label][method].append(seconds)
            for method in SHORT_METHODS:
                row = {"tokenizer": name, "size": size, "method": method}
                for label, _ in builds:
                    row[label + "_us"] = round(statistics.median(results[label][method]) * 1e6, 2)
                if baseline:
                    row["ratio"] = round(row["this_us"] / row["baseline_us"], 2)
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("\n| tokenizer | text | method | " + " | ".join(f"{label} (us/call)" for label, _ in builds)
          + (" | this / baseline |" if baseline else " |"))
    print("|---|---|---|" + "---|" * len(builds) + ("---|" if baseline else ""))
    for row in rows:
        cells = [str(row[label + "_us"]) for label, _ in builds] + ([f"{row['ratio']}x"] if baseline else [])
        print(f"| {row['tokenizer']} | {row['size']} chars | `{row['method']}` | " + " | ".join(cells) + " |")
    return rows


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--short-child":
        name, size, count = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        short_child(name, sys.argv[sys.argv.index("--corpus") + 1], size, count)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizers", nargs="+", default=["qwen3", "bert-base-uncased"])
    ap.add_argument("--methods", nargs="*", default=METHODS, help="part 1's methods; none skips part 1")
    ap.add_argument("--threads", nargs="+", type=int, default=[1, os.cpu_count() or 1])
    ap.add_argument("--docs", type=int, default=6)
    ap.add_argument("--max-bytes", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-tokens", type=int, default=131072, help="0 skips part 2")
    ap.add_argument("--latency-rounds", type=int, default=5)
    ap.add_argument("--short-sizes", nargs="*", type=int, default=[], help="part 3's text sizes (characters)")
    ap.add_argument("--short-texts", type=int, default=600, help="part 3: texts per method, size and round")
    ap.add_argument("--short-baseline", help="part 3: a directory holding another build of the lopt package")
    ap.add_argument("--json", help="write every part's rows here")
    args = ap.parse_args()

    throughput = []
    if args.methods:
        throughput = bench_peers.main([
            "--corpus", args.corpus, "--tokenizers", *args.tokenizers, "--methods", *args.methods,
            "--threads", *map(str, args.threads), "--docs", str(args.docs),
            "--max-bytes", str(args.max_bytes), "--rounds", str(args.rounds)])
    latencies = []
    if args.latency_tokens:
        latencies = [latency(name, args.corpus, args.latency_tokens, args.latency_rounds)
                     for name in args.tokenizers]
        print("\n| tokenizer | prompt tokens | transformers `__call__` stock (ms) | accelerated (ms) | "
              "lopt threads | speedup |")
        print("|---|---|---|---|---|---|")
        for row in latencies:
            print(f"| {row['tokenizer']} | {row['tokens']} | {row['stock_ms']} | {row['lopt_ms']} | "
                  f"{row['threads']} | {row['speedup']}x |")
    short = []
    if args.short_sizes:
        short = short_calls(args.tokenizers, args.corpus, args.short_sizes, args.short_texts, args.rounds,
                            args.short_baseline)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"throughput": throughput, "latency": latencies, "short": short}, f, indent=1)


if __name__ == "__main__":
    main()
