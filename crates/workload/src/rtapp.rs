//! Reader for rt-app workload files (github.com/scheduler-tools/rt-app), producing a [`Workload`].
//!
//! The grammar is rt-app's doc/tutorial.txt ("json file skeleton", "global object", "thread
//! object", "phase object", "events"), checked against the parser that defines it,
//! src/rt-app_parse_config.c. The points that shape this module:
//!
//! * Files are read by json-c in its default, non-strict mode, and the documentation's own
//!   examples (doc/examples/tutorial/*.json) use `/* */` comments and trailing commas. Both are
//!   accepted here. The documentation also lets a key repeat in one object ("workgen" renames
//!   repeats by appending an index), so objects keep every entry in file order.
//! * Keys are executed in file order; an entry of a thread or phase object is an event when its
//!   key starts with an event name (`obj_is_event()`: `run0`, `sleep_long`, `runtime2`, …), with
//!   `runtime` tested before `run`. Property keys (`loop`, `cpus`, `priority`, `dl-runtime`, …)
//!   never start with an event name.
//! * Durations are integers in microseconds (rt-app reads them as 32-bit ints);
//!   `global.duration` is in seconds.
//! * A thread object without `phases` is one phase, and its `loop` is that phase's loop count
//!   (the thread then runs it once); without `loop` it runs forever. With `phases`, the thread's
//!   `loop` defaults to -1 (forever) and each phase's to 1.
//! * Timers are shared by name across the whole file, except names starting with `unique`, which
//!   are private to each thread instance (`create_unique_name()`); a timer is relative unless some
//!   event using it says `"mode": "absolute"` (the mode belongs to the timer, not the event).
//! * `memrun` buffers are the inverse: private to each thread instance (one per type and
//!   parameters), unless a `ref` names them, and then shared by name and type across the file;
//!   events sharing one must agree on its parameters (`validate_init_args()`).
//!
//! Whatever pacer reads but does not model (logging and calibration settings, locks, conditions,
//! barriers, fork, memory and I/O load, task groups, utilisation clamps) is skipped and listed in
//! [`Workload::ignored`] with its JSON path, so nothing is dropped silently. What rt-app would
//! reject, or would run in a way the file evidently did not intend, is an [`RtAppError`] naming
//! the file, the field's JSON path and what was expected.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use pacer_model::{Duration, Reservation, ReservationError};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::model::{
    ChaseOrder, Event, FtraceCategories, MemAccess, MemBuffer, MemBufferId, MemBufferKind, Phase, Policy,
    Resource, ResourceId, ResourceKind, RunSettings, ThreadSpec, TimerId, TimerMode, Work, Workload,
    CHASE_MIN_STRIDE,
};
use crate::wss::{WorkingSet, WssAmount, WssOrder};

/// An rt-app file problem: the same shape as a task-set file problem (file, JSON path of the
/// field, what was expected), so both formats report errors alike.
pub type RtAppError = pacer_model::FormatError;

/// Reads and converts an rt-app file.
pub fn read_rtapp(path: &Path) -> Result<Workload, RtAppError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| RtAppError::Io {
        file: file.clone(),
        source,
    })?;
    parse_rtapp(&text, &file)
}

/// Parses rt-app JSON text; `file` names the source in error messages. Strict: anything whose
/// meaning pacer would change is an error (see [`parse_rtapp_with`]).
pub fn parse_rtapp(text: &str, file: &str) -> Result<Workload, RtAppError> {
    parse_rtapp_with(text, file, &RtAppOptions::default())
}

/// How to treat what pacer cannot run as rt-app would.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RtAppOptions {
    /// Skip what is not supported (listed in full in [`Workload::ignored`]) instead of refusing
    /// the file.
    pub lenient: bool,
}

/// [`parse_rtapp`] with options.
pub fn parse_rtapp_with(text: &str, file: &str, opts: &RtAppOptions) -> Result<Workload, RtAppError> {
    let mut root = parse_json(text, file)?;
    let mut p = Parser {
        file,
        ignored: Vec::new(),
        unsupported: Vec::new(),
    };
    json_c_keys(&mut root, "", &mut p.ignored);
    let mut w = p.root(&root)?;
    if !p.unsupported.is_empty() {
        if !opts.lenient {
            let n = p.unsupported.len();
            return Err(p.err(
                p.unsupported[0].0.clone(),
                format!(
                    "{n} thing(s) pacer cannot run as rt-app would (running without them would change \
                     the workload's meaning; `--lenient` skips them):\n  {}",
                    p.unsupported
                        .iter()
                        .map(|(path, why)| format!("{path}: {why}"))
                        .collect::<Vec<_>>()
                        .join("\n  ")
                ),
            ));
        }
        w.ignored.extend(
            p.unsupported
                .iter()
                .map(|(path, why)| format!("{path}: {why}; skipped (--lenient)")),
        );
    }
    Ok(w)
}

/// json-c's rule for a key repeated in one object (`json_object_object_add()` replaces the value
/// of the existing entry): one entry, at the first occurrence's place, with the last value.
/// rt-app therefore runs one `"run"` of two; the documentation's `workgen` script renames
/// repeats (`run0`, `run1`, …) precisely so that each one runs.
fn json_c_keys(v: &mut Json, path: &str, notes: &mut Vec<String>) {
    match v {
        Json::Obj(entries) => {
            let mut merged: Vec<(String, Json)> = Vec::with_capacity(entries.len());
            for (k, val) in entries.drain(..) {
                if let Some(first) = merged.iter_mut().find(|(m, _)| *m == k) {
                    notes.push(format!(
                        "{}: repeated key; as in rt-app (json-c) only its last value counts, at its \
                         first place (rt-app's workgen script renames repeats so that each runs)",
                        join(path, &k)
                    ));
                    first.1 = val;
                } else {
                    merged.push((k, val));
                }
            }
            for (k, val) in merged.iter_mut() {
                json_c_keys(val, &join(path, k), notes);
            }
            *entries = merged;
        }
        Json::Arr(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                json_c_keys(item, &format!("{path}[{i}]"), notes);
            }
        }
        _ => {}
    }
}

// Upper bounds on what a file expands to. rt-app has none, but `instance` copies a task with all
// its events, so a few bytes (a typo such as `"instance": 1000000000`, or a large count on a long
// task) can describe gigabytes: they should be an error rather than an out-of-memory. At both
// limits the workload takes some 10 MiB.
const MAX_THREADS: u64 = 1 << 14;
const MAX_EVENTS: u64 = 1 << 16;

// rt-app reads integers with json_object_get_int(), which saturates at 32 bits.
const RTAPP_INT_MAX: i128 = i32::MAX as i128;

const POLICY_NAMES: &str = "SCHED_OTHER, SCHED_BATCH, SCHED_IDLE, SCHED_FIFO, SCHED_RR or SCHED_DEADLINE";

/// rt-app's name of an event (`event_data_t.name`, the `desc` of its `rtapp_event` marker), from
/// parse_task_event_data(): the key for `run`/`runtime`/`sleep`/`yield`, `key:resource` for
/// events on one resource, `key:resource:mutex` for `wait`/`sync`/`suspend`/`resume` (whose
/// resources are named after the task), and the buffer's name for `mem`/`iorun`/`memrun`.
/// rt-app's unique names end with the address of the thread's data in hex; pacer's with `tag`.
/// Cut as rt-app's 48-byte field cuts them.
fn rtapp_desc(key: &str, e: &EventTemplate, task: &str, tag: usize) -> String {
    let two = |r: &str| format!("{key}:{r}");
    let three = |a: &str, b: &str| format!("{key}:{a}:{b}");
    let (text, max) = match e {
        EventTemplate::Plain(Event::Mem { .. } | Event::IoRun { .. }) => (format!("mem{tag:x}"), 47),
        EventTemplate::Plain(_) => (key.to_string(), 47),
        EventTemplate::MemRun(m) => (m.buffer_name(tag), 47),
        EventTemplate::Timer { timer, .. } => match timer {
            TimerRef::Shared(n) => (two(n), 46),
            TimerRef::PerThread(n) => (two(&format!("{n}{tag:x}")), 46),
        },
        EventTemplate::Shared(se) => (
            match se {
                SharedEvent::Lock(r)
                | SharedEvent::Unlock(r)
                | SharedEvent::Signal(r)
                | SharedEvent::Broadcast(r)
                | SharedEvent::Barrier(r)
                | SharedEvent::SemPost(r)
                | SharedEvent::SemWait(r) => two(r),
                SharedEvent::Fork { task: t, .. } => two(t),
                SharedEvent::Wait { cond, mutex } | SharedEvent::Sync { cond, mutex } => three(cond, mutex),
                SharedEvent::Suspend => three(task, task),
                SharedEvent::Resume(t) => three(t, t),
            },
            46,
        ),
    };
    match text.char_indices().nth(max) {
        Some((cut, _)) => text[..cut].to_string(),
        None => text,
    }
}

// rt-app's event table (`events[]` in rt-app_parse_config.c), in its matching order: a key is an
// event when it starts with one of these. `runtime` precedes `run` so `runtime2` is not a `run`.
const EVENT_PREFIXES: [&str; 20] = [
    "lock", "unlock", "wait", "signal", "broad", "sync", "sleep", "runtime", "run", "timer", "suspend",
    "resume", "memrun", "mem", "iorun", "yield", "barrier", "fork", "sem_post", "sem_wait",
];

// Thread-object keys that are not events. `runtime` is deliberately absent: in a thread object it
// is both an event and, for SCHED_DEADLINE, the legacy spelling of `dl-runtime` (the tutorial
// warns about the conflict), exactly as in rt-app.
const TASK_PROPERTIES: [&str; 12] = [
    "instance",
    "delay",
    "phases",
    "loop",
    "cpus",
    "policy",
    "priority",
    "dl-runtime",
    "dl-period",
    "dl-deadline",
    "period",
    "deadline",
];

const PHASE_PROPERTIES: [&str; 11] = [
    "loop",
    "cpus",
    "taskgroup",
    "nodes_membind",
    "util_min",
    "util_max",
    "policy",
    "priority",
    "dl-runtime",
    "dl-period",
    "dl-deadline",
];

// ---------------------------------------------------------------------------------------------
// JSON with rt-app's relaxations

// A JSON value whose objects keep every entry in file order, repeats included.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    // "a string (\"x\")" etc., for "expected …, found …" messages.
    fn describe(&self) -> String {
        match self {
            Json::Null => "null".into(),
            Json::Bool(b) => format!("a boolean ({b})"),
            Json::Int(i) => format!("the integer {i}"),
            Json::Float(f) => format!("the non-integer number {f}"),
            Json::Str(s) => format!("the string \"{s}\""),
            Json::Arr(_) => "an array".into(),
            Json::Obj(_) => "an object".into(),
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
                Ok(Json::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
                Ok(Json::Int(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
                Ok(Json::Int(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
                Ok(Json::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Json, E> {
                Ok(Json::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Json, E> {
                Ok(Json::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
                let mut items = Vec::new();
                while let Some(v) = a.next_element()? {
                    items.push(v);
                }
                Ok(Json::Arr(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, Json>()? {
                    entries.push((k, v));
                }
                Ok(Json::Obj(entries))
            }
        }
        d.deserialize_any(V)
    }
}

fn parse_json(text: &str, file: &str) -> Result<Json, RtAppError> {
    let syntax = |e: serde_json::Error| RtAppError::Syntax {
        file: file.to_string(),
        line: e.line(),
        column: e.column(),
        message: strip_position(&e),
    };
    let cleaned = relax(text).map_err(|(line, column, message)| RtAppError::Syntax {
        file: file.to_string(),
        line,
        column,
        message,
    })?;
    let mut de = serde_json::Deserializer::from_str(&cleaned);
    let value = Json::deserialize(&mut de).map_err(syntax)?;
    de.end().map_err(syntax)?;
    Ok(value)
}

// serde_json appends " at line L column C"; the position is reported in its own fields.
fn strip_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Blanks out what json-c tolerates and strict JSON does not: `/* */` and `//` comments outside
/// strings, and a comma right before `}` or `]`. Everything is replaced byte for byte with spaces
/// (newlines kept), so serde_json's line and column numbers still point into the original text.
fn relax(text: &str) -> Result<String, (usize, usize, String)> {
    let src = text.as_bytes();
    let mut out = src.to_vec();
    let mut i = 0;
    let mut in_string = false;
    while i < src.len() {
        let c = src[i];
        if in_string {
            match c {
                b'\\' => i += 1, // skip the escaped byte (an ASCII character in valid JSON)
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match (c, src.get(i + 1)) {
            (b'"', _) => in_string = true,
            (b'/', Some(b'/')) => {
                while i < src.len() && src[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
                continue;
            }
            (b'/', Some(b'*')) => {
                let start = i;
                out[i] = b' ';
                out[i + 1] = b' ';
                i += 2;
                loop {
                    if i >= src.len() {
                        let (line, column) = position(text, start);
                        return Err((line, column, "unterminated /* comment".into()));
                    }
                    if src[i] == b'*' && src.get(i + 1) == Some(&b'/') {
                        out[i] = b' ';
                        out[i + 1] = b' ';
                        i += 2;
                        break;
                    }
                    if src[i] != b'\n' {
                        out[i] = b' ';
                    }
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // Trailing commas, on the comment-free text. Each whitespace run is scanned by at most the
    // one comma before it, so this stays linear.
    let mut in_string = false;
    let mut i = 0;
    while i < out.len() {
        let c = out[i];
        if in_string {
            match c {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if c == b'"' {
            in_string = true;
        } else if c == b',' {
            let mut j = i + 1;
            while j < out.len() && matches!(out[j], b' ' | b'\t' | b'\n' | b'\r') {
                j += 1;
            }
            if j < out.len() && matches!(out[j], b'}' | b']') {
                out[i] = b' ';
            }
        }
        i += 1;
    }
    // Only whole comments (delimited by ASCII) and ASCII commas were replaced by ASCII spaces.
    String::from_utf8(out).map_err(|_| (1, 1, "invalid UTF-8 after removing comments".into()))
}

fn position(text: &str, byte: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..byte];
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    (line, byte - line_start + 1)
}

// ---------------------------------------------------------------------------------------------
// Conversion

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PolicyKind {
    Other,
    Batch,
    Idle,
    Fifo,
    Rr,
    Deadline,
}

fn policy_kind(name: &str) -> Option<PolicyKind> {
    // rt-app compares with strcmp(): exact, case-sensitive names.
    match name {
        "SCHED_OTHER" => Some(PolicyKind::Other),
        "SCHED_BATCH" => Some(PolicyKind::Batch),
        "SCHED_IDLE" => Some(PolicyKind::Idle),
        "SCHED_FIFO" => Some(PolicyKind::Fifo),
        "SCHED_RR" => Some(PolicyKind::Rr),
        "SCHED_DEADLINE" => Some(PolicyKind::Deadline),
        _ => None,
    }
}

fn kind_of(p: &Policy) -> PolicyKind {
    match p {
        Policy::Other { .. } => PolicyKind::Other,
        Policy::Batch { .. } => PolicyKind::Batch,
        Policy::Idle => PolicyKind::Idle,
        Policy::Fifo { .. } => PolicyKind::Fifo,
        Policy::Rr { .. } => PolicyKind::Rr,
        Policy::Deadline(_) => PolicyKind::Deadline,
    }
}

fn event_prefix(key: &str) -> Option<&'static str> {
    EVENT_PREFIXES
        .iter()
        .copied()
        .find(|p| key.starts_with(p))
        .or_else(|| key.starts_with(PACER_WSS).then_some(PACER_WSS))
}

// pacer's extension event, the working-set phase (crate::wss). No rt-app event name is a prefix
// of it, so rt-app reads a file that has it (ignoring the key) and it can never take the meaning
// of an rt-app event; matched by prefix like them (`pacer_wss2`).
const PACER_WSS: &str = "pacer_wss";

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

// Which timer an event names, before thread instances exist.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum TimerRef {
    Shared(String),
    /// `unique…`: one timer per thread instance (and per distinct name within it).
    PerThread(String),
}

#[derive(Debug, Clone)]
enum EventTemplate {
    Plain(Event),
    Timer {
        timer: TimerRef,
        period: Duration,
        absolute: bool,
    },
    /// An event naming shared resources (or, for `fork`, a task), resolved once every task is
    /// known.
    Shared(SharedEvent),
    /// A `memrun`, whose buffer is found or created per thread instance.
    MemRun(MemRunTemplate),
}

// A `memrun` event as written.
#[derive(Debug, Clone)]
struct MemRunTemplate {
    kind: MemBufferKind,
    size: u64,
    count: u64,
    /// `ref`: one buffer per name (and type) across the file; `None`: one per thread.
    reference: Option<String>,
    /// The event's JSON path.
    path: String,
}

impl MemRunTemplate {
    /// rt-app's name of the buffer: `ref` as written, else the parameters it encodes
    /// (`memrun_read_<size>`, `memrun_write_<size>`, `memrun_<r|s>_<stride>_<size>`) followed by
    /// the thread's tag (create_unique_name()).
    fn buffer_name(&self, tag: usize) -> String {
        if let Some(r) = &self.reference {
            return r.clone();
        }
        let size = self.size;
        match self.kind {
            MemBufferKind::Read => format!("memrun_read_{size}{tag:x}"),
            MemBufferKind::Write => format!("memrun_write_{size}{tag:x}"),
            MemBufferKind::Chase { stride, order } => {
                let o = if order == ChaseOrder::Random { 'r' } else { 's' };
                format!("memrun_{o}_{stride}_{size}{tag:x}")
            }
        }
    }

    fn access(&self) -> MemAccess {
        match self.kind {
            MemBufferKind::Read => MemAccess::Read,
            MemBufferKind::Write => MemAccess::Write,
            MemBufferKind::Chase { .. } => MemAccess::Chase,
        }
    }

    // "size 4096" or "size 4096, stride 64, pattern random", for conflict messages.
    fn params(&self) -> String {
        match self.kind {
            MemBufferKind::Chase { stride, order } => format!(
                "size {}, stride {stride}, pattern {}",
                self.size,
                if order == ChaseOrder::Random {
                    "random"
                } else {
                    "sequential"
                }
            ),
            _ => format!("size {}", self.size),
        }
    }
}

// How rt-app finds a `memrun` buffer (get_resource_index(): by name and type). Per-thread buffers
// are keyed by the thread and the parameters their name encodes rather than by the name itself:
// pacer's short tags could make two encoded names collide (`memrun_read_1` + tag 23 and
// `memrun_read_12` + tag 3), which rt-app's tags (addresses) never do.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum MemKey {
    Shared(String, MemAccess),
    PerThread(usize, MemBufferKind, u64),
}

// The `memrun` buffers of the file, as they are created.
#[derive(Default)]
struct MemBuffers {
    list: Vec<MemBuffer>,
    /// The first event naming each buffer (its template), for conflict messages.
    first: Vec<MemRunTemplate>,
    by_key: HashMap<MemKey, MemBufferId>,
}

// Events on named resources, as written; `suspend` names its own task's resources.
#[derive(Debug, Clone)]
enum SharedEvent {
    Lock(String),
    Unlock(String),
    Wait { cond: String, mutex: String },
    Signal(String),
    Broadcast(String),
    Sync { cond: String, mutex: String },
    Barrier(String),
    Suspend,
    Resume(String),
    SemPost(String),
    SemWait(String),
    Fork { task: String, path: String },
}

#[derive(Debug, Clone)]
struct PhaseTemplate {
    path: String,
    loops: u64,
    affinity: Option<Vec<usize>>,
    policy: Option<Policy>,
    taskgroup: Option<String>,
    membind: Option<Vec<u32>>,
    util_min: Option<u32>,
    util_max: Option<u32>,
    /// Each event with its key as written (`run0`, `lock1`).
    events: Vec<(String, EventTemplate)>,
}

#[derive(Debug)]
struct TaskTemplate {
    name: String,
    path: String,
    instances: u64,
    delay: Duration,
    affinity: Option<Vec<usize>>,
    policy: Policy,
    loops: Option<u64>,
    phases: Vec<PhaseTemplate>,
    util_min: Option<u32>,
    util_max: Option<u32>,
    taskgroup: Option<String>,
    membind: Option<Vec<u32>>,
}

// The scheduling keys found at one level (thread or phase), with their paths.
#[derive(Default)]
struct SchedKeys<'j> {
    policy: Option<(&'j Json, String)>,
    priority: Option<(&'j Json, String)>,
    dl_runtime: Option<(&'j Json, String)>,
    dl_period: Option<(&'j Json, String)>,
    dl_deadline: Option<(&'j Json, String)>,
    // Legacy thread-level spellings (tutorial: "For backward compatibility, the key "runtime" …").
    runtime: Option<(&'j Json, String)>,
    period: Option<(&'j Json, String)>,
    deadline: Option<(&'j Json, String)>,
}

impl<'j> SchedKeys<'j> {
    fn from(props: &HashMap<&str, (&'j Json, String)>, legacy: bool) -> Self {
        let get = |k: &str| props.get(k).cloned();
        SchedKeys {
            policy: get("policy"),
            priority: get("priority"),
            dl_runtime: get("dl-runtime"),
            dl_period: get("dl-period"),
            dl_deadline: get("dl-deadline"),
            runtime: if legacy { get("runtime") } else { None },
            period: if legacy { get("period") } else { None },
            deadline: if legacy { get("deadline") } else { None },
        }
    }
}

struct Parser<'a> {
    file: &'a str,
    ignored: Vec<String>,
    /// (JSON path, why): what pacer cannot run as rt-app would. Since `memrun`, nothing of
    /// current rt-app's grammar lands here; the strict/`--lenient` handling stays for what rt-app
    /// adds next.
    unsupported: Vec<(String, String)>,
}

type R<T> = Result<T, RtAppError>;

impl Parser<'_> {
    fn err(&self, field: impl Into<String>, message: impl Into<String>) -> RtAppError {
        RtAppError::Field {
            file: self.file.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }

    fn ignore(&mut self, path: &str, why: &str) {
        self.ignored.push(format!("{path}: {why}"));
    }

    fn string<'j>(&self, v: &'j Json, path: &str, what: &str) -> R<&'j str> {
        match v {
            Json::Str(s) => Ok(s),
            other => Err(self.err(path, format!("expected {what}, found {}", other.describe()))),
        }
    }

    // json-c's boolean reading of rt-app's flags (`get_bool_value_from()`): a JSON boolean.
    fn boolean(&self, v: &Json, path: &str) -> R<bool> {
        match v {
            Json::Bool(b) => Ok(*b),
            other => Err(self.err(
                path,
                format!("expected true or false, found {}", other.describe()),
            )),
        }
    }

    fn object<'j>(&self, v: &'j Json, path: &str, what: &str) -> R<&'j [(String, Json)]> {
        match v {
            Json::Obj(entries) => Ok(entries),
            other => Err(self.err(path, format!("expected {what}, found {}", other.describe()))),
        }
    }

    // An rt-app integer: a JSON integer in rt-app's 32-bit range.
    fn int(&self, v: &Json, path: &str, what: &str) -> R<i64> {
        match v {
            Json::Int(i) if (-RTAPP_INT_MAX - 1..=RTAPP_INT_MAX).contains(i) => Ok(*i as i64),
            Json::Int(i) => Err(self.err(
                path,
                format!("expected {what} that fits rt-app's 32-bit integers, found {i}"),
            )),
            other => Err(self.err(path, format!("expected {what}, found {}", other.describe()))),
        }
    }

    // A duration in microseconds → nanoseconds.
    fn micros(&self, v: &Json, path: &str) -> R<Duration> {
        let what = "an integer number of microseconds ≥ 0";
        let us = self.int(v, path, what)?;
        if us < 0 {
            return Err(self.err(path, format!("expected {what}, found {us}")));
        }
        Ok(Duration::from_us(us as u64)) // ≤ 2^31 µs: no overflow
    }

    // `loop`: -1 = forever (None), n ≥ 1 = n times. rt-app's handling of 0 and other negative
    // values differs between thread and phase level and is never what a file means.
    fn loop_count(&self, v: &Json, path: &str) -> R<Option<u64>> {
        let what = "a loop count: -1 (forever) or an integer ≥ 1";
        match self.int(v, path, what)? {
            -1 => Ok(None),
            n if n >= 1 => Ok(Some(n as u64)),
            n => Err(self.err(path, format!("expected {what}, found {n}"))),
        }
    }

    fn cpus(&self, v: &Json, path: &str) -> R<Vec<usize>> {
        let Json::Arr(items) = v else {
            return Err(self.err(
                path,
                format!("expected an array of CPU numbers, found {}", v.describe()),
            ));
        };
        if items.is_empty() {
            return Err(self.err(path, "expected at least one CPU number, found an empty array"));
        }
        let mut cpus = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let n = self.int(item, &p, "a CPU number ≥ 0")?;
            if n < 0 {
                return Err(self.err(p, format!("expected a CPU number ≥ 0, found {n}")));
            }
            cpus.push(n as usize);
        }
        // A CPU set: order and repeats carry no meaning.
        cpus.sort_unstable();
        cpus.dedup();
        Ok(cpus)
    }

    fn root(&mut self, root: &Json) -> R<Workload> {
        let Json::Obj(entries) = root else {
            return Err(self.err(
                "(top level)",
                format!(
                    "expected an object with a `tasks` object, found {}",
                    root.describe()
                ),
            ));
        };
        let mut tasks = None;
        let mut global = None;
        let mut seen = HashSet::new();
        for (key, value) in entries {
            if !seen.insert(key.as_str()) {
                self.ignore(key, "repeated top-level key; only the first is read");
                continue;
            }
            match key.as_str() {
                "tasks" => tasks = Some(value),
                "global" => global = Some(value),
                "resources" => self.ignore(
                    key,
                    "rt-app resources are not modelled (rt-app itself creates them from the events)",
                ),
                _ => self.ignore(key, "not an rt-app top-level key"),
            }
        }
        let (duration, default_policy, settings) = match global {
            Some(g) => self.global(g)?,
            None => (None, PolicyKind::Other, RunSettings::default()),
        };
        let Some(tasks) = tasks else {
            return Err(self.err("tasks", "missing: expected an object mapping task names to tasks"));
        };
        let entries = self.object(tasks, "tasks", "an object mapping task names to tasks")?;
        if entries.is_empty() {
            return Err(self.err("tasks", "expected at least one task, found an empty object"));
        }
        let mut templates = Vec::with_capacity(entries.len());
        let mut names = HashSet::new();
        for (name, value) in entries {
            let path = join("tasks", name);
            if !names.insert(name.as_str()) {
                return Err(self.err(
                    path,
                    format!("expected unique task names, `{name}` appears twice"),
                ));
            }
            templates.push(self.task(name, value, &path, &default_policy)?);
        }
        let (threads, resources, mem_buffers) = self.instantiate(templates)?;
        Ok(Workload {
            threads,
            duration,
            ignored: std::mem::take(&mut self.ignored),
            resources,
            settings,
            mem_buffers,
        })
    }

    // `global`: the duration, the default policy and rt-app's run-time settings.
    fn global(&mut self, g: &Json) -> R<(Option<Duration>, PolicyKind, RunSettings)> {
        let entries = self.object(g, "global", "an object of global settings")?;
        let mut duration = None;
        let mut policy = PolicyKind::Other;
        let mut set = RunSettings::default();
        for (key, value) in entries {
            let path = join("global", key);
            if matches!(key.as_str(), "logdir" | "log_basename" | "log_size") {
                set.logs_set = true;
            }
            match key.as_str() {
                "duration" => {
                    // Seconds; -1 = until every thread ends. rt-app treats 0 the same way.
                    let what = "a duration in seconds: -1 (no limit) or an integer ≥ 0";
                    let s = self.int(value, &path, what)?;
                    duration = match s {
                        -1 | 0 => None,
                        s if s > 0 => Some(Duration::from_secs(s as u64)),
                        s => return Err(self.err(&path, format!("expected {what}, found {s}"))),
                    };
                }
                "default_policy" => {
                    let Json::Str(name) = value else {
                        return Err(self.err(
                            &path,
                            format!(
                                "expected a policy name ({POLICY_NAMES}), found {}",
                                value.describe()
                            ),
                        ));
                    };
                    let Some(kind) = policy_kind(name) else {
                        return Err(self.err(
                            &path,
                            format!("unknown policy \"{name}\": expected {POLICY_NAMES}"),
                        ));
                    };
                    policy = kind;
                }
                "calibration" => match value {
                    // A number is rt-app's ns per loop, used as is; a string names the CPU to
                    // calibrate on (`sscanf("CPU%d")`).
                    Json::Int(_) => {
                        let what = "ns per loop (an integer ≥ 1) or \"CPUn\"";
                        let n = self.int(value, &path, what)?;
                        if n < 1 {
                            return Err(self.err(&path, format!("expected {what}, found {n}")));
                        }
                        set.calibration_ns_per_loop = Some(n as u64);
                    }
                    Json::Str(cpu) => {
                        let n = cpu
                            .strip_prefix("CPU")
                            .and_then(|n| n.parse::<usize>().ok())
                            .ok_or_else(|| {
                                self.err(
                                    &path,
                                    format!("expected \"CPUn\" or ns per loop (an integer), found \"{cpu}\""),
                                )
                            })?;
                        set.calibration_cpu = n;
                    }
                    other => {
                        return Err(self.err(
                            &path,
                            format!(
                                "expected ns per loop (an integer) or \"CPUn\", found {}",
                                other.describe()
                            ),
                        ))
                    }
                },
                "pi_enabled" => set.pi_enabled = self.boolean(value, &path)?,
                "lock_pages" => set.lock_pages = self.boolean(value, &path)?,
                "gnuplot" => set.gnuplot = self.boolean(value, &path)?,
                "cumulative_slack" => set.cumulative_slack = self.boolean(value, &path)?,
                "logdir" => set.logdir = self.string(value, &path, "a directory (string)")?.to_string(),
                "log_basename" => {
                    set.log_basename = self
                        .string(value, &path, "a file name prefix (string)")?
                        .to_string()
                }
                "io_device" => {
                    set.io_device = self
                        .string(value, &path, "a file or device path (string)")?
                        .to_string()
                }
                "mem_buffer_size" => {
                    let what = "a buffer size in bytes ≥ 1";
                    let n = self.int(value, &path, what)?;
                    if n < 1 {
                        return Err(self.err(&path, format!("expected {what}, found {n}")));
                    }
                    set.mem_buffer_size = n as u64;
                }
                "log_size" => {
                    set.log_size = match value {
                        // MiB of in-memory buffer per thread.
                        Json::Int(_) => {
                            let what = "a buffer size in MiB ≥ 0, or \"file\", \"auto\" or \"disable\"";
                            let n = self.int(value, &path, what)?;
                            if n < 0 {
                                return Err(self.err(&path, format!("expected {what}, found {n}")));
                            }
                            Some((n as u64) << 20)
                        }
                        Json::Str(s) if s == "disable" => Some(0),
                        // rt-app falls back to the file system for "auto".
                        Json::Str(s) if s == "file" || s == "auto" => None,
                        other => {
                            return Err(self.err(
                                &path,
                                format!(
                                    "expected a size in MiB, \"file\", \"auto\" or \"disable\", found {}",
                                    other.describe()
                                ),
                            ))
                        }
                    }
                }
                "ftrace" => set.ftrace = self.ftrace(value, &path)?,
                _ => self.ignore(&path, "not an rt-app global setting; rt-app ignores it too"),
            }
        }
        Ok((duration, policy, set))
    }

    // `ftrace`: a comma-separated list of categories (rt-app `ftrace_setup()`: main, task, loop,
    // event, stats, none; case-insensitive), or the deprecated boolean (true = all).
    fn ftrace(&self, v: &Json, path: &str) -> R<FtraceCategories> {
        let list = match v {
            Json::Bool(true) => return Ok(FtraceCategories::ALL),
            Json::Bool(false) => return Ok(FtraceCategories::default()),
            Json::Str(s) => s,
            other => {
                return Err(self.err(
                    path,
                    format!(
                        "expected categories such as \"main,task,loop,event,stats\", found {}",
                        other.describe()
                    ),
                ))
            }
        };
        let mut c = FtraceCategories::default();
        for cat in list.split(',').filter(|c| !c.is_empty()) {
            match cat.to_ascii_lowercase().as_str() {
                "main" => c.main = true,
                "task" => c.task = true,
                "loop" => c.loops = true,
                "event" => c.event = true,
                "stats" => c.stats = true,
                "none" => c = FtraceCategories::default(),
                other => {
                    return Err(self.err(
                        path,
                        format!("unknown ftrace category \"{other}\": expected main, task, loop, event, stats or none"),
                    ))
                }
            }
        }
        Ok(c)
    }

    fn task(&mut self, name: &str, value: &Json, path: &str, default_policy: &PolicyKind) -> R<TaskTemplate> {
        let entries = self.object(value, path, "an object describing the task")?;
        // First pass: properties (first occurrence wins, as after workgen's renaming) and events,
        // in file order.
        let mut props: HashMap<&str, (&Json, String)> = HashMap::new();
        let mut events: Vec<(&str, &Json, String)> = Vec::new();
        let (mut util_min, mut util_max, mut taskgroup, mut membind) = (None, None, None, None);
        for (key, v) in entries {
            let p = join(path, key);
            if key == "runtime" && !props.contains_key("runtime") {
                // Both an event and the legacy name of `dl-runtime` (see TASK_PROPERTIES).
                props.insert("runtime", (v, p.clone()));
            }
            if TASK_PROPERTIES.contains(&key.as_str()) {
                if props.contains_key(key.as_str()) {
                    self.ignore(&p, "repeated key; only the first is read");
                } else {
                    props.insert(key.as_str(), (v, p));
                }
            } else if key == "util_min" {
                util_min = Some(self.clamp(v, &p)?);
            } else if key == "util_max" {
                util_max = Some(self.clamp(v, &p)?);
            } else if key == "taskgroup" {
                taskgroup = self.taskgroup(v, &p)?;
            } else if key == "nodes_membind" {
                membind = Some(self.nodes(v, &p)?);
            } else if key == "lock_order" || key == "resources" {
                self.ignore(&p, "legacy rt-app resource property, not modelled by pacer");
            } else if event_prefix(key).is_some() {
                events.push((key.as_str(), v, p));
            } else {
                self.ignore(&p, "not an rt-app event or property");
            }
        }

        let instances = match props.get("instance") {
            None => 1,
            Some((v, p)) => {
                // 0: no thread at the start; the task is only started by `fork` events.
                let what = "a number of threads ≥ 0";
                let n = self.int(v, p, what)?;
                if n < 0 {
                    return Err(self.err(p, format!("expected {what}, found {n}")));
                }
                n as u64
            }
        };
        let delay = match props.get("delay") {
            None => Duration::ZERO,
            Some((v, p)) => self.micros(v, p)?,
        };
        let affinity = match props.get("cpus") {
            None => None,
            Some((v, p)) => Some(self.cpus(v, p)?),
        };
        let policy = self.thread_policy(&SchedKeys::from(&props, true), *default_policy, path)?;

        let (loops, phases) = match props.get("phases") {
            Some((phases_v, phases_path)) => {
                for (_, _, p) in &events {
                    self.ignore(p, "event next to a `phases` object; rt-app only runs the phases");
                }
                let loops = match props.get("loop") {
                    None => None,
                    Some((v, p)) => self.loop_count(v, p)?,
                };
                let phase_entries =
                    self.object(phases_v, phases_path, "an object mapping phase names to phases")?;
                if phase_entries.is_empty() {
                    return Err(self.err(
                        phases_path.as_str(),
                        "expected at least one phase, found an empty object",
                    ));
                }
                let mut current = policy;
                let mut phases = Vec::with_capacity(phase_entries.len());
                let mut forever_from = None;
                for (i, (pname, pv)) in phase_entries.iter().enumerate() {
                    let ppath = join(phases_path, pname);
                    if let Some(first) = &forever_from {
                        self.ignore(&ppath, &format!("never reached: phase `{first}` loops forever"));
                        continue;
                    }
                    let (phase, forever) = self.phase(pv, &ppath, &mut current)?;
                    if forever {
                        if i > 0 {
                            return Err(self.err(
                                join(&ppath, "loop"),
                                "a phase that loops forever (-1) after other phases cannot be represented: only the first phase may loop forever",
                            ));
                        }
                        forever_from = Some(pname.clone());
                    }
                    phases.push(phase);
                }
                // A first phase looping forever is the thread looping forever over that phase.
                (if forever_from.is_some() { None } else { loops }, phases)
            }
            None => {
                // No `phases`: the thread object is the one phase. Its `loop` is the phase's loop
                // count and the thread runs once; without `loop` it runs forever (rt-app
                // parse_task_data()).
                let (thread_loops, phase_loops) = match props.get("loop") {
                    None => (None, 1),
                    Some((v, p)) => match self.loop_count(v, p)? {
                        None => (None, 1),
                        Some(n) => (Some(1), n),
                    },
                };
                if events.is_empty() {
                    return Err(self.err(
                        path,
                        "expected at least one event (run, sleep, timer, …), found none",
                    ));
                }
                let mut evs = Vec::with_capacity(events.len());
                for (key, v, p) in &events {
                    if let Some(e) = self.event(key, v, p)? {
                        evs.push((key.to_string(), e));
                    }
                }
                let phase = PhaseTemplate {
                    path: path.to_string(),
                    loops: phase_loops,
                    affinity: None,
                    policy: None,
                    taskgroup: None,
                    membind: None,
                    util_min: None,
                    util_max: None,
                    events: evs,
                };
                (thread_loops, vec![phase])
            }
        };

        // Phases left with nothing pacer can run take no time: drop them.
        let mut kept = Vec::with_capacity(phases.len());
        for ph in phases {
            if ph.events.is_empty() && ph.policy.is_none() && ph.affinity.is_none() && ph.taskgroup.is_none()
            {
                if props.contains_key("phases") {
                    self.ignore(&ph.path, "phase has no event pacer runs; dropped");
                }
            } else {
                kept.push(ph);
            }
        }
        if kept.iter().all(|ph| ph.events.is_empty()) {
            return Err(self.err(path, "no event pacer can run; the others are skipped"));
        }
        // rt-app's check_taskgroup_policy_dep(): a thread in a task group must be SCHED_OTHER,
        // SCHED_BATCH or SCHED_IDLE wherever it is in one (the cpu controller's real-time
        // groups would need their own rt_runtime_us).
        let (mut now_policy, mut now_group) = (policy, taskgroup.as_deref());
        for ph in &kept {
            now_policy = ph.policy.unwrap_or(now_policy);
            now_group = ph.taskgroup.as_deref().or(now_group);
            if let Some(g) = now_group.filter(|_| !now_policy.is_fair()) {
                let at = ph
                    .taskgroup
                    .as_ref()
                    .map_or_else(|| path.to_string(), |_| join(&ph.path, "taskgroup"));
                return Err(self.err(
                    at,
                    format!(
                        "task group \"{g}\" with policy {}: rt-app supports task groups only for \
                         SCHED_OTHER, SCHED_BATCH and SCHED_IDLE threads",
                        now_policy.name()
                    ),
                ));
            }
        }
        Ok(TaskTemplate {
            name: name.to_string(),
            path: path.to_string(),
            instances,
            delay,
            affinity,
            policy,
            loops,
            phases: kept,
            util_min,
            util_max,
            taskgroup,
            membind,
        })
    }

    // One object of `phases`. Returns the phase and whether it loops forever.
    fn phase(&mut self, v: &Json, path: &str, current: &mut Policy) -> R<(PhaseTemplate, bool)> {
        let entries = self.object(v, path, "an object describing the phase")?;
        let mut props: HashMap<&str, (&Json, String)> = HashMap::new();
        let mut events: Vec<(&str, &Json, String)> = Vec::new();
        for (key, v) in entries {
            let p = join(path, key);
            if PHASE_PROPERTIES.contains(&key.as_str()) {
                if props.contains_key(key.as_str()) {
                    self.ignore(&p, "repeated key; only the first is read");
                } else {
                    props.insert(key.as_str(), (v, p));
                }
            } else if event_prefix(key).is_some() {
                events.push((key.as_str(), v, p));
            } else if TASK_PROPERTIES.contains(&key.as_str()) {
                self.ignore(&p, "thread-level property; rt-app does not read it in a phase");
            } else {
                self.ignore(&p, "not an rt-app event or property");
            }
        }
        if events.is_empty() {
            // rt-app: "No events found. Task must have events or it's useless".
            return Err(self.err(
                path,
                "expected at least one event (run, sleep, timer, …), found none",
            ));
        }
        let (loops, forever) = match props.get("loop") {
            None => (1, false),
            Some((v, p)) => match self.loop_count(v, p)? {
                None => (1, true),
                Some(n) => (n, false),
            },
        };
        let affinity = match props.get("cpus") {
            None => None,
            Some((v, p)) => Some(self.cpus(v, p)?),
        };
        let policy = self.phase_policy(&SchedKeys::from(&props, false), current, path)?;
        if let Some(p) = policy {
            *current = p;
        }
        let taskgroup = match props.get("taskgroup") {
            None => None,
            Some((v, p)) => self.taskgroup(v, p)?,
        };
        let membind = match props.get("nodes_membind") {
            None => None,
            Some((v, p)) => Some(self.nodes(v, p)?),
        };
        let util_min = props.get("util_min").map(|(v, p)| self.clamp(v, p)).transpose()?;
        let util_max = props.get("util_max").map(|(v, p)| self.clamp(v, p)).transpose()?;
        let mut evs = Vec::with_capacity(events.len());
        for (key, v, p) in &events {
            if let Some(e) = self.event(key, v, p)? {
                evs.push((key.to_string(), e));
            }
        }
        Ok((
            PhaseTemplate {
                path: path.to_string(),
                loops,
                affinity,
                policy,
                taskgroup,
                membind,
                util_min,
                util_max,
                events: evs,
            },
            forever,
        ))
    }

    // A `util_min`/`util_max` value: 0..=1024 (rt-app parse_sched_data()).
    fn clamp(&self, v: &Json, path: &str) -> R<u32> {
        let what = "a utilisation clamp in 0..=1024";
        let n = self.int(v, path, what)?;
        if !(0..=1024).contains(&n) {
            return Err(self.err(path, format!("expected {what}, found {n}")));
        }
        Ok(n as u32)
    }

    // A `nodes_membind` value: an array of NUMA node numbers (rt-app parse_numa_data(); which
    // nodes exist is the executor's to check, as rt-app checks against the machine it runs on).
    fn nodes(&self, v: &Json, path: &str) -> R<Vec<u32>> {
        let what = "an array of NUMA node numbers such as [0, 1]";
        let Json::Arr(items) = v else {
            return Err(self.err(path, format!("expected {what}, found {}", v.describe())));
        };
        if items.is_empty() {
            return Err(self.err(path, format!("expected {what}, found an empty array")));
        }
        let mut nodes = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let n = self.int(item, &p, "a NUMA node number ≥ 0")?;
            let n = u32::try_from(n)
                .ok()
                .filter(|&n| n < 1024)
                .ok_or_else(|| self.err(&p, format!("expected a NUMA node number in 0..1024, found {n}")))?;
            if !nodes.contains(&n) {
                nodes.push(n);
            }
        }
        nodes.sort_unstable();
        Ok(nodes)
    }

    // A `taskgroup` value: a cgroup path under the cpu controller, starting with `/` (rt-app
    // parse_taskgroup_data(); an empty string means none). `.` and `..` components are refused
    // so that the group stays inside the controller's hierarchy.
    fn taskgroup(&self, v: &Json, path: &str) -> R<Option<String>> {
        let what = "a cgroup path starting with \"/\", such as \"/tg1\" or \"/tg1/tg11\"";
        let g = self.string(v, path, what)?;
        if g.is_empty() {
            return Ok(None);
        }
        if !g.starts_with('/') {
            return Err(self.err(path, format!("expected {what}, found \"{g}\"")));
        }
        if g.split('/').any(|c| c == "." || c == ".." || c.contains('\n')) {
            return Err(self.err(
                path,
                format!("expected {what} without `.`, `..` or line breaks, found {g:?}"),
            ));
        }
        Ok(Some(g.to_string()))
    }

    fn policy_name(&self, v: &Json, path: &str) -> R<PolicyKind> {
        let Json::Str(name) = v else {
            return Err(self.err(
                path,
                format!("expected a policy name ({POLICY_NAMES}), found {}", v.describe()),
            ));
        };
        policy_kind(name).ok_or_else(|| {
            self.err(
                path,
                format!("unknown policy \"{name}\": expected {POLICY_NAMES}"),
            )
        })
    }

    // Builds a non-deadline policy from a priority (or rt-app's default for the class).
    fn priority_policy(&mut self, kind: PolicyKind, priority: Option<&(&Json, String)>) -> R<Policy> {
        let read = |p: &Self, what: &str| -> R<Option<(i64, &str)>> {
            match priority {
                None => Ok(None),
                Some((v, path)) => Ok(Some((p.int(v, path, what)?, path.as_str()))),
            }
        };
        match kind {
            PolicyKind::Other | PolicyKind::Batch => {
                // For SCHED_OTHER and SCHED_BATCH rt-app's priority is the nice value (default 0),
                // and it refuses values outside -20..=19 (__set_thread_nice()).
                let what = "a nice value in -20..=19 (SCHED_OTHER/SCHED_BATCH priority)";
                let nice = match read(self, what)? {
                    None => 0,
                    Some((n, _)) if (-20..=19).contains(&n) => n,
                    Some((n, path)) => return Err(self.err(path, format!("expected {what}, found {n}"))),
                } as i32;
                Ok(if kind == PolicyKind::Batch {
                    Policy::Batch { nice }
                } else {
                    Policy::Other { nice }
                })
            }
            PolicyKind::Idle => {
                if let Some((_, path)) = priority {
                    self.ignore(path, "SCHED_IDLE has no priority; ignored");
                }
                Ok(Policy::Idle)
            }
            PolicyKind::Fifo | PolicyKind::Rr => {
                // rt-app's default real-time priority is 10 (DEFAULT_THREAD_PRIORITY); the kernel
                // accepts 1..=99.
                let what = "a real-time priority in 1..=99";
                let prio = match read(self, what)? {
                    None => 10,
                    Some((n, _)) if (1..=99).contains(&n) => n,
                    Some((n, path)) => return Err(self.err(path, format!("expected {what}, found {n}"))),
                } as u8;
                Ok(if kind == PolicyKind::Fifo {
                    Policy::Fifo { priority: prio }
                } else {
                    Policy::Rr { priority: prio }
                })
            }
            PolicyKind::Deadline => unreachable!("deadline policies are built by `reservation`"),
        }
    }

    // SCHED_DEADLINE parameters, defaulted as parse_sched_data() does: dl-period defaults to
    // dl-runtime and dl-deadline to dl-period; then, at thread level, each value still 0 falls
    // back to its legacy key (`runtime`, `period` defaulting to runtime, `deadline` to period).
    fn reservation(&mut self, keys: &SchedKeys, at: &str) -> R<Policy> {
        let read = |p: &Self, k: &Option<(&Json, String)>| -> R<Option<(Duration, String)>> {
            match k {
                None => Ok(None),
                Some((v, path)) => Ok(Some((p.micros(v, path)?, path.clone()))),
            }
        };
        let mut runtime = read(self, &keys.dl_runtime)?.unwrap_or((Duration::ZERO, join(at, "dl-runtime")));
        let mut period = read(self, &keys.dl_period)?.unwrap_or((runtime.0, join(at, "dl-period")));
        let mut deadline = read(self, &keys.dl_deadline)?.unwrap_or((period.0, join(at, "dl-deadline")));
        if runtime.0.is_zero() {
            if let Some(r) = read(self, &keys.runtime)? {
                runtime = r;
            }
        }
        if period.0.is_zero() {
            if let Some(p) = read(self, &keys.period)? {
                period = p;
            } else {
                period.0 = runtime.0;
            }
        }
        if deadline.0.is_zero() {
            if let Some(d) = read(self, &keys.deadline)? {
                deadline = d;
            } else {
                deadline.0 = period.0;
            }
        }
        if runtime.0.is_zero() {
            return Err(self.err(
                runtime.1.as_str(),
                "expected a SCHED_DEADLINE runtime ≥ 1024ns (`dl-runtime`, in µs), found none",
            ));
        }
        let res = Reservation::new(runtime.0, deadline.0, period.0);
        if let Err(e) = res.validate() {
            let field = match e {
                ReservationError::RuntimeTooSmall(_) | ReservationError::RuntimeAboveDeadline { .. } => {
                    &runtime.1
                }
                ReservationError::ZeroDeadline | ReservationError::DeadlineAbovePeriod { .. } => &deadline.1,
                ReservationError::PeriodOutOfRange { .. } | ReservationError::TopBitSet => &period.1,
            };
            return Err(self.err(
                field.as_str(),
                format!(
                    "invalid SCHED_DEADLINE parameters (runtime {}, deadline {}, period {}): {e}; rt-app defaults dl-period to dl-runtime and dl-deadline to dl-period",
                    res.runtime, res.deadline, res.period
                ),
            ));
        }
        if let Some((v, path)) = &keys.priority {
            // rt-app passes priority 0 to the kernel for SCHED_DEADLINE whatever the file says.
            if !matches!(v, Json::Int(0)) {
                self.ignore(path, "priority has no meaning for SCHED_DEADLINE; ignored");
            }
        }
        Ok(Policy::Deadline(res))
    }

    fn warn_unused_deadline_keys(&mut self, keys: &SchedKeys) {
        for (_, path) in [
            &keys.dl_runtime,
            &keys.dl_period,
            &keys.dl_deadline,
            &keys.period,
            &keys.deadline,
        ]
        .into_iter()
        .flatten()
        {
            self.ignored
                .push(format!("{path}: only used with SCHED_DEADLINE; ignored"));
        }
    }

    // The thread's policy: its own `policy` or the global default, with rt-app's defaults for
    // whatever is not given. `at` is the task's path (for parameters that are missing).
    fn thread_policy(&mut self, keys: &SchedKeys, default: PolicyKind, at: &str) -> R<Policy> {
        let kind = match &keys.policy {
            Some((v, path)) => self.policy_name(v, path)?,
            None => default,
        };
        if kind == PolicyKind::Deadline {
            return self.reservation(keys, at);
        }
        let policy = self.priority_policy(kind, keys.priority.as_ref())?;
        self.warn_unused_deadline_keys(keys);
        Ok(policy)
    }

    // A phase changes scheduling only when it sets a policy, a priority or deadline parameters;
    // without `policy` it keeps the current class (rt-app's `same`).
    fn phase_policy(&mut self, keys: &SchedKeys, current: &Policy, at: &str) -> R<Option<Policy>> {
        let any_dl = keys.dl_runtime.is_some() || keys.dl_period.is_some() || keys.dl_deadline.is_some();
        if keys.policy.is_none() && keys.priority.is_none() && !any_dl {
            return Ok(None);
        }
        let kind = match &keys.policy {
            Some((v, path)) => self.policy_name(v, path)?,
            None => kind_of(current),
        };
        if kind == PolicyKind::Deadline {
            return self.reservation(keys, at).map(Some);
        }
        self.warn_unused_deadline_keys(keys);
        if keys.policy.is_none() && keys.priority.is_none() {
            // Only deadline keys on a non-deadline thread: rt-app leaves the policy alone.
            return Ok(None);
        }
        self.priority_policy(kind, keys.priority.as_ref()).map(Some)
    }

    // One event entry. `None` for events pacer skips (recorded in `ignored`).
    fn event(&mut self, key: &str, v: &Json, path: &str) -> R<Option<EventTemplate>> {
        let Some(prefix) = event_prefix(key) else {
            return Ok(None);
        };
        let ev = match prefix {
            "run" => Event::Run {
                work: Work::Fixed {
                    ns: self.micros(v, path)?,
                },
            },
            "runtime" => Event::Runtime {
                duration: self.micros(v, path)?,
            },
            "sleep" => Event::Sleep {
                duration: self.micros(v, path)?,
            },
            "yield" => Event::Yield, // rt-app ignores the value (documented as an optional string)
            "timer" => return self.timer(v, path),
            "mem" | "iorun" => {
                let what = "a number of bytes ≥ 0";
                let n = self.int(v, path, what)?;
                if n < 0 {
                    return Err(self.err(path, format!("expected {what}, found {n}")));
                }
                if prefix == "mem" {
                    Event::Mem { bytes: n as u64 }
                } else {
                    Event::IoRun { bytes: n as u64 }
                }
            }
            "memrun" => return self.memrun(v, path),
            PACER_WSS => Event::WorkingSet(self.working_set(v, path)?),
            "wait" | "sync" => {
                // An object {"ref": cond, "mutex": mutex}; rt-app names a missing one "unknown".
                let entries = self.object(v, path, "an object {\"ref\": condition, \"mutex\": mutex}")?;
                let mut cond = "unknown".to_string();
                let mut mutex = "unknown".to_string();
                for (k, val) in entries {
                    let p = join(path, k);
                    match k.as_str() {
                        "ref" => cond = self.string(val, &p, "a condition name (string)")?.to_string(),
                        "mutex" => mutex = self.string(val, &p, "a mutex name (string)")?.to_string(),
                        _ => self.ignore(&p, "not a key of this event (ref, mutex); rt-app ignores it too"),
                    }
                }
                let e = if prefix == "wait" {
                    SharedEvent::Wait { cond, mutex }
                } else {
                    SharedEvent::Sync { cond, mutex }
                };
                return Ok(Some(EventTemplate::Shared(e)));
            }
            // `suspend`'s value is ignored: a thread suspends on its own task's name.
            "suspend" => return Ok(Some(EventTemplate::Shared(SharedEvent::Suspend))),
            other => {
                // Events naming one resource (or task) by a string; rt-app refuses other values.
                let what = match other {
                    "lock" | "unlock" => "a mutex name (string)",
                    "signal" | "broad" => "a condition name (string)",
                    "barrier" => "a barrier name (string)",
                    "resume" | "fork" => "a task name (string)",
                    _ => "a semaphore name (string)",
                };
                let name = self.string(v, path, what)?.to_string();
                let e = match other {
                    "lock" => SharedEvent::Lock(name),
                    "unlock" => SharedEvent::Unlock(name),
                    "signal" => SharedEvent::Signal(name),
                    "broad" => SharedEvent::Broadcast(name),
                    "barrier" => SharedEvent::Barrier(name),
                    "resume" => SharedEvent::Resume(name),
                    "fork" => SharedEvent::Fork {
                        task: name,
                        path: path.to_string(),
                    },
                    "sem_post" => SharedEvent::SemPost(name),
                    _ => SharedEvent::SemWait(name),
                };
                return Ok(Some(EventTemplate::Shared(e)));
            }
        };
        Ok(Some(EventTemplate::Plain(ev)))
    }

    // A `memrun` object (parse_task_event_data(): `type`, `size` and `count` required, `stride`
    // (64) and `pattern` (random) for chase, `ref` optional). json-c gives null for a null value
    // and for a missing key alike, so null counts as missing, as under rt-app.
    fn memrun(&mut self, v: &Json, path: &str) -> R<Option<EventTemplate>> {
        let entries = self.object(
            v,
            path,
            "an object {\"type\": \"read\"|\"write\"|\"chase\", \"size\": bytes, \"count\": n, …}",
        )?;
        let get = |k: &str| {
            entries
                .iter()
                .find(|(key, val)| key == k && *val != Json::Null)
                .map(|(_, val)| val)
        };
        let tpath = join(path, "type");
        let types = "\"read\", \"write\" or \"chase\"";
        let access = match get("type") {
            None => return Err(self.err(tpath, format!("missing: expected {types}"))),
            Some(Json::Str(t)) if t == "read" => MemAccess::Read,
            Some(Json::Str(t)) if t == "write" => MemAccess::Write,
            Some(Json::Str(t)) if t == "chase" => MemAccess::Chase,
            Some(other) => {
                return Err(self.err(tpath, format!("expected {types}, found {}", other.describe())))
            }
        };
        let spath = join(path, "size");
        let what = "a buffer size in bytes ≥ 1";
        let size = match get("size") {
            None => return Err(self.err(spath, format!("missing: expected {what}"))),
            Some(v) => self.int(v, &spath, what)?,
        };
        if size < 1 {
            return Err(self.err(spath, format!("expected {what}, found {size}")));
        }
        let cpath = join(path, "count");
        let what = match access {
            MemAccess::Chase => "a number of pointer hops ≥ 0",
            _ => "a number of bytes ≥ 0",
        };
        let count = match get("count") {
            None => return Err(self.err(cpath, format!("missing: expected {what}"))),
            Some(v) => self.int(v, &cpath, what)?,
        };
        if count < 0 {
            return Err(self.err(cpath, format!("expected {what}, found {count}")));
        }
        let reference = match get("ref") {
            None => None,
            Some(Json::Str(r)) => Some(r.clone()),
            Some(other) => {
                return Err(self.err(
                    join(path, "ref"),
                    format!("expected a buffer name (string), found {}", other.describe()),
                ))
            }
        };
        let kind = match access {
            MemAccess::Read | MemAccess::Write => {
                for k in ["stride", "pattern"] {
                    if get(k).is_some() {
                        self.ignore(
                            &join(path, k),
                            "only a chase reads it; rt-app ignores it for read and write",
                        );
                    }
                }
                if access == MemAccess::Read {
                    MemBufferKind::Read
                } else {
                    MemBufferKind::Write
                }
            }
            MemAccess::Chase => {
                let ppath = join(path, "stride");
                let what = format!("a stride in bytes ≥ {CHASE_MIN_STRIDE} (a pointer's size)");
                let stride = match get("stride") {
                    None => 64,
                    Some(v) => self.int(v, &ppath, &what)?,
                };
                if stride < CHASE_MIN_STRIDE as i64 {
                    // Smaller, rt-app's pointers overlap and corrupt the chain; 0 divides by 0.
                    return Err(self.err(ppath, format!("expected {what}, found {stride}")));
                }
                let order = match get("pattern") {
                    None => ChaseOrder::Random,
                    Some(Json::Str(p)) if p == "random" => ChaseOrder::Random,
                    Some(Json::Str(p)) if p == "sequential" => ChaseOrder::Sequential,
                    // rt-app takes any other string for "random"; a misspelt "sequential" would
                    // silently change the access pattern.
                    Some(other) => {
                        return Err(self.err(
                            join(path, "pattern"),
                            format!(
                                "expected \"random\" or \"sequential\", found {}",
                                other.describe()
                            ),
                        ))
                    }
                };
                if size / stride < 2 {
                    // rt-app logs "mem_chase buffer too small" and leaves the chain unbuilt: the
                    // event then does nothing.
                    return Err(self.err(
                        join(path, "size"),
                        format!(
                            "expected at least 2 × stride ({} bytes) for a chain of 2 positions, found {size}",
                            2 * stride
                        ),
                    ));
                }
                MemBufferKind::Chase {
                    stride: stride as u64,
                    order,
                }
            }
        };
        for (k, _) in entries {
            if !["type", "size", "count", "stride", "pattern", "ref"].contains(&k.as_str()) {
                self.ignore(
                    &join(path, k),
                    "not a key of memrun (type, size, count, stride, pattern, ref); rt-app ignores it too",
                );
            }
        }
        Ok(Some(EventTemplate::MemRun(MemRunTemplate {
            kind,
            size: size as u64,
            count: count as u64,
            reference,
            path: path.to_string(),
        })))
    }

    // A `pacer_wss` object: `size` (bytes) required, `order` (sequential), `seed` (0), and at
    // most one of `passes`, `lines` or `run` (µs of warm work, as rt-app's `run`); one pass
    // without them.
    fn working_set(&mut self, v: &Json, path: &str) -> R<WorkingSet> {
        let entries = self.object(
            v,
            path,
            "an object {\"size\": bytes, \"order\": \"sequential\"|\"random\", \"passes\"|\"lines\"|\"run\": n}",
        )?;
        let spath = join(path, "size");
        let mut size = None;
        let mut order = WssOrder::Sequential;
        let mut seed = 0u64;
        let mut amount: Option<(String, WssAmount)> = None;
        for (k, val) in entries {
            let p = join(path, k);
            let count = |me: &Self, what: &str| -> R<u64> {
                let n = me.int(val, &p, what)?;
                u64::try_from(n).map_err(|_| me.err(p.as_str(), format!("expected {what}, found {n}")))
            };
            let a = match k.as_str() {
                "size" => {
                    size = Some(count(self, "a working-set size in bytes, a multiple of 64")?);
                    None
                }
                "order" => {
                    order = match val {
                        Json::Str(o) if o == "sequential" => WssOrder::Sequential,
                        Json::Str(o) if o == "random" => WssOrder::Random,
                        other => {
                            return Err(self.err(
                                p,
                                format!(
                                    "expected \"sequential\" or \"random\", found {}",
                                    other.describe()
                                ),
                            ))
                        }
                    };
                    None
                }
                "seed" => {
                    seed = count(self, "a seed ≥ 0")?;
                    None
                }
                "passes" => Some(WssAmount::Passes {
                    passes: count(self, "a number of passes ≥ 0")?,
                }),
                "lines" => Some(WssAmount::Lines {
                    lines: count(self, "a number of line accesses ≥ 0")?,
                }),
                "run" => Some(WssAmount::Work {
                    work: Work::Fixed {
                        ns: self.micros(val, &p)?,
                    },
                }),
                _ => {
                    return Err(self.err(
                        p,
                        "not a key of pacer_wss (size, order, seed, passes, lines, run)",
                    ))
                }
            };
            if let Some(a) = a {
                if let Some((first, _)) = &amount {
                    return Err(self.err(
                        p,
                        format!("expected one of passes, lines or run, found `{first}` too"),
                    ));
                }
                amount = Some((k.clone(), a));
            }
        }
        let Some(size) = size else {
            return Err(self.err(
                spath,
                "missing: expected a working-set size in bytes, a multiple of 64",
            ));
        };
        let ws = WorkingSet {
            size,
            order,
            seed,
            amount: amount.map_or(WssAmount::Passes { passes: 1 }, |(_, a)| a),
        };
        ws.validate().map_err(|e| self.err(spath, e.to_string()))?;
        Ok(ws)
    }

    // The buffer of `m` run by the thread tagged `tag`: found by rt-app's rule, or created. Events
    // sharing a `ref` and a type must agree on the parameters (rt-app's validate_init_args()).
    fn mem_buffer(&mut self, bufs: &mut MemBuffers, m: &MemRunTemplate, tag: usize) -> R<MemBufferId> {
        let key = match &m.reference {
            Some(r) => MemKey::Shared(r.clone(), m.access()),
            None => MemKey::PerThread(tag, m.kind, m.size),
        };
        if let Some(&id) = bufs.by_key.get(&key) {
            let first = &bufs.first[id.0];
            if first.kind == m.kind && first.size == m.size {
                return Ok(id);
            }
            let field = match (first.kind, m.kind) {
                _ if first.size != m.size => "size",
                (MemBufferKind::Chase { stride: a, .. }, MemBufferKind::Chase { stride: b, .. })
                    if a != b =>
                {
                    "stride"
                }
                _ => "pattern",
            };
            return Err(self.err(
                join(&m.path, field),
                format!(
                    "memrun buffer \"{}\" is also used by `{}` with {}, here with {}: memrun events \
                     sharing a `ref` and a type must agree on size, stride and pattern (rt-app \
                     exits: \"shared with mismatched params\")",
                    bufs.list[id.0].name,
                    first.path,
                    first.params(),
                    m.params()
                ),
            ));
        }
        if let Some(r) = &m.reference {
            // rt-app tells buffers apart by name and type: one `ref` for two types is two buffers.
            if let Some(other) = bufs
                .first
                .iter()
                .find(|o| o.reference.as_ref() == Some(r) && o.access() != m.access())
            {
                let note = format!(
                    "`ref` \"{r}\" also names a {} buffer (`{}`); as in rt-app, buffers are told \
                     apart by name and type, so this {} buffer is another one",
                    other.access().name(),
                    other.path,
                    m.access().name()
                );
                self.ignore(&join(&m.path, "ref"), &note);
            }
        }
        let id = MemBufferId(bufs.list.len());
        bufs.list.push(MemBuffer {
            name: m.buffer_name(tag),
            size: m.size,
            kind: m.kind,
        });
        bufs.first.push(m.clone());
        bufs.by_key.insert(key, id);
        Ok(id)
    }

    fn timer(&mut self, v: &Json, path: &str) -> R<Option<EventTemplate>> {
        let entries = self.object(v, path, "an object {\"ref\": name, \"period\": µs, \"mode\": …}")?;
        let mut reference = None;
        let mut period = None;
        let mut absolute = false;
        let mut seen = HashSet::new();
        for (key, value) in entries {
            let p = join(path, key);
            if !seen.insert(key.as_str()) {
                self.ignore(&p, "repeated key; only the first is read");
                continue;
            }
            match key.as_str() {
                "ref" => match value {
                    Json::Str(s) => reference = Some(s.clone()),
                    other => {
                        return Err(self.err(
                            p,
                            format!("expected a timer name (string), found {}", other.describe()),
                        ))
                    }
                },
                "period" => period = Some(self.micros(value, &p)?),
                "mode" => match value {
                    Json::Str(s) if s == "absolute" => absolute = true,
                    Json::Str(s) if s == "relative" => absolute = false,
                    other => {
                        return Err(self.err(
                            p,
                            format!(
                                "expected \"absolute\" or \"relative\", found {}",
                                other.describe()
                            ),
                        ))
                    }
                },
                _ => self.ignore(&p, "not a timer key (ref, period, mode)"),
            }
        }
        let Some(period) = period else {
            return Err(self.err(join(path, "period"), "missing: expected the timer period in µs"));
        };
        if period.is_zero() {
            // rt-app's doc/examples/template.json uses period 0 to disable a timer: it never waits.
            self.ignore(&join(path, "period"), "timer with period 0 never waits; skipped");
            return Ok(None);
        }
        // rt-app names an unnamed timer "unknown" (shared like any other name).
        let name = reference.unwrap_or_else(|| "unknown".to_string());
        let timer = if name.starts_with("unique") {
            TimerRef::PerThread(name)
        } else {
            TimerRef::Shared(name)
        };
        Ok(Some(EventTemplate::Timer {
            timer,
            period,
            absolute,
        }))
    }

    // Expands tasks into threads and gives timers and shared resources their ids, in file order.
    fn instantiate(
        &mut self,
        tasks: Vec<TaskTemplate>,
    ) -> R<(Vec<ThreadSpec>, Vec<Resource>, Vec<MemBuffer>)> {
        // A task with `instance: 0` still needs one spec, for its `fork`s to start.
        let specs_of = |t: &TaskTemplate| t.instances.max(1);
        let total: u64 = tasks.iter().map(specs_of).fold(0, u64::saturating_add);
        if total > MAX_THREADS {
            let worst = tasks
                .iter()
                .max_by_key(|t| t.instances)
                .map_or(String::new(), |t| t.path.clone());
            return Err(self.err(
                join(&worst, "instance"),
                format!("expected at most {MAX_THREADS} threads in total, found {total}"),
            ));
        }
        let events_of = |t: &TaskTemplate| -> u64 {
            let per_thread: u64 = t.phases.iter().map(|ph| ph.events.len() as u64).sum();
            per_thread.saturating_mul(specs_of(t))
        };
        let events: u64 = tasks.iter().map(events_of).fold(0, u64::saturating_add);
        if events > MAX_EVENTS {
            let worst = tasks
                .iter()
                .max_by_key(|t| events_of(t))
                .map_or(String::new(), |t| t.path.clone());
            return Err(self.err(
                join(&worst, "instance"),
                format!(
                    "expected at most {MAX_EVENTS} events in total once `instance` has copied each \
                     task's events into its threads, found {events}"
                ),
            ));
        }
        // Where each task's first thread spec will be, for `fork` (which may name a later task).
        let mut first_spec: HashMap<&str, usize> = HashMap::new();
        let mut at = 0usize;
        for t in &tasks {
            first_spec.insert(t.name.as_str(), at);
            at += specs_of(t) as usize;
        }
        let mut shared: HashMap<String, TimerId> = HashMap::new();
        let mut next_id = 0usize;
        let mut absolute: HashSet<TimerId> = HashSet::new();
        // rt-app looks resources up by (name, type): a mutex and a condition may share a name.
        let mut resources: Vec<Resource> = Vec::new();
        let mut by_name: HashMap<(String, u8), ResourceId> = HashMap::new();
        let mut resource = |name: &str, kind: ResourceKind| -> ResourceId {
            let tag = match kind {
                ResourceKind::Mutex => 0,
                ResourceKind::Cond => 1,
                ResourceKind::Barrier { .. } => 2,
                ResourceKind::Semaphore => 3,
            };
            *by_name.entry((name.to_string(), tag)).or_insert_with(|| {
                resources.push(Resource {
                    name: name.to_string(),
                    kind,
                });
                ResourceId(resources.len() - 1)
            })
        };
        // Sized once (total ≤ MAX_THREADS): growing by doubling would hold three times the
        // threads at the moment of each copy.
        let mut threads = Vec::with_capacity(total as usize);
        let mut names: HashMap<String, String> = HashMap::with_capacity(total as usize);
        let mut barrier_users: HashMap<ResourceId, u32> = HashMap::new();
        let mut mem = MemBuffers::default();
        // rt-app's thread index counts the threads created at the start, in file order.
        let mut index = 0u32;
        for task in &tasks {
            let forked = task.instances == 0;
            for i in 0..specs_of(task) {
                let name = if task.instances <= 1 {
                    task.name.clone()
                } else {
                    format!("{}-{i}", task.name)
                };
                if let Some(other) = names.insert(name.clone(), task.path.clone()) {
                    return Err(self.err(
                        task.path.as_str(),
                        format!(
                            "thread name `{name}` is also produced by `{other}`; rename one of the tasks"
                        ),
                    ));
                }
                let mut private: HashMap<String, TimerId> = HashMap::new();
                let mut phases = Vec::with_capacity(task.phases.len());
                // rt-app's per-thread tag (the address of its thread data) in unique resource
                // names; here the thread's position in the workload, which is stable.
                let tag = threads.len() + 1;
                for ph in &task.phases {
                    let mut events = Vec::with_capacity(ph.events.len());
                    let descs = ph
                        .events
                        .iter()
                        .map(|(key, e)| rtapp_desc(key, e, &task.name, tag))
                        .collect();
                    for (_, e) in &ph.events {
                        events.push(match e {
                            EventTemplate::Plain(ev) => ev.clone(),
                            EventTemplate::MemRun(m) => Event::MemRun {
                                buffer: self.mem_buffer(&mut mem, m, tag)?,
                                access: m.access(),
                                count: m.count,
                            },
                            EventTemplate::Timer {
                                timer,
                                period,
                                absolute: abs,
                            } => {
                                let table = match timer {
                                    TimerRef::Shared(_) => &mut shared,
                                    TimerRef::PerThread(_) => &mut private,
                                };
                                let key = match timer {
                                    TimerRef::Shared(n) | TimerRef::PerThread(n) => n.clone(),
                                };
                                let id = *table.entry(key).or_insert_with(|| {
                                    next_id += 1;
                                    TimerId(next_id - 1)
                                });
                                if *abs {
                                    absolute.insert(id);
                                }
                                Event::Timer {
                                    timer: id,
                                    period: *period,
                                    mode: TimerMode::Relative,
                                }
                            }
                            EventTemplate::Shared(se) => match se {
                                SharedEvent::Lock(m) => Event::Lock {
                                    mutex: resource(m, ResourceKind::Mutex),
                                },
                                SharedEvent::Unlock(m) => Event::Unlock {
                                    mutex: resource(m, ResourceKind::Mutex),
                                },
                                SharedEvent::Wait { cond, mutex } => Event::Wait {
                                    cond: resource(cond, ResourceKind::Cond),
                                    mutex: resource(mutex, ResourceKind::Mutex),
                                },
                                SharedEvent::Sync { cond, mutex } => Event::SignalWait {
                                    cond: resource(cond, ResourceKind::Cond),
                                    mutex: resource(mutex, ResourceKind::Mutex),
                                },
                                SharedEvent::Signal(c) => Event::Signal {
                                    cond: resource(c, ResourceKind::Cond),
                                },
                                SharedEvent::Broadcast(c) => Event::Broadcast {
                                    cond: resource(c, ResourceKind::Cond),
                                },
                                SharedEvent::Barrier(b) => {
                                    let id = resource(b, ResourceKind::Barrier { users: 0 });
                                    // Every use by a thread that exists at the start counts,
                                    // even two in one task (rt-app adds the task's instances
                                    // per event).
                                    if !forked {
                                        *barrier_users.entry(id).or_default() += 1;
                                    }
                                    Event::Barrier { barrier: id }
                                }
                                SharedEvent::Suspend => Event::Suspend {
                                    cond: resource(&task.name, ResourceKind::Cond),
                                    mutex: resource(&task.name, ResourceKind::Mutex),
                                },
                                SharedEvent::Resume(t) => Event::Resume {
                                    cond: resource(t, ResourceKind::Cond),
                                    mutex: resource(t, ResourceKind::Mutex),
                                },
                                SharedEvent::SemPost(n) => Event::SemPost {
                                    sem: resource(n, ResourceKind::Semaphore),
                                },
                                SharedEvent::SemWait(n) => Event::SemWait {
                                    sem: resource(n, ResourceKind::Semaphore),
                                },
                                SharedEvent::Fork { task: t, path } => match first_spec.get(t.as_str()) {
                                    Some(&thread) => Event::Fork { thread },
                                    None => {
                                        return Err(self.err(
                                            path.as_str(),
                                            format!(
                                                "expected the name of a task of this file, found \"{t}\""
                                            ),
                                        ))
                                    }
                                },
                            },
                        });
                    }
                    phases.push(Phase {
                        loops: ph.loops,
                        events,
                        affinity: ph.affinity.clone(),
                        policy: ph.policy,
                        taskgroup: ph.taskgroup.clone(),
                        membind: ph.membind.clone(),
                        util_min: ph.util_min,
                        util_max: ph.util_max,
                        event_descs: descs,
                    });
                }
                let thread_index = if forked {
                    0
                } else {
                    index += 1;
                    index - 1
                };
                threads.push(ThreadSpec {
                    // A forked thread's index and name are given when it is forked.
                    rtapp_name: (!forked).then(|| format!("{}-{thread_index}", task.name)),
                    index: thread_index,
                    forked,
                    name,
                    policy: task.policy,
                    affinity: task.affinity.clone(),
                    start_delay: task.delay,
                    phases,
                    loops: task.loops,
                    cooperative: false,
                    job_deadline: None,
                    util_min: task.util_min,
                    util_max: task.util_max,
                    taskgroup: task.taskgroup.clone(),
                    membind: task.membind.clone(),
                });
            }
        }
        for (id, users) in barrier_users {
            resources[id.0].kind = ResourceKind::Barrier { users };
        }
        // The mode is a property of the timer: one `"mode": "absolute"` makes it absolute for
        // every event that uses it (rt-app sets `relative = 0` on the shared resource).
        for t in &mut threads {
            for ph in &mut t.phases {
                for e in &mut ph.events {
                    if let Event::Timer { timer, mode, .. } = e {
                        if absolute.contains(timer) {
                            *mode = TimerMode::Absolute;
                        }
                    }
                }
            }
        }
        Ok((threads, resources, mem.list))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relax_keeps_positions_and_strings() {
        let text = "{\n /* a\n b */ \"k\": \"/* not a comment */ // nor this\", // c\n \"l\": [1, 2,],\n}";
        let out = relax(text).unwrap();
        assert_eq!(out.len(), text.len());
        assert_eq!(out.matches('\n').count(), text.matches('\n').count());
        assert!(out.contains("\"/* not a comment */ // nor this\""));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["l"], serde_json::json!([1, 2]));
    }

    #[test]
    fn relax_handles_escaped_quotes_and_unterminated_comments() {
        let out = relax(r#"{"a": "x\"/*y", "b": 1 /* z */}"#).unwrap();
        assert!(out.contains(r#""x\"/*y""#));
        assert!(!out.contains("z"));
        assert_eq!(relax("{\n  /* open").unwrap_err().0, 2);
    }

    // Found by the fuzz harness (rtapp_json): a 131-byte file expanded into 65535 threads, 29 MB
    // of workload; a longer task times a large `instance` reaches gigabytes.
    #[test]
    fn fuzz_regression_instance_expansion_is_bounded() {
        let field = |text: &str| match parse_rtapp(text, "f.json") {
            Err(RtAppError::Field { field, message, .. }) => (field, message),
            other => panic!("expected a field error, got {other:?}"),
        };
        let minimal = r#"{"tasks":{"thread0":{"instance":65535,"sleep0":83239}},"global":{"duration":0,"default_policy":"SCHED_OTHER","calibration":"CPU0"}}"#;
        let (f, m) = field(minimal);
        assert_eq!(f, "tasks.thread0.instance");
        assert!(m.contains(&format!("at most {MAX_THREADS} threads")), "{m}");
        // Few threads, but each copying many events.
        let events: Vec<String> = (0..40).map(|i| format!("\"run{i}\":1")).collect();
        let long = format!(
            r#"{{"tasks":{{"a":{{"run":1}},"b":{{"instance":2000,{}}}}}}}"#,
            events.join(",")
        );
        let (f, m) = field(&long);
        assert_eq!(f, "tasks.b.instance");
        assert!(m.contains(&format!("at most {MAX_EVENTS} events")), "{m}");
        // Up to the limits, files are read.
        let w = parse_rtapp(r#"{"tasks":{"t":{"instance":16384,"run":1,"sleep":1}}}"#, "f").unwrap();
        assert_eq!(w.threads.len(), MAX_THREADS as usize);
    }

    #[test]
    fn event_prefixes_follow_rt_app_order() {
        assert_eq!(event_prefix("runtime3"), Some("runtime"));
        assert_eq!(event_prefix("run_end"), Some("run"));
        assert_eq!(event_prefix("sleep_long"), Some("sleep"));
        assert_eq!(event_prefix("resume"), Some("resume"));
        for k in TASK_PROPERTIES.iter().chain(PHASE_PROPERTIES.iter()) {
            assert_eq!(
                event_prefix(k),
                None,
                "property `{k}` must not look like an event"
            );
        }
    }
}
