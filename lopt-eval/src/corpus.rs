//! Inputs: resolving tokenizer and corpus names to files, reading JSONL corpora and cutting
//! documents to a byte budget.
//!
//! Fixture tokenizers are looked up as CONTRIBUTING says: `../shared/tokenizers/<name>/` beside
//! the workspace (or `$LOPT_SHARED/tokenizers`), else `fixtures/tokenizers/<name>/`. Corpora:
//! `../shared/corpora/<name>.jsonl`. A cut never splits a UTF-8 character.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
// Fixture lookup is shared with the test suite, so that both find the same files.
use lopt_tests::{fixture, shared_dir, FIXTURES};

/// The corpora of the shared folder, by file stem.
pub const CORPORA: &[&str] = &["leval", "en_verylong", "zh_long", "mixed_hard"];

/// One document of a corpus.
#[derive(Clone, Debug)]
pub struct Doc {
    pub text: String,
}

/// A named list of documents.
#[derive(Clone, Debug)]
pub struct Corpus {
    pub name: String,
    pub docs: Vec<Doc>,
}

/// A tokenizer argument (a path or a fixture name) as `(label, path)`.
///
/// # Errors
/// When it is neither an existing file nor a fixture that is present.
pub fn resolve_tokenizer(arg: &str) -> Result<(String, PathBuf)> {
    let path = Path::new(arg);
    if path.is_file() {
        // `.../qwen3/tokenizer.json` is labelled `qwen3`; `foo.json` is labelled `foo`.
        let label = match path.file_stem().and_then(|s| s.to_str()) {
            Some("tokenizer") => path.parent().and_then(|p| p.file_name()).and_then(|s| s.to_str()),
            other => other,
        };
        return Ok((label.unwrap_or(arg).to_owned(), path.to_path_buf()));
    }
    match fixture(arg) {
        Some(p) => Ok((arg.to_owned(), p)),
        None => bail!("tokenizer {arg:?} is neither a file nor a fixture present under {}", shared_dir().display()),
    }
}

/// Fixtures that `lopt-eval` runs by default beyond the test suite's [`FIXTURES`]: tokenizers whose
/// native support is newer (they run on HF's engine where lopt has none yet), so that the published
/// tables cover them too.
pub const EXTRA_FIXTURES: &[&str] = &["gemma3", "llama2"];

/// The default tokenizers of `compare`: every fixture of [`FIXTURES`] and [`EXTRA_FIXTURES`] that
/// is present (each once), with a notice on stderr for each missing one.
pub fn default_tokenizers() -> Vec<String> {
    let mut names: Vec<&str> = FIXTURES.to_vec();
    names.extend(EXTRA_FIXTURES.iter().filter(|n| !FIXTURES.contains(n)));
    names
        .into_iter()
        .filter(|name| {
            let present = fixture(name).is_some();
            if !present {
                eprintln!("notice: fixture tokenizer {name} not found; skipped");
            }
            present
        })
        .map(str::to_owned)
        .collect()
}

/// A corpus argument (a path or a shared corpus name) as `(label, path)`.
///
/// # Errors
/// When it is neither an existing file nor a corpus present in the shared folder.
pub fn resolve_corpus(arg: &str) -> Result<(String, PathBuf)> {
    let path = Path::new(arg);
    if path.is_file() {
        let label = path.file_stem().and_then(|s| s.to_str()).unwrap_or(arg);
        return Ok((label.to_owned(), path.to_path_buf()));
    }
    let shared = shared_dir().join("corpora").join(format!("{arg}.jsonl"));
    if shared.is_file() {
        return Ok((arg.to_owned(), shared));
    }
    bail!("corpus {arg:?} is neither a file nor {}", shared.display())
}

#[derive(serde::Deserialize)]
struct Line {
    text: String,
}

/// Reads the first `max_docs` documents of a JSONL file (one object with `text` per line), each
/// cut to `max_bytes`. Empty documents are skipped.
///
/// # Errors
/// When the file cannot be read or a line is not an object with a string `text`.
pub fn load(label: &str, path: &Path, max_docs: Option<usize>, max_bytes: Option<usize>) -> Result<Corpus> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot open corpus {}", path.display()))?;
    let mut docs = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        if max_docs.is_some_and(|m| docs.len() >= m) {
            break;
        }
        let line = line.with_context(|| format!("cannot read {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line = serde_json::from_str(&line)
            .with_context(|| format!("{}:{}: not a JSON object with `text`", path.display(), n + 1))?;
        let mut text = parsed.text;
        if let Some(max) = max_bytes {
            let cut = truncate(&text, max).len();
            text.truncate(cut);
        }
        if !text.is_empty() {
            docs.push(Doc { text });
        }
    }
    if docs.is_empty() {
        bail!("corpus {} has no documents", path.display());
    }
    Ok(Corpus { name: label.to_owned(), docs })
}

/// The longest prefix of `text` of at most `max` bytes that ends on a char boundary.
pub fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_keeps_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("abc", 10), "abc");
        assert_eq!(truncate("日本", 4), "日");
    }

    #[test]
    fn load_reads_text_and_cuts() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("lopt-eval-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("c.jsonl");
        std::fs::write(&path, "{\"id\":1,\"text\":\"héllo world\"}\n\n{\"text\":\"second\"}\n{\"text\":\"third\"}\n")?;
        let corpus = load("c", &path, Some(2), Some(3))?;
        assert_eq!(corpus.docs.len(), 2);
        assert_eq!(corpus.docs[0].text, "hé");
        assert_eq!(corpus.docs[1].text, "sec");
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
