//! The native SentencePiece-style BPE engine (Gemma, Llama 2, Mistral-style `tokenizer.json`s):
//! added tokens, a normalizer that replaces single characters and may prepend a prefix, no
//! splitting pre-tokenizer, and a BPE model with byte fallback.
//!
//! Contract (the [`Engine`] one): [`SpmEngine::encode_segment`] returns exactly what
//! [`HfEngine`](super::hf::HfEngine) returns for the same segment (ids, byte offsets, word ids,
//! number of words), and [`SpmEngine::encode_continuation`] what it would return without the
//! prefix at the segment start.
//!
//! How each HF stage is reproduced:
//! * added tokens: `engine/bpe/added.rs` (raw pass only; normalized added tokens are refused);
//! * normalizer: the [`CharMap`] of the cut rule, applied character by character while the
//!   symbols are built (no normalized string is materialized); the prefix goes before every
//!   piece between added tokens, except at a continuation's start;
//! * pre-tokenizer: none, or one that never fires after the normalizer
//!   ([`PieceRule`]); each piece between added tokens is one word;
//! * model: [`model`]. A piece is cut further at every position where no merge can join the
//!   characters around it (the [`Junctions`] of the cut rule, argued in `docs/correctness.md`),
//!   so BPE of the piece is the concatenation of BPE of these sub-pieces. Sub-pieces repeat like
//!   words (`▁the`), so they go through the pre-token cache of `engine/bpe/cache.rs`, keyed by
//!   their raw bytes;
//! * offsets: HF aligns every byte a character becomes to the whole character and the prefix to
//!   the piece's first character; so a token's range is from the start of its first character to
//!   the end of its last one, which is "widen the token's raw byte range to character
//!   boundaries", and a token made of the prefix alone covers the first character.
//!
//! Invariants checked at build time: every replacement and the prefix is one character that the
//! vocabulary has (so symbols map one-to-one to raw characters), byte fallback is complete
//! ([`model`]).

mod model;

use std::sync::{Arc, Mutex};

use super::bpe::added::AddedVocab;
use super::bpe::cache::{self, Hit, WordCache};
use super::{Engine, Segment};
use crate::boundary::{CharMap, Junctions, PieceRule};
use crate::doc::Doc;
use crate::error::Result;
use crate::options::SeedCache;
use model::{Scratch, SpmModel};

/// Native SentencePiece-style BPE; see the module documentation.
pub(crate) struct SpmEngine {
    added: AddedVocab,
    /// Shared with the thread that builds its long-word search at load.
    model: Arc<SpmModel>,
    junctions: Junctions,
    /// What each ASCII character becomes, as `(token id or u32::MAX, left edge, right edge)`:
    /// the normalized character's id and the characters its symbols show at their ends (`<` and
    /// `>` for byte tokens).
    ascii: [(u32, char, char); 128],
    /// For each pair of raw ASCII characters `(a, b)`, bit `b % 64` of `ascii_joins[2 * a + b /
    /// 64]`: whether [`Junctions::joins`] joins `a`'s right edge to `b`'s left one
    /// ([`Self::edges`]), so that a run of ASCII text is cut with one bit test a character
    /// ([`ascii_joins`]; base64: the edges and the junction test were 36 instructions a byte).
    ascii_joins: Box<[u64; 256]>,
    /// Replacements of non-ASCII characters.
    map: CharMap,
    /// The prefix's token id and character.
    prefix: Option<(u32, char)>,
    /// Pre-token caches, one lent to each running call (see `engine/bpe/cache.rs`).
    caches: Mutex<Vec<WordCache>>,
}

impl SpmEngine {
    /// Compiles the engine from a parsed `tokenizer.json`; `seeding` says when the long-word
    /// search is built (with the byte-level engine's seed cache: before returning, on a thread
    /// of its own, or on first use).
    ///
    /// # Errors
    /// The reason, naming the component, when some component is not one this engine reproduces.
    pub(crate) fn new(doc: &Doc<'_>, seeding: SeedCache) -> std::result::Result<SpmEngine, String> {
        let json = &doc.json;
        let map = CharMap::from_json(&json["normalizer"])?;
        let Some(rule) = PieceRule::new(doc)? else {
            return Err("the pre-tokenizer splits the text (not a SentencePiece-style pipeline)".into());
        };
        let model = SpmModel::from_doc(doc)?;
        let single = |s: &str| -> std::result::Result<(u32, char), String> {
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => {
                    model.char_id(c).map(|id| (id, c)).ok_or_else(|| format!("{c:?} is not in the vocabulary"))
                }
                _ => Err(format!("normalizer output {s:?} is not one character")),
            }
        };
        for (_, to) in map.replacements() {
            single(to)?;
        }
        let prefix = map.prefix.as_deref().map(single).transpose()?;
        let added = AddedVocab::from_json(
            &json["added_tokens"],
            |content| doc.vocab_id(content),
            doc.vocab_len(),
            str::to_string,
        )?;
        if added.has_normalized() {
            return Err("added tokens matched after normalization are not supported natively".into());
        }
        let model = Arc::new(model);
        match seeding {
            SeedCache::Sync => {
                model.long_search();
            }
            SeedCache::Background => SpmModel::long_search_in_background(&model),
            SeedCache::Off => {}
        }
        let mut engine = SpmEngine {
            added,
            model,
            junctions: rule.junctions,
            ascii: [(u32::MAX, '<', '>'); 128],
            ascii_joins: Box::new([0; 256]),
            map,
            prefix,
            caches: Mutex::new(Vec::new()),
        };
        for b in 0..128u8 {
            let c = engine.normalized(char::from(b));
            engine.ascii[usize::from(b)] = match engine.model.char_id(c) {
                Some(id) => (id, c, c),
                None => (u32::MAX, '<', '>'),
            };
        }
        for a in 0..128 {
            for b in 0..128 {
                if engine.junctions.joins(engine.ascii[a].2, engine.ascii[b].1) {
                    engine.ascii_joins[2 * a + b / 64] |= 1 << (b % 64);
                }
            }
        }
        Ok(engine)
    }

    /// The normalized character of raw `c` (replacements are single characters).
    #[inline(always)]
    fn normalized(&self, c: char) -> char {
        self.map.map(c).and_then(|s| s.chars().next()).unwrap_or(c)
    }

    /// The characters the symbols of raw `c` show at their left and right ends.
    #[inline(always)]
    fn edges(&self, c: char) -> (char, char) {
        if c.is_ascii() {
            let (_, l, r) = self.ascii[c as usize];
            return (l, r);
        }
        let n = self.normalized(c);
        if self.model.char_id(n).is_some() {
            (n, n)
        } else {
            ('<', '>')
        }
    }

    fn encode(&self, segment: &str, continuation: bool) -> Segment {
        let cache = self.caches.lock().ok().and_then(|mut pool| pool.pop()).unwrap_or_default();
        let mut run =
            Run { engine: self, segment: Segment::default(), scratch: Scratch::default(), cache, tokens: Vec::new() };
        let capacity = segment.len() / 3;
        run.segment.ids.reserve(capacity);
        run.segment.offsets.reserve(capacity);
        run.segment.word_ids.reserve(capacity);
        self.added.split_raw(segment, &mut |id, start, end| match id {
            Some(id) => {
                let word = run.segment.words;
                run.segment.ids.push(id);
                run.segment.offsets.push((start, end));
                run.segment.word_ids.push(word);
                run.segment.added_words.push(word);
                run.segment.words += 1;
            }
            None => {
                let prefixed = !(continuation && start == 0);
                run.piece(segment, start, end, prefixed);
                run.segment.words += 1;
            }
        });
        let Run { segment: out, cache, .. } = run;
        if let Ok(mut pool) = self.caches.lock() {
            pool.push(cache);
        }
        out
    }
}

/// The state of one call.
struct Run<'a> {
    engine: &'a SpmEngine,
    segment: Segment,
    scratch: Scratch,
    cache: WordCache,
    /// Tokens `(id, end within the sub-piece)` of the sub-piece being merged.
    tokens: Vec<(u32, u32)>,
}

/// Whether the raw ASCII characters `a` then `b` may be joined by a merge (see
/// [`SpmEngine::ascii_joins`]).
#[inline(always)]
fn ascii_joins(table: &[u64; 256], a: u8, b: u8) -> bool {
    table[usize::from(a) << 1 | usize::from(b >> 6)] >> (b & 63) & 1 != 0
}

#[inline(always)]
fn is_char_start(b: u8) -> bool {
    (b as i8) >= -0x40
}

impl Run<'_> {
    /// One piece between added tokens, `text[start..end]` (non-empty), as one word; `prefixed`:
    /// the normalizer's prefix goes in front.
    fn piece(&mut self, text: &str, start: usize, end: usize, prefixed: bool) {
        let engine = self.engine;
        let bytes = text.as_bytes();
        let mut from = start;
        let mut first = prefixed && engine.prefix.is_some();
        // The previous character's byte when it is ASCII, else `NOT_ASCII` (then `prev_right`
        // is its right edge, `None` before the first character).
        const NOT_ASCII: u8 = 0x80;
        let mut prev = NOT_ASCII;
        let mut prev_right: Option<char> = None;
        let mut i = start;
        while i < end {
            let b = bytes[i];
            if (prev | b) < 0x80 {
                // Two ASCII characters: `engine.junctions.joins` of their edges, by the table.
                if !ascii_joins(&engine.ascii_joins, prev, b) {
                    self.sub_piece(text, from, i, first);
                    first = false;
                    from = i;
                }
                prev = b;
                i += 1;
                continue;
            }
            let (c, len) = if b < 0x80 {
                (char::from(b), 1)
            } else {
                let c = text[i..].chars().next().unwrap_or('\u{fffd}');
                (c, c.len_utf8())
            };
            let (left, right) = engine.edges(c);
            let edge = if prev < 0x80 { Some(engine.ascii[usize::from(prev)].2) } else { prev_right };
            if let Some(edge) = edge {
                if !engine.junctions.joins(edge, left) {
                    self.sub_piece(text, from, i, first);
                    first = false;
                    from = i;
                }
            }
            prev_right = Some(right);
            prev = if b < 0x80 { b } else { NOT_ASCII };
            i += len;
        }
        self.sub_piece(text, from, end, first);
    }

    /// One sub-piece `text[start..end]`; `prefixed`: it starts the piece and takes the prefix.
    fn sub_piece(&mut self, text: &str, start: usize, end: usize, prefixed: bool) {
        let word = self.segment.words;
        let bytes = &text.as_bytes()[start..end];
        if prefixed || bytes.len() > cache::MAX_LEN {
            self.merge(text, start, end, prefixed);
            self.push_tokens(text, start, true, prefixed, word);
            return;
        }
        let key = cache::key(text.as_bytes(), start, end);
        match self.cache.get(key, bytes) {
            Some((Hit::One(id), _)) => {
                self.segment.ids.push(id);
                self.segment.offsets.push((start, end));
                self.segment.word_ids.push(word);
            }
            Some((Hit::Many(tokens), splits)) => {
                push_tokens(&mut self.segment, text, start, tokens, splits, false, word);
            }
            None => {
                self.merge(text, start, end, false);
                self.cache.insert(key, bytes, &self.tokens);
                self.push_tokens(text, start, true, false, word);
            }
        }
    }

    /// Builds the symbols of `text[start..end]` and merges them into `self.tokens`.
    fn merge(&mut self, text: &str, start: usize, end: usize, prefixed: bool) {
        let engine = self.engine;
        if prefixed {
            if let Some((id, _)) = engine.prefix {
                engine.model.push_symbol(id, 0, &mut self.scratch);
            }
        }
        for (k, c) in text[start..end].char_indices() {
            let end = (k + c.len_utf8()) as u32;
            match engine.ascii.get(c as usize) {
                // ASCII with a token (after the map): the table has its id.
                Some(&(id, _, _)) if id != u32::MAX => engine.model.push_symbol(id, end, &mut self.scratch),
                _ => engine.model.push_char(engine.normalized(c), end, &mut self.scratch),
            }
        }
        self.tokens.clear();
        engine.model.merge(&mut self.scratch, &mut self.tokens);
    }

    fn push_tokens(&mut self, text: &str, start: usize, splits: bool, prefixed: bool, word: u32) {
        push_tokens(&mut self.segment, text, start, &self.tokens, splits, prefixed, word);
    }
}

/// Appends tokens `(id, end within the sub-piece at start)`; `splits`: some end may fall inside
/// a character (byte tokens), so ranges are widened to character boundaries; `prefixed`: a
/// token ending at 0 is the prefix alone and covers the first character.
#[inline(always)]
fn push_tokens(
    segment: &mut Segment,
    text: &str,
    start: usize,
    tokens: &[(u32, u32)],
    splits: bool,
    prefixed: bool,
    word: u32,
) {
    let bytes = text.as_bytes();
    let mut pos = start;
    for &(id, end) in tokens {
        let mut e = start + end as usize;
        let mut s = pos;
        pos = e;
        if prefixed && end == 0 {
            e = start + text[start..].chars().next().map_or(0, char::len_utf8);
        } else if splits {
            while s > 0 && s < bytes.len() && !is_char_start(bytes[s]) {
                s -= 1;
            }
            while e < bytes.len() && !is_char_start(bytes[e]) {
                e += 1;
            }
        }
        segment.ids.push(id);
        segment.offsets.push((s, e));
        segment.word_ids.push(word);
    }
}

impl Engine for SpmEngine {
    fn name(&self) -> &'static str {
        "spm"
    }

    fn encode_segment(&self, segment: &str) -> Result<Segment> {
        Ok(self.encode(segment, false))
    }

    fn encode_continuation(&self, segment: &str) -> Result<Segment> {
        Ok(self.encode(segment, true))
    }

    fn encodes_continuations(&self) -> bool {
        true
    }
}
