//! Differential tests: lopt's `encode` against HF `tokenizers`' sequential `encode`, all fields,
//! over every fixture tokenizer, samples of every corpus, thread counts 1, 2, 3 and 8, default
//! chunking and forced tiny chunks and overlaps, with and without special tokens.

use lopt::{Encoding, Tokenizer, TokenizerBuilder};
use lopt_tests::{available_fixtures, corpus_samples, generated_text, Sample};

/// The settings every text is encoded with: (threads, chunk size, overlap).
const SETTINGS: &[(usize, Option<usize>, usize)] = &[
    (1, None, 4096),
    (2, None, 4096),
    (3, None, 4096),
    (8, None, 4096),
    (2, Some(4096), 64),
    (3, Some(97), 16),
    (8, Some(7), 0),
];

fn build(path: &std::path::Path, threads: usize, chunk: Option<usize>, overlap: usize) -> Tokenizer {
    let mut builder = TokenizerBuilder::new().threads(threads).overlap(overlap).min_parallel_bytes(0);
    if let Some(chunk) = chunk {
        builder = builder.chunk_size(chunk);
    }
    builder.build_from_file(path).unwrap()
}

fn assert_same(what: &str, got: &Encoding, want: &Encoding, text: &str) {
    if let Some(diff) = got.first_difference(want) {
        let i = diff.index;
        let lo = i.saturating_sub(3);
        panic!(
            "{what}: {diff}\n got ids {:?} offsets {:?}\nwant ids {:?} offsets {:?}\ntext near: {:?}",
            &got.ids()[lo.min(got.len())..(i + 3).min(got.len())],
            &got.offsets()[lo.min(got.len())..(i + 3).min(got.len())],
            &want.ids()[lo.min(want.len())..(i + 3).min(want.len())],
            &want.offsets()[lo.min(want.len())..(i + 3).min(want.len())],
            want.offsets().get(i).map(|&(s, _)| lopt_tests::truncate(&text[s.saturating_sub(20)..], 60)),
        );
    }
}

fn check_all(samples: &[Sample]) {
    for (name, path) in available_fixtures() {
        let tokenizers: Vec<_> = SETTINGS.iter().map(|&(t, c, o)| ((t, c, o), build(&path, t, c, o))).collect();
        let reference = &tokenizers[0].1;
        let mut cut_total = 0;
        for sample in samples {
            cut_total +=
                tokenizers.iter().map(|(_, tokenizer)| tokenizer.cut_points(&sample.text).len()).sum::<usize>();
            for add_special in [true, false] {
                let want = reference.encode_sequential(&sample.text, add_special).unwrap();
                for (setting, tokenizer) in &tokenizers {
                    let got = tokenizer.encode(&sample.text, add_special).unwrap();
                    assert_same(
                        &format!("{name} {} {setting:?} special={add_special}", sample.name),
                        &got,
                        &want,
                        &sample.text,
                    );
                }
            }
        }
        eprintln!("{name}: {} samples identical under {} settings ({cut_total} cuts)", samples.len(), SETTINGS.len());
    }
}

#[test]
fn corpora_match_hf() {
    check_all(&corpus_samples(4, 64 * 1024));
}

#[test]
fn generated_texts_match_hf() {
    let samples: Vec<Sample> =
        (0..6).map(|seed| Sample { name: format!("generated-{seed}"), text: generated_text(seed, 20_000) }).collect();
    check_all(&samples);
}

#[test]
fn batch_matches_single() {
    let samples = corpus_samples(2, 16 * 1024);
    let texts: Vec<&str> = samples.iter().map(|s| s.text.as_str()).chain(["", "a", " "]).collect();
    for (name, path) in available_fixtures() {
        let tokenizer = build(&path, 3, Some(1000), 64);
        let batch = tokenizer.encode_batch(&texts, true).unwrap();
        for (text, got) in texts.iter().zip(&batch) {
            assert_same(&format!("{name} batch"), got, &tokenizer.encode_sequential(text, true).unwrap(), text);
        }
    }
}

#[test]
fn empty_and_tiny_texts() {
    for (name, path) in available_fixtures() {
        let tokenizer = build(&path, 2, Some(1), 0);
        for text in ["", " ", "a", "ab", "a b", "\n", "中", "😀", "[CLS]"] {
            let want = tokenizer.encode_sequential(text, true).unwrap();
            assert_same(&format!("{name} {text:?}"), &tokenizer.encode(text, true).unwrap(), &want, text);
        }
    }
}
