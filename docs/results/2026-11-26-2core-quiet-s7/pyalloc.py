"""CPU time per MB of lopt-py encodes on fresh documents (warm-up on doc 0), one thread."""
import json, resource, sys, time
import lopt
tok_name, docs_file, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
docs = [json.loads(l)["text"] for l in open(docs_file, encoding="utf-8")]
tok = lopt.Tokenizer.from_file(f"/work/shared/tokenizers/{tok_name}/tokenizer.json", threads=threads)
tok.encode(docs[0], add_special_tokens=False).ids
time.sleep(0.5)  # let any background seed finish
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
cpu = wall = 0.0
size = 0
for d in docs[1:]:
    c, w = time.process_time(), time.perf_counter()
    ids = tok.encode(d, add_special_tokens=False).ids
    cpu += time.process_time() - c; wall += time.perf_counter() - w
    size += len(d.encode())
f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
print(json.dumps({"cpu_mb_s": round(size / 1e6 / cpu, 1), "wall_mb_s": round(size / 1e6 / wall, 1), "faults": f1 - f0}))
