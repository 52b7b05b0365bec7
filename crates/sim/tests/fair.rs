//! Hand-computed schedules of the fair class (EEVDF, CFS, VT-CFS), the fair server, RT
//! throttling and per-root-domain admission. Times in the comments are milliseconds; "v" is
//! virtual runtime, "V" the load-weighted average of the queue's v, "d" a virtual deadline.

mod support;

use pacer_adapt::{Kernel, KernelError};
use pacer_model::{Duration, Reservation};
use pacer_sim::{CfsTunables, FairModel, JobRecord, Observer, Sim, SimConfig, TraceEvent};
use pacer_workload::{Event, Phase, Policy, ThreadSpec, TimerId, TimerMode, Workload};
use support::run;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// Records who runs on CPU 0 and every finished job.
#[derive(Default)]
struct Schedule {
    /// (time, thread) of each switch on CPU 0; `None` is idle.
    runs: Vec<(u64, Option<u32>)>,
    jobs: Vec<JobRecord>,
}

impl Observer for Schedule {
    fn job(&mut self, r: &JobRecord) {
        self.jobs.push(*r);
    }
    fn event(&mut self, e: &TraceEvent) {
        if let TraceEvent::Switch { t, cpu: 0, next, .. } = e {
            self.runs.push((*t, *next));
        }
    }
    fn wants_events(&self) -> bool {
        true
    }
}

fn thread(name: &str, policy: Policy, events: Vec<Event>) -> ThreadSpec {
    ThreadSpec {
        name: name.into(),
        policy,
        affinity: Some(vec![0]),
        start_delay: Duration::ZERO,
        phases: vec![Phase::new(1, events)],
        loops: None,
        cooperative: false,
        job_deadline: None,
        ..Default::default()
    }
}

/// A CPU hog: 1 s of work per pass, forever.
fn hog(name: &str, policy: Policy) -> ThreadSpec {
    thread(name, policy, vec![run(1000)])
}

/// A periodic thread: `c` of work every `t` (absolute timer), released at `start`.
fn periodic(name: &str, policy: Policy, timer: usize, c: Event, t: u64, start: u64) -> ThreadSpec {
    let mut th = thread(
        name,
        policy,
        vec![
            c,
            Event::Timer {
                timer: TimerId(timer),
                period: Duration(t),
                mode: TimerMode::Absolute,
            },
        ],
    );
    th.start_delay = Duration(start);
    th
}

fn other(nice: i32) -> Policy {
    Policy::Other { nice }
}

/// Two CPUs (so the kernel's tunables scale by 2), tick 4 ms at phase 0.
fn cfg(fair: Option<FairModel>) -> SimConfig {
    let mut c = SimConfig::new(2);
    c.fair = fair;
    c.tick_phase = Some(0);
    c
}

fn simulate(threads: Vec<ThreadSpec>, cfg: SimConfig, horizon: u64) -> Schedule {
    let mut sim = Sim::new(
        Workload {
            threads,
            duration: None,
            ignored: vec![],
            ..Default::default()
        },
        cfg,
    )
    .unwrap();
    let mut s = Schedule::default();
    sim.run_until(horizon, &mut s);
    s
}

/// The switches on CPU 0 as (ms, thread).
fn switches(s: &Schedule) -> Vec<(u64, Option<u32>)> {
    s.runs.iter().map(|&(t, th)| (t / MS, th)).collect()
}

/// CPU time each thread got on CPU 0 up to `horizon`, from the switch log.
fn shares(s: &Schedule, threads: usize, horizon: u64) -> Vec<u64> {
    let mut got = vec![0; threads];
    for w in s.runs.windows(2) {
        if let (t0, Some(th)) = w[0] {
            got[th as usize] += w[1].0 - t0;
        }
    }
    if let Some(&(t0, Some(th))) = s.runs.last() {
        got[th as usize] += horizon - t0;
    }
    got
}

#[test]
fn eevdf_two_hogs_of_different_nice() {
    // Base slice 1.4 (0.7 · 2 on 2 CPUs); A nice 0 (w 1024), B nice 5 (w 335).
    // t=0: A placed at v 0, d 0.7 (half a slice when new); B at v 0, d 2.14 (1.4·1024/335/2).
    //   A has the earlier deadline and runs; protected to d, noticed at the tick 4.
    // t=4: vA 4, d 5.4. V = (1024·4 + 335·0)/1359 = 3.01: A is not eligible → B.
    // t=8: B ran 4 → vB 12.23. V = (4096 + 4096)/1359 = 6.03: A eligible, B not → A.
    // t=12, 16: A stays eligible (V 9.04 ≥ 8, 12.06 ≥ 12) and B is not → A keeps running.
    // t=20: vA 16 > V 15.07 → B. t=24: vB 24.45 > V 18.08 → A.
    let s = simulate(vec![hog("A", other(0)), hog("B", other(5))], cfg(None), 25 * MS);
    assert_eq!(
        switches(&s),
        vec![
            (0, Some(0)),
            (4, Some(1)),
            (8, Some(0)),
            (20, Some(1)),
            (24, Some(0))
        ]
    );
    // Over a long run the shares follow the weights: 1024 : 335.
    let h = 10_000 * MS;
    let s = simulate(vec![hog("A", other(0)), hog("B", other(5))], cfg(None), h);
    let got = shares(&s, 2, h);
    let a = got[0] as f64 / h as f64;
    assert!((a - 1024.0 / 1359.0).abs() < 0.01, "A's share {a}");
}

#[test]
fn cfs_two_hogs_of_different_nice() {
    // Linux's CFS tunables on 2 CPUs: latency 12, min_granularity 1.5, wakeup_granularity 2.
    // START_DEBIT: A starts at min_vruntime + its vslice = 12; B (alone with A running) at
    //   12 + 12·335/1359·1024/335 = 21.04. A's slice 12·1024/1359 = 9.04, B's 2.96.
    // A runs until the first tick past its slice (12), then B (v 21.04 < vA 24) for one tick
    //   (4 > 2.96), then A (vA 24 < vB 33.3) for three ticks, and so on: 12 : 4.
    let c = cfg(Some(FairModel::Cfs(CfsTunables::linux(2))));
    let s = simulate(vec![hog("A", other(0)), hog("B", other(5))], c, 49 * MS);
    assert_eq!(
        switches(&s),
        vec![
            (0, Some(0)),
            (12, Some(1)),
            (16, Some(0)),
            (28, Some(1)),
            (32, Some(0)),
            (44, Some(1)),
            (48, Some(0))
        ]
    );
}

/// Wake-up to start delays of thread `t`'s jobs.
fn delays(s: &Schedule, t: u32) -> Vec<u64> {
    s.jobs
        .iter()
        .filter(|j| j.thread == t)
        .map(|j| j.start - j.release)
        .collect()
}

/// The delays after the first job (a new thread's start is placed differently).
fn wakeup_delays(s: &Schedule, t: u32) -> Vec<u64> {
    delays(s, t).into_iter().skip(1).collect()
}

#[test]
fn eevdf_places_a_waking_thread_by_its_lag() {
    // One hog alone runs from 0. A thread that slept since 0 wakes at 10 with lag 0 (new:
    // v = V, d = V + 0.7): the hog, past its protection (its deadline passed at 0.7 and was
    // renewed only by the update at the wake-up), has d = 10 + 1.4 > the woken's; the woken
    // preempts at once.
    let w = periodic("w", other(0), 0, run(1), 50 * MS, 10 * MS);
    let s = simulate(vec![hog("hog", other(0)), w], cfg(None), 12 * MS);
    assert_eq!(delays(&s, 1), vec![0]);
    assert_eq!(switches(&s)[..3], [(0, Some(0)), (10, Some(1)), (11, Some(0))]);
}

#[test]
fn eevdf_custom_slice_preempts_a_protected_hog() {
    // Two hogs: h1 runs 4–8 (new, d 0.7); at 8 both have v 4 and d 5.4, and h0 is picked,
    // protected to v 5.4 (wall 9.4). A thread waking at 8.5 is placed at V = 4.25. With a 0.1
    // custom slice (d = 4.25 + 0.05) it preempts at once (PREEMPT_SHORT); with the base slice
    // (d 4.95, still earlier than h0's) it waits for the first tick after the protection, 12.
    for (slice, delay) in [(Some(100 * US), 0), (None, 3500 * US)] {
        let hogs = vec![hog("h0", other(0)), hog("h1", other(0))];
        let mut threads = hogs;
        threads.push(periodic("w", other(0), 0, run(1), 100 * MS, 8 * MS + 500 * US));
        let mut sim = Sim::new(
            Workload {
                threads,
                duration: None,
                ignored: vec![],
                ..Default::default()
            },
            cfg(None),
        )
        .unwrap();
        if let Some(s) = slice {
            sim.set_fair_slice(2, Some(s)).unwrap();
        }
        let mut s = Schedule::default();
        sim.run_until(20 * MS, &mut s);
        assert_eq!(delays(&s, 2), vec![delay], "slice {slice:?}");
    }
}

#[test]
fn vt_cfs_bounds_the_wakeup_latency_by_the_preemption_tick() {
    // Under CFS a heavy hog (nice −12, slice ≈ 6) keeps a waking nice-0 thread waiting. VT-CFS
    // places the woken just after the smallest v (eq. 7): the running thread keeps the CPU for
    // at most one preemption tick (plus a scheduler tick to notice); when the smallest v was a
    // queued thread's, that one runs a preemption tick first, and a thread whose v lies within
    // eq. 7's offset (T·ω₀/ω₋₂₀, 11.5 µs) of the smallest may too: at most three turns.
    let threads = || {
        let mut v = vec![hog("heavy", other(-12))];
        for i in 0..4 {
            v.push(hog(&format!("h{i}"), other(0)));
        }
        v.push(periodic("ui", other(0), 0, run(2), 47 * MS, 3 * MS));
        v
    };
    let h = 2000 * MS;
    let vt = FairModel::VtCfs {
        cfs: CfsTunables::android(),
        preemption_tick: 4 * MS,
    };
    let mut c = cfg(Some(vt));
    c.tick_ns = MS;
    let s = simulate(threads(), c, h);
    let d = wakeup_delays(&s, 5);
    assert!(d.len() > 30);
    let worst = *d.iter().max().unwrap();
    let mean = d.iter().sum::<u64>() / d.len() as u64;
    assert!(
        worst <= 3 * (4 * MS + MS),
        "VT-CFS worst wake-up delay {worst} ns"
    );
    let mut c = cfg(Some(FairModel::Cfs(CfsTunables::android())));
    c.tick_ns = MS;
    let s = simulate(threads(), c, h);
    let dc = wakeup_delays(&s, 5);
    let worst_cfs = *dc.iter().max().unwrap();
    let mean_cfs = dc.iter().sum::<u64>() / dc.len() as u64;
    eprintln!("wake-up delay mean / max: VT-CFS {mean} / {worst} ns, CFS {mean_cfs} / {worst_cfs} ns");
    assert!(worst_cfs > worst, "CFS {worst_cfs} vs VT-CFS {worst}");
}

#[test]
fn boosting_raises_the_weight_at_wake_up() {
    // Eq. 6 with C = 10 on CFS (Android tunables): W' = C·ΣW/P; the boosted job of 3 gets
    // through its work in fewer turns than the unboosted one beside 4 hogs.
    let job = |boost: bool| {
        let mut ev = vec![];
        if boost {
            ev.push(Event::Boost {
                budget: Duration::from_ms(10),
            });
        }
        ev.push(run(3));
        ev.push(Event::Timer {
            timer: TimerId(0),
            period: Duration::from_ms(100),
            mode: TimerMode::Absolute,
        });
        let mut th = thread("ui", other(0), ev);
        th.start_delay = Duration::from_ms(5);
        th
    };
    let resp = |boost: bool| {
        let mut v: Vec<_> = (0..4).map(|i| hog(&format!("h{i}"), other(0))).collect();
        v.push(job(boost));
        let s = simulate(v, cfg(Some(FairModel::Cfs(CfsTunables::android()))), 2000 * MS);
        let r: Vec<u64> = s
            .jobs
            .iter()
            .filter(|j| j.thread == 4)
            .map(|j| j.finish - j.release)
            .collect();
        r.iter().sum::<u64>() / r.len() as u64
    };
    let (plain, boosted) = (resp(false), resp(true));
    assert!(boosted < plain, "boosted {boosted} vs plain {plain}");
}

#[test]
fn the_fair_server_gives_a_starved_fair_thread_50ms_per_second() {
    // A SCHED_FIFO hog and a fair hog on one CPU. The deferred server waits for its zero-laxity
    // time (950), then runs the fair thread for its 50 ms, and then 50 ms at the start of each
    // of its periods.
    let threads = vec![hog("fifo", Policy::Fifo { priority: 50 }), hog("other", other(0))];
    let h = 5000 * MS;
    let s = simulate(threads.clone(), cfg(None), h);
    let got = shares(&s, 2, h);
    assert_eq!(got[1], 250 * MS, "fair time {}", got[1]);
    let first = s.runs.iter().find(|r| r.1 == Some(1)).unwrap().0;
    assert_eq!(first, 950 * MS);
    // Without the server (Linux < 6.12, no RT throttling) the fair hog starves.
    let mut c = cfg(None);
    c.fair_server = None;
    let s = simulate(threads, c, h);
    assert_eq!(shares(&s, 2, h)[1], 0);
}

#[test]
fn rt_throttling_leaves_5_percent() {
    // RT throttling (CONFIG_RT_GROUP_SCHED) without the fair server: the rt class runs 950 ms
    // of each 1 s period, the fair hog the remaining 50 ms.
    let threads = vec![hog("fifo", Policy::Fifo { priority: 50 }), hog("other", other(0))];
    let mut c = cfg(None);
    c.fair_server = None;
    c.rt_throttling = true;
    let h = 5000 * MS;
    let s = simulate(threads, c, h);
    let got = shares(&s, 2, h);
    let fifo = got[0] as f64 / h as f64;
    assert!((fifo - 0.95).abs() < 0.002, "rt share {fifo}");
    // The fair thread first runs when the rt class is throttled, just after 950.
    let first = s.runs.iter().find(|r| r.1 == Some(1)).unwrap().0;
    assert!((950 * MS..951 * MS).contains(&first), "first fair run at {first}");
}

#[test]
fn admission_is_per_root_domain() {
    // Two threads pinned to CPU 0 and one to CPU 1: two root domains of one CPU, each with
    // 0.95 − 0.05 (its fair server) = 0.9 for tasks. Two 0.5 reservations on CPU 0 exceed it,
    // though the platform as a whole (1.8) would hold them.
    let sleeper = |name: &str, cpu: usize| {
        let mut t = thread(
            name,
            other(0),
            vec![Event::Sleep {
                duration: Duration::from_ms(100),
            }],
        );
        t.affinity = Some(vec![cpu]);
        t
    };
    let w = Workload {
        threads: vec![sleeper("a", 0), sleeper("b", 0), sleeper("c", 1)],
        duration: None,
        ignored: vec![],
        ..Default::default()
    };
    let mut sim = Sim::new(w, cfg(None)).unwrap();
    sim.run_until(MS, &mut Schedule::default());
    let mut k = sim.kernel();
    assert!((k.dl_bandwidth_limit(Some(0)) - 0.9).abs() < 1e-3);
    assert!((k.dl_bandwidth_limit(None) - 1.8).abs() < 1e-3);
    let half = Policy::Deadline(Reservation::new(
        Duration::from_ms(5),
        Duration::from_ms(10),
        Duration::from_ms(10),
    ));
    k.set_policy(0, half).unwrap();
    assert!(matches!(k.set_policy(1, half), Err(KernelError::Admission(_))));
    // The other domain still has its own 0.9.
    k.set_policy(2, half).unwrap();
}

/// SCHED_BATCH (`check_preempt_wakeup_fair()`: "batch and idle tasks do not preempt non-idle
/// tasks"): a periodic thread waking beside a hog starts at once under SCHED_OTHER, which
/// preempts the hog (its lag is positive after a sleep), and only at a tick or slice end under
/// SCHED_BATCH.
#[test]
fn a_waking_batch_thread_does_not_preempt() {
    let start_delays = |policy: Policy| {
        let threads = vec![
            hog("hog", other(0)),
            periodic("p", policy, 0, run(1), 20 * MS, 10 * MS + 500 * US),
        ];
        let s = simulate(threads, cfg(None), 400 * MS);
        let d: Vec<u64> = s
            .jobs
            .iter()
            .filter(|j| j.thread == 1)
            .map(|j| j.start - j.release)
            .collect();
        assert!(d.len() >= 15, "{d:?}");
        d
    };
    let other_d = start_delays(other(0));
    let batch_d = start_delays(Policy::Batch { nice: 0 });
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    // SCHED_OTHER wakes onto the CPU as its timer fires, its timer slack after the release;
    // SCHED_BATCH waits for the next tick, where the hog's used-up slice is noticed (ticks
    // every 4 ms from 0; releases at 10.5 + 20k ms, so the tick at 12 + 20k ms: 1.5 ms).
    assert_eq!(median(other_d), pacer_sim::DEFAULT_TIMER_SLACK_NS);
    assert_eq!(median(batch_d), 1500 * US);
}

/// Utilisation clamps are not modelled: the simulator refuses them rather than run a workload
/// whose frequencies would differ on Linux. (Task groups are simulated: tests/taskgroups.rs.)
#[test]
fn clamps_are_refused_not_ignored() {
    let mut t = hog("t", other(0));
    t.util_min = Some(512);
    let w = Workload {
        threads: vec![t],
        ..Default::default()
    };
    let e = Sim::new(w, cfg(None)).err().expect("refused").to_string();
    assert!(e.contains("not simulated"), "{e}");
    // At phase level too.
    let mut t = hog("t", other(0));
    t.phases[0].util_max = Some(512);
    let w = Workload {
        threads: vec![t],
        ..Default::default()
    };
    let e = Sim::new(w, cfg(None)).err().expect("refused").to_string();
    assert!(e.contains("not simulated"), "{e}");
}

/// `nodes_membind`: the simulated machine has one memory node, so a binding to node 0 changes
/// nothing and runs; one naming another node (thread or phase level) is refused.
#[test]
fn memory_binding_to_node_0_only() {
    let run = |thread: Option<Vec<u32>>, phase: Option<Vec<u32>>| {
        let mut t = hog("t", other(0));
        t.membind = thread;
        t.phases[0].membind = phase;
        let w = Workload {
            threads: vec![t],
            ..Default::default()
        };
        Sim::new(w, cfg(None)).err().map(|e| e.to_string())
    };
    assert_eq!(run(Some(vec![0]), Some(vec![0])), None);
    for (thread, phase) in [(Some(vec![0, 1]), None), (None, Some(vec![2]))] {
        let e = run(thread, phase).expect("refused");
        assert!(e.contains("one memory node"), "{e}");
    }
}

/// The kernel accounts a running entity at every tick (`task_tick_fair()` → `update_curr()`),
/// renewing its deadline there once v reached it, even when it runs alone. A hog alone on CPU 0
/// since 0 had its deadline renewed at the tick of 20 to v(20) + 1.4. A new thread starting at
/// 21 gets half a slice: d = V + 0.7 = v(20) + 1.7, later than the hog's, so it waits for the
/// tick at 24. Starting at 22 it finds the hog's deadline passed (v(20) + 2): renewed to
/// v(20) + 3.4, later than its own v(20) + 2.7, so it preempts at once.
#[test]
fn a_waking_thread_meets_the_deadline_the_last_tick_gave_the_running_one() {
    let start = |at_us: u64| {
        let mut t = thread("t", other(0), vec![run(1)]);
        t.start_delay = Duration::from_us(at_us);
        t.loops = Some(1);
        let s = simulate(vec![hog("hog", other(0)), t], cfg(None), 40 * MS);
        s.jobs.iter().find(|j| j.thread == 1).unwrap().start / US
    };
    assert_eq!(start(21_000), 24_000);
    assert_eq!(start(22_000), 22_000);
}
