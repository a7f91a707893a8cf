#!/usr/bin/env bash
# Session 9: pathological cells, session start (base-s9) vs final main, alternating, CPU and wall MB/s.
set -u
cd /work/main
OUT=/work/quiet-s9/patho-ab.log; : > $OUT
for r in 1 2 3 4 5; do
  for cell in "gemma3 digits" "gemma3 base64" "llama2 base64" "llama2 digits" "qwen3 base64" "qwen3 digits" "gpt2 digits" "claude digits" "gpt2 spaces" "gemma3 prose" "llama2 prose" "qwen3 prose" "claude zh"; do
    set -- $cell
    bins="/work/base-s9/lopt target/release/lopt"; (( r % 2 == 0 )) && bins="target/release/lopt /work/base-s9/lopt"
    for b in $bins; do
      o=$($b bench --seed-cache sync --threads 1 --tokenizer ../shared/tokenizers/$1/tokenizer.json /work/patho-in/$2.jsonl 2>/dev/null)
      echo "round=$r tok=$1 input=$2 bin=$b $o" >> $OUT
    done
  done
done
