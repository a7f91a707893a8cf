//! End-to-end: `lopt-eval compare` on a small generated corpus with a small fixture tokenizer
//! (bert-base-cased or gpt2); skipped with a notice when no fixture is present. Checks the output
//! files and that the reference and lopt are exact (timings are never asserted).

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture() -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default();
    let shared = std::env::var_os("LOPT_SHARED").map(PathBuf::from).unwrap_or_else(|| root.join("../shared"));
    ["bert-base-cased", "gpt2"].into_iter().find_map(|name| {
        [shared.join("tokenizers"), root.join("fixtures/tokenizers")]
            .iter()
            .map(|d| d.join(name).join("tokenizer.json"))
            .find(|p| p.is_file())
            .map(|p| p.to_string_lossy().into_owned())
    })
}

fn generated_doc(seed: usize) -> String {
    let words = ["alpha", "beta,", "gamma.", "delta", "1,234", "naïve", "日本語", "x=y;", "  ", "\n"];
    let mut s = String::new();
    let mut state = seed as u64 * 6364136223846793005 + 1442695040888963407;
    while s.len() < 40_000 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        s.push_str(words[(state >> 33) as usize % words.len()]);
        s.push(' ');
    }
    s
}

#[test]
fn compare_runs_end_to_end() {
    let Some(tokenizer) = fixture() else {
        eprintln!("NOTICE: no bert-base-cased or gpt2 fixture tokenizer; compare_runs_end_to_end skipped");
        return;
    };
    let dir = std::env::temp_dir().join(format!("lopt-eval-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let corpus = dir.join("gen.jsonl");
    let lines: Vec<String> =
        (0..3).map(|i| serde_json::json!({ "id": i, "text": generated_doc(i) }).to_string()).collect();
    std::fs::write(&corpus, lines.join("\n") + "\n").expect("corpus");
    let out = dir.join("out");
    let status = Command::new(env!("CARGO_BIN_EXE_lopt-eval"))
        .args(["compare", "--tokenizers", &tokenizer, "--corpus"])
        .arg(&corpus)
        .args(["--threads", "2", "--pieces", "4", "--repeat", "1", "--max-bytes", "30000", "--out"])
        .arg(&out)
        .status()
        .expect("run lopt-eval");
    assert!(status.success());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).expect("results.json")).expect("json");
    let rows = json.as_array().expect("a list of rows");
    assert_eq!(rows.len(), 9, "one row per Table 1 method");
    for row in rows {
        for key in
            ["experiment", "method", "tokenizer", "corpus", "docs", "accuracy", "mean_ms", "median_ms", "threads"]
        {
            assert!(row.get(key).is_some(), "row lacks {key}: {row}");
        }
        assert_eq!(row["docs"], 3);
        let method = row["method"].as_str().unwrap_or_default();
        if ["hf", "lopt", "lopt-hf"].contains(&method) {
            assert_eq!(row["accuracy"].as_f64(), Some(1.0), "{method} must be exact");
        }
    }
    let csv = std::fs::read_to_string(out.join("results.csv")).expect("results.csv");
    assert_eq!(csv.lines().count(), 10);
    let md = std::fs::read_to_string(out.join("results.md")).expect("results.md");
    assert!(md.contains("| tokenizer | method |"));
    std::fs::remove_dir_all(&dir).ok();
}
