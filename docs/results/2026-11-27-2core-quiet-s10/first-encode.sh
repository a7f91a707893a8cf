#!/usr/bin/env bash
# Session 10: first encode right after load, start vs final build (the quiet run's attempt had a 3-document file).
cd /work/main
for b in /work/base-s10/load target/release/load; do echo "== $b" >> /work/quiet-s10/first-encode.log
  $b --first-encode /work/l7-en.jsonl --rounds 3 --only qwen3,deepseek_v3,llama3_1 --settle-ms 1500 >> /work/quiet-s10/first-encode.log 2>&1
done
