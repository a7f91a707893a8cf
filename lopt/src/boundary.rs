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
//! A tokenizer with a component whose locality is not argued here gets no rule
//! ([`Support::Sequential`]) and is encoded in one piece: still exact, just not parallel.
//! `docs/correctness.md` gives the argument for every check.

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

/// The cut rule of one tokenizer: see the module documentation.
#[derive(Debug)]
pub(crate) struct CutRule {
    normalizer: Normalizer,
    stages: Vec<Stage>,
    added: Option<AddedGuard>,
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
    /// Derives the cut rule from a parsed `tokenizer.json`, or says why there is none.
    pub(crate) fn new(json: &Value) -> Result<CutRule, String> {
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
        let normalizer = normalizer(&json["normalizer"])?;
        let mut stages = Vec::new();
        pre_tokenizer(&json["pre_tokenizer"], &json["normalizer"], &mut stages)?;
        if !stages.iter().any(|s| *s != Stage::Transparent) {
            return Err("the pre-tokenizer never splits the text".into());
        }
        let added = added_guard(&json["added_tokens"], normalizer_is_identity(&json["normalizer"]))?;
        Ok(CutRule { normalizer, stages, added })
    }

    /// Whether byte position `p` of `text` is a safe cut (see the module documentation).
    /// `p` must be a char boundary strictly inside `text`.
    pub(crate) fn is_safe(&self, text: &str, p: usize) -> bool {
        let (Some(prev), Some(next)) = (text[..p].chars().next_back(), text[p..].chars().next()) else {
            return false;
        };
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

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(json: &str) -> CutRule {
        CutRule::new(&serde_json::from_str(json).unwrap()).unwrap()
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
        assert!(CutRule::new(&json).is_err());
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
        let rule = CutRule::new(&json).unwrap();
        // Digit runs are never cut inside; a digit next to a letter is a digit-stage split.
        assert_eq!(cuts(&rule, "a123b"), vec![1, 4]);
        assert_eq!(cuts(&rule, "中文，好"), vec![6, 9]);
    }
}
