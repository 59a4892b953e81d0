//! `rackbench`: command-line parsing and dispatch only. Every behaviour lives
//! in the harness and workload crates.

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use harness::job::HookSpec;
use harness::{Cancel, Catalogue, Invocation, Registry, present, score, store::Store};
use std::path::PathBuf;

mod registry;
mod serve;

use registry::registry;
use std::process::ExitCode;

include!(concat!(env!("OUT_DIR"), "/embedded_jobs.rs"));

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
struct Cli {
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
    jobs_dir: Vec<PathBuf>,
    /// benchpress' -b: a benchmarks.yml naming the benchmarks of the -j
    /// file's jobs (default: the ones rackbench implements). Before the command.
    #[arg(short = 'b', long = "benchmarks", value_name = "FILE")]
    benchmarks: Option<PathBuf>,
    /// benchpress' -j: a jobs.yml whose jobs replace the embedded ones (a job
    /// naming a benchmark rackbench lacks is an error). Before the command.
    #[arg(short = 'j', long = "jobs", value_name = "FILE")]
    jobs_file: Option<PathBuf>,
    /// The results store: a SQLite file or a postgres:// URL.
    ///
    /// A SQLite file, or a PostgreSQL server's
    /// postgres://USER@HOST:PORT/DB URL (default: $RACKBENCH_DB or
    /// ~/.local/share/rackbench/results.db).
    #[arg(long, global = true, help_heading = GLOBAL)]
    db: Option<PathBuf>,
    /// Where benchmark_metrics_<run_id>/ is created.
    #[arg(long, global = true, default_value = ".", help_heading = GLOBAL)]
    output_dir: PathBuf,
    /// Do not record runs in the results store.
    #[arg(long, global = true, help_heading = GLOBAL)]
    no_store: bool,
    /// benchpress' -r: each successful run's result is also saved as
    /// DIR/<job>/<time>.json, benchpress' results history (default:
    /// results under --output-dir). Before the command.
    #[arg(short = 'r', long = "results", value_name = "DIR")]
    results: Option<PathBuf>,
    /// benchpress' -i: the iteration number in the report's file name
    /// (`_iter_N`; without it `_iter_None`, as benchpress). Before the command.
    #[arg(
        short = 'i',
        long = "iteration_num",
        visible_alias = "iteration-num",
        value_name = "N"
    )]
    iteration_num: Option<u32>,
    /// benchpress' -o: 'JOB: ARGS' replaces JOB's args with ARGS (split as
    /// a shell would; {var} placeholders still filled). Before the command.
    #[arg(
        short = 'o',
        long = "override_job_args",
        visible_alias = "override-job-args",
        value_name = "JOB: ARGS"
    )]
    override_job_args: Option<String>,
    /// benchpress' -u: the run id, naming benchmark_metrics_<run_id>/
    /// (default: 8 fresh hex digits). Before the command.
    #[arg(short = 'u', long = "uuid", value_name = "RUN_ID")]
    uuid: Option<String>,
    /// benchpress' -t: the timestamp (Unix seconds) of the run's reports and
    /// their file names (default: each report's end). Before the command.
    #[arg(short = 't', long = "timestamp", value_name = "SECS")]
    timestamp: Option<u64>,
    /// benchpress' -s: a script run in the background of every job (the
    /// user-script hook, for -d seconds). Before the command.
    #[arg(
        short = 's',
        long = "hook_path",
        visible_alias = "hook-path",
        value_name = "SCRIPT"
    )]
    hook_path: Option<String>,
    /// benchpress' -d: how long the -s script runs, seconds (default 60).
    #[arg(
        short = 'd',
        long = "hook_bg_duration",
        visible_alias = "hook-bg-duration",
        value_name = "SECS",
        requires = "hook_path"
    )]
    hook_bg_duration: Option<String>,
    /// benchpress' -v (repeatable): accepted; rackbench always prints its
    /// progress and the jobs' command lines on stderr.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    /// Benchmark commands also write a report and a store row.
    ///
    /// Benchmark commands (`rackbench cachebench ...`) run as the upstream
    /// tool: its output only. With --report they also write the harness's
    /// report (JSON on stdout and under --output-dir) and a store row.
    #[arg(long, global = true, env = "RACKBENCH_REPORT", value_parser = clap::builder::FalseyValueParser::new(), help_heading = GLOBAL)]
    report: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

/// `rackbench run`'s arguments.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Jobs (names as `rackbench list` prints them) or tags; each runs
    /// in the order given.
    #[arg(required = true)]
    jobs: Vec<String>,
    /// The role to run, for jobs that have roles.
    #[arg(short = 'r', long)]
    role: Option<String>,
    /// Var values as a JSON object, e.g. '{"server_ip": "::1"}'
    /// (`--role_input` as benchpress spells it), or as NAME=VALUE pairs
    /// split by commas (`-i server_ip=::1,seed=2`).
    #[arg(short = 'i', long = "role-input", visible_alias = "role_input")]
    input: Option<String>,
    /// Extra hooks: NAME or NAME:{json options}, several after one -k
    /// (`-k perf cpu-mpstat`, as benchpress) or -k repeated.
    #[arg(short = 'k', long = "hook", visible_alias = "hooks", num_args = 1.., action = clap::ArgAction::Append)]
    hooks: Vec<String>,
    /// Options of the -k hooks by name, as benchpress' -a, e.g.
    /// '{"perf": {"interval": 5}}'.
    #[arg(short = 'a', long = "hook-args", value_name = "JSON")]
    hook_args: Option<String>,
    /// Run no hook (the job's own and -k's); the report still lists them.
    #[arg(long)]
    disable_hooks: bool,
    /// Print what would run, run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Runs of each job (reports are numbered _iter_<n>).
    #[arg(
        short = 'n',
        long,
        default_value_t = 1,
        allow_negative_numbers = true,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    iterations: u32,
    /// Print benchpress' report JSON of each job on stdout (pretty),
    /// as when stdout is not a terminal, instead of the summary. The
    /// jobs' own text is on stderr either way.
    #[arg(long)]
    json: bool,
}

/// The heading of the options every command takes: in each command's
/// help they come last, apart from the command's own, one line each with
/// `-h` (`--help` gives their details).
const GLOBAL: &str = "Global options";

#[derive(Debug, Subcommand)]
enum Cmd {
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
const NO_ARGS: &str = "\0";

/// The error for a word that is neither a command nor a benchmark: the
/// closest command if one is close, then every command by name.
fn unknown_command(name: &str, cmd: &clap::Command, reg: &Registry) -> anyhow::Error {
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

/// The parser: the derived commands plus one command per benchmark, so
/// `rackbench --help`, completions and man pages list the benchmarks. A
/// benchmark's arguments are passed through untouched (its own parser
/// checks them); its `--help` prints its own usage.
fn cli_command(reg: &Registry) -> clap::Command {
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

#[derive(Debug, Subcommand)]
// Parsed once per process; boxing a flattened clap group buys nothing.
#[allow(clippy::large_enum_variant)]
enum ReportCmd {
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
struct HtmlSelection {
    /// Run ids to include.
    run_ids: Vec<String>,
    /// Only these jobs (repeatable).
    #[arg(long)]
    job: Vec<String>,
    /// Only runs on these hosts (repeatable).
    #[arg(long)]
    host: Vec<String>,
    /// Only runs from this date on (YYYY-MM-DD, UTC).
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// Only runs before this date.
    #[arg(long, value_name = "DATE")]
    until: Option<String>,
    #[command(flatten)]
    cmp: HtmlCompare,
}

/// A comparison shown first on the page, its sides chosen as for `results
/// compare` (within the page's --job). Without these the page compares,
/// per job, the pair of hosts the reader picks on it.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Requested comparison")]
struct HtmlCompare {
    /// A run id of side A (repeatable).
    #[arg(long = "a-run", value_name = "RUN_ID")]
    a_run: Vec<String>,
    /// A run id of side B (repeatable).
    #[arg(long = "b-run", value_name = "RUN_ID")]
    b_run: Vec<String>,
    /// Side A's runs on this host.
    #[arg(long = "a-host", value_name = "HOST")]
    a_host: Option<String>,
    /// Side B's runs on this host.
    #[arg(long = "b-host", value_name = "HOST")]
    b_host: Option<String>,
    /// Side A's runs from this date on.
    #[arg(long = "a-since", value_name = "DATE")]
    a_since: Option<String>,
    /// Side A's runs before this date.
    #[arg(long = "a-until", value_name = "DATE")]
    a_until: Option<String>,
    /// Side B's runs from this date on.
    #[arg(long = "b-since", value_name = "DATE")]
    b_since: Option<String>,
    /// Side B's runs before this date.
    #[arg(long = "b-until", value_name = "DATE")]
    b_until: Option<String>,
}

impl HtmlCompare {
    fn given(&self) -> bool {
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

/// The page's requested comparison, when `sel` asks for one: bad selectors
/// are errors; sides that cannot be compared are shown as such.
fn requested_comparison(
    store: &Store,
    sel: &HtmlSelection,
) -> anyhow::Result<Option<harness::html::RequestedComparison>> {
    let h = &sel.cmp;
    if !h.given() {
        return Ok(None);
    }
    let side_given = |run: &[String], sel: [&Option<String>; 3]| {
        !run.is_empty() || sel.iter().any(|o| o.is_some())
    };
    for (name, given) in [
        (
            'A',
            side_given(&h.a_run, [&h.a_host, &h.a_since, &h.a_until]),
        ),
        (
            'B',
            side_given(&h.b_run, [&h.b_host, &h.b_since, &h.b_until]),
        ),
    ] {
        if !given {
            let n = name.to_ascii_lowercase();
            anyhow::bail!(
                "the requested comparison's side {name} selects no runs of its own: give --{n}-run, --{n}-host, --{n}-since or --{n}-until"
            );
        }
    }
    let args = CompareArgs {
        run_a: None,
        run_b: None,
        a_run: h.a_run.clone(),
        b_run: h.b_run.clone(),
        a_host: h.a_host.clone(),
        b_host: h.b_host.clone(),
        a_since: h.a_since.clone(),
        a_until: h.a_until.clone(),
        b_since: h.b_since.clone(),
        b_until: h.b_until.clone(),
        job: sel.job.clone(),
        host: None,
        last: None,
        json: false,
    };
    let (a, b, history) = compare_sides(store, &args)?;
    let what = format!("A: {}; B: {}", a.selection, b.selection);
    let result =
        harness::compare::compare(&a, &b, &history, &registry()).map_err(|e| e.to_string());
    Ok(Some(harness::html::RequestedComparison { what, result }))
}

/// The report page over the store's runs that `sel` selects.
fn html_page(store: &Store, sel: &HtmlSelection, refresh: Option<u32>) -> anyhow::Result<String> {
    let when = |d: &Option<String>| {
        d.as_deref()
            .map(harness::compare::parse_when)
            .transpose()
            .map_err(|e| anyhow::anyhow!(e))
    };
    let filter = harness::store::RunFilter {
        run_ids: sel.run_ids.clone(),
        jobs: sel.job.clone(),
        hosts: sel.host.clone(),
        since: when(&sel.since)?,
        until: when(&sel.until)?,
        success_only: false,
    };
    let rows = store.select(&filter)?;
    let mut parts = Vec::new();
    if !sel.run_ids.is_empty() {
        parts.push(format!("runs {}", sel.run_ids.join(", ")));
    }
    if !sel.job.is_empty() {
        parts.push(format!("jobs {}", sel.job.join(", ")));
    }
    if !sel.host.is_empty() {
        parts.push(format!("hosts {}", sel.host.join(", ")));
    }
    if let Some(s) = &sel.since {
        parts.push(format!("since {s}"));
    }
    if let Some(u) = &sel.until {
        parts.push(format!("until {u}"));
    }
    let generated_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Ok(harness::html::page(
        &rows,
        &harness::html::PageOptions {
            title: "rackbench report".into(),
            selection: format!(
                "{}; store {}",
                if parts.is_empty() {
                    "all runs".into()
                } else {
                    parts.join(", ")
                },
                store.path().display()
            ),
            refresh_secs: refresh,
            store_version: refresh.map(|_| store.version()).transpose()?,
            generated_at,
            requested: requested_comparison(store, sel)?,
        },
        &registry(),
    ))
}

#[derive(Debug, Subcommand)]
enum ResultsCmd {
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
struct CompareArgs {
    /// Side A's run id (an invocation of `rackbench run`).
    #[arg(requires = "run_b", conflicts_with_all = ["a_run", "b_run"])]
    run_a: Option<String>,
    /// Side B's run id.
    run_b: Option<String>,
    /// A run id of side A (repeatable: several invocations).
    #[arg(long = "a-run", value_name = "RUN_ID")]
    a_run: Vec<String>,
    /// A run id of side B (repeatable).
    #[arg(long = "b-run", value_name = "RUN_ID")]
    b_run: Vec<String>,
    /// Side A's runs on this host.
    #[arg(long = "a-host", value_name = "HOST", conflicts_with = "host")]
    a_host: Option<String>,
    /// Side B's runs on this host.
    #[arg(long = "b-host", value_name = "HOST", conflicts_with = "host")]
    b_host: Option<String>,
    /// Side A's runs from this date on.
    #[arg(long = "a-since", value_name = "DATE")]
    a_since: Option<String>,
    /// Side A's runs before this date.
    #[arg(long = "a-until", value_name = "DATE")]
    a_until: Option<String>,
    /// Side B's runs from this date on.
    #[arg(long = "b-since", value_name = "DATE")]
    b_since: Option<String>,
    /// Side B's runs before this date.
    #[arg(long = "b-until", value_name = "DATE")]
    b_until: Option<String>,
    /// Only these jobs, on both sides (repeatable).
    #[arg(long, value_name = "JOB")]
    job: Vec<String>,
    /// Both sides' runs on this host.
    #[arg(long, value_name = "HOST")]
    host: Option<String>,
    /// Only the newest N runs of each job on each side.
    #[arg(long, value_name = "N")]
    last: Option<usize>,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// One side's own selectors.
struct SideArgs<'a> {
    name: char,
    runs: Vec<String>,
    host: &'a Option<String>,
    since: &'a Option<String>,
    until: &'a Option<String>,
}

/// benchpress' report history: per job (given, or every catalogue job with
/// a run), its newest successful run or every successful run newest first
/// (benchpress' history holds successful runs only), as the run's metrics
/// with `run_id` and `timestamp` added. A job without runs is said on
/// stderr and skipped, as benchpress does.
fn historical_metrics(
    cat: &Catalogue,
    store: &Store,
    jobs: &[String],
    all: bool,
) -> anyhow::Result<Vec<(harness::store::RunRow, serde_json::Value)>> {
    let names: Vec<String> = if jobs.is_empty() {
        cat.iter().map(|j| j.name.clone()).collect()
    } else {
        cat.select(jobs)?
    };
    let mut out = Vec::new();
    for n in &names {
        let mut rows = store.select(&harness::store::RunFilter {
            jobs: vec![n.clone()],
            success_only: true,
            ..Default::default()
        })?;
        if rows.is_empty() {
            if !jobs.is_empty() {
                eprintln!("No historical results for \"{n}\", skipping");
            }
            continue;
        }
        rows.reverse();
        if !all {
            rows.truncate(1);
        }
        for r in rows {
            let mut v = r.metrics.clone();
            if let Some(m) = v.as_object_mut() {
                m.insert("run_id".into(), r.run_id.clone().into());
                m.insert("timestamp".into(), r.timestamp.into());
            }
            out.push((r, v));
        }
    }
    Ok(out)
}

/// `run -a JSON`: options for the `-k` hooks by name (benchpress'
/// `--hook-args`). A name not given with -k, or a hook given options both
/// ways, are errors (benchpress ignores the first with a warning, which
/// would run a hook other than asked); each hook checks its own options.
fn apply_hook_args(hooks: &mut [HookSpec], text: &str) -> anyhow::Result<()> {
    let map = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(m)) => m,
        Ok(_) => anyhow::bail!(
            "-a/--hook-args must be a JSON object of hook name to options, e.g. '{{\"perf\": {{\"interval\": 5}}}}', got: {text}"
        ),
        Err(e) => anyhow::bail!("-a/--hook-args is not valid JSON ({e}): {text}"),
    };
    for (name, opts) in map {
        let Some(h) = hooks.iter_mut().find(|h| h.hook == name) else {
            let given: Vec<&str> = hooks.iter().map(|h| h.hook.as_str()).collect();
            anyhow::bail!(
                "-a/--hook-args names hook '{name}', which is not given with -k (given: {})",
                if given.is_empty() {
                    "none".to_string()
                } else {
                    given.join(", ")
                }
            );
        };
        if !h.options.is_null() {
            anyhow::bail!(
                "hook '{name}' has options both in -k {name}:{{...}} and in -a/--hook-args; give them once"
            );
        }
        h.options = opts;
    }
    Ok(())
}

/// `results compare`: selects both sides, compares them, prints.
fn compare_cmd(store: &Store, c: CompareArgs) -> anyhow::Result<()> {
    let (a, b, history) = compare_sides(store, &c)?;
    let cmp = harness::compare::compare(&a, &b, &history, &registry())
        .with_context(|| format!("cannot compare in {}", store.path().display()))?;
    let text = if c.json {
        serde_json::to_string(&cmp)? + "\n"
    } else {
        present::compare(&cmp)
    };
    // Written, not print!ed: a closed pipe (`| head`) ends the output
    // quietly instead of panicking.
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(e).context("cannot write the comparison");
    }
    Ok(())
}

/// The two sides `c` selects, and the history their noise is judged on.
fn compare_sides(
    store: &Store,
    c: &CompareArgs,
) -> anyhow::Result<(
    harness::compare::SideRows,
    harness::compare::SideRows,
    Vec<harness::store::RunRow>,
)> {
    use harness::compare;
    use harness::store::RunFilter;
    let (a_runs, b_runs) = match (&c.run_a, &c.run_b) {
        (Some(a), Some(b)) => (vec![a.clone()], vec![b.clone()]),
        _ => (c.a_run.clone(), c.b_run.clone()),
    };
    let sides = [
        SideArgs {
            name: 'A',
            runs: a_runs,
            host: &c.a_host,
            since: &c.a_since,
            until: &c.a_until,
        },
        SideArgs {
            name: 'B',
            runs: b_runs,
            host: &c.b_host,
            since: &c.b_since,
            until: &c.b_until,
        },
    ];
    let mut selected = Vec::new();
    for side in &sides {
        let n = side.name.to_ascii_lowercase();
        if side.runs.is_empty()
            && side.host.is_none()
            && side.since.is_none()
            && side.until.is_none()
        {
            anyhow::bail!(
                "side {} selects no runs of its own: give RUN_A RUN_B, or --{n}-run, --{n}-host, --{n}-since or --{n}-until (`rackbench results compare --help` has examples)",
                side.name
            );
        }
        for id in &side.runs {
            if !store.has_run(id)? {
                anyhow::bail!(
                    "no run with id '{id}' in {}; `rackbench results list` shows the recorded runs",
                    store.path().display()
                );
            }
        }
        let when = |flag: &str, v: &Option<String>| {
            v.as_deref()
                .map(compare::parse_when)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--{n}-{flag}: {e}"))
        };
        let host = side.host.as_ref().or(c.host.as_ref());
        let filter = RunFilter {
            run_ids: side.runs.clone(),
            jobs: c.job.clone(),
            hosts: host.into_iter().cloned().collect(),
            since: when("since", side.since)?,
            until: when("until", side.until)?,
            success_only: false,
        };
        let mut what = Vec::new();
        if !side.runs.is_empty() {
            what.push(format!(
                "run{} {}",
                if side.runs.len() > 1 { "s" } else { "" },
                side.runs.join(", ")
            ));
        }
        if !c.job.is_empty() {
            what.push(format!("job {}", c.job.join(", ")));
        }
        if let Some(h) = host {
            what.push(format!("host {h}"));
        }
        if let Some(d) = side.since {
            what.push(format!("since {d}"));
        }
        if let Some(d) = side.until {
            what.push(format!("until {d}"));
        }
        if let Some(n) = c.last {
            what.push(format!("newest {n} per job"));
        }
        let mut rows = store.select(&filter)?;
        if let Some(n) = c.last {
            rows = compare::newest_per_job(rows, n);
        }
        selected.push(compare::SideRows {
            selection: what.join(", "),
            rows,
        });
    }
    let b = selected.pop().context("side B")?;
    let a = selected.pop().context("side A")?;
    let jobs = compare::jobs_needing_history(&a.rows, &b.rows);
    let history = if jobs.is_empty() {
        Vec::new()
    } else {
        // Noise is judged on the sides' own hosts.
        let hosts: std::collections::BTreeSet<String> = a
            .rows
            .iter()
            .chain(&b.rows)
            .map(|r| r.hostname.clone())
            .collect();
        store.select(&RunFilter {
            jobs,
            hosts: hosts.into_iter().collect(),
            success_only: true,
            ..Default::default()
        })?
    };
    Ok((a, b, history))
}

/// `results show RUN --text`: each row's upstream text from its record. A
/// row without one is named on stderr; it is an error when no row had one.
fn show_text(reg: &Registry, rows: &[harness::store::RunRow]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let mut printed = 0;
    let several = rows.len() > 1;
    for row in rows {
        let what = format!("job {} (iteration {})", row.job, row.iteration);
        let Some(rec) = &row.record else {
            eprintln!(
                "{what}: no record stored (recorded before rackbench kept records, or the job failed before its workload finished)"
            );
            continue;
        };
        let Some(w) = reg.get(&row.benchmark) else {
            eprintln!(
                "{what}: benchmark '{}' is not in this rackbench",
                row.benchmark
            );
            continue;
        };
        if several {
            eprintln!("== {what} ==");
        }
        w.format(rec, &mut out)
            .with_context(|| format!("{what}: cannot print its {} text", row.benchmark))?;
        out.flush()?;
        printed += 1;
    }
    if printed == 0 {
        anyhow::bail!("run {} has no job with a stored record", rows[0].run_id);
    }
    Ok(())
}

/// Upstream tool names the binary answers to when invoked under them (a
/// symlink or copy named `cachebench` runs `rackbench cachebench ...`).
const ALIASES: &[(&str, &str)] = &[
    ("cachebench", "cachebench"),
    ("resctl-bench", "resctl"),
    ("rd-hashd", "resctl hashd"),
];

/// The command line, with the workload inserted when argv[0] is an alias.
fn args_with_alias() -> Vec<std::ffi::OsString> {
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

/// benchpress' reporters, which its `report` takes after the jobs.
const BENCHPRESS_REPORTERS: &[&str] = &["stdout", "json_file", "json-file", "score"];

/// `report JOB... REPORTER [--all]` (benchpress' argument order) as
/// `report REPORTER JOB... [--all]`; None when the arguments have no
/// `report` followed by jobs and then a reporter.
fn benchpress_report_order(args: &[std::ffi::OsString]) -> Option<Vec<std::ffi::OsString>> {
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

fn store_path(cli_db: &Option<PathBuf>) -> PathBuf {
    cli_db.clone().unwrap_or_else(Store::default_path)
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

/// `report html`: the page over the selected runs, written atomically.
fn write_html(store: &Store, out: &std::path::Path, sel: &HtmlSelection) -> anyhow::Result<()> {
    let page = html_page(store, sel, None)?;
    let mut f = atomic_write_file::AtomicWriteFile::open(out)
        .with_context(|| format!("cannot write {}", out.display()))?;
    std::io::Write::write_all(&mut f, page.as_bytes())
        .and_then(|()| f.commit())
        .with_context(|| format!("cannot write {}", out.display()))?;
    println!("{}", out.display());
    Ok(())
}

/// `man [DIR]`: rackbench(1) on stdout, or every page into DIR.
fn write_man(reg: &Registry, dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    let Some(dir) = dir else {
        let mut out = std::io::stdout().lock();
        if let Err(e) = clap_mangen::Man::new(cli_command(reg)).render(&mut out)
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            return Err(e).context("cannot write the man page");
        }
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(cli_command(reg), dir)
        .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
    eprintln!("man pages written to {}", dir.display());
    Ok(())
}

/// `rackbench run`: the jobs of the invocation, each iteration's report
/// on stdout as JSON (or the jobs' summaries on a terminal).
fn run_jobs(cli: &Cli, reg: &Registry, cat: Catalogue, a: RunArgs) -> anyhow::Result<ExitCode> {
    let input = role_input(a.input)?;
    let extra_hooks = extra_hooks(cli, &a.hooks, a.hook_args)?;
    check_iterations(cli, a.iterations)?;
    let inv = Invocation {
        jobs: cat.select(&a.jobs)?,
        role: a.role,
        input,
        extra_hooks,
        disable_hooks: a.disable_hooks,
        dry_run: a.dry_run,
        iterations: a.iterations,
        out_root: cli.output_dir.clone(),
        store: (!cli.no_store).then(|| store_path(&cli.db)),
        run_id: cli.uuid.clone(),
        timestamp: cli.timestamp,
        iteration_label: cli.iteration_num.map(|n| n.to_string()),
        results_dir: Some(
            cli.results
                .clone()
                .unwrap_or_else(|| cli.output_dir.join("results")),
        ),
        stdout: if a.json || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            harness::runner::Stdout::Json
        } else {
            harness::runner::Stdout::Summary
        },
    };
    finish(harness::runner::execute(
        &cat,
        reg,
        &inv,
        &Cancel::global(),
    )?)
}

/// `run -i/--role-input`: a JSON object as benchpress takes it, or
/// `NAME=VALUE[,NAME=VALUE...]` (values are text, as vars are; a value
/// cannot hold a comma, JSON can) (none: empty).
fn role_input(input: Option<String>) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    let Some(text) = input else {
        return Ok(serde_json::Map::new());
    };
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(m)) => return Ok(m),
        Ok(_) => anyhow::bail!(
            "-i/--role-input must be a JSON object, e.g. '{{\"server_ip\": \"::1\"}}', got: {text}"
        ),
        Err(e) if text.trim_start().starts_with('{') => {
            anyhow::bail!("-i/--role-input is not valid JSON ({e}): {text}")
        }
        Err(_) => {}
    }
    let mut m = serde_json::Map::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = pair.split_once('=').filter(|(k, _)| !k.trim().is_empty()) else {
            anyhow::bail!(
                "-i/--role-input takes a JSON object or NAME=VALUE pairs split by commas, \
                 e.g. '{{\"server_ip\": \"::1\"}}' or server_ip=::1; got {pair:?} in: {text}"
            );
        };
        m.insert(
            k.trim().to_string(),
            serde_json::Value::String(v.to_string()),
        );
    }
    Ok(m)
}

/// The hooks `run` adds to every job: `-k`'s (with `-a`'s arguments),
/// then benchpress' `-s/-d` user script.
fn extra_hooks(
    cli: &Cli,
    hooks: &[String],
    hook_args: Option<String>,
) -> anyhow::Result<Vec<HookSpec>> {
    let mut extra_hooks = hooks
        .iter()
        .map(|h| HookSpec::parse_cli(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    if let Some(text) = hook_args {
        apply_hook_args(&mut extra_hooks, &text)?;
    }
    // benchpress' -s/-d: the user-script hook on every job, after
    // the job's own and -k's.
    if let Some(path) = &cli.hook_path {
        let duration = cli.hook_bg_duration.clone().unwrap_or_else(|| "60".into());
        extra_hooks.push(HookSpec {
            hook: "user-script".into(),
            options: serde_json::json!({
                "hook_path": path,
                "background_mode": {"duration": duration},
            }),
        });
    }
    Ok(extra_hooks)
}

/// `run -n` with `-i/--iteration_num`.
fn check_iterations(cli: &Cli, iterations: u32) -> anyhow::Result<()> {
    if iterations == 0 {
        anyhow::bail!("-n/--iterations must be at least 1");
    }
    if cli.iteration_num.is_some() && iterations > 1 {
        anyhow::bail!(
            "-i/--iteration_num names the one iteration a run writes (benchpress' _iter_N); with -n {iterations} each iteration is numbered: give one of them"
        );
    }
    Ok(())
}

/// `report score`: the jobs' scores over their newest `newest` successful
/// runs (None: all), by pool, and overall.
fn report_score(
    cat: &Catalogue,
    store: &Store,
    jobs: Vec<String>,
    newest: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    let names: Vec<String> = if jobs.is_empty() {
        cat.iter()
            .filter(|j| j.baseline.is_some() && j.benchmark != "calibrate")
            .map(|j| j.name.clone())
            .collect()
    } else {
        jobs
    };
    let mut scores = Vec::new();
    let mut missing = Vec::new();
    for n in &names {
        let job = cat.get(n)?;
        let Some(b) = &job.baseline else {
            missing.push(format!(
                "{n}: the job defines no baseline, so it has no score"
            ));
            continue;
        };
        let mut runs = store.select(&harness::store::RunFilter {
            jobs: vec![n.clone()],
            ..Default::default()
        })?;
        runs.reverse();
        runs.retain(|r| r.success);
        if let Some(k) = newest {
            runs.truncate(k);
        }
        // Calibrate measures the instrument: its scores stay in their
        // own pool, which never counts in the DCPerf score.
        if job.benchmark == "calibrate" && b.pool.is_some() {
            anyhow::bail!(
                "job '{n}' ({}): a calibrate job's baseline cannot name a pool; its scores never count in a benchmark's",
                job.source.display()
            );
        }
        let pool = b.pool.as_deref().unwrap_or(&job.benchmark);
        match score::score_job(n, pool, &b.metric, b.value, &runs) {
            Some(s) => scores.push(s),
            None => missing.push(format!(
                "{n}: no successful run with metric '{}' recorded",
                b.metric
            )),
        }
    }
    let pools = score::pool(&scores, &["calibrate"]);
    let overall = score::overall(&pools);
    if json {
        println!(
            "{}",
            serde_json::json!({ "benchmarks": pools, "jobs": scores, "unscored": missing, "overall": overall })
        );
    } else {
        print!(
            "{}",
            present::scores(&scores, &pools, &missing, overall.as_ref())
        );
    }
    Ok(())
}

/// `report stdout`: each run's metrics as benchpress prints them: pretty
/// and key-sorted on a terminal, one line otherwise (serde_json's maps
/// keep keys sorted).
fn report_stdout(runs: &[(harness::store::RunRow, serde_json::Value)]) -> anyhow::Result<()> {
    use std::io::{IsTerminal, Write};
    let tty = std::io::stdout().is_terminal();
    let mut out = std::io::stdout().lock();
    for (_, v) in runs {
        let text = if tty {
            serde_json::to_string_pretty(v)?
        } else {
            serde_json::to_string(v)?
        };
        if let Err(e) = writeln!(out, "{text}")
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            return Err(e).context("cannot write the report");
        }
    }
    Ok(())
}

/// `report json_file`: each run's metrics in a file under
/// benchmark_metrics_<run_id>/, named as benchpress names it; prints the
/// paths.
fn report_json_files(
    output_dir: &std::path::Path,
    runs: Vec<(harness::store::RunRow, serde_json::Value)>,
) -> anyhow::Result<()> {
    for (row, v) in runs {
        // benchpress names the file `_metrics_..._iter_N` only when
        // the object has a `metrics` key, which a run's own metrics
        // do not: its history report is a `_system_specs_` file.
        let dir = output_dir.join(format!("benchmark_metrics_{}", row.run_id));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let name = row.job.replace(' ', "_");
        let file = if v.get("metrics").is_some() {
            dir.join(format!(
                "{name}_metrics_{}_iter_{}.json",
                row.timestamp, row.iteration
            ))
        } else {
            dir.join(format!("{name}_system_specs_{}.json", row.timestamp))
        };
        // `run` wrote the job's system specs under that name, which
        // benchpress' json_file would overwrite: they are kept and
        // the metrics go beside them.
        let holds_specs = std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|old| old.get("cpu_topology").is_some());
        let file = if holds_specs {
            let beside = dir.join(format!("{name}_history_metrics_{}.json", row.timestamp));
            eprintln!(
                "note: {} holds the run's system specs (benchpress would overwrite them); the metrics go to {}",
                file.display(),
                beside.display()
            );
            beside
        } else {
            file
        };
        let text = serde_json::to_string_pretty(&v)? + "\n";
        let mut f = atomic_write_file::AtomicWriteFile::open(&file)
            .with_context(|| format!("cannot write {}", file.display()))?;
        std::io::Write::write_all(&mut f, text.as_bytes())
            .and_then(|()| f.commit())
            .with_context(|| format!("cannot write {}", file.display()))?;
        println!("{}", file.display());
    }
    Ok(())
}

/// `results list|show|compare|push` over the store.
fn results_cmd(reg: &Registry, db: &Option<PathBuf>, what: ResultsCmd) -> anyhow::Result<()> {
    let store = Store::open(&store_path(db))?;
    match what {
        ResultsCmd::List { limit, json } => {
            let rows = store.recent(limit)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&present::runs_json(&rows, reg))?
                );
            } else {
                print!("{}", present::runs(&rows, reg));
            }
        }
        ResultsCmd::Show { run_id, text } => {
            let rows = store.by_run_id(&run_id)?;
            if rows.is_empty() {
                anyhow::bail!(
                    "no run with id '{run_id}' in {}; `rackbench results list` shows the recorded runs",
                    store.path().display()
                );
            }
            if text {
                show_text(reg, &rows)?;
            } else {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            }
        }
        ResultsCmd::Compare(c) => compare_cmd(&store, *c)?,
        ResultsCmd::Push { to } => {
            let target = Store::open(&to)?;
            let n = store.push_to(&target)?;
            println!(
                "pushed {} runs, skipped {} already there",
                n.pushed, n.skipped
            );
        }
    }
    Ok(())
}

/// `completions SHELL`: the shell's completion script on stdout.
fn write_completions(
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

/// `system-check`: the host's checks, as lines or JSON.
fn system_check(json: bool, root: &std::path::Path) -> anyhow::Result<()> {
    anyhow::ensure!(root.is_dir(), "--root {}: not a folder", root.display());
    let checks = harness::system_check::run(root);
    let text = if json {
        let warnings = checks
            .iter()
            .filter(|c| c.status == harness::system_check::Status::Warn)
            .count();
        let v = serde_json::json!({"checks": checks, "warnings": warnings});
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else {
        checks.iter().map(|c| c.line() + "\n").collect()
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(e).context("cannot write the system check");
    }
    Ok(())
}

/// `rackbench BENCHMARK ARGS...`: the upstream tool's command, direct, or
/// with `--report` as an ad-hoc job.
fn workload_cmd(cli: &Cli, reg: &Registry, mut argv: Vec<String>) -> anyhow::Result<ExitCode> {
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

fn finish(s: harness::runner::Summary) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &s.out_dir {
        eprintln!("reports in {}", dir.display());
    }
    Ok(if s.interrupted {
        ExitCode::from(130)
    } else if s.all_succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
