//! A thread's Linux scheduling policy, as `sched_setattr()` sets it. Shared by the workload
//! model, the adaptation engine (which changes policies) and both kernels.

use serde::Serialize;

use crate::Reservation;

/// Scheduling policy of a thread, as set with `sched_setattr`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum Policy {
    /// SCHED_OTHER (CFS) with a nice value.
    Other { nice: i32 },
    /// SCHED_IDLE: runs only when nothing else in the fair class wants the CPU (no priority).
    /// rt-app accepts it by name (`string_to_policy()` in rt-app_utils.c).
    Idle,
    /// SCHED_FIFO, priority 1..=99 (higher runs first).
    Fifo { priority: u8 },
    /// SCHED_RR, priority 1..=99, round-robin among equal priorities.
    Rr { priority: u8 },
    /// SCHED_DEADLINE with a CBS reservation.
    Deadline(Reservation),
}
