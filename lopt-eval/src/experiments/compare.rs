//! `compare`: the paper's Table 1 — latency, accuracy and speedup over HF of every method on every
//! corpus and tokenizer (default: every fixture tokenizer present, the four shared corpora).

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::CompareArgs;
use crate::corpus::{self, Corpus};
use crate::measure::{self, mean, median, Variant};
use crate::methods::{Ctx, Method};
use crate::report::{self, Row};
use crate::runner::{measure_corpus, Defaults, Job, Runner};

/// Runs `compare`: every method on every document of every corpus and tokenizer.
///
/// # Errors
/// Invalid flags, unreadable inputs, a method failing on a text, or unwritable results.
pub fn run(a: CompareArgs) -> Result<()> {
    let defaults = Defaults {
        max_docs: None,
        tokenizers: corpus::default_tokenizers(),
        corpora: corpus::CORPORA,
        methods: &Method::TABLE,
    };
    let mut r = Runner::new(&a.common, "compare", defaults)?;
    let methods = r.methods.clone();
    let per_doc: Vec<Method> = methods.iter().copied().filter(|m| *m != Method::HfBatch).collect();
    r.each(
        |c| c.docs.len(),
        |s, bytes| Ok(vec![Ctx::new(bytes, s.threads, None, s.params, s.fresh)?]),
        |job| {
            let ctx = &job.ctxs[0];
            let variants: Vec<Variant<'_>> = per_doc.iter().map(|&method| Variant { ctx, method }).collect();
            let m = measure_corpus(job, &variants, ctx)?;
            let mut rows: Vec<Row> = per_doc.iter().enumerate().map(|(k, &method)| m.row(job, method, k)).collect();
            if methods.contains(&Method::HfBatch) {
                rows.push(hf_batch_row(job, ctx, &m.bytes, &m.tokens)?);
            }
            Ok(rows)
        },
    )?;
    r.speedups(|h, x| h.tokenizer == x.tokenizer && h.corpus == x.corpus);
    let mut body = String::from("\n");
    body.push_str(&markdown(&r.rows, &r.toks, &r.corpora, &methods));
    body.push_str("\n## All rows\n\n");
    r.finish("Comparison (paper Table 1)", &body)
}

/// `hf-batch`: HF `encode_batch` over all documents of the corpus on the pool; its per-document
/// latency is the batch time divided by the number of documents (a throughput figure: no single
/// document is faster).
fn hf_batch_row(job: &Job<'_>, ctx: &Ctx, bytes: &[f64], tokens: &[f64]) -> Result<Row> {
    let texts: Vec<&str> = job.corpus.docs.iter().map(|d| d.text.as_str()).collect();
    let references = texts.iter().map(|t| measure::reference(ctx, t)).collect::<Result<Vec<_>>>()?;
    let mut times = Vec::new();
    let mut exact = 0;
    for round in 0..job.s.repeat {
        ctx.prepare();
        let (outs, ms) = measure::time(|| ctx.encode_many(Method::HfBatch, &texts))?;
        if round == 0 {
            exact = outs.iter().zip(&references).filter(|(o, r)| o == r).count();
        }
        times.push(ms);
    }
    let per_doc = median(&times) / texts.len().max(1) as f64;
    let mut row = job.row(Method::HfBatch);
    row.docs = texts.len();
    row.mean_ms = per_doc;
    row.median_ms = per_doc;
    row.accuracy = exact as f64 / texts.len().max(1) as f64;
    row.mean_bytes = mean(bytes);
    row.mean_tokens = mean(tokens);
    Ok(row)
}

fn markdown(rows: &[Row], toks: &[(String, PathBuf)], corpora: &[Corpus], methods: &[Method]) -> String {
    let mut headers = vec!["tokenizer".to_owned(), "method".to_owned()];
    for c in corpora {
        headers.push(format!("{} ms", c.name));
        headers.push("acc".to_owned());
        headers.push("speedup".to_owned());
    }
    let mut body = Vec::new();
    for (t, _) in toks {
        for m in methods {
            let mut line = vec![t.clone(), m.label().to_owned()];
            for c in corpora {
                match rows.iter().find(|r| &r.tokenizer == t && r.corpus == c.name && r.method == m.name()) {
                    Some(r) => {
                        line.push(report::ms(r.mean_ms));
                        line.push(format!("{:.3}", r.accuracy));
                        line.push(report::speedup(r.speedup_vs_hf));
                    }
                    None => line.extend(["-".to_owned(), "-".to_owned(), "-".to_owned()]),
                }
            }
            body.push(line);
        }
    }
    let mut out = String::from(
        "Mean per-document latency (ms), accuracy (exact ids and attention mask vs HF), speedup vs HF.\n\n",
    );
    let docs: Vec<String> =
        corpora.iter().map(|c| format!("{} ({} docs, mean {:.0} KB)", c.name, c.docs.len(), mean_kb(c))).collect();
    out.push_str(&format!("Corpora: {}.\n\n", docs.join(", ")));
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    out.push_str(&report::table(&headers, &body));
    out
}

fn mean_kb(c: &Corpus) -> f64 {
    mean(&c.docs.iter().map(|d| d.text.len() as f64 / 1024.0).collect::<Vec<_>>())
}
