#!/usr/bin/env bash
# Session 9: peers and 1-vs-2-thread A/B again on a quiet machine (the first pass overlapped the device run's transfers).
set -u
cd /work/main
OUT=/work/quiet-s9/rerun2; mkdir -p $OUT; PY=/work/venv-bench/bin/python; B=/work/base-s9; export LOPT_BASE_BIN=$B/lopt
echo "rerun start $(date -u) $(uptime)" | tee $OUT/run.log
for c in en_verylong zh_long; do
  $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers qwen3 llama3_1 deepseek_v3 \
    --methods fastokens lopt-base lopt lopt-ids --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 --json $OUT/peers-bpe-$c.json 2>&1 | tee $OUT/peers-bpe-$c.log | grep "^|"
  $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers bert-base-cased \
    --methods nanotoken lopt-base lopt lopt-ids --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 --json $OUT/peers-bert-$c.json 2>&1 | tee $OUT/peers-bert-$c.log | grep "^|"
done
echo "rerun end $(date -u) $(uptime)" | tee -a $OUT/run.log
