//! Cutting a pre-token between two characters that no merge can ever join, so that each piece is
//! merged on its own (Chinese pre-tokens are long runs of characters, and most neighbouring
//! characters never share a token: the pieces are one or two characters long).
//!
//! Why a cut is exact: BPE of a word equals BPE of its two sides whenever no merge of the word
//! ever joins a symbol ending at the cut with one starting there (each side then sees its own
//! merges in its own lowest-rank-leftmost order, and the pair across the cut is never chosen).
//! A merge across the cut would produce a vocabulary token whose bytes contain a non-empty
//! suffix of the character `c` before the cut followed by a non-empty prefix of the character
//! `d` after it. So a cut is safe when no token of the vocabulary contains such bytes. This
//! argument uses nothing about merge ranks (`docs/correctness.md`, section 4.2).
//!
//! At load every token is read at each character start inside it (UTF-8 tells where characters
//! start): the piece before is a whole character or a fragment (the token starts inside it), and
//! so is the piece after. Whole/whole gives the pair `(c, d)` (a Bloom filter: a false positive
//! only forgoes a cut); a whole character next to a fragment marks that character "may join on
//! that side"; fragment/fragment marks every character that ends with the left fragment, or every
//! one that starts with the right fragment, whichever are fewer. Cuts are
//! only made between two BMP characters of 2 or 3 bytes; ASCII and 4-byte characters never get a
//! cut next to them. Invariant: [`Cuts::is_cut`] is false for every boundary that some token
//! spans.

use std::collections::HashSet;

/// The character may be joined to the next one by some token.
const JOINS_NEXT: u8 = 1;
/// The character may be joined to the previous one by some token.
const JOINS_PREV: u8 = 2;

/// The cut table: per BMP code point its join flags, and a Bloom filter of the character pairs
/// that some token spans.
pub(crate) struct Cuts {
    /// Per code point below 0x10000: [`JOINS_NEXT`] | [`JOINS_PREV`].
    joins: Vec<u8>,
    bloom: Vec<u64>,
    bloom_shift: u32,
}

/// The byte length of the UTF-8 character that starts with `lead` (1 for a continuation byte).
#[inline(always)]
pub(super) fn char_len(lead: u8) -> usize {
    match lead {
        0..=0xbf => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

#[inline(always)]
fn is_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// The code point of `c` when it is one whole UTF-8 character of 2 or 3 bytes.
#[inline(always)]
fn bmp(c: &[u8]) -> Option<u32> {
    let cp = match *c {
        [a, b] if (0xc0..=0xdf).contains(&a) && is_continuation(b) => u32::from(a & 0x1f) << 6 | u32::from(b & 0x3f),
        [a, b, c] if (0xe0..=0xef).contains(&a) && is_continuation(b) && is_continuation(c) => {
            u32::from(a & 0x0f) << 12 | u32::from(b & 0x3f) << 6 | u32::from(c & 0x3f)
        }
        _ => return None,
    };
    Some(cp)
}

impl Cuts {
    /// The cut table of a vocabulary given by its tokens' bytes.
    pub(crate) fn new<'a>(tokens: impl Iterator<Item = &'a [u8]>) -> Cuts {
        let mut joins = vec![0u8; 0x10000];
        for flags in &mut joins[..0x80] {
            *flags = JOINS_NEXT | JOINS_PREV;
        }
        let mut pairs: Vec<u32> = Vec::new();
        // Left fragments of fragment/fragment boundaries: at most 3 continuation bytes, packed
        // with their length.
        let mut left_fragments: HashSet<u32, ahash::RandomState> = HashSet::default();
        let mut right_fragments: HashSet<u32, ahash::RandomState> = HashSet::default();
        let pack = |bytes: &[u8]| bytes.iter().fold(bytes.len() as u32, |key, &b| key << 8 | u32::from(b));
        let whole = |piece: &[u8]| !is_continuation(piece[0]) && char_len(piece[0]) == piece.len();
        let mut starts = Vec::new();
        for token in tokens {
            // The character starts inside the token, with the token's ends as sentinels.
            starts.clear();
            starts.push(0);
            starts.extend((1..token.len()).filter(|&k| !is_continuation(token[k])));
            starts.push(token.len());
            for w in starts.windows(3) {
                let (left, right) = (&token[w[0]..w[1]], &token[w[1]..w[2]]);
                match (whole(left), whole(right)) {
                    (true, true) => {
                        if let (Some(c), Some(d)) = (bmp(left), bmp(right)) {
                            pairs.push(c << 16 | d);
                        }
                    }
                    (true, false) => {
                        if let Some(c) = bmp(left) {
                            joins[c as usize] |= JOINS_NEXT;
                        }
                    }
                    (false, true) => {
                        if let Some(d) = bmp(right) {
                            joins[d as usize] |= JOINS_PREV;
                        }
                    }
                    (false, false) => {
                        // Either side's characters may be marked; the side with fewer BMP
                        // characters is. A 2-byte left fragment ends 16 of them, one
                        // continuation byte about 1,050. A 2-byte lead starts 64, a 3-byte lead
                        // with one continuation byte 64, alone 4,096; a 4-byte lead none (no cut
                        // is made next to a 4-byte character).
                        let left_count = if left.len() >= 2 { 16 } else { 1056 };
                        let right_count = match (char_len(right[0]), right.len()) {
                            (3, 1) => 4096,
                            (2, _) | (3, _) => 64,
                            _ => 0,
                        };
                        if right_count < left_count {
                            if right_count > 0 {
                                right_fragments.insert(pack(right));
                            }
                        } else {
                            left_fragments.insert(pack(left));
                        }
                    }
                }
            }
        }
        if !left_fragments.is_empty() || !right_fragments.is_empty() {
            let mut buf = [0u8; 4];
            for cp in 0x80..0x10000u32 {
                let Some(c) = char::from_u32(cp) else { continue };
                let bytes = c.encode_utf8(&mut buf).as_bytes();
                if (1..bytes.len()).any(|k| left_fragments.contains(&pack(&bytes[k..]))) {
                    joins[cp as usize] |= JOINS_NEXT;
                }
                if (1..bytes.len()).any(|k| right_fragments.contains(&pack(&bytes[..k]))) {
                    joins[cp as usize] |= JOINS_PREV;
                }
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        let blocks = (pairs.len() / 4).max(64).next_power_of_two();
        let mut cuts = Cuts { joins, bloom: vec![0; blocks], bloom_shift: 64 - blocks.trailing_zeros() };
        for pair in pairs {
            let (block, bits) = cuts.bloom_at(pair);
            cuts.bloom[block] |= bits;
        }
        cuts
    }

    /// The Bloom block of a pair and its three bits (about 16 bits per pair).
    #[inline(always)]
    fn bloom_at(&self, pair: u32) -> (usize, u64) {
        let h = u64::from(pair).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((h >> self.bloom_shift) as usize, 1u64 << (h & 63) | 1u64 << (h >> 6 & 63) | 1u64 << (h >> 12 & 63))
    }

    /// Whether the boundary between the characters `c` and `d` (code points; call only for
    /// characters of 2 or 3 bytes) is a cut: no token spans it.
    #[inline(always)]
    pub(super) fn is_cut(&self, c: u32, d: u32) -> bool {
        let (Some(&fc), Some(&fd)) = (self.joins.get(c as usize), self.joins.get(d as usize)) else {
            return false;
        };
        if fc & JOINS_NEXT != 0 || fd & JOINS_PREV != 0 {
            return false;
        }
        let (block, bits) = self.bloom_at(c << 16 | d);
        self.bloom.get(block).is_some_and(|&w| w & bits != bits)
    }

    /// Calls `piece` with each piece of `word` (valid UTF-8) between its cuts, in order; the
    /// pieces cover `word` (the tests' view of the cuts `BpeModel::encode_cut` makes).
    #[cfg(test)]
    pub(crate) fn pieces(&self, word: &[u8], mut piece: impl FnMut(&[u8])) {
        let n = word.len();
        let mut from = 0;
        // The previous character's code point, `NONE` when it is not a 2- or 3-byte one.
        const NONE: u32 = u32::MAX;
        let mut prev = NONE;
        let mut i = 0;
        while i < n {
            let len = char_len(word[i]);
            let cp = if (2..=3).contains(&len) && i + len <= n { bmp(&word[i..i + len]).unwrap_or(NONE) } else { NONE };
            if prev != NONE && cp != NONE && self.is_cut(prev, cp) {
                piece(&word[from..i]);
                from = i;
            }
            prev = cp;
            i += len;
        }
        if from < n {
            piece(&word[from..]);
        }
    }

    /// How many characters are marked as joining some neighbour through a fragment, and the
    /// Bloom filter's size in bytes (for the tests' sanity checks).
    #[cfg(test)]
    pub(crate) fn stats(&self) -> (usize, usize) {
        (self.joins[0x80..].iter().filter(|&&f| f != 0).count(), self.bloom.len() * 8)
    }
}
