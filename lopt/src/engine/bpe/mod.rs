//! The native byte-level BPE engine: added tokens, NFC/NFD/NFKC/NFKD, the split regexes, ByteLevel and the BPE
//! model of GPT-2, Llama-3, Qwen2/3, DeepSeek-V3 and GPT-4o/GPT-OSS style `tokenizer.json`s,
//! without HF's per-piece allocations and alignment vectors.
//!
//! Contract (the [`Engine`] one): [`BpeEngine::encode_segment`] returns exactly what
//! [`HfEngine`] returns for the same segment: ids, byte offsets, word ids, number of words.
//!
//! How each HF stage is reproduced:
//! * added tokens: [`added`], HF's two passes (raw, then normalized);
//! * normalizer: none, or one Unicode form (NFC, NFD, NFKC, NFKD). Text that the form leaves
//!   unchanged (checked fast) keeps the identity alignment; a range that it changes is normalized
//!   with HF's own normalizer crate and aligned by HF's `transform` rule ([`normalize_aligned`]).
//!   That range is the smallest one around the change bounded by safe cuts of the tokenizer's
//!   cut rule ([`CutRule`]): by the rule's theorem, the text on each side of a safe cut encodes
//!   on its own, so the unchanged rest stays on the fast path (without a rule: the whole piece
//!   between added tokens);
//! * pre-tokenizer: [`pretok`], then ByteLevel, which is a bijection on bytes: the model works on
//!   raw bytes and token ids are the same;
//! * model: [`model`], behind a pre-token cache ([`cache`]) that persists across segments and
//!   documents (bounded, one per concurrent call), since words repeat;
//! * offsets: HF maps byte-level characters back through its alignments, so a token that covers
//!   part of a multi-byte character reports the whole character; here that is "widen the token's
//!   byte range to character boundaries".
//!
//! Word ids count every split HF keeps (added tokens and pre-tokens), from 0 within the segment.

pub(crate) mod added;
#[cfg(test)]
mod bench;
pub(crate) mod bits;
pub(crate) mod cache;
mod model;
mod pretok;
pub(crate) mod table;
mod unicode;

use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use crate::boundary::floor_char_boundary;

use super::out::Out;
use super::{Engine, Segment};
use crate::boundary::CutRule;
use crate::doc::Doc;
use crate::error::Result;
use crate::options::SeedCache as Seeding;
use added::AddedVocab;
use bits::Kernel;
use cache::{Hit, SeedCache, WordCache};
use model::{BpeModel, Scratch};
use pretok::{PreTokenizer, Stage};
pub(crate) use pretok::{CL100K, GPT2, O200K, QWEN};
use unicode::Form;

/// The background seed's thread (lowered in priority, [`seed_and_search_yielding`]).
const SEED_THREAD: &str = "lopt-bpe-seed";

/// Native byte-level BPE; see the module documentation.
pub(crate) struct BpeEngine {
    added: AddedVocab,
    /// The normalizer's Unicode form, if it has one.
    form: Option<Form>,
    /// Where a changed range may be cut off from the rest of its piece (see the module
    /// documentation): the tokenizer's cut rule, inside a piece between added tokens
    /// ([`CutRule::within_piece`]) when no added token is matched on normalized text; `None`
    /// when the tokenizer has no cut rule.
    cuts: Option<CutRule>,
    pre_tokenizer: PreTokenizer,
    model: Arc<BpeModel>,
    /// Every short vocabulary entry's tokens ([`SeedCache`]), read by all threads when their own
    /// cache misses. Built by a background thread so that loading does not wait for it (about as
    /// long as the rest of the build); until it is there, words are merged as without it, which
    /// gives the same tokens. [`SeedCache::Sync`](crate::SeedCache::Sync) builds it before `new`
    /// returns, [`SeedCache::Off`](crate::SeedCache::Off) never (measurements). Either way its
    /// merges run on the tokenizer's pool, all threads at once (on a 2-core machine a background
    /// thread beside the pool took a core from the first encodes). In the background they run
    /// in slices, each round of slices handed to the pool as a job of its own, so an encode that
    /// arrives meanwhile waits for one slice, not for the whole seed (before, it queued behind
    /// all of the seed's tasks: rayon runs a worker's own tasks before injected ones, 0.1-0.2 s);
    /// the parts that are one long task each (the cut table, the long-word search) run on the
    /// background thread at the lowest priority ([`seed_and_search_yielding`]).
    seed: Arc<OnceLock<SeedCache>>,
    /// Pre-token caches lent to calls that run on no thread of the tokenizer's pool (see
    /// [`cache`]), one to each running call.
    caches: Mutex<Vec<WordCache>>,
    /// The tokenizer's pool (none in unit tests), and one pre-token cache per thread of it,
    /// always the same thread's: a cache lent from the shared stack last ran on whichever core
    /// returned it, so at 16 threads nearly every segment began with its cache's lines, written
    /// on every hit (the `USED` bit) and insert, in another core's L2 (16-core M16, 1 MB
    /// documents: `--ids-only` at 16 threads was no faster than the full mode, which does
    /// 1.7x the work at 1 thread). The same thread, when the scheduler leaves it on its core,
    /// finds its cache where it left it. Memory: the same bound as before, one cache per pool
    /// thread plus one per concurrent outside caller.
    pool: Option<Arc<rayon::ThreadPool>>,
    own: Vec<Mutex<WordCache>>,
}

impl BpeEngine {
    /// Compiles the engine from a parsed `tokenizer.json`, its seeded cache built without a pool
    /// (tests).
    ///
    /// # Errors
    /// The reason, naming the component, when some component is not one this engine reproduces.
    #[cfg(test)]
    pub(crate) fn new(json: &Value, seeding: Seeding) -> std::result::Result<BpeEngine, String> {
        Self::with_pool(&Doc::from_value(json.clone()), seeding, None)
    }

    /// Compiles the engine from a parsed `tokenizer.json`; the seeded cache's merges and the
    /// long-word search run on `pool` (the tokenizer's), or on the thread that builds them when
    /// there is none.
    ///
    /// # Errors
    /// The reason, naming the component, when some component is not one this engine reproduces.
    pub(crate) fn with_pool(
        doc: &Doc<'_>,
        seeding: Seeding,
        pool: Option<&Arc<rayon::ThreadPool>>,
    ) -> std::result::Result<BpeEngine, String> {
        let json = &doc.json;
        let form = normalizer(&json["normalizer"])?;
        let mut stages = Vec::new();
        let mut byte_level = false;
        pre_tokenizer(&json["pre_tokenizer"], &mut stages, &mut byte_level)?;
        if !byte_level {
            return Err("the pre-tokenizer has no ByteLevel step, so the BPE model is not byte-level".into());
        }
        let model = BpeModel::from_doc(doc)?;
        let added = AddedVocab::from_json(
            &json["added_tokens"],
            |content| doc.vocab_id(content),
            doc.vocab_len(),
            |content| match form {
                Some(form) => form.normalize(content).map(|(c, _)| c).collect(),
                None => content.to_string(),
            },
        )?;
        unicode::init();
        if let Some(form) = form {
            unicode::init_form(form);
        }
        let model = Arc::new(model);
        let seed = Arc::new(OnceLock::new());
        match seeding {
            Seeding::Off => {}
            Seeding::Sync => seed_and_search(&model, &seed, pool),
            Seeding::Background => {
                let (model, seed, pool) = (Arc::clone(&model), Arc::clone(&seed), pool.map(Arc::clone));
                // Without a thread the engine simply runs unseeded.
                let _ = std::thread::Builder::new()
                    .name(SEED_THREAD.into())
                    .spawn(move || seed_and_search_yielding(&model, &seed, pool.as_ref()));
            }
        }
        // Without tokens matched after normalization, the cuts inside a piece between added tokens
        // need no added-token check.
        let cuts = form.and_then(|_| CutRule::new(doc).ok()).map(|rule| {
            if added.has_normalized() {
                rule
            } else {
                rule.within_piece()
            }
        });
        Ok(BpeEngine {
            added,
            form,
            cuts,
            pre_tokenizer: PreTokenizer::new(stages),
            model,
            seed,
            caches: Mutex::new(Vec::new()),
            own: (0..pool.map_or(0, |p| p.current_num_threads())).map(|_| Mutex::default()).collect(),
            pool: pool.map(Arc::clone),
        })
    }

    /// The same engine, its pre-tokenizer scanning with `kernel` (`TokenizerBuilder::scalar_kernels`).
    pub(crate) fn with_kernel(mut self, kernel: Kernel) -> Self {
        self.pre_tokenizer = self.pre_tokenizer.with_kernel(kernel);
        self
    }

    /// Empties the pre-token caches (benchmarks of fresh documents).
    #[cfg(test)]
    pub(crate) fn clear_caches(&self) {
        if let Ok(mut pool) = self.caches.lock() {
            pool.clear();
        }
        for own in &self.own {
            if let Ok(mut cache) = own.lock() {
                *cache = WordCache::default();
            }
        }
    }

    /// The calling pool thread's own cache, locked for this call; `None` off the pool (or, were
    /// it ever so, when the slot is busy: a nested call on the same thread).
    fn own_cache(&self) -> Option<std::sync::MutexGuard<'_, WordCache>> {
        let slot = self.own.get(self.pool.as_ref()?.current_thread_index()?)?;
        match slot.try_lock() {
            Ok(guard) => Some(guard),
            // A panic while it was lent (caught by the guarded engine) left an empty cache in
            // the slot, which is as good as a new one.
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// Builds the model's long-word search (so that the first long pre-token does not wait for it)
/// and then its seeded cache into `seed`: the search's histories say which vocabulary entries
/// merge to themselves, and the seed takes those without merging them (most of its work). On
/// `pool` when there is one, the cut table beside the search and the search's trie beside its
/// histories: this is the synchronous seed alone (the background one calls it without a pool),
/// so no lazy build of the same cells is in flight, and the search is built outside its cell
/// ([`BpeModel::build_long_search_side_by_side`]).
fn seed_and_search(model: &BpeModel, seed: &OnceLock<SeedCache>, pool: Option<&Arc<rayon::ThreadPool>>) {
    match pool {
        Some(pool) => pool.install(|| {
            rayon::join(|| model.build_long_search_side_by_side(), || model.cuts());
            let _ = seed.set(model.seed_cache());
        }),
        None => {
            model.long_search();
            let _ = seed.set(model.seed_cache());
        }
    }
}

/// [`seed_and_search`] behind the encodes, on the background seed's own thread: the seed's
/// merges on `pool` in slices that an encode handed to the pool goes ahead of
/// ([`BpeModel::seed_cache_yielding`]); the long-word search and the cut table (single tasks of
/// 20-100 ms that would hold a pool thread) on a second thread (the seed's slices that start
/// after the search is there skip the entries that merge to themselves); both threads at the lowest
/// scheduling priority, so that on a machine with no core to spare the encodes' threads run
/// first. An encode that needs the search while it is being built waits for it (and leaves its
/// core to it), as it would wait to build it itself.
fn seed_and_search_yielding(model: &BpeModel, seed: &OnceLock<SeedCache>, pool: Option<&Arc<rayon::ThreadPool>>) {
    let Some(pool) = pool else {
        seed_and_search(model, seed, None);
        return;
    };
    let search = || {
        crate::engine::priority::lower_this_thread(SEED_THREAD);
        model.long_search();
        model.cuts();
    };
    std::thread::scope(|scope| {
        let beside = std::thread::Builder::new().name(SEED_THREAD.into()).spawn_scoped(scope, search);
        crate::engine::priority::lower_this_thread(SEED_THREAD);
        let _ = seed.set(model.seed_cache_yielding(pool));
        // Without a second thread, one after the other.
        if beside.is_err() {
            search();
        }
    });
}

/// The normalizer's Unicode form: `None` for no normalizer (or an empty `Sequence`).
fn normalizer(json: &Value) -> std::result::Result<Option<Form>, String> {
    if json.is_null() {
        return Ok(None);
    }
    let name = json["type"].as_str();
    if let Some(form) = name.and_then(Form::from_type) {
        return Ok(Some(form));
    }
    match name {
        Some("Sequence") => {
            let mut form = None;
            for item in json["normalizers"].as_array().ok_or("normalizer Sequence without a list")? {
                if let Some(inner) = normalizer(item)? {
                    // Two forms in a row compose to one, but not in general to either.
                    if form.replace(inner).is_some() {
                        return Err("a normalizer Sequence of several Unicode forms is not supported natively".into());
                    }
                }
            }
            Ok(form)
        }
        other => Err(format!("normalizer {} is not supported natively", other.unwrap_or("?"))),
    }
}

fn pre_tokenizer(json: &Value, stages: &mut Vec<Stage>, byte_level: &mut bool) -> std::result::Result<(), String> {
    if json.is_null() {
        return Ok(());
    }
    if *byte_level {
        return Err("a pre-tokenizer step after ByteLevel is not supported natively".into());
    }
    match json["type"].as_str() {
        Some("Sequence") => {
            for item in json["pretokenizers"].as_array().ok_or("pre-tokenizer Sequence without a list")? {
                pre_tokenizer(item, stages, byte_level)?;
            }
            Ok(())
        }
        Some("Split") => {
            let pattern =
                json["pattern"]["Regex"].as_str().ok_or("Split by a literal string is not supported natively")?;
            if json["behavior"].as_str() != Some("Isolated") || json["invert"].as_bool() == Some(true) {
                return Err("only Isolated, non-inverted Split is supported natively".into());
            }
            stages.push(Stage::from_pattern(pattern)?);
            Ok(())
        }
        Some("ByteLevel") => {
            if json["add_prefix_space"].as_bool() == Some(true) {
                return Err("ByteLevel add_prefix_space is not supported natively".into());
            }
            if json["use_regex"].as_bool() != Some(false) {
                stages.push(Stage::Gpt2);
            }
            *byte_level = true;
            Ok(())
        }
        other => Err(format!("pre-tokenizer {} is not supported natively", other.unwrap_or("?"))),
    }
}

/// A text the engine tokenizes: the segment itself, or a range of it that the normalizer changed.
#[derive(Clone, Copy)]
struct Text<'a> {
    str: &'a str,
    /// For a normalized piece: where the piece starts in the segment, and for each byte of the
    /// normalized text the original range (relative to the piece) it comes from, as HF aligns it.
    aligned: Option<(usize, &'a [(u32, u32)])>,
}

impl Text<'_> {
    /// The segment offsets of the normalized range `start..end` (non-empty): HF's
    /// `convert_offsets`, which spans from the first byte's origin to the last byte's.
    #[inline(always)]
    fn original(&self, start: usize, end: usize) -> (usize, usize) {
        match self.aligned {
            None => {
                // Identity alignment: a token that splits a character reports the whole
                // character (each byte-level character is aligned to its source character).
                let bytes = self.str.as_bytes();
                let (mut s, mut e) = (start, end);
                while s > 0 && !is_char_start(bytes[s]) {
                    s -= 1;
                }
                while e < bytes.len() && !is_char_start(bytes[e]) {
                    e += 1;
                }
                (s, e)
            }
            Some((base, alignments)) => (base + alignments[start].0 as usize, base + alignments[end - 1].1 as usize),
        }
    }
}

/// The state of one `encode_segment` call; with `FULL` the offset and word-id columns are
/// written, without it (ids-only mode) nothing but the ids is computed: no word count, no
/// offsets (monomorphized, so the per-word loop carries no test of the mode).
struct Run<'a, const FULL: bool> {
    engine: &'a BpeEngine,
    /// The segment's columns, written one row per token (offsets and word ids only when full).
    out: Out<FULL>,
    scratch: Scratch,
    /// Borrowed from the engine's pool for the call.
    cache: WordCache,
    /// The ids of the word being merged.
    ids: Vec<u32>,
    /// The same as `(id, end within the word)`.
    tokens: Vec<(u32, u32)>,
}

/// The pre-tokens of a piece of `text` that starts at `base`, into the run. `ALIGNED`: whether
/// `text` is a normalized range with its alignments (else the segment itself, which is nearly
/// always the case): monomorphized so that the per-word loop over raw text neither loads nor
/// tests the alignments (a constant `None`), which freed registers in the scanner's loop.
struct Words<'r, 'a, 't, const FULL: bool, const ALIGNED: bool> {
    run: &'r mut Run<'a, FULL>,
    text: Text<'t>,
    base: usize,
}

impl<const FULL: bool, const ALIGNED: bool> pretok::Sink for Words<'_, '_, '_, FULL, ALIGNED> {
    // Inlined into every call site of the scanners in optimized builds; in test builds (opt-level
    // 1, debug assertions) that made each of `split_from`'s instantiations take seconds of LLVM
    // (`docs/benchmarks.md`, "CI time"), so there it is a call.
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn piece(&mut self, start: usize, end: usize) {
        let text = if ALIGNED { self.text } else { Text { str: self.text.str, aligned: None } };
        self.run.word(text, self.base + start, self.base + end);
    }
}

/// Appends the tokens `(id, end within the word)` of the word at `start` in `text`; `splits`:
/// some token ends inside a character (only then are identity offsets widened). Without `FULL`
/// only the ids are written (ids-only mode: the other columns stay empty).
#[inline(always)]
fn push_tokens<const FULL: bool>(
    out: &mut Out<FULL>,
    text: Text<'_>,
    start: usize,
    tokens: &[(u32, u32)],
    splits: bool,
    word: u32,
) {
    if !FULL {
        for &(id, _) in tokens {
            out.id(id);
        }
        return;
    }
    let mut pos = start;
    if text.aligned.is_none() && !splits {
        for &(id, end) in tokens {
            let end = start + end as usize;
            out.row(id, (pos, end), word);
            pos = end;
        }
    } else {
        for &(id, end) in tokens {
            let end = start + end as usize;
            out.row(id, text.original(pos, end), word);
            pos = end;
        }
    }
}

/// Appends the tokens of a cached word `start..end` (only its ids without `FULL`).
#[inline(always)]
fn push_hit<const FULL: bool>(
    out: &mut Out<FULL>,
    text: Text<'_>,
    (start, end): (usize, usize),
    hit: Hit<'_>,
    splits: bool,
    word: u32,
) {
    match hit {
        Hit::One(id) if !FULL => out.id(id),
        Hit::One(id) => {
            // One token covers the word, whose ends are character boundaries.
            let offsets = if text.aligned.is_none() { (start, end) } else { text.original(start, end) };
            out.row(id, offsets, word);
        }
        Hit::Many(tokens) => push_tokens::<FULL>(out, text, start, tokens, splits, word),
    }
}

impl<const FULL: bool> Run<'_, FULL> {
    fn added_token(&mut self, id: u32, offsets: (usize, usize)) {
        let word = self.out.words;
        self.out.row(id, offsets, word);
        self.out.added_words.push(word);
        self.out.words += 1;
    }

    /// BPE of `word` into `self.ids` alone (`entry` as for [`Self::merge`]): all the ids-only
    /// mode needs of a word it does not cache.
    fn merge_ids(&mut self, word: &[u8], entry: bool) {
        self.ids.clear();
        self.engine.model.encode_word_any(word, entry, &mut self.scratch, &mut self.ids);
    }

    /// Merges `word` into `self.tokens`; `entry`: whether it may be a vocabulary entry (else it
    /// missed the seeded cache, which holds every entry of its length).
    fn merge(&mut self, word: &[u8], entry: bool) {
        self.engine.model.encode_tokens(word, entry, &mut self.scratch, &mut self.ids, &mut self.tokens);
    }

    /// One pre-token, `text[start..end]`.
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn word(&mut self, text: Text<'_>, start: usize, end: usize) {
        let all = text.str.as_bytes();
        let len = end - start;
        // Only the full mode reports the number of words (and word ids).
        let word = self.out.words;
        if FULL {
            self.out.words += 1;
        }
        // A one-byte word is its byte's token (`BpeModel::byte_id`), which the cache would
        // return after a probe: Qwen's digits are one pre-token each (random digits: a million
        // one-byte words per MB).
        if len == 1 {
            let id = self.engine.model.byte_id(all[start]);
            push_hit::<FULL>(&mut self.out, text, (start, end), Hit::One(id), false, word);
            return;
        }
        // One compare for the short words that make most of a text; the slice of the word is
        // made only where it is read (a hit on a short word needs only its packed key).
        if len > cache::SEED_MAX_LEN && (len > cache::MAX_LEN || is_long_cjk(&all[start..end])) {
            if !FULL {
                // Not cached, so its ids are all the ids-only mode needs: not the token ends
                // that `merge` adds for offsets and the cache (a length lookup and a pair
                // written per token, most of a Chinese text's tokens).
                self.merge_ids(&all[start..end], true);
                for &id in &self.ids {
                    self.out.id(id);
                }
                return;
            }
            self.merge(&all[start..end], true);
            push_tokens::<FULL>(&mut self.out, text, start, &self.tokens, true, word);
            return;
        }
        let key = cache::key(all, start, end);
        // The length decides the key's kind, so the short words (most of them) take the probe
        // that neither tests the kind nor compares bytes.
        let found =
            if len <= cache::SHORT { self.cache.get_short(key) } else { self.cache.get_at(key, all, start, end) };
        if let Some((hit, splits)) = found {
            push_hit::<FULL>(&mut self.out, text, (start, end), hit, splits, word);
            return;
        }
        let bytes = &all[start..end];
        let engine = self.engine;
        // A miss in this thread's cache, but perhaps a vocabulary entry: remembered here too, so
        // that its next lookups stay in this thread's smaller, warmer table.
        let seed = if len <= cache::SEED_MAX_LEN { engine.seed.get() } else { None };
        // A `match`, not a closure: the probe stays inlined here (as a closure it was compiled
        // as a call of its own once the merge below changed).
        let seeded = match seed {
            Some(seed) => seed.get(all, start, end),
            None => None,
        };
        if let Some((hit, splits)) = seeded {
            match hit {
                Hit::One(id) => self.cache.insert(key, bytes, &[(id, len as u32)]),
                Hit::Many(tokens) => self.cache.insert(key, bytes, tokens),
            }
            push_hit::<FULL>(&mut self.out, text, (start, end), hit, splits, word);
            return;
        }
        // Missed by the seed, the word is no vocabulary entry (`ignore_merges` need not look it
        // up: on random text that lookup missed the caches once per word).
        self.merge(bytes, seed.is_none());
        self.cache.insert(key, bytes, &self.tokens);
        push_tokens::<FULL>(&mut self.out, text, start, &self.tokens, true, word);
    }

    /// Pre-tokenizes and encodes `text[start..end]`, a normalized piece between added tokens.
    fn pre_tokenize(&mut self, text: Text<'_>, start: usize, end: usize) {
        let engine = self.engine;
        let piece = &text.str[start..end];
        if text.aligned.is_none() {
            engine.pre_tokenizer.split(piece, &mut Words::<FULL, false> { run: self, text, base: start });
        } else {
            engine.pre_tokenizer.split(piece, &mut Words::<FULL, true> { run: self, text, base: start });
        }
    }

    /// A piece between raw added tokens: the normalized added tokens, then pre-tokens.
    fn piece(&mut self, text: Text<'_>, start: usize, end: usize) {
        if !self.engine.added.has_normalized() {
            self.pre_tokenize(text, start, end);
            return;
        }
        let mut inner: Vec<(Option<u32>, usize, usize)> = Vec::new();
        self.engine
            .added
            .split_normalized(&text.str[start..end], &mut |id, s, e| inner.push((id, start + s, start + e)));
        for (id, s, e) in inner {
            match id {
                Some(id) => self.added_token(id, text.original(s, e)),
                None => self.pre_tokenize(text, s, e),
            }
        }
    }
}

/// Whether `word` is a run of 3-byte characters (CJK, kana, Hangul; perhaps after one ASCII
/// byte) longer than a seed entry. Such words are phrases between punctuation: on `zh_long`
/// documents 1-2 % of those of 16-48 bytes recur in the same document and almost none longer
/// (78-87 % of shorter ones do), so caching them costs more than it saves, and they would crowd
/// out the words that recur. They are merged each time (their pieces are memoized by the model).
#[inline(always)]
fn is_long_cjk(word: &[u8]) -> bool {
    word.len() > cache::SEED_MAX_LEN && (word[0] & 0xf0 == 0xe0 || word[1] & 0xf0 == 0xe0)
}

#[inline(always)]
fn is_char_start(b: u8) -> bool {
    (b as i8) >= -0x40
}

/// A range that the normalizer changes: its normalized text and HF's alignments for it.
#[derive(Default)]
struct Normalized {
    text: String,
    alignments: Vec<(u32, u32)>,
}

/// `form` of `piece` into `into` (its earlier contents replaced), with the alignments HF's
/// `NormalizedString::nfc` (`nfd`, `nfkc`, `nfkd`) computes: the same normalizer
/// (`unicode-normalization-alignments`, which reports each output character as replacing one
/// input character, possibly swallowing the next `-change` ones, or as inserted when `change > 0`)
/// and the same rule as `NormalizedString::transform`: a replacing character is aligned to the
/// input character it replaces, an inserted one to the input character before it. Every byte of
/// an output character gets that character's alignment. Offsets are relative to `piece`.
fn normalize_aligned(form: Form, piece: &str, into: &mut Normalized) {
    if normalize_simple(form, piece, into) {
        return;
    }
    let Normalized { text, alignments } = into;
    text.clear();
    alignments.clear();
    let bytes = piece.as_bytes();
    let char_at = |i: usize| -> (u32, u32) {
        let len = piece[i..].chars().next().map_or(0, char::len_utf8);
        (i as u32, (i + len) as u32)
    };
    let char_before = |i: usize| -> (u32, u32) {
        let mut s = i - 1;
        while !is_char_start(bytes[s]) {
            s -= 1;
        }
        (s as u32, i as u32)
    };
    let mut replaced = piece.chars();
    let mut offset = 0usize;
    for (c, change) in form.normalize(piece) {
        let align = if change > 0 {
            if offset == 0 {
                (0, 0)
            } else {
                char_before(offset)
            }
        } else if offset < piece.len() {
            char_at(offset)
        } else {
            (offset as u32, offset as u32)
        };
        if change <= 0 {
            offset += replaced.next().map_or(0, char::len_utf8);
        }
        if change < 0 {
            offset += (&mut replaced).take(change.unsigned_abs()).map(char::len_utf8).sum::<usize>();
        }
        text.push(c);
        alignments.extend(std::iter::repeat_n(align, c.len_utf8()));
    }
}

/// [`normalize_aligned`] of a piece whose every character `form` maps on its own to one
/// character ([`unicode::simple_map`], which argues why): each output character is aligned to the
/// input character it replaces (HF's `change` is 0 for each), without the normalizer's iterators
/// (on Chinese text under NFKC, full-width punctuation and the clause after it: 37 % of the
/// encode went to the crate's decompose and recompose). False (and `into` left to be
/// overwritten) when some character is not such.
fn normalize_simple(form: Form, piece: &str, into: &mut Normalized) -> bool {
    let Normalized { text, alignments } = into;
    text.clear();
    alignments.clear();
    for (i, c) in piece.char_indices() {
        let Some(d) = unicode::simple_map(form, c) else { return false };
        text.push(d);
        let align = (i as u32, (i + c.len_utf8()) as u32);
        alignments.extend(std::iter::repeat_n(align, d.len_utf8()));
    }
    true
}

impl BpeEngine {
    /// Splits the piece `segment[start..end]` into ranges that `form` leaves unchanged and
    /// ranges that it changes, reported in order as `(start, end, changed)`; every boundary
    /// between them is a safe cut of the piece, so each range encodes on its own.
    fn changed_ranges(
        &self,
        form: Form,
        segment: &str,
        start: usize,
        end: usize,
        report: &mut impl FnMut(usize, usize, bool),
    ) {
        let piece = &segment[start..end];
        let Some(cuts) = &self.cuts else {
            if start < end {
                report(start, end, !unicode::is_unchanged(form, self.pre_tokenizer.kernel(), piece));
            }
            return;
        };
        // Positions are relative to `piece`. `done`: reported up to here, a safe cut.
        let mut done = 0;
        while let Some((from, to)) = unicode::first_change(form, self.pre_tokenizer.kernel(), &piece[done..]) {
            let (mut left, mut right) = (done + from, done + to);
            // A window may open with a stable character (which could compose with what follows
            // it); the first cut candidate is after it, where the change may begin.
            if let Some(c) = piece[left..right].chars().next().filter(|&c| unicode::is_stable(form, c)) {
                left += c.len_utf8();
            }
            while left > done && !cuts.is_safe(piece, left) {
                left = floor_char_boundary(piece, left - 1);
            }
            right = cuts.next_safe(piece, right);
            if done < left {
                report(start + done, start + left, false);
            }
            report(start + left, start + right, true);
            done = right;
        }
        if done < piece.len() {
            report(start + done, end, false);
        }
    }
}

impl Engine for BpeEngine {
    fn name(&self) -> &'static str {
        "bpe"
    }

    fn encode_segment(&self, segment: &str) -> Result<Segment> {
        Ok(self.encode::<true>(segment))
    }

    fn encode_ids(&self, segment: &str, _continuation: bool) -> Result<Vec<u32>> {
        Ok(self.encode::<false>(segment).ids)
    }
}

impl BpeEngine {
    /// Encodes a segment; without `FULL`, only its ids (the offset and word-id columns, a third
    /// of the engine's writes, stay empty, and the word count is not kept).
    fn encode<const FULL: bool>(&self, segment: &str) -> Segment {
        // Room for 2 bytes per token: English averages about 4, but lists, tables and code come
        // near 2, and a column that outgrows its reservation is copied whole (on such a 1 MB
        // document that copy was a third of the engine's L2 misses); pages not written are
        // never touched.
        let rows = segment.len() / 2;
        let mut pieces: Vec<(Option<u32>, usize, usize)> = Vec::new();
        self.added.split_raw(segment, &mut |id, s, e| pieces.push((id, s, e)));
        let mut own = self.own_cache();
        let mut cache: WordCache = match own.as_deref_mut() {
            Some(slot) => std::mem::take(slot),
            None => self.caches.lock().ok().and_then(|mut pool| pool.pop()).unwrap_or_default(),
        };
        let memo = std::mem::take(&mut cache.pieces);
        let mut run = Run::<FULL> {
            engine: self,
            out: Out::with_capacity(rows),
            scratch: Scratch::with_memo(memo),
            cache,
            ids: Vec::new(),
            tokens: Vec::new(),
        };
        let raw = Text { str: segment, aligned: None };
        // Each range that the normalizer changes is normalized when its turn comes, into one
        // buffer reused for all of them (a `String` and a `Vec` allocated per range, all kept
        // until the end, were a tenth of the encode of Chinese text under NFKC, a range at
        // every full-width comma).
        let mut normalized = Normalized::default();
        for &(id, start, end) in &pieces {
            if let Some(id) = id {
                run.added_token(id, (start, end));
                continue;
            }
            let Some(form) = self.form else {
                run.piece(raw, start, end);
                continue;
            };
            self.changed_ranges(form, segment, start, end, &mut |start, end, changed| {
                if changed {
                    normalize_aligned(form, &segment[start..end], &mut normalized);
                    let text = Text { str: &normalized.text, aligned: Some((start, &normalized.alignments)) };
                    run.piece(text, 0, normalized.text.len());
                } else {
                    run.piece(raw, start, end);
                }
            });
        }
        run.cache.pieces = run.scratch.take_memo();
        match own.as_deref_mut() {
            Some(slot) => *slot = run.cache,
            None => {
                if let Ok(mut pool) = self.caches.lock() {
                    pool.push(run.cache);
                }
            }
        }
        run.out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(form: Form, piece: &str) -> Normalized {
        let mut into = Normalized::default();
        normalize_aligned(form, piece, &mut into);
        into
    }

    fn hf_normalize(form: Form, piece: &str) -> (String, Vec<(u32, u32)>) {
        use tokenizers::normalizer::Range;
        let mut n = tokenizers::NormalizedString::from(piece);
        match form {
            Form::Nfc => n.nfc(),
            Form::Nfd => n.nfd(),
            Form::Nfkc => n.nfkc(),
            Form::Nfkd => n.nfkd(),
        };
        let alignments = (0..n.len())
            .map(|i| {
                let r = n.convert_offsets(Range::Normalized(i..i + 1)).unwrap();
                (r.start as u32, r.end as u32)
            })
            .collect();
        (n.get().to_string(), alignments)
    }

    /// The alignments of normalized text are HF's, character by character, in every form;
    /// the pool has compatibility characters (ligatures, full-width forms, superscripts,
    /// fractions, Roman numerals, squared units) as well as canonical ones.
    #[test]
    fn alignments_match_hf() {
        let pool: Vec<char> = "ae\u{301}\u{300}\u{316}\u{308}\u{323}\u{1100}\u{1161}\u{11a8}\u{ac00}\u{212b}\u{2126}\u{f900}\u{958}\u{1e9b}\u{344}\u{f6} x한\u{327}C\u{30c}\u{5b0}\u{5bc}\u{fb01}\u{fb03}\u{ff21}\u{ff0c}\u{b2}\u{2075}\u{bd}\u{2163}\u{a0}\u{2026}\u{3000}\u{fe64}\u{33c4}\u{1d400}\u{e9}"
            .chars()
            .collect();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for form in [Form::Nfc, Form::Nfd, Form::Nfkc, Form::Nfkd] {
            for _ in 0..10_000 {
                crate::engine::xorshift(&mut state);
                let len = 1 + (state % 9) as usize;
                let piece: String = (0..len).map(|k| pool[((state >> (k * 5)) % pool.len() as u64) as usize]).collect();
                let ours = normalized(form, &piece);
                assert_eq!(
                    (ours.text.clone(), ours.alignments.clone()),
                    hf_normalize(form, &piece),
                    "{form:?} {piece:?}"
                );
            }
        }
    }

    /// The character-by-character path of `normalize_aligned` gives HF's text and alignments:
    /// every BMP character it maps, alone, in every form, and random pieces of Chinese text with
    /// full-width punctuation, ideographic spaces and compatibility ideographs, mixed with
    /// characters it does not map (which send the piece to the normalizer's iterators).
    #[test]
    fn simple_normalization_matches_hf() {
        for form in [Form::Nfc, Form::Nfd, Form::Nfkc, Form::Nfkd] {
            let mut mapped = 0;
            for c in (0x80..0x10000u32).filter_map(char::from_u32) {
                let Some(d) = unicode::simple_map(form, c) else { continue };
                if d == c {
                    continue;
                }
                mapped += 1;
                let piece = c.to_string();
                let expected = hf_normalize(form, &piece);
                assert_eq!(expected.0, d.to_string(), "{form:?} {c:?}");
                let ours = normalized(form, &piece);
                assert_eq!((ours.text, ours.alignments), expected, "{form:?} {c:?}");
            }
            eprintln!("{form:?}: {mapped} characters mapped one to one");
        }
        let pool: Vec<char> = "中文字，：；！？（）\u{3000}\u{ff21}\u{ff41}\u{ff10}\u{f900}\u{fa10}a,. 1。、「」\u{2026}\u{fb01}e\u{301}\u{300}\u{ac00}\u{1100}\u{1161}\u{33c4}"
            .chars()
            .collect();
        let simple: Vec<char> = pool[..22].to_vec();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut reused = Normalized::default();
        for form in [Form::Nfc, Form::Nfd, Form::Nfkc, Form::Nfkd] {
            for round in 0..20_000 {
                crate::engine::xorshift(&mut state);
                let len = 1 + (state % 12) as usize;
                let from = if round % 2 == 0 { &simple } else { &pool };
                let piece: String = (0..len).map(|k| from[((state >> (k * 5)) % from.len() as u64) as usize]).collect();
                // The buffer is reused from range to range, as in `encode`.
                normalize_aligned(form, &piece, &mut reused);
                assert_eq!(
                    (reused.text.clone(), reused.alignments.clone()),
                    hf_normalize(form, &piece),
                    "{form:?} {piece:?}"
                );
            }
        }
    }

    /// A pool thread gets its own pre-token cache back on every call (the shared stack lends
    /// caches only to callers off the pool), and the tokens do not depend on which cache served.
    #[test]
    fn pool_threads_keep_their_own_cache() {
        // Every byte is a token (the engine refuses a byte-level vocabulary without them), then
        // "ab", "Ġa" and "Ġab" (which " ab" never reaches: "a b" merges first).
        let mut vocab: serde_json::Map<String, Value> =
            model::byte_to_char().iter().enumerate().map(|(i, c)| (c.to_string(), Value::from(i))).collect();
        for (id, token) in [(256, "ab"), (257, "Ġa"), (258, "Ġab")] {
            vocab.insert(token.into(), Value::from(id));
        }
        let json = serde_json::json!({
            "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
            "model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "Ġ a", "Ġa b"]},
        });
        let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap());
        let engine = BpeEngine::with_pool(&Doc::from_value(json), Seeding::Off, Some(&pool)).unwrap();
        let text = "ab ab ab";
        let outside = engine.encode_segment(text).unwrap();
        assert_eq!(outside.ids, [256, 32, 256, 32, 256]);
        assert_eq!(engine.caches.lock().unwrap().len(), 1);
        for _ in 0..3 {
            let (index, inside) = pool.install(|| (rayon::current_thread_index(), engine.encode_segment(text)));
            assert_eq!(inside.unwrap().ids, outside.ids);
            let index = index.unwrap();
            assert!(!engine.own[index].lock().unwrap().is_empty(), "thread {index} kept no cache");
            assert_eq!(engine.caches.lock().unwrap().len(), 1, "a pool thread used the shared stack");
        }
        engine.clear_caches();
        assert!(engine.own.iter().all(|slot| slot.lock().unwrap().is_empty()));
    }

    /// The ids-only mode's path for long uncached words (runs of CJK characters longer than a
    /// seed entry, words longer than the cache takes) gives the ids of the full mode's path,
    /// which merges them with their token ends.
    #[test]
    fn ids_only_long_words_have_the_full_modes_ids() {
        let mut vocab: serde_json::Map<String, Value> =
            model::byte_to_char().iter().enumerate().map(|(i, c)| (c.to_string(), Value::from(i))).collect();
        // "中" is e4 b8 ad, "文" e6 96 87: ByteLevel characters "ä¸Ń" and "æĸĩ".
        for (id, token) in [(256, "ä¸"), (257, "ä¸Ń"), (258, "æĸ"), (259, "æĸĩ"), (260, "ä¸Ńæĸĩ"), (261, "ab")]
        {
            vocab.insert(token.into(), Value::from(id));
        }
        let json = serde_json::json!({
            "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
            "model": {"type": "BPE", "vocab": vocab, "merges": ["ä ¸", "ä¸ Ń", "æ ĸ", "æĸ ĩ", "ä¸Ń æĸĩ", "a b"]},
        });
        for seeding in [Seeding::Off, Seeding::Sync] {
            let engine = BpeEngine::new(&json, seeding).unwrap();
            for text in [
                "中文中文中文中文中文".to_string(),
                "中文中文中文中文中文中 ab 中中中中中中文".to_string(),
                format!("{} {}", "ab".repeat(200), "中文".repeat(50)),
            ] {
                let full = engine.encode::<true>(&text);
                let ids = engine.encode::<false>(&text);
                assert!(full.ids.contains(&260), "{text}");
                assert_eq!(ids.ids, full.ids, "{text}");
                assert!(ids.offsets.is_empty() && ids.word_ids.is_empty());
            }
        }
    }

    #[test]
    fn refuses_unsupported_components() {
        let json = serde_json::json!({
            "normalizer": {"type": "Lowercase"},
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
            "model": {"type": "BPE", "vocab": {}, "merges": []},
        });
        let err = BpeEngine::new(&json, Seeding::Off).err().unwrap_or_default();
        assert!(err.contains("Lowercase"), "{err}");
    }
}
