//! A SCHED_DEADLINE thread's current scheduling deadline and remaining runtime, read from
//! `/proc/PID/task/TID/sched`: the two quantities eq. 3 of adaptive-deadline-audio-android.txt
//! (§5) takes at a job's begin and end, C_m = q_start − q_end + Q·⌈(d_end − d_start)/T⌉.
//!
//! `sched_getattr(2)` reports only the reservation's parameters; the audio paper's authors
//! patched their kernel to get the state. Mainline prints it in the scheduler's per-task debug
//! file (`proc_sched_show_task()` in kernel/sched/debug.c), readable by any user, for
//! SCHED_DEADLINE tasks only. On this 6.18 kernel the file is always there (its configuration
//! has no `CONFIG_SCHED_DEBUG` any more); older kernels have it with `CONFIG_SCHED_DEBUG=y`:
//!
//! ```text
//! policy                                       :                    6
//! prio                                         :                   -1
//! dl.runtime                                   :              2827216
//! dl.deadline                                  :         543441589049
//! ```
//!
//! Facts measured on Linux 6.18 (the development VM, docs/linux.md):
//! - `dl.runtime` is the remaining runtime in ns (signed: negative after an overrun), already
//!   scaled by frequency and capacity; `dl.deadline` the absolute deadline in ns of the *run
//!   queue clock* (`rq_clock()`, i.e. `sched_clock_cpu()`), not CLOCK_MONOTONIC. Here it was
//!   0.53–0.67 ms ahead of CLOCK_MONOTONIC and drifting (the debugfs file's `cpu_clk` against
//!   `ktime` shows the same). A controller may rely on *differences* of deadlines read from
//!   the kernel (the kernel advances a throttled thread's deadline by exactly one period, and a
//!   thread waking after its deadline gets rq_clock + D), never on comparing a deadline with
//!   [`pacer_adapt::Kernel::now`]. Eq. 3 only uses d_end − d_start.
//! - `dl.runtime` is brought up to date only when the scheduler accounts the running thread
//!   (a tick, a switch, or a read of the thread's CPU clock). Read while the thread runs, it
//!   lagged by up to one tick (4 ms at HZ=250): burning 4 ms showed 3.81 ms consumed, and
//!   burning 5 ms only 1.47 ms. A read of the thread's own CPU clock first
//!   (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`, which calls `update_curr()`) made it exact to
//!   the µs. So [`DlStateReader::read_own`] reads the CPU clock and then the file, and returns
//!   both: the pair a `JobBegin`/`JobEnd` event carries. A thread that is not running is always
//!   up to date.
//!
//! [`DlStateReader`] is for a real-time thread reading its own state at every job boundary: the
//! file is opened once, each read is one `pread` into a fixed stack buffer, and the parse does
//! not allocate.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use pacer_adapt::DlState;

use crate::sched::{Tid, SCHED_DEADLINE};

/// Size of the stack buffer one read of the `sched` file goes into. The file is about 1.7 KB on
/// Linux 6.18 and the fields needed are in its first 1.3 KB; NUMA lines may follow.
const BUF: usize = 4096;

/// Why the deadline state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DlStateError {
    /// The thread does not exist (any more).
    #[error("no such thread {0}")]
    NoSuchThread(Tid),
    /// Opening or reading the `sched` file failed.
    #[error("{op} /proc/{pid}/task/{tid}/sched: {source}")]
    Io {
        op: &'static str,
        pid: Tid,
        tid: Tid,
        #[source]
        source: io::Error,
    },
    /// The file does not have the fields this kernel is expected to print.
    #[error("/proc/{pid}/task/{tid}/sched: {what}")]
    Parse { pid: Tid, tid: Tid, what: DlParseError },
}

impl From<DlStateError> for pacer_adapt::KernelError {
    fn from(e: DlStateError) -> Self {
        match e {
            DlStateError::NoSuchThread(t) => pacer_adapt::KernelError::NoSuchThread(t),
            other => pacer_adapt::KernelError::Other(other.to_string()),
        }
    }
}

/// What is wrong with a `sched` file's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DlParseError {
    /// No `policy` line (not a task's `sched` file, or cut before it).
    #[error("no `policy` field")]
    NoPolicy,
    /// A SCHED_DEADLINE task without `dl.runtime` and `dl.deadline` (cut short, or a kernel
    /// that prints them differently).
    #[error("policy 6 (SCHED_DEADLINE) without dl.runtime and dl.deadline")]
    NoDlFields,
    /// A field that is not an integer.
    #[error("field `{0}` is not an integer")]
    BadNumber(&'static str),
}

/// Parses the text of `/proc/PID/task/TID/sched`: `Some` for a SCHED_DEADLINE task, `None` for
/// any other policy. Allocation-free, so a real-time thread may call it.
///
/// Fields are `name : value` lines; names are compared exactly after trimming. The last
/// occurrence of a field wins (the kernel prints each once).
pub fn parse_dl_state(text: &[u8]) -> Result<Option<DlState>, DlParseError> {
    let mut policy: Option<i64> = None;
    let mut runtime: Option<i64> = None;
    let mut deadline: Option<i64> = None;
    for line in text.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (key, value) = (trim(&line[..colon]), trim(&line[colon + 1..]));
        let slot = match key {
            b"policy" => (&mut policy, "policy"),
            b"dl.runtime" => (&mut runtime, "dl.runtime"),
            b"dl.deadline" => (&mut deadline, "dl.deadline"),
            _ => continue,
        };
        *slot.0 = Some(parse_i64(value).ok_or(DlParseError::BadNumber(slot.1))?);
    }
    let policy = policy.ok_or(DlParseError::NoPolicy)?;
    if policy != i64::from(SCHED_DEADLINE) {
        return Ok(None);
    }
    match (runtime, deadline) {
        // The kernel prints the u64 deadline through `(long long)`: a value past 2⁶³ (never
        // reached: 292 years of uptime) would come out negative, and is refused.
        (Some(runtime), Some(deadline)) => Ok(Some(DlState {
            deadline: u64::try_from(deadline).map_err(|_| DlParseError::BadNumber("dl.deadline"))?,
            runtime,
        })),
        _ => Err(DlParseError::NoDlFields),
    }
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// A decimal integer with an optional sign, or `None` (empty, other characters, overflow).
fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    // Accumulated negatively so that i64::MIN parses too.
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if neg {
        Some(v)
    } else {
        v.checked_neg()
    }
}

/// The clock id of thread `tid`'s CPU clock (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)` of
/// include/linux/posix-timers.h). The kernel accepts it for threads of the calling process only.
fn thread_cpu_clock(tid: Tid) -> libc::clockid_t {
    const CPUCLOCK_SCHED: libc::clockid_t = 2;
    const CPUCLOCK_PERTHREAD_MASK: libc::clockid_t = 4;
    ((!(tid as libc::clockid_t)) << 3) | CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD_MASK
}

fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer given.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Brings a running thread's `dl.runtime` up to date (see the module documentation) by reading
/// its CPU clock, and returns that CPU time. Only threads of the calling process can be
/// refreshed: `None` for others (their state may then lag by up to a tick while they run).
pub fn refresh(tid: Tid) -> Option<u64> {
    clock_ns(thread_cpu_clock(tid))
}

/// Reads the deadline state of thread `tid` of process `pid` once (opens, reads and closes the
/// file). For a thread of the calling process, its accounting is refreshed first. `Ok(None)`
/// when the thread is not SCHED_DEADLINE.
pub fn read(pid: Tid, tid: Tid) -> Result<Option<DlState>, DlStateError> {
    DlStateReader::open(pid, tid)?.read()
}

/// An open `sched` file of one thread, read without allocating (see the module documentation).
#[derive(Debug)]
pub struct DlStateReader {
    fd: OwnedFd,
    pid: Tid,
    tid: Tid,
    /// Whether the thread belongs to the calling process (its CPU clock can be read).
    ours: bool,
}

impl DlStateReader {
    /// Opens `/proc/PID/task/TID/sched` (allocates: call it before the real-time part).
    pub fn open(pid: Tid, tid: Tid) -> Result<DlStateReader, DlStateError> {
        let path =
            CString::new(format!("/proc/{pid}/task/{tid}/sched")).expect("no NUL in a path of numbers");
        // SAFETY: `path` is a valid NUL-terminated string; open returns a new descriptor or -1.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            let source = io::Error::last_os_error();
            return Err(match source.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::ESRCH) => DlStateError::NoSuchThread(tid),
                _ => DlStateError::Io {
                    op: "open",
                    pid,
                    tid,
                    source,
                },
            });
        }
        // SAFETY: `fd` was just returned by open and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: getpid takes no arguments and cannot fail.
        let me = unsafe { libc::getpid() } as Tid;
        Ok(DlStateReader {
            fd,
            pid,
            tid,
            ours: pid == me,
        })
    }

    /// The calling thread's reader.
    pub fn open_self() -> Result<DlStateReader, DlStateError> {
        // SAFETY: getpid takes no arguments and cannot fail.
        let pid = unsafe { libc::getpid() } as Tid;
        DlStateReader::open(pid, crate::sched::gettid())
    }

    /// The thread this reader reads.
    pub fn tid(&self) -> Tid {
        self.tid
    }

    /// The thread's state now (refreshed first when it is a thread of this process).
    /// Allocation-free.
    pub fn read(&self) -> Result<Option<DlState>, DlStateError> {
        if self.ours {
            let _ = refresh(self.tid);
        }
        self.read_file()
    }

    /// The thread's CPU time and deadline state, read in that order so the state includes all
    /// the CPU time reported (what a `JobBegin`/`JobEnd` event carries). Only for threads of
    /// the calling process (`Io` with `EINVAL` otherwise). Allocation-free.
    pub fn read_own(&self) -> Result<(u64, Option<DlState>), DlStateError> {
        let cpu = self
            .ours
            .then(|| refresh(self.tid))
            .flatten()
            .ok_or_else(|| DlStateError::Io {
                op: "clock_gettime(thread CPU clock)",
                pid: self.pid,
                tid: self.tid,
                source: io::Error::from_raw_os_error(libc::EINVAL),
            })?;
        Ok((cpu, self.read_file()?))
    }

    fn read_file(&self) -> Result<Option<DlState>, DlStateError> {
        let mut buf = [0u8; BUF];
        // SAFETY: `buf` is a live, writable buffer of BUF bytes; pread writes at most that many.
        // Offset 0 makes the seq_file generate the text afresh.
        let n = unsafe { libc::pread(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), BUF, 0) };
        if n < 0 {
            let source = io::Error::last_os_error();
            return Err(match source.raw_os_error() {
                Some(libc::ESRCH) => DlStateError::NoSuchThread(self.tid),
                _ => DlStateError::Io {
                    op: "pread",
                    pid: self.pid,
                    tid: self.tid,
                    source,
                },
            });
        }
        if n == 0 {
            // A thread that has exited reads as an empty file.
            return Err(DlStateError::NoSuchThread(self.tid));
        }
        parse_dl_state(&buf[..n as usize]).map_err(|what| DlStateError::Parse {
            pid: self.pid,
            tid: self.tid,
            what,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DL_FILE: &str = "worker (4242, #threads: 3)
-------------------------------------------------------------------
se.exec_start                                :        543210.696855
se.sum_exec_runtime                          :             2.172784
nr_voluntary_switches                        :                    0
policy                                       :                    6
prio                                         :                   -1
dl.runtime                                   :              2827216
dl.deadline                                  :         543441589049
clock-delta                                  :                   91
";

    #[test]
    fn deadline_fields_parse() {
        assert_eq!(
            parse_dl_state(DL_FILE.as_bytes()),
            Ok(Some(DlState {
                deadline: 543_441_589_049,
                runtime: 2_827_216
            }))
        );
        let overrun = DL_FILE.replace("2827216", "-35012");
        assert_eq!(
            parse_dl_state(overrun.as_bytes()).unwrap().unwrap().runtime,
            -35_012
        );
    }

    #[test]
    fn other_policies_have_no_state() {
        let other = "policy                                       :                    0
prio                                         :                  120
se.slice                                     :              1400000
";
        assert_eq!(parse_dl_state(other.as_bytes()), Ok(None));
    }

    #[test]
    fn broken_files_are_typed_errors() {
        assert_eq!(parse_dl_state(b""), Err(DlParseError::NoPolicy));
        let cut = &DL_FILE[..DL_FILE.find("dl.runtime").unwrap()];
        assert_eq!(parse_dl_state(cut.as_bytes()), Err(DlParseError::NoDlFields));
        let bad = DL_FILE.replace("2827216", "28x7216");
        assert_eq!(
            parse_dl_state(bad.as_bytes()),
            Err(DlParseError::BadNumber("dl.runtime"))
        );
        let negative_deadline = DL_FILE.replace("543441589049", "-1");
        assert_eq!(
            parse_dl_state(negative_deadline.as_bytes()),
            Err(DlParseError::BadNumber("dl.deadline"))
        );
    }

    #[test]
    fn integers_at_the_edges() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"+7"), Some(7));
        assert_eq!(parse_i64(b""), None);
    }

    #[test]
    fn own_thread_reads_none_under_sched_other() {
        let r = DlStateReader::open_self().expect("own sched file");
        assert_eq!(r.read().unwrap(), None);
        let (cpu, dl) = r.read_own().unwrap();
        assert!(cpu > 0);
        assert_eq!(dl, None);
        assert!(matches!(
            DlStateReader::open(std::process::id(), 4_194_400),
            Err(DlStateError::NoSuchThread(4_194_400))
        ));
    }
}
