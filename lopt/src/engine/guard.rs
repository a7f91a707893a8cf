//! [`Guarded`]: an engine whose panics become errors.
//!
//! HF `tokenizers` and the Oniguruma binding panic on some hostile inputs (a `Split` or
//! `Replace` regex that backtracks past Oniguruma's retry limit makes `find_iter` panic), and
//! both the HF engine and the native BPE engine run Oniguruma. The tokenizer wraps whichever
//! engine it chose, so every segment, on whatever thread, fails with an [`ErrorKind::Encode`]
//! error instead of unwinding through the caller.
//!
//! [`ErrorKind::Encode`]: crate::ErrorKind::Encode

use super::{Engine, Segment};
use crate::error::{catch_panic, Result};

/// Wraps an engine; see the module documentation.
pub(crate) struct Guarded(pub(crate) Box<dyn Engine>);

impl Engine for Guarded {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn encode_segment(&self, segment: &str) -> Result<Segment> {
        catch_panic(self.0.name(), || self.0.encode_segment(segment))
    }

    fn encode_continuation(&self, segment: &str) -> Result<Segment> {
        catch_panic(self.0.name(), || self.0.encode_continuation(segment))
    }

    fn encode_ids(&self, segment: &str, continuation: bool) -> Result<Vec<u32>> {
        catch_panic(self.0.name(), || self.0.encode_ids(segment, continuation))
    }

    fn encodes_continuations(&self) -> bool {
        self.0.encodes_continuations()
    }
}
