//! Command-line interface: one subcommand per experiment, sharing the [`Common`] flags. Defaults
//! that differ per experiment (tokenizers, corpora, methods) are `None`/empty here and filled in by
//! `experiments`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::methods::Method;

/// Reproduces the LoPT paper's comparison table and analysis figures.
#[derive(Parser, Debug)]
#[command(name = "lopt-eval", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Table 1: latency, accuracy and speedup of every method on every corpus and tokenizer.
    Compare(CompareArgs),
    /// Latency vs sequence length (documents cut to N tokens), HF vs lopt.
    SeqLen(SeqLenArgs),
    /// lopt latency vs chunk length in bytes, with the number of chunks.
    ChunkSize(ChunkSizeArgs),
    /// Total time vs batch size for hf, hf-batch and lopt (`encode_batch`).
    BatchSize(BatchSizeArgs),
    /// Latency and throughput vs thread count (lopt and any baseline), with ideal-scaling lines.
    Threads(ThreadsArgs),
}

/// Flags shared by every experiment.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Tokenizers: paths to tokenizer.json files or fixture names (qwen3, deepseek_v3, llama3_1,
    /// gptoss, gpt2, bert-base-uncased, bert-base-cased, gemma3, llama2, gpt4o, claude).
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub tokenizers: Vec<String>,
    /// Corpora: JSONL files with a `text` field, or names of the shared corpora (leval,
    /// en_verylong, zh_long, mixed_hard).
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub corpus: Vec<String>,
    /// Methods to run (default depends on the experiment).
    #[arg(long, num_args = 1.., value_delimiter = ',', value_enum)]
    pub methods: Vec<Method>,
    /// Use at most this many documents of each corpus (the first ones).
    #[arg(long)]
    pub max_docs: Option<usize>,
    /// Truncate each document to at most this many bytes (at a char boundary).
    #[arg(long)]
    pub max_bytes: Option<usize>,
    /// Pool size for every parallel method (default: available cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Timed runs per document and method (after one warm-up); the median is kept.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Output folder (default: lopt-eval-results/<experiment>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Keep the BPE cache between timed calls (default: clear it, a fresh document each call).
    #[arg(long)]
    pub warm_cache: bool,
    /// Number of chunks the delim-*, overlap-improved and lopt-paper baselines aim at (default:
    /// --threads; the paper uses 32 processes and so 32 chunks).
    #[arg(long)]
    pub pieces: Option<usize>,
    /// Overlap in chars of the overlap-* and lopt-paper baselines.
    #[arg(long, default_value_t = 512)]
    pub overlap_chars: usize,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug)]
pub struct SeqLenArgs {
    #[command(flatten)]
    pub common: Common,
    /// Sequence lengths in tokens.
    #[arg(long, num_args = 1.., value_delimiter = ',', default_values_t = [4096, 8192, 16384, 32768, 65536, 131072, 262144])]
    pub lengths: Vec<usize>,
}

#[derive(Args, Debug)]
pub struct ChunkSizeArgs {
    #[command(flatten)]
    pub common: Common,
    /// Chunk lengths in bytes.
    #[arg(long, num_args = 1.., value_delimiter = ',', default_values_t = [2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576])]
    pub chunk_sizes: Vec<usize>,
}

#[derive(Args, Debug)]
pub struct BatchSizeArgs {
    #[command(flatten)]
    pub common: Common,
    /// Batch sizes (documents per batch; documents are reused cyclically when there are fewer).
    #[arg(long, num_args = 1.., value_delimiter = ',', default_values_t = [1, 2, 4, 8, 16, 32, 64])]
    pub batch_sizes: Vec<usize>,
}

#[derive(Args, Debug)]
pub struct ThreadsArgs {
    #[command(flatten)]
    pub common: Common,
    /// Thread counts to sweep (default: 1..=N for N <= 8, else powers of two up to N and N,
    /// with N = --max-threads).
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub thread_counts: Vec<usize>,
    /// N, the largest thread count of the default sweep (default: available cores).
    #[arg(long)]
    pub max_threads: Option<usize>,
}
