#!/usr/bin/env bash
# Reruns every published lopt-eval experiment on a QUIET machine into a new dated folder
# docs/results/<UTC date>-<cores>core/ (issue 11), with the load average before and after each run.
#
#   scripts/rerun-results.sh                  this machine: compare, compare --pieces 32, seq-len,
#                                             chunk-size, batch-size, threads (all --repeat 3), and
#                                             the peers at 1..N threads when they are installed
#   scripts/rerun-results.sh --many-cores     a 16+-core machine: threads 1..16 (hf, lopt-hf,
#                                             lopt-paper, lopt), Table 1 at 16 threads with 32
#                                             chunks, and the peers at 1/2/4/8/16 threads
#
# Options
#   --force        run even when the 1-minute load is above $LOAD_MAX (default 0.5): a loud warning
#                  goes to the terminal, load.log and README.md; without it the script refuses
#   --wait SECS    before each run, wait up to SECS (default 300) for the load to fall below $LOAD_MAX
#   --bin-dir DIR  use prebuilt `lopt-eval` and `lopt` from DIR instead of `cargo build --release`
#   --out DIR      results folder (default docs/results/<UTC date>-<nproc>core)
#   --smoke        tiny sizes, --repeat 1, into /tmp/lopt-rerun-smoke (checks the script; never publish)
#   --dry-run      print the commands, run nothing
# Environment: LOPT_SHARED (folder with tokenizers/ and corpora/; default ../shared beside the
# repository), LOAD_MAX (default 0.5), THREADS (pool size of the fixed-thread runs; default nproc).
#
# Quiet means: no build, test, benchmark or editor indexing on the machine while it runs (stop
# other sessions' cargo first); the script builds before its first load check, then only runs the
# copied binaries. On 2 cores the full run takes about 45-60 minutes; --many-cores about 30 on 16.
#
# Carrying it to a remote 16-core machine (no Rust needed there; same or newer glibc than here,
# Debian 12 / glibc 2.36 builds run on most current distributions):
#   here:   cargo build --release -p lopt-eval -p lopt-cli
#           git rev-parse HEAD > target/release/COMMIT
#           tar czf /tmp/lopt-rerun.tgz scripts target/release/lopt-eval target/release/lopt \
#               target/release/COMMIT -C .. shared/tokenizers shared/corpora        # about 60 MB
#   there:  mkdir lopt && tar xzf lopt-rerun.tgz -C lopt && cd lopt
#           pip install tokenizers fastokens gigatoken     # optional: the peer columns
#           LOPT_SHARED=$PWD/shared scripts/rerun-results.sh --many-cores --bin-dir target/release
#   back:   copy docs/results/<date>-16core/ into the repository, add the headline to its
#           README.md and the tables to docs/benchmarks.md (machine M16 or a new one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

MANY=0 FORCE=0 WAIT=300 BIN_DIR="" OUT="" SMOKE=0 DRY=0
while [ $# -gt 0 ]; do
    case "$1" in
        --many-cores) MANY=1 ;;
        --force) FORCE=1 ;;
        --wait) WAIT=$2; shift ;;
        --bin-dir) BIN_DIR=$2; shift ;;
        --out) OUT=$2; shift ;;
        --smoke) SMOKE=1 FORCE=1 WAIT=0 ;;
        --dry-run) DRY=1 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

LOAD_MAX=${LOAD_MAX:-0.5}
CORES=$(nproc)
THREADS=${THREADS:-$CORES}
LOPT_SHARED=${LOPT_SHARED:-$ROOT/../shared}
LOPT_SHARED=$(cd "$LOPT_SHARED" 2>/dev/null && pwd || echo "$LOPT_SHARED")
export LOPT_SHARED
if [ ! -d "$LOPT_SHARED/tokenizers" ] || [ ! -d "$LOPT_SHARED/corpora" ]; then
    echo "no tokenizers/ and corpora/ under LOPT_SHARED=$LOPT_SHARED" >&2
    exit 1
fi
if [ -z "$OUT" ]; then
    if [ "$SMOKE" = 1 ]; then OUT=/tmp/lopt-rerun-smoke; else OUT=docs/results/$(date -u +%F)-${CORES}core; fi
fi
if [ -e "$OUT" ] && [ "$DRY" = 0 ]; then
    echo "$OUT exists; pass --out for another folder (results are never overwritten)" >&2
    exit 1
fi

# --- binaries: built once, then copied, so that a rebuild cannot swap them mid-run ----------------
if [ -z "$BIN_DIR" ]; then
    [ "$DRY" = 1 ] || cargo build --release -p lopt-eval -p lopt-cli
    BIN_DIR=target/release
fi
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || cat "$BIN_DIR/COMMIT" 2>/dev/null || echo unknown)
DIRTY=$(git status --porcelain --untracked-files=no 2>/dev/null | head -1)
BIN=$(mktemp -d /tmp/lopt-rerun-bin.XXXXXX)
trap 'rm -rf "$BIN"' EXIT
cp "$BIN_DIR/lopt-eval" "$BIN/lopt-eval"
[ -x "$BIN_DIR/lopt" ] && cp "$BIN_DIR/lopt" "$BIN/lopt"

one_minute_load() { cut -d' ' -f1 /proc/loadavg; }
above() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

log() { [ "$DRY" = 1 ] || printf '%s %s\n' "$(date -u +%FT%TZ)" "$*" >> "$OUT/load.log"; }

# Refuses (or, with --force, warns loudly) when the machine is not quiet; waits up to $WAIT first.
check_quiet() {
    local waited=0
    while above "$(one_minute_load)" "$LOAD_MAX" && [ "$waited" -lt "$WAIT" ]; do
        echo "load $(one_minute_load) > $LOAD_MAX: waiting for a quiet machine (${waited}s of ${WAIT}s)" >&2
        sleep 20
        waited=$((waited + 20))
    done
    if above "$(one_minute_load)" "$LOAD_MAX"; then
        if [ "$FORCE" = 1 ]; then
            printf '\n!!!!! WARNING: 1-minute load %s > %s: NOT A QUIET MACHINE, numbers are noise !!!!!\n\n' \
                "$(one_minute_load)" "$LOAD_MAX" >&2
            log "WARNING not quiet: load $(one_minute_load) > $LOAD_MAX (--force)"
            NOISY=1
        else
            echo "refusing: 1-minute load $(one_minute_load) > $LOAD_MAX (stop other work, or --wait/--force)" >&2
            exit 1
        fi
    fi
}

# run NAME ARGS...: one experiment into $OUT/NAME, load recorded before and after.
run() {
    local name=$1
    shift
    if [ "$DRY" = 1 ]; then
        echo "lopt-eval $* --out $OUT/$name"
        return
    fi
    check_quiet
    log "before $name: $(uptime)"
    "$BIN/lopt-eval" "$@" --out "$OUT/$name" 2>&1 | tee -a "$OUT/run.log"
    log "after  $name: $(uptime)"
    echo "- \`lopt-eval $* --out $OUT/$name\`" >> "$OUT/commands.md"
}

# peers NAME CORPUS THREADS...: bench_peers.py (fresh-document MB/s) when the peers are installed.
peers() {
    local name=$1 corpus=$2
    shift 2
    local args=(--corpus "$LOPT_SHARED/corpora/$corpus.jsonl" --docs "$PEER_DOCS" --max-bytes 1000000
        --rounds "$REPEAT" --tokenizers qwen3 llama3_1 deepseek_v3 bert-base-cased --threads "$@")
    if [ "$DRY" = 1 ]; then
        echo "python3 scripts/bench_peers.py ${args[*]} --json $OUT/peers/$name.json"
        return
    fi
    if ! python3 -c 'import tokenizers' 2>/dev/null || [ ! -x "$BIN/lopt" ]; then
        echo "NOTICE: python3 tokenizers or the lopt binary missing; peers ($name) skipped" | tee -a "$OUT/run.log" >&2
        return
    fi
    check_quiet
    mkdir -p "$OUT/peers"
    log "before peers-$name: $(uptime)"
    LOPT_BIN=$BIN/lopt python3 scripts/bench_peers.py "${args[@]}" --json "$OUT/peers/$name.json" 2>&1 | tee "$OUT/peers/$name.log"
    log "after  peers-$name: $(uptime)"
    echo "- \`python3 scripts/bench_peers.py ${args[*]} --json $OUT/peers/$name.json\`" >> "$OUT/commands.md"
}

REPEAT=3 PEER_DOCS=8
# Sizes: as the 2026-11-25 run (docs/results/2026-11-25-2core/README.md), now with --repeat 3.
CMP=(--max-docs 8 --max-bytes 200000)
SEQ=(--max-docs 4)
BIG=(--max-docs 8 --max-bytes 500000)
CHUNK=(--max-docs 4 --max-bytes 500000)
BATCH=(--max-bytes 100000)
MB=(--max-docs 4 --max-bytes 1000000)
if [ "$SMOKE" = 1 ]; then
    REPEAT=1 PEER_DOCS=1
    CMP=(--max-docs 1 --max-bytes 20000 --corpus en_verylong,zh_long)
    SEQ=(--max-docs 1 --lengths 1024,4096)
    BIG=(--max-docs 1 --max-bytes 50000)
    CHUNK=(--max-docs 1 --max-bytes 50000 --chunk-sizes 8192,32768)
    BATCH=(--max-bytes 20000 --batch-sizes 1,2)
    MB=(--max-docs 1 --max-bytes 50000)
fi

NOISY=0
if [ "$DRY" = 0 ]; then
    mkdir -p "$OUT"
    {
        echo "# Machine and code of this run"
        echo
        echo "- date (UTC): $(date -u +%FT%TZ)"
        echo "- cores: $CORES ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
        echo "- memory: $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
        echo "- kernel: $(uname -sr)"
        echo "- lopt commit: $COMMIT${DIRTY:+ (with uncommitted changes)}"
        echo "- rustc: $(rustc -V 2>/dev/null || echo 'not here (prebuilt binaries)')"
        echo "- LOAD_MAX: $LOAD_MAX, fixed-thread runs: $THREADS threads"
        if command -v lscpu > /dev/null; then
            echo
            echo '```'
            lscpu | grep -E '^(Model name|Socket|Core|Thread|CPU\(s\)|L[23] cache|CPU max MHz)' || true
            echo '```'
        fi
    } > "$OUT/MACHINE.md"
    printf '# Commands, in order\n\n' > "$OUT/commands.md"
    log "start: $(uptime)"
fi

if [ "$MANY" = 0 ]; then
    run compare compare "${CMP[@]}" --threads "$THREADS" --repeat "$REPEAT"
    run compare-32-chunks compare "${CMP[@]}" --threads "$THREADS" --pieces 32 --repeat "$REPEAT"
    run seq-len seq-len --tokenizers qwen3,bert-base-cased "${SEQ[@]}" --threads "$THREADS" --repeat "$REPEAT"
    run chunk-size chunk-size --tokenizers qwen3,bert-base-cased "${CHUNK[@]}" --threads "$THREADS" \
        --methods hf,lopt,lopt-hf --repeat "$REPEAT"
    run batch-size batch-size --tokenizers qwen3,bert-base-cased "${BATCH[@]}" --threads "$THREADS" --repeat "$REPEAT"
    run threads threads --tokenizers qwen3,bert-base-cased "${BIG[@]}" --max-threads "$THREADS" \
        --methods hf,lopt,lopt-hf,lopt-paper --repeat "$REPEAT"
    peers en en_verylong 1 "$THREADS"
    peers zh zh_long 1 "$THREADS"
else
    if [ "$CORES" -lt 16 ] && [ "$SMOKE" = 0 ]; then
        echo "--many-cores wants 16 cores; this machine has $CORES (THREADS and the sweep still use 16)" >&2
    fi
    [ "$SMOKE" = 1 ] && T16=2 || T16=16
    SWEEP=1,2,4,8,16
    [ "$SMOKE" = 1 ] && SWEEP=1,2
    run threads threads --tokenizers qwen3,bert-base-cased "${MB[@]}" \
        --thread-counts "$SWEEP" --methods hf,lopt-hf,lopt-paper,lopt --repeat "$REPEAT"
    run threads-zh threads --tokenizers qwen3,bert-base-cased --corpus zh_long "${MB[@]}" \
        --thread-counts "$SWEEP" --methods hf,lopt-hf,lopt-paper,lopt --repeat "$REPEAT"
    run compare-32-chunks compare "${CMP[@]}" --threads "$T16" --pieces 32 --repeat "$REPEAT"
    run seq-len seq-len --tokenizers qwen3,bert-base-cased "${SEQ[@]}" --threads "$T16" --repeat "$REPEAT"
    peers en en_verylong 1 2 4 8 16
    peers zh zh_long 1 2 4 8 16
fi

if [ "$DRY" = 0 ]; then
    log "end: $(uptime)"
    {
        echo "# lopt-eval results — $(date -u +%F), $CORES-core machine"
        echo
        if [ "$NOISY" = 1 ]; then
            echo "**WARNING: the machine was not quiet (1-minute load above $LOAD_MAX, see load.log); treat every"
            echo "number as noise.**"
            echo
        fi
        echo "Produced by \`scripts/rerun-results.sh$([ "$MANY" = 1 ] && echo ' --many-cores')\`; machine and code in"
        echo "[MACHINE.md](MACHINE.md), commands in [commands.md](commands.md), load average before and after"
        echo "each run in [load.log](load.log), raw rows and plots in the sub-folders."
    } > "$OUT/README.md"
    echo
    echo "Done: $OUT. Next: the headline table (from compare/results.md) into $OUT/README.md, README.md's"
    echo "Results section and docs/benchmarks.md (say what this run supersedes)."
fi
