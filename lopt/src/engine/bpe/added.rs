//! Added tokens, matched as HF's `AddedVocabulary` matches them.
//!
//! HF splits a text in two passes: tokens with `normalized: false` are found in the raw text,
//! then, in each remaining piece after normalization, tokens with `normalized: true` are found
//! (their patterns normalized too). Each pass is a leftmost-longest, non-overlapping automaton
//! scan; a match that breaks `single_word` is dropped (the scan does not revisit its text),
//! `lstrip`/`rstrip` widen a match over the white space next to it (never back over an earlier
//! match), and the text between matches stays a piece. `\w` and `\s` in these rules are the
//! `regex` crate's, as in HF, and only see the piece being scanned.
//!
//! Ids are assigned as HF's deserializer does (the `id` in the file is not trusted): the model's
//! id when the content is in the model vocabulary, otherwise the next free id after the model's
//! vocabulary size, in file order.

use std::collections::HashMap;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};
use regex::Regex;
use serde_json::Value;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Flags {
    single_word: bool,
    lstrip: bool,
    rstrip: bool,
}

/// One pass: an automaton over the patterns, and the id and flags of each pattern.
#[derive(Debug)]
struct Pass {
    automaton: AhoCorasick,
    ids: Vec<u32>,
    flags: Vec<Flags>,
    /// Some pattern has a flag: the slow path with the whitespace/word rules is needed.
    any_flags: bool,
}

/// The added vocabulary of one tokenizer.
#[derive(Debug, Default)]
pub(crate) struct AddedVocab {
    raw: Option<Pass>,
    normalized: Option<Pass>,
}

struct Rules {
    starts_with_word: Regex,
    ends_with_word: Regex,
    space_at_start: Regex,
    space_at_end: Regex,
}

fn rules() -> Option<&'static Rules> {
    static RULES: OnceLock<Option<Rules>> = OnceLock::new();
    RULES
        .get_or_init(|| {
            Some(Rules {
                starts_with_word: Regex::new(r"^\w").ok()?,
                ends_with_word: Regex::new(r"\w$").ok()?,
                space_at_start: Regex::new(r"^\s*").ok()?,
                space_at_end: Regex::new(r"\s*$").ok()?,
            })
        })
        .as_ref()
}

impl AddedVocab {
    /// Reads `added_tokens`. `model_id` looks a content up in the model vocabulary, `model_size` is
    /// the model vocabulary's size, `normalize` is the tokenizer's normalizer (applied to the
    /// patterns of `normalized` tokens).
    ///
    /// # Errors
    /// When an entry is malformed or the automaton cannot be built.
    pub(crate) fn from_json(
        json: &Value,
        model_id: impl Fn(&str) -> Option<u32>,
        model_size: usize,
        normalize: impl Fn(&str) -> String,
    ) -> Result<AddedVocab, String> {
        let Some(list) = json.as_array() else {
            return if json.is_null() { Ok(AddedVocab::default()) } else { Err("added_tokens is not a list".into()) };
        };
        let mut by_content: HashMap<String, u32> = HashMap::new();
        // id → (content, normalized, flags), last definition wins as in HF's reverse map.
        let mut by_id: std::collections::BTreeMap<u32, (String, bool, Flags)> = Default::default();
        let mut next_id = u32::try_from(model_size).map_err(|_| "vocabulary too large")?;
        let flag = |t: &Value, key: &str, default: bool| t[key].as_bool().unwrap_or(default);
        for token in list {
            let content = token["content"].as_str().ok_or("an added token has no content")?;
            if content.is_empty() {
                continue;
            }
            let special = flag(token, "special", false);
            let normalized = flag(token, "normalized", !special);
            let flags = Flags {
                single_word: flag(token, "single_word", false),
                lstrip: flag(token, "lstrip", false),
                rstrip: flag(token, "rstrip", false),
            };
            let id = match by_content.get(content).copied().or_else(|| model_id(content)) {
                Some(id) => id,
                None => {
                    next_id += 1;
                    next_id - 1
                }
            };
            by_content.insert(content.to_string(), id);
            by_id.insert(id, (content.to_string(), normalized, flags));
        }
        let mut raw = Vec::new();
        let mut normalized = Vec::new();
        for (id, (content, is_normalized, flags)) in by_id {
            if is_normalized {
                normalized.push((normalize(&content), id, flags));
            } else {
                raw.push((content, id, flags));
            }
        }
        Ok(AddedVocab { raw: Pass::build(raw)?, normalized: Pass::build(normalized)? })
    }

    /// Whether there are normalized tokens (which need a second pass).
    pub(crate) fn has_normalized(&self) -> bool {
        self.normalized.is_some()
    }

    /// The first pass over the raw text: calls `piece(Some(id) or None, start, end)` for the
    /// splits of `text`, in order; they tile `text`.
    pub(crate) fn split_raw(&self, text: &str, piece: &mut dyn FnMut(Option<u32>, usize, usize)) {
        split(self.raw.as_ref(), text, piece);
    }

    /// The second pass, over one normalized piece.
    pub(crate) fn split_normalized(&self, text: &str, piece: &mut dyn FnMut(Option<u32>, usize, usize)) {
        split(self.normalized.as_ref(), text, piece);
    }
}

impl Pass {
    fn build(patterns: Vec<(String, u32, Flags)>) -> Result<Option<Pass>, String> {
        if patterns.is_empty() {
            return Ok(None);
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(patterns.iter().map(|p| &p.0))
            .map_err(|e| format!("added tokens: {e}"))?;
        let any_flags = patterns.iter().any(|p| p.2 != Flags::default());
        Ok(Some(Pass {
            automaton,
            ids: patterns.iter().map(|p| p.1).collect(),
            flags: patterns.iter().map(|p| p.2).collect(),
            any_flags,
        }))
    }
}

/// HF's `find_matches`, emitting the splits instead of collecting them. Empty splits are not
/// emitted (HF drops them right after).
fn split(pass: Option<&Pass>, text: &str, piece: &mut dyn FnMut(Option<u32>, usize, usize)) {
    let Some(pass) = pass else {
        if !text.is_empty() {
            piece(None, 0, text.len());
        }
        return;
    };
    let rules = if pass.any_flags { rules() } else { None };
    let mut done = 0;
    for m in pass.automaton.find_iter(text) {
        let (mut start, mut stop) = (m.start(), m.end());
        let k = m.pattern().as_usize();
        let flags = pass.flags[k];
        if let Some(rules) = rules {
            if flags.single_word {
                let start_space = start == 0 || !rules.ends_with_word.is_match(&text[..start]);
                let stop_space = stop == text.len() || !rules.starts_with_word.is_match(&text[stop..]);
                if !start_space || !stop_space {
                    continue;
                }
            }
            if flags.lstrip {
                let new_start = rules.space_at_end.find(&text[..start]).map_or(start, |m| m.start());
                start = new_start.max(done);
            }
            if flags.rstrip {
                stop += rules.space_at_start.find(&text[stop..]).map_or(0, |m| m.end());
            }
        }
        if done < start {
            piece(None, done, start);
        }
        piece(Some(pass.ids[k]), start, stop);
        done = stop;
    }
    if done < text.len() {
        piece(None, done, text.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(tokens: Value) -> AddedVocab {
        AddedVocab::from_json(&tokens, |s| (s == "known").then_some(7), 100, str::to_string).unwrap()
    }

    fn splits(v: &AddedVocab, text: &str) -> Vec<(Option<u32>, String)> {
        let mut out = Vec::new();
        v.split_raw(text, &mut |id, s, e| out.push((id, text[s..e].to_string())));
        out
    }

    #[test]
    fn ids_follow_hf_assignment() {
        let v = vocab(serde_json::json!([
            {"id": 5, "content": "<a>", "special": true, "normalized": false},
            {"id": 9, "content": "known", "special": true, "normalized": false},
            {"id": 1, "content": "<b>", "special": true, "normalized": false},
        ]));
        assert_eq!(
            splits(&v, "x<a>known<b>"),
            vec![(None, "x".into()), (Some(100), "<a>".into()), (Some(7), "known".into()), (Some(101), "<b>".into())]
        );
    }

    #[test]
    fn strip_and_single_word() {
        let v = vocab(serde_json::json!([
            {"content": "<m>", "special": true, "normalized": false, "lstrip": true, "rstrip": true},
            {"content": "cat", "special": true, "normalized": false, "single_word": true},
        ]));
        assert_eq!(
            splits(&v, "a  <m>  b"),
            vec![(None, "a".into()), (Some(100), "  <m>  ".into()), (None, "b".into())]
        );
        assert_eq!(splits(&v, "concat cat"), vec![(None, "concat ".into()), (Some(101), "cat".into())]);
    }
}
