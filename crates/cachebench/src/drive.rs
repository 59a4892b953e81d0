//! Drive (the run's loop): each instance's stressor, its pool rebalancer
//! and the controller (progress lines and stats files, the ETA bar,
//! warm-up, timeout and Ctrl-C), then the figures into the record.

use crate::cache::{Cache, RebalanceConfig};
use crate::cli::Args;
use crate::output;
use crate::record::{CacheBenchRecord, GeneratorStats, InstanceRecord};
use crate::render::instance_report;
use crate::setup::{Instance, Source};
use crate::stats::{CacheStats, RunStats};
use crate::stressor::{self, Progress};
use anyhow::Context;
use harness::RunContext;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Local wall-clock time (h, m, s), for progress lines.
fn wall_clock() -> (u32, u32, u32) {
    let now = jiff::ZonedDateTime::now();
    (now.hour() as u32, now.minute() as u32, now.second() as u32)
}

/// A chart sample of an interval of `secs` ending at `t`, from the
/// interval's stats (see [`interval_stats`]) and the counters at its start.
fn sample(
    window: &CacheStats,
    prev: &CacheStats,
    hit: output::HitRatios,
    ops: u64,
    secs: f64,
    t: f64,
) -> crate::plots::Sample {
    // The device's latency, as the stats file's `NVM Read  Latency` lines
    // (upstream's figure).
    let lat = |read: bool| {
        window.nvm.as_ref().and_then(|n| {
            let d = &n.engine.device;
            let h = if read {
                &d.read_latency_total_us
            } else {
                &d.write_latency_total_us
            };
            crate::plots::interval(h, None)
        })
    };
    crate::plots::Sample {
        t,
        ops_per_sec: ops as f64 / secs.max(1e-9),
        hit,
        gets: window.gets.saturating_sub(prev.gets),
        nvm_gets: window.nvm.as_ref().map(|n| {
            let before = prev.nvm.as_ref().map_or(0, |p| p.counters.nvm_gets);
            n.counters.nvm_gets.saturating_sub(before)
        }),
        read_us: lat(true),
        write_us: lat(false),
    }
}

/// Whether the cache counted any operation between two snapshots.
fn cache_moved(cur: &CacheStats, prev: &CacheStats) -> bool {
    let allocs = |s: &CacheStats| s.pools.iter().map(|p| p.alloc_attempts).sum::<u64>();
    cur.gets != prev.gets || cur.removes != prev.removes || allocs(cur) != allocs(prev)
}

/// `cur` with its whole-run NVM latency histograms (the device's and the
/// engines') cut to what was recorded since `prev` (for the charts; the
/// text prints the last minute's, as upstream).
fn interval_stats(cur: &CacheStats, prev: &CacheStats) -> CacheStats {
    let mut w = cur.clone();
    if let (Some(c), Some(p)) = (w.nvm.as_mut(), prev.nvm.as_ref()) {
        let _ = c
            .engine
            .device
            .read_latency_total_us
            .subtract(&p.engine.device.read_latency_total_us);
        let _ = c
            .engine
            .device
            .write_latency_total_us
            .subtract(&p.engine.device.write_latency_total_us);
        for (h, ph) in [
            (&mut c.engine.read_latency_us, &p.engine.read_latency_us),
            (&mut c.engine.write_latency_us, &p.engine.write_latency_us),
        ] {
            if let (Some(h), Some(ph)) = (h.as_mut(), ph.as_ref()) {
                let _ = h.subtract(ph);
            }
        }
    }
    w
}

fn sum_cache(stats: &[CacheStats]) -> CacheStats {
    let mut s = CacheStats::default();
    for c in stats {
        s.gets += c.gets;
        s.hits += c.hits;
        s.expired += c.expired;
        s.removes += c.removes;
        s.pools.extend(c.pools.iter().cloned());
        let (r, o) = (&mut s.release, &c.release);
        r.slabs_released += o.slabs_released;
        r.move_attempts += o.move_attempts;
        r.move_successes += o.move_successes;
        r.eviction_attempts += o.eviction_attempts;
        r.eviction_successes += o.eviction_successes;
        if let Some(n) = &c.nvm {
            s.nvm.get_or_insert_with(Default::default).add(n);
        }
    }
    s
}

/// Runs an instance's stressor on its source: the figures, and a replay's
/// generator counts.
fn run_instance(
    i: &Instance,
    stop: &AtomicBool,
    progress: &Progress,
) -> (RunStats, Option<GeneratorStats>) {
    let counted = |name: &str, (stats, counts): (RunStats, stressor::ReplayCounts)| {
        if let Some(e) = &counts.error {
            eprintln!("error: the trace could not be read to its end: {e}");
        }
        (
            stats,
            Some(GeneratorStats {
                name: name.to_string(),
                samples: counts.samples,
                parse_errors: counts.parse_errors,
                text: None,
            }),
        )
    };
    match &i.source {
        Source::Synthetic(g) => (stressor::run(&i.cache, g, &i.options, stop, progress), None),
        Source::Replay {
            reader,
            amp_factor,
            serialization,
        } => {
            let Some(reader) = reader.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                return (RunStats::default(), None);
            };
            counted(
                "KVReplayGenerator",
                stressor::run_replay_stream(
                    &i.cache,
                    *reader,
                    *amp_factor,
                    *serialization,
                    &i.options,
                    stop,
                    progress,
                ),
            )
        }
        Source::Chunked { spec, stats, style } => {
            let (run, error) =
                stressor::run_chunked(&i.cache, spec, stats, &i.options, stop, progress);
            if let Some(e) = &error {
                eprintln!("error: the trace could not be read to its end: {e}");
            }
            let invalid = stats.invalid.load(Ordering::Relaxed);
            let text = stats.render(*style, run.elapsed_secs.max(1e-9));
            (
                run,
                Some(GeneratorStats {
                    name: spec.kind.name().to_string(),
                    samples: stats
                        .samples
                        .load(Ordering::Relaxed)
                        .saturating_sub(invalid),
                    parse_errors: invalid,
                    text: Some(text),
                }),
            )
        }
        Source::Binary(trace) => counted(
            "BinaryKVReplayGenerator",
            stressor::run_replay_binary(
                &i.cache,
                trace,
                i.config.test.replay.fast_forward_count,
                i.repeat_trace,
                i.config.test.replay.amp_size_factor,
                &i.options,
                stop,
                progress,
            ),
        ),
    }
}

/// The stats file of instance `i` of several: upstream appends `_<i>` to
/// the file's stem (`stats.log` → `stats_0.log`).
fn instance_stats_file(p: &Path, i: usize) -> PathBuf {
    let mut name = p.file_stem().unwrap_or_default().to_os_string();
    name.push(format!("_{i}"));
    if let Some(ext) = p.extension() {
        name.push(".");
        name.push(ext);
    }
    p.with_file_name(name)
}

/// An instance's progress stats file, if it has one, and its path.
pub(crate) type StatsFile = Option<(PathBuf, std::fs::File)>;

/// Each instance's stats figures and a replay's generator counts.
pub(crate) type Results = Vec<(RunStats, Option<GeneratorStats>)>;

/// Opens the progress stats files. As upstream's ProgressTracker: the file
/// is appended to (an earlier run's blocks stay) and each run starts with a
/// header (in the current layout). Several instances each get their own
/// file, `<stem>_<i><ext>`, as upstream's main names them.
pub(crate) fn open_stats_files(
    a: &Args,
    ctx: &RunContext,
    n: usize,
    st: output::Style,
) -> anyhow::Result<Vec<StatsFile>> {
    let mut stats_files: Vec<StatsFile> = Vec::new();
    for i in 0..n {
        let Some(p) = &a.progress_stats_file else {
            stats_files.push(None);
            continue;
        };
        let p = if n > 1 {
            ctx.output_path(&instance_stats_file(p, i))
        } else {
            ctx.output_path(p)
        };
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .with_context(|| format!("cannot open {} to append to it", p.display()))?;
        if st.stats_file_header() {
            f.write_all(output::STATS_FILE_HEADER.as_bytes())
                .with_context(|| format!("cannot write to {}", p.display()))?;
        }
        stats_files.push(Some((p, f)));
    }
    Ok(stats_files)
}

/// The run's drive: the instances' stressors, their pool rebalancers and
/// the controller (progress, timeout, Ctrl-C), sharing this state.
pub(crate) struct Drive<'a> {
    pub(crate) instances: &'a [Instance],
    pub(crate) progress: &'a [Progress],
    /// Set to make the stressors stop early.
    pub(crate) stop: &'a AtomicBool,
    /// Set once every stressor is done (ends the helper threads).
    pub(crate) done: AtomicBool,
    /// The first fatal NVM error an instance reported.
    pub(crate) nvm_failure: &'a std::sync::Mutex<Option<String>>,
    pub(crate) ctx: &'a RunContext,
    pub(crate) a: &'a Args,
    pub(crate) st: output::Style,
    pub(crate) started: Instant,
    pub(crate) eta: Eta,
}

/// rackbench's progress bar with an ETA, on stderr, only when stderr is a
/// terminal (upstream's stdout and stats files are unchanged): the share
/// of the run's operations done sets the plan, so the bar's percentage
/// is the operations' and its ETA the time they take at the rate so far.
pub(crate) struct Eta {
    pub(crate) bar: harness::progress::Progress,
    /// Whether the bar is drawn (a terminal, and a known number of
    /// operations).
    on: bool,
    total_ops: u64,
}

impl Eta {
    pub(crate) fn new(total_ops: u64) -> Eta {
        let on = total_ops > 0
            && std::io::IsTerminal::is_terminal(&std::io::stderr())
            && std::env::var_os("RACKBENCH_PLAIN_PROGRESS").is_none();
        let bar = if on {
            harness::progress::Progress::new("cachebench", Duration::from_secs(60))
        } else {
            harness::progress::Progress::hidden()
        };
        Eta { bar, on, total_ops }
    }

    /// Plans the rest of the run at the rate so far.
    fn update(&self, ops: u64, elapsed: Duration) {
        if !self.on || ops == 0 {
            return;
        }
        let done = (ops as f64 / self.total_ops as f64).min(1.0);
        self.bar.set_total(elapsed.div_f64(done.max(1e-9)));
        self.bar.phase(&format!(
            "{:.2}M of {:.2}M ops",
            ops as f64 / 1e6,
            self.total_ops as f64 / 1e6
        ));
    }

    /// A line of upstream's stdout, printed around the bar.
    fn print(&self, line: &str) {
        if self.on {
            self.bar.output(line.strip_suffix('\n').unwrap_or(line));
        } else {
            print!("{line}");
        }
    }
}

/// The controller's state between progress lines: the counters at the
/// previous line (for the next interval's rates) and the chart samples.
struct Window {
    samples: Vec<crate::plots::Sample>,
    prev_ops: u64,
    prev_t: f64,
    /// Each instance's counters at the previous progress line, and their
    /// sums (for the charts).
    prev_each: Vec<CacheStats>,
    prev: CacheStats,
}

impl Drive<'_> {
    /// Runs every instance to its end: their figures, and the progress
    /// samples for the charts.
    pub(crate) fn run(
        &self,
        stats_files: &mut [StatsFile],
    ) -> (Results, Vec<crate::plots::Sample>) {
        std::thread::scope(|s| {
            let runs: Vec<_> = self
                .instances
                .iter()
                .zip(self.progress)
                .map(|(i, p)| s.spawn(move || run_instance(i, self.stop, p)))
                .collect();
            // Pool rebalancing, one thread per instance that has it.
            for i in self.instances {
                if let Some((every, cfg)) = i.rebalance {
                    let (done, cache, seed) = (&self.done, &i.cache, self.a.seed);
                    s.spawn(move || rebalance_loop(done, cache, every, &cfg, seed));
                }
            }
            // Progress, timeout and Ctrl-C, until every instance is done;
            // returns the progress samples for the charts.
            let controller = s.spawn(move || self.control(stats_files));
            let r: Results = runs
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect();
            self.done.store(true, Ordering::Relaxed);
            (r, controller.join().unwrap_or_default())
        })
    }

    /// The controller's loop: warm-up checks, fatal errors, timeout and
    /// Ctrl-C, progress lines; returns the chart samples.
    fn control(&self, stats_files: &mut [StatsFile]) -> Vec<crate::plots::Sample> {
        let prev_each: Vec<CacheStats> = self.instances.iter().map(|i| i.cache.stats()).collect();
        let mut w = Window {
            samples: Vec::new(),
            prev_ops: 0,
            prev_t: 0.0,
            prev: sum_cache(&prev_each),
            prev_each,
        };
        let tick = Duration::from_secs(self.a.progress.max(1));
        let mut next = Instant::now() + tick;
        // checkNvmCacheWarmUp: upstream logs the first time its policy says
        // NVM is warm (checked every 250 ms and at the end).
        let mut warm: Vec<bool> = self
            .instances
            .iter()
            .map(|i| i.config.test.nvm_warmup_check.is_none())
            .collect();
        let mut next_warm = Instant::now();
        let mut next_eta = Instant::now();
        while !self.done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            if Instant::now() >= next_eta {
                next_eta += Duration::from_secs(1);
                let ops = self
                    .progress
                    .iter()
                    .map(|p| p.ops.load(Ordering::Relaxed))
                    .sum();
                self.eta.update(ops, self.started.elapsed());
            }
            if warm.iter().any(|w| !w) && Instant::now() >= next_warm {
                next_warm += Duration::from_millis(250);
                self.check_warm(&mut warm);
            }
            self.check_stop();
            if self.a.progress > 0 && Instant::now() >= next {
                next += tick;
                self.progress_lines(&mut w, stats_files);
            }
        }
        self.check_warm(&mut warm);
        self.last_stretch(&mut w, tick);
        w.samples
    }

    /// Says "NVM cache has been warmed up" once per instance whose
    /// warm-up policy is met.
    fn check_warm(&self, warm: &mut [bool]) {
        for (k, inst) in self.instances.iter().enumerate() {
            let Some(w) = inst.config.test.nvm_warmup_check else {
                continue;
            };
            if warm[k] {
                continue;
            }
            let evicted = || inst.cache.stats().nvm.map_or(0, |n| n.engine.evictions());
            if self.progress[k].warm_timestamp.load(Ordering::Relaxed) > 0
                || (w.eviction_count_threshold > 0
                    && inst.cache.nvm().is_some()
                    && evicted() >= w.eviction_count_threshold)
            {
                eprintln!("NVM cache has been warmed up");
                warm[k] = true;
            }
        }
    }

    /// Stops the run on a fatal NVM error (said once), Ctrl-C or the
    /// timeout.
    fn check_stop(&self) {
        for i in self.instances {
            if let Some(f) = i.cache.fatal() {
                let mut g = self.nvm_failure.lock().unwrap_or_else(|e| e.into_inner());
                if g.is_none() {
                    eprintln!("error: {f}; stopping the run");
                    *g = Some(f);
                }
                self.stop.store(true, Ordering::Relaxed);
            }
        }
        if self.ctx.cancel.is_stopped()
            || (self.a.timeout_seconds > 0
                && self.started.elapsed().as_secs() >= self.a.timeout_seconds)
        {
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    /// One progress interval: a chart sample, and a line per instance
    /// (upstream's ProgressTracker has one per instance) on stdout or in
    /// its stats file.
    fn progress_lines(&self, w: &mut Window, stats_files: &mut [StatsFile]) {
        let st = self.st;
        let each: Vec<CacheStats> = self.instances.iter().map(|i| i.cache.stats()).collect();
        let cur = sum_cache(&each);
        let ops: u64 = self
            .progress
            .iter()
            .map(|p| p.ops.load(Ordering::Relaxed))
            .sum();
        let hit = output::hit_ratios_since(&cur, &w.prev);
        let t = self.started.elapsed().as_secs_f64();
        let window = interval_stats(&cur, &w.prev);
        w.samples.push(sample(
            &window,
            &w.prev,
            hit,
            ops - w.prev_ops,
            t - w.prev_t,
            t,
        ));
        (w.prev_ops, w.prev_t) = (ops, t);
        let clock = wall_clock();
        for (i, (c, p)) in each.iter().zip(&w.prev_each).enumerate() {
            let line = output::progress_line(
                st,
                i,
                clock,
                self.progress[i].ops.load(Ordering::Relaxed),
                c,
                output::hit_ratios_since(c, p),
            );
            let Some((_, f)) = stats_files[i].as_mut() else {
                self.eta.print(&line);
                continue;
            };
            // With a stats file the line goes there (and in the legacy
            // layout on stdout too).
            let _ = f.write_all(self.stats_block(i, &line, c, p, t).as_bytes());
            if st.progress_on_stdout_with_stats_file() {
                self.eta.print(&line);
            }
        }
        let _ = std::io::stdout().flush();
        w.prev_each = each;
        w.prev = cur;
    }

    /// Instance `i`'s block in its stats file: NVM latency percentiles over
    /// the last minute, as upstream's; operations so far over the time so
    /// far.
    fn stats_block(&self, i: usize, line: &str, c: &CacheStats, p: &CacheStats, t: f64) -> String {
        let snapshot = RunStats {
            cache: c.clone(),
            throughput: self.progress[i].throughput(),
            elapsed_secs: t,
            ..RunStats::default()
        };
        let mut block = output::progress_stats_block(self.st, line, &snapshot, p);
        // The piecewise and block replays' stats follow the throughput
        // lines, as upstream's ProgressTracker renders the generator's.
        if let Source::Chunked { stats, .. } = &self.instances[i].source {
            block.pop();
            block.push_str(&stats.render(self.st, t.max(1e-9)));
            block.push('\n');
        }
        block
    }

    /// The last stretch (and runs shorter than one interval). Threads
    /// publish their operation counts every 1,024 operations and at their
    /// end, so a short last stretch (a stop's wind-down: under half an
    /// interval) holds mostly the final publications of operations counted
    /// before it; it is a point of its own only in a run shorter than one
    /// interval or when it is at least half an interval long, and the cache
    /// counted something in it.
    fn last_stretch(&self, w: &mut Window, tick: Duration) {
        let ops: u64 = self
            .progress
            .iter()
            .map(|p| p.ops.load(Ordering::Relaxed))
            .sum();
        let t = self.started.elapsed().as_secs_f64();
        let cur = sum_cache(
            &self
                .instances
                .iter()
                .map(|i| i.cache.stats())
                .collect::<Vec<_>>(),
        );
        let long_enough = w.prev_t == 0.0 || t - w.prev_t >= tick.as_secs_f64() / 2.0;
        if self.a.progress > 0
            && ops > w.prev_ops
            && t - w.prev_t > 0.05
            && long_enough
            && cache_moved(&cur, &w.prev)
        {
            let hit = output::hit_ratios_since(&cur, &w.prev);
            w.samples.push(sample(
                &interval_stats(&cur, &w.prev),
                &w.prev,
                hit,
                ops - w.prev_ops,
                t - w.prev_t,
                t,
            ));
        }
    }
}

/// An instance's pool rebalancer: every `every`, until `done`.
fn rebalance_loop(
    done: &AtomicBool,
    cache: &Cache,
    every: Duration,
    cfg: &RebalanceConfig,
    seed: u64,
) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eba1);
    let mut next = Instant::now() + every;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
        if Instant::now() >= next {
            next += every;
            cache.rebalance(cfg, &mut |n| rng.random_range(0..n.max(1)));
        }
    }
}

/// Draws the progress charts (ours): beside the progress stats file, or
/// among the harness's artifacts; a direct run writes none, as upstream
/// draws none. Their paths.
pub(crate) fn write_charts(
    a: &Args,
    ctx: &RunContext,
    samples: &[crate::plots::Sample],
) -> Vec<String> {
    let chart_at = match (&a.progress_stats_file, &ctx.artifacts) {
        (_, None) => None,
        (Some(p), Some(_)) => {
            let p = ctx.output_path(p);
            Some((
                p.parent().map(Path::to_path_buf).unwrap_or_default(),
                crate::plots::stem(&p),
            ))
        }
        (None, Some(dir)) => Some((dir.clone(), "cachebench".to_string())),
    };
    if let (false, Some((dir, stem))) = (samples.is_empty(), chart_at) {
        match crate::plots::write_all(&dir, &stem, samples) {
            Ok(files) => return files.iter().map(|f| f.display().to_string()).collect(),
            Err(e) => eprintln!("warning: charts not written: {e:#}"),
        }
    }
    Vec::new()
}

/// Seconds from the start until the last instance's first operation.
pub(crate) fn first_op_secs(progress: &[Progress], began: Instant) -> Option<f64> {
    progress
        .iter()
        .map(|p| {
            p.first_op
                .get()
                .map(|t| t.duration_since(began).as_secs_f64())
        })
        .collect::<Option<Vec<f64>>>()
        .and_then(|v| v.into_iter().reduce(f64::max))
}

/// Adds each instance's figures and failures to the record, and with
/// several instances their sums.
pub(crate) fn add_instances(
    record: &mut CacheBenchRecord,
    instances: &[Instance],
    results: Results,
) {
    let mut total = RunStats::default();
    for (i, (mut r, generator)) in results.into_iter().enumerate() {
        r.pool_fractions = instances[i].fractions.clone();
        if let Some(g) = generator.as_ref().filter(|g| g.parse_errors > 0) {
            eprintln!(
                "warning: {} of {} trace lines could not be parsed and were skipped",
                g.parse_errors,
                g.samples + g.parse_errors
            );
        }
        let failures = instance_failures(&r, &instances[i]);
        total.throughput.add(&r.throughput);
        total.cache = sum_cache(&[total.cache.clone(), r.cache.clone()]);
        total.elapsed_secs = total.elapsed_secs.max(r.elapsed_secs);
        if let Some(l) = &r.api_latency {
            total
                .api_latency
                .get_or_insert_with(Default::default)
                .add(l);
        }
        record.instances.push(InstanceRecord {
            stats: r,
            failures,
            generator,
            print_nvm_counters: instances[i].config.cache.print_nvm_counters,
        });
    }
    if instances.len() > 1 {
        // Several instances: their sums after their own reports.
        record.aggregated = Some(total);
    }
}

/// Why an instance's run failed, in upstream's words where it has them.
fn instance_failures(r: &RunStats, inst: &Instance) -> Vec<String> {
    let mut failures = Vec::new();
    if r.throughput.inconsistencies > 0 {
        failures.push(format!(
            "Found {} inconsistent cases",
            r.throughput.inconsistencies
        ));
    }
    if let Some(f) = inst.cache.fatal() {
        failures.push(format!("NVM error. {f}"));
    }
    if r.throughput.failed_threads > 0 {
        failures.push(format!(
            "{} stressor thread(s) failed (see the panic message above); their operations are not counted",
            r.throughput.failed_threads
        ));
    }
    failures
}

/// With a stats file, each instance's report is appended to it as
/// upstream's does (the end of the run on stdout is [`Workload::format_end`]).
pub(crate) fn append_reports(
    record: &CacheBenchRecord,
    st: output::Style,
    stats_files: &mut [StatsFile],
) {
    for (i, inst) in record.instances.iter().enumerate() {
        if let Some((p, f)) = stats_files[i].as_mut()
            && st.results_in_stats_file()
            && let Err(e) = f.write_all(instance_report(st, inst).as_bytes())
        {
            eprintln!(
                "warning: the results were not appended to {}: {e}",
                p.display()
            );
        }
    }
}
