//! The deadline class: SCHED_DEADLINE's CBS as `kernel/sched/deadline.c` implements it.
//!
//! - Wake-up rule (`update_dl_entity()`): a waking entity keeps its (deadline, runtime) unless
//!   the deadline has passed or `runtime / (deadline − now) > dl_runtime / dl_deadline`
//!   (`dl_entity_overflow()`, computed with the kernel's >> DL_SCALE truncation); then it gets a
//!   new period (deadline = now + dl_deadline, runtime = dl_runtime) — except for constrained
//!   entities (dl_deadline < dl_period) whose deadline is still ahead, which keep the deadline
//!   with runtime = dl_density · (deadline − now) (the "revised wake-up rule", Documentation/
//!   scheduler/sched-deadline.rst §3 and the Abeni & Lelli constrained-deadline fix).
//! - Accounting (`update_curr_dl()`): runtime −= δ, or with SCHED_FLAG_RECLAIM the GRUB rule
//!   `grub_reclaim()`: runtime −= δ · max(u, u_max − u_inact − u_extra) / u_max (Abeni et al.,
//!   "Greedy CPU reclaiming for SCHED_DEADLINE", RTLWS 2014; the SMP form merged in Linux 6.5).
//! - Throttling: at runtime ≤ 0 the entity is throttled until `dl_next_period()` = deadline −
//!   dl_deadline + dl_period, then `replenish_dl_entity()` adds periods until runtime > 0 (and
//!   starts afresh if the deadline still lags behind now). Reservations are always hard.
//! - Active/inactive utilisation for GRUB: a blocking entity stays in running_bw until its 0-lag
//!   time deadline − runtime·dl_period/dl_runtime (the "inactive timer").

use pacer_model::reservation::{to_ratio, BW_SHIFT};
use pacer_model::{Reservation, CAPACITY_SCALE};

use super::{Block, SortedQueue};
use crate::record::ThreadId;

/// `DL_SCALE`: the shift the kernel applies before multiplying times in overflow checks.
const DL_SCALE: u32 = 10;
/// `RATIO_SHIFT` of `bw_ratio`.
const RATIO_SHIFT: u32 = 8;

/// A thread's deadline scheduling entity (`struct sched_dl_entity`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DlEntity {
    pub dl_runtime: u64,
    pub dl_deadline: u64,
    pub dl_period: u64,
    /// `to_ratio(dl_period, dl_runtime)`.
    pub dl_bw: u64,
    /// `to_ratio(dl_deadline, dl_runtime)`.
    pub dl_density: u64,
    pub reclaim: bool,
    /// Remaining runtime (may go negative on overrun, as in the kernel).
    pub runtime: i64,
    /// Absolute scheduling deadline.
    pub deadline: u64,
    /// Set once the first enqueue initialised (deadline, runtime): `setup_new_dl_entity()`.
    pub started: bool,
    /// Counted in the rq's running_bw (active contending or active non-contending).
    pub active: bool,
}

impl DlEntity {
    pub fn new(r: &Reservation) -> Self {
        let period = r.effective_period().ns();
        DlEntity {
            dl_runtime: r.runtime.ns(),
            dl_deadline: r.deadline.ns(),
            dl_period: period,
            dl_bw: to_ratio(period, r.runtime.ns()),
            dl_density: to_ratio(r.deadline.ns(), r.runtime.ns()),
            reclaim: r.flags.reclaim,
            runtime: 0,
            deadline: 0,
            started: false,
            active: false,
        }
    }

    fn implicit(&self) -> bool {
        self.dl_deadline == self.dl_period
    }

    /// `replenish_dl_new_period()`.
    fn new_period(&mut self, now: u64) {
        self.deadline = now + self.dl_deadline;
        self.runtime = self.dl_runtime as i64;
    }

    /// `dl_entity_overflow()`: would keeping (deadline, runtime) exceed the reserved bandwidth?
    fn overflow(&self, now: u64) -> bool {
        let left =
            (self.dl_deadline >> DL_SCALE) as u128 * ((self.runtime.max(0) as u64) >> DL_SCALE) as u128;
        let right = ((self.deadline - now) >> DL_SCALE) as u128 * (self.dl_runtime >> DL_SCALE) as u128;
        right < left
    }

    /// The CBS wake-up rule (`update_dl_entity()`), or `setup_new_dl_entity()` the first time.
    pub fn on_wakeup(&mut self, now: u64) {
        if !self.started {
            self.started = true;
            self.new_period(now);
            return;
        }
        if self.deadline < now || self.overflow(now) {
            if !self.implicit() && self.deadline >= now {
                // Revised wake-up rule: keep the deadline, scale the runtime to the density.
                let laxity = self.deadline - now;
                self.runtime = ((self.dl_density as u128 * laxity as u128) >> BW_SHIFT) as i64;
                return;
            }
            self.new_period(now);
        }
    }

    /// When the replenishment timer fires: `dl_next_period()`.
    pub fn next_period_start(&self) -> u64 {
        (self.deadline + self.dl_period).saturating_sub(self.dl_deadline)
    }

    /// `replenish_dl_entity()`.
    pub fn replenish(&mut self, now: u64) {
        while self.runtime <= 0 {
            self.deadline += self.dl_period;
            self.runtime += self.dl_runtime as i64;
        }
        if self.deadline < now {
            self.new_period(now);
        }
    }

    /// The thread blocks at `now` (`dequeue_dl_entity(DEQUEUE_SLEEP)`): with its runtime used up
    /// it stays throttled until the next period; otherwise it keeps its bandwidth active until its
    /// 0-lag time (`task_non_contending()`).
    pub fn block(&self, now: u64) -> Block {
        if self.runtime <= 0 {
            Block::Throttle
        } else if !self.active {
            Block::Nothing
        } else {
            let zl = self.zero_lag();
            if zl <= now {
                Block::ReleaseNow
            } else {
                Block::ReleaseAt(zl)
            }
        }
    }

    /// `sched_setattr()` made the thread SCHED_DEADLINE (or changed its parameters) at `now`,
    /// `old` being its previous deadline entity. As `enqueue_dl_entity(ENQUEUE_RESTORE)`: a
    /// parameter change keeps the current (deadline, runtime) unless the deadline has passed; the
    /// new budget applies from the next replenishment or wake-up.
    pub fn switched_to(&mut self, old: Option<DlEntity>, now: u64, runnable: bool) {
        self.started = true;
        match old {
            Some(o) if o.started && o.deadline >= now => {
                self.deadline = o.deadline;
                self.runtime = o.runtime;
            }
            _ => self.new_period(now),
        }
        self.active = runnable || old.is_some_and(|o| o.active);
    }

    /// 0-lag time: when a blocked entity's bandwidth may be released (`task_non_contending()`).
    pub fn zero_lag(&self) -> u64 {
        let used =
            (self.runtime.max(0) as u128 * self.dl_period as u128 / self.dl_runtime.max(1) as u128) as u64;
        self.deadline.saturating_sub(used)
    }
}

/// Per-CPU deadline run queue (`struct dl_rq`): queued (not running) entities by deadline, and
/// the bandwidth sums GRUB needs.
#[derive(Debug, Default)]
pub(crate) struct DlRq {
    /// Queued entities by (deadline, thread).
    queue: SortedQueue<(u64, ThreadId)>,
    /// Σ dl_bw of active entities assigned to this CPU.
    pub running_bw: u64,
    /// Σ dl_bw of all entities assigned to this CPU.
    pub this_bw: u64,
    /// Per-CPU share of the bandwidth not allocated to any entity.
    pub extra_bw: u64,
    /// `to_ratio(rt_period, rt_runtime)`.
    pub max_bw: u64,
    /// (1 << RATIO_SHIFT) / u_max, in RATIO_SHIFT fixed point.
    pub bw_ratio: u64,
}

impl DlRq {
    pub fn new(max_bw: u64) -> Self {
        DlRq {
            queue: SortedQueue::default(),
            running_bw: 0,
            this_bw: 0,
            extra_bw: max_bw,
            max_bw,
            bw_ratio: ((1u64 << (BW_SHIFT + RATIO_SHIFT)) / max_bw.max(1)),
        }
    }
    pub fn enqueue(&mut self, t: ThreadId, deadline: u64) {
        self.queue.insert((deadline, t));
    }
    pub fn dequeue(&mut self, t: ThreadId, deadline: u64) -> bool {
        self.queue.remove(&(deadline, t))
    }
    pub fn first(&self) -> Option<(u64, ThreadId)> {
        self.queue.first().copied()
    }
    /// Earliest deadline first.
    pub fn iter(&self) -> impl Iterator<Item = &(u64, ThreadId)> {
        self.queue.iter()
    }
    /// `update_curr_dl()`: charges `delta` ns of execution at `speed` (1024 scale). Scale-invariant
    /// accounting (`update_curr_dl_se()`) charges δ · f/f_max · capacity/1024, except under GRUB
    /// reclaiming; `scale_invariant = false` charges wall-clock execution.
    pub fn update_curr(&self, e: &mut DlEntity, delta: u64, speed: u64, scale_invariant: bool) {
        let charge = if e.reclaim {
            self.grub_charge(delta, e.dl_bw)
        } else if scale_invariant {
            ((delta as u128 * speed as u128) / CAPACITY_SCALE as u128) as u64
        } else {
            delta
        };
        e.runtime = e.runtime.saturating_sub(charge.min(i64::MAX as u64) as i64);
    }

    /// Execution time after which `e` has used up its runtime at `speed`.
    pub fn time_to_exhaust(&self, e: &DlEntity, speed: u64, scale_invariant: bool) -> u64 {
        let rate = if e.reclaim {
            self.grub_rate(e.dl_bw)
        } else if scale_invariant {
            (speed << BW_SHIFT) / CAPACITY_SCALE as u64
        } else {
            1 << BW_SHIFT
        };
        time_to_exhaust(e.runtime, rate)
    }

    /// Moves this CPU's share of its root domain's unallocated bandwidth by `delta`.
    pub fn add_extra(&mut self, delta: i64) {
        self.extra_bw = (self.extra_bw as i64 + delta).clamp(0, self.max_bw as i64) as u64;
    }

    /// The runtime a reclaiming entity is charged for `delta` ns of execution (`grub_reclaim()`).
    pub fn grub_charge(&self, delta: u64, dl_bw: u64) -> u64 {
        let u_act = self.grub_rate(dl_bw);
        ((delta as u128 * u_act as u128) >> BW_SHIFT) as u64
    }

    /// dq/dt in BW_SHIFT fixed point for a reclaiming entity of bandwidth `dl_bw`.
    pub fn grub_rate(&self, dl_bw: u64) -> u64 {
        let u_inact = self.this_bw.saturating_sub(self.running_bw);
        let u_act = if u_inact + self.extra_bw > self.max_bw.saturating_sub(dl_bw) {
            dl_bw
        } else {
            self.max_bw - u_inact - self.extra_bw
        };
        (u_act * self.bw_ratio) >> RATIO_SHIFT
    }
}

/// The fair server (`rq->fair_server`, Linux ≥ 6.12, deadline.c `dl_server_*`): a per-CPU
/// SCHED_DEADLINE entity of runtime Q per period P (50 ms / 1 s) that runs the fair class when
/// higher classes starve it. It is deferred (`dl_defer`): fair execution outside it consumes its
/// runtime in the background, and only when that has not used Q by the zero-laxity time
/// deadline − runtime does it become an ordinary EDF entity that outranks every rt task, for Q.
/// While starvation lasts it then runs Q at the start of each period (`dl_defer_running`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FairServer {
    pub q: u64,
    pub p: u64,
    pub runtime: i64,
    pub deadline: u64,
    pub state: ServerState,
    /// `dl_defer_running`: replenishments no longer defer.
    defer_running: bool,
}

/// Where the fair server is in its life cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerState {
    /// Stopped (`dl_server_stop()`), or never started.
    Off,
    /// Active, throttled until its zero-laxity time (`dl_defer_armed`).
    Deferred { at: u64 },
    /// An EDF entity competing with deadline tasks.
    Running,
    /// Out of runtime until `until` (its next period).
    Throttled { until: u64 },
}

/// `dl_server_min_res`: a deferred timer more than this early is pushed, not acted on.
const SERVER_MIN_RES: u64 = 1_000_000;

impl FairServer {
    pub fn new(q: u64, p: u64) -> Self {
        FairServer {
            q,
            p,
            runtime: 0,
            deadline: 0,
            state: ServerState::Off,
            defer_running: false,
        }
    }

    /// A fresh deferred period from `now`.
    fn defer_from(&mut self, now: u64) {
        self.defer_running = false;
        self.deadline = now + self.p;
        self.runtime = self.q as i64;
        self.state = ServerState::Deferred {
            at: self.deadline - self.q,
        };
    }

    /// `dl_server_start()`: the CPU's fair class got a task while it had none.
    pub fn start(&mut self, now: u64) {
        if self.state != ServerState::Off {
            return;
        }
        // `update_dl_entity()`: a passed deadline or an overflowing (deadline, runtime) starts
        // afresh, deferred.
        let left = self.deadline.saturating_sub(now);
        let overflow = (self.runtime.max(0) as u128) * (self.p as u128) > (left as u128) * (self.q as u128);
        if self.deadline <= now || overflow {
            self.defer_from(now);
        } else if self.defer_running {
            self.state = ServerState::Running;
        } else {
            self.state = ServerState::Deferred {
                at: self.deadline.saturating_sub(self.runtime.max(0) as u64),
            };
        }
    }

    /// `dl_server_stop()`.
    pub fn stop(&mut self) {
        self.state = ServerState::Off;
    }

    /// Fair execution of `delta` ns at `now`, inside the server or in the background
    /// (`dl_server_update()`). True when a running server ran out (the CPU must pick again).
    pub fn charge(&mut self, delta: u64, now: u64) -> bool {
        if self.state == ServerState::Off {
            return false;
        }
        self.runtime -= delta.min(i64::MAX as u64) as i64;
        if self.runtime > 0 {
            return false;
        }
        match self.state {
            // The fair class had its Q in the background: nothing to defer for.
            ServerState::Deferred { .. } | ServerState::Throttled { .. } if !self.defer_running => {
                self.defer_from(now);
                false
            }
            ServerState::Running => {
                self.state = ServerState::Throttled { until: self.deadline };
                true
            }
            _ => false,
        }
    }

    /// Whether it competes as an EDF entity now, and with which deadline.
    pub fn runnable(&self) -> Option<u64> {
        (self.state == ServerState::Running).then_some(self.deadline)
    }

    /// Its next timer (zero-laxity or replenishment).
    pub fn timer(&self) -> Option<u64> {
        match self.state {
            ServerState::Deferred { at } | ServerState::Throttled { until: at } => Some(at),
            _ => None,
        }
    }

    /// Its timer fired at `now` (`dl_server_timer()`); true when it became runnable.
    pub fn fire(&mut self, now: u64) -> bool {
        match self.state {
            ServerState::Deferred { .. } => {
                let zero_laxity = self.deadline.saturating_sub(self.runtime.max(0) as u64);
                if now + SERVER_MIN_RES < zero_laxity {
                    self.state = ServerState::Deferred { at: zero_laxity };
                    return false;
                }
                // Fresh period: at the zero-laxity point the old pair always overflows.
                self.defer_running = true;
                self.deadline = now + self.p;
                self.runtime = self.q as i64;
                self.state = ServerState::Running;
                true
            }
            ServerState::Throttled { .. } => {
                while self.runtime <= 0 {
                    self.deadline += self.p;
                    self.runtime += self.q as i64;
                }
                if self.deadline < now {
                    self.deadline = now + self.p;
                    self.runtime = self.q as i64;
                }
                if self.defer_running {
                    self.state = ServerState::Running;
                    true
                } else {
                    self.state = ServerState::Deferred {
                        at: self.deadline.saturating_sub(self.runtime.max(0) as u64),
                    };
                    false
                }
            }
            _ => false,
        }
    }
}

/// A root domain (`struct root_domain`): the CPUs one exclusive cpuset groups, and its
/// SCHED_DEADLINE bandwidth (`struct dl_bw`), against which admission control runs.
#[derive(Debug, Clone)]
pub(crate) struct RootDomain {
    pub cpus: Vec<usize>,
    /// `dl_bw->bw`: the per-CPU cap, to_ratio(rt_period, rt_runtime); `None` without a cap
    /// (`sched_rt_runtime_us = -1`).
    pub bw: Option<u64>,
    /// `dl_bw->total_bw`: Σ dl_bw of the domain's SCHED_DEADLINE tasks and servers.
    pub total_bw: u64,
    /// Σ capacity of the domain's CPUs (`dl_bw_capacity()`).
    pub capacity: u64,
    /// The fair servers' part of `total_bw`.
    pub servers_bw: u64,
}

impl RootDomain {
    /// `__dl_overflow()`: would replacing `old_bw` by `new_bw` exceed the domain's capacity?
    pub fn overflows(&self, old_bw: u64, new_bw: u64) -> bool {
        match self.bw {
            None => false,
            Some(bw) => cap_scale(bw, self.capacity) < (self.total_bw - old_bw.min(self.total_bw)) + new_bw,
        }
    }

    /// Bandwidth left to tasks: cap_scale(bw, capacity) less the fair servers (BW_SHIFT fixed
    /// point), what `Kernel::dl_bandwidth_limit` reports.
    pub fn task_limit(&self) -> u64 {
        self.bw.map_or(u64::MAX, |bw| {
            cap_scale(bw, self.capacity).saturating_sub(self.servers_bw)
        })
    }

    /// `__dl_add()` / `__dl_sub()` with the change of each CPU's extra (unallocated) bandwidth,
    /// which GRUB shares evenly over the domain's CPUs.
    pub fn change(&mut self, old_bw: u64, new_bw: u64) -> i64 {
        self.total_bw = self.total_bw - old_bw.min(self.total_bw) + new_bw;
        (old_bw as i64 - new_bw as i64) / self.cpus.len().max(1) as i64
    }
}

/// `cap_scale()`: a per-CPU bandwidth times a capacity on the 1024 scale.
fn cap_scale(bw: u64, capacity: u64) -> u64 {
    ((bw as u128 * capacity as u128) >> 10) as u64
}

/// Execution time after which `runtime` is used up at charge rate `rate` (BW_SHIFT fixed point).
pub(crate) fn time_to_exhaust(runtime: i64, rate: u64) -> u64 {
    if runtime <= 0 {
        return 0;
    }
    if rate == 0 {
        return u64::MAX;
    }
    let t = ((runtime as u128) << BW_SHIFT).div_ceil(rate as u128);
    t.min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacer_model::Duration;

    fn ent(rt_us: u64, dl_us: u64, p_us: u64) -> DlEntity {
        DlEntity::new(&Reservation::new(
            Duration::from_us(rt_us),
            Duration::from_us(dl_us),
            Duration::from_us(p_us),
        ))
    }

    #[test]
    fn first_wakeup_sets_up_a_period() {
        let mut e = ent(2000, 10_000, 10_000);
        e.on_wakeup(5_000_000);
        assert_eq!(e.deadline, 15_000_000);
        assert_eq!(e.runtime, 2_000_000);
    }

    #[test]
    fn wakeup_keeps_parameters_unless_overflowing() {
        let mut e = ent(2000, 10_000, 10_000);
        e.on_wakeup(0);
        // Ran 1 ms, blocked, wakes at 5 ms: 1 ms left over 5 ms = 0.2 = bandwidth: keep.
        e.runtime = 1_000_000;
        e.on_wakeup(5_000_000);
        assert_eq!((e.deadline, e.runtime), (10_000_000, 1_000_000));
        // Wakes at 8 ms with 1 ms left: 1/2 > 0.2 overflows: new period.
        e.on_wakeup(8_000_000);
        assert_eq!((e.deadline, e.runtime), (18_000_000, 2_000_000));
        // Deadline passed: new period.
        e.on_wakeup(20_000_000);
        assert_eq!(e.deadline, 30_000_000);
    }

    #[test]
    fn revised_wakeup_for_constrained_deadlines() {
        let mut e = ent(2000, 5_000, 10_000); // density 0.4
        e.on_wakeup(0);
        e.runtime = 2_000_000;
        e.on_wakeup(4_000_000); // 2 ms over 1 ms of laxity overflows; deadline still ahead
        assert_eq!(e.deadline, 5_000_000);
        assert_eq!(e.runtime, 400_000 - 1); // 0.4 · 1 ms, in 20-bit fixed point
    }

    #[test]
    fn replenishment_adds_periods() {
        let mut e = ent(2000, 10_000, 10_000);
        e.on_wakeup(0);
        e.runtime = -500_000; // overran by 0.5 ms
        assert_eq!(e.next_period_start(), 10_000_000);
        e.replenish(10_000_000);
        assert_eq!((e.deadline, e.runtime), (20_000_000, 1_500_000));
    }

    #[test]
    fn grub_rate_alone_on_a_cpu() {
        // One entity of bandwidth 0.25 alone on a CPU: u_extra = 0.95 − 0.25, so it is charged
        // at 0.25/0.95 and can run 0.95 of the CPU.
        let max_bw = to_ratio(1_000_000, 950_000);
        let mut rq = DlRq::new(max_bw);
        let bw = to_ratio(4, 1);
        rq.this_bw = bw;
        rq.running_bw = bw;
        rq.extra_bw = max_bw - bw;
        let rate = rq.grub_rate(bw) as f64 / (1u64 << BW_SHIFT) as f64;
        assert!((rate - 0.25 / 0.95).abs() < 1e-3, "{rate}");
        assert_eq!(time_to_exhaust(1_000, 1 << BW_SHIFT), 1_000);
    }
}
