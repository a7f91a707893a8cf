//! `scale`: 1 thread against N threads on the same fresh documents, in one process, with the CPU
//! time of every thread of the process and the time its threads waited for a core, per call.
//!
//! Two tokenizers of the same file are loaded (one with 1 thread, one with `--threads`), both
//! with the seeded cache built before loading returns, then each document is encoded once by
//! each, in alternating order. Per call the process's threads are read from
//! `/proc/self/task/*/schedstat` (nanoseconds on a core, nanoseconds runnable but waiting), so
//! that a shared, loaded machine can still be read: `wait` is time lost to other processes,
//! `cpu / wall` is how many cores the call kept busy. Linux only.
//!
//! ```text
//! cargo run --release -p lopt-bench --bin scale -- --corpus /tmp/en30.jsonl \
//!     --tokenizer qwen3 --threads 2 --docs 30
//! ```
//!
//! `--trace` (a build with `--features trace`) also attributes the wall time of each call of the
//! parallel tokenizer from the library's spans (`lopt::trace`): the caller's serial phases (plan,
//! column allocation, the copy's wake-up, freeing the segments, dropping the encoding), and per
//! segment the pool thread, its start after the pool was entered, its duration and bytes. One
//! `call` line and one `seg` line per segment for each document, then a table of medians over
//! the documents: `wake` (first / last segment start after entering the pool), `imbalance` (last
//! segment end - median segment end), `join` (last segment end to the caller's return), serial
//! before and after the pool, and `busy` (segment time / (threads x pool time)).
//!
//! Each span also carries its thread's CPU time and minor page faults (`lopt::trace::Event`):
//! a `segcpu` line per call gives each segment's CPU ms and faults, `job` lines each copy piece
//! and each thread's help loop (which thread copied what, when), and the summary compares the
//! segments' CPU summed with the 1-thread call's CPU on its thread, a figure that a loaded
//! machine's preemptions do not inflate (they do inflate wall times). `--blocks` times every
//! document on one thread first and then on N (no alternation), `--warm` encodes each document
//! once untimed before its timed call (pre-token caches warm with its words), and
//! `--chunk-size` with `--threads 1` cuts the text for one pool thread (the cut and the copy
//! without a second core or a second cache).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Parser;
use lopt::{SeedCache, TokenizerBuilder};
use lopt_bench::{load_docs, median};

#[derive(Parser)]
struct Args {
    /// JSONL corpus with a `text` field.
    #[arg(long)]
    corpus: PathBuf,
    /// Fixture name or path to tokenizer.json.
    #[arg(long)]
    tokenizer: String,
    /// Threads of the parallel tokenizer.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Documents to time (after one warm-up document).
    #[arg(long, default_value_t = 30)]
    docs: usize,
    /// Cut each document to this many bytes.
    #[arg(long, default_value_t = usize::MAX)]
    max_bytes: usize,
    /// Time `encode_ids` instead of `encode`.
    #[arg(long)]
    ids_only: bool,
    /// Chunk size of the parallel tokenizer (default: the library's, length / threads).
    #[arg(long)]
    chunk_size: Option<usize>,
    /// Print where each call's time goes (needs a build with `--features trace`).
    #[arg(long)]
    trace: bool,
    /// Encode every document by the 1-thread tokenizer first, then by the other (default: the
    /// two alternate, so each call finds the cores' caches filled by the other tokenizer).
    #[arg(long)]
    blocks: bool,
    /// Encode each document once untimed before its timed call (pre-token caches warm with its
    /// words: tells a cold per-thread cache apart from other costs of the parallel call).
    #[arg(long)]
    warm: bool,
    /// Milliseconds to wait after loading (the threads that free the parsed files finish; a
    /// profiler started with a delay skips the load).
    #[arg(long, default_value_t = 300)]
    settle_ms: u64,
    /// Microseconds the pools' threads stay awake after a parallel call (default: the library's).
    #[arg(long)]
    linger_us: Option<u64>,
}

/// (on-CPU ns, runnable-waiting ns) summed over the threads of this process.
fn schedstat() -> (u64, u64) {
    let (mut cpu, mut wait) = (0, 0);
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return (0, 0) };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else { continue };
        let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().unwrap_or(0));
        cpu += fields.next().unwrap_or(0);
        wait += fields.next().unwrap_or(0);
    }
    (cpu, wait)
}

/// Minor page faults of this process so far (`/proc/self/stat`, field 10).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    rest.split_whitespace().nth(7).and_then(|f| f.parse().ok()).unwrap_or(0)
}

fn main() -> anyhow::Result<()> {
    lopt_bench::keep_freed_memory();
    let begun = Instant::now();
    let args = Args::parse();
    if args.trace && !lopt::trace::ENABLED {
        bail!("--trace needs a build with `--features trace`");
    }
    let docs = load_docs(&args.corpus, args.docs + 1, args.max_bytes)?;
    if docs.len() < 2 {
        bail!("{} has fewer than 2 documents", args.corpus.display());
    }
    let path = lopt_tests::fixture(&args.tokenizer).unwrap_or_else(|| PathBuf::from(&args.tokenizer));
    // The chunk size applies to the second tokenizer only (also at `--threads 1`: one pool
    // thread then encodes the segments one after another, with one pre-token cache).
    let load = |threads, chunked: bool| {
        let builder = TokenizerBuilder::new().threads(threads).seed_cache(SeedCache::Sync);
        let builder = match args.linger_us {
            Some(us) => builder.linger(std::time::Duration::from_micros(us)),
            None => builder,
        };
        match args.chunk_size {
            Some(bytes) if chunked => builder.chunk_size(bytes),
            _ => builder,
        }
        .build_from_file(&path)
        .with_context(|| format!("loading {}", path.display()))
    };
    let tokenizers = [load(1, false)?, load(args.threads, true)?];
    eprintln!("loaded {:.2} s after start", begun.elapsed().as_secs_f64());
    std::thread::sleep(std::time::Duration::from_millis(args.settle_ms));
    // Seconds that dropping the result took (inside the timed call), and with `--trace` a hash
    // of its ids and offsets with the seconds it took (taken out of the call's time): the
    // trace build's schedules are checked against the 1-thread tokenizer on every document.
    let check = |ids: &[u32], offsets: &[(usize, usize)]| -> (u64, f64) {
        if !args.trace {
            return (0, 0.0);
        }
        let start = Instant::now();
        let mut hash = 0xcbf2_9ce4_8422_2325_u64;
        for (&id, &(a, b)) in ids.iter().zip(offsets.iter().chain(std::iter::repeat(&(0, 0)))) {
            for v in [u64::from(id), a as u64, b as u64] {
                hash = (hash ^ v).wrapping_mul(0x100_0000_01b3);
            }
        }
        (hash ^ ids.len() as u64, start.elapsed().as_secs_f64())
    };
    let encode = |k: usize, text: &str| -> anyhow::Result<(f64, u64, f64)> {
        let t = &tokenizers[k];
        let timed_drop = |result: Box<dyn std::any::Any>| {
            let start = Instant::now();
            drop(result);
            start.elapsed().as_secs_f64()
        };
        Ok(if args.ids_only {
            let ids = std::hint::black_box(t.encode_ids(text, t.options())?);
            let (hash, checking) = check(&ids, &[]);
            (timed_drop(Box::new(ids)), hash, checking)
        } else {
            let encoding = std::hint::black_box(t.encode(text, true)?);
            let (hash, checking) = check(encoding.ids(), encoding.offsets());
            (timed_drop(Box::new(encoding)), hash, checking)
        })
    };
    for k in 0..2 {
        encode(k, &docs[0])?;
    }
    // Per method: wall, cpu, wait (seconds) and minor faults per document.
    let mut rows: [Vec<(f64, f64, f64, f64)>; 2] = Default::default();
    let mut bytes = 0;
    let mut traces = Vec::new();
    // With `--trace`: the 1-thread calls' CPU time on the calling thread (ms).
    let mut one_cpu = Vec::new();
    let mut one_faults = Vec::new();
    let mut mismatches = 0;
    // The calls in order: each document by both tokenizers in turn (alternating which goes
    // first), or with `--blocks` every document by the 1-thread tokenizer, then by the other.
    let n = docs.len() - 1;
    let calls: Vec<(usize, usize)> = if args.blocks {
        (0..2).flat_map(|k| (0..n).map(move |i| (i, k))).collect()
    } else {
        (0..n).flat_map(|i| (0..2).map(move |j| (i, (i + j) % 2))).collect()
    };
    let mut hashes = vec![[0u64; 2]; n];
    for (i, k) in calls {
        let doc = &docs[i + 1];
        if k == 0 {
            bytes += doc.len();
        }
        if args.warm {
            encode(k, doc)?;
        }
        lopt::trace::take();
        let (cpu0, wait0) = schedstat();
        let faults0 = minor_faults();
        let start = Instant::now();
        let (dropped, hash, checking) = encode(k, doc)?;
        let wall = start.elapsed().as_secs_f64() - checking;
        let faults1 = minor_faults();
        let (cpu1, wait1) = schedstat();
        rows[k].push((
            wall,
            (cpu1 - cpu0) as f64 * 1e-9 - checking,
            (wait1 - wait0) as f64 * 1e-9,
            (faults1 - faults0) as f64,
        ));
        hashes[i][k] = hash;
        if args.trace && k == 1 {
            let call = CallTrace::of(&lopt::trace::take(), wall, dropped, tokenizers[1].threads());
            call.print(i);
            traces.push(call);
        } else if args.trace {
            let events = lopt::trace::take();
            if let Some(call) = events.iter().find(|e| e.what == "call") {
                one_cpu.push(call.cpu_ns as f64 * 1e-6);
                one_faults.push(call.faults as f64);
            }
        }
    }
    for (i, pair) in hashes.iter().enumerate() {
        if pair[0] != pair[1] {
            mismatches += 1;
            println!("MISMATCH doc={i}: the {}-thread encoding differs from the 1-thread one", args.threads);
        }
    }
    if args.trace {
        println!(
            "exact: {} of {} documents equal to 1 thread (ids and offsets)",
            docs.len() - 1 - mismatches,
            docs.len() - 1
        );
    }
    println!("| threads | MB/s (total wall) | median ms | median cpu ms | median wait ms | cpu/wall | faults/MB |");
    println!("|---|---|---|---|---|---|---|");
    let mut medians = [0.0; 2];
    for k in 0..2 {
        let wall_total: f64 = rows[k].iter().map(|r| r.0).sum();
        let mut walls: Vec<f64> = rows[k].iter().map(|r| r.0).collect();
        let mut cpus: Vec<f64> = rows[k].iter().map(|r| r.1).collect();
        let mut waits: Vec<f64> = rows[k].iter().map(|r| r.2).collect();
        let ratio: f64 = rows[k].iter().map(|r| r.1).sum::<f64>() / wall_total;
        let faults: f64 = rows[k].iter().map(|r| r.3).sum::<f64>() / (bytes as f64 / 1e6);
        medians[k] = median(&mut walls);
        println!(
            "| {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} |",
            tokenizers[k].threads(),
            bytes as f64 / 1e6 / wall_total,
            medians[k] * 1e3,
            median(&mut cpus) * 1e3,
            median(&mut waits) * 1e3,
            ratio,
            faults
        );
    }
    let mut per_doc: Vec<f64> = rows[0].iter().zip(&rows[1]).map(|(a, b)| a.0 / b.0).collect();
    println!("speedup: median per document {:.2}x", median(&mut per_doc));
    if args.trace {
        let mut one: Vec<f64> = rows[0].iter().map(|r| r.0).collect();
        print_trace_summary(&traces, tokenizers[1].threads(), median(&mut one) * 1e3, median(&mut one_cpu));
        println!(
            "minor faults per call, medians: 1-thread call {:.0}; segments summed {:.0}, the parallel call's caller {:.0}",
            median(&mut one_faults),
            median(&mut traces.iter().map(|c| c.segment_faults.iter().sum::<f64>()).collect::<Vec<_>>()),
            median(&mut traces.iter().map(|c| c.call_faults).collect::<Vec<_>>())
        );
    }
    Ok(())
}

/// A copy or help span of a call: what, pool thread, start after entering the pool (ms),
/// duration (ms), tokens, minor faults.
type Job = (&'static str, Option<usize>, f64, f64, usize, u64);

/// Where one call's wall time went, from its spans (milliseconds; times relative to the start
/// of the call's `call` span unless named otherwise).
#[derive(Default)]
struct CallTrace {
    wall: f64,
    /// Cutting the text (the boundary search).
    plan: f64,
    /// From the call's start to entering the pool (plan included).
    before: f64,
    /// Segments as (pool thread, start after entering the pool, duration, bytes).
    segments: Vec<(Option<usize>, f64, f64, usize)>,
    /// Each segment's CPU time on its thread (same order as `segments`).
    segment_cpu: Vec<f64>,
    /// Each segment's minor page faults on its thread (same order as `segments`).
    segment_faults: Vec<f64>,
    /// Minor page faults of the whole call on the calling thread.
    call_faults: f64,
    /// The copy and help spans.
    jobs: Vec<Job>,
    /// The pool's part: entering it to getting all segments back.
    pooled: f64,
    /// Last segment end to the end of the pool's part (the caller's return from the pool, or,
    /// where finishing runs in the same trip to the pool, the join of the segments there).
    join: f64,
    /// End of finishing to the end of the call: the caller's wake-up where finishing ran on a
    /// pool thread, about 0 where it ran on the caller.
    ret: f64,
    alloc: f64,
    /// The parallel copy, as the caller sees it.
    fill: f64,
    /// First copy job's start after the caller entered the copy's pool.
    copy_wake: f64,
    /// Last copy job's start after the caller entered the copy's pool.
    copy_last: f64,
    /// Longest copy job.
    copy_max: f64,
    free: f64,
    /// From the pool's return to the end of the call (alloc, fill, free, the rest of finishing).
    after: f64,
    /// Dropping the encoding (the caller's, outside the library).
    dropped: f64,
}

impl CallTrace {
    fn of(events: &[lopt::trace::Event], wall: f64, dropped: f64, _threads: usize) -> Self {
        let ms = |ns: u64| ns as f64 * 1e-6;
        let find = |what: &str| events.iter().find(|e| e.what == what);
        let mut call = CallTrace { wall: wall * 1e3, dropped: dropped * 1e3, ..Default::default() };
        let Some(whole) = find("call") else { return call };
        call.call_faults = whole.faults as f64;
        let t0 = whole.start_ns;
        let span = |what: &str| find(what).map_or(0.0, |e| ms(e.end_ns.saturating_sub(e.start_ns)));
        call.plan = span("plan");
        call.alloc = span("alloc");
        call.fill = span("fill");
        call.free = span("free");
        if let Some(finish) = find("finish") {
            call.ret = ms(whole.end_ns.saturating_sub(finish.end_ns));
        }
        if let Some(pooled) = find("encode") {
            call.before = ms(pooled.start_ns.saturating_sub(t0));
            call.pooled = ms(pooled.end_ns - pooled.start_ns);
            call.after = ms(whole.end_ns.saturating_sub(pooled.end_ns));
            let mut segments: Vec<_> = events.iter().filter(|e| e.what == "segment").collect();
            segments.sort_by_key(|e| e.start_ns);
            call.segments = segments
                .iter()
                .map(|e| (e.thread, ms(e.start_ns.saturating_sub(pooled.start_ns)), ms(e.end_ns - e.start_ns), e.size))
                .collect();
            call.segment_cpu = segments.iter().map(|e| ms(e.cpu_ns)).collect();
            call.segment_faults = segments.iter().map(|e| e.faults as f64).collect();
            call.jobs = events
                .iter()
                .filter(|e| e.what == "copy" || e.what == "help")
                .map(|e| {
                    let start = ms(e.start_ns.saturating_sub(pooled.start_ns));
                    (e.what, e.thread, start, ms(e.end_ns - e.start_ns), e.size, e.faults)
                })
                .collect();
            let last_end = segments.iter().map(|e| e.end_ns).max().unwrap_or(pooled.end_ns);
            call.join = ms(pooled.end_ns.saturating_sub(last_end));
        }
        if let Some(fill) = find("fill") {
            let copies: Vec<_> = events.iter().filter(|e| e.what == "copy").collect();
            let first = copies.iter().map(|e| e.start_ns).min();
            let last = copies.iter().map(|e| e.start_ns).max();
            call.copy_wake = first.map_or(0.0, |s| ms(s.saturating_sub(fill.start_ns)));
            call.copy_last = last.map_or(0.0, |s| ms(s.saturating_sub(fill.start_ns)));
            call.copy_max = copies.iter().map(|e| ms(e.end_ns - e.start_ns)).fold(0.0, f64::max);
        }
        call
    }

    fn ends(&self) -> Vec<f64> {
        let mut ends: Vec<f64> = self.segments.iter().map(|s| s.1 + s.2).collect();
        ends.sort_by(f64::total_cmp);
        ends
    }

    fn starts(&self) -> Vec<f64> {
        let mut starts: Vec<f64> = self.segments.iter().map(|s| s.1).collect();
        starts.sort_by(f64::total_cmp);
        starts
    }

    /// Last segment end - median segment end.
    fn imbalance(&self) -> f64 {
        let mut ends = self.ends();
        ends.last().copied().unwrap_or(0.0) - median(&mut ends)
    }

    /// Pool threads that ran a segment, and the most segments one of them ran.
    fn spread(&self) -> (usize, usize) {
        let mut count = std::collections::HashMap::new();
        for s in &self.segments {
            *count.entry(s.0).or_insert(0usize) += 1;
        }
        (count.len(), count.values().copied().max().unwrap_or(0))
    }

    fn print(&self, doc: usize) {
        let starts = self.starts();
        let (used, most) = self.spread();
        let work: f64 = self.segments.iter().map(|s| s.2).sum();
        println!(
            "call doc={doc} wall={:.3} plan={:.3} before={:.3} pooled={:.3} wake_first={:.3} wake_last={:.3} \
             imbalance={:.3} join={:.3} return={:.3} alloc={:.3} fill={:.3} copy_wake={:.3} copy_last={:.3} copy_max={:.3} free={:.3} after={:.3} drop={:.3} \
             seg_sum={:.3} segments={} threads_used={used} most_per_thread={most}",
            self.wall,
            self.plan,
            self.before,
            self.pooled,
            starts.first().copied().unwrap_or(0.0),
            starts.last().copied().unwrap_or(0.0),
            self.imbalance(),
            self.join,
            self.ret,
            self.alloc,
            self.fill,
            self.copy_wake,
            self.copy_last,
            self.copy_max,
            self.free,
            self.after,
            self.dropped,
            work,
            self.segments.len(),
        );
        for (thread, start, duration, bytes) in &self.segments {
            let thread = thread.map_or("caller".to_owned(), |t| t.to_string());
            println!("seg doc={doc} thread={thread} start={start:.3} dur={duration:.3} bytes={bytes}");
        }
        let cpu: Vec<String> = self.segment_cpu.iter().map(|c| format!("{c:.3}")).collect();
        for (what, thread, start, duration, size, faults) in &self.jobs {
            let thread = thread.map_or("caller".to_owned(), |t| t.to_string());
            println!(
                "job doc={doc} {what} thread={thread} start={start:.3} dur={duration:.3} tokens={size} faults={faults}"
            );
        }
        let faults: Vec<String> = self.segment_faults.iter().map(|f| format!("{f:.0}")).collect();
        println!(
            "segcpu doc={doc} {} faults {} caller_faults {:.0}",
            cpu.join(" "),
            faults.join(" "),
            self.call_faults
        );
    }
}

/// Medians over the documents of where the calls' time went, in ms and as a share of the wall.
fn print_trace_summary(calls: &[CallTrace], threads: usize, one_thread_ms: f64, one_thread_cpu_ms: f64) {
    let med = |f: &dyn Fn(&CallTrace) -> f64| median(&mut calls.iter().map(f).collect::<Vec<_>>());
    let wall = med(&|c| c.wall);
    let pct = |v: f64| if wall > 0.0 { 100.0 * v / wall } else { 0.0 };
    let rows: [(&str, f64); 18] = [
        ("wall", wall),
        ("serial before the pool (plan included)", med(&|c| c.before)),
        ("  plan (boundary search)", med(&|c| c.plan)),
        ("wake: first segment start", med(&|c| c.starts().first().copied().unwrap_or(0.0))),
        ("wake: last segment start", med(&|c| c.starts().last().copied().unwrap_or(0.0))),
        ("segment duration, median", med(&|c| median(&mut c.segments.iter().map(|s| s.2).collect::<Vec<_>>()))),
        ("segment duration, max", med(&|c| c.segments.iter().map(|s| s.2).fold(0.0, f64::max))),
        ("imbalance (last end - median end)", med(&CallTrace::imbalance)),
        ("join (last end to return)", med(&|c| c.join)),
        ("serial after the pool (finish)", med(&|c| c.after)),
        ("  alloc columns", med(&|c| c.alloc)),
        ("  fill (parallel copy, caller's view)", med(&|c| c.fill)),
        ("  copy wake (first copy job start)", med(&|c| c.copy_wake)),
        ("  copy wake (last copy job start)", med(&|c| c.copy_last)),
        ("  longest copy job", med(&|c| c.copy_max)),
        ("  free segments", med(&|c| c.free)),
        ("return (finish end to the call's end)", med(&|c| c.ret)),
        ("drop encoding (caller)", med(&|c| c.dropped)),
    ];
    println!("\ntrace summary, {threads} threads, median over {} documents:", calls.len());
    println!("| phase | ms | % of wall |");
    println!("|---|---|---|");
    for (name, value) in rows {
        println!("| {name} | {value:.3} | {:.1} |", pct(value));
    }
    let busy = med(&|c| {
        let work: f64 = c.segments.iter().map(|s| s.2).sum();
        if c.pooled > 0.0 {
            work / (threads as f64 * c.pooled)
        } else {
            0.0
        }
    });
    let inflation = med(&|c| c.segments.iter().map(|s| s.2).sum::<f64>()) / one_thread_ms.max(1e-9);
    println!("busy (segment time / threads x pool time): {busy:.2}");
    println!("segment time summed / 1-thread wall: {inflation:.2}");
    let cpu_sum = med(&|c| c.segment_cpu.iter().sum::<f64>());
    let on_core = med(&|c| {
        let wall: f64 = c.segments.iter().map(|s| s.2).sum();
        if wall > 0.0 {
            c.segment_cpu.iter().sum::<f64>() / wall
        } else {
            0.0
        }
    });
    println!(
        "segment CPU summed / 1-thread call CPU (caller's thread): {cpu_sum:.3} / {one_thread_cpu_ms:.3} ms = {:.3}; segments on a core {:.1} % of their wall",
        cpu_sum / one_thread_cpu_ms.max(1e-9),
        100.0 * on_core
    );
    let spread = med(&|c| c.spread().0 as f64);
    let most = med(&|c| c.spread().1 as f64);
    println!("pool threads used {spread:.0}, most segments on one thread {most:.0}");
    let [call, deadline, busy] = lopt::trace::linger_ends();
    println!("linger ends: next call {call}, deadline {deadline}, busy core {busy}");
}
