//! The memory-hog scenario's data: what the runner records each second
//! ([`Sample`]), what it records per scenario ([`MemHogRecord`]), and the
//! study that turns both into a [`MemHogResult`].
//!
//! The study measures how well the latency-sensitive workload (hashd) is
//! protected while a memory hog runs:
//!
//! - *isolation* (`isol`): hashd's completed requests per second during the
//!   hog, as a fraction of the baseline rate, capped at 1;
//! - *latency impact* (`lat_imp`): how much hashd's controlled latency (its
//!   p95) rose above the baseline latency, as a fraction, floored at 0;
//! - *work conservation* (`work_csv`): with iocost, how much of the IO
//!   capacity the hog could not use was still used by others;
//! - per-slice resource statistics and the IO completion latency
//!   distribution over the whole scenario.
//!
//! Distributions are exact: values are sorted and the percentile `p` is the
//! value at index `round(p × (n − 1))`. Mean is exact, stdev is the sample
//! standard deviation (n − 1), 0 when there are fewer than two values.
//!
//! Nothing here panics: empty inputs give zeros, non-finite values are
//! ignored, and gaps are bounded by [`MAX_FILL_SLOTS`].

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Cumulative counters of one cgroup slice at one instant. `None` means the
/// counter cannot be measured on this host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SliceSample {
    /// Total CPU time, seconds.
    pub cpu_usage: Option<f64>,
    /// System (kernel) CPU time, seconds.
    pub cpu_sys: Option<f64>,
    /// Current memory usage, bytes (not cumulative).
    pub mem_bytes: Option<u64>,
    /// Bytes read from block devices.
    pub io_rbytes: Option<u64>,
    /// Bytes written to block devices.
    pub io_wbytes: Option<u64>,
    /// iocost usage, seconds; `None` without iocost.
    pub io_usage: Option<f64>,
    /// Pressure stall totals.
    pub psi: Option<PsiSample>,
}

/// Cumulative pressure stall (PSI) totals of a slice, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PsiSample {
    /// CPU, some.
    pub cpu_some: f64,
    /// Memory, some.
    pub mem_some: f64,
    /// Memory, full.
    pub mem_full: f64,
    /// IO, some.
    pub io_some: f64,
    /// IO, full.
    pub io_full: f64,
}

/// One second of the run as recorded by the runner.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Unix time, seconds.
    pub at: f64,
    /// Number of CPUs, to normalize CPU usage.
    pub nr_cpus: usize,
    /// hashd's report; `None` if it was missing or stale this second.
    pub hashd: Option<HashdSample>,
    /// The memory hog's report, if it is running and reported.
    pub hog: Option<HogSample>,
    /// The root slice.
    pub root: SliceSample,
    /// `workload.slice`, where hashd runs.
    pub workload: SliceSample,
    /// `system.slice`, where the memory hog runs.
    pub system: SliceSample,
    /// `[read, write]` completion latency of this second, in seconds, keyed
    /// by latency percentile (`"00"` … `"100"`) and/or `"mean"`; `None` if
    /// not measurable.
    pub iolat: Option<[BTreeMap<String, f64>; 2]>,
    /// iocost vrate in percent; `None` without iocost.
    pub vrate: Option<f64>,
}

/// hashd's state at one second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HashdSample {
    /// Requests per second.
    pub rps: f64,
    /// Controlled latency (the p95), seconds.
    pub lat_ctl: f64,
    /// Cumulative number of completed requests.
    pub nr_done: u64,
}

/// The memory hog's state at one second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HogSample {
    /// Bytes written so far.
    pub wbytes: u64,
    /// Bytes it could not write because it fell behind (lost debt).
    pub wloss: u64,
    /// Current memory footprint, bytes.
    pub mem_bytes: u64,
}

/// One run (loop) of the memory hog. Upstream's run has `failed`,
/// `last_hog_mem` and the hog's first and last reports; the rest is ours.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemHogRun {
    /// Unix times of the first hog report with memory > 0 and of the last
    /// hog report.
    #[serde(default)]
    pub hog_period: (f64, f64),
    /// `(target secs, after secs, message)` when the run failed (hashd died
    /// or timed out).
    pub failed: Option<(f64, f64, String)>,
    /// Mean of the hog's last 5 memory samples, bytes.
    pub last_hog_mem: u64,
    /// The hog's written bytes at its last report.
    #[serde(default)]
    pub last_hog_wbytes: u64,
    /// The hog's lost bytes at its last report.
    #[serde(default)]
    pub hog_wloss: u64,
    /// Why the hog ended, e.g. `killed by the kernel (OOM) after 41s`.
    #[serde(default)]
    pub end: String,
    /// Upstream's `first_hog_rep` and `last_hog_rep` (the hog's reports),
    /// kept as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_hog_rep: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_hog_rep: Option<serde_json::Value>,
}

/// What the runner records for one memory-hog scenario. Upstream's record
/// has no `loops`, `load` and `speed` (they are in the job's spec); ours
/// repeats them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemHogRecord {
    /// Number of hog runs requested.
    #[serde(default)]
    pub loops: u32,
    /// hashd load as a fraction of rps_max.
    #[serde(default)]
    pub load: f64,
    /// Hog write speed, e.g. `2x`.
    #[serde(default)]
    pub speed: String,
    /// Unix times of the whole scenario.
    pub period: (f64, f64),
    /// Unix times of the baseline hold before the first hog.
    pub base_period: (f64, f64),
    /// Baseline requests per second (rps_max × load; not measured).
    pub base_rps: f64,
    /// The hog runs.
    pub runs: Vec<MemHogRun>,
}

/// The studied result of one memory-hog scenario, or of several combined
/// with [`combine`].
///
/// Distribution maps (`isol`, `lat_imp`, the rstat fields) are keyed by
/// [`PCT_KEYS`] plus `"mean"` and `"stdev"`. The `*_samples` fields keep
/// the per-second values the distributions were computed from, so that
/// results re-loaded from the journal can still be combined.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemHogResult {
    /// Baseline requests per second.
    pub base_rps: f64,
    /// Mean controlled latency over the baseline period, seconds.
    pub base_lat: f64,
    /// Standard deviation of the baseline latency, seconds.
    pub base_lat_stdev: f64,
    /// Distribution of isolation (fraction of the baseline rps, ≤ 1).
    pub isol: BTreeMap<String, f64>,
    /// Distribution of the latency impact (fraction above baseline, ≥ 0).
    pub lat_imp: BTreeMap<String, f64>,
    /// Failed time over target time, 0.0001 ..= 1 if any run failed, else 0.
    pub fail_ratio: f64,
    /// Failure messages.
    pub fail_msgs: Vec<String>,
    /// Work conservation ratio; 1.0 without iocost.
    pub work_csv: f64,
    /// `[read, write]`: latency percentile row → time percentile column
    /// (see [`IOLAT_TIME_PCTS`], plus `"cum"`, `"mean"`, `"stdev"`) →
    /// seconds.
    pub iolat: [BTreeMap<String, BTreeMap<String, f64>>; 2],
    /// Root slice: field (see [`RSTAT_FIELDS`]) → distribution. A field
    /// that could not be measured is absent.
    #[serde(deserialize_with = "de_rstat")]
    pub root_rstat: BTreeMap<String, BTreeMap<String, f64>>,
    /// `workload.slice`, as `root_rstat`.
    #[serde(deserialize_with = "de_rstat")]
    pub work_rstat: BTreeMap<String, BTreeMap<String, f64>>,
    /// `system.slice`, as `root_rstat`.
    #[serde(deserialize_with = "de_rstat")]
    pub sys_rstat: BTreeMap<String, BTreeMap<String, f64>>,
    /// `(reports received, reports missed)` of hashd during the hog periods.
    pub nr_reports: (u64, u64),
    /// The scenario periods.
    pub periods: Vec<(f64, f64)>,
    /// The hog periods.
    pub hog_periods: Vec<(f64, f64)>,
    /// Mean iocost vrate during the hog periods, percent.
    pub vrate: f64,
    /// Standard deviation of the vrate.
    pub vrate_stdev: f64,
    /// IO usage of everyone during the hogs, vrate-scaled seconds.
    pub io_usage: f64,
    /// Unused IO capacity during the hogs, vrate-scaled seconds.
    pub io_unused: f64,
    /// IO usage of the hog (measured as `system.slice`), vrate-scaled
    /// seconds.
    pub hog_io_usage: f64,
    /// IO the hog would have used for the bytes it lost.
    pub hog_io_loss: f64,
    /// Bytes the hog wrote beyond its final memory footprint.
    pub hog_bytes: u64,
    /// Bytes the hog could not write.
    pub hog_lost_bytes: u64,
    /// Number of hog runs (ours).
    #[serde(default)]
    pub nr_runs: u32,
    /// Why each hog run ended (ours).
    #[serde(default)]
    pub ends: Vec<String>,
    /// Per-second isolation values behind `isol`.
    #[serde(default)]
    pub isol_samples: Vec<f64>,
    /// Per-second latency impact values behind `lat_imp`.
    #[serde(default)]
    pub lat_imp_samples: Vec<f64>,
    /// Per-second `[read, write]` latency maps behind `iolat`.
    #[serde(default)]
    pub iolat_samples: [Vec<BTreeMap<String, f64>>; 2],
    /// Per-second values behind `[root_rstat, work_rstat, sys_rstat]`:
    /// field → values.
    #[serde(default)]
    pub rstat_samples: [BTreeMap<String, Vec<f64>>; 3],
}

/// Reads a slice's resource statistics: ours (field → distribution) or
/// upstream's `ResourceStat` object, whose fields are renamed to ours
/// (`cpu_sys` → `sys_util`, `io_bps` → `io_rbps`/`io_wbps`, `psi_cpu` →
/// `cpu_some`, `psi_mem`/`psi_io` → `*_some`/`*_full`); its other
/// distributions are kept under their own names (`swap_bytes`) or
/// prefixed by their group (`mem_stat.anon`, `io_stat.rbytes`,
/// `vmstat.pgscan`).
pub(crate) fn de_rstat<'de, D>(d: D) -> Result<BTreeMap<String, BTreeMap<String, f64>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::Error;
    type Dist = BTreeMap<String, f64>;
    let v = serde_json::Value::deserialize(d)?;
    let serde_json::Value::Object(obj) = v else {
        return Err(D::Error::custom(format!(
            "expected an object of distributions, found {v}"
        )));
    };
    let dist = |name: &str, v: serde_json::Value| -> Result<Dist, D::Error> {
        serde_json::from_value(v).map_err(|e| D::Error::custom(format!("{name}: {e}")))
    };
    let mut out = BTreeMap::new();
    for (k, v) in obj {
        let pair = |v: serde_json::Value, a: &str, b: &str, out: &mut BTreeMap<String, Dist>| {
            let (x, y): (Dist, Dist) = serde_json::from_value(v).map_err(|e| {
                D::Error::custom(format!("{k}: {e}; expected a pair of distributions"))
            })?;
            out.insert(a.to_string(), x);
            out.insert(b.to_string(), y);
            Ok::<(), D::Error>(())
        };
        match k.as_str() {
            "cpu_sys" => {
                out.insert("sys_util".to_string(), dist(&k, v)?);
            }
            "psi_cpu" => {
                out.insert("cpu_some".to_string(), dist(&k, v)?);
            }
            "io_bps" => pair(v, "io_rbps", "io_wbps", &mut out)?,
            "psi_mem" => pair(v, "mem_some", "mem_full", &mut out)?,
            "psi_io" => pair(v, "io_some", "io_full", &mut out)?,
            "mem_stat" | "io_stat" | "vmstat" => {
                let group: BTreeMap<String, Dist> =
                    serde_json::from_value(v).map_err(|e| D::Error::custom(format!("{k}: {e}")))?;
                for (sub, d) in group {
                    out.insert(format!("{k}.{sub}"), d);
                }
            }
            _ => {
                out.insert(k.clone(), dist(&k, v)?);
            }
        }
    }
    Ok(out)
}

/// Percentile keys of the distribution tables (`"00"` is the minimum,
/// `"100"` the maximum).
pub const PCT_KEYS: [&str; 11] = [
    "00", "01", "05", "10", "25", "50", "75", "90", "95", "99", "100",
];

/// Time percentile columns of the IO latency tables.
pub const IOLAT_TIME_PCTS: [&str; 9] = ["00", "25", "50", "75", "90", "95", "99", "99.9", "100"];

/// Latency percentile rows of the IO latency tables, in order: the keys
/// the block tracer writes each second.
pub use crate::sys::iotrace::LAT_PCTS as IOLAT_LAT_PCTS;

/// Field names of the per-slice resource statistics, in table order.
pub const RSTAT_FIELDS: [&str; 11] = [
    "cpu_util",
    "sys_util",
    "mem_bytes",
    "io_util",
    "io_rbps",
    "io_wbps",
    "cpu_some",
    "mem_some",
    "mem_full",
    "io_some",
    "io_full",
];

/// Upper bound of the 1-second slots one gap (or the failed time) can fill,
/// so that absurd timestamps cannot exhaust memory: one day.
pub const MAX_FILL_SLOTS: usize = 86_400;

/// The value at `p` (0 ..= 1) of an ascending slice: index
/// `round(p × (n − 1))`; 0 for an empty slice.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
    let idx = (p * (sorted.len() - 1) as f64).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Exact mean and sample standard deviation (n − 1) of `values`; `(0, 0)`
/// when empty, stdev 0 with a single value.
pub fn mean_stdev(values: &[f64]) -> (f64, f64) {
    let n = values.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    (mean, var.sqrt())
}

/// Parses a percentile key such as `"05"` or `"99.9"` into a fraction.
fn key_frac(key: &str) -> Option<f64> {
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    key.parse::<f64>().ok().map(|v| v / 100.0)
}

/// The finite values, sorted ascending.
fn sorted_finite(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The distribution of `values` keyed by `keys` (percentile keys) plus
/// `"mean"` and `"stdev"`. Non-finite values are ignored; with no values
/// every entry is 0.
pub fn dist_map(values: &[f64], keys: &[&str]) -> BTreeMap<String, f64> {
    let sorted = sorted_finite(values);
    let mut map = BTreeMap::new();
    for key in keys {
        let p = key_frac(key).unwrap_or(0.0);
        map.insert(key.to_string(), percentile(&sorted, p));
    }
    let (mean, stdev) = mean_stdev(&sorted);
    map.insert("mean".to_string(), mean);
    map.insert("stdev".to_string(), stdev);
    map
}

/// [`dist_map`] with [`PCT_KEYS`].
pub fn pct_map(values: &[f64]) -> BTreeMap<String, f64> {
    dist_map(values, &PCT_KEYS)
}

/// Number of 1-second slots covered by a gap of `dt` seconds (`dt > 0`).
fn slots(dt: f64) -> usize {
    let r = dt.round();
    if r.is_nan() || r < 1.0 {
        1
    } else if r >= MAX_FILL_SLOTS as f64 {
        MAX_FILL_SLOTS
    } else {
        r as usize
    }
}

fn in_period(s: &Sample, (a, b): (f64, f64)) -> bool {
    s.at >= a && s.at <= b
}

/// Isolation of one interval: rate / base, within 0 ..= 1.
fn isol_value(rate: f64, base_rps: f64) -> f64 {
    if base_rps.is_nan() || base_rps <= 0.0 || !rate.is_finite() {
        return if rate > 0.0 { 1.0 } else { 0.0 };
    }
    (rate / base_rps).clamp(0.0, 1.0)
}

/// Latency impact: max(max(lat, base)/base − 1, 0); 0 without a baseline.
fn lat_imp_value(lat: f64, base_lat: f64) -> f64 {
    if base_lat.is_nan() || base_lat <= 0.0 || !base_lat.is_finite() || !lat.is_finite() {
        return 0.0;
    }
    (lat.max(base_lat) / base_lat - 1.0).max(0.0)
}

/// The non-negative rate of a cumulative counter between two samples.
fn delta_rate(a: Option<f64>, b: Option<f64>, per: f64) -> Option<f64> {
    let d = b? - a?;
    let r = d / per;
    (d >= 0.0 && r.is_finite()).then_some(r)
}

fn u2f(v: Option<u64>) -> Option<f64> {
    v.map(|v| v as f64)
}

/// Appends one slice's per-second values of a pair of samples.
pub(crate) fn push_rstat(
    acc: &mut BTreeMap<String, Vec<f64>>,
    a: &SliceSample,
    b: &SliceSample,
    dt: f64,
    nr_cpus: usize,
) {
    let mut put = |field: &str, v: Option<f64>| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            acc.entry(field.to_string()).or_default().push(v);
        }
    };
    let cpu_div = dt * nr_cpus as f64;
    if nr_cpus > 0 {
        put("cpu_util", delta_rate(a.cpu_usage, b.cpu_usage, cpu_div));
        put("sys_util", delta_rate(a.cpu_sys, b.cpu_sys, cpu_div));
    }
    put("mem_bytes", u2f(b.mem_bytes));
    put("io_util", delta_rate(a.io_usage, b.io_usage, dt));
    put(
        "io_rbps",
        delta_rate(u2f(a.io_rbytes), u2f(b.io_rbytes), dt),
    );
    put(
        "io_wbps",
        delta_rate(u2f(a.io_wbytes), u2f(b.io_wbytes), dt),
    );
    if let (Some(pa), Some(pb)) = (&a.psi, &b.psi) {
        type Field = fn(&PsiSample) -> f64;
        let fields: [(&str, Field); 5] = [
            ("cpu_some", |p| p.cpu_some),
            ("mem_some", |p| p.mem_some),
            ("mem_full", |p| p.mem_full),
            ("io_some", |p| p.io_some),
            ("io_full", |p| p.io_full),
        ];
        for (name, f) in fields {
            put(name, delta_rate(Some(f(pa)), Some(f(pb)), dt));
        }
    }
}

/// Distributions of per-second rstat values; fields without values are
/// left out.
pub(crate) fn rstat_maps(
    acc: &BTreeMap<String, Vec<f64>>,
) -> BTreeMap<String, BTreeMap<String, f64>> {
    acc.iter()
        .filter(|(_, v)| v.iter().any(|v| v.is_finite()))
        .map(|(k, v)| (k.clone(), pct_map(v)))
        .collect()
}

/// Orders latency row keys: numeric keys by value, then the others by name.
pub fn cmp_pct_keys(a: &str, b: &str) -> Ordering {
    match (key_frac(a), key_frac(b)) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// The CDF of one second's latency distribution at `x`, interpolated
/// linearly between its known percentile points `pts` (ascending by
/// fraction; latencies are non-decreasing after [`cdf_points`]).
fn second_cdf(pts: &[(f64, f64)], x: f64) -> f64 {
    let Some(&(_, first_x)) = pts.first() else {
        return 0.0;
    };
    if x < first_x {
        return 0.0;
    }
    let mut f = 0.0;
    for (i, &(q, xq)) in pts.iter().enumerate() {
        if xq > x {
            break;
        }
        f = q;
        if let Some(&(nq, nx)) = pts.get(i + 1)
            && nx > x
            && nx > xq
        {
            f = q + (nq - q) * (x - xq) / (nx - xq);
            break;
        }
    }
    if x >= pts[pts.len() - 1].1 { 1.0 } else { f }
}

/// One second's `(fraction, latency)` points from its numeric keys, sorted
/// by fraction with latencies made non-decreasing.
fn cdf_points(map: &BTreeMap<String, f64>) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = map
        .iter()
        .filter_map(|(k, v)| Some((key_frac(k)?, *v)))
        .filter(|(q, v)| q.is_finite() && v.is_finite() && (0.0..=1.0).contains(q))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut max = f64::NEG_INFINITY;
    for p in pts.iter_mut() {
        max = max.max(p.1);
        p.1 = max;
    }
    pts
}

/// The `p` quantile of the equal-weight mixture of the per-second
/// distributions, or `None` if no second has at least two points.
fn pooled_quantile(seconds: &[Vec<(f64, f64)>], p: f64) -> Option<f64> {
    let secs: Vec<&Vec<(f64, f64)>> = seconds.iter().filter(|s| s.len() >= 2).collect();
    if secs.is_empty() {
        return None;
    }
    let cdf = |x: f64| secs.iter().map(|s| second_cdf(s, x)).sum::<f64>() / secs.len() as f64;
    let mut lo = secs.iter().map(|s| s[0].1).fold(f64::INFINITY, f64::min);
    let mut hi = secs
        .iter()
        .map(|s| s[s.len() - 1].1)
        .fold(f64::NEG_INFINITY, f64::max);
    let target = p - 1e-12;
    if cdf(lo) >= target {
        return Some(lo);
    }
    for _ in 0..100 {
        let mid = lo + (hi - lo) / 2.0;
        if !(mid > lo && mid < hi) {
            break;
        }
        if cdf(mid) >= target {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// Studies one direction's per-second latency maps: for each latency row,
/// the distribution over seconds ([`IOLAT_TIME_PCTS`], `"mean"`,
/// `"stdev"`) and `"cum"`.
///
/// `"cum"` approximates the row over all seconds pooled. Upstream takes it
/// from the agent's cumulative, IO-count weighted histogram, which is not
/// recorded here; instead each second's distribution is rebuilt by linear
/// interpolation between its percentile points, the seconds are mixed with
/// equal weight and the row's percentile of the mixture is taken. The
/// `"mean"` row's `cum` is the mean of the per-second means. When no second
/// has two or more percentile points, `cum` falls back to the time-p50.
pub fn study_iolat(per_sec: &[BTreeMap<String, f64>]) -> BTreeMap<String, BTreeMap<String, f64>> {
    let mut rows: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for map in per_sec {
        for (k, v) in map {
            if v.is_finite() {
                rows.entry(k.clone()).or_default().push(*v);
            }
        }
    }
    let cdfs: Vec<Vec<(f64, f64)>> = per_sec.iter().map(cdf_points).collect();
    let mut out = BTreeMap::new();
    for (row, values) in rows {
        let mut map = dist_map(&values, &IOLAT_TIME_PCTS);
        let cum = match key_frac(&row) {
            Some(p) => pooled_quantile(&cdfs, p),
            None if row == "mean" => Some(map["mean"]),
            None => None,
        };
        let cum = cum.unwrap_or(map["50"]);
        map.insert("cum".to_string(), cum);
        out.insert(row, map);
    }
    out
}

/// What a scenario's hog periods add up to, second by second.
#[derive(Default)]
struct HogSeconds {
    isol: Vec<f64>,
    lat_imp: Vec<f64>,
    /// hashd reports got and missed.
    got: u64,
    missed: u64,
    io_usage: f64,
    io_unused: f64,
    hog_io_usage: f64,
    vrates: Vec<f64>,
}

impl HogSeconds {
    /// Isolation and latency impact from hashd's reports.
    fn add_reports(&mut self, in_hog: &[&Sample], base_rps: f64, base_lat: f64) {
        let mut last: Option<(f64, u64)> = None;
        for s in in_hog {
            let Some(h) = &s.hashd else { continue };
            if let Some((last_at, last_done)) = last {
                let dt = s.at - last_at;
                if dt.is_nan() || dt <= 0.0 {
                    continue;
                }
                let cnt = slots(dt);
                self.missed += cnt as u64 - 1;
                let rate = h.nr_done.saturating_sub(last_done) as f64 / dt;
                let iv = isol_value(rate, base_rps);
                let li = lat_imp_value(h.lat_ctl, base_lat);
                self.isol.extend(std::iter::repeat_n(iv, cnt));
                self.lat_imp.extend(std::iter::repeat_n(li, cnt));
            }
            self.got += 1;
            last = Some((s.at, h.nr_done));
        }
    }

    /// Work conservation inputs.
    fn add_io(&mut self, in_hog: &[&Sample]) {
        for s in in_hog {
            if let Some(v) = s.vrate.filter(|v| v.is_finite()) {
                self.vrates.push(v);
            }
        }
        for pair in in_hog.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let dt = b.at - a.at;
            if !(dt > 0.0 && dt.is_finite()) {
                continue;
            }
            let Some(v) = b.vrate.filter(|v| v.is_finite()).map(|v| v / 100.0) else {
                continue;
            };
            if let (Some(u0), Some(u1)) = (a.root.io_usage, b.root.io_usage) {
                let du = u1 - u0;
                if du.is_finite() {
                    self.io_usage += du.max(0.0) * v;
                    self.io_unused += (dt - du).max(0.0) * v;
                }
            }
            if let (Some(h0), Some(h1)) = (a.system.io_usage, b.system.io_usage) {
                let dh = h1 - h0;
                if dh.is_finite() {
                    self.hog_io_usage += dh.max(0.0) * v;
                }
            }
        }
    }
}

/// The failed runs: the failed share of the hogs' target time, the
/// messages, and how many failed seconds to count.
fn failures(rec: &MemHogRecord) -> (f64, Vec<String>, usize) {
    let mut fail_time = 0.0;
    let mut target_time = 0.0;
    let mut fail_msgs = Vec::new();
    for (target, after, msg) in rec.runs.iter().filter_map(|r| r.failed.as_ref()) {
        let lost = target - after;
        if lost.is_finite() && lost > 0.0 {
            fail_time += lost;
        }
        if target.is_finite() && *target > 0.0 {
            target_time += target;
        }
        fail_msgs.push(msg.clone());
    }
    let any_failed = rec.runs.iter().any(|r| r.failed.is_some());
    let fail_ratio = if any_failed {
        let r = if target_time > 0.0 {
            fail_time / target_time
        } else {
            1.0
        };
        if r.is_nan() {
            1.0
        } else {
            r.clamp(0.0001, 1.0)
        }
    } else {
        0.0
    };
    let nr_fail = if fail_time > 0.0 {
        (fail_time.ceil() as usize).min(MAX_FILL_SLOTS)
    } else {
        0
    };
    (fail_ratio, fail_msgs, nr_fail)
}

/// Resource stats and IO latency over the whole scenario.
#[allow(clippy::type_complexity)]
fn scenario_samples(
    rec: &MemHogRecord,
    samples: &[Sample],
) -> (
    [BTreeMap<String, Vec<f64>>; 3],
    [Vec<BTreeMap<String, f64>>; 2],
) {
    let mut rstat_samples: [BTreeMap<String, Vec<f64>>; 3] = Default::default();
    let mut iolat_samples: [Vec<BTreeMap<String, f64>>; 2] = Default::default();
    let in_scn: Vec<&Sample> = samples
        .iter()
        .filter(|s| in_period(s, rec.period))
        .collect();
    for pair in in_scn.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let dt = b.at - a.at;
        if !(dt > 0.0 && dt.is_finite()) {
            continue;
        }
        push_rstat(&mut rstat_samples[0], &a.root, &b.root, dt, b.nr_cpus);
        push_rstat(
            &mut rstat_samples[1],
            &a.workload,
            &b.workload,
            dt,
            b.nr_cpus,
        );
        push_rstat(&mut rstat_samples[2], &a.system, &b.system, dt, b.nr_cpus);
    }
    for s in &in_scn {
        if let Some(lat) = &s.iolat {
            for (dir, map) in lat.iter().enumerate() {
                iolat_samples[dir].push(map.clone());
            }
        }
    }
    (rstat_samples, iolat_samples)
}

/// Studies one memory-hog scenario from its record and the per-second
/// samples (sorted by `at`). See the module documentation.
pub fn study(rec: &MemHogRecord, samples: &[Sample]) -> MemHogResult {
    let base_rps = if rec.base_rps.is_finite() {
        rec.base_rps
    } else {
        0.0
    };

    // Baseline latency.
    let base_lats: Vec<f64> = samples
        .iter()
        .filter(|s| in_period(s, rec.base_period))
        .filter_map(|s| s.hashd.as_ref().map(|h| h.lat_ctl))
        .filter(|v| v.is_finite())
        .collect();
    let (base_lat, base_lat_stdev) = mean_stdev(&base_lats);

    let mut hs = HogSeconds::default();
    for run in &rec.runs {
        let period = run.hog_period;
        let in_hog: Vec<&Sample> = samples.iter().filter(|s| in_period(s, period)).collect();
        hs.add_reports(&in_hog, base_rps, base_lat);
        hs.add_io(&in_hog);
    }
    let HogSeconds {
        mut isol,
        mut lat_imp,
        got,
        missed,
        io_usage,
        io_unused,
        hog_io_usage,
        vrates,
    } = hs;

    // Failed time counts as no isolation and a 100% latency impact.
    let (fail_ratio, fail_msgs, nr_fail) = failures(rec);
    isol.extend(std::iter::repeat_n(0.0, nr_fail));
    lat_imp.extend(std::iter::repeat_n(1.0, nr_fail));

    let hog_bytes = rec.runs.iter().fold(0u64, |acc, r| {
        acc.saturating_add(r.last_hog_wbytes.saturating_sub(r.last_hog_mem))
    });
    let hog_lost_bytes = rec
        .runs
        .iter()
        .fold(0u64, |acc, r| acc.saturating_add(r.hog_wloss));
    let hog_io_loss = hog_io_loss(hog_lost_bytes, hog_io_usage, hog_bytes);
    let work_csv = work_csv(io_usage, io_unused, hog_io_loss);
    let (vrate, vrate_stdev) = mean_stdev(&vrates);
    let (rstat_samples, iolat_samples) = scenario_samples(rec, samples);

    MemHogResult {
        base_rps,
        base_lat,
        base_lat_stdev,
        isol: pct_map(&isol),
        lat_imp: pct_map(&lat_imp),
        fail_ratio,
        fail_msgs,
        work_csv,
        iolat: [
            study_iolat(&iolat_samples[0]),
            study_iolat(&iolat_samples[1]),
        ],
        root_rstat: rstat_maps(&rstat_samples[0]),
        work_rstat: rstat_maps(&rstat_samples[1]),
        sys_rstat: rstat_maps(&rstat_samples[2]),
        nr_reports: (got, missed),
        periods: vec![rec.period],
        hog_periods: rec.runs.iter().map(|r| r.hog_period).collect(),
        vrate,
        vrate_stdev,
        io_usage,
        io_unused,
        hog_io_usage,
        hog_io_loss,
        hog_bytes,
        hog_lost_bytes,
        nr_runs: u32::try_from(rec.runs.len()).unwrap_or(u32::MAX),
        ends: rec.runs.iter().map(|r| r.end.clone()).collect(),
        isol_samples: isol,
        lat_imp_samples: lat_imp,
        iolat_samples,
        rstat_samples,
    }
}

/// IO the hog would have needed for the bytes it lost:
/// lost × usage / written, 0 if it wrote nothing.
fn hog_io_loss(lost_bytes: u64, hog_io_usage: f64, hog_bytes: u64) -> f64 {
    if hog_bytes == 0 {
        return 0.0;
    }
    let v = lost_bytes as f64 * hog_io_usage / hog_bytes as f64;
    if v.is_finite() { v } else { 0.0 }
}

/// usage / (usage + min(unused, hog loss)) if there was any usage, else 1.
fn work_csv(io_usage: f64, io_unused: f64, hog_io_loss: f64) -> f64 {
    if io_usage > 0.0 {
        let v = io_usage / (io_usage + io_unused.min(hog_io_loss).max(0.0));
        if v.is_finite() { v } else { 1.0 }
    } else {
        1.0
    }
}

/// Combines scenario results into the "Memory Hog Summary".
///
/// - `base_rps`, `base_lat`, `work_csv` and `vrate` are means weighted by
///   each result's `nr_runs` (plain means if no result has runs);
/// - `base_lat_stdev` and `vrate_stdev` are pooled:
///   sqrt(Σ sd² × (runs − 1) / (total runs − results)), 0 when that
///   denominator is not positive;
/// - IO, hog byte and report counts are summed; `fail_ratio` is the
///   run-weighted mean (at least 0.0001 if any result failed); messages,
///   ends and periods are concatenated;
/// - `isol`, `lat_imp`, `iolat` and the rstat tables are recomputed from
///   the concatenated per-second samples.
pub fn combine(results: &[MemHogResult]) -> MemHogResult {
    let mut out = MemHogResult {
        work_csv: 1.0,
        ..Default::default()
    };
    if results.is_empty() {
        out.isol = pct_map(&[]);
        out.lat_imp = pct_map(&[]);
        return out;
    }
    let total_runs: u64 = results.iter().map(|r| r.nr_runs as u64).sum();
    let weight = |r: &MemHogResult| {
        if total_runs > 0 {
            r.nr_runs as f64
        } else {
            1.0
        }
    };
    let wsum: f64 = results.iter().map(weight).sum();
    let wmean = |f: &dyn Fn(&MemHogResult) -> f64| {
        let v = results.iter().map(|r| f(r) * weight(r)).sum::<f64>() / wsum;
        if v.is_finite() { v } else { 0.0 }
    };
    let pooled = |f: &dyn Fn(&MemHogResult) -> f64| {
        let denom = total_runs as f64 - results.len() as f64;
        if denom <= 0.0 {
            return 0.0;
        }
        let num: f64 = results
            .iter()
            .map(|r| f(r).powi(2) * (r.nr_runs as f64 - 1.0).max(0.0))
            .sum();
        let v = (num / denom).sqrt();
        if v.is_finite() { v } else { 0.0 }
    };

    out.base_rps = wmean(&|r| r.base_rps);
    out.base_lat = wmean(&|r| r.base_lat);
    out.base_lat_stdev = pooled(&|r| r.base_lat_stdev);
    out.work_csv = wmean(&|r| r.work_csv);
    out.vrate = wmean(&|r| r.vrate);
    out.vrate_stdev = pooled(&|r| r.vrate_stdev);
    out.fail_ratio = wmean(&|r| r.fail_ratio);
    if results.iter().any(|r| r.fail_ratio > 0.0) {
        out.fail_ratio = out.fail_ratio.clamp(0.0001, 1.0);
    }

    for r in results {
        out.io_usage += r.io_usage;
        out.io_unused += r.io_unused;
        out.hog_io_usage += r.hog_io_usage;
        out.hog_io_loss += r.hog_io_loss;
        out.hog_bytes = out.hog_bytes.saturating_add(r.hog_bytes);
        out.hog_lost_bytes = out.hog_lost_bytes.saturating_add(r.hog_lost_bytes);
        out.nr_reports.0 = out.nr_reports.0.saturating_add(r.nr_reports.0);
        out.nr_reports.1 = out.nr_reports.1.saturating_add(r.nr_reports.1);
        out.nr_runs = out.nr_runs.saturating_add(r.nr_runs);
        out.fail_msgs.extend(r.fail_msgs.iter().cloned());
        out.ends.extend(r.ends.iter().cloned());
        out.periods.extend(r.periods.iter().copied());
        out.hog_periods.extend(r.hog_periods.iter().copied());
        out.isol_samples.extend(r.isol_samples.iter().copied());
        out.lat_imp_samples
            .extend(r.lat_imp_samples.iter().copied());
        for dir in 0..2 {
            out.iolat_samples[dir].extend(r.iolat_samples[dir].iter().cloned());
        }
        for slice in 0..3 {
            for (field, values) in &r.rstat_samples[slice] {
                out.rstat_samples[slice]
                    .entry(field.clone())
                    .or_default()
                    .extend(values.iter().copied());
            }
        }
    }

    out.isol = pct_map(&out.isol_samples);
    out.lat_imp = pct_map(&out.lat_imp_samples);
    out.iolat = [
        study_iolat(&out.iolat_samples[0]),
        study_iolat(&out.iolat_samples[1]),
    ];
    out.root_rstat = rstat_maps(&out.rstat_samples[0]);
    out.work_rstat = rstat_maps(&out.rstat_samples[1]);
    out.sys_rstat = rstat_maps(&out.rstat_samples[2]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE_RPS: f64 = 100.0;
    const BASE_LAT: f64 = 0.05;

    /// One sample per second from 0 to `end`: hashd completes `rate(t)`
    /// requests in the second ending at t with latency `lat(t)`.
    fn samples(end: u32, rate: impl Fn(u32) -> u64, lat: impl Fn(u32) -> f64) -> Vec<Sample> {
        let mut done = 0;
        (0..=end)
            .map(|t| {
                done += rate(t);
                Sample {
                    at: 1000.0 + t as f64,
                    nr_cpus: 4,
                    hashd: Some(HashdSample {
                        rps: rate(t) as f64,
                        lat_ctl: lat(t),
                        nr_done: done,
                    }),
                    ..Default::default()
                }
            })
            .collect()
    }

    fn record(runs: Vec<MemHogRun>) -> MemHogRecord {
        MemHogRecord {
            loops: runs.len() as u32,
            load: 1.0,
            speed: "2x".into(),
            period: (1000.0, 1100.0),
            base_period: (1000.0, 1015.0),
            base_rps: BASE_RPS,
            runs,
        }
    }

    fn hog_run(from: u32, to: u32) -> MemHogRun {
        MemHogRun {
            hog_period: (1000.0 + from as f64, 1000.0 + to as f64),
            end: "timeout 60s".into(),
            ..Default::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn steady_hashd_is_fully_isolated() {
        let s = samples(100, |_| 100, |_| BASE_LAT);
        let r = study(&record(vec![hog_run(20, 80)]), &s);
        assert!(close(r.base_lat, BASE_LAT) && close(r.base_lat_stdev, 0.0));
        assert_eq!(r.isol_samples.len(), 60, "the first report gives no sample");
        for k in PCT_KEYS {
            assert!(close(r.isol[k], 1.0), "isol {k}");
            assert_eq!(r.lat_imp[k], 0.0, "lat_imp {k}");
        }
        assert!(close(r.isol["mean"], 1.0) && close(r.isol["stdev"], 0.0));
        assert_eq!(r.nr_reports, (61, 0));
        assert_eq!(r.fail_ratio, 0.0);
        assert_eq!(r.work_csv, 1.0);
        assert_eq!(r.nr_runs, 1);
        assert_eq!(r.ends, vec!["timeout 60s".to_string()]);
        assert_eq!(r.hog_periods, vec![(1020.0, 1080.0)]);
        assert_eq!(r.periods, vec![(1000.0, 1100.0)]);
    }

    #[test]
    fn halved_hashd_gives_half_isolation_and_latency_impact() {
        let hog = |t: u32| (21..=80).contains(&t);
        let s = samples(
            100,
            |t| if hog(t) { 50 } else { 100 },
            |t| if hog(t) { 2.0 * BASE_LAT } else { BASE_LAT },
        );
        let r = study(&record(vec![hog_run(20, 80)]), &s);
        assert!(close(r.isol["50"], 0.5));
        assert!(close(r.isol["mean"], 0.5));
        assert!(close(r.lat_imp["50"], 1.0));
        // Faster than the baseline still counts as 1; lower latency as 0.
        let s = samples(100, |_| 300, |_| BASE_LAT / 2.0);
        let mut rec = record(vec![hog_run(20, 80)]);
        rec.base_period = (1000.0, 1000.0);
        let r = study(&rec, &s);
        assert!(close(r.isol["00"], 1.0));
        assert_eq!(r.lat_imp["100"], 0.0);
    }

    #[test]
    fn missing_seconds_are_filled() {
        let mut s = samples(100, |t| if t == 51 { 0 } else { 100 }, |_| BASE_LAT);
        // hashd's report at 50 is missing (the sample itself remains) and
        // the sample at 60 is gone altogether.
        s[50].hashd = None;
        s.remove(60);
        let r = study(&record(vec![hog_run(20, 80)]), &s);
        assert_eq!(r.isol_samples.len(), 60);
        assert_eq!(r.nr_reports, (59, 2));
        // 51: 100 requests (at 50 and 52 minus the missing 51's 0) over 2 s.
        assert!(
            r.isol_samples
                .iter()
                .all(|v| close(*v, 1.0) || close(*v, 0.5))
        );
        assert_eq!(r.isol_samples.iter().filter(|v| close(**v, 0.5)).count(), 2);
    }

    #[test]
    fn failed_run_adds_isolation_zero_and_fail_ratio() {
        let s = samples(100, |_| 100, |_| BASE_LAT);
        let mut run = hog_run(20, 80);
        run.failed = Some((300.0, 239.5, "hashd died".into()));
        let r = study(&record(vec![run, hog_run(80, 100)]), &s);
        // 60 + 20 good samples and ceil(60.5) failed ones.
        assert_eq!(r.isol_samples.len(), 60 + 20 + 61);
        assert_eq!(r.isol_samples.iter().filter(|v| **v == 0.0).count(), 61);
        assert_eq!(r.lat_imp_samples.iter().filter(|v| **v == 1.0).count(), 61);
        assert!(close(r.fail_ratio, 60.5 / 300.0));
        assert_eq!(r.fail_msgs, vec!["hashd died".to_string()]);
        assert_eq!(r.isol["00"], 0.0);

        // A tiny failure still shows; a zero target counts as fully failed.
        let mut run = hog_run(20, 80);
        run.failed = Some((300.0, 300.0, "late".into()));
        assert!(close(study(&record(vec![run]), &s).fail_ratio, 0.0001));
        let mut run = hog_run(20, 80);
        run.failed = Some((0.0, f64::NAN, "odd".into()));
        assert_eq!(study(&record(vec![run]), &s).fail_ratio, 1.0);
    }

    #[test]
    fn exact_percentiles_and_sample_stdev() {
        let v = [4.0, 1.0, 3.0, 2.0];
        let (mean, stdev) = mean_stdev(&v);
        assert!(close(mean, 2.5));
        assert!(close(stdev, (5.0f64 / 3.0).sqrt()), "n - 1");
        assert_eq!(mean_stdev(&[7.0]), (7.0, 0.0));
        assert_eq!(mean_stdev(&[]), (0.0, 0.0));
        let m = pct_map(&v);
        assert_eq!(m["00"], 1.0);
        assert_eq!(m["25"], 2.0); // round(0.75) = 1
        assert_eq!(m["50"], 3.0); // round(1.5) = 2
        assert_eq!(m["100"], 4.0);
        let m = pct_map(&[f64::NAN, 5.0, f64::INFINITY]);
        assert_eq!((m["00"], m["100"], m["stdev"]), (5.0, 5.0, 0.0));
    }

    #[test]
    fn empty_and_odd_inputs_do_not_panic() {
        let r = study(&MemHogRecord::default(), &[]);
        assert_eq!(r.isol.len(), PCT_KEYS.len() + 2);
        assert!(r.isol.values().chain(r.lat_imp.values()).all(|v| *v == 0.0));
        assert_eq!((r.fail_ratio, r.work_csv, r.nr_reports), (0.0, 1.0, (0, 0)));
        assert!(r.root_rstat.is_empty() && r.iolat[0].is_empty());

        let mut s = samples(5, |_| 10, |_| f64::NAN);
        s[2].at = f64::NAN;
        s[3].at = s[4].at; // zero duration
        s[5].at = 1e300; // absurd gap
        s[5].nr_cpus = 0;
        s[5].root.cpu_usage = Some(f64::NAN);
        let rec = MemHogRecord {
            period: (f64::NEG_INFINITY, f64::INFINITY),
            base_period: (0.0, 2000.0),
            base_rps: 0.0,
            runs: vec![MemHogRun {
                hog_period: (0.0, f64::INFINITY),
                failed: Some((1e300, 0.0, "x".into())),
                last_hog_mem: u64::MAX,
                last_hog_wbytes: 1,
                hog_wloss: u64::MAX,
                ..Default::default()
            }],
            ..Default::default()
        };
        let r = study(&rec, &s);
        assert!(r.isol_samples.len() <= 3 * MAX_FILL_SLOTS);
        assert_eq!(r.hog_bytes, 0);
        assert_eq!(r.hog_io_loss, 0.0);
        assert!(r.isol.values().all(|v| v.is_finite()));
        let _ = combine(&[r.clone(), r]);
        let c = combine(&[]);
        assert_eq!(c.work_csv, 1.0);
    }

    #[test]
    fn work_conservation_and_vrate() {
        let mut s = samples(100, |_| 100, |_| BASE_LAT);
        for (i, x) in s.iter_mut().enumerate() {
            x.vrate = Some(50.0);
            x.root.io_usage = Some(0.4 * i as f64);
            x.system.io_usage = Some(0.1 * i as f64);
        }
        let mut run = hog_run(20, 80);
        run.last_hog_wbytes = 3000;
        run.last_hog_mem = 1000;
        run.hog_wloss = 8000;
        let r = study(&record(vec![run]), &s);
        // 60 intervals at vrate 50%.
        assert!(close(r.io_usage, 60.0 * 0.4 * 0.5));
        assert!(close(r.io_unused, 60.0 * 0.6 * 0.5));
        assert!(close(r.hog_io_usage, 60.0 * 0.1 * 0.5));
        assert_eq!((r.hog_bytes, r.hog_lost_bytes), (2000, 8000));
        assert!(close(r.hog_io_loss, 8000.0 * 3.0 / 2000.0));
        // min(unused 18, loss 12) = 12.
        assert!(close(r.work_csv, 12.0 / (12.0 + 12.0)));
        assert!(close(r.vrate, 50.0) && close(r.vrate_stdev, 0.0));
    }

    #[test]
    fn rstat_per_slice() {
        let mut s = samples(10, |_| 100, |_| BASE_LAT);
        for (i, x) in s.iter_mut().enumerate() {
            let t = i as f64;
            x.root = SliceSample {
                cpu_usage: Some(2.0 * t),
                cpu_sys: Some(0.4 * t),
                mem_bytes: Some(1 << 30),
                io_rbytes: Some(1000 * i as u64),
                io_wbytes: Some(500 * i as u64),
                io_usage: None,
                psi: Some(PsiSample {
                    cpu_some: 0.01 * t,
                    mem_some: 0.2 * t,
                    mem_full: 0.1 * t,
                    io_some: 0.3 * t,
                    io_full: 0.05 * t,
                }),
            };
        }
        let r = study(&record(vec![hog_run(2, 8)]), &s);
        let f = |k: &str| r.root_rstat[k]["50"];
        assert!(close(f("cpu_util"), 0.5) && close(f("sys_util"), 0.1));
        assert!(close(f("mem_bytes"), (1u64 << 30) as f64));
        assert!(close(f("io_rbps"), 1000.0) && close(f("io_wbps"), 500.0));
        assert!(close(f("mem_some"), 0.2) && close(f("io_full"), 0.05));
        assert!(!r.root_rstat.contains_key("io_util"), "never measured");
        assert!(r.work_rstat.is_empty() && r.sys_rstat.is_empty());
        assert_eq!(r.rstat_samples[0]["cpu_util"].len(), 10);
    }

    #[test]
    fn iolat_distribution_over_seconds() {
        let mut s = samples(10, |_| 100, |_| BASE_LAT);
        for (i, x) in s.iter_mut().enumerate() {
            let m = |pairs: &[(&str, f64)]| {
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect::<BTreeMap<_, _>>()
            };
            let k = (i + 1) as f64 * 1e-3;
            x.iolat = Some([
                m(&[("00", 0.0), ("50", k), ("100", 2.0 * k), ("mean", k)]),
                m(&[("50", 0.002)]),
            ]);
        }
        let r = study(&record(vec![hog_run(2, 8)]), &s);
        let read = &r.iolat[0]["50"];
        assert!(close(read["00"], 1e-3) && close(read["100"], 11e-3));
        assert!(close(read["50"], 6e-3) && close(read["mean"], 6e-3));
        // The pooled median lies between the per-second medians.
        assert!(read["cum"] > 1e-3 && read["cum"] < 11e-3, "{}", read["cum"]);
        assert!(close(r.iolat[0]["mean"]["cum"], 6e-3));
        assert!((r.iolat[0]["100"]["cum"] - 22e-3).abs() < 1e-9);
        // One point per second: cum falls back to the time-p50.
        assert!(close(r.iolat[1]["50"]["cum"], 0.002));
        assert_eq!(r.iolat_samples[0].len(), 11);

        // Identical seconds: the pooled quantile is the seconds' value.
        let same = vec![cdf_points(&r.iolat_samples[0][0]); 3];
        assert!((pooled_quantile(&same, 0.5).unwrap() - 1e-3).abs() < 1e-12);
        assert!((pooled_quantile(&same, 0.75).unwrap() - 1.5e-3).abs() < 1e-12);
    }

    #[test]
    fn combine_weights_by_runs() {
        let a = MemHogResult {
            base_rps: 100.0,
            base_lat: 0.05,
            base_lat_stdev: 1.0,
            work_csv: 1.0,
            vrate: 100.0,
            nr_runs: 1,
            io_usage: 1.0,
            hog_bytes: 10,
            hog_lost_bytes: 1,
            nr_reports: (100, 1),
            isol_samples: vec![1.0; 3],
            lat_imp_samples: vec![0.0; 3],
            fail_msgs: vec!["a".into()],
            fail_ratio: 0.5,
            ..Default::default()
        };
        let b = MemHogResult {
            base_rps: 200.0,
            base_lat: 0.09,
            base_lat_stdev: 3.0,
            work_csv: 0.6,
            vrate: 80.0,
            nr_runs: 3,
            io_usage: 2.0,
            hog_bytes: 20,
            hog_lost_bytes: 2,
            nr_reports: (300, 3),
            isol_samples: vec![0.5; 1],
            lat_imp_samples: vec![2.0; 1],
            ..Default::default()
        };
        let c = combine(&[a, b]);
        assert!(close(c.base_rps, 175.0));
        assert!(close(c.base_lat, 0.08));
        assert!(close(c.work_csv, 0.7));
        assert!(close(c.vrate, 85.0));
        // sqrt((1² × 0 + 3² × 2) / (4 − 2))
        assert!(close(c.base_lat_stdev, 3.0));
        assert!(close(c.fail_ratio, 0.125));
        assert_eq!(c.nr_runs, 4);
        assert!(close(c.io_usage, 3.0));
        assert_eq!((c.hog_bytes, c.hog_lost_bytes), (30, 3));
        assert_eq!(c.nr_reports, (400, 4));
        assert_eq!(c.fail_msgs, vec!["a".to_string()]);
        // Recomputed over all four samples.
        assert!(close(c.isol["mean"], 0.875));
        assert_eq!(c.isol["00"], 0.5);
        assert!(close(c.lat_imp["mean"], 0.5));
    }

    #[test]
    fn result_survives_the_journal() {
        let s = samples(100, |t| if t % 3 == 0 { 50 } else { 100 }, |_| BASE_LAT);
        let r = study(&record(vec![hog_run(20, 80)]), &s);
        let json = serde_json::to_string(&r).unwrap();
        let back: MemHogResult = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        assert_eq!(combine(&[back]).isol, r.isol);
    }
}
