//! `rackbench resctl hashd`: rd-hashd's command line.

use super::bench::{
    self as search, ConvergeCfg, CpuSearch, MemSearch, MemStage, MemStep, SingleSearch, SingleStep,
};
use super::engine::{Hashd, Stat, Tick};
use super::log::HashLog;
use super::params::{self, Args, Params, ParamsFile};
use super::report::{Phase, Report, Status};
use super::testfiles::{self as tfiles, TestFiles};
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
    /// Force rotational mode on (true) or off (false) instead of detecting
    /// it from the test files' and swap's devices; rotational mode
    /// lengthens the memory search's settling windows and keeps a slow
    /// round from ending early. Saved in the args file.
    #[arg(short = 'R', long = "rotational", value_name = "BOOL")]
    rotational: Option<bool>,
    /// Don't drop the test files from the page cache after preparing them.
    #[arg(long)]
    keep_cache: bool,
    /// Clear the test files before preparing them (then carry on).
    #[arg(long)]
    clear_testfiles: bool,
    /// Print the version (`rd-hashd VERSION TARGET`) and exit.
    #[arg(short = 'V', long = "version")]
    version: bool,
    /// Write the args and params files and exit.
    #[arg(long)]
    prepare_config: bool,
    /// Write the config files and the test files and exit.
    #[arg(long)]
    prepare: bool,
    /// `--bench-cpu` then `--bench-mem`; the results are saved in the
    /// params file.
    #[arg(long)]
    bench: bool,
    /// Benchmark the hash size (file_size_mean: a lone request hashes for
    /// 15 ms) and chunk_pages instead of taking them from the params file;
    /// runs before `--bench-cpu`/`--bench-mem` when given with them, alone
    /// it is the whole bench.
    #[arg(long)]
    bench_cpu_single: bool,
    /// Find rps_max: the rate at which the p95 latency meets the target
    /// with the whole footprint in use. Implied by `--bench`.
    #[arg(long)]
    bench_cpu: bool,
    /// Find mem_frac: the largest share of the footprint that still
    /// sustains rps_max (taken from the params file unless found in the
    /// same run or given with `--bench-rps-max`). Implied by `--bench`.
    #[arg(long)]
    bench_mem: bool,
    /// `--bench` with short settling windows, at most two rounds of each
    /// search and one memory probe per stage (smoke runs, CI); with
    /// `--bench-cpu`, `--bench-mem` or `--bench-cpu-single`, those only,
    /// short.
    #[arg(long)]
    bench_test: bool,
    /// Memory search resolution multiplier (1.0: bisect to 5% and refine
    /// in 2.5% steps; larger is coarser and faster).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    bench_grain: f64,
    /// Fake the CPU load (sleep instead of hashing) during the memory
    /// bench; saved in the params file.
    #[arg(long)]
    bench_fake_cpu_load: bool,
    /// Use this hash size (file_size_mean) in the bench instead of the
    /// params file's or `--bench-cpu-single`'s (0: not given).
    #[arg(long, value_name = "SIZE")]
    bench_hash_size: Option<String>,
    /// Use this chunk_pages in the bench (0: not given).
    #[arg(long, value_name = "PAGES")]
    bench_chunk_pages: Option<usize>,
    /// Use this rps_max instead of searching for it (0: not given).
    #[arg(long, value_name = "RPS")]
    bench_rps_max: Option<u32>,
    /// Hash log write rate at rps_max (log_bps) saved by the bench
    /// (default: the params file's, 1.05M).
    #[arg(long, value_name = "BPS")]
    bench_log_bps: Option<String>,
    /// Page cache share of the footprint (file_frac) for the memory bench,
    /// saved with its results (0: the params file's, 0.25).
    #[arg(long, value_name = "FRAC")]
    bench_file_frac: Option<f64>,
    /// Before the memory bench, read this much of the test files into the
    /// page cache (default: memory x min(2 x file_frac, 1); 0: default;
    /// not with `--bench-test`).
    #[arg(long, value_name = "SIZE")]
    bench_preload_cache: Option<String>,
    /// Memory size to assume (default: MemTotal).
    #[arg(long, value_name = "SIZE")]
    total_memory: Option<String>,
    /// Swap size to assume (hashd sizes nothing by swap; checked only).
    #[arg(long, value_name = "SIZE")]
    total_swap: Option<String>,
    /// CPUs to assume (default: those available).
    #[arg(long, value_name = "NR")]
    nr_cpus: Option<usize>,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// More detail: -v adds concurrency, in-flight, workers and done counts
    /// to the status and settling lines; -vv also drops the test file
    /// progress lines.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    verbose: u8,
    /// Also write hashd's messages and status lines to FILE (appended).
    #[arg(long, value_name = "FILE")]
    logfile: Option<PathBuf>,
}

/// The search `--bench*` runs now.
enum Search {
    None,
    Single(SingleSearch),
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
    if let Some(r) = a.rotational {
        args.rotational = Some(r);
        changed = true;
    }
    if args.size == 0 {
        anyhow::bail!("-s/--size: 0 bytes: expected a footprint size such as 4G");
    }
    Ok((args, changed))
}

/// Where hashd's messages go: stderr, and the `--logfile` when given.
struct Out {
    file: Option<std::sync::Mutex<std::fs::File>>,
    verbose: u8,
}

impl Out {
    fn open(path: Option<&Path>, verbose: u8) -> anyhow::Result<Out> {
        let file = match path {
            Some(p) => Some(std::sync::Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| anyhow::anyhow!("--logfile {}: cannot open: {e}", p.display()))?,
            )),
            None => None,
        };
        Ok(Out { file, verbose })
    }

    /// A message: stderr and the log file.
    fn say(&self, line: &str) {
        eprintln!("{line}");
        self.log(line);
    }

    /// A line for the log file only (stdout lines).
    fn log(&self, line: &str) {
        if let Some(f) = &self.file {
            use std::io::Write;
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(f, "[{}] {line}", crate::clock::Local::now().rfc3339());
        }
    }

    /// Test-file progress: a rewritten line on a terminal, a plain line a
    /// second otherwise; none with -vv.
    fn progress<'a>(&'a self, what: &'a str) -> impl FnMut(u64, u64) + 'a {
        let tty = std::io::stderr().is_terminal();
        let mut last = Instant::now() - Duration::from_secs(2);
        move |done, total| {
            if self.verbose > 1 || (done < total && last.elapsed() < Duration::from_secs(1)) {
                return;
            }
            last = Instant::now();
            let pct = 100.0 * done as f64 / total.max(1) as f64;
            let line = format!(
                "{what}: {pct:6.2}% ({} / {})",
                format_size(done as f64),
                format_size(total as f64)
            );
            if tty {
                eprint!("\r{line}");
                if done >= total {
                    eprintln!();
                }
                self.log(&line);
            } else {
                self.say(&line);
            }
        }
    }
}

/// The details -v adds to a line.
fn verbose_detail(s: &Stat) -> String {
    format!(
        "/{:.1} infl:{} workers:{}/{} done:{}",
        s.concurrency_max,
        s.nr_in_flight,
        s.nr_workers - s.nr_idle_workers,
        s.nr_workers,
        s.nr_done
    )
}

/// The `--bench-*` settings, checked.
struct BenchOpts {
    single: bool,
    cpu: bool,
    mem: bool,
    hash_size: Option<usize>,
    chunk_pages: Option<usize>,
    rps_max: Option<u32>,
    log_bps: Option<u64>,
    file_frac: Option<f64>,
    preload: Option<u64>,
}

impl BenchOpts {
    fn of(a: &HashdArgs) -> anyhow::Result<BenchOpts> {
        // --bench-test alone is both searches, short; with a search named
        // it shortens just those.
        let named = a.bench_cpu || a.bench_mem || a.bench_cpu_single;
        let o = BenchOpts {
            single: a.bench_cpu_single,
            cpu: a.bench || a.bench_cpu || (a.bench_test && !named),
            mem: a.bench || a.bench_mem || (a.bench_test && !named),
            hash_size: match &a.bench_hash_size {
                Some(s) => Some(
                    parse_size(s).map_err(|e| anyhow::anyhow!("--bench-hash-size: {e}"))? as usize,
                )
                .filter(|v| *v > 0),
                None => None,
            },
            chunk_pages: a.bench_chunk_pages.filter(|v| *v > 0),
            rps_max: a.bench_rps_max.filter(|v| *v > 0),
            log_bps: match &a.bench_log_bps {
                Some(s) => {
                    Some(parse_size(s).map_err(|e| anyhow::anyhow!("--bench-log-bps: {e}"))?)
                }
                None => None,
            },
            file_frac: match a.bench_file_frac {
                Some(f) if !f.is_finite() || f < 0.0 => anyhow::bail!(
                    "--bench-file-frac {f}: expected a fraction of 0 or more such as 0.25"
                ),
                Some(f) => Some(f).filter(|v| *v > 0.0),
                None => None,
            },
            preload: match &a.bench_preload_cache {
                Some(s) => {
                    Some(parse_size(s).map_err(|e| anyhow::anyhow!("--bench-preload-cache: {e}"))?)
                        .filter(|v| *v > 0)
                }
                None => None,
            },
        };
        if !(a.bench_grain > 0.0 && a.bench_grain.is_finite()) {
            anyhow::bail!(
                "--bench-grain {}: expected a positive number such as 1.0",
                a.bench_grain
            );
        }
        let any = o.single || o.cpu || o.mem;
        let given = |flag: &str, set: bool, ok: bool, what: &str| -> anyhow::Result<()> {
            if set && !ok {
                anyhow::bail!("{flag}: only used by {what}; add it, or drop {flag}");
            }
            Ok(())
        };
        let benches =
            "a bench (--bench, --bench-cpu, --bench-mem, --bench-cpu-single or --bench-test)";
        let searches = "the rps_max or memory search (--bench, --bench-cpu or --bench-mem)";
        let mem = "the memory bench (--bench or --bench-mem)";
        given(
            "--bench-hash-size",
            a.bench_hash_size.is_some(),
            any,
            benches,
        )?;
        given(
            "--bench-chunk-pages",
            a.bench_chunk_pages.is_some(),
            any,
            benches,
        )?;
        given("--bench-log-bps", a.bench_log_bps.is_some(), any, benches)?;
        given(
            "--bench-rps-max",
            a.bench_rps_max.is_some(),
            o.cpu || o.mem,
            searches,
        )?;
        given("--bench-fake-cpu-load", a.bench_fake_cpu_load, o.mem, mem)?;
        given("--bench-file-frac", a.bench_file_frac.is_some(), o.mem, mem)?;
        given(
            "--bench-preload-cache",
            a.bench_preload_cache.is_some(),
            o.mem,
            mem,
        )?;
        if (a.prepare || a.prepare_config) && any {
            anyhow::bail!(
                "--prepare/--prepare-config: exit before any bench; drop the --bench flags"
            );
        }
        Ok(o)
    }
}

/// Seconds a byte of test files takes to read and hash (SHA1), over
/// `size` bytes read `chunk_pages` pages at a time through the files.
fn time_hash(files: &TestFiles, size: u64, chunk_pages: usize) -> Result<f64, String> {
    use sha1::{Digest, Sha1};
    let chunk = chunk_pages.max(1) * 4096;
    let pages = (files.size() / 4096).max(1);
    let mut h = Sha1::new();
    let mut buf = Vec::with_capacity(chunk);
    let t0 = Instant::now();
    let mut page = 0u64;
    let mut done = 0u64;
    while done < size {
        buf.clear();
        let n = files
            .read_pages(page % pages, chunk, &mut buf)
            .map_err(|e| format!("timing the hash: reading test file page {page}: {e}"))?;
        h.update(&buf);
        done += n.max(1) as u64;
        page += chunk_pages.max(1) as u64;
    }
    let _ = h.finalize();
    Ok(t0.elapsed().as_secs_f64() / done.max(1) as f64)
}

/// The params of the single-CPU bench's rounds: one request at a time, no
/// sleep, fixed sizes, accesses spread over the whole footprint.
fn single_params(base: &Params, file_size_mean: usize) -> Params {
    Params {
        concurrency_max: 1,
        rps_target: u32::MAX,
        rps_max: 0,
        file_size_mean,
        file_size_stdev_ratio: 0.0,
        file_addr_stdev_ratio: 100.0,
        anon_size_stdev_ratio: 0.0,
        anon_addr_stdev_ratio: 100.0,
        sleep_mean: 0.0,
        sleep_stdev_ratio: 0.0,
        ..base.clone()
    }
}

/// The params of the rps_max search: only the latency target limits
/// concurrency, and accesses spread over the whole footprint.
fn cpu_params(base: &Params) -> Params {
    Params {
        rps_target: u32::MAX,
        rps_max: 0,
        file_addr_stdev_ratio: 100.0,
        anon_addr_stdev_ratio: 100.0,
        ..base.clone()
    }
}

/// The params of a memory probe: rps_max with the usual access pattern.
fn mem_params(base: &Params, rps_max: u32, mem_frac: f64) -> Params {
    Params {
        rps_max,
        rps_target: rps_max,
        mem_frac,
        ..base.clone()
    }
}

/// How `rackbench resctl hashd ARGS` ended.
#[derive(Debug, Clone, PartialEq)]
// One value per run, moved once: boxing the record would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum HashdEnd {
    /// `--prepare-config` or `--prepare`: files written, nothing measured.
    Helper,
    /// A run: its record, and whether it succeeded (neither stopped nor
    /// failed).
    Measured(HashdRecord, bool),
}

/// True when `argv` (after `hashd`) asks for one of hashd's helper
/// commands, which measure nothing.
pub fn is_helper(argv: &[String]) -> bool {
    parse(argv).is_ok_and(|a| a.prepare_config || a.prepare || a.version)
}

/// Runs `rackbench resctl hashd ARGS`.
pub fn run(argv: &[String], cancel: &Cancel) -> anyhow::Result<HashdEnd> {
    let a = parse(argv)?;
    if a.version {
        // As upstream's clap prints it.
        println!("rd-hashd {}", crate::full_version());
        return Ok(HashdEnd::Helper);
    }
    let (ctx, start) = Ctx::setup(&a)?;
    let StartParams {
        file: params_file,
        params,
        mut base,
    } = start;
    let Some((files, prepared)) = ctx.prepare_files()? else {
        return Ok(HashdEnd::Helper);
    };
    let single_size = ctx.single_start_size(&files, &mut base)?;
    let start_params = ctx.start_params(&base, &params, single_size);
    let mut log = match &ctx.args.log_dir {
        Some(d) => Some(
            HashLog::start(
                Path::new(d),
                1 << 30,
                ctx.args.log_size,
                start_params.log_padding(),
            )
            .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    let preload_files = files.clone();
    let mut hashd = Hashd::new(ctx.args.clone(), start_params.clone(), files, ctx.nr_cpus)
        .map_err(anyhow::Error::msg)?;
    let (file, anon) = super::engine::footprint(&ctx.args, hashd.files.size(), &start_params);
    ctx.out.say(&format!(
        "Starting hasher (maxcon={} lat={:.1}ms rps={} file={} anon={})",
        start_params.concurrency_max,
        start_params.lat_target * 1000.0,
        start_params.rps_target,
        format_size(file as f64),
        format_size(anon as f64)
    ));
    let mut drive = Drive::new(
        &ctx,
        cancel,
        DriveStart {
            base,
            params_file,
            padding: log.as_ref().map(|l| l.padding_handle()),
            preload_files,
            single_size,
            period: start_params.control_period,
        },
        &mut hashd,
    )?;
    let result = hashd.run(
        &mut |c| {
            if let Some(l) = log.as_mut() {
                l.log(c.digest, c.latency);
            }
        },
        &mut |s| drive.tick(s),
    );
    let dropped = log.as_ref().map(|l| l.dropped).unwrap_or(0);
    if let Some(l) = log.take() {
        l.finish().map_err(anyhow::Error::msg)?;
    }
    if let Some(e) = drive.report_error.take() {
        anyhow::bail!(e);
    }
    let record = drive.record(
        &params,
        hashd.files.size(),
        result.map_err(String::from),
        &prepared,
        dropped,
    )?;
    let success = record.success();
    Ok(HashdEnd::Measured(record, success))
}

/// Whether hashd runs in rotational mode, and what was detected.
#[derive(Debug, Clone, Copy)]
struct Rotation {
    on: bool,
    testfiles: bool,
    swap: bool,
}

impl Rotation {
    /// Rotational mode: detected from the devices unless forced.
    fn detect(out: &Out, dir: &Path, forced: Option<bool>) -> Rotation {
        // The device of the test file directory, or of its nearest existing
        // parent before it is made.
        let rot_tf = dir
            .ancestors()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .find(|p| p.exists())
            .is_some_and(|p| tfiles::is_rotational(p, false));
        let rot_swap = tfiles::is_swap_rotational();
        let on = match (forced, rot_tf || rot_swap) {
            (Some(r), true) => {
                out.say(&format!(
                    "Hard disk detected (testfiles={rot_tf}, swap={rot_swap}){}",
                    if r {
                        ", enabling rotational mode"
                    } else {
                        " but rotational mode is inhibited"
                    }
                ));
                r
            }
            (None, true) => {
                out.say(&format!(
                    "Hard disk detected (testfiles={rot_tf}, swap={rot_swap}), enabling rotational mode"
                ));
                true
            }
            (Some(true), false) => {
                out.say("No hard disk detected but forcing rotational mode");
                true
            }
            (_, false) => false,
        };
        Rotation {
            on,
            testfiles: rot_tf,
            swap: rot_swap,
        }
    }
}

/// The params a run starts from.
struct StartParams {
    /// The `--params` file, watched for changes.
    file: Option<ParamsFile>,
    /// As read (file_frac capped to --file-max): what the bench keeps
    /// unless it finds a value.
    params: Params,
    /// What the bench starts from: the params file's, with what was given.
    base: Params,
}

/// What the flags decided before anything runs (setup: flags -> engine).
struct Ctx<'a> {
    a: &'a HashdArgs,
    out: Out,
    args: Args,
    bo: BenchOpts,
    nr_cpus: usize,
    dir: PathBuf,
    search_single: bool,
    search_cpu: bool,
    bench: bool,
    rot: Rotation,
    report_path: Option<PathBuf>,
}

impl<'a> Ctx<'a> {
    fn setup(a: &'a HashdArgs) -> anyhow::Result<(Ctx<'a>, StartParams)> {
        let out = Out::open(a.logfile.as_deref(), a.verbose)?;
        let (args, changed) = effective_args(a)?;
        let bo = BenchOpts::of(a)?;
        if let Some(s) = &a.total_swap {
            parse_size(s).map_err(|e| anyhow::anyhow!("--total-swap: {e}"))?;
        }
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
        let (file, mut params) = match &args.params {
            Some(p) => {
                let (f, p) = ParamsFile::open(Path::new(p), &Params::default())
                    .map_err(anyhow::Error::msg)?;
                (Some(f), p)
            }
            None => (None, Params::default()),
        };
        if params.file_frac > args.file_max_frac {
            out.say("--file-max is lower than the params' file_frac, adjusting file_frac");
            params.file_frac = args.file_max_frac;
        }
        let search_single = bo.single && bo.hash_size.is_none();
        let search_cpu = bo.cpu && bo.rps_max.is_none();
        let bench = bo.single || bo.cpu || bo.mem;
        if bo.mem && !bo.cpu && bo.rps_max.is_none() && params.rps_max == 0 {
            anyhow::bail!(
                "--bench-mem needs rps_max: the params file has rps_max 0 (run --bench-cpu first, --bench, or give --bench-rps-max)"
            );
        }
        let base = bench_base(a, &bo, &params, search_single);
        let rot = Rotation::detect(&out, &dir, args.rotational);
        let report_path = args.report.clone().map(PathBuf::from);
        let ctx = Ctx {
            a,
            out,
            args,
            bo,
            nr_cpus,
            dir,
            search_single,
            search_cpu,
            bench,
            rot,
            report_path,
        };
        Ok((ctx, StartParams { file, params, base }))
    }

    /// Writes the `--report` file, when asked for.
    fn write_report(&self, phase: Phase, stat: Stat, progress: f64) -> anyhow::Result<()> {
        if let Some(p) = &self.report_path {
            let mut r = Report::new(phase, stat);
            r.rotational = self.rot.on;
            r.rotational_testfiles = self.rot.testfiles;
            r.rotational_swap = self.rot.swap;
            r.testfiles_progress = progress;
            r.save(p).map_err(anyhow::Error::msg)?;
        }
        Ok(())
    }

    /// The phase the report shows while the test files are made.
    fn first_phase(&self) -> Phase {
        if self.search_single {
            Phase::BenchCpuSinglePrep
        } else if self.search_cpu {
            Phase::BenchCpuSaturationPrep
        } else if self.bo.mem {
            Phase::BenchMemPrep
        } else {
            Phase::Prep
        }
    }

    /// Clears (when asked) and prepares the test files; None when a helper
    /// command (`--prepare-config`, `--prepare`) ends there.
    fn prepare_files(&self) -> anyhow::Result<Option<(Arc<TestFiles>, tfiles::Prepared)>> {
        let (a, out, dir) = (self.a, &self.out, &self.dir);
        if a.clear_testfiles {
            out.say(&format!("Clearing {}", dir.display()));
            let n = TestFiles::clear(dir)
                .map_err(|e| anyhow::anyhow!("{}: cannot clear: {e}", dir.display()))?;
            out.say(&format!(
                "removed {n} test file folders from {}",
                dir.display()
            ));
        }
        if a.prepare_config {
            return Ok(None);
        }
        let files = Arc::new(TestFiles::new(
            dir,
            self.args.file_max_size(),
            self.args.compressibility,
        ));
        out.say(&format!(
            "Populating {} with {} 32M files ({})",
            dir.display(),
            files.nr_files(),
            format_size(files.size() as f64)
        ));
        self.write_report(self.first_phase(), Stat::default(), 0.0)?;
        let t0 = Instant::now();
        let prepared = files
            .prepare(&mut out.progress("testfiles"))
            .map_err(anyhow::Error::msg)?;
        out.say(&format!(
            "testfiles: {} created, {} reused in {:.1}s",
            prepared.created,
            prepared.reused,
            t0.elapsed().as_secs_f64()
        ));
        if !a.keep_cache {
            out.say("Dropping page cache for testfiles");
            files.drop_cache();
        }
        if a.prepare {
            return Ok(None);
        }
        Ok(Some((files, prepared)))
    }

    /// Before the memory bench (not in its short form): warm the page cache
    /// with the hottest test file pages.
    fn preload(&self, files: &TestFiles) -> Result<(), String> {
        if self.a.bench_test {
            return Ok(());
        }
        let size = self.bo.preload.unwrap_or_else(|| {
            let file_frac = self.bo.file_frac.unwrap_or(Params::default().file_frac);
            ((self.args.size / 4) as f64 * (file_frac * 2.0).min(1.0)) as u64
        });
        self.out.say(&format!(
            "Preloading {} into cache",
            format_size(size as f64)
        ));
        files
            .preload(size, &mut self.out.progress("Preloading testfiles"))
            .map(|_| ())
            .map_err(|e| format!("preloading the test files: {e}"))
    }

    /// The single-CPU bench first times the hashing to start near the
    /// size; the hash size to start from.
    fn single_start_size(&self, files: &TestFiles, base: &mut Params) -> anyhow::Result<usize> {
        if !self.search_single {
            return Ok(base.file_size_mean);
        }
        let size = if self.a.bench_test {
            search::TIME_HASH_SIZE_TEST
        } else {
            search::TIME_HASH_SIZE
        };
        let mut last_chunk = 1;
        let mut same = 0;
        let mut p = base.clone();
        for _ in 0..10 {
            let per_byte = time_hash(files, size, p.chunk_pages).map_err(anyhow::Error::msg)?;
            p.file_size_mean = search::calc_file_size_mean(base, per_byte);
            p.chunk_pages = search::calc_chunk_pages(&Params {
                file_size_mean: p.file_size_mean,
                ..base.clone()
            });
            if p.chunk_pages == last_chunk {
                same += 1;
                if same >= 2 {
                    break;
                }
            } else {
                last_chunk = p.chunk_pages;
                same = 0;
            }
        }
        let single_size = (p.file_size_mean as f64 * 1.05) as usize;
        if self.bo.chunk_pages.is_none() {
            base.chunk_pages = p.chunk_pages;
        }
        self.out.say(&format!(
            "time_hash: {} hashed, starting at hash size {} chunk {} pages",
            format_size(size as f64),
            format_size(single_size as f64),
            p.chunk_pages
        ));
        Ok(single_size)
    }

    /// The params the hasher starts with.
    fn start_params(&self, base: &Params, params: &Params, single_size: usize) -> Params {
        if self.search_single {
            single_params(base, single_size)
        } else if self.search_cpu {
            cpu_params(base)
        } else if self.bench {
            mem_params(base, self.bo.rps_max.unwrap_or(base.rps_max), 1.0)
        } else {
            params.clone()
        }
    }

    fn new_mem_search(&self, rps_max: u32) -> MemSearch {
        let mut m = MemSearch::new(rps_max, self.a.bench_grain, self.a.bench_test);
        m.set_rotational(self.rot.on);
        m
    }

    fn new_cpu_search(&self, lat_target: f64) -> CpuSearch {
        let cfg = if self.a.bench_test {
            ConvergeCfg::TEST
        } else {
            ConvergeCfg::CPU
        };
        let rounds = if self.a.bench_test { 2 } else { 5 };
        CpuSearch::new(cfg, lat_target, rounds)
    }
}

/// What the bench starts from: `params` with the `--bench-*` values given.
fn bench_base(a: &HashdArgs, bo: &BenchOpts, params: &Params, search_single: bool) -> Params {
    let mut base = params.clone();
    if let Some(h) = bo.hash_size {
        base.file_size_mean = h;
    }
    if let (true, None) = (bo.single, bo.chunk_pages) {
        if !search_single {
            base.chunk_pages = search::calc_chunk_pages(&base);
        }
    } else if let Some(c) = bo.chunk_pages {
        base.chunk_pages = c;
    }
    if let Some(l) = bo.log_bps {
        base.log_bps = l;
    }
    // The memory bench's own settings (saved with its result).
    if bo.mem {
        if a.bench_fake_cpu_load {
            base.fake_cpu_load = true;
        }
        if let Some(f) = bo.file_frac {
            base.file_frac = f.max(params::FILE_FRAC_MIN);
        }
    }
    base
}

/// The single-CPU bench's result line.
fn single_line(base: &Params) -> String {
    format!(
        "[ Single cpu result: hash size {}, anon access {}, chunk {} pages ]",
        format_size(base.file_size_mean as f64),
        format_size(base.file_size_mean as f64 * base.anon_size_ratio),
        base.chunk_pages
    )
}

/// What [`Drive::new`] takes over from the setup.
struct DriveStart {
    base: Params,
    params_file: Option<ParamsFile>,
    padding: Option<Arc<std::sync::atomic::AtomicUsize>>,
    preload_files: Arc<TestFiles>,
    single_size: usize,
    period: f64,
}

/// The run between control periods (drive): the search, what it found,
/// and the status lines.
struct Drive<'c, 'a> {
    ctx: &'c Ctx<'a>,
    cancel: &'c Cancel,
    base: Params,
    lat_target: f64,
    params_file: Option<ParamsFile>,
    padding: Option<Arc<std::sync::atomic::AtomicUsize>>,
    preload_files: Arc<TestFiles>,
    start: Instant,
    period: f64,
    status: Status,
    /// Status lines every `interval` seconds of control periods (counting
    /// periods: timing each from the last print would skip a line whenever
    /// a period ends a hair under a second after it).
    periods_since_status: u32,
    history: Vec<Stat>,
    report_error: Option<anyhow::Error>,
    search: Search,
    phase: Phase,
    /// rps_max (and whether it met the target) once known.
    found: Option<(u32, bool)>,
    found_single: Option<(usize, bool)>,
    found_mem: Option<f64>,
    mem_probes: Vec<search::Probe>,
}

impl<'c, 'a> Drive<'c, 'a> {
    fn new(
        ctx: &'c Ctx<'a>,
        cancel: &'c Cancel,
        d: DriveStart,
        hashd: &mut Hashd,
    ) -> anyhow::Result<Drive<'c, 'a>> {
        let start = Instant::now();
        let (a, bo, base) = (ctx.a, &ctx.bo, &d.base);
        let lat_target = base.lat_target;
        let search = if ctx.search_single {
            let cfg = if a.bench_test {
                ConvergeCfg::SINGLE_TEST
            } else {
                ConvergeCfg::CPU_SINGLE
            };
            let s = SingleSearch::new(cfg, if a.bench_test { 2 } else { 10 }, d.single_size);
            ctx.out.say(&s.header());
            Search::Single(s)
        } else if ctx.search_cpu {
            Search::Cpu(ctx.new_cpu_search(lat_target))
        } else if bo.mem {
            let m = ctx.new_mem_search(bo.rps_max.unwrap_or(base.rps_max));
            ctx.preload(&d.preload_files).map_err(anyhow::Error::msg)?;
            hashd.set_params(mem_params(
                base,
                bo.rps_max.unwrap_or(base.rps_max),
                m.frac(),
            ));
            Search::Mem(m)
        } else {
            Search::None
        };
        let found = match (bo.rps_max, ctx.search_cpu, ctx.bench) {
            (Some(r), _, _) => Some((r, true)),
            (None, false, true) if bo.mem => Some((base.rps_max, true)),
            _ => None,
        };
        let phase = match &search {
            Search::Single(_) => Phase::BenchCpuSingle,
            Search::Cpu(_) => Phase::BenchCpuSaturation,
            Search::Mem(_) => Phase::BenchMemUp,
            Search::None => Phase::Running,
        };
        Ok(Drive {
            ctx,
            cancel,
            base: d.base,
            lat_target,
            params_file: d.params_file,
            padding: d.padding,
            preload_files: d.preload_files,
            start,
            period: d.period,
            status: Status::default(),
            periods_since_status: 0,
            history: Vec::new(),
            report_error: None,
            search,
            phase,
            found,
            found_single: None,
            found_mem: None,
            mem_probes: Vec::new(),
        })
    }

    /// One control period's stat: report, status line, search step, params
    /// reload.
    fn tick(&mut self, s: &Stat) -> Tick {
        self.history.push(s.clone());
        self.status.add(s);
        if let Err(e) = self.ctx.write_report(self.phase, s.clone(), 1.0) {
            self.report_error = Some(e);
            return Tick::Stop;
        }
        self.print_status(s);
        if self.cancel.is_stopped()
            || self
                .ctx
                .a
                .duration
                .is_some_and(|d| self.start.elapsed().as_secs_f64() >= d)
        {
            return Tick::Stop;
        }
        if let Some(t) = self.step(s) {
            return t;
        }
        self.reload_params().unwrap_or(Tick::Continue)
    }

    fn print_status(&mut self, s: &Stat) {
        self.periods_since_status += 1;
        let interval = self.ctx.args.interval;
        if interval > 0
            && f64::from(self.periods_since_status) * self.period >= f64::from(interval) - 1e-9
        {
            let mut l = self.status.line(s);
            if self.ctx.a.verbose > 0 {
                l.push_str(&verbose_detail(s));
            }
            println!("{l}");
            self.ctx.out.log(&l);
            self.periods_since_status = 0;
        }
    }

    /// The search's step for this period; None when nothing is searched.
    fn step(&mut self, s: &Stat) -> Option<Tick> {
        let ctx = self.ctx;
        let mut line = |mut l: String| {
            if ctx.a.verbose > 0 && l.starts_with('[') && l.contains("] lat:") {
                l.push_str(&format!(" con:{:.1}", s.concurrency));
                l.push_str(&verbose_detail(s));
            }
            ctx.out.say(&l);
        };
        let tick = match &mut self.search {
            // A bench with every value given: nothing to search.
            Search::None if ctx.bench => Tick::Stop,
            Search::None => return None,
            Search::Single(c) => match c.push(s.lat.ctl, s.rps, &mut line) {
                SingleStep::Continue => Tick::Continue,
                SingleStep::Probe(size) => Tick::Params(Box::new(single_params(&self.base, size))),
                SingleStep::Done(size, met) => self.single_done(size, met),
            },
            Search::Cpu(c) => match c.push(s.lat.ctl, s.rps, &mut line) {
                None => Tick::Continue,
                Some(r) => self.cpu_done(r),
            },
            Search::Mem(m) => {
                let step = m.push(s.lat.ctl, s.rps, &mut line);
                self.phase = match m.stage() {
                    MemStage::Up => Phase::BenchMemUp,
                    MemStage::Bisect => Phase::BenchMemBisect,
                    MemStage::Refine => Phase::BenchMemRefine,
                };
                match step {
                    MemStep::Continue => Tick::Continue,
                    MemStep::Probe(f) => {
                        let rps_max = self.found.map(|f| f.0).unwrap_or(0);
                        Tick::Params(Box::new(mem_params(&self.base, rps_max, f)))
                    }
                    MemStep::Done(f) => {
                        self.found_mem = Some(f);
                        self.mem_probes = m.probes.clone();
                        Tick::Stop
                    }
                }
            }
        };
        Some(tick)
    }

    fn single_done(&mut self, size: usize, met: bool) -> Tick {
        let ctx = self.ctx;
        if !met {
            ctx.out
                .say("[ Single cpu bench failed to converge, using the last value ]");
        }
        self.found_single = Some((size, met));
        self.base.file_size_mean = size;
        if ctx.bo.chunk_pages.is_none() {
            self.base.chunk_pages = search::calc_chunk_pages(&self.base);
        }
        ctx.out.say(&single_line(&self.base));
        self.after_single()
    }

    /// Starts the search after the single-CPU bench.
    fn after_single(&mut self) -> Tick {
        let ctx = self.ctx;
        if ctx.search_cpu {
            self.search = Search::Cpu(ctx.new_cpu_search(self.lat_target));
            self.phase = Phase::BenchCpuSaturation;
            return Tick::Params(Box::new(cpu_params(&self.base)));
        }
        if ctx.bo.mem {
            let rps_max = self.found.map(|f| f.0).unwrap_or(self.base.rps_max);
            let m = ctx.new_mem_search(rps_max);
            if let Err(e) = ctx.preload(&self.preload_files) {
                ctx.out.say(&e);
            }
            let p = mem_params(&self.base, rps_max, m.frac());
            self.search = Search::Mem(m);
            self.phase = Phase::BenchMemUp;
            return Tick::Params(Box::new(p));
        }
        Tick::Stop
    }

    fn cpu_done(&mut self, r: (u32, bool)) -> Tick {
        let ctx = self.ctx;
        self.found = Some(r);
        ctx.out
            .say(&format!("[ CPU saturation result: rps {} ]", r.0));
        if !ctx.bo.mem {
            return Tick::Stop;
        }
        ctx.out
            .say(&format!("rps_max {}: searching the memory footprint", r.0));
        let m = ctx.new_mem_search(r.0);
        let p = mem_params(&self.base, r.0, m.frac());
        if let Err(e) = ctx.preload(&self.preload_files) {
            ctx.out.say(&e);
        }
        self.search = Search::Mem(m);
        self.phase = Phase::BenchMemUp;
        Tick::Params(Box::new(p))
    }

    /// New params when the params file changed.
    fn reload_params(&mut self) -> Option<Tick> {
        let f = self.params_file.as_mut()?;
        match f.poll() {
            Some(Ok(p)) => {
                self.ctx
                    .out
                    .say(&format!("Reloaded params file {}", f.path.display()));
                if let Some(pad) = &self.padding {
                    pad.store(p.log_padding(), std::sync::atomic::Ordering::Relaxed);
                }
                Some(Tick::Params(Box::new(p)))
            }
            Some(Err(e)) => {
                self.ctx
                    .out
                    .say(&format!("warning: params not reloaded: {e}"));
                None
            }
            None => None,
        }
    }

    /// The record once the run ended. Bench results are kept only when
    /// each requested search finished.
    fn record(
        self,
        saved_params: &Params,
        files_size: u64,
        result: Result<(), String>,
        prepared: &tfiles::Prepared,
        dropped: u64,
    ) -> anyhow::Result<HashdRecord> {
        let (ctx, bo) = (self.ctx, &self.ctx.bo);
        let complete = (!ctx.search_single || self.found_single.is_some())
            && (!ctx.search_cpu || self.found.is_some())
            && (!bo.mem || self.found_mem.is_some());
        if !ctx.search_single && bo.single && complete {
            // The hash size was given: only chunk_pages was derived.
            ctx.out.say(&single_line(&self.base));
        }
        let single = bo.single.then(|| SingleResult {
            hash_size: self.base.file_size_mean as u64,
            chunk_pages: self.base.chunk_pages,
            converged: self.found_single.map(|f| f.1).unwrap_or(!ctx.search_single),
        });
        let searched = bo.cpu || bo.mem;
        let bench_result = if ctx.bench && complete {
            self.bench_result(saved_params, files_size, searched)?
        } else {
            None
        };
        let interrupted = self.cancel.is_stopped();
        let error = result.err();
        if let Some(e) = &error {
            ctx.out.say(&format!("hashd failed: {e}"));
        }
        Ok(HashdRecord {
            summary: HashdSummary::of(&self.history),
            bench: ctx.bench.then_some(BenchRecord {
                result: bench_result,
                single: if complete { single } else { None },
                searched,
            }),
            elapsed_secs: self.start.elapsed().as_secs_f64(),
            testfiles_created: prepared.created,
            testfiles_reused: prepared.reused,
            log_lines_dropped: dropped,
            interrupted,
            error,
        })
    }

    /// The bench result (when a search ran), saved in the params file.
    fn bench_result(
        &self,
        saved_params: &Params,
        files_size: u64,
        searched: bool,
    ) -> anyhow::Result<Option<BenchResult>> {
        let (ctx, bo) = (self.ctx, &self.ctx.bo);
        let rps_max = self.found.map(|f| f.0).unwrap_or(saved_params.rps_max);
        let mem_frac = self.found_mem.unwrap_or(saved_params.mem_frac);
        let kept = Params {
            rps_max,
            mem_frac,
            ..self.base.clone()
        };
        let (file, anon) = super::engine::footprint(&ctx.args, files_size, &kept);
        let r = BenchResult {
            rps_max,
            converged: self.found.is_none_or(|f| f.1),
            footprint_bytes: file + anon,
            mem_frac,
            hash_size: kept.file_size_mean as u64,
            mem: bo.mem.then(|| MemResult {
                mem_size: ctx.args.size,
                probes: self
                    .mem_probes
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
        if searched {
            ctx.out.say(&r.line());
        }
        if let Some(f) = &self.params_file {
            params::save_params(&f.path, &kept).map_err(anyhow::Error::msg)?;
            ctx.out
                .say(&format!("bench results saved in {}", f.path.display()));
        }
        Ok(searched.then_some(r))
    }
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
    /// `None` unless every requested search finished (and one of the
    /// rps_max and memory searches was asked for).
    pub result: Option<BenchResult>,
    /// With `--bench-cpu-single`, once it finished.
    #[serde(default)]
    pub single: Option<SingleResult>,
    /// The rps_max or memory search was asked for (false: the single-CPU
    /// bench alone).
    #[serde(default = "yes")]
    pub searched: bool,
}

fn yes() -> bool {
    true
}

/// What the single-CPU bench found (or was given).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SingleResult {
    /// Mean file bytes per request (`file_size_mean`).
    pub hash_size: u64,
    pub chunk_pages: usize,
    /// False when a request's latency missed 15 ms by more than 5%.
    pub converged: bool,
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
    /// With `--bench-cpu-single`: the hash size (file_size_mean), its
    /// chunk_pages, and whether a lone request met 15 ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_pages: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_size_converged: Option<bool>,
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

impl SingleResult {
    /// The single-CPU bench's result line.
    pub fn line(&self) -> String {
        format!(
            "[ Single cpu result: hash size {}, chunk {} pages{} ]",
            format_size(self.hash_size as f64),
            self.chunk_pages,
            if self.converged {
                ""
            } else {
                " (failed to converge to 15 ms)"
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
        let single = self.bench.as_ref().and_then(|b| b.single.as_ref());
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
                .filter(|b| b.searched)
                .map(|b| b.result.as_ref().is_some_and(|r| r.converged)),
            rps_max: found.map(|r| r.rps_max),
            hash_size: single.map(|s| s.hash_size),
            chunk_pages: single.map(|s| s.chunk_pages),
            hash_size_converged: single.map(|s| s.converged),
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
        if let Some(s) = self.bench.as_ref().and_then(|b| b.single.as_ref()) {
            writeln!(out, "{}", s.line())?;
        }
        if let Some(r) = self.bench.as_ref().and_then(|b| b.result.as_ref()) {
            writeln!(out, "{}", r.line())?;
        } else if self
            .bench
            .as_ref()
            .is_some_and(|b| b.searched || b.single.is_none())
        {
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
