//! Platforms: CPUs grouped in clusters that share a frequency, each cluster with an OPP table.
//!
//! Capacities use the kernel's scale (`SCHED_CAPACITY_SCALE` = 1024 for the biggest CPU at its
//! highest OPP), so a platform description reads the same as `/sys/devices/system/cpu/cpu*/cpu_capacity`.

use serde::{Deserialize, Serialize};

/// `SCHED_CAPACITY_SCALE`.
pub const CAPACITY_SCALE: u32 = 1024;

/// One operating performance point of a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Opp {
    pub freq_khz: u32,
    /// Capacity of one CPU of the cluster at this OPP, on the 1024 scale.
    pub capacity: u32,
    /// Power of one busy CPU at this OPP, milliwatts.
    pub active_mw: f64,
    /// Power of one idle CPU at this OPP, milliwatts.
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
            })
            .collect();
        Platform { cpus, clusters }
    }

    pub fn num_cpus(&self) -> usize {
        self.cpus.len()
    }

    /// Σ capacity / 1024: the number of "full CPUs" the platform offers.
    pub fn total_capacity(&self) -> f64 {
        self.cpus.iter().map(|c| c.capacity as f64).sum::<f64>() / CAPACITY_SCALE as f64
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
    }
}
