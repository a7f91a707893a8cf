//! Shared pieces of lopt's benchmarks: loading corpus documents and timing helpers.
//!
//! Timing rules (see `docs/benchmarks.md`): fresh documents (each encoded once per method, by a
//! tokenizer instance of its own so that no method profits from another's caches), methods
//! interleaved per document, medians reported.

use std::path::Path;
use std::time::{Duration, Instant};

// The `lopt` command's allocator settings, compiled here from the command's own source (one copy
// of the code): the runners call [`keep_freed_memory`] first, so that what they time is what
// `lopt` runs (glibc's default trimming made fresh-document timings fault the heap in again).
#[path = "../../lopt-cli/src/alloc.rs"]
mod alloc;

/// Applies the `lopt` command's allocator settings (`lopt-cli/src/alloc.rs`); call it first in
/// `main`, before any thread starts.
pub fn keep_freed_memory() {
    alloc::keep_freed_memory();
}

/// The `text` fields of the first `max_docs` lines of a JSONL corpus, each cut to `max_bytes`.
///
/// # Errors
/// When the file cannot be read.
pub fn load_docs(path: &Path, max_docs: usize, max_bytes: usize) -> anyhow::Result<Vec<String>> {
    let content = std::fs::read_to_string(path)?;
    Ok(content
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|v| v["text"].as_str().map(|t| lopt_tests::truncate(t, max_bytes).to_owned()))
        .take(max_docs)
        .collect())
}

/// Runs `f` once and returns its result with the elapsed time.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let value = f();
    (value, start.elapsed())
}

/// The median of `values` (0 when empty).
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}
