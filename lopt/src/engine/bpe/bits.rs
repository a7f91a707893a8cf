//! Byte classes of 64-byte blocks as bit masks, for the pre-tokenizer's bulk scanning: bit `k` of
//! a mask says whether byte `k` of the block is in the class. A run of a class then ends at the
//! first clear bit (one `trailing_zeros`) instead of one table lookup per byte.
//!
//! Each mask has three implementations that must agree on every block: SSE2 on x86-64 (part of
//! its baseline, so no run-time detection is needed), SWAR on `u64` lanes elsewhere, and the
//! scalar twin, one byte at a time. [`Kernel`] picks one; `TokenizerBuilder::scalar_kernels` makes
//! an engine use the scalar twin everywhere, so the differential suite runs both paths in one build.
//! The unit tests compare the three on random and adversarial blocks.
//!
//! Only ASCII bytes are ever set, except in [`AsciiClasses::high`], the mask of the bytes that are
//! not: a byte of a multi-byte character is never an ASCII letter, so callers go back to the
//! character-wise scanner where a run meets one.

/// Bytes per block.
pub(crate) const BLOCK: usize = 64;

/// Which implementation computes the masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// SSE2 on x86-64, SWAR elsewhere.
    Bulk,
    /// One byte at a time (the twin that checks the bulk kernels).
    Scalar,
}

impl Kernel {
    /// The bulk kernel unless `scalar` (`TokenizerBuilder::scalar_kernels`).
    pub(crate) fn of(scalar: bool) -> Kernel {
        if scalar {
            Kernel::Scalar
        } else {
            Kernel::Bulk
        }
    }

    /// The masks of the ASCII upper-case (`[A-Z]`) and lower-case (`[a-z]`) letters of `block`.
    /// Their union is `\p{L}` restricted to ASCII; `[A-Z]` is `\p{Lu}` there and `[a-z]` `\p{Ll}`.
    #[inline(always)]
    pub(crate) fn cases(self, block: &[u8; BLOCK]) -> Cases {
        match self {
            Kernel::Scalar => cases_scalar(block),
            #[cfg(target_arch = "x86_64")]
            Kernel::Bulk => cases_sse2(block),
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Bulk => cases_swar(block),
        }
    }

    /// The ASCII class masks of `block` that the block scanners of `pretok.rs` derive pre-token
    /// starts from (see [`AsciiClasses`]).
    #[inline(always)]
    pub(crate) fn ascii_classes(self, block: &[u8; BLOCK]) -> AsciiClasses {
        match self {
            Kernel::Scalar => ascii_classes_scalar(block),
            #[cfg(target_arch = "x86_64")]
            Kernel::Bulk => ascii_classes_sse2(block),
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Bulk => ascii_classes_swar(block),
        }
    }
}

/// Disjoint byte classes of one block, as masks: ASCII letters, ASCII digits, the space (0x20),
/// the printable ASCII punctuation and symbols except the apostrophe (0x21..=0x7e, not
/// alphanumeric, not `'`), the line feed (0x0a), and bytes with the high bit set (any byte of a
/// multi-byte character). A byte in none of the first five (a control character, other ASCII
/// white space, `'`, a non-ASCII byte) is what the block scanners call hard: they stop before it
/// (GPT-2's also before a line feed). Besides them, `upper` is the subset of `letter` that is
/// upper case (`[A-Z]`), for o200k's case rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AsciiClasses {
    pub(crate) letter: u64,
    pub(crate) upper: u64,
    pub(crate) digit: u64,
    pub(crate) space: u64,
    pub(crate) punct: u64,
    pub(crate) nl: u64,
    pub(crate) high: u64,
}

impl AsciiClasses {
    /// The masks of the 64 bytes from byte `off` (< 64) of the block `lo`, `hi` being the block
    /// after it.
    #[inline(always)]
    pub(crate) fn window(lo: &AsciiClasses, hi: &AsciiClasses, off: usize) -> AsciiClasses {
        if off == 0 {
            return *lo;
        }
        let join = |a: u64, b: u64| (a >> off) | (b << (BLOCK - off));
        AsciiClasses {
            letter: join(lo.letter, hi.letter),
            upper: join(lo.upper, hi.upper),
            digit: join(lo.digit, hi.digit),
            space: join(lo.space, hi.space),
            punct: join(lo.punct, hi.punct),
            nl: join(lo.nl, hi.nl),
            high: join(lo.high, hi.high),
        }
    }
}

/// Printable ASCII punctuation and symbols, apostrophe excluded (see [`AsciiClasses`]).
#[inline(always)]
fn is_block_punct(b: u8) -> bool {
    b.is_ascii_punctuation() && b != b'\''
}

/// The scalar twin.
#[inline]
fn ascii_classes_scalar(block: &[u8; BLOCK]) -> AsciiClasses {
    let mut m = AsciiClasses::default();
    for (k, &b) in block.iter().enumerate() {
        m.letter |= u64::from(b.is_ascii_alphabetic()) << k;
        m.upper |= u64::from(b.is_ascii_uppercase()) << k;
        m.digit |= u64::from(b.is_ascii_digit()) << k;
        m.space |= u64::from(b == b' ') << k;
        m.punct |= u64::from(is_block_punct(b)) << k;
        m.nl |= u64::from(b == b'\n') << k;
        m.high |= u64::from(b >= 0x80) << k;
    }
    m
}

/// SWAR on `u64` lanes.
#[inline]
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn ascii_classes_swar(block: &[u8; BLOCK]) -> AsciiClasses {
    let mut m = AsciiClasses::default();
    for (k, lane) in block.chunks_exact(8).enumerate() {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(lane);
        let x = u64::from_le_bytes(eight);
        let upper = range_swar8(x, b'A', b'Z');
        let letter = upper | range_swar8(x, b'a', b'z');
        let digit = range_swar8(x, b'0', b'9');
        let printable = range_swar8(x, b'!', b'~');
        let quote = range_swar8(x, b'\'', b'\'');
        let shift = 8 * k;
        m.letter |= letter << shift;
        m.upper |= upper << shift;
        m.digit |= digit << shift;
        m.space |= range_swar8(x, b' ', b' ') << shift;
        m.punct |= (printable & !letter & !digit & !quote) << shift;
        m.nl |= range_swar8(x, b'\n', b'\n') << shift;
        m.high |= gather_high_bits(x & HIGH) << shift;
    }
    m
}

/// SSE2, 16 bytes per step, with the range test of [`cases_sse2`]; the high bits are the sign
/// bits `movemask` reads directly.
#[cfg(target_arch = "x86_64")]
#[inline]
fn ascii_classes_sse2(block: &[u8; BLOCK]) -> AsciiClasses {
    use std::arch::x86_64::{
        _mm_add_epi8, _mm_andnot_si128, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8,
    };
    let mut m = AsciiClasses::default();
    for k in 0..BLOCK / 16 {
        // SAFETY: as in `cases_sse2`: SSE2 is in the x86-64 baseline, and the unaligned load
        // reads bytes 16k..16k+16 of the 64-byte array, in bounds for k < 4.
        let masks = unsafe {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * k).cast());
            // `first..=last` maps to the lowest `last - first + 1` signed byte values.
            let range = |first: u8, len: u8| {
                _mm_cmplt_epi8(
                    _mm_add_epi8(v, _mm_set1_epi8(0x80u8.wrapping_sub(first) as i8)),
                    _mm_set1_epi8((0x80u8.wrapping_add(len)) as i8),
                )
            };
            let upper = range(b'A', 26);
            let letter = _mm_or_si128(upper, range(b'a', 26));
            let digit = range(b'0', 10);
            let printable = range(b'!', 94);
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\'' as i8));
            let space = _mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8));
            let nl = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8));
            let punct = _mm_andnot_si128(_mm_or_si128(_mm_or_si128(letter, digit), quote), printable);
            [letter, digit, space, punct, v, upper, nl].map(|x| u64::from(_mm_movemask_epi8(x) as u16) << (16 * k))
        };
        m.letter |= masks[0];
        m.digit |= masks[1];
        m.space |= masks[2];
        m.punct |= masks[3];
        m.high |= masks[4];
        m.upper |= masks[5];
        m.nl |= masks[6];
    }
    m
}

/// Upper- and lower-case ASCII letter masks of one block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cases {
    pub(crate) upper: u64,
    pub(crate) lower: u64,
}

/// The scalar twin.
#[inline]
fn cases_scalar(block: &[u8; BLOCK]) -> Cases {
    let mut cases = Cases::default();
    for (k, b) in block.iter().enumerate() {
        cases.upper |= u64::from(b.is_ascii_uppercase()) << k;
        cases.lower |= u64::from(b.is_ascii_lowercase()) << k;
    }
    cases
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The end of the run of bytes of `s` from `from` (exclusive of the first byte that ends it), 8
/// bytes at a time: `ends(word)` is non-zero in exactly the bytes of the little-endian `word` that
/// end the run, and `ends_at(b)` says the same of one byte (for the tail). Long runs of one kind
/// (ASCII in English text, indentation) are then skipped without a test per byte.
#[inline(always)]
pub(crate) fn run_end(s: &[u8], from: usize, ends: impl Fn(u64) -> u64, ends_at: impl Fn(u8) -> bool) -> usize {
    let mut k = from;
    while let Some(chunk) = s.get(k..k + 8) {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        let stop = ends(u64::from_le_bytes(eight));
        if stop != 0 {
            return k + (stop.trailing_zeros() / 8) as usize;
        }
        k += 8;
    }
    while k < s.len() && !ends_at(s[k]) {
        k += 1;
    }
    k
}

/// The end of the ASCII run of `s` from `from` (see [`run_end`]).
#[inline(always)]
pub(crate) fn ascii_end(s: &[u8], from: usize) -> usize {
    run_end(s, from, |w| w & HIGH, |b| b >= 0x80)
}

/// Whether the 8 bytes of `s` from `from` are all there and all ASCII.
#[inline(always)]
pub(crate) fn ascii8(s: &[u8], from: usize) -> bool {
    s.get(from..from + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()).is_some_and(|w| u64::from_le_bytes(w) & HIGH == 0)
}

/// The end of the run of `byte` in `s` from `from` (see [`run_end`]).
#[inline(always)]
pub(crate) fn byte_run_end(s: &[u8], from: usize, byte: u8) -> usize {
    run_end(s, from, |w| w ^ ONES.wrapping_mul(u64::from(byte)), |b| b != byte)
}

/// The end of the run of `s` from `from` of ASCII bytes that are not digits: where a `\p{N}`
/// character may start (an ASCII digit or any multi-byte character; see [`run_end`]).
#[inline(always)]
pub(crate) fn non_digit_ascii_end(s: &[u8], from: usize) -> usize {
    run_end(s, from, |w| (w & HIGH) | in_range_lanes(w, b'0', b'9'), |b| b >= 0x80 || b.is_ascii_digit())
}

/// The end of the run of ASCII letters and digits of `s` from `from` (see [`run_end`]).
#[inline(always)]
pub(crate) fn alphanumeric_end(s: &[u8], from: usize) -> usize {
    run_end(
        s,
        from,
        // Setting bit 5 folds `A-Z` onto `a-z` and moves no other byte into that range.
        |w| !(in_range_lanes(w, b'0', b'9') | in_range_lanes(w | (0x20 * ONES), b'a', b'z')) & HIGH,
        |b| !b.is_ascii_alphanumeric(),
    )
}

/// The end of the run, from the character boundary `from` of the valid UTF-8 `s`, of 3-byte
/// characters whose lead byte is in `first..=last` (a range of 3-byte lead bytes, 0xe1..=0xef):
/// CJK ideographs by their lead byte, which the callers prove to be of one class. On
/// [`Kernel::Bulk`] (x86-64) 16 bytes at a time: a window whose bytes are all such leads or
/// continuation bytes holds only such characters (a continuation byte belongs to the lead
/// before it, and the window starts at a boundary), so the run goes on after the character of
/// its last lead; otherwise the run ends at the window's first other byte, which is not a
/// continuation byte and so a character boundary. The tail, and [`Kernel::Scalar`], go one
/// character at a time (the twin the unit tests compare it with).
#[inline(always)]
pub(crate) fn lead3_run_end(kernel: Kernel, s: &[u8], from: usize, first: u8, last: u8) -> usize {
    let mut j = from;
    #[cfg(target_arch = "x86_64")]
    if kernel == Kernel::Bulk {
        j = lead3_run_end_sse2(s, j, first, last);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = kernel;
    while s.get(j).is_some_and(|&b| b.wrapping_sub(first) <= last.wrapping_sub(first)) {
        j += 3;
    }
    // A boundary of valid UTF-8 is at most the length; `min` keeps slices by it in bounds.
    j.min(s.len())
}

/// The bulk part of [`lead3_run_end`]: whole 16-byte windows, as far as they go. Returns a
/// character boundary at which the per-character loop goes on.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn lead3_run_end_sse2(s: &[u8], from: usize, first: u8, last: u8) -> usize {
    use std::arch::x86_64::{
        _mm_add_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut j = from;
    while let Some(window) = s.get(j..j + 16) {
        // SAFETY: SSE2 is part of the x86-64 baseline; `window` is 16 bytes long (checked by
        // `get`), and `loadu` has no alignment requirement.
        let (leads, ok) = unsafe {
            let v = _mm_loadu_si128(window.as_ptr().cast());
            // As in `cases_sse2`: `first..=last` maps to the lowest signed byte values.
            let range = |lo: u8, len: u8| {
                _mm_cmplt_epi8(
                    _mm_add_epi8(v, _mm_set1_epi8(0x80u8.wrapping_sub(lo) as i8)),
                    _mm_set1_epi8(0x80u8.wrapping_add(len) as i8),
                )
            };
            let leads = range(first, last.wrapping_sub(first).wrapping_add(1));
            let cont = range(0x80, 0x40);
            (_mm_movemask_epi8(leads) as u32, _mm_movemask_epi8(_mm_or_si128(leads, cont)) as u32)
        };
        if ok != 0xffff {
            // The first other byte is a boundary (not a continuation byte) and ends the run.
            return j + (!ok).trailing_zeros() as usize;
        }
        if leads == 0 {
            // Not at a boundary: cannot happen for valid UTF-8; the per-character loop decides.
            return j;
        }
        j += (31 - leads.leading_zeros()) as usize + 3;
    }
    j
}

/// The high bit of each byte of `lanes` (all other bits clear), gathered into the low 8 bits:
/// byte `k`'s bit goes to bit `k`. The multiplier puts byte `k` at bit `56 + k` and no two partial
/// products share a bit position (8k - 7j is distinct for every pair), so nothing carries.
#[inline(always)]
fn gather_high_bits(lanes: u64) -> u64 {
    ((lanes >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

/// Eight bytes at once: the high bit of each byte of `x` in `first..=last` (both ASCII), tested
/// with additions that cannot carry between bytes (every byte is at most 0x7f once its high bit
/// is cleared, and 0x7f + 0x80 - `first` stays below 0x100).
#[inline(always)]
fn in_range_lanes(x: u64, first: u8, last: u8) -> u64 {
    let ascii = !x & HIGH;
    let y = x & !HIGH;
    let at_least_first = (y + (0x80 - u64::from(first)) * ONES) & HIGH;
    let above_last = (y + (0x80 - u64::from(last) - 1) * ONES) & HIGH;
    ascii & at_least_first & !above_last
}

/// [`in_range_lanes`] gathered into the low 8 bits (byte `k`'s bit at bit `k`).
#[inline(always)]
fn range_swar8(x: u64, first: u8, last: u8) -> u64 {
    gather_high_bits(in_range_lanes(x, first, last))
}

/// SWAR on `u64` lanes (the bulk kernel where SSE2 is not there; tested everywhere).
#[inline]
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn cases_swar(block: &[u8; BLOCK]) -> Cases {
    let mut cases = Cases::default();
    for (k, lane) in block.chunks_exact(8).enumerate() {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(lane);
        let x = u64::from_le_bytes(eight);
        cases.upper |= range_swar8(x, b'A', b'Z') << (8 * k);
        cases.lower |= range_swar8(x, b'a', b'z') << (8 * k);
    }
    cases
}

/// SSE2, 16 bytes per step: adding `0x80 - first` maps `first..=last` (26 letters), and only
/// them, to -128..=-103 as signed bytes; every other byte, ASCII or not, lands at -102 or above.
#[cfg(target_arch = "x86_64")]
#[inline]
fn cases_sse2(block: &[u8; BLOCK]) -> Cases {
    use std::arch::x86_64::{_mm_add_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    let mut cases = Cases::default();
    for k in 0..BLOCK / 16 {
        // SAFETY: SSE2 is part of the x86-64 baseline (every x86-64 CPU has it, and rustc enables
        // it for every x86-64 target); the load reads bytes 16k..16k+16 of the 64-byte array,
        // in bounds for k < 4, and `loadu` has no alignment requirement.
        let (upper, lower) = unsafe {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * k).cast());
            let limit = _mm_set1_epi8(-128 + 26);
            let upper = _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8((0x80 - b'A') as i8)), limit);
            let lower = _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8((0x80 - b'a') as i8)), limit);
            (_mm_movemask_epi8(upper), _mm_movemask_epi8(lower))
        };
        cases.upper |= u64::from(upper as u16) << (16 * k);
        cases.lower |= u64::from(lower as u16) << (16 * k);
    }
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 8-byte run ends against a byte-wise scan: runs of 0-20 bytes ending at every offset of
    /// a word, before a stopping byte or the end of the slice.
    #[test]
    fn run_ends_match_bytewise() {
        for len in 0..20 {
            for stop in [None, Some(0xc3u8), Some(b'x'), Some(0x80), Some(b'0'), Some(b'9'), Some(b'/'), Some(b':')] {
                for from in 0..3 {
                    let mut s = vec![b' '; from + len];
                    s.extend(stop);
                    s.extend(b"  \xe4tail");
                    let naive = |keep: &dyn Fn(u8) -> bool| (from..s.len()).find(|&k| !keep(s[k])).unwrap_or(s.len());
                    assert_eq!(ascii_end(&s, from), naive(&|b| b < 0x80), "{s:?} from {from}");
                    assert_eq!(byte_run_end(&s, from, b' '), naive(&|b| b == b' '), "{s:?} from {from}");
                    let non_digit = |b: u8| b < 0x80 && !b.is_ascii_digit();
                    assert_eq!(non_digit_ascii_end(&s, from), naive(&non_digit), "{s:?} from {from}");
                }
            }
        }
    }

    /// Every byte value at every position of two 8-byte words, in a run of letters: the
    /// digit test of [`non_digit_ascii_end`] has no carry between bytes.
    #[test]
    fn non_digit_run_every_byte() {
        for b in 0..=255u8 {
            for k in 0..20 {
                let mut s = vec![b'q'; 20];
                s[k] = b;
                let want = (0..s.len()).find(|&j| s[j] >= 0x80 || s[j].is_ascii_digit()).unwrap_or(s.len());
                assert_eq!(non_digit_ascii_end(&s, 0), want, "byte {b:#04x} at {k}");
            }
        }
    }

    /// [`lead3_run_end`]'s bulk kernel against its scalar twin and a plain character loop, from
    /// every boundary of random strings of CJK ideographs (of every lead byte around the
    /// ranges asked), kana, Hangul, 2- and 4-byte characters and ASCII, runs longer than a window
    /// among them.
    #[test]
    fn lead3_runs_match_charwise() {
        let pool = [
            '中', '一', '丁', '䷀', '㐀', '鿿', '龥', '郎', '焉', '乐', 'あ', 'ア', '한', '，', '。', 'é', 'ß', '😀',
            'a', ' ', '1', '\u{e000}', '\u{ffff}', '\u{3000}',
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for round in 0..3_000 {
            let r = crate::engine::xorshift(&mut state);
            let len = (r % 60) as usize;
            let cjk_bias = round % 3 != 0;
            let text: String = (0..len)
                .map(|k| {
                    let r = crate::engine::xorshift(&mut state) >> (k % 7);
                    if cjk_bias && !r.is_multiple_of(4) {
                        pool[(r >> 8) as usize % 10]
                    } else {
                        pool[(r >> 8) as usize % pool.len()]
                    }
                })
                .collect();
            let s = text.as_bytes();
            for (first, last) in [(0xe4u8, 0xe9u8), (0xe5, 0xe8), (0xe5, 0xe9), (0xe3, 0xe3), (0xe1, 0xef)] {
                for (from, _) in text.char_indices().chain([(s.len(), ' ')]) {
                    let want = text[from..]
                        .char_indices()
                        .find(|&(_, ch)| ch.len_utf8() != 3 || !(first..=last).contains(&ch.to_string().as_bytes()[0]))
                        .map_or(s.len(), |(k, _)| from + k);
                    assert_eq!(lead3_run_end(Kernel::Bulk, s, from, first, last), want, "{text:?} from {from}");
                    assert_eq!(lead3_run_end(Kernel::Scalar, s, from, first, last), want, "{text:?} from {from}");
                }
            }
        }
    }

    fn all_agree(block: &[u8; BLOCK]) {
        let want = cases_scalar(block);
        assert_eq!(cases_swar(block), want, "swar on {block:?}");
        assert_eq!(Kernel::Bulk.cases(block), want, "bulk on {block:?}");
        assert_eq!(Kernel::Scalar.cases(block), want);
        let want = ascii_classes_scalar(block);
        assert_eq!(ascii_classes_swar(block), want, "swar classes on {block:?}");
        assert_eq!(Kernel::Bulk.ascii_classes(block), want, "bulk classes on {block:?}");
        assert_eq!(Kernel::Scalar.ascii_classes(block), want);
    }

    #[test]
    fn every_byte_in_every_position() {
        for b in 0..=255u8 {
            for k in 0..BLOCK {
                let mut block = [b'a'; BLOCK];
                block[k] = b;
                all_agree(&block);
                let mut block = [0xe4; BLOCK];
                block[k] = b;
                all_agree(&block);
            }
        }
    }

    #[test]
    fn random_blocks() {
        // Bytes near the class edges (@ [ ` {, 0x7f, 0x80, 0xc1, 0xdf ...) are over-represented.
        let edges = [
            b'@', b'A', b'Z', b'[', b'`', b'a', b'z', b'{', 0x7f, 0x80, 0xa0, 0xc1, 0xc3, 0xdf, 0xe0, 0xff, 0, 0xbf,
            0xda, 0xfa, b'/', b'0', b'9', b':', b' ', b'!', b'~', b'\'', b'\t', b'\n',
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || crate::engine::xorshift(&mut state);
        for _ in 0..50_000 {
            let mut block = [0u8; BLOCK];
            for b in &mut block {
                let r = next();
                *b = if r & 1 == 0 { edges[(r >> 8) as usize % edges.len()] } else { (r >> 16) as u8 };
            }
            all_agree(&block);
        }
    }
}
