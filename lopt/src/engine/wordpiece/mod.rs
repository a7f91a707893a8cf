//! The native WordPiece engine: BertNormalizer + BertPreTokenizer + WordPiece (+ added tokens),
//! in one pass over each segment, with the offsets HF reports.
//!
//! Job: [`WordPieceEngine::encode_segment`] returns exactly what `HfEngine::encode_segment`
//! returns for the same segment (ids, byte offsets into the segment, word ids, pre-token count).
//! `Segment::tokens` stays empty (strings are looked up by id after the merge) unless some added
//! token's string is the text it matched rather than its content (lstrip/rstrip, a normalized
//! form): then every segment carries all its token strings.
//!
//! How: the segment is cut at added tokens ([`added`]); each piece between them is scanned once.
//! (Tokenizers with added tokens matched on normalized text take the exact path for every piece,
//! since the second match needs the normalized text.)
//! Every input character is normalized on its own ([`normalize`]) and every normalized character
//! it yields is aligned to that input character's byte range, which is what HF's positional
//! alignment gives as long as NFD does not reorder combining marks; when it would, the piece is
//! redone with [`normalize::Bert::normalize_exact`], a literal replay of HF's transforms. The
//! pre-tokenizer's classes are applied to the normalized characters as they come, and each word
//! goes to the [`model`] as soon as it ends.
//!
//! Invariants:
//! * a word in *direct* mode is a run of ASCII bytes of the segment that normalize one-to-one
//!   (possibly lowercased), so its normalized byte `i` comes from segment byte `start + i` and no
//!   normalized text or offset table is built for it; anything else switches the word to
//!   *mapped* mode, where `bytes` holds the normalized word and `map` the original range of each
//!   normalized byte;
//! * a token spanning normalized bytes `s..e` of a word has the offsets
//!   `(map[s].0, map[e - 1].1)`, HF's `expand_alignments`;
//! * word ids count pre-tokens of the segment, added tokens included, empty pieces excluded.

mod added;
mod model;
mod normalize;
#[cfg(test)]
mod tests;

use serde_json::Value;

use super::out::Out;
use super::{Engine, Segment};
use crate::doc::Doc;
use crate::engine::bpe::bits::Kernel;
use crate::error::{Error, Result};
use added::{Added, Split};
use model::WordPiece;
use normalize::{classify, Bert, BertOptions, Class, Kind};

/// The native WordPiece engine; see the module documentation.
#[derive(Debug)]
pub struct WordPieceEngine {
    bert: Bert,
    model: WordPiece,
    /// Added tokens matched on the raw segment.
    added: Option<Added>,
    /// Added tokens matched on each normalized piece (in their normalized form).
    normalized_added: Option<Added>,
    /// Token strings by id, when some added token's string is the matched text rather than its
    /// content (lstrip/rstrip, a normalized form): then every segment carries its token strings.
    strings: Option<Vec<String>>,
}

impl WordPieceEngine {
    /// [`Self::new`] of a file parsed into a `Value` (tests).
    #[cfg(test)]
    pub(crate) fn from_json(json: &Value) -> std::result::Result<WordPieceEngine, String> {
        Self::new(&Doc::from_value(json.clone()))
    }

    /// Builds the engine from a parsed `tokenizer.json`.
    ///
    /// # Errors
    /// The reason when some component is not one this engine reproduces exactly: a model other
    /// than WordPiece, a normalizer other than BertNormalizer (or none), a pre-tokenizer other
    /// than BertPreTokenizer.
    pub fn new(doc: &Doc<'_>) -> std::result::Result<WordPieceEngine, String> {
        let json = &doc.json;
        let model_json = &json["model"];
        if model_json["type"].as_str() != Some("WordPiece") {
            return Err(format!("model {} is not WordPiece", model_json["type"].as_str().unwrap_or("?")));
        }
        let options = match &json["normalizer"] {
            Value::Null => BertOptions::IDENTITY,
            n if n["type"].as_str() == Some("BertNormalizer") => {
                let flag = |key: &str| n[key].as_bool().unwrap_or(true);
                let lowercase = flag("lowercase");
                BertOptions {
                    clean_text: flag("clean_text"),
                    handle_chinese_chars: flag("handle_chinese_chars"),
                    strip_accents: n["strip_accents"].as_bool().unwrap_or(lowercase),
                    lowercase,
                }
            }
            n => return Err(format!("normalizer {} is not BertNormalizer", n["type"].as_str().unwrap_or("?"))),
        };
        if json["pre_tokenizer"]["type"].as_str() != Some("BertPreTokenizer") {
            return Err(format!(
                "pre-tokenizer {} is not BertPreTokenizer",
                json["pre_tokenizer"]["type"].as_str().unwrap_or("none")
            ));
        }
        let (model, vocab) = WordPiece::from_doc(doc)?;
        let bert = Bert::new(options);
        let has_normalizer = !json["normalizer"].is_null();
        let (added, normalized_added) = Added::from_json(&json["added_tokens"], &vocab, |content| {
            if has_normalizer {
                bert.normalize_exact(content).into_iter().map(|(c, _)| c).collect()
            } else {
                content.to_owned()
            }
        })?;
        let differ = added.iter().chain(&normalized_added).any(Added::values_differ);
        let strings = differ.then(|| vocab.strings());
        Ok(WordPieceEngine { bert, model, added, normalized_added, strings })
    }

    /// The same engine, its word runs scanned with `kernel` (`TokenizerBuilder::scalar_kernels`).
    pub(crate) fn with_kernel(mut self, kernel: Kernel) -> Self {
        self.bert = self.bert.with_kernel(kernel);
        self
    }
}

impl Engine for WordPieceEngine {
    fn name(&self) -> &'static str {
        "wordpiece"
    }

    fn encode_segment(&self, segment: &str) -> Result<Segment> {
        self.encode::<true>(segment)
    }

    fn encode_ids(&self, segment: &str, _continuation: bool) -> Result<Vec<u32>> {
        // A segment's start needs no continuation here: the pipeline has no Prepend.
        Ok(self.encode::<false>(segment)?.ids)
    }
}

impl WordPieceEngine {
    /// Encodes a segment; without `FULL`, only its ids (the offset and word-id columns and the
    /// token strings stay empty; monomorphized, so the per-token writes test no mode).
    fn encode<const FULL: bool>(&self, segment: &str) -> Result<Segment> {
        // English runs about 3.2 bytes a token: a quarter of the length made every column grow
        // once (a copy of each, and fresh pages to fault in). Half covers nearly all text, and
        // the capacity never touched costs no pages.
        let capacity = segment.len() / 2 + 8;
        let mut out = Columns::<FULL> { rows: Out::with_capacity(capacity), tokens: Vec::new() };
        let mut scratch = Scratch::default();
        match &self.added {
            None => self.piece(segment, 0, &mut out, &mut scratch)?,
            Some(added) => {
                let mut splits = Vec::new();
                added.split(segment, &mut splits);
                for split in splits {
                    match split {
                        Split::Text(s, e) => self.piece(&segment[s..e], s, &mut out, &mut scratch)?,
                        Split::Token(id, s, e) => self.push_added(id, (s, e), &segment[s..e], &mut out),
                    }
                }
            }
        }
        let mut segment = out.rows.finish();
        segment.tokens = out.tokens;
        Ok(segment)
    }
}

/// The segment being written: the BPE engine's output columns (one capacity check per token
/// instead of one per column) and the token strings, when the engine writes them.
struct Columns<const FULL: bool> {
    rows: Out<FULL>,
    tokens: Vec<String>,
}

/// Buffers reused across the words of one segment.
#[derive(Default)]
struct Scratch {
    /// The current word in mapped mode: normalized bytes and, per byte, its original range.
    bytes: Vec<u8>,
    map: Vec<(usize, usize)>,
    /// Normalized characters of one input character.
    chars: Vec<char>,
}

/// The word being accumulated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Word {
    None,
    /// Segment bytes `start..end`, ASCII, normalizing one-to-one.
    Direct(usize, usize),
    /// In `Scratch::bytes` / `Scratch::map`.
    Mapped,
}

impl WordPieceEngine {
    /// Appends an added token as a word of its own; `value` is the text it matched.
    fn push_added<const FULL: bool>(&self, id: u32, offsets: (usize, usize), value: &str, out: &mut Columns<FULL>) {
        let rows = &mut out.rows;
        rows.row(id, offsets, rows.words);
        if !FULL {
            return;
        }
        rows.added_words.push(rows.words);
        rows.words += 1;
        if self.strings.is_some() {
            out.tokens.push(value.to_owned());
        }
    }

    /// Normalizes, pre-tokenizes and tokenizes one piece without raw added tokens: `text` starts
    /// at byte `base` of the segment.
    fn piece<const FULL: bool>(
        &self,
        text: &str,
        base: usize,
        out: &mut Columns<FULL>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        if let Some(added) = &self.normalized_added {
            return self.piece_with_added(added, text, base, out, scratch);
        }
        let mark = (out.rows.len(), out.rows.words);
        if self.piece_fast(text, base, out, scratch)?.is_err() {
            out.rows.truncate(mark.0);
            out.tokens.truncate(mark.0);
            out.rows.words = mark.1;
            self.piece_exact(text, base, out, scratch)?;
        }
        Ok(())
    }

    /// The one-pass scan; `Ok(Err(Reorder))` when the piece must be redone exactly.
    fn piece_fast<const FULL: bool>(
        &self,
        text: &str,
        base: usize,
        out: &mut Columns<FULL>,
        scratch: &mut Scratch,
    ) -> Result<std::result::Result<(), normalize::Reorder>> {
        let bytes = text.as_bytes();
        let lowercase = self.bert.options.lowercase;
        let mut word = Word::None;
        let mut last_ccc = 0u8;
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b < 0x80 {
                match self.bert.ascii_kind(b) {
                    Kind::Word(_) => {
                        // A run of ASCII word bytes at once.
                        let run = i;
                        i = self.bert.word_run_end(bytes, i + 1);
                        let (s, e) = (base + run, base + i);
                        word = match word {
                            Word::None => Word::Direct(s, e),
                            Word::Direct(ws, we) if we == s => Word::Direct(ws, e),
                            w => {
                                self.to_mapped(w, text, base, scratch);
                                let raw = &bytes[run..i];
                                if lowercase {
                                    scratch.bytes.extend(raw.iter().map(u8::to_ascii_lowercase));
                                } else {
                                    scratch.bytes.extend_from_slice(raw);
                                }
                                scratch.map.extend((s..e).map(|k| (k, k + 1)));
                                Word::Mapped
                            }
                        };
                        last_ccc = 0;
                        continue;
                    }
                    Kind::Space => {
                        // After a punctuation mark, and in a run of spaces, there is no word.
                        if word != Word::None {
                            self.flush(&mut word, text, base, out, scratch)?;
                        }
                        last_ccc = 0;
                        i += 1;
                        continue;
                    }
                    Kind::Punct(p) if p.is_ascii() => {
                        // After a space or another mark there is no word (code: `(`, `),`).
                        if word != Word::None {
                            self.flush(&mut word, text, base, out, scratch)?;
                        }
                        self.emit_char(p, (base + i, base + i + 1), out)?;
                        last_ccc = 0;
                        i += 1;
                        continue;
                    }
                    Kind::Removed => {
                        i += 1;
                        continue;
                    }
                    // Not expected for ASCII; the general path below handles it.
                    _ => {}
                }
            }
            let Some(c) = text[i..].chars().next() else { break };
            let len = c.len_utf8();
            let range = (base + i, base + i + len);
            match self.bert.kind(c) {
                Kind::Removed => {}
                Kind::RemovedStarter => last_ccc = 0,
                Kind::Space => {
                    self.flush(&mut word, text, base, out, scratch)?;
                    last_ccc = 0;
                }
                Kind::Punct(p) | Kind::Cjk(p) => {
                    // In Chinese text the character before is most often one of these too.
                    if word != Word::None {
                        self.flush(&mut word, text, base, out, scratch)?;
                    }
                    self.emit_char(p, range, out)?;
                    last_ccc = 0;
                }
                Kind::Word(w) => {
                    self.to_mapped(word, text, base, scratch);
                    word = Word::Mapped;
                    push_char(scratch, w, range);
                    last_ccc = 0;
                }
                Kind::Other => {
                    let mut chars = std::mem::take(&mut scratch.chars);
                    chars.clear();
                    if let Err(reorder) = self.bert.normalize_char(c, &mut last_ccc, &mut chars) {
                        scratch.chars = chars;
                        return Ok(Err(reorder));
                    }
                    for &n in &chars {
                        match classify(n) {
                            Class::Space => self.flush(&mut word, text, base, out, scratch)?,
                            Class::Punct => {
                                self.flush(&mut word, text, base, out, scratch)?;
                                self.emit_char(n, range, out)?;
                            }
                            Class::Word => {
                                self.to_mapped(word, text, base, scratch);
                                word = Word::Mapped;
                                push_char(scratch, n, range);
                            }
                        }
                    }
                    scratch.chars = chars;
                }
            }
            i += len;
        }
        self.flush(&mut word, text, base, out, scratch)?;
        Ok(Ok(()))
    }

    /// The exact path: HF's transforms replayed on the whole piece, then the same
    /// pre-tokenization and model.
    fn piece_exact<const FULL: bool>(
        &self,
        text: &str,
        base: usize,
        out: &mut Columns<FULL>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let normalized = self.bert.normalize_exact(text);
        self.words_of(&normalized, text, base, out, scratch)
    }

    /// A piece when some added tokens are matched on normalized text: the exact normalization,
    /// then HF's second `split_with_indices` on the normalized piece.
    fn piece_with_added<const FULL: bool>(
        &self,
        added: &Added,
        text: &str,
        base: usize,
        out: &mut Columns<FULL>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let chars = self.bert.normalize_exact(text);
        let normalized: String = chars.iter().map(|&(c, _)| c).collect();
        let mut starts = Vec::with_capacity(chars.len());
        let mut at = 0;
        for &(c, _) in &chars {
            starts.push(at);
            at += c.len_utf8();
        }
        // Matches start and end on char boundaries of `normalized`.
        let index = |byte: usize| starts.partition_point(|&p| p < byte);
        let mut splits = Vec::new();
        added.split(&normalized, &mut splits);
        for split in splits {
            match split {
                Split::Text(s, e) => self.words_of(&chars[index(s)..index(e)], text, base, out, scratch)?,
                Split::Token(id, s, e) => {
                    let (first, last) = (index(s), index(e) - 1);
                    let offsets = (base + chars[first].1 .0, base + chars[last].1 .1);
                    self.push_added(id, offsets, &normalized[s..e], out);
                }
            }
        }
        Ok(())
    }

    /// Pre-tokenizes normalized characters (each with its original range relative to `text`,
    /// which starts at `base`) and tokenizes the words.
    fn words_of<const FULL: bool>(
        &self,
        normalized: &[(char, (usize, usize))],
        text: &str,
        base: usize,
        out: &mut Columns<FULL>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let mut word = Word::None;
        for &(c, (s, e)) in normalized {
            let range = (base + s, base + e);
            match classify(c) {
                Class::Space => self.flush(&mut word, text, base, out, scratch)?,
                Class::Punct => {
                    self.flush(&mut word, text, base, out, scratch)?;
                    self.emit_char(c, range, out)?;
                }
                Class::Word => {
                    if word == Word::None {
                        scratch.bytes.clear();
                        scratch.map.clear();
                    }
                    word = Word::Mapped;
                    push_char(scratch, c, range);
                }
            }
        }
        self.flush(&mut word, text, base, out, scratch)
    }

    /// Switches the current word to mapped mode (starting it when there is none).
    #[inline]
    fn to_mapped(&self, word: Word, text: &str, base: usize, scratch: &mut Scratch) {
        match word {
            Word::Mapped => {}
            Word::None => {
                scratch.bytes.clear();
                scratch.map.clear();
            }
            Word::Direct(s, e) => {
                scratch.bytes.clear();
                scratch.map.clear();
                let raw = &text.as_bytes()[s - base..e - base];
                if self.bert.options.lowercase {
                    scratch.bytes.extend(raw.iter().map(u8::to_ascii_lowercase));
                } else {
                    scratch.bytes.extend_from_slice(raw);
                }
                scratch.map.extend((s..e).map(|k| (k, k + 1)));
            }
        }
    }

    /// Tokenizes the current word, if any, and resets it.
    #[inline]
    fn flush<const FULL: bool>(
        &self,
        word: &mut Word,
        text: &str,
        base: usize,
        out: &mut Columns<FULL>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        match std::mem::replace(word, Word::None) {
            Word::None => Ok(()),
            Word::Direct(s, e) => {
                let raw = &text.as_bytes()[s - base..e - base];
                if self.bert.options.lowercase && raw.iter().any(u8::is_ascii_uppercase) {
                    scratch.bytes.clear();
                    scratch.bytes.extend(raw.iter().map(u8::to_ascii_lowercase));
                    let lowered = std::mem::take(&mut scratch.bytes);
                    let r = self.emit_word(&lowered, e - s, out, |a, b| (s + a, s + b));
                    scratch.bytes = lowered;
                    r
                } else {
                    self.emit_word(raw, e - s, out, |a, b| (s + a, s + b))
                }
            }
            Word::Mapped => {
                let chars = scratch.bytes.iter().filter(|&&b| (b & 0xc0) != 0x80).count();
                let map = &scratch.map;
                self.emit_word(&scratch.bytes, chars, out, |a, b| (map[a].0, map[b - 1].1))
            }
        }
    }

    /// Appends the one-character word `c` (a punctuation mark, a CJK ideograph) as word
    /// `out.words`, at `offsets`: its token cached by the model ([`WordPiece::single`]) instead of
    /// a trie walk, else through [`emit_word`](Self::emit_word).
    #[inline(always)]
    fn emit_char<const FULL: bool>(&self, c: char, offsets: (usize, usize), out: &mut Columns<FULL>) -> Result<()> {
        let Some(id) = self.model.single(c) else {
            let mut buf = [0u8; 4];
            return self.emit_word(c.encode_utf8(&mut buf).as_bytes(), 1, out, |_, _| offsets);
        };
        if !FULL {
            out.rows.id(id);
            return Ok(());
        }
        out.rows.row(id, offsets, out.rows.words);
        if let Some(strings) = &self.strings {
            push_string(&mut out.tokens, strings, id);
        }
        out.rows.words += 1;
        Ok(())
    }

    /// Runs the model on one normalized word and appends its tokens as word `out.words` (only
    /// their ids without `FULL`, which counts no words).
    #[inline]
    fn emit_word<const FULL: bool>(
        &self,
        word: &[u8],
        chars: usize,
        out: &mut Columns<FULL>,
        offsets: impl Fn(usize, usize) -> (usize, usize),
    ) -> Result<()> {
        let word_id = out.rows.words;
        let mut sink = WordSink { out, offsets, word: word_id, strings: self.strings.as_deref() };
        self.model.tokenize(word, chars, &mut sink).map_err(Error::encode)?;
        if FULL {
            out.rows.words += 1;
        }
        Ok(())
    }
}

/// One word's tokens on their way into the segment's columns ([`model::Pieces`]): with `FULL`
/// each token's offsets (`offsets` of its range in the word) and word id, and its string when the
/// engine keeps strings; without, its id alone.
struct WordSink<'o, 's, F, const FULL: bool> {
    out: &'o mut Columns<FULL>,
    offsets: F,
    word: u32,
    strings: Option<&'s [String]>,
}

impl<F: Fn(usize, usize) -> (usize, usize), const FULL: bool> model::Pieces for WordSink<'_, '_, F, FULL> {
    #[inline(always)]
    fn piece(&mut self, id: u32, start: usize, end: usize) {
        if !FULL {
            self.out.rows.id(id);
            return;
        }
        self.out.rows.row(id, (self.offsets)(start, end), self.word);
        if let Some(strings) = self.strings {
            push_string(&mut self.out.tokens, strings, id);
        }
    }

    fn written(&self) -> usize {
        self.out.rows.len()
    }

    fn undo(&mut self, mark: usize) {
        // Strings, when kept, are one per row (`piece`).
        self.out.rows.truncate(mark);
        self.out.tokens.truncate(mark);
    }
}

/// Appends token `id`'s string. Kept out of line: it runs only for tokenizers whose added tokens
/// need the strings, and inlined it made `emit_word`'s token closure too large to inline into the
/// hot loop (+4.6 % instructions per BERT encode; callgrind, session 5).
#[inline(never)]
fn push_string(tokens: &mut Vec<String>, strings: &[String], id: u32) {
    tokens.push(strings.get(id as usize).cloned().unwrap_or_default());
}

#[inline]
fn push_char(scratch: &mut Scratch, c: char, range: (usize, usize)) {
    let mut buf = [0u8; 4];
    let encoded = c.encode_utf8(&mut buf).as_bytes();
    scratch.bytes.extend_from_slice(encoded);
    scratch.map.extend(encoded.iter().map(|_| range));
}
