//! Engines: whatever tokenizes one segment (a slice of the input that starts and ends at safe
//! cuts) without post-processing.
//!
//! The HF backend ([`hf::HfEngine`]) runs the `tokenizers` pipeline and works for every
//! `tokenizer.json`; it is also the oracle of the tests. Native engines (byte-level BPE,
//! SentencePiece-style BPE, WordPiece) implement the same [`Engine`] trait and are chosen when they support every
//! component of the tokenizer.
//!
//! Contract of [`Engine::encode_segment`]: the result equals the HF pipeline's encoding of the
//! segment before post-processing (`extract_and_normalize`, pre-tokenize, model,
//! `into_encoding` with byte offsets), with offsets relative to the segment and word ids counted
//! from 0 within it. [`Engine::encode_continuation`] encodes a segment that follows a cut, for
//! normalizers that put a prefix at the start of every piece.

pub(crate) mod backtrack;
pub(crate) mod bpe;
pub(crate) mod guard;
pub(crate) mod hf;
pub(crate) mod merge_core;
pub(crate) mod out;
pub(crate) mod priority;
pub(crate) mod spm;
pub(crate) mod wordpiece;

use crate::error::Result;

/// Which tokenization engine encodes the segments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EngineKind {
    /// A native engine when one supports every component of the tokenizer, HF otherwise.
    #[default]
    Auto,
    /// Always the HuggingFace `tokenizers` pipeline.
    Hf,
    /// A native engine; building the tokenizer fails when none supports it.
    Native,
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineKind::Auto => "auto",
            EngineKind::Hf => "hf",
            EngineKind::Native => "native",
        })
    }
}

/// The tokens of one segment, before post-processing.
#[derive(Clone, Debug, Default)]
pub(crate) struct Segment {
    pub(crate) ids: Vec<u32>,
    /// Token strings, when the engine has them at hand (HF); native engines leave this empty and
    /// the strings are looked up by id once, after the merge.
    pub(crate) tokens: Vec<String>,
    /// Byte offsets relative to the segment start.
    pub(crate) offsets: Vec<(usize, usize)>,
    /// Word (pre-token) index of each token, counted within the segment.
    pub(crate) word_ids: Vec<u32>,
    /// Number of pre-tokens of the segment, including any that produced no token.
    pub(crate) words: u32,
    /// The words (ascending, counted within the segment) that are added tokens rather than
    /// pre-tokens the model tokenized: HF's truncating model loop counts their tokens but never
    /// stops after them (`post::Finisher::limit_like_model`). The token of an added token cannot
    /// tell this apart, since a model may produce the same id (WordPiece's `[UNK]`).
    pub(crate) added_words: Vec<u32>,
}

/// Tokenizes one segment; see the module documentation for the contract.
pub(crate) trait Engine: Send + Sync {
    /// A short name for `lopt info` and benchmarks (`hf`, `bpe`, `spm`, `wordpiece`).
    fn name(&self) -> &'static str;

    /// Encodes `segment` without post-processing.
    ///
    /// # Errors
    /// Fails when the underlying model fails (for example an unknown character without an unknown
    /// token).
    fn encode_segment(&self, segment: &str) -> Result<Segment>;

    /// Encodes `segment`, which follows a safe cut rather than starting the text: the same as
    /// [`Engine::encode_segment`] except that the normalizer's prefix (`Prepend`) is not put at
    /// its start, since in the whole text the cut is not the start of a normalized piece. Only
    /// called when the cut rule [needs it](crate::boundary::CutRule::needs_continuation).
    ///
    /// # Errors
    /// As [`Engine::encode_segment`].
    fn encode_continuation(&self, segment: &str) -> Result<Segment> {
        self.encode_segment(segment)
    }

    /// The ids of [`Engine::encode_segment`] (or of [`Engine::encode_continuation`] when
    /// `continuation`), for callers that need nothing else: engines that can skip the offset and
    /// word-id columns override it.
    ///
    /// # Errors
    /// As [`Engine::encode_segment`].
    fn encode_ids(&self, segment: &str, continuation: bool) -> Result<Vec<u32>> {
        let encoded = if continuation { self.encode_continuation(segment)? } else { self.encode_segment(segment)? };
        Ok(encoded.ids)
    }

    /// Whether [`Engine::encode_continuation`] leaves the prefix out (the HF pipeline cannot).
    fn encodes_continuations(&self) -> bool {
        false
    }
}

/// The unit tests' pseudo-random generator (xorshift64): advances `state` and returns it. One
/// generator, so every test's random inputs are reproducible from its seed.
#[cfg(test)]
pub(crate) fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `len` symbols drawn from `alphabet` with [`xorshift`]: the unit tests' random words.
#[cfg(test)]
pub(crate) fn random_word<T: Copy>(state: &mut u64, alphabet: &[T], len: usize) -> Vec<T> {
    (0..len).map(|_| alphabet[(xorshift(state) % alphabet.len() as u64) as usize]).collect()
}
