//! Sets `cfg(pacer_privileged)` for this crate's tests that need root or kernel features.

fn main() {
    pacer_testkit::build::privileged_cfg();
}
