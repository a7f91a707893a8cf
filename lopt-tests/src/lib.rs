//! Shared helpers of the differential tests: where the fixture tokenizers and corpora are, how to
//! sample them, and text generators aimed at the traps of parallel tokenization.
//!
//! Fixtures come from `../shared/tokenizers` (CI) or `fixtures/tokenizers` (fetched by
//! `scripts/fetch-fixtures.sh` on a fresh machine). A missing fixture is skipped with a notice on
//! stderr, never silently.

use std::path::{Path, PathBuf};

/// Every fixture tokenizer, by folder name.
pub const FIXTURES: &[&str] = &[
    "qwen3",
    "deepseek_v3",
    "llama3_1",
    "gptoss",
    "gpt4o",
    "claude",
    "gemma3",
    "llama2",
    "gpt2",
    "bert-base-uncased",
    "bert-base-cased",
];

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// The shared folder: `$LOPT_SHARED` or `../shared` beside the workspace.
pub fn shared_dir() -> PathBuf {
    std::env::var_os("LOPT_SHARED").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("../shared"))
}

/// The `tokenizer.json` of fixture `name`, if present anywhere we look.
pub fn fixture(name: &str) -> Option<PathBuf> {
    [shared_dir().join("tokenizers"), workspace_root().join("fixtures/tokenizers")]
        .into_iter()
        .map(|dir| dir.join(name).join("tokenizer.json"))
        .find(|p| p.is_file())
}

/// The fixture tokenizers that are present; prints a notice for each one that is not.
pub fn available_fixtures() -> Vec<(&'static str, PathBuf)> {
    FIXTURES
        .iter()
        .filter_map(|&name| {
            let path = fixture(name);
            if path.is_none() {
                eprintln!("NOTICE: fixture tokenizer {name} not found; its tests are skipped");
            }
            path.map(|p| (name, p))
        })
        .collect()
}

/// A sample text with where it came from.
#[derive(Clone, Debug)]
pub struct Sample {
    pub name: String,
    pub text: String,
}

/// The first `docs` documents of every corpus in `../shared/corpora`, each cut to at most
/// `max_bytes` at a char boundary; generated texts when the corpora are absent.
pub fn corpus_samples(docs: usize, max_bytes: usize) -> Vec<Sample> {
    let dir = shared_dir().join("corpora");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
    files.sort();
    if files.is_empty() {
        eprintln!("NOTICE: no corpora under {}; using generated texts", dir.display());
        return (0..docs.max(4))
            .map(|seed| Sample { name: format!("generated-{seed}"), text: generated_text(seed as u64, max_bytes) })
            .collect();
    }
    let mut samples = Vec::new();
    for file in files {
        let Ok(content) = std::fs::read_to_string(&file) else { continue };
        let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        for (i, line) in content.lines().take(docs).enumerate() {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            let Some(text) = value["text"].as_str() else { continue };
            samples.push(Sample { name: format!("{stem}#{i}"), text: truncate(text, max_bytes).to_owned() });
        }
    }
    samples
}

/// `text` cut to at most `max_bytes` at a char boundary.
pub fn truncate(text: &str, max_bytes: usize) -> &str {
    let mut end = max_bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Fragments that broke parallel or fast tokenizers before (see `../shared/design.md`).
pub const TRAPS: &[&str] = &[
    " \n  \n",
    ".\n/",
    "\t\t/Documentation",
    "\n        \n",
    "123456789",
    "3.14159265358979",
    "'s",
    "'S",
    "'ll",
    "don't",
    "HelloWorld",
    "HELLOworld",
    "中文字符串没有空格",
    "，",
    "。",
    "❤️",
    "👨‍👩‍👧",
    "e\u{301}",
    "\u{0b}",
    "\u{0c}",
    "\u{0}",
    "\u{fffd}",
    "İstanbul",
    "ΣΑΣ",
    "<|endoftext|>",
    "<|im_start|>",
    "[MASK]",
    "[CLS]",
    "<｜User｜>",
    "   ",
    "\r\n",
    "aGVsbG8gd29ybGQ=",
    "x=>{return a+b}",
    "ａｂｃ",
    "١٢٣",
    "Ⅻ",
    "\u{200d}",
    // Compatibility characters (NFKC/NFKD change them; the cut rule must not care): ligatures,
    // full-width and half-width forms (half-width katakana with a voicing mark composes),
    // compatibility jamo (compose to a syllable), super/subscripts, fractions, ellipsis,
    // no-break space, circled and squared forms.
    "\u{fb01}ne",
    "Ｈｅｌｌｏ，ｗｏｒｌｄ！",
    "ｶﾞﾊﾟ",
    "ㄱㅏ",
    "x² H₂O 10⁻⁵",
    "½…",
    "\u{a0}",
    "①㎏™",
    "\t",
    "  ",
    "a",
    "Z",
    "9",
    " ",
    "\n",
];

/// `len` characters drawn from `alphabet` by a xorshift64 generator advanced in `state`: random
/// runs aimed at one trap (digits, base64, letters), reproducible from the seed.
pub fn random_chars(state: &mut u64, alphabet: &str, len: usize) -> String {
    let alphabet: Vec<char> = alphabet.chars().collect();
    (0..len)
        .map(|_| {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            alphabet[(*state % alphabet.len() as u64) as usize]
        })
        .collect()
}

/// A deterministic pseudo-random text of about `len` bytes mixing prose, code and traps.
pub fn generated_text(seed: u64, len: usize) -> String {
    const WORDS: &[&str] = &[
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dog",
        "Tokenization",
        "parallel",
        "chunk",
        "merge",
        "exact",
        "It's",
        "they'll",
        "fn",
        "main()",
        "{",
        "}",
        "let",
        "x",
        "=",
        "42;",
        "2024",
        "—",
        "café",
        "naïve",
        "東京",
        "北京大学",
        "こんにちは",
        "Привет",
        "مرحبا",
        "🙂",
        "\n",
        "\n\n",
        "  ",
        "\t",
    ];
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let mut text = String::with_capacity(len + 64);
    while text.len() < len {
        let r = next();
        if r % 17 == 0 {
            text.push_str(TRAPS[next() % TRAPS.len()]);
        } else {
            text.push_str(WORDS[r % WORDS.len()]);
            if r % 5 != 0 {
                text.push(' ');
            }
        }
    }
    truncate(&text, len).to_owned()
}
