//! Every example in every command's help is a command line that pastes as one line and parses:
//! the examples are the first thing users copy, and they drift when flags are renamed.
//!
//! A unit test rather than one in tests/: it parses with `Cli` itself, which the binary does not
//! export.

use clap::Parser;

use crate::Cli;

/// clap wraps help at this width off a terminal (and at the terminal's width, if narrower). A
/// command it breaks pastes as two lines; a comment it breaks only looks untidy.
const WIDTH: usize = 100;

/// Every command of the tree with its path (`pacer`, `pacer runtime run`, …), hidden ones too.
fn commands() -> Vec<(String, clap::Command)> {
    fn walk(cmd: &clap::Command, path: String, all: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            walk(sub, format!("{path} {}", sub.get_name()), all);
        }
        all.push((path, cmd.clone()));
    }
    let mut cmd = crate::cli_command();
    cmd.build();
    let mut all = Vec::new();
    walk(&cmd, "pacer".into(), &mut all);
    all
}

/// `pacer <cmd> --help` as printed at `width` columns (0: never wrapped).
fn long_help(cmd: &clap::Command, width: usize) -> String {
    cmd.clone().term_width(width).render_long_help().to_string()
}

/// The lines of the help's Examples section (up to the next blank line), and the command of an
/// inline `Example: …`.
fn example_lines(help: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if inside {
            if line.trim().is_empty() {
                inside = false;
            } else {
                lines.push(line.to_string());
            }
        } else if line.trim_end() == "Examples:" || line.trim_end() == "Example:" {
            inside = true;
        } else if let Some((_, cmd)) = line.split_once("Example: ") {
            lines.push(cmd.to_string());
        }
    }
    lines
}

/// Splits a shell line into simple commands (at `|`, `||`, `&&`, `&`, `;`), each as its words,
/// with quotes removed, redirections (`> file`, `2>&1`) and a trailing `# comment` dropped.
fn simple_commands(line: &str) -> Result<Vec<Vec<String>>, String> {
    let mut commands = vec![Vec::new()];
    let mut word = String::new();
    let mut in_word = false;
    let mut redirect = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(q) => word.push(q),
                        None => return Err("unclosed '".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => word.extend(chars.next()),
                        Some(q) => word.push(q),
                        None => return Err("unclosed \"".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            '#' if !in_word => break,
            ' ' | '\t' => end_word(&mut word, &mut in_word, &mut redirect, &mut commands),
            '|' | '&' | ';' => {
                // `2>&1`: the `&` belongs to a redirection.
                if c == '&' && redirect && !in_word {
                    in_word = true;
                    word.push(c);
                    continue;
                }
                end_word(&mut word, &mut in_word, &mut redirect, &mut commands);
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                commands.push(Vec::new());
            }
            '>' | '<' => {
                // A descriptor number before the operator (`2>`) is part of it.
                if in_word && word.chars().all(|d| d.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                } else {
                    end_word(&mut word, &mut in_word, &mut redirect, &mut commands);
                }
                if chars.peek() == Some(&'>') {
                    chars.next();
                }
                redirect = true;
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut redirect, &mut commands);
    commands.retain(|c| !c.is_empty());
    Ok(commands)
}

fn end_word(word: &mut String, in_word: &mut bool, redirect: &mut bool, commands: &mut [Vec<String>]) {
    if *in_word {
        let word = std::mem::take(word);
        // The word after a redirection operator is its file, not an argument.
        if !std::mem::take(redirect) {
            commands.last_mut().expect("one command at least").push(word);
        }
        *in_word = false;
    }
}

/// The pacer command line of a simple command (after `sudo` and `VAR=value` assignments), if
/// it runs pacer.
fn pacer_words(words: &[String]) -> Option<&[String]> {
    let mut rest = words;
    while let Some((first, tail)) = rest.split_first() {
        let assignment = first
            .split_once('=')
            .is_some_and(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        if first == "sudo" || assignment {
            rest = tail;
        } else {
            break;
        }
    }
    (rest.first().map(String::as_str) == Some("pacer")).then_some(rest)
}

/// Problems in help that others were changing when this test came (crates/cli/src/sim.rs),
/// reported to them rather than fixed here. An entry that no longer occurs is only noted, so a
/// fix there does not fail this test: delete the entry then. None at present.
const KNOWN: &[&str] = &[];

#[test]
fn every_help_example_parses_and_fits_on_one_line() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (path, cmd) in commands() {
        let wrapped = long_help(&cmd, WIDTH);
        for line in example_lines(&long_help(&cmd, 0)) {
            let trimmed = line.trim();
            if trimmed.starts_with('-') || trimmed.ends_with(" \\") {
                problems.push(format!(
                    "{path} --help: a command continued over lines: {trimmed}"
                ));
            }
            let commands = match simple_commands(trimmed) {
                Ok(c) => c,
                Err(e) => {
                    problems.push(format!("{path} --help: {e}: {trimmed}"));
                    continue;
                }
            };
            for words in &commands {
                let Some(words) = pacer_words(words) else { continue };
                checked += 1;
                if let Err(e) = Cli::try_parse_from(words) {
                    let first = e.to_string().lines().next().unwrap_or("").to_string();
                    problems.push(format!(
                        "{path} --help: `{}` does not parse: {first}",
                        words.join(" ")
                    ));
                }
            }
            // A comment clap wraps leaves its tail on a line of its own, which a pasted block
            // runs as a command.
            let command = trimmed.split(" #").next().unwrap_or("").trim_end();
            let unbroken = |part: &str| wrapped.lines().any(|l| l.contains(part));
            if !unbroken(command) {
                problems.push(format!(
                    "{path} --help: broken over two lines at {WIDTH} columns ({} with its indent): {command}",
                    line.split(" #").next().unwrap_or("").trim_end().chars().count()
                ));
            } else if !unbroken(trimmed) {
                problems.push(format!(
                    "{path} --help: the comment wraps at {WIDTH} columns ({} with its indent): {trimmed}",
                    line.trim_end().chars().count()
                ));
            }
        }
    }
    for known in KNOWN {
        if !problems.iter().any(|p| p == known) {
            eprintln!("fixed since, delete it from KNOWN: {known}");
        }
    }
    problems.retain(|p| !KNOWN.contains(&p.as_str()));
    assert!(
        checked > 40,
        "only {checked} examples found: is the Examples section still found?"
    );
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_shell_splitter() {
    let split = |s: &str| simple_commands(s).unwrap();
    assert_eq!(
        split("pacer gen -n 3 | pacer analyze - --cpus 4   # two"),
        vec![
            vec!["pacer", "gen", "-n", "3"],
            vec!["pacer", "analyze", "-", "--cpus", "4"]
        ]
    );
    assert_eq!(
        split("pacer calibrate --json > profile.json 2>&1 && sudo pacer run 'a b.json' &"),
        vec![
            vec!["pacer", "calibrate", "--json"],
            vec!["sudo", "pacer", "run", "a b.json"]
        ]
    );
    let w: Vec<String> = ["X=1", "sudo", "pacer", "status"].map(String::from).into();
    assert_eq!(pacer_words(&w).unwrap(), &w[2..]);
}
