//! `lopt-eval`: reproduces the LoPT paper's comparison table (Table 1) and its analysis figures
//! (sequence length, chunk size, batch size, thread count) on real corpora, for lopt and for the
//! baselines the paper compares against, all on the same HF `tokenizers` backend and pool size.
//!
//! Invariants of every experiment:
//! * all methods of one run are timed in the same process, interleaved per document (the order is
//!   rotated every round), so a noisy machine slows them alike;
//! * accuracy is exact equality of ids and attention mask with HF's sequential `encode`;
//! * unless `--warm-cache`, the BPE word cache is cleared before each timed call, so each call sees
//!   a fresh document as a server does (re-encoding one text would only measure the cache);
//! * baselines run on an explicit rayon pool of `--threads`; lopt on its own pool of that size.
//!
//! This crate is never published and the library never depends on it.

mod baselines;
mod cli;
mod corpus;
mod experiments;
mod machine;
mod measure;
mod methods;
mod output;
mod plot;
mod report;
mod runner;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    experiments::run(cli)
}
