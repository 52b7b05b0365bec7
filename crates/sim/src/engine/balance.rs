//! Where fair threads run, as Linux 6.18's fair class decides it (`kernel/sched/fair.c`), rather
//! than wherever a CPU is idle:
//!
//! - **Wake-up** (`select_task_rq_fair()` → `select_idle_sibling()`): the previous CPU if it is
//!   idle; else the CPU the thread woke on before (`recent_used_cpu`) if that one is idle; else,
//!   if the LLC is not too busy, the first idle CPU of a scan of at most `nr_idle_scan` of its
//!   CPUs (`select_idle_cpu()` with SIS_UTIL); else the previous CPU, busy or not. SIS_UTIL sizes
//!   the scan from the LLC's average fair utilisation x (PELT, 0–1024, `update_idle_cpu_scan()`):
//!   `nr_idle_scan = llc_size · (1024 − min(x² · 117² / (10⁴ · 1024), 1024)) / 1024`, so on two
//!   CPUs beyond about 60 % the scan stops and a waking thread queues behind a busy previous CPU
//!   while the other idles.
//! - **New threads** (`wake_up_new_task()` → `sched_balance_find_dst_cpu()`): an idle CPU, else
//!   the one with the fewest runnable threads (the parent's CPU on ties).
//! - **A CPU going idle** (`sched_balance_newidle()`): it pulls only while the root domain is
//!   overloaded (some CPU had two runnable threads within the busy balance interval) and only if
//!   NI_RANDOM's dice let it try: with probability (1 + ratio) / 1024, where ratio follows the
//!   share of tries that pulled (`update_newidle_stats()`, weighted by 1/probability, halved every
//!   1024 calls). The kernel builds its domains with 512, but the ratio is the machine's history
//!   (it moves only every 512 calls, seconds of a busy machine): it starts at
//!   `SimConfig::newidle_ratio`, a machine's figure. A task that ran within
//!   `sysctl_sched_migration_cost` (0.5 ms) is cache hot and stays (`task_hot()`).
//! - **Idle balancing from a busy CPU's tick** (`nohz_balancer_kick()` →
//!   `sched_balance_domains(CPU_IDLE)`): a CPU with two runnable threads kicks an idle CPU of its
//!   domain at each tick, which pulls the queued fair thread that ran least recently unless it is
//!   cache hot; after more failed attempts than `cache_nice_tries` (1) a hot one goes too, and a
//!   success resets the count (`nr_balance_failed`).
//!
//! Not modelled: `wake_affine()`'s load comparison (WA_WEIGHT: a wake-up targets the previous
//! CPU), util_est in the utilisation, balancing between LLCs beyond the idle pulls above, and the
//! busy CPUs' own periodic balancing (which moves nothing between two CPUs of one task each).
//! `SimConfig::fair_balance` = [`FairBalance::Ideal`] keeps the simulator's earlier placement:
//! any idle CPU at every wake-up, and a pull at every CPU that goes idle.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Sim, State};
use crate::class::Key;
use crate::record::ThreadId;

/// How the fair class places and moves threads between CPUs ([`super::SimConfig::fair_balance`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FairBalance {
    /// As Linux 6.18 (the module's doc): SIS_UTIL-limited wake-up placement, NI_RANDOM newidle
    /// balancing, idle balancing kicked from busy CPUs' ticks, cache-hot tasks kept.
    #[default]
    Linux,
    /// An idle CPU at every wake-up and a pull by every CPU that goes idle: the best a load
    /// balancer could do, and the simulator's placement before Linux's was modelled.
    Ideal,
}

/// `sysctl_sched_migration_cost`: a task that ran this recently is cache hot.
const MIGRATION_COST_NS: u64 = 500_000;
/// `sd->imbalance_pct` of an LLC (MC) domain.
const LLC_IMBALANCE_PCT: u64 = 117;
/// `sd->cache_nice_tries` of an LLC domain.
const CACHE_NICE_TRIES: u32 = 1;
/// `sd->newidle_ratio` of a domain the kernel has just built (`sd_init()`).
pub const BOOT_NEWIDLE_RATIO: u64 = 512;

/// `sd->busy_factor`: a busy CPU balances (and the overload flag is refreshed) every
/// `balance_interval · busy_factor` ms, `balance_interval` being the domain's weight.
const BUSY_FACTOR: u64 = 16;

/// The balancing state of one root domain (the sched domain the idle CPUs balance).
#[derive(Debug, Clone)]
struct LbDomain {
    /// `sd->nr_balance_failed`.
    nr_balance_failed: u32,
    /// `sd->newidle_ratio`, `newidle_call`, `newidle_success`.
    newidle_ratio: u64,
    newidle_calls: u64,
    newidle_success: u64,
    /// When a CPU of the domain last had two runnable threads (`rd->overloaded` is set then and
    /// stays set until a periodic balance finds no such CPU).
    overloaded_at: Option<u64>,
    /// How long the overload flag outlives the overload: the busy balance interval.
    overload_hold: u64,
}

/// Fair-class balancing state ([`FairBalance::Linux`]), boxed in [`Sim`].
#[derive(Debug)]
pub(crate) struct FairLb {
    rng: ChaCha8Rng,
    dom: Vec<LbDomain>,
    /// Per CPU, the CPUs of its LLC (its cluster), ascending.
    llc: Vec<Vec<usize>>,
}

impl FairLb {
    /// `llc[c]` the CPUs sharing CPU c's last-level cache, `domains[d]` each root domain's CPUs,
    /// `tick` the scheduler tick (ns).
    pub(crate) fn new(
        seed: u64,
        llc: Vec<Vec<usize>>,
        domains: &[Vec<usize>],
        tick: u64,
        newidle_ratio: u64,
    ) -> Self {
        FairLb {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x6c62_6e65_7769_646c),
            dom: domains
                .iter()
                .map(|cpus| {
                    // get_sd_balance_interval(sd, busy): weight ms × busy_factor, in jiffies, − 1.
                    let ms = cpus.len() as u64 * BUSY_FACTOR;
                    let jiffies = (ms * 1_000_000).div_ceil(tick.max(1)).saturating_sub(1).max(1);
                    LbDomain {
                        nr_balance_failed: 0,
                        newidle_ratio: newidle_ratio.min(1024),
                        newidle_calls: 0,
                        newidle_success: 0,
                        overloaded_at: None,
                        overload_hold: jiffies * tick,
                    }
                })
                .collect(),
            llc,
        }
    }
}

/// SIS_UTIL's `nr_idle_scan` for an LLC of `llc_size` CPUs whose fair utilisations sum to
/// `sum_util` (`update_idle_cpu_scan()`).
pub(crate) fn nr_idle_scan(sum_util: u64, llc_size: u64) -> u64 {
    let x = sum_util / llc_size.max(1);
    let tmp = (x * x * LLC_IMBALANCE_PCT * LLC_IMBALANCE_PCT / (10_000 * 1024)).min(1024);
    (1024 - tmp) * llc_size / 1024
}

impl Sim {
    /// `available_idle_cpu()`: nothing runs or waits on `cpu`.
    fn cpu_idle(&self, cpu: usize) -> bool {
        self.cpus[cpu].curr.is_none() && self.cpus[cpu].rq.nr_queued() == 0
    }

    /// Threads runnable on `cpu`, the running one included (`rq->nr_running`).
    fn nr_running(&self, cpu: usize) -> usize {
        self.cpus[cpu].rq.nr_queued() + usize::from(self.cpus[cpu].curr.is_some())
    }

    /// `select_idle_sibling()` for a fair thread waking up (module doc).
    pub(super) fn select_fair_wakeup(&mut self, t: ThreadId) -> usize {
        let th = &self.threads[t as usize];
        let prev = th.cpu as usize;
        let allowed = |c: usize| th.affinity[c];
        if allowed(prev) && self.cpu_idle(prev) {
            self.threads[t as usize].recent_cpu = prev as u32;
            return prev;
        }
        let recent = th.recent_cpu as usize;
        let lb = self.lb.as_ref().expect("Linux balancing");
        let llc = &lb.llc[prev];
        if recent != prev && allowed(recent) && llc.contains(&recent) && self.cpu_idle(recent) {
            self.threads[t as usize].recent_cpu = prev as u32;
            return recent;
        }
        let sum: u64 = llc.iter().map(|&c| self.fair_util(c)).sum();
        let mut nr = nr_idle_scan(sum, llc.len() as u64) + 1;
        let mut found = None;
        if nr > 1 {
            let start = llc.iter().position(|&c| c > prev).unwrap_or(0);
            for k in 0..llc.len() {
                let c = llc[(start + k) % llc.len()];
                if !allowed(c) {
                    continue;
                }
                nr -= 1;
                if nr == 0 {
                    break;
                }
                if self.cpu_idle(c) {
                    found = Some(c);
                    break;
                }
            }
        }
        let target = found.unwrap_or(if allowed(prev) {
            prev
        } else {
            (0..self.cpus.len()).find(|&c| allowed(c)).unwrap_or(prev)
        });
        self.threads[t as usize].recent_cpu = prev as u32;
        target
    }

    /// `sched_balance_find_dst_cpu()` for a thread that starts: an idle CPU (its own first),
    /// else the allowed CPU with the fewest runnable threads (its own on ties).
    pub(super) fn select_fair_new(&mut self, t: ThreadId) -> usize {
        let th = &self.threads[t as usize];
        let prev = th.cpu as usize;
        let allowed = |c: usize| th.affinity[c];
        let order = std::iter::once(prev)
            .chain(0..self.cpus.len())
            .filter(|&c| allowed(c));
        if let Some(c) = order.clone().find(|&c| self.cpu_idle(c)) {
            return c;
        }
        order.min_by_key(|&c| self.nr_running(c)).unwrap_or(prev)
    }

    /// The fair PELT utilisation of `cpu` now (0–1024).
    fn fair_util(&self, cpu: usize) -> u64 {
        self.signals_now(cpu).map_or(0, |s| s.fair.util_avg)
    }

    /// `task_hot()`: `t` ran on its CPU within the migration cost (SCHED_IDLE threads never are).
    fn task_hot(&self, t: ThreadId) -> bool {
        let th = &self.threads[t as usize];
        let idle_policy = matches!(th.policy, pacer_workload::Policy::Idle);
        !idle_policy && th.last_ran != u64::MAX && self.now.saturating_sub(th.last_ran) < MIGRATION_COST_NS
    }

    /// A CPU of `cpu`'s root domain may have two runnable threads now: the overload flag is set.
    pub(super) fn note_overload(&mut self, cpu: usize) {
        if self.nr_running(cpu) >= 2 {
            let d = self.root_domain[cpu];
            let now = self.now;
            if let Some(lb) = self.lb.as_mut() {
                lb.dom[d].overloaded_at = Some(now);
            }
        }
    }

    /// `rd->overloaded` for `cpu`'s root domain: a CPU has two runnable threads, or had within the
    /// busy balance interval.
    fn overloaded(&self, cpu: usize) -> bool {
        let d = self.root_domain[cpu];
        let lb = self.lb.as_ref().expect("Linux balancing");
        if self.root_domains[d].cpus.iter().any(|&c| self.nr_running(c) >= 2) {
            return true;
        }
        let dom = &lb.dom[d];
        dom.overloaded_at
            .is_some_and(|at| self.now < at.saturating_add(dom.overload_hold))
    }

    /// `sched_balance_newidle()` of `cpu`, which goes idle: whether it may pull the fair thread
    /// `t` that the pull found (`None`: nothing to pull), rolling NI_RANDOM's dice and keeping its
    /// statistics.
    pub(super) fn newidle_allows(&mut self, cpu: usize, t: Option<ThreadId>) -> bool {
        if !self.overloaded(cpu) {
            return false;
        }
        let d = self.root_domain[cpu];
        let hot = t.is_some_and(|t| self.task_hot(t));
        let lb = self.lb.as_mut().expect("Linux balancing");
        let w = 1 + lb.dom[d].newidle_ratio;
        let d1k = lb.rng.random_range(0..1024u64);
        let (tried, pulled) = if d1k > w {
            (false, false)
        } else {
            (true, t.is_some() && !hot)
        };
        // update_newidle_stats(): a success counts 1/probability, so the ratio estimates the
        // share of tries that pull.
        let dom = &mut lb.dom[d];
        dom.newidle_calls += 1;
        if tried && pulled {
            dom.newidle_success += (1024 + w / 2) / w;
        }
        if dom.newidle_calls >= 1024 {
            dom.newidle_ratio = dom.newidle_success.min(1024);
            dom.newidle_calls /= 2;
            dom.newidle_success /= 2;
        }
        pulled
    }

    /// A busy CPU's scheduler tick (`nohz_balancer_kick()`): with two runnable threads it kicks the
    /// first idle CPU of its domain, which pulls the queued fair thread that ran least recently
    /// if it may (`sched_balance_rq(CPU_IDLE)`).
    pub(super) fn nohz_kick(&mut self, cpu: usize) {
        if self.nr_running(cpu) < 2 {
            return;
        }
        let d = self.root_domain[cpu];
        let Some(ilb) = self.root_domains[d]
            .cpus
            .iter()
            .copied()
            .find(|&c| c != cpu && self.cpu_idle(c))
        else {
            return;
        };
        // The busiest CPU of the domain (the most runnable threads), this one on ties.
        let busiest = self.root_domains[d]
            .cpus
            .iter()
            .copied()
            .filter(|&c| c != ilb)
            .max_by_key(|&c| (self.nr_running(c), c == cpu))
            .unwrap_or(cpu);
        let lb = self.lb.as_ref().expect("Linux balancing");
        let failed = lb.dom[d].nr_balance_failed;
        let threads = &self.threads;
        let mut candidates: Vec<ThreadId> = Vec::new();
        self.cpus[busiest].rq.fair.each_queued(|t| {
            if threads[t as usize].affinity[ilb] && threads[t as usize].state == State::Queued {
                candidates.push(t);
            }
        });
        // detach_tasks() walks cfs_tasks from its tail: the least recently run first.
        candidates.sort_by_key(|&t| (self.threads[t as usize].last_ran.wrapping_add(1), t));
        let pick = candidates
            .iter()
            .copied()
            .find(|&t| !self.task_hot(t) || failed > CACHE_NICE_TRIES);
        let lb = self.lb.as_mut().expect("Linux balancing");
        match pick {
            Some(t) => {
                lb.dom[d].nr_balance_failed = 0;
                self.migrate_queued(t, ilb);
                self.resched(ilb);
            }
            None if !candidates.is_empty() => lb.dom[d].nr_balance_failed += 1,
            None => {}
        }
    }

    /// Whether `cpu`, running a fair thread with others queued, needs its ticks for the idle
    /// balancer: another CPU of its domain is idle.
    pub(super) fn wants_kick_ticks(&self, cpu: usize) -> bool {
        self.nr_running(cpu) >= 2 && {
            let d = self.root_domain[cpu];
            self.root_domains[d]
                .cpus
                .iter()
                .any(|&c| c != cpu && self.cpus[c].curr.is_none())
        }
    }

    /// The key a pull found for a fair thread is one the newly idle CPU may take.
    pub(super) fn is_fair_key(k: Key) -> bool {
        matches!(k, Key::Fair(_))
    }
}

#[cfg(test)]
mod tests {
    use super::nr_idle_scan;

    /// `update_idle_cpu_scan()` by hand: x = sum / size; tmp = x² · 117² / (10⁴ · 1024), at most
    /// 1024; nr = (1024 − tmp) · size / 1024.
    #[test]
    fn sis_util_scans_fewer_cpus_as_the_llc_fills() {
        assert_eq!(nr_idle_scan(0, 2), 2);
        // x = 600: tmp = 481, y = 543, 1086 / 1024.
        assert_eq!(nr_idle_scan(1200, 2), 1);
        // x = 700: tmp = 655, y = 369: no scan at 68 % on two CPUs.
        assert_eq!(nr_idle_scan(1400, 2), 0);
        // x = 300 on 8 CPUs: tmp = 120, y = 904, 7232 / 1024.
        assert_eq!(nr_idle_scan(2400, 8), 7);
        assert_eq!(nr_idle_scan(8 * 1024, 8), 0);
    }
}
