//! `rackbench resctl ...`: resctl-bench's commands, hashd and the memory
//! hog, as the harness runs them.

use crate::bench::job::{self, Options};
use harness::{Outcome, Record, RunContext, Workload};
use serde_json::{Map, json};
use std::path::PathBuf;

/// resctl-bench and hashd.
pub struct Resctl;

const HELP: &str = "\
rackbench resctl [OPTIONS] COMMAND ...      (also installed as `resctl-bench`)

Commands:
  run SPEC...          run the jobs not yet completed in the result file
  format [SPEC...]     print the full results (all, or the matching jobs)
  summary [SPEC...]    print the summaries
  deps                 check the system requirements of every bench
  doc [SUBJECT]        documentation: specs, a bench, sysreqs, cgroups
  hashd [OPTIONS]      the latency-sensitive workload (`hashd --help`)
  mem-hog OPTIONS      the memory hog (`mem-hog --help`)

Options:
  -r, --result FILE    the result journal (JSON; gzipped when it ends in .gz)
  -d, --dir DIR        scratch directory, must exist (default /var/lib/rackbench-resctl,
                       created): hashd's test files and state, fio's test file
  --mem-profile N|off  memory profile in GiB, a power of two (default: the largest
                       whose share fits in available memory; 1 with --test)
  --force              run even when a bench's hard requirements are missed
  --test               short runs for CI (small profile, short windows)

Specs: KIND[:k[=v],...][:group2]...; id=ID and passive=... may appear in any
group. Kinds: hashd-params, iocost-params, protection, storage.";

/// The hidden command under which the benches start their children
/// (hashd, the hog): run directly, without the harness's report folder and
/// results store.
pub const CHILD_CMD: &str = "__resctl-child";

/// Runs a child: `hashd ARGS` or `mem-hog ARGS`. Returns the exit code.
pub fn child_main(args: &[String]) -> i32 {
    let cancel = harness::Cancel::global();
    let r = match args.first().map(String::as_str) {
        Some("hashd") => crate::hashd::command::run(&args[1..], &cancel).map(|(m, ok)| {
            println!("{}", serde_json::Value::Object(m));
            ok
        }),
        Some("mem-hog") => crate::hog::command(&args[1..], &cancel).map(|()| true),
        _ => Err(anyhow::anyhow!("{CHILD_CMD}: expected hashd or mem-hog")),
    };
    match r {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    }
}

const DFL_DIR: &str = "/var/lib/rackbench-resctl";

/// resctl-bench's command line: the global options (anywhere) and the
/// command with its arguments.
#[derive(Debug, clap::Parser)]
#[command(
    name = "rackbench resctl",
    override_help = HELP,
    disable_version_flag = true
)]
struct Cli {
    #[arg(short = 'r', long = "result")]
    result: Option<PathBuf>,
    #[arg(short = 'd', long = "dir")]
    dir: Option<PathBuf>,
    #[arg(long = "mem-profile")]
    mem_profile: Option<String>,
    #[arg(long)]
    force: bool,
    #[arg(long)]
    test: bool,
    /// COMMAND [ARGS...]
    words: Vec<String>,
}

/// The command line as clap parses it.
fn parse_cli(args: &[String]) -> Result<Cli, clap::Error> {
    use clap::Parser;
    Cli::try_parse_from(std::iter::once("resctl".to_string()).chain(args.iter().cloned()))
}

/// Global options and the command with its arguments.
fn parse(args: &[String]) -> Result<(Options, String, Vec<String>), String> {
    let c = parse_cli(args).map_err(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp => HELP.to_string(),
        _ => {
            // clap's text starts with its own "error: "; ours is added
            // where the error is printed.
            let text = e.render().to_string();
            let text = text.trim_end();
            format!("{}\n\n{HELP}", text.strip_prefix("error: ").unwrap_or(text))
        }
    })?;
    let mut o = Options {
        result: c.result,
        mem_profile: c.mem_profile,
        force: c.force,
        test: c.test,
        ..Options::default()
    };
    let dir = c.dir;
    let mut words = c.words.into_iter();
    let cmd = words.next();
    let rest: Vec<String> = words.collect();
    let cmd = cmd.ok_or_else(|| format!("no command\n\n{HELP}"))?;
    o.dir = match dir {
        Some(d) => d,
        None => {
            let d = PathBuf::from(DFL_DIR);
            if matches!(cmd.as_str(), "run" | "deps") {
                std::fs::create_dir_all(&d)
                    .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
            }
            d
        }
    };
    Ok((o, cmd, rest))
}

const COMMANDS: &[&str] = &["run", "format", "summary", "deps", "doc"];

fn doc(subject: Option<&str>) -> Result<String, String> {
    Ok(match subject {
        None | Some("specs") => format!(
            "{HELP}\n\nBenches:\n{}\nSubjects: specs, sysreqs, cgroups, and each bench kind.\n",
            job::BENCHES
                .iter()
                .map(|b| format!("  {:14} {}\n", b.kind(), b.about()))
                .collect::<String>()
        ),
        Some("sysreqs") => format!(
            "System requirements (upstream's names). `deps` checks them all on this host; each\n\
             bench lists the ones it cannot do without (hard: refused unless --force) and the\n\
             ones it runs without, degraded (the result's header says how):\n\n{}",
            job::BENCHES
                .iter()
                .map(|b| format!(
                    "  {}: hard: {}; soft: {}\n",
                    b.kind(),
                    names(b.hard()),
                    names(b.soft())
                ))
                .collect::<String>()
        ),
        Some("cgroups") => "\
Cgroup backends, chosen by probing (RACKBENCH_CGROUP_BACKEND=cgroup2|cgroup1|none forces one)
and stamped in every result:
  cgroup2  memory.low/high/max, cpu.weight, io.weight, io.max, io.cost.*, PSI;
  cgroup1  memory.limit_in_bytes (and soft_limit_in_bytes for high), cpu.shares, blkio
           weights where the scheduler has them, blkio.throttle bandwidth limits;
           no memory protection, so the workload is protected by capping the
           others; PSI read from a cgroup2 hierarchy mounted beside (e.g.
           /sys/fs/cgroup/unified) when there is one;
  none     nothing is isolated; only whole-system stats.
Children (hashd, the hog) join their cgroup before they exec; no systemd is needed.
"
        .to_string(),
        Some(other) => match job::bench(other) {
            Ok(b) => b.doc().to_string(),
            Err(_) => {
                return Err(format!(
                    "doc: unknown subject {other:?}: expected specs, sysreqs, cgroups, {}",
                    job::BENCHES
                        .iter()
                        .map(|b| b.kind())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        },
    })
}

fn names(v: &[crate::sys::sysreqs::SysReq]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.iter().map(|r| r.name()).collect::<Vec<_>>().join(" ")
    }
}

impl Workload for Resctl {
    fn name(&self) -> &'static str {
        "resctl"
    }

    fn description(&self) -> &'static str {
        "resctl-bench: resource-control benchmarks around hashd, a latency-sensitive workload simulator"
    }

    fn help(&self) -> String {
        HELP.to_string()
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        match args.first().map(String::as_str) {
            Some("hashd") => {
                crate::hashd::command::parse(&args[1..])?;
                return Ok(());
            }
            Some("mem-hog") => {
                crate::hog::parse(&args[1..]).map_err(anyhow::Error::msg)?;
                return Ok(());
            }
            _ => {}
        }
        let (_, cmd, rest) = parse(args).map_err(anyhow::Error::msg)?;
        if !COMMANDS.contains(&cmd.as_str()) {
            anyhow::bail!(
                "resctl: unknown command {cmd:?}: expected run, format, summary, deps, doc, hashd or mem-hog"
            );
        }
        if cmd == "run" || cmd == "format" || cmd == "summary" {
            for s in &rest {
                job::parse_spec(s).map_err(anyhow::Error::msg)?;
            }
        }
        Ok(())
    }

    fn is_helper(&self, args: &[String]) -> bool {
        // The command is the first word of the parsed command line.
        parse_cli(args).is_ok_and(|c| {
            matches!(
                c.words.first().map(String::as_str),
                Some("format" | "summary" | "deps" | "doc")
            )
        })
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        self.validate(args)?;
        match args.first().map(String::as_str) {
            Some("hashd") => {
                let (metrics, success) = crate::hashd::command::run(&args[1..], &ctx.cancel)?;
                return Ok(Outcome {
                    metrics,
                    success,
                    record: None,
                });
            }
            Some("mem-hog") => {
                crate::hog::command(&args[1..], &ctx.cancel)?;
                return Ok(Outcome {
                    metrics: Map::new(),
                    success: true,
                    record: None,
                });
            }
            _ => {}
        }
        let (opts, cmd, rest) = parse(args).map_err(anyhow::Error::msg)?;
        let mut metrics = Map::new();
        let mut record = None;
        let success = match cmd.as_str() {
            "run" => {
                let mut printed = Vec::new();
                let ok = job::cmd_run(&opts, &rest, &ctx.cancel, &mut printed)
                    .map_err(anyhow::Error::msg)?;
                record = Some(Record::of(
                    self.name(),
                    RECORD_VERSION,
                    &ResctlRecord { jobs: printed },
                ));
                if let Some(r) = &opts.result {
                    metrics.insert("result_file".into(), json!(r.display().to_string()));
                    if let Ok(j) = crate::journal::Journal::open(r) {
                        metrics.extend(job::metrics(&j));
                    }
                }
                ok
            }
            "format" | "summary" => {
                let out =
                    job::cmd_format(&opts, &rest, cmd == "format").map_err(anyhow::Error::msg)?;
                print!("{out}");
                true
            }
            "deps" => {
                print!("{}", job::cmd_deps(&opts).map_err(anyhow::Error::msg)?);
                true
            }
            _ => {
                let out = doc(rest.first().map(String::as_str)).map_err(anyhow::Error::msg)?;
                print!("{out}");
                true
            }
        };
        Ok(Outcome {
            metrics,
            success,
            record,
        })
    }

    fn format(&self, record: &Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        let r: ResctlRecord = record.decode(self.name(), RECORD_VERSION)?;
        out.write_all(job::summary_text(&r.jobs).as_bytes())?;
        out.flush()?;
        Ok(())
    }
}

/// The version of [`ResctlRecord`]; raise it when its shape changes.
const RECORD_VERSION: u32 = 1;

/// What a `run` keeps with its stored run: each job whose summary it
/// printed, as the result journal holds it (spec, period, sysinfo, record,
/// result), so the summaries print again from it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ResctlRecord {
    pub jobs: Vec<crate::journal::JobData>,
}
