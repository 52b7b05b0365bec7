//! pacer's real-time component runtime, after RTDroid (Yan et al., "Can Android Run on Time?
//! Extending and Measuring the Android Platform's Timeliness", ACM TECS 17(6), 2019): components
//! declared in a manifest with their timing and memory needs, validated before anything starts,
//! run on real-time threads and connected by preallocated channels that deliver messages in
//! sender-priority order (see docs/runtime.md).

pub mod channel;
