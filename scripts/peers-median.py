#!/usr/bin/env python3
"""The peers table of a quiet run (scripts/quiet-run.sh): median of its passes (OUT, OUT/rerun,
OUT/rerun2 and any further OUT/rerunN a noisy machine called for) per tokenizer, language, method
and thread count, in docs/benchmarks.md's columns.

    scripts/peers-median.py /work/quiet-sNN
"""
import re,statistics as st,collections,sys,os
if len(sys.argv)!=2: sys.exit("usage: peers-median.py OUT")
base=sys.argv[1]
passes=[base]+sorted(os.path.join(base,p) for p in os.listdir(base) if re.fullmatch(r'rerun\d*',p) and os.path.isdir(os.path.join(base,p)))
d=collections.defaultdict(list)
for p in passes:
    for f in ['peers-bpe-en_verylong.log','peers-bpe-zh_long.log','peers-bert-en_verylong.log','peers-bert-zh_long.log']:
        fp=os.path.join(p,f)
        if not os.path.exists(fp): continue
        lang='English' if 'en_' in f else 'Chinese'
        for l in open(fp):
            m=re.match(r'\| (\S+) \| (\S+) \| (\d) \| ([\d.]+) \|',l)
            if m: d[(m.group(1),lang,m.group(2),int(m.group(3)))].append(float(m.group(4)))
print("passes:",len(passes))
rows=[]
for lang in ['English','Chinese']:
  for t in ['qwen3','llama3_1','deepseek_v3','gptoss','bert-base-cased']:
    peer='nanotoken' if 'bert' in t else 'fastokens'
    g=lambda m,th: st.median(d[(t,lang,m,th)]) if d[(t,lang,m,th)] else float('nan')
    rng=lambda m,th: "/".join(f"{x:.0f}" for x in d[(t,lang,m,th)])
    p1,p2=g(peer,1),g(peer,2); s1,s2=g('lopt-base',1),g('lopt-base',2); n1,n2=g('lopt',1),g('lopt',2); i1,i2=g('lopt-ids',1),g('lopt-ids',2)
    best=max(p1,p2)
    print(f"| {t}, {lang} ({peer}) | {p1:.1f} / {p2:.1f} | {s1:.1f} / {s2:.1f} | {n1:.1f} / {n2:.1f} | {i1:.1f} / {i2:.1f} | {n1/p1:.2f}x | {i1/p1:.2f}x | {n2/best:.2f}x | {i1/n1:.2f}x | {n2/n1:.2f}x |   lopt1t passes {rng('lopt',1)} peer1t {rng(peer,1)}")
