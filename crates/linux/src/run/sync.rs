//! rt-app's synchronisation, memory and I/O events for `pacer run` (`lock`, `unlock`, `wait`,
//! `signal`, `broad`, `sync`, `barrier`, `suspend`, `resume`, `sem_post`, `sem_wait`, `mem`,
//! `iorun`), executed on real pthread objects as rt-app does (src/rt-app.c `run_event()`; the
//! objects are made as in src/rt-app_parse_config.c `init_*_resource()`).
//!
//! * One `pthread_mutex_t` per mutex resource, priority-inheriting when `global.pi_enabled`; one
//!   `pthread_cond_t` per condition; a barrier is rt-app's mutex + condition + counter starting
//!   at `users − 1` (the last to arrive broadcasts); one `sem_t` per semaphore, starting at 0.
//!   `lock` and `unlock` are separate events, so the objects are raw pthread objects, boxed so
//!   that they keep their address from their initialisation before the threads start until
//!   their destruction after every thread has been joined (when the last `Arc` of the run's
//!   shared state goes).
//! * The end of the run releases every blocked thread, so that all are joined and restored:
//!   the writer broadcasts every condition (barrier conditions under their mutex) and posts
//!   every semaphore at each of its polls once the run is stopping, on top of the kick that
//!   interrupts sleeps and `sem_wait`. A thread woken that way ends instead of going on. rt-app
//!   keeps a thread that holds a lock running (lock and unlock events only) until the lock is
//!   released; pacer's equivalent is that every thread unlocks the mutexes it still holds when
//!   it ends, whatever the reason (end of run, signal, error, its loops done), in the reverse of
//!   the order it took them. `lock` waits in slices of [`LOCK_SLICE_NS`]
//!   (`pthread_mutex_timedlock`) and gives up once the run is stopping, so even a workload whose
//!   threads deadlock on each other's mutexes ends.
//! * The barrier is rt-app's, race included: a thread woken by the last arrival re-counts itself
//!   only once it runs again, so under heavy load a thread that comes back to the barrier before
//!   a slow-to-wake one re-counted may pass it alone, as under rt-app.
//! * Misuse that rt-app would turn into a hang or undefined behaviour fails the run with an error
//!   naming the thread and the mutex: locking a mutex the thread already holds, unlocking or
//!   waiting with one it does not hold.
//! * `mem` writes into a buffer of `global.mem_buffer_size` bytes from its start, in pieces of at
//!   most the buffer's size (rt-app's `memload()`); `iorun` writes that buffer to
//!   `global.io_device` the same way (`ioload()`). rt-app has one buffer per task, which its
//!   instances write at the same time; here each thread has its own (a buffer written by several
//!   threads at once would be a data race), allocated and touched before the run starts.
//! * `global.io_device` is opened once, before the run, without truncation (as rt-app, no
//!   `O_TRUNC`), and only if some thread has `iorun`. pacer's outputs never destroy data: a block
//!   device or an existing non-empty regular file is refused (so are FIFOs, sockets and
//!   directories); a character device (`/dev/null`, the default) or a new or empty file is
//!   accepted.

use std::cell::UnsafeCell;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pacer_workload::{Event, ResourceId, ResourceKind, ThreadSpec, Workload};

use super::fork::Forks;
use super::memrun::MemBuffers;
use super::RunError;

/// What the threads of a run share beyond timers and the stop flag: the pthread objects, the
/// I/O device, rt-app's calibration, the forked threads.
pub(crate) struct Extras {
    pub objects: Objects,
    pub io: Option<IoDevice>,
    /// `global.calibration` in ns per loop: `run` then runs rt-app's loop (calibrate.rs).
    pub rtapp_ns_per_loop: Option<u64>,
    /// Bytes of each `mem`/`iorun` buffer.
    pub buffer: usize,
    /// The `memrun` buffers, built.
    pub mem: MemBuffers,
    pub forks: Forks,
    pub workload: Arc<Workload>,
    pub seed: u64,
}

impl Extras {
    /// Creates the objects and opens the I/O device (before any thread exists).
    pub(crate) fn new(workload: Arc<Workload>, seed: u64) -> Result<Extras, RunError> {
        let objects = Objects::new(&workload)?;
        let mem = MemBuffers::new(&workload)?;
        let io = if uses_io(&workload) {
            Some(IoDevice::open(&workload.settings.io_device)?)
        } else {
            None
        };
        let initial = workload.initial_threads().count();
        Ok(Extras {
            objects,
            io,
            rtapp_ns_per_loop: workload.settings.calibration_ns_per_loop.filter(|&p| p > 0),
            buffer: usize::try_from(workload.settings.mem_buffer_size).unwrap_or(usize::MAX),
            mem,
            forks: Forks::new(initial, workload.threads.len()),
            workload: workload.clone(),
            seed,
        })
    }

    /// The buffer size for `spec` (0 when it runs neither `mem` nor `iorun`).
    pub(crate) fn buffer_for(&self, spec: &ThreadSpec) -> usize {
        if uses_buffer(spec) {
            self.buffer
        } else {
            0
        }
    }
}

/// How long one attempt of `lock` blocks before it checks whether the run is stopping.
pub(crate) const LOCK_SLICE_NS: u64 = 100_000_000;

/// Why a synchronisation event did not complete.
#[derive(Debug)]
pub(crate) enum Blocked {
    /// The run is stopping: the thread ends.
    Stopped,
    /// The event cannot be run (misuse, a failing system call): the run fails with this error.
    Failed(RunError),
}

struct Mutex(UnsafeCell<libc::pthread_mutex_t>);
struct Cond(UnsafeCell<libc::pthread_cond_t>);
struct Sem(UnsafeCell<libc::sem_t>);
/// rt-app's barrier: `waiting` (under `m`) counts the arrivals still expected.
struct Barrier {
    m: Mutex,
    c: Cond,
    waiting: UnsafeCell<i64>,
}

enum Slot {
    Mutex(Box<Mutex>),
    Cond(Box<Cond>),
    Barrier(Box<Barrier>),
    Sem(Box<Sem>),
}

/// The run's pthread objects, indexed by [`ResourceId`].
pub(crate) struct Objects {
    slots: Box<[Slot]>,
    names: Vec<String>,
}

// SAFETY: the pthread objects are made for sharing between threads: every access goes through
// the pthread/sem functions, which synchronise, except a barrier's counter, which is only touched
// with the barrier's mutex held. The objects are boxed, so they never move while shared.
unsafe impl Send for Objects {}
// SAFETY: as above.
unsafe impl Sync for Objects {}

fn os_error(what: &str, r: i32) -> RunError {
    RunError::Setup(format!("{what}: {}", std::io::Error::from_raw_os_error(r)))
}

impl Mutex {
    /// Zeroed storage, to be initialised where it will stay ([`Mutex::init`]).
    fn storage() -> Mutex {
        // SAFETY: an all-zero pthread_mutex_t is valid storage (PTHREAD_MUTEX_INITIALIZER on
        // glibc).
        Mutex(UnsafeCell::new(unsafe { std::mem::zeroed() }))
    }

    fn new(pi: bool) -> Result<Box<Mutex>, RunError> {
        let m = Box::new(Mutex::storage());
        m.init(pi)?;
        Ok(m)
    }

    /// `pthread_mutex_init` in place: the mutex must not move afterwards.
    fn init(&self, pi: bool) -> Result<(), RunError> {
        let m = self;
        // SAFETY: `attr` is initialised before use and destroyed after; `m.0` is live storage.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            let r = libc::pthread_mutexattr_init(&mut attr);
            if r != 0 {
                return Err(os_error("pthread_mutexattr_init", r));
            }
            if pi {
                let r = libc::pthread_mutexattr_setprotocol(&mut attr, libc::PTHREAD_PRIO_INHERIT);
                if r != 0 {
                    libc::pthread_mutexattr_destroy(&mut attr);
                    return Err(os_error("priority-inheriting mutexes (global.pi_enabled)", r));
                }
            }
            let r = libc::pthread_mutex_init(m.0.get(), &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
            if r != 0 {
                return Err(os_error("pthread_mutex_init", r));
            }
        }
        Ok(())
    }

    fn ptr(&self) -> *mut libc::pthread_mutex_t {
        self.0.get()
    }
}

impl Cond {
    /// Zeroed storage, to be initialised where it will stay ([`Cond::init`]).
    fn storage() -> Cond {
        // SAFETY: an all-zero pthread_cond_t is valid storage (PTHREAD_COND_INITIALIZER).
        Cond(UnsafeCell::new(unsafe { std::mem::zeroed() }))
    }

    fn new() -> Result<Box<Cond>, RunError> {
        let c = Box::new(Cond::storage());
        c.init()?;
        Ok(c)
    }

    /// `pthread_cond_init` in place: the condition must not move afterwards.
    fn init(&self) -> Result<(), RunError> {
        // SAFETY: `self.0` is live storage; default attributes (rt-app's).
        let r = unsafe { libc::pthread_cond_init(self.0.get(), std::ptr::null()) };
        if r != 0 {
            return Err(os_error("pthread_cond_init", r));
        }
        Ok(())
    }

    fn ptr(&self) -> *mut libc::pthread_cond_t {
        self.0.get()
    }
}

impl Sem {
    fn new() -> Result<Box<Sem>, RunError> {
        // SAFETY: zeroed storage initialised in place, at its final address.
        let s = Box::new(Sem(UnsafeCell::new(unsafe { std::mem::zeroed() })));
        // SAFETY: `s.0` is live storage; shared between threads of this process, value 0.
        if unsafe { libc::sem_init(s.0.get(), 0, 0) } != 0 {
            return Err(RunError::Setup(format!(
                "sem_init: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(s)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // SAFETY: each object was initialised (a slot exists only after its init succeeded) and
        // is no longer used: slots drop with the run's shared state, after every thread ended.
        // Errors (EBUSY for an object still in use) cannot happen then and are ignored.
        unsafe {
            match self {
                Slot::Mutex(m) => {
                    libc::pthread_mutex_destroy(m.ptr());
                }
                Slot::Cond(c) => {
                    libc::pthread_cond_destroy(c.ptr());
                }
                Slot::Barrier(b) => {
                    libc::pthread_cond_destroy(b.c.ptr());
                    libc::pthread_mutex_destroy(b.m.ptr());
                }
                Slot::Sem(s) => {
                    libc::sem_destroy(s.0.get());
                }
            }
        }
    }
}

impl Objects {
    /// Creates the objects of `w.resources`.
    pub(crate) fn new(w: &Workload) -> Result<Objects, RunError> {
        let pi = w.settings.pi_enabled;
        let mut slots = Vec::with_capacity(w.resources.len());
        for r in &w.resources {
            let slot = match r.kind {
                ResourceKind::Mutex => Slot::Mutex(Mutex::new(pi)?),
                ResourceKind::Cond => Slot::Cond(Cond::new()?),
                ResourceKind::Semaphore => Slot::Sem(Sem::new()?),
                ResourceKind::Barrier { users } => {
                    let b = Box::new(Barrier {
                        m: Mutex::storage(),
                        c: Cond::storage(),
                        waiting: UnsafeCell::new(i64::from(users) - 1),
                    });
                    // Initialised in the box, where they stay.
                    b.m.init(pi)?;
                    b.c.init()?;
                    Slot::Barrier(b)
                }
            };
            slots.push(slot);
        }
        Ok(Objects {
            slots: slots.into_boxed_slice(),
            names: w.resources.iter().map(|r| r.name.clone()).collect(),
        })
    }

    fn name(&self, id: ResourceId) -> &str {
        self.names.get(id.0).map_or("?", |s| s.as_str())
    }

    fn slot(&self, id: ResourceId) -> Result<&Slot, Blocked> {
        self.slots.get(id.0).ok_or_else(wrong_kind)
    }

    fn mutex(&self, id: ResourceId) -> Result<&Mutex, Blocked> {
        match self.slot(id)? {
            Slot::Mutex(m) => Ok(m),
            _ => Err(wrong_kind()),
        }
    }

    fn cond(&self, id: ResourceId) -> Result<&Cond, Blocked> {
        match self.slot(id)? {
            Slot::Cond(c) => Ok(c),
            _ => Err(wrong_kind()),
        }
    }

    /// Releases every thread blocked in a condition, a barrier or a semaphore: called by the
    /// writer, repeatedly, once the run is stopping (a thread may have been about to block when
    /// the previous call came).
    pub(crate) fn wake_all(&self) {
        for s in self.slots.iter() {
            // SAFETY: initialised objects (see `Drop for Slot`); broadcasting a condition without
            // its mutex and posting a semaphore are allowed from any thread. A barrier's
            // condition is broadcast with its mutex held, so a thread that checked the stop flag
            // under that mutex before waiting cannot miss it.
            unsafe {
                match s {
                    Slot::Mutex(_) => {}
                    Slot::Cond(c) => {
                        libc::pthread_cond_broadcast(c.ptr());
                    }
                    Slot::Barrier(b) => {
                        libc::pthread_mutex_lock(b.m.ptr());
                        libc::pthread_cond_broadcast(b.c.ptr());
                        libc::pthread_mutex_unlock(b.m.ptr());
                    }
                    Slot::Sem(sem) => {
                        libc::sem_post(sem.0.get());
                    }
                }
            }
        }
    }
}

/// `validate` checks every event's resource kinds before the run, so this cannot happen; should
/// it anyway, the run fails rather than touch the wrong object.
#[cold]
fn wrong_kind() -> Blocked {
    Blocked::Failed(RunError::Setup(
        "internal error: an event names a resource of the wrong kind".into(),
    ))
}

/// Why an event's resources or forked thread do not fit the workload (checked before the run).
pub(crate) fn check_resources(w: &Workload, e: &Event) -> Result<(), String> {
    for (r, need) in e.needs().into_iter().flatten() {
        if let Some(problem) = w.resource_problem(r, need) {
            return Err(format!("the `{}` event names {problem}", e.rtapp_name()));
        }
    }
    match e {
        Event::Fork { thread } if w.threads.get(*thread).is_none() => {
            Err(format!("`fork` names thread {thread}, which does not exist"))
        }
        Event::MemRun { buffer, access, .. } => match w.mem_buffer_problem(*buffer, *access) {
            Some(p) => Err(format!("the `memrun` event names {p}")),
            None => Ok(()),
        },
        Event::WorkingSet(ws) => ws.validate().map_err(|e| format!("pacer_wss: {e}")),
        _ => Ok(()),
    }
}

/// Whether a thread runs `mem` or `iorun` events (it then gets a buffer).
pub(crate) fn uses_buffer(spec: &ThreadSpec) -> bool {
    spec.phases
        .iter()
        .flat_map(|p| p.events.iter())
        .any(|e| matches!(e, Event::Mem { .. } | Event::IoRun { .. }))
}

/// Whether any thread runs `iorun`.
pub(crate) fn uses_io(w: &Workload) -> bool {
    w.threads
        .iter()
        .flat_map(|t| t.phases.iter())
        .flat_map(|p| p.events.iter())
        .any(|e| matches!(e, Event::IoRun { .. }))
}

/// The file `iorun` writes to, opened for the whole run.
pub(crate) struct IoDevice {
    fd: OwnedFd,
}

/// The error of a refused or unusable `global.io_device`.
fn io_refused(path: &str, message: impl std::fmt::Display) -> RunError {
    RunError::Setting {
        key: "global.io_device",
        message: format!("{path}: {message}"),
    }
}

impl IoDevice {
    /// Opens `path` for writing without truncating it, and keeps it only if writing cannot
    /// destroy data: a character device, or a regular file that is empty (or was just created).
    pub(crate) fn open(path: &str) -> Result<IoDevice, RunError> {
        let c = CString::new(path).map_err(|_| io_refused(path, "the path contains a NUL byte"))?;
        // O_NONBLOCK so that a FIFO without a reader cannot hang the open (it is refused below
        // anyway); no O_TRUNC, ever.
        // SAFETY: `c` is a NUL-terminated path; the flags and mode are plain integers.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK,
                0o644 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(io_refused(path, std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // The checks are made on what was opened (fstat), not on the path, so a file swapped
        // between a check and the open cannot slip through.
        // SAFETY: an all-zero stat is valid storage for fstat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open; `st` is writable.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io_refused(path, std::io::Error::last_os_error()));
        }
        match st.st_mode & libc::S_IFMT {
            libc::S_IFCHR => {}
            libc::S_IFREG if st.st_size == 0 => {}
            libc::S_IFREG => {
                return Err(io_refused(
                    path,
                    format!(
                        "an existing file of {} bytes: `iorun` would overwrite its data; name a new \
                         or empty file, or a character device such as /dev/null",
                        st.st_size
                    ),
                ))
            }
            libc::S_IFBLK => {
                return Err(io_refused(
                    path,
                    "a block device: `iorun` would overwrite the data on it; name a new or empty \
                     file, or a character device such as /dev/null",
                ))
            }
            _ => {
                return Err(io_refused(
                    path,
                    "neither a character device nor a regular file (a FIFO, socket or directory); \
                     name a new or empty file, or a character device such as /dev/null",
                ))
            }
        }
        // Back to blocking writes, as rt-app's.
        // SAFETY: fcntl on an open descriptor with integer flags.
        unsafe {
            let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
        Ok(IoDevice { fd })
    }
}

/// The synchronisation state of one thread: the mutexes it holds (in the order it took them),
/// its `mem`/`iorun` buffer. Dropping it unlocks what the thread still holds, in the thread
/// itself (a mutex, and a priority-inheriting one above all, may only be unlocked by its owner).
pub(crate) struct Local<'a> {
    objects: &'a Objects,
    stop: &'a AtomicBool,
    thread: &'a str,
    held: Vec<ResourceId>,
    buf: Vec<u8>,
}

impl<'a> Local<'a> {
    /// The state of a thread that holds nothing yet; `buffer` bytes are allocated (and touched,
    /// so no page fault waits for the first `mem`) when the thread runs `mem` or `iorun`.
    pub(crate) fn new(
        objects: &'a Objects,
        stop: &'a AtomicBool,
        thread: &'a str,
        buffer: usize,
    ) -> Result<Local<'a>, RunError> {
        let mut buf = Vec::new();
        if buffer > 0 {
            buf.try_reserve_exact(buffer).map_err(|_| RunError::Setting {
                key: "global.mem_buffer_size",
                message: format!("cannot allocate {buffer} bytes for thread `{thread}`"),
            })?;
            buf.resize(buffer, 1u8);
        }
        Ok(Local {
            objects,
            stop,
            thread,
            held: Vec::with_capacity(objects.slots.len()),
            buf,
        })
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The thread's name, for messages.
    pub(crate) fn thread(&self) -> &'a str {
        self.thread
    }

    fn misuse(&self, message: String) -> Blocked {
        Blocked::Failed(RunError::BadThread {
            thread: self.thread.to_string(),
            message,
        })
    }

    /// Runs one synchronisation, `mem` or `iorun` event; `None` for the events it does not own.
    pub(crate) fn apply(&mut self, e: &Event, io: Option<&IoDevice>) -> Option<Result<(), Blocked>> {
        Some(match *e {
            Event::Lock { mutex } => self.lock(mutex),
            Event::Unlock { mutex } => self.unlock(mutex),
            Event::Wait { cond, mutex } => self.wait(cond, mutex),
            Event::Signal { cond } => self.signal(cond),
            Event::Broadcast { cond } => self.broadcast(cond),
            Event::SignalWait { cond, mutex } => self.signal_wait(cond, mutex),
            Event::Suspend { cond, mutex } => self.suspend(cond, mutex),
            Event::Resume { cond, mutex } => self.resume(cond, mutex),
            Event::Barrier { barrier } => self.barrier(barrier),
            Event::SemPost { sem } => self.sem_post(sem),
            Event::SemWait { sem } => self.sem_wait(sem),
            Event::Mem { bytes } => self.mem(bytes),
            Event::IoRun { bytes } => self.iorun(io, bytes),
            _ => return None,
        })
    }

    /// `pthread_mutex_lock`, in slices so that a stopping run never waits for ever.
    pub(crate) fn lock(&mut self, id: ResourceId) -> Result<(), Blocked> {
        if self.held.contains(&id) {
            return Err(self.misuse(format!(
                "locks mutex `{}`, which it already holds (under rt-app the thread would deadlock)",
                self.objects.name(id)
            )));
        }
        let m = self.objects.mutex(id)?.ptr();
        loop {
            let deadline = realtime_after(LOCK_SLICE_NS);
            // SAFETY: `m` is an initialised mutex that outlives the run's threads.
            let r = unsafe { libc::pthread_mutex_timedlock(m, &deadline) };
            match r {
                0 => {
                    self.held.push(id);
                    // Taken while the run stops (from a thread that ended): the thread ends
                    // too, and gives it back.
                    return if self.stopping() {
                        Err(Blocked::Stopped)
                    } else {
                        Ok(())
                    };
                }
                libc::ETIMEDOUT | libc::EINTR => {
                    if self.stopping() {
                        return Err(Blocked::Stopped);
                    }
                }
                e => {
                    return Err(self.misuse(format!(
                        "locking mutex `{}`: {}",
                        self.objects.name(id),
                        std::io::Error::from_raw_os_error(e)
                    )))
                }
            }
        }
    }

    /// `pthread_mutex_unlock` of a mutex the thread holds.
    pub(crate) fn unlock(&mut self, id: ResourceId) -> Result<(), Blocked> {
        let Some(at) = self.held.iter().rposition(|&h| h == id) else {
            return Err(self.misuse(format!(
                "unlocks mutex `{}`, which it does not hold",
                self.objects.name(id)
            )));
        };
        let m = self.objects.mutex(id)?.ptr();
        self.held.remove(at);
        // SAFETY: initialised mutex, held by this thread.
        unsafe {
            libc::pthread_mutex_unlock(m);
        }
        Ok(())
    }

    fn require_held(&self, mutex: ResourceId, event: &str) -> Result<(), Blocked> {
        if self.held.contains(&mutex) {
            Ok(())
        } else {
            Err(self.misuse(format!(
                "`{event}` with mutex `{}`, which it does not hold (lock it first)",
                self.objects.name(mutex)
            )))
        }
    }

    /// `pthread_cond_wait(cond, mutex)` once, as rt-app (a spurious wake-up ends it too); the
    /// thread holds `mutex` before and after.
    fn cond_wait(&mut self, cond: ResourceId, mutex: ResourceId) -> Result<(), Blocked> {
        if self.stopping() {
            return Err(Blocked::Stopped);
        }
        let (c, m) = (self.objects.cond(cond)?.ptr(), self.objects.mutex(mutex)?.ptr());
        // SAFETY: initialised objects; the thread holds `mutex` (checked by the callers).
        unsafe {
            libc::pthread_cond_wait(c, m);
        }
        if self.stopping() {
            return Err(Blocked::Stopped);
        }
        Ok(())
    }

    /// rt-app `wait`.
    pub(crate) fn wait(&mut self, cond: ResourceId, mutex: ResourceId) -> Result<(), Blocked> {
        self.require_held(mutex, "wait")?;
        self.cond_wait(cond, mutex)
    }

    /// rt-app `signal`.
    pub(crate) fn signal(&mut self, cond: ResourceId) -> Result<(), Blocked> {
        let c = self.objects.cond(cond)?.ptr();
        // SAFETY: initialised condition.
        unsafe {
            libc::pthread_cond_signal(c);
        }
        Ok(())
    }

    /// rt-app `broad`.
    pub(crate) fn broadcast(&mut self, cond: ResourceId) -> Result<(), Blocked> {
        let c = self.objects.cond(cond)?.ptr();
        // SAFETY: initialised condition.
        unsafe {
            libc::pthread_cond_broadcast(c);
        }
        Ok(())
    }

    /// rt-app `sync`: signal, then wait, with the mutex held throughout.
    pub(crate) fn signal_wait(&mut self, cond: ResourceId, mutex: ResourceId) -> Result<(), Blocked> {
        self.require_held(mutex, "sync")?;
        self.signal(cond)?;
        self.cond_wait(cond, mutex)
    }

    /// rt-app `suspend`: lock, wait, unlock.
    pub(crate) fn suspend(&mut self, cond: ResourceId, mutex: ResourceId) -> Result<(), Blocked> {
        self.lock(mutex)?;
        let waited = self.cond_wait(cond, mutex);
        self.unlock(mutex)?;
        waited
    }

    /// rt-app `resume`: lock, broadcast, unlock.
    pub(crate) fn resume(&mut self, cond: ResourceId, mutex: ResourceId) -> Result<(), Blocked> {
        self.lock(mutex)?;
        let b = self.broadcast(cond);
        self.unlock(mutex)?;
        b
    }

    /// rt-app `barrier`: the last of the users to arrive wakes the others.
    pub(crate) fn barrier(&mut self, id: ResourceId) -> Result<(), Blocked> {
        let Slot::Barrier(b) = self.objects.slot(id)? else {
            return Err(wrong_kind());
        };
        // SAFETY: initialised objects; `waiting` is only read and written with `b.m` held. The
        // barrier's mutex is never held across anything but the condition wait (which releases
        // it), so a plain lock cannot block for long.
        unsafe {
            libc::pthread_mutex_lock(b.m.ptr());
            // Checked under the mutex, which the writer takes to broadcast at the stop: either it
            // broadcast before (stop seen here) or it will after this thread waits.
            if self.stopping() {
                libc::pthread_mutex_unlock(b.m.ptr());
                return Err(Blocked::Stopped);
            }
            let waiting = b.waiting.get();
            if *waiting <= 0 {
                libc::pthread_cond_broadcast(b.c.ptr());
            } else {
                *waiting -= 1;
                libc::pthread_cond_wait(b.c.ptr(), b.m.ptr());
                *waiting += 1;
            }
            libc::pthread_mutex_unlock(b.m.ptr());
        }
        if self.stopping() {
            return Err(Blocked::Stopped);
        }
        Ok(())
    }

    /// `sem_post`.
    pub(crate) fn sem_post(&mut self, id: ResourceId) -> Result<(), Blocked> {
        let Slot::Sem(s) = self.objects.slot(id)? else {
            return Err(wrong_kind());
        };
        // SAFETY: initialised semaphore.
        unsafe {
            libc::sem_post(s.0.get());
        }
        Ok(())
    }

    /// `sem_wait`, interrupted by the run's stop (a kick makes it return EINTR; the writer also
    /// posts every semaphore).
    pub(crate) fn sem_wait(&mut self, id: ResourceId) -> Result<(), Blocked> {
        let Slot::Sem(s) = self.objects.slot(id)? else {
            return Err(wrong_kind());
        };
        loop {
            if self.stopping() {
                return Err(Blocked::Stopped);
            }
            // SAFETY: initialised semaphore.
            if unsafe { libc::sem_wait(s.0.get()) } == 0 {
                return if self.stopping() {
                    Err(Blocked::Stopped)
                } else {
                    Ok(())
                };
            }
            // EINTR (a kick or a stray signal): check the stop and wait again.
        }
    }

    /// rt-app `mem`: `bytes` written into the buffer from its start, a buffer's size at a time.
    pub(crate) fn mem(&mut self, bytes: u64) -> Result<(), Blocked> {
        let mut left = bytes;
        while left > 0 {
            let n = (left.min(self.buf.len() as u64)) as usize;
            if n == 0 {
                break;
            }
            // The byte changes from one call to the next so no write is redundant.
            let v = self.buf[0].wrapping_add(1);
            self.buf[..n].fill(v);
            std::hint::black_box(&mut self.buf);
            left -= n as u64;
            if self.stopping() {
                return Err(Blocked::Stopped);
            }
        }
        Ok(())
    }

    /// rt-app `iorun`: `bytes` from the buffer written to the I/O device, a buffer's size at a
    /// time.
    pub(crate) fn iorun(&mut self, dev: Option<&IoDevice>, bytes: u64) -> Result<(), Blocked> {
        let Some(dev) = dev else {
            return Ok(());
        };
        let mut left = bytes;
        while left > 0 {
            let n = (left.min(self.buf.len() as u64)) as usize;
            if n == 0 {
                break;
            }
            // SAFETY: `buf[..n]` is initialised memory of this thread; `fd` is open for writing.
            let r = unsafe { libc::write(dev.fd.as_raw_fd(), self.buf.as_ptr().cast(), n) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) && !self.stopping() {
                    continue;
                }
                if self.stopping() {
                    return Err(Blocked::Stopped);
                }
                return Err(Blocked::Failed(RunError::Setting {
                    key: "global.io_device",
                    message: format!("`iorun` of thread `{}`: write failed: {e}", self.thread),
                }));
            }
            left = left.saturating_sub(r as u64);
            if self.stopping() {
                return Err(Blocked::Stopped);
            }
        }
        Ok(())
    }
}

impl Drop for Local<'_> {
    fn drop(&mut self) {
        while let Some(id) = self.held.pop() {
            if let Ok(m) = self.objects.mutex(id) {
                // SAFETY: a mutex this thread locked and still holds.
                unsafe {
                    libc::pthread_mutex_unlock(m.ptr());
                }
            }
        }
    }
}

/// CLOCK_REALTIME `ns` from now, the clock `pthread_mutex_timedlock` measures.
fn realtime_after(ns: u64) -> libc::timespec {
    let t = crate::sys::clock_ns(libc::CLOCK_REALTIME).saturating_add(ns);
    libc::timespec {
        tv_sec: (t / 1_000_000_000) as libc::time_t,
        tv_nsec: (t % 1_000_000_000) as libc::c_long,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacer_workload::Resource;

    fn resources(kinds: &[(&str, ResourceKind)]) -> Workload {
        Workload {
            resources: kinds
                .iter()
                .map(|(n, k)| Resource {
                    name: n.to_string(),
                    kind: *k,
                })
                .collect(),
            ..Workload::default()
        }
    }

    #[test]
    fn misuse_is_an_error_and_held_locks_are_released_on_drop() {
        let w = resources(&[("m", ResourceKind::Mutex), ("c", ResourceKind::Cond)]);
        let objects = Objects::new(&w).unwrap();
        let stop = AtomicBool::new(false);
        let (m, c) = (ResourceId(0), ResourceId(1));
        {
            let mut l = Local::new(&objects, &stop, "t", 0).unwrap();
            assert!(matches!(l.unlock(m), Err(Blocked::Failed(_))));
            assert!(matches!(l.wait(c, m), Err(Blocked::Failed(_))));
            l.lock(m).unwrap();
            let Err(Blocked::Failed(e)) = l.lock(m) else {
                panic!("a second lock must fail")
            };
            assert!(e.to_string().contains("already holds"), "{e}");
            // Dropped while holding `m`.
        }
        // Another thread can take it: it was released.
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut l = Local::new(&objects, &stop, "u", 0).unwrap();
                l.lock(m).unwrap();
                l.unlock(m).unwrap();
            });
        });
    }

    #[test]
    fn a_stopping_run_frees_lock_cond_barrier_and_sem_waiters() {
        let w = resources(&[
            ("m", ResourceKind::Mutex),
            ("c", ResourceKind::Cond),
            ("b", ResourceKind::Barrier { users: 3 }),
            ("s", ResourceKind::Semaphore),
            ("m2", ResourceKind::Mutex),
        ]);
        let objects = Objects::new(&w).unwrap();
        let stop = AtomicBool::new(false);
        let (m, c, b, s, m2) = (
            ResourceId(0),
            ResourceId(1),
            ResourceId(2),
            ResourceId(3),
            ResourceId(4),
        );
        let holder_ready = std::sync::Barrier::new(2);
        std::thread::scope(|sc| {
            let mut hs = Vec::new();
            // Holds m2 for ever (until the stop), so a locker of m2 waits.
            hs.push(sc.spawn(|| {
                let mut l = Local::new(&objects, &stop, "holder", 0).unwrap();
                l.lock(m2).unwrap();
                holder_ready.wait();
                l.lock(m).unwrap();
                l.wait(c, m)
            }));
            holder_ready.wait();
            hs.push(sc.spawn(|| Local::new(&objects, &stop, "locker", 0).unwrap().lock(m2)));
            hs.push(sc.spawn(|| Local::new(&objects, &stop, "barrier", 0).unwrap().barrier(b)));
            hs.push(sc.spawn(|| Local::new(&objects, &stop, "sem", 0).unwrap().sem_wait(s)));
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(hs.iter().all(|h| !h.is_finished()), "all blocked");
            let t = std::time::Instant::now();
            stop.store(true, Ordering::Relaxed);
            while !hs.iter().all(|h| h.is_finished()) {
                objects.wake_all();
                std::thread::sleep(std::time::Duration::from_millis(5));
                assert!(
                    t.elapsed() < std::time::Duration::from_secs(2),
                    "released promptly"
                );
            }
            for h in hs {
                assert!(matches!(h.join().unwrap(), Err(Blocked::Stopped)));
            }
        });
    }

    #[test]
    fn the_barrier_releases_when_its_users_have_all_arrived() {
        let w = resources(&[("b", ResourceKind::Barrier { users: 3 })]);
        let objects = Objects::new(&w).unwrap();
        let stop = AtomicBool::new(false);
        let passed = std::sync::atomic::AtomicU32::new(0);
        std::thread::scope(|sc| {
            let h: Vec<_> = (0..2)
                .map(|_| {
                    sc.spawn(|| {
                        Local::new(&objects, &stop, "w", 0)
                            .unwrap()
                            .barrier(ResourceId(0))
                            .unwrap();
                        passed.fetch_add(1, Ordering::Relaxed);
                    })
                })
                .collect();
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert_eq!(passed.load(Ordering::Relaxed), 0, "2 of 3 users: nobody passes");
            Local::new(&objects, &stop, "last", 0)
                .unwrap()
                .barrier(ResourceId(0))
                .unwrap();
            for h in h {
                h.join().unwrap();
            }
            assert_eq!(passed.load(Ordering::Relaxed), 2);
        });
    }

    #[test]
    fn io_device_refuses_what_would_lose_data() {
        let dir = tempfile::tempdir().unwrap();
        // A character device and a new file are fine; the new file is created, not truncated.
        assert!(IoDevice::open("/dev/null").is_ok());
        let new = dir.path().join("new");
        assert!(IoDevice::open(new.to_str().unwrap()).is_ok());
        assert_eq!(std::fs::metadata(&new).unwrap().len(), 0);
        // An empty existing file is fine.
        assert!(IoDevice::open(new.to_str().unwrap()).is_ok());
        // A non-empty file is refused and left intact.
        let full = dir.path().join("full");
        std::fs::write(&full, b"precious").unwrap();
        let Err(e) = IoDevice::open(full.to_str().unwrap()) else {
            panic!("a non-empty file must be refused")
        };
        let msg = e.to_string();
        assert!(
            msg.contains("global.io_device") && msg.contains("8 bytes"),
            "{msg}"
        );
        assert_eq!(std::fs::read(&full).unwrap(), b"precious");
        // A directory is refused.
        let Err(e) = IoDevice::open(dir.path().to_str().unwrap()) else {
            panic!("a directory must be refused")
        };
        assert!(e.to_string().contains("global.io_device"), "{e}");
    }

    #[test]
    fn mem_and_iorun_write_through_the_buffer() {
        let w = Workload::default();
        let objects = Objects::new(&w).unwrap();
        let stop = AtomicBool::new(false);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("io");
        let dev = IoDevice::open(path.to_str().unwrap()).unwrap();
        let mut l = Local::new(&objects, &stop, "t", 1000).unwrap();
        l.mem(2500).unwrap();
        // 2500 bytes: two whole buffers and 500 bytes, all from the start.
        l.iorun(Some(&dev), 2500).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2500);
    }
}
