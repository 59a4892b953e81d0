//! `rackbench cachebench --json_test_config FILE` (or a binary named
//! `cachebench`): loads CacheLib's config, builds the cache and the
//! workload, runs the stressor with progress lines and prints upstream's
//! report, then hands the figures to the harness.

use crate::cache::{AllocClasses, DramCache, DramConfig, Policy, Refresh};
use crate::config::{self, BenchConfig, DistributionConfig};
use crate::output;
use crate::stats::{CacheStats, RunStats};
use crate::stressor::{self, Options, Progress};
use crate::workload::{Generator, PoolMix, Spec};
use anyhow::{Context, bail};
use clap::Parser;
use harness::{Outcome, RunContext, Workload};
use serde_json::{Map, Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The `cachebench` benchmark.
pub struct CacheBench;

#[derive(Debug, Parser)]
#[command(
    name = "rackbench cachebench",
    about = "CacheLib's CacheBench: a DRAM cache under a synthetic workload, configured by CacheLib's JSON test configs"
)]
struct Args {
    /// CacheLib test config (JSON with comments; an array runs several
    /// instances at once).
    #[arg(long = "json_test_config", value_name = "FILE")]
    json_test_config: PathBuf,
    /// Seconds between progress lines (0: none).
    #[arg(long, default_value_t = 60)]
    progress: u64,
    /// Also write a full stats block every progress interval to this file.
    #[arg(long = "progress_stats_file", value_name = "FILE")]
    progress_stats_file: Option<PathBuf>,
    /// Stop the run after this many seconds (0: run all operations).
    #[arg(long = "timeout_seconds", default_value_t = 0)]
    timeout_seconds: u64,
    /// Time every get and set and report their latency percentiles.
    #[arg(long = "report_api_latency")]
    report_api_latency: bool,
    /// Unknown config keys are errors rather than warnings.
    #[arg(long)]
    strict: bool,
    /// Seed of the workload's random draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn parse(args: &[String]) -> anyhow::Result<Args> {
    let argv = std::iter::once("cachebench".to_string()).chain(args.iter().map(|a| {
        // gflags' single-dash forms (-json_test_config=F).
        if a.len() > 2 && a.starts_with('-') && !a.starts_with("--") {
            format!("-{a}")
        } else {
            a.clone()
        }
    }));
    Args::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))
}

/// The cache an instance describes; errors name what is not built yet.
pub fn dram_config(c: &BenchConfig) -> anyhow::Result<DramConfig> {
    let cc = &c.cache;
    if cc.nvm_cache_size_mb > 0 {
        bail!(
            "cache_config.nvmCacheSizeMB is {}: the NVM (flash) tier is not built yet in rackbench; \
             set it to 0 to run the DRAM cache alone",
            cc.nvm_cache_size_mb
        );
    }
    let policy = match cc.allocator.as_str() {
        "LRU" => Policy::Lru {
            ip_spec: cc.lru_ip_spec,
        },
        "LRU2Q" => Policy::TwoQ {
            hot_pct: cc.lru2q_hot_pct,
            cold_pct: cc.lru2q_cold_pct,
        },
        other => bail!("cache_config.allocator '{other}' is not supported (supported: LRU, LRU2Q)"),
    };
    let classes = if cc.alloc_sizes.is_empty() {
        AllocClasses::geometric(cc.min_alloc_size, cc.max_alloc_size, cc.alloc_factor)
    } else {
        AllocClasses::explicit(cc.alloc_sizes.clone())
    }
    .map_err(|e| anyhow::anyhow!("cache_config: {e}"))?;
    Ok(DramConfig {
        size_bytes: cc.cache_size_mb << 20,
        pool_sizes: cc.pool_sizes.clone(),
        classes,
        policy,
        refresh: Refresh {
            secs: cc.lru_refresh_sec,
            ratio: cc.lru_refresh_ratio,
            on_read: cc.lru_update_on_read,
            on_write: cc.lru_update_on_write,
        },
        ht_bucket_power: cc.ht_bucket_power,
    })
}

fn mix(d: &DistributionConfig, what: &str) -> anyhow::Result<PoolMix> {
    if d.add_chained_ratio > 0.0 {
        bail!("{what}: addChainedRatio (chained items) is not built yet in rackbench");
    }
    if d.key_size_range.is_empty() || d.val_size_range.is_empty() {
        bail!("{what}: keySizeRange and valSizeRange are required");
    }
    Ok(PoolMix {
        key_size_range: d.key_size_range.clone(),
        key_size_probability: d.key_size_range_probability.clone(),
        val_size_range: d.val_size_range.clone(),
        val_size_probability: d.val_size_range_probability.clone(),
        op_weights: d.op_ratios,
        popularity: (!d.popularity_buckets.is_empty())
            .then(|| (d.popularity_buckets.clone(), d.popularity_weights.clone())),
    })
}

/// Where an instance's operations come from.
pub enum Source {
    Synthetic(Generator),
    Replay(crate::replay::Trace),
}

/// Checks the generator an instance names.
fn check_generator(c: &BenchConfig) -> anyhow::Result<()> {
    match c.test.generator.as_str() {
        "workload" | "online" => Ok(()),
        "replay" => {
            if c.test.trace_files.is_empty() {
                bail!("test_config: generator 'replay' needs traceFileName or traceFileNames");
            }
            for f in &c.test.trace_files {
                if !f.is_file() {
                    bail!("test_config: trace file {} cannot be read", f.display());
                }
            }
            Ok(())
        }
        other => bail!(
            "test_config.generator '{other}' is not built yet in rackbench (built: workload, online, replay)"
        ),
    }
}

/// The synthetic workload an instance describes.
pub fn spec(c: &BenchConfig) -> anyhow::Result<Spec> {
    let t = &c.test;
    check_generator(c)?;
    let mut mixes = Vec::new();
    if t.pool_distributions.is_empty() {
        mixes.push(mix(&t.distribution, "test_config")?);
    } else {
        for (i, d) in t.pool_distributions.iter().enumerate() {
            mixes.push(mix(d, &format!("test_config.poolDistributions[{i}]"))?);
        }
    }
    let pools = c.cache.num_pools.max(1);
    let or_uniform = |v: &Vec<f64>| {
        if v.is_empty() {
            vec![1.0; pools]
        } else {
            v.clone()
        }
    };
    Ok(Spec {
        num_keys: t.num_keys,
        key_pool_distribution: or_uniform(&t.key_pool_distribution),
        op_pool_distribution: or_uniform(&t.op_pool_distribution),
        mixes,
    })
}

/// Local wall-clock time (h, m, s), for progress lines.
fn wall_clock() -> (u32, u32, u32) {
    // SAFETY: localtime_r fills the tm we own from the time we pass.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        (tm.tm_hour as u32, tm.tm_min as u32, tm.tm_sec as u32)
    }
}

fn sum_cache(stats: &[CacheStats]) -> CacheStats {
    let mut s = CacheStats::default();
    for c in stats {
        s.gets += c.gets;
        s.hits += c.hits;
        s.expired += c.expired;
        s.removes += c.removes;
        s.pools.extend(c.pools.iter().cloned());
    }
    s
}

struct Instance {
    cache: DramCache,
    source: Source,
    repeat_trace: bool,
    options: Options,
    fractions: Vec<f64>,
}

fn metrics_of(s: &RunStats) -> Value {
    let t = &s.throughput;
    let secs = s.elapsed_secs.max(1e-9);
    let pct = |a: u64, b: u64| {
        if b == 0 {
            Value::Null
        } else {
            json!(100.0 * a as f64 / b as f64)
        }
    };
    let evictions: u64 = s.cache.pools.iter().map(|p| p.evictions).sum();
    let items: u64 = s.cache.pools.iter().map(|p| p.items).sum();
    json!({
        "ops": t.ops,
        "ops_per_sec": t.ops as f64 / secs,
        "gets_per_sec": t.gets as f64 / secs,
        "sets_per_sec": t.sets as f64 / secs,
        "dels_per_sec": t.dels as f64 / secs,
        "hit_ratio_pct": pct(s.cache.hits, s.cache.gets),
        "get_miss_pct": pct(t.get_misses, t.gets),
        "set_success_pct": pct(t.sets - t.set_failures, t.sets),
        "consistency_checks": t.consistency_checks,
        "inconsistencies": t.inconsistencies,
        "items_in_ram": items,
        "ram_evictions": evictions,
        "elapsed_secs": s.elapsed_secs,
        "api_latency_ns": s.api_latency.as_ref().map(|l| {
            let q = |h: &hdrhistogram::Histogram<u64>| {
                if h.is_empty() {
                    return Value::Null;
                }
                json!({
                    "count": h.len(),
                    "p50": h.value_at_quantile(0.5),
                    "p90": h.value_at_quantile(0.9),
                    "p99": h.value_at_quantile(0.99),
                    "p999": h.value_at_quantile(0.999),
                    "max": h.max(),
                })
            };
            json!({ "get": q(&l.get), "set": q(&l.set) })
        }),
    })
}

impl Workload for CacheBench {
    fn name(&self) -> &'static str {
        "cachebench"
    }

    fn description(&self) -> &'static str {
        "CacheBench: a CacheLib-style DRAM cache under CacheLib's synthetic and replayed workloads (NVM tier not built yet)"
    }

    fn help(&self) -> String {
        use clap::CommandFactory;
        Args::command().render_long_help().to_string()
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        let a = parse(args)?;
        let loaded = config::load(&a.json_test_config, a.strict)?;
        for c in &loaded.instances {
            dram_config(c)?;
            if c.test.generator == "replay" {
                check_generator(c)?;
            } else {
                spec(c)?;
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        let a = parse(args)?;
        let loaded = config::load(&a.json_test_config, a.strict)?;
        for w in &loaded.warnings {
            eprintln!("warning: {w}");
        }
        let mut out = std::io::stdout();
        writeln!(
            out,
            "{}{}",
            output::config_echo(&loaded.text),
            output::WELCOME
        )?;
        let mut instances = Vec::new();
        let mut total_ops = 0;
        for c in &loaded.instances {
            let dram = dram_config(c)?;
            let t0 = Instant::now();
            let source = if c.test.generator == "replay" {
                check_generator(c)?;
                let trace = crate::replay::load(
                    &c.test.trace_files,
                    &crate::replay::ReplayOptions {
                        threads: c.test.num_threads,
                        amp_factor: c.test.amp_factor,
                        repeat_op_count: c.test.repeat_op_count,
                        fast_forward: c.test.fast_forward_count,
                    },
                )
                .map_err(anyhow::Error::msg)?;
                if trace.parse_errors > 0 {
                    eprintln!(
                        "warning: {} of {} trace lines could not be parsed and were skipped",
                        trace.parse_errors, trace.lines
                    );
                }
                Source::Replay(trace)
            } else {
                let generator = Generator::new(&spec(c)?, a.seed).map_err(anyhow::Error::msg)?;
                write!(
                    out,
                    "{}",
                    output::keys_created(generator.num_keys(), t0.elapsed().as_secs_f64() / 60.0)
                )?;
                Source::Synthetic(generator)
            };
            let options = Options {
                threads: c.test.num_threads,
                ops_per_thread: c.test.num_ops,
                lookaside: c.test.enable_lookaside,
                only_set_if_miss: c.test.only_set_if_miss,
                ttl_secs: c.test.ttl_secs_range,
                rate_per_sec: c.test.op_rate_per_sec,
                rate_burst: c.test.op_rate_burst_size,
                delay_batch: c.test.op_delay_batch,
                delay: Duration::from_nanos(c.test.op_delay_ns),
                seed: a.seed,
                check_consistency: c.test.check_consistency,
                api_latency: a.report_api_latency,
            };
            total_ops += options.threads as u64 * options.ops_per_thread;
            instances.push(Instance {
                cache: DramCache::new(&dram).map_err(|e| anyhow::anyhow!("cache_config: {e}"))?,
                source,
                repeat_trace: c.test.repeat_trace_replay,
                options,
                fractions: dram.pool_sizes.clone(),
            });
        }
        write!(out, "{}", output::ops_to_be_run(total_ops))?;
        out.flush()?;

        let stop = AtomicBool::new(false);
        let done = AtomicBool::new(false);
        let progress: Vec<Progress> = instances.iter().map(|_| Progress::default()).collect();
        let started = Instant::now();
        let mut stats_file = match &a.progress_stats_file {
            Some(p) => Some(
                std::fs::File::create(ctx.output_path(p))
                    .with_context(|| format!("cannot create {}", p.display()))?,
            ),
            None => None,
        };
        let mut timed_out = false;
        let results: Vec<RunStats> = std::thread::scope(|s| {
            let runs: Vec<_> = instances
                .iter()
                .zip(&progress)
                .map(|(i, p)| {
                    s.spawn(|| match &i.source {
                        Source::Synthetic(g) => stressor::run(&i.cache, g, &i.options, &stop, p),
                        Source::Replay(t) => {
                            stressor::run_replay(&i.cache, t, &i.options, i.repeat_trace, &stop, p)
                        }
                    })
                })
                .collect();
            // Progress, timeout and Ctrl-C, until every instance is done.
            s.spawn(|| {
                let mut prev = sum_cache(
                    &instances
                        .iter()
                        .map(|i| i.cache.stats())
                        .collect::<Vec<_>>(),
                );
                let tick = Duration::from_secs(a.progress.max(1));
                let mut next = Instant::now() + tick;
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                    if ctx.cancel.is_stopped()
                        || (a.timeout_seconds > 0
                            && started.elapsed().as_secs() >= a.timeout_seconds)
                    {
                        stop.store(true, Ordering::Relaxed);
                    }
                    if a.progress > 0 && Instant::now() >= next {
                        next += tick;
                        let cur = sum_cache(
                            &instances
                                .iter()
                                .map(|i| i.cache.stats())
                                .collect::<Vec<_>>(),
                        );
                        let ops: u64 = progress.iter().map(|p| p.ops.load(Ordering::Relaxed)).sum();
                        let line = output::progress_line(
                            wall_clock(),
                            ops,
                            output::hit_ratios_since(&cur, &prev),
                        );
                        print!("{line}");
                        let _ = std::io::stdout().flush();
                        if let Some(f) = stats_file.as_mut() {
                            let snapshot = RunStats {
                                cache: cur.clone(),
                                ..RunStats::default()
                            };
                            let _ = f.write_all(
                                output::progress_stats_block(&line, &snapshot, &prev).as_bytes(),
                            );
                        }
                        prev = cur;
                    }
                }
            });
            let r: Vec<RunStats> = runs
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect();
            done.store(true, Ordering::Relaxed);
            r
        });
        if stop.load(Ordering::Relaxed) && !ctx.cancel.is_stopped() {
            timed_out = true;
        }
        let mut metrics = Map::new();
        let mut per_instance = Vec::new();
        let mut total = RunStats::default();
        for (i, mut r) in results.into_iter().enumerate() {
            r.pool_fractions = instances[i].fractions.clone();
            let failure = (r.throughput.inconsistencies > 0)
                .then(|| format!("Found {} inconsistent cases", r.throughput.inconsistencies));
            let failures: Vec<&str> = failure.iter().map(String::as_str).collect();
            print!("{}", output::final_report(&r, &failures));
            per_instance.push(metrics_of(&r));
            total.throughput.add(&r.throughput);
            total.cache = sum_cache(&[total.cache.clone(), r.cache.clone()]);
            total.elapsed_secs = total.elapsed_secs.max(r.elapsed_secs);
            if let Some(l) = &r.api_latency {
                total
                    .api_latency
                    .get_or_insert_with(Default::default)
                    .add(l);
            }
        }
        // One instance: its figures; several: the sums over all of them
        // (rates over the longest instance's time), each instance beside.
        if let Value::Object(all) = metrics_of(&total) {
            metrics.extend(all);
        }
        if per_instance.len() > 1 {
            metrics.insert("instances".into(), Value::Array(per_instance));
        }
        let interrupted = ctx.cancel.is_stopped();
        if interrupted {
            metrics.insert("interrupted".into(), json!(true));
        }
        if timed_out {
            metrics.insert(
                "stopped_by_timeout_seconds".into(),
                json!(a.timeout_seconds),
            );
        }
        let consistent = total.throughput.inconsistencies == 0;
        if !consistent {
            metrics.insert(
                "error".into(),
                json!(format!(
                    "{} values read were inconsistent with the sets",
                    total.throughput.inconsistencies
                )),
            );
        }
        Ok(Outcome {
            metrics,
            success: !interrupted && consistent,
        })
    }
}
