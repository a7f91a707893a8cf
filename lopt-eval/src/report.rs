//! Result rows and their three renderings: `results.json` (a list of row objects),
//! `results.csv` (one column per field, empty when absent) and `results.md` (Markdown tables).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

/// One measured configuration: a method on a corpus with a tokenizer, plus the swept variable.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    pub experiment: String,
    pub method: String,
    pub tokenizer: String,
    pub corpus: String,
    /// Documents measured (the batch size in `batch-size`).
    pub docs: usize,
    /// Share of documents whose ids and attention mask equal HF's sequential `encode`.
    pub accuracy: f64,
    /// Mean over documents of the per-document median latency, ms (`batch-size`: batch time).
    pub mean_ms: f64,
    /// Median over documents of the per-document median latency, ms.
    pub median_ms: f64,
    /// `hf` mean_ms / this mean_ms, when `hf` ran in the same configuration.
    pub speedup_vs_hf: Option<f64>,
    pub threads: usize,
    pub repeat: usize,
    /// `fresh` (BPE cache cleared before each call) or `warm`.
    pub cache: String,
    pub mean_bytes: f64,
    pub mean_tokens: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq_len: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<usize>,
    /// Mean number of chunks per document (`chunk-size`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<usize>,
}

const CSV_HEADER: &str = "experiment,method,tokenizer,corpus,docs,accuracy,mean_ms,median_ms,speedup_vs_hf,threads,repeat,cache,mean_bytes,mean_tokens,seq_len,chunk_size,chunks,batch_size";

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The rows as CSV with a header line.
pub fn csv(rows: &[Row]) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for r in rows {
        let fields = [
            csv_field(&r.experiment),
            csv_field(&r.method),
            csv_field(&r.tokenizer),
            csv_field(&r.corpus),
            r.docs.to_string(),
            format!("{:.4}", r.accuracy),
            format!("{:.3}", r.mean_ms),
            format!("{:.3}", r.median_ms),
            opt(r.speedup_vs_hf.map(|s| format!("{s:.3}"))),
            r.threads.to_string(),
            r.repeat.to_string(),
            csv_field(&r.cache),
            format!("{:.0}", r.mean_bytes),
            format!("{:.0}", r.mean_tokens),
            opt(r.seq_len),
            opt(r.chunk_size),
            opt(r.chunks.map(|c| format!("{c:.2}"))),
            opt(r.batch_size),
        ];
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

/// A Markdown table.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", headers.join(" | "));
    let _ = writeln!(out, "|{}", headers.iter().map(|_| "---|").collect::<String>());
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out
}

/// Milliseconds with a precision that suits their size.
pub fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A speedup such as `3.1x`, or `-`.
pub fn speedup(v: Option<f64>) -> String {
    v.map(|s| format!("{s:.2}x")).unwrap_or_else(|| "-".to_owned())
}

/// The generic long table of rows (every field that is set).
pub fn long_table(rows: &[Row]) -> String {
    let headers =
        ["method", "tokenizer", "corpus", "docs", "x", "mean ms", "median ms", "accuracy", "speedup vs hf", "threads"];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let x = [
                r.seq_len.map(|v| format!("seq_len={v}")),
                r.chunk_size.map(|v| format!("chunk={v}")),
                r.chunks.map(|v| format!("chunks={v:.1}")),
                r.batch_size.map(|v| format!("batch={v}")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
            vec![
                r.method.clone(),
                r.tokenizer.clone(),
                r.corpus.clone(),
                r.docs.to_string(),
                if x.is_empty() { "-".to_owned() } else { x },
                ms(r.mean_ms),
                ms(r.median_ms),
                format!("{:.3}", r.accuracy),
                speedup(r.speedup_vs_hf),
                r.threads.to_string(),
            ]
        })
        .collect();
    table(&headers, &body)
}

/// Writes `results.json`, `results.csv` and `results.md` into `dir` (created if needed).
///
/// # Errors
/// When the folder or a file cannot be written.
pub fn write(dir: &Path, rows: &[Row], markdown: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = serde_json::to_string_pretty(rows).context("cannot serialize rows")?;
    for (name, content) in
        [("results.json", json + "\n"), ("results.csv", csv(rows)), ("results.md", markdown.to_owned())]
    {
        let path = dir.join(name);
        std::fs::write(&path, content).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_and_leaves_absent_fields_empty() {
        let row =
            Row { experiment: "compare".into(), method: "a,b".into(), docs: 2, batch_size: Some(4), ..Row::default() };
        let text = csv(&[row]);
        let line = text.lines().nth(1).unwrap_or_default();
        assert!(line.starts_with("compare,\"a,b\",,,2,"));
        assert!(line.ends_with(",,,,4"));
        assert_eq!(line.split(',').count(), CSV_HEADER.split(',').count() + 1); // one quoted comma
    }

    #[test]
    fn markdown_table_shape() {
        let t = table(&["a", "b"], &[vec!["1".into(), "2".into()]]);
        assert_eq!(t, "| a | b |\n|---|---|\n| 1 | 2 |\n");
    }
}
