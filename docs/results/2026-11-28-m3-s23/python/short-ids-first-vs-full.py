import json, time, sys, statistics
import lopt
size=int(sys.argv[1])
texts=[]
for l in open("/work/en30.jsonl"):
    t=json.loads(l)["text"]
    for i in range(0, 300000, size):
        texts.append(t[i:i+size])
    if len(texts)>8000: break
p="../shared/tokenizers/qwen3/tokenizer.json"
a = lopt.Tokenizer.from_file(p, threads=1); b = lopt.Tokenizer.from_file(p, threads=1)
b.encode("warm").offsets  # b encodes in full from now on
assert a.encode("x")._ids_first and not b.encode("x")._ids_first
for t in texts[:500]: a.encode(t).ids; b.encode(t).ids
time.sleep(1)
T=time.perf_counter; da=[]; db=[]
for i,t in enumerate(texts[500:8000]):
    order=[(a,da),(b,db)] if i%2 else [(b,db),(a,da)]
    for tok,d in order:
        s=T(); tok.encode(t, add_special_tokens=False).ids; d.append(T()-s)
r=[x/y for x,y in zip(db,da)]
print(f"{size} B texts: ids-first median {statistics.median(da)*1e6:.1f} us, full {statistics.median(db)*1e6:.1f} us, full/ids-first per text median {statistics.median(r):.3f}")
