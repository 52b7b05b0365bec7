//! Platforms: CPUs grouped in clusters that share a frequency, each cluster with an OPP table
//! (frequency, capacity, active and idle power) and a frequency-switch latency.
//!
//! Capacities use the kernel's scale (`SCHED_CAPACITY_SCALE` = 1024 for the biggest CPU at its
//! highest OPP), so a platform description reads the same as `/sys/devices/system/cpu/cpu*/cpu_capacity`.
//! An OPP's capacity is that of a CPU of the cluster at that OPP; the kernel derives it as
//! capacity_max · f / f_max (`arch_scale_freq_capacity`), and the presets do the same.
//!
//! Power is per CPU and in whatever unit the table is written in: milliwatts for measured tables,
//! or the Energy Model's normalised cost (the Device Tree's `busy-cost-data` / `CPU_COST_*`,
//! dimensionless) as in adaptive-deadline-audio-android.txt Table 4. Energies computed from a
//! table are in that unit × seconds.

use serde::{Deserialize, Serialize};

/// `SCHED_CAPACITY_SCALE`.
pub const CAPACITY_SCALE: u32 = 1024;

/// One operating performance point of a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Opp {
    pub freq_khz: u32,
    /// Capacity of one CPU of the cluster at this OPP, on the 1024 scale.
    pub capacity: u32,
    /// Power of one busy CPU at this OPP (mW, or the Energy Model's normalised cost).
    pub active_mw: f64,
    /// Power of one idle CPU while its cluster is at this OPP (same unit as `active_mw`).
    pub idle_mw: f64,
}

/// CPUs that share a frequency domain (and, for clustered scheduling, a scheduling domain).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub name: String,
    /// Indices into [`Platform::cpus`].
    pub cpus: Vec<usize>,
    /// OPPs in increasing frequency; empty means a fixed-frequency cluster.
    #[serde(default)]
    pub opps: Vec<Opp>,
    /// Time from a frequency request until the new OPP takes effect, ns (the hardware's
    /// transition latency; the CPUs keep running at the old OPP meanwhile).
    #[serde(default)]
    pub switch_latency_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    pub id: usize,
    pub cluster: usize,
    /// Capacity at the cluster's highest OPP, on the 1024 scale.
    pub capacity: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Platform {
    pub cpus: Vec<Cpu>,
    pub clusters: Vec<Cluster>,
}

/// A platform description that cannot be used; `field` names the offending entry
/// (`clusters[0].opps[2].freq_khz`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct PlatformError {
    pub field: String,
    pub problem: String,
}

fn bad(field: impl Into<String>, problem: impl Into<String>) -> PlatformError {
    PlatformError {
        field: field.into(),
        problem: problem.into(),
    }
}

/// The HiKey960 big cluster (Cortex-A73) OPPs used in adaptive-deadline-audio-android.txt §6,
/// Table 4: frequency (kHz) and the Device Tree's normalised power cost of a busy CPU.
pub const HIKEY960_BIG_TABLE4: [(u32, f64); 5] = [
    (903_000, 404.0),
    (1_421_000, 861.0),
    (1_805_000, 1398.0),
    (2_112_000, 2200.0),
    (2_362_000, 2848.0),
];

/// Frequency-switch latency of the HiKey960 big cluster: §6.2 measures the frequency request
/// 0.054 ms after the workload change and the new OPP in place after about 0.45 ms, so the switch
/// itself takes ≈ 0.4 ms.
pub const HIKEY960_SWITCH_LATENCY_NS: u64 = 400_000;

impl Platform {
    /// `m` identical full-capacity CPUs in one cluster (a symmetric multiprocessor).
    pub fn smp(m: usize) -> Self {
        Platform::clustered(m, m.max(1))
    }

    /// `m` identical CPUs split into clusters of `size` consecutive CPUs (the last may be smaller).
    pub fn clustered(m: usize, size: usize) -> Self {
        let size = size.max(1);
        let cpus = (0..m)
            .map(|id| Cpu {
                id,
                cluster: id / size,
                capacity: CAPACITY_SCALE,
            })
            .collect();
        let clusters = (0..m.div_ceil(size))
            .map(|c| Cluster {
                name: format!("cluster{c}"),
                cpus: (c * size..((c + 1) * size).min(m)).collect(),
                opps: Vec::new(),
                switch_latency_ns: 0,
            })
            .collect();
        Platform { cpus, clusters }
    }

    /// One frequency domain over CPUs of the given capacities, running at `freqs_khz` (ascending):
    /// OPP capacities ⌊1024 · f / f_max⌋, power 0 (no energy model), no switch latency. This is
    /// what `pacer-sim`'s `freqs_khz` setting means.
    pub fn single_domain(capacities: &[u32], freqs_khz: &[u32]) -> Self {
        let max = freqs_khz.last().copied().unwrap_or(1).max(1) as u64;
        let opps = freqs_khz
            .iter()
            .map(|&f| Opp {
                freq_khz: f,
                capacity: (CAPACITY_SCALE as u64 * f as u64 / max) as u32,
                active_mw: 0.0,
                idle_mw: 0.0,
            })
            .collect();
        Platform {
            cpus: capacities
                .iter()
                .enumerate()
                .map(|(id, &capacity)| Cpu {
                    id,
                    cluster: 0,
                    capacity,
                })
                .collect(),
            clusters: vec![Cluster {
                name: "cpus".into(),
                cpus: (0..capacities.len()).collect(),
                opps,
                switch_latency_ns: 0,
            }],
        }
    }

    /// The HiKey960 big cluster of adaptive-deadline-audio-android.txt with `cpus` CPUs (the board
    /// has 4; the paper pins the audio thread to one): the 5 OPPs of Table 4 (903–2362 MHz),
    /// capacity ⌊1024 · f / 2362 MHz⌋, active power = the Device Tree's normalised cost (so energies
    /// come out in the paper's normalised unit × s), idle power 0 because the paper gives none
    /// (set `opps[i].idle_mw` to model one), switch latency [`HIKEY960_SWITCH_LATENCY_NS`].
    pub fn hikey960_big(cpus: usize) -> Self {
        let max = HIKEY960_BIG_TABLE4[HIKEY960_BIG_TABLE4.len() - 1].0 as u64;
        let opps = HIKEY960_BIG_TABLE4
            .iter()
            .map(|&(f, p)| Opp {
                freq_khz: f,
                capacity: (CAPACITY_SCALE as u64 * f as u64 / max) as u32,
                active_mw: p,
                idle_mw: 0.0,
            })
            .collect();
        Platform {
            cpus: (0..cpus)
                .map(|id| Cpu {
                    id,
                    cluster: 0,
                    capacity: CAPACITY_SCALE,
                })
                .collect(),
            clusters: vec![Cluster {
                name: "big".into(),
                cpus: (0..cpus).collect(),
                opps,
                switch_latency_ns: HIKEY960_SWITCH_LATENCY_NS,
            }],
        }
    }

    /// Sets the idle power of every OPP of `cluster` (e.g. a measured WFI cost).
    pub fn with_idle_power(mut self, cluster: usize, idle: f64) -> Self {
        if let Some(c) = self.clusters.get_mut(cluster) {
            for o in &mut c.opps {
                o.idle_mw = idle;
            }
        }
        self
    }

    pub fn num_cpus(&self) -> usize {
        self.cpus.len()
    }

    /// Σ capacity / 1024: the number of "full CPUs" the platform offers.
    pub fn total_capacity(&self) -> f64 {
        self.cpus.iter().map(|c| c.capacity as f64).sum::<f64>() / CAPACITY_SCALE as f64
    }

    /// Checks that the description is usable: at least one CPU; CPU ids 0..n in order with a
    /// capacity in 1..=1024; every CPU in exactly the cluster its `cluster` field names; OPP
    /// frequencies > 0 and strictly ascending, capacities in 1..=1024 and non-decreasing, powers
    /// finite and ≥ 0.
    pub fn validate(&self) -> Result<(), PlatformError> {
        if self.cpus.is_empty() {
            return Err(bad("cpus", "the platform needs at least one CPU"));
        }
        for (i, c) in self.cpus.iter().enumerate() {
            if c.id != i {
                return Err(bad(format!("cpus[{i}].id"), format!("is {}, expected {i}", c.id)));
            }
            if !(1..=CAPACITY_SCALE).contains(&c.capacity) {
                return Err(bad(
                    format!("cpus[{i}].capacity"),
                    format!("is {}, expected 1..=1024", c.capacity),
                ));
            }
            if c.cluster >= self.clusters.len() {
                return Err(bad(
                    format!("cpus[{i}].cluster"),
                    format!("is {}, but there are {} clusters", c.cluster, self.clusters.len()),
                ));
            }
        }
        let mut seen = vec![None; self.cpus.len()];
        for (k, cl) in self.clusters.iter().enumerate() {
            if cl.cpus.is_empty() {
                return Err(bad(
                    format!("clusters[{k}].cpus"),
                    "a cluster needs at least one CPU",
                ));
            }
            for &c in &cl.cpus {
                let Some(slot) = seen.get_mut(c) else {
                    return Err(bad(
                        format!("clusters[{k}].cpus"),
                        format!(
                            "names CPU {c}, but the platform has {}",
                            cpu_count(self.cpus.len())
                        ),
                    ));
                };
                if let Some(other) = *slot {
                    return Err(bad(
                        format!("clusters[{k}].cpus"),
                        format!("CPU {c} is already in cluster {other}"),
                    ));
                }
                *slot = Some(k);
                if self.cpus[c].cluster != k {
                    return Err(bad(
                        format!("cpus[{c}].cluster"),
                        format!("is {}, but clusters[{k}] lists CPU {c}", self.cpus[c].cluster),
                    ));
                }
            }
            for (j, o) in cl.opps.iter().enumerate() {
                let f = |name: &str| format!("clusters[{k}].opps[{j}].{name}");
                if o.freq_khz == 0 {
                    return Err(bad(f("freq_khz"), "must be > 0"));
                }
                if j > 0 && o.freq_khz <= cl.opps[j - 1].freq_khz {
                    return Err(bad(
                        f("freq_khz"),
                        format!(
                            "OPPs must be in strictly ascending frequency; {} kHz follows {} kHz",
                            o.freq_khz,
                            cl.opps[j - 1].freq_khz
                        ),
                    ));
                }
                if !(1..=CAPACITY_SCALE).contains(&o.capacity) {
                    return Err(bad(
                        f("capacity"),
                        format!("is {}, expected 1..=1024", o.capacity),
                    ));
                }
                if j > 0 && o.capacity < cl.opps[j - 1].capacity {
                    return Err(bad(
                        f("capacity"),
                        format!(
                            "is {}, below the previous OPP's {}: capacity must not fall as frequency rises",
                            o.capacity,
                            cl.opps[j - 1].capacity
                        ),
                    ));
                }
                for (name, v) in [("active_mw", o.active_mw), ("idle_mw", o.idle_mw)] {
                    if !(v.is_finite() && v >= 0.0) {
                        return Err(bad(f(name), format!("is {v}, expected a finite value ≥ 0")));
                    }
                }
            }
        }
        if let Some(c) = seen.iter().position(Option::is_none) {
            return Err(bad(format!("cpus[{c}]"), "is in no cluster's `cpus` list"));
        }
        Ok(())
    }
}

/// "1 CPU (0)", "4 CPUs (0-3)": for messages about a CPU number out of range, where a Rust
/// range (`0..1`) reads as two CPUs.
pub fn cpu_count(n: usize) -> String {
    match n {
        0 => "no CPU".to_string(),
        1 => "1 CPU (0)".to_string(),
        n => format!("{n} CPUs (0-{})", n - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_cover_all_cpus() {
        let p = Platform::clustered(10, 4);
        assert_eq!(p.clusters.len(), 3);
        assert_eq!(p.clusters[2].cpus, vec![8, 9]);
        assert_eq!(p.cpus[9].cluster, 2);
        assert_eq!(Platform::smp(4).clusters.len(), 1);
        assert_eq!(p.total_capacity(), 10.0);
        assert!(p.validate().is_ok());
    }

    #[test]
    fn hikey960_preset_is_table_4() {
        let p = Platform::hikey960_big(4);
        assert!(p.validate().is_ok());
        let o = &p.clusters[0].opps;
        let f: Vec<u32> = o.iter().map(|o| o.freq_khz / 1000).collect();
        assert_eq!(f, vec![903, 1421, 1805, 2112, 2362]);
        let cap: Vec<u32> = o.iter().map(|o| o.capacity).collect();
        assert_eq!(cap, vec![391, 616, 782, 915, 1024]);
        let pw: Vec<f64> = o.iter().map(|o| o.active_mw).collect();
        assert_eq!(pw, vec![404.0, 861.0, 1398.0, 2200.0, 2848.0]);
        assert!(o.iter().all(|o| o.idle_mw == 0.0));
        assert_eq!(p.with_idle_power(0, 12.5).clusters[0].opps[3].idle_mw, 12.5);
    }

    #[test]
    fn bad_tables_name_the_field() {
        let mut p = Platform::hikey960_big(1);
        p.clusters[0].opps[2].freq_khz = 1_000_000;
        let e = p.validate().unwrap_err();
        assert_eq!(e.field, "clusters[0].opps[2].freq_khz");
        let mut p = Platform::hikey960_big(1);
        p.clusters[0].opps[1].active_mw = f64::NAN;
        assert_eq!(p.validate().unwrap_err().field, "clusters[0].opps[1].active_mw");
        let mut p = Platform::hikey960_big(1);
        p.clusters[0].opps[4].capacity = 2000;
        assert_eq!(p.validate().unwrap_err().field, "clusters[0].opps[4].capacity");
        let mut p = Platform::hikey960_big(2);
        p.clusters[0].cpus = vec![0];
        assert_eq!(p.validate().unwrap_err().field, "cpus[1]");
        let mut p = Platform::hikey960_big(1);
        p.cpus[0].cluster = 3;
        assert!(p
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("cpus[0].cluster: "));
        assert!(Platform::single_domain(&[1024, 512], &[500_000, 1_000_000])
            .validate()
            .is_ok());
    }
}
