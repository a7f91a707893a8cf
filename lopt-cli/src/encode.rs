//! `lopt encode`: a text (the whole input) or JSONL documents → JSON token ids, masks and
//! optionally offsets. JSONL input is encoded in batches with `encode_batch`, so one pool serves
//! the chunks of all documents of a batch, and streamed out in input order. Without `--offsets`,
//! and when the tokenizer does not pad (so that the attention mask is all ones), only ids are
//! computed (`encode_ids`).

use std::ops::ControlFlow;

use anyhow::{anyhow, Result};

use crate::args::EncodeArgs;
use crate::input::{Document, Input};
use crate::output::Output;
use crate::source;

/// Documents per `encode_batch` call: enough to keep every thread busy on short documents.
const BATCH_DOCS: usize = 1024;
/// Text bytes per `encode_batch` call, to bound memory on huge files.
const BATCH_BYTES: usize = 32 << 20;

/// Runs `lopt encode`.
///
/// # Errors
/// Bad tokenizer, unreadable or malformed input, an encoding failure, an unwritable output.
pub fn run(args: &EncodeArgs) -> Result<()> {
    let loaded = source::load(&args.tokenizer)?;
    let tokenizer = &loaded.tokenizer;
    let input = Input::new(args.input.as_deref());
    let special = !args.no_special_tokens;
    let options = tokenizer.options().clone().add_special_tokens(special);
    let ids_only = !args.offsets && options.padding_params().is_none();
    // The sequential note comes once the input reads well, so that a bad input gets one line.
    if args.jsonl {
        let mut output = Output::create(args.output.as_deref(), args.offsets)?;
        if ids_only {
            for_each_batch(
                tokenizer,
                &input,
                |texts| tokenizer.encode_batch_ids(texts, &options),
                |text| tokenizer.encode_ids(text, &options).map(drop),
                |doc, ids: Vec<u32>| {
                    output.write_ids(doc.id.as_ref(), &ids)?;
                    Ok(ControlFlow::Continue(()))
                },
            )?;
        } else {
            for_each_encoded(tokenizer, &input, special, |doc, encoding| {
                output.write(doc.id.as_ref(), &encoding)?;
                Ok(ControlFlow::Continue(()))
            })?;
        }
        source::note_prefix_cache(tokenizer);
        output.finish()
    } else {
        let text = input.read_text()?;
        source::note_sequential(tokenizer);
        let mut output = Output::create(args.output.as_deref(), args.offsets)?;
        if ids_only {
            output.write_ids(None, &tokenizer.encode_ids(&text, &options)?)?;
        } else {
            output.write(None, &tokenizer.encode(&text, special)?)?;
        }
        output.finish()
    }
}

/// Encodes every JSONL document of `input` in batches that share the pool, handing each one with
/// its encoding to `f` in input order until `f` breaks. The sequential note is printed once the
/// first batch has read cleanly, so that a bad input gets exactly one line.
///
/// # Errors
/// A malformed input line, an encoding failure, or `f`'s error.
pub fn for_each_encoded(
    tokenizer: &lopt::Tokenizer,
    input: &Input,
    special: bool,
    f: impl FnMut(&Document, lopt::Encoding) -> Result<ControlFlow<()>>,
) -> Result<()> {
    for_each_batch(
        tokenizer,
        input,
        |texts| tokenizer.encode_batch(texts, special),
        |text| tokenizer.encode(text, special).map(drop),
        f,
    )
}

/// [`for_each_encoded`] with any batch encoder: `encode_batch` encodes a batch, `encode_one` one
/// text (to name the first document that fails alone when a batch fails).
///
/// # Errors
/// As [`for_each_encoded`].
fn for_each_batch<T>(
    tokenizer: &lopt::Tokenizer,
    input: &Input,
    encode_batch: impl Fn(&[&str]) -> Result<Vec<T>, lopt::Error>,
    encode_one: impl Fn(&str) -> Result<(), lopt::Error>,
    mut f: impl FnMut(&Document, T) -> Result<ControlFlow<()>>,
) -> Result<()> {
    let mut documents = input.documents()?;
    for round in 0.. {
        let batch = documents.next_batch(BATCH_DOCS, BATCH_BYTES)?;
        if round == 0 {
            source::note_sequential(tokenizer);
        }
        if batch.is_empty() {
            break;
        }
        let texts: Vec<&str> = batch.iter().map(|d| d.text.as_str()).collect();
        let encoded = encode_batch(&texts).map_err(|err| {
            match batch.iter().find_map(|d| encode_one(&d.text).err().map(|e| (d.line, e))) {
                Some((line, e)) => anyhow!("line {line}: {e}"),
                None => err.into(),
            }
        })?;
        for (doc, result) in batch.iter().zip(encoded) {
            if f(doc, result)?.is_break() {
                return Ok(());
            }
        }
    }
    Ok(())
}
