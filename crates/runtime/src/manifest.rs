//! The application manifest (rtdroid-android-timeliness.txt §3.1, Fig. 6: components with
//! priority, release and memory sizes; §3.2, Fig. 9: channel declarations; §3.3: persistent and
//! release memory; §4.2, Fig. 17: the audio manifest). Format: docs/formats/manifest.md.
//!
//! RTDroid extends Android's XML manifest; pacer's manifest is TOML with the same content. It is
//! read key by key (`pacer_model::toml_keys`, the experiment spec's reader too) rather than
//! through serde's derive so that every error names the file, the full key
//! (`component[filter].period`), what was expected and what was found, and so that an unknown
//! key is refused: a misspelt `dedline` must not silently become the default deadline of a
//! real-time component.
//!
//! Parsing checks what makes a manifest meaningless (missing keys, bad units, names that refer
//! to nothing, D > T); whether a meaningful application fits the machine is [`crate::validate`]'s
//! question, answered with numbers rather than refused at parse time.

use std::collections::BTreeSet;
use std::path::Path;

use pacer_model::reservation::{DEFAULT_PERIOD_MAX, DEFAULT_PERIOD_MIN};
use pacer_model::toml_keys::KeyError;
use pacer_model::{Duration, Reservation};
use serde::Serialize;

/// A manifest that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not valid TOML: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: `{key}`: expected {expected}, found {found}")]
    Key {
        file: String,
        key: String,
        expected: String,
        found: String,
    },
}

impl From<KeyError> for ManifestError {
    fn from(e: KeyError) -> ManifestError {
        ManifestError::Key {
            file: e.file,
            key: e.key,
            expected: e.expected,
            found: e.found,
        }
    }
}

/// The manifest's reader of a table's keys (`pacer_model::toml_keys`).
type Keys = pacer_model::toml_keys::Keys<ManifestError>;

/// What the manifest's durations are expected to be.
const DURATION: &str = "a duration with a unit, such as \"10ms\" or \"250us\"";

/// What a channel's `sender` and `receivers` are expected to be.
const NAMES: &str = "a component name or a list of them";

/// What the manifest's sizes are expected to be.
const SIZE: &str = "a size with a unit, such as \"64KiB\" or \"256B\"";

impl ManifestError {
    /// The key an error is about (`None` for read and syntax errors).
    pub fn key(&self) -> Option<&str> {
        match self {
            ManifestError::Key { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// What a component is (§3.1): how its releases come about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Released every `period` (§3.1.2, PeriodicTask).
    Periodic,
    /// Sporadic work released by requests at most once per `period` (§3.1.1, RealtimeService).
    Service,
    /// Released by messages on its channels, at most once per `period` (§3.1.3,
    /// RealtimeReceiver).
    Receiver,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Periodic => "periodic",
            Kind::Service => "service",
            Kind::Receiver => "receiver",
        }
    }
}

/// How a component's thread is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum Scheduling {
    /// SCHED_FIFO at this priority (1–99, higher runs first).
    Fifo { priority: u8 },
    /// SCHED_DEADLINE with this reservation.
    Deadline {
        runtime_ns: u64,
        deadline_ns: u64,
        period_ns: u64,
    },
}

impl Scheduling {
    pub fn reservation(&self) -> Option<Reservation> {
        match *self {
            Scheduling::Deadline {
                runtime_ns,
                deadline_ns,
                period_ns,
            } => Some(Reservation::new(
                Duration(runtime_ns),
                Duration(deadline_ns),
                Duration(period_ns),
            )),
            Scheduling::Fifo { .. } => None,
        }
    }
}

/// One real-time component.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Component {
    pub name: String,
    pub kind: Kind,
    /// Period, or minimum separation of releases for services and receivers.
    pub period_ns: u64,
    /// Relative deadline, ≤ period.
    pub deadline_ns: u64,
    /// Worst-case execution time estimate.
    pub wcet_ns: Option<u64>,
    /// Execution budget per release (what the run-time will enforce).
    pub budget_ns: Option<u64>,
    pub scheduling: Scheduling,
    /// CPUs the thread may run on, ascending and distinct.
    pub cpus: Vec<usize>,
    /// Persistent memory (lives as long as the component).
    pub persistent_bytes: u64,
    /// Release memory (reset after every release).
    pub per_release_bytes: u64,
    /// The component's total memory budget (§3.1, `memSizes total`), if declared.
    pub memory_limit_bytes: Option<u64>,
    /// What `pacer runtime run`'s built-in component does per release when the application
    /// gives no code for it: a calibrated busy loop this long (0: channel traffic only).
    pub work_ns: u64,
    /// Periodic components: the first release's offset from the application's start (phase),
    /// < period. The analysis assumes the worst case, simultaneous releases, whatever it is.
    pub offset_ns: u64,
}

impl Component {
    /// The execution time the analysis charges per release: the budget when one is declared
    /// (the run-time will not let a release run longer), else the estimate; for a reservation,
    /// its runtime.
    pub fn cost_ns(&self) -> u64 {
        match self.scheduling {
            Scheduling::Deadline { runtime_ns, .. } => runtime_ns,
            Scheduling::Fifo { .. } => self.budget_ns.or(self.wcet_ns).unwrap_or(0),
        }
    }
}

/// What a full channel does with one more message (§3.2.1). No policy blocks the sender: a
/// real-time sender must never wait for a slower receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Overflow {
    /// The new message is refused and its sender told.
    DropNewest,
    /// The oldest message of the lowest-priority sender with messages queued is dropped (its
    /// sender told) to make room, whatever the new message's priority (`channel::Overflow::DropOldest`).
    DropOldest,
    /// RTDroid's rule (Fig. 9, `priority&oldest`): the oldest message of the lowest-priority
    /// sender below the new message's sender is dropped (its sender told); if every queued
    /// message comes from a sender of the same or higher priority, the new one is refused.
    PriorityOldest,
}

impl Overflow {
    pub const NAMES: &'static str = "\"drop-newest\", \"drop-oldest\" or \"priority-oldest\"";

    pub fn name(self) -> &'static str {
        match self {
            Overflow::DropNewest => "drop-newest",
            Overflow::DropOldest => "drop-oldest",
            Overflow::PriorityOldest => "priority-oldest",
        }
    }

    fn parse(s: &str) -> Option<Overflow> {
        match s {
            "drop-newest" => Some(Overflow::DropNewest),
            "drop-oldest" => Some(Overflow::DropOldest),
            "priority-oldest" => Some(Overflow::PriorityOldest),
            _ => None,
        }
    }
}

/// A channel between components (§3.2.1 message-passing with one receiver, §3.2.2 broadcast
/// with several).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Channel {
    pub name: String,
    /// Sending components (one or more; messages are delivered in sender-priority order).
    pub senders: Vec<String>,
    /// Receiving components; each has its own preallocated queue of `capacity` messages.
    pub receivers: Vec<String>,
    pub message_size_bytes: u64,
    /// Messages each receiver's queue holds.
    pub capacity: u64,
    /// Messages each sender sends per release (§3.2: declared per release).
    pub per_release: u64,
    pub overflow: Overflow,
}

/// Playback or recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Playback,
    Record,
}

/// Sample format of an audio session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleFormat {
    S16,
    S32,
    F32,
}

impl SampleFormat {
    pub fn bytes(self) -> u64 {
        match self {
            SampleFormat::S16 => 2,
            SampleFormat::S32 | SampleFormat::F32 => 4,
        }
    }
}

/// An audio session (§4.2, Fig. 17), served by a periodic component that produces or consumes
/// one burst per release.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AudioSession {
    pub name: String,
    pub direction: Direction,
    /// Frames per second.
    pub rate: u32,
    pub channels: u32,
    /// Frames per burst (the ALSA period).
    pub burst_frames: u32,
    pub format: SampleFormat,
    /// The component that serves the session.
    pub component: String,
}

impl AudioSession {
    /// Bytes of one burst.
    pub fn burst_bytes(&self) -> u64 {
        u64::from(self.burst_frames) * u64::from(self.channels) * self.format.bytes()
    }
}

/// The whole application.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifest {
    pub name: String,
    /// The application's total memory limit, if declared.
    pub memory_limit_bytes: Option<u64>,
    pub components: Vec<Component>,
    pub channels: Vec<Channel>,
    pub audio: Vec<AudioSession>,
}

impl Manifest {
    pub fn component(&self, name: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.name == name)
    }

    /// Reads and parses a manifest file.
    pub fn from_file(path: &Path) -> Result<Manifest, ManifestError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            file: file.clone(),
            source,
        })?;
        Manifest::from_toml(&text, &file)
    }

    /// Parses manifest text; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<Manifest, ManifestError> {
        let mut top = Keys::parse(file, text, |message| ManifestError::Syntax {
            file: file.to_string(),
            message,
        })?;
        let mut app = top
            .table("app")?
            .ok_or_else(|| top.missing("app", "an [app] table"))?;
        let components = top.tables("component")?;
        let channels = top.tables("channel")?;
        let audio = top.tables("audio")?;
        if components.is_empty() {
            return Err(top.bad("component", "at least one [[component]]", "none"));
        }
        top.done()?;

        let name = app.name("name")?;
        let memory_limit_bytes = app.size("memory_limit", SIZE)?;
        app.done()?;
        let mut m = Manifest {
            name,
            memory_limit_bytes,
            components: Vec::new(),
            channels: Vec::new(),
            audio: Vec::new(),
        };
        for t in components {
            let c = parse_component(&m, t)?;
            m.components.push(c);
        }
        for t in channels {
            let c = parse_channel(&m, t)?;
            m.channels.push(c);
        }
        for t in audio {
            let a = parse_audio(&m, t)?;
            m.audio.push(a);
        }
        Ok(m)
    }
}

fn parse_component(m: &Manifest, mut k: Keys) -> Result<Component, ManifestError> {
    let name = k.name("name")?;
    k.rename(format!("component[{name}]"));
    if m.component(&name).is_some() {
        return Err(k.bad(
            "name",
            "a name no other component has",
            &format!("\"{name}\" again"),
        ));
    }
    let kind = match k.string("kind")?.as_deref() {
        None => return Err(k.missing("kind", "\"periodic\", \"service\" or \"receiver\"")),
        Some("periodic") => Kind::Periodic,
        Some("service") => Kind::Service,
        Some("receiver") => Kind::Receiver,
        Some(other) => {
            return Err(k.bad(
                "kind",
                "\"periodic\", \"service\" or \"receiver\"",
                &format!("\"{other}\""),
            ))
        }
    };
    let period = ns(&mut k, "period")?.ok_or_else(|| k.missing("period", "a duration such as \"10ms\""))?;
    if period == 0 {
        return Err(k.bad("period", "a period above 0", "0"));
    }
    let deadline = ns(&mut k, "deadline")?.unwrap_or(period);
    if deadline == 0 || deadline > period {
        return Err(k.bad(
            "deadline",
            &format!("a deadline above 0 and at most the period ({})", Duration(period)),
            &Duration(deadline).to_string(),
        ));
    }
    let wcet = ns(&mut k, "wcet")?;
    let budget = ns(&mut k, "budget")?;
    let priority = k.integer("priority")?;
    let reservation = k.table("reservation")?;
    let scheduling = match (priority, reservation) {
        (Some(_), Some(_)) => {
            return Err(k.bad(
                "reservation",
                "either `priority` (SCHED_FIFO) or `reservation` (SCHED_DEADLINE), not both",
                "both",
            ))
        }
        (None, None) => {
            return Err(k.missing(
                "priority",
                "`priority = 1..99` (SCHED_FIFO) or a `reservation` table (SCHED_DEADLINE)",
            ))
        }
        (Some(p), None) => {
            if !(1..=99).contains(&p) {
                return Err(k.bad("priority", "a SCHED_FIFO priority from 1 to 99", &p.to_string()));
            }
            if wcet.is_none() && budget.is_none() {
                return Err(k.missing("wcet", "`wcet` (an estimate) or `budget`, such as \"1ms\""));
            }
            Scheduling::Fifo { priority: p as u8 }
        }
        (None, Some(t)) => parse_reservation(t, period, deadline)?,
    };
    let cpus = k.cpus("cpus")?;
    let persistent_bytes = k.size("persistent", SIZE)?.unwrap_or(0);
    let per_release_bytes = k.size("per_release", SIZE)?.unwrap_or(0);
    let memory_limit_bytes = k.size("memory_limit", SIZE)?;
    let work_ns = ns(&mut k, "work")?.unwrap_or(0);
    let offset_ns = ns(&mut k, "offset")?.unwrap_or(0);
    if offset_ns >= period {
        return Err(k.bad(
            "offset",
            &format!("an offset below the period ({})", Duration(period)),
            &Duration(offset_ns).to_string(),
        ));
    }
    if offset_ns > 0 && kind != Kind::Periodic {
        return Err(k.bad(
            "offset",
            "no offset: only periodic components have one (messages release the others)",
            &Duration(offset_ns).to_string(),
        ));
    }
    k.done()?;
    let c = Component {
        name,
        kind,
        period_ns: period,
        deadline_ns: deadline,
        wcet_ns: wcet,
        budget_ns: budget,
        scheduling,
        cpus,
        persistent_bytes,
        per_release_bytes,
        memory_limit_bytes,
        work_ns,
        offset_ns,
    };
    // The analysis charges `cost_ns` per release; built-in work beyond it would make every
    // check a promise about some other application.
    if c.work_ns > c.cost_ns() {
        return Err(k.bad(
            "work",
            &format!(
                "at most the cost the analysis charges ({})",
                Duration(c.cost_ns())
            ),
            &Duration(c.work_ns).to_string(),
        ));
    }
    Ok(c)
}

fn parse_reservation(mut r: Keys, period: u64, deadline: u64) -> Result<Scheduling, ManifestError> {
    let runtime = ns(&mut r, "runtime")?.ok_or_else(|| r.missing("runtime", "a duration such as \"2ms\""))?;
    let res_deadline = ns(&mut r, "deadline")?.unwrap_or(deadline);
    let res_period = ns(&mut r, "period")?.unwrap_or(period);
    r.done()?;
    // A server slower than its component's releases, or later than its deadline, cannot serve
    // every release in time whatever the analysis says about the reservations themselves.
    if res_period > period {
        return Err(r.bad(
            "period",
            &format!("at most the component's period ({})", Duration(period)),
            &Duration(res_period).to_string(),
        ));
    }
    if res_deadline > deadline {
        return Err(r.bad(
            "deadline",
            &format!("at most the component's deadline ({})", Duration(deadline)),
            &Duration(res_deadline).to_string(),
        ));
    }
    let res = Reservation::new(Duration(runtime), Duration(res_deadline), Duration(res_period));
    if let Err(e) = res.validate_with(DEFAULT_PERIOD_MIN, DEFAULT_PERIOD_MAX) {
        return Err(r.bad(
            "runtime",
            "parameters sched_setattr accepts (runtime ≥ 1024ns, runtime ≤ deadline ≤ period, period within sched_deadline_period_{min,max}_us)",
            &e.to_string(),
        ));
    }
    Ok(Scheduling::Deadline {
        runtime_ns: runtime,
        deadline_ns: res_deadline,
        period_ns: res_period,
    })
}

fn parse_channel(m: &Manifest, mut k: Keys) -> Result<Channel, ManifestError> {
    let name = k.name("name")?;
    k.rename(format!("channel[{name}]"));
    if m.channels.iter().any(|c| c.name == name) {
        return Err(k.bad(
            "name",
            "a name no other channel has",
            &format!("\"{name}\" again"),
        ));
    }
    let senders = k
        .names("sender", NAMES)?
        .ok_or_else(|| k.missing("sender", NAMES))?;
    let receivers = k
        .names("receivers", NAMES)?
        .ok_or_else(|| k.missing("receivers", "a list of component names"))?;
    for (key, list) in [("sender", &senders), ("receivers", &receivers)] {
        if list.is_empty() {
            return Err(k.bad(key, "at least one component", "an empty list"));
        }
        let mut seen = BTreeSet::new();
        for n in list {
            if m.component(n).is_none() {
                return Err(k.bad(
                    key,
                    "names of declared components",
                    &format!("\"{n}\", which is not one"),
                ));
            }
            if !seen.insert(n) {
                return Err(k.bad(key, "each component once", &format!("\"{n}\" twice")));
            }
        }
    }
    if let Some(n) = senders.iter().find(|s| receivers.contains(s)) {
        return Err(k.bad(
            "receivers",
            "components other than the senders",
            &format!("\"{n}\", also a sender"),
        ));
    }
    let message_size_bytes = k
        .size("message_size", SIZE)?
        .ok_or_else(|| k.missing("message_size", "a size such as \"256B\""))?;
    if message_size_bytes == 0 {
        return Err(k.bad("message_size", "a size above 0", "0"));
    }
    let capacity = k
        .integer("capacity")?
        .ok_or_else(|| k.missing("capacity", "a number of messages ≥ 1"))?;
    if capacity == 0 {
        return Err(k.bad("capacity", "a number of messages ≥ 1", "0"));
    }
    let per_release = k.integer("per_release")?.unwrap_or(1);
    if per_release == 0 {
        return Err(k.bad("per_release", "messages per release ≥ 1", "0"));
    }
    let overflow = match k.string("overflow")? {
        None => Overflow::PriorityOldest,
        Some(s) => {
            Overflow::parse(&s).ok_or_else(|| k.bad("overflow", Overflow::NAMES, &format!("\"{s}\"")))?
        }
    };
    k.done()?;
    Ok(Channel {
        name,
        senders,
        receivers,
        message_size_bytes,
        capacity,
        per_release,
        overflow,
    })
}

fn parse_audio(m: &Manifest, mut k: Keys) -> Result<AudioSession, ManifestError> {
    let name = k.name("name")?;
    k.rename(format!("audio[{name}]"));
    if m.audio.iter().any(|a| a.name == name) {
        return Err(k.bad(
            "name",
            "a name no other audio session has",
            &format!("\"{name}\" again"),
        ));
    }
    let direction = match k.string("direction")?.as_deref() {
        Some("playback") => Direction::Playback,
        Some("record") => Direction::Record,
        None => return Err(k.missing("direction", "\"playback\" or \"record\"")),
        Some(o) => return Err(k.bad("direction", "\"playback\" or \"record\"", &format!("\"{o}\""))),
    };
    let rate = count(&mut k, "rate", "a sample rate in Hz, such as 48000")?;
    let channels = count(&mut k, "channels", "a number of channels ≥ 1")?;
    let burst_frames = count(&mut k, "burst_frames", "frames per burst ≥ 1, such as 480")?;
    let format = match k.string("format")?.as_deref() {
        None | Some("s16") => SampleFormat::S16,
        Some("s32") => SampleFormat::S32,
        Some("f32") => SampleFormat::F32,
        Some(o) => return Err(k.bad("format", "\"s16\", \"s32\" or \"f32\"", &format!("\"{o}\""))),
    };
    let component = k
        .string("component")?
        .ok_or_else(|| k.missing("component", "the name of a periodic component"))?;
    match m.component(&component) {
        None => {
            return Err(k.bad(
                "component",
                "the name of a declared periodic component",
                &format!("\"{component}\", which is not one"),
            ))
        }
        Some(c) if c.kind != Kind::Periodic => {
            return Err(k.bad(
                "component",
                "a periodic component (a session is served once per burst)",
                &format!("\"{component}\", a {}", c.kind.name()),
            ))
        }
        Some(_) => {}
    }
    k.done()?;
    Ok(AudioSession {
        name,
        direction,
        rate,
        channels,
        burst_frames,
        format,
        component,
    })
}

/// A duration in nanoseconds, as the manifest's types hold them.
fn ns(k: &mut Keys, key: &str) -> Result<Option<u64>, ManifestError> {
    Ok(k.duration(key, DURATION)?.map(|d| d.ns()))
}

/// A required count above 0 that fits in 32 bits.
fn count(k: &mut Keys, key: &str, what: &str) -> Result<u32, ManifestError> {
    let v = k.integer(key)?.ok_or_else(|| k.missing(key, what))?;
    u32::try_from(v)
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| k.bad(key, what, &v.to_string()))
}

/// The manifest's sizes: a unit is required (`pacer_model::bytes`), as with durations.
pub use pacer_model::bytes::parse_bytes_with_unit as parse_size;
