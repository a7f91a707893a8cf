//! A small open-addressing hash map from `u64` keys to `u64` values, for the two hot lookups of
//! the engine: merge pairs and the per-segment cache of short pre-tokens.
//!
//! Why not `HashMap`: both lookups are on the critical path of every byte, keys are already
//! well-mixed integers, and a flat array of `(key, value)` with linear probing costs one cache
//! line per lookup and no indirection. Invariants: the capacity is a power of two, at most three
//! quarters full (so probes stay short and a free slot always exists); `EMPTY` is never a key.

/// The reserved key of a free slot.
pub(crate) const EMPTY: u64 = u64::MAX;

#[derive(Clone, Debug)]
pub(crate) struct U64Map {
    slots: Vec<(u64, u64)>,
    mask: usize,
    /// `64 - log2(capacity)`: the slot is the top bits of the Fibonacci hash.
    shift: u32,
    len: usize,
}

impl U64Map {
    /// A map that holds `n` keys without growing.
    pub(crate) fn with_capacity(n: usize) -> Self {
        let cap = (n.max(8) * 4 / 3 + 1).next_power_of_two();
        U64Map { slots: vec![(EMPTY, 0); cap], mask: cap - 1, shift: 64 - cap.trailing_zeros(), len: 0 }
    }

    /// Fibonacci hashing: the top bits of `key * 2^64/φ` mix every bit of the key (pairs of ids
    /// and packed bytes would cluster in the low bits).
    #[inline(always)]
    fn slot(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub(crate) fn get(&self, key: u64) -> Option<u64> {
        let mut i = self.slot(key);
        loop {
            let (k, v) = self.slots[i];
            if k == key {
                return Some(v);
            }
            if k == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Inserts or replaces. `key` must not be [`EMPTY`].
    pub(crate) fn insert(&mut self, key: u64, value: u64) {
        debug_assert_ne!(key, EMPTY);
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let mut i = self.slot(key);
        loop {
            let slot = &mut self.slots[i];
            if slot.0 == key {
                slot.1 = value;
                return;
            }
            if slot.0 == EMPTY {
                *slot = (key, value);
                self.len += 1;
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The entries, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.slots.iter().copied().filter(|&(k, _)| k != EMPTY)
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let cap = old.len() * 2;
        self.slots = vec![(EMPTY, 0); cap];
        self.mask = cap - 1;
        self.shift = 64 - cap.trailing_zeros();
        self.len = 0;
        for (k, v) in old {
            if k != EMPTY {
                self.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_map() {
        let mut map = U64Map::with_capacity(2);
        let mut reference = std::collections::HashMap::new();
        for i in 0..10_000u64 {
            let key = i.wrapping_mul(0x1234_5678_9abc_def1) % 5000;
            map.insert(key, i);
            reference.insert(key, i);
        }
        assert_eq!(map.len(), reference.len());
        for key in 0..6000u64 {
            assert_eq!(map.get(key), reference.get(&key).copied());
        }
    }
}
