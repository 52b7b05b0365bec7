//! Kernel-filtered wake-up tracing of selected threads, the sensor behind the period analyser
//! (`pacer_adapt::period`; LFS++ §6.2: job activations are wake-up events, recorded in the kernel
//! without scheduling delay, into a circular buffer, for the traced threads only).
//!
//! Mechanism: a private tracefs *instance* (`instances/pacer-wakeup-PID-N`, its own per-CPU ring
//! buffers, independent of the global trace and of other users) with only the
//! `sched:sched_wakeup` event enabled and a kernel-side event filter
//! (`events/sched/sched_wakeup/filter`, `"pid == A || pid == B"`; `pid` is the *woken* thread),
//! `trace_clock = mono` (timestamps in CLOCK_MONOTONIC ns), read in binary from
//! `per_cpu/cpuN/trace_pipe_raw` (ring-buffer pages, format in `events/header_page`, field
//! offsets from `events/sched/sched_wakeup/format`), non-blocking, when the caller drains.
//! Untraced wake-ups cost one filter evaluation and are never stored; nothing is formatted as
//! text and the global text trace is never touched. Pages report dropped events
//! (`RB_MISSED_EVENTS`/`RB_MISSED_STORED` in the commit word), counted in [`WakeupTracer::lost`].
//!
//! Why not `perf_event_open` of the tracepoint (the first choice: fd-scoped, no tracefs state):
//! measured on the target machine (Linux 6.18 VM, 2 CPUs), per-CPU *sampling* perf events on
//! `sched_wakeup`/`sched_waking` silently miss wake-ups raised from the idle loop's hard-irq on
//! CPU 1 — `perf record -e sched:sched_wakeup -a` of a thread pinned to CPU 1 sleeping 30×10 ms
//! saw 1 of 30 wake-ups (no LOST/THROTTLE records), while a tracefs instance saw 30 of 30 on
//! the same CPU. A period analyser fed by such a sensor would be wrong, so the ftrace ring buffer
//! is used. Cost of that choice: the instance is a directory that outlives a crashed process;
//! [`WakeupTracer::new`] removes instances left by dead processes, and [`Drop`] removes its own.
//!
//! # Wake-up origin
//! [`WakeupTracer::drain_tid_marked`] marks a wake-up `timer` when its record's `common_flags`
//! has `TRACE_FLAG_HARDIRQ` (0x08): the event was recorded in hard-interrupt context. That is
//! where an hrtimer expiry wakes its sleeper (clock_nanosleep, nanosleep, timerfd, POSIX
//! timers, the timeouts of poll/select/epoll_wait), while a thread woken by another thread
//! (futex, pipe, socket, signal) is woken in that thread's process context. Chosen over
//! correlating with `timer:hrtimer_expire_entry` because it costs nothing: the flags are in
//! every record already, no second event, no pairing across CPUs. Verified on the development
//! VM (Linux 6.18, 2 CPUs) by `trace::tests::timer_wakeups_are_marked_and_thread_wakeups_are_not`
//! (root): clock_nanosleep and timerfd wake-ups 30 of 30 marked, a condition variable's 0 of 32.
//!
//! Limits, in both directions:
//! - any hard-interrupt wake-up is marked: a device interrupt that wakes its reader directly
//!   (e.g. some sound drivers' period interrupt) counts as a timer. Such wake-ups do not move
//!   with the CPU load either, which is what the mark is used for.
//! - `sched_wakeup` is recorded where the woken thread is activated. When the waker's CPU does
//!   not share a last-level cache with the wakee's (several LLCs per socket, several sockets),
//!   Linux queues the activation to the wakee's CPU and runs it from an IPI, in hard-interrupt
//!   context: such thread-to-thread wake-ups are marked too. `sched_waking`, recorded in the
//!   waker's context, would not have this limit, at the price of a second event per wake-up.
//! - on PREEMPT_RT kernels the sleep timers of non-real-time threads expire in softirq
//!   context and are not marked; a kernel timer-wheel timeout (`schedule_timeout`) is not
//!   marked either.
//!
//! # Timers the thread sets
//! A periodic thread that runs late finds its next expiry already past when a job ends: it
//! does not sleep, and neither a wake-up nor its mark is recorded. Its timer is still *set*,
//! though, with the expiry of the next activation, on time or not. The instance therefore also
//! records `timer:hrtimer_start` with the kernel filter `common_pid == A || …` (the thread that
//! sets the timer) and hands the records out as [`Origin::TimerSet`] with the timer's
//! `softexpires`, the expiry asked for (`expires` adds the timer slack of non-RT threads). Only
//! the timers that activate a thread are kept, told apart by their `function`, resolved once
//! from `/proc/kallsyms`: `hrtimer_wakeup` (clock_nanosleep, nanosleep, and the timeouts of
//! futex, poll, select and epoll), `timerfd_tmrproc`, `posix_timer_fn` and `it_real_fn`
//! (setitimer). The scheduler's own timers that run in the thread's context (SCHED_DEADLINE
//! replenishment and inactive timers, hrtick) are dropped. So are the timers set in relative
//! mode (`HRTIMER_MODE_REL`: nanosleep, clock_nanosleep without `TIMER_ABSTIME`): their expiry
//! is the moment of the call plus a duration, so it moves with the load like a wake-up and
//! says nothing a wake-up does not; a thread that sleeps 1 ms for "I/O" inside each job would
//! put two such expiries per job among its activations. A periodic activation that keeps its
//! grid is set in absolute mode: clock_nanosleep with `TIMER_ABSTIME` (rt-app, audio and video
//! pipelines), a timerfd's interval (re-armed in absolute mode), POSIX interval timers, and
//! absolute futex, poll and select timeouts. The expiry is in the clock of the
//! timer's base; expiries more than [`MAX_EXPIRY_DISTANCE_NS`] from the record's
//! CLOCK_MONOTONIC time stamp (a CLOCK_REALTIME or CLOCK_TAI timer) are dropped, as is every
//! timer record when `/proc/kallsyms` hides the addresses (`kptr_restrict`): the analysis then
//! runs on the wake-ups as before. [`WakeupTracer::traces_timers`] tells which.
//!
//! CPU hotplug after construction is not followed: the set of CPUs is read once.

use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use pacer_adapt::kernel::{KernelError, Origin, Tid, Wakeup};

/// Where tracefs is normally mounted, tried in this order after the mount table.
const TRACEFS_CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracepoint, relative to the tracefs root (or an instance directory).
const EVENT_DIR: &str = "events/sched/sched_wakeup";

/// The timer-set tracepoint, relative to the tracefs root (or an instance directory).
const TIMER_EVENT_DIR: &str = "events/timer/hrtimer_start";

/// Timer callbacks that wake the thread that set the timer (module documentation, "Timers the
/// thread sets").
const ACTIVATING_TIMERS: [&str; 4] = [
    "hrtimer_wakeup",
    "timerfd_tmrproc",
    "posix_timer_fn",
    "it_real_fn",
];

/// `HRTIMER_MODE_REL` (include/linux/hrtimer_types.h): the expiry was given as a duration from
/// now; the other bits (pinned, soft, hard) do not matter here.
const HRTIMER_MODE_REL: u32 = 0x01;

/// Farthest a kept expiry may lie from its record's time stamp, either way: a minute, longer
/// than any period pacer reserves and far shorter than the distance between CLOCK_MONOTONIC and
/// CLOCK_REALTIME.
pub const MAX_EXPIRY_DISTANCE_NS: u64 = 60_000_000_000;

/// Prefix of the instances this module creates: `pacer-wakeup-<pid>-<n>`.
const INSTANCE_PREFIX: &str = "pacer-wakeup-";

/// Prefixes of every tracefs instance pacer creates (this module's and
/// [`crate::sched_trace`]'s), each followed by `<pid>-<n>`: what stale-instance cleanup removes.
const INSTANCE_PREFIXES: [&str; 2] = [INSTANCE_PREFIX, crate::sched_trace::INSTANCE_PREFIX];

/// Default per-CPU ring size: 256 KiB, ~10 000 wake-up events (24-byte entries + headers),
/// i.e. > 10 s of a 1 kHz thread between drains.
pub const DEFAULT_BUFFER_KB: usize = 256;

/// The kernel copies an event filter from a write of at most one page: keep below that.
pub(crate) const MAX_FILTER_LEN: usize = 4000;

/// Distinguishes several tracers of one process.
static INSTANCE_SEQ: AtomicU32 = AtomicU32::new(0);

/// Why wake-up tracing could not be set up or read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// tracefs is neither mounted nor mountable; the tracepoint id and format live there.
    #[error("tracefs not available ({0}); mount it with `mount -t tracefs nodev /sys/kernel/tracing`")]
    NoTracefs(String),
    /// The kernel lacks the `sched:sched_wakeup` tracepoint or it has an unexpected format.
    #[error("tracepoint sched:sched_wakeup unavailable: {0}")]
    TracepointMissing(String),
    /// The kernel lacks another tracepoint pacer records (`event` is `system:name`), or it has
    /// an unexpected format.
    #[error("tracepoint {event} unavailable: {why}")]
    EventMissing { event: &'static str, why: String },
    /// Creating tracefs instances and enabling events is privileged.
    #[error("not permitted to trace wake-ups: {0} (needs root: tracefs is writable by root only)")]
    NoPermission(String),
    /// A TID that cannot be a Linux thread (0 or above `i32::MAX`).
    #[error("invalid thread id {0}")]
    InvalidTid(Tid),
    /// The kernel filter for this many threads would exceed the kernel's string limit.
    #[error(
        "too many traced threads ({threads}): the kernel filter would be {len} bytes, limit {MAX_FILTER_LEN}"
    )]
    TooManyThreads { threads: usize, len: usize },
    /// Any other system-call or file failure, with what was being done.
    #[error("{op}: {source}")]
    Io {
        op: String,
        #[source]
        source: io::Error,
    },
}

impl TraceError {
    pub(crate) fn io(op: impl Into<String>, source: io::Error) -> Self {
        TraceError::Io {
            op: op.into(),
            source,
        }
    }
}

impl From<TraceError> for KernelError {
    fn from(e: TraceError) -> Self {
        match e {
            TraceError::NoPermission(_) => KernelError::Permission(e.to_string()),
            TraceError::NoTracefs(_) | TraceError::TracepointMissing(_) | TraceError::EventMissing { .. } => {
                KernelError::Unsupported(e.to_string())
            }
            TraceError::InvalidTid(t) => KernelError::NoSuchThread(t),
            TraceError::TooManyThreads { .. } => KernelError::Invalid(e.to_string()),
            TraceError::Io { .. } => KernelError::Other(e.to_string()),
        }
    }
}

// ---- tracefs --------------------------------------------------------------------------------

/// Finds the tracefs root: a `tracefs` mount (or `debugfs` + `/tracing`) in the mount table, then
/// the standard paths; if none is mounted, mounts tracefs at `/sys/kernel/tracing` as libtracefs
/// does (`tracefs_tracing_dir()`), which needs CAP_SYS_ADMIN.
pub fn tracefs_root() -> Result<PathBuf, TraceError> {
    let has_event = |p: &Path| p.join(EVENT_DIR).join("id").exists() || p.join("events").is_dir();
    for m in crate::sys::mounts().unwrap_or_default() {
        let root = match m.fstype.as_str() {
            "tracefs" => m.mount_point,
            "debugfs" => m.mount_point.join("tracing"),
            _ => continue,
        };
        if has_event(&root) {
            return Ok(root);
        }
    }
    for c in TRACEFS_CANDIDATES {
        if has_event(Path::new(c)) {
            return Ok(PathBuf::from(c));
        }
    }
    let target = TRACEFS_CANDIDATES[0];
    mount_tracefs(target)?;
    Ok(PathBuf::from(target))
}

fn mount_tracefs(target: &str) -> Result<(), TraceError> {
    if !Path::new(target).is_dir() {
        return Err(TraceError::NoTracefs(format!(
            "not mounted, and {target} does not exist"
        )));
    }
    let (src, dir, kind) = (c"nodev", CString::new(target), c"tracefs");
    let dir = dir.map_err(|_| TraceError::NoTracefs(format!("bad path {target}")))?;
    // SAFETY: all pointers are valid NUL-terminated strings that outlive the call; data is null.
    let rc = unsafe { libc::mount(src.as_ptr(), dir.as_ptr(), kind.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(TraceError::NoTracefs(format!(
            "not mounted, and mounting at {target} failed: {e}"
        )));
    }
    Ok(())
}

/// Layout facts about `sched_wakeup` needed to decode a raw record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WakeupFormat {
    id: u64,
    /// Offset of the 4-byte `pid` field (the woken thread) in the raw entry.
    pid_offset: usize,
    /// Offset of the 1-byte `common_flags` field (the context the event was recorded in), if the
    /// format has it; without it no wake-up is marked as a timer's.
    flags_offset: Option<usize>,
}

/// Layout facts about `hrtimer_start` needed to decode a raw record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TimerFormat {
    id: u64,
    /// Offset of the 4-byte `common_pid` field (the thread that set the timer).
    pid_offset: usize,
    /// Offset of the 8-byte `function` field (the timer's callback).
    function_offset: usize,
    /// Offset of the 8-byte `softexpires` field (the expiry asked for, ns in the base's clock).
    expiry_offset: usize,
    /// Offset of the 4-byte `mode` field (`enum hrtimer_mode`).
    mode_offset: usize,
    /// Addresses of [`ACTIVATING_TIMERS`].
    functions: Vec<u64>,
}

pub(crate) fn parse_timer_format(id: &str, format: &str, functions: Vec<u64>) -> Result<TimerFormat, String> {
    let id = id
        .trim()
        .parse()
        .map_err(|_| format!("unparsable id {:?}", id.trim()))?;
    let field = |name: &str, size: usize| match field_offset(format, name) {
        Some((off, s)) if s == size => Ok(off),
        Some((_, s)) => Err(format!("field {name} has size {s}, expected {size}")),
        None => Err(format!("no field {name} in the format")),
    };
    if functions.is_empty() {
        return Err(
            "/proc/kallsyms shows no address of a thread-waking timer callback (kptr_restrict?)".into(),
        );
    }
    Ok(TimerFormat {
        id,
        pid_offset: field("common_pid", 4)?,
        function_offset: field("function", 8)?,
        expiry_offset: field("softexpires", 8)?,
        mode_offset: field("mode", 4)?,
        functions,
    })
}

/// The non-zero addresses `kallsyms` gives for [`ACTIVATING_TIMERS`] (zero when the kernel
/// hides them from the reader).
///
/// `/proc/kallsyms` has some 10⁵ lines, and pacer often reads it while the load it is there to
/// tame leaves it a few percent of a CPU: only lines that end in one of the four names are split
/// into fields, the rest cost a newline search and four suffix compares.
pub(crate) fn activating_timer_addresses(kallsyms: &str) -> Vec<u64> {
    let mut out: Vec<u64> = kallsyms
        .split('\n')
        .filter(|line| ACTIVATING_TIMERS.iter().any(|n| line.ends_with(n)))
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (addr, _kind, name) = (f.next()?, f.next()?, f.next()?);
            if f.next().is_some() || !ACTIVATING_TIMERS.contains(&name) {
                return None; // module symbols carry a fourth field; none of ours is in a module
            }
            u64::from_str_radix(addr, 16).ok().filter(|&a| a != 0)
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// [`activating_timer_addresses`] of this kernel, read once per process: the symbols do not move
/// while it runs (no module holds them), and a session traces many threads.
fn kernel_timer_addresses() -> Result<Vec<u64>, String> {
    static ADDRS: std::sync::OnceLock<Result<Vec<u64>, String>> = std::sync::OnceLock::new();
    ADDRS
        .get_or_init(|| {
            let p = Path::new("/proc/kallsyms");
            fs::read_to_string(p)
                .map(|t| activating_timer_addresses(&t))
                .map_err(|e| format!("{}: {e}", p.display()))
        })
        .clone()
}

fn read_timer_format(root: &Path) -> Result<TimerFormat, String> {
    let dir = root.join(TIMER_EVENT_DIR);
    let read = |p: &Path| fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    parse_timer_format(
        &read(&dir.join("id"))?,
        &read(&dir.join("format"))?,
        kernel_timer_addresses()?,
    )
}

/// `common_flags` bit set when the event was recorded in hard-interrupt context
/// (`TRACE_FLAG_HARDIRQ`, include/linux/trace_events.h; the `h` of the text trace's flags).
const TRACE_FLAG_HARDIRQ: u8 = 0x08;

/// Extracts offset and size of `field` from a tracefs `format` file.
pub(crate) fn field_offset(format: &str, field: &str) -> Option<(usize, usize)> {
    for line in format.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut parts = rest.split(';').map(str::trim);
        let decl = parts.next()?;
        let name = decl.split_whitespace().last()?;
        let name = name.split('[').next().unwrap_or(name);
        if name != field {
            continue;
        }
        let (mut off, mut size) = (None, None);
        for p in parts {
            if let Some(v) = p.strip_prefix("offset:") {
                off = v.trim().parse().ok();
            } else if let Some(v) = p.strip_prefix("size:") {
                size = v.trim().parse().ok();
            }
        }
        return Some((off?, size?));
    }
    None
}

pub(crate) fn parse_wakeup_format(id: &str, format: &str) -> Result<WakeupFormat, TraceError> {
    let id = id
        .trim()
        .parse()
        .map_err(|_| TraceError::TracepointMissing(format!("unparsable id {:?}", id.trim())))?;
    let flags_offset = match field_offset(format, "common_flags") {
        Some((off, 1)) => Some(off),
        _ => None,
    };
    match field_offset(format, "pid") {
        Some((pid_offset, 4)) => Ok(WakeupFormat {
            id,
            pid_offset,
            flags_offset,
        }),
        Some((_, size)) => Err(TraceError::TracepointMissing(format!(
            "field pid has size {size}, expected 4"
        ))),
        None => Err(TraceError::TracepointMissing("no field pid in the format".into())),
    }
}

fn read_wakeup_format(root: &Path) -> Result<WakeupFormat, TraceError> {
    let dir = root.join(EVENT_DIR);
    let read = |name: &str| {
        fs::read_to_string(dir.join(name)).map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => {
                TraceError::NoPermission(format!("reading {}: {e}", dir.join(name).display()))
            }
            _ => TraceError::TracepointMissing(format!("{}: {e}", dir.join(name).display())),
        })
    };
    parse_wakeup_format(&read("id")?, &read("format")?)
}

/// Builds the kernel filter expression matching `field` against a set of TIDs.
fn filter_for(field: &str, tids: &BTreeSet<Tid>) -> Result<String, TraceError> {
    let expr = tids
        .iter()
        .map(|t| format!("{field} == {t}"))
        .collect::<Vec<_>>()
        .join(" || ");
    if expr.len() > MAX_FILTER_LEN {
        return Err(TraceError::TooManyThreads {
            threads: tids.len(),
            len: expr.len(),
        });
    }
    Ok(expr)
}

// ---- ftrace ring-buffer pages (kernel/trace/ring_buffer.c, events/header_page) --------------

/// Page header: `u64 timestamp; local_t commit;` then data. The commit word holds the data size;
/// its top bits flag events lost before this page.
const PAGE_HEADER: usize = 16;
const RB_MISSED_EVENTS: u64 = 1 << 31;
const RB_MISSED_STORED: u64 = 1 << 30;
const COMMIT_SIZE_MASK: u64 = !(RB_MISSED_EVENTS | RB_MISSED_STORED);

// Event header `u32 { type_len: 5, time_delta: 27 }` special type_len values.
const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
const TS_SHIFT: u32 = 27;
/// Absolute time stamps carry the low 59 bits; the top bits come from the page time.
const TS_MSB_MASK: u64 = !((1u64 << 59) - 1);

pub(crate) fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(
        b.get(off..off.checked_add(8)?)?.try_into().ok()?,
    ))
}

pub(crate) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}

pub(crate) fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(
        b.get(off..off.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// Decodes one ring-buffer page as read from `trace_pipe_raw`, calling `on_event(time, payload)`
/// for each data event; returns the number of events the kernel reports lost before this page
/// (1 when it only says "some"). Malformed input ends the page early, never panics.
pub(crate) fn parse_page(page: &[u8], mut on_event: impl FnMut(u64, &[u8])) -> u64 {
    let (Some(mut ts), Some(commit)) = (u64_at(page, 0), u64_at(page, 8)) else {
        return 0;
    };
    let size = (commit & COMMIT_SIZE_MASK) as usize;
    let Some(data) = page.get(PAGE_HEADER..PAGE_HEADER.saturating_add(size)) else {
        return 0;
    };
    let lost = if commit & RB_MISSED_EVENTS == 0 {
        0
    } else if commit & RB_MISSED_STORED != 0 {
        // The count is stored as an unsigned long right after the data.
        u64_at(page, PAGE_HEADER + size).unwrap_or(1).max(1)
    } else {
        1
    };
    let mut pos = 0usize;
    while let Some(hdr) = u32_at(data, pos) {
        let type_len = hdr & 0x1f;
        let delta = u64::from(hdr >> 5);
        let array0 = u32_at(data, pos + 4).map(u64::from);
        let step = match type_len {
            TYPE_PADDING => match array0 {
                // A null event: the rest of the page is empty. A discarded event's delta is a
                // marker, not time, so it is not added.
                _ if delta == 0 => break,
                Some(len) => 4 + len as usize,
                None => break,
            },
            TYPE_TIME_EXTEND => {
                let Some(hi) = array0 else { break };
                ts = ts.wrapping_add((hi << TS_SHIFT) | delta);
                8
            }
            TYPE_TIME_STAMP => {
                let Some(hi) = array0 else { break };
                ts = ((hi << TS_SHIFT) | delta) | (ts & TS_MSB_MASK);
                8
            }
            0 => {
                // Long event: array[0] is the payload length + 4, payload at array[1].
                let Some(len) = array0.map(|l| l as usize) else {
                    break;
                };
                ts = ts.wrapping_add(delta);
                if let Some(payload) = data.get(pos + 8..(pos + 4).saturating_add(len)) {
                    on_event(ts, payload);
                }
                4 + len
            }
            n => {
                let len = n as usize * 4;
                ts = ts.wrapping_add(delta);
                if let Some(payload) = data.get(pos + 4..pos + 4 + len) {
                    on_event(ts, payload);
                }
                4 + len
            }
        };
        if step < 4 {
            break;
        }
        pos += (step + 3) & !3;
    }
    lost
}

// ---- the tracer -----------------------------------------------------------------------------

/// Writes `value` to a tracefs control file, mapping errors to [`TraceError`].
pub(crate) fn write_ctl(path: &Path, value: &str) -> Result<(), TraceError> {
    fs::write(path, value).map_err(|e| match e.kind() {
        io::ErrorKind::PermissionDenied => {
            TraceError::NoPermission(format!("writing {}: {e}", path.display()))
        }
        _ => TraceError::io(format!("writing {:?} to {}", value, path.display()), e),
    })
}

/// The instances under `instances` left behind by processes that no longer exist (a crash
/// skips [`Drop`]).
fn stale_in(instances: &Path) -> Vec<PathBuf> {
    let Ok(dir) = fs::read_dir(instances) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| INSTANCE_PREFIXES.iter().find_map(|p| n.strip_prefix(p)))
        else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            out.push(entry.path());
        }
    }
    out.sort();
    out
}

/// Creates a fresh instance directory `<prefix><pid>-<n>` under `instances`: its name says
/// which process owns it, so that [`stale_in`] can tell when it is left over.
pub(crate) fn create_instance(instances: &Path, prefix: &str) -> Result<PathBuf, TraceError> {
    loop {
        let n = INSTANCE_SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = instances.join(format!("{prefix}{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                return Err(TraceError::NoPermission(format!(
                    "creating tracefs instance {}: {e}",
                    dir.display()
                )))
            }
            Err(e) => {
                return Err(TraceError::io(
                    format!("creating tracefs instance {}", dir.display()),
                    e,
                ))
            }
        }
    }
}

/// Removes instances left behind by processes that no longer exist.
pub(crate) fn remove_stale_instances(instances: &Path) {
    for dir in stale_in(instances) {
        // Best effort: a failure leaves a harmless, disabled-by-nobody directory.
        let _ = fs::remove_dir(dir);
    }
}

/// pacer's tracefs instances whose process is gone (for `pacer doctor`); empty without tracefs.
pub fn stale_instances() -> Vec<PathBuf> {
    tracefs_root()
        .map(|r| stale_in(&r.join("instances")))
        .unwrap_or_default()
}

/// Removes [`stale_instances`]; returns those it could not remove, with the reason.
pub fn remove_stale() -> Vec<(PathBuf, String)> {
    stale_instances()
        .into_iter()
        .filter_map(|d| fs::remove_dir(&d).err().map(|e| (d, e.to_string())))
        .collect()
}

/// Records wake-up timestamps (ns, CLOCK_MONOTONIC) of a chosen set of threads, filtered in the
/// kernel. The event stays disabled while the set is empty. Drop disables it, closes the
/// per-CPU readers and removes the tracefs instance.
pub struct WakeupTracer {
    instance: PathBuf,
    format: WakeupFormat,
    /// `None` when timer-set records cannot be taken (module documentation, "Timers the thread
    /// sets"), with the reason in `timer_unavailable`.
    timer_format: Option<TimerFormat>,
    timer_unavailable: Option<String>,
    readers: Vec<File>,
    tids: BTreeSet<Tid>,
    enabled: bool,
    /// Wake-ups read from the rings but not yet handed out.
    pending: HashMap<Tid, Vec<Wakeup>>,
    lost: u64,
    page: Vec<u8>,
}

impl std::fmt::Debug for WakeupTracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakeupTracer")
            .field("instance", &self.instance)
            .field("cpus", &self.readers.len())
            .field("tids", &self.tids)
            .field("enabled", &self.enabled)
            .field("lost", &self.lost)
            .finish()
    }
}

impl WakeupTracer {
    /// Creates a tracefs instance with a [`DEFAULT_BUFFER_KB`] ring per CPU; nothing is traced
    /// until [`add`](Self::add).
    pub fn new() -> Result<Self, TraceError> {
        Self::with_buffer_kb(DEFAULT_BUFFER_KB)
    }

    /// As [`new`](Self::new), with `kb` KiB of ring buffer per CPU (at least 4).
    pub fn with_buffer_kb(kb: usize) -> Result<Self, TraceError> {
        let root = tracefs_root()?;
        let format = read_wakeup_format(&root)?;
        let (timer_format, timer_unavailable) = match read_timer_format(&root) {
            Ok(f) => (Some(f), None),
            Err(why) => (None, Some(why)),
        };
        let instances = root.join("instances");
        if !instances.is_dir() {
            return Err(TraceError::NoTracefs(format!(
                "{} has no instances/ directory (kernel too old)",
                root.display()
            )));
        }
        remove_stale_instances(&instances);
        let instance = create_instance(&instances, INSTANCE_PREFIX)?;
        // From here on, Drop cleans up whatever step fails.
        let mut tracer = WakeupTracer {
            instance,
            format,
            timer_format,
            timer_unavailable,
            readers: Vec::new(),
            tids: BTreeSet::new(),
            enabled: false,
            pending: HashMap::new(),
            lost: 0,
            page: vec![0; page_size()],
        };
        tracer.configure(kb)?;
        Ok(tracer)
    }

    fn configure(&mut self, kb: usize) -> Result<(), TraceError> {
        let inst = self.instance.clone();
        // "mono" is ktime_get_mono_fast_ns: CLOCK_MONOTONIC, the engine's clock.
        write_ctl(&inst.join("trace_clock"), "mono")?;
        write_ctl(&inst.join("buffer_size_kb"), &kb.max(4).to_string())?;
        if !inst.join(EVENT_DIR).join("enable").exists() {
            return Err(TraceError::TracepointMissing(format!(
                "{} missing in the instance",
                inst.join(EVENT_DIR).display()
            )));
        }
        // A filter that matches nothing until threads are added (pid 0 is the idle task, which
        // is never woken).
        write_ctl(&inst.join(EVENT_DIR).join("filter"), "pid == 0")?;
        if self.timer_format.is_some() {
            // The idle task sets timers (the tick), so nothing is matched with a negative pid.
            let filter = inst.join(TIMER_EVENT_DIR).join("filter");
            if let Err(e) = write_ctl(&filter, "common_pid < 0") {
                self.timer_format = None;
                self.timer_unavailable = Some(e.to_string());
            }
        }
        write_ctl(&inst.join("tracing_on"), "1")?;
        for cpu in crate::sys::online_cpus() {
            let path = inst.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            let f = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .map_err(|e| TraceError::io(format!("opening {}", path.display()), e))?;
            self.readers.push(f);
        }
        Ok(())
    }

    /// Starts tracing `tid` (re-applies the kernel filter). Adding a traced TID is a no-op.
    pub fn add(&mut self, tid: Tid) -> Result<(), TraceError> {
        if tid == 0 || tid > i32::MAX as Tid {
            return Err(TraceError::InvalidTid(tid));
        }
        if !self.tids.insert(tid) {
            return Ok(());
        }
        if let Err(e) = self.apply() {
            self.tids.remove(&tid);
            return Err(e);
        }
        Ok(())
    }

    /// Stops tracing `tid` (re-applies the filter; disables the event when none is left).
    /// Wake-ups recorded before the call stay available to [`drain`](Self::drain).
    pub fn remove(&mut self, tid: Tid) -> Result<(), TraceError> {
        if !self.tids.contains(&tid) {
            return Ok(());
        }
        self.collect()?;
        self.tids.remove(&tid);
        self.apply()
    }

    /// The threads currently traced, ascending.
    pub fn traced(&self) -> impl Iterator<Item = Tid> + '_ {
        self.tids.iter().copied()
    }

    /// Number of CPUs (per-CPU rings) read.
    pub fn cpus(&self) -> usize {
        self.readers.len()
    }

    /// The tracefs instance directory in use.
    pub fn instance(&self) -> &Path {
        &self.instance
    }

    /// Whether the timers the traced threads set are recorded ([`Origin::TimerSet`]); when not,
    /// why (module documentation, "Timers the thread sets").
    pub fn traces_timers(&self) -> Result<(), &str> {
        match &self.timer_unavailable {
            None => Ok(()),
            Some(why) => Err(why),
        }
    }

    /// Events the kernel reported as lost (ring full between drains) since construction.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Appends every wake-up recorded since the last drain to `out[tid]`, each batch sorted by
    /// time (events from different CPUs are merged).
    pub fn drain(&mut self, out: &mut HashMap<Tid, Vec<u64>>) -> Result<(), TraceError> {
        self.collect()?;
        for (tid, mut ws) in self.pending.drain() {
            ws.sort_by_key(|w| w.t_ns);
            out.entry(tid)
                .or_default()
                .extend(ws.into_iter().filter(Wakeup::is_wakeup).map(|w| w.t_ns));
        }
        Ok(())
    }

    /// Appends `tid`'s wake-ups recorded since the last drain to `out`, sorted by time; other
    /// threads' wake-ups are kept for their own drain (the `Kernel::drain_wakeups` shape).
    pub fn drain_tid(&mut self, tid: Tid, out: &mut Vec<u64>) -> Result<(), TraceError> {
        let mut marked = Vec::new();
        self.drain_tid_marked(tid, &mut marked)?;
        out.extend(marked.into_iter().filter(Wakeup::is_wakeup).map(|w| w.t_ns));
        Ok(())
    }

    /// [`drain_tid`](Self::drain_tid) with each wake-up's origin ([`Origin::Timer`] when the
    /// kernel recorded it in hard-interrupt context, module documentation, "Wake-up origin"),
    /// and the timers the thread set ([`Origin::TimerSet`], "Timers the thread sets").
    pub fn drain_tid_marked(&mut self, tid: Tid, out: &mut Vec<Wakeup>) -> Result<(), TraceError> {
        self.collect()?;
        if let Some(mut ws) = self.pending.remove(&tid) {
            ws.sort_by_key(|w| w.t_ns);
            out.extend(ws);
        }
        Ok(())
    }

    /// Reads every available page of every CPU into `pending`.
    fn collect(&mut self) -> Result<(), TraceError> {
        let Self {
            readers,
            format,
            timer_format,
            tids,
            pending,
            lost,
            page,
            ..
        } = self;
        for (cpu, r) in readers.iter_mut().enumerate() {
            loop {
                let n = match r.read(page) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        return Err(TraceError::io(format!("reading cpu {cpu} ring"), e));
                    }
                };
                collect_page(&page[..n], format, timer_format.as_ref(), tids, pending, lost);
            }
        }
        Ok(())
    }

    /// Pushes the current TID set to the kernel: filter then enable, or disable when empty.
    fn apply(&mut self) -> Result<(), TraceError> {
        let mut events = vec![(EVENT_DIR, "pid")];
        if self.timer_format.is_some() {
            events.push((TIMER_EVENT_DIR, "common_pid"));
        }
        if self.tids.is_empty() {
            if self.enabled {
                for (dir, _) in &events {
                    write_ctl(&self.instance.join(dir).join("enable"), "0")?;
                }
                self.enabled = false;
            }
            return Ok(());
        }
        for (dir, field) in &events {
            let filter = filter_for(field, &self.tids)?;
            write_ctl(&self.instance.join(dir).join("filter"), &filter)?;
        }
        if !self.enabled {
            for (dir, _) in &events {
                write_ctl(&self.instance.join(dir).join("enable"), "1")?;
            }
            self.enabled = true;
        }
        Ok(())
    }
}

impl Drop for WakeupTracer {
    fn drop(&mut self) {
        // Best effort, in the order the kernel needs: stop the event, close the readers (an open
        // file keeps the instance busy), remove the directory.
        let _ = fs::write(self.instance.join(EVENT_DIR).join("enable"), "0");
        let _ = fs::write(self.instance.join(TIMER_EVENT_DIR).join("enable"), "0");
        self.readers.clear();
        let _ = fs::remove_dir(&self.instance);
    }
}

/// Decodes one page read from a ring into `pending` ([`decode_event`]) and adds the events the
/// kernel reports lost before it to `lost`. The count is the kernel's word in the page:
/// saturating, so a corrupt page cannot overflow it.
pub(crate) fn collect_page(
    page: &[u8],
    format: &WakeupFormat,
    timer_format: Option<&TimerFormat>,
    tids: &BTreeSet<Tid>,
    pending: &mut HashMap<Tid, Vec<Wakeup>>,
    lost: &mut u64,
) {
    let missed = parse_page(page, |time, payload| {
        decode_event(format, timer_format, tids, pending, time, payload)
    });
    *lost = lost.saturating_add(missed);
}

/// Sorts one raw record of a page into `pending`: a wake-up of a traced thread (marked when
/// recorded in hard-interrupt context), a timer a traced thread set, or nothing.
fn decode_event(
    format: &WakeupFormat,
    timer_format: Option<&TimerFormat>,
    tids: &BTreeSet<Tid>,
    pending: &mut HashMap<Tid, Vec<Wakeup>>,
    time: u64,
    payload: &[u8],
) {
    let id = u16_at(payload, 0).map(u64::from);
    if let Some(tf) = timer_format.filter(|tf| Some(tf.id) == id) {
        if let Some((pid, w)) = decode_timer_set(tf, time, payload) {
            if tids.contains(&pid) {
                pending.entry(pid).or_default().push(w);
            }
        }
        return;
    }
    if id != Some(format.id) {
        return;
    }
    let Some(pid) = u32_at(payload, format.pid_offset) else {
        return;
    };
    // An event may race a filter change: keep only currently traced TIDs.
    if tids.contains(&pid) {
        let timer = format
            .flags_offset
            .and_then(|o| payload.get(o))
            .is_some_and(|&f| f & TRACE_FLAG_HARDIRQ != 0);
        pending.entry(pid).or_default().push(Wakeup::woken(time, timer));
    }
}

/// A timer-set record of `hrtimer_start`: the thread that set it and an [`Origin::TimerSet`],
/// or `None` for a timer that does not activate a thread, or an expiry in another clock.
fn decode_timer_set(tf: &TimerFormat, time: u64, payload: &[u8]) -> Option<(Tid, Wakeup)> {
    let pid = u32_at(payload, tf.pid_offset)?;
    let function = u64_at(payload, tf.function_offset)?;
    if tf.functions.binary_search(&function).is_err() {
        return None;
    }
    if u32_at(payload, tf.mode_offset)? & HRTIMER_MODE_REL != 0 {
        return None;
    }
    let expiry = i64::from_ne_bytes(
        payload
            .get(tf.expiry_offset..tf.expiry_offset.checked_add(8)?)?
            .try_into()
            .ok()?,
    );
    let expiry_ns = u64::try_from(expiry).ok()?;
    if expiry_ns.abs_diff(time) > MAX_EXPIRY_DISTANCE_NS {
        return None;
    }
    Some((
        pid,
        Wakeup {
            t_ns: time,
            origin: Origin::TimerSet { expiry_ns },
        },
    ))
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMAT: &str = "name: sched_wakeup
ID: 374
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;
";

    #[test]
    fn parses_the_tracefs_format() {
        let f = parse_wakeup_format("374\n", FORMAT).unwrap();
        assert_eq!(
            f,
            WakeupFormat {
                id: 374,
                pid_offset: 24,
                flags_offset: Some(2),
            }
        );
        // Without common_flags (never seen, but the format file is the authority) nothing is
        // marked, rather than reading a byte of something else.
        let bare = FORMAT.replace("common_flags", "common_other");
        assert_eq!(parse_wakeup_format("374", &bare).unwrap().flags_offset, None);
        assert_eq!(field_offset(FORMAT, "comm"), Some((8, 16)));
        assert_eq!(field_offset(FORMAT, "common_pid"), Some((4, 4)));
        assert!(matches!(
            parse_wakeup_format("x", FORMAT),
            Err(TraceError::TracepointMissing(_))
        ));
        assert!(matches!(
            parse_wakeup_format("1", "format:\n"),
            Err(TraceError::TracepointMissing(_))
        ));
    }

    fn payload(pid: u32) -> Vec<u8> {
        let mut p = vec![0u8; 36];
        p[0..2].copy_from_slice(&374u16.to_ne_bytes());
        p[24..28].copy_from_slice(&pid.to_ne_bytes());
        p
    }

    fn push_u32(v: &mut Vec<u8>, x: u32) {
        v.extend(x.to_ne_bytes());
    }

    /// A page as the kernel writes it: small event, time extend, long (type_len 0) event,
    /// discarded event, absolute time stamp, then a null padding event.
    fn page(commit_flags: u64, missed: Option<u64>) -> Vec<u8> {
        let mut data = Vec::new();
        push_u32(&mut data, 9 | (5 << 5)); // 36-byte event, delta 5
        data.extend(payload(7));
        push_u32(&mut data, TYPE_TIME_EXTEND | (3 << 5)); // delta (1 << 27) + 3
        push_u32(&mut data, 1);
        push_u32(&mut data, 2 << 5); // type_len 0 = long event, delta 2, array[0] = 36 + 4
        push_u32(&mut data, 40);
        data.extend(payload(8));
        push_u32(&mut data, TYPE_PADDING | (1 << 5)); // discarded: delta 1 is a marker
        push_u32(&mut data, 36); // total length 4 + 36, array[0] included
        data.extend([0u8; 32]);
        push_u32(&mut data, TYPE_TIME_STAMP | (10 << 5)); // absolute (2 << 27) | 10
        push_u32(&mut data, 2);
        push_u32(&mut data, 9 | (1 << 5));
        data.extend(payload(9));
        let mut p = Vec::new();
        p.extend(1000u64.to_ne_bytes());
        p.extend((data.len() as u64 | commit_flags).to_ne_bytes());
        p.extend(&data);
        if let Some(m) = missed {
            p.extend(m.to_ne_bytes());
        }
        p.resize(4096, 0);
        p
    }

    #[test]
    fn decodes_ring_buffer_pages() {
        let mut got = Vec::new();
        let lost = parse_page(&page(0, None), |t, p| got.push((t, u32_at(p, 24).unwrap())));
        let t1 = 1005;
        let t2 = t1 + (1 << 27) + 3 + 2;
        let t3 = (2 << 27) + 10 + 1;
        assert_eq!(got, vec![(t1, 7), (t2, 8), (t3, 9)]);
        assert_eq!(lost, 0);
        assert_eq!(parse_page(&page(RB_MISSED_EVENTS, None), |_, _| {}), 1);
        assert_eq!(
            parse_page(&page(RB_MISSED_EVENTS | RB_MISSED_STORED, Some(42)), |_, _| {}),
            42
        );
    }

    #[test]
    fn garbage_pages_do_not_panic() {
        let full = page(0, None);
        for cut in [0, 7, 15, 16, 20, 40, 60, 100] {
            parse_page(&full[..cut], |_, _| {});
        }
        let mut bad = full.clone();
        bad[8..16].copy_from_slice(&u64::MAX.to_ne_bytes()); // size beyond the page
        assert_eq!(parse_page(&bad, |_, _| panic!("no event expected")), 0);
        let mut zero_len = vec![0u8; 64];
        zero_len[8] = 8; // 8 bytes of data: a long event with array[0] = 0
        parse_page(&zero_len, |_, _| {});
    }

    #[test]
    fn stale_instances_of_both_tracers_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        // Above the kernel's largest pid_max (2^22): no such process.
        for name in [
            "pacer-wakeup-999999999-0".to_string(),
            "pacer-sched-999999999-3".to_string(),
            format!("pacer-sched-{me}-0"),
            format!("pacer-wakeup-{me}-1"),
            "someone-else-999999999".to_string(),
            "pacer-sched-notapid".to_string(),
        ] {
            fs::create_dir(dir.path().join(name)).unwrap();
        }
        let names: Vec<String> = stale_in(dir.path())
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["pacer-sched-999999999-3", "pacer-wakeup-999999999-0"]);
        remove_stale_instances(dir.path());
        assert!(stale_in(dir.path()).is_empty());
        assert!(dir.path().join(format!("pacer-sched-{me}-0")).is_dir());
    }

    #[test]
    fn builds_filters() {
        let tids: BTreeSet<Tid> = [12, 7].into_iter().collect();
        assert_eq!(filter_for("pid", &tids).unwrap(), "pid == 7 || pid == 12");
        let many: BTreeSet<Tid> = (1_000_000..1_001_000).collect();
        assert!(matches!(
            filter_for("common_pid", &many),
            Err(TraceError::TooManyThreads { threads: 1000, .. })
        ));
    }

    #[test]
    fn parses_the_timer_format_and_keeps_only_activating_timers() {
        const TIMER_FORMAT: &str = "name: hrtimer_start
ID: 460
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:void * hrtimer;\toffset:8;\tsize:8;\tsigned:0;
\tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;
\tfield:s64 expires;\toffset:24;\tsize:8;\tsigned:1;
\tfield:s64 softexpires;\toffset:32;\tsize:8;\tsigned:1;
\tfield:enum hrtimer_mode mode;\toffset:40;\tsize:4;\tsigned:0;
";
        const KALLSYMS: &str = "ffffffff813cef70 t inactive_task_timer
ffffffff813d1f20 t dl_task_timer
ffffffff8142cab0 t hrtimer_wakeup
ffffffff81754200 t timerfd_tmrproc
ffffffff81754300 t not_timerfd_tmrproc
ffffffffc0001000 t hrtimer_wakeup\t[some_module]
";
        let tf = parse_timer_format("460\n", TIMER_FORMAT, activating_timer_addresses(KALLSYMS)).unwrap();
        assert_eq!(
            (
                tf.id,
                tf.pid_offset,
                tf.function_offset,
                tf.expiry_offset,
                tf.mode_offset
            ),
            (460, 4, 16, 32, 40)
        );
        assert_eq!(tf.functions, vec![0xffffffff8142cab0, 0xffffffff81754200]);
        let hidden: String = KALLSYMS
            .lines()
            .map(|l| format!("0000000000000000{}\n", &l[16..]))
            .collect();
        assert!(
            parse_timer_format("460", TIMER_FORMAT, activating_timer_addresses(&hidden))
                .unwrap_err()
                .contains("kptr_restrict")
        );
        assert!(parse_timer_format("460", "format:\n", activating_timer_addresses(KALLSYMS)).is_err());

        let record_mode = |pid: u32, function: u64, soft: i64, mode: u32| {
            let mut p = vec![0u8; 48];
            p[40..44].copy_from_slice(&mode.to_ne_bytes());
            p[0..2].copy_from_slice(&460u16.to_ne_bytes());
            p[4..8].copy_from_slice(&pid.to_ne_bytes());
            p[16..24].copy_from_slice(&function.to_ne_bytes());
            p[24..32].copy_from_slice(&(soft + 50_000).to_ne_bytes()); // expires: + slack
            p[32..40].copy_from_slice(&soft.to_ne_bytes());
            p
        };
        let record = |pid, function, soft| record_mode(pid, function, soft, 0x08); // ABS|HARD
        let now = 5_000_000_000u64;
        // A sleep's expiry already past (a late thread) is kept as asked for.
        let (pid, w) = decode_timer_set(&tf, now, &record(42, 0xffffffff8142cab0, 4_990_000_000)).unwrap();
        assert_eq!((pid, w.t_ns, w.expiry_ns()), (42, now, Some(4_990_000_000)));
        assert!(!w.is_wakeup());
        // The CBS replenishment timer is not the thread's activation.
        assert!(decode_timer_set(&tf, now, &record(42, 0xffffffff813d1f20, 5_010_000_000)).is_none());
        // A CLOCK_REALTIME expiry is not comparable with the monotonic time stamps.
        assert!(decode_timer_set(
            &tf,
            now,
            &record(42, 0xffffffff8142cab0, 1_790_000_000_000_000_000)
        )
        .is_none());
        assert!(decode_timer_set(&tf, now, &record(42, 0xffffffff8142cab0, -1)).is_none());
        assert!(decode_timer_set(&tf, now, &[0u8; 20]).is_none());
        // A relative sleep (nanosleep) is a duration from now, not a point of a grid.
        assert!(decode_timer_set(
            &tf,
            now,
            &record_mode(42, 0xffffffff8142cab0, 5_001_000_000, 0x01)
        )
        .is_none());
        assert!(decode_timer_set(
            &tf,
            now,
            &record_mode(42, 0xffffffff8142cab0, 5_001_000_000, 0x0b)
        )
        .is_none());
    }

    // Found by the fuzz harness (tracefs_pages): a `format` file giving softexpires an offset
    // near usize::MAX overflowed `offset + 8` when a record of an activating timer came.
    #[test]
    fn fuzz_regression_expiry_offset_at_the_end_of_usize() {
        let mut p = vec![0u8; 48];
        p[4..8].copy_from_slice(&42u32.to_ne_bytes());
        p[16..24].copy_from_slice(&0xffffffff8142cab0u64.to_ne_bytes());
        p[32..40].copy_from_slice(&5_000_000_000i64.to_ne_bytes());
        for offset in [usize::MAX - 7, usize::MAX - 3, usize::MAX] {
            let tf = TimerFormat {
                id: 460,
                pid_offset: 4,
                function_offset: 16,
                expiry_offset: offset,
                mode_offset: 40,
                functions: vec![0xffffffff8142cab0],
            };
            assert!(decode_timer_set(&tf, 5_000_000_000, &p).is_none());
        }
    }

    // Found by the fuzz harness (tracefs_pages): pages whose commit word says "events lost,
    // count stored" with a huge count overflowed the tracer's running total.
    #[test]
    fn fuzz_regression_lost_counts_saturate() {
        let format = parse_wakeup_format("374", FORMAT).unwrap();
        let tids: BTreeSet<Tid> = [7].into_iter().collect();
        let (mut pending, mut lost) = (HashMap::new(), 0u64);
        let p = page(RB_MISSED_EVENTS | RB_MISSED_STORED, Some(u64::MAX - 1));
        for _ in 0..2 {
            collect_page(&p, &format, None, &tids, &mut pending, &mut lost);
        }
        assert_eq!(lost, u64::MAX);
        assert_eq!(pending[&7].len(), 2, "the events of the pages are still decoded");
    }

    fn monotonic_now() -> libc::timespec {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: t is a valid timespec for the call to write.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
        t
    }

    /// Advances `next` by `period_ns` (< 1 s) and sleeps until it on CLOCK_MONOTONIC with
    /// TIMER_ABSTIME, also when it is already past: the cyclic-loop idiom.
    fn sleep_to_next(next: &mut libc::timespec, period_ns: i64) {
        next.tv_nsec += period_ns;
        if next.tv_nsec >= 1_000_000_000 {
            next.tv_nsec -= 1_000_000_000;
            next.tv_sec += 1;
        }
        // SAFETY: next is a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                next,
                std::ptr::null_mut(),
            )
        };
    }

    fn gettid() -> Tid {
        // SAFETY: gettid has no preconditions and cannot fail.
        (unsafe { libc::gettid() }) as Tid
    }

    /// Pins the calling thread to CPU 0, so that a waker and its wakee share the CPU: a wake-up
    /// queued to another CPU's wake list would be activated from an IPI (see the module
    /// documentation) and is not what this test is about.
    fn pin_to_cpu0() {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes within it; the
        // syscall reads size_of::<cpu_set_t>() bytes from a valid pointer.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0,
                "sched_setaffinity"
            );
        }
    }

    /// The claim behind the timer-set records, on the running kernel: a periodic thread whose
    /// jobs take longer than its period finds every expiry past and barely sleeps, yet each
    /// job's clock_nanosleep sets the next expiry of the grid, and that is recorded; the
    /// relative sleep inside each job is not.
    #[test]
    #[cfg_attr(
        not(pacer_privileged),
        ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
    )]
    fn a_late_thread_still_records_the_expiries_it_sets() {
        pacer_testkit::require(pacer_testkit::Need::Root);
        pacer_testkit::require(pacer_testkit::Need::Tracefs);
        const N: usize = 20;
        const PERIOD_NS: i64 = 4_000_000;
        let mut tracer = WakeupTracer::with_buffer_kb(256).expect("open the tracer");
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let late = std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
            go_rx.recv().unwrap();
            let mut next = monotonic_now();
            for _ in 0..N {
                // A job of 1.5 periods: every expiry is past when the job ends.
                let start = std::time::Instant::now();
                while start.elapsed().as_nanos() < (PERIOD_NS as u128 * 3) / 2 {
                    std::hint::spin_loop();
                }
                // An "I/O wait" inside the job: a relative sleep, not an activation.
                std::thread::sleep(std::time::Duration::from_micros(200));
                sleep_to_next(&mut next, PERIOD_NS);
            }
        });
        let tid = rx.recv().unwrap();
        tracer.add(tid).expect("trace");
        go_tx.send(()).unwrap();
        late.join().unwrap();
        let mut ws = Vec::new();
        tracer.drain_tid_marked(tid, &mut ws).expect("drain");
        let expiries: Vec<u64> = ws.iter().filter_map(Wakeup::expiry_ns).collect();
        let last_set = ws.iter().filter(|w| !w.is_wakeup()).map(|w| w.t_ns).max();
        eprintln!(
            "late thread: {} wake-ups ({} timer), {} expiries set, last set at {:?}, last expiry {:?}",
            ws.iter().filter(|w| w.is_wakeup()).count(),
            ws.iter().filter(|w| w.is_timer()).count(),
            expiries.len(),
            last_set,
            expiries.last()
        );
        assert_eq!(expiries.len(), N, "{expiries:?}");
        assert!(
            expiries.windows(2).all(|w| w[1] - w[0] == PERIOD_NS as u64),
            "{expiries:?}"
        );
        // The last expiry was already in the past when it was set.
        assert!(
            expiries.last() < last_set.as_ref(),
            "{expiries:?} set until {last_set:?}"
        );
    }

    /// The claim behind the origin marks, on the running kernel: a thread sleeping in
    /// clock_nanosleep and one blocked in read() on a timerfd are woken in hard-interrupt
    /// context (marked timer), a thread woken through a condition variable by another thread is
    /// not.
    #[test]
    #[cfg_attr(
        not(pacer_privileged),
        ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
    )]
    fn timer_wakeups_are_marked_and_thread_wakeups_are_not() {
        use std::sync::mpsc;
        use std::sync::{Arc, Barrier, Condvar, Mutex};
        use std::thread;

        pacer_testkit::require(pacer_testkit::Need::Root);
        pacer_testkit::require(pacer_testkit::Need::Tracefs);
        const N: usize = 30;
        const PERIOD_NS: i64 = 10_000_000;
        let mut tracer = WakeupTracer::with_buffer_kb(256).expect("open the tracer");
        let go = Arc::new(Barrier::new(4));
        let (tx, rx) = mpsc::channel();

        let (g, t) = (go.clone(), tx.clone());
        let sleeper = thread::spawn(move || {
            t.send(("clock_nanosleep", gettid())).unwrap();
            g.wait();
            let mut next = monotonic_now();
            for _ in 0..N {
                sleep_to_next(&mut next, PERIOD_NS);
            }
        });

        let (g, t) = (go.clone(), tx.clone());
        let timerfd = thread::spawn(move || {
            t.send(("timerfd", gettid())).unwrap();
            // SAFETY: plain syscalls on a descriptor this thread owns; `its` and `ticks` are
            // valid for the calls' reads and writes.
            unsafe {
                let fd = libc::timerfd_create(libc::CLOCK_MONOTONIC, 0);
                assert!(fd >= 0, "timerfd_create");
                g.wait();
                let interval = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: PERIOD_NS,
                };
                let its = libc::itimerspec {
                    it_interval: interval,
                    it_value: interval,
                };
                assert_eq!(libc::timerfd_settime(fd, 0, &its, std::ptr::null_mut()), 0);
                let mut ticks = 0u64;
                for _ in 0..N {
                    libc::read(fd, (&mut ticks as *mut u64).cast(), 8);
                }
                libc::close(fd);
            }
        });

        // The waiter sleeps on a condition variable that the signaller, itself woken by its own
        // sleep, notifies every 10 ms.
        let pair = Arc::new((Mutex::new(0usize), Condvar::new()));
        let (g, t, p) = (go.clone(), tx.clone(), pair.clone());
        let waiter = thread::spawn(move || {
            pin_to_cpu0();
            t.send(("condvar", gettid())).unwrap();
            g.wait();
            let (lock, cv) = &*p;
            let mut seen = 0;
            let mut n = lock.lock().unwrap();
            while seen < N {
                while *n == seen {
                    n = cv.wait(n).unwrap();
                }
                seen = *n;
            }
        });
        let mut tids = std::collections::BTreeMap::new();
        for _ in 0..3 {
            let (name, tid) = rx.recv().unwrap();
            tracer.add(tid).expect("trace");
            tids.insert(name, tid);
        }
        pin_to_cpu0();
        go.wait();
        for _ in 0..N {
            thread::sleep(std::time::Duration::from_nanos(PERIOD_NS as u64));
            let (lock, cv) = &*pair;
            *lock.lock().unwrap() += 1;
            cv.notify_one();
        }
        for h in [sleeper, timerfd, waiter] {
            h.join().unwrap();
        }
        let mut marked = std::collections::BTreeMap::new();
        let mut expiries = std::collections::BTreeMap::new();
        for (&name, &tid) in &tids {
            let mut ws = Vec::new();
            tracer.drain_tid_marked(tid, &mut ws).expect("drain");
            let (set, ws): (Vec<Wakeup>, Vec<Wakeup>) = ws.into_iter().partition(|w| !w.is_wakeup());
            let timer = ws.iter().filter(|w| w.is_timer()).count();
            eprintln!(
                "{name}: {} wake-ups, {timer} marked timer, {} timers set",
                ws.len(),
                set.len()
            );
            marked.insert(name, (ws.len(), timer));
            expiries.insert(
                name,
                set.iter().filter_map(Wakeup::expiry_ns).collect::<Vec<u64>>(),
            );
        }
        tracer.traces_timers().expect("timer-set records on this kernel");
        // The sleeper set exactly its N absolute expiries, one period apart; the timerfd reader
        // re-arms its timer in read() one period later each time; the condition variable has no
        // timeout.
        let sleeps = &expiries["clock_nanosleep"];
        assert_eq!(sleeps.len(), N, "{sleeps:?}");
        assert!(
            sleeps.windows(2).all(|w| w[1] - w[0] == PERIOD_NS as u64),
            "{sleeps:?}"
        );
        let fd = &expiries["timerfd"];
        assert!(fd.len() >= N - 2, "timerfd: {} timers set", fd.len());
        assert!(
            fd.windows(2).all(|w| (w[1] - w[0]) % PERIOD_NS as u64 == 0),
            "{fd:?}"
        );
        assert!(expiries["condvar"].is_empty(), "{:?}", expiries["condvar"]);
        // Each expiry is a marked wake-up; the others (the start barrier's futex) are not.
        for name in ["clock_nanosleep", "timerfd"] {
            let (n, timer) = marked[name];
            assert!(
                timer >= N - 1,
                "{name}: only {timer} of {n} wake-ups marked timer"
            );
            assert!(n - timer <= 3, "{name}: {} of {n} wake-ups not marked", n - timer);
        }
        let (n, timer) = marked["condvar"];
        assert!(n >= N / 2, "condvar: {n} wake-ups");
        assert_eq!(timer, 0, "condvar: {timer} of {n} marked timer");
        assert_eq!(tracer.lost(), 0);
    }
}
