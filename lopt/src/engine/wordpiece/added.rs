//! Added tokens, matched as HF's `AddedVocabulary` matches them: one leftmost-longest automaton
//! for the non-normalized tokens over the raw text, one for the normalized tokens (in their
//! normalized form) over each normalized piece, `single_word` / `lstrip` / `rstrip` applied per
//! match with the same regexes, ids assigned as `add_tokens` assigns them while loading.
//!
//! Invariant: the returned splits cover the text in order, without gaps.

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, MatchKind};
use regex::Regex;
use serde_json::Value;

use super::model::Vocab;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Props {
    content: String,
    single_word: bool,
    lstrip: bool,
    rstrip: bool,
    normalized: bool,
    special: bool,
}

#[derive(Debug)]
struct Pattern {
    id: u32,
    single_word: bool,
    lstrip: bool,
    rstrip: bool,
}

/// The non-normalized added tokens of one tokenizer.
#[derive(Debug)]
pub(super) struct Added {
    automaton: AhoCorasick,
    patterns: Vec<Pattern>,
    starts_with_word: Regex,
    ends_with_word: Regex,
    /// Some match's text can differ from the token's content (stripped whitespace, a normalized
    /// form): HF's token string is the matched text, not the vocabulary entry.
    values_differ: bool,
}

/// One piece of a text: plain text to normalize, or an added token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Split {
    Text(usize, usize),
    Token(u32, usize, usize),
}

impl Added {
    /// Reads `added_tokens`: the automaton of the tokens matched on the raw text and that of the
    /// tokens matched on normalized text (`normalize` gives a token's normalized form); `None`
    /// where a set is empty.
    ///
    /// # Errors
    /// A reason when the token list is malformed or an automaton cannot be built.
    pub(super) fn from_json(
        tokens: &Value,
        vocab: &Vocab<'_>,
        normalize: impl Fn(&str) -> String,
    ) -> Result<(Option<Added>, Option<Added>), String> {
        let Some(list) = tokens.as_array() else { return Ok((None, None)) };
        // HF: `add_tokens` once with every token, ids from the added map, the model, or new ids
        // from the vocabulary size on.
        let mut next_id = u32::try_from(vocab.len()).map_err(|_| "vocabulary too large")?;
        let mut by_content: HashMap<String, u32> = HashMap::new();
        let mut by_id: HashMap<u32, Props> = HashMap::new();
        for t in list {
            let props = Props {
                content: t["content"].as_str().ok_or("added token without content")?.to_owned(),
                single_word: t["single_word"].as_bool().unwrap_or(false),
                lstrip: t["lstrip"].as_bool().unwrap_or(false),
                rstrip: t["rstrip"].as_bool().unwrap_or(false),
                normalized: t["normalized"].as_bool().unwrap_or(true),
                special: t["special"].as_bool().unwrap_or(false),
            };
            if props.content.is_empty() {
                continue;
            }
            if let Some(id) = by_content.get(&props.content) {
                if by_id.get(id) == Some(&props) {
                    continue;
                }
            }
            let id = match by_content.get(&props.content).copied().or_else(|| vocab.token_to_id(&props.content)) {
                Some(id) => id,
                None => {
                    let id = next_id;
                    next_id += 1;
                    id
                }
            };
            by_content.insert(props.content.clone(), id);
            by_id.insert(id, props);
        }
        let mut ids: Vec<u32> = by_id.keys().copied().collect();
        ids.sort_unstable();
        let (normalized, raw): (Vec<u32>, Vec<u32>) = ids.into_iter().partition(|id| by_id[id].normalized);
        let raw = Added::build(raw.iter().map(|id| (by_id[id].content.clone(), *id, &by_id[id])))?;
        let normalized = Added::build(normalized.iter().map(|id| (normalize(&by_id[id].content), *id, &by_id[id])))?;
        Ok((raw, normalized))
    }

    fn build<'a>(tokens: impl Iterator<Item = (String, u32, &'a Props)>) -> Result<Option<Added>, String> {
        let mut contents = Vec::new();
        let mut patterns = Vec::new();
        let mut values_differ = false;
        for (content, id, p) in tokens {
            // An empty pattern never matches in HF's automaton.
            if content.is_empty() {
                continue;
            }
            values_differ |= p.lstrip || p.rstrip || content != p.content;
            contents.push(content);
            patterns.push(Pattern { id, single_word: p.single_word, lstrip: p.lstrip, rstrip: p.rstrip });
        }
        if patterns.is_empty() {
            return Ok(None);
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&contents)
            .map_err(|e| format!("cannot build the added-token automaton: {e}"))?;
        let regex = |r: &str| Regex::new(r).map_err(|e| e.to_string());
        Ok(Some(Added {
            automaton,
            patterns,
            starts_with_word: regex(r"^\w")?,
            ends_with_word: regex(r"\w$")?,
            values_differ,
        }))
    }

    /// Whether a match's text can differ from the token's content.
    pub(super) fn values_differ(&self) -> bool {
        self.values_differ
    }

    /// HF's `find_matches`: the splits of `text`, in order.
    pub(super) fn split(&self, text: &str, out: &mut Vec<Split>) {
        let mut start_offset = 0;
        for m in self.automaton.find_iter(text) {
            let (mut start, mut stop) = (m.start(), m.end());
            let p = &self.patterns[m.pattern().as_usize()];
            if p.single_word {
                let start_space = start == 0 || !self.ends_with_word.is_match(&text[..start]);
                let stop_space = stop == text.len() || !self.starts_with_word.is_match(&text[stop..]);
                if !stop_space || !start_space {
                    continue;
                }
            }
            if p.lstrip {
                // `\s*$` starts where the trailing whitespace run starts.
                let newstart = text[..start].trim_end_matches(char::is_whitespace).len();
                start = newstart.max(start_offset);
            }
            if p.rstrip {
                stop = text.len() - text[stop..].trim_start_matches(char::is_whitespace).len();
            }
            if start_offset < start {
                out.push(Split::Text(start_offset, start));
            }
            out.push(Split::Token(p.id, start, stop));
            start_offset = stop;
        }
        if start_offset != text.len() {
            out.push(Split::Text(start_offset, text.len()));
        }
    }
}
