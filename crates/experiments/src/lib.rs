//! The papers' experiments as code on the real kernel (../../../shared/DESIGN.md, `experiments`):
//! today the SynthMark-style audio benchmark of `adaptive-deadline-audio-android.txt` §5.3–6
//! ([`audio`]), run by `pacer audio`.

pub mod audio;
