//! Byte offsets (what lopt and the `tokenizers` crate give) to character offsets (what the
//! Python `tokenizers` package gives), with HF's exact rules.
//!
//! HF converts each token's offsets with a byte → char map of the text before post-processing
//! (`BytesToCharOffsetConverter` in `pre_tokenizer.rs`):
//! * a start inside the text maps to the index of the character that contains that byte;
//! * an end inside the text likewise; an end equal to the text length maps to the number of
//!   characters; a start at or past the end is left as it is (bytes).
//!
//! lopt converts after post-processing. The two agree because post-processing only adds
//! `(0, 0)` offsets (special and padding tokens; `0` maps to `0`) and `ByteLevel` offset trimming
//! moves offsets over ASCII spaces (one byte, one character) — except where trimming moves a
//! start onto the end of the text, which HF (converting first) reports as the number of
//! characters: [`char_offsets`] does the same for a start equal to a non-zero text length.
//!
//! Cost: nothing for ASCII texts; otherwise one forward scan over the text, since token offsets
//! grow monotonically (two cursors, for starts and for ends).

/// Counts character starts in a prefix of the text, remembering where it stopped.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    chars: usize,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0, chars: 0 }
    }

    /// The number of characters that start before byte `p` (`p <= len`).
    fn chars_before(&mut self, p: usize) -> usize {
        if p == 0 {
            return 0;
        }
        if p < self.pos {
            self.pos = 0;
            self.chars = 0;
        }
        // A byte starts a character unless it is a UTF-8 continuation byte (0b10xx_xxxx).
        self.chars += self.bytes[self.pos..p].iter().filter(|&&b| (b as i8) >= -0x40).count();
        self.pos = p;
        self.chars
    }

    /// The index of the character that contains byte `p` (`p < len`).
    fn char_at(&mut self, p: usize) -> usize {
        self.chars_before(p + 1) - 1
    }
}

/// HF's character offsets for `offsets` (byte offsets into `text`).
pub(crate) fn char_offsets(text: &str, offsets: &[(usize, usize)]) -> Vec<(usize, usize)> {
    if text.is_ascii() {
        return offsets.to_vec();
    }
    let len = text.len();
    let mut starts = Cursor::new(text.as_bytes());
    let mut ends = Cursor::new(text.as_bytes());
    offsets
        .iter()
        .map(|&(start, end)| {
            if start == len {
                // Only offset trimming puts a start here (see the module documentation).
                let n = starts.chars_before(len);
                return (n, if end == len { n } else { end });
            }
            if start > len {
                return (start, end);
            }
            let s = starts.char_at(start);
            let e = if end < len {
                ends.char_at(end)
            } else if end == len {
                ends.chars_before(len)
            } else {
                s + 2
            };
            (s, e)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HF's converter, verbatim in behaviour: a map from every byte to its character.
    fn reference(text: &str, offsets: &[(usize, usize)]) -> Vec<(usize, usize)> {
        let map: std::collections::HashMap<usize, usize> = text
            .char_indices()
            .enumerate()
            .flat_map(|(i, (b, c))| (0..c.len_utf8()).map(move |n| (b + n, i)))
            .collect();
        offsets
            .iter()
            .map(|&(s, e)| match (map.get(&s), map.get(&e)) {
                (Some(&s), Some(&e)) => (s, e),
                (Some(&s), None) => (s, map.get(&(e - 1)).copied().unwrap_or(s + 1) + 1),
                _ => (s, e),
            })
            .collect()
    }

    #[test]
    fn matches_hf_inside_the_text() {
        let text = "aé€😀 b\u{301}c";
        let mut offsets = Vec::new();
        for s in 0..text.len() {
            for e in s..=text.len() {
                offsets.push((s, e));
            }
        }
        offsets.push((0, 0));
        assert_eq!(char_offsets(text, &offsets), reference(text, &offsets));
    }

    #[test]
    fn trimmed_start_at_the_end_counts_characters() {
        let text = "é  ";
        assert_eq!(char_offsets(text, &[(4, 4)]), vec![(3, 3)]);
        assert_eq!(char_offsets("ab", &[(2, 2)]), vec![(2, 2)]);
    }
}
