//! Byte classes of 64-byte blocks as bit masks, for the pre-tokenizer's bulk scanning: bit `k` of
//! a mask says whether byte `k` of the block is in the class. A run of a class then ends at the
//! first clear bit (one `trailing_zeros`) instead of one table lookup per byte.
//!
//! Each mask has three implementations that must agree on every block: SSE2 on x86-64 (part of
//! its baseline, so no run-time detection is needed), SWAR on `u64` lanes elsewhere, and the
//! scalar twin, one byte at a time. [`Kernel`] picks one; the cargo feature `scalar-pretok` makes
//! the engine use the scalar twin everywhere, so the differential suite can run on both paths.
//! The unit tests compare the three on random and adversarial blocks.
//!
//! Only ASCII bytes are ever set: a byte of a multi-byte character is never an ASCII letter, so
//! callers go back to the character-wise scanner where a run meets one.

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
    /// The engine's kernel: [`Kernel::Scalar`] with the feature `scalar-pretok`, else the bulk one.
    pub(crate) const DEFAULT: Kernel = if cfg!(feature = "scalar-pretok") { Kernel::Scalar } else { Kernel::Bulk };

    /// Bit `k` set iff byte `k` of `block` is an ASCII letter (`[A-Za-z]`, which is `\p{L}`
    /// restricted to ASCII).
    #[inline(always)]
    pub(crate) fn letters(self, block: &[u8; BLOCK]) -> u64 {
        match self {
            Kernel::Scalar => letters_scalar(block),
            #[cfg(target_arch = "x86_64")]
            Kernel::Bulk => letters_sse2(block),
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Bulk => letters_swar(block),
        }
    }
}

/// The scalar twin.
#[inline]
fn letters_scalar(block: &[u8; BLOCK]) -> u64 {
    block.iter().enumerate().fold(0u64, |mask, (k, b)| mask | u64::from(b.is_ascii_alphabetic()) << k)
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `lanes` (all other bits clear), gathered into the low 8 bits:
/// byte `k`'s bit goes to bit `k`. The multiplier puts byte `k` at bit `56 + k` and no two partial
/// products share a bit position (8k - 7j is distinct for every pair), so nothing carries.
#[inline(always)]
fn gather_high_bits(lanes: u64) -> u64 {
    ((lanes >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

/// Eight bytes at once: case-fold with `| 0x20`, then test `'a' <= y <= 'z'` per byte with
/// additions that cannot carry between bytes (every byte is at most 0x7f before adding 0x1f).
#[inline(always)]
fn letters_swar8(x: u64) -> u64 {
    let ascii = !x & HIGH;
    let y = (x | (0x20 * ONES)) & !HIGH;
    let at_least_a = (y + (0x80 - u64::from(b'a')) * ONES) & HIGH;
    let above_z = (y + (0x80 - u64::from(b'z') - 1) * ONES) & HIGH;
    gather_high_bits(ascii & at_least_a & !above_z)
}

/// SWAR on `u64` lanes (the bulk kernel where SSE2 is not there; tested everywhere).
#[inline]
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn letters_swar(block: &[u8; BLOCK]) -> u64 {
    let mut mask = 0u64;
    for (k, lane) in block.chunks_exact(8).enumerate() {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(lane);
        mask |= letters_swar8(u64::from_le_bytes(eight)) << (8 * k);
    }
    mask
}

/// SSE2, 16 bytes per step: `(b | 0x20) + 0x1f` maps `a..=z` (and only the case-folded ASCII
/// letters) to -128..=-103 as signed bytes; every other byte lands at -102 or above.
#[cfg(target_arch = "x86_64")]
#[inline]
fn letters_sse2(block: &[u8; BLOCK]) -> u64 {
    use std::arch::x86_64::{
        _mm_add_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut mask = 0u64;
    for k in 0..BLOCK / 16 {
        // SAFETY: SSE2 is part of the x86-64 baseline (every x86-64 CPU has it, and rustc enables
        // it for every x86-64 target); the load reads bytes 16k..16k+16 of the 64-byte array,
        // in bounds for k < 4, and `loadu` has no alignment requirement.
        let lanes = unsafe {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * k).cast());
            let shifted = _mm_add_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8(0x1f));
            _mm_movemask_epi8(_mm_cmplt_epi8(shifted, _mm_set1_epi8(-128 + 26)))
        };
        mask |= u64::from(lanes as u16) << (16 * k);
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_agree(block: &[u8; BLOCK]) {
        let want = letters_scalar(block);
        assert_eq!(letters_swar(block), want, "swar on {block:?}");
        assert_eq!(Kernel::Bulk.letters(block), want, "bulk on {block:?}");
        assert_eq!(Kernel::Scalar.letters(block), want);
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
        let edges = [b'@', b'A', b'Z', b'[', b'`', b'a', b'z', b'{', 0x7f, 0x80, 0xa0, 0xc1, 0xc3, 0xdf, 0xe0, 0xff, 0];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
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
