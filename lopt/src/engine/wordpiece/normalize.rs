//! HF's `BertNormalizer` and `BertPreTokenizer` character classes, per character and exactly.
//!
//! HF normalizes a whole piece in stages (clean text, pad CJK, NFD + drop nonspacing marks,
//! lowercase), each a `NormalizedString` transform that aligns every output character to an
//! original range *by position*: a replacing character takes the alignment of the next unconsumed
//! character, an inserted one that of the last consumed character. Every stage here maps each
//! character on its own, so each output character is aligned to the original character it came
//! from — except when NFD's canonical reordering permutes combining marks, where positional
//! alignment no longer follows the characters. [`Bert::normalize_char`] therefore reports such a
//! permutation and the caller falls back to [`Bert::normalize_exact`], which replays HF's
//! positional transforms literally.
//!
//! The character tables are the very crates HF uses (`unicode_categories`,
//! `unicode-normalization-alignments`) and `char` methods of the same standard library, so the
//! classes agree exactly.

use std::sync::atomic::{AtomicU32, Ordering};

use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::char::{canonical_combining_class, decompose_canonical};
use unicode_normalization_alignments::UnicodeNormalization;

use crate::engine::bpe::bits::{self, Kernel};

/// The `BertNormalizer` options (strip_accents resolved: `None` follows `lowercase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct BertOptions {
    pub(super) clean_text: bool,
    pub(super) handle_chinese_chars: bool,
    pub(super) strip_accents: bool,
    pub(super) lowercase: bool,
}

impl BertOptions {
    /// No normalizer at all.
    pub(super) const IDENTITY: BertOptions =
        BertOptions { clean_text: false, handle_chinese_chars: false, strip_accents: false, lowercase: false };
}

/// HF's `normalizers::bert::is_whitespace`.
fn is_bert_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// HF's `normalizers::bert::is_control`.
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

/// HF's `normalizers::bert::is_chinese_char`.
pub(super) fn is_chinese_char(c: char) -> bool {
    matches!(
        c as usize,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

/// HF's `pre_tokenizers::bert::is_bert_punc`.
pub(super) fn is_bert_punc(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

/// How the pre-tokenizer treats a normalized character.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Class {
    /// Whitespace: ends a word and is removed.
    Space,
    /// Punctuation: a word of its own.
    Punct,
    /// Part of a word.
    Word,
}

pub(super) fn classify(c: char) -> Class {
    if c.is_whitespace() {
        Class::Space
    } else if is_bert_punc(c) {
        Class::Punct
    } else {
        Class::Word
    }
}

/// What one input character becomes, when that is simple enough to cache (see [`Bert::kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Removed by clean_text: not even seen by NFD.
    Removed,
    /// Becomes nothing but is an NFD starter (a nonspacing mark of combining class 0).
    RemovedStarter,
    /// One whitespace character.
    Space,
    /// One punctuation character.
    Punct(char),
    /// One word character.
    Word(char),
    /// A CJK ideograph padded with spaces: a word of its own.
    Cjk(char),
    /// Anything else: use [`Bert::normalize_char`].
    Other,
}

/// The Bert normalizer with a lazily filled per-character cache for the BMP.
///
/// Memory bound of the cache: one `AtomicU32` per BMP code point, 2^16 of them (256 KiB),
/// allocated once with the engine and shared by all threads; it never grows.
pub(super) struct Bert {
    pub(super) options: BertOptions,
    /// Packed [`Kind`] per BMP character (0 = not computed yet); races only store equal values.
    cache: Box<[AtomicU32]>,
    /// Kind of each ASCII byte, computed up front.
    ascii: [Kind; 128],
    /// Per byte: an ASCII word character that maps to one byte; `false` for every byte >= 0x80,
    /// so that scanning a run needs one lookup per byte.
    ascii_word: [bool; 256],
    /// Whether [`Bert::word_run_end`] tests 8 bytes at once: `ascii_word` holds exactly the ASCII
    /// letters and digits (every BERT tokenizer) and the kernel is the bulk one (not the scalar
    /// twin, [`Bert::with_kernel`]); else it uses the table.
    alnum_words: bool,
}

impl std::fmt::Debug for Bert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bert").field("options", &self.options).finish_non_exhaustive()
    }
}

/// Canonical reordering would permute combining marks: positional alignment applies.
#[derive(Debug)]
pub(super) struct Reorder;

const TAG_BITS: u32 = 3;

fn pack(kind: Kind) -> u32 {
    let (tag, c) = match kind {
        Kind::Removed => (1, '\0'),
        Kind::RemovedStarter => (2, '\0'),
        Kind::Space => (3, '\0'),
        Kind::Punct(c) => (4, c),
        Kind::Word(c) => (5, c),
        Kind::Cjk(c) => (6, c),
        Kind::Other => (7, '\0'),
    };
    (u32::from(c) << TAG_BITS) | tag
}

fn unpack(v: u32) -> Option<Kind> {
    let c = char::from_u32(v >> TAG_BITS).unwrap_or('\0');
    Some(match v & ((1 << TAG_BITS) - 1) {
        1 => Kind::Removed,
        2 => Kind::RemovedStarter,
        3 => Kind::Space,
        4 => Kind::Punct(c),
        5 => Kind::Word(c),
        6 => Kind::Cjk(c),
        7 => Kind::Other,
        _ => return None,
    })
}

impl Bert {
    pub(super) fn new(options: BertOptions) -> Bert {
        let cache = (0..0x10000).map(|_| AtomicU32::new(0)).collect();
        let mut bert = Bert { options, cache, ascii: [Kind::Other; 128], ascii_word: [false; 256], alnum_words: false };
        for b in 0..128u8 {
            let kind = bert.compute_kind(char::from(b));
            bert.ascii[usize::from(b)] = kind;
            // The engine's direct mode relies on this mapping; anything else goes the long way.
            let lowered = if options.lowercase { b.to_ascii_lowercase() } else { b };
            bert.ascii_word[usize::from(b)] = kind == Kind::Word(char::from(lowered));
            if let Kind::Word(_) = kind {
                if !bert.ascii_word[usize::from(b)] {
                    bert.ascii[usize::from(b)] = Kind::Other;
                }
            }
        }
        bert.alnum_words = (0..=255u8).all(|b| bert.ascii_word[usize::from(b)] == b.is_ascii_alphanumeric());
        bert
    }

    /// The same normalizer, its word runs scanned with `kernel` (`TokenizerBuilder::scalar_kernels`).
    pub(super) fn with_kernel(mut self, kernel: Kernel) -> Bert {
        self.alnum_words &= kernel == Kernel::Bulk;
        self
    }

    /// The end of the run of ASCII word bytes ([`Bert::ascii_is_word`]) that starts at `i`.
    ///
    /// Eight bytes at a time ([`bits::alphanumeric_end`]) where the word bytes are the letters and
    /// digits, one table lookup per byte otherwise and on the scalar kernel (the twin the
    /// differential tests also run).
    #[inline]
    pub(super) fn word_run_end(&self, bytes: &[u8], mut i: usize) -> usize {
        if self.alnum_words {
            return bits::alphanumeric_end(bytes, i);
        }
        while i < bytes.len() && self.ascii_is_word(bytes[i]) {
            i += 1;
        }
        i
    }

    /// The kind of an ASCII byte.
    #[inline]
    pub(super) fn ascii_kind(&self, b: u8) -> Kind {
        self.ascii[usize::from(b & 0x7f)]
    }

    /// Whether a byte is an ASCII word character that maps to one byte (its lowercase, when
    /// lowercasing).
    #[inline]
    pub(super) fn ascii_is_word(&self, b: u8) -> bool {
        self.ascii_word[usize::from(b)]
    }

    /// The kind of `c`, cached for the BMP.
    #[inline]
    pub(super) fn kind(&self, c: char) -> Kind {
        let Some(slot) = self.cache.get(c as usize) else { return self.compute_kind(c) };
        if let Some(kind) = unpack(slot.load(Ordering::Relaxed)) {
            return kind;
        }
        let kind = self.compute_kind(c);
        slot.store(pack(kind), Ordering::Relaxed);
        kind
    }

    fn compute_kind(&self, c: char) -> Kind {
        if self.options.clean_text && is_removed_by_clean(c) {
            return Kind::Removed;
        }
        let mut out = Vec::new();
        let mut touched = false;
        self.stages(c, &mut out, &mut |k| touched |= k != 0);
        if touched {
            return Kind::Other;
        }
        match out.as_slice() {
            [] => Kind::RemovedStarter,
            [' ', x, ' '] if self.options.handle_chinese_chars && is_chinese_char(c) => Kind::Cjk(*x),
            [x] => match classify(*x) {
                Class::Space => Kind::Space,
                Class::Punct => Kind::Punct(*x),
                Class::Word => Kind::Word(*x),
            },
            _ => Kind::Other,
        }
    }

    /// Appends what `c` normalizes to (every character aligned to `c`). `last_ccc` carries the
    /// combining class of the last nonstarter since the last NFD starter across calls.
    ///
    /// # Errors
    /// [`Reorder`] when NFD would reorder combining marks here (see the module documentation).
    pub(super) fn normalize_char(&self, c: char, last_ccc: &mut u8, out: &mut Vec<char>) -> Result<(), Reorder> {
        if self.options.clean_text && is_removed_by_clean(c) {
            return Ok(());
        }
        let mut reorder = false;
        self.stages(c, out, &mut |k| {
            if k != 0 {
                reorder |= *last_ccc > k;
                *last_ccc = k;
            } else {
                *last_ccc = 0;
            }
        });
        if reorder {
            Err(Reorder)
        } else {
            Ok(())
        }
    }

    /// The stages after the removal of clean_text, for one kept character; `ccc` sees the
    /// combining class of every character NFD produces, in order.
    fn stages(&self, c: char, out: &mut Vec<char>, ccc: &mut impl FnMut(u8)) {
        let o = self.options;
        let c = if o.clean_text && is_bert_whitespace(c) { ' ' } else { c };
        let padded = o.handle_chinese_chars && is_chinese_char(c);
        let push = |x: char, out: &mut Vec<char>| {
            if o.lowercase {
                out.extend(x.to_lowercase());
            } else {
                out.push(x);
            }
        };
        for (i, x) in [' ', c, ' '].into_iter().enumerate() {
            if !padded && i != 1 {
                continue;
            }
            if o.strip_accents {
                decompose_canonical(x, |d| {
                    ccc(canonical_combining_class(d));
                    if !d.is_mark_nonspacing() {
                        push(d, out);
                    }
                });
            } else {
                push(x, out);
            }
        }
    }

    /// HF's normalization of a whole piece, replayed transform by transform with positional
    /// alignment: each output character with its original byte range, relative to `piece`.
    pub(super) fn normalize_exact(&self, piece: &str) -> Vec<(char, (usize, usize))> {
        let o = self.options;
        let mut chars: Vec<(char, (usize, usize))> =
            piece.char_indices().map(|(i, c)| (c, (i, i + c.len_utf8()))).collect();
        if o.clean_text {
            chars.retain(|&(c, _)| !is_removed_by_clean(c));
            for (c, _) in &mut chars {
                if is_bert_whitespace(*c) {
                    *c = ' ';
                }
            }
        }
        if o.handle_chinese_chars {
            chars = chars
                .into_iter()
                .flat_map(|(c, a)| {
                    let n = if is_chinese_char(c) { 3 } else { 1 };
                    let seq = if n == 3 { [' ', c, ' '] } else { [c, c, c] };
                    seq.into_iter().take(n).map(move |x| (x, a))
                })
                .collect();
        }
        if o.strip_accents {
            let text: String = chars.iter().map(|&(c, _)| c).collect();
            let mut next = 0usize;
            let mut out = Vec::with_capacity(chars.len());
            for (c, change) in text.nfd() {
                let align = if change > 0 {
                    // Inserted: the alignment of the last consumed character, (0, 0) if none.
                    next.checked_sub(1).and_then(|i| chars.get(i)).map_or((0, 0), |&(_, a)| a)
                } else {
                    let a = chars.get(next).map_or((0, 0), |&(_, a)| a);
                    next += 1 + change.unsigned_abs();
                    a
                };
                out.push((c, align));
            }
            out.retain(|&(c, _)| !c.is_mark_nonspacing());
            chars = out;
        }
        if o.lowercase {
            chars = chars.into_iter().flat_map(|(c, a)| c.to_lowercase().map(move |l| (l, a))).collect();
        }
        chars
    }
}

fn is_removed_by_clean(c: char) -> bool {
    c == '\0' || c == '\u{fffd}' || is_control(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 8-byte run scan ends where the per-byte table does, for every byte value in every
    /// position of a chunk, and on random mixes of word and other bytes.
    #[test]
    fn word_runs_match_the_table() {
        for lowercase in [false, true] {
            let bert = Bert::new(BertOptions {
                clean_text: true,
                handle_chinese_chars: true,
                strip_accents: lowercase,
                lowercase,
            });
            assert!(bert.alnum_words);
            let by_table = |bytes: &[u8], mut i: usize| {
                while i < bytes.len() && bert.ascii_is_word(bytes[i]) {
                    i += 1;
                }
                i
            };
            for b in 0..=255u8 {
                for at in 0..12 {
                    let mut bytes = vec![b'a'; 12];
                    bytes[at] = b;
                    assert_eq!(bert.word_run_end(&bytes, 0), by_table(&bytes, 0), "byte {b:#x} at {at}");
                }
            }
            let alphabet: Vec<u8> = b"azAZ09 .-_@[`{/:\x7f".iter().copied().chain([0x80, 0xc3, 0xff]).collect();
            let mut state = 0x9e37_79b9_7f4a_7c15;
            for len in 0..40 {
                let bytes = crate::engine::random_word(&mut state, &alphabet, len);
                for i in 0..len {
                    assert_eq!(bert.word_run_end(&bytes, i), by_table(&bytes, i));
                }
            }
        }
    }

    #[test]
    fn packing_round_trips() {
        for kind in [Kind::Removed, Kind::RemovedStarter, Kind::Space, Kind::Punct('，'), Kind::Word('é'), Kind::Other]
        {
            assert_eq!(unpack(pack(kind)), Some(kind));
        }
        assert_eq!(unpack(0), None);
    }

    #[test]
    fn uncased_kinds() {
        let bert = Bert::new(BertOptions {
            clean_text: true,
            handle_chinese_chars: true,
            strip_accents: true,
            lowercase: true,
        });
        assert_eq!(bert.kind('\u{b}'), Kind::Removed, "vertical tab is Cc: removed before whitespace mapping");
        assert_eq!(bert.kind('\u{a0}'), Kind::Space);
        assert_eq!(bert.kind('A'), Kind::Word('a'));
        assert_eq!(bert.kind('中'), Kind::Cjk('中'));
        assert_eq!(bert.kind('\u{301}'), Kind::Other, "a nonstarter must go through reorder tracking");
        assert_eq!(bert.kind('\u{1fef}'), Kind::Punct('`'), "GREEK VARIA decomposes to a backtick");
    }
}
