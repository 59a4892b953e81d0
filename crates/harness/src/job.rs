//! The job catalogue: `jobs/*.toml` files, each holding `[[job]]` tables.
//!
//! ```toml
//! [[job]]
//! name = "calibrate"
//! benchmark = "calibrate"            # the workload that runs it
//! description = "..."
//! tags = ["smoke"]
//! args = ["--target {target}", "{extra_args}"]
//! vars = ["target=99p:20", "extra_args="]   # `name` is required, `name=default` optional
//! hooks = [{ hook = "cpu-mpstat", options = { interval_secs = 1 } }]
//! timeout = 900                     # seconds
//! baseline = { metric = "final_achieved_qps", value = 618.6 }
//!
//! [[job.roles]]                     # optional; then `-r ROLE` is required
//! role = "client"
//! args = ["--server {server_ip}"]
//! vars = ["server_ip"]
//! ```
//!
//! Unknown keys are errors (a misspelled key never silently becomes a default),
//! and every `{placeholder}` must be a declared var.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A problem with a job file or a job lookup; the message names the file and,
/// where the parser knows it, the line.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("cannot read job file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid job file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("job file {path}, job '{job}': {message}")]
    Invalid {
        path: PathBuf,
        job: String,
        message: String,
    },
    #[error("job '{name}' is defined twice: in {first} and {second}")]
    Duplicate {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("unknown job '{name}'{hint}; `rackbench list` shows the catalogue")]
    Unknown { name: String, hint: String },
    #[error(
        "job '{name}' ({at}) cannot run in rackbench: {why}; `rackbench list` marks the jobs it cannot run"
    )]
    Unrunnable {
        name: String,
        at: String,
        why: String,
    },
}

/// A job of a benchpress jobs file that rackbench lists but cannot run (its
/// benchmark is one rackbench does not implement), kept so that upstream's
/// stock files load whole: listing shows it, running it is the error.
#[derive(Debug, Clone, PartialEq)]
pub struct Unrunnable {
    pub name: String,
    /// Upstream's benchmark name, as the file gives it.
    pub benchmark: String,
    pub description: String,
    pub tags: Vec<String>,
    /// Why it cannot run.
    pub why: String,
    /// FILE:LINE of its definition.
    pub at: String,
}

/// A var declaration: required (`name`) or with a default (`name=value`).
#[derive(Debug, Clone, PartialEq)]
pub struct VarDecl {
    pub name: String,
    pub default: Option<String>,
}

impl VarDecl {
    fn parse(s: &str) -> Result<Self, String> {
        let (name, default) = match s.split_once('=') {
            Some((n, d)) => (n.trim(), Some(d.to_string())),
            None => (s.trim(), None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "var '{s}': a var is `name` or `name=default`, name made of letters, digits and _"
            ));
        }
        Ok(VarDecl {
            name: name.to_string(),
            default,
        })
    }
}

impl fmt::Display for VarDecl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.default {
            Some(d) => write!(f, "{}={}", self.name, d),
            None => write!(f, "{} (required)", self.name),
        }
    }
}

/// A hook attached to a job, with its options.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    pub hook: String,
    /// benchpress' `options`: an object for most hooks, a CPU mask string
    /// for `cpu-limit`, a list for `result` and `file`; null when absent.
    #[serde(default)]
    pub options: serde_json::Value,
}

impl HookSpec {
    /// Parses the command-line form `NAME` or `NAME:{json options}`.
    pub fn parse_cli(s: &str) -> Result<Self, crate::Error> {
        let (name, opts) = match s.split_once(':') {
            Some((n, o)) => (n.trim(), Some(o)),
            None => (s.trim(), None),
        };
        let options = match opts {
            None => serde_json::Value::Null,
            Some(o) => serde_json::from_str::<serde_json::Value>(o).map_err(|e| {
                crate::Error::Input(format!("hook '{name}': options are not valid JSON ({e})"))
            })?,
        };
        Ok(HookSpec {
            hook: name.to_string(),
            options,
        })
    }

    /// benchpress' `"name: options"` rendering for the report.
    pub fn describe(&self) -> String {
        let none = serde_json::Value::Object(Default::default());
        let options = if self.options.is_null() {
            &none
        } else {
            &self.options
        };
        format!("{}: {options}", self.hook)
    }
}

/// How a job's score is computed: `score = metrics[metric] / value`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    pub metric: String,
    pub value: f64,
    /// The benchmark its scores pool under in `report score` (default: the
    /// job's `benchmark`), as benchpress' JOB_TO_BM.
    #[serde(default)]
    pub pool: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRole {
    role: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    vars: Vec<String>,
    #[serde(default)]
    hooks: Vec<HookSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    name: String,
    benchmark: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    vars: Vec<String>,
    #[serde(default)]
    hooks: Vec<HookSpec>,
    #[serde(default)]
    roles: Vec<RawRole>,
    timeout: Option<u64>,
    baseline: Option<Baseline>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    job: Vec<RawJob>,
}

/// A role of a job (e.g. `server` and `client`).
#[derive(Debug, Clone, PartialEq)]
pub struct Role {
    pub name: String,
    pub args: Vec<String>,
    pub vars: Vec<VarDecl>,
    pub hooks: Vec<HookSpec>,
}

/// One job of the catalogue.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub name: String,
    pub benchmark: String,
    pub description: String,
    pub tags: Vec<String>,
    pub args: Vec<String>,
    pub vars: Vec<VarDecl>,
    pub hooks: Vec<HookSpec>,
    pub roles: Vec<Role>,
    pub timeout: Option<std::time::Duration>,
    pub baseline: Option<Baseline>,
    /// The file it came from (or `<embedded>/NAME.toml`).
    pub source: PathBuf,
}

impl Job {
    pub fn role(&self, name: &str) -> Option<&Role> {
        self.roles.iter().find(|r| r.name == name)
    }
}

/// Placeholders `{name}` in a template.
pub(crate) fn placeholders(template: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(j) => {
                out.push(&after[..j]);
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    out
}

fn parse_vars(path: &Path, job: &str, vars: &[String]) -> Result<Vec<VarDecl>, JobError> {
    let mut out: Vec<VarDecl> = Vec::new();
    for v in vars {
        let d = VarDecl::parse(v).map_err(|message| JobError::Invalid {
            path: path.into(),
            job: job.into(),
            message,
        })?;
        if out.iter().any(|o| o.name == d.name) {
            return Err(JobError::Invalid {
                path: path.into(),
                job: job.into(),
                message: format!("var '{}' is declared twice", d.name),
            });
        }
        out.push(d);
    }
    Ok(out)
}

fn check_placeholders(
    path: &Path,
    job: &str,
    args: &[String],
    vars: &[&VarDecl],
    where_: &str,
) -> Result<(), JobError> {
    for a in args {
        for p in placeholders(a) {
            if !vars.iter().any(|v| v.name == p) {
                return Err(JobError::Invalid {
                    path: path.into(),
                    job: job.into(),
                    message: format!(
                        "{where_}arg '{a}' uses {{{p}}}, which is not declared in vars"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Parses one job file's text.
pub fn parse_file(path: &Path, text: &str) -> Result<Vec<Job>, JobError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| JobError::Parse {
        path: path.into(),
        message: e.to_string().trim_end().to_string(),
    })?;
    let mut jobs = Vec::new();
    for r in raw.job {
        let invalid = |message: String| JobError::Invalid {
            path: path.into(),
            job: r.name.clone(),
            message,
        };
        if r.name.trim().is_empty() || r.name.contains(char::is_whitespace) {
            return Err(JobError::Parse {
                path: path.into(),
                message: format!("job name '{}' must be a non-empty word", r.name),
            });
        }
        let vars = parse_vars(path, &r.name, &r.vars)?;
        let job_vars: Vec<&VarDecl> = vars.iter().collect();
        check_placeholders(path, &r.name, &r.args, &job_vars, "")?;
        let mut roles = Vec::new();
        for rr in r.roles {
            if roles.iter().any(|x: &Role| x.name == rr.role) {
                return Err(invalid(format!("role '{}' is defined twice", rr.role)));
            }
            let rvars = parse_vars(path, &r.name, &rr.vars)?;
            let all: Vec<&VarDecl> = vars.iter().chain(&rvars).collect();
            check_placeholders(
                path,
                &r.name,
                &rr.args,
                &all,
                &format!("role '{}': ", rr.role),
            )?;
            check_placeholders(path, &r.name, &r.args, &all, "")?;
            roles.push(Role {
                name: rr.role,
                args: rr.args,
                vars: rvars,
                hooks: rr.hooks,
            });
        }
        if r.timeout == Some(0) {
            return Err(invalid(
                "timeout must be a positive number of seconds".into(),
            ));
        }
        jobs.push(Job {
            name: r.name,
            benchmark: r.benchmark,
            description: r.description,
            tags: r.tags,
            args: r.args,
            vars,
            hooks: r.hooks,
            roles,
            timeout: r.timeout.map(std::time::Duration::from_secs),
            baseline: r.baseline,
            source: path.into(),
        });
    }
    Ok(jobs)
}

/// benchpress' `-o 'JOB: ARGS'`: the job and its new args (split as a
/// shell would, each word quoted so the resolver keeps it whole).
pub fn parse_override(text: &str) -> Result<(String, Vec<String>), crate::Error> {
    let Some((job, args)) = text.split_once(':') else {
        return Err(crate::Error::Input(format!(
            "-o/--override_job_args '{text}' is not 'JOB: ARGS', e.g. 'feedsim_default: -q 100 -d 60'"
        )));
    };
    let job = job.trim();
    if job.is_empty() {
        return Err(crate::Error::Input(format!(
            "-o/--override_job_args '{text}' names no job before ':'"
        )));
    }
    let words = shell_words::split(args.trim()).map_err(|e| {
        crate::Error::Input(format!(
            "-o/--override_job_args: cannot split '{}': {e}",
            args.trim()
        ))
    })?;
    Ok((
        job.to_string(),
        words
            .iter()
            .map(|w| shell_words::quote(w).into_owned())
            .collect(),
    ))
}

/// All known jobs, by name.
#[derive(Debug, Default)]
pub struct Catalogue {
    jobs: BTreeMap<String, Job>,
    /// Jobs of a benchpress file rackbench cannot run, by name.
    unrunnable: BTreeMap<String, Unrunnable>,
}

impl Catalogue {
    /// Builds a catalogue from embedded files, then `dirs` in order; a job in
    /// a later directory replaces an embedded one of the same name, but the
    /// same name twice within the directories is an error.
    pub fn load(embedded: &[(&str, &str)], dirs: &[PathBuf]) -> Result<Self, JobError> {
        let mut cat = Catalogue::default();
        for (name, text) in embedded {
            let path = PathBuf::from(format!("<embedded>/{name}"));
            for j in parse_file(&path, text)? {
                cat.insert(j, true)?;
            }
        }
        for dir in dirs {
            let entries = std::fs::read_dir(dir).map_err(|source| JobError::Read {
                path: dir.clone(),
                source,
            })?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            files.sort();
            for f in files {
                let text = std::fs::read_to_string(&f).map_err(|source| JobError::Read {
                    path: f.clone(),
                    source,
                })?;
                for j in parse_file(&f, &text)? {
                    cat.insert(j, false)?;
                }
            }
        }
        Ok(cat)
    }

    fn insert(&mut self, job: Job, embedded: bool) -> Result<(), JobError> {
        if let Some(prev) = self.jobs.get(&job.name) {
            let prev_embedded = prev.source.starts_with("<embedded>");
            if embedded || !prev_embedded {
                return Err(JobError::Duplicate {
                    name: job.name,
                    first: prev.source.clone(),
                    second: job.source,
                });
            }
        }
        self.jobs.insert(job.name.clone(), job);
        Ok(())
    }

    /// Keeps only the jobs `keep` accepts (a benchpress suite's).
    pub fn retain(&mut self, keep: impl Fn(&Job) -> bool) {
        self.jobs.retain(|_, j| keep(j));
    }

    /// Adds a job read from elsewhere (a benchpress jobs file); a name the
    /// catalogue already has from a file is an error naming both.
    pub fn add(&mut self, job: Job) -> Result<(), JobError> {
        if let Some(u) = self.unrunnable.get(&job.name) {
            return Err(JobError::Duplicate {
                name: job.name,
                first: PathBuf::from(&u.at),
                second: job.source,
            });
        }
        self.insert(job, false)
    }

    /// Adds a job rackbench lists but cannot run.
    pub fn add_unrunnable(&mut self, job: Unrunnable) -> Result<(), JobError> {
        if let Some(prev) = self.jobs.get(&job.name) {
            return Err(JobError::Duplicate {
                name: job.name,
                first: prev.source.clone(),
                second: PathBuf::from(job.at),
            });
        }
        if let Some(prev) = self.unrunnable.get(&job.name) {
            return Err(JobError::Duplicate {
                name: job.name,
                first: PathBuf::from(&prev.at),
                second: PathBuf::from(job.at),
            });
        }
        self.unrunnable.insert(job.name.clone(), job);
        Ok(())
    }

    /// benchpress' `-o 'JOB: ARGS'`: JOB's args become `args` (templates:
    /// its vars still fill `{name}` placeholders). A job with roles is
    /// refused (benchpress runs a role's own args, so the override would
    /// change nothing), as is an unknown job (benchpress ignores it).
    pub fn override_args(&mut self, name: &str, args: Vec<String>) -> Result<(), JobError> {
        self.get(name)?;
        let Some(job) = self.jobs.get_mut(name) else {
            return Ok(());
        };
        let invalid = |message: String| JobError::Invalid {
            path: job.source.clone(),
            job: name.into(),
            message,
        };
        if !job.roles.is_empty() {
            return Err(invalid(
                "-o/--override_job_args replaces a job's args, but this job has roles, whose own args run instead; edit the role's args in a job file".into(),
            ));
        }
        let vars: Vec<&VarDecl> = job.vars.iter().collect();
        check_placeholders(&job.source, name, &args, &vars, "-o/--override_job_args: ")?;
        job.args = args;
        Ok(())
    }

    /// The jobs rackbench lists but cannot run.
    pub fn unrunnable(&self) -> impl Iterator<Item = &Unrunnable> {
        self.unrunnable.values()
    }

    /// Every job's name, runnable or not, sorted.
    pub fn all_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .jobs
            .keys()
            .chain(self.unrunnable.keys())
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// The job names `names` select, in order, as benchpress' `run`,
    /// `install` and `clean` take them: a job's name, or a tag standing for
    /// every job carrying it (runnable or not, in name order). A name that
    /// is both a job and a tag is the job. Unknown names are errors.
    pub fn select(&self, names: &[String]) -> Result<Vec<String>, JobError> {
        let mut out: Vec<String> = Vec::new();
        for n in names {
            if self.jobs.contains_key(n) || self.unrunnable.contains_key(n) {
                out.push(n.clone());
                continue;
            }
            let mut tagged: Vec<&String> = self
                .jobs
                .values()
                .filter(|j| j.tags.contains(n))
                .map(|j| &j.name)
                .chain(
                    self.unrunnable
                        .values()
                        .filter(|j| j.tags.contains(n))
                        .map(|j| &j.name),
                )
                .collect();
            if tagged.is_empty() {
                // The lookup's error, with its suggestions.
                self.get(n)?;
            }
            tagged.sort();
            out.extend(tagged.into_iter().cloned());
        }
        Ok(out)
    }

    /// A one-job catalogue running `benchmark` with literal `args`, for
    /// `rackbench <benchmark> ARGS...`.
    pub fn adhoc(benchmark: &str, description: &str, args: &[String]) -> Self {
        let job = Job {
            name: benchmark.into(),
            benchmark: benchmark.into(),
            description: description.into(),
            tags: vec![],
            // Quoted so the resolver's shell-style split gives the words back,
            // and braces escaped from substitution by having no vars.
            args: args
                .iter()
                .map(|a| shell_words::quote(a).into_owned())
                .collect(),
            vars: vec![],
            hooks: vec![],
            roles: vec![],
            timeout: None,
            baseline: None,
            source: PathBuf::from("<command line>"),
        };
        let mut cat = Catalogue::default();
        cat.jobs.insert(job.name.clone(), job);
        cat
    }

    pub fn get(&self, name: &str) -> Result<&Job, JobError> {
        if let Some(u) = self.unrunnable.get(name) {
            return Err(JobError::Unrunnable {
                name: u.name.clone(),
                at: u.at.clone(),
                why: u.why.clone(),
            });
        }
        self.jobs.get(name).ok_or_else(|| {
            let close = self
                .jobs
                .keys()
                .filter(|k| {
                    k.contains(name)
                        || name.contains(k.as_str())
                        || strsim::levenshtein(k, name) <= 2
                })
                .cloned()
                .collect::<Vec<_>>();
            let hint = if close.is_empty() {
                String::new()
            } else {
                format!(" (did you mean {}?)", close.join(", "))
            };
            JobError::Unknown {
                name: name.into(),
                hint,
            }
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[job]]
name = "demo"
benchmark = "calibrate"
description = "a demo"
tags = ["a", "b"]
args = ["--port {port}", "{extra}"]
vars = ["port=11222", "extra="]
hooks = [{ hook = "cpu-mpstat", options = { interval_secs = 2 } }]
timeout = 60
baseline = { metric = "qps", value = 57 }

[[job]]
name = "pair"
benchmark = "calibrate"
args = ["--x {x}"]
vars = ["x=1"]
[[job.roles]]
role = "client"
args = ["--server {server_ip}"]
vars = ["server_ip"]
[[job.roles]]
role = "server"
"#;

    #[test]
    fn parses_jobs_roles_hooks_and_baselines() {
        let jobs = parse_file(Path::new("jobs/demo.toml"), GOOD).unwrap();
        assert_eq!(jobs.len(), 2);
        let d = &jobs[0];
        assert_eq!(
            d.vars[0],
            VarDecl {
                name: "port".into(),
                default: Some("11222".into())
            }
        );
        assert_eq!(d.hooks[0].describe(), "cpu-mpstat: {\"interval_secs\":2}");
        assert_eq!(d.timeout, Some(std::time::Duration::from_secs(60)));
        assert_eq!(d.baseline.as_ref().unwrap().value, 57.0);
        let p = &jobs[1];
        assert_eq!(p.roles.len(), 2);
        assert_eq!(p.role("client").unwrap().vars[0].default, None);
    }

    #[test]
    fn unknown_keys_name_the_file_and_line() {
        let text = "[[job]]\nname = \"x\"\nbenchmark = \"calibrate\"\ndescripton = \"typo\"\n";
        let e = parse_file(Path::new("jobs/x.toml"), text)
            .unwrap_err()
            .to_string();
        assert!(e.contains("jobs/x.toml"), "{e}");
        assert!(e.contains("line 4"), "{e}");
        assert!(e.contains("descripton"), "{e}");
    }

    #[test]
    fn invalid_toml_names_the_line() {
        let e = parse_file(Path::new("j.toml"), "[[job]]\nname = \n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("j.toml") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn undeclared_placeholders_are_rejected() {
        let text = "[[job]]\nname = \"x\"\nbenchmark = \"b\"\nargs = [\"--p {prot}\"]\nvars = [\"port=1\"]\n";
        let e = parse_file(Path::new("j.toml"), text)
            .unwrap_err()
            .to_string();
        assert!(e.contains("{prot}") && e.contains("job 'x'"), "{e}");
    }

    #[test]
    fn catalogue_lookup_suggests_close_names() {
        let cat = Catalogue::load(&[("demo.toml", GOOD)], &[]).unwrap();
        let e = cat.get("dem").unwrap_err().to_string();
        assert!(e.contains("did you mean demo"), "{e}");
        assert!(cat.get("demo").is_ok());
    }

    #[test]
    fn hook_cli_form() {
        let h = HookSpec::parse_cli("perf:{\"events\":[\"cycles\"]}").unwrap();
        assert_eq!(h.hook, "perf");
        assert!(h.options.get("events").is_some());
        // Options of any JSON shape parse; each hook checks its own.
        let h = HookSpec::parse_cli("perf:[1]").unwrap();
        assert!(
            crate::hooks::validate(&h)
                .unwrap_err()
                .to_string()
                .contains("JSON object")
        );
        assert!(
            HookSpec::parse_cli("perf:{")
                .unwrap_err()
                .to_string()
                .contains("not valid JSON")
        );
        assert!(HookSpec::parse_cli("cpu-mpstat").unwrap().options.is_null());
    }
}
