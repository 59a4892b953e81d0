//! From the driver's flags to what runs: the checks of the flags and the
//! memory, the leaf's configuration, the search's configuration and the
//! target, the closed-compat driver's sizing, and autoscale's instances.

use crate::cli::{
    DriverArgs, ShapeArgs, Threads, default_driver_threads, fixed_qps_driver_threads,
};
use crate::dataset::Shape;
use crate::leaf::LeafConfig;
use anyhow::bail;
use load::{Percentile, SearchConfig, SloTarget};
use std::path::PathBuf;
use std::time::Duration;

pub(crate) fn check_driver(a: &DriverArgs) -> anyhow::Result<()> {
    a.shape.threads(1, false).map_err(anyhow::Error::msg)?;
    a.shape.target_from_s().map_err(anyhow::Error::msg)?;
    if let Some(q) = a.qps.iter().find(|q| q.is_nan() || **q <= 0.0) {
        bail!("-q values must be positive, got {q}");
    }
    if !(a.tolerance > 0.0 && a.tolerance < 0.5) {
        bail!("--tolerance must be in (0, 0.5)");
    }
    if !(0.0..1.0).contains(&a.close_call) {
        bail!("--close-call must be in [0, 1), got {}", a.close_call);
    }
    if !(0.0..1.0).contains(&a.steady_tail) {
        bail!("--steady-tail must be in [0, 1), got {}", a.steady_tail);
    }
    if !(0.0..1.0).contains(&a.warmup_steady) {
        bail!("--warmup-steady must be in [0, 1), got {}", a.warmup_steady);
    }
    Ok(())
}

/// Logical CPUs usable and whether SMT is on.
pub(crate) fn topology() -> (usize, bool) {
    (
        harness::machine::usable_cpus(),
        harness::machine::MachineInfo::collect().threads_per_core > 1,
    )
}

pub(crate) fn leaf_config(s: &ShapeArgs, t: Threads) -> LeafConfig {
    LeafConfig {
        serving_threads: t.serving,
        ranking_threads: t.ranking,
        ser_threads: t.ser,
        shape: Shape {
            scale: s.scale,
            chase_entries: s.chase_entries,
            huge_pages: !s.no_huge_pages,
            ..Shape::default()
        },
        graph_subset: s.graph_subset,
        num_objects: s.num_objects,
        icache_iterations: s.icache_iterations,
        io_wait: Duration::from_millis(s.io_wait_ms),
        serving_model: s.serving_model,
        seed: s.seed,
        ..LeafConfig::default()
    }
}

/// Refuses a dataset that does not fit in available memory.
pub(crate) fn check_memory(cfg: &LeafConfig, instances: usize) -> anyhow::Result<()> {
    check_bytes(
        cfg.dataset_bytes() as u64 * instances as u64,
        &format!(
            "{} serving threads x {:.0} MiB at scale {}",
            cfg.serving_threads,
            cfg.shape.bytes() as f64 / (1u64 << 20) as f64,
            cfg.shape.scale
        ),
    )
}

/// Refuses `need` bytes of datasets (made of `what`) when they do not fit
/// in 90% of the available memory.
pub(crate) fn check_bytes(need: u64, what: &str) -> anyhow::Result<()> {
    if let Some(avail) = harness::machine::mem_available()
        && need > avail / 10 * 9
    {
        bail!(
            "the leaf's datasets need {:.1} GiB ({what}), but only {:.1} GiB of memory is available; lower -t or --scale",
            need as f64 / (1u64 << 30) as f64,
            avail as f64 / (1u64 << 30) as f64
        );
    }
    Ok(())
}

pub(crate) fn target_of(a: &DriverArgs) -> anyhow::Result<SloTarget> {
    Ok(a.target
        .or(a.shape.target_from_s().map_err(anyhow::Error::msg)?)
        .unwrap_or(SloTarget {
            percentile: Percentile::P95,
            latency_ms: 500.0,
        }))
}

pub(crate) fn search_config(a: &DriverArgs, target: SloTarget, t: Threads) -> SearchConfig {
    let secs = Duration::from_secs_f64;
    let mut c = SearchConfig::new(target);
    c.arrival = a.arrival;
    c.tolerance = a.tolerance;
    c.warmup = if a.quick {
        secs(2.0)
    } else {
        secs(a.warmup as f64)
    };
    c.warmup_steady = if a.quick { 0.0 } else { a.warmup_steady };
    c.peak = if a.quick { secs(3.0) } else { secs(10.0) };
    // The closed-loop peak (enough requests in flight to saturate) is a
    // close upper estimate of the open-loop knee (the default runs'
    // knees: 83-93% of it), so bracket around it in small steps rather
    // than halving and bisecting the whole factor of 2 back up.
    c.bracket_up = 1.25;
    c.bracket_down = 0.8;
    // 30 s probes: at 85-95% utilisation a 20 s probe often passes before
    // the queue builds up, and the longer final run then fails.
    c.probe = secs(a.probe_secs.unwrap_or(if a.quick { 4.0 } else { 30.0 }));
    c.probe_warmup = if a.quick { secs(1.0) } else { secs(3.0) };
    c.final_duration = secs(a.final_secs.unwrap_or(if a.quick { 8.0 } else { 60.0 }));
    c.min_qps = 0.2;
    c.borderline = a.close_call;
    c.max_extensions = a.extensions;
    // A final that just misses (p95 within --close-call above the target,
    // or only its tail misses) runs another 60 s and is judged on the
    // whole: one VM hiccup near the end of a 60 s window otherwise fails a
    // sustainable rate and costs a whole step down and another final. Only
    // one final per search is extended, which keeps a search that steps
    // down through three finals under 8 minutes here.
    c.extended_finals = 1;
    c.steady_tail = a.steady_tail;
    // Finals step down to rates a probe passed, in smaller steps than the
    // default's: allow one more before giving up.
    c.final_attempts = 4;
    // Requests spend the IO wait off-CPU: keep enough in flight to saturate.
    c.peak_concurrency = (t.serving * 8).clamp(16, 2048);
    c
}

pub(crate) fn planned(a: &DriverArgs, c: &SearchConfig) -> Duration {
    if a.qps.is_empty() {
        c.planned()
    } else {
        c.warmup + Duration::from_secs_f64(a.duration as f64 + 3.0) * a.qps.len() as u32
    }
}

/// The closed-compat driver's threads for an instance on `nproc` CPUs, as
/// run.sh sizes DriverNodeRank: with `-q`, min(last rate / 4, DRIVER_THREADS)
/// (DRIVER_THREADS: -l, or its default); a search with `-a` leaves it to
/// search_qps.sh, whose cap is max(round(nproc/5), 4) whatever -l says;
/// else DRIVER_THREADS.
pub(crate) fn compat_threads(a: &DriverArgs, nproc: usize, smt: bool) -> usize {
    let dt = a
        .driver_threads
        .unwrap_or_else(|| default_driver_threads(nproc, smt));
    if !a.qps.is_empty() {
        fixed_qps_driver_threads(&a.qps, dt)
    } else if a.auto_workers {
        default_driver_threads(nproc, true)
    } else {
        dt
    }
}

/// One leaf and its driver.
pub(crate) struct Instance {
    /// 0-based; reported as `id + 1`.
    pub(crate) id: usize,
    pub(crate) port: u16,
    pub(crate) cpus: Option<Vec<usize>>,
    pub(crate) threads: Threads,
    /// Threads of the closed-compat driver (run.sh's sizing for this
    /// instance's CPUs: see [`compat_threads`]).
    pub(crate) driver_threads: usize,
    /// Threads of the driver's runtime (`-l`, default 1).
    pub(crate) runtime_threads: usize,
    pub(crate) csv: PathBuf,
    /// Prefix of this instance's lines: empty alone, `instance 2: ` in autoscale.
    pub(crate) label: String,
    /// Autoscale: the instance's output lines also go to this file
    /// (upstream's `feedsim-multi-inst-<i>.log`), and a rerun's CSV and
    /// lines to these (upstream's `fixqps-` names).
    pub(crate) log: Option<PathBuf>,
    pub(crate) rerun_files: Option<(PathBuf, PathBuf)>,
}

/// Autoscale's instances, one per CPU group (`smt`: the cores have
/// siblings), on ports from `base`, and the bytes of all their datasets.
pub(crate) fn autoscale_instances(
    a: &DriverArgs,
    groups: Vec<Vec<usize>>,
    smt: bool,
    base: u16,
) -> anyhow::Result<(Vec<Instance>, usize)> {
    let n = groups.len();
    let stem = a
        .output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = a
        .output
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let fixqps = if a.qps.is_empty() { "" } else { "fixqps-" };
    let mut instances = Vec::with_capacity(n);
    let mut total = 0usize;
    for (i, cpus) in groups.into_iter().enumerate() {
        let t = a
            .shape
            .threads(cpus.len(), smt)
            .map_err(anyhow::Error::msg)?;
        total += leaf_config(&a.shape, t).dataset_bytes();
        let driver_threads = compat_threads(a, cpus.len(), smt);
        instances.push(Instance {
            id: i,
            port: base + i as u16,
            cpus: Some(cpus),
            threads: t,
            driver_threads,
            runtime_threads: a.driver_threads.unwrap_or(1),
            // run-feedsim-multi.sh's names: `fixqps-` before the instance
            // number when the rates are fixed (-q, and its rerun).
            csv: a
                .output
                .with_file_name(format!("{stem}_{fixqps}{}{ext}", i + 1)),
            label: if n > 1 {
                format!("instance {}: ", i + 1)
            } else {
                String::new()
            },
            log: Some(PathBuf::from(format!(
                "feedsim-multi-inst-{fixqps}{}.log",
                i + 1
            ))),
            rerun_files: Some((
                a.output
                    .with_file_name(format!("{stem}_fixqps-{}{ext}", i + 1)),
                PathBuf::from(format!("feedsim-multi-inst-fixqps-{}.log", i + 1)),
            )),
        });
    }
    Ok((instances, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn closed_compat_threads_are_sized_as_run_sh_sizes_them() {
        let args = |a: &[&str]| DriverArgs::try_parse_from(["feedsim"].iter().chain(a)).unwrap();
        // 2 CPUs without SMT: DRIVER_THREADS = max(round(2/4), 4) = 4.
        // A search uses them all; -q 2 min(2/4, 4) = 1 (4 connections,
        // where 16 were used before), -q 16 four, the last of a list.
        assert_eq!(compat_threads(&args(&[]), 2, false), 4);
        assert_eq!(compat_threads(&args(&["-q", "2"]), 2, false), 1);
        assert_eq!(compat_threads(&args(&["-q", "16"]), 2, false), 4);
        assert_eq!(compat_threads(&args(&["-q", "16,6"]), 2, false), 1);
        // -l is DRIVER_THREADS; -q is still min(rate/4, it).
        assert_eq!(compat_threads(&args(&["-l", "8"]), 2, false), 8);
        assert_eq!(compat_threads(&args(&["-l", "8", "-q", "40"]), 2, false), 8);
        assert_eq!(compat_threads(&args(&["-l", "2", "-q", "40"]), 2, false), 2);
        // -a in a search: search_qps.sh's cap max(round(nproc/5), 4),
        // whatever -l says; -a with -q: the -q sizing.
        assert_eq!(compat_threads(&args(&["-a", "-l", "9"]), 40, true), 8);
        assert_eq!(compat_threads(&args(&["-a", "-q", "8"]), 40, true), 2);
    }
}
