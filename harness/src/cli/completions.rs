//! `roce completions SHELL`: the shell completion script, made from the same clap
//! definitions as `--help` (so it never disagrees with the options the binary
//! takes). `scripts/setup.sh` installs it.
//!
//! Owns: the command's options and the shells. Imports: clap_complete; `super::exit`.
use std::io::Write;

use clap::{Args, ValueEnum};

use super::exit::{help, CommandResult, Exit};

/// `roce completions SHELL`.
#[derive(Debug, Args)]
#[command(after_help = help(&[(Exit::Ok, "the script was printed")]))]
pub struct CompletionsArgs {
    /// The shell to complete for. bash: save as
    /// /usr/share/bash-completion/completions/roce (or
    /// ~/.local/share/bash-completion/completions/roce); zsh: as _roce in a
    /// directory of $fpath; fish: as ~/.config/fish/completions/roce.fish.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

/// The shells clap_complete writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

impl Shell {
    fn generator(self) -> clap_complete::Shell {
        match self {
            Shell::Bash => clap_complete::Shell::Bash,
            Shell::Zsh => clap_complete::Shell::Zsh,
            Shell::Fish => clap_complete::Shell::Fish,
            Shell::Elvish => clap_complete::Shell::Elvish,
            Shell::Powershell => clap_complete::Shell::PowerShell,
        }
    }
}

/// Prints the completion script of `cmd` (the whole `roce` command line) for the shell.
pub(super) fn run(
    a: CompletionsArgs,
    mut cmd: clap::Command,
    out: &mut dyn Write,
) -> CommandResult {
    let mut script = Vec::new();
    clap_complete::generate(a.shell.generator(), &mut cmd, "roce", &mut script);
    out.write_all(&script)?;
    out.flush()?;
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn script(shell: Shell) -> String {
        let mut out = Vec::new();
        run(CompletionsArgs { shell }, super::super::Cli::command(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_shell_completes_commands_and_their_flags() {
        for shell in Shell::value_variants() {
            let s = script(*shell);
            // Long flags without their dashes: fish writes them `-l display-filter`.
            for word in ["decode", "flows", "completions", "display-filter", "read-file", "force"] {
                assert!(s.contains(word), "{shell:?} script lacks {word}");
            }
        }
        assert!(script(Shell::Fish).contains("-l display-filter"));
        // bash: a function that completes `roce`, registered for it.
        let bash = script(Shell::Bash);
        assert!(bash.contains("complete -F _roce"), "{bash:.300}");
        // The -T values are offered (a ValueEnum), not free text.
        assert!(bash.contains("text fields json parquet"), "bash offers -T's values");
        assert!(script(Shell::Zsh).starts_with("#compdef roce"));
    }
}
