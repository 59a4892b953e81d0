//! The command line: clap's definitions of rackbench's own commands and
//! flags, the parser with one command per benchmark, and the argv
//! rewrites made before parsing (upstream tool aliases, benchpress'
//! `report JOB... REPORTER` order).

use clap::{CommandFactory, Parser, Subcommand};
use harness::Registry;
use harness::store::Store;
use std::path::PathBuf;

/// `rackbench --version`: the version, the commit it was built from and the
/// build profile (set by build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("RACKBENCH_GIT_COMMIT"),
    ", ",
    env!("RACKBENCH_BUILD_PROFILE"),
    " build)"
);

#[derive(Debug, Parser)]
#[command(
    name = "rackbench",
    version = VERSION,
    about = "Datacenter benchmarks in one binary, run through a benchpress-style harness",
    after_help = "Each benchmark command takes the upstream tool's own flags: `rackbench help BENCHMARK` (or `rackbench BENCHMARK --help`) shows them."
)]
pub(crate) struct Cli {
    /// Extra job folders (*.toml).
    ///
    /// Their jobs replace embedded ones of the same name.
    #[arg(
        long = "jobs-dir",
        global = true,
        help_heading = GLOBAL,
        env = "RACKBENCH_JOBS_DIR",
        value_delimiter = ':'
    )]
    pub(crate) jobs_dir: Vec<PathBuf>,
    /// benchpress' -b: a benchmarks.yml naming the benchmarks of the -j
    /// file's jobs (default: the ones rackbench implements). Before the command.
    #[arg(short = 'b', long = "benchmarks", value_name = "FILE")]
    pub(crate) benchmarks: Option<PathBuf>,
    /// benchpress' -j: a jobs.yml whose jobs replace the embedded ones (a job
    /// naming a benchmark rackbench lacks is an error). Before the command.
    #[arg(short = 'j', long = "jobs", value_name = "FILE")]
    pub(crate) jobs_file: Option<PathBuf>,
    /// The results store: a SQLite file or a postgres:// URL.
    ///
    /// A SQLite file, or a PostgreSQL server's
    /// postgres://USER@HOST:PORT/DB URL (default: $RACKBENCH_DB or
    /// ~/.local/share/rackbench/results.db).
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub(crate) db: Option<PathBuf>,
    /// Where benchmark_metrics_<run_id>/ is created.
    #[arg(long, global = true, default_value = ".", help_heading = GLOBAL)]
    pub(crate) output_dir: PathBuf,
    /// Do not record runs in the results store.
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub(crate) no_store: bool,
    /// benchpress' -r: each successful run's result is also saved as
    /// DIR/<job>/<time>.json, benchpress' results history (default:
    /// results under --output-dir). Before the command.
    #[arg(short = 'r', long = "results", value_name = "DIR")]
    pub(crate) results: Option<PathBuf>,
    /// benchpress' -i: the iteration number in the report's file name
    /// (`_iter_N`; without it `_iter_None`, as benchpress). Before the command.
    #[arg(
        short = 'i',
        long = "iteration_num",
        visible_alias = "iteration-num",
        value_name = "N"
    )]
    pub(crate) iteration_num: Option<u32>,
    /// benchpress' -o: 'JOB: ARGS' replaces JOB's args with ARGS (split as
    /// a shell would; {var} placeholders still filled). Before the command.
    #[arg(
        short = 'o',
        long = "override_job_args",
        visible_alias = "override-job-args",
        value_name = "JOB: ARGS"
    )]
    pub(crate) override_job_args: Option<String>,
    /// benchpress' -u: the run id, naming benchmark_metrics_<run_id>/
    /// (default: 8 fresh hex digits). Before the command.
    #[arg(short = 'u', long = "uuid", value_name = "RUN_ID")]
    pub(crate) uuid: Option<String>,
    /// benchpress' -t: the timestamp (Unix seconds) of the run's reports and
    /// their file names (default: each report's end). Before the command.
    #[arg(short = 't', long = "timestamp", value_name = "SECS")]
    pub(crate) timestamp: Option<u64>,
    /// benchpress' -s: a script run in the background of every job (the
    /// user-script hook, for -d seconds). Before the command.
    #[arg(
        short = 's',
        long = "hook_path",
        visible_alias = "hook-path",
        value_name = "SCRIPT"
    )]
    pub(crate) hook_path: Option<String>,
    /// benchpress' -d: how long the -s script runs, seconds (default 60).
    #[arg(
        short = 'd',
        long = "hook_bg_duration",
        visible_alias = "hook-bg-duration",
        value_name = "SECS",
        requires = "hook_path"
    )]
    pub(crate) hook_bg_duration: Option<String>,
    /// benchpress' -v (repeatable): accepted; rackbench always prints its
    /// progress and the jobs' command lines on stderr.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// Benchmark commands also write a report and a store row.
    ///
    /// Benchmark commands (`rackbench cachebench ...`) run as the upstream
    /// tool: its output only. With --report they also write the harness's
    /// report (JSON on stdout and under --output-dir) and a store row.
    #[arg(long, global = true, env = "RACKBENCH_REPORT", value_parser = clap::builder::FalseyValueParser::new(), help_heading = GLOBAL)]
    pub(crate) report: bool,
    #[command(subcommand)]
    pub(crate) cmd: Cmd,
}

/// `rackbench run`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Jobs (names as `rackbench list` prints them) or tags; each runs
    /// in the order given.
    #[arg(required = true)]
    pub(crate) jobs: Vec<String>,
    /// The role to run, for jobs that have roles.
    #[arg(short = 'r', long)]
    pub(crate) role: Option<String>,
    /// Var values as a JSON object, e.g. '{"server_ip": "::1"}'
    /// (`--role_input` as benchpress spells it), or as NAME=VALUE pairs
    /// split by commas (`-i server_ip=::1,seed=2`).
    #[arg(short = 'i', long = "role-input", visible_alias = "role_input")]
    pub(crate) input: Option<String>,
    /// Extra hooks: NAME or NAME:{json options}, several after one -k
    /// (`-k perf cpu-mpstat`, as benchpress) or -k repeated.
    #[arg(short = 'k', long = "hook", visible_alias = "hooks", num_args = 1.., action = clap::ArgAction::Append)]
    pub(crate) hooks: Vec<String>,
    /// Options of the -k hooks by name, as benchpress' -a, e.g.
    /// '{"perf": {"interval": 5}}'.
    #[arg(short = 'a', long = "hook-args", value_name = "JSON")]
    pub(crate) hook_args: Option<String>,
    /// Run no hook (the job's own and -k's); the report still lists them.
    #[arg(long)]
    pub(crate) disable_hooks: bool,
    /// Print what would run, run nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Runs of each job (reports are numbered _iter_<n>).
    #[arg(
        short = 'n',
        long,
        default_value_t = 1,
        allow_negative_numbers = true,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub(crate) iterations: u32,
    /// Print benchpress' report JSON of each job on stdout (pretty),
    /// as when stdout is not a terminal, instead of the summary. The
    /// jobs' own text is on stderr either way.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The heading of the options every command takes: in each command's
/// help they come last, apart from the command's own, one line each with
/// `-h` (`--help` gives their details).
const GLOBAL: &str = "Global options";

#[derive(Debug, Subcommand)]
pub(crate) enum Cmd {
    /// List the jobs of the catalogue.
    List {
        /// Only jobs with any of these tags.
        #[arg(long, value_delimiter = ',')]
        tags: Vec<String>,
    },
    /// Show one job: benchmark, args, vars, roles, hooks.
    Info {
        /// A job name, as `rackbench list` prints it.
        job: String,
    },
    /// Run jobs; each writes a report to benchmark_metrics_<run_id>/ and the results store.
    Run(Box<RunArgs>),
    /// benchpress' install: nothing is built (every benchmark is in this
    /// binary); checks and reports, per job, what it needs: its benchmark,
    /// its arguments with the default vars, and its hooks' tools. Exit 1
    /// when a job lacks something. No JOB: every job.
    Install {
        /// Jobs or tags (default: every job).
        jobs: Vec<String>,
        /// benchpress' reinstall: there is nothing to reinstall, so the
        /// check runs the same.
        #[arg(short = 'f', long)]
        force: bool,
        /// benchpress' compiler choice: nothing is compiled, so it changes
        /// nothing.
        #[arg(short = 't', long, value_parser = ["gcc", "clang"], default_value = "gcc")]
        toolchain: String,
    },
    /// benchpress' clean: nothing is installed; removes what rackbench
    /// left behind for the jobs: per-run links to metrics folders that no
    /// longer exist, and their benchmarks' leftovers in the temp folder.
    Clean {
        /// Jobs or tags (default: every job).
        jobs: Vec<String>,
    },
    /// Reports over the results store.
    Report {
        #[command(subcommand)]
        what: ReportCmd,
    },
    /// Serves the `report html` page over HTTP; the page reloads when a run
    /// is recorded (it checks every 10 s). Ctrl-C stops it.
    Serve {
        /// The TCP port (0: any free port; the chosen one is printed).
        #[arg(long, default_value_t = 8642)]
        port: u16,
        /// Addresses to listen on (repeatable; default 127.0.0.1 and ::1).
        #[arg(long, value_name = "ADDR")]
        bind: Vec<std::net::IpAddr>,
        #[command(flatten)]
        sel: HtmlSelection,
    },
    /// The results store: list, show, compare, push.
    Results {
        #[command(subcommand)]
        what: ResultsCmd,
    },
    /// A shell completion script on stdout: `source <(rackbench completions
    /// bash)`, or save it where your shell loads completions from.
    Completions { shell: clap_complete::Shell },
    /// Checks the machine settings that change what benchmarks measure
    /// (THP, CPU governor, turbo, SMT, swap, cgroups, open files, ...): one
    /// pass/warn line each, with what was found and what is advised.
    /// Warnings do not fail it (exit 0).
    #[command(name = "system_check", visible_alias = "system-check")]
    SystemCheck {
        /// One JSON object: {"checks": [{name, status, found, advice}], "warnings": N}.
        #[arg(long)]
        json: bool,
        /// Read /sys and /proc under this folder instead of / (for tests).
        #[arg(long, hide = true, default_value = "/")]
        root: PathBuf,
    },
    /// Prints rackbench(1) on stdout (`rackbench man | man -l -`), or
    /// writes it and one page per command into DIR.
    Man {
        /// A folder for rackbench.1 and the commands' pages (made if missing).
        dir: Option<PathBuf>,
    },
    /// Run a benchmark directly with its own arguments, as the upstream tool
    /// (`rackbench calibrate --help`); `rackbench --report BENCHMARK ...`
    /// adds the harness's report and store row. The benchmark commands are
    /// added to the parser at run time from the registry (see
    /// [`cli_command`]); they arrive here.
    #[command(external_subcommand)]
    Workload(Vec<String>),
}

/// The id clap's derive reads an external subcommand's arguments from; each
/// benchmark command stores its arguments under it, so the derive hands
/// them to [`Cmd::Workload`] as it would an unknown command's.
const EXTERNAL_ARGS: &str = "";

/// What a benchmark command without arguments receives: clap's derive
/// unwraps an external subcommand's arguments, so a command given none
/// (`rackbench calibrate`) would panic; this default stands for "none" and
/// is dropped before the benchmark sees its arguments. A NUL cannot occur
/// in a real argument (argv strings end at one), so no user argument is
/// ever taken for it.
pub(crate) const NO_ARGS: &str = "\0";

/// The parser: the derived commands plus one command per benchmark, so
/// `rackbench --help`, completions and man pages list the benchmarks. A
/// benchmark's arguments are passed through untouched (its own parser
/// checks them); its `--help` prints its own usage.
pub(crate) fn cli_command(reg: &Registry) -> clap::Command {
    let mut cmd = Cli::command();
    for w in reg.iter() {
        cmd = cmd.subcommand(
            clap::Command::new(w.name())
                .about(format!("{} (replaces {})", w.description(), w.upstream()))
                .long_about(w.help())
                .disable_help_flag(true)
                .disable_version_flag(true)
                .arg(
                    clap::Arg::new(EXTERNAL_ARGS)
                        .value_name("ARGS")
                        .num_args(0..)
                        .trailing_var_arg(true)
                        .allow_hyphen_values(true)
                        .action(clap::ArgAction::Append)
                        .default_value(NO_ARGS)
                        .hide_default_value(true)
                        .value_parser(clap::value_parser!(String)),
                ),
        );
    }
    cmd
}

/// The error for a word that is neither a command nor a benchmark: the
/// closest command if one is close, then every command by name.
pub(crate) fn unknown_command(name: &str, cmd: &clap::Command, reg: &Registry) -> anyhow::Error {
    let benchmarks = reg.names();
    let commands: Vec<&str> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(clap::Command::get_name)
        .filter(|n| *n != "help" && !benchmarks.contains(n))
        .collect();
    let close = harness::suggest::closest(name, commands.iter().chain(&benchmarks).copied());
    anyhow::anyhow!(
        "unknown command '{name}'{}: commands are {}, and the benchmarks {}",
        close.map_or(String::new(), |c| format!(" (did you mean '{c}'?)")),
        commands.join(", "),
        benchmarks.join(", ")
    )
}

#[derive(Debug, Subcommand)]
// Parsed once per process; boxing a flattened clap group buys nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ReportCmd {
    /// benchpress' `report stdout`: each job's latest run (--all: every
    /// run, newest first) as its metrics JSON with run_id and timestamp.
    #[command(name = "stdout")]
    Stdout {
        /// Jobs (default: every job with a recorded run).
        jobs: Vec<String>,
        /// Every recorded run, not only the latest.
        #[arg(long)]
        all: bool,
    },
    /// benchpress' `report json_file`: the same objects written as files
    /// under benchmark_metrics_<run_id>/ (named as benchpress names them).
    #[command(name = "json_file", visible_alias = "json-file")]
    JsonFile {
        /// Jobs (default: every job with a recorded run).
        jobs: Vec<String>,
        /// Every recorded run, not only the latest.
        #[arg(long)]
        all: bool,
    },
    /// Scores (metric / baseline) of jobs over their recorded successful runs.
    Score {
        /// Jobs to score (default: every job with a baseline but the
        /// calibrate ones).
        jobs: Vec<String>,
        /// Every recorded run of each job (default: its latest, as
        /// benchpress' report).
        #[arg(long, conflicts_with = "last")]
        all: bool,
        /// The newest N runs of each job.
        #[arg(long)]
        last: Option<usize>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One self-contained HTML page (no external fetch) over stored runs:
    /// a filterable runs table, host comparisons, and per run its machine,
    /// args, metrics and charts (inline SVG).
    Html {
        /// Where to write the page.
        #[arg(long, default_value = "report.html")]
        out: PathBuf,
        #[command(flatten)]
        sel: HtmlSelection,
    },
}

/// The runs a report page covers (none given: every run).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct HtmlSelection {
    /// Run ids to include.
    pub(crate) run_ids: Vec<String>,
    /// Only these jobs (repeatable).
    #[arg(long)]
    pub(crate) job: Vec<String>,
    /// Only runs on these hosts (repeatable).
    #[arg(long)]
    pub(crate) host: Vec<String>,
    /// Only runs from this date on (YYYY-MM-DD, UTC).
    #[arg(long, value_name = "DATE")]
    pub(crate) since: Option<String>,
    /// Only runs before this date.
    #[arg(long, value_name = "DATE")]
    pub(crate) until: Option<String>,
    #[command(flatten)]
    pub(crate) cmp: HtmlCompare,
}

/// A comparison shown first on the page, its sides chosen as for `results
/// compare` (within the page's --job). Without these the page compares,
/// per job, the pair of hosts the reader picks on it.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Requested comparison")]
pub(crate) struct HtmlCompare {
    /// A run id of side A (repeatable).
    #[arg(long = "a-run", value_name = "RUN_ID")]
    pub(crate) a_run: Vec<String>,
    /// A run id of side B (repeatable).
    #[arg(long = "b-run", value_name = "RUN_ID")]
    pub(crate) b_run: Vec<String>,
    /// Side A's runs on this host.
    #[arg(long = "a-host", value_name = "HOST")]
    pub(crate) a_host: Option<String>,
    /// Side B's runs on this host.
    #[arg(long = "b-host", value_name = "HOST")]
    pub(crate) b_host: Option<String>,
    /// Side A's runs from this date on.
    #[arg(long = "a-since", value_name = "DATE")]
    pub(crate) a_since: Option<String>,
    /// Side A's runs before this date.
    #[arg(long = "a-until", value_name = "DATE")]
    pub(crate) a_until: Option<String>,
    /// Side B's runs from this date on.
    #[arg(long = "b-since", value_name = "DATE")]
    pub(crate) b_since: Option<String>,
    /// Side B's runs before this date.
    #[arg(long = "b-until", value_name = "DATE")]
    pub(crate) b_until: Option<String>,
}

impl HtmlCompare {
    pub(crate) fn given(&self) -> bool {
        !self.a_run.is_empty()
            || !self.b_run.is_empty()
            || [
                &self.a_host,
                &self.b_host,
                &self.a_since,
                &self.a_until,
                &self.b_since,
                &self.b_until,
            ]
            .iter()
            .any(|o| o.is_some())
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum ResultsCmd {
    /// The newest runs.
    List {
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// The runs as a JSON array (each run's headline figures with their
        /// metric keys, labels and units).
        #[arg(long)]
        json: bool,
    },
    /// The stored rows of one run id (JSON), or with --text the upstream
    /// tool's text of each job, printed again from its stored record.
    Show {
        run_id: String,
        /// Print what the upstream tool printed at the end of each job (e.g.
        /// CacheBench's Test Results block) instead of the rows' JSON.
        #[arg(long)]
        text: bool,
    },
    /// Two sets of runs, A and B, metric by metric: each side's mean and
    /// stdev, the relative change with its 95% interval and a verdict
    /// (Welch's t-test), or with one run a side how many runs would tell.
    #[command(after_long_help = COMPARE_HELP)]
    Compare(Box<CompareArgs>),
    /// Copies this machine's runs (the --db store) to another store, e.g. a
    /// fleet's PostgreSQL server; runs already there (same run id, job,
    /// role, iteration, host and time) are skipped, so pushing again is safe.
    Push {
        /// The target store: postgres://USER@HOST:PORT/DB or a SQLite file.
        #[arg(long)]
        to: PathBuf,
    },
}

const COMPARE_HELP: &str = "\
Each side is a set of stored runs: the positional RUN_A RUN_B (or --a-run/--b-run, repeatable), \
and/or a host and a period (--a-host, --a-since, --a-until and the same for B). --job and --host \
apply to both sides. Only successful runs count; runs of the same job (and role) are compared.

Examples:
  rackbench results compare 1a2b3c4d 5e6f7a8b
  rackbench results compare --a-run 1a2b3c4d --a-run 9c9c9c9c --b-run 5e6f7a8b
  rackbench results compare --job feedsim_default --a-host old-box --b-host new-box --last 5
  rackbench results compare --job calibrate --host box --a-until 2026-06-01 --b-since 2026-06-01

Dates are YYYY-MM-DD or 'YYYY-MM-DD HH:MM[:SS]' in UTC, or RFC 3339 with an offset; since is \
inclusive, until exclusive.";

/// `results compare`'s selection of the two sides.
#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {
    /// Side A's run id (an invocation of `rackbench run`).
    #[arg(requires = "run_b", conflicts_with_all = ["a_run", "b_run"])]
    pub(crate) run_a: Option<String>,
    /// Side B's run id.
    pub(crate) run_b: Option<String>,
    /// A run id of side A (repeatable: several invocations).
    #[arg(long = "a-run", value_name = "RUN_ID")]
    pub(crate) a_run: Vec<String>,
    /// A run id of side B (repeatable).
    #[arg(long = "b-run", value_name = "RUN_ID")]
    pub(crate) b_run: Vec<String>,
    /// Side A's runs on this host.
    #[arg(long = "a-host", value_name = "HOST", conflicts_with = "host")]
    pub(crate) a_host: Option<String>,
    /// Side B's runs on this host.
    #[arg(long = "b-host", value_name = "HOST", conflicts_with = "host")]
    pub(crate) b_host: Option<String>,
    /// Side A's runs from this date on.
    #[arg(long = "a-since", value_name = "DATE")]
    pub(crate) a_since: Option<String>,
    /// Side A's runs before this date.
    #[arg(long = "a-until", value_name = "DATE")]
    pub(crate) a_until: Option<String>,
    /// Side B's runs from this date on.
    #[arg(long = "b-since", value_name = "DATE")]
    pub(crate) b_since: Option<String>,
    /// Side B's runs before this date.
    #[arg(long = "b-until", value_name = "DATE")]
    pub(crate) b_until: Option<String>,
    /// Only these jobs, on both sides (repeatable).
    #[arg(long, value_name = "JOB")]
    pub(crate) job: Vec<String>,
    /// Both sides' runs on this host.
    #[arg(long, value_name = "HOST")]
    pub(crate) host: Option<String>,
    /// Only the newest N runs of each job on each side.
    #[arg(long, value_name = "N")]
    pub(crate) last: Option<usize>,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Upstream tool names the binary answers to when invoked under them (a
/// symlink or copy named `cachebench` runs `rackbench cachebench ...`).
const ALIASES: &[(&str, &str)] = &[
    ("cachebench", "cachebench"),
    ("resctl-bench", "resctl"),
    ("rd-hashd", "resctl hashd"),
];

/// The command line, with the workload inserted when argv[0] is an alias.
pub(crate) fn args_with_alias() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let name = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_string();
    if let Some((_, workload)) = ALIASES.iter().find(|(alias, _)| *alias == name) {
        for (i, word) in workload.split(' ').enumerate() {
            args.insert(1 + i, word.into());
        }
    }
    args
}

/// benchpress' reporters, which its `report` takes after the jobs.
const BENCHPRESS_REPORTERS: &[&str] = &["stdout", "json_file", "json-file", "score"];

/// `report JOB... REPORTER [--all]` (benchpress' argument order) as
/// `report REPORTER JOB... [--all]`; None when the arguments have no
/// `report` followed by jobs and then a reporter.
pub(crate) fn benchpress_report_order(
    args: &[std::ffi::OsString],
) -> Option<Vec<std::ffi::OsString>> {
    let p = args.iter().skip(1).position(|a| a == "report")? + 1;
    let rest = &args[p + 1..];
    let r = rest.iter().rposition(|a| {
        a.to_str()
            .is_some_and(|a| BENCHPRESS_REPORTERS.contains(&a))
    })?;
    if r == 0 {
        return None;
    }
    let mut out = args[..=p].to_vec();
    out.push(rest[r].clone());
    out.extend_from_slice(&rest[..r]);
    out.extend_from_slice(&rest[r + 1..]);
    Some(out)
}

pub(crate) fn store_path(cli_db: &Option<PathBuf>) -> PathBuf {
    cli_db.clone().unwrap_or_else(Store::default_path)
}
