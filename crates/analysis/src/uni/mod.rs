//! Uniprocessor tests: EDF (utilisation bound, QPA) and fixed priority (RM/DM, Liu & Layland,
//! hyperbolic bound, exact response-time analysis).

pub mod edf_utilization;
pub mod hyperbolic;
pub mod liu_layland;
pub mod priority;
pub mod qpa;
pub mod rta;
