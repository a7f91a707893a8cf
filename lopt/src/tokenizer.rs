//! The public [`Tokenizer`] and its [`TokenizerBuilder`]: loading a `tokenizer.json`, choosing
//! the engine and the cut rule, and running split → parallel encode → merge → post-process on an
//! explicit thread pool that the tokenizer owns (rayon's global pool and process-wide switches
//! are never touched), whose threads may stay awake for a bounded time after a parallel call
//! ([`TokenizerBuilder::linger`], `crate::linger`).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use crate::boundary::CutRule;
use crate::doc::Doc;
use crate::encoding::{Encoding, Vocab};
use crate::engine::bpe::bits::Kernel;
use crate::engine::bpe::BpeEngine;
use crate::engine::guard::Guarded;
use crate::engine::hf::HfEngine;
use crate::engine::spm::SpmEngine;
use crate::engine::wordpiece::WordPieceEngine;
use crate::engine::{Engine, EngineKind, Segment};
use crate::error::{catch_panic, one_line, Error, ErrorKind, Result};
use crate::linger::Linger;
use crate::merge::{Gather, Layout, Run};
use crate::options::{EncodeOptions, SeedCache, Settings};
use crate::parts;
use crate::post::{pad, pad_ids, Finisher};
use crate::prefix::{CachedRun, PrefixCache, PrefixCacheStats};
use crate::spelling::canonicalize;
use crate::split::{nearest_safe_cut, plan};
use crate::trace;

/// Texts shorter than this many bytes are encoded in one piece by default with a native engine:
/// below it, handing chunks to threads costs more than it saves (crossover measured between 8 and
/// 16 KiB, `docs/benchmarks.md`). The HF engine is ~40 times slower per byte, so its crossover
/// is much lower: [`DEFAULT_MIN_PARALLEL_BYTES_HF`].
pub const DEFAULT_MIN_PARALLEL_BYTES: usize = 16 * 1024;

/// The parallel threshold with the HF engine (parallel already pays at 2 KiB).
pub const DEFAULT_MIN_PARALLEL_BYTES_HF: usize = 2 * 1024;

/// Default search window around each chunk boundary, in bytes.
pub const DEFAULT_OVERLAP: usize = 4096;

/// How many final bytes of a text an ids-only call encodes with every column when it caches
/// the text: the next text of a conversation or a RAG trace departs from it within them, and
/// the prefix cache cuts inside a run only where it has the offsets and word ids.
const FULL_TAIL: usize = 32 * 1024;

/// The longest padding lopt accepts, in tokens: no model has a context near it, and a longer one
/// (say, `Fixed(10^12)` from an untrusted file) would abort the process when it is allocated.
pub const MAX_PADDING_LENGTH: usize = 1 << 24;

/// How long the pool's threads stay awake after a parallel call by default
/// ([`TokenizerBuilder::linger`]).
pub const DEFAULT_LINGER: std::time::Duration = std::time::Duration::ZERO;

/// Whether a tokenizer's texts are cut and encoded in parallel.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Parallelism {
    /// Every component has an argued cut rule: long texts are encoded in parallel.
    Parallel,
    /// Some component has no argued cut rule: texts are encoded whole (exact, one thread each).
    Sequential {
        /// Which component, and why.
        reason: String,
    },
}

/// Configures and builds a [`Tokenizer`].
#[derive(Clone, Debug)]
pub struct TokenizerBuilder {
    threads: Option<usize>,
    chunk_size: Option<usize>,
    overlap: usize,
    min_parallel_bytes: Option<usize>,
    engine: EngineKind,
    prefix_cache: usize,
    seed_cache: SeedCache,
    linger: std::time::Duration,
    scalar_kernels: bool,
}

impl Default for TokenizerBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl TokenizerBuilder {
    /// Defaults: one thread per core, chunk length = text length / threads, a 4 KiB search
    /// window, texts under 16 KiB (2 KiB with the HF engine) encoded whole, automatic engine
    /// choice.
    pub fn new() -> Self {
        TokenizerBuilder {
            threads: None,
            chunk_size: None,
            overlap: DEFAULT_OVERLAP,
            min_parallel_bytes: None,
            engine: EngineKind::Auto,
            prefix_cache: 0,
            seed_cache: SeedCache::Background,
            linger: DEFAULT_LINGER,
            scalar_kernels: false,
        }
    }

    /// Number of threads of the tokenizer's own pool (default: available cores).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// Target chunk length in bytes (default: text length / threads). Any value gives the same
    /// output; it only changes how work is shared.
    pub fn chunk_size(mut self, bytes: usize) -> Self {
        self.chunk_size = Some(bytes);
        self
    }

    /// Width in bytes of the window around each chunk boundary in which a safe cut is looked for
    /// (the paper's overlap). When a window holds none, the chunk grows into its neighbour.
    pub fn overlap(mut self, bytes: usize) -> Self {
        self.overlap = bytes;
        self
    }

    /// Texts shorter than this are encoded in one piece (default: 16 KiB with a native engine,
    /// 2 KiB with the HF engine, where parallel work pays off sooner).
    pub fn min_parallel_bytes(mut self, bytes: usize) -> Self {
        self.min_parallel_bytes = Some(bytes);
        self
    }

    /// Which engine tokenizes the segments.
    pub fn engine(mut self, engine: EngineKind) -> Self {
        self.engine = engine;
        self
    }

    /// Keeps the raw tokens of recently encoded long texts, up to `bytes` of memory (texts and
    /// token columns counted), so that a text sharing a long prefix with one of them (the next
    /// turn of a conversation, a new question after the same context) encodes only what follows
    /// the last safe cut before they differ. The output is the same either way
    /// (`docs/correctness.md`, "Prefix reuse"). `0` (the default) turns it off. Only texts that
    /// would be encoded in parallel use it (not those under
    /// [`min_parallel_bytes`](Self::min_parallel_bytes), nor tokenizers encoded sequentially);
    /// least recently used texts are dropped first. A forked child starts with an empty cache.
    pub fn prefix_cache(mut self, bytes: usize) -> Self {
        self.prefix_cache = bytes;
        self
    }

    /// When the byte-level BPE engine builds its seeded pre-token cache (default
    /// [`SeedCache::Background`]); the tokens are the same in every mode.
    pub fn seed_cache(mut self, mode: SeedCache) -> Self {
        self.seed_cache = mode;
        self
    }

    /// How long the pool's threads stay awake after a call that encoded a text in parallel
    /// (default [`DEFAULT_LINGER`]), so that the next call's segments start at once: a thread
    /// that slept may take a millisecond to wake on a virtual machine. Until the next parallel
    /// call or the deadline, every pool thread but one spins, yielding its core to any other
    /// runnable thread every few microseconds; a call encoded on the calling thread (a short
    /// text, one thread) leaves nothing. `Duration::ZERO` turns it off. The tokens are the same
    /// either way.
    pub fn linger(mut self, time: std::time::Duration) -> Self {
        self.linger = time;
        self
    }

    /// Runs the native engines' scanners on their scalar twins, one byte at a time, instead of
    /// the bulk kernels that classify many bytes at once (default `false`). Slower, and the
    /// tokens are the same: the differential tests encode with both, so that every bulk kernel
    /// is checked against HF beside its twin in one build.
    pub fn scalar_kernels(mut self, scalar: bool) -> Self {
        self.scalar_kernels = scalar;
        self
    }

    /// Loads `tokenizer.json` from a file.
    ///
    /// # Errors
    /// [`ErrorKind::Io`] when the file cannot be read, [`ErrorKind::InvalidTokenizer`] when it is
    /// not a valid `tokenizer.json`, [`ErrorKind::InvalidConfig`] for zero threads or a zero chunk
    /// size, [`ErrorKind::ThreadPool`] when the pool cannot start.
    pub fn build_from_file(self, path: impl AsRef<Path>) -> Result<Tokenizer> {
        let path = path.as_ref();
        let bytes = std::fs::read(path)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot read tokenizer {}: {e}", path.display())))?;
        self.build_from_bytes(&bytes)
    }

    /// Loads `tokenizer.json` from its bytes.
    ///
    /// # Errors
    /// As [`build_from_file`](Self::build_from_file), without the I/O case.
    pub fn build_from_bytes(self, bytes: &[u8]) -> Result<Tokenizer> {
        let threads = match self.threads {
            Some(0) => return Err(Error::new(ErrorKind::InvalidConfig, "threads must be at least 1")),
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        if self.chunk_size == Some(0) {
            return Err(Error::new(ErrorKind::InvalidConfig, "chunk size must be at least 1 byte"));
        }
        // The vocabulary and the merges straight into tables that borrow from `bytes`, the rest
        // as a `Value` (`doc.rs`).
        let mut doc = Doc::parse(bytes)?;
        let parts = parts::read(&doc.json)?;
        // HF (engine, oracle, post-processing) reads the file as written; the cut rule and the
        // native engines read one canonical spelling of it, the same for both.
        let equivalences = canonicalize(&mut doc.json);
        let (rule, parallelism) = match CutRule::new(&doc) {
            Ok(rule) => (Some(rule), Parallelism::Parallel),
            Err(reason) => (None, Parallelism::Sequential { reason }),
        };
        // The pool first: a native engine builds its seeded cache on it.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("lopt-{i}"))
            .build()
            .map_err(|e| Error::new(ErrorKind::ThreadPool, format!("cannot start {threads} threads: {e}")))?;
        let pool = Arc::new(pool);
        // The id -> string table beside the native engine, on the pool: neither reads what the
        // other builds (the rewrites of `canonicalize` leave the vocabulary and the added tokens
        // alone), and the table alone was a twentieth of a 128K vocabulary's load.
        let (kind, seeding, doc_ref) = (self.engine, self.seed_cache, &doc);
        let kernel = Kernel::of(self.scalar_kernels);
        let (strings, native) = pool.install(|| {
            rayon::join(
                || parts::vocab_strings(doc_ref),
                || (kind != EngineKind::Hf).then(|| native_engine(doc_ref, seeding, kernel, &pool)),
            )
        });
        // HF's tokenizer is built now only when something at load needs it (its engine, or a
        // vocabulary lopt does not read itself); otherwise on first use (`Tokenizer::hf`).
        let hf_now = |hf: &OnceLock<HfResult>| -> Result<Arc<tokenizers::Tokenizer>> {
            hf.get_or_init(|| build_hf(bytes)).clone().map_err(|m| Error::new(ErrorKind::InvalidTokenizer, m))
        };
        let hf: OnceLock<HfResult> = OnceLock::new();
        if strings.is_none() {
            hf_now(&hf)?;
        }
        let (engine, engine_reason): (Box<dyn Engine>, Option<String>) = match native {
            None => (Box::new(HfEngine::new(hf_now(&hf)?)), None),
            Some(Ok(engine)) => (engine, None),
            Some(Err(reason)) if kind == EngineKind::Auto => (Box::new(HfEngine::new(hf_now(&hf)?)), Some(reason)),
            Some(Err(reason)) => {
                return Err(Error::new(ErrorKind::InvalidConfig, format!("no native engine: {reason}")));
            }
        };
        let (rule, parallelism) = match rule {
            Some(rule) if rule.needs_continuation() && !engine.encodes_continuations() => {
                let reason = format!(
                    "the normalizer's Prepend acts at every segment start and the {} engine cannot leave it out",
                    engine.name()
                );
                (None, Parallelism::Sequential { reason })
            }
            rule => (rule, parallelism),
        };
        let engine: Box<dyn Engine> = Box::new(Guarded(engine));
        let engine_is_hf = engine.name() == "hf";
        let (strings, vocab_size) = match strings {
            Some(vocabulary) => (vocabulary.strings, vocabulary.size),
            None => {
                let hf = hf_now(&hf)?;
                (vocab_of(&hf), hf.get_vocab_size(true))
            }
        };
        let finisher = Finisher::new(parts.post_processor, strings, &doc.json);
        let defaults = EncodeOptions::new().truncation(parts.truncation).padding(parts.padding);
        check_options(&finisher, &defaults)?;
        // Freeing what is left of the parsed file (a Unigram vocabulary is still a `Value`:
        // many small allocations) is left to a thread of its own: nothing waits for it. Without
        // a thread it is freed here. The borrowed tables are one allocation each.
        let Doc { json, vocab, merges } = doc;
        drop((vocab, merges));
        if json["model"].get("vocab").is_some() {
            let _ = std::thread::Builder::new().name("lopt-free-json".into()).spawn(move || drop(json));
        }
        let source = if hf.get().is_some() { Vec::new() } else { bytes.to_vec() };
        Ok(Tokenizer {
            finisher,
            defaults,
            hf,
            source,
            vocab_size,
            engine,
            engine_reason,
            equivalences,
            rule,
            parallelism,
            pool,
            threads,
            chunk_size: self.chunk_size,
            overlap: self.overlap,
            min_parallel_bytes: self.min_parallel_bytes.unwrap_or(if engine_is_hf {
                DEFAULT_MIN_PARALLEL_BYTES_HF
            } else {
                DEFAULT_MIN_PARALLEL_BYTES
            }),
            prefix: (self.prefix_cache > 0).then(|| PrefixCache::new(self.prefix_cache)),
            linger: Linger::new(self.linger),
        })
    }
}

/// A tokenizer that encodes long texts in parallel, exactly as HF `tokenizers` would.
pub struct Tokenizer {
    /// HF's tokenizer of the same file, built on first use unless loading needed it.
    hf: OnceLock<HfResult>,
    /// The `tokenizer.json` bytes, kept to build [`hf`](Self::hf) on first use (empty once it
    /// was built at load).
    source: Vec<u8>,
    /// HF's `get_vocab_size(true)`.
    vocab_size: usize,
    engine: Box<dyn Engine>,
    /// Why no native engine was chosen (automatic choice only).
    engine_reason: Option<String>,
    /// The equivalent spellings read as canonical ones, one line each (see [`crate::spelling`]).
    equivalences: Vec<String>,
    rule: Option<CutRule>,
    parallelism: Parallelism,
    finisher: Finisher,
    /// The truncation and padding of the `tokenizer.json`, used by [`Tokenizer::encode`].
    defaults: EncodeOptions,
    /// Shared with a background thread that builds the engine's seeded cache on it.
    pool: Arc<rayon::ThreadPool>,
    threads: usize,
    chunk_size: Option<usize>,
    overlap: usize,
    min_parallel_bytes: usize,
    /// Raw tokens of recent long texts, when switched on.
    prefix: Option<PrefixCache>,
    /// Keeps the pool's threads awake for a while after a parallel call.
    linger: Arc<Linger>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("engine", &self.engine.name())
            .field("parallelism", &self.parallelism)
            .field("threads", &self.threads)
            .field("chunk_size", &self.chunk_size)
            .field("overlap", &self.overlap)
            .field("prefix_cache", &self.prefix.is_some())
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Loads `tokenizer.json` with the default settings ([`TokenizerBuilder::new`]).
    ///
    /// # Errors
    /// See [`TokenizerBuilder::build_from_file`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Tokenizer> {
        TokenizerBuilder::new().build_from_file(path)
    }

    /// Encodes one text; identical to `tokenizers::Tokenizer::encode(text, add_special_tokens)`
    /// (with the truncation and padding of the `tokenizer.json`).
    ///
    /// # Errors
    /// [`ErrorKind::Encode`] when the underlying model fails on the text.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Encoding> {
        self.encode_settings(text, self.default_settings(add_special_tokens))
    }

    /// Encodes one text with per-call settings; identical to HF's `encode` on a tokenizer whose
    /// truncation and padding were set to `options`'. Nothing in `self` changes, so threads may
    /// pass different options at once.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidConfig`] for options HF refuses ([`check_options`](Self::check_options)),
    /// [`ErrorKind::Encode`] when the model or the post-processing fails on the text.
    pub fn encode_with(&self, text: &str, options: &EncodeOptions) -> Result<Encoding> {
        self.check_options(options)?;
        self.encode_settings(text, options.settings())
    }

    /// Encodes many texts; the segments of all texts share the pool. Each result is identical to
    /// `tokenizers::Tokenizer::encode_batch` (with the `tokenizer.json`'s truncation and padding).
    ///
    /// # Errors
    /// As [`encode`](Self::encode); the first failure is returned.
    pub fn encode_batch<S: AsRef<str> + Sync>(&self, texts: &[S], add_special_tokens: bool) -> Result<Vec<Encoding>> {
        self.encode_batch_settings(texts, self.default_settings(add_special_tokens))
    }

    /// [`encode_batch`](Self::encode_batch) with per-call settings, as [`encode_with`](Self::encode_with).
    ///
    /// # Errors
    /// As [`encode_with`](Self::encode_with); the first failure is returned.
    pub fn encode_batch_with<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        options: &EncodeOptions,
    ) -> Result<Vec<Encoding>> {
        self.check_options(options)?;
        self.encode_batch_settings(texts, options.settings())
    }

    /// The token ids of [`encode_with`](Self::encode_with), computing nothing else: no offsets,
    /// word ids, masks or token strings (for servers and data pipelines that only feed a model).
    /// Special tokens, truncation and padding apply exactly as in HF, so the result equals
    /// `tokenizers::Tokenizer::encode(text, ..).get_ids()` with `options`' settings. Calls that
    /// truncate, or tokenizers whose post-processor only HF's path handles, compute the full
    /// encoding and keep its ids (truncation needs the word ids).
    ///
    /// # Errors
    /// As [`encode_with`](Self::encode_with).
    pub fn encode_ids(&self, text: &str, options: &EncodeOptions) -> Result<Vec<u32>> {
        self.check_options(options)?;
        self.encode_ids_settings(text, options.settings())
    }

    /// Whether [`encode_ids`](Self::encode_ids) computes only the ids under `options`; when it
    /// does not (a call that truncates, a post-processor that only HF's path handles) it computes
    /// the full encoding and keeps its ids. For callers that choose between the two modes, such
    /// as an encoding that computes its other columns on first use.
    pub fn encodes_ids_only(&self, options: &EncodeOptions) -> bool {
        self.finisher.finishes_ids(options.settings())
    }

    /// The type ids and the special-tokens mask of an encoding of `tokens` tokens under `options`,
    /// when they depend on that count alone: without truncation or padding, under a
    /// post-processor that lopt applies itself, they are its template's values around the text's
    /// (so an ids-only result can answer them). `None` otherwise.
    pub fn template_columns(&self, options: &EncodeOptions, tokens: usize) -> Option<(Vec<u32>, Vec<u32>)> {
        let (layout, _) = self.finisher.assembly(options.settings())?;
        let (mut type_ids, mut special, _) = crate::merge::template_columns(&layout, tokens);
        Some((type_ids.take_vec(), special.take_vec()))
    }

    /// The token ids of [`encode`](Self::encode) (the `tokenizer.json`'s truncation and padding),
    /// as [`encode_ids`](Self::encode_ids) computes them: for callers that pass only
    /// `add_special_tokens` per call, with no options to build or clone.
    ///
    /// # Errors
    /// As [`encode`](Self::encode).
    pub fn encode_ids_default(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        self.encode_ids_settings(text, self.default_settings(add_special_tokens))
    }

    /// The token ids of [`encode_batch`](Self::encode_batch), as
    /// [`encode_batch_ids`](Self::encode_batch_ids) computes them (see
    /// [`encode_ids_default`](Self::encode_ids_default)).
    ///
    /// # Errors
    /// As [`encode`](Self::encode); the first failure is returned.
    pub fn encode_batch_ids_default<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        add_special_tokens: bool,
    ) -> Result<Vec<Vec<u32>>> {
        self.encode_batch_ids_settings(texts, self.default_settings(add_special_tokens))
    }

    /// The token ids of [`encode_batch_with`](Self::encode_batch_with), as
    /// [`encode_ids`](Self::encode_ids) computes them (padding to the batch's longest included).
    ///
    /// # Errors
    /// As [`encode_with`](Self::encode_with); the first failure is returned.
    pub fn encode_batch_ids<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        options: &EncodeOptions,
    ) -> Result<Vec<Vec<u32>>> {
        self.check_options(options)?;
        self.encode_batch_ids_settings(texts, options.settings())
    }

    /// [`encode_batch_ids`](Self::encode_batch_ids) after the options are checked.
    fn encode_batch_ids_settings<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        settings: Settings<'_>,
    ) -> Result<Vec<Vec<u32>>> {
        if !self.finisher.finishes_ids(settings) {
            return Ok(self.encode_batch_settings(texts, settings)?.into_iter().map(Encoding::into_ids).collect());
        }
        let mut all = self.encode_batch_any(
            texts,
            |t, r| self.engine.encode_ids(&t[r.clone()], r.start > 0),
            |_, segments| Ok(self.finisher.finish_ids(segments, settings, false)),
            |text| self.encode_ids_settings(text, settings),
        )?;
        if let Some(padding) = settings.padding {
            pad_ids(&mut all, padding);
        }
        Ok(all)
    }

    /// The settings of the `tokenizer.json` (its truncation and padding, special tokens added):
    /// what [`encode`](Self::encode) uses, and a starting point for [`encode_with`](Self::encode_with).
    pub fn options(&self) -> &EncodeOptions {
        &self.defaults
    }

    /// Checks options the way HF checks them when they are set: a truncation stride must leave
    /// room for new tokens, and padding must stay below [`MAX_PADDING_LENGTH`].
    ///
    /// # Errors
    /// [`ErrorKind::InvalidConfig`] saying which setting is refused and why.
    pub fn check_options(&self, options: &EncodeOptions) -> Result<()> {
        check_options(&self.finisher, options)
    }

    fn default_settings(&self, add_special_tokens: bool) -> Settings<'_> {
        Settings { add_special_tokens, ..self.defaults.settings() }
    }

    fn encode_settings(&self, text: &str, settings: Settings<'_>) -> Result<Encoding> {
        if self.uses_prefix_cache(text) {
            let finish = |runs: &[Run<'_>]| {
                let tokens: usize = runs.iter().map(|r| r.len).sum();
                // Large runs are written in pieces so that every thread gets a share of the copy;
                // the columns are allocated here, on the calling thread (see `assemble_parts`).
                let piece = tokens.div_ceil(self.threads * 4).max(16 * 1024);
                self.finisher.finish_runs(runs, settings, piece, Some(&self.pool))
            };
            if let Some(encoding) = self.encode_cached(text, true, finish)? {
                return Ok(encoding);
            }
        }
        self.encode_uncached(text, settings)
    }

    /// [`encode_ids`](Self::encode_ids) after the options are checked.
    fn encode_ids_settings(&self, text: &str, settings: Settings<'_>) -> Result<Vec<u32>> {
        if !self.finisher.finishes_ids(settings) {
            return Ok(self.encode_settings(text, settings)?.into_ids());
        }
        if self.uses_prefix_cache(text) {
            if let Some(ids) =
                self.encode_cached(text, false, |runs| Ok(self.finisher.finish_ids_runs(runs, settings)))?
            {
                return Ok(ids);
            }
        }
        // The template's opening tokens are written into the first segment's lent columns up
        // front (see `encode_plain`).
        let head = self.finisher.head(settings);
        self.encode_plain(
            text,
            false,
            head,
            |t, r| self.engine.encode_ids(&t[r.clone()], r.start > 0),
            |_, segments, headed| Ok(self.finisher.finish_ids(segments, settings, headed)),
        )
    }

    /// Encodes the segment `text[range]`: a continuation when it follows a cut, and, when cuts
    /// fall inside pre-tokens, with its last pre-token left uncounted when the next segment
    /// continues it.
    fn encode_range(&self, text: &str, range: &std::ops::Range<usize>) -> Result<Segment> {
        let mut encoded = self.encode_piece(&text[range.clone()], range.start > 0)?;
        if range.end < text.len() && self.rule.as_ref().is_some_and(CutRule::cuts_inside_words) {
            encoded.words = encoded.words.saturating_sub(1);
        }
        Ok(encoded)
    }

    /// Encodes a segment that starts the text, or, with `continuation`, one that follows a cut
    /// (without the normalizer's prefix at its start); its word count is the segment's own.
    fn encode_piece(&self, segment: &str, continuation: bool) -> Result<Segment> {
        if continuation {
            self.engine.encode_continuation(segment)
        } else {
            self.engine.encode_segment(segment)
        }
    }

    /// Whether `text` goes through the prefix cache: a cache is on, the tokenizer has a cut
    /// rule, and the text is long enough to be encoded in parallel.
    fn uses_prefix_cache(&self, text: &str) -> bool {
        self.prefix.is_some() && self.rule.is_some() && text.len() >= self.min_parallel_bytes.max(2)
    }

    /// Encodes `text` reusing the longest cached prefix, then caches its raw tokens. Only the
    /// part after the reused cut is planned and encoded (in parallel when it is long); `finish`
    /// turns the whole text's tokens into the result (the full encoding or its ids), post-processing
    /// the whole as without a cache. `None` when the cache cannot serve the text.
    ///
    /// The cache keeps every column only for the runs covering the new part's last
    /// [`FULL_TAIL`] bytes, so that the next text (a new turn, another question) can reuse a
    /// prefix ending inside them; of the runs before, it keeps the ids. Without `full` (ids-only
    /// calls) those runs are encoded for their ids only, as without a cache; a full call encodes
    /// every column for its result and then drops all but the ids. A full call that reuses
    /// ids-only runs encodes their columns first (and caches them).
    fn encode_cached<T>(
        &self,
        text: &str,
        full: bool,
        finish: impl FnOnce(&[Run<'_>]) -> Result<T>,
    ) -> Result<Option<T>> {
        let (Some(store), Some(rule)) = (self.prefix.as_ref().and_then(PrefixCache::store), &self.rule) else {
            return Ok(None);
        };
        let reuse = store.lookup(text, rule);
        // Set when this call hands work to the pool, before it does; dropped when it returns.
        let mut awake = None;
        let complete = |runs: &[CachedRun]| !full || runs.iter().all(CachedRun::has_columns);
        let whole = reuse.as_ref().is_some_and(|r| r.is_whole(text) && complete(r.entry.runs()));
        // The runs that this call encodes start at `fresh`; `kept[i]` says whether the cache keeps
        // the columns of run `fresh + i` (the runs covering the text's last bytes).
        let (mut fresh, mut kept) = (0, Vec::new());
        let mut runs: Vec<CachedRun> = match &reuse {
            Some(reuse) if whole => reuse.entry.runs().to_vec(),
            _ => {
                let cut = reuse.as_ref().map_or(0, |r| r.cut);
                let rest = &text[cut..];
                let mut runs = reuse.as_ref().map_or_else(Vec::new, |r| r.runs.clone());
                fresh = runs.len();
                if !rest.is_empty() {
                    let starts = starts(self.cut_points(rest));
                    let mut jobs: Vec<Vec<(std::ops::Range<usize>, bool)>> =
                        ranges(&starts, rest.len()).into_iter().map(|r| vec![(r, false)]).collect();
                    self.keep_columns_at_end(rest, rule, &mut jobs);
                    kept = jobs.iter().flatten().map(|(_, keep)| *keep).collect();
                    let encode = |(range, keep): &(std::ops::Range<usize>, bool)| -> Result<CachedRun> {
                        let (piece, start) = (&rest[range.clone()], cut + range.start);
                        Ok(if full || *keep {
                            CachedRun::whole(Arc::new(self.encode_piece(piece, start > 0)?), start)
                        } else {
                            CachedRun::ids_only(self.engine.encode_ids(piece, start > 0)?, start)
                        })
                    };
                    let encoded: Vec<Vec<CachedRun>> = if jobs.len() == 1 {
                        vec![jobs[0].iter().map(encode).collect::<Result<_>>()?]
                    } else {
                        awake.get_or_insert_with(|| self.linger.call(&self.pool));
                        self.pool.install(|| {
                            jobs.par_iter()
                                .map(|job| job.iter().map(encode).collect::<Result<Vec<_>>>())
                                .collect::<Result<Vec<_>>>()
                        })?
                    };
                    runs.extend(encoded.into_iter().flatten());
                }
                if !complete(&runs) {
                    awake.get_or_insert_with(|| self.linger.call(&self.pool));
                    self.fill_columns(text, &mut runs)?;
                }
                runs
            }
        };
        let borrowed = joined(&runs, rule);
        let finished = finish(&borrowed)?;
        drop(borrowed);
        if !whole {
            // Before the text's last bytes a full call keeps only the ids, as an ids-only call
            // encodes them: the next text departs within the last bytes, so those runs are
            // reused whole if at all (a later full call encodes their columns again,
            // `fill_columns`), and their offsets and word ids (20 of 24 bytes a token) are freed
            // now for the next call to reuse instead of being held.
            for (run, keep) in runs.iter_mut().skip(fresh).zip(kept) {
                if !keep {
                    run.drop_columns();
                }
            }
            store.insert(text, runs, reuse);
        }
        Ok(Some(finished))
    }

    /// Marks the jobs of an encode that cover the last [`FULL_TAIL`] bytes of `rest` to keep
    /// every column in the cache, splitting the job that holds that point at a safe cut of
    /// `rest` near it (the plan may end with a tiny segment, so this is not always the last job);
    /// a job too short to split, or with no cut near the point, keeps every column whole.
    fn keep_columns_at_end(&self, rest: &str, rule: &CutRule, jobs: &mut [Vec<(std::ops::Range<usize>, bool)>]) {
        let from = rest.len().saturating_sub(FULL_TAIL);
        for job in jobs.iter_mut() {
            let Some((range, _)) = job.pop() else { continue };
            if range.end <= from {
                job.push((range, false));
                continue;
            }
            let split = (range.start + FULL_TAIL < from)
                .then(|| nearest_safe_cut(rest, rule, from, range.start + 1, self.overlap / 2))
                .flatten()
                .filter(|&at| at < range.end);
            match split {
                Some(at) => job.extend([(range.start..at, false), (at..range.end, true)]),
                None => job.push((range, true)),
            }
        }
    }

    /// Encodes the columns of the ids-only runs among `runs` (whole segments: each spans from
    /// its start to the next run's, bytes `text` shares with the cached text they came from).
    fn fill_columns(&self, text: &str, runs: &mut [CachedRun]) -> Result<()> {
        let ends: Vec<usize> = runs.iter().skip(1).map(|r| r.start).chain(std::iter::once(text.len())).collect();
        let missing: Vec<usize> = (0..runs.len()).filter(|&i| !runs[i].has_columns()).collect();
        let encode = |&i: &usize| self.encode_piece(&text[runs[i].start..ends[i]], runs[i].start > 0);
        let segments: Vec<Segment> = if missing.len() == 1 {
            missing.iter().map(encode).collect::<Result<_>>()?
        } else {
            self.pool.install(|| missing.par_iter().map(encode).collect::<Result<Vec<_>>>())?
        };
        for (i, segment) in missing.into_iter().zip(segments) {
            runs[i] = CachedRun::whole(Arc::new(segment), runs[i].start);
        }
        Ok(())
    }

    /// [`encode_settings`](Self::encode_settings) without the prefix cache.
    fn encode_uncached(&self, text: &str, settings: Settings<'_>) -> Result<Encoding> {
        if self.lends_columns() && trace::schedule() == trace::Schedule::Tree {
            if let Some((layout, vocab)) = self.finisher.assembly(settings) {
                return self.encode_gathered(text, settings, &layout, vocab);
            }
        }
        self.encode_plain(
            text,
            true,
            &[],
            |t, r| self.encode_range(t, r),
            |starts, segments, _| self.finisher.finish(starts, segments, settings, Some(&*self.pool)),
        )
    }

    /// [`encode_uncached`](Self::encode_uncached) on the own path (`layout`) with an engine that
    /// writes into lent columns: the segments are assembled in the same trip to the pool as they
    /// are encoded ([`Gather`]): the first segment written into columns allocated here with room
    /// for the whole text's tokens (as in [`encode_plain`](Self::encode_plain)), each later one
    /// copied after it by the thread that encoded it once the segments before it are encoded, and
    /// the encoding finished on the pool thread that joins them, so that the caller is woken once.
    fn encode_gathered(
        &self,
        text: &str,
        settings: Settings<'_>,
        layout: &Layout<'_>,
        vocab: &Arc<Vocab>,
    ) -> Result<Encoding> {
        let _call = trace::span("call", text.len());
        // The template's opening tokens are written into the first segment's lent columns up
        // front, so that they need not be put in front of its rows afterwards (a shift of every
        // row).
        let head = layout.prefix;
        let Some(planned) = self.planned(text, true, head) else {
            // A short text is encoded and finished on the calling thread (see `encode_plain`).
            let (segment, _) = self.encode_whole(text, head, true, || self.encode_range(text, &(0..text.len())));
            let segment = segment?;
            if !head.is_empty() {
                // Checks the head is there (else assembles the segment as one of ordinary columns).
                return Ok(crate::merge::assemble_headed(segment, layout, vocab));
            }
            return self.finisher.finish(&[0], vec![segment], settings, Some(&*self.pool));
        };
        // Copy jobs small enough that idle threads share a long segment's copy, large enough
        // that each costs far more than handing it out (about 4 bytes a token).
        let piece = (text.len() / 4).div_ceil(self.threads.max(1) * 4).max(16 * 1024);
        let gather = Gather::new(&planned.starts, layout, piece);
        let awake = self.linger.call(&self.pool);
        let pooled = trace::span("encode", 0);
        self.pool.install(|| {
            planned.ranges.par_iter().enumerate().try_for_each(|(k, r)| -> Result<()> {
                gather.start(k);
                let segment = planned.encode(r, || self.encode_range(text, r))?;
                gather.arrive(k, segment);
                Ok(())
            })?;
            drop(pooled);
            let _finish = trace::span("finish", 0);
            let finished = gather.finish(vocab);
            // On this pool thread: the rest of the call is the caller's return.
            awake.leave();
            finished
        })
    }

    /// Cuts `text`, encodes its segments with `encode` (in parallel on the pool when there are
    /// several) and joins them with `finish` (given each segment's start): the one shape of an
    /// uncached encode, for full encodings and for ids (`full` false: the engine writes ids
    /// only).
    ///
    /// With several segments the first is written into columns allocated here, on the calling
    /// thread, with room for the whole text's tokens (one per byte, which holds unless a
    /// normalizer expands characters, and the template's), so that they become the result's and
    /// only the later segments are copied after them (`merge::assemble`, which checks the room
    /// and copies everything otherwise). Allocated here, they come from the caller's allocator
    /// arena, which keeps its pages between calls as one thread's output does; pages of the room
    /// that no token reaches are never touched.
    ///
    /// `head` (the template's opening tokens, or nothing) is written in front of the first
    /// segment's rows in the lent columns; `finish` is told whether the first segment holds it
    /// (an engine that writes through `Out` took the columns: `engine::out::lending`), and
    /// checks that it does before relying on it.
    fn encode_plain<P: Send, T: Send>(
        &self,
        text: &str,
        full: bool,
        head: &[(u32, u32)],
        encode: impl Fn(&str, &std::ops::Range<usize>) -> Result<P> + Sync,
        finish: impl FnOnce(&[usize], Vec<P>, bool) -> Result<T> + Send,
    ) -> Result<T> {
        let _call = trace::span("call", text.len());
        let Some(planned) = self.planned(text, full, head) else {
            // A short text is encoded and finished on the calling thread: waking a pool thread
            // and waiting for it costs more than encoding a few kilobytes.
            let (segment, headed) = self.encode_whole(text, head, full, || encode(text, &(0..text.len())));
            return finish(&[0], vec![segment?], headed);
        };
        let Planned { starts, ranges, .. } = &planned;
        let awake = self.linger.call(&self.pool);
        let pooled = trace::span("encode", 0);
        let encode = |r: &std::ops::Range<usize>| planned.encode(r, || encode(text, r));
        let tree = || {
            self.pool.install(|| {
                let segments = ranges.par_iter().map(&encode).collect::<Result<Vec<_>>>();
                // Ids are finished on the calling thread alone; a full encoding's finish uses
                // the pool (`assemble_parts`), so there the guard's drop leaves the jobs.
                if !full {
                    awake.leave();
                }
                segments
            })
        };
        // The other schedules are a trace build's experiment; other builds carry only the tree.
        #[cfg(feature = "trace")]
        let segments = match trace::schedule() {
            trace::Schedule::Tree => tree()?,
            schedule => self.encode_fanned(ranges, schedule, encode)?,
        };
        #[cfg(not(feature = "trace"))]
        let segments = tree()?;
        drop(pooled);
        // Finished on the calling thread, so that the output is allocated there (`finish` runs
        // its own parallel part on the pool: `assemble_parts`).
        let _finish = trace::span("finish", 0);
        let headed = !head.is_empty() && planned.taken.load(std::sync::atomic::Ordering::SeqCst);
        finish(starts, segments, headed)
    }

    /// Runs `encode`, the engine's call for the whole `text` on this thread, with columns headed
    /// by `head` lent to it when there is a head and the engine writes through `Out`, sized as
    /// the engines reserve for a segment (half its bytes, so they are not grown); says whether
    /// the engine took them.
    fn encode_whole<P>(&self, text: &str, head: &[(u32, u32)], full: bool, encode: impl FnOnce() -> P) -> (P, bool) {
        if head.is_empty() || !self.lends_columns() {
            return (encode(), false);
        }
        let columns = crate::engine::out::Columns::headed(head, text.len() / 2 + 8, full);
        crate::engine::out::lending(columns, encode)
    }

    /// The plan of an uncached encode of `text` (the prologue of [`encode_plain`](Self::encode_plain)
    /// and [`encode_gathered`](Self::encode_gathered)): its segments, and, when the engine writes
    /// through `engine::out::Out`, columns for the first one allocated here, on the calling
    /// thread, with room for the whole text's tokens (every column, or ids only without `full`);
    /// `None` for a text too short to cut, encoded whole.
    fn planned(&self, text: &str, full: bool, head: &[(u32, u32)]) -> Option<Planned> {
        let planning = trace::span("plan", 0);
        let cuts = self.cut_points(text);
        drop(planning);
        if cuts.is_empty() {
            return None;
        }
        let starts = starts(cuts);
        let ranges = ranges(&starts, text.len());
        let lent = self.lends_columns().then(|| {
            let rows = text.len().saturating_add(ROOM_FOR_SPECIALS);
            std::sync::Mutex::new(Some(crate::engine::out::Columns::headed(head, rows, full)))
        });
        Some(Planned { starts, ranges, lent, taken: std::sync::atomic::AtomicBool::new(false) })
    }

    /// The segments `ranges` encoded with `encode` under a trace build's other schedules
    /// ([`trace::Schedule`]): every pool thread woken at once (the caller waiting, or taking
    /// segments too), or one spawn per segment with the caller taking the first.
    #[cfg(feature = "trace")]
    fn encode_fanned<P: Send>(
        &self,
        ranges: &[std::ops::Range<usize>],
        schedule: trace::Schedule,
        encode: impl Fn(&std::ops::Range<usize>) -> Result<P> + Sync,
    ) -> Result<Vec<P>> {
        let slots: Vec<std::sync::Mutex<Option<Result<P>>>> =
            ranges.iter().map(|_| std::sync::Mutex::new(None)).collect();
        let put = |i: usize| {
            let encoded = encode(&ranges[i]);
            if let Ok(mut slot) = slots[i].lock() {
                *slot = Some(encoded);
            }
        };
        let next = std::sync::atomic::AtomicUsize::new(0);
        let claim = || loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i >= ranges.len() {
                break;
            }
            put(i);
        };
        if schedule == trace::Schedule::Broadcast {
            self.pool.broadcast(|_| claim());
        } else if schedule == trace::Schedule::Share {
            self.pool.in_place_scope(|scope| {
                scope.spawn_broadcast(|_, _| claim());
                claim();
            });
        } else {
            self.pool.in_place_scope(|scope| {
                for i in 1..ranges.len() {
                    let put = &put;
                    scope.spawn(move |_| put(i));
                }
                put(0);
            });
        }
        slots
            .into_iter()
            .map(|slot| {
                slot.into_inner()
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| Err(Error::new(ErrorKind::Encode, "a segment was not encoded")))
            })
            .collect()
    }

    /// Whether the engine writes its segments through `engine::out::Out`, so that columns lent
    /// to it are used (the byte-level BPE and WordPiece engines).
    fn lends_columns(&self) -> bool {
        matches!(self.engine.name(), "bpe" | "wordpiece")
    }

    /// Counters of the prefix cache in this process (`None` when it is off).
    pub fn prefix_cache_stats(&self) -> Option<PrefixCacheStats> {
        self.prefix.as_ref().map(PrefixCache::stats)
    }

    fn encode_batch_settings<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        settings: Settings<'_>,
    ) -> Result<Vec<Encoding>> {
        let mut encodings = self.encode_batch_any(
            texts,
            |t, r| self.encode_range(t, r),
            |starts, segments| self.finisher.finish(starts, segments, settings, None),
            |text| self.encode_settings(text, settings),
        )?;
        if let Some(padding) = settings.padding {
            // HF pads each encoding alone, then the batch together (`BatchLongest`).
            pad(&mut encodings, padding);
        }
        Ok(encodings)
    }

    /// A batch before the batch-wide padding, for full encodings and for ids alike: without a
    /// prefix cache (or when no text uses it) segments encoded with `encode` and each text joined
    /// with `finish` ([`encode_batch_plain`](Self::encode_batch_plain)); with one, the texts that
    /// use it go through `cached` ([`encode_batch_cached`](Self::encode_batch_cached)).
    fn encode_batch_any<S, P, T>(
        &self,
        texts: &[S],
        encode: impl Fn(&str, &std::ops::Range<usize>) -> Result<P> + Sync,
        finish: impl Fn(&[usize], Vec<P>) -> Result<T> + Sync,
        cached: impl Fn(&str) -> Result<T>,
    ) -> Result<Vec<T>>
    where
        S: AsRef<str> + Sync,
        P: Send,
        T: Send,
    {
        if self.prefix.is_some() && texts.iter().any(|t| self.uses_prefix_cache(t.as_ref())) {
            self.encode_batch_cached(texts, |plain| self.encode_batch_plain(plain, encode, finish), cached)
        } else {
            self.encode_batch_plain(texts, encode, finish)
        }
    }

    /// A batch with a prefix cache: the texts that use it one after the other in order with
    /// `cached` (each in parallel; a later text may reuse an earlier one), the others together
    /// with `plain`, as without a cache.
    fn encode_batch_cached<S: AsRef<str> + Sync, T>(
        &self,
        texts: &[S],
        plain: impl FnOnce(&[&str]) -> Result<Vec<T>>,
        cached: impl Fn(&str) -> Result<T>,
    ) -> Result<Vec<T>> {
        let (cached_texts, plain_texts): (Vec<usize>, Vec<usize>) =
            (0..texts.len()).partition(|&i| self.uses_prefix_cache(texts[i].as_ref()));
        let plain_strs: Vec<&str> = plain_texts.iter().map(|&i| texts[i].as_ref()).collect();
        let mut results: Vec<Option<T>> = std::iter::repeat_with(|| None).take(texts.len()).collect();
        for (i, result) in plain_texts.into_iter().zip(plain(&plain_strs)?) {
            results[i] = Some(result);
        }
        for i in cached_texts {
            results[i] = Some(cached(texts[i].as_ref())?);
        }
        all_encoded(results)
    }

    /// A batch without the prefix cache, before the batch-wide padding: segments encoded with
    /// `encode` and each text joined with `finish`, as in [`encode_plain`](Self::encode_plain).
    fn encode_batch_plain<S, P, T>(
        &self,
        texts: &[S],
        encode: impl Fn(&str, &std::ops::Range<usize>) -> Result<P> + Sync,
        finish: impl Fn(&[usize], Vec<P>) -> Result<T> + Sync,
    ) -> Result<Vec<T>>
    where
        S: AsRef<str> + Sync,
        P: Send,
        T: Send,
    {
        let plans: Vec<Vec<usize>> = texts.iter().map(|t| self.cut_points(t.as_ref())).collect();
        let total: usize = texts.iter().map(|t| t.as_ref().len()).sum();
        if plans.iter().all(Vec::is_empty) && (total < self.min_parallel_bytes || texts.len() < 2) {
            // Short work: on the calling thread, like `encode` of a short text.
            texts
                .iter()
                .map(|t| {
                    let text = t.as_ref();
                    finish(&[0], vec![encode(text, &(0..text.len()))?])
                })
                .collect()
        } else {
            let _awake = self.linger.call(&self.pool);
            self.pool.install(|| self.encode_batch_on_pool(texts, plans, &encode, &finish))
        }
    }

    /// One task list for the whole batch: a short text is one task that encodes and finishes it
    /// on the worker that took it (rayon hands each worker a run of them); a long text gives one
    /// task per segment, and is finished once all its segments are done.
    fn encode_batch_on_pool<S, P, T>(
        &self,
        texts: &[S],
        plans: Vec<Vec<usize>>,
        encode: &(impl Fn(&str, &std::ops::Range<usize>) -> Result<P> + Sync),
        finish: &(impl Fn(&[usize], Vec<P>) -> Result<T> + Sync),
    ) -> Result<Vec<T>>
    where
        S: AsRef<str> + Sync,
        P: Send,
        T: Send,
    {
        enum Done<P, T> {
            Whole(T),
            Part(P),
        }
        let mut long = Vec::new();
        let mut tasks: Vec<(usize, std::ops::Range<usize>, bool)> = Vec::with_capacity(texts.len());
        for (doc, cuts) in plans.into_iter().enumerate() {
            let len = texts[doc].as_ref().len();
            if cuts.is_empty() {
                tasks.push((doc, 0..len, true));
            } else {
                let starts = starts(cuts);
                tasks.extend(ranges(&starts, len).into_iter().map(|r| (doc, r, false)));
                long.push((doc, starts));
            }
        }
        let mut done = tasks
            .into_par_iter()
            .map(|(doc, range, whole)| {
                let segment = encode(texts[doc].as_ref(), &range)?;
                if whole {
                    finish(&[0], vec![segment]).map(Done::Whole)
                } else {
                    Ok(Done::Part(segment))
                }
            })
            .collect::<Result<Vec<Done<P, T>>>>()?
            .into_iter();
        let mut results: Vec<Option<T>> = Vec::with_capacity(texts.len());
        let mut pending = Vec::with_capacity(long.len());
        let mut long = long.into_iter().peekable();
        for doc in 0..texts.len() {
            match long.next_if(|(d, _)| *d == doc) {
                Some((_, starts)) => {
                    let segments: Vec<P> = (&mut done)
                        .take(starts.len())
                        .filter_map(|d| match d {
                            Done::Part(segment) => Some(segment),
                            Done::Whole(_) => None,
                        })
                        .collect();
                    pending.push((doc, starts, segments));
                    results.push(None);
                }
                None => results.push(match done.next() {
                    Some(Done::Whole(result)) => Some(result),
                    _ => None,
                }),
            }
        }
        let finished = pending
            .into_par_iter()
            .map(|(doc, starts, segments)| finish(&starts, segments).map(|e| (doc, e)))
            .collect::<Result<Vec<_>>>()?;
        for (doc, result) in finished {
            results[doc] = Some(result);
        }
        all_encoded(results)
    }

    /// The reference: HF `tokenizers`' sequential `encode`, on the calling thread.
    ///
    /// # Errors
    /// [`ErrorKind::Encode`] when HF fails on the text.
    pub fn encode_sequential(&self, text: &str, add_special_tokens: bool) -> Result<Encoding> {
        let hf = self.hf()?;
        catch_panic("tokenizers", || hf.encode(text, add_special_tokens).map(Encoding::from).map_err(Error::encode))
    }

    /// The byte positions where `text` would be cut into segments (empty when it is encoded
    /// whole). Every position is a safe cut; exposed for tools and tests.
    pub fn cut_points(&self, text: &str) -> Vec<usize> {
        let Some(rule) = &self.rule else { return Vec::new() };
        if text.len() < self.min_parallel_bytes.max(2) || self.threads == 1 && self.chunk_size.is_none() {
            return Vec::new();
        }
        let chunk = self.chunk_size.unwrap_or_else(|| text.len().div_ceil(self.threads));
        plan(text, rule, chunk, self.overlap)
    }

    /// Whether long texts are encoded in parallel with this tokenizer, and if not, why.
    pub fn parallelism(&self) -> &Parallelism {
        &self.parallelism
    }

    /// The engine that tokenizes segments (`hf`, `bpe`, `spm`, `wordpiece`).
    pub fn engine_name(&self) -> &'static str {
        self.engine.name()
    }

    /// Why the automatic engine choice fell back to HF: the first unsupported component of each
    /// native engine. `None` when a native engine runs or HF was asked for.
    pub fn engine_reason(&self) -> Option<&str> {
        self.engine_reason.as_deref()
    }

    /// The equivalences lopt applied to read this `tokenizer.json` in its canonical spelling
    /// (for example `Split(..., Removed, invert: true)` read as `Split(..., Isolated)`), one line
    /// each; empty when the file is already spelled canonically.
    pub fn equivalences(&self) -> &[String] {
        &self.equivalences
    }

    /// The number of threads in the tokenizer's pool.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The HF tokenizer loaded from the same `tokenizer.json` (the reference implementation).
    /// With a native engine it is built on the first call (about as long as HF's
    /// `Tokenizer::from_file`), not at load: encoding never needs it.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidTokenizer`] when HF refuses the file (lopt's load checks every
    /// component but the model as HF does, so this is HF refusing a model the native engine
    /// accepted); the same error on every call.
    pub fn hf(&self) -> Result<&tokenizers::Tokenizer> {
        match self.hf.get_or_init(|| build_hf(&self.source)) {
            Ok(hf) => Ok(hf),
            Err(message) => Err(Error::new(ErrorKind::InvalidTokenizer, message.clone())),
        }
    }

    /// Whether the `tokenizer.json` has a post-processor (HF's `get_post_processor().is_some()`),
    /// without building HF's tokenizer.
    pub fn has_post_processor(&self) -> bool {
        self.finisher.has_post_processor()
    }

    /// The number of ids, added tokens included (HF's `get_vocab_size(true)`), without building
    /// HF's tokenizer.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }
}

/// HF's tokenizer, or why HF refuses the file (one line).
type HfResult = std::result::Result<Arc<tokenizers::Tokenizer>, String>;

fn build_hf(bytes: &[u8]) -> HfResult {
    tokenizers::Tokenizer::from_bytes(bytes)
        .map(Arc::new)
        .map_err(|e| format!("not a valid tokenizer.json: {}", one_line(&e.to_string())))
}

/// Every id's token string, read from HF's tokenizer (for vocabularies [`parts::vocab_strings`]
/// does not read), up to the largest id.
pub(crate) fn vocab_of(hf: &tokenizers::Tokenizer) -> Vec<String> {
    let all = hf.get_vocab(true);
    let size = all.values().max().map_or(0, |&id| id as usize + 1);
    let mut strings = vec![String::new(); size];
    for (token, id) in all {
        if let Some(slot) = usize::try_from(id).ok().and_then(|i| strings.get_mut(i)) {
            *slot = token;
        }
    }
    strings
}

/// See [`Tokenizer::check_options`].
fn check_options(finisher: &Finisher, options: &EncodeOptions) -> Result<()> {
    if let Some(truncation) = options.truncation_params() {
        finisher.check_truncation_params(truncation)?;
    }
    if let Some(tokenizers::PaddingStrategy::Fixed(length)) = options.padding_params().map(|p| &p.strategy) {
        if *length > MAX_PADDING_LENGTH {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!("padding to {length} tokens is over lopt's limit of {MAX_PADDING_LENGTH}"),
            ));
        }
    }
    if let Some(multiple) = options.padding_params().and_then(|p| p.pad_to_multiple_of) {
        if multiple > MAX_PADDING_LENGTH {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!("padding to a multiple of {multiple} tokens is over lopt's limit of {MAX_PADDING_LENGTH}"),
            ));
        }
    }
    Ok(())
}

/// The results of a batch, every one present (a missing one is an internal error, not a panic).
fn all_encoded<T>(results: Vec<Option<T>>) -> Result<Vec<T>> {
    results
        .into_iter()
        .map(|e| e.ok_or_else(|| Error::new(ErrorKind::Encode, "internal: a text of the batch was not encoded")))
        .collect()
}

/// The runs of one text, in order, as the finisher joins them. A run holds its segment's own
/// word count; where cuts fall inside pre-tokens (SentencePiece-style rules), every run boundary
/// is such a cut, so the pre-token that a run ends with continues in the next run and is counted
/// once: every run but the last gives up one word (as [`Tokenizer::encode_range`] counts it).
fn joined<'a>(runs: &'a [CachedRun], rule: &CutRule) -> Vec<Run<'a>> {
    let inside = rule.cuts_inside_words();
    let last = runs.len().saturating_sub(1);
    runs.iter()
        .enumerate()
        .map(|(i, cached)| {
            let mut run = cached.run();
            if inside && i < last {
                run.words = run.words.saturating_sub(1);
            }
            run
        })
        .collect()
}

/// Rows beyond one per byte in the columns lent to the first segment of a text cut in several,
/// for the template's special tokens around the text ([`Tokenizer::encode_plain`]).
const ROOM_FOR_SPECIALS: usize = 64;

/// The start of each segment: 0, then the cuts.
fn starts(mut cuts: Vec<usize>) -> Vec<usize> {
    cuts.insert(0, 0);
    cuts
}

/// An uncached encode's segments ([`Tokenizer::planned`]): segment `k` is `text[ranges[k]]`,
/// starting at `starts[k]`; `lent` holds the columns lent to the first segment's engine call
/// until that call takes them (perhaps headed by the template's opening tokens), `taken` whether
/// the engine's `Out` took them.
struct Planned {
    starts: Vec<usize>,
    ranges: Vec<std::ops::Range<usize>>,
    lent: Option<std::sync::Mutex<Option<crate::engine::out::Columns>>>,
    taken: std::sync::atomic::AtomicBool,
}

impl Planned {
    /// Runs `encode`, the engine's call for the segment `range`, in a `segment` trace span, with
    /// the lent columns when `range` is the first segment.
    fn encode<P>(&self, range: &std::ops::Range<usize>, encode: impl FnOnce() -> Result<P>) -> Result<P> {
        let _segment = trace::span("segment", range.len());
        let columns =
            self.lent.as_ref().filter(|_| range.start == 0).and_then(|m| m.lock().ok().and_then(|mut c| c.take()));
        match columns {
            Some(columns) => {
                let (encoded, taken) = crate::engine::out::lending(columns, encode);
                self.taken.store(taken, std::sync::atomic::Ordering::SeqCst);
                encoded
            }
            None => encode(),
        }
    }
}

/// The native engine for a tokenizer: byte-level BPE, else SentencePiece-style BPE, else WordPiece;
/// otherwise why none. Its scanners use `kernel`.
fn native_engine(
    json: &Doc<'_>,
    seed: SeedCache,
    kernel: Kernel,
    pool: &Arc<rayon::ThreadPool>,
) -> std::result::Result<Box<dyn Engine>, String> {
    let bpe = match BpeEngine::with_pool(json, seed, Some(pool)) {
        Ok(engine) => return Ok(Box::new(engine.with_kernel(kernel))),
        Err(reason) => reason,
    };
    let spm = match SpmEngine::new(json, seed) {
        Ok(engine) => return Ok(Box::new(engine)),
        Err(reason) => reason,
    };
    match WordPieceEngine::new(json) {
        Ok(engine) => Ok(Box::new(engine.with_kernel(kernel))),
        Err(wordpiece) => Err(format!("bpe: {bpe}; spm: {spm}; wordpiece: {wordpiece}")),
    }
}

fn ranges(starts: &[usize], len: usize) -> Vec<std::ops::Range<usize>> {
    starts.iter().zip(starts.iter().skip(1).chain(std::iter::once(&len))).map(|(&s, &e)| s..e).collect()
}
