//! Messages on stderr: every message is exactly one line prefixed `lopt: `, and a failure to write
//! to stderr is ignored (there is nowhere left to report it, and it must not become a panic).

use std::io::Write;

/// Prints `lopt: error: <message>` on one line.
pub fn error(message: &str) {
    line(&format!("error: {}", one_line(message)));
}

/// Prints `lopt: <message>` on one line.
pub fn note(message: &str) {
    line(&one_line(message));
}

/// Prints `text` on stderr as it is (multi-line reports such as `verify`'s difference context).
pub fn raw(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

fn line(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "lopt: {message}");
}

/// Joins the lines of `message` with spaces (library and serde messages may span lines).
pub fn one_line(message: &str) -> String {
    message.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// `1234567` → `1,234,567`.
pub fn group(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1 doc`, `2 docs`, `1,000 docs`.
pub fn plural(n: usize, noun: &str) -> String {
    format!("{} {noun}{}", group(n), if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::{group, one_line, plural};

    #[test]
    fn plurals() {
        assert_eq!(plural(1, "cut"), "1 cut");
        assert_eq!(plural(0, "cut"), "0 cuts");
        assert_eq!(plural(1200, "doc"), "1,200 docs");
    }

    #[test]
    fn groups_thousands() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1234567), "1,234,567");
    }

    #[test]
    fn multi_line_messages_become_one_line() {
        assert_eq!(one_line("bad thing\n  at line 3\n"), "bad thing at line 3");
        assert_eq!(one_line("  keeps  inner  spacing "), "keeps  inner  spacing");
    }
}
