//! A thread's Linux scheduling policy, as `sched_setattr()` sets it. Shared by the workload
//! model, the adaptation engine (which changes policies) and both kernels.

use serde::Serialize;

use crate::Reservation;

/// The fair class's load weight of each nice value −20..=19 (`sched_prio_to_weight[]` in
/// kernel/sched/core.c): nice 0 is 1024, and each step is about ×1.25, so one nice level is a
/// 10 % share of CPU between two competing threads.
pub const NICE_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121,
    2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29,
    23, 18, 15,
];

/// The load weight of `nice` (clamped to −20..=19).
pub fn nice_weight(nice: i32) -> u64 {
    NICE_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// Scheduling policy of a thread, as set with `sched_setattr`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum Policy {
    /// SCHED_OTHER (CFS) with a nice value.
    Other { nice: i32 },
    /// SCHED_IDLE: runs only when nothing else in the fair class wants the CPU (no priority).
    /// rt-app accepts it by name (`string_to_policy()` in rt-app_utils.c).
    Idle,
    /// SCHED_BATCH: the fair class with a nice value, but a waking thread never preempts
    /// (`check_preempt_wakeup_fair()`); for CPU-bound batch work.
    Batch { nice: i32 },
    /// SCHED_FIFO, priority 1..=99 (higher runs first).
    Fifo { priority: u8 },
    /// SCHED_RR, priority 1..=99, round-robin among equal priorities.
    Rr { priority: u8 },
    /// SCHED_DEADLINE with a CBS reservation.
    Deadline(Reservation),
}

impl Policy {
    /// A fair-class policy (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE).
    pub fn is_fair(&self) -> bool {
        matches!(self, Policy::Other { .. } | Policy::Batch { .. } | Policy::Idle)
    }

    /// The kernel's name of the policy (`SCHED_OTHER`, …), as `chrt` prints it.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Other { .. } => "SCHED_OTHER",
            Policy::Idle => "SCHED_IDLE",
            Policy::Batch { .. } => "SCHED_BATCH",
            Policy::Fifo { .. } => "SCHED_FIFO",
            Policy::Rr { .. } => "SCHED_RR",
            Policy::Deadline(_) => "SCHED_DEADLINE",
        }
    }
}
