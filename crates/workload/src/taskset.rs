//! Turning a pacer task set into a runnable [`Workload`], the way one writes a periodic task in
//! rt-app: one thread per task that runs forever, doing its work and then waiting on its own
//! periodic timer (doc/tutorial.txt, "timer" event; doc/examples/tutorial/example2.json is the
//! same shape: `"run"` then `"timer": {"ref": "unique", "period": …}` with `"loop": -1`).
//!
//! The timer is absolute so releases stay on the grid offset + k·T even after an overrun: the
//! task model releases jobs periodically whatever happened to the previous one. Sporadic tasks
//! are run at their minimum inter-arrival time, their densest legal arrival pattern.

use pacer_model::{Duration, Reservation, ReservationFlags, TaskSet};

use crate::model::{Event, Phase, Policy, ThreadSpec, TimerId, TimerMode, Work, Workload};
use crate::wss::{WorkingSet, WssAmount, WssOrder};

/// The scheduling policy given to every thread of a converted task set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskPolicy {
    /// SCHED_DEADLINE with runtime = C, deadline = D, period = T and RESET_ON_FORK.
    Deadline,
    /// SCHED_FIFO with one priority per task, in task order (1..=99, higher runs first); see
    /// [`rate_monotonic_priorities`] and [`deadline_monotonic_priorities`].
    FixedPriority(Vec<u8>),
    /// SCHED_OTHER at nice 0.
    Other,
}

/// How much work each job does, relative to the task's WCET C.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ExecModel {
    /// Every job runs exactly C.
    Wcet,
    /// Uniform in [min_fraction·C, C].
    Uniform { min_fraction: f64 },
    /// Normal(mean_fraction·C, sd_fraction·C) truncated to [0, C].
    Normal { mean_fraction: f64, sd_fraction: f64 },
}

impl ExecModel {
    /// The per-job work for a task of WCET `wcet`. Fractions are clamped to [0, 1] (a non-finite
    /// one counts as 1 for `min_fraction`/`mean_fraction` and 0 for `sd_fraction`), and a model
    /// that collapses to one value (min_fraction = 1, sd = 0) becomes a fixed amount, so the
    /// result always satisfies [`Work::validate`] and never exceeds C.
    pub fn work(&self, wcet: Duration) -> Work {
        let frac = |f: f64, default: f64| if f.is_finite() { f.clamp(0.0, 1.0) } else { default };
        let scale = |f: f64| Duration(((wcet.0 as f64) * f).round().min(wcet.0 as f64) as u64);
        match *self {
            ExecModel::Wcet => Work::Fixed { ns: wcet },
            ExecModel::Uniform { min_fraction } => {
                let min = scale(frac(min_fraction, 1.0));
                Work::uniform(min, wcet).unwrap_or(Work::Fixed { ns: wcet })
            }
            ExecModel::Normal {
                mean_fraction,
                sd_fraction,
            } => {
                let mean = scale(frac(mean_fraction, 1.0));
                let sd = scale(frac(sd_fraction, 0.0));
                Work::normal(mean, sd, Duration::ZERO, wcet).unwrap_or(Work::Fixed { ns: mean })
            }
        }
    }
}

/// One thread per task, running `[Run{work}, Timer{own timer, period T, absolute}]` forever from
/// its offset (a working-set phase of that work instead of the `Run` for a task with a working
/// set), with its relative deadline D as the job deadline. Thread names are the task
/// names (`t<i>` for an unnamed task). Reservations are not validated here; the executor checks
/// them with [`Reservation::validate`] like any other.
///
/// # Panics
/// With [`TaskPolicy::FixedPriority`], if there is not exactly one priority per task or a
/// priority is outside 1..=99 (a caller bug: use [`rate_monotonic_priorities`]).
pub fn from_taskset(set: &TaskSet, policy: &TaskPolicy, exec: ExecModel) -> Workload {
    if let TaskPolicy::FixedPriority(prios) = policy {
        assert_eq!(
            prios.len(),
            set.tasks.len(),
            "one SCHED_FIFO priority per task is needed"
        );
        assert!(
            prios.iter().all(|p| (1..=99).contains(p)),
            "SCHED_FIFO priorities are 1..=99, got {prios:?}"
        );
    }
    let threads = set
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let policy = match policy {
                TaskPolicy::Deadline => Policy::Deadline(Reservation {
                    runtime: t.wcet,
                    deadline: t.deadline,
                    period: t.period,
                    // A reserved thread must be allowed to fork (e.g. a helper in the executor).
                    flags: ReservationFlags {
                        reset_on_fork: true,
                        ..ReservationFlags::default()
                    },
                }),
                TaskPolicy::FixedPriority(prios) => Policy::Fifo { priority: prios[i] },
                TaskPolicy::Other => Policy::Other { nice: 0 },
            };
            ThreadSpec {
                name: if t.name.is_empty() {
                    format!("t{i}")
                } else {
                    t.name.clone()
                },
                policy,
                affinity: None,
                start_delay: t.offset,
                phases: vec![Phase::new(
                    1,
                    vec![
                        job_event(set.task_wss(i), exec.work(t.wcet)),
                        Event::Timer {
                            timer: TimerId(i),
                            period: t.period,
                            mode: TimerMode::Absolute,
                        },
                    ],
                )],
                loops: None,
                cooperative: false,
                job_deadline: Some(t.deadline),
                ..Default::default()
            }
        })
        .collect();
    Workload {
        threads,
        duration: None,
        ignored: Vec::new(),
        ..Default::default()
    }
}

/// A job's work: a `run`, or for a task with a working set (rm-vs-edf-multicore-linux.txt §5.2)
/// a working-set phase of that much work, passing over its array sequentially (the order the
/// paper reports), so the simulator's cache model and `pacer run` see its footprint. Both draw
/// the job's work the same way, so a set's schedule does not change with the cache model off.
fn job_event(wss: Option<u64>, work: Work) -> Event {
    match wss {
        None => Event::Run { work },
        Some(size) => Event::WorkingSet(WorkingSet {
            size,
            order: WssOrder::Sequential,
            seed: 0,
            amount: WssAmount::Work { work },
        }),
    }
}

/// Rate-monotonic SCHED_FIFO priorities, in task order: shorter period → higher priority,
/// 99 for the shortest and one less for each next task (equal periods: lower index first),
/// never below 1 (from the 100th task on, priorities repeat at 1).
pub fn rate_monotonic_priorities(set: &TaskSet) -> Vec<u8> {
    priorities_by(set, |t| t.period)
}

/// Deadline-monotonic SCHED_FIFO priorities: as [`rate_monotonic_priorities`] with the relative
/// deadline D instead of the period.
pub fn deadline_monotonic_priorities(set: &TaskSet) -> Vec<u8> {
    priorities_by(set, |t| t.deadline)
}

fn priorities_by(set: &TaskSet, key: impl Fn(&pacer_model::Task) -> Duration) -> Vec<u8> {
    let mut order: Vec<usize> = (0..set.tasks.len()).collect();
    order.sort_by_key(|&i| (key(&set.tasks[i]), i));
    let mut prios = vec![1u8; set.tasks.len()];
    for (rank, i) in order.into_iter().enumerate() {
        prios[i] = 99u8.saturating_sub(rank.min(98) as u8);
    }
    prios
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_model_fractions() {
        let c = Duration::from_ms(10);
        assert_eq!(ExecModel::Wcet.work(c), Work::Fixed { ns: c });
        assert_eq!(
            ExecModel::Uniform { min_fraction: 0.5 }.work(c),
            Work::Uniform {
                min: Duration::from_ms(5),
                max: c
            }
        );
        assert_eq!(
            ExecModel::Uniform { min_fraction: 1.0 }.work(c),
            Work::Fixed { ns: c }
        );
        assert_eq!(
            ExecModel::Uniform {
                min_fraction: f64::NAN
            }
            .work(c),
            Work::Fixed { ns: c }
        );
        assert_eq!(
            ExecModel::Normal {
                mean_fraction: 0.6,
                sd_fraction: 0.1
            }
            .work(c),
            Work::Normal {
                mean: Duration::from_ms(6),
                sd: Duration::from_ms(1),
                min: Duration::ZERO,
                max: c
            }
        );
        assert_eq!(
            ExecModel::Normal {
                mean_fraction: 2.0,
                sd_fraction: 0.0
            }
            .work(c),
            Work::Fixed { ns: c }
        );
        for m in [
            ExecModel::Uniform { min_fraction: -3.0 },
            ExecModel::Normal {
                mean_fraction: 0.5,
                sd_fraction: 7.0,
            },
        ] {
            let w = m.work(c);
            assert!(w.validate().is_ok(), "{w:?}");
            assert!(w.upper_bound() <= c);
        }
    }
}
