#!/bin/bash
# Session 17, engineer "wake": the quiet machine's check of the pool's linger (`--linger-us`,
# `TokenizerBuilder::linger`): one binary, linger off (0) against on, alternating.
# Usage: quiet-linger.sh OUTDIR   (about 8-10 minutes on a quiet 2-core machine)
#  1. scale --trace: linger 0 / 250 / 1000 / 5000 us alternating, both regimes (alt: 1- and 2-thread
#     calls alternating, the pool sleeps ~4 ms between 2-thread calls; blk: back to back, as `lopt bench`).
#  2. bench_peers.py, lopt-base = lopt --linger-us 0, lopt = lopt --linger-us 1000 (ids too), 3 passes.
#  3. lopt bench CPU and wall, linger 0 against 1000 (and 250), 6 rounds (the CPU the spinning costs).
set -u; uptime
OUT=${1:-/tmp/quiet-linger}; mkdir -p $OUT
HERE=$(cd $(dirname $0) && pwd)
TRACE=${TRACE:-$HERE/bin/scale-trace}
export LOPT_SHARED=/work/shared LOPT_REAL=${LOPT_REAL:-$HERE/bin/lopt}
VARIANTS="0 250 1000 5000" $HERE/linger-ab.sh $TRACE ${ROUNDS:-4} $OUT/scale.txt "qwen3 llama3_1 bert-base-cased"
CORPUS=/work/zh20.jsonl VARIANTS="0 1000" $HERE/linger-ab.sh $TRACE 2 $OUT/scale-zh.txt "qwen3 bert-base-cased"
python3 $HERE/agg.py $OUT/scale.txt $OUT/scale-zh.txt > $OUT/scale-summary.txt
cd /work/wt/load
for pass in 1 2 3; do
  LOPT_BASE_BIN=$HERE/bin/lopt-l0 LOPT_BIN=$HERE/bin/lopt-l1000 /work/venv-bench/bin/python scripts/bench_peers.py \
    --corpus ../shared/corpora/en_verylong.jsonl --tokenizers qwen3 llama3_1 --methods lopt-base lopt lopt-ids \
    --threads 1 2 --docs 8 --max-bytes 1000000 --rounds 3 > $OUT/peers-$pass.txt 2>&1
done
CELLS="qwen3:/work/en30.jsonl:2 llama3_1:/work/en30.jsonl:2 bert-base-cased:/work/en30.jsonl:2 qwen3:/work/zh20.jsonl:2 qwen3:/work/en30.jsonl:1" \
  /work/wt/load/ab-s15/ab.sh 6 $OUT/bench.txt $HERE/bin/lopt-l0 $HERE/bin/lopt-l1000
python3 /work/wt/load/ab-s16/bench-agg.py $OUT/bench.txt > $OUT/bench-summary.txt
cat $OUT/scale-summary.txt $OUT/bench-summary.txt; for f in $OUT/peers-*.txt; do echo "== $f"; grep "^| " $f; done; uptime
