//! Post-processing, applied once to the merged encoding of a whole text: the model-level
//! truncation that `tokenizers` 0.23 applies while tokenizing, then what
//! `Tokenizer::post_process` does (truncation, the post-processor, padding).
//!
//! Two paths with one result:
//! * the *own* path, for the post-processors long prompts meet (none, `ByteLevel`,
//!   `TemplateProcessing`, `BertProcessing` and `Sequence`s of them) when the call neither
//!   truncates nor pads: the segments are written once, in parallel, into the final columns with
//!   the template's special tokens around them (`merge::assemble`), and token strings are never
//!   allocated unless asked for (they are looked up by id on demand);
//! * the *HF* path for everything else: build a `tokenizers::Encoding` and run the steps of HF's
//!   `post_process` (truncation, the post-processor, padding) with the call's settings — exact
//!   by construction, slower.
//!
//! Both are functions of the whole token sequence, which is why they run after the merge. Neither
//! touches a thread pool for a one-segment text: a short text is finished on the calling thread.
//! Padding is lopt's own ([`pad`]): HF's would run on rayon's global pool.

use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tokenizers::{
    PaddingParams, PaddingStrategy, PostProcessor, PostProcessorWrapper, TruncationDirection, TruncationParams,
    TruncationStrategy,
};

use crate::encoding::{Encoding, Vocab};
use crate::engine::Segment;
use crate::error::{catch_panic, Error, ErrorKind, Result};
use crate::merge::{assemble, assemble_parts, merge, Layout, Part, Run, Trim};
use crate::options::Settings;

/// Special tokens of a template with their type ids, `(id, type_id)`.
type Specials<'a> = &'a [(u32, u32)];

/// Finishes merged encodings for one tokenizer.
pub(crate) struct Finisher {
    /// The `tokenizer.json`'s post-processor, read without building HF's tokenizer.
    post_processor: Option<PostProcessorWrapper>,
    vocab: Arc<Vocab>,
    /// The own path; `None` selects the HF path.
    own: Option<Own>,
    /// Leading and trailing space counts of every token string, for `ByteLevel` offset trimming.
    spaces: OnceLock<Vec<(u16, u16)>>,
}

/// The own path, reduced to what [`assemble`] needs: special tokens around the text, the text's
/// type id, and whether (and in which order relative to the template) offsets are trimmed.
#[derive(Debug, PartialEq)]
struct Own {
    prefix: Vec<(u32, u32)>,
    suffix: Vec<(u32, u32)>,
    type_id: u32,
    trim: Option<OwnTrim>,
}

#[derive(Debug, PartialEq)]
struct OwnTrim {
    add_prefix_space: bool,
    after_template: bool,
}

/// One post-processor of the own path.
#[derive(Debug, PartialEq)]
enum Step {
    /// `ByteLevel` with `trim_offsets`: moves offsets off leading and trailing spaces.
    TrimOffsets { add_prefix_space: bool },
    /// `TemplateProcessing`'s single-sequence template (`BertProcessing` is `[CLS] A [SEP]`).
    Template(Vec<Piece>),
}

#[derive(Debug, PartialEq)]
enum Piece {
    Special { ids: Vec<u32>, type_id: u32 },
    Sequence { type_id: u32 },
}

impl Finisher {
    /// `strings` is every id's token string (`crate::parts::Vocabulary`), indexed by id.
    pub(crate) fn new(post_processor: Option<PostProcessorWrapper>, strings: Vec<String>, json: &Value) -> Self {
        let vocab = Arc::new(Vocab { strings });
        let own = own_steps(&json["post_processor"], &vocab).and_then(own);
        Finisher { post_processor, vocab, own, spaces: OnceLock::new() }
    }

    /// Whether the `tokenizer.json` has a post-processor.
    pub(crate) fn has_post_processor(&self) -> bool {
        self.post_processor.is_some()
    }

    /// Refuses truncation settings that HF refuses when they are set (`with_truncation`): a
    /// stride that does not leave room for new tokens once the special tokens are counted.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidConfig`] naming the stride and the effective maximum length.
    pub(crate) fn check_truncation_params(&self, truncation: &TruncationParams) -> Result<()> {
        let added = self.added_tokens();
        match truncation.max_length.checked_sub(added) {
            Some(effective) if effective < truncation.stride => Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "truncation stride {} is not smaller than the effective max length {effective} \
                     (max_length {} - {added} special tokens)",
                    truncation.stride, truncation.max_length
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The number of special tokens the post-processor adds to one sequence.
    fn added_tokens(&self) -> usize {
        self.post_processor.as_ref().map_or(0, |p| p.added_tokens(false))
    }

    /// Joins the segments of one text (segment `i` starts at byte `starts[i]`) and turns them
    /// into the text's final [`Encoding`] as `settings` say. With several segments its parallel
    /// part runs on `pool`, or on the current rayon pool (the caller's `install`) when it is
    /// `None`; one segment is finished on the calling thread.
    ///
    /// # Errors
    /// [`ErrorKind::Encode`] when HF's post-processing fails (for example a truncation stride
    /// larger than `max_length`) or `max_length` cannot hold the special tokens.
    pub(crate) fn finish(
        &self,
        starts: &[usize],
        segments: Vec<Segment>,
        settings: Settings<'_>,
        pool: Option<&rayon::ThreadPool>,
    ) -> Result<Encoding> {
        let own = match &self.own {
            Some(own) if settings.truncation.is_none() && settings.padding.is_none() => own,
            _ => return self.finish_hf(merge(starts, segments), settings),
        };
        Ok(assemble(starts, segments, &self.layout(own, settings), &self.vocab, pool))
    }

    /// [`finish`](Self::finish) for a text whose tokens are `runs` (borrowed: a cached prefix
    /// and the newly encoded rest), none of which is consumed. Runs longer than `split` tokens
    /// are written in pieces of that size, in parallel on `pool` (or the current rayon pool when
    /// it is `None`), as [`finish`](Self::finish) writes segments: called from outside the pool,
    /// the output is allocated on the calling thread.
    ///
    /// # Errors
    /// As [`finish`](Self::finish).
    pub(crate) fn finish_runs(
        &self,
        runs: &[Run<'_>],
        settings: Settings<'_>,
        split: usize,
        pool: Option<&rayon::ThreadPool>,
    ) -> Result<Encoding> {
        let own = match &self.own {
            Some(own) if settings.truncation.is_none() && settings.padding.is_none() => own,
            _ => {
                let starts: Vec<usize> = runs.iter().map(|r| r.start).collect();
                return self.finish_hf(merge(&starts, runs.iter().map(|r| r.to_segment()).collect()), settings);
            }
        };
        let layout = self.layout(own, settings);
        let mut words_before = 0;
        let mut parts = Vec::with_capacity(runs.len());
        for run in runs {
            parts.extend(Part::of(run.segment, run.len, run.start, words_before).pieces(split));
            words_before += run.words;
        }
        let mut encoding = assemble_parts(&parts, &layout, &self.vocab, pool);
        let text_tokens: usize = runs.iter().map(|r| r.len).sum();
        if text_tokens > 0 && runs.iter().all(|r| r.segment.tokens.len() == r.segment.ids.len()) {
            let mut all = Vec::with_capacity(encoding.len());
            all.extend(layout.prefix.iter().map(|&(id, _)| self.vocab.string(id).to_owned()));
            all.extend(runs.iter().flat_map(|r| r.segment.tokens[..r.len].iter().cloned()));
            all.extend(layout.suffix.iter().map(|&(id, _)| self.vocab.string(id).to_owned()));
            encoding.set_tokens(all);
        }
        Ok(encoding)
    }

    /// Whether [`finish`](Self::finish) takes the own path under `settings` (no truncation, no
    /// padding): it assembles the segments into the first one's columns when they have room, so
    /// it allocates nothing large and may run on a pool thread (`Tokenizer::encode_plain`).
    pub(crate) fn assembles(&self, settings: Settings<'_>) -> bool {
        self.own.is_some() && settings.truncation.is_none() && settings.padding.is_none()
    }

    /// The layout of the own path under `settings` when [`finish`](Self::finish) takes it
    /// ([`assembles`](Self::assembles)), with the vocabulary: what assembling a text's segments
    /// as they are encoded needs (`merge::Gather`).
    pub(crate) fn assembly(&self, settings: Settings<'_>) -> Option<(Layout<'_>, &Arc<Vocab>)> {
        let own = self.own.as_ref().filter(|_| self.assembles(settings))?;
        Some((self.layout(own, settings), &self.vocab))
    }

    /// Whether [`finish_ids`](Self::finish_ids) finishes texts under `settings`: the own path
    /// without truncation (which needs the word ids, and its overflow the other columns). Other
    /// calls finish a full [`Encoding`] and keep its ids.
    pub(crate) fn finishes_ids(&self, settings: Settings<'_>) -> bool {
        self.own.is_some() && settings.truncation.is_none()
    }

    /// The ids of [`finish`](Self::finish) for the ids of a text's segments, in order: the
    /// template's special tokens around them, padded alone as HF pads one encoding. Only called
    /// when [`finishes_ids`](Self::finishes_ids) holds (else the text is returned unprocessed).
    /// With `headed`, the first segment's ids hold the template's opening tokens
    /// ([`head`](Self::head)) in front already (written into the columns lent to the
    /// engine: `engine::out::Columns::headed`); they are checked to be there.
    pub(crate) fn finish_ids(&self, mut segments: Vec<Vec<u32>>, settings: Settings<'_>, headed: bool) -> Vec<u32> {
        let (prefix, suffix) = self.layout_ids(settings);
        let head = prefix.len();
        let headed = headed
            && head > 0
            && segments.first().is_some_and(|first| crate::engine::out::starts_with_head(first, prefix));
        let text = segments.iter().map(Vec::len).sum::<usize>() - if headed { head } else { 0 };
        let room = prefix.len() + text + suffix.len();
        if segments.len() == 1 || segments.first().is_some_and(|first| first.capacity() >= room) {
            // The first segment's vector becomes the result, the template's opening tokens put in
            // front in place (unless they are there already) and the later segments appended, so
            // the first is not copied: a text of one segment (every text on one thread; the
            // engines reserve more rows than a text has tokens), or one whose first segment has
            // room for the whole text's ids (the tokenizer lends the engine such columns for it:
            // `engine::out::lending`).
            let rest = segments.split_off(1.min(segments.len()));
            let mut ids = segments.pop().unwrap_or_default();
            if !prefix.is_empty() && !headed {
                ids.splice(0..0, prefix.iter().map(|&(id, _)| id));
            }
            for segment in &rest {
                ids.extend_from_slice(segment);
            }
            self.close_ids(&mut ids, settings);
            ids.shrink_to_fit();
            return ids;
        }
        let mut slices: Vec<&[u32]> = segments.iter().map(Vec::as_slice).collect();
        if let Some(first) = slices.first_mut().filter(|_| headed) {
            // Written again below, in front of the text.
            *first = &first[head..];
        }
        self.finish_ids_slices(&slices, settings)
    }

    /// The template's opening special tokens of [`finish_ids`](Self::finish_ids) under
    /// `settings`: what may be written in front of a text's first segment's ids up front.
    pub(crate) fn head(&self, settings: Settings<'_>) -> Specials<'_> {
        self.layout_ids(settings).0
    }

    /// [`finish_ids`](Self::finish_ids) for a text whose tokens are `runs` (a cached prefix and
    /// the newly encoded rest): only their ids are read.
    pub(crate) fn finish_ids_runs(&self, runs: &[Run<'_>], settings: Settings<'_>) -> Vec<u32> {
        let slices: Vec<&[u32]> = runs.iter().map(|r| &r.segment.ids[..r.len]).collect();
        self.finish_ids_slices(&slices, settings)
    }

    fn finish_ids_slices(&self, slices: &[&[u32]], settings: Settings<'_>) -> Vec<u32> {
        let (prefix, suffix) = self.layout_ids(settings);
        let text: usize = slices.iter().map(|s| s.len()).sum();
        let mut ids = Vec::with_capacity(prefix.len() + text + suffix.len());
        ids.extend(prefix.iter().map(|&(id, _)| id));
        for slice in slices {
            ids.extend_from_slice(slice);
        }
        self.close_ids(&mut ids, settings);
        ids
    }

    /// Appends the template's closing special tokens, then pads.
    fn close_ids(&self, ids: &mut Vec<u32>, settings: Settings<'_>) {
        ids.extend(self.layout_ids(settings).1.iter().map(|&(id, _)| id));
        if let Some(padding) = settings.padding {
            pad_ids(std::slice::from_mut(ids), padding);
        }
    }

    /// The special tokens before and after the text on the own path.
    fn layout_ids(&self, settings: Settings<'_>) -> (Specials<'_>, Specials<'_>) {
        match &self.own {
            Some(own) if settings.add_special_tokens => (&own.prefix, &own.suffix),
            _ => (&[], &[]),
        }
    }

    /// Where the text goes between the template's special tokens, and how offsets are trimmed.
    fn layout<'a>(&'a self, own: &'a Own, settings: Settings<'_>) -> Layout<'a> {
        let (prefix, suffix): (&[_], &[_]) =
            if settings.add_special_tokens { (&own.prefix, &own.suffix) } else { (&[], &[]) };
        let trim = own.trim.as_ref().map(|t| Trim {
            spaces: self.spaces(),
            add_prefix_space: t.add_prefix_space,
            first_is_index_zero: !t.after_template || prefix.is_empty(),
        });
        Layout { prefix, suffix, type_id: own.type_id, trim }
    }

    fn spaces(&self) -> &[(u16, u16)] {
        self.spaces.get_or_init(|| {
            let is_space = |c: &char| *c == '\u{120}' || c.is_whitespace();
            let count = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
            self.vocab
                .strings
                .iter()
                .map(|s| {
                    (count(s.chars().take_while(is_space).count()), count(s.chars().rev().take_while(is_space).count()))
                })
                .collect()
        })
    }

    fn finish_hf(&self, mut raw: Segment, settings: Settings<'_>) -> Result<Encoding> {
        if raw.tokens.len() != raw.ids.len() {
            raw.tokens = raw.ids.iter().map(|&id| self.vocab.string(id).to_owned()).collect();
        }
        if let Some(truncation) = settings.truncation {
            self.limit_like_model(&mut raw, truncation);
        }
        let n = raw.ids.len();
        let mut encoding = tokenizers::Encoding::new(
            raw.ids,
            vec![0; n],
            raw.tokens,
            raw.word_ids.into_iter().map(Some).collect(),
            raw.offsets,
            vec![0; n],
            vec![1; n],
            Vec::new(),
            Default::default(),
        );
        // HF's `post_process`, step by step, with the call's settings.
        if let Some(truncation) = settings.truncation {
            let max_length = self.truncated_length(truncation, settings.add_special_tokens, n)?;
            let params = TruncationParams { max_length, ..*truncation };
            encoding =
                tokenizers::utils::truncation::truncate_encodings(encoding, None, &params).map_err(Error::encode)?.0;
        }
        let processed = catch_panic("tokenizers post-processing", || {
            match &self.post_processor {
                Some(processor) => processor.process(encoding, None, settings.add_special_tokens),
                None => <dyn PostProcessor>::default_process(vec![encoding], settings.add_special_tokens)
                    .map(|mut all| all.pop().unwrap_or_default()),
            }
            .map_err(Error::encode)
        })?;
        let mut finished = Encoding::from(processed);
        if let Some(padding) = settings.padding {
            pad(std::slice::from_mut(&mut finished), padding);
        }
        Ok(finished)
    }

    /// The length the text's tokens are truncated to: `max_length` less the special tokens that
    /// will be added. `tokenizers` subtracts without checking (a panic in debug builds, no
    /// truncation at all in release builds) and, when it cuts `tokens` tokens, asserts that the
    /// stride is smaller (a panic): refuse both instead.
    fn truncated_length(
        &self,
        truncation: &TruncationParams,
        add_special_tokens: bool,
        tokens: usize,
    ) -> Result<usize> {
        let added = if add_special_tokens { self.added_tokens() } else { 0 };
        let Some(length) = truncation.max_length.checked_sub(added) else {
            return Err(Error::new(
                ErrorKind::Encode,
                format!(
                    "truncation max_length {} is smaller than the {added} special tokens added",
                    truncation.max_length
                ),
            ));
        };
        if length > 0 && length < tokens && truncation.stride >= length {
            return Err(Error::new(
                ErrorKind::Encode,
                format!(
                    "truncation stride {} is not smaller than the effective max length {length}",
                    truncation.stride
                ),
            ));
        }
        Ok(length)
    }

    /// `tokenizers` 0.23 stops the model early when the tokenizer truncates
    /// (`PreTokenizedString::tokenize_with_limit`), and the truncation and overflow of
    /// post-processing then work on what is left. Reproduce that cut on the merged tokens.
    ///
    /// HF's loop walks the splits (pre-tokens and added tokens) from the kept end (the start for
    /// `Right`, the end for `Left`), summing their tokens, and stops after the first split *the
    /// model tokenized* that brings the sum to `max_length`; the splits beyond it are dropped.
    /// Added-token splits already hold their token: they are counted but never stop the loop, so
    /// after them the next model split is kept whole. Without such a split everything is kept.
    /// Dropping leading splits (`Left`) renumbers words from 0, as `into_encoding` does on the
    /// drained split list. The stride and the strategy play no part here (`OnlySecond` leaves a
    /// single sequence untouched).
    fn limit_like_model(&self, raw: &mut Segment, truncation: &TruncationParams) {
        if truncation.strategy == TruncationStrategy::OnlySecond || raw.words == 0 {
            return;
        }
        let max = truncation.max_length;
        let words = raw.words as usize;
        let mut counts = vec![0usize; words];
        for &w in &raw.word_ids {
            if let Some(count) = counts.get_mut(w as usize) {
                *count += 1;
            }
        }
        let mut added = vec![false; words];
        for &w in &raw.added_words {
            if let Some(flag) = added.get_mut(w as usize) {
                *flag = true;
            }
        }
        // The first model split, from the kept end, whose running sum reaches `max`.
        let mut total = 0;
        let mut stops = |w: usize| {
            total += counts[w];
            !added[w] && total >= max
        };
        // Kept words `lo..hi`.
        let (lo, hi) = match truncation.direction {
            TruncationDirection::Right => (0, (0..words).find(|&w| stops(w)).map_or(words, |w| w + 1)),
            TruncationDirection::Left => ((0..words).rev().find(|&w| stops(w)).unwrap_or(0), words),
        };
        if (lo, hi) == (0, words) {
            return;
        }
        // Merged word ids never decrease, so the kept tokens are one run.
        debug_assert!(raw.word_ids.windows(2).all(|w| w[0] <= w[1]));
        let (lo32, hi32) = (lo as u32, hi as u32);
        let first = raw.word_ids.partition_point(|&w| w < lo32);
        let end = raw.word_ids.partition_point(|&w| w < hi32);
        raw.ids.truncate(end);
        raw.ids.drain(..first);
        if raw.tokens.len() >= end {
            raw.tokens.truncate(end);
            raw.tokens.drain(..first);
        }
        raw.offsets.truncate(end);
        raw.offsets.drain(..first);
        raw.word_ids.truncate(end);
        raw.word_ids.drain(..first);
        for w in &mut raw.word_ids {
            *w -= lo32;
        }
        raw.added_words.retain(|&w| (lo32..hi32).contains(&w));
        for w in &mut raw.added_words {
            *w -= lo32;
        }
        raw.words = hi32 - lo32;
    }
}

/// HF's `pad_encodings` (without its global thread pool): pads every encoding, and each one's
/// overflowing parts, to the longest of `encodings` (or the fixed length), rounded up to
/// `pad_to_multiple_of`.
pub(crate) fn pad(encodings: &mut [Encoding], params: &PaddingParams) {
    let length = padded_length(encodings.iter().map(Encoding::len), params);
    for encoding in encodings {
        encoding.pad(length, params);
    }
}

/// [`pad`] for ids alone: the ids HF's padding gives (no overflowing parts: ids-only mode does
/// not truncate itself).
pub(crate) fn pad_ids(all: &mut [Vec<u32>], params: &PaddingParams) {
    let length = padded_length(all.iter().map(Vec::len), params);
    for ids in all {
        let Some(missing) = length.checked_sub(ids.len()).filter(|&m| m > 0) else { continue };
        let padding = std::iter::repeat_n(params.pad_id, missing);
        if matches!(params.direction, tokenizers::PaddingDirection::Left) {
            ids.splice(0..0, padding);
        } else {
            ids.extend(padding);
        }
    }
}

/// The length HF pads to: the fixed size or the longest, rounded up to `pad_to_multiple_of`.
fn padded_length(lengths: impl Iterator<Item = usize>, params: &PaddingParams) -> usize {
    let mut length = match params.strategy {
        PaddingStrategy::Fixed(size) => size,
        PaddingStrategy::BatchLongest => lengths.max().unwrap_or(0),
    };
    if let Some(multiple) = params.pad_to_multiple_of.filter(|&m| m > 0) {
        if length % multiple > 0 {
            length += multiple - length % multiple;
        }
    }
    length
}

/// Reduces the steps to [`Own`]: at most one template and one trimming step (offset trimming
/// leaves the template's special tokens, at offsets `(0, 0)`, unchanged, so only its position
/// relative to the template matters).
fn own(steps: Vec<Step>) -> Option<Own> {
    let mut own = Own { prefix: Vec::new(), suffix: Vec::new(), type_id: 0, trim: None };
    let mut seen_template = false;
    for step in steps {
        match step {
            Step::TrimOffsets { add_prefix_space } => {
                if own.trim.is_some() {
                    return None;
                }
                own.trim = Some(OwnTrim { add_prefix_space, after_template: seen_template });
            }
            Step::Template(pieces) => {
                if seen_template {
                    return None;
                }
                seen_template = true;
                let mut before = true;
                for piece in pieces {
                    match piece {
                        Piece::Sequence { type_id } => {
                            own.type_id = type_id;
                            before = false;
                        }
                        Piece::Special { ids, type_id } => {
                            let side = if before { &mut own.prefix } else { &mut own.suffix };
                            side.extend(ids.into_iter().map(|id| (id, type_id)));
                        }
                    }
                }
            }
        }
    }
    Some(own)
}

/// The own path's steps for a post-processor, or `None` when only HF's path is exact for it.
fn own_steps(json: &Value, vocab: &Vocab) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    push_steps(json, vocab, &mut steps)?;
    Some(steps)
}

fn push_steps(json: &Value, vocab: &Vocab, steps: &mut Vec<Step>) -> Option<()> {
    if json.is_null() {
        return Some(());
    }
    match json["type"].as_str()? {
        "Sequence" => {
            for processor in json["processors"].as_array()? {
                push_steps(processor, vocab, steps)?;
            }
        }
        "ByteLevel" => {
            if json["trim_offsets"].as_bool()? {
                steps.push(Step::TrimOffsets { add_prefix_space: json["add_prefix_space"].as_bool()? });
            }
        }
        "TemplateProcessing" => steps.push(Step::Template(template(json, vocab)?)),
        "BertProcessing" => {
            let special = |key: &str| -> Option<Piece> {
                let pair = json[key].as_array()?;
                let id = u32::try_from(pair.get(1)?.as_u64()?).ok()?;
                (vocab.string(id) == pair.first()?.as_str()?).then(|| Piece::Special { ids: vec![id], type_id: 0 })
            };
            steps.push(Step::Template(vec![special("cls")?, Piece::Sequence { type_id: 0 }, special("sep")?]));
        }
        _ => return None,
    }
    Some(())
}

/// The single-sequence template, provided every special token's strings are the vocabulary's
/// strings for its ids (so that they can be looked up by id) and `A` occurs exactly once.
fn template(json: &Value, vocab: &Vocab) -> Option<Vec<Piece>> {
    let mut pieces = Vec::new();
    for piece in json["single"].as_array()? {
        if let Some(special) = piece.get("SpecialToken") {
            let entry = &json["special_tokens"][special["id"].as_str()?];
            let ids: Vec<u32> = entry["ids"]
                .as_array()?
                .iter()
                .map(|v| v.as_u64().and_then(|i| u32::try_from(i).ok()))
                .collect::<Option<_>>()?;
            let tokens = entry["tokens"].as_array()?;
            let consistent = ids.len() == tokens.len()
                && ids.iter().zip(tokens).all(|(&id, token)| token.as_str() == Some(vocab.string(id)));
            if !consistent {
                return None;
            }
            pieces.push(Piece::Special { ids, type_id: u32::try_from(special["type_id"].as_u64()?).ok()? });
        } else if let Some(sequence) = piece.get("Sequence") {
            if sequence["id"].as_str()? != "A" {
                return None;
            }
            pieces.push(Piece::Sequence { type_id: u32::try_from(sequence["type_id"].as_u64()?).ok()? });
        } else {
            return None;
        }
    }
    let sequences = pieces.iter().filter(|p| matches!(p, Piece::Sequence { .. })).count();
    (sequences == 1).then_some(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vocab {
        Vocab { strings: vec!["[CLS]".into(), "[SEP]".into(), "a".into()] }
    }

    #[test]
    fn template_and_bert_processing_parse() {
        let template = serde_json::json!({
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [0], "tokens": ["[CLS]"]}}
        });
        assert_eq!(
            own_steps(&template, &vocab()),
            Some(vec![Step::Template(vec![
                Piece::Special { ids: vec![0], type_id: 0 },
                Piece::Sequence { type_id: 0 }
            ])])
        );
        let bert = serde_json::json!({"type": "BertProcessing", "cls": ["[CLS]", 0], "sep": ["[SEP]", 1]});
        assert!(own_steps(&bert, &vocab()).is_some());
        let inconsistent = serde_json::json!({"type": "BertProcessing", "cls": ["<s>", 0], "sep": ["[SEP]", 1]});
        assert_eq!(own_steps(&inconsistent, &vocab()), None);
        assert_eq!(own_steps(&serde_json::json!({"type": "RobertaProcessing"}), &vocab()), None);
    }
}
