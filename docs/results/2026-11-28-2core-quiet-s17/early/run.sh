#!/bin/bash
cd /work/main
export LOPT_BASE_BIN=/work/base-s16b/lopt
for pass in p1 p2 p3; do
P=/work/quiet-s17-early/$pass; mkdir -p $P
echo "$pass start $(date -u) $(uptime)" | tee $P/run.log
/work/venv-bench/bin/python scripts/bench_peers.py --corpus ../shared/corpora/en_verylong.jsonl --tokenizers qwen3 llama3_1 deepseek_v3 gptoss \
    --methods fastokens lopt lopt-ids --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 --json $P/peers-bpe-en_verylong.json > $P/peers-bpe-en_verylong.log 2>&1
echo "$pass end $(date -u) $(uptime)" | tee -a $P/run.log
done
