#!/usr/bin/env bash
# Where the wall time of one parallel encode goes on a many-core machine (issue 8, scaling), in
# one prepared run of under 4 minutes: `scale --trace` (a build of lopt-bench with `--features
# trace`) at TH threads on 8 fresh 1 MB documents per corpus, then the trace build's other
# schedules (LOPT_SCHEDULE=broadcast|share|flat) and more chunks than threads at the top thread count.
#
#   scripts/trace16.sh prepare   # here: dev8/scale-trace (stripped) and dev8/trace.sh (this file);
#                                # DEV8=/path/dev8 puts them into another checkout's dev8/
#   bash dev8/trace.sh           # there, from the repo root, OUT=results folder; needs dev8/data.tar.xz
#                                # (scripts/scaling16.sh prepare)
#
# Each run prints per call a `call` line and per segment a `seg` line, then medians (see
# lopt-bench/src/bin/scale.rs); summary.txt collects every run's medians. Knobs: TH ("16 2 4 8"),
# TOP (16), DOCS (8), TOKS, BUDGET (seconds after which the remaining runs are skipped, 215).
set -u
R=$(pwd); D=${DEV8:-$R/dev8}
TH=${TH:-"16 2 4 8"}; TOP=${TOP:-16}; DOCS=${DOCS:-8}; BUDGET=${BUDGET:-215}
TOKS=${TOKS:-"qwen3 llama3_1 deepseek_v3 bert-base-cased"}

prepare() {
    CARGO_INCREMENTAL=0 cargo build --release -p lopt-bench --bin scale --features trace || exit 1
    strip -o "$D/scale-trace" target/release/scale
    cp "$0" "$D/trace.sh"
    du -sh "$D"
}

one() {  # one() NAME ENV... -- SCALE ARGS: one scale run into $OUT/NAME.txt, unless over budget
    local name=$1; shift
    if [ "$SECONDS" -ge "$BUDGET" ]; then echo "skip $name (budget)"; return; fi
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" "$D/scale-trace" --settle-ms 100 --docs "$DOCS" --trace "$@" > "$OUT/$name.txt" 2>&1
    echo "$name rc=$? t=${SECONDS}s $(grep -m1 speedup "$OUT/$name.txt")"
    {
        echo "== $name"
        grep -E "^\| [0-9]+ \||speedup|^\| (wall|serial|  |wake|segment|imbalance|join|return|drop)|^busy|^segment (time|CPU)|^minor faults|^pool threads|^exact|^MISMATCH" "$OUT/$name.txt"
    } >> "$OUT/summary.txt"
}

run() {
    mkdir -p "$OUT"
    exec > >(tee "$OUT/log.txt") 2>&1
    echo "start $(date -u)"; nproc
    lscpu | grep -E "Model name|^CPU\(s\)|Thread|L2|L3" || true
    mkdir -p /tmp/d && [ -d /tmp/d/corpora ] || tar xJf "$D/data.tar.xz" -C /tmp/d
    local T=/tmp/d/shared/tokenizers C=/tmp/d/corpora
    # 1. The default schedule at every thread count (the top count first: it matters most).
    for th in $TH; do for c in en1m zh1m; do for t in $TOKS; do
        one "tree-$t-$c-$th" LOPT_SCHEDULE=tree -- --corpus $C/$c.jsonl --tokenizer $T/$t/tokenizer.json --threads $th
    done; done; done
    # 2. Wake-all schedules against the default again, at the top count.
    for c in en1m zh1m; do for t in qwen3 bert-base-cased llama3_1; do for s in broadcast share flat tree; do
        one "$s-$t-$c-$TOP-b" LOPT_SCHEDULE=$s -- --corpus $C/$c.jsonl --tokenizer $T/$t/tokenizer.json --threads $TOP
    done; done; done
    # 3. More chunks than threads (imbalance), default schedule and broadcast.
    for c in en1m zh1m; do for t in qwen3 bert-base-cased; do for s in tree broadcast; do
        one "$s-$t-$c-$TOP-c32k" LOPT_SCHEDULE=$s -- --corpus $C/$c.jsonl --tokenizer $T/$t/tokenizer.json \
            --threads $TOP --chunk-size 32768
    done; done; done
    echo "end $(date -u) ${SECONDS}s"
}

case "${1:-run}" in
    prepare) prepare ;;
    run) : "${OUT:?set OUT to the results folder}"; run ;;
    *) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
