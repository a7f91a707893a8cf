#!/usr/bin/env bash
# The 2-core quiet run at a session's end (docs/benchmarks.md, "Per-thread speed against exact
# peers"): peers against lopt and its start in three passes, the 1-vs-2-thread A/B of two builds,
# pathological inputs, load, the first encode, exactness against HF and perf profiles.
#
#   OUT=/work/quiet-sNN BASE=/work/base-sNN scripts/quiet-run.sh
#
# BASE holds release binaries (lopt, load, prefix) of the session's start; this checkout's
# target/release must hold the build being measured (cargo build --release -p lopt-cli -p
# lopt-bench). DATA holds the test files: en30.jsonl and zh20.jsonl (the first 30 / 20 documents
# of at least 200 KB of en_verylong / zh_long, cut to 1 MB), l7-en.jsonl (ten 200 KB English
# documents) and patho-in4/ (`scripts/make_pathological.py DATA/patho-in4 --docs 4`: 200 KB of
# prose, then four 1 MB documents of each input; one 1 MB document's CPU time moves in steps of
# 4 ms, too coarse for the pathological ratios). PY is a Python with fastokens, nanotoken and tokenizers installed.
# Set PREFIX=1 to add the prefix-reuse run. Run it on a quiet machine: about 15 minutes on 2 cores.
# PEERS_ONLY=1 runs only the three peer passes, without `lopt-base` (BASE may then be unset;
# about 18 minutes on M3): the peers table of one build.
# scripts/peers-median.py "$OUT" prints the peers table, median of the three passes;
# scripts/ratios-per-pass.py "$OUT" [lopt-base] the ratios to the peers taken inside each pass.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${OUT:?set OUT}"
DATA=${DATA:-/work}
PY=${PY:-/work/venv-bench/bin/python}
mkdir -p "$OUT"

# One pass of the peers into folder $1, lopt's columns $2 (8 fresh 1 MB documents, 3 rounds).
peer_pass() {
  for c in en_verylong zh_long; do
    $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers qwen3 llama3_1 deepseek_v3 gptoss \
      --methods fastokens $2 --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 --json $1/peers-bpe-$c.json > $1/peers-bpe-$c.log 2>&1
    $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers bert-base-cased \
      --methods nanotoken $2 --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 --json $1/peers-bert-$c.json > $1/peers-bert-$c.log 2>&1
  done
}

if [ -n "${PEERS_ONLY:-}" ]; then
  git rev-parse --short HEAD | tee $OUT/run.log
  for pass in . rerun rerun2; do
    mkdir -p $OUT/$pass
    echo "pass $pass start $(date -u) $(uptime)" | tee -a $OUT/run.log
    peer_pass $OUT/$pass "lopt lopt-ids"
  done
  echo "end $(date -u) $(uptime)" | tee -a $OUT/run.log
  exit 0
fi
: "${BASE:?set BASE}"
B=$BASE
echo "start $(date -u) $(uptime)" | tee $OUT/run.log
git rev-parse --short HEAD | tee -a $OUT/run.log
export LOPT_BASE_BIN=$B/lopt
peer_pass $OUT "lopt-base lopt lopt-ids"
echo "== 30/20 docs, 1 vs 2 threads, alternating builds ($(uptime))" | tee -a $OUT/run.log
for r in 1 2 3 4 5 6; do for f in en30 zh20; do for t in qwen3 llama3_1 deepseek_v3 bert-base-cased; do for th in 1 2; do
  bins="$B/lopt target/release/lopt"; (( r % 2 == 0 )) && bins="target/release/lopt $B/lopt"
  for b in $bins; do
    out=$($b bench --tokenizer ../shared/tokenizers/$t/tokenizer.json --threads $th --seed-cache sync $DATA/$f.jsonl 2>&1)
    mbs=$(echo "$out" | grep -o "\"mb_per_s\":[0-9.]*" | tail -1); cpu=$(echo "$out" | grep -o "\"cpu_seconds\":[0-9.]*" | tail -1)
    echo "round=$r corpus=$f tok=$t threads=$th bin=$b $mbs $cpu" | tee -a $OUT/scaling.log
  done; done; done; done; done
echo "== pathological, new binary, 1 thread, sync seed ($(uptime))" | tee -a $OUT/run.log
echo "round,tokenizer,input,cpu_mb_per_s,wall_mb_per_s" > $OUT/patho.csv
for r in 1; do for t in qwen3 deepseek_v3 llama3_1 gptoss gpt2 gpt4o claude gemma3 llama2; do for i in prose zh one_letter spaces digits one_cjk base64 minified_js; do
  json=$(target/release/lopt bench --seed-cache sync --threads 1 --tokenizer ../shared/tokenizers/$t/tokenizer.json $DATA/patho-in4/$i.jsonl 2>/dev/null)
  python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(f\"$r,$t,$i,{d['bytes']/1e6/d['cpu_seconds']:.2f},{d['mb_per_s']:.2f}\")" "$json" >> $OUT/patho.csv
done; done; done
if [ -n "${PREFIX:-}" ]; then echo "== prefix, qwen3 only (no SentencePiece change this session) ($(uptime))" | tee -a $OUT/run.log
for b in $B/prefix target/release/prefix; do echo "== $b qwen3" | tee -a $OUT/prefix.log
  $b --tokenizer qwen3 --corpus ../shared/corpora/en_verylong.jsonl --rounds 6 --hf-rounds 0 --questions 50 2>&1 | tee -a $OUT/prefix.log | tail -30; done; fi
echo "== pathological A/B, start vs final, 3 rounds ($(uptime))" | tee -a $OUT/run.log
for r in 1 2 3; do
  for cell in "claude zh" "qwen3 digits" "qwen3 base64" "llama3_1 base64" "gpt2 digits" "claude digits" "gemma3 base64" "qwen3 prose" "claude prose" "llama3_1 prose" "gptoss zh"; do
    set -- $cell
    bins="$B/lopt target/release/lopt"; (( r % 2 == 0 )) && bins="target/release/lopt $B/lopt"
    for b in $bins; do
      o=$($b bench --seed-cache sync --threads 1 --tokenizer ../shared/tokenizers/$1/tokenizer.json $DATA/patho-in4/$2.jsonl 2>/dev/null)
      echo "round=$r tok=$1 input=$2 bin=$b $o" >> $OUT/patho-ab.log
    done
  done
done
echo "== load ($(uptime))" | tee -a $OUT/run.log
$B/load --rounds 5 2>&1 | tee $OUT/load-base.log | tail -30
target/release/load --rounds 5 2>&1 | tee $OUT/load.log | tail -30
echo "== first encode after load, background vs sync seed ($(uptime))" | tee -a $OUT/run.log
target/release/load --first-encode $DATA/l7-en.jsonl --rounds 3 --only qwen3,deepseek_v3,llama3_1 --settle-ms 1500 2>&1 | tee $OUT/first-encode.log | tail -30
echo "== exactness vs HF ($(uptime))" | tee -a $OUT/run.log
for c in en_verylong zh_long; do
  $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers qwen3 llama3_1 deepseek_v3 bert-base-cased gemma3 llama2 \
    --methods hf lopt lopt-ids --threads 2 --docs 2 --max-bytes 1000000 --rounds 1 --json $OUT/exact-$c.json 2>&1 | grep "^|" | tee -a $OUT/exact.log
done
echo "== perf profiles, qwen3 en30, 1 thread: lopt and fastokens ($(uptime))" | tee -a $OUT/run.log
perf record -q -e cpu-clock -F 2000 -o $OUT/perf-lopt.data target/release/lopt bench --seed-cache sync --threads 1 --tokenizer ../shared/tokenizers/qwen3/tokenizer.json $DATA/en30.jsonl > $OUT/perf-lopt.json 2>/dev/null
perf report -i $OUT/perf-lopt.data --no-children --sort sym --stdio 2>/dev/null | grep -v "^#" | head -40 > $OUT/perf-lopt.txt
FASTOKENS_BPE_THREADS=1 RAYON_NUM_THREADS=1 perf record -q -e cpu-clock -F 2000 -o $OUT/perf-fastokens.data $PY scripts/bench_peers.py --worker fastokens ../shared/tokenizers/qwen3/tokenizer.json qwen3 $DATA/en30.jsonl 0 > $OUT/perf-fastokens.json 2>/dev/null
perf report -i $OUT/perf-fastokens.data --no-children --sort dso,sym --stdio 2>/dev/null | grep -v "^#" | head -40 > $OUT/perf-fastokens.txt
rm -f $OUT/perf-*.data
# Two more peer passes, for a median of three.
for pass in rerun rerun2; do
P=$OUT/$pass; mkdir -p $P
echo "$pass start $(date -u) $(uptime)" | tee $P/run.log
peer_pass $P "lopt-base lopt lopt-ids"
echo "$pass end $(date -u) $(uptime)" | tee -a $P/run.log
done
echo "end $(date -u) $(uptime)" | tee -a $OUT/run.log
