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

use aho_corasick::{AhoCorasick, Anchored, Input, MatchKind, StartKind};
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
    /// The patterns' first bytes, when they are 4 to [`START_BYTES`] different ones: the
    /// automaton's own filter skips ahead to a possible start only for up to 3 (gemma3's 6,415
    /// tokens start with 5: `<`, `[`, `\n`, `\t` and `▁`'s lead byte, and its scan walked the
    /// automaton byte by byte, about 27 instructions a byte), so these are skipped to here and
    /// the automaton tried there anchored ([`find_from`]).
    starts: Option<StartBytes>,
}

/// Up to this many different first bytes are skipped to by [`StartBytes`].
const START_BYTES: usize = 8;

/// The first bytes of a pass's patterns (see [`Pass::starts`]): every match starts at one.
#[derive(Debug)]
struct StartBytes {
    /// Each first byte, the list padded with the first one (so the test has no length).
    set: [u8; START_BYTES],
    table: [bool; 256],
}

impl StartBytes {
    /// The first byte of a set of at least one distinct bytes, up to [`START_BYTES`].
    fn new(firsts: &[u8]) -> Option<StartBytes> {
        let first = *firsts.first()?;
        if firsts.len() > START_BYTES {
            return None;
        }
        let mut set = [first; START_BYTES];
        let mut table = [false; 256];
        for (slot, &b) in set.iter_mut().zip(firsts) {
            *slot = b;
            table[usize::from(b)] = true;
        }
        Some(StartBytes { set, table })
    }

    /// The first position from `at` on whose byte is a first byte, if any: 16 bytes at a time
    /// (compares the compiler makes vector code of) until a block has one, then byte by byte.
    #[inline]
    fn next(&self, bytes: &[u8], mut at: usize) -> Option<usize> {
        while let Some(block) = bytes.get(at..at + 16) {
            let mut any = false;
            for &b in block {
                for &s in &self.set {
                    any |= b == s;
                }
            }
            if any {
                break;
            }
            at += 16;
        }
        bytes.get(at..)?.iter().position(|&b| self.table[usize::from(b)]).map(|k| at + k)
    }
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
        let mut firsts: Vec<u8> = patterns.iter().filter_map(|p| p.0.as_bytes().first().copied()).collect();
        firsts.sort_unstable();
        firsts.dedup();
        // An empty pattern would match anywhere.
        let starts =
            if firsts.len() > 3 && patterns.iter().all(|p| !p.0.is_empty()) { StartBytes::new(&firsts) } else { None };
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .start_kind(if starts.is_some() { StartKind::Both } else { StartKind::Unanchored })
            .build(patterns.iter().map(|p| &p.0))
            .map_err(|e| format!("added tokens: {e}"))?;
        let any_flags = patterns.iter().any(|p| p.2 != Flags::default());
        Ok(Some(Pass {
            automaton,
            ids: patterns.iter().map(|p| p.1).collect(),
            flags: patterns.iter().map(|p| p.2).collect(),
            any_flags,
            starts,
        }))
    }
}

/// The leftmost-longest match of `pass` that starts at `at` or later, as the automaton's
/// unanchored search from `at` finds it, for a pass with first bytes `starts` ([`Pass::starts`]):
/// every match starts at one of them, so the leftmost one is the anchored match at the first such position where
/// there is one, and the longest one there is what the anchored leftmost-longest search returns.
#[inline]
fn find_from(pass: &Pass, starts: &StartBytes, text: &str, mut at: usize) -> Option<aho_corasick::Match> {
    let bytes = text.as_bytes();
    loop {
        at = starts.next(bytes, at)?;
        match pass.automaton.try_find(Input::new(text).range(at..).anchored(Anchored::Yes)) {
            Ok(Some(m)) => return Some(m),
            Ok(None) => at += 1,
            // Not built for anchored searches (it is): the unanchored search from here.
            Err(_) => return pass.automaton.find(Input::new(text).range(at..)),
        }
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
    // Without first bytes to skip to, the automaton's own scan; with them, the next search starts
    // at the end of the last match, dropped or not, as in that scan (no pattern is empty).
    let mut scan = pass.starts.is_none().then(|| pass.automaton.find_iter(text));
    let mut at = 0;
    loop {
        let found = match (&mut scan, &pass.starts) {
            (Some(scan), _) => scan.next(),
            (None, Some(starts)) => find_from(pass, starts, text, at),
            (None, None) => None,
        };
        let Some(m) = found else { break };
        at = m.end();
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

    /// With 4 or more first bytes the matches are found by skipping to a first byte and an
    /// anchored search there: the same matches as the automaton's own scan, on random text made
    /// of the patterns' pieces (prefixes of each other, overlapping, multi-byte first bytes).
    #[test]
    fn skipping_to_first_bytes_finds_the_same_matches() {
        let patterns = ["<a>", "<ab>", "<a", "\n\n", "\n\n\n", "\t\t", "▁▁", "▁x", "[x]", "ab<", "<<"];
        let tokens: Vec<Value> =
            patterns.iter().map(|p| serde_json::json!({"content": p, "special": true, "normalized": false})).collect();
        let v = vocab(Value::Array(tokens));
        let pass = v.raw.as_ref().unwrap();
        assert!(pass.starts.is_some(), "6 first bytes");
        let reference = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(patterns).unwrap();
        let pool: Vec<char> = "<ab>\n\t▁x[] yé".chars().collect();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for round in 0..20_000 {
            crate::engine::xorshift(&mut state);
            let len = (round % 40) + (state % 8) as usize;
            let text: String = (0..len).map(|k| pool[((state >> (k % 56)) as usize + k * 7) % pool.len()]).collect();
            let expected: Vec<(usize, usize, usize)> =
                reference.find_iter(&text).map(|m| (m.pattern().as_usize(), m.start(), m.end())).collect();
            let mut got = Vec::new();
            let mut at = 0;
            while let Some(m) = find_from(pass, pass.starts.as_ref().unwrap(), &text, at) {
                at = m.end();
                got.push((m.pattern().as_usize(), m.start(), m.end()));
            }
            assert_eq!(got, expected, "{text:?}");
        }
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
