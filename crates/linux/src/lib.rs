//! pacer's real-kernel backend: the Linux side of the adaptation engine's
//! `Kernel` interface. Every syscall pacer makes lives in this crate (DESIGN.md: "no syscall
//! outside crates/linux").
//!
//! - [`admission`]: the SCHED_DEADLINE admission cap, read once and without rebuilding root
//!   domains (reading `sched_rt_*_us` corrupts the kernel's accounting on Linux 6.18);
//! - [`audit`]: SCHED_DEADLINE admission accounting checked against the threads that hold
//!   reservations, and its repair (`pacer doctor`); [`ledger`]: a session's record on disk;
//! - [`sched`]: `sched_setattr`/`sched_getattr` with every field and flag, affinity;
//! - [`procfs`]: thread discovery under /proc/PID/task, per-thread CPU time from schedstat, pidfds;
//! - [`cpufreq`]: the cpufreq sysfs backend (tested against a fake sysfs tree);
//! - [`trace`]: kernel-filtered wake-up tracing; [`sched_trace`]: kernel-filtered recording of
//!   the context switches and wake-ups of chosen threads (`pacer run --trace`);
//! - [`cgroup`] (also under its old name `cpuset`): exclusive cpusets (cgroup v1 and v2) for
//!   partitioned/clustered runs, each its own SCHED_DEADLINE root domain; stale clean-up;
//!   root-domain rebuild; [`sched_debug`]: the per-root-domain `dl_bw` read-out from debugfs;
//! - [`sys`]: the /proc and /sys helpers used across the crate (CPU lists, online CPUs, mounts,
//!   clocks);
//! - [`perf`]: per-thread context-switch and migration counts from perf software events;
//! - [`dlstate`]: a SCHED_DEADLINE thread's current deadline and remaining runtime (the audio
//!   paper's eq. 3 inputs) from `/proc/PID/task/TID/sched`, with an allocation-free reader;
//! - [`cred`]: socket peer credentials, user and group names, thread owners; [`epoll`]: the
//!   event loop primitive of `pacer daemon`;
//! - [`boost`]: temporary interactive boosts of SCHED_OTHER threads (VT-CFS §4 eq. 6 nice, EEVDF
//!   slice, uclamp), undone when their time is up or the thread blocks;
//! - [`kernel`]: all of the above as the adaptation engine's `Kernel` ([`kernel::LinuxKernel`]);
//! - [`control`]: LFS++ on one running process (`pacer exec` / `pacer attach`), with
//!   [`guardian`] (restores threads if pacer dies) and [`signals`] (signals as pollable events).

pub mod admission;
pub mod audit;
pub mod boost;
pub mod cachecal;
pub mod capture;
pub mod cgroup;
pub mod control;
pub mod cpufreq;
pub mod cred;
pub mod dlstate;
pub mod epoll;
#[doc(hidden)]
pub mod fuzzing;
pub mod guardian;
pub mod kernel;
pub mod ledger;
pub mod perf;
pub mod pi;
pub mod playback;
pub mod procfs;
pub mod run;
pub mod sched;
pub mod sched_debug;
pub mod sched_trace;
pub mod signals;
pub mod stalls;
pub mod sys;
pub mod taskset;
pub mod trace;

/// The [`cgroup`] module under the name it had before it was split: `pacer_linux::cpuset::*`
/// paths keep working.
pub use cgroup as cpuset;

/// Restores the default SIGPIPE disposition, so a command writing into a closed pipe
/// (`pacer … | head`) ends quietly like other Unix filters instead of failing on every write.
pub fn default_sigpipe() {
    // SAFETY: resets a signal disposition; called by the binary before it starts any thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
