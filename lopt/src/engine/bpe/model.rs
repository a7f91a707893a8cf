//! The byte-level BPE model: one pre-token's bytes in, token ids out, exactly as HF's `BPE` model
//! computes them on the pre-token's byte-level string.
//!
//! HF merges with a heap of candidate pairs and applies, repeatedly, the candidate with the lowest
//! rank, the leftmost one among equal ranks; a popped candidate is applied only while its pair is
//! still there (checked through the merged id). Because a symbol only ever grows, the pair at a
//! position never comes back once it changed, so this is the textbook rule "merge the
//! lowest-ranked adjacent pair, leftmost first, until none is left", which the merge core shared
//! with the SentencePiece engine implements (`engine/merge_core.rs`); pre-tokens of
//! [`LONG_MIN`] bytes or more go to a linear-time search with the same output
//! ([`backtrack`]). Multi-byte characters whose own
//! merges provably come first start merged ([`premerge`], argued there and checked against BPE
//! from bytes on the real vocabularies), which divides the work on CJK text by about three, and
//! a pre-token with a multi-byte character at an end is first cut between characters that no
//! token spans ([`split`]), each piece merged alone (most pieces of a Chinese run are one
//! character, whose ids are its premerge entry; a repeated short piece is read from a memo of the
//! call's pieces, [`memo`]).
//!
//! Invariants checked when the model is built (anything else is refused, and HF serves the
//! tokenizer): every byte's character is in the vocabulary (so no character is ever dropped or
//! unknown), ids are unique and below 2^31, ids and merge ranks fit the packed merge table
//! ([`MergeMap`]: true of every real vocabulary), no continuing-subword prefix or end-of-word
//! suffix, no dropout. `ignore_merges` looks the whole pre-token up first, as HF does.

mod backtrack;
mod memo;
mod split;

use std::collections::HashMap;
use std::sync::OnceLock;

use rayon::prelude::*;
#[cfg(test)]
use serde_json::Value;

use super::cache::{SeedCache, SEED_MAX_LEN};
use super::table::{MergeMap, NO_RANK};
use crate::doc::{Doc, Merge, TokenIds};
use crate::engine::merge_core;

/// GPT-2's `bytes_to_unicode`: the printable character that stands for each byte.
pub(crate) fn byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff);
        let cp = if printable {
            u32::from(b)
        } else {
            n += 1;
            255 + n
        };
        table[usize::from(b)] = char::from_u32(cp).unwrap_or('\0');
    }
    table
}

/// The inverse of [`byte_to_char`]: the byte of each alphabet character (all below U+0144).
fn char_to_byte_table() -> [Option<u8>; 0x144] {
    let mut inverse = [None; 0x144];
    for (b, c) in byte_to_char().iter().enumerate() {
        inverse[*c as usize] = u8::try_from(b).ok();
    }
    inverse
}

/// The byte a byte-level character stands for, `None` outside the alphabet.
fn char_to_byte(c: char, inverse: &[Option<u8>; 0x144]) -> Option<u8> {
    inverse.get(c as usize).copied().flatten()
}

type Hasher = ahash::RandomState;

/// The byte-level model's vocabulary: each token's bytes to its id (tokens with a character
/// outside the byte-level alphabet left out: they can never be produced), the byte length by
/// id, and each byte's id. `max_id`: the largest id of `by_string`.
#[allow(clippy::type_complexity)]
fn byte_vocab(
    by_string: &TokenIds<'_>,
    max_id: u32,
) -> Result<(HashMap<Box<[u8]>, u32, Hasher>, Vec<u32>, [u32; 256]), String> {
    let table = char_to_byte_table();
    let mut vocab: HashMap<Box<[u8]>, u32, Hasher> =
        HashMap::with_capacity_and_hasher(by_string.len(), Hasher::default());
    let mut token_len = vec![0u32; max_id as usize + 1];
    let mut seen = vec![false; max_id as usize + 1];
    // Each token's bytes in one reused buffer, then one exact allocation (collecting into a
    // `Vec` grew and shrank it: two or three allocator calls per token, ~7 % of the load).
    let mut bytes = Vec::new();
    for (token, &id) in by_string {
        if std::mem::replace(&mut seen[id as usize], true) {
            return Err(format!("BPE vocab id {id} is used twice"));
        }
        bytes.clear();
        let mut known = true;
        for c in token.chars() {
            match char_to_byte(c, &table) {
                Some(b) => bytes.push(b),
                None => {
                    known = false;
                    break;
                }
            }
        }
        if !known {
            continue;
        }
        token_len[id as usize] = u32::try_from(bytes.len()).map_err(|_| "BPE token too long")?;
        vocab.insert(Box::from(&bytes[..]), id);
    }
    let mut byte_ids = [0u32; 256];
    for b in 0..=255u8 {
        let key = [b];
        byte_ids[usize::from(b)] =
            *vocab.get(&key[..]).ok_or_else(|| format!("byte {b:#04x} has no token: characters could be dropped"))?;
    }
    Ok((vocab, token_len, byte_ids))
}

/// The merge table of `merges` (`None`: the file's merges are not a list), each side and the
/// merged spelling looked up in `by_string`.
fn merge_table(by_string: &TokenIds<'_>, merges: Option<&[Merge<'_>]>) -> Result<MergeMap, String> {
    let merges_json = merges.ok_or("BPE merges are not a list")?;
    let mut merges = Vec::with_capacity(merges_json.len());
    // The merged token's spelling, rebuilt in one buffer (a `format!` per merge was a tenth of
    // the model's load).
    let mut joined = String::new();
    for merge in merges_json {
        let (a, b) = merge.sides()?;
        let id_of = |s: &str| by_string.get(s).copied().ok_or_else(|| format!("merge token {s:?} is not in the vocab"));
        let (ia, ib) = (id_of(a)?, id_of(b)?);
        joined.clear();
        joined.push_str(a);
        joined.push_str(b);
        let merged = id_of(&joined)?;
        merges.push((ia, ib, merged));
    }
    // A repeated pair keeps its last rank, as HF's map does.
    Ok(MergeMap::new(&merges).ok_or("BPE ids and merge ranks do not fit the merge table")?)
}

/// A pre-token whose ids are known: a slice of [`BpeModel`]'s scratch output.
pub(crate) struct BpeModel {
    /// Id of each single byte.
    byte_ids: [u32; 256],
    /// Adjacent pair → rank, rank → merged id.
    merges: MergeMap,
    /// Whole tokens by their bytes, for `ignore_merges`.
    vocab: HashMap<Box<[u8]>, u32, Hasher>,
    /// Byte length of each model token, by id (0 for ids the model does not have).
    token_len: Vec<u32>,
    ignore_merges: bool,
    /// Per BMP code point: the packed [`Premerge`] entry, 0 when the character starts as bytes.
    premerge: Vec<u64>,
    /// Where pre-tokens may be cut into pieces that merge on their own ([`split`]), built with
    /// the seed cache (off the loading path) or on first use.
    cuts: OnceLock<split::Cuts>,
    /// The linear-time search for pre-tokens of [`LONG_MIN`] bytes or more, built on first use
    /// (`None` when the merge ranks do not allow it; such words keep the heap merge).
    long: OnceLock<Option<backtrack::Backtrack>>,
}

pub(crate) use memo::Memo;

/// The merge results of a share of the seeded entries: each word with where its tokens start in
/// `tokens` and how many there are.
/// Entries per slice of [`BpeModel::seed_cache_yielding`]: about a millisecond of merges (the
/// seed of a 128K vocabulary is ~1,600 instructions per entry, callgrind), the longest an encode
/// waits for the seed; the rounds' hand-offs cost microseconds each.
const SEED_SLICE: usize = 1024;

struct SeedPart<'v> {
    tokens: Vec<(u32, u32)>,
    words: Vec<(&'v [u8], usize, usize)>,
}

/// Reusable buffers of one encoding call.
#[derive(Default)]
pub(crate) struct Scratch {
    symbols: Vec<u32>,
    merge: merge_core::Scratch,
    long: backtrack::Scratch,
    /// The ids of short pieces between cuts seen earlier (kept between calls with the cache).
    memo: memo::Memo,
}

/// Pre-tokens of at least this many bytes are encoded by the backtracking search, whose cost
/// is linear in their length, rather than by the heap merge (O(n log n), and slower per merge
/// once its arrays outgrow the caches).
const LONG_MIN: usize = 128;

impl Scratch {
    /// Buffers for a call that starts with `memo` (kept between calls by the caller).
    pub(crate) fn with_memo(memo: Memo) -> Scratch {
        Scratch { memo, ..Scratch::default() }
    }

    /// The memo, to keep for the next call.
    pub(crate) fn take_memo(&mut self) -> Memo {
        std::mem::take(&mut self.memo)
    }
}

impl BpeModel {
    /// Builds the model from a `tokenizer.json`'s `model` object alone (tests).
    #[cfg(test)]
    pub(crate) fn from_json(model: &Value) -> Result<BpeModel, String> {
        Self::from_doc(&Doc::from_value(serde_json::json!({ "model": model })))
    }

    /// Builds the model from a parsed `tokenizer.json`'s model.
    ///
    /// # Errors
    /// The reason, when the model is not a byte-level BPE that this engine reproduces exactly.
    pub(crate) fn from_doc(doc: &Doc<'_>) -> Result<BpeModel, String> {
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
        // One map of the file's strings, shared with every other reader (`doc.rs`).
        let by_string = doc.vocab.as_ref().ok_or("BPE vocab is not an object of u32 ids")?;
        let max_id = by_string.values().copied().max().unwrap_or(0);
        if max_id >= 1 << 31 {
            return Err("BPE vocab id is not below 2^31".into());
        }
        // The byte vocabulary and the merge table read only the file's map, not each other: on
        // the loading pool they are built side by side (a third to a half of the model's build
        // each). Neither runs inside a lock, so the join's work stealing is harmless. The
        // vocabulary's reason is reported first, as when built one after the other.
        let vocab_part = || byte_vocab(by_string, max_id);
        let merges_part = || merge_table(by_string, doc.merges.as_deref());
        let (vocab_part, merges_part) = if rayon::current_thread_index().is_some() {
            rayon::join(vocab_part, merges_part)
        } else {
            (vocab_part(), merges_part())
        };
        let (vocab, token_len, byte_ids) = vocab_part?;
        let merges = merges_part?;
        let ignore_merges = model["ignore_merges"].as_bool().unwrap_or(false);
        let mut model = BpeModel {
            byte_ids,
            merges,
            vocab,
            token_len,
            ignore_merges,
            premerge: Vec::new(),
            cuts: OnceLock::new(),
            long: OnceLock::new(),
        };
        model.premerge = premerge::table(&model);
        Ok(model)
    }

    /// The seeded pre-token cache: every vocabulary entry of at most [`SEED_MAX_LEN`] bytes with
    /// the tokens [`Self::encode`] gives for those bytes (merged from scratch here, so a seeded
    /// value is exactly what a cold merge computes). Called on a rayon pool (the tokenizer's),
    /// its merges are shared among the pool's threads; called outside any pool, it runs on the
    /// calling thread alone (the global pool is never used).
    pub(crate) fn seed_cache(&self) -> SeedCache {
        let entries = self.seed_entries();
        // The cut table beside the merges: with `ignore_merges` the entries never reach it, and
        // the first Chinese word of a text should not wait for it.
        let merged: Vec<SeedPart<'_>> = if rayon::current_thread_index().is_some() {
            let chunk = entries.len().div_ceil(4 * rayon::current_num_threads()).max(1024);
            let (_, parts) =
                rayon::join(|| self.cuts(), || entries.par_chunks(chunk).map(|c| self.seed_part(c)).collect());
            parts
        } else {
            self.cuts();
            vec![self.seed_part(&entries)]
        };
        let count = merged.iter().map(|p| p.words.len()).sum();
        SeedCache::new(
            count,
            merged.iter().flat_map(|p| p.words.iter().map(|&(word, from, n)| (word, &p.tokens[from..from + n]))),
        )
    }

    /// [`Self::seed_cache`] built from a thread outside `pool` so that encodes pre-empt it: the
    /// merges run on `pool` in slices of [`SEED_SLICE`] entries, one slice per pool thread at a
    /// time, each round handed to the pool as a job of its own. An encode handed to the pool
    /// meanwhile queues ahead of the next round, so it waits for one slice (about a millisecond)
    /// instead of the whole seed (0.1-0.2 s for a 150K vocabulary), and while its own tasks run
    /// the pool's threads take them before the seed's next round. The cache's hash table is
    /// built on the calling thread; the cut table is left to the caller.
    pub(crate) fn seed_cache_yielding(&self, pool: &rayon::ThreadPool) -> SeedCache {
        let entries = self.seed_entries();
        let round = SEED_SLICE * pool.current_num_threads().max(1);
        let mut merged: Vec<SeedPart<'_>> = Vec::with_capacity(entries.len().div_ceil(SEED_SLICE));
        for batch in entries.chunks(round) {
            merged.extend(pool.install(|| batch.par_chunks(SEED_SLICE).map(|c| self.seed_part(c)).collect::<Vec<_>>()));
        }
        let count = merged.iter().map(|p| p.words.len()).sum();
        SeedCache::new(
            count,
            merged.iter().flat_map(|p| p.words.iter().map(|&(word, from, n)| (word, &p.tokens[from..from + n]))),
        )
    }

    /// The vocabulary entries the seeded cache holds, with their ids.
    fn seed_entries(&self) -> Vec<(&[u8], u32)> {
        self.vocab.iter().map(|(w, &id)| (&w[..], id)).filter(|(w, _)| (1..=SEED_MAX_LEN).contains(&w.len())).collect()
    }

    /// The merge results of `entries`, for [`Self::seed_cache`]. Once the long-word search is
    /// built, an entry whose bytes alone merge to its own id (its history says so, computed from
    /// the merges: `engine/backtrack.rs`) is its own value without a merge: the merge of its bytes
    /// gives `[id]`, and with `ignore_merges` the whole-word lookup gives this entry's id too.
    /// Most entries are such; the seed's merges were 160-300 M instructions of a 128K-200K
    /// vocabulary's load.
    fn seed_part<'v>(&self, entries: &[(&'v [u8], u32)]) -> SeedPart<'v> {
        let search = self.long.get().and_then(Option::as_ref);
        let mut scratch = Scratch::default();
        let mut ids = Vec::new();
        let mut part = SeedPart {
            tokens: Vec::with_capacity(entries.len() + entries.len() / 4),
            words: Vec::with_capacity(entries.len()),
        };
        for &(word, id) in entries {
            ids.clear();
            if search.is_some_and(|search| search.reachable(id)) {
                ids.push(id);
            } else {
                self.encode(word, &mut scratch, &mut ids);
            }
            let from = part.tokens.len();
            let mut end = 0u32;
            for &id in &ids {
                end += self.token_len(id) as u32;
                part.tokens.push((id, end));
            }
            part.words.push((word, from, part.tokens.len() - from));
        }
        part
    }

    /// The backtracking search of long pre-tokens, built now if it is not yet (a background
    /// thread calls this after building the seed cache, so that the first long word does not
    /// wait for it).
    pub(crate) fn long_search(&self) -> Option<&backtrack::Backtrack> {
        self.long.get_or_init(|| backtrack::search(self, false)).as_ref()
    }

    /// [`Self::long_search`] for the synchronous seed: built outside the cell, its trie and
    /// histories side by side on the current pool, then stored. Never inside the cell's
    /// initializer: a join there may run another task that needs the same cell on this thread
    /// (std's `OnceLock` then deadlocks), which is why the lazy path stays sequential.
    pub(crate) fn build_long_search_side_by_side(&self) {
        if self.long.get().is_none() {
            // Another thread that stored it first wins; both built the same search.
            let _ = self.long.set(backtrack::search(self, true));
        }
    }

    /// The cut table, built now if it is not yet.
    pub(crate) fn cuts(&self) -> &split::Cuts {
        self.cuts.get_or_init(|| split::Cuts::new(self.vocab.keys().map(|t| &t[..])))
    }

    /// The token of the one-byte pre-token `b`: what [`Self::encode`] gives for it (BPE has
    /// nothing to merge; with `ignore_merges` the whole-word lookup finds the same entry).
    #[inline(always)]
    pub(crate) fn byte_id(&self, b: u8) -> u32 {
        self.byte_ids[usize::from(b)]
    }

    /// Byte length of the model token `id` (0 for an id that is not the model's).
    #[inline]
    pub(crate) fn token_len(&self, id: u32) -> usize {
        self.token_len.get(id as usize).map_or(0, |&l| l as usize)
    }

    /// Appends the ids of the pre-token `word` (its raw bytes) to `out`.
    pub(crate) fn encode(&self, word: &[u8], scratch: &mut Scratch, out: &mut Vec<u32>) {
        self.encode_word::<true>(word, scratch, out);
    }

    /// [`Self::encode`] of a `word` that is no vocabulary entry (it missed the seeded cache,
    /// which holds every entry of up to [`SEED_MAX_LEN`] bytes): `ignore_merges`' whole-word
    /// lookup, which would miss, is left out.
    #[cfg(test)]
    pub(crate) fn encode_non_entry(&self, word: &[u8], scratch: &mut Scratch, out: &mut Vec<u32>) {
        self.encode_word::<false>(word, scratch, out);
    }

    /// [`Self::encode`], with `ignore_merges`' whole-word lookup only when `LOOKUP`.
    #[inline(always)]
    fn encode_word<const LOOKUP: bool>(&self, word: &[u8], scratch: &mut Scratch, out: &mut Vec<u32>) {
        match word.len() {
            0 => return,
            1 => {
                out.push(self.byte_ids[usize::from(word[0])]);
                return;
            }
            _ => {}
        }
        if LOOKUP && self.ignore_merges {
            if let Some(&id) = self.vocab.get(word) {
                out.push(id);
                return;
            }
        }
        // Only words with a multi-byte character at an end are worth scanning for cuts (a
        // Chinese run, perhaps after one ASCII byte).
        if word[0] >= 0x80 || word[word.len() - 1] >= 0x80 {
            self.encode_cut(word, scratch, out);
        } else {
            self.encode_piece(word, scratch, out);
        }
    }

    /// Appends the ids of `word` (valid UTF-8), encoding its pieces between cuts one by one
    /// (`split`): most pieces of a Chinese run are one character, whose ids are its premerge
    /// entry (both its edges are piece ends).
    #[inline]
    fn encode_cut(&self, word: &[u8], scratch: &mut Scratch, out: &mut Vec<u32>) {
        let cuts = self.cuts();
        let n = word.len();
        // The previous character's code point, `NONE` unless it has 2 or 3 bytes.
        const NONE: usize = usize::MAX;
        let (mut from, mut prev, mut i) = (0, NONE, 0);
        while i < n {
            let len = split::char_len(word[i]);
            let cp = if (2..=3).contains(&len) && i + len <= n { decode_bmp(&word[i..i + len]) } else { NONE };
            if prev != NONE && cp != NONE && cuts.is_cut(prev as u32, cp as u32) {
                self.encode_one_piece(&word[from..i], prev, scratch, out);
                from = i;
            }
            prev = cp;
            i += len;
        }
        self.encode_one_piece(&word[from..], prev, scratch, out);
    }

    /// [`Self::encode_piece`], or straight from the premerge table when `piece` is the one
    /// character `last` (its code point, or `NONE`), or from the memo of this call's pieces.
    #[inline(always)]
    fn encode_one_piece(&self, piece: &[u8], last: usize, scratch: &mut Scratch, out: &mut Vec<u32>) {
        if (2..=3).contains(&piece.len()) && last != usize::MAX && split::char_len(piece[0]) == piece.len() {
            let entry = self.premerge.get(last).copied().unwrap_or(0);
            if entry != 0 {
                out.push(premerge::first(entry));
                if let Some(second) = premerge::second(entry) {
                    out.push(second);
                }
                return;
            }
        }
        // A piece is merged alone, so its ids depend on its bytes only: a repeated one is read
        // from the memo.
        let Some(key) = memo::key(piece) else {
            self.encode_piece(piece, scratch, out);
            return;
        };
        if scratch.memo.get(key, out) {
            return;
        }
        let from = out.len();
        self.encode_piece(piece, scratch, out);
        scratch.memo.put(key, &out[from..]);
    }

    /// Appends the ids of `piece`, a pre-token or a piece of one between cuts.
    #[inline]
    fn encode_piece(&self, piece: &[u8], scratch: &mut Scratch, out: &mut Vec<u32>) {
        if piece.len() == 1 {
            out.push(self.byte_ids[usize::from(piece[0])]);
            return;
        }
        if piece.len() >= LONG_MIN {
            if let Some(search) = self.long_search() {
                if backtrack::encode(search, self, piece, &mut scratch.symbols, &mut scratch.long, out) {
                    return;
                }
            }
        }
        let Scratch { symbols, merge, .. } = scratch;
        self.initial_symbols(piece, symbols);
        self.merge_symbols(symbols, merge, |id, _| out.push(id));
    }

    /// BPE's merges over a piece's initial `symbols`: each token of the result, in order, goes
    /// to `emit` with the index of the last initial symbol it covers.
    #[inline(always)]
    fn merge_symbols(&self, symbols: &mut [u32], merge: &mut merge_core::Scratch, mut emit: impl FnMut(u32, usize)) {
        // Most pieces of Chinese runs are one or two characters: at most one merge, no loop.
        match *symbols {
            [id] => emit(id, 0),
            [a, b] => match self.merges.get(a, b) {
                (NO_RANK, _) => {
                    emit(a, 0);
                    emit(b, 1);
                }
                (_, merged) => emit(merged, 1),
            },
            _ => merge_core::merge_in_place(&self.merges, symbols, merge, emit),
        }
    }

    /// The tokens of the pre-token `word` as `(id, end within the word)` into `tokens` (cleared
    /// first): [`Self::encode`] when `entry`, else [`Self::encode_non_entry`]; `ids` is scratch.
    /// A word whose ends are ASCII and that starts as one symbol per byte (no premerged
    /// character: every word of English or base64 that misses the caches) has its ends from
    /// the merge itself, the last symbol each token covers; any other word reads each token's
    /// length (a load from a table of the whole vocabulary's lengths, cold for rare tokens).
    #[inline]
    pub(crate) fn encode_tokens(
        &self,
        word: &[u8],
        entry: bool,
        scratch: &mut Scratch,
        ids: &mut Vec<u32>,
        tokens: &mut Vec<(u32, u32)>,
    ) {
        tokens.clear();
        let n = word.len();
        // Such a word takes `encode_word`'s path to `encode_piece`, whose two steps are below.
        let plain =
            (2..LONG_MIN).contains(&n) && word[0] < 0x80 && word[n - 1] < 0x80 && !(entry && self.ignore_merges);
        if plain {
            let Scratch { symbols, merge, .. } = scratch;
            self.initial_symbols(word, symbols);
            // A premerged character is fewer symbols than bytes, so as many symbols as bytes
            // means one per byte: a token that ends with symbol `last` ends at byte `last + 1`.
            if symbols.len() == n {
                self.merge_symbols(symbols, merge, |id, last| tokens.push((id, last as u32 + 1)));
                return;
            }
            ids.clear();
            self.merge_symbols(symbols, merge, |id, _| ids.push(id));
        } else {
            ids.clear();
            self.encode_word_any(word, entry, scratch, ids);
        }
        let mut end = 0u32;
        for &id in ids.iter() {
            end += self.token_len(id) as u32;
            tokens.push((id, end));
        }
    }

    /// [`Self::encode`] when `entry`, else [`Self::encode_non_entry`].
    #[inline]
    pub(crate) fn encode_word_any(&self, word: &[u8], entry: bool, scratch: &mut Scratch, out: &mut Vec<u32>) {
        if entry {
            self.encode_word::<true>(word, scratch, out);
        } else {
            self.encode_word::<false>(word, scratch, out);
        }
    }

    /// The symbols BPE starts from, into `symbols` (cleared first): one per byte, except that a
    /// character whose isolated merges provably happen first in any context starts as their
    /// result (see [`Premerge`]).
    #[inline]
    fn initial_symbols(&self, word: &[u8], symbols: &mut Vec<u32>) {
        symbols.clear();
        let n = word.len();
        let mut i = 0;
        while i < n {
            let b = word[i];
            if b < 0x80 {
                // A run of ASCII bytes at once, one symbol each (on words that miss the caches,
                // such as random text's, a one-byte `extend` per byte was a sixth of the merge).
                let run = word[i..].iter().position(|&b| b >= 0x80).map_or(n, |k| i + k);
                symbols.extend(word[i..run].iter().map(|&b| self.byte_ids[usize::from(b)]));
                i = run;
                continue;
            }
            let len = match b {
                0..=0x7f => 1,
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                _ => 4,
            };
            if len > 1 && len < 4 && i + len <= n {
                let entry = self.premerge.get(decode_bmp(&word[i..i + len])).copied().unwrap_or(0);
                if entry != 0 {
                    let left = if i == 0 {
                        true
                    } else if word[i - 1] < 0x80 {
                        entry & premerge::AFTER_ASCII != 0
                    } else {
                        entry & premerge::AFTER_CONT != 0
                    };
                    let right = if i + len == n {
                        true
                    } else if word[i + len] < 0x80 {
                        entry & premerge::BEFORE_ASCII != 0
                    } else {
                        entry & premerge::BEFORE_LEAD != 0
                    };
                    if left && right {
                        symbols.push(premerge::first(entry));
                        if let Some(second) = premerge::second(entry) {
                            symbols.push(second);
                        }
                        i += len;
                        continue;
                    }
                }
            }
            let end = (i + len).min(n);
            symbols.extend(word[i..end].iter().map(|&b| self.byte_ids[usize::from(b)]));
            i = end;
        }
    }
}

/// The code point of a 2- or 3-byte UTF-8 character.
#[inline(always)]
fn decode_bmp(c: &[u8]) -> usize {
    if c.len() == 2 {
        usize::from(c[0] & 0x1f) << 6 | usize::from(c[1] & 0x3f)
    } else {
        usize::from(c[0] & 0x0f) << 12 | usize::from(c[1] & 0x3f) << 6 | usize::from(c[2] & 0x3f)
    }
}

/// Starting a character from the result of its own merges instead of its bytes.
///
/// Let `r` be the highest rank among the merges BPE applies to a character `c` in isolation, and
/// call `c`'s *edge symbols* every symbol that, during those merges, starts where `c` starts
/// (left edge) or ends where `c` ends (right edge). If every merge `(x, p)` with `p` a left-edge
/// symbol and `x` a token that can precede `c`, and every merge `(p, x)` with `p` a right-edge
/// symbol and `x` a token that can follow `c`, has a rank above `r`, then in any word BPE
/// finishes `c`'s own merges before touching `c` from outside: until `c` is done one of its
/// merges (rank `<= r`) is always available, so nothing ranked above `r` is chosen across its
/// edges; and the cross pairs that its finished symbols form from the start rank above `r`
/// too, so starting from them changes no choice. Hence BPE from the premerged symbols returns
/// exactly BPE from bytes.
///
/// What can precede or follow `c` is read off the neighbouring byte at run time: a token that
/// ends right before `c` ends with an ASCII byte or a UTF-8 continuation byte; one that starts
/// right after `c` starts with an ASCII byte or a UTF-8 lead byte. The four cases are four flags
/// of the entry. Entries exist for BMP characters of 2 and 3 bytes that have merges and whose
/// (at most two) finished symbol ids fit in 20 bits.
mod premerge {
    use super::{BpeModel, NO_RANK};

    pub(super) const AFTER_ASCII: u64 = 1 << 40;
    pub(super) const AFTER_CONT: u64 = 1 << 41;
    pub(super) const BEFORE_ASCII: u64 = 1 << 42;
    pub(super) const BEFORE_LEAD: u64 = 1 << 43;
    const NO_ID: u64 = 0xf_ffff;

    #[inline(always)]
    pub(super) fn first(entry: u64) -> u32 {
        (entry & NO_ID) as u32
    }

    #[inline(always)]
    pub(super) fn second(entry: u64) -> Option<u32> {
        let id = (entry >> 20) & NO_ID;
        (id != NO_ID).then_some(id as u32)
    }

    /// Lowest merge ranks by neighbour class: `[after ASCII, after continuation]` for a token as
    /// the right element, `[before ASCII, before lead]` for a token as the left element.
    struct Bounds {
        as_right: Vec<[u64; 2]>,
        as_left: Vec<[u64; 2]>,
    }

    pub(super) fn table(model: &BpeModel) -> Vec<u64> {
        let size = model.token_len.len();
        if size >= NO_ID as usize {
            return Vec::new();
        }
        let mut first_byte = vec![0u8; size];
        let mut last_byte = vec![0u8; size];
        for (bytes, &id) in &model.vocab {
            if let (Some(&f), Some(&l)) = (bytes.first(), bytes.last()) {
                first_byte[id as usize] = f;
                last_byte[id as usize] = l;
            }
        }
        let mut bounds = Bounds { as_right: vec![[u64::MAX; 2]; size], as_left: vec![[u64::MAX; 2]; size] };
        for (a, b, rank, _) in model.merges.iter() {
            let (a, b, rank) = (a as usize, b as usize, u64::from(rank));
            let after = usize::from(last_byte[a] >= 0x80);
            bounds.as_right[b][after] = bounds.as_right[b][after].min(rank);
            let before = usize::from(first_byte[b] >= 0x80);
            bounds.as_left[a][before] = bounds.as_left[a][before].min(rank);
        }
        let mut table = vec![0u64; 0x10000];
        let mut buf = [0u8; 4];
        for cp in 0x80..0x10000u32 {
            let Some(c) = char::from_u32(cp) else { continue };
            let bytes = c.encode_utf8(&mut buf).as_bytes();
            table[cp as usize] = entry(model, &bounds, bytes);
        }
        table
    }

    /// BPE of one character alone, recording its edge symbols and highest rank. A character has
    /// at most 4 bytes, so at most 3 merges and 4 edge symbols a side: all on the stack (three
    /// `Vec`s per character were a third of the table's build, 63K characters).
    fn entry(model: &BpeModel, bounds: &Bounds, bytes: &[u8]) -> u64 {
        let mut ids = [0u32; 4];
        let mut n = bytes.len().min(4);
        for (slot, &b) in ids.iter_mut().zip(&bytes[..n]) {
            *slot = model.byte_ids[usize::from(b)];
        }
        if n == 0 {
            return 0;
        }
        let (mut left, mut right) = ([ids[0]; 4], [ids[n - 1]; 4]);
        let mut edges = 1;
        let mut highest = None;
        loop {
            let best = (0..n - 1)
                .map(|k| (model.merges.rank(ids[k], ids[k + 1]), k))
                .filter(|&(rank, _)| rank != NO_RANK)
                .min();
            let Some((rank, k)) = best else { break };
            highest = Some(u64::from(rank));
            ids[k] = model.merges.merged(rank);
            ids.copy_within(k + 2..n, k + 1);
            n -= 1;
            // `edges` < 4: each merge shortens `ids`, which started with at most 4 symbols.
            left[edges] = ids[0];
            right[edges] = ids[n - 1];
            edges += 1;
        }
        let Some(r) = highest else { return 0 };
        let ids = &ids[..n];
        if ids.len() > 2 || ids.iter().any(|&id| u64::from(id) >= NO_ID) {
            return 0;
        }
        let (left, right) = (&left[..edges], &right[..edges]);
        let mut entry = u64::from(ids[0]) | ids.get(1).map_or(NO_ID, |&id| u64::from(id)) << 20;
        let safe_right_of = |class: usize| left.iter().all(|&p| bounds.as_right[p as usize][class] > r);
        let safe_left_of = |class: usize| right.iter().all(|&p| bounds.as_left[p as usize][class] > r);
        if safe_right_of(0) {
            entry |= AFTER_ASCII;
        }
        if safe_right_of(1) {
            entry |= AFTER_CONT;
        }
        if safe_left_of(0) {
            entry |= BEFORE_ASCII;
        }
        if safe_left_of(1) {
            entry |= BEFORE_LEAD;
        }
        entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-level BPE fixtures.
    pub(super) const BYTE_LEVEL: [&str; 7] = ["qwen3", "gptoss", "gpt4o", "claude", "llama3_1", "deepseek_v3", "gpt2"];

    /// The models of the fixtures `names` that are present (one at a time, loaded as the
    /// iteration reaches them); a missing one is skipped with a notice (a clone without
    /// `../shared`).
    pub(super) fn fixture_models(names: &'static [&'static str]) -> impl Iterator<Item = (&'static str, BpeModel)> {
        names.iter().filter_map(move |&name| {
            let Some(bytes) = crate::testdata::tokenizer_path(name).and_then(|p| std::fs::read(p).ok()) else {
                eprintln!("NOTICE: {name} not found; skipped");
                return None;
            };
            Some((name, BpeModel::from_doc(&Doc::parse(&bytes).unwrap()).unwrap()))
        })
    }

    #[test]
    fn byte_alphabet_is_gpt2s() {
        let table = byte_to_char();
        let inverse = char_to_byte_table();
        assert_eq!(table[usize::from(b' ')], 'Ġ');
        assert_eq!(table[usize::from(b'\n')], 'Ċ');
        assert_eq!(table[usize::from(b'a')], 'a');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(table[usize::from(b)], &inverse), Some(b));
        }
    }

    fn toy() -> BpeModel {
        let table = byte_to_char();
        let mut vocab = serde_json::Map::new();
        for b in 0..=255u8 {
            vocab.insert(table[usize::from(b)].to_string(), Value::from(u32::from(b)));
        }
        let merges = [("a", "a"), ("b", "a"), ("aa", "a"), ("a", "b"), ("ba", "aa"), ("ab", "ab")];
        let mut id = 256u32;
        for (a, b) in merges {
            vocab.entry(format!("{a}{b}")).or_insert_with(|| {
                id += 1;
                Value::from(id - 1)
            });
        }
        let model = serde_json::json!({
            "type": "BPE",
            "vocab": vocab,
            "merges": merges.iter().map(|(a, b)| format!("{a} {b}")).collect::<Vec<_>>(),
        });
        BpeModel::from_json(&model).unwrap()
    }

    /// Premerged characters change no token: real vocabularies, random words of BMP characters
    /// (CJK, Latin, Cyrillic, Hangul, punctuation) mixed with ASCII, against BPE from bytes.
    #[test]
    fn premerge_is_exact() {
        let ranges: [(u32, u32); 7] = [
            (0x4e00, 0x9fa5),
            (0x3040, 0x30ff),
            (0xac00, 0xd7a3),
            (0x400, 0x4ff),
            (0xa0, 0x17f),
            (0x2000, 0x206f),
            (0xff00, 0xffef),
        ];
        for (name, model) in fixture_models(&BYTE_LEVEL) {
            assert!(model.premerge.iter().any(|&e| e != 0), "{name}: nothing premerged");
            let mut scratch = Scratch::default();
            let mut state = 0x1234_5678_9abc_def0u64;
            let mut next = move || crate::engine::xorshift(&mut state);
            for _ in 0..20_000 {
                let len = 1 + (next() % 12) as usize;
                let (lo, hi) = ranges[(next() % ranges.len() as u64) as usize];
                let word: String = (0..len)
                    .map(|_| {
                        let r = next();
                        if r % 5 == 0 {
                            char::from(b' ' + (r >> 8) as u8 % 95)
                        } else {
                            char::from_u32(lo + (r >> 8) as u32 % (hi - lo + 1)).unwrap_or('x')
                        }
                    })
                    .collect();
                let (mut got, mut expected) = (Vec::new(), Vec::new());
                model.encode(word.as_bytes(), &mut scratch, &mut got);
                let raw: Vec<u32> = word.bytes().map(|b| model.byte_ids[usize::from(b)]).collect();
                if model.ignore_merges && model.vocab.contains_key(word.as_bytes()) {
                    continue;
                }
                merge_core::merge_heap(&model.merges, &raw, &mut scratch.merge, |id, _| expected.push(id));
                assert_eq!(got, expected, "{name}: {word:?}");
            }
        }
    }

    /// Cutting changes no token, and it does cut Chinese: words from real text of the corpus
    /// sample and from the vocabularies' own multi-character tokens (whose pairs must never be
    /// cut), plus rare characters (4-byte, characters whose bytes are not one token), and every
    /// token that starts or ends inside a character completed to text (the boundaries the
    /// fragment flags guard; dropping any one kind of flag fails here), against BPE from bytes
    /// without cuts.
    #[test]
    fn cuts_are_exact() {
        let text = "滚滚长江东逝水，浪花淘尽英雄。是非成败转头空。话说天下大势分久必合合久必分周末七国分争并入于秦\
                    及秦灭之后楚汉分争又并入于汉汉朝自高祖斩白蛇而起义一统天下後来光武中兴传至献帝遂分为三国\
                    東京特許許可局カタカナひらがな한국어대한민국ÀéîõüЖизньΩμέγα𠀀𠀁😀🀄︀㐀㐁鿿豈﨩ｱｲ";
        let chars: Vec<char> = text.chars().collect();
        for (name, model) in fixture_models(&BYTE_LEVEL) {
            let mut multi: Vec<&[u8]> = model
                .vocab
                .keys()
                .filter(|t| std::str::from_utf8(t).is_ok_and(|s| s.chars().count() >= 2 && !s.is_ascii()))
                .map(|t| &t[..])
                .collect();
            multi.sort();
            // The memo from the first piece on, so repeated pieces are read from it.
            let mut scratch = Scratch { memo: memo::Memo::eager(), ..Scratch::default() };
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = move || crate::engine::xorshift(&mut state);
            let (mut cut_words, mut words) = (0, 0);
            for round in 0..6000 {
                let mut word = String::new();
                if round % 3 == 0 && !multi.is_empty() {
                    for _ in 0..1 + next() % 4 {
                        word.push_str(std::str::from_utf8(multi[(next() % multi.len() as u64) as usize]).unwrap());
                    }
                } else {
                    let from = (next() % chars.len() as u64) as usize;
                    let len = 1 + (next() % 50) as usize;
                    word.extend(chars.iter().cycle().skip(from).take(len));
                }
                if next() % 4 == 0 {
                    word.insert(0, [' ', 'a', '(', '\n'][(next() % 4) as usize]);
                }
                if model.ignore_merges && model.vocab.contains_key(word.as_bytes()) {
                    continue;
                }
                let mut pieces = 0;
                model.cuts().pieces(word.as_bytes(), |_| pieces += 1);
                words += 1;
                cut_words += usize::from(pieces > 1);
                let (mut got, mut expected) = (Vec::new(), Vec::new());
                model.encode(word.as_bytes(), &mut scratch, &mut got);
                let raw: Vec<u32> = word.bytes().map(|b| model.byte_ids[usize::from(b)]).collect();
                merge_core::merge_heap(&model.merges, &raw, &mut scratch.merge, |id, _| expected.push(id));
                assert_eq!(got, expected, "{name}: {word:?}");
            }
            // Tokens that start or end inside a character, completed to valid text in several
            // ways: the boundaries the fragment flags guard.
            let mut fragments: Vec<&[u8]> =
                model.vocab.keys().filter(|t| std::str::from_utf8(t).is_err()).map(|t| &t[..]).collect();
            fragments.sort();
            let mut completed = 0;
            for (k, token) in fragments.iter().enumerate() {
                let cont = token.iter().take_while(|&&b| b & 0xc0 == 0x80).count();
                for (lead, fill) in [(&[0xe4u8, 0xb8][..], 0x80u8), (&[0xd0][..], 0xa0), (&[0xe9, 0x9a][..], 0xb8)] {
                    let mut word: Vec<u8> = match cont {
                        0 => Vec::new(),
                        1 => lead.to_vec(),
                        2 => vec![lead[0] | 0xe0],
                        _ => vec![0xf0],
                    };
                    word.extend_from_slice(token);
                    while std::str::from_utf8(&word).is_err_and(|e| e.error_len().is_none()) {
                        word.push(fill);
                    }
                    let Ok(text) = std::str::from_utf8(&word) else { continue };
                    let context = ["", "中", "国人", "a"][k % 4];
                    for word in [text.to_string(), format!("{context}{text}{context}")] {
                        if model.ignore_merges && model.vocab.contains_key(word.as_bytes()) {
                            continue;
                        }
                        let (mut got, mut expected) = (Vec::new(), Vec::new());
                        model.encode(word.as_bytes(), &mut scratch, &mut got);
                        let raw: Vec<u32> = word.bytes().map(|b| model.byte_ids[usize::from(b)]).collect();
                        merge_core::merge_heap(&model.merges, &raw, &mut scratch.merge, |id, _| expected.push(id));
                        assert_eq!(got, expected, "{name}: {word:?}");
                        completed += 1;
                    }
                }
            }
            let (marked, bloom) = model.cuts().stats();
            eprintln!("{name}: {completed} words around {} fragment tokens", fragments.len());
            eprintln!("{name}: {cut_words} of {words} words cut; {marked} characters marked; Bloom {bloom} bytes");
            assert!(cut_words * 4 > words, "{name}: too few cuts ({cut_words} of {words})");
        }
    }

    /// The seeded cache answers exactly the cold merge, for vocabulary entries and other words,
    /// wherever the word sits in a text (a full 16-byte load or the byte-wise tail path).
    #[test]
    fn seed_cache_yielding_equals_the_one_task_seed() {
        use super::super::cache::Hit;
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for (name, model) in fixture_models(&["gpt2"]) {
            let (whole, sliced) = (model.seed_cache(), model.seed_cache_yielding(&pool));
            assert_eq!(whole.len(), sliced.len(), "{name}");
            let tokens = |hit: Option<(Hit<'_>, bool)>| match hit {
                None => None,
                Some((Hit::One(id), _)) => Some(vec![id]),
                Some((Hit::Many(tokens), _)) => Some(tokens.iter().map(|t| t.0).collect::<Vec<_>>()),
            };
            for (word, _) in model.seed_entries() {
                let end = word.len();
                assert_eq!(tokens(whole.get(word, 0, end)), tokens(sliced.get(word, 0, end)), "{name}: {word:?}");
            }
        }
    }

    #[test]
    fn seed_cache_is_the_cold_merge() {
        use super::super::cache::Hit;
        // llama3_1: `ignore_merges`. The search first, so that the seed takes the entries that
        // merge to themselves from its histories.
        for (name, model) in fixture_models(&["qwen3", "gpt2", "llama3_1"]) {
            model.long_search();
            let seed = model.seed_cache();
            let mut scratch = Scratch::default();
            let mut words: Vec<Vec<u8>> =
                model.vocab.keys().filter(|w| w.len() <= SEED_MAX_LEN).map(|w| w.to_vec()).collect();
            words.sort();
            let entries = words.len();
            // Some words that are not entries: an entry with a byte appended.
            let extra: Vec<Vec<u8>> =
                words.iter().step_by(7).filter(|w| w.len() < SEED_MAX_LEN).map(|w| [&w[..], b"q"].concat()).collect();
            words.extend(extra);
            let mut hits = 0;
            for (k, word) in words.iter().enumerate() {
                let mut expected = Vec::new();
                model.encode(word, &mut scratch, &mut expected);
                let pad = k % 20;
                let text: Vec<u8> = [&b"xxxxxxxxxxxxxxxxxxxx"[..pad], word, &b"yyyyyyyyyyyyyyyy"[..k % 17]].concat();
                let got = match seed.get(&text, pad, pad + word.len()) {
                    None => {
                        // Every entry is seeded, so a miss is no entry, which the engine then
                        // merges without the whole-word lookup.
                        assert!(k >= entries, "{name}: the entry {:?} is not seeded", String::from_utf8_lossy(word));
                        let mut merged = Vec::new();
                        model.encode_non_entry(word, &mut scratch, &mut merged);
                        assert_eq!(merged, expected, "{name}: {:?}", String::from_utf8_lossy(word));
                        continue;
                    }
                    Some((Hit::One(id), _)) => vec![id],
                    Some((Hit::Many(tokens), _)) => tokens.iter().map(|t| t.0).collect(),
                };
                hits += 1;
                assert_eq!(got, expected, "{name}: {:?}", String::from_utf8_lossy(word));
            }
            assert!(hits >= seed.len(), "{name}: {hits} hits for {} seeded entries", seed.len());
        }
    }

    /// The tokens with their ends are the ids of `encode` (or `encode_non_entry`) with ends summed
    /// from token lengths, on both of its paths: words of ASCII, base64-like and with
    /// multi-byte characters inside or at an end, short and long, entries or not (llama3_1:
    /// `ignore_merges`).
    #[test]
    fn token_ends_are_the_token_lengths() {
        let alphabet: Vec<char> =
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/= 'é中".chars().collect();
        for (name, model) in fixture_models(&["qwen3", "llama3_1", "gpt2"]) {
            let mut words: Vec<Vec<u8>> =
                ["hello", "tokenization", "aGVsbG8gd29ybGQ", " Zm9vYmFy", "x中", "中文", "cafés"]
                    .iter()
                    .map(|w| w.as_bytes().to_vec())
                    .collect();
            let mut state = 0x5851_f42d_4c95_7f2du64;
            let mut next = move || crate::engine::xorshift(&mut state);
            for _ in 0..5000 {
                let len = 2 + (next() % 40) as usize;
                let len = if next() % 10 == 0 { len * 4 } else { len };
                let word: String = (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
                words.push(word.into_bytes());
            }
            let mut scratch = Scratch::default();
            let (mut ids, mut tokens) = (Vec::new(), Vec::new());
            for word in &words {
                for entry in [true, false] {
                    let mut expected = Vec::new();
                    if entry {
                        model.encode(word, &mut scratch, &mut expected);
                    } else {
                        model.encode_non_entry(word, &mut scratch, &mut expected);
                    }
                    let mut end = 0;
                    let expected: Vec<(u32, u32)> = expected
                        .iter()
                        .map(|&id| {
                            end += model.token_len(id) as u32;
                            (id, end)
                        })
                        .collect();
                    model.encode_tokens(word, entry, &mut scratch, &mut ids, &mut tokens);
                    assert_eq!(tokens, expected, "{name}: {:?} entry {entry}", String::from_utf8_lossy(word));
                    assert_eq!(tokens.last().map(|t| t.1 as usize), Some(word.len()));
                }
            }
        }
    }

    #[test]
    fn leftmost_of_equal_ranks() {
        let model = toy();
        let mut out = Vec::new();
        model.encode(b"aaa", &mut Scratch::default(), &mut out);
        // aa+a merges to aaa only via (aa, a); the leftmost pair merges first.
        let aa = model.vocab[&b"aaa"[..]];
        assert_eq!(out, vec![aa]);
    }
}
