//! The channel's contract: delivery order, each overflow rule with its counters and notices,
//! blocking and disconnection, no allocation after creation, every message accounted for exactly
//! once under concurrent senders, and a model check against a plain reference queue.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::thread;
use std::time::{Duration, Instant};

use pacer_runtime::channel::{
    channel, ChannelError, Counters, Envelope, Overflow, Priority, RecvError, SendError, SenderId, Sent,
};
use proptest::prelude::*;

/// Counts the allocations of the threads that armed it, each in its own counter, so that tests
/// running in parallel do not see each other's allocations.
struct CountingAlloc;

thread_local! {
    // Const-initialised and without destructors: reaching them never allocates, which the
    // allocator relies on.
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

fn note_allocation() {
    let _ = ARMED.try_with(|armed| {
        if armed.get() {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        }
    });
}

// SAFETY: forwards every call to the system allocator unchanged; the counting touches only
// thread-locals that need no allocation.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Allocations made by this thread while `f` runs.
fn allocations_in<R>(f: impl FnOnce() -> R) -> (u64, R) {
    COUNT.with(|c| c.set(0));
    ARMED.with(|a| a.set(true));
    let r = f();
    ARMED.with(|a| a.set(false));
    (COUNT.with(|c| c.get()), r)
}

fn recv_all<T: Copy + Send>(rx: &mut pacer_runtime::channel::Receiver<T>) -> Vec<Envelope<T>> {
    let mut out = Vec::new();
    while let Ok(env) = rx.try_recv() {
        out.push(env);
    }
    out
}

/// The message that `sent` says was evicted; fails the test if none was.
fn victim_of<T: std::fmt::Debug>(sent: Result<Sent<T>, SendError<T>>) -> Envelope<T> {
    match sent {
        Ok(Sent::Evicted { victim, .. }) => victim,
        other => panic!("expected an eviction, got {other:?}"),
    }
}

fn counters(sent: u64, delivered: u64, dropped: u64, evicted: u64) -> Counters {
    Counters {
        sent,
        delivered,
        dropped,
        evicted,
    }
}

#[test]
fn delivers_highest_sender_priority_first_fifo_within_a_priority() {
    let (tx, mut rx) = channel::<char>("order", 8, Overflow::DropNewest, &[1, 5, 3, 5]).unwrap();
    for (s, m) in [
        (0, 'a'),
        (2, 'b'),
        (1, 'c'),
        (0, 'd'),
        (3, 'e'),
        (1, 'f'),
        (2, 'g'),
    ] {
        assert!(matches!(tx[s].send(m), Ok(Sent::Queued { .. })));
    }
    let got = recv_all(&mut rx);
    let order: String = got.iter().map(|e| e.message).collect();
    // Priority 5 (senders 1 and 3 share it: arrival order c, e, f), then 3, then 1.
    assert_eq!(order, "cefbgad");
    let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [2, 4, 5, 1, 6, 0, 3]);
    assert_eq!(got[0].sender, SenderId(1));
    assert_eq!(got[1].sender, SenderId(3));
    assert_eq!(got[0].priority, 5);
    assert_eq!(got[6].priority, 1);
    assert_eq!(rx.try_recv(), Err(RecvError::Empty));
}

#[test]
fn a_later_urgent_message_overtakes_pending_ones() {
    let (tx, mut rx) = channel::<u32>("overtake", 4, Overflow::DropNewest, &[1, 9]).unwrap();
    tx[0].send(1).unwrap();
    tx[0].send(2).unwrap();
    assert_eq!(rx.try_recv().unwrap().message, 1);
    tx[1].send(90).unwrap();
    assert_eq!(rx.try_recv().unwrap().message, 90);
    assert_eq!(rx.try_recv().unwrap().message, 2);
}

#[test]
fn drop_newest_refuses_the_send_and_keeps_what_is_queued() {
    let (tx, mut rx) = channel::<u32>("dn", 2, Overflow::DropNewest, &[1, 9]).unwrap();
    tx[0].send(1).unwrap();
    tx[0].send(2).unwrap();
    // Even the urgent sender is refused: DropNewest never touches what is queued.
    assert_eq!(tx[1].send(3), Err(SendError::Dropped(3)));
    assert_eq!(tx[0].send(4), Err(SendError::Dropped(4)));
    let got: Vec<u32> = recv_all(&mut rx).iter().map(|e| e.message).collect();
    assert_eq!(got, [1, 2]);
    let m = rx.monitor();
    let stats = m.stats().unwrap();
    assert_eq!(stats.totals, counters(4, 2, 2, 0));
    assert_eq!(
        (stats.capacity, stats.pending, stats.overflow),
        (2, 0, Overflow::DropNewest)
    );
    let per = m.sender_stats().unwrap();
    assert_eq!(per[0].counters, counters(3, 2, 1, 0));
    assert_eq!(per[1].counters, counters(1, 0, 1, 0));
    assert_eq!(tx[1].stats().unwrap(), counters(1, 0, 1, 0));
}

#[test]
fn drop_oldest_evicts_the_oldest_of_the_lowest_priority_and_returns_it() {
    let (mut tx, mut rx) = channel::<u32>("do", 3, Overflow::DropOldest, &[1, 9]).unwrap();
    tx[0].send(10).unwrap();
    tx[1].send(90).unwrap();
    tx[0].send(11).unwrap();
    // Full: the oldest priority-1 message (10) goes, whoever sends.
    match tx[1].send(91).unwrap() {
        Sent::Evicted { seq, victim } => {
            assert_eq!(seq, 3);
            assert_eq!(
                victim,
                Envelope {
                    message: 10,
                    sender: SenderId(0),
                    priority: 1,
                    seq: 0,
                    sent_ns: victim.sent_ns,
                }
            );
        }
        other => panic!("expected an eviction, got {other:?}"),
    }
    assert_eq!(victim_of(tx[0].send(12)).message, 11);
    // Now 90, 91, 12 pending; a priority-1 send evicts its own older one (12).
    assert_eq!(victim_of(tx[0].send(13)).message, 12);
    assert_eq!(tx[0].take_evictions().unwrap(), 3);
    assert_eq!(tx[0].take_evictions().unwrap(), 0);
    assert_eq!(tx[1].take_evictions().unwrap(), 0);
    assert_eq!(rx.try_recv().unwrap().message, 90);
    tx[1].send(92).unwrap();
    assert_eq!(victim_of(tx[0].send(14)).message, 13);
    assert_eq!(victim_of(tx[0].send(15)).message, 14);
    let got: Vec<u32> = recv_all(&mut rx).iter().map(|e| e.message).collect();
    assert_eq!(got, [91, 92, 15]);
    let per = rx.monitor().sender_stats().unwrap();
    assert_eq!(per[0].counters, counters(6, 1, 0, 5));
    assert_eq!(per[1].counters, counters(3, 3, 0, 0));
    assert_eq!(rx.monitor().stats().unwrap().totals, counters(9, 4, 0, 5));
}

#[test]
fn drop_oldest_evicts_an_urgent_message_when_nothing_else_is_queued() {
    let (tx, mut rx) = channel::<u32>("do-urgent", 2, Overflow::DropOldest, &[1, 9]).unwrap();
    tx[1].send(90).unwrap();
    tx[1].send(91).unwrap();
    let victim = victim_of(tx[0].send(10));
    assert_eq!((victim.message, victim.priority), (90, 9));
    let got: Vec<u32> = recv_all(&mut rx).iter().map(|e| e.message).collect();
    assert_eq!(got, [91, 10]);
}

#[test]
fn steal_lowest_never_loses_urgent_traffic_to_less_urgent_traffic() {
    let (mut tx, mut rx) = channel::<u32>("steal", 2, Overflow::StealLowest, &[1, 5, 9]).unwrap();
    tx[0].send(10).unwrap();
    tx[1].send(50).unwrap();
    // Priority 9 steals the slot of the lowest pending message.
    let victim = victim_of(tx[2].send(90));
    assert_eq!((victim.message, victim.sender), (10, SenderId(0)));
    // The lowest priority has nothing below it: it drops its own.
    assert_eq!(tx[0].send(11), Err(SendError::Dropped(11)));
    // Equal priority does not steal: 5 vs the pending 5.
    assert_eq!(tx[1].send(51), Err(SendError::Dropped(51)));
    assert_eq!(victim_of(tx[2].send(91)).message, 50);
    // Only priority 9 pending: even priority 9 drops its own.
    assert_eq!(tx[2].send(92), Err(SendError::Dropped(92)));
    assert_eq!(tx[0].take_evictions().unwrap(), 1);
    assert_eq!(tx[1].take_evictions().unwrap(), 1);
    let got: Vec<u32> = recv_all(&mut rx).iter().map(|e| e.message).collect();
    assert_eq!(got, [90, 91]);
    let per = rx.monitor().sender_stats().unwrap();
    assert_eq!(per[0].counters, counters(2, 0, 1, 1));
    assert_eq!(per[1].counters, counters(2, 0, 1, 1));
    assert_eq!(per[2].counters, counters(3, 2, 1, 0));
    assert_eq!(rx.monitor().stats().unwrap().totals, counters(7, 2, 3, 2));
}

#[test]
fn drain_hands_over_at_most_k_in_priority_order() {
    let (tx, mut rx) = channel::<u32>("drain", 8, Overflow::DropNewest, &[1, 2]).unwrap();
    for i in 0..3 {
        tx[0].send(i).unwrap();
        tx[1].send(100 + i).unwrap();
    }
    let mut got = Vec::new();
    assert_eq!(rx.drain(4, |e| got.push(e.message)).unwrap(), 4);
    assert_eq!(got, [100, 101, 102, 0]);
    got.clear();
    assert_eq!(rx.drain(4, |e| got.push(e.message)).unwrap(), 2);
    assert_eq!(got, [1, 2]);
    assert_eq!(rx.drain(4, |_| unreachable!()).unwrap(), 0);
    assert_eq!(rx.drain(0, |_| unreachable!()).unwrap(), 0);
    assert!(rx.is_empty().unwrap());
}

#[test]
fn recv_timeout_times_out_on_the_monotonic_clock() {
    let (_tx, mut rx) = channel::<u32>("timeout", 1, Overflow::DropNewest, &[1]).unwrap();
    let start = Instant::now();
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(30)),
        Err(RecvError::Timeout)
    );
    assert!(
        start.elapsed() >= Duration::from_millis(30),
        "returned after {:?}",
        start.elapsed()
    );
    assert_eq!(rx.recv_timeout(Duration::ZERO), Err(RecvError::Timeout));
}

#[test]
fn recv_timeout_returns_a_pending_message_without_waiting() {
    let (tx, mut rx) = channel::<u32>("ready", 1, Overflow::DropNewest, &[1]).unwrap();
    tx[0].send(7).unwrap();
    assert_eq!(rx.recv_timeout(Duration::ZERO).unwrap().message, 7);
}

#[test]
fn a_send_wakes_a_sleeping_receiver() {
    // Woken, not timed out: a receive that ends at its timeout still takes a message that came
    // meanwhile, so the wake shows only in how long each receive lasted (far below the timeout).
    const TIMEOUT: Duration = Duration::from_secs(20);
    let (mut tx, mut rx) = channel::<u32>("wake", 4, Overflow::DropNewest, &[1]).unwrap();
    let (got_first, first_arrived) = std::sync::mpsc::channel();
    let receiver = thread::spawn(move || {
        let start = Instant::now();
        let first = rx.recv_timeout(TIMEOUT);
        let first_took = start.elapsed();
        got_first.send(()).unwrap();
        let second = rx.recv_timeout(TIMEOUT);
        (first, first_took, second, start.elapsed() - first_took)
    });
    let sender = tx.pop().unwrap();
    thread::sleep(Duration::from_millis(50));
    sender.send(1).unwrap();
    // The sender stays alive until the receiver has the message: only the send can wake it.
    let woken = first_arrived.recv_timeout(TIMEOUT / 2);
    thread::sleep(Duration::from_millis(50));
    // The last sender going wakes the receiver with Disconnected rather than at its timeout.
    drop(sender);
    let (first, first_took, second, second_took) = receiver.join().unwrap();
    assert!(woken.is_ok(), "the send did not wake the receiver");
    assert_eq!(first.unwrap().message, 1);
    assert_eq!(second, Err(RecvError::Disconnected));
    assert!(
        first_took < TIMEOUT / 2,
        "the send did not wake the receiver ({first_took:?})"
    );
    assert!(
        second_took < TIMEOUT / 2,
        "the last drop did not wake the receiver ({second_took:?})"
    );
}

#[test]
fn pending_messages_outlive_their_senders_then_disconnected() {
    let (tx, mut rx) = channel::<u32>("disc", 4, Overflow::DropNewest, &[1, 2]).unwrap();
    tx[0].send(1).unwrap();
    tx[1].send(2).unwrap();
    drop(tx);
    assert_eq!(rx.try_recv().unwrap().message, 2);
    assert_eq!(rx.recv_timeout(Duration::from_secs(60)).unwrap().message, 1);
    assert_eq!(rx.try_recv(), Err(RecvError::Disconnected));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(60)),
        Err(RecvError::Disconnected)
    );
}

#[test]
fn sending_without_a_receiver_fails_and_counts_a_drop() {
    let (tx, rx) = channel::<u32>("norx", 4, Overflow::DropNewest, &[1]).unwrap();
    let monitor = rx.monitor();
    drop(rx);
    assert_eq!(tx[0].send(5), Err(SendError::Disconnected(5)));
    assert_eq!(tx[0].send(6).unwrap_err().into_message(), 6);
    assert_eq!(monitor.stats().unwrap().totals, counters(2, 0, 2, 0));
    assert_eq!(monitor.name(), "norx");
}

#[test]
fn creation_refuses_bad_shapes_with_named_errors() {
    let e = channel::<u8>("c0", 0, Overflow::DropNewest, &[1]).err().unwrap();
    assert_eq!(e, ChannelError::ZeroCapacity { name: "c0".into() });
    assert!(e.to_string().contains("`c0`"), "{e}");
    assert!(matches!(
        channel::<u8>("c1", 4, Overflow::DropNewest, &[]).err().unwrap(),
        ChannelError::NoSenders { .. }
    ));
    let many: Vec<Priority> = (0..65).collect();
    assert_eq!(
        channel::<u8>("c2", 4, Overflow::DropNewest, &many).err().unwrap(),
        ChannelError::TooManyPriorities {
            name: "c2".into(),
            levels: 65
        }
    );
    // 64 distinct priorities are fine, and so is any number of senders sharing them.
    assert!(channel::<u8>("c3", 4, Overflow::DropNewest, &many[..64]).is_ok());
    let shared: Vec<Priority> = (0..1000).map(|i| i % 3).collect();
    assert!(channel::<u8>("c4", 4, Overflow::DropNewest, &shared).is_ok());
    assert!(matches!(
        channel::<u8>("c5", usize::MAX, Overflow::DropNewest, &[1])
            .err()
            .unwrap(),
        ChannelError::CapacityTooLarge { .. }
    ));
}

#[test]
fn the_counting_allocator_sees_allocations() {
    // Guards the next tests against passing because nothing is counted.
    let (n, v) = allocations_in(|| vec![1u8; 100]);
    assert!(n >= 1, "a Vec allocation was not counted");
    drop(v);
}

#[test]
fn no_allocation_on_send_or_receive_after_creation() {
    let priorities: Vec<Priority> = (0..8).collect();
    for overflow in [Overflow::DropNewest, Overflow::DropOldest, Overflow::StealLowest] {
        let (mut tx, mut rx) = channel::<[u8; 64]>("noalloc", 4, overflow, &priorities).unwrap();
        let monitor = rx.monitor();
        let (n, delivered) = allocations_in(|| {
            let mut delivered = 0usize;
            for round in 0..200u32 {
                for (i, s) in tx.iter().enumerate() {
                    // Every outcome is exercised: queued, dropped, evicted.
                    let _ = s.send([(round as usize + i) as u8; 64]);
                }
                let _ = tx[0].take_evictions();
                let _ = tx[3].stats();
                if round.is_multiple_of(3) {
                    delivered += rx.drain(2, |e| assert_eq!(e.message.len(), 64)).unwrap();
                }
                if let Ok(_e) = rx.try_recv() {
                    delivered += 1;
                }
                let _ = rx.recv_timeout(Duration::ZERO);
                let _ = rx.len();
                let _ = monitor.stats();
            }
            while rx.try_recv().is_ok() {}
            assert_eq!(
                rx.recv_timeout(Duration::from_micros(100)),
                Err(RecvError::Timeout)
            );
            delivered
        });
        assert_eq!(n, 0, "{overflow:?}: {n} allocations after creation");
        assert!(delivered > 0);
        let totals = monitor.stats().unwrap().totals;
        assert_eq!(totals.sent, 200 * 8);
        assert!(
            totals.dropped + totals.evicted > 0,
            "{overflow:?}: overflow never exercised"
        );
    }
}

#[test]
fn no_allocation_when_a_send_wakes_a_receiver_on_another_thread() {
    let (mut tx, mut rx) = channel::<u64>("noalloc-threads", 16, Overflow::StealLowest, &[1, 2]).unwrap();
    let hi = tx.pop().unwrap();
    let lo = tx.pop().unwrap();
    let receiver = thread::spawn(move || {
        allocations_in(|| {
            let mut n = 0u64;
            loop {
                match rx.recv_timeout(Duration::from_secs(60)) {
                    Ok(_) => n += 1,
                    Err(RecvError::Disconnected) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            n
        })
    });
    let sender = thread::spawn(move || {
        allocations_in(|| {
            for i in 0..2000u64 {
                let _ = lo.send(i);
                let _ = hi.send(i);
                if i.is_multiple_of(64) {
                    thread::yield_now();
                }
            }
            // The wake-up of the last drop happens here too.
            drop(lo);
            drop(hi);
        })
        .0
    });
    let sender_allocs = sender.join().unwrap();
    let (receiver_allocs, received) = receiver.join().unwrap();
    assert_eq!(sender_allocs, 0);
    assert_eq!(receiver_allocs, 0);
    assert!(received > 0);
}

/// Several senders at different priorities, one receiver that reads in bursts with pauses (so
/// the channel overflows): every message ends exactly once as delivered, dropped or evicted, and
/// the counters agree with what the threads saw.
fn stress(overflow: Overflow) {
    const PER_SENDER: u32 = 20_000;
    let priorities: [Priority; 4] = [1, 2, 2, 3];
    let (tx, mut rx) = channel::<(u32, u32)>("stress", 8, overflow, &priorities).unwrap();
    let monitor = rx.monitor();
    let receiver = thread::spawn(move || {
        let mut delivered = Vec::new();
        let mut round = 0u32;
        loop {
            round += 1;
            let r = if round.is_multiple_of(2) {
                rx.drain(3, |e| delivered.push(e))
                    .map_err(RecvError::Os)
                    .map(|_| ())
            } else {
                rx.recv_timeout(Duration::from_secs(60))
                    .map(|e| delivered.push(e))
            };
            match r {
                Ok(()) => {}
                Err(RecvError::Disconnected) => break,
                Err(e) => panic!("{e}"),
            }
            if round.is_multiple_of(16) {
                thread::sleep(Duration::from_micros(50));
            }
        }
        delivered
    });
    let senders: Vec<_> = tx
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            thread::spawn(move || {
                let mut dropped = Vec::new();
                let mut evicted = Vec::new();
                for n in 0..PER_SENDER {
                    match s.send((i as u32, n)) {
                        Ok(Sent::Queued { .. }) => {}
                        Ok(Sent::Evicted { victim, .. }) => evicted.push(victim),
                        Err(SendError::Dropped(m)) => dropped.push(m),
                        Err(e) => panic!("{e}"),
                    }
                }
                (dropped, evicted)
            })
        })
        .collect();
    let mut seen = vec![vec![0u8; PER_SENDER as usize]; priorities.len()];
    let (mut n_dropped, mut n_evicted) = (0u64, 0u64);
    for h in senders {
        let (dropped, evicted) = h.join().unwrap();
        n_dropped += dropped.len() as u64;
        n_evicted += evicted.len() as u64;
        for (s, n) in dropped {
            seen[s as usize][n as usize] += 1;
        }
        for v in evicted {
            // The victim is reported with its own sender and priority.
            assert_eq!(v.priority, priorities[v.sender.0 as usize]);
            seen[v.message.0 as usize][v.message.1 as usize] += 1;
        }
    }
    let delivered = receiver.join().unwrap();
    let mut last = vec![None; priorities.len()];
    for e in &delivered {
        let (s, n) = e.message;
        assert_eq!(e.sender.0, s);
        seen[s as usize][n as usize] += 1;
        // One sender's messages stay in its sending order.
        assert!(
            last[s as usize] < Some(n),
            "sender {s}: {n} after {:?}",
            last[s as usize]
        );
        last[s as usize] = Some(n);
    }
    for (s, counts) in seen.iter().enumerate() {
        let wrong: Vec<usize> = (0..counts.len()).filter(|&n| counts[n] != 1).take(5).collect();
        assert!(
            wrong.is_empty(),
            "{overflow:?}: sender {s}, messages {wrong:?} not accounted once"
        );
    }
    let total = u64::from(PER_SENDER) * priorities.len() as u64;
    let stats = monitor.stats().unwrap();
    assert_eq!(stats.pending, 0);
    assert_eq!(
        stats.totals,
        counters(total, delivered.len() as u64, n_dropped, n_evicted)
    );
    assert!(
        n_dropped + n_evicted > 0,
        "{overflow:?}: the channel never overflowed"
    );
    let per = monitor.sender_stats().unwrap();
    let per_sum = per.iter().fold(Counters::default(), |a, s| {
        counters(
            a.sent + s.counters.sent,
            a.delivered + s.counters.delivered,
            a.dropped + s.counters.dropped,
            a.evicted + s.counters.evicted,
        )
    });
    assert_eq!(per_sum, stats.totals);
    for s in &per {
        let c = s.counters;
        assert_eq!(
            c.sent,
            c.delivered + c.dropped + c.evicted,
            "{overflow:?}: sender {:?}",
            s.id
        );
    }
    match overflow {
        Overflow::DropNewest => assert_eq!(n_evicted, 0),
        Overflow::DropOldest => assert_eq!(n_dropped, 0),
        // Nothing of the most urgent sender is ever stolen.
        Overflow::StealLowest => assert_eq!(per[3].counters.evicted, 0),
    }
}

#[test]
fn stress_drop_newest() {
    stress(Overflow::DropNewest);
}

#[test]
fn stress_drop_oldest() {
    stress(Overflow::DropOldest);
}

#[test]
fn stress_steal_lowest() {
    stress(Overflow::StealLowest);
}

/// The reference: a plain list searched linearly, written from the rules' wording.
#[derive(Default)]
struct Model {
    pending: Vec<(Priority, u64, usize, u32)>,
    next_seq: u64,
    counters: Vec<Counters>,
}

impl Model {
    fn send(
        &mut self,
        capacity: usize,
        overflow: Overflow,
        prio: Priority,
        sender: usize,
        m: u32,
    ) -> Result<Option<u32>, u32> {
        self.counters[sender].sent += 1;
        let mut victim = None;
        if self.pending.len() == capacity {
            // Oldest of the lowest priority.
            let (vi, v) = self
                .pending
                .iter()
                .enumerate()
                .min_by_key(|(_, p)| (p.0, p.1))
                .map(|(i, p)| (i, *p))
                .unwrap();
            let steal = match overflow {
                Overflow::DropNewest => false,
                Overflow::DropOldest => true,
                Overflow::StealLowest => v.0 < prio,
            };
            if !steal {
                self.counters[sender].dropped += 1;
                return Err(m);
            }
            self.pending.remove(vi);
            self.counters[v.2].evicted += 1;
            victim = Some(v.3);
        }
        self.pending.push((prio, self.next_seq, sender, m));
        self.next_seq += 1;
        Ok(victim)
    }

    fn recv(&mut self) -> Option<u32> {
        // Highest priority, then oldest.
        let (i, _) = self
            .pending
            .iter()
            .enumerate()
            .max_by_key(|(_, p)| (p.0, std::cmp::Reverse(p.1)))?;
        let p = self.pending.remove(i);
        self.counters[p.2].delivered += 1;
        Some(p.3)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Send(usize),
    Recv,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![3 => (0usize..5).prop_map(Op::Send), 2 => Just(Op::Recv)]
}

proptest! {
    #[test]
    fn matches_the_reference_model(
        capacity in 1usize..6,
        overflow in prop_oneof![Just(Overflow::DropNewest), Just(Overflow::DropOldest), Just(Overflow::StealLowest)],
        priorities in proptest::collection::vec(0u32..4, 5),
        ops in proptest::collection::vec(op(), 0..200),
    ) {
        let (tx, mut rx) = channel::<u32>("model", capacity, overflow, &priorities).unwrap();
        let mut model = Model { counters: vec![Counters::default(); priorities.len()], ..Model::default() };
        for (k, op) in ops.into_iter().enumerate() {
            let m = k as u32;
            match op {
                Op::Send(s) => {
                    let want = model.send(capacity, overflow, priorities[s], s, m);
                    let got = match tx[s].send(m) {
                        Ok(Sent::Queued { .. }) => Ok(None),
                        Ok(Sent::Evicted { victim, .. }) => Ok(Some(victim.message)),
                        Err(SendError::Dropped(m)) => Err(m),
                        Err(e) => panic!("{e}"),
                    };
                    prop_assert_eq!(got, want);
                }
                Op::Recv => {
                    let got = rx.try_recv().ok().map(|e| e.message);
                    prop_assert_eq!(got, model.recv());
                }
            }
        }
        let per = rx.monitor().sender_stats().unwrap();
        for (s, stats) in per.iter().enumerate() {
            prop_assert_eq!(stats.counters, model.counters[s]);
        }
    }
}
