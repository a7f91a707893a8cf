//! `lopt demo` (hidden; `make demo`): encodes one long text with lopt and with HF's sequential
//! encode, checks that the results are identical, and prints tokens, times and the speedup.
//! Times are medians of interleaved runs after a warm-up, so both sides see the same machine.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::args::DemoArgs;
use crate::input::{char_floor, Input};
use crate::report::{group, plural};
use crate::{sample, source};

/// Encodes one text.
type EncodeFn<'a> = Box<dyn Fn(&str) -> Result<lopt::Encoding> + 'a>;

/// One way of encoding the text, with its timings.
struct Contender<'a> {
    label: String,
    encode: EncodeFn<'a>,
    times: Vec<Duration>,
    result: Option<lopt::Encoding>,
}

impl<'a> Contender<'a> {
    fn new(label: String, encode: impl Fn(&str) -> Result<lopt::Encoding> + 'a) -> Self {
        Contender { label, encode: Box::new(encode), times: Vec::new(), result: None }
    }
}

/// Runs `lopt demo`.
///
/// # Errors
/// A bad tokenizer or input, an encoding failure, stdout that cannot be written.
pub fn run(args: &DemoArgs) -> Result<ExitCode> {
    let (text, what) = match &args.input {
        Some(path) => read_input(path)?,
        None => (sample::text(0, args.bytes), "generated English-like text".to_owned()),
    };
    let loaded = source::load(&args.tokenizer)?;
    let tokenizer = &loaded.tokenizer;
    source::note_sequential(tokenizer);
    // With a native engine, lopt's speedup mixes two gains; the same cuts on the HF engine show
    // what parallel cutting alone brings.
    let hf_engine = match tokenizer.engine_name() {
        "hf" => None,
        _ => Some(source::build(&args.tokenizer, lopt::EngineKind::Hf, &loaded.json)?),
    };
    let label = |t: &lopt::Tokenizer| format!("lopt, {} engine, {} threads", t.engine_name(), t.threads());
    let mut contenders = vec![Contender::new(label(tokenizer), |t| Ok(tokenizer.encode(t, true)?))];
    if let Some(hf_engine) = &hf_engine {
        contenders.push(Contender::new(label(hf_engine), |t| Ok(hf_engine.encode(t, true)?)));
    }
    contenders.push(Contender::new("HF sequential encode".to_owned(), |t| Ok(tokenizer.encode_sequential(t, true)?)));

    let warm_up = &text[..char_floor(&text, 64 * 1024)];
    for contender in &contenders {
        (contender.encode)(warm_up)?;
    }
    for _ in 0..args.runs {
        for contender in &mut contenders {
            let start = Instant::now();
            let encoding = (contender.encode)(&text)?;
            contender.times.push(start.elapsed());
            contender.result = Some(encoding);
        }
    }

    let Some((reference, others)) = contenders.split_last_mut() else { bail!("nothing to compare") };
    let t_reference = median(&mut reference.times).as_secs_f64();
    let Some(expected) = &reference.result else { bail!("no runs") };
    let mb = text.len() as f64 / 1e6;
    let mut out = std::io::stdout().lock();
    writeln!(out, "lopt demo: {mb:.2} MB of {what}, tokenizer {}, {} tokens", loaded.name, group(expected.len()))?;
    writeln!(out, "  {:<32}{:>9}{:>9}{:>9}  identical to HF", "", "seconds", "MB/s", "speedup")?;
    let mut identical = true;
    for contender in others.iter_mut() {
        let t = median(&mut contender.times).as_secs_f64();
        let verdict = match contender.result.as_ref().map(|r| r.first_difference(expected)) {
            Some(None) => "yes".to_owned(),
            Some(Some(diff)) => format!("NO: {diff}"),
            None => "NO: no result".to_owned(),
        };
        identical &= verdict == "yes";
        writeln!(out, "  {:<32}{t:>9.3}{:>9.2}{:>8.2}x  {verdict}", contender.label, mb / t, t_reference / t)?;
    }
    writeln!(out, "  {:<32}{t_reference:>9.3}{:>9.2}{:>8.2}x  (reference)", reference.label, mb / t_reference, 1.0)?;
    writeln!(
        out,
        "  {} cut at safe points; medians of {} interleaved runs after a warm-up",
        plural(tokenizer.cut_points(&text).len() + 1, "segment"),
        args.runs
    )?;
    if !identical {
        writeln!(out, "  DIFFERENT: run `lopt verify` on this text for the context")?;
    }
    out.flush()?;
    Ok(if identical { ExitCode::SUCCESS } else { ExitCode::from(crate::EXIT_DIFFERENT) })
}

/// A plain text file, or the longest document of a `.jsonl` file.
fn read_input(path: &Path) -> Result<(String, String)> {
    let input = Input::new(Some(path));
    if path.extension().is_some_and(|e| e == "jsonl") {
        let documents = input.documents()?.read_all()?;
        let Some(longest) = documents.into_iter().max_by_key(|d| d.text.len()) else {
            bail!("input {} holds no documents", input.name())
        };
        Ok((longest.text, format!("the longest document of {} (line {})", input.name(), longest.line)))
    } else {
        Ok((input.read_text()?, input.name()))
    }
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}
