//! The guardian: a small companion process that gives threads back their original scheduling
//! state if pacer dies without doing it (SIGKILL, a crash, the OOM killer), so no thread is ever
//! left with a reservation pacer gave it.
//!
//! pacer starts the guardian with a pipe on its standard input and tells it, one line per fact,
//! which threads it is about to change and everything they had ([`ThreadSched`]), and, for
//! changes other than reservations (the interactive boosts of [`crate::boost`]), what it applies.
//! A clean exit ends with `done`; end-of-file without `done`, or pacer's pidfd polling readable,
//! means pacer is gone, and the guardian restores every thread that still has what pacer gave
//! it: the applied state when pacer said what it was ([`crate::boost::matches_applied`]), else
//! SCHED_DEADLINE (pacer's reservations change at every job; any reservation is pacer's).
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
//! - `track PID TID STATE… applied APPLIED…` — the same, and pacer is about to set APPLIED (the
//!   same encoding, affinity `-`); sent again if what the kernel reports differs;
//! - `untrack TID` — pacer gave the thread back itself, or it is gone;
//! - `done` — pacer released everything; nothing to do.

use std::collections::BTreeMap;
#[cfg(test)]
use std::io::BufRead;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::boost::Undone;
use crate::procfs::{Pidfd, ProcFs};
use crate::sched::{self, LinuxError, SchedAttr, ThreadSched, Tid, SCHED_DEADLINE};

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

    /// Announces a thread before pacer sets `applied` on it, for a change that is not a
    /// reservation: if pacer dies, the thread gets `original` back only if it still has
    /// `applied` ([`crate::boost::matches_applied`]).
    pub fn track_applied(&mut self, pid: Tid, tid: Tid, original: &ThreadSched, applied: &SchedAttr) {
        let applied = ThreadSched {
            attr: *applied,
            affinity: Vec::new(),
        };
        self.send(&format!(
            "track {pid} {tid} {} applied {}\n",
            original.encode(),
            applied.encode()
        ));
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
    /// What pacer applied, when it said (else: restored if under SCHED_DEADLINE).
    applied: Option<SchedAttr>,
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
                let (orig, applied) = match rest {
                    [orig @ .., "applied", a0, a1, a2, a3, a4, a5, a6, a7, a8, a9] => {
                        match ThreadSched::decode(&[a0, a1, a2, a3, a4, a5, a6, a7, a8, a9]) {
                            Some(a) => (orig, Some(Some(a.attr))),
                            None => (orig, None),
                        }
                    }
                    _ => (rest, Some(None)),
                };
                match (
                    pid.parse::<Tid>(),
                    tid.parse::<Tid>(),
                    ThreadSched::decode(orig),
                    applied,
                ) {
                    (Ok(pid), Ok(tid), Some(original), Some(applied)) => {
                        // Taken now, while the process is certainly the one pacer meant.
                        self.pidfds.entry(pid).or_insert_with(|| Pidfd::open(pid).ok());
                        self.tracked.insert(
                            tid,
                            Tracked {
                                pid,
                                original,
                                applied,
                            },
                        );
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
    /// still has what pacer applied (SCHED_DEADLINE when pacer did not say): anything else was
    /// changed by someone since, and stays so.
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
            if let Some(applied) = &t.applied {
                match crate::boost::undo(tid, &t.original, applied) {
                    Undone::Restored => self.report.restored.push(tid),
                    Undone::Foreign { .. } | Undone::Gone => {}
                    Undone::Failed(e) => self.report.failed.push((tid, e)),
                }
                continue;
            }
            match sched::get_attr(tid) {
                Ok(a) if a.sched_policy == SCHED_DEADLINE => match sched::restore(tid, &t.original) {
                    Ok(()) => self.report.restored.push(tid),
                    // Died meanwhile (a zombie is refused as gone: sched::shrink_reservation).
                    Err(e) if e.errno() == Some(libc::ESRCH) => {}
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

    /// A thread of this process parked on a channel until dropped.
    struct Helper {
        tid: Tid,
        stop: Option<std::sync::mpsc::Sender<()>>,
        handle: Option<std::thread::JoinHandle<()>>,
    }

    impl Helper {
        fn new() -> Helper {
            let (tid_tx, tid_rx) = std::sync::mpsc::channel();
            let (stop, stop_rx) = std::sync::mpsc::channel::<()>();
            let handle = std::thread::spawn(move || {
                tid_tx.send(sched::gettid()).unwrap();
                let _ = stop_rx.recv();
            });
            Helper {
                tid: tid_rx.recv().unwrap(),
                stop: Some(stop),
                handle: Some(handle),
            }
        }
    }

    impl Drop for Helper {
        fn drop(&mut self) {
            drop(self.stop.take());
            let _ = self.handle.take().map(|h| h.join());
        }
    }

    fn applied_line(tid: Tid, original: &ThreadSched, applied: &SchedAttr) -> String {
        let applied = ThreadSched {
            attr: *applied,
            affinity: Vec::new(),
        };
        format!(
            "track {} {tid} {} applied {}\n",
            std::process::id(),
            original.encode(),
            applied.encode()
        )
    }

    #[test]
    fn applied_states_parse_and_bad_ones_are_malformed() {
        let s = state().encode();
        let a = ThreadSched {
            attr: SchedAttr::new(),
            affinity: Vec::new(),
        }
        .encode();
        let input = format!(
            "track 1 2 {s} applied {a}\ntrack 1 3 {s} applied 0 0\ntrack 1 4 {s} applied {a} extra\n"
        );
        let mut book = Book::default();
        for l in input.lines() {
            book.line(l);
        }
        assert_eq!(
            book.tracked.get(&2).map(|t| t.applied),
            Some(Some(SchedAttr::new()))
        );
        assert_eq!(book.report.malformed.len(), 2, "{:?}", book.report.malformed);
    }

    #[test]
    fn a_thread_that_changed_itself_after_a_boost_is_left_alone() {
        // Raising one's own nice needs no privilege: the helper "boosted" to nice 5 by pacer,
        // then at nice 7 by its own choice.
        let h = Helper::new();
        let original = ThreadSched::read(h.tid).unwrap();
        let mut applied = original.attr;
        applied.sched_nice = 5;
        applied.sched_runtime = 0;
        let mut own = original.attr;
        own.sched_nice = 7;
        own.sched_runtime = 0;
        sched::set_attr(h.tid, &own).unwrap();
        let r = serve(applied_line(h.tid, &original, &applied).as_bytes()).unwrap();
        assert!(r.restored.is_empty() && r.failed.is_empty(), "{r:?}");
        assert_eq!(sched::get_attr(h.tid).unwrap().sched_nice, 7);
    }

    #[test]
    #[cfg_attr(
        not(pacer_privileged),
        ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
    )]
    fn boosted_threads_are_restored_if_pacer_dies() {
        pacer_testkit::require(pacer_testkit::Need::Root);
        let h = Helper::new();
        let original = ThreadSched::read(h.tid).unwrap();
        let mut boosted = original.attr;
        boosted.sched_nice = -12;
        boosted.sched_runtime = 300_000;
        sched::set_attr(h.tid, &boosted).unwrap();
        let applied = sched::get_attr(h.tid).unwrap();
        // End of file without `done`: pacer died.
        let r = serve(applied_line(h.tid, &original, &applied).as_bytes()).unwrap();
        assert_eq!(r.restored, vec![h.tid], "{r:?}");
        let now = ThreadSched::read(h.tid).unwrap();
        assert_eq!(
            now,
            original,
            "every field back: {:?}",
            original.differences(&now)
        );
        eprintln!(
            "boosted_threads_are_restored_if_pacer_dies: nice -12 / slice 300 us -> nice {} / slice {} ns",
            now.attr.sched_nice, now.attr.sched_runtime
        );
    }
}
