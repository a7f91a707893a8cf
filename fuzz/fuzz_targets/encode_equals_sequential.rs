//! Fuzz target: for any text and chunk setting, lopt's parallel `encode` equals HF's sequential
//! `encode` of the same tokenizer.json.
//!
//! Input layout: byte 0 picks the fixture tokenizer, byte 1 one of a few chunk settings (chunk
//! size 1 cuts at every safe cut); the rest, read as UTF-8 (lossily), is the text. Fixtures are read from
//! `$LOPT_SHARED/tokenizers` (default `../../shared/tokenizers` relative to `fuzz/`).
//!
//! Run: `cd fuzz && cargo +nightly fuzz run encode_equals_sequential -- -max_len=4096`.
//! A failure panics with a reproducer: the fixture, the settings and the text as a Rust literal.
#![no_main]

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;

/// New fixtures go at the end, so that saved inputs keep picking the same tokenizer.
const FIXTURES: &[&str] =
    &["qwen3", "deepseek_v3", "llama3_1", "gptoss", "gpt2", "bert-base-uncased", "bert-base-cased", "gemma3", "llama2", "gpt4o", "claude"];

fn fixture_bytes() -> &'static [(&'static str, Vec<u8>)] {
    static CELL: OnceLock<Vec<(&'static str, Vec<u8>)>> = OnceLock::new();
    CELL.get_or_init(|| {
        let shared = std::env::var("LOPT_SHARED").unwrap_or_else(|_| "../../shared".into());
        FIXTURES
            .iter()
            .filter_map(|name| {
                let path = format!("{shared}/tokenizers/{name}/tokenizer.json");
                std::fs::read(path).ok().map(|bytes| (*name, bytes))
            })
            .collect()
    })
}

/// (chunk size, search window) settings; tokenizers are built once per fixture and setting.
const SETTINGS: &[(usize, usize)] = &[(1, 0), (3, 2), (17, 8), (64, 32)];

fn tokenizer(fixture: usize, setting: usize) -> &'static lopt::Tokenizer {
    static CELL: OnceLock<Mutex<HashMap<(usize, usize), &'static lopt::Tokenizer>>> = OnceLock::new();
    let mut built = CELL.get_or_init(Default::default).lock().expect("not poisoned");
    built.entry((fixture, setting)).or_insert_with(|| {
        let (chunk, overlap) = SETTINGS[setting];
        let tokenizer = lopt::TokenizerBuilder::new()
            .threads(2)
            .chunk_size(chunk)
            .overlap(overlap)
            .min_parallel_bytes(0)
            .build_from_bytes(&fixture_bytes()[fixture].1)
            .expect("fixture loads");
        Box::leak(Box::new(tokenizer))
    })
}

fuzz_target!(|data: &[u8]| {
    let fixtures = fixture_bytes();
    if data.len() < 2 || fixtures.is_empty() {
        return;
    }
    let fixture = usize::from(data[0]) % fixtures.len();
    let setting = usize::from(data[1]) % SETTINGS.len();
    let text = String::from_utf8_lossy(&data[2..]);
    let tokenizer = tokenizer(fixture, setting);
    let want = tokenizer.encode_sequential(&text, true).expect("HF encodes");
    let got = tokenizer.encode(&text, true).expect("lopt encodes");
    if got != want {
        panic!(
            "lopt differs from HF: {:?}\nreproducer: fixture={} chunk_size/overlap={:?} text={:?}",
            got.first_difference(&want),
            fixtures[fixture].0,
            SETTINGS[setting],
            text
        );
    }
});
