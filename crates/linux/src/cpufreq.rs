//! The cpufreq sysfs backend: frequency domains (policies), their current frequency, and the two
//! actuators pacer uses — a floor (`scaling_min_freq`) and, under the `userspace` governor, a
//! target (`scaling_setspeed`).
//!
//! Follows Documentation/admin-guide/pm/cpufreq.rst: each frequency domain is a directory
//! `cpufreq/policyN` under the CPU sysfs root, with `related_cpus` (the CPUs it covers),
//! `scaling_cur_freq`, `scaling_min_freq`/`scaling_max_freq`, `scaling_governor`,
//! `scaling_available_frequencies` (only for drivers with a frequency table) and
//! `scaling_setspeed` (only meaningful with the userspace governor). All frequencies are kHz.
//!
//! The backend takes the sysfs root as a path so it can be tested against a fake tree; machines
//! without cpufreq (VMs such as pacer's CI) report [`LinuxError::Unsupported`].

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use pacer_adapt::FreqState;

use crate::sched::LinuxError;

/// The default CPU sysfs root.
pub const SYSFS_CPU_ROOT: &str = "/sys/devices/system/cpu";

/// One frequency domain as read from `cpufreq/policyN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreqPolicy {
    /// N of `policyN`.
    pub id: usize,
    /// The policy directory.
    pub dir: PathBuf,
    /// CPUs in this frequency domain (`related_cpus`), ascending.
    pub related_cpus: Vec<usize>,
    /// `scaling_available_frequencies`, ascending, kHz; `None` when the driver has no table
    /// (e.g. intel_pstate, CPPC).
    pub available_khz: Option<Vec<u32>>,
    /// `scaling_cur_freq`, kHz.
    pub cur_khz: u32,
    /// `scaling_min_freq`, kHz.
    pub min_khz: u32,
    /// `scaling_max_freq`, kHz.
    pub max_khz: u32,
    /// `scaling_governor`.
    pub governor: String,
}

impl FreqPolicy {
    /// The adaptation engine's view of this domain. Without a frequency table the available
    /// frequencies are reported as the [min, max] range end points.
    pub fn freq_state(&self) -> FreqState {
        FreqState {
            cur_khz: self.cur_khz,
            available_khz: self.available_khz.clone().unwrap_or_else(|| {
                let mut v = vec![self.min_khz, self.max_khz];
                v.dedup();
                v
            }),
        }
    }
}

/// The cpufreq backend over a CPU sysfs root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuFreq {
    root: PathBuf,
}

impl Default for CpuFreq {
    fn default() -> Self {
        CpuFreq::system()
    }
}

fn read(path: &Path) -> Result<String, LinuxError> {
    fs::read_to_string(path).map_err(|source| LinuxError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn parse_err(path: &Path, what: &'static str, content: &str) -> LinuxError {
    LinuxError::Parse {
        path: path.to_path_buf(),
        what,
        content: content.chars().take(200).collect(),
    }
}

/// Reads a file holding one kHz value.
fn read_khz(path: &Path) -> Result<u32, LinuxError> {
    let text = read(path)?;
    text.trim()
        .parse::<u32>()
        .map_err(|_| parse_err(path, "a frequency in kHz", &text))
}

pub use crate::sys::parse_cpu_list;

impl CpuFreq {
    /// The system's `/sys/devices/system/cpu`.
    pub fn system() -> CpuFreq {
        CpuFreq::new(SYSFS_CPU_ROOT)
    }

    /// A backend over the CPU sysfs tree at `root` (the directory containing `cpufreq/`).
    pub fn new(root: impl Into<PathBuf>) -> CpuFreq {
        CpuFreq { root: root.into() }
    }

    fn policy_dir(&self, id: usize) -> PathBuf {
        self.root.join("cpufreq").join(format!("policy{id}"))
    }

    /// The ids of the `policyN` directories, ascending; `Unsupported` when there are none.
    pub fn policy_ids(&self) -> Result<Vec<usize>, LinuxError> {
        let dir = self.root.join("cpufreq");
        let unsupported = || LinuxError::Unsupported(format!("no cpufreq policies under {}", dir.display()));
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(unsupported()),
            Err(source) => return Err(LinuxError::Io { path: dir, source }),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| LinuxError::Io {
                path: dir.clone(),
                source,
            })?;
            let name = entry.file_name();
            if let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_prefix("policy"))
                .and_then(|n| n.parse::<usize>().ok())
            {
                ids.push(id);
            }
        }
        if ids.is_empty() {
            return Err(unsupported());
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// Reads policy `policyN`.
    pub fn policy(&self, id: usize) -> Result<FreqPolicy, LinuxError> {
        let dir = self.policy_dir(id);
        let cpus_path = dir.join("related_cpus");
        let cpus_text = read(&cpus_path)?;
        let related_cpus = parse_cpu_list(&cpus_text)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| parse_err(&cpus_path, "a CPU list", &cpus_text))?;
        let avail_path = dir.join("scaling_available_frequencies");
        let available_khz = match fs::read_to_string(&avail_path) {
            Ok(text) => {
                let mut v = text
                    .split_ascii_whitespace()
                    .map(|f| f.parse::<u32>().ok())
                    .collect::<Option<Vec<u32>>>()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| parse_err(&avail_path, "a list of frequencies in kHz", &text))?;
                v.sort_unstable();
                v.dedup();
                Some(v)
            }
            // Drivers without a frequency table do not create the file.
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(LinuxError::Io {
                    path: avail_path,
                    source,
                })
            }
        };
        let gov_path = dir.join("scaling_governor");
        let governor = read(&gov_path)?.trim().to_string();
        if governor.is_empty() {
            return Err(parse_err(&gov_path, "a governor name", ""));
        }
        Ok(FreqPolicy {
            id,
            related_cpus,
            available_khz,
            cur_khz: read_khz(&dir.join("scaling_cur_freq"))?,
            min_khz: read_khz(&dir.join("scaling_min_freq"))?,
            max_khz: read_khz(&dir.join("scaling_max_freq"))?,
            governor,
            dir,
        })
    }

    /// All policies, by id; `Unsupported` without cpufreq.
    pub fn policies(&self) -> Result<Vec<FreqPolicy>, LinuxError> {
        self.policy_ids()?.into_iter().map(|id| self.policy(id)).collect()
    }

    /// The policy covering `cpu`.
    pub fn policy_of_cpu(&self, cpu: usize) -> Result<FreqPolicy, LinuxError> {
        self.policies()?
            .into_iter()
            .find(|p| p.related_cpus.contains(&cpu))
            .ok_or_else(|| LinuxError::InvalidInput(format!("no cpufreq policy covers CPU {cpu}")))
    }

    /// The current frequency of policy `id`, kHz (`scaling_cur_freq`).
    pub fn cur_khz(&self, id: usize) -> Result<u32, LinuxError> {
        self.policy_ids()?;
        read_khz(&self.policy_dir(id).join("scaling_cur_freq"))
    }

    /// Checks `khz` against the policy's limits (and table, when there is one) before writing, so
    /// a bad request is an error naming the value rather than a bare EINVAL from sysfs.
    fn check_khz(p: &FreqPolicy, khz: u32) -> Result<(), LinuxError> {
        if let Some(avail) = &p.available_khz {
            if !avail.contains(&khz) {
                return Err(LinuxError::InvalidInput(format!(
                    "{khz} kHz is not an available frequency of policy{} ({avail:?})",
                    p.id
                )));
            }
        }
        Ok(())
    }

    /// Sets a frequency floor on policy `id` (`scaling_min_freq`): the governor keeps choosing,
    /// but never below `khz`. The floor must not exceed `scaling_max_freq`.
    pub fn set_floor(&self, id: usize, khz: u32) -> Result<(), LinuxError> {
        let p = self.policy(id)?;
        Self::check_khz(&p, khz)?;
        if khz > p.max_khz {
            return Err(LinuxError::InvalidInput(format!(
                "floor {khz} kHz above scaling_max_freq {} kHz of policy{id}",
                p.max_khz
            )));
        }
        write(&p.dir.join("scaling_min_freq"), khz)
    }

    /// Sets the frequency of policy `id` (`scaling_setspeed`); only the `userspace` governor
    /// honours it, so any other governor gives `Unsupported`.
    pub fn set_target(&self, id: usize, khz: u32) -> Result<(), LinuxError> {
        let p = self.policy(id)?;
        if p.governor != "userspace" {
            return Err(LinuxError::Unsupported(format!(
                "policy{id} uses the {:?} governor; scaling_setspeed needs \"userspace\"",
                p.governor
            )));
        }
        Self::check_khz(&p, khz)?;
        if khz < p.min_khz || khz > p.max_khz {
            return Err(LinuxError::InvalidInput(format!(
                "{khz} kHz outside [{}, {}] kHz of policy{id}",
                p.min_khz, p.max_khz
            )));
        }
        write(&p.dir.join("scaling_setspeed"), khz)
    }
}

fn write(path: &Path, khz: u32) -> Result<(), LinuxError> {
    fs::write(path, format!("{khz}\n")).map_err(|source| LinuxError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0 1 2 3\n"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse_cpu_list("0-2,6\n"), Some(vec![0, 1, 2, 6]));
        assert_eq!(parse_cpu_list("4-7"), Some(vec![4, 5, 6, 7]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list("0-99999999999"), None);
    }
}
