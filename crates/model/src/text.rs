//! Text from outside pacer (thread and task names, file contents) made safe for a terminal: a
//! program controls its own thread names, and printing them raw would let it send escape
//! sequences to the operator's terminal (move the cursor, rewrite earlier lines, set the title).

/// `s` with every control character (C0, DEL, C1) and the backslash written as an escape:
/// `\n`, `\t`, `\r`, `\\`, `\e` for ESC, `\xNN` or `\u{NNNN}` for the rest. Printable text,
/// including non-ASCII letters, is kept as it is.
pub fn escape_control(s: &str) -> String {
    if !s.chars().any(|c| c.is_control() || c == '\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\x1b' => out.push_str("\\e"),
            c if c.is_control() && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_text_kept() {
        assert_eq!(escape_control("decoder"), "decoder");
        assert_eq!(escape_control("vidéo-線程"), "vidéo-線程");
        assert_eq!(
            escape_control("\x1b[2J\x1b]0;pwned\x07"),
            "\\e[2J\\e]0;pwned\\x07"
        );
        assert_eq!(escape_control("a\nb\tc\\"), "a\\nb\\tc\\\\");
        assert_eq!(escape_control("\u{9b}31m\u{7f}"), "\\x9b31m\\x7f");
    }
}
