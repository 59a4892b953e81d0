//! Hooks run around a job: `before` in the job's order, `after` in reverse
//! order, also when the job failed. Each may add a summary to the report
//! (under `metrics.hooks.<name>`) and files to the metrics folder.

mod copymove;
mod cpu_limit;
mod file;
mod monitors;
mod mpstat;
mod perf;
mod result;
mod shell;
mod user_script;

use crate::error::Error;
use crate::job::HookSpec;
use serde_json::{Map, Value};
use std::path::PathBuf;

/// Where a hook runs.
#[derive(Debug, Clone)]
pub struct HookContext {
    /// The invocation's `benchmark_metrics_<run_id>` folder.
    pub out_dir: PathBuf,
    pub job: String,
    pub iteration: u32,
}

/// A hook instance for one job run.
pub trait Hook: Send {
    /// Runs before the job; an error fails the job (the workload is skipped).
    /// Options were checked when the hook was built, so an error here is
    /// the host's ([`Error::Host`]): a tool, file or process failed.
    fn before(&mut self, ctx: &HookContext) -> Result<(), Error>;
    /// Runs after the job; returns the summary for the report.
    fn after(&mut self, ctx: &HookContext) -> Result<Value, Error>;
}

/// The hooks rackbench knows, with their option keys.
pub const KNOWN: &[(&str, &[&str], &str)] = &[
    (
        "cpu-mpstat",
        mpstat::OPTIONS,
        "per-CPU utilisation every interval from /proc/stat into cpu_mpstat.csv",
    ),
    (
        "copymove",
        copymove::OPTIONS,
        "copy (or move) files matching globs into the metrics folder before/after the job",
    ),
    (
        "perf",
        perf::OPTIONS,
        "system-wide `perf stat` counters over the job (or why they are unavailable), and benchpress' mpstat, memstat, netstat and cpufreq monitors into their CSVs (topdown: options checked, not collected)",
    ),
    (
        "shell",
        shell::OPTIONS,
        "shell commands before/after the job",
    ),
    (
        "cpu-limit",
        &[],
        "runs the job on the CPUs of a hex mask (options: the mask, e.g. \"3\"), as taskset",
    ),
    (
        "result",
        &[],
        "copies files (options: a list of paths) into the metrics folder after the job as <job>_<name>",
    ),
    (
        "file",
        &[],
        "creates files and directories (options: a list of {type: file|dir, path}) before the job, deletes them after",
    ),
    (
        "user-script",
        user_script::OPTIONS,
        "runs a script in the background during the job (hook_path, args, background_mode: {duration, stdout_path})",
    ),
];

/// A hook's options as an object (absent options: an empty one).
pub(crate) fn object<'a>(
    hook: &str,
    options: &'a Value,
) -> Result<std::borrow::Cow<'a, Map<String, Value>>, String> {
    match options {
        Value::Null => Ok(std::borrow::Cow::Owned(Map::new())),
        Value::Object(m) => Ok(std::borrow::Cow::Borrowed(m)),
        other => Err(format!(
            "hook '{hook}': options must be a JSON object, e.g. {hook}:{{\"key\": 1}}; got {other}"
        )),
    }
}

/// Checks a spec's name and option keys, naming what is wrong (every
/// error is the user's).
pub fn validate(spec: &HookSpec) -> Result<(), Error> {
    check(spec).map_err(Error::Input)
}

fn check(spec: &HookSpec) -> Result<(), String> {
    let Some((_, opts, _)) = KNOWN.iter().find(|(n, _, _)| *n == spec.hook) else {
        let names: Vec<&str> = KNOWN.iter().map(|k| k.0).collect();
        return Err(format!(
            "unknown hook '{}': known hooks are {}",
            spec.hook,
            names.join(", ")
        ));
    };
    let wrap = |e: String| format!("hook '{}': {e}", spec.hook);
    // Option values are checked here too, so a bad one stops the run before
    // any job starts rather than when its hook is built.
    match spec.hook.as_str() {
        "cpu-limit" => return cpu_limit::mask(&spec.options).map(|_| ()).map_err(wrap),
        "result" => return result::paths(&spec.options).map(|_| ()).map_err(wrap),
        "file" => return file::entries(&spec.options).map(|_| ()).map_err(wrap),
        _ => {}
    }
    let o = object(&spec.hook, &spec.options)?;
    for k in o.keys() {
        if !opts.contains(&k.as_str()) {
            return Err(format!(
                "hook '{}' has no option '{k}'; its options are: {}",
                spec.hook,
                opts.join(", ")
            ));
        }
    }
    match spec.hook.as_str() {
        "cpu-mpstat" => mpstat::interval(&o).map(|_| ()).map_err(wrap),
        "perf" => perf::Perf::new(&o).map(|_| ()).map_err(wrap),
        "user-script" => user_script::UserScript::new(&o).map(|_| ()).map_err(wrap),
        _ => Ok(()),
    }
}

/// Builds a hook from a validated spec. Its options were checked first,
/// so what a hook's constructor still refuses is the host's (a CPU
/// affinity that cannot be read, say).
pub fn build(spec: &HookSpec) -> Result<Box<dyn Hook>, Error> {
    validate(spec)?;
    let wrap = |e: String| Error::Host(format!("hook '{}': {e}", spec.hook));
    match spec.hook.as_str() {
        "cpu-limit" => {
            return Ok(Box::new(
                cpu_limit::CpuLimit::new(&spec.options).map_err(wrap)?,
            ));
        }
        "result" => {
            return Ok(Box::new(
                result::ResultHook::new(&spec.options).map_err(wrap)?,
            ));
        }
        "file" => return Ok(Box::new(file::FileHook::new(&spec.options).map_err(wrap)?)),
        _ => {}
    }
    let o = object(&spec.hook, &spec.options).map_err(Error::Input)?;
    Ok(match spec.hook.as_str() {
        "cpu-mpstat" => Box::new(mpstat::Mpstat::new(&o).map_err(wrap)?),
        "copymove" => Box::new(copymove::CopyMove::new(&o).map_err(wrap)?),
        "perf" => Box::new(perf::Perf::new(&o).map_err(wrap)?),
        "shell" => Box::new(shell::Shell::new(&o).map_err(wrap)?),
        "user-script" => Box::new(user_script::UserScript::new(&o).map_err(wrap)?),
        other => {
            return Err(Error::Input(format!(
                "hook '{other}' has no builder (a rackbench bug)"
            )));
        }
    })
}

/// Reads an option that is a string or a list of strings.
pub(crate) fn strings(o: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("option '{key}' must hold strings"))
            })
            .collect(),
        Some(_) => Err(format!(
            "option '{key}' must be a string or a list of strings"
        )),
    }
}

/// Reads a boolean option.
pub(crate) fn boolean(o: &Map<String, Value>, key: &str) -> Result<bool, String> {
    match o.get(key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(format!("option '{key}' must be true or false")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_hooks_and_options_are_named() {
        let e = validate(&HookSpec::parse_cli("mpstat").unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown hook 'mpstat'") && e.contains("cpu-mpstat"),
            "{e}"
        );
        let e = validate(&HookSpec::parse_cli("copymove:{\"befor\": []}").unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no option 'befor'") && e.contains("before"),
            "{e}"
        );
        let e = build(&HookSpec::parse_cli("cpu-mpstat:{\"interval_secs\": -1}").unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("positive"), "{e}");
    }

    #[test]
    fn validate_checks_mpstat_values_naming_hook_and_option() {
        for spec in [
            "cpu-mpstat:{\"interval_secs\": 0}",
            "cpu-mpstat:{\"interval_secs\": -2.5}",
        ] {
            let e = validate(&HookSpec::parse_cli(spec).unwrap())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("hook 'cpu-mpstat'") && e.contains("option 'interval_secs'"),
                "{spec}: {e}"
            );
        }
        let e = validate(&HookSpec::parse_cli("cpu-mpstat:{\"args\": [\"-A\", \"1\"]}").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("hook 'cpu-mpstat'") && e.contains("'-A'"), "{e}");
        validate(&HookSpec::parse_cli("cpu-mpstat:{\"args\": [\"-u\", \"1\"]}").unwrap()).unwrap();
    }
}
