//! `pacer doctor`: checks, and with `--repair` fixes, what a real-time tool can leave wrong on a
//! machine: the kernel's SCHED_DEADLINE admission accounting (`dl_bw->total_bw` against the
//! threads that hold reservations), threads still under a reservation of a pacer session whose
//! pacer and guardian are both gone, and leftover tracefs instances and cpusets. The checks are
//! `pacer_linux::audit`, `pacer_linux::ledger`, `pacer_linux::trace` and `pacer_linux::cpuset`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use pacer_linux::audit::{self, Domain, RebuildMethod, Snapshot};
use pacer_linux::cpuset::{self, taskgroup, CpusetHierarchy};
use pacer_linux::ledger::{self, Plan};
use pacer_linux::sched::Tid;
use pacer_linux::trace;
use pacer_model::Duration;
use serde::Serialize;
use serde_json::json;

use crate::analyze::parse_duration;
use crate::table::Table;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
What is checked:
  accounting   every root domain's admitted SCHED_DEADLINE bandwidth (dl_bw->total_bw in \
/sys/kernel/debug/sched/debug) against what its fair servers and SCHED_DEADLINE threads hold. \
A figure below it (even negative) makes the kernel refuse every new reservation with EBUSY; a \
figure above it is leaked bandwidth. A mismatch must persist for --settle to count: the \
kernel keeps an ended reservation's bandwidth until its 0-lag time, usually within one period, \
but a thread that overran a small budget has its deadline postponed by overrun/budget periods \
(1 ms over a 1024 ns / 20 ms budget: about 20 s). A figure above the threads' that goes away \
with a longer --settle was such a grace period, not a leak; repairing during one makes the \
kernel subtract that bandwidth a second time when the grace period ends.
  sessions     ledgers of `pacer exec`/`attach` sessions (/run/pacer/exec-PID.state): threads \
still under a reservation of a session whose pacer and guardian are both gone.
  leftovers    tracefs instances and cpusets of pacer processes that no longer exist.

--repair gives orphaned threads their original scheduling state back, removes the leftovers, \
then rebuilds the root domains (v1 root cpuset sched_load_balance 1→0→1, or a read of \
sched_rt_period_us) so the kernel recounts total_bw from the threads that hold reservations, \
and checks the result. Exit status: 0 healthy (or repaired), 2 problems remain, 1 error. Needs \
root; mounts debugfs at /sys/kernel/debug for the run if it is not mounted.")]
pub struct Args {
    /// Repair what is found (otherwise only report).
    #[arg(long)]
    repair: bool,
    /// How long a mismatch must persist to be reported.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    settle: Duration,
    /// Machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct SessionView {
    ledger: PathBuf,
    pacer_pid: Tid,
    /// `active` (pacer runs), `guarded` (its guardian runs), `orphaned`.
    state: &'static str,
    threads: Vec<(Tid, Plan)>,
}

#[derive(Serialize, Default)]
struct Findings {
    accounting_stable: bool,
    sessions: Vec<SessionView>,
    unreadable_ledgers: Vec<PathBuf>,
    stale_tracefs_instances: Vec<PathBuf>,
    stale_cpusets: Vec<PathBuf>,
    /// rt-app task groups (`pacer run`) whose run was killed before it removed them.
    stale_task_groups: Vec<PathBuf>,
}

fn sessions() -> (Vec<SessionView>, Vec<PathBuf>) {
    let (ledgers, bad) = ledger::list(&ledger::dir());
    let views = ledgers
        .iter()
        .map(|l| SessionView {
            ledger: l.path.clone(),
            pacer_pid: l.pacer.pid,
            state: if l.pacer.alive() {
                "active"
            } else if l.guardian.is_some_and(|g| g.alive()) {
                "guarded"
            } else {
                "orphaned"
            },
            threads: l.plan(),
        })
        .collect();
    (views, bad)
}

fn problems(snap: &Snapshot, f: &Findings) -> Vec<String> {
    let mut out = Vec::new();
    for d in &snap.domains {
        if d.error() != 0 {
            out.push(format!(
                "root domain CPUs {}: total_bw {} where its servers and threads hold {} ({})",
                cpuset::format_cpu_list(&d.cpus),
                d.reported,
                d.expected,
                describe_error(d)
            ));
        }
    }
    for s in &f.sessions {
        let n = s.threads.iter().filter(|(_, p)| *p == Plan::Restore).count();
        if s.state == "orphaned" && n > 0 {
            out.push(format!(
                "session of pacer PID {} is orphaned ({}): {n} thread(s) still under its reservations",
                s.pacer_pid,
                s.ledger.display()
            ));
        } else if s.state == "orphaned" {
            out.push(format!(
                "leftover ledger {} of pacer PID {} (nothing left to restore)",
                s.ledger.display(),
                s.pacer_pid
            ));
        }
    }
    for p in &f.unreadable_ledgers {
        out.push(format!("unreadable ledger {}", p.display()));
    }
    for p in &f.stale_tracefs_instances {
        out.push(format!("leftover tracefs instance {}", p.display()));
    }
    for p in &f.stale_cpusets {
        out.push(format!("leftover cpuset {}", p.display()));
    }
    for p in &f.stale_task_groups {
        out.push(format!("leftover task group {}", p.display()));
    }
    out
}

fn describe_error(d: &Domain) -> String {
    let cpus = d.error() as f64 / (1u64 << 20) as f64;
    if d.error() < 0 {
        format!(
            "{:.4} CPU subtracted twice{}",
            -cpus,
            if d.reported < 0 {
                "; below zero, every new reservation is refused"
            } else {
                ""
            }
        )
    } else {
        format!("{cpus:.4} CPU leaked")
    }
}

fn gather(settle: u64) -> Result<(Snapshot, Findings)> {
    let (snap, stable) = audit::settled(settle, 5).context("pacer doctor")?;
    let (sessions, unreadable_ledgers) = sessions();
    let stale_cpusets = CpusetHierarchy::detect()
        .ok()
        .and_then(|h| h.stale_partitions().ok())
        .unwrap_or_default();
    let stale_task_groups = taskgroup::CpuHierarchy::detect()
        .map(|h| taskgroup::stale_task_groups(&h))
        .unwrap_or_default();
    Ok((
        snap,
        Findings {
            accounting_stable: stable,
            sessions,
            unreadable_ledgers,
            stale_tracefs_instances: trace::stale_instances(),
            stale_cpusets,
            stale_task_groups,
        },
    ))
}

pub fn run(a: Args) -> Result<u8> {
    crate::require_root(
        "pacer doctor",
        "it reads the scheduler's accounting in debugfs and every process's scheduling state",
    )?;
    let settle = a.settle.0.max(1_000_000);
    // Mounted only for this run if it was not: doctor leaves the machine as it found it.
    let _debugfs = cpuset::debugfs_for_now().context("pacer doctor needs root and debugfs")?;
    let (mut snap, mut found) = gather(settle)?;
    let before = problems(&snap, &found);
    let mut actions: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    if a.repair && !before.is_empty() {
        // Threads first, so that the recount below sees their true policies.
        for l in ledger::list(&ledger::dir()).0.iter().filter(|l| l.orphaned()) {
            let r = l.repair();
            actions.push(format!(
                "session of pacer PID {}: restored {} thread(s)",
                l.pacer.pid,
                r.restored.len()
            ));
            failures.extend(r.failed.iter().map(|(t, e)| format!("thread {t}: {e}")));
        }
        for (dir, e) in trace::remove_stale() {
            failures.push(format!("{}: {e}", dir.display()));
        }
        if !found.stale_tracefs_instances.is_empty() {
            actions.push(format!(
                "removed {} tracefs instance(s)",
                found.stale_tracefs_instances.len()
            ));
        }
        if !found.stale_cpusets.is_empty() {
            match cpuset::cleanup_stale() {
                Ok(r) => actions.push(format!(
                    "removed {} cpuset(s), moved {} task(s) back, restored {} knob(s)",
                    r.removed.len(),
                    r.tasks_moved,
                    r.knobs_restored.len()
                )),
                Err(e) => failures.push(e.to_string()),
            }
        }
        if !found.stale_task_groups.is_empty() {
            let removed = taskgroup::CpuHierarchy::detect()
                .map_err(anyhow::Error::from)
                .and_then(|h| Ok(taskgroup::cleanup_stale_task_groups(&h)?));
            match removed {
                Ok(r) => actions.push(format!("removed {} task group(s)", r.len())),
                Err(e) => failures.push(e.to_string()),
            }
        }
        for method in audit::repair(settle, 3).context("pacer doctor --repair")? {
            actions.push(format!(
                "rebuilt the root domains ({})",
                match method {
                    RebuildMethod::LoadBalanceToggle => "root cpuset sched_load_balance 1→0→1",
                    RebuildMethod::RtSysctlRead => "read of sched_rt_period_us",
                }
            ));
        }
        (snap, found) = gather(settle)?;
    }
    let after = problems(&snap, &found);
    let healthy = after.is_empty() && failures.is_empty();
    if a.json {
        let v = json!({
            "healthy": healthy,
            "accounting": snap,
            "findings": found,
            "problems": after,
            "problems_before_repair": if a.repair { Some(&before) } else { None },
            "repairs": actions,
            "failures": failures,
        });
        println!("{}", crate::output::json_text("pacer.doctor/1", &v)?);
    } else {
        print!("{}", render(&snap, &found));
        for act in &actions {
            println!("repaired: {act}");
        }
        for f in &failures {
            println!("failed: {f}");
        }
        if healthy {
            println!(
                "verdict: healthy{}",
                if a.repair && !before.is_empty() {
                    " (repaired)"
                } else {
                    ""
                }
            );
        } else {
            for p in &after {
                println!("problem: {p}");
            }
            println!(
                "verdict: {} problem(s){}",
                after.len() + failures.len(),
                if a.repair {
                    " remain"
                } else {
                    "; `pacer doctor --repair` fixes them"
                }
            );
        }
    }
    Ok(if healthy { 0 } else { 2 })
}

fn bw(v: i64) -> String {
    format!("{v} ({:.4})", v as f64 / (1u64 << 20) as f64)
}

fn render(snap: &Snapshot, f: &Findings) -> String {
    let mut out = String::from("SCHED_DEADLINE accounting (dl_bw->total_bw, 2^20 = one CPU):\n");
    let mut t = Table::new(&[
        "CPUS",
        "TOTAL_BW",
        "EXPECTED",
        "FAIR SERVERS",
        "THREADS",
        "CAP",
        "STATE",
    ]);
    for d in &snap.domains {
        t.push(vec![
            cpuset::format_cpu_list(&d.cpus),
            bw(d.reported),
            bw(d.expected),
            bw(d.fair_servers),
            bw(d.reservations),
            d.cap.map_or("unlimited".into(), bw),
            if d.error() == 0 {
                "ok".into()
            } else {
                describe_error(d)
            },
        ]);
    }
    out.push_str(&t.render());
    if !f.accounting_stable {
        out.push_str("(the figures were still changing: reservations are being set up or torn down)\n");
    }
    if snap.threads.is_empty() {
        out.push_str("SCHED_DEADLINE threads: none\n");
    } else {
        let mut t = Table::new(&["PID", "TID", "NAME", "RUNTIME", "PERIOD", "BANDWIDTH", "CPU"]);
        for th in &snap.threads {
            t.push(vec![
                th.pid.to_string(),
                th.tid.to_string(),
                th.name.clone(), // Table::push escapes it
                Duration(th.runtime_ns).approx(),
                Duration(th.period_ns).approx(),
                format!("{:.4}", th.bw as f64 / (1u64 << 20) as f64),
                th.cpu.to_string(),
            ]);
        }
        out.push_str("SCHED_DEADLINE threads:\n");
        out.push_str(&t.render());
    }
    if f.sessions.is_empty() {
        out.push_str("pacer exec/attach sessions: none\n");
    }
    for s in &f.sessions {
        let restore = s.threads.iter().filter(|(_, p)| *p == Plan::Restore).count();
        out.push_str(&format!(
            "pacer exec/attach session of PID {}: {} ({} thread(s) tracked, {restore} under its reservation) {}\n",
            s.pacer_pid,
            s.state,
            s.threads.len(),
            s.ledger.display()
        ));
    }
    out.push_str(&format!(
        "leftovers: {} tracefs instance(s), {} cpuset(s), {} task group(s)\n",
        f.stale_tracefs_instances.len(),
        f.stale_cpusets.len(),
        f.stale_task_groups.len()
    ));
    out
}
