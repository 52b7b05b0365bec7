//! Sizes in bytes as pacer's files and options write them: one rule for every format, so
//! `16KB` means the same in an experiment spec, a runtime manifest and on the command line.
//! Units are binary, as cache and buffer sizes are quoted (and as sysfs writes them: `32K`).

/// Parses `4096`, `4096B`, `16K`/`16KiB`/`16KB`/`16kB`, `4M`/`4MiB`/`4MB`, `1G`/`1GiB`/`1GB`
/// (all 1024-based). A bare number is bytes; formats that want a unit check for one first.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    if num.is_empty() {
        return Err(format!(
            "\"{text}\" is not a whole number followed by a unit (B, KiB, MiB, GiB)"
        ));
    }
    let scale: u64 = match unit {
        "" | "B" => 1,
        "K" | "KiB" | "KB" | "kB" => 1 << 10,
        "M" | "MiB" | "MB" => 1 << 20,
        "G" | "GiB" | "GB" => 1 << 30,
        u => {
            return Err(format!(
                "unknown unit \"{u}\" in \"{text}\": expected B, KiB, MiB or GiB (K, KB, M, MB, G, GB are the same, 1024-based)"
            ))
        }
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("\"{text}\" is too large"))
}

/// [`parse_bytes`] for formats that want a unit: a bare number other than 0 is refused, since
/// whether `64` meant bytes or KiB changes a budget by 1024 (`0` is 0 in every unit).
pub fn parse_bytes_with_unit(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) && !t.trim_start_matches('0').is_empty() {
        return Err(format!(
            "\"{text}\" has no unit: write \"{t}B\", \"{t}KiB\" or \"{t}MiB\""
        ));
    }
    parse_bytes(t)
}

#[cfg(test)]
mod tests {
    use super::{parse_bytes, parse_bytes_with_unit};

    #[test]
    fn with_unit_refuses_bare_numbers_but_zero() {
        assert_eq!(parse_bytes_with_unit("64B"), Ok(64));
        assert_eq!(parse_bytes_with_unit("0"), Ok(0));
        assert_eq!(parse_bytes_with_unit("00"), Ok(0));
        assert_eq!(
            parse_bytes_with_unit("64"),
            Err("\"64\" has no unit: write \"64B\", \"64KiB\" or \"64MiB\"".into())
        );
        assert!(parse_bytes_with_unit("4Q").unwrap_err().contains("unknown unit"));
    }

    #[test]
    fn binary_units_in_every_spelling() {
        assert_eq!(parse_bytes("64"), Ok(64));
        assert_eq!(parse_bytes("4096B"), Ok(4096));
        for s in ["16K", "16KiB", "16KB", "16kB"] {
            assert_eq!(parse_bytes(s), Ok(16384), "{s}");
        }
        assert_eq!(parse_bytes("256KiB"), Ok(262144));
        assert_eq!(parse_bytes("4M"), Ok(4 << 20));
        assert_eq!(parse_bytes(" 1 GiB "), Ok(1 << 30));
        assert!(parse_bytes("4Q").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("1kib").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("KiB").is_err());
        assert!(parse_bytes("99999999999G").unwrap_err().contains("too large"));
    }
}
