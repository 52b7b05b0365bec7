//! `pacer completions SHELL`: the shell completion script, generated from the same clap tree that
//! parses the command line, so it cannot fall behind a new flag.

use std::io::Write;

use anyhow::{Context, Result};
use clap_complete::Shell;

#[derive(clap::Args)]
#[command(after_help = "Where to put the script (then start a new shell):
  bash:        pacer completions bash > ~/.local/share/bash-completion/completions/pacer
  zsh:         pacer completions zsh > ~/.zfunc/_pacer
               (with `fpath+=~/.zfunc; autoload -Uz compinit; compinit` in ~/.zshrc)
  fish:        pacer completions fish > ~/.config/fish/completions/pacer.fish
  elvish:      pacer completions elvish >> ~/.config/elvish/rc.elv
  powershell:  pacer completions powershell >> $PROFILE

System-wide (as root): bash in /usr/share/bash-completion/completions/pacer, zsh in
/usr/share/zsh/vendor-completions/_pacer, fish in /usr/share/fish/vendor_completions.d/pacer.fish.")]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

pub fn run(a: Args) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut crate::cli_command(), "pacer", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)
        .and_then(|()| out.flush())
        .context("writing the completion script to standard output")
}
