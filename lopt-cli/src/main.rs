//! `lopt`: lossless parallel tokenization from the shell.
//!
//! One module per subcommand (`encode`, `verify`, `info`, `bench`, and the hidden `demo` and
//! `sample` used by `make demo` and the tests); `args` holds the flags they share, `source` loads
//! the tokenizer (a `tokenizer.json` or the built-in `cl100k` default), `input` reads texts and
//! JSONL documents, `report` prints to stderr.
//!
//! Exit codes: 0 success, 1 `verify` found a difference, 2 any error (bad flags, unreadable or
//! malformed input, bad tokenizer). Every error is one line on stderr, `lopt: error: ...`; nothing
//! on a user's input path panics.

mod alloc;
mod args;
mod bench;
mod cl100k;
mod demo;
mod encode;
mod info;
mod input;
mod output;
mod report;
mod sample;
mod source;
mod verify;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

/// Exit status of a `verify` that found a difference.
const EXIT_DIFFERENT: u8 = 1;
/// Exit status of every error.
const EXIT_ERROR: u8 = 2;

fn main() -> ExitCode {
    alloc::keep_freed_memory();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(&err),
    };
    // The library turns the panics of HF `tokenizers` on hostile files into errors, but the
    // default hook would print each one (with a backtrace) before it is caught; a panic that
    // escapes anyway is reported below as one line too.
    std::panic::set_hook(Box::new(|_| {}));
    let run = std::panic::catch_unwind(|| match cli.command {
        Command::Encode(args) => encode::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Verify(args) => verify::run(&args),
        Command::Info(args) => info::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Bench(args) => bench::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Demo(args) => demo::run(&args),
        Command::Sample(args) => sample::run(&args).map(|()| ExitCode::SUCCESS),
    });
    let result = run.unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(anyhow::anyhow!("internal error: {}", report::one_line(&message)))
    });
    match result {
        Ok(code) => code,
        // A reader that went away (`lopt encode ... | head`) is not an error of ours.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            report::error(&format!("{err:#}"));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Prints clap's verdict: help and version as clap renders them, usage errors as one line.
fn usage_error(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            ExitCode::SUCCESS
        }
        // `lopt` alone: the help is more useful than a one-line complaint.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            ExitCode::from(EXIT_ERROR)
        }
        _ => {
            report::error(&usage_message(&err.render().to_string()));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Folds clap's multi-line usage error (`error: ...`, details such as the missing arguments or
/// the possible values, `tip:`s, the usage, a pointer to `--help`) into one line.
fn usage_message(rendered: &str) -> String {
    let mut message = String::new();
    let lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
    for line in lines.take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information")) {
        if let Some(tip) = line.strip_prefix("tip:") {
            message.push_str("; ");
            message.push_str(tip.trim());
        } else {
            if !message.is_empty() {
                message.push(' ');
            }
            message.push_str(line.strip_prefix("error:").unwrap_or(line).trim());
        }
    }
    if message.is_empty() {
        message.push_str("invalid arguments");
    }
    message.push_str(" (see 'lopt --help')");
    message
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|cause| cause.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_fold_into_one_line_with_their_tips() {
        let rendered = "error: unexpected argument '--thread' found\n\n  tip: a similar argument exists: \
                        '--threads'\n\nUsage: lopt encode --threads <N> [FILE]\n\nFor more information, try \
                        '--help'.\n";
        assert_eq!(
            usage_message(rendered),
            "unexpected argument '--thread' found; a similar argument exists: '--threads' (see 'lopt --help')"
        );
    }

    #[test]
    fn usage_errors_keep_their_details() {
        let rendered = "error: the following required arguments were not provided:\n  <FILE.jsonl>\n\nUsage: lopt \
                        bench <FILE.jsonl>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_message(rendered),
            "the following required arguments were not provided: <FILE.jsonl> (see 'lopt --help')"
        );
        assert_eq!(usage_message(""), "invalid arguments (see 'lopt --help')");
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
