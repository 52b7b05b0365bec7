//! The guardian: a small companion process that gives threads back their original scheduling
//! state if pacer dies without doing it (SIGKILL, a crash, the OOM killer), so no thread is ever
//! left with a reservation pacer gave it.
//!
//! pacer starts the guardian with a pipe on its standard input and tells it, one line per fact,
//! which threads it is about to change and everything they had ([`ThreadSched`]). A clean exit
//! ends with `done`; end-of-file without `done`, or pacer's pidfd polling readable, means pacer
//! is gone, and the guardian restores every thread still under SCHED_DEADLINE.
//!
//! The two watch each other: the guardian holds a pidfd on pacer (the pipe alone would stay
//! open if a descendant inherited its write end), and pacer checks every tick whether its
//! guardian still runs; if not, it starts a new one and tells it every tracked thread again
//! ([`Guardian::replay`]), or, if that fails, releases everything itself (`pacer_linux::control`).
//! Both killed at once leaves the session's ledger (`pacer_linux::ledger`), from which `pacer
//! doctor --repair` restores the threads.
//!
//! Lines (text, one per line):
//! - `track PID TID STATE…` — pacer is about to control thread TID of process PID, whose state
//!   was STATE ([`ThreadSched::encode`]);
//! - `untrack TID` — pacer gave the thread back itself, or it is gone;
//! - `done` — pacer released everything; nothing to do.

use std::collections::BTreeMap;
#[cfg(test)]
use std::io::BufRead;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::procfs::{Pidfd, ProcFs};
use crate::sched::{self, LinuxError, ThreadSched, Tid, SCHED_DEADLINE};

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

    /// The guardian's process id.
    pub fn pid(&self) -> Tid {
        self.child.id()
    }

    fn send(&mut self, line: &str) {
        let Some(w) = self.stdin.as_mut() else { return };
        if let Err(e) = w.write_all(line.as_bytes()).and_then(|_| w.flush()) {
            self.broken = Some(format!("guardian pipe: {e}"));
            self.stdin = None;
        }
    }

    /// Announces a thread before its policy is first changed.
    pub fn track(&mut self, pid: Tid, tid: Tid, original: &ThreadSched) {
        self.send(&format!("track {pid} {tid} {}\n", original.encode()));
    }

    /// Announces every thread of `threads` (a new guardian taking over from a dead one).
    pub fn replay<'a>(&mut self, threads: impl IntoIterator<Item = (Tid, Tid, &'a ThreadSched)>) {
        for (pid, tid, s) in threads {
            self.track(pid, tid, s);
        }
    }

    /// The thread was given back (or is gone).
    pub fn untrack(&mut self, tid: Tid) {
        self.send(&format!("untrack {tid}\n"));
    }

    /// Why the guardian can no longer protect us (its pipe broke, or it exited), if it cannot.
    /// Reaps it when it has exited, so a dead guardian is noticed at once and leaves no zombie.
    pub fn broken(&mut self) -> Option<String> {
        if self.broken.is_none() {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.broken = Some(format!("guardian (PID {}) exited: {status}", self.child.id()));
                    self.stdin = None;
                }
                Ok(None) => {}
                Err(e) => self.broken = Some(format!("guardian (PID {}): {e}", self.child.id())),
            }
        }
        self.broken.clone()
    }

    /// Clean end: everything was released, the guardian exits without touching anything.
    pub fn finish(mut self) {
        self.send("done\n");
        self.stdin = None;
        let _ = self.child.wait();
    }
}

/// What the guardian did when pacer went away.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GuardianReport {
    /// pacer said `done`.
    pub clean: bool,
    /// Threads given back their state by the guardian.
    pub restored: Vec<Tid>,
    /// Threads that could not be restored, with the reason.
    pub failed: Vec<(Tid, String)>,
    /// Malformed lines (ignored).
    pub malformed: Vec<String>,
}

struct Tracked {
    pid: Tid,
    original: ThreadSched,
}

/// The guardian's memory: the protocol's lines folded into the set of threads to restore.
#[derive(Default)]
struct Book {
    tracked: BTreeMap<Tid, Tracked>,
    pidfds: BTreeMap<Tid, Option<Pidfd>>,
    report: GuardianReport,
}

impl Book {
    /// Takes one line; true once pacer said `done`.
    fn line(&mut self, line: &str) -> bool {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["done"] => {
                self.report.clean = true;
                return true;
            }
            ["untrack", tid] => match tid.parse() {
                Ok(t) => {
                    self.tracked.remove(&t);
                }
                Err(_) => self.report.malformed.push(line.to_string()),
            },
            ["track", pid, tid, rest @ ..] => {
                match (pid.parse::<Tid>(), tid.parse::<Tid>(), ThreadSched::decode(rest)) {
                    (Ok(pid), Ok(tid), Some(original)) => {
                        // Taken now, while the process is certainly the one pacer meant.
                        self.pidfds.entry(pid).or_insert_with(|| Pidfd::open(pid).ok());
                        self.tracked.insert(tid, Tracked { pid, original });
                    }
                    _ => self.report.malformed.push(line.to_string()),
                }
            }
            [] => {}
            _ => self.report.malformed.push(line.to_string()),
        }
        false
    }

    /// Restores every tracked thread that still belongs to the process it was announced with and
    /// is still under SCHED_DEADLINE: anything else was changed by someone since, and stays so.
    fn restore(mut self) -> GuardianReport {
        if self.report.clean {
            return self.report;
        }
        let proc = ProcFs::system();
        for (tid, t) in std::mem::take(&mut self.tracked) {
            let alive = self
                .pidfds
                .get(&t.pid)
                .and_then(|p| p.as_ref())
                .is_some_and(|p| p.is_alive().unwrap_or(false));
            if !alive || !proc.has_thread(t.pid, tid) {
                continue;
            }
            match sched::get_attr(tid) {
                Ok(a) if a.sched_policy == SCHED_DEADLINE => match sched::restore(tid, &t.original) {
                    Ok(()) => self.report.restored.push(tid),
                    Err(e) => self.report.failed.push((tid, e.to_string())),
                },
                Ok(_) => {}
                // Exited between the checks: nothing to restore.
                Err(e) if e.errno() == Some(libc::ESRCH) => {}
                Err(e) => self.report.failed.push((tid, e.to_string())),
            }
        }
        self.report
    }
}

/// The protocol from a reader until end of file (the unit tests' way in; the process uses
/// [`serve_watching`]).
#[cfg(test)]
fn serve(input: impl BufRead) -> io::Result<GuardianReport> {
    let mut book = Book::default();
    for line in input.lines() {
        if book.line(&line?) {
            break;
        }
    }
    Ok(book.restore())
}

/// The guardian's loop in the real process: the protocol on `input` (its standard input), and
/// pacer's pidfd `watch`. Ends at `done`, at end of file, or when pacer has exited (then after
/// reading what pacer managed to write before dying).
pub fn serve_watching(input: RawFd, watch: Option<&Pidfd>) -> io::Result<GuardianReport> {
    let mut book = Book::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    let mut parent_gone = false;
    loop {
        let mut fds = vec![libc::pollfd {
            fd: input,
            events: libc::POLLIN,
            revents: 0,
        }];
        if let Some(p) = watch {
            fds.push(libc::pollfd {
                fd: p.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // Once pacer is gone, only drain what is already in the pipe.
        let timeout = if parent_gone { 0 } else { -1 };
        // SAFETY: `fds` is a live, writable array of `fds.len()` pollfds.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds.get(1).is_some_and(|f| f.revents != 0) {
            parent_gone = true;
        }
        if fds[0].revents == 0 {
            if parent_gone {
                break;
            }
            continue;
        }
        // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes.
        let n = unsafe { libc::read(input, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        pending.extend_from_slice(&buf[..n as usize]);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if book.line(&String::from_utf8_lossy(&line)) {
                return Ok(book.restore());
            }
        }
    }
    Ok(book.restore())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::SchedAttr;

    fn state() -> ThreadSched {
        let mut attr = SchedAttr::new();
        attr.sched_nice = -5;
        attr.sched_flags = 1;
        attr.sched_runtime = 1_400_000;
        ThreadSched {
            attr,
            affinity: vec![0, 1, 5],
        }
    }

    #[test]
    fn states_round_trip_through_text() {
        let s = state();
        let text = s.encode();
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(ThreadSched::decode(&words), Some(s));
        assert_eq!(ThreadSched::decode(&["0", "0"]), None);
        let mut bad = words.clone();
        bad[2] = "-40";
        assert_eq!(ThreadSched::decode(&bad), None, "nice out of range");
    }

    #[test]
    fn done_means_nothing_to_restore() {
        let input = format!("track 1 1 {}\ndone\n", state().encode());
        let r = serve(input.as_bytes()).unwrap();
        assert!(r.clean);
        assert!(r.restored.is_empty());
    }

    #[test]
    fn malformed_lines_are_reported_not_fatal() {
        let input = "hello\ntrack x 1 0 0 0 0 0 0 0 0 0 -\nuntrack y\ntrack 1 1 other 0\n";
        let r = serve(input.as_bytes()).unwrap();
        assert!(!r.clean);
        assert_eq!(r.malformed.len(), 4);
    }

    #[test]
    fn a_closed_pipe_ends_the_watching_loop() {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two descriptors into the array we own.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let line = b"untrack 5\ndone\n";
        // SAFETY: fds[1] is the pipe's write end, `line` a live buffer.
        unsafe {
            libc::write(fds[1], line.as_ptr().cast(), line.len());
            libc::close(fds[1]);
        }
        let r = serve_watching(fds[0], None).unwrap();
        assert!(r.clean);
        // SAFETY: closes the read end we own.
        unsafe { libc::close(fds[0]) };
    }
}
