//! The pre-token cache: the tokens of pre-tokens already encoded, kept across segments and
//! documents. Words repeat (in English a few thousand words make most of the text), and a lookup
//! is far cheaper than merging.
//!
//! Each cache belongs to one engine and is used by one thread at a time: the engine keeps a pool
//! of them and lends one per `encode_segment` call, so there are at most as many as concurrent
//! calls. A cache is bounded: when it reaches [`MAX_ENTRIES`] words (or its arenas fill up) it
//! keeps only the words that were looked up again since the last such trim (the frequent ones),
//! or, when those are too many, starts over. Where the words that miss rarely recur (random text),
//! a word is kept only when it is offered a second time ([`Doorkeeper`]), so one-off words take no
//! room. Results never depend on the cache: a cached word's
//! tokens are the ones the model computes for it.
//!
//! Memory bound of one [`WordCache`]: its map grows to at most 2^17 slots of 16 bytes (2 MiB, for
//! [`MAX_ENTRIES`] words), `tokens` to [`MAX_TOKENS`] pairs of 8 bytes (16 MiB) and `keys` to
//! [`MAX_KEY_BYTES`] (2 MiB), plus the model's memo of pieces (256 KiB): at most 21 MiB per cache, and an engine holds one per concurrent
//! `encode_segment` call it has seen (the pool's threads plus calling threads). The shared
//! [`SeedCache`] has its own bound (its documentation): about 8 MiB for a 150K vocabulary.
//!
//! Layout: one [`U64Map`] from a key to a packed entry. The key of a word of at most [`SHORT`]
//! bytes is its bytes (exact); a longer word's key is a hash of its bytes, and its length and
//! bytes are kept in `keys` to check a hit. A one-token word keeps its id in the entry; others
//! keep their tokens (id and end within the word) in `tokens`.

use super::table::{huge_vec, Doorkeeper, U64Map};

/// Words up to this many bytes are cached; longer ones are rare and each is merged. Long
/// pre-tokens repeat more than they seem to (indentation and separator runs such as 60 spaces or
/// `#` x 80, JSON rows): of the 161 pre-tokens of more than 48 bytes in three English documents
/// only 30 differ. The bound is what an entry can hold: the hashed key's length byte and the
/// token count are 8 bits (a word has at most one token per byte).
pub(crate) const MAX_LEN: usize = u8::MAX as usize;
/// Words of at most this many bytes are keyed by their bytes packed in a `u64`.
pub(crate) const SHORT: usize = 7;
/// Entries before the cache is emptied.
const MAX_ENTRIES: usize = 1 << 16;
/// Stored tokens before the cache is emptied.
const MAX_TOKENS: usize = 1 << 21;
/// Stored key bytes before the cache is emptied (their index must fit in 21 bits).
const MAX_KEY_BYTES: usize = 1 << 21;

/// Entry bits: the low 32 bits are the token id ([`INLINE`]) or the index of the word's first
/// token in `tokens`.
const COUNT_SHIFT: u32 = 32;
/// The id is in the entry itself.
const INLINE: u64 = 1 << 40;
/// Some token ends inside a UTF-8 character: offsets must be widened to character boundaries.
const SPLITS_CHAR: u64 = 1 << 41;
/// Looked up since the cache was last trimmed.
const USED: u64 = 1 << 42;
/// For a hashed key: where the word's length byte and bytes start in `keys` is in bits 43..64.
const KEY_AT_SHIFT: u32 = 43;

/// A cached word: its tokens as `(id, end within the word)`.
#[derive(Clone, Copy)]
pub(crate) enum Hit<'c> {
    One(u32),
    Many(&'c [(u32, u32)]),
}

#[derive(Default)]
pub(crate) struct WordCache {
    /// No slots until the first insert (a default cache allocates nothing: the engine makes one
    /// per call to lend its own out).
    map: U64Map,
    tokens: Vec<(u32, u32)>,
    /// The bytes of hashed words.
    keys: Vec<u8>,
    /// Words are cached at their second sighting ([`Doorkeeper`]).
    door: Doorkeeper,
    /// The model's memo of short pieces (`model/memo.rs`), kept with the cache between calls
    /// so that a new document starts with the pieces earlier ones had (its own bound: 256 KiB).
    pub(crate) pieces: super::model::Memo,
}

/// The low `8 * len` bits, for each short length `len`.
const SHORT_MASK: [u64; SHORT + 1] = {
    let mut masks = [0u64; SHORT + 1];
    let mut len = 1;
    while len <= SHORT {
        masks[len] = (1u64 << (8 * len)) - 1;
        len += 1;
    }
    masks
};

/// The length in the top byte, for each short length.
const SHORT_TAG: [u64; SHORT + 1] = {
    let mut tags = [0u64; SHORT + 1];
    let mut len = 0;
    while len <= SHORT {
        tags[len] = (len as u64) << 56;
        len += 1;
    }
    tags
};

/// The key of the word `text[start..end]` (1..=[`MAX_LEN`] bytes): packed bytes with the
/// length in the top byte for short words (so no two lengths collide and the key is never
/// [`super::table::EMPTY`]); a hash with the top bit set and the next one clear for longer words.
#[inline(always)]
pub(crate) fn key(text: &[u8], start: usize, end: usize) -> u64 {
    let len = end - start;
    if len <= SHORT {
        // One unaligned load and a mask where 8 bytes are readable (a byte-wise copy into a
        // buffer costs a call and a store-forwarding stall on every word); the mask and the length
        // tag come from a table (computing `(1 << 8 * len) - 1` was a third of the key's cost).
        let packed = match text.get(start..start + 8) {
            Some(eight) => {
                let mut buf = [0u8; 8];
                buf.copy_from_slice(eight);
                u64::from_le_bytes(buf) & SHORT_MASK[len]
            }
            None => text[start..end].iter().rev().fold(0u64, |acc, &b| acc << 8 | u64::from(b)),
        };
        return packed | SHORT_TAG[len];
    }
    let word = &text[start..end];
    let mut h = len as u64;
    let mut chunks = word.chunks_exact(8);
    for chunk in &mut chunks {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(buf)).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(26);
    }
    let rest = chunks.remainder();
    let last = match text.get(end - 8..end) {
        // The last 8 bytes of the word, shifted so that only the remainder is left.
        Some(tail) if !rest.is_empty() => {
            let mut buf = [0u8; 8];
            buf.copy_from_slice(tail);
            u64::from_le_bytes(buf) >> (8 * (8 - rest.len()))
        }
        _ => rest.iter().rev().fold(0u64, |acc, &b| acc << 8 | u64::from(b)),
    };
    h = (h ^ last).wrapping_mul(0xd6e8_feb8_6659_fd93);
    h ^= h >> 32;
    (h | 1 << 63) & !(1 << 62)
}

/// `a == b` for the bytes of a hashed word (`a` and `b` of equal length, at least 8 bytes, as
/// every hashed word is): 8 bytes at a time, the last 8 as one load that overlaps the one
/// before, so no call to `memcmp` for the remainder (that call was 0.7 % of the instructions and
/// 4 % of the mispredicted branches on English text, a word of 8-15 bytes a hit).
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() || n < 8 {
        return a == b;
    }
    let load = |s: &[u8], at: usize| {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(&s[at..at + 8]);
        u64::from_le_bytes(buf)
    };
    let mut at = 0;
    while at + 8 < n {
        if load(a, at) != load(b, at) {
            return false;
        }
        at += 8;
    }
    load(a, n - 8) == load(b, n - 8)
}

impl WordCache {
    /// Whether no word was ever inserted.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    fn map(&mut self) -> &mut U64Map {
        if self.map.slots() == 0 {
            self.map = U64Map::with_capacity(4096);
        }
        &mut self.map
    }

    /// The tokens of `word`, whose key is `key`, when cached.
    #[inline(always)]
    pub(crate) fn get(&mut self, key: u64, word: &[u8]) -> Option<(Hit<'_>, bool)> {
        self.get_at(key, word, 0, word.len())
    }

    /// The tokens of the word `text[start..end]`, whose key is `key`, when cached. The word's
    /// bytes are read only for a hashed key (a short word's key is its bytes).
    #[inline(always)]
    pub(crate) fn get_at(&mut self, key: u64, text: &[u8], start: usize, end: usize) -> Option<(Hit<'_>, bool)> {
        if key >> 63 == 0 {
            return self.get_short(key);
        }
        let value = self.map.find_mut_home(key)?;
        let entry = *value;
        let word = text.get(start..end)?;
        let from = (entry >> KEY_AT_SHIFT) as usize;
        let kept = self.keys.get(from + 1..from + 1 + word.len());
        if self.keys.get(from) != Some(&(word.len() as u8)) || !kept.is_some_and(|kept| same(kept, word)) {
            return None;
        }
        *value = entry | USED;
        self.hit(entry)
    }

    /// The tokens of a word of at most [`SHORT`] bytes whose key ([`key`]) is `key`, when
    /// cached: the key is the word itself, so a slot with this key is the word's (no bytes to
    /// compare, no test of the key's kind: the caller knows the length).
    #[inline(always)]
    pub(crate) fn get_short(&mut self, key: u64) -> Option<(Hit<'_>, bool)> {
        debug_assert_eq!(key >> 63, 0, "a hashed key");
        let value = self.map.find_mut_home(key)?;
        let entry = *value;
        // Unconditionally: one `or` into the slot just read costs less than testing the bit.
        *value = entry | USED;
        self.hit(entry)
    }

    /// The tokens of a cached word's entry.
    #[inline(always)]
    fn hit(&self, entry: u64) -> Option<(Hit<'_>, bool)> {
        let splits = entry & SPLITS_CHAR != 0;
        let data = entry as u32;
        if entry & INLINE != 0 {
            return Some((Hit::One(data), splits));
        }
        let count = (entry >> COUNT_SHIFT) as u8;
        let from = data as usize;
        let tokens = self.tokens.get(from..from + usize::from(count))?;
        Some((Hit::Many(tokens), splits))
    }

    /// Remembers the tokens of `word` (at most [`MAX_LEN`] bytes, keyed `key`, not cached):
    /// `(id, end)`, unless the [`Doorkeeper`] finds that such words rarely come back and this one
    /// was not offered before.
    pub(crate) fn insert(&mut self, key: u64, word: &[u8], tokens: &[(u32, u32)]) {
        if tokens.len() > usize::from(u8::MAX) {
            // The count would not fit its 8 bits (no word of `MAX_LEN` bytes has that many).
            return;
        }
        if !self.door.admits(key) {
            return;
        }
        let len = self.map.len();
        if len >= MAX_ENTRIES
            || self.tokens.len() + MAX_LEN >= MAX_TOKENS
            || self.keys.len() + MAX_LEN + 1 >= MAX_KEY_BYTES
        {
            self.trim();
        }
        let splits = tokens.iter().any(|&(_, end)| word.get(end as usize).is_some_and(|&b| (b as i8) < -0x40));
        let entry = if splits { SPLITS_CHAR } else { 0 };
        self.insert_entry(key, word, tokens, entry);
    }

    fn insert_entry(&mut self, key: u64, word: &[u8], tokens: &[(u32, u32)], mut entry: u64) {
        if self.tokens.capacity() == 0 {
            // The arenas' whole bound at once: address space only (pages are touched as they
            // fill), and the doubling growth, which copied everything stored so far (a tenth of
            // the instructions and misses of the inserts on Chinese text), never happens.
            self.tokens.reserve_exact(MAX_TOKENS);
            self.keys.reserve_exact(MAX_KEY_BYTES);
        }
        if key >> 63 != 0 {
            if self.map.get(key).is_some() {
                // Another word with the same hash: keep the first.
                return;
            }
            entry |= (self.keys.len() as u64) << KEY_AT_SHIFT;
            self.keys.push(word.len() as u8);
            self.keys.extend_from_slice(word);
        }
        match tokens {
            [(id, _)] => entry |= INLINE | u64::from(*id),
            _ => {
                entry |= (tokens.len() as u64) << COUNT_SHIFT | self.tokens.len() as u64;
                self.tokens.extend_from_slice(tokens);
            }
        }
        self.map().insert(key, entry);
    }

    /// Keeps the words looked up since the last trim, or nothing when they fill half the cache.
    fn trim(&mut self) {
        let old = std::mem::take(&mut self.map);
        if old.len() == 0 {
            return;
        }
        let old_tokens = std::mem::take(&mut self.tokens);
        let old_keys = std::mem::take(&mut self.keys);
        let used = old.iter().filter(|&(_, entry)| entry & USED != 0).count();
        if used > MAX_ENTRIES / 2 {
            return;
        }
        self.map = U64Map::with_capacity(MAX_ENTRIES);
        let mut inline = [(0u32, 0u32)];
        for (key, entry) in old.iter().filter(|&(_, entry)| entry & USED != 0) {
            let word = if key >> 63 != 0 {
                let from = (entry >> KEY_AT_SHIFT) as usize;
                let len = old_keys.get(from).map_or(0, |&l| usize::from(l));
                old_keys.get(from + 1..from + 1 + len).unwrap_or_default()
            } else {
                &[]
            };
            let tokens = if entry & INLINE != 0 {
                inline[0].0 = entry as u32;
                &inline[..]
            } else {
                let from = entry as u32 as usize;
                let count = usize::from((entry >> COUNT_SHIFT) as u8);
                old_tokens.get(from..from + count).unwrap_or_default()
            };
            self.insert_entry(key, word, tokens, entry & SPLITS_CHAR);
        }
    }
}

/// Words of at most this many bytes can be in a [`SeedCache`] (a key is 16 bytes: the word's bytes
/// and its length).
pub(crate) const SEED_MAX_LEN: usize = 15;

/// One slot of a [`SeedCache`]: the key (`lo`: bytes 0..8; `hi`: bytes 8..15 and the length in the
/// top byte, 0 for a free slot) and a packed entry as in [`WordCache`]. 32 bytes, aligned, so a
/// probe touches one cache line.
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct SeedSlot {
    lo: u64,
    hi: u64,
    entry: u64,
}

/// The seeded pre-token cache: every vocabulary entry of 1..=[`SEED_MAX_LEN`] bytes, valued with
/// what the model computes for those bytes as a pre-token (not the entry's own id: BPE need not
/// reach a token from its own bytes). Built once when the engine is built and then read-only, so
/// all threads share it, and words seen for the first time that are vocabulary entries (most
/// English words) are hits. Invariant: it holds every such entry, so a word of at most
/// [`SEED_MAX_LEN`] bytes that misses is no vocabulary entry (the engine then merges it without
/// `ignore_merges`' whole-word lookup).
///
/// Memory bound: at most `3 * 32` bytes per vocabulary entry for the slots (a power of two at
/// least 4/3 of the entries) plus 8 bytes per token of entries that are not one token (8 MiB for
/// Qwen3's 150K entries), plus a 128 KiB Bloom filter. The slots are allocated by
/// [`huge_vec`] (huge pages, up to 2 MiB more address space).
#[derive(Default)]
pub(crate) struct SeedCache {
    slots: Vec<SeedSlot>,
    /// `64 - log2(slots)`.
    shift: u32,
    mask: usize,
    tokens: Vec<(u32, u32)>,
    /// A blocked Bloom filter of the keys (two bits in one `u64`, [`SEED_BLOOM_WORDS`] words, so it
    /// stays in L2): most words that are not seeded (on CJK text nearly all misses) are answered
    /// without touching the table, a trip to L3 or memory.
    bloom: Vec<u64>,
}

/// Words of the seed's Bloom filter (128 KiB, about 8 bits per entry of a 150K vocabulary).
const SEED_BLOOM_WORDS: usize = 1 << 14;

/// The Bloom word and bits of a seed key.
#[inline(always)]
fn seed_bloom(lo: u64, hi: u64) -> (usize, u64) {
    let x = lo ^ hi.rotate_left(29);
    let h = (x ^ x >> 31).wrapping_mul(0xd6e8_feb8_6659_fd93);
    ((h >> (64 - SEED_BLOOM_WORDS.trailing_zeros())) as usize, 1u64 << (h & 63) | 1u64 << (h >> 6 & 63))
}

/// The 16-byte key of `text[start..end]` (1..=[`SEED_MAX_LEN`] bytes): its bytes and length.
#[inline(always)]
fn seed_key(text: &[u8], start: usize, end: usize) -> (u64, u64) {
    let len = end - start;
    let (lo, hi) = match text.get(start..start + 16) {
        Some(sixteen) => {
            let mut a = [0u8; 8];
            let mut b = [0u8; 8];
            a.copy_from_slice(&sixteen[..8]);
            b.copy_from_slice(&sixteen[8..]);
            (u64::from_le_bytes(a), u64::from_le_bytes(b))
        }
        None => {
            let word = &text[start..end];
            let pack = |part: &[u8]| part.iter().rev().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
            (pack(&word[..len.min(8)]), pack(word.get(8..).unwrap_or_default()))
        }
    };
    // Masks: `len` bytes in all, the first 8 in `lo`.
    let lo_mask = if len >= 8 { u64::MAX } else { (1u64 << (8 * len)) - 1 };
    let hi_mask = if len > 8 { (1u64 << (8 * (len - 8))) - 1 } else { 0 };
    (lo & lo_mask, (hi & hi_mask) | (len as u64) << 56)
}

impl SeedCache {
    /// The cache of `words`: `(bytes, tokens as (id, end within the word))` for each vocabulary
    /// entry of at most [`SEED_MAX_LEN`] bytes (longer or empty words are skipped).
    pub(crate) fn new<'w>(count: usize, words: impl Iterator<Item = (&'w [u8], &'w [(u32, u32)])>) -> SeedCache {
        let cap = (count.max(8) * 4 / 3 + 1).next_power_of_two();
        let mut cache = SeedCache {
            slots: huge_vec(cap, SeedSlot::default()),
            shift: 64 - cap.trailing_zeros(),
            mask: cap - 1,
            tokens: Vec::new(),
            bloom: vec![0; SEED_BLOOM_WORDS],
        };
        let mut len = 0;
        for (word, tokens) in words {
            if word.is_empty() || word.len() > SEED_MAX_LEN || tokens.is_empty() || len * 4 >= cap * 3 {
                continue;
            }
            let splits = tokens.iter().any(|&(_, end)| word.get(end as usize).is_some_and(|&b| (b as i8) < -0x40));
            let mut entry = if splits { SPLITS_CHAR } else { 0 };
            match tokens {
                [(id, _)] => entry |= INLINE | u64::from(*id),
                _ if tokens.len() <= usize::from(u8::MAX) => {
                    entry |= (tokens.len() as u64) << COUNT_SHIFT | cache.tokens.len() as u64;
                    cache.tokens.extend_from_slice(tokens);
                }
                _ => continue,
            }
            let (lo, hi) = seed_key(word, 0, word.len());
            let (at, bits) = seed_bloom(lo, hi);
            cache.bloom[at] |= bits;
            let mut i = cache.slot(lo, hi);
            loop {
                let slot = &mut cache.slots[i];
                if slot.hi == 0 {
                    *slot = SeedSlot { lo, hi, entry };
                    len += 1;
                    break;
                }
                if slot.lo == lo && slot.hi == hi {
                    break;
                }
                i = (i + 1) & cache.mask;
            }
        }
        cache
    }

    #[inline(always)]
    fn slot(&self, lo: u64, hi: u64) -> usize {
        ((lo ^ hi.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// The tokens of the word `text[start..end]` (1..=[`SEED_MAX_LEN`] bytes) when it is a seeded
    /// vocabulary entry, and whether some token ends inside a character.
    #[inline(always)]
    pub(crate) fn get(&self, text: &[u8], start: usize, end: usize) -> Option<(Hit<'_>, bool)> {
        let (lo, hi) = seed_key(text, start, end);
        let (at, bits) = seed_bloom(lo, hi);
        if self.bloom.get(at).is_none_or(|&w| w & bits != bits) {
            return None;
        }
        let mut i = self.slot(lo, hi);
        loop {
            let slot = self.slots.get(i)?;
            if slot.hi == hi && slot.lo == lo {
                let entry = slot.entry;
                let splits = entry & SPLITS_CHAR != 0;
                if entry & INLINE != 0 {
                    return Some((Hit::One(entry as u32), splits));
                }
                let count = usize::from((entry >> COUNT_SHIFT) as u8);
                let from = entry as u32 as usize;
                return Some((Hit::Many(self.tokens.get(from..from + count)?), splits));
            }
            if slot.hi == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Number of seeded words.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.hi != 0).count()
    }

    /// Bytes held (the memory bound in the type's documentation).
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<SeedSlot>() + self.tokens.capacity() * 8 + self.bloom.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the cache returns is what was stored for that very word, through trims and
    /// hash keys; words looked up again survive a trim.
    #[test]
    fn returns_only_what_was_stored() {
        let mut cache = WordCache::default();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || crate::engine::xorshift(&mut state);
        // Each word's tokens are a function of its bytes, so any stale or foreign hit shows.
        let tokens_of = |word: &[u8]| -> Vec<(u32, u32)> {
            let h = word.iter().fold(7u32, |h, &b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
            (1..=word.len() as u32).step_by(1 + (h % 3) as usize).map(|end| (h ^ end, end)).collect()
        };
        let frequent = b" the".to_vec();
        let mut text = Vec::new();
        for round in 0..(3 * MAX_ENTRIES) {
            let len = 1 + (next() % MAX_LEN as u64) as usize;
            let word: Vec<u8> =
                if round % 5 == 0 { frequent.clone() } else { (0..len).map(|_| b'a' + (next() % 3) as u8).collect() };
            text.clear();
            text.extend_from_slice(&word);
            text.extend_from_slice(b"tail");
            let key = key(&text, 0, word.len());
            let expected = tokens_of(&word);
            match cache.get(key, &word) {
                Some((Hit::One(id), _)) => assert_eq!(vec![id], expected.iter().map(|t| t.0).collect::<Vec<_>>()),
                Some((Hit::Many(tokens), _)) => assert_eq!(tokens, &expected[..]),
                None => {
                    // Perhaps cached only at its second sighting (round 5), found from round 10 on.
                    assert!(round < 10 || word != frequent, "the frequent word was dropped");
                    cache.insert(key, &word, &expected);
                }
            }
        }
    }

    /// The hashed words' compare agrees with `==` at every length and at every differing byte.
    #[test]
    fn same_is_equality() {
        for len in 0..40 {
            let a: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37)).collect();
            assert!(same(&a, &a.clone()));
            for at in 0..len {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!same(&a, &b), "length {len}, byte {at}");
            }
            assert!(!same(&a, &a[..len.saturating_sub(1)]) || len == 0);
        }
    }

    #[test]
    fn keys_of_short_words_are_their_bytes() {
        assert_ne!(key(b"ab", 0, 1), key(b"ab", 0, 2));
        assert_eq!(key(b"xabcdefghij", 1, 3), key(b"ab", 0, 2));
        assert_eq!(key(b"abcdefghijkl", 0, 10), key(b"abcdefghij", 0, 10));
        assert_ne!(key(b"abcdefghij", 0, 10), key(b"abcdefghik", 0, 10));
    }
}
