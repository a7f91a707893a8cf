#!/usr/bin/env python3
"""Fresh-document throughput of lopt and its peers on the same documents, in the same run.

Every (tokenizer, method, threads) cell runs in its own process: it loads the tokenizer, encodes
the first document to warm up, then encodes every other document once ("fresh documents": a
server sees new prompts) and reports MB/s = bytes / sum of per-document encode times, plus a hash
of the ids of each document so that exactness is checked against HF `tokenizers`. Cells are run
in rounds, in rotating order, and the median MB/s over rounds is reported, so that a noisy
machine affects all methods alike.

    python3 scripts/bench_peers.py --corpus ../shared/corpora/en_verylong.jsonl \
        --tokenizers qwen3 bert-base-cased --docs 6 --max-bytes 1000000 --rounds 3

Short prompts: `--cut-bytes 1024 --docs 2000` cuts the corpus into texts of about 1 KB (at char
boundaries) and times one call per text; every row then also has the median and 90th percentile
of the per-call time in microseconds. `--batch 1000` times `encode_batch` of 1,000 texts per call
instead (peers with a batch call only).

Peers are the PyPI packages `tokenizers` (HF), `tiktoken`, `fastokens`, `gigatoken`, `nanotoken`
and `tokie`; missing ones are skipped. lopt runs through `target/release/lopt bench` (or `$LOPT_BIN`);
`lopt` returns offsets and word ids too, `lopt-ids` ids only (`--ids-only`), as the peers do.
Methods that go through Python (`scripts/bench_python.py` selects them): `hf-batch` (HF
`encode_batch` of all timed documents in one call), `transformers` / `transformers-lopt`
(`AutoTokenizer` on the tokenizer's folder, stock / `lopt.accelerate`d, `tok(text)`), `lopt-py`
(`lopt.Tokenizer.encode`) and `lopt-py-batch` (`lopt.Tokenizer.encode_batch` of all timed
documents).
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BPE = {"qwen3", "deepseek_v3", "llama3_1", "gptoss", "gpt2", "gemma3", "llama2"}
TIKTOKEN = {"gpt2": "gpt2", "gptoss": "o200k_harmony"}
# `--seed-cache` of the lopt runs (set from the command line).
SEED_CACHE = "background"


def tokenizer_path(name):
    for base in (os.environ.get("LOPT_SHARED", os.path.join(ROOT, "..", "shared")) + "/tokenizers",
                 os.path.join(ROOT, "fixtures", "tokenizers")):
        path = os.path.join(base, name, "tokenizer.json")
        if os.path.exists(path):
            return path
    return name if os.path.exists(name) else None


def tiktoken_encoding(path, name):
    """tiktoken's own encoding for the vocabulary, else one built from the tokenizer.json.

    tiktoken downloads its encodings' files at first use, from outside the package registries;
    where that fails, a byte-level BPE tokenizer.json without a normalizer gives the same
    encoding (its ids as merge ranks, its `Split` regex, its added tokens as special tokens).
    Whether the vocabulary allows it shows in the exact-match column.
    """
    import tiktoken
    if name in TIKTOKEN:
        try:
            return tiktoken.get_encoding(TIKTOKEN[name])
        except Exception:  # noqa: BLE001 - no network: build it below
            pass
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    pre = data.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre])
    splits = [p["pattern"]["Regex"] for p in steps if p.get("type") == "Split" and "Regex" in p.get("pattern", {})]
    if data["model"]["type"] != "BPE" or data.get("normalizer") or len(splits) != 1 \
            or not any(p.get("type") == "ByteLevel" for p in steps):
        raise ValueError("no tiktoken encoding for this vocabulary")
    # GPT-2's byte <-> printable character table, as in HF's ByteLevel.
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = printable + [256 + n for n in range(256 - len(printable))]
    byte_of = dict(zip(map(chr, chars), [*printable, *(b for b in range(256) if b not in printable)]))
    ranks = {bytes(byte_of[c] for c in token): rank for token, rank in data["model"]["vocab"].items()}
    specials = {t["content"]: t["id"] for t in data.get("added_tokens", [])}
    return tiktoken.Encoding(name, pat_str=splits[0], mergeable_ranks=ranks, special_tokens=specials)


def load_encoder(method, path, name):
    """Returns text -> list-like of ids for one peer, or raises ImportError/ValueError."""
    if method == "hf":
        import tokenizers
        tok = tokenizers.Tokenizer.from_file(path)
        return lambda text: tok.encode(text, add_special_tokens=False).ids
    if method == "tiktoken":
        enc = tiktoken_encoding(path, name)
        return lambda text: enc.encode(text, allowed_special="all")
    if method in ("transformers", "transformers-lopt"):
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(os.path.dirname(path))
        if method == "transformers-lopt":
            import lopt
            lopt.accelerate(tok)
        return lambda text: tok(text, add_special_tokens=False)["input_ids"]
    if method == "lopt-py":
        import lopt
        tok = lopt.Tokenizer.from_file(path)
        return lambda text: tok.encode(text, add_special_tokens=False).ids
    if method == "fastokens":
        import fastokens
        tok = fastokens.Tokenizer.from_file(path)
        return lambda text: tok.encode(text, add_special_tokens=False).ids
    if method == "gigatoken":
        import gigatoken
        if name not in BPE:
            raise ValueError("BPE only")
        tok = gigatoken.Tokenizer(path)
        return lambda text: tok.encode(text)
    if method == "nanotoken":
        import nanotoken
        if name in BPE:
            raise ValueError("WordPiece only")
        tok = nanotoken.Tokenizer(path)
        return lambda text: tok.encode(text, add_special_tokens=False)
    if method == "tokie":
        import tokie
        tok = tokie.Tokenizer.from_json(path)
        return lambda text: tok.encode(text, add_special_tokens=False).ids
    raise ValueError(method)


def digest(ids):
    return hashlib.sha1(",".join(str(int(i)) for i in ids).encode()).hexdigest()[:16]


def load_batch_encoder(method, path, name):
    """Returns texts -> list of id lists through the peer's own batch call."""
    if method == "hf":
        import tokenizers
        tok = tokenizers.Tokenizer.from_file(path)
        return lambda texts: [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    if method == "fastokens":
        import fastokens
        tok = fastokens.Tokenizer.from_file(path)
        return lambda texts: [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    if method == "gigatoken":
        import gigatoken
        if name not in BPE:
            raise ValueError("BPE only")
        tok = gigatoken.Tokenizer(path)
        return lambda texts: tok.encode_batch(texts)
    if method == "lopt-py":
        import lopt
        tok = lopt.Tokenizer.from_file(path)
        return lambda texts: [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    raise ValueError(f"{method}: no batch call")


def quantile(values, q):
    ordered = sorted(values)
    return ordered[round((len(ordered) - 1) * q)] if ordered else 0.0


def worker(method, path, name, docs_file, batch="0"):
    docs = [json.loads(line)["text"] for line in open(docs_file, encoding="utf-8")]
    batch = int(batch)
    if method.endswith("-batch"):  # `hf-batch`, `lopt-py-batch`: all timed documents in one call
        method, batch = method[: -len("-batch")], len(docs)
    calls, hashes = [], []
    if batch:
        encode = load_batch_encoder(method, path, name)
        encode(docs[:1])
        for i in range(1, len(docs), batch):
            start = time.perf_counter()
            all_ids = encode(docs[i:i + batch])
            calls.append(time.perf_counter() - start)
            hashes.extend(digest(ids) for ids in all_ids)
    else:
        encode = load_encoder(method, path, name)
        encode(docs[0])
        for doc in docs[1:]:
            start = time.perf_counter()
            ids = encode(doc)
            calls.append(time.perf_counter() - start)
            hashes.append(digest(ids))
    size = sum(len(d.encode("utf-8")) for d in docs[1:])
    print(json.dumps({"mb_per_s": size / 1e6 / sum(calls), "hashes": hashes,
                      "median_us": quantile(calls, 0.5) * 1e6, "p90_us": quantile(calls, 0.9) * 1e6}))


def run_cell(method, threads, path, name, docs_file, batch=0):
    # Python methods whose thread count is the point get their threads; the rest run sequentially.
    parallel = method in ("hf-batch", "lopt-py", "lopt-py-batch", "transformers-lopt")
    # fastokens runs its own pool, sized by FASTOKENS_BPE_THREADS (default: every core), not by
    # RAYON_NUM_THREADS: without it, its "1 thread" cells ran on every core.
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), FASTOKENS_BPE_THREADS=str(threads),
               TOKENIZERS_PARALLELISM=str(parallel).lower())
    if batch and method in ("hf", "fastokens"):
        # Their batch calls are parallel: give them their default threads (all cores).
        env.pop("RAYON_NUM_THREADS")
        env.pop("FASTOKENS_BPE_THREADS")
        env["TOKENIZERS_PARALLELISM"] = "true"
    if method in ("lopt", "lopt-hf", "lopt-base", "lopt-ids"):
        engine = "hf" if method == "lopt-hf" else "auto"
        # `lopt-base`: a second lopt binary (e.g. a copy of main's build) measured in the same run.
        default = os.environ.get("LOPT_BIN", os.path.join(ROOT, "target", "release", "lopt"))
        binary = os.environ.get("LOPT_BASE_BIN", default) if method == "lopt-base" else default
        cmd = [binary, "bench", "--tokenizer", path,
               "--threads", str(threads), "--engine", engine, "--no-special-tokens", "--print-ids", docs_file]
        if batch:
            cmd[-1:-1] = ["--batch", str(batch)]
        if method == "lopt-ids":
            # Ids only, as the peers return them (no offsets, no word ids).
            cmd[-1:-1] = ["--ids-only"]
        if SEED_CACHE != "background":
            # Only when asked: an older `lopt-base` binary may not know the flag.
            cmd[-1:-1] = ["--seed-cache", SEED_CACHE]
    else:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", method, path, name, docs_file, str(batch)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return None
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if "ids" in result:
        result["hashes"] = [digest(ids) for ids in result.pop("ids")]
    return result


def main(argv=None):
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        try:
            worker(*sys.argv[2:7])
        except (ImportError, ValueError) as err:
            print(err, file=sys.stderr)
            sys.exit(3)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizers", nargs="+", default=["qwen3", "bert-base-cased"])
    ap.add_argument("--methods", nargs="+",
                    default=["hf", "tiktoken", "fastokens", "gigatoken", "nanotoken", "tokie", "lopt"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--docs", type=int, default=6, help="timed documents (one more warms up)")
    ap.add_argument("--max-bytes", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cut-bytes", type=int, default=0,
                    help="cut the corpus into texts of about this many bytes (short prompts)")
    ap.add_argument("--batch", type=int, default=0, help="time encode_batch of this many texts per call")
    ap.add_argument("--seed-cache", choices=["background", "sync", "off"], default="sync",
                    help="lopt's seeded pre-token cache: built before timing (default: a warmed-up process, whose first documents are the fresh ones), in the background (right after loading, sharing the pool with the first encodes), or never")
    ap.add_argument("--json", help="write the rows here too")
    args = ap.parse_args(argv)
    global SEED_CACHE
    SEED_CACHE = args.seed_cache

    docs = []
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            raw = json.loads(line)["text"].encode("utf-8")[: args.max_bytes]
            pieces = [raw[i:i + args.cut_bytes] for i in range(0, len(raw), args.cut_bytes)] if args.cut_bytes else [raw]
            for piece in pieces:
                if args.cut_bytes and len(piece) < args.cut_bytes:
                    continue
                docs.append({"text": piece.decode("utf-8", "ignore")})
                if len(docs) > args.docs:
                    break
            if len(docs) > args.docs:
                break
    fd, docs_file = tempfile.mkstemp(suffix=".jsonl")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")

    rows = []
    for name in args.tokenizers:
        path = tokenizer_path(name)
        if path is None:
            print(f"NOTICE: tokenizer {name} not found; skipped", file=sys.stderr)
            continue
        sequential = ("hf", "tiktoken", "transformers")
        cells = [(m, t) for m in args.methods for t in (args.threads if m not in sequential else [1])]
        results = {c: [] for c in cells}
        reference = None
        for r in range(args.rounds):
            order = cells[r % len(cells):] + cells[: r % len(cells)]
            for method, threads in order:
                out = run_cell(method, threads, path, name, docs_file, args.batch)
                if out is None:
                    continue
                results[(method, threads)].append(out)
                if method == "hf":
                    reference = out["hashes"]
        for (method, threads), outs in results.items():
            if not outs:
                continue
            exact = reference is not None and all(o["hashes"] == reference for o in outs)
            # Documents whose ids equal HF's in every round.
            equal_docs = 0 if reference is None else sum(
                all(o["hashes"][i] == ref for o in outs) for i, ref in enumerate(reference))
            row = {"tokenizer": name, "method": method, "threads": threads,
                   "mb_per_s": round(statistics.median(o["mb_per_s"] for o in outs), 1),
                   "exact_ids": exact, "equal_docs": equal_docs, "rounds": len(outs),
                   "corpus": os.path.basename(args.corpus), "docs": len(docs) - 1}
            if "median_us" in outs[0]:
                row["median_us"] = round(statistics.median(o["median_us"] for o in outs), 1)
                row["p90_us"] = round(statistics.median(o["p90_us"] for o in outs), 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    os.unlink(docs_file)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print("\n| tokenizer | method | threads | MB/s | median us/call | texts with ids equal to HF |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['tokenizer']} | {row['method']} | {row['threads']} | {row['mb_per_s']} | "
              f"{row.get('median_us', '-')} | {row['equal_docs']}/{row['docs']} |")
    return rows


if __name__ == "__main__":
    main()
