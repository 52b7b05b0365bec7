//! The adaptive-reservation controller of lfspp-legacy-multimedia.txt §7.3
//! (`pacer_adapt::JobController`) in a closed loop on the real kernel: a worker thread of this
//! process runs jobs on an absolute 20 ms grid and reports each job's begin and end (CPU time
//! and SCHED_DEADLINE state, read by the worker itself with
//! `pacer_linux::dlstate::DlStateReader`) to a control thread, as a cooperating client reports
//! to the daemon. The control thread hosts the controller over `LinuxKernel`, which reserves
//! Q = (1 + x)·𝒫 every 20 ms at each job end. The job cost steps from 2 ms to 6 ms of CPU after
//! 50 jobs; after the first 10 jobs of each regime, fewer than 1 % of the jobs may end past
//! their release + 20 ms (issue 14).
//!
//! The controller runs without GRUB reclaiming: the two jobs after the step overrun the 2 ms
//! budget and are throttled; CBS postpones the thread's deadline, and since the thread is never
//! idle again until it has caught up, a budget just above the new cost would drain the backlog
//! by only Q − C = x·C ≈ 0.9 ms per period (24 of the 130 counted jobs missed on this VM before
//! the controller learnt to catch up). The controller now gives an overrunning thread its
//! ceiling until a job fits its prediction again, and no counted job misses.
//! `PACER_JOB_RECLAIM=1` runs it with SCHED_FLAG_RECLAIM (GRUB) as the daemon's job sessions do. Needs root (`pacer_testkit`: ignored in builds without root
//! or `PACER_REQUIRE_ROOT=1`).

use std::sync::mpsc;

use pacer_adapt::controller::{JobConfig, JobController, ThreadOptions};
use pacer_adapt::{AppEvent, Controller};
use pacer_linux::audit;
use pacer_linux::dlstate::DlStateReader;
use pacer_linux::kernel::LinuxKernel;
use pacer_linux::sched::{self, gettid, ThreadSched, SCHED_DEADLINE};
use pacer_testkit::{require, Need};

mod support;
use support::{burn, now, sleep_until, total_bw, MS};

const PERIOD: u64 = 20 * MS;
const JOBS: usize = 150;
const STEP_AT: usize = 50;
/// Jobs at the start of each regime the controller may use to learn it.
const LEARNING: usize = 10;

enum Msg {
    Event(AppEvent),
    /// The worker's last job is done; it waits for the reply before exiting.
    Done(mpsc::Sender<()>),
}

/// One job as the worker saw it.
#[derive(Debug, Clone, Copy)]
struct Job {
    release: u64,
    end: u64,
    cpu: u64,
    reserved: bool,
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn job_controller_keeps_deadlines_through_a_cost_step() {
    require(Need::Root);
    require(Need::SchedDeadline);
    require(Need::SchedDebug);
    let test = "job_controller_keeps_deadlines_through_a_cost_step";
    let (baseline, _) = total_bw();
    let (tx, rx) = mpsc::channel::<Msg>();
    let (tid_tx, tid_rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let reader = DlStateReader::open_self().expect("own sched file");
        let me = gettid();
        tid_tx.send(me).unwrap();
        let start = now() + 50 * MS;
        let mut jobs = Vec::with_capacity(JOBS);
        for k in 0..JOBS {
            let release = start + k as u64 * PERIOD;
            sleep_until(release);
            let (c0, dl) = reader.read_own().expect("own state");
            let _ = tx.send(Msg::Event(AppEvent::JobBegin {
                thread: me,
                t: now(),
                dl,
                cpu_time: c0,
            }));
            burn(if k < STEP_AT { 2 * MS } else { 6 * MS });
            let (c1, dl_end) = reader.read_own().expect("own state");
            let end = now();
            let _ = tx.send(Msg::Event(AppEvent::JobEnd {
                thread: me,
                t: end,
                dl: dl_end,
                cpu_time: c1,
            }));
            jobs.push(Job {
                release,
                end,
                cpu: c1 - c0,
                reserved: dl.is_some(),
            });
        }
        let (back_tx, back_rx) = mpsc::channel();
        let _ = tx.send(Msg::Done(back_tx));
        // Released by the controller while alive (and asleep here).
        let _ = back_rx.recv();
        let after = sched::get_attr(0).map(|a| a.sched_policy);
        (jobs, after)
    });
    let tid = tid_rx.recv().unwrap();

    // The control thread: the controller over the real kernel, fed the worker's events.
    let mut k = LinuxKernel::for_process(std::process::id());
    let cfg = JobConfig {
        reclaim: std::env::var_os("PACER_JOB_RECLAIM").is_some(),
        ..JobConfig::default()
    };
    let mut ctl = JobController::new(cfg.clone()).expect("controller");
    ctl.add_thread(tid, PERIOD, ThreadOptions::default())
        .expect("thread");
    assert_eq!(ctl.period(), None, "event-driven: no tick");
    let mut budgets = Vec::new();
    let mut peak_bw = baseline;
    let mut reserved_seen = None;
    let mut released = Vec::new();
    let mut final_status = None;
    for msg in rx.iter() {
        match msg {
            Msg::Event(ev) => {
                ctl.on_app_event(&ev, &mut k);
                if let AppEvent::JobEnd { .. } = ev {
                    let st = ctl.thread_status(tid).expect("status");
                    budgets.push(st.budget_ns);
                    if budgets.len() == STEP_AT + 5 {
                        // Mid-run, the reservation is visible in the kernel's accounting.
                        peak_bw = total_bw().0;
                        reserved_seen = audit::dl_threads()
                            .into_iter()
                            .find(|t| t.tid == tid)
                            .map(|t| t.runtime_ns);
                    }
                }
            }
            Msg::Done(back) => {
                // Release takes the thread out of the controller: its status first.
                final_status = ctl.thread_status(tid);
                released = ctl.release(&mut k);
                let _ = back.send(());
                break;
            }
        }
    }
    let (jobs, after) = worker.join().expect("worker");
    let status = final_status.expect("status");
    let (end_bw, consistent) = total_bw();

    let late = |range: std::ops::Range<usize>| -> Vec<usize> {
        range
            .filter(|&j| jobs[j].end > jobs[j].release + PERIOD)
            .collect()
    };
    let learning_misses = late(0..LEARNING).len() + late(STEP_AT..STEP_AT + LEARNING).len();
    let misses: Vec<usize> = late(LEARNING..STEP_AT)
        .into_iter()
        .chain(late(STEP_AT + LEARNING..JOBS))
        .collect();
    let counted = JOBS - 2 * LEARNING;
    let response = |range: std::ops::Range<usize>| {
        let mut v: Vec<u64> = range.map(|j| jobs[j].end - jobs[j].release).collect();
        v.sort_unstable();
        (v[v.len() / 2], v[v.len() * 9 / 10], v[v.len() - 1])
    };
    let budget_at = |j: usize| budgets[j].map_or(0.0, |b| b as f64 / 1e6);
    let (m1, p1, x1) = response(LEARNING..STEP_AT);
    let (m2, p2, x2) = response(STEP_AT + LEARNING..JOBS);
    eprintln!(
        "{test}: JobConfig history {} percentile {} spread {} reclaim {}; budgets: job 5 {:.3} ms, job 49 {:.3} ms, \
         job 51 {:.3} ms, job 52 {:.3} ms, job 149 {:.3} ms; overruns {}, refusals {}",
        cfg.history,
        cfg.percentile,
        cfg.spread,
        cfg.reclaim,
        budget_at(5),
        budget_at(49),
        budget_at(51),
        budget_at(52),
        budget_at(149),
        status.overruns,
        status.admission_refusals
    );
    eprintln!(
        "{test}: 2 ms regime: response median {:.2} ms p90 {:.2} ms max {:.2} ms; 6 ms regime: \
         median {:.2} ms p90 {:.2} ms max {:.2} ms",
        m1 as f64 / 1e6,
        p1 as f64 / 1e6,
        x1 as f64 / 1e6,
        m2 as f64 / 1e6,
        p2 as f64 / 1e6,
        x2 as f64 / 1e6
    );
    eprintln!(
        "{test}: deadline misses: {} of {counted} after the first {LEARNING} jobs of each regime \
         (jobs {misses:?}); {learning_misses} while learning; jobs reserved from #{}; \
         total_bw {baseline} -> {peak_bw} (job 55) -> {end_bw} (matches the reserved threads: {consistent})",
        misses.len(),
        jobs.iter().position(|j| j.reserved).unwrap_or(JOBS)
    );
    let median_cpu = |range: std::ops::Range<usize>| {
        let mut v: Vec<u64> = range.map(|j| jobs[j].cpu).collect();
        v.sort_unstable();
        v[v.len() / 2]
    };
    eprintln!(
        "{test}: job CPU time median {:.3} ms then {:.3} ms",
        median_cpu(0..STEP_AT) as f64 / 1e6,
        median_cpu(STEP_AT..JOBS) as f64 / 1e6
    );

    assert!(released.iter().all(|(_, r)| r.is_ok()), "{released:?}");
    assert_eq!(after.ok(), Some(sched::SCHED_OTHER), "released to SCHED_OTHER");
    assert_eq!(
        ThreadSched::read(tid)
            .ok()
            .filter(|s| s.attr.sched_policy == SCHED_DEADLINE),
        None,
        "nothing left reserved"
    );
    assert!(
        jobs.iter().skip(LEARNING).all(|j| j.reserved),
        "every job after the first ones ran under the reservation"
    );
    assert_eq!(
        reserved_seen,
        budgets[STEP_AT + 4],
        "mid-run the kernel holds the controller's budget"
    );
    assert!(
        misses.len() * 100 < counted,
        "{} deadline misses of {counted} jobs (≥ 1 %): {misses:?}",
        misses.len()
    );
    assert!(
        consistent,
        "total_bw {end_bw} is not what the reserved threads hold: leaked"
    );
    // The budget followed the step: ~(1 + x)·2 ms before it, ~(1 + x)·6 ms after.
    assert!(budget_at(49) < 3.0 && budget_at(149) > 6.0, "{budgets:?}");
}
