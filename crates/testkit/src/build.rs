//! The build-script half: decides, once per build, whether privileged tests are compiled as
//! normal tests or as `#[ignore]`d ones, by setting `cfg(pacer_privileged)`.
//!
//! libtest has no way for a running test to report "skipped", only a compile-time `#[ignore]`.
//! So the decision is taken where the build knows who will run the tests: a build by root (the
//! tests are run by the same user) or with `PACER_REQUIRE_ROOT=1` (CI saying "everything must
//! run") compiles them in, and a missing privilege then fails through [`crate::require`].

/// Called from a crate's `build.rs`: declares `cfg(pacer_privileged)` and sets it when the build
/// runs as root (effective uid 0) or with `PACER_REQUIRE_ROOT=1`, and not with
/// `PACER_REQUIRE_ROOT=0`.
///
/// ```no_run
/// // build.rs
/// fn main() {
///     pacer_testkit::build::privileged_cfg();
/// }
/// ```
pub fn privileged_cfg() {
    println!("cargo::rustc-check-cfg=cfg(pacer_privileged)");
    // A build script is otherwise re-run only when the package's files change: `sudo cargo test`
    // (or `su`) into the same target directory must re-decide, and these variables are what
    // changes with the user.
    for var in [REQUIRE_ROOT_ENV, "USER", "HOME", "SUDO_USER"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    if privileged() {
        println!("cargo::rustc-cfg=pacer_privileged");
    }
}

/// The variable that forces privileged tests on (and so makes missing privileges failures).
pub const REQUIRE_ROOT_ENV: &str = "PACER_REQUIRE_ROOT";

/// Whether this build should compile privileged tests as normal tests.
fn privileged() -> bool {
    // `PACER_REQUIRE_ROOT=0` ignores them even as root: a second build that must not touch the
    // machine's scheduler while another run owns it (the cpuset partitioning is one per system).
    match std::env::var(REQUIRE_ROOT_ENV).as_deref() {
        Ok("1") => return true,
        Ok("0") => return false,
        _ => {}
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The variable that compiles the Python package's tests in (CI sets it after `pip install
/// ./python`); without it they are ignored, and counted as skipped.
pub const REQUIRE_PYTHON_ENV: &str = "PACER_REQUIRE_PYTHON";

/// Sets `cfg(pacer_python)` when `PACER_REQUIRE_PYTHON=1`: tests that drive the installed
/// `pacer` Python package then run, and fail when it is missing.
pub fn python_cfg() {
    println!("cargo::rustc-check-cfg=cfg(pacer_python)");
    println!("cargo::rerun-if-env-changed={REQUIRE_PYTHON_ENV}");
    if std::env::var(REQUIRE_PYTHON_ENV).as_deref() == Ok("1") {
        println!("cargo::rustc-cfg=pacer_python");
    }
}
