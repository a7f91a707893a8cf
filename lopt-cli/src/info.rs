//! `lopt info`: what a tokenizer is made of (from its JSON), which engine lopt picks for it, and
//! whether long texts are encoded in parallel — and if not, which component prevents it.

use std::io::Write;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::args::InfoArgs;
use crate::report::group;
use crate::source;

/// Runs `lopt info`.
///
/// # Errors
/// A bad tokenizer, or stdout that cannot be written.
pub fn run(args: &InfoArgs) -> Result<()> {
    let loaded = source::load(&args.tokenizer)?;
    let json: Value = serde_json::from_slice(&loaded.json).context("tokenizer is not valid JSON")?;
    let tokenizer = &loaded.tokenizer;
    let mut rows: Vec<(&str, String)> = vec![
        ("tokenizer", loaded.name.clone()),
        ("normalizer", describe(&json["normalizer"])),
        ("pre-tokenizer", describe(&json["pre_tokenizer"])),
        ("model", describe_model(&json["model"])),
        ("post-processor", describe(&json["post_processor"])),
        ("decoder", describe(&json["decoder"])),
        ("added tokens", describe_added(&json["added_tokens"])),
        ("vocabulary", format!("{} ids (added tokens included)", group(tokenizer.vocab_size()))),
    ];
    if args.tokenizer.tokenizer.is_none() {
        let cache = crate::cl100k::cache_path()
            .filter(|p| p.is_file())
            .map_or_else(|| "none (converted in memory)".to_owned(), |p| p.display().to_string());
        rows.push(("cache", cache));
    }
    let mut patterns = Vec::new();
    split_patterns(&json["pre_tokenizer"], &mut patterns);
    rows.extend(patterns.into_iter().map(|p| ("split regex", p)));
    rows.extend(tokenizer.equivalences().iter().map(|e| ("equivalence", e.clone())));
    rows.push((
        "engine",
        match tokenizer.engine_reason() {
            Some(reason) => format!("{} (no native engine: {reason})", tokenizer.engine_name()),
            None => tokenizer.engine_name().to_owned(),
        },
    ));
    rows.push(("threads", tokenizer.threads().to_string()));
    rows.push((
        "parallel",
        match tokenizer.parallelism() {
            lopt::Parallelism::Parallel => {
                "yes: long texts are cut at safe points and encoded on all threads".to_owned()
            }
            lopt::Parallelism::Sequential { reason } => format!("no: texts are encoded whole ({reason})"),
            other => format!("{other:?}"),
        },
    ));
    let mut out = std::io::stdout().lock();
    for (key, value) in rows {
        writeln!(out, "{key:<16}{value}")?;
    }
    out.flush()?;
    Ok(())
}

/// A component as `Type`, with `Sequence[...]` expanded and a few telling details.
fn describe(component: &Value) -> String {
    let Some(kind) = component["type"].as_str() else {
        return if component.is_null() { "none".to_owned() } else { "(untyped)".to_owned() };
    };
    let members =
        ["normalizers", "pretokenizers", "processors", "decoders"].iter().find_map(|k| component[k].as_array());
    match (kind, members) {
        ("Sequence", Some(members)) => {
            format!("Sequence[{}]", members.iter().map(describe).collect::<Vec<_>>().join(", "))
        }
        ("Split", _) => {
            let pattern = if component["pattern"]["Regex"].is_string() { "Regex" } else { "String" };
            let behavior = component["behavior"].as_str().unwrap_or("?");
            let inverted = if component["invert"].as_bool() == Some(true) { ", inverted" } else { "" };
            format!("Split({pattern}, {behavior}{inverted})")
        }
        ("ByteLevel", _) => {
            let flags: Vec<String> = ["add_prefix_space", "trim_offsets", "use_regex"]
                .iter()
                .filter_map(|k| component[k].as_bool().map(|v| format!("{k}={v}")))
                .collect();
            format!("ByteLevel({})", flags.join(", "))
        }
        ("TemplateProcessing", _) => format!("TemplateProcessing(single: {})", template(&component["single"])),
        _ => kind.to_owned(),
    }
}

/// A template as `<|begin_of_text|> $A`.
fn template(pieces: &Value) -> String {
    let Some(pieces) = pieces.as_array() else { return "?".to_owned() };
    pieces
        .iter()
        .map(|p| match (&p["SpecialToken"]["id"], &p["Sequence"]["id"]) {
            (Value::String(token), _) => token.clone(),
            (_, Value::String(sequence)) => format!("${sequence}"),
            _ => "?".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn describe_model(model: &Value) -> String {
    let kind = model["type"].as_str().unwrap_or("(untyped)");
    let mut details = Vec::new();
    if let Some(vocab) = model["vocab"].as_object() {
        details.push(format!("{} vocab entries", group(vocab.len())));
    }
    if let Some(merges) = model["merges"].as_array() {
        details.push(format!("{} merges", group(merges.len())));
    }
    for flag in ["ignore_merges", "byte_fallback", "fuse_unk"] {
        if model[flag].as_bool() == Some(true) {
            details.push(flag.to_owned());
        }
    }
    if let Some(unk) = model["unk_token"].as_str() {
        details.push(format!("unk {unk}"));
    }
    if details.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind} ({})", details.join(", "))
    }
}

fn describe_added(added: &Value) -> String {
    let Some(added) = added.as_array() else { return "none".to_owned() };
    let special = added.iter().filter(|t| t["special"].as_bool() == Some(true)).count();
    format!("{} ({} special)", group(added.len()), group(special))
}

fn split_patterns(component: &Value, out: &mut Vec<String>) {
    if let Some(members) = component["pretokenizers"].as_array() {
        members.iter().for_each(|m| split_patterns(m, out));
    } else if component["type"] == "Split" {
        if let Some(regex) = component["pattern"]["Regex"].as_str() {
            out.push(format!("{regex:?}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn describes_sequences_splits_and_templates() {
        let pre = json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]});
        assert_eq!(
            describe(&pre),
            "Sequence[Split(Regex, Isolated), ByteLevel(add_prefix_space=false, trim_offsets=true, use_regex=false)]"
        );
        let mut patterns = Vec::new();
        split_patterns(&pre, &mut patterns);
        assert_eq!(patterns, ["\"\\\\d\""]);
        let post = json!({"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]});
        assert_eq!(describe(&post), "TemplateProcessing(single: <s> $A)");
        assert_eq!(describe(&Value::Null), "none");
        assert_eq!(
            describe_model(&json!({"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "[UNK]"})),
            "WordPiece (1 vocab entries, unk [UNK])"
        );
    }
}
