//! Structure-aware mutation of tree-shaped inputs (JSON task sets and rt-app files, TOML
//! scenarios): a valid document is parsed into [`Node`]s, edited where its structure is (fields
//! deleted, duplicated, swapped, renamed, retyped, numbers replaced with extremes, values nested
//! deeply or repeated into huge arrays, subtrees grafted from other samples), then written back
//! as JSON or TOML.
//!
//! [`Node`] rather than `serde_json::Value` because the interesting inputs are the ones a value
//! type cannot hold: repeated keys, and number literals outside what JSON or `f64` allow
//! (`1e999`, `18446744073709551616`, `NaN`), written out verbatim.

use std::sync::Arc;

use proptest::prelude::*;

/// A document tree whose objects keep repeated keys and whose numbers are their literal text.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    /// Written verbatim, valid in the output syntax or not.
    Num(String),
    Str(String),
    Arr(Vec<Node>),
    Obj(Vec<(String, Node)>),
}

impl Node {
    /// From a parsed JSON value (numbers keep serde_json's rendering).
    pub fn from_json(v: &serde_json::Value) -> Node {
        match v {
            serde_json::Value::Null => Node::Null,
            serde_json::Value::Bool(b) => Node::Bool(*b),
            serde_json::Value::Number(n) => Node::Num(n.to_string()),
            serde_json::Value::String(s) => Node::Str(s.clone()),
            serde_json::Value::Array(a) => Node::Arr(a.iter().map(Node::from_json).collect()),
            serde_json::Value::Object(o) => {
                Node::Obj(o.iter().map(|(k, v)| (k.clone(), Node::from_json(v))).collect())
            }
        }
    }

    /// Parses strict JSON text; `None` when it is not.
    pub fn parse_json(text: &str) -> Option<Node> {
        serde_json::from_str(text).ok().map(|v| Node::from_json(&v))
    }

    fn children(&self) -> usize {
        match self {
            Node::Arr(a) => a.len(),
            Node::Obj(o) => o.len(),
            _ => 0,
        }
    }

    fn child(&self, i: usize) -> &Node {
        match self {
            Node::Arr(a) => &a[i],
            Node::Obj(o) => &o[i].1,
            _ => unreachable!("scalars have no children"),
        }
    }

    fn child_mut(&mut self, i: usize) -> &mut Node {
        match self {
            Node::Arr(a) => &mut a[i],
            Node::Obj(o) => &mut o[i].1,
            _ => unreachable!("scalars have no children"),
        }
    }

    /// Paths (child indices from the root) of every node, in pre-order.
    fn paths(&self) -> Vec<Vec<usize>> {
        fn walk(n: &Node, at: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
            out.push(at.clone());
            for i in 0..n.children() {
                at.push(i);
                walk(n.child(i), at, out);
                at.pop();
            }
        }
        let mut out = Vec::new();
        walk(self, &mut Vec::new(), &mut out);
        out
    }

    fn at(&self, path: &[usize]) -> &Node {
        path.iter().fold(self, |n, &i| n.child(i))
    }

    fn at_mut(&mut self, path: &[usize]) -> &mut Node {
        path.iter().fold(self, |n, &i| n.child_mut(i))
    }

    /// Every object key in the tree (the vocabulary renames draw from).
    pub fn keys(&self, out: &mut Vec<String>) {
        match self {
            Node::Arr(a) => a.iter().for_each(|n| n.keys(out)),
            Node::Obj(o) => {
                for (k, v) in o {
                    out.push(k.clone());
                    v.keys(out);
                }
            }
            _ => {}
        }
    }

    /// JSON text (compact). Numbers are written as they are, so the text may not be JSON.
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        self.write_json(&mut s);
        s
    }

    fn write_json(&self, s: &mut String) {
        match self {
            Node::Null => s.push_str("null"),
            Node::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
            Node::Num(n) => s.push_str(n),
            Node::Str(v) => quote(v, s),
            Node::Arr(a) => {
                s.push('[');
                for (i, n) in a.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    n.write_json(s);
                }
                s.push(']');
            }
            Node::Obj(o) => {
                s.push('{');
                for (i, (k, v)) in o.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    quote(k, s);
                    s.push(':');
                    v.write_json(s);
                }
                s.push('}');
            }
        }
    }

    /// TOML text: a root object becomes `key = value` lines, nested objects inline tables. TOML
    /// has no null; a `Null` is written as the bare word `null`, which TOML rejects (still a
    /// useful input).
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        match self {
            Node::Obj(o) => {
                for (k, v) in o {
                    toml_key(k, &mut s);
                    s.push_str(" = ");
                    v.write_toml(&mut s);
                    s.push('\n');
                }
            }
            other => {
                // Not a table: still TOML-shaped text for the parser to reject.
                other.write_toml(&mut s);
                s.push('\n');
            }
        }
        s
    }

    fn write_toml(&self, s: &mut String) {
        match self {
            Node::Null => s.push_str("null"),
            Node::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
            Node::Num(n) => s.push_str(n),
            Node::Str(v) => quote(v, s),
            Node::Arr(a) => {
                s.push('[');
                for (i, n) in a.iter().enumerate() {
                    if i > 0 {
                        s.push_str(", ");
                    }
                    n.write_toml(s);
                }
                s.push(']');
            }
            Node::Obj(o) => {
                s.push('{');
                for (i, (k, v)) in o.iter().enumerate() {
                    s.push_str(if i > 0 { ", " } else { " " });
                    toml_key(k, s);
                    s.push_str(" = ");
                    v.write_toml(s);
                }
                s.push_str(" }");
            }
        }
    }
}

/// A JSON string literal; also a valid TOML basic string (same escapes).
fn quote(v: &str, s: &mut String) {
    s.push_str(&serde_json::to_string(v).expect("strings serialise"));
}

fn toml_key(k: &str, s: &mut String) {
    if !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        s.push_str(k);
    } else {
        quote(k, s);
    }
}

/// Number literals at and past the edges of every integer and float type a parser might read
/// them into, and the non-numbers a careless reader accepts.
pub const EXTREME_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "2",
    "127",
    "255",
    "256",
    "1023",
    "1024",
    "4096",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "4294967295",
    "4294967296",
    "9007199254740993",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "1e308",
    "-1e308",
    "1e999",
    "-1e999",
    "5e-324",
    "1e-7",
    "0.5",
    "1.5",
    "-0.0",
    "0.1",
    "1E3",
    "NaN",
    "nan",
    "Infinity",
    "-Infinity",
    "inf",
    "-inf",
    "0x10",
    "1_000",
];

/// String values that stress what reads strings: durations at the edges of `u64` nanoseconds,
/// fractions of a nanosecond, odd units and spacing, non-ASCII, and the empty string.
pub const EXTREME_STRINGS: &[&str] = &[
    "",
    " ",
    "0",
    "-1",
    "-0ms",
    "+5ms",
    "5 ms",
    " 5ms ",
    "5µs",
    "5μs",
    "5us",
    "5ns",
    "5s",
    "5m",
    "5min",
    "5h",
    "1.5ns",
    "0.0000000001s",
    "1.0000000000000000001ns",
    "18446744073709551615",
    "18446744073709551615ns",
    "18446744073709551616ns",
    "18446744073s",
    "18446744074s",
    "18446744073709551615s",
    "99999999999999999999999999ms",
    "1e3ms",
    "1e308s",
    ".ms",
    ".5ms",
    "5.ms",
    "1..5ms",
    "1.5.5ms",
    "ms",
    "NaN",
    "inf",
    "10ms10ms",
    "\u{0}",
    "\u{feff}5ms",
    "🦀",
    "é",
    "SCHED_DEADLINE",
    "SCHED_FIFO",
    "SCHED_OTHER",
    "absolute",
    "relative",
    "periodic",
    "sporadic",
    "unique",
    "adaptive",
    "fifo-walt",
    "hikey960-big",
    "random",
    "square",
];

/// Keys that are almost right, or not keys at all.
const ODD_KEYS: &[&str] = &[
    "",
    " ",
    "\u{0}",
    "🦀",
    "TASKS",
    "tasks ",
    "__proto__",
    "$ref",
    "run ",
    "0",
];

/// One structural edit. Node and value choices are indices taken modulo what exists, so every
/// edit applies to every tree and shrinks towards the root and the first choice.
#[derive(Debug, Clone)]
pub enum TreeOp {
    /// Removes a node from its parent (an object member with its key).
    Delete(usize),
    /// Inserts a copy of a node right after it (a repeated key in an object).
    Duplicate(usize),
    /// Exchanges two subtrees (when neither contains the other).
    Swap(usize, usize),
    /// Replaces a node with an extreme number.
    Number(usize, usize),
    /// Replaces a node with an extreme string.
    Text(usize, usize),
    /// Replaces a node with a value of another type.
    Retype(usize, usize),
    /// Renames an object member: another key of the samples, or an odd one.
    Rename(usize, usize),
    /// Wraps a node in this many arrays or objects.
    Nest(usize, usize, bool),
    /// Repeats a node (or an array's first element) into an array of this many.
    Grow(usize, usize),
    /// Replaces a node with a string of this many characters.
    LongString(usize, usize),
    /// Replaces a node with a subtree of another sample.
    Graft(usize, usize, usize),
}

/// Valid documents to start from, and the key vocabulary renames use.
#[derive(Debug)]
pub struct TreeSamples {
    pub trees: Vec<Node>,
    keys: Vec<String>,
}

impl TreeSamples {
    pub fn new(trees: Vec<Node>) -> Arc<TreeSamples> {
        assert!(
            !trees.is_empty(),
            "structure-aware mutation needs at least one sample"
        );
        let mut keys = Vec::new();
        for t in &trees {
            t.keys(&mut keys);
        }
        keys.sort();
        keys.dedup();
        keys.extend(ODD_KEYS.iter().map(|k| k.to_string()));
        Arc::new(TreeSamples { trees, keys })
    }

    /// Applies `op` to `tree`; an edit that does not fit (deleting the root, renaming an array
    /// element) leaves it unchanged.
    pub fn apply(&self, tree: &mut Node, op: &TreeOp) {
        let paths = tree.paths();
        let pick = |i: usize| paths[i % paths.len()].clone();
        match *op {
            TreeOp::Delete(i) => {
                let p = pick(i);
                if let Some((&last, parent)) = p.split_last() {
                    match tree.at_mut(parent) {
                        Node::Arr(a) => {
                            a.remove(last);
                        }
                        Node::Obj(o) => {
                            o.remove(last);
                        }
                        _ => {}
                    }
                }
            }
            TreeOp::Duplicate(i) => {
                let p = pick(i);
                if let Some((&last, parent)) = p.split_last() {
                    match tree.at_mut(parent) {
                        Node::Arr(a) => {
                            let c = a[last].clone();
                            a.insert(last + 1, c);
                        }
                        Node::Obj(o) => {
                            let c = o[last].clone();
                            o.insert(last + 1, c);
                        }
                        _ => {}
                    }
                }
            }
            TreeOp::Swap(i, j) => {
                let (a, b) = (pick(i), pick(j));
                if a.starts_with(&b) || b.starts_with(&a) {
                    return;
                }
                let (na, nb) = (tree.at(&a).clone(), tree.at(&b).clone());
                *tree.at_mut(&a) = nb;
                *tree.at_mut(&b) = na;
            }
            TreeOp::Number(i, k) => {
                *tree.at_mut(&pick(i)) = Node::Num(EXTREME_NUMBERS[k % EXTREME_NUMBERS.len()].into());
            }
            TreeOp::Text(i, k) => {
                *tree.at_mut(&pick(i)) = Node::Str(EXTREME_STRINGS[k % EXTREME_STRINGS.len()].into());
            }
            TreeOp::Retype(i, k) => {
                let n = tree.at_mut(&pick(i));
                let old = n.clone();
                *n = match k % 8 {
                    0 => Node::Null,
                    1 => Node::Bool(k % 16 < 8),
                    2 => Node::Num("7".into()),
                    3 => Node::Str("x".into()),
                    4 => Node::Arr(Vec::new()),
                    5 => Node::Obj(Vec::new()),
                    6 => Node::Arr(vec![old]),
                    _ => Node::Obj(vec![("x".into(), old)]),
                };
            }
            TreeOp::Rename(i, k) => {
                let p = pick(i);
                if let Some((&last, parent)) = p.split_last() {
                    if let Node::Obj(o) = tree.at_mut(parent) {
                        o[last].0 = self.keys[k % self.keys.len()].clone();
                    }
                }
            }
            TreeOp::Nest(i, depth, objects) => {
                let n = tree.at_mut(&pick(i));
                let mut v = std::mem::replace(n, Node::Null);
                for _ in 0..depth {
                    v = if objects {
                        Node::Obj(vec![("a".into(), v)])
                    } else {
                        Node::Arr(vec![v])
                    };
                }
                *n = v;
            }
            TreeOp::Grow(i, count) => {
                let n = tree.at_mut(&pick(i));
                let item = match &*n {
                    Node::Arr(a) if !a.is_empty() => a[0].clone(),
                    other => other.clone(),
                };
                *n = Node::Arr(vec![item; count]);
            }
            TreeOp::LongString(i, len) => {
                *tree.at_mut(&pick(i)) = Node::Str("x".repeat(len));
            }
            TreeOp::Graft(i, s, j) => {
                let donor = &self.trees[s % self.trees.len()];
                let dp = donor.paths();
                let sub = donor.at(&dp[j % dp.len()]).clone();
                *tree.at_mut(&pick(i)) = sub;
            }
        }
    }

    /// A strategy of edit lists: mostly a few small edits, sometimes one that makes the input
    /// deep or large.
    pub fn ops() -> impl Strategy<Value = Vec<TreeOp>> {
        let idx = any::<usize>;
        let small = prop_oneof![
            3 => idx().prop_map(TreeOp::Delete),
            2 => idx().prop_map(TreeOp::Duplicate),
            2 => (idx(), idx()).prop_map(|(a, b)| TreeOp::Swap(a, b)),
            4 => (idx(), idx()).prop_map(|(a, b)| TreeOp::Number(a, b)),
            3 => (idx(), idx()).prop_map(|(a, b)| TreeOp::Text(a, b)),
            2 => (idx(), idx()).prop_map(|(a, b)| TreeOp::Retype(a, b)),
            2 => (idx(), idx()).prop_map(|(a, b)| TreeOp::Rename(a, b)),
            2 => (idx(), idx(), idx()).prop_map(|(a, b, c)| TreeOp::Graft(a, b, c)),
            1 => (idx(), 1usize..8, any::<bool>()).prop_map(|(a, d, o)| TreeOp::Nest(a, d, o)),
            1 => (idx(), 0usize..16).prop_map(|(a, n)| TreeOp::Grow(a, n)),
        ];
        let big = prop_oneof![
            (idx(), 100usize..3000, any::<bool>()).prop_map(|(a, d, o)| TreeOp::Nest(a, d, o)),
            (idx(), 1000usize..8_000).prop_map(|(a, n)| TreeOp::Grow(a, n)),
            (idx(), 1000usize..100_000).prop_map(|(a, n)| TreeOp::LongString(a, n)),
        ];
        prop_oneof![
            12 => proptest::collection::vec(small.clone(), 1..6),
            1 => (proptest::collection::vec(small, 0..3), big).prop_map(|(mut v, b)| {
                v.push(b);
                v
            }),
        ]
    }
}

/// Text edits applied after rendering: what only exists as text (a cut in the middle of a
/// token, a stray delimiter or comment).
#[derive(Debug, Clone)]
pub enum Splice {
    None,
    /// Cut at this character (modulo the length).
    Truncate(usize),
    /// Insert one of [`SPLICE_TOKENS`] at this character.
    Insert(usize, usize),
}

/// Delimiters and comment markers of JSON, rt-app's relaxed JSON and TOML.
pub const SPLICE_TOKENS: &[&str] = &[
    ",", ":", "{", "}", "[", "]", "\"", "\\", "/*", "*/", "//", "#", "=", "\n", "'", "'''", "\"\"\"", ",}",
    ",]", "\u{0}", "\u{feff}", "[[a]]", "[a]", " ",
];

impl Splice {
    pub fn strategy() -> impl Strategy<Value = Splice> {
        prop_oneof![
            6 => Just(Splice::None),
            1 => any::<usize>().prop_map(Splice::Truncate),
            2 => (any::<usize>(), any::<usize>()).prop_map(|(p, t)| Splice::Insert(p, t)),
        ]
    }

    pub fn apply(&self, text: &mut String) {
        let boundary = |text: &str, i: usize| {
            let n = text.chars().count() + 1;
            text.char_indices()
                .map(|(b, _)| b)
                .chain([text.len()])
                .nth(i % n)
                .unwrap_or(0)
        };
        match *self {
            Splice::None => {}
            Splice::Truncate(i) => {
                let at = boundary(text, i);
                text.truncate(at);
            }
            Splice::Insert(i, t) => {
                let at = boundary(text, i);
                text.insert_str(at, SPLICE_TOKENS[t % SPLICE_TOKENS.len()]);
            }
        }
    }
}

/// Mutated documents: a sample, edited by [`TreeSamples::ops`], written by `render`, then
/// spliced.
pub fn mutated(samples: Arc<TreeSamples>, render: fn(&Node) -> String) -> impl Strategy<Value = String> {
    let n = samples.trees.len();
    (0..n, TreeSamples::ops(), Splice::strategy()).prop_map(move |(i, ops, splice)| {
        let mut tree = samples.trees[i].clone();
        for op in &ops {
            samples.apply(&mut tree, op);
        }
        let mut text = render(&tree);
        splice.apply(&mut text);
        text
    })
}
