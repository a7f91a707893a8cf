import json, re, sys, statistics as st
from collections import defaultdict
d = defaultdict(list); cpu = defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"ab round=(\d+) bin=(\S+) tok=(\S+) corpus=(\S+) threads=(\d+) (\{.*\})", line)
    if not m: continue
    r, b, t, c, th, js = m.groups(); j = json.loads(js)
    d[(t, c, int(th), b)].append(j["mb_per_s"]); cpu[(t, c, int(th), b)].append(j["cpu_seconds"])
bins = sorted({k[3] for k in d})
rows = sorted({(k[0], k[1]) for k in d}, key=lambda x: (x[1], x[0]))
ths = sorted({k[2] for k in d})
print("| tok | corpus | " + " | ".join(f"{b} {th}t" for th in ths for b in bins) + " | new/base " + " ".join(f"{th}t" for th in ths) + " | 16t/1t " + " ".join(bins) + " |")
for t, c in rows:
    cells = []; ratios = []
    for th in ths:
        for b in bins:
            cells.append(f"{st.median(d[(t,c,th,b)]):.1f}")
        ratios.append(f"{st.median(d[(t,c,th,'lopt')])/st.median(d[(t,c,th,'lopt-base')]):.2f}")
    sp = [f"{st.median(d[(t,c,max(ths),b)])/st.median(d[(t,c,min(ths),b)]):.1f}x" for b in bins]
    print(f"| {t} | {c} | " + " | ".join(cells) + " | " + " ".join(ratios) + " | " + " ".join(sp) + " |")
