//! `rackbench BENCHMARK ARGS...`: a benchmark run directly as the
//! upstream tool, or with `--report` as an ad-hoc job.

use anyhow::Context;
use harness::{Cancel, Catalogue, Invocation, Registry};
use std::process::ExitCode;

use crate::cli::{Cli, NO_ARGS, cli_command, store_path, unknown_command};
use crate::run::finish;

/// `rackbench BENCHMARK ARGS...`: the upstream tool's command, direct, or
/// with `--report` as an ad-hoc job.
pub(crate) fn workload_cmd(
    cli: &Cli,
    reg: &Registry,
    mut argv: Vec<String>,
) -> anyhow::Result<ExitCode> {
    argv.retain(|a| a != NO_ARGS);
    let (name, args) = argv.split_first().context("no command given")?;
    let Some(w) = reg.get(name) else {
        return Err(unknown_command(name, &cli_command(reg), reg));
    };
    if args.iter().any(|a| a == "-h" || a == "--help") {
        print!("{}", w.subcommand_help(args).unwrap_or_else(|| w.help()));
        return Ok(ExitCode::SUCCESS);
    }
    let helper = w.is_helper(args);
    if cli.report && helper {
        eprintln!(
            "rackbench: '{name} {}' is a helper command: it measures nothing, so --report writes no report and no store row",
            args.join(" ")
        );
    }
    if !cli.report || helper {
        return Ok(
            match harness::runner::execute_direct(w, args, &Cancel::global())? {
                harness::runner::DirectEnd::Succeeded => ExitCode::SUCCESS,
                harness::runner::DirectEnd::Failed => ExitCode::from(1),
                harness::runner::DirectEnd::Interrupted => ExitCode::from(130),
            },
        );
    }
    let cat = Catalogue::adhoc(w.name(), w.description(), args);
    let inv = Invocation {
        jobs: vec![w.name().to_string()],
        iterations: 1,
        out_root: cli.output_dir.clone(),
        store: (!cli.no_store).then(|| store_path(&cli.db)),
        stdout: harness::runner::Stdout::TextAndJson,
        ..Default::default()
    };
    finish(harness::runner::execute(
        &cat,
        reg,
        &inv,
        &Cancel::global(),
    )?)
}
