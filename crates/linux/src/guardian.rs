//! The guardian: a small companion process that gives threads back their original policy if pacer
//! dies without doing it (SIGKILL, a crash, the OOM killer), so no thread is ever left with a
//! reservation pacer gave it.
//!
//! pacer starts the guardian with a pipe on its standard input and tells it, one line per fact,
//! which threads it is about to change and what their policy was. A clean exit ends with
//! `done`; end-of-file without `done` means pacer is gone, and the guardian restores every
//! thread still under a policy pacer set. The pipe is the whole protocol: the kernel closes it
//! when pacer dies, however it dies.
//!
//! Lines (text, one per line):
//! - `track PID TID POLICY…` — pacer is about to control thread TID of process PID, whose
//!   policy was POLICY (see [`encode_policy`]);
//! - `untrack TID` — pacer gave the thread back itself;
//! - `done` — pacer released everything; nothing to do.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};

use pacer_model::{Duration, Policy, Reservation, ReservationFlags};

use crate::procfs::{Pidfd, ProcFs};
use crate::sched::{self, LinuxError, Tid};

/// A policy as one line of text: `other NICE`, `idle`, `fifo PRIO`, `rr PRIO`,
/// `deadline RUNTIME DEADLINE PERIOD FLAGS` (ns; flags as the kernel's bits).
pub fn encode_policy(p: &Policy) -> String {
    match p {
        Policy::Other { nice } => format!("other {nice}"),
        Policy::Idle => "idle".into(),
        Policy::Fifo { priority } => format!("fifo {priority}"),
        Policy::Rr { priority } => format!("rr {priority}"),
        Policy::Deadline(r) => format!(
            "deadline {} {} {} {}",
            r.runtime.0,
            r.deadline.0,
            r.period.0,
            r.flags.bits()
        ),
    }
}

/// Inverse of [`encode_policy`]; `None` for anything else.
pub fn decode_policy(words: &[&str]) -> Option<Policy> {
    let num = |i: usize| words.get(i)?.parse::<u64>().ok();
    Some(match *words.first()? {
        "other" if words.len() == 2 => Policy::Other {
            nice: words[1].parse().ok()?,
        },
        "idle" if words.len() == 1 => Policy::Idle,
        "fifo" if words.len() == 2 => Policy::Fifo {
            priority: words[1].parse().ok()?,
        },
        "rr" if words.len() == 2 => Policy::Rr {
            priority: words[1].parse().ok()?,
        },
        "deadline" if words.len() == 5 => {
            let bits = num(4)?;
            Policy::Deadline(Reservation {
                runtime: Duration(num(1)?),
                deadline: Duration(num(2)?),
                period: Duration(num(3)?),
                flags: ReservationFlags {
                    reset_on_fork: bits & pacer_model::reservation::SCHED_FLAG_RESET_ON_FORK != 0,
                    reclaim: bits & pacer_model::reservation::SCHED_FLAG_RECLAIM != 0,
                    overrun: bits & pacer_model::reservation::SCHED_FLAG_DL_OVERRUN != 0,
                },
            })
        }
        _ => return None,
    })
}

/// pacer's end of the pipe.
#[derive(Debug)]
pub struct Guardian {
    child: Child,
    stdin: Option<ChildStdin>,
    broken: Option<String>,
}

impl Guardian {
    /// Starts `cmd` (pacer's own binary with its hidden guardian subcommand) in a process group
    /// of its own, so the Ctrl-C meant for pacer and the program does not reach it.
    pub fn spawn(mut cmd: Command) -> Result<Guardian, LinuxError> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| LinuxError::Io {
                path: cmd.get_program().into(),
                source: e,
            })?;
        let stdin = child.stdin.take();
        Ok(Guardian {
            child,
            stdin,
            broken: None,
        })
    }

    fn send(&mut self, line: &str) {
        let Some(w) = self.stdin.as_mut() else { return };
        if let Err(e) = w.write_all(line.as_bytes()).and_then(|_| w.flush()) {
            self.broken = Some(format!("guardian pipe: {e}"));
            self.stdin = None;
        }
    }

    /// Announces a thread before its policy is first changed.
    pub fn track(&mut self, pid: Tid, tid: Tid, original: &Policy) {
        self.send(&format!("track {pid} {tid} {}\n", encode_policy(original)));
    }

    /// The thread was given back (or is gone).
    pub fn untrack(&mut self, tid: Tid) {
        self.send(&format!("untrack {tid}\n"));
    }

    /// Why the guardian can no longer protect us (its pipe broke), if it cannot.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Clean end: everything was released, the guardian exits without touching anything.
    pub fn finish(mut self) {
        self.send("done\n");
        self.stdin = None;
        let _ = self.child.wait();
    }
}

/// What the guardian did when its pipe closed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GuardianReport {
    /// pacer said `done`.
    pub clean: bool,
    /// Threads given back their policy by the guardian.
    pub restored: Vec<Tid>,
    /// Threads that could not be restored, with the reason.
    pub failed: Vec<(Tid, String)>,
    /// Malformed lines (ignored).
    pub malformed: Vec<String>,
}

struct Tracked {
    pid: Tid,
    original: Policy,
}

/// The guardian's loop: reads the protocol from `input` until end of file, then restores what
/// pacer left behind unless it said `done`. A thread is restored only if it still belongs to the
/// process it was announced with (checked through a pidfd taken when it was announced) and is
/// still under SCHED_DEADLINE, so nothing someone else changed since is overwritten.
pub fn serve(input: impl BufRead) -> io::Result<GuardianReport> {
    let proc = ProcFs::system();
    let mut tracked: BTreeMap<Tid, Tracked> = BTreeMap::new();
    let mut pidfds: BTreeMap<Tid, Option<Pidfd>> = BTreeMap::new();
    let mut report = GuardianReport::default();
    for line in input.lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["done"] => {
                report.clean = true;
                return Ok(report);
            }
            ["untrack", tid] => {
                if let Ok(t) = tid.parse() {
                    tracked.remove(&t);
                    continue;
                }
                report.malformed.push(line.clone());
            }
            ["track", pid, tid, rest @ ..] => {
                match (pid.parse::<Tid>(), tid.parse::<Tid>(), decode_policy(rest)) {
                    (Ok(pid), Ok(tid), Some(original)) => {
                        pidfds.entry(pid).or_insert_with(|| Pidfd::open(pid).ok());
                        tracked.insert(tid, Tracked { pid, original });
                    }
                    _ => report.malformed.push(line.clone()),
                }
            }
            [] => {}
            _ => report.malformed.push(line.clone()),
        }
    }
    for (tid, t) in tracked {
        let alive = pidfds
            .get(&t.pid)
            .and_then(|p| p.as_ref())
            .is_some_and(|p| p.is_alive().unwrap_or(false));
        if !alive || !proc.has_thread(t.pid, tid) {
            continue;
        }
        match sched::get_policy(tid) {
            Ok(Policy::Deadline(_)) => match sched::set_policy(tid, t.original, false) {
                Ok(()) => report.restored.push(tid),
                Err(e) => report.failed.push((tid, e.to_string())),
            },
            Ok(_) => {}
            Err(e) => report.failed.push((tid, e.to_string())),
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_through_text() {
        let mut r = Reservation::new(
            Duration::from_us(500),
            Duration::from_ms(5),
            Duration::from_ms(10),
        );
        r.flags.reset_on_fork = true;
        for p in [
            Policy::Other { nice: -3 },
            Policy::Idle,
            Policy::Fifo { priority: 42 },
            Policy::Rr { priority: 1 },
            Policy::Deadline(r),
        ] {
            let text = encode_policy(&p);
            let words: Vec<&str> = text.split_whitespace().collect();
            assert_eq!(decode_policy(&words), Some(p), "{text}");
        }
        assert_eq!(decode_policy(&["other"]), None);
        assert_eq!(decode_policy(&["fifo", "300"]), None);
        assert_eq!(decode_policy(&["batch", "1"]), None);
    }

    #[test]
    fn done_means_nothing_to_restore() {
        let input = "track 1 1 other 0\ndone\n";
        let r = serve(input.as_bytes()).unwrap();
        assert!(r.clean);
        assert!(r.restored.is_empty());
    }

    #[test]
    fn malformed_lines_are_reported_not_fatal() {
        let input = "hello\ntrack x 1 other 0\nuntrack y\n";
        let r = serve(input.as_bytes()).unwrap();
        assert!(!r.clean);
        assert_eq!(r.malformed.len(), 3);
    }
}
