//! Upstream's iocost-qos results, read and printed as upstream's
//! resctl-bench prints them (`format` and `summary`). rackbench cannot run
//! iocost-qos where cgroup2 has no io.cost (see [`crate::bench::iocost_qos`]), but
//! a result made upstream, alone or in a merged file, is shown here whole:
//! the base storage header, with `full` each run's storage, protection and
//! result sections, then the summary of QoS settings, the MOF/aMOF table
//! and the read and write latency tables.
//!
//! The shapes are upstream's `IoCostQoSRecord` and `IoCostQoSResult`
//! (resctl-bench's bench/iocost_qos.rs); a run's storage and protection
//! parts are upstream's storage and protection shapes, formatted by
//! [`crate::bench::storage`] and [`crate::bench::protection`].

use crate::bench::iocost_qos::QosProps;
use crate::bench::knobs::{IoCostQos, QosOvr, round2_as_printed};
use crate::bench::protection::format::{IoLat, format_iolat_rw};
use crate::bench::protection::run::{ProtectionResult, format_with_prefix};
use crate::bench::protection::study::MemHogResult;
use crate::bench::storage::{
    UpstreamStorageJob, UpstreamStorageRecord, UpstreamStorageResult, format_upstream_header,
    format_upstream_result, reports_missing,
};
use crate::fmt::{custom_underline, format_duration, format_pct};
use crate::journal::JobData;
use crate::spec::JobSpec;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One QoS run of upstream's record.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct QosRecordRun {
    pub period: (u64, u64),
    pub ovr: QosOvr,
    /// The QoS applied; `None` for the baseline (iocost off).
    pub qos: Option<IoCostQos>,
    pub stor: UpstreamStorageRecord,
    /// Upstream's protection record (read by [`crate::bench::protection`]).
    pub prot: Value,
}

/// Upstream's iocost-qos record.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct QosRecord {
    /// The iocost-params model the runs started from (not printed).
    pub base_model: Value,
    pub base_qos: IoCostQos,
    pub mem_profile: u32,
    pub runs: Vec<Option<QosRecordRun>>,
    #[serde(default)]
    pub dither_dist: Option<f64>,
    /// Runs of an incomplete result (not printed, as upstream).
    #[serde(default)]
    pub inc_runs: Vec<Value>,
}

/// One QoS run of upstream's result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct QosResultRun {
    pub stor: UpstreamStorageResult,
    /// Upstream's protection result (read by [`crate::bench::protection`]).
    pub prot: Value,
    pub adjusted_mem_size: Option<u64>,
    pub adjusted_mem_offload_factor: Option<f64>,
    pub adjusted_mem_offload_delta: Option<f64>,
    /// vrate distribution: `00` … `100`, `mean`, `stdev`.
    pub vrate: BTreeMap<String, f64>,
    pub iolat: IoLat,
    pub nr_reports: (u64, u64),
}

/// Upstream's iocost-qos result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct QosResult {
    pub runs: Vec<Option<QosResultRun>>,
}

/// `v` as upstream's `kind` `what` (record or result); an error names the
/// field that does not fit (`record.runs[1].stor.mem.profile: ...`).
pub fn read<T: serde::de::DeserializeOwned>(
    v: &Value,
    kind: &str,
    what: &str,
) -> Result<T, crate::Error> {
    serde_path_to_error::deserialize(v)
        .map_err(|e| {
            format!(
                "the {what} is not upstream's {kind} {what}: {what}.{}: {}",
                e.path(),
                e.inner()
            )
        })
        .map_err(crate::Error::Input)
}

/// The vrate percentiles upstream prints, in its order.
const VRATE_PCTS: &[&str] = &[
    "00", "01", "10", "25", "50", "75", "90", "99", "100", "mean", "stdev",
];

/// `base` with `ovr` applied, rounded as io.cost.qos takes it; `None` when
/// the run had iocost off.
fn calc(base: &IoCostQos, ovr: &QosOvr) -> Option<IoCostQos> {
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

/// Upstream's `IoCostQoSCfg::format`: `iocost=off`, or the six QoS values
/// with each overridden one in brackets (`rpct=95.00 rlat=5000 ...
/// [min=60.00] [max=60.00]`).
pub fn format_qos_cfg(base: &IoCostQos, ovr: &QosOvr) -> String {
    let Some(q) = calc(base, ovr) else {
        return "iocost=off".into();
    };
    let f = |name: &str, given: bool, v: String| {
        if given {
            format!("[{name}={v}]")
        } else {
            format!("{name}={v}")
        }
    };
    [
        f("rpct", ovr.rpct.is_some(), format!("{:.2}", q.rpct)),
        f("rlat", ovr.rlat.is_some(), q.rlat.to_string()),
        f("wpct", ovr.wpct.is_some(), format!("{:.2}", q.wpct)),
        f("wlat", ovr.wlat.is_some(), q.wlat.to_string()),
        f("min", ovr.min.is_some(), format!("{:.2}", q.min)),
        f("max", ovr.max.is_some(), format!("{:.2}", q.max)),
    ]
    .join(" ")
}

/// The protection spec upstream's iocost-qos runs in each QoS run: an empty
/// first group, then mem-hog-tune at load 1.0 between 4/5 of the share and
/// the size storage found, judged at the job's isolation percentile and
/// threshold.
fn prot_spec(spec: &JobSpec, p: &QosProps, stor: &UpstreamStorageRecord, size: u64) -> JobSpec {
    let group: BTreeMap<String, String> = [
        ("scenario", "mem-hog-tune".to_string()),
        ("load", "1.0".to_string()),
        ("size-min", (stor.mem.share * 4 / 5).to_string()),
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
        passive: spec.passive.clone(),
        props: vec![BTreeMap::new(), group],
    }
}

/// The storage job inside iocost-qos: storage's defaults with the spec's
/// `storage-KEY=V` properties.
fn stor_job(p: &QosProps) -> Result<UpstreamStorageJob, String> {
    let spec = JobSpec {
        kind: "storage".into(),
        id: None,
        passive: None,
        props: vec![p.storage.clone()],
    };
    UpstreamStorageJob::from_spec(&spec).map_err(|e| format!("storage-{e}"))
}

/// A run's final mem-hog-tune probe, from its protection result.
fn final_probe(
    prot: &Value,
    i: usize,
) -> Result<crate::bench::protection::study::MemHogResult, String> {
    let r: ProtectionResult = serde_json::from_value(prot.clone())
        .map_err(|e| format!("run {i:02}: the protection result: {e}"))?;
    r.scenarios
        .into_iter()
        .next()
        .ok_or_else(|| format!("run {i:02}: the protection result has no scenario"))
}

/// A run's final mem-hog-tune probe from its protection result: `None`
/// when the tune recorded none (no protected size was found).
pub fn final_probe_of(
    prot: &Value,
) -> Result<Option<crate::bench::protection::study::MemHogResult>, crate::Error> {
    let first = prot.get("scenarios").and_then(|s| s.get(0));
    let Some(first) = first else {
        return Ok(None);
    };
    if first
        .get("MemHogTune")
        .is_some_and(|t| t.get("final_run").is_none_or(Value::is_null))
    {
        return Ok(None);
    }
    let r: ProtectionResult = serde_json::from_value(prot.clone())
        .map_err(|e| crate::Error::Input(format!("the protection result: {e}")))?;
    Ok(r.scenarios.into_iter().next())
}

/// The isolation percentile and threshold of a run's mem-hog-tune, from
/// its protection record.
pub fn tune_params(prot: &Value) -> Option<(String, f64)> {
    let t = prot.get("scenarios")?.get(0)?.get("MemHogTune")?;
    Some((
        t.get("isol_pct")?.as_str()?.to_string(),
        t.get("isol_thr")?.as_f64()?,
    ))
}

fn pct_of(m: &BTreeMap<String, f64>, k: &str) -> f64 {
    m.get(k).copied().unwrap_or(0.0)
}

/// The text of an iocost-qos job made upstream, as upstream's `format`
/// prints it; `full` adds each run's sections (`format`), `rstat` the
/// storage runs' extra stat tables (`format -R`).
pub fn format(d: &JobData, full: bool, rstat: u8) -> Result<String, crate::Error> {
    format_sub(d, full, rstat, false)
}

/// `format iocost-qos:sub-full`: upstream's format property for the runs'
/// storage and protection parts printed in full.
pub fn sub_full(spec: &JobSpec) -> Result<bool, crate::Error> {
    let mut on = false;
    for (k, v) in spec.props.iter().flatten() {
        match (k.as_str(), v.as_str()) {
            ("sub-full", "" | "true") => on = true,
            ("sub-full", "false") => on = false,
            ("sub-full", v) => {
                return Err(crate::Error::Input(format!(
                    "format property sub-full={v:?}: expected true or false"
                )));
            }
            (k, _) => {
                return Err(crate::Error::Input(format!(
                    "unknown format property {k:?}: iocost-qos takes sub-full"
                )));
            }
        }
    }
    Ok(on)
}

/// [`format`] with the runs' storage and protection parts full
/// (`sub_full`).
pub fn format_sub(
    d: &JobData,
    full: bool,
    rstat: u8,
    sub_full: bool,
) -> Result<String, crate::Error> {
    let p = QosProps::parse(&d.spec)?;
    let (rec, res) = read_job(d, &p).map_err(crate::Error::Input)?;
    let (base_rec, base_res) = match (rec.runs.first(), res.runs.first()) {
        (Some(Some(a)), Some(Some(b))) if a.qos.is_none() => (a, b),
        _ => {
            return Err(crate::Error::Input(
                "iocost-qos: failed to format due to missing baseline".into(),
            ));
        }
    };
    let sjob = stor_job(&p).map_err(crate::Error::Input)?;
    // Each run's final mem-hog-tune probe, read once for the run's section
    // and the summary: where the run has an aMOF.
    let mut hogs = Vec::with_capacity(res.runs.len());
    for (i, r) in res.runs.iter().enumerate() {
        hogs.push(match r {
            Some(r) if r.adjusted_mem_offload_factor.is_some() => {
                Some(final_probe(&r.prot, i).map_err(crate::Error::Input)?)
            }
            _ => None,
        });
    }
    let mut o = String::new();
    format_upstream_header(&mut o, &sjob, &base_rec.stor, false);

    if full {
        let f = RunFmt {
            d,
            p: &p,
            sjob: &sjob,
            rec: &rec,
            base_mof: base_res.stor.mem_offload_factor,
            sub_full,
            rstat,
        };
        for (i, (recr, resr)) in rec.runs.iter().zip(&res.runs).enumerate() {
            let (Some(recr), Some(resr)) = (recr, resr) else {
                continue;
            };
            f.run(&mut o, i, recr, resr, hogs[i].as_ref())
                .map_err(crate::Error::Input)?;
        }
        let _ = write!(o, "\n\n{}\n", custom_underline("Summary", '='));
    } else {
        o.push('\n');
    }
    format_summary(&mut o, &p, &rec, &res, &hogs);
    format_lat_tables(&mut o, &res);
    Ok(o)
}

/// The job's record and result, read and checked to match.
fn read_job(d: &JobData, p: &QosProps) -> Result<(QosRecord, QosResult), String> {
    let Some(record) = d.record.as_ref().filter(|r| !r.is_null()) else {
        return Err(
            "this iocost-qos job has no record: it stopped before its first QoS run finished; \
             run it again to start it over"
                .into(),
        );
    };
    if d.result.as_ref().is_none_or(Value::is_null) {
        let done = record
            .get("inc_runs")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let planned = p.ladder(0.0).len();
        return Err(format!(
            "this iocost-qos job is incomplete: {done} of its {planned} QoS runs finished before it \
             stopped (they are kept); run it again to resume from them"
        ));
    }
    let rec: QosRecord = read(record, "iocost-qos", "record")?;
    let res: QosResult = match &d.result {
        Some(r) if !r.is_null() => read(r, "iocost-qos", "result")?,
        _ => {
            return Err(
                "an iocost-qos record without its result cannot be formatted: upstream studies \
                 it from rd-agent's report files, which rackbench does not read"
                    .into(),
            );
        }
    };
    if rec.runs.len() != res.runs.len() {
        return Err(format!(
            "the record has {} runs and the result {}: expected the same",
            rec.runs.len(),
            res.runs.len()
        ));
    }
    Ok((rec, res))
}

/// What every run's full section needs.
struct RunFmt<'a> {
    d: &'a JobData,
    p: &'a QosProps,
    sjob: &'a UpstreamStorageJob,
    rec: &'a QosRecord,
    /// The baseline run's memory offload factor.
    base_mof: f64,
    sub_full: bool,
    rstat: u8,
}

impl RunFmt<'_> {
    /// Run `i`'s section: its storage and protection parts and result.
    fn run(
        &self,
        o: &mut String,
        i: usize,
        recr: &QosRecordRun,
        resr: &QosResultRun,
        hog: Option<&MemHogResult>,
    ) -> Result<(), String> {
        let (d, p) = (self.d, self.p);
        let _ = write!(
            o,
            "\n\n{}\nQoS: {}\n\n",
            custom_underline(&format!("RUN {i:02}"), '='),
            format_qos_cfg(&self.rec.base_qos, &recr.ovr)
        );
        o.push_str(&custom_underline(&format!("RUN {i:02} - Storage"), '-'));
        o.push('\n');
        format_upstream_result(
            o,
            self.sjob,
            &recr.stor,
            &resr.stor,
            false,
            self.sub_full,
            self.rstat,
        );
        let pd = JobData {
            spec: prot_spec(&d.spec, p, &recr.stor, resr.stor.mem_size),
            period: recr.period,
            sysinfo: Value::Null,
            record: Some(recr.prot.clone()),
            result: Some(resr.prot.clone()),
        };
        let prot = format_with_prefix(&pd, self.sub_full, 0, &format!("RUN {i:02} - Protection "))
            .map_err(|e| format!("run {i:02}: {e}"))?;
        // Nothing at all for a run without protection scenarios (the
        // baseline run), as upstream.
        let prot = prot.trim_end_matches('\n');
        if !prot.is_empty() {
            o.push_str(prot);
            o.push('\n');
        }
        let _ = write!(
            o,
            "\n{}\n",
            custom_underline(&format!("RUN {i:02} - Result"), '-')
        );
        format_iolat_rw(o, &resr.iolat, true);
        if recr.qos.is_some() {
            self.qos_result(o, i, recr, resr, hog)?;
        }
        Ok(())
    }

    /// A QoS run's vrate percentiles and its QoS result lines.
    fn qos_result(
        &self,
        o: &mut String,
        i: usize,
        recr: &QosRecordRun,
        resr: &QosResultRun,
        hog: Option<&MemHogResult>,
    ) -> Result<(), String> {
        let (p, base_mof) = (self.p, self.base_mof);
        o.push_str("\nvrate:");
        for (n, pct) in VRATE_PCTS.iter().enumerate() {
            let v = resr.vrate.get(*pct).ok_or_else(|| {
                format!("run {i:02}: the result's vrate has no {pct:?} percentile")
            })?;
            let _ = write!(o, " p{pct}={v:.2}");
            if (n + 1) % 7 == 0 {
                o.push_str("\n      ");
            }
        }
        o.push_str("\n\n");
        let _ = writeln!(
            o,
            "QoS result: MOF={:.3}@{}({:.3}x) vrate={:.2}:{:.2} missing={}%",
            resr.stor.mem_offload_factor,
            recr.stor.mem.profile,
            resr.stor.mem_offload_factor / base_mof,
            pct_of(&resr.vrate, "mean"),
            pct_of(&resr.vrate, "stdev"),
            format_pct(reports_missing(resr.nr_reports))
        );
        match (resr.adjusted_mem_offload_factor, hog) {
            (Some(amof), Some(hog)) => {
                let _ = writeln!(
                    o,
                    "            aMOF={:.3}@{}({:.3}x) isol-{}={}% lat_imp={}%:{} work_csv={}%",
                    amof,
                    recr.stor.mem.profile,
                    amof / base_mof,
                    p.isol_pct,
                    format_pct(pct_of(&hog.isol, &p.isol_pct)),
                    format_pct(pct_of(&hog.lat_imp, "mean")),
                    format_pct(pct_of(&hog.lat_imp, "stdev")),
                    format_pct(hog.work_csv)
                );
            }
            _ => {
                o.push_str("            aMOF=FAIL isol=FAIL lat_imp=FAIL work_csv=FAIL\n");
            }
        }
        Ok(())
    }
}

/// The ladder's QoS settings and the MOF/aMOF table.
fn format_summary(
    o: &mut String,
    p: &QosProps,
    rec: &QosRecord,
    res: &QosResult,
    hogs: &[Option<MemHogResult>],
) {
    // The QoS settings of the spec's ladder (upstream's job runs, with the
    // dither the record kept).
    let offset = match p.dither {
        Some(Some(f)) => f,
        Some(None) => rec.dither_dist.unwrap_or(0.0),
        None => 0.0,
    };
    for (i, ovr) in p.ladder(offset).iter().enumerate() {
        let _ = write!(o, "[{i:02}] QoS: {}", format_qos_cfg(&rec.base_qos, ovr));
        if ovr.off {
            let _ = writeln!(o, " mem_profile={}", rec.mem_profile);
        } else {
            o.push('\n');
        }
    }
    o.push('\n');
    let _ = writeln!(
        o,
        "         MOF     aMOF  isol-{}%       lat-imp%  work-csv%  missing%",
        p.isol_pct
    );
    for (i, resr) in res.runs.iter().enumerate() {
        let Some(resr) = resr else {
            let _ = writeln!(o, "[{i:02}]  SKIP");
            continue;
        };
        let missing = reports_missing(resr.nr_reports) * 100.0;
        let _ = write!(o, "[{i:02}] {:>7.3}  ", resr.stor.mem_offload_factor);
        match (resr.adjusted_mem_offload_factor, &hogs[i]) {
            (Some(amof), Some(hog)) => {
                let _ = writeln!(
                    o,
                    "{:>7.3}     {:>5.1}  {:>6.1}:{:>6.1}      {:>5.1}     {:>5.1}",
                    amof,
                    pct_of(&hog.isol, &p.isol_pct) * 100.0,
                    pct_of(&hog.lat_imp, "mean") * 100.0,
                    pct_of(&hog.lat_imp, "stdev") * 100.0,
                    hog.work_csv * 100.0,
                    missing
                );
            }
            _ => {
                let _ = writeln!(
                    o,
                    "{:>7}     {:>5}  {:>6}:{:>6}      {:>5}     {:>5.1}",
                    "FAIL", "-", "-", "-", "-", missing
                );
            }
        }
    }
}

/// The read and write latency tables, a row per run.
fn format_lat_tables(o: &mut String, res: &QosResult) {
    for (dir, title) in [(0, "RLAT"), (1, "WLAT")] {
        o.push('\n');
        let _ = writeln!(
            o,
            "{title:17}  p50                p90                p99                max"
        );
        for (i, resr) in res.runs.iter().enumerate() {
            let Some(resr) = resr else {
                let _ = writeln!(o, "[{i:02}]  Skipped");
                continue;
            };
            let lat = &resr.iolat[dir];
            let cell = |row: &str, col: &str| {
                lat.get(row)
                    .and_then(|m| m.get(col))
                    .map(|v| format_duration(*v))
                    .unwrap_or_else(|| "-".into())
            };
            let mut line = format!("[{i:02}]");
            for (n, row) in ["50", "90", "99", "100"].iter().enumerate() {
                let _ = write!(
                    line,
                    "{}{:>5}:{:>5}/{:>5}",
                    if n == 0 { " " } else { "  " },
                    cell(row, "mean"),
                    cell(row, "stdev"),
                    cell(row, "100")
                );
            }
            o.push_str(&line);
            o.push('\n');
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::spec::parse;
    use serde_json::json;

    /// One latency distribution row: mean, stdev, max (seconds).
    fn row(mean: f64, stdev: f64, max: f64) -> Value {
        json!({"mean": mean, "stdev": stdev, "99": max * 0.9, "100": max})
    }

    /// `[read, write]` rows p50, p90, p99 and max, as in upstream's doc.
    fn iolat(r: [[f64; 3]; 4], w: [[f64; 3]; 4]) -> Value {
        let dir = |d: [[f64; 3]; 4]| {
            json!({"50": row(d[0][0], d[0][1], d[0][2]), "90": row(d[1][0], d[1][1], d[1][2]),
                   "99": row(d[2][0], d[2][1], d[2][2]), "100": row(d[3][0], d[3][1], d[3][2])})
        };
        json!([dir(r), dir(w)])
    }

    const U: f64 = 1e-6;
    const M: f64 = 1e-3;
    const G: u64 = 1 << 30;

    fn stor(mof: f64, nr_reports: (u64, u64), lat: Value) -> (Value, Value) {
        let rstat = json!({"io_bps": [{"mean": 100.0 * 1048576.0}, {"mean": 50.0 * 1048576.0}]});
        let rec = json!({
            "period": [100, 200], "final_mem_probe_periods": [[150, 200]],
            "base_hashd_knobs": {"hash_size": 1258291, "rps_max": 1029, "mem_size": 48 * G,
                                 "mem_frac": 0.5, "chunk_pages": 25, "fake_cpu_load": false},
            "mem": {"profile": 16, "avail": 20 * G, "share": 12 * G, "target": 11 * G},
            "mem_usages": [12.0 * G as f64], "mem_sizes": [12.0 * G as f64 * mof]
        });
        let res = json!({
            "mem_offload_factor": mof, "mem_usage": 12 * G, "mem_usage_stdev": 0,
            "mem_size": (12.0 * G as f64 * mof) as u64, "mem_size_stdev": 0,
            "all_rstat": rstat, "final_rstat": rstat, "iolat": lat, "nr_reports": nr_reports
        });
        (rec, res)
    }

    /// Upstream's doc example, runs [00] and [03], as runs [00] and [01]
    /// here, and a skipped run [02].
    pub(crate) fn journal_entry() -> JobData {
        let base_lat = iolat(
            [
                [343.0 * U, 1.3 * M, 67.5 * M],
                [1.7 * M, 3.5 * M, 95.5 * M],
                [5.6 * M, 8.7 * M, 150.0 * M],
                [14.3 * M, 21.6 * M, 550.0 * M],
            ],
            [
                [666.0 * U, 4.7 * M, 93.5 * M],
                [3.1 * M, 12.2 * M, 96.5 * M],
                [6.0 * M, 18.3 * M, 250.0 * M],
                [10.9 * M, 33.8 * M, 650.0 * M],
            ],
        );
        let run_lat = iolat(
            [
                [170.0 * U, 73.8 * U, 855.0 * U],
                [665.0 * U, 558.0 * U, 4.5 * M],
                [2.8 * M, 2.1 * M, 15.5 * M],
                [8.6 * M, 4.5 * M, 32.5 * M],
            ],
            [
                [56.2 * U, 48.5 * U, 315.0 * U],
                [501.0 * U, 2.1 * M, 44.5 * M],
                [1.2 * M, 4.1 * M, 61.5 * M],
                [2.5 * M, 5.4 * M, 67.5 * M],
            ],
        );
        let (s0, r0) = stor(1.423, (981, 19), base_lat.clone());
        let (s1, r1) = stor(1.451, (9588, 412), run_lat.clone());
        let d = |v: f64| json!({"01": v, "05": v, "mean": v, "stdev": 0.0});
        let hog = json!({
            "base_rps": 100.0, "base_lat": 0.07, "base_lat_stdev": 0.001,
            "isol": d(0.97453), "lat_imp": {"mean": 0.0079, "stdev": 0.0084},
            "fail_ratio": 0.0, "fail_msgs": [], "work_csv": 0.73554, "iolat": [{}, {}],
            "root_rstat": {}, "work_rstat": {}, "sys_rstat": {},
            "nr_reports": [10, 0], "periods": [[1, 2]], "hog_periods": [[1, 2]],
            "vrate": 60.0, "vrate_stdev": 0.0, "io_usage": 0.0, "io_unused": 0.0,
            "hog_io_usage": 0.0, "hog_io_loss": 0.0, "hog_bytes": 5, "hog_lost_bytes": 6
        });
        let hog_run = json!({"period": [1, 9], "base_period": [2, 3], "base_rps": 80.0,
            "runs": [{"failed": null, "first_hog_rep": null, "last_hog_rep": null,
                      "last_hog_mem": 4096}]});
        let tune = |run: Value, size: Value| {
            json!({"scenarios": [{"MemHogTune": {"period": [10, 90], "base_period": [10, 20],
                "isol_pct": "01", "isol_thr": 0.9, "final_run": run, "final_size": size}}]})
        };
        let tune_res = |run: Value| json!({"scenarios": [{"MemHogTune": {"final_run": run}}], "combined_mem_hog": null});
        let qos = json!({"rpct": 99.0, "rlat": 3759, "wpct": 99.0, "wlat": 1382,
                         "min": 100.0, "max": 100.0});
        let ovr = |off: bool, v: Option<f64>| {
            json!({"off": off, "rpct": null, "rlat": null, "wpct": null, "wlat": null,
                   "min": v, "max": v})
        };
        let mut vrate: BTreeMap<String, f64> =
            VRATE_PCTS.iter().map(|k| (k.to_string(), 60.0)).collect();
        vrate.insert("100".into(), 73.73);
        vrate.insert("mean".into(), 60.05);
        vrate.insert("stdev".into(), 0.75);
        let record = json!({
            "base_model": {"rbps": 1, "rseqiops": 2, "rrandiops": 3, "wbps": 4,
                           "wseqiops": 5, "wrandiops": 6},
            "base_qos": qos, "mem_profile": 16, "dither_dist": null, "inc_runs": [],
            "runs": [
                {"period": [100, 200], "ovr": ovr(true, None), "qos": null, "stor": s0,
                 "prot": tune(json!(null), json!(null))},
                {"period": [300, 400], "ovr": ovr(false, Some(60.0)),
                 "qos": {"rpct": 99.0, "rlat": 3759, "wpct": 99.0, "wlat": 1382,
                         "min": 60.0, "max": 60.0},
                 "stor": s1, "prot": tune(hog_run, json!((12.0 * G as f64 * 1.451) as u64))},
                null
            ]
        });
        let result = json!({"runs": [
            {"stor": r0, "prot": tune_res(json!(null)), "adjusted_mem_size": null,
             "adjusted_mem_offload_factor": null, "adjusted_mem_offload_delta": null,
             "vrate": {}, "iolat": base_lat, "nr_reports": [981, 19]},
            {"stor": r1, "prot": tune_res(hog), "adjusted_mem_size": 100,
             "adjusted_mem_offload_factor": 1.451, "adjusted_mem_offload_delta": 0.0,
             "vrate": vrate, "iolat": run_lat, "nr_reports": [9588, 412]},
            null
        ]});
        JobData {
            spec: parse("iocost-qos:isol-pct=01:vrate=60:vrate=20").unwrap(),
            period: (100, 400),
            sysinfo: Value::Null,
            record: Some(record),
            result: Some(result),
        }
    }

    /// The summary, line for line as upstream's doc shows the same figures.
    #[test]
    fn upstream_results_print_as_upstream() {
        let text = format(&journal_entry(), false, 0).unwrap();
        let want = "\
Params: hash_size=1.2M rps_max=1029 log_bps=1.0M

[00] QoS: iocost=off mem_profile=16
[01] QoS: rpct=99.00 rlat=3759 wpct=99.00 wlat=1382 [min=60.00] [max=60.00]
[02] QoS: rpct=99.00 rlat=3759 wpct=99.00 wlat=1382 [min=20.00] [max=20.00]

         MOF     aMOF  isol-01%       lat-imp%  work-csv%  missing%
[00]   1.423     FAIL         -       -:     -          -       1.9
[01]   1.451    1.451      97.5     0.8:   0.8       73.6       4.1
[02]  SKIP

RLAT               p50                p90                p99                max
[00]  343u: 1.3m/67.5m   1.7m: 3.5m/95.5m   5.6m: 8.7m/ 150m  14.3m:21.6m/ 550m
[01]  170u:73.8u/ 855u   665u: 558u/ 4.5m   2.8m: 2.1m/15.5m   8.6m: 4.5m/32.5m
[02]  Skipped

WLAT               p50                p90                p99                max
[00]  666u: 4.7m/93.5m   3.1m:12.2m/96.5m   6.0m:18.3m/ 250m  10.9m:33.8m/ 650m
[01] 56.2u:48.5u/ 315u   501u: 2.1m/44.5m   1.2m: 4.1m/61.5m   2.5m: 5.4m/67.5m
[02]  Skipped
";
        assert_eq!(text, want);
    }

    /// `format`: each run's sections, the doc's vrate and QoS result lines,
    /// then the summary.
    #[test]
    fn full_format_has_each_runs_sections() {
        let text = format(&journal_entry(), true, 0).unwrap();
        for part in [
            "\n\nRUN 00\n======\n\nQoS: iocost=off\n\nRUN 00 - Storage\n----------------\n\nIO Latency: R p50=343u:1.3m/67.5m",
            "\nMemory offloading: factor=1.423@16 usage/stdev=12.0G/0 size/stdev=17.1G/0 missing=1.90%\n\nRUN 00 - Protection Scenario 1/1 - Memory Hog Tuning\n----------------------------------------------------\n\nParams: load=1 speed=2x size=9.6G-17.1G intvs=10\n",
            "Result: A successful full mem-hog run was not recorded\n        Failed to find size to keep isol-01 above 90.00% in [9.6G, 17.1G]\n\nRUN 00 - Result\n---------------\n\nIO Latency Distribution:\n\nREAD ",
            "\nIO BPS: read_final=100M write_final=50.0M read_all=100M write_all=50.0M\n",
            "\nQoS: rpct=99.00 rlat=3759 wpct=99.00 wlat=1382 [min=60.00] [max=60.00]\n",
            "\nvrate: p00=60.00 p01=60.00 p10=60.00 p25=60.00 p50=60.00 p75=60.00 p90=60.00\n       p99=60.00 p100=73.73 pmean=60.05 pstdev=0.75\n\nQoS result: MOF=1.451@16(1.020x) vrate=60.05:0.75 missing=4.12%\n            aMOF=1.451@16(1.020x) isol-01=97.45% lat_imp=0.79%:0.84 work_csv=73.55%\n\n\nSummary\n=======\n\n[00] QoS: iocost=off mem_profile=16\n",
        ] {
            assert!(text.contains(part), "missing:\n{part}\nin:\n{text}");
        }
        assert!(!text.contains("RUN 02"), "{text}");
        // The baseline run has no vrate or QoS result lines.
        let run0 = &text[..text.find("RUN 01\n").unwrap()];
        assert!(!run0.contains("QoS result"), "{run0}");
    }

    /// What cannot be printed is refused naming why.
    #[test]
    fn bad_results_name_the_problem() {
        let mut d = journal_entry();
        d.result = None;
        let e = format(&d, false, 0).unwrap_err();
        // A job that stopped says how far it got and that `run` resumes it.
        assert!(
            e.to_string().contains("job is incomplete")
                && e.to_string().contains("run it again to resume"),
            "{e}"
        );
        let mut d = journal_entry();
        d.record.as_mut().unwrap()["runs"][0] = Value::Null;
        let e = format(&d, false, 0).unwrap_err();
        assert!(e.to_string().contains("missing baseline"), "{e}");
        let mut d = journal_entry();
        d.result.as_mut().unwrap()["runs"]
            .as_array_mut()
            .unwrap()
            .pop();
        let e = format(&d, false, 0).unwrap_err();
        assert!(
            e.to_string()
                .contains("the record has 3 runs and the result 2"),
            "{e}"
        );
        let mut d = journal_entry();
        d.record.as_mut().unwrap()["base_qos"]["rlat"] = json!("x");
        let e = format(&d, false, 0).unwrap_err();
        assert!(
            e.to_string().contains("record.base_qos.rlat: invalid type"),
            "{e}"
        );
        let mut d = journal_entry();
        d.result.as_mut().unwrap()["runs"][1]["stor"]["mem_usage"] = json!(-1);
        let e = format(&d, false, 0).unwrap_err();
        assert!(
            e.to_string()
                .contains("result.runs[1].stor.mem_usage: invalid value"),
            "{e}"
        );
        let mut d = journal_entry();
        d.result.as_mut().unwrap()["runs"][1]["vrate"] = json!({});
        let e = format(&d, true, 0).unwrap_err();
        assert!(
            e.to_string()
                .contains("run 01: the result's vrate has no \"00\""),
            "{e}"
        );
    }
}
