//! Reading input: a whole file or stdin as one text, or JSON Lines documents in batches.
//!
//! JSONL rules: one JSON object per line with a string `text`; an `id` of any JSON type is
//! carried to the output; blank lines are skipped; every error names the input and the line
//! (1-based), so a bad document in a million is found at once.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// A file, or stdin for `-` and no argument.
pub struct Input {
    path: Option<PathBuf>,
}

impl Input {
    pub fn new(path: Option<&Path>) -> Self {
        Input { path: path.filter(|p| p.as_os_str() != "-").map(Path::to_path_buf) }
    }

    /// The name errors use: the path, or `<stdin>`.
    pub fn name(&self) -> String {
        self.path.as_ref().map_or_else(|| "<stdin>".to_owned(), |p| p.display().to_string())
    }

    fn open(&self) -> Result<Box<dyn BufRead>> {
        Ok(match &self.path {
            Some(path) => Box::new(BufReader::with_capacity(
                1 << 20,
                File::open(path).with_context(|| format!("cannot read input {}", path.display()))?,
            )),
            None => Box::new(BufReader::with_capacity(1 << 20, std::io::stdin())),
        })
    }

    /// The whole input as one text.
    ///
    /// # Errors
    /// When it cannot be read or is not UTF-8.
    pub fn read_text(&self) -> Result<String> {
        let mut bytes = Vec::new();
        self.open()?.read_to_end(&mut bytes).with_context(|| format!("cannot read input {}", self.name()))?;
        String::from_utf8(bytes).map_err(|e| {
            anyhow!(
                "input {} is not valid UTF-8 (first bad byte at offset {})",
                self.name(),
                e.utf8_error().valid_up_to()
            )
        })
    }

    /// A reader of its JSONL documents.
    ///
    /// # Errors
    /// When it cannot be opened.
    pub fn documents(&self) -> Result<Documents> {
        Ok(Documents { reader: self.open()?, name: self.name(), line: 0, buf: Vec::new() })
    }
}

/// One JSONL document.
#[derive(Debug)]
pub struct Document {
    /// 1-based line number in the input.
    pub line: usize,
    pub id: Option<Value>,
    pub text: String,
}

/// JSONL documents, read lazily.
pub struct Documents {
    reader: Box<dyn BufRead>,
    name: String,
    line: usize,
    buf: Vec<u8>,
}

impl Documents {
    /// The next documents: at least one unless the input is exhausted, at most `max_docs`, and
    /// no more once `max_bytes` of text are gathered.
    ///
    /// # Errors
    /// A read failure or a malformed line (named by its number).
    pub fn next_batch(&mut self, max_docs: usize, max_bytes: usize) -> Result<Vec<Document>> {
        let mut batch = Vec::new();
        let mut bytes = 0;
        while batch.len() < max_docs && bytes < max_bytes {
            let Some(doc) = self.next_document()? else { break };
            bytes += doc.text.len();
            batch.push(doc);
        }
        Ok(batch)
    }

    /// Every remaining document.
    ///
    /// # Errors
    /// As [`next_batch`](Self::next_batch).
    pub fn read_all(&mut self) -> Result<Vec<Document>> {
        self.next_batch(usize::MAX, usize::MAX)
    }

    fn next_document(&mut self) -> Result<Option<Document>> {
        loop {
            self.buf.clear();
            let read = self
                .reader
                .read_until(b'\n', &mut self.buf)
                .with_context(|| format!("cannot read input {}", self.name))?;
            if read == 0 {
                return Ok(None);
            }
            self.line += 1;
            let line = std::str::from_utf8(&self.buf).map_err(|e| {
                anyhow!("{}: line {}: not valid UTF-8 (at byte {})", self.name, self.line, e.valid_up_to())
            })?;
            if line.trim().is_empty() {
                continue;
            }
            return parse_document(line, self.line).map(Some).map_err(|e| {
                anyhow!("{}: line {}: {}", self.name, self.line, crate::report::one_line(&e.to_string()))
            });
        }
    }
}

/// The largest char boundary of `text` at or before `i` (at most `text.len()`).
pub fn char_floor(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn parse_document(line: &str, number: usize) -> Result<Document> {
    let value: Value = serde_json::from_str(line).map_err(|e| anyhow!("invalid JSON: {e}"))?;
    let Value::Object(mut object) = value else {
        bail!("expected a JSON object with a \"text\" string, found {}", kind(&value));
    };
    let text = match object.remove("text") {
        Some(Value::String(text)) => text,
        Some(other) => bail!("\"text\" must be a string, found {}", kind(&other)),
        None => bail!("missing \"text\" field"),
    };
    Ok(Document { line: number, id: object.remove("id"), text })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn documents(input: &str) -> Documents {
        Documents {
            reader: Box::new(std::io::Cursor::new(input.as_bytes().to_vec())),
            name: "in".into(),
            line: 0,
            buf: Vec::new(),
        }
    }

    #[test]
    fn documents_keep_ids_and_skip_blank_lines() {
        let mut docs =
            documents("{\"id\": 7, \"text\": \"a\"}\n\n  \n{\"text\": \"b\\nc\"}\r\n{\"id\":\"x\",\"text\":\"\"}");
        let all = docs.read_all().expect("valid");
        let seen: Vec<(usize, Option<Value>, &str)> =
            all.iter().map(|d| (d.line, d.id.clone(), d.text.as_str())).collect();
        assert_eq!(seen, [(1, Some(Value::from(7)), "a"), (4, None, "b\nc"), (5, Some(Value::from("x")), "")]);
    }

    #[test]
    fn batches_respect_both_limits() {
        let input = (0..10).map(|i| format!("{{\"text\": \"{}\"}}\n", "x".repeat(i))).collect::<String>();
        let mut docs = documents(&input);
        assert_eq!(docs.next_batch(3, usize::MAX).expect("ok").len(), 3);
        assert_eq!(docs.next_batch(100, 7).expect("ok").len(), 2); // 3 + 4 bytes reach the limit
        assert_eq!(docs.read_all().expect("ok").len(), 5);
        assert!(docs.next_batch(3, 3).expect("ok").is_empty());
    }

    #[test]
    fn char_floor_never_splits_a_char() {
        let text = "aé日";
        assert_eq!(char_floor(text, 2), 1);
        assert_eq!(char_floor(text, 5), 3);
        assert_eq!(char_floor(text, 6), 6);
        assert_eq!(char_floor(text, 60), 6);
    }

    #[test]
    fn bad_lines_are_named() {
        let cases = [
            ("{\"text\": \"a\"}\n{oops\n", "in: line 2: invalid JSON"),
            ("[1, 2]\n", "in: line 1: expected a JSON object"),
            ("{\"text\": 5}\n", "in: line 1: \"text\" must be a string, found a number"),
            ("{\"id\": 1}\n", "in: line 1: missing \"text\" field"),
        ];
        for (input, expected) in cases {
            let err = documents(input).read_all().expect_err(input).to_string();
            assert!(err.starts_with(expected), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
        let mut bad_utf8 = documents("");
        bad_utf8.reader = Box::new(std::io::Cursor::new(b"{\"text\": \"\xff\"}\n".to_vec()));
        assert!(bad_utf8.read_all().expect_err("bad").to_string().starts_with("in: line 1: not valid UTF-8"));
    }
}
