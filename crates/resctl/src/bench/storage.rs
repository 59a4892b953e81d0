//! The `storage` bench; what it does, for users, is [`DOC`].

use super::common::{Bench, BenchInfo, Ctx, Outcome, now_secs};
use super::hashd_params::{HashdChild, HashdFiles, read_json, spawn_hashd_in};
use super::knobs::{HashdKnobs, MemInfo};
use super::protection::format::{IoLat, format_iolat_rw, format_stat_table};
use super::protection::study::{SliceSample, mean_stdev, push_rstat, rstat_maps};
use crate::bench::metrics::{StorageLoopMetrics, StorageMetrics, StorageProbeMetrics};
use crate::fmt::{format_duration, format_size, parse_size};
use crate::hashd::params::{self, Params};
use crate::journal::JobData;
use crate::spec::{JobSpec, check_keys};
use crate::sys::DiskStats;
use crate::sys::cgroup::{Applied, BackendKind, Cgroup};
use crate::sys::sysreqs::SysReq;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::io::BufRead;
use std::time::{Duration, Instant};

/// What `doc storage` prints.
pub const DOC: &str = "\
storage: the memory offloading factor (MOF) of the scratch device: how
much larger than the memory it is given hashd's footprint can be while
it still serves rps-max, thanks to swap and the page cache on that
device.

hashd runs its memory search (--bench-mem) with a fixed rate and fake
CPU load (it sleeps instead of hashing), so neither the CPU nor the
memory size changes the answer, only the device. It runs in its own
cgroup held to the memory profile's share by a hard limit (cgroup2
memory.max, cgroup1 memory.limit_in_bytes); upstream shrinks the whole
host with a balloon instead. Each loop records hashd's memory usage
(the largest of the last 10 seconds of the cgroup's usage) and the
footprint it sustained (size x mem_frac):

  MOF = mean footprint / mean usage, printed as factor=F@PROFILE

A loop whose usage is off the share by more than mem-avail-err-max is
run again (mem-avail-inner-retries times; then the loops start over,
mem-avail-outer-retries times, then the bench fails). When hashd never
serves within 10% of rps-max at any footprint it tries, or sustains less
footprint than its memory, the rate is CPU-bound and the factor would not
describe the device: the bench fails with that reason (lower rps-max).

Needs swap on the scratch device (without it nothing can be offloaded
and the factor is meaningless: refused even with --force) and a memory
cgroup (cgroup2 or cgroup1; refused on the none backend). A full swap
caps the factor; the result says so.

Properties: loops=N (3), rps-max=N (2000), hash-size=SIZE, chunk-pages=N,
log-bps=SIZE, mem-avail-err-max=FRAC (0.1), mem-avail-inner-retries=N
(2), mem-avail-outer-retries=N (2), and upstream's apply and commit
(accepted; the result is kept in the journal).
";

pub(crate) const KEYS: &[&str] = &[
    "apply",
    "commit",
    "loops",
    "rps-max",
    "hash-size",
    "chunk-pages",
    "log-bps",
    "mem-avail-err-max",
    "mem-avail-inner-retries",
    "mem-avail-outer-retries",
];

/// Upstream's fixed rate with fake CPU load.
pub const DFL_RPS_MAX: u32 = 2000;

/// The properties, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Props {
    pub loops: u32,
    pub rps_max: u32,
    pub hash_size: u64,
    pub chunk_pages: usize,
    pub log_bps: u64,
    pub err_max: f64,
    pub inner_retries: u32,
    pub outer_retries: u32,
}

impl Default for Props {
    fn default() -> Props {
        let p = Params::default();
        Props {
            loops: 3,
            rps_max: DFL_RPS_MAX,
            hash_size: p.file_size_mean as u64,
            chunk_pages: p.chunk_pages,
            log_bps: p.log_bps,
            err_max: 0.1,
            inner_retries: 2,
            outer_retries: 2,
        }
    }
}

/// Parses the first property group.
pub fn props(spec: &JobSpec) -> Result<Props, crate::Error> {
    check_keys(spec, 0, KEYS).map_err(|e| crate::Error::Input(e.to_string()))?;
    if spec.props.len() > 1 {
        return Err(crate::Error::Input(
            "multiple property sets not supported".into(),
        ));
    }
    let mut p = Props::default();
    let positive = |k: &str, v: &str, what: &str| -> Result<u64, String> {
        match v.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("property {k}={v:?}: expected {what}")),
        }
    };
    for (k, v) in spec.props.first().into_iter().flatten() {
        match k.as_str() {
            "loops" => {
                p.loops = positive(k, v, "a loop count > 0").map_err(crate::Error::Input)? as u32
            }
            "rps-max" => {
                p.rps_max =
                    positive(k, v, "a request rate > 0").map_err(crate::Error::Input)? as u32
            }
            "chunk-pages" => {
                p.chunk_pages =
                    positive(k, v, "a page count > 0").map_err(crate::Error::Input)? as usize
            }
            "hash-size" => {
                p.hash_size =
                    parse_size(v).map_err(|e| crate::Error::Input(format!("property {k}: {e}")))?;
                if p.hash_size < 4096 {
                    return Err(crate::Error::Input(format!(
                        "property {k}={v:?}: expected at least 4K"
                    )));
                }
            }
            "log-bps" => {
                p.log_bps =
                    parse_size(v).map_err(|e| crate::Error::Input(format!("property {k}: {e}")))?
            }
            "mem-avail-err-max" => {
                p.err_max = match v.parse::<f64>() {
                    Ok(f) if f > 0.0 && f < 1.0 => f,
                    _ => {
                        return Err(crate::Error::Input(format!(
                            "property {k}={v:?}: expected a fraction between 0 and 1 such as 0.1"
                        )));
                    }
                }
            }
            "mem-avail-inner-retries" | "mem-avail-outer-retries" => {
                let n = v.parse::<u32>().map_err(|_| {
                    crate::Error::Input(format!("property {k}={v:?}: expected a retry count"))
                })?;
                if k == "mem-avail-inner-retries" {
                    p.inner_retries = n;
                } else {
                    p.outer_retries = n;
                }
            }
            _ => {
                if !matches!(v.as_str(), "" | "true" | "false" | "1" | "0") {
                    return Err(crate::Error::Input(format!(
                        "property {k}={v:?}: expected true or false"
                    )));
                }
            }
        }
    }
    Ok(p)
}

/// Checks a spec.
pub fn check_spec(spec: &JobSpec) -> Result<(), crate::Error> {
    props(spec).map(|_| ())
}

/// One loop: a whole `hashd --bench-mem` run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopRecord {
    /// hashd's memory usage: the largest of the last 10 s of samples.
    pub usage: u64,
    /// The footprint it sustained: size x mem_frac.
    pub size: u64,
    pub mem_frac: f64,
    /// (usage - share) / share.
    pub usage_err: f64,
    pub secs: f64,
    /// Scratch device bytes over the loop and over its last 10 seconds.
    pub rbytes: u64,
    pub wbytes: u64,
    pub final_rbps: f64,
    pub final_wbps: f64,
    /// Mean IO latency (diskstats: ms spent / IOs completed), seconds.
    pub read_lat: Option<f64>,
    pub write_lat: Option<f64>,
    pub swap_peak: u64,
    /// hashd's memory search probes (stage, mem_frac, rps, end).
    pub probes: Value,
    /// Kept in the mean (false: retried).
    pub used: bool,
    /// Seconds of the loop with a memory reading of hashd's cgroup, and
    /// the whole seconds the loop lasted: upstream's report counts
    /// (present, missing) are taken from these (0 in older records).
    #[serde(default)]
    pub samples: u64,
    #[serde(default)]
    pub samples_expected: u64,
    /// The root slice each second: (Unix time, counters), for the
    /// `Resource stat:` tables (empty in older records).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub root: Vec<(f64, SliceSample)>,
    /// Each second's `[read, write]` per-IO completion latency of the
    /// scratch device (seconds, by latency percentile), from the block
    /// tracepoints; empty where they cannot be read (and in older
    /// records).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iolat: Vec<[BTreeMap<String, f64>; 2]>,
}

/// What the bench recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageRecord {
    pub rps_max: u32,
    pub hash_size: u64,
    pub chunk_pages: usize,
    pub log_bps: u64,
    pub loops: u32,
    pub mem_profile: u32,
    pub mem_avail: u64,
    pub mem_share: u64,
    /// hashd's footprint at mem_frac 1.0.
    pub mem_size: u64,
    pub swap_total: u64,
    /// CPUs, to normalise the root's CPU time.
    #[serde(default)]
    pub nr_cpus: usize,
    pub controls: Vec<String>,
    pub notes: Vec<String>,
    pub runs: Vec<LoopRecord>,
    pub started: u64,
    pub ended: u64,
}

/// The study of the record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageResult {
    pub mem_offload_factor: f64,
    pub mem_usage_mean: f64,
    pub mem_usage_stdev: f64,
    pub mem_size_mean: f64,
    pub mem_size_stdev: f64,
    pub rbps_all: f64,
    pub wbps_all: f64,
    pub rbps_final: f64,
    pub wbps_final: f64,
    pub read_lat_mean: Option<f64>,
    pub write_lat_mean: Option<f64>,
    pub swap_peak: u64,
    pub swap_full: bool,
    /// Per-second samples (present, missing) over all loops, as upstream's
    /// `nr_reports`.
    #[serde(default)]
    pub nr_reports: (u64, u64),
    /// The root slice's resource stat distributions over every loop
    /// (upstream's `all_rstat`) and over each loop's last
    /// [`USAGE_WINDOW`] seconds (ours; upstream's `final_rstat` is over
    /// hashd's final memory probe), keyed as protection's slice tables.
    #[serde(default)]
    pub all_rstat: BTreeMap<String, BTreeMap<String, f64>>,
    #[serde(default)]
    pub final_rstat: BTreeMap<String, BTreeMap<String, f64>>,
    /// The kept loops' per-IO read and write latency distributions (latency
    /// percentile row, time percentile column), as upstream's `iolat`;
    /// empty without per-IO data.
    #[serde(default)]
    pub iolat: IoLat,
}

/// The root slice's distributions over consecutive samples of each loop;
/// `last` keeps only each loop's last `last` seconds.
fn root_rstat(rec: &StorageRecord, last: Option<f64>) -> BTreeMap<String, BTreeMap<String, f64>> {
    let mut acc: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &rec.runs {
        let end = r.root.last().map_or(0.0, |s| s.0);
        let from = last.map_or(f64::NEG_INFINITY, |l| end - l);
        for w in r.root.windows(2) {
            let ((ta, a), (tb, b)) = (&w[0], &w[1]);
            let dt = tb - ta;
            if *ta >= from && dt > 0.0 && dt.is_finite() {
                push_rstat(&mut acc, a, b, dt, rec.nr_cpus);
            }
        }
    }
    rstat_maps(&acc)
}

/// Studies the loops kept in the mean.
pub fn study(rec: &StorageRecord) -> StorageResult {
    let used: Vec<&LoopRecord> = rec.runs.iter().filter(|r| r.used).collect();
    let (um, us) = mean_stdev(&used.iter().map(|r| r.usage as f64).collect::<Vec<_>>());
    let (sm, ss) = mean_stdev(&used.iter().map(|r| r.size as f64).collect::<Vec<_>>());
    let secs: f64 = rec.runs.iter().map(|r| r.secs).sum();
    let per_sec = |b: u64| if secs > 0.0 { b as f64 / secs } else { 0.0 };
    let mean_of = |f: &dyn Fn(&LoopRecord) -> Option<f64>| {
        let v: Vec<f64> = used.iter().filter_map(|r| f(r)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let swap_peak = rec.runs.iter().map(|r| r.swap_peak).max().unwrap_or(0);
    StorageResult {
        mem_offload_factor: if um > 0.0 { sm / um } else { 0.0 },
        mem_usage_mean: um,
        mem_usage_stdev: us,
        mem_size_mean: sm,
        mem_size_stdev: ss,
        rbps_all: per_sec(rec.runs.iter().map(|r| r.rbytes).sum()),
        wbps_all: per_sec(rec.runs.iter().map(|r| r.wbytes).sum()),
        rbps_final: mean_of(&|r| Some(r.final_rbps)).unwrap_or(0.0),
        wbps_final: mean_of(&|r| Some(r.final_wbps)).unwrap_or(0.0),
        read_lat_mean: mean_of(&|r| r.read_lat),
        write_lat_mean: mean_of(&|r| r.write_lat),
        swap_peak,
        swap_full: rec.swap_total > 0 && swap_peak as f64 >= 0.95 * rec.swap_total as f64,
        all_rstat: root_rstat(rec, None),
        final_rstat: root_rstat(rec, Some(USAGE_WINDOW as f64)),
        iolat: {
            let secs: Vec<&[BTreeMap<String, f64>; 2]> =
                used.iter().flat_map(|r| r.iolat.iter()).collect();
            let dir = |d: usize| -> Vec<BTreeMap<String, f64>> {
                secs.iter().map(|s| s[d].clone()).collect()
            };
            if secs.is_empty() {
                Default::default()
            } else {
                [
                    super::protection::study::study_iolat(&dir(0)),
                    super::protection::study::study_iolat(&dir(1)),
                ]
            }
        },
        nr_reports: rec.runs.iter().fold((0, 0), |(p, m), r| {
            (
                p + r.samples,
                m + r.samples_expected.saturating_sub(r.samples),
            )
        }),
    }
}

/// The report's figures of one loop: its offloading factor and its
/// memory-size search (the probes hashd reported; one without a number
/// for `mem_frac` or `rps` is left out).
pub fn loop_metrics(l: &LoopRecord) -> StorageLoopMetrics {
    let probes = l
        .probes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some(StorageProbeMetrics {
                stage: p["stage"].as_str().unwrap_or_default().to_string(),
                mem_frac: p["mem_frac"].as_f64()?,
                rps: p["rps"].as_f64()?,
            })
        })
        .collect();
    StorageLoopMetrics {
        used: l.used,
        mof: (l.usage > 0).then(|| l.size as f64 / l.usage as f64),
        mem_usage_bytes: l.usage,
        mem_size_bytes: l.size,
        mem_frac: l.mem_frac,
        probes,
    }
}

/// Swap in use now (SwapTotal - SwapFree), bytes.
fn swap_used() -> u64 {
    let m = harness::machine::parse_meminfo(
        &std::fs::read_to_string("/proc/meminfo").unwrap_or_default(),
    );
    let kb = |k: &str| m.get(k).copied().unwrap_or(0);
    kb("SwapTotal").saturating_sub(kb("SwapFree"))
}

/// Reads hashd's stdout; the last JSON line is its metrics.
fn metrics_reader(child: &mut HashdChild) -> std::thread::JoinHandle<Option<Value>> {
    let out = child.0.stdout.take();
    std::thread::spawn(move || {
        let mut last = None;
        for line in std::io::BufReader::new(out?).lines() {
            let Ok(line) = line else { break };
            if line.starts_with('{') {
                last = serde_json::from_str::<Value>(&line).ok();
            }
        }
        last
    })
}

/// Unix time in seconds (0 before the epoch).
fn now_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// How one loop ended.
enum LoopEnd {
    Done(Box<LoopRecord>),
    Interrupted,
}

/// How many seconds of usage samples make a loop's usage.
const USAGE_WINDOW: usize = 10;

fn run_loop(ctx: &Ctx, files: &HashdFiles, cg: &Cgroup, label: &str) -> Result<LoopEnd, String> {
    let share = ctx.mem.share;
    // Start from a clean page cache, as upstream does, so what an earlier
    // loop left cached does not count for this one.
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
    let _ = std::fs::remove_file(&files.report);
    let mut extra = vec!["--bench-mem"];
    if ctx.opts.test {
        extra.push("--bench-test");
    }
    let mut child = HashdChild(spawn_hashd_in(ctx, files, share, &extra, Some(cg), true)?);
    let reader = metrics_reader(&mut child);
    let dev = ctx.sysinfo.scr_dev.clone();
    let first = crate::sys::diskstats(&dev).unwrap_or_default();
    let mut window: VecDeque<(u64, DiskStats)> = VecDeque::new();
    let mut swap_peak = 0u64;
    let start = Instant::now();
    let mut last_line = Instant::now();
    // One sample a second, on a fixed schedule: a late sample is a missed
    // second, not a shifted one.
    let mut next = start;
    let mut samples = 0u64;
    let mut root = Vec::new();
    // Per-IO latency, as upstream's reports have it (biolatpcts); the
    // first second holds what came before the loop and is dropped.
    let trace = crate::sys::iotrace::IoTrace::start(ctx.sysinfo.scr_devnr).ok();
    let mut iolat = Vec::new();
    let mut first_sec = true;
    let status = loop {
        if ctx.cancel.is_stopped() {
            drop(child);
            return Ok(LoopEnd::Interrupted);
        }
        match child.0.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => return Err(format!("hashd: {e}")),
        }
        let usage = cg.stat().mem_bytes;
        samples += u64::from(usage.is_some());
        if let Some(t) = &trace {
            let sec = t.take_second();
            if !std::mem::replace(&mut first_sec, false) {
                iolat.push(sec);
            }
        }
        root.push((
            now_f64(),
            super::protection::run::slice(&ctx.cgroups.root_stat()),
        ));
        let usage = usage.unwrap_or(0);
        let disk = crate::sys::diskstats(&dev).unwrap_or_default();
        window.push_back((usage, disk));
        if window.len() > USAGE_WINDOW + 1 {
            window.pop_front();
        }
        let swap = swap_used();
        swap_peak = swap_peak.max(swap);
        if last_line.elapsed() >= Duration::from_secs(10) {
            last_line = Instant::now();
            let rep = read_json::<Value>(&files.report).unwrap_or(Value::Null);
            let max = window.iter().map(|w| w.0).max().unwrap_or(0);
            eprintln!(
                "storage: {label} [{}] mem {} ({:+.1}%) rps {:.0} swap {} after {}",
                rep["phase"].as_str().unwrap_or("starting"),
                format_size(max as f64),
                (max as f64 - share as f64) / share as f64 * 100.0,
                rep["rps"].as_f64().unwrap_or(0.0),
                format_size(swap as f64),
                format_duration(start.elapsed().as_secs_f64()),
            );
        }
        next += Duration::from_secs(1);
        let now = Instant::now();
        while next < now {
            next += Duration::from_secs(1);
        }
        std::thread::sleep(next - now);
    };
    let metrics = reader.join().ok().flatten();
    if !status.success() {
        return Err(format!(
            "hashd --bench-mem failed ({status}){}; its messages are above",
            metrics
                .as_ref()
                .and_then(|m| m["error"].as_str())
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ));
    }
    let m = metrics.ok_or("hashd --bench-mem ended without its metrics line")?;
    let (Some(mem_frac), Some(mem_size)) = (m["mem_frac"].as_f64(), m["mem_size"].as_u64()) else {
        return Err(format!(
            "hashd --bench-mem did not finish its memory search (metrics: {m})"
        ));
    };
    let secs = start.elapsed().as_secs_f64();
    let last = crate::sys::diskstats(&dev).unwrap_or_default();
    let usage = window
        .iter()
        .rev()
        .take(USAGE_WINDOW)
        .map(|w| w.0)
        .max()
        .unwrap_or(0);
    let (fin_r, fin_w) = match (window.front(), window.back()) {
        (Some(a), Some(b)) if window.len() > 1 => {
            let dt = (window.len() - 1) as f64;
            (
                b.1.read_sectors.saturating_sub(a.1.read_sectors) as f64 * 512.0 / dt,
                b.1.write_sectors.saturating_sub(a.1.write_sectors) as f64 * 512.0 / dt,
            )
        }
        _ => (0.0, 0.0),
    };
    let lat = |ios: u64, ms: u64| (ios > 0).then(|| ms as f64 / ios as f64 / 1000.0);
    Ok(LoopEnd::Done(Box::new(LoopRecord {
        usage,
        size: (mem_size as f64 * mem_frac) as u64,
        mem_frac,
        usage_err: (usage as f64 - share as f64) / share as f64,
        secs,
        rbytes: last.read_sectors.saturating_sub(first.read_sectors) * 512,
        wbytes: last.write_sectors.saturating_sub(first.write_sectors) * 512,
        final_rbps: fin_r,
        final_wbps: fin_w,
        read_lat: lat(
            last.reads.saturating_sub(first.reads),
            last.read_ms.saturating_sub(first.read_ms),
        ),
        write_lat: lat(
            last.writes.saturating_sub(first.writes),
            last.write_ms.saturating_sub(first.write_ms),
        ),
        swap_peak,
        probes: m["mem_probes"].clone(),
        used: false,
        samples,
        samples_expected: (secs.floor() as u64).max(samples),
        root,
        iolat,
    })))
}

/// Refuses a host the bench cannot measure: no swap, no memory cgroup,
/// or less memory available than the profile's share.
fn check_host(ctx: &Ctx) -> Result<(), String> {
    if ctx.sysinfo.total_swap == 0 {
        return Err(
            "storage measures how much of hashd's footprint swap can offload, and this host has no swap: \
             add swap on the scratch device (e.g. a swap file: fallocate, mkswap, swapon) and run again"
                .into(),
        );
    }
    if ctx.cgroups.kind() == BackendKind::None {
        return Err(
            "storage holds hashd to the memory profile's share with a memory cgroup, and no cgroup backend \
             is usable here (see `resctl doc cgroups`)"
                .into(),
        );
    }
    let share = ctx.mem.share;
    if ctx.mem.avail < share {
        return Err(format!(
            "the memory profile's share {} is more than the {} available: pick a smaller --mem-profile",
            format_size(share as f64),
            format_size(ctx.mem.avail as f64)
        ));
    }
    Ok(())
}

/// The record before its loops.
fn new_record(p: &Props, ctx: &Ctx) -> StorageRecord {
    let (si, share) = (ctx.sysinfo, ctx.mem.share);
    StorageRecord {
        rps_max: p.rps_max,
        hash_size: p.hash_size,
        chunk_pages: p.chunk_pages,
        log_bps: p.log_bps,
        loops: p.loops,
        mem_profile: ctx.mem.profile,
        mem_avail: ctx.mem.avail,
        mem_share: share,
        mem_size: 4 * share,
        swap_total: si.total_swap,
        nr_cpus: si.nr_cpus,
        started: now_secs(),
        ..StorageRecord::default()
    }
}

/// hashd's cgroup, held to the memory profile's share.
fn limit_hashd(ctx: &Ctx, rec: &mut StorageRecord) -> Result<Cgroup, String> {
    let share = ctx.mem.share;
    let cg = ctx
        .cgroups
        .create(&format!("rackbench-{}/workload.slice", std::process::id()))?;
    match cg.set_mem_max(share) {
        Applied::Done => rec.controls.push(format!(
            "hashd memory limit {} ({})",
            format_size(share as f64),
            ctx.cgroups.kind().name()
        )),
        Applied::Degraded(w) | Applied::Unsupported(w) => {
            return Err(format!(
                "cannot hold hashd to {}: {w}",
                format_size(share as f64)
            ));
        }
    }
    Ok(cg)
}

/// Refuses a loop whose rate the CPU, not the storage, limited (kept in
/// the record); with --test, a missed rate is noted only.
fn check_rate(
    ctx: &Ctx,
    p: &Props,
    rec: &mut StorageRecord,
    l: LoopRecord,
    label: &str,
) -> Result<LoopRecord, String> {
    let share = ctx.mem.share;
    let best = l
        .probes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["rps"].as_f64())
        .fold(0.0f64, f64::max);
    // --test probes (10 s, one per stage) are too short to tell a
    // CPU-bound rate from a ramping one: noted, not judged.
    let rate_missed = best < 0.9 * f64::from(p.rps_max);
    if rate_missed && ctx.opts.test {
        rec.notes.push(format!(
            "{label}: best rate {best:.0} of rps_max {} (--test probes are too short to judge it)",
            p.rps_max
        ));
    } else if rate_missed {
        rec.runs.push(l);
        return Err(format!(
            "hashd never served rps_max {} at any footprint it tried (best {best:.0} rps): \
             the rate is limited by the CPU, not the storage; lower rps-max (storage:rps-max=N)",
            p.rps_max
        ));
    }
    if l.size < share && !ctx.opts.test {
        rec.runs.push(l.clone());
        return Err(format!(
            "hashd sustained rps_max {} only with a {} footprint, smaller than its {} of memory: \
             the rate is limited by the CPU, not the storage; lower rps-max (storage:rps-max=N)",
            p.rps_max,
            format_size(l.size as f64),
            format_size(share as f64)
        ));
    }
    Ok(l)
}

/// Runs the bench.
pub fn run(spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
    let p = props(spec)?;
    check_host(ctx).map_err(crate::Error::Host)?;
    let share = ctx.mem.share;
    let knobs = HashdKnobs {
        hash_size: p.hash_size,
        rps_max: p.rps_max,
        mem_size: 4 * share,
        mem_frac: 0.0,
        chunk_pages: p.chunk_pages,
        fake_cpu_load: true,
    };
    ctx.used_hashd = Some(knobs.clone());
    let files = HashdFiles::new(&ctx.opts.dir)?;
    let params = Params {
        file_size_mean: p.hash_size as usize,
        rps_max: p.rps_max,
        rps_target: p.rps_max,
        chunk_pages: p.chunk_pages,
        log_bps: p.log_bps,
        fake_cpu_load: true,
        ..Params::default()
    };
    let mut rec = new_record(&p, ctx);
    let cg = limit_hashd(ctx, &mut rec).map_err(crate::Error::Host)?;
    eprintln!(
        "storage: memory profile {} (share {}, avail {}), rps_max {} with fake CPU load, {} loops",
        ctx.mem.profile,
        format_size(share as f64),
        format_size(ctx.mem.avail as f64),
        p.rps_max,
        p.loops
    );
    let mut inner = p.inner_retries;
    let mut outer = p.outer_retries;
    let mut kept = 0u32;
    while kept < p.loops {
        params::save_params(&files.params, &params)?;
        let label = format!("loop {}/{}", kept + 1, p.loops);
        let end = run_loop(ctx, &files, &cg, &label);
        rec.ended = now_secs();
        let l = match end {
            Ok(LoopEnd::Done(l)) => *l,
            Ok(LoopEnd::Interrupted) => {
                return Ok(Outcome::Partial(
                    Some(
                        serde_json::to_value(&rec)
                            .map_err(|e| crate::Error::Host(e.to_string()))?,
                    ),
                    "interrupted".into(),
                ));
            }
            Err(e) => return Err(crate::Error::Host(e)),
        };
        let mut l = check_rate(ctx, &p, &mut rec, l, &label).map_err(crate::Error::Host)?;
        // As upstream: --test runs do not judge the usage error (their
        // short probes seldom fill the share).
        if ctx.opts.test && l.usage_err.abs() > p.err_max {
            rec.notes.push(format!(
                "{label}: hashd used {} ({:+.1}% of the {} share; --test does not judge it)",
                format_size(l.usage as f64),
                l.usage_err * 100.0,
                format_size(share as f64)
            ));
        } else if l.usage_err.abs() > p.err_max {
            let note = format!(
                "{label}: hashd used {} ({:+.1}% of the {} share, more than {:.1}% off)",
                format_size(l.usage as f64),
                l.usage_err * 100.0,
                format_size(share as f64),
                p.err_max * 100.0
            );
            rec.runs.push(l);
            if inner > 0 {
                inner -= 1;
                rec.notes.push(format!("{note}: run again"));
                eprintln!("storage: {note}: running it again");
                continue;
            }
            if outer > 0 {
                outer -= 1;
                inner = p.inner_retries;
                kept = 0;
                for r in &mut rec.runs {
                    r.used = false;
                }
                rec.notes
                    .push(format!("{note}: out of retries, starting over"));
                eprintln!("storage: {note}: out of retries, starting the loops over");
                continue;
            }
            return Err(crate::Error::Host(format!(
                "{note}, and the retries are spent: keep the host idle while the bench runs"
            )));
        }
        l.used = true;
        eprintln!(
            "storage: {label}: supportable footprint {} (mem_frac {:.1}%) in {} of memory",
            format_size(l.size as f64),
            l.mem_frac * 100.0,
            format_size(l.usage as f64)
        );
        rec.runs.push(l);
        kept += 1;
    }
    rec.ended = now_secs();
    let res = study(&rec);
    if res.swap_full {
        rec.notes.push(format!(
            "swap filled up ({} of {}): the factor is limited by the swap size",
            format_size(res.swap_peak as f64),
            format_size(rec.swap_total as f64)
        ));
    }
    // The header's hashd params: the mean supportable footprint.
    ctx.used_hashd = Some(HashdKnobs {
        mem_frac: res.mem_size_mean / (4 * share) as f64,
        ..knobs
    });
    Ok(Outcome::Done(
        serde_json::to_value(&rec).map_err(|e| crate::Error::Host(e.to_string()))?,
        serde_json::to_value(&res).map_err(|e| crate::Error::Host(e.to_string()))?,
    ))
}

fn lat(v: Option<f64>) -> String {
    v.map(format_duration).unwrap_or_else(|| "-".into())
}

/// Params, IO, the loops (with `full`) and the `Memory offloading:` line.
pub fn format(d: &JobData, full: bool) -> Result<String, crate::Error> {
    format_rstat(d, full, 0)
}

/// [`format`] with `format -R`'s extra tables after the resource stats.
pub fn format_rstat(d: &JobData, full: bool, rstat: u8) -> Result<String, crate::Error> {
    if is_upstream_record(d.record.as_ref()) {
        return format_upstream(d, full, rstat).map_err(crate::Error::Input);
    }
    let rec: StorageRecord = serde_json::from_value(d.record.clone().unwrap_or(Value::Null))
        .map_err(|e| crate::Error::Input(format!("the record is not a storage record: {e}")))?;
    let mut o = format!(
        "Params: hash_size={} rps_max={} log_bps={} loops={}\n        mem_profile={} mem_avail={} mem_share={}\n",
        format_size(rec.hash_size as f64),
        rec.rps_max,
        format_size(rec.log_bps as f64),
        rec.loops,
        rec.mem_profile,
        format_size(rec.mem_avail as f64),
        format_size(rec.mem_share as f64)
    );
    for c in &rec.controls {
        o.push_str(&format!("        {c}\n"));
    }
    let res: StorageResult = match d.result.clone() {
        Some(r) if d.is_completed() => {
            serde_json::from_value(r).map_err(|e| crate::Error::Input(e.to_string()))?
        }
        _ => {
            let s = study(&rec);
            o.push_str(&format!(
                "\n(incomplete: {} loop(s) recorded)\n",
                rec.runs.len()
            ));
            if rec.runs.iter().all(|r| !r.used) {
                return Ok(o);
            }
            s
        }
    };
    if full {
        // Upstream's tables; results recorded before the root was sampled
        // have none.
        o.push_str("\nResource stat:\n\n");
        if res.all_rstat.is_empty() {
            o.push_str("(no per-second root samples in this result)\n");
        } else {
            format_stat_table(&mut o, "ALL", &res.all_rstat, rstat);
            o.push('\n');
            format_stat_table(&mut o, "FINAL", &res.final_rstat, rstat);
        }
    }
    o.push_str(&format!(
        "\nIO BPS: read_final={} write_final={} read_all={} write_all={}\n",
        format_size(res.rbps_final),
        format_size(res.wbps_final),
        format_size(res.rbps_all),
        format_size(res.wbps_all)
    ));
    if res.iolat.iter().any(|d| !d.is_empty()) {
        // Upstream's lines (tables with `full`), per IO.
        let mut t = String::new();
        format_iolat_rw(&mut t, &res.iolat, full);
        o.push_str(&t);
    } else {
        o.push_str(&format!(
            "IO latency (mean, /proc/diskstats): read={} write={}\n",
            lat(res.read_lat_mean),
            lat(res.write_lat_mean)
        ));
    }
    o.push_str(&format!(
        "Swap: peak_used={} total={}{}\n",
        format_size(res.swap_peak as f64),
        format_size(rec.swap_total as f64),
        if res.swap_full { " (full)" } else { "" }
    ));
    if full {
        o.push_str("\nLoops:\n\n  #  kept  mem_frac   size  usage  usage_err  read_final write_final    time\n");
        for (i, r) in rec.runs.iter().enumerate() {
            o.push_str(&format!(
                "{:>3}  {:>4}  {:>7.2}% {:>6} {:>6}  {:>+8.2}%  {:>10} {:>11} {:>7}\n",
                i + 1,
                if r.used { "yes" } else { "no" },
                r.mem_frac * 100.0,
                format_size(r.size as f64),
                format_size(r.usage as f64),
                r.usage_err * 100.0,
                format_size(r.final_rbps),
                format_size(r.final_wbps),
                format_duration(r.secs)
            ));
        }
    }
    for n in &rec.notes {
        o.push_str(&format!("\nNote: {n}"));
    }
    if !rec.notes.is_empty() {
        o.push('\n');
    }
    // Upstream's line: missing is the share of per-second samples that
    // were not taken (its reports; 0 when none were counted).
    let missing = reports_missing(res.nr_reports);
    o.push_str(&format!(
        "\nMemory offloading: factor={:.3}@{} ",
        res.mem_offload_factor, rec.mem_profile
    ));
    if rec.loops > 1 {
        o.push_str(&format!(
            "usage/stdev={}/{} size/stdev={}/{} missing={}%\n",
            format_size(res.mem_usage_mean),
            format_size(res.mem_usage_stdev),
            format_size(res.mem_size_mean),
            format_size(res.mem_size_stdev),
            crate::fmt::format_pct(missing)
        ));
    } else {
        o.push_str(&format!(
            "usage={} size={} missing={}%\n",
            format_size(res.mem_usage_mean),
            format_size(res.mem_size_mean),
            crate::fmt::format_pct(missing)
        ));
    }
    Ok(o)
}

/// Upstream's storage record (resctl-bench's `StorageRecord`): the loops'
/// memory usages and supportable sizes, the knobs and the memory profile;
/// its per-second data stays in rd-agent's reports.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct UpstreamStorageRecord {
    pub period: (u64, u64),
    pub final_mem_probe_periods: Vec<(u64, u64)>,
    pub base_hashd_knobs: HashdKnobs,
    pub mem: MemInfo,
    pub mem_usages: Vec<f64>,
    pub mem_sizes: Vec<f64>,
}

/// Upstream's storage result (`StorageResult`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct UpstreamStorageResult {
    pub mem_offload_factor: f64,
    pub mem_usage: u64,
    pub mem_usage_stdev: u64,
    pub mem_size: u64,
    pub mem_size_stdev: u64,
    #[serde(deserialize_with = "super::protection::study::de_rstat")]
    pub all_rstat: BTreeMap<String, BTreeMap<String, f64>>,
    #[serde(deserialize_with = "super::protection::study::de_rstat")]
    pub final_rstat: BTreeMap<String, BTreeMap<String, f64>>,
    pub iolat: IoLat,
    pub nr_reports: (u64, u64),
}

/// True when `record` is upstream's storage record (it has
/// `base_hashd_knobs`, which ours does not).
pub fn is_upstream_record(record: Option<&Value>) -> bool {
    record.is_some_and(|r| r.get("base_hashd_knobs").is_some())
}

/// Missing reports over all reports (0 when none were counted), as
/// upstream's `Studies::reports_missing`.
pub fn reports_missing((present, missing): (u64, u64)) -> f64 {
    if present + missing > 0 {
        missing as f64 / (present + missing) as f64
    } else {
        0.0
    }
}

/// A storage job's properties as upstream's formatting uses them: `loops`
/// and `log-bps` (defaults when not given) and `rps-max` only when given.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamStorageJob {
    pub props: Props,
    pub rps_given: Option<u32>,
}

impl UpstreamStorageJob {
    /// From a storage spec (properties checked as `run` checks them).
    pub fn from_spec(spec: &JobSpec) -> Result<UpstreamStorageJob, crate::Error> {
        Ok(UpstreamStorageJob {
            props: props(spec)?,
            rps_given: spec
                .props
                .first()
                .and_then(|g| g.get("rps-max"))
                .and_then(|v| v.parse().ok()),
        })
    }
}

/// Upstream's storage text from its record and result, for the storage
/// job `job`: the header (`Params: hash_size= rps_max= log_bps=`, ` loops=` when
/// `header`), the IO latency lines (tables with `full`), the resource stat
/// tables (with `full`), the `IO BPS:` line and the `Memory offloading:`
/// line, laid out as upstream's `StorageJob::format_result`.
pub fn format_upstream_result(
    out: &mut String,
    job: &UpstreamStorageJob,
    rec: &UpstreamStorageRecord,
    res: &UpstreamStorageResult,
    header: bool,
    full: bool,
    rstat: u8,
) {
    if header {
        format_upstream_header(out, job, rec, true);
        out.push('\n');
    }
    format_iolat_rw(out, &res.iolat, full);
    out.push('\n');
    if full {
        out.push_str("Resource stat:\n\n");
        format_stat_table(out, "ALL", &res.all_rstat, rstat);
        out.push('\n');
        format_stat_table(out, "FINAL", &res.final_rstat, rstat);
        out.push('\n');
    }
    let mean = |m: &BTreeMap<String, BTreeMap<String, f64>>, k: &str| {
        format_size(m.get(k).and_then(|d| d.get("mean")).copied().unwrap_or(0.0))
    };
    out.push_str(&format!(
        "IO BPS: read_final={} write_final={} read_all={} write_all={}\n",
        mean(&res.final_rstat, "io_rbps"),
        mean(&res.final_rstat, "io_wbps"),
        mean(&res.all_rstat, "io_rbps"),
        mean(&res.all_rstat, "io_wbps"),
    ));
    out.push('\n');
    let missing = crate::fmt::format_pct(reports_missing(res.nr_reports));
    out.push_str(&format!(
        "Memory offloading: factor={:.3}@{} ",
        res.mem_offload_factor, rec.mem.profile
    ));
    let size = |b: u64| format_size(b as f64);
    if job.props.loops > 1 {
        out.push_str(&format!(
            "usage/stdev={}/{} size/stdev={}/{} missing={missing}%\n",
            size(res.mem_usage),
            size(res.mem_usage_stdev),
            size(res.mem_size),
            size(res.mem_size_stdev),
        ));
    } else {
        out.push_str(&format!(
            "usage={} size={} missing={missing}%\n",
            size(res.mem_usage),
            size(res.mem_size),
        ));
    }
}

/// Upstream's storage header line: the knobs' hash size, the spec's
/// rps-max or the knobs', the log rate and, with `loops`, the loop count.
pub fn format_upstream_header(
    out: &mut String,
    job: &UpstreamStorageJob,
    rec: &UpstreamStorageRecord,
    loops: bool,
) {
    out.push_str(&format!(
        "Params: hash_size={} rps_max={} log_bps={}",
        format_size(rec.base_hashd_knobs.hash_size as f64),
        job.rps_given.unwrap_or(rec.base_hashd_knobs.rps_max),
        format_size(job.props.log_bps as f64)
    ));
    if loops {
        out.push_str(&format!(" loops={}", job.props.loops));
    }
    out.push('\n');
}

/// An upstream storage job's text.
fn format_upstream(d: &JobData, full: bool, rstat: u8) -> Result<String, String> {
    let job = UpstreamStorageJob::from_spec(&d.spec)?;
    let rec: UpstreamStorageRecord =
        serde_json::from_value(d.record.clone().unwrap_or(Value::Null))
            .map_err(|e| format!("the record is not upstream's storage record: {e}"))?;
    let res: UpstreamStorageResult = match &d.result {
        Some(r) if !r.is_null() => serde_json::from_value(r.clone())
            .map_err(|e| format!("the result is not upstream's storage result: {e}"))?,
        _ => {
            return Err(
                "upstream's storage record without its result cannot be formatted: upstream \
                 studies it from rd-agent's report files, which rackbench does not read"
                    .into(),
            );
        }
    };
    let mut o = String::new();
    format_upstream_result(&mut o, &job, &rec, &res, true, full, rstat);
    Ok(o)
}

/// The storage bench.
pub struct StorageBench;

static INFO: BenchInfo = BenchInfo {
    kind: "storage",
    about: "memory offloading: how far the workload's footprint can exceed memory",
    doc: DOC,
    // Swap's size recommendation is soft: a smaller swap caps the
    // factor, which the result flags; no swap at all is refused.
    hard: &[SysReq::SwapOnScratch],
    soft: &[
        SysReq::Swap,
        SysReq::MemShadowInodeProt,
        SysReq::AnonBalance,
        SysReq::HostCriticalServices,
    ],
};

impl Bench for StorageBench {
    fn info(&self) -> &'static BenchInfo {
        &INFO
    }
    fn check(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        check_spec(spec)
    }
    fn run(&self, spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
        run(spec, ctx)
    }
    fn format_rstat(&self, d: &JobData, full: bool, rstat: u8) -> Result<String, crate::Error> {
        format_rstat(d, full, rstat)
    }
    fn restudy(&self, d: &JobData) -> Option<Result<Value, crate::Error>> {
        Some(
            serde_json::from_value::<StorageRecord>(d.record.clone().unwrap_or(Value::Null))
                .map_err(|e| format!("the record is not a storage record: {e}"))
                .and_then(|rec| serde_json::to_value(study(&rec)).map_err(|e| e.to_string()))
                .map_err(crate::Error::Input),
        )
    }
    fn format(&self, d: &JobData, full: bool) -> Result<String, crate::Error> {
        format(d, full)
    }
    fn metrics(&self, d: &JobData, m: &mut super::common::JobMetrics) {
        let Some(s) = d
            .result
            .clone()
            .and_then(|r| serde_json::from_value::<StorageResult>(r).ok())
        else {
            return;
        };
        // The loops, from the record when it reads as one.
        let loops = d
            .record
            .clone()
            .and_then(|r| serde_json::from_value::<StorageRecord>(r).ok())
            .map(|r| r.runs.iter().map(loop_metrics).collect())
            .unwrap_or_default();
        m.storage = Some(StorageMetrics {
            storage_mof: s.mem_offload_factor,
            storage_mem_usage_bytes: s.mem_usage_mean,
            storage_mem_size_bytes: s.mem_size_mean,
            storage_rbps_final: s.rbps_final,
            storage_wbps_final: s.wbps_final,
            storage_loops: loops,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse;

    /// Each loop's offloading factor and memory-size search, from the
    /// record the bench keeps; none (and no key) without a readable one.
    #[test]
    fn metrics_per_loop() {
        use crate::bench::common::JobMetrics;
        let probes = serde_json::json!([
            {"stage": "bisect", "mem_frac": 1.0, "rps": 310.5, "end": "slow"},
            {"stage": "bisect", "mem_frac": 0.5, "rps": 1000.0, "end": "ok"},
            {"stage": "odd"}
        ]);
        let rec = StorageRecord {
            runs: vec![
                LoopRecord {
                    usage: 1000,
                    size: 1500,
                    mem_frac: 0.5,
                    probes: probes.clone(),
                    used: true,
                    ..Default::default()
                },
                LoopRecord {
                    usage: 0,
                    size: 10,
                    used: false,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let data = |record: Option<Value>| JobData {
            spec: parse("storage").unwrap(),
            period: (1, 2),
            sysinfo: Value::Null,
            record,
            result: Some(serde_json::to_value(study(&rec)).unwrap()),
        };
        let metrics = |d: &JobData| {
            let mut m = JobMetrics::default();
            StorageBench.metrics(d, &mut m);
            m.storage.unwrap()
        };
        let m = metrics(&data(Some(serde_json::to_value(&rec).unwrap())));
        assert_eq!(m.storage_mof, 1.5);
        assert_eq!(m.storage_loops.len(), 2);
        let l = &m.storage_loops[0];
        assert_eq!((l.used, l.mof, l.mem_size_bytes), (true, Some(1.5), 1500));
        assert_eq!(
            l.probes,
            vec![
                StorageProbeMetrics {
                    stage: "bisect".into(),
                    mem_frac: 1.0,
                    rps: 310.5
                },
                StorageProbeMetrics {
                    stage: "bisect".into(),
                    mem_frac: 0.5,
                    rps: 1000.0
                },
            ]
        );
        assert_eq!(
            (m.storage_loops[1].used, m.storage_loops[1].mof),
            (false, None)
        );
        let v = serde_json::to_value(metrics(&data(None))).unwrap();
        assert!(v.get("storage_loops").is_none(), "{v}");
        assert_eq!(v["storage_mof"], 1.5);
    }

    #[test]
    fn keys_and_values_are_checked() {
        let p = props(
            &parse("storage:loops=2,hash-size=1M,rps-max=300,mem-avail-err-max=0.2").unwrap(),
        )
        .unwrap();
        assert_eq!(
            (p.loops, p.hash_size, p.rps_max, p.err_max),
            (2, 1 << 20, 300, 0.2)
        );
        assert_eq!(props(&parse("storage").unwrap()).unwrap(), Props::default());
        assert!(
            check_spec(&parse("storage:lops=3").unwrap())
                .unwrap_err()
                .to_string()
                .contains("loops")
        );
        for bad in [
            "storage:loops=x",
            "storage:loops=0",
            "storage:rps-max=0",
            "storage:mem-avail-err-max=2",
            "storage:hash-size=1",
            "storage:apply=maybe",
            "storage:mem-avail-inner-retries=-1",
        ] {
            let e = check_spec(&parse(bad).unwrap()).unwrap_err();
            let key = bad.split(':').nth(1).unwrap().split('=').next().unwrap();
            assert!(e.to_string().contains(key), "{bad}: {e}");
        }
    }

    fn run_rec(usage: u64, size: u64, used: bool) -> LoopRecord {
        LoopRecord {
            usage,
            size,
            used,
            secs: 10.0,
            rbytes: 100 << 20,
            wbytes: 50 << 20,
            final_rbps: 20.0 * 1048576.0,
            final_wbps: 4.0 * 1048576.0,
            read_lat: Some(0.002),
            ..LoopRecord::default()
        }
    }

    #[test]
    fn the_factor_is_size_mean_over_usage_mean_of_kept_loops() {
        let g = 1u64 << 30;
        let rec = StorageRecord {
            rps_max: 2000,
            hash_size: 1258291,
            log_bps: 1 << 20,
            loops: 2,
            mem_profile: 16,
            mem_avail: 20 * g,
            mem_share: 12 * g,
            swap_total: 8 * g,
            runs: vec![
                run_rec(12 * g, 18 * g, true),
                run_rec(6 * g, 30 * g, false),
                run_rec(12 * g, 20 * g, true),
            ],
            ..StorageRecord::default()
        };
        let r = study(&rec);
        assert!((r.mem_offload_factor - 19.0 / 12.0).abs() < 1e-9, "{r:?}");
        assert!((r.mem_size_stdev - (2.0f64).sqrt() * g as f64).abs() < 1.0);
        assert_eq!(r.mem_usage_stdev, 0.0);
        // All loops' IO counts, retried ones too: 300M read in 30 s.
        assert!((r.rbps_all - 10.0 * 1048576.0).abs() < 1.0);
        assert_eq!(r.read_lat_mean, Some(0.002));
        assert_eq!(r.write_lat_mean, None);
        assert!(!r.swap_full);
        let d = JobData {
            spec: parse("storage:loops=2").unwrap(),
            period: (0, 0),
            sysinfo: Value::Null,
            record: Some(serde_json::to_value(&rec).unwrap()),
            result: Some(serde_json::to_value(&r).unwrap()),
        };
        let text = format(&d, true).unwrap();
        assert!(
            text.contains("Memory offloading: factor=1.583@16 usage/stdev=12.0G/0 size/stdev=19.0G/1.4G missing=0%"),
            "{text}"
        );
        assert!(
            text.contains("Params: hash_size=1.2M rps_max=2000 log_bps=1.0M loops=2"),
            "{text}"
        );
        assert!(text.contains("read_all=10.0M"), "{text}");
        assert!(text.contains("read=2.0m write=-"), "{text}");
        assert_eq!(text.matches("  yes  ").count(), 2, "{text}");
        assert_eq!(text.matches("   no  ").count(), 1, "{text}");

        // One loop: upstream's short form. 38 of 40 seconds sampled.
        let mut one = rec.clone();
        one.loops = 1;
        one.runs = vec![LoopRecord {
            samples: 38,
            samples_expected: 40,
            ..run_rec(12 * g, 18 * g, true)
        }];
        let r = study(&one);
        assert_eq!(r.nr_reports, (38, 2));
        let d = JobData {
            record: Some(serde_json::to_value(&one).unwrap()),
            result: Some(serde_json::to_value(&r).unwrap()),
            ..d
        };
        let text = format(&d, false).unwrap();
        assert!(
            text.contains(
                "Memory offloading: factor=1.500@16 usage=12.0G size=18.0G missing=5.00%"
            ),
            "{text}"
        );
    }

    #[test]
    fn root_samples_make_the_all_and_final_tables() {
        let g = 1u64 << 30;
        let root: Vec<(f64, SliceSample)> = (100..=120)
            .map(|t| {
                (
                    t as f64,
                    SliceSample {
                        cpu_usage: Some(t as f64 * 0.5),
                        mem_bytes: Some(t * 1000),
                        io_rbytes: Some(t << 20),
                        ..SliceSample::default()
                    },
                )
            })
            .collect();
        let rec = StorageRecord {
            loops: 1,
            nr_cpus: 2,
            runs: vec![LoopRecord {
                root,
                ..run_rec(g, 2 * g, true)
            }],
            ..StorageRecord::default()
        };
        let r = study(&rec);
        assert_eq!(r.all_rstat["cpu_util"]["mean"], 0.25);
        assert_eq!(r.all_rstat["io_rbps"]["mean"], 1048576.0);
        assert_eq!(r.all_rstat["mem_bytes"]["00"], 101_000.0);
        // FINAL: the loop's last 10 seconds only.
        assert_eq!(r.final_rstat["mem_bytes"]["00"], 111_000.0);
        let d = JobData {
            spec: parse("storage:loops=1").unwrap(),
            period: (0, 0),
            sysinfo: Value::Null,
            record: Some(serde_json::to_value(&rec).unwrap()),
            result: Some(serde_json::to_value(&r).unwrap()),
        };
        let text = format(&d, true).unwrap();
        assert!(text.contains("\nResource stat:\n\n[ALL]   "), "{text}");
        assert!(text.contains("\n[FINAL] "), "{text}");
        assert!(text.contains("\ncpu%  "), "{text}");
        // The summary has no tables; an older result says it has none.
        assert!(!format(&d, false).unwrap().contains("Resource stat:"));
        let old = JobData {
            result: Some(serde_json::to_value(study(&StorageRecord::default())).unwrap()),
            ..d
        };
        assert!(
            format(&old, true)
                .unwrap()
                .contains("(no per-second root samples")
        );
    }

    #[test]
    fn a_full_swap_is_flagged() {
        let g = 1u64 << 30;
        let mut l = run_rec(g, 2 * g, true);
        l.swap_peak = g - (1 << 20);
        let rec = StorageRecord {
            swap_total: g,
            runs: vec![l],
            ..StorageRecord::default()
        };
        assert!(study(&rec).swap_full);
    }
}
