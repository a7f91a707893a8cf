//! `batch-size`: total time to encode a batch vs its size, for `hf` (one document after the
//! other), `hf-batch` (HF `encode_batch` on the pool) and `lopt` (`encode_batch`).

use anyhow::{bail, Result};

use crate::cli::BatchSizeArgs;
use crate::measure::{self, mean, median};
use crate::methods::{Ctx, Method};
use crate::output::Output;
use crate::plot::Figure;
use crate::report::Row;
use crate::runner::{method_lines, Defaults, Job, Runner};

/// Runs `batch-size`: every method on batches of each size, interleaved per batch.
///
/// # Errors
/// Invalid flags, unreadable inputs, a method failing on a text, or unwritable results.
pub fn run(a: BatchSizeArgs) -> Result<()> {
    let mut sizes = a.batch_sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.contains(&0) {
        bail!("batch sizes must be at least 1");
    }
    let largest = sizes.last().copied().unwrap_or(1);
    let defaults = Defaults {
        max_docs: Some(largest),
        tokenizers: vec!["qwen3".to_owned()],
        corpora: &["en_verylong"],
        methods: &[Method::Hf, Method::HfBatch, Method::Lopt],
    };
    let mut r = Runner::new(&a.common, "batch-size", defaults)?;
    let methods = r.methods.clone();
    r.each(
        |_| sizes.len(),
        |s, bytes| Ok(vec![Ctx::new(bytes, s.threads, None, s.params, s.fresh)?]),
        |job| per_corpus(job, &methods, &sizes, largest),
    )?;
    r.speedups(|h, x| h.tokenizer == x.tokenizer && h.corpus == x.corpus && h.batch_size == x.batch_size);
    let mut body = String::from(
        "`mean_ms` is the time to encode the whole batch (median of the repeats). hf: one document after the other; \
         hf-batch: HF `encode_batch` on the pool (documents in parallel); lopt: `encode_batch` (the segments of all \
         documents share the pool). Batches reuse the corpus' documents cyclically when it has fewer.\n\n",
    );
    body.push_str(&r.plot_each("batch_size", |_, _, rows| Figure {
        title: "Total time vs batch size".into(),
        x_label: "batch size (documents, log scale)".into(),
        y_label: "total time (s)".into(),
        x_log2: true,
        series: method_lines(rows, &methods, |r| r.batch_size.map(|b| (b as f64, r.mean_ms / 1e3))),
        ..Figure::default()
    })?);
    r.finish("Total time vs batch size (paper Fig. batch_size)", &body)
}

fn per_corpus(job: &Job<'_>, methods: &[Method], sizes: &[usize], largest: usize) -> Result<Vec<Row>> {
    let ctx = &job.ctxs[0];
    let docs = &job.corpus.docs;
    let distinct = docs.len().min(largest);
    if distinct == 0 {
        bail!("corpus {} has no document", job.corpus.name);
    }
    let references: Vec<Output> =
        docs[..distinct].iter().map(|d| measure::reference(ctx, &d.text)).collect::<Result<_>>()?;
    for m in methods {
        ctx.encode_many(*m, &[docs[0].text.as_str()])?;
    }
    let mut rows = Vec::new();
    for (bi, &b) in sizes.iter().enumerate() {
        let texts: Vec<&str> = (0..b).map(|i| docs[i % distinct].text.as_str()).collect();
        let batch_bytes: Vec<f64> = texts.iter().map(|t| t.len() as f64).collect();
        let batch_tokens: Vec<f64> = (0..b).map(|i| references[i % distinct].ids.len() as f64).collect();
        let mut times = vec![Vec::new(); methods.len()];
        let mut exact = vec![0usize; methods.len()];
        for round in 0..job.s.repeat {
            for step in 0..methods.len() {
                let k = (step + round + bi) % methods.len();
                ctx.prepare();
                let (outs, ms) = measure::time(|| ctx.encode_many(methods[k], &texts))?;
                if round == 0 {
                    exact[k] = outs.iter().enumerate().filter(|(i, o)| *o == &references[i % distinct]).count();
                }
                times[k].push(ms);
            }
        }
        for (k, &m) in methods.iter().enumerate() {
            let mut row = job.row(m);
            row.docs = b;
            row.batch_size = Some(b);
            row.mean_ms = median(&times[k]);
            row.median_ms = row.mean_ms;
            row.accuracy = exact[k] as f64 / b as f64;
            row.mean_bytes = mean(&batch_bytes);
            row.mean_tokens = mean(&batch_tokens);
            rows.push(row);
        }
        job.tick();
    }
    Ok(rows)
}
