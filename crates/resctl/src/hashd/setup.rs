//! hashd's setup (flags -> engine): the effective args, the `--bench-*`
//! settings, rotational mode, the params a run starts from and each
//! search's params, and the test files made ready.

use super::bench::{self as search, ConvergeCfg, CpuSearch, MemSearch};
use super::cli::HashdArgs;
use super::engine::Stat;
use super::out::Out;
use super::params::{self, Args, Params, ParamsFile};
use super::report::{Phase, Report};
use super::testfiles::{self as tfiles, TestFiles};
use crate::fmt::{format_size, parse_size};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

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

/// The `--bench-*` settings, checked.
pub(super) struct BenchOpts {
    pub(super) single: bool,
    pub(super) cpu: bool,
    pub(super) mem: bool,
    pub(super) hash_size: Option<usize>,
    pub(super) chunk_pages: Option<usize>,
    pub(super) rps_max: Option<u32>,
    pub(super) log_bps: Option<u64>,
    pub(super) file_frac: Option<f64>,
    pub(super) preload: Option<u64>,
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
pub(super) fn single_params(base: &Params, file_size_mean: usize) -> Params {
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
pub(super) fn cpu_params(base: &Params) -> Params {
    Params {
        rps_target: u32::MAX,
        rps_max: 0,
        file_addr_stdev_ratio: 100.0,
        anon_addr_stdev_ratio: 100.0,
        ..base.clone()
    }
}

/// The params of a memory probe: rps_max with the usual access pattern.
pub(super) fn mem_params(base: &Params, rps_max: u32, mem_frac: f64) -> Params {
    Params {
        rps_max,
        rps_target: rps_max,
        mem_frac,
        ..base.clone()
    }
}

/// Whether hashd runs in rotational mode, and what was detected.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rotation {
    pub(super) on: bool,
    pub(super) testfiles: bool,
    pub(super) swap: bool,
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
pub(super) struct StartParams {
    /// The `--params` file, watched for changes.
    pub(super) file: Option<ParamsFile>,
    /// As read (file_frac capped to --file-max): what the bench keeps
    /// unless it finds a value.
    pub(super) params: Params,
    /// What the bench starts from: the params file's, with what was given.
    pub(super) base: Params,
}

/// What the flags decided before anything runs (setup: flags -> engine).
pub(super) struct Ctx<'a> {
    pub(super) a: &'a HashdArgs,
    pub(super) out: Out,
    pub(super) args: Args,
    pub(super) bo: BenchOpts,
    pub(super) nr_cpus: usize,
    pub(super) dir: PathBuf,
    pub(super) search_single: bool,
    pub(super) search_cpu: bool,
    pub(super) bench: bool,
    pub(super) rot: Rotation,
    pub(super) report_path: Option<PathBuf>,
}

impl<'a> Ctx<'a> {
    pub(super) fn setup(a: &'a HashdArgs) -> anyhow::Result<(Ctx<'a>, StartParams)> {
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
    pub(super) fn write_report(
        &self,
        phase: Phase,
        stat: Stat,
        progress: f64,
    ) -> anyhow::Result<()> {
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
    pub(super) fn prepare_files(
        &self,
    ) -> anyhow::Result<Option<(Arc<TestFiles>, tfiles::Prepared)>> {
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
    pub(super) fn preload(&self, files: &TestFiles) -> Result<(), String> {
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
    pub(super) fn single_start_size(
        &self,
        files: &TestFiles,
        base: &mut Params,
    ) -> anyhow::Result<usize> {
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
    pub(super) fn start_params(
        &self,
        base: &Params,
        params: &Params,
        single_size: usize,
    ) -> Params {
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

    pub(super) fn new_mem_search(&self, rps_max: u32) -> MemSearch {
        let mut m = MemSearch::new(rps_max, self.a.bench_grain, self.a.bench_test);
        m.set_rotational(self.rot.on);
        m
    }

    pub(super) fn new_cpu_search(&self, lat_target: f64) -> CpuSearch {
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
