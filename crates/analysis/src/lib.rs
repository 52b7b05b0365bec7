//! Schedulability analysis, partitioning and task-set generation for pacer.
//!
//! One module per test, named after its paper, with the citation in the module doc:
//! - [`uni`]: uniprocessor EDF (utilisation bound, QPA) and fixed priority (RM/DM, Liu & Layland,
//!   hyperbolic bound, response-time analysis);
//! - [`global`]: global EDF (GFB, BAK, BCL, iterative BCL, Devi–Anderson tardiness) and global
//!   fixed priority (Bertogna–Cirinei RTA);
//! - [`partition`]: bin-packing heuristics, optimal min–max-load ILP, clustered assignment;
//! - [`admission`]: SCHED_DEADLINE admission control as the kernel computes it;
//! - [`gen`]: task-set generators;
//! - [`suite`]: runs every applicable test on a task set (what `pacer analyze` prints);
//! - [`mod@reference`]: the plain implementations the fast paths replaced, kept as test oracles.
//!
//! Tests take task slices in the constrained-deadline model (C ≤ D ≤ T, checked by
//! `pacer_model::format::validate`) and treat periodic tasks as sporadic with synchronous
//! release, which is the worst case the tests assume; offsets are ignored (safe, pessimistic).

pub mod admission;
pub mod gen;
pub mod global;
pub mod outcome;
pub mod partition;
pub mod ratio;
pub mod reference;
pub mod suite;
pub mod timing;
pub mod uni;

pub use outcome::{Outcome, TestKind, Verdict};
pub use timing::{timings, Timing};
