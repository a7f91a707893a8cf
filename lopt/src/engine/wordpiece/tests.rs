//! Differential tests: the native engine against `HfEngine`, segment for segment, on the BERT
//! fixtures (skipped with a notice when absent), corpus samples, trap strings and every Unicode
//! scalar value.

use std::path::PathBuf;
use std::sync::Arc;

use super::*;
use crate::engine::hf::HfEngine;

pub(super) fn fixture_path(name: &str) -> Option<PathBuf> {
    crate::testdata::tokenizer_path(name)
}

struct Pair {
    name: &'static str,
    hf: HfEngine,
    native: WordPieceEngine,
}

fn pair_from_json(name: &'static str, json: &Value) -> Pair {
    let hf = tokenizers::Tokenizer::from_bytes(json.to_string().as_bytes()).unwrap();
    Pair { name, hf: HfEngine::new(Arc::new(hf)), native: WordPieceEngine::from_json(json).unwrap() }
}

fn pairs() -> Vec<Pair> {
    ["bert-base-uncased", "bert-base-cased"]
        .into_iter()
        .filter_map(|name| {
            let Some(path) = fixture_path(name) else {
                eprintln!("NOTICE: fixture tokenizer {name} not found; its WordPiece tests are skipped");
                return None;
            };
            let json: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            Some(pair_from_json(name, &json))
        })
        .collect()
}

impl Pair {
    /// Compares both engines on `text`; returns a description of the first difference.
    fn diff(&self, text: &str) -> Option<String> {
        let want = self.hf.encode_segment(text);
        let got = self.native.encode_segment(text);
        let (want, got) = match (want, got) {
            (Ok(w), Ok(g)) => (w, g),
            (Err(w), Err(g)) if w.to_string() == g.to_string() => return None,
            (w, g) => return Some(format!("{}: hf {:?} vs native {:?}", self.name, w.err(), g.err())),
        };
        // The ids-only path must give the same ids.
        match self.native.encode_ids(text, false) {
            Ok(ids) if ids == want.ids => {}
            other => return Some(format!("{}: ids-only {:?} vs {:?} on {text:?}", self.name, other.ok(), want.ids)),
        }
        if !got.tokens.is_empty() && got.tokens != want.tokens {
            return Some(format!("{}: token strings {:?} vs {:?} on {text:?}", self.name, want.tokens, got.tokens));
        }
        if want.words != got.words {
            return Some(format!("{}: words {} vs {} on {text:?}", self.name, want.words, got.words));
        }
        let n = want.ids.len().max(got.ids.len());
        for i in 0..n {
            let w = (want.ids.get(i), want.offsets.get(i), want.word_ids.get(i));
            let g = (got.ids.get(i), got.offsets.get(i), got.word_ids.get(i));
            if w != g {
                let at = want.offsets.get(i).or(got.offsets.get(i)).map_or(0, |o| o.0);
                let mut lo = at.saturating_sub(40);
                while !text.is_char_boundary(lo) {
                    lo -= 1;
                }
                let mut hi = (at + 40).min(text.len());
                while !text.is_char_boundary(hi) {
                    hi += 1;
                }
                return Some(format!(
                    "{}: token {i}: hf {w:?} ({:?}) vs native {g:?}; near {:?}",
                    self.name,
                    want.tokens.get(i),
                    &text[lo..hi]
                ));
            }
        }
        None
    }

    fn check(&self, text: &str) {
        if let Some(d) = self.diff(text) {
            panic!("{d}");
        }
    }
}

/// Regression and trap strings; each names what it guards.
const TRAPS: &[(&str, &str)] = &[
    ("empty", ""),
    ("plain", "Hello, world! How are you?"),
    ("whitespace runs", "  a \t\t b\n\n\r\nc   "),
    ("vertical tab and form feed are removed, not spaces", "a\u{b}b\u{c}c d\u{b} \u{c}e"),
    ("control chars", "a\u{1}b\u{7f}c\u{0}d \u{1c}\u{1f}e\u{85}f"),
    ("replacement char", "ab\u{fffd}cd \u{fffd} x"),
    ("format chars", "a\u{200b}b\u{200d}c\u{feff}d\u{ad}e"),
    ("combining marks", "e\u{301}te\u{301} cafe\u{301}\u{327} \u{301}x \u{301}"),
    ("accented capitals", "École ÉCOLE Ångström Ďábel Über"),
    ("dotted capital I", "İstanbul İ İİ xİx"),
    ("final sigma", "ΟΔΟΣ ΣΊΣΥΦΟΣ σς Σ"),
    ("CJK with Latin", "中文English混合text日本語テキスト한국어 中,文。"),
    ("CJK compatibility ideographs", "\u{f900}\u{fa0e}x\u{2f800}y"),
    ("CJK extension B", "a\u{20000}b\u{2a6df}\u{2b820}"),
    ("emoji", "I ❤️ 🤗 tokenizers 👨‍👩‍👧 🇫🇷!"),
    ("mask glued to words", "a[MASK]b [CLS][SEP]x[PAD] [UNK]y [MASK"),
    ("unknown glyphs", "a\u{2603}b ☃☃ x\u{1d11e}"),
    ("greek question mark decomposes to semicolon", "a\u{37e}b \u{387}c"),
    ("greek varia decomposes to backtick", "a\u{1fef}b"),
    ("canonical reordering", "a\u{301}\u{316}b x\u{315}\u{300}\u{5ae}y \u{300}\u{f73}z"),
    ("reordering with nonspacing removed", "e\u{301}\u{316}\u{1d165}\u{1d16d}q"),
    ("hangul decomposes", "한국어 텍스트"),
    ("fullwidth", "ＡＢＣ１２３！？"),
    ("ligatures and compat", "ﬁnance ﬃ Å K"),
    ("unicode spaces", "a\u{a0}b\u{2003}c\u{3000}d\u{2028}e\u{2029}f\u{1680}g"),
    ("digits and symbols", "3.14 $100 50% a+b=c <tag> ~x^y_z `q` |p|"),
    ("long dash runs", "----- ===== ..... !!!!!"),
];

fn long_words() -> Vec<String> {
    vec![
        "a".repeat(100),
        "a".repeat(101),
        format!("{} x", "b".repeat(150)),
        "é".repeat(100),
        "é".repeat(101),
        // 101 characters before stripping, 100 after: HF counts the normalized word.
        format!("{}e\u{301}", "e".repeat(99)),
        format!("{}É", "x".repeat(100)),
        "中".repeat(150),
        format!("{}İ", "i".repeat(99)),
        format!("{}\u{1}{}", "c".repeat(60), "c".repeat(41)),
        "unaffable".repeat(12),
        format!("[MASK]{}[MASK]", "z".repeat(120)),
    ]
}

#[test]
fn trap_strings() {
    for pair in pairs() {
        for (what, text) in TRAPS {
            if let Some(d) = pair.diff(text) {
                panic!("trap {what:?}: {d}");
            }
        }
        for text in long_words() {
            pair.check(&text);
        }
    }
}

#[test]
fn every_scalar_value_in_context() {
    let mut pairs = pairs();
    // And the flags the fixtures leave untried: no cleaning, no CJK padding, stripping on.
    if let Some(path) = fixture_path("bert-base-uncased") {
        let mut json: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        json["normalizer"] = serde_json::json!({
            "type": "BertNormalizer", "clean_text": false, "handle_chinese_chars": false,
            "strip_accents": true, "lowercase": true
        });
        pairs.push(pair_from_json("uncased, no clean, no cjk", &json));
    }
    for pair in pairs {
        let mut batch = String::new();
        let mut count = 0;
        for c in (0..=0x10ffffu32).filter_map(char::from_u32) {
            // Alone, glued to ASCII on both sides, and doubled.
            batch.push(c);
            batch.push_str(" x");
            batch.push(c);
            batch.push('Y');
            batch.push(c);
            batch.push(c);
            batch.push(' ');
            count += 1;
            if count % 256 == 0 {
                pair.check(&batch);
                batch.clear();
            }
        }
        pair.check(&batch);
    }
}

#[test]
fn corpus_samples() {
    let corpora = crate::testdata::shared().join("corpora");
    let files = ["mixed_hard.jsonl", "zh_long.jsonl", "en_verylong.jsonl", "leval.jsonl"];
    let pairs = pairs();
    for file in files {
        let Ok(data) = std::fs::read_to_string(corpora.join(file)) else {
            eprintln!("NOTICE: corpus {file} not found; skipped");
            continue;
        };
        for line in data.lines().take(if file == "mixed_hard.jsonl" { 64 } else { 6 }) {
            let doc: Value = serde_json::from_str(line).unwrap();
            let text = doc["text"].as_str().unwrap_or_default();
            let mut end = text.len().min(64 * 1024);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            for pair in &pairs {
                if let Some(d) = pair.diff(&text[..end]) {
                    panic!("{file} doc {}: {d}", doc["id"]);
                }
            }
        }
    }
}

/// Every tokenizer option the engine accepts, on the traps: cased and uncased with each flag
/// flipped, no normalizer, added tokens with strip flags, an alternative prefix and limit.
#[test]
fn option_variants() {
    let Some(path) = fixture_path("bert-base-uncased") else {
        eprintln!("NOTICE: fixture tokenizer bert-base-uncased not found; option variants skipped");
        return;
    };
    let base: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut variants: Vec<(&'static str, Value)> = Vec::new();
    for (name, clean, cjk, strip, lower) in [
        ("no clean", false, true, Value::Null, true),
        ("no cjk", true, false, Value::Null, true),
        ("strip cased", true, true, Value::Bool(true), false),
        ("lower no strip", true, true, Value::Bool(false), true),
        ("all off", false, false, Value::Bool(false), false),
    ] {
        let mut v = base.clone();
        v["normalizer"] = serde_json::json!({
            "type": "BertNormalizer", "clean_text": clean, "handle_chinese_chars": cjk,
            "strip_accents": strip, "lowercase": lower
        });
        variants.push((name, v));
    }
    let mut v = base.clone();
    v["normalizer"] = Value::Null;
    variants.push(("no normalizer", v));
    let mut v = base.clone();
    v["model"]["max_input_chars_per_word"] = serde_json::json!(5);
    v["model"]["continuing_subword_prefix"] = serde_json::json!("#");
    variants.push(("prefix and limit", v));
    let mut v = base.clone();
    let tokens = v["added_tokens"].as_array_mut().unwrap();
    for (i, (content, single, l, r)) in [
        ("[MASK]", false, true, true),
        ("<x>", true, false, false),
        ("ab", false, false, true),
        ("Ω", true, true, false),
    ]
    .into_iter()
    .enumerate()
    {
        tokens.push(serde_json::json!({
            "id": 40000 + i, "content": content, "single_word": single, "lstrip": l, "rstrip": r,
            "normalized": false, "special": false
        }));
    }
    variants.push(("added tokens with flags", v));
    let extra =
        ["x [MASK] y  [MASK]  z\t[MASK]\n", " <x> a<x>b <x>, é<x>", "ab ab  abab cab  ", "Ω ΩΩ aΩ Ω.", "  [MASK]   "];
    for (name, json) in variants {
        let pair = pair_from_json(name, &json);
        for text in TRAPS.iter().map(|(_, t)| *t).chain(extra) {
            if let Some(d) = pair.diff(text) {
                panic!("variant {name:?}: {d}");
            }
        }
        for text in long_words() {
            pair.check(&text);
        }
    }
}

/// Added tokens matched on normalized text, and added tokens whose string is the matched text:
/// token strings must then come with the segment.
#[test]
fn normalized_and_stripping_added_tokens() {
    for name in ["bert-base-uncased", "bert-base-cased"] {
        let Some(path) = fixture_path(name) else {
            eprintln!("NOTICE: fixture tokenizer {name} not found; added-token variants skipped");
            continue;
        };
        let base: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let tokens: &[(&str, bool, bool, bool, bool)] = &[
            // content, normalized, single_word, lstrip, rstrip
            ("hello", true, false, false, false),
            ("Straße", true, false, false, false),
            ("日本", true, false, false, false),
            ("[NEW]", true, false, true, true),
            ("wor", true, true, false, false),
            ("É!", true, false, false, false),
            ("[MASK]", false, false, true, false),
        ];
        let mut json = base.clone();
        for (i, &(content, normalized, single, l, r)) in tokens.iter().enumerate() {
            json["added_tokens"].as_array_mut().unwrap().push(serde_json::json!({
                "id": 30600 + i, "content": content, "single_word": single, "lstrip": l, "rstrip": r,
                "normalized": normalized, "special": false
            }));
        }
        let pair = pair_from_json(name, &json);
        assert!(pair.native.strings.is_some());
        let texts = [
            "HELLO hello, Hello!hello xhelloy",
            "STRASSE Straße straße STRAẞE",
            "日本語 日本 日 本 中日本中",
            "a [NEW] b[NEW]c  [new]  [NEW]",
            "world wor wor. (wor) swor",
            "É! é! e\u{301}! É !",
            "x [MASK] y  [MASK]z",
        ];
        for text in TRAPS.iter().map(|(_, t)| *t).chain(texts) {
            if let Some(d) = pair.diff(text) {
                panic!("{name} with added tokens: {d}");
            }
        }
        let mut json = base.clone();
        json["pre_tokenizer"] = serde_json::json!({"type": "Whitespace"});
        assert!(WordPieceEngine::from_json(&json).is_err());
    }
}

/// Canonical reordering permutes positional alignments; with spacing combining marks in the
/// vocabulary the permutation shows in the offsets, so the exact path must be taken.
#[test]
fn reordering_shows_in_offsets() {
    let Some(path) = fixture_path("bert-base-cased") else {
        eprintln!("NOTICE: fixture tokenizer bert-base-cased not found; reordering test skipped");
        return;
    };
    let mut json: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    json["normalizer"]["strip_accents"] = Value::Bool(true);
    let vocab = json["model"]["vocab"].as_object_mut().unwrap();
    for (i, t) in ["##\u{1d165}", "##\u{1d16d}", "\u{1d165}", "##\u{302e}"].into_iter().enumerate() {
        vocab.insert(t.to_owned(), serde_json::json!(50_000 + i));
    }
    let pair = pair_from_json("cased+strip, musical marks", &json);
    let text = "e\u{301}\u{316}\u{1d165}\u{1d16d}q \u{1d16d}\u{1d165}x a\u{302e}\u{301}\u{316}\u{302e}b";
    pair.check(text);
    let mut scratch = Scratch::default();
    let mut out = Columns::<true> { rows: Out::with_capacity(16), tokens: Vec::new() };
    assert!(pair.native.piece_fast(text, 0, &mut out, &mut scratch).unwrap().is_err(), "reordering not detected");
    let hf = pair.hf.encode_segment(text).unwrap();
    assert!(hf.offsets.contains(&(1, 3)), "the test no longer exercises positional alignment: {:?}", hf.offsets);
}

/// Single-thread throughput, native vs HF, on fresh documents (each encoded once after warming
/// up on another). Not a timed assertion: run with
/// `cargo test --release -p lopt --lib wordpiece::tests::speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn speed() {
    let corpora = crate::testdata::shared().join("corpora");
    for pair in pairs() {
        for file in ["en_verylong.jsonl", "zh_long.jsonl"] {
            let Ok(data) = std::fs::read_to_string(corpora.join(file)) else { continue };
            let docs: Vec<String> = data
                .lines()
                .take(4)
                .map(|l| serde_json::from_str::<Value>(l).unwrap()["text"].as_str().unwrap_or_default().to_owned())
                .collect();
            pair.native.encode_segment(&docs[0]).unwrap();
            pair.hf.encode_segment(&docs[0]).unwrap();
            let (mut bytes, mut t_native, mut t_hf) = (0usize, 0f64, 0f64);
            for doc in &docs[1..] {
                let t = std::time::Instant::now();
                let n = pair.native.encode_segment(doc).unwrap();
                t_native += t.elapsed().as_secs_f64();
                let t = std::time::Instant::now();
                let h = pair.hf.encode_segment(doc).unwrap();
                t_hf += t.elapsed().as_secs_f64();
                assert_eq!(n.ids, h.ids);
                bytes += doc.len();
            }
            let mb = bytes as f64 / 1e6;
            println!(
                "{:<18} {:<18} {:>7.1} MB  native {:>6.1} MB/s  hf {:>5.1} MB/s  ({:.1}x)",
                pair.name,
                file,
                mb,
                mb / t_native,
                mb / t_hf,
                t_hf / t_native
            );
        }
    }
}

/// The native engine alone, for profiling (`perf record` on the test binary).
#[test]
#[ignore]
fn speed_native_only() {
    let corpora = crate::testdata::shared().join("corpora");
    for pair in pairs() {
        for file in ["en_verylong.jsonl", "zh_long.jsonl"] {
            let Ok(data) = std::fs::read_to_string(corpora.join(file)) else { continue };
            let docs: Vec<String> = data
                .lines()
                .take(4)
                .map(|l| serde_json::from_str::<Value>(l).unwrap()["text"].as_str().unwrap_or_default().to_owned())
                .collect();
            let t = std::time::Instant::now();
            let mut bytes = 0;
            for _ in 0..3 {
                for doc in &docs {
                    pair.native.encode_segment(doc).unwrap();
                    bytes += doc.len();
                }
            }
            println!(
                "{:<18} {:<18} native {:>6.1} MB/s",
                pair.name,
                file,
                bytes as f64 / 1e6 / t.elapsed().as_secs_f64()
            );
        }
    }
}

/// Every document of every corpus, whole (about 100 MB per tokenizer; minutes in release):
/// `cargo test --release -p lopt --lib wordpiece::tests::full_corpora -- --ignored`.
#[test]
#[ignore]
fn full_corpora() {
    let corpora = crate::testdata::shared().join("corpora");
    let pairs = pairs();
    for file in ["mixed_hard.jsonl", "zh_long.jsonl", "en_verylong.jsonl", "leval.jsonl"] {
        let Ok(data) = std::fs::read_to_string(corpora.join(file)) else { continue };
        let mut docs = 0;
        for line in data.lines() {
            let doc: Value = serde_json::from_str(line).unwrap();
            let text = doc["text"].as_str().unwrap_or_default();
            for pair in &pairs {
                if let Some(d) = pair.diff(text) {
                    panic!("{file} doc {}: {d}", doc["id"]);
                }
            }
            docs += 1;
        }
        eprintln!("{file}: {docs} documents identical");
    }
}

/// How long building the engine takes (vocabulary trie, tables): `-- --ignored --nocapture`.
#[test]
#[ignore]
fn build_time() {
    let path = fixture_path("bert-base-uncased").unwrap();
    let json: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let t = std::time::Instant::now();
    let engine = WordPieceEngine::from_json(&json).unwrap();
    println!("build {:?} units {}", t.elapsed(), engine.model.units());
}

/// A word that fails after some of its pieces were written (the model writes them as it finds
/// them) comes out as [UNK] alone, in every column and in the ids-only mode, with and without
/// token strings: the written pieces are withdrawn.
#[test]
fn word_failing_midway_is_unk_alone() {
    let vocab: serde_json::Map<String, Value> = ["[UNK]", "un", "##aff", "##able", "a", "##b", "x", "[X]"]
        .iter()
        .enumerate()
        .map(|(i, t)| ((*t).to_owned(), Value::from(i)))
        .collect();
    let mut json = serde_json::json!({
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": false},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
        "added_tokens": [],
    });
    let texts = ["unaffable unaffablez x unaffz ab abz abab a", "unaffableb, abbbbz! x unaff", "zab unaffable"];
    let plain = pair_from_json("midway", &json);
    assert!(plain.native.strings.is_none());
    // An added token whose string is the matched text (lstrip): every segment keeps its strings.
    json["added_tokens"] = serde_json::json!([{"id": 7, "content": "[X]", "single_word": false, "lstrip": true,
        "rstrip": false, "normalized": false, "special": false}]);
    let with_strings = pair_from_json("midway with strings", &json);
    assert!(with_strings.native.strings.is_some());
    for pair in [plain, with_strings] {
        for text in texts.iter().map(|t| t.to_string()).chain(texts.iter().map(|t| format!("{t} [X] {t}"))) {
            pair.check(&text);
        }
    }
}
