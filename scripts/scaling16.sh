#!/usr/bin/env bash
# lopt and its exact peers at 1-16 threads on a many-core machine (issue 8), in one prepared run.
#
#   scripts/scaling16.sh prepare   # here: bundle a stripped lopt, four tokenizers and 9+9 documents
#                                  # of >= 1 MB (cut to 1 MB) into dev8/, and the peers' wheels
#                                  # (cp312, manylinux) into .whl/ (both git-ignored via
#                                  # .git/info/exclude; ~24 MB)
#   scripts/scaling16.sh ab        # there: a newer build (dev8/lopt) against an older one
#                                  # (dev8/lopt-base), alternating, `lopt bench` at TH threads, and
#                                  # fastokens at TH threads (bench_peers); ~3 minutes
#   scripts/scaling16.sh run       # there (repo root, OUT=results folder): verify at 16 threads,
#                                  # bench_peers at 1/2/4/8/16 threads, lopt bench cpu_seconds and
#                                  # chunk sizes; ~7 minutes on a quiet 16-core machine
#
# Knobs: ROUNDS (2), TH ("1 2 4 8 16"), DOCS (8), TOP (16), PY (python3), DRY=1 (skip the wheels),
# VERIFY=0 / EXTRA=0 (gigatoken, nanotoken, lopt-ids) / DIRECT=0 skip those parts. A newer build can
# travel as dev8/lopt (stripped) without re-making the data bundle.
set -u
R=$(pwd); D=$R/dev8; PY=${PY:-python3}
ROUNDS=${ROUNDS:-2}; TH=${TH:-"1 2 4 8 16"}; DOCS=${DOCS:-8}; TOP=${TOP:-16}
SHARED=${LOPT_SHARED:-$R/../shared}

prepare() {
    grep -qx "/dev8/" .git/info/exclude || echo "/dev8/" >> .git/info/exclude
    grep -qx "/.whl/" .git/info/exclude || echo "/.whl/" >> .git/info/exclude
    cargo build --release -p lopt-cli || exit 1
    rm -rf "$D" && mkdir -p "$D/stage/corpora" .whl
    for t in qwen3 llama3_1 deepseek_v3 bert-base-cased; do
        mkdir -p "$D/stage/shared/tokenizers/$t" && cp "$SHARED/tokenizers/$t/tokenizer.json" "$D/stage/shared/tokenizers/$t/"
    done
    strip -o "$D/stage/lopt" target/release/lopt
    python3 - "$SHARED" "$D/stage/corpora" <<'PY'
import json, sys
shared, out = sys.argv[1:]
for src, dst in (("en_verylong", "en1m"), ("zh_long", "zh1m")):
    n = 0
    with open(f"{out}/{dst}.jsonl", "w") as all_docs, open(f"{out}/{dst}-v.jsonl", "w") as verify:
        for line in open(f"{shared}/corpora/{src}.jsonl", encoding="utf-8"):
            raw = json.loads(line)["text"].encode()
            if len(raw) < 1_000_000:
                continue
            doc = json.dumps({"text": raw[:1_000_000].decode("utf-8", "ignore")}, ensure_ascii=False) + "\n"
            all_docs.write(doc)
            if n in (1, 2):
                verify.write(doc)
            n += 1
            if n == 9:
                break
PY
    (cd "$D/stage" && tar cf - . | xz -6 -T0 > ../data.tar.xz) && rm -rf "$D/stage"
    for p in fastokens==0.3.5 gigatoken==0.10.0 nanotoken==0.1.0 awkward==2.14.0 awkward-cpp==57; do
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 -d .whl "$p"
    done
    du -sh "$D" .whl
}

run() {
    mkdir -p "$OUT" /tmp/r
    exec > >(tee "$OUT/log.txt") 2>&1
    echo "start $(date -u)"; nproc
    lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|L1d|L2|L3|NUMA node|MHz"
    free -g | head -2; uname -r; $PY --version
    mkdir -p /tmp/d && tar xJf "$D/data.tar.xz" -C /tmp/d
    if [ -x "$D/lopt" ]; then cp "$D/lopt" /tmp/d/lopt; fi
    /tmp/d/lopt --version
    if [ -z "${DRY:-}" ]; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
            && export PYTHONPATH=/tmp/site
    fi
    $PY -c "import fastokens, gigatoken, nanotoken, tokenizers; print('peers ok', tokenizers.__version__)"
    export LOPT_SHARED=/tmp/d/shared LOPT_BIN=/tmp/d/lopt PYTHONUNBUFFERED=1
    local L=/tmp/d/lopt T=/tmp/d/shared/tokenizers C=/tmp/d/corpora
    [ "${VERIFY:-1}" = 1 ] && verify_all
    bp() { $PY scripts/bench_peers.py --docs $DOCS --rounds $ROUNDS --max-bytes 1000000 "$@"; }
    for c in en1m zh1m; do
        echo "== BPE $c: fastokens and lopt at $TH threads $(date -u +%T)"
        bp --corpus $C/$c.jsonl --tokenizers qwen3 llama3_1 deepseek_v3 --methods fastokens lopt --threads $TH \
            --json /tmp/r/bpe-$c.json
        [ "${EXTRA:-1}" = 1 ] || continue
        echo "== BPE $c: gigatoken and lopt-ids at 1 and $TOP threads $(date -u +%T)"
        bp --corpus $C/$c.jsonl --tokenizers qwen3 llama3_1 deepseek_v3 --methods gigatoken lopt-ids --threads 1 $TOP \
            --json /tmp/r/bpe-extra-$c.json
    done
    for c in en1m zh1m; do
        echo "== BERT $c $(date -u +%T)"
        bp --corpus $C/$c.jsonl --tokenizers bert-base-cased --methods lopt --threads $TH --json /tmp/r/bert-$c.json
        [ "${EXTRA:-1}" = 1 ] || continue
        bp --corpus $C/$c.jsonl --tokenizers bert-base-cased --methods nanotoken lopt-ids --threads 1 $TOP \
            --json /tmp/r/bert-extra-$c.json
    done
    [ "${DIRECT:-1}" = 1 ] && direct
    echo "end $(date -u)"
    tar czf "$OUT/results.tgz" -C /tmp/r .
}

verify_all() {
    local L=/tmp/d/lopt T=/tmp/d/shared/tokenizers C=/tmp/d/corpora
    echo "== exactness at $TOP threads (lopt verify, 2 docs of 1 MB each) $(date -u +%T)"
    for t in qwen3 llama3_1 deepseek_v3 bert-base-cased; do for c in en1m zh1m; do
        for chunk in "" "--chunk-size 16384"; do
            $L verify --jsonl --tokenizer $T/$t/tokenizer.json --threads $TOP $chunk --seed-cache sync $C/$c-v.jsonl \
                >/dev/null 2>/tmp/r/verify.err
            echo "verify $t $c threads=$TOP $chunk rc=$? $(tail -c 300 /tmp/r/verify.err)"
        done
    done; done
}

direct() {
    local L=/tmp/d/lopt T=/tmp/d/shared/tokenizers C=/tmp/d/corpora
    echo "== lopt bench direct: cpu_seconds (work inflation) and chunk sizes at $TOP threads $(date -u +%T)"
    for r in $(seq 1 $ROUNDS); do
        for row in "qwen3 en1m" "llama3_1 en1m" "deepseek_v3 en1m" "deepseek_v3 zh1m" "qwen3 zh1m" \
                   "bert-base-cased en1m" "bert-base-cased zh1m"; do
            set -- $row
            for cfg in "1" "$TOP" "$TOP --chunk-size 32768" "$TOP --chunk-size 16384" "$TOP --ids-only"; do
                o=$($L bench --tokenizer $T/$1/tokenizer.json --seed-cache sync --threads $cfg $C/$2.jsonl 2>&1 | tail -1)
                echo "direct round=$r tok=$1 corpus=$2 threads=$cfg $o"
            done
        done
    done
}

ab() {
    mkdir -p "$OUT" /tmp/r
    exec > >(tee "$OUT/log.txt") 2>&1
    echo "start $(date -u)"; nproc; lscpu | grep -E "Model name|^CPU\(s\)"
    mkdir -p /tmp/d && tar xJf "$D/data.tar.xz" -C /tmp/d
    if [ -z "${DRY:-}" ]; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
            && export PYTHONPATH=/tmp/site
    fi
    export LOPT_SHARED=/tmp/d/shared PYTHONUNBUFFERED=1
    local T=/tmp/d/shared/tokenizers C=/tmp/d/corpora
    "$D/lopt" --version
    echo "== lopt new vs base, lopt bench --seed-cache sync, at $TH threads $(date -u +%T)"
    for r in $(seq 1 $ROUNDS); do
        local bins="$D/lopt-base $D/lopt"
        [ $((r % 2)) = 0 ] && bins="$D/lopt $D/lopt-base"
        for row in "qwen3 en1m" "llama3_1 en1m" "deepseek_v3 en1m" "qwen3 zh1m" "llama3_1 zh1m" "deepseek_v3 zh1m" \
                   "bert-base-cased en1m" "bert-base-cased zh1m"; do
            set -- $row
            for th in $TH; do for b in $bins; do
                o=$($b bench --tokenizer $T/$1/tokenizer.json --seed-cache sync --threads $th $C/$2.jsonl 2>&1 | tail -1)
                echo "ab round=$r bin=$(basename $b) tok=$1 corpus=$2 threads=$th $o"
            done; done
        done
    done
    for c in en1m zh1m; do
        echo "== fastokens ($c) at $TH threads (FASTOKENS_BPE_THREADS) $(date -u +%T)"
        $PY scripts/bench_peers.py --docs $DOCS --rounds $ROUNDS --max-bytes 1000000 --corpus $C/$c.jsonl \
            --tokenizers qwen3 llama3_1 deepseek_v3 --methods fastokens --threads $TH --json /tmp/r/fastokens-$c.json
    done
    echo "end $(date -u)"
    tar czf "$OUT/results.tgz" -C /tmp/r .
}

case "${1:-}" in
    prepare) prepare ;;
    run) run ;;
    ab) ab ;;
    *) echo "usage: $0 prepare|run|ab" >&2; exit 2 ;;
esac
