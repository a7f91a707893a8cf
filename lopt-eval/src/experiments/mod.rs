//! The five experiments: `compare` (Table 1) and the sweeps behind the paper's figures
//! (`seq-len`, `chunk-size`, `batch-size`, `threads`). Each configures the one
//! [`Runner`](crate::runner::Runner) (defaults, contexts per tokenizer, what it times per corpus,
//! its figures) and writes `results.json`, `results.csv`, `results.md` and, where the paper has a
//! figure, PNG plots into `--out`.
//!
//! Every experiment warms up once, then times all its variants interleaved per document
//! ([`measure::measure_doc`](crate::measure::measure_doc)); per-document latency is the median of
//! `--repeat` runs, and rows report the mean and median of those over documents.

mod batch_size;
mod chunk_size;
mod compare;
mod seq_len;
mod threads;

use anyhow::Result;

use crate::cli::{Cli, Command};

/// Runs the experiment the command line names.
///
/// # Errors
/// Any failure to read inputs, tokenize, or write results.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Compare(a) => compare::run(a),
        Command::SeqLen(a) => seq_len::run(a),
        Command::ChunkSize(a) => chunk_size::run(a),
        Command::BatchSize(a) => batch_size::run(a),
        Command::Threads(a) => threads::run(a),
    }
}
