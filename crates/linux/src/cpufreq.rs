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
//!
//! ## Residency and energy
//! With `CONFIG_CPU_FREQ_STAT`, each policy has `stats/time_in_state`: one line
//! `<frequency kHz> <time>` per frequency, the time spent there since boot (or the last reset)
//! in USER_HZ clock ticks — "usertime units (10 ms)" in Documentation/cpu-freq/cpufreq-stats.rst,
//! i.e. 1/`sysconf(_SC_CLK_TCK)` s, as the kernel converts with `jiffies_64_to_clock_t`.
//! [`CpuFreq::residency_snapshot`] reads every policy into ns; [`ResidencySnapshot::since`] is
//! the residency during a run. A [`PowerTable`] (docs/formats/power-table.md: the audio
//! scenario's `opps` array, power in mW) turns a residency into energy, the audio paper's
//! E = Σ_f t_f·P_f (§6.3) with t in s and P in mW, /1000 for J, and into energy normalised by
//! the same time at the highest OPP. Without cpufreq the error is [`EnergyError::NoCpufreq`],
//! without its statistics [`EnergyError::NoStats`] (both [`EnergyError::is_not_measured`]).
//! Residency is per policy (the domain's clock, busy or idle); the power is one busy CPU's, as
//! in the simulator's E_N, so the energy is that of one CPU of the domain kept at its OPPs.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use pacer_adapt::FreqState;
use serde::Serialize;

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

// ---------------------------------------------------------------------------------------------
// Frequency residency (cpufreq-stats) and energy.
// ---------------------------------------------------------------------------------------------

/// Why residency or energy could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum EnergyError {
    /// The machine has no cpufreq at all (VMs such as pacer's CI).
    #[error("no cpufreq on this machine: frequency residency and energy not measured")]
    NoCpufreq,
    /// cpufreq is there, but not its statistics (a kernel without `CONFIG_CPU_FREQ_STAT`).
    #[error(
        "no cpufreq statistics for policy{policy} ({} missing: kernel without CONFIG_CPU_FREQ_STAT?): \
         frequency residency and energy not measured",
        path.display()
    )]
    NoStats { policy: usize, path: PathBuf },
    /// Reading sysfs failed.
    #[error(transparent)]
    Linux(#[from] LinuxError),
    /// A `time_in_state` line is not `<frequency kHz> <time in USER_HZ ticks>`.
    #[error("{}:{line}: expected \"<frequency in kHz> <time in USER_HZ ticks>\", got {content:?}", path.display())]
    TimeInState {
        path: PathBuf,
        line: usize,
        content: String,
    },
    /// Two snapshots do not cover the same policies and frequencies.
    #[error("residency snapshots differ: {0}")]
    SnapshotMismatch(String),
    /// A counter of the later snapshot is below the earlier one's.
    #[error(
        "policy{policy} at {khz} kHz: time_in_state went back from {before_ns} ns to {after_ns} ns \
         (statistics reset during the run?)"
    )]
    CounterWentBack {
        policy: usize,
        khz: u32,
        before_ns: u64,
        after_ns: u64,
    },
    /// The power table file cannot be read.
    #[error("power table {}: {source}", path.display())]
    PowerTableIo {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The power table file is not the expected TOML.
    #[error("power table {}: {entry}: expected {expected}", path.display())]
    PowerTable {
        path: PathBuf,
        entry: String,
        expected: String,
    },
    /// The CPU spent time at a frequency the power table has no OPP for.
    #[error(
        "policy{policy} spent {ns} ns at {khz} kHz, but power table {} has no OPP at {khz} kHz \
         (its OPPs: {known:?} kHz)",
        path.display()
    )]
    UnknownFrequency {
        policy: usize,
        khz: u32,
        ns: u64,
        path: PathBuf,
        known: Vec<u32>,
    },
}

impl EnergyError {
    /// True when this machine cannot measure residency at all (no cpufreq, or no statistics),
    /// as opposed to a failure the user can fix.
    pub fn is_not_measured(&self) -> bool {
        matches!(self, EnergyError::NoCpufreq | EnergyError::NoStats { .. })
    }
}

/// Time spent at one frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FreqResidency {
    pub khz: u32,
    pub ns: u64,
}

/// A policy's `stats/time_in_state`, ascending in frequency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyResidency {
    /// N of `policyN`.
    pub policy: usize,
    pub states: Vec<FreqResidency>,
}

impl PolicyResidency {
    /// Time at all frequencies, ns.
    pub fn total_ns(&self) -> u64 {
        self.states.iter().map(|s| s.ns).sum()
    }

    /// Time at `khz`, if the policy has that frequency.
    pub fn ns_at(&self, khz: u32) -> Option<u64> {
        self.states.iter().find(|s| s.khz == khz).map(|s| s.ns)
    }
}

/// The residency of every policy at one instant (cumulative since boot or the last reset), or,
/// from [`ResidencySnapshot::since`], during the time between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResidencySnapshot {
    pub policies: Vec<PolicyResidency>,
}

impl ResidencySnapshot {
    /// The residency between `earlier` and `self` (the residency during a run). Both must
    /// cover the same policies and frequencies; a counter that went back (statistics reset, or
    /// a CPU hot-unplugged and re-plugged) is an error rather than a silent wrong figure.
    pub fn since(&self, earlier: &ResidencySnapshot) -> Result<ResidencySnapshot, EnergyError> {
        let ids = |s: &ResidencySnapshot| s.policies.iter().map(|p| p.policy).collect::<Vec<_>>();
        if ids(self) != ids(earlier) {
            return Err(EnergyError::SnapshotMismatch(format!(
                "policies {:?} then {:?}",
                ids(earlier),
                ids(self)
            )));
        }
        let policies = self
            .policies
            .iter()
            .zip(&earlier.policies)
            .map(|(after, before)| {
                let khz = |p: &PolicyResidency| p.states.iter().map(|s| s.khz).collect::<Vec<_>>();
                if khz(after) != khz(before) {
                    return Err(EnergyError::SnapshotMismatch(format!(
                        "policy{} frequencies {:?} then {:?} kHz",
                        after.policy,
                        khz(before),
                        khz(after)
                    )));
                }
                let states = after
                    .states
                    .iter()
                    .zip(&before.states)
                    .map(|(a, b)| {
                        a.ns.checked_sub(b.ns)
                            .map(|ns| FreqResidency { khz: a.khz, ns })
                            .ok_or(EnergyError::CounterWentBack {
                                policy: after.policy,
                                khz: a.khz,
                                before_ns: b.ns,
                                after_ns: a.ns,
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(PolicyResidency {
                    policy: after.policy,
                    states,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ResidencySnapshot { policies })
    }

    /// The policy `policyN`, if the snapshot has it.
    pub fn policy(&self, id: usize) -> Option<&PolicyResidency> {
        self.policies.iter().find(|p| p.policy == id)
    }
}

/// USER_HZ, the unit of `time_in_state` (`sysconf(_SC_CLK_TCK)`; 100 on every current
/// architecture, hence the kernel documentation's "10 ms").
pub fn user_hz() -> u64 {
    // SAFETY: sysconf only reads a constant of the C library; no memory is passed.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// Parses a `time_in_state` file: one `<kHz> <ticks>` line per frequency, ticks of
/// 1/`user_hz` s. Returns the residency ascending in frequency.
pub fn parse_time_in_state(
    policy: usize,
    text: &str,
    user_hz: u64,
    path: &Path,
) -> Result<PolicyResidency, EnergyError> {
    let tick_ns = 1_000_000_000 / user_hz.max(1);
    let mut states = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || EnergyError::TimeInState {
            path: path.to_path_buf(),
            line: i + 1,
            content: line.chars().take(200).collect(),
        };
        let mut fields = line.split_ascii_whitespace();
        let (Some(f), Some(t), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(bad());
        };
        let khz = f.parse::<u32>().ok().filter(|&k| k > 0).ok_or_else(bad)?;
        let ns = t
            .parse::<u64>()
            .ok()
            .and_then(|t| t.checked_mul(tick_ns))
            .ok_or_else(bad)?;
        states.push(FreqResidency { khz, ns });
    }
    if states.is_empty() {
        return Err(EnergyError::TimeInState {
            path: path.to_path_buf(),
            line: 1,
            content: String::new(),
        });
    }
    states.sort_unstable_by_key(|s| s.khz);
    if let Some(w) = states.windows(2).find(|w| w[0].khz == w[1].khz) {
        return Err(EnergyError::TimeInState {
            path: path.to_path_buf(),
            line: 0,
            content: format!("{} kHz listed twice", w[0].khz),
        });
    }
    Ok(PolicyResidency { policy, states })
}

impl CpuFreq {
    /// Policy `policyN`'s `stats/time_in_state`, converted to ns with [`user_hz`].
    pub fn time_in_state(&self, id: usize) -> Result<PolicyResidency, EnergyError> {
        self.time_in_state_with(id, user_hz())
    }

    fn time_in_state_with(&self, id: usize, hz: u64) -> Result<PolicyResidency, EnergyError> {
        let stats = self.policy_dir(id).join("stats");
        let path = stats.join("time_in_state");
        match fs::read_to_string(&path) {
            Ok(text) => parse_time_in_state(id, &text, hz, &path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(EnergyError::NoStats {
                policy: id,
                path: if stats.is_dir() { path } else { stats },
            }),
            Err(source) => Err(LinuxError::Io { path, source }.into()),
        }
    }

    /// The residency of every policy now; [`EnergyError::NoCpufreq`] without cpufreq,
    /// [`EnergyError::NoStats`] without its statistics.
    pub fn residency_snapshot(&self) -> Result<ResidencySnapshot, EnergyError> {
        self.residency_snapshot_with(user_hz())
    }

    /// [`CpuFreq::residency_snapshot`] with ticks of 1/`user_hz` s (for trees from another
    /// machine).
    pub fn residency_snapshot_with(&self, user_hz: u64) -> Result<ResidencySnapshot, EnergyError> {
        let ids = match self.policy_ids() {
            Ok(ids) => ids,
            Err(LinuxError::Unsupported(_)) => return Err(EnergyError::NoCpufreq),
            Err(e) => return Err(e.into()),
        };
        let policies = ids
            .into_iter()
            .map(|id| self.time_in_state_with(id, user_hz))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ResidencySnapshot { policies })
    }
}

/// One OPP of a power table: a frequency and the power of a busy CPU there.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OppPower {
    pub freq_khz: u32,
    /// mW.
    pub power_mw: f64,
}

/// A power table (docs/formats/power-table.md): the OPPs of one CPU, strictly ascending in
/// frequency. The same `opps` array as the audio scenario's `[platform]` table
/// (`pacer_sim::audio::OppSpec`: `freq_khz`, `power`), read with power in mW.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerTable {
    /// Where the table was read from (named in errors).
    pub path: PathBuf,
    pub opps: Vec<OppPower>,
}

/// The energy of one policy's residency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PolicyEnergy {
    pub policy: usize,
    /// Residency summed over frequencies, ns.
    pub time_ns: u64,
    /// Σ_f t_f·P_f, J.
    pub energy_j: f64,
    /// The same time at the highest OPP, J.
    pub top_energy_j: f64,
    /// energy_j / top_energy_j (0 when no time passed).
    pub normalised: f64,
}

/// The energy of a residency snapshot (normally a [`ResidencySnapshot::since`] difference).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Energy {
    pub policies: Vec<PolicyEnergy>,
    /// Sum over the policies, J.
    pub energy_j: f64,
    /// Sum over the policies of their time at the highest OPP, J.
    pub top_energy_j: f64,
    /// energy_j / top_energy_j (0 when no time passed).
    pub normalised: f64,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

impl PowerTable {
    /// Reads and validates a power table file.
    pub fn read(path: impl AsRef<Path>) -> Result<PowerTable, EnergyError> {
        let path = path.as_ref();
        let text = fs::read_to_string(path).map_err(|source| EnergyError::PowerTableIo {
            path: path.to_path_buf(),
            source,
        })?;
        PowerTable::parse(&text, path)
    }

    /// Parses a power table; `path` is only used in errors. The OPPs are the top-level `opps`
    /// array, or, in an audio scenario file, `platform.opps` (so one file can serve both).
    pub fn parse(text: &str, path: &Path) -> Result<PowerTable, EnergyError> {
        let bad = |entry: &str, expected: String| EnergyError::PowerTable {
            path: path.to_path_buf(),
            entry: entry.to_string(),
            expected,
        };
        let doc: toml::Table =
            toml::from_str(text).map_err(|e| bad("(file)", format!("TOML: {}", e.to_string().trim_end())))?;
        let (prefix, opps) = if let Some(opps) = doc.get("opps") {
            // A dedicated power table: anything else is most likely a typo.
            if let Some(other) = doc.keys().find(|k| *k != "opps") {
                return Err(bad(other, "only `opps` at the top level".into()));
            }
            ("opps", opps)
        } else if let Some(opps) = doc
            .get("platform")
            .and_then(|p| p.as_table())
            .and_then(|p| p.get("opps"))
        {
            ("platform.opps", opps)
        } else {
            return Err(bad(
                "opps",
                "an array `opps = [{ freq_khz = …, power = … }, …]` (or `[platform] opps` of an audio scenario)"
                    .into(),
            ));
        };
        let opps = opps
            .as_array()
            .ok_or_else(|| bad(prefix, format!("an array of OPP tables, got {}", opps.type_str())))?;
        if opps.is_empty() {
            return Err(bad(prefix, "at least one OPP".into()));
        }
        let mut out: Vec<OppPower> = Vec::with_capacity(opps.len());
        for (i, opp) in opps.iter().enumerate() {
            let entry = format!("{prefix}[{i}]");
            let t = opp.as_table().ok_or_else(|| {
                bad(
                    &entry,
                    format!("a table {{ freq_khz, power }}, got {}", opp.type_str()),
                )
            })?;
            if let Some(other) = t.keys().find(|k| *k != "freq_khz" && *k != "power") {
                return Err(bad(
                    &format!("{entry}.{other}"),
                    "only `freq_khz` and `power`".into(),
                ));
            }
            let fkey = format!("{entry}.freq_khz");
            let freq_khz = match t.get("freq_khz") {
                Some(toml::Value::Integer(k)) => u32::try_from(*k).ok().filter(|&k| k > 0),
                Some(_) | None => None,
            }
            .ok_or_else(|| {
                bad(
                    &fkey,
                    format!(
                        "an integer frequency in kHz in 1..={}, got {}",
                        u32::MAX,
                        show(t.get("freq_khz"))
                    ),
                )
            })?;
            if let Some(prev) = out.last() {
                if freq_khz <= prev.freq_khz {
                    return Err(bad(
                        &fkey,
                        format!(
                            "frequencies in strictly ascending order, got {freq_khz} after {}",
                            prev.freq_khz
                        ),
                    ));
                }
            }
            let pkey = format!("{entry}.power");
            let power_mw = match t.get("power") {
                Some(toml::Value::Integer(p)) => Some(*p as f64),
                Some(toml::Value::Float(p)) => Some(*p),
                Some(_) | None => None,
            }
            .filter(|p| p.is_finite() && *p >= 0.0)
            .ok_or_else(|| {
                bad(
                    &pkey,
                    format!("a finite power in mW ≥ 0, got {}", show(t.get("power"))),
                )
            })?;
            out.push(OppPower { freq_khz, power_mw });
        }
        Ok(PowerTable {
            path: path.to_path_buf(),
            opps: out,
        })
    }

    /// The power at exactly `khz`, mW.
    pub fn power_mw(&self, khz: u32) -> Option<f64> {
        self.opps.iter().find(|o| o.freq_khz == khz).map(|o| o.power_mw)
    }

    /// The highest OPP.
    pub fn top(&self) -> OppPower {
        *self.opps.last().expect("a parsed table has an OPP")
    }

    /// The energy of one policy's residency: E = Σ_f t_f·P_f (t in s, P in mW, /1000 for J),
    /// and E normalised by the same time at the highest OPP. Frequencies must match an OPP
    /// exactly; a frequency with zero residency is ignored, so a table may leave out OPPs the
    /// run never used.
    pub fn policy_energy(&self, r: &PolicyResidency) -> Result<PolicyEnergy, EnergyError> {
        let mut energy_j = 0.0;
        for s in r.states.iter().filter(|s| s.ns > 0) {
            let p = self
                .power_mw(s.khz)
                .ok_or_else(|| EnergyError::UnknownFrequency {
                    policy: r.policy,
                    khz: s.khz,
                    ns: s.ns,
                    path: self.path.clone(),
                    known: self.opps.iter().map(|o| o.freq_khz).collect(),
                })?;
            energy_j += s.ns as f64 * 1e-9 * p / 1000.0;
        }
        let time_ns = r.total_ns();
        let top_energy_j = time_ns as f64 * 1e-9 * self.top().power_mw / 1000.0;
        Ok(PolicyEnergy {
            policy: r.policy,
            time_ns,
            energy_j,
            top_energy_j,
            normalised: ratio(energy_j, top_energy_j),
        })
    }

    /// [`PowerTable::policy_energy`] of every policy of `s`, and their sums. The one table
    /// applies to every policy: on a heterogeneous machine, pass a snapshot restricted to the
    /// policies the table describes.
    pub fn energy(&self, s: &ResidencySnapshot) -> Result<Energy, EnergyError> {
        let policies = s
            .policies
            .iter()
            .map(|p| self.policy_energy(p))
            .collect::<Result<Vec<_>, _>>()?;
        let energy_j = policies.iter().map(|p| p.energy_j).sum();
        let top_energy_j = policies.iter().map(|p| p.top_energy_j).sum();
        Ok(Energy {
            policies,
            energy_j,
            top_energy_j,
            normalised: ratio(energy_j, top_energy_j),
        })
    }
}

fn show(v: Option<&toml::Value>) -> String {
    match v {
        None => "nothing".into(),
        Some(v) => format!("{v} ({})", v.type_str()),
    }
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
