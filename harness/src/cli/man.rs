//! `roce man --dir DIR`: the manual pages, made from the same clap definitions as
//! `--help`: `roce.1`, and one page per command (`roce-decode.1`, `roce-lab-run.1`,
//! …). `scripts/setup.sh` installs them.
//!
//! Owns: the command's options and the pages' names. Imports: clap_mangen;
//! `super::exit` and `super::write_file` (each page is written whole or not at all).
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::exit::{help, CommandResult, Exit, Failure};
use super::write_file;

/// `roce man --dir DIR`.
#[derive(Debug, Args)]
#[command(after_help = help(&[
    (Exit::Ok, "every page was written"),
    (Exit::Setup, "DIR or a page in it could not be written"),
]))]
pub struct ManArgs {
    /// Where to write the pages (created if missing): roce.1, and one page per
    /// command (roce-decode.1, roce-lab-run.1, …). E.g. /usr/local/share/man/man1.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

/// Writes the manual pages of `cmd` and every visible subcommand into `a.dir`, and
/// lists the files written.
pub(super) fn run(a: ManArgs, cmd: clap::Command, out: &mut dyn Write) -> CommandResult {
    std::fs::create_dir_all(&a.dir)
        .with_context(|| format!("creating {}", a.dir.display()))
        .map_err(Failure::setup)?;
    for (name, page) in pages(cmd).map_err(Failure::setup)? {
        let path = a.dir.join(&name);
        write_file(&path, |w| w.write_all(&page)).map_err(Failure::setup)?;
        writeln!(out, "{}", path.display())?;
    }
    Ok(Exit::Ok)
}

/// Each manual page of `cmd`, by file name: the command's own, then its
/// subcommands' (hidden ones left out), depth first, as clap_mangen names them.
pub(crate) fn pages(cmd: clap::Command) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    fn walk(cmd: clap::Command, out: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
        let man = clap_mangen::Man::new(cmd.clone());
        let mut page = Vec::new();
        man.render(&mut page).with_context(|| format!("rendering {}", man.get_filename()))?;
        out.push((man.get_filename(), page));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub.clone(), out)?;
        }
        Ok(())
    }
    // `roce help` and `roce lab help` repeat what the pages say: no page of their own.
    fn no_help(cmd: clap::Command) -> clap::Command {
        cmd.disable_help_subcommand(true).mut_subcommands(no_help)
    }
    let mut cmd = no_help(cmd);
    cmd.build();
    let mut out = Vec::new();
    walk(cmd, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn a_man_page_per_command_each_with_its_title_and_name() {
        let pages = pages(super::super::Cli::command()).unwrap();
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        let mut want = vec!["roce.1", "roce-decode.1", "roce-flows.1", "roce-lab.1"];
        // A build without the lab lists `roce lab` with no subcommands of its own.
        if cfg!(feature = "lab") {
            want.push("roce-lab-run.1");
        }
        want.extend(["roce-completions.1", "roce-man.1"]);
        for want in want {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        assert!(
            !names.iter().any(|n| n.contains("help")),
            "no page for the help subcommand: {names:?}"
        );
        for (name, page) in &pages {
            // roff writes a hyphen as `\-`.
            let text = String::from_utf8(page.clone()).unwrap().replace("\\-", "-");
            let title = name.trim_end_matches(".1");
            let th = text
                .lines()
                .find(|l| l.starts_with(".TH "))
                .unwrap_or_else(|| panic!("{name}: no .TH"));
            assert!(th.starts_with(&format!(".TH {title} 1 ")), "{name}: {th}");
            let at = text.find(".SH NAME\n").unwrap_or_else(|| panic!("{name}: no NAME section"));
            let line = text[at..].lines().nth(1).unwrap_or_default();
            assert!(line.starts_with(&format!("{title} - ")), "{name}: NAME is {line:?}");
        }
        let decode = &pages.iter().find(|(n, _)| n == "roce-decode.1").unwrap().1;
        let decode = String::from_utf8_lossy(decode);
        assert!(decode.contains("display\\-filter"), "the options are on the page");
    }

    #[test]
    fn man_writes_the_pages_into_a_new_directory() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("share/man/man1");
        let mut out = Vec::new();
        let r = run(ManArgs { dir: dir.clone() }, super::super::Cli::command(), &mut out).unwrap();
        assert_eq!(r, Exit::Ok);
        assert!(dir.join("roce.1").is_file() && dir.join("roce-decode.1").is_file());
        let listed = String::from_utf8(out).unwrap();
        assert_eq!(listed.lines().count(), std::fs::read_dir(&dir).unwrap().count(), "{listed}");
    }
}
