//! The `protection` bench; what it does, for users, is [`DOC`].

use super::format::{TuneView, format_protection_rstat};
use super::study::{
    self, HashdSample, HogSample, MemHogRecord, MemHogResult, MemHogRun, PsiSample, Sample,
    SliceSample,
};
use crate::bench::common::{Bench, BenchInfo, Ctx, Outcome, spawn_in};
use crate::bench::hashd_params::{HashdChild, HashdFiles, read_json, spawn_hashd_in, stop_child};
use crate::bench::metrics::{ProtectionMetrics, ProtectionScenarioMetrics};
use crate::fmt::{format_size, parse_frac};
use crate::hashd::bench::linreg;
use crate::hashd::params::{self, Params};
use crate::hog::HogReport;
use crate::journal::JobData;
use crate::spec::{JobSpec, check_keys};
use crate::sys::DiskStats;
use crate::sys::cgroup::{Applied, CgStat, Cgroup};
use crate::sys::sysreqs::SysReq;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What `doc protection` prints.
pub const DOC: &str = "\
Running the protection bench: hashd at a share of rps_max in
workload.slice, a memory hog in system.slice, and a sampler taking
every second what the study needs.

Spec: protection[:scenario=mem-hog,loops=N,load=FRAC,speed=S]...
or :scenario=mem-hog-tune,... (below); without scenario groups,
mem-hog at load 1.0 and then at 0.8. Speeds
are 10%, 25%, 50%, 1x and 2x of the hog's base rate: the scratch
device's write bandwidth from iocost-params when the journal has it,
otherwise an assumed rate (recorded).

Each scenario: hashd's params are rewritten (it reloads them live) with
rps_target = rps_max x load; the run waits until hashd is stable
(rate within 2.5% of the target with a flat trend over 15 seconds, or
300 s), holds a 15 s baseline on the first loop, then starts the hog
and watches until the hog ends (killed by the kernel at its memory cap,
usually) or 300 s pass. --test shortens all of it (30 s to settle, a
5 s baseline, a 10 s hog).

Memory control: on cgroup2 the workload gets memory.low = the memory
profile's target. Everywhere, the hog's slice is capped at total memory
minus that target (cgroup1 has no memory.low, so the cap is the
protection there; without cgroups the hog stops growing at the cap by
itself). With passive=mem neither is set: hashd is unprotected and the
hog is held only just below the whole memory (total minus 1/16, at most
1G), so the kernel kills it in its own cgroup rather than another
process.

IO control: where the kernel has iocost (cgroup2 io.cost.qos) and the
journal has an iocost-params result, its model and QoS are enabled for
the bench and the previous settings restored after; passive=io leaves
IO control as the host has it (upstream's iocost off/on comparison).
Each control's outcome is recorded.

What the numbers mean. The baseline is hashd's request rate and
latency before the hog starts; everything after is judged per second
against it.
  isol      isolation: hashd's completed requests per second over the
            baseline rate, at most 100%. The table gives its
            distribution over the hog's seconds (min, p01 ... max, mean,
            stdev); a low p01 or p05 means hashd was starved for at
            least that share of the time. Upstream judges protection
            good enough at isol-05 >= 90% (its doc says isol-01).
  lat-imp   latency impact: how far hashd's controlled (p95) latency
            rose above the baseline, as a fraction; 0 when it did not.
  work_csv  work conservation, with io.cost: of the IO capacity the
            throttled hog could not use, the share others still used.
  missing   share of the seconds for which hashd gave no fresh report.
  FAIL=P%   shown first when a loop failed (hashd or the hog died
            early): the share of failed loops; the reasons follow.
The Result line gives isol and lat-imp as mean:stdev, then work_csv
and missing; format adds the per-slice resource table and the IO
latency tables.

mem-hog-tune searches for the largest hashd footprint that can still
be protected. Probes go from size-max down towards size-min in intvs
steps; at each, hashd's footprint is set through its params (mem_frac
of its 4 x share size, reloaded live), hashd settles, the hog runs
(the baseline is taken once, before the first hog), and the probe is
judged on isol-PP alone. The first probe whose isol-PP reaches
isol-thr ends the search: that is the protectable size. Properties:
  load=FRAC (1.0), speed=S (2x)  as for mem-hog;
  size-min=SIZE, size-max=SIZE  the range; upstream requires both,
                here size-max defaults to hashd's footprint from
                hashd-params and size-min to half of size-max;
  intvs=N (10; 2 with --test)   number of probes;
  isol-pct=PP (05: upstream's code; its doc says 01), isol-thr=FRAC
                (0.9)  the judged percentile and its threshold.
Only the final probe's hog run is kept and studied (as upstream); the
record's `tunes` keeps every probe's size and isol-PP, and the summary
ends with `hashd memory size FINAL/MAX can be protected at isol-PP >=
T%` or `... can't be protected ...`. A probe whose hog died before a
full second under it is not judged (n/a) and the search goes on.
Unlike upstream, a probe is not cut short when hashd falls below the
threshold; it runs until the hog ends. iocost-qos would use this
scenario for aMOF.
";

/// One mem-hog scenario of the spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub loops: u32,
    pub load: f64,
    pub speed: String,
    /// `mem-hog-tune`: the footprint search; `None` for `mem-hog`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<Tune>,
}

/// The footprint search of a `mem-hog-tune` scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tune {
    /// Footprint range, bytes; `None`: from hashd's footprint (max) and
    /// half of it (min), decided when the bench runs.
    pub size_min: Option<u64>,
    pub size_max: Option<u64>,
    /// Probes; `None`: 10 (2 with --test).
    pub intvs: Option<u32>,
    pub isol_pct: String,
    pub isol_thr: f64,
}

impl Tune {
    /// The probe sizes, largest first: `intvs` steps from max down to
    /// min, as upstream (the last one never below min).
    pub fn sizes(&self, min: u64, max: u64, test: bool) -> Vec<u64> {
        let intvs = self.intvs.unwrap_or(if test { 2 } else { 10 }).max(1);
        let step = max.saturating_sub(min) as f64 / f64::from(intvs);
        (0..intvs)
            .map(|i| {
                max.saturating_sub((f64::from(i) * step).round() as u64)
                    .max(min)
            })
            .collect()
    }
}

/// What a `mem-hog-tune` scenario found (ours; upstream's record has
/// `isol_pct`, `isol_thr`, `final_size` and the final probe's run, and is
/// read into this with the range and probes left empty).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TuneRecord {
    #[serde(default)]
    pub size_min: u64,
    #[serde(default)]
    pub size_max: u64,
    /// The number of probes planned (0 in records before it was kept).
    #[serde(default)]
    pub intvs: u32,
    pub isol_pct: String,
    pub isol_thr: f64,
    /// Each probe: hashd's footprint and its isolation at `isol_pct`
    /// (`None`: the hog ended before a full second could be judged; such
    /// a probe neither passes nor fails, the search goes on).
    #[serde(default)]
    pub probes: Vec<(u64, Option<f64>)>,
    /// The first footprint protected well enough; `None` if none was.
    pub final_size: Option<u64>,
}

/// Isolation percentiles a tune can judge: the hog result's keys.
use super::study::PCT_KEYS as ISOL_PCTS;

const SPEEDS: &[(&str, f64)] = &[
    ("10%", 0.1),
    ("25%", 0.25),
    ("50%", 0.5),
    ("1x", 1.0),
    ("2x", 2.0),
];

/// The scenarios of a spec.
pub fn scenarios(spec: &JobSpec) -> Result<Vec<Scenario>, crate::Error> {
    check_keys(spec, 0, &[]).map_err(|e| crate::Error::Input(e.to_string()))?;
    let mut out = Vec::new();
    for (i, g) in spec.props.iter().enumerate().skip(1) {
        match g.get("scenario").map(String::as_str) {
            Some("mem-hog") => {
                check_keys(spec, i, &["scenario", "loops", "load", "speed"])
                    .map_err(|e| crate::Error::Input(e.to_string()))?;
            }
            Some("mem-hog-tune") => {
                check_keys(
                    spec,
                    i,
                    &[
                        "scenario", "load", "speed", "size-min", "size-max", "intvs", "isol-pct",
                        "isol-thr",
                    ],
                )
                .map_err(|e| crate::Error::Input(e.to_string()))?;
            }
            Some(other) => {
                return Err(crate::Error::Input(format!(
                    "group {}: scenario {other:?}: expected mem-hog or mem-hog-tune",
                    i + 1
                )));
            }
            None => {
                return Err(crate::Error::Input(format!(
                    "group {}: \"scenario\" invalid or missing",
                    i + 1
                )));
            }
        }
        let mut s = Scenario {
            loops: 2,
            load: 1.0,
            speed: "2x".into(),
            tune: None,
        };
        if g.get("scenario").map(String::as_str) == Some("mem-hog-tune") {
            s.tune = Some(tune_props(g, i).map_err(crate::Error::Input)?);
        }
        if let Some(v) = g.get("loops") {
            s.loops = v.parse().map_err(|_| {
                crate::Error::Input(format!("group {}: loops={v:?}: expected a count", i + 1))
            })?;
        }
        if let Some(v) = g.get("load") {
            s.load = parse_frac(v)
                .map_err(|e| crate::Error::Input(format!("group {}: load: {e}", i + 1)))?;
        }
        if s.loops == 0 || s.load == 0.0 {
            return Err(crate::Error::Input(format!(
                "group {}: \"loops\" and \"load\" can't be 0",
                i + 1
            )));
        }
        if let Some(v) = g.get("speed") {
            if !SPEEDS.iter().any(|(k, _)| k == v) {
                return Err(crate::Error::Input(format!(
                    "group {}: speed={v:?}: expected one of 10%, 25%, 50%, 1x, 2x",
                    i + 1
                )));
            }
            s.speed = v.clone();
        }
        out.push(s);
    }
    if out.is_empty() {
        for load in [1.0, 0.8] {
            out.push(Scenario {
                loops: 2,
                load,
                speed: "2x".into(),
                tune: None,
            });
        }
    }
    Ok(out)
}

/// The properties of a `mem-hog-tune` group (`i`, 0-based).
fn tune_props(g: &BTreeMap<String, String>, i: usize) -> Result<Tune, String> {
    let size = |k: &str| -> Result<Option<u64>, String> {
        g.get(k)
            .map(|v| {
                crate::fmt::parse_size(v).map_err(|e| format!("group {}: {k}={v:?}: {e}", i + 1))
            })
            .transpose()
    };
    let mut t = Tune {
        size_min: size("size-min")?,
        size_max: size("size-max")?,
        intvs: None,
        // Upstream's code default (its doc says 01).
        isol_pct: "05".into(),
        isol_thr: 0.9,
    };
    if let Some(v) = g.get("intvs") {
        t.intvs =
            Some(v.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                format!("group {}: intvs={v:?}: expected a count above 0", i + 1)
            })?);
    }
    if let Some(v) = g.get("isol-pct") {
        if !ISOL_PCTS.contains(&v.as_str()) {
            return Err(format!(
                "group {}: isol-pct={v:?}: expected one of {}",
                i + 1,
                ISOL_PCTS.join(" ")
            ));
        }
        t.isol_pct = v.clone();
    }
    if let Some(v) = g.get("isol-thr") {
        t.isol_thr = parse_frac(v).map_err(|e| format!("group {}: isol-thr: {e}", i + 1))?;
    }
    if let (Some(a), Some(b)) = (t.size_min, t.size_max)
        && a > b
    {
        return Err(format!(
            "group {}: size-min={} is above size-max={}",
            i + 1,
            format_size(a as f64),
            format_size(b as f64)
        ));
    }
    Ok(t)
}

/// Checks a spec.
pub fn check_spec(spec: &JobSpec) -> Result<(), crate::Error> {
    scenarios(spec).map(|_| ())
}

/// What the bench records. `scenarios` is upstream's field (upstream
/// wraps each scenario as `{"MemHog": …}` or `{"MemHogTune": …}`, which
/// are read too: a tune's final run becomes the scenario and the rest of
/// it its `tunes` entry); the rest is ours and absent from upstream's
/// record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawProtectionRecord")]
pub struct ProtectionRecord {
    pub scenarios: Vec<MemHogRecord>,
    /// Per scenario, every second from its start to its end.
    #[serde(default)]
    pub samples: Vec<Vec<Sample>>,
    /// The hog's rate at speed 1x, bytes/s, and where it came from.
    #[serde(default)]
    pub hog_base_wbps: u64,
    #[serde(default)]
    pub hog_base_source: String,
    /// The hog's memory cap, bytes.
    #[serde(default)]
    pub hog_cap: u64,
    /// What the memory controls did.
    #[serde(default)]
    pub controls: Vec<String>,
    /// Per scenario, what a `mem-hog-tune` search found (`None` for
    /// `mem-hog`); empty without tune scenarios.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tunes: Vec<Option<TuneRecord>>,
}

/// [`ProtectionRecord`] as stored, before upstream's scenario wrappers
/// are taken apart.
#[derive(Deserialize)]
struct RawProtectionRecord {
    scenarios: Vec<serde_json::Value>,
    #[serde(default)]
    samples: Vec<Vec<Sample>>,
    #[serde(default)]
    hog_base_wbps: u64,
    #[serde(default)]
    hog_base_source: String,
    #[serde(default)]
    hog_cap: u64,
    #[serde(default)]
    controls: Vec<String>,
    #[serde(default)]
    tunes: Vec<Option<TuneRecord>>,
}

/// Upstream's `MemHogTuneRecord`, less its final run and periods.
#[derive(Deserialize)]
struct UpstreamTune {
    isol_pct: String,
    isol_thr: f64,
    final_size: Option<u64>,
}

impl TryFrom<RawProtectionRecord> for ProtectionRecord {
    type Error = String;
    fn try_from(r: RawProtectionRecord) -> Result<Self, String> {
        let mut tunes = r.tunes;
        let mut scenarios = Vec::with_capacity(r.scenarios.len());
        for (i, v) in r.scenarios.into_iter().enumerate() {
            let (inner, tune) = unwrap_scenario(v, i)?;
            if let Some(t) = tune {
                let u: UpstreamTune = serde_json::from_value(t)
                    .map_err(|e| format!("scenario {}: MemHogTune: {e}", i + 1))?;
                tunes.resize(tunes.len().max(i + 1), None);
                // rackbench's own tune entry (with the probes and the
                // range) is kept where the record has one.
                if tunes[i].is_none() {
                    tunes[i] = Some(TuneRecord {
                        isol_pct: u.isol_pct,
                        isol_thr: u.isol_thr,
                        final_size: u.final_size,
                        ..TuneRecord::default()
                    });
                }
            }
            // A tune without a final run is an empty scenario.
            scenarios.push(
                if inner.is_null() && tunes.get(i).is_some_and(Option::is_some) {
                    MemHogRecord::default()
                } else {
                    serde_json::from_value(inner).map_err(|e| format!("scenario {}: {e}", i + 1))?
                },
            );
        }
        Ok(ProtectionRecord {
            scenarios,
            samples: r.samples,
            hog_base_wbps: r.hog_base_wbps,
            hog_base_source: r.hog_base_source,
            hog_cap: r.hog_cap,
            controls: r.controls,
            tunes,
        })
    }
}

/// One scenario of a record or result: ours bare, or upstream's
/// `{"MemHog": X}` (X) or `{"MemHogTune": T}` (T's `final_run`, an empty
/// scenario when null, and T itself as the second value).
fn unwrap_scenario(
    v: serde_json::Value,
    i: usize,
) -> Result<(serde_json::Value, Option<serde_json::Value>), String> {
    use serde_json::Value;
    match v {
        Value::Object(mut m) if m.len() == 1 => match m.keys().next().map(String::as_str) {
            Some("MemHog") => Ok((m.remove("MemHog").unwrap_or_default(), None)),
            Some("MemHogTune") => {
                let t = m.remove("MemHogTune").unwrap_or_default();
                let run = match t.get("final_run") {
                    None | Some(Value::Null) => Value::Null,
                    Some(r) => r.clone(),
                };
                Ok((run, Some(t)))
            }
            Some(other) if other.chars().next().is_some_and(char::is_uppercase) => Err(format!(
                "scenario {}: {other} scenarios are not supported (MemHog and MemHogTune are)",
                i + 1
            )),
            _ => Ok((Value::Object(m), None)),
        },
        v => Ok((v, None)),
    }
}

/// What the bench computes. Upstream names the summary
/// `combined_mem_hog` (null without a memory-hog scenario) and wraps each
/// scenario as `{"MemHog": …}` or `{"MemHogTune": {"final_run": …}}`;
/// all are read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProtectionResult {
    #[serde(deserialize_with = "de_scenarios")]
    pub scenarios: Vec<MemHogResult>,
    #[serde(alias = "combined_mem_hog", deserialize_with = "de_combined")]
    pub combined: MemHogResult,
}

/// Result scenarios, bare (ours) or wrapped in upstream's scenario enum
/// (`{"MemHog": …}`, or `{"MemHogTune": {"final_run": …}}`, whose null
/// final run reads as an empty result).
fn de_scenarios<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    use serde::de::Error;
    let items = Vec::<serde_json::Value>::deserialize(d)?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let (inner, tune) = unwrap_scenario(v, i).map_err(D::Error::custom)?;
            if tune.is_some() && inner.is_null() {
                return Ok(T::default());
            }
            serde_json::from_value(inner)
                .map_err(|e| D::Error::custom(format!("scenario {}: {e}", i + 1)))
        })
        .collect()
}

/// The combined result; upstream's `null` (no memory-hog scenario) reads
/// as an empty one.
fn de_combined<'de, D>(d: D) -> Result<MemHogResult, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(Option::<MemHogResult>::deserialize(d)?.unwrap_or_default())
}

/// The timings of a run.
#[derive(Clone, Copy)]
struct Timing {
    settle_max: f64,
    baseline: f64,
    hog_max: f64,
    /// Rate and trend thresholds of "stable".
    thr: f64,
}

impl Timing {
    fn of(test: bool) -> Timing {
        if test {
            Timing {
                settle_max: 30.0,
                baseline: 5.0,
                hog_max: 10.0,
                thr: 1.0,
            }
        } else {
            Timing {
                settle_max: 300.0,
                baseline: 15.0,
                hog_max: 300.0,
                thr: 0.025,
            }
        }
    }
}

const DFL_HOG_WBPS: u64 = 512 << 20;
const TEST_HOG_WBPS: u64 = 64 << 20;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn applied(what: &str, a: Applied) -> String {
    match a {
        Applied::Done => format!("{what}: done"),
        Applied::Degraded(w) => format!("{what}: degraded: {w}"),
        Applied::Unsupported(w) => format!("{what}: not applied: {w}"),
    }
}

/// One slice's counters as a sample (storage samples the root with it too).
pub(crate) fn slice(c: &CgStat) -> SliceSample {
    SliceSample {
        cpu_usage: c.cpu_usage,
        cpu_sys: c.cpu_sys,
        mem_bytes: c.mem_bytes,
        io_rbytes: c.io_rbytes,
        io_wbytes: c.io_wbytes,
        io_usage: c.io_cost_usage,
        psi: c.psi.as_ref().map(|p| PsiSample {
            cpu_some: p.cpu_some,
            mem_some: p.mem_some,
            mem_full: p.mem_full,
            io_some: p.io_some,
            io_full: p.io_full,
        }),
    }
}

/// Takes a sample every second.
struct Sampler<'a> {
    ctx: &'a Ctx<'a>,
    work: Option<&'a Cgroup>,
    sys: Option<&'a Cgroup>,
    report: PathBuf,
    hog_report: PathBuf,
    last_hashd: String,
    last_disk: Option<DiskStats>,
    /// Per-IO latencies of the scratch device, when it can be traced.
    trace: Option<&'a crate::sys::iotrace::IoTrace>,
    trace_started: bool,
}

impl Sampler<'_> {
    fn sample(&mut self, hog_running: bool) -> Sample {
        let at = now();
        // hashd's report; the same timestamp as last time means stale.
        let hashd = read_json::<serde_json::Value>(&self.report).and_then(|v| {
            let ts = v["timestamp"].as_str()?.to_string();
            if ts == self.last_hashd {
                return None;
            }
            self.last_hashd = ts;
            Some(HashdSample {
                rps: v["rps"].as_f64()?,
                lat_ctl: v["lat"]["ctl"].as_f64()?,
                nr_done: v["nr_done"].as_u64()?,
            })
        });
        let hog = if hog_running {
            read_json::<HogReport>(&self.hog_report).map(|h| HogSample {
                wbytes: h.wbytes,
                wloss: h.wloss,
                mem_bytes: h.mem_bytes,
            })
        } else {
            None
        };
        let disk = crate::sys::diskstats(&self.ctx.sysinfo.scr_dev);
        let iolat = match (self.last_disk, disk, self.trace) {
            // The first second's trace holds what came before sampling.
            (_, _, Some(t)) => {
                let m = t.take_second();
                std::mem::replace(&mut self.trace_started, true).then_some(m)
            }
            (Some(a), Some(b), None) => {
                let mean = |ios: u64, ms: u64| {
                    let mut m = BTreeMap::new();
                    if ios > 0 {
                        m.insert("mean".to_string(), ms as f64 / ios as f64 / 1000.0);
                    }
                    m
                };
                Some([
                    mean(
                        b.reads.saturating_sub(a.reads),
                        b.read_ms.saturating_sub(a.read_ms),
                    ),
                    mean(
                        b.writes.saturating_sub(a.writes),
                        b.write_ms.saturating_sub(a.write_ms),
                    ),
                ])
            }
            _ => None,
        };
        self.last_disk = disk;
        let root = self.ctx.cgroups.root_stat();
        Sample {
            at,
            nr_cpus: self.ctx.sysinfo.nr_cpus,
            hashd,
            hog,
            root: slice(&root),
            workload: self.work.map(|c| slice(&c.stat())).unwrap_or_default(),
            system: self.sys.map(|c| slice(&c.stat())).unwrap_or_default(),
            iolat,
            vrate: root.io_cost_vrate,
        }
    }
}

fn write_params(
    files: &HashdFiles,
    ctx: &Ctx,
    load: f64,
    mem_frac: Option<f64>,
) -> Result<(), String> {
    let k = ctx.hashd.as_ref().ok_or("no hashd knobs")?;
    let p = Params {
        file_size_mean: k.hash_size as usize,
        rps_max: k.rps_max,
        rps_target: ((f64::from(k.rps_max) * load).round() as u32).max(1),
        mem_frac: mem_frac.unwrap_or(k.mem_frac),
        chunk_pages: k.chunk_pages,
        fake_cpu_load: k.fake_cpu_load,
        ..Params::default()
    };
    params::save_params(&files.params, &p).map_err(String::from)
}

/// Runs the bench.
pub fn run(spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
    let scen = scenarios(spec)?;
    let knobs = ctx.hashd.clone().ok_or_else(|| {
        crate::Error::Input(
            "protection needs hashd's knobs: run hashd-params first (`run hashd-params protection`)"
                .into(),
        )
    })?;
    ctx.used_hashd = Some(knobs.clone());
    let ctx: &Ctx = ctx;
    let t = Timing::of(ctx.opts.test);
    let files = HashdFiles::new(&ctx.opts.dir)?;
    let hog_report = ctx.opts.dir.join("mem-hog.json");
    let mut rec = ProtectionRecord::default();
    let (base, source) = hog_base(ctx);
    rec.hog_base_wbps = base;
    rec.hog_base_source = source;
    let passive = match spec.passive.as_deref() {
        Some(p) => {
            crate::spec::Passive::parse(p).map_err(|e| crate::Error::Input(e.to_string()))?
        }
        None => crate::spec::Passive::default(),
    };
    rec.hog_cap = hog_cap(ctx, &passive).map_err(crate::Error::Input)?;
    let (work, sys) = slices(ctx, &passive, &mut rec).map_err(crate::Error::Host)?;
    let _iocost = io_control(ctx, &passive, &mut rec);
    let mut trace = start_trace(ctx, &mut rec);
    for c in &rec.controls {
        eprintln!("protection: {c}");
    }

    write_params(&files, ctx, scen[0].load, None).map_err(crate::Error::Host)?;
    let _ = std::fs::remove_file(&files.report);
    let _ = std::fs::remove_file(&hog_report);
    let mut hashd = HashdChild(spawn_hashd_in(
        ctx,
        &files,
        ctx.mem.share,
        &[],
        work.as_ref(),
        false,
    )?);
    let mut drive = Drive {
        ctx,
        t,
        files: &files,
        knobs: &knobs,
        hog_base: base,
        hog_report: &hog_report,
        hog_cap: rec.hog_cap,
        sys: sys.as_ref(),
        hashd: &mut hashd,
        sampler: Sampler {
            ctx,
            work: work.as_ref(),
            sys: sys.as_ref(),
            report: files.report.clone(),
            hog_report: hog_report.clone(),
            last_hashd: String::new(),
            last_disk: None,
            trace: trace.as_ref(),
            trace_started: false,
        },
    };
    let n = scen.len();
    for (si, s) in scen.iter().enumerate() {
        let sr = drive.scenario(si, n, s).map_err(crate::Error::Host)?;
        if let Some(tr) = sr.tune {
            rec.tunes.resize(si, None);
            rec.tunes.push(Some(tr));
        }
        rec.scenarios.push(sr.mh);
        rec.samples.push(sr.samples);
        if let Some(why) = sr.stop_why {
            trace_cost(&mut rec, trace.take());
            let v = serde_json::to_value(&rec).map_err(|e| crate::Error::Host(e.to_string()))?;
            return Ok(Outcome::Partial(Some(v), why));
        }
    }
    drop(hashd);
    trace_cost(&mut rec, trace.take());
    let result = study_record(&rec);
    Ok(Outcome::Done(
        serde_json::to_value(&rec).map_err(|e| crate::Error::Host(e.to_string()))?,
        serde_json::to_value(&result).map_err(|e| crate::Error::Host(e.to_string()))?,
    ))
}

/// The hog's base write rate and where it came from.
fn hog_base(ctx: &Ctx) -> (u64, String) {
    match &ctx.iocost {
        Some(k) if k.model.wbps > 0 => (k.model.wbps, "iocost-params wbps".to_string()),
        _ if ctx.opts.test => (TEST_HOG_WBPS, "assumed (--test)".to_string()),
        _ => (
            DFL_HOG_WBPS,
            "assumed: no iocost-params result in the journal".to_string(),
        ),
    }
}

/// The memory cap of the hog's slice.
fn hog_cap(ctx: &Ctx, passive: &crate::spec::Passive) -> Result<u64, String> {
    let total = ctx.sysinfo.total_memory;
    let cap = if passive.mem {
        // No protection for hashd: the hog is held just below the whole
        // memory so that the kernel kills it in its cgroup, not another
        // process of the host.
        total.saturating_sub((total / 16).min(1 << 30))
    } else {
        total.saturating_sub(ctx.mem.target)
    }
    .max(64 << 20);
    // A smaller cap (tests, or to keep the hog from crowding a shared
    // host): the hog is killed sooner.
    if let Ok(v) = std::env::var("RACKBENCH_RESCTL_HOG_CAP") {
        return Ok(crate::fmt::parse_size(&v)
            .map_err(|e| format!("RACKBENCH_RESCTL_HOG_CAP: {e}"))?
            .max(1 << 20));
    }
    Ok(cap)
}

/// The workload and system slices with their memory, CPU and IO
/// controls, each control's outcome recorded; None without cgroups.
fn slices(
    ctx: &Ctx,
    passive: &crate::spec::Passive,
    rec: &mut ProtectionRecord,
) -> Result<(Option<Cgroup>, Option<Cgroup>), String> {
    let parent = format!("rackbench-{}", std::process::id());
    let backend = ctx.cgroups.kind();
    let (work, sys) = if backend == crate::sys::cgroup::BackendKind::None {
        rec.controls
            .push("no cgroups: hashd and the hog share the system unprotected".into());
        (None, None)
    } else {
        let w = ctx.cgroups.create(&format!("{parent}/workload.slice"))?;
        let s = ctx.cgroups.create(&format!("{parent}/system.slice"))?;
        if passive.mem {
            rec.controls
                .push("passive=mem: workload memory.low not set (hashd unprotected)".into());
            rec.controls.push(applied(
                &format!("hog safety cap={}", format_size(rec.hog_cap as f64)),
                s.set_mem_max(rec.hog_cap),
            ));
        } else {
            // --mem-margin: upstream's workload protection, share x
            // (1 - margin); without it, the profile's target.
            let low = match ctx.opts.mem_margin {
                Some(m) => (ctx.mem.share as f64 * (1.0 - m).max(0.0)) as u64,
                None => ctx.mem.target,
            };
            rec.controls.push(applied(
                &format!("workload memory.low={}", format_size(low as f64)),
                w.set_mem_low(low),
            ));
            rec.controls.push(applied(
                &format!("hog memory cap={}", format_size(rec.hog_cap as f64)),
                s.set_mem_max(rec.hog_cap),
            ));
        }
        (Some(w), Some(s))
    };
    // CPU and IO weights as upstream's rd-agent sets its slices when the
    // control is enforced: workload.slice io.weight 500 (cpu.weight stays
    // at the default 100), system.slice (the hog's) cpu.weight 10 and
    // io.weight 50.
    if let (Some(w), Some(s)) = (work.as_ref(), sys.as_ref()) {
        if !passive.cpu {
            rec.controls
                .push(applied("system.slice cpu.weight=10", s.set_cpu_weight(10)));
        }
        if !passive.io {
            rec.controls.push(applied(
                "workload.slice io.weight=500",
                w.set_io_weight(500),
            ));
            rec.controls
                .push(applied("system.slice io.weight=50", s.set_io_weight(50)));
        }
    }
    Ok((work, sys))
}

/// IO control: iocost with the journal's model and QoS for the length
/// of the bench (restored when the guard drops), unless passive=io or a
/// caller (iocost-qos) holds the device's io.cost settings itself.
fn io_control(
    ctx: &Ctx,
    passive: &crate::spec::Passive,
    rec: &mut ProtectionRecord,
) -> Option<crate::bench::iocost_params::IoCostRestore> {
    if let Some(how) = &ctx.iocost_managed {
        rec.controls.push(format!("iocost: {how}"));
        None
    } else if passive.io {
        rec.controls
            .push("passive=io: IO control left as the host has it".into());
        None
    } else if let Some(k) = ctx.iocost.as_ref() {
        let (what, guard) = crate::bench::iocost_params::enable_for_run(ctx, k);
        rec.controls.push(format!("iocost: {what}"));
        guard
    } else {
        rec.controls
            .push("iocost: not enabled: no iocost-params result in the journal".into());
        None
    }
}

/// IO latency per IO, as upstream's biolatpcts; without block
/// tracepoints, the per-second mean from /proc/diskstats.
fn start_trace(ctx: &Ctx, rec: &mut ProtectionRecord) -> Option<crate::sys::iotrace::IoTrace> {
    let traced = if ctx.sysinfo.scr_dev.is_empty() {
        Err("no scratch device".to_string())
    } else {
        crate::sys::iotrace::IoTrace::start(ctx.sysinfo.scr_devnr).map_err(String::from)
    };
    match traced {
        Ok(t) => {
            let (ma, mi) = ctx.sysinfo.scr_devnr;
            rec.controls.push(format!(
                "IO latency: per IO from the block tracepoints of {ma}:{mi}"
            ));
            Some(t)
        }
        Err(e) => {
            rec.controls.push(format!(
                "IO latency: per-second means from /proc/diskstats only (cannot trace block requests: {e})"
            ));
            None
        }
    }
}

/// A `mem-hog-tune` scenario's search: the scenario's settings, the
/// footprints to probe and what was found so far.
type TuneState<'s> = (&'s Tune, Vec<u64>, TuneRecord);

/// What one scenario gave.
struct ScenarioRun {
    mh: MemHogRecord,
    samples: Vec<Sample>,
    tune: Option<TuneRecord>,
    /// Why the bench stopped early, if it did.
    stop_why: Option<String>,
}

/// One loop of a scenario, as its messages name it.
struct LoopAt<'l> {
    label: &'l str,
    li: u32,
    nr_loops: u32,
    /// The scenario's `loops` (the hog line names it).
    loops: u32,
    target_rps: f64,
    wbps: u64,
}

/// The scenarios' loop: hashd running, the sampler, and what each
/// scenario's hog needs.
struct Drive<'a> {
    ctx: &'a Ctx<'a>,
    t: Timing,
    files: &'a HashdFiles,
    knobs: &'a crate::bench::knobs::HashdKnobs,
    hog_base: u64,
    hog_report: &'a std::path::Path,
    hog_cap: u64,
    sys: Option<&'a Cgroup>,
    hashd: &'a mut HashdChild,
    sampler: Sampler<'a>,
}

impl Drive<'_> {
    fn tick(&mut self, samples: &mut Vec<Sample>, hog: bool) -> Option<String> {
        tick(self.ctx, self.hashd, &mut self.sampler, samples, hog)
    }

    /// Runs one scenario: per loop, settle, a baseline on the first, the
    /// hog, and for `mem-hog-tune` the probe's verdict.
    fn scenario(&mut self, si: usize, n: usize, s: &Scenario) -> Result<ScenarioRun, String> {
        let ctx = self.ctx;
        let speed = SPEEDS
            .iter()
            .find(|(k, _)| *k == s.speed)
            .map(|x| x.1)
            .unwrap_or(2.0);
        let wbps = (self.hog_base as f64 * speed) as u64;
        let target_rps = f64::from(self.knobs.rps_max) * s.load;
        // hashd's footprint is its size (4 x the share) x mem_frac.
        let hashd_size = (ctx.mem.share as f64 * 4.0).max(1.0);
        let mut tune = s
            .tune
            .as_ref()
            .map(|t| tune_state(t, hashd_size, self.knobs.mem_frac, ctx.opts.test));
        let nr_loops = tune.as_ref().map_or(s.loops, |t| t.1.len() as u32);
        if si > 0 && tune.is_none() {
            write_params(self.files, ctx, s.load, None)?;
        }
        let mut mh = MemHogRecord {
            loops: if tune.is_some() { 1 } else { s.loops },
            load: s.load,
            speed: s.speed.clone(),
            period: (now(), now()),
            base_period: (0.0, 0.0),
            base_rps: target_rps,
            runs: Vec::new(),
        };
        let mut samples: Vec<Sample> = Vec::new();
        let label = format!(
            "protection: scenario {}/{n} (load={} speed={})",
            si + 1,
            s.load,
            s.speed
        );
        let mut stop_why: Option<String> = None;
        for li in 0..nr_loops {
            let at = LoopAt {
                label: &label,
                li,
                nr_loops,
                loops: s.loops,
                target_rps,
                wbps,
            };
            if let Some((_, sizes, _)) = &tune {
                let size = sizes.get(li as usize).copied().unwrap_or(0);
                eprintln!(
                    "{label}: probing hashd footprint {} ({}/{nr_loops})",
                    format_size(size as f64),
                    li + 1
                );
                write_params(
                    self.files,
                    ctx,
                    s.load,
                    Some((size as f64 / hashd_size).min(1.0)),
                )?;
            }
            if let Some(why) = self.settle(&at, &mut samples) {
                stop_why = Some(why);
                break;
            }
            if li == 0 {
                match self.baseline(&label, &mut samples) {
                    Ok(p) => mh.base_period = p,
                    Err(why) => {
                        stop_why = Some(why);
                        break;
                    }
                }
            }
            let (run, why) = self.hog(&at, &mut samples)?;
            mh.runs.push(run);
            if why.is_some() {
                stop_why = why;
                break;
            }
            if let Some(tn) = tune.as_mut()
                && judge_probe(tn, &mut mh, &samples, li, &label)
            {
                break;
            }
        }
        mh.period.1 = now();
        Ok(ScenarioRun {
            mh,
            samples,
            tune: tune.map(|t| t.2),
            stop_why,
        })
    }

    /// Waits for hashd to settle at the target rate; Some(why) when the
    /// bench must stop.
    fn settle(&mut self, at: &LoopAt, samples: &mut Vec<Sample>) -> Option<String> {
        let (label, target_rps, t) = (at.label, at.target_rps, self.t);
        eprintln!(
            "{label} loop {}/{}: waiting for hashd to settle at {target_rps:.0} rps",
            at.li + 1,
            at.nr_loops
        );
        let t0 = Instant::now();
        let mut rates: Vec<f64> = Vec::new();
        loop {
            if let Some(why) = self.tick(samples, false) {
                return Some(why);
            }
            if let Some(h) = samples.last().and_then(|x| x.hashd.as_ref()) {
                rates.push(h.rps);
            }
            let el = t0.elapsed().as_secs_f64();
            if rates.len() >= 15 {
                let w = &rates[rates.len() - 15..];
                let mean = w.iter().sum::<f64>() / 15.0;
                let (slope, _) = linreg(w);
                let off = (mean - target_rps).abs() / target_rps;
                if (slope / mean.max(1e-9)).abs() <= t.thr / 10.0 && off <= t.thr {
                    eprintln!("{label}: settled at {mean:.1} rps after {el:.0}s");
                    return None;
                }
            }
            if el >= t.settle_max {
                eprintln!("{label}: not settled after {:.0}s, going on", t.settle_max);
                return None;
            }
            if (el as u64) % 10 == 9 {
                progress(label, samples.last(), target_rps, None);
            }
        }
    }

    /// The baseline period; Err(why) when the bench must stop.
    fn baseline(&mut self, label: &str, samples: &mut Vec<Sample>) -> Result<(f64, f64), String> {
        eprintln!("{label}: baseline for {:.0}s", self.t.baseline);
        let b0 = now();
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < self.t.baseline {
            if let Some(why) = self.tick(samples, false) {
                return Err(why);
            }
        }
        Ok((b0, now()))
    }

    /// Runs the memory hog until it ends; its run, and why the bench must
    /// stop if it must.
    fn hog(
        &mut self,
        at: &LoopAt,
        samples: &mut Vec<Sample>,
    ) -> Result<(MemHogRun, Option<String>), String> {
        let (ctx, label, t) = (self.ctx, at.label, self.t);
        let _ = std::fs::remove_file(self.hog_report);
        let mut cmd = Command::new(&ctx.exe);
        cmd.args([crate::CHILD_CMD, "mem-hog", "--wbps"])
            .arg(at.wbps.to_string())
            .arg("--report")
            .arg(self.hog_report)
            .arg("--max")
            // Above the cgroup cap: the kernel's cap acts first where
            // there is one.
            .arg((self.hog_cap + (64 << 20)).to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        let sys = self.sys;
        let oom0 = sys.and_then(|c| c.oom_kills());
        let mut hog =
            spawn_in(cmd, sys).map_err(|e| format!("cannot start the memory hog: {e}"))?;
        eprintln!(
            "{label} loop {}/{}: memory hog at {}/s (cap {})",
            at.li + 1,
            at.loops,
            format_size(at.wbps as f64),
            format_size(self.hog_cap as f64)
        );
        let h0 = Instant::now();
        let mut first: Option<f64> = None;
        let mut last = 0.0;
        let mut mems: Vec<u64> = Vec::new();
        let mut last_hog = HogSample::default();
        let mut failed = None;
        let mut stop_why = None;
        let end = loop {
            let why = self.tick(samples, true);
            let el = h0.elapsed().as_secs_f64();
            if let Some(h) = samples.last().and_then(|x| x.hog.clone()) {
                if h.mem_bytes > 0 && first.is_none() {
                    first = Some(samples.last().map(|x| x.at).unwrap_or(0.0));
                }
                last = samples.last().map(|x| x.at).unwrap_or(0.0);
                mems.push(h.mem_bytes);
                last_hog = h;
            }
            if let Some(why) = why {
                failed = Some((t.hog_max, el.min(t.hog_max), why.clone()));
                stop_child(&mut hog);
                stop_why = Some(why);
                break "the bench stopped".to_string();
            }
            if (el as u64) % 5 == 4 {
                progress(label, samples.last(), at.target_rps, Some(el));
            }
            if let Some(end) = hog_ended(&mut hog, sys, oom0, el) {
                break end;
            }
            if el >= t.hog_max {
                stop_child(&mut hog);
                break format!("timeout {:.0}s", t.hog_max);
            }
        };
        eprintln!("{label} loop {}/{}: hog {end}", at.li + 1, at.nr_loops);
        let tail = &mems[mems.len().saturating_sub(5)..];
        let last_mem = if tail.is_empty() {
            0
        } else {
            tail.iter().sum::<u64>() / tail.len() as u64
        };
        let start = first.unwrap_or(last);
        let run = MemHogRun {
            hog_period: (start, last.max(start)),
            failed,
            last_hog_mem: last_mem,
            last_hog_wbytes: last_hog.wbytes,
            hog_wloss: last_hog.wloss,
            end,
            first_hog_rep: None,
            last_hog_rep: None,
        };
        Ok((run, stop_why))
    }
}

/// How the hog ended, once it has.
fn hog_ended(
    hog: &mut std::process::Child,
    sys: Option<&Cgroup>,
    oom0: Option<u64>,
    el: f64,
) -> Option<String> {
    match hog.try_wait() {
        Ok(Some(st)) => {
            use std::os::unix::process::ExitStatusExt;
            let oom = sys.and_then(|c| c.oom_kills());
            let by_oom = matches!((oom0, oom), (Some(a), Some(b)) if b > a);
            Some(match st.signal() {
                Some(9) if by_oom => {
                    format!("killed by the kernel (OOM at its memory cap) after {el:.0}s")
                }
                Some(9) => format!(
                    "killed by SIGKILL (the kernel's OOM killer, most likely) after {el:.0}s"
                ),
                Some(sig) => format!("killed by signal {sig} after {el:.0}s"),
                None => format!("exited ({st}) after {el:.0}s"),
            })
        }
        Ok(None) => None,
        Err(e) => Some(format!("lost track of the hog: {e}")),
    }
}

/// The footprint search of a `mem-hog-tune` scenario, before its probes.
fn tune_state(t: &Tune, hashd_size: f64, mem_frac: f64, test: bool) -> TuneState<'_> {
    let max = t.size_max.unwrap_or((hashd_size * mem_frac) as u64);
    let min = t.size_min.unwrap_or(max / 2).min(max);
    (
        t,
        t.sizes(min, max, test),
        TuneRecord {
            size_min: min,
            size_max: max,
            intvs: t.sizes(min, max, test).len() as u32,
            isol_pct: t.isol_pct.clone(),
            isol_thr: t.isol_thr,
            probes: Vec::new(),
            final_size: None,
        },
    )
}

/// Judges a `mem-hog-tune` probe alone (keeping only its run, as upstream
/// keeps only the final probe); true when the footprint was protected and
/// the search ends.
fn judge_probe(
    tune: &mut TuneState,
    mh: &mut MemHogRecord,
    samples: &[Sample],
    li: u32,
    label: &str,
) -> bool {
    let (t, sizes, tr) = tune;
    let last = mh.runs.len().saturating_sub(1);
    mh.runs.drain(..last);
    mh.period.1 = now();
    let res = study::study(mh, samples);
    let isol = if res.isol_samples.is_empty() {
        None
    } else {
        res.isol.get(&t.isol_pct).copied()
    };
    let size = sizes.get(li as usize).copied().unwrap_or(0);
    tr.probes.push((size, isol));
    let ok = isol.is_some_and(|v| v >= t.isol_thr);
    match isol {
        Some(v) => eprintln!(
            "{label}: footprint {} {} at isol-{}={:.2}% (threshold {:.2}%)",
            format_size(size as f64),
            if ok { "protected" } else { "not protected" },
            t.isol_pct,
            v * 100.0,
            t.isol_thr * 100.0
        ),
        None => eprintln!(
            "{label}: footprint {} not judged: the hog ended before a full second under it (a small hog cap?)",
            format_size(size as f64)
        ),
    }
    if ok {
        tr.final_size = Some(size);
    }
    ok
}

/// Stops the IO latency trace and states, with the controls, what it
/// traced and the CPU its reader took.
fn trace_cost(rec: &mut ProtectionRecord, trace: Option<crate::sys::iotrace::IoTrace>) {
    if let Some(t) = trace {
        let line = format!("IO latency trace: {}", t.finish());
        eprintln!("protection: {line}");
        rec.controls.push(line);
    }
}

/// One second: sleep to the next second, then a sample; Some(why) when the
/// bench must stop (Ctrl-C, hashd gone).
fn tick(
    ctx: &Ctx,
    hashd: &mut HashdChild,
    sampler: &mut Sampler,
    samples: &mut Vec<Sample>,
    hog: bool,
) -> Option<String> {
    std::thread::sleep(Duration::from_secs(1));
    if ctx.cancel.is_stopped() {
        return Some("interrupted".into());
    }
    if let Err(e) = hashd.check() {
        return Some(e.to_string());
    }
    samples.push(sampler.sample(hog));
    None
}

fn progress(label: &str, s: Option<&Sample>, target: f64, hog: Option<f64>) {
    let Some(h) = s.and_then(|s| s.hashd.as_ref()) else {
        eprintln!("{label}: no hashd report this second");
        return;
    };
    let mut line = format!(
        "{label}: rps {:.1} ({:.1}% of {target:.0}) p95 {:.1}ms",
        h.rps,
        100.0 * h.rps / target.max(1e-9),
        h.lat_ctl * 1000.0
    );
    if let (Some(el), Some(hs)) = (hog, s.and_then(|s| s.hog.as_ref())) {
        line.push_str(&format!(
            " hog {} after {el:.0}s",
            format_size(hs.mem_bytes as f64)
        ));
    }
    eprintln!("{line}");
}

/// The study of every scenario and the combined summary.
pub fn study_record(rec: &ProtectionRecord) -> ProtectionResult {
    let scenarios: Vec<MemHogResult> = rec
        .scenarios
        .iter()
        .zip(&rec.samples)
        .map(|(r, s)| study::study(r, s))
        .collect();
    // As upstream's combined_mem_hog: the mem-hog scenarios only, not the
    // tunes' final probes.
    let hogs: Vec<MemHogResult> = scenarios
        .iter()
        .enumerate()
        .filter(|(i, _)| is_tune(rec, *i).is_none())
        .map(|(_, r)| r.clone())
        .collect();
    let combined = study::combine(&hogs);
    ProtectionResult {
        scenarios,
        combined,
    }
}

/// `study`: the result studied again from the record's per-second
/// samples (which upstream's records do not have).
fn restudy(d: &JobData) -> Result<serde_json::Value, String> {
    let rec: ProtectionRecord = serde_json::from_value(d.record.clone().unwrap_or_default())
        .map_err(|e| format!("the record is not a protection record: {e}"))?;
    if rec.samples.len() != rec.scenarios.len() || rec.samples.iter().any(Vec::is_empty) {
        return Err(
            "the record has no per-second samples to study (an upstream result keeps them in \
             rd-agent's report files, which rackbench does not read)"
                .into(),
        );
    }
    serde_json::to_value(study_record(&rec)).map_err(|e| e.to_string())
}

/// Scenario `i`'s tune record, when it is a `mem-hog-tune` scenario.
fn is_tune(rec: &ProtectionRecord, i: usize) -> Option<&TuneRecord> {
    rec.tunes.get(i).and_then(Option::as_ref)
}

/// The text: a blank line, then the scenarios (`full`) and the summary.
pub fn format(d: &JobData, full: bool) -> Result<String, crate::Error> {
    format_with_rstat(d, full, 0)
}

/// [`format`] with `format -R...`'s extra resource stat tables.
pub fn format_with_rstat(d: &JobData, full: bool, rstat: u8) -> Result<String, crate::Error> {
    format_with_prefix(d, full, rstat, "")
}

/// [`format_with_rstat`] with `prefix` before each section title, which is
/// then underlined with `-`: upstream's protection text inside another
/// bench's (iocost-qos' `RUN 01 - Protection `).
pub fn format_with_prefix(
    d: &JobData,
    full: bool,
    rstat: u8,
    prefix: &str,
) -> Result<String, crate::Error> {
    let mut rec: ProtectionRecord = serde_json::from_value(d.record.clone().unwrap_or_default())
        .map_err(|e| crate::Error::Input(format!("the record is not a protection record: {e}")))?;
    // Upstream's record leaves the scenario parameters to the spec.
    let scns = scenarios(&d.spec).unwrap_or_default();
    for (r, s) in rec.scenarios.iter_mut().zip(&scns) {
        if r.loops == 0 && r.speed.is_empty() {
            r.loops = s.loops;
            r.load = s.load;
            r.speed = s.speed.clone();
        }
    }
    let res: ProtectionResult = match &d.result {
        Some(r) if !r.is_null() => serde_json::from_value(r.clone()).map_err(|e| {
            crate::Error::Input(format!("the result is not a protection result: {e}"))
        })?,
        // An interrupted run: study what it recorded.
        _ => study_record(&rec),
    };
    let mut out = String::from("\n");
    if full && !rec.hog_base_source.is_empty() {
        out.push_str(&format!(
            "Hog: base rate {}/s ({}), memory cap {}\n",
            format_size(rec.hog_base_wbps as f64),
            rec.hog_base_source,
            format_size(rec.hog_cap as f64)
        ));
        for c in &rec.controls {
            out.push_str(&format!("Control: {c}\n"));
        }
        out.push('\n');
    }
    let views: Vec<(MemHogRecord, MemHogResult, Option<TuneView>)> = rec
        .scenarios
        .iter()
        .cloned()
        .zip(res.scenarios.iter().cloned())
        .enumerate()
        .map(|(i, (r, s))| {
            let view = is_tune(&rec, i).map(|t| {
                // Upstream's record leaves the range and the probe count
                // to the spec.
                let spec_tune = scns.get(i).and_then(|s| s.tune.as_ref());
                let or_spec = |v: u64, f: fn(&Tune) -> Option<u64>| {
                    if v > 0 {
                        v
                    } else {
                        spec_tune.and_then(f).unwrap_or(0)
                    }
                };
                TuneView {
                    load: r.load,
                    speed: r.speed.clone(),
                    size_min: or_spec(t.size_min, |t| t.size_min),
                    size_max: or_spec(t.size_max, |t| t.size_max),
                    intvs: if t.intvs > 0 {
                        t.intvs
                    } else {
                        spec_tune.and_then(|t| t.intvs).unwrap_or(10)
                    },
                    // The spec's, as upstream prints them (its record
                    // may hold another version's default).
                    isol_pct: spec_tune.map_or_else(|| t.isol_pct.clone(), |s| s.isol_pct.clone()),
                    isol_thr: spec_tune.map_or(t.isol_thr, |s| s.isol_thr),
                    final_size: t.final_size,
                    probes: t.probes.clone(),
                    // Upstream's record (range and probes left to the
                    // spec) held each probe its fixed 200 s.
                    hold: (t.size_min == 0 && t.size_max == 0 && t.probes.is_empty())
                        .then_some(200.0),
                }
            });
            (r, s, view)
        })
        .collect();
    let has_hog = views.iter().any(|v| v.2.is_none());
    format_protection_rstat(
        &mut out,
        &views,
        has_hog.then_some(&res.combined),
        full,
        rstat,
        prefix,
    );
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// The protection bench.
pub struct ProtectionBench;

static INFO: BenchInfo = BenchInfo {
    kind: "protection",
    about: "how well hashd is protected from a memory hog",
    doc: DOC,
    hard: &[],
    // Every requirement but the tool dependencies (the last four):
    // the hog is built in and nothing is compiled.
    soft: SysReq::ALL.split_at(SysReq::ALL.len() - 4).0,
};

impl Bench for ProtectionBench {
    fn info(&self) -> &'static BenchInfo {
        &INFO
    }
    fn check(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        check_spec(spec)
    }
    fn run(&self, spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
        run(spec, ctx)
    }
    /// A mem-hog-tune scenario run without `size-min`/`size-max` (ours:
    /// they default to hashd's footprint and half of it) gets the sizes it
    /// ran with written in, in bytes: upstream's spec requires them.
    fn spec_as_run(&self, spec: &JobSpec, record: &serde_json::Value) -> JobSpec {
        let Ok(rec) = serde_json::from_value::<RawProtectionRecord>(record.clone()) else {
            return spec.clone();
        };
        let mut out = spec.clone();
        for (g, t) in out.props.iter_mut().skip(1).zip(&rec.tunes) {
            if let Some(t) = t
                && g.get("scenario").map(String::as_str) == Some("mem-hog-tune")
            {
                if t.size_max > 0 {
                    g.entry("size-max".into())
                        .or_insert_with(|| t.size_max.to_string());
                }
                g.entry("size-min".into())
                    .or_insert_with(|| t.size_min.to_string());
            }
        }
        out
    }
    fn format(&self, d: &JobData, full: bool) -> Result<String, crate::Error> {
        format(d, full)
    }
    fn format_rstat(&self, d: &JobData, full: bool, rstat: u8) -> Result<String, crate::Error> {
        format_with_rstat(d, full, rstat)
    }
    fn restudy(&self, d: &JobData) -> Option<Result<serde_json::Value, crate::Error>> {
        Some(restudy(d).map_err(crate::Error::Input))
    }
    fn metrics(&self, d: &JobData, m: &mut crate::bench::common::JobMetrics) {
        let Some(p) = d
            .result
            .clone()
            .and_then(|r| serde_json::from_value::<ProtectionResult>(r).ok())
        else {
            return;
        };
        let c = &p.combined;
        let pct = |v: Option<&f64>| v.copied().unwrap_or(0.0) * 100.0;
        // What each scenario ran with, from the record when it has them.
        let runs: Vec<Option<MemHogRecord>> = d
            .record
            .as_ref()
            .and_then(|r| r.get("scenarios"))
            .and_then(|s| s.as_array())
            .map(|a| {
                a.iter()
                    .map(|s| serde_json::from_value(s.clone()).ok())
                    .collect()
            })
            .unwrap_or_default();
        let scenarios = p
            .scenarios
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let run = runs.get(i).and_then(Option::as_ref);
                ProtectionScenarioMetrics {
                    load: run.map(|r| r.load),
                    speed: run.map(|r| r.speed.clone()),
                    loops: run.map(|r| r.loops),
                    isol_pct: s.isol.get("mean").map(|v| v * 100.0),
                    isol_p05_pct: s.isol.get("05").map(|v| v * 100.0),
                    lat_imp_pct: s.lat_imp.get("mean").map(|v| v * 100.0),
                    lat_imp_p95_pct: s.lat_imp.get("95").map(|v| v * 100.0),
                    work_csv_pct: s.work_csv * 100.0,
                    fail_pct: s.fail_ratio * 100.0,
                }
            })
            .collect();
        m.protection = Some(ProtectionMetrics {
            protection_isol_pct: pct(c.isol.get("mean")),
            protection_isol_p05_pct: pct(c.isol.get("05")),
            protection_lat_imp_pct: pct(c.lat_imp.get("mean")),
            protection_work_csv_pct: c.work_csv * 100.0,
            protection_scenarios: scenarios,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse;

    /// Upstream's record and result: scenarios wrapped as `{"MemHog": …}`,
    /// no scenario parameters, no samples, `combined_mem_hog` and
    /// `ResourceStat` tables.
    #[test]
    fn upstream_record_and_result_read() {
        use serde_json::json;
        let d = |v: f64| json!({"50": v, "mean": v, "stdev": 0.0});
        let rstat = json!({
            "cpu_util": d(0.5), "cpu_sys": d(0.1), "mem_bytes": d(1e9), "swap_bytes": d(2.0),
            "io_util": d(0.3), "io_bps": [d(10.0), d(20.0)], "psi_cpu": d(0.01),
            "psi_mem": [d(0.02), d(0.03)], "psi_io": [d(0.04), d(0.05)],
            "mem_stat": {"anon": d(5.0)}, "io_stat": {}, "vmstat": {"pgscan": d(7.0)}
        });
        let res = json!({
            "base_rps": 100.0, "base_lat": 0.07, "base_lat_stdev": 0.001,
            "isol": d(0.9), "lat_imp": d(0.1), "fail_ratio": 0.0, "fail_msgs": [],
            "work_csv": 1.0, "iolat": [{}, {}],
            "root_rstat": rstat, "work_rstat": rstat, "sys_rstat": rstat,
            "nr_reports": [10, 0], "periods": [[1, 2]], "hog_periods": [[1, 2]],
            "vrate": 0.0, "vrate_stdev": 0.0, "io_usage": 0.0, "io_unused": 0.0,
            "hog_io_usage": 0.0, "hog_io_loss": 0.0, "hog_bytes": 5, "hog_lost_bytes": 6
        });
        let result: ProtectionResult = serde_json::from_value(json!({
            "scenarios": [{"MemHog": res}], "combined_mem_hog": res
        }))
        .unwrap();
        assert_eq!(result.scenarios.len(), 1);
        assert_eq!(result.combined, result.scenarios[0]);
        let r = &result.combined;
        assert_eq!(r.root_rstat["sys_util"]["mean"], 0.1);
        assert_eq!(r.root_rstat["io_wbps"]["50"], 20.0);
        assert_eq!(r.root_rstat["mem_full"]["50"], 0.03);
        assert_eq!(r.root_rstat["io_some"]["50"], 0.04);
        assert_eq!(r.root_rstat["cpu_some"]["50"], 0.01);
        assert_eq!(r.root_rstat["swap_bytes"]["50"], 2.0);
        assert_eq!(r.root_rstat["mem_stat.anon"]["50"], 5.0);
        assert_eq!(r.root_rstat["vmstat.pgscan"]["50"], 7.0);
        assert_eq!((r.hog_bytes, r.nr_runs), (5, 0));
        // Ours reads back as written.
        let back: ProtectionResult =
            serde_json::from_value(serde_json::to_value(&result).unwrap()).unwrap();
        assert_eq!(back, result);
        // No memory-hog scenario: upstream writes null.
        let none: ProtectionResult =
            serde_json::from_value(json!({"scenarios": [], "combined_mem_hog": null})).unwrap();
        assert_eq!(none.combined, MemHogResult::default());

        let hog_rep = json!({"timestamp": "2021-06-22T19:13:40-07:00", "wbps": 1, "rbps": 0,
            "wbytes": 2, "rbytes": 0, "wdebt": 0, "rdebt": 0, "wloss": 3, "rloss": 0});
        let rec: ProtectionRecord = serde_json::from_value(json!({"scenarios": [{"MemHog": {
            "period": [1, 9], "base_period": [2, 3], "base_rps": 80.0,
            "runs": [{"failed": [300.0, 200.0, "timed out"], "first_hog_rep": hog_rep,
                      "last_hog_rep": hog_rep, "last_hog_mem": 4096}]
        }}]}))
        .unwrap();
        let m = &rec.scenarios[0];
        assert_eq!((m.period, m.base_rps, m.loops), ((1.0, 9.0), 80.0, 0));
        assert_eq!(m.runs[0].failed.as_ref().unwrap().2, "timed out");
        assert_eq!(m.runs[0].last_hog_mem, 4096);
        assert_eq!(m.runs[0].last_hog_rep.as_ref().unwrap()["wloss"], 3);
        assert!(rec.samples.is_empty());

        let e = serde_json::from_value::<ProtectionRecord>(json!({"scenarios": [{"CpuHog": {}}]}))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("scenario 1: CpuHog scenarios are not supported"),
            "{e}"
        );

        // Upstream's MemHogTune (a mem-hog scenario first, as upstream's
        // job would run them), formatted with upstream's sections: the
        // tune in the summary too, and the combined result from the
        // mem-hog scenario only.
        let hog_run = json!({"period": [1, 9], "base_period": [2, 3], "base_rps": 80.0,
            "runs": [{"failed": null, "first_hog_rep": hog_rep, "last_hog_rep": hog_rep,
                      "last_hog_mem": 4096}]});
        let tune = |final_run: serde_json::Value, final_size: serde_json::Value| {
            json!({"MemHogTune": {"period": [10, 90], "base_period": [10, 20],
                "isol_pct": "05", "isol_thr": 0.9, "final_run": final_run,
                "final_size": final_size}})
        };
        let g = 1u64 << 30;
        let rec: ProtectionRecord = serde_json::from_value(json!({"scenarios": [
            {"MemHog": hog_run}, tune(hog_run.clone(), json!(g))
        ]}))
        .unwrap();
        assert_eq!(rec.scenarios.len(), 2);
        assert_eq!(rec.tunes[0], None);
        let t = rec.tunes[1].clone().unwrap();
        assert_eq!(
            (t.isol_pct.as_str(), t.isol_thr, t.final_size),
            ("05", 0.9, Some(g))
        );
        let spec =
            "protection::scenario=mem-hog:scenario=mem-hog-tune,size-min=1G,size-max=2G,intvs=4";
        let data = |rec: serde_json::Value, res: serde_json::Value| JobData {
            spec: parse(spec).unwrap(),
            period: (1, 90),
            sysinfo: serde_json::Value::Null,
            record: Some(rec),
            result: Some(res),
        };
        let tune_res = |r: serde_json::Value| json!({"MemHogTune": {"final_run": r}});
        let d = data(
            json!({"scenarios": [{"MemHog": hog_run}, tune(hog_run.clone(), json!(g))]}),
            json!({"scenarios": [{"MemHog": res}, tune_res(res.clone())], "combined_mem_hog": res}),
        );
        let text = format(&d, false).unwrap();
        assert!(text.contains("Scenario 2/2 - Memory Hog Tuning"), "{text}");
        assert!(!text.contains("Scenario 1/2 - Memory Hog\n"), "{text}");
        assert!(
            text.contains(
                "Params: load=1 speed=2x size=1.0G-2.0G intvs=4\n        isol-05 >= 90.00% for 3.3M\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "        hashd memory size 1.0G/2.0G can be protected at isol-05 >= 90.00%"
            ),
            "{text}"
        );
        assert!(text.contains("Memory Hog Summary"), "{text}");
        let full = format(&d, true).unwrap();
        assert!(full.contains("Scenario 1/2 - Memory Hog\n"), "{full}");
        // No run recorded, no size found, no mem-hog scenario: upstream's
        // lines, and no summary (combined_mem_hog is null).
        let d = data(
            json!({"scenarios": [tune(json!(null), json!(null))]}),
            json!({"scenarios": [tune_res(json!(null))], "combined_mem_hog": null}),
        );
        let d = JobData {
            spec: parse("protection::scenario=mem-hog-tune,size-min=1G,size-max=2G").unwrap(),
            ..d
        };
        let text = format(&d, true).unwrap();
        assert!(
            text.contains("Result: A successful full mem-hog run was not recorded\n        Failed to find size to keep isol-05 above 90.00% in [1.0G, 2.0G]"),
            "{text}"
        );
        assert!(text.contains("intvs=10"), "{text}");
        assert!(!text.contains("Memory Hog Summary"), "{text}");
    }

    /// The per-scenario figures: the result's, with what each scenario
    /// ran with from the record; without a readable record, the figures
    /// alone; without scenarios, none (and no key).
    #[test]
    fn metrics_per_scenario() {
        use crate::bench::common::JobMetrics;
        use crate::journal::JobData;
        use serde_json::Value;
        let dist = |pairs: &[(&str, f64)]| -> BTreeMap<String, f64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let scen = |isol: f64| MemHogResult {
            isol: dist(&[("mean", isol), ("05", isol - 0.25)]),
            lat_imp: dist(&[("mean", 0.125), ("95", 0.5)]),
            work_csv: 0.75,
            fail_ratio: 0.0625,
            ..Default::default()
        };
        let result = ProtectionResult {
            scenarios: vec![scen(0.875), scen(0.5)],
            combined: scen(0.625),
        };
        let record = ProtectionRecord {
            scenarios: vec![
                MemHogRecord {
                    loops: 2,
                    load: 1.0,
                    speed: "2x".into(),
                    ..Default::default()
                },
                MemHogRecord {
                    loops: 3,
                    load: 0.8,
                    speed: "1x".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let data = |record: Option<Value>, result: &ProtectionResult| JobData {
            spec: parse("protection").unwrap(),
            period: (1, 2),
            sysinfo: Value::Null,
            record,
            result: Some(serde_json::to_value(result).unwrap()),
        };
        let metrics = |d: &JobData| {
            let mut m = JobMetrics::default();
            ProtectionBench.metrics(d, &mut m);
            m.protection.unwrap()
        };
        let m = metrics(&data(Some(serde_json::to_value(&record).unwrap()), &result));
        assert_eq!(m.protection_isol_pct, 62.5);
        assert_eq!(
            m.protection_scenarios,
            vec![
                ProtectionScenarioMetrics {
                    load: Some(1.0),
                    speed: Some("2x".into()),
                    loops: Some(2),
                    isol_pct: Some(87.5),
                    isol_p05_pct: Some(62.5),
                    lat_imp_pct: Some(12.5),
                    lat_imp_p95_pct: Some(50.0),
                    work_csv_pct: 75.0,
                    fail_pct: 6.25,
                },
                ProtectionScenarioMetrics {
                    load: Some(0.8),
                    speed: Some("1x".into()),
                    loops: Some(3),
                    isol_pct: Some(50.0),
                    isol_p05_pct: Some(25.0),
                    lat_imp_pct: Some(12.5),
                    lat_imp_p95_pct: Some(50.0),
                    work_csv_pct: 75.0,
                    fail_pct: 6.25,
                },
            ]
        );
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["protection_scenarios"][1]["speed"], "1x");
        // No record: the figures, without what the scenarios ran with.
        let m = metrics(&data(None, &result));
        assert_eq!(m.protection_scenarios.len(), 2);
        assert_eq!(m.protection_scenarios[0].load, None);
        assert_eq!(m.protection_scenarios[0].isol_pct, Some(87.5));
        // A scenario without samples: its figures are null, not 0.
        let unmeasured = ProtectionResult {
            scenarios: vec![MemHogResult::default()],
            combined: MemHogResult::default(),
        };
        let v = serde_json::to_value(metrics(&data(None, &unmeasured))).unwrap();
        let s0 = &v["protection_scenarios"][0];
        assert!(
            s0["isol_pct"].is_null() && s0["lat_imp_p95_pct"].is_null(),
            "{v}"
        );
        // No scenario: no key.
        let none = ProtectionResult {
            scenarios: vec![],
            combined: scen(0.5),
        };
        let v = serde_json::to_value(metrics(&data(None, &none))).unwrap();
        assert!(v.get("protection_scenarios").is_none(), "{v}");
    }

    #[test]
    fn scenarios_default_and_parse() {
        let s = scenarios(&parse("protection").unwrap()).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].load, s[1].load), (1.0, 0.8));
        let s =
            scenarios(&parse("protection::scenario=mem-hog,loops=1,load=50%,speed=1x").unwrap())
                .unwrap();
        assert_eq!(
            s,
            vec![Scenario {
                loops: 1,
                load: 0.5,
                speed: "1x".into(),
                tune: None,
            }]
        );
        let bad = |t: &str| scenarios(&parse(t).unwrap()).unwrap_err();
        assert!(
            bad("protection::loops=1")
                .to_string()
                .contains("\"scenario\" invalid or missing")
        );
        assert!(
            bad("protection::scenario=cpu-hog")
                .to_string()
                .contains("cpu-hog")
        );
        assert!(
            bad("protection::scenario=mem-hog,loops=0")
                .to_string()
                .contains("can't be 0")
        );
        assert!(
            bad("protection::scenario=mem-hog,speed=3x")
                .to_string()
                .contains("3x")
        );
        assert!(
            bad("protection::scenario=mem-hog,lod=1")
                .to_string()
                .contains("load")
        );
        assert!(bad("protection:x=1").to_string().contains("x"));
    }

    #[test]
    fn mem_hog_tune_parses_probes_and_formats() {
        let s = scenarios(
            &parse("protection::scenario=mem-hog-tune,size-min=1G,size-max=2G,intvs=4,isol-pct=01,isol-thr=80%")
                .unwrap(),
        )
        .unwrap();
        let t = s[0].tune.clone().unwrap();
        assert_eq!((t.size_min, t.size_max), (Some(1 << 30), Some(2 << 30)));
        assert_eq!((t.isol_pct.as_str(), t.isol_thr), ("01", 0.8));
        let g = 1u64 << 30;
        // Largest first, intvs probes, never below min.
        assert_eq!(
            t.sizes(g, 2 * g, false),
            vec![2 * g, 2 * g - g / 4, 2 * g - g / 2, g + g / 4]
        );
        let d = scenarios(&parse("protection::scenario=mem-hog-tune").unwrap()).unwrap();
        let d = d[0].tune.clone().unwrap();
        assert_eq!(
            (d.size_min, d.intvs, d.isol_pct.as_str()),
            (None, None, "05")
        );
        assert_eq!(d.sizes(g, 2 * g, true), vec![2 * g, g + g / 2]);
        assert_eq!(d.sizes(g, 2 * g, false).len(), 10);

        let bad = |t: &str| scenarios(&parse(t).unwrap()).unwrap_err();
        assert!(
            bad("protection::scenario=mem-hog-tune,loops=2")
                .to_string()
                .contains("loops")
        );
        assert!(
            bad("protection::scenario=mem-hog-tune,intvs=0")
                .to_string()
                .contains("intvs")
        );
        assert!(
            bad("protection::scenario=mem-hog-tune,isol-pct=7")
                .to_string()
                .contains("isol-pct")
        );
        assert!(
            bad("protection::scenario=mem-hog-tune,size-min=2G,size-max=1G")
                .to_string()
                .contains("above size-max")
        );

        // Our own record: the probes line (ours) after upstream's lines;
        // the combined result leaves the tune's final probe out.
        let found = TuneRecord {
            size_min: g,
            size_max: 2 * g,
            intvs: 2,
            isol_pct: "05".into(),
            isol_thr: 0.9,
            probes: vec![(2 * g, Some(0.5)), (g, None)],
            final_size: None,
        };
        let run = MemHogRecord {
            loops: 2,
            load: 1.0,
            speed: "2x".into(),
            runs: vec![MemHogRun::default()],
            ..MemHogRecord::default()
        };
        let rec = ProtectionRecord {
            scenarios: vec![run.clone(), run],
            samples: vec![vec![], vec![]],
            tunes: vec![None, Some(found)],
            ..ProtectionRecord::default()
        };
        let res = study_record(&rec);
        assert_eq!(res.combined.nr_runs, res.scenarios[0].nr_runs);
        let d = JobData {
            spec: parse("protection::scenario=mem-hog:scenario=mem-hog-tune").unwrap(),
            period: (1, 2),
            sysinfo: serde_json::Value::Null,
            record: Some(serde_json::to_value(&rec).unwrap()),
            result: Some(serde_json::to_value(&res).unwrap()),
        };
        let text = format(&d, false).unwrap();
        assert!(
            text.contains("size=1.0G-2.0G intvs=2")
                && text
                    .contains("Failed to find size to keep isol-05 above 90.00% in [1.0G, 2.0G]")
                && text.contains("Probes (ours, size:isol-05): 2.0G:50.00% 1.0G:n/a"),
            "{text}"
        );
        // Written and read back, the tune stays with its scenario.
        let back: ProtectionRecord =
            serde_json::from_value(serde_json::to_value(&rec).unwrap()).unwrap();
        assert_eq!(back, rec);
    }
}
