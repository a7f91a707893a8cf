//! `prefix`: per-turn latency of prefix reuse (`TokenizerBuilder::prefix_cache`) on serving
//! traces rendered with the fixtures' real chat templates.
//!
//! 1. *Conversation*: a long system document, then turns of 0.5-4K tokens cut from other corpus
//!    documents (user and assistant alternating) until the prompt passes `--target-tokens`; each
//!    turn encodes the whole rendered prompt (with the assistant header), as a server does.
//! 2. *RAG*: one context of about 100K tokens, then `--questions` different questions after it.
//! 3. *Miss-only*: unrelated documents, every one a miss: what the cache costs when it never helps.
//!
//! Each round builds fresh tokenizers (the cache starts empty), one per mode so that each sees
//! every prompt once, and runs the trace, timing lopt without the cache and with it on each
//! prompt back to back (alternating which goes first);
//! HF's sequential `encode` is timed on the first `--hf-rounds` rounds only (it takes ~100 times
//! longer). Reported: medians over rounds, per turn, of the full `Encoding` and of the ids-only
//! mode (`encode_ids`, its own cached tokenizer so that each sees every prompt once); the four
//! lopt measurements of a prompt run back to back in rotating order.
//!
//! ```text
//! cargo run --release -p lopt-bench --bin prefix -- --tokenizer qwen3 \
//!     --corpus ../shared/corpora/en_verylong.jsonl --rounds 10
//! ```

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Parser;
use lopt::{Tokenizer, TokenizerBuilder};
use lopt_bench::{load_docs, median};

#[derive(Parser)]
struct Args {
    /// qwen3, llama3_1, gemma3 or llama2 (selects the chat template too)
    #[arg(long, default_value = "qwen3")]
    tokenizer: String,
    #[arg(long)]
    corpus: PathBuf,
    #[arg(long, default_value_t = 2)]
    threads: usize,
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    #[arg(long, default_value_t = 2)]
    hf_rounds: usize,
    #[arg(long, default_value_t = 131_072)]
    target_tokens: usize,
    #[arg(long, default_value_t = 50)]
    questions: usize,
    /// Cache bound in MiB
    #[arg(long, default_value_t = 256)]
    cache_mib: usize,
    /// Which traces to run, comma-separated: conversation, rag, miss
    #[arg(long, default_value = "conversation,rag,miss", value_delimiter = ',')]
    traces: Vec<String>,
    /// Which lopt modes to run, comma-separated: plain, cached, plain-ids, cached-ids (one mode
    /// alone for `perf record` or `perf stat` on it)
    #[arg(long, default_value = "plain,cached,plain-ids,cached-ids", value_delimiter = ',')]
    modes: Vec<String>,
    /// Time each call by the process's CPU time (all threads) instead of the wall clock: less
    /// sensitive to other processes on a shared machine (pool threads spinning while they wait
    /// count too)
    #[arg(long)]
    cpu: bool,
}

/// Which of the four lopt modes (plain, cached, plain-ids, cached-ids) a run times.
const MODES: [&str; 4] = ["plain", "cached", "plain-ids", "cached-ids"];

/// A chat template: renders messages `(role, body)` (roles `system`, `user`, `assistant`) into a
/// prompt that ends where the model's reply starts, as the fixture's own Jinja template does.
struct Template {
    render: fn(&[(&str, &str)]) -> String,
}

fn template(name: &str) -> anyhow::Result<Template> {
    Ok(match name {
        "qwen3" => Template {
            render: |messages| {
                let mut out = String::new();
                for (role, body) in messages {
                    out.push_str(&format!("<|im_start|>{role}\n{body}<|im_end|>\n"));
                }
                out + "<|im_start|>assistant\n"
            },
        },
        "llama3_1" => Template {
            render: |messages| {
                let mut out = String::new();
                for (role, body) in messages {
                    out.push_str(&format!("<|start_header_id|>{role}<|end_header_id|>\n\n{body}<|eot_id|>"));
                }
                out + "<|start_header_id|>assistant<|end_header_id|>\n\n"
            },
        },
        // Gemma 3 has no system role: its template puts the system text at the start of the first
        // user turn; the assistant is `model`. `<bos>` comes from the post-processor.
        "gemma3" => Template {
            render: |messages| {
                let mut out = String::new();
                let mut system: Option<&str> = None;
                for &(role, body) in messages {
                    match role {
                        "system" => system = Some(body),
                        "user" => {
                            out.push_str("<start_of_turn>user\n");
                            if let Some(system) = system.take() {
                                out.push_str(system);
                                out.push_str("\n\n");
                            }
                            out.push_str(body);
                            out.push_str("<end_of_turn>\n");
                        }
                        _ => out.push_str(&format!("<start_of_turn>model\n{body}<end_of_turn>\n")),
                    }
                }
                out + "<start_of_turn>model\n"
            },
        },
        // Llama 2: `[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] ...`,
        // the prompt ending with `[/INST]`; the first `<s>` comes from the post-processor.
        "llama2" => Template {
            render: |messages| {
                let mut out = String::new();
                let mut system: Option<&str> = None;
                for &(role, body) in messages {
                    match role {
                        "system" => system = Some(body),
                        "user" => {
                            if !out.is_empty() {
                                out.push_str("<s>");
                            }
                            out.push_str("[INST] ");
                            if let Some(system) = system.take() {
                                out.push_str(&format!("<<SYS>>\n{system}\n<</SYS>>\n\n"));
                            }
                            out.push_str(body);
                            out.push_str(" [/INST]");
                        }
                        _ => out.push_str(&format!(" {body} </s>")),
                    }
                }
                out
            },
        },
        other => bail!("no chat template for {other} (qwen3, llama3_1, gemma3 or llama2)"),
    })
}

fn render(t: &Template, messages: &[(&str, &str)]) -> String {
    (t.render)(messages)
}

/// `text` cut to at most `bytes` at a char boundary.
fn cut(text: &str, bytes: usize) -> &str {
    lopt_tests::truncate(text, bytes)
}

/// Runs `f`, returning its value and the seconds it took: wall-clock, or with `cpu` the CPU time
/// of the whole process (`CLOCK_PROCESS_CPUTIME_ID`).
fn seconds<T>(cpu: bool, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<(T, f64)> {
    if cpu {
        let start = process_cpu();
        let value = f()?;
        return Ok((value, process_cpu() - start));
    }
    let start = Instant::now();
    let value = f()?;
    Ok((value, start.elapsed().as_secs_f64()))
}

/// CPU seconds used by this process so far, all threads.
fn process_cpu() -> f64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable timespec; the clock id is a constant Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    if rc != 0 {
        return 0.0;
    }
    now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9
}

struct Timings {
    hf: Vec<Vec<f64>>,
    plain: Vec<Vec<f64>>,
    cached: Vec<Vec<f64>>,
    plain_ids: Vec<Vec<f64>>,
    cached_ids: Vec<Vec<f64>>,
    tokens: Vec<usize>,
    stats: Option<lopt::PrefixCacheStats>,
}

fn run_trace(args: &Args, path: &PathBuf, prompts: &[String]) -> anyhow::Result<Timings> {
    let n = prompts.len();
    let mut t = Timings {
        hf: vec![Vec::new(); n],
        plain: vec![Vec::new(); n],
        cached: vec![Vec::new(); n],
        plain_ids: vec![Vec::new(); n],
        cached_ids: vec![Vec::new(); n],
        tokens: vec![0; n],
        stats: None,
    };
    for round in 0..args.rounds {
        let build = |cache: usize| -> anyhow::Result<Tokenizer> {
            Ok(TokenizerBuilder::new().threads(args.threads).prefix_cache(cache).build_from_file(path)?)
        };
        // One tokenizer per mode, so that each encodes every prompt once: a second encode of a
        // text through the same tokenizer finds its words in the engine's pre-token cache.
        let plain = build(0)?;
        // A mode left out gets no tokenizer of its own (loading one costs more than a trace).
        let wanted = |mode: &str| args.modes.iter().any(|m| m == mode);
        let own = |mode: &str, cache: usize| -> anyhow::Result<Option<Tokenizer>> {
            wanted(mode).then(|| build(cache)).transpose()
        };
        let (plain_ids, cached, cached_ids) =
            (own("plain-ids", 0)?, own("cached", args.cache_mib << 20)?, own("cached-ids", args.cache_mib << 20)?);
        let (plain_ids, cached, cached_ids) = (
            plain_ids.as_ref().unwrap_or(&plain),
            cached.as_ref().unwrap_or(&plain),
            cached_ids.as_ref().unwrap_or(&plain),
        );
        let options = plain.options().clone();
        let warm = "warm up ".repeat(4096);
        plain.encode(&warm, true)?;
        plain_ids.encode_ids(&warm, &options)?;
        cached.encode(&warm, true)?;
        cached_ids.encode_ids(&warm, &options)?;
        let cpu = args.cpu;
        for (i, prompt) in prompts.iter().enumerate() {
            let mut want: Option<Vec<u32>> = None;
            for k in 0..4 {
                let mode = (round + i + k) % 4;
                if !args.modes.iter().any(|m| m == MODES[mode]) {
                    continue;
                }
                match mode {
                    0 => {
                        let (e, s) = seconds(cpu, || Ok(std::hint::black_box(plain.encode(prompt, true)?)))?;
                        t.tokens[i] = e.len();
                        t.plain[i].push(s);
                    }
                    1 => {
                        let (e, s) = seconds(cpu, || Ok(std::hint::black_box(cached.encode(prompt, true)?)))?;
                        t.cached[i].push(s);
                        check(&mut want, e.ids(), round, i)?;
                    }
                    2 => {
                        let (ids, s) =
                            seconds(cpu, || Ok(std::hint::black_box(plain_ids.encode_ids(prompt, &options)?)))?;
                        t.plain_ids[i].push(s);
                        check(&mut want, &ids, round, i)?;
                    }
                    _ => {
                        let (ids, s) =
                            seconds(cpu, || Ok(std::hint::black_box(cached_ids.encode_ids(prompt, &options)?)))?;
                        t.cached_ids[i].push(s);
                        check(&mut want, &ids, round, i)?;
                    }
                }
            }
            if round < args.hf_rounds {
                let hf = plain.hf()?;
                let (_, s) = seconds(cpu, || Ok(std::hint::black_box(hf.encode(prompt.as_str(), true))))?;
                t.hf[i].push(s);
            }
        }
        t.stats = cached.prefix_cache_stats().or_else(|| cached_ids.prefix_cache_stats());
    }
    Ok(t)
}

/// On the first round, checks that every lopt mode gives the same ids for prompt `i`.
fn check(want: &mut Option<Vec<u32>>, ids: &[u32], round: usize, i: usize) -> anyhow::Result<()> {
    if round > 0 {
        return Ok(());
    }
    match want {
        Some(want) if want.as_slice() != ids => bail!("lopt modes give different ids on prompt {i}"),
        Some(_) => {}
        None => *want = Some(ids.to_vec()),
    }
    Ok(())
}

fn ms(values: &[f64]) -> String {
    if values.is_empty() {
        return "-".into();
    }
    format!("{:.3}", median(&mut values.to_vec()) * 1e3)
}

fn report(title: &str, t: &Timings, rows: &[usize]) {
    println!("\n### {title}\n");
    println!(
        "| prompt | tokens | HF (ms) | lopt, no cache (ms) | lopt, cache (ms) | no cache / cache | ids-only, no \
         cache (ms) | ids-only, cache (ms) | no cache / cache |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &i in rows {
        let plain = median(&mut t.plain[i].clone());
        let cached = median(&mut t.cached[i].clone());
        let plain_ids = median(&mut t.plain_ids[i].clone());
        let cached_ids = median(&mut t.cached_ids[i].clone());
        println!(
            "| {} | {} | {} | {} | {} | {:.1}x | {} | {} | {:.1}x |",
            i + 1,
            t.tokens[i],
            ms(&t.hf[i]),
            ms(&t.plain[i]),
            ms(&t.cached[i]),
            plain / cached,
            ms(&t.plain_ids[i]),
            ms(&t.cached_ids[i]),
            plain_ids / cached_ids
        );
    }
    // Medians over all prompts but the first (the first is always a miss).
    let all = |v: &[Vec<f64>]| -> f64 {
        let mut per: Vec<f64> = v.iter().skip(1).filter(|x| !x.is_empty()).map(|x| median(&mut x.clone())).collect();
        median(&mut per)
    };
    println!(
        "\nmedian over prompts 2..{}: no cache {:.3} ms, cache {:.3} ms ({:.1}x); ids-only: no cache {:.3} ms, \
         cache {:.3} ms ({:.1}x); cache: {:?}",
        t.plain.len(),
        all(&t.plain) * 1e3,
        all(&t.cached) * 1e3,
        all(&t.plain) / all(&t.cached),
        all(&t.plain_ids) * 1e3,
        all(&t.cached_ids) * 1e3,
        all(&t.plain_ids) / all(&t.cached_ids),
        t.stats
    );
}

fn main() -> anyhow::Result<()> {
    lopt_bench::keep_freed_memory();
    let args = Args::parse();
    let path = lopt_tests::fixture(&args.tokenizer).with_context(|| format!("no fixture {}", args.tokenizer))?;
    let t = template(&args.tokenizer)?;
    let docs = load_docs(&args.corpus, 64, usize::MAX)?;
    if docs.len() < 3 {
        bail!("need at least 3 documents in {}", args.corpus.display());
    }
    let sizer = TokenizerBuilder::new().threads(args.threads).build_from_file(&path)?;
    let tokens = |s: &str| sizer.encode(s, false).map(|e| e.len());

    // Conversation: a system document of ~16K tokens, then turns of 0.5-4K tokens.
    let system = cut(&docs[0], 64 * 1024);
    let mut messages: Vec<(String, String)> = vec![("system".into(), system.into())];
    let mut prompts = Vec::new();
    let (mut doc, mut offset, mut turn) = (1, 0, 0usize);
    loop {
        let want_tokens = 512 + (turn * 977) % 3584;
        let source = &docs[doc % docs.len()];
        let start = cut(source, offset).len();
        let body = cut(&source[start..], want_tokens * 4);
        offset = start + body.len();
        if offset + 64 >= source.len() {
            doc += 1;
            offset = 0;
        }
        let role = if turn % 2 == 0 { "user" } else { "assistant" };
        messages.push((role.into(), body.into()));
        turn += 1;
        let borrowed: Vec<(&str, &str)> = messages.iter().map(|(r, b)| (r.as_str(), b.as_str())).collect();
        let prompt = render(&t, &borrowed);
        let n = tokens(&prompt)?;
        prompts.push(prompt);
        if n > args.target_tokens || turn > 80 {
            break;
        }
    }
    let wants = |trace: &str| args.traces.iter().any(|t| t == trace);
    println!(
        "## prefix reuse ({}, {} threads, {} rounds, HF on {}; chat template rendered)",
        args.tokenizer, args.threads, args.rounds, args.hf_rounds
    );
    if wants("conversation") {
        conversation(&args, &path, &prompts)?;
    }
    if wants("rag") {
        rag(&args, &path, &t, &docs)?;
    }
    if wants("miss") {
        miss_only(&args, &path, &t, &docs)?;
    }
    Ok(())
}

fn conversation(args: &Args, path: &PathBuf, prompts: &[String]) -> anyhow::Result<()> {
    let conversation = run_trace(args, path, prompts)?;
    let last = prompts.len() - 1;
    let rows: Vec<usize> = [0, 1, last / 4, last / 2, 3 * last / 4, last - 1, last].into_iter().collect();
    let mut rows = rows;
    rows.dedup();
    report(
        &format!("conversation: {} turns to {} tokens", prompts.len(), conversation.tokens[last]),
        &conversation,
        &rows,
    );
    Ok(())
}

/// RAG: ~100K tokens of context, different questions.
fn rag(args: &Args, path: &PathBuf, t: &Template, docs: &[String]) -> anyhow::Result<()> {
    let mut context = String::new();
    for d in &docs[1..] {
        if context.len() > 420 * 1024 {
            break;
        }
        context.push_str(d);
        context.push_str("\n\n");
    }
    let context = cut(&context, 420 * 1024).to_owned();
    let rag: Vec<String> = (0..args.questions)
        .map(|q| {
            let question = format!("Question {q}: what does the context say about item {}? Quote it.", q * 7 + 3);
            render(t, &[("system", &context), ("user", &question)])
        })
        .collect();
    let rag_t = run_trace(args, path, &rag)?;
    let n = rag.len() - 1;
    report(
        &format!("RAG: {} questions after {} tokens of context", rag.len(), rag_t.tokens[0]),
        &rag_t,
        &[0, 1, n / 2, n],
    );
    Ok(())
}

/// Miss-only: unrelated documents.
fn miss_only(args: &Args, path: &PathBuf, t: &Template, docs: &[String]) -> anyhow::Result<()> {
    let misses: Vec<String> =
        docs.iter().skip(1).take(12).map(|d| render(t, &[("user", cut(d, 256 * 1024))])).collect();
    let miss_t = run_trace(args, path, &misses)?;
    let rows: Vec<usize> = (0..misses.len()).collect();
    report("miss-only: unrelated documents", &miss_t, &rows);
    let mut ratios: Vec<f64> = (0..misses.len())
        .map(|i| median(&mut miss_t.cached[i].clone()) / median(&mut miss_t.plain[i].clone()))
        .collect();
    println!("\nmiss-only: median cache / no cache = {:.3}", median(&mut ratios));
    let mut ratios: Vec<f64> = (0..misses.len())
        .map(|i| median(&mut miss_t.cached_ids[i].clone()) / median(&mut miss_t.plain_ids[i].clone()))
        .collect();
    println!("miss-only, ids-only: median cache / no cache = {:.3}", median(&mut ratios));
    Ok(())
}
