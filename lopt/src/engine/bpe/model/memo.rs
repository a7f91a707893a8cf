//! A small memo of the ids of short pieces between cuts (`split`), kept with each per-thread
//! pre-token cache between calls.
//!
//! A piece between two cuts is merged alone, so its ids are a function of its bytes only. Chinese
//! text repeats its two-character pieces (words) often: on `zh_long` documents about 80 % of the
//! pieces that need a merge (more than one symbol) were seen earlier in the same document, among a
//! few thousand distinct ones. The memo keeps them in a direct-mapped table small enough to stay
//! in L2, so a repeated piece costs one probe instead of its merge lookups in the large merge
//! table.
//!
//! Invariants: a slot's key is the piece's exact bytes and length (never a hash), so a hit is the
//! piece itself; a slot holds the ids the model computed for exactly those bytes, at most
//! [`MAX_IDS`] of them. The table is allocated only after [`WARMUP`] pieces missed, so short texts
//! never pay for it.

/// Pieces of at most this many bytes are memoized (four CJK characters).
pub(super) const MAX_BYTES: usize = 12;
/// Ids kept per slot; a piece with more tokens is not memoized.
const MAX_IDS: usize = 4;
/// Slots in the table (32 bytes each: 256 KiB).
const SLOTS: usize = 1 << 13;
/// Pieces merged before the table is allocated.
const WARMUP: u32 = 256;
/// Marks an unused id in a slot.
const NO_ID: u32 = u32::MAX;

/// One memoized piece: its bytes packed little-endian in `lo` (bytes 0..8) and `hi` (bytes
/// 8..12, length in the top byte; 0 for a free slot), and its ids.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Slot {
    lo: u64,
    hi: u64,
    ids: [u32; MAX_IDS],
}

const FREE: Slot = Slot { lo: 0, hi: 0, ids: [NO_ID; MAX_IDS] };

/// The memo of one thread's calls (lent with its pre-token cache).
pub(crate) struct Memo {
    slots: Vec<Slot>,
    /// Pieces still to miss before the table is allocated.
    warmup: u32,
}

impl Default for Memo {
    fn default() -> Self {
        Memo { slots: Vec::new(), warmup: WARMUP }
    }
}

/// The exact key of `piece` (2..=[`MAX_BYTES`] bytes): its bytes packed little-endian into 12
/// bytes, the length in the top byte. Two overlapping loads per width instead of a byte-wise copy;
/// the overlapping bytes are the same bytes, so OR-ing them packs the piece exactly.
#[inline(always)]
pub(super) fn key(piece: &[u8]) -> Option<(u64, u64)> {
    let n = piece.len();
    let le16 = |at: usize| u64::from(u16::from_le_bytes([piece[at], piece[at + 1]]));
    let le32 = |at: usize| u64::from(u32::from_le_bytes([piece[at], piece[at + 1], piece[at + 2], piece[at + 3]]));
    let (lo, hi) = match n {
        2..=3 => (le16(0) | le16(n - 2) << (8 * (n - 2)), 0),
        4..=7 => (le32(0) | le32(n - 4) << (8 * (n - 4)), 0),
        8 => (le32(0) | le32(4) << 32, 0),
        9..=MAX_BYTES => {
            let lo = le32(0) | le32(4) << 32;
            // Bytes 8..n: 1 to 4 of them, read as the last 4 bytes and shifted down.
            let tail = le32(n - 4) >> (8 * (12 - n));
            (lo, tail)
        }
        _ => return None,
    };
    Some((lo, hi | (n as u64) << 56))
}

impl Memo {
    /// The slot index of a key.
    #[inline(always)]
    fn index(lo: u64, hi: u64) -> usize {
        let h = (lo ^ hi.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> (64 - SLOTS.trailing_zeros())) as usize
    }

    /// Appends the memoized ids of the piece with this key to `out`; false when it is not there.
    #[inline(always)]
    pub(super) fn get(&self, (lo, hi): (u64, u64), out: &mut Vec<u32>) -> bool {
        let Some(slot) = self.slots.get(Self::index(lo, hi)) else { return false };
        if slot.lo != lo || slot.hi != hi {
            return false;
        }
        out.extend(slot.ids.iter().copied().take_while(|&id| id != NO_ID));
        true
    }

    /// Remembers `ids` as the piece's (when they fit a slot), allocating the table once
    /// [`WARMUP`] pieces have missed.
    #[inline]
    pub(super) fn put(&mut self, (lo, hi): (u64, u64), ids: &[u32]) {
        if self.slots.is_empty() {
            self.warmup = self.warmup.saturating_sub(1);
            if self.warmup > 0 {
                return;
            }
            self.slots = vec![FREE; SLOTS];
        }
        if ids.len() > MAX_IDS || ids.contains(&NO_ID) {
            return;
        }
        let mut slot = Slot { lo, hi, ids: [NO_ID; MAX_IDS] };
        slot.ids[..ids.len()].copy_from_slice(ids);
        if let Some(s) = self.slots.get_mut(Self::index(lo, hi)) {
            *s = slot;
        }
    }

    /// A memo whose table exists from the first piece (tests).
    #[cfg(test)]
    pub(super) fn eager() -> Memo {
        Memo { slots: vec![FREE; SLOTS], warmup: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys are the exact bytes: equal keys for equal pieces only, whatever their lengths and
    /// bytes (pieces that differ in one byte at any position, or only in length with zero bytes
    /// appended, get different keys). Dropping a byte or the length from the key fails this.
    #[test]
    fn piece_keys_are_exact() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || crate::engine::xorshift(&mut state);
        let mut seen: std::collections::HashMap<(u64, u64), Vec<u8>> = std::collections::HashMap::new();
        for round in 0..20_000 {
            let n = 2 + (next() % (MAX_BYTES as u64 - 1)) as usize;
            let mut piece: Vec<u8> = (0..n).map(|_| [0u8, 1, 0x80, 0xe4, 0xff][(next() % 5) as usize]).collect();
            if round % 3 == 0 {
                piece = vec![0; n];
                piece[(next() % n as u64) as usize] = 1 + (round % 255) as u8;
            }
            let k = key(&piece).unwrap();
            if let Some(other) = seen.insert(k, piece.clone()) {
                assert_eq!(other, piece, "two pieces share key {k:x?}");
            }
            // The key reproduces the bytes.
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&k.0.to_le_bytes());
            bytes[8..].copy_from_slice(&k.1.to_le_bytes());
            assert_eq!(&bytes[..n], &piece[..]);
            assert!(bytes[n..15].iter().all(|&b| b == 0));
            assert_eq!(usize::from(bytes[15]), n);
        }
        assert_eq!(key(b"a"), None);
        assert_eq!(key(&[0u8; MAX_BYTES + 1]), None);
    }

    #[test]
    fn memo_returns_what_was_put() {
        let mut memo = Memo::default();
        let k = key("中国".as_bytes()).unwrap();
        for _ in 0..WARMUP {
            let mut out = Vec::new();
            assert!(!memo.get(k, &mut out));
            memo.put(k, &[7, 8]);
        }
        let mut out = vec![1];
        assert!(memo.get(k, &mut out));
        assert_eq!(out, vec![1, 7, 8]);
        // Too many ids: not kept, the old slot content stays.
        let k2 = key("中国人".as_bytes()).unwrap();
        memo.put(k2, &[1, 2, 3, 4, 5]);
        assert!(!memo.get(k2, &mut Vec::new()));
    }
}
