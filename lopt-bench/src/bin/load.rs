//! `load`: load time of every fixture tokenizer, lopt against HF's `Tokenizer::from_file`, in one
//! process, interleaved in rotating order, medians of `--rounds` rounds.
//!
//! lopt is timed with its seeded pre-token cache built before `build_from_file` returns
//! (`SeedCache::Sync`: the load a server waits for before its first seeded encode) and without
//! it (`SeedCache::Off`: what loading waits for with the default background seed, less the
//! thread start). The background mode itself is not timed here: its thread would still be running
//! into the next measurement.
//!
//! ```text
//! cargo run --release -p lopt-bench --bin load -- --rounds 5
//! ```

use anyhow::Context;
use clap::Parser;
use lopt::{SeedCache, TokenizerBuilder};
use lopt_bench::{median, timed};

#[derive(Parser)]
struct Args {
    /// Rounds per tokenizer (each times every method once).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Only these fixtures (comma-separated names; default: every fixture present).
    #[arg(long)]
    only: Option<String>,
}

const METHODS: [&str; 3] = ["HF from_file", "lopt (seed sync)", "lopt (seed off)"];

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    println!(
        "| tokenizer | engine | HF from_file (s) | lopt, seed sync (s) | lopt, seed off (s) | sync / HF | off / HF |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, path) in lopt_tests::available_fixtures() {
        if args.only.as_ref().is_some_and(|only| !only.split(',').any(|n| n == name)) {
            continue;
        }
        let mut times: [Vec<f64>; 3] = Default::default();
        let mut engine = "";
        for round in 0..args.rounds {
            for k in 0..METHODS.len() {
                let method = (round + k) % METHODS.len();
                let seconds = match method {
                    0 => {
                        let (hf, t) = timed(|| lopt::hf::Tokenizer::from_file(&path));
                        hf.map_err(|e| anyhow::anyhow!("{e}")).with_context(|| format!("HF loads {name}"))?;
                        t
                    }
                    _ => {
                        let seed = if method == 1 { SeedCache::Sync } else { SeedCache::Off };
                        let (tokenizer, t) = timed(|| TokenizerBuilder::new().seed_cache(seed).build_from_file(&path));
                        engine = tokenizer.with_context(|| format!("lopt loads {name}"))?.engine_name();
                        t
                    }
                };
                times[method].push(seconds.as_secs_f64());
            }
        }
        let [hf, sync, off] = times.map(|mut t| median(&mut t));
        println!("| {name} | {engine} | {hf:.3} | {sync:.3} | {off:.3} | {:.2} | {:.2} |", sync / hf, off / hf);
    }
    Ok(())
}
