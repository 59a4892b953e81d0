//! benchpress' own job files: `-j/--jobs FILE` (a `jobs.yml`) and
//! `-b/--benchmarks FILE` (a `benchmarks.yml`), read into the job model of
//! [`crate::job`].
//!
//! A jobs file is a YAML list of jobs:
//!
//! ```yaml
//! - name: feedsim_quick            # a word
//!   benchmark: feedsim             # a benchmark of the benchmarks file
//!   description: a short FeedSim run
//!   args: ['-p {port}', '-q 2,4']  # or a mapping {key: value} = --key value
//!   vars: ['port=11222']           # `name` is required, `name=default` optional
//!   hooks: [{hook: cpu-mpstat, options: {args: ['-u', '1']}}]
//!   tags: {scope: [app], component: [cpu]}
//!   timeout: 600                   # seconds
//!   roles:                         # instead of args/vars; then `-r ROLE`
//!     server: {args: [...], vars: [...]}
//!     client: {args: [...], vars: [...]}
//! ```
//!
//! and a benchmarks file maps benchmark names to `parser`, `path`,
//! `install_script`, `cleanup_script`, `tags`, `metrics`, `roles` and
//! `check_returncode`. The workload that runs is always rackbench's own: a
//! benchmark is usable when rackbench implements it ([`workload_for`]);
//! its `path` and scripts name upstream's programs and are not run. Without
//! `-b`, the benchmarks are upstream's for the workloads rackbench has
//! (those the workloads declare) plus each rackbench workload under its
//! own name. Which upstream benchmark a workload runs, and how its args
//! translate, the workload declares ([`crate::Workload::benchpress`]).
//!
//! As benchpress, `-j` replaces the default jobs (the embedded catalogue);
//! `--jobs-dir` folders still add theirs. A key benchpress does not know, or
//! one whose effect rackbench would not reproduce (`tee_output`, `stdout`,
//! `tolerances`, `tests`, `check_returncode: false`), is an error naming the
//! file, line and key.

use crate::job::{
    Baseline, Catalogue, HookSpec, Job, JobError, Role, Unrunnable, VarDecl, placeholders,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use yaml_rust2::Yaml;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A problem with a benchpress jobs or benchmarks file, naming the file and,
/// where known, the line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {what} file {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    At {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    #[error(transparent)]
    Job(#[from] JobError),
}

fn at(path: &Path, line: usize, message: impl Into<String>) -> Error {
    Error::At {
        path: path.into(),
        line: Some(line),
        message: message.into(),
    }
}

/// How a benchpress benchmark's args become its rackbench workload's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Translate {
    /// The workload takes the upstream program's flags as they are.
    Same,
    /// The upstream script's flag `from` is the workload's `to`; without
    /// it, `absent` goes first (a script's default the workload does not
    /// share).
    RenameFlag {
        from: &'static str,
        to: &'static str,
        absent: &'static str,
    },
    /// Arguments the upstream script always gives: for a command (an args'
    /// first word) in the list, `arg` is appended unless the args already
    /// give `flag` (alone or as `flag=`).
    Defaults(&'static [DefaultArg]),
}

/// One of [`Translate::Defaults`]' arguments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DefaultArg {
    pub commands: &'static [&'static str],
    pub flag: &'static str,
    pub arg: &'static str,
}

/// A benchmark of benchpress' benchmarks.yml that a rackbench workload
/// runs, as the workload declares it ([`crate::Workload::benchpress`]).
#[derive(Debug, Clone, Copy)]
pub struct Upstream {
    /// Its name in benchpress' benchmarks.yml (and its parser's).
    pub name: &'static str,
    /// The rackbench workload that runs it.
    pub workload: &'static str,
    pub translate: Translate,
    /// Its tags in upstream's benchmarks.yml.
    pub scope: &'static [&'static str],
    pub component: &'static [&'static str],
    /// benchpress' named suites (`-b NAME`) it belongs to besides the
    /// default one.
    pub suites: &'static [&'static str],
}

/// The registry's workloads, as benchpress files see them: their names
/// and the upstream benchmarks they run.
#[derive(Debug, Clone, Default)]
pub struct Workloads<'a> {
    pub names: Vec<&'a str>,
    pub upstream: Vec<Upstream>,
}

impl Workloads<'_> {
    fn has(&self, name: &str) -> bool {
        self.names.contains(&name)
    }

    /// The workloads of benchpress suite `suite`.
    fn of_suite(&self, suite: &str) -> Vec<&'static str> {
        self.upstream
            .iter()
            .filter(|u| u.suites.contains(&suite))
            .map(|u| u.workload)
            .collect()
    }
}

/// benchpress' alternative suites (`-b NAME`), none of which rackbench has.
const ALT_SUITES: &[(&str, &str)] = &[
    ("wdl", "wdl_bench"),
    ("system", "schbench and syscall"),
    ("internal", "internal benchmarks"),
];

/// benchpress' AI suite (`-b ai`, its benchmarks_ai.yml and jobs_ai.yml):
/// it selects the jobs of the workloads whose benchmarks are in it.
const AI_SUITE: &str = "ai";

/// The rackbench workload for benchpress benchmark `name`, given the
/// workloads this binary has; None when rackbench does not implement it.
pub fn workload_for(name: &str, workloads: &Workloads) -> Option<String> {
    workload_and_translation(name, workloads).map(|(w, _)| w)
}

fn workload_and_translation(name: &str, workloads: &Workloads) -> Option<(String, Translate)> {
    if let Some(u) = workloads.upstream.iter().find(|u| u.name == name) {
        return workloads
            .has(u.workload)
            .then(|| (u.workload.to_string(), u.translate));
    }
    workloads
        .has(name)
        .then(|| (name.to_string(), Translate::Same))
}

/// The benchpress benchmark names rackbench implements, sorted.
pub fn implemented(workloads: &Workloads) -> Vec<String> {
    let mut v: Vec<String> = workloads
        .upstream
        .iter()
        .filter(|u| workloads.has(u.workload))
        .map(|u| u.name.to_string())
        .chain(workloads.names.iter().map(|w| w.to_string()))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The job catalogue for the command line: the embedded jobs and
/// `jobs_dirs` as [`Catalogue::load`], or with `jobs_file` (`-j`) that
/// file's jobs instead of the embedded ones, naming the benchmarks of
/// `benchmarks_file` (`-b`). `workloads` are the registry's names.
pub fn catalogue(
    embedded: &[(&str, &str)],
    jobs_dirs: &[PathBuf],
    jobs_file: Option<&Path>,
    benchmarks_file: Option<&Path>,
    workloads: &Workloads,
) -> Result<Catalogue, Error> {
    // `-b ai` names a suite, not a file (unless a file of that name exists).
    if let Some(b) = benchmarks_file
        && b == Path::new(AI_SUITE)
        && !b.exists()
    {
        let suite = workloads.of_suite(AI_SUITE);
        if let Some(j) = jobs_file {
            let benchmarks: BTreeMap<String, Benchmark> = default_benchmarks(workloads)
                .into_iter()
                .filter(|(name, _)| suite.contains(&name.as_str()))
                .collect();
            let mut cat = Catalogue::load(&[], jobs_dirs)?;
            for job in load_jobs(j, &benchmarks, false, workloads)? {
                job.add_to(&mut cat)?;
            }
            return Ok(cat);
        }
        let mut cat = Catalogue::load(embedded, jobs_dirs)?;
        cat.retain(|j| suite.contains(&j.benchmark.as_str()));
        return Ok(cat);
    }
    let Some(jobs_file) = jobs_file else {
        if let Some(b) = benchmarks_file {
            // Read and check it, so a bad file is named either way.
            load_benchmarks(b, workloads)?;
            return Err(Error::At {
                path: b.into(),
                line: None,
                message: "-b/--benchmarks names the benchmarks of a -j/--jobs file's jobs; rackbench's own jobs (TOML) name its workloads directly, so give -j FILE too".into(),
            });
        }
        return Ok(Catalogue::load(embedded, jobs_dirs)?);
    };
    let benchmarks = match benchmarks_file {
        Some(b) => load_benchmarks(b, workloads)?,
        None => default_benchmarks(workloads),
    };
    let jobs = load_jobs(jobs_file, &benchmarks, benchmarks_file.is_some(), workloads)?;
    // benchpress scores a job by its name (its baseline table); the embedded
    // job of the same name and workload carries that baseline.
    let defaults = Catalogue::load(embedded, &[])?;
    let mut cat = Catalogue::load(&[], jobs_dirs)?;
    for loaded in jobs {
        match loaded {
            Loaded::Job(mut j) => {
                if let Ok(d) = defaults.get(&j.name)
                    && d.benchmark == j.benchmark
                {
                    j.baseline = d.baseline.clone();
                }
                cat.add(*j)?;
            }
            u @ Loaded::Unrunnable(_) => u.add_to(&mut cat)?,
        }
    }
    Ok(cat)
}

/// A benchmark of a benchmarks file (or of the defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct Benchmark {
    pub name: String,
    pub scope: Vec<String>,
    pub component: Vec<String>,
    /// Where it is defined (file and line), for messages.
    pub defined_at: String,
}

/// Upstream's benchmarks rackbench implements plus each workload by name.
pub fn default_benchmarks(workloads: &Workloads) -> BTreeMap<String, Benchmark> {
    let mut out = BTreeMap::new();
    for w in &workloads.names {
        out.insert(
            w.to_string(),
            Benchmark {
                name: w.to_string(),
                scope: vec![],
                component: vec![],
                defined_at: "rackbench's default benchmarks".into(),
            },
        );
    }
    for u in &workloads.upstream {
        if workloads.has(u.workload) {
            out.insert(
                u.name.to_string(),
                Benchmark {
                    name: u.name.to_string(),
                    scope: u.scope.iter().map(|s| s.to_string()).collect(),
                    component: u.component.iter().map(|s| s.to_string()).collect(),
                    defined_at: "rackbench's default benchmarks".into(),
                },
            );
        }
    }
    out
}

const BENCHMARK_KEYS: &[&str] = &[
    "parser",
    "install_script",
    "cleanup_script",
    "path",
    "tags",
    "metrics",
    "roles",
    "check_returncode",
];

/// Reads a benchmarks file (`-b`). Benchmarks rackbench does not implement
/// are kept (a job naming one is the error), their keys checked all the same.
pub fn load_benchmarks(
    path: &Path,
    workloads: &Workloads,
) -> Result<BTreeMap<String, Benchmark>, Error> {
    if !path.exists()
        && let Some((suite, holds)) = ALT_SUITES.iter().find(|(s, _)| Path::new(s) == path)
    {
        return Err(Error::At {
            path: path.into(),
            line: None,
            message: format!(
                "benchpress' alternative suite '{suite}' ({holds}) is not one rackbench implements; it implements: {}",
                implemented(workloads).join(", ")
            ),
        });
    }
    let root = read_yaml(path, "benchmarks")?;
    let Node::Map(entries) = &root.node else {
        return Err(at(
            path,
            root.line,
            format!(
                "expected a mapping of benchmark names to their settings (as benchpress' benchmarks.yml), found {}",
                root.node.kind()
            ),
        ));
    };
    let mut out = BTreeMap::new();
    for (k, v) in entries {
        let name = string(path, k, "a benchmark name")?;
        let Node::Map(fields) = &v.node else {
            return Err(at(
                path,
                v.line,
                format!(
                    "benchmark '{name}': expected a mapping of its settings, found {}",
                    v.node.kind()
                ),
            ));
        };
        let ctx = |m: String| format!("benchmark '{name}': {m}");
        let mut tags = (vec![], vec![]);
        for (fk, fv) in fields {
            let key = string(path, fk, "a key")?;
            match key.as_str() {
                "parser" => {
                    let parser = string(path, fv, "the parser's name")?;
                    if workloads.upstream.iter().any(|u| u.name == name) {
                        // Upstream pairs each benchmark with its own parser.
                        if parser != name {
                            return Err(at(
                                path,
                                fv.line,
                                ctx(format!(
                                    "parser '{parser}': rackbench's {name} reports the metrics of benchpress' '{name}' parser, not another's"
                                )),
                            ));
                        }
                    }
                }
                "install_script" | "cleanup_script" | "path" => {
                    string(path, fv, &format!("{key}, a path"))?;
                }
                "metrics" | "roles" => {
                    string_list(path, fv, &ctx(key.clone()))?;
                }
                "check_returncode" => match scalar_json(fv) {
                    Some(serde_json::Value::Bool(true)) => {}
                    Some(serde_json::Value::Bool(false)) => {
                        return Err(at(path, fv.line, ctx(
                            "check_returncode: false is not supported: a rackbench workload that fails is a failed run".into(),
                        )));
                    }
                    _ => {
                        return Err(at(
                            path,
                            fv.line,
                            ctx("check_returncode must be true or false".into()),
                        ));
                    }
                },
                "tags" => tags = tag_groups(path, fv, &ctx("tags".into()))?,
                other => {
                    return Err(at(
                        path,
                        fk.line,
                        ctx(format!(
                            "unknown key '{other}'; a benchmark's keys are: {}",
                            BENCHMARK_KEYS.join(", ")
                        )),
                    ));
                }
            }
        }
        if out.contains_key(&name) {
            return Err(at(
                path,
                k.line,
                format!("benchmark '{name}' is defined twice"),
            ));
        }
        out.insert(
            name.clone(),
            Benchmark {
                name,
                scope: tags.0,
                component: tags.1,
                defined_at: format!("{}:{}", path.display(), k.line),
            },
        );
    }
    Ok(out)
}

const JOB_KEYS: &[&str] = &[
    "name",
    "benchmark",
    "description",
    "args",
    "vars",
    "roles",
    "hooks",
    "tags",
    "timeout",
];

/// benchpress job keys whose effect rackbench does not reproduce.
const UNSUPPORTED_JOB_KEYS: &[(&str, &str)] = &[
    (
        "tee_output",
        "the workload's output is already on the terminal and in the report",
    ),
    (
        "stdout",
        "rackbench's workloads report their own metrics; none is read from a file",
    ),
    (
        "tolerances",
        "`rackbench results compare` judges differences by their statistics",
    ),
    ("tests", "benchpress skips such jobs; so would nothing here"),
];

/// A job of a jobs file: one rackbench runs, or one it lists but cannot
/// run (its benchmark is not one rackbench implements).
#[derive(Debug, Clone)]
pub enum Loaded {
    Job(Box<Job>),
    Unrunnable(Unrunnable),
}

impl Loaded {
    pub fn name(&self) -> &str {
        match self {
            Loaded::Job(j) => &j.name,
            Loaded::Unrunnable(u) => &u.name,
        }
    }

    fn add_to(self, cat: &mut Catalogue) -> Result<(), JobError> {
        match self {
            Loaded::Job(j) => cat.add(*j),
            Loaded::Unrunnable(u) => cat.add_unrunnable(u),
        }
    }
}

/// Reads a jobs file (`-j`) against `benchmarks` (`from_file`: read from a
/// `-b` file, where a job naming a benchmark it lacks is an error, as
/// benchpress fails on it; without `-b`, benchpress' own benchmarks file
/// defines upstream's benchmarks, so a job naming one rackbench lacks is
/// kept as a job it cannot run).
pub fn load_jobs(
    path: &Path,
    benchmarks: &BTreeMap<String, Benchmark>,
    from_file: bool,
    workloads: &Workloads,
) -> Result<Vec<Loaded>, Error> {
    let root = read_yaml(path, "jobs")?;
    let Node::Seq(items) = &root.node else {
        return Err(at(
            path,
            root.line,
            format!(
                "expected a list of jobs (as benchpress' jobs.yml), found {}",
                root.node.kind()
            ),
        ));
    };
    let mut jobs: Vec<Loaded> = Vec::new();
    let mut lines: BTreeMap<String, usize> = BTreeMap::new();
    for item in items {
        let j = job(path, item, benchmarks, from_file, workloads)?;
        if let Some(first) = lines.get(j.name()) {
            return Err(at(
                path,
                item.line,
                format!(
                    "job '{}' is defined twice (first at line {first})",
                    j.name()
                ),
            ));
        }
        lines.insert(j.name().to_string(), item.line);
        jobs.push(j);
    }
    Ok(jobs)
}

/// benchpress' job keys, including those rackbench refuses on a job it runs.
fn benchpress_job_key(key: &str) -> bool {
    JOB_KEYS.contains(&key) || UNSUPPORTED_JOB_KEYS.iter().any(|(k, _)| *k == key)
}

fn job(
    path: &Path,
    item: &Marked,
    benchmarks: &BTreeMap<String, Benchmark>,
    from_file: bool,
    workloads: &Workloads,
) -> Result<Loaded, Error> {
    let Node::Map(fields) = &item.node else {
        return Err(at(
            path,
            item.line,
            format!(
                "a job is a mapping (name, benchmark, description, args, ...), found {}",
                item.node.kind()
            ),
        ));
    };
    let get = |k: &str| fields.iter().find(|(fk, _)| fk.node.text() == Some(k));
    let Some((_, name_v)) = get("name") else {
        return Err(at(path, item.line, "a job has no 'name'"));
    };
    let name = string(path, name_v, "the job's name")?;
    if name.trim().is_empty() || name.contains(char::is_whitespace) {
        return Err(at(
            path,
            name_v.line,
            format!("job name '{name}' must be a non-empty word"),
        ));
    }
    let ctx = |m: String| format!("job '{name}': {m}");
    check_job_keys(path, fields, &ctx)?;
    let Some((_, bench_v)) = get("benchmark") else {
        return Err(at(path, item.line, ctx("no 'benchmark'".into())));
    };
    let bench_name = string(path, bench_v, "the benchmark's name")?;
    let description = match get("description") {
        Some((_, v)) => string(path, v, "the description")?.trim_end().to_string(),
        None => {
            return Err(at(
                path,
                item.line,
                ctx("no 'description' (benchpress requires one)".into()),
            ));
        }
    };
    let bench = benchmarks.get(&bench_name);
    if bench.is_none() && from_file {
        let known: Vec<&str> = benchmarks.keys().map(String::as_str).collect();
        return Err(at(
            path,
            bench_v.line,
            ctx(format!(
                "benchmark '{bench_name}' is not defined in the benchmarks file (-b), whose benchmarks are: {}",
                known.join(", ")
            )),
        ));
    }
    let job_tags = match get("tags") {
        Some((_, v)) => tag_groups(path, v, &ctx("tags".into()))?,
        None => (vec![], vec![]),
    };
    let runnable = workload_and_translation(&bench_name, workloads);
    let (Some(bench), Some((workload, translate))) = (bench, runnable) else {
        // A job rackbench cannot run: listed, refused when run.
        let scope = bench.map(|b| b.scope.clone()).unwrap_or_default();
        let component = bench.map(|b| b.component.clone()).unwrap_or_default();
        return Ok(Loaded::Unrunnable(Unrunnable {
            name: name.clone(),
            benchmark: bench_name.clone(),
            description,
            tags: flat_tags((scope, component), job_tags),
            why: unrunnable_why(bench, &bench_name, workloads),
            at: format!("{}:{}", path.display(), item.line),
        }));
    };
    check_unsupported_keys(path, fields, &ctx)?;
    let args = match get("args") {
        Some((_, v)) => arg_templates(path, v, &ctx("args".into()))?,
        None => vec![],
    };
    let vars = match get("vars") {
        Some((_, v)) => var_decls(path, v, &ctx("vars".into()))?,
        None => vec![],
    };
    let roles = match get("roles") {
        Some((rk, rv)) => {
            if get("args").is_some() || get("vars").is_some() {
                return Err(at(path, rk.line, ctx(
                    "has roles and job-level args/vars: benchpress runs a role's own args and vars only, so give them under each role".into(),
                )));
            }
            roles(path, rv, translate, &ctx)?
        }
        None => Vec::new(),
    };
    let args = if roles.is_empty() {
        translate_args(translate, args)
    } else {
        args
    };
    check_placeholders(path, item.line, &args, &vars, &ctx("arg".into()))?;
    let hooks = match get("hooks") {
        Some((_, v)) => hook_specs(path, v, &ctx("hooks".into()))?,
        None => vec![],
    };
    let flat = flat_tags((bench.scope.clone(), bench.component.clone()), job_tags);
    let timeout = match get("timeout") {
        None => None,
        Some((_, v)) => Some(timeout(path, v, &ctx)?),
    };
    Ok(Loaded::Job(Box::new(Job {
        name,
        benchmark: workload,
        description,
        tags: flat,
        args,
        vars,
        hooks,
        roles,
        timeout,
        baseline: None::<Baseline>,
        source: path.into(),
    })))
}

/// A job's keys: each one benchpress knows, none twice.
fn check_job_keys(
    path: &Path,
    fields: &[(Marked, Marked)],
    ctx: &dyn Fn(String) -> String,
) -> Result<(), Error> {
    for (k, _) in fields {
        let key = string(path, k, "a key")?;
        if !benchpress_job_key(&key) {
            return Err(at(
                path,
                k.line,
                ctx(format!(
                    "unknown key '{key}'; a job's keys are: {}",
                    JOB_KEYS.join(", ")
                )),
            ));
        }
    }
    let dups = fields.iter().enumerate().find(|(i, (k, _))| {
        fields[..*i]
            .iter()
            .any(|(p, _)| p.node.text() == k.node.text())
    });
    if let Some((_, (k, _))) = dups {
        return Err(at(
            path,
            k.line,
            ctx(format!(
                "key '{}' is given twice",
                k.node.text().unwrap_or("")
            )),
        ));
    }
    Ok(())
}

/// Why a job's benchmark cannot be run, with the close names.
fn unrunnable_why(bench: Option<&Benchmark>, bench_name: &str, workloads: &Workloads) -> String {
    let defined = bench
        .map(|b| format!(" (defined at {})", b.defined_at))
        .unwrap_or_default();
    let close = implemented(workloads)
        .into_iter()
        .filter(|w| strsim::levenshtein(w, bench_name) <= 2)
        .collect::<Vec<_>>();
    let hint = if close.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", close.join(", "))
    };
    format!(
        "its benchmark '{bench_name}'{defined} is not one rackbench implements{hint}; it implements: {}",
        implemented(workloads).join(", ")
    )
}

/// The benchpress job keys rackbench refuses on a job it runs.
fn check_unsupported_keys(
    path: &Path,
    fields: &[(Marked, Marked)],
    ctx: &dyn Fn(String) -> String,
) -> Result<(), Error> {
    for (k, _) in fields {
        let key = k.node.text().unwrap_or_default();
        if let Some((_, why)) = UNSUPPORTED_JOB_KEYS.iter().find(|(u, _)| *u == key) {
            return Err(at(
                path,
                k.line,
                ctx(format!("key '{key}' is not supported by rackbench ({why})")),
            ));
        }
    }
    Ok(())
}

/// A job's `roles`: each role's args (translated) and vars.
fn roles(
    path: &Path,
    rv: &Marked,
    translate: Translate,
    ctx: &dyn Fn(String) -> String,
) -> Result<Vec<Role>, Error> {
    let mut roles = Vec::new();
    let Node::Map(rs) = &rv.node else {
        return Err(at(
            path,
            rv.line,
            ctx(format!(
                "roles: expected a mapping of role names to {{args, vars}}, found {}",
                rv.node.kind()
            )),
        ));
    };
    for (rk, rv) in rs {
        let role = string(path, rk, "a role's name")?;
        let rctx = |m: &str| ctx(format!("role '{role}': {m}"));
        let mut r = role_body(path, &role, rv, &rctx)?;
        if roles.iter().any(|x: &Role| x.name == role) {
            return Err(at(
                path,
                rk.line,
                ctx(format!("role '{role}' is defined twice")),
            ));
        }
        r.args = translate_args(translate, r.args);
        check_placeholders(path, rv.line, &r.args, &r.vars, &rctx("arg"))?;
        roles.push(r);
    }
    Ok(roles)
}

/// One role's args and vars (an empty role has none).
fn role_body(
    path: &Path,
    role: &str,
    rv: &Marked,
    rctx: &dyn Fn(&str) -> String,
) -> Result<Role, Error> {
    let mut r = Role {
        name: role.to_string(),
        args: vec![],
        vars: vec![],
        hooks: vec![],
    };
    match &rv.node {
        Node::Map(rf) => {
            for (k, v) in rf {
                match string(path, k, "a key")?.as_str() {
                    "args" => r.args = arg_templates(path, v, &rctx("args"))?,
                    "vars" => r.vars = var_decls(path, v, &rctx("vars"))?,
                    other => {
                        return Err(at(
                            path,
                            k.line,
                            rctx(&format!(
                                "unknown key '{other}'; a role's keys are: args, vars"
                            )),
                        ));
                    }
                }
            }
        }
        Node::Scalar { text, .. } if text.is_empty() => {}
        other => {
            return Err(at(
                path,
                rv.line,
                rctx(&format!(
                    "expected a mapping with args and vars, found {}",
                    other.kind()
                )),
            ));
        }
    }
    Ok(r)
}

/// A job's `timeout`: a positive whole number of seconds.
fn timeout(
    path: &Path,
    v: &Marked,
    ctx: &dyn Fn(String) -> String,
) -> Result<std::time::Duration, Error> {
    match scalar_json(v) {
        Some(serde_json::Value::Number(n)) if n.as_u64().is_some_and(|s| s > 0) => Ok(
            std::time::Duration::from_secs(n.as_u64().unwrap_or_default()),
        ),
        _ => Err(at(
            path,
            v.line,
            ctx(format!(
                "timeout must be a positive whole number of seconds, got '{}'",
                v.node.text().unwrap_or("(not a number)")
            )),
        )),
    }
}

/// benchpress' tags of a job: its benchmark's scope and component tags
/// and its own, each group sorted, as one list without repeats.
fn flat_tags(bench: (Vec<String>, Vec<String>), job: (Vec<String>, Vec<String>)) -> Vec<String> {
    let mut flat = Vec::new();
    for mut group in [[bench.0, job.0].concat(), [bench.1, job.1].concat()] {
        group.sort();
        group.dedup();
        for t in group {
            if !flat.contains(&t) {
                flat.push(t);
            }
        }
    }
    flat
}

/// Rewrites a template list for `translate`.
fn translate_args(translate: Translate, args: Vec<String>) -> Vec<String> {
    match translate {
        Translate::Same => args,
        Translate::Defaults(defaults) => {
            let mut args = args;
            let gives = |flag: &str, args: &[String]| {
                args.iter().any(|a| {
                    a.split_whitespace()
                        .any(|w| w == flag || w.starts_with(&format!("{flag}=")))
                })
            };
            let command = args
                .first()
                .and_then(|a| a.split_whitespace().next())
                .map(str::to_string);
            for d in defaults {
                if command.as_deref().is_some_and(|c| d.commands.contains(&c))
                    && !gives(d.flag, &args)
                {
                    args.push(d.arg.into());
                }
            }
            args
        }
        Translate::RenameFlag { from, to, absent } => {
            let mut seen = false;
            let mut out: Vec<String> = args
                .into_iter()
                .map(|a| {
                    let words: Vec<&str> = a.split_whitespace().collect();
                    if words.contains(&from) {
                        seen = true;
                        words
                            .iter()
                            .map(|w| if *w == from { to } else { w })
                            .collect::<Vec<_>>()
                            .join(" ")
                    } else {
                        a
                    }
                })
                .collect();
            if !seen {
                out.insert(0, absent.into());
            }
            out
        }
    }
}

/// benchpress splits args at whitespace only, so quotes and backslashes
/// are literal there: they are escaped for rackbench's shell-style split.
fn literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | '\'' | '"') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn arg_templates(path: &Path, v: &Marked, what: &str) -> Result<Vec<String>, Error> {
    let out = match &v.node {
        Node::Seq(items) => items
            .iter()
            .map(|i| string(path, i, &format!("{what}: an argument")).map(|s| literal(&s)))
            .collect::<Result<Vec<_>, _>>()?,
        // benchpress turns {key: value} into `--key value` (`--key` alone
        // for a null value).
        Node::Map(entries) => {
            let mut out = Vec::new();
            for (k, val) in entries {
                let key = string(path, k, &format!("{what}: a key"))?;
                out.push(literal(&format!("--{key}")));
                match scalar_json(val) {
                    Some(serde_json::Value::Null) => {}
                    Some(serde_json::Value::Bool(b)) => {
                        out.push(if b { "True" } else { "False" }.into())
                    }
                    _ => out.push(literal(&string(
                        path,
                        val,
                        &format!("{what}: the value of '{key}'"),
                    )?)),
                }
            }
            out
        }
        Node::Scalar { text, .. } if text.is_empty() => vec![],
        other => {
            return Err(at(
                path,
                v.line,
                format!(
                    "{what}: expected a list of arguments or a mapping, found {}",
                    other.kind()
                ),
            ));
        }
    };
    for a in &out {
        if a.contains("{{") || a.contains("}}") {
            return Err(at(
                path,
                v.line,
                format!("{what}: '{a}': escaped braces ({{{{ }}}}) are not supported"),
            ));
        }
    }
    Ok(out)
}

fn var_decls(path: &Path, v: &Marked, what: &str) -> Result<Vec<VarDecl>, Error> {
    let mut out: Vec<VarDecl> = Vec::new();
    let items = match &v.node {
        Node::Seq(items) => items.as_slice(),
        Node::Scalar { text, .. } if text.is_empty() => &[],
        other => {
            return Err(at(
                path,
                v.line,
                format!(
                    "{what}: expected a list of `name` or `name=default`, found {}",
                    other.kind()
                ),
            ));
        }
    };
    for i in items {
        let s = string(path, i, &format!("{what}: a var"))?;
        let (name, default) = match s.split_once('=') {
            Some((n, d)) => (n.trim(), Some(d)),
            None => (s.trim(), None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(at(
                path,
                i.line,
                format!(
                    "{what}: '{s}': a var is `name` or `name=default`, name made of letters, digits and _"
                ),
            ));
        }
        if default.is_some_and(|d| d.contains('=')) {
            return Err(at(
                path,
                i.line,
                format!(
                    "{what}: '{s}': benchpress cuts a default at its next '=' (keeping only the text before it), so a default with '=' is refused; pass it with -i instead"
                ),
            ));
        }
        if out.iter().any(|o| o.name == name) {
            return Err(at(
                path,
                i.line,
                format!("{what}: var '{name}' is declared twice"),
            ));
        }
        out.push(VarDecl {
            name: name.to_string(),
            default: default.map(literal),
        });
    }
    Ok(out)
}

fn check_placeholders(
    path: &Path,
    line: usize,
    args: &[String],
    vars: &[VarDecl],
    what: &str,
) -> Result<(), Error> {
    for a in args {
        for p in placeholders(a) {
            if !vars.iter().any(|v| v.name == p) {
                return Err(at(
                    path,
                    line,
                    format!("{what} '{a}' uses {{{p}}}, which is not declared in vars"),
                ));
            }
        }
    }
    Ok(())
}

fn hook_specs(path: &Path, v: &Marked, what: &str) -> Result<Vec<HookSpec>, Error> {
    let Node::Seq(items) = &v.node else {
        return Err(at(
            path,
            v.line,
            format!(
                "{what}: expected a list of {{hook, options}}, found {}",
                v.node.kind()
            ),
        ));
    };
    let mut out = Vec::new();
    for i in items {
        let Node::Map(fields) = &i.node else {
            return Err(at(
                path,
                i.line,
                format!(
                    "{what}: a hook is a mapping {{hook, options}}, found {}",
                    i.node.kind()
                ),
            ));
        };
        let mut hook = None;
        let mut options = serde_json::Value::Null;
        for (k, val) in fields {
            match string(path, k, "a key")?.as_str() {
                "hook" => hook = Some(string(path, val, &format!("{what}: the hook's name"))?),
                "options" => options = to_json(val),
                other => {
                    return Err(at(
                        path,
                        k.line,
                        format!("{what}: unknown key '{other}'; a hook's keys are: hook, options"),
                    ));
                }
            }
        }
        let Some(hook) = hook else {
            return Err(at(
                path,
                i.line,
                format!("{what}: a hook without 'hook' (its name)"),
            ));
        };
        let spec = HookSpec { hook, options };
        crate::hooks::validate(&spec).map_err(|e| at(path, i.line, format!("{what}: {e}")))?;
        out.push(spec);
    }
    Ok(out)
}

/// benchpress' tag groups, `scope` and `component`.
fn tag_groups(path: &Path, v: &Marked, what: &str) -> Result<(Vec<String>, Vec<String>), Error> {
    let Node::Map(groups) = &v.node else {
        return Err(at(
            path,
            v.line,
            format!(
                "{what}: expected a mapping {{scope: [...], component: [...]}}, found {}",
                v.node.kind()
            ),
        ));
    };
    let mut out = (vec![], vec![]);
    for (k, val) in groups {
        match string(path, k, "a tag group")?.as_str() {
            "scope" => out.0 = string_list(path, val, &format!("{what}: scope"))?,
            "component" => out.1 = string_list(path, val, &format!("{what}: component"))?,
            other => {
                return Err(at(
                    path,
                    k.line,
                    format!(
                        "{what}: unknown tag group '{other}'; benchpress' are: scope, component"
                    ),
                ));
            }
        }
    }
    Ok(out)
}

fn string_list(path: &Path, v: &Marked, what: &str) -> Result<Vec<String>, Error> {
    match &v.node {
        Node::Seq(items) => items
            .iter()
            .map(|i| string(path, i, &format!("{what}: an item")))
            .collect(),
        Node::Scalar { text, .. } if text.is_empty() => Ok(vec![]),
        other => Err(at(
            path,
            v.line,
            format!("{what}: expected a list, found {}", other.kind()),
        )),
    }
}

/// A scalar's text; null, lists and mappings are refused naming `what`.
fn string(path: &Path, v: &Marked, what: &str) -> Result<String, Error> {
    match &v.node {
        Node::Scalar { text, plain } if !(*plain && matches!(Yaml::from_str(text), Yaml::Null)) => {
            Ok(text.clone())
        }
        other => Err(at(
            path,
            v.line,
            format!("{what}: expected text, found {}", other.kind()),
        )),
    }
}

/// A scalar as JSON (YAML's plain scalars typed as YAML types them); None
/// for lists and mappings.
fn scalar_json(v: &Marked) -> Option<serde_json::Value> {
    match &v.node {
        Node::Scalar { .. } => Some(to_json(v)),
        _ => None,
    }
}

fn to_json(v: &Marked) -> serde_json::Value {
    use serde_json::Value;
    match &v.node {
        Node::Scalar { text, plain: false } => Value::String(text.clone()),
        Node::Scalar { text, plain: true } => match Yaml::from_str(text) {
            Yaml::Null => Value::Null,
            Yaml::Boolean(b) => Value::Bool(b),
            Yaml::Integer(i) => Value::from(i),
            Yaml::Real(r) => r
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .unwrap_or_else(|| Value::String(text.clone())),
            _ => Value::String(text.clone()),
        },
        Node::Seq(items) => Value::Array(items.iter().map(to_json).collect()),
        Node::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, val)| (k.node.text().unwrap_or_default().to_string(), to_json(val)))
                .collect(),
        ),
    }
}

/// A YAML node with the line it starts on.
#[derive(Debug, Clone)]
struct Marked {
    node: Node,
    line: usize,
}

#[derive(Debug, Clone)]
enum Node {
    /// `plain`: unquoted and untagged, so YAML types it (null, bool, number).
    Scalar {
        text: String,
        plain: bool,
    },
    Seq(Vec<Marked>),
    Map(Vec<(Marked, Marked)>),
}

impl Node {
    fn kind(&self) -> &'static str {
        match self {
            Node::Scalar { text, plain: true } if matches!(Yaml::from_str(text), Yaml::Null) => {
                "nothing (null)"
            }
            Node::Scalar { .. } => "a single value",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            Node::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }
}

enum Frame {
    Seq(Vec<Marked>, usize, usize),
    Map(Vec<(Marked, Marked)>, Option<Marked>, usize, usize),
}

/// Builds [`Marked`] trees from the parser's events.
#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: BTreeMap<usize, Marked>,
    docs: Vec<Marked>,
    bad_alias: Option<usize>,
}

impl Builder {
    fn value(&mut self, m: Marked, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, m.clone());
        }
        match self.stack.last_mut() {
            None => self.docs.push(m),
            Some(Frame::Seq(items, _, _)) => items.push(m),
            Some(Frame::Map(entries, key, _, _)) => match key.take() {
                None => *key = Some(m),
                Some(k) => entries.push((k, m)),
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            Event::Scalar(text, style, anchor, tag) => {
                let plain = style == TScalarStyle::Plain && tag.is_none();
                self.value(
                    Marked {
                        node: Node::Scalar { text, plain },
                        line,
                    },
                    anchor,
                );
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Frame::Seq(vec![], anchor, line)),
            Event::MappingStart(anchor, _) => {
                self.stack.push(Frame::Map(vec![], None, anchor, line))
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor, line) = match self.stack.pop() {
                    Some(Frame::Seq(items, a, l)) => (Node::Seq(items), a, l),
                    Some(Frame::Map(entries, _, a, l)) => (Node::Map(entries), a, l),
                    None => return,
                };
                self.value(Marked { node, line }, anchor);
            }
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some(m) => self.value(m, 0),
                None => self.bad_alias = Some(line),
            },
            _ => {}
        }
    }
}

/// Reads and parses one YAML document.
fn read_yaml(path: &Path, what: &'static str) -> Result<Marked, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        what,
        path: path.into(),
        source,
    })?;
    parse_yaml(path, &text)
}

fn parse_yaml(path: &Path, text: &str) -> Result<Marked, Error> {
    let mut b = Builder::default();
    Parser::new_from_str(text).load(&mut b, true).map_err(|e| {
        at(
            path,
            e.marker().line(),
            format!("invalid YAML: {}", e.info()),
        )
    })?;
    if let Some(line) = b.bad_alias {
        return Err(at(
            path,
            line,
            "invalid YAML: an alias (*name) with no anchor (&name) before it",
        ));
    }
    match b.docs.len() {
        0 => Err(Error::At {
            path: path.into(),
            line: None,
            message: "the file is empty".into(),
        }),
        1 => Ok(b.docs.remove(0)),
        _ => Err(at(
            path,
            b.docs[1].line,
            "holds more than one YAML document (---)",
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The bindings FeedSim and AdSim declare (`crates/rackbench/tests/
    /// benchpress_yaml.rs` runs their real ones through the binary).
    const FEEDSIM_MULTI: Translate = Translate::RenameFlag {
        from: "-n",
        to: "--num-instances",
        absent: "--num-instances -1",
    };

    fn workloads() -> Workloads<'static> {
        let feed = |name, translate| Upstream {
            name,
            workload: "feedsim",
            translate,
            scope: &["app", "feed"],
            component: &["cpu", "memory"],
            suites: &[],
        };
        Workloads {
            names: vec!["calibrate", "feedsim", "adsim"],
            upstream: vec![
                feed("feedsim", Translate::Same),
                feed("feedsim_autoscale", FEEDSIM_MULTI),
                Upstream {
                    name: "adsim",
                    workload: "adsim",
                    translate: Translate::Defaults(&[
                        DefaultArg {
                            commands: &["server"],
                            flag: "--bind",
                            arg: "--bind ::",
                        },
                        DefaultArg {
                            commands: &["server", "client"],
                            flag: "--tls",
                            arg: "--tls=1",
                        },
                    ]),
                    scope: &[],
                    component: &[],
                    suites: &["ai"],
                },
            ],
        }
    }

    fn loaded(text: &str) -> Result<Vec<Loaded>, Error> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("jobs.yml");
        std::fs::write(&p, text).unwrap();
        load_jobs(&p, &default_benchmarks(&workloads()), false, &workloads())
    }

    /// The runnable jobs of `text`; a job rackbench cannot run is an error
    /// here, its reason the message.
    fn jobs(text: &str) -> Result<Vec<Job>, Error> {
        loaded(text)?
            .into_iter()
            .map(|l| match l {
                Loaded::Job(j) => Ok(*j),
                Loaded::Unrunnable(u) => Err(Error::At {
                    path: u.at.into(),
                    line: None,
                    message: format!("job '{}': {}", u.name, u.why),
                }),
            })
            .collect()
    }

    #[test]
    fn upstream_shaped_jobs_translate() {
        let j = jobs(
            r#"
- name: fs
  benchmark: feedsim
  description: >
    folded
    text
  args:
    - '-p {port}'
    - '-o {output}'
  vars:
    - 'port=11222'
    - 'output=x.txt'
  hooks:
    - hook: cpu-mpstat
      options:
        args: ['-u', '1']
  tags:
    scope: [zz]
- name: auto
  benchmark: feedsim_autoscale
  description: d
  args: ['-n {n}', '{extra_args}']
  vars: ['n=-1', 'extra_args=']
- name: auto2
  benchmark: feedsim_autoscale
  description: d
  args: {q: 5, quick: null}
- name: pair
  benchmark: calibrate
  description: d
  roles:
    server:
      args: ['--x {a}']
      vars: ['a=1']
    client:
      vars: ['b']
"#,
        )
        .unwrap();
        assert_eq!(j[0].benchmark, "feedsim");
        assert_eq!(j[0].description, "folded text");
        assert_eq!(j[0].tags, vec!["app", "feed", "zz", "cpu", "memory"]);
        assert_eq!(j[0].hooks[0].options["args"][0], "-u");
        assert_eq!(j[1].benchmark, "feedsim");
        assert_eq!(j[1].args, vec!["--num-instances {n}", "{extra_args}"]);
        assert_eq!(j[2].args, vec!["--num-instances -1", "--q", "5", "--quick"]);
        assert_eq!(j[3].roles.len(), 2);
        assert_eq!(j[3].role("client").unwrap().vars[0].default, None);
        assert_eq!(j[3].role("server").unwrap().args, vec!["--x {a}"]);
    }

    #[test]
    fn errors_name_file_line_and_what() {
        // A benchmark rackbench lacks: a job listed, not run.
        let l = loaded(
            "- name: t\n  benchmark: tao_bench\n  description: d\n  tee_output: true\n  tags: {scope: [x]}\n",
        )
        .unwrap();
        let Loaded::Unrunnable(u) = &l[0] else {
            panic!("{l:?}")
        };
        assert!(u.at.ends_with("jobs.yml:1"), "{u:?}");
        assert!(u.why.contains("'tao_bench'"), "{u:?}");
        assert_eq!(u.tags, vec!["x"]);
        // Still a benchpress job: its keys are checked.
        let e = loaded("- name: t\n  benchmark: tao_bench\n  description: d\n  argz: 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":4") && e.contains("unknown key 'argz'"), "{e}");
        let l = loaded("- name: t\n  benchmark: feedsm\n  description: d\n").unwrap();
        let Loaded::Unrunnable(u) = &l[0] else {
            panic!("{l:?}")
        };
        assert!(u.why.contains("did you mean feedsim?"), "{u:?}");
        let e = jobs("- name: t\n  benchmark: feedsim\n  description: d\n  argz: []\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":4") && e.contains("unknown key 'argz'"), "{e}");
        let e = jobs("- name: t\n  benchmark: feedsim\n  description: d\n  tee_output: true\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'tee_output' is not supported"), "{e}");
        let e = jobs("- name: t\n  benchmark: feedsim\n  description: d\n  args: ['{prot}']\n  vars: [port=1]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("{prot}"), "{e}");
        let e =
            jobs("- name: t\n  benchmark: feedsim\n  description: d\n  hooks: [{hook: nope}]\n")
                .unwrap_err()
                .to_string();
        assert!(e.contains(":4") && e.contains("unknown hook 'nope'"), "{e}");
        let e = jobs("- name: t\n  benchmark: feedsim\n  args: [\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid YAML"), "{e}");
        let e = jobs("name: t\n").unwrap_err().to_string();
        assert!(e.contains("expected a list of jobs"), "{e}");
        let e = jobs("- name: t\n  benchmark: feedsim\n  description: d\n  vars: ['a=b=c']\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'a=b=c'"), "{e}");
        let e = jobs("- name: t\n  benchmark: calibrate\n  description: d\n  args: ['x']\n  roles: {a: {args: []}}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("has roles and job-level args"), "{e}");
    }

    #[test]
    fn upstream_adsim_jobs_get_upstreams_tls_and_listening() {
        let j = jobs(
            r#"
- benchmark: adsim
  name: adsim
  description: d
  roles:
    server:
      args: ['server', '--cfg-file {cfg_file}']
      vars: ['cfg_file=default']
    client:
      args: ['client', '--server {server_ip}', '--port 10086']
      vars: ['server_ip']
- benchmark: adsim
  name: mine
  description: d
  roles:
    server:
      args: ['server --bind ::1', '--tls=0']
"#,
        )
        .unwrap();
        let server = &j[0].role("server").unwrap().args;
        assert_eq!(
            server,
            &["server", "--cfg-file {cfg_file}", "--bind ::", "--tls=1"]
        );
        let client = &j[0].role("client").unwrap().args;
        assert_eq!(client.last().unwrap(), "--tls=1");
        assert!(!client.iter().any(|a| a.contains("--bind")), "{client:?}");
        // What a job gives itself is kept.
        assert_eq!(
            j[1].role("server").unwrap().args,
            vec!["server --bind ::1", "--tls=0"]
        );
    }

    #[test]
    fn quotes_stay_literal_as_in_benchpress() {
        let j = jobs(
            "- name: t\n  benchmark: calibrate\n  description: d\n  args: [\"--label it's\"]\n",
        )
        .unwrap();
        let r = crate::vars::resolve(&j[0], None, &Default::default()).unwrap();
        assert_eq!(r.argv, vec!["--label", "it's"]);
    }

    #[test]
    fn benchmarks_file_checks_keys_and_parsers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.yml");
        std::fs::write(
            &p,
            "feedsim:\n  parser: feedsim\n  path: ./run.sh\n  tags: {scope: [a]}\n  metrics: [x]\ntao_bench:\n  parser: tao_bench\n  roles: [server, client]\n",
        )
        .unwrap();
        let b = load_benchmarks(&p, &workloads()).unwrap();
        assert_eq!(b["feedsim"].scope, vec!["a"]);
        assert!(b.contains_key("tao_bench"));
        std::fs::write(&p, "feedsim:\n  parser: tao_bench\n").unwrap();
        let e = load_benchmarks(&p, &workloads()).unwrap_err().to_string();
        assert!(
            e.contains("b.yml:2") && e.contains("parser 'tao_bench'"),
            "{e}"
        );
        std::fs::write(&p, "feedsim:\n  pth: x\n").unwrap();
        let e = load_benchmarks(&p, &workloads()).unwrap_err().to_string();
        assert!(e.contains("unknown key 'pth'"), "{e}");
        let e = load_benchmarks(Path::new("wdl"), &workloads())
            .unwrap_err()
            .to_string();
        assert!(e.contains("wdl_bench"), "{e}");
    }
}
