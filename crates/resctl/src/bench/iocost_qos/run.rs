//! Running `iocost-qos`: the ladder of QoS settings, each run a storage
//! bench (MOF) then protection's mem-hog-tune (aMOF) with the run's
//! io.cost QoS applied to the scratch device, the vrate and per-IO latency
//! sampled every second over the run, and the record and result in
//! upstream's `IoCostQoSRecord`/`IoCostQoSResult` shape (the one
//! [`crate::bench::iocost_qos::format`] prints and [`crate::bench::iocost_tune`] solves on).
//!
//! As upstream's resctl-bench: run [00] has iocost off and is the baseline;
//! rungs whose max vrate is below what the device needs to keep hashd
//! alive ([`abs_min_vrate`]) are skipped (or their min raised) unless
//! `ignore-min-perf`; each finished run is saved in the journal at once
//! (`inc_runs`), and a later `run` of a job whose earlier entry has the
//! same base model, QoS and memory profile reuses its finished runs; a
//! failed storage bench is retried `retries` times; `allow-fail` skips a
//! run that keeps failing. The device's io.cost settings are restored when
//! the job ends, however it ends.

use crate::bench::common::{Ctx, Outcome};
use crate::bench::iocost_params::IoCostRestore;
use crate::bench::iocost_qos::QosProps;
use crate::bench::iocost_qos::format::format_qos_cfg;
use crate::bench::knobs::{
    HashdKnobs, IoCostKnobs, IoCostModel, IoCostQos, QosOvr, round2_as_printed,
};
use crate::bench::protection::study::{dist_map, study_iolat};
use crate::fmt::format_size;
use crate::journal::JobData;
use crate::spec::JobSpec;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The vrate percentiles of a run's result, upstream's keys.
pub const VRATE_PCTS: &[&str] = &["00", "01", "10", "25", "50", "75", "90", "99", "100"];

/// The lowest device performance a rung may throttle to, as upstream's
/// `ABS_MIN_IO_PERF`: about 75% of a 7200 rpm disk (125 MiB/s, 280 IOPS).
const ABS_MIN: IoCostModel = IoCostModel {
    rbps: 125 << 20,
    rseqiops: 280,
    rrandiops: 280,
    wbps: 125 << 20,
    wseqiops: 280,
    wrandiops: 280,
};

/// The vrate (percent, two decimals) below which `model` would fall under
/// [`ABS_MIN`] in any of its six figures.
pub fn abs_min_vrate(model: &IoCostModel) -> f64 {
    let r = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
    let v = r(ABS_MIN.rbps, model.rbps)
        .max(r(ABS_MIN.rseqiops, model.rseqiops))
        .max(r(ABS_MIN.rrandiops, model.rrandiops))
        .max(r(ABS_MIN.wbps, model.wbps))
        .max(r(ABS_MIN.wseqiops, model.wseqiops))
        .max(r(ABS_MIN.wrandiops, model.wrandiops));
    round2_as_printed(v * 100.0)
}

/// One rung of the ladder as the run plans it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rung {
    pub ovr: QosOvr,
    /// Below the device's minimum: not run.
    pub skip: bool,
    /// Its min vrate was raised to the device's minimum.
    pub min_adj: bool,
}

/// Upstream's `skip_or_adj`: a rung whose max vrate is below `abs_min` is
/// skipped; one whose min is below it gets `abs_min` as its min.
pub fn skip_or_adj(ovr: &QosOvr, abs_min: f64) -> Rung {
    let mut r = Rung {
        ovr: ovr.clone(),
        skip: false,
        min_adj: false,
    };
    if ovr.off {
        return r;
    }
    if let Some(max) = ovr.max {
        if max < abs_min {
            r.skip = true;
        } else if let Some(min) = ovr.min
            && min < abs_min
        {
            r.ovr.min = Some(abs_min);
            r.min_adj = true;
        }
    }
    r
}

/// The QoS a rung asks for: the base with the rung's overrides, rounded as
/// io.cost.qos takes it; `None` for iocost off.
pub fn target_qos(base: &IoCostQos, ovr: &QosOvr) -> Option<IoCostQos> {
    if ovr.off {
        return None;
    }
    let mut q = ovr.apply(base);
    q.rpct = round2_as_printed(q.rpct);
    q.wpct = round2_as_printed(q.wpct);
    q.min = round2_as_printed(q.min);
    q.max = round2_as_printed(q.max);
    Some(q)
}

/// What the sampler saw in one second of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSample {
    /// Unix time, seconds.
    pub at: f64,
    /// iocost's vrate (percent), from the root's io.stat; `None` with
    /// iocost off.
    pub vrate: Option<f64>,
    /// `[read, write]` completion latency of the second (seconds) by
    /// latency percentile, or only `mean` from /proc/diskstats.
    pub iolat: Option<[BTreeMap<String, f64>; 2]>,
}

/// One QoS run of the record: upstream's `IoCostQoSRecordRun` (`stor` and
/// `prot` hold upstream's fields beside rackbench's own), plus the run's
/// per-second samples (ours: upstream's are in rd-agent's report files).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordRun {
    pub period: (u64, u64),
    pub ovr: QosOvr,
    pub qos: Option<IoCostQos>,
    pub stor: Value,
    pub prot: Value,
    #[serde(default)]
    pub samples: Vec<RunSample>,
    /// How the IO latency of the samples was measured.
    #[serde(default)]
    pub iolat_source: String,
}

/// Upstream's `IoCostQoSRecord`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub base_model: IoCostModel,
    pub base_qos: IoCostQos,
    pub mem_profile: u32,
    pub runs: Vec<Option<RecordRun>>,
    #[serde(default)]
    pub dither_dist: Option<f64>,
    #[serde(default)]
    pub inc_runs: Vec<RecordRun>,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Samples vrate and IO latency every second on its own thread until
/// stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<RunSample>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    source: String,
}

impl Sampler {
    fn start(ctx: &Ctx) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let devnr = ctx.sysinfo.scr_devnr;
        let dev = ctx.sysinfo.scr_dev.clone();
        let cgroups = ctx.cgroups.clone();
        let trace = crate::sys::iotrace::IoTrace::start(devnr);
        let source = match &trace {
            Ok(_) => format!(
                "per IO from the block tracepoints of {}:{}",
                devnr.0, devnr.1
            ),
            Err(e) => format!("per-second means from /proc/diskstats (cannot trace: {e})"),
        };
        let (st, sa) = (stop.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            let trace = trace.ok();
            let mut last_disk = crate::sys::diskstats(&dev);
            let mut first = true;
            let mut next = Instant::now() + Duration::from_secs(1);
            while !st.load(Ordering::Relaxed) {
                let now = Instant::now();
                if now < next {
                    std::thread::sleep((next - now).min(Duration::from_millis(100)));
                    continue;
                }
                next += Duration::from_secs(1);
                let root = cgroups.root_stat();
                let disk = crate::sys::diskstats(&dev);
                let iolat = match (&trace, last_disk, disk) {
                    (Some(t), _, _) => {
                        let m = t.take_second();
                        // The first second holds what came before.
                        (!std::mem::replace(&mut first, false)).then_some(m)
                    }
                    (None, Some(a), Some(b)) => {
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
                last_disk = disk;
                let s = RunSample {
                    at: unix_now(),
                    vrate: root.io_cost_vrate,
                    iolat,
                };
                sa.lock().unwrap_or_else(|p| p.into_inner()).push(s);
            }
        });
        Sampler {
            stop,
            samples,
            thread: Some(thread),
            source,
        }
    }

    fn finish(mut self) -> (Vec<RunSample>, String) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let s = std::mem::take(&mut *self.samples.lock().unwrap_or_else(|p| p.into_inner()));
        (s, std::mem::take(&mut self.source))
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The device's io.cost settings for one rung: the base model with the
/// rung's QoS enabled, or iocost disabled for the baseline.
fn apply_rung(ctx: &Ctx, k: &IoCostKnobs, qos: Option<&IoCostQos>) -> Result<(), String> {
    let root = ctx
        .cgroups
        .v2_root()
        .ok_or("iocost-qos: no cgroup2 hierarchy with the io controller")?;
    let (mf, qf) = (root.join("io.cost.model"), root.join("io.cost.qos"));
    match qos {
        None => {
            crate::sys::write_existing(&qf, &format!("{} enable=0", k.devnr)).map_err(String::from)
        }
        Some(q) => {
            let m = &k.model;
            crate::sys::write_existing(
                &mf,
                &format!(
                    "{} ctrl=user model=linear rbps={} rseqiops={} rrandiops={} wbps={} wseqiops={} wrandiops={}",
                    k.devnr, m.rbps, m.rseqiops, m.rrandiops, m.wbps, m.wseqiops, m.wrandiops
                ),
            )?;
            crate::sys::write_existing(
                &qf,
                &format!(
                    "{} enable=1 ctrl=user rpct={:.2} rlat={} wpct={:.2} wlat={} min={:.2} max={:.2}",
                    k.devnr, q.rpct, q.rlat, q.wpct, q.wlat, q.min, q.max
                ),
            ).map_err(String::from)
        }
    }
}

/// The QoS io.cost.qos holds for the device now (`None`: disabled).
fn applied_qos(ctx: &Ctx, devnr: &str) -> Result<Option<IoCostQos>, String> {
    let root = ctx
        .cgroups
        .v2_root()
        .ok_or("iocost-qos: no cgroup2 hierarchy with the io controller")?;
    let text = std::fs::read_to_string(root.join("io.cost.qos"))
        .map_err(|e| format!("cannot read io.cost.qos: {e}"))?;
    let Some(line) = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(devnr))
    else {
        return Ok(None);
    };
    let kv: BTreeMap<&str, &str> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.split_once('='))
        .collect();
    if kv.get("enable") != Some(&"1") {
        return Ok(None);
    }
    let f = |k: &str| kv.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    Ok(Some(IoCostQos {
        rpct: f("rpct"),
        rlat: f("rlat") as u64,
        wpct: f("wpct"),
        wlat: f("wlat") as u64,
        min: f("min"),
        max: f("max"),
    }))
}

/// A run's storage record in upstream's `StorageRecord` fields (period,
/// the final memory probes, the base hashd knobs, the memory profile, the
/// kept loops' usages and sizes) merged with rackbench's own storage
/// record, from which the result is studied again.
fn stor_record(rec: &crate::bench::storage::StorageRecord, knobs: &HashdKnobs, ctx: &Ctx) -> Value {
    let used: Vec<&crate::bench::storage::LoopRecord> =
        rec.runs.iter().filter(|r| r.used).collect();
    let probes: Vec<(u64, u64)> = used
        .iter()
        .filter_map(|r| {
            let end = r.root.last()?.0;
            Some(((end - 10.0).max(0.0) as u64, end.ceil() as u64))
        })
        .collect();
    let mut v = serde_json::to_value(rec).unwrap_or_default();
    if let Value::Object(m) = &mut v {
        m.insert("period".into(), json!([rec.started, rec.ended]));
        m.insert("final_mem_probe_periods".into(), json!(probes));
        m.insert("base_hashd_knobs".into(), json!(knobs));
        m.insert("mem".into(), json!(ctx.mem));
        m.insert(
            "mem_usages".into(),
            json!(used.iter().map(|r| r.usage as f64).collect::<Vec<_>>()),
        );
        m.insert(
            "mem_sizes".into(),
            json!(used.iter().map(|r| r.size as f64).collect::<Vec<_>>()),
        );
    }
    v
}

/// Upstream's `StorageResult` from rackbench's study of the storage
/// record, with the IO latency of the storage part of the run.
fn stor_result(
    rec: &crate::bench::storage::StorageRecord,
    iolat: &[[BTreeMap<String, f64>; 2]],
) -> Value {
    let r = crate::bench::storage::study(rec);
    let rd: Vec<BTreeMap<String, f64>> = iolat.iter().map(|x| x[0].clone()).collect();
    let wr: Vec<BTreeMap<String, f64>> = iolat.iter().map(|x| x[1].clone()).collect();
    // The storage bench's own per-IO latency where it traced it, else the
    // run sampler's over the storage part.
    let iolat = if r.iolat.iter().any(|d| !d.is_empty()) {
        r.iolat.clone()
    } else {
        [study_iolat(&rd), study_iolat(&wr)]
    };
    json!({
        "mem_offload_factor": r.mem_offload_factor,
        "mem_usage": r.mem_usage_mean.round() as u64,
        "mem_usage_stdev": r.mem_usage_stdev.round() as u64,
        "mem_size": r.mem_size_mean.round() as u64,
        "mem_size_stdev": r.mem_size_stdev.round() as u64,
        "all_rstat": r.all_rstat,
        "final_rstat": r.final_rstat,
        "iolat": iolat,
        "nr_reports": r.nr_reports,
    })
}

/// Wraps the protection bench's first scenario as upstream's
/// `{"MemHogTune": {...}}` (the final probe as `final_run`, none when no
/// probed size was protected).
fn prot_record(mut v: Value) -> Value {
    let Value::Object(m) = &mut v else {
        return v;
    };
    let tune = m
        .get("tunes")
        .and_then(|t| t.get(0))
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(Value::Array(sc)) = m.get_mut("scenarios")
        && let Some(first) = sc.first_mut()
    {
        let run = std::mem::take(first);
        let secs = |p: &Value| -> Value {
            let a = p.get(0).and_then(Value::as_f64).unwrap_or(0.0);
            let b = p.get(1).and_then(Value::as_f64).unwrap_or(0.0);
            json!([a.floor() as u64, b.ceil() as u64])
        };
        let final_size = tune.get("final_size").cloned().unwrap_or(Value::Null);
        *first = json!({"MemHogTune": {
            "period": secs(&run["period"]),
            "base_period": secs(&run["base_period"]),
            "isol_pct": tune.get("isol_pct").cloned().unwrap_or(Value::Null),
            "isol_thr": tune.get("isol_thr").cloned().unwrap_or(Value::Null),
            "final_run": if final_size.is_null() { Value::Null } else { run },
            "final_size": final_size,
        }});
    }
    v
}

/// The protection result as upstream's: the tune's final probe as
/// `{"MemHogTune": {"final_run": ...}}`, no combined mem-hog.
fn prot_result(prot_rec: &Value) -> Result<Value, String> {
    let rec: crate::bench::protection::run::ProtectionRecord =
        serde_json::from_value(prot_rec.clone()).map_err(|e| format!("protection record: {e}"))?;
    let has_final = prot_rec["scenarios"][0]["MemHogTune"]["final_run"].is_object();
    let res = crate::bench::protection::run::study_record(&rec);
    let final_run = match res.scenarios.into_iter().next() {
        Some(r) if has_final => serde_json::to_value(r).map_err(|e| e.to_string())?,
        _ => Value::Null,
    };
    Ok(json!({
        "scenarios": [{"MemHogTune": {"final_run": final_run}}],
        "combined_mem_hog": Value::Null,
    }))
}

/// The samples of `s` inside `(a, b)`.
fn within(s: &[RunSample], (a, b): (f64, f64)) -> Vec<[BTreeMap<String, f64>; 2]> {
    s.iter()
        .filter(|x| x.at >= a && x.at <= b + 0.5)
        .filter_map(|x| x.iolat.clone())
        .collect()
}

/// Studies one run of the record into upstream's `IoCostQoSResultRun`.
pub fn study_run(r: &RecordRun) -> Result<Value, crate::Error> {
    let srec: crate::bench::storage::StorageRecord = serde_json::from_value(r.stor.clone())
        .map_err(|e| crate::Error::Input(format!("the storage record: {e}")))?;
    let stor_iolat = within(&r.samples, (srec.started as f64, srec.ended as f64));
    let stor = stor_result(&srec, &stor_iolat);
    let prot = prot_result(&r.prot).map_err(crate::Error::Input)?;
    let final_size = r.prot["scenarios"][0]["MemHogTune"]["final_size"].as_u64();
    let mof = stor["mem_offload_factor"].as_f64().unwrap_or(0.0);
    let usage = stor["mem_usage"].as_f64().unwrap_or(0.0);
    let (size, amof, delta) = match final_size {
        Some(s) if usage > 0.0 => {
            let amof = s as f64 / usage;
            (Some(s), Some(amof), Some(mof - amof))
        }
        _ => (None, None, None),
    };
    let vrates: Vec<f64> = r.samples.iter().filter_map(|s| s.vrate).collect();
    let all: Vec<[BTreeMap<String, f64>; 2]> =
        r.samples.iter().filter_map(|s| s.iolat.clone()).collect();
    let rd: Vec<BTreeMap<String, f64>> = all.iter().map(|x| x[0].clone()).collect();
    let wr: Vec<BTreeMap<String, f64>> = all.iter().map(|x| x[1].clone()).collect();
    let expected = r.period.1.saturating_sub(r.period.0);
    let present = r.samples.len() as u64;
    Ok(json!({
        "stor": stor,
        "prot": prot,
        "adjusted_mem_size": size,
        "adjusted_mem_offload_factor": amof,
        "adjusted_mem_offload_delta": delta,
        "vrate": dist_map(&vrates, VRATE_PCTS),
        "iolat": [study_iolat(&rd), study_iolat(&wr)],
        "nr_reports": [present, expected.saturating_sub(present)],
    }))
}

/// Studies the record into upstream's `IoCostQoSResult`.
pub fn study(rec: &Record) -> Result<Value, crate::Error> {
    let mut runs = Vec::with_capacity(rec.runs.len());
    for (i, r) in rec.runs.iter().enumerate() {
        runs.push(match r {
            Some(r) => study_run(r).map_err(|e| crate::Error::Input(format!("run {i:02}: {e}")))?,
            None => Value::Null,
        });
    }
    Ok(json!({ "runs": runs }))
}

/// `study` of a stored iocost-qos job made by rackbench (upstream's records
/// have no samples: refused, naming why).
pub fn restudy(d: &JobData) -> Result<Value, crate::Error> {
    let rec: Record = serde_json::from_value(d.record.clone().unwrap_or_default())
        .map_err(|e| crate::Error::Input(format!("the iocost-qos record: {e}")))?;
    if rec
        .runs
        .iter()
        .flatten()
        .any(|r| r.stor.get("runs").is_none())
    {
        return Err(crate::Error::Input(
            "this iocost-qos record was made by upstream's resctl-bench: its per-second data is in rd-agent's report files, which rackbench does not read"
                .into(),
        ));
    }
    study(&rec)
}

/// The earlier record, when it matches this run's base model, QoS and
/// memory profile (upstream's `prev_matches`); the reason when it does
/// not.
fn prev_matches(prev: &Record, k: &IoCostKnobs, mem_profile: u32) -> Result<(), String> {
    if prev.base_model != k.model || prev.base_qos != k.qos {
        return Err("iocost parameter mismatch".into());
    }
    let base = prev
        .runs
        .iter()
        .flatten()
        .next()
        .or(prev.inc_runs.first())
        .ok_or("it has no finished run")?;
    let profile = base.stor["mem"]["profile"].as_u64().unwrap_or(0);
    if profile != u64::from(mem_profile) {
        return Err(format!("mem-profile mismatch, {mem_profile} != {profile}"));
    }
    Ok(())
}

fn find_run<'a>(ovr: &QosOvr, prev: &'a Record) -> Option<&'a RecordRun> {
    prev.runs
        .iter()
        .flatten()
        .chain(prev.inc_runs.iter())
        .find(|r| r.ovr == *ovr)
}

/// The storage spec of a run: storage's properties from the job's
/// `storage-KEY=V`, `loops` for this run.
fn stor_spec(p: &QosProps, loops: u32, passive: Option<&str>) -> JobSpec {
    let mut g = p.storage.clone();
    g.insert("loops".into(), loops.to_string());
    JobSpec {
        kind: "storage".into(),
        id: None,
        passive: passive.map(str::to_string),
        props: vec![g],
    }
}

/// The protection spec of a run: mem-hog-tune at load 1.0 between 4/5 of
/// the share and the footprint storage found.
fn prot_spec(p: &QosProps, share: u64, size: u64, passive: Option<&str>) -> JobSpec {
    let g: BTreeMap<String, String> = [
        ("scenario", "mem-hog-tune".to_string()),
        ("load", "1.0".to_string()),
        ("size-min", (share * 4 / 5).min(size).to_string()),
        ("size-max", size.to_string()),
        ("isol-pct", p.isol_pct.clone()),
        ("isol-thr", p.isol_thr.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    JobSpec {
        kind: "protection".into(),
        id: None,
        passive: passive.map(str::to_string),
        props: vec![BTreeMap::new(), g],
    }
}

/// How a run ended.
enum RunEnd {
    Done(Box<RecordRun>),
    Interrupted(String),
}

/// One QoS run: storage (retried) then protection, with the rung's
/// io.cost settings applied and the sampler running.
fn run_one(
    ctx: &mut Ctx,
    p: &QosProps,
    spec: &JobSpec,
    k: &IoCostKnobs,
    ovr: &QosOvr,
    loops: u32,
    label: &str,
) -> Result<RunEnd, String> {
    let started = unix_now();
    let target = target_qos(&k.qos, ovr);
    let sampler = Sampler::start(ctx);
    let how = match &target {
        Some(q) => format!(
            "held by iocost-qos (rpct={:.2} rlat={} wpct={:.2} wlat={} min={:.2} max={:.2})",
            q.rpct, q.rlat, q.wpct, q.wlat, q.min, q.max
        ),
        None => "held off by iocost-qos (the baseline run)".into(),
    };
    ctx.iocost_managed = Some(how);
    // Storage, retried as upstream.
    let sspec = stor_spec(p, loops, spec.passive.as_deref());
    let mut tries = 0;
    let (srec, knobs) = loop {
        tries += 1;
        apply_rung(ctx, k, target.as_ref())?;
        eprintln!("{label}: storage ({loops} loops)");
        match crate::bench::storage::run(&sspec, ctx) {
            Ok(Outcome::Done(rec, _)) => {
                let rec: crate::bench::storage::StorageRecord =
                    serde_json::from_value(rec).map_err(|e| format!("the storage record: {e}"))?;
                break (rec, ctx.used_hashd.clone().unwrap_or_default());
            }
            Ok(Outcome::Partial(_, why)) => return Ok(RunEnd::Interrupted(why)),
            Err(e) => {
                if ctx.cancel.is_stopped() {
                    return Ok(RunEnd::Interrupted("interrupted".into()));
                }
                if tries > p.retries {
                    return Err(format!(
                        "storage benchmark failed too many times ({tries}): {e}"
                    ));
                }
                eprintln!("{label}: storage benchmark failed ({e}), retrying...");
            }
        }
    };
    let size = crate::bench::storage::study(&srec).mem_size_mean.round() as u64;
    // Protection with the hashd knobs storage found, as upstream's storage
    // `apply` hands them on.
    apply_rung(ctx, k, target.as_ref())?;
    let saved_hashd = ctx.hashd.replace(knobs.clone());
    let pspec = prot_spec(p, srec.mem_share, size.max(1), spec.passive.as_deref());
    eprintln!(
        "{label}: protection (mem-hog-tune between {} and {})",
        format_size((srec.mem_share * 4 / 5).min(size) as f64),
        format_size(size as f64)
    );
    let prot = crate::bench::protection::run::run(&pspec, ctx);
    ctx.hashd = saved_hashd;
    let prot = match prot {
        Ok(Outcome::Done(rec, _)) => prot_record(rec),
        Ok(Outcome::Partial(_, why)) => return Ok(RunEnd::Interrupted(why)),
        Err(e) => {
            if ctx.cancel.is_stopped() {
                return Ok(RunEnd::Interrupted("interrupted".into()));
            }
            eprintln!("{label}: protection benchmark failed ({e})");
            json!({"scenarios": []})
        }
    };
    let qos = applied_qos(ctx, &k.devnr)?;
    ctx.iocost_managed = None;
    let (samples, iolat_source) = sampler.finish();
    if let (Some(a), Some(t)) = (&qos, &target)
        && a != t
    {
        return Err(format!(
            "io.cost.qos of {} holds {a:?} where this run applied {t:?}",
            k.devnr
        ));
    }
    if target.is_some() && qos.is_none() {
        return Err(format!(
            "io.cost.qos of {}: iocost was disabled during the run",
            k.devnr
        ));
    }
    Ok(RunEnd::Done(Box::new(RecordRun {
        period: (started.floor() as u64, unix_now().ceil() as u64),
        ovr: ovr.clone(),
        qos: target,
        stor: stor_record(&srec, &knobs, ctx),
        prot,
        samples,
        iolat_source,
    })))
}

/// The record to start from: the earlier incomplete one when it matches
/// the current configuration, else a new one; with its dither.
fn resume_record(ctx: &Ctx, p: &QosProps, k: &IoCostKnobs) -> Record {
    let prev: Option<Record> = ctx
        .prev
        .as_ref()
        .and_then(|d| d.record.clone())
        .and_then(|r| serde_json::from_value(r).ok());
    let mem_profile = ctx.mem.profile;
    let matches = match &prev {
        Some(pr) => prev_matches(pr, k, mem_profile).map_err(|why| {
            eprintln!(
                "iocost-qos: Existing result doesn't match the current configuration ({why})"
            );
        }),
        None => Err(()),
    };
    let mut rec = match (&prev, &matches) {
        (Some(pr), Ok(())) => pr.clone(),
        _ => Record {
            base_model: k.model.clone(),
            base_qos: k.qos.clone(),
            mem_profile,
            ..Record::default()
        },
    };
    // The dither: the given distance, or the earlier record's, or a new
    // random one within half an interval.
    let dither = match p.dither {
        None => None,
        Some(Some(d)) => Some(d),
        Some(None) => match prev.as_ref().and_then(|r| r.dither_dist) {
            Some(d) => Some(d),
            None => {
                let (click, shift) = p.click();
                use rand::Rng;
                Some(rand::rng().random_range(-click / 2.0..click / 2.0) + shift)
            }
        },
    };
    rec.dither_dist = dither;
    rec
}

/// The ladder's rungs (skipped, or with the minimum adjusted), each
/// listed with whether it still has to run.
fn plan_rungs(p: &QosProps, k: &IoCostKnobs, rec: &Record) -> Vec<Rung> {
    let abs_min = abs_min_vrate(&k.model);
    let rungs: Vec<Rung> = p
        .ladder(rec.dither_dist.unwrap_or(0.0))
        .iter()
        .map(|o| {
            if p.ignore_min_perf {
                skip_or_adj(o, 0.0)
            } else {
                skip_or_adj(o, abs_min)
            }
        })
        .collect();
    let mut nr_to_run = 0;
    for (i, r) in rungs.iter().enumerate() {
        let new = !r.skip && find_run(&r.ovr, rec).is_none();
        nr_to_run += usize::from(new);
        eprintln!(
            "iocost-qos[{i:02}]: {}{} {}",
            if new { "+" } else { "-" },
            if r.skip {
                "s"
            } else if r.min_adj {
                "a"
            } else {
                " "
            },
            format_qos_cfg(&k.qos, &r.ovr)
        );
    }
    if nr_to_run > 0 {
        eprintln!(
            "iocost-qos: {nr_to_run} storage and protection bench sets to run, isol-{} >= {:.1}%",
            p.isol_pct,
            p.isol_thr * 100.0
        );
    } else {
        eprintln!("iocost-qos: All results are available in the result file, nothing to do");
    }
    if abs_min > 0.0 && rungs.iter().any(|r| r.skip) {
        eprintln!(
            "iocost-qos: rungs marked s are below {abs_min:.2}% of the model, the least the device may be throttled to (ignore-min-perf runs them)"
        );
    }
    rungs
}

/// Runs the bench.
pub fn run(spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
    let p = QosProps::parse(spec)?;
    let root = ctx
        .cgroups
        .v2_root()
        .filter(|r| r.join("io.cost.qos").exists())
        .ok_or_else(|| {
            crate::Error::Host(
                "iocost-qos: sysreq IoCost missed (no io.cost.qos in a cgroup2 root with the io controller): \
                 iocost-qos cannot run without io.cost, even with --force"
                    .into(),
            )
        })?
        .to_path_buf();
    let k = ctx.iocost.clone().ok_or_else(|| {
        crate::Error::Input(
            "iocost-qos needs the scratch device's IO cost model: run iocost-params first (`run iocost-params iocost-qos`)"
                .into(),
        )
    })?;
    // What the device had, written back when the job ends.
    let _restore = IoCostRestore::capture(&root, &k.devnr);

    let mem_profile = ctx.mem.profile;
    let mut rec = resume_record(ctx, &p, &k);
    let rungs = plan_rungs(&p, &k, &rec);

    let mut runs: Vec<Option<RecordRun>> = Vec::with_capacity(rungs.len());
    for (i, r) in rungs.iter().enumerate() {
        if let Some(done) = find_run(&r.ovr, &rec) {
            runs.push(Some(done.clone()));
            continue;
        }
        if r.skip {
            runs.push(None);
            continue;
        }
        if ctx.cancel.is_stopped() {
            let v = serde_json::to_value(&rec).map_err(|e| crate::Error::Host(e.to_string()))?;
            return Ok(Outcome::Partial(Some(v), "interrupted".into()));
        }
        let label = format!("iocost-qos[{i:02}]");
        eprintln!(
            "{label}: running storage and protection with QoS: {}",
            format_qos_cfg(&k.qos, &r.ovr)
        );
        let loops = if i == 0 {
            p.storage_base_loops
        } else {
            p.storage_loops
        };
        match run_one(ctx, &p, spec, &k, &r.ovr, loops, &label) {
            Ok(RunEnd::Done(run)) => {
                let s = study_run(&run).ok();
                if let Some(s) = s {
                    eprintln!(
                        "{label}: MOF={:.3} aMOF={} vrate mean {:.2}%",
                        s["stor"]["mem_offload_factor"].as_f64().unwrap_or(0.0),
                        s["adjusted_mem_offload_factor"]
                            .as_f64()
                            .map_or("FAIL".to_string(), |v| format!("{v:.3}")),
                        s["vrate"]["mean"].as_f64().unwrap_or(0.0)
                    );
                }
                rec.inc_runs.push((*run).clone());
                if let Some(cp) = ctx.checkpoint {
                    let v = serde_json::to_value(&rec)
                        .map_err(|e| crate::Error::Host(e.to_string()))?;
                    cp(&v).map_err(|e| {
                        crate::Error::Host(format!("cannot save the finished run: {e}"))
                    })?;
                }
                runs.push(Some(*run));
            }
            Ok(RunEnd::Interrupted(why)) => {
                let v =
                    serde_json::to_value(&rec).map_err(|e| crate::Error::Host(e.to_string()))?;
                return Ok(Outcome::Partial(Some(v), why));
            }
            Err(e) if p.allow_fail && !ctx.cancel.is_stopped() => {
                eprintln!("{label}: Failed ({e}), skipping...");
                runs.push(None);
            }
            Err(e) => {
                eprintln!("{label}: Failed ({e}), giving up...");
                return Err(crate::Error::Host(format!("{label}: {e}")));
            }
        }
    }
    rec.runs = runs;
    rec.inc_runs.clear();
    rec.mem_profile = mem_profile;
    let result = study(&rec)?;
    Ok(Outcome::Done(
        serde_json::to_value(&rec).map_err(|e| crate::Error::Host(e.to_string()))?,
        result,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn abs_min_vrate_is_the_tightest_of_the_six() {
        let m = IoCostModel {
            rbps: 1 << 30,
            rseqiops: 100_000,
            rrandiops: 50_000,
            wbps: 500 << 20,
            wseqiops: 80_000,
            wrandiops: 28_000,
        };
        // wbps: 125M / 500M = 25%.
        assert_eq!(abs_min_vrate(&m), 25.0);
        // A slow disk: below 1x it cannot be throttled at all.
        let hdd = IoCostModel {
            rbps: 150 << 20,
            rseqiops: 300,
            rrandiops: 200,
            wbps: 150 << 20,
            wseqiops: 300,
            wrandiops: 200,
        };
        assert_eq!(abs_min_vrate(&hdd), 140.0);
    }

    #[test]
    fn rungs_below_the_minimum_are_skipped_or_raised() {
        let pin = |v: f64| QosOvr {
            min: Some(v),
            max: Some(v),
            ..Default::default()
        };
        assert!(skip_or_adj(&pin(20.0), 25.0).skip);
        let r = skip_or_adj(
            &QosOvr {
                min: Some(10.0),
                max: Some(50.0),
                ..Default::default()
            },
            25.0,
        );
        assert!(!r.skip && r.min_adj);
        assert_eq!(r.ovr.min, Some(25.0));
        let off = QosOvr {
            off: true,
            ..Default::default()
        };
        assert!(!skip_or_adj(&off, 99.0).skip);
        // No max given: never skipped (upstream).
        assert!(
            !skip_or_adj(
                &QosOvr {
                    rpct: Some(95.0),
                    ..Default::default()
                },
                99.0
            )
            .skip
        );
    }

    #[test]
    fn an_earlier_record_is_reused_only_when_it_matches() {
        let k = IoCostKnobs {
            devnr: "8:0".into(),
            model: IoCostModel {
                rbps: 1 << 30,
                ..Default::default()
            },
            qos: IoCostQos {
                rpct: 95.0,
                min: 60.0,
                max: 100.0,
                ..Default::default()
            },
        };
        let pin = QosOvr {
            min: Some(50.0),
            max: Some(50.0),
            ..Default::default()
        };
        let run = |ovr: &QosOvr| RecordRun {
            period: (1, 2),
            ovr: ovr.clone(),
            qos: target_qos(&k.qos, ovr),
            stor: json!({"mem": {"profile": 16}}),
            prot: json!({}),
            samples: Vec::new(),
            iolat_source: String::new(),
        };
        // An interrupted job: its finished runs are in inc_runs.
        let prev = Record {
            base_model: k.model.clone(),
            base_qos: k.qos.clone(),
            inc_runs: vec![run(&pin)],
            ..Record::default()
        };
        assert!(prev_matches(&prev, &k, 16).is_ok());
        assert!(find_run(&pin, &prev).is_some());
        let other = QosOvr {
            min: Some(40.0),
            max: Some(40.0),
            ..Default::default()
        };
        assert!(find_run(&other, &prev).is_none());
        // A completed job's runs count too.
        let done = Record {
            runs: vec![Some(run(&other)), None],
            ..prev.clone()
        };
        assert!(find_run(&other, &done).is_some());
        // Another profile, model or QoS: not reused.
        assert!(
            prev_matches(&prev, &k, 8)
                .unwrap_err()
                .contains("mem-profile")
        );
        let mut k2 = k.clone();
        k2.qos.rlat = 5;
        assert!(prev_matches(&prev, &k2, 16).unwrap_err().contains("iocost"));
        assert!(
            prev_matches(&Record::default(), &k, 16).is_err(),
            "an empty record matches nothing"
        );
    }

    #[test]
    fn the_vrate_distribution_has_upstreams_keys() {
        let d = dist_map(&[10.0, 20.0, 30.0, 40.0], VRATE_PCTS);
        for k in VRATE_PCTS.iter().chain(&["mean", "stdev"]) {
            assert!(d.contains_key(*k), "{k}");
        }
        assert_eq!(d["00"], 10.0);
        assert_eq!(d["100"], 40.0);
        assert_eq!(d["mean"], 25.0);
        let empty = dist_map(&[], VRATE_PCTS);
        assert_eq!(empty["mean"], 0.0);
    }

    #[test]
    fn a_protection_record_is_wrapped_as_upstreams_mem_hog_tune() {
        let rec = json!({
            "scenarios": [{"loops": 1, "load": 1.0, "speed": "2x", "period": [10.4, 90.2],
                           "base_period": [20.0, 25.5], "base_rps": 50.0, "runs": []}],
            "samples": [[]],
            "tunes": [{"size_min": 1, "size_max": 2, "intvs": 2, "isol_pct": "05",
                       "isol_thr": 0.9, "probes": [[2, 0.95]], "final_size": 2}],
        });
        let w = prot_record(rec.clone());
        let t = &w["scenarios"][0]["MemHogTune"];
        assert_eq!(t["period"], json!([10, 91]));
        assert_eq!(t["base_period"], json!([20, 26]));
        assert_eq!(t["isol_pct"], "05");
        assert_eq!(t["final_size"], 2);
        assert_eq!(t["final_run"]["base_rps"], 50.0);
        // No protected size: no final run, as upstream.
        let mut none = rec;
        none["tunes"][0]["final_size"] = Value::Null;
        let w = prot_record(none);
        assert!(w["scenarios"][0]["MemHogTune"]["final_run"].is_null());
        // rackbench's reader takes the wrapped record back, probes kept.
        let back: crate::bench::protection::run::ProtectionRecord =
            serde_json::from_value(prot_record(json!({
                "scenarios": [{"period": [1.0, 2.0], "base_period": [1.0, 1.5], "base_rps": 5.0, "runs": []}],
                "tunes": [{"size_min": 1, "size_max": 2, "intvs": 2, "isol_pct": "05",
                           "isol_thr": 0.9, "probes": [[2, 0.95]], "final_size": 2}],
            })))
            .unwrap();
        assert_eq!(back.tunes[0].as_ref().unwrap().probes.len(), 1);
    }
}
