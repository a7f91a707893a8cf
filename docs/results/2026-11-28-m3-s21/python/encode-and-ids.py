import json, time, os, sys
docs=[json.loads(l)["text"][:1000000] for l,_ in zip(open('/work/en30.jsonl'), range(30))]
p='/work/shared/tokenizers/qwen3/tokenizer.json'
if sys.argv[1]=="lopt":
    import lopt; f=lopt.Tokenizer.from_file(p, threads=1)
else:
    os.environ["FASTOKENS_BPE_THREADS"]="1"; import fastokens; f=fastokens.Tokenizer.from_file(p)
f.encode(docs[0], add_special_tokens=False).ids; time.sleep(1)
te=ti=0; n=sum(len(d.encode()) for d in docs[1:])
for d in docs[1:]:
    t=time.perf_counter(); e=f.encode(d, add_special_tokens=False); t1=time.perf_counter(); ids=e.ids; t2=time.perf_counter(); del e, ids
    te+=t1-t; ti+=t2-t1
print(sys.argv[1], "encode %.0f ms (%.1f MB/s), .ids %.0f ms, total %.1f MB/s" % (te*1e3, n/1e6/te, ti*1e3, n/1e6/(te+ti)))
