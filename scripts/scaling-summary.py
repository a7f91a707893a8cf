#!/usr/bin/env python3
"""Summarizes the quiet run's `scaling.log` (scripts/quiet-run.sh: the session's start and final
builds alternating, `lopt bench --seed-cache sync` at 1 and 2 threads): per corpus and tokenizer,
the median of the per-round MB/s ratios now / start with the rounds where now is faster, and each
build's 2t / 1t from the medians.

    scripts/scaling-summary.py OUT/scaling.log
"""
import re, sys, statistics as st
from collections import defaultdict
d = defaultdict(dict)
for l in open(sys.argv[1]):
    m = re.match(r'round=(\d+) corpus=(\S+) tok=(\S+) threads=(\d+) bin=(\S+) "mb_per_s":([0-9.]+) "cpu_seconds":([0-9.]+)', l)
    if not m: continue
    r, c, t, th, b, mbs, cpu = m.groups()
    d[(c, t, int(th))].setdefault(int(r), {})['new' if b.startswith('target') else 'base'] = float(mbs)
print("| corpus tok | now/start 1t (wins) | now/start 2t (wins) | 2t/1t start | 2t/1t now |")
keys = sorted({(c, t) for c, t, _ in d})
for c, t in keys:
    out = []
    med = {}
    for th in (1, 2):
        rs = d[(c, t, th)]
        pairs = [(v['base'], v['new']) for v in rs.values() if 'base' in v and 'new' in v]
        rat = [n / b for b, n in pairs]
        out.append(f"{st.median(rat):.3f} ({sum(x > 1 for x in rat)}/{len(rat)})")
        med[th] = (st.median([b for b, _ in pairs]), st.median([n for _, n in pairs]))
    print(f"| {c} {t} | {out[0]} | {out[1]} | {med[2][0]/med[1][0]:.2f} | {med[2][1]/med[1][1]:.2f} |")
