//! The methods under comparison and the context they run in ([`Ctx`]): one lopt tokenizer (whose
//! `hf()` is the reference and the backend of every baseline) and one explicit rayon pool of
//! `threads` for the baselines.
//!
//! Every method returns an [`Output`]; accuracy compares outputs with the `hf` method's.

use std::sync::OnceLock;

use anyhow::{anyhow, Context, Result};
use lopt::hf;

use crate::baselines::{delim, overlap, paper};
use crate::output::{hf_err, Output};

/// A tokenization method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Method {
    /// HF sequential `encode` (the reference).
    Hf,
    /// HF `encode_batch` on the pool (the paper's "MP HF", threads instead of processes).
    HfBatch,
    /// Delimiter-based, whitespace (U+0020).
    DelimSpace,
    /// Delimiter-based, comma.
    DelimComma,
    /// Delimiter-based, period.
    DelimPeriod,
    /// OpenLMLab ParallelTokenizer as published (40960-char chunks, id matching over whole shards).
    OverlapOrigin,
    /// ParallelTokenizer with the id match restricted to the overlap (the paper's "-Ours").
    OverlapImproved,
    /// The paper's LoPT rule as published (position matching, doubling on failure).
    LoptPaper,
    /// This workspace's library (`lopt::Tokenizer::encode`, default engine choice).
    Lopt,
    /// The library forced onto the HF engine: lopt's cut rule on the same backend as the baselines.
    LoptHf,
}

impl Method {
    /// Table 1's methods, in the paper's order.
    pub const TABLE: [Method; 9] = [
        Method::Hf,
        Method::DelimComma,
        Method::DelimPeriod,
        Method::DelimSpace,
        Method::OverlapOrigin,
        Method::OverlapImproved,
        Method::LoptPaper,
        Method::LoptHf,
        Method::Lopt,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Hf => "hf",
            Method::HfBatch => "hf-batch",
            Method::DelimSpace => "delim-space",
            Method::DelimComma => "delim-comma",
            Method::DelimPeriod => "delim-period",
            Method::OverlapOrigin => "overlap-origin",
            Method::OverlapImproved => "overlap-improved",
            Method::LoptPaper => "lopt-paper",
            Method::Lopt => "lopt",
            Method::LoptHf => "lopt-hf",
        }
    }

    /// The paper's name for the method (Table 1).
    pub fn label(self) -> &'static str {
        match self {
            Method::Hf => "HF TokenizerFast (sequential)",
            Method::HfBatch => "HF encode_batch (MP HF)",
            Method::DelimSpace => "Delimiter (whitespace)",
            Method::DelimComma => "Delimiter (,)",
            Method::DelimPeriod => "Delimiter (.)",
            Method::OverlapOrigin => "ParallelTokenizer-Origin",
            Method::OverlapImproved => "ParallelTokenizer-Ours",
            Method::LoptPaper => "LoPT (paper rule)",
            Method::Lopt => "lopt (this library)",
            Method::LoptHf => "lopt, HF engine",
        }
    }
}

/// Parameters of the overlap-based baselines.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Overlap in chars (overlap-* and lopt-paper).
    pub overlap_chars: usize,
    /// ParallelTokenizer's fixed chunk length in chars (overlap-origin).
    pub origin_chunk_chars: usize,
    /// Minimum run of position-matched tokens (lopt-paper; the paper uses 2).
    pub min_run: usize,
    /// Chunks aimed at by delim-*, overlap-improved and lopt-paper (default: the thread count).
    pub pieces: Option<usize>,
}

impl Default for Params {
    fn default() -> Self {
        Params { overlap_chars: 512, origin_chunk_chars: 40960, min_run: 2, pieces: None }
    }
}

/// A tokenizer and a pool: everything a method needs.
pub struct Ctx {
    pub tokenizer: lopt::Tokenizer,
    /// The reference (lopt builds its own HF tokenizer only on demand).
    hf: hf::Tokenizer,
    /// The same settings on the HF engine, built on first use (`lopt-hf`).
    lopt_hf: OnceLock<Result<lopt::Tokenizer, String>>,
    bytes: Vec<u8>,
    chunk_size: Option<usize>,
    pub pool: rayon::ThreadPool,
    pub threads: usize,
    pub params: Params,
    fresh: bool,
}

impl Ctx {
    /// Loads `tokenizer.json` (bytes already read) for `threads` threads; `chunk_size` is lopt's
    /// (bytes, default text length / threads). `fresh`: clear the BPE cache before each call.
    ///
    /// # Errors
    /// When the tokenizer is invalid or a pool cannot start.
    pub fn new(bytes: &[u8], threads: usize, chunk_size: Option<usize>, params: Params, fresh: bool) -> Result<Ctx> {
        let mut builder = lopt::TokenizerBuilder::new().threads(threads);
        if let Some(c) = chunk_size {
            builder = builder.chunk_size(c);
        }
        let tokenizer = builder.build_from_bytes(bytes).map_err(|e| anyhow!("cannot build lopt tokenizer: {e}"))?;
        let hf = hf::Tokenizer::from_bytes(bytes).map_err(|e| anyhow!("cannot build the HF tokenizer: {e}"))?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("eval-{i}"))
            .build()
            .context("cannot start the baseline pool")?;
        Ok(Ctx {
            tokenizer,
            hf,
            lopt_hf: OnceLock::new(),
            bytes: bytes.to_vec(),
            chunk_size,
            pool,
            threads,
            params,
            fresh,
        })
    }

    /// lopt with the HF engine and otherwise the same settings (built on first use, which the
    /// warm-up does, so it is never timed).
    ///
    /// # Errors
    /// When the tokenizer cannot be built.
    pub fn lopt_hf(&self) -> Result<&lopt::Tokenizer> {
        self.lopt_hf
            .get_or_init(|| {
                let mut b = lopt::TokenizerBuilder::new().threads(self.threads).engine(lopt::EngineKind::Hf);
                if let Some(c) = self.chunk_size {
                    b = b.chunk_size(c);
                }
                b.build_from_bytes(&self.bytes).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| anyhow!("cannot build lopt on the HF engine: {e}"))
    }

    pub fn hf(&self) -> &hf::Tokenizer {
        &self.hf
    }

    /// Clears the HF BPE word caches (of the reference and baselines, and of lopt's HF engines)
    /// when measuring fresh documents; the clear itself is never timed. lopt's native engines
    /// keep no cache across calls.
    pub fn prepare(&self) {
        if self.fresh {
            let lopt_hf = self.lopt_hf.get().and_then(|t| t.as_ref().ok()).and_then(|t| t.hf().ok());
            for t in std::iter::once(self.hf()).chain(lopt_hf) {
                if let hf::models::ModelWrapper::BPE(bpe) = t.get_model() {
                    bpe.clear_cache();
                }
            }
        }
    }

    /// Encodes one text with `method` (special tokens added, as HF `encode(text, true)`).
    ///
    /// # Errors
    /// When the tokenizer fails on the text.
    pub fn encode(&self, method: Method, text: &str) -> Result<Output> {
        let hf = self.hf();
        let p = self.params;
        let pieces = p.pieces.unwrap_or(self.threads).max(1);
        Ok(match method {
            Method::Hf => Output::from_hf(&hf.encode(text, true).map_err(hf_err)?),
            Method::HfBatch => {
                let mut v = self.pool.install(|| hf.encode_batch(vec![text], true)).map_err(hf_err)?;
                let e = v.pop().ok_or_else(|| anyhow!("encode_batch returned nothing"))?;
                Output::from_hf(&e)
            }
            Method::DelimSpace => Output::from_hf(&delim::encode(hf, &self.pool, text, pieces, b' ')?),
            Method::DelimComma => Output::from_hf(&delim::encode(hf, &self.pool, text, pieces, b',')?),
            Method::DelimPeriod => Output::from_hf(&delim::encode(hf, &self.pool, text, pieces, b'.')?),
            Method::OverlapOrigin => {
                overlap::encode_origin(hf, &self.pool, text, p.origin_chunk_chars, p.overlap_chars)?
            }
            Method::OverlapImproved => {
                Output::from_hf(&overlap::encode_improved(hf, &self.pool, text, pieces, p.overlap_chars)?)
            }
            Method::LoptPaper => {
                Output::from_hf(&paper::encode(hf, &self.pool, text, pieces, None, p.overlap_chars, p.min_run)?)
            }
            Method::Lopt => Output::from_lopt(&self.tokenizer.encode(text, true).map_err(|e| anyhow!("lopt: {e}"))?),
            Method::LoptHf => {
                Output::from_lopt(&self.lopt_hf()?.encode(text, true).map_err(|e| anyhow!("lopt-hf: {e}"))?)
            }
        })
    }

    /// Encodes a batch of texts: `hf` one after the other, `hf-batch` with HF `encode_batch` on
    /// the pool, `lopt` with `encode_batch` (segments of all texts share its pool), the others one
    /// text after the other (each parallel inside).
    ///
    /// # Errors
    /// When the tokenizer fails on a text.
    pub fn encode_many(&self, method: Method, texts: &[&str]) -> Result<Vec<Output>> {
        match method {
            Method::HfBatch => {
                let v = self.pool.install(|| self.hf().encode_batch(texts.to_vec(), true)).map_err(hf_err)?;
                Ok(v.iter().map(Output::from_hf).collect())
            }
            Method::Lopt => {
                let v = self.tokenizer.encode_batch(texts, true).map_err(|e| anyhow!("lopt: {e}"))?;
                Ok(v.iter().map(Output::from_lopt).collect())
            }
            Method::LoptHf => {
                let v = self.lopt_hf()?.encode_batch(texts, true).map_err(|e| anyhow!("lopt-hf: {e}"))?;
                Ok(v.iter().map(Output::from_lopt).collect())
            }
            _ => texts.iter().map(|t| self.encode(method, t)).collect(),
        }
    }
}
