//! The `iocost-params` bench; what it does, for users, is [`DOC`]. It
//! owns the io.cost files: it writes and restores io.cost.model and
//! io.cost.qos, and reads them (with io.stat) back into knobs and reports.

use super::common::{Bench, BenchInfo, Ctx, Outcome};
use super::knobs::{
    IoCostKnobs, IoCostModel, IoCostModelReport, IoCostQos, IoCostQosReport, IoCostReport,
};
use crate::bench::metrics::IoCostParamsMetrics;
use crate::journal::JobData;
use crate::spec::{JobSpec, check_keys};
use crate::sys::cgroup::Cgroups;
use crate::sys::sysreqs::SysReq;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// What `doc iocost-params` prints.
pub const DOC: &str = "\
iocost-params: the scratch device's linear IO cost model and QoS,
measured with fio (upstream's iocost_coef_gen, written here).

Six fio runs give the model: wbps and rbps (QD1, 128M blocks), wseqiops
and rseqiops (QD256, 4K sequential), wrandiops and rrandiops (QD256, 4K
random); the IO counts are bandwidth / 4096. Two more runs give the
QoS: random reads (writes) at 90% of the measured random IOPS, whose
completion latency at the target percentile (95 on SSDs, 50 on
rotational devices), in µs and times 1.5, is rlat (wlat); min/max are
60 and 100. fio runs 8 jobs on SSDs, 1 on rotational devices, O_DIRECT
with libaio, on DIR/iocost-coef-fio.testfile (16G; 256M with
--test, which also runs each job 3 s instead of 60 s).

With apply (default) the model and QoS are written to the cgroup2
root's io.cost.model/io.cost.qos where they exist; otherwise they
are recorded, with the reason, for later benches (the memory hog's base
rate is wbps).
";

/// Checks a spec: `apply` and `commit`, booleans.
pub fn check_spec(spec: &JobSpec) -> Result<(), crate::Error> {
    props(spec).map(|_| ()).map_err(crate::Error::Input)
}

fn props(spec: &JobSpec) -> Result<bool, String> {
    check_keys(spec, 0, &["apply", "commit"]).map_err(|e| e.to_string())?;
    if spec.props.len() > 1 {
        return Err("multiple property sets not supported".into());
    }
    let mut apply = true;
    for (k, v) in spec.props.first().into_iter().flatten() {
        let b = match v.as_str() {
            "" | "true" | "1" => true,
            "false" | "0" => false,
            _ => return Err(format!("property {k}={v:?}: expected true or false")),
        };
        if k == "apply" || (k == "commit" && b) {
            apply = b;
        }
    }
    Ok(apply)
}

/// What the bench records: upstream's record (the knobs: `devnr`,
/// `model`, `qos`) and, ours only, whether they were applied.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoCostRecord {
    pub devnr: String,
    pub model: IoCostModel,
    pub qos: IoCostQos,
    /// Ours: "applied" or why not; absent in upstream's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<String>,
}

/// One fio run.
struct FioJob<'a> {
    rw: &'a str,
    depth: u32,
    bs: &'a str,
    rate_iops: Option<u64>,
}

/// Sum over fio's jobs of read + write bytes/s, and the first job's
/// completion latency percentiles (ns) of the `rw` direction.
pub fn parse_fio(text: &str, dir: &str) -> Result<(f64, Vec<(f64, f64)>), crate::Error> {
    // fio may print warnings before the JSON.
    let start = text
        .find('{')
        .ok_or_else(|| crate::Error::Host("fio printed no JSON output".into()))?;
    let v: Value = serde_json::from_str(&text[start..])
        .map_err(|e| crate::Error::Host(format!("fio's JSON output: {e}")))?;
    let jobs = v["jobs"]
        .as_array()
        .ok_or_else(|| crate::Error::Host("fio's JSON output has no jobs".into()))?;
    let mut bw = 0.0;
    for j in jobs {
        bw += j["read"]["bw_bytes"].as_f64().unwrap_or(0.0)
            + j["write"]["bw_bytes"].as_f64().unwrap_or(0.0);
    }
    let mut pcts: Vec<(f64, f64)> = jobs
        .first()
        .and_then(|j| j[dir]["clat_ns"]["percentile"].as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.parse::<f64>().ok()?, v.as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    pcts.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok((bw, pcts))
}

/// The latency at the percentile nearest to `pct`.
pub fn nearest_pct(pcts: &[(f64, f64)], pct: f64) -> Option<f64> {
    pcts.iter()
        .min_by(|a, b| (a.0 - pct).abs().total_cmp(&(b.0 - pct).abs()))
        .map(|p| p.1)
}

fn fio(
    file: &Path,
    size: u64,
    secs: u32,
    jobs: u32,
    j: &FioJob,
) -> Result<(f64, Vec<(f64, f64)>), String> {
    let mut cmd = Command::new("fio");
    cmd.args([
        "--direct=1",
        "--ioengine=libaio",
        "--name=coef",
        "--time_based",
    ])
    .arg(format!("--filename={}", file.display()))
    .arg(format!("--size={size}"))
    .arg(format!("--runtime={secs}"))
    .arg(format!("--readwrite={}", j.rw))
    .arg(format!("--iodepth={}", j.depth))
    .arg(format!("--blocksize={}", j.bs))
    .arg(format!("--numjobs={jobs}"))
    .arg(format!("--iodepth_batch_submit={}", j.depth.div_ceil(16)))
    .arg("--output-format=json")
    .stdin(Stdio::null());
    if let Some(r) = j.rate_iops {
        cmd.arg(format!("--rate_iops={}", r.max(1)));
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run fio (apt install fio): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "fio {} failed ({}): {}",
            j.rw,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let dir = if j.rw.contains("write") {
        "write"
    } else {
        "read"
    };
    parse_fio(&String::from_utf8_lossy(&out.stdout), dir).map_err(String::from)
}

/// The fio runs that measure the model's six figures, in order.
fn model_plan() -> [(&'static str, FioJob<'static>); 6] {
    [
        (
            "wbps",
            FioJob {
                rw: "write",
                depth: 1,
                bs: "128M",
                rate_iops: None,
            },
        ),
        (
            "rbps",
            FioJob {
                rw: "read",
                depth: 1,
                bs: "128M",
                rate_iops: None,
            },
        ),
        (
            "wseqiops",
            FioJob {
                rw: "write",
                depth: 256,
                bs: "4k",
                rate_iops: None,
            },
        ),
        (
            "rseqiops",
            FioJob {
                rw: "read",
                depth: 256,
                bs: "4k",
                rate_iops: None,
            },
        ),
        (
            "wrandiops",
            FioJob {
                rw: "randwrite",
                depth: 256,
                bs: "4k",
                rate_iops: None,
            },
        ),
        (
            "rrandiops",
            FioJob {
                rw: "randread",
                depth: 256,
                bs: "4k",
                rate_iops: None,
            },
        ),
    ]
}

/// Runs the bench.
pub fn run(spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
    let apply = props(spec).map_err(crate::Error::Input)?;
    let si = ctx.sysinfo;
    let rot = si.scr_dev_rotational;
    let (size, secs): (u64, u32) = if ctx.opts.test {
        (256 << 20, 3)
    } else {
        (16 << 30, 60)
    };
    let jobs = if rot { 1 } else { 8 };
    let pct = if rot { 50.0 } else { 95.0 };
    let file = ctx.opts.dir.join("iocost-coef-fio.testfile");
    let mut model = IoCostModel::default();
    let plan = model_plan();
    let total = plan.len() + 2;
    for (i, (name, job)) in plan.iter().enumerate() {
        if ctx.cancel.is_stopped() {
            let _ = std::fs::remove_file(&file);
            return Ok(Outcome::Partial(None, "interrupted".into()));
        }
        eprintln!(
            "iocost-params [{}/{total}] {name}: fio {} for {secs}s",
            i + 1,
            job.rw
        );
        let (bw, _) = fio(&file, size, secs, jobs, job).map_err(crate::Error::Host)?;
        let v = if name.ends_with("bps") {
            bw
        } else {
            bw / 4096.0
        };
        let v = v.round() as u64;
        match *name {
            "wbps" => model.wbps = v,
            "rbps" => model.rbps = v,
            "wseqiops" => model.wseqiops = v,
            "rseqiops" => model.rseqiops = v,
            "wrandiops" => model.wrandiops = v,
            _ => model.rrandiops = v,
        }
        eprintln!("iocost-params [{}/{total}] {name}={v}", i + 1);
    }
    let mut lat = [0u64; 2];
    for (i, (rw, iops)) in [
        ("randread", model.rrandiops),
        ("randwrite", model.wrandiops),
    ]
    .into_iter()
    .enumerate()
    {
        if ctx.cancel.is_stopped() {
            let _ = std::fs::remove_file(&file);
            return Ok(Outcome::Partial(None, "interrupted".into()));
        }
        let rate = (iops as f64 * 0.9) as u64;
        eprintln!(
            "iocost-params [{}/{total}] {rw} latency at {rate} IOPS (90%)",
            plan.len() + i + 1
        );
        let job = FioJob {
            rw,
            depth: 256,
            bs: "4k",
            rate_iops: Some(rate),
        };
        let (_, pcts) = fio(&file, size, secs, jobs, &job).map_err(crate::Error::Host)?;
        let ns = nearest_pct(&pcts, pct).ok_or_else(|| {
            crate::Error::Host(format!(
                "fio {rw}: no completion latency percentiles in its output"
            ))
        })?;
        lat[i] = (ns / 1000.0 * 1.5).round() as u64;
    }
    let _ = std::fs::remove_file(&file);
    let devnr = format!("{}:{}", si.scr_devnr.0, si.scr_devnr.1);
    let qos = IoCostQos {
        rpct: pct,
        rlat: lat[0],
        wpct: pct,
        wlat: lat[1],
        min: 60.0,
        max: 100.0,
    };
    let knobs = IoCostKnobs {
        devnr: devnr.clone(),
        model: model.clone(),
        qos: qos.clone(),
    };
    let applied = if !apply {
        "not applied: apply=false".to_string()
    } else {
        apply_knobs(ctx, &knobs)
    };
    eprintln!("iocost-params: {applied}");
    let rec = IoCostRecord {
        devnr,
        model,
        qos,
        applied: Some(applied),
    };
    Ok(Outcome::Done(
        serde_json::to_value(&rec).map_err(|e| crate::Error::Host(e.to_string()))?,
        json!(true),
    ))
}

/// What io.cost.model/io.cost.qos said for a device before a bench
/// enabled iocost; written back on drop.
pub struct IoCostRestore {
    lines: Vec<(std::path::PathBuf, String)>,
}

impl IoCostRestore {
    /// What the cgroup2 root `root` holds for device `devnr` now, to be
    /// written back on drop (kernel-chosen parameters as `ctrl=auto`).
    pub fn capture(root: &std::path::Path, devnr: &str) -> IoCostRestore {
        let mut lines = Vec::new();
        for (name, qos) in [("io.cost.model", false), ("io.cost.qos", true)] {
            let f = root.join(name);
            if let Some(prev) = std::fs::read_to_string(&f).ok().and_then(|t| {
                t.lines()
                    .find(|l| l.split_whitespace().next() == Some(devnr))
                    .map(str::to_string)
            }) {
                lines.push((f, restore_line(&prev, qos)));
            }
        }
        IoCostRestore { lines }
    }
}

impl Drop for IoCostRestore {
    fn drop(&mut self) {
        for (f, line) in &self.lines {
            if let Err(e) = crate::sys::write_existing(f, line) {
                eprintln!("warning: cannot restore {}: {e}", f.display());
            }
        }
    }
}

pub use crate::sys::iocost_restore_line as restore_line;

/// One device's `key=value` pairs in a io.cost.model/io.cost.qos file.
fn iocost_line(text: &str, devnr: &str) -> Option<BTreeMap<String, String>> {
    let l = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(devnr))?;
    Some(
        l.split_whitespace()
            .skip(1)
            .filter_map(|t| t.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// `--iocost-from-sys`: the scratch device's model and QoS as the
/// kernel has them (`model` and `qos`: the io.cost.model and io.cost.qos
/// texts); refused when iocost is off for the device.
pub fn iocost_knobs_from_sys(
    model: &str,
    qos: &str,
    devnr: &str,
) -> Result<IoCostKnobs, crate::Error> {
    let what = "--iocost-from-sys";
    let m = iocost_line(model, devnr).ok_or_else(|| {
        crate::Error::Host(format!(
            "{what}: io.cost.model has no line for the scratch device {devnr}"
        ))
    })?;
    let q = iocost_line(qos, devnr).ok_or_else(|| {
        crate::Error::Host(format!(
            "{what}: io.cost.qos has no line for the scratch device {devnr}"
        ))
    })?;
    if q.get("enable").map(String::as_str) != Some("1") {
        return Err(crate::Error::Host(format!(
            "{what}: iocost is disabled for the scratch device {devnr} (io.cost.qos enable=0)"
        )));
    }
    // Every figure must be there: a missing one is not read as 0.
    const MODEL_KEYS: [&str; 6] = [
        "rbps",
        "rseqiops",
        "rrandiops",
        "wbps",
        "wseqiops",
        "wrandiops",
    ];
    const QOS_KEYS: [&str; 6] = ["rpct", "rlat", "wpct", "wlat", "min", "max"];
    for (map, keys) in [(&m, MODEL_KEYS), (&q, QOS_KEYS)] {
        if let Some(k) = keys.iter().find(|k| figure(map, k).is_none()) {
            return Err(crate::Error::Host(format!(
                "{what}: no {k}= for {devnr} in io.cost.model/io.cost.qos"
            )));
        }
    }
    Ok(IoCostKnobs {
        devnr: devnr.to_string(),
        ..iocost_report(Some(model), Some(qos), None, devnr).knobs()
    })
}

/// A `key=value` figure of an iocost line: a finite, non-negative number.
fn figure(map: &BTreeMap<String, String>, k: &str) -> Option<f64> {
    map.get(k)
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// The scratch device's iocost state as upstream's `sysinfo.iocost` keeps
/// it, from the io.cost.model, io.cost.qos and io.stat texts of the
/// cgroup2 root (`None` where a file is missing: all empty, as upstream
/// writes it for a device without iocost). `vrate` is the device's
/// `cost.vrate` in io.stat when read (upstream: the job's mean).
pub fn iocost_report(
    model: Option<&str>,
    qos: Option<&str>,
    io_stat: Option<&str>,
    devnr: &str,
) -> IoCostReport {
    let m = model
        .and_then(|t| iocost_line(t, devnr))
        .unwrap_or_default();
    let q = qos.and_then(|t| iocost_line(t, devnr)).unwrap_or_default();
    let v = io_stat
        .and_then(|t| iocost_line(t, devnr))
        .unwrap_or_default();
    let f = |map: &BTreeMap<String, String>, k: &str| figure(map, k).unwrap_or(0.0);
    let s = |map: &BTreeMap<String, String>, k: &str| map.get(k).cloned().unwrap_or_default();
    IoCostReport {
        vrate: f(&v, "cost.vrate"),
        model: IoCostModelReport {
            ctrl: s(&m, "ctrl"),
            model: s(&m, "model"),
            knobs: IoCostModel {
                rbps: f(&m, "rbps") as u64,
                rseqiops: f(&m, "rseqiops") as u64,
                rrandiops: f(&m, "rrandiops") as u64,
                wbps: f(&m, "wbps") as u64,
                wseqiops: f(&m, "wseqiops") as u64,
                wrandiops: f(&m, "wrandiops") as u64,
            },
        },
        qos: IoCostQosReport {
            enable: f(&q, "enable") as u32,
            ctrl: s(&q, "ctrl"),
            knobs: IoCostQos {
                rpct: f(&q, "rpct"),
                rlat: f(&q, "rlat") as u64,
                wpct: f(&q, "wpct"),
                wlat: f(&q, "wlat") as u64,
                min: f(&q, "min"),
                max: f(&q, "max"),
            },
        },
    }
}

/// [`iocost_report`] for the scratch device, read from this host.
pub(crate) fn iocost_report_now(cgroups: &Cgroups, devnr: (u32, u32)) -> IoCostReport {
    let root = cgroups.v2_root();
    let read = |name: &str| root.and_then(|r| std::fs::read_to_string(r.join(name)).ok());
    iocost_report(
        read("io.cost.model").as_deref(),
        read("io.cost.qos").as_deref(),
        read("io.stat").as_deref(),
        &format!("{}:{}", devnr.0, devnr.1),
    )
}

/// Enables iocost with `k` for the length of a bench (protection): the
/// outcome in words, and the guard that restores what was there.
pub fn enable_for_run(ctx: &Ctx, k: &IoCostKnobs) -> (String, Option<IoCostRestore>) {
    let Some(root) = ctx.cgroups.v2_root() else {
        return (
            "not enabled: no cgroup2 hierarchy with the io controller (io.cost.qos)".into(),
            None,
        );
    };
    let restore = IoCostRestore::capture(root, &k.devnr);
    let what = apply_knobs(ctx, k);
    let guard = (what == "applied").then_some(restore);
    (what, guard)
}

/// Writes the model and QoS to the cgroup2 root; the outcome in words.
fn apply_knobs(ctx: &Ctx, k: &IoCostKnobs) -> String {
    let Some(root) = ctx.cgroups.v2_root() else {
        return "not applied: no cgroup2 hierarchy with the io controller (io.cost.model)".into();
    };
    let (mf, qf) = (root.join("io.cost.model"), root.join("io.cost.qos"));
    if !mf.exists() || !qf.exists() {
        return format!(
            "not applied: {} is missing (kernel without iocost)",
            mf.display()
        );
    }
    let m = &k.model;
    let q = &k.qos;
    let model = format!(
        "{} ctrl=user model=linear rbps={} rseqiops={} rrandiops={} wbps={} wseqiops={} wrandiops={}",
        k.devnr, m.rbps, m.rseqiops, m.rrandiops, m.wbps, m.wseqiops, m.wrandiops
    );
    let qos = format!(
        "{} enable=1 ctrl=user rpct={:.2} rlat={} wpct={:.2} wlat={} min={:.2} max={:.2}",
        k.devnr, q.rpct, q.rlat, q.wpct, q.wlat, q.min, q.max
    );
    match crate::sys::write_existing(&mf, &model)
        .and_then(|()| crate::sys::write_existing(&qf, &qos))
    {
        Ok(()) => "applied".into(),
        Err(e) => format!("not applied: {e}"),
    }
}

/// The model and QoS lines (and, in full, whether they were applied).
pub fn format(d: &JobData, full: bool) -> Result<String, crate::Error> {
    let rec: IoCostRecord = serde_json::from_value(d.record.clone().unwrap_or_default())
        .map_err(|e| crate::Error::Input(format!("the record is not an iocost record: {e}")))?;
    let k = IoCostKnobs {
        devnr: rec.devnr.clone(),
        model: rec.model,
        qos: rec.qos,
    };
    let mut out = k.format_lines("");
    if let (true, Some(applied)) = (full, &rec.applied) {
        out.push_str(&format!("iocost {}: {applied}\n", rec.devnr));
    }
    Ok(out)
}

/// The iocost-params bench.
pub struct IoCostParamsBench;

static INFO: BenchInfo = BenchInfo {
    kind: "iocost-params",
    about: "the IO cost model and QoS of the scratch device, measured with fio",
    doc: DOC,
    hard: &[SysReq::DepsIoCostCoefGen],
    soft: &[SysReq::IoCost],
};

impl Bench for IoCostParamsBench {
    fn info(&self) -> &'static BenchInfo {
        &INFO
    }
    fn check(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        check_spec(spec)
    }
    fn run(&self, spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
        run(spec, ctx)
    }
    fn format(&self, d: &JobData, full: bool) -> Result<String, crate::Error> {
        format(d, full)
    }
    fn metrics(&self, d: &JobData, m: &mut super::common::JobMetrics) {
        let Some(k) = d
            .record
            .clone()
            .and_then(|r| serde_json::from_value::<IoCostKnobs>(r).ok())
        else {
            return;
        };
        m.iocost_params = Some(IoCostParamsMetrics {
            iocost_rbps: k.model.rbps,
            iocost_wbps: k.model.wbps,
            iocost_rrandiops: k.model.rrandiops,
            iocost_wrandiops: k.model.wrandiops,
        });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn restore_lines_put_auto_parameters_back_as_auto() {
        let m = "8:16 ctrl=auto model=linear rbps=174029730 rseqiops=41322 rrandiops=370 wbps=178380670 wseqiops=42387 wrandiops=370";
        assert_eq!(super::restore_line(m, false), "8:16 ctrl=auto");
        let q = "8:16 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00";
        assert_eq!(super::restore_line(q, true), "8:16 enable=0 ctrl=auto");
        let u = "8:16 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=50.00 max=150.00";
        assert_eq!(super::restore_line(u, true), u);
    }

    use super::*;

    #[test]
    fn iocost_state_is_read_as_upstream_keeps_it() {
        let model = "8:16 ctrl=auto model=linear rbps=1\n\
                     8:0 ctrl=user model=linear rbps=2000000000 rseqiops=300000 rrandiops=200000 \
                     wbps=1500000000 wseqiops=250000 wrandiops=150000\n";
        let qos = "8:0 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=90.00 wlat=10000 min=50.00 max=150.00\n";
        let stat =
            "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0 cost.vrate=87.50 cost.usage=9\n";
        let r = iocost_report(Some(model), Some(qos), Some(stat), "8:0");
        assert!(r.enabled());
        assert_eq!(
            (r.model.ctrl.as_str(), r.model.model.as_str()),
            ("user", "linear")
        );
        assert_eq!(
            (r.model.knobs.rbps, r.model.knobs.wrandiops),
            (2_000_000_000, 150_000)
        );
        assert_eq!(
            (r.qos.knobs.rlat, r.qos.knobs.wpct, r.qos.knobs.max),
            (5000, 90.0, 150.0)
        );
        assert_eq!(r.vrate, 87.5);
        // No iocost files: upstream's empty object, iocost off (not null).
        let none = iocost_report(None, None, None, "8:0");
        assert!(!none.enabled());
        let v = serde_json::to_value(&none).unwrap();
        assert_eq!(v["qos"]["enable"], 0);
        assert_eq!(v["model"]["rbps"], 0);
        // Another device's lines are not this one's.
        assert!(!iocost_report(Some(model), Some(qos), None, "8:16").enabled());
    }

    use crate::spec::parse;

    #[test]
    fn properties() {
        assert!(props(&parse("iocost-params").unwrap()).unwrap());
        assert!(!props(&parse("iocost-params:apply=false").unwrap()).unwrap());
        assert!(
            props(&parse("iocost-params:aply").unwrap())
                .unwrap_err()
                .contains("apply")
        );
        assert!(props(&parse("iocost-params:apply=maybe").unwrap()).is_err());
    }

    /// Upstream records the knobs only; ours adds `applied`.
    #[test]
    fn upstream_record_formats() {
        let d = JobData {
            spec: parse("iocost-params").unwrap(),
            period: (1, 2),
            sysinfo: serde_json::Value::Null,
            record: Some(json!({
                "devnr": "259:0",
                "model": {"rbps": 1, "rseqiops": 2, "rrandiops": 3,
                          "wbps": 4, "wseqiops": 5, "wrandiops": 6},
                "qos": {"rpct": 95.0, "rlat": 7, "wpct": 90.0, "wlat": 8,
                        "min": 60.0, "max": 100.0}
            })),
            result: Some(json!(true)),
        };
        let want = "iocost model: rbps=1 rseqiops=2 rrandiops=3\n              wbps=4 wseqiops=5 wrandiops=6\niocost QoS: rpct=95.00 rlat=7 wpct=90.00 wlat=8 min=60.00 max=100.00\n";
        assert_eq!(format(&d, true).unwrap(), want);
        let mut ours = d.clone();
        ours.record.as_mut().unwrap()["applied"] = json!("applied");
        assert_eq!(
            format(&ours, true).unwrap(),
            format!("{want}iocost 259:0: applied\n")
        );
        assert_eq!(format(&ours, false).unwrap(), want);
    }

    #[test]
    fn fio_json_is_read() {
        let text = r#"note: a warning line
{"jobs": [
  {"read": {"bw_bytes": 1000, "clat_ns": {"percentile": {"50.000000": 2000, "95.000000": 9000, "99.000000": 20000}}},
   "write": {"bw_bytes": 0}},
  {"read": {"bw_bytes": 500}, "write": {"bw_bytes": 24}}
]}"#;
        let (bw, pcts) = parse_fio(text, "read").unwrap();
        assert_eq!(bw, 1524.0);
        assert_eq!(nearest_pct(&pcts, 95.0), Some(9000.0));
        assert_eq!(nearest_pct(&pcts, 60.0), Some(2000.0));
        assert!(
            parse_fio("fio: bad option", "read")
                .unwrap_err()
                .to_string()
                .contains("no JSON")
        );
    }
}
