//! Scheduling classes in the kernel's strict priority order: deadline > rt > fair > idle
//! (`for_each_class()` in kernel/sched/sched.h). Each class owns its per-CPU run queue and the
//! verbs the engine calls: enqueue, dequeue, pick (first), put_prev (re-enqueue), and the
//! priority key that decides wake-up preemption, push, pull and CPU selection.

pub(crate) mod deadline;
pub(crate) mod fair;
pub(crate) mod rt;

/// A thread's class, in priority order (smaller runs first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ClassId {
    Deadline,
    Rt,
    Fair,
}

/// Total order of "who should run": class first, then the class's own key (earlier deadline,
/// higher rt priority, smaller vruntime). Smaller is more urgent; only a strictly smaller key
/// preempts, so equal keys never cause a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key {
    Deadline(u64),
    /// 99 − priority.
    Rt(u8),
    Fair(u64),
    /// An idle CPU.
    Idle,
}
