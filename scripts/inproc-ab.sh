#!/usr/bin/env bash
# An A/B of two lopt sources inside one process, document by document: on a host whose speed
# drifts (M3: ±30 % between back-to-back runs of one binary, and pairs of pinned processes still
# read 0.64-1.60x), two engines that take turns on every document (10-30 ms each) see the same
# moment of the host, and the median of many per-document ratios resolves about 3 % (a control of
# main against itself read 0.975-1.001 on M3, docs/benchmarks.md, session 21).
#
#   BASE_REV=872acdb NEW_SRC=/work/main OUT=/tmp/ab.log scripts/inproc-ab.sh en30:qwen3 zh20:qwen3
#
# It builds, outside the repository (WORK, default /work/inproc-ab), a small crate that links
# both: lopt at BASE_REV (a git worktree whose package version is renamed, so that cargo takes
# both; remove it with `git worktree remove`) and lopt from NEW_SRC (a checkout, edits included). The program loads each tokenizer
# once per side (seeded cache built before timing), warms both on the corpus's first document,
# then encodes every further document once with each side (fresh to both), the side that goes
# first alternating, and prints per cell the median of the per-document time ratios base / new,
# their quartiles, and the ratio of the summed times. A control (NEW_SRC at BASE_REV) shows what
# "no change" reads on the host of the day.
#
# Cells are "file:tokenizer" with file under DATA (default /work) without `.jsonl`; THREADS
# (default 1), DOCS (default 29), MAX_BYTES (default 1000000), PASSES (default 3: each pass a new
# process). Every document is fresh to each engine only once, so more passes mean new processes.
# NEW_IDS_ONLY=1: the new side encodes ids only (`encode_ids_default`), so that with NEW_SRC at
# BASE_REV the figure is the ids-only mode's speed-up over the full mode.
set -eu
: "${BASE_REV:?set BASE_REV}" "${NEW_SRC:?set NEW_SRC}" "${OUT:?set OUT}"
WORK=${WORK:-/work/inproc-ab}; DATA=${DATA:-/work}; TOK=${TOK:-/work/shared/tokenizers}
THREADS=${THREADS:-1}; DOCS=${DOCS:-29}; MAX_BYTES=${MAX_BYTES:-1000000}; PASSES=${PASSES:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$WORK"
base="$WORK/base-src"
if [ ! -d "$base" ] || [ "$(git -C "$base" rev-parse HEAD)" != "$(git -C "$repo" rev-parse "$BASE_REV")" ]; then
  git -C "$repo" worktree remove --force "$base" 2>/dev/null || rm -rf "$base"
  git -C "$repo" worktree add --detach "$base" "$BASE_REV" >/dev/null
fi
# Cargo refuses two packages of one name and version from two paths: the base becomes 0.0.0.
sed -i '0,/^version = /s/^version = .*/version = "0.0.0"/' "$base/lopt/Cargo.toml"
crate="$WORK/crate"
mkdir -p "$crate/src"
cat > "$crate/Cargo.toml.new" <<EOF
[package]
name = "inproc-ab"
version = "0.0.0"
edition = "2021"

[workspace]

[dependencies]
lopt_base = { package = "lopt", path = "$base/lopt" }
lopt_new = { package = "lopt", path = "$NEW_SRC/lopt" }
serde_json = "1"
libc = "0.2"

[profile.release]
debug = "line-tables-only"
codegen-units = 4
lto = "thin"
EOF
cat > "$crate/src/main.rs.new" <<'EOF'
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (corpus, tokenizer) = (&args[1], &args[2]);
    let threads: usize = args[3].parse().expect("threads");
    let docs: usize = args[4].parse().expect("docs");
    let max_bytes: usize = args[5].parse().expect("max bytes");
    let ids_only = args.get(6).is_some_and(|a| a == "1");
    // As the CLI does (lopt-cli/src/alloc.rs): freed memory stays in the process.
    // SAFETY: mallopt takes two integers.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
    }
    let texts: Vec<String> = std::fs::read_to_string(corpus)
        .expect("corpus")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(|t| {
            let mut end = t.len().min(max_bytes);
            while !t.is_char_boundary(end) { end -= 1; }
            t[..end].to_owned()
        }))
        .take(docs + 1)
        .collect();
    let a = lopt_base::TokenizerBuilder::new().threads(threads).seed_cache(lopt_base::SeedCache::Sync)
        .build_from_file(tokenizer).expect("base");
    let b = lopt_new::TokenizerBuilder::new().threads(threads).seed_cache(lopt_new::SeedCache::Sync)
        .build_from_file(tokenizer).expect("new");
    // Each side's call, timed; the encoding (dropped after the clock stops) gives its ids.
    let time_a = |text: &str| {
        let t = Instant::now();
        let e = a.encode(text, false).expect("a");
        (t.elapsed().as_secs_f64(), e.ids().to_vec())
    };
    let time_b = |text: &str| {
        let t = Instant::now();
        if ids_only {
            let ids = b.encode_ids_default(text, false).expect("b");
            (t.elapsed().as_secs_f64(), ids)
        } else {
            let e = b.encode(text, false).expect("b");
            (t.elapsed().as_secs_f64(), e.ids().to_vec())
        }
    };
    assert!(time_a(&texts[0]).1 == time_b(&texts[0]).1, "warm-up document: the two sides disagree");
    let (mut sum_a, mut sum_b) = (0f64, 0f64);
    for (i, text) in texts.iter().enumerate().skip(1) {
        let ((ta, ia), (tb, ib)) = if i % 2 == 0 {
            let first = time_a(text);
            (first, time_b(text))
        } else {
            let first = time_b(text);
            (time_a(text), first)
        };
        assert!(ia == ib, "document {i}: the two sides disagree");
        sum_a += ta;
        sum_b += tb;
        println!("doc={i} bytes={} base_s={ta:.6} new_s={tb:.6}", text.len());
    }
    println!("sum base_s={sum_a:.6} new_s={sum_b:.6}");
}
EOF
# Rewritten only when changed: cargo goes by modification times, and a relink takes minutes.
for f in "$crate/Cargo.toml" "$crate/src/main.rs"; do
  if cmp -s "$f.new" "$f"; then rm "$f.new"; else mv "$f.new" "$f"; fi
done
CARGO_TARGET_DIR="$WORK/target" cargo build --release --quiet --manifest-path "$crate/Cargo.toml"
bin="$WORK/target/release/inproc-ab"
for cell in "$@"; do f=${cell%%:*}; t=${cell##*:}
  for p in $(seq 1 "$PASSES"); do
    "$bin" "$DATA/$f.jsonl" "$TOK/$t/tokenizer.json" "$THREADS" "$DOCS" "$MAX_BYTES" "${NEW_IDS_ONLY:-0}" \
      | sed "s|^|cell=$f:$t threads=$THREADS pass=$p |" >> "$OUT"
  done
done
python3 - "$OUT" <<'PY'
import collections, re, statistics, sys
docs, sums = collections.defaultdict(list), collections.defaultdict(lambda: [0.0, 0.0])
for line in open(sys.argv[1]):
    m = re.match(r"cell=(\S+) threads=(\d+) pass=\d+ doc=\d+ bytes=\d+ base_s=([\d.]+) new_s=([\d.]+)", line)
    if m:
        key = (m[1], m[2])
        docs[key].append(float(m[3]) / float(m[4]))
        sums[key][0] += float(m[3]); sums[key][1] += float(m[4])
print("cell threads: base/new median of documents [quartiles] (documents); summed base/new")
for key, ratios in docs.items():
    q = statistics.quantiles(ratios, n=4)
    print(f"{key[0]} {key[1]}t: {statistics.median(ratios):.3f} [{q[0]:.3f}-{q[2]:.3f}] ({len(ratios)}); "
          f"{sums[key][0] / sums[key][1]:.3f}")
PY
