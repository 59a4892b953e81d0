//! benchpress' `install` and `clean` for a single binary.
//!
//! benchpress builds each benchmark with its install script and removes it
//! with its cleanup script. Every benchmark rackbench runs is compiled into
//! it, so `install` has nothing to build: it checks, per job, what the job
//! needs (that rackbench implements its benchmark, that its arguments are
//! valid with the default vars, that its hooks' options are valid and their
//! tools present) and says so. `clean` has nothing to uninstall: it removes
//! what rackbench left behind for the jobs outside the results (per-run
//! links whose metrics folder is gone, the benchmarks' leftover files in the
//! temp folder) and says what it removed.

use crate::hooks;
use crate::job::{Catalogue, HookSpec, Job};
use crate::runner::Registry;
use crate::vars::{ResolveError, resolve};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A program on `PATH`, if any.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// What a hook needs from the host, as a line, and whether it is there
/// (a hook that runs without it, saying why in the report, is not a lack).
fn hook_needs(spec: &HookSpec) -> (String, bool) {
    match spec.hook.as_str() {
        "perf" => match on_path("perf") {
            Some(p) => (format!("Tool perf: {} (perf hook)", p.display()), true),
            None => (
                "Tool perf: not found on PATH; the perf hook's counters will be reported unavailable (its /proc and /sys monitors still run)".into(),
                true,
            ),
        },
        "cpu-mpstat" => {
            let ok = std::fs::read_to_string("/proc/stat").is_ok();
            (
                format!(
                    "Tool cpu-mpstat: /proc/stat {}",
                    if ok { "readable" } else { "NOT readable" }
                ),
                ok,
            )
        }
        "user-script" => {
            let path = spec
                .options
                .get("hook_path")
                .and_then(|p| p.as_str())
                .unwrap_or_default();
            let ok = Path::new(path).is_file();
            (
                format!(
                    "Tool user-script: {path} {}",
                    if ok { "found" } else { "NOT found" }
                ),
                ok,
            )
        }
        other => (
            format!("Tool {other}: built into rackbench, nothing to install"),
            true,
        ),
    }
}

/// Checks one way of running `job` (a role, or the job itself).
fn check_run(
    job: &Job,
    role: Option<&str>,
    reg: &Registry,
    out: &mut dyn Write,
) -> std::io::Result<bool> {
    let what = match role {
        Some(r) => format!("{} (role {r})", job.name),
        None => job.name.clone(),
    };
    let resolved = match resolve(job, role, &Default::default()) {
        Ok(r) => r,
        Err(ResolveError::MissingVar { var, .. }) => {
            writeln!(
                out,
                "Arguments of {what}: checked when run (var '{var}' has no default: pass it with -i)"
            )?;
            return Ok(true);
        }
        Err(e) => {
            writeln!(out, "Arguments of {what}: {e}")?;
            return Ok(false);
        }
    };
    let mut ok = true;
    match reg.get(&job.benchmark).map(|w| w.validate(&resolved.argv)) {
        Some(Ok(())) => writeln!(out, "Arguments of {what}: valid")?,
        Some(Err(e)) => {
            ok = false;
            writeln!(out, "Arguments of {what}: {e:#}")?;
        }
        None => {
            ok = false;
            writeln!(
                out,
                "Benchmark {} of {what}: not in this binary",
                job.benchmark
            )?;
        }
    }
    for h in &resolved.hooks {
        if let Err(e) = hooks::validate(h) {
            ok = false;
            writeln!(out, "Hook of {what}: {e}")?;
            continue;
        }
        let (line, present) = hook_needs(h);
        ok &= present;
        writeln!(out, "{line}")?;
    }
    Ok(ok)
}

/// `install JOBS`: one report per job; true when every job has what it
/// needs.
pub fn install(
    cat: &Catalogue,
    reg: &Registry,
    jobs: &[String],
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    let mut all_ok = true;
    for name in jobs {
        let job = match cat.get(name) {
            Ok(j) => j,
            Err(e @ crate::job::JobError::Unrunnable { .. }) => {
                all_ok = false;
                writeln!(out, "Benchmark for {name} cannot be installed: {e}")?;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        writeln!(
            out,
            "Benchmark for {}: {} is built into rackbench {} (nothing to install)",
            job.name,
            job.benchmark,
            env!("CARGO_PKG_VERSION")
        )?;
        if job.roles.is_empty() {
            all_ok &= check_run(job, None, reg, out)?;
        } else {
            for r in &job.roles {
                all_ok &= check_run(job, Some(&r.name), reg, out)?;
            }
        }
    }
    Ok(all_ok)
}

/// `clean JOBS` in `root` (where `run` makes the metrics folders and their
/// links): removes the jobs' per-run links whose folder is gone and their
/// benchmarks' leftovers, one line per removal.
pub fn clean(
    cat: &Catalogue,
    reg: &Registry,
    jobs: &[String],
    root: &Path,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut leftovers_done: Vec<String> = Vec::new();
    for name in jobs {
        let job = match cat.get(name) {
            Ok(j) => j,
            Err(crate::job::JobError::Unrunnable { .. }) => {
                writeln!(
                    out,
                    "Job {name} is not one rackbench runs: nothing to clean"
                )?;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        writeln!(
            out,
            "Cleaning out dependencies of {name} job: nothing installed (built into rackbench)"
        )?;
        let prefix = format!("benchmark_metrics_{name}_timestamp:");
        if let Ok(entries) = std::fs::read_dir(root) {
            for e in entries.flatten() {
                let p = e.path();
                let is_link = std::fs::symlink_metadata(&p)
                    .map(|m| m.file_type().is_symlink())
                    .unwrap_or(false);
                if is_link && e.file_name().to_string_lossy().starts_with(&prefix) && !p.exists() {
                    std::fs::remove_file(&p)?;
                    writeln!(out, "Removed {} (its metrics folder is gone)", p.display())?;
                }
            }
        }
        if leftovers_done.contains(&job.benchmark) {
            continue;
        }
        leftovers_done.push(job.benchmark.clone());
        let Some(w) = reg.get(&job.benchmark) else {
            continue;
        };
        for p in w.leftovers() {
            if p.is_file() {
                std::fs::remove_file(&p)?;
                writeln!(out, "Removed {} ({} leftover)", p.display(), job.benchmark)?;
            }
        }
    }
    Ok(())
}
