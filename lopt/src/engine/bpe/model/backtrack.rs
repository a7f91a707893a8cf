//! The byte-level model's long-word search: the shared backtracking search
//! (`engine/backtrack.rs`) over byte symbols, each token spelled by its bytes.

use super::BpeModel;
pub(crate) use crate::engine::backtrack::{Backtrack, Scratch};

/// Compiles the search for `model`; `None` when the vocabulary is too large for it. With
/// `side_by_side`, its two parts on the current pool (see [`Backtrack::build`] for when that is
/// allowed).
pub(crate) fn search(model: &BpeModel, side_by_side: bool) -> Option<Backtrack> {
    let size = model.token_len.len();
    let mut by_id: Vec<&[u8]> = vec![&[]; size];
    for (bytes, &id) in &model.vocab {
        if let Some(slot) = by_id.get_mut(id as usize) {
            *slot = bytes;
        }
    }
    let mut starts = Vec::with_capacity(size + 1);
    starts.push(0u32);
    let mut symbols = Vec::new();
    for bytes in by_id {
        symbols.extend(bytes.iter().map(|&b| model.byte_ids[usize::from(b)]));
        starts.push(u32::try_from(symbols.len()).ok()?);
    }
    let digits = (b'0'..=b'9').map(|b| model.byte_ids[usize::from(b)]).collect();
    Backtrack::build(&model.merges, starts, symbols, side_by_side)
        .map(|search| search.with_digits(&model.merges, digits))
}

/// Appends BPE of `word` to `out` by the search; `false` (nothing appended) if it fails.
pub(crate) fn encode(
    search: &Backtrack,
    model: &BpeModel,
    word: &[u8],
    symbols: &mut Vec<u32>,
    scratch: &mut Scratch,
    out: &mut Vec<u32>,
) -> bool {
    symbols.clear();
    symbols.extend(word.iter().map(|&b| model.byte_ids[usize::from(b)]));
    search.encode(&model.merges, symbols, scratch, |id, _| out.push(id))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fixture_models, BYTE_LEVEL};
    use super::*;
    use crate::engine::merge_core;
    use serde_json::Value;

    /// A random byte-level BPE over the letters `a`..`a + letters`: `merges` random merges of
    /// existing tokens, each new token appended in rank order (as training produces them).
    fn random_model(seed: u64, letters: u8, merges: usize) -> BpeModel {
        random_model_from(seed, b'a', letters, merges)
    }

    /// [`random_model`] over the letters `first`..`first + letters` (digits: the windows then
    /// take the dense table, `Backtrack::dense`).
    fn random_model_from(seed: u64, first: u8, letters: u8, merges: usize) -> BpeModel {
        let table = super::super::byte_to_char();
        let mut vocab = serde_json::Map::new();
        for b in 0..=255u8 {
            vocab.insert(table[usize::from(b)].to_string(), Value::from(u32::from(b)));
        }
        let mut tokens: Vec<String> = (0..letters).map(|k| char::from(first + k).to_string()).collect();
        let mut state = seed | 1;
        let mut rand = move |n: usize| {
            crate::engine::xorshift(&mut state);
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
        let mut walks = (0, 0);
        // Odd seeds build the search's two parts side by side on a pool (the synchronous seed's
        // way), even ones one after the other: the same search either way.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for seed in 1..60u64 {
            let letters = 1 + (seed % 4) as u8;
            // One model in three over digits, whose long words' windows read the dense table.
            let first = if seed % 3 == 0 { b'0' } else { b'a' };
            let model = random_model_from(seed * 7919, first, letters, 20 + (seed as usize * 3) % 60);
            let built = if seed % 2 == 1 { pool.install(|| search(&model, true)) } else { search(&model, false) };
            let Some(search) = built else { continue };
            let (walkable, others) = search.check_walks(&model.merges, 120);
            walks.0 += walkable;
            walks.1 += others;
            let mut scratch = Scratch::default();
            let mut state = seed;
            for _ in 0..300 {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                // One word in 4 long enough for two streams of windows (`Backtrack::windows`).
                let len = 1 + (state >> 33) as usize % if state % 4 == 0 { 1200 } else { 200 };
                let word: Vec<u8> = (0..len)
                    .map(|k| {
                        let r = (state >> (k % 61)) ^ (k as u64).wrapping_mul(0x9e37_79b9);
                        first + (r % u64::from(letters)) as u8
                    })
                    .collect();
                let mut got = Vec::new();
                assert!(encode(&search, &model, &word, &mut Vec::new(), &mut scratch, &mut got));
                assert_eq!(got, heap_bpe(&model, &word), "seed {seed}: {:?}", String::from_utf8_lossy(&word));
                checked += 1;
            }
        }
        assert!(checked > 5000, "only {checked} words checked");
        // Both ways of deciding compatibility are exercised: the rank walk (and checked against
        // merging, pair by pair) and merging.
        assert!(walks.0 > 500 && walks.1 > 20, "walkable and other tokens: {walks:?}");
    }

    /// The search handed BPE of a prefix (as the windowed pass hands it over) must still find
    /// BPE of the whole word, also where it has to step back into the tokens it was given and
    /// try tokens longer than the one it drops there (a first version of the hand-over tried
    /// only shorter ones: the search failed on qwen3's and claude's runs of spaces, which then
    /// went to the heap merge).
    #[test]
    fn search_goes_on_from_given_tokens() {
        let mut checked = 0;
        for seed in 1..40u64 {
            let letters = 1 + (seed % 3) as u8;
            let model = random_model(seed * 104_729, letters, 20 + (seed as usize * 7) % 50);
            let Some(search) = search(&model, false) else { continue };
            let mut state = seed | 1;
            for _ in 0..100 {
                let len = 2 + (state % 120) as usize;
                let alphabet: Vec<u8> = (0..letters).map(|k| b'a' + k).collect();
                let word = crate::engine::random_word(&mut state, &alphabet, len);
                let symbols: Vec<u32> = word.iter().map(|&b| model.byte_ids[usize::from(b)]).collect();
                let cut = 1 + (state % (len as u64 - 1)) as usize;
                let given = heap_bpe(&model, &word[..cut]);
                let got = search.search_from(&model.merges, &symbols, &given);
                assert_eq!(
                    got,
                    Some(heap_bpe(&model, &word)),
                    "seed {seed}: {:?} cut at {cut}",
                    String::from_utf8_lossy(&word)
                );
                checked += 1;
            }
        }
        assert!(checked > 2000, "only {checked} words checked");
    }

    /// The search against the heap merge on the real vocabularies: runs of one byte, of spaces,
    /// random base64 and digits, random words over small alphabets.
    #[test]
    fn backtracking_is_the_heap_merge_on_fixtures() {
        for (name, model) in fixture_models(&BYTE_LEVEL) {
            let search = search(&model, false).expect("the search builds");
            let (walkable, others) = search.check_walks(&model.merges, 40);
            eprintln!("{name}: {walkable} tokens decided by the rank walk, {others} reachable ones by merging");
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
                    words.push(crate::engine::random_word(&mut state, alphabet, len));
                }
            }
            for word in &words {
                let mut got = Vec::new();
                assert!(encode(&search, &model, word, &mut Vec::new(), &mut scratch, &mut got));
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
            let search = search(&model, false).unwrap();
            let build = t.elapsed();
            let mut scratch = Scratch::default();
            let mut line = format!("{name}: build {:.1} ms", build.as_secs_f64() * 1e3);
            for (label, word) in [("a", vec![b'a'; 1 << 20]), ("spaces", vec![b' '; 1 << 20])] {
                let (mut got, mut expected) = (Vec::new(), Vec::new());
                let t = std::time::Instant::now();
                encode(&search, &model, &word, &mut Vec::new(), &mut scratch, &mut got);
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

    /// Random digit words of 33-3,000 bytes (the windows with the dense table of digit tokens'
    /// merges, `Backtrack::dense`) by the search against the heap merge, on the fixtures whose
    /// vocabularies have multi-digit tokens (claude and gpt2 pre-tokenize digit runs whole; the
    /// others take the same path here).
    #[test]
    fn digit_windows_are_the_heap_merge_on_fixtures() {
        for (name, model) in fixture_models(&["claude", "gpt2", "gpt4o", "gptoss", "qwen3"]) {
            let search = search(&model, false).unwrap();
            let mut scratch = Scratch::default();
            let mut state = 0x5eed_d161u64;
            for round in 0..40 {
                crate::engine::xorshift(&mut state);
                let len = 33 + (state % 3000) as usize;
                // Some words repeat a short digit pattern (long digit tokens), most are random.
                let period = if round % 4 == 0 { 1 + (state >> 40) as usize % 7 } else { usize::MAX };
                let mut pattern = Vec::new();
                let word: Vec<u8> = (0..len)
                    .map(|k| {
                        if k >= period {
                            return pattern[k % period];
                        }
                        crate::engine::xorshift(&mut state);
                        let d = b'0' + (state % 10) as u8;
                        pattern.push(d);
                        d
                    })
                    .collect();
                let mut got = Vec::new();
                assert!(encode(&search, &model, &word, &mut Vec::new(), &mut scratch, &mut got), "{name}");
                assert_eq!(got, heap_bpe(&model, &word), "{name}: {}", String::from_utf8_lossy(&word));
            }
        }
    }
}
