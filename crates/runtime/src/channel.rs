//! Preallocated, bounded, multi-sender channels that deliver in sender-priority order: RTDroid's
//! real-time message-passing channel (Yan et al., ACM TECS 17(6) 2019, §3.1.3 and §3.2.1), for
//! components on real-time threads.
//!
//! # What RTDroid asks for, and how it is met here
//!
//! * **One receiver, bounded in-flight messages, preallocated.** [`channel`] and
//!   [`byte_channel`] allocate every message slot, the per-priority queues and the per-sender
//!   counters at once; sending, receiving, draining and waiting never allocate (tests/channel.rs
//!   proves it with a counting allocator).
//! * **Fixed-size messages.** RTDroid exchanges "only primitive arrays (or fixed-length
//!   byte-buffers)". Two payloads share one queue implementation:
//!   - [`channel`]: the message is any `T: Copy`. `Copy` rules out owned heap data (a `Copy` type
//!     cannot hold a `Box` or `Vec`), so a message is a fixed-size bit copy, moving it in and out
//!     of a slot is a `memcpy` of `size_of::<T>()` bytes, and an evicted or abandoned message
//!     needs no destructor. A typed struct of numbers is checked by the compiler instead of by
//!     parsing.
//!   - [`byte_channel`]: the message is up to `message_size` bytes, a size known only at run
//!     time (the manifest's `message_size`). The slots are one contiguous preallocated buffer of
//!     `capacity × message_size` bytes plus a length per slot; a message shorter than
//!     `message_size` keeps its length.
//!
//!   The copy happens inside the critical section, so large payloads (RTDroid's bulk transfers)
//!   should travel as an index into a buffer pool preallocated elsewhere.
//! * **Delivery in sender-priority order.** Every sender has a fixed [`Priority`], its component's
//!   (larger is more urgent). The receiver gets the pending message of the highest sender priority
//!   first, and among equal priorities the oldest first; each accepted message carries a sequence
//!   number ([`Envelope::seq`], [`Meta::seq`], increasing in acceptance order) that makes this
//!   order visible, and the CLOCK_MONOTONIC time of its send ([`Envelope::sent_ns`]), from which
//!   the receiver measures delivery latency (RTDroid's Figs. 18–21).
//! * **A defined overflow rule with notice** ([`Overflow`]), chosen per channel, with per-channel
//!   and per-sender [`Counters`]. RTDroid's steal rule notifies the low-priority sender whose
//!   message was dropped; here the sender whose send evicted a message learns which one
//!   ([`Sent::Evicted`], [`ByteSent::Evicted`]), and the victim's sender sees it in
//!   [`Sender::take_evictions`] / [`ByteSender::take_evictions`].
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
//! The lists, the overflow rule and the counting are written once, over a private `Store` trait
//! that only says where slot `i`'s payload lives (an `Option<T>` per slot, or a `message_size`
//! stretch of one byte buffer): a typed and a byte channel cannot drift apart in order, eviction
//! or accounting (a property test sends the same traffic through both).
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
//! condition variable; see `pacer_linux::pi` for why. A send therefore never blocks beyond the bounded
//! critical section: it never waits for space (the overflow rule decides at once) and wakes the
//! receiver, with one `FUTEX_WAKE`, only when the receiver announced that it sleeps.
//!
//! # Counting
//!
//! Every send is counted once as `sent`, and ends as exactly one of `dropped` (refused, the
//! message returned to the caller), `evicted` (accepted, then pushed out by the overflow rule),
//! `delivered`, or still pending: `sent = delivered + dropped + evicted + pending` holds for the
//! channel and for each sender at every instant, because all counters change inside the critical
//! section and a [`Monitor`] reads them under it. A byte message longer than the channel's
//! `message_size` is refused before it reaches the channel and is not counted.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use pacer_linux::pi::{self as sys, PiGuard, PiMutex, Wait};

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

/// Identifies a sender of one channel: its index in the priority list given to [`channel`] or
/// [`byte_channel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SenderId(pub u32);

/// A failed system call: which one and its errno (the PI mutex and futex live in
/// `pacer_linux::pi`).
pub use pacer_linux::pi::OsError;

/// Why [`channel`] or [`byte_channel`] made no channel.
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
    /// For a byte channel, `slot_bytes` is the message size (the buffer is `capacity ×
    /// slot_bytes` bytes, possibly more than the address space).
    #[error("channel `{name}`: cannot allocate {capacity} message slots of {slot_bytes} bytes")]
    OutOfMemory {
        name: String,
        capacity: usize,
        slot_bytes: usize,
    },
    #[error("channel `{name}`: {source}")]
    Os { name: String, source: OsError },
}

/// A message as the receiver of a typed channel gets it: the payload and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope<T> {
    pub message: T,
    pub sender: SenderId,
    /// The sender's priority.
    pub priority: Priority,
    /// Acceptance order on this channel, from 0: among equal priorities, delivery follows it.
    pub seq: u64,
    /// CLOCK_MONOTONIC (`clock_gettime(CLOCK_MONOTONIC)`, in ns) read by the send just before it
    /// took the channel's lock. One sender's messages have non-decreasing `sent_ns`; across
    /// senders it may disagree with `seq` by the time a sender waited for the lock.
    pub sent_ns: u64,
}

/// A successful send on a typed channel.
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
    /// The lock could not be taken or the clock not read (not counted: the counters are under
    /// that lock).
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

/// Where a byte message came from, and its length: what a byte channel's receiver gets beside
/// the bytes, and what an evicting send learns of its victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub sender: SenderId,
    /// The sender's priority.
    pub priority: Priority,
    /// Acceptance order on this channel, from 0: among equal priorities, delivery follows it.
    pub seq: u64,
    /// CLOCK_MONOTONIC in ns, read by the send just before it took the lock (as
    /// [`Envelope::sent_ns`]).
    pub sent_ns: u64,
    /// The message's length in bytes, at most the channel's `message_size`.
    pub len: usize,
}

/// A successful send on a byte channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteSent {
    /// Queued with this sequence number.
    Queued { seq: u64 },
    /// Queued with sequence number `seq` after the overflow rule evicted the message described
    /// by `victim` (counted as evicted for its sender). Its bytes are gone: the new message took
    /// their slot.
    Evicted { seq: u64, victim: Meta },
}

/// A failed send on a byte channel. The caller keeps its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum ByteSendError {
    /// The channel was full and its overflow rule kept the pending messages (counted as
    /// dropped).
    #[error("the channel is full: message dropped")]
    Dropped,
    /// The receiver is gone (counted as dropped).
    #[error("the receiver is gone: message dropped")]
    Disconnected,
    /// The message is longer than the channel's `message_size` (not counted: it never reached
    /// the channel).
    #[error("a message of {len} bytes is longer than the channel's {max}: not sent")]
    TooLong { len: usize, max: usize },
    /// The lock could not be taken or the clock not read (not counted).
    #[error("message not sent: {0}")]
    Os(OsError),
}

/// Why a receive returned no message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum RecvError {
    /// Nothing pending ([`Receiver::try_recv`], [`ByteReceiver::try_recv_into`]).
    #[error("no message pending")]
    Empty,
    /// Nothing arrived before the timeout ([`Receiver::recv_timeout`],
    /// [`ByteReceiver::recv_timeout_into`]).
    #[error("no message before the timeout")]
    Timeout,
    /// Nothing pending and every sender is gone: nothing will come.
    #[error("no message pending and every sender is gone")]
    Disconnected,
    /// The buffer given to a byte receive is shorter than the channel's `message_size`; checked
    /// before the lock is taken, so no message was taken.
    #[error("a receive buffer of {len} bytes is shorter than the channel's message size of {need}")]
    BufferTooSmall { len: usize, need: usize },
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

/// Creates a channel named `name` (for errors and reports) holding at most `capacity` messages
/// of type `T`, with one sender per entry of `sender_priorities`, in that order ([`SenderId`] is
/// the index). Everything the channel will ever use is allocated here.
pub fn channel<T: Copy + Send>(
    name: &str,
    capacity: usize,
    overflow: Overflow,
    sender_priorities: &[Priority],
) -> Result<(Vec<Sender<T>>, Receiver<T>), ChannelError> {
    let slot_bytes = std::mem::size_of::<Option<T>>() + std::mem::size_of::<Link>();
    let shared = create(name, capacity, overflow, sender_priorities, slot_bytes, || {
        let mut messages = Vec::new();
        messages.try_reserve_exact(capacity).ok()?;
        messages.resize(capacity, None);
        Some(Typed {
            messages: messages.into_boxed_slice(),
        })
    })?;
    let senders = sender_cores(&shared, sender_priorities)
        .map(|core| Sender { core })
        .collect();
    Ok((
        senders,
        Receiver {
            core: ReceiverCore { shared },
        },
    ))
}

/// Creates a channel of byte messages of at most `message_size` bytes each, a size known only at
/// run time (the manifest's), otherwise as [`channel`]: at most `capacity` messages, one sender
/// per entry of `sender_priorities`. Allocates (and zeroes, so that its pages are touched before
/// any real-time work) one buffer of `capacity × message_size` bytes, and the receiver's scratch
/// buffer for [`ByteReceiver::drain`].
pub fn byte_channel(
    name: &str,
    capacity: usize,
    message_size: usize,
    overflow: Overflow,
    sender_priorities: &[Priority],
) -> Result<(Vec<ByteSender>, ByteReceiver), ChannelError> {
    let out_of_memory = || ChannelError::OutOfMemory {
        name: name.to_string(),
        capacity,
        slot_bytes: message_size,
    };
    let shared = create(name, capacity, overflow, sender_priorities, message_size, || {
        let total = capacity.checked_mul(message_size)?;
        let mut data = Vec::new();
        data.try_reserve_exact(total).ok()?;
        data.resize(total, 0u8);
        let mut lens = Vec::new();
        lens.try_reserve_exact(capacity).ok()?;
        lens.resize(capacity, 0usize);
        Some(Bytes {
            size: message_size,
            data: data.into_boxed_slice(),
            lens: lens.into_boxed_slice(),
        })
    })?;
    let mut scratch = Vec::new();
    if scratch.try_reserve_exact(message_size).is_err() {
        return Err(out_of_memory());
    }
    scratch.resize(message_size, 0u8);
    let senders = sender_cores(&shared, sender_priorities)
        .map(|core| ByteSender {
            core,
            size: message_size,
        })
        .collect();
    let receiver = ByteReceiver {
        core: ReceiverCore { shared },
        size: message_size,
        scratch: scratch.into_boxed_slice(),
        _not_sync: PhantomData,
    };
    Ok((senders, receiver))
}

/// Checks the channel's shape and allocates its shared state; `store` allocates the payloads
/// (`None`: out of memory).
fn create<S: Store>(
    name: &str,
    capacity: usize,
    overflow: Overflow,
    sender_priorities: &[Priority],
    slot_bytes: usize,
    store: impl FnOnce() -> Option<S>,
) -> Result<Arc<Shared<S>>, ChannelError> {
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

    let out_of_memory = || ChannelError::OutOfMemory {
        name: named(),
        capacity,
        slot_bytes,
    };
    let mut links = Vec::new();
    if links.try_reserve_exact(capacity).is_err() {
        return Err(out_of_memory());
    }
    // Every slot starts on the free list, in index order.
    links.extend((0..capacity).map(|i| Link {
        sender: 0,
        seq: 0,
        sent_ns: 0,
        next: if i + 1 < capacity { (i + 1) as u32 } else { NIL },
    }));
    let store = store().ok_or_else(out_of_memory)?;
    let state = State {
        links: links.into_boxed_slice(),
        store,
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
    Ok(Arc::new(Shared {
        name: name.into(),
        capacity,
        overflow,
        senders: sender_priorities.len(),
        state: lock,
        wake: AtomicU32::new(0),
    }))
}

fn sender_cores<'a, S>(
    shared: &'a Arc<Shared<S>>,
    sender_priorities: &'a [Priority],
) -> impl Iterator<Item = SenderCore<S>> + 'a {
    sender_priorities.iter().enumerate().map(|(i, p)| SenderCore {
        shared: shared.clone(),
        id: i as u32,
        priority: *p,
        evictions_seen: 0,
    })
}

/// Where slot `i`'s payload lives: the one thing a typed and a byte channel do differently. The
/// lists, the overflow rule and the counting (`State`) are written once over it.
trait Store {
    /// What a send hands in.
    type Msg<'m>: Copy;
    /// What is taken out of a slot when it leaves its list: the message itself for a typed
    /// channel; its length for a byte channel, whose bytes the receiver copies out of the freed
    /// slot before it unlocks (nothing can reuse the slot before that).
    type Out: Copy;
    /// Stores `msg` in slot `idx`.
    fn put(&mut self, idx: usize, msg: Self::Msg<'_>);
    /// Empties slot `idx`; `None` only if the slot was empty (which the lists rule out).
    fn take(&mut self, idx: usize) -> Option<Self::Out>;
}

/// A typed channel's payloads: `Some` exactly while the slot is on a level list.
struct Typed<T> {
    messages: Box<[Option<T>]>,
}

impl<T: Copy> Store for Typed<T> {
    type Msg<'m> = T;
    type Out = T;

    fn put(&mut self, idx: usize, msg: T) {
        if let Some(m) = self.messages.get_mut(idx) {
            *m = Some(msg);
        }
    }

    fn take(&mut self, idx: usize) -> Option<T> {
        self.messages.get_mut(idx)?.take()
    }
}

/// A byte channel's payloads: slot `i` is `data[i × size ..][.. lens[i]]`. One contiguous buffer
/// rather than a box per slot: one allocation, and neighbouring slots share cache lines and pages.
struct Bytes {
    size: usize,
    data: Box<[u8]>,
    lens: Box<[usize]>,
}

impl Bytes {
    fn range(&self, idx: usize, len: usize) -> std::ops::Range<usize> {
        // Cannot overflow: idx < capacity and capacity × size was checked at creation.
        let start = idx.saturating_mul(self.size);
        start..start.saturating_add(len)
    }

    /// The bytes of slot `idx`, `len` long (what `take` returned).
    fn bytes(&self, idx: usize, len: usize) -> &[u8] {
        self.data.get(self.range(idx, len)).unwrap_or(&[])
    }
}

impl Store for Bytes {
    type Msg<'m> = &'m [u8];
    type Out = usize;

    /// `msg` is at most `size` bytes (the sender checks before it locks).
    fn put(&mut self, idx: usize, msg: &[u8]) {
        let range = self.range(idx, msg.len());
        if let (Some(dst), Some(len)) = (self.data.get_mut(range), self.lens.get_mut(idx)) {
            dst.copy_from_slice(msg);
            *len = msg.len();
        }
    }

    fn take(&mut self, idx: usize) -> Option<usize> {
        self.lens.get(idx).copied()
    }
}

/// A slot's place in the lists and where its message came from.
struct Link {
    sender: u32,
    seq: u64,
    sent_ns: u64,
    /// Next slot of the same level list, or of the free list.
    next: u32,
}

struct SenderSlot {
    priority: Priority,
    /// Rank of `priority` among the channel's distinct priorities, 0 the lowest.
    level: u8,
    counters: Counters,
}

/// Where a message came from, whatever its payload.
#[derive(Clone, Copy)]
struct Head {
    sender: SenderId,
    priority: Priority,
    seq: u64,
    sent_ns: u64,
}

impl Head {
    fn envelope<T>(self, message: T) -> Envelope<T> {
        Envelope {
            message,
            sender: self.sender,
            priority: self.priority,
            seq: self.seq,
            sent_ns: self.sent_ns,
        }
    }

    fn meta(self, len: usize) -> Meta {
        Meta {
            sender: self.sender,
            priority: self.priority,
            seq: self.seq,
            sent_ns: self.sent_ns,
            len,
        }
    }
}

/// A message unlinked from its level. Its slot is on the free list but keeps its payload until
/// the next push, which needs the lock the caller still holds.
struct Popped<O> {
    head: Head,
    slot: usize,
    out: O,
}

/// An accepted message's sequence number, and the message it evicted, if any.
struct Pushed<O> {
    seq: u64,
    victim: Option<Popped<O>>,
}

/// Why a send was refused, before it is told in the caller's error type.
enum Refused {
    /// Full, and the overflow rule kept what was queued.
    Full,
    Disconnected,
    Os(OsError),
}

/// Everything that changes, under the PI mutex.
struct State<S> {
    links: Box<[Link]>,
    store: S,
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

impl<S: Store> State<S> {
    /// Counts a send by `sender` and queues `message` or applies the overflow rule.
    fn push(&mut self, sender: u32, sent_ns: u64, message: S::Msg<'_>) -> Result<Pushed<S::Out>, Refused> {
        let s = sender as usize;
        let Some(level) = self.senders.get(s).map(|x| x.level) else {
            return Err(Refused::Full);
        };
        self.count(s, |c| c.sent += 1);
        let mut victim = None;
        if self.len == self.links.len() {
            let lowest = self.nonempty.trailing_zeros() as u8;
            let steal = match self.overflow {
                Overflow::DropNewest => false,
                Overflow::DropOldest => true,
                Overflow::StealLowest => lowest < level,
            };
            if !steal {
                self.count(s, |c| c.dropped += 1);
                return Err(Refused::Full);
            }
            // Taken out before the put below: the victim's slot is the one the message gets.
            victim = self.pop_level(lowest);
            if let Some(v) = &victim {
                self.count(v.head.sender.0 as usize, |c| c.evicted += 1);
            }
        }
        let idx = self.free;
        let Some(link) = self.links.get_mut(idx as usize) else {
            // Unreachable: a full channel made room above, so the free list has a slot.
            self.count(s, |c| c.dropped += 1);
            return Err(Refused::Full);
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        self.free = link.next;
        *link = Link {
            sender,
            seq,
            sent_ns,
            next: NIL,
        };
        self.store.put(idx as usize, message);
        let l = usize::from(level);
        match self.tails[l] {
            NIL => self.heads[l] = idx,
            tail => self.links[tail as usize].next = idx,
        }
        self.tails[l] = idx;
        self.nonempty |= 1 << level;
        self.len += 1;
        Ok(Pushed { seq, victim })
    }

    /// The oldest message of the highest pending priority, counted as delivered.
    fn pop_highest(&mut self) -> Option<Popped<S::Out>> {
        if self.nonempty == 0 {
            return None;
        }
        let level = 63 - self.nonempty.leading_zeros() as u8;
        let popped = self.pop_level(level)?;
        self.count(popped.head.sender.0 as usize, |c| c.delivered += 1);
        Some(popped)
    }

    /// Unlinks the head of `level`'s list and returns its slot to the free list. Counts nothing.
    fn pop_level(&mut self, level: u8) -> Option<Popped<S::Out>> {
        let l = usize::from(level);
        let idx = *self.heads.get(l)?;
        let out = self.store.take(idx as usize)?;
        let link = self.links.get_mut(idx as usize)?;
        let (sender, seq, sent_ns, next) = (link.sender, link.seq, link.sent_ns, link.next);
        link.next = self.free;
        self.free = idx;
        self.heads[l] = next;
        if next == NIL {
            self.tails[l] = NIL;
            self.nonempty &= !(1 << level);
        }
        self.len -= 1;
        let priority = self.senders.get(sender as usize).map_or(0, |s| s.priority);
        Some(Popped {
            head: Head {
                sender: SenderId(sender),
                priority,
                seq,
                sent_ns,
            },
            slot: idx as usize,
            out,
        })
    }

    /// The smallest `sent_ns` among the heads of the non-empty levels: the oldest pending
    /// message (within a level the head is the oldest). At most 64 levels to look at.
    fn oldest_pending_ns(&self) -> Option<u64> {
        let mut levels = self.nonempty;
        let mut oldest: Option<u64> = None;
        while levels != 0 {
            let l = levels.trailing_zeros() as usize;
            levels &= levels - 1;
            let head = self.heads.get(l).and_then(|&i| self.links.get(i as usize));
            if let Some(link) = head {
                oldest = Some(oldest.map_or(link.sent_ns, |o| o.min(link.sent_ns)));
            }
        }
        oldest
    }
}

impl<S> State<S> {
    /// Applies `f` to the counters of sender `s` and to the channel's.
    fn count(&mut self, s: usize, f: impl Fn(&mut Counters)) {
        if let Some(sender) = self.senders.get_mut(s) {
            f(&mut sender.counters);
        }
        f(&mut self.totals);
    }
}

struct Shared<S> {
    name: Box<str>,
    capacity: usize,
    overflow: Overflow,
    /// Number of senders made at creation.
    senders: usize,
    state: PiMutex<State<S>>,
    /// The receiver's futex word: bumped (under the lock) by a send that wakes it, so a wake
    /// between the receiver's look at the queue and its sleep makes the sleep return at once.
    wake: AtomicU32,
}

impl<S> Shared<S> {
    /// Unlocks, and wakes the receiver if it sleeps and `news` (a message, or the last sender
    /// gone) happened in this critical section.
    fn unlock_and_wake(&self, mut state: PiGuard<'_, State<S>>, news: bool) {
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

impl<S: Store> Shared<S> {
    /// One send by sender `id`: the clock, the lock, the push, the wake.
    fn send(&self, id: u32, message: S::Msg<'_>) -> Result<Pushed<S::Out>, Refused> {
        // Before the lock, so that `sent_ns` includes the wait for it, as a delivery latency
        // should.
        let sent_ns = pacer_linux::sys::monotonic_ns();
        let mut state = self.state.lock().map_err(Refused::Os)?;
        if !state.receiver_alive {
            state.count(id as usize, |c| {
                c.sent += 1;
                c.dropped += 1;
            });
            return Err(Refused::Disconnected);
        }
        let result = state.push(id, sent_ns, message);
        self.unlock_and_wake(state, result.is_ok());
        result
    }

    /// Applies `take` to the state until it returns something, sleeping on the futex word in
    /// between, until every sender is gone ([`RecvError::Disconnected`]) or `timeout` has passed
    /// on CLOCK_MONOTONIC ([`RecvError::Timeout`]). `take` runs under the lock.
    fn sleep_until<R>(
        &self,
        timeout: Duration,
        mut take: impl FnMut(&mut State<S>) -> Option<R>,
    ) -> Result<R, RecvError> {
        let deadline = sys::deadline_after(timeout)?;
        loop {
            let mut state = self.state.lock()?;
            if let Some(r) = take(&mut state) {
                return Ok(r);
            }
            if state.senders_alive == 0 {
                return Err(RecvError::Disconnected);
            }
            // Read under the lock: a sender that queues after the unlock bumps the word first.
            let seen = self.wake.load(Ordering::Acquire);
            state.receiver_waiting = true;
            drop(state);
            let waited = sys::futex_wait(&self.wake, seen, &deadline);
            if let Ok(Wait::Again) = waited {
                continue;
            }
            // Timed out or failed: withdraw the wake request, and take a message that came at
            // the last moment rather than report a timeout with one pending.
            let mut state = self.state.lock()?;
            state.receiver_waiting = false;
            if let Some(r) = take(&mut state) {
                return Ok(r);
            }
            return match waited {
                Err(e) => Err(RecvError::Os(e)),
                Ok(_) if state.senders_alive == 0 => Err(RecvError::Disconnected),
                Ok(_) => Err(RecvError::Timeout),
            };
        }
    }

    /// Whether nothing is pending and every sender is gone, or else the oldest pending `sent_ns`
    /// after sleeping at most `timeout` (`None`: still nothing).
    fn wait(&self, timeout: Duration) -> Result<Option<u64>, RecvError> {
        match self.sleep_until(timeout, |state| state.oldest_pending_ns()) {
            Ok(ns) => Ok(Some(ns)),
            Err(RecvError::Timeout) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// What a [`Monitor`] reads, whatever the channel's payload.
trait Observe: Send + Sync {
    fn name(&self) -> &str;
    fn stats(&self) -> Result<ChannelStats, OsError>;
    fn sender_stats(&self) -> Result<Vec<SenderStats>, OsError>;
}

impl<S: Send> Observe for Shared<S> {
    fn name(&self) -> &str {
        &self.name
    }

    fn stats(&self) -> Result<ChannelStats, OsError> {
        let state = self.state.lock()?;
        Ok(ChannelStats {
            capacity: self.capacity,
            overflow: self.overflow,
            pending: state.len,
            totals: state.totals,
        })
    }

    fn sender_stats(&self) -> Result<Vec<SenderStats>, OsError> {
        // Allocated before the lock, so that no malloc runs inside the critical section.
        let mut out = Vec::with_capacity(self.senders);
        let state = self.state.lock()?;
        out.extend(state.senders.iter().enumerate().map(|(i, s)| SenderStats {
            id: SenderId(i as u32),
            priority: s.priority,
            counters: s.counters,
        }));
        Ok(out)
    }
}

/// The sending end shared by [`Sender`] and [`ByteSender`].
struct SenderCore<S> {
    shared: Arc<Shared<S>>,
    id: u32,
    priority: Priority,
    /// Evictions of this sender's messages already reported by `take_evictions`.
    evictions_seen: u64,
}

impl<S> SenderCore<S> {
    fn stats(&self) -> Result<Counters, OsError> {
        let state = self.shared.state.lock()?;
        Ok(state
            .senders
            .get(self.id as usize)
            .map_or_else(Counters::default, |s| s.counters))
    }

    fn take_evictions(&mut self) -> Result<u64, OsError> {
        let evicted = self.stats()?.evicted;
        let new = evicted.saturating_sub(self.evictions_seen);
        self.evictions_seen = evicted;
        Ok(new)
    }
}

impl<S> Drop for SenderCore<S> {
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

/// The receiving end shared by [`Receiver`] and [`ByteReceiver`].
struct ReceiverCore<S> {
    shared: Arc<Shared<S>>,
}

impl<S> ReceiverCore<S> {
    fn len(&self) -> Result<usize, OsError> {
        Ok(self.shared.state.lock()?.len)
    }
}

impl<S: Send + 'static> ReceiverCore<S> {
    fn monitor(&self) -> Monitor {
        Monitor {
            shared: self.shared.clone(),
        }
    }
}

impl<S> Drop for ReceiverCore<S> {
    fn drop(&mut self) {
        // If the lock fails, later sends still fail on the PI lock or queue into the void; the
        // memory is freed with the last handle either way.
        if let Ok(mut state) = self.shared.state.lock() {
            state.receiver_alive = false;
        }
    }
}

/// The sending end of one sender (one component) of a typed channel. Not `Clone`: the channel
/// counts per sender, and RTDroid's sender is a component with one priority.
pub struct Sender<T> {
    core: SenderCore<Typed<T>>,
}

impl<T: Copy + Send> Sender<T> {
    /// Queues `message`, or applies the channel's overflow rule if it is full. Never waits for
    /// space and never allocates; the only wait is for the PI mutex, held by others only for a
    /// constant-time queue update.
    pub fn send(&self, message: T) -> Result<Sent<T>, SendError<T>> {
        match self.core.shared.send(self.core.id, message) {
            Ok(Pushed { seq, victim: None }) => Ok(Sent::Queued { seq }),
            Ok(Pushed { seq, victim: Some(v) }) => Ok(Sent::Evicted {
                seq,
                victim: v.head.envelope(v.out),
            }),
            Err(Refused::Full) => Err(SendError::Dropped(message)),
            Err(Refused::Disconnected) => Err(SendError::Disconnected(message)),
            Err(Refused::Os(source)) => Err(SendError::Os { message, source }),
        }
    }

    pub fn id(&self) -> SenderId {
        SenderId(self.core.id)
    }

    pub fn priority(&self) -> Priority {
        self.core.priority
    }

    /// This sender's counters now.
    pub fn stats(&self) -> Result<Counters, OsError> {
        self.core.stats()
    }

    /// How many of this sender's messages were evicted since the last call: RTDroid's notice to
    /// a sender whose message was stolen, polled, as RTDroid's components poll for their
    /// `AsynchronousInterruptedException`s around each release.
    pub fn take_evictions(&mut self) -> Result<u64, OsError> {
        self.core.take_evictions()
    }
}

/// The receiving end of a typed channel: one per channel, as in RTDroid. Receiving takes
/// `&mut self`, so only one thread at a time can sleep on the channel, which is what the
/// single-waiter wake relies on.
pub struct Receiver<T> {
    core: ReceiverCore<Typed<T>>,
}

impl<T: Copy + Send> Receiver<T> {
    /// The most urgent pending message (highest sender priority, oldest first), or
    /// [`RecvError::Empty`] / [`RecvError::Disconnected`] at once.
    pub fn try_recv(&mut self) -> Result<Envelope<T>, RecvError> {
        let mut state = self.core.shared.state.lock()?;
        match state.pop_highest() {
            Some(p) => Ok(p.head.envelope(p.out)),
            None if state.senders_alive == 0 => Err(RecvError::Disconnected),
            None => Err(RecvError::Empty),
        }
    }

    /// As [`Receiver::try_recv`], but sleeps until a message arrives, every sender is gone, or
    /// `timeout` has passed on CLOCK_MONOTONIC ([`RecvError::Timeout`]).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Envelope<T>, RecvError> {
        self.core.shared.sleep_until(timeout, |state| {
            state.pop_highest().map(|p| p.head.envelope(p.out))
        })
    }

    /// Sleeps, as [`Receiver::recv_timeout`] does, until a message is pending, but leaves it
    /// there: `Some(sent_ns)` of the oldest pending message (the smallest [`Envelope::sent_ns`]
    /// among the heads of the non-empty priority levels), for a component released by its
    /// messages that times its release from them; `None` at the timeout;
    /// [`RecvError::Disconnected`] when nothing is pending and every sender is gone.
    pub fn wait(&mut self, timeout: Duration) -> Result<Option<u64>, RecvError> {
        self.core.shared.wait(timeout)
    }

    /// Hands up to `max` pending messages to `handle`, most urgent first, without waiting, and
    /// returns how many: the periodic receiver's read of one release. The lock is taken per
    /// message and never held while `handle` runs, so senders are not held up by the handling,
    /// and a more urgent message that arrives mid-drain is handed over next.
    pub fn drain(&mut self, max: usize, mut handle: impl FnMut(Envelope<T>)) -> Result<usize, OsError> {
        let mut n = 0;
        while n < max {
            let next = self.core.shared.state.lock()?.pop_highest();
            let Some(p) = next else {
                break;
            };
            handle(p.head.envelope(p.out));
            n += 1;
        }
        Ok(n)
    }

    /// Messages pending now.
    pub fn len(&self) -> Result<usize, OsError> {
        self.core.len()
    }

    /// Whether no message is pending now.
    pub fn is_empty(&self) -> Result<bool, OsError> {
        Ok(self.len()? == 0)
    }

    /// A handle for reading the counters from another thread (a reporter). `T: 'static`
    /// because the monitor does not carry the message type.
    pub fn monitor(&self) -> Monitor
    where
        T: 'static,
    {
        self.core.monitor()
    }
}

/// The sending end of one sender (one component) of a byte channel. Not `Clone`, as
/// [`Sender`].
pub struct ByteSender {
    core: SenderCore<Bytes>,
    /// A copy of the store's, readable without the lock.
    size: usize,
}

impl ByteSender {
    /// Copies `bytes` into the channel (at most [`ByteSender::message_size`] bytes, else
    /// [`ByteSendError::TooLong`], not counted), or applies the overflow rule if it is full.
    /// Never waits for space and never allocates, as [`Sender::send`].
    pub fn send(&self, bytes: &[u8]) -> Result<ByteSent, ByteSendError> {
        let max = self.message_size();
        if bytes.len() > max {
            return Err(ByteSendError::TooLong {
                len: bytes.len(),
                max,
            });
        }
        match self.core.shared.send(self.core.id, bytes) {
            Ok(Pushed { seq, victim: None }) => Ok(ByteSent::Queued { seq }),
            Ok(Pushed { seq, victim: Some(v) }) => Ok(ByteSent::Evicted {
                seq,
                victim: v.head.meta(v.out),
            }),
            Err(Refused::Full) => Err(ByteSendError::Dropped),
            Err(Refused::Disconnected) => Err(ByteSendError::Disconnected),
            Err(Refused::Os(e)) => Err(ByteSendError::Os(e)),
        }
    }

    pub fn id(&self) -> SenderId {
        SenderId(self.core.id)
    }

    pub fn priority(&self) -> Priority {
        self.core.priority
    }

    /// This sender's counters now.
    pub fn stats(&self) -> Result<Counters, OsError> {
        self.core.stats()
    }

    /// How many of this sender's messages were evicted since the last call, as
    /// [`Sender::take_evictions`].
    pub fn take_evictions(&mut self) -> Result<u64, OsError> {
        self.core.take_evictions()
    }

    /// The longest message this channel carries, in bytes.
    pub fn message_size(&self) -> usize {
        self.size
    }
}

/// The receiving end of a byte channel: one per channel. `Send` but not `Sync`, as one
/// component's. It owns a scratch buffer of `message_size` bytes, allocated at creation, into
/// which [`ByteReceiver::drain`] copies each message so that its handler runs outside the lock.
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<pacer_runtime::channel::ByteReceiver>();
/// ```
pub struct ByteReceiver {
    core: ReceiverCore<Bytes>,
    size: usize,
    scratch: Box<[u8]>,
    /// One receiving thread, as RTDroid's one receiving component.
    _not_sync: PhantomData<Cell<()>>,
}

impl ByteReceiver {
    /// Copies the most urgent pending message (highest sender priority, oldest first) into the
    /// start of `buf`, which must hold [`ByteReceiver::message_size`] bytes (else
    /// [`RecvError::BufferTooSmall`], with no message taken), and says where it came from and
    /// how long it is; or [`RecvError::Empty`] / [`RecvError::Disconnected`] at once.
    pub fn try_recv_into(&mut self, buf: &mut [u8]) -> Result<Meta, RecvError> {
        self.check(buf)?;
        let mut state = self.core.shared.state.lock()?;
        match copy_out(&mut state, buf) {
            Some(meta) => Ok(meta),
            None if state.senders_alive == 0 => Err(RecvError::Disconnected),
            None => Err(RecvError::Empty),
        }
    }

    /// As [`ByteReceiver::try_recv_into`], but sleeps until a message arrives, every sender is
    /// gone, or `timeout` has passed on CLOCK_MONOTONIC ([`RecvError::Timeout`]).
    pub fn recv_timeout_into(&mut self, buf: &mut [u8], timeout: Duration) -> Result<Meta, RecvError> {
        self.check(buf)?;
        self.core
            .shared
            .sleep_until(timeout, |state| copy_out(state, buf))
    }

    /// Hands up to `max` pending messages to `handle`, most urgent first, without waiting, and
    /// returns how many, as [`Receiver::drain`]: each message is copied under the lock into the
    /// receiver's scratch buffer and `handle` runs after the unlock, with the message's bytes.
    pub fn drain(&mut self, max: usize, mut handle: impl FnMut(Meta, &[u8])) -> Result<usize, OsError> {
        let mut n = 0;
        while n < max {
            let mut state = self.core.shared.state.lock()?;
            let next = copy_out(&mut state, &mut self.scratch);
            drop(state);
            let Some(meta) = next else {
                break;
            };
            handle(meta, self.scratch.get(..meta.len).unwrap_or(&[]));
            n += 1;
        }
        Ok(n)
    }

    /// Sleeps until a message is pending and leaves it there, as [`Receiver::wait`]:
    /// `Some(sent_ns)` of the oldest pending message, `None` at the timeout.
    pub fn wait(&mut self, timeout: Duration) -> Result<Option<u64>, RecvError> {
        self.core.shared.wait(timeout)
    }

    /// Messages pending now.
    pub fn len(&self) -> Result<usize, OsError> {
        self.core.len()
    }

    /// Whether no message is pending now.
    pub fn is_empty(&self) -> Result<bool, OsError> {
        Ok(self.len()? == 0)
    }

    /// The longest message this channel carries, in bytes: the least a receive buffer holds.
    pub fn message_size(&self) -> usize {
        self.size
    }

    /// A handle for reading the counters from another thread (a reporter).
    pub fn monitor(&self) -> Monitor {
        self.core.monitor()
    }

    fn check(&self, buf: &[u8]) -> Result<(), RecvError> {
        if buf.len() < self.size {
            return Err(RecvError::BufferTooSmall {
                len: buf.len(),
                need: self.size,
            });
        }
        Ok(())
    }
}

/// Takes the most urgent message and copies its bytes to the start of `buf` (at least
/// `message_size` long), before the caller unlocks: until then nothing reuses the freed slot.
fn copy_out(state: &mut State<Bytes>, buf: &mut [u8]) -> Option<Meta> {
    let p = state.pop_highest()?;
    let bytes = state.store.bytes(p.slot, p.out);
    if let Some(dst) = buf.get_mut(..bytes.len()) {
        dst.copy_from_slice(bytes);
    }
    Some(p.head.meta(p.out))
}

/// Reads a channel's counters at any time, from any thread; cloneable, and the same type for
/// every channel, typed or byte. Each read takes the channel's lock briefly, so the figures are
/// a consistent snapshot.
#[derive(Clone)]
pub struct Monitor {
    shared: Arc<dyn Observe>,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

impl Monitor {
    /// The name given at creation.
    pub fn name(&self) -> &str {
        self.shared.name()
    }

    /// The channel's capacity, overflow rule, pending messages and totals.
    pub fn stats(&self) -> Result<ChannelStats, OsError> {
        self.shared.stats()
    }

    /// Every sender's counters, in [`SenderId`] order. Allocates the list: for reports, not for
    /// the real-time path.
    pub fn sender_stats(&self) -> Result<Vec<SenderStats>, OsError> {
        self.shared.sender_stats()
    }
}
