//! Sizes in bytes as people write them (`256MiB`, `1GB`, `4096`), for the prefix cache's bound:
//! one parser for the CLI's `--prefix-cache` and the Python package's `prefix_cache=`.
//!
//! Invariant: a size parses only if it is a whole number with at most one known unit and fits a
//! `usize`; anything else is an [`ErrorKind::InvalidConfig`] error naming what was wrong.

use crate::error::{Error, ErrorKind, Result};

/// Parses a size in bytes: a whole number with an optional unit (`B`, `KB`, `MB`, `GB` in powers
/// of 1000, `KiB`, `MiB`, `GiB` in powers of 1024; `K`, `M`, `G` alone mean the binary ones;
/// case and spaces around the unit do not matter).
///
/// # Errors
/// [`ErrorKind::InvalidConfig`] for a missing or malformed number, an unknown unit, or a size
/// that does not fit a `usize`.
pub fn parse_byte_size(value: &str) -> Result<usize> {
    let invalid = |message: String| Error::new(ErrorKind::InvalidConfig, message);
    let value = value.trim();
    let split = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let number: usize =
        number.parse().map_err(|e| invalid(format!("bad size {value:?}: {e} (expected a size such as 256MiB)")))?;
    let scale: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "mb" => 1000 * 1000,
        "gb" => 1000 * 1000 * 1000,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        other => {
            return Err(invalid(format!(
                "bad size {value:?}: unknown unit {other:?} (expected B, KB, MB, GB, KiB, MiB or GiB)"
            )))
        }
    };
    number.checked_mul(scale).ok_or_else(|| invalid(format!("size {value} is too large")))
}

#[cfg(test)]
mod tests {
    use super::parse_byte_size;

    #[test]
    fn sizes_take_decimal_and_binary_units() {
        assert_eq!(parse_byte_size("256MiB").unwrap(), 256 << 20);
        assert_eq!(parse_byte_size("1GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_byte_size("4096").unwrap(), 4096);
        assert_eq!(parse_byte_size("64k").unwrap(), 64 << 10);
        assert_eq!(parse_byte_size(" 2 gib ").unwrap(), 2 << 30);
        for bad in ["12 parsecs", "MiB", "", "-1", "1.5GiB", "99999999999999999999GiB"] {
            assert!(parse_byte_size(bad).is_err(), "{bad:?}");
        }
    }
}
