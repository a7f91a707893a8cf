#!/usr/bin/env bash
# A one-thread A/B of two lopt builds that holds on a host whose speed drifts (M3 moved ±30 %
# between back-to-back calls of one binary even when idle): each round runs both builds at the
# same time, each pinned to one of the machine's two cores, and swaps the cores every round, so
# that both see the same moment of the host and each core as often. The figure is CPU seconds,
# base / new, per cell; the summary at the end prints median and pairs.
#
#   BASE=/work/base-sNN/lopt NEW=target/release/lopt OUT=/tmp/paired.log ROUNDS=8 scripts/paired-ab.sh
#
# CELLS: "file:tokenizer ..." with file under DATA (default /work: en30, zh20, patho-in4/*).
# Needs two idle cores: anything else running skews the core it runs on.
set -u
: "${BASE:?set BASE}" "${NEW:?set NEW}" "${OUT:?set OUT}"
ROUNDS=${ROUNDS:-8}; DATA=${DATA:-/work}; TOK=${TOK:-/work/shared/tokenizers}
CELLS=${CELLS:-"en30:qwen3 en30:llama3_1 en30:deepseek_v3 en30:gptoss zh20:qwen3 zh20:deepseek_v3 patho-in4/base64:qwen3 patho-in4/base64:llama3_1"}
tmp=$(mktemp -d)
for r in $(seq 1 "$ROUNDS"); do for c in $CELLS; do f=${c%%:*}; t=${c##*:}
  if (( r % 2 )); then cb=0; cn=1; else cb=1; cn=0; fi
  args=(bench --tokenizer "$TOK/$t/tokenizer.json" --threads 1 --seed-cache sync "$DATA/$f.jsonl")
  taskset -c $cb "$BASE" "${args[@]}" > "$tmp/b.json" 2>/dev/null & pb=$!
  taskset -c $cn "$NEW" "${args[@]}" > "$tmp/n.json" 2>/dev/null & pn=$!
  wait $pb $pn
  cpub=$(grep -o '"cpu_seconds":[0-9.]*' "$tmp/b.json" | tail -1 | cut -d: -f2)
  cpun=$(grep -o '"cpu_seconds":[0-9.]*' "$tmp/n.json" | tail -1 | cut -d: -f2)
  echo "round=$r file=$f tok=$t core_base=$cb cpu_base=$cpub cpu_new=$cpun" >> "$OUT"
done; done
rm -rf "$tmp"
python3 - "$OUT" <<'PY'
import collections, statistics, sys
cells = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kv = dict(x.split("=", 1) for x in line.split())
    if kv.get("cpu_base") and kv.get("cpu_new"):
        cells[(kv["file"], kv["tok"])].append(float(kv["cpu_base"]) / float(kv["cpu_new"]))
print("| file | tokenizer | base CPU / new CPU, median (pairs > 1) | range |")
print("|---|---|---|---|")
for (f, t), v in sorted(cells.items()):
    print(f"| {f} | {t} | {statistics.median(v):.3f} ({sum(x > 1 for x in v)}/{len(v)}) | {min(v):.2f}-{max(v):.2f} |")
PY
