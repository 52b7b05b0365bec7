//! Sets `cfg(pacer_privileged)` for this crate's tests that need root or kernel features: they
//! are compiled in for root builds and with `PACER_REQUIRE_ROOT=1`, ignored otherwise.

fn main() {
    pacer_testkit::build::privileged_cfg();
}
