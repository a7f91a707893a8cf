//! `lopt verify`: encodes every text with lopt and with HF's sequential `encode` and compares
//! every field. Exit 0 and a one-line summary when all are identical; exit 1 and the first
//! difference with its context (tokens on both sides, the text around it) when not.

use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::Value;

use crate::args::EncodeArgs;
use crate::encode::for_each_encoded;
use crate::input::{char_floor, Input};
use crate::output::Output;
use crate::report::{self, group, plural};
use crate::source;

/// Tokens shown on each side of a difference.
const CONTEXT_TOKENS: usize = 3;
/// Bytes of text shown on each side of a difference.
const CONTEXT_BYTES: usize = 60;

#[derive(Default)]
struct Totals {
    docs: usize,
    bytes: usize,
    tokens: usize,
    cuts: usize,
}

/// Runs `lopt verify`.
///
/// # Errors
/// As `lopt encode`; a difference is not an error but exit status 1.
pub fn run(args: &EncodeArgs) -> Result<ExitCode> {
    let loaded = source::load(&args.tokenizer)?;
    let tokenizer = &loaded.tokenizer;
    let input = Input::new(args.input.as_deref());
    let special = !args.no_special_tokens;
    let mut totals = Totals::default();
    let mut output = None;
    if args.jsonl {
        if let Some(path) = &args.output {
            output = Some(Output::create(Some(path), args.offsets)?);
        }
        let mut different = false;
        for_each_encoded(tokenizer, &input, special, |doc, ours| {
            let reference = tokenizer.encode_sequential(&doc.text, special)?;
            if ours != reference {
                let place = format!("{} line {}{}", input.name(), doc.line, id_suffix(doc.id.as_ref()));
                report::raw(&difference_report(&place, &doc.text, &ours, &reference));
                different = true;
                return Ok(ControlFlow::Break(()));
            }
            totals.add(tokenizer, &doc.text, &ours);
            if let Some(output) = &mut output {
                output.write(doc.id.as_ref(), &ours)?;
            }
            Ok(ControlFlow::Continue(()))
        })?;
        if different {
            return Ok(ExitCode::from(crate::EXIT_DIFFERENT));
        }
    } else {
        let text = input.read_text()?;
        source::note_sequential(tokenizer);
        let ours = tokenizer.encode(&text, special)?;
        let reference = tokenizer.encode_sequential(&text, special)?;
        if ours != reference {
            report::raw(&difference_report(&input.name(), &text, &ours, &reference));
            return Ok(ExitCode::from(crate::EXIT_DIFFERENT));
        }
        totals.add(tokenizer, &text, &ours);
        if let Some(path) = &args.output {
            let mut out = Output::create(Some(path), args.offsets)?;
            out.write(None, &ours)?;
            output = Some(out);
        }
    }
    if let Some(output) = output {
        output.finish()?;
    }
    report::note(&format!(
        "verify: identical to HF's sequential encode: {}, {} bytes, {} tokens, {} (tokenizer {}, engine {}, {} \
         threads)",
        plural(totals.docs, "doc"),
        group(totals.bytes),
        group(totals.tokens),
        plural(totals.cuts, "cut"),
        loaded.name,
        tokenizer.engine_name(),
        tokenizer.threads(),
    ));
    source::note_prefix_cache(tokenizer);
    Ok(ExitCode::SUCCESS)
}

impl Totals {
    fn add(&mut self, tokenizer: &lopt::Tokenizer, text: &str, encoding: &lopt::Encoding) {
        self.docs += 1;
        self.bytes += text.len();
        self.tokens += encoding.len();
        self.cuts += tokenizer.cut_points(text).len();
    }
}

fn id_suffix(id: Option<&Value>) -> String {
    id.map(|id| format!(" (id {id})")).unwrap_or_default()
}

/// The first difference between `ours` (lopt) and `reference` (HF), with a few tokens of
/// context on both sides and the text around it. Several lines, each starting `lopt: `.
fn difference_report(place: &str, text: &str, ours: &lopt::Encoding, reference: &lopt::Encoding) -> String {
    let Some(diff) = ours.first_difference(reference) else {
        return format!("lopt: verify: DIFFERENT in {place}: the encodings differ\n");
    };
    let mut out = format!(
        "lopt: verify: DIFFERENT in {place}: {diff} (lopt has {} tokens, HF {})\n",
        group(ours.len()),
        group(reference.len())
    );
    let first = diff.index.saturating_sub(CONTEXT_TOKENS);
    let last = (diff.index + CONTEXT_TOKENS).min(ours.len().max(reference.len()).saturating_sub(1));
    let cells: Vec<(String, String)> =
        (first..=last).map(|i| (cell(ours, i, diff.field), cell(reference, i, diff.field))).collect();
    let width = cells.iter().map(|(l, _)| l.chars().count()).chain([4]).max().unwrap_or(4);
    let _ = writeln!(out, "lopt:     token  {:width$}  hf", "lopt");
    for (i, (left, right)) in (first..).zip(&cells) {
        let marker = if i == diff.index { '>' } else { ' ' };
        let _ = writeln!(out, "lopt:   {marker} {i:>6}  {left:width$}  {right}");
    }
    let at = [reference, ours]
        .iter()
        .find_map(|e| e.offsets().get(diff.index).map(|o| o.0))
        .unwrap_or(text.len())
        .min(text.len());
    let start = char_floor(text, at.saturating_sub(CONTEXT_BYTES));
    let end = char_floor(text, (at + CONTEXT_BYTES).min(text.len()));
    let _ = writeln!(out, "lopt:   text[{start}..{end}] around byte {at}: {:?}", &text[start..end]);
    out
}

/// One side of a context row: id, token, offsets, and the differing field when it is another.
fn cell(encoding: &lopt::Encoding, i: usize, field: &str) -> String {
    let Some(id) = encoding.ids().get(i) else { return "-".to_owned() };
    let token = encoding.tokens().get(i).map_or_else(String::new, |t| format!("{t:?}"));
    let (start, end) = encoding.offsets().get(i).copied().unwrap_or_default();
    let extra = match field {
        "word_ids" => encoding.word_ids().get(i).map(|w| format!(" word={w:?}")),
        "type_ids" => encoding.type_ids().get(i).map(|t| format!(" type={t}")),
        "special_tokens_mask" => encoding.special_tokens_mask().get(i).map(|s| format!(" special={s}")),
        "attention_mask" => encoding.attention_mask().get(i).map(|a| format!(" attention={a}")),
        "overflowing" => Some(format!(" overflowing={}", encoding.overflowing().len())),
        _ => None,
    };
    format!("{id} {token} {start}..{end}{}", extra.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(json: &[u8], text: &str) -> lopt::Encoding {
        lopt::TokenizerBuilder::new()
            .threads(1)
            .build_from_bytes(json)
            .expect("tokenizer")
            .encode(text, true)
            .expect("encode")
    }

    #[test]
    fn report_shows_the_first_difference_with_context() {
        let json = crate::cl100k::convert().expect("default tokenizer");
        let text = "one two three four five six seven eight nine ten";
        let a = encode(&json, text);
        let b = encode(&json, "one two three four FIVE six seven eight nine ten");
        let report = difference_report("input", text, &a, &b);
        let lines: Vec<&str> = report.lines().collect();
        assert!(lines[0].starts_with("lopt: verify: DIFFERENT in input: ids differ at token 4"), "{report}");
        assert!(lines.iter().any(|l| l.contains("> ") && l.contains("\"Ġfive\"")), "{report}");
        assert!(lines.last().is_some_and(|l| l.contains("around byte 18") && l.contains("four five")), "{report}");
        assert!(lines.iter().all(|l| l.starts_with("lopt: ")));
    }
}
