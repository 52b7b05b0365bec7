//! Task set → workload conversion: one periodic thread per task, and RM/DM priorities.

use pacer_model::{Duration, Reservation, ReservationFlags, Task, TaskSet};
use pacer_workload::{
    deadline_monotonic_priorities, from_taskset, rate_monotonic_priorities, Event, ExecModel, Phase, Policy,
    TaskPolicy, TimerId, TimerMode, Work,
};

fn ms(n: u64) -> Duration {
    Duration::from_ms(n)
}

// (C, D, T) in ms; task 2 has an offset and task 3 no name.
fn set() -> TaskSet {
    let mut tasks = vec![
        Task::constrained("a", ms(2), ms(15), ms(20)),
        Task::constrained("b", ms(1), ms(5), ms(5)),
        Task::constrained("c", ms(3), ms(8), ms(10)),
        Task::cdt(1_000_000, 4_000_000, 5_000_000),
    ];
    tasks[2].offset = ms(3);
    TaskSet::new(tasks)
}

#[test]
fn one_periodic_thread_per_task() {
    let w = from_taskset(&set(), &TaskPolicy::Deadline, ExecModel::Wcet);
    assert_eq!(w.threads.len(), 4);
    let names: Vec<&str> = w.threads.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c", "t3"]);
    for (i, (t, task)) in w.threads.iter().zip(&set().tasks).enumerate() {
        assert_eq!(
            t.phases,
            vec![Phase::new(
                1,
                vec![
                    Event::Run {
                        work: Work::Fixed { ns: task.wcet }
                    },
                    Event::Timer {
                        timer: TimerId(i),
                        period: task.period,
                        mode: TimerMode::Absolute
                    },
                ]
            )]
        );
        assert_eq!(t.loops, None, "runs forever");
        assert_eq!(t.start_delay, task.offset);
        assert_eq!(t.job_deadline, Some(task.deadline));
        assert_eq!(t.affinity, None);
        assert_eq!(
            t.policy,
            Policy::Deadline(Reservation {
                runtime: task.wcet,
                deadline: task.deadline,
                period: task.period,
                flags: ReservationFlags {
                    reset_on_fork: true,
                    reclaim: false,
                    overrun: false
                },
            })
        );
    }
    assert_eq!(w.threads[2].start_delay, ms(3));
    assert_eq!(w.timer_count(), 4);
    assert_eq!(w.duration, None);
    assert!(w.ignored.is_empty());
}

#[test]
fn fixed_priority_and_other() {
    let s = set();
    let rm = rate_monotonic_priorities(&s);
    // Periods 20, 5, 10, 5 ms: the two 5 ms tasks first (lower index wins the tie).
    assert_eq!(rm, vec![96, 99, 97, 98]);
    let w = from_taskset(&s, &TaskPolicy::FixedPriority(rm), ExecModel::Wcet);
    let prios: Vec<Policy> = w.threads.iter().map(|t| t.policy).collect();
    assert_eq!(prios, [96, 99, 97, 98].map(|priority| Policy::Fifo { priority }));
    // Deadlines 15, 5, 8, 4 ms.
    assert_eq!(deadline_monotonic_priorities(&s), vec![96, 98, 97, 99]);
    let w = from_taskset(&s, &TaskPolicy::Other, ExecModel::Wcet);
    assert!(w.threads.iter().all(|t| t.policy == Policy::Other { nice: 0 }));
}

#[test]
fn priorities_stop_at_one() {
    let tasks = (0..120)
        .map(|i| Task::implicit(format!("t{i}"), ms(1), ms(1000 - i)))
        .collect();
    let p = rate_monotonic_priorities(&TaskSet::new(tasks));
    // The last task has the shortest period.
    assert_eq!(p[119], 99);
    assert_eq!(p[21], 1);
    assert_eq!(p[20], 1);
    assert_eq!(p[22], 2);
    assert_eq!(p.iter().filter(|&&x| x == 1).count(), 22);
    assert!(rate_monotonic_priorities(&TaskSet::default()).is_empty());
}

#[test]
fn execution_models_reach_the_run_event() {
    let w = from_taskset(
        &set(),
        &TaskPolicy::Deadline,
        ExecModel::Uniform { min_fraction: 0.5 },
    );
    assert_eq!(
        w.threads[0].phases[0].events[0],
        Event::Run {
            work: Work::Uniform {
                min: ms(1),
                max: ms(2)
            }
        }
    );
    let w = from_taskset(
        &set(),
        &TaskPolicy::Deadline,
        ExecModel::Normal {
            mean_fraction: 0.5,
            sd_fraction: 0.25,
        },
    );
    assert_eq!(
        w.threads[2].phases[0].events[0],
        Event::Run {
            work: Work::Normal {
                mean: Duration::from_us(1500),
                sd: Duration::from_us(750),
                min: Duration::ZERO,
                max: ms(3)
            }
        }
    );
}

#[test]
#[should_panic(expected = "one SCHED_FIFO priority per task")]
fn priority_count_must_match() {
    from_taskset(&set(), &TaskPolicy::FixedPriority(vec![10]), ExecModel::Wcet);
}
