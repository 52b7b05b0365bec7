//! Validation before start (rtdroid-android-timeliness.txt §3, "Verification checks include
//! validating that the specified set of components is schedulable, ensuring that the memory
//! necessary for each component is available, and checking the inference of channel sizes";
//! §3.2 "channel overflow checking"; §3.3 memory bounds; §4.2 the audio manager's session
//! checks). What `pacer runtime check` prints.
//!
//! Every check answers with numbers, and every failure is a [`Violation`] naming the components
//! and the numbers, so a refused application says what to change. The checks:
//!
//! - **SCHED_FIFO** components: response-time analysis (`pacer_analysis::uni::rta`) per CPU.
//!   A component pinned to one CPU whose interferers are all SCHED_FIFO components pinned to the
//!   same CPU gets the exact uniprocessor test (Joseph & Pandya). Otherwise — the component or an
//!   interferer may run on several CPUs, or a SCHED_DEADLINE reservation shares a CPU (the
//!   deadline class runs before the rt class) — every interferer sharing a CPU with it counts as
//!   if they ran on one CPU, with carry-in (release jitter D − C), which is safe for global
//!   fixed priority too: while the component waits, every CPU of its set is busy with work of
//!   at least its priority, so that work is at least the waiting time. Equal priorities count as
//!   higher (SCHED_FIFO serves them in arrival order).
//! - **SCHED_DEADLINE** components: the kernel's admission (`pacer_analysis::admission`) per root
//!   domain — one per distinct CPU set, which must be disjoint (exclusive cpusets) — plus an EDF
//!   test of the reservations: the exact demand test (QPA) on one CPU, the GFB density bound on
//!   several (admission alone promises bounded tardiness only there).
//! - **rt bandwidth** per CPU: the real-time load must leave the kernel's reserve for fair tasks
//!   (`sched_rt_runtime_us / sched_rt_period_us`), else throttling or the fair server takes the
//!   difference from the components at a moment the analysis did not count.
//! - **Memory** (§3.1, §3.3): a component's use is persistent + per-release × releases in flight
//!   (one: deadlines do not exceed periods) + the queues of the channels it receives (§3.2.1:
//!   messages are preallocated in the receiver's persistent memory) + two bursts per audio
//!   session it serves (the one played or recorded and the one being filled); each against its
//!   own limit, the sum against the application's.
//! - **Channels** (§3.2): a receiver empties its queue at every release, and with messages
//!   pending it is released at most one period after its previous release (exactly for periodic
//!   components, by its minimum separation for services and receivers). Two emptyings are then at
//!   most W = T_r + R_r apart (R: its response-time bound, else its deadline), and a sender whose
//!   sends fall anywhere in [release, release + R_s] sends at most ⌈(W + R_s)/T_s⌉ × per_release
//!   messages in such a window. That sum must fit in the capacity.
//! - **Audio** (§4.2): a burst lasts burst_frames / rate, which must equal the serving
//!   component's period exactly; the rate must be one the null/file backend supports; all
//!   sessions use one rate (the paper's rule: otherwise the mixer resamples and adds latency).

use std::collections::BTreeSet;
use std::fmt;

use pacer_analysis::admission::{self, AdmissionConfig};
use pacer_analysis::global::gfb;
use pacer_analysis::uni::qpa::{self, QpaResult};
use pacer_analysis::uni::rta::response_time_jitter;
use pacer_analysis::Timing;
use pacer_model::reservation::BW_SHIFT;
use pacer_model::{Duration, Reservation, CAPACITY_SCALE};
use serde::Serialize;

use crate::manifest::{Component, Manifest, Scheduling};

/// The schema name of the JSON report.
pub const SCHEMA: &str = "pacer.runtime.check/1";

/// Sample rates the audio manager's null and file backends accept (the ALSA backend will ask the
/// device instead).
pub const SUPPORTED_RATES: [u32; 9] = [8000, 11025, 16000, 22050, 32000, 44100, 48000, 88200, 96000];

/// Most channels per audio session.
pub const MAX_AUDIO_CHANNELS: u32 = 8;

/// The machine an application is checked for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// Online CPUs, numbered 0..cpus.
    pub cpus: usize,
    /// `kernel.sched_rt_runtime_us`; `None` for -1 (no limit).
    pub rt_runtime_us: Option<u64>,
    /// `kernel.sched_rt_period_us`.
    pub rt_period_us: u64,
    /// Per-CPU fair server (runtime, period) in ns, `None` before Linux 6.12.
    pub fair_server_ns: Option<(u64, u64)>,
}

impl Machine {
    /// The kernel's defaults on `cpus` full-capacity CPUs (Linux ≥ 6.12).
    pub fn linux_default(cpus: usize) -> Machine {
        let d = AdmissionConfig::linux_default(cpus);
        Machine {
            cpus,
            rt_runtime_us: d.rt_runtime_us,
            rt_period_us: d.rt_period_us,
            fair_server_ns: d.fair_server.map(|(r, p)| (r.ns(), p.ns())),
        }
    }

    /// Admission settings of a root domain of `n` CPUs.
    fn domain(&self, n: usize) -> AdmissionConfig {
        AdmissionConfig {
            capacities: vec![CAPACITY_SCALE; n],
            rt_runtime_us: self.rt_runtime_us,
            rt_period_us: self.rt_period_us,
            fair_server: self.fair_server_ns.map(|(r, p)| (Duration(r), Duration(p))),
        }
    }

    /// The share of each CPU real-time work may take, in parts per million.
    fn rt_limit_ppm(&self) -> u64 {
        match self.rt_runtime_us {
            Some(r) if self.rt_period_us > 0 => r.saturating_mul(1_000_000) / self.rt_period_us,
            _ => 1_000_000,
        }
    }
}

/// One thing that keeps the application from starting.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    CpuNotPresent {
        component: String,
        cpu: usize,
        cpus: usize,
    },
    EstimateOverBudget {
        component: String,
        wcet_ns: u64,
        budget_ns: u64,
        budget_is: &'static str,
    },
    ResponseTime {
        component: String,
        cpus: Vec<usize>,
        deadline_ns: u64,
        interferers: Vec<String>,
        cpu_utilization: f64,
    },
    RtBandwidth {
        cpu: usize,
        utilization: f64,
        limit: f64,
        components: Vec<String>,
    },
    OverlappingDomains {
        cpus: Vec<usize>,
        other_cpus: Vec<usize>,
        components: Vec<String>,
    },
    Admission {
        cpus: Vec<usize>,
        components: Vec<String>,
        refused: Vec<String>,
        requested: f64,
        available: f64,
    },
    EdfDemand {
        cpus: Vec<usize>,
        components: Vec<String>,
        at_ns: u64,
        demand_ns: u64,
    },
    EdfOverload {
        cpus: Vec<usize>,
        components: Vec<String>,
        utilization: f64,
    },
    EdfNotProven {
        cpus: Vec<usize>,
        components: Vec<String>,
        density: f64,
        bound: f64,
    },
    ComponentMemory {
        component: String,
        use_bytes: u64,
        limit_bytes: u64,
    },
    AppMemory {
        use_bytes: u64,
        limit_bytes: u64,
    },
    ChannelCapacity {
        channel: String,
        receiver: String,
        messages: u64,
        capacity: u64,
        window_ns: u64,
        senders: Vec<String>,
    },
    AudioPeriod {
        session: String,
        component: String,
        burst_frames: u32,
        rate: u32,
        period_ns: u64,
    },
    AudioRate {
        session: String,
        rate: u32,
    },
    AudioChannels {
        session: String,
        channels: u32,
    },
    AudioRatesDiffer {
        sessions: Vec<String>,
        rates: Vec<u32>,
    },
}

fn d(ns: u64) -> Duration {
    Duration(ns)
}

fn cpu_list(cpus: &[usize]) -> String {
    let v: Vec<String> = cpus.iter().map(usize::to_string).collect();
    format!("{{{}}}", v.join(","))
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Violation::*;
        match self {
            CpuNotPresent { component, cpu, cpus } => write!(
                f,
                "component {component}: CPU {cpu} does not exist (this machine has CPUs 0–{}); change its `cpus`",
                cpus.saturating_sub(1)
            ),
            EstimateOverBudget { component, wcet_ns, budget_ns, budget_is } => write!(
                f,
                "component {component}: wcet {} exceeds its {budget_is} {}; raise the {budget_is} or lower the estimate",
                d(*wcet_ns),
                d(*budget_ns)
            ),
            ResponseTime { component, cpus, deadline_ns, interferers, cpu_utilization } => write!(
                f,
                "component {component}: response time exceeds its deadline {} on CPUs {} (interfered with by {}; utilisation with them {:.3}); lower its wcet, raise its priority, lengthen its deadline or move it",
                d(*deadline_ns),
                cpu_list(cpus),
                if interferers.is_empty() { "nothing".to_string() } else { interferers.join(", ") },
                cpu_utilization
            ),
            RtBandwidth { cpu, utilization, limit, components } => write!(
                f,
                "CPU {cpu}: real-time load {utilization:.3} exceeds the kernel's rt limit {limit:.3} ({}); move components or lower their cost",
                components.join(", ")
            ),
            OverlappingDomains { cpus, other_cpus, components } => write!(
                f,
                "SCHED_DEADLINE components on CPUs {} and {} ({}): CPU sets of reservations must be equal or disjoint (each is a root domain)",
                cpu_list(cpus),
                cpu_list(other_cpus),
                components.join(", ")
            ),
            Admission { cpus, components, refused, requested, available } => write!(
                f,
                "SCHED_DEADLINE admission on CPUs {}: reservations of {} need {requested:.4} CPUs, the root domain admits {available:.4}; {} would be refused (EBUSY); shrink runtimes or lengthen periods",
                cpu_list(cpus),
                components.join(", "),
                refused.join(", ")
            ),
            EdfDemand { cpus, components, at_ns, demand_ns } => write!(
                f,
                "EDF on CPU {} ({}): demand {} in the first {} exceeds the time; shrink runtimes or lengthen deadlines",
                cpu_list(cpus),
                components.join(", "),
                d(*demand_ns),
                d(*at_ns)
            ),
            EdfOverload { cpus, components, utilization } => write!(
                f,
                "EDF on CPU {} ({}): utilisation {utilization:.4} exceeds 1",
                cpu_list(cpus),
                components.join(", ")
            ),
            EdfNotProven { cpus, components, density, bound } => write!(
                f,
                "global EDF on CPUs {} ({}): density {density:.4} above the GFB bound {bound:.4}, deadlines not guaranteed; pin components to single CPUs or shrink runtimes",
                cpu_list(cpus),
                components.join(", ")
            ),
            ComponentMemory { component, use_bytes, limit_bytes } => write!(
                f,
                "component {component}: needs {use_bytes} bytes, its memory_limit is {limit_bytes}; raise the limit by {} bytes or shrink its memory or channel queues",
                use_bytes - limit_bytes
            ),
            AppMemory { use_bytes, limit_bytes } => write!(
                f,
                "application: components need {use_bytes} bytes in all, [app] memory_limit is {limit_bytes}; raise it by {} bytes or shrink the components",
                use_bytes - limit_bytes
            ),
            ChannelCapacity { channel, receiver, messages, capacity, window_ns, senders } => write!(
                f,
                "channel {channel}: {receiver} may find {messages} messages from {} between two releases ({} apart at most), capacity is {capacity}; set capacity = {messages}, or send less per release",
                senders.join(", "),
                d(*window_ns)
            ),
            AudioPeriod { session, component, burst_frames, rate, period_ns } => {
                let frames = u128::from(*period_ns) * u128::from(*rate);
                let hint = if frames % 1_000_000_000 == 0 {
                    format!("burst_frames = {}", frames / 1_000_000_000)
                } else {
                    "a period that is a whole number of frames".to_string()
                };
                write!(
                    f,
                    "audio session {session}: {burst_frames} frames at {rate} Hz do not last {component}'s period {}; use {hint}",
                    d(*period_ns)
                )
            }
            AudioRate { session, rate } => write!(
                f,
                "audio session {session}: rate {rate} Hz is not supported (supported: {:?})",
                SUPPORTED_RATES
            ),
            AudioChannels { session, channels } => write!(
                f,
                "audio session {session}: {channels} channels, at most {MAX_AUDIO_CHANNELS} are supported"
            ),
            AudioRatesDiffer { sessions, rates } => write!(
                f,
                "audio sessions {} use rates {rates:?}: all sessions must use one rate (the mixer would resample)",
                sessions.join(", ")
            ),
        }
    }
}

/// The timing of one component as checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComponentCheck {
    pub name: String,
    pub kind: &'static str,
    /// `fifo` or `deadline`.
    pub policy: &'static str,
    pub priority: Option<u8>,
    pub cpus: Vec<usize>,
    pub period_ns: u64,
    pub deadline_ns: u64,
    /// Execution time charged per release.
    pub cost_ns: u64,
    pub utilization: f64,
    /// Which test decided.
    pub test: &'static str,
    /// Response-time bound (SCHED_FIFO), or the reservation deadline a schedulable reservation
    /// meets; `None` when no bound within the deadline exists.
    pub response_ns: Option<u64>,
    pub ok: bool,
}

/// A SCHED_DEADLINE root domain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainCheck {
    pub cpus: Vec<usize>,
    pub components: Vec<String>,
    /// Σ runtime/period of the components, as the kernel's 20-bit fixed point.
    pub requested_bw: u64,
    /// What the root domain admits for tasks (after the fair servers), same unit; `None` when
    /// admission control is off.
    pub available_bw: Option<u64>,
    pub admitted: bool,
    pub edf_test: &'static str,
    pub edf_ok: bool,
}

/// Real-time load of one CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuLoad {
    pub cpu: usize,
    pub utilization: f64,
    pub limit: f64,
    pub ok: bool,
}

/// Memory of one component.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComponentMemory {
    pub name: String,
    pub persistent_bytes: u64,
    pub per_release_bytes: u64,
    pub releases_in_flight: u64,
    pub channel_bytes: u64,
    pub audio_bytes: u64,
    pub total_bytes: u64,
    pub limit_bytes: Option<u64>,
    pub ok: bool,
}

/// Memory of the application.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryCheck {
    pub components: Vec<ComponentMemory>,
    pub total_bytes: u64,
    pub limit_bytes: Option<u64>,
    pub ok: bool,
}

/// One receiver's queue of one channel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelCheck {
    pub name: String,
    pub receiver: String,
    /// Longest time between two emptyings of the queue.
    pub window_ns: u64,
    /// Most messages that can arrive in that window.
    pub messages: u64,
    pub capacity: u64,
    pub pool_bytes: u64,
    pub overflow: &'static str,
    pub ok: bool,
}

/// One audio session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AudioCheck {
    pub name: String,
    pub component: String,
    pub direction: &'static str,
    pub rate: u32,
    pub channels: u32,
    pub burst_frames: u32,
    /// burst_frames / rate, rounded down to whole nanoseconds.
    pub burst_ns: u64,
    pub period_ns: u64,
    pub ok: bool,
}

/// Everything `pacer runtime check` reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub app: String,
    /// `valid` or `invalid`.
    pub verdict: &'static str,
    pub machine: Machine,
    pub components: Vec<ComponentCheck>,
    pub domains: Vec<DomainCheck>,
    pub cpu_load: Vec<CpuLoad>,
    pub memory: MemoryCheck,
    pub channels: Vec<ChannelCheck>,
    pub audio: Vec<AudioCheck>,
    pub violations: Vec<Violation>,
    /// Where an analysis was conservative, and why.
    pub notes: Vec<String>,
}

impl Report {
    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }
}

fn ppm(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn bw_share(bw: u64) -> f64 {
    bw as f64 / (1u64 << BW_SHIFT) as f64
}

/// The (C, D, T) the analysis charges for a component: its reservation for SCHED_DEADLINE.
fn timing(c: &Component) -> Timing {
    match c.scheduling.reservation() {
        Some(r) => Timing::new(r.runtime.ns(), r.deadline.ns(), r.period.ns()),
        None => Timing::new(c.cost_ns(), c.deadline_ns, c.period_ns),
    }
}

fn shares_cpu(a: &Component, b: &Component) -> bool {
    a.cpus.iter().any(|c| b.cpus.contains(c))
}

/// Checks a manifest for `machine`. The manifest is one [`Manifest::from_toml`] accepted (the
/// analyses assume its invariants: periods above 0, D ≤ T, names that refer to components).
pub fn check(m: &Manifest, machine: &Machine) -> Report {
    let mut v = Vec::new();
    let mut notes = Vec::new();
    for c in &m.components {
        if let Some(&cpu) = c.cpus.iter().find(|&&cpu| cpu >= machine.cpus) {
            v.push(Violation::CpuNotPresent {
                component: c.name.clone(),
                cpu,
                cpus: machine.cpus,
            });
        }
        budget_checks(c, &mut v);
    }
    let (domains, dl_ok) = deadline_domains(m, machine, &mut v);
    let mut components: Vec<ComponentCheck> = m
        .components
        .iter()
        .enumerate()
        .map(|(i, c)| component_check(m, c, dl_ok[i], &mut v, &mut notes))
        .collect();
    for c in &mut components {
        c.utilization = ppm(c.utilization);
    }
    let cpu_load = cpu_loads(m, machine, &mut v);
    let memory = memory_check(m, &mut v);
    let channels = channel_checks(m, &components, &mut v);
    let audio = audio_checks(m, &mut v);
    Report {
        schema: SCHEMA,
        app: m.name.clone(),
        verdict: if v.is_empty() { "valid" } else { "invalid" },
        machine: machine.clone(),
        components,
        domains,
        cpu_load,
        memory,
        channels,
        audio,
        violations: v,
        notes,
    }
}

fn budget_checks(c: &Component, v: &mut Vec<Violation>) {
    let over = |wcet: u64, budget: u64, budget_is: &'static str| Violation::EstimateOverBudget {
        component: c.name.clone(),
        wcet_ns: wcet,
        budget_ns: budget,
        budget_is,
    };
    match c.scheduling {
        Scheduling::Fifo { .. } => {
            if let (Some(w), Some(b)) = (c.wcet_ns, c.budget_ns) {
                if w > b {
                    v.push(over(w, b, "budget"));
                }
            }
        }
        Scheduling::Deadline { runtime_ns, .. } => {
            // A release needing more than one runtime is postponed a whole server period by
            // the CBS rule and misses its deadline.
            if let Some(w) = c.wcet_ns.or(c.budget_ns).filter(|&w| w > runtime_ns) {
                v.push(over(w, runtime_ns, "reservation runtime"));
            }
        }
    }
}

/// Admission and EDF per root domain; whether each component (by index) passed.
fn deadline_domains(
    m: &Manifest,
    machine: &Machine,
    v: &mut Vec<Violation>,
) -> (Vec<DomainCheck>, Vec<bool>) {
    let mut ok = vec![true; m.components.len()];
    let sets: BTreeSet<Vec<usize>> = m
        .components
        .iter()
        .filter(|c| c.scheduling.reservation().is_some())
        .map(|c| c.cpus.clone())
        .collect();
    let sets: Vec<Vec<usize>> = sets.into_iter().collect();
    let members = |set: &[usize]| -> Vec<usize> {
        (0..m.components.len())
            .filter(|&i| m.components[i].scheduling.reservation().is_some() && m.components[i].cpus == set)
            .collect()
    };
    let names =
        |idx: &[usize]| -> Vec<String> { idx.iter().map(|&i| m.components[i].name.clone()).collect() };
    for (a, sa) in sets.iter().enumerate() {
        for sb in &sets[a + 1..] {
            if sa.iter().any(|c| sb.contains(c)) {
                let mut idx = members(sa);
                idx.extend(members(sb));
                for &i in &idx {
                    ok[i] = false;
                }
                v.push(Violation::OverlappingDomains {
                    cpus: sa.clone(),
                    other_cpus: sb.clone(),
                    components: names(&idx),
                });
            }
        }
    }
    let mut out = Vec::new();
    for set in &sets {
        let idx = members(set);
        let comps = names(&idx);
        let res: Vec<Reservation> = idx
            .iter()
            .filter_map(|&i| m.components[i].scheduling.reservation())
            .collect();
        let cfg = machine.domain(set.len());
        let rep = admission::admit(&cfg, &res);
        let requested_bw: u64 = res.iter().map(Reservation::bw_fixed).sum();
        let servers = cfg.reserved_by_servers();
        let available_bw = rep.limit.map(|l| l.saturating_sub(servers));
        let admitted = rep.all_admitted();
        if !admitted {
            v.push(Violation::Admission {
                cpus: set.clone(),
                components: comps.clone(),
                refused: idx
                    .iter()
                    .zip(&rep.refused)
                    .filter(|(_, r)| r.is_some())
                    .map(|(&i, _)| m.components[i].name.clone())
                    .collect(),
                requested: ppm(bw_share(requested_bw)),
                available: ppm(available_bw.map_or(f64::INFINITY, bw_share)),
            });
        }
        let ts: Vec<Timing> = idx.iter().map(|&i| timing(&m.components[i])).collect();
        let (edf_test, edf_ok) = if set.len() == 1 {
            let r = qpa::qpa(&ts);
            match r {
                QpaResult::Schedulable => {}
                QpaResult::DeadlineMiss { t, demand } => v.push(Violation::EdfDemand {
                    cpus: set.clone(),
                    components: comps.clone(),
                    at_ns: t,
                    demand_ns: demand,
                }),
                QpaResult::Overloaded | QpaResult::Limit => v.push(Violation::EdfOverload {
                    cpus: set.clone(),
                    components: comps.clone(),
                    utilization: ppm(ts.iter().map(Timing::u).sum()),
                }),
            }
            ("EDF demand (QPA, exact)", r == QpaResult::Schedulable)
        } else {
            let o = gfb::test(&ts, set.len());
            let pass = o.verdict.is_schedulable();
            if !pass {
                v.push(Violation::EdfNotProven {
                    cpus: set.clone(),
                    components: comps.clone(),
                    density: ppm(o.value.unwrap_or(f64::NAN)),
                    bound: ppm(o.bound.unwrap_or(f64::NAN)),
                });
            }
            ("global EDF density (GFB, sufficient)", pass)
        };
        for &i in &idx {
            ok[i] &= admitted && edf_ok;
        }
        out.push(DomainCheck {
            cpus: set.clone(),
            components: comps,
            requested_bw,
            available_bw,
            admitted,
            edf_test,
            edf_ok,
        });
    }
    (out, ok)
}

fn component_check(
    m: &Manifest,
    c: &Component,
    dl_ok: bool,
    v: &mut Vec<Violation>,
    notes: &mut Vec<String>,
) -> ComponentCheck {
    let t = timing(c);
    let base = ComponentCheck {
        name: c.name.clone(),
        kind: c.kind.name(),
        policy: "deadline",
        priority: None,
        cpus: c.cpus.clone(),
        period_ns: c.period_ns,
        deadline_ns: c.deadline_ns,
        cost_ns: t.c,
        utilization: t.u(),
        test: "SCHED_DEADLINE admission + EDF",
        response_ns: dl_ok.then_some(t.d),
        ok: dl_ok,
    };
    let Scheduling::Fifo { priority } = c.scheduling else {
        return base;
    };
    // Interferers: reservations sharing a CPU (the deadline class runs first) and SCHED_FIFO
    // components of the same or higher priority sharing a CPU.
    let hp: Vec<&Component> = m
        .components
        .iter()
        .filter(|j| j.name != c.name && shares_cpu(j, c))
        .filter(|j| match j.scheduling {
            Scheduling::Deadline { .. } => true,
            Scheduling::Fifo { priority: pj } => pj >= priority,
        })
        .collect();
    // One CPU shared only with SCHED_FIFO components pinned to it: the synchronous release is
    // the critical instant and no carry-in is needed.
    let one_cpu = c.cpus.len() == 1
        && hp
            .iter()
            .all(|j| j.cpus == c.cpus && matches!(j.scheduling, Scheduling::Fifo { .. }));
    let ties = hp
        .iter()
        .any(|j| matches!(j.scheduling, Scheduling::Fifo { priority: pj } if pj == priority));
    let with_jitter: Vec<(Timing, u64)> = hp
        .iter()
        .map(|j| {
            let tj = timing(j);
            (tj, if one_cpu { 0 } else { tj.d - tj.c.min(tj.d) })
        })
        .collect();
    let response = response_time_jitter(&t, with_jitter.iter().copied(), t.d);
    if !one_cpu {
        let why = if c.cpus.len() > 1 {
            format!("{} may run on CPUs {}", c.name, cpu_list(&c.cpus))
        } else {
            format!(
                "{} shares CPU {} with reservations or components on other CPU sets",
                c.name,
                cpu_list(&c.cpus)
            )
        };
        notes.push(format!(
            "{why}: analysed as if every interferer sharing a CPU with it ran on one CPU, with carry-in (conservative)"
        ));
    }
    if ties {
        notes.push(format!(
            "{} shares its SCHED_FIFO priority {priority} with another component on its CPUs: each counts the other as higher priority (conservative)",
            c.name
        ));
    }
    if response.is_none() {
        let load: f64 = t.u() + with_jitter.iter().map(|(tj, _)| tj.u()).sum::<f64>();
        v.push(Violation::ResponseTime {
            component: c.name.clone(),
            cpus: c.cpus.clone(),
            deadline_ns: c.deadline_ns,
            interferers: hp.iter().map(|j| j.name.clone()).collect(),
            cpu_utilization: ppm(load),
        });
    }
    ComponentCheck {
        policy: "fifo",
        priority: Some(priority),
        test: match (one_cpu, ties) {
            (true, false) => "RTA (exact, one CPU)",
            (true, true) => "RTA (one CPU, ties as higher)",
            (false, _) => "RTA with carry-in (conservative)",
        },
        response_ns: response,
        ok: response.is_some(),
        ..base
    }
}

fn cpu_loads(m: &Manifest, machine: &Machine, v: &mut Vec<Violation>) -> Vec<CpuLoad> {
    let limit_ppm = machine.rt_limit_ppm();
    let limit = limit_ppm as f64 / 1e6;
    (0..machine.cpus)
        .map(|cpu| {
            let on: Vec<&Component> = m.components.iter().filter(|c| c.cpus.contains(&cpu)).collect();
            // A component on several CPUs is counted as spread evenly over them.
            let u: f64 = on.iter().map(|c| timing(c).u() / c.cpus.len() as f64).sum();
            let ok = u * 1e6 <= limit_ppm as f64 + 1e-6;
            if !ok {
                v.push(Violation::RtBandwidth {
                    cpu,
                    utilization: ppm(u),
                    limit,
                    components: on.iter().map(|c| c.name.clone()).collect(),
                });
            }
            CpuLoad {
                cpu,
                utilization: ppm(u),
                limit,
                ok,
            }
        })
        .collect()
}

fn memory_check(m: &Manifest, v: &mut Vec<Violation>) -> MemoryCheck {
    let components: Vec<ComponentMemory> = m
        .components
        .iter()
        .map(|c| {
            let channel_bytes: u64 = m
                .channels
                .iter()
                .filter(|ch| ch.receivers.contains(&c.name))
                .map(|ch| ch.capacity.saturating_mul(ch.message_size_bytes))
                .fold(0, u64::saturating_add);
            let audio_bytes: u64 = m
                .audio
                .iter()
                .filter(|a| a.component == c.name)
                .map(|a| a.burst_bytes().saturating_mul(2))
                .fold(0, u64::saturating_add);
            // Deadlines do not exceed periods (the manifest refuses D > T), so one release is
            // in flight at a time; written out so the sum reads as the paper states it.
            let in_flight = c.deadline_ns.div_ceil(c.period_ns).max(1);
            let total = c
                .persistent_bytes
                .saturating_add(c.per_release_bytes.saturating_mul(in_flight))
                .saturating_add(channel_bytes)
                .saturating_add(audio_bytes);
            let ok = c.memory_limit_bytes.is_none_or(|l| total <= l);
            if let (false, Some(l)) = (ok, c.memory_limit_bytes) {
                v.push(Violation::ComponentMemory {
                    component: c.name.clone(),
                    use_bytes: total,
                    limit_bytes: l,
                });
            }
            ComponentMemory {
                name: c.name.clone(),
                persistent_bytes: c.persistent_bytes,
                per_release_bytes: c.per_release_bytes,
                releases_in_flight: in_flight,
                channel_bytes,
                audio_bytes,
                total_bytes: total,
                limit_bytes: c.memory_limit_bytes,
                ok,
            }
        })
        .collect();
    let total = components
        .iter()
        .map(|c| c.total_bytes)
        .fold(0, u64::saturating_add);
    let ok = m.memory_limit_bytes.is_none_or(|l| total <= l);
    if let (false, Some(l)) = (ok, m.memory_limit_bytes) {
        v.push(Violation::AppMemory {
            use_bytes: total,
            limit_bytes: l,
        });
    }
    MemoryCheck {
        components,
        total_bytes: total,
        limit_bytes: m.memory_limit_bytes,
        ok,
    }
}

fn channel_checks(m: &Manifest, checked: &[ComponentCheck], v: &mut Vec<Violation>) -> Vec<ChannelCheck> {
    // The latest a release can act: its response bound, else (unschedulable, already reported)
    // its deadline.
    // A name that is no component (only a hand-built manifest can have one) counts as a
    // sender or receiver with no bound at all, which fails the check instead of panicking.
    let latest = |name: &str| -> (u64, u64) {
        let Some(c) = m.component(name) else {
            return (1, u64::MAX);
        };
        let k = checked.iter().find(|k| k.name == name);
        let r = k.and_then(|k| k.response_ns).unwrap_or(c.deadline_ns);
        (c.period_ns.max(1), r)
    };
    let mut out = Vec::new();
    for ch in &m.channels {
        for recv in &ch.receivers {
            let (tr, rr) = latest(recv);
            let window = tr.saturating_add(rr);
            let messages = ch
                .senders
                .iter()
                .map(|s| {
                    let (ts, rs) = latest(s);
                    window
                        .saturating_add(rs)
                        .div_ceil(ts)
                        .saturating_mul(ch.per_release)
                })
                .fold(0, u64::saturating_add);
            let ok = messages <= ch.capacity;
            if !ok {
                v.push(Violation::ChannelCapacity {
                    channel: ch.name.clone(),
                    receiver: recv.clone(),
                    messages,
                    capacity: ch.capacity,
                    window_ns: window,
                    senders: ch.senders.clone(),
                });
            }
            out.push(ChannelCheck {
                name: ch.name.clone(),
                receiver: recv.clone(),
                window_ns: window,
                messages,
                capacity: ch.capacity,
                pool_bytes: ch.capacity.saturating_mul(ch.message_size_bytes),
                overflow: ch.overflow.name(),
                ok,
            });
        }
    }
    out
}

fn audio_checks(m: &Manifest, v: &mut Vec<Violation>) -> Vec<AudioCheck> {
    let rates: BTreeSet<u32> = m.audio.iter().map(|a| a.rate).collect();
    if rates.len() > 1 {
        v.push(Violation::AudioRatesDiffer {
            sessions: m.audio.iter().map(|a| a.name.clone()).collect(),
            rates: rates.into_iter().collect(),
        });
    }
    m.audio
        .iter()
        .map(|a| {
            let period = m.component(&a.component).map_or(0, |c| c.period_ns);
            let mut ok = true;
            if !SUPPORTED_RATES.contains(&a.rate) {
                ok = false;
                v.push(Violation::AudioRate {
                    session: a.name.clone(),
                    rate: a.rate,
                });
            }
            if a.channels > MAX_AUDIO_CHANNELS {
                ok = false;
                v.push(Violation::AudioChannels {
                    session: a.name.clone(),
                    channels: a.channels,
                });
            }
            // burst_frames / rate = period, compared exactly in integers.
            if u128::from(a.burst_frames) * 1_000_000_000 != u128::from(period) * u128::from(a.rate) {
                ok = false;
                v.push(Violation::AudioPeriod {
                    session: a.name.clone(),
                    component: a.component.clone(),
                    burst_frames: a.burst_frames,
                    rate: a.rate,
                    period_ns: period,
                });
            }
            AudioCheck {
                name: a.name.clone(),
                component: a.component.clone(),
                direction: match a.direction {
                    crate::manifest::Direction::Playback => "playback",
                    crate::manifest::Direction::Record => "record",
                },
                rate: a.rate,
                channels: a.channels,
                burst_frames: a.burst_frames,
                burst_ns: (u128::from(a.burst_frames) * 1_000_000_000)
                    .checked_div(u128::from(a.rate))
                    .map_or(0, |ns| ns as u64),
                period_ns: period,
                ok,
            }
        })
        .collect()
}
