//! Safe cut points: which byte positions of a text may separate two independently tokenized
//! segments without changing a single token.
//!
//! A position `p` is a *safe cut* when, for every text `T` whose characters around `p` are the
//! ones examined here, `F(T) = F(T[..p]) ++ F(T[p..])` (offsets and word ids shifted), where `F` is
//! the tokenizer before post-processing. The rule looks only at the characters right before and at
//! `p` (plus the whitespace run there when an added token strips whitespace), so it never depends
//! on where chunks start or end: it composes, and any set of safe cuts partitions a text exactly.
//!
//! [`CutRule::new`] derives the rule from the `tokenizer.json` components, one check per stage:
//!
//! 1. added tokens: no occurrence of any added token touches the characters next to `p`;
//! 2. normalizer: local at `p` (it maps the text before and after `p` independently);
//! 3. pre-tokenizer: each stage is *transparent* at `p` (it neither joins nor splits pieces
//!    across `p`) until one stage *splits* at `p` (every piece ends or starts at `p`, whatever the
//!    context); later stages work per piece and cannot undo that;
//! 4. model: works per piece (BPE without dropout, WordPiece, WordLevel, Unigram).
//!
//! SentencePiece-style tokenizers (Gemma, Llama 2) have no pre-tokenizer that splits: BPE sees
//! each whole normalized piece between added tokens. For them the cut comes from the vocabulary
//! ([`PieceRule`]): a merge can only join two symbols when some merge `(a, b)` has `a` ending with
//! the character before the junction and `b` starting with the one after it, so where no merge
//! has that pair of characters at its junction, BPE on the whole piece is BPE on the two sides.
//! The normalizer must then be a per-character map plus a prefix ([`CharMap`]: `Replace` of one
//! character, `Prepend`); a prefix makes every segment after the first a *continuation* (encoded
//! without the prefix, [`CutRule::needs_continuation`]), and every cut falls inside one pre-token
//! ([`CutRule::cuts_inside_words`]).
//!
//! A tokenizer with a component whose locality is not argued here gets no rule
//! ([`Support::Sequential`]) and is encoded in one piece: still exact, just not parallel.
//! `docs/correctness.md` gives the argument for every check.

use std::collections::HashSet;

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

use crate::doc::{Doc, Merge, TokenIds};
use crate::engine::bpe::table::U64Map;

/// The cut rule of one tokenizer: see the module documentation.
#[derive(Debug)]
pub(crate) struct CutRule {
    normalizer: Normalizer,
    stages: Vec<Stage>,
    added: Option<AddedGuard>,
    /// BPE over whole normalized pieces: the cuts come from the merges (replaces `stages`).
    pieces: Option<PieceRule>,
}

/// How the normalizer treats the character at a cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Normalizer {
    /// No normalizer, or one that maps every character on its own (lowercase, strip accents).
    PerChar,
    /// Unicode composition or decomposition (NFC, NFD, NFKC, NFKD, and BertNormalizer, whose
    /// accent stripping decomposes): local before a character that is a starter and never
    /// composes with what precedes it.
    Unicode,
}

/// A pre-tokenizer stage, by how it behaves around a cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// One of the GPT-family split regexes (GPT-2, cl100k/Llama-3, Qwen2, o200k, DeepSeek-V3's
    /// main pattern), isolated: splits after a letter, digit or CJK ideograph when ASCII
    /// whitespace or punctuation other than `'`, or CJK punctuation, follows.
    GptRegex,
    /// `\p{N}{1,3}` isolated (DeepSeek-V3): splits next to a digit, transparent elsewhere,
    /// unsafe inside a digit run.
    Digits,
    /// `[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+` isolated (DeepSeek-V3): splits next to such a
    /// character, transparent elsewhere, unsafe inside a run.
    CjkRun,
    /// BertPreTokenizer: splits at whitespace and punctuation, and at CJK ideographs when the
    /// Bert normalizer's `handle_chinese_chars` surrounds them with spaces (`cjk`).
    Bert { cjk: bool },
    /// WhitespaceSplit and Whitespace (`\w+|[^\w\s]+`): split at whitespace.
    Whitespace,
    /// ByteLevel without its regex: maps bytes inside each piece, never splits.
    Transparent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Split,
    Transparent,
    Unsafe,
}

/// Finds added-token occurrences near a cut.
#[derive(Debug)]
struct AddedGuard {
    automaton: AhoCorasick,
    /// Longest added token, in bytes: how far an occurrence touching the window can reach.
    longest: usize,
    /// Some token strips whitespace (lstrip/rstrip), so the guarded window grows over the
    /// whitespace run at the cut.
    strips: bool,
}

/// The split regexes whose behaviour at a cut is argued in `docs/correctness.md`.
const GPT_PATTERNS: &[&str] = &[
    // cl100k_base / Llama-3
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    // Qwen2 / Qwen3 (single digits)
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    // o200k_base / o200k_harmony (GPT-4o, GPT-OSS)
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    // DeepSeek-V3, third stage
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    // GPT-2 (also ByteLevel's built-in regex)
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
];

const DIGITS_PATTERN: &str = r"\p{N}{1,3}";
const CJK_RUN_PATTERN: &str = "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+";

impl CutRule {
    /// [`Self::new`] of a file parsed into a `Value` (tests).
    #[cfg(test)]
    pub(crate) fn from_json(json: &Value) -> Result<CutRule, String> {
        Self::new(&Doc::from_value(json.clone()))
    }

    /// Derives the cut rule from a parsed `tokenizer.json`, or says why there is none.
    pub(crate) fn new(doc: &Doc<'_>) -> Result<CutRule, String> {
        let json = &doc.json;
        let model = &json["model"];
        match model["type"].as_str() {
            Some("BPE") => {
                if model["dropout"].as_f64().is_some_and(|d| d > 0.0) {
                    return Err("BPE dropout is random".into());
                }
            }
            Some("WordPiece" | "WordLevel" | "Unigram") => {}
            other => return Err(format!("model {} is not known to work per pre-token", other.unwrap_or("?"))),
        }
        if let Some(pieces) = PieceRule::new(doc)? {
            let added = added_guard(&json["added_tokens"], normalizer_is_identity(&json["normalizer"]))?;
            return Ok(CutRule { normalizer: Normalizer::PerChar, stages: Vec::new(), added, pieces: Some(pieces) });
        }
        let normalizer = normalizer(&json["normalizer"])?;
        let mut stages = Vec::new();
        pre_tokenizer(&json["pre_tokenizer"], &json["normalizer"], &mut stages)?;
        if normalizer == Normalizer::Unicode && stages.iter().any(|s| matches!(s, Stage::Digits | Stage::CjkRun)) {
            // Their "transparent" verdict reads `prev` raw, and a compatibility character before
            // `p` may normalize into the class (① to 1, half-width to full-width katakana).
            return Err("digit and kana runs are argued for unnormalized text only".into());
        }
        if !stages.iter().any(|s| *s != Stage::Transparent) {
            return Err("the pre-tokenizer never splits the text".into());
        }
        let added = added_guard(&json["added_tokens"], normalizer_is_identity(&json["normalizer"]))?;
        Ok(CutRule { normalizer, stages, added, pieces: None })
    }

    /// The rule for positions inside one piece between the raw added-token matches, for an
    /// engine that has no added token matched on normalized text (HF's second pass), where it
    /// looks for cuts around the ranges its normalizer changes: the same rule without the
    /// added-token check (stage 1). That check keeps a cut off an occurrence that the scan of the
    /// raw text could match; inside such a piece that scan is done (its matches are the piece's
    /// ends), and without a second pass nothing after it reads the added tokens: the piece goes
    /// to the normalizer, the pre-tokenizer and the model alone (docs/correctness.md section 4).
    /// On Chinese text under NFKC the check ran an automaton over a window at every candidate cut.
    pub(crate) fn within_piece(mut self) -> CutRule {
        self.added = None;
        self
    }

    /// Whether segments after the first must be encoded as continuations: without the prefix the
    /// normalizer puts at the start of every piece (`Prepend`), since a cut is never a piece start.
    pub(crate) fn needs_continuation(&self) -> bool {
        self.pieces.as_ref().is_some_and(|p| p.map.prefix.is_some())
    }

    /// Whether every cut falls inside one pre-token (vocabulary-derived cuts): the pre-token
    /// before a cut continues in the next segment and is counted once.
    pub(crate) fn cuts_inside_words(&self) -> bool {
        self.pieces.is_some()
    }

    /// Whether byte position `p` of `text` is a safe cut (see the module documentation).
    /// `p` must be a char boundary strictly inside `text`.
    pub(crate) fn is_safe(&self, text: &str, p: usize) -> bool {
        let (Some(prev), Some(next)) = (text[..p].chars().next_back(), text[p..].chars().next()) else {
            return false;
        };
        if let Some(pieces) = &self.pieces {
            return pieces.separates(prev, next) && self.added.as_ref().is_none_or(|g| g.is_clear(text, p));
        }
        if !self.normalizer_is_local(next) {
            return false;
        }
        for stage in &self.stages {
            match stage.verdict(prev, next) {
                Verdict::Split => return self.added.as_ref().is_none_or(|g| g.is_clear(text, p)),
                Verdict::Transparent => continue,
                Verdict::Unsafe => return false,
            }
        }
        false
    }

    /// The first safe cut of `text` at or after `p` (a char boundary, `p > 0`), or `text.len()`
    /// when there is none: the first position from `p` on where [`Self::is_safe`] holds. Where the
    /// first stage that is not transparent is a GPT regex, a position before an ASCII letter or
    /// digit, or before a character whose UTF-8 lead byte is none of the break characters' (`E2`,
    /// `E3`, `EF`: [`is_cjk_punctuation`]), is passed over without the check: no break character
    /// follows there, so that stage says Unsafe and so does `is_safe`. On Chinese text under NFKC
    /// the search after each full-width comma crosses the whole clause that follows it.
    pub(crate) fn next_safe(&self, text: &str, mut p: usize) -> usize {
        let bytes = text.as_bytes();
        let skips =
            self.pieces.is_none() && self.stages.iter().find(|&&s| s != Stage::Transparent) == Some(&Stage::GptRegex);
        while p < bytes.len() {
            let b = bytes[p];
            if skips && (b.is_ascii_alphanumeric() || matches!(b, 0xc0..=0xe1 | 0xe4..=0xee | 0xf0..=0xf4)) {
                p += match b {
                    0..=0x7f => 1,
                    0xc0..=0xdf => 2,
                    0xe0..=0xef => 3,
                    _ => 4,
                };
                continue;
            }
            if self.is_safe(text, p) {
                return p;
            }
            p = ceil_char_boundary(text, p + 1);
        }
        bytes.len()
    }

    fn normalizer_is_local(&self, next: char) -> bool {
        match self.normalizer {
            Normalizer::PerChar => true,
            // ASCII, CJK ideographs and the listed CJK punctuation are starters with
            // NFC_Quick_Check=Yes and no decomposition: nothing before them composes with them.
            Normalizer::Unicode => next.is_ascii() || is_cjk_ideograph(next) || is_cjk_punctuation(next),
        }
    }
}

impl Stage {
    fn verdict(self, prev: char, next: char) -> Verdict {
        match self {
            Stage::GptRegex => {
                if is_word_char(prev) && is_break_char(next) {
                    Verdict::Split
                } else {
                    Verdict::Unsafe
                }
            }
            Stage::Digits => edge_of_class(prev.is_numeric(), next.is_numeric()),
            Stage::CjkRun => edge_of_class(is_deepseek_cjk(prev), is_deepseek_cjk(next)),
            Stage::Bert { cjk } => {
                let splits = |c: char| is_ascii_space(c) || c.is_ascii_punctuation() || (cjk && is_cjk_ideograph(c));
                if splits(prev) || splits(next) {
                    Verdict::Split
                } else {
                    Verdict::Unsafe
                }
            }
            Stage::Whitespace => {
                if is_ascii_space(prev) || is_ascii_space(next) {
                    Verdict::Split
                } else {
                    Verdict::Unsafe
                }
            }
            Stage::Transparent => Verdict::Transparent,
        }
    }
}

/// A stage that isolates runs of one character class: a run boundary at `p` splits, a run
/// straddling `p` is unsafe (its grouping may depend on where it starts), and with no run
/// member next to `p` the stage cannot see `p` at all.
fn edge_of_class(prev_in: bool, next_in: bool) -> Verdict {
    match (prev_in, next_in) {
        (true, true) => Verdict::Unsafe,
        (false, false) => Verdict::Transparent,
        _ => Verdict::Split,
    }
}

/// Characters after which no GPT-family alternative can continue into a [`is_break_char`].
fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || is_cjk_ideograph(c)
}

/// Characters that no GPT-family alternative consumes right after a letter or digit.
/// `'` is excluded: o200k attaches contractions (`'s`) to the preceding word.
fn is_break_char(c: char) -> bool {
    (c.is_ascii_punctuation() && c != '\'') || is_ascii_space(c) || is_cjk_punctuation(c)
}

fn is_ascii_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// CJK Unified Ideographs and Extension A: letters (`Lo`), starters, no decomposition.
fn is_cjk_ideograph(c: char) -> bool {
    matches!(c, '\u{4e00}'..='\u{9fff}' | '\u{3400}'..='\u{4dbf}')
}

fn is_deepseek_cjk(c: char) -> bool {
    matches!(c, '\u{4e00}'..='\u{9fa5}' | '\u{3040}'..='\u{309f}' | '\u{30a0}'..='\u{30ff}')
}

/// Common CJK punctuation (general category P*, no canonical decomposition, never composes).
fn is_cjk_punctuation(c: char) -> bool {
    matches!(
        c,
        '\u{3001}'
            | '\u{3002}'
            | '\u{300a}'
            | '\u{300b}'
            | '\u{300c}'
            | '\u{300d}'
            | '\u{300e}'
            | '\u{300f}'
            | '\u{3010}'
            | '\u{3011}'
            | '\u{ff01}'
            | '\u{ff08}'
            | '\u{ff09}'
            | '\u{ff0c}'
            | '\u{ff1a}'
            | '\u{ff1b}'
            | '\u{ff1f}'
            | '\u{201c}'
            | '\u{201d}'
            | '\u{2018}'
            | '\u{2019}'
    )
}

/// Whether a BertNormalizer in `json` pads CJK ideographs with spaces.
fn handles_chinese_chars(json: &Value) -> bool {
    match json["type"].as_str() {
        Some("BertNormalizer") => json["handle_chinese_chars"].as_bool() != Some(false),
        Some("Sequence") => json["normalizers"].as_array().is_some_and(|list| list.iter().any(handles_chinese_chars)),
        _ => false,
    }
}

fn normalizer_is_identity(json: &Value) -> bool {
    match json["type"].as_str() {
        None => json.is_null(),
        Some("Sequence") => json["normalizers"].as_array().is_some_and(|list| list.iter().all(normalizer_is_identity)),
        Some(_) => false,
    }
}

fn normalizer(json: &Value) -> Result<Normalizer, String> {
    if json.is_null() {
        return Ok(Normalizer::PerChar);
    }
    match json["type"].as_str() {
        Some("Lowercase" | "StripAccents") => Ok(Normalizer::PerChar),
        Some("NFC" | "NFD" | "NFKC" | "NFKD" | "BertNormalizer") => Ok(Normalizer::Unicode),
        Some("Sequence") => {
            let mut kind = Normalizer::PerChar;
            for item in json["normalizers"].as_array().into_iter().flatten() {
                if normalizer(item)? == Normalizer::Unicode {
                    kind = Normalizer::Unicode;
                }
            }
            Ok(kind)
        }
        other => Err(format!("normalizer {} is not known to be local", other.unwrap_or("?"))),
    }
}

fn pre_tokenizer(json: &Value, normalizer_json: &Value, stages: &mut Vec<Stage>) -> Result<(), String> {
    if json.is_null() {
        return Err("there is no pre-tokenizer, so the model sees the whole text".into());
    }
    match json["type"].as_str() {
        Some("Sequence") => {
            for item in json["pretokenizers"].as_array().into_iter().flatten() {
                pre_tokenizer(item, normalizer_json, stages)?;
            }
            Ok(())
        }
        Some("ByteLevel") => {
            // A prefix space is added to every segment: only the first chunk may get one.
            if json["add_prefix_space"].as_bool() == Some(true) {
                return Err("ByteLevel add_prefix_space adds a space at every chunk start".into());
            }
            stages.push(if json["use_regex"].as_bool() == Some(false) { Stage::Transparent } else { Stage::GptRegex });
            Ok(())
        }
        Some("Split") => {
            let pattern =
                json["pattern"]["Regex"].as_str().ok_or("Split by a literal string is not supported for cutting")?;
            if json["behavior"].as_str() != Some("Isolated") || json["invert"].as_bool() != Some(false) {
                return Err("only isolated, non-inverted Split is supported for cutting".into());
            }
            let stage = if GPT_PATTERNS.contains(&pattern) {
                Stage::GptRegex
            } else if pattern == DIGITS_PATTERN {
                Stage::Digits
            } else if pattern == CJK_RUN_PATTERN {
                Stage::CjkRun
            } else {
                return Err(format!("Split pattern {pattern:?} is not one whose cuts are argued"));
            };
            stages.push(stage);
            Ok(())
        }
        Some("BertPreTokenizer") => {
            stages.push(Stage::Bert { cjk: handles_chinese_chars(normalizer_json) });
            Ok(())
        }
        Some("WhitespaceSplit" | "Whitespace") => {
            stages.push(Stage::Whitespace);
            Ok(())
        }
        other => Err(format!("pre-tokenizer {} is not known to be local", other.unwrap_or("?"))),
    }
}

fn added_guard(json: &Value, identity_normalizer: bool) -> Result<Option<AddedGuard>, String> {
    let tokens = json.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut contents = Vec::with_capacity(tokens.len());
    let mut strips = false;
    for token in tokens {
        let content = token["content"].as_str().ok_or("an added token has no content")?;
        if content.is_empty() {
            continue;
        }
        if token["normalized"].as_bool() == Some(true) && !identity_normalizer {
            // Matched against normalized text, which may differ from the raw text scanned here.
            return Err(format!("added token {content:?} is matched after normalization"));
        }
        strips |= token["lstrip"].as_bool() == Some(true) || token["rstrip"].as_bool() == Some(true);
        contents.push(content);
    }
    if contents.is_empty() {
        return Ok(None);
    }
    let longest = contents.iter().map(|c| c.len()).max().unwrap_or(0);
    let automaton = AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        .build(&contents)
        .map_err(|e| format!("added tokens: {e}"))?;
    Ok(Some(AddedGuard { automaton, longest, strips }))
}

impl AddedGuard {
    /// True when no added-token occurrence overlaps the characters just before and at `p`
    /// (widened over the whitespace run at `p` when tokens strip whitespace).
    fn is_clear(&self, text: &str, p: usize) -> bool {
        let mut lo = p;
        let mut hi = p;
        if self.strips {
            lo -= text[..lo].chars().rev().take_while(|c| c.is_whitespace()).map(char::len_utf8).sum::<usize>();
            hi += text[hi..].chars().take_while(|c| c.is_whitespace()).map(char::len_utf8).sum::<usize>();
        }
        lo -= text[..lo].chars().next_back().map_or(0, char::len_utf8);
        hi += text[hi..].chars().next().map_or(0, char::len_utf8);
        // Any occurrence overlapping [lo, hi) lies inside this wider window.
        let from = floor_char_boundary(text, lo.saturating_sub(self.longest));
        let to = ceil_char_boundary(text, (hi + self.longest).min(text.len()));
        self.automaton.find_overlapping_iter(&text[from..to]).all(|m| m.end() + from <= lo || m.start() + from >= hi)
    }
}

/// The char boundary at or before byte `i` of `text`.
pub(crate) fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The char boundary at or after byte `i` of `text`.
pub(crate) fn ceil_char_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The vocabulary-derived rule for BPE over whole normalized pieces (no splitting
/// pre-tokenizer): see the module documentation and `docs/correctness.md`, section 3.6.
#[derive(Debug)]
pub(crate) struct PieceRule {
    pub(crate) map: CharMap,
    pub(crate) symbols: Symbols,
    pub(crate) junctions: Junctions,
}

impl PieceRule {
    /// The rule, when the tokenizer has this shape: a BPE model without dropout, a normalizer
    /// that is a [`CharMap`], and a pre-tokenizer that is absent or never fires after it.
    /// `Ok(None)` when the shape does not match (other rules may apply).
    ///
    /// # Errors
    /// The reason, when the shape matches but the model's unknown characters could join across a
    /// cut (byte fallback without all 256 byte tokens, or unknown characters that are dropped).
    pub(crate) fn new(doc: &Doc<'_>) -> Result<Option<PieceRule>, String> {
        let json = &doc.json;
        let model = &json["model"];
        if model["type"].as_str() != Some("BPE") || model["dropout"].as_f64().is_some_and(|d| d > 0.0) {
            return Ok(None);
        }
        let Ok(map) = CharMap::from_json(&json["normalizer"]) else { return Ok(None) };
        if !pre_tokenizer_never_fires(&json["pre_tokenizer"], &map) {
            return Ok(None);
        }
        let symbols = Symbols::from_model(model, doc.vocab.as_ref())?;
        let junctions = Junctions::from_merges(doc.merges.as_deref())?;
        Ok(Some(PieceRule { map, symbols, junctions }))
    }

    /// Whether no merge can join the symbols of `prev` and `next` (raw characters, adjacent).
    pub(crate) fn separates(&self, prev: char, next: char) -> bool {
        let last = self.map.last_char(prev);
        let first = self.map.first_char(next);
        let (Some(left), Some(right)) = (self.symbols.right_edge(last), self.symbols.left_edge(first)) else {
            return false;
        };
        if self.symbols.fuse_unk && self.symbols.is_unk(last) && self.symbols.is_unk(first) {
            return false;
        }
        !self.junctions.joins(left, right)
    }
}

/// Whether a pre-tokenizer leaves every normalized piece whole: none, or `Split` by a literal
/// that contains a character the normalizer removes everywhere (Gemma's `Split(" ")` after
/// `Replace(" " -> "▁")`), so the pattern never matches.
fn pre_tokenizer_never_fires(json: &Value, map: &CharMap) -> bool {
    match json["type"].as_str() {
        None => json.is_null(),
        Some("Sequence") => {
            json["pretokenizers"].as_array().is_some_and(|list| list.iter().all(|p| pre_tokenizer_never_fires(p, map)))
        }
        Some("Split") => {
            json["invert"].as_bool() != Some(true)
                && json["pattern"]["String"].as_str().is_some_and(|s| s.chars().any(|c| map.removes(c)))
        }
        Some(_) => false,
    }
}

/// A normalizer that replaces single characters by non-empty strings and may prepend a string to
/// every non-empty piece: `Replace` with a one-character literal pattern, `Prepend`, and
/// `Sequence`s of them (composed into one map). HF aligns every byte a character turns into to
/// that character, and the prefix to the piece's first character.
#[derive(Clone, Debug, Default)]
pub(crate) struct CharMap {
    /// Replaced characters and what each becomes (one or two entries in practice: a list beats
    /// hashing on the per-character path).
    replace: Vec<(char, String)>,
    /// What `Prepend` puts before every non-empty normalized piece.
    pub(crate) prefix: Option<String>,
}

impl CharMap {
    /// # Errors
    /// When the normalizer is anything else.
    pub(crate) fn from_json(json: &Value) -> Result<CharMap, String> {
        let mut map = CharMap::default();
        map.add(json)?;
        Ok(map)
    }

    fn add(&mut self, json: &Value) -> Result<(), String> {
        match json["type"].as_str() {
            None if json.is_null() => Ok(()),
            Some("Sequence") => {
                for item in json["normalizers"].as_array().ok_or("normalizer Sequence without a list")? {
                    self.add(item)?;
                }
                Ok(())
            }
            Some("Replace") => {
                let pattern = json["pattern"]["String"].as_str().ok_or("Replace by a regex is not a character map")?;
                let content = json["content"].as_str().ok_or("Replace without content")?;
                let mut chars = pattern.chars();
                let (Some(from), None) = (chars.next(), chars.next()) else {
                    return Err("Replace of more than one character is not a character map".into());
                };
                if content.is_empty() {
                    return Err("Replace by nothing can empty a piece".into());
                }
                // Later replacements apply to what earlier ones produced.
                let from_str = from.to_string();
                for value in self.replace.iter_mut().map(|(_, v)| v).chain(self.prefix.iter_mut()) {
                    *value = value.replace(&from_str, content);
                }
                if !self.replace.iter().any(|(c, _)| *c == from) {
                    self.replace.push((from, content.to_string()));
                }
                Ok(())
            }
            Some("Prepend") => {
                let prepend = json["prepend"].as_str().ok_or("Prepend without a string")?;
                if !prepend.is_empty() {
                    self.prefix = Some(format!("{prepend}{}", self.prefix.take().unwrap_or_default()));
                }
                Ok(())
            }
            other => Err(format!("normalizer {} is not a character map", other.unwrap_or("?"))),
        }
    }

    /// What `c` becomes (`None`: itself).
    #[inline]
    pub(crate) fn map(&self, c: char) -> Option<&str> {
        self.replace.iter().find(|(from, _)| *from == c).map(|(_, to)| to.as_str())
    }

    /// The replaced characters and what each becomes.
    pub(crate) fn replacements(&self) -> impl Iterator<Item = (char, &str)> + '_ {
        self.replace.iter().map(|(c, s)| (*c, s.as_str()))
    }

    fn last_char(&self, c: char) -> char {
        self.map(c).and_then(|s| s.chars().next_back()).unwrap_or(c)
    }

    fn first_char(&self, c: char) -> char {
        self.map(c).and_then(|s| s.chars().next()).unwrap_or(c)
    }

    /// Whether `c` never occurs in normalized text: it is replaced, and no replacement or
    /// prefix contains it.
    fn removes(&self, c: char) -> bool {
        self.map(c).is_some_and(|s| !s.contains(c))
            && self.replace.iter().map(|(_, s)| s).chain(self.prefix.iter()).all(|s| !s.contains(c))
    }
}

/// How BPE starts a normalized character: HF's `merge_word` looks the character up; when the
/// vocabulary lacks it, byte fallback makes one `<0xXX>` token per byte, else it becomes the
/// unknown token (fused with unknown neighbours under `fuse_unk`), else it is dropped.
#[derive(Debug)]
pub(crate) struct Symbols {
    known: HashSet<char>,
    /// Byte fallback is on and all 256 byte tokens exist: no character is ever unknown.
    byte_fallback: bool,
    unk: Option<String>,
    fuse_unk: bool,
}

impl Symbols {
    fn from_model(model: &Value, vocab: Option<&TokenIds<'_>>) -> Result<Symbols, String> {
        for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
            if model[key].as_str().is_some_and(|s| !s.is_empty()) {
                return Err(format!("BPE {key} changes the symbols at a cut"));
            }
        }
        if model["ignore_merges"].as_bool() == Some(true) {
            return Err("BPE ignore_merges looks up whole pieces".into());
        }
        let vocab = vocab.ok_or("BPE vocab is not an object of u32 ids")?;
        let known = vocab
            .keys()
            .filter_map(|k| {
                let mut chars = k.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => Some(c),
                    _ => None,
                }
            })
            .collect();
        let fallback = model["byte_fallback"].as_bool() == Some(true);
        let all_bytes = (0..=255u8).all(|b| vocab.contains_key(format!("<0x{b:02X}>").as_str()));
        if fallback && !all_bytes {
            return Err("byte fallback without all 256 byte tokens".into());
        }
        Ok(Symbols {
            known,
            byte_fallback: fallback,
            unk: model["unk_token"].as_str().filter(|u| vocab.contains_key(*u)).map(str::to_string),
            fuse_unk: model["fuse_unk"].as_bool() == Some(true),
        })
    }

    fn is_unk(&self, c: char) -> bool {
        !self.byte_fallback && !self.known.contains(&c)
    }

    /// The last character of the string of the symbol that ends with normalized char `c`;
    /// `None` when `c` is dropped.
    fn right_edge(&self, c: char) -> Option<char> {
        if self.known.contains(&c) {
            Some(c)
        } else if self.byte_fallback {
            Some('>')
        } else {
            self.unk.as_deref().and_then(|u| u.chars().next_back())
        }
    }

    /// The first character of the string of the symbol that starts with normalized char `c`.
    fn left_edge(&self, c: char) -> Option<char> {
        if self.known.contains(&c) {
            Some(c)
        } else if self.byte_fallback {
            Some('<')
        } else {
            self.unk.as_deref().and_then(|u| u.chars().next())
        }
    }
}

/// The character pairs at merge junctions: for every merge `(a, b)`, the last character of `a`
/// and the first of `b`. Two adjacent symbols can only ever merge (directly or inside larger
/// symbols) across a junction whose pair is here.
pub(crate) struct Junctions {
    /// Pairs of ASCII characters, one bit each.
    ascii: Box<[u128; 128]>,
    /// All pairs, keyed `left << 32 | right`.
    all: U64Map,
}

impl std::fmt::Debug for Junctions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Junctions").field("pairs", &self.all.len()).finish()
    }
}

impl Junctions {
    /// # Errors
    /// When a merge entry is malformed.
    pub(crate) fn from_merges(merges: Option<&[Merge<'_>]>) -> Result<Junctions, String> {
        let list = merges.ok_or("BPE merges are not a list")?;
        let mut junctions = Junctions { ascii: Box::new([0; 128]), all: U64Map::with_capacity(list.len() / 4) };
        for merge in list {
            let (a, b) = merge.sides()?;
            let (Some(left), Some(right)) = (a.chars().next_back(), b.chars().next()) else {
                return Err("a merge has an empty side".into());
            };
            if left.is_ascii() && right.is_ascii() {
                junctions.ascii[left as usize] |= 1 << (right as u32);
            }
            junctions.all.insert(u64::from(left) << 32 | u64::from(right), 1);
        }
        Ok(junctions)
    }

    /// Whether some merge joins a symbol ending with `left` to one starting with `right`.
    #[inline(always)]
    pub(crate) fn joins(&self, left: char, right: char) -> bool {
        if left.is_ascii() && right.is_ascii() {
            return self.ascii[left as usize] >> (right as u32) & 1 != 0;
        }
        self.all.get(u64::from(left) << 32 | u64::from(right)).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(json: &str) -> CutRule {
        CutRule::from_json(&serde_json::from_str(json).unwrap()).unwrap()
    }

    fn gpt() -> CutRule {
        rule(&format!(
            r#"{{"model":{{"type":"BPE"}},"normalizer":null,
               "pre_tokenizer":{{"type":"Split","pattern":{{"Regex":{}}},"behavior":"Isolated","invert":false}},
               "added_tokens":[{{"content":"<|x|>","normalized":false}}]}}"#,
            serde_json::to_string(GPT_PATTERNS[0]).unwrap()
        ))
    }

    fn cuts(rule: &CutRule, text: &str) -> Vec<usize> {
        (1..text.len()).filter(|&p| text.is_char_boundary(p) && rule.is_safe(text, p)).collect()
    }

    /// `next_safe` finds what checking every position finds: every rule of the fixtures that
    /// have one (and the toy GPT rule with an added token), on random text of CJK ideographs,
    /// break characters of every lead byte, ASCII and other characters.
    #[test]
    fn next_safe_is_the_first_safe_position() {
        let mut rules = vec![gpt()];
        for name in ["claude", "qwen3", "deepseek_v3", "gpt2", "gpt4o", "llama3_1", "bert-base-cased", "gemma3"] {
            let Some(path) = crate::testdata::tokenizer_path(name) else {
                eprintln!("NOTICE: {name} not found; skipped");
                continue;
            };
            let Ok(bytes) = std::fs::read(path) else { continue };
            if let Ok(rule) = CutRule::new(&Doc::parse(&bytes).unwrap()) {
                rules.push(rule);
            }
        }
        let pool: Vec<char> =
            "中文字，。、：；！？（）「」“”‘’ab1 ,.'\n\u{3000}\u{ff21}\u{2026}é\u{301}한ｱ<|x|>".chars().collect();
        let mut state = 0x5851_f42d_4c95_7f2du64;
        for rule in &rules {
            for _ in 0..3000 {
                crate::engine::xorshift(&mut state);
                let len = 1 + (state % 24) as usize;
                let text: String = (0..len)
                    .map(|k| pool[((state >> (k % 13 * 4)).wrapping_add(k as u64 * 7) % pool.len() as u64) as usize])
                    .collect();
                for p in (1..text.len()).filter(|&p| text.is_char_boundary(p)) {
                    let expected = (p..text.len())
                        .find(|&q| text.is_char_boundary(q) && rule.is_safe(&text, q))
                        .unwrap_or(text.len());
                    assert_eq!(rule.next_safe(&text, p), expected, "{text:?} from {p}");
                }
            }
        }
    }

    #[test]
    fn gpt_cuts_between_words_and_spaces_only() {
        assert_eq!(cuts(&gpt(), "ab cd, ef"), vec![2, 5]);
        assert_eq!(cuts(&gpt(), "it's"), Vec::<usize>::new());
        assert_eq!(cuts(&gpt(), "a  \n b"), vec![1]);
        assert_eq!(cuts(&gpt(), "12345 6"), vec![5]);
    }

    #[test]
    fn added_tokens_block_nearby_cuts() {
        // Conservative: an occurrence merely touching the cut blocks it too.
        assert_eq!(cuts(&gpt(), "ab<|x|> cd e"), vec![10]);
        // No complete occurrence: nothing to protect.
        assert_eq!(cuts(&gpt(), "a<|x|"), vec![1, 4]);
    }

    #[test]
    fn unknown_components_fall_back() {
        let json: Value = serde_json::from_str(
            r#"{"model":{"type":"BPE"},"normalizer":{"type":"Replace"},"pre_tokenizer":{"type":"Whitespace"}}"#,
        )
        .unwrap();
        assert!(CutRule::from_json(&json).is_err());
    }

    /// The characters the rule reads (`prev` and `next` of a cut it accepts) under every Unicode
    /// form, with the normalizer crate HF uses: each normalizes to one character of the same
    /// classes, a starter that no composition joins to what precedes it, so normalization is
    /// local before it and the verdicts read on raw text hold on normalized text
    /// (`docs/correctness.md` 3.2).
    #[test]
    fn rule_alphabet_is_stable_under_every_form() {
        use unicode_normalization_alignments::char::{canonical_combining_class, decompose_canonical};
        use unicode_normalization_alignments::UnicodeNormalization;
        // Second characters of canonical decompositions: the only ones that compose leftwards.
        let mut second = std::collections::HashSet::new();
        for c in (0..0x110000u32).filter_map(char::from_u32) {
            let mut parts = Vec::new();
            decompose_canonical(c, |d| parts.push(d));
            if parts.len() >= 2 {
                second.insert(parts[parts.len() - 1]);
            }
        }
        type Normalize = fn(&str) -> String;
        let forms: [(&str, Normalize); 4] = [
            ("NFC", |s| s.nfc().map(|(c, _)| c).collect()),
            ("NFD", |s| s.nfd().map(|(c, _)| c).collect()),
            ("NFKC", |s| s.nfkc().map(|(c, _)| c).collect()),
            ("NFKD", |s| s.nfkd().map(|(c, _)| c).collect()),
        ];
        let alphabet = (0..0x80u32)
            .chain(0x3400..0x4dc0)
            .chain(0x4e00..0xa000)
            .filter_map(char::from_u32)
            .chain((0x3000..0x10000u32).filter_map(char::from_u32).filter(|&c| is_cjk_punctuation(c)))
            .chain(['\u{2018}', '\u{2019}', '\u{201c}', '\u{201d}']);
        let before: Vec<&str> =
            vec!["e", "\u{1100}", "\u{ac00}", "\u{fb01}", "ｶ", "ㄱ", "\u{301}", "a\u{316}", "①", ""];
        for c in alphabet {
            for (name, normalize) in forms {
                let image: Vec<char> = normalize(&c.to_string()).chars().collect();
                let [d] = image[..] else { panic!("{name}({c:?}) = {image:?}") };
                assert_eq!(canonical_combining_class(d), 0, "{name} {c:?}");
                assert!(!second.contains(&d), "{name} {c:?}");
                assert_eq!(is_word_char(d), is_word_char(c), "{name} {c:?}");
                assert_eq!(is_break_char(d), is_break_char(c), "{name} {c:?}");
                assert_eq!(is_ascii_space(d), is_ascii_space(c), "{name} {c:?}");
                assert_eq!(is_cjk_ideograph(d), is_cjk_ideograph(c), "{name} {c:?}");
                assert!(!c.is_ascii_punctuation() || d.is_ascii_punctuation(), "{name} {c:?}");
                for x in &before {
                    let joined = format!("{x}{c}");
                    assert_eq!(normalize(&joined), format!("{}{d}", normalize(x)), "{name} {joined:?}");
                }
            }
        }
    }

    #[test]
    fn deepseek_stages_compose() {
        let json = serde_json::json!({
            "model": {"type": "BPE"},
            "normalizer": {"type": "Sequence", "normalizers": []},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": DIGITS_PATTERN}, "behavior": "Isolated", "invert": false},
                {"type": "Split", "pattern": {"Regex": CJK_RUN_PATTERN}, "behavior": "Isolated", "invert": false},
                {"type": "Split", "pattern": {"Regex": GPT_PATTERNS[3]}, "behavior": "Isolated", "invert": false},
                {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}
            ]}
        });
        let rule = CutRule::from_json(&json).unwrap();
        // Digit runs are never cut inside; a digit next to a letter is a digit-stage split.
        assert_eq!(cuts(&rule, "a123b"), vec![1, 4]);
        assert_eq!(cuts(&rule, "中文，好"), vec![6, 9]);
    }

    fn spm(normalizer: Value, pre_tokenizer: Value) -> CutRule {
        CutRule::from_json(&serde_json::json!({
            "model": {"type": "BPE", "byte_fallback": false, "unk_token": "<unk>", "fuse_unk": true,
                      "vocab": {"<unk>": 0, "a": 1, "b": 2, "▁": 3, "ab": 4, "▁a": 5, "c": 6},
                      "merges": ["a b", "▁ a"]},
            "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer,
            "added_tokens": [{"content": "<x>", "normalized": false}],
        }))
        .unwrap()
    }

    #[test]
    fn merges_decide_cuts_inside_pieces() {
        let replace = serde_json::json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"});
        let rule = spm(replace.clone(), Value::Null);
        assert!(rule.cuts_inside_words() && !rule.needs_continuation());
        // Only "ab" and "▁a" are merge junctions.
        assert_eq!(cuts(&rule, "ab a ba"), vec![2, 4, 5, 6]);
        // Unknown characters (no byte fallback) fuse with each other: never cut between two.
        assert_eq!(cuts(&rule, "zzcz"), vec![2, 3]);
        // Added tokens block the cuts next to them.
        assert_eq!(cuts(&rule, "c<x>c c"), vec![5, 6]);
        // Gemma's literal split on " " never fires after the Replace.
        let split = serde_json::json!({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false});
        assert_eq!(cuts(&spm(replace.clone(), split), "ab a ba"), vec![2, 4, 5, 6]);
        let prepend =
            serde_json::json!({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, replace]});
        assert!(spm(prepend, Value::Null).needs_continuation());
    }

    #[test]
    fn char_maps_compose_in_order() {
        let json = serde_json::json!({"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": " "},
            {"type": "Replace", "pattern": {"String": " "}, "content": "_"},
            {"type": "Replace", "pattern": {"String": "_"}, "content": "-"},
        ]});
        let map = CharMap::from_json(&json).unwrap();
        assert_eq!((map.map(' '), map.map('_'), map.prefix.as_deref()), (Some("-"), Some("-"), Some("-")));
        assert!(map.removes(' ') && map.removes('_') && !map.removes('-'));
        let regex = serde_json::json!({"type": "Replace", "pattern": {"Regex": " +"}, "content": "_"});
        assert!(CharMap::from_json(&regex).is_err());
    }
}
