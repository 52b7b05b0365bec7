//! The VT-CFS paper's experiments (vt-cfs-interactivity-android.txt §VI) on the simulator: the
//! response time of an interactive task against background hogs with and without
//! framework-assisted boosting (Fig. 6), and Interbench-style scheduling latency of simulated
//! interactive tasks under background loads (Fig. 7), each under CFS (the paper's Android
//! tunables), CFS with boosting (eq. 6), VT-CFS (eq. 7 and the preemption tick) and EEVDF (what
//! Linux runs since 6.6).
//!
//! Everything runs on one CPU with nice-0 threads, as the paper's tasks; the paper's board was a
//! dual-core Cortex-A9 with Android 2.2, so its absolute figures are not expected here. The models
//! of the paper's workloads are ours:
//! - the painting application handles a touch as 30 bursts of 3 ms of work separated by 1 ms I/O
//!   waits (binder round trips), 90 ms of CPU per touch, one touch per second; with two hogs its
//!   response time is close to the paper's 275.9 ms under CFS;
//! - Interbench's Audio is 2.5 ms every 50 ms (5 %), Video 6.67 ms every 16.67 ms (40 %), X a
//!   burst uniform in [0, 10] ms every 10 ms (0–100 %); background Burn is four hogs, Video and X
//!   the same tasks as background. Gaming (100 % CPU, never sleeping) and Memload are left out:
//!   the first has no wake-ups whose latency eq. 7 could change, the second needs a memory model.

use pacer_model::{Duration, Policy};
use pacer_workload::{Event, Phase, ThreadSpec, TimerId, TimerMode, Work, Workload};
use serde::Serialize;

use crate::class::fair::{CfsTunables, FairModel};
use crate::{JobRecord, Observer, Sim, SimConfig};

const MS: u64 = 1_000_000;

/// A scheduler configuration of the experiments.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Setup {
    pub name: &'static str,
    #[serde(skip)]
    pub fair: FairModel,
    /// Framework-assisted boosting with this C (ns).
    pub boost_ns: Option<u64>,
}

/// Scheduler tick of the experiments: 1 ms, so that VT-CFS's preemption ticks of 3 ms are whole
/// ticks (the paper's kernel tick is not stated).
pub const TICK_NS: u64 = MS;

/// The configurations of Fig. 6: CFS, CFS boosted with C = 3 and 10 ms, VT-CFS boosted with the
/// same, and EEVDF.
pub fn fig6_setups() -> Vec<Setup> {
    let cfs = FairModel::Cfs(CfsTunables::android());
    let vt = vt_cfs(3 * MS);
    vec![
        Setup {
            name: "cfs",
            fair: cfs,
            boost_ns: None,
        },
        Setup {
            name: "cfs+boost(C=3ms)",
            fair: cfs,
            boost_ns: Some(3 * MS),
        },
        Setup {
            name: "cfs+boost(C=10ms)",
            fair: cfs,
            boost_ns: Some(10 * MS),
        },
        Setup {
            name: "vt-cfs+boost(C=3ms)",
            fair: vt,
            boost_ns: Some(3 * MS),
        },
        Setup {
            name: "vt-cfs+boost(C=10ms)",
            fair: vt,
            boost_ns: Some(10 * MS),
        },
        Setup {
            name: "eevdf",
            fair: FairModel::eevdf(1),
            boost_ns: None,
        },
    ]
}

/// The configurations of Fig. 7: CFS, VT-CFS (preemption tick 3 ms), and EEVDF.
pub fn fig7_setups() -> Vec<Setup> {
    vec![
        Setup {
            name: "cfs",
            fair: FairModel::Cfs(CfsTunables::android()),
            boost_ns: None,
        },
        Setup {
            name: "vt-cfs",
            fair: vt_cfs(3 * MS),
            boost_ns: None,
        },
        Setup {
            name: "eevdf",
            fair: FairModel::eevdf(1),
            boost_ns: None,
        },
    ]
}

fn vt_cfs(preemption_tick: u64) -> FairModel {
    FairModel::VtCfs {
        cfs: CfsTunables::android(),
        preemption_tick,
    }
}

fn spec(name: &str, events: Vec<Event>, start: u64) -> ThreadSpec {
    ThreadSpec {
        name: name.into(),
        policy: Policy::Other { nice: 0 },
        affinity: Some(vec![0]),
        start_delay: Duration(start),
        phases: vec![Phase::new(1, events)],
        loops: None,
        cooperative: false,
        job_deadline: None,
        ..Default::default()
    }
}

fn run(work: Work) -> Event {
    Event::Run { work }
}

fn fixed(ns: u64) -> Work {
    Work::Fixed { ns: Duration(ns) }
}

fn timer(id: usize, period: u64) -> Event {
    Event::Timer {
        timer: TimerId(id),
        period: Duration(period),
        mode: TimerMode::Absolute,
    }
}

fn hogs(n: usize) -> Vec<ThreadSpec> {
    (0..n)
        .map(|i| spec(&format!("hog{i}"), vec![run(fixed(1000 * MS))], 0))
        .collect()
}

/// The painting application: per touch (every second) 30 bursts of 3 ms with 1 ms waits.
fn painting(boost: Option<u64>) -> ThreadSpec {
    let mut ev = Vec::new();
    if let Some(c) = boost {
        ev.push(Event::Boost { budget: Duration(c) });
    }
    for _ in 0..30 {
        ev.push(run(fixed(3 * MS)));
        ev.push(Event::Sleep {
            duration: Duration(MS),
        });
    }
    ev.push(timer(0, 1000 * MS));
    // Touches start after the hogs have run a while.
    spec("paint", ev, 100 * MS + 300_000)
}

/// An Interbench simulated task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Load {
    None,
    Audio,
    Video,
    X,
    Burn,
}

impl Load {
    pub fn name(self) -> &'static str {
        match self {
            Load::None => "none",
            Load::Audio => "audio",
            Load::Video => "video",
            Load::X => "x",
            Load::Burn => "burn",
        }
    }

    /// The threads of this load; `timer` is the first timer id it may use.
    fn threads(self, prefix: &str, timer_id: usize, start: u64) -> Vec<ThreadSpec> {
        let periodic =
            |work: Work, period: u64| vec![spec(prefix, vec![run(work), timer(timer_id, period)], start)];
        match self {
            Load::None => vec![],
            Load::Audio => periodic(fixed(2_500_000), 50 * MS),
            Load::Video => periodic(fixed(6_666_667), 16_666_667),
            Load::X => periodic(
                Work::Uniform {
                    min: Duration(0),
                    max: Duration(10 * MS),
                },
                10 * MS,
            ),
            Load::Burn => hogs(4),
        }
    }
}

/// Response time of the painting application for one setup and number of hogs.
#[derive(Debug, Clone, Serialize)]
pub struct Fig6Point {
    pub setup: &'static str,
    pub hogs: usize,
    pub touches: usize,
    pub mean_response_ns: u64,
    pub max_response_ns: u64,
}

/// Scheduling latency of one interactive task under one background load and setup.
#[derive(Debug, Clone, Serialize)]
pub struct Fig7Point {
    pub setup: &'static str,
    pub interactive: Load,
    pub background: Load,
    pub jobs: usize,
    pub late_jobs: usize,
    pub mean_latency_ns: u64,
    pub max_latency_ns: u64,
}

#[derive(Default)]
struct Collect(Vec<JobRecord>);
impl Observer for Collect {
    fn job(&mut self, r: &JobRecord) {
        self.0.push(*r);
    }
}

fn simulate(threads: Vec<ThreadSpec>, fair: FairModel, horizon: u64, seed: u64) -> Vec<JobRecord> {
    let mut cfg = SimConfig::new(1);
    cfg.fair = Some(fair);
    cfg.tick_ns = TICK_NS;
    cfg.tick_phase = Some(0);
    cfg.seed = seed;
    // The figures of docs/experiments/vt-cfs.md were made before timer slack was modelled.
    // With the kernel's 50 µs every latency of Fig. 7 grows by 0.05 ms and some means of
    // Fig. 6 move by up to 16 % (a different interleaving); kept at 0 so they reproduce.
    cfg.timer_slack = 0;
    let w = Workload {
        threads,
        duration: None,
        ignored: vec![],
        ..Default::default()
    };
    let mut sim = Sim::new(w, cfg).expect("the experiments' workloads are valid");
    let mut c = Collect::default();
    sim.run_until(horizon, &mut c);
    c.0
}

/// Fig. 6: the painting application's mean and worst response time per touch beside `hogs`
/// background hogs, over `seconds` of simulated time.
pub fn fig6_point(setup: &Setup, hogs_n: usize, seconds: u64) -> Fig6Point {
    let mut threads = hogs(hogs_n);
    threads.push(painting(setup.boost_ns));
    let paint = threads.len() as u32 - 1;
    let jobs = simulate(threads, setup.fair, seconds * 1000 * MS, 1);
    let r: Vec<u64> = jobs
        .iter()
        .filter(|j| j.thread == paint)
        .map(|j| j.finish - j.release)
        .collect();
    Fig6Point {
        setup: setup.name,
        hogs: hogs_n,
        touches: r.len(),
        mean_response_ns: r.iter().sum::<u64>() / r.len().max(1) as u64,
        max_response_ns: r.iter().copied().max().unwrap_or(0),
    }
}

/// Fig. 7: the latency (release to start) of the wake-ups of `interactive` under `background`,
/// pooled over `seeds` runs of `seconds` each. Jobs released before their predecessor finished
/// (the task is overloaded, as Video beside Burn: 40 % wanted, 20 % given) are not wake-ups and
/// are counted in `late_jobs` instead.
pub fn fig7_point(setup: &Setup, interactive: Load, background: Load, seconds: u64, seeds: u64) -> Fig7Point {
    let mut lat = Vec::new();
    let mut late = 0;
    for seed in 1..=seeds {
        let mut threads = background.threads("bg", 1, 0);
        let me = threads.len() as u32;
        // The benchmarked task starts once the background runs, at a time off the tick grid.
        threads.extend(interactive.threads("interactive", 0, 20 * MS + 345_678));
        let jobs = simulate(threads, setup.fair, seconds * 1000 * MS, seed);
        // Latency of wake-ups: a job released while its predecessor still ran starts late
        // because its task is overloaded, not because the scheduler kept it waiting.
        let mut prev_finish = u64::MAX;
        for j in jobs.iter().filter(|j| j.thread == me) {
            if prev_finish != u64::MAX && j.release >= prev_finish {
                lat.push(j.start - j.release);
            } else if prev_finish != u64::MAX {
                late += 1;
            }
            prev_finish = j.finish;
        }
    }
    Fig7Point {
        setup: setup.name,
        interactive,
        background,
        jobs: lat.len(),
        late_jobs: late,
        mean_latency_ns: lat.iter().sum::<u64>() / lat.len().max(1) as u64,
        max_latency_ns: lat.iter().copied().max().unwrap_or(0),
    }
}

/// The interactive tasks and background loads of Fig. 7 (the paper's, less Gaming and Memload).
pub const FIG7_INTERACTIVE: [Load; 3] = [Load::Audio, Load::Video, Load::X];
pub const FIG7_BACKGROUND: [Load; 4] = [Load::None, Load::Video, Load::X, Load::Burn];
/// Background hogs of Fig. 6's sweep.
pub const FIG6_HOGS: [usize; 6] = [0, 1, 2, 4, 6, 8];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boosting_shortens_the_painting_response_and_cfs_matches_the_paper_scale() {
        let s = fig6_setups();
        let cfs = fig6_point(&s[0], 2, 5);
        let boosted = fig6_point(&s[2], 2, 5);
        // The model was sized so that CFS with two hogs lands near the paper's 275.9 ms.
        assert!((250 * MS..300 * MS).contains(&cfs.mean_response_ns), "{cfs:?}");
        assert!(
            boosted.mean_response_ns < cfs.mean_response_ns,
            "{boosted:?} vs {cfs:?}"
        );
    }

    #[test]
    fn vt_cfs_bounds_the_latency_under_burn() {
        let s = fig7_setups();
        let cfs = fig7_point(&s[0], Load::Audio, Load::Burn, 5, 1);
        let vt = fig7_point(&s[1], Load::Audio, Load::Burn, 5, 1);
        assert!(
            vt.jobs > 50 && vt.max_latency_ns <= 3 * (3 * MS + TICK_NS),
            "{vt:?}"
        );
        // A light sleeper is placed far left by CFS's sleeper credit and preempts at once;
        // eq. 7 gives that up to bound the latency of every waker.
        assert!(
            cfs.jobs > 50 && cfs.max_latency_ns <= vt.max_latency_ns,
            "{vt:?} vs {cfs:?}"
        );
    }
}
