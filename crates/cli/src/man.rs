//! `pacer man [--dir DIR]`: man pages generated from the clap tree (clap_mangen), one per command
//! and subcommand, so they say what `--help` says.

use std::fs;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::output::{Outputs, Stdout};

#[derive(clap::Args)]
#[command(after_help = "Examples:
  pacer man | man -l -
  pacer man --dir ~/.local/share/man/man1         # then `man pacer-sim`
  sudo pacer man --dir /usr/local/share/man/man1

Pages: pacer.1, and pacer-COMMAND.1 for each subcommand, nested ones joined by dashes
(pacer-runtime-run.1). Existing pages are replaced (written beside them, then renamed into
place, all at once when every page is ready); a page that is a symbolic link is refused.")]
pub struct Args {
    /// Write every page into DIR (it must exist); without it, print pacer.1 on standard output.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Every page as (file name, roff text), the top-level page first.
pub fn pages() -> Result<Vec<(String, Vec<u8>)>> {
    // As clap_mangen::generate_to does: building the tree gives each subcommand its display name
    // (`pacer-runtime-run`), which names its page; the `help` pseudo-command gets no page.
    let mut cmd = crate::cli_command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    collect(&cmd, &mut pages)?;
    Ok(pages)
}

fn collect(cmd: &clap::Command, pages: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut text = Vec::new();
    man.render(&mut text)
        .with_context(|| format!("rendering the page of {}", cmd.get_name()))?;
    pages.push((man.get_filename(), text));
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        collect(sub, pages)?;
    }
    Ok(())
}

pub fn run(a: Args) -> Result<()> {
    let pages = pages()?;
    let Some(dir) = a.dir else {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(&pages[0].1)
            .and_then(|()| out.flush())
            .context("writing pacer.1 to standard output");
    };
    let mut outputs = Outputs::new(Stdout::Free);
    let dir = outputs.dir("--dir", &dir, false)?;
    let mut slots = Vec::new();
    for (name, text) in &pages {
        let path = dir.join(name);
        // A link in a man directory usually points into a package's files (or is an alias page);
        // replacing its target would write outside DIR, so it is refused rather than followed.
        if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            bail!(
                "--dir {}: {name} is a symbolic link; not replaced (remove it, or choose another directory)",
                dir.display()
            );
        }
        slots.push((outputs.file("--dir", &path)?, text));
    }
    for (slot, text) in slots {
        outputs.write(slot, text)?;
    }
    outputs.commit()?;
    eprintln!("pacer: {} man pages written to {}", pages.len(), dir.display());
    Ok(())
}
