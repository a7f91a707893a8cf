//! Linear-time BPE for long pre-tokens: a backtracking search for the one tokenization whose
//! adjacent tokens are all *compatible*, which is exactly BPE's output (the argument is in
//! `docs/correctness.md`, section 4.1).
//!
//! The heap merge costs O(n log n) with a cache miss per heap level once the heap outgrows the
//! caches: a 1 MB pre-token (one letter repeated, a run of spaces) ran 8-11x slower per byte than
//! prose. Here each step takes the longest vocabulary token at the current position (a walk down a
//! trie of the vocabulary) and keeps it when the token before it and it are compatible, else
//! tries its next shorter prefix token, else steps back one token; a position from which no token
//! was kept is marked dead and never tried again, so the work is linear in the text times the
//! token length.
//!
//! Two tokens `a`, `b` are *compatible* when BPE of `a`'s bytes then `b`'s is `[a, b]`; the first
//! token must be *reachable* (BPE of its bytes is itself). Both are decided by merging those bytes
//! with the ordinary merge, so nothing here depends on properties of the merge ranks; the answers
//! are memoized per call, which makes repetitive words (the slow case of the heap) cheap.

use super::BpeModel;
use crate::engine::bpe::table::U64Map;
use crate::engine::merge_core;

const NONE: u32 = u32::MAX;

/// Entries of the per-call memo of compatibility answers (direct-mapped).
const MEMO: usize = 1 << 12;

/// The compiled search; built once per model, on first use (see [`BpeModel::long_search`]).
pub(crate) struct Backtrack {
    /// Trie of the vocabulary's byte strings: `node << 8 | byte` to the child node.
    trie: U64Map,
    /// The token spelled by each trie node, [`NONE`] for inner nodes.
    node_token: Vec<u32>,
    /// By token id: the longest token that is a proper prefix of it, [`NONE`] for a byte.
    shorter: Vec<u32>,
    /// By token id: its bytes, `bytes[starts[id]..starts[id + 1]]`.
    starts: Vec<u32>,
    bytes: Vec<u8>,
}

/// Reusable buffers of [`Backtrack::encode`].
#[derive(Default)]
pub(crate) struct Scratch {
    tokens: Vec<u32>,
    /// One bit per position `0..=n`: set while a tokenization of the rest may start there.
    alive: Vec<u64>,
    /// `(left << 32 | right, compatible)`, `right` = [`NONE`] for "is `left` reachable".
    memo: Vec<(u64, bool)>,
    symbols: Vec<u32>,
    merged: Vec<u32>,
    merge: merge_core::Scratch,
}

impl Backtrack {
    /// Compiles the search for `model`; `None` when the vocabulary is too large for it.
    pub(crate) fn new(model: &BpeModel) -> Option<Backtrack> {
        let size = model.token_len.len();
        // Shorter tokens first, so that a token's prefixes are in the trie when it is inserted
        // and its longest shorter prefix is the last token met on its path.
        let mut entries: Vec<(&[u8], u32)> = model.vocab.iter().map(|(b, &id)| (&b[..], id)).collect();
        entries.sort_unstable_by_key(|e| e.0.len());
        let mut trie = U64Map::with_capacity(entries.iter().map(|e| e.0.len()).sum());
        let mut node_token = vec![NONE];
        let mut shorter = vec![NONE; size];
        for &(bytes, id) in &entries {
            let mut node = 0u64;
            let mut prefix = NONE;
            for &b in bytes {
                let token = node_token[node as usize];
                if token != NONE {
                    prefix = token;
                }
                let key = node << 8 | u64::from(b);
                node = match trie.get(key) {
                    Some(child) => child,
                    None => {
                        let child = node_token.len() as u64;
                        trie.insert(key, child);
                        node_token.push(NONE);
                        child
                    }
                };
            }
            node_token[node as usize] = id;
            shorter[id as usize] = prefix;
        }
        u32::try_from(node_token.len()).ok()?;
        let mut starts = vec![0u32; size + 1];
        let mut bytes = Vec::new();
        let mut by_id: Vec<&[u8]> = vec![&[]; size];
        for &(b, id) in &entries {
            by_id[id as usize] = b;
        }
        for (id, b) in by_id.iter().enumerate() {
            bytes.extend_from_slice(b);
            starts[id + 1] = u32::try_from(bytes.len()).ok()?;
        }
        let search = Backtrack { trie, node_token, shorter, starts, bytes };
        Some(search)
    }

    /// The longest token that `text` starts with ([`NONE`] only for empty `text`: every byte is
    /// a token).
    #[inline]
    fn longest(&self, text: &[u8]) -> u32 {
        let mut node = 0u64;
        let mut found = NONE;
        for &b in text {
            match self.trie.get(node << 8 | u64::from(b)) {
                Some(child) => node = child,
                None => break,
            }
            let token = self.node_token[node as usize];
            if token != NONE {
                found = token;
            }
        }
        found
    }

    fn token_bytes(&self, id: u32) -> &[u8] {
        let (from, to) = (self.starts[id as usize] as usize, self.starts[id as usize + 1] as usize);
        &self.bytes[from..to]
    }

    /// Whether BPE of `left`'s bytes then `right`'s is `[left, right]` (`right` = [`NONE`]:
    /// whether BPE of `left`'s bytes is `[left]`), by merging them; memoized in `scratch`.
    #[inline]
    fn compatible(&self, model: &BpeModel, left: u32, right: u32, scratch: &mut Scratch) -> bool {
        let key = u64::from(left) << 32 | u64::from(right);
        let slot = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize % MEMO;
        if let Some(&(k, answer)) = scratch.memo.get(slot) {
            if k == key {
                return answer;
            }
        }
        let Scratch { symbols, merged, merge, memo, .. } = scratch;
        symbols.clear();
        let right_bytes = if right == NONE { &[][..] } else { self.token_bytes(right) };
        for &b in self.token_bytes(left).iter().chain(right_bytes) {
            symbols.push(model.byte_ids[usize::from(b)]);
        }
        merged.clear();
        merge_core::merge(&model.merges, symbols, merge, |id, _| merged.push(id));
        let answer = if right == NONE { merged[..] == [left] } else { merged[..] == [left, right] };
        if let Some(entry) = memo.get_mut(slot) {
            *entry = (key, answer);
        }
        answer
    }

    /// Appends BPE of `text` to `out`; `false` (and nothing appended) if the search fails, which
    /// the argument of the module rules out but which then leaves the word to the heap merge.
    pub(crate) fn encode(&self, model: &BpeModel, text: &[u8], scratch: &mut Scratch, out: &mut Vec<u32>) -> bool {
        let n = text.len();
        let mut tokens = std::mem::take(&mut scratch.tokens);
        let mut alive = std::mem::take(&mut scratch.alive);
        if scratch.memo.len() != MEMO {
            scratch.memo = vec![(u64::MAX, false); MEMO];
        }
        tokens.clear();
        alive.clear();
        alive.resize(n / 64 + 1, u64::MAX);
        let mut pos = 0usize;
        let mut next = self.longest(text);
        let mut found = true;
        while pos < n {
            let mut token = next;
            let last = tokens.last().copied().unwrap_or(NONE);
            loop {
                let end = pos + model.token_len(token);
                if alive[end / 64] >> (end % 64) & 1 != 0
                    && (if last == NONE {
                        self.compatible(model, token, NONE, scratch)
                    } else {
                        self.compatible(model, last, token, scratch)
                    })
                {
                    tokens.push(token);
                    pos = end;
                    next = self.longest(&text[pos..]);
                    break;
                }
                let shorter = self.shorter[token as usize];
                if shorter != NONE {
                    token = shorter;
                    continue;
                }
                // No token fits at `pos` after `last`: `pos` is dead; step back.
                alive[pos / 64] &= !(1u64 << (pos % 64));
                match tokens.pop() {
                    Some(last) => {
                        pos -= model.token_len(last);
                        next = last;
                    }
                    None => found = false,
                }
                break;
            }
            if !found {
                break;
            }
        }
        if found {
            out.extend_from_slice(&tokens);
        }
        scratch.tokens = tokens;
        scratch.alive = alive;
        found
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fixture_models, BYTE_LEVEL};
    use super::*;
    use serde_json::Value;

    /// A random byte-level BPE over the letters `a`..`a + letters`: `merges` random merges of
    /// existing tokens, each new token appended in rank order (as training produces them).
    fn random_model(seed: u64, letters: u8, merges: usize) -> BpeModel {
        let table = super::super::byte_to_char();
        let mut vocab = serde_json::Map::new();
        for b in 0..=255u8 {
            vocab.insert(table[usize::from(b)].to_string(), Value::from(u32::from(b)));
        }
        let mut tokens: Vec<String> = (0..letters).map(|k| char::from(b'a' + k).to_string()).collect();
        let mut state = seed | 1;
        let mut rand = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut list = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..merges * 50 {
            if list.len() == merges {
                break;
            }
            let (a, b) = (tokens[rand(tokens.len())].clone(), tokens[rand(tokens.len())].clone());
            if a.len() + b.len() > 12 || !seen.insert((a.clone(), b.clone())) {
                continue;
            }
            let ab = format!("{a}{b}");
            if !vocab.contains_key(&ab) {
                vocab.insert(ab.clone(), Value::from(vocab.len() as u32));
                tokens.push(ab);
            }
            list.push(format!("{a} {b}"));
        }
        let json = serde_json::json!({ "type": "BPE", "vocab": vocab, "merges": list });
        BpeModel::from_json(&json).unwrap()
    }

    fn heap_bpe(model: &BpeModel, word: &[u8]) -> Vec<u32> {
        let symbols: Vec<u32> = word.iter().map(|&b| model.byte_ids[usize::from(b)]).collect();
        let mut out = Vec::new();
        merge_core::merge_heap(&model.merges, &symbols, &mut merge_core::Scratch::default(), |id, _| out.push(id));
        out
    }

    /// The search against the heap merge on random words over 1-4 letters, for random models
    /// (several share a token between merges, which exercises unreachable tokens).
    #[test]
    fn backtracking_is_the_heap_merge_on_random_models() {
        let mut checked = 0;
        for seed in 1..60u64 {
            let letters = 1 + (seed % 4) as u8;
            let model = random_model(seed * 7919, letters, 20 + (seed as usize * 3) % 60);
            let Some(search) = Backtrack::new(&model) else { continue };
            let mut scratch = Scratch::default();
            let mut state = seed;
            for _ in 0..300 {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let len = 1 + (state >> 33) as usize % 200;
                let word: Vec<u8> = (0..len)
                    .map(|k| {
                        let r = (state >> (k % 61)) ^ (k as u64).wrapping_mul(0x9e37_79b9);
                        b'a' + (r % u64::from(letters)) as u8
                    })
                    .collect();
                let mut got = Vec::new();
                assert!(search.encode(&model, &word, &mut scratch, &mut got));
                assert_eq!(got, heap_bpe(&model, &word), "seed {seed}: {:?}", String::from_utf8_lossy(&word));
                checked += 1;
            }
        }
        assert!(checked > 5000, "only {checked} words checked");
    }

    /// The search against the heap merge on the real vocabularies: runs of one byte, of spaces,
    /// random base64 and digits, random words over small alphabets.
    #[test]
    fn backtracking_is_the_heap_merge_on_fixtures() {
        for (name, model) in fixture_models(&BYTE_LEVEL) {
            let search = Backtrack::new(&model).expect("the search builds");
            let mut scratch = Scratch::default();
            let mut words: Vec<Vec<u8>> = Vec::new();
            for b in [b'a', b' ', b'-', b'=', b'0', b'\n', b'x', b'.'] {
                for len in [1, 2, 3, 7, 16, 17, 64, 129, 1000, 4099] {
                    words.push(vec![b; len]);
                }
            }
            words.push("中".repeat(700).into_bytes());
            let alphabets: [&[u8]; 5] = [
                b"ab",
                b"abc ",
                b"0123456789",
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                b" \t\n",
            ];
            let mut state = 0x2545_f491_4f6c_dd1du64;
            for alphabet in alphabets {
                for _ in 0..40 {
                    let len = 1 + (state % 3000) as usize;
                    let word = (0..len)
                        .map(|_| {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            alphabet[(state % alphabet.len() as u64) as usize]
                        })
                        .collect();
                    words.push(word);
                }
            }
            for word in &words {
                let mut got = Vec::new();
                assert!(search.encode(&model, word, &mut scratch, &mut got));
                let expected = heap_bpe(&model, word);
                assert_eq!(got, expected, "{name}: {:?}", String::from_utf8_lossy(&word[..word.len().min(40)]));
            }
        }
    }

    /// Build time of the search and encode time of long runs, against the heap merge (release:
    /// `cargo test --release -p lopt --lib long_word_timing -- --ignored --nocapture`).
    #[test]
    #[ignore = "timing: run in release"]
    fn long_word_timing() {
        for (name, model) in fixture_models(&BYTE_LEVEL) {
            let t = std::time::Instant::now();
            let search = Backtrack::new(&model).unwrap();
            let build = t.elapsed();
            let mut scratch = Scratch::default();
            let mut line = format!("{name}: build {:.1} ms", build.as_secs_f64() * 1e3);
            for (label, word) in [("a", vec![b'a'; 1 << 20]), ("spaces", vec![b' '; 1 << 20])] {
                let (mut got, mut expected) = (Vec::new(), Vec::new());
                let t = std::time::Instant::now();
                search.encode(&model, &word, &mut scratch, &mut got);
                let fast = t.elapsed();
                let t = std::time::Instant::now();
                let symbols: Vec<u32> = word.iter().map(|&b| model.byte_ids[usize::from(b)]).collect();
                merge_core::merge_heap(&model.merges, &symbols, &mut merge_core::Scratch::default(), |id, _| {
                    expected.push(id)
                });
                let heap = t.elapsed();
                assert_eq!(got, expected);
                line += &format!(
                    ", 1 MiB {label}: search {:.1} ms, heap {:.1} ms",
                    fast.as_secs_f64() * 1e3,
                    heap.as_secs_f64() * 1e3
                );
            }
            eprintln!("{line}");
        }
    }
}
