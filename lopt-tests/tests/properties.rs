//! Property tests: random texts built from the fragments that break parallel tokenizers (added
//! tokens at and across chunk edges, whitespace and newline runs, digit runs, contractions, case
//! changes, CJK runs, combining marks, emoji and ZWJ sequences, `\x0b`/`\x0c`, words longer than
//! `max_input_chars_per_word`, text repeated over lengths longer than the overlap), encoded with
//! chunk sizes down to one byte, compared with HF's sequential `encode`.

use std::sync::OnceLock;

use lopt::{Tokenizer, TokenizerBuilder};
use lopt_tests::{available_fixtures, TRAPS};
use proptest::prelude::*;

/// Per fixture: tokenizers cutting at every safe cut (chunk 1), and at a few coarser settings.
fn tokenizers() -> &'static [(&'static str, Vec<Tokenizer>)] {
    static CELL: OnceLock<Vec<(&'static str, Vec<Tokenizer>)>> = OnceLock::new();
    CELL.get_or_init(|| {
        available_fixtures()
            .into_iter()
            .map(|(name, path)| {
                let built = [(1, 0, 2), (5, 4, 3), (23, 16, 4)]
                    .into_iter()
                    .map(|(chunk, overlap, threads)| {
                        TokenizerBuilder::new()
                            .threads(threads)
                            .chunk_size(chunk)
                            .overlap(overlap)
                            .min_parallel_bytes(0)
                            .build_from_file(&path)
                            .unwrap()
                    })
                    .collect();
                (name, built)
            })
            .collect()
    })
}

/// `PROPTEST_CASES` for long local hunts; a CI-sized default otherwise.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(96)
}

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(TRAPS).prop_map(str::to_owned),
        3 => "[a-zA-Z]{1,8}",
        2 => "[ \n\t\r]{1,4}",
        2 => "[0-9]{1,7}",
        1 => "[一-龥]{1,6}",
        1 => "[.,;:!?'\"()<>|/\\-]{1,3}",
        1 => "\\PC{1,3}",
        1 => "[a-z]{101,130}",
    ]
}

fn text() -> impl Strategy<Value = String> {
    (prop::collection::vec(fragment(), 0..40), 0usize..3).prop_map(|(parts, repeat)| parts.concat().repeat(repeat + 1))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn parallel_equals_sequential(text in text(), add_special in any::<bool>()) {
        for (name, built) in tokenizers() {
            let want = built[0].encode_sequential(&text, add_special).unwrap();
            for tokenizer in built {
                let got = tokenizer.encode(&text, add_special).unwrap();
                prop_assert!(got == want, "{} differs on {:?}: {:?}", name, text, got.first_difference(&want));
            }
        }
    }
}
