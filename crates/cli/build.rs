//! Sets `cfg(pacer_privileged)` for this crate's tests that need root or kernel features: they
//! are compiled in for root builds and with `PACER_REQUIRE_ROOT=1`, ignored otherwise; and
//! `cfg(pacer_python)` for the Python package's tests, with `PACER_REQUIRE_PYTHON=1`.

fn main() {
    pacer_testkit::build::privileged_cfg();
    pacer_testkit::build::python_cfg();
}
