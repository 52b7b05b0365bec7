//! What installing pacer uses (issue 20): completion scripts and man pages generated from the
//! command tree.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn pacer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(args)
        .output()
        .expect("run pacer")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn completions_for_every_shell_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = pacer(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(script.len() > 1000, "{shell}: {} bytes", script.len());
        for word in ["analyze", "sim", "runtime", "completions", "--cpus"] {
            assert!(script.contains(word), "{shell}: no `{word}` in the script");
        }
    }
    let out = pacer(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("bash"), "{}", text(&out.stderr));
}

fn th_line(page: &str) -> &str {
    page.lines()
        .find(|l| l.starts_with(".TH "))
        .unwrap_or_else(|| panic!("no .TH line in:\n{page}"))
}

#[test]
fn man_pages_into_a_directory_and_on_stdout() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    let out = pacer(&["man", "--dir", dir]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let top = fs::read_to_string(d.path().join("pacer.1")).unwrap();
    assert!(th_line(&top).contains("pacer"), "{}", th_line(&top));
    let run = fs::read_to_string(d.path().join("pacer-runtime-run.1")).unwrap();
    assert!(th_line(&run).contains("pacer-runtime-run"), "{}", th_line(&run));
    for page in [
        "pacer-sim.1",
        "pacer-sim-audio.1",
        "pacer-man.1",
        "pacer-completions.1",
    ] {
        assert!(d.path().join(page).is_file(), "no {page}");
    }
    let names: Vec<String> = fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.contains("guardian") || n.contains("help")),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("pacer-tmp")), "{names:?}");

    // Again over the same pages: replaced in place.
    let out = pacer(&["man", "--dir", dir]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(fs::read_to_string(d.path().join("pacer.1")).unwrap(), top);

    let out = pacer(&["man"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), top);
}

#[test]
fn man_refuses_a_symbolic_link_and_a_missing_directory() {
    let d = tempfile::tempdir().unwrap();
    let elsewhere = d.path().join("elsewhere.1");
    fs::write(&elsewhere, "keep").unwrap();
    let man1 = d.path().join("man1");
    fs::create_dir(&man1).unwrap();
    std::os::unix::fs::symlink(&elsewhere, man1.join("pacer-sim.1")).unwrap();
    let out = pacer(&["man", "--dir", man1.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("pacer-sim.1 is a symbolic link"), "{err}");
    assert_eq!(fs::read_to_string(&elsewhere).unwrap(), "keep");
    // Nothing is written when one page is refused.
    let left: Vec<_> = fs::read_dir(&man1).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");

    let missing = d.path().join("nope");
    let out = pacer(&["man", "--dir", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("does not exist"),
        "{}",
        text(&out.stderr)
    );
    assert!(!Path::new(&missing).exists());
}
