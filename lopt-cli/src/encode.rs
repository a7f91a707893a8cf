//! `lopt encode`: a text (the whole input) or JSONL documents → JSON token ids, masks and
//! optionally offsets. JSONL input is encoded in batches with `encode_batch`, so one pool serves
//! the chunks of all documents of a batch, and streamed out in input order.

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
    // The sequential note comes once the input reads well, so that a bad input gets one line.
    if args.jsonl {
        let mut output = Output::create(args.output.as_deref(), args.offsets)?;
        for_each_encoded(tokenizer, &input, special, |doc, encoding| {
            output.write(doc.id.as_ref(), &encoding)?;
            Ok(ControlFlow::Continue(()))
        })?;
        source::note_prefix_cache(tokenizer);
        output.finish()
    } else {
        let text = input.read_text()?;
        source::note_sequential(tokenizer);
        let encoding = tokenizer.encode(&text, special)?;
        let mut output = Output::create(args.output.as_deref(), args.offsets)?;
        output.write(None, &encoding)?;
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
    mut f: impl FnMut(&Document, lopt::Encoding) -> Result<ControlFlow<()>>,
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
        for (doc, encoding) in batch.iter().zip(encode_batch(tokenizer, &batch, special)?) {
            if f(doc, encoding)?.is_break() {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// `encode_batch` over documents; on failure, names the first document that fails alone.
///
/// # Errors
/// The first encoding failure, with its line number.
fn encode_batch(tokenizer: &lopt::Tokenizer, batch: &[Document], special: bool) -> Result<Vec<lopt::Encoding>> {
    let texts: Vec<&str> = batch.iter().map(|d| d.text.as_str()).collect();
    tokenizer.encode_batch(&texts, special).map_err(|err| {
        match batch.iter().find_map(|d| tokenizer.encode(&d.text, special).err().map(|e| (d.line, e))) {
            Some((line, e)) => anyhow!("line {line}: {e}"),
            None => err.into(),
        }
    })
}
