//! `rackbench resctl hashd`: rd-hashd's command line.

use super::bench::{ConvergeCfg, CpuSearch, MemSearch, MemStage, MemStep};
use super::engine::{Hashd, Stat, Tick};
use super::log::HashLog;
use super::params::{self, Args, Params, ParamsFile};
use super::report::{Phase, Report, Status};
use super::testfiles::TestFiles;
use crate::fmt::{format_size, parse_size};
use clap::Parser;
use harness::Cancel;
use serde::{Deserialize, Serialize};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// hashd: a latency-sensitive workload (rd-hashd's model). Each request
/// reads test-file pages through the page cache, touches anonymous memory,
/// hashes what it read with SHA1 and sleeps; concurrency is steered to
/// keep the p95 latency at the target while meeting the rate target.
#[derive(Debug, Parser)]
#[command(name = "rackbench resctl hashd", disable_version_flag = true)]
pub struct HashdArgs {
    /// Test file directory.
    #[arg(short = 't', long = "testfiles", value_name = "DIR")]
    testfiles: Option<PathBuf>,
    /// Footprint at mem_frac 1.0 (default 4 x memory), e.g. 8G.
    #[arg(short = 's', long = "size", value_name = "SIZE")]
    size: Option<String>,
    /// Share of the footprint backed by test files (0.25).
    #[arg(short = 'f', long = "file-max", value_name = "FRAC")]
    file_max: Option<f64>,
    /// Share of zeros in the test data (0).
    #[arg(short = 'c', long = "compressibility", value_name = "FRAC")]
    compressibility: Option<f64>,
    /// Runtime parameters file (created with defaults when missing;
    /// reloaded when it changes).
    #[arg(short = 'p', long = "params", value_name = "FILE")]
    params: Option<PathBuf>,
    /// Report file, rewritten every second.
    #[arg(short = 'r', long = "report", value_name = "FILE")]
    report: Option<PathBuf>,
    /// Hash log directory.
    #[arg(short = 'l', long = "log-dir", value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// Bytes of hash log kept (default: half of memory).
    #[arg(short = 'L', long = "log-size", value_name = "SIZE")]
    log_size: Option<String>,
    /// Seconds between status lines (10; 0: none).
    #[arg(short = 'i', long = "interval", value_name = "SECS")]
    interval: Option<u32>,
    /// Arguments file: read when it exists, written with the options given.
    #[arg(short = 'a', long = "args", value_name = "FILE")]
    args: Option<PathBuf>,
    /// Keep the test files in the page cache after preparing them.
    #[arg(long)]
    keep_cache: bool,
    /// Remove the test files and exit.
    #[arg(long)]
    clear_testfiles: bool,
    /// Write the args and params files and exit.
    #[arg(long)]
    prepare_config: bool,
    /// Write the config files and the test files and exit.
    #[arg(long)]
    prepare: bool,
    /// Memory size to assume (default: MemTotal).
    #[arg(long, value_name = "SIZE")]
    total_memory: Option<String>,
    /// CPUs to assume (default: those available).
    #[arg(long, value_name = "N")]
    nr_cpus: Option<usize>,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// `--bench-cpu` then `--bench-mem`; the results are saved in the
    /// params file.
    #[arg(long)]
    bench: bool,
    /// Find rps_max: the rate at which the p95 latency meets the target
    /// with the whole footprint in use.
    #[arg(long)]
    bench_cpu: bool,
    /// Find mem_frac: the largest share of the footprint that still
    /// sustains rps_max (taken from the params file unless found in the
    /// same run).
    #[arg(long)]
    bench_mem: bool,
    /// `--bench` with short settling windows, at most two rps_max rounds
    /// and one memory probe per stage (smoke runs, CI); with `--bench-cpu`
    /// or `--bench-mem`, that search only, short.
    #[arg(long)]
    bench_test: bool,
    /// Memory search resolution multiplier (1.0: bisect to 5% and refine
    /// in 2.5% steps; larger is coarser and faster).
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    bench_grain: f64,
}

/// The search `--bench*` runs now.
enum Search {
    None,
    Cpu(CpuSearch),
    Mem(MemSearch),
}

/// `rackbench resctl hashd --help`.
pub fn help() -> String {
    use clap::CommandFactory;
    HashdArgs::command().render_long_help().to_string()
}

pub fn parse(args: &[String]) -> anyhow::Result<HashdArgs> {
    let argv = std::iter::once("hashd".to_string()).chain(args.iter().cloned());
    HashdArgs::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))
}

/// The effective args: the args file (if any), then the options.
fn effective_args(a: &HashdArgs) -> anyhow::Result<(Args, bool)> {
    let mem = match &a.total_memory {
        Some(s) => parse_size(s).map_err(|e| anyhow::anyhow!("--total-memory: {e}"))?,
        None => super::total_memory(),
    };
    let mut args = match &a.args {
        Some(p) if p.exists() => params::load::<Args>(p).map_err(anyhow::Error::msg)?,
        _ => Args::with_mem(mem),
    };
    let mut changed = false;
    if let Some(t) = &a.testfiles {
        args.testfiles = Some(t.display().to_string());
        changed = true;
    }
    if let Some(s) = &a.size {
        args.size = parse_size(s).map_err(|e| anyhow::anyhow!("-s/--size: {e}"))?;
        changed = true;
    }
    if let Some(f) = a.file_max {
        args.file_max_frac = f.clamp(0.0, 1.0);
        changed = true;
    }
    if let Some(c) = a.compressibility {
        args.compressibility = c.clamp(0.0, 1.0);
        changed = true;
    }
    if let Some(p) = &a.params {
        args.params = Some(p.display().to_string());
        changed = true;
    }
    if let Some(r) = &a.report {
        args.report = Some(r.display().to_string());
        changed = true;
    }
    if let Some(l) = &a.log_dir {
        args.log_dir = Some(l.display().to_string());
        changed = true;
    }
    if let Some(s) = &a.log_size {
        args.log_size = parse_size(s).map_err(|e| anyhow::anyhow!("-L/--log-size: {e}"))?;
        changed = true;
    }
    if let Some(i) = a.interval {
        args.interval = i;
        changed = true;
    }
    if args.size == 0 {
        anyhow::bail!("-s/--size: 0 bytes: expected a footprint size such as 4G");
    }
    Ok((args, changed))
}

/// Prints test-file progress: a rewritten line on a terminal, a plain line
/// a second otherwise.
fn progress_printer() -> impl FnMut(u64, u64) {
    let tty = std::io::stderr().is_terminal();
    let mut last = Instant::now() - Duration::from_secs(2);
    move |done, total| {
        if done < total && last.elapsed() < Duration::from_secs(1) {
            return;
        }
        last = Instant::now();
        let pct = 100.0 * done as f64 / total.max(1) as f64;
        let line = format!(
            "testfiles: {pct:6.2}% ({} / {})",
            format_size(done as f64),
            format_size(total as f64)
        );
        if tty {
            eprint!("\r{line}");
            if done >= total {
                eprintln!();
            }
        } else {
            eprintln!("{line}");
        }
    }
}

/// How `rackbench resctl hashd ARGS` ended.
#[derive(Debug, Clone, PartialEq)]
pub enum HashdEnd {
    /// `--clear-testfiles`, `--prepare-config` or `--prepare`: files
    /// written or removed, nothing measured.
    Helper,
    /// A run: its record, and whether it succeeded (neither stopped nor
    /// failed).
    Measured(HashdRecord, bool),
}

/// True when `argv` (after `hashd`) asks for one of hashd's helper
/// commands, which measure nothing.
pub fn is_helper(argv: &[String]) -> bool {
    parse(argv).is_ok_and(|a| a.clear_testfiles || a.prepare_config || a.prepare)
}

/// Runs `rackbench resctl hashd ARGS`.
pub fn run(argv: &[String], cancel: &Cancel) -> anyhow::Result<HashdEnd> {
    let a = parse(argv)?;
    let (args, changed) = effective_args(&a)?;
    let nr_cpus = a
        .nr_cpus
        .unwrap_or_else(harness::machine::usable_cpus)
        .max(1);
    if let (Some(p), true) = (&a.args, changed) {
        params::save_args(p, &args).map_err(anyhow::Error::msg)?;
    }
    let dir = args.testfiles.clone().map(PathBuf::from).ok_or_else(|| {
        anyhow::anyhow!(
            "no test file directory: expected -t/--testfiles DIR (or `testfiles` in the args file)"
        )
    })?;
    if a.clear_testfiles {
        let n = TestFiles::clear(&dir)
            .map_err(|e| anyhow::anyhow!("{}: cannot clear: {e}", dir.display()))?;
        eprintln!("removed {n} test file folders from {}", dir.display());
        return Ok(HashdEnd::Helper);
    }
    let (mut params_file, mut params) = match &args.params {
        Some(p) => {
            let (f, p) =
                ParamsFile::open(Path::new(p), &Params::default()).map_err(anyhow::Error::msg)?;
            (Some(f), p)
        }
        None => (None, Params::default()),
    };
    if params.file_frac > args.file_max_frac {
        params.file_frac = args.file_max_frac;
    }
    // --bench-test alone is both searches, short; with --bench-cpu or
    // --bench-mem it shortens just that one.
    let bench_cpu = a.bench || a.bench_cpu || (a.bench_test && !a.bench_mem);
    let bench_mem = a.bench || a.bench_mem || (a.bench_test && !a.bench_cpu);
    let bench = bench_cpu || bench_mem;
    if !(a.bench_grain > 0.0 && a.bench_grain.is_finite()) {
        anyhow::bail!(
            "--bench-grain {}: expected a positive number such as 1.0",
            a.bench_grain
        );
    }
    if bench_mem && !bench_cpu && params.rps_max == 0 {
        anyhow::bail!(
            "--bench-mem needs rps_max: the params file has rps_max 0 (run --bench-cpu first, or --bench)"
        );
    }
    // The memory search runs at rps_max with the usual access pattern.
    let base = params.clone();
    let mem_params = move |rps_max: u32, mem_frac: f64| Params {
        rps_max,
        rps_target: rps_max,
        mem_frac,
        ..base.clone()
    };
    let saved_params = params.clone();
    if bench_cpu {
        // Only the latency target limits concurrency, and accesses spread
        // over the whole footprint.
        params.rps_target = u32::MAX;
        params.rps_max = 0;
        params.file_addr_stdev_ratio = 100.0;
        params.anon_addr_stdev_ratio = 100.0;
    }
    if a.prepare_config {
        return Ok(HashdEnd::Helper);
    }
    let files = Arc::new(TestFiles::new(
        &dir,
        args.file_max_size(),
        args.compressibility,
    ));
    eprintln!(
        "Populating {} with {} 32M files ({})",
        dir.display(),
        files.nr_files(),
        format_size(files.size() as f64)
    );
    let t0 = Instant::now();
    let prepared = files
        .prepare(&mut progress_printer())
        .map_err(anyhow::Error::msg)?;
    eprintln!(
        "testfiles: {} created, {} reused in {:.1}s",
        prepared.created,
        prepared.reused,
        t0.elapsed().as_secs_f64()
    );
    if !a.keep_cache {
        files.drop_cache();
    }
    if a.prepare {
        return Ok(HashdEnd::Helper);
    }

    let mut log = match &args.log_dir {
        Some(d) => Some(
            HashLog::start(Path::new(d), 1 << 30, args.log_size, params.log_padding())
                .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    let mut hashd =
        Hashd::new(args.clone(), params.clone(), files, nr_cpus).map_err(anyhow::Error::msg)?;
    let (file, anon) = super::engine::footprint(&args, hashd.files.size(), &params);
    eprintln!(
        "Starting hasher (maxcon={} lat={:.1}ms rps={} file={} anon={})",
        params.concurrency_max,
        params.lat_target * 1000.0,
        params.rps_target,
        format_size(file as f64),
        format_size(anon as f64)
    );
    let padding = log.as_ref().map(|l| l.padding_handle());
    let report_path = args.report.clone().map(PathBuf::from);
    let start = Instant::now();
    let mut status = Status::default();
    // Status lines every `interval` seconds of control periods (counting
    // periods: timing each from the last print would skip a line whenever
    // a period ends a hair under a second after it).
    let mut periods_since_status = 0u32;
    let period = params.control_period;
    let mut history: Vec<Stat> = Vec::new();
    let mut report_error = None;
    let mut search = if bench_cpu {
        let cfg = if a.bench_test {
            ConvergeCfg::TEST
        } else {
            ConvergeCfg::CPU
        };
        let rounds = if a.bench_test { 2 } else { 5 };
        Search::Cpu(CpuSearch::new(cfg, params.lat_target, rounds))
    } else if bench_mem {
        let m = MemSearch::new(params.rps_max, a.bench_grain, a.bench_test);
        hashd.set_params(mem_params(params.rps_max, m.frac()));
        Search::Mem(m)
    } else {
        Search::None
    };
    let mut found: Option<(u32, bool)> =
        (bench_mem && !bench_cpu).then_some((params.rps_max, true));
    let mut found_mem: Option<f64> = None;
    let mut mem_probes = Vec::new();
    let mut phase = match &search {
        Search::Cpu(_) => Phase::BenchCpuSaturation,
        Search::Mem(_) => Phase::BenchMemUp,
        Search::None => Phase::Running,
    };
    let result = hashd.run(
        &mut |c| {
            if let Some(l) = log.as_mut() {
                l.log(c.digest, c.latency);
            }
        },
        &mut |s| {
            history.push(s.clone());
            status.add(s);
            if let Some(p) = &report_path
                && let Err(e) = Report::new(phase, s.clone()).save(p)
            {
                report_error = Some(e);
                return Tick::Stop;
            }
            periods_since_status += 1;
            if args.interval > 0
                && f64::from(periods_since_status) * period >= f64::from(args.interval) - 1e-9
            {
                println!("{}", status.line(s));
                periods_since_status = 0;
            }
            if cancel.is_stopped()
                || a.duration
                    .is_some_and(|d| start.elapsed().as_secs_f64() >= d)
            {
                return Tick::Stop;
            }
            let mut line = |l: String| eprintln!("{l}");
            match &mut search {
                Search::None => {}
                Search::Cpu(c) => {
                    let Some(r) = c.push(s.lat.ctl, s.rps, &mut line) else {
                        return Tick::Continue;
                    };
                    found = Some(r);
                    if !bench_mem {
                        return Tick::Stop;
                    }
                    eprintln!("rps_max {}: searching the memory footprint", r.0);
                    let m = MemSearch::new(r.0, a.bench_grain, a.bench_test);
                    let p = mem_params(r.0, m.frac());
                    search = Search::Mem(m);
                    phase = Phase::BenchMemUp;
                    return Tick::Params(Box::new(p));
                }
                Search::Mem(m) => {
                    let step = m.push(s.lat.ctl, s.rps, &mut line);
                    phase = match m.stage() {
                        MemStage::Up => Phase::BenchMemUp,
                        MemStage::Bisect => Phase::BenchMemBisect,
                        MemStage::Refine => Phase::BenchMemRefine,
                    };
                    match step {
                        MemStep::Continue => return Tick::Continue,
                        MemStep::Probe(f) => {
                            let rps_max = found.map(|f| f.0).unwrap_or(0);
                            return Tick::Params(Box::new(mem_params(rps_max, f)));
                        }
                        MemStep::Done(f) => {
                            found_mem = Some(f);
                            mem_probes = m.probes.clone();
                            return Tick::Stop;
                        }
                    }
                }
            }
            if let Some(f) = params_file.as_mut() {
                match f.poll() {
                    Some(Ok(p)) => {
                        eprintln!("Reloaded params file {}", f.path.display());
                        if let Some(pad) = &padding {
                            pad.store(p.log_padding(), std::sync::atomic::Ordering::Relaxed);
                        }
                        return Tick::Params(Box::new(p));
                    }
                    Some(Err(e)) => eprintln!("warning: params not reloaded: {e}"),
                    None => {}
                }
            }
            Tick::Continue
        },
    );
    let dropped = log.as_ref().map(|l| l.dropped).unwrap_or(0);
    if let Some(l) = log.take() {
        l.finish().map_err(anyhow::Error::msg)?;
    }
    if let Some(e) = report_error {
        anyhow::bail!(e);
    }
    // Bench results are kept only when each requested search finished.
    let complete = (!bench_cpu || found.is_some()) && (!bench_mem || found_mem.is_some());
    let mut bench_result = None;
    if let (Some((rps_max, met)), true) = (found, bench && complete) {
        let mem_frac = found_mem.unwrap_or(saved_params.mem_frac);
        let (file, anon) = super::engine::footprint(
            &args,
            hashd.files.size(),
            &Params {
                mem_frac,
                ..saved_params.clone()
            },
        );
        let r = BenchResult {
            rps_max,
            converged: met,
            footprint_bytes: file + anon,
            mem_frac,
            hash_size: saved_params.file_size_mean as u64,
            mem: bench_mem.then(|| MemResult {
                mem_size: args.size,
                probes: mem_probes
                    .iter()
                    .map(|p| ProbeRecord {
                        stage: p.stage.name().to_string(),
                        mem_frac: p.mem_frac,
                        rps: p.rps,
                        end: p.end.to_string(),
                    })
                    .collect(),
            }),
        };
        eprintln!("{}", r.line());
        if let Some(f) = &params_file {
            let p = Params {
                rps_max,
                mem_frac,
                ..saved_params.clone()
            };
            params::save_params(&f.path, &p).map_err(anyhow::Error::msg)?;
            eprintln!("bench results saved in {}", f.path.display());
        }
        bench_result = Some(r);
    }
    let interrupted = cancel.is_stopped();
    let error = result.err();
    if let Some(e) = &error {
        eprintln!("hashd failed: {e}");
    }
    let record = HashdRecord {
        summary: HashdSummary::of(&history),
        bench: bench.then_some(BenchRecord {
            result: bench_result,
        }),
        elapsed_secs: start.elapsed().as_secs_f64(),
        testfiles_created: prepared.created,
        testfiles_reused: prepared.reused,
        log_lines_dropped: dropped,
        interrupted,
        error,
    };
    let success = record.success();
    Ok(HashdEnd::Measured(record, success))
}

/// What a hashd run keeps with its stored run; the report's metrics are
/// derived from it ([`HashdRecord::metrics`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HashdRecord {
    pub summary: HashdSummary,
    /// With `--bench*`.
    pub bench: Option<BenchRecord>,
    pub elapsed_secs: f64,
    pub testfiles_created: u64,
    pub testfiles_reused: u64,
    pub log_lines_dropped: u64,
    /// Stopped by Ctrl-C (or the job's timeout) rather than `--duration`.
    pub interrupted: bool,
    /// What made the run fail, if something did.
    pub error: Option<String>,
}

/// The run's figures: means over the second half of the control periods
/// (the first half is the controllers settling).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HashdSummary {
    pub periods: usize,
    pub rps: f64,
    pub concurrency: f64,
    /// Latency percentiles, seconds.
    pub lat_p50: f64,
    pub lat_p95: f64,
    pub lat_p99: f64,
    /// Requests done over the whole run.
    pub nr_done: u64,
}

/// A `--bench*` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchRecord {
    /// `None` unless every requested search finished.
    pub result: Option<BenchResult>,
}

/// What the searches found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    pub rps_max: u32,
    /// False when rps_max did not converge to the latency target.
    pub converged: bool,
    /// The memory footprint at `mem_frac`, bytes.
    pub footprint_bytes: u64,
    /// Found by the memory search, else the params file's.
    pub mem_frac: f64,
    /// Mean file bytes per request (`file_size_mean`).
    pub hash_size: u64,
    /// With the memory search.
    pub mem: Option<MemResult>,
}

/// The memory search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemResult {
    /// The footprint at mem_frac 1.0 (`--size`).
    pub mem_size: u64,
    pub probes: Vec<ProbeRecord>,
}

/// One probe of the memory search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    pub stage: String,
    pub mem_frac: f64,
    pub rps: f64,
    pub end: String,
}

/// The report's metrics of a hashd run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HashdMetrics {
    pub periods: usize,
    pub rps: f64,
    pub concurrency: f64,
    pub lat_p50_ms: f64,
    pub lat_p95_ms: f64,
    pub lat_p99_ms: f64,
    pub nr_done: u64,
    /// With `--bench*`: `false` unless the searches finished and rps_max
    /// converged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rps_max_converged: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rps_max: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_frac: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_probes: Option<Vec<ProbeMetrics>>,
    pub elapsed_secs: f64,
    pub testfiles_created: u64,
    pub testfiles_reused: u64,
    pub log_lines_dropped: u64,
    /// Only `true`, when interrupted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A memory probe in the metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeMetrics {
    pub stage: String,
    pub mem_frac: f64,
    pub rps: f64,
    pub end: String,
}

impl HashdSummary {
    /// The means over the second half of `history`.
    pub fn of(history: &[Stat]) -> HashdSummary {
        let tail = &history[history.len() / 2..];
        let n = tail.len().max(1) as f64;
        let mean = |f: &dyn Fn(&Stat) -> f64| tail.iter().map(f).sum::<f64>() / n;
        HashdSummary {
            periods: history.len(),
            rps: mean(&|s| s.rps),
            concurrency: mean(&|s| s.concurrency),
            lat_p50: mean(&|s| s.lat.p50),
            lat_p95: mean(&|s| s.lat.p95),
            lat_p99: mean(&|s| s.lat.p99),
            nr_done: history.last().map(|s| s.nr_done).unwrap_or(0),
        }
    }
}

impl BenchResult {
    /// The `Bench results:` line hashd prints.
    pub fn line(&self) -> String {
        format!(
            "Bench results: memory {} ({:.2}%), hash {}, rps {}{}",
            format_size(self.footprint_bytes as f64),
            self.mem_frac * 100.0,
            format_size(self.hash_size as f64),
            self.rps_max,
            if self.converged {
                ""
            } else {
                " (failed to converge to the latency target)"
            }
        )
    }
}

impl HashdRecord {
    /// Neither stopped nor failed.
    pub fn success(&self) -> bool {
        !self.interrupted && self.error.is_none()
    }

    /// The report's metrics of the run.
    pub fn metrics(&self) -> HashdMetrics {
        let s = &self.summary;
        let found = self.bench.as_ref().and_then(|b| b.result.as_ref());
        let mem = found.and_then(|r| r.mem.as_ref());
        HashdMetrics {
            periods: s.periods,
            rps: s.rps,
            concurrency: s.concurrency,
            lat_p50_ms: s.lat_p50 * 1000.0,
            lat_p95_ms: s.lat_p95 * 1000.0,
            lat_p99_ms: s.lat_p99 * 1000.0,
            nr_done: s.nr_done,
            rps_max_converged: self
                .bench
                .as_ref()
                .map(|b| b.result.as_ref().is_some_and(|r| r.converged)),
            rps_max: found.map(|r| r.rps_max),
            mem_frac: mem.and(found).map(|r| r.mem_frac),
            mem_size: mem.map(|m| m.mem_size),
            mem_probes: mem.map(|m| {
                m.probes
                    .iter()
                    .map(|p| ProbeMetrics {
                        stage: p.stage.clone(),
                        mem_frac: p.mem_frac,
                        rps: p.rps,
                        end: p.end.clone(),
                    })
                    .collect()
            }),
            elapsed_secs: self.elapsed_secs,
            testfiles_created: self.testfiles_created,
            testfiles_reused: self.testfiles_reused,
            log_lines_dropped: self.log_lines_dropped,
            interrupted: self.interrupted.then_some(true),
            error: self.error.clone(),
        }
    }

    /// A short summary of the run: the bench results line hashd printed,
    /// the means it reports, and how it ended.
    pub fn write_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        if let Some(r) = self.bench.as_ref().and_then(|b| b.result.as_ref()) {
            writeln!(out, "{}", r.line())?;
        } else if self.bench.is_some() {
            writeln!(out, "hashd: the bench did not finish its searches")?;
        }
        let s = &self.summary;
        writeln!(
            out,
            "hashd: {} periods in {:.1}s, {} requests; second half: rps {:.1} con {:.1} \
             p50 {:.1}ms p95 {:.1}ms p99 {:.1}ms",
            s.periods,
            self.elapsed_secs,
            s.nr_done,
            s.rps,
            s.concurrency,
            s.lat_p50 * 1000.0,
            s.lat_p95 * 1000.0,
            s.lat_p99 * 1000.0
        )?;
        if let Some(e) = &self.error {
            writeln!(out, "hashd failed: {e}")?;
        } else if self.interrupted {
            writeln!(out, "hashd: interrupted")?;
        }
        Ok(())
    }
}
