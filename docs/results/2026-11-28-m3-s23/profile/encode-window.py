import json, time, sys
texts=[json.loads(l)["text"] for l in open(sys.argv[2])]
kind=sys.argv[3]
if kind=="lopt":
    import lopt
    tok = lopt.Tokenizer.from_file(sys.argv[1], threads=1)
    enc=lambda t: tok.encode(t, add_special_tokens=False).ids
else:
    import os; os.environ["FASTOKENS_BPE_THREADS"]="1"
    import fastokens
    tok = fastokens.Tokenizer.from_file(sys.argv[1])
    enc=lambda t: tok.encode(t, add_special_tokens=False).ids
enc(texts[0]); time.sleep(1.5)
a=time.monotonic()
for t in texts[1:]:
    enc(t)
b=time.monotonic()
print(f"{a:.6f},{b:.6f}", file=sys.stderr)
