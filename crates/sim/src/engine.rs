//! The discrete-event engine: simulated time in integer nanoseconds, per-CPU run queues, the
//! classes of [`crate::class`] stacked deadline > rt > fair > idle, and threads executing the
//! workload model of `pacer-workload` (run / runtime / sleep / timer / yield events).
//!
//! Multiprocessor scheduling follows the kernel's distributed run queues: a waking thread picks a
//! CPU (`select_task_rq`: an idle CPU, else the one running the least urgent thread it can
//! preempt — cpudl/cpupri), a preempted thread is pushed to a CPU it can preempt
//! (`push_dl_task`/`push_rt_task`), and a CPU that loses its thread pulls the most urgent queued
//! thread from the others (`pull_dl_task`/`pull_rt_task`, idle balance for fair). Global,
//! clustered and partitioned scheduling are only affinity masks over the same machinery.
//!
//! ## Order of simultaneous events (deterministic)
//! Events at the same instant are processed in this order, ties in insertion order:
//! 1. CPU-local expiries (a running thread finishes its work, exhausts its runtime or slice), so a
//!    job ending at t frees its CPU before anything else happens at t;
//! 2. SCHED_DEADLINE replenishment timers;
//! 3. GRUB inactive timers (0-lag);
//! 4. wake-ups (job releases at timer expiries, ends of sleeps, thread starts), in thread order.
//!
//! After each event the CPUs it touched reschedule immediately (the kernel's resched IPI).
//! Randomness (execution-time models) comes from one ChaCha8 stream per thread, seeded from the
//! run's seed and the thread index, so a thread's draws do not depend on the others.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use pacer_adapt::{AppEvent, Controller, DlState};
use pacer_model::reservation::to_ratio;
use pacer_model::CAPACITY_SCALE;
use pacer_workload::ThreadRng;
use pacer_workload::{Cursor, Event, Policy, Step as Walk, Workload};

use crate::class::deadline::{time_to_exhaust, DlEntity, DlRq};
use crate::class::fair::{weight_of_nice, FairRq, FAIR_SLICE_NS};
use crate::class::rt::{RtRq, RR_TIMESLICE_NS};
use crate::class::{ClassId, Key};
use crate::record::{JobRecord, Observer, ThreadId, ThreadStats, TraceEvent};

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
    /// `sched_rt_runtime_us` / `sched_rt_period_us`: u_max of GRUB reclaiming.
    pub rt_runtime_us: u64,
    pub rt_period_us: u64,
    /// SCHED_RR time slice.
    pub rr_timeslice: u64,
    /// Frequencies the platform can run at, ascending, kHz (one frequency domain). Work and
    /// SCHED_DEADLINE runtime scale with cur/max, as the kernel's scale-invariant accounting does.
    pub freqs_khz: Vec<u32>,
    /// Per-CPU fair-server reservation counted by admission control (Linux ≥ 6.12): runtime and
    /// period in ns, `None` for older kernels.
    pub fair_server: Option<(u64, u64)>,
    /// Charge SCHED_DEADLINE runtime scale-invariantly (δ · f/f_max · capacity/1024), as Linux
    /// does (default). `false` charges wall-clock execution, as AQuoSA did for LFS++ — the
    /// accounting under which a frequency drop makes budgets overrun (LFS++ §6.3, Fig. 10).
    pub scale_invariant_runtime: bool,
}

impl SimConfig {
    pub fn new(cpus: usize) -> Self {
        SimConfig {
            cpus,
            capacities: None,
            seed: 0,
            context_switch_cost: 0,
            migration_cost: 0,
            rt_runtime_us: 950_000,
            rt_period_us: 1_000_000,
            rr_timeslice: RR_TIMESLICE_NS,
            freqs_khz: vec![1_000_000],
            fair_server: Some(pacer_model::reservation::DEFAULT_FAIR_SERVER),
            scale_invariant_runtime: true,
        }
    }
}

/// Why a workload cannot be simulated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error("the platform needs at least one CPU")]
    NoCpus,
    #[error("the workload has no threads")]
    NoThreads,
    #[error("thread `{thread}`: affinity names CPU {cpu}, but the platform has CPUs 0..{cpus}")]
    AffinityOutOfRange { thread: String, cpu: usize, cpus: usize },
    #[error("thread `{thread}`: empty CPU affinity")]
    EmptyAffinity { thread: String },
    #[error("thread `{thread}`: {message}")]
    BadThread { thread: String, message: String },
    #[error("capacities: expected {cpus} values in 1..=1024, got {got:?}")]
    BadCapacities { cpus: usize, got: Vec<u32> },
    #[error("frequencies: expected at least one value, ascending and > 0, got {0:?}")]
    BadFrequencies(Vec<u32>),
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
    class: ClassId,
    rt_prio: u8,
    rr: bool,
    weight: u64,
    dl: Option<DlEntity>,
    affinity: Vec<bool>,
    state: State,
    /// Run queue the thread belongs to (last CPU).
    cpu: u32,
    pc: Cursor,
    /// Work left in the current run event: ns at capacity 1024 (or wall ns for `runtime`).
    remaining: u64,
    wall: bool,
    /// Switch-in cost still to be paid before work progresses.
    overhead: u64,
    job: Option<Job>,
    /// Release time of the job the thread starts when it next wakes (timer expiry).
    pending_release: Option<u64>,
    rel_deadline: u64,
    period: u64,
    has_timer: bool,
    t_first: u64,
    rt_order: i64,
    vruntime: u64,
    /// Execution since the thread last got the CPU (for RR and fair slices).
    slice_used: u64,
    timer_gen: u64,
    /// A SCHED_DEADLINE thread whose runtime ran out: waits for the replenishment timer.
    throttled: bool,
    rng: ThreadRng,
    stats: ThreadStats,
    /// The policy as last set (for `Kernel::policy`).
    policy: Policy,
    /// Wake-up timestamps recorded for the adaptation engine, when tracing is on.
    wake_log: Option<Vec<u64>>,
    /// Last workUnits the thread announced.
    units: u64,
    cooperative: bool,
}

struct Cpu {
    curr: Option<ThreadId>,
    exec_start: u64,
    gen: u64,
    /// Current speed on the 1024 scale: capacity × f_cur / f_max.
    speed: u64,
    /// Time of the live CPU-local event, if one is armed (re-arming at the same time is a no-op,
    /// which keeps stale entries out of the event heap).
    armed: Option<u64>,
    capacity: u64,
    dl: DlRq,
    rt: RtRq,
    fair: FairRq,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    CpuLocal = 0,
    Replenish = 1,
    Inactive = 2,
    Wakeup = 3,
    Controller = 4,
}

/// (time, kind, sequence, id, generation)
type QueuedEvent = Reverse<(u64, Kind, u64, u32, u64)>;

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
    pending_trace: Vec<TraceEvent>,
    /// Root domain of each CPU (threads never move between domains).
    domain: Vec<usize>,
    /// Last thread reported running on each CPU in the trace.
    traced: Vec<Option<ThreadId>>,
    /// Key of each CPU's running thread, kept contiguous because CPU selection, push and pull
    /// scan all CPUs on every wake-up (the kernel keeps cpudl/cpupri for the same reason).
    curr_keys: Vec<Key>,
    freq_cur: u32,
    /// Hosted adaptation controllers (taken out while they run, so they can borrow the sim).
    controllers: Vec<Option<Box<dyn Controller>>>,
    pending_app: Vec<AppEvent>,
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
        let caps = match &cfg.capacities {
            None => vec![CAPACITY_SCALE; m],
            Some(c) if c.len() == m && c.iter().all(|&x| (1..=CAPACITY_SCALE).contains(&x)) => c.clone(),
            Some(c) => {
                return Err(SimError::BadCapacities {
                    cpus: m,
                    got: c.clone(),
                })
            }
        };
        let max_bw = to_ratio(cfg.rt_period_us, cfg.rt_runtime_us);
        let f = &cfg.freqs_khz;
        if f.is_empty() || f.contains(&0) || f.windows(2).any(|w| w[0] >= w[1]) {
            return Err(SimError::BadFrequencies(f.clone()));
        }
        let mut threads = Vec::with_capacity(workload.threads.len());
        for (i, spec) in workload.threads.iter().enumerate() {
            let mut affinity = vec![spec.affinity.is_none(); m];
            if let Some(cpus) = &spec.affinity {
                for &c in cpus {
                    if c >= m {
                        return Err(SimError::AffinityOutOfRange {
                            thread: spec.name.clone(),
                            cpu: c,
                            cpus: m,
                        });
                    }
                    affinity[c] = true;
                }
            }
            let Some(first_cpu) = affinity.iter().position(|&a| a) else {
                return Err(SimError::EmptyAffinity {
                    thread: spec.name.clone(),
                });
            };
            let (class, rt_prio, rr, weight, dl) = match spec.policy {
                Policy::Deadline(r) => {
                    r.validate().map_err(|e| SimError::BadThread {
                        thread: spec.name.clone(),
                        message: e.to_string(),
                    })?;
                    (ClassId::Deadline, 0, false, 0, Some(DlEntity::new(&r)))
                }
                Policy::Fifo { priority } => (ClassId::Rt, priority, false, 0, None),
                Policy::Rr { priority } => (ClassId::Rt, priority, true, 0, None),
                Policy::Other { nice } => (ClassId::Fair, 0, false, weight_of_nice(nice), None),
                // SCHED_IDLE: the fair class with the kernel's WEIGHT_IDLEPRIO.
                Policy::Idle => (ClassId::Fair, 0, false, 3, None),
            };
            if spec
                .phases
                .iter()
                .any(|p| p.policy.is_some() || p.affinity.is_some())
            {
                return Err(SimError::BadThread {
                    thread: spec.name.clone(),
                    message: "phase-level policy or cpus changes are not simulated yet; set them on the task"
                        .into(),
                });
            }
            if spec.phases.iter().all(|p| p.events.is_empty() || p.loops == 0) {
                return Err(SimError::BadThread {
                    thread: spec.name.clone(),
                    message: "no events to run".into(),
                });
            }
            // Shared with the real-kernel executor, so both judge jobs alike.
            let rel_deadline = spec.relative_deadline_ns();
            let period = spec.period_ns();
            threads.push(Thread {
                class,
                rt_prio,
                rr,
                weight,
                dl,
                affinity,
                state: State::NotStarted,
                cpu: first_cpu as u32,
                pc: Cursor::default(),
                remaining: 0,
                wall: false,
                overhead: 0,
                job: None,
                pending_release: None,
                rel_deadline,
                period,
                has_timer: spec.has_timer(),
                t_first: 0,
                rt_order: 0,
                vruntime: 0,
                slice_used: 0,
                timer_gen: 0,
                throttled: false,
                rng: pacer_workload::thread_rng(cfg.seed, i),
                stats: ThreadStats::default(),
                policy: spec.policy,
                wake_log: None,
                units: 0,
                cooperative: spec.cooperative,
            });
        }
        let mut cpus: Vec<Cpu> = caps
            .iter()
            .map(|&c| Cpu {
                curr: None,
                exec_start: 0,
                gen: 0,
                armed: None,
                capacity: c as u64,
                speed: c as u64,
                dl: DlRq::new(max_bw),
                rt: RtRq::default(),
                fair: FairRq::default(),
            })
            .collect();
        // GRUB's extra_bw: the unallocated bandwidth of each root domain, shared by its CPUs.
        // Root domains are the connected components of CPUs linked by some thread's affinity
        // (exclusive cpusets in the kernel).
        let domain = root_domains(m, &threads);
        for d in 0..m {
            let members: Vec<usize> = (0..m).filter(|&c| domain[c] == d).collect();
            if members.is_empty() {
                continue;
            }
            let total: u64 = threads
                .iter()
                .filter(|t| domain[t.cpu as usize] == d)
                .filter_map(|t| t.dl.map(|e| e.dl_bw))
                .sum();
            let share = total / members.len() as u64;
            for &c in &members {
                cpus[c].dl.extra_bw = max_bw.saturating_sub(share);
            }
        }
        for t in &threads {
            if let Some(e) = t.dl {
                cpus[t.cpu as usize].dl.this_bw += e.dl_bw;
            }
        }
        let timers = (0..workload.timer_count())
            .map(|_| SharedTimer::default())
            .collect();
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
            pending_trace: Vec::new(),
            domain,
            traced: vec![None; m],
            curr_keys: vec![Key::Idle; m],
            freq_cur: 0,
            controllers: Vec::new(),
            pending_app: Vec::new(),
        };
        sim.freq_cur = sim.cfg.freqs_khz.last().copied().unwrap_or(1);
        for i in 0..sim.threads.len() {
            let delay = sim.workload.threads[i].start_delay.ns();
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

    /// Thread names in thread-id order.
    pub fn thread_names(&self) -> Vec<String> {
        self.workload.threads.iter().map(|t| t.name.clone()).collect()
    }

    /// Current SCHED_DEADLINE state of a thread: (absolute deadline, remaining runtime), the
    /// quantities the kernel exposes and the adaptation engine reads.
    pub fn dl_state(&self, t: ThreadId) -> Option<(u64, i64)> {
        self.threads.get(t as usize)?.dl.map(|e| (e.deadline, e.runtime))
    }

    /// Per-thread counters so far.
    pub fn stats(&self) -> Vec<ThreadStats> {
        self.threads.iter().map(|t| t.stats).collect()
    }

    fn push_event(&mut self, time: u64, kind: Kind, id: u32, gen: u64) {
        self.seq += 1;
        self.events.push(Reverse((time, kind, self.seq, id, gen)));
    }

    /// Runs every event up to and including time `until`, then accounts running threads up to
    /// `until`. Call repeatedly with increasing times (e.g. to drive a progress bar).
    pub fn run_until(&mut self, until: u64, obs: &mut dyn Observer) {
        self.tracing = obs.wants_events();
        while let Some(&Reverse((time, kind, _, id, gen))) = self.events.peek() {
            if time > until {
                break;
            }
            self.events.pop();
            // Cancelled timers stay in the heap and are skipped here (lazy deletion).
            let live = match kind {
                Kind::CpuLocal => self.cpus[id as usize].gen == gen,
                Kind::Replenish | Kind::Inactive => self.threads[id as usize].timer_gen == gen,
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
                }
                Kind::Replenish => self.replenish_timer(id),
                Kind::Inactive => self.inactive_timer(id),
                Kind::Wakeup => self.wakeup_event(id),
                Kind::Controller => self.run_controller(id as usize),
            }
            self.dispatch_app_events();
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

    // ---- priorities -------------------------------------------------------------------------

    fn key(&self, t: ThreadId) -> Key {
        let th = &self.threads[t as usize];
        match th.class {
            ClassId::Deadline => Key::Deadline(th.dl.map_or(0, |e| e.deadline)),
            ClassId::Rt => Key::Rt(99 - th.rt_prio.min(99)),
            ClassId::Fair => Key::Fair(th.vruntime),
        }
    }

    fn curr_key(&self, cpu: usize) -> Key {
        self.curr_keys[cpu]
    }

    /// Whether `a` should preempt a CPU running something with key `b` (fair never preempts fair
    /// on wake-up: it waits for the slice end).
    fn beats(a: Key, b: Key) -> bool {
        !matches!((a, b), (Key::Fair(_), Key::Fair(_))) && a < b
    }

    fn best_queued(&self, cpu: usize) -> Option<(Key, ThreadId)> {
        let c = &self.cpus[cpu];
        if let Some((d, t)) = c.dl.first() {
            return Some((Key::Deadline(d), t));
        }
        if let Some((p, t)) = c.rt.first() {
            return Some((Key::Rt(99 - p), t));
        }
        c.fair.first().map(|(v, t)| (Key::Fair(v), t))
    }

    // ---- run queues ---------------------------------------------------------------------------

    fn enqueue(&mut self, t: ThreadId, cpu: usize, head: bool) {
        let th = &mut self.threads[t as usize];
        th.cpu = cpu as u32;
        th.state = State::Queued;
        match th.class {
            ClassId::Deadline => {
                let d = th.dl.map_or(0, |e| e.deadline);
                self.cpus[cpu].dl.enqueue(t, d);
            }
            ClassId::Rt => {
                th.rt_order = self.cpus[cpu].rt.enqueue(t, th.rt_prio, head);
            }
            ClassId::Fair => {
                th.vruntime = self.cpus[cpu].fair.place(th.vruntime);
                self.cpus[cpu].fair.enqueue(t, th.vruntime);
            }
        }
    }

    fn dequeue(&mut self, t: ThreadId) {
        let th = &self.threads[t as usize];
        let cpu = th.cpu as usize;
        match th.class {
            ClassId::Deadline => {
                self.cpus[cpu].dl.dequeue(t, th.dl.map_or(0, |e| e.deadline));
            }
            ClassId::Rt => {
                self.cpus[cpu].rt.dequeue(t, th.rt_prio, th.rt_order);
            }
            ClassId::Fair => {
                self.cpus[cpu].fair.dequeue(t, th.vruntime);
            }
        }
    }

    /// Moves a queued thread's run-queue membership (and its GRUB bandwidth) to `to`.
    fn migrate_queued(&mut self, t: ThreadId, to: usize) {
        let from = self.threads[t as usize].cpu as usize;
        self.dequeue(t);
        self.move_bw(t, from, to);
        self.enqueue(t, to, false);
        self.trace(TraceEvent::Migrate {
            t: self.now,
            thread: t,
            from: from as u32,
            to: to as u32,
        });
    }

    fn move_bw(&mut self, t: ThreadId, from: usize, to: usize) {
        if from == to {
            return;
        }
        if let Some(e) = self.threads[t as usize].dl {
            self.update_curr(from);
            self.update_curr(to);
            self.cpus[from].dl.this_bw -= e.dl_bw;
            self.cpus[to].dl.this_bw += e.dl_bw;
            if e.active {
                self.cpus[from].dl.running_bw -= e.dl_bw;
                self.cpus[to].dl.running_bw += e.dl_bw;
            }
            self.reprogram(from);
            self.reprogram(to);
        }
        self.threads[t as usize].cpu = to as u32;
    }
}

fn root_domains(m: usize, threads: &[Thread]) -> Vec<usize> {
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
    for t in threads {
        let mut first = None;
        for (c, &a) in t.affinity.iter().enumerate() {
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
    (0..m).map(|c| find(&mut parent, c)).collect()
}

/// What a thread's program does next.
enum Step {
    /// Execute `remaining` (set on the thread).
    Run,
    /// Block until the time; `Some(release)` if a new job is released at wake-up.
    Block(u64, Option<u64>),
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

    fn allowed(&self, t: ThreadId, cpu: usize) -> bool {
        self.threads[t as usize].affinity[cpu]
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
        let scale_invariant = self.cfg.scale_invariant_runtime;
        let th = &mut self.threads[t as usize];
        th.stats.exec += delta;
        if let Some(j) = &mut th.job {
            j.exec += delta;
        }
        th.slice_used += delta;
        let ov = th.overhead.min(delta);
        th.overhead -= ov;
        let d = delta - ov;
        let progress = if th.wall {
            d
        } else {
            ((d as u128 * c.speed as u128) / CAPACITY_SCALE as u128) as u64
        };
        th.remaining = th.remaining.saturating_sub(progress);
        match th.class {
            ClassId::Deadline => {
                if let Some(e) = th.dl.as_mut() {
                    // Scale-invariant accounting (update_curr_dl_se): runtime is charged at
                    // f/f_max · capacity/1024, except under GRUB reclaiming.
                    let charge = if e.reclaim {
                        c.dl.grub_charge(delta, e.dl_bw)
                    } else if scale_invariant {
                        ((delta as u128 * c.speed as u128) / CAPACITY_SCALE as u128) as u64
                    } else {
                        delta
                    };
                    e.runtime = e.runtime.saturating_sub(charge.min(i64::MAX as u64) as i64);
                }
            }
            ClassId::Fair => {
                th.vruntime += ((delta as u128 * 1024) / th.weight as u128) as u64;
                // min_vruntime only moves forward: the smaller of the running and the first queued.
                let lowest = c.fair.first().map_or(th.vruntime, |(v, _)| v.min(th.vruntime));
                c.fair.min_vruntime = c.fair.min_vruntime.max(lowest);
            }
            ClassId::Rt => {}
        }
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
        let th = &self.threads[t as usize];
        let work = if th.wall {
            th.remaining
        } else {
            ((th.remaining as u128 * CAPACITY_SCALE as u128).div_ceil(c.speed.max(1) as u128))
                .min(u64::MAX as u128) as u64
        };
        let mut dt = th.overhead.saturating_add(work);
        if let Some(e) = th.dl {
            let rate = if e.reclaim {
                c.dl.grub_rate(e.dl_bw)
            } else if self.cfg.scale_invariant_runtime {
                (c.speed << pacer_model::reservation::BW_SHIFT) / CAPACITY_SCALE as u64
            } else {
                1 << pacer_model::reservation::BW_SHIFT
            };
            dt = dt.min(time_to_exhaust(e.runtime, rate));
        }
        match th.class {
            ClassId::Rt if th.rr && c.rt.has_prio(th.rt_prio) => {
                dt = dt.min(self.cfg.rr_timeslice.saturating_sub(th.slice_used));
            }
            ClassId::Fair if c.fair.len() > 0 => dt = dt.min(FAIR_SLICE_NS.saturating_sub(th.slice_used)),
            _ => {}
        }
        let at = self.now.saturating_add(dt);
        let c = &mut self.cpus[cpu];
        if c.armed == Some(at) {
            return;
        }
        c.gen += 1;
        c.armed = Some(at);
        let gen = c.gen;
        self.push_event(at, Kind::CpuLocal, cpu as u32, gen);
    }

    // ---- switching ----------------------------------------------------------------------------

    /// Takes the running thread off `cpu`; a preempted thread goes back on the queue (rt: at the
    /// head of its priority list, as the kernel keeps a preempted FIFO task first).
    fn deschedule(&mut self, cpu: usize, preempted: bool) -> Option<ThreadId> {
        self.update_curr(cpu);
        let t = self.cpus[cpu].curr.take()?;
        self.curr_keys[cpu] = Key::Idle;
        let th = &mut self.threads[t as usize];
        if preempted {
            th.stats.involuntary_switches += 1;
            if let Some(j) = &mut th.job {
                j.preemptions += 1;
            }
            let head = th.class == ClassId::Rt;
            self.enqueue(t, cpu, head);
        }
        Some(t)
    }

    fn switch_in(&mut self, cpu: usize, t: ThreadId) {
        self.dequeue(t);
        let now = self.now;
        let (cs, mig) = (self.cfg.context_switch_cost, self.cfg.migration_cost);
        let th = &mut self.threads[t as usize];
        th.state = State::Running;
        th.cpu = cpu as u32;
        th.stats.switches += 1;
        th.overhead += cs;
        if th.class == ClassId::Fair {
            th.slice_used = 0;
        }
        let cooperative_begin = th.cooperative && th.job.is_some_and(|j| j.start.is_none());
        if let Some(j) = &mut th.job {
            if j.start.is_none() {
                j.start = Some(now);
            }
            if j.last_cpu.is_some_and(|c| c as usize != cpu) {
                j.migrations += 1;
                th.stats.migrations += 1;
                th.overhead += mig;
            }
            j.last_cpu = Some(cpu as u32);
        }
        let c = &mut self.cpus[cpu];
        c.curr = Some(t);
        c.exec_start = now;
        // A running thread's key does not change while it runs, except the fair vruntime, which
        // only matters against other classes (fair never preempts fair on wake-up).
        self.curr_keys[cpu] = self.key(t);
        if cooperative_begin {
            let th = &self.threads[t as usize];
            let dl = th.dl.map(|e| DlState {
                deadline: e.deadline,
                runtime: e.runtime,
            });
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
        if let Some((k, t)) = self.best_queued(cpu) {
            if curr.is_none() || Self::beats(k, ck) {
                let preempted = curr.and_then(|_| self.deschedule(cpu, true));
                self.switch_in(cpu, t);
                if let Some(p) = preempted {
                    self.push(p);
                }
            }
        }
        self.note_switch(cpu);
        self.reprogram(cpu);
    }

    fn note_switch(&mut self, cpu: usize) {
        if !self.tracing {
            return;
        }
        // Trace only real changes of the running thread on this CPU.
        let next = self.cpus[cpu].curr;
        let last = self.traced[cpu];
        if last != next {
            self.traced[cpu] = next;
            self.trace(TraceEvent::Switch {
                t: self.now,
                cpu: cpu as u32,
                prev: last,
                next,
            });
        }
    }

    /// Moves a thread that was just preempted to a CPU where it can run now, if there is one
    /// (`push_dl_task()` / `push_rt_task()`).
    fn push(&mut self, t: ThreadId) {
        if self.threads[t as usize].state != State::Queued {
            return;
        }
        let from = self.threads[t as usize].cpu as usize;
        let k = self.key(t);
        let mut best: Option<(Key, usize)> = None;
        for c in 0..self.cpus.len() {
            if c == from || !self.allowed(t, c) {
                continue;
            }
            let ck = self.curr_key(c);
            if Self::beats(k, ck) && best.is_none_or(|(bk, _)| ck > bk) {
                best = Some((ck, c));
            }
        }
        if let Some((_, target)) = best {
            self.migrate_queued(t, target);
            self.resched(target);
        }
    }

    /// Pulls the most urgent thread queued elsewhere that may run on `cpu` and beats what `cpu`
    /// has queued (`pull_dl_task()` / `pull_rt_task()`, idle balance for fair).
    fn pull(&mut self, cpu: usize) {
        let local = self.best_queued(cpu).map_or(Key::Idle, |x| x.0);
        let mut cand: Option<(Key, ThreadId)> = None;
        for other in 0..self.cpus.len() {
            if other == cpu || self.domain[other] != self.domain[cpu] {
                continue;
            }
            if let Some((k, t)) = self.first_allowed(other, cpu) {
                if Self::beats(k, local) && cand.is_none_or(|(ck, _)| k < ck) {
                    cand = Some((k, t));
                }
            }
        }
        if let Some((_, t)) = cand {
            self.migrate_queued(t, cpu);
        }
    }

    /// The most urgent thread queued on `other` that may run on `cpu`.
    fn first_allowed(&self, other: usize, cpu: usize) -> Option<(Key, ThreadId)> {
        let c = &self.cpus[other];
        if let Some(&(d, t)) = c.dl.iter().find(|&&(_, t)| self.allowed(t, cpu)) {
            return Some((Key::Deadline(d), t));
        }
        if let Some((p, t)) = c.rt.iter().find(|&(_, t)| self.allowed(t, cpu)) {
            return Some((Key::Rt(99 - p), t));
        }
        c.fair
            .iter()
            .find(|&&(_, t)| self.allowed(t, cpu))
            .map(|&(v, t)| (Key::Fair(v), t))
    }

    /// `select_task_rq()`: where a waking thread should go.
    fn select_cpu(&self, t: ThreadId) -> usize {
        let th = &self.threads[t as usize];
        let prev = th.cpu as usize;
        let order = std::iter::once(prev).chain((0..self.cpus.len()).filter(move |&c| c != prev));
        let first_allowed = || order.clone().find(|&c| self.allowed(t, c)).unwrap_or(prev);
        if th.class == ClassId::Fair {
            return order
                .clone()
                .find(|&c| self.allowed(t, c) && self.cpus[c].curr.is_none())
                .unwrap_or_else(first_allowed);
        }
        let k = self.key(t);
        let mut best: Option<(Key, usize)> = None;
        for c in order.clone() {
            if !self.allowed(t, c) {
                continue;
            }
            let ck = self.curr_key(c);
            if Self::beats(k, ck) && best.is_none_or(|(bk, _)| ck > bk) {
                best = Some((ck, c));
            }
        }
        best.map_or_else(first_allowed, |(_, c)| c)
    }

    // ---- thread life cycle --------------------------------------------------------------------

    fn start_job(&mut self, t: ThreadId, release: u64) {
        let now = self.now;
        let th = &mut self.threads[t as usize];
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
                dl: th.dl.map(|e| DlState {
                    deadline: e.deadline,
                    runtime: e.runtime,
                }),
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
            let dl = th.dl.map(|e| DlState {
                deadline: e.deadline,
                runtime: e.runtime,
            });
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
        let mut idle_steps = 0u32;
        loop {
            idle_steps += 1;
            if idle_steps > MAX_IDLE_STEPS {
                self.finish_job(t);
                return Step::Exit;
            }
            let spec = &self.workload.threads[t as usize];
            let th = &mut self.threads[t as usize];
            let ev = match th.pc.advance(spec) {
                Walk::Done => {
                    self.finish_job(t);
                    return Step::Exit;
                }
                // Phase-level CPUs and policies are refused when the simulation is built.
                Walk::PassStart(_) => {
                    idle_steps -= 1;
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
                Event::Run { work } => {
                    let w = work.sample_for(&mut th.rng, th.units).ns();
                    if w > 0 {
                        th.remaining = w;
                        th.wall = false;
                        return Step::Run;
                    }
                }
                Event::Runtime { duration } => {
                    if !duration.is_zero() {
                        th.remaining = duration.ns();
                        th.wall = true;
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
                        return Step::Block(next, Some(next));
                    }
                    // Late: the next job was released in the past and starts at once.
                    self.start_job(t, next);
                }
                Event::Yield => return Step::Yield,
                Event::WorkUnits { units } => {
                    th.units = *units;
                    self.pending_app.push(AppEvent::WorkUnits {
                        thread: t,
                        t: now,
                        units: *units,
                    });
                }
            }
        }
    }

    fn wakeup_event(&mut self, t: ThreadId) {
        let now = self.now;
        let th = &mut self.threads[t as usize];
        if matches!(th.state, State::NotStarted | State::Sleeping) {
            if let Some(log) = th.wake_log.as_mut() {
                log.push(now);
            }
        }
        match th.state {
            State::NotStarted => {
                th.t_first = self.now;
                self.start_job(t, self.now);
            }
            State::Sleeping => {
                if let Some(r) = th.pending_release.take() {
                    self.start_job(t, r);
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
            Step::Run | Step::Yield => self.wake(t),
            Step::Block(until, release) => self.sleep(t, until, release),
            Step::Exit => self.exit(t),
        }
    }

    /// Makes a thread runnable: CBS wake-up rule, CPU selection, enqueue, preemption check.
    fn wake(&mut self, t: ThreadId) {
        let now = self.now;
        let cpu = self.threads[t as usize].cpu as usize;
        if let Some(e) = self.threads[t as usize].dl {
            self.threads[t as usize].timer_gen += 1; // cancels a pending inactive timer
            if !e.active {
                self.update_curr(cpu);
                self.cpus[cpu].dl.running_bw += e.dl_bw;
                if let Some(e) = self.threads[t as usize].dl.as_mut() {
                    e.active = true;
                }
                self.reprogram(cpu);
            }
            if self.threads[t as usize].throttled {
                // Waits for the replenishment timer, which will enqueue it.
                self.threads[t as usize].state = State::Throttled;
                self.arm_replenish(t);
                return;
            }
            if let Some(e) = self.threads[t as usize].dl.as_mut() {
                e.on_wakeup(now);
            }
        }
        let target = self.select_cpu(t);
        self.move_bw(t, cpu, target);
        self.enqueue(t, target, false);
        self.resched(target);
    }

    fn sleep(&mut self, t: ThreadId, until: u64, release: Option<u64>) {
        let now = self.now;
        let th = &mut self.threads[t as usize];
        th.state = State::Sleeping;
        th.pending_release = release;
        self.push_event(until, Kind::Wakeup, t, 0);
        let th = &mut self.threads[t as usize];
        if let Some(e) = th.dl {
            if e.runtime <= 0 {
                // Blocked with its runtime used up: throttled until the next period.
                th.throttled = true;
                self.arm_replenish(t);
            } else if e.active {
                let cpu = th.cpu as usize;
                let zl = e.zero_lag();
                if zl <= now {
                    self.release_bw(t, cpu);
                } else {
                    th.timer_gen += 1;
                    let gen = th.timer_gen;
                    self.push_event(zl, Kind::Inactive, t, gen);
                }
            }
        }
    }

    fn release_bw(&mut self, t: ThreadId, cpu: usize) {
        if let Some(e) = self.threads[t as usize].dl {
            if e.active {
                self.update_curr(cpu);
                self.cpus[cpu].dl.running_bw -= e.dl_bw;
                if let Some(e) = self.threads[t as usize].dl.as_mut() {
                    e.active = false;
                }
                self.reprogram(cpu);
            }
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
        let cpu = self.threads[t as usize].cpu as usize;
        self.release_bw(t, cpu);
        if let Some(e) = self.threads[t as usize].dl {
            self.cpus[cpu].dl.this_bw -= e.dl_bw;
        }
        self.threads[t as usize].timer_gen += 1;
        self.threads[t as usize].state = State::Exited;
    }

    fn arm_replenish(&mut self, t: ThreadId) {
        let Some(e) = self.threads[t as usize].dl else {
            return;
        };
        let at = e.next_period_start().max(self.now);
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
        self.deschedule(cpu, false);
        let th = &mut self.threads[t as usize];
        th.stats.involuntary_switches += 1;
        if let Some(j) = &mut th.job {
            j.preemptions += 1;
        }
        if th.remaining > 0 || th.overhead > 0 {
            th.stats.overruns += 1;
        }
        th.state = State::Throttled;
        th.throttled = true;
        self.arm_replenish(t);
    }

    fn replenish_timer(&mut self, t: ThreadId) {
        let now = self.now;
        let th = &mut self.threads[t as usize];
        if !th.throttled {
            return;
        }
        th.throttled = false;
        if let Some(e) = th.dl.as_mut() {
            e.replenish(now);
        }
        self.trace(TraceEvent::Replenish { t: now, thread: t });
        if self.threads[t as usize].state == State::Throttled {
            let cpu = self.threads[t as usize].cpu as usize;
            let target = self.select_cpu(t);
            self.move_bw(t, cpu, target);
            self.enqueue(t, target, false);
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
        let (done, is_dl) = {
            let th = &self.threads[t as usize];
            (th.overhead == 0 && th.remaining == 0, th.dl.is_some())
        };
        if done {
            match self.step(t) {
                Step::Run => {}
                Step::Block(until, release) => {
                    self.deschedule(cpu, false);
                    self.sleep(t, until, release);
                    self.resched(cpu);
                    return;
                }
                Step::Exit => {
                    self.deschedule(cpu, false);
                    self.exit(t);
                    self.resched(cpu);
                    return;
                }
                Step::Yield => {
                    self.yield_running(cpu, t);
                    return;
                }
            }
        }
        if is_dl && self.threads[t as usize].dl.is_some_and(|e| e.runtime <= 0) {
            self.throttle(cpu, t);
            self.resched(cpu);
            return;
        }
        let th = &self.threads[t as usize];
        let slice_over = match th.class {
            ClassId::Rt => th.rr && th.slice_used >= self.cfg.rr_timeslice,
            ClassId::Fair => th.slice_used >= FAIR_SLICE_NS && self.cpus[cpu].fair.len() > 0,
            ClassId::Deadline => false,
        };
        if slice_over {
            // Round-robin / fair rotation: back to the tail of the queue.
            self.threads[t as usize].slice_used = 0;
            self.deschedule(cpu, false);
            let th = &mut self.threads[t as usize];
            th.stats.involuntary_switches += 1;
            if let Some(j) = &mut th.job {
                j.preemptions += 1;
            }
            self.enqueue(t, cpu, false);
        }
        self.resched(cpu);
    }

    fn yield_running(&mut self, cpu: usize, t: ThreadId) {
        if self.threads[t as usize].dl.is_some() {
            // sched_yield() on SCHED_DEADLINE gives up the rest of the runtime.
            if let Some(e) = self.threads[t as usize].dl.as_mut() {
                e.runtime = 0;
            }
            self.throttle(cpu, t);
        } else {
            self.deschedule(cpu, false);
            self.threads[t as usize].slice_used = 0;
            self.enqueue(t, cpu, false);
        }
        self.resched(cpu);
    }
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

    /// Cumulative CPU time of a thread, including the slice it is running now.
    pub fn cpu_time(&self, t: ThreadId) -> Option<u64> {
        let th = self.threads.get(t as usize)?;
        let running = match th.state {
            State::Running => {
                let c = &self.cpus[th.cpu as usize];
                if c.curr == Some(t) {
                    self.now - c.exec_start
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

    pub(crate) fn drain_wake_log(&mut self, t: ThreadId, out: &mut Vec<u64>) -> bool {
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

    /// Bandwidth available to SCHED_DEADLINE on the whole platform, fixed point (BW_SHIFT):
    /// cap_scale(u_max, Σ capacity), as `__dl_overflow()` sees it, less the fair servers.
    pub(crate) fn dl_limit_fixed(&self) -> u64 {
        use pacer_model::reservation::{dl_total_limit, fair_servers_bw};
        let cap: u64 = self.cpus.iter().map(|c| c.capacity).sum();
        let total =
            dl_total_limit(cap, Some(self.cfg.rt_runtime_us), self.cfg.rt_period_us).unwrap_or(u64::MAX);
        total.saturating_sub(fair_servers_bw(self.cpus.len(), self.cfg.fair_server))
    }

    /// SCHED_DEADLINE bandwidth available on the platform, in CPUs (what admission enforces).
    pub fn kernel_limit(&self) -> f64 {
        self.dl_limit_fixed() as f64 / (1u64 << pacer_model::reservation::BW_SHIFT) as f64
    }

    /// Current frequency and the available ones, kHz.
    pub fn frequency(&self) -> (u32, &[u32]) {
        (self.freq_cur, &self.cfg.freqs_khz)
    }

    /// Switches the platform's frequency (one domain); work and runtime accounting follow at once.
    pub fn set_frequency(&mut self, khz: u32) -> Result<(), String> {
        if !self.cfg.freqs_khz.contains(&khz) {
            return Err(format!(
                "{khz} kHz is not one of the available frequencies {:?}",
                self.cfg.freqs_khz
            ));
        }
        for c in 0..self.cpus.len() {
            self.update_curr(c);
        }
        self.freq_cur = khz;
        let max = *self.cfg.freqs_khz.last().unwrap_or(&khz) as u64;
        for c in &mut self.cpus {
            c.speed = (c.capacity * khz as u64 / max).max(1);
        }
        for c in 0..self.cpus.len() {
            self.cpus[c].armed = None;
            self.reprogram(c);
        }
        Ok(())
    }

    /// `sched_setattr()`: changes a thread's policy at run time. SCHED_DEADLINE requests go
    /// through admission control (Σ bandwidth ≤ the platform's limit) and fail with
    /// `Err(true)` when refused (EBUSY), `Err(false)` for invalid parameters (EINVAL).
    pub(crate) fn set_policy(&mut self, t: ThreadId, policy: Policy) -> Result<(), (bool, String)> {
        let ti = t as usize;
        if ti >= self.threads.len() {
            return Err((false, format!("no thread {t}")));
        }
        let new_bw = match policy {
            Policy::Deadline(r) => {
                r.validate().map_err(|e| (false, e.to_string()))?;
                Some(r.bw_fixed())
            }
            Policy::Fifo { priority } | Policy::Rr { priority } if !(1..=99).contains(&priority) => {
                return Err((false, format!("rt priority {priority} outside 1..=99")));
            }
            _ => None,
        };
        if let Some(bw) = new_bw {
            let others: u64 = self
                .threads
                .iter()
                .enumerate()
                .filter(|(i, th)| *i != ti && th.state != State::Exited)
                .filter_map(|(_, th)| th.dl.map(|e| e.dl_bw))
                .sum();
            if others + bw > self.dl_limit_fixed() {
                return Err((
                    true,
                    "SCHED_DEADLINE bandwidth would exceed the admission limit".into(),
                ));
            }
        }
        let now = self.now;
        let state = self.threads[ti].state;
        let cpu = self.threads[ti].cpu as usize;
        let runnable = matches!(state, State::Running | State::Queued | State::Throttled);
        match state {
            State::Running => {
                self.deschedule(cpu, false);
            }
            State::Queued => self.dequeue(t),
            _ => {}
        }
        // Take the old reservation's bandwidth out of the run queue's sums.
        if let Some(old) = self.threads[ti].dl {
            self.update_curr(cpu);
            self.cpus[cpu].dl.this_bw -= old.dl_bw;
            if old.active {
                self.cpus[cpu].dl.running_bw -= old.dl_bw;
            }
            self.adjust_extra(cpu, old.dl_bw as i64);
        }
        let old = self.threads[ti].dl;
        let th = &mut self.threads[ti];
        th.timer_gen += 1; // cancels replenishment and inactive timers of the old entity
        th.throttled = false;
        th.policy = policy;
        match policy {
            Policy::Deadline(r) => {
                let mut e = DlEntity::new(&r);
                e.started = true;
                match old {
                    // As `enqueue_dl_entity(ENQUEUE_RESTORE)`: a parameter change keeps the
                    // current (deadline, runtime) unless the deadline has passed; the new budget
                    // applies from the next replenishment or wake-up.
                    Some(o) if o.started && o.deadline >= now => {
                        e.deadline = o.deadline;
                        e.runtime = o.runtime;
                    }
                    _ => {
                        e.deadline = now + e.dl_deadline;
                        e.runtime = e.dl_runtime as i64;
                    }
                }
                e.active = runnable || old.is_some_and(|o| o.active);
                th.class = ClassId::Deadline;
                th.dl = Some(e);
            }
            Policy::Fifo { priority } => {
                (th.class, th.rt_prio, th.rr, th.dl) = (ClassId::Rt, priority, false, None);
            }
            Policy::Rr { priority } => {
                (th.class, th.rt_prio, th.rr, th.dl) = (ClassId::Rt, priority, true, None);
            }
            Policy::Other { nice } => {
                (th.class, th.weight, th.dl) = (ClassId::Fair, weight_of_nice(nice), None);
            }
            Policy::Idle => {
                (th.class, th.weight, th.dl) = (ClassId::Fair, 3, None);
            }
        }
        if let Some(e) = self.threads[ti].dl {
            self.cpus[cpu].dl.this_bw += e.dl_bw;
            if e.active {
                self.cpus[cpu].dl.running_bw += e.dl_bw;
            }
            self.adjust_extra(cpu, -(e.dl_bw as i64));
        }
        if runnable {
            let target = self.select_cpu(t);
            self.move_bw(t, cpu, target);
            self.enqueue(t, target, false);
            if target != cpu {
                self.resched(cpu);
            }
            self.resched(target);
        } else if state == State::Running {
            self.resched(cpu);
        }
        Ok(())
    }

    /// Moves every CPU of `cpu`'s root domain's extra (unallocated) bandwidth by `delta` / |domain|.
    fn adjust_extra(&mut self, cpu: usize, delta: i64) {
        let d = self.domain[cpu];
        let members: Vec<usize> = (0..self.cpus.len()).filter(|&c| self.domain[c] == d).collect();
        let share = delta / members.len().max(1) as i64;
        for c in members {
            self.update_curr(c);
            let x = &mut self.cpus[c].dl;
            x.extra_bw = (x.extra_bw as i64 + share).clamp(0, x.max_bw as i64) as u64;
            self.reprogram(c);
        }
    }
}
