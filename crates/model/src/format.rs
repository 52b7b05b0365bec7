//! The pacer task-set JSON format (`docs/formats/taskset.md`): reading with validation, writing.
//!
//! Reading happens in two stages so every error names the file, the field and what was expected:
//! serde (via `serde_path_to_error`) checks structure and units and reports the JSON path;
//! [`validate`] then checks the relations between fields (C ≤ D ≤ T, non-zero period, …).

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::task::{Arrival, Provenance, Task, TaskSet};
use crate::time::Duration;

/// Version of the format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// A problem with an input file (task set, rt-app workload, …). `file` is the path, or `<stdin>`
/// for other sources; `field` is the JSON path of the offending value.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: malformed JSON at line {line}, column {column}: {message}")]
    Syntax {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: field `{field}`: {message}")]
    Field {
        file: String,
        field: String,
        message: String,
    },
}

impl FormatError {
    /// The offending field's JSON path (e.g. `tasks[2].period`), when the error is about a field.
    pub fn field(&self) -> Option<&str> {
        match self {
            FormatError::Field { field, .. } => Some(field),
            _ => None,
        }
    }
}

// The on-disk shape. Separate from `Task` so defaults and unknown-field rejection live here,
// not in the model every other crate uses.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTask {
    #[serde(default)]
    name: Option<String>,
    wcet: Duration,
    period: Duration,
    #[serde(default)]
    deadline: Option<Duration>,
    #[serde(default)]
    offset: Option<Duration>,
    #[serde(default)]
    arrival: Arrival,
    #[serde(default)]
    wss_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTaskSet {
    #[serde(default)]
    version: Option<u32>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    generator: Option<Provenance>,
    #[serde(default)]
    wss_bytes: Option<u64>,
    tasks: Vec<FileTask>,
}

/// Reads and validates a task-set file.
pub fn read_taskset(path: &Path) -> Result<TaskSet, FormatError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| FormatError::Io {
        file: file.clone(),
        source,
    })?;
    parse_taskset(&text, &file)
}

/// Parses and validates task-set JSON; `file` names the source in error messages.
pub fn parse_taskset(text: &str, file: &str) -> Result<TaskSet, FormatError> {
    // serde would accept a struct written as an array; the format is an object, say so plainly.
    if let Some(first) = text.trim_start().chars().next() {
        if first != '{' && (first == '[' || first == '"' || first.is_ascii_digit() || first == '-') {
            return Err(FormatError::Field {
                file: file.to_string(),
                field: "(top level)".into(),
                message: "expected a JSON object with a `tasks` array".into(),
            });
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed: FileTaskSet = match serde_path_to_error::deserialize(&mut de) {
        Ok(v) => v,
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            return Err(if inner.is_syntax() || inner.is_eof() || path == "." {
                match inner.classify() {
                    serde_json::error::Category::Data if path == "." => FormatError::Field {
                        file: file.to_string(),
                        field: "(top level)".into(),
                        message: format!(
                            "{}; expected an object with a `tasks` array",
                            strip_position(&inner)
                        ),
                    },
                    // serde_json reports a value of the wrong type for an enum (`"arrival": 1`)
                    // as a syntax error; in well-formed JSON it is the field that is wrong.
                    _ if path != "." && serde_json::from_str::<serde_json::Value>(text).is_ok() => {
                        FormatError::Field {
                            file: file.to_string(),
                            field: path,
                            message: "unexpected value: see docs/formats/taskset.md for what this \
                                      field takes"
                                .into(),
                        }
                    }
                    _ => FormatError::Syntax {
                        file: file.to_string(),
                        line: inner.line(),
                        column: inner.column(),
                        message: strip_position(&inner),
                    },
                }
            } else {
                FormatError::Field {
                    file: file.to_string(),
                    field: missing_field_path(&path, &inner),
                    message: strip_position(&inner),
                }
            });
        }
    };
    if let Err(e) = de.end() {
        return Err(FormatError::Syntax {
            file: file.to_string(),
            line: e.line(),
            column: e.column(),
            message: strip_position(&e),
        });
    }
    let err = |field: String, message: String| FormatError::Field {
        file: file.to_string(),
        field,
        message,
    };
    if let Some(v) = parsed.version {
        if v != FORMAT_VERSION {
            return Err(err(
                "version".into(),
                format!("unsupported version {v}; expected {FORMAT_VERSION}"),
            ));
        }
    }
    let tasks = parsed
        .tasks
        .into_iter()
        .enumerate()
        .map(|(i, t)| Task {
            name: t.name.unwrap_or_else(|| format!("t{i}")),
            wcet: t.wcet,
            deadline: t.deadline.unwrap_or(t.period),
            period: t.period,
            offset: t.offset.unwrap_or(Duration::ZERO),
            arrival: t.arrival,
            wss_bytes: t.wss_bytes,
        })
        .collect();
    let set = TaskSet {
        name: parsed.name,
        generator: parsed.generator,
        wss_bytes: parsed.wss_bytes,
        tasks,
    };
    validate(&set).map_err(|(field, message)| err(field, message))?;
    Ok(set)
}

/// Checks the relations between fields. Returns the failing field path and the expectation.
pub fn validate(set: &TaskSet) -> Result<(), (String, String)> {
    if set.tasks.is_empty() {
        return Err((
            "tasks".into(),
            "expected at least one task, found an empty array".into(),
        ));
    }
    if let Some(w) = set.wss_bytes {
        check_wss(w).map_err(|m| ("wss_bytes".to_string(), m))?;
    }
    let mut names = BTreeSet::new();
    for (i, t) in set.tasks.iter().enumerate() {
        let f = |name: &str| format!("tasks[{i}].{name}");
        if t.period.is_zero() {
            return Err((f("period"), "expected a period > 0, found 0".into()));
        }
        if t.wcet.is_zero() {
            return Err((f("wcet"), "expected a WCET > 0, found 0".into()));
        }
        if t.deadline.is_zero() {
            return Err((f("deadline"), "expected a deadline > 0, found 0".into()));
        }
        if t.wcet > t.deadline {
            return Err((
                f("wcet"),
                format!(
                    "expected wcet ≤ deadline (C ≤ D), found wcet {} > deadline {}",
                    t.wcet, t.deadline
                ),
            ));
        }
        if t.deadline > t.period {
            return Err((
                f("deadline"),
                format!(
                    "expected deadline ≤ period (constrained deadlines, as SCHED_DEADLINE requires), found deadline {} > period {}",
                    t.deadline, t.period
                ),
            ));
        }
        if let Some(w) = t.wss_bytes {
            check_wss(w).map_err(|m| (f("wss_bytes"), m))?;
        }
        if !names.insert(t.name.as_str()) {
            return Err((
                f("name"),
                format!("expected unique task names, `{}` appears twice", t.name),
            ));
        }
    }
    Ok(())
}

// A working set is whole 64-byte lines (the working-set phase's elements), at most 1 GiB.
fn check_wss(w: u64) -> Result<(), String> {
    if w == 0 || !w.is_multiple_of(64) || w > 1 << 30 {
        return Err(format!(
            "expected a working-set size in bytes, a positive multiple of 64 up to 1 GiB (1073741824), found {w}"
        ));
    }
    Ok(())
}

/// Serialises a task set in the documented format (durations in their largest exact unit).
pub fn write_taskset(set: &TaskSet) -> String {
    #[derive(serde::Serialize)]
    struct Out<'a> {
        version: u32,
        #[serde(flatten)]
        set: &'a TaskSet,
    }
    let mut s = serde_json::to_string_pretty(&Out {
        version: FORMAT_VERSION,
        set,
    })
    .expect("task sets always serialise");
    s.push('\n');
    s
}

// serde_json appends " at line L column C" to messages; we report position separately.
fn strip_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

// serde reports a missing field at the path of its parent object; name the field itself.
fn missing_field_path(path: &str, e: &serde_json::Error) -> String {
    let msg = e.to_string();
    if let Some(rest) = msg.strip_prefix("missing field `") {
        if let Some(name) = rest.split('`').next() {
            return if path == "." {
                name.to_string()
            } else {
                format!("{path}.{name}")
            };
        }
    }
    path.to_string()
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arrival::Periodic => "periodic",
            Arrival::Sporadic => "sporadic",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_err(json: &str) -> (String, String) {
        match parse_taskset(json, "x.json") {
            Err(FormatError::Field { field, message, .. }) => (field, message),
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn reads_human_units_and_defaults() {
        let s = parse_taskset(
            r#"{"tasks":[{"wcet":"2ms","period":"10ms"},{"name":"b","wcet":"500us","period":"20ms","deadline":"15ms","arrival":"sporadic"}]}"#,
            "x",
        )
        .unwrap();
        assert_eq!(s.tasks[0].name, "t0");
        assert_eq!(s.tasks[0].deadline, Duration::from_ms(10));
        assert_eq!(s.tasks[1].wcet, Duration::from_us(500));
        assert_eq!(s.tasks[1].arrival, Arrival::Sporadic);
    }

    #[test]
    fn roundtrip() {
        let s = parse_taskset(r#"{"name":"n","tasks":[{"name":"a","wcet":"1500001ns","period":"10ms","deadline":"9ms","offset":"1ms"}]}"#, "x").unwrap();
        let back = parse_taskset(&write_taskset(&s), "y").unwrap();
        assert_eq!(s, back);
    }

    #[test]
    fn missing_field_is_named() {
        let (f, m) = field_err(r#"{"tasks":[{"wcet":"1ms","period":"5ms"},{"wcet":"1ms"}]}"#);
        assert_eq!(f, "tasks[1].period");
        assert!(m.contains("missing field"), "{m}");
    }

    #[test]
    fn negative_period() {
        let (f, m) = field_err(r#"{"tasks":[{"wcet":"1ms","period":"-5ms"}]}"#);
        assert_eq!(f, "tasks[0].period");
        assert!(m.contains("negative"), "{m}");
        let (f, _) = field_err(r#"{"tasks":[{"wcet":"1ms","period":-5}]}"#);
        assert_eq!(f, "tasks[0].period");
    }

    #[test]
    fn c_above_d() {
        let (f, m) = field_err(r#"{"tasks":[{"wcet":"6ms","period":"10ms","deadline":"5ms"}]}"#);
        assert_eq!(f, "tasks[0].wcet");
        assert!(m.contains("C ≤ D"), "{m}");
    }

    #[test]
    fn unknown_unit_and_unknown_field() {
        let (f, m) = field_err(r#"{"tasks":[{"wcet":"1min","period":"10ms"}]}"#);
        assert_eq!(f, "tasks[0].wcet");
        assert!(m.contains("unknown unit"), "{m}");
        let (f, m) = field_err(r#"{"tasks":[{"wcet":"1ms","perid":"10ms"}]}"#);
        assert_eq!(f, "tasks[0].perid");
        assert!(m.contains("unknown field"), "{m}");
    }

    #[test]
    fn malformed_json_has_position() {
        match parse_taskset("{\"tasks\": [\n {\"wcet\": \"1ms\",, }]}", "bad.json") {
            Err(FormatError::Syntax { file, line, .. }) => {
                assert_eq!(file, "bad.json");
                assert_eq!(line, 2);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_taskset("{\"tasks\": []} x", "f"),
            Err(FormatError::Syntax { .. })
        ));
        let (f, _) = field_err("[1,2]");
        assert_eq!(f, "(top level)");
    }

    #[test]
    fn relational_checks() {
        assert_eq!(field_err(r#"{"tasks":[]}"#).0, "tasks");
        assert_eq!(
            field_err(r#"{"tasks":[{"wcet":"1ms","period":"10ms","deadline":"11ms"}]}"#).0,
            "tasks[0].deadline"
        );
        assert_eq!(
            field_err(r#"{"tasks":[{"wcet":"0ms","period":"10ms"}]}"#).0,
            "tasks[0].wcet"
        );
        assert_eq!(
            field_err(r#"{"tasks":[{"wcet":"1ms","period":"0"}]}"#).0,
            "tasks[0].period"
        );
        assert_eq!(
            field_err(r#"{"version":7,"tasks":[{"wcet":"1ms","period":"2ms"}]}"#).0,
            "version"
        );
        assert_eq!(
            field_err(r#"{"tasks":[{"name":"a","wcet":"1ms","period":"2ms"},{"name":"a","wcet":"1ms","period":"2ms"}]}"#).0,
            "tasks[1].name"
        );
    }
}

#[cfg(test)]
mod schema_tests {
    //! Keeps docs/formats/taskset.schema.json and the parser in agreement on field names.
    use super::*;

    fn schema() -> serde_json::Value {
        let text = include_str!("../../../docs/formats/taskset.schema.json");
        serde_json::from_str(text).expect("schema is valid JSON")
    }

    #[test]
    fn every_schema_task_field_is_accepted_and_required_ones_are_required() {
        let s = schema();
        let task = &s["properties"]["tasks"]["items"];
        let props = task["properties"].as_object().unwrap();
        for key in props.keys() {
            let value = match key.as_str() {
                "name" => "\"x\"",
                "arrival" => "\"sporadic\"",
                "wss_bytes" => "16384",
                "deadline" | "period" => "\"10ms\"",
                _ => "\"1ms\"",
            };
            let mut fields = vec![("wcet", "\"1ms\""), ("period", "\"10ms\"")];
            fields.retain(|(k, _)| k != key);
            fields.push((key, value));
            let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            let json = format!("{{\"tasks\":[{{{}}}]}}", body.join(","));
            assert!(
                parse_taskset(&json, "t").is_ok(),
                "schema field `{key}` rejected: {json}"
            );
        }
        for req in task["required"].as_array().unwrap() {
            let req = req.as_str().unwrap();
            let json = if req == "wcet" {
                r#"{"tasks":[{"period":"10ms"}]}"#
            } else {
                r#"{"tasks":[{"wcet":"1ms"}]}"#
            };
            assert!(parse_taskset(json, "t").is_err(), "`{req}` should be required");
        }
        // Sorted: serde_json's map order depends on its `preserve_order` feature.
        let mut top: Vec<&String> = s["properties"].as_object().unwrap().keys().collect();
        top.sort();
        assert_eq!(top, ["generator", "name", "tasks", "version", "wss_bytes"]);
    }

    #[test]
    fn example_files_parse() {
        for f in ["textbook.json", "dhall.json"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples")
                .join(f);
            read_taskset(&path).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

#[cfg(test)]
mod wss_tests {
    use super::*;

    #[test]
    fn working_set_sizes_default_from_the_set_and_are_checked() {
        let set = parse_taskset(
            r#"{"wss_bytes": 16384, "tasks": [{"wcet": "1ms", "period": "10ms"},
                {"wcet": "1ms", "period": "10ms", "wss_bytes": 262144}]}"#,
            "s.json",
        )
        .unwrap();
        assert_eq!((set.task_wss(0), set.task_wss(1)), (Some(16384), Some(262144)));
        let back = parse_taskset(&write_taskset(&set), "s.json").unwrap();
        assert_eq!(back, set);
        for (json, field) in [
            (
                r#"{"tasks": [{"wcet": "1ms", "period": "10ms", "wss_bytes": 100}]}"#,
                "tasks[0].wss_bytes",
            ),
            (
                r#"{"wss_bytes": 0, "tasks": [{"wcet": "1ms", "period": "10ms"}]}"#,
                "wss_bytes",
            ),
        ] {
            match parse_taskset(json, "s.json") {
                Err(FormatError::Field {
                    field: f, message, ..
                }) => {
                    assert_eq!(f, field);
                    assert!(message.contains("multiple of 64"), "{message}");
                }
                other => panic!("{json}: {other:?}"),
            }
        }
    }
}
