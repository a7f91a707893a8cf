//! The command line: subcommands and the flags they share, as clap derive definitions.
//!
//! Invariant: every numeric flag that must be positive is rejected by its parser, so a `0`
//! never reaches the library as a silent default.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Lossless parallel tokenization: the output of HuggingFace `tokenizers`, on all cores.
#[derive(Debug, Parser)]
#[command(name = "lopt", version, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Encode a text (or JSONL documents) and print the tokens as JSON.
    Encode(EncodeArgs),
    /// Encode with lopt and with HF's sequential encode; exit 0 when identical, 1 when not.
    Verify(EncodeArgs),
    /// Show a tokenizer's pipeline, the engine lopt picks and whether it encodes in parallel.
    Info(InfoArgs),
    /// Time encoding every document of a JSONL file once; prints one JSON object.
    Bench(BenchArgs),
    /// Encode a long sample and compare time with HF's sequential encode (`make demo`).
    #[command(hide = true)]
    Demo(DemoArgs),
    /// Print the deterministic English-like sample text used by `demo` and the tests.
    #[command(hide = true)]
    Sample(SampleArgs),
}

/// Which tokenizer, and how lopt runs it.
#[derive(Debug, Args)]
pub struct TokenizerArgs {
    /// A HuggingFace tokenizer.json [default: built-in cl100k_base, converted from tiktoken-rs]
    #[arg(long, value_name = "PATH")]
    pub tokenizer: Option<PathBuf>,
    /// Threads of lopt's pool [default: number of cores]
    #[arg(long, value_name = "N", value_parser = positive)]
    pub threads: Option<usize>,
    /// Target chunk length in bytes [default: text length / threads]
    #[arg(long, value_name = "BYTES", value_parser = positive)]
    pub chunk_size: Option<usize>,
    /// Window around each chunk boundary searched for a safe cut, in bytes [default: 4096]
    #[arg(long, value_name = "BYTES")]
    pub overlap: Option<usize>,
    /// Engine that tokenizes the chunks
    #[arg(long, value_enum, default_value_t = Engine::Auto)]
    pub engine: Engine,
    /// Keep the tokens of recent long texts, up to SIZE of memory (e.g. 256MiB), and re-encode
    /// only what follows a shared prefix (across the lines of a JSONL input) [default: off]
    #[arg(long, value_name = "SIZE", value_parser = byte_size)]
    pub prefix_cache: Option<usize>,
    /// When the BPE engines build their seeded pre-token cache and long-word search: on a
    /// background thread at load, before loading returns (`sync`: benchmarks of a warmed-up
    /// server), or never (the search then on first use)
    #[arg(long, value_enum, default_value_t = SeedCache::Background)]
    pub seed_cache: SeedCache,
    /// Microseconds the pool's threads stay awake after a parallel call, so that the next
    /// call's segments start at once (0: off) [default: the library's]
    #[arg(long, value_name = "US")]
    pub linger_us: Option<u64>,
}

/// `--seed-cache`: the CLI spelling of [`lopt::SeedCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SeedCache {
    /// On a background thread started at load
    Background,
    /// Before loading returns
    Sync,
    /// Never
    Off,
}

impl From<SeedCache> for lopt::SeedCache {
    fn from(mode: SeedCache) -> Self {
        match mode {
            SeedCache::Background => lopt::SeedCache::Background,
            SeedCache::Sync => lopt::SeedCache::Sync,
            SeedCache::Off => lopt::SeedCache::Off,
        }
    }
}

/// `--engine`: the CLI spelling of [`lopt::EngineKind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// A native engine when one supports the tokenizer, HF otherwise
    Auto,
    /// The HuggingFace tokenizers pipeline
    Hf,
    /// A native engine (an error when none supports the tokenizer)
    Native,
}

impl From<Engine> for lopt::EngineKind {
    fn from(engine: Engine) -> Self {
        match engine {
            Engine::Auto => lopt::EngineKind::Auto,
            Engine::Hf => lopt::EngineKind::Hf,
            Engine::Native => lopt::EngineKind::Native,
        }
    }
}

/// Flags of `encode` and `verify`.
#[derive(Debug, Args)]
pub struct EncodeArgs {
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
    /// Do not add the post-processor's special tokens (BOS, [CLS], ...)
    #[arg(long)]
    pub no_special_tokens: bool,
    /// Input is JSON Lines: one object with a "text" string (and optionally an "id") per line
    #[arg(long)]
    pub jsonl: bool,
    /// Also output byte offsets, as [[start,end],...]
    #[arg(long)]
    pub offsets: bool,
    /// Write the JSON output to FILE (`verify` writes nothing unless given one)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Input file; `-` or nothing reads stdin
    #[arg(value_name = "FILE")]
    pub input: Option<PathBuf>,
}

/// Flags of `info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
}

/// Flags of `bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
    /// Accepted for parity with other tools' harnesses: lopt always computes offsets
    #[arg(long)]
    pub offsets: bool,
    /// Do not add the post-processor's special tokens (BOS, [CLS], ...)
    #[arg(long)]
    pub no_special_tokens: bool,
    /// Also print the ids of every timed document (for exactness checks by peer harnesses)
    #[arg(long, alias = "ids", hide = true)]
    pub print_ids: bool,
    /// Time the ids-only mode (`encode_ids`: no offsets, word ids or masks are computed)
    #[arg(long)]
    pub ids_only: bool,
    /// Encode the timed documents N at a time with `encode_batch` (one call per batch) instead
    /// of one `encode` call each
    #[arg(long, value_name = "N", value_parser = positive)]
    pub batch: Option<usize>,
    /// JSONL documents, one object with a "text" string per line
    #[arg(value_name = "FILE.jsonl")]
    pub input: PathBuf,
}

/// Flags of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
    /// Encode this file (a plain text, or the longest document of a .jsonl) instead of the sample
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Size of the generated sample in bytes
    #[arg(long, value_name = "BYTES", default_value_t = 3_000_000, value_parser = positive)]
    pub bytes: usize,
    /// Timed runs of each side; the median is reported
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = positive)]
    pub runs: usize,
}

/// Flags of `sample`.
#[derive(Debug, Args)]
pub struct SampleArgs {
    /// Size of the text in bytes (the text ends at the char boundary at or before it)
    #[arg(long, value_name = "BYTES", default_value_t = 100_000)]
    pub bytes: usize,
    /// Seed of the generator; equal seeds give equal texts
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Parses a count that must be at least 1.
fn positive(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e} (expected a positive whole number)")),
    }
}

/// Parses a size in bytes (`256MiB`): the library's parser, shared with the Python package.
fn byte_size(value: &str) -> Result<usize, String> {
    lopt::parse_byte_size(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::{byte_size, positive};

    #[test]
    fn sizes_take_decimal_and_binary_units() {
        assert_eq!(byte_size("256MiB"), Ok(256 << 20));
        assert_eq!(byte_size("1GB"), Ok(1_000_000_000));
        assert_eq!(byte_size("4096"), Ok(4096));
        assert_eq!(byte_size("64k"), Ok(64 << 10));
        assert!(byte_size("12 parsecs").is_err());
        assert!(byte_size("MiB").is_err());
    }

    #[test]
    fn counts_must_be_positive_whole_numbers() {
        assert_eq!(positive("4"), Ok(4));
        assert!(positive("0").is_err());
        assert!(positive("-1").is_err());
        assert!(positive("two").is_err());
    }
}
