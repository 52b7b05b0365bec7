//! The Python package's own tests (python/tests, pytest) as one cargo test, so that the README's
//! single test command covers them and CI counts them. They drive the *installed* `pacer`
//! package (`pip install './python[test]'`, which .ci/run does) and compare its simulations with
//! this build's `pacer sim`. Compiled in with `PACER_REQUIRE_PYTHON=1` (then a missing package
//! fails); otherwise ignored, and counted as skipped.

use std::path::Path;
use std::process::Command;

#[test]
#[cfg_attr(
    not(pacer_python),
    ignore = "needs the Python package: pip install './python[test]', then PACER_REQUIRE_PYTHON=1"
)]
fn python_package_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python)
        .args(["-c", "import pacer, pytest; print(pacer.__file__)"])
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    assert!(
        probe.status.success(),
        "the `pacer` Python package or pytest is not installed for {python}: pip install \
         './python[test]'\n{}",
        String::from_utf8_lossy(&probe.stderr)
    );
    eprintln!(
        "testing the pacer package at {}",
        String::from_utf8_lossy(&probe.stdout).trim()
    );
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-rs", "python/tests"])
        .current_dir(&root)
        .env("PACER_BIN", env!("CARGO_BIN_EXE_pacer"))
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "python/tests failed (output above)");
    // pytest's own skips (a missing optional dependency) must not pass silently here.
    assert!(
        !stdout.contains("skipped"),
        "python/tests skipped tests (listed above): install './python[test]'"
    );
}
