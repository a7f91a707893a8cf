//! The one runner every experiment configures: it resolves tokenizers, corpora and methods (with
//! the experiment's defaults), loops over tokenizers and corpora with a progress bar, times
//! variants interleaved per document, turns per-document results into [`Row`]s, draws one figure
//! per tokenizer and corpus, and writes `results.json`, `results.csv` and `results.md`.
//!
//! Invariants: every variant of one corpus is warmed up once before timing; a result header
//! names the command, the machine and the load average at start and end; a figure's title names
//! its tokenizer and corpus, its subtitle the machine and the thread count.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::Common;
use crate::corpus::{self, Corpus};
use crate::machine;
use crate::measure::{self, mean, median, DocResult, Variant};
use crate::methods::{Ctx, Method, Params};
use crate::plot::{self, Figure, Series};
use crate::report::{self, Row};

/// What an experiment runs when the command line does not say.
pub struct Defaults {
    /// Documents per corpus.
    pub max_docs: Option<usize>,
    /// Tokenizer names (fixture names).
    pub tokenizers: Vec<String>,
    pub corpora: &'static [&'static str],
    pub methods: &'static [Method],
}

/// Settings every experiment derives from [`Common`].
pub struct Setup {
    pub name: &'static str,
    pub threads: usize,
    pub params: Params,
    pub fresh: bool,
    pub repeat: usize,
    pub out: PathBuf,
    pub max_docs: Option<usize>,
    pub max_bytes: Option<usize>,
    /// Cores and CPU model, for headers and figure subtitles.
    pub machine: String,
    /// The thread count as figure subtitles give it (an experiment that sweeps threads says so).
    pub threads_label: String,
    load_at_start: Option<String>,
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
            machine: machine::describe(),
            threads_label: format!("{threads} threads"),
            load_at_start: machine::load_average(),
        })
    }

    fn cache(&self) -> String {
        if self.fresh { "fresh" } else { "warm" }.to_owned()
    }

    /// A row of this experiment for `method` on one tokenizer and corpus, measurements unset.
    pub fn row(&self, method: Method, tokenizer: &str, corpus: &str) -> Row {
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

    /// The header of `results.md`: what ran, where and how.
    fn header(&self, title: &str) -> String {
        let args: Vec<String> = std::env::args().collect();
        let load = |l: &Option<String>| l.clone().unwrap_or_else(|| "unknown".to_owned());
        format!(
            "# {title}\n\nCommand: `{}`\n\nMachine: {}; load average (1, 5, 15 min) at start {}, at end {}.\n\n\
             threads {}, baseline chunks {}, repeat {} (median per document), BPE cache {}, \
             max bytes per document {}, overlap {} chars (overlap-* and lopt-paper).\n\n",
            args.join(" "),
            self.machine,
            load(&self.load_at_start),
            load(&machine::load_average()),
            self.threads,
            self.params.pieces.unwrap_or(self.threads),
            self.repeat,
            self.cache(),
            self.max_bytes.map_or_else(|| "unlimited".to_owned(), |b| b.to_string()),
            self.params.overlap_chars,
        )
    }
}

/// One tokenizer on one corpus, as an experiment's per-corpus step sees it.
pub struct Job<'a> {
    pub s: &'a Setup,
    pub tokenizer: &'a str,
    /// The contexts the experiment built for this tokenizer, in its order.
    pub ctxs: &'a [Ctx],
    pub corpus: &'a Corpus,
    pb: &'a ProgressBar,
}

impl Job<'_> {
    /// A row for `method` on this tokenizer and corpus.
    pub fn row(&self, method: Method) -> Row {
        self.s.row(method, self.tokenizer, &self.corpus.name)
    }

    /// One unit of progress (a document, or a batch size in `batch-size`).
    pub fn tick(&self) {
        self.pb.inc(1);
    }
}

/// Per-document results of variants timed on whole documents (see [`measure_corpus`]).
pub struct Measured {
    /// `results[k]`: variant `k` on each document.
    pub results: Vec<Vec<DocResult>>,
    pub bytes: Vec<f64>,
    pub tokens: Vec<f64>,
}

impl Measured {
    /// A row of `job` for variant `k`'s method, aggregated over documents.
    pub fn row(&self, job: &Job<'_>, method: Method, k: usize) -> Row {
        let mut row = job.row(method);
        fill(&mut row, &self.results[k], &self.bytes, &self.tokens);
        row
    }
}

/// The experiment state: inputs, the rows so far and the progress bar.
pub struct Runner {
    pub s: Setup,
    pub toks: Vec<(String, PathBuf)>,
    pub corpora: Vec<Corpus>,
    pub methods: Vec<Method>,
    pub rows: Vec<Row>,
    notes: Vec<String>,
}

impl Runner {
    /// Resolves the inputs of experiment `name`.
    ///
    /// # Errors
    /// Invalid flags, or a tokenizer or corpus that cannot be found or read.
    pub fn new(c: &Common, name: &'static str, d: Defaults) -> Result<Runner> {
        let s = Setup::new(c, name, d.max_docs)?;
        let names = if c.tokenizers.is_empty() { d.tokenizers } else { c.tokenizers.clone() };
        if names.is_empty() {
            bail!("no tokenizer: pass --tokenizers (no fixture tokenizer found)");
        }
        let toks = names.iter().map(|n| corpus::resolve_tokenizer(n)).collect::<Result<_>>()?;
        let corpus_names: Vec<String> =
            if c.corpus.is_empty() { d.corpora.iter().map(|s| (*s).to_owned()).collect() } else { c.corpus.clone() };
        let corpora = corpus_names
            .iter()
            .map(|n| {
                let (label, path) = corpus::resolve_corpus(n)?;
                corpus::load(&label, &path, s.max_docs, s.max_bytes)
            })
            .collect::<Result<_>>()?;
        let mut methods = if c.methods.is_empty() { d.methods.to_vec() } else { c.methods.clone() };
        let mut seen = Vec::new();
        methods.retain(|x| {
            let new = !seen.contains(x);
            seen.push(*x);
            new
        });
        Ok(Runner { s, toks, corpora, methods, rows: Vec::new(), notes: Vec::new() })
    }

    /// The lopt methods among the chosen ones (the lopt sweeps need at least one).
    ///
    /// # Errors
    /// When there is none.
    pub fn lopt_methods(&self) -> Result<Vec<Method>> {
        let v: Vec<Method> =
            self.methods.iter().copied().filter(|m| matches!(m, Method::Lopt | Method::LoptHf)).collect();
        if v.is_empty() {
            bail!("this experiment sweeps lopt: --methods needs lopt or lopt-hf");
        }
        Ok(v)
    }

    /// For every tokenizer: builds its contexts with `contexts` (from the `tokenizer.json` bytes;
    /// the first context's engine goes into the notes), then runs `per_corpus` on every corpus
    /// and keeps the rows it returns. `units` is the progress a corpus makes (its [`Job::tick`]s).
    ///
    /// # Errors
    /// Whatever `contexts` or `per_corpus` return, or an unreadable tokenizer file.
    pub fn each(
        &mut self,
        units: impl Fn(&Corpus) -> usize,
        contexts: impl Fn(&Setup, &[u8]) -> Result<Vec<Ctx>>,
        mut per_corpus: impl FnMut(&Job<'_>) -> Result<Vec<Row>>,
    ) -> Result<()> {
        let total: usize = self.corpora.iter().map(&units).sum::<usize>() * self.toks.len();
        let pb = progress(total as u64);
        for (tname, tpath) in &self.toks {
            pb.set_message(format!("{tname}: loading"));
            let bytes = read(tpath)?;
            let ctxs = contexts(&self.s, &bytes)?;
            let Some(first) = ctxs.first() else { bail!("internal: no context built for {tname}") };
            self.notes.push(engine_note(tname, first));
            for corpus in &self.corpora {
                pb.set_message(format!("{tname} / {}", corpus.name));
                let job = Job { s: &self.s, tokenizer: tname, ctxs: &ctxs, corpus, pb: &pb };
                self.rows.extend(per_corpus(&job)?);
                say(&pb, format!("{tname} / {}: {} docs done", corpus.name, corpus.docs.len()));
            }
        }
        pb.finish_and_clear();
        Ok(())
    }

    /// Sets `speedup_vs_hf` on every row from the `hf` row that `same` pairs it with.
    pub fn speedups(&mut self, same: impl Fn(&Row, &Row) -> bool) {
        let hf: Vec<Row> = self.rows.iter().filter(|r| r.method == Method::Hf.name()).cloned().collect();
        for r in self.rows.iter_mut() {
            if let Some(h) = hf.iter().find(|h| same(h, r)) {
                if r.mean_ms > 0.0 {
                    r.speedup_vs_hf = Some(h.mean_ms / r.mean_ms);
                }
            }
        }
    }

    /// Draws one figure per tokenizer and corpus into `<stem>_<tokenizer>_<corpus>.png`: `figure`
    /// gets the tokenizer, the corpus and their rows and returns the figure, its title saying what
    /// it shows; the tokenizer and corpus are appended to the title and the machine and thread
    /// count become its subtitle. Returns Markdown image links.
    ///
    /// # Errors
    /// When a figure cannot be drawn or written.
    pub fn plot_each(&self, stem: &str, figure: impl Fn(&str, &str, &[&Row]) -> Figure) -> Result<String> {
        std::fs::create_dir_all(&self.s.out).with_context(|| format!("cannot create {}", self.s.out.display()))?;
        let mut links = String::new();
        for (tname, _) in &self.toks {
            for corpus in &self.corpora {
                let mine: Vec<&Row> =
                    self.rows.iter().filter(|r| &r.tokenizer == tname && r.corpus == corpus.name).collect();
                let mut fig = figure(tname, &corpus.name, &mine);
                fig.title = format!("{} ({tname}, {})", fig.title, corpus.name);
                let runs = match self.s.repeat {
                    1 => "1 timed run each".to_owned(),
                    n => format!("median of {n} timed runs each"),
                };
                fig.subtitle = format!("{}; {}; {runs}", self.s.machine, self.s.threads_label);
                let file = format!("{stem}_{tname}_{}.png", corpus.name);
                plot::draw(&self.s.out.join(&file), &fig)?;
                links.push_str(&format!("![{file}]({file})\n\n"));
            }
        }
        Ok(links)
    }

    /// Writes the results: `results.md` is the header, the engine notes, `body` and the long
    /// table of every row.
    ///
    /// # Errors
    /// When a file cannot be written.
    pub fn finish(&self, title: &str, body: &str) -> Result<()> {
        let mut md = self.s.header(title);
        md.push_str(&self.notes.concat());
        md.push_str(body);
        md.push_str(&report::long_table(&self.rows));
        report::write(&self.s.out, &self.rows, &md)?;
        eprintln!("{}: {} rows written to {}", self.s.name, self.rows.len(), self.s.out.display());
        Ok(())
    }
}

/// Times `variants` on every whole document of the job's corpus, after one warm-up on the first
/// document. Accuracy is checked against the `hf` variant, or when there is none, against HF's
/// sequential `encode` in `reference_ctx` (untimed).
///
/// # Errors
/// When a method fails on a document.
pub fn measure_corpus(job: &Job<'_>, variants: &[Variant<'_>], reference_ctx: &Ctx) -> Result<Measured> {
    let timed_hf = variants.iter().any(|v| v.method == Method::Hf);
    if let Some(doc) = job.corpus.docs.first() {
        warm_up(variants, &doc.text)?;
    }
    let mut m = Measured { results: vec![Vec::new(); variants.len()], bytes: Vec::new(), tokens: Vec::new() };
    for (d, doc) in job.corpus.docs.iter().enumerate() {
        let reference = if timed_hf { None } else { Some(measure::reference(reference_ctx, &doc.text)?) };
        let (res, n_tokens) = measure::measure_doc(variants, &doc.text, reference.as_ref(), job.s.repeat, d)?;
        for (k, r) in res.into_iter().enumerate() {
            m.results[k].push(r);
        }
        m.bytes.push(doc.text.len() as f64);
        m.tokens.push(n_tokens as f64);
        job.tick();
    }
    Ok(m)
}

/// A sweep over contexts (one per x value: a chunk length, a thread count): every method of
/// `swept` in every one of `sweep`, plus HF sequential in `base` when `timed_hf`, all interleaved
/// per document. `label` sets the swept fields of a swept row from its context's index; the HF
/// row keeps `hf_threads`.
///
/// # Errors
/// When a method fails on a document.
pub fn context_sweep(
    job: &Job<'_>,
    sweep: &[Ctx],
    base: &Ctx,
    swept: &[Method],
    timed_hf: bool,
    hf_threads: usize,
    label: impl Fn(&mut Row, usize),
) -> Result<Vec<Row>> {
    let mut variants: Vec<Variant<'_>> =
        sweep.iter().flat_map(|ctx| swept.iter().map(move |&method| Variant { ctx, method })).collect();
    if timed_hf {
        variants.push(Variant { ctx: base, method: Method::Hf });
    }
    let m = measure_corpus(job, &variants, base)?;
    let mut rows = Vec::new();
    for k in 0..sweep.len() {
        for (j, &method) in swept.iter().enumerate() {
            let mut row = m.row(job, method, k * swept.len() + j);
            label(&mut row, k);
            rows.push(row);
        }
    }
    if timed_hf {
        let mut row = m.row(job, Method::Hf, variants.len() - 1);
        row.threads = hf_threads;
        rows.push(row);
    }
    Ok(rows)
}

/// One solid line per method through `rows`, `point` giving each row's (x, y) when the row
/// belongs on the plot.
pub fn method_lines(rows: &[&Row], methods: &[Method], point: impl Fn(&Row) -> Option<(f64, f64)>) -> Vec<Series> {
    methods
        .iter()
        .map(|m| {
            Series::solid(m.label(), rows.iter().filter(|r| r.method == m.name()).filter_map(|r| point(r)).collect())
        })
        .collect()
}

/// A dashed horizontal line at the `hf` row's value `y`, across `xs` (HF does not take part in
/// the sweep), when there is an `hf` row.
pub fn hf_line(rows: &[&Row], xs: &[f64], y: impl Fn(&Row) -> f64) -> Option<Series> {
    let h = rows.iter().find(|r| r.method == Method::Hf.name())?;
    Some(Series::dashed("HF sequential", xs.iter().map(|&x| (x, y(h))).collect()))
}

/// Aggregates per-document results into a row.
pub fn fill(row: &mut Row, results: &[DocResult], bytes: &[f64], tokens: &[f64]) {
    let ms: Vec<f64> = results.iter().map(|r| r.ms).collect();
    row.docs = results.len();
    row.mean_ms = mean(&ms);
    row.median_ms = median(&ms);
    row.accuracy =
        if results.is_empty() { 0.0 } else { results.iter().filter(|r| r.exact).count() as f64 / results.len() as f64 };
    row.mean_bytes = mean(bytes);
    row.mean_tokens = mean(tokens);
}

/// Runs every variant once on `text`, untimed (builds lazy contexts, fills allocator pools).
///
/// # Errors
/// When a method fails on the text.
pub fn warm_up(variants: &[Variant<'_>], text: &str) -> Result<()> {
    for v in variants {
        v.ctx.encode(v.method, text)?;
    }
    Ok(())
}

/// The cores this process may use.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
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
