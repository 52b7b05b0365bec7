//! What the three controllers do alike with a thread, written once: the options a thread is
//! added with and their checks, the request it submits, and the [`Roster`] that keeps the
//! controller's threads together with their seat in a reservation [`Pool`](super::Pool)
//! (add, remove, release, reserve).

use std::collections::BTreeMap;

use pacer_model::ReservationFlags;
use serde::Serialize;

use super::budget::usable_period;
use super::pool::{Pool, Seat, Slot};
use super::ControllerError;
use crate::kernel::{Kernel, KernelError, Tid};
use crate::supervisor::{Compression, Request};

/// Per-thread options of the controllers that use the supervisor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadOptions {
    /// LegacyController: skip period detection and use this period (ns).
    pub known_period: Option<u64>,
    /// Supervisor weight ([`Compression::Weighted`]).
    pub weight: f64,
    /// Supervisor priority ([`Compression::PriorityOrdered`]).
    pub priority: i32,
}

impl Default for ThreadOptions {
    fn default() -> Self {
        ThreadOptions {
            known_period: None,
            weight: 1.0,
            priority: 0,
        }
    }
}

impl ThreadOptions {
    /// The supervisor request of thread `id` for runtime `q` every `p`, never compressed below
    /// `min_q`.
    pub(crate) fn request(&self, id: Tid, q: u64, p: u64, min_q: u64) -> Request {
        Request {
            id,
            q,
            p,
            weight: self.weight,
            priority: self.priority,
            min_q,
        }
    }
}

/// Every reservation carries `SCHED_FLAG_RESET_ON_FORK` (a reserved thread must stay able to
/// fork/create threads) and, if configured, `SCHED_FLAG_RECLAIM`.
fn flags(reclaim: bool) -> ReservationFlags {
    ReservationFlags {
        reset_on_fork: true,
        reclaim,
        overrun: false,
    }
}

/// The checks every controller makes before taking a thread: a period (when known) the kernel
/// accepts with room for the minimum budget, a positive weight.
fn check_thread(
    tid: Tid,
    period_ns: Option<u64>,
    max_bandwidth: f64,
    min_budget_ns: u64,
    opts: &ThreadOptions,
) -> Result<(), ControllerError> {
    if let Some(p) = period_ns {
        if !usable_period(p, max_bandwidth, min_budget_ns) {
            return Err(ControllerError::BadPeriod(p));
        }
    }
    if !(opts.weight.is_finite() && opts.weight > 0.0) {
        return Err(ControllerError::Config(format!(
            "thread {tid}: weight must be > 0"
        )));
    }
    Ok(())
}

/// The limits a controller's budgets live within.
#[derive(Debug, Clone, Copy)]
struct Limits {
    max_bandwidth: f64,
    min_budget_ns: u64,
}

/// A controller's threads (`T` holds what the controller itself tracks) and its seat in a pool.
#[derive(Debug)]
pub(crate) struct Roster<T> {
    pub(crate) threads: BTreeMap<Tid, T>,
    pub(crate) seat: Seat,
    limits: Limits,
}

impl<T> Roster<T> {
    /// An empty roster in a private pool of `bound` and `compression`, whose budgets live within
    /// `max_bandwidth` and `min_budget_ns`.
    pub(crate) fn new(
        max_bandwidth: f64,
        min_budget_ns: u64,
        bound: Option<f64>,
        compression: Compression,
        reclaim: bool,
        retry_at_minimum: bool,
    ) -> Self {
        Roster {
            threads: BTreeMap::new(),
            seat: Pool::new(bound, compression).seat(flags(reclaim), retry_at_minimum),
            limits: Limits {
                max_bandwidth,
                min_budget_ns,
            },
        }
    }

    /// Takes `tid` with `opts` (and its period when known), checked; `make` builds the
    /// controller's state for it.
    pub(crate) fn add(
        &mut self,
        tid: Tid,
        period_ns: Option<u64>,
        opts: ThreadOptions,
        make: impl FnOnce(ThreadOptions) -> Result<T, ControllerError>,
    ) -> Result<(), ControllerError> {
        if self.threads.contains_key(&tid) {
            return Err(ControllerError::Duplicate(tid));
        }
        let Limits {
            max_bandwidth,
            min_budget_ns,
        } = self.limits;
        check_thread(tid, period_ns, max_bandwidth, min_budget_ns, &opts)?;
        let th = make(opts)?;
        self.seat.join(tid)?;
        self.threads.insert(tid, th);
        Ok(())
    }

    /// Stops controlling a thread: `stop` undoes what the controller set up for it besides the
    /// reservation, then its original policy is restored and its share freed.
    pub(crate) fn remove(
        &mut self,
        k: &mut dyn Kernel,
        tid: Tid,
        stop: impl FnOnce(&mut dyn Kernel, Tid, &T),
    ) -> Result<(), KernelError> {
        let Some(th) = self.threads.remove(&tid) else {
            return Ok(());
        };
        stop(k, tid, &th);
        self.seat.release(k, tid)
    }

    /// [`remove`](Self::remove) for every thread.
    pub(crate) fn release(
        &mut self,
        k: &mut dyn Kernel,
        stop: impl Fn(&mut dyn Kernel, Tid, &T),
    ) -> Vec<(Tid, Result<(), KernelError>)> {
        let tids: Vec<Tid> = self.threads.keys().copied().collect();
        tids.into_iter().map(|t| (t, self.remove(k, t, &stop))).collect()
    }

    /// Submits the requests of the threads still there (`request` says what each asks for, if
    /// anything) and lets the pool allocate and apply.
    pub(crate) fn reserve(&mut self, k: &mut dyn Kernel, request: impl Fn(Tid, &T) -> Option<Request>) {
        let reqs: Vec<Request> = self
            .threads
            .iter()
            .filter(|(&tid, _)| !self.seat.gone(tid))
            .filter_map(|(&tid, th)| request(tid, th))
            .collect();
        self.seat.reserve(k, reqs);
    }

    /// Each thread with a copy of its reservation bookkeeping, for status views.
    pub(crate) fn each(&self) -> impl Iterator<Item = (Tid, &T, Slot)> + '_ {
        self.threads
            .iter()
            .map(|(&tid, th)| (tid, th, self.seat.slot(tid)))
    }

    /// Moves the roster to a shared pool.
    pub(crate) fn share(&mut self, pool: &Pool) -> Result<(), ControllerError> {
        Ok(self.seat.move_to(pool)?)
    }
}

/// The public methods every controller has for its pool and its threads, written once: the
/// controller type has `roster: Roster<_>`; `$status` is its per-thread status and `status()`
/// returns them; `$stop` undoes, for a thread removed, what the controller set up besides the
/// reservation.
macro_rules! roster_methods {
    ($status:ty, $stop:expr) => {
        /// Reserves through `pool`, shared with other controllers, instead of a private pool
        /// (whose `bound` and `compression` of the configuration then no longer apply). Threads
        /// already added move with the controller, unless one of them is in `pool` already.
        pub fn with_pool(
            mut self,
            pool: &$crate::controller::Pool,
        ) -> Result<Self, $crate::controller::ControllerError> {
            self.roster.share(pool)?;
            Ok(self)
        }

        /// The pool this controller reserves through (its private one unless shared).
        pub fn pool(&self) -> &$crate::controller::Pool {
            self.roster.seat.pool()
        }

        /// Stops controlling a thread: restores its original policy and frees its share of the
        /// pool, for the other threads' next allocation.
        pub fn remove_thread(
            &mut self,
            k: &mut dyn $crate::kernel::Kernel,
            tid: $crate::kernel::Tid,
        ) -> Result<(), $crate::kernel::KernelError> {
            self.roster.remove(k, tid, $stop)
        }

        /// Removes every thread, restoring its original policy (call on exit).
        pub fn release(
            &mut self,
            k: &mut dyn $crate::kernel::Kernel,
        ) -> Vec<($crate::kernel::Tid, Result<(), $crate::kernel::KernelError>)> {
            self.roster.release(k, $stop)
        }

        pub fn thread_status(&self, tid: $crate::kernel::Tid) -> Option<$status> {
            self.status().into_iter().find(|s| s.tid == tid)
        }

        /// The supervisor's verdict at the last allocation of the pool (by any controller in it).
        pub fn allocation_status(&self) -> Option<$crate::supervisor::AllocationStatus> {
            self.roster.seat.allocation_status()
        }
    };
}
pub(crate) use roster_methods;
