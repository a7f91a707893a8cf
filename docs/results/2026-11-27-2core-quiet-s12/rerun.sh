#!/usr/bin/env bash
# Session 12: two more peer passes on the quiet machine, for a median of three.
set -u
cd /work/main
PY=/work/venv-bench/bin/python; export LOPT_BASE_BIN=/work/base-s12/lopt
for pass in rerun rerun2; do
OUT=/work/quiet-s12/$pass; mkdir -p $OUT
echo "$pass start $(date -u) $(uptime)" | tee $OUT/run.log
for c in en_verylong zh_long; do
  $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers qwen3 llama3_1 deepseek_v3 gptoss \
    --methods fastokens lopt-base lopt lopt-ids --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 --json $OUT/peers-bpe-$c.json 2>&1 | tee $OUT/peers-bpe-$c.log | grep "^|" > /dev/null
  $PY scripts/bench_peers.py --corpus ../shared/corpora/$c.jsonl --tokenizers bert-base-cased \
    --methods nanotoken lopt-base lopt lopt-ids --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 --json $OUT/peers-bert-$c.json 2>&1 | tee $OUT/peers-bert-$c.log | grep "^|" > /dev/null
done
echo "$pass end $(date -u) $(uptime)" | tee -a $OUT/run.log
done
