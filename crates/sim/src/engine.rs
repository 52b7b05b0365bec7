//! The discrete-event engine: simulated time in integer nanoseconds, per-CPU run queues, the
//! classes of `crate::class` stacked deadline > rt > fair > idle, and threads executing the
//! workload model of `pacer-workload` (run / runtime / sleep / timer / yield events, rt-app's
//! synchronisation events on the objects of `crate::sync`, `mem` / `iorun` / `memrun` work (costs
//! of `crate::memcost`), `fork`, and phase-level policy and CPU changes).
//!
//! Multiprocessor scheduling follows the kernel's distributed run queues: a waking thread picks a
//! CPU (`select_task_rq`: an idle CPU, else the one running the least urgent thread it can
//! preempt — cpudl/cpupri), a preempted thread is pushed to a CPU it can preempt
//! (`push_dl_task`/`push_rt_task`), and a CPU that loses its thread pulls the most urgent queued
//! thread from the others of its root domain (`pull_dl_task`/`pull_rt_task`, idle balance for
//! fair). Global, clustered and partitioned scheduling are only affinity masks over the same
//! machinery. The three look-ups read heaps kept per root domain (`crate::class::cpudl`, the
//! kernel's cpudl) rather than scanning the CPUs, and a thread pinned to one CPU skips them.
//!
//! ## Order of simultaneous events (deterministic)
//! Events at the same instant are processed in this order, ties in insertion order:
//! 1. CPU-local expiries (a running thread finishes its work, exhausts its runtime or slice), so a
//!    job ending at t frees its CPU before anything else happens at t;
//! 2. frequency switches completing (work up to t was done at the old speed);
//! 3. SCHED_DEADLINE replenishment timers;
//! 4. GRUB inactive timers (0-lag);
//! 5. wake-ups (job releases at timer expiries, ends of sleeps, thread starts): all those of one
//!    instant form a batch, woken most urgent first (the key each thread will have once awake,
//!    ties in thread order), as timers expiring together are handled in one hrtimer interrupt
//!    before `schedule()` runs — so a lower-priority thread woken at the same instant as a
//!    higher-priority one on its CPU is never switched in only to be preempted at once;
//! 6. scheduler ticks of busy CPUs in schedutil clusters;
//! 7. hosted controllers.
//!
//! After each event the CPUs it touched reschedule immediately (the kernel's resched IPI); what
//! the threads it ran decided for others or for their own scheduling (sync wake-ups, priority
//! inheritance, forks, phase-level policy and CPUs) is then applied in the order decided, at the
//! same instant, rescheduling the CPUs it touches (a thread's CPU never changes while it steps
//! through its program); then the schedutil governors of the clusters it touched run (`cpufreq_update_util()`; see
//! [`crate::dvfs`]). Residency is settled at each OPP change from the busy time `update_curr`
//! charges, and utilisation signals are brought up to date before every change of a CPU's running
//! thread or speed, so neither needs events of its own.
//! Randomness (execution-time models) comes from one ChaCha8 stream per thread, seeded from the
//! run's seed and the thread index, so a thread's draws do not depend on the others.

use std::collections::BinaryHeap;

mod balance;
use balance::FairLb;
pub use balance::{FairBalance, BOOT_NEWIDLE_RATIO};

use pacer_adapt::kernel::{Origin, Wakeup};
use pacer_adapt::{AppEvent, Controller, DlState};
use pacer_model::reservation::to_ratio;
use pacer_model::{Platform, PlatformError, CAPACITY_SCALE};
use pacer_workload::ThreadRng;
use pacer_workload::{CacheProfile, WorkingSet, WssAmount};
use pacer_workload::{Cursor, Event, Phase, Policy, Step as Walk, ThreadSpec, Workload};
use rand::Rng;
use std::sync::Arc;

use crate::cache::{CacheModel, CacheStats};
use crate::class::cpudl::RootHeaps;
use crate::class::deadline::RootDomain;
use crate::class::fair::{FairModel, FairParams, FairRq};
use crate::class::group::{GroupState, MoveCosts, TaskGroups};
use crate::class::rt::RR_TIMESLICE_NS;
use crate::class::{select_task_rq, Block, Charge, Enqueue, Entity, Key, Off, Rq, Tick};
use crate::dvfs::schedutil;
use crate::dvfs::walt::Walt;
use crate::dvfs::{
    CpuDvfs, CpuEnergy, CpuUtil, Domain, EnergyReport, Governor, OppResidency, Signals, UtilSignal,
};
use crate::memcost::MemRunCost;
use crate::record::{JobRecord, Observer, PrevState, ThreadId, ThreadStats, TraceEvent};
use crate::sync::{Acquire, Objects, Op, WaitKey, Waiter};

/// Simulation settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    pub cpus: usize,
    /// Capacity of each CPU on the 1024 scale (default: all 1024).
    pub capacities: Option<Vec<u32>>,
    /// Seed of the execution-time draws.
    pub seed: u64,
    /// Time a thread spends switching in before its work progresses (ns).
    pub context_switch_cost: u64,
    /// Extra switch-in time when the thread last ran on another CPU (ns).
    pub migration_cost: u64,
    /// Delay between the cause of a wake-up and the woken thread becoming runnable (ns): the
    /// expiry of its timer or sleep (the timer interrupt and wake-up path), or another thread's
    /// synchronisation operation (the futex wake-up and its IPI). The response time of a job
    /// released by a timer includes it (its release stays the nominal expiry). 0 = ideal.
    pub wakeup_latency: u64,
    /// Time a CPU that was idle takes to run what it is given (ns): the exit from its idle
    /// state (cpuidle's `exit_latency`; on a VM, the host scheduling the halted vCPU again).
    /// The thread switched in waits that long before it runs, uncharged; the CPU counts as
    /// busy meanwhile. A CPU that goes idle and picks another thread at the same instant never
    /// halted and pays nothing. 0 = ideal.
    pub idle_exit_latency: u64,
    /// `timer_slack_ns` of SCHED_OTHER, SCHED_BATCH and SCHED_IDLE threads (ns): their sleeps
    /// and timers expire this much after the time asked (`hrtimer_nanosleep()` arms the timer
    /// with this range and the clock event is programmed for its end). rt and deadline threads
    /// have none (`__setscheduler_params()`). Linux's default is 50 µs
    /// ([`DEFAULT_TIMER_SLACK_NS`]).
    pub timer_slack: u64,
    /// rt-app's `runtime` event spins in bursts of this much calibrated work (ns at capacity
    /// 1024, scaled by `work_scale` like `run`), reading the clock after each (`loadwait(32)`):
    /// it ends at the first burst that finishes once its duration of wall-clock time has
    /// passed, preemptions included. 0 = it ends exactly at its duration.
    pub runtime_burst: u64,
    /// How fair threads are placed and moved between CPUs: as Linux 6.18 does (the default), or
    /// ideally (any idle CPU at every wake-up, a pull by every CPU going idle). See
    /// [`FairBalance`].
    pub fair_balance: FairBalance,
    /// NI_RANDOM's `newidle_ratio` (0–1024) when the simulation starts: a CPU going idle tries
    /// to pull with probability (1 + ratio) / 1024. It is the machine's recent history of such
    /// pulls, not the workload's (tests/rtapp/machine_profile.py measures it); default
    /// [`BOOT_NEWIDLE_RATIO`], the kernel's value for a domain it has just built.
    pub newidle_ratio: u64,
    /// Factor on the work of every `run` event (and task-set job): how much slower the measured
    /// machine executes calibrated work than its calibration says (`pacer compare` estimates it
    /// from a real run). Wall-clock `runtime` is not scaled. 1 = exact.
    pub work_scale: f64,
    /// `sched_rt_runtime_us` / `sched_rt_period_us`: u_max of GRUB reclaiming.
    pub rt_runtime_us: u64,
    pub rt_period_us: u64,
    /// SCHED_RR time slice.
    pub rr_timeslice: u64,
    /// Frequencies the platform can run at, ascending, kHz, when `platform` is `None` (one
    /// frequency domain, no energy model) — and for clusters of `platform` without an OPP table.
    /// Work and SCHED_DEADLINE runtime scale with cur/max, as the kernel's scale-invariant
    /// accounting does.
    pub freqs_khz: Vec<u32>,
    /// The platform: clusters sharing a frequency, OPP tables with capacities and powers, switch
    /// latencies (see [`SimConfig::with_platform`]). `None` means one cluster of `cpus` CPUs of
    /// `capacities` at `freqs_khz`, with powers 0 — the simulator before DVFS.
    pub platform: Option<Platform>,
    /// Governor of each cluster: empty = the `userspace` governor at the highest OPP everywhere
    /// (the behaviour before DVFS; [`Sim::set_frequency`] sets the frequency); one entry = that
    /// governor on every cluster; otherwise exactly one per cluster.
    pub governors: Vec<Governor>,
    /// Period of the scheduler tick that re-evaluates schedutil on busy CPUs, ns (CONFIG_HZ=250:
    /// 4 ms). Idle CPUs get no ticks (NO_HZ).
    pub tick_ns: u64,
    /// Time of the first fair-class tick in [0, tick_ns): `None` draws it from the seed, as the
    /// phase of the jiffies against a workload's start is arbitrary on a real machine.
    pub tick_phase: Option<u64>,
    /// Track PELT and WALT on every CPU even where no schedutil reads them ([`Sim::util`]).
    pub track_util: bool,
    /// Default frequency-insensitive (memory-bound) fraction m ∈ [0, 1] of every thread's work:
    /// a run of w ns (at capacity 1024, f_max) takes w · (m + (1 − m) · c_max / c_cur) · 1024 / c_max
    /// at capacity c_cur of a CPU whose top capacity is c_max (c_max / c_cur = f_max / f for a
    /// proportional table). 0 = fully CPU-bound. Per thread: [`Sim::set_mem_bound`].
    pub mem_bound: f64,
    /// Per-CPU fair-server reservation counted by admission control (Linux ≥ 6.12): runtime and
    /// period in ns, `None` for older kernels.
    pub fair_server: Option<(u64, u64)>,
    /// The fair class: `None` = EEVDF with Linux's defaults for `cpus` CPUs (base slice
    /// 0.75 ms · (1 + log2(min(cpus, 8)))), as kernels ≥ 6.6 run; or CFS, or VT-CFS. Its
    /// slices are noticed at scheduler ticks (`tick_ns`), as without HRTICK.
    pub fair: Option<FairModel>,
    /// Threads read their CPU time at the end of every job (`clock_gettime(
    /// CLOCK_THREAD_CPUTIME_ID)`), as `pacer run` does to measure each job's execution. On Linux
    /// that accounts the running task at that instant (`task_sched_runtime()` → `update_curr()`),
    /// and EEVDF reschedules a thread past its slice protection there: it is preempted before it
    /// sleeps, waits, and sleeps with the lag it earned meanwhile. On by default so that
    /// `pacer sim` and `pacer run` of the same file agree; rt-app reads no CPU time.
    pub job_end_cpu_time: bool,
    /// RT throttling of each CPU's root rt_rq (`sched_rt_runtime_us` per `sched_rt_period_us`),
    /// as kernels built with CONFIG_RT_GROUP_SCHED have it. Off by default: since 6.12 mainline
    /// kernels without it rely on the fair server alone.
    pub rt_throttling: bool,
    /// Charge SCHED_DEADLINE runtime scale-invariantly (δ · f/f_max · capacity/1024), as Linux
    /// does (default). `false` charges wall-clock execution, as AQuoSA did for LFS++ — the
    /// accounting under which a frequency drop makes budgets overrun (LFS++ §6.3, Fig. 10).
    pub scale_invariant_runtime: bool,
    /// Cost of rt-app's `mem` event per byte, ns of work at capacity 1024 (run like `run` work,
    /// so it stretches on slower CPUs and is scaled by `work_scale`): rt-app `memset()`s its
    /// buffer (`mem_buffer_size`, 4 MiB by default) in buffer-sized chunks. Default
    /// [`DEFAULT_MEM_NS_PER_BYTE`].
    pub mem_ns_per_byte: f64,
    /// Cost of rt-app's `iorun` event per byte, ns of work at capacity 1024: `write(2)`s of the
    /// buffer to `io_device` (`/dev/null` by default). Default [`DEFAULT_IO_NS_PER_BYTE`].
    pub io_ns_per_byte: f64,
    /// Cost of rt-app's `memrun` accesses (per byte read or written, per chase hop) by buffer
    /// size, work at capacity 1024 like `mem`'s. Default: measured on the development machine
    /// ([`MemRunCost::measured`]).
    pub memrun: MemRunCost,
    /// How long a thread moving into a task group (rt-app `taskgroup`) sleeps when no other move
    /// came just before: writing its TID to the group's `tasks` waits for an RCU grace period
    /// (`percpu_down_write(&cgroup_threadgroup_rwsem)` → `rcu_sync_enter()`). Default
    /// [`DEFAULT_TASKGROUP_MOVE_NS`].
    pub taskgroup_move_ns: u64,
    /// How long it sleeps when the previous move on the machine ended less than
    /// `taskgroup_move_window_ns` ago (`rcu_sync`'s fast path). Default
    /// [`DEFAULT_TASKGROUP_MOVE_FAST_NS`].
    pub taskgroup_move_fast_ns: u64,
    /// How long after a move ends the next one takes the fast path (the callback of
    /// `rcu_sync_exit()` is still pending: about a grace period). Default
    /// [`DEFAULT_TASKGROUP_MOVE_WINDOW_NS`].
    pub taskgroup_move_window_ns: u64,
    /// The migration and cache-reload cost model (`crate::cache`), with the calibration profile
    /// it charges from; `None` (the default) charges nothing, so schedules are exact. The cost of
    /// a working-set phase's accesses comes from this profile too, else from the development
    /// machine's ([`CacheProfile::measured`]).
    pub cache_model: Option<Arc<CacheProfile>>,
}

/// Default [`SimConfig::mem_ns_per_byte`], measured on the development machine (2-vCPU KVM
/// guest, "Intel Xeon Processor", glibc, `gcc -O2 crates/sim/tools/memio.c`): `memset()` of a
/// 4 MiB buffer (rt-app's default `mem_buffer_size`), 200 repetitions after 20 warm-ups, median
/// 0.0352–0.0357 ns/byte over two runs (≈ 28 GB/s). See docs/simulator.md, "Synchronisation".
pub const DEFAULT_MEM_NS_PER_BYTE: f64 = 0.035;

/// Default [`SimConfig::io_ns_per_byte`], measured as [`DEFAULT_MEM_NS_PER_BYTE`]: `write(2)` of
/// 4 KiB chunks of the buffer to `/dev/null`, 64 MiB per sample, 20 samples, median
/// 0.0223–0.0224 ns/byte (≈ 92 ns per call). rt-app writes buffer-sized (4 MiB) chunks, which to
/// `/dev/null` cost only the system call (≈ 0.00002 ns/byte); set it for a real device.
pub const DEFAULT_IO_NS_PER_BYTE: f64 = 0.022;

/// Default [`SimConfig::timer_slack`]: the kernel's `timer_slack_ns` of a task not in an rt or
/// deadline class (`init_task`'s, inherited by every process unless `prctl(PR_SET_TIMERSLACK)`
/// changes it).
pub const DEFAULT_TIMER_SLACK_NS: u64 = 50_000;

/// Default [`SimConfig::runtime_burst`]: rt-app's `runtime` loop runs `loadwait(32)`, 32 µs of
/// its calibrated loop, between two reads of the clock.
pub const RTAPP_RUNTIME_BURST_NS: u64 = 32_000;
/// Default [`SimConfig::taskgroup_move_ns`], measured on the development machine (2-vCPU KVM
/// guest, Linux 6.18, HZ=250, cgroup v1 cpu controller) with `crates/sim/tools/tgmove.c` on
/// 2026-11-26: the slow path's mean (its median is 7.9 ms, but a run loses the sum of its moves,
/// and one in six takes four ticks rather than two). See docs/simulator.md, "Task groups".
pub const DEFAULT_TASKGROUP_MOVE_NS: u64 = 9_600_000;

/// Default [`SimConfig::taskgroup_move_fast_ns`], measured as [`DEFAULT_TASKGROUP_MOVE_NS`]
/// (moves back to back; mean).
pub const DEFAULT_TASKGROUP_MOVE_FAST_NS: u64 = 8_000;

/// Default [`SimConfig::taskgroup_move_window_ns`], measured as [`DEFAULT_TASKGROUP_MOVE_NS`]
/// (moves after sleeps of increasing length: fast up to 16.1 ms after the last, mostly slow from
/// 17 ms).
pub const DEFAULT_TASKGROUP_MOVE_WINDOW_NS: u64 = 16_500_000;

/// Most threads one `fork` event's task may have forked before rt-app exits with an error
/// (rt-app.c `FORKS_LIMIT`: counted per forked task, over every thread that forks it).
pub const FORKS_LIMIT: u32 = 1024;

impl SimConfig {
    pub fn new(cpus: usize) -> Self {
        SimConfig {
            cpus,
            capacities: None,
            seed: 0,
            context_switch_cost: 0,
            migration_cost: 0,
            wakeup_latency: 0,
            idle_exit_latency: 0,
            timer_slack: DEFAULT_TIMER_SLACK_NS,
            runtime_burst: RTAPP_RUNTIME_BURST_NS,
            fair_balance: FairBalance::Linux,
            newidle_ratio: BOOT_NEWIDLE_RATIO,
            work_scale: 1.0,
            rt_runtime_us: 950_000,
            rt_period_us: 1_000_000,
            rr_timeslice: RR_TIMESLICE_NS,
            freqs_khz: vec![1_000_000],
            fair_server: Some(pacer_model::reservation::DEFAULT_FAIR_SERVER),
            fair: None,
            job_end_cpu_time: true,
            rt_throttling: false,
            scale_invariant_runtime: true,
            platform: None,
            governors: Vec::new(),
            tick_ns: 4_000_000,
            tick_phase: None,
            track_util: false,
            mem_bound: 0.0,
            mem_ns_per_byte: DEFAULT_MEM_NS_PER_BYTE,
            io_ns_per_byte: DEFAULT_IO_NS_PER_BYTE,
            memrun: MemRunCost::measured(),
            taskgroup_move_ns: DEFAULT_TASKGROUP_MOVE_NS,
            taskgroup_move_fast_ns: DEFAULT_TASKGROUP_MOVE_FAST_NS,
            taskgroup_move_window_ns: DEFAULT_TASKGROUP_MOVE_WINDOW_NS,
            cache_model: None,
        }
    }

    /// Settings for `platform` (its CPU count), every cluster under `governor`.
    pub fn with_platform(platform: Platform, governor: Governor) -> Self {
        let mut c = SimConfig::new(platform.num_cpus());
        c.platform = Some(platform);
        c.governors = vec![governor];
        c
    }
}

/// Why a workload cannot be simulated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error("the platform needs at least one CPU")]
    NoCpus,
    #[error("the workload has no threads")]
    NoThreads,
    #[error(
        "thread `{thread}`: affinity names CPU {cpu}, but the simulated platform has {}",
        pacer_model::platform::cpu_count(*cpus)
    )]
    AffinityOutOfRange { thread: String, cpu: usize, cpus: usize },
    #[error("thread `{thread}`: empty CPU affinity")]
    EmptyAffinity { thread: String },
    #[error("thread `{thread}`: {message}")]
    BadThread { thread: String, message: String },
    #[error("capacities: expected {cpus} values in 1..=1024, got {got:?}")]
    BadCapacities { cpus: usize, got: Vec<u32> },
    #[error("frequencies: expected at least one value, ascending and > 0, got {0:?}")]
    BadFrequencies(Vec<u32>),
    #[error("platform: {0}")]
    Platform(#[from] PlatformError),
    #[error("cpus is {cpus}, but the platform has {platform} CPUs")]
    PlatformCpus { cpus: usize, platform: usize },
    #[error("capacities: give CPU capacities in the platform when there is one, not in `capacities`")]
    CapacitiesWithPlatform,
    #[error("governors: expected none, one, or one per cluster ({clusters}), got {got}")]
    GovernorCount { clusters: usize, got: usize },
    #[error("governors[{cluster}]: {message}")]
    BadGovernor { cluster: usize, message: String },
    #[error("tick_ns: must be > 0")]
    BadTick,
    #[error("mem_bound: {0}")]
    BadMemBound(String),
    #[error("work_scale: expected a finite factor > 0, got {0}")]
    BadWorkScale(String),
    #[error("no cluster {cluster}: the platform has clusters 0..{clusters}")]
    NoSuchCluster { cluster: usize, clusters: usize },
    #[error("no thread {0}")]
    NoSuchThread(u32),
    #[error("{which}: expected a finite cost >= 0 ns per byte, got {value}")]
    BadByteCost { which: &'static str, value: String },
    #[error("thread `{thread}`: phase {phase}: the `{event}` event names resource {resource}: {problem}")]
    BadResource {
        thread: String,
        phase: usize,
        event: &'static str,
        resource: usize,
        problem: String,
    },
    #[error(
        "thread `{thread}`: phase {phase}: `fork` names thread spec {spec}, but the workload has {specs}"
    )]
    BadFork {
        thread: String,
        phase: usize,
        spec: usize,
        specs: usize,
    },
    /// A run stopped as rt-app would exit: the kernel refused a phase's policy.
    #[error("at {t} ns: thread `{thread}`: sched_setattr() of a phase's policy failed: {message}; the run stopped there, as rt-app exits")]
    PhasePolicy { t: u64, thread: String, message: String },
    /// A run stopped as rt-app would exit: a task was forked [`FORKS_LIMIT`] times.
    #[error("at {t} ns: thread `{thread}` cannot fork `{task}` again: it reached its fork limit ({limit}); the run stopped there, as rt-app exits")]
    ForkLimit {
        t: u64,
        thread: String,
        task: String,
        limit: u32,
    },
    #[error("cluster {cluster}: {khz} kHz is not one of the available frequencies {available:?}")]
    NotAnOpp {
        cluster: usize,
        khz: u32,
        available: Vec<u32>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NotStarted,
    /// Blocked (sleep, timer) or waiting for a replenishment with nothing to run.
    Sleeping,
    /// On a run queue.
    Queued,
    Running,
    /// Runnable but its SCHED_DEADLINE runtime is exhausted until the replenishment timer.
    Throttled,
    Exited,
}

/// Whether a thread at `pc` has no event left to run (only pass and phase boundaries, then the
/// end). `Cursor` is a copy, so looking ahead changes nothing.
fn program_ended(spec: &ThreadSpec, mut pc: Cursor) -> bool {
    // A thread that loops forever never ends (and most do: skip the walk).
    if spec.loops.is_none() {
        return false;
    }
    loop {
        match pc.advance(spec) {
            Walk::Done => return true,
            Walk::Event(_) => return false,
            Walk::PassStart(_) | Walk::PassEnd => {}
        }
    }
}

/// An rt-app `runtime` event in progress.
#[derive(Debug, Clone, Copy)]
struct RuntimeEvent {
    /// Its duration until it starts, then its wall-clock end.
    end: u64,
    /// Work done in it so far (ns at capacity 1024).
    done: u64,
    /// It has begun: the thread ran since it reached the event.
    started: bool,
}

#[derive(Debug, Clone, Copy)]
struct Job {
    seq: u64,
    release: u64,
    deadline: u64,
    start: Option<u64>,
    exec: u64,
    preemptions: u32,
    migrations: u32,
    last_cpu: Option<u32>,
}

struct Thread {
    /// The scheduling entity of the thread's class.
    se: Entity,
    /// Index of its spec in `Workload::threads` (threads started by `fork` share one spec).
    spec: u32,
    /// Some phase of its spec sets a policy, CPUs or a task group (applied at each pass start).
    phase_changes: bool,
    affinity: Vec<bool>,
    /// The one CPU of an affinity of size 1 (`nr_cpus_allowed == 1`): CPU selection and push
    /// have nothing to look for.
    pinned: Option<u32>,
    state: State,
    /// Run queue the thread belongs to (last CPU).
    cpu: u32,
    pc: Cursor,
    /// Work left in the current run event: ns at capacity 1024 (for `runtime`, up to the end
    /// predicted if it runs on without preemption; [`Sim::runtime_left`]).
    remaining: u64,
    /// Switch-in cost still to be paid before work progresses.
    overhead: u64,
    /// Time still to wait, uncharged, before it runs on a CPU leaving idle
    /// ([`SimConfig::idle_exit_latency`]).
    stall: u64,
    /// The `runtime` event in progress, if any.
    runtime: Option<RuntimeEvent>,
    /// Woken by a synchronisation operation, [`SimConfig::wakeup_latency`] ago: the rest of
    /// the event it blocked in runs before its program goes on.
    sync_resume: bool,
    /// The CPU it last woke on (`p->recent_used_cpu`).
    recent_cpu: u32,
    /// Its next sleep is not a timer's (a task-group move waits for an RCU grace period): it
    /// has no timer slack.
    exact_wake: bool,
    /// When it last left a CPU (`se.exec_start` of a task not running), `u64::MAX` before it
    /// ever ran: a task that ran within the migration cost is cache hot.
    last_ran: u64,
    job: Option<Job>,
    /// Release time of the job the thread starts when it next wakes (timer expiry).
    pending_release: Option<u64>,
    rel_deadline: u64,
    period: u64,
    has_timer: bool,
    t_first: u64,
    timer_gen: u64,
    /// Its class throttled it (a SCHED_DEADLINE thread out of runtime): it waits for the class's
    /// replenishment timer.
    throttled: bool,
    /// The timer expiry it sleeps until once it runs again, after being preempted at the end of
    /// its job ([`SimConfig::job_end_cpu_time`]).
    pending_sleep: Option<u64>,
    /// Since when the thread has been runnable without a CPU (queued or throttled), for its
    /// run delay.
    waiting_since: Option<u64>,
    rng: ThreadRng,
    stats: ThreadStats,
    /// The policy as last set (for `Kernel::policy`).
    policy: Policy,
    /// Wake-ups recorded for the adaptation engine, when tracing is on.
    wake_log: Option<Vec<Wakeup>>,
    /// Last workUnits the thread announced.
    units: u64,
    cooperative: bool,
    /// Frequency-insensitive fraction of its work (`SimConfig::mem_bound`).
    mem: f64,
}

struct Cpu {
    curr: Option<ThreadId>,
    exec_start: u64,
    gen: u64,
    /// Current speed on the 1024 scale: the CPU's capacity at its cluster's current OPP. Drives
    /// scale-invariant runtime accounting and the utilisation signals.
    speed: u64,
    /// Rate at which the running thread's work progresses (1024 = the biggest CPU at f_max):
    /// `speed`, or faster for a thread with a memory-bound fraction.
    work_speed: u64,
    /// Busy time charged by `update_curr` since the cluster's OPP last changed (residency is
    /// settled per OPP change, not per context switch, to keep the switch path lean).
    busy_acc: u64,
    /// Time of the live CPU-local event, if one is armed (re-arming at the same time is a no-op,
    /// which keeps stale entries out of the event heap).
    armed: Option<u64>,
    capacity: u64,
    rq: Rq,
    /// Since when the CPU has been idle (`u64::MAX` while it runs a thread): a thread switched
    /// in later pays [`SimConfig::idle_exit_latency`].
    idle_at: u64,
    /// Time of the live per-CPU class timer (fair server, RT period), if one is armed.
    rq_timer: Option<u64>,
    rq_gen: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    CpuLocal = 0,
    /// A cluster's new OPP takes effect (id = cluster).
    FreqSwitch = 1,
    Replenish = 2,
    Inactive = 3,
    Wakeup = 4,
    /// Scheduler tick of a busy CPU of a schedutil cluster.
    Tick = 5,
    Controller = 6,
    /// A per-CPU timer of the classes: the fair server's, RT throttling's period (id = CPU).
    RqTimer = 7,
}

impl Kind {
    const ALL: [Kind; 8] = [
        Kind::CpuLocal,
        Kind::FreqSwitch,
        Kind::Replenish,
        Kind::Inactive,
        Kind::Wakeup,
        Kind::Tick,
        Kind::Controller,
        Kind::RqTimer,
    ];
}

/// A pending event. The heap orders by `key` alone, (time, kind, sequence) packed into one
/// integer: the event heap is the simulator's hottest structure (about a third of the time of
/// a small case), and one wide comparison of a 32-byte record beats a tuple comparison of a
/// 40-byte one.
#[derive(Debug, Clone, Copy)]
struct QueuedEvent {
    /// time << 64 | kind << 56 | sequence (sequence < 2⁵⁶, unique).
    key: u128,
    gen: u64,
    id: u32,
}

impl QueuedEvent {
    fn time(&self) -> u64 {
        (self.key >> 64) as u64
    }

    fn kind(&self) -> Kind {
        Kind::ALL[((self.key >> 56) & 0xff) as usize]
    }
}

impl PartialEq for QueuedEvent {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}

impl Eq for QueuedEvent {}

impl PartialOrd for QueuedEvent {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for QueuedEvent {
    /// Reversed: `BinaryHeap` is a max-heap and the earliest event must come out first.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.key.cmp(&self.key)
    }
}

#[derive(Default)]
struct SharedTimer {
    next: Option<u64>,
}

/// A simulation in progress.
pub struct Sim {
    workload: Workload,
    cfg: SimConfig,
    threads: Vec<Thread>,
    cpus: Vec<Cpu>,
    timers: Vec<SharedTimer>,
    events: BinaryHeap<QueuedEvent>,
    seq: u64,
    now: u64,
    tracing: bool,
    events_processed: u64,
    jobs_finished: u64,
    /// Results produced while handling one event, delivered to the observer right after it.
    pending_jobs: Vec<JobRecord>,
    /// Reused buffer of the wake-ups of one instant.
    wake_batch: Vec<(Key, ThreadId)>,
    pending_trace: Vec<TraceEvent>,
    /// Index in `root_domains` of each CPU's root domain (threads never move between domains).
    root_domain: Vec<usize>,
    /// The root domains, with their SCHED_DEADLINE bandwidth (owned by the deadline class).
    root_domains: Vec<RootDomain>,
    /// Settings of the fair class.
    fair: FairParams,
    /// Last thread noted running on each CPU (switch counts and the trace).
    traced: Vec<Option<ThreadId>>,
    /// Per root domain, the key of each CPU's running thread and of its most urgent queued one,
    /// in heaps (the kernel's cpudl): CPU selection, push and pull on every wake-up and switch
    /// without scanning all CPUs.
    cpudl: RootHeaps,
    /// The platform simulated (the configured one, or the one built from `freqs_khz`).
    platform: Platform,
    /// Frequency domains, one per cluster.
    domains: Vec<Domain>,
    /// Per CPU: residency, utilisation signals, governor bookkeeping.
    dvfs: Vec<CpuDvfs>,
    /// Some cluster runs schedutil: the governor must follow scheduler events.
    dvfs_on: bool,
    /// Some CPU tracks utilisation signals.
    track: bool,
    /// Hosted adaptation controllers (taken out while they run, so they can borrow the sim).
    controllers: Vec<Option<Box<dyn Controller>>>,
    pending_app: Vec<AppEvent>,
    /// Names, shared objects and per-thread synchronisation state, boxed: the hot path never
    /// touches them but for one check per event, and `Sim`'s hot fields stay where they were.
    sync: Box<SyncState>,
    /// The fair class's load balancing as Linux does it, when fair threads share CPUs
    /// ([`FairBalance::Linux`] and more than one CPU).
    lb: Option<Box<FairLb>>,
    /// Task groups (rt-app `taskgroup`), when the workload names some: the shares of their
    /// threads and the moves between them (`crate::class::group`).
    tg: Option<Box<GroupState>>,
    /// The cache model, when configured ([`SimConfig::cache_model`]).
    cache: Option<Box<CacheModel>>,
}

struct SyncState {
    /// Wake-ups, priority-inheritance updates, forks and phase-level changes decided while a
    /// thread steps through its program, applied once the event that ran it is over (the
    /// stepping thread's CPU must not change under it).
    pending: Vec<SyncAction>,
    /// Each thread's name: its spec's, or rt-app's `<task>-<index>-<nfork:04>` for a forked one.
    names: Vec<String>,
    /// Mutexes, condition variables, barriers and semaphores (`crate::sync`).
    objects: Objects,
    /// Per thread, its synchronisation state (kept apart from `Thread`, which the hot path
    /// walks).
    tsync: Vec<ThreadSync>,
    /// Mutexes inherit priorities (`RunSettings::pi_enabled`).
    pi: bool,
    /// Threads forked so far from each spec (rt-app's per-task `nforks`).
    nforks: Vec<u32>,
    /// Why the run stopped early, if it did (a fork past [`FORKS_LIMIT`], a refused phase
    /// policy).
    failure: Option<SimError>,
    /// Wake-ups by synchronisation at the current instant, and that instant: bounds a ping-pong
    /// between threads that never lets time pass.
    spins: (u64, u64),
    /// Reused buffer of woken condition-variable or barrier waiters.
    woken: Vec<Waiter>,
    /// Threads forked while handling the current event, for [`Observer::thread_started`].
    started: Vec<ThreadId>,
}

/// A thread's synchronisation state.
#[derive(Debug, Default)]
struct ThreadSync {
    /// Operations of the current sync event still to run, last first.
    ops: Vec<Op>,
    /// Mutexes it owns (priority inheritance looks at their waiters).
    owned: Vec<usize>,
    /// The mutex it waits for, if any (priority-inheritance chains).
    blocked_on: Option<usize>,
    /// It is blocked on a synchronisation object (not a timer): only a sync wake-up resumes it.
    blocked: bool,
    /// The policy priority inheritance gives it now, if boosted.
    boost: Option<Policy>,
}

#[derive(Debug, Clone)]
enum SyncAction {
    Wake(ThreadId),
    /// Recompute priority inheritance for a mutex owner.
    Pi(ThreadId),
    Fork {
        parent: ThreadId,
        spec: usize,
    },
    /// A phase-level policy (rt-app `set_thread_param()`).
    SetPolicy(ThreadId, Policy),
    /// A phase-level CPU set, or back to the thread's (rt-app `set_thread_affinity()`).
    SetAffinity(ThreadId, Vec<bool>),
}

impl Sim {
    /// Prepares a simulation of `workload` on `cfg.cpus` CPUs; nothing runs until [`Sim::run_until`].
    pub fn new(workload: Workload, cfg: SimConfig) -> Result<Sim, SimError> {
        let m = cfg.cpus;
        if m == 0 {
            return Err(SimError::NoCpus);
        }
        if workload.threads.is_empty() {
            return Err(SimError::NoThreads);
        }
        if !(cfg.work_scale.is_finite() && cfg.work_scale > 0.0) {
            return Err(SimError::BadWorkScale(cfg.work_scale.to_string()));
        }
        let max_bw = to_ratio(cfg.rt_period_us, cfg.rt_runtime_us);
        let fair = FairParams {
            model: cfg.fair.unwrap_or_else(|| FairModel::eevdf(m)),
            tick: cfg.tick_ns,
            tick_phase: cfg.tick_phase.unwrap_or_else(|| {
                pacer_workload::thread_rng(cfg.seed, usize::MAX).random_range(0..cfg.tick_ns.max(1))
            }) % cfg.tick_ns.max(1),
        };
        let f = &cfg.freqs_khz;
        if f.is_empty() || f.contains(&0) || f.windows(2).any(|w| w[0] >= w[1]) {
            return Err(SimError::BadFrequencies(f.clone()));
        }
        let platform = match &cfg.platform {
            None => {
                let caps = match &cfg.capacities {
                    None => vec![CAPACITY_SCALE; m],
                    Some(c) if c.len() == m && c.iter().all(|&x| (1..=CAPACITY_SCALE).contains(&x)) => {
                        c.clone()
                    }
                    Some(c) => {
                        return Err(SimError::BadCapacities {
                            cpus: m,
                            got: c.clone(),
                        })
                    }
                };
                Platform::single_domain(&caps, f)
            }
            Some(p) => {
                if cfg.capacities.is_some() {
                    return Err(SimError::CapacitiesWithPlatform);
                }
                if p.num_cpus() != m {
                    return Err(SimError::PlatformCpus {
                        cpus: m,
                        platform: p.num_cpus(),
                    });
                }
                p.validate()?;
                let mut p = p.clone();
                // A cluster without an OPP table runs at `freqs_khz`, powers 0.
                let fallback = Platform::single_domain(&[CAPACITY_SCALE], f)
                    .clusters
                    .remove(0)
                    .opps;
                for cl in p.clusters.iter_mut().filter(|c| c.opps.is_empty()) {
                    cl.opps = fallback.clone();
                }
                p
            }
        };
        if !(cfg.mem_bound.is_finite() && (0.0..=1.0).contains(&cfg.mem_bound)) {
            return Err(SimError::BadMemBound(format!(
                "is {}, expected a fraction in [0, 1]",
                cfg.mem_bound
            )));
        }
        for (which, value) in [
            ("mem_ns_per_byte", cfg.mem_ns_per_byte),
            ("io_ns_per_byte", cfg.io_ns_per_byte),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(SimError::BadByteCost {
                    which,
                    value: value.to_string(),
                });
            }
        }
        if cfg.tick_ns == 0 {
            return Err(SimError::BadTick);
        }
        let domains = build_domains(&platform, &cfg.governors)?;
        let dvfs_on = domains.iter().any(|d| d.schedutil().is_some());
        // Linux's fair balancing reads each CPU's fair utilisation (PELT).
        let fair_lb = cfg.fair_balance == FairBalance::Linux && m > 1 && has_fair_threads(&workload);
        let dvfs = platform
            .cpus
            .iter()
            .map(|c| {
                let d = &domains[c.cluster];
                let (walt, multiplier) = signal_settings(d);
                let tracked = d.schedutil().is_some() || cfg.track_util || fair_lb;
                CpuDvfs {
                    cluster: c.cluster,
                    opp_since: 0,
                    busy: vec![0; d.opps.len()],
                    idle: vec![0; d.opps.len()],
                    signals: tracked.then(|| Signals::new(walt, multiplier)),
                    bw_seen: 0,
                    tick_armed: false,
                    tick_gen: 0,
                }
            })
            .collect::<Vec<_>>();
        let mut threads = Vec::with_capacity(workload.threads.len());
        let mut names = Vec::with_capacity(workload.threads.len());
        // Forked specs are checked now too (a bad one would only show at its first fork), and
        // their CPUs, and those of phase-level `cpus`, join the root domains they may run in.
        let mut extra_affinities = Vec::new();
        for (i, spec) in workload.threads.iter().enumerate() {
            // A thread's draws are seeded by its id, which is its spec's index in a workload
            // without forked specs.
            let th = new_thread(i, threads.len(), spec, &cfg, &fair)?;
            check_spec(spec, &workload, m, &fair)?;
            // Every CPU a thread may run on, in any phase, links one root domain: a thread
            // never moves between domains.
            if th.phase_changes {
                let mut all = th.affinity.clone();
                for cpus in spec.phases.iter().filter_map(|p| p.affinity.as_ref()) {
                    for (a, b) in all.iter_mut().zip(affinity_mask(cpus, m)?) {
                        *a |= b;
                    }
                }
                extra_affinities.push(all);
            }
            if spec.forked {
                extra_affinities.push(th.affinity);
            } else {
                names.push(spec.name.clone());
                threads.push(th);
            }
        }
        if threads.is_empty() {
            return Err(SimError::NoThreads);
        }
        let mut cpus: Vec<Cpu> = platform
            .cpus
            .iter()
            .map(|c| Cpu {
                curr: None,
                exec_start: 0,
                gen: 0,
                armed: None,
                capacity: c.capacity as u64,
                speed: domains[c.cluster].speed(c.capacity),
                work_speed: domains[c.cluster].speed(c.capacity),
                busy_acc: 0,
                rq: Rq::new(
                    max_bw,
                    fair,
                    cfg.fair_server,
                    cfg.rt_throttling
                        .then_some((cfg.rt_runtime_us * 1000, cfg.rt_period_us * 1000)),
                ),
                rq_timer: None,
                rq_gen: 0,
                idle_at: 0,
            })
            .collect();
        // Root domains are the connected components of CPUs linked by some thread's affinity
        // (exclusive cpusets in the kernel). Each holds its tasks' SCHED_DEADLINE bandwidth and
        // its CPUs' fair servers; GRUB's extra_bw is the unallocated rest, shared by its CPUs.
        let affinities = threads
            .iter()
            .map(|t| t.affinity.as_slice())
            .chain(extra_affinities.iter().map(Vec::as_slice));
        let (root_domain, mut root_domains) = build_root_domains(&cpus, affinities, &cfg);
        for rd in &mut root_domains {
            let tasks: u64 = threads
                .iter()
                .filter(|t| rd.cpus.contains(&(t.cpu as usize)))
                .map(|t| t.se.bandwidth())
                .sum();
            rd.total_bw += tasks;
            let share = tasks / rd.cpus.len() as u64;
            for &c in &rd.cpus {
                cpus[c].rq.dl.extra_bw = max_bw.saturating_sub(share);
            }
        }
        for t in &threads {
            cpus[t.cpu as usize].rq.attach_bw(&t.se);
        }
        let domain_cpus: Vec<Vec<usize>> = root_domains.iter().map(|d| d.cpus.clone()).collect();
        let cpudl = RootHeaps::new(&domain_cpus);
        // An LLC is a cluster: the CPUs sharing a frequency share their last-level cache.
        let lb = fair_lb.then(|| {
            let llc = platform
                .cpus
                .iter()
                .map(|c| {
                    (0..m)
                        .filter(|&o| platform.cpus[o].cluster == c.cluster)
                        .collect::<Vec<_>>()
                })
                .collect();
            Box::new(FairLb::new(
                cfg.seed,
                llc,
                &domain_cpus,
                cfg.tick_ns,
                cfg.newidle_ratio,
            ))
        });
        let timers = (0..workload.timer_count())
            .map(|_| SharedTimer::default())
            .collect();
        let tg = task_groups(&workload, &cfg, threads.len());
        let objects = Objects::new(&workload);
        let tsync = (0..threads.len()).map(|_| ThreadSync::default()).collect();
        let pi = workload.settings.pi_enabled;
        let nforks = vec![0; workload.threads.len()];
        let cache = cfg
            .cache_model
            .clone()
            .map(|p| Box::new(CacheModel::new(p, m, &workload.threads)));
        let mut sim = Sim {
            workload,
            cfg,
            threads,
            cpus,
            timers,
            events: BinaryHeap::new(),
            seq: 0,
            now: 0,
            tracing: false,
            events_processed: 0,
            jobs_finished: 0,
            pending_jobs: Vec::new(),
            wake_batch: Vec::new(),
            pending_trace: Vec::new(),
            root_domain,
            root_domains,
            fair,
            traced: vec![None; m],
            cpudl,
            platform,
            domains,
            track: dvfs.iter().any(|d| d.signals.is_some()),
            dvfs,
            dvfs_on,
            controllers: Vec::new(),
            pending_app: Vec::new(),
            sync: Box::new(SyncState {
                pending: Vec::new(),
                names,
                objects,
                tsync,
                pi,
                nforks,
                failure: None,
                spins: (0, 0),
                woken: Vec::new(),
                started: Vec::new(),
            }),
            lb,
            tg,
            cache,
        };
        for i in 0..sim.threads.len() {
            let delay = sim.workload.threads[sim.threads[i].spec as usize]
                .start_delay
                .ns();
            sim.push_event(delay, Kind::Wakeup, i as u32, 0);
        }
        Ok(sim)
    }

    /// Current simulated time.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Events processed so far.
    pub fn events_processed(&self) -> u64 {
        self.events_processed
    }

    /// Jobs finished so far.
    pub fn jobs_finished(&self) -> u64 {
        self.jobs_finished
    }

    /// Thread names in thread-id order: the threads started with the run (their spec's name),
    /// then those `fork` events started so far, named as rt-app names them
    /// (`<task>-<index>-<nfork:04>`). Ask again after running to name forked threads' jobs.
    pub fn thread_names(&self) -> Vec<String> {
        self.sync.names.clone()
    }

    /// The name of thread `t` (see [`Sim::thread_names`]).
    pub fn thread_name(&self, t: ThreadId) -> Option<&str> {
        self.sync.names.get(t as usize).map(String::as_str)
    }

    /// Number of threads so far (the initial ones and those forked).
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Why the run stopped before its horizon, if it did: rt-app would have exited there (a
    /// task forked [`FORKS_LIMIT`] times). The events after it are not simulated.
    pub fn failure(&self) -> Option<&SimError> {
        self.sync.failure.as_ref()
    }

    /// Whether thread `t` is blocked on a mutex, condition variable, barrier or semaphore.
    pub fn sync_blocked(&self, t: ThreadId) -> Option<bool> {
        self.sync.tsync.get(t as usize).map(|s| s.blocked)
    }

    /// The owner of mutex `m` (an index into `Workload::resources`), if it is held.
    pub fn mutex_owner(&self, m: usize) -> Option<ThreadId> {
        (m < self.workload.resources.len())
            .then(|| self.sync.objects.owner(m))
            .flatten()
    }

    /// Current SCHED_DEADLINE state of a thread: (absolute deadline, remaining runtime), the
    /// quantities the kernel exposes and the adaptation engine reads.
    pub fn dl_state(&self, t: ThreadId) -> Option<(u64, i64)> {
        self.threads.get(t as usize)?.se.dl_state()
    }

    /// Per-thread counters so far.
    pub fn stats(&self) -> Vec<ThreadStats> {
        self.threads.iter().map(|t| t.stats).collect()
    }

    fn push_event(&mut self, time: u64, kind: Kind, id: u32, gen: u64) {
        self.seq += 1;
        debug_assert!(self.seq < 1 << 56);
        self.events.push(QueuedEvent {
            key: (time as u128) << 64 | (kind as u128) << 56 | self.seq as u128,
            gen,
            id,
        });
    }

    /// Runs every event up to and including time `until`, then accounts running threads up to
    /// `until`. Call repeatedly with increasing times (e.g. to drive a progress bar).
    pub fn run_until(&mut self, until: u64, obs: &mut dyn Observer) {
        self.tracing = obs.wants_events();
        // Changes made between runs (reservations set from outside) reach the governor now.
        if self.dvfs_on {
            self.governors_run();
            for e in self.pending_trace.drain(..) {
                obs.event(&e);
            }
        }
        while let Some(&e) = self.events.peek() {
            let (time, kind, id, gen) = (e.time(), e.kind(), e.id, e.gen);
            if time > until {
                break;
            }
            self.events.pop();
            // Cancelled timers stay in the heap and are skipped here (lazy deletion).
            let live = match kind {
                Kind::CpuLocal => self.cpus[id as usize].gen == gen,
                Kind::Replenish | Kind::Inactive => self.threads[id as usize].timer_gen == gen,
                Kind::FreqSwitch => self.domains[id as usize].switch_gen == gen,
                Kind::Tick => self.dvfs[id as usize].tick_gen == gen,
                Kind::RqTimer => self.cpus[id as usize].rq_gen == gen,
                Kind::Wakeup | Kind::Controller => true,
            };
            if !live {
                continue;
            }
            self.now = time;
            self.events_processed += 1;
            match kind {
                Kind::CpuLocal => {
                    self.cpus[id as usize].armed = None;
                    self.cpu_local(id as usize);
                    // Only threads stepping through their programs (here and at wake-ups)
                    // decide sync actions.
                    if !self.sync.pending.is_empty() {
                        self.flush_sync(obs);
                    }
                }
                Kind::Replenish => self.replenish_timer(id),
                Kind::Inactive => self.inactive_timer(id),
                Kind::Wakeup => {
                    self.wakeup_batch(time, id);
                    if !self.sync.pending.is_empty() {
                        self.flush_sync(obs);
                    }
                }
                Kind::Controller => self.run_controller(id as usize),
                Kind::FreqSwitch => self.freq_switch_event(id as usize),
                Kind::Tick => self.tick_event(id as usize),
                Kind::RqTimer => self.rq_timer_event(id as usize),
            }
            self.dispatch_app_events();
            if self.dvfs_on {
                self.governors_run();
            }
            for e in self.pending_trace.drain(..) {
                obs.event(&e);
            }
            for r in self.pending_jobs.drain(..) {
                obs.job(&r);
            }
        }
        self.now = self.now.max(until);
        for c in 0..self.cpus.len() {
            self.update_curr(c);
        }
    }

    // ---- priorities ---------------------------------------------------------------------------

    fn curr_key(&self, cpu: usize) -> Key {
        self.cpudl.running_key(cpu)
    }

    fn best_queued(&self, cpu: usize) -> Option<(Key, ThreadId)> {
        self.cpus[cpu].rq.pick()
    }

    // ---- run queues ---------------------------------------------------------------------------

    fn enqueue(&mut self, t: ThreadId, cpu: usize, flags: Enqueue) {
        // `enqueue_entity()` brings the running entity of the same class up to date first, so
        // a placement against the queue's average sees the time it ran.
        if let Some(c) = self.cpus[cpu].curr {
            if self.threads[c as usize]
                .se
                .same_queue(&self.threads[t as usize].se)
            {
                self.update_curr(cpu);
            }
        }
        self.set_state(t, State::Queued);
        if self.tg.is_some() {
            self.taskgroup_changed(t, Some(cpu));
        }
        let th = &mut self.threads[t as usize];
        th.cpu = cpu as u32;
        self.cpus[cpu].rq.enqueue(t, &mut th.se, flags, self.now);
        self.queued_changed(cpu);
        if self.lb.is_some() {
            self.note_overload(cpu);
        }
    }

    fn dequeue(&mut self, t: ThreadId) {
        let th = &mut self.threads[t as usize];
        let cpu = th.cpu as usize;
        self.cpus[cpu].rq.dequeue(t, &mut th.se);
        self.queued_changed(cpu);
        if self.tg.is_some() {
            self.taskgroup_changed(t, None);
        }
    }

    /// `cpu`'s run queue changed: the pull heap asks for its most urgent queued key at the next
    /// pull.
    fn queued_changed(&mut self, cpu: usize) {
        self.cpudl.queued_changed(cpu);
    }

    /// Moves a queued thread's run-queue membership (and its bandwidth) to `to`.
    fn migrate_queued(&mut self, t: ThreadId, to: usize) {
        let from = self.threads[t as usize].cpu as usize;
        self.dequeue(t);
        self.move_bw(t, from, to);
        let flags = Enqueue {
            migrated: true,
            ..Enqueue::default()
        };
        self.enqueue(t, to, flags);
        self.trace(TraceEvent::Migrate {
            t: self.now,
            thread: t,
            from: from as u32,
            to: to as u32,
        });
    }

    /// Moves a thread's bandwidth from `from`'s run queue to `to`'s (`migrate_task_rq_dl()`).
    fn move_bw(&mut self, t: ThreadId, from: usize, to: usize) {
        if from == to {
            return;
        }
        if self.threads[t as usize].se.bandwidth() > 0 {
            self.update_curr(from);
            self.update_curr(to);
            let se = self.threads[t as usize].se;
            self.cpus[from].rq.detach_bw(&se);
            self.cpus[to].rq.attach_bw(&se);
            if se.holds_running_bw() {
                self.dl_bw_changed(from);
                self.dl_bw_changed(to);
            }
            self.reprogram(from);
            self.reprogram(to);
        }
        self.threads[t as usize].cpu = to as u32;
    }
}

/// Whether some thread of `w` may run in the fair class (its policy, or a phase's).
fn has_fair_threads(w: &Workload) -> bool {
    w.threads.iter().any(|t| {
        t.policy.is_fair()
            || t.phases
                .iter()
                .any(|p| p.policy.as_ref().is_some_and(Policy::is_fair))
    })
}

/// Progress rate (1024 scale) of work whose fraction `mem` does not scale with frequency, on a CPU
/// of top capacity `cap` now at `speed`: time per unit of work is m + (1 − m) · cap / speed times
/// its time at the top OPP.
fn work_speed(speed: u64, cap: u64, mem: f64) -> u64 {
    if mem <= 0.0 || speed >= cap {
        return speed;
    }
    let (s, c) = (speed as f64, cap as f64);
    ((c * s / (mem * s + (1.0 - mem) * c)).round() as u64).clamp(speed, cap)
}

/// The task groups the workload's threads name (thread and phase level, forked specs
/// included), with every thread in the root; `None` when it names none.
fn task_groups(w: &Workload, cfg: &SimConfig, threads: usize) -> Option<Box<GroupState>> {
    let paths = w.threads.iter().flat_map(|t| {
        t.taskgroup
            .iter()
            .chain(t.phases.iter().filter_map(|p| p.taskgroup.as_ref()))
    });
    let named = paths.clone().next().is_some();
    let groups = TaskGroups::new(paths.map(String::as_str), cfg.cpus);
    if !named {
        return None;
    }
    let costs = MoveCosts {
        slow: cfg.taskgroup_move_ns,
        fast: cfg.taskgroup_move_fast_ns,
        window: cfg.taskgroup_move_window_ns,
    };
    let mut g = GroupState::new(groups, costs);
    if threads > 0 {
        g.add_thread(threads as ThreadId - 1);
    }
    Some(Box::new(g))
}

/// Refuses what the simulator cannot run in a thread spec: phase-level changes, sync events
/// naming missing resources or resources of the wrong kind, forks of missing specs, programs
/// that would never let time pass or have nothing to run.
fn check_spec(spec: &ThreadSpec, w: &Workload, m: usize, fair: &FairParams) -> Result<(), SimError> {
    let bad = |message: String| SimError::BadThread {
        thread: spec.name.clone(),
        message,
    };
    for (phase, p) in spec.phases.iter().enumerate() {
        if let Some(cpus) = &p.affinity {
            affinity_mask(cpus, m).map_err(|e| match e {
                SimError::AffinityOutOfRange { cpu, cpus, .. } => SimError::AffinityOutOfRange {
                    thread: format!("{} (phase {phase})", spec.name),
                    cpu,
                    cpus,
                },
                _ => SimError::EmptyAffinity {
                    thread: format!("{} (phase {phase})", spec.name),
                },
            })?;
        }
        if let Some(policy) = &p.policy {
            Entity::from_policy(policy, fair).map_err(|message| SimError::BadThread {
                thread: spec.name.clone(),
                message: format!("phase {phase}: {message}"),
            })?;
        }
    }
    for (phase, p) in spec.phases.iter().enumerate() {
        for e in &p.events {
            if let Event::Fork { thread } = *e {
                if thread >= w.threads.len() {
                    return Err(SimError::BadFork {
                        thread: spec.name.clone(),
                        phase,
                        spec: thread,
                        specs: w.threads.len(),
                    });
                }
            }
            if let Event::WorkingSet(ws) = e {
                ws.validate()
                    .map_err(|err| bad(format!("phase {phase}: pacer_wss: {err}")))?;
            }
            if let Event::MemRun { buffer, access, .. } = *e {
                if let Some(problem) = w.mem_buffer_problem(buffer, access) {
                    return Err(bad(format!("phase {phase}: the `memrun` event names {problem}")));
                }
            }
            for (r, need) in e.needs().into_iter().flatten() {
                if let Some(problem) = w.resource_problem(r, need) {
                    return Err(SimError::BadResource {
                        thread: spec.name.clone(),
                        phase,
                        event: e.rtapp_name(),
                        resource: r.0,
                        problem,
                    });
                }
            }
        }
    }
    // Task groups hold fair threads only, as rt-app checks (the cpu controller's rt groups have
    // no runtime of their own); the group shares are not modelled for boosted weights.
    let (mut policy, mut group) = (spec.policy, spec.taskgroup.as_deref());
    let in_group = |g: Option<&str>| g.is_some_and(|g| !g.trim_end_matches('/').is_empty());
    if in_group(group) && crate::class::fair::policy_weight(&policy).is_none() {
        return Err(bad(format!(
            "task group `{}` with a policy outside the fair class: task groups hold SCHED_OTHER, SCHED_BATCH and SCHED_IDLE threads only",
            group.unwrap_or_default()
        )));
    }
    for (phase, p) in spec.phases.iter().enumerate() {
        policy = p.policy.unwrap_or(policy);
        group = p.taskgroup.as_deref().or(group);
        if in_group(group) && crate::class::fair::policy_weight(&policy).is_none() {
            return Err(bad(format!(
                "phase {phase}: task group `{}` with a policy outside the fair class: task groups hold SCHED_OTHER, SCHED_BATCH and SCHED_IDLE threads only",
                group.unwrap_or_default()
            )));
        }
    }
    let names_group = spec.uses_taskgroups();
    let boosts = spec
        .phases
        .iter()
        .any(|p| p.events.iter().any(|e| matches!(e, Event::Boost { .. })));
    if names_group && boosts {
        return Err(bad(
            "boost events in a thread that uses task groups: boosting a weight inside a group is not modelled".into(),
        ));
    }
    // The simulated machine has one memory node, node 0, and memory costs that do not depend
    // on placement: binding to it changes nothing, binding elsewhere cannot be simulated.
    let bindings = spec
        .membind
        .iter()
        .chain(spec.phases.iter().filter_map(|p| p.membind.as_ref()));
    if let Some(n) = bindings.flatten().find(|&&n| n != 0) {
        return Err(bad(format!(
            "nodes_membind names NUMA node {n}: the simulated machine has one memory node (node 0)"
        )));
    }
    let phase_clamps = spec
        .phases
        .iter()
        .any(|p| p.util_min.is_some() || p.util_max.is_some());
    if spec.util_min.is_some() || spec.util_max.is_some() || phase_clamps {
        return Err(bad(
            "util_min/util_max: utilisation clamps are not simulated (schedutil and task placement would follow them); remove them to simulate without"
                .into(),
        ));
    }
    if let Some(why) = spec.timeless_loop() {
        return Err(bad(why));
    }
    if spec.phases.iter().all(|p| p.events.is_empty() || p.loops == 0) {
        return Err(bad("no events to run".into()));
    }
    Ok(())
}

/// The mask of CPU list `cpus` on `m` CPUs (errors name no thread: the caller fills it in).
fn affinity_mask(cpus: &[usize], m: usize) -> Result<Vec<bool>, SimError> {
    let mut mask = vec![false; m];
    for &c in cpus {
        if c >= m {
            return Err(SimError::AffinityOutOfRange {
                thread: String::new(),
                cpu: c,
                cpus: m,
            });
        }
        mask[c] = true;
    }
    if !mask.contains(&true) {
        return Err(SimError::EmptyAffinity {
            thread: String::new(),
        });
    }
    Ok(mask)
}

/// A thread of spec `spec_index` with id `id`, not started.
fn new_thread(
    spec_index: usize,
    id: usize,
    spec: &ThreadSpec,
    cfg: &SimConfig,
    fair: &FairParams,
) -> Result<Thread, SimError> {
    let m = cfg.cpus;
    // Only the mask is kept, never the list: a list of every CPU (a cluster as large as the
    // machine) is then the same thread as one without affinity, scheduled job for job alike.
    let affinity = match &spec.affinity {
        None => vec![true; m],
        Some(cpus) => affinity_mask(cpus, m).map_err(|e| match e {
            SimError::AffinityOutOfRange { cpu, cpus, .. } => SimError::AffinityOutOfRange {
                thread: spec.name.clone(),
                cpu,
                cpus,
            },
            _ => SimError::EmptyAffinity {
                thread: spec.name.clone(),
            },
        })?,
    };
    let first_cpu = affinity.iter().position(|&a| a).unwrap_or(0);
    let se = Entity::from_policy(&spec.policy, fair).map_err(|message| SimError::BadThread {
        thread: spec.name.clone(),
        message,
    })?;
    Ok(Thread {
        se,
        spec: spec_index as u32,
        phase_changes: spec
            .phases
            .iter()
            .any(|p| p.policy.is_some() || p.affinity.is_some() || p.taskgroup.is_some()),
        pinned: (affinity.iter().filter(|&&a| a).count() == 1).then_some(first_cpu as u32),
        affinity,
        state: State::NotStarted,
        waiting_since: None,
        cpu: first_cpu as u32,
        pc: Cursor::default(),
        remaining: 0,
        overhead: 0,
        stall: 0,
        runtime: None,
        sync_resume: false,
        recent_cpu: first_cpu as u32,
        exact_wake: false,
        last_ran: u64::MAX,
        job: None,
        pending_release: None,
        // Shared with the real-kernel executor, so both judge jobs alike.
        rel_deadline: spec.relative_deadline_ns(),
        period: spec.period_ns(),
        has_timer: spec.has_timer(),
        t_first: 0,
        timer_gen: 0,
        pending_sleep: None,
        throttled: false,
        rng: pacer_workload::thread_rng(cfg.seed, id),
        stats: ThreadStats::default(),
        policy: spec.policy,
        wake_log: None,
        units: 0,
        cooperative: spec.cooperative,
        mem: cfg.mem_bound,
    })
}

/// One [`Domain`] per cluster of `p`, under `governors` (see [`SimConfig::governors`]).
fn build_domains(p: &Platform, governors: &[Governor]) -> Result<Vec<Domain>, SimError> {
    let n = p.clusters.len();
    if !(governors.len() <= 1 || governors.len() == n) {
        return Err(SimError::GovernorCount {
            clusters: n,
            got: governors.len(),
        });
    }
    p.clusters
        .iter()
        .enumerate()
        .map(|(k, cl)| {
            let freqs: Vec<u32> = cl.opps.iter().map(|o| o.freq_khz).collect();
            let top = cl.opps.len() - 1;
            let governor = match governors.len() {
                0 => Governor::Fixed { khz: freqs[top] },
                1 => governors[0],
                _ => governors[k],
            };
            let bad = |message: String| SimError::BadGovernor { cluster: k, message };
            let cur = match &governor {
                Governor::Performance => top,
                Governor::Powersave => 0,
                Governor::Fixed { khz } => freqs.iter().position(|f| f == khz).ok_or_else(|| {
                    bad(format!(
                        "{khz} kHz is not one of the cluster's frequencies {freqs:?}"
                    ))
                })?,
                // Starts where a booted system is, at the top, and follows the first events.
                Governor::Schedutil(c) => {
                    c.validate().map_err(bad)?;
                    top
                }
            };
            Ok(Domain {
                cpus: cl.cpus.clone(),
                opps: cl.opps.clone(),
                freqs,
                latency: cl.switch_latency_ns,
                governor,
                cur,
                floor: 0,
                pending: None,
                switch_gen: 0,
                last_change: None,
                dirty: false,
                limits_changed: false,
            })
        })
        .collect()
}

/// The WALT tracker and PELT multiplier a CPU of domain `d` uses: its schedutil's, or the
/// defaults when its signals are only tracked for display.
fn signal_settings(d: &Domain) -> (Walt, u64) {
    match d.schedutil().map(|c| c.signal) {
        Some(UtilSignal::Walt {
            window_ns,
            hist_size,
            policy,
        }) => (Walt::new(window_ns, hist_size, policy), 1),
        Some(UtilSignal::Pelt { multiplier }) => (Walt::default_android(), multiplier as u64),
        None => (Walt::default_android(), 1),
    }
}

/// The root domains: connected components of CPUs linked by some thread's affinity. Returns each
/// CPU's domain index and the domains, with their fair servers counted in `total_bw`.
fn build_root_domains<'a>(
    cpus: &[Cpu],
    affinities: impl Iterator<Item = &'a [bool]>,
    cfg: &SimConfig,
) -> (Vec<usize>, Vec<RootDomain>) {
    let m = cpus.len();
    let mut parent: Vec<usize> = (0..m).collect();
    fn find(p: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while p[r] != r {
            r = p[r];
        }
        let mut y = x;
        while p[y] != r {
            let n = p[y];
            p[y] = r;
            y = n;
        }
        r
    }
    for affinity in affinities {
        let mut first = None;
        for (c, &a) in affinity.iter().enumerate() {
            if a {
                match first {
                    None => first = Some(c),
                    Some(f) => {
                        let (ra, rb) = (find(&mut parent, f), find(&mut parent, c));
                        parent[ra.max(rb)] = ra.min(rb);
                    }
                }
            }
        }
    }
    let server = pacer_model::reservation::fair_servers_bw(1, cfg.fair_server);
    let bw = Some(to_ratio(cfg.rt_period_us, cfg.rt_runtime_us));
    let mut index = vec![usize::MAX; m];
    let mut domains: Vec<RootDomain> = Vec::new();
    let mut of_cpu = vec![0; m];
    for c in 0..m {
        let r = find(&mut parent, c);
        if index[r] == usize::MAX {
            index[r] = domains.len();
            domains.push(RootDomain {
                cpus: Vec::new(),
                bw,
                total_bw: 0,
                capacity: 0,
                servers_bw: 0,
            });
        }
        let d = &mut domains[index[r]];
        d.cpus.push(c);
        d.capacity += cpus[c].capacity;
        d.servers_bw += server;
        d.total_bw += server;
        of_cpu[c] = index[r];
    }
    (of_cpu, domains)
}

/// What a thread's program does next.
enum Step {
    /// Execute `remaining` (set on the thread).
    Run,
    /// Preempted before it could block (the class rescheduled when the job's end was accounted);
    /// it blocks when it next runs.
    Preempted,
    /// Block until the time; `Some(release)` if a new job is released at wake-up.
    Block(u64, Option<u64>),
    /// Block on a synchronisation object until another thread wakes it.
    Wait,
    Yield,
    Exit,
}

/// Upper bound on events a program may step through without doing anything (a loop of zero-work
/// events); past it the thread exits instead of hanging the simulation.
const MAX_IDLE_STEPS: u32 = 1_000_000;

impl Sim {
    fn trace(&mut self, e: TraceEvent) {
        if self.tracing {
            self.pending_trace.push(e);
        }
    }

    // ---- accounting ---------------------------------------------------------------------------

    /// `update_curr()`: charges the running thread for the time since it was last accounted.
    fn update_curr(&mut self, cpu: usize) {
        let now = self.now;
        let c = &mut self.cpus[cpu];
        let Some(t) = c.curr else {
            c.exec_start = now;
            return;
        };
        let delta = now - c.exec_start;
        if delta == 0 {
            return;
        }
        c.exec_start = now;
        let th = &mut self.threads[t as usize];
        let mut delta = delta;
        if th.stall > 0 {
            // The CPU is still leaving idle: nothing runs, nothing is charged.
            let st = th.stall.min(delta);
            th.stall -= st;
            delta -= st;
            if delta == 0 {
                return;
            }
        }
        c.busy_acc += delta;
        let scale_invariant = self.cfg.scale_invariant_runtime;
        th.stats.exec += delta;
        if let Some(j) = &mut th.job {
            j.exec += delta;
        }
        let ov = th.overhead.min(delta);
        th.overhead -= ov;
        let d = delta - ov;
        let progress = ((d as u128 * c.work_speed as u128) / CAPACITY_SCALE as u128) as u64;
        th.remaining = th.remaining.saturating_sub(progress);
        if let Some(r) = &mut th.runtime {
            r.done += progress;
        }
        let charge = Charge {
            speed: c.speed,
            scale_invariant,
            now,
        };
        c.rq.update_curr(&mut th.se, delta, charge);
    }

    /// Programs the CPU's next local expiry: work done, runtime exhausted, or slice end.
    fn reprogram(&mut self, cpu: usize) {
        self.update_curr(cpu);
        let c = &mut self.cpus[cpu];
        let Some(t) = c.curr else {
            c.gen += 1;
            c.armed = None;
            return;
        };
        let work = if self.threads[t as usize].runtime.is_some() {
            self.runtime_left(t, cpu)
        } else {
            let th = &self.threads[t as usize];
            ((th.remaining as u128 * CAPACITY_SCALE as u128).div_ceil(c.work_speed.max(1) as u128))
                .min(u64::MAX as u128) as u64
        };
        let c = &self.cpus[cpu];
        let th = &self.threads[t as usize];
        let charge = Charge {
            speed: c.speed,
            scale_invariant: self.cfg.scale_invariant_runtime,
            now: self.now,
        };
        // The class counts running time: a thread still waiting for its CPU to leave idle
        // starts it that much later (a tick falls where it falls).
        let start = self.now.saturating_add(th.stall);
        let mut dt = th
            .stall
            .saturating_add(th.overhead.saturating_add(work).min(c.rq.expiry(
                &th.se,
                charge,
                self.cfg.rr_timeslice,
                start,
            )));
        if self.lb.is_some() && th.se.lazily_scheduled() && self.wants_kick_ticks(cpu) {
            // Its ticks kick the idle balancer.
            dt = dt.min(self.fair.tick_at_or_after(self.now + 1) - self.now);
        }
        let at = self.now.saturating_add(dt);
        self.arm_rq_timer(cpu);
        let c = &mut self.cpus[cpu];
        if c.armed == Some(at) {
            return;
        }
        c.gen += 1;
        c.armed = Some(at);
        let gen = c.gen;
        self.push_event(at, Kind::CpuLocal, cpu as u32, gen);
    }

    /// The running thread `t`'s `runtime` event, accounted up to now: sets its remaining work to
    /// the end it reaches if it keeps the CPU (the first burst of [`SimConfig::runtime_burst`]
    /// that finishes once the event's wall-clock end has passed, as rt-app reads the clock only
    /// between bursts) and returns the wall time to that end.
    fn runtime_left(&mut self, t: ThreadId, cpu: usize) -> u64 {
        let speed = self.cpus[cpu].work_speed.max(1) as u128;
        let burst = (self.cfg.runtime_burst as f64 * self.cfg.work_scale).round() as u128;
        let now = self.now;
        let th = &mut self.threads[t as usize];
        let Some(r) = &mut th.runtime else { return 0 };
        if !r.started {
            // rt-app reads the clock as the event begins: once the thread runs its code.
            r.started = true;
            r.end = r.end.saturating_add(now + th.stall + th.overhead);
        }
        let (end, done) = (r.end, r.done);
        let wall_left = end.saturating_sub(now) as u128;
        if burst == 0 {
            th.remaining = (wall_left * speed)
                .div_ceil(CAPACITY_SCALE as u128)
                .min(u64::MAX as u128) as u64;
            return wall_left as u64;
        }
        let by_end = done as u128 + (wall_left * speed).div_ceil(CAPACITY_SCALE as u128);
        let last = by_end.div_ceil(burst).max(1) * burst;
        let left = last - done as u128;
        th.remaining = left.min(u64::MAX as u128) as u64;
        (left * CAPACITY_SCALE as u128)
            .div_ceil(speed)
            .min(u64::MAX as u128) as u64
    }

    /// Keeps one event armed at the CPU's next class timer.
    fn arm_rq_timer(&mut self, cpu: usize) {
        let want = self.cpus[cpu].rq.next_timer();
        let c = &mut self.cpus[cpu];
        if want == c.rq_timer {
            return;
        }
        c.rq_timer = want;
        c.rq_gen += 1;
        let gen = c.rq_gen;
        if let Some(at) = want {
            let at = at.max(self.now);
            self.push_event(at, Kind::RqTimer, cpu as u32, gen);
        }
    }

    fn rq_timer_event(&mut self, cpu: usize) {
        self.update_curr(cpu);
        self.cpus[cpu].rq_timer = None;
        let curr = self.cpus[cpu].curr.map(|t| self.threads[t as usize].se.class());
        let now = self.now;
        if self.cpus[cpu].rq.fire_timers(now, curr) {
            // The CPU's classes changed: a running thread the change favours keeps the CPU
            // under its new key; otherwise the CPU picks again. What the CPU offers to pulls
            // changed too (an unthrottled rt class, a runnable server).
            if let Some(t) = self.cpus[cpu].curr {
                let th = &self.threads[t as usize];
                if self.cpus[cpu].rq.rekey_curr(&th.se) {
                    let k = self.cpus[cpu].rq.curr_key(&th.se);
                    self.cpudl.set_running(cpu, k);
                }
            }
            self.queued_changed(cpu);
            self.resched(cpu);
        } else {
            self.reprogram(cpu);
        }
    }

    // ---- switching ----------------------------------------------------------------------------

    /// Takes the running thread off `cpu`; a preempted thread goes back on the queue.
    fn deschedule(&mut self, cpu: usize, how: Off) -> Option<ThreadId> {
        self.update_curr(cpu);
        if self.track {
            self.dvfs_account(cpu);
        }
        let t = self.cpus[cpu].curr.take()?;
        self.cpus[cpu].idle_at = self.now;
        self.cpudl.set_running(cpu, Key::Idle);
        let th = &mut self.threads[t as usize];
        // Taken off before its CPU left idle: the next thread there has the CPU awake.
        th.stall = 0;
        th.last_ran = self.now;
        if how == Off::Preempted {
            th.stats.involuntary_switches += 1;
            if let Some(j) = &mut th.job {
                j.preemptions += 1;
            }
            self.set_state(t, State::Queued);
        }
        let th = &mut self.threads[t as usize];
        th.cpu = cpu as u32;
        self.cpus[cpu].rq.put_prev(t, &mut th.se, how);
        if how == Off::Preempted {
            // Back on the queue. A requeued thread is enqueued by the caller; a blocking fair
            // thread may stay queued as a delayed sleeper, which no pull takes, so
            // `first_queued` does not change.
            self.queued_changed(cpu);
        }
        if how == Off::Block && self.tg.is_some() {
            self.taskgroup_changed(t, None);
        }
        Some(t)
    }

    fn switch_in(&mut self, cpu: usize, t: ThreadId) {
        if self.track {
            self.dvfs_account(cpu);
        }
        let now = self.now;
        let (cs, mig) = (self.cfg.context_switch_cost, self.cfg.migration_cost);
        // A CPU idle since before now was halted: it runs nothing until it has left idle.
        let stall = if self.cpus[cpu].idle_at < now {
            self.cfg.idle_exit_latency
        } else {
            0
        };
        self.cpus[cpu].idle_at = u64::MAX;
        self.set_state(t, State::Running);
        let th = &mut self.threads[t as usize];
        th.cpu = cpu as u32;
        // `stats.switches` is counted in `note_switch`, once the instant's picks are settled.
        th.overhead += cs;
        th.stall = stall;
        self.cpus[cpu].rq.set_next(t, &mut th.se);
        let cooperative_begin = th.cooperative && th.job.is_some_and(|j| j.start.is_none());
        if let Some(j) = &mut th.job {
            if j.start.is_none() {
                j.start = Some(now + stall);
            }
            if j.last_cpu.is_some_and(|c| c as usize != cpu) {
                j.migrations += 1;
                th.stats.migrations += 1;
                th.overhead += mig;
            }
            j.last_cpu = Some(cpu as u32);
        }
        if let Some(c) = self.cache.as_mut() {
            th.overhead += c.switch_in(t, th.spec as usize, cpu);
        }
        let mem = self.threads[t as usize].mem;
        let c = &mut self.cpus[cpu];
        c.curr = Some(t);
        c.exec_start = now;
        c.work_speed = work_speed(c.speed, c.capacity, mem);
        // A running thread's key does not change while it runs, except the fair class's, which
        // only orders CPU selection (the fair class decides preemption among its own threads).
        let k = self.cpus[cpu].rq.curr_key(&self.threads[t as usize].se);
        self.cpudl.set_running(cpu, k);
        self.queued_changed(cpu);
        if cooperative_begin {
            let th = &self.threads[t as usize];
            let dl = dl_state(&th.se);
            self.pending_app.push(AppEvent::JobBegin {
                thread: t,
                t: now,
                dl,
                cpu_time: th.stats.exec,
            });
        }
    }

    /// `schedule()` on one CPU: pull if it lost its thread, run the most urgent thread, push a
    /// preempted one elsewhere, and reprogram the CPU's expiry.
    fn resched(&mut self, cpu: usize) {
        self.update_curr(cpu);
        if self.cpus[cpu].curr.is_none() {
            self.pull(cpu);
        }
        let curr = self.cpus[cpu].curr;
        let ck = self.curr_key(cpu);
        let best = match curr {
            None => {
                // The fair class may let delayed sleepers leave the queue, which no pull takes:
                // `first_queued` does not change.
                if self.tg.is_some() {
                    self.taskgroup_pick(cpu)
                } else {
                    let before = cfg!(debug_assertions).then(|| self.cpus[cpu].rq.first_queued());
                    let p = self.cpus[cpu].rq.pick_next();
                    debug_assert!(before.is_none_or(|k| k == self.cpus[cpu].rq.first_queued()));
                    p
                }
            }
            Some(_) => self.best_queued(cpu),
        };
        if let Some((k, t)) = best {
            if curr.is_none() || k.preempts(ck) {
                let preempted = curr.and_then(|_| self.deschedule(cpu, Off::Preempted));
                self.switch_in(cpu, t);
                if let Some(p) = preempted {
                    self.push(p);
                }
            }
        }
        self.note_switch(cpu);
        self.reprogram(cpu);
        if self.dvfs_on {
            self.dvfs_touch(cpu);
        }
    }

    /// Counts and traces a change of the running thread on `cpu`. A thread that blocks and is
    /// woken and picked again within one instant ran on without a switch, as in the kernel,
    /// where `schedule()` picking `prev` again counts none (`nr_switches`, `nvcsw`): the
    /// summary's context switches and the trace's `sched_switch`es are the same switches.
    fn note_switch(&mut self, cpu: usize) {
        let next = self.cpus[cpu].curr;
        let last = self.traced[cpu];
        if last == next {
            return;
        }
        self.traced[cpu] = next;
        if let Some(n) = next {
            self.threads[n as usize].stats.switches += 1;
        }
        if self.tracing {
            let prev_state = match last.map(|p| self.threads[p as usize].state) {
                Some(State::Sleeping | State::NotStarted) => PrevState::Sleeping,
                Some(State::Exited) => PrevState::Dead,
                _ => PrevState::Runnable,
            };
            self.trace(TraceEvent::Switch {
                t: self.now,
                cpu: cpu as u32,
                prev: last,
                next,
                prev_state,
            });
        }
    }

    /// Moves a thread that was just preempted to a CPU where it can run now, if there is one
    /// (`push_dl_task()` / `push_rt_task()`).
    fn push(&mut self, t: ThreadId) {
        let th = &self.threads[t as usize];
        if th.state != State::Queued || th.pinned.is_some() {
            return;
        }
        if self.lb.is_some() && th.se.prefers_idle_cpu() {
            // The fair class has no push: a preempted fair thread waits for a balancer.
            return;
        }
        let from = th.cpu as usize;
        let k = th.se.key();
        // The CPU running the least urgent thread `t` preempts, ties to the lowest index.
        let target = self
            .cpudl
            .find(from, |c| c != from && th.affinity[c], |ck| k.preempts(ck));
        if let Some(target) = target {
            self.migrate_queued(t, target);
            self.resched(target);
        }
    }

    /// Pulls the most urgent thread queued elsewhere in `cpu`'s root domain that may run on `cpu`
    /// and beats what `cpu` has queued (`pull_dl_task()` / `pull_rt_task()`, idle balance for
    /// fair); ties go to the lowest CPU.
    fn pull(&mut self, cpu: usize) {
        let Sim {
            cpudl, cpus, threads, ..
        } = self;
        let found = cpudl.find_pull(
            cpu,
            |other| cpus[other].rq.first_queued(),
            |other| {
                cpus[other]
                    .rq
                    .first_allowed(|t| threads[t as usize].affinity[cpu])
            },
            || cpus[cpu].rq.pick().map_or(Key::Idle, |x| x.0),
        );
        if self.lb.is_some()
            && found.is_none_or(|(_, k, _)| Sim::is_fair_key(k))
            && self.cpus[cpu].rq.pick().is_none()
            && !self.newidle_allows(cpu, found.map(|(_, _, t)| t))
        {
            // `sched_balance_newidle()` did not pull: the CPU idles until a kick.
            return;
        }
        if let Some((_, _, t)) = found {
            self.migrate_queued(t, cpu);
        }
    }

    /// `select_task_rq()`: where a waking thread should go.
    fn select_cpu(&mut self, t: ThreadId) -> usize {
        let th = &self.threads[t as usize];
        if let Some(c) = th.pinned {
            return c as usize;
        }
        if self.lb.is_some() && th.se.prefers_idle_cpu() {
            return if th.last_ran == u64::MAX {
                self.select_fair_new(t)
            } else {
                self.select_fair_wakeup(t)
            };
        }
        select_task_rq(
            &th.se,
            th.cpu as usize,
            self.cpus.len(),
            |c| th.affinity[c],
            &mut self.cpudl,
        )
    }

    // ---- thread life cycle --------------------------------------------------------------------

    fn start_job(&mut self, t: ThreadId, release: u64) {
        let now = self.now;
        let th = &mut self.threads[t as usize];
        // A finite thread whose program has no event left releases no more jobs: rt-app logs no
        // pass after its last one (`loop: 3` is 3 jobs, not 3 and an empty one).
        if program_ended(&self.workload.threads[th.spec as usize], th.pc) {
            return;
        }
        let seq = th.stats.released;
        th.stats.released += 1;
        // A job released while its thread is on a CPU (a late timer, or the next pass of a
        // thread without timers) starts running at once, on that CPU; otherwise it starts when the
        // thread is next switched in.
        let running = th.state == State::Running;
        th.job = Some(Job {
            seq,
            release,
            deadline: release.saturating_add(th.rel_deadline),
            start: running.then_some(now),
            exec: 0,
            preemptions: 0,
            migrations: 0,
            last_cpu: running.then_some(th.cpu),
        });
        self.trace(TraceEvent::Release {
            t: release,
            thread: t,
            job: seq,
        });
        let th = &self.threads[t as usize];
        if running && th.cooperative {
            // Begins now rather than at the next switch-in, which may never come.
            self.pending_app.push(AppEvent::JobBegin {
                thread: t,
                t: now,
                dl: dl_state(&th.se),
                cpu_time: th.stats.exec,
            });
        }
    }

    fn finish_job(&mut self, t: ThreadId) {
        let now = self.now;
        let th = &mut self.threads[t as usize];
        let Some(j) = th.job.take() else { return };
        th.stats.finished += 1;
        self.jobs_finished += 1;
        let r = JobRecord {
            thread: t,
            job: j.seq,
            release: j.release,
            start: j.start.unwrap_or(now),
            finish: now,
            deadline: j.deadline,
            period: th.period,
            exec: j.exec,
            preemptions: j.preemptions,
            migrations: j.migrations,
            cpu: j.last_cpu.unwrap_or(th.cpu),
        };
        self.pending_jobs.push(r);
        self.trace(TraceEvent::Finish {
            t: now,
            thread: t,
            job: j.seq,
            missed: r.missed(),
        });
        let th = &self.threads[t as usize];
        if th.cooperative {
            let dl = dl_state(&th.se);
            self.pending_app.push(AppEvent::JobEnd {
                thread: t,
                t: now,
                dl,
                cpu_time: th.stats.exec,
            });
        }
    }

    /// Runs the thread's program from where it stopped until it has work, blocks, yields or ends.
    fn step(&mut self, t: ThreadId) -> Step {
        let now = self.now;
        let work_scale = self.cfg.work_scale;
        let mut idle_steps = 0u32;
        if let Some(next) = self.threads[t as usize].pending_sleep.take() {
            if next > now {
                return self.sleep_on_timer(t, next);
            }
            self.start_job(t, next);
        }
        loop {
            idle_steps += 1;
            if idle_steps > MAX_IDLE_STEPS {
                self.finish_job(t);
                return Step::Exit;
            }
            let spec = &self.workload.threads[self.threads[t as usize].spec as usize];
            let th = &mut self.threads[t as usize];
            let ev = match th.pc.advance(spec) {
                Walk::Done => {
                    self.finish_job(t);
                    return Step::Exit;
                }
                Walk::PassStart(phase) => {
                    idle_steps -= 1;
                    if th.phase_changes {
                        let phase: *const Phase = phase;
                        if let Some(step) = self.phase_start(t, phase) {
                            return step;
                        }
                    }
                    continue;
                }
                Walk::PassEnd => {
                    if !th.has_timer {
                        // Without timers, each pass through a phase's events is one job.
                        self.finish_job(t);
                        self.start_job(t, now);
                    }
                    continue;
                }
                Walk::Event(ev) => ev,
            };
            match ev {
                Event::Run { .. } | Event::WorkingSet(_) => {
                    let mut w = match ev {
                        Event::Run { work } => work.sample_for(&mut th.rng, th.units).ns(),
                        Event::WorkingSet(ws) => {
                            let profile = self
                                .cfg
                                .cache_model
                                .as_deref()
                                .unwrap_or_else(|| measured_profile());
                            wss_work_ns(ws, profile, &mut th.rng, th.units)
                        }
                        _ => 0,
                    };
                    if work_scale != 1.0 {
                        w = (w as f64 * work_scale).round() as u64;
                    }
                    if w > 0 {
                        th.remaining = w;
                        return Step::Run;
                    }
                }
                Event::Runtime { duration } => {
                    if !duration.is_zero() {
                        // Its clock starts when it first runs ([`Sim::runtime_left`]).
                        th.runtime = Some(RuntimeEvent {
                            end: duration.ns(),
                            done: 0,
                            started: false,
                        });
                        th.remaining = duration.ns();
                        return Step::Run;
                    }
                }
                Event::Sleep { duration } => return Step::Block(now + duration.ns(), None),
                Event::Timer { timer, period, mode } => {
                    let t_first = th.t_first;
                    let slot = &mut self.timers[timer.0];
                    // rt-app's timer: the first expiry is the thread's start plus one period, then
                    // one period after the previous expiry. When the thread is late, an absolute
                    // timer keeps its grid (the next job was released in the past) and a relative
                    // one restarts the grid at now.
                    let mut next = slot.next.unwrap_or(t_first) + period.ns();
                    if next <= now && *mode == pacer_workload::TimerMode::Relative {
                        next = now;
                    }
                    slot.next = Some(next);
                    self.finish_job(t);
                    if next > now {
                        if self.cfg.job_end_cpu_time && self.preempted_at_job_end(t) {
                            self.threads[t as usize].pending_sleep = Some(next);
                            return Step::Preempted;
                        }
                        return self.sleep_on_timer(t, next);
                    }
                    // Late: the next job was released in the past and starts at once, without a
                    // system call (rt-app and `pacer run` skip the sleep when late), so nothing
                    // is traced. A program that calls clock_nanosleep on a past expiry anyway
                    // (the cyclictest idiom) would leave a timer set and a timer wake-up a few
                    // µs later on Linux; that shape is not modelled.
                    self.start_job(t, next);
                }
                Event::Yield => return Step::Yield,
                Event::Boost { budget } => {
                    th.se.set_boost(Some(budget.ns()));
                }
                Event::WorkUnits { units } => {
                    th.units = *units;
                    self.pending_app.push(AppEvent::WorkUnits {
                        thread: t,
                        t: now,
                        units: *units,
                    });
                }
                // rt-app's events beyond pacer's original ones, out of line.
                Event::Mem { .. }
                | Event::IoRun { .. }
                | Event::MemRun { .. }
                | Event::Fork { .. }
                | Event::Lock { .. }
                | Event::Unlock { .. }
                | Event::Wait { .. }
                | Event::Signal { .. }
                | Event::Broadcast { .. }
                | Event::SignalWait { .. }
                | Event::Barrier { .. }
                | Event::Suspend { .. }
                | Event::Resume { .. }
                | Event::SemPost { .. }
                | Event::SemWait { .. } => {
                    let ev = ev.clone();
                    if let Some(step) = self.rtapp_event(t, &ev) {
                        return step;
                    }
                }
            }
        }
    }

    /// `mem`, `iorun`, `memrun`, `fork` and the synchronisation events: the step they end on, if
    /// any.
    #[cold]
    #[inline(never)]
    fn rtapp_event(&mut self, t: ThreadId, ev: &Event) -> Option<Step> {
        match ev {
            Event::Mem { bytes } | Event::IoRun { bytes } => {
                let per_byte = match ev {
                    Event::Mem { .. } => self.cfg.mem_ns_per_byte,
                    _ => self.cfg.io_ns_per_byte,
                };
                // Saturates rather than wraps for absurd sizes (f64 → u64 casts clamp).
                let w = (*bytes as f64 * per_byte * self.cfg.work_scale).round() as u64;
                self.memory_work(t, w)
            }
            Event::MemRun { buffer, count, .. } => {
                // `check_spec` checked the buffer; the cost depends on its size and layout.
                let buf = &self.workload.mem_buffers[buffer.0];
                let w = (self.cfg.memrun.work_ns(buf, *count) * self.cfg.work_scale).round() as u64;
                self.memory_work(t, w)
            }
            Event::Fork { thread } => {
                self.sync.pending.push(SyncAction::Fork {
                    parent: t,
                    spec: *thread,
                });
                None
            }
            _ => {
                let ops = crate::sync::ops_of(ev);
                self.sync.tsync[t as usize].ops.extend(ops.iter().rev().flatten());
                self.run_ops(t).then_some(Step::Wait)
            }
        }
    }

    /// What the cache model charged so far, when it is on ([`SimConfig::cache_model`]).
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.cache.as_ref().map(|c| c.stats())
    }

    /// `mem`, `iorun` and `memrun`: `w` ns of work at capacity 1024, run like `run`'s.
    fn memory_work(&mut self, t: ThreadId, w: u64) -> Option<Step> {
        if w == 0 {
            return None;
        }
        let th = &mut self.threads[t as usize];
        th.remaining = w;
        Some(Step::Run)
    }

    /// The thread sleeps on its timer until `next`: the tracer sees the timer set (Linux:
    /// hrtimer_start of the clock_nanosleep).
    fn sleep_on_timer(&mut self, t: ThreadId, next: u64) -> Step {
        if let Some(log) = self.threads[t as usize].wake_log.as_mut() {
            log.push(Wakeup {
                t_ns: self.now,
                origin: Origin::TimerSet { expiry_ns: next },
            });
        }
        Step::Block(next, Some(next))
    }

    /// A running thread that reads its CPU time at the end of a job makes the kernel account it
    /// (`task_sched_runtime()` → `update_curr()`); whether its class reschedules it there.
    fn preempted_at_job_end(&mut self, t: ThreadId) -> bool {
        let th = &self.threads[t as usize];
        let cpu = th.cpu as usize;
        if !th.se.lazily_scheduled() || th.state != State::Running || self.cpus[cpu].curr != Some(t) {
            return false;
        }
        self.update_curr(cpu);
        self.cpus[cpu].rq.resched_on_update(&self.threads[t as usize].se)
    }

    /// Wakes `first` and every other thread whose wake-up falls at `time`, most urgent first.
    fn wakeup_batch(&mut self, time: u64, first: ThreadId) {
        let wakeup_at =
            |e: Option<&QueuedEvent>| e.is_some_and(|e| e.time() == time && e.kind() == Kind::Wakeup);
        if !wakeup_at(self.events.peek()) {
            return self.wakeup_or_resume(first);
        }
        let mut batch = std::mem::take(&mut self.wake_batch);
        batch.clear();
        batch.push((self.wake_key(first), first));
        while let Some(&e) = self.events.peek().filter(|e| wakeup_at(Some(e))) {
            let id = e.id;
            self.events.pop();
            self.events_processed += 1;
            batch.push((self.wake_key(id), id));
        }
        // Each key computed once (the CBS wake-up rule on a copy of the entity); distinct threads.
        batch.sort_unstable();
        for &(_, t) in &batch {
            self.wakeup_or_resume(t);
        }
        self.wake_batch = batch;
    }

    /// A wake-up event: a timer's or a sleep's end, a thread's start, or a synchronisation
    /// wake-up that [`SimConfig::wakeup_latency`] delayed.
    #[inline]
    fn wakeup_or_resume(&mut self, t: ThreadId) {
        if self.threads[t as usize].sync_resume {
            self.threads[t as usize].sync_resume = false;
            return self.sync_resume(t);
        }
        self.wakeup_event(t);
    }

    /// The key a sleeping thread will have once woken now (a SCHED_DEADLINE thread's deadline
    /// after the CBS wake-up rule).
    fn wake_key(&self, t: ThreadId) -> Key {
        self.threads[t as usize].se.wake_key(self.now)
    }

    fn wakeup_event(&mut self, t: ThreadId) {
        let now = self.now;
        let th = &mut self.threads[t as usize];
        if matches!(th.state, State::NotStarted | State::Sleeping) {
            if let Some(log) = th.wake_log.as_mut() {
                // A timer's wake-up is a job release at the expiry of a periodic timer; the end
                // of a `Sleep` is not (the experiments use sleeps for I/O waits), nor a start.
                let timer = th.state == State::Sleeping && th.pending_release.is_some();
                log.push(Wakeup::woken(now, timer));
            }
        }
        match th.state {
            State::NotStarted => {
                th.t_first = self.now;
                if let Policy::Deadline(r) = th.policy {
                    self.trace(TraceEvent::Reservation {
                        t: now,
                        thread: t,
                        runtime: r.runtime.ns(),
                        period: r.period.ns(),
                    });
                }
                self.start_job(t, self.now);
                if self.tg.is_some() {
                    if let Some(step) = self.taskgroup_start(t) {
                        return self.apply_step_sleeping(t, step);
                    }
                }
            }
            State::Sleeping => {
                if let Some(r) = th.pending_release.take() {
                    self.start_job(t, r);
                }
                if self.tg.is_some() {
                    self.taskgroup_arrive(t);
                }
            }
            _ => return,
        }
        let step = self.step(t);
        self.apply_step_sleeping(t, step);
    }

    /// Acts on a step taken by a thread that is not on a CPU.
    fn apply_step_sleeping(&mut self, t: ThreadId, step: Step) {
        match step {
            Step::Run | Step::Yield | Step::Preempted => self.wake(t),
            Step::Block(until, release) => self.sleep(t, until, release),
            Step::Wait => self.block_on_sync(t),
            Step::Exit => self.exit(t),
        }
    }

    /// Makes a thread runnable: its class's wake-up rule, CPU selection, enqueue, preemption
    /// check.
    fn wake(&mut self, t: ThreadId) {
        let now = self.now;
        let cpu = self.threads[t as usize].cpu as usize;
        if self.threads[t as usize].se.bandwidth() > 0 {
            self.threads[t as usize].timer_gen += 1; // cancels a pending inactive timer
            if !self.threads[t as usize].se.holds_running_bw() {
                self.update_curr(cpu);
                let th = &mut self.threads[t as usize];
                self.cpus[cpu].rq.activate(&mut th.se);
                self.reprogram(cpu);
                self.dl_bw_changed(cpu);
            }
        }
        if self.threads[t as usize].throttled {
            self.trace(TraceEvent::Wakeup {
                t: now,
                thread: t,
                cpu: cpu as u32,
            });
            // Waits for the replenishment timer, which will enqueue it.
            self.set_state(t, State::Throttled);
            self.arm_replenish(t);
            return;
        }
        let th = &mut self.threads[t as usize];
        self.cpus[cpu].rq.task_waking(&mut th.se, now);
        // A sleeper still queued (DELAY_DEQUEUE) wakes in place (`ttwu_runnable()`).
        let th = &self.threads[t as usize];
        let target = if th.se.lazily_scheduled() && self.cpus[cpu].rq.holds_delayed(t) {
            cpu
        } else {
            self.select_cpu(t)
        };
        self.trace(TraceEvent::Wakeup {
            t: now,
            thread: t,
            cpu: target as u32,
        });
        self.move_bw(t, cpu, target);
        let flags = Enqueue {
            wakeup: true,
            migrated: target != cpu,
            ..Enqueue::default()
        };
        self.enqueue(t, target, flags);
        self.wakeup_preempt(target, t);
        self.resched(target);
    }

    /// The class of a thread just enqueued on `cpu` decides whether it preempts the running one
    /// of the same class (`wakeup_preempt()`; across classes the key order decides in `resched`).
    fn wakeup_preempt(&mut self, cpu: usize, t: ThreadId) {
        let Some(curr) = self.cpus[cpu].curr else { return };
        self.update_curr(cpu);
        let woken = self.threads[t as usize].se;
        let c = &self.cpus[cpu];
        if c.rq
            .wakeup_preempt(&mut self.threads[curr as usize].se, t, &woken)
        {
            self.deschedule(cpu, Off::Preempted);
        }
    }

    fn sleep(&mut self, t: ThreadId, until: u64, release: Option<u64>) {
        let now = self.now;
        self.set_state(t, State::Sleeping);
        let th = &mut self.threads[t as usize];
        th.pending_release = release;
        // The timer fires at the end of its slack range (the clock event is programmed for the
        // hard expiry); only rt and deadline threads have no slack.
        let exact = std::mem::take(&mut th.exact_wake);
        let slack = if th.policy.is_fair() && !exact {
            self.cfg.timer_slack
        } else {
            0
        };
        let at = until
            .saturating_add(slack)
            .saturating_add(self.cfg.wakeup_latency);
        self.push_event(at, Kind::Wakeup, t, 0);
        self.block_class(t, now);
    }

    /// The thread blocks on a synchronisation object: no timer, another thread's operation
    /// wakes it ([`Sim::sync_wake`]).
    fn block_on_sync(&mut self, t: ThreadId) {
        let now = self.now;
        self.set_state(t, State::Sleeping);
        self.threads[t as usize].pending_release = None;
        self.sync.tsync[t as usize].blocked = true;
        self.block_class(t, now);
    }

    /// What the thread's class does when it blocks (`dequeue_task(DEQUEUE_SLEEP)`).
    #[inline]
    fn block_class(&mut self, t: ThreadId, now: u64) {
        let th = &mut self.threads[t as usize];
        match th.se.block(now) {
            Block::Nothing => {}
            Block::Throttle => {
                th.throttled = true;
                self.arm_replenish(t);
            }
            Block::ReleaseNow => {
                let cpu = th.cpu as usize;
                self.release_bw(t, cpu);
            }
            Block::ReleaseAt(at) => {
                th.timer_gen += 1;
                let gen = th.timer_gen;
                self.push_event(at, Kind::Inactive, t, gen);
            }
        }
    }

    fn release_bw(&mut self, t: ThreadId, cpu: usize) {
        if self.threads[t as usize].se.holds_running_bw() {
            self.update_curr(cpu);
            let th = &mut self.threads[t as usize];
            self.cpus[cpu].rq.deactivate(&mut th.se);
            self.reprogram(cpu);
            self.dl_bw_changed(cpu);
        }
    }

    fn inactive_timer(&mut self, t: ThreadId) {
        let th = &self.threads[t as usize];
        if matches!(th.state, State::Sleeping | State::Exited) {
            let cpu = th.cpu as usize;
            self.release_bw(t, cpu);
        }
    }

    fn exit(&mut self, t: ThreadId) {
        if self.tg.is_some() {
            self.taskgroup_exit(t);
        }
        let cpu = self.threads[t as usize].cpu as usize;
        self.release_bw(t, cpu);
        let se = self.threads[t as usize].se;
        self.cpus[cpu].rq.detach_bw(&se);
        let rd = &mut self.root_domains[self.root_domain[cpu]];
        rd.change(se.bandwidth(), 0);
        self.threads[t as usize].timer_gen += 1;
        self.set_state(t, State::Exited);
    }

    fn arm_replenish(&mut self, t: ThreadId) {
        let Some(until) = self.threads[t as usize].se.throttled_until() else {
            return;
        };
        let at = until.max(self.now);
        self.threads[t as usize].timer_gen += 1;
        let gen = self.threads[t as usize].timer_gen;
        self.trace(TraceEvent::Throttle {
            t: self.now,
            thread: t,
            until: at,
        });
        self.push_event(at, Kind::Replenish, t, gen);
    }

    /// The running thread on `cpu` used up its runtime: throttle it (`dl_runtime_exceeded()`).
    fn throttle(&mut self, cpu: usize, t: ThreadId) {
        self.deschedule(cpu, Off::Block);
        let th = &mut self.threads[t as usize];
        th.stats.involuntary_switches += 1;
        if let Some(j) = &mut th.job {
            j.preemptions += 1;
        }
        if th.remaining > 0 || th.overhead > 0 {
            th.stats.overruns += 1;
        }
        th.throttled = true;
        self.set_state(t, State::Throttled);
        self.arm_replenish(t);
    }

    fn replenish_timer(&mut self, t: ThreadId) {
        let now = self.now;
        let th = &mut self.threads[t as usize];
        if !th.throttled {
            return;
        }
        th.throttled = false;
        th.se.replenish(now);
        self.trace(TraceEvent::Replenish { t: now, thread: t });
        if self.threads[t as usize].state == State::Throttled {
            let cpu = self.threads[t as usize].cpu as usize;
            let target = self.select_cpu(t);
            self.move_bw(t, cpu, target);
            let flags = Enqueue {
                migrated: target != cpu,
                ..Enqueue::default()
            };
            self.enqueue(t, target, flags);
            self.resched(target);
        }
    }

    /// A CPU-local expiry: the running thread finished its work, its runtime or its slice.
    fn cpu_local(&mut self, cpu: usize) {
        self.update_curr(cpu);
        let Some(t) = self.cpus[cpu].curr else {
            self.resched(cpu);
            return;
        };
        if self.threads[t as usize].runtime.is_some() {
            self.runtime_left(t, cpu);
        }
        let done = {
            let th = &self.threads[t as usize];
            th.overhead == 0 && th.stall == 0 && th.remaining == 0
        };
        if done {
            self.threads[t as usize].runtime = None;
            match self.step(t) {
                Step::Run => {}
                Step::Block(until, release) => {
                    self.deschedule(cpu, Off::Block);
                    self.sleep(t, until, release);
                    self.resched(cpu);
                    return;
                }
                Step::Wait => {
                    self.deschedule(cpu, Off::Block);
                    self.block_on_sync(t);
                    self.resched(cpu);
                    return;
                }
                Step::Exit => {
                    self.deschedule(cpu, Off::Block);
                    self.exit(t);
                    self.resched(cpu);
                    return;
                }
                Step::Yield => {
                    self.yield_running(cpu, t);
                    return;
                }
                Step::Preempted => {
                    self.deschedule(cpu, Off::Preempted);
                    self.resched(cpu);
                    return;
                }
            }
        }
        let (rr, now) = (self.cfg.rr_timeslice, self.now);
        let th = &mut self.threads[t as usize];
        let tick = self.cpus[cpu].rq.task_tick(&mut th.se, rr, now);
        if tick != Tick::Stay {
            // RT throttling or the fair server may have changed what the queue offers.
            self.queued_changed(cpu);
        }
        match tick {
            Tick::Stay => {}
            Tick::Throttle => self.throttle(cpu, t),
            Tick::Requeue => {
                // Round-robin / fair rotation: back to the tail of the queue.
                self.deschedule(cpu, Off::Requeue);
                let th = &mut self.threads[t as usize];
                th.stats.involuntary_switches += 1;
                if let Some(j) = &mut th.job {
                    j.preemptions += 1;
                }
                self.enqueue(t, cpu, Enqueue::default());
            }
        }
        self.resched(cpu);
        if self.lb.is_some() && self.fair.is_tick(now) {
            self.nohz_kick(cpu);
        }
    }

    fn yield_running(&mut self, cpu: usize, t: ThreadId) {
        self.update_curr(cpu);
        let th = &mut self.threads[t as usize];
        match self.cpus[cpu].rq.yield_task(&mut th.se) {
            Tick::Throttle => self.throttle(cpu, t),
            _ => {
                self.deschedule(cpu, Off::Requeue);
                self.enqueue(t, cpu, Enqueue::default());
            }
        }
        self.resched(cpu);
    }
}

// ---- synchronisation: mutexes, condition variables, barriers, semaphores, fork -----------------

/// Most wake-ups by synchronisation at one instant: threads waking each other without ever
/// letting time pass (a `sync` ping-pong with no `run`) would otherwise hang the simulation; the
/// thread woken past it exits, as a thread stepping through too many timeless events does.
const MAX_SYNC_SPINS: u64 = MAX_IDLE_STEPS as u64;

/// Longest priority-inheritance chain followed (the kernel's `max_lock_depth`).
const MAX_LOCK_DEPTH: usize = 1024;

/// The order in which a blocked thread is served, from its scheduling parameters now (boosted
/// ones included): deadline threads by absolute deadline, then rt threads by priority, then the
/// others — by nice on a PI mutex (rt_mutex waiters are ordered by `prio`), all equal on a futex
/// (its waiter list is ordered by min(normal_prio, MAX_RT_PRIO)).
fn wait_key(threads: &[Thread], pi: bool, t: ThreadId) -> WaitKey {
    let th = &threads[t as usize];
    match th.se.key() {
        Key::Deadline(d) => (0, if pi { d } else { 0 }),
        Key::Rt(k) => (1, k as u64),
        _ => (
            2,
            match (pi, th.policy) {
                (false, _) => 0,
                (true, Policy::Other { nice }) => nice.saturating_add(20).clamp(0, 39) as u64,
                (true, _) => 40,
            },
        ),
    }
}

impl Sim {
    /// Runs the thread's pending synchronisation operations until one blocks it (true) or none
    /// is left.
    // Out of line and cold: workloads without sync events keep `step` as compact as before.
    #[cold]
    #[inline(never)]
    fn run_ops(&mut self, t: ThreadId) -> bool {
        let ti = t as usize;
        while let Some(op) = self.sync.tsync[ti].ops.pop() {
            if self.sync_op(t, op) {
                return true;
            }
        }
        false
    }

    /// One operation by `t`; true if it blocks `t`.
    fn sync_op(&mut self, t: ThreadId, op: Op) -> bool {
        match op {
            Op::Lock(m) => self.lock(t, m),
            Op::Unlock(m) => {
                self.unlock(t, m);
                false
            }
            Op::Wait { cond, mutex } => {
                // pthread_cond_wait: releases the mutex and sleeps on the condition at once.
                self.unlock(t, mutex);
                self.sync.objects.cond_wait(cond, mutex, t);
                true
            }
            Op::Signal(c) | Op::Broadcast(c) => {
                let mut woken = std::mem::take(&mut self.sync.woken);
                woken.clear();
                let (objects, threads, pi) = (&mut self.sync.objects, &self.threads, self.sync.pi);
                objects.cond_wake(
                    c,
                    matches!(op, Op::Broadcast(_)),
                    |w| wait_key(threads, pi, w),
                    &mut woken,
                );
                for &w in &woken {
                    match w.mutex {
                        // It wakes holding the mutex again, or waits for it.
                        Some(m) => {
                            if !self.lock(w.t, m) {
                                self.sync.pending.push(SyncAction::Wake(w.t));
                            }
                        }
                        None => self.sync.pending.push(SyncAction::Wake(w.t)),
                    }
                }
                self.sync.woken = woken;
                false
            }
            Op::Barrier(b) => {
                let mut woken = std::mem::take(&mut self.sync.woken);
                woken.clear();
                let (objects, threads, pi) = (&mut self.sync.objects, &self.threads, self.sync.pi);
                let passes = objects.barrier(b, t, |w| wait_key(threads, pi, w), &mut woken);
                for &w in &woken {
                    self.sync.pending.push(SyncAction::Wake(w.t));
                }
                self.sync.woken = woken;
                !passes
            }
            Op::SemPost(sem) => {
                let (objects, threads, pi) = (&mut self.sync.objects, &self.threads, self.sync.pi);
                if let Some(w) = objects.sem_post(sem, |w| wait_key(threads, pi, w)) {
                    self.sync.pending.push(SyncAction::Wake(w));
                }
                false
            }
            Op::SemWait(sem) => !self.sync.objects.sem_wait(sem, t),
        }
    }

    /// `t` takes mutex `m` or queues for it (true: it must block). A queued thread boosts the
    /// owner when the mutex inherits priorities.
    fn lock(&mut self, t: ThreadId, m: usize) -> bool {
        match self.sync.objects.lock(m, t) {
            Acquire::Owned => {
                self.sync.tsync[t as usize].owned.push(m);
                false
            }
            Acquire::Blocked { owner } => {
                self.sync.tsync[t as usize].blocked_on = Some(m);
                if self.sync.pi {
                    self.sync.pending.push(SyncAction::Pi(owner));
                }
                true
            }
        }
    }

    /// `t` releases mutex `m`: handed to the top waiter, which wakes; `t` loses what it
    /// inherited through `m`.
    fn unlock(&mut self, t: ThreadId, m: usize) {
        let (objects, threads, pi) = (&mut self.sync.objects, &self.threads, self.sync.pi);
        let Ok(next) = objects.unlock(m, t, |w| wait_key(threads, pi, w)) else {
            return;
        };
        self.sync.tsync[t as usize].owned.retain(|&o| o != m);
        if let Some(n) = next {
            let s = &mut self.sync.tsync[n as usize];
            s.blocked_on = None;
            s.owned.push(m);
            self.sync.pending.push(SyncAction::Wake(n));
            if self.sync.pi {
                self.sync.pending.push(SyncAction::Pi(n));
            }
        }
        if self.sync.pi && self.sync.tsync[t as usize].boost.is_some() {
            self.sync.pending.push(SyncAction::Pi(t));
        }
    }

    /// Applies what the threads stepped through at this event decided: wake-ups, priority
    /// changes, forks — in order, including those the woken threads decide in turn.
    #[cold]
    #[inline(never)]
    fn flush_sync(&mut self, obs: &mut dyn Observer) {
        let mut i = 0;
        while i < self.sync.pending.len() {
            let a = std::mem::replace(&mut self.sync.pending[i], SyncAction::Pi(0));
            i += 1;
            match a {
                SyncAction::Wake(t) => self.sync_wake(t),
                SyncAction::Pi(t) => self.pi_update(t),
                SyncAction::Fork { parent, spec } => self.fork(parent, spec),
                SyncAction::SetPolicy(t, policy) => self.phase_policy(t, policy),
                SyncAction::SetAffinity(t, mask) => self.set_affinity(t, mask),
            }
            if self.sync.failure.is_some() {
                break;
            }
        }
        self.sync.pending.clear();
        // Before any job or trace event of theirs.
        for i in 0..self.sync.started.len() {
            let t = self.sync.started[i];
            obs.thread_started(t, &self.sync.names[t as usize]);
        }
        self.sync.started.clear();
    }

    /// A thread blocked on a synchronisation object is woken (it owns what it waited for).
    fn sync_wake(&mut self, t: ThreadId) {
        let ti = t as usize;
        if self.threads[ti].state != State::Sleeping || !self.sync.tsync[ti].blocked {
            return;
        }
        self.sync.tsync[ti].blocked = false;
        let now = self.now;
        if self.sync.spins.0 == now {
            self.sync.spins.1 += 1;
        } else {
            self.sync.spins = (now, 1);
        }
        if self.sync.spins.1 > MAX_SYNC_SPINS {
            self.finish_job(t);
            self.exit(t);
            return;
        }
        if self.cfg.wakeup_latency > 0 {
            // Runnable once the wake-up reaches it; it owns what it waited for already.
            self.threads[ti].sync_resume = true;
            self.push_event(now + self.cfg.wakeup_latency, Kind::Wakeup, t, 0);
            return;
        }
        self.sync_resume(t);
    }

    /// A thread woken by a synchronisation operation runs the rest of the event it blocked in
    /// (`suspend`'s wait and unlock after its lock, …) before its program goes on; that may
    /// block it again at once.
    fn sync_resume(&mut self, t: ThreadId) {
        let ti = t as usize;
        if !self.sync.tsync[ti].ops.is_empty() && self.run_ops(t) {
            self.sync.tsync[ti].blocked = true;
            return;
        }
        self.wakeup_event(t);
    }

    /// Priority inheritance (`rt_mutex_adjust_prio()` and its chain walk): `t` runs at the
    /// priority of the most urgent waiter of the mutexes it holds when that beats its own, and
    /// a change propagates to the owner of the mutex `t` waits for.
    fn pi_update(&mut self, t: ThreadId) {
        let mut t = t;
        for _ in 0..MAX_LOCK_DEPTH {
            let want = self.pi_target(t);
            let ti = t as usize;
            if want == self.sync.tsync[ti].boost {
                return;
            }
            self.sync.tsync[ti].boost = want;
            if self.threads[ti].state != State::Exited {
                // The kernel reports the policy the thread set, not the boosted one.
                let base = self.threads[ti].policy;
                // rt and fair policies need no admission: the change cannot fail.
                let _ = self.apply_policy(t, want.unwrap_or(base));
                self.threads[ti].policy = base;
            }
            match self.sync.tsync[ti]
                .blocked_on
                .and_then(|m| self.sync.objects.owner(m))
            {
                Some(o) if o != t => t = o,
                _ => return,
            }
        }
    }

    /// The policy `t` inherits from the waiters of the mutexes it holds, if any beats its own.
    /// Simplification: a deadline waiter boosts a non-deadline owner to SCHED_FIFO 99 (the kernel
    /// runs it in the deadline class with the waiter's deadline), and a deadline owner is never
    /// boosted.
    fn pi_target(&self, t: ThreadId) -> Option<Policy> {
        let (threads, pi) = (&self.threads, self.sync.pi);
        let top = self.sync.tsync[t as usize]
            .owned
            .iter()
            .filter_map(|&m| {
                self.sync.objects.top_waiter_key(m, |w| {
                    if w == t {
                        (u8::MAX, 0)
                    } else {
                        wait_key(threads, pi, w)
                    }
                })
            })
            .min()?;
        let donor = match top {
            (0, _) => 99,
            (1, k) => 99u8.saturating_sub(k.min(99) as u8),
            _ => return None,
        };
        match self.threads[t as usize].policy {
            Policy::Deadline(_) => None,
            Policy::Fifo { priority } | Policy::Rr { priority } if priority >= donor => None,
            Policy::Rr { .. } => Some(Policy::Rr { priority: donor }),
            _ => Some(Policy::Fifo { priority: donor }),
        }
    }

    /// A pass through a phase begins: its policy (sticky) and its CPUs (or the thread's) are
    /// applied once the event is over when the thread is on a CPU (which must not change under
    /// it while it steps). A thread stepping off a CPU (at its wake-up) is changed at once, so it
    /// wakes under its new policy on a CPU of its new mask, as rt-app applies them before the
    /// phase's events.
    ///
    /// rt-app then moves the thread into the phase's task group (`set_thread_taskgroup()`),
    /// which may put it to sleep: the step it sleeps in, if so. `phase` is the thread's phase
    /// whose pass begins (found again here, out of `step`'s hot loop).
    #[cold]
    #[inline(never)]
    fn phase_start(&mut self, t: ThreadId, phase: *const Phase) -> Option<Step> {
        let th = &self.threads[t as usize];
        let spec = &self.workload.threads[th.spec as usize];
        let p = spec.phases.iter().find(|&p| std::ptr::eq(p, phase))?;
        let (policy, cpus, group) = (p.policy, p.affinity.clone(), p.taskgroup.clone());
        let on_cpu = matches!(th.state, State::Running | State::Queued | State::Throttled);
        let m = self.cpus.len();
        let spec_cpus = spec.affinity.as_deref();
        let mask = match cpus.as_deref().or(spec_cpus) {
            // Checked when the simulation was built.
            Some(cpus) => affinity_mask(cpus, m).unwrap_or_else(|_| vec![true; m]),
            None => vec![true; m],
        };
        let mask = (mask != th.affinity).then_some(mask);
        if let Some(p) = policy.filter(|&p| p != th.policy) {
            if on_cpu {
                self.sync.pending.push(SyncAction::SetPolicy(t, p));
            } else {
                self.phase_policy(t, p);
            }
        }
        if let Some(mask) = mask {
            if on_cpu {
                self.sync.pending.push(SyncAction::SetAffinity(t, mask));
            } else {
                self.set_affinity(t, mask);
            }
        }
        self.taskgroup_enter(t, &group?)
    }

    /// A phase's policy: `sched_setattr()`; a refusal stops the run, as rt-app exits.
    fn phase_policy(&mut self, t: ThreadId, policy: Policy) {
        if self.threads[t as usize].state == State::Exited {
            return;
        }
        if let Err((_, message)) = self.set_policy(t, policy) {
            self.sync.failure = Some(SimError::PhasePolicy {
                t: self.now,
                thread: self.sync.names[t as usize].clone(),
                message,
            });
            self.events.clear();
        }
    }

    /// `sched_setaffinity()`: a thread on a CPU outside its new mask moves to one inside it (a
    /// running one is switched out, as the migration stopper does).
    fn set_affinity(&mut self, t: ThreadId, mask: Vec<bool>) {
        let ti = t as usize;
        let pinned = match mask.iter().filter(|&&a| a).count() {
            1 => mask.iter().position(|&a| a).map(|c| c as u32),
            _ => None,
        };
        let th = &mut self.threads[ti];
        th.affinity = mask;
        th.pinned = pinned;
        let cpu = th.cpu as usize;
        if th.affinity[cpu] {
            return;
        }
        match th.state {
            State::Running => {
                self.deschedule(cpu, Off::Preempted);
                let target = self.select_cpu(t);
                self.migrate_queued(t, target);
                self.resched(cpu);
                self.resched(target);
            }
            State::Queued => {
                let target = self.select_cpu(t);
                self.migrate_queued(t, target);
                self.resched(cpu);
                self.resched(target);
            }
            // A delayed fair sleeper leaves the old CPU's queue; it picks a CPU of its new mask
            // when it wakes.
            _ => {
                self.cpus[cpu].rq.drop_delayed(t);
                if self.tg.is_some() {
                    self.taskgroup_changed(t, None);
                }
            }
        }
    }

    /// rt-app's `fork`: a new thread of spec `spec` starts now (after its spec's `delay`),
    /// named `<task>-<index>-<nfork:04>`; past [`FORKS_LIMIT`] forks of the task the run stops,
    /// as rt-app exits.
    fn fork(&mut self, parent: ThreadId, spec: usize) {
        let n = self.sync.nforks[spec];
        let task = self.workload.threads[spec].name.clone();
        if n >= FORKS_LIMIT {
            self.sync.failure = Some(SimError::ForkLimit {
                t: self.now,
                thread: self.sync.names[parent as usize].clone(),
                task,
                limit: FORKS_LIMIT,
            });
            self.events.clear();
            return;
        }
        self.sync.nforks[spec] = n + 1;
        let id = self.threads.len();
        let th = match new_thread(spec, id, &self.workload.threads[spec], &self.cfg, &self.fair) {
            Ok(th) => th,
            // Checked when the simulation was built.
            Err(e) => {
                self.sync.failure = Some(e);
                self.events.clear();
                return;
            }
        };
        let mut th = th;
        let parent_cpu = self.threads[parent as usize].cpu;
        if self.lb.is_some() && th.affinity[parent_cpu as usize] {
            // `sched_fork()`: the child starts on its parent's CPU, which `wake_up_new_task()`
            // then balances from.
            th.cpu = parent_cpu;
            th.recent_cpu = parent_cpu;
        }
        let (cpu, se) = (th.cpu as usize, th.se);
        let delay = self.workload.threads[spec].start_delay.ns();
        self.threads.push(th);
        self.sync.tsync.push(ThreadSync::default());
        self.sync.names.push(format!("{task}-{id}-{n:04}"));
        self.sync.started.push(id as ThreadId);
        // Its reservation counts on its CPU and root domain from now, as at the start of the run.
        self.update_curr(cpu);
        self.cpus[cpu].rq.attach_bw(&se);
        let extra = self.root_domains[self.root_domain[cpu]].change(0, se.bandwidth());
        self.adjust_extra(cpu, extra);
        self.push_event(self.now.saturating_add(delay), Kind::Wakeup, id as u32, 0);
    }
}

// ---- task groups: shares and moves (`crate::class::group`) ------------------------------------

impl Sim {
    /// rt-app's `set_thread_taskgroup()` of `t` into `path` (`/`: the root): unless it is there
    /// already, the thread sleeps for the move ([`GroupState::start_move`]) and is in the group
    /// when it wakes (the kernel moves it once the writer holds the rwsem).
    #[cold]
    #[inline(never)]
    fn taskgroup_enter(&mut self, t: ThreadId, path: &str) -> Option<Step> {
        let now = self.now;
        let tg = self.tg.as_deref_mut()?;
        let target = tg.groups.index(path);
        let ti = t as usize;
        tg.add_thread(t);
        // rt-app compares the group it last wrote with the new one: the first write, even of the
        // root, is a move.
        if tg.written[ti] && tg.member[ti] == target {
            return None;
        }
        tg.written[ti] = true;
        let end = tg.start_move(t, target, now);
        self.threads[ti].exact_wake = true;
        Some(Step::Block(end, None))
    }

    /// rt-app moves a thread into its thread-level group as it starts.
    #[cold]
    #[inline(never)]
    fn taskgroup_start(&mut self, t: ThreadId) -> Option<Step> {
        let g = self.workload.threads[self.threads[t as usize].spec as usize]
            .taskgroup
            .clone()?;
        self.taskgroup_enter(t, &g)
    }

    /// `t` wakes from a move: it is in its new group now. Its weight follows when it is queued;
    /// a thread left in the root gets its own weight back at once.
    #[cold]
    #[inline(never)]
    fn taskgroup_arrive(&mut self, t: ThreadId) {
        let Some(tg) = self.tg.as_deref_mut() else { return };
        tg.add_thread(t);
        if !tg.finish_move(t) {
            return;
        }
        if tg.member[t as usize].is_none() {
            if let Some(w) = crate::class::fair::policy_weight(&self.threads[t as usize].policy) {
                self.taskgroup_reweight(t, w);
            }
        }
        // A sleeper still queued (DELAY_DEQUEUE) changed group.
        self.taskgroup_refresh(None);
    }

    /// `update_cfs_group()` everywhere: recomputes the groups' loads and entity weights from the
    /// threads on run queues now (`arriving` counted on its CPU before it is queued, so that it is
    /// placed with its weight in the group) and reweights every grouped thread whose share
    /// changed.
    #[cold]
    #[inline(never)]
    fn taskgroup_refresh(&mut self, arriving: Option<(ThreadId, usize)>) -> bool {
        let Some(mut tg) = self.tg.take() else {
            return false;
        };
        let mut on = std::mem::take(&mut tg.scratch);
        on.clear();
        for &t in &tg.tracked {
            let Some(g) = tg.member[t as usize] else { continue };
            let th = &self.threads[t as usize];
            let Entity::Fair(_) = th.se else { continue };
            let Some(own) = crate::class::fair::policy_weight(&th.policy) else {
                continue;
            };
            let c = th.cpu as usize;
            let cpu = match arriving {
                Some((a, to)) if a == t => Some(to),
                _ => (self.cpus[c].curr == Some(t)
                    || (th.state != State::Exited && self.cpus[c].rq.fair.holds(t)))
                .then_some(c),
            };
            if let Some(cpu) = cpu {
                on.push((t, g, cpu, own));
            }
        }
        tg.groups.update(on.iter().map(|&(_, g, c, w)| (g, c, w)));
        let mut changed = Vec::new();
        for &(t, g, cpu, own) in &on {
            let w = tg.groups.effective(g, cpu, own);
            if let Entity::Fair(e) = &self.threads[t as usize].se {
                if e.weight != w {
                    changed.push((t, w));
                }
            }
        }
        tg.scratch = on;
        self.tg = Some(tg);
        let any = !changed.is_empty();
        for (t, w) in changed {
            self.taskgroup_reweight(t, w);
        }
        any
    }

    /// Thread `t` joins `cpu`'s run queue (`Some`, before it is queued) or left one (`None`): the
    /// shares of its group change if it is in one.
    #[cold]
    #[inline(never)]
    fn taskgroup_changed(&mut self, t: ThreadId, joins: Option<usize>) {
        let grouped = self
            .tg
            .as_deref()
            .is_some_and(|tg| tg.member.get(t as usize).is_some_and(Option::is_some));
        if grouped {
            self.taskgroup_refresh(joins.map(|c| (t, c)));
        }
    }

    /// `pick_next_task()` of an idle `cpu` with task groups: delayed sleepers the pick lets
    /// leave change their groups' shares, and the pick is made again with the new weights (the
    /// kernel reweights the group entities as it dequeues them, before it picks on).
    #[cold]
    #[inline(never)]
    fn taskgroup_pick(&mut self, cpu: usize) -> Option<(Key, ThreadId)> {
        let mut p = self.cpus[cpu].rq.pick_next();
        while self.taskgroup_refresh(None) {
            p = self.cpus[cpu].rq.pick_next();
        }
        p
    }

    /// `reweight_entity()` of `t`'s fair entity to `w`, wherever it is: running (accounted up to
    /// now first), queued or delayed on its CPU, or on no queue.
    fn taskgroup_reweight(&mut self, t: ThreadId, w: u64) {
        let ti = t as usize;
        let cpu = self.threads[ti].cpu as usize;
        if self.cpus[cpu].curr == Some(t) {
            self.update_curr(cpu);
            let Entity::Fair(e) = &mut self.threads[ti].se else {
                return;
            };
            self.cpus[cpu].rq.fair.reweight_curr(e, w);
            let k = self.cpus[cpu].rq.curr_key(&self.threads[ti].se);
            self.cpudl.set_running(cpu, k);
            self.reprogram(cpu);
        } else if self.cpus[cpu].rq.fair.holds(t) {
            // The running entity's progress counts in V first, as `update_curr()` does.
            if self.cpus[cpu]
                .curr
                .is_some_and(|c| self.threads[c as usize].se.same_queue(&self.threads[ti].se))
            {
                self.update_curr(cpu);
            }
            let Entity::Fair(e) = &mut self.threads[ti].se else {
                return;
            };
            self.cpus[cpu].rq.fair.reweight_queued(t, e, w);
            self.queued_changed(cpu);
        } else if let Entity::Fair(e) = &mut self.threads[ti].se {
            FairRq::reweight_sleeping(e, w);
        }
    }

    /// A thread that leaves the run (exits, or moves back to the root when it ends, as rt-app's
    /// `reset_thread_taskgroup()` does) counts as a move for the machine's `rcu_sync`.
    #[cold]
    #[inline(never)]
    fn taskgroup_exit(&mut self, t: ThreadId) {
        let now = self.now;
        let Some(tg) = self.tg.as_deref_mut() else { return };
        tg.add_thread(t);
        if tg.written[t as usize] {
            tg.start_move(t, None, now);
            tg.finish_move(t);
        }
        self.taskgroup_refresh(None);
    }
}

/// A thread's reservation state as the adaptation engine's events carry it.
fn dl_state(se: &Entity) -> Option<DlState> {
    se.dl_state()
        .map(|(deadline, runtime)| DlState { deadline, runtime })
}

// ---- the adaptation engine's view: sensors, actuators, hosted controllers ----------------------

impl Sim {
    /// Hosts a controller: its `tick` runs every `period()` ns of simulated time (first at
    /// now + period), after everything else scheduled at the same instant; its `on_app_event`
    /// runs right after the event that produced the application event.
    pub fn add_controller(&mut self, c: Box<dyn Controller>) {
        let id = self.controllers.len();
        let first = c.period().map(|p| self.now.saturating_add(p.max(1)));
        self.controllers.push(Some(c));
        if let Some(at) = first {
            self.push_event(at, Kind::Controller, id as u32, 0);
        }
    }

    fn run_controller(&mut self, id: usize) {
        let Some(mut c) = self.controllers.get_mut(id).and_then(Option::take) else {
            return;
        };
        c.tick(&mut crate::kernel::SimKernel(self));
        let next = c.period().map(|p| self.now.saturating_add(p.max(1)));
        self.controllers[id] = Some(c);
        if let Some(at) = next {
            self.push_event(at, Kind::Controller, id as u32, 0);
        }
    }

    fn dispatch_app_events(&mut self) {
        while !self.pending_app.is_empty() {
            let events = std::mem::take(&mut self.pending_app);
            for ev in &events {
                for id in 0..self.controllers.len() {
                    if let Some(mut c) = self.controllers[id].take() {
                        c.on_app_event(ev, &mut crate::kernel::SimKernel(self));
                        self.controllers[id] = Some(c);
                    }
                }
            }
        }
    }

    /// A kernel handle for code outside the event loop (tests, tools) to use between runs.
    pub fn kernel(&mut self) -> crate::kernel::SimKernel<'_> {
        crate::kernel::SimKernel(self)
    }

    pub(crate) fn thread_count(&self) -> usize {
        self.threads.len()
    }

    pub(crate) fn cpu_count(&self) -> usize {
        self.cpus.len()
    }

    /// Moves a thread to `state`, accounting its run delay: the time it is runnable without a
    /// CPU, queued or throttled (schedstat's `run_delay` counts both on Linux).
    fn set_state(&mut self, t: ThreadId, state: State) {
        let now = self.now;
        let th = &mut self.threads[t as usize];
        let waiting = matches!(state, State::Queued | State::Throttled);
        match (th.waiting_since, waiting) {
            (None, true) => th.waiting_since = Some(now),
            (Some(since), false) => {
                th.stats.run_delay += now.saturating_sub(since);
                th.waiting_since = None;
            }
            _ => {}
        }
        th.state = state;
    }

    /// Cumulative time a thread was runnable without a CPU (queued or throttled), ns, including
    /// the wait in progress.
    pub fn run_delay(&self, t: ThreadId) -> Option<u64> {
        let th = self.threads.get(t as usize)?;
        let current = th.waiting_since.map_or(0, |s| self.now.saturating_sub(s));
        Some(th.stats.run_delay + current)
    }

    /// Cumulative CPU time of a thread, including the slice it is running now.
    pub fn cpu_time(&self, t: ThreadId) -> Option<u64> {
        let th = self.threads.get(t as usize)?;
        let running = match th.state {
            State::Running => {
                let c = &self.cpus[th.cpu as usize];
                if c.curr == Some(t) {
                    // A CPU still leaving idle has not run it yet.
                    (self.now - c.exec_start).saturating_sub(th.stall)
                } else {
                    0
                }
            }
            _ => 0,
        };
        Some(th.stats.exec + running)
    }

    pub(crate) fn set_wake_tracing(&mut self, t: ThreadId, on: bool) -> bool {
        let Some(th) = self.threads.get_mut(t as usize) else {
            return false;
        };
        th.wake_log = if on {
            Some(th.wake_log.take().unwrap_or_default())
        } else {
            None
        };
        true
    }

    pub(crate) fn drain_wake_log(&mut self, t: ThreadId, out: &mut Vec<Wakeup>) -> bool {
        let Some(th) = self.threads.get_mut(t as usize) else {
            return false;
        };
        if let Some(log) = th.wake_log.as_mut() {
            out.append(log);
        }
        true
    }

    /// The policy a thread runs under now.
    pub fn policy_of(&self, t: ThreadId) -> Option<Policy> {
        self.threads.get(t as usize).map(|th| th.policy)
    }

    /// Bandwidth available to SCHED_DEADLINE tasks in thread `t`'s root domain, fixed point
    /// (BW_SHIFT): cap_scale(u_max, Σ capacity), as `__dl_overflow()` sees it, less the domain's
    /// fair servers.
    pub(crate) fn dl_limit_fixed(&self, t: ThreadId) -> Option<u64> {
        let th = self.threads.get(t as usize)?;
        Some(self.root_domains[self.root_domain[th.cpu as usize]].task_limit())
    }

    /// SCHED_DEADLINE bandwidth available on the platform, in CPUs: the sum over its root
    /// domains of what admission enforces.
    pub fn kernel_limit(&self) -> f64 {
        let total: u64 = self.root_domains.iter().map(RootDomain::task_limit).sum();
        total as f64 / (1u64 << pacer_model::reservation::BW_SHIFT) as f64
    }

    /// Current frequency of cluster 0 and its available ones, kHz (see [`Sim::cluster_frequency`]
    /// for the others).
    pub fn frequency(&self) -> (u32, &[u32]) {
        let d = &self.domains[0];
        (d.freqs[d.cur], &d.freqs)
    }

    /// Sets cluster `cluster`'s frequency as the kernel's cpufreq interface would: under the
    /// `userspace` governor ([`Governor::Fixed`]) it is the new target (`scaling_setspeed`);
    /// under the others it is a floor (`scaling_min_freq`): schedutil never goes below it (and
    /// re-evaluates at once, ignoring its rate limit), powersave runs at it, performance is
    /// unaffected. The new OPP takes effect after the cluster's switch latency.
    pub fn set_frequency(&mut self, cluster: usize, khz: u32) -> Result<(), SimError> {
        let clusters = self.domains.len();
        let d = self
            .domains
            .get_mut(cluster)
            .ok_or(SimError::NoSuchCluster { cluster, clusters })?;
        let Some(idx) = d.freqs.iter().position(|&f| f == khz) else {
            return Err(SimError::NotAnOpp {
                cluster,
                khz,
                available: d.freqs.clone(),
            });
        };
        match d.governor {
            Governor::Fixed { .. } => {
                d.governor = Governor::Fixed { khz };
                d.last_change = Some(self.now);
                self.request_opp(cluster, idx);
            }
            Governor::Performance => d.floor = idx,
            Governor::Powersave => {
                d.floor = idx;
                self.request_opp(cluster, idx);
            }
            Governor::Schedutil(_) => {
                d.floor = idx;
                d.limits_changed = true;
                self.evaluate(cluster);
            }
        }
        Ok(())
    }

    /// Number of clusters (frequency domains).
    pub fn cluster_count(&self) -> usize {
        self.domains.len()
    }

    /// The cluster (frequency domain) of a CPU.
    pub fn cluster_of(&self, cpu: usize) -> Option<usize> {
        self.dvfs.get(cpu).map(|d| d.cluster)
    }

    /// Current frequency of a cluster, kHz.
    pub fn cluster_frequency(&self, cluster: usize) -> Option<u32> {
        self.domains.get(cluster).map(|d| d.freqs[d.cur])
    }

    /// The frequency a cluster is switching to (its current one when no switch is in flight), kHz.
    pub fn requested_frequency(&self, cluster: usize) -> Option<u32> {
        self.domains
            .get(cluster)
            .map(|d| d.freqs[d.pending.unwrap_or(d.cur)])
    }

    /// Frequencies a cluster can run at, ascending, kHz.
    pub fn available_frequencies(&self, cluster: usize) -> Option<&[u32]> {
        self.domains.get(cluster).map(|d| d.freqs.as_slice())
    }

    /// A cluster's governor.
    pub fn governor(&self, cluster: usize) -> Option<&Governor> {
        self.domains.get(cluster).map(|d| &d.governor)
    }

    /// The platform simulated (with `freqs_khz` filled in for clusters without OPPs).
    pub fn platform(&self) -> &Platform {
        &self.platform
    }

    /// Gives a SCHED_OTHER thread a custom slice (`sched_attr.sched_runtime`, Linux ≥ 6.12),
    /// clamped to 0.1–100 ms as the kernel does, or restores the base slice (`None`). It takes
    /// effect at the thread's next request (placement or deadline renewal).
    pub fn set_fair_slice(&mut self, t: ThreadId, slice: Option<u64>) -> Result<(), SimError> {
        let fair = self.fair;
        let th = self
            .threads
            .get_mut(t as usize)
            .ok_or(SimError::NoSuchThread(t))?;
        if th.se.set_fair_slice(slice, &fair) {
            Ok(())
        } else {
            Err(SimError::BadThread {
                thread: self.sync.names[t as usize].clone(),
                message: "a custom slice needs SCHED_OTHER or SCHED_IDLE".into(),
            })
        }
    }

    /// Sets the frequency-insensitive fraction of a thread's work (see `SimConfig::mem_bound`),
    /// from now on.
    pub fn set_mem_bound(&mut self, t: ThreadId, fraction: f64) -> Result<(), SimError> {
        if !(fraction.is_finite() && (0.0..=1.0).contains(&fraction)) {
            return Err(SimError::BadMemBound(format!(
                "thread {t}: is {fraction}, expected a fraction in [0, 1]"
            )));
        }
        let th = self.threads.get(t as usize).ok_or(SimError::NoSuchThread(t))?;
        let cpu = th.cpu as usize;
        let running = self.cpus[cpu].curr == Some(t);
        if running {
            self.update_curr(cpu);
        }
        self.threads[t as usize].mem = fraction;
        if running {
            let c = &mut self.cpus[cpu];
            c.work_speed = work_speed(c.speed, c.capacity, fraction);
            c.armed = None;
            self.reprogram(cpu);
        }
        Ok(())
    }

    /// Frequency residency per CPU and OPP (busy / idle) and the energies derived from it, up to
    /// now.
    pub fn energy_report(&self) -> EnergyReport {
        let cpus = (0..self.cpus.len())
            .map(|c| {
                let d = &self.dvfs[c];
                let dom = &self.domains[d.cluster];
                // Not yet settled: the time since the last OPP change, of which busy is what
                // `update_curr` charged plus what the running thread ran since.
                let cpu = &self.cpus[c];
                let open = self.now.saturating_sub(d.opp_since);
                let running = if cpu.curr.is_some() {
                    self.now.saturating_sub(cpu.exec_start)
                } else {
                    0
                };
                let open_busy = (cpu.busy_acc + running).min(open);
                let opps = dom
                    .opps
                    .iter()
                    .enumerate()
                    .map(|(i, o)| {
                        let (mut busy, mut idle) = (d.busy[i], d.idle[i]);
                        if i == dom.cur {
                            busy += open_busy;
                            idle += open - open_busy;
                        }
                        OppResidency {
                            freq_khz: o.freq_khz,
                            busy_ns: busy,
                            idle_ns: idle,
                            active_power: o.active_mw,
                            idle_power: o.idle_mw,
                        }
                    })
                    .collect();
                CpuEnergy::new(c, d.cluster, opps)
            })
            .collect();
        EnergyReport::new(self.now, cpus)
    }

    /// A CPU's utilisation signals now: PELT (rt, fair), WALT, the deadline running bandwidth, and
    /// what schedutil asks for.
    pub fn util(&self, cpu: usize) -> Option<CpuUtil> {
        let d = self.dvfs.get(cpu)?;
        let sig = self.signals_now(cpu);
        let dom = &self.domains[d.cluster];
        Some(CpuUtil {
            cpu,
            cluster: d.cluster,
            tracked: sig.is_some(),
            pelt_rt: sig.map_or(0, |s| s.rt.util_avg),
            pelt_fair: sig.map_or(0, |s| s.fair.util_avg),
            walt: sig.map_or(0, |s| s.walt.util()),
            dl_bw: schedutil::dl_util(self.cpus[cpu].rq.running_bw()),
            demand: dom.schedutil().map(|cfg| self.cpu_demand(cpu, cfg, sig.as_ref())),
            capacity: self.cpus[cpu].speed,
        })
    }

    // ---- DVFS internals -----------------------------------------------------------------------

    /// Brings a CPU's utilisation signals up to now, under the state it has had since the last call
    /// (which is its current one: every change of `curr` and of speed calls this first).
    fn dvfs_account(&mut self, cpu: usize) {
        let c = &self.cpus[cpu];
        if let Some(s) = self.dvfs[cpu].signals.as_mut() {
            let running = c.curr.map(|t| self.threads[t as usize].se.class());
            s.advance(self.now, running, c.speed);
        }
    }

    /// Settles a CPU's residency at its cluster's current OPP up to now (after `update_curr`).
    fn settle_residency(&mut self, cpu: usize) {
        let now = self.now;
        let c = &mut self.cpus[cpu];
        let d = &mut self.dvfs[cpu];
        let opp = self.domains[d.cluster].cur;
        let elapsed = now.saturating_sub(d.opp_since);
        let busy = c.busy_acc.min(elapsed);
        d.busy[opp] += busy;
        d.idle[opp] += elapsed - busy;
        c.busy_acc = 0;
        d.opp_since = now;
    }

    /// A copy of a CPU's signals advanced to now (for reading without mutating).
    fn signals_now(&self, cpu: usize) -> Option<Signals> {
        let mut s = self.dvfs[cpu].signals?;
        let c = &self.cpus[cpu];
        s.advance(
            self.now,
            c.curr.map(|t| self.threads[t as usize].se.class()),
            c.speed,
        );
        Some(s)
    }

    /// What schedutil asks for on `cpu` (capacity units), from signals `sig` brought up to now.
    fn cpu_demand(&self, cpu: usize, cfg: &crate::dvfs::SchedutilConfig, sig: Option<&Signals>) -> u64 {
        schedutil::demand(cfg, &self.schedutil_input(cpu, sig))
    }

    /// What schedutil reads of `cpu`, with signals `sig` already brought up to now.
    fn schedutil_input<'a>(&'a self, cpu: usize, sig: Option<&'a Signals>) -> schedutil::CpuInput<'a> {
        let c = &self.cpus[cpu];
        schedutil::CpuInput {
            capacity: c.capacity,
            running_bw: c.rq.running_bw(),
            rt_runnable: c
                .rq
                .rt_runnable(c.curr.map(|t| self.threads[t as usize].se.class())),
            signals: sig,
        }
    }

    /// A scheduler event on `cpu` (enqueue, dequeue, switch): its schedutil looks again at the
    /// end of the event, and a busy CPU keeps a tick armed.
    fn dvfs_touch(&mut self, cpu: usize) {
        let k = self.dvfs[cpu].cluster;
        if self.domains[k].schedutil().is_none() {
            return;
        }
        self.domains[k].dirty = true;
        let d = &mut self.dvfs[cpu];
        if self.cpus[cpu].curr.is_some() && !d.tick_armed {
            d.tick_armed = true;
            d.tick_gen += 1;
            let gen = d.tick_gen;
            let tick = self.cfg.tick_ns;
            let at = (self.now / tick + 1).saturating_mul(tick);
            self.push_event(at, Kind::Tick, cpu as u32, gen);
        }
    }

    /// The running bandwidth of `cpu` changed (`__add_running_bw()` / `__sub_running_bw()` call
    /// `cpufreq_update_util()`).
    fn dl_bw_changed(&mut self, cpu: usize) {
        if self.dvfs_on {
            let k = self.dvfs[cpu].cluster;
            if self.domains[k].schedutil().is_some() {
                self.domains[k].dirty = true;
            }
        }
    }

    /// The scheduler tick of a busy CPU: re-evaluates, re-arms while the CPU stays busy (an idle
    /// CPU gets no tick, as with NO_HZ).
    fn tick_event(&mut self, cpu: usize) {
        self.dvfs[cpu].tick_armed = false;
        if self.cpus[cpu].curr.is_some() {
            self.dvfs_touch(cpu);
        }
    }

    /// Runs the governors that have something new to look at.
    fn governors_run(&mut self) {
        for k in 0..self.domains.len() {
            if self.domains[k].dirty {
                self.domains[k].dirty = false;
                self.evaluate(k);
            }
        }
    }

    /// schedutil on cluster `k` (`sugov_update_shared()`): rate limit, then the smallest OPP that
    /// meets the largest demand of its CPUs, never below the floor.
    fn evaluate(&mut self, k: usize) {
        let Some(cfg) = self.domains[k].schedutil().copied() else {
            return;
        };
        let now = self.now;
        let d = &self.domains[k];
        let bw = d
            .cpus
            .iter()
            .map(|&c| (self.cpus[c].rq.running_bw(), self.dvfs[c].bw_seen));
        if !schedutil::should_update(d, &cfg, bw, now) {
            return;
        }
        self.domains[k].limits_changed = false;
        for i in 0..self.domains[k].cpus.len() {
            let c = self.domains[k].cpus[i];
            self.dvfs_account(c);
            self.dvfs[c].bw_seen = schedutil::dl_util(self.cpus[c].rq.running_bw());
        }
        let d = &self.domains[k];
        let inputs = d
            .cpus
            .iter()
            .map(|&c| self.schedutil_input(c, self.dvfs[c].signals.as_ref()));
        let target = schedutil::target(d, &cfg, inputs);
        let d = &self.domains[k];
        if target == d.pending.unwrap_or(d.cur) {
            return;
        }
        self.domains[k].last_change = Some(now);
        self.request_opp(k, target);
    }

    /// Asks cluster `k` for OPP `idx`: at once without a switch latency; otherwise a switch starts
    /// (or the one in flight retargets, as the cpufreq kthread applies the latest request).
    fn request_opp(&mut self, k: usize, idx: usize) {
        let now = self.now;
        let d = &mut self.domains[k];
        if d.latency == 0 {
            d.pending = None;
            self.apply_opp(k, idx);
        } else if d.pending.is_some() {
            d.pending = Some(idx);
        } else if idx != d.cur {
            d.pending = Some(idx);
            d.switch_gen += 1;
            let (gen, at) = (d.switch_gen, now.saturating_add(d.latency));
            self.push_event(at, Kind::FreqSwitch, k as u32, gen);
        }
    }

    fn freq_switch_event(&mut self, k: usize) {
        if let Some(idx) = self.domains[k].pending.take() {
            self.apply_opp(k, idx);
        }
    }

    /// Cluster `k` now runs at OPP `idx`: account everything up to now at the old speed, then
    /// re-time the running work.
    fn apply_opp(&mut self, k: usize, idx: usize) {
        if idx == self.domains[k].cur {
            return;
        }
        let n = self.domains[k].cpus.len();
        for i in 0..n {
            let c = self.domains[k].cpus[i];
            self.update_curr(c);
            self.settle_residency(c);
            self.dvfs_account(c);
        }
        self.domains[k].cur = idx;
        for i in 0..n {
            let c = self.domains[k].cpus[i];
            let speed = self.domains[k].speed(self.cpus[c].capacity as u32);
            let mem = self.cpus[c].curr.map_or(0.0, |t| self.threads[t as usize].mem);
            let cpu = &mut self.cpus[c];
            cpu.speed = speed;
            cpu.work_speed = work_speed(speed, cpu.capacity, mem);
            cpu.armed = None;
            self.reprogram(c);
        }
        self.trace(TraceEvent::Frequency {
            t: self.now,
            cluster: k as u32,
            khz: self.domains[k].freqs[idx],
        });
    }

    /// `sched_setattr()`: changes a thread's policy at run time. SCHED_DEADLINE requests go
    /// through admission control on the thread's root domain (`__dl_overflow()`: Σ bandwidth ≤
    /// the domain's cap, less its fair servers) and fail with `Err(true)` when refused (EBUSY),
    /// `Err(false)` for invalid parameters (EINVAL).
    pub(crate) fn set_policy(&mut self, t: ThreadId, policy: Policy) -> Result<(), (bool, String)> {
        self.apply_policy(t, policy)?;
        // A thread boosted through a PI mutex keeps what it inherits on top of its new policy.
        if let Some(s) = self.sync.tsync.get_mut(t as usize) {
            if s.boost.take().is_some() {
                self.pi_update(t);
            }
        }
        Ok(())
    }

    /// [`Sim::set_policy`] without priority inheritance on top.
    fn apply_policy(&mut self, t: ThreadId, policy: Policy) -> Result<(), (bool, String)> {
        let ti = t as usize;
        if ti >= self.threads.len() {
            return Err((false, format!("no thread {t}")));
        }
        if let Policy::Fifo { priority } | Policy::Rr { priority } = policy {
            if !(1..=99).contains(&priority) {
                return Err((false, format!("rt priority {priority} outside 1..=99")));
            }
        }
        let now = self.now;
        let state = self.threads[ti].state;
        let cpu = self.threads[ti].cpu as usize;
        let runnable = matches!(state, State::Running | State::Queued | State::Throttled);
        let old = self.threads[ti].se;
        let new = old
            .changed(&policy, &self.fair, now, runnable)
            .map_err(|e| (false, e))?;
        let rd = self.root_domain[cpu];
        let (old_bw, new_bw) = (old.bandwidth(), new.bandwidth());
        if new_bw > 0 && self.root_domains[rd].overflows(old_bw, new_bw) {
            return Err((
                true,
                format!(
                    "SCHED_DEADLINE bandwidth would exceed the admission limit of the root domain of CPUs {:?}",
                    self.root_domains[rd].cpus
                ),
            ));
        }
        match state {
            State::Running => {
                self.deschedule(cpu, Off::Block);
            }
            State::Queued => self.dequeue(t),
            // A delayed sleeper leaves the queue (no pull would have taken it).
            _ => {
                self.cpus[cpu].rq.drop_delayed(t);
                if self.tg.is_some() {
                    self.taskgroup_changed(t, None);
                }
            }
        }
        // Take the old entity's bandwidth out of the run queue's sums, put the new one's in.
        self.update_curr(cpu);
        self.cpus[cpu].rq.detach_bw(&old);
        if old.holds_running_bw() {
            self.dl_bw_changed(cpu);
        }
        let extra = self.root_domains[rd].change(old_bw, 0);
        self.adjust_extra(cpu, extra);
        if old_bw > 0 || new_bw > 0 {
            let (runtime, period) = match policy {
                Policy::Deadline(r) => (r.runtime.ns(), r.period.ns()),
                _ => (0, 0),
            };
            self.trace(TraceEvent::Reservation {
                t: now,
                thread: t,
                runtime,
                period,
            });
        }
        let th = &mut self.threads[ti];
        th.timer_gen += 1; // cancels the old entity's timers
        th.throttled = false;
        th.policy = policy;
        th.se = new;
        self.cpus[cpu].rq.attach_bw(&new);
        if new.holds_running_bw() {
            self.dl_bw_changed(cpu);
        }
        let extra = self.root_domains[rd].change(0, new_bw);
        self.adjust_extra(cpu, extra);
        if runnable {
            let target = self.select_cpu(t);
            self.move_bw(t, cpu, target);
            let flags = Enqueue {
                migrated: target != cpu,
                ..Enqueue::default()
            };
            self.enqueue(t, target, flags);
            if target != cpu {
                self.resched(cpu);
            }
            self.resched(target);
        } else if state == State::Running {
            self.resched(cpu);
        }
        Ok(())
    }

    /// Moves every CPU of `cpu`'s root domain's extra (unallocated) bandwidth by `share`.
    fn adjust_extra(&mut self, cpu: usize, share: i64) {
        if share == 0 {
            return;
        }
        let rd = self.root_domain[cpu];
        for i in 0..self.root_domains[rd].cpus.len() {
            let c = self.root_domains[rd].cpus[i];
            self.update_curr(c);
            self.cpus[c].rq.dl.add_extra(share);
            self.reprogram(c);
        }
    }
}

/// The development machine's calibration profile, parsed once: the cost of working-set phases
/// when no profile is configured.
fn measured_profile() -> &'static CacheProfile {
    static MEASURED: std::sync::LazyLock<CacheProfile> = std::sync::LazyLock::new(CacheProfile::measured);
    &MEASURED
}

/// Work of one execution of a working-set phase, ns at capacity 1024: its drawn work (drawn as a
/// `run`'s, so a task set's schedule is the same with or without working sets), or its accesses
/// at the profile's warm cost per line. Reloads are charged at switch-in (`crate::cache`).
fn wss_work_ns(ws: &WorkingSet, profile: &CacheProfile, rng: &mut ThreadRng, units: u64) -> u64 {
    match &ws.amount {
        WssAmount::Work { work } => work.sample_for(rng, units).ns(),
        _ => {
            let n = ws.fixed_accesses().unwrap_or(0);
            // Saturates rather than wraps for absurd counts (f64 → u64 casts clamp).
            (n as f64 * profile.warm_line_ns(ws.order, ws.size)).round() as u64
        }
    }
}
