//! Recorded wake-up traces for the period analyser (LFS++ §7.4 traces the wake-up events, WKE,
//! of the task whose period is sought; [`crate::period`] analyses their timestamps).
//!
//! Three text formats are read:
//! - **timestamps**: one wake-up time per line, in seconds (`0.0331`, `12`, `1.5e-3`); blank
//!   lines and `#` comments are ignored;
//! - **perf**: `perf script` output of `perf record -e sched:sched_wakeup` (or `sched_waking`,
//!   `sched_wakeup_new`), e.g.
//!   `mplayer 1234 [001] 5678.123456: sched:sched_wakeup: comm=mplayer pid=1234 prio=120 target_cpu=001`
//!   (an optional period column after the time and a flags column are accepted);
//! - **trace-cmd**: `trace-cmd report` (or the raw ftrace `trace` file), with the sched plugin's
//!   payload `<idle>-0 [001] 5678.123456: sched_wakeup: mplayer:1234 [120] CPU:001` or the raw
//!   one `… sched_wakeup: comm=mplayer pid=1234 prio=120 target_cpu=001` (optional `(tgid)` and
//!   latency-flags columns are accepted).
//!
//! In event traces the thread of interest is the **woken** one, named in the event's payload —
//! not the waker, whose name and pid open the line. Filters select it by name and/or thread id.
//! When a trace holds both `sched_waking` and `sched_wakeup` for each wake-up, only
//! `sched_wakeup` (and `sched_wakeup_new`) is used by default, so that no wake-up counts twice.
//!
//! Times are parsed from their decimal text exactly into integer nanoseconds (no float
//! rounding). Lines of an event trace that are not events (headers, other tools' output) are
//! skipped; a wake-up event that cannot be parsed, or a timestamp line that is not a number, is
//! an error naming the file, the line and what was expected.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::Serialize;

/// Kernel thread names are at most 15 bytes (TASK_COMM_LEN − 1): traces show them truncated.
pub const COMM_LEN: usize = 15;

/// A trace's text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceFormat {
    /// Detect from the content ([`detect_format`]).
    Auto,
    Timestamps,
    Perf,
    TraceCmd,
}

impl TraceFormat {
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Auto => "auto",
            TraceFormat::Timestamps => "timestamps",
            TraceFormat::Perf => "perf",
            TraceFormat::TraceCmd => "trace-cmd",
        }
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(TraceFormat::Auto),
            "timestamps" => Ok(TraceFormat::Timestamps),
            "perf" => Ok(TraceFormat::Perf),
            "trace-cmd" => Ok(TraceFormat::TraceCmd),
            _ => Err(format!(
                "unknown trace format `{s}`: expected auto, timestamps, perf or trace-cmd"
            )),
        }
    }
}

/// Which wake-up events of an event trace count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WakeupEvent {
    /// `sched_wakeup` and `sched_wakeup_new` if the trace has any, else `sched_waking`.
    #[default]
    Auto,
    /// `sched_wakeup` and `sched_wakeup_new` (the task enters the run queue).
    Wakeup,
    /// `sched_waking` (the wake-up starts, in the waker's context).
    Waking,
}

impl FromStr for WakeupEvent {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(WakeupEvent::Auto),
            "wakeup" => Ok(WakeupEvent::Wakeup),
            "waking" => Ok(WakeupEvent::Waking),
            _ => Err(format!(
                "unknown wake-up event `{s}`: expected auto, wakeup or waking"
            )),
        }
    }
}

/// Selects the woken thread(s) of interest. Both criteria must hold when both are given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TraceFilter {
    /// Woken thread's name. Names longer than [`COMM_LEN`] also match their truncation, as the
    /// kernel records it.
    pub comm: Option<String>,
    /// Woken thread's id (the `pid` of the event payload, a thread id in kernel terms).
    pub tid: Option<u32>,
    pub event: WakeupEvent,
}

impl TraceFilter {
    pub fn is_empty(&self) -> bool {
        self.comm.is_none() && self.tid.is_none()
    }

    fn matches(&self, comm: &str, tid: u32) -> bool {
        let comm_ok = self
            .comm
            .as_deref()
            .is_none_or(|want| want == comm || (want.len() > COMM_LEN && truncate(want, COMM_LEN) == comm));
        comm_ok && self.tid.is_none_or(|t| t == tid)
    }
}

/// `s` cut to at most `n` bytes, on a character boundary.
fn truncate(s: &str, n: usize) -> &str {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A woken thread seen in an event trace, with how many wake-ups it had (before filtering).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadWakeups {
    pub comm: String,
    pub tid: u32,
    pub wakeups: usize,
}

/// The wake-ups read from a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WakeupTrace {
    /// The format the trace was read as (never `Auto`).
    pub format: TraceFormat,
    /// Wake-up times, ns, ascending: those of the selected threads and event kind.
    pub timestamps_ns: Vec<u64>,
    /// Wake-up events (or timestamp lines) read, before filtering.
    pub events_read: usize,
    /// The event kind used (`sched_wakeup`, `sched_waking`), `None` for a timestamp list.
    pub event: Option<&'static str>,
    /// Woken threads of the used event kind, most wake-ups first (empty for a timestamp list).
    pub threads: Vec<ThreadWakeups>,
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    // The cause is in the message, not a `source`: error chains would print it twice.
    #[error("{file}: {err}")]
    Io { file: String, err: std::io::Error },
    #[error("{file}:{line}: expected {expected}, found `{found}`")]
    Parse {
        file: String,
        line: usize,
        expected: String,
        found: String,
    },
    #[error(
        "{file}: cannot tell the trace format: expected timestamps in seconds (one per line), \
         `perf script` output or `trace-cmd report` output (use --format to say which)"
    )]
    UnknownFormat { file: String },
    #[error("{file}: no {what} event lines found: {hint}")]
    NoEvents {
        file: String,
        what: &'static str,
        hint: &'static str,
    },
    #[error(
        "{file}: a timestamp list has no thread names or ids, so --comm/--tid cannot select a \
         thread (record a perf or trace-cmd trace, or list only that thread's wake-ups)"
    )]
    FilterOnTimestamps { file: String },
}

/// Longest excerpt of an offending line quoted in an error.
const QUOTE: usize = 80;

fn quote(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() <= QUOTE {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(QUOTE).collect::<String>())
    }
}

/// Reads a trace file (see the module documentation for the formats).
pub fn read_file(path: &Path, format: TraceFormat, filter: &TraceFilter) -> Result<WakeupTrace, TraceError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|err| TraceError::Io {
        file: file.clone(),
        err,
    })?;
    // Traces are ASCII in practice; a stray invalid byte (a garbled comm) must not hide the rest.
    let text = String::from_utf8_lossy(&bytes);
    parse_str(&text, &file, format, filter)
}

/// Parses trace text; `file` names it in errors.
pub fn parse_str(
    text: &str,
    file: &str,
    format: TraceFormat,
    filter: &TraceFilter,
) -> Result<WakeupTrace, TraceError> {
    let format = match format {
        TraceFormat::Auto => {
            detect_format(text).ok_or_else(|| TraceError::UnknownFormat { file: file.into() })?
        }
        f => f,
    };
    match format {
        TraceFormat::Timestamps => {
            if !filter.is_empty() {
                return Err(TraceError::FilterOnTimestamps { file: file.into() });
            }
            parse_timestamps(text, file)
        }
        TraceFormat::Perf | TraceFormat::TraceCmd => parse_events(text, file, format, filter),
        TraceFormat::Auto => unreachable!("resolved above"),
    }
}

/// Guesses the format from the first line that decides it: a number → timestamps; an event
/// line whose event is `subsystem:name:` → perf; an event line with a bare `name:` → trace-cmd.
/// Comments, blank lines and other lines (trace-cmd's `cpus=4` header…) are skipped.
pub fn detect_format(text: &str) -> Option<TraceFormat> {
    for line in text.lines() {
        let content = strip_comment(line).trim();
        if content.is_empty() {
            continue;
        }
        if parse_seconds(content).is_ok() {
            return Some(TraceFormat::Timestamps);
        }
        if let Some(ev) = event_line(line) {
            return Some(if ev.event.contains(':') {
                TraceFormat::Perf
            } else {
                TraceFormat::TraceCmd
            });
        }
    }
    None
}

fn strip_comment(line: &str) -> &str {
    line.split_once('#').map_or(line, |(a, _)| a)
}

fn parse_timestamps(text: &str, file: &str) -> Result<WakeupTrace, TraceError> {
    let mut ts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let content = strip_comment(line).trim();
        if content.is_empty() {
            continue;
        }
        let t = parse_seconds(content).map_err(|why| TraceError::Parse {
            file: file.into(),
            line: i + 1,
            expected: format!("a wake-up time in seconds (e.g. 12.034567){why}"),
            found: quote(content),
        })?;
        ts.push(t);
    }
    let events_read = ts.len();
    ts.sort_unstable();
    Ok(WakeupTrace {
        format: TraceFormat::Timestamps,
        timestamps_ns: ts,
        events_read,
        event: None,
        threads: Vec::new(),
    })
}

/// Seconds (decimal, optionally with an exponent) → integer ns. Plain decimals are converted
/// exactly (digits beyond the ninth decimal are rounded); exponent forms go through `f64`.
/// The error is a suffix for the "expected" text.
fn parse_seconds(s: &str) -> Result<u64, &'static str> {
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(" ≥ 0");
    }
    if s.contains(['e', 'E']) {
        let x: f64 = s.parse().map_err(|_| "")?;
        if !x.is_finite() || x < 0.0 {
            return Err(" ≥ 0");
        }
        let ns = (x * 1e9).round();
        return if ns < u64::MAX as f64 {
            Ok(ns as u64)
        } else {
            Err(" below 1.8e10 s")
        };
    }
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return Err("");
    }
    let too_big = " below 1.8e10 s";
    let secs: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| too_big)?
    };
    let mut ns: u64 = 0;
    for (i, b) in frac.bytes().take(9).enumerate() {
        ns += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    if frac.as_bytes().get(9).is_some_and(|&b| b >= b'5') {
        ns += 1;
    }
    secs.checked_mul(1_000_000_000)
        .and_then(|x| x.checked_add(ns))
        .ok_or(too_big)
}

/// The parts of an event line: `… <secs>: [period] <event>: <payload>`.
struct EventLine<'a> {
    time: &'a str,
    /// Event name without the trailing colon, e.g. `sched:sched_wakeup` or `sched_wakeup`.
    event: &'a str,
    payload: &'a str,
}

/// Byte spans of the whitespace-separated tokens of `line`.
fn tokens(line: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, line.len()));
    }
    out
}

/// Finds `<digits>.<digits>:` followed (after optional all-digit tokens: perf's period column)
/// by an event token `name:` (letters, digits, `_`, at most one inner `:`), as perf script and
/// trace-cmd print every event. Waker names before it may contain anything.
fn event_line(line: &str) -> Option<EventLine<'_>> {
    let toks = tokens(line);
    let is_time = |t: &str| {
        t.strip_suffix(':')
            .and_then(|t| t.split_once('.'))
            .is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && a.bytes().all(|c| c.is_ascii_digit())
                    && b.bytes().all(|c| c.is_ascii_digit())
            })
    };
    let is_event = |t: &str| {
        t.strip_suffix(':').is_some_and(|name| {
            !name.is_empty()
                && name.bytes().any(|c| c.is_ascii_alphabetic())
                && name
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
                && name.matches(':').count() <= 1
                && !name.starts_with(':')
                && !name.ends_with(':')
        })
    };
    for (i, &(s, e)) in toks.iter().enumerate() {
        if !is_time(&line[s..e]) {
            continue;
        }
        let mut j = i + 1;
        while j < toks.len() && line[toks[j].0..toks[j].1].bytes().all(|c| c.is_ascii_digit()) {
            j += 1;
        }
        if let Some(&(es, ee)) = toks.get(j) {
            if is_event(&line[es..ee]) {
                return Some(EventLine {
                    time: &line[s..e - 1],
                    event: &line[es..ee - 1],
                    payload: line[ee..].trim(),
                });
            }
        }
    }
    None
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Wakeup,
    Waking,
}

fn kind_of(event: &str) -> Option<Kind> {
    match event.strip_prefix("sched:").unwrap_or(event) {
        "sched_wakeup" | "sched_wakeup_new" => Some(Kind::Wakeup),
        "sched_waking" => Some(Kind::Waking),
        _ => None,
    }
}

/// The woken thread of a wake-up payload: `comm=NAME pid=N …` (the tracepoint's own format)
/// or `NAME:PID [PRIO] [success=1] CPU:NNN` (trace-cmd's sched plugin). Names may contain
/// spaces and colons.
fn woken(payload: &str) -> Option<(&str, u32)> {
    if let Some(rest) = payload.strip_prefix("comm=") {
        let at = rest.rfind(" pid=")?;
        let comm = &rest[..at];
        let pid = rest[at + 5..].split_whitespace().next()?.parse().ok()?;
        return Some((comm, pid));
    }
    let mut rest = payload.trim_end();
    while let Some(at) = rest.rfind(' ') {
        let last = &rest[at + 1..];
        let trailer = last.starts_with("CPU:")
            || last.starts_with("success=")
            || (last.starts_with('[')
                && last.ends_with(']')
                && last[1..last.len() - 1].parse::<i64>().is_ok());
        if !trailer {
            break;
        }
        rest = rest[..at].trim_end();
    }
    let (comm, pid) = rest.rsplit_once(':')?;
    Some((comm, pid.parse().ok()?))
}

fn parse_events(
    text: &str,
    file: &str,
    format: TraceFormat,
    filter: &TraceFilter,
) -> Result<WakeupTrace, TraceError> {
    let perf = format == TraceFormat::Perf;
    let mut any_event = false;
    // (time, kind, tid, comm index)
    let mut wakeups: Vec<(u64, Kind, u32, usize)> = Vec::new();
    let mut comms: Vec<String> = Vec::new();
    let mut comm_index = std::collections::HashMap::<(String, u32), usize>::new();
    for (i, line) in text.lines().enumerate() {
        let Some(ev) = event_line(line) else {
            continue;
        };
        any_event = true;
        let Some(kind) = kind_of(ev.event) else {
            continue;
        };
        let err = |expected: &str, found: &str| TraceError::Parse {
            file: file.into(),
            line: i + 1,
            expected: expected.into(),
            found: quote(found),
        };
        match (perf, ev.event.starts_with("sched:")) {
            (true, false) => {
                return Err(err(
                    "a perf script event such as `sched:sched_wakeup:` (is this a trace-cmd report? use --format trace-cmd)",
                    ev.event,
                ))
            }
            (false, true) => {
                return Err(err(
                    "a trace-cmd event such as `sched_wakeup:` (is this perf script output? use --format perf)",
                    ev.event,
                ))
            }
            _ => {}
        }
        let t =
            parse_seconds(ev.time).map_err(|_| err("a time in seconds before the event name", ev.time))?;
        let (comm, tid) = woken(ev.payload).ok_or_else(|| {
            err(
                "the woken thread as `comm=NAME pid=TID …` or `NAME:TID [PRIO] CPU:N`",
                ev.payload,
            )
        })?;
        let key = (comm.to_string(), tid);
        let idx = *comm_index.entry(key).or_insert_with(|| {
            comms.push(comm.to_string());
            comms.len() - 1
        });
        wakeups.push((t, kind, tid, idx));
    }
    if !any_event {
        let (what, hint) = if perf {
            (
                "perf script",
                "expected lines like `mplayer 1234 [001] 5678.123456: sched:sched_wakeup: comm=mplayer pid=1234 …` \
                 (perf record -e sched:sched_wakeup; perf script)",
            )
        } else {
            (
                "trace-cmd report",
                "expected lines like `<idle>-0 [001] 5678.123456: sched_wakeup: mplayer:1234 [120] CPU:001` \
                 (trace-cmd record -e sched_wakeup; trace-cmd report)",
            )
        };
        return Err(TraceError::NoEvents {
            file: file.into(),
            what,
            hint,
        });
    }
    let events_read = wakeups.len();
    let kind = match filter.event {
        WakeupEvent::Wakeup => Kind::Wakeup,
        WakeupEvent::Waking => Kind::Waking,
        WakeupEvent::Auto => {
            if wakeups.iter().any(|w| w.1 == Kind::Wakeup) || wakeups.is_empty() {
                Kind::Wakeup
            } else {
                Kind::Waking
            }
        }
    };
    let mut per_thread = std::collections::HashMap::<(usize, u32), usize>::new();
    let mut ts = Vec::new();
    for &(t, k, tid, idx) in &wakeups {
        if k != kind {
            continue;
        }
        *per_thread.entry((idx, tid)).or_default() += 1;
        if filter.matches(&comms[idx], tid) {
            ts.push(t);
        }
    }
    ts.sort_unstable();
    let mut threads: Vec<ThreadWakeups> = per_thread
        .into_iter()
        .map(|((idx, tid), wakeups)| ThreadWakeups {
            comm: comms[idx].clone(),
            tid,
            wakeups,
        })
        .collect();
    threads.sort_by(|a, b| {
        b.wakeups
            .cmp(&a.wakeups)
            .then(a.tid.cmp(&b.tid))
            .then(a.comm.cmp(&b.comm))
    });
    Ok(WakeupTrace {
        format,
        timestamps_ns: ts,
        events_read,
        event: Some(match kind {
            Kind::Wakeup => "sched_wakeup",
            Kind::Waking => "sched_waking",
        }),
        threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_exact() {
        assert_eq!(parse_seconds("5678.123456"), Ok(5_678_123_456_000));
        assert_eq!(parse_seconds("5678.123456789"), Ok(5_678_123_456_789));
        assert_eq!(parse_seconds("0.0000000015"), Ok(2));
        assert_eq!(parse_seconds("12"), Ok(12_000_000_000));
        assert_eq!(parse_seconds(".5"), Ok(500_000_000));
        assert_eq!(parse_seconds("1.5e-3"), Ok(1_500_000));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("1.2.3").is_err());
        assert!(parse_seconds("abc").is_err());
        assert!(parse_seconds(".").is_err());
        assert!(parse_seconds("99999999999999999999").is_err());
    }

    #[test]
    fn payloads() {
        assert_eq!(
            woken("comm=mplayer pid=1234 prio=120 target_cpu=001"),
            Some(("mplayer", 1234))
        );
        assert_eq!(
            woken("comm=Web Content pid=77 prio=120 success=1 target_cpu=002"),
            Some(("Web Content", 77))
        );
        assert_eq!(woken("mplayer:1234 [120] CPU:001"), Some(("mplayer", 1234)));
        assert_eq!(
            woken("kworker/u8:2:97 [120] success=1 CPU:003"),
            Some(("kworker/u8:2", 97))
        );
        assert_eq!(woken("dl-task:42 [-1] CPU:000"), Some(("dl-task", 42)));
        assert_eq!(woken("garbage"), None);
        assert_eq!(woken("comm=x pid=abc"), None);
    }

    #[test]
    fn event_lines() {
        let l = "  mplayer  1234 [001]  5678.123456: sched:sched_wakeup: comm=mplayer pid=1234 prio=120 target_cpu=001";
        let e = event_line(l).unwrap();
        assert_eq!((e.time, e.event), ("5678.123456", "sched:sched_wakeup"));
        let l = "            perf 61734 [000] 203358.640059:          1 sched:sched_waking: comm=migration/0 pid=12 prio=0 target_cpu=000";
        assert_eq!(event_line(l).unwrap().event, "sched:sched_waking");
        let l = "          <idle>-0     (-----) [003] dnh3 6824711.826810: sched_wakeup: comm=rcuos/0 pid=11 prio=120 target_cpu=003";
        let e = event_line(l).unwrap();
        assert_eq!(
            (e.time, e.event, e.payload),
            (
                "6824711.826810",
                "sched_wakeup",
                "comm=rcuos/0 pid=11 prio=120 target_cpu=003"
            )
        );
        assert!(event_line("cpus=4").is_none());
        assert!(event_line("version = 6").is_none());
    }

    #[test]
    fn long_comm_matches_its_truncation() {
        let f = TraceFilter {
            comm: Some("VideoDecoderThread".into()),
            ..TraceFilter::default()
        };
        assert!(f.matches("VideoDecoderThr", 1));
        assert!(f.matches("VideoDecoderThread", 1));
        assert!(!f.matches("VideoDecoder", 1));
    }
}
