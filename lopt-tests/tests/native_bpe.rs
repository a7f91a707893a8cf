//! Differential tests of the native byte-level BPE engine: for every BPE fixture tokenizer, the
//! native engine (one segment, and many small segments) must give exactly HF's sequential
//! `encode` (ids, tokens, offsets, word ids, masks) on corpus samples, trap strings and generated
//! text. Every mismatch ever found is a named regression test below.

use lopt::{EngineKind, Tokenizer, TokenizerBuilder};
use lopt_tests::{corpus_samples, fixture, generated_text, random_chars, TRAPS};

const BPE_FIXTURES: &[&str] = &["qwen3", "deepseek_v3", "llama3_1", "gptoss", "gpt4o", "claude", "gpt2"];

/// Strings aimed at the scanners, the byte-level offsets, NFC and added tokens.
const BPE_TRAPS: &[&str] = &[
    " \n  \n",
    ".\n/",
    "\t\t/Documentation",
    "\n        \n",
    "1 12 123 1234 12345 123456789012",
    "'S 'll 'LL 'Re I'M it's don'T y'all 'x ' '",
    "HelloWorld HELLOworld helloWORLD CamelCaseString XMLHttpRequest",
    "中文字符串没有空格，日本語のテキスト、カタカナ。한국어 텍스트",
    "❤️ ❤ ✌🏽 👨‍👩‍👧‍👦 🇫🇷 🏳️‍🌈",
    "\u{0b}\u{0c} \u{85}\u{a0}x\u{2028}y\u{3000}z",
    "e\u{301} a\u{308} x\u{301} \u{301}a 한 \u{1100}\u{1161}",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "==========================================================================",
    "                                                                          x",
    "SGVsbG8gV29ybGQhIFRoaXMgaXMgYmFzZTY0IGVuY29kZWQgdGV4dC4gSXQgaGFzIG5vIHNwYWNlcy4=",
    "!function(e,t){\"object\"==typeof exports&&\"undefined\"!=typeof module?module.exports=t():e.x=t()}(this,function(){return 1});",
    "<|endoftext|>hello<|im_start|>user\n<｜User｜>hi<｜Assistant｜> <|begin_of_text|><|start|>",
    "<think>\n</think>\n<tool_call>{}</tool_call> <|fim_prefix|>",
    "'ſ ſ \u{212a} ǅungla ǈ ʰello ˈa",
    "١٢٣٤٥ ⅣⅤⅫ ½¾ x² ０１２",
    "\u{0}\u{1}\u{7f}\u{200b}\u{200d}\u{feff}\u{fffd}",
    "Ａｂｃ ａｂｃ ＡＢＣ",
    "naïve café résumé Ångström İstanbul ΣΑΣ ß ẞ",
    "\r\n\r\n  \r\n\t \r",
    "path/to/file.rs:12:34 http://example.com/a?b=c&d=e#f",
    // NFC (Qwen3): composition, reordering, singletons, exclusions, Hangul, leading marks.
    "a\u{316}\u{301} a\u{301}\u{316} e\u{301}\u{301} \u{301}e \u{301}",
    "\u{212b}ngstr\u{f6}m \u{2126} \u{f900}\u{f901} \u{958}\u{929} \u{1e9b}\u{323} \u{344}",
    "\u{1100}\u{1161}\u{11a8} \u{1100}\u{1161} \u{ac00}\u{11a8} 한\u{11a8}",
    "<|im_start|>\u{301}e\u{301}<|im_end|>e\u{301}<|endoftext|>\u{301}",
    "Cafe\u{301} de\u{301}ja\u{300} vu, nai\u{308}ve: 'E\u{301}'s 12\u{301}3 x\u{301}\u{301}\u{301}",
    // NFKC (Claude): ligatures, full-width and half-width forms, super/subscripts, fractions,
    // compatibility jamo, squared units, next to ASCII words, punctuation and added tokens.
    "\u{fb01}ne \u{fb02}ow \u{fb03}x o\u{fb00}er: ﬁ,ﬁ. word\u{fb01} \u{fb01}\u{301}",
    "Ｈｅｌｌｏ，ｗｏｒｌｄ！ abc，def。 ＡＢＣ123 ｘ＝１ 中文，好！",
    "ｶﾞﾊﾟｷﾞ ｱｲｳ ㄱㅏ ㄴㅏㄹ ᄀ\u{1161}",
    "x² y³ H₂O 10⁻⁵ ½ ¼ ¾ Ⅻ ⅷ ① ㎏ ㍻ ™ ℃ № ſt \u{2026} a\u{a0}b \u{3000}c",
    "<EOT>\u{fb01}<META>Ｘ<SOS>²<META_END>",
];

fn builder(engine: EngineKind) -> TokenizerBuilder {
    TokenizerBuilder::new().engine(engine).threads(1)
}

/// One fixture's native tokenizers: one segment and many small ones on the bulk kernels, and one
/// segment on their scalar twins (`TokenizerBuilder::scalar_kernels`), so that every scanner is
/// checked against HF beside its twin. (The segments' boundaries do not depend on the kernel.)
struct Natives {
    all: [(&'static str, Tokenizer); 3],
}

impl Natives {
    /// The first: one segment, bulk kernels.
    fn whole(&self) -> &Tokenizer {
        &self.all[0].1
    }
}

fn load(name: &str) -> Option<Natives> {
    let Some(path) = fixture(name) else {
        eprintln!("NOTICE: fixture tokenizer {name} not found; skipped");
        return None;
    };
    let build = |scalar: bool, chunked: bool| {
        let mut builder = builder(EngineKind::Native).scalar_kernels(scalar);
        if chunked {
            // Many small segments: each cut is a segment boundary the native engine must handle.
            builder = builder.threads(2).chunk_size(2048).overlap(512).min_parallel_bytes(0);
        }
        let tokenizer = builder.build_from_file(&path).expect("native engine supports the fixture");
        assert_eq!(tokenizer.engine_name(), "bpe", "{name}");
        tokenizer
    };
    Some(Natives {
        all: [
            ("one segment", build(false, false)),
            ("chunked", build(false, true)),
            ("one segment, scalar kernels", build(true, false)),
        ],
    })
}

/// Compares the native encodings of `text` with HF's sequential one; panics with context.
fn check(name: &str, label: &str, natives: &Natives, text: &str) {
    check_with(name, label, natives, text, &[true]);
}

fn check_with(name: &str, label: &str, natives: &Natives, text: &str, specials: &[bool]) {
    for &add_special in specials {
        let expected = natives.whole().encode_sequential(text, add_special).expect("HF encodes");
        for (kind, tokenizer) in &natives.all {
            let got = tokenizer.encode(text, add_special).expect("native encodes");
            if let Some(diff) = got.first_difference(&expected) {
                let i = diff.index;
                let lo = i.saturating_sub(3);
                let window = |e: &lopt::Encoding| {
                    let hi = (i + 4).min(e.len());
                    (lo.min(hi)..hi)
                        .map(|k| {
                            format!("{}:{:?}@{:?}w{:?}", e.ids()[k], e.tokens()[k], e.offsets()[k], e.word_ids()[k])
                        })
                        .collect::<Vec<_>>()
                };
                let at = expected.offsets().get(i).map_or(0, |o| o.0);
                let mut from = at.saturating_sub(40);
                while !text.is_char_boundary(from) {
                    from -= 1;
                }
                let mut to = (at + 40).min(text.len());
                while !text.is_char_boundary(to) {
                    to += 1;
                }
                panic!(
                    "{name} {label} ({kind}, special={add_special}): {} differs at token {i} (of {} vs {})\n  text: {:?}\n  native: {:?}\n  hf:     {:?}",
                    diff.field,
                    got.len(),
                    expected.len(),
                    &text[from..to],
                    window(&got),
                    window(&expected)
                );
            }
        }
    }
}

fn for_each_fixture(mut f: impl FnMut(&str, &Natives)) {
    for name in BPE_FIXTURES {
        if let Some(natives) = load(name) {
            f(name, &natives);
        }
    }
}

#[test]
fn traps_match_hf() {
    for_each_fixture(|name, natives| {
        for (i, text) in BPE_TRAPS.iter().chain(TRAPS).enumerate() {
            check_with(name, &format!("trap {i}"), natives, text, &[false, true]);
        }
        // All traps in one text: their interactions with neighbours.
        let all: String = BPE_TRAPS.iter().chain(TRAPS).copied().collect::<Vec<_>>().join("");
        check(name, "all traps", natives, &all);
    });
}

#[test]
fn corpora_match_hf() {
    // The first 8 documents of each corpus, 64 KiB of each (about 2 MiB per tokenizer).
    let samples = corpus_samples(8, 64 * 1024);
    let bytes: usize = samples.iter().map(|s| s.text.len()).sum();
    eprintln!("{} samples, {bytes} bytes per tokenizer", samples.len());
    for_each_fixture(|name, natives| {
        for sample in &samples {
            check(name, &sample.name, natives, &sample.text);
        }
    });
}

#[test]
fn generated_match_hf() {
    for_each_fixture(|name, natives| {
        for seed in 0..16 {
            check(name, &format!("generated {seed}"), natives, &generated_text(seed, 8 * 1024));
        }
    });
}

/// Every character class boundary the scanners care about, in every pair.
#[test]
fn character_pairs_match_hf() {
    let pool: Vec<char> =
        "a Z'sS\t\n\r\u{b}.,/0١中カ한ſ\u{85}\u{a0}\u{3000}\u{301}ʰǅⅣ½€❤\u{fe0f}\u{200d}\u{0}é😀".chars().collect();
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
    for_each_fixture(|name, natives| check(name, "pairs", natives, &text));
}

/// The inputs of `scripts/make_pathological.py`, shorter: long single pre-tokens (one letter,
/// spaces, other runs) go through the backtracking search of long words, around its threshold
/// (128 bytes) and far above it; random digits, base64 and a CJK run through the usual paths.
#[test]
fn pathological_inputs_match_hf() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = |alphabet: &str, len: usize| random_chars(&mut state, alphabet, len);
    let base64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut inputs: Vec<(String, String)> = Vec::new();
    for (label, unit) in [("letter", "a"), ("spaces", " "), ("dashes", "-"), ("newlines", "\n"), ("x", "x")] {
        for len in [127, 128, 129, 300, 20_000] {
            inputs.push((format!("{label} x{len}"), unit.repeat(len)));
        }
    }
    inputs.push(("spaces then word".into(), format!("{}word", " ".repeat(5000))));
    inputs.push(("one cjk".into(), "中".repeat(5000)));
    inputs.push(("digits".into(), random("0123456789", 20_000)));
    inputs.push(("base64".into(), random(base64, 20_000)));
    inputs.push(("ab letters".into(), random("ab", 20_000)));
    inputs.push(("abc letters".into(), random("abc", 5_000)));
    inputs.push(("whitespace mix".into(), random(" \t", 5_000)));
    for_each_fixture(|name, natives| {
        for (label, text) in &inputs {
            check(name, label, natives, text);
        }
    });
}

#[test]
fn engine_choice_is_reported() {
    for name in BPE_FIXTURES {
        let Some(path) = fixture(name) else { continue };
        let auto = TokenizerBuilder::new().threads(1).build_from_file(&path).expect("builds");
        assert_eq!(auto.engine_name(), "bpe", "{name}");
        assert_eq!(auto.engine_reason(), None, "{name}");
        // Equivalent spellings (GPT-4o's inverted Split, Claude's NFKC) cut too.
        assert_eq!(auto.parallelism(), &lopt::Parallelism::Parallel, "{name}");
    }
}

/// A longer sweep for release runs: `LOPT_SWEEP_BYTES` (default 4 MiB) of every corpus, whole
/// documents cut to 1 MiB, per tokenizer.
/// `cargo test --release -p lopt-tests --test native_bpe -- --ignored --nocapture`
#[test]
#[ignore = "long: run in release"]
fn corpora_sweep_matches_hf() {
    let budget: usize = std::env::var("LOPT_SWEEP_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(4 << 20);
    let samples = corpus_samples(usize::MAX, 1 << 20);
    for_each_fixture(|name, natives| {
        let mut per_corpus = std::collections::HashMap::<String, usize>::new();
        for sample in &samples {
            let corpus = sample.name.split('#').next().unwrap_or_default().to_string();
            let used = per_corpus.entry(corpus).or_default();
            if *used >= budget {
                continue;
            }
            *used += sample.text.len();
            check(name, &sample.name, natives, &sample.text);
        }
        eprintln!("{name}: {:?}", per_corpus);
    });
}
