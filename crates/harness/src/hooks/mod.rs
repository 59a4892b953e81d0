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

/// Reads a positive number option.
pub(crate) fn number(o: &Map<String, Value>, key: &str, default: f64) -> Result<f64, String> {
    match o.get(key) {
        None => Ok(default),
        Some(v) => v
            .as_f64()
            .filter(|x| *x > 0.0)
            .ok_or_else(|| format!("option '{key}' must be a positive number")),
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
}
