//! `threads`: latency and throughput vs the size of the pool, with an ideal-scaling line for every
//! swept method (its figure at the fewest threads, scaled by t) and HF sequential as a flat
//! reference. Every method but `hf` is swept: lopt's own pool, or the baselines' pool (whose
//! chunk count follows the thread count unless `--pieces` fixes it).

use anyhow::{bail, Result};

use crate::cli::ThreadsArgs;
use crate::methods::{Ctx, Method};
use crate::plot::{Figure, Series};
use crate::report::Row;
use crate::runner::{available_cores, context_sweep, hf_line, Defaults, Runner};

/// The default sweep: every count up to 8, beyond that powers of two and `n` itself.
pub fn thread_sweep(n: usize) -> Vec<usize> {
    let n = n.max(1);
    if n <= 8 {
        return (1..=n).collect();
    }
    let mut v: Vec<usize> = std::iter::successors(Some(1usize), |x| x.checked_mul(2)).take_while(|&x| x <= n).collect();
    if v.last() != Some(&n) {
        v.push(n);
    }
    v
}

/// Runs `threads`: every method but `hf` at each thread count, HF once, interleaved per document.
///
/// # Errors
/// Invalid flags, unreadable inputs, a method failing on a text, or unwritable results.
pub fn run(a: ThreadsArgs) -> Result<()> {
    let defaults = Defaults {
        max_docs: Some(8),
        tokenizers: vec!["qwen3".to_owned()],
        corpora: &["en_verylong"],
        methods: &[Method::Hf, Method::Lopt],
    };
    let mut r = Runner::new(&a.common, "threads", defaults)?;
    let mut counts = if a.thread_counts.is_empty() {
        thread_sweep(a.max_threads.unwrap_or_else(available_cores))
    } else {
        a.thread_counts.clone()
    };
    counts.sort_unstable();
    counts.dedup();
    if counts.contains(&0) {
        bail!("thread counts must be at least 1");
    }
    let timed_hf = r.methods.contains(&Method::Hf);
    let swept: Vec<Method> = r.methods.iter().copied().filter(|&m| m != Method::Hf).collect();
    if swept.is_empty() {
        bail!("threads sweeps the pool: --methods needs a method besides hf");
    }
    r.s.threads_label = match (counts.first(), counts.last()) {
        (Some(lo), Some(hi)) if lo != hi => format!("{lo}-{hi} threads (swept)"),
        _ => format!("{} threads", counts.first().copied().unwrap_or(1)),
    };
    r.each(
        |c| c.docs.len(),
        |s, bytes| counts.iter().map(|&t| Ctx::new(bytes, t, None, s.params, s.fresh)).collect(),
        |job| context_sweep(job, job.ctxs, &job.ctxs[0], &swept, timed_hf, 1, |row, k| row.threads = counts[k]),
    )?;
    r.speedups(|h, x| h.tokenizer == x.tokenizer && h.corpus == x.corpus);
    let mut body = String::from(
        "The `threads` column is the size of the pool (lopt's own, or the baselines'); hf is single-threaded. Ideal scaling of a method = its \
         latency at the fewest threads x (fewest / t); throughput = mean bytes / mean latency.\n\n",
    );
    // Powers of two are the natural thread counts, and ideal scaling is a straight line on log axes.
    let x_log2 = true;
    body.push_str(&r.plot_each("threads", |_, _, rows| Figure {
        title: "Latency vs threads".into(),
        x_label: "threads".into(),
        y_label: "latency per document (ms)".into(),
        x_log2,
        series: scaling_lines(rows, &swept, |r| r.mean_ms, |y1, t1, t| y1 * t1 / t),
        ..Figure::default()
    })?);
    body.push_str(&r.plot_each("threads_throughput", |_, _, rows| Figure {
        title: "Throughput vs threads".into(),
        x_label: "threads".into(),
        y_label: "throughput (MB/s)".into(),
        x_log2,
        series: scaling_lines(rows, &swept, mb_per_s, |y1, t1, t| y1 * t / t1),
        ..Figure::default()
    })?);
    r.finish("lopt latency vs thread count (paper Fig. process_num)", &body)
}

/// Megabytes per second of a row (mean bytes over mean latency).
fn mb_per_s(r: &Row) -> f64 {
    if r.mean_ms > 0.0 {
        r.mean_bytes / (r.mean_ms * 1e3)
    } else {
        0.0
    }
}

/// Per swept method: its measured line `y` over threads and a dashed ideal-scaling line drawn from
/// its point at the fewest threads by `ideal(y1, t1, t)`; then HF sequential, flat.
fn scaling_lines(
    rows: &[&Row],
    methods: &[Method],
    y: impl Fn(&Row) -> f64,
    ideal: impl Fn(f64, f64, f64) -> f64,
) -> Vec<Series> {
    let mut series = Vec::new();
    let mut xs = Vec::new();
    for (i, m) in methods.iter().enumerate() {
        let line: Vec<(f64, f64)> =
            rows.iter().filter(|r| r.method == m.name()).map(|r| (r.threads as f64, y(r))).collect();
        series.push(Series::solid(m.label(), line.clone()).colored(i));
        if let Some(&(t1, y1)) = line.first() {
            series.push(
                Series::dashed(
                    format!("ideal scaling of {}", m.name()),
                    line.iter().map(|&(t, _)| (t, ideal(y1, t1, t))).collect(),
                )
                .colored(i),
            );
        }
        if xs.is_empty() {
            xs = line.iter().map(|p| p.0).collect();
        }
    }
    // Grey, the palette's last colour: a reference, not a method of the sweep.
    series.extend(hf_line(rows, &xs, y).map(|s| s.colored(7)));
    series
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_sweep_covers_any_n() {
        assert_eq!(thread_sweep(1), vec![1]);
        assert_eq!(thread_sweep(2), vec![1, 2]);
        assert_eq!(thread_sweep(8), (1..=8).collect::<Vec<_>>());
        assert_eq!(thread_sweep(112), vec![1, 2, 4, 8, 16, 32, 64, 112]);
        assert_eq!(thread_sweep(0), vec![1]);
    }
}
