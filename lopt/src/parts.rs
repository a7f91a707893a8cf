//! What lopt reads of a `tokenizer.json` at load *without* building HF's whole tokenizer: the
//! post-processor, the truncation and padding, and the id → token string table. Building HF's
//! tokenizer (its model's vocabulary and merge maps, its added-token automaton) costs about as
//! much as lopt's own engine, and with a native engine nothing on the encode path needs it, so
//! [`crate::Tokenizer`] builds it lazily ([`crate::Tokenizer::hf`]).
//!
//! Invariants:
//! * every component other than the model is deserialized here with HF's own types, so a file
//!   HF refuses for one of them is refused at load with the same reason (one line);
//! * the model is read by the native engine that encodes with it, which refuses what it does not
//!   reproduce; HF's own reading of it happens on the first use of the HF tokenizer;
//! * [`vocab_strings`] equals what `tokenizers::Tokenizer::get_vocab(true)` gives, slot for slot
//!   (checked on every fixture by `lopt-tests`' `lazy_hf` test); where the model's vocabulary has
//!   a shape it does not know it returns `None` and the caller builds HF's tokenizer at load.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PaddingParams, PostProcessorWrapper, PreTokenizerWrapper,
    TruncationParams,
};

use crate::doc::Doc;
use crate::error::{one_line, Error, ErrorKind, Result};

/// The parts of a `tokenizer.json` that lopt uses besides its engine.
pub(crate) struct Parts {
    pub(crate) post_processor: Option<PostProcessorWrapper>,
    pub(crate) truncation: Option<TruncationParams>,
    pub(crate) padding: Option<PaddingParams>,
}

/// Checks every component but the model as HF does when it loads the file, and returns the ones
/// lopt uses. `json` is the file as written (before [`crate::spelling::canonicalize`]).
///
/// # Errors
/// [`ErrorKind::InvalidTokenizer`] naming the component HF would refuse.
pub(crate) fn read(json: &Value) -> Result<Parts> {
    match &json["version"] {
        Value::Null => {}
        Value::String(v) if v == "1.0" => {}
        other => return Err(invalid("version", format!("unknown tokenizer version {other}"))),
    }
    component::<Option<NormalizerWrapper>>(json, "normalizer")?;
    component::<Option<PreTokenizerWrapper>>(json, "pre_tokenizer")?;
    component::<Option<DecoderWrapper>>(json, "decoder")?;
    match &json["added_tokens"] {
        Value::Null => {}
        Value::Array(tokens) => {
            for token in tokens {
                if token["id"].as_u64().and_then(|id| u32::try_from(id).ok()).is_none() {
                    return Err(invalid("added_tokens", "an added token has no valid id"));
                }
                AddedToken::deserialize(token).map_err(|e| invalid("added_tokens", e))?;
            }
        }
        _ => return Err(invalid("added_tokens", "not a list")),
    }
    Ok(Parts {
        post_processor: component(json, "post_processor")?,
        truncation: component(json, "truncation")?,
        padding: component(json, "padding")?,
    })
}

fn component<'a, T: Deserialize<'a>>(json: &'a Value, key: &str) -> Result<T> {
    T::deserialize(&json[key]).map_err(|e| invalid(key, e))
}

fn invalid(key: &str, err: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::InvalidTokenizer,
        format!("not a valid tokenizer.json: {key}: {}", one_line(&err.to_string())),
    )
}

/// Every id's token string, read from a `tokenizer.json`.
pub(crate) struct Vocabulary {
    /// Indexed by id, up to the largest id (a vocabulary may have gaps: GPT-4o's ends at 199 999,
    /// its `<|endofprompt|>` is 200 018); a gap's string is empty.
    pub(crate) strings: Vec<String>,
    /// HF's `get_vocab_size(true)`: the model's entries plus the added tokens it lacks.
    pub(crate) size: usize,
}

/// Every id's token string, added tokens included, as HF's `get_vocab(true)` numbers them (an
/// added token already in the model's vocabulary keeps the model's id; a new one gets the next id
/// after the model's, in file order; empty ones are skipped). `None` when the model's vocabulary
/// is neither a token → id map (BPE, WordPiece, WordLevel) nor a list of `[piece, score]`
/// (Unigram).
pub(crate) fn vocab_strings(doc: &Doc<'_>) -> Option<Vocabulary> {
    // A token → id map is looked up in place (only added tokens are looked up); a Unigram list
    // gets a map only when there are added tokens to look up. An object that is still a `Value`
    // has an id that is not a `u32` (`doc.rs`): HF reads (and refuses) it.
    let json = &doc.json;
    let vocab = &json["model"]["vocab"];
    let added_json = json["added_tokens"].as_array().map_or(&[][..], Vec::as_slice);
    let mut list_ids: HashMap<&str, u32> = HashMap::new();
    let model_size = match (&doc.vocab, vocab) {
        (Some(map), _) => map.len(),
        (None, Value::Array(pieces)) => {
            if !added_json.is_empty() {
                list_ids.reserve(pieces.len());
                for (id, piece) in pieces.iter().enumerate() {
                    list_ids.insert(piece.get(0)?.as_str()?, u32::try_from(id).ok()?);
                }
            }
            pieces.len()
        }
        _ => return None,
    };
    let model_id = |content: &str| -> Option<u32> {
        match &doc.vocab {
            Some(map) => map.get(content).copied(),
            None => list_ids.get(content).copied(),
        }
    };
    let mut added: Vec<(&str, u32)> = Vec::new();
    let mut added_ids: HashMap<&str, u32> = HashMap::new();
    let mut overlapping = 0;
    let mut next_id = u32::try_from(model_size).ok()?;
    for token in added_json {
        let content = token["content"].as_str()?;
        if content.is_empty() {
            continue;
        }
        let id = match added_ids.get(content) {
            Some(&id) => id,
            None => match model_id(content) {
                Some(id) => {
                    overlapping += 1;
                    id
                }
                None => {
                    next_id = next_id.checked_add(1)?;
                    next_id - 1
                }
            },
        };
        added_ids.insert(content, id);
        added.push((content, id));
    }
    let size = model_size + added_ids.len() - overlapping;
    let largest = match &doc.vocab {
        Some(map) => map.values().max().map_or(0, |&id| u64::from(id) + 1),
        None => model_size as u64,
    };
    let largest = added.iter().map(|&(_, id)| u64::from(id) + 1).fold(largest, u64::max);
    // Ids are u32, so this is at most 2^32 slots; a file claiming ids far beyond its entries
    // (a hostile one) is read by HF instead, which allocates no table.
    let slots = usize::try_from(largest).ok().filter(|&n| n <= size.saturating_mul(2).max(1 << 20))?;
    let mut strings = vec![String::new(); slots];
    let mut put = |token: &str, id: u32| {
        if let Some(slot) = usize::try_from(id).ok().and_then(|i| strings.get_mut(i)) {
            token.clone_into(slot);
        }
    };
    match (&doc.vocab, vocab) {
        (Some(map), _) => {
            for (token, &id) in map {
                put(token, id);
            }
        }
        (None, Value::Array(pieces)) => {
            for (id, piece) in pieces.iter().enumerate() {
                put(piece.get(0)?.as_str()?, u32::try_from(id).ok()?);
            }
        }
        _ => return None,
    }
    for (token, id) in added {
        put(token, id);
    }
    Some(Vocabulary { strings, size })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// HF's table and size (`crate::tokenizer::vocab_of`).
    fn hf_strings(bytes: &[u8]) -> (Vec<String>, usize) {
        let hf = tokenizers::Tokenizer::from_bytes(bytes).unwrap();
        (crate::tokenizer::vocab_of(&hf), hf.get_vocab_size(true))
    }

    fn ours(json: &Value) -> Option<(Vec<String>, usize)> {
        vocab_strings(&Doc::from_value(json.clone())).map(|v| (v.strings, v.size))
    }

    #[test]
    fn vocab_strings_equal_hf_on_every_fixture() {
        let Ok(dirs) = std::fs::read_dir(crate::testdata::shared().join("tokenizers")) else {
            eprintln!("NOTICE: no fixture tokenizers; test skipped");
            return;
        };
        for dir in dirs.flatten() {
            let Ok(bytes) = std::fs::read(dir.path().join("tokenizer.json")) else { continue };
            let json: Value = serde_json::from_slice(&bytes).unwrap();
            // The typed parse builds the same tables as the parse into a `Value` (`doc.rs`).
            let doc = Doc::parse(&bytes).unwrap();
            assert!(doc == Doc::from_value(json.clone()), "{}", dir.path().display());
            let ours = vocab_strings(&doc).map(|v| (v.strings, v.size)).expect("a known vocabulary shape");
            assert!(ours == hf_strings(&bytes), "{}", dir.path().display());
            read(&json).unwrap();
        }
    }

    #[test]
    fn vocab_strings_number_added_tokens_as_hf() {
        let added = |content: &str, id: u32| {
            json!({"id": id, "content": content, "special": true,
            "single_word": false, "lstrip": false, "rstrip": false, "normalized": false})
        };
        for (vocab, tokens) in [
            (json!({"a": 0, "b": 1, "[UNK]": 2}), json!([added("b", 7), added("x", 0), added("", 3), added("x", 9)])),
            (json!({"a": 0, "b": 5}), json!([added("y", 1), added("z", 1)])),
            (json!([["a", 0.0], ["b", -1.0], ["<unk>", 0.0]]), json!([added("<unk>", 2), added("<s>", 40)])),
        ] {
            let model = if vocab.is_array() {
                json!({"type": "Unigram", "unk_id": 2, "vocab": vocab})
            } else {
                json!({"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"})
            };
            let file = json!({"version": "1.0", "added_tokens": tokens, "normalizer": null, "pre_tokenizer": null,
                "post_processor": null, "decoder": null, "truncation": null, "padding": null, "model": model});
            let bytes = file.to_string();
            assert_eq!(ours(&file), Some(hf_strings(bytes.as_bytes())), "{file}");
        }
    }

    #[test]
    fn components_hf_refuses_are_refused() {
        for (key, value) in [
            ("decoder", json!({"type": "NoSuchDecoder"})),
            ("post_processor", json!({"type": "TemplateProcessing", "single": 3})),
            ("normalizer", json!({"type": "Replace"})),
            ("truncation", json!({"max_length": "long"})),
            ("version", json!("2.0")),
        ] {
            let mut file = json!({"version": "1.0", "model": {"type": "WordLevel", "vocab": {}, "unk_token": "x"}});
            file[key] = value;
            let err = read(&file).err().unwrap_or_else(|| panic!("{key} accepted"));
            assert_eq!(err.kind(), ErrorKind::InvalidTokenizer);
            assert!(tokenizers::Tokenizer::from_bytes(file.to_string()).is_err(), "HF accepts {key}");
        }
    }
}
