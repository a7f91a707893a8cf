#!/usr/bin/env bash
# Where one thread's encode goes, lopt against fastokens (docs/benchmarks.md, "Per-thread speed
# against exact peers"): `perf record -e cpu-clock` of each engine encoding FILE once, minus a
# run that only loads (two one-letter documents: the workers warm up on the first), per symbol.
# The difference is the encode's samples (10 kHz: one sample is 0.1 ms), load and the harness's
# own work cancelling out.
#
#   OUT=/work/stages-sNN scripts/perf-stages.sh FILE.jsonl TOKENIZER...
#
# LOPT is the lopt binary (default target/release/lopt); PY a Python with fastokens. The
# fastokens rows count only its own symbols and the allocator's: its worker also hashes the ids
# in Python, outside the timed call.
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${OUT:?set OUT}"
FILE=$1; shift
LOPT=${LOPT:-target/release/lopt}
PY=${PY:-/work/venv-bench/bin/python}
mkdir -p "$OUT"
printf '{"text":"a"}\n{"text":"b"}\n' > "$OUT/load-only.jsonl"
profile() {  # $1: name; the rest: the command
  local name=$1; shift
  perf record -q -e cpu-clock -F 10000 -o "$OUT/$name.data" "$@" > "$OUT/$name.json" 2>/dev/null
  perf report -i "$OUT/$name.data" --no-children --sort sym --stdio -n 2>/dev/null | grep -v '^#' > "$OUT/$name.txt"
  rm -f "$OUT/$name.data"
}
for t in "$@"; do
  for input in "$FILE" "$OUT/load-only.jsonl"; do
    run=$(basename "$input" .jsonl)
    profile "lopt-$t-$run" "$LOPT" bench --seed-cache sync --threads 1 \
      --tokenizer "../shared/tokenizers/$t/tokenizer.json" "$input"
    FASTOKENS_BPE_THREADS=1 RAYON_NUM_THREADS=1 profile "fastokens-$t-$run" \
      "$PY" scripts/bench_peers.py --worker fastokens "../shared/tokenizers/$t/tokenizer.json" "$t" "$input" 0
  done
  for engine in lopt fastokens; do
    python3 - "$OUT/$engine-$t-$(basename "$FILE" .jsonl).txt" "$OUT/$engine-$t-load-only.txt" "$engine" <<'PY' | tee "$OUT/$engine-$t-stages.txt"
import collections, re, sys
def samples(path):
    counts = collections.Counter()
    for line in open(path):
        m = re.match(r"\s*[\d.]+%\s+(\d+)\s+\[.\]\s+(.*)", line)
        if m:
            counts[m.group(2).strip()[:120]] += int(m.group(1))
    return counts
full, load, engine = samples(sys.argv[1]), samples(sys.argv[2]), sys.argv[3]
diff = {k: v - load.get(k, 0) for k, v in full.items()}
if engine == "fastokens":
    diff = {k: v for k, v in diff.items() if re.search(r"fastokens|malloc|free|memmove|memcpy|memcmp|hashbrown", k)}
total = sum(v for v in diff.values() if v > 0)
print(f"{engine} {sys.argv[1]}: {total} encode samples ({total / 10:.0f} ms)")
for k, v in sorted(diff.items(), key=lambda kv: -kv[1])[:20]:
    print(f"{v:7d} {100 * v / total:5.1f}%  {k}")
PY
  done
done
