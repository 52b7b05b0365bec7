//! `pacer calibrate`: measures the working-set costs of this machine into a calibration profile
//! (`pacer_workload::calibration`, `"schema": "pacer.calibration/1"`).
//!
//! rm-vs-edf-multicore-linux.txt §5.2 benchmarked the time to access its array before running,
//! and attributes the longer execution under global scheduling to working sets reloaded after a
//! migration or a long absence (§5.2, §6.2 and Fig. 2). For each working-set size and order this
//! module times, on one thread, with the working-set phase's own loop (`run::wss`):
//!
//! 1. **warm**: pinned to the first CPU, two passes, then a third, timed;
//! 2. **migrated**: `sched_setaffinity` to the second CPU (the kernel moves the calling thread
//!    before the call returns), then the first pass there, timed: the lines come from the other
//!    CPU's private cache or the shared level;
//! 3. **evicted**: back on the first CPU, two passes, then one word written in every line of a
//!    buffer of `evict_bytes` (by default twice the shared cache, so the working set leaves every
//!    level), then the first pass, timed.
//!
//! Each point is the median of `repeats` rounds; the rounds interleave the sizes, so a burst of
//! noise from the other work of a shared machine spreads over every point instead of spoiling
//! one. A single pass is timed (not an average over many) because only the first pass after a
//! move or an eviction is cold; the clock's own cost (tens of ns) is in every figure alike and
//! cancels in the differences the simulator uses.

use std::path::Path;
use std::time::Instant;

use pacer_workload::calibration::{CacheLevel, CachePoint, CacheProfile, MachineInfo, CALIBRATION_SCHEMA};
use pacer_workload::wss::{WorkingSet, WssAmount, WssOrder, LINE_BYTES};

use crate::run::wss::WssBuffer;
use crate::sched;

/// What to measure.
#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    /// Working-set sizes, bytes (multiples of 64), measured in this order.
    pub sizes: Vec<u64>,
    pub orders: Vec<WssOrder>,
    /// Rounds per point; each figure is their median.
    pub repeats: u32,
    /// The CPU the working set is warmed on, and the one it migrates to.
    pub cpus: (usize, usize),
    /// Bytes of the evicting buffer; `None`: twice the largest shared cache (64 MiB without one).
    pub evict_bytes: Option<u64>,
    /// Seed of the random order.
    pub seed: u64,
    /// The command line, recorded in the profile.
    pub command: String,
}

/// Why calibration failed.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    #[error("{0}")]
    Options(String),
    #[error("cannot pin the measuring thread to CPU {cpu}: {source}")]
    Affinity {
        cpu: usize,
        #[source]
        source: crate::sched::LinuxError,
    },
    #[error("cannot allocate {0} bytes for a working set or the eviction buffer")]
    Alloc(u64),
}

/// One point as it is measured, for progress output.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Points done so far (of `total`).
    pub done: usize,
    pub total: usize,
    pub point: CachePoint,
}

/// The caches of `cpu` from sysfs (`/sys/devices/system/cpu/cpuN/cache/index*`), by index.
pub fn caches_of(cpu: usize) -> Vec<CacheLevel> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cache");
    let mut out = Vec::new();
    for i in 0.. {
        let base = format!("{dir}/index{i}");
        if !Path::new(&base).exists() {
            break;
        }
        let read = |f: &str| {
            std::fs::read_to_string(format!("{base}/{f}"))
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        let size = parse_size(&read("size")).unwrap_or(0);
        out.push(CacheLevel {
            level: read("level").parse().unwrap_or(0),
            kind: read("type"),
            size_bytes: size,
            shared_cpus: read("shared_cpu_list"),
        });
    }
    out
}

/// sysfs cache sizes: `32K`, `1024K`, `32768K`, `2M`.
fn parse_size(s: &str) -> Option<u64> {
    pacer_model::bytes::parse_bytes(s).ok()
}

/// Whether a cache is private to one CPU (its `shared_cpu_list` names one CPU).
fn private(c: &CacheLevel) -> bool {
    crate::sys::parse_cpu_list(&c.shared_cpus).is_some_and(|l| l.len() <= 1)
}

/// The largest data cache private to one CPU, and the largest shared one (0 if none).
pub fn capacities(caches: &[CacheLevel]) -> (u64, u64) {
    let data = caches.iter().filter(|c| c.kind != "Instruction");
    let private_max = data
        .clone()
        .filter(|c| private(c))
        .map(|c| c.size_bytes)
        .max()
        .unwrap_or(0);
    let shared_max = data
        .filter(|c| !private(c))
        .map(|c| c.size_bytes)
        .max()
        .unwrap_or(0);
    (private_max, shared_max)
}

fn cpu_model() -> String {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(|| "unknown".to_string(), |(_, v)| v.trim().to_string())
}

fn kernel_release() -> String {
    let release = crate::sys::Uname::this_machine().release;
    if release.is_empty() {
        "unknown".into()
    } else {
        release
    }
}

/// Now, UTC, as RFC 3339 to the second.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_rfc3339(secs)
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (Hinnant's days-to-civil algorithm).
pub fn utc_rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    let n = v.len();
    if n == 0 {
        0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]).div_ceil(2)
    }
}

fn pin(cpu: usize) -> Result<(), CalibrateError> {
    sched::set_affinity(0, &[cpu]).map_err(|source| CalibrateError::Affinity { cpu, source })
}

/// Measures the profile; `progress` hears of each point as its last round ends. Runs on the
/// calling thread, whose affinity it changes and restores.
pub fn calibrate(
    opts: &CalibrateOptions,
    mut progress: impl FnMut(Progress),
) -> Result<CacheProfile, CalibrateError> {
    if opts.sizes.is_empty() || opts.orders.is_empty() {
        return Err(CalibrateError::Options(
            "nothing to measure: no sizes or no orders".into(),
        ));
    }
    if opts.repeats == 0 {
        return Err(CalibrateError::Options("--repeats must be at least 1".into()));
    }
    let (a, b) = opts.cpus;
    if a == b {
        return Err(CalibrateError::Options(format!(
            "a migration needs two different CPUs, found {a} twice"
        )));
    }
    let online = crate::sys::online_cpus();
    for cpu in [a, b] {
        if !online.contains(&cpu) {
            return Err(CalibrateError::Options(format!(
                "CPU {cpu} is not online (online: {})",
                crate::sys::format_cpu_list(&online)
            )));
        }
    }
    let sets: Vec<WorkingSet> = opts
        .orders
        .iter()
        .flat_map(|&order| {
            opts.sizes.iter().map(move |&size| WorkingSet {
                size,
                order,
                seed: opts.seed,
                amount: WssAmount::Passes { passes: 1 },
            })
        })
        .collect();
    for ws in &sets {
        ws.validate()
            .map_err(|e| CalibrateError::Options(format!("working-set size {}: {e}", ws.size)))?;
    }
    let caches = caches_of(a);
    let (private_bytes, shared_bytes) = capacities(&caches);
    let evict_bytes = opts.evict_bytes.unwrap_or(if shared_bytes > 0 {
        2 * shared_bytes
    } else {
        64 << 20
    });
    if evict_bytes == 0 || !evict_bytes.is_multiple_of(LINE_BYTES) {
        return Err(CalibrateError::Options(format!(
            "the eviction buffer must be a positive multiple of 64 bytes, found {evict_bytes}"
        )));
    }
    let saved = sched::get_affinity(0).ok();
    let result = measure(&sets, opts, evict_bytes, &mut progress);
    if let Some(cpus) = saved {
        let _ = sched::set_affinity(0, &cpus);
    }
    let points = result?;
    Ok(CacheProfile {
        schema: CALIBRATION_SCHEMA.to_string(),
        machine: MachineInfo {
            cpu_model: cpu_model(),
            cpus: online.len() as u32,
            kernel: kernel_release(),
            caches,
        },
        date: utc_now(),
        command: opts.command.clone(),
        line_bytes: LINE_BYTES,
        private_cache_bytes: if private_bytes > 0 { private_bytes } else { 1 << 20 },
        shared_cache_bytes: shared_bytes,
        evict_bytes,
        repeats: opts.repeats,
        cpus: vec![a as u32, b as u32],
        points,
    })
}

fn measure(
    sets: &[WorkingSet],
    opts: &CalibrateOptions,
    evict_bytes: u64,
    progress: &mut impl FnMut(Progress),
) -> Result<Vec<CachePoint>, CalibrateError> {
    let (a, b) = opts.cpus;
    pin(a)?;
    let evict = WssBuffer::new(evict_bytes, []).ok_or(CalibrateError::Alloc(evict_bytes))?;
    let mut bufs = Vec::with_capacity(sets.len());
    for ws in sets {
        bufs.push(WssBuffer::new(ws.size, [ws]).ok_or(CalibrateError::Alloc(ws.size))?);
    }
    let n = opts.repeats as usize;
    let mut samples = vec![
        [
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n)
        ];
        sets.len()
    ];
    let mut points = Vec::with_capacity(sets.len());
    for round in 0..n {
        for (i, (ws, buf)) in sets.iter().zip(&bufs).enumerate() {
            let order = buf.order_of(ws).unwrap_or(&[]);
            let lines = ws.lines();
            let pass = || {
                let t = Instant::now();
                buf.access(order, 0, lines);
                t.elapsed().as_nanos() as u64
            };
            pin(a)?;
            pass();
            pass();
            let warm = pass();
            pin(b)?;
            let migrated = pass();
            pin(a)?;
            pass();
            pass();
            evict.sweep(round as u64);
            let evicted = pass();
            for (k, v) in [warm, migrated, evicted].into_iter().enumerate() {
                samples[i][k].push(v.max(1));
            }
            if round + 1 == n {
                let [w, m, e] = &mut samples[i];
                let point = CachePoint {
                    order: ws.order,
                    wss_bytes: ws.size,
                    warm_pass_ns: median(w),
                    migrated_pass_ns: median(m),
                    evicted_pass_ns: median(e),
                };
                points.push(point);
                progress(Progress {
                    done: i + 1,
                    total: sets.len(),
                    point,
                });
            }
        }
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_sizes_and_medians() {
        assert_eq!(utc_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_rfc3339(951_782_400 + 3661), "2000-02-29T01:01:01Z");
        assert_eq!(utc_rfc3339(1_798_761_599), "2026-12-31T23:59:59Z");
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("x"), None);
        assert_eq!(median(&mut [5, 1, 3]), 3);
        assert_eq!(median(&mut [4, 1, 3, 2]), 3);
        let c = |level, kind: &str, size, shared: &str| CacheLevel {
            level,
            kind: kind.into(),
            size_bytes: size,
            shared_cpus: shared.into(),
        };
        let caches = [
            c(1, "Data", 32 << 10, "0"),
            c(1, "Instruction", 32 << 10, "0"),
            c(2, "Unified", 1 << 20, "0"),
            c(3, "Unified", 32 << 20, "0-1"),
        ];
        assert_eq!(capacities(&caches), (1 << 20, 32 << 20));
    }
}
