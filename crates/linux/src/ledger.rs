//! A control session's ledger on disk: which threads `pacer exec`/`attach` changed and everything
//! they had before, so that their state can be given back even when both pacer and its guardian
//! were killed at once (nothing in user space survives that to restore them). `pacer doctor`
//! lists ledgers whose pacer and guardian are both gone, and `pacer doctor --repair` restores
//! their threads, then deletes them.
//!
//! One file per session, `exec-<pacer pid>.state` in the state directory (`/run/pacer`, a tmpfs
//! that a reboot empties, as it does every reservation), rewritten whole (temporary file, then
//! rename) before each change it records, so a reader never sees half a ledger. Text, one fact a
//! line:
//!
//! ```text
//! pacer-ledger 1
//! boot BOOT_ID
//! pacer PID START
//! guardian PID START
//! track PID START TID STATE…
//! ```
//!
//! START is a process's start time (`/proc/PID/stat` field 22), so a recycled PID is never taken
//! for the process that was controlled; STATE is [`ThreadSched::encode`].

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::procfs::{self, boot_id, ProcFs};
use crate::sched::{self, ThreadSched, Tid, SCHED_DEADLINE};

/// Where ledgers live unless told otherwise.
pub const DEFAULT_DIR: &str = crate::cgroup::DEFAULT_STATE_DIR;

/// The environment variable that overrides [`DEFAULT_DIR`] (tests, systems without /run).
pub const DIR_ENV: &str = "PACER_STATE_DIR";

/// The ledger directory in effect: `$PACER_STATE_DIR`, else [`DEFAULT_DIR`].
pub fn dir() -> PathBuf {
    std::env::var_os(DIR_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR))
}

const MAGIC: &str = "pacer-ledger 1";

/// A process named so that a recycled PID never matches: pid and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessId {
    pub pid: Tid,
    pub start: u64,
}

impl ProcessId {
    /// The process `pid` as it is now; `None` when it does not exist.
    pub fn of(pid: Tid) -> Option<ProcessId> {
        procfs::process_start(pid).map(|(start, _)| ProcessId { pid, start })
    }

    /// Whether this very process still runs.
    pub fn alive(&self) -> bool {
        procfs::process_alive(self.pid, Some(self.start))
    }
}

/// One controlled thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub process: ProcessId,
    pub tid: Tid,
    pub original: ThreadSched,
}

/// A session's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ledger {
    pub path: PathBuf,
    pub boot_id: String,
    pub pacer: ProcessId,
    pub guardian: Option<ProcessId>,
    pub entries: BTreeMap<Tid, Entry>,
}

impl Ledger {
    /// A new, empty ledger for this process in `dir` (not written yet).
    pub fn new(dir: &Path) -> Option<Ledger> {
        let pid = std::process::id();
        Some(Ledger {
            path: dir.join(format!("exec-{pid}.state")),
            boot_id: boot_id(),
            pacer: ProcessId::of(pid)?,
            guardian: None,
            entries: BTreeMap::new(),
        })
    }

    /// The text of the ledger.
    pub fn render(&self) -> String {
        let mut s = format!(
            "{MAGIC}\nboot {}\npacer {} {}\n",
            self.boot_id, self.pacer.pid, self.pacer.start
        );
        if let Some(g) = self.guardian {
            s.push_str(&format!("guardian {} {}\n", g.pid, g.start));
        }
        for e in self.entries.values() {
            s.push_str(&format!(
                "track {} {} {} {}\n",
                e.process.pid,
                e.process.start,
                e.tid,
                e.original.encode()
            ));
        }
        s
    }

    /// Parses a ledger's text; `None` if it is not one.
    pub fn parse(path: &Path, text: &str) -> Option<Ledger> {
        let mut lines = text.lines();
        if lines.next()? != MAGIC {
            return None;
        }
        let mut boot_id = None;
        let mut pacer = None;
        let mut guardian = None;
        let mut entries = BTreeMap::new();
        let pid_start = |a: &str, b: &str| -> Option<ProcessId> {
            Some(ProcessId {
                pid: a.parse().ok()?,
                start: b.parse().ok()?,
            })
        };
        for line in lines {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["boot", id] => boot_id = Some(id.to_string()),
                ["pacer", p, s] => pacer = Some(pid_start(p, s)?),
                ["guardian", p, s] => guardian = Some(pid_start(p, s)?),
                ["track", p, s, tid, rest @ ..] => {
                    let tid: Tid = tid.parse().ok()?;
                    entries.insert(
                        tid,
                        Entry {
                            process: pid_start(p, s)?,
                            tid,
                            original: ThreadSched::decode(rest)?,
                        },
                    );
                }
                [] => {}
                _ => return None,
            }
        }
        Some(Ledger {
            path: path.to_path_buf(),
            boot_id: boot_id?,
            pacer: pacer?,
            guardian,
            entries,
        })
    }

    /// Writes the ledger: a temporary file beside it, flushed to disk, then renamed over it.
    pub fn write(&self) -> io::Result<()> {
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir)?;
        }
        let tmp = self.path.with_extension("state.tmp");
        {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(self.render().as_bytes())?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &self.path)
    }

    /// Deletes the ledger (a clean end); a missing file is fine.
    pub fn remove(&self) -> io::Result<()> {
        match fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Whether nobody is left to restore this session's threads: pacer and its guardian are
    /// both gone, or the ledger is from an earlier boot.
    pub fn orphaned(&self) -> bool {
        if self.boot_id != boot_id() {
            return true;
        }
        !self.pacer.alive() && !self.guardian.is_some_and(|g| g.alive())
    }

    /// What restoring would do to each thread, without doing it.
    pub fn plan(&self) -> Vec<(Tid, Plan)> {
        let proc = ProcFs::system();
        let current_boot = self.boot_id == boot_id();
        self.entries
            .values()
            .map(|e| {
                let plan = if !current_boot || !e.process.alive() || !proc.has_thread(e.process.pid, e.tid) {
                    Plan::Gone
                } else {
                    match sched::get_attr(e.tid) {
                        Ok(a) if a.sched_policy == SCHED_DEADLINE => Plan::Restore,
                        Ok(_) => Plan::NotDeadline,
                        Err(_) => Plan::Gone,
                    }
                };
                (e.tid, plan)
            })
            .collect()
    }

    /// Restores every thread still under SCHED_DEADLINE (as the guardian would have), then
    /// deletes the ledger if nothing failed.
    pub fn repair(&self) -> RepairReport {
        let mut report = RepairReport::default();
        for (tid, plan) in self.plan() {
            if plan != Plan::Restore {
                continue;
            }
            let e = &self.entries[&tid];
            match sched::restore(tid, &e.original) {
                Ok(()) => report.restored.push(tid),
                // Gone, or died and not yet reaped (sched::shrink_reservation): nothing to restore.
                Err(err) if err.errno() == Some(libc::ESRCH) => {}
                Err(err) => report.failed.push((tid, err.to_string())),
            }
        }
        if report.failed.is_empty() {
            if let Err(e) = self.remove() {
                report.failed.push((0, format!("{}: {e}", self.path.display())));
            }
        }
        report
    }
}

/// What [`Ledger::repair`] would do with one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Plan {
    /// Still under SCHED_DEADLINE: its original state will be restored.
    Restore,
    /// Under another policy now (someone changed it since): left alone.
    NotDeadline,
    /// The thread or its process is gone: nothing to restore.
    Gone,
}

/// What [`Ledger::repair`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RepairReport {
    pub restored: Vec<Tid>,
    pub failed: Vec<(Tid, String)>,
}

/// Every ledger in `dir` (unparseable files are skipped, with their paths returned apart).
pub fn list(dir: &Path) -> (Vec<Ledger>, Vec<PathBuf>) {
    let mut ledgers = Vec::new();
    let mut unreadable = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return (ledgers, unreadable);
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("exec-") && n.ends_with(".state"))
        })
        .collect();
    paths.sort();
    for p in paths {
        match fs::read_to_string(&p).ok().and_then(|t| Ledger::parse(&p, &t)) {
            Some(l) => ledgers.push(l),
            None => unreadable.push(p),
        }
    }
    (ledgers, unreadable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::SchedAttr;

    #[test]
    fn a_ledger_round_trips_and_rejects_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::new(dir.path()).unwrap();
        l.guardian = Some(ProcessId { pid: 7, start: 99 });
        let mut attr = SchedAttr::new();
        attr.sched_nice = 3;
        l.entries.insert(
            42,
            Entry {
                process: ProcessId { pid: 40, start: 1234 },
                tid: 42,
                original: ThreadSched {
                    attr,
                    affinity: vec![0, 1],
                },
            },
        );
        l.write().unwrap();
        let (found, bad) = list(dir.path());
        assert!(bad.is_empty());
        assert_eq!(found, vec![l.clone()]);
        // This process is alive: not orphaned.
        assert!(!found[0].orphaned());
        // A dead process 40 (start time 1234 is not its start): nothing to restore.
        assert_eq!(found[0].plan(), vec![(42, Plan::Gone)]);
        fs::write(dir.path().join("exec-1.state"), "nonsense\n").unwrap();
        let (_, bad) = list(dir.path());
        assert_eq!(bad.len(), 1);
        l.remove().unwrap();
        l.remove().unwrap();
    }
}
