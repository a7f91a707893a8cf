//! The five experiments: `compare` (Table 1) and the sweeps behind the paper's figures
//! (`seq-len`, `chunk-size`, `batch-size`, `threads`). Each writes `results.json`,
//! `results.csv`, `results.md` and, where the paper has a figure, PNG plots into `--out`.
//!
//! Every experiment warms up once (each variant on the first input), then times all its variants
//! interleaved per document ([`measure::measure_doc`]); per-document latency is the median of
//! `--repeat` runs, and rows report the mean and median of those over documents.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{BatchSizeArgs, ChunkSizeArgs, Cli, Command, Common, CompareArgs, SeqLenArgs, ThreadsArgs};
use crate::corpus::{self, Corpus};
use crate::measure::{self, mean, median, DocResult, Variant};
use crate::methods::{Ctx, Method, Output, Params};
use crate::plot::{self, Figure, Series};
use crate::report::{self, Row};

/// Runs the experiment the command line names.
///
/// # Errors
/// Any failure to read inputs, tokenize, or write results.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Compare(a) => compare(a),
        Command::SeqLen(a) => seq_len(a),
        Command::ChunkSize(a) => chunk_size(a),
        Command::BatchSize(a) => batch_size(a),
        Command::Threads(a) => threads(a),
    }
}

/// Settings every experiment derives from [`Common`].
struct Setup {
    name: &'static str,
    threads: usize,
    params: Params,
    fresh: bool,
    repeat: usize,
    out: PathBuf,
    max_docs: Option<usize>,
    max_bytes: Option<usize>,
}

impl Setup {
    fn new(c: &Common, name: &'static str, default_max_docs: Option<usize>) -> Result<Setup> {
        let threads = c.threads.unwrap_or_else(available_cores);
        if threads == 0 {
            bail!("--threads must be at least 1");
        }
        if c.repeat == 0 {
            bail!("--repeat must be at least 1");
        }
        Ok(Setup {
            name,
            threads,
            params: Params { overlap_chars: c.overlap_chars, pieces: c.pieces, ..Params::default() },
            fresh: !c.warm_cache,
            repeat: c.repeat,
            out: c.out.clone().unwrap_or_else(|| PathBuf::from("lopt-eval-results").join(name)),
            max_docs: c.max_docs.or(default_max_docs),
            max_bytes: c.max_bytes,
        })
    }

    fn cache(&self) -> String {
        if self.fresh { "fresh" } else { "warm" }.to_owned()
    }

    fn row(&self, method: Method, tokenizer: &str, corpus: &str) -> Row {
        Row {
            experiment: self.name.to_owned(),
            method: method.name().to_owned(),
            tokenizer: tokenizer.to_owned(),
            corpus: corpus.to_owned(),
            threads: self.threads,
            repeat: self.repeat,
            cache: self.cache(),
            ..Row::default()
        }
    }

    /// The header of `results.md`: what ran and how.
    fn header(&self, title: &str) -> String {
        let args: Vec<String> = std::env::args().collect();
        format!(
            "# {title}\n\nCommand: `{}`\n\nthreads {}, baseline chunks {}, repeat {} (median per document), BPE cache {}, \
             max bytes per document {}, overlap {} chars (overlap-* and lopt-paper).\n\n",
            args.join(" "),
            self.threads,
            self.params.pieces.unwrap_or(self.threads),
            self.repeat,
            self.cache(),
            self.max_bytes.map_or_else(|| "unlimited".to_owned(), |b| b.to_string()),
            self.params.overlap_chars,
        )
    }

    fn finish(&self, rows: &[Row], markdown: &str) -> Result<()> {
        report::write(&self.out, rows, markdown)?;
        eprintln!("{}: {} rows written to {}", self.name, rows.len(), self.out.display());
        Ok(())
    }
}

fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn tokenizers(c: &Common, default: Vec<String>) -> Result<Vec<(String, PathBuf)>> {
    let names = if c.tokenizers.is_empty() { default } else { c.tokenizers.clone() };
    if names.is_empty() {
        bail!("no tokenizer: pass --tokenizers (no fixture tokenizer found)");
    }
    names.iter().map(|n| corpus::resolve_tokenizer(n)).collect()
}

fn corpora(c: &Common, default: &[&str], s: &Setup) -> Result<Vec<Corpus>> {
    let names: Vec<String> =
        if c.corpus.is_empty() { default.iter().map(|s| (*s).to_owned()).collect() } else { c.corpus.clone() };
    names
        .iter()
        .map(|n| {
            let (label, path) = corpus::resolve_corpus(n)?;
            corpus::load(&label, &path, s.max_docs, s.max_bytes)
        })
        .collect()
}

fn methods(c: &Common, default: &[Method]) -> Vec<Method> {
    let mut m = if c.methods.is_empty() { default.to_vec() } else { c.methods.clone() };
    let mut seen = Vec::new();
    m.retain(|x| {
        let new = !seen.contains(x);
        seen.push(*x);
        new
    });
    m
}

fn progress(len: u64) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{msg:30} [{bar:32}] {pos}/{len} docs  {elapsed_precise} (eta {eta})")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

/// A line of progress: above the bar on a terminal, plain on stderr when the bar is hidden (logs).
fn say(pb: &ProgressBar, line: String) {
    if pb.is_hidden() {
        eprintln!("{line}");
    } else {
        pb.println(line);
    }
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Aggregates per-document results into a row.
fn fill(row: &mut Row, results: &[DocResult], bytes: &[f64], tokens: &[f64]) {
    let ms: Vec<f64> = results.iter().map(|r| r.ms).collect();
    row.docs = results.len();
    row.mean_ms = mean(&ms);
    row.median_ms = median(&ms);
    row.accuracy =
        if results.is_empty() { 0.0 } else { results.iter().filter(|r| r.exact).count() as f64 / results.len() as f64 };
    row.mean_bytes = mean(bytes);
    row.mean_tokens = mean(tokens);
}

/// Sets `speedup_vs_hf` on every row from the `hf` row that `same` pairs it with.
fn speedups(rows: &mut [Row], same: impl Fn(&Row, &Row) -> bool) {
    let hf: Vec<Row> = rows.iter().filter(|r| r.method == Method::Hf.name()).cloned().collect();
    for r in rows.iter_mut() {
        if let Some(h) = hf.iter().find(|h| same(h, r)) {
            if r.mean_ms > 0.0 {
                r.speedup_vs_hf = Some(h.mean_ms / r.mean_ms);
            }
        }
    }
}

/// The lopt methods among `methods` (at least one is needed by the lopt sweeps).
fn lopt_methods(methods: &[Method]) -> Result<Vec<Method>> {
    let v: Vec<Method> = methods.iter().copied().filter(|m| matches!(m, Method::Lopt | Method::LoptHf)).collect();
    if v.is_empty() {
        bail!("this experiment sweeps lopt: --methods needs lopt or lopt-hf");
    }
    Ok(v)
}

/// Which engine `lopt` uses for a tokenizer (`lopt-hf` always uses HF), for `results.md`.
fn engine_note(tname: &str, ctx: &Ctx) -> String {
    let t = &ctx.tokenizer;
    let why = t.engine_reason().map(|r| format!(" ({r})")).unwrap_or_default();
    let par = match t.parallelism() {
        lopt::Parallelism::Parallel => String::new(),
        other => format!("; parallelism: {other:?}"),
    };
    format!("- {tname}: lopt engine `{}`{why}{par}\n", t.engine_name())
}

fn warm_up(variants: &[Variant<'_>], text: &str) -> Result<()> {
    for v in variants {
        v.ctx.encode(v.method, text)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// compare

fn compare(a: CompareArgs) -> Result<()> {
    let c = a.common;
    let s = Setup::new(&c, "compare", None)?;
    let toks = tokenizers(&c, corpus::available_fixtures())?;
    let corpora = corpora(&c, corpus::CORPORA, &s)?;
    let methods = methods(&c, &Method::TABLE);
    let per_doc: Vec<Method> = methods.iter().copied().filter(|m| *m != Method::HfBatch).collect();
    let total: usize = corpora.iter().map(|c| c.docs.len()).sum::<usize>() * toks.len();
    let pb = progress(total as u64);
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (tname, tpath) in &toks {
        pb.set_message(format!("{tname}: loading"));
        let ctx = Ctx::from_file(tpath, s.threads, s.params, s.fresh)?;
        notes.push(engine_note(tname, &ctx));
        for corpus in &corpora {
            pb.set_message(format!("{tname} / {}", corpus.name));
            let variants: Vec<Variant<'_>> = per_doc.iter().map(|&method| Variant { ctx: &ctx, method }).collect();
            warm_up(&variants, &corpus.docs[0].text)?;
            let mut results: Vec<Vec<DocResult>> = vec![Vec::new(); variants.len()];
            let (mut bytes, mut tokens, mut references) = (Vec::new(), Vec::new(), Vec::new());
            for (d, doc) in corpus.docs.iter().enumerate() {
                let reference =
                    if per_doc.contains(&Method::Hf) { None } else { Some(measure::reference(&ctx, &doc.text)?) };
                let (res, n_tokens) = measure::measure_doc(&variants, &doc.text, reference.as_ref(), s.repeat, d)?;
                for (k, r) in res.into_iter().enumerate() {
                    results[k].push(r);
                }
                bytes.push(doc.text.len() as f64);
                tokens.push(n_tokens as f64);
                if methods.contains(&Method::HfBatch) {
                    references.push(match reference {
                        Some(r) => r,
                        None => measure::reference(&ctx, &doc.text)?,
                    });
                }
                pb.inc(1);
            }
            for (k, m) in per_doc.iter().enumerate() {
                let mut row = s.row(*m, tname, &corpus.name);
                fill(&mut row, &results[k], &bytes, &tokens);
                rows.push(row);
            }
            if methods.contains(&Method::HfBatch) {
                rows.push(hf_batch_row(&s, &ctx, tname, corpus, &references, &bytes, &tokens)?);
            }
            say(&pb, format!("{tname} / {}: {} docs done", corpus.name, corpus.docs.len()));
        }
    }
    pb.finish_and_clear();
    speedups(&mut rows, |h, r| h.tokenizer == r.tokenizer && h.corpus == r.corpus);
    let mut md = s.header("Comparison (paper Table 1)");
    md.push_str(&notes.concat());
    md.push('\n');
    md.push_str(&compare_markdown(&rows, &toks, &corpora, &methods));
    md.push_str("\n## All rows\n\n");
    md.push_str(&report::long_table(&rows));
    s.finish(&rows, &md)
}

/// `hf-batch` in `compare`: HF `encode_batch` over all documents of the corpus on the pool; its
/// per-document latency is the batch time divided by the number of documents (a throughput
/// figure: no single document is faster).
fn hf_batch_row(
    s: &Setup,
    ctx: &Ctx,
    tname: &str,
    corpus: &Corpus,
    references: &[Output],
    bytes: &[f64],
    tokens: &[f64],
) -> Result<Row> {
    let texts: Vec<&str> = corpus.docs.iter().map(|d| d.text.as_str()).collect();
    let mut times = Vec::new();
    let mut exact = 0;
    for round in 0..s.repeat {
        ctx.prepare();
        let (outs, ms) = measure::time(|| ctx.encode_many(Method::HfBatch, &texts))?;
        if round == 0 {
            exact = outs.iter().zip(references).filter(|(o, r)| o == r).count();
        }
        times.push(ms);
    }
    let per_doc = median(&times) / texts.len() as f64;
    let mut row = s.row(Method::HfBatch, tname, &corpus.name);
    row.docs = texts.len();
    row.mean_ms = per_doc;
    row.median_ms = per_doc;
    row.accuracy = exact as f64 / texts.len() as f64;
    row.mean_bytes = mean(bytes);
    row.mean_tokens = mean(tokens);
    Ok(row)
}

fn compare_markdown(rows: &[Row], toks: &[(String, PathBuf)], corpora: &[Corpus], methods: &[Method]) -> String {
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

// ---------------------------------------------------------------------------------------------
// seq-len

fn seq_len(a: SeqLenArgs) -> Result<()> {
    let c = a.common;
    let s = Setup::new(&c, "seq-len", Some(8))?;
    let toks = tokenizers(&c, vec!["qwen3".to_owned()])?;
    let corpora = corpora(&c, &["en_verylong"], &s)?;
    let methods = methods(&c, &[Method::Hf, Method::Lopt]);
    let mut lengths = a.lengths.clone();
    lengths.sort_unstable();
    lengths.dedup();
    let longest = lengths.last().copied().unwrap_or(0);
    let mut notes = Vec::new();
    let total: usize = corpora.iter().map(|c| c.docs.len()).sum::<usize>() * toks.len();
    let pb = progress(total as u64);
    let mut rows = Vec::new();
    for (tname, tpath) in &toks {
        let ctx = Ctx::from_file(tpath, s.threads, s.params, s.fresh)?;
        notes.push(engine_note(tname, &ctx));
        let variants: Vec<Variant<'_>> = methods.iter().map(|&method| Variant { ctx: &ctx, method }).collect();
        for corpus in &corpora {
            pb.set_message(format!("{tname} / {}", corpus.name));
            // results[length][variant]
            let mut results = vec![vec![Vec::<DocResult>::new(); variants.len()]; lengths.len()];
            let mut tokens = vec![Vec::new(); lengths.len()];
            let mut bytes = vec![Vec::new(); lengths.len()];
            let mut warmed = false;
            for (d, doc) in corpus.docs.iter().enumerate() {
                // Token offsets of a prefix long enough for the longest length (16 bytes a token
                // is generous for every script here).
                let head = corpus::truncate(&doc.text, longest.saturating_mul(16).max(1));
                let enc = ctx.hf().encode(head, false).map_err(crate::methods::hf_err)?;
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
                    let reference =
                        if methods.contains(&Method::Hf) { None } else { Some(measure::reference(&ctx, text)?) };
                    let (res, n) = measure::measure_doc(&variants, text, reference.as_ref(), s.repeat, d)?;
                    for (k, r) in res.into_iter().enumerate() {
                        results[li][k].push(r);
                    }
                    tokens[li].push(n as f64);
                    bytes[li].push(text.len() as f64);
                }
                pb.inc(1);
            }
            for (li, &len) in lengths.iter().enumerate() {
                for (k, m) in methods.iter().enumerate() {
                    if results[li][k].is_empty() {
                        continue;
                    }
                    let mut row = s.row(*m, tname, &corpus.name);
                    fill(&mut row, &results[li][k], &bytes[li], &tokens[li]);
                    row.seq_len = Some(len);
                    rows.push(row);
                }
            }
        }
    }
    pb.finish_and_clear();
    speedups(&mut rows, |h, r| h.tokenizer == r.tokenizer && h.corpus == r.corpus && h.seq_len == r.seq_len);
    let mut md = s.header("Latency vs sequence length (paper Fig. seq_len)");
    md.push_str(&notes.concat());
    md.push_str("Documents cut at the offset of token N (documents shorter than N are left out of that row).\n\n");
    let mut plots = Vec::new();
    for (tname, _) in &toks {
        for corpus in &corpora {
            let series =
                method_lines(&rows, tname, &corpus.name, &methods, |r| r.seq_len.map(|l| (l as f64, r.mean_ms)));
            let fig = Figure {
                title: format!("Latency vs sequence length ({tname}, {}, {} threads)", corpus.name, s.threads),
                x_label: "sequence length (tokens, log scale)".into(),
                y_label: "latency per document (ms)".into(),
                x_log2: true,
                series,
                ..Figure::default()
            };
            plots.push(draw(&s, &format!("seq_len_{tname}_{}.png", corpus.name), &fig)?);
        }
    }
    md.push_str(&plot_links(&plots));
    md.push_str(&report::long_table(&rows));
    s.finish(&rows, &md)
}

/// One solid line per method through the rows of one tokenizer and corpus, `point` giving each
/// row's (x, y) when the row belongs on the plot.
fn method_lines(
    rows: &[Row],
    tokenizer: &str,
    corpus: &str,
    methods: &[Method],
    point: impl Fn(&Row) -> Option<(f64, f64)>,
) -> Vec<Series> {
    methods
        .iter()
        .map(|m| {
            let pts = rows
                .iter()
                .filter(|r| r.tokenizer == tokenizer && r.corpus == corpus && r.method == m.name())
                .filter_map(&point)
                .collect();
            Series::solid(m.label(), pts)
        })
        .collect()
}

fn draw(s: &Setup, file: &str, fig: &Figure) -> Result<String> {
    std::fs::create_dir_all(&s.out).with_context(|| format!("cannot create {}", s.out.display()))?;
    plot::draw(&s.out.join(file), fig)?;
    Ok(file.to_owned())
}

fn plot_links(files: &[String]) -> String {
    files.iter().map(|f| format!("![{f}]({f})\n\n")).collect()
}

// ---------------------------------------------------------------------------------------------
// chunk-size

fn chunk_size(a: ChunkSizeArgs) -> Result<()> {
    let c = a.common;
    let s = Setup::new(&c, "chunk-size", Some(8))?;
    let toks = tokenizers(&c, vec!["qwen3".to_owned()])?;
    let corpora = corpora(&c, &["en_verylong"], &s)?;
    let methods = methods(&c, &[Method::Hf, Method::Lopt]);
    let timed_hf = methods.contains(&Method::Hf);
    let lopt_methods = lopt_methods(&methods)?;
    let mut notes = Vec::new();
    let mut sizes = a.chunk_sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.contains(&0) {
        bail!("chunk sizes must be at least 1 byte");
    }
    let total: usize = corpora.iter().map(|c| c.docs.len()).sum::<usize>() * toks.len();
    let pb = progress(total as u64);
    let mut rows = Vec::new();
    for (tname, tpath) in &toks {
        pb.set_message(format!("{tname}: loading"));
        let bytes = read(tpath)?;
        let base = Ctx::new(&bytes, s.threads, None, s.params, s.fresh)?;
        let ctxs: Vec<Ctx> =
            sizes.iter().map(|&cs| Ctx::new(&bytes, s.threads, Some(cs), s.params, s.fresh)).collect::<Result<_>>()?;
        notes.push(engine_note(tname, &base));
        let mut variants: Vec<Variant<'_>> =
            ctxs.iter().flat_map(|ctx| lopt_methods.iter().map(move |&method| Variant { ctx, method })).collect();
        if timed_hf {
            variants.push(Variant { ctx: &base, method: Method::Hf });
        }
        for corpus in &corpora {
            pb.set_message(format!("{tname} / {}", corpus.name));
            warm_up(&variants, &corpus.docs[0].text)?;
            let mut results = vec![Vec::<DocResult>::new(); variants.len()];
            let mut chunks = vec![Vec::<f64>::new(); sizes.len()];
            let (mut doc_bytes, mut tokens) = (Vec::new(), Vec::new());
            for (d, doc) in corpus.docs.iter().enumerate() {
                let reference = if timed_hf { None } else { Some(measure::reference(&base, &doc.text)?) };
                let (res, n) = measure::measure_doc(&variants, &doc.text, reference.as_ref(), s.repeat, d)?;
                for (k, r) in res.into_iter().enumerate() {
                    results[k].push(r);
                }
                for (k, ctx) in ctxs.iter().enumerate() {
                    chunks[k].push((ctx.tokenizer.cut_points(&doc.text).len() + 1) as f64);
                }
                doc_bytes.push(doc.text.len() as f64);
                tokens.push(n as f64);
                pb.inc(1);
            }
            for (k, &cs) in sizes.iter().enumerate() {
                for (j, &m) in lopt_methods.iter().enumerate() {
                    let mut row = s.row(m, tname, &corpus.name);
                    fill(&mut row, &results[k * lopt_methods.len() + j], &doc_bytes, &tokens);
                    row.chunk_size = Some(cs);
                    row.chunks = Some(mean(&chunks[k]));
                    rows.push(row);
                }
            }
            if timed_hf {
                let mut row = s.row(Method::Hf, tname, &corpus.name);
                fill(&mut row, &results[sizes.len() * lopt_methods.len()], &doc_bytes, &tokens);
                rows.push(row);
            }
        }
    }
    pb.finish_and_clear();
    speedups(&mut rows, |h, r| h.tokenizer == r.tokenizer && h.corpus == r.corpus);
    let mut md = s.header("lopt latency vs chunk length (paper Fig. chunk_size)");
    md.push_str(&notes.concat());
    md.push_str(
        "`chunk_size` is lopt's target chunk length in bytes; `chunks` the mean number of segments per document.\n\n",
    );
    let mut plots = Vec::new();
    for (tname, _) in &toks {
        for corpus in &corpora {
            let mine: Vec<&Row> = rows.iter().filter(|r| &r.tokenizer == tname && r.corpus == corpus.name).collect();
            let lopt: Vec<&Row> =
                mine.iter().copied().filter(|r| r.chunk_size.is_some() && r.method == lopt_methods[0].name()).collect();
            let xs: Vec<f64> = lopt.iter().filter_map(|r| r.chunk_size.map(|c| c as f64)).collect();
            let mut series = method_lines(&rows, tname, &corpus.name, &lopt_methods, |r| {
                r.chunk_size.map(|c| (c as f64, r.mean_ms))
            });
            if let Some(h) = mine.iter().find(|r| r.method == Method::Hf.name()) {
                series.push(Series::dashed("HF sequential", xs.iter().map(|&x| (x, h.mean_ms)).collect()));
            }
            let fig = Figure {
                title: format!("lopt latency vs chunk length ({tname}, {}, {} threads)", corpus.name, s.threads),
                x_label: "chunk length (bytes, log scale)".into(),
                y_label: "latency per document (ms)".into(),
                x_log2: true,
                series,
                secondary_label: Some("chunks per document".into()),
                secondary: vec![Series::dashed(
                    "chunks per document (right axis)",
                    lopt.iter().map(|r| (r.chunk_size.unwrap_or(0) as f64, r.chunks.unwrap_or(0.0))).collect(),
                )],
            };
            plots.push(draw(&s, &format!("chunk_size_{tname}_{}.png", corpus.name), &fig)?);
        }
    }
    md.push_str(&plot_links(&plots));
    md.push_str(&report::long_table(&rows));
    s.finish(&rows, &md)
}

// ---------------------------------------------------------------------------------------------
// batch-size

fn batch_size(a: BatchSizeArgs) -> Result<()> {
    let c = a.common;
    let mut sizes = a.batch_sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.contains(&0) {
        bail!("batch sizes must be at least 1");
    }
    let largest = sizes.last().copied().unwrap_or(1);
    let s = Setup::new(&c, "batch-size", Some(largest))?;
    let toks = tokenizers(&c, vec!["qwen3".to_owned()])?;
    let corpora = corpora(&c, &["en_verylong"], &s)?;
    let methods = methods(&c, &[Method::Hf, Method::HfBatch, Method::Lopt]);
    let pb = progress((sizes.len() * corpora.len() * toks.len()) as u64);
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (tname, tpath) in &toks {
        let ctx = Ctx::from_file(tpath, s.threads, s.params, s.fresh)?;
        notes.push(engine_note(tname, &ctx));
        for corpus in &corpora {
            pb.set_message(format!("{tname} / {}", corpus.name));
            let distinct = corpus.docs.len().min(largest);
            let references: Vec<Output> =
                corpus.docs[..distinct].iter().map(|d| measure::reference(&ctx, &d.text)).collect::<Result<_>>()?;
            for m in &methods {
                ctx.encode_many(*m, &[corpus.docs[0].text.as_str()])?;
            }
            for (bi, &b) in sizes.iter().enumerate() {
                let texts: Vec<&str> = (0..b).map(|i| corpus.docs[i % distinct].text.as_str()).collect();
                let batch_bytes: Vec<f64> = texts.iter().map(|t| t.len() as f64).collect();
                let batch_tokens: Vec<f64> = (0..b).map(|i| references[i % distinct].ids.len() as f64).collect();
                let mut times = vec![Vec::new(); methods.len()];
                let mut exact = vec![0usize; methods.len()];
                for round in 0..s.repeat {
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
                for (k, m) in methods.iter().enumerate() {
                    let mut row = s.row(*m, tname, &corpus.name);
                    row.docs = b;
                    row.batch_size = Some(b);
                    row.mean_ms = median(&times[k]);
                    row.median_ms = row.mean_ms;
                    row.accuracy = exact[k] as f64 / b as f64;
                    row.mean_bytes = mean(&batch_bytes);
                    row.mean_tokens = mean(&batch_tokens);
                    rows.push(row);
                }
                pb.inc(1);
            }
        }
    }
    pb.finish_and_clear();
    speedups(&mut rows, |h, r| h.tokenizer == r.tokenizer && h.corpus == r.corpus && h.batch_size == r.batch_size);
    let mut md = s.header("Total time vs batch size (paper Fig. batch_size)");
    md.push_str(&notes.concat());
    md.push_str(
        "`mean_ms` is the time to encode the whole batch (median of the repeats). hf: one document after the other; \
         hf-batch: HF `encode_batch` on the pool (documents in parallel); lopt: `encode_batch` (the segments of all \
         documents share the pool). Batches reuse the corpus' documents cyclically when it has fewer.\n\n",
    );
    let mut plots = Vec::new();
    for (tname, _) in &toks {
        for corpus in &corpora {
            let series = method_lines(&rows, tname, &corpus.name, &methods, |r| {
                r.batch_size.map(|b| (b as f64, r.mean_ms / 1e3))
            });
            let fig = Figure {
                title: format!("Total time vs batch size ({tname}, {}, {} threads)", corpus.name, s.threads),
                x_label: "batch size (documents, log scale)".into(),
                y_label: "total time (s)".into(),
                x_log2: true,
                series,
                ..Figure::default()
            };
            plots.push(draw(&s, &format!("batch_size_{tname}_{}.png", corpus.name), &fig)?);
        }
    }
    md.push_str(&plot_links(&plots));
    md.push_str(&report::long_table(&rows));
    s.finish(&rows, &md)
}

// ---------------------------------------------------------------------------------------------
// threads

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

fn threads(a: ThreadsArgs) -> Result<()> {
    let c = a.common;
    let s = Setup::new(&c, "threads", Some(8))?;
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
    let toks = tokenizers(&c, vec!["qwen3".to_owned()])?;
    let corpora = corpora(&c, &["en_verylong"], &s)?;
    let methods = methods(&c, &[Method::Hf, Method::Lopt]);
    let timed_hf = methods.contains(&Method::Hf);
    let lopt_methods = lopt_methods(&methods)?;
    let mut notes = Vec::new();
    let total: usize = corpora.iter().map(|c| c.docs.len()).sum::<usize>() * toks.len();
    let pb = progress(total as u64);
    let mut rows = Vec::new();
    for (tname, tpath) in &toks {
        pb.set_message(format!("{tname}: loading"));
        let bytes = read(tpath)?;
        let ctxs: Vec<Ctx> =
            counts.iter().map(|&t| Ctx::new(&bytes, t, None, s.params, s.fresh)).collect::<Result<_>>()?;
        notes.push(engine_note(tname, &ctxs[0]));
        let mut variants: Vec<Variant<'_>> =
            ctxs.iter().flat_map(|ctx| lopt_methods.iter().map(move |&method| Variant { ctx, method })).collect();
        if timed_hf {
            variants.push(Variant { ctx: &ctxs[0], method: Method::Hf });
        }
        for corpus in &corpora {
            pb.set_message(format!("{tname} / {}", corpus.name));
            warm_up(&variants, &corpus.docs[0].text)?;
            let mut results = vec![Vec::<DocResult>::new(); variants.len()];
            let (mut doc_bytes, mut tokens) = (Vec::new(), Vec::new());
            for (d, doc) in corpus.docs.iter().enumerate() {
                let reference = if timed_hf { None } else { Some(measure::reference(&ctxs[0], &doc.text)?) };
                let (res, n) = measure::measure_doc(&variants, &doc.text, reference.as_ref(), s.repeat, d)?;
                for (k, r) in res.into_iter().enumerate() {
                    results[k].push(r);
                }
                doc_bytes.push(doc.text.len() as f64);
                tokens.push(n as f64);
                pb.inc(1);
            }
            for (k, &t) in counts.iter().enumerate() {
                for (j, &m) in lopt_methods.iter().enumerate() {
                    let mut row = s.row(m, tname, &corpus.name);
                    fill(&mut row, &results[k * lopt_methods.len() + j], &doc_bytes, &tokens);
                    row.threads = t;
                    rows.push(row);
                }
            }
            if timed_hf {
                let mut row = s.row(Method::Hf, tname, &corpus.name);
                fill(&mut row, &results[counts.len() * lopt_methods.len()], &doc_bytes, &tokens);
                row.threads = 1;
                rows.push(row);
            }
        }
    }
    pb.finish_and_clear();
    speedups(&mut rows, |h, r| h.tokenizer == r.tokenizer && h.corpus == r.corpus);
    let mut md = s.header("lopt latency vs thread count (paper Fig. process_num)");
    md.push_str(&notes.concat());
    md.push_str("The `threads` column is the size of lopt's pool; hf is single-threaded. Ideal scaling = lopt(1 thread) / t.\n\n");
    let mut plots = Vec::new();
    for (tname, _) in &toks {
        for corpus in &corpora {
            let line = |m: Method| -> Vec<(f64, f64)> {
                rows.iter()
                    .filter(|r| &r.tokenizer == tname && r.corpus == corpus.name && r.method == m.name())
                    .map(|r| (r.threads as f64, r.mean_ms))
                    .collect()
            };
            let mut series: Vec<Series> = lopt_methods.iter().map(|&m| Series::solid(m.label(), line(m))).collect();
            let lopt = line(lopt_methods[0]);
            if let Some(&(t1, ms1)) = lopt.first() {
                series.push(Series::dashed(
                    format!("ideal scaling: {} at {t1} thread(s) x {t1}/t", lopt_methods[0].name()),
                    lopt.iter().map(|&(t, _)| (t, ms1 * t1 / t)).collect(),
                ));
            }
            if let Some(h) =
                rows.iter().find(|r| &r.tokenizer == tname && r.corpus == corpus.name && r.method == Method::Hf.name())
            {
                series.push(Series::dashed("HF sequential", lopt.iter().map(|&(t, _)| (t, h.mean_ms)).collect()));
            }
            let fig = Figure {
                title: format!("lopt latency vs threads ({tname}, {})", corpus.name),
                x_label: "threads".into(),
                y_label: "latency per document (ms)".into(),
                x_log2: counts.len() > 8,
                series,
                ..Figure::default()
            };
            plots.push(draw(&s, &format!("threads_{tname}_{}.png", corpus.name), &fig)?);
        }
    }
    md.push_str(&plot_links(&plots));
    md.push_str(&report::long_table(&rows));
    s.finish(&rows, &md)
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
