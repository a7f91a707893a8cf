//! JSON output of `encode` (and `verify -o`): one object per text, `{"id"?, "input_ids",
//! "attention_mask", "offsets"?}`, one per line, in input order.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

/// Where the JSON goes, and which fields it carries.
pub struct Output {
    writer: Box<dyn Write>,
    name: String,
    offsets: bool,
}

#[derive(serde::Serialize)]
struct Record<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Value>,
    input_ids: &'a [u32],
    attention_mask: &'a [u32],
    /// Tuples serialize as two-element arrays: `[[start, end], ...]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    offsets: Option<&'a [(usize, usize)]>,
}

impl Output {
    /// Writes to `path`, or stdout when `None`.
    ///
    /// # Errors
    /// When the file cannot be created.
    pub fn create(path: Option<&Path>, offsets: bool) -> Result<Output> {
        let (writer, name): (Box<dyn Write>, String) = match path {
            Some(path) => (
                Box::new(BufWriter::with_capacity(
                    1 << 20,
                    File::create(path).with_context(|| format!("cannot create output {}", path.display()))?,
                )),
                path.display().to_string(),
            ),
            None => (Box::new(BufWriter::with_capacity(1 << 20, std::io::stdout())), "<stdout>".to_owned()),
        };
        Ok(Output { writer, name, offsets })
    }

    /// Writes one encoding as one line.
    ///
    /// # Errors
    /// When the output cannot be written.
    pub fn write(&mut self, id: Option<&Value>, encoding: &lopt::Encoding) -> Result<()> {
        self.record(&Record {
            id,
            input_ids: encoding.ids(),
            attention_mask: encoding.attention_mask(),
            offsets: self.offsets.then(|| encoding.offsets()),
        })
    }

    /// Writes the ids of an unpadded encoding as one line (its attention mask is all ones).
    ///
    /// # Errors
    /// When the output cannot be written.
    pub fn write_ids(&mut self, id: Option<&Value>, ids: &[u32]) -> Result<()> {
        self.record(&Record { id, input_ids: ids, attention_mask: &vec![1; ids.len()], offsets: None })
    }

    fn record(&mut self, record: &Record<'_>) -> Result<()> {
        serde_json::to_writer(&mut self.writer, record)
            .map_err(std::io::Error::from)
            .and_then(|()| self.writer.write_all(b"\n"))
            .with_context(|| format!("cannot write output {}", self.name))
    }

    /// Flushes everything written.
    ///
    /// # Errors
    /// When the output cannot be written.
    pub fn finish(mut self) -> Result<()> {
        self.writer.flush().with_context(|| format!("cannot write output {}", self.name))
    }
}
