//! Running jobs: resolve, hooks before, the workload, hooks after, the
//! report, the results store.

use crate::cancel::{Cancel, StopReason};
use crate::fsutil::write_atomic;
use crate::hooks::{self, Hook, HookContext};
use crate::job::{Catalogue, HookSpec, Job};
use crate::machine::{self, MachineInfo};
use crate::record::{Record, now_secs};
use crate::report::{Report, Stamp, new_run_id};
use crate::store::{RunRow, Store};
use crate::vars::{Resolved, resolve};
use serde_json::{Map, Value, json};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a workload gets to run with.
pub struct RunContext {
    /// Where relative output paths named in the workload's arguments go:
    /// the invocation's `benchmark_metrics_<run_id>` folder for a job, the
    /// current directory for a direct command (as upstream's tools).
    pub out_dir: PathBuf,
    /// Where the harness's own artifacts go (charts, helper processes'
    /// logs): the metrics folder for a job; `None` for a direct command,
    /// which writes only the files upstream writes.
    pub artifacts: Option<PathBuf>,
    pub job: String,
    pub iteration: u32,
    /// Poll it (or hand `cancel.flag()` to the load core): set on Ctrl-C or
    /// when the job's timeout expires.
    pub cancel: Cancel,
}

impl RunContext {
    /// Resolves a workload output path against the metrics folder.
    pub fn output_path(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.out_dir.join(p)
        }
    }
}

/// What a workload returns: whether it met its own definition of success,
/// and its typed record, from which [`Workload::metrics`] derives the
/// report's metrics and [`Workload::format`] prints the upstream text again.
/// A workload that is stopped returns what it measured so far.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub success: bool,
    pub record: Option<Record>,
    /// Set by a workload that runs until it is stopped (a server): a
    /// Ctrl-C is its normal end, so the report keeps `success` and the run
    /// is not counted as interrupted.
    pub stop_is_end: bool,
}

impl Outcome {
    /// A measured run: whether it met its own definition of success, and
    /// its record (the report's metrics are derived from it by
    /// [`Workload::metrics`]).
    pub fn measured(success: bool, record: Record) -> Outcome {
        Outcome {
            success,
            record: Some(record),
            stop_is_end: false,
        }
    }

    /// Marks a run that lasts until it is stopped: Ctrl-C ends it normally.
    pub fn ending_on_stop(mut self) -> Outcome {
        self.stop_is_end = true;
        self
    }

    /// The end of a helper command (a checker, a generator, a config dump):
    /// it measured nothing, so there is no record and no metrics.
    pub fn helper(success: bool) -> Outcome {
        Outcome {
            success,
            record: None,
            stop_is_end: false,
        }
    }
}

/// A benchmark rackbench can run.
pub trait Workload: Send + Sync {
    /// The `benchmark` name jobs refer to.
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// The upstream tool this command replaces, for `rackbench --help`
    /// (e.g. "CacheLib's cachebench").
    fn upstream(&self) -> &'static str;
    /// The workload's own usage text (`rackbench NAME --help`).
    fn help(&self) -> String;
    /// The usage of the subcommand `args` name (`rackbench distbench
    /// test_builder --help`), or `None` for the whole tool's [`Self::help`].
    fn subcommand_help(&self, args: &[String]) -> Option<String> {
        let _ = args;
        None
    }
    /// The tool's arguments as a clap command (its subcommands and flags),
    /// for shell completions only: the workload parses its arguments
    /// itself. `None` (the default) completes nothing after its name.
    fn command(&self) -> Option<clap::Command> {
        None
    }
    /// Checks the argv without running (so bad args fail before any hook).
    fn validate(&self, args: &[String]) -> anyhow::Result<()>;
    /// Runs; an `Err` is a failure whose message goes into the report.
    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome>;
    /// True when `args` name one of the tool's helper commands (a checker,
    /// a generator, a formatter, a config dump): it measures nothing, so it
    /// never produces a report or a store row, even with `--report`.
    fn is_helper(&self, _args: &[String]) -> bool {
        false
    }
    /// Files runs of this benchmark left behind outside their results
    /// (e.g. logs in the temp folder) that no running process still uses;
    /// `clean` removes them.
    fn leftovers(&self) -> Vec<PathBuf> {
        Vec::new()
    }
    /// Prints the upstream tool's text of a run again from the record its
    /// `run` returned (`rackbench results show RUN --text`).
    fn format(&self, record: &Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        let _ = (record, out);
        anyhow::bail!("{} keeps no record to print its text from", self.name())
    }
    /// What a run prints once it is over, from the record its `run`
    /// returned: the harness prints it right after `run` returns, for
    /// direct and job runs alike, so `run` prints only what comes while it
    /// runs (a config's echo, a search's probe lines, progress). `out` is
    /// the tool's standard output, `diag` its standard error. Nothing by
    /// default (a tool whose whole text comes while it runs).
    fn format_end(
        &self,
        record: &Record,
        out: &mut dyn std::io::Write,
        diag: &mut dyn std::io::Write,
    ) -> anyhow::Result<()> {
        let _ = (record, out, diag);
        Ok(())
    }
    /// The report's metrics of a run, derived from the record its `run`
    /// returned: the workload's typed metrics struct, flattened with
    /// [`crate::record::metrics_map`].
    fn metrics(&self, record: &Record) -> anyhow::Result<Map<String, Value>>;
    /// Why the result of a run cannot be fully trusted (see
    /// [`crate::marks`]), one sentence each, from the record its `run`
    /// returned; none by default.
    fn marks(&self, record: &Record) -> Vec<String> {
        let _ = record;
        Vec::new()
    }
    /// Which way is better for each of its metrics: tables of rules over
    /// the dotted keys of [`Self::metrics`], first match wins (see
    /// [`direction`]); a key no rule names is neutral.
    fn directions(&self) -> &'static [&'static [direction::Rule]] {
        &[]
    }
    /// The figures that answer what a run of it measured, in the order a
    /// person reads them (see [`direction::Headline`]): the terminal
    /// summary after `run` and `results list` show them.
    fn headlines(&self) -> &'static [direction::Headline] {
        &[]
    }
    /// The title of the page's chart of the percentiles found in a run's
    /// metrics.
    fn percentiles_title(&self) -> &'static str {
        results::shown::DEFAULT_PERCENTILES_TITLE
    }
    /// What the report page draws of a stored run of it, from the record
    /// its `run` returned, beside the page's own charts of the search and
    /// the percentiles (a run stored without a record gets those only);
    /// none by default.
    fn charts(&self, record: &Record) -> Vec<crate::page_chart::PageChart> {
        let _ = record;
        Vec::new()
    }
    /// The benchmarks of benchpress' benchmarks.yml this workload runs, and
    /// how their args translate (for `-j/-b` files); none by default (a
    /// workload is still one under its own name).
    fn benchpress(&self) -> &'static [crate::benchpress_yaml::Upstream] {
        &[]
    }
    /// What the report page draws across the stored runs of one of its jobs
    /// (`job`); none by default.
    fn history_charts(
        &self,
        job: &str,
        runs: &[&crate::store::RunRow],
    ) -> Vec<crate::page_chart::PageChart> {
        let _ = (job, runs);
        Vec::new()
    }
}

/// The workloads compiled into the binary.
#[derive(Default)]
pub struct Registry {
    workloads: Vec<Box<dyn Workload>>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, w: Box<dyn Workload>) {
        self.workloads.push(w);
    }

    pub fn get(&self, name: &str) -> Option<&dyn Workload> {
        self.workloads
            .iter()
            .find(|w| w.name() == name)
            .map(|w| w.as_ref())
    }

    /// The workloads in the order they were registered.
    pub fn iter(&self) -> impl Iterator<Item = &dyn Workload> {
        self.workloads.iter().map(|w| w.as_ref())
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.workloads.iter().map(|w| w.name()).collect()
    }

    /// The workloads as benchpress files see them: names and the upstream
    /// benchmarks each declares.
    pub fn benchpress(&self) -> crate::benchpress_yaml::Workloads<'static> {
        crate::benchpress_yaml::Workloads {
            names: self.names(),
            upstream: self
                .workloads
                .iter()
                .flat_map(|w| w.benchpress().iter().copied())
                .collect(),
        }
    }
}

/// One `rackbench run`.
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    pub jobs: Vec<String>,
    pub role: Option<String>,
    pub input: Map<String, Value>,
    pub extra_hooks: Vec<HookSpec>,
    /// Run no hook (benchpress' `--disable-hooks`); the report still lists
    /// them, as benchpress' does.
    pub disable_hooks: bool,
    pub dry_run: bool,
    pub iterations: u32,
    /// Where `benchmark_metrics_<run_id>/` is created.
    pub out_root: PathBuf,
    /// The results store; `None` skips recording.
    pub store: Option<PathBuf>,
    /// benchpress' `-u`: the run id (default: 8 fresh hex digits).
    pub run_id: Option<String>,
    /// benchpress' `-t`: the timestamp of every report (default: each
    /// report's end).
    pub timestamp: Option<u64>,
    /// benchpress' `-i`: the iteration in the report's file name; without
    /// it benchpress writes `_iter_None` (with `iterations` > 1, each
    /// iteration's number).
    pub iteration_label: Option<String>,
    /// benchpress' `-r`: each successful run's result is saved as
    /// `<dir>/<job>/<time>.json` (benchpress' history), and each job's
    /// run folder gets benchpress' per-run link; `None` (a direct
    /// command's `--report`) makes neither.
    pub results_dir: Option<PathBuf>,
    /// What goes on stdout.
    pub stdout: Stdout,
}

/// What `execute` prints on stdout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stdout {
    /// benchpress' report JSON of each job and nothing else (pretty on a
    /// terminal): `run` when stdout is not a terminal, or with `--json`.
    /// The jobs' own text goes to stderr ([`crate::redirect`]).
    #[default]
    Json,
    /// Each job's summary ([`crate::answer`]) when it ends: `run` on a
    /// terminal. The jobs' own text goes to stderr.
    Summary,
    /// The workload's own text, then the report JSON: a direct command's
    /// `--report`, which prints what the upstream tool prints.
    TextAndJson,
}

/// A job resolved and checked, ready to run.
struct Planned<'a> {
    job: &'a Job,
    workload: &'a dyn Workload,
    resolved: Resolved,
}

/// The end of an invocation.
#[derive(Debug)]
pub struct Summary {
    pub run_id: Option<String>,
    pub out_dir: Option<PathBuf>,
    pub reports: Vec<PathBuf>,
    pub all_succeeded: bool,
    pub interrupted: bool,
}

/// A problem found before anything ran.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Job(#[from] crate::job::JobError),
    #[error(transparent)]
    Resolve(#[from] crate::vars::ResolveError),
    #[error("job '{job}' ({file}): {message}")]
    Hook {
        job: String,
        file: String,
        message: String,
    },
    #[error(
        "job '{job}' ({file}) names benchmark '{benchmark}', which this binary does not have (it has: {known})"
    )]
    NoWorkload {
        job: String,
        file: String,
        benchmark: String,
        known: String,
    },
    #[error("job '{job}': {}", bad_args(var.as_ref(), args, message))]
    Args {
        job: String,
        /// The var (and its value) the bad value came from, when one did.
        var: Option<(String, String)>,
        args: Vec<String>,
        message: String,
    },
    #[error(
        "input var '{key}' is used by no job of this run ({jobs}){}; their vars: {vars} (see `rackbench info JOB`)",
        closest.as_ref().map_or(String::new(), |c| format!(": did you mean '{c}'?"))
    )]
    UnusedInput {
        key: String,
        jobs: String,
        closest: Option<String>,
        vars: String,
    },
    #[error("cannot create the metrics folder {path}: {message}")]
    Output { path: PathBuf, message: String },
    #[error(
        "job '{0}' is named more than once; one invocation runs a job once per iteration (use -n N for N runs)"
    )]
    Repeated(String),
}

/// A benchmark's refusal of a job's arguments: the var whose value it
/// refused when one did, else the whole argument list.
fn bad_args(var: Option<&(String, String)>, args: &[String], message: &str) -> String {
    match var {
        Some((name, value)) => format!("var '{name}' = '{value}': {message}"),
        None => format!("invalid benchmark arguments {args:?}: {message}"),
    }
}

/// The var whose value the benchmark's message quotes (`'many'`), the
/// user's input first: the var to fix.
fn culprit(
    resolved: &Resolved,
    input: &Map<String, Value>,
    message: &str,
) -> Option<(String, String)> {
    let quoted = |v: &String| !v.is_empty() && message.contains(&format!("'{v}'"));
    let mut vars: Vec<(&String, &String)> = resolved.values.iter().collect();
    vars.sort_by_key(|(k, _)| !input.contains_key(k.as_str()));
    vars.into_iter()
        .find(|(_, v)| quoted(v))
        .map(|(k, v)| (k.clone(), v.clone()))
}

/// A benchmark's argument error as one message: clap's `error: ` prefix
/// and its `--help` tip (which would name the benchmark's help, not the
/// job's) dropped.
fn args_message(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    let text = text.trim().strip_prefix("error: ").unwrap_or(text.trim());
    text.lines()
        .filter(|l| !l.starts_with("For more information, try"))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// Refuses an input key that no job of the run declares in any of its
/// roles (a typo would otherwise run every job with its default), naming
/// the closest var. A key another role uses (one `-i` for a job's server
/// and client) stays a warning.
fn check_input_used(planned: &[Planned<'_>], input: &Map<String, Value>) -> Result<(), PlanError> {
    let used: std::collections::BTreeSet<&str> = planned
        .iter()
        .flat_map(|p| {
            let roles = p.job.roles.iter().flat_map(|r| r.vars.iter());
            p.job.vars.iter().chain(roles).map(|v| v.name.as_str())
        })
        .collect();
    let Some(key) = input.keys().find(|k| !used.contains(k.as_str())) else {
        return Ok(());
    };
    let closest = crate::suggest::closest(key, used.iter().copied()).map(str::to_string);
    Err(PlanError::UnusedInput {
        key: key.clone(),
        jobs: planned
            .iter()
            .map(|p| p.job.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        closest,
        vars: used.into_iter().collect::<Vec<_>>().join(", "),
    })
}

fn plan<'a>(
    cat: &'a Catalogue,
    reg: &'a Registry,
    inv: &Invocation,
) -> Result<Vec<Planned<'a>>, PlanError> {
    let mut out = Vec::new();
    // A run is identified by run id, job, role, iteration, host and time
    // (the store's unique key), so a job named twice would be one run twice.
    let mut seen = std::collections::BTreeSet::new();
    for name in &inv.jobs {
        if !seen.insert(name.as_str()) {
            return Err(PlanError::Repeated(name.clone()));
        }
        let job = cat.get(name)?;
        let mut resolved = resolve(job, inv.role.as_deref(), &inv.input)?;
        resolved.hooks.extend(inv.extra_hooks.iter().cloned());
        for h in &resolved.hooks {
            hooks::validate(h).map_err(|e| PlanError::Hook {
                job: job.name.clone(),
                file: job.source.display().to_string(),
                message: e.to_string(),
            })?;
        }
        let workload = reg
            .get(&job.benchmark)
            .ok_or_else(|| PlanError::NoWorkload {
                job: job.name.clone(),
                file: job.source.display().to_string(),
                benchmark: job.benchmark.clone(),
                known: reg.names().join(", "),
            })?;
        workload.validate(&resolved.argv).map_err(|e| {
            let message = args_message(&e);
            PlanError::Args {
                job: job.name.clone(),
                var: culprit(&resolved, &inv.input, &message),
                args: resolved.argv.clone(),
                message,
            }
        })?;
        out.push(Planned {
            job,
            workload,
            resolved,
        });
    }
    check_input_used(&out, &inv.input)?;
    Ok(out)
}

/// Runs an invocation. Planning errors return `Err` before anything runs;
/// after that every job produces a report, successful or not.
pub fn execute(
    cat: &Catalogue,
    reg: &Registry,
    inv: &Invocation,
    cancel: &Cancel,
) -> Result<Summary, PlanError> {
    let planned = plan(cat, reg, inv)?;
    for p in &planned {
        for w in &p.resolved.warnings {
            eprintln!("warning: {w}");
        }
    }
    if inv.dry_run {
        print_dry_run(&planned);
        return Ok(Summary {
            run_id: None,
            out_dir: None,
            reports: vec![],
            all_succeeded: true,
            interrupted: false,
        });
    }
    let run_id = inv.run_id.clone().unwrap_or_else(new_run_id);
    let out_dir = inv.out_root.join(format!("benchmark_metrics_{run_id}"));
    std::fs::create_dir_all(&out_dir).map_err(|e| PlanError::Output {
        path: out_dir.clone(),
        message: e.to_string(),
    })?;
    let full_specs = machine::full_specs();
    let specs = serde_json::to_vec_pretty(&full_specs).expect("json");
    write_atomic(&out_dir.join("machine_specs.json"), &specs).map_err(|e| PlanError::Output {
        path: out_dir.clone(),
        message: e.to_string(),
    })?;
    let mut sink = Sink {
        store: open_store(inv, &out_dir),
        machine: MachineInfo::collect(),
        metadata: machine::cache_metadata(),
        // benchpress writes its system specs next to each job's metrics.
        system_specs: machine::benchpress_system_specs(&full_specs),
        pretty: std::io::stdout().is_terminal(),
        answer: None,
        summary: Summary {
            run_id: Some(run_id.clone()),
            out_dir: Some(out_dir.clone()),
            reports: vec![],
            all_succeeded: true,
            interrupted: false,
        },
        run_id,
        out_dir,
        inv,
        reg,
    };
    sink.summary.all_succeeded = sink.store.is_some() || inv.store.is_none();
    'jobs: for p in &planned {
        // benchpress' link to the run's folder, made by `run` (not by a
        // direct command's --report), as is the history.
        if inv.results_dir.is_some() {
            link_run(&inv.out_root, &p.job.name, &sink.run_id);
        }
        sink.job_done();
        for iteration in 1..=inv.iterations.max(1) {
            if cancel.reason() == Some(StopReason::Interrupted) {
                sink.summary.interrupted = true;
                break 'jobs;
            }
            cancel.reset();
            let ctx = RunContext {
                out_dir: sink.out_dir.clone(),
                artifacts: Some(sink.out_dir.clone()),
                job: p.job.name.clone(),
                iteration,
                cancel: cancel.clone(),
            };
            let started = jiff::ZonedDateTime::now();
            let clock = std::time::Instant::now();
            let redirect =
                (inv.stdout != Stdout::TextAndJson).then(crate::redirect::StdoutToStderr::new);
            let ended = run_one(p, &ctx, inv.disable_hooks);
            drop(redirect);
            let stop_is_end = ended.3;
            sink.iteration(p, iteration, &started, clock.elapsed().as_secs_f64(), ended);
            if cancel.reason() == Some(StopReason::Interrupted) {
                sink.summary.interrupted |= !stop_is_end;
                break 'jobs;
            }
        }
    }
    sink.job_done();
    Ok(sink.summary)
}

/// Where the iterations of an invocation go: the report files, stdout
/// (JSON or the summary), the results history and the store.
struct Sink<'a> {
    inv: &'a Invocation,
    reg: &'a Registry,
    run_id: String,
    out_dir: PathBuf,
    store: Option<Store>,
    machine: MachineInfo,
    metadata: std::collections::BTreeMap<String, String>,
    system_specs: Map<String, Value>,
    /// Pretty JSON on stdout (a terminal with `--json`).
    pretty: bool,
    /// The current job's iterations, for its terminal summary.
    answer: Option<crate::answer::JobRuns>,
    summary: Summary,
}

impl Sink<'_> {
    /// Writes one iteration's report and store row and prints it (its JSON,
    /// or keeps it for the job's summary).
    fn iteration(
        &mut self,
        p: &Planned<'_>,
        iteration: u32,
        started: &jiff::ZonedDateTime,
        secs: f64,
        (metrics, success, record, _): (Map<String, Value>, bool, Option<Record>, bool),
    ) {
        let inv = self.inv;
        let stamp = Stamp {
            machine: &self.machine,
            metadata: &self.metadata,
            run_id: &self.run_id,
            timestamp: inv.timestamp.unwrap_or_else(now_secs),
        };
        let report = Report::for_job(p.job, &p.resolved, stamp, metrics, success);
        if iteration == 1 {
            // `<job>_system_specs_<ts>.json`, the timestamp of the job's
            // first metrics file, as benchpress pairs them.
            write_system_specs(
                &self.out_dir,
                &p.job.name,
                &self.system_specs,
                &self.run_id,
                report.timestamp,
            );
        }
        let label = match &inv.iteration_label {
            Some(l) => l.clone(),
            None if inv.iterations > 1 => iteration.to_string(),
            None => "None".into(),
        };
        let path = self.out_dir.join(report.file_name(&label));
        if success && let Some(dir) = &inv.results_dir {
            let config = history_config(p, &self.run_id, report.timestamp, &label);
            if let Err(e) = save_history(dir, &p.job.name, started, &report.metrics, config) {
                eprintln!("warning: cannot save the run in the results history: {e}");
            }
        }
        let written = match write_atomic(&path, report.render(true).as_bytes()) {
            Ok(()) => {
                self.summary.reports.push(path.clone());
                true
            }
            Err(e) => {
                eprintln!("error: cannot write the report {}: {e}", path.display());
                self.summary.all_succeeded = false;
                false
            }
        };
        if inv.stdout == Stdout::Summary {
            self.answer
                .get_or_insert_with(|| crate::answer::JobRuns {
                    job: p.job.name.clone(),
                    benchmark: p.job.benchmark.clone(),
                    iterations: Vec::new(),
                })
                .iterations
                .push(crate::answer::Iteration {
                    metrics: report.metrics.as_object().cloned().unwrap_or_default(),
                    success,
                    secs,
                    report: written.then(|| path.clone()),
                });
        } else {
            println!("{}", report.render(self.pretty));
        }
        if let Some(s) = &self.store {
            let row = RunRow {
                id: 0,
                run_id: self.run_id.clone(),
                job: p.job.name.clone(),
                benchmark: p.job.benchmark.clone(),
                role: inv.role.clone(),
                iteration,
                timestamp: report.timestamp,
                success,
                hostname: self.machine.hostname.clone(),
                args: p.resolved.argv.clone(),
                machine: serde_json::to_value(&self.machine).expect("json"),
                metrics: report.metrics.clone(),
                report_path: Some(path.display().to_string()),
                artifacts_dir: Some(self.out_dir.display().to_string()),
                record,
                duration_secs: Some(secs),
            };
            if let Err(e) = s.record(&row) {
                eprintln!("error: {e}; the report is in {}", path.display());
                self.summary.all_succeeded = false;
            }
        }
        self.summary.all_succeeded &= success;
    }

    /// Prints the summary of the job whose iterations ended, on a terminal.
    fn job_done(&mut self) {
        if let Some(done) = self.answer.take()
            && self.inv.stdout == Stdout::Summary
        {
            let headlines = self
                .reg
                .get(&done.benchmark)
                .map_or(&[][..], |w| w.headlines());
            print!("{}", crate::answer::render(&done, headlines));
        }
    }
}

/// `--dry-run`: each planned job's argv, hooks and timeout.
fn print_dry_run(planned: &[Planned]) {
    for p in planned {
        println!("job {} (benchmark {}):", p.job.name, p.job.benchmark);
        println!("  argv: {}", shell_words::join(&p.resolved.argv));
        for h in &p.resolved.hooks {
            println!("  hook: {}", h.describe());
        }
        if let Some(t) = p.job.timeout {
            println!("  timeout: {}s", t.as_secs());
        }
    }
}

/// The results store, if the invocation has one that opens (one that does
/// not is said, and the reports are still written).
fn open_store(inv: &Invocation, out_dir: &Path) -> Option<Store> {
    match &inv.store {
        None => None,
        Some(p) => match Store::open(p) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!(
                    "warning: {e}; reports are still written to {}",
                    out_dir.display()
                );
                None
            }
        },
    }
}

/// `<job>_system_specs_<ts>.json`, the timestamp of the job's first
/// metrics file, as benchpress pairs them.
fn write_system_specs(
    out_dir: &Path,
    job: &str,
    system_specs: &Map<String, Value>,
    run_id: &str,
    timestamp: u64,
) {
    let mut specs = system_specs.clone();
    specs.insert("run_id".into(), json!(run_id));
    specs.insert("timestamp".into(), json!(timestamp));
    let f = out_dir.join(format!(
        "{}_system_specs_{}.json",
        job.replace(' ', "_"),
        timestamp
    ));
    let text = serde_json::to_string_pretty(&Value::Object(specs)).expect("json") + "\n";
    if let Err(e) = write_atomic(&f, text.as_bytes()) {
        eprintln!("warning: cannot write {}: {e}", f.display());
    }
}

/// benchpress' per-run link beside the metrics folder:
/// `benchmark_metrics_<job>_timestamp:<YYYYmmdd_HHMM>_<run_id>` (local
/// time) naming `benchmark_metrics_<run_id>`. A link that cannot be made
/// is said and the run goes on.
fn link_run(root: &Path, job: &str, run_id: &str) {
    let date = jiff::ZonedDateTime::now()
        .strftime("%Y%m%d_%H%M")
        .to_string();
    let link = root.join(format!("benchmark_metrics_{job}_timestamp:{date}_{run_id}"));
    if let Err(e) = std::os::unix::fs::symlink(format!("benchmark_metrics_{run_id}"), &link) {
        eprintln!("warning: cannot link {}: {e}", link.display());
    }
}

/// The job's settings saved with its result in the history (benchpress
/// saves the job's configuration with its run id, timestamp and
/// iteration).
fn history_config(p: &Planned<'_>, run_id: &str, timestamp: u64, label: &str) -> Value {
    json!({
        "name": p.job.name,
        "benchmark": p.job.benchmark,
        "description": p.job.description,
        "args": p.resolved.args,
        "hooks": p.resolved.hooks.iter().map(|h| json!({"hook": h.hook, "options": h.options})).collect::<Vec<_>>(),
        "uuid": run_id,
        "timestamp": timestamp,
        "iteration_num": label,
    })
}

/// benchpress' results history: `<dir>/<job>/<start time>.json` holding the
/// job's name, the start time (`%Y-%m-%dT%H:%M:%SZ`, benchpress' format of
/// the local time), its metrics and its settings. A name already taken
/// (two runs started in one second) gets `-2`, `-3`, ...
fn save_history(
    dir: &Path,
    job: &str,
    started: &jiff::ZonedDateTime,
    metrics: &Value,
    config: Value,
) -> std::io::Result<()> {
    let time = started.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let folder = dir.join(job.replace(' ', "_"));
    std::fs::create_dir_all(&folder)?;
    let mut path = folder.join(format!("{time}.json"));
    let mut n = 2;
    while path.exists() {
        path = folder.join(format!("{time}-{n}.json"));
        n += 1;
    }
    let v = json!({"job": job, "timestamp": time, "metrics": metrics, "config": config});
    let text = serde_json::to_string_pretty(&v).map_err(std::io::Error::other)? + "\n";
    write_atomic(&path, text.as_bytes())
}

/// How a direct benchmark command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectEnd {
    /// The workload ran and met its own definition of success.
    Succeeded,
    /// The workload ran (or failed) and did not.
    Failed,
    /// Ctrl-C stopped it.
    Interrupted,
}

/// Runs one benchmark command directly, as the upstream tool it replaces
/// would run: the workload prints its own text, relative output paths are
/// relative to the current directory, and nothing else is written (no
/// report JSON on stdout, no `benchmark_metrics_*` folder, no store row).
/// An argument error is returned before anything runs; an error while
/// running is printed on stderr and ends as [`DirectEnd::Failed`].
pub fn execute_direct(
    w: &dyn Workload,
    args: &[String],
    cancel: &Cancel,
) -> anyhow::Result<DirectEnd> {
    w.validate(args)?;
    let ctx = RunContext {
        out_dir: PathBuf::from("."),
        artifacts: None,
        job: w.name().to_string(),
        iteration: 1,
        cancel: cancel.clone(),
    };
    let result = w.run(&ctx, args);
    if let Ok(Outcome {
        record: Some(r), ..
    }) = &result
    {
        print_end(w, w.name(), r);
        for m in w.marks(r) {
            eprintln!("{}", crate::marks::line(w.name(), &m));
        }
    }
    if cancel.reason() == Some(StopReason::Interrupted) {
        return Ok(DirectEnd::Interrupted);
    }
    Ok(match result {
        Ok(o) if o.success => DirectEnd::Succeeded,
        Ok(_) => DirectEnd::Failed,
        Err(e) => {
            eprintln!("{}: {e:#}", w.name());
            DirectEnd::Failed
        }
    })
}

/// Prints what a run of `w` (named `name` in messages) prints once it is
/// over ([`Workload::format_end`]) on standard output and error; a failure
/// to print is a warning (the run and its record stand).
fn print_end(w: &dyn Workload, name: &str, record: &Record) {
    let (mut out, mut diag) = (std::io::stdout().lock(), std::io::stderr().lock());
    let printed = w
        .format_end(record, &mut out, &mut diag)
        .and_then(|()| Ok(std::io::Write::flush(&mut out)?));
    drop((out, diag));
    if let Err(e) = printed {
        eprintln!("warning: {name}: cannot print the end of the run's text: {e:#}");
    }
}

/// Hooks before, the workload under its timeout, hooks after (reverse order,
/// always). Returns the metrics, the success flag, the workload's record
/// and whether a Ctrl-C was the workload's normal end.
fn run_one(
    p: &Planned<'_>,
    ctx: &RunContext,
    disable_hooks: bool,
) -> (Map<String, Value>, bool, Option<Record>, bool) {
    let hctx = HookContext {
        out_dir: ctx.out_dir.clone(),
        job: ctx.job.clone(),
        iteration: ctx.iteration,
    };
    let mut started: Vec<(String, Box<dyn Hook>)> = Vec::new();
    let mut failure: Option<String> = None;
    if disable_hooks && !p.resolved.hooks.is_empty() {
        eprintln!("Hooks globally disabled as requested");
    }
    let run_hooks: &[HookSpec] = if disable_hooks {
        &[]
    } else {
        &p.resolved.hooks
    };
    for spec in run_hooks {
        let built = hooks::build(spec);
        match built.and_then(|mut h| h.before(&hctx).map(|_| h)) {
            Ok(h) => started.push((spec.hook.clone(), h)),
            Err(e) => {
                failure = Some(format!("hook '{}' before the job: {e}", spec.hook));
                break;
            }
        }
    }
    let mut metrics = Map::new();
    let mut success = false;
    let mut record = None;
    let mut stop_is_end = false;
    if failure.is_none() {
        eprintln!(
            "running job {} (iteration {}): {} {}",
            p.job.name,
            ctx.iteration,
            p.job.benchmark,
            shell_words::join(&p.resolved.argv)
        );
        let watchdog = p
            .job
            .timeout
            .map(|t| Watchdog::start(t, ctx.cancel.clone()));
        let result = p.workload.run(ctx, &p.resolved.argv);
        drop(watchdog);
        match result {
            Ok(o) => {
                success = o.success;
                stop_is_end = o.stop_is_end;
                if let Some(r) = &o.record {
                    print_end(p.workload, &p.job.name, r);
                    match p.workload.metrics(r) {
                        Ok(m) => metrics.extend(m),
                        Err(e) => {
                            failure =
                                Some(format!("cannot derive the metrics from the record: {e:#}"))
                        }
                    }
                    let marks = p.workload.marks(r);
                    for m in &marks {
                        eprintln!("{}", crate::marks::line(&p.job.name, m));
                    }
                    if !marks.is_empty() {
                        metrics.insert(crate::marks::KEY.into(), json!(marks));
                    }
                }
                record = o.record;
            }
            Err(e) => failure = Some(format!("{e:#}")),
        }
        match ctx.cancel.reason() {
            Some(StopReason::Interrupted) if stop_is_end => {}
            Some(StopReason::Interrupted) => {
                success = false;
                metrics.insert("interrupted".into(), json!(true));
            }
            Some(StopReason::TimedOut) => {
                success = false;
                let t = p.job.timeout.unwrap_or_default().as_secs();
                failure.get_or_insert(format!("timed out after {t} s (the job's timeout)"));
                metrics.insert("timed_out".into(), json!(true));
            }
            None => {}
        }
    }
    let mut hook_summaries = Map::new();
    for (name, mut h) in started.into_iter().rev() {
        match h.after(&hctx) {
            Ok(v) => {
                hook_summaries.insert(name, v);
            }
            Err(e) => {
                eprintln!("warning: hook '{name}' after the job: {e}");
                hook_summaries.insert(name, json!({ "error": e.to_string() }));
            }
        }
    }
    if !hook_summaries.is_empty() {
        metrics.insert("hooks".into(), Value::Object(hook_summaries));
    }
    if let Some(f) = failure {
        eprintln!("job {} failed: {f}", p.job.name);
        metrics.insert("error".into(), json!(f));
        success = false;
    }
    (metrics, success, record, stop_is_end)
}

/// Raises the stop flag when a job runs past its timeout.
struct Watchdog {
    done: Option<std::sync::mpsc::Sender<()>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(timeout: Duration, cancel: Cancel) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(timeout) {
                eprintln!("job timeout of {}s reached: stopping", timeout.as_secs());
                cancel.stop(StopReason::TimedOut);
            }
        });
        Watchdog {
            done: Some(tx),
            handle: Some(handle),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl direction::Directions for Registry {
    fn tables(&self, benchmark: &str) -> &'static [&'static [direction::Rule]] {
        self.get(benchmark).map_or(&[], |w| w.directions())
    }
}

/// The results side (the store, comparisons, the page) learns what it
/// shows of each workload's runs from the workloads here.
impl results::Shown for Registry {
    fn headlines(&self, benchmark: &str) -> &'static [direction::Headline] {
        self.get(benchmark).map_or(&[], |w| w.headlines())
    }
    fn percentiles_title(&self, benchmark: &str) -> &'static str {
        self.get(benchmark)
            .map_or(results::shown::DEFAULT_PERCENTILES_TITLE, |w| {
                w.percentiles_title()
            })
    }
    fn charts(&self, benchmark: &str, record: &Record) -> Vec<crate::page_chart::PageChart> {
        self.get(benchmark)
            .map_or_else(Vec::new, |w| w.charts(record))
    }
    fn history_charts(
        &self,
        benchmark: &str,
        job: &str,
        runs: &[&RunRow],
    ) -> Vec<crate::page_chart::PageChart> {
        self.get(benchmark)
            .map_or_else(Vec::new, |w| w.history_charts(job, runs))
    }
}
