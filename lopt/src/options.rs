//! Per-call settings of an encode: whether to add the post-processor's special tokens, and the
//! truncation and padding to apply.
//!
//! A `tokenizer.json` carries its own truncation and padding ([`crate::Tokenizer::options`]);
//! callers such as transformers change them on every call. Passing them per call
//! ([`crate::Tokenizer::encode_with`]) changes nothing in the tokenizer, so one tokenizer serves
//! threads with different settings at once and no setting ever forces a rebuild.
//!
//! Invariant: the settings mean exactly what they mean to HF `tokenizers` when set with
//! `with_truncation` / `with_padding` on a tokenizer loaded from the same file.

use tokenizers::{PaddingParams, TruncationParams};

/// How to encode: special tokens, truncation and padding, as HF `tokenizers` understands them.
///
/// ```
/// use lopt::hf::{PaddingParams, TruncationParams};
/// let options = lopt::EncodeOptions::new()
///     .truncation(Some(TruncationParams { max_length: 512, ..Default::default() }))
///     .padding(Some(PaddingParams::default()));
/// assert!(options.add_special_tokens_enabled());
/// ```
#[derive(Clone, Debug)]
pub struct EncodeOptions {
    add_special_tokens: bool,
    truncation: Option<TruncationParams>,
    padding: Option<PaddingParams>,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl EncodeOptions {
    /// Special tokens added, no truncation, no padding.
    pub fn new() -> Self {
        EncodeOptions { add_special_tokens: true, truncation: None, padding: None }
    }

    /// Whether the post-processor adds its special tokens (e.g. `<bos>`, `[CLS]`).
    pub fn add_special_tokens(mut self, add: bool) -> Self {
        self.add_special_tokens = add;
        self
    }

    /// Truncation, or none.
    pub fn truncation(mut self, truncation: Option<TruncationParams>) -> Self {
        self.truncation = truncation;
        self
    }

    /// Padding, or none. `BatchLongest` pads the encodings of one `encode_batch_with` call to the
    /// longest of them, as HF does.
    pub fn padding(mut self, padding: Option<PaddingParams>) -> Self {
        self.padding = padding;
        self
    }

    /// Whether special tokens are added.
    pub fn add_special_tokens_enabled(&self) -> bool {
        self.add_special_tokens
    }

    /// The truncation, if any.
    pub fn truncation_params(&self) -> Option<&TruncationParams> {
        self.truncation.as_ref()
    }

    /// The padding, if any.
    pub fn padding_params(&self) -> Option<&PaddingParams> {
        self.padding.as_ref()
    }

    pub(crate) fn settings(&self) -> Settings<'_> {
        Settings {
            add_special_tokens: self.add_special_tokens,
            truncation: self.truncation.as_ref(),
            padding: self.padding.as_ref(),
        }
    }
}

/// [`EncodeOptions`] borrowed, so that `encode` with the tokenizer's own settings copies nothing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings<'a> {
    pub(crate) add_special_tokens: bool,
    pub(crate) truncation: Option<&'a TruncationParams>,
    pub(crate) padding: Option<&'a PaddingParams>,
}

/// When the byte-level BPE engine builds its seeded pre-token cache (the merge result of every
/// vocabulary entry of up to 15 bytes, shared by all threads). The tokens are the same in every
/// mode: a word missing from the seed is merged from scratch. The byte-level and
/// SentencePiece-style engines build their long-word search at the same time; other engines ignore it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SeedCache {
    /// On a background thread started at load: loading does not wait for it, encodes run
    /// unseeded until it is there, and an encode that arrives meanwhile goes ahead of it (the
    /// seed's merges run on the pool in slices of about a millisecond, the rest at the lowest
    /// thread priority where the system has one).
    #[default]
    Background,
    /// Before loading returns (a warmed-up server; benchmarks that must not time the build).
    Sync,
    /// Never (measurements of the unseeded engine; the least memory).
    Off,
}

impl std::fmt::Display for SeedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SeedCache::Background => "background",
            SeedCache::Sync => "sync",
            SeedCache::Off => "off",
        })
    }
}
