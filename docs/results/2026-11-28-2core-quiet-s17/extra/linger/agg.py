# Medians per (tokenizer, mode, linger) of linger-ab.sh lines; speedup = per-document median 2t/1t
# inside each run; ratios against linger 0 are paired by round.
import re,sys,statistics as st
from collections import defaultdict
d=defaultdict(dict)
for f in sys.argv[1:]:
  for l in open(f):
    m=dict(re.findall(r'(\w+)=(\S+)',l))
    try:
      row=(float(m['speedup'].rstrip('x')),float(m['one']),float(m['two']),float(m['wake_last'] or 0),m['exact'],float(m.get('cpu2') or 'nan'),m.get('linger_call_deadline_busy',''),float(m['imbalance'] or 0))
    except (KeyError,ValueError): continue
    d[(f.split('/')[-1],m['tok'],m['mode'],m['v'])][m['r']]=row
for k in sorted(d, key=lambda k:(k[0],k[1],k[2],int(k[3]))):
  rows=list(d[k].values()); base=d.get(k[:3]+('0',),{})
  pair=[d[k][r][0]/base[r][0] for r in d[k] if r in base]
  ends=[r[6] for r in rows if r[6]]
  print(f"{k[0]:14s} {k[1]:16s} {k[2]} linger={k[3]:5s} n={len(rows):2d} speedup med={st.median(r[0] for r in rows):.2f} (vs 0 paired {st.median(pair):.3f}, {sum(x>1 for x in pair)}/{len(pair)}) 1t ms={st.median(r[1] for r in rows):.2f} 2t ms={st.median(r[2] for r in rows):.2f} 2t cpu ms={st.median(r[5] for r in rows):.2f} wake_last={st.median(r[3] for r in rows):.3f} imbalance={st.median(r[7] for r in rows):.3f} exact={set(r[4] for r in rows)} linger ends call/deadline/busy (last run)={ends[-1] if ends else '-'}")
