//! The channel's contract: delivery order, each overflow rule with its counters and notices,
//! blocking and disconnection, no allocation after creation, every message accounted for exactly
//! once under concurrent senders, and a model check against a plain reference queue; for byte
//! channels the same, plus lengths, timestamps, `wait`, and a check that a byte channel and a
//! typed channel given the same traffic deliver, evict and drop the same messages.

use std::thread;
use std::time::{Duration, Instant};

use pacer_runtime::channel::{
    byte_channel, channel, ByteReceiver, ByteSendError, ByteSender, ByteSent, ChannelError, Counters,
    Envelope, Meta, Monitor, Overflow, Priority, RecvError, SendError, SenderId, Sent,
};
use proptest::prelude::*;

#[global_allocator]
static ALLOC: pacer_runtime::guard::GuardedAlloc = pacer_runtime::guard::GuardedAlloc;

/// Allocations made by this thread while `f` runs, counted by the runtime's own allocation
/// guard as on a component's real-time path (per thread: parallel tests do not see each other).
fn allocations_in<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let tally = pacer_runtime::guard::Tally::new();
    let r = {
        let _section = pacer_runtime::guard::enter(&tally, pacer_runtime::guard::Section::RealTime);
        f()
    };
    (tally.report().rt_allocations, r)
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

// ---------------------------------------------------------------------------------------------
// Timestamps, `wait`, and byte channels.

/// CLOCK_MONOTONIC in ns, read as the channel reads it.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is valid for writes.
    assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) }, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Every pending byte message, most urgent first, with its bytes.
fn recv_all_bytes(rx: &mut ByteReceiver) -> Vec<(Meta, Vec<u8>)> {
    let mut buf = vec![0u8; rx.message_size()];
    let mut out = Vec::new();
    while let Ok(meta) = rx.try_recv_into(&mut buf) {
        out.push((meta, buf[..meta.len].to_vec()));
    }
    out
}

fn byte_victim(sent: Result<ByteSent, ByteSendError>) -> Meta {
    match sent {
        Ok(ByteSent::Evicted { victim, .. }) => victim,
        other => panic!("expected an eviction, got {other:?}"),
    }
}

#[test]
fn the_handles_have_the_promised_auto_traits() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    fn clone<T: Clone>() {}
    send_sync::<ByteSender>();
    send::<ByteReceiver>();
    send_sync::<Monitor>();
    clone::<Monitor>();
}

#[test]
fn typed_sent_ns_is_monotone_within_the_tests_clock_readings() {
    let (tx, mut rx) = channel::<u32>("ts", 64, Overflow::DropNewest, &[1, 2]).unwrap();
    let before = monotonic_ns();
    for i in 0..40 {
        tx[(i % 2) as usize].send(i).unwrap();
    }
    let after = monotonic_ns();
    let mut got = recv_all(&mut rx);
    got.sort_by_key(|e| e.seq);
    assert_eq!(got.len(), 40);
    for pair in got.windows(2) {
        assert!(pair[0].sent_ns <= pair[1].sent_ns, "{pair:?}");
    }
    assert!(got[0].sent_ns >= before, "{} < {before}", got[0].sent_ns);
    assert!(got[39].sent_ns <= after, "{} > {after}", got[39].sent_ns);
    // Not a constant: 40 sends over a real clock take more than 0 ns.
    assert!(got[39].sent_ns > got[0].sent_ns);
}

#[test]
fn typed_wait_reports_the_oldest_pending_send_without_taking_it() {
    let (tx, mut rx) = channel::<u32>("wait", 8, Overflow::DropNewest, &[1, 9]).unwrap();
    assert_eq!(rx.wait(Duration::ZERO), Ok(None));
    tx[0].send(1).unwrap();
    thread::sleep(Duration::from_millis(1));
    tx[1].send(9).unwrap();
    let oldest = rx.wait(Duration::from_secs(60)).unwrap();
    assert_eq!(rx.len().unwrap(), 2);
    // The urgent message comes first, but the oldest pending one is the priority-1 message.
    let first = rx.try_recv().unwrap();
    let second = rx.try_recv().unwrap();
    assert_eq!((first.message, second.message), (9, 1));
    assert_eq!(oldest, Some(second.sent_ns));
    assert!(second.sent_ns < first.sent_ns);
    drop(tx);
    assert_eq!(rx.wait(Duration::from_secs(60)), Err(RecvError::Disconnected));
}

#[test]
fn byte_messages_come_by_priority_then_seq_and_keep_their_length() {
    let (tx, mut rx) = byte_channel("b-order", 8, 16, Overflow::DropNewest, &[1, 5, 3, 5]).unwrap();
    assert_eq!(rx.message_size(), 16);
    assert!(tx.iter().all(|s| s.message_size() == 16));
    assert_eq!((tx[2].id(), tx[2].priority()), (SenderId(2), 3));
    let msgs: [(usize, &[u8]); 7] = [
        (0, b"a"),
        (2, b"bb"),
        (1, b""),
        (0, b"dddd"),
        (3, b"exactly 16 bytes"),
        (1, b"ff"),
        (2, b"g"),
    ];
    for (k, (s, m)) in msgs.iter().enumerate() {
        assert_eq!(tx[*s].send(m), Ok(ByteSent::Queued { seq: k as u64 }));
    }
    assert_eq!(rx.len().unwrap(), 7);
    let got = recv_all_bytes(&mut rx);
    let seqs: Vec<u64> = got.iter().map(|(m, _)| m.seq).collect();
    assert_eq!(seqs, [2, 4, 5, 1, 6, 0, 3]);
    for (meta, bytes) in &got {
        let (s, m) = msgs[meta.seq as usize];
        assert_eq!(meta.sender, SenderId(s as u32));
        assert_eq!(meta.priority, [1, 5, 3, 5][s]);
        assert_eq!(meta.len, m.len());
        assert_eq!(bytes, m);
    }
    assert_eq!(rx.try_recv_into(&mut [0; 16]), Err(RecvError::Empty));
    assert!(rx.is_empty().unwrap());
}

#[test]
fn a_short_message_does_not_carry_the_previous_occupants_tail() {
    let (tx, mut rx) = byte_channel("b-short", 1, 8, Overflow::DropNewest, &[1]).unwrap();
    let mut buf = [0xAAu8; 12];
    tx[0].send(b"12345678").unwrap();
    assert_eq!(rx.try_recv_into(&mut buf).unwrap().len, 8);
    tx[0].send(b"xy").unwrap();
    let meta = rx.try_recv_into(&mut buf).unwrap();
    assert_eq!(meta.len, 2);
    assert_eq!(&buf[..meta.len], b"xy");
    // Only `len` bytes of the caller's buffer are written.
    assert_eq!(&buf[2..8], b"345678");
    assert_eq!(&buf[8..], [0xAA; 4]);
}

#[test]
fn a_byte_message_longer_than_the_message_size_is_refused_and_not_counted() {
    let (mut tx, rx) = byte_channel("b-long", 2, 4, Overflow::DropOldest, &[1]).unwrap();
    assert_eq!(
        tx[0].send(b"12345"),
        Err(ByteSendError::TooLong { len: 5, max: 4 })
    );
    let e = tx[0].send(&[0; 100]).unwrap_err();
    assert!(e.to_string().contains("100"), "{e}");
    assert_eq!(tx[0].stats().unwrap(), Counters::default());
    assert_eq!(tx[0].take_evictions().unwrap(), 0);
    assert_eq!(rx.monitor().stats().unwrap().totals, Counters::default());
    assert_eq!(tx[0].send(b"1234"), Ok(ByteSent::Queued { seq: 0 }));
}

#[test]
fn a_byte_receive_buffer_shorter_than_the_message_size_takes_nothing() {
    let (tx, mut rx) = byte_channel("b-buf", 2, 8, Overflow::DropNewest, &[1]).unwrap();
    tx[0].send(b"ab").unwrap();
    let small = RecvError::BufferTooSmall { len: 7, need: 8 };
    assert_eq!(rx.try_recv_into(&mut [0; 7]), Err(small));
    assert_eq!(rx.recv_timeout_into(&mut [0; 7], Duration::ZERO), Err(small));
    assert_eq!(rx.len().unwrap(), 1);
    let mut buf = [0u8; 8];
    assert_eq!(rx.recv_timeout_into(&mut buf, Duration::ZERO).unwrap().len, 2);
    assert_eq!(&buf[..2], b"ab");
}

#[test]
fn byte_sent_ns_is_monotone_within_the_tests_clock_readings() {
    let (tx, mut rx) = byte_channel("b-ts", 64, 8, Overflow::DropNewest, &[3, 1]).unwrap();
    let before = monotonic_ns();
    for i in 0..40u8 {
        tx[usize::from(i % 2)].send(&[i]).unwrap();
    }
    let after = monotonic_ns();
    let mut got = recv_all_bytes(&mut rx);
    got.sort_by_key(|(m, _)| m.seq);
    assert_eq!(got.len(), 40);
    for pair in got.windows(2) {
        assert!(pair[0].0.sent_ns <= pair[1].0.sent_ns, "{pair:?}");
    }
    assert!(got[0].0.sent_ns >= before);
    assert!(got[39].0.sent_ns <= after);
    assert!(got[39].0.sent_ns > got[0].0.sent_ns);
}

#[test]
fn byte_wait_reports_the_oldest_pending_send_without_taking_it() {
    let (tx, mut rx) = byte_channel("b-wait", 8, 4, Overflow::DropNewest, &[1, 5, 9]).unwrap();
    let start = Instant::now();
    assert_eq!(rx.wait(Duration::from_millis(20)), Ok(None));
    assert!(start.elapsed() >= Duration::from_millis(20));
    tx[1].send(b"5").unwrap();
    thread::sleep(Duration::from_millis(1));
    tx[0].send(b"1").unwrap();
    tx[2].send(b"9").unwrap();
    let oldest = rx.wait(Duration::ZERO).unwrap();
    // Asking again gives the same answer: nothing was taken.
    assert_eq!(rx.wait(Duration::from_secs(60)).unwrap(), oldest);
    assert_eq!(rx.len().unwrap(), 3);
    let got = recv_all_bytes(&mut rx);
    let order: Vec<&[u8]> = got.iter().map(|(_, b)| b.as_slice()).collect();
    assert_eq!(order, [b"9", b"5", b"1"]);
    // The oldest is the priority-5 message: neither the most urgent nor the least.
    assert_eq!(oldest, Some(got[1].0.sent_ns));
    assert!(got[1].0.sent_ns < got[2].0.sent_ns);
    assert_eq!(rx.wait(Duration::ZERO), Ok(None));
}

#[test]
fn byte_wait_is_woken_by_a_send_and_by_the_last_sender_leaving() {
    const TIMEOUT: Duration = Duration::from_secs(20);
    let (mut tx, mut rx) = byte_channel("b-wake", 4, 8, Overflow::DropNewest, &[1]).unwrap();
    let receiver = thread::spawn(move || {
        let start = Instant::now();
        let first = rx.wait(TIMEOUT);
        let first_took = start.elapsed();
        let mut buf = [0u8; 8];
        let got = rx.try_recv_into(&mut buf).map(|m| buf[..m.len].to_vec());
        let second = rx.wait(TIMEOUT);
        (first, first_took, got, second, start.elapsed() - first_took)
    });
    let sender = tx.pop().unwrap();
    thread::sleep(Duration::from_millis(50));
    let before = monotonic_ns();
    sender.send(b"hello").unwrap();
    thread::sleep(Duration::from_millis(50));
    drop(sender);
    let (first, first_took, got, second, second_took) = receiver.join().unwrap();
    let sent_ns = first.unwrap().expect("woken without a message");
    assert!(sent_ns >= before);
    assert!(first_took < TIMEOUT / 2, "not woken by the send ({first_took:?})");
    assert_eq!(got.unwrap(), b"hello");
    assert_eq!(second, Err(RecvError::Disconnected));
    assert!(
        second_took < TIMEOUT / 2,
        "not woken by the drop ({second_took:?})"
    );
}

#[test]
fn byte_overflow_rules_match_the_typed_ones() {
    // DropNewest: refused, counted, nothing queued touched.
    let (tx, mut rx) = byte_channel("b-dn", 2, 4, Overflow::DropNewest, &[1, 9]).unwrap();
    tx[0].send(b"1").unwrap();
    tx[0].send(b"2").unwrap();
    assert_eq!(tx[1].send(b"3"), Err(ByteSendError::Dropped));
    assert_eq!(tx[1].stats().unwrap(), counters(1, 0, 1, 0));
    let got: Vec<Vec<u8>> = recv_all_bytes(&mut rx).into_iter().map(|(_, b)| b).collect();
    assert_eq!(got, [b"1", b"2"]);

    // DropOldest: the oldest of the lowest priority goes, its Meta handed back.
    let (mut tx, mut rx) = byte_channel("b-do", 3, 4, Overflow::DropOldest, &[1, 9]).unwrap();
    tx[0].send(b"10").unwrap();
    tx[1].send(b"90").unwrap();
    tx[0].send(b"110").unwrap();
    match tx[1].send(b"91").unwrap() {
        ByteSent::Evicted { seq, victim } => {
            assert_eq!(seq, 3);
            assert_eq!(
                victim,
                Meta {
                    sender: SenderId(0),
                    priority: 1,
                    seq: 0,
                    sent_ns: victim.sent_ns,
                    len: 2
                }
            );
        }
        other => panic!("expected an eviction, got {other:?}"),
    }
    assert_eq!(byte_victim(tx[0].send(b"12")).len, 3);
    assert_eq!(tx[0].take_evictions().unwrap(), 2);
    assert_eq!(tx[0].take_evictions().unwrap(), 0);
    let got: Vec<Vec<u8>> = recv_all_bytes(&mut rx).into_iter().map(|(_, b)| b).collect();
    assert_eq!(got, [&b"90"[..], b"91", b"12"]);
    assert_eq!(rx.monitor().stats().unwrap().totals, counters(5, 3, 0, 2));

    // StealLowest: only a strictly more urgent sender takes a slot.
    let (mut tx, mut rx) = byte_channel("b-steal", 2, 4, Overflow::StealLowest, &[1, 5, 9]).unwrap();
    tx[0].send(b"10").unwrap();
    tx[1].send(b"50").unwrap();
    let v = byte_victim(tx[2].send(b"90"));
    assert_eq!((v.sender, v.seq, v.len), (SenderId(0), 0, 2));
    assert_eq!(tx[0].send(b"11"), Err(ByteSendError::Dropped));
    assert_eq!(tx[1].send(b"51"), Err(ByteSendError::Dropped));
    assert_eq!(byte_victim(tx[2].send(b"91")).seq, 1);
    assert_eq!(tx[2].send(b"92"), Err(ByteSendError::Dropped));
    assert_eq!(tx[1].take_evictions().unwrap(), 1);
    let got: Vec<Vec<u8>> = recv_all_bytes(&mut rx).into_iter().map(|(_, b)| b).collect();
    assert_eq!(got, [b"90", b"91"]);
    let per = rx.monitor().sender_stats().unwrap();
    assert_eq!(per[0].counters, counters(2, 0, 1, 1));
    assert_eq!(per[1].counters, counters(2, 0, 1, 1));
    assert_eq!(per[2].counters, counters(3, 2, 1, 0));
}

#[test]
fn byte_drain_hands_over_copies_outside_the_lock_in_priority_order() {
    let (tx, mut rx) = byte_channel("b-drain", 8, 3, Overflow::DropNewest, &[1, 2]).unwrap();
    for i in 0..3u8 {
        tx[0].send(&[i; 1]).unwrap();
        tx[1].send(&[100 + i; 3]).unwrap();
    }
    let mut got = Vec::new();
    let n = rx
        .drain(4, |meta, bytes| {
            assert_eq!(meta.len, bytes.len());
            got.push(bytes.to_vec());
            // The lock is not held here: the handler may send on the channel it drains.
            tx[0].send(b"in").unwrap();
        })
        .unwrap();
    assert_eq!(n, 4);
    assert_eq!(got, [vec![100; 3], vec![101; 3], vec![102; 3], vec![0]]);
    assert_eq!(rx.len().unwrap(), 2 + 4);
    assert_eq!(rx.drain(0, |_, _| unreachable!()).unwrap(), 0);
    assert_eq!(rx.drain(100, |_, _| {}).unwrap(), 6);
    assert_eq!(rx.drain(100, |_, _| unreachable!()).unwrap(), 0);
}

#[test]
fn byte_disconnection_both_ways() {
    let (tx, mut rx) = byte_channel("b-disc", 4, 2, Overflow::DropNewest, &[1, 2]).unwrap();
    tx[0].send(b"1").unwrap();
    tx[1].send(b"2").unwrap();
    drop(tx);
    let mut buf = [0u8; 2];
    // Pending messages outlive their senders.
    assert!(rx.wait(Duration::from_secs(60)).unwrap().is_some());
    assert_eq!(rx.try_recv_into(&mut buf).unwrap().priority, 2);
    assert_eq!(
        rx.recv_timeout_into(&mut buf, Duration::from_secs(60))
            .unwrap()
            .priority,
        1
    );
    assert_eq!(rx.try_recv_into(&mut buf), Err(RecvError::Disconnected));
    assert_eq!(
        rx.recv_timeout_into(&mut buf, Duration::from_secs(60)),
        Err(RecvError::Disconnected)
    );
    assert_eq!(rx.wait(Duration::from_secs(60)), Err(RecvError::Disconnected));
    assert_eq!(rx.drain(10, |_, _| unreachable!()).unwrap(), 0);

    let (tx, rx) = byte_channel("b-norx", 4, 2, Overflow::DropNewest, &[1]).unwrap();
    let monitor = rx.monitor();
    drop(rx);
    assert_eq!(tx[0].send(b"x"), Err(ByteSendError::Disconnected));
    assert_eq!(monitor.stats().unwrap().totals, counters(1, 0, 1, 0));
    assert_eq!(monitor.name(), "b-norx");
}

#[test]
fn byte_channel_creation_refuses_bad_shapes() {
    assert!(matches!(
        byte_channel("z", 0, 8, Overflow::DropNewest, &[1]).err().unwrap(),
        ChannelError::ZeroCapacity { .. }
    ));
    assert!(matches!(
        byte_channel("n", 4, 8, Overflow::DropNewest, &[]).err().unwrap(),
        ChannelError::NoSenders { .. }
    ));
    // capacity × message_size overflows usize: refused, not a panic or an abort.
    assert_eq!(
        byte_channel("huge", 1 << 20, usize::MAX / 2, Overflow::DropNewest, &[1])
            .err()
            .unwrap(),
        ChannelError::OutOfMemory {
            name: "huge".into(),
            capacity: 1 << 20,
            slot_bytes: usize::MAX / 2
        }
    );
    // Fits usize but not memory.
    assert!(matches!(
        byte_channel("big", 1 << 20, 1 << 42, Overflow::DropNewest, &[1])
            .err()
            .unwrap(),
        ChannelError::OutOfMemory { .. }
    ));
    // Empty messages are signals: allowed.
    let (tx, mut rx) = byte_channel("signal", 2, 0, Overflow::DropNewest, &[1]).unwrap();
    tx[0].send(&[]).unwrap();
    assert_eq!(tx[0].send(b"x"), Err(ByteSendError::TooLong { len: 1, max: 0 }));
    assert_eq!(rx.try_recv_into(&mut []).unwrap().len, 0);
}

#[test]
fn one_monitor_type_serves_typed_and_byte_channels() {
    let (typed_tx, typed_rx) = channel::<u64>("typed", 4, Overflow::DropNewest, &[1]).unwrap();
    let (byte_tx, byte_rx) = byte_channel("bytes", 2, 8, Overflow::DropOldest, &[1, 2]).unwrap();
    let monitors: Vec<Monitor> = vec![typed_rx.monitor(), byte_rx.monitor()];
    typed_tx[0].send(1).unwrap();
    byte_tx[1].send(b"x").unwrap();
    byte_tx[1].send(b"y").unwrap();
    byte_tx[0].send(b"z").unwrap();
    let reporter = thread::spawn(move || {
        monitors
            .iter()
            .map(|m| {
                (
                    m.name().to_string(),
                    m.stats().unwrap(),
                    m.sender_stats().unwrap().len(),
                )
            })
            .collect::<Vec<_>>()
    });
    let seen = reporter.join().unwrap();
    assert_eq!(seen[0].0, "typed");
    assert_eq!((seen[0].1.pending, seen[0].1.totals), (1, counters(1, 0, 0, 0)));
    assert_eq!(seen[0].2, 1);
    assert_eq!(seen[1].0, "bytes");
    assert_eq!(
        (seen[1].1.capacity, seen[1].1.overflow),
        (2, Overflow::DropOldest)
    );
    assert_eq!((seen[1].1.pending, seen[1].1.totals), (2, counters(3, 0, 0, 1)));
    assert_eq!(seen[1].2, 2);
    assert!(format!("{:?}", byte_rx.monitor()).contains("bytes"));
}

#[test]
fn no_allocation_on_byte_paths_after_creation() {
    let priorities: Vec<Priority> = (0..8).collect();
    for overflow in [Overflow::DropNewest, Overflow::DropOldest, Overflow::StealLowest] {
        let (mut tx, mut rx) = byte_channel("b-noalloc", 4, 64, overflow, &priorities).unwrap();
        let monitor = rx.monitor();
        let mut buf = [0u8; 64];
        let msg = [7u8; 64];
        let (n, (delivered, waited)) = allocations_in(|| {
            let (mut delivered, mut waited) = (0usize, 0usize);
            for round in 0..200usize {
                for (i, s) in tx.iter().enumerate() {
                    // Every outcome is exercised: queued, dropped, evicted, too long.
                    let _ = s.send(&msg[..(round + i) % 65]);
                }
                let _ = tx[1].send(&[0; 65]);
                let _ = tx[0].take_evictions();
                let _ = tx[3].stats();
                if rx.wait(Duration::ZERO).unwrap().is_some() {
                    waited += 1;
                }
                if round.is_multiple_of(3) {
                    delivered += rx.drain(2, |m, b| assert_eq!(m.len, b.len())).unwrap();
                }
                if rx.try_recv_into(&mut buf).is_ok() {
                    delivered += 1;
                }
                let _ = rx.recv_timeout_into(&mut buf, Duration::ZERO);
                let _ = rx.try_recv_into(&mut buf[..1]);
                let _ = rx.len();
                let _ = monitor.stats();
            }
            while rx.try_recv_into(&mut buf).is_ok() {}
            // Both sleeps to their timeout.
            assert_eq!(
                rx.recv_timeout_into(&mut buf, Duration::from_micros(100)),
                Err(RecvError::Timeout)
            );
            assert_eq!(rx.wait(Duration::from_micros(100)), Ok(None));
            (delivered, waited)
        });
        assert_eq!(n, 0, "{overflow:?}: {n} allocations after creation");
        assert!(delivered > 0 && waited > 0);
        let totals = monitor.stats().unwrap().totals;
        assert_eq!(totals.sent, 200 * 8);
        assert!(
            totals.dropped + totals.evicted > 0,
            "{overflow:?}: overflow never exercised"
        );
    }
}

#[test]
fn no_allocation_when_a_byte_send_wakes_a_waiting_receiver() {
    let (mut tx, mut rx) =
        byte_channel("b-noalloc-threads", 16, 256, Overflow::StealLowest, &[1, 2]).unwrap();
    let hi = tx.pop().unwrap();
    let lo = tx.pop().unwrap();
    let receiver = thread::spawn(move || {
        let mut buf = [0u8; 256];
        allocations_in(|| {
            let mut n = 0u64;
            let mut round = 0u64;
            loop {
                round += 1;
                // Both sleeps: `wait` then a drain, and `recv_timeout_into`.
                let r = if round.is_multiple_of(2) {
                    rx.wait(Duration::from_secs(60)).map(|_| {
                        n += rx.drain(4, |_, b| assert!(b.len() <= 256)).unwrap() as u64;
                    })
                } else {
                    rx.recv_timeout_into(&mut buf, Duration::from_secs(60))
                        .map(|_| n += 1)
                };
                match r {
                    Ok(()) => {}
                    Err(RecvError::Disconnected) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            n
        })
    });
    let sender = thread::spawn(move || {
        let msg = [3u8; 256];
        allocations_in(|| {
            for i in 0..2000usize {
                let _ = lo.send(&msg[..i % 257 % 256]);
                let _ = hi.send(&msg);
                if i.is_multiple_of(64) {
                    thread::yield_now();
                }
            }
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

/// A byte message derived from the typed message `k`: its length varies with `k` (0 to
/// `size`) so that lengths are checked too, and its bytes say `k`.
fn bytes_for(k: u32, size: usize) -> Vec<u8> {
    vec![k as u8; k as usize % (size + 1)]
}

proptest! {
    /// The same traffic through a typed and a byte channel: the same outcome for every send
    /// (sequence numbers and victims included), the same deliveries, the same counters, and
    /// `wait` reporting the oldest of what is left.
    #[test]
    fn byte_and_typed_channels_behave_alike(
        capacity in 1usize..6,
        size in 0usize..9,
        overflow in prop_oneof![Just(Overflow::DropNewest), Just(Overflow::DropOldest), Just(Overflow::StealLowest)],
        priorities in proptest::collection::vec(0u32..4, 5),
        ops in proptest::collection::vec(op(), 0..200),
    ) {
        let (ttx, mut trx) = channel::<u32>("typed", capacity, overflow, &priorities).unwrap();
        let (btx, mut brx) = byte_channel("bytes", capacity, size, overflow, &priorities).unwrap();
        let mut buf = vec![0u8; size];
        // Typed message of each sequence number, to know what an evicted byte message was.
        let mut by_seq = Vec::new();
        for (k, op) in ops.into_iter().enumerate() {
            let m = k as u32;
            match op {
                Op::Send(s) => {
                    let typed = ttx[s].send(m);
                    let bytes = btx[s].send(&bytes_for(m, size));
                    match (typed, bytes) {
                        (Ok(Sent::Queued { seq }), Ok(ByteSent::Queued { seq: bseq })) => {
                            prop_assert_eq!(seq, bseq);
                            by_seq.push(m);
                        }
                        (Ok(Sent::Evicted { seq, victim }), Ok(ByteSent::Evicted { seq: bseq, victim: bv })) => {
                            prop_assert_eq!(seq, bseq);
                            by_seq.push(m);
                            prop_assert_eq!(
                                (victim.sender, victim.priority, victim.seq),
                                (bv.sender, bv.priority, bv.seq)
                            );
                            prop_assert_eq!(by_seq[bv.seq as usize], victim.message);
                            prop_assert_eq!(bv.len, bytes_for(victim.message, size).len());
                        }
                        (Err(SendError::Dropped(_)), Err(ByteSendError::Dropped)) => {}
                        (t, b) => prop_assert!(false, "typed {:?}, bytes {:?}", t, b),
                    }
                }
                Op::Recv => {
                    let typed = trx.try_recv();
                    let bytes = brx.try_recv_into(&mut buf);
                    match (typed, bytes) {
                        (Ok(e), Ok(meta)) => {
                            prop_assert_eq!(
                                (e.sender, e.priority, e.seq),
                                (meta.sender, meta.priority, meta.seq)
                            );
                            let want = bytes_for(e.message, size);
                            prop_assert_eq!(&buf[..meta.len], want.as_slice());
                        }
                        (Err(t), Err(b)) => prop_assert_eq!(t, b),
                        (t, b) => prop_assert!(false, "typed {:?}, bytes {:?}", t, b),
                    }
                }
            }
        }
        let (tm, bm) = (trx.monitor(), brx.monitor());
        prop_assert_eq!(tm.stats().unwrap().totals, bm.stats().unwrap().totals);
        let tper: Vec<Counters> = tm.sender_stats().unwrap().iter().map(|s| s.counters).collect();
        let bper: Vec<Counters> = bm.sender_stats().unwrap().iter().map(|s| s.counters).collect();
        prop_assert_eq!(tper, bper);
        let twait = trx.wait(Duration::ZERO).unwrap();
        let bwait = brx.wait(Duration::ZERO).unwrap();
        let left: Vec<Envelope<u32>> = recv_all(&mut trx);
        let bleft = recv_all_bytes(&mut brx);
        prop_assert_eq!(twait, left.iter().map(|e| e.sent_ns).min());
        prop_assert_eq!(bwait, bleft.iter().map(|(m, _)| m.sent_ns).min());
        let tseqs: Vec<u64> = left.iter().map(|e| e.seq).collect();
        let bseqs: Vec<u64> = bleft.iter().map(|(m, _)| m.seq).collect();
        prop_assert_eq!(tseqs, bseqs);
    }
}
