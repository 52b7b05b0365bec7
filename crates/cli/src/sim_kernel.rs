//! The simulated kernel's scheduler settings that `pacer sim` exposes: which fair class it has
//! (EEVDF, CFS, VT-CFS), its tick, the fair server, RT throttling, timer slack and how the fair
//! class balances threads between CPUs.

use anyhow::{bail, Result};
use pacer_model::Duration;
use pacer_sim::{CfsTunables, FairBalance, FairModel, SimConfig, SLICE_RANGE_NS};
use serde::Serialize;

use crate::analyze::parse_duration;

/// How `--fair-balance` places fair threads on CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FairBalanceArg {
    /// As Linux 6.18: a waking thread takes an idle CPU only if its previous one or the one it
    /// last woke on is idle, or if the LLC is below about 60 % busy (SIS_UTIL); idle CPUs pull
    /// from busy ones at their ticks and, by NI_RANDOM's dice, when they go idle; cache-hot
    /// threads (ran within 0.5 ms) stay.
    Linux,
    /// Any idle CPU at every wake-up, and a pull by every CPU that goes idle: the best placement.
    Ideal,
}

/// The fair class `--fair` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FairArg {
    /// EEVDF as in Linux 6.18 (the default; what kernels ≥ 6.6 run).
    Eevdf,
    /// CFS as in Linux < 6.6, with Linux's tunables scaled for --cpus.
    Cfs,
    /// CFS with the VT-CFS paper's Android tunables (P = 5 ms, 1 ms per task above 5).
    CfsAndroid,
    /// VT-CFS (Huh, Yoo, Hong): CFS with the Android tunables, a preemption tick and eq. 7.
    VtCfs,
}

#[derive(clap::Args, Clone, Debug)]
pub struct KernelArgs {
    /// Fair class of the simulated kernel (SCHED_OTHER and SCHED_IDLE threads).
    #[arg(long, value_enum, default_value = "eevdf")]
    pub fair: FairArg,
    /// EEVDF base slice [default: 0.7ms · (1 + log2(min(cpus, 8))), as Linux 6.18].
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub base_slice: Option<Duration>,
    /// VT-CFS preemption tick, a multiple of --tick.
    #[arg(long, value_parser = parse_duration, default_value = "4ms", value_name = "DUR")]
    pub preemption_tick: Duration,
    /// Scheduler tick (CONFIG_HZ=250: 4ms). Without HRTICK the fair class notices a used-up
    /// slice only at ticks; schedutil re-evaluates at ticks too.
    #[arg(long, value_parser = parse_duration, default_value = "4ms", value_name = "DUR")]
    pub tick: Duration,
    /// Time of the first tick, in [0, tick) [default: drawn from --seed, as where the jiffies
    /// fall against a program's start is arbitrary on a real machine].
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub tick_phase: Option<Duration>,
    /// Model RT throttling of each CPU's root rt_rq (sched_rt_runtime_us per
    /// sched_rt_period_us), as kernels built with CONFIG_RT_GROUP_SCHED (this machine's) do.
    #[arg(long)]
    pub rt_throttling: bool,
    /// A kernel without the fair server (Linux < 6.12): no 50ms/1s reserve for fair threads
    /// starved by rt ones, and none in admission control.
    #[arg(long)]
    pub no_fair_server: bool,
    /// Threads do not read their CPU time at the end of each job. By default they do, as
    /// `pacer run` does to measure it: on Linux that accounts the running thread there, and EEVDF
    /// may preempt it before it sleeps (docs/simulator.md). Use this to model rt-app itself.
    #[arg(long)]
    pub no_job_end_cpu_time: bool,
    /// timer_slack_ns of SCHED_OTHER, SCHED_BATCH and SCHED_IDLE threads: their sleeps and
    /// timers expire this much late (rt and deadline threads have none). 0 models
    /// prctl(PR_SET_TIMERSLACK, 1)-like precise sleepers.
    #[arg(long, value_parser = parse_duration, default_value = "50us", value_name = "DUR")]
    pub timer_slack: Duration,
    /// How fair threads are placed on and moved between CPUs (docs/simulator.md, "Load
    /// balancing of the fair class").
    #[arg(long, value_enum, default_value = "linux")]
    pub fair_balance: FairBalanceArg,
}

impl Default for KernelArgs {
    fn default() -> Self {
        KernelArgs {
            fair: FairArg::Eevdf,
            base_slice: None,
            preemption_tick: Duration::from_ms(4),
            tick: Duration::from_ms(4),
            tick_phase: None,
            rt_throttling: false,
            no_fair_server: false,
            no_job_end_cpu_time: false,
            timer_slack: Duration(pacer_sim::DEFAULT_TIMER_SLACK_NS),
            fair_balance: FairBalanceArg::Linux,
        }
    }
}

/// The simulated kernel's settings as recorded in `--json` output.
#[derive(Serialize, Debug, Clone)]
pub struct KernelInfo {
    pub fair: &'static str,
    /// EEVDF base slice, or CFS's (latency, min_granularity, wakeup_granularity), ns.
    pub base_slice_ns: Option<u64>,
    pub cfs_tunables_ns: Option<[u64; 3]>,
    pub preemption_tick_ns: Option<u64>,
    pub tick_ns: u64,
    pub tick_phase_ns: Option<u64>,
    pub rt_throttling: bool,
    pub fair_server: bool,
    pub job_end_cpu_time: bool,
    pub timer_slack_ns: u64,
    pub fair_balance: &'static str,
}

impl KernelArgs {
    /// Sets `cfg`'s scheduler for `cpus` CPUs; errors name the option.
    pub fn apply(&self, cfg: &mut SimConfig, cpus: usize) -> Result<KernelInfo> {
        let tick = self.tick.ns();
        if tick == 0 {
            bail!("--tick: expected a duration > 0");
        }
        if let Some(p) = self.tick_phase {
            if p.ns() >= tick {
                bail!("--tick-phase {p}: expected a time in [0, --tick = {})", self.tick);
            }
        }
        if self.base_slice.is_some() && self.fair != FairArg::Eevdf {
            bail!("--base-slice: only for --fair eevdf (CFS derives its slices from its tunables)");
        }
        let model = match self.fair {
            FairArg::Eevdf => {
                let mut m = FairModel::eevdf(cpus);
                if let (Some(s), FairModel::Eevdf { base_slice, .. }) = (self.base_slice, &mut m) {
                    if !(SLICE_RANGE_NS.0..=SLICE_RANGE_NS.1).contains(&s.ns()) {
                        bail!("--base-slice {s}: expected 0.1ms to 100ms, the kernel's range");
                    }
                    *base_slice = s.ns();
                }
                m
            }
            FairArg::Cfs => FairModel::Cfs(CfsTunables::linux(cpus)),
            FairArg::CfsAndroid => FairModel::Cfs(CfsTunables::android()),
            FairArg::VtCfs => {
                let pt = self.preemption_tick.ns();
                if pt == 0 || !pt.is_multiple_of(tick) {
                    bail!(
                        "--preemption-tick {}: expected a non-zero multiple of --tick ({})",
                        self.preemption_tick,
                        self.tick
                    );
                }
                FairModel::VtCfs {
                    cfs: CfsTunables::android(),
                    preemption_tick: pt,
                }
            }
        };
        cfg.fair = Some(model);
        cfg.tick_ns = tick;
        cfg.tick_phase = self.tick_phase.map(Duration::ns);
        cfg.rt_throttling = self.rt_throttling;
        cfg.job_end_cpu_time = !self.no_job_end_cpu_time;
        cfg.timer_slack = self.timer_slack.ns();
        cfg.fair_balance = match self.fair_balance {
            FairBalanceArg::Linux => FairBalance::Linux,
            FairBalanceArg::Ideal => FairBalance::Ideal,
        };
        if self.no_fair_server {
            cfg.fair_server = None;
        }
        let (base_slice_ns, cfs_tunables_ns, preemption_tick_ns) = match model {
            FairModel::Eevdf { base_slice, .. } => (Some(base_slice), None, None),
            FairModel::Cfs(c) => (
                None,
                Some([c.latency, c.min_granularity, c.wakeup_granularity]),
                None,
            ),
            FairModel::VtCfs {
                cfs: c,
                preemption_tick,
            } => (
                None,
                Some([c.latency, c.min_granularity, c.wakeup_granularity]),
                Some(preemption_tick),
            ),
        };
        Ok(KernelInfo {
            fair: model.name(),
            base_slice_ns,
            cfs_tunables_ns,
            preemption_tick_ns,
            tick_ns: tick,
            tick_phase_ns: cfg.tick_phase,
            rt_throttling: cfg.rt_throttling,
            fair_server: cfg.fair_server.is_some(),
            job_end_cpu_time: cfg.job_end_cpu_time,
            timer_slack_ns: cfg.timer_slack,
            fair_balance: match cfg.fair_balance {
                FairBalance::Linux => "linux",
                FairBalance::Ideal => "ideal",
            },
        })
    }
}
