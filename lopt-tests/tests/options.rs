//! Per-call settings (`encode_with`, `encode_batch_with`) against HF `tokenizers` with the same
//! truncation and padding set on the tokenizer, for short texts (encoded on the calling thread),
//! long texts (cut and encoded on the pool) and batches mixing both.

use lopt::hf::{
    PaddingDirection, PaddingParams, PaddingStrategy, TruncationDirection, TruncationParams, TruncationStrategy,
};
use lopt::{EncodeOptions, Tokenizer, TokenizerBuilder};
use lopt_tests::fixture;

fn texts() -> Vec<String> {
    let mut texts: Vec<String> = lopt_tests::corpus_samples(1, 3000).into_iter().map(|s| s.text).collect();
    texts.extend(lopt_tests::TRAPS.iter().take(12).map(|t| t.to_string()));
    texts.push(String::new());
    texts.push(lopt_tests::generated_text(7, 24_000));
    texts
}

fn option_sets(pad_token: &str, pad_id: u32) -> Vec<EncodeOptions> {
    let truncations = [
        None,
        Some(TruncationParams { max_length: 128, ..Default::default() }),
        Some(TruncationParams {
            max_length: 100,
            stride: 16,
            direction: TruncationDirection::Left,
            strategy: TruncationStrategy::LongestFirst,
        }),
        Some(TruncationParams { max_length: 5, strategy: TruncationStrategy::OnlyFirst, ..Default::default() }),
        Some(TruncationParams { max_length: 2, ..Default::default() }),
    ];
    let paddings = [
        None,
        Some(PaddingParams { pad_token: pad_token.into(), pad_id, ..Default::default() }),
        Some(PaddingParams {
            strategy: PaddingStrategy::Fixed(150),
            direction: PaddingDirection::Left,
            pad_to_multiple_of: Some(8),
            pad_id,
            pad_type_id: 1,
            pad_token: pad_token.into(),
        }),
    ];
    let mut sets = Vec::new();
    for truncation in &truncations {
        for padding in &paddings {
            for add in [true, false] {
                sets.push(
                    EncodeOptions::new()
                        .add_special_tokens(add)
                        .truncation(truncation.clone())
                        .padding(padding.clone()),
                );
            }
        }
    }
    sets
}

/// The tokenizers each option test runs: one thread, two, and three threads cutting every 97
/// bytes of any text whose threads linger after each parallel call (the tokens must not change).
fn thread_settings(path: &std::path::Path) -> [Tokenizer; 3] {
    [
        TokenizerBuilder::new().threads(1).build_from_file(path).unwrap(),
        TokenizerBuilder::new().threads(2).build_from_file(path).unwrap(),
        TokenizerBuilder::new()
            .threads(3)
            .chunk_size(97)
            .min_parallel_bytes(0)
            .linger(std::time::Duration::from_millis(1))
            .build_from_file(path)
            .unwrap(),
    ]
}

fn reference(tokenizer: &Tokenizer, options: &EncodeOptions) -> lopt::hf::Tokenizer {
    let mut hf = tokenizer.hf().unwrap().clone();
    hf.with_truncation(options.truncation_params().cloned()).unwrap();
    hf.with_padding(options.padding_params().cloned());
    hf
}

#[test]
fn encode_with_equals_hf_with_the_same_settings() {
    let texts = texts();
    for name in ["bert-base-uncased", "qwen3", "llama3_1"] {
        let Some(path) = fixture(name) else {
            eprintln!("NOTICE: fixture {name} absent; test skipped");
            continue;
        };
        // One thread too: the template's opening tokens are written in front of the text's ids
        // up front there as well (`engine::out::Columns::headed`).
        let tokenizers = thread_settings(&path);
        for options in option_sets("<pad>", 0) {
            // HF's answers, once for every thread setting.
            let hf = reference(&tokenizers[0], &options);
            let add = options.add_special_tokens_enabled();
            let singles: Vec<lopt::Encoding> =
                texts.iter().map(|text| lopt::Encoding::from(hf.encode(text.as_str(), add).unwrap())).collect();
            let batch: Vec<lopt::Encoding> = hf
                .encode_batch(texts.iter().map(String::as_str).collect(), add)
                .unwrap()
                .into_iter()
                .map(lopt::Encoding::from)
                .collect();
            for tokenizer in &tokenizers {
                for (text, want) in texts.iter().zip(&singles) {
                    let got = tokenizer.encode_with(text, &options).unwrap();
                    assert!(
                        &got == want,
                        "{name} {options:?} on {:?}: {:?}",
                        lopt_tests::truncate(text, 80),
                        got.first_difference(want)
                    );
                }
                let got = tokenizer.encode_batch_with(&texts, &options).unwrap();
                assert_eq!(got.len(), batch.len());
                for (i, (g, w)) in got.iter().zip(&batch).enumerate() {
                    assert!(g == w, "{name} {options:?} batch text {i}: {:?}", g.first_difference(w));
                }
            }
        }
    }
}

/// Ids-only mode (`encode_ids`, `encode_batch_ids`) gives HF's `get_ids()` for every fixture,
/// thread and chunk setting and option set, single and batch, with and without special tokens.
#[test]
fn encode_ids_equals_hf_ids() {
    let texts = texts();
    for (name, path) in lopt_tests::available_fixtures() {
        // One thread too: the template's opening tokens are written in front of the text's ids
        // up front there as well (`engine::out::Columns::headed`).
        let tokenizers = thread_settings(&path);
        // Truncating calls finish a full encoding (the test above covers them all): one of them
        // here, with every padding setting, the file's own settings and special tokens on and off.
        let mut sets: Vec<EncodeOptions> = option_sets("<pad>", 7)
            .into_iter()
            .filter(|o| o.truncation_params().is_none_or(|t| t.max_length == 100 && o.padding_params().is_none()))
            .collect();
        sets.push(tokenizers[0].options().clone());
        for options in &sets {
            // HF's answers, once for every thread setting.
            let hf = reference(&tokenizers[0], options);
            let add = options.add_special_tokens_enabled();
            let singles: Vec<Vec<u32>> =
                texts.iter().map(|text| hf.encode(text.as_str(), add).unwrap().get_ids().to_vec()).collect();
            let batch: Vec<Vec<u32>> = hf
                .encode_batch(texts.iter().map(String::as_str).collect(), add)
                .unwrap()
                .iter()
                .map(|e| e.get_ids().to_vec())
                .collect();
            for tokenizer in &tokenizers {
                for (text, want) in texts.iter().zip(&singles) {
                    let got = tokenizer.encode_ids(text, options).unwrap();
                    assert!(&got == want, "{name} {options:?} on {:?}", lopt_tests::truncate(text, 80));
                }
                let got = tokenizer.encode_batch_ids(&texts, options).unwrap();
                assert!(got == batch, "{name} {options:?} batch");
            }
        }
    }
}

/// `template_columns` (what an ids-first result answers for `type_ids` and
/// `special_tokens_mask`) equals HF's columns whenever it answers, for every fixture and option
/// set; it answers for every call without truncation or padding that `encodes_ids_only`.
#[test]
fn template_columns_equal_hf_columns() {
    let texts = texts();
    for (name, path) in lopt_tests::available_fixtures() {
        let tokenizer = TokenizerBuilder::new().threads(2).build_from_file(&path).unwrap();
        let mut sets = option_sets("<pad>", 7);
        sets.push(tokenizer.options().clone());
        let mut answered = 0;
        for options in &sets {
            let plain = options.truncation_params().is_none() && options.padding_params().is_none();
            if !plain {
                assert!(tokenizer.template_columns(options, 10).is_none(), "{name} {options:?}: answered");
                continue;
            }
            let hf = reference(&tokenizer, options);
            for text in &texts {
                let want = hf.encode(text.as_str(), options.add_special_tokens_enabled()).unwrap();
                match tokenizer.template_columns(options, want.len()) {
                    Some((type_ids, special)) => {
                        assert_eq!(type_ids, want.get_type_ids(), "{name} {options:?} type ids");
                        assert_eq!(special, want.get_special_tokens_mask(), "{name} {options:?} mask");
                        answered += 1;
                    }
                    None => assert!(
                        !tokenizer.encodes_ids_only(options),
                        "{name} {options:?}: no answer for an ids-only call"
                    ),
                }
            }
        }
        eprintln!("{name}: template columns answered {answered} calls");
    }
}

/// `encode` uses the tokenizer.json's own settings; `options()` returns them.
#[test]
fn options_are_the_files_settings() {
    let Some(path) = fixture("bert-base-uncased") else { return };
    let tokenizer = TokenizerBuilder::new().build_from_file(&path).unwrap();
    let options = tokenizer.options();
    assert_eq!(
        options.truncation_params().map(|t| t.max_length),
        tokenizer.hf().unwrap().get_truncation().map(|t| t.max_length)
    );
    assert_eq!(options.padding_params().is_some(), tokenizer.hf().unwrap().get_padding().is_some());
}

/// Settings that make HF panic (a stride as long as the room left after special tokens, a
/// padding length that cannot be allocated) are refused with an error.
#[test]
fn settings_hf_panics_on_are_errors() {
    let Some(path) = fixture("bert-base-uncased") else { return };
    let tokenizer = TokenizerBuilder::new().threads(2).build_from_file(&path).unwrap();
    let text = "a few words that are longer than the limit ".repeat(10);
    let stride =
        EncodeOptions::new().truncation(Some(TruncationParams { max_length: 10, stride: 9, ..Default::default() }));
    assert_eq!(tokenizer.encode_with(&text, &stride).unwrap_err().kind(), lopt::ErrorKind::InvalidConfig);
    let huge = EncodeOptions::new()
        .padding(Some(PaddingParams { strategy: PaddingStrategy::Fixed(1_000_000_000_000), ..Default::default() }));
    assert_eq!(tokenizer.encode_with(&text, &huge).unwrap_err().kind(), lopt::ErrorKind::InvalidConfig);
    let too_short = EncodeOptions::new().truncation(Some(TruncationParams { max_length: 1, ..Default::default() }));
    assert!(tokenizer.encode_with(&text, &too_short).is_err());
}

/// Texts where added tokens sit next to the truncation limit: the tokenizer's own added tokens
/// (special or not, the first and last few by id) between short words and whitespace, at the
/// start, the end and in runs.
fn added_token_texts(tokenizer: &Tokenizer) -> Vec<String> {
    let mut added: Vec<(u32, String)> =
        tokenizer.hf().unwrap().get_added_tokens_decoder().into_iter().map(|(id, token)| (id, token.content)).collect();
    added.sort();
    added.retain(|(_, content)| !content.is_empty());
    let mut picked: Vec<&str> =
        added.iter().take(4).chain(added.iter().rev().take(4)).map(|(_, c)| c.as_str()).collect();
    picked.dedup();
    let mut texts = vec!["line\nbreaks\r\n\r\nand\ttabs\t".to_string()];
    for (i, token) in picked.iter().enumerate() {
        let next = picked[(i + 1) % picked.len()];
        texts.push(format!("{token}{token} ab{i} cd{token}ef, gh {next}\n\tij{token}"));
    }
    let all: String = picked.iter().enumerate().map(|(i, t)| format!("{t}w{i} {t}")).collect();
    texts.push(format!("{all} tail words here"));
    texts.push(format!("lead words here {all}"));
    texts
}

/// HF's truncating model loop (`tokenize_with_limit`) stops only after a split the model
/// tokenized; added-token splits are counted but never stop it. Sweep the limit, stride and
/// direction over texts dense with added tokens, for every fixture, with native and HF engines,
/// whole and cut into tiny chunks; the overflow is compared too.
#[test]
fn truncation_next_to_added_tokens_equals_hf() {
    for (name, path) in lopt_tests::available_fixtures() {
        let tokenizers = [
            TokenizerBuilder::new().threads(2).build_from_file(&path).unwrap(),
            TokenizerBuilder::new().threads(2).chunk_size(16).min_parallel_bytes(0).build_from_file(&path).unwrap(),
            TokenizerBuilder::new()
                .engine(lopt::EngineKind::Hf)
                .threads(2)
                .chunk_size(16)
                .min_parallel_bytes(0)
                .build_from_file(&path)
                .unwrap(),
        ];
        let texts = added_token_texts(&tokenizers[0]);
        let mut hf = tokenizers[0].hf().unwrap().clone();
        let specials = hf.get_post_processor().map_or(0, |p| lopt::hf::PostProcessor::added_tokens(p, false));
        for direction in [TruncationDirection::Right, TruncationDirection::Left] {
            for max_length in [1, 2, 3, 4, 5, 6, 7, 9, 12, 20] {
                for stride in [0, 1, 3] {
                    // HF refuses (or panics on) a stride that leaves no room after the special tokens.
                    if max_length <= specials + stride {
                        continue;
                    }
                    let truncation = TruncationParams { max_length, stride, direction, ..Default::default() };
                    hf.with_truncation(Some(truncation.clone())).unwrap();
                    for add in [true, false] {
                        let options = EncodeOptions::new().add_special_tokens(add).truncation(Some(truncation.clone()));
                        for text in &texts {
                            let want = lopt::Encoding::from(hf.encode(text.as_str(), add).unwrap());
                            for tokenizer in &tokenizers {
                                let got = tokenizer.encode_with(text, &options).unwrap();
                                assert!(
                                    got == want,
                                    "{name} ({}) {options:?} on {text:?}: {:?}",
                                    tokenizer.engine_name(),
                                    got.first_difference(&want)
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
