//! Equivalent spellings of one pipeline: rewrites a parsed `tokenizer.json` into one canonical
//! spelling before the cut rule ([`crate::boundary`]) and the native engines read it, so that
//! every file spelling the same pipeline gets the same rule and the same engine, and the two
//! readers cannot disagree about what a spelling means.
//!
//! Invariant: each rewrite replaces a component by one that HF `tokenizers` runs identically (same
//! pieces, same offsets, same tokens) for every input; `docs/correctness.md` ("Accepted spellings")
//! argues each one and `lopt-tests` checks each against HF. The HF engine, the oracle and
//! post-processing keep reading the original file: only lopt's own readers see the rewrite.
//!
//! The rewrites:
//! * `Split(pattern, Isolated, invert: true)` → `invert: false`: `Isolated` keeps every match and
//!   every gap as a piece, whichever side the flag marks.
//! * `Split(pattern, Removed | MergedWithPrevious | MergedWithNext, invert)` → `Isolated` when
//!   `pattern` is one of the [`COVERING`] patterns and the behaviour keeps every match as its own
//!   piece (all of them except `Removed` without `invert`, which would drop the whole text).
//! * BPE `continuing_subword_prefix` / `end_of_word_suffix` of `""` → none: HF glues the empty
//!   string to sub-words, which changes nothing.

use serde_json::Value;

use crate::engine::bpe::{CL100K, GPT2, O200K, QWEN};

/// Split patterns whose matches tile every text: at every position some alternative matches at
/// least one character, whatever follows, so Oniguruma's `find_iter` never skips a character and
/// never matches the empty string. Argued per pattern in `docs/correctness.md`; the unit test
/// `covering_patterns_match_every_character` checks every code point with Oniguruma.
pub(crate) const COVERING: &[&str] = &[GPT2, CL100K, QWEN, O200K];

/// Rewrites `json` into the canonical spelling (see the module documentation) and returns one
/// line per rewrite applied, naming the component and the equivalence, for `lopt info`.
pub(crate) fn canonicalize(json: &mut Value) -> Vec<String> {
    let mut applied = Vec::new();
    pre_tokenizer(&mut json["pre_tokenizer"], &mut applied);
    model(&mut json["model"], &mut applied);
    applied
}

fn pre_tokenizer(json: &mut Value, applied: &mut Vec<String>) {
    match json["type"].as_str() {
        Some("Sequence") => {
            if let Some(items) = json["pretokenizers"].as_array_mut() {
                items.iter_mut().for_each(|item| pre_tokenizer(item, applied));
            }
        }
        Some("Split") => split(json, applied),
        _ => {}
    }
}

fn split(json: &mut Value, applied: &mut Vec<String>) {
    let (Some(behavior), Some(invert)) = (json["behavior"].as_str(), json["invert"].as_bool()) else { return };
    let covering = json["pattern"]["Regex"].as_str().is_some_and(|p| COVERING.contains(&p));
    let reason = match (behavior, invert) {
        ("Isolated", false) => return,
        ("Isolated", true) => "Isolated keeps matches and gaps alike, so invert changes nothing",
        ("Removed", true) | ("MergedWithPrevious" | "MergedWithNext", _) if covering => {
            "the pattern's matches cover every character, so each match is kept as its own piece"
        }
        _ => return,
    };
    let inverted = if invert { ", invert: true" } else { "" };
    let name = pattern_name(json["pattern"]["Regex"].as_str().unwrap_or("?"));
    applied.push(format!("Split({name}, {behavior}{inverted}) read as Split({name}, Isolated): {reason}"));
    json["behavior"] = Value::from("Isolated");
    json["invert"] = Value::from(false);
}

/// A short name for a known pattern, for messages.
fn pattern_name(pattern: &str) -> &'static str {
    match pattern {
        GPT2 => "gpt2 regex",
        CL100K => "cl100k regex",
        QWEN => "qwen regex",
        O200K => "o200k regex",
        _ => "regex",
    }
}

fn model(json: &mut Value, applied: &mut Vec<String>) {
    if json["type"].as_str() != Some("BPE") {
        return;
    }
    for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
        if json[key].as_str() == Some("") {
            applied.push(format!("BPE {key} \"\" read as none: an empty affix changes no sub-word"));
            json[key] = Value::Null;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn split_json(pattern: &str, behavior: &str, invert: bool) -> Value {
        json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert})
    }

    /// Every rewrite gives the same pre-tokens as the original spelling in HF itself.
    #[test]
    fn rewrites_pre_tokenize_like_the_original_in_hf() {
        use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
        let texts = [
            "Hello world, it's 12345 o'clock!\n\n  x  \t\r\nEnd.",
            "中文字符串，日本語のテキスト。 한국어 \u{0}\u{1}\u{7f} e\u{301}\u{301} \u{301}",
            "ＡＢＣ ﬁne x² ½ ⅣⅤ \u{a0}\u{2028}\u{3000}/path/to//x  ",
            "",
            " ",
        ];
        let pieces = |pre: &tokenizers::PreTokenizerWrapper, text: &str| {
            let mut s = PreTokenizedString::from(text);
            pre.pre_tokenize(&mut s).unwrap();
            s.get_splits(OffsetReferential::Original, OffsetType::Byte)
                .into_iter()
                .map(|(t, o, _)| (t.to_owned(), o))
                .collect::<Vec<_>>()
        };
        let mut rewritten_count = 0;
        for pattern in COVERING.iter().chain([&"\\p{N}{1,3}", &"[a-z]+"]) {
            for behavior in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"] {
                for invert in [false, true] {
                    let original = split_json(pattern, behavior, invert);
                    let mut wrapped = json!({"pre_tokenizer": original.clone()});
                    let applied = canonicalize(&mut wrapped);
                    if applied.is_empty() {
                        assert_eq!(wrapped["pre_tokenizer"], original);
                        continue;
                    }
                    rewritten_count += 1;
                    let before: tokenizers::PreTokenizerWrapper = serde_json::from_value(original).unwrap();
                    let after: tokenizers::PreTokenizerWrapper =
                        serde_json::from_value(wrapped["pre_tokenizer"].clone()).unwrap();
                    for text in texts {
                        assert_eq!(pieces(&before, text), pieces(&after, text), "{behavior} {invert} {pattern}");
                    }
                }
            }
        }
        // Isolated+invert for every pattern, and the three keeping behaviours for covering ones.
        assert_eq!(rewritten_count, 6 + 4 * 5);
    }

    #[test]
    fn names_each_rewrite() {
        let mut json = json!({
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                split_json(O200K, "Removed", true),
                {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
            "model": {"type": "BPE", "continuing_subword_prefix": "", "end_of_word_suffix": "", "vocab": {}},
        });
        let applied = canonicalize(&mut json);
        assert_eq!(applied.len(), 3, "{applied:?}");
        assert!(
            applied[0].starts_with("Split(o200k regex, Removed, invert: true) read as Split(o200k regex, Isolated)")
        );
        assert_eq!(json["pre_tokenizer"]["pretokenizers"][0], split_json(O200K, "Isolated", false));
        assert!(json["model"]["continuing_subword_prefix"].is_null());
        // Nothing to do the second time.
        assert!(canonicalize(&mut json).is_empty());
    }

    #[test]
    fn removed_without_invert_and_contiguous_stay() {
        for (behavior, invert) in [("Removed", false), ("Contiguous", true), ("Contiguous", false)] {
            let mut json = json!({"pre_tokenizer": split_json(O200K, behavior, invert)});
            assert!(canonicalize(&mut json).is_empty(), "{behavior} {invert}");
        }
    }

    /// Every code point starts a non-empty match at its own position, whether text or another
    /// character follows: the matches of these patterns tile every text.
    #[test]
    fn covering_patterns_match_every_character() {
        for pattern in COVERING {
            let regex = onig::Regex::new(pattern).unwrap();
            let mut buf = String::new();
            for c in (0..=0x10ffffu32).filter_map(char::from_u32) {
                for follower in ["", "a"] {
                    buf.clear();
                    buf.push(c);
                    buf.push_str(follower);
                    let found = regex.find(&buf);
                    assert!(found.is_some_and(|(s, e)| s == 0 && e >= c.len_utf8()), "{c:?}{follower:?} {pattern}");
                }
            }
        }
    }
}
