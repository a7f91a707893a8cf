//! The native WordPiece engine through the public API: `encode` with `EngineKind::Native` on the
//! BERT fixtures against HF's sequential `encode` (all fields), over corpus samples, trap strings
//! and forced tiny chunks, with and without special tokens, on the bulk kernels and on their
//! scalar twins (`TokenizerBuilder::scalar_kernels`).
//!
//! The segment-level comparison with HF lives next to the engine (`lopt/src/engine/wordpiece`);
//! this checks the wiring: engine choice, merge of word ids and offsets, post-processing. A
//! missing fixture, or a build without the engine selected, is skipped with a notice.

use lopt::{EngineKind, Tokenizer, TokenizerBuilder};
use lopt_tests::{corpus_samples, fixture, generated_text, truncate, TRAPS};

const BERTS: &[&str] = &["bert-base-uncased", "bert-base-cased"];

/// WordPiece traps on top of the shared ones (see the engine's own trap list for what each
/// guards).
const WORDPIECE_TRAPS: &[&str] = &[
    "a[MASK]b [CLS][SEP]x[PAD] [UNK]y [MASK",
    "a\u{b}b\u{c}c d\u{b} \u{c}e",
    "a\u{1}b\u{7f}c\u{0}d \u{1c}\u{1f}e\u{85}f ab\u{fffd}cd",
    "École ÉCOLE Ångström İstanbul xİx ΟΔΟΣ σς",
    "中文English混合text日本語テキスト한국어 中,文。\u{f900}\u{20000}",
    "a\u{301}\u{316}b x\u{315}\u{300}\u{5ae}y e\u{301}\u{316}\u{1d165}\u{1d16d}q",
    "I ❤️ 🤗 tokenizers 👨‍👩‍👧 🇫🇷! ﬁnance ＡＢＣ１２３！？",
];

/// The native tokenizer, its twin on scalar kernels, and the automatic choice.
fn build(name: &str, threads: usize, chunk: Option<usize>) -> Option<(Tokenizer, Tokenizer, Tokenizer)> {
    let Some(path) = fixture(name) else {
        eprintln!("NOTICE: fixture tokenizer {name} not found; its native WordPiece tests are skipped");
        return None;
    };
    let mut builder = TokenizerBuilder::new().threads(threads).min_parallel_bytes(0).overlap(64);
    if let Some(chunk) = chunk {
        builder = builder.chunk_size(chunk);
    }
    let native = match builder.clone().engine(EngineKind::Native).build_from_file(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("NOTICE: no native engine for {name} ({e}); native WordPiece tests are skipped");
            return None;
        }
    };
    assert_eq!(native.engine_name(), "wordpiece", "{name} should get the native WordPiece engine");
    let scalar = builder.engine(EngineKind::Native).scalar_kernels(true).build_from_file(&path).unwrap();
    let auto = TokenizerBuilder::new().build_from_file(&path).unwrap();
    Some((native, scalar, auto))
}

fn texts() -> Vec<(String, String)> {
    let mut texts: Vec<(String, String)> = corpus_samples(3, 48 * 1024).into_iter().map(|s| (s.name, s.text)).collect();
    for (i, t) in TRAPS.iter().chain(WORDPIECE_TRAPS).enumerate() {
        texts.push((format!("trap {i}"), (*t).to_owned()));
        texts.push((format!("trap {i} repeated"), format!("{t} x{t}{t}. ").repeat(20)));
    }
    texts.push(("long word".into(), format!("{} {}é {}", "a".repeat(150), "é".repeat(99), "中".repeat(120))));
    texts.push(("generated".into(), generated_text(7, 20_000)));
    texts
}

#[test]
fn native_wordpiece_equals_sequential_hf() {
    let texts = texts();
    for name in BERTS {
        for (threads, chunk) in [(1, None), (2, Some(4096)), (3, Some(61))] {
            let Some((native, scalar, auto)) = build(name, threads, chunk) else { return };
            if threads == 1 {
                assert_eq!(auto.engine_name(), "wordpiece", "{name}: Auto should pick the native engine");
            }
            for (what, text) in &texts {
                for add_special in [true, false] {
                    let want = native.encode_sequential(text, add_special).unwrap();
                    for (kernels, tokenizer) in [("bulk", &native), ("scalar", &scalar)] {
                        let got = tokenizer.encode(text, add_special).unwrap();
                        if let Some(d) = got.first_difference(&want) {
                            let at = want.offsets().get(d.index).map_or(0, |o| o.0);
                            panic!(
                                "{name} {what} threads={threads} chunk={chunk:?} special={add_special} \
                                 {kernels} kernels: {d}; got {:?} want {:?} near {:?}",
                                got.ids().get(d.index),
                                want.ids().get(d.index),
                                truncate(&text[at.min(text.len())..], 40)
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Added tokens matched on normalized text or stripping whitespace: HF's token strings are the
/// matched text, so the native segments carry strings; the merged result must still be exact.
#[test]
fn native_wordpiece_with_extra_added_tokens() {
    let Some(path) = fixture("bert-base-uncased") else {
        eprintln!("NOTICE: fixture tokenizer bert-base-uncased not found; extra added tokens skipped");
        return;
    };
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    for (i, (content, normalized, lstrip, rstrip)) in
        [("hello", true, false, false), ("Straße", true, false, false), ("[NEW]", false, true, true)]
            .into_iter()
            .enumerate()
    {
        json["added_tokens"].as_array_mut().unwrap().push(serde_json::json!({
            "id": 30600 + i, "content": content, "single_word": false, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": false
        }));
    }
    let bytes = json.to_string().into_bytes();
    let text = "HELLO there, STRASSE Straße [NEW] x  [NEW]\ty. ".repeat(400);
    for chunk in [None, Some(500), Some(37)] {
        let mut builder = TokenizerBuilder::new().threads(3).min_parallel_bytes(0).overlap(64);
        if let Some(chunk) = chunk {
            builder = builder.chunk_size(chunk);
        }
        let native = match builder.engine(EngineKind::Native).build_from_bytes(&bytes) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("NOTICE: no native engine with extra added tokens ({e}); skipped");
                return;
            }
        };
        for add_special in [true, false] {
            let want = native.encode_sequential(&text, add_special).unwrap();
            let got = native.encode(&text, add_special).unwrap();
            assert!(got.first_difference(&want).is_none(), "chunk {chunk:?}: {:?}", got.first_difference(&want));
        }
    }
}
