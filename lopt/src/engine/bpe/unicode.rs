//! Character classes of the split regexes, as Oniguruma (the regex engine behind HF's `Split`)
//! defines them: `\p{L}` and its subcategories, `\p{N}`, `\p{M}`, `\p{P}`, `\p{S}` and `\s`.
//!
//! Every code point gets one [`Class`] code, looked up in a two-level table built once per process
//! from `regex-syntax`'s Unicode tables. Invariant: `regex-syntax` and the bundled Oniguruma use the
//! same Unicode version (16.0), and the unit test `classes_match_oniguruma` checks every code point
//! against Oniguruma itself, so a version drift in either crate fails the tests instead of
//! silently changing tokens.
//!
//! The normalization helpers ([`first_change`], [`is_unchanged`]) answer "where does NFC, NFD, NFKC
//! or NFKD change this text" with the tables of `unicode-normalization-alignments`, the crate HF
//! normalizes with, so the answer is what HF's own normalizer would do.

use std::sync::OnceLock;

use regex_syntax::hir::{Class as HirClass, HirKind};
use unicode_normalization_alignments::char::canonical_combining_class;
use unicode_normalization_alignments::{is_nfc_quick, is_nfd_quick, is_nfkc_quick, is_nfkd_quick, IsNormalized};

use super::bits::Kernel;

/// The class of one code point. The general categories that the patterns distinguish, plus
/// white space (`\s`), which is disjoint from all of them.
pub(crate) type Class = u8;

pub(crate) const OTHER: Class = 0;
pub(crate) const LU: Class = 1;
pub(crate) const LL: Class = 2;
pub(crate) const LT: Class = 3;
pub(crate) const LM: Class = 4;
pub(crate) const LO: Class = 5;
pub(crate) const MARK: Class = 6;
pub(crate) const NUMBER: Class = 7;
pub(crate) const PUNCT: Class = 8;
pub(crate) const SYMBOL: Class = 9;
pub(crate) const SPACE: Class = 10;

/// Class sets, as bit masks over class codes (`1 << class`).
pub(crate) type Set = u16;

const fn bit(c: Class) -> Set {
    1 << c
}

/// `\p{L}`.
pub(crate) const S_L: Set = bit(LU) | bit(LL) | bit(LT) | bit(LM) | bit(LO);
/// `\p{N}`.
pub(crate) const S_N: Set = bit(NUMBER);
/// `\s`.
pub(crate) const S_WS: Set = bit(SPACE);
/// `[\p{L}\p{M}]`.
pub(crate) const S_LM: Set = S_L | bit(MARK);
/// `[\p{P}\p{S}]`.
pub(crate) const S_PS: Set = bit(PUNCT) | bit(SYMBOL);
/// `[^\s\p{L}\p{N}]`.
pub(crate) const S_NOT_WS_L_N: Set = !(S_WS | S_L | S_N);
/// o200k's upper-ish run: `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
pub(crate) const S_UPPER: Set = bit(LU) | bit(LT) | bit(LM) | bit(LO) | bit(MARK);
/// o200k's lower-ish run: `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
pub(crate) const S_LOWER: Set = bit(LL) | bit(LM) | bit(LO) | bit(MARK);

#[inline]
pub(crate) fn in_set(class: Class, set: Set) -> bool {
    set & (1 << class) != 0
}

/// The lead bytes of 3-byte characters that are all `\p{Lo}`: 0xe5..=0xe9 lead U+5000..=U+9FFF,
/// CJK ideographs, most of Chinese text (the test `cjk_leads_are_lo` checks every code point).
/// Scanners classify such a character, or a run of them ([`super::bits::lead3_run_end`]), by its
/// first byte alone.
pub(crate) const CJK_LEAD_FIRST: u8 = 0xe5;
/// See [`CJK_LEAD_FIRST`].
pub(crate) const CJK_LEAD_LAST: u8 = 0xe9;

/// Two-level table: `blocks[index[cp >> 8] * 256 + (cp & 0xff)]`.
struct Table {
    index: Vec<u16>,
    blocks: Vec<Class>,
    ascii: [Class; 128],
    /// Per 64 code points below U+10000 (`cp >> 6`): their class when all 64 share it, else
    /// [`MIXED`]. A 3-byte character's block is read off its first two bytes, so CJK, kana and
    /// Hangul text is classified without decoding each character.
    uniform: Vec<Class>,
}

/// A [`Table::uniform`] entry whose 64 code points have more than one class.
const MIXED: Class = u8::MAX;

static TABLE: OnceLock<Table> = OnceLock::new();

fn table() -> &'static Table {
    TABLE.get_or_init(build_table)
}

/// Forces the table to be built (engine construction, so that the first segment does not pay).
pub(crate) fn init() {
    let _ = table();
}

fn ranges_of(pattern: &str) -> Vec<(u32, u32)> {
    // The patterns are constants known to parse; an error would be a programming bug, and an
    // empty class then fails the exhaustive test.
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else { return Vec::new() };
    match hir.kind() {
        HirKind::Class(HirClass::Unicode(class)) => {
            class.ranges().iter().map(|r| (u32::from(r.start()), u32::from(r.end()))).collect()
        }
        _ => Vec::new(),
    }
}

fn build_table() -> Table {
    const PLANE: usize = 0x110000;
    let mut flat = vec![OTHER; PLANE];
    let classes: [(&str, Class); 10] = [
        (r"\p{Lu}", LU),
        (r"\p{Ll}", LL),
        (r"\p{Lt}", LT),
        (r"\p{Lm}", LM),
        (r"\p{Lo}", LO),
        (r"\p{M}", MARK),
        (r"\p{N}", NUMBER),
        (r"\p{P}", PUNCT),
        (r"\p{S}", SYMBOL),
        // Oniguruma's `\s` is Unicode White_Space.
        (r"\p{White_Space}", SPACE),
    ];
    for (pattern, class) in classes {
        for (lo, hi) in ranges_of(pattern) {
            for slot in &mut flat[lo as usize..=hi as usize] {
                *slot = class;
            }
        }
    }
    let mut index = Vec::with_capacity(PLANE >> 8);
    let mut blocks: Vec<Class> = Vec::new();
    let mut seen: std::collections::HashMap<&[Class], u16> = std::collections::HashMap::new();
    for block in flat.chunks(256) {
        let next = u16::try_from(blocks.len() / 256).unwrap_or(u16::MAX);
        let id = *seen.entry(block).or_insert_with(|| {
            blocks.extend_from_slice(block);
            next
        });
        index.push(id);
    }
    let mut ascii = [OTHER; 128];
    ascii.copy_from_slice(&flat[..128]);
    let uniform = flat[..0x10000]
        .chunks(64)
        .map(|block| if block.iter().all(|&c| c == block[0]) { block[0] } else { MIXED })
        .collect();
    Table { index, blocks, ascii, uniform }
}

/// The class of `c`.
#[cfg(test)]
pub(crate) fn class_of(c: char) -> Class {
    let t = table();
    let cp = c as usize;
    if cp < 128 {
        return t.ascii[cp];
    }
    let block = usize::from(t.index[cp >> 8]);
    t.blocks[block * 256 + (cp & 0xff)]
}

/// A class lookup bound to the table, so the hot loops pay the `OnceLock` check once.
#[derive(Clone, Copy)]
pub(crate) struct Classes {
    table: &'static Table,
}

impl Classes {
    pub(crate) fn get() -> Self {
        Classes { table: table() }
    }

    /// The class of the character starting at byte `i` of `s` (a char boundary), and its length.
    #[inline(always)]
    pub(crate) fn at(self, s: &[u8], i: usize) -> (Class, usize) {
        let b = s[i];
        if b < 0x80 {
            return (self.table.ascii[usize::from(b)], 1);
        }
        if b & 0xf0 == 0xe0 {
            // Lead bytes `CJK_LEAD_FIRST..=CJK_LEAD_LAST`: CJK ideographs, all `\p{Lo}` (the
            // tests `cjk_leads_are_lo` and `at_is_class_of` check every code point): most of
            // Chinese text, no table load.
            if b.wrapping_sub(CJK_LEAD_FIRST) <= CJK_LEAD_LAST - CJK_LEAD_FIRST {
                return (LO, 3);
            }
            // U+4E00..=U+4FFF, the first CJK ideographs (common ones among them), the same way.
            if b == 0xe4 && s[i + 1] >= 0xb8 {
                return (LO, 3);
            }
            // A 3-byte character: its block of 64 code points is `(b & 0x0f) << 6 | (s[i + 1] &
            // 0x3f)`; when the block has one class the third byte is not needed.
            let block = usize::from(b & 0x0f) << 6 | usize::from(s[i + 1] & 0x3f);
            if let Some(&class) = self.table.uniform.get(block).filter(|&&c| c != MIXED) {
                return (class, 3);
            }
        }
        let (cp, len) = decode(s, i);
        let block = usize::from(self.table.index[cp as usize >> 8]);
        (self.table.blocks[block * 256 + (cp as usize & 0xff)], len)
    }
}

/// Decodes the UTF-8 character at byte `i` of valid UTF-8 `s`; returns the code point and its
/// length in bytes.
#[inline(always)]
pub(crate) fn decode(s: &[u8], i: usize) -> (u32, usize) {
    let b0 = u32::from(s[i]);
    if b0 < 0x80 {
        (b0, 1)
    } else if b0 < 0xe0 {
        (((b0 & 0x1f) << 6) | (u32::from(s[i + 1]) & 0x3f), 2)
    } else if b0 < 0xf0 {
        (((b0 & 0x0f) << 12) | ((u32::from(s[i + 1]) & 0x3f) << 6) | (u32::from(s[i + 2]) & 0x3f), 3)
    } else {
        (
            ((b0 & 0x07) << 18)
                | ((u32::from(s[i + 1]) & 0x3f) << 12)
                | ((u32::from(s[i + 2]) & 0x3f) << 6)
                | (u32::from(s[i + 3]) & 0x3f),
            4,
        )
    }
}

/// A Unicode normalization form, as HF's `NFC`, `NFD`, `NFKC` and `NFKD` normalizers apply it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    Nfc,
    Nfd,
    Nfkc,
    Nfkd,
}

impl Form {
    /// The form a normalizer `type` names.
    pub(crate) fn from_type(name: &str) -> Option<Form> {
        Some(match name {
            "NFC" => Form::Nfc,
            "NFD" => Form::Nfd,
            "NFKC" => Form::Nfkc,
            "NFKD" => Form::Nfkd,
            _ => return None,
        })
    }

    fn index(self) -> usize {
        self as usize
    }

    fn quick_check(self, c: char) -> IsNormalized {
        let one = std::iter::once(c);
        match self {
            Form::Nfc => is_nfc_quick(one),
            Form::Nfd => is_nfd_quick(one),
            Form::Nfkc => is_nfkc_quick(one),
            Form::Nfkd => is_nfkd_quick(one),
        }
    }

    /// The normalized text and, per output character, HF's `change` (see `normalize_aligned`).
    pub(crate) fn normalize<'a>(self, s: &'a str) -> Box<dyn Iterator<Item = (char, isize)> + 'a> {
        use unicode_normalization_alignments::UnicodeNormalization;
        match self {
            Form::Nfc => Box::new(s.nfc()),
            Form::Nfd => Box::new(s.nfd()),
            Form::Nfkc => Box::new(s.nfkc()),
            Form::Nfkd => Box::new(s.nfkd()),
        }
    }
}

/// Per form, the BMP code points that start a normalization boundary whatever surrounds them:
/// quick check Yes and canonical combining class 0 (by the normalizer HF uses). One bit each.
static SAFE_BMP: [OnceLock<Vec<u64>>; 4] = [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];

fn safe_bmp(form: Form) -> &'static [u64] {
    SAFE_BMP[form.index()].get_or_init(|| {
        let mut bits = vec![0u64; 0x10000 / 64];
        for cp in 0..0x10000u32 {
            let Some(c) = char::from_u32(cp) else { continue };
            if canonical_combining_class(c) == 0 && form.quick_check(c) == IsNormalized::Yes {
                bits[cp as usize / 64] |= 1 << (cp % 64);
            }
        }
        bits
    })
}

/// Per form, whether every code point that a lead byte in `CJK_SAFE_FIRST..=CJK_SAFE_LAST` starts
/// is in [`SAFE_BMP`]: then [`first_change`] skips runs of such characters by their lead bytes.
static SAFE_CJK: [OnceLock<bool>; 4] = [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];

/// Lead bytes 0xe4..=0xe9: U+4000..=U+9FFF, CJK ideographs (and the Yijing hexagrams), which no
/// normalization form changes or composes (checked per form against the bitset, not assumed).
const CJK_SAFE_FIRST: u8 = 0xe4;
const CJK_SAFE_LAST: u8 = 0xe9;

fn safe_cjk(form: Form) -> bool {
    *SAFE_CJK[form.index()].get_or_init(|| {
        let first = usize::from(CJK_SAFE_FIRST & 0x0f) << 12;
        let last = usize::from(CJK_SAFE_LAST & 0x0f) << 12 | 0xfff;
        safe_bmp(form).get(first / 64..=last / 64).is_some_and(|words| words.iter().all(|&w| w == u64::MAX))
    })
}

/// Forces the tables of `form` to be built.
pub(crate) fn init_form(form: Form) {
    let _ = safe_bmp(form);
    let _ = safe_cjk(form);
}

/// Whether `c` starts a normalization boundary in `form` and is left unchanged by it, whatever
/// surrounds it (the characters [`first_change`] skips).
pub(crate) fn is_stable(form: Form, c: char) -> bool {
    let cp = c as u32;
    cp < 0x80 || cp < 0x10000 && safe_bmp(form)[cp as usize / 64] & (1 << (cp % 64)) != 0
}

/// The character `form` turns `c` into when that is one character and the two do not interact
/// with their neighbours: `c` itself when it is stable ([`is_stable`]), else the single character
/// of `c`'s full decomposition (compatibility for NFKC/NFKD, canonical for NFC/NFD) when that
/// character is stable (`，` U+FF0C -> `,`, U+3000 -> ` `, a CJK compatibility ideograph -> its
/// unified one); `None` otherwise.
///
/// Why a text made only of such characters normalizes character by character (the fast path of
/// `normalize_aligned`): the full decomposition of the text is the concatenation of each
/// character's, and here each is one stable character `d` (combining class 0, quick check Yes).
/// Reordering never moves a class-0 character, and composition joins a starter only with a later
/// character that may compose with what precedes it, which has quick check Maybe (not Yes). So
/// composition changes nothing, and the normal form of the text is the sequence of the `d`s: one
/// output character per input character, which HF aligns to that input character.
#[inline]
pub(crate) fn simple_map(form: Form, c: char) -> Option<char> {
    if is_stable(form, c) {
        return Some(c);
    }
    let (mut single, mut count) = ('\0', 0u32);
    let emit = |d: char| {
        single = d;
        count += 1;
    };
    match form {
        Form::Nfkc | Form::Nfkd => unicode_normalization_alignments::char::decompose_compatible(c, emit),
        Form::Nfc | Form::Nfd => unicode_normalization_alignments::char::decompose_canonical(c, emit),
    }
    (count == 1 && is_stable(form, single)).then_some(single)
}

/// Whether `form` leaves `s` unchanged.
pub(crate) fn is_unchanged(form: Form, kernel: Kernel, s: &str) -> bool {
    first_change(form, kernel, s).is_none()
}

/// The first window of `s` that `form` changes, as a byte range: everything before it is left
/// unchanged. Fast for ASCII and for text made of boundary characters; around other characters
/// it runs the normalizer HF runs on a window and compares. `s` must start at a normalization
/// boundary (a text start, or a position where normalization is local).
///
/// Why windows suffice: a character with canonical combining class 0 and quick check Yes starts
/// a normalization boundary (it is never reordered, and never composes with what precedes it: a
/// character that can is quick check Maybe), so the normal form of a text is that of its pieces
/// cut before such characters, concatenated. A window runs from the last such character before a
/// run of other characters (which may compose or reorder with them) to the next one. `kernel`
/// scans runs of CJK lead bytes.
pub(crate) fn first_change(form: Form, kernel: Kernel, s: &str) -> Option<(usize, usize)> {
    let bytes = s.as_bytes();
    let safe = safe_bmp(form);
    let cjk = safe_cjk(form);
    let is_safe = |cp: u32| cp < 0x10000 && safe[cp as usize / 64] & (1 << (cp % 64)) != 0;
    let mut i = 0;
    // Where the last safe character starts: a boundary.
    let mut boundary = 0;
    while i < bytes.len() {
        if bytes[i] < 0x80 {
            // Every ASCII character is a boundary: skip the run, 8 bytes at a time (the bytes of
            // English text are nearly all ASCII, and this check runs over every byte).
            let j = super::bits::ascii_end(bytes, i + 1);
            boundary = j - 1;
            i = j;
            continue;
        }
        // A run of 3-byte characters whose blocks of 64 code points are all safe (CJK
        // ideographs, kana, Hangul): the block's word of the bitset is all ones, so each
        // character's own bit need not be read. The same characters as the loop below skips.
        // Runs of CJK ideographs go by their lead bytes, 16 bytes at a time, where the form
        // leaves all of them alone.
        let mut j = i;
        loop {
            let b = bytes.get(j).copied().unwrap_or(0);
            if cjk && b.wrapping_sub(CJK_SAFE_FIRST) <= CJK_SAFE_LAST - CJK_SAFE_FIRST {
                j = super::bits::lead3_run_end(kernel, bytes, j, CJK_SAFE_FIRST, CJK_SAFE_LAST);
            } else if b & 0xf0 == 0xe0
                && safe.get(usize::from(b & 0x0f) << 6 | usize::from(bytes[j + 1] & 0x3f)) == Some(&u64::MAX)
            {
                j += 3;
            } else {
                break;
            }
        }
        if j > i {
            boundary = j - 3;
            i = j;
            continue;
        }
        let (cp, len) = decode(bytes, i);
        if is_safe(cp) {
            boundary = i;
            i += len;
            continue;
        }
        let mut end = i + len;
        while end < bytes.len() {
            let (cp, len) = decode(bytes, end);
            if is_safe(cp) {
                break;
            }
            end += len;
        }
        if !is_unchanged_slow(form, &s[boundary..end]) {
            return Some((boundary, end));
        }
        boundary = end;
        i = end;
    }
    None
}

fn is_unchanged_slow(form: Form, s: &str) -> bool {
    let quick = match form {
        Form::Nfc => is_nfc_quick(s.chars()),
        Form::Nfd => is_nfd_quick(s.chars()),
        Form::Nfkc => is_nfkc_quick(s.chars()),
        Form::Nfkd => is_nfkd_quick(s.chars()),
    };
    match quick {
        IsNormalized::Yes => true,
        IsNormalized::No => false,
        IsNormalized::Maybe => form.normalize(s).map(|(c, _)| c).eq(s.chars()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code point, every class, against Oniguruma (the engine HF's Split uses).
    #[test]
    fn classes_match_oniguruma() {
        let checks: [(&str, Set); 11] = [
            (r"\p{Lu}", bit(LU)),
            (r"\p{Ll}", bit(LL)),
            (r"\p{Lt}", bit(LT)),
            (r"\p{Lm}", bit(LM)),
            (r"\p{Lo}", bit(LO)),
            (r"\p{L}", S_L),
            (r"\p{M}", bit(MARK)),
            (r"\p{N}", S_N),
            (r"\p{P}", bit(PUNCT)),
            (r"\p{S}", bit(SYMBOL)),
            (r"\s", S_WS),
        ];
        // One string holding every scalar value, scanned once per class: matches give the set.
        let all: String = (0..0x110000u32).filter_map(char::from_u32).collect();
        for (pattern, set) in checks {
            let re = onig::Regex::new(&format!("{pattern}+")).unwrap();
            let mut expected = vec![false; 0x110000];
            for (s, e) in re.find_iter(&all) {
                for c in all[s..e].chars() {
                    expected[c as usize] = true;
                }
            }
            let mut bad = Vec::new();
            for c in all.chars() {
                if in_set(class_of(c), set) != expected[c as usize] {
                    bad.push(c as u32);
                }
            }
            assert!(
                bad.is_empty(),
                "{pattern}: {} code points differ, first {:x?}",
                bad.len(),
                &bad[..bad.len().min(8)]
            );
        }
    }

    /// The windowed check agrees with normalizing the whole text, in every form, and the first
    /// changed window is where the normalized text first differs.
    #[test]
    fn windows_agree_with_whole_text() {
        let pool: Vec<char> = "ae\u{301}\u{300}\u{316}\u{308}\u{323}\u{1100}\u{1161}\u{11a8}\u{ac00}\u{212b}\u{2126}\u{f900}\u{958}\u{1e9b}\u{344}\u{f6} x한\u{327}C\u{30c}\u{5b0}\u{5bc}🙂\u{1d15e}\u{cb}\u{fb01}\u{ff21}\u{ff0c}\u{b2}\u{2075}\u{bd}\u{2163}\u{a0}\u{2026}\u{3000}\u{1e0b}\u{fe64}\u{33c4}\u{e9}"
            .chars()
            .collect();
        // CJK ideographs around the lead bytes `first_change` skips by (U+4000..=U+9FFF), next to
        // characters that compose, reorder or change, in runs longer than its 16-byte windows.
        let cjk: Vec<char> = "中丁一\u{4000}\u{4dc0}\u{4dff}\u{9fff}\u{3fff}\u{a000}\u{f900}\u{2f800}e\u{301}\u{3099}か\u{1100}\u{1161}x "
            .chars()
            .collect();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for form in [Form::Nfc, Form::Nfd, Form::Nfkc, Form::Nfkd] {
            assert!(safe_cjk(form), "{form:?}");
            for round in 0..33_000 {
                let (pool, max) = if round < 30_000 { (&pool, 12) } else { (&cjk, 24) };
                crate::engine::xorshift(&mut state);
                let len = 1 + (state % max) as usize;
                let text: String =
                    (0..len).map(|k| pool[((state >> (k * 5 % 60)) % pool.len() as u64) as usize]).collect();
                let kernel = if round % 2 == 0 { Kernel::Bulk } else { Kernel::Scalar };
                assert_eq!(is_unchanged(form, kernel, &text), is_unchanged_slow(form, &text), "{form:?} {text:?}");
                if let Some((start, end)) = first_change(form, kernel, &text) {
                    // Normalizing the prefix before the window changes nothing, and the window
                    // itself changes.
                    assert!(is_unchanged_slow(form, &text[..start]), "{form:?} {text:?}");
                    assert!(!is_unchanged_slow(form, &text[start..end]), "{form:?} {text:?}");
                }
            }
        }
    }

    /// [`first_change`] before the 8-byte ASCII skip: one byte at a time.
    fn first_change_bytewise(form: Form, s: &str) -> Option<(usize, usize)> {
        let bytes = s.as_bytes();
        let safe = safe_bmp(form);
        let is_safe = |cp: u32| cp < 0x10000 && safe[cp as usize / 64] & (1 << (cp % 64)) != 0;
        let (mut i, mut boundary) = (0, 0);
        while i < bytes.len() {
            if bytes[i] < 0x80 {
                boundary = i;
                i += 1;
                continue;
            }
            let (cp, len) = decode(bytes, i);
            if is_safe(cp) {
                boundary = i;
                i += len;
                continue;
            }
            let mut end = i + len;
            while end < bytes.len() {
                let (cp, len) = decode(bytes, end);
                if is_safe(cp) {
                    break;
                }
                end += len;
            }
            if !is_unchanged_slow(form, &s[boundary..end]) {
                return Some((boundary, end));
            }
            boundary = end;
            i = end;
        }
        None
    }

    /// The ASCII skip finds the same windows as the byte-wise scan: ASCII runs of 0-20 bytes (so
    /// runs shorter than, as long as and longer than a word, ending at every offset) between
    /// characters that change or may combine.
    #[test]
    fn ascii_skip_matches_bytewise() {
        let pool: Vec<char> =
            "\u{301}\u{316}e\u{1100}\u{1161}\u{212b}\u{fb01}\u{ff21}\u{e9}\u{a0}한🙂中国的あ가\u{11a8}\u{3099}\u{f900}\u{3000}"
                .chars()
                .collect();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for form in [Form::Nfc, Form::Nfd, Form::Nfkc, Form::Nfkd] {
            for _ in 0..20_000 {
                let mut text = String::new();
                for _ in 0..4 {
                    crate::engine::xorshift(&mut state);
                    text.extend((0..state % 21).map(|k| char::from(b'a' + ((state >> k) % 26) as u8)));
                    text.push(pool[((state >> 40) % pool.len() as u64) as usize]);
                }
                for kernel in [Kernel::Bulk, Kernel::Scalar] {
                    assert_eq!(
                        first_change(form, kernel, &text),
                        first_change_bytewise(form, &text),
                        "{form:?} {text:?}"
                    );
                }
            }
        }
    }

    /// `Classes::at` (with its shortcuts for CJK ideographs and for 3-byte characters in one-class
    /// blocks) gives every code point's class, at every position of a text.
    #[test]
    fn at_is_class_of() {
        let c = Classes::get();
        let all: String = (0..0x110000u32).filter_map(char::from_u32).collect();
        let bytes = all.as_bytes();
        let mut i = 0;
        for ch in all.chars() {
            assert_eq!(c.at(bytes, i), (class_of(ch), ch.len_utf8()), "U+{:04X}", ch as u32);
            i += ch.len_utf8();
        }
    }

    /// Every code point that a lead byte in `CJK_LEAD_FIRST..=CJK_LEAD_LAST` starts is `\p{Lo}`.
    #[test]
    fn cjk_leads_are_lo() {
        // And `at`'s other shortcut: U+4E00..=U+4FFF (0xe4 0xb8..).
        for cp in 0x4e00..=0x4fff {
            assert_eq!(class_of(char::from_u32(cp).unwrap()), LO, "U+{cp:04X}");
        }
        let first = u32::from(CJK_LEAD_FIRST & 0x0f) << 12;
        let last = (u32::from(CJK_LEAD_LAST & 0x0f) << 12) | 0xfff;
        for cp in first..=last {
            let ch = char::from_u32(cp).unwrap();
            assert_eq!(class_of(ch), LO, "U+{cp:04X}");
        }
    }

    #[test]
    fn detection() {
        assert!(is_unchanged(Form::Nfc, Kernel::Bulk, "hello 世界 ❤️ 🙂"));
        assert!(!is_unchanged(Form::Nfc, Kernel::Bulk, "e\u{301}"));
        assert!(is_unchanged(Form::Nfc, Kernel::Bulk, "\u{e9}"));
        assert!(is_unchanged(Form::Nfc, Kernel::Bulk, "x\u{301}"));
        assert!(is_unchanged(Form::Nfc, Kernel::Bulk, "\u{fb01} ＡＢ"));
        assert!(!is_unchanged(Form::Nfkc, Kernel::Bulk, "\u{fb01}"));
        assert_eq!(first_change(Form::Nfkc, Kernel::Bulk, "abc ＡＢ x"), Some((3, 10)));
        assert!(!is_unchanged(Form::Nfd, Kernel::Bulk, "\u{e9}"));
        assert!(is_unchanged(Form::Nfkd, Kernel::Bulk, "plain ascii"));
    }
}
