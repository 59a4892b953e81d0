//! Hooks run around a job: `before` in the job's order, `after` in reverse
//! order, also when the job failed. Each may add a summary to the report
//! (under `metrics.hooks.<name>`) and files to the metrics folder.

mod copymove;
mod mpstat;
mod perf;
mod shell;

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
    fn before(&mut self, ctx: &HookContext) -> Result<(), String>;
    /// Runs after the job; returns the summary for the report.
    fn after(&mut self, ctx: &HookContext) -> Result<Value, String>;
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
        "system-wide `perf stat` counters over the job, or the reason they are unavailable",
    ),
    (
        "shell",
        shell::OPTIONS,
        "shell commands before/after the job",
    ),
];

/// Checks a spec's name and option keys, naming what is wrong.
pub fn validate(spec: &HookSpec) -> Result<(), String> {
    let Some((_, opts, _)) = KNOWN.iter().find(|(n, _, _)| *n == spec.hook) else {
        let names: Vec<&str> = KNOWN.iter().map(|k| k.0).collect();
        return Err(format!(
            "unknown hook '{}': known hooks are {}",
            spec.hook,
            names.join(", ")
        ));
    };
    for k in spec.options.keys() {
        if !opts.contains(&k.as_str()) {
            return Err(format!(
                "hook '{}' has no option '{k}'; its options are: {}",
                spec.hook,
                opts.join(", ")
            ));
        }
    }
    // Option values checked here too, so a bad one stops the run before
    // any job starts rather than when its hook is built.
    if spec.hook == "cpu-mpstat" {
        mpstat::interval(&spec.options).map_err(|e| format!("hook '{}': {e}", spec.hook))?;
    }
    Ok(())
}

/// Builds a hook from a validated spec.
pub fn build(spec: &HookSpec) -> Result<Box<dyn Hook>, String> {
    validate(spec)?;
    let o = &spec.options;
    let wrap = |e: String| format!("hook '{}': {e}", spec.hook);
    Ok(match spec.hook.as_str() {
        "cpu-mpstat" => Box::new(mpstat::Mpstat::new(o).map_err(wrap)?),
        "copymove" => Box::new(copymove::CopyMove::new(o).map_err(wrap)?),
        "perf" => Box::new(perf::Perf::new(o).map_err(wrap)?),
        "shell" => Box::new(shell::Shell::new(o).map_err(wrap)?),
        _ => unreachable!("validated above"),
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
        let e = validate(&HookSpec::parse_cli("mpstat").unwrap()).unwrap_err();
        assert!(
            e.contains("unknown hook 'mpstat'") && e.contains("cpu-mpstat"),
            "{e}"
        );
        let e = validate(&HookSpec::parse_cli("copymove:{\"befor\": []}").unwrap()).unwrap_err();
        assert!(
            e.contains("no option 'befor'") && e.contains("before"),
            "{e}"
        );
        let e = build(&HookSpec::parse_cli("cpu-mpstat:{\"interval_secs\": -1}").unwrap())
            .err()
            .unwrap();
        assert!(e.contains("positive"), "{e}");
    }

    #[test]
    fn validate_checks_mpstat_values_naming_hook_and_option() {
        for spec in [
            "cpu-mpstat:{\"interval_secs\": 0}",
            "cpu-mpstat:{\"interval_secs\": -2.5}",
        ] {
            let e = validate(&HookSpec::parse_cli(spec).unwrap()).unwrap_err();
            assert!(
                e.contains("hook 'cpu-mpstat'") && e.contains("option 'interval_secs'"),
                "{spec}: {e}"
            );
        }
        let e = validate(&HookSpec::parse_cli("cpu-mpstat:{\"args\": [\"-A\", \"1\"]}").unwrap())
            .unwrap_err();
        assert!(e.contains("hook 'cpu-mpstat'") && e.contains("'-A'"), "{e}");
        validate(&HookSpec::parse_cli("cpu-mpstat:{\"args\": [\"-u\", \"1\"]}").unwrap()).unwrap();
    }
}
