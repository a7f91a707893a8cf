//! Differential tests of the native SentencePiece-style engine (Gemma 3, Llama 2): one segment,
//! many small segments (chunk sizes down to 1 byte, so every safe cut is taken) and 2 threads must
//! all give exactly HF's sequential `encode` (ids, tokens, offsets, word ids, masks), with and
//! without special tokens, on traps aimed at the normalizer's prefix, runs of spaces and `▁`,
//! added tokens, byte fallback and long words, on corpus samples and on generated text. Every
//! mismatch ever found is a named regression test below.

use std::sync::OnceLock;

use lopt::{EngineKind, Parallelism, Tokenizer, TokenizerBuilder};
use lopt_tests::{corpus_samples, fixture, generated_text, random_chars, TRAPS};

const SPM_FIXTURES: &[&str] = &["gemma3", "llama2"];

/// Strings aimed at the prefix, the space map, added tokens and byte fallback.
const SPM_TRAPS: &[&str] = &[
    "",
    " ",
    "  ",
    "a",
    " a",
    "  leading spaces",
    "trailing spaces   ",
    "▁",
    "▁▁▁ ▁ x▁y ▁▁a",
    " ▁ ▁▁  ▁",
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<bos><eos> <s></s> <unk> <pad>text<mask>",
    "\n\n\n\n x\n\n\t\t\ty\t \n",
    "<table><tr><td>1</td></tr></table> <h1>t</h1>",
    "a>▁</b x>▁</ >▁<",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 😀😀😀 \u{10ffff}\u{e000} \u{0}\u{1}\u{7f}",
    "中文字符串没有空格，日本語のテキスト、カタカナ。한국어 텍스트",
    "ﷺ ﷽ ꧁꧂ ᚠᛇᚻ ⠁⠃⠉",
    "supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "==========================================================================",
    "                                                                          x",
    "e\u{301} a\u{308} x\u{301} \u{301}a 한 \u{1100}\u{1161}",
    "\r\n\r\n  \r\n\t \r",
];

/// A fixture built with each setting, labelled.
type Settings = Vec<(String, Tokenizer)>;

/// The settings of one fixture, built once per test binary (loading Gemma 3 takes seconds).
fn load(name: &'static str) -> Option<&'static [(String, Tokenizer)]> {
    static LOADED: OnceLock<Vec<(&'static str, Option<Settings>)>> = OnceLock::new();
    let loaded = LOADED.get_or_init(|| SPM_FIXTURES.iter().map(|&n| (n, build_all(n))).collect());
    loaded.iter().find(|(n, _)| *n == name).and_then(|(_, t)| t.as_deref())
}

fn build_all(name: &str) -> Option<Settings> {
    let Some(path) = fixture(name) else {
        eprintln!("NOTICE: fixture tokenizer {name} not found; skipped");
        return None;
    };
    let bytes = std::fs::read(&path).expect("fixture readable");
    let build = |threads: usize, chunk: Option<usize>| {
        let mut builder = TokenizerBuilder::new().engine(EngineKind::Native).threads(threads).min_parallel_bytes(0);
        if let Some(chunk) = chunk {
            builder = builder.chunk_size(chunk).overlap(16);
        }
        let tokenizer = builder.build_from_bytes(&bytes).expect("native engine supports the fixture");
        assert_eq!(tokenizer.engine_name(), "spm", "{name}");
        assert_eq!(tokenizer.parallelism(), &Parallelism::Parallel, "{name}");
        tokenizer
    };
    let mut settings = vec![
        ("one segment".into(), build(1, None)),
        ("2 threads".into(), build(2, None)),
        ("chunk 1".into(), build(2, Some(1))),
        ("chunk 97".into(), build(3, Some(97))),
    ];
    // The HF engine cuts Gemma 3 too (no Prepend): its segments must join the same way.
    let hf = TokenizerBuilder::new().engine(EngineKind::Hf).threads(2).chunk_size(97).overlap(16).min_parallel_bytes(0);
    let hf = hf.build_from_bytes(&bytes).expect("HF engine loads the fixture");
    if hf.parallelism() == &Parallelism::Parallel {
        settings.push(("hf engine, chunk 97".into(), hf));
    }
    Some(settings)
}

/// Compares every setting's encoding of `text` with HF's sequential one; panics with context.
fn check(name: &str, label: &str, tokenizers: &[(String, Tokenizer)], text: &str) {
    for add_special in [false, true] {
        let expected = tokenizers[0].1.encode_sequential(text, add_special).expect("HF encodes");
        for (kind, tokenizer) in tokenizers {
            let got = tokenizer.encode(text, add_special).expect("native encodes");
            if let Some(diff) = got.first_difference(&expected) {
                let i = diff.index;
                let window = |e: &lopt::Encoding| {
                    let (lo, hi) = (i.saturating_sub(3).min(e.len()), (i + 4).min(e.len()));
                    (lo..hi)
                        .map(|k| {
                            format!("{}:{:?}@{:?}w{:?}", e.ids()[k], e.tokens()[k], e.offsets()[k], e.word_ids()[k])
                        })
                        .collect::<Vec<_>>()
                };
                let at = expected.offsets().get(i).map_or(0, |o| o.0);
                panic!(
                    "{name} {label} ({kind}, special={add_special}): {} differs at token {i} (of {} vs {})\n  text: {:?}\n  native: {:?}\n  hf:     {:?}",
                    diff.field,
                    got.len(),
                    expected.len(),
                    lopt_tests::truncate(&text[floor(text, at.saturating_sub(40))..], 80),
                    window(&got),
                    window(&expected)
                );
            }
        }
    }
}

fn floor(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn for_each_fixture(mut f: impl FnMut(&str, &[(String, Tokenizer)])) {
    for name in SPM_FIXTURES {
        if let Some(tokenizers) = load(name) {
            f(name, tokenizers);
        }
    }
}

#[test]
fn traps_match_hf() {
    for_each_fixture(|name, tokenizers| {
        for (i, text) in SPM_TRAPS.iter().chain(TRAPS).enumerate() {
            check(name, &format!("trap {i}"), tokenizers, text);
        }
        let all: String = SPM_TRAPS.iter().chain(TRAPS).copied().collect::<Vec<_>>().join(" ");
        check(name, "all traps", tokenizers, &all);
    });
}

#[test]
fn corpora_match_hf() {
    let samples = corpus_samples(3, 32 * 1024);
    for_each_fixture(|name, tokenizers| {
        for sample in &samples {
            check(name, &sample.name, tokenizers, &sample.text);
        }
    });
}

#[test]
fn generated_match_hf() {
    for_each_fixture(|name, tokenizers| {
        for seed in 0..8 {
            check(name, &format!("generated {seed}"), tokenizers, &generated_text(seed, 6 * 1024));
        }
    });
}

/// The inputs of `scripts/make_pathological.py`, shorter: runs of one character (one sub-piece
/// each) go through the backtracking search of long sub-pieces, around its threshold (128
/// symbols) and above it; random digits, base64 and letters, and runs of characters that fall
/// back to bytes.
#[test]
fn pathological_inputs_match_hf() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = |alphabet: &str, len: usize| random_chars(&mut state, alphabet, len);
    let mut inputs: Vec<(String, String)> = Vec::new();
    for (label, unit) in [("letter", "a"), ("spaces", " "), ("dashes", "-"), ("private use", "\u{e000}")] {
        for len in [127, 128, 129, 3000] {
            inputs.push((format!("{label} x{len}"), unit.repeat(len)));
        }
    }
    inputs.push(("spaces then word".into(), format!("{}word", " ".repeat(500))));
    inputs.push(("digits".into(), random("0123456789", 3000)));
    inputs.push(("base64".into(), random("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 3000)));
    inputs.push(("ab letters".into(), random("ab", 3000)));
    inputs.push(("letters, spaces and fallback".into(), random("ab \u{e000}é", 3000)));
    for_each_fixture(|name, tokenizers| {
        for (label, text) in &inputs {
            check(name, label, tokenizers, text);
        }
    });
}

/// Every pair of characters from a pool of classes (spaces, `▁`, added-token pieces, byte
/// fallback, CJK), followed by a separator.
#[test]
fn character_pairs_match_hf() {
    let pool: Vec<char> = "a Z.,'\t\n▁<>/中カ한é😀\u{0}\u{fffd}\u{e000}𝔘ﷺ".chars().collect();
    let mut text = String::new();
    for &a in &pool {
        for &b in &pool {
            for &c in &[' ', 'x', '\n'] {
                text.push(a);
                text.push(b);
                text.push(c);
            }
        }
    }
    for_each_fixture(|name, tokenizers| check(name, "pairs", tokenizers, &text));
}

#[test]
fn engine_choice_is_reported() {
    for name in SPM_FIXTURES {
        let Some(path) = fixture(name) else { continue };
        let auto = TokenizerBuilder::new().threads(1).build_from_file(&path).expect("builds");
        assert_eq!(auto.engine_name(), "spm", "{name}");
        assert_eq!(auto.engine_reason(), None, "{name}");
        let hf = TokenizerBuilder::new().engine(EngineKind::Hf).build_from_file(&path).expect("builds");
        let parallel = *name == "gemma3";
        assert_eq!(hf.parallelism() == &Parallelism::Parallel, parallel, "{name}: {:?}", hf.parallelism());
    }
}

/// HF puts Llama 2's `Prepend("▁")` at the text start and after every added token, and nowhere
/// else: the premise of encoding every segment after a cut without it.
#[test]
fn prepend_goes_at_the_start_and_after_added_tokens() {
    let Some(path) = fixture("llama2") else {
        eprintln!("NOTICE: fixture tokenizer llama2 not found; skipped");
        return;
    };
    let tokenizer = TokenizerBuilder::new().threads(1).build_from_file(&path).expect("builds");
    let hf = tokenizer.encode_sequential("a</s>a<s> a b", false).expect("HF encodes");
    assert_eq!(hf.tokens(), ["▁a", "</s>", "▁a", "<s>", "▁", "▁a", "▁b"]);
    assert_eq!(hf.offsets(), [(0, 1), (1, 5), (5, 6), (6, 9), (9, 10), (9, 11), (11, 13)]);
}
