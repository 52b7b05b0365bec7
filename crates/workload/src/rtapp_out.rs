//! Writing a task set's threads as an rt-app JSON file (`pacer convert`): the inverse of
//! [`crate::rtapp`] for the shape [`crate::taskset::from_taskset`] produces — one thread per
//! task running `run` C then an absolute `unique` timer of period T forever, with its policy
//! (`SCHED_DEADLINE` with `dl-runtime`/`dl-deadline`/`dl-period`, `SCHED_FIFO` with its priority)
//! and its partition's or cluster's `cpus`.
//!
//! rt-app's grammar decides what can be written (doc/tutorial.txt):
//! * durations are whole microseconds (32-bit ints), and `global.duration` whole seconds. A task
//!   set's times are nanoseconds, so each is rounded *up* to the next microsecond: a job never
//!   gets less work than its WCET and a reservation never less runtime, and C ≤ D ≤ T survives
//!   rounding. Every rounding is reported in [`RtAppFile::notes`]; a set whose times are whole
//!   microseconds converts exactly, and pacer reads the file back into the same threads.
//! * `run` is a fixed amount: execution times drawn from a distribution have no rt-app spelling
//!   and are refused rather than replaced by their WCET.
//! * a SCHED_FIFO thread has no deadline key: a constrained deadline D < T of an RM/DM task is
//!   lost (pacer then judges its jobs against T), which a note says.
//! * the reservation flags (reclaiming) have no key either, and are refused.

use pacer_model::Duration;
use serde_json::{json, Map, Value};

use crate::model::{Event, Policy, TimerMode, Work, Workload};

/// rt-app reads integers with json_object_get_int(): 32 bits.
const RTAPP_INT_MAX: u64 = i32::MAX as u64;

/// An rt-app file and what the conversion changed.
#[derive(Debug, Clone, PartialEq)]
pub struct RtAppFile {
    /// The file's JSON: `global`, then `tasks` in thread order.
    pub json: Value,
    /// What rt-app's grammar made differ from the task set (roundings, lost deadlines).
    pub notes: Vec<String>,
}

impl RtAppFile {
    /// The file's text, pretty-printed, ending with a newline.
    pub fn text(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.json).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// Why a workload has no rt-app spelling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RtAppWriteError {
    /// Not the shape of a converted task set.
    #[error("thread `{thread}`: {what}; only task-set threads (`run` then a periodic timer) are written as rt-app")]
    Shape { thread: String, what: String },
    /// Work drawn from a distribution.
    #[error("thread `{thread}`: its jobs' execution times are drawn from a distribution, which rt-app's `run` (a fixed number of µs) cannot express; convert with `--exec wcet`, or run the task set itself (`pacer run SET.json --exec …`)")]
    Distribution { thread: String },
    /// Two threads with the same name: rt-app's `tasks` object would keep one.
    #[error("two tasks are named `{0}`: rt-app's `tasks` object keys must differ")]
    DuplicateName(String),
    /// A time beyond rt-app's 32-bit microseconds.
    #[error("thread `{thread}`: {field} = {value} is beyond rt-app's largest value ({RTAPP_INT_MAX} µs)")]
    TooLong {
        thread: String,
        field: &'static str,
        value: Duration,
    },
    /// SCHED_DEADLINE flags rt-app has no key for.
    #[error("thread `{thread}`: SCHED_FLAG_RECLAIM has no rt-app key (rt-app sets no reservation flags)")]
    Flags { thread: String },
}

/// Collects the roundings to whole microseconds.
struct Micros<'a> {
    thread: &'a str,
    rounded: &'a mut Vec<(String, Duration)>,
}

impl Micros<'_> {
    fn us(&mut self, field: &'static str, d: Duration) -> Result<u64, RtAppWriteError> {
        let us = d.ns().div_ceil(1000);
        if us > RTAPP_INT_MAX {
            return Err(RtAppWriteError::TooLong {
                thread: self.thread.to_string(),
                field,
                value: d,
            });
        }
        if us * 1000 != d.ns() {
            self.rounded.push((format!("{}.{field}", self.thread), d));
        }
        Ok(us)
    }
}

/// Writes `w` (threads of [`crate::taskset::from_taskset`], with their affinities) as rt-app
/// JSON; `duration` becomes `global.duration`, rounded up to whole seconds.
pub fn to_rtapp(w: &Workload, duration: Option<Duration>) -> Result<RtAppFile, RtAppWriteError> {
    let mut tasks = Map::new();
    let mut notes = Vec::new();
    let mut rounded: Vec<(String, Duration)> = Vec::new();
    for t in &w.threads {
        let shape = |what: &str| RtAppWriteError::Shape {
            thread: t.name.clone(),
            what: what.to_string(),
        };
        let [phase] = &t.phases[..] else {
            return Err(shape("more than one phase"));
        };
        let (work, period) = match (&phase.events[..], t.loops, phase.loops) {
            (
                [Event::Run { work }, Event::Timer {
                    period,
                    mode: TimerMode::Absolute,
                    ..
                }],
                None,
                1,
            ) => (work, *period),
            _ => return Err(shape("not `run` then an absolute timer, forever")),
        };
        if t.forked
            || t.uses_taskgroups()
            || t.membind.is_some()
            || t.util_min.is_some()
            || t.util_max.is_some()
        {
            return Err(shape("forked, in a task group, memory-bound or clamped"));
        }
        let Work::Fixed { ns: c } = work else {
            return Err(RtAppWriteError::Distribution {
                thread: t.name.clone(),
            });
        };
        let mut us = Micros {
            thread: &t.name,
            rounded: &mut rounded,
        };
        let mut obj = Map::new();
        match t.policy {
            Policy::Deadline(r) => {
                if r.flags.reclaim || r.flags.overrun {
                    return Err(RtAppWriteError::Flags {
                        thread: t.name.clone(),
                    });
                }
                obj.insert("policy".into(), json!("SCHED_DEADLINE"));
                obj.insert("dl-runtime".into(), json!(us.us("dl-runtime", r.runtime)?));
                obj.insert("dl-deadline".into(), json!(us.us("dl-deadline", r.deadline)?));
                obj.insert(
                    "dl-period".into(),
                    json!(us.us("dl-period", r.effective_period())?),
                );
            }
            Policy::Fifo { priority } => {
                obj.insert("policy".into(), json!("SCHED_FIFO"));
                obj.insert("priority".into(), json!(priority));
                if let Some(d) = t.job_deadline.filter(|&d| d != period) {
                    notes.push(format!(
                        "{}: deadline {d} ≠ period {period}: an rt-app SCHED_FIFO thread has no deadline key, so its jobs are judged against the period",
                        t.name
                    ));
                }
            }
            Policy::Other { nice: 0 } => {
                obj.insert("policy".into(), json!("SCHED_OTHER"));
            }
            _ => {
                return Err(shape(
                    "policy other than SCHED_DEADLINE, SCHED_FIFO or SCHED_OTHER nice 0",
                ))
            }
        }
        if let Some(cpus) = &t.affinity {
            obj.insert("cpus".into(), json!(cpus));
        }
        if !t.start_delay.is_zero() {
            obj.insert("delay".into(), json!(us.us("delay", t.start_delay)?));
        }
        obj.insert("loop".into(), json!(-1));
        obj.insert("run".into(), json!(us.us("run", *c)?));
        obj.insert(
            "timer".into(),
            json!({"ref": "unique", "period": us.us("timer.period", period)?, "mode": "absolute"}),
        );
        if tasks.insert(t.name.clone(), Value::Object(obj)).is_some() {
            return Err(RtAppWriteError::DuplicateName(t.name.clone()));
        }
    }
    let mut global = Map::new();
    if let Some(d) = duration {
        let s = d.ns().div_ceil(1_000_000_000);
        if s * 1_000_000_000 != d.ns() {
            notes.push(format!(
                "global.duration: {d} rounded up to {s} s (rt-app's duration is whole seconds)"
            ));
        }
        global.insert("duration".into(), json!(s.min(RTAPP_INT_MAX)));
    }
    if !rounded.is_empty() {
        let worst = rounded
            .iter()
            .map(|(_, d)| d.ns().div_ceil(1000) * 1000 - d.ns())
            .max()
            .unwrap_or(0);
        let shown: Vec<String> = rounded
            .iter()
            .take(4)
            .map(|(field, d)| format!("{field} {} ns → {} µs", d.ns(), d.ns().div_ceil(1000)))
            .collect();
        notes.push(format!(
            "{} time(s) rounded up to whole microseconds (rt-app's unit), by at most {worst} ns: {}{}",
            rounded.len(),
            shown.join(", "),
            if rounded.len() > shown.len() { ", …" } else { "" }
        ));
    }
    let mut root = Map::new();
    root.insert("global".into(), Value::Object(global));
    root.insert("tasks".into(), Value::Object(tasks));
    Ok(RtAppFile {
        json: Value::Object(root),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{place, Configuration};
    use pacer_model::{Task, TaskSet};

    fn set() -> TaskSet {
        let mut b = Task::implicit("b", Duration::from_ms(3), Duration::from_ms(20));
        b.deadline = Duration::from_ms(15);
        b.offset = Duration::from_us(500);
        TaskSet {
            tasks: vec![
                Task::implicit("a", Duration::from_ms(2), Duration::from_ms(10)),
                b,
            ],
            ..Default::default()
        }
    }

    #[test]
    fn a_whole_microsecond_set_reads_back_as_the_same_threads() {
        for policy in ["p-edf", "g-edf", "p-rm", "c-dm"] {
            let cfg = Configuration::new(policy.parse().unwrap(), 2, Some(2));
            let p = place(&set(), &cfg).unwrap();
            let file = to_rtapp(&p.workload, Some(Duration::from_secs(3))).unwrap();
            let back = crate::parse_rtapp(&file.text(), "converted.json").unwrap();
            assert_eq!(back.duration, Some(Duration::from_secs(3)));
            assert_eq!(back.threads.len(), 2);
            for (a, b) in p.workload.threads.iter().zip(&back.threads) {
                assert_eq!(a.name, b.name);
                assert_eq!(a.affinity, b.affinity, "{policy}");
                assert_eq!(a.start_delay, b.start_delay);
                assert_eq!(a.phases[0].events, b.phases[0].events, "{policy}");
                match (a.policy, b.policy) {
                    (Policy::Deadline(x), Policy::Deadline(y)) => {
                        assert_eq!(
                            (x.runtime, x.deadline, x.period),
                            (y.runtime, y.deadline, y.period)
                        )
                    }
                    (x, y) => assert_eq!(x, y),
                }
            }
            let lost = file.notes.iter().any(|n| n.contains("judged against the period"));
            assert_eq!(
                lost,
                policy == "p-rm" || policy == "c-dm",
                "{policy}: {:?}",
                file.notes
            );
        }
    }

    #[test]
    fn nanoseconds_are_rounded_up_and_reported() {
        let s = TaskSet {
            tasks: vec![Task::implicit("a", Duration(1_234_567), Duration::from_ms(10))],
            ..Default::default()
        };
        let p = place(&s, &Configuration::new("g-edf".parse().unwrap(), 1, None)).unwrap();
        let f = to_rtapp(&p.workload, Some(Duration::from_ms(1500))).unwrap();
        let a = &f.json["tasks"]["a"];
        assert_eq!(a["run"], 1235);
        assert_eq!(a["dl-runtime"], 1235);
        assert_eq!(f.json["global"]["duration"], 2);
        assert!(
            f.notes.iter().any(|n| n.contains("a.run 1234567 ns → 1235 µs")),
            "{:?}",
            f.notes
        );
        assert!(
            f.notes.iter().any(|n| n.contains("rounded up to 2 s")),
            "{:?}",
            f.notes
        );
    }

    #[test]
    fn what_rt_app_cannot_say_is_refused() {
        let mut cfg = Configuration::new("g-edf".parse().unwrap(), 1, None);
        cfg.exec = crate::ExecModel::Uniform { min_fraction: 0.5 };
        let p = place(&set(), &cfg).unwrap();
        let e = to_rtapp(&p.workload, None).unwrap_err();
        assert!(matches!(e, RtAppWriteError::Distribution { .. }), "{e}");
        let mut cfg = Configuration::new("g-edf".parse().unwrap(), 1, None);
        cfg.reclaim = true;
        let p = place(&set(), &cfg).unwrap();
        assert!(matches!(
            to_rtapp(&p.workload, None),
            Err(RtAppWriteError::Flags { .. })
        ));
        let mut s = set();
        s.tasks[1].name = "a".into();
        let p = place(&s, &Configuration::new("g-rm".parse().unwrap(), 1, None)).unwrap();
        assert_eq!(
            to_rtapp(&p.workload, None).unwrap_err(),
            RtAppWriteError::DuplicateName("a".into())
        );
    }
}
