//! A trivial, deterministic fake [`Kernel`] for driving controllers in tests.
//!
//! Threads are periodic job generators: at each activation the job's whole CPU demand is charged
//! at once (scaled by f_max/f_cur when a frequency domain is modelled), and a wake-up is recorded
//! if tracing is on (marked a timer's with `timer_marks`), with the thread's extra and random
//! ones. "Hog" threads consume a fixed fraction of wall time. Admission control is the
//! kernel's rule Σ Q/P ≤ limit (floats are enough here), and every actuator call is logged with
//! its time so tests can check ordering.
#![allow(dead_code)]

use std::collections::BTreeMap;

use pacer_adapt::kernel::Wakeup;
use pacer_adapt::{Controller, FreqState, Kernel, KernelError, Tid};
use pacer_model::{Policy, Reservation};

pub const MS: u64 = 1_000_000;
pub const S: u64 = 1_000_000_000;

/// An actuator call.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    SetPolicy { tid: Tid, policy: Policy },
    SetFrequency { khz: u32 },
    Trace { tid: Tid, on: bool },
}

/// CPU demand (ns at the maximum frequency) of the job activated at time `t`.
pub type Work = Box<dyn Fn(u64) -> u64>;

pub struct FakeThread {
    /// 0: not periodic.
    pub period: u64,
    pub work: Work,
    /// Extra wake-ups inside each period (offsets, ns), e.g. I/O.
    pub extra_wakeups: Vec<u64>,
    /// Wake-ups per period at pseudo-random offsets (deterministic in the activation time),
    /// e.g. other threads' signals.
    pub random_wakeups: usize,
    /// The activations' wake-ups are a timer's (`Wakeup::timer`); the others never are.
    pub timer_marks: bool,
    /// Fraction of wall time consumed continuously.
    pub hog: f64,
    pub cpu: u64,
    pub next: u64,
    pub tracing: bool,
    pub wakeups: Vec<Wakeup>,
    pub policy: Policy,
}

impl FakeThread {
    pub fn periodic(period: u64, work: Work) -> Self {
        FakeThread {
            period,
            work,
            extra_wakeups: Vec::new(),
            random_wakeups: 0,
            timer_marks: false,
            hog: 0.0,
            cpu: 0,
            next: 0,
            tracing: false,
            wakeups: Vec::new(),
            policy: Policy::Other { nice: 0 },
        }
    }

    pub fn hog(fraction: f64) -> Self {
        FakeThread {
            hog: fraction,
            ..FakeThread::periodic(0, Box::new(|_| 0))
        }
    }
}

pub struct FakeKernel {
    pub now: u64,
    pub cpus: usize,
    pub limit: f64,
    pub threads: BTreeMap<Tid, FakeThread>,
    pub freq: Option<FreqState>,
    pub log: Vec<(u64, Op)>,
    /// Refuse every SCHED_DEADLINE request with EBUSY.
    pub deny_admission: bool,
}

impl FakeKernel {
    pub fn new(cpus: usize, limit: f64) -> Self {
        FakeKernel {
            now: 0,
            cpus,
            limit,
            threads: BTreeMap::new(),
            freq: None,
            log: Vec::new(),
            deny_admission: false,
        }
    }

    pub fn with_freq(mut self, cur_khz: u32, available_khz: Vec<u32>) -> Self {
        self.freq = Some(FreqState {
            cur_khz,
            available_khz,
        });
        self
    }

    /// A periodic thread with constant work per job (ns at the maximum frequency).
    pub fn periodic(&mut self, tid: Tid, period: u64, work: u64) {
        self.threads
            .insert(tid, FakeThread::periodic(period, Box::new(move |_| work)));
    }

    fn scale(&self, w: u64) -> u64 {
        match &self.freq {
            Some(f) => {
                let max = f.available_khz.iter().copied().max().unwrap_or(f.cur_khz) as u128;
                (w as u128 * max / f.cur_khz.max(1) as u128) as u64
            }
            None => w,
        }
    }

    /// Advances time to `t`: activations at or before `t` happen.
    pub fn advance_to(&mut self, t: u64) {
        assert!(t >= self.now);
        let dt = t - self.now;
        let tids: Vec<Tid> = self.threads.keys().copied().collect();
        for tid in tids {
            loop {
                let th = &self.threads[&tid];
                if th.period == 0 || th.next > t {
                    break;
                }
                let a = th.next;
                let w = self.scale((th.work)(a));
                let th = self.threads.get_mut(&tid).unwrap();
                if th.tracing {
                    let timer = th.timer_marks;
                    th.wakeups.push(Wakeup::woken(a, timer));
                    for &o in &th.extra_wakeups {
                        th.wakeups.push(Wakeup::other(a + o));
                    }
                    // splitmix64 of the activation time: reproducible offsets within the period.
                    let mut x = a ^ 0x9e37_79b9_7f4a_7c15;
                    for _ in 0..th.random_wakeups {
                        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                        let mut z = x;
                        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                        z ^= z >> 31;
                        th.wakeups.push(Wakeup::other(a + z % th.period));
                    }
                }
                th.cpu += w;
                th.next += th.period;
            }
            let th = self.threads.get_mut(&tid).unwrap();
            th.cpu += (th.hog * dt as f64) as u64;
        }
        self.now = t;
    }

    pub fn deadline(&self, tid: Tid) -> Option<Reservation> {
        match self.threads.get(&tid)?.policy {
            Policy::Deadline(r) => Some(r),
            _ => None,
        }
    }

    /// (time, runtime) of every SCHED_DEADLINE change of `tid`.
    pub fn budgets(&self, tid: Tid) -> Vec<(u64, u64)> {
        self.log
            .iter()
            .filter_map(|(t, op)| match op {
                Op::SetPolicy {
                    tid: x,
                    policy: Policy::Deadline(r),
                } if *x == tid => Some((*t, r.runtime.0)),
                _ => None,
            })
            .collect()
    }

    pub fn frequency_switches(&self) -> Vec<(u64, u32)> {
        self.log
            .iter()
            .filter_map(|(t, op)| match op {
                Op::SetFrequency { khz } => Some((*t, *khz)),
                _ => None,
            })
            .collect()
    }

    fn total_bw_except(&self, tid: Tid) -> f64 {
        self.threads
            .iter()
            .filter(|(t, _)| **t != tid)
            .filter_map(|(_, th)| match th.policy {
                Policy::Deadline(r) => Some(r.bandwidth()),
                _ => None,
            })
            .sum()
    }
}

impl Kernel for FakeKernel {
    fn now(&self) -> u64 {
        self.now
    }
    fn cpus(&self) -> usize {
        self.cpus
    }
    fn threads(&self) -> Vec<Tid> {
        self.threads.keys().copied().collect()
    }
    fn cpu_time(&self, t: Tid) -> Result<u64, KernelError> {
        self.threads
            .get(&t)
            .map(|th| th.cpu)
            .ok_or(KernelError::NoSuchThread(t))
    }
    fn trace_wakeups(&mut self, t: Tid, on: bool) -> Result<(), KernelError> {
        let th = self.threads.get_mut(&t).ok_or(KernelError::NoSuchThread(t))?;
        th.tracing = on;
        self.log.push((self.now, Op::Trace { tid: t, on }));
        Ok(())
    }
    fn drain_wakeups(&mut self, t: Tid, out: &mut Vec<u64>) -> Result<(), KernelError> {
        let mut marked = Vec::new();
        self.drain_wakeups_marked(t, &mut marked)?;
        out.extend(marked.into_iter().map(|w| w.t_ns));
        Ok(())
    }
    fn drain_wakeups_marked(&mut self, t: Tid, out: &mut Vec<Wakeup>) -> Result<(), KernelError> {
        let th = self.threads.get_mut(&t).ok_or(KernelError::NoSuchThread(t))?;
        th.wakeups.sort_unstable_by_key(|w| w.t_ns);
        out.append(&mut th.wakeups);
        Ok(())
    }
    fn dl_state(&self, t: Tid) -> Result<Option<pacer_adapt::DlState>, KernelError> {
        self.threads
            .get(&t)
            .map(|_| None)
            .ok_or(KernelError::NoSuchThread(t))
    }
    fn policy(&self, t: Tid) -> Result<Policy, KernelError> {
        self.threads
            .get(&t)
            .map(|th| th.policy)
            .ok_or(KernelError::NoSuchThread(t))
    }
    fn set_policy(&mut self, t: Tid, p: Policy) -> Result<(), KernelError> {
        if !self.threads.contains_key(&t) {
            return Err(KernelError::NoSuchThread(t));
        }
        if let Policy::Deadline(r) = p {
            r.validate().map_err(|e| KernelError::Invalid(e.to_string()))?;
            if self.deny_admission || self.total_bw_except(t) + r.bandwidth() > self.limit + 1e-12 {
                return Err(KernelError::Admission(format!(
                    "{} + {}",
                    self.total_bw_except(t),
                    r.bandwidth()
                )));
            }
        }
        self.threads.get_mut(&t).unwrap().policy = p;
        self.log.push((self.now, Op::SetPolicy { tid: t, policy: p }));
        Ok(())
    }
    fn dl_bandwidth_limit(&self, _t: Option<Tid>) -> f64 {
        self.limit
    }
    fn frequency(&self, _cluster: usize) -> Result<FreqState, KernelError> {
        self.freq
            .clone()
            .ok_or_else(|| KernelError::Unsupported("no cpufreq".into()))
    }
    fn set_frequency(&mut self, _cluster: usize, khz: u32) -> Result<(), KernelError> {
        let f = self
            .freq
            .as_mut()
            .ok_or_else(|| KernelError::Unsupported("no cpufreq".into()))?;
        if !f.available_khz.contains(&khz) {
            return Err(KernelError::Invalid(format!("{khz} kHz")));
        }
        f.cur_khz = khz;
        self.log.push((self.now, Op::SetFrequency { khz }));
        Ok(())
    }
}

/// Hosts a periodic controller: ticks at now + period, now + 2·period, … up to `until` inclusive.
pub fn run_until(k: &mut FakeKernel, c: &mut dyn Controller, until: u64) {
    let p = c.period().expect("periodic controller");
    loop {
        let t = k.now + p;
        if t > until {
            break;
        }
        k.advance_to(t);
        c.tick(k);
    }
}
