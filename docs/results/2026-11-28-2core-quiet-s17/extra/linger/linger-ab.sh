#!/bin/bash
# Usage: linger-ab.sh BIN ROUNDS OUT [TOKENIZERS] -- one trace build of `scale`, linger values alternating.
# Each line: round, tokenizer, linger (us), mode (alt: 1- and 2-thread calls alternating, the pool
# sleeps between 2-thread calls; blk: back to back), per-doc median speedup, 1t/2t median wall ms,
# wake_last, imbalance, join, exactness, cpu ms of the 2-thread tokenizer's calls.
BIN=$1; R=$2; OUT=$3; TOKS=${4:-qwen3}; CORPUS=${CORPUS:-/work/en30.jsonl}; DOCS=${DOCS:-8}
VARIANTS=${VARIANTS:-"0 1000"}; MODES=${MODES:-"alt blk"}; EXTRA=${EXTRA:-}
export LOPT_SHARED=/work/shared
for r in $(seq 1 $R); do
 for tok in $TOKS; do
  vs=$VARIANTS; [ $((r%2)) = 0 ] && vs=$(echo $vs | tr ' ' '\n' | tac | tr '\n' ' ')
  for v in $vs; do
   for mode in $MODES; do
    b=""; [ $mode = blk ] && b="--blocks"
    res=$(timeout 600 $BIN --corpus $CORPUS --tokenizer $tok --threads 2 --docs $DOCS --trace $b --linger-us $v $EXTRA 2>&1)
    one=$(echo "$res" | grep "^| 1 |" | awk -F'|' '{print $4}' | tr -d ' ')
    two=$(echo "$res" | grep "^| 2 |" | awk -F'|' '{print $4}' | tr -d ' ')
    cpu2=$(echo "$res" | grep "^| 2 |" | awk -F'|' '{print $5}' | tr -d ' ')
    sp=$(echo "$res" | grep "^speedup" | awk '{print $NF}')
    wake=$(echo "$res" | grep "^| wake: last" | awk -F'|' '{print $3}' | tr -d ' ')
    imb=$(echo "$res" | grep "^| imbalance" | awk -F'|' '{print $3}' | tr -d ' ')
    join=$(echo "$res" | grep "^| join" | awk -F'|' '{print $3}' | tr -d ' ')
    ex=$(echo "$res" | grep "^exact" | awk '{print $2"/"$4}')
    le=$(echo "$res" | grep "^linger ends" | awk '{print $5"/"$7"/"$10}' | tr -d ',')
    echo "r=$r tok=$tok v=$v mode=$mode speedup=$sp one=$one two=$two cpu2=$cpu2 wake_last=$wake imbalance=$imb join=$join exact=$ex linger_call_deadline_busy=$le load=$(cut -d' ' -f1 /proc/loadavg)" >> $OUT
   done
  done
 done
done
