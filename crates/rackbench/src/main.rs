//! `rackbench`: command-line parsing and dispatch only. Every behaviour lives
//! in the harness and workload crates.

use clap::FromArgMatches;
use harness::{Catalogue, Registry, present, store::Store};
use std::process::ExitCode;

mod cli;
mod completions;
mod html;
mod man;
mod registry;
mod report;
mod results_cmd;
mod run;
mod serve;
mod system_check;
mod workload;

use cli::{Cli, Cmd, ReportCmd, args_with_alias, benchpress_report_order, cli_command, store_path};
use completions::write_completions;
use html::write_html;
use man::write_man;
use registry::registry;
use report::{historical_metrics, report_json_files, report_score, report_stdout};
use results_cmd::results_cmd;
use run::run_jobs;
use system_check::system_check;
use workload::workload_cmd;

include!(concat!(env!("OUT_DIR"), "/embedded_jobs.rs"));

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().collect();
    if raw.get(1).map(String::as_str) == Some(resctl::CHILD_CMD) {
        return ExitCode::from(resctl::child_main(&raw[2..]) as u8);
    }
    let reg = registry();
    let args = args_with_alias();
    // `rackbench help BENCHMARK`: the benchmark's own usage, as
    // `rackbench BENCHMARK --help`.
    if let [_, help, name] = args.as_slice()
        && help == "help"
        && let Some(w) = name.to_str().and_then(|n| reg.get(n))
    {
        print!("{}", w.help());
        return ExitCode::SUCCESS;
    }
    let parse = |args: Vec<std::ffi::OsString>| {
        cli_command(&reg)
            .try_get_matches_from(args)
            .and_then(|m| Cli::from_arg_matches(&m))
    };
    let cli = match parse(args.clone()) {
        Ok(cli) => cli,
        // benchpress' order, `report JOB... REPORTER`: the reporter moved
        // first, or the original error when that does not parse either.
        Err(e) => match benchpress_report_order(&args).map(parse) {
            Some(Ok(cli)) => cli,
            _ => e.exit(),
        },
    };
    match run(cli, reg) {
        Ok(code) => code,
        Err(e) => {
            // clap's own messages (a workload's argument errors) already
            // start with "error: ".
            let msg = format!("{e:#}");
            eprintln!("error: {}", msg.strip_prefix("error: ").unwrap_or(&msg));
            ExitCode::from(2)
        }
    }
}

fn run(mut cli: Cli, reg: Registry) -> anyhow::Result<ExitCode> {
    let workloads = reg.benchpress();
    let override_args = cli
        .override_job_args
        .as_deref()
        .map(harness::job::parse_override)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    // The command, taken out so that its arms can lend the other flags.
    let cmd = std::mem::replace(&mut cli.cmd, Cmd::Workload(Vec::new()));
    let cli = &cli;
    let catalogue = || -> anyhow::Result<Catalogue> {
        let mut cat = harness::benchpress_yaml::catalogue(
            EMBEDDED_JOBS,
            &cli.jobs_dir,
            cli.jobs_file.as_deref(),
            cli.benchmarks.as_deref(),
            &workloads,
        )?;
        if let Some((job, args)) = &override_args {
            cat.override_args(job, args.clone())?;
        }
        Ok(cat)
    };
    // As benchpress, job files given are read (and checked) whatever the command.
    if cli.jobs_file.is_some() || cli.benchmarks.is_some() || override_args.is_some() {
        catalogue()?;
    }
    check_uuid(cli)?;
    match cmd {
        Cmd::List { tags } => print!("{}", present::list(&catalogue()?, &tags)),
        Cmd::Install {
            jobs,
            force: _,
            toolchain: _,
        } => {
            let cat = catalogue()?;
            let jobs = selected(&cat, &jobs)?;
            let ok = harness::setup::install(&cat, &reg, &jobs, &mut std::io::stdout().lock())?;
            return Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        Cmd::Clean { jobs } => {
            let cat = catalogue()?;
            let jobs = selected(&cat, &jobs)?;
            harness::setup::clean(
                &cat,
                &reg,
                &jobs,
                &cli.output_dir,
                &mut std::io::stdout().lock(),
            )?;
        }
        Cmd::Info { job } => {
            let cat = catalogue()?;
            print!("{}", present::info(cat.get(&job)?, &reg));
        }
        Cmd::Run(a) => return run_jobs(cli, &reg, catalogue()?, *a),
        Cmd::Report {
            what:
                ReportCmd::Score {
                    jobs,
                    all,
                    last,
                    json,
                },
        } => {
            let cat = catalogue()?;
            let store = Store::open(&store_path(&cli.db))?;
            // benchpress scores the latest run in its history (or every one
            // with --all), and its history holds successful runs only: a
            // failed run is never stored, so the latest successful run
            // keeps being scored.
            let newest = if all { None } else { Some(last.unwrap_or(1)) };
            report_score(&cat, &store, jobs, newest, json)?;
        }
        Cmd::Report {
            what: ReportCmd::Stdout { jobs, all },
        } => {
            let store = Store::open(&store_path(&cli.db))?;
            report_stdout(&historical_metrics(&catalogue()?, &store, &jobs, all)?)?;
        }
        Cmd::Report {
            what: ReportCmd::JsonFile { jobs, all },
        } => {
            let store = Store::open(&store_path(&cli.db))?;
            let runs = historical_metrics(&catalogue()?, &store, &jobs, all)?;
            report_json_files(&cli.output_dir, runs)?;
        }
        Cmd::Report {
            what: ReportCmd::Html { out, sel },
        } => {
            let store = Store::open(&store_path(&cli.db))?;
            write_html(&store, &out, &sel)?;
        }
        Cmd::Serve { port, bind, sel } => {
            return serve::serve(&store_path(&cli.db), &bind, port, &sel);
        }
        Cmd::Results { what } => results_cmd(&reg, &cli.db, what)?,
        Cmd::Completions { shell } => write_completions(&reg, &catalogue()?, shell)?,
        Cmd::SystemCheck { json, root } => system_check(json, &root)?,
        Cmd::Man { dir } => write_man(&reg, dir.as_deref())?,
        Cmd::Workload(argv) => return workload_cmd(cli, &reg, argv),
    }
    Ok(ExitCode::SUCCESS)
}

/// The jobs a command names (none: every job).
fn selected(cat: &Catalogue, jobs: &[String]) -> anyhow::Result<Vec<String>> {
    Ok(if jobs.is_empty() {
        cat.all_names()
    } else {
        cat.select(jobs)?
    })
}

/// `-u/--uuid` names a folder.
fn check_uuid(cli: &Cli) -> anyhow::Result<()> {
    if let Some(u) = &cli.uuid
        && (u.is_empty() || u.contains(['/', '\0']) || u == "." || u == "..")
    {
        anyhow::bail!(
            "-u/--uuid '{u}' names the folder benchmark_metrics_<run_id>: it must be a non-empty name without '/'"
        );
    }
    Ok(())
}
