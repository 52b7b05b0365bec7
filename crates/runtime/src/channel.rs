//! Preallocated, bounded, multi-sender channels that deliver in sender-priority order: RTDroid's
//! real-time message-passing channel (Yan et al., ACM TECS 17(6) 2019, §3.1.3 and §3.2.1), for
//! components on real-time threads.
//!
//! # What RTDroid asks for, and how it is met here
//!
//! * **One receiver, bounded in-flight messages, preallocated.** [`channel`] allocates every
//!   message slot, the per-priority queues and the per-sender counters at once; [`Sender::send`],
//!   [`Receiver::try_recv`], [`Receiver::recv_timeout`] and [`Receiver::drain`] never allocate
//!   (tests/channel.rs proves it with a counting allocator).
//! * **Fixed-size messages.** RTDroid exchanges "only primitive arrays (or fixed-length
//!   byte-buffers)". Here the message is any `T: Copy`: `Copy` rules out owned heap data (a `Copy`
//!   type cannot hold a `Box` or `Vec`), so a message is a fixed-size bit copy, moving it in and out
//!   of a slot is a `memcpy` of `size_of::<T>()` bytes, and an evicted or abandoned message needs no
//!   destructor. A byte message of the manifest's size is `[u8; N]`; a typed struct of numbers is
//!   the same thing with names, checked by the compiler instead of by parsing. The copy happens
//!   inside the critical section, so large payloads (RTDroid's bulk transfers) should travel as an
//!   index into a buffer pool preallocated elsewhere.
//! * **Delivery in sender-priority order.** Every sender has a fixed [`Priority`], its component's
//!   (larger is more urgent). The receiver gets the pending message of the highest sender priority
//!   first, and among equal priorities the oldest first; each accepted message carries a sequence
//!   number ([`Envelope::seq`], increasing in acceptance order) that makes this order visible.
//! * **A defined overflow rule with notice** ([`Overflow`]), chosen per channel, with per-channel
//!   and per-sender [`Counters`]. RTDroid's steal rule notifies the low-priority sender whose
//!   message was dropped; here the sender whose send evicted a message gets the victim back
//!   ([`Sent::Evicted`]), and the victim's sender sees it in [`Sender::take_evictions`].
//!
//! # Layout: constant-time operations
//!
//! The distinct sender priorities are ranked at creation into at most [`MAX_PRIORITY_LEVELS`]
//! levels. Each level is a FIFO list threaded through one shared pool of `capacity` slots (an
//! index `next` per slot, a free list for the rest), and a 64-bit mask marks the non-empty levels.
//! The highest pending message is the head of the level of the mask's highest bit, the oldest of
//! the lowest priority is the head of its lowest bit: send, receive and eviction are each a few
//! index updates, independent of the capacity and of how many messages are pending, which is
//! what bounds the critical section. A binary heap would give the same order in O(log n), but it
//! cannot find the oldest lowest-priority message without a second structure.
//!
//! # Locking
//!
//! Senders and the receiver are on different real-time threads and share the queue under one
//! `pthread_mutex_t` with `PTHREAD_PRIO_INHERIT`, held only for the O(1) queue update and the copy
//! of one message. Priority inheritance is what bounds a high-priority sender's wait: if a
//! low-priority holder is preempted by a medium-priority thread, the kernel runs the holder at the
//! waiter's priority (or with its deadline, for SCHED_DEADLINE) until it unlocks. `std::sync::Mutex`
//! (a plain futex lock on Linux) and `parking_lot` have no priority inheritance, so there the
//! high-priority thread would wait for as long as the medium-priority one runs: unbounded priority
//! inversion; std's lock also poisons, turning a panic elsewhere into a panic here. A lock-free
//! design was not chosen: per-level lock-free rings can keep FIFO within a level, but a shared
//! capacity, the choice of a victim across levels and exact counters need several atomic steps
//! that other senders observe half-done, and the uncontended PI lock is already a single atomic
//! compare-and-swap in user space (the kernel is entered only under contention).
//!
//! The receiver sleeps on a futex word with an absolute CLOCK_MONOTONIC deadline, not on a
//! condition variable; see `sys.rs` for why. A send therefore never blocks beyond the bounded
//! critical section: it never waits for space (the overflow rule decides at once) and wakes the
//! receiver, with one `FUTEX_WAKE`, only when the receiver announced that it sleeps.
//!
//! # Counting
//!
//! Every send is counted once as `sent`, and ends as exactly one of `dropped` (refused, the
//! message returned to the caller), `evicted` (accepted, then pushed out by the overflow rule),
//! `delivered`, or still pending: `sent = delivered + dropped + evicted + pending` holds for the
//! channel and for each sender at every instant, because all counters change inside the critical
//! section and a [`Monitor`] reads them under it.

mod sys;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use sys::{PiGuard, PiMutex, Wait};

/// A sender's priority: its component's. Larger is more urgent, as for SCHED_FIFO.
pub type Priority = u32;

/// At most this many distinct sender priorities on one channel: one bit each in the level mask.
pub const MAX_PRIORITY_LEVELS: usize = 64;

/// At most this many message slots on one channel (slot indices are `u32`, one value is the
/// list terminator).
pub const MAX_CAPACITY: usize = (u32::MAX - 1) as usize;

/// End of a slot list.
const NIL: u32 = u32::MAX;

/// Which message gives way when a send finds the channel full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Overflow {
    /// The send fails and hands the message back ([`SendError::Dropped`]): what is queued stays.
    /// For commands and events, where the first ones matter.
    DropNewest,
    /// The oldest message of the lowest pending priority is evicted to make room, whatever the
    /// sender's priority, and returned to the sender as [`Sent::Evicted`]. For samples, where the
    /// newest data matters.
    DropOldest,
    /// RTDroid's steal (§3.2.1; Fig. 9's `priority&oldest` drop rule, the manifest's
    /// `priority-oldest`): a sender whose priority is higher than the lowest pending one takes the
    /// slot of the oldest message of that lowest priority ([`Sent::Evicted`]); a sender with no
    /// lower-priority message to steal from drops its own ([`SendError::Dropped`]). A message is
    /// only ever lost to a strictly more urgent one.
    StealLowest,
}

/// Identifies a sender of one channel: its index in the priority list given to [`channel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SenderId(pub u32);

/// A failed system call: which one and its errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub struct OsError {
    /// The call, as written in C.
    pub call: &'static str,
    /// Its errno.
    pub errno: i32,
}

impl std::fmt::Display for OsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} failed: {}",
            self.call,
            std::io::Error::from_raw_os_error(self.errno)
        )
    }
}

impl OsError {
    fn new(call: &'static str, errno: i32) -> OsError {
        OsError { call, errno }
    }

    /// From `errno`; `std::io::Error::last_os_error` reads it without allocating.
    fn last(call: &'static str) -> OsError {
        OsError {
            call,
            errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        }
    }
}

/// Why [`channel`] made no channel.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ChannelError {
    #[error("channel `{name}`: the capacity must be at least 1 message")]
    ZeroCapacity { name: String },
    #[error("channel `{name}`: a capacity of {capacity} messages is over the maximum of {MAX_CAPACITY}")]
    CapacityTooLarge { name: String, capacity: usize },
    #[error("channel `{name}`: no sender (give one priority per sender)")]
    NoSenders { name: String },
    #[error("channel `{name}`: {senders} senders is more than a channel can number")]
    TooManySenders { name: String, senders: usize },
    #[error(
        "channel `{name}`: its senders have {levels} distinct priorities, at most {MAX_PRIORITY_LEVELS} are supported"
    )]
    TooManyPriorities { name: String, levels: usize },
    #[error("channel `{name}`: cannot allocate {capacity} message slots of {slot_bytes} bytes")]
    OutOfMemory {
        name: String,
        capacity: usize,
        slot_bytes: usize,
    },
    #[error("channel `{name}`: {source}")]
    Os { name: String, source: OsError },
}

/// A message as the receiver gets it: the payload and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope<T> {
    pub message: T,
    pub sender: SenderId,
    /// The sender's priority.
    pub priority: Priority,
    /// Acceptance order on this channel, from 0: among equal priorities, delivery follows it.
    pub seq: u64,
}

/// A successful send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent<T> {
    /// Queued with this sequence number.
    Queued { seq: u64 },
    /// Queued with sequence number `seq` after the overflow rule evicted `victim`, which is
    /// handed back here (and counted as evicted for its sender).
    Evicted { seq: u64, victim: Envelope<T> },
}

/// A failed send: the message is handed back and counted as dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum SendError<T> {
    /// The channel was full and its overflow rule kept the pending messages.
    #[error("the channel is full: message dropped")]
    Dropped(T),
    /// The receiver is gone.
    #[error("the receiver is gone: message dropped")]
    Disconnected(T),
    /// The lock could not be taken (not counted: the counters are under that lock).
    #[error("message not sent: {source}")]
    Os { message: T, source: OsError },
}

impl<T> SendError<T> {
    /// The message that was not sent.
    pub fn into_message(self) -> T {
        match self {
            SendError::Dropped(m) | SendError::Disconnected(m) | SendError::Os { message: m, .. } => m,
        }
    }
}

/// Why a receive returned no message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum RecvError {
    /// Nothing pending ([`Receiver::try_recv`]).
    #[error("no message pending")]
    Empty,
    /// Nothing arrived before the timeout ([`Receiver::recv_timeout`]).
    #[error("no message before the timeout")]
    Timeout,
    /// Nothing pending and every sender is gone: nothing will come.
    #[error("no message pending and every sender is gone")]
    Disconnected,
    #[error(transparent)]
    Os(#[from] OsError),
}

/// What happened to the messages of one sender, or of the whole channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Sends attempted.
    pub sent: u64,
    /// Messages handed to the receiver.
    pub delivered: u64,
    /// Sends refused (channel full under the overflow rule, or receiver gone).
    pub dropped: u64,
    /// Messages accepted, then evicted by the overflow rule before delivery.
    pub evicted: u64,
}

impl Counters {
    /// Accepted and neither delivered nor evicted yet.
    pub fn pending(&self) -> u64 {
        self.sent
            .saturating_sub(self.delivered + self.dropped + self.evicted)
    }
}

/// One sender's counters in a [`Monitor::sender_stats`] report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderStats {
    pub id: SenderId,
    pub priority: Priority,
    pub counters: Counters,
}

/// A consistent snapshot of a channel's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelStats {
    pub capacity: usize,
    pub overflow: Overflow,
    /// Messages queued now.
    pub pending: usize,
    /// All senders together.
    pub totals: Counters,
}

/// Creates a channel named `name` (for errors and reports) holding at most `capacity` messages,
/// with one sender per entry of `sender_priorities`, in that order ([`SenderId`] is the index).
/// Everything the channel will ever use is allocated here.
pub fn channel<T: Copy + Send>(
    name: &str,
    capacity: usize,
    overflow: Overflow,
    sender_priorities: &[Priority],
) -> Result<(Vec<Sender<T>>, Receiver<T>), ChannelError> {
    let named = || name.to_string();
    if capacity == 0 {
        return Err(ChannelError::ZeroCapacity { name: named() });
    }
    if capacity > MAX_CAPACITY {
        return Err(ChannelError::CapacityTooLarge {
            name: named(),
            capacity,
        });
    }
    if sender_priorities.is_empty() {
        return Err(ChannelError::NoSenders { name: named() });
    }
    if u32::try_from(sender_priorities.len()).is_err() {
        return Err(ChannelError::TooManySenders {
            name: named(),
            senders: sender_priorities.len(),
        });
    }
    let mut levels = sender_priorities.to_vec();
    levels.sort_unstable();
    levels.dedup();
    if levels.len() > MAX_PRIORITY_LEVELS {
        return Err(ChannelError::TooManyPriorities {
            name: named(),
            levels: levels.len(),
        });
    }
    let senders: Box<[SenderSlot]> = sender_priorities
        .iter()
        .map(|p| SenderSlot {
            priority: *p,
            // Found: `levels` holds every priority. The fallback is never taken.
            level: levels.binary_search(p).unwrap_or(0) as u8,
            counters: Counters::default(),
        })
        .collect();

    let mut slots = Vec::new();
    if slots.try_reserve_exact(capacity).is_err() {
        return Err(ChannelError::OutOfMemory {
            name: named(),
            capacity,
            slot_bytes: std::mem::size_of::<Slot<T>>(),
        });
    }
    // Every slot starts on the free list, in index order.
    for i in 0..capacity {
        let next = if i + 1 < capacity { (i + 1) as u32 } else { NIL };
        slots.push(Slot {
            message: None,
            sender: 0,
            seq: 0,
            next,
        });
    }
    let state = State {
        slots: slots.into_boxed_slice(),
        free: 0,
        len: 0,
        heads: vec![NIL; levels.len()].into_boxed_slice(),
        tails: vec![NIL; levels.len()].into_boxed_slice(),
        nonempty: 0,
        next_seq: 0,
        overflow,
        totals: Counters::default(),
        senders,
        senders_alive: sender_priorities.len(),
        receiver_alive: true,
        receiver_waiting: false,
    };
    let lock = PiMutex::new(state).map_err(|source| ChannelError::Os {
        name: named(),
        source,
    })?;
    let shared = Arc::new(Shared {
        name: name.into(),
        capacity,
        overflow,
        senders: sender_priorities.len(),
        state: lock,
        wake: AtomicU32::new(0),
    });
    let senders = sender_priorities
        .iter()
        .enumerate()
        .map(|(i, p)| Sender {
            shared: shared.clone(),
            id: i as u32,
            priority: *p,
            evictions_seen: 0,
        })
        .collect();
    Ok((senders, Receiver { shared }))
}

/// One message slot of the pool. `message` is `Some` exactly while the slot is on a level list.
struct Slot<T> {
    message: Option<T>,
    sender: u32,
    seq: u64,
    /// Next slot of the same level list, or of the free list.
    next: u32,
}

struct SenderSlot {
    priority: Priority,
    /// Rank of `priority` among the channel's distinct priorities, 0 the lowest.
    level: u8,
    counters: Counters,
}

/// Everything that changes, under the PI mutex.
struct State<T> {
    slots: Box<[Slot<T>]>,
    /// Head of the free list.
    free: u32,
    len: usize,
    /// Oldest and newest slot of each level.
    heads: Box<[u32]>,
    tails: Box<[u32]>,
    /// Bit `l` set when level `l` has a message.
    nonempty: u64,
    next_seq: u64,
    overflow: Overflow,
    totals: Counters,
    senders: Box<[SenderSlot]>,
    senders_alive: usize,
    receiver_alive: bool,
    /// The receiver sleeps (or is about to) on `Shared::wake` and must be woken by the next send.
    receiver_waiting: bool,
}

impl<T: Copy> State<T> {
    /// Counts a send by `sender` and queues `message` or applies the overflow rule. `Err` hands
    /// back a dropped message.
    fn push(&mut self, sender: u32, message: T) -> Result<Sent<T>, T> {
        let s = sender as usize;
        let Some(level) = self.senders.get(s).map(|x| x.level) else {
            return Err(message);
        };
        self.count(s, |c| c.sent += 1);
        let mut victim = None;
        if self.len == self.slots.len() {
            let lowest = self.nonempty.trailing_zeros() as u8;
            let steal = match self.overflow {
                Overflow::DropNewest => false,
                Overflow::DropOldest => true,
                Overflow::StealLowest => lowest < level,
            };
            if !steal {
                self.count(s, |c| c.dropped += 1);
                return Err(message);
            }
            victim = self.pop_level(lowest);
            if let Some(v) = &victim {
                self.count(v.sender.0 as usize, |c| c.evicted += 1);
            }
        }
        let idx = self.free;
        let Some(slot) = self.slots.get_mut(idx as usize) else {
            // Unreachable: a full channel made room above, so the free list has a slot.
            self.count(s, |c| c.dropped += 1);
            return Err(message);
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        self.free = slot.next;
        *slot = Slot {
            message: Some(message),
            sender,
            seq,
            next: NIL,
        };
        let l = usize::from(level);
        match self.tails[l] {
            NIL => self.heads[l] = idx,
            tail => self.slots[tail as usize].next = idx,
        }
        self.tails[l] = idx;
        self.nonempty |= 1 << level;
        self.len += 1;
        Ok(match victim {
            Some(victim) => Sent::Evicted { seq, victim },
            None => Sent::Queued { seq },
        })
    }

    /// The oldest message of the highest pending priority, counted as delivered.
    fn pop_highest(&mut self) -> Option<Envelope<T>> {
        if self.nonempty == 0 {
            return None;
        }
        let level = 63 - self.nonempty.leading_zeros() as u8;
        let env = self.pop_level(level)?;
        self.count(env.sender.0 as usize, |c| c.delivered += 1);
        Some(env)
    }

    /// Unlinks the head of `level`'s list and returns its slot to the free list. Counts nothing.
    fn pop_level(&mut self, level: u8) -> Option<Envelope<T>> {
        let l = usize::from(level);
        let idx = *self.heads.get(l)?;
        let slot = self.slots.get_mut(idx as usize)?;
        let message = slot.message.take()?;
        let (sender, seq, next) = (slot.sender, slot.seq, slot.next);
        slot.next = self.free;
        self.free = idx;
        self.heads[l] = next;
        if next == NIL {
            self.tails[l] = NIL;
            self.nonempty &= !(1 << level);
        }
        self.len -= 1;
        let priority = self.senders.get(sender as usize).map_or(0, |s| s.priority);
        Some(Envelope {
            message,
            sender: SenderId(sender),
            priority,
            seq,
        })
    }

    /// Applies `f` to the counters of sender `s` and to the channel's.
    fn count(&mut self, s: usize, f: impl Fn(&mut Counters)) {
        if let Some(sender) = self.senders.get_mut(s) {
            f(&mut sender.counters);
        }
        f(&mut self.totals);
    }
}

struct Shared<T> {
    name: Box<str>,
    capacity: usize,
    overflow: Overflow,
    /// Number of senders made at creation.
    senders: usize,
    state: PiMutex<State<T>>,
    /// The receiver's futex word: bumped (under the lock) by a send that wakes it, so a wake
    /// between the receiver's look at the queue and its sleep makes the sleep return at once.
    wake: AtomicU32,
}

impl<T> Shared<T> {
    /// Unlocks, and wakes the receiver if it sleeps and `news` (a message, or the last sender
    /// gone) happened in this critical section.
    fn unlock_and_wake(&self, mut state: PiGuard<'_, State<T>>, news: bool) {
        let wake = news && state.receiver_waiting;
        if wake {
            state.receiver_waiting = false;
            self.wake.fetch_add(1, Ordering::Release);
        }
        drop(state);
        // After the unlock, so that the receiver does not wake only to block on the mutex.
        if wake {
            sys::futex_wake(&self.wake);
        }
    }
}

/// The sending end of one sender (one component) of a channel. Not `Clone`: the channel counts
/// per sender, and RTDroid's sender is a component with one priority.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
    id: u32,
    priority: Priority,
    /// Evictions of this sender's messages already reported by [`Sender::take_evictions`].
    evictions_seen: u64,
}

impl<T: Copy + Send> Sender<T> {
    /// Queues `message`, or applies the channel's overflow rule if it is full. Never waits for
    /// space and never allocates; the only wait is for the PI mutex, held by others only for a
    /// constant-time queue update.
    pub fn send(&self, message: T) -> Result<Sent<T>, SendError<T>> {
        let mut state = match self.shared.state.lock() {
            Ok(s) => s,
            Err(source) => return Err(SendError::Os { message, source }),
        };
        if !state.receiver_alive {
            state.count(self.id as usize, |c| {
                c.sent += 1;
                c.dropped += 1;
            });
            return Err(SendError::Disconnected(message));
        }
        let result = state.push(self.id, message).map_err(SendError::Dropped);
        self.shared.unlock_and_wake(state, result.is_ok());
        result
    }

    pub fn id(&self) -> SenderId {
        SenderId(self.id)
    }

    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// This sender's counters now.
    pub fn stats(&self) -> Result<Counters, OsError> {
        let state = self.shared.state.lock()?;
        Ok(state
            .senders
            .get(self.id as usize)
            .map_or_else(Counters::default, |s| s.counters))
    }

    /// How many of this sender's messages were evicted since the last call: RTDroid's notice to
    /// a sender whose message was stolen, polled, as RTDroid's components poll for their
    /// `AsynchronousInterruptedException`s around each release.
    pub fn take_evictions(&mut self) -> Result<u64, OsError> {
        let evicted = self.stats()?.evicted;
        let new = evicted.saturating_sub(self.evictions_seen);
        self.evictions_seen = evicted;
        Ok(new)
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        // If the lock fails the receiver is not told; it still returns at its timeout.
        let Ok(mut state) = self.shared.state.lock() else {
            return;
        };
        state.senders_alive = state.senders_alive.saturating_sub(1);
        let last = state.senders_alive == 0;
        self.shared.unlock_and_wake(state, last);
    }
}

/// The receiving end: one per channel, as in RTDroid. Receiving takes `&mut self`, so only one
/// thread at a time can sleep on the channel, which is what the single-waiter wake relies on.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T: Copy + Send> Receiver<T> {
    /// The most urgent pending message (highest sender priority, oldest first), or
    /// [`RecvError::Empty`] / [`RecvError::Disconnected`] at once.
    pub fn try_recv(&mut self) -> Result<Envelope<T>, RecvError> {
        let mut state = self.shared.state.lock()?;
        match state.pop_highest() {
            Some(env) => Ok(env),
            None if state.senders_alive == 0 => Err(RecvError::Disconnected),
            None => Err(RecvError::Empty),
        }
    }

    /// As [`Receiver::try_recv`], but sleeps until a message arrives, every sender is gone, or
    /// `timeout` has passed on CLOCK_MONOTONIC ([`RecvError::Timeout`]).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Envelope<T>, RecvError> {
        let deadline = sys::deadline_after(timeout)?;
        loop {
            let mut state = self.shared.state.lock()?;
            if let Some(env) = state.pop_highest() {
                return Ok(env);
            }
            if state.senders_alive == 0 {
                return Err(RecvError::Disconnected);
            }
            // Read under the lock: a sender that queues after the unlock bumps the word first.
            let seen = self.shared.wake.load(Ordering::Acquire);
            state.receiver_waiting = true;
            drop(state);
            let waited = sys::futex_wait(&self.shared.wake, seen, &deadline);
            if let Ok(Wait::Again) = waited {
                continue;
            }
            // Timed out or failed: withdraw the wake request, and take a message that came at
            // the last moment rather than report a timeout with one pending.
            let mut state = self.shared.state.lock()?;
            state.receiver_waiting = false;
            if let Some(env) = state.pop_highest() {
                return Ok(env);
            }
            return match waited {
                Err(e) => Err(RecvError::Os(e)),
                Ok(_) if state.senders_alive == 0 => Err(RecvError::Disconnected),
                Ok(_) => Err(RecvError::Timeout),
            };
        }
    }

    /// Hands up to `max` pending messages to `handle`, most urgent first, without waiting, and
    /// returns how many: the periodic receiver's read of one release. The lock is taken per
    /// message and never held while `handle` runs, so senders are not held up by the handling,
    /// and a more urgent message that arrives mid-drain is handed over next.
    pub fn drain(&mut self, max: usize, mut handle: impl FnMut(Envelope<T>)) -> Result<usize, OsError> {
        let mut n = 0;
        while n < max {
            let next = self.shared.state.lock()?.pop_highest();
            let Some(env) = next else {
                break;
            };
            handle(env);
            n += 1;
        }
        Ok(n)
    }

    /// Messages pending now.
    pub fn len(&self) -> Result<usize, OsError> {
        Ok(self.shared.state.lock()?.len)
    }

    /// Whether no message is pending now.
    pub fn is_empty(&self) -> Result<bool, OsError> {
        Ok(self.len()? == 0)
    }

    /// A handle for reading the counters from another thread (a reporter).
    pub fn monitor(&self) -> Monitor<T> {
        Monitor {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // If the lock fails, later sends still fail on the PI lock or queue into the void; the
        // memory is freed with the last handle either way.
        if let Ok(mut state) = self.shared.state.lock() {
            state.receiver_alive = false;
        }
    }
}

/// Reads a channel's counters at any time, from any thread; cloneable. Each read takes the
/// channel's lock briefly, so the figures are a consistent snapshot.
pub struct Monitor<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Monitor<T> {
    fn clone(&self) -> Self {
        Monitor {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Monitor<T> {
    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The channel's capacity, overflow rule, pending messages and totals.
    pub fn stats(&self) -> Result<ChannelStats, OsError> {
        let state = self.shared.state.lock()?;
        Ok(ChannelStats {
            capacity: self.shared.capacity,
            overflow: self.shared.overflow,
            pending: state.len,
            totals: state.totals,
        })
    }

    /// Every sender's counters, in [`SenderId`] order. Allocates the list: for reports, not for
    /// the real-time path.
    pub fn sender_stats(&self) -> Result<Vec<SenderStats>, OsError> {
        // Allocated before the lock, so that no malloc runs inside the critical section.
        let mut out = Vec::with_capacity(self.shared.senders);
        let state = self.shared.state.lock()?;
        out.extend(state.senders.iter().enumerate().map(|(i, s)| SenderStats {
            id: SenderId(i as u32),
            priority: s.priority,
            counters: s.counters,
        }));
        Ok(out)
    }
}
