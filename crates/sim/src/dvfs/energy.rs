//! Frequency residency and energy (adaptive-deadline-audio-android.txt §6.3, eq. of E_N and
//! Table 4).
//!
//! Each CPU's time is split by the OPP its cluster was at and by whether the CPU was busy (a
//! thread on it, switch-in overheads included) or idle. From that:
//!
//! - `energy` = Σ_cpu Σ_opp (busy_s · P_active + idle_s · P_idle) / 1000: joules when the table's
//!   powers are mW, the Energy Model's normalised unit otherwise;
//! - `normalised_energy` = the paper's E_N = Σ_f t_f · P_f / 1000, where t_f is the CPU's residency
//!   at f (busy or idle, cpufreq's `time_in_state`) and P_f the OPP's active power. This is how
//!   Table 4 is computed: 20.976 s · 404 + 7.133 s · 861 + 3.240 s · 1398 + 9.903 s · 2200 +
//!   19.391 s · 2848 = 96 157.5, reported as 96.158 (see [`table4_energy`]).
//!
//! The switch latency is charged at the old OPP (the new one applies when the switch completes).

use serde::Serialize;

/// Time one CPU spent at one OPP.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OppResidency {
    pub freq_khz: u32,
    pub busy_ns: u64,
    pub idle_ns: u64,
    /// The OPP's powers, copied from the platform (per CPU).
    pub active_power: f64,
    pub idle_power: f64,
}

impl OppResidency {
    /// busy + idle, s.
    pub fn residency_s(&self) -> f64 {
        (self.busy_ns + self.idle_ns) as f64 / 1e9
    }
}

/// One CPU's residency table and energies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuEnergy {
    pub cpu: usize,
    pub cluster: usize,
    /// One entry per OPP of the cluster, ascending frequency.
    pub opps: Vec<OppResidency>,
    /// Σ (busy_s · P_active + idle_s · P_idle) / 1000.
    pub energy: f64,
    /// Σ residency_s · P_active / 1000 (the paper's E_N).
    pub normalised_energy: f64,
}

/// Residency and energy of a run, up to the simulation's current time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnergyReport {
    /// Simulated time covered, ns.
    pub duration_ns: u64,
    pub cpus: Vec<CpuEnergy>,
    /// Σ over CPUs of [`CpuEnergy::energy`].
    pub energy: f64,
    /// Σ over CPUs of [`CpuEnergy::normalised_energy`]; compare one CPU's value with Table 4, since
    /// every CPU counts its idle residency at its OPP's active power in this metric.
    pub normalised_energy: f64,
}

impl CpuEnergy {
    pub(crate) fn new(cpu: usize, cluster: usize, opps: Vec<OppResidency>) -> Self {
        let energy = opps
            .iter()
            .map(|o| (o.busy_ns as f64 * o.active_power + o.idle_ns as f64 * o.idle_power) / 1e12)
            .sum();
        let residency: Vec<f64> = opps.iter().map(OppResidency::residency_s).collect();
        let power: Vec<f64> = opps.iter().map(|o| o.active_power).collect();
        CpuEnergy {
            cpu,
            cluster,
            normalised_energy: table4_energy(&residency, &power),
            opps,
            energy,
        }
    }
}

impl EnergyReport {
    pub(crate) fn new(duration_ns: u64, cpus: Vec<CpuEnergy>) -> Self {
        EnergyReport {
            duration_ns,
            energy: cpus.iter().map(|c| c.energy).sum(),
            normalised_energy: cpus.iter().map(|c| c.normalised_energy).sum(),
            cpus,
        }
    }
}

/// The paper's normalised energy E_N = Σ_f t_f · P_f / 1000 from residencies (s) and powers,
/// pairwise (extra entries of the longer slice are ignored).
pub fn table4_energy(residency_s: &[f64], power: &[f64]) -> f64 {
    residency_s.iter().zip(power).map(|(t, p)| t * p).sum::<f64>() / 1000.0
}
