//! A deterministic generator of long English-like text (`lopt sample`, `lopt demo`, tests).
//!
//! It mixes what real prompts hold and what makes cutting hard: paragraphs and headings, lists,
//! indented code lines, contractions in both cases, numbers with separators and long digit runs,
//! URLs, runs of spaces and blank lines, accented words, curly quotes, dashes, CJK and emoji.
//! Equal seeds give equal texts on every platform (SplitMix64, no floating point).

use std::io::Write;

use anyhow::Result;

use crate::args::SampleArgs;

/// `lopt sample`: prints the text.
///
/// # Errors
/// When stdout cannot be written.
pub fn run(args: &SampleArgs) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text(args.seed, args.bytes).as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Common words and domain words, separated by spaces.
const WORDS: &str =
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an \
    had they you were their one all we can her has there been if more when will would who so no time people \
    year way day man thing woman life child world school state family student group country problem hand \
    part place case week company system program question work government number night point home water room \
    mother area money story fact month lot right study book eye job word business issue side kind head \
    house service friend father power hour game line end member law car city community name president team \
    minute idea kid body information back parent face others level office door health person art war \
    history party result change morning reason research girl guy moment air teacher force education \
    tokenizer parallel sequence boundary chunk prompt model context inference language algorithm merge \
    vocabulary encoding latency throughput benchmark extraordinary nevertheless understanding \
    responsibility internationalization quickly slowly carefully however therefore meanwhile actually \
    really said made found thought went came took saw knew gave told became new good high old great big \
    small large long little own other different important public able early young late hard major better";
/// Apostrophe words in both cases, separated by spaces.
const CONTRACTIONS: &str =
    "don't it's we'll they've I'm you'd she's can't won't isn't DON'T IT'S We'LL o'clock rock'n'roll";
/// Accented Latin, other scripts and emoji (with ZWJ, flags, variation selectors), separated by `|`.
const FOREIGN: &str = "café|naïve|résumé|façade|jalapeño|Zürich|São Paulo|Ægir|smörgåsbord|déjà vu|Привет|Ελληνικά|東京|日本語のテキスト|\
    中文分词测试|한국어|مرحبا|שלום|🙂|❤️|👩‍💻|🇯🇵";
/// Names, abbreviations and camel case, separated by `|`.
const NAMES: &str = "Alice|Bob|Carol|Dr. Smith|Mr. O'Brien|McDonald|iPhone|HelloWorld|GPT-4|NASA|U.S.|e.g.|i.e.|etc.";
const PUNCT_END: &[&str] = &[".", ".", ".", ".", "?", "!", "...", ";", ":", "?!", " —", "…"];
const CODE: &[&str] = &[
    "    fn main() { println!(\"{}\", x + 1); }",
    "\tif (a[i] != b[i]) return -1;",
    "    let total: u64 = items.iter().map(|x| x.len() as u64).sum();",
    "    return {\"key\": [1, 2, 3], \"ok\": true}",
    "\t\t/Documentation/index.html",
    "    x = 0x1F + 3.14e-10 * y  # comment",
];

/// The word lists, split once per text.
struct Lists {
    words: Vec<&'static str>,
    contractions: Vec<&'static str>,
    foreign: Vec<&'static str>,
    names: Vec<&'static str>,
}

impl Lists {
    fn new() -> Self {
        Lists {
            words: WORDS.split(' ').collect(),
            contractions: CONTRACTIONS.split(' ').collect(),
            foreign: FOREIGN.split('|').collect(),
            names: NAMES.split('|').collect(),
        }
    }
}

/// SplitMix64: tiny, fast, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant here.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent`%.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// About `bytes` bytes of text (at most `bytes`, ending at a char boundary), fixed by `seed`.
pub fn text(seed: u64, bytes: usize) -> String {
    let lists = Lists::new();
    let mut rng = Rng(seed ^ 0x6C6F_7074);
    let mut out = String::with_capacity(bytes + 256);
    let mut section = 1;
    while out.len() < bytes {
        match rng.below(20) {
            0 => {
                out.push_str(&format!("## Section {section}: {}\n\n", capitalize(rng.pick(&lists.words))));
                section += 1;
            }
            1 => {
                for i in 1..=2 + rng.below(4) {
                    let bullet = if rng.chance(50) { "- ".to_owned() } else { format!("{i}. ") };
                    out.push_str(&bullet);
                    sentence(&mut rng, &lists, &mut out);
                    out.push('\n');
                }
                out.push('\n');
            }
            2 => {
                for _ in 0..1 + rng.below(4) {
                    out.push_str(rng.pick(CODE));
                    out.push('\n');
                }
                out.push_str(if rng.chance(50) { "\n" } else { "\n        \n" });
            }
            _ => {
                for _ in 0..2 + rng.below(6) {
                    sentence(&mut rng, &lists, &mut out);
                    out.push_str(if rng.chance(8) { "  " } else { " " });
                }
                out.pop();
                out.push_str(match rng.below(10) {
                    0 => "\n",
                    1 => "\r\n\r\n",
                    2 => "   \n\n\n",
                    _ => "\n\n",
                });
            }
        }
    }
    let mut end = bytes.min(out.len());
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    out
}

fn sentence(rng: &mut Rng, lists: &Lists, out: &mut String) {
    let words = 4 + rng.below(22);
    for i in 0..words {
        if i > 0 {
            out.push(' ');
        }
        let word = match rng.below(40) {
            0..=1 => rng.pick(&lists.contractions).to_owned(),
            2 => rng.pick(&lists.foreign).to_owned(),
            3 => rng.pick(&lists.names).to_owned(),
            4 => number(rng),
            5 => format!("“{}”", rng.pick(&lists.words)),
            6 => format!("({} {})", rng.pick(&lists.words), rng.pick(&lists.words)),
            7 => format!("{}-{}", rng.pick(&lists.words), rng.pick(&lists.words)),
            8 if rng.chance(20) => {
                format!(
                    "https://example.com/{}/{}?id={}",
                    rng.pick(&lists.words),
                    rng.pick(&lists.words),
                    rng.below(9999)
                )
            }
            9 => rng.pick(&lists.words).to_uppercase(),
            _ => rng.pick(&lists.words).to_owned(),
        };
        out.push_str(&if i == 0 { capitalize(&word) } else { word });
        if i + 1 < words && rng.chance(10) {
            out.push(',');
        }
    }
    out.push_str(rng.pick(PUNCT_END));
}

fn number(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => format!("{}", 1900 + rng.below(130)),
        1 => format!("{}.{:02}", rng.below(1000), rng.below(100)),
        2 => format!("{},{:03},{:03}", 1 + rng.below(99), rng.below(1000), rng.below(1000)),
        3 => format!("{}%", rng.below(101)),
        4 => format!("{}{}", rng.next(), rng.below(1000)),
        _ => format!("${}", rng.below(100_000)),
    }
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::text;

    #[test]
    fn deterministic_sized_and_varied() {
        assert_eq!(text(3, 10_000), text(3, 10_000));
        assert_ne!(text(3, 10_000), text(4, 10_000));
        let t = text(1, 200_000);
        assert!(t.len() <= 200_000 && t.len() > 199_990);
        for needle in ["\n\n", "'", "“", "##", "    ", "\r\n"] {
            assert!(t.contains(needle), "{needle:?}");
        }
        assert!(!t.is_ascii());
        assert_eq!(text(0, 0), "");
    }
}
