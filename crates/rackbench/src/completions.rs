//! `rackbench completions SHELL`: the shell completion script, from the
//! parser with the catalogue's jobs, tags, roles, hooks and vars as values.

use anyhow::Context;
use harness::{Catalogue, Registry};

use crate::cli::cli_command;

/// The parser as a completion script sees it: besides the flags, the
/// catalogue's jobs and tags where a command takes jobs, its roles for -r,
/// the hooks' names for -k and its vars as `NAME=` for -i. They are the catalogue's when the script
/// is made (a job added later is offered once the script is made again).
fn completion_command(reg: &Registry, cat: &Catalogue) -> clap::Command {
    use clap::builder::PossibleValuesParser;
    let mut jobs: std::collections::BTreeSet<String> = cat.iter().map(|j| j.name.clone()).collect();
    jobs.extend(cat.iter().flat_map(|j| j.tags.iter().cloned()));
    let roles: std::collections::BTreeSet<String> = cat
        .iter()
        .flat_map(|j| j.roles.iter().map(|r| r.name.clone()))
        .collect();
    let hooks: Vec<&str> = harness::hooks::KNOWN.iter().map(|k| k.0).collect();
    // -i completes as NAME= (the NAME=VALUE form; the value is the user's).
    let var_keys: std::collections::BTreeSet<String> = cat
        .iter()
        .flat_map(|j| {
            j.vars
                .iter()
                .chain(j.roles.iter().flat_map(|r| r.vars.iter()))
                .map(|v| format!("{}=", v.name))
        })
        .collect();
    let of = |v: &std::collections::BTreeSet<String>| PossibleValuesParser::new(v.iter().cloned());
    let mut cmd = cli_command(reg);
    // Each benchmark's own flags and subcommands, where it has a parser to
    // describe them (the parser still gets the words untouched).
    for w in reg.iter() {
        if let Some(own) = w.command() {
            let about = format!("{} (replaces {})", w.description(), w.upstream());
            cmd = cmd.mut_subcommand(w.name(), |_| own.name(w.name()).about(about));
        }
    }
    for (sub, arg) in [
        ("run", "jobs"),
        ("info", "job"),
        ("install", "jobs"),
        ("clean", "jobs"),
    ] {
        cmd = cmd.mut_subcommand(sub, |c| c.mut_arg(arg, |a| a.value_parser(of(&jobs))));
    }
    cmd.mut_subcommand("run", |c| {
        c.mut_arg("role", |a| a.value_parser(of(&roles)))
            .mut_arg("hooks", |a| {
                a.value_parser(PossibleValuesParser::new(hooks))
            })
            .mut_arg("input", |a| a.value_parser(of(&var_keys)))
    })
}

/// `completions SHELL`: the shell's completion script on stdout.
pub(crate) fn write_completions(
    reg: &Registry,
    cat: &Catalogue,
    shell: clap_complete::Shell,
) -> anyhow::Result<()> {
    // Into a buffer first: clap_complete panics when its writer
    // fails (e.g. `| head` closing the pipe).
    let mut script = Vec::new();
    clap_complete::generate(
        shell,
        &mut completion_command(reg, cat),
        "rackbench",
        &mut script,
    );
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(&script).and_then(|_| out.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(e).context("cannot write the completion script");
    }
    Ok(())
}
