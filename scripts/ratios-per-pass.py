#!/usr/bin/env python3
"""Per-pass ratios of a quiet run (scripts/quiet-run.sh): for each cell, lopt against the peer
(fastokens for BPE, nanotoken for BERT) computed inside each pass, then the median of the passes
and [each pass]. Ratios taken inside one pass survive a host whose speed drifts between passes,
which the medians of absolute MB/s (scripts/peers-median.py) do not.

    scripts/ratios-per-pass.py /work/quiet-sNN [METHOD]

METHOD is the lopt column to compare (default `lopt`; `lopt-base` for the session's start,
`lopt-ids` for ids only). Columns: METHOD / peer at 1 thread, METHOD at 2 threads / the peer's
best (1 or 2 threads), METHOD 2t / 1t, ids only / full at 1 and 2 threads (when the run has
`lopt-ids` and METHOD is `lopt`), METHOD / `lopt-base` at 1 and 2 threads, the peer's 1-thread
MB/s.
"""
import json
import os
import re
import statistics
import sys

if len(sys.argv) not in (2, 3):
    sys.exit("usage: ratios-per-pass.py OUT [METHOD]")
base = sys.argv[1]
method = sys.argv[2] if len(sys.argv) == 3 else "lopt"
passes = [base] + sorted(
    os.path.join(base, p)
    for p in os.listdir(base)
    if re.fullmatch(r"rerun\d*", p) and os.path.isdir(os.path.join(base, p))
)
FILES = {
    "peers-bpe-en_verylong.json": ("English", "fastokens"),
    "peers-bert-en_verylong.json": ("English", "nanotoken"),
    "peers-bpe-zh_long.json": ("Chinese", "fastokens"),
    "peers-bert-zh_long.json": ("Chinese", "nanotoken"),
}


def load(path):
    """(tokenizer, method, threads) -> MB/s of one pass's `bench_peers.py --json` file."""
    return {(r["tokenizer"], r["method"], r["threads"]): r["mb_per_s"] for r in json.load(open(path))}


rows = {}
for p in passes:
    for f, (lang, peer) in FILES.items():
        path = os.path.join(p, f)
        if not os.path.exists(path):
            continue
        cells = load(path)
        for tok in sorted({k[0] for k in cells}):
            m1, m2 = cells.get((tok, method, 1)), cells.get((tok, method, 2))
            p1, p2 = cells.get((tok, peer, 1)), cells.get((tok, peer, 2))
            if None in (m1, m2, p1):
                continue
            best = max(p1, p2 or 0)
            keys = ("1t", "2t", "scale", "ids1", "ids2", "base1", "base2", "peer")
            r = rows.setdefault((tok, lang), {k: [] for k in keys})
            r["1t"].append(m1 / p1)
            r["2t"].append(m2 / best)
            r["scale"].append(m2 / m1)
            r["peer"].append(p1)
            b1, b2 = cells.get((tok, "lopt-base", 1)), cells.get((tok, "lopt-base", 2))
            if method != "lopt-base" and b1 and b2:
                r["base1"].append(m1 / b1)
                r["base2"].append(m2 / b2)
            i1, i2 = cells.get((tok, "lopt-ids", 1)), cells.get((tok, "lopt-ids", 2))
            if method == "lopt" and i1 and i2:
                r["ids1"].append(i1 / m1)
                r["ids2"].append(i2 / m2)


def cell(values, digits=2, suffix="x"):
    if not values:
        return "-"
    each = "/".join(f"{v:.{digits}f}{suffix}" for v in values)
    return f"{statistics.median(values):.{digits}f}{suffix} [{each}]"


with_ids = any(r["ids1"] for r in rows.values())
with_base = any(r["base1"] for r in rows.values())
head = f"| cell ({method}) | / peer 1t | 2t / peer's best | 2t / 1t |"
head += " ids only / full 1t | ids only / full 2t |" if with_ids else ""
head += " / lopt-base 1t | / lopt-base 2t |" if with_base else ""
head += " peer 1t MB/s |"
print(head)
print("|---" * (head.count("|") - 1) + "|")
order = {"English": 0, "Chinese": 1}
for (tok, lang), r in sorted(rows.items(), key=lambda kv: (order[kv[0][1]], kv[0][0].startswith("bert"), kv[0][0])):
    line = f"| {tok} {lang} | {cell(r['1t'])} | {cell(r['2t'])} | {cell(r['scale'])} |"
    if with_ids:
        line += f" {cell(r['ids1'])} | {cell(r['ids2'])} |"
    if with_base:
        line += f" {cell(r['base1'], 3)} | {cell(r['base2'], 3)} |"
    line += f" {cell(r['peer'], 0, '')} |"
    print(line)
