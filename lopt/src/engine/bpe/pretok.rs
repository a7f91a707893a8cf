//! Pre-tokenization: the `Split(Regex, Isolated)` stages (and ByteLevel's built-in GPT-2 regex)
//! of a byte-level BPE tokenizer, as hand-written scanners.
//!
//! Each scanner reproduces one known pattern exactly as Oniguruma runs it in HF: at every position
//! the alternatives are tried left to right (leftmost-first), each with its greedy quantifiers and
//! the backtracking they imply (`\s+(?!\S)` gives back one character; `\s*[\r\n]+` ends at the last
//! line break of a white-space run; o200k's `[upper]*[lower]+` backs off to the last character
//! that is in both classes). The search then resumes at the end of the match, and positions where
//! no alternative matches are skipped one character at a time. The `Isolated` behaviour turns
//! every match and every non-empty run of skipped characters into a piece.
//!
//! Invariants: a scanner only ever looks at the piece it is given (a regex stage sees one piece of
//! the previous stage, so `(?!\S)` sees the piece's end as the end of the text); pieces are emitted
//! in order, are non-empty, and tile the input. Patterns not recognised here run through
//! Oniguruma itself (the `onig` crate, as HF does), so any pattern HF accepts is exact.
//!
//! The unit tests compare every scanner with Oniguruma on trap strings and on random strings
//! drawn from a pool of characters of every class.

use super::bits::{self, AsciiClasses, Cases, Kernel, BLOCK};
use super::unicode::{
    in_set, Classes, CJK_LEAD_FIRST, CJK_LEAD_LAST, NUMBER, SPACE, S_L, S_LM, S_LOWER, S_N, S_NOT_WS_L_N, S_PS, S_UPPER,
};

/// cl100k_base / Llama-3 (`\p{N}{1,3}`).
pub(crate) const CL100K: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2 / Qwen3 (single digits).
pub(crate) const QWEN: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// o200k_base / o200k_harmony.
pub(crate) const O200K: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// DeepSeek-V3's third stage.
pub(crate) const DEEPSEEK: &str = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
/// GPT-2, also ByteLevel's built-in regex (`use_regex: true`).
pub(crate) const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// DeepSeek-V3's first stage.
pub(crate) const DIGITS: &str = r"\p{N}{1,3}";
/// DeepSeek-V3's second stage.
pub(crate) const CJK_RUN: &str = "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+";

/// One `Split(Regex, Isolated, invert: false)` stage.
pub(crate) enum Stage {
    /// cl100k-like, with at most `max_digits` digits per number (3: cl100k, 1: Qwen).
    Cl100k {
        max_digits: usize,
    },
    O200k,
    DeepSeek,
    Gpt2,
    Digits,
    CjkRun,
    /// Any other pattern, run by Oniguruma exactly as HF runs it.
    Onig(onig::Regex),
}

impl std::fmt::Debug for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::Cl100k { max_digits: 1 } => "qwen",
            Stage::Cl100k { .. } => "cl100k",
            Stage::O200k => "o200k",
            Stage::DeepSeek => "deepseek",
            Stage::Gpt2 => "gpt2",
            Stage::Digits => "digits",
            Stage::CjkRun => "cjk-run",
            Stage::Onig(_) => "onig",
        })
    }
}

impl Stage {
    /// The stage for a `Split` regex: a hand scanner when the pattern is a known one, Oniguruma
    /// otherwise.
    ///
    /// # Errors
    /// When Oniguruma rejects the pattern (HF would have rejected the tokenizer too).
    pub(crate) fn from_pattern(pattern: &str) -> Result<Stage, String> {
        Ok(match pattern {
            CL100K => Stage::Cl100k { max_digits: 3 },
            QWEN => Stage::Cl100k { max_digits: 1 },
            O200K => Stage::O200k,
            DEEPSEEK => Stage::DeepSeek,
            GPT2 => Stage::Gpt2,
            DIGITS => Stage::Digits,
            CJK_RUN => Stage::CjkRun,
            other => Stage::Onig(onig::Regex::new(other).map_err(|e| format!("split regex {other:?}: {e}"))?),
        })
    }
}

/// The whole pre-tokenizer: stages applied in order, each to every piece of the previous one.
#[derive(Debug)]
pub(crate) struct PreTokenizer {
    stages: Vec<Stage>,
    /// How letter runs are found (the bulk kernel, or its scalar twin).
    kernel: Kernel,
    /// The shortest text the block path runs on (bulk kernel only): a text shorter than a block
    /// would pay two block classifications, a padded copy among them, for a few pre-tokens (a
    /// DeepSeek-V3 piece between two numbers, say). Tests set 0 to reach the block path on short
    /// strings.
    block_min: usize,
    /// The stages are DeepSeek-V3's three, run in one pass by [`PreTokenizer::deepseek_fused`]
    /// (tests clear it to compare with the stages run one after the other).
    fused_deepseek: bool,
}

impl PreTokenizer {
    pub(crate) fn new(stages: Vec<Stage>) -> Self {
        let fused_deepseek = matches!(stages.as_slice(), [Stage::Digits, Stage::CjkRun, Stage::DeepSeek]);
        PreTokenizer { stages, kernel: Kernel::Bulk, block_min: BLOCK, fused_deepseek }
    }

    /// The same stages, run one after the other even where a fused scanner exists.
    #[cfg(test)]
    pub(crate) fn staged(mut self) -> Self {
        self.fused_deepseek = false;
        self
    }

    /// The same stages, scanned with `kernel` (the tests compare both kernels in one build).
    pub(crate) fn with_kernel(mut self, kernel: Kernel) -> Self {
        self.kernel = kernel;
        self
    }

    /// The kernel the scanners use.
    pub(crate) fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The same stages, with the block path on texts of `block_min` bytes or more.
    #[cfg(test)]
    pub(crate) fn with_block_min(mut self, block_min: usize) -> Self {
        self.block_min = block_min;
        self
    }

    /// Splits `text` into pre-tokens, calling `sink.piece(start, end)` (byte offsets into `text`)
    /// for each one, in order.
    pub(crate) fn split<S: Sink>(&self, text: &str, sink: &mut S) {
        if text.is_empty() {
            return;
        }
        let classes = Classes::get();
        if self.fused_deepseek {
            self.deepseek_fused(classes, text, sink);
        } else {
            self.split_from(0, classes, text, 0, sink);
        }
    }

    /// DeepSeek-V3's three stages (`\p{N}{1,3}`, then [`CJK_RUN`], then [`DEEPSEEK`]) in one pass,
    /// each character classified once instead of once per stage.
    ///
    /// Composed, the first two stages cut the text into segments: each `\p{N}{1,3}` group (the
    /// first stage's matches), each maximal run of characters of the CJK ranges (none of which is
    /// `\p{N}`, so such a run never straddles a first-stage cut) and each maximal run of the other
    /// characters. The third stage leaves a digit group whole (none of its alternatives matches
    /// inside a run of `\p{N}`) and splits each of the other segments as if it were the whole text.
    /// A CJK run whose characters are all in `[\p{L}\p{M}]` is one piece under the third stage
    /// (`[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+` takes all of it); every code point of
    /// U+4E00..=U+9FA5 is `\p{Lo}`, so Chinese runs need one range test per character and no class
    /// lookup. The unit tests check both facts on every code point and compare this scanner with
    /// the three stages run one after the other and with Oniguruma.
    fn deepseek_fused<S: Sink>(&self, c: Classes, text: &str, sink: &mut S) {
        let s = text.as_bytes();
        let n = s.len();
        // The block masks of the whole text, shared by its segments (see `deepseek_third`).
        let mut windows = Windows::new(s, self.kernel);
        let blocks = self.blocks(text);
        // Start of the segment of other characters not yet emitted.
        let mut other = 0;
        let mut i = 0;
        loop {
            // Only an ASCII digit or a multi-byte character can end a segment of other characters.
            i = match self.kernel {
                Kernel::Bulk => bits::non_digit_ascii_end(s, i),
                Kernel::Scalar => skip_bytewise(s, i, |b| b < 0x80 && !b.is_ascii_digit()),
            };
            if i >= n {
                break;
            }
            let (end, whole) = if s[i] < 0x80 {
                (digit_group_end(c, s, i + 1), true)
            } else {
                let (end, letters) = deepseek_cjk_run(c, self.kernel, s, i);
                if end > i {
                    (end, letters)
                } else {
                    let (class, len) = c.at(s, i);
                    if class != NUMBER {
                        i += len;
                        continue;
                    }
                    (digit_group_end(c, s, i + len), true)
                }
            };
            if other < i {
                self.deepseek_third(c, text, other, i, (&mut windows, blocks), sink);
            }
            if whole {
                sink.piece(i, end);
            } else {
                // A run of CJK characters has no ASCII byte to start a block at, and the byte
                // after it need not be hard.
                self.deepseek_third(c, text, i, end, (&mut windows, false), sink);
            }
            i = end;
            other = end;
        }
        if other < n {
            self.deepseek_third(c, text, other, n, (&mut windows, blocks), sink);
        }
    }

    /// DeepSeek-V3's third stage on the segment `start..end` of `text`, its block path (where
    /// `blocks`, the whole text's gate) reading the masks of `windows`, the whole text's: every
    /// segment ends at the text's end, at an ASCII digit or at a multi-byte character, all of
    /// them hard bytes for the third stage's [`block_starts`], so no window read from inside the
    /// segment has a valid byte past its end, and the pieces are those of the segment alone (as
    /// [`scan_blocks_in`] requires). Why shared: on code and numbers the segments between digits
    /// are short, and each one classified its own one or two blocks (a padded copy among them),
    /// or, under 64 bytes, ran the per-character scanner alone.
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn deepseek_third<S: Sink>(
        &self,
        c: Classes,
        text: &str,
        start: usize,
        end: usize,
        (windows, blocks): (&mut Windows<'_>, bool),
        sink: &mut S,
    ) {
        let seg = text.get(start..end).unwrap_or_default();
        if seg.len() == seg.as_bytes().first().map_or(0, |&b| utf8_len(b)) {
            // One character is one piece under any split (pieces are non-empty and tile the
            // text): Chinese punctuation between two runs, mostly.
            sink.piece(start, end);
            return;
        }
        let bytes = seg.as_bytes();
        let mut l = Letters::new(bytes, self.kernel);
        scan_blocks_in(
            bytes,
            start,
            sink,
            (windows, start),
            blocks,
            |m, _, _| block_starts::<0>(m),
            |s, i| deepseek_at(c, &mut l, s, i),
        );
    }

    /// Whether the block scanners run on `text` (see [`scan_blocks`]).
    #[inline(always)]
    fn blocks(&self, text: &str) -> bool {
        self.kernel == Kernel::Bulk && text.len() >= self.block_min
    }

    /// Generic over the sink, whose `piece` is inlined into the last stage's scanner loop: the
    /// scanner and the caller's per-pre-token work compile into one loop, with no call per piece.
    fn split_from<S: Sink>(&self, depth: usize, c: Classes, text: &str, base: usize, sink: &mut S) {
        let Some(stage) = self.stages.get(depth) else {
            sink.piece(base, base + text.len());
            return;
        };
        if depth + 1 == self.stages.len() {
            stage_pieces(stage, c, self.kernel, self.blocks(text), text, base, sink);
        } else {
            let mut next = NextStage { pre: self, depth: depth + 1, c, text, base, sink };
            stage_pieces(stage, c, self.kernel, self.blocks(text), text, 0, &mut next);
        }
    }
}

/// Receives pre-tokens.
///
/// The scanners generic over their sink are `inline(always)` in optimized builds only: in test
/// builds (opt-level 1, debug assertions) each sink's eight instantiations of the whole scan took
/// seconds of LLVM apiece (`docs/benchmarks.md`, "CI time").
pub(crate) trait Sink {
    /// The pre-token `start..end`.
    fn piece(&mut self, start: usize, end: usize);
}

/// Closures are sinks (tests and measurements).
#[cfg(test)]
impl<F: FnMut(usize, usize)> Sink for F {
    fn piece(&mut self, start: usize, end: usize) {
        self(start, end);
    }
}

/// A piece of a stage that is not the last: split further by the next stages.
struct NextStage<'p, 't, S> {
    pre: &'p PreTokenizer,
    depth: usize,
    c: Classes,
    text: &'t str,
    base: usize,
    sink: &'p mut S,
}

impl<S: Sink> Sink for NextStage<'_, '_, S> {
    fn piece(&mut self, start: usize, end: usize) {
        self.pre.split_from(self.depth, self.c, &self.text[start..end], self.base + start, self.sink);
    }
}

/// The pieces of one stage over `text`, reported shifted by `base`.
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
fn stage_pieces<S: Sink>(
    stage: &Stage,
    c: Classes,
    kernel: Kernel,
    blocks: bool,
    text: &str,
    base: usize,
    sink: &mut S,
) {
    let bytes = text.as_bytes();
    let mut l = Letters::new(bytes, kernel);
    match stage {
        Stage::Cl100k { max_digits: 3 } => scan_blocks(
            bytes,
            base,
            sink,
            kernel,
            blocks,
            |m, _, _| block_starts::<3>(m),
            |s, i| cl100k_at::<3>(c, &mut l, s, i),
        ),
        Stage::Cl100k { max_digits: 1 } => scan_blocks(
            bytes,
            base,
            sink,
            kernel,
            blocks,
            |m, _, _| block_starts::<1>(m),
            |s, i| cl100k_at::<1>(c, &mut l, s, i),
        ),
        Stage::Cl100k { max_digits } => {
            let max = *max_digits;
            scan(bytes, base, sink, |s, i| cl100k_at_dyn(c, &mut l, s, i, max))
        }
        Stage::O200k => {
            scan_blocks(bytes, base, sink, kernel, blocks, o200k_block_starts, |s, i| o200k_at(c, &mut l, s, i))
        }
        Stage::DeepSeek => deepseek_pieces(c, kernel, blocks, text, base, sink),
        Stage::Gpt2 => scan_blocks(
            bytes,
            base,
            sink,
            kernel,
            blocks,
            |m, _, _| gpt2_block_starts(m),
            |s, i| gpt2_at(c, &mut l, s, i),
        ),
        // DeepSeek-V3's first two stages match rarely in most text, and only where a digit or a
        // multi-byte character starts: the ASCII bytes before such a byte are skipped 8 at a
        // time (byte by byte on the scalar kernel).
        Stage::Digits => scan_sparse(
            bytes,
            base,
            sink,
            |s, i| match kernel {
                Kernel::Bulk => bits::non_digit_ascii_end(s, i),
                Kernel::Scalar => skip_bytewise(s, i, |b| b < 0x80 && !b.is_ascii_digit()),
            },
            |s, i| digits_at(c, s, i),
        ),
        Stage::CjkRun => scan_sparse(
            bytes,
            base,
            sink,
            |s, i| match kernel {
                Kernel::Bulk => bits::ascii_end(s, i),
                Kernel::Scalar => skip_bytewise(s, i, |b| b < 0x80),
            },
            cjk_run_at,
        ),
        Stage::Onig(regex) => {
            let mut prev = 0;
            for (start, end) in regex.find_iter(text) {
                if prev < start {
                    sink.piece(base + prev, base + start);
                }
                if start < end {
                    sink.piece(base + start, base + end);
                }
                prev = end;
            }
            if prev < text.len() {
                sink.piece(base + prev, base + text.len());
            }
        }
    }
}

/// The pieces of DeepSeek-V3's third stage over `text`, reported shifted by `base`.
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
fn deepseek_pieces<S: Sink>(c: Classes, kernel: Kernel, blocks: bool, text: &str, base: usize, sink: &mut S) {
    let bytes = text.as_bytes();
    let mut l = Letters::new(bytes, kernel);
    scan_blocks(bytes, base, sink, kernel, blocks, |m, _, _| block_starts::<0>(m), |s, i| deepseek_at(c, &mut l, s, i))
}

/// The `Isolated` find-iterate loop: matches and the gaps between them become pieces
/// ([`scan_sparse`] trying every character).
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
fn scan<S: Sink>(s: &[u8], base: usize, sink: &mut S, match_at: impl FnMut(&[u8], usize) -> Option<usize>) {
    scan_sparse(s, base, sink, |_, i| i, match_at);
}

/// [`scan`] for a stage none of whose matches can start at the positions `skip` passes over:
/// `skip(s, i)` is the first position from `i` on (a character boundary, or the end) where one
/// may start. The positions skipped would each have been tried and failed, so the pieces are the
/// same.
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
fn scan_sparse<S: Sink>(
    s: &[u8],
    base: usize,
    sink: &mut S,
    skip: impl Fn(&[u8], usize) -> usize,
    mut match_at: impl FnMut(&[u8], usize) -> Option<usize>,
) {
    let n = s.len();
    let mut i = skip(s, 0);
    let mut gap = 0;
    while i < n {
        if let Some(end) = match_at(s, i) {
            if gap < i {
                sink.piece(base + gap, base + i);
            }
            sink.piece(base + i, base + end);
            i = end;
            gap = end;
        } else {
            i += utf8_len(s[i]);
        }
        i = skip(s, i);
    }
    if gap < n {
        sink.piece(base + gap, base + n);
    }
}

/// [`scan`] with a block path: at a pre-token start with 8 ASCII bytes from it, `block_starts`
/// gives the pre-token starts of the 64 bytes from there (bit 0, the start itself, always set;
/// see [`block_starts`]), and the pieces between them are emitted with no per-position matching;
/// the last start found is where the next step begins. Where the window holds no start after the
/// first (a hard byte right away, a run longer than the window), `match_at` takes one step. The
/// block path runs where `blocks` says (see [`PreTokenizer::blocks`]), so on [`Kernel::Bulk`]
/// only: the scalar kernel is the per-character scanner alone, and the differential suite checks
/// both against HF (`TokenizerBuilder::scalar_kernels`).
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
fn scan_blocks<S: Sink>(
    s: &[u8],
    base: usize,
    sink: &mut S,
    kernel: Kernel,
    blocks: bool,
    block_starts: impl Fn(AsciiClasses, &[u8], usize) -> u64,
    match_at: impl FnMut(&[u8], usize) -> Option<usize>,
) {
    let mut windows = Windows::new(s, kernel);
    scan_blocks_in(s, base, sink, (&mut windows, 0), blocks, block_starts, match_at);
}

/// [`scan_blocks`] with the masks of `windows`, whose text holds `s` from `at` on. The byte after
/// `s` there, if any, must be hard for `block_starts` (it then ends every window's valid bytes
/// inside `s`, as the end of `s` does for `s`'s own windows, whose bytes past the end read as
/// zero); the pieces are then those of `s` alone. Checked in debug builds where `blocks` (a digit counts as hard
/// there: the one caller with a shared window, DeepSeek-V3's third stage, has no digit class).
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
fn scan_blocks_in<S: Sink>(
    s: &[u8],
    base: usize,
    sink: &mut S,
    (windows, at): (&mut Windows<'_>, usize),
    blocks: bool,
    block_starts: impl Fn(AsciiClasses, &[u8], usize) -> u64,
    mut match_at: impl FnMut(&[u8], usize) -> Option<usize>,
) {
    debug_assert!(
        !blocks
            || windows.s.get(at..at + s.len()) == Some(s)
                && windows.s.get(at + s.len()).is_none_or(|&b| !(b.is_ascii_alphabetic()
                    || b == b' '
                    || b == b'\n'
                    || (b.is_ascii_punctuation() && b != b'\''))),
        "a shared window whose text does not hold the piece, or holds a byte after it that is not hard"
    );
    let n = s.len();
    let mut i = 0;
    let mut gap = 0;
    while i < n {
        // In text that is mostly non-ASCII (Chinese with ASCII digits and punctuation) a window
        // would hold a pre-token or two for its cost: 8 ASCII bytes ahead is the cheap sign that
        // it holds more (and an ASCII first byte the cheaper one, which a CJK character fails
        // without the 8-byte load).
        if blocks && gap == i && s[i] < 0x80 && bits::ascii8(s, i) {
            let mut starts = block_starts(windows.at(at + i), s, i) & !1;
            if starts != 0 {
                let mut prev = i;
                while starts != 0 {
                    let next = i + starts.trailing_zeros() as usize;
                    sink.piece(base + prev, base + next);
                    prev = next;
                    starts &= starts - 1;
                }
                i = prev;
                gap = prev;
                continue;
            }
        }
        if let Some(end) = match_at(s, i) {
            if gap < i {
                sink.piece(base + gap, base + i);
            }
            sink.piece(base + i, base + end);
            i = end;
            gap = end;
        } else {
            i += utf8_len(s[i]);
        }
    }
    if gap < n {
        sink.piece(base + gap, base + n);
    }
}

/// The class masks of a text's aligned 64-byte blocks, two at a time, so that the window from any
/// position is two shifts per mask and each block is classified once however often the scanner
/// falls back to the per-character path inside it. Bytes past the end read as zero, a hard byte.
struct Windows<'s> {
    s: &'s [u8],
    kernel: Kernel,
    /// Start of the block in `lo` (a multiple of [`BLOCK`]; `usize::MAX` before the first); `hi`
    /// is the block after it.
    at: usize,
    lo: AsciiClasses,
    hi: AsciiClasses,
}

impl<'s> Windows<'s> {
    fn new(s: &'s [u8], kernel: Kernel) -> Self {
        Windows { s, kernel, at: usize::MAX, lo: AsciiClasses::default(), hi: AsciiClasses::default() }
    }

    fn block(&self, at: usize) -> AsciiClasses {
        if at >= self.s.len() {
            return AsciiClasses::default();
        }
        match self.s.get(at..at + BLOCK).and_then(|b| <&[u8; BLOCK]>::try_from(b).ok()) {
            Some(block) => self.kernel.ascii_classes(block),
            None => {
                let mut block = [0u8; BLOCK];
                let tail = self.s.get(at..).unwrap_or_default();
                block[..tail.len()].copy_from_slice(tail);
                self.kernel.ascii_classes(&block)
            }
        }
    }

    /// The masks of the 64 bytes from `i`.
    #[inline(always)]
    fn at(&mut self, i: usize) -> AsciiClasses {
        let at = i & !(BLOCK - 1);
        if at != self.at {
            self.lo = if at == self.at.wrapping_add(BLOCK) { self.hi } else { self.block(at) };
            self.hi = self.block(at + BLOCK);
            self.at = at;
        }
        AsciiClasses::window(&self.lo, &self.hi, i - at)
    }
}

/// The pre-token starts of the cl100k / Qwen pattern (`MAX_DIGITS` 3 / 1) or of DeepSeek-V3's
/// third stage (`MAX_DIGITS` 0) in the window `m`, which begins at a pre-token start (bit 0).
/// Only the bytes before the window's first hard byte `h` (see [`AsciiClasses`]: a quote, white
/// space other than `' '` and `'\n'`, a control or non-ASCII byte; for DeepSeek also a digit) are
/// read, and a start is set only where those bytes decide it; the first start the mask misses
/// lies after its last set bit, so every piece between two set bits is exact.
///
/// Over letters `L`, digits `D`, spaces `S`, punctuation `P` and line feeds `N` both patterns
/// reduce to: a letter run is one piece, joined by the one `S` or `P` before it when that byte
/// starts a piece (cl100k's `[^\r\n\p{L}\p{N}]?\p{L}+`; DeepSeek's
/// `[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+` and its ASCII-punctuation-then-`[A-Za-z]+`; an `N` is
/// never such a prefix, so a letter after it starts a piece); a `P` starts a piece after `L`, `D`
/// or `N` and otherwise belongs to the `S` or punctuation run before it (` ?[^\s\p{L}\p{N}]+` /
/// ` ?[\p{P}\p{S}]+`, which end at `L`, `D`, `S` or `N`), and the `N`s right after a
/// punctuation run belong to its piece (`[\r\n]*`); a digit run splits every `MAX_DIGITS`
/// digits. The other `S` and `N` bytes form white-space runs, each of which starts a piece; in a
/// run with an `N`, `\s*[\r\n]+` takes everything up to its last `N` (so no byte before that
/// is a start), and the spaces after it are a run of their own; a run of spaces gives back its
/// last one (`\s+(?!\S)`) when an `L`, `D` or `P` follows it (decided only when that byte is
/// before `h`: before it no later `N` can extend the run). The byte before the window reads as a
/// letter, which makes bit 0 a start under every rule. Finally `h` itself is a start when it is
/// ASCII and a letter or digit run ends before it: such a run ends at any ASCII non-letter
/// (non-digit) byte, and the next piece (a match, or for DeepSeek a skipped digit) starts there.
#[inline(always)]
fn block_starts<const MAX_DIGITS: usize>(m: AsciiClasses) -> u64 {
    let core = block_starts_core::<MAX_DIGITS>(m, 0);
    let mut starts = core.starts;
    if ((core.l | core.d) << 1) & core.first_hard & !m.high != 0 {
        starts |= core.first_hard;
    }
    starts
}

/// What [`block_starts`] derives before its rule at the first hard byte, and the masks that rule
/// (and [`o200k_block_starts`]) read.
struct BlockStarts {
    starts: u64,
    /// Letters and digits before the first hard byte.
    l: u64,
    d: u64,
    /// The bytes before the first hard byte.
    valid: u64,
    /// The first hard byte's bit (0 when the window has none).
    first_hard: u64,
}

/// [`block_starts`]'s rules, with the bytes of `hard_too` hard as well (o200k's, see
/// [`o200k_block_starts`]).
#[inline(always)]
fn block_starts_core<const MAX_DIGITS: usize>(m: AsciiClasses, hard_too: u64) -> BlockStarts {
    let digit = if MAX_DIGITS == 0 { 0 } else { m.digit };
    let hard = !(m.letter | digit | m.space | m.punct | m.nl) | hard_too;
    let first_hard = hard & hard.wrapping_neg();
    let valid = first_hard.wrapping_sub(1);
    let (l, d, sp, p, n) = (m.letter & valid, digit & valid, m.space & valid, m.punct & valid, m.nl & valid);
    let (l_prev, d_prev, s_prev, p_prev, n_prev) = ((l << 1) | 1, d << 1, sp << 1, p << 1, n << 1);
    let mut starts = 1
        | (sp & s_prev & ((l | d | p) >> 1))
        | (p & (l_prev | d_prev | n_prev))
        | (l & (d_prev | n_prev))
        | (l & p_prev & ((p | sp) << 2));
    if n == 0 {
        // No line feed: every white-space run is a run of spaces.
        starts |= sp & !s_prev;
    } else {
        // The line feeds right after punctuation, and those after them, are its piece's
        // `[\r\n]*`: adding each such run's first bit carries through the run and clears it.
        let taken = n & !n.wrapping_add(n & p_prev);
        // White-space runs: each starts a piece.
        let w = sp | (n & !taken);
        starts |= w & !(w << 1);
        // The first space after a line feed of a run starts the spaces after its last one, if
        // that line feed is the last: if the spaces end at a letter, digit or punctuation (not at
        // a line feed, nor at `h`, after which one may follow). Marked from the run's last
        // space down over the spaces before it, doubling the distance at each step.
        let after_break = sp & ((n & !taken) << 1);
        if after_break != 0 {
            let mut closed = ((l | d | p) >> 1) & sp;
            let mut run = sp;
            let mut k = 1;
            while k < BLOCK {
                closed |= (closed >> k) & run;
                run &= run >> k;
                k <<= 1;
            }
            starts |= after_break & closed;
        }
    }
    starts |= if MAX_DIGITS <= 1 {
        d
    } else {
        // Group starts: each run's first digit, then every `MAX_DIGITS`-th digit after one.
        let mut whole = d;
        for k in 1..MAX_DIGITS {
            whole &= d << k;
        }
        let mut groups = d & !d_prev;
        loop {
            let more = (groups << MAX_DIGITS) & whole & !groups;
            if more == 0 {
                break groups;
            }
            groups |= more;
        }
    };
    BlockStarts { starts, l, d, valid, first_hard }
}

/// [`block_starts`] for o200k's pattern (gpt4o, gptoss) in the window `m` of `s` that begins at
/// `i`. Over ASCII bytes before the first hard byte its letter alternatives,
/// `[^\r\n\p{L}\p{N}]?[upper]*[lower]+(?i:'s|...)?` then the same with `[upper]+[lower]*`, take
/// an optional prefix character as cl100k's `[^\r\n\p{L}\p{N}]?\p{L}+` does, and then the longest
/// run of upper-case letters followed by lower-case ones (the first alternative where a lower-case
/// letter follows the upper run, else the second; in ASCII no letter is in both sets, so there is
/// no back-off): a letter run is split before each upper-case letter that follows a lower-case
/// one, and nowhere else. Digits go by `\p{N}{1,3}`; ` ?[^\s\p{L}\p{N}]+[\r\n/]*` takes a
/// punctuation run as cl100k's ` ?[^\s\p{L}\p{N}]+[\r\n]*` does (`/` is punctuation, and `\r`
/// is hard) where no punctuation follows the line feeds after it (a `/` there would join the
/// piece too: such a byte is made hard); white space is cl100k's. So the starts are
/// [`block_starts`]'s with `MAX_DIGITS` 3 plus the lower-to-upper ones, except at the first hard
/// byte: after a digit run it is a start as there, after a letter run only when it is not an
/// apostrophe (o200k's contraction suffix belongs to the letter piece before it: `'s` may extend
/// it).
#[inline(always)]
fn o200k_block_starts(m: AsciiClasses, s: &[u8], i: usize) -> u64 {
    // The punctuation after the line feeds that follow punctuation: a `/` there belongs to the
    // piece before (`[\r\n/]*`), and there is no slash mask.
    let nl = m.nl;
    let after_taken = m.punct & ((nl & !nl.wrapping_add(nl & (m.punct << 1))) << 1);
    let core = block_starts_core::<3>(m, after_taken);
    let upper = m.upper & core.valid;
    let lower = core.l & !upper;
    let mut starts = core.starts | (upper & (lower << 1));
    let ends_before_hard = |run: u64| (run << 1) & core.first_hard & !m.high != 0;
    if ends_before_hard(core.d)
        || (ends_before_hard(core.l)
            && s.get(i + core.first_hard.trailing_zeros() as usize).is_some_and(|&b| b != b'\''))
    {
        starts |= core.first_hard;
    }
    starts
}

/// [`block_starts`] for GPT-2's pattern (`'s|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`):
/// each run of letters, of digits and of punctuation is one piece, joined by the space before it
/// (only a space prefixes here), and space runs are as in [`block_starts`]. At the first hard
/// byte a letter or digit run ends whenever that byte is ASCII; a punctuation run does not (it
/// goes on over a quote or a control character).
#[inline(always)]
fn gpt2_block_starts(m: AsciiClasses) -> u64 {
    let hard = !(m.letter | m.digit | m.space | m.punct);
    let first_hard = hard & hard.wrapping_neg();
    let valid = first_hard.wrapping_sub(1);
    let (l, d, sp, p) = (m.letter & valid, m.digit & valid, m.space & valid, m.punct & valid);
    let s_prev = sp << 1;
    let mut starts = 1
        | (sp & !s_prev)
        | (sp & s_prev & ((l | d | p) >> 1))
        | (l & !(l << 1) & !s_prev)
        | (d & !(d << 1) & !s_prev)
        | (p & !(p << 1) & !s_prev);
    if ((l | d) << 1) & first_hard & !m.high != 0 {
        starts |= first_hard;
    }
    starts
}

/// The first position from `i` whose byte `keep` rejects (the scalar twin of the 8-byte skips).
#[inline(always)]
fn skip_bytewise(s: &[u8], mut i: usize, keep: impl Fn(u8) -> bool) -> usize {
    while i < s.len() && keep(s[i]) {
        i += 1;
    }
    i
}

#[inline(always)]
fn utf8_len(b: u8) -> usize {
    match b {
        0..=0x7f => 1,
        0x80..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// End of the run of characters of `set` starting at `i`.
#[inline(always)]
fn run(c: Classes, s: &[u8], mut i: usize, set: u16) -> usize {
    while i < s.len() {
        let (class, len) = c.at(s, i);
        if !in_set(class, set) {
            break;
        }
        i += len;
    }
    i
}

/// The ASCII-letter masks of the block of `s` that was last asked about: letter runs end at a
/// `trailing_zeros` of them instead of a class lookup per byte.
struct Letters<'s> {
    s: &'s [u8],
    kernel: Kernel,
    /// Start of the block in `cases` (a multiple of [`BLOCK`]; `usize::MAX` before the first).
    at: usize,
    cases: Cases,
}

impl<'s> Letters<'s> {
    fn new(s: &'s [u8], kernel: Kernel) -> Self {
        Letters { s, kernel, at: usize::MAX, cases: Cases::default() }
    }

    #[inline(never)]
    fn load(&mut self, at: usize) {
        self.at = at;
        self.cases = match self.s.get(at..at + BLOCK).and_then(|b| <&[u8; BLOCK]>::try_from(b).ok()) {
            Some(block) => self.kernel.cases(block),
            None => {
                // The last, partial block: zero padding is not a letter, so runs stop at the end.
                let mut block = [0u8; BLOCK];
                let tail = self.s.get(at..).unwrap_or_default();
                block[..tail.len()].copy_from_slice(tail);
                self.kernel.cases(&block)
            }
        };
    }

    /// End of the run starting at `i` of the bytes whose bits `pick` sets in a block's masks.
    #[inline(always)]
    fn end_of(&mut self, mut i: usize, pick: impl Fn(Cases) -> u64) -> usize {
        let n = self.s.len();
        while i < n {
            let at = i & !(BLOCK - 1);
            if at != self.at {
                self.load(at);
            }
            let rest = !pick(self.cases) >> (i - at);
            if rest != 0 {
                return (i + rest.trailing_zeros() as usize).min(n);
            }
            i = at + BLOCK;
        }
        n
    }

    /// End of the run of ASCII letters starting at `i`.
    #[inline(always)]
    fn ascii_end(&mut self, i: usize) -> usize {
        self.end_of(i, |m| m.upper | m.lower)
    }

    /// o200k's `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*` from `k`, and the end of its last character that
    /// is also in the lower-ish set (see [`o200k_upper_lower`]). In ASCII the set is `[A-Z]`, none
    /// of which is lower-ish; a run that meets a multi-byte character goes on character by
    /// character, except that runs of CJK ideographs go by their lead bytes, 16 bytes at a time
    /// ([`bits::lead3_run_end`]): they are all `\p{Lo}` (see [`CJK_LEAD_FIRST`]), which is in
    /// both sets, so such a run's end is also the end of its last character in both.
    #[inline(always)]
    fn o200k_upper(&mut self, c: Classes, k: usize) -> (usize, Option<usize>) {
        let mut u = self.end_of(k, |m| m.upper);
        let mut last_both = None;
        if self.s.get(u).is_some_and(|&b| b >= 0x80) {
            while let Some(&b) = self.s.get(u) {
                if b.wrapping_sub(CJK_LEAD_FIRST) <= CJK_LEAD_LAST - CJK_LEAD_FIRST {
                    u = bits::lead3_run_end(self.kernel, self.s, u, CJK_LEAD_FIRST, CJK_LEAD_LAST);
                    last_both = Some(u);
                    continue;
                }
                let (class, len) = c.at(self.s, u);
                if !in_set(class, S_UPPER) {
                    break;
                }
                if in_set(class, S_LOWER) {
                    last_both = Some(u + len);
                }
                u += len;
            }
        }
        (u, last_both)
    }

    /// o200k's `[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` from `k`: `[a-z]` in ASCII.
    #[inline(always)]
    fn o200k_lower(&mut self, c: Classes, k: usize) -> usize {
        let end = self.end_of(k, |m| m.lower);
        match self.s.get(end) {
            Some(&b) if b >= 0x80 => run(c, self.s, end, S_LOWER),
            _ => end,
        }
    }

    /// End of the run of characters of `set` (a set holding every ASCII letter, no other ASCII
    /// character, and `\p{Lo}`: `\p{L}` or `[\p{L}\p{M}]`) starting at `i`. The ASCII letters go
    /// by the mask and runs of CJK ideographs by their lead bytes, 16 bytes at a time
    /// ([`bits::lead3_run_end`]; all `\p{Lo}`, see [`CJK_LEAD_FIRST`]); a run that meets another
    /// multi-byte character goes on character by character.
    #[inline(always)]
    fn run(&mut self, c: Classes, i: usize, set: u16) -> usize {
        // No ASCII-letter masks where the run starts with a multi-byte character (Chinese text
        // may have no ASCII letter in a whole block).
        let mut end = i;
        while let Some(&b) = self.s.get(end) {
            if b < 0x80 {
                if !b.is_ascii_alphabetic() {
                    break;
                }
                end = self.ascii_end(end);
            } else if b.wrapping_sub(CJK_LEAD_FIRST) <= CJK_LEAD_LAST - CJK_LEAD_FIRST {
                end = bits::lead3_run_end(self.kernel, self.s, end, CJK_LEAD_FIRST, CJK_LEAD_LAST);
            } else {
                let (class, len) = c.at(self.s, end);
                if !in_set(class, set) {
                    break;
                }
                end += len;
            }
        }
        end
    }
}

/// End of the run of `\r` and `\n` starting at `i` (`[\r\n]*`).
#[inline(always)]
fn newlines(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && matches!(s[i], b'\r' | b'\n') {
        i += 1;
    }
    i
}

/// End of `[\r\n/]*` starting at `i`.
#[inline(always)]
fn newlines_or_slashes(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && matches!(s[i], b'\r' | b'\n' | b'/') {
        i += 1;
    }
    i
}

/// The class of the character at `i`, or `None` at the end.
#[inline(always)]
fn class_at(c: Classes, s: &[u8], i: usize) -> Option<(u8, usize)> {
    (i < s.len()).then(|| c.at(s, i))
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `i`. Case folding as Oniguruma's: `s` also matches `ſ`
/// (U+017F), whose simple case folding is `s`; no other character folds to these letters.
#[inline]
fn contraction_ci(s: &[u8], i: usize) -> Option<usize> {
    if s.get(i) != Some(&b'\'') {
        return None;
    }
    let lower = |j: usize| s.get(j).map(|b| b.to_ascii_lowercase());
    match lower(i + 1)? {
        b's' | b't' | b'm' | b'd' => Some(i + 2),
        b'r' | b'v' if lower(i + 2) == Some(b'e') => Some(i + 3),
        b'l' if lower(i + 2) == Some(b'l') => Some(i + 3),
        0xc5 if s.get(i + 2) == Some(&0xbf) => Some(i + 3),
        _ => None,
    }
}

/// GPT-2's case-sensitive `'s|'t|'re|'ve|'m|'ll|'d` at `i`.
#[inline]
fn contraction_cs(s: &[u8], i: usize) -> Option<usize> {
    if s.get(i) != Some(&b'\'') {
        return None;
    }
    match *s.get(i + 1)? {
        b's' | b't' | b'm' | b'd' => Some(i + 2),
        b'r' | b'v' if s.get(i + 2) == Some(&b'e') => Some(i + 3),
        b'l' if s.get(i + 2) == Some(&b'l') => Some(i + 3),
        _ => None,
    }
}

/// The white-space alternatives at `i` (a `\s` character): `\s*[\r\n]+` when `line_breaks`, then
/// `\s+(?!\S)`, then `\s+`.
#[inline]
fn white_space(c: Classes, s: &[u8], i: usize, line_breaks: bool) -> usize {
    let mut j = i;
    let mut last_char = i;
    let mut last_break = None;
    while j < s.len() {
        if s[j] == b' ' {
            // A run of plain spaces (indentation, padding, tables): 8 bytes at a time, since
            // such runs can be long and none of them is a line break.
            let k = bits::byte_run_end(s, j + 1, b' ');
            last_char = k - 1;
            j = k;
            continue;
        }
        let (class, len) = c.at(s, j);
        if class != SPACE {
            break;
        }
        if line_breaks && matches!(s[j], b'\r' | b'\n') {
            last_break = Some(j);
        }
        last_char = j;
        j += len;
    }
    if let Some(q) = last_break {
        // `\s*` backs off to the last line break, which `[\r\n]+` takes alone.
        return q + 1;
    }
    if j == s.len() || last_char == i {
        // At the end `(?!\S)` holds; a single space before `\S` is taken by `\s+`.
        return j;
    }
    // `\s+` gives back the last space so that `(?!\S)` holds.
    last_char
}

#[inline(always)]
fn cl100k_at<const MAX_DIGITS: usize>(c: Classes, l: &mut Letters<'_>, s: &[u8], i: usize) -> Option<usize> {
    cl100k_at_dyn(c, l, s, i, MAX_DIGITS)
}

#[inline(always)]
fn cl100k_at_dyn(c: Classes, l: &mut Letters<'_>, s: &[u8], i: usize, max_digits: usize) -> Option<usize> {
    let b = s[i];
    if b == b'\'' {
        if let Some(end) = contraction_ci(s, i) {
            return Some(end);
        }
    }
    let (class, len) = c.at(s, i);
    if in_set(class, S_L) {
        return Some(l.run(c, i + len, S_L));
    }
    if class == NUMBER {
        let mut j = i + len;
        for _ in 1..max_digits {
            match class_at(c, s, j) {
                Some((NUMBER, l)) => j += l,
                _ => break,
            }
        }
        return Some(j);
    }
    // `[^\r\n\p{L}\p{N}]?\p{L}+` with the optional character taken.
    if b != b'\r' && b != b'\n' {
        if let Some((next, next_len)) = class_at(c, s, i + len) {
            if in_set(next, S_L) {
                return Some(l.run(c, i + len + next_len, S_L));
            }
        }
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    if b == b' ' {
        if let Some((next, l)) = class_at(c, s, i + 1) {
            if in_set(next, S_NOT_WS_L_N) {
                return Some(newlines(s, run(c, s, i + 1 + l, S_NOT_WS_L_N)));
            }
        }
    }
    if in_set(class, S_NOT_WS_L_N) {
        return Some(newlines(s, run(c, s, i + len, S_NOT_WS_L_N)));
    }
    Some(white_space(c, s, i, true))
}

#[inline(always)]
fn gpt2_at(c: Classes, l: &mut Letters<'_>, s: &[u8], i: usize) -> Option<usize> {
    let b = s[i];
    if b == b'\'' {
        if let Some(end) = contraction_cs(s, i) {
            return Some(end);
        }
    }
    if b == b' ' {
        if let Some((next, next_len)) = class_at(c, s, i + 1) {
            if in_set(next, S_L) {
                return Some(l.run(c, i + 1 + next_len, S_L));
            }
            for set in [S_N, S_NOT_WS_L_N] {
                if in_set(next, set) {
                    return Some(run(c, s, i + 1 + next_len, set));
                }
            }
        }
    }
    let (class, len) = c.at(s, i);
    if in_set(class, S_L) {
        return Some(l.run(c, i + len, S_L));
    }
    for set in [S_N, S_NOT_WS_L_N] {
        if in_set(class, set) {
            return Some(run(c, s, i + len, set));
        }
    }
    Some(white_space(c, s, i, false))
}

/// Whether no letter alternative of o200k can match from `k`: the end, or an ASCII byte that is
/// not a letter (neither upper- nor lower-ish).
#[inline(always)]
fn o200k_no_letter_at(s: &[u8], k: usize) -> bool {
    s.get(k).is_none_or(|&b| b < 0x80 && !b.is_ascii_alphabetic())
}

/// o200k's `[upper]*[lower]+` from `k`: the upper run is greedy and backs off to the last
/// character that is also lower (`\p{Lm}`, `\p{Lo}`, `\p{M}`) when no lower character follows it.
#[inline]
fn o200k_upper_lower(c: Classes, l: &mut Letters<'_>, s: &[u8], k: usize) -> Option<usize> {
    let (u, last_both) = l.o200k_upper(c, k);
    match class_at(c, s, u) {
        Some((class, _)) if in_set(class, S_LOWER) => Some(l.o200k_lower(c, u)),
        _ => last_both,
    }
}

/// o200k's `[upper]+[lower]*` from `k`.
#[inline]
fn o200k_upper_then_lower(c: Classes, l: &mut Letters<'_>, k: usize) -> Option<usize> {
    let (u, _) = l.o200k_upper(c, k);
    (u > k).then(|| l.o200k_lower(c, u))
}

#[inline(always)]
fn o200k_at(c: Classes, l: &mut Letters<'_>, s: &[u8], i: usize) -> Option<usize> {
    let b = s[i];
    let (class, len) = c.at(s, i);
    let prefix = b != b'\r' && b != b'\n' && !in_set(class, S_L | S_N);
    // The letter alternatives are tried (each with a prefix, then without) only where their
    // first letter can be: a character of either letter set at `i`, or after the prefix at
    // `i + len`. Code and punctuation reach this scanner mostly at a character that is neither
    // (a line break, a quote, punctuation before a digit or a line break), where the four calls
    // each set up their runs to fail.
    let prefixed = prefix && !o200k_no_letter_at(s, i + len);
    let letter = in_set(class, S_UPPER | S_LOWER);
    let with_contraction = |end: usize| contraction_ci(s, end).unwrap_or(end);
    if prefixed {
        if let Some(end) = o200k_upper_lower(c, l, s, i + len) {
            return Some(with_contraction(end));
        }
    }
    if letter {
        if let Some(end) = o200k_upper_lower(c, l, s, i) {
            return Some(with_contraction(end));
        }
    }
    if prefixed {
        if let Some(end) = o200k_upper_then_lower(c, l, i + len) {
            return Some(with_contraction(end));
        }
    }
    if letter {
        if let Some(end) = o200k_upper_then_lower(c, l, i) {
            return Some(with_contraction(end));
        }
    }
    if class == NUMBER {
        let mut j = i + len;
        for _ in 1..3 {
            match class_at(c, s, j) {
                Some((NUMBER, l)) => j += l,
                _ => break,
            }
        }
        return Some(j);
    }
    if b == b' ' {
        if let Some((next, l)) = class_at(c, s, i + 1) {
            if in_set(next, S_NOT_WS_L_N) {
                return Some(newlines_or_slashes(s, run(c, s, i + 1 + l, S_NOT_WS_L_N)));
            }
        }
    }
    if in_set(class, S_NOT_WS_L_N) {
        return Some(newlines_or_slashes(s, run(c, s, i + len, S_NOT_WS_L_N)));
    }
    Some(white_space(c, s, i, true))
}

#[inline(always)]
fn deepseek_at(c: Classes, l: &mut Letters<'_>, s: &[u8], i: usize) -> Option<usize> {
    let b = s[i];
    // `[!"#...~][A-Za-z]+`
    if b.is_ascii_punctuation() && s.get(i + 1).is_some_and(u8::is_ascii_alphabetic) {
        return Some(l.ascii_end(i + 2));
    }
    let (class, len) = c.at(s, i);
    // `[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+`
    if b != b'\r' && b != b'\n' && !in_set(class, S_L | S_PS) {
        if let Some((next, next_len)) = class_at(c, s, i + len) {
            if in_set(next, S_LM) {
                return Some(l.run(c, i + len + next_len, S_LM));
            }
        }
    }
    if in_set(class, S_LM) {
        return Some(l.run(c, i + len, S_LM));
    }
    // ` ?[\p{P}\p{S}]+[\r\n]*`
    if b == b' ' {
        if let Some((next, l)) = class_at(c, s, i + 1) {
            if in_set(next, S_PS) {
                return Some(newlines(s, run(c, s, i + 1 + l, S_PS)));
            }
        }
    }
    if in_set(class, S_PS) {
        return Some(newlines(s, run(c, s, i + len, S_PS)));
    }
    if class == SPACE {
        return Some(white_space(c, s, i, true));
    }
    None
}

#[inline(always)]
fn digits_at(c: Classes, s: &[u8], i: usize) -> Option<usize> {
    let (class, len) = c.at(s, i);
    (class == NUMBER).then(|| digit_group_end(c, s, i + len))
}

/// End of `\p{N}{1,3}` whose first character ends at `j`.
#[inline(always)]
fn digit_group_end(c: Classes, s: &[u8], mut j: usize) -> usize {
    for _ in 1..3 {
        match class_at(c, s, j) {
            Some((NUMBER, l)) => j += l,
            _ => break,
        }
    }
    j
}

/// The code point of the character at `j` when it is one of [`CJK_RUN`]'s (U+4E00..=U+9FA5,
/// U+3040..=U+30FF: 3-byte characters led by 0xe3..=0xe9).
#[inline(always)]
fn deepseek_cjk_at(s: &[u8], j: usize) -> Option<u32> {
    let &[b0, b1, b2] = s.get(j..j + 3)? else { return None };
    if !(0xe3..=0xe9).contains(&b0) {
        return None;
    }
    let cp = (u32::from(b0 & 0x0f) << 12) | (u32::from(b1 & 0x3f) << 6) | u32::from(b2 & 0x3f);
    matches!(cp, 0x4e00..=0x9fa5 | 0x3040..=0x30ff).then_some(cp)
}

/// End of the run of [`CJK_RUN`]'s characters from `i` (`i` itself when none starts there), and
/// whether all of them are in `[\p{L}\p{M}]`. The Chinese range U+4E00..=U+9FA5 is all `\p{Lo}`
/// (see [`PreTokenizer::deepseek_fused`]); only kana are looked up.
#[inline(always)]
fn deepseek_cjk_run(c: Classes, kernel: Kernel, s: &[u8], i: usize) -> (usize, bool) {
    let mut j = i;
    let mut letters = true;
    while let Some(&b0) = s.get(j) {
        // Lead bytes 0xe5..=0xe8: U+5000..=U+8FFF, most of Chinese text, decided by the lead
        // byte, 16 bytes at a time.
        if b0.wrapping_sub(0xe5) < 4 {
            j = bits::lead3_run_end(kernel, s, j, 0xe5, 0xe8);
            continue;
        }
        let Some(cp) = deepseek_cjk_at(s, j) else { break };
        if cp < 0x4e00 {
            letters &= in_set(c.at(s, j).0, S_LM);
        }
        j += 3;
    }
    // `j` is a character boundary of valid UTF-8, so at most the length; `min` keeps a slice by
    // it in bounds whatever the input.
    (j.min(s.len()), letters)
}

/// [`CJK_RUN`]'s match at `i`, for the stages run one after the other.
fn cjk_run_at(s: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    while deepseek_cjk_at(s, j).is_some() {
        j += 3;
    }
    (j > i).then_some(j)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::random_word;

    fn pieces(pt: &PreTokenizer, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        pt.split(text, &mut |s: usize, e: usize| out.push(text[s..e].to_string()));
        out
    }

    /// What HF computes: Oniguruma's find_iter, isolated.
    fn oracle(pattern: &str, text: &str) -> Vec<String> {
        pieces(&PreTokenizer::new(vec![Stage::Onig(onig::Regex::new(pattern).unwrap())]), text)
    }

    const ALL: [&str; 7] = [CL100K, QWEN, O200K, DEEPSEEK, GPT2, DIGITS, CJK_RUN];

    /// Every scanner, with the bulk kernel (its block path on texts of any length) and with its
    /// scalar twin, against Oniguruma.
    fn check(text: &str) {
        check_scanners(text);
        check_deepseek(text);
    }

    /// [`check`] without DeepSeek-V3's stages composed.
    fn check_scanners(text: &str) {
        for pattern in ALL {
            let want = oracle(pattern, text);
            for kernel in [Kernel::Bulk, Kernel::Scalar] {
                let stage = Stage::from_pattern(pattern).unwrap();
                assert!(!matches!(stage, Stage::Onig(_)));
                let name = format!("{stage:?}");
                let pt = PreTokenizer::new(vec![stage]).with_kernel(kernel).with_block_min(0);
                assert_eq!(pieces(&pt, text), want, "{name} ({kernel:?}) on {text:?}");
            }
        }
    }

    /// DeepSeek-V3's three stages: the fused scanner (both kernels, with the block path forced and
    /// with the engine's gate) and the stages run one after the other, against Oniguruma running
    /// all three.
    fn check_deepseek(text: &str) {
        let onig = |pattern| Stage::Onig(onig::Regex::new(pattern).unwrap());
        let want = pieces(&PreTokenizer::new(vec![onig(DIGITS), onig(CJK_RUN), onig(DEEPSEEK)]), text);
        let stages = || vec![Stage::Digits, Stage::CjkRun, Stage::DeepSeek];
        for kernel in [Kernel::Bulk, Kernel::Scalar] {
            let fused = PreTokenizer::new(stages()).with_kernel(kernel);
            assert!(fused.fused_deepseek);
            assert_eq!(pieces(&fused, text), want, "fused ({kernel:?}) on {text:?}");
            assert_eq!(pieces(&fused.with_block_min(0), text), want, "fused, blocks ({kernel:?}) on {text:?}");
            let staged = PreTokenizer::new(stages()).with_kernel(kernel).with_block_min(0).staged();
            assert_eq!(pieces(&staged, text), want, "staged ({kernel:?}) on {text:?}");
        }
    }

    /// `count` random strings of fewer than `max_len` pieces of `pool` ([`random_word`], seeded
    /// with `seed`), each handed to `f` with its number.
    fn random_texts<T: Copy>(seed: u64, pool: &[T], count: usize, max_len: u64, mut f: impl FnMut(usize, &str))
    where
        String: FromIterator<T>,
    {
        let mut state = seed;
        for k in 0..count {
            let len = (crate::engine::xorshift(&mut state) % max_len) as usize;
            let text: String = random_word(&mut state, pool, len).into_iter().collect();
            f(k, &text);
        }
    }

    /// What the fused DeepSeek-V3 scanner relies on: U+4E00..=U+9FA5 is all `\p{Lo}`, and no
    /// character of [`CJK_RUN`]'s ranges is `\p{N}` (`classes_match_oniguruma` ties the classes to
    /// Oniguruma's).
    #[test]
    fn deepseek_cjk_ranges() {
        use crate::engine::bpe::unicode::{class_of, LO};
        for cp in (0x3040..=0x30ff).chain(0x4e00..=0x9fa5) {
            let ch = char::from_u32(cp).unwrap();
            let mut buf = [0u8; 4];
            assert_eq!(deepseek_cjk_at(ch.encode_utf8(&mut buf).as_bytes(), 0), Some(cp));
            assert_ne!(class_of(ch), NUMBER, "U+{cp:04X}");
            if cp >= 0x4e00 {
                assert_eq!(class_of(ch), LO, "U+{cp:04X}");
            }
        }
        for ch in ['\u{303f}', '\u{3100}', '\u{4dff}', '\u{9fa6}', 'a', '\u{e3}', '\u{10000}'] {
            let mut buf = [0u8; 4];
            assert_eq!(deepseek_cjk_at(ch.encode_utf8(&mut buf).as_bytes(), 0), None, "{ch:?}");
        }
    }

    /// DeepSeek-V3's stages on mixtures of CJK runs (Chinese, kana with their marks, symbols and
    /// punctuation, characters just outside the ranges), digits of every kind, punctuation and
    /// white space: where the fused scanner's segments start and end; and the other scanners'
    /// letter runs over the same mixtures.
    #[test]
    fn random_cjk_against_oniguruma() {
        let pool: Vec<&str> = vec![
            "中",
            "文",
            "龥",
            "一",
            "丁",
            "あ",
            "カ",
            "\u{3099}",
            "\u{309b}",
            "ゝ",
            "ー",
            "・",
            "゠",
            "ヿ",
            "\u{3040}",
            "\u{3097}",
            "㐀",
            "\u{9fa6}",
            "〇",
            "，",
            "。",
            "「",
            "」",
            "（",
            "、",
            "0",
            "1",
            "9",
            "٣",
            "Ⅳ",
            "½",
            "１",
            " ",
            "  ",
            "\n",
            "\r\n",
            "\t",
            "\u{3000}",
            "a",
            "Z",
            "abc",
            ".",
            ",",
            "!",
            "-",
            "'",
            "(",
            "é",
            "\u{301}",
            "한",
            "中文字",
            "12345",
            // Runs longer than `lead3_run_end`'s 16-byte windows, and the lead bytes around
            // the ones it skips by (U+9FFF, U+4DC0 `\p{So}`, U+4E00).
            "中文字中文字中文字",
            "鿿",
            "䷀",
            "一丁七万丈三上下",
        ];
        // The other scanners on one string in four: their letter runs cross CJK ideographs by
        // lead byte too.
        random_texts(0x6a09_e667_f3bc_c908, &pool, 3_000, 24, |k, text| {
            check_deepseek(text);
            if k % 4 == 0 {
                check_scanners(text);
            }
        });
    }

    /// o200k's two letter alternatives over CJK runs (crossed by lead byte) next to characters
    /// of every case class: upper, lower, titlecase, modifier letters, marks, and contractions,
    /// so that the runs' back-off to the last character in both sets meets the CJK skip on
    /// either side.
    #[test]
    fn random_o200k_cjk_against_oniguruma() {
        let pool: Vec<&str> = vec![
            "中",
            "文字",
            "中文字中文字中文字",
            "一丁七万丈三上下",
            "鿿",
            "䷀",
            "あ",
            "ー",
            "A",
            "Z",
            "a",
            "z",
            "É",
            "é",
            "Σ",
            "σ",
            "ǅ",
            "ʰ",
            "\u{301}",
            "'s",
            "'LL",
            "，",
            "。",
            " ",
            "\n",
            "1",
            "١",
        ];
        random_texts(0xbb67_ae85_84ca_a73b, &pool, 2_000, 16, |_, text| {
            let want = oracle(O200K, text);
            for kernel in [Kernel::Bulk, Kernel::Scalar] {
                let pt = PreTokenizer::new(vec![Stage::O200k]).with_kernel(kernel);
                assert_eq!(pieces(&pt, text), want, "o200k ({kernel:?}) on {text:?}");
            }
        });
    }

    #[test]
    fn traps() {
        for text in [
            "",
            " \n  \n",
            ".\n/",
            "\t\t/Documentation",
            "\n        \n",
            "12345678 1 22 333 4444",
            "'S 'll 'LL 'Re I'M it's don'T 'x '",
            "HelloWorld HELLOworld helloWORLD ABC abc DŽungla ǅx",
            "中文字符，日本語のテキスト、カタカナ。한국어",
            "2024年1月1日，我们在東京（とうきょう）見た。abc中文def ,中 .中 1中2 中1 ゛ガ ヴ\u{3099}゠・ー12345中",
            "❤️ 👨‍👩‍👧 🇫🇷",
            "\x0b\x0c \u{85}\u{a0}\u{2028}\u{3000}x",
            "e\u{301}  \u{301}a \u{301}\u{302}",
            "aaaaaaaaaaaaaaaaaaaaaaaa",
            "     ",
            "   x",
            "x   ",
            "\r\n\r\n  \r\n",
            "a.b,c;d--e//f\n/g",
            "SGVsbG8gV29ybGQhIFRoaXMgaXMgYmFzZTY0Lg==",
            "function(a){return a+1};var x=[1,2,3];",
            "'ſ 'ſt \u{212a} 'K",
            "١٢٣٤ ⅣⅤ ½¾ x²",
            "\u{0}\u{1}\u{7f}\u{200b}\u{200d}\u{feff}",
            "ʰʲ ˈaː ǈǋ",
            "1234567 12 a1b2 x.y ..z  .a (b) a.b1.c 1.2.3 ...... x,y  ,z 99999999999 a--b -1 .5",
            "a  1  .  b   ;x  \ty \nz a. ..a .'s x's 12's (x)'ll",
            "f(x):\n    return x\n\n\n  \n  y = [1, 2]\n  \t\n x\n",
            "a)\n/b a)\n\n//c a)\n.d a)\n  /e a \n/f a\n\n/ g ./\n/h",
        ] {
            check(text);
        }
    }

    /// Runs of 0-40 spaces (skipped 8 bytes at a time; lengths around multiples of 8) between every kind of neighbour: the
    /// `\s+(?!\S)` back-off, line breaks and other white space before, inside and after the run.
    #[test]
    fn space_runs() {
        let ends = ["", "x", "\n", "\r\n", "\t", "\u{3000}", "\u{a0}", "1", ".", "中", " \n"];
        for n in [0, 1, 2, 3, 7, 8, 9, 10, 15, 16, 17, 24, 25, 33, 40] {
            for before in ends {
                for after in ends {
                    check(&format!("{before}{}{after}", " ".repeat(n)));
                    check(&format!("a{before}{}{after}{}b", " ".repeat(n), " ".repeat(n % 9)));
                }
            }
        }
    }

    /// Letter runs that cross, start or end at 64-byte block edges, with a multi-byte character, a
    /// contraction or a line break right at the edge (the bulk scanner's block mask).
    #[test]
    fn block_edges() {
        for lead in 0..70 {
            for tail in ["", "é", "x", "'s", "'ll", " ", "\r\n", "1", "中", ".", "\u{301}", "ſ", "ǅ", "ʰ", "É"] {
                check(&format!("{}{tail}abc", "a".repeat(lead)));
                check(&format!("{}{tail}{}'S", "Q".repeat(lead), "r".repeat(lead % 7)));
                check(&format!(" {} {}{tail}", "b".repeat(lead), "Cd".repeat(lead / 2)));
                check(&format!("{}.{}{tail}", "é".repeat(lead / 2), "z".repeat(lead)));
            }
        }
    }

    /// Long random strings, mostly ASCII letters, so that runs cross block edges.
    #[test]
    fn random_long_against_oniguruma() {
        let pool: Vec<char> =
            "abcdefghijklmnopqrstuvwxyzABCXYZabcdefghijklmnopqrstuvwxyz     '\n\r.,-1é中ſ\u{301}ǅ٣\u{a0}"
                .chars()
                .collect();
        random_texts(0x1234_5678_9abc_def1, &pool, 1_500, 300, |_, text| check(text));
    }

    /// The block scanners' cases: long mostly-ASCII strings over letters, digit runs, punctuation
    /// runs and single or repeated spaces, with a few hard bytes (quote, line break, tab, non-ASCII
    /// letter or space) that stop a block, so that windows start and stop everywhere.
    #[test]
    fn random_ascii_against_oniguruma() {
        let pool: Vec<&str> = vec![
            "a", "b", "Z", "q", "y", " ", " ", " ", " ", "0", "7", "9", ".", ",", "(", "-", "/", "!", "  ", "'", "\n",
            "\t", "é", "\u{a0}", "ab", "The", " of", "123", "'s",
        ];
        random_texts(0x3c6e_f372_fe94_f82b, &pool, 600, 120, |_, text| check(text));
    }

    /// Line feeds on the block path: code-like strings of words, digits and punctuation between
    /// line breaks with indentation, blank lines, trailing spaces, punctuation before line feeds
    /// (which joins them, and in o200k a `/` after them), and a few hard bytes (`\r`, a tab, a
    /// quote, a non-ASCII letter) that stop a window inside a white-space run.
    #[test]
    fn random_lines_against_oniguruma() {
        let pool: Vec<&str> = vec![
            "\n",
            "\n",
            "\n    ",
            "\n        ",
            "\n\n",
            "    ",
            " ",
            " ",
            "  ",
            " \n",
            "x",
            "def",
            "Ab",
            "iPhone",
            "0",
            "12",
            "1234",
            ".",
            "):",
            "(",
            "=",
            "/",
            "//",
            ",",
            "-",
            " #",
            "\r\n",
            "\t",
            "'",
            "é",
            "_",
            "a",
            "B",
        ];
        random_texts(0x510e_527f_ade6_82d1, &pool, 1_500, 80, |_, text| check_scanners(text));
        random_texts(0x9b05_688c_2b3e_6c1f, &pool, 300, 80, |_, text| check_deepseek(text));
    }

    /// o200k's case rules on the block path: mostly-ASCII strings of words in every mix of cases
    /// (lower-to-upper changes split a letter run there), contractions in both cases after
    /// letters of either case, digit runs and punctuation prefixes, with a few hard bytes.
    #[test]
    fn random_cased_ascii_against_oniguruma() {
        let pool: Vec<&str> = vec![
            "a",
            "B",
            "Z",
            "q",
            "Y",
            " ",
            " ",
            " ",
            "0",
            "7",
            ".",
            ",",
            "(",
            "-",
            "/",
            "  ",
            "'",
            "\n",
            "\t",
            "é",
            "É",
            "ab",
            "CD",
            "The",
            "THE",
            "iPhone",
            "HTMLParser",
            " of",
            "123",
            "'s",
            "'S",
            "'LL",
            "'re",
            "'x",
        ];
        random_texts(0x6a09_e667_f3bc_c908, &pool, 1_500, 120, |_, text| check_scanners(text));
    }

    /// Random strings over a pool holding characters of every class the patterns distinguish.
    #[test]
    fn random_against_oniguruma() {
        let pool: Vec<char> = "aZ'sStTrReEvVmMlLdD \t\n\r\x0b\x0c.,!/-_0123456789中文日本カタナ한ſ\u{85}\u{a0}\u{2028}\u{3000}\u{301}\u{94c}ʰǅ٣Ⅳ½²€©❤️\u{200d}\u{0}é"
            .chars()
            .collect();
        random_texts(0x2545_f491_4f6c_dd1d, &pool, 20_000, 12, |k, text| {
            // DeepSeek-V3's composed stages on one string in four: `random_cjk_against_oniguruma`
            // covers them, and the suite's time is precious.
            if k % 4 == 0 {
                check(text);
            } else {
                check_scanners(text);
            }
        });
    }
}
