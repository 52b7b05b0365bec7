//! Reservation pools: the per-thread reservation bookkeeping of the controllers (what is in
//! place, the policy to restore, refusals, errors) and ONE supervisor (lfspp §4.2, eq. 1) run over
//! the requests of every thread in the pool.
//!
//! A controller built without a pool gets a private one, so it alone is fitted into its bound.
//! A [`Pool`] handed to several controllers ([`LegacyController::with_pool`] and its
//! siblings) makes them share one bound: the daemon's case, where one supervisor owns every
//! reservation of a SCHED_DEADLINE root domain for all clients, so Σ Q/P stays admissible and
//! compression is fair across clients. Whichever controller re-reserves, the pool allocates the
//! current requests of all of them at once and applies every grant that changed, with the
//! reservation flags of the controller that owns the thread.
//!
//! Controllers are driven from one thread; the [`Mutex`] is there so that controllers stay
//! `Send`, not for concurrency.
//!
//! [`LegacyController::with_pool`]: super::LegacyController::with_pool

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use pacer_model::{Policy, ReservationFlags};

use crate::kernel::{Kernel, KernelError, Tid};
use crate::supervisor::{
    apply_grants_each, AllocationStatus, ApplyOutcome, Compression, Grant, Request, Supervisor,
};

/// A thread cannot join a pool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// Request ids are TIDs: one thread has one reservation, whichever controller asks for it.
    #[error("thread {0} already has a reservation in this pool")]
    Duplicate(Tid),
}

/// Per-thread reservation bookkeeping common to every controller.
#[derive(Debug, Clone, Default)]
pub(crate) struct Slot {
    /// (runtime, period) we know to be in place.
    pub(crate) applied: Option<(u64, u64)>,
    /// The policy the thread had before we first touched it, restored by `release`.
    saved: Option<Policy>,
    pub(crate) refusals: u64,
    pub(crate) last_error: Option<String>,
    pub(crate) gone: bool,
}

impl Slot {
    /// The runtime in place, ns.
    pub(crate) fn budget(&self) -> Option<u64> {
        self.applied.map(|a| a.0)
    }

    fn absorb(&mut self, g: &Grant, o: &ApplyOutcome) {
        match o {
            ApplyOutcome::Unchanged | ApplyOutcome::Applied { .. } => self.applied = Some((g.q, g.p)),
            ApplyOutcome::ReducedToMinimum { q } => {
                self.applied = Some((*q, g.p));
                self.refusals += 1;
            }
            ApplyOutcome::KeptPrevious { q, p } => {
                self.applied = Some((*q, *p));
                self.refusals += 1;
            }
            ApplyOutcome::Refused { reason } => {
                self.refusals += 1;
                self.last_error = Some(format!("admission refused: {reason}"));
            }
            ApplyOutcome::Failed { error } => self.kernel_error(error),
        }
    }

    fn kernel_error(&mut self, e: &KernelError) {
        if matches!(e, KernelError::NoSuchThread(_)) {
            self.gone = true;
        }
        self.last_error = Some(e.to_string());
    }

    fn release(&mut self, k: &mut dyn Kernel, tid: Tid) -> Result<(), KernelError> {
        if self.gone || self.applied.is_none() {
            return Ok(());
        }
        let back = self.saved.unwrap_or(Policy::Other { nice: 0 });
        k.set_policy(tid, back)?;
        self.applied = None;
        Ok(())
    }
}

/// How one controller's grants are applied.
#[derive(Debug, Clone, Copy)]
struct Terms {
    flags: ReservationFlags,
    /// On admission refusal, retry a thread without a reservation at its minimum budget.
    retry_at_minimum: bool,
}

#[derive(Debug)]
struct Member {
    owner: u64,
    /// The owner's current request; `None` while it asks for nothing (not started, gone, …).
    request: Option<Request>,
    slot: Slot,
}

#[derive(Debug)]
struct Book {
    bound: Option<f64>,
    compression: Compression,
    terms: BTreeMap<u64, Terms>,
    next_owner: u64,
    members: BTreeMap<Tid, Member>,
    last_status: Option<AllocationStatus>,
    last_error: Option<String>,
}

impl Book {
    fn supervisor(&self, k: &dyn Kernel) -> Supervisor {
        Supervisor::new(
            // The pool's threads share one root domain (the supervisor's): ask for the first.
            self.bound
                .unwrap_or_else(|| k.dl_bandwidth_limit(self.members.keys().next().copied())),
            self.compression,
        )
    }

    /// One allocation over every member's request, then the grants that differ from what is in
    /// place, in one admission-safe order.
    fn run(&mut self, k: &mut dyn Kernel) {
        let reqs: Vec<Request> = self.members.values().filter_map(|m| m.request.clone()).collect();
        let alloc = match self.supervisor(&*k).allocate(&reqs) {
            Ok(a) => a,
            Err(e) => {
                self.last_error = Some(e.to_string());
                return;
            }
        };
        self.last_status = Some(alloc.status.clone());
        let changed: Vec<Grant> = alloc
            .grants
            .iter()
            .filter(|g| self.members.get(&g.id).and_then(|m| m.slot.applied) != Some((g.q, g.p)))
            .copied()
            .collect();
        if changed.is_empty() {
            return;
        }
        let terms = |g: &Grant| {
            let t = self.members.get(&g.id).and_then(|m| self.terms.get(&m.owner));
            t.map_or((ReservationFlags::default(), true), |t| {
                (t.flags, t.retry_at_minimum)
            })
        };
        let report = apply_grants_each(k, &changed, terms);
        for (g, (_, o)) in changed.iter().zip(report.results) {
            if let Some(m) = self.members.get_mut(&g.id) {
                m.slot.absorb(g, &o);
            }
        }
    }
}

/// A reservation pool: one supervisor over the threads of every controller attached to it.
/// Cloning the handle shares the pool.
///
/// ```
/// use pacer_adapt::controller::{JobConfig, JobController, LegacyConfig, LegacyController, Pool};
/// use pacer_adapt::Compression;
///
/// // One bound for the whole root domain (None: the kernel's admission limit).
/// let pool = Pool::new(None, Compression::Proportional);
/// let legacy = LegacyController::new(LegacyConfig::default())?.with_pool(&pool)?;
/// let jobs = JobController::new(JobConfig::default())?.with_pool(&pool)?;
/// # Ok::<(), pacer_adapt::controller::ControllerError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Pool {
    book: Arc<Mutex<Book>>,
}

impl Pool {
    /// A pool fitting its threads into `bound` CPUs (`None`: [`Kernel::dl_bandwidth_limit`])
    /// with `compression`. The controllers' own `bound` and `compression` settings do not apply
    /// to the threads they put in a shared pool.
    pub fn new(bound: Option<f64>, compression: Compression) -> Pool {
        Pool {
            book: Arc::new(Mutex::new(Book {
                bound,
                compression,
                terms: BTreeMap::new(),
                next_owner: 0,
                members: BTreeMap::new(),
                last_status: None,
                last_error: None,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Book> {
        // A panic while holding the lock leaves bookkeeping that is still the best we know.
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The supervisor the pool allocates with on kernel `k`.
    pub fn supervisor(&self, k: &dyn Kernel) -> Supervisor {
        self.lock().supervisor(k)
    }

    /// The supervisor's verdict at the last allocation.
    pub fn allocation_status(&self) -> Option<AllocationStatus> {
        self.lock().last_status.clone()
    }

    /// Why the last failed allocation failed (malformed requests).
    pub fn last_error(&self) -> Option<String> {
        self.lock().last_error.clone()
    }

    /// The threads in the pool, of every controller.
    pub fn threads(&self) -> Vec<Tid> {
        self.lock().members.keys().copied().collect()
    }

    /// The current requests, of every controller, by thread.
    pub fn requests(&self) -> Vec<Request> {
        self.lock()
            .members
            .values()
            .filter_map(|m| m.request.clone())
            .collect()
    }

    /// (runtime, period) in place for a thread of the pool.
    pub fn applied(&self, tid: Tid) -> Option<(u64, u64)> {
        self.lock().members.get(&tid).and_then(|m| m.slot.applied)
    }

    /// Allocates the current requests again and applies what changed: after a thread left, the
    /// others get its share now rather than at their controller's next re-reservation.
    pub fn reallocate(&self, k: &mut dyn Kernel) {
        self.lock().run(k);
    }

    /// A new controller's seat, whose grants are applied with `flags` and `retry_at_minimum`.
    pub(crate) fn seat(&self, flags: ReservationFlags, retry_at_minimum: bool) -> Seat {
        let mut b = self.lock();
        let owner = b.next_owner;
        b.next_owner += 1;
        b.terms.insert(
            owner,
            Terms {
                flags,
                retry_at_minimum,
            },
        );
        Seat {
            pool: self.clone(),
            owner,
        }
    }
}

/// One controller's place in a pool: its threads' bookkeeping lives in the pool, so that the
/// outcome of an allocation run by another controller is seen by this one. Dropping the seat
/// takes the controller's threads out of the pool.
#[derive(Debug)]
pub(crate) struct Seat {
    pool: Pool,
    owner: u64,
}

impl Seat {
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Puts a thread in the pool; a TID is in a pool once.
    pub(crate) fn join(&self, tid: Tid) -> Result<(), PoolError> {
        let mut b = self.pool.lock();
        if b.members.contains_key(&tid) {
            return Err(PoolError::Duplicate(tid));
        }
        b.members.insert(
            tid,
            Member {
                owner: self.owner,
                request: None,
                slot: Slot::default(),
            },
        );
        Ok(())
    }

    fn with<R: Default>(&self, tid: Tid, f: impl FnOnce(&mut Slot) -> R) -> R {
        let mut b = self.pool.lock();
        match b.members.get_mut(&tid) {
            Some(m) if m.owner == self.owner => f(&mut m.slot),
            _ => R::default(),
        }
    }

    /// A copy of a thread's bookkeeping (empty for a thread not in the pool).
    pub(crate) fn slot(&self, tid: Tid) -> Slot {
        self.with(tid, |s| s.clone())
    }

    pub(crate) fn applied(&self, tid: Tid) -> Option<(u64, u64)> {
        self.with(tid, |s| s.applied)
    }

    pub(crate) fn gone(&self, tid: Tid) -> bool {
        self.with(tid, |s| s.gone)
    }

    pub(crate) fn kernel_error(&self, tid: Tid, e: &KernelError) {
        self.with(tid, |s| s.kernel_error(e));
    }

    /// Remembers the thread's policy before the first change.
    pub(crate) fn save(&self, k: &dyn Kernel, tid: Tid) {
        self.with(tid, |s| match k.policy(tid) {
            Ok(p) => s.saved = Some(p),
            Err(e) => s.kernel_error(&e),
        });
    }

    /// [`save`](Self::save) the first time only (`started` says whether it happened); true the
    /// first time.
    pub(crate) fn save_once(&self, k: &dyn Kernel, tid: Tid, started: &mut bool) -> bool {
        let fresh = !*started;
        if fresh {
            *started = true;
            self.save(k, tid);
        }
        fresh
    }

    /// Restores the thread's original policy and takes it out of the pool, freeing its share.
    pub(crate) fn release(&self, k: &mut dyn Kernel, tid: Tid) -> Result<(), KernelError> {
        let mut b = self.pool.lock();
        match b.members.get(&tid) {
            Some(m) if m.owner == self.owner => {}
            _ => return Ok(()),
        }
        let mut m = b.members.remove(&tid).expect("checked above");
        m.slot.release(k, tid)
    }

    /// Replaces this controller's requests by `reqs` (its threads absent from `reqs` ask for
    /// nothing), then allocates the whole pool and applies the changes.
    pub(crate) fn reserve(&self, k: &mut dyn Kernel, reqs: Vec<Request>) {
        let mut b = self.pool.lock();
        let mut reqs: BTreeMap<Tid, Request> = reqs.into_iter().map(|r| (r.id, r)).collect();
        for (tid, m) in b.members.iter_mut() {
            if m.owner == self.owner {
                m.request = reqs.remove(tid);
            }
        }
        debug_assert!(reqs.is_empty(), "requests for threads outside the pool: {reqs:?}");
        b.run(k);
    }

    pub(crate) fn allocation_status(&self) -> Option<AllocationStatus> {
        self.pool.allocation_status()
    }

    pub(crate) fn supervisor(&self, k: &dyn Kernel) -> Supervisor {
        self.pool.supervisor(k)
    }

    /// Moves this controller, with its threads and their bookkeeping, to `pool`. Nothing moves
    /// if one of its threads is in `pool` already.
    pub(crate) fn move_to(&mut self, pool: &Pool) -> Result<(), PoolError> {
        if Arc::ptr_eq(&self.pool.book, &pool.book) {
            return Ok(());
        }
        let terms = self.pool.lock().terms[&self.owner];
        let seat = pool.seat(terms.flags, terms.retry_at_minimum);
        {
            let mut old = self.pool.lock();
            let mut new = pool.lock();
            let mine: Vec<Tid> = old
                .members
                .iter()
                .filter(|(_, m)| m.owner == self.owner)
                .map(|(&t, _)| t)
                .collect();
            if let Some(&t) = mine.iter().find(|t| new.members.contains_key(t)) {
                return Err(PoolError::Duplicate(t));
            }
            for t in mine {
                let mut m = old.members.remove(&t).expect("listed above");
                m.owner = seat.owner;
                new.members.insert(t, m);
            }
        }
        // The old seat's drop forgets its (now empty) place in the old pool.
        *self = seat;
        Ok(())
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let owner = self.owner;
        let mut b = self.pool.lock();
        b.members.retain(|_, m| m.owner != owner);
        b.terms.remove(&owner);
    }
}
