#!/usr/bin/env bash
set -u
cd /work/main
OUT=/work/quiet-s8; PY=/work/venv-bench/bin/python; export LOPT_BASE_BIN=/work/base-s8/lopt
echo "peers rerun start $(date -u) $(uptime)" | tee -a $OUT/run.log
for c in en_verylong zh_long; do
  $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers qwen3 llama3_1 deepseek_v3 \
    --methods fastokens lopt-base lopt lopt-ids --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 --json $OUT/peers-bpe-$c.json 2>&1 | tee $OUT/peers-bpe-$c.log | grep "^|"
  $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers bert-base-cased \
    --methods nanotoken lopt-base lopt lopt-ids --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 --json $OUT/peers-bert-$c.json 2>&1 | tee $OUT/peers-bert-$c.log | grep "^|"
done
echo "== exactness vs HF ($(uptime))"
for c in en_verylong zh_long; do
  $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers qwen3 llama3_1 deepseek_v3 bert-base-cased gemma3 llama2 \
    --methods hf lopt lopt-ids --threads 2 --docs 2 --max-bytes 1000000 --rounds 1 --json $OUT/exact-$c.json 2>&1 | grep "^|"
done
echo "peers rerun end $(date -u) $(uptime)" | tee -a $OUT/run.log
