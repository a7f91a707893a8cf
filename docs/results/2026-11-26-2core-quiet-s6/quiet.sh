#!/usr/bin/env bash
# Quiet end-of-session measurements (session 6). Run from /work/main after the final landing.
set -u
cd /work/main
OUT=/work/quiet-s6; mkdir -p $OUT
PY=/work/venv-bench/bin/python
B=/work/base-s6
echo "start $(date -u) $(uptime)" | tee $OUT/run.log
cargo build --release -p lopt-cli -p lopt-bench 2>&1 | tail -2
git rev-parse --short HEAD | tee -a $OUT/run.log
export LOPT_BASE_BIN=$B/lopt
for c in en_verylong zh_long; do
  $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers qwen3 llama3_1 deepseek_v3 \
    --methods fastokens lopt-base lopt --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 --json $OUT/peers-bpe-$c.json 2>&1 | tee $OUT/peers-bpe-$c.log | grep "^|"
  $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers bert-base-cased \
    --methods nanotoken lopt-base lopt --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 --json $OUT/peers-bert-$c.json 2>&1 | tee $OUT/peers-bert-$c.log | grep "^|"
done
echo "== 30/20 docs, 1 vs 2 threads, alternating builds ($(uptime))" | tee -a $OUT/run.log
for r in 1 2 3 4 5 6; do for f in en30 zh20; do for t in qwen3 llama3_1 deepseek_v3 bert-base-cased; do for th in 1 2; do
  bins="$B/lopt target/release/lopt"; (( r % 2 == 0 )) && bins="target/release/lopt $B/lopt"
  for b in $bins; do
    out=$($b bench --tokenizer ../shared/tokenizers/$t/tokenizer.json --threads $th /tmp/$f.jsonl 2>&1)
    mbs=$(echo "$out" | grep -o "\"mb_per_s\":[0-9.]*" | tail -1); cpu=$(echo "$out" | grep -o "\"cpu_seconds\":[0-9.]*" | tail -1)
    echo "round=$r corpus=$f tok=$t threads=$th bin=$b $mbs $cpu" | tee -a $OUT/scaling.log
  done; done; done; done; done
echo "== pathological, new binary, 1 thread, sync seed ($(uptime))" | tee -a $OUT/run.log
echo "tokenizer,input,cpu_mb_per_s,wall_mb_per_s" > $OUT/patho.csv
for t in qwen3 deepseek_v3 llama3_1 gptoss gpt2 gpt4o claude gemma3 llama2; do for i in prose zh one_letter spaces digits one_cjk base64 minified_js; do
  json=$(target/release/lopt bench --seed-cache sync --threads 1 --tokenizer ../shared/tokenizers/$t/tokenizer.json /work/patho-in/$i.jsonl 2>/dev/null)
  python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(f\"$t,$i,{d['bytes']/1e6/d['cpu_seconds']:.2f},{d['mb_per_s']:.2f}\")" "$json" >> $OUT/patho.csv
done; done
echo "== prefix ($(uptime))" | tee -a $OUT/run.log
for b in $B/prefix target/release/prefix; do echo "== $b qwen3" | tee -a $OUT/prefix.log
  $b --tokenizer qwen3 --corpus ../shared/corpora/en_verylong.jsonl --rounds 10 --hf-rounds 0 --questions 50 2>&1 | tee -a $OUT/prefix.log | tail -30; done
for t in gemma3 llama2; do echo "== new $t" | tee -a $OUT/prefix.log
  target/release/prefix --tokenizer $t --corpus ../shared/corpora/en_verylong.jsonl --rounds 10 --hf-rounds 0 --questions 50 2>&1 | tee -a $OUT/prefix.log | tail -30; done
for t in qwen3 gemma3 llama2; do echo "== new $t miss-only cpu" | tee -a $OUT/prefix-miss.log
  target/release/prefix --tokenizer $t --corpus ../shared/corpora/en_verylong.jsonl --rounds 10 --hf-rounds 0 --traces miss --cpu 2>&1 | tee -a $OUT/prefix-miss.log | tail -3; done
for t in gemma3 llama2 qwen3; do echo "== new $t ids-only alone cpu" | tee -a $OUT/prefix-ids.log
  target/release/prefix --tokenizer $t --corpus ../shared/corpora/en_verylong.jsonl --rounds 10 --hf-rounds 0 --traces conversation --modes plain-ids,cached-ids --cpu 2>&1 | tee -a $OUT/prefix-ids.log | tail -14; done
echo "== load ($(uptime))" | tee -a $OUT/run.log
$B/load --rounds 5 2>&1 | tee $OUT/load-base.log | tail -30
target/release/load --rounds 5 2>&1 | tee $OUT/load.log | tail -30
echo "end $(date -u) $(uptime)" | tee -a $OUT/run.log
