//! `seq-len`: latency vs sequence length, each document cut at the offset of token N (documents
//! shorter than N are left out of that row); HF and lopt by default.

use anyhow::Result;

use crate::cli::SeqLenArgs;
use crate::corpus;
use crate::measure::{self, DocResult, Variant};
use crate::methods::{Ctx, Method};
use crate::output::hf_err;
use crate::plot::Figure;
use crate::runner::{fill, method_lines, warm_up, Defaults, Job, Runner};

/// Runs `seq-len`: every method on each document cut to each sequence length.
///
/// # Errors
/// Invalid flags, unreadable inputs, a method failing on a text, or unwritable results.
pub fn run(a: SeqLenArgs) -> Result<()> {
    let defaults = Defaults {
        max_docs: Some(8),
        tokenizers: vec!["qwen3".to_owned()],
        corpora: &["en_verylong"],
        methods: &[Method::Hf, Method::Lopt],
    };
    let mut r = Runner::new(&a.common, "seq-len", defaults)?;
    let mut lengths = a.lengths.clone();
    lengths.sort_unstable();
    lengths.dedup();
    let methods = r.methods.clone();
    r.each(
        |c| c.docs.len(),
        |s, bytes| Ok(vec![Ctx::new(bytes, s.threads, None, s.params, s.fresh)?]),
        |job| per_corpus(job, &methods, &lengths),
    )?;
    r.speedups(|h, x| h.tokenizer == x.tokenizer && h.corpus == x.corpus && h.seq_len == x.seq_len);
    let mut body =
        String::from("Documents cut at the offset of token N (documents shorter than N are left out of that row).\n\n");
    body.push_str(&r.plot_each("seq_len", |_, _, rows| Figure {
        title: "Latency vs sequence length".into(),
        x_label: "sequence length (tokens, log scale)".into(),
        y_label: "latency per document (ms)".into(),
        x_log2: true,
        series: method_lines(rows, &methods, |r| r.seq_len.map(|l| (l as f64, r.mean_ms))),
        ..Figure::default()
    })?);
    r.finish("Latency vs sequence length (paper Fig. seq_len)", &body)
}

fn per_corpus(job: &Job<'_>, methods: &[Method], lengths: &[usize]) -> Result<Vec<crate::report::Row>> {
    let ctx = &job.ctxs[0];
    let variants: Vec<Variant<'_>> = methods.iter().map(|&method| Variant { ctx, method }).collect();
    let longest = lengths.last().copied().unwrap_or(0);
    // results[length][variant]
    let mut results = vec![vec![Vec::<DocResult>::new(); variants.len()]; lengths.len()];
    let mut tokens = vec![Vec::new(); lengths.len()];
    let mut bytes = vec![Vec::new(); lengths.len()];
    let mut warmed = false;
    for (d, doc) in job.corpus.docs.iter().enumerate() {
        // Token offsets of a prefix long enough for the longest length (16 bytes a token is
        // generous for every script here).
        let head = corpus::truncate(&doc.text, longest.saturating_mul(16).max(1));
        let enc = ctx.hf().encode(head, false).map_err(hf_err)?;
        let offsets = enc.get_offsets();
        for (li, &len) in lengths.iter().enumerate() {
            let cut = match offsets.get(len) {
                Some(o) => o.0,
                None if offsets.len() == len && head.len() == doc.text.len() => doc.text.len(),
                None => continue,
            };
            let text = &doc.text[..cut];
            if !warmed {
                warm_up(&variants, text)?;
                warmed = true;
            }
            let reference = if methods.contains(&Method::Hf) { None } else { Some(measure::reference(ctx, text)?) };
            let (res, n) = measure::measure_doc(&variants, text, reference.as_ref(), job.s.repeat, d)?;
            for (k, r) in res.into_iter().enumerate() {
                results[li][k].push(r);
            }
            tokens[li].push(n as f64);
            bytes[li].push(text.len() as f64);
        }
        job.tick();
    }
    let mut rows = Vec::new();
    for (li, &len) in lengths.iter().enumerate() {
        for (k, &m) in methods.iter().enumerate() {
            if results[li][k].is_empty() {
                continue;
            }
            let mut row = job.row(m);
            fill(&mut row, &results[li][k], &bytes[li], &tokens[li]);
            row.seq_len = Some(len);
            rows.push(row);
        }
    }
    Ok(rows)
}
