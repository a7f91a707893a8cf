//! Named regression tests: inputs on which a parallel tokenizer went wrong (the paper's merge
//! rule, token-id overlap merging, or an earlier version of lopt), each checked against HF.

use lopt::{Tokenizer, TokenizerBuilder};
use lopt_tests::fixture;

fn tiny_chunks(name: &str, chunk: usize, overlap: usize) -> Option<Tokenizer> {
    let Some(path) = fixture(name) else {
        eprintln!("NOTICE: fixture {name} absent; test skipped");
        return None;
    };
    Some(
        TokenizerBuilder::new()
            .threads(2)
            .chunk_size(chunk)
            .overlap(overlap)
            .min_parallel_bytes(0)
            .build_from_file(path)
            .unwrap(),
    )
}

fn assert_exact(tokenizer: &Tokenizer, text: &str) {
    for add_special in [true, false] {
        let want = tokenizer.encode_sequential(text, add_special).unwrap();
        let got = tokenizer.encode(text, add_special).unwrap();
        assert!(got == want, "differs on {text:?}: {:?}", got.first_difference(&want));
    }
}

/// The paper's Theorem 1 fails here: a WordPiece word longer than `max_input_chars_per_word` is
/// one `[UNK]` in the whole text, but chunks that each see part of it split it into pieces whose
/// positions agree. lopt never cuts inside a word.
#[test]
fn wordpiece_word_longer_than_max_chars_is_one_unk() {
    let Some(tokenizer) = tiny_chunks("bert-base-uncased", 40, 8) else { return };
    let text = format!("before {} after", "abc".repeat(50));
    assert_exact(&tokenizer, &text);
    let encoding = tokenizer.encode(&text, false).unwrap();
    assert_eq!(encoding.tokens(), ["before", "[UNK]", "after"]);
}

/// An added token cut by a short overlap: no chunk sees it whole, so position matching alone
/// would splice its pieces. lopt's cut rule refuses cuts touching an added-token occurrence.
#[test]
fn added_token_across_a_chunk_boundary() {
    let Some(tokenizer) = tiny_chunks("qwen3", 6, 0) else { return };
    let text = "hello<|im_start|>user\nhi there<|im_end|>\n<think>ok</think>";
    assert_exact(&tokenizer, text);
}

/// Repeated text longer than the overlap: merging by token-id overlap (OpenLMLab) splices at the
/// wrong copy; positions cannot be fooled.
#[test]
fn repeated_text_longer_than_overlap() {
    let Some(tokenizer) = tiny_chunks("llama3_1", 50, 10) else { return };
    let text = "the same sentence again and again. ".repeat(40);
    assert_exact(&tokenizer, &text);
}

/// `\s+(?!\S)` leaves the last space of a run for the next word, and `\s*[\r\n]+` groups blank
/// lines: a newline or space is not always a piece boundary.
#[test]
fn whitespace_runs_and_blank_lines() {
    for name in ["gptoss", "qwen3", "deepseek_v3", "gpt2"] {
        let Some(tokenizer) = tiny_chunks(name, 1, 0) else { continue };
        assert_exact(&tokenizer, "a \n  \nb .\n/c\t\t/Documentation\n        \nend   x");
    }
}

/// `\p{N}{1,3}` groups a digit run from its start: cutting inside a run shifts every group.
#[test]
fn digit_runs_are_never_cut_inside() {
    for name in ["llama3_1", "deepseek_v3", "gptoss"] {
        let Some(tokenizer) = tiny_chunks(name, 2, 0) else { continue };
        assert_exact(&tokenizer, "pi 31415926535897932384626433 and 1234567 x");
    }
}

/// BertNormalizer deletes `\x0b`/`\x0c`, joining their neighbours into one word.
#[test]
fn deleted_control_characters_join_words() {
    let Some(tokenizer) = tiny_chunks("bert-base-cased", 1, 0) else { return };
    assert_exact(&tokenizer, "ab\u{0b}cd ef\u{0c}gh ij\u{0}kl");
}

/// NFC composes a base letter with a following combining mark: never cut before the mark.
#[test]
fn nfc_composition_across_a_cut() {
    let Some(tokenizer) = tiny_chunks("qwen3", 1, 0) else { return };
    assert_exact(&tokenizer, "cafe\u{301} au lait, re\u{301}sume\u{301} e\u{301}\u{301} a\u{30a}");
}

/// Truncation and padding configured in the tokenizer.json are applied once, to the whole text,
/// including the model-level early stop of `tokenizers` 0.23 and its overflow.
#[test]
fn truncation_and_padding_as_configured() {
    let samples = lopt_tests::corpus_samples(1, 6000);
    let text: String = samples.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join("\n");
    for name in ["bert-base-uncased", "llama3_1", "qwen3"] {
        let Some(path) = fixture(name) else { continue };
        let original: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for (direction, strategy, stride, max_length) in
            [("Right", "LongestFirst", 0, 128), ("Left", "LongestFirst", 16, 100), ("Right", "OnlyFirst", 0, 3)]
        {
            let mut json = original.clone();
            json["truncation"] = serde_json::json!({
                "direction": direction, "max_length": max_length, "strategy": strategy, "stride": stride
            });
            json["padding"] = serde_json::json!({
                "strategy": {"Fixed": 160}, "direction": "Left", "pad_to_multiple_of": null,
                "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"
            });
            let bytes = serde_json::to_vec(&json).unwrap();
            let tokenizer = TokenizerBuilder::new()
                .threads(3)
                .chunk_size(97)
                .min_parallel_bytes(0)
                .build_from_bytes(&bytes)
                .unwrap();
            assert_exact(&tokenizer, &text);
        }
    }
}

/// Bad settings are errors, not panics.
#[test]
fn zero_threads_and_zero_chunk_are_config_errors() {
    let json = br#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,
        "pre_tokenizer":{"type":"WhitespaceSplit"},"post_processor":null,"decoder":null,
        "model":{"type":"WordLevel","vocab":{"[UNK]":0,"a":1},"unk_token":"[UNK]"}}"#;
    let err = TokenizerBuilder::new().threads(0).build_from_bytes(json).unwrap_err();
    assert_eq!(err.kind(), lopt::ErrorKind::InvalidConfig);
    let err = TokenizerBuilder::new().chunk_size(0).build_from_bytes(json).unwrap_err();
    assert_eq!(err.kind(), lopt::ErrorKind::InvalidConfig);
    let err = TokenizerBuilder::new().build_from_bytes(b"{not json").unwrap_err();
    assert_eq!(err.kind(), lopt::ErrorKind::InvalidTokenizer);
    let err = TokenizerBuilder::new().build_from_file("/nonexistent/tokenizer.json").unwrap_err();
    assert_eq!(err.kind(), lopt::ErrorKind::Io);
    let tokenizer = TokenizerBuilder::new().threads(2).min_parallel_bytes(0).build_from_bytes(json).unwrap();
    assert_eq!(tokenizer.encode("a b a", false).unwrap().ids(), [1, 0, 1]);
}

/// Post-processors the fixtures do not configure but real tokenizers do: ByteLevel offset
/// trimming (with and without a prefix space, before and after a template) and BertProcessing.
/// lopt applies them itself; each must equal HF's `post_process`.
#[test]
fn post_processor_variants() {
    let samples = lopt_tests::corpus_samples(1, 3000);
    let text: String = samples.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join("\n  ");
    let text = format!("  leading spaces {text} trailing  ");
    let trim = |add_prefix_space: bool| serde_json::json!({"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": true, "use_regex": true});
    let template = serde_json::json!({
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 1}},
                   {"SpecialToken": {"id": "<|endoftext|>", "type_id": 2}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [50256], "tokens": ["<|endoftext|>"]}}
    });
    let variants = [
        ("gpt2", trim(true)),
        ("gpt2", trim(false)),
        ("gpt2", serde_json::json!({"type": "Sequence", "processors": [trim(true), template.clone()]})),
        ("gpt2", serde_json::json!({"type": "Sequence", "processors": [template.clone(), trim(true)]})),
        (
            "bert-base-cased",
            serde_json::json!({"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}),
        ),
    ];
    for (name, processor) in variants {
        let Some(path) = fixture(name) else { continue };
        let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        json["post_processor"] = processor;
        let bytes = serde_json::to_vec(&json).unwrap();
        for threads in [1, 3] {
            let tokenizer = TokenizerBuilder::new()
                .threads(threads)
                .chunk_size(211)
                .min_parallel_bytes(0)
                .build_from_bytes(&bytes)
                .unwrap();
            assert_exact(&tokenizer, &text);
            assert_exact(&tokenizer, " x");
        }
    }
}

/// Found by the Python tests (issue 7): Gemma 3 with truncation (max_length 7, stride 2) on
/// "line\nbreaks\r\n\r\nand\ttabs\t" reported the overflow `[<bos>, ...]` one token short of HF's
/// (the final "\t" token, id 624, was missing), with either engine. HF's `tokenize_with_limit`
/// checks the limit only after a split the model tokenized; added-token splits (here "\t",
/// "\n") are counted but never stop it, so it keeps the next model split too. Fixed by marking
/// added-token words in `Segment::added_words` and running HF's loop in
/// `Finisher::limit_like_model`; `options::truncation_next_to_added_tokens_equals_hf` sweeps it.
#[test]
fn gemma3_truncation_overflow_keeps_the_last_token() {
    let Some(path) = fixture("gemma3") else {
        eprintln!("NOTICE: fixture gemma3 absent; test skipped");
        return;
    };
    let text = "line\nbreaks\r\n\r\nand\ttabs\t";
    let truncation = lopt::hf::TruncationParams { max_length: 7, stride: 2, ..Default::default() };
    let differences: Vec<String> = [lopt::EngineKind::Auto, lopt::EngineKind::Hf]
        .into_iter()
        .filter_map(|engine| {
            let tokenizer = TokenizerBuilder::new().engine(engine).threads(2).build_from_file(&path).unwrap();
            let mut hf = tokenizer.hf().unwrap().clone();
            hf.with_truncation(Some(truncation.clone())).unwrap();
            let want = lopt::Encoding::from(hf.encode(text, true).unwrap());
            let options = lopt::EncodeOptions::new().truncation(Some(truncation.clone()));
            let got = tokenizer.encode_with(text, &options).unwrap();
            (got != want).then(|| format!("{engine} ({}): {:?}", tokenizer.engine_name(), got.first_difference(&want)))
        })
        .collect();
    assert!(differences.is_empty(), "{differences:?}");
}

/// GPT-4o's vocabulary has a gap: its ids end at 199 999 but `<|endofprompt|>` is 200 018, so
/// token strings looked up in a table sized by `get_vocab_size` came out empty for it (found by
/// the truncation sweep of `options.rs`).
#[test]
fn token_string_of_an_id_past_a_vocabulary_gap() {
    let Some(tokenizer) = tiny_chunks("gpt4o", 16, 0) else { return };
    let text = "a<|endofprompt|>b <|endoftext|> c";
    assert_exact(&tokenizer, text);
    let encoding = tokenizer.encode(text, true).unwrap();
    assert!(encoding.tokens().iter().any(|t| t == "<|endofprompt|>"), "{:?}", encoding.tokens());
    let truncated = tokenizer
        .encode_with(
            text,
            &lopt::EncodeOptions::new()
                .truncation(Some(lopt::hf::TruncationParams { max_length: 3, ..Default::default() })),
        )
        .unwrap();
    assert!(truncated.tokens().iter().all(|t| !t.is_empty()), "{:?}", truncated.tokens());
}

/// GPT-4o spells the o200k split as `Split(Removed, invert: true)`: the matches are the pieces and
/// the gaps are dropped. That is `Isolated` only because the pattern's matches cover every
/// character; cut at every safe cut, the text must still tokenize as HF does, and a pattern that
/// is not covering must not be read that way (`spelling.rs`).
#[test]
fn inverted_removed_split_is_isolated_only_when_covering() {
    let Some(tokenizer) = tiny_chunks("gpt4o", 1, 0) else { return };
    assert_eq!(tokenizer.engine_name(), "bpe");
    assert!(tokenizer.equivalences().iter().any(|e| e.contains("Removed, invert: true")));
    assert_exact(&tokenizer, "It's 12345 o'clock, HelloWorld!\n\n  x\t/path\u{0}\u{7f} 中文，好。 \u{301}e");
    let json = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
      "normalizer": null,
      "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[a-z]+"}, "behavior": "Removed", "invert": true},
      "post_processor": null, "decoder": null,
      "model": {"type": "WordLevel", "vocab": {"ab": 0, "cd": 1, "[UNK]": 2}, "unk_token": "[UNK]"}}"#;
    let tokenizer = TokenizerBuilder::new().build_from_bytes(json.as_bytes()).unwrap();
    assert!(tokenizer.equivalences().is_empty());
    assert!(matches!(tokenizer.parallelism(), lopt::Parallelism::Sequential { .. }));
    assert_exact(&tokenizer, "ab, cd!! ab");
}

/// Claude normalizes with NFKC: ligatures, full-width and half-width forms, superscripts and
/// compatibility jamo change (and compose) right next to cuts; the native engine normalizes only
/// the ranges around them, cut off at safe cuts.
#[test]
fn nfkc_compatibility_characters_next_to_cuts() {
    for chunk in [1, 3, 64] {
        let Some(tokenizer) = tiny_chunks("claude", chunk, 16) else { return };
        assert_exact(
            &tokenizer,
            "\u{fb01}ne word\u{fb01}, ﬁ. Ｈｅｌｌｏ，ｗｏｒｌｄ！ abc，def。 x² H₂O ｶﾞ ㄱㅏ ½… a\u{a0}b 中文，好！<EOT>ﬁ<SOS>²",
        );
    }
}

/// A tokenizer that cuts a text in two halves (two threads, no chunk size): the two-segment join
/// of `merge::Gather`, whose edges the `join_` tests below reach.
fn halves(name: &str) -> Option<Tokenizer> {
    let Some(path) = fixture(name) else {
        eprintln!("NOTICE: fixture {name} absent; test skipped");
        return None;
    };
    Some(TokenizerBuilder::new().threads(2).min_parallel_bytes(0).build_from_file(path).unwrap())
}

/// The second segment starts with a word that WordPiece writes piece by piece and then withdraws
/// (`hello` then `##😀` unknown: the whole word is `[UNK]`), so its `Out` truncates rows back to
/// the segment's first row: the rows joined after the first segment are the ones that stayed
/// (the reason the join cannot stream a segment's rows while it is encoded).
#[test]
fn join_wordpiece_withdraws_rows_at_the_second_segments_start() {
    let Some(tokenizer) = halves("bert-base-uncased") else { return };
    for n in [3, 40, 401] {
        let text = "hello\u{1f600} ".repeat(n);
        assert_eq!(tokenizer.cut_points(&text).len(), 1, "{n}");
        assert_exact(&tokenizer, &text);
        let encoding = tokenizer.encode(&text, false).unwrap();
        assert!(encoding.tokens().iter().all(|t| t == "[UNK]"));
    }
}

/// A first segment of one token per byte: its row count reaches its byte count, the bound that a
/// join placing the second segment at the first's byte length would rely on (tokens <= bytes).
/// In qwen3 `\u{1}`, ` ` and a digit are one token each, and the cut falls right after a digit.
#[test]
fn join_first_segment_of_a_token_per_byte() {
    let Some(tokenizer) = halves("qwen3") else { return };
    let mut exact = 0;
    for n in [100, 1000, 10_000] {
        for digits in [n - 1, n - 6] {
            let text = format!("{}\u{1}{}", "\u{1} ".repeat(n - 1), " 1".repeat(digits));
            let cuts = tokenizer.cut_points(&text);
            if let [cut] = cuts[..] {
                exact += usize::from(tokenizer.encode(&text[..cut], false).unwrap().len() == cut);
            }
            assert_exact(&tokenizer, &text);
        }
    }
    assert!(exact > 0, "no first segment of a token per byte");
}

/// A second segment of spaces alone has no token: nothing is joined after the first.
#[test]
fn join_empty_second_segment() {
    let Some(tokenizer) = halves("bert-base-uncased") else { return };
    for n in [10, 200, 5000] {
        let text = format!("hello world{}", " ".repeat(n));
        let cuts = tokenizer.cut_points(&text);
        assert_eq!(cuts.len(), 1, "{n}");
        assert!(text[cuts[0]..].trim().is_empty(), "{n}");
        assert_exact(&tokenizer, &text);
    }
}
