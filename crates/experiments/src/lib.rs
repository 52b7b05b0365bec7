//! The papers' experiments as code (../../../shared/DESIGN.md, `experiments`): the SynthMark-style
//! audio benchmark of `adaptive-deadline-audio-android.txt` §5.3–6 ([`audio`]) on the real kernel,
//! run by `pacer audio`; the background load of the real-kernel experiments ([`load`]); and the RM-vs-EDF multicore sweep of `rm-vs-edf-multicore-linux.txt` §5–6
//! ([`sweep`]), run by `pacer experiment`.

pub mod audio;
pub mod load;
pub mod sweep;
