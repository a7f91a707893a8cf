//! The WordPiece model: greedy longest-match-first over one pre-token, exactly as HF's
//! `models::wordpiece::WordPiece::tokenize`.
//!
//! HF tries `prefix + word[start..end]` in its vocabulary for `end` from the end of the word down
//! to the next character boundary. The longest vocabulary entry that is a byte prefix of
//! `word[start..]` is the same thing (a UTF-8 entry that matches a prefix of a UTF-8 word ends on
//! one of its character boundaries), and a byte trie finds it in one forward walk. Continuation
//! pieces walk from the trie node reached by the continuing-subword prefix, so one trie serves
//! both lookups.
//!
//! Invariants: unit 0 is the root and the child of no node; a unit belongs to the node named by
//! its `check`; `NONE` marks a free unit (as its `check`) and a node that ends no vocabulary entry
//! (as its value); a unit's `TERMINAL` bit is set exactly when its value is not `NONE`; bases stay
//! below `TERMINAL` (that many units would be 16 GiB). A character's cached single token
//! ([`WordPiece::single`]) is what `tokenize` gives that character as a word.

use std::sync::atomic::{AtomicU32, Ordering};

const NONE: u32 = u32::MAX;

/// A byte trie of the vocabulary, as a double array: the child of `node` by byte `b` is
/// `units[node].base + b` when that unit's `check` is `node`.
///
/// Units are 8 bytes (the vocabulary ids live apart, read once per token) so that more of the
/// trie stays in cache: the walk is bound by the load of each child's `check`.
#[derive(Debug)]
struct Trie {
    units: Vec<Unit>,
    /// Vocabulary id ending at each unit (`NONE` if none).
    values: Vec<u32>,
}

#[derive(Clone, Copy, Debug)]
struct Unit {
    /// Parent node (`NONE` for a free unit; the root is its own parent).
    check: u32,
    /// Where this node's children start, and [`TERMINAL`] when a vocabulary entry ends here.
    base: u32,
}

/// The bit of `Unit::base` marking a node that ends a vocabulary entry.
const TERMINAL: u32 = 1 << 31;

/// The free units of a double array under construction, doubly linked in index order (the
/// reference builder of the tests).
#[cfg(test)]
struct FreeList {
    next: Vec<u32>,
    prev: Vec<u32>,
    head: u32,
    tail: u32,
}

#[cfg(test)]
impl FreeList {
    /// No free unit among the first `taken` units.
    fn new(taken: usize) -> FreeList {
        FreeList { next: vec![NONE; taken], prev: vec![NONE; taken], head: NONE, tail: NONE }
    }

    /// Appends `n` free units; returns the first.
    fn grow(&mut self, units: &mut Vec<Unit>, values: &mut Vec<u32>, n: usize) -> u32 {
        let first = units.len() as u32;
        for _ in 0..n {
            let i = units.len() as u32;
            units.push(Unit { check: NONE, base: 0 });
            values.push(NONE);
            self.next.push(NONE);
            self.prev.push(self.tail);
            if self.tail == NONE {
                self.head = i;
            } else {
                self.next[self.tail as usize] = i;
            }
            self.tail = i;
        }
        first
    }

    fn remove(&mut self, i: usize) {
        let (p, n) = (self.prev[i], self.next[i]);
        if p == NONE {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NONE {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
    }
}

/// The free units of a double array under construction as a bit set (a set bit: free), every
/// unit past the array's end counted free, with a summary bit per word that has a free unit (so
/// that a search skips the packed stretch behind the frontier a word of 64 words at a time), and
/// the first free unit.
struct FreeBits {
    bits: Vec<u64>,
    /// Bit `w` set exactly when `bits[w]` is not 0.
    summary: Vec<u64>,
    /// The lowest free unit.
    head: usize,
}

impl FreeBits {
    /// Unit 0 (the root) taken, every other unit free.
    fn new() -> FreeBits {
        FreeBits { bits: vec![!1], summary: vec![1], head: 1 }
    }

    /// Makes `words` words of bits exist (the new ones free).
    fn reach(&mut self, words: usize) {
        let old = self.bits.len();
        if old >= words {
            return;
        }
        self.bits.resize(words, u64::MAX);
        self.summary.resize(words.div_ceil(64), 0);
        for w in old..words {
            self.summary[w / 64] |= 1 << (w % 64);
        }
    }

    /// The 64 free bits of units `at..at + 64` (set: free).
    #[inline]
    fn window(&mut self, at: usize) -> u64 {
        let (word, shift) = (at / 64, at % 64);
        self.reach(word + 2);
        let low = self.bits[word] >> shift;
        if shift == 0 {
            low
        } else {
            low | self.bits[word + 1] << (64 - shift)
        }
    }

    /// The lowest free unit at or after `at`.
    fn next_free(&self, at: usize) -> usize {
        let word = at / 64;
        let Some(&bits) = self.bits.get(word) else { return at };
        let here = bits & u64::MAX << (at % 64);
        if here != 0 {
            return word * 64 + here.trailing_zeros() as usize;
        }
        // The next word with a free unit, by the summary; past the last word every unit is free.
        let next = word + 1;
        let mut s = next / 64;
        let mut mask = self.summary.get(s).map_or(0, |&m| m & u64::MAX << (next % 64));
        loop {
            if mask != 0 {
                let w = s * 64 + mask.trailing_zeros() as usize;
                return w * 64 + self.bits[w].trailing_zeros() as usize;
            }
            s += 1;
            match self.summary.get(s) {
                Some(&m) => mask = m,
                None => return self.bits.len().max(next) * 64,
            }
        }
    }

    /// The lowest `base >= 1` at which every unit `base + label` is free: the first fit along
    /// the free units in index order, tried as the lowest label's slot, 64 bases at a time from
    /// each free unit the search reaches.
    fn fit(&mut self, labels: impl Iterator<Item = usize> + Clone, lowest: usize) -> usize {
        let mut slot = self.next_free(self.head.max(lowest + 1));
        loop {
            let at = slot - lowest;
            let mut fits = u64::MAX;
            for label in labels.clone() {
                fits &= self.window(at + label);
                if fits == 0 {
                    break;
                }
            }
            if fits != 0 {
                return at + fits.trailing_zeros() as usize;
            }
            slot = self.next_free(slot + 64);
        }
    }

    /// Marks unit `i` taken (it was free).
    fn take(&mut self, i: usize) {
        self.reach(i / 64 + 1);
        let word = &mut self.bits[i / 64];
        *word &= !(1u64 << (i % 64));
        if *word == 0 {
            self.summary[i / 64 / 64] &= !(1u64 << (i / 64 % 64));
        }
        if i == self.head {
            self.head = self.next_free(i + 1);
        }
    }
}

/// Appends free units to `units` (and `values`) in steps of 256 until there are more than `last`.
fn grow_past(units: &mut Vec<Unit>, values: &mut Vec<u32>, last: usize) {
    while units.len() <= last {
        units.resize(units.len() + 256, Unit { check: NONE, base: 0 });
        values.resize(values.len() + 256, NONE);
    }
}

impl Trie {
    /// Builds the double array of `entries`, sorted by bytes and distinct.
    ///
    /// Nodes are placed breadth first, each node's children in byte order, every node's children
    /// at the first base where all their slots are free (first fit along the free list). The
    /// layout is exactly that of building a plain trie first and placing its nodes in that order
    /// (`tests::same_layout_as_a_plain_trie_first`): the walk is sensitive to it (a builder with
    /// another placement measured 8 % slower encoding), so only the way there changed. A node is
    /// the range of sorted entries that share its prefix; its children are the runs of equal
    /// bytes after the prefix, so no plain trie (a heap allocation per node) is built. The first
    /// fit is found 64 bases at a time in a bit set of the free units ([`FreeBits::fit`]): walking
    /// the free list unit by unit, past the same crowded stretch for every node with several
    /// children, was most of the build.
    fn build(entries: &[(&[u8], u32)]) -> Trie {
        let root_value = match entries.first() {
            Some(&([], id)) => id,
            _ => NONE,
        };
        let mut units = vec![Unit { check: 0, base: 0 }];
        let mut unit_values = vec![root_value];
        let mut free = FreeBits::new();
        // Breadth-first queue of nodes: entry range, prefix length, unit.
        let mut queue: Vec<(usize, usize, usize, u32)> = vec![(0, entries.len(), 0, 0)];
        let mut edges: Vec<(u8, usize, usize)> = Vec::new();
        let mut next = 0;
        while let Some(&(lo, hi, depth, at)) = queue.get(next) {
            next += 1;
            edges.clear();
            // The entry equal to the prefix, if any, sorts first; every other one is longer.
            let mut k = lo;
            if entries.get(k).is_some_and(|&(bytes, _)| bytes.len() == depth) {
                k += 1;
            }
            while k < hi {
                let label = entries[k].0[depth];
                let start = k;
                k += 1;
                while k < hi && entries[k].0[depth] == label {
                    k += 1;
                }
                edges.push((label, start, k));
            }
            let (Some(&(low, ..)), Some(&(high, ..))) = (edges.first(), edges.last()) else { continue };
            let (lowest, highest) = (usize::from(low), usize::from(high));
            // The first free unit that can hold the lowest child while the others are free too
            // (the free units in index order, grown 256 at a time when none fits: a base past
            // the end is the first such unit's).
            let base = free.fit(edges.iter().map(|&(l, ..)| usize::from(l)), lowest);
            grow_past(&mut units, &mut unit_values, base + highest);
            units[at as usize].base |= base as u32;
            for &(l, start, end) in &edges {
                let slot = base + usize::from(l);
                free.take(slot);
                let value = match entries[start] {
                    (bytes, id) if bytes.len() == depth + 1 => id,
                    _ => NONE,
                };
                let terminal = if value == NONE { 0 } else { TERMINAL };
                units[slot] = Unit { check: at, base: terminal };
                unit_values[slot] = value;
                queue.push((start, end, depth + 1, slot as u32));
            }
        }
        if root_value != NONE {
            units[0].base |= TERMINAL;
        }
        Trie { units, values: unit_values }
    }

    #[inline]
    fn child(&self, node: u32, b: u8) -> u32 {
        let slot = (self.units[node as usize].base & !TERMINAL) as usize + usize::from(b);
        match self.units.get(slot) {
            Some(u) if u.check == node && slot != 0 => slot as u32,
            _ => NONE,
        }
    }

    /// Walks `bytes` from `node`; returns the node reached (`NONE` if the walk fell off).
    fn walk(&self, mut node: u32, bytes: &[u8]) -> u32 {
        for &b in bytes {
            if node == NONE {
                break;
            }
            node = self.child(node, b);
        }
        node
    }

    /// The longest entry below `node` that is a prefix of `bytes`: (length, id).
    #[inline]
    fn longest(&self, mut node: u32, bytes: &[u8]) -> Option<(usize, u32)> {
        let (mut len, mut at) = (0, NONE);
        for (i, &b) in bytes.iter().enumerate() {
            node = self.child(node, b);
            if node == NONE {
                break;
            }
            if self.units[node as usize].base & TERMINAL != 0 {
                (len, at) = (i + 1, node);
            }
        }
        (at != NONE).then(|| (len, self.values[at as usize]))
    }
}

/// A WordPiece model built from `tokenizer.json`'s `model` object.
#[derive(Debug)]
pub(super) struct WordPiece {
    trie: Trie,
    /// Trie node after the continuing-subword prefix (`NONE`: no entry has the prefix).
    continuation: u32,
    unk: Option<u32>,
    max_chars: usize,
    /// The token of each BMP character as a word of its own, plus one (0: not known yet), filled
    /// as [`single`](WordPiece::single) meets them: punctuation and CJK ideographs are words of
    /// one character, each of which took a trie walk. Memory bound: 2^16 `AtomicU32` (256 KiB,
    /// allocated and zeroed with the model).
    singles: Box<[AtomicU32]>,
}

/// `bytes`' first 8 bytes as a big-endian integer, zero-padded: `prefix_key(a) < prefix_key(b)`
/// implies `a < b` by bytes, and `a < b` implies `prefix_key(a) <= prefix_key(b)`.
fn prefix_key(bytes: &[u8]) -> u64 {
    let mut key = [0u8; 8];
    let n = bytes.len().min(8);
    key[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(key)
}

/// Sorts `keyed` (`(prefix_key(token), token, id)`, distinct tokens) by key, then by the tokens'
/// bytes where keys tie: the tokens' byte order. The keys by a radix sort, a byte per pass (least
/// significant first, a pass skipped where every key has the same byte), the ties (tokens that
/// share their first 8 bytes) by comparison: a comparison sort throughout was a third of the
/// model's build after the trie's.
fn sort_by_prefix_key(keyed: &mut Vec<(u64, &str, u32)>) {
    let mut other = keyed.clone();
    for shift in (0..64).step_by(8) {
        let mut count = [0usize; 256];
        for &(key, ..) in keyed.iter() {
            count[(key >> shift) as u8 as usize] += 1;
        }
        if count.contains(&keyed.len()) {
            continue;
        }
        let mut at = 0;
        for c in &mut count {
            (*c, at) = (at, at + *c);
        }
        for &entry in keyed.iter() {
            let slot = &mut count[(entry.0 >> shift) as u8 as usize];
            other[*slot] = entry;
            *slot += 1;
        }
        std::mem::swap(keyed, &mut other);
    }
    let mut start = 0;
    while start < keyed.len() {
        let key = keyed[start].0;
        let end = start + keyed[start..].iter().take_while(|e| e.0 == key).count();
        if end - start > 1 {
            keyed[start..end].sort_unstable_by(|a, b| a.1.as_bytes().cmp(b.1.as_bytes()));
        }
        start = end;
    }
}

/// The vocabulary as `tokenizer.json` gives it, borrowed while the engine is built (nothing
/// after loading needs it): distinct entries sorted by bytes.
pub(super) struct Vocab<'j> {
    entries: Vec<(&'j str, u32)>,
}

impl Vocab<'_> {
    /// Number of distinct vocabulary entries (HF's `get_vocab_size`).
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn token_to_id(&self, token: &str) -> Option<u32> {
        let at = self.entries.binary_search_by(|&(t, _)| t.as_bytes().cmp(token.as_bytes())).ok()?;
        Some(self.entries[at].1)
    }

    /// Token string by id (HF's `id_to_token`), for engines that must fill token strings.
    pub(super) fn strings(&self) -> Vec<String> {
        let size = self.entries.iter().map(|&(_, id)| id).max().map_or(0, |m| m as usize + 1);
        let mut strings = vec![String::new(); size];
        for &(token, id) in &self.entries {
            token.clone_into(&mut strings[id as usize]);
        }
        strings
    }
}

/// Why a word could not be tokenized: HF's `MissingUnkToken`.
pub(super) struct MissingUnk;

impl std::fmt::Display for MissingUnk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WordPiece error: Missing [UNK] token from the vocabulary")
    }
}

impl WordPiece {
    /// The model alone from a `tokenizer.json`'s `model` object (tests).
    #[cfg(test)]
    pub(super) fn from_json(model: &serde_json::Value) -> Result<WordPiece, String> {
        Self::from_doc(&crate::doc::Doc::from_value(serde_json::json!({ "model": model }))).map(|(m, _)| m)
    }

    /// The model and its vocabulary (borrowed from `doc`) from a parsed `tokenizer.json`'s model.
    pub(super) fn from_doc<'d>(doc: &'d crate::doc::Doc<'_>) -> Result<(WordPiece, Vocab<'d>), String> {
        let model = &doc.json["model"];
        let vocab_json = doc.vocab.as_ref().ok_or("WordPiece model without a vocab object of u32 ids")?;
        // Keys are distinct (a map's); they come in hash order and are sorted here by bytes, on
        // each token's first 8 bytes read as a big-endian integer (zero-padded, so that order
        // is the bytes' order: a shorter token that is a prefix of another ties and the full
        // comparison puts it first), the bytes compared only on a tie. Comparing the strings
        // throughout was a fifth of BERT's model build.
        let mut keyed: Vec<(u64, &str, u32)> =
            vocab_json.iter().map(|(token, &id)| (prefix_key(token.as_bytes()), &**token, id)).collect();
        sort_by_prefix_key(&mut keyed);
        let vocab = Vocab { entries: keyed.into_iter().map(|(_, token, id)| (token, id)).collect() };
        let unk_token = model["unk_token"].as_str().unwrap_or("[UNK]");
        let prefix = model["continuing_subword_prefix"].as_str().unwrap_or("##");
        let max_chars = match &model["max_input_chars_per_word"] {
            serde_json::Value::Null => 100,
            v => v
                .as_u64()
                .and_then(|m| usize::try_from(m).ok())
                .ok_or("max_input_chars_per_word is not an unsigned integer")?,
        };
        let bytes: Vec<(&[u8], u32)> = vocab.entries.iter().map(|&(t, id)| (t.as_bytes(), id)).collect();
        let trie = Trie::build(&bytes);
        let continuation = trie.walk(0, prefix.as_bytes());
        let unk = vocab.token_to_id(unk_token);
        let singles = (0..0x10000).map(|_| AtomicU32::new(0)).collect();
        Ok((WordPiece { trie, continuation, unk, max_chars, singles }, vocab))
    }

    #[cfg(test)]
    pub(super) fn units(&self) -> usize {
        self.trie.units.len()
    }

    /// Tokenizes one normalized pre-token of `chars` characters into `out`, each token with byte
    /// offsets into `word`, in order.
    ///
    /// # Errors
    /// [`MissingUnk`] when the word needs the unknown token and the vocabulary has none.
    #[inline]
    pub(super) fn tokenize(&self, word: &[u8], chars: usize, out: &mut impl Pieces) -> Result<(), MissingUnk> {
        if chars <= self.max_chars {
            match self.trie.longest(0, word) {
                // Fast path: the whole word is one entry.
                Some((len, id)) if len == word.len() => {
                    out.piece(id, 0, len);
                    return Ok(());
                }
                Some(first) => {
                    let mark = out.written();
                    if self.split(word, first, out) {
                        return Ok(());
                    }
                    // HF emits nothing but [UNK] for a word that fails midway.
                    out.undo(mark);
                }
                // An empty word has no tokens (HF's loop never runs).
                None if word.is_empty() => return Ok(()),
                None => {}
            }
        }
        let unk = self.unk.ok_or(MissingUnk)?;
        out.piece(unk, 0, word.len());
        Ok(())
    }

    /// The token of the one-character word `c` (as [`tokenize`](Self::tokenize) gives it), `None`
    /// when that is not one token (no [UNK] in the vocabulary: the caller's `tokenize` reports
    /// it). A pure function of `c`, so a value cached by any thread is the one this call would
    /// compute.
    #[inline(always)]
    pub(super) fn single(&self, c: char) -> Option<u32> {
        if let Some(slot) = self.singles.get(c as usize) {
            let cached = slot.load(Ordering::Relaxed);
            if cached != 0 {
                return Some(cached - 1);
            }
        }
        self.single_uncached(c)
    }

    #[inline(never)]
    fn single_uncached(&self, c: char) -> Option<u32> {
        let mut buf = [0u8; 4];
        let mut tokens = OneToken::default();
        self.tokenize(c.encode_utf8(&mut buf).as_bytes(), 1, &mut tokens).ok()?;
        let id = match tokens {
            OneToken { count: 1, id } => id,
            _ => return None,
        };
        if let (Some(slot), Some(value)) = (self.singles.get(c as usize), id.checked_add(1)) {
            slot.store(value, Ordering::Relaxed);
        }
        Some(id)
    }

    /// Greedy split after the first piece `(length, id)`, written to `out` as found; `false`
    /// when some position matches no entry (the caller then undoes what was written). Written
    /// straight out instead of collected first: the collection's array, zeroed per split word,
    /// was a `memset` call costing 1.8 % of a BERT encode.
    fn split(&self, word: &[u8], first: (usize, u32), out: &mut impl Pieces) -> bool {
        let node = self.continuation;
        if node == NONE {
            return false;
        }
        out.piece(first.1, 0, first.0);
        let mut start = first.0;
        while start < word.len() {
            let Some((len, id)) = self.trie.longest(node, &word[start..]) else { return false };
            out.piece(id, start, start + len);
            start += len;
        }
        true
    }
}

/// The tokens of a word counted, the last one's id kept ([`WordPiece::single`]).
#[derive(Default)]
struct OneToken {
    count: usize,
    id: u32,
}

impl Pieces for OneToken {
    fn piece(&mut self, id: u32, _start: usize, _end: usize) {
        self.count += 1;
        self.id = id;
    }
    fn written(&self) -> usize {
        self.count
    }
    fn undo(&mut self, mark: usize) {
        self.count = mark;
    }
}

/// Where [`WordPiece::tokenize`] writes a word's tokens: appended one at a time, and withdrawn
/// back to a mark when the word has no split after all.
pub(super) trait Pieces {
    /// Appends token `id`, which spans bytes `start..end` of the word.
    fn piece(&mut self, id: u32, start: usize, end: usize);
    /// Tokens written so far: a mark for [`undo`](Self::undo).
    fn written(&self) -> usize;
    /// Forgets the tokens written after `mark`.
    fn undo(&mut self, mark: usize);
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Pieces for Vec<(u32, usize, usize)> {
        fn piece(&mut self, id: u32, start: usize, end: usize) {
            self.push((id, start, end));
        }
        fn written(&self) -> usize {
            self.len()
        }
        fn undo(&mut self, mark: usize) {
            self.truncate(mark);
        }
    }

    fn model(vocab: &[&str]) -> WordPiece {
        let map: serde_json::Map<String, serde_json::Value> =
            vocab.iter().enumerate().map(|(i, t)| ((*t).to_owned(), serde_json::json!(i))).collect();
        WordPiece::from_json(&serde_json::json!({
            "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 5, "vocab": map
        }))
        .unwrap()
    }

    fn run(m: &WordPiece, w: &str) -> Vec<(u32, usize, usize)> {
        let mut out = Vec::new();
        m.tokenize(w.as_bytes(), w.chars().count(), &mut out).ok().unwrap();
        out
    }

    /// The vocabulary's order by prefix key then bytes is the bytes' order, also for tokens that
    /// share 8 bytes, that are prefixes of others, and that hold NUL or high bytes (a padded
    /// key ties with a real zero byte).
    #[test]
    fn prefix_key_order_is_byte_order() {
        let tokens: Vec<&[u8]> = vec![
            b"",
            b"a",
            b"a\0",
            b"a\0\0",
            b"ab",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghi",
            b"abcdefgha",
            b"abcdefg",
            b"abcdefg\xff",
            b"\xff",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\x01",
            b"\xff\xff\xff\xff\xff\xff\xff\xff",
            "##\u{e9}".as_bytes(),
            b"##",
            b"##a",
            b"[UNK]",
            b"\x7f",
            b"\x80",
        ];
        let mut by_key = tokens.clone();
        by_key.sort_unstable_by(|a, b| prefix_key(a).cmp(&prefix_key(b)).then_with(|| a.cmp(b)));
        let mut by_bytes = tokens;
        by_bytes.sort_unstable();
        assert_eq!(by_key, by_bytes);
    }

    /// The radix sort gives the comparison sort's order (key, then bytes), on the tokens of the
    /// order test above with shared 8-byte prefixes and on both BERT vocabularies.
    #[test]
    fn radix_sort_is_the_comparison_sort() {
        let mut vocabs: Vec<Vec<String>> = vec![[
            "",
            "a",
            "a\0",
            "ab",
            "abcdefgh",
            "abcdefgh\0",
            "abcdefghi",
            "abcdefgha",
            "abcdefg",
            "\u{ff}",
            "##",
            "##a",
            "##abcdefgh",
            "##abcdefgz",
            "[UNK]",
            "\u{7f}",
            "\u{80}",
            "\u{e9}t\u{e9}",
        ]
        .iter()
        .map(|t| (*t).to_owned())
        .collect()];
        for name in ["bert-base-cased", "bert-base-uncased"] {
            let Some(path) = super::super::tests::fixture_path(name) else { continue };
            let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            vocabs.push(json["model"]["vocab"].as_object().unwrap().keys().cloned().collect());
        }
        for vocab in &vocabs {
            let mut keyed: Vec<(u64, &str, u32)> =
                vocab.iter().enumerate().map(|(i, t)| (prefix_key(t.as_bytes()), &**t, i as u32)).collect();
            let mut expected = keyed.clone();
            expected.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.as_bytes().cmp(b.1.as_bytes())));
            sort_by_prefix_key(&mut keyed);
            assert_eq!(keyed, expected, "{} tokens", vocab.len());
        }
    }

    #[test]
    fn same_layout_as_a_plain_trie_first() {
        let mut vocabs: Vec<Vec<(String, u32)>> =
            vec![["[UNK]", "un", "una", "##ff", "##able", "##a", "##ffable", "", "a", "ab", "abc", "b", "é", "éa"]
                .iter()
                .enumerate()
                .map(|(i, t)| ((*t).to_owned(), i as u32))
                .collect()];
        for name in ["bert-base-cased", "bert-base-uncased"] {
            let Some(path) = super::super::tests::fixture_path(name) else { continue };
            let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            let vocab = json["model"]["vocab"].as_object().unwrap();
            vocabs.push(vocab.iter().map(|(t, id)| (t.clone(), id.as_u64().unwrap() as u32)).collect());
        }
        for vocab in &vocabs {
            let mut entries: Vec<(&[u8], u32)> = vocab.iter().map(|(t, id)| (t.as_bytes(), *id)).collect();
            entries.sort_unstable();
            let (new, old) = (Trie::build(&entries), plain_trie_first(&entries));
            assert_eq!(new.values, old.values);
            let units = |t: &Trie| t.units.iter().map(|u| (u.check, u.base)).collect::<Vec<_>>();
            assert_eq!(units(&new), units(&old), "{} entries", entries.len());
        }
    }

    #[test]
    fn greedy_longest_first() {
        let m = model(&["[UNK]", "un", "una", "##ff", "##able", "##a", "##ffable"]);
        assert_eq!(run(&m, "unaff"), vec![(2, 0, 3), (3, 3, 5)]);
        assert_eq!(run(&m, "unx"), vec![(0, 0, 3)]);
        assert_eq!(run(&m, "unaffable"), vec![(0, 0, 9)], "longer than max_input_chars_per_word");
    }

    /// The builder before the range-based one: a plain trie (adjacency lists) first, then the same
    /// breadth-first first-fit placement. Kept as the layout's reference.
    fn plain_trie_first(entries: &[(&[u8], u32)]) -> Trie {
        // A plain trie first (adjacency lists), then each node's children placed at the first
        // base where all their slots are free.
        let mut kids: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
        let mut values: Vec<u32> = vec![NONE];
        for &(bytes, id) in entries {
            let mut node = 0usize;
            for &b in bytes {
                let found = kids[node].iter().find(|(l, _)| *l == b).map(|&(_, t)| t as usize);
                node = match found {
                    Some(t) => t,
                    None => {
                        let t = kids.len();
                        kids.push(Vec::new());
                        values.push(NONE);
                        kids[node].push((b, t as u32));
                        t
                    }
                };
            }
            values[node] = id;
        }
        let mut units = vec![Unit { check: 0, base: 0 }];
        let mut unit_values = vec![values[0]];
        let mut free = FreeList::new(units.len());
        // Plain node -> double-array index; breadth first from the root.
        let mut index = vec![0u32; kids.len()];
        let mut queue = std::collections::VecDeque::from([0usize]);
        while let Some(node) = queue.pop_front() {
            let edges = &mut kids[node];
            if edges.is_empty() {
                continue;
            }
            edges.sort_unstable_by_key(|&(l, _)| l);
            let lowest = usize::from(edges[0].0);
            let highest = usize::from(edges[edges.len() - 1].0);
            // The first free unit that can hold the lowest child while the others are free too.
            let mut f = free.head;
            let base = loop {
                if f == NONE {
                    f = free.grow(&mut units, &mut unit_values, 256);
                    continue;
                }
                let candidate = f as usize;
                if candidate > lowest {
                    let base = candidate - lowest;
                    if edges
                        .iter()
                        .all(|&(l, _)| !matches!(units.get(base + usize::from(l)), Some(u) if u.check != NONE))
                    {
                        break base;
                    }
                }
                f = free.next[candidate];
            };
            while units.len() <= base + highest {
                free.grow(&mut units, &mut unit_values, 256);
            }
            let at = index[node] as usize;
            units[at].base |= base as u32;
            for &(l, child) in edges.iter() {
                let slot = base + usize::from(l);
                free.remove(slot);
                let value = values[child as usize];
                let terminal = if value == NONE { 0 } else { TERMINAL };
                units[slot] = Unit { check: at as u32, base: terminal };
                unit_values[slot] = value;
                index[child as usize] = slot as u32;
                queue.push_back(child as usize);
            }
        }
        if values[0] != NONE {
            units[0].base |= TERMINAL;
        }
        Trie { units, values: unit_values }
    }
}
