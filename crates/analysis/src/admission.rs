//! SCHED_DEADLINE admission control as the kernel computes it.
