//! Mutation of line-oriented text (wake-up traces, job CSVs, ledgers, tracefs `format` files,
//! `/proc` files) and of binary buffers (ring-buffer pages), and the unstructured inputs: arbitrary
//! bytes and strings, and "token soup" built from a format's own vocabulary.
//!
//! Line edits work on what these formats are made of: lines (deleted, repeated, swapped, joined,
//! cut, thousands of copies) and the words inside them (a word is a run of letters, digits and
//! `._+-`, so `5678.123456`, `pid=1234`'s `1234` and `offset:24;`'s `24` are each one), which are
//! replaced with extremes.

use std::sync::Arc;

use proptest::prelude::*;

/// Replacements for a word: numbers at the edges of the integer types, malformed numbers,
/// separators, non-ASCII, nothing.
pub const EXTREME_WORDS: &[&str] = &[
    "",
    "0",
    "-0",
    "-1",
    "1",
    "00",
    "+1",
    "127",
    "128",
    "255",
    "256",
    "1023",
    "1024",
    "4095",
    "4096",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999",
    "18446744073.709551615",
    "18446744074.0",
    "0.0000000005",
    "0.00000000049",
    "1e308",
    "1e-308",
    "1e999",
    "1.5e-3",
    "1e",
    "e5",
    "NaN",
    "nan",
    "inf",
    "-inf",
    ".",
    "..",
    "1.2.3",
    "-",
    "--",
    ":",
    "::",
    ";",
    ",",
    "=",
    "[",
    "]",
    "[]",
    "(",
    ")",
    "\\",
    "\\040",
    "\\777",
    "\"",
    "#",
    "\t",
    " ",
    "µ",
    "🦀",
    "\u{0}",
    "\u{fffd}",
    "0x10",
    "ffffffffffffffff",
    "10000000000000000",
    "-20",
    "-21",
    "19",
    "20",
    "99",
    "100",
    "1024",
    "1025",
];

/// One edit of a line-oriented text. Line, word and position choices are taken modulo what
/// exists.
#[derive(Debug, Clone)]
pub enum LineOp {
    Delete(usize),
    Duplicate(usize),
    Swap(usize, usize),
    /// Replaces word `w` of line `l` with [`EXTREME_WORDS`]`[k]`.
    Word(usize, usize, usize),
    /// Replaces word `w` of line `l` with a word from the samples.
    WordFrom(usize, usize, usize),
    /// Cuts line `l` at character `c`.
    Cut(usize, usize),
    /// Joins line `l` with the next.
    Join(usize),
    /// Inserts text at character `c` of line `l`.
    Insert(usize, usize, String),
    /// Inserts a line of another sample before line `l`.
    Graft(usize, usize, usize),
    /// Repeats line `l` this many times.
    Repeat(usize, usize),
    /// Cuts the whole text at character `c`.
    Truncate(usize),
}

/// Sample texts to start from, and their words (what [`LineOp::WordFrom`] draws from).
#[derive(Debug)]
pub struct TextSamples {
    pub texts: Vec<String>,
    words: Vec<String>,
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '+' | '-')
}

/// Byte ranges of the words of `line`.
fn words(line: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (is_word(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, line.len()));
    }
    out
}

fn char_boundary(s: &str, c: usize) -> usize {
    let n = s.chars().count() + 1;
    s.char_indices()
        .map(|(b, _)| b)
        .chain([s.len()])
        .nth(c % n)
        .unwrap_or(0)
}

impl TextSamples {
    pub fn new(texts: Vec<String>) -> Arc<TextSamples> {
        assert!(!texts.is_empty(), "text mutation needs at least one sample");
        let mut all = Vec::new();
        for t in &texts {
            for line in t.lines() {
                for (a, b) in words(line) {
                    all.push(line[a..b].to_string());
                }
            }
        }
        all.sort();
        all.dedup();
        if all.is_empty() {
            all.push("0".into());
        }
        Arc::new(TextSamples { texts, words: all })
    }

    /// Applies `op` to the lines of a text.
    pub fn apply(&self, lines: &mut Vec<String>, op: &LineOp) {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let n = lines.len();
        match op {
            LineOp::Delete(l) => {
                lines.remove(l % n);
            }
            LineOp::Duplicate(l) => {
                let c = lines[l % n].clone();
                lines.insert(l % n, c);
            }
            LineOp::Swap(a, b) => lines.swap(a % n, b % n),
            LineOp::Word(l, w, k) => {
                replace_word(&mut lines[l % n], *w, EXTREME_WORDS[k % EXTREME_WORDS.len()])
            }
            LineOp::WordFrom(l, w, k) => {
                replace_word(&mut lines[l % n], *w, &self.words[k % self.words.len()])
            }
            LineOp::Cut(l, c) => {
                let line = &mut lines[l % n];
                let at = char_boundary(line, *c);
                line.truncate(at);
            }
            LineOp::Join(l) => {
                let i = l % n;
                if i + 1 < n {
                    let next = lines.remove(i + 1);
                    lines[i].push_str(&next);
                }
            }
            LineOp::Insert(l, c, s) => {
                let line = &mut lines[l % n];
                let at = char_boundary(line, *c);
                line.insert_str(at, s);
            }
            LineOp::Graft(l, s, k) => {
                let donor: Vec<&str> = self.texts[s % self.texts.len()].lines().collect();
                if !donor.is_empty() {
                    lines.insert(l % n, donor[k % donor.len()].to_string());
                }
            }
            LineOp::Repeat(l, times) => {
                let c = lines[l % n].clone();
                let at = l % n;
                lines.splice(at..at, std::iter::repeat_n(c, *times));
            }
            LineOp::Truncate(_) => {}
        }
    }

    /// Mostly a few small edits; sometimes one that makes the text large.
    pub fn ops() -> impl Strategy<Value = Vec<LineOp>> {
        let idx = any::<usize>;
        let small = prop_oneof![
            3 => idx().prop_map(LineOp::Delete),
            2 => idx().prop_map(LineOp::Duplicate),
            2 => (idx(), idx()).prop_map(|(a, b)| LineOp::Swap(a, b)),
            8 => (idx(), idx(), idx()).prop_map(|(l, w, k)| LineOp::Word(l, w, k)),
            3 => (idx(), idx(), idx()).prop_map(|(l, w, k)| LineOp::WordFrom(l, w, k)),
            2 => (idx(), idx()).prop_map(|(l, c)| LineOp::Cut(l, c)),
            1 => idx().prop_map(LineOp::Join),
            2 => (idx(), idx(), "\\PC{0,8}|[ -~]{0,8}").prop_map(|(l, c, s)| LineOp::Insert(l, c, s)),
            2 => (idx(), idx(), idx()).prop_map(|(l, s, k)| LineOp::Graft(l, s, k)),
            1 => (idx(), 0usize..8).prop_map(|(l, t)| LineOp::Repeat(l, t)),
            1 => idx().prop_map(LineOp::Truncate),
        ];
        let big = (idx(), 500usize..5_000).prop_map(|(l, t)| LineOp::Repeat(l, t));
        prop_oneof![
            12 => proptest::collection::vec(small.clone(), 1..8),
            1 => (proptest::collection::vec(small, 0..3), big).prop_map(|(mut v, b)| {
                v.push(b);
                v
            }),
        ]
    }

    /// The text after `ops`, lines joined with `\n` (and a final newline when the sample had one).
    pub fn mutate(&self, sample: usize, ops: &[LineOp]) -> String {
        let text = &self.texts[sample % self.texts.len()];
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut truncate = None;
        for op in ops {
            if let LineOp::Truncate(c) = op {
                truncate = Some(*c);
            } else {
                self.apply(&mut lines, op);
            }
        }
        let mut out = lines.join("\n");
        if text.ends_with('\n') {
            out.push('\n');
        }
        if let Some(c) = truncate {
            let at = char_boundary(&out, c);
            out.truncate(at);
        }
        out
    }
}

fn replace_word(line: &mut String, w: usize, with: &str) {
    let ws = words(line);
    if ws.is_empty() {
        line.push_str(with);
        return;
    }
    let (a, b) = ws[w % ws.len()];
    line.replace_range(a..b, with);
}

/// Mutated texts of `samples`.
pub fn mutated_lines(samples: Arc<TextSamples>) -> impl Strategy<Value = String> {
    let n = samples.texts.len();
    (0..n, TextSamples::ops()).prop_map(move |(i, ops)| samples.mutate(i, &ops))
}

/// Arbitrary strings: any characters (control and non-ASCII included), up to `max` of them.
pub fn any_text(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(any::<char>(), 0..max).prop_map(|v| v.into_iter().collect()),
        proptest::string::string_regex(&format!("[ -~\\n\\t]{{0,{max}}}")).expect("valid regex"),
    ]
}

/// Arbitrary bytes, up to `max`, read as text the way pacer reads files it does not trust
/// (`String::from_utf8_lossy`).
pub fn any_bytes_as_text(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Concatenations of a format's own tokens (keys, keywords, delimiters, numbers), which reach
/// further into a parser than random characters do.
pub fn token_soup(tokens: &'static [&'static str], max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            6 => proptest::sample::select(tokens).prop_map(str::to_string),
            2 => proptest::sample::select(EXTREME_WORDS).prop_map(str::to_string),
            1 => "[ \\n\\t]{1,2}",
        ],
        0..max,
    )
    .prop_map(|v| v.concat())
}

/// One edit of a binary buffer.
#[derive(Debug, Clone)]
pub enum ByteOp {
    /// Writes a native-endian `u32` at this offset (modulo the length, rounded down to 4 when
    /// `aligned`).
    U32(usize, u32, bool),
    /// Writes a native-endian `u64` at this offset.
    U64(usize, u64, bool),
    /// XORs a byte.
    Flip(usize, u8),
    /// Cuts the buffer at this length (modulo).
    Truncate(usize),
    /// Appends bytes.
    Extend(Vec<u8>),
    /// Copies `len` bytes from one offset to another.
    Copy(usize, usize, usize),
}

fn put(buf: &mut [u8], off: usize, bytes: &[u8], aligned: bool) {
    if buf.len() < bytes.len() {
        return;
    }
    let mut at = off % (buf.len() - bytes.len() + 1);
    if aligned {
        at &= !(bytes.len().min(4) - 1);
    }
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

impl ByteOp {
    pub fn apply(&self, buf: &mut Vec<u8>) {
        match self {
            ByteOp::U32(off, v, aligned) => put(buf, *off, &v.to_ne_bytes(), *aligned),
            ByteOp::U64(off, v, aligned) => put(buf, *off, &v.to_ne_bytes(), *aligned),
            ByteOp::Flip(off, x) => {
                if !buf.is_empty() {
                    let n = buf.len();
                    buf[off % n] ^= x;
                }
            }
            ByteOp::Truncate(n) => {
                let at = n % (buf.len() + 1);
                buf.truncate(at);
            }
            ByteOp::Extend(b) => buf.extend_from_slice(b),
            ByteOp::Copy(from, to, len) => {
                if !buf.is_empty() {
                    let n = buf.len();
                    let (from, to) = (from % n, to % n);
                    let len = (*len).min(n - from).min(n - to);
                    buf.copy_within(from..from + len, to);
                }
            }
        }
    }

    /// Edits biased to the values binary headers give meaning to: small counts and type codes,
    /// the flag bits of a 32- or 64-bit word, all ones, lengths around a page.
    pub fn strategy() -> impl Strategy<Value = ByteOp> {
        let word32 = prop_oneof![
            any::<u32>(),
            (0u32..32, 0u32..(1 << 27)).prop_map(|(t, d)| t | (d << 5)),
            (29u32..32, any::<u32>()).prop_map(|(t, d)| t | (d << 5)),
            proptest::sample::select(vec![
                0u32,
                1,
                4,
                8,
                28,
                29,
                30,
                31,
                4095,
                4096,
                4097,
                u32::MAX,
                1 << 31,
                1 << 30
            ]),
        ];
        let word64 = prop_oneof![
            any::<u64>(),
            0u64..8192,
            proptest::sample::select(vec![
                0u64,
                u64::MAX,
                1 << 31,
                1 << 30,
                (1 << 31) | (1 << 30),
                4080,
                4096,
                i64::MAX as u64
            ]),
        ];
        prop_oneof![
            4 => (any::<usize>(), word32, any::<bool>()).prop_map(|(o, v, a)| ByteOp::U32(o, v, a)),
            2 => (any::<usize>(), word64, any::<bool>()).prop_map(|(o, v, a)| ByteOp::U64(o, v, a)),
            2 => (any::<usize>(), 1u8..).prop_map(|(o, x)| ByteOp::Flip(o, x)),
            1 => any::<usize>().prop_map(ByteOp::Truncate),
            1 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(ByteOp::Extend),
            1 => (any::<usize>(), any::<usize>(), 0usize..256).prop_map(|(a, b, l)| ByteOp::Copy(a, b, l)),
        ]
    }
}

/// Mutated copies of binary `samples`.
pub fn mutated_bytes(samples: Arc<Vec<Vec<u8>>>) -> impl Strategy<Value = Vec<u8>> {
    let n = samples.len();
    (0..n, proptest::collection::vec(ByteOp::strategy(), 1..8)).prop_map(move |(i, ops)| {
        let mut b = samples[i].clone();
        for op in &ops {
            op.apply(&mut b);
        }
        b
    })
}
