//! rt-app's shared synchronisation objects as the simulator runs them: pthread mutexes (glibc on
//! futexes, or on the kernel's rt_mutex with `pi_enabled`: PTHREAD_PRIO_INHERIT), condition
//! variables (`wait`/`signal`/`broad`/`sync`, and `suspend`/`resume`), rt-app's barrier (a
//! counter starting at users − 1 under a mutex and a condition variable, `rtapp_barrier` in
//! rt-app.c `run_event()`) and POSIX semaphores (`sem_init(…, 0)`).
//!
//! This module keeps the objects' state (owners, counters, wait queues) and decides who is
//! served; the engine blocks and wakes the threads, and applies priority inheritance.
//!
//! Simplifications against Linux (also in docs/simulator.md, "Synchronisation"):
//! - A released mutex or semaphore is handed to the top waiter at once (it wakes owning it):
//!   no lock stealing by a thread that runs before the woken one does.
//! - A waiter signalled on a condition variable is moved straight to its mutex's wait queue when
//!   the mutex is held (as FUTEX_CMP_REQUEUE does), instead of waking to find it held.
//! - rt-app's barrier mutex is not contended: the counter is updated at the arrival instant.

use pacer_workload::{ResourceKind, Workload};

use crate::record::ThreadId;

/// Order in which blocked threads are served: smaller first, ties in arrival order. The engine
/// computes it from the waiter's scheduling parameters as the kernel orders futex and rt_mutex
/// waiters (deadline by deadline, then rt by priority, then the rest).
pub(crate) type WaitKey = (u8, u64);

#[derive(Debug, Clone, Copy)]
pub(crate) struct Waiter {
    pub t: ThreadId,
    /// Arrival order, for FIFO among equal keys.
    seq: u64,
    /// The mutex a condition-variable waiter takes back when woken.
    pub mutex: Option<usize>,
}

#[derive(Debug)]
enum Object {
    Mutex {
        owner: Option<ThreadId>,
        waiters: Vec<Waiter>,
    },
    Cond {
        waiters: Vec<Waiter>,
    },
    /// rt-app's `waiting`: arrivals still expected before the last one, which releases the rest.
    Barrier {
        waiting: u32,
        waiters: Vec<Waiter>,
    },
    Semaphore {
        count: u64,
        waiters: Vec<Waiter>,
    },
}

/// What a mutex operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// The thread owns the mutex now.
    Owned,
    /// The thread waits for `owner` to release it.
    Blocked { owner: ThreadId },
}

/// Every shared object of a workload, indexed like [`Workload::resources`].
#[derive(Debug, Default)]
pub(crate) struct Objects {
    objs: Vec<Object>,
    seq: u64,
}

impl Objects {
    pub fn new(w: &Workload) -> Self {
        let objs = w
            .resources
            .iter()
            .map(|r| match r.kind {
                ResourceKind::Mutex => Object::Mutex {
                    owner: None,
                    waiters: Vec::new(),
                },
                ResourceKind::Cond => Object::Cond { waiters: Vec::new() },
                ResourceKind::Barrier { users } => Object::Barrier {
                    waiting: users.saturating_sub(1),
                    waiters: Vec::new(),
                },
                ResourceKind::Semaphore => Object::Semaphore {
                    count: 0,
                    waiters: Vec::new(),
                },
            })
            .collect();
        Objects { objs, seq: 0 }
    }

    fn waiter(&mut self, t: ThreadId, mutex: Option<usize>) -> Waiter {
        self.seq += 1;
        Waiter {
            t,
            seq: self.seq,
            mutex,
        }
    }

    /// pthread_mutex_lock by `t`. Locking a mutex `t` already owns blocks it for ever, as a
    /// default (non-recursive, non-error-checking) mutex does.
    pub fn lock(&mut self, m: usize, t: ThreadId) -> Acquire {
        let w = self.waiter(t, None);
        match &mut self.objs[m] {
            Object::Mutex { owner: None, .. } => {
                self.set_owner(m, Some(t));
                Acquire::Owned
            }
            Object::Mutex {
                owner: Some(o),
                waiters,
            } => {
                waiters.push(w);
                Acquire::Blocked { owner: *o }
            }
            // Kinds are checked when the simulation is built.
            _ => Acquire::Owned,
        }
    }

    fn set_owner(&mut self, m: usize, t: Option<ThreadId>) {
        if let Object::Mutex { owner, .. } = &mut self.objs[m] {
            *owner = t;
        }
    }

    pub fn owner(&self, m: usize) -> Option<ThreadId> {
        match &self.objs[m] {
            Object::Mutex { owner, .. } => *owner,
            _ => None,
        }
    }

    /// pthread_mutex_unlock by `t`: the mutex goes to its top waiter, returned (it wakes owning
    /// it). `Err(())` when `t` does not own it: the kernel refuses that unlock of a PI mutex
    /// (EPERM), and for a default mutex it is undefined; either way nothing changes here.
    pub fn unlock(
        &mut self,
        m: usize,
        t: ThreadId,
        key: impl Fn(ThreadId) -> WaitKey,
    ) -> Result<Option<ThreadId>, ()> {
        let Object::Mutex { owner, waiters } = &mut self.objs[m] else {
            return Err(());
        };
        if *owner != Some(t) {
            return Err(());
        }
        let next = take_top(waiters, &key).map(|w| w.t);
        *owner = next;
        Ok(next)
    }

    /// The key of the most urgent thread waiting for mutex `m`.
    pub fn top_waiter_key(&self, m: usize, key: impl Fn(ThreadId) -> WaitKey) -> Option<WaitKey> {
        match &self.objs[m] {
            Object::Mutex { waiters, .. } => waiters.iter().map(|w| key(w.t)).min(),
            _ => None,
        }
    }

    /// `t` waits on condition variable `c`, to take `mutex` back when woken.
    pub fn cond_wait(&mut self, c: usize, mutex: usize, t: ThreadId) {
        let w = self.waiter(t, Some(mutex));
        if let Object::Cond { waiters } = &mut self.objs[c] {
            waiters.push(w);
        }
    }

    /// Removes the waiters a signal (one, the most urgent) or a broadcast (all, most urgent
    /// first) wakes, into `out`. A signal without waiters is lost.
    pub fn cond_wake(
        &mut self,
        c: usize,
        all: bool,
        key: impl Fn(ThreadId) -> WaitKey,
        out: &mut Vec<Waiter>,
    ) {
        let Object::Cond { waiters } = &mut self.objs[c] else {
            return;
        };
        if all {
            drain_sorted(waiters, &key, out);
        } else if let Some(w) = take_top(waiters, &key) {
            out.push(w);
        }
    }

    /// `t` reaches barrier `b`. The last arrival (the counter at 0) releases the waiters into
    /// `out`, most urgent first, and goes on (true); the others wait (false).
    pub fn barrier(
        &mut self,
        b: usize,
        t: ThreadId,
        key: impl Fn(ThreadId) -> WaitKey,
        out: &mut Vec<Waiter>,
    ) -> bool {
        let w = self.waiter(t, None);
        let Object::Barrier { waiting, waiters } = &mut self.objs[b] else {
            return true;
        };
        if *waiting == 0 {
            // Each released thread increments `waiting` back once it runs again; they all
            // run again at this instant in the model.
            *waiting = waiters.len() as u32;
            drain_sorted(waiters, &key, out);
            true
        } else {
            *waiting -= 1;
            waiters.push(w);
            false
        }
    }

    /// sem_post: hands the token to the most urgent waiter (returned), or counts it.
    pub fn sem_post(&mut self, s: usize, key: impl Fn(ThreadId) -> WaitKey) -> Option<ThreadId> {
        let Object::Semaphore { count, waiters } = &mut self.objs[s] else {
            return None;
        };
        match take_top(waiters, &key) {
            Some(w) => Some(w.t),
            None => {
                *count = count.saturating_add(1);
                None
            }
        }
    }

    /// sem_wait by `t`: true if it took a token, false if it waits for a post.
    pub fn sem_wait(&mut self, s: usize, t: ThreadId) -> bool {
        let w = self.waiter(t, None);
        let Object::Semaphore { count, waiters } = &mut self.objs[s] else {
            return true;
        };
        if *count > 0 {
            *count -= 1;
            true
        } else {
            waiters.push(w);
            false
        }
    }
}

fn take_top(waiters: &mut Vec<Waiter>, key: &impl Fn(ThreadId) -> WaitKey) -> Option<Waiter> {
    let i = waiters
        .iter()
        .enumerate()
        .min_by_key(|(_, w)| (key(w.t), w.seq))
        .map(|(i, _)| i)?;
    Some(waiters.remove(i))
}

fn drain_sorted(waiters: &mut Vec<Waiter>, key: &impl Fn(ThreadId) -> WaitKey, out: &mut Vec<Waiter>) {
    let start = out.len();
    out.append(waiters);
    out[start..].sort_by_key(|w| (key(w.t), w.seq));
}

/// One step of a synchronisation event: rt-app's events are sequences of these
/// (`suspend` = lock, wait, unlock; `sync` = signal, wait; …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Lock(usize),
    Unlock(usize),
    Wait { cond: usize, mutex: usize },
    Signal(usize),
    Broadcast(usize),
    Barrier(usize),
    SemPost(usize),
    SemWait(usize),
}

/// The operations of an event (at most three), in execution order.
pub(crate) type Ops = [Option<Op>; 3];

/// The operations of a synchronisation event, in execution order; empty for other events.
pub(crate) fn ops_of(e: &pacer_workload::Event) -> Ops {
    use pacer_workload::Event as E;
    match *e {
        E::Lock { mutex } => [Some(Op::Lock(mutex.0)), None, None],
        E::Unlock { mutex } => [Some(Op::Unlock(mutex.0)), None, None],
        E::Wait { cond, mutex } => [
            Some(Op::Wait {
                cond: cond.0,
                mutex: mutex.0,
            }),
            None,
            None,
        ],
        E::Signal { cond } => [Some(Op::Signal(cond.0)), None, None],
        E::Broadcast { cond } => [Some(Op::Broadcast(cond.0)), None, None],
        E::SignalWait { cond, mutex } => [
            Some(Op::Signal(cond.0)),
            Some(Op::Wait {
                cond: cond.0,
                mutex: mutex.0,
            }),
            None,
        ],
        E::Barrier { barrier } => [Some(Op::Barrier(barrier.0)), None, None],
        E::Suspend { cond, mutex } => [
            Some(Op::Lock(mutex.0)),
            Some(Op::Wait {
                cond: cond.0,
                mutex: mutex.0,
            }),
            Some(Op::Unlock(mutex.0)),
        ],
        E::Resume { cond, mutex } => [
            Some(Op::Lock(mutex.0)),
            Some(Op::Broadcast(cond.0)),
            Some(Op::Unlock(mutex.0)),
        ],
        E::SemPost { sem } => [Some(Op::SemPost(sem.0)), None, None],
        E::SemWait { sem } => [Some(Op::SemWait(sem.0)), None, None],
        _ => [None; 3],
    }
}
