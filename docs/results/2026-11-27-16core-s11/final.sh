#!/usr/bin/env bash
# Session 11's final 16-core call: exactness at 16 threads (new build), A/B new vs base at 1 and 16 threads
# with fastokens, then the trace. Run from the repo root with OUT set.
set -u
R=$(pwd); D=$R/dev8
ROUNDS=3 TH="1 16" OUT=$OUT/ab bash scripts/scaling16.sh ab >/dev/null 2>&1; echo "ab rc=$?"
L=$D/lopt T=/tmp/d/shared/tokenizers C=/tmp/d/corpora
for t in qwen3 llama3_1 deepseek_v3 bert-base-cased; do for c in en1m zh1m; do
  for chunk in "" "--chunk-size 16384"; do
    $L verify --jsonl --tokenizer $T/$t/tokenizer.json --threads 16 $chunk --seed-cache sync $C/$c-v.jsonl >/dev/null 2>/tmp/verify.err
    echo "verify $t $c threads=16 $chunk rc=$? $(tail -c 200 /tmp/verify.err)"
  done
done; done > $OUT/verify.txt 2>&1
grep -c "rc=0" $OUT/verify.txt
mkdir -p /tmp/tr; OUT=/tmp/tr BUDGET=150 bash $D/trace.sh >/dev/null 2>&1; echo "trace rc=$?"
cp /tmp/tr/summary.txt $OUT/summary.txt; tar czf $OUT/trace.tgz -C /tmp/tr .
