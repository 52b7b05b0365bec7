//! pacer's real-kernel backend (issue 5, in progress): the Linux side of the adaptation engine's
//! `Kernel` interface. Every syscall pacer makes lives in this crate (DESIGN.md: "no syscall
//! outside crates/linux").
//!
//! - [`sched`]: `sched_setattr`/`sched_getattr` with every field and flag, affinity;
//! - [`procfs`]: thread discovery under /proc/PID/task, per-thread CPU time from schedstat, pidfds;
//! - [`cpufreq`]: the cpufreq sysfs backend (tested against a fake sysfs tree);
//! - [`trace`]: kernel-filtered wake-up tracing;
//! - [`kernel`]: all of the above as the adaptation engine's `Kernel` ([`kernel::LinuxKernel`]).

pub mod cpufreq;
pub mod kernel;
pub mod procfs;
pub mod sched;
pub mod trace;
