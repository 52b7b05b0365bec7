//! The calibration profile of a machine's working-set costs (`"schema": "pacer.calibration/1"`,
//! docs/formats/calibration.md), written by `pacer calibrate` and read by `pacer sim
//! --cache-model` and by the working-set phase.
//!
//! rm-vs-edf-multicore-linux.txt §5.2 benchmarked "the time to access the elements of the array"
//! before its runs, and explains why jobs take longer under migration: "each time a job is
//! interrupted, it may resume on a different processor (due to migration); or it may resume
//! after a long interval of time … it is likely that its data is not present in the cache and
//! must be reloaded from the next level in the memory hierarchy". A profile holds exactly those
//! three measurements per working-set size and order: a pass over a warm working set, the first
//! pass after a migration to another CPU (the data comes from the other CPU's cache or the shared
//! level), and the first pass after another buffer of `evict_bytes` ran on the same CPU (the data
//! comes from memory when that buffer exceeds the shared cache). Every figure in a profile is a
//! median of `repeats` measurements on the machine it names; nothing here is assumed.

use std::path::Path;

use pacer_model::format::FormatError;
use serde::{Deserialize, Serialize};

use crate::wss::{WssOrder, LINE_BYTES};

/// The schema name and version this build reads and writes.
pub const CALIBRATION_SCHEMA: &str = "pacer.calibration/1";

/// A machine's measured working-set costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheProfile {
    /// Always [`CALIBRATION_SCHEMA`].
    pub schema: String,
    pub machine: MachineInfo,
    /// When it was measured (UTC, RFC 3339).
    pub date: String,
    /// The command that measured it.
    pub command: String,
    /// Bytes of a cache line (64: the working-set phase's element).
    pub line_bytes: u64,
    /// Capacity of one CPU's private caches as the cache model sees it (the largest private
    /// level): what a CPU keeps of the working sets that ran on it.
    pub private_cache_bytes: u64,
    /// Capacity of the cache shared by the CPUs (0 if none): a working set evicted from a
    /// private cache that is still here reloads at the migration cost, else at the eviction one.
    pub shared_cache_bytes: u64,
    /// Size of the buffer that evicted the working set for `evicted_pass_ns`.
    pub evict_bytes: u64,
    /// Measurements per point (each figure is their median).
    pub repeats: u32,
    /// The CPU the working set was warmed on, then the one it migrated to.
    pub cpus: Vec<u32>,
    /// The measurements, per order by ascending size.
    pub points: Vec<CachePoint>,
}

/// What the profile records of the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineInfo {
    pub cpu_model: String,
    pub cpus: u32,
    pub kernel: String,
    /// The caches of the first measured CPU, as sysfs describes them.
    pub caches: Vec<CacheLevel>,
}

/// One cache of a CPU (`/sys/devices/system/cpu/cpuN/cache/indexK`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheLevel {
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    pub size_bytes: u64,
    /// The CPUs sharing it (`shared_cpu_list`).
    pub shared_cpus: String,
}

/// Pass times over one working set, integer ns, each the median of the repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachePoint {
    pub order: WssOrder,
    pub wss_bytes: u64,
    /// A pass over a working set the previous pass left in the cache.
    pub warm_pass_ns: u64,
    /// The first pass after moving to the other CPU.
    pub migrated_pass_ns: u64,
    /// The first pass after `evict_bytes` of another buffer were written on the same CPU.
    pub evicted_pass_ns: u64,
}

/// Where a missing working set is reloaded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadFrom {
    /// Another CPU's cache or the shared level: what a migration costs.
    Shared,
    /// Memory: what a pass costs after an eviction by a buffer larger than the shared cache.
    Memory,
}

impl CacheProfile {
    /// Reads and checks a profile file.
    pub fn read(path: &Path) -> Result<CacheProfile, FormatError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| FormatError::Io {
            file: file.clone(),
            source,
        })?;
        CacheProfile::parse(&text, &file)
    }

    /// Parses and checks a profile; `file` names the source in errors.
    pub fn parse(text: &str, file: &str) -> Result<CacheProfile, FormatError> {
        let field = |field: String, message: String| FormatError::Field {
            file: file.to_string(),
            field,
            message,
        };
        // The schema first, so a file of another kind or version says so rather than failing on
        // whatever field differs.
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| FormatError::Syntax {
            file: file.to_string(),
            line: e.line(),
            column: e.column(),
            message: e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or_default()
                .to_string(),
        })?;
        match value.get("schema") {
            Some(serde_json::Value::String(s)) if s == CALIBRATION_SCHEMA => {}
            other => {
                return Err(field(
                    "schema".into(),
                    format!(
                    "expected \"{CALIBRATION_SCHEMA}\" (a profile written by `pacer calibrate`), found {}",
                    other.map_or("nothing".to_string(), |v| v.to_string())
                ),
                ))
            }
        }
        let p: CacheProfile = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            field(
                if path == "." { "(top level)".into() } else { path },
                e.into_inner().to_string(),
            )
        })?;
        p.validate().map_err(|(f, m)| field(f, m))?;
        Ok(p)
    }

    /// Checks the relations the model relies on: the failing field and what was expected.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.line_bytes != LINE_BYTES {
            return Err((
                "line_bytes".into(),
                format!("expected {LINE_BYTES}, found {}", self.line_bytes),
            ));
        }
        if self.private_cache_bytes == 0 {
            return Err((
                "private_cache_bytes".into(),
                "expected a capacity > 0, found 0".into(),
            ));
        }
        if self.repeats == 0 {
            return Err(("repeats".into(), "expected at least 1, found 0".into()));
        }
        if self.points.is_empty() {
            return Err((
                "points".into(),
                "expected at least one measurement, found none".into(),
            ));
        }
        for (i, p) in self.points.iter().enumerate() {
            let f = |name: &str| format!("points[{i}].{name}");
            if p.wss_bytes == 0 || !p.wss_bytes.is_multiple_of(LINE_BYTES) {
                return Err((
                    f("wss_bytes"),
                    format!(
                        "expected a positive multiple of {LINE_BYTES}, found {}",
                        p.wss_bytes
                    ),
                ));
            }
            for (name, v) in [
                ("warm_pass_ns", p.warm_pass_ns),
                ("migrated_pass_ns", p.migrated_pass_ns),
                ("evicted_pass_ns", p.evicted_pass_ns),
            ] {
                if v == 0 {
                    return Err((f(name), "expected a time > 0 ns, found 0".into()));
                }
            }
            let earlier = self.points[..i]
                .iter()
                .rev()
                .find(|q| q.order == p.order)
                .map(|q| q.wss_bytes);
            if let Some(prev) = earlier {
                if prev >= p.wss_bytes {
                    return Err((
                        f("wss_bytes"),
                        format!(
                            "expected sizes ascending per order: {} > {prev} of the previous {} point, found {}",
                            prev,
                            p.order.name(),
                            p.wss_bytes
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The profile as written to a file (pretty JSON, newline-terminated).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// The points of one order, or of the other when the profile has none of it.
    fn curve(&self, order: WssOrder) -> impl Iterator<Item = &CachePoint> + Clone {
        let has = self.points.iter().any(|p| p.order == order);
        let pick = if has {
            order
        } else {
            self.points.first().map_or(order, |p| p.order)
        };
        self.points.iter().filter(move |p| p.order == pick)
    }

    /// Cost of one line access over a warm working set of `size` bytes, ns.
    pub fn warm_line_ns(&self, order: WssOrder, size: u64) -> f64 {
        interpolate(self.curve(order), size, |p| {
            p.warm_pass_ns as f64 * LINE_BYTES as f64 / p.wss_bytes as f64
        })
    }

    /// Extra time per byte of working set reloaded from `from`, ns (0 where the measurement
    /// shows none: a reload never makes a pass faster in the model).
    pub fn reload_ns_per_byte(&self, order: WssOrder, size: u64, from: ReloadFrom) -> f64 {
        interpolate(self.curve(order), size, |p| {
            let cold = match from {
                ReloadFrom::Shared => p.migrated_pass_ns,
                ReloadFrom::Memory => p.evicted_pass_ns,
            };
            cold.saturating_sub(p.warm_pass_ns) as f64 / p.wss_bytes as f64
        })
    }

    /// The profile measured on the development machine, committed as
    /// data/calibration/dev-vm.json (how it was made: data/calibration/README.md). The working-set
    /// phase's cost in the simulator comes from it unless another profile is given.
    pub fn measured() -> CacheProfile {
        // The file is checked by a test (`measured_profile_is_valid`); a broken one cannot ship.
        CacheProfile::parse(MEASURED, "data/calibration/dev-vm.json").unwrap_or_else(|e| panic!("{e}"))
    }
}

const MEASURED: &str = include_str!("../../../data/calibration/dev-vm.json");

/// `value` of the points at `size`: linear in log2(size) between the two nearest, the nearest
/// one outside them (a per-line or per-byte figure, so a smaller working set costs less in
/// total even below the smallest point).
fn interpolate<'a>(
    points: impl Iterator<Item = &'a CachePoint> + Clone,
    size: u64,
    value: impl Fn(&CachePoint) -> f64,
) -> f64 {
    let mut below: Option<&CachePoint> = None;
    for p in points.clone() {
        if p.wss_bytes == size {
            return value(p);
        }
        if p.wss_bytes > size {
            return match below {
                None => value(p),
                Some(b) => {
                    let (x0, x1, x) = (
                        (b.wss_bytes as f64).log2(),
                        (p.wss_bytes as f64).log2(),
                        (size as f64).log2(),
                    );
                    value(b) + (value(p) - value(b)) * (x - x0) / (x1 - x0)
                }
            };
        }
        below = Some(p);
    }
    below.map_or(0.0, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> CacheProfile {
        let pt = |size: u64, warm, mig, ev| CachePoint {
            order: WssOrder::Sequential,
            wss_bytes: size,
            warm_pass_ns: warm,
            migrated_pass_ns: mig,
            evicted_pass_ns: ev,
        };
        CacheProfile {
            schema: CALIBRATION_SCHEMA.into(),
            machine: MachineInfo {
                cpu_model: "test".into(),
                cpus: 2,
                kernel: "6.18".into(),
                caches: vec![],
            },
            date: "2026-01-01T00:00:00Z".into(),
            command: "test".into(),
            line_bytes: 64,
            private_cache_bytes: 1 << 20,
            shared_cache_bytes: 32 << 20,
            evict_bytes: 64 << 20,
            repeats: 5,
            cpus: vec![0, 1],
            points: vec![pt(4096, 100, 300, 500), pt(16384, 400, 1600, 2400)],
        }
    }

    #[test]
    fn round_trips_and_interpolates() {
        let p = profile();
        let back = CacheProfile::parse(&p.to_json(), "p.json").unwrap();
        assert_eq!(back, p);
        // Per line: 100 ns / 64 lines and 400 / 256 lines = 1.5625 at both ends.
        assert!((p.warm_line_ns(WssOrder::Sequential, 8192) - 1.5625).abs() < 1e-9);
        // Per byte of reload from the shared level: 200/4096 and 1200/16384, halfway at 8 KiB.
        let mid = (200.0 / 4096.0 + 1200.0 / 16384.0) / 2.0;
        assert!((p.reload_ns_per_byte(WssOrder::Sequential, 8192, ReloadFrom::Shared) - mid).abs() < 1e-12);
        // Outside the points: the nearest one's per-byte figure; the other order falls back.
        assert!(
            (p.reload_ns_per_byte(WssOrder::Random, 1 << 30, ReloadFrom::Memory) - 2000.0 / 16384.0).abs()
                < 1e-12
        );
    }

    #[test]
    fn bad_profiles_name_the_field_and_what_was_expected() {
        let bad = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value = serde_json::from_str(&profile().to_json()).unwrap();
            edit(&mut v);
            match CacheProfile::parse(&v.to_string(), "p.json") {
                Err(FormatError::Field { file, field, message }) => {
                    assert_eq!(file, "p.json");
                    (field, message)
                }
                other => panic!("expected a field error, got {other:?}"),
            }
        };
        let (f, m) = bad(&|v| v["schema"] = "pacer.calibration/2".into());
        assert_eq!(f, "schema");
        assert!(m.contains("expected \"pacer.calibration/1\""), "{m}");
        let (f, m) = bad(&|v| v["points"][1]["wss_bytes"] = 1000.into());
        assert_eq!(f, "points[1].wss_bytes");
        assert!(m.contains("multiple of 64"), "{m}");
        let (f, _) = bad(&|v| v["points"][1]["wss_bytes"] = 4096.into());
        assert_eq!(f, "points[1].wss_bytes");
        let (f, m) = bad(&|v| v["points"][0]["warm_pass_ns"] = 0.into());
        assert_eq!(
            (f.as_str(), m.as_str()),
            ("points[0].warm_pass_ns", "expected a time > 0 ns, found 0")
        );
        let (f, _) = bad(&|v| v["points"][0]["order"] = "diagonal".into());
        assert_eq!(f, "points[0].order");
        let (f, m) = bad(&|v| v["private_cache_bytes"] = (-1).into());
        assert_eq!(f, "private_cache_bytes");
        assert!(m.contains("invalid value"), "{m}");
        let (f, _) = bad(&|v| {
            v.as_object_mut().unwrap().remove("points");
        });
        assert_eq!(f, "(top level)");
        assert!(matches!(
            CacheProfile::parse("{", "p.json"),
            Err(FormatError::Syntax { .. })
        ));
    }

    #[test]
    fn measured_profile_is_valid() {
        let p = CacheProfile::measured();
        assert!(p.points.iter().any(|q| q.order == WssOrder::Sequential));
        assert!(p.points.iter().any(|q| q.order == WssOrder::Random));
    }
}
