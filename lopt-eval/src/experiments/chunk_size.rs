//! `chunk-size`: lopt's latency vs its target chunk length in bytes, with the number of chunks per
//! document on a second axis; HF sequential as a flat reference.

use anyhow::{bail, Result};

use crate::cli::ChunkSizeArgs;
use crate::measure::mean;
use crate::methods::{Ctx, Method};
use crate::plot::{Figure, Series};
use crate::runner::{context_sweep, hf_line, method_lines, Defaults, Runner};

/// Runs `chunk-size`: lopt's methods at each chunk length, HF once, interleaved per document.
///
/// # Errors
/// Invalid flags, unreadable inputs, a method failing on a text, or unwritable results.
pub fn run(a: ChunkSizeArgs) -> Result<()> {
    let defaults = Defaults {
        max_docs: Some(8),
        tokenizers: vec!["qwen3".to_owned()],
        corpora: &["en_verylong"],
        methods: &[Method::Hf, Method::Lopt],
    };
    let mut r = Runner::new(&a.common, "chunk-size", defaults)?;
    let timed_hf = r.methods.contains(&Method::Hf);
    let lopt_methods = r.lopt_methods()?;
    let mut sizes = a.chunk_sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.contains(&0) {
        bail!("chunk sizes must be at least 1 byte");
    }
    // Contexts: one per chunk length, then the default one (the HF reference runs there).
    r.each(
        |c| c.docs.len(),
        |s, bytes| {
            let mut ctxs: Vec<Ctx> = sizes
                .iter()
                .map(|&cs| Ctx::new(bytes, s.threads, Some(cs), s.params, s.fresh))
                .collect::<Result<_>>()?;
            ctxs.insert(0, Ctx::new(bytes, s.threads, None, s.params, s.fresh)?);
            Ok(ctxs)
        },
        |job| {
            let (base, sweep) = job.ctxs.split_at(1);
            // Untimed: the mean number of segments each context cuts a document into.
            let chunks: Vec<f64> = sweep
                .iter()
                .map(|ctx| {
                    mean(
                        &job.corpus
                            .docs
                            .iter()
                            .map(|d| (ctx.tokenizer.cut_points(&d.text).len() + 1) as f64)
                            .collect::<Vec<_>>(),
                    )
                })
                .collect();
            context_sweep(job, sweep, &base[0], &lopt_methods, timed_hf, job.s.threads, |row, k| {
                row.chunk_size = Some(sizes[k]);
                row.chunks = Some(chunks[k]);
            })
        },
    )?;
    r.speedups(|h, x| h.tokenizer == x.tokenizer && h.corpus == x.corpus);
    let mut body = String::from(
        "`chunk_size` is lopt's target chunk length in bytes; `chunks` the mean number of segments per document.\n\n",
    );
    body.push_str(&r.plot_each("chunk_size", |_, _, rows| {
        let first: Vec<_> =
            rows.iter().filter(|r| r.chunk_size.is_some() && r.method == lopt_methods[0].name()).collect();
        let xs: Vec<f64> = first.iter().filter_map(|r| r.chunk_size.map(|c| c as f64)).collect();
        let mut series = method_lines(rows, &lopt_methods, |r| r.chunk_size.map(|c| (c as f64, r.mean_ms)));
        series.extend(hf_line(rows, &xs, |h| h.mean_ms));
        Figure {
            title: "lopt latency vs chunk length".into(),
            x_label: "chunk length (bytes, log scale)".into(),
            y_label: "latency per document (ms)".into(),
            x_log2: true,
            series,
            secondary_label: Some("chunks per document".into()),
            secondary: vec![Series::dashed(
                "chunks per document (right axis)",
                first.iter().map(|r| (r.chunk_size.unwrap_or(0) as f64, r.chunks.unwrap_or(0.0))).collect(),
            )],
            ..Figure::default()
        }
    })?);
    r.finish("lopt latency vs chunk length (paper Fig. chunk_size)", &body)
}
