//! End-to-end tests of the `lopt` binary: bad input gives one line and exit 2 (never a panic),
//! JSONL ids are carried over, every setting gives the same bytes, and `verify` passes on long
//! generated text with the built-in default and with the fixture tokenizers that are present
//! (absent ones are skipped with a printed notice).
//!
//! The built-in tokenizer's cache goes to a folder under Cargo's test tmpdir, never `~/.cache`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A tokenizer no native engine supports and whose split pattern has no argued cut rule: lopt
/// encodes it sequentially with the HF engine.
const SEQUENTIAL_TOKENIZER: &str = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
  "normalizer": null,
  "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "x"}, "behavior": "Removed", "invert": false},
  "post_processor": null, "decoder": null,
  "model": {"type": "WordLevel", "vocab": {"hello": 0, "world": 1, "[UNK]": 2}, "unk_token": "[UNK]"}}"#;

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lopt-cli-tests");
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir.join(name)
}

fn write_tmp(name: &str, content: &[u8]) -> PathBuf {
    let path = tmp(name);
    std::fs::write(&path, content).expect("write tmp file");
    path
}

/// Runs `lopt args...` with `stdin`.
fn lopt(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lopt"))
        .args(args)
        .env("XDG_CACHE_HOME", tmp("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lopt");
    // A command that fails before reading stdin closes it; that is not the test's concern.
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    child.wait_with_output().expect("wait for lopt")
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("UTF-8 output")
}

fn sample(bytes: usize, seed: u64) -> String {
    let out = lopt(&["sample", "--bytes", &bytes.to_string(), "--seed", &seed.to_string()], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).to_owned()
}

fn assert_one_line_error(out: &Output, expected: &str, what: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: exit status; stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{what}: one line expected: {stderr}");
    assert!(stderr.starts_with("lopt: error: "), "{what}: {stderr}");
    assert!(stderr.contains(expected), "{what}: {expected:?} not in {stderr}");
    assert!(out.stdout.is_empty(), "{what}: nothing on stdout expected");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let bad_json = write_tmp("bad.tokenizer.json", b"{\"model\": ");
    let not_tokenizer = write_tmp("unsupported.tokenizer.json", br#"{"model": {"type": "NoSuchModel"}}"#);
    let sequential = write_tmp("sequential.tokenizer.json", SEQUENTIAL_TOKENIZER.as_bytes());
    let empty_jsonl = write_tmp("empty.jsonl", b"\n");
    let seq = sequential.to_str().expect("path");
    let jsonl = ["encode", "--jsonl", "--tokenizer", seq];
    let cases: Vec<(Vec<&str>, &[u8], &str)> = vec![
        (vec!["encode", "/nonexistent/input.txt"], b"", "cannot read input /nonexistent/input.txt"),
        (vec!["encode", "--tokenizer", "/nonexistent/tokenizer.json"], b"", "cannot read tokenizer"),
        (vec!["encode", "--tokenizer", bad_json.to_str().expect("path")], b"", "not valid JSON"),
        (vec!["info", "--tokenizer", not_tokenizer.to_str().expect("path")], b"", "not a valid tokenizer.json"),
        (vec!["encode", "--tokenizer", seq], b"hello \xff world", "not valid UTF-8"),
        (jsonl.to_vec(), b"{\"text\": \"hello\"}\n{\"text\": \"world\"\n", "line 2: invalid JSON"),
        (jsonl.to_vec(), b"{\"text\": [\"hello\"]}\n", "line 1: \"text\" must be a string, found an array"),
        (jsonl.to_vec(), b"{\"id\": 3}\n", "line 1: missing \"text\" field"),
        (jsonl.to_vec(), b"\n\"hello\"\n", "line 2: expected a JSON object"),
        (jsonl.to_vec(), b"{\"text\": \"\xc3\"}\n", "line 1: not valid UTF-8"),
        (vec!["encode", "--threads", "0"], b"", "'--threads <N>': must be at least 1"),
        (vec!["verify", "--chunk-size", "0"], b"", "must be at least 1"),
        (vec!["encode", "--frobnicate"], b"", "unexpected argument '--frobnicate'"),
        (vec!["encode", "--engine", "fast"], b"", "possible values: auto, hf, native"),
        (vec!["encode", "--engine", "native", "--tokenizer", seq], b"", "native engine"),
        (vec!["frobnicate"], b"", "unrecognized subcommand 'frobnicate'"),
        (vec!["bench"], b"", "required arguments were not provided: <FILE.jsonl>"),
        (vec!["bench", "--tokenizer", seq, empty_jsonl.to_str().expect("path")], b"", "holds no documents"),
    ];
    for (args, stdin, expected) in cases {
        assert_one_line_error(&lopt(&args, stdin), expected, &args.join(" "));
    }
}

#[test]
fn no_subcommand_prints_help_and_exits_2() {
    let out = lopt(&[], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("Usage: lopt <COMMAND>"));
}

#[test]
fn jsonl_ids_are_carried_over_in_order() {
    let input = "{\"id\": 7, \"text\": \"hello world\"}\n\n{\"text\": \"no id here\"}\n\
                 {\"id\": \"doc-3\", \"text\": \"\", \"extra\": true}\n{\"id\": {\"nested\": [1, null]}, \"text\": \"x\"}\n";
    let out = lopt(&["encode", "--jsonl", "--offsets"], input.as_bytes());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> =
        text(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    let ids: Vec<Option<&serde_json::Value>> = lines.iter().map(|l| l.get("id")).collect();
    assert_eq!(
        ids,
        [
            Some(&serde_json::json!(7)),
            None,
            Some(&serde_json::json!("doc-3")),
            Some(&serde_json::json!({"nested": [1, null]}))
        ]
    );
    assert_eq!(lines[0]["input_ids"], serde_json::json!([15339, 1917]));
    assert_eq!(lines[0]["offsets"], serde_json::json!([[0, 5], [5, 11]]));
    assert_eq!(lines[2], serde_json::json!({"id": "doc-3", "input_ids": [], "attention_mask": [], "offsets": []}));
    // Each document as it would be encoded alone.
    let alone = lopt(&["encode", "--offsets"], b"no id here");
    let alone: serde_json::Value = serde_json::from_slice(&alone.stdout).expect("JSON");
    assert_eq!(lines[1], alone);
}

#[test]
fn empty_input_is_valid() {
    let out = lopt(&["encode"], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "{\"input_ids\":[],\"attention_mask\":[]}\n");
    match lopt_tests::fixture("llama3_1") {
        Some(path) => {
            let out = lopt(&["encode", "--tokenizer", path.to_str().expect("path")], b"");
            assert_eq!(text(&out.stdout), "{\"input_ids\":[128000],\"attention_mask\":[1]}\n", "BOS only");
        }
        None => eprintln!("NOTICE: fixture llama3_1 not found; its empty-input check is skipped"),
    }
}

#[test]
fn every_setting_gives_the_same_output() {
    let input = write_tmp("settings.txt", sample(200_000, 11).as_bytes());
    let input = input.to_str().expect("path");
    let settings: &[&[&str]] = &[
        &["--threads", "1"],
        &["--threads", "2"],
        &["--threads", "4", "--chunk-size", "5000"],
        &["--threads", "3", "--chunk-size", "777", "--overlap", "64"],
        &["--engine", "hf", "--threads", "2", "--chunk-size", "20000"],
    ];
    let outputs: Vec<Vec<u8>> = settings
        .iter()
        .map(|s| {
            let mut args = vec!["encode", "--offsets", input];
            args.extend_from_slice(s);
            let out = lopt(&args, b"");
            assert!(out.status.success(), "{s:?}: {}", text(&out.stderr));
            out.stdout
        })
        .collect();
    for (s, out) in settings.iter().zip(&outputs) {
        assert!(out == &outputs[0], "{s:?} differs from {:?}", settings[0]);
    }
    let written = tmp("settings.out.json");
    let out = lopt(&["encode", "--offsets", "-o", written.to_str().expect("path"), input], b"");
    assert!(out.status.success() && out.stdout.is_empty());
    assert_eq!(std::fs::read(&written).expect("output file"), outputs[0]);
}

#[test]
fn verify_passes_with_the_default_tokenizer() {
    let input = write_tmp("verify-default.txt", sample(300_000, 5).as_bytes());
    let out = lopt(&["verify", "--threads", "4", "--chunk-size", "8192", input.to_str().expect("path")], b"");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.starts_with("lopt: verify: identical"), "{stderr}");
    assert!(!stderr.contains(" 0 cuts"), "the text must have been cut: {stderr}");
    assert!(out.stdout.is_empty());

    let docs: String = (0..4)
        .map(|i| serde_json::json!({"id": i, "text": sample(40_000 * i as usize, i)}).to_string() + "\n")
        .collect();
    let out = lopt(&["verify", "--jsonl", "--chunk-size", "4096"], docs.as_bytes());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("4 docs"), "{}", text(&out.stderr));
}

#[test]
fn verify_passes_with_fixture_tokenizers() {
    let input = write_tmp("verify-fixtures.txt", sample(120_000, 9).as_bytes());
    for (name, path) in lopt_tests::available_fixtures() {
        let args = ["verify", "--tokenizer", path.to_str().expect("path"), "--threads", "3", "--chunk-size", "6000"];
        let out = lopt(&[&args[..], &[input.to_str().expect("path")]].concat(), b"");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        assert!(stderr.contains("identical"), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    }
}

#[test]
fn prefix_cache_reuses_across_jsonl_lines_with_the_same_output() {
    let base = sample(60_000, 3);
    let mut prompt = String::new();
    let docs: String = (0..5)
        .map(|i| {
            prompt.push_str(if i == 0 { &base } else { " and one more question about the text?\n" });
            serde_json::json!({"id": i, "text": prompt}).to_string() + "\n"
        })
        .collect();
    let plain = lopt(&["encode", "--jsonl", "--offsets", "--chunk-size", "7000"], docs.as_bytes());
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    let args = ["encode", "--jsonl", "--offsets", "--chunk-size", "7000", "--prefix-cache", "64MiB"];
    let cached = lopt(&args, docs.as_bytes());
    assert!(cached.status.success(), "{}", text(&cached.stderr));
    assert_eq!(text(&cached.stdout), text(&plain.stdout));
    let stderr = text(&cached.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("prefix cache: 4 hits, 1 misses"), "{stderr}");

    let out = lopt(&["verify", "--jsonl", "--chunk-size", "7000", "--prefix-cache", "64MiB"], docs.as_bytes());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("4 hits"), "{}", text(&out.stderr));
    let bad = lopt(&["encode", "--prefix-cache", "12 parsecs"], b"x");
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
}

#[test]
fn sequential_tokenizers_are_announced_once() {
    let path = write_tmp("sequential-note.tokenizer.json", SEQUENTIAL_TOKENIZER.as_bytes());
    let docs = "{\"text\": \"hello world\"}\n".repeat(3);
    let out = lopt(&["encode", "--jsonl", "--tokenizer", path.to_str().expect("path")], docs.as_bytes());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 3);
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("encoded sequentially"), "{stderr}");

    let info = lopt(&["info", "--tokenizer", path.to_str().expect("path")], b"");
    assert!(text(&info.stdout).contains("parallel        no: "), "{}", text(&info.stdout));
}

#[test]
fn info_shows_pipeline_engine_and_parallelism() {
    let out = lopt(&["info"], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for expected in [
        "tokenizer       built-in cl100k_base",
        "pre-tokenizer   Sequence[Split(Regex, Isolated), ByteLevel(",
        "model           BPE (100,257 vocab entries, 100,000 merges, ignore_merges)",
        "engine          ",
        "parallel        yes",
    ] {
        assert!(stdout.contains(expected), "{expected:?} not in\n{stdout}");
    }
}

#[test]
fn bench_prints_one_json_object() {
    let texts: Vec<String> = (0..3).map(|i| sample(20_000, i)).collect();
    let docs: String = texts.iter().map(|t| serde_json::json!({"text": t}).to_string() + "\n").collect();
    let path = write_tmp("bench.jsonl", docs.as_bytes());
    let out = lopt(&["bench", "--threads", "2", "--offsets", path.to_str().expect("path")], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(result["docs"], 2, "the first document is the warm-up");
    assert_eq!(result["bytes"], texts[1].len() + texts[2].len());
    assert_eq!(result["threads"], 2);
    assert!(result["tokens"].as_u64().is_some_and(|t| t > 1000));
    assert!(result["seconds"].as_f64().is_some_and(|s| s > 0.0));
    assert!(result["mb_per_s"].as_f64().is_some_and(|s| s > 0.0));
    assert!(result["engine"].is_string());
    assert!(result.get("prefix_cache").is_none());

    let out = lopt(&["bench", "--prefix-cache", "1MiB", path.to_str().expect("path")], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(result["prefix_cache"]["misses"], 3, "unrelated documents: {result}");
    assert_eq!(result["prefix_cache"]["capacity"], 1 << 20);
}

/// A word-level tokenizer with the given pieces, for the hostile-file tests.
fn hostile_tokenizer(pre_tokenizer: &str, normalizer: &str, truncation: &str, padding: &str) -> String {
    format!(
        r#"{{"version": "1.0", "truncation": {truncation}, "padding": {padding}, "added_tokens": [],
  "normalizer": {normalizer}, "pre_tokenizer": {pre_tokenizer}, "post_processor": null, "decoder": null,
  "model": {{"type": "WordLevel", "vocab": {{"a": 0, "b": 1, "[UNK]": 2}}, "unk_token": "[UNK]"}}}}"#
    )
}

/// Hostile tokenizer files (each once made HF panic or abort the process): exit 2 with a one-line
/// error last on stderr, never a panic (101) or an abort (134).
#[test]
fn hostile_tokenizers_are_one_line_errors_not_crashes() {
    let split = r#"{"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": false}"#;
    let replace = r#"{"type": "Replace", "pattern": {"Regex": "(a+)+$"}, "content": "b"}"#;
    let ws = r#"{"type": "WhitespaceSplit"}"#;
    let pad = |strategy: &str, multiple: &str| {
        format!(
            r#"{{"strategy": {strategy}, "direction": "Right", "pad_to_multiple_of": {multiple}, "pad_id": 0,
            "pad_type_id": 0, "pad_token": "a"}}"#
        )
    };
    let stride = r#"{"direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 9}"#;
    let cases = [
        ("backtracking Split", hostile_tokenizer(split, "null", "null", "null"), "failed"),
        ("backtracking Replace", hostile_tokenizer(ws, replace, "null", "null"), "failed"),
        (
            "huge Fixed padding",
            hostile_tokenizer(ws, "null", "null", &pad(r#"{"Fixed": 1000000000000}"#, "null")),
            "padding to",
        ),
        (
            "huge pad_to_multiple_of",
            hostile_tokenizer(ws, "null", "null", &pad(r#""BatchLongest""#, "1099511627776")),
            "a multiple of",
        ),
        ("stride not below max_length", hostile_tokenizer(ws, "null", stride, "null"), "stride"),
        (
            "bad regex",
            hostile_tokenizer(
                r#"{"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false}"#,
                "null",
                "null",
                "null",
            ),
            "not a valid tokenizer.json",
        ),
        ("truncated JSON", hostile_tokenizer(ws, "null", "null", "null")[..120].to_owned(), "not valid JSON"),
        ("deep nesting", format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)), "not valid JSON"),
        (
            "unknown model",
            hostile_tokenizer(ws, "null", "null", "null").replace("WordLevel", "Quantum"),
            "not a valid tokenizer.json",
        ),
    ];
    // Enough words to need truncating, then a run on which `(a+)+$` backtracks exponentially.
    let input = write_tmp("hostile-input.txt", format!("a b a b a b a b {}!", "a".repeat(5000)).as_bytes());
    for (what, json, expected) in cases {
        let path = write_tmp(&format!("hostile-{}.json", what.replace(' ', "-")), json.as_bytes());
        let out = lopt(&["encode", "--tokenizer", path.to_str().expect("path"), input.to_str().expect("path")], b"");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: exit status; stderr: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{what}: {stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(last.starts_with("lopt: error: ") && last.contains(expected), "{what}: {expected:?} not in {stderr}");
        // At most a note that the tokenizer is encoded sequentially comes before the error.
        assert!(stderr.lines().count() <= 2, "{what}: {stderr}");
        assert!(out.stdout.is_empty(), "{what}: nothing on stdout expected");
    }
}
