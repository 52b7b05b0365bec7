//! The simulator as a [`pacer_adapt::Kernel`]: the adaptation engine's sensors and actuators
//! answered from simulated state, so controllers proven here are the ones that run on Linux.

use pacer_adapt::kernel::Wakeup;
use pacer_adapt::{DlState, FreqState, Kernel, KernelError, Tid};
use pacer_model::reservation::BW_SHIFT;
use pacer_model::Policy;

use crate::engine::{Sim, SimError};

/// A kernel handle over a running simulation.
pub struct SimKernel<'a>(pub(crate) &'a mut Sim);

impl SimKernel<'_> {
    fn check(&self, t: Tid) -> Result<(), KernelError> {
        if (t as usize) < self.0.thread_count() {
            Ok(())
        } else {
            Err(KernelError::NoSuchThread(t))
        }
    }
}

impl Kernel for SimKernel<'_> {
    fn now(&self) -> u64 {
        self.0.now()
    }
    fn cpus(&self) -> usize {
        self.0.cpu_count()
    }
    fn threads(&self) -> Vec<Tid> {
        (0..self.0.thread_count() as Tid).collect()
    }
    fn cpu_time(&self, t: Tid) -> Result<u64, KernelError> {
        self.0.cpu_time(t).ok_or(KernelError::NoSuchThread(t))
    }
    /// Time queued or throttled ([`Sim::run_delay`]).
    fn run_delay(&self, t: Tid) -> Result<Option<u64>, KernelError> {
        self.0.run_delay(t).map(Some).ok_or(KernelError::NoSuchThread(t))
    }
    fn trace_wakeups(&mut self, t: Tid, on: bool) -> Result<(), KernelError> {
        self.check(t)?;
        self.0.set_wake_tracing(t, on);
        Ok(())
    }
    fn drain_wakeups(&mut self, t: Tid, out: &mut Vec<u64>) -> Result<(), KernelError> {
        let mut marked = Vec::new();
        self.drain_wakeups_marked(t, &mut marked)?;
        out.extend(marked.into_iter().filter(Wakeup::is_wakeup).map(|w| w.t_ns));
        Ok(())
    }
    /// A wake-up is marked [`Origin::Timer`](pacer_adapt::Origin::Timer) when it releases a job
    /// at the expiry of a periodic timer (`Event::Timer`), and each `Event::Timer` the thread
    /// sleeps on is recorded as [`Origin::TimerSet`](pacer_adapt::Origin::TimerSet) with its
    /// expiry. A late thread does not sleep on its timer (rt-app's semantics, which `pacer run`
    /// follows), so it records neither. A `Sleep` is neither: the simulator's
    /// experiments use sleeps for I/O waits (on Linux, rt-app's `sleep` is a clock_nanosleep,
    /// which the tracer marks).
    fn drain_wakeups_marked(&mut self, t: Tid, out: &mut Vec<Wakeup>) -> Result<(), KernelError> {
        self.check(t)?;
        self.0.drain_wake_log(t, out);
        Ok(())
    }
    fn dl_state(&self, t: Tid) -> Result<Option<DlState>, KernelError> {
        self.check(t)?;
        Ok(self
            .0
            .dl_state(t)
            .map(|(deadline, runtime)| DlState { deadline, runtime }))
    }
    fn policy(&self, t: Tid) -> Result<Policy, KernelError> {
        self.0.policy_of(t).ok_or(KernelError::NoSuchThread(t))
    }
    fn set_policy(&mut self, t: Tid, p: Policy) -> Result<(), KernelError> {
        self.check(t)?;
        self.0.set_policy(t, p).map_err(|(busy, msg)| {
            if busy {
                KernelError::Admission(msg)
            } else {
                KernelError::Invalid(msg)
            }
        })
    }
    /// Admission per root domain: the domain of `t`'s CPUs (see [`Sim::kernel_limit`] for all).
    fn dl_bandwidth_limit(&self, t: Option<Tid>) -> f64 {
        match t.and_then(|t| self.0.dl_limit_fixed(t)) {
            Some(b) => b as f64 / (1u64 << BW_SHIFT) as f64,
            None => self.0.kernel_limit(),
        }
    }
    fn frequency(&self, cluster: usize) -> Result<FreqState, KernelError> {
        match (
            self.0.cluster_frequency(cluster),
            self.0.available_frequencies(cluster),
        ) {
            (Some(cur), Some(avail)) => Ok(FreqState {
                cur_khz: cur,
                available_khz: avail.to_vec(),
            }),
            _ => Err(no_cluster(cluster, self.0.cluster_count())),
        }
    }
    fn set_frequency(&mut self, cluster: usize, khz: u32) -> Result<(), KernelError> {
        self.0.set_frequency(cluster, khz).map_err(|e| match e {
            SimError::NoSuchCluster { cluster, clusters } => no_cluster(cluster, clusters),
            e => KernelError::Invalid(e.to_string()),
        })
    }
}

fn no_cluster(cluster: usize, clusters: usize) -> KernelError {
    KernelError::Unsupported(format!(
        "the simulated platform has frequency domains 0..{clusters}, not {cluster}"
    ))
}
