//! The SentencePiece-style BPE model: one normalized sub-piece in, token ids and their ends out,
//! exactly as HF's `BPE::merge_word` computes them.
//!
//! HF starts from one symbol per character (the character's token, or with `byte_fallback` one
//! `<0xXX>` token per byte of a character the vocabulary lacks) and merges the lowest-ranked
//! adjacent pair, leftmost among equal ranks, until none is left: the merge core shared with the
//! byte-level engine (`engine/merge_core.rs`, which argues the rule for HF's heap).
//!
//! Each symbol carries its end as a byte position in the raw text (relative to the sub-piece): a
//! character's token ends where the raw character ends, the `k`-th byte token of a character ends
//! `k + 1` bytes into it (the caller widens such ends to character boundaries, which is the range
//! HF's alignments give every byte of a character), and the prefix ends at 0. A merged symbol ends
//! where its right part ends.
//!
//! Invariants checked when the model is built (anything else is refused and HF serves the
//! tokenizer): byte fallback with all 256 byte tokens (so no character is ever unknown and
//! `fuse_unk` never applies), no dropout, no subword prefix or suffix, no `ignore_merges`, ids
//! and ranks that fit the packed merge table.

use std::sync::{Arc, OnceLock};

#[cfg(test)]
use serde_json::Value;

use crate::doc::{Doc, TokenIds};
use crate::engine::backtrack::{self, Backtrack};
use crate::engine::bpe::table::{MergeMap, U64Map};
use crate::engine::merge_core;

/// Sub-pieces of at least this many symbols are encoded by the backtracking search, whose cost
/// is linear in their length, rather than by the heap merge (as in the byte-level engine).
const LONG_MIN: usize = 128;

/// The model: how characters start and how symbols merge.
pub(crate) struct SpmModel {
    /// Token id of each ASCII character (as a normalized character), `u32::MAX` when absent.
    ascii: [u32; 128],
    /// Token id of every other single-character token, keyed by code point.
    chars: U64Map,
    /// Token of each byte, `<0xXX>`.
    byte_ids: [u32; 256],
    merges: MergeMap,
    /// Each token's initial symbols by id, `symbols[starts[id]..starts[id + 1]]`: per character
    /// its token, else its byte tokens; a byte token is itself. What the search is built from.
    spelling: (Vec<u32>, Vec<u32>),
    /// The linear-time search for sub-pieces of [`LONG_MIN`] symbols or more, built on first use
    /// or at load (`SeedCache`); `None` when it cannot be built (such words keep the heap).
    long: OnceLock<Option<Backtrack>>,
}

/// Reusable buffers of one encoding call.
#[derive(Default)]
pub(crate) struct Scratch {
    ids: Vec<u32>,
    ends: Vec<u32>,
    merge: merge_core::Scratch,
    long: backtrack::Scratch,
}

impl SpmModel {
    /// Builds the model from a `tokenizer.json`'s `model` object alone (tests).
    #[cfg(test)]
    pub(crate) fn from_json(model: &Value) -> Result<SpmModel, String> {
        Self::from_doc(&Doc::from_value(serde_json::json!({ "model": model })))
    }

    /// Builds the model from a parsed `tokenizer.json`'s model.
    ///
    /// # Errors
    /// The reason, when the model is not one this engine reproduces exactly.
    pub(crate) fn from_doc(doc: &Doc<'_>) -> Result<SpmModel, String> {
        let model = &doc.json["model"];
        if model["type"].as_str() != Some("BPE") {
            return Err(format!("model {} is not BPE", model["type"].as_str().unwrap_or("?")));
        }
        if model["dropout"].as_f64().is_some_and(|d| d > 0.0) {
            return Err("BPE dropout is random".into());
        }
        for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
            if model[key].as_str().is_some_and(|s| !s.is_empty()) {
                return Err(format!("BPE {key} is not supported natively"));
            }
        }
        if model["ignore_merges"].as_bool() == Some(true) {
            return Err("BPE ignore_merges is not supported by the SentencePiece engine".into());
        }
        if model["byte_fallback"].as_bool() != Some(true) {
            return Err("BPE without byte fallback is not supported by the SentencePiece engine".into());
        }
        let by_string = doc.vocab.as_ref().ok_or("BPE vocab is not an object of u32 ids")?;
        let mut ascii = [u32::MAX; 128];
        let mut chars = U64Map::with_capacity(1024);
        for (token, &id) in by_string {
            let mut it = token.chars();
            if let (Some(c), None) = (it.next(), it.next()) {
                if c.is_ascii() {
                    ascii[c as usize] = id;
                } else {
                    chars.insert(u64::from(c), u64::from(id));
                }
            }
        }
        let mut byte_ids = [0u32; 256];
        for b in 0..=255u8 {
            byte_ids[usize::from(b)] = *by_string
                .get(format!("<0x{b:02X}>").as_str())
                .ok_or_else(|| format!("byte token <0x{b:02X}> is missing: characters could be unknown"))?;
        }
        let merges_json = doc.merges.as_deref().ok_or("BPE merges are not a list")?;
        let mut merges = Vec::with_capacity(merges_json.len());
        for merge in merges_json {
            let (a, b) = merge.sides()?;
            let id_of =
                |s: &str| by_string.get(s).copied().ok_or_else(|| format!("merge token {s:?} is not in the vocab"));
            merges.push((id_of(a)?, id_of(b)?, id_of(&format!("{a}{b}"))?));
        }
        let merges = MergeMap::new(&merges).ok_or("BPE ids and merge ranks do not fit the merge table")?;
        let mut model =
            SpmModel { ascii, chars, byte_ids, merges, spelling: (Vec::new(), Vec::new()), long: OnceLock::new() };
        model.spelling = model.spell(by_string).ok_or("the vocabulary is too large")?;
        Ok(model)
    }

    /// The initial symbols of every token, by id: what HF's `merge_word` starts from on the
    /// token's characters (a byte token `<0xXX>` is its own symbol).
    fn spell(&self, by_string: &TokenIds<'_>) -> Option<(Vec<u32>, Vec<u32>)> {
        let size = by_string.values().max().map_or(0, |&id| id as usize + 1);
        let mut by_id: Vec<&str> = vec![""; size];
        for (token, &id) in by_string {
            by_id[id as usize] = token;
        }
        let mut starts = Vec::with_capacity(size + 1);
        starts.push(0u32);
        let mut symbols = Vec::new();
        for (id, token) in by_id.iter().enumerate() {
            let byte = token
                .strip_prefix("<0x")
                .and_then(|t| t.strip_suffix('>'))
                .filter(|hex| hex.len() == 2)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .filter(|&b| self.byte_ids[usize::from(b)] as usize == id);
            match byte {
                Some(b) => symbols.push(self.byte_ids[usize::from(b)]),
                None => {
                    for c in token.chars() {
                        match self.char_id(c) {
                            Some(id) => symbols.push(id),
                            None => {
                                let mut buf = [0u8; 4];
                                let bytes = c.encode_utf8(&mut buf).as_bytes();
                                symbols.extend(bytes.iter().map(|&b| self.byte_ids[usize::from(b)]));
                            }
                        }
                    }
                }
            }
            starts.push(u32::try_from(symbols.len()).ok()?);
        }
        Some((starts, symbols))
    }

    /// The backtracking search of long sub-pieces, built now if it is not yet.
    pub(crate) fn long_search(&self) -> Option<&Backtrack> {
        self.long
            .get_or_init(|| Backtrack::new(&self.merges, self.spelling.0.clone(), self.spelling.1.clone()))
            .as_ref()
    }

    /// Builds the search on a thread of its own, so that loading does not wait for it (a
    /// sub-piece that needs it first waits for the build).
    pub(crate) fn long_search_in_background(model: &Arc<SpmModel>) {
        let model = Arc::clone(model);
        // Without a thread the search is built on first use.
        let _ = std::thread::Builder::new().name("lopt-spm-search".into()).spawn(move || {
            model.long_search();
        });
    }

    /// The token of the normalized character `c`, if the vocabulary has it.
    #[inline(always)]
    pub(crate) fn char_id(&self, c: char) -> Option<u32> {
        if c.is_ascii() {
            let id = self.ascii[c as usize];
            return (id != u32::MAX).then_some(id);
        }
        self.chars.get(u64::from(c)).map(|id| id as u32)
    }

    /// Appends the initial symbols of the normalized character `c`, whose raw form ends at
    /// `end` (relative to the sub-piece) and is `c` itself when `c` needs byte fallback.
    #[inline(always)]
    pub(crate) fn push_char(&self, c: char, end: u32, scratch: &mut Scratch) {
        match self.char_id(c) {
            Some(id) => {
                scratch.ids.push(id);
                scratch.ends.push(end);
            }
            None => {
                let mut buf = [0u8; 4];
                let bytes = c.encode_utf8(&mut buf).as_bytes();
                let start = end - bytes.len() as u32;
                for (k, &b) in bytes.iter().enumerate() {
                    scratch.ids.push(self.byte_ids[usize::from(b)]);
                    scratch.ends.push(start + k as u32 + 1);
                }
            }
        }
    }

    /// Appends a symbol with a known id (the prefix).
    pub(crate) fn push_symbol(&self, id: u32, end: u32, scratch: &mut Scratch) {
        scratch.ids.push(id);
        scratch.ends.push(end);
    }

    /// Merges the symbols pushed since the last call and appends the tokens `(id, end)` to `out`
    /// (a merged token ends where its last symbol ends).
    pub(crate) fn merge(&self, scratch: &mut Scratch, out: &mut Vec<(u32, u32)>) {
        let Scratch { ids, ends, merge, long } = scratch;
        let searched = ids.len() >= LONG_MIN
            && self
                .long_search()
                .is_some_and(|search| search.encode(&self.merges, ids, long, |id, last| out.push((id, ends[last]))));
        if !searched {
            merge_core::merge(&self.merges, ids, merge, |id, last| out.push((id, ends[last])));
        }
        ids.clear();
        ends.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> SpmModel {
        let mut vocab = serde_json::Map::new();
        for b in 0..=255u32 {
            vocab.insert(format!("<0x{b:02X}>"), Value::from(b));
        }
        let merges = [("a", "a"), ("b", "a"), ("aa", "a"), ("a", "b"), ("ba", "aa"), ("ab", "ab")];
        let mut id = 256u32;
        for token in ["a", "b"].into_iter().map(str::to_string).chain(merges.iter().map(|(a, b)| format!("{a}{b}"))) {
            vocab.entry(token).or_insert_with(|| {
                id += 1;
                Value::from(id - 1)
            });
        }
        let model = serde_json::json!({
            "type": "BPE", "byte_fallback": true, "vocab": vocab,
            "merges": merges.iter().map(|(a, b)| format!("{a} {b}")).collect::<Vec<_>>(),
        });
        SpmModel::from_json(&model).unwrap()
    }

    /// The fixtures' models (a missing one is skipped with a notice).
    fn fixture_models() -> impl Iterator<Item = (&'static str, SpmModel)> {
        ["gemma3", "llama2"].into_iter().filter_map(move |name| {
            let Some(bytes) = crate::testdata::tokenizer_path(name).and_then(|p| std::fs::read(p).ok()) else {
                eprintln!("NOTICE: {name} not found; skipped");
                return None;
            };
            Some((name, SpmModel::from_doc(&Doc::parse(&bytes).unwrap()).unwrap()))
        })
    }

    /// The backtracking search against the heap merge on the real vocabularies, from the
    /// symbols the engine builds: runs of one character, random words over small alphabets
    /// (letters, `▁`, digits, base64, CJK, characters that fall back to bytes), up to 2,000
    /// characters, around the search's threshold and far above it.
    #[test]
    fn backtracking_is_the_heap_merge_on_fixtures() {
        for (name, model) in fixture_models() {
            let search = model.long_search().expect("the search builds");
            let (walkable, others) = search.check_walks(&model.merges, 40);
            eprintln!("{name}: {walkable} tokens decided by the rank walk, {others} reachable ones by merging");
            let mut scratch = Scratch::default();
            let mut words: Vec<Vec<char>> = Vec::new();
            for c in ['a', '▁', '-', '=', '0', '\n', '中', '\u{e000}', '😀'] {
                for len in [1, 2, 3, 16, 127, 128, 129, 1000] {
                    words.push(vec![c; len]);
                }
            }
            let alphabets = [
                "ab",
                "ab▁",
                "▁▁▁a",
                "0123456789",
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                "▁\t\n",
                "中文字符",
                "é\u{e000}😀a▁",
            ];
            let mut state = 0x2545_f491_4f6c_dd1du64;
            for alphabet in alphabets {
                let alphabet: Vec<char> = alphabet.chars().collect();
                for _ in 0..12 {
                    let len = 100 + (state % 1900) as usize;
                    words.push(crate::engine::random_word(&mut state, &alphabet, len));
                }
            }
            for word in &words {
                let mut end = 0u32;
                for &c in word {
                    end += c.len_utf8() as u32;
                    model.push_char(c, end, &mut scratch);
                }
                let (mut got, mut expected) = (Vec::new(), Vec::new());
                let found =
                    search.encode(&model.merges, &scratch.ids, &mut scratch.long, |id, last| got.push((id, last)));
                assert!(found, "{name}: the search failed");
                merge_core::merge_heap(&model.merges, &scratch.ids, &mut scratch.merge, |id, last| {
                    expected.push((id, last))
                });
                let text: String = word.iter().take(40).collect();
                assert_eq!(got, expected, "{name}: {text:?} ({} characters)", word.len());
                scratch.ids.clear();
                scratch.ends.clear();
            }
        }
    }

    #[test]
    fn unknown_characters_fall_back_to_bytes() {
        let model = toy();
        let mut scratch = Scratch::default();
        model.push_char('é', 2, &mut scratch);
        let mut out = Vec::new();
        model.merge(&mut scratch, &mut out);
        assert_eq!(out, vec![(0xc3, 1), (0xa9, 2)]);
    }
}
