//! What rt-app's `memrun` events cost in the simulator: CPU work per byte read or written and
//! per hop of a pointer chase, as functions of the bytes the buffer spans (src/rt-app.c
//! `memread()`, `memwrite()`, `memchase_run()`; buffers as src/rt-app_parse_config.c builds
//! them). The latency of a dependent load steps up at each cache size, and a byte loop slows down
//! once its buffer leaves the caches, so one figure per access would be wrong by two orders of
//! magnitude across buffer sizes.
//!
//! Each cost is a curve of measured points (buffer bytes, picoseconds per access), read between
//! two measured sizes by linear interpolation in log2(bytes) and held flat beyond the first and
//! the last. Read and write follow the buffer's size; a chase follows its chain's footprint
//! (positions × stride), with one curve per chain order. The chase curves were measured with
//! rt-app's default stride, 64 bytes (one position per cache line); other strides use the same
//! curves by footprint, which leaves out what they change besides it (several positions per line
//! below 64, more pages per position above).
//!
//! The defaults ([`MemRunCost::measured`]) were measured on 2026-11-26 on the development
//! machine (2-vCPU KVM guest, "Intel(R) Xeon(R) Processor", L1d 48 KiB, L2 2 MiB, L3 reported as
//! 480 MiB, 4 KiB pages: transparent huge pages only on madvise) with
//! `gcc -O2 -o memrun crates/sim/tools/memrun.c && ./memrun`, whose loops are the ones gcc emits
//! for rt-app's (same instructions as /work/tools/rt-app/bin/rt-app). Each point is the median of
//! three runs of the tool, each figure of a run the median of 5 samples after a warm-up pass.
//! Another machine's figures come from the same tool: [`MemRunCost::from_tool_output`] reads its
//! output (`pacer sim --memrun-cost FILE`).

use pacer_workload::{ChaseOrder, MemBuffer, MemBufferKind};

/// Why a cost curve or the tool's output cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemCostError {
    #[error("{curve}: expected at least one measured point")]
    Empty { curve: &'static str },
    #[error("{curve}: buffer sizes must be > 0 and ascending, found {prev} then {next}")]
    NotAscending {
        curve: &'static str,
        prev: u64,
        next: u64,
    },
    #[error("line {line}: {message}")]
    Parse { line: usize, message: String },
}

/// Measured cost of one access by buffer size: (bytes, picoseconds per access), ascending bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostCurve {
    points: Vec<(u64, u64)>,
}

impl CostCurve {
    /// A curve through `points` (at least one, sizes > 0 and strictly ascending); `curve` names
    /// it in errors.
    pub fn new(curve: &'static str, points: Vec<(u64, u64)>) -> Result<CostCurve, MemCostError> {
        if points.is_empty() {
            return Err(MemCostError::Empty { curve });
        }
        let mut prev = 0;
        for &(bytes, _) in &points {
            if bytes <= prev {
                return Err(MemCostError::NotAscending {
                    curve,
                    prev,
                    next: bytes,
                });
            }
            prev = bytes;
        }
        Ok(CostCurve { points })
    }

    /// The measured points.
    pub fn points(&self) -> &[(u64, u64)] {
        &self.points
    }

    /// Picoseconds per access for a buffer of `bytes`: linear in log2(bytes) between the two
    /// measured sizes around it, the nearest measured value outside them.
    pub fn ps_at(&self, bytes: u64) -> f64 {
        let p = &self.points;
        let (first, last) = (p[0], p[p.len() - 1]);
        if bytes <= first.0 {
            return first.1 as f64;
        }
        if bytes >= last.0 {
            return last.1 as f64;
        }
        // The first point above `bytes` exists and is not the first (bytes > first.0).
        let i = p.partition_point(|&(b, _)| b <= bytes);
        let ((b0, c0), (b1, c1)) = (p[i - 1], p[i]);
        let t = ((bytes as f64).log2() - (b0 as f64).log2()) / ((b1 as f64).log2() - (b0 as f64).log2());
        c0 as f64 + t * (c1 as f64 - c0 as f64)
    }
}

/// The cost of `memrun` accesses ([`crate::SimConfig::memrun`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemRunCost {
    /// Per byte of a `read`, by buffer size.
    pub read: CostCurve,
    /// Per byte of a `write`, by buffer size.
    pub write: CostCurve,
    /// Per hop of a bit-reversed (`random`) chase, by footprint.
    pub chase_random: CostCurve,
    /// Per hop of a `sequential` chase, by footprint.
    pub chase_sequential: CostCurve,
}

// Picoseconds per byte of rt-app's memread() / memwrite() by buffer size (see the module
// documentation for how and when). Ranges over the three runs: read 4 KiB–1 MiB 125–136,
// 4–16 MiB 162–179, 64 MiB–1 GiB 422–521; write 171–200 up to 16 MiB, 206–272 above.
const READ_PS: [(u64, u64); 10] = [
    (4 << 10, 135),
    (16 << 10, 128),
    (64 << 10, 129),
    (256 << 10, 128),
    (1 << 20, 129),
    (4 << 20, 171),
    (16 << 20, 171),
    (64 << 20, 462),
    (256 << 20, 493),
    (1 << 30, 515),
];
const WRITE_PS: [(u64, u64); 10] = [
    (4 << 10, 174),
    (16 << 10, 173),
    (64 << 10, 176),
    (256 << 10, 177),
    (1 << 20, 179),
    (4 << 20, 185),
    (16 << 20, 192),
    (64 << 20, 255),
    (256 << 20, 217),
    (1 << 30, 207),
];
// Picoseconds per hop of rt-app's memchase_run() by chain footprint, stride 64: random then
// sequential. The steps: L1 (48 KiB) at 64 KiB, L2 (2 MiB) at 2–4 MiB, the last level and the
// TLB's reach between 16 and 64 MiB. Spread of the three runs around their median: within 7 %
// for the random chain inside L2 and from 64 MiB up (one 17 % outlier at 8 KiB, 10 % at
// 512 MiB); up to 25–38 % at the steps (2 MiB: 19.7–24.9 ns, 16 MiB: 55–71 ns, 32 MiB:
// 93–156 ns); 6–18 % for the sequential chain past 1 MiB.
const CHASE_PS: [(u64, u64, u64); 19] = [
    (4 << 10, 1287, 1270),
    (8 << 10, 1292, 1292),
    (16 << 10, 1288, 1274),
    (32 << 10, 1271, 1267),
    (64 << 10, 4664, 1323),
    (128 << 10, 4748, 1343),
    (256 << 10, 4754, 1324),
    (512 << 10, 5949, 1317),
    (1 << 20, 6660, 1364),
    (2 << 20, 19816, 1935),
    (4 << 20, 45727, 2833),
    (8 << 20, 50569, 3020),
    (16 << 20, 59057, 3157),
    (32 << 20, 149212, 3389),
    (64 << 20, 186042, 4322),
    (128 << 20, 202148, 8869),
    (256 << 20, 216950, 8081),
    (512 << 20, 244511, 7906),
    (1 << 30, 266130, 7196),
];

impl MemRunCost {
    /// The development machine's figures (module documentation).
    pub fn measured() -> MemRunCost {
        let curve = |points: Vec<(u64, u64)>| CostCurve { points };
        MemRunCost {
            read: curve(READ_PS.to_vec()),
            write: curve(WRITE_PS.to_vec()),
            chase_random: curve(CHASE_PS.iter().map(|&(b, r, _)| (b, r)).collect()),
            chase_sequential: curve(CHASE_PS.iter().map(|&(b, _, s)| (b, s)).collect()),
        }
    }

    /// The curve of a buffer's accesses.
    pub fn curve(&self, kind: MemBufferKind) -> &CostCurve {
        match kind {
            MemBufferKind::Read => &self.read,
            MemBufferKind::Write => &self.write,
            MemBufferKind::Chase {
                order: ChaseOrder::Random,
                ..
            } => &self.chase_random,
            MemBufferKind::Chase {
                order: ChaseOrder::Sequential,
                ..
            } => &self.chase_sequential,
        }
    }

    /// Nanoseconds of work (at capacity 1024) of `count` accesses to `buf`.
    pub fn work_ns(&self, buf: &MemBuffer, count: u64) -> f64 {
        count as f64 * self.curve(buf.kind).ps_at(buf.footprint()) / 1000.0
    }

    /// The figures printed by crates/sim/tools/memrun.c: a section of `bytes read write` rows
    /// (ns per byte) under a `#` line naming `read_ns/byte`, and one of `footprint random
    /// sequential` rows (ns per hop) under a `#` line naming `chase`.
    pub fn from_tool_output(text: &str) -> Result<MemRunCost, MemCostError> {
        #[derive(PartialEq)]
        enum Section {
            None,
            Bytes,
            Chase,
        }
        let mut section = Section::None;
        let (mut read, mut write, mut random, mut sequential) = (vec![], vec![], vec![], vec![]);
        for (i, line) in text.lines().enumerate() {
            let bad = |message: String| MemCostError::Parse { line: i + 1, message };
            let line = line.trim();
            if let Some(head) = line.strip_prefix('#') {
                section = if head.contains("read_ns/byte") {
                    Section::Bytes
                } else if head.contains("chase") {
                    Section::Chase
                } else {
                    Section::None
                };
                continue;
            }
            if line.is_empty() || section == Section::None {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() != 3 {
                return Err(bad(format!(
                    "expected 3 numbers (bytes and two costs in ns), found `{line}`"
                )));
            }
            let bytes: u64 = f[0]
                .parse()
                .map_err(|_| bad(format!("expected a number of bytes, found `{}`", f[0])))?;
            let mut ps = [0u64; 2];
            for (k, v) in f[1..].iter().enumerate() {
                let ns: f64 = v
                    .parse()
                    .ok()
                    .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| bad(format!("expected a cost in ns ≥ 0, found `{v}`")))?;
                ps[k] = (ns * 1000.0).round() as u64;
            }
            let (a, b) = match section {
                Section::Bytes => (&mut read, &mut write),
                _ => (&mut random, &mut sequential),
            };
            a.push((bytes, ps[0]));
            b.push((bytes, ps[1]));
        }
        Ok(MemRunCost {
            read: CostCurve::new("read", read)?,
            write: CostCurve::new("write", write)?,
            chase_random: CostCurve::new("chase random", random)?,
            chase_sequential: CostCurve::new("chase sequential", sequential)?,
        })
    }
}

impl Default for MemRunCost {
    fn default() -> Self {
        MemRunCost::measured()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_interpolate_in_log_size_and_hold_at_the_ends() {
        let c = CostCurve::new("t", vec![(1 << 10, 1000), (1 << 20, 3000)]).unwrap();
        assert_eq!(c.ps_at(1 << 10), 1000.0);
        assert_eq!(c.ps_at(1), 1000.0);
        assert_eq!(c.ps_at(1 << 20), 3000.0);
        assert_eq!(c.ps_at(1 << 40), 3000.0);
        // 2^15 is halfway in log2 between 2^10 and 2^20.
        assert!((c.ps_at(1 << 15) - 2000.0).abs() < 1e-9);
        assert!((c.ps_at(1 << 11) - 1200.0).abs() < 1e-9);
        assert!(matches!(
            CostCurve::new("t", vec![]),
            Err(MemCostError::Empty { .. })
        ));
        assert!(matches!(
            CostCurve::new("t", vec![(4, 1), (4, 2)]),
            Err(MemCostError::NotAscending { prev: 4, next: 4, .. })
        ));
    }

    #[test]
    fn the_measured_chase_steps_up_past_each_cache() {
        let m = MemRunCost::measured();
        let at = |kb: u64| m.chase_random.ps_at(kb << 10);
        // L1 hit, L2 hit, past L2, past the last level: each several times the previous.
        assert!(at(32) < 2000.0 && at(256) > 2.0 * at(32));
        assert!(at(8 << 10) > 5.0 * at(256));
        assert!(at(1 << 20) > 3.0 * at(8 << 10));
        // The sequential chain is prefetched: far cheaper than the random one when large.
        assert!(m.chase_sequential.ps_at(1 << 30) * 10.0 < m.chase_random.ps_at(1 << 30));
    }

    #[test]
    fn the_tools_output_is_read_back() {
        let text = "# bytes  read_ns/byte  write_ns/byte\n4096 0.1345 0.1705\n65536 0.1268 0.1738\n\
                    # chase, stride 64: footprint_bytes  random_ns/hop  sequential_ns/hop\n\
                    4096 1.323 1.277\n1048576 6.660 1.390\n";
        let m = MemRunCost::from_tool_output(text).unwrap();
        assert_eq!(m.read.points(), [(4096, 135), (65536, 127)]);
        assert_eq!(m.write.points(), [(4096, 171), (65536, 174)]);
        assert_eq!(m.chase_random.points(), [(4096, 1323), (1048576, 6660)]);
        assert_eq!(m.chase_sequential.points(), [(4096, 1277), (1048576, 1390)]);
        let e = MemRunCost::from_tool_output("# bytes read_ns/byte write_ns/byte\n4096 x 1\n").unwrap_err();
        assert!(matches!(e, MemCostError::Parse { line: 2, .. }), "{e}");
        // Without a chase section there is no chase curve.
        let e = MemRunCost::from_tool_output("# bytes read_ns/byte write_ns/byte\n4096 1 1\n").unwrap_err();
        assert_eq!(
            e,
            MemCostError::Empty {
                curve: "chase random"
            }
        );
    }
}
