//! rt-app's `fork` event for `pacer run`: a thread starts a new OS thread running another task's
//! spec, at that moment (src/rt-app.c `run_event()`, `rtapp_fork`, and `create_thread()`).
//!
//! As in rt-app:
//! * the new thread's index is the next of a counter shared by the run, starting after the
//!   threads created at the start (rt-app's `nthreads++` under `fork_mutex`); in `pacer run` that
//!   index is also its [`ThreadId`] in the job records and logs, so forked threads follow the
//!   initial ones without gaps;
//! * it is named `<task>-<index>-<nfork>` with `nfork` on four digits, counted per forked task
//!   over the whole run; its comm is that name cut to 15 bytes (rt-app's `pthread_setname_np`
//!   fails on longer names and keeps the parent's; pacer cuts, which says more);
//! * a task may be forked at most [`FORKS_LIMIT`] times (rt-app's `FORKS_LIMIT`, a guard against
//!   fork loops); the next `fork` fails the run, as rt-app exits;
//! * the new thread does not wait for the start gate; its `delay` and its timers count from the
//!   run's origin (rt-app's `t_first = t_zero + delay`), so a relative timer restarts at its
//!   first use and an absolute one catches up. Its first job is released when it starts.
//!   Timers that no other thread spec uses are private to each forked thread (rt-app copies a
//!   task's `unique` timers for every thread; the workload model does not say which timers were
//!   `unique`, and a timer only one spec uses is treated as one).
//!
//! It sets its own policy and affinity like any thread and puts itself back to SCHED_OTHER when
//! it ends; the writer kicks, wakes and joins forked threads like the others.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pacer_workload::jobs::ThreadId;
use pacer_workload::{Event, ThreadSpec, Workload};

use super::sync::Blocked;
use super::thread::{Msg, Sender, Shared, ThreadResult};
use super::RunError;

/// rt-app's `FORKS_LIMIT`: forks of one task over a run.
pub const FORKS_LIMIT: u32 = 1024;

/// The forked threads of a run.
pub(crate) struct Forks {
    state: Mutex<State>,
}

struct State {
    /// The id of the next forked thread.
    next_id: ThreadId,
    /// Forks so far, per thread spec forked.
    nforks: Vec<u32>,
    threads: Vec<Forked>,
}

/// One forked thread.
pub(crate) struct Forked {
    pub id: ThreadId,
    pub name: String,
    pub handle: JoinHandle<ThreadResult>,
}

impl Forks {
    /// No forks yet; the first one gets id `initial` (the number of threads started with the
    /// run).
    pub(crate) fn new(initial: usize, specs: usize) -> Forks {
        Forks {
            state: Mutex::new(State {
                next_id: initial as ThreadId,
                nforks: vec![0; specs],
                threads: Vec::new(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls `f` with the pthread of every forked thread still running.
    pub(crate) fn each_running(&self, mut f: impl FnMut(libc::pthread_t)) {
        use std::os::unix::thread::JoinHandleExt;
        for t in &self.state().threads {
            if !t.handle.is_finished() {
                f(t.handle.as_pthread_t());
            }
        }
    }

    /// (id, name) of the forked threads with ids from `from` on, in id order.
    pub(crate) fn names_from(&self, from: ThreadId) -> Vec<(ThreadId, String)> {
        self.state()
            .threads
            .iter()
            .filter(|t| t.id >= from)
            .map(|t| (t.id, t.name.clone()))
            .collect()
    }

    /// Every forked thread, in id order, for joining (once no thread can fork any more).
    pub(crate) fn take(&self) -> Vec<Forked> {
        std::mem::take(&mut self.state().threads)
    }
}

/// rt-app's task name of a spec: its rt-app name without the `-<index>` suffix (a forked
/// template has no rt-app name; its `name` is the task's).
fn task_name(spec: &ThreadSpec) -> &str {
    spec.rtapp_name
        .as_deref()
        .and_then(|n| n.strip_suffix(&format!("-{}", spec.index)))
        .unwrap_or(&spec.name)
}

/// Who a running thread is, and what it needs to fork.
pub(crate) struct Instance {
    pub id: ThreadId,
    /// Index of its spec in the workload.
    pub spec: usize,
    /// When it was forked (CLOCK_MONOTONIC ns); 0 for the threads started with the run.
    pub spawned_at: u64,
    /// Its stream of execution-time draws: its spec's index for a thread started with the run
    /// (the simulator's), past every spec's for a forked one.
    pub rng_index: usize,
    /// Its private copies of timers, (timer id, next expiry).
    private: Vec<(usize, AtomicU64)>,
    shared: Arc<Shared>,
}

impl Instance {
    /// A thread started with the run, of spec `spec`, with id `id`.
    pub(crate) fn initial(spec: usize, id: ThreadId, shared: Arc<Shared>) -> Instance {
        Instance {
            id,
            spec,
            spawned_at: 0,
            rng_index: spec,
            private: Vec::new(),
            shared,
        }
    }

    /// The expiry slot of timer `id` for this thread.
    pub(crate) fn timer<'s>(&'s self, shared: &'s [AtomicU64], id: usize) -> Option<&'s AtomicU64> {
        self.private
            .iter()
            .find(|(t, _)| *t == id)
            .map(|(_, a)| a)
            .or_else(|| shared.get(id))
    }

    /// rt-app `fork`: starts a thread running spec `target` now.
    pub(crate) fn fork(
        &self,
        tx: &Sender<Msg>,
        forker: &str,
        target: usize,
        now: u64,
    ) -> Result<(), Blocked> {
        let shared = &self.shared;
        if shared.stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Blocked::Stopped);
        }
        let ext = &shared.extras;
        let workload = &ext.workload;
        let Some(spec) = workload.threads.get(target) else {
            return Err(Blocked::Failed(RunError::Setup(format!(
                "internal error: `fork` of thread {target}, which does not exist"
            ))));
        };
        let mut st = ext.forks.state();
        let n = st.nforks.get(target).copied().unwrap_or(FORKS_LIMIT);
        if n >= FORKS_LIMIT {
            return Err(Blocked::Failed(RunError::BadThread {
                thread: forker.to_string(),
                message: format!(
                    "`fork` of task `{}` once more than rt-app's limit of {FORKS_LIMIT} forks of one task",
                    task_name(spec)
                ),
            }));
        }
        let id = st.next_id;
        let name = format!("{}-{id}-{n:04}", task_name(spec));
        let inst = Instance {
            id,
            spec: target,
            spawned_at: now,
            rng_index: workload.threads.len() + id as usize,
            private: private_timers(workload, target),
            shared: shared.clone(),
        };
        let (w, s, tx) = (workload.clone(), shared.clone(), tx.another());
        let seed = ext.seed;
        let thread_name = name.clone();
        let handle = std::thread::Builder::new()
            .spawn(move || super::thread::forked_main(inst, thread_name, w, s, tx, seed))
            .map_err(|e| {
                Blocked::Failed(RunError::Setup(format!(
                    "`fork` of `{name}` by `{forker}`: creating the thread: {e}"
                )))
            })?;
        if let Some(c) = st.nforks.get_mut(target) {
            *c += 1;
        }
        st.next_id += 1;
        st.threads.push(Forked { id, name, handle });
        Ok(())
    }
}

/// Timers of spec `target` that no other spec uses, as fresh slots.
fn private_timers(w: &Workload, target: usize) -> Vec<(usize, AtomicU64)> {
    let timers = |t: &ThreadSpec| -> Vec<usize> {
        t.phases
            .iter()
            .flat_map(|p| p.events.iter())
            .filter_map(|e| match e {
                Event::Timer { timer, .. } => Some(timer.0),
                _ => None,
            })
            .collect()
    };
    let Some(spec) = w.threads.get(target) else {
        return Vec::new();
    };
    let mut own = timers(spec);
    own.sort_unstable();
    own.dedup();
    own.retain(|id| {
        w.threads
            .iter()
            .enumerate()
            .all(|(i, t)| i == target || !timers(t).contains(id))
    });
    own.into_iter()
        .map(|id| (id, AtomicU64::new(super::thread::UNSET)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_names_drop_the_index() {
        let s = ThreadSpec {
            name: "child".into(),
            rtapp_name: Some("child-3".into()),
            index: 3,
            ..ThreadSpec::default()
        };
        assert_eq!(task_name(&s), "child");
        let t = ThreadSpec {
            name: "tmpl".into(),
            forked: true,
            ..ThreadSpec::default()
        };
        assert_eq!(task_name(&t), "tmpl");
    }
}
