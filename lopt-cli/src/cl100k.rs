//! The built-in default tokenizer: OpenAI's `cl100k_base` (GPT-4, GPT-3.5), whose ranks ship in
//! the `tiktoken-rs` crate, converted to a HuggingFace `tokenizer.json` so that lopt runs it like
//! any other tokenizer and a fresh machine needs no download.
//!
//! The conversion is the standard tiktoken → HF one:
//! * vocabulary: each rank's bytes spelled through GPT-2's byte-to-unicode table, id = rank;
//! * merges: for each token of two or more bytes, rank-ordered BPE over its bytes using only
//!   ranks below its own must end in exactly two parts, and that pair is its merge; merges are
//!   ordered by the token's rank, so HF's merge priority equals tiktoken's rank priority;
//! * `ignore_merges`, because tiktoken looks a whole piece up before merging;
//! * pre-tokenizer: `Split(cl100k's regex, Isolated)` then `ByteLevel` without its own regex;
//!   post-processor and decoder `ByteLevel`; `<|endoftext|>` as a special added token, also in
//!   the model vocabulary (as in GPT-2's file) so that HF keeps its id, 100257, across the
//!   unused 100256.
//!
//! The regex is written in the form HF and lopt's cut rule know (no possessive quantifiers); on
//! text it splits exactly as tiktoken's. The converted JSON is cached under the user cache dir
//! (`$XDG_CACHE_HOME/lopt` or `~/.cache/lopt`, file `cl100k_base.v<N>.tokenizer.json`, where `N`
//! changes with the conversion's output); when that cannot be written it stays in memory.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Value};

/// The default tokenizer's name.
pub const NAME: &str = "cl100k_base";

/// cl100k_base's pre-tokenizer regex, as HF tokenizer.json files spell it.
pub const PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Part of the cache file's name: bump it whenever the conversion's output changes, so that a
/// cache written by an older `lopt` is never read as current. Version 2: the keys of the
/// components' objects are written in the order given, not sorted (`serde_json`'s
/// `preserve_order`, which the library turns on for load time).
const CACHE_VERSION: u32 = 2;

/// Number of mergeable ranks (ids `0..VOCAB_SIZE`).
const VOCAB_SIZE: u32 = 100_256;
const ENDOFTEXT: &str = "<|endoftext|>";
const ENDOFTEXT_ID: u32 = 100_257;

/// The default tokenizer's JSON: from the cache when present (with the cache path), else
/// converted now and cached when possible (with `None`).
///
/// # Errors
/// When the conversion fails (a `tiktoken-rs` whose ranks are not cl100k_base's).
pub fn tokenizer_json() -> Result<(Vec<u8>, Option<PathBuf>)> {
    if let Some(path) = cache_path() {
        if let Ok(json) = std::fs::read(&path) {
            return Ok((json, Some(path)));
        }
    }
    Ok((convert_and_cache()?, None))
}

/// Converts the vocabulary and tries to store it in the cache (silently keeping it in memory
/// when the cache is not writable).
///
/// # Errors
/// As [`convert`].
pub fn convert_and_cache() -> Result<Vec<u8>> {
    let json = convert()?;
    if let Some(path) = cache_path() {
        let _ = store(&path, &json);
    }
    Ok(json)
}

/// Where the converted JSON is cached: `$XDG_CACHE_HOME/lopt/` or `~/.cache/lopt/`, in a file
/// whose name carries [`CACHE_VERSION`].
pub fn cache_path() -> Option<PathBuf> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    let base = std::env::var_os("XDG_CACHE_HOME")
        .and_then(absolute)
        .or_else(|| std::env::var_os("HOME").and_then(absolute).map(|home| home.join(".cache")))?;
    Some(base.join("lopt").join(format!("{NAME}.v{CACHE_VERSION}.tokenizer.json")))
}

/// Writes through a temporary file and a rename, so that concurrent runs never read half a file.
fn store(path: &std::path::Path, json: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().ok_or(std::io::ErrorKind::NotFound)?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{NAME}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, json)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Converts `tiktoken-rs`'s cl100k_base to a HuggingFace `tokenizer.json`.
///
/// # Errors
/// When `tiktoken-rs` fails to load its ranks or they do not have cl100k_base's shape.
pub fn convert() -> Result<Vec<u8>> {
    let bpe = tiktoken_rs::cl100k_base().context("tiktoken-rs cannot load cl100k_base")?;
    let ranks = (0..VOCAB_SIZE)
        .map(|rank| bpe.decode_bytes(&[rank]).map_err(|_| anyhow!("tiktoken-rs cl100k_base has no rank {rank}")))
        .collect::<Result<Vec<_>>>()?;
    if bpe.encode_with_special_tokens(ENDOFTEXT) != [ENDOFTEXT_ID] {
        bail!("tiktoken-rs cl100k_base does not give {ENDOFTEXT} the id {ENDOFTEXT_ID}");
    }
    tokenizer_json_from_ranks(&ranks, PATTERN, &[(ENDOFTEXT, ENDOFTEXT_ID)])
}

/// Builds a byte-level BPE `tokenizer.json` from tiktoken ranks (`ranks[id]` = the token's
/// bytes), a split regex and special tokens.
///
/// # Errors
/// When a byte has no token of its own, or a token's merge cannot be derived.
fn tokenizer_json_from_ranks(ranks: &[Vec<u8>], pattern: &str, specials: &[(&str, u32)]) -> Result<Vec<u8>> {
    let unicode = bytes_to_unicode();
    let spell = |bytes: &[u8]| bytes.iter().map(|&b| unicode[usize::from(b)]).collect::<String>();
    let vocab: Vec<(String, u32)> = ranks
        .iter()
        .zip(0..)
        .map(|(t, id)| (spell(t), id))
        // HF gives an added token that is not in the model vocabulary the next free id, not the
        // one its entry names; in the vocabulary (as GPT-2 has `<|endoftext|>`) it keeps its id.
        .chain(specials.iter().map(|&(content, id)| (content.to_owned(), id)))
        .collect();
    let merges = derive_merges(ranks)?
        .into_iter()
        .map(|(left, right)| (spell(left), spell(right)))
        .collect::<Vec<(String, String)>>();
    let added_tokens: Vec<Value> = specials
        .iter()
        .map(|&(content, id)| {
            json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": true})
        })
        .collect();
    let byte_level = |trim_offsets: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": trim_offsets, "use_regex": false});
    let file = TokenizerFile {
        version: "1.0",
        truncation: None,
        padding: None,
        added_tokens,
        normalizer: None,
        pre_tokenizer: json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false},
            byte_level(true),
        ]}),
        post_processor: byte_level(false),
        decoder: byte_level(true),
        model: Model {
            kind: "BPE",
            dropout: None,
            unk_token: None,
            continuing_subword_prefix: None,
            end_of_word_suffix: None,
            fuse_unk: false,
            byte_fallback: false,
            ignore_merges: true,
            vocab: OrderedVocab(&vocab),
            merges: &merges,
        },
    };
    serde_json::to_vec(&file).context("cannot serialize the converted tokenizer")
}

/// For each token of two or more bytes, in rank order: the two parts that rank-ordered BPE with
/// the lower ranks leaves of it.
fn derive_merges(ranks: &[Vec<u8>]) -> Result<Vec<(&[u8], &[u8])>> {
    let rank_of: HashMap<&[u8], usize> = ranks.iter().enumerate().map(|(rank, t)| (t.as_slice(), rank)).collect();
    if let Some(byte) = (0..=u8::MAX).find(|b| !rank_of.contains_key([*b].as_slice())) {
        bail!("byte {byte:#04x} has no token of its own");
    }
    let mut merges = Vec::with_capacity(ranks.len());
    for (rank, token) in ranks.iter().enumerate().filter(|(_, t)| t.len() >= 2) {
        // Part boundaries as byte positions in `token`; part i is token[bounds[i]..bounds[i + 1]].
        let mut bounds: Vec<usize> = (0..=token.len()).collect();
        loop {
            let best = (0..bounds.len() - 2)
                .filter_map(|i| rank_of.get(&token[bounds[i]..bounds[i + 2]]).map(|&r| (r, i)))
                .filter(|&(r, _)| r < rank)
                .min();
            match best {
                Some((_, i)) => {
                    bounds.remove(i + 1);
                }
                None => break,
            }
        }
        if bounds.len() != 3 {
            bail!("token of rank {rank} does not reduce to one merge of lower-ranked tokens");
        }
        merges.push((&token[..bounds[1]], &token[bounds[1]..]));
    }
    Ok(merges)
}

/// GPT-2's reversible byte → printable char table used by byte-level BPE vocabularies.
fn bytes_to_unicode() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=u8::MAX {
        table[usize::from(b)] = if printable(b) {
            char::from(b)
        } else {
            let c = char::from_u32(next).unwrap_or('\u{FFFD}');
            next += 1;
            c
        };
    }
    table
}

#[derive(serde::Serialize)]
struct TokenizerFile<'a> {
    version: &'static str,
    truncation: Option<Value>,
    padding: Option<Value>,
    added_tokens: Vec<Value>,
    normalizer: Option<Value>,
    pre_tokenizer: Value,
    post_processor: Value,
    decoder: Value,
    model: Model<'a>,
}

#[derive(serde::Serialize)]
struct Model<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    dropout: Option<f32>,
    unk_token: Option<String>,
    continuing_subword_prefix: Option<String>,
    end_of_word_suffix: Option<String>,
    fuse_unk: bool,
    byte_fallback: bool,
    ignore_merges: bool,
    vocab: OrderedVocab<'a>,
    merges: &'a [(String, String)],
}

/// The vocabulary as a JSON object in id order (a map type would sort it by spelling).
struct OrderedVocab<'a>(&'a [(String, u32)]);

impl Serialize for OrderedVocab<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (token, id) in self.0 {
            map.serialize_entry(token, id)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::*;

    /// FNV-1a of [`convert`]'s output for [`CACHE_VERSION`].
    const FINGERPRINT: u64 = 0x4561_4fc0_be3b_1836;

    fn tokenizer() -> &'static lopt::Tokenizer {
        static TOKENIZER: OnceLock<lopt::Tokenizer> = OnceLock::new();
        TOKENIZER.get_or_init(|| {
            let json = convert().expect("conversion");
            lopt::TokenizerBuilder::new()
                .threads(2)
                .chunk_size(256)
                .min_parallel_bytes(0)
                .build_from_bytes(&json)
                .expect("build")
        })
    }

    #[test]
    fn byte_table_is_gpt2s() {
        let table = bytes_to_unicode();
        assert_eq!(table[usize::from(b' ')], 'Ġ');
        assert_eq!(table[usize::from(b'\n')], 'Ċ');
        assert_eq!(table[usize::from(b'a')], 'a');
        assert_eq!(table[0xA0], 'ł');
        assert_eq!(table[0xAD], 'Ń');
        let distinct: std::collections::HashSet<char> = table.iter().copied().collect();
        assert_eq!(distinct.len(), 256);
    }

    #[test]
    fn merges_come_from_lower_ranks_only() {
        let ranks: Vec<Vec<u8>> =
            ["a", "b", "c", "ab", "bc", "abc"].iter().map(|t| t.as_bytes().to_vec()).collect::<Vec<_>>();
        let mut all: Vec<Vec<u8>> = (0..=u8::MAX).map(|b| vec![b]).filter(|b| !ranks.contains(b)).collect();
        all.splice(0..0, ranks);
        let merges = derive_merges(&all).expect("merges");
        let spelled: Vec<(&str, &str)> = merges
            .iter()
            .map(|(l, r)| (std::str::from_utf8(l).expect("utf8"), std::str::from_utf8(r).expect("utf8")))
            .collect();
        assert_eq!(spelled, [("a", "b"), ("b", "c"), ("ab", "c")]);
    }

    #[test]
    fn a_token_that_does_not_reduce_to_one_merge_is_an_error() {
        let mut ranks: Vec<Vec<u8>> = (0..=u8::MAX).map(|b| vec![b]).collect();
        ranks.push(b"abc".to_vec());
        assert!(derive_merges(&ranks).is_err());
    }

    #[test]
    fn known_cl100k_encodings() {
        // Expected ids from Python `tiktoken.get_encoding("cl100k_base").encode(text, allowed_special="all")`.
        let cases: &[(&str, &[u32])] = &[
            ("hello world", &[15339, 1917]),
            (
                "I'm sure they'll DON'T 12345 tokens!",
                &[40, 2846, 2771, 814, 3358, 45373, 17773, 220, 4513, 1774, 11460, 0],
            ),
            (
                "naïve café — “quoted” 日本語のテキスト\n\n  indented\tline   ",
                &[
                    3458, 38672, 588, 53050, 2001, 1054, 64825, 863, 76502, 22656, 45918, 252, 16144, 57933, 62903,
                    71634, 271, 220, 1280, 16243, 28208, 262,
                ],
            ),
            ("<|endoftext|>", &[100257]),
            ("", &[]),
        ];
        for (text, ids) in cases {
            assert_eq!(tokenizer().encode(text, true).expect("encode").ids(), *ids, "{text:?}");
        }
    }

    #[test]
    fn agrees_with_tiktoken_rs_on_generated_text() {
        let bpe = tiktoken_rs::cl100k_base().expect("tiktoken-rs");
        for seed in 0..4 {
            let text = crate::sample::text(seed, 20_000);
            let ours = tokenizer().encode(&text, false).expect("encode");
            assert_eq!(ours.ids(), bpe.encode_ordinary(&text).as_slice(), "seed {seed}");
        }
    }

    #[test]
    fn default_tokenizer_is_cut_in_parallel_and_exact() {
        assert_eq!(tokenizer().parallelism(), &lopt::Parallelism::Parallel);
        let text = crate::sample::text(7, 50_000);
        assert!(!tokenizer().cut_points(&text).is_empty());
        assert_eq!(
            tokenizer().encode(&text, true).expect("lopt"),
            tokenizer().encode_sequential(&text, true).expect("hf")
        );
    }

    /// Guards the cache: a change to the conversion's output must come with a new
    /// [`CACHE_VERSION`] (then update the fingerprint here).
    #[test]
    fn conversion_output_matches_its_cache_version() {
        let json = convert().expect("conversion");
        let fingerprint =
            json.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        assert_eq!((CACHE_VERSION, fingerprint), (2, FINGERPRINT), "conversion changed: bump CACHE_VERSION");
    }

    #[test]
    fn cache_lives_under_the_user_cache_dir() {
        let path = cache_path().expect("HOME or XDG_CACHE_HOME is set in tests");
        assert!(path.ends_with(format!("lopt/cl100k_base.v{CACHE_VERSION}.tokenizer.json")), "{}", path.display());
    }
}
