//! The strict reader of pacer's TOML files (the experiment spec, the runtime manifest): a table's
//! keys are taken one by one, so whatever is left at the end is a key the format does not have
//! and is refused ([`Keys::done`]) instead of ignored: a misspelt `dedline` or `duraton` must not
//! silently become a default.
//!
//! Every error names the file, the full dotted key (`component[filter].period`,
//! `generator.r`), what was expected and what was found. The reader produces a [`KeyError`];
//! each format keeps its own error type and converts it with `From`, so a caller's `?` and its
//! own checks (`keys.bad(..)`) yield the format's error directly.

use std::collections::BTreeSet;
use std::marker::PhantomData;

use crate::Duration;

/// A key of a TOML file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: `{key}`: expected {expected}, found {found}")]
pub struct KeyError {
    /// The file, as the caller named it.
    pub file: String,
    /// The full key: the table's path, a dot, the key (`generator.r`).
    pub key: String,
    /// What the format accepts there.
    pub expected: String,
    /// What the file has there.
    pub found: String,
}

/// The keys of one table not taken yet, with the file and the table's path that errors name.
///
/// `E` is the caller's error type: every getter and helper returns it, converted from a
/// [`KeyError`].
#[derive(Debug)]
pub struct Keys<E> {
    file: String,
    path: String,
    table: toml::Table,
    error: PhantomData<fn() -> E>,
}

/// The expectation of [`Keys::name`].
const NAME: &str = "a name of letters, digits, '-', '_' or '.'";

/// The expectation of [`Keys::cpus`].
const CPUS: &str = "a non-empty list of distinct CPU numbers, such as [0] or [0, 1]";

impl<E: From<KeyError>> Keys<E> {
    /// The keys of `table` in `file`; `path` is the table's full key (empty at the top level).
    pub fn new(file: &str, path: impl Into<String>, table: toml::Table) -> Keys<E> {
        Keys {
            file: file.to_string(),
            path: path.into(),
            table,
            error: PhantomData,
        }
    }

    /// Parses TOML text into the keys of its top-level table; `syntax` turns the parser's
    /// message into the caller's error.
    pub fn parse(file: &str, text: &str, syntax: impl FnOnce(String) -> E) -> Result<Keys<E>, E> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| syntax(e.to_string().trim_end().to_string()))?;
        Ok(Keys::new(file, String::new(), table))
    }

    /// The file errors name.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The table's full key.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Names the table differently from now on: an element of an array of tables is
    /// `component[0]` until its name is read, then `component[filter]`.
    pub fn rename(&mut self, path: impl Into<String>) {
        self.path = path.into();
    }

    /// The full key of `key` in this table.
    pub fn full(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// An error about `key`: `expected` is what the format accepts, `found` what the file has.
    pub fn bad(&self, key: &str, expected: &str, found: &str) -> E {
        E::from(KeyError {
            file: self.file.clone(),
            key: self.full(key),
            expected: expected.to_string(),
            found: found.to_string(),
        })
    }

    /// A required key that is absent.
    pub fn missing(&self, key: &str, expected: &str) -> E {
        self.bad(key, expected, "nothing (the key is required)")
    }

    /// A value of the wrong kind, shown with its TOML type (`found integer 10`).
    pub fn wrong_type(&self, key: &str, expected: &str, v: &toml::Value) -> E {
        self.bad(key, expected, &format!("{} {v}", v.type_str()))
    }

    /// Takes `key`'s raw value, for a caller with a rule of its own.
    pub fn take(&mut self, key: &str) -> Option<toml::Value> {
        self.table.remove(key)
    }

    /// A string.
    pub fn string(&mut self, key: &str) -> Result<Option<String>, E> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.wrong_type(key, "a string", &v)),
        }
    }

    /// A required name: letters, digits, `-`, `_`, `.` (names appear in thread names, tables
    /// and file names).
    pub fn name(&mut self, key: &str) -> Result<String, E> {
        let s = self.string(key)?.ok_or_else(|| self.missing(key, NAME))?;
        let ok = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !ok {
            return Err(self.bad(key, NAME, &format!("{s:?}")));
        }
        Ok(s)
    }

    /// One string or a list of strings (`sender = "a"` or `sender = ["a", "b"]`).
    pub fn names(&mut self, key: &str, expected: &str) -> Result<Option<Vec<String>>, E> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(vec![s])),
            Some(toml::Value::Array(a)) => a
                .into_iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok(s),
                    v => Err(self.wrong_type(key, expected, &v)),
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(v) => Err(self.wrong_type(key, expected, &v)),
        }
    }

    /// `true` or `false`.
    pub fn boolean(&mut self, key: &str) -> Result<Option<bool>, E> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(b)),
            Some(v) => Err(self.wrong_type(key, "true or false", &v)),
        }
    }

    /// A non-negative integer.
    pub fn integer(&mut self, key: &str) -> Result<Option<u64>, E> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) if i >= 0 => Ok(Some(i as u64)),
            Some(v) => Err(self.wrong_type(key, "a non-negative integer", &v)),
        }
    }

    /// A duration string with a unit (`"10ms"`, [`Duration`]'s syntax); `expected` is the
    /// format's wording, with its own examples. A bare number is refused: whether `10` meant
    /// seconds or milliseconds changes a period by 1000.
    pub fn duration(&mut self, key: &str, expected: &str) -> Result<Option<Duration>, E> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => s
                .parse::<Duration>()
                .map(Some)
                .map_err(|e| self.bad(key, expected, &format!("\"{s}\" ({e})"))),
            Some(v) => Err(self.wrong_type(key, expected, &v)),
        }
    }

    /// A size string with a unit ([`crate::bytes::parse_bytes_with_unit`]), or the integer 0.
    pub fn size(&mut self, key: &str, expected: &str) -> Result<Option<u64>, E> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => crate::bytes::parse_bytes_with_unit(&s)
                .map(Some)
                .map_err(|e| self.bad(key, expected, &e)),
            Some(toml::Value::Integer(0)) => Ok(Some(0)),
            Some(v) => Err(self.wrong_type(key, expected, &v)),
        }
    }

    /// A required non-empty list of distinct CPU numbers below 4096, returned ascending.
    pub fn cpus(&mut self, key: &str) -> Result<Vec<usize>, E> {
        let v = self.take(key).ok_or_else(|| self.missing(key, CPUS))?;
        let toml::Value::Array(items) = v else {
            return Err(self.wrong_type(key, CPUS, &v));
        };
        let mut set = BTreeSet::new();
        for item in &items {
            match item {
                toml::Value::Integer(i) if (0..4096).contains(i) && set.insert(*i as usize) => {}
                other => return Err(self.wrong_type(key, CPUS, other)),
            }
        }
        if set.is_empty() {
            return Err(self.bad(key, CPUS, "an empty list"));
        }
        Ok(set.into_iter().collect())
    }

    /// A sub-table, read by a reader of its own whose errors name `path.key`.
    pub fn table(&mut self, key: &str) -> Result<Option<Keys<E>>, E> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Table(t)) => Ok(Some(Keys::new(&self.file, self.full(key), t))),
            Some(v) => Err(self.wrong_type(key, "a table", &v)),
        }
    }

    /// An array of tables (`[[component]]`), each named by its position (`component[0]`) until
    /// the caller renames it.
    pub fn tables(&mut self, key: &str) -> Result<Vec<Keys<E>>, E> {
        let what = format!("an array of tables ([[{key}]])");
        match self.take(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::Array(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| match v {
                    toml::Value::Table(t) => Ok(Keys::new(&self.file, self.full(&format!("{key}[{i}]")), t)),
                    v => Err(self.wrong_type(key, &what, &v)),
                })
                .collect(),
            Some(v) => Err(self.wrong_type(key, &what, &v)),
        }
    }

    /// An array, whatever its items; `what` names them (`a list of {what}`).
    fn list(&mut self, key: &str, what: &str) -> Result<Option<Vec<toml::Value>>, E> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.wrong_type(key, &format!("a list of {what}"), &v)),
        }
    }

    /// A list of strings.
    pub fn strings(&mut self, key: &str) -> Result<Option<Vec<String>>, E> {
        let Some(items) = self.list(key, "strings")? else {
            return Ok(None);
        };
        items
            .into_iter()
            .map(|v| match v {
                toml::Value::String(s) => Ok(s),
                v => Err(self.wrong_type(key, "a list of strings", &v)),
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }

    /// A list of non-negative integers.
    pub fn integers(&mut self, key: &str) -> Result<Option<Vec<u64>>, E> {
        let Some(items) = self.list(key, "integers")? else {
            return Ok(None);
        };
        items
            .into_iter()
            .map(|v| match v {
                toml::Value::Integer(i) if i >= 0 => Ok(i as u64),
                v => Err(self.wrong_type(key, "a list of non-negative integers", &v)),
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }

    /// A list of numbers (integers are taken as floats).
    pub fn floats(&mut self, key: &str) -> Result<Option<Vec<f64>>, E> {
        let Some(items) = self.list(key, "numbers")? else {
            return Ok(None);
        };
        items
            .into_iter()
            .map(|v| match v {
                toml::Value::Float(f) => Ok(f),
                toml::Value::Integer(i) => Ok(i as f64),
                v => Err(self.wrong_type(key, "a list of numbers", &v)),
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }

    /// A value deserialized with serde, for a nested structure whose own type already says what
    /// it accepts; `expected` describes it, and serde's message is shown with the value.
    pub fn typed<T: serde::de::DeserializeOwned>(
        &mut self,
        key: &str,
        expected: &str,
    ) -> Result<Option<T>, E> {
        match self.take(key) {
            None => Ok(None),
            Some(v) => {
                let shown = v.to_string();
                v.try_into::<T>()
                    .map(Some)
                    .map_err(|e| self.bad(key, expected, &format!("{shown} ({})", e.to_string().trim())))
            }
        }
    }

    /// Refuses whatever key was not taken. The reader stays usable: checks across keys may
    /// still name them.
    pub fn done(&self) -> Result<(), E> {
        match self.table.keys().next() {
            None => Ok(()),
            Some(k) => Err(self.bad(k, "no such key (a misspelling?)", "an unknown key")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Keys<KeyError> {
        Keys::parse("f.toml", text, |m| panic!("test bug: {m}")).unwrap()
    }

    /// The message of the error `read` returns on `text`'s keys.
    fn err<T: std::fmt::Debug>(
        text: &str,
        read: impl FnOnce(&mut Keys<KeyError>) -> Result<T, KeyError>,
    ) -> String {
        read(&mut keys(text)).unwrap_err().to_string()
    }

    #[test]
    fn each_getter_says_what_it_expected_and_what_it_found() {
        let cases: Vec<(&str, String)> = vec![
            ("f.toml: `k`: expected a string, found integer 1", err("k = 1", |k| k.string("k"))),
            (
                "f.toml: `k`: expected a name of letters, digits, '-', '_' or '.', found \"a b\"",
                err("k = \"a b\"", |k| k.name("k")),
            ),
            (
                "f.toml: `k`: expected a name of letters, digits, '-', '_' or '.', found nothing (the key is required)",
                err("", |k| k.name("k")),
            ),
            ("f.toml: `k`: expected names, found integer 1", err("k = [\"a\", 1]", |k| k.names("k", "names"))),
            ("f.toml: `k`: expected names, found boolean true", err("k = true", |k| k.names("k", "names"))),
            ("f.toml: `k`: expected true or false, found string \"yes\"", err("k = \"yes\"", |k| k.boolean("k"))),
            ("f.toml: `k`: expected a non-negative integer, found integer -1", err("k = -1", |k| k.integer("k"))),
            ("f.toml: `k`: expected a non-negative integer, found float 1.5", err("k = 1.5", |k| k.integer("k"))),
            (
                "f.toml: `k`: expected a duration, found integer 10",
                err("k = 10", |k| k.duration("k", "a duration")),
            ),
            (
                "f.toml: `k`: expected a size, found \"64\" has no unit: write \"64B\", \"64KiB\" or \"64MiB\"",
                err("k = \"64\"", |k| k.size("k", "a size")),
            ),
            ("f.toml: `k`: expected a size, found integer 64", err("k = 64", |k| k.size("k", "a size"))),
            (
                "f.toml: `k`: expected a non-empty list of distinct CPU numbers, such as [0] or [0, 1], found integer 1",
                err("k = [1, 1]", |k| k.cpus("k")),
            ),
            (
                "f.toml: `k`: expected a non-empty list of distinct CPU numbers, such as [0] or [0, 1], found an empty list",
                err("k = []", |k| k.cpus("k")),
            ),
            (
                "f.toml: `k`: expected a non-empty list of distinct CPU numbers, such as [0] or [0, 1], found integer 4096",
                err("k = [4096]", |k| k.cpus("k")),
            ),
            ("f.toml: `k`: expected a table, found integer 1", err("k = 1", |k| k.table("k").map(|_| ()))),
            (
                "f.toml: `k`: expected an array of tables ([[k]]), found integer 1",
                err("k = [1]", |k| k.tables("k").map(|t| t.len())),
            ),
            ("f.toml: `k`: expected a list of strings, found string \"a\"", err("k = \"a\"", |k| k.strings("k"))),
            ("f.toml: `k`: expected a list of strings, found integer 1", err("k = [1]", |k| k.strings("k"))),
            ("f.toml: `k`: expected a list of integers, found integer 1", err("k = 1", |k| k.integers("k"))),
            (
                "f.toml: `k`: expected a list of non-negative integers, found integer -1",
                err("k = [-1]", |k| k.integers("k")),
            ),
            ("f.toml: `k`: expected a list of numbers, found string \"1\"", err("k = [\"1\"]", |k| k.floats("k"))),
        ];
        for (want, got) in cases {
            assert_eq!(got, want);
        }
        let e = err("k = \"10 parsecs\"", |k| k.duration("k", "a duration"));
        assert!(
            e.starts_with("f.toml: `k`: expected a duration, found \"10 parsecs\" ("),
            "{e}"
        );
        let e = err("k = { a = 1 }", |k| k.typed::<Vec<u64>>("k", "a list"));
        assert!(
            e.starts_with("f.toml: `k`: expected a list, found { a = 1 } ("),
            "{e}"
        );
    }

    #[test]
    fn good_values_are_read() {
        let mut k = keys(
            "s = \"x\"\nn = \"a-1\"\nns = \"a\"\nb = true\ni = 3\nd = \"10ms\"\nz = \"16KiB\"\nz0 = 0\n\
             c = [2, 0]\nl = [\"a\", \"b\"]\nis = [1, 2]\nfs = [0.5, 1]\nt = { x = 1 }\n[[a]]\n[[a]]\n",
        );
        assert_eq!(k.string("s"), Ok(Some("x".into())));
        assert_eq!(k.string("absent"), Ok(None));
        assert_eq!(k.name("n"), Ok("a-1".into()));
        assert_eq!(k.names("ns", "names"), Ok(Some(vec!["a".into()])));
        assert_eq!(k.boolean("b"), Ok(Some(true)));
        assert_eq!(k.integer("i"), Ok(Some(3)));
        assert_eq!(k.duration("d", "a duration"), Ok(Some(Duration::from_ms(10))));
        assert_eq!(k.size("z", "a size"), Ok(Some(16384)));
        assert_eq!(k.size("z0", "a size"), Ok(Some(0)));
        assert_eq!(k.cpus("c"), Ok(vec![0, 2]));
        assert_eq!(k.strings("l"), Ok(Some(vec!["a".into(), "b".into()])));
        assert_eq!(k.integers("is"), Ok(Some(vec![1, 2])));
        assert_eq!(k.floats("fs"), Ok(Some(vec![0.5, 1.0])));
        let mut t = k.table("t").unwrap().unwrap();
        assert_eq!(t.integer("x"), Ok(Some(1)));
        t.done().unwrap();
        let a = k.tables("a").unwrap();
        assert_eq!(a.iter().map(Keys::path).collect::<Vec<_>>(), ["a[0]", "a[1]"]);
        k.done().unwrap();
    }

    #[test]
    fn a_key_not_taken_is_refused() {
        let mut k = keys("duration = \"1s\"\nduraton = \"2s\"\n");
        k.duration("duration", "a duration").unwrap();
        assert_eq!(
            k.done().unwrap_err().to_string(),
            "f.toml: `duraton`: expected no such key (a misspelling?), found an unknown key"
        );
    }

    #[test]
    fn nested_keys_are_named_with_their_path() {
        let mut top =
            keys("[[component]]\nname = \"f\"\n[component.reservation]\nruntime = 1\nperiod = \"1ms\"\n");
        let mut c = top.tables("component").unwrap().pop().unwrap();
        assert_eq!(c.integer("name").unwrap_err().key, "component[0].name");
        c.rename("component[f]");
        let mut r = c.table("reservation").unwrap().unwrap();
        assert_eq!(r.path(), "component[f].reservation");
        let e = r.duration("runtime", "a duration").unwrap_err();
        assert_eq!(e.key, "component[f].reservation.runtime");
        assert_eq!(r.done().unwrap_err().key, "component[f].reservation.period");
        assert_eq!(c.missing("kind", "a kind").key, "component[f].kind");
    }

    #[test]
    fn errors_convert_into_the_callers_type() {
        #[derive(Debug, PartialEq)]
        enum Mine {
            Key(String),
            Syntax(String),
        }
        impl From<KeyError> for Mine {
            fn from(e: KeyError) -> Mine {
                Mine::Key(e.key)
            }
        }
        let mut k: Keys<Mine> = Keys::parse("f.toml", "[t]\nx = 1", Mine::Syntax).unwrap();
        let mut t = k.table("t").unwrap().unwrap();
        assert_eq!(t.string("x"), Err(Mine::Key("t.x".into())));
        assert!(matches!(
            Keys::<Mine>::parse("f.toml", "x = [", Mine::Syntax),
            Err(Mine::Syntax(_))
        ));
    }
}
