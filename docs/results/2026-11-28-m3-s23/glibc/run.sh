#!/bin/bash
# inproc-peers (lopt new wheel vs fastokens) with and without glibc's keep-memory tunables, in turns.
cd /work/main
OUT=/work/glibc-ab-s23; mkdir -p $OUT
T="glibc.malloc.trim_threshold=268435456:glibc.malloc.mmap_threshold=33554432"
for round in 1 2; do
  for cell in "qwen3 /work/en30.jsonl en" "qwen3 /work/zh20.jsonl zh"; do
    set -- $cell
    for mode in default tuned; do
      [ $round = 2 ] && { [ $mode = default ] && mode=tuned || mode=default; }
      if [ $mode = tuned ]; then env GLIBC_TUNABLES=$T FASTOKENS_BPE_THREADS=1 /work/venv-new/bin/python scripts/inproc-peers.py --corpus $2 --tokenizer ../shared/tokenizers/$1/tokenizer.json --peer fastokens > $OUT/$1-$3-$mode-r$round.log 2>&1
      else FASTOKENS_BPE_THREADS=1 /work/venv-new/bin/python scripts/inproc-peers.py --corpus $2 --tokenizer ../shared/tokenizers/$1/tokenizer.json --peer fastokens > $OUT/$1-$3-$mode-r$round.log 2>&1; fi
      echo "$1 $3 $mode r$round: $(tail -1 $OUT/$1-$3-$mode-r$round.log)"
    done
  done
done
