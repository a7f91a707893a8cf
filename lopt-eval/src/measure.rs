//! Timing and statistics: wall-clock milliseconds of one call, medians and means, and the
//! interleaved per-document measurement every experiment uses ([`measure_doc`]).

use std::time::Instant;

use anyhow::Result;

use crate::methods::{Ctx, Method};
use crate::output::Output;

/// One thing to time on a text: a method in a context (contexts differ in threads or chunk size).
#[derive(Clone, Copy)]
pub struct Variant<'a> {
    pub ctx: &'a Ctx,
    pub method: Method,
}

/// What one variant did on one document.
#[derive(Clone, Copy, Debug)]
pub struct DocResult {
    /// Median over the repeats, in ms.
    pub ms: f64,
    /// Ids and attention mask equal to HF's sequential `encode`.
    pub exact: bool,
}

/// Runs `f` and returns its result with the elapsed wall-clock time in ms.
pub fn time<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let start = Instant::now();
    let out = f()?;
    Ok((out, start.elapsed().as_secs_f64() * 1e3))
}

/// The median (mean of the two middle values for an even count); 0 for none.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

/// The mean; 0 for none.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// The reference output of `text` (HF sequential `encode`), untimed.
///
/// # Errors
/// When HF fails on the text.
pub fn reference(ctx: &Ctx, text: &str) -> Result<Output> {
    ctx.encode(Method::Hf, text)
}

/// Times every variant on `text` `repeat` times, interleaved: each round runs all variants once,
/// starting at a different one (`round_offset` rotates the order across documents too), so that
/// cache and frequency effects do not always favour the same method. Accuracy is checked on the
/// first round against `reference`, or when that is `None`, against the output of the variant
/// whose method is `hf`. Also returns the reference's token count.
///
/// # Errors
/// When a method fails on the text, or there is neither a reference nor an `hf` variant.
pub fn measure_doc(
    variants: &[Variant<'_>],
    text: &str,
    reference: Option<&Output>,
    repeat: usize,
    round_offset: usize,
) -> Result<(Vec<DocResult>, usize)> {
    let n = variants.len();
    let mut times = vec![Vec::with_capacity(repeat); n];
    let mut first: Vec<Option<Output>> = vec![None; n];
    for round in 0..repeat.max(1) {
        for step in 0..n {
            let k = (step + round + round_offset) % n;
            let v = variants[k];
            v.ctx.prepare();
            let (out, ms) = time(|| v.ctx.encode(v.method, text))?;
            if round == 0 {
                first[k] = Some(out);
            }
            times[k].push(ms);
        }
    }
    let reference = match reference {
        Some(r) => r,
        None => variants
            .iter()
            .position(|v| v.method == Method::Hf)
            .and_then(|k| first[k].as_ref())
            .ok_or_else(|| anyhow::anyhow!("no reference: run the hf method or pass one"))?,
    };
    let results = times
        .iter()
        .zip(&first)
        .map(|(t, out)| DocResult { ms: median(t), exact: out.as_ref() == Some(reference) })
        .collect();
    Ok((results, reference.ids.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_mean() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
    }
}
