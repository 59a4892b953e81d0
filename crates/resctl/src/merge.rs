//! `merge SOURCE...`: iocost-tune results of several hosts (or runs) as one
//! result file, as upstream's resctl-bench merges them. Sources are
//! grouped by what must match for their points to be comparable: kind
//! (and id with `--by-id`), bench/agent/hashd versions (major.minor;
//! not with `--ignore-versions`), memory profile, storage model and
//! firmware, and the iocost-qos properties they were solved on (less
//! `vrate-intvs`). A source that missed sysreqs is rejected (kept with
//! `--ignore-sysreqs`), as is one whose IO cost model is an outlier
//! (Chauvenet's criterion over the distinct models, with more than three).
//! Each group's points are pooled and solved again with the default rules,
//! under the median model. Without `--multiple`, the group with the most
//! accepted sources wins per kind (and id); the others are listed as
//! dropped. The result file gets a `merge-info` job first (what was
//! merged, printed as `format` prints it), then the merged jobs.

pub use crate::bench::common::MergeFlags;
use crate::bench::iocost_tune::fit::{DataSeries, Fit, chauvenet_keep};
use crate::bench::iocost_tune::{self, TuneJob, TuneRecord, TuneResult};
use crate::bench::knobs::{IoCostModel, JobSysInfo};
use crate::bench::merge_info::{MergeEntry, MergeId, MergeInfo, MergeSrcName};
use crate::journal::{JobData, Journal};
use crate::spec::JobSpec;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A job's kind and id.
type KindId = (String, Option<String>);

/// The kinds that can be merged (upstream's mergeable benches).
const MERGEABLE: &[&str] = &["iocost-tune"];

/// One source job.
struct Src {
    data: JobData,
    sysinfo: JobSysInfo,
    file: String,
    rejected: Option<String>,
}

impl Src {
    fn name(&self) -> MergeSrcName {
        MergeSrcName {
            file: self.file.clone(),
            kind: self.data.spec.kind.clone(),
            id: self.data.spec.id.clone(),
        }
    }
}

/// major.minor of a version string such as `2.2.5 release` or `2.2.5-g1234`.
fn maj_min(ver: &str) -> String {
    let sem = ver.split(' ').next().unwrap_or("");
    let sem = sem.split('-').next().unwrap_or("");
    let mut it = sem.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    format!("{}.{}", it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// Upstream's `format_job_props`: groups joined by `:`, `k=v` (or `k`)
/// joined by `,`.
fn format_props(props: &[BTreeMap<String, String>]) -> String {
    props
        .iter()
        .map(|g| {
            g.iter()
                .map(|(k, v)| {
                    if v.is_empty() {
                        k.clone()
                    } else {
                        format!("{k}={v}")
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(":")
}

fn merge_id(s: &Src, f: &MergeFlags) -> MergeId {
    let rep = s.sysinfo.sysreqs_report.clone().unwrap_or_default();
    let classifier = s
        .data
        .record
        .as_ref()
        .and_then(|r| serde_json::from_value::<TuneRecord>(r.clone()).ok())
        .map(|mut r| {
            if let Some(g) = r.qos_props.first_mut() {
                g.remove("vrate-intvs");
            }
            format_props(&r.qos_props)
        });
    MergeId {
        kind: s.data.spec.kind.clone(),
        id: if f.by_id {
            s.data.spec.id.clone()
        } else {
            None
        },
        versions: (!f.ignore_versions).then(|| {
            (
                maj_min(&s.sysinfo.bench_version),
                maj_min(&rep.agent_version),
                maj_min(&rep.hashd_version),
            )
        }),
        mem_profile: s.sysinfo.mem.profile,
        storage_model: Some(rep.scr_dev_model.clone()),
        // 2.1 grouped by the storage model only (2.2 added the firmware).
        storage_fwver: (maj_min(&s.sysinfo.bench_version) != "2.1")
            .then(|| rep.scr_dev_fwrev.clone()),
        classifier,
    }
}

fn model_values(m: &IoCostModel) -> [f64; 6] {
    [
        m.rbps,
        m.rseqiops,
        m.rrandiops,
        m.wbps,
        m.wseqiops,
        m.wrandiops,
    ]
    .map(|v| v as f64)
}

/// The median of each parameter over the distinct models that are not
/// outliers, and which models are outliers: with more than three, a model
/// with any parameter rejected by Chauvenet's criterion (upper tail, as
/// upstream) is one.
fn merge_models(models: &BTreeSet<IoCostModel>) -> (IoCostModel, BTreeSet<IoCostModel>) {
    let list: Vec<[f64; 6]> = models.iter().map(model_values).collect();
    let n = list.len();
    let mut outliers = BTreeSet::new();
    if n > 3 {
        for p in 0..6 {
            let vals: Vec<f64> = list.iter().map(|m| m[p]).collect();
            if let Some(keep) = chauvenet_keep(&vals) {
                for (k, keep) in models.iter().zip(keep) {
                    if !keep {
                        outliers.insert(k.clone());
                    }
                }
            }
        }
    }
    let kept: Vec<[f64; 6]> = models
        .iter()
        .zip(&list)
        .filter(|(k, _)| !outliers.contains(*k))
        .map(|(_, m)| *m)
        .collect();
    let median = |p: usize| {
        let mut v: Vec<f64> = kept.iter().map(|m| m[p]).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0).round() as u64
    };
    (
        IoCostModel {
            rbps: median(0),
            rseqiops: median(1),
            rrandiops: median(2),
            wbps: median(3),
            wseqiops: median(4),
            wrandiops: median(5),
        },
        outliers,
    )
}

/// The iocost model a source ran under (its sysinfo's).
fn src_model(s: &Src) -> IoCostModel {
    s.sysinfo
        .iocost
        .as_ref()
        .map(|r| r.model.knobs.clone())
        .unwrap_or_default()
}

/// Merges one group: the median model, outlier sources rejected, the
/// accepted sources' points pooled and solved with the default rules.
fn merge_group(srcs: &mut [Src], fit: Fit) -> Result<JobData, String> {
    let models: BTreeSet<IoCostModel> = srcs.iter().map(src_model).collect();
    let (median, outliers) = merge_models(&models);
    for s in srcs.iter_mut().filter(|s| s.rejected.is_none()) {
        if outliers.contains(&src_model(s)) {
            s.rejected = Some("model is an outlier".into());
        }
    }
    let mut first: Option<(TuneRecord, TuneResult, usize)> = None;
    let mut data: BTreeMap<iocost_tune::DataSel, DataSeries> = BTreeMap::new();
    // Sources all written by upstream 2.1 are merged as 2.1 merged them.
    let mut all_v21 = true;
    for (i, s) in srcs
        .iter_mut()
        .enumerate()
        .filter(|(_, s)| s.rejected.is_none())
    {
        let parsed = (|| -> Result<(TuneRecord, TuneResult), String> {
            let rec = serde_json::from_value(s.data.record.clone().unwrap_or_default())
                .map_err(|e| format!("record: {e}"))?;
            // The sources' numbers as upstream reads them (serde_json
            // without exact float parsing): its merged results are solved
            // on those.
            let mut raw = s.data.result.clone().unwrap_or_default();
            crate::journal::upstream_floats(&mut raw);
            let res: TuneResult =
                serde_json::from_value(raw).map_err(|e| format!("result: {e}"))?;
            Ok((rec, res))
        })();
        let (rec, res) = match parsed {
            Ok(v) => v,
            Err(e) => {
                s.rejected = Some(format!("failed to parse ({e})"));
                continue;
            }
        };
        if let Some((_, f, _)) = &first
            && (f.mem_profile, &f.isol_pct, f.isol_thr)
                != (res.mem_profile, &res.isol_pct, res.isol_thr)
        {
            s.rejected = Some(format!(
                "memory profile {} and isol-{} >= {} differ from the first source's ({}, isol-{} >= {})",
                res.mem_profile, res.isol_pct, res.isol_thr, f.mem_profile, f.isol_pct, f.isol_thr
            ));
            continue;
        }
        all_v21 &= res.is_v21();
        for (sel, mut ds) in res.data.clone() {
            let dst = data.entry(sel).or_default();
            dst.data.append(&mut ds.data);
            dst.outliers.append(&mut ds.outliers);
        }
        if first.is_none() {
            first = Some((rec, res, i));
        }
    }
    let Some((rec, res, fi)) = first else {
        let why: Vec<String> = srcs
            .iter()
            .map(|s| format!("{}: {}", s.file, s.rejected.as_deref().unwrap_or("-")))
            .collect();
        return Err(format!(
            "no valid result to merge ({}; --ignore-sysreqs accepts results that missed sysreqs)",
            why.join("; ")
        ));
    };
    let spec = JobSpec {
        kind: "iocost-tune".into(),
        id: None,
        passive: None,
        props: vec![BTreeMap::new()],
    };
    for s in data.values_mut() {
        s.v21 = all_v21;
    }
    let mut job = TuneJob::parse(&spec)?;
    job.fit = fit;
    let rec = TuneRecord { fit, ..rec };
    let mut merged = TuneResult {
        data,
        solutions: BTreeMap::new(),
        ..res
    };
    for n in iocost_tune::solve(&job, &mut merged)? {
        eprintln!("merge: iocost-tune: {n}");
    }
    merged.remarks = iocost_tune::remarks(&job, &merged);
    let accepted = srcs.iter().filter(|s| s.rejected.is_none());
    let period = accepted.fold((u64::MAX, 0), |(a, b), s| {
        (a.min(s.data.period.0), b.max(s.data.period.1))
    });
    let period = if period.0 == u64::MAX { (0, 0) } else { period };
    let mut sysinfo = srcs[fi].data.sysinfo.clone();
    if let Some(m) = sysinfo.pointer_mut("/iocost/model") {
        let mut model = serde_json::to_value(&median).map_err(|e| e.to_string())?;
        // Keep the report's other fields (ctrl, model kind).
        if let (Some(dst), Some(src)) = (m.as_object_mut(), model.as_object_mut()) {
            for (k, v) in std::mem::take(src) {
                dst.insert(k, v);
            }
        }
    }
    Ok(JobData {
        spec,
        period,
        sysinfo,
        record: Some(serde_json::to_value(&rec).map_err(|e| e.to_string())?),
        result: Some(serde_json::to_value(&merged).map_err(|e| e.to_string())?),
    })
}

fn entry(mid: &MergeId, srcs: &[Src]) -> MergeEntry {
    MergeEntry {
        mid: mid.clone(),
        srcs: srcs
            .iter()
            .filter(|s| s.rejected.is_none())
            .map(Src::name)
            .collect(),
        rejects: srcs
            .iter()
            .filter_map(|s| s.rejected.clone().map(|r| (s.name(), r)))
            .collect(),
        dropped: Vec::new(),
    }
}

/// Merges `sources` into `result` (written atomically); returns the
/// merge-info job's text.
pub fn merge(result: &Path, sources: &[PathBuf], f: &MergeFlags) -> Result<String, crate::Error> {
    if sources.is_empty() {
        return Err(crate::Error::Input(
            "merge: no source file: expected merge SOURCEFILE...".into(),
        ));
    }
    let mut groups: BTreeMap<MergeId, Vec<Src>> = BTreeMap::new();
    for path in sources {
        if !path.exists() {
            return Err(crate::Error::Input(format!(
                "merge: source file {} does not exist",
                path.display()
            )));
        }
        let journal =
            Journal::open(path).map_err(|e| crate::Error::Input(format!("merge: {e}")))?;
        for d in journal.jobs {
            if !MERGEABLE.contains(&d.spec.kind.as_str()) {
                continue;
            }
            let sysinfo = JobSysInfo::from_json(&d.sysinfo).map_err(|e| {
                crate::Error::Input(format!("merge: {}: {}: {e}", path.display(), d.spec))
            })?;
            let mut rejected = None;
            if !d.is_completed() {
                rejected = Some("incomplete".to_string());
            } else if !f.ignore_sysreqs && !sysinfo.sysreqs_missed.is_empty() {
                rejected = Some(format!("{} missed sysreqs", sysinfo.sysreqs_missed.len()));
            }
            let s = Src {
                data: d,
                sysinfo,
                file: path.display().to_string(),
                rejected,
            };
            groups.entry(merge_id(&s, f)).or_default().push(s);
        }
    }
    if groups.is_empty() {
        return Err(crate::Error::Input(format!(
            "merge: no mergeable job ({}) in the source files",
            MERGEABLE.join(", ")
        )));
    }
    let mut merged: BTreeMap<MergeId, JobData> = BTreeMap::new();
    for (mid, srcs) in groups.iter_mut() {
        let d = merge_group(srcs, f.fit)
            .map_err(|e| {
                format!(
                    "merge: {}{}: {e}",
                    mid.kind,
                    mid.id
                        .as_deref()
                        .map(|i| format!("[{i}]"))
                        .unwrap_or_default()
                )
            })
            .map_err(crate::Error::Input)?;
        merged.insert(mid.clone(), d);
    }
    // Without --multiple, the group with the most accepted sources wins
    // per (kind, id), the first such group on a tie; the others are
    // listed as dropped under it.
    let mut lost: BTreeMap<MergeId, Vec<MergeId>> = BTreeMap::new();
    if !f.multiple {
        let mut by_key: BTreeMap<KindId, Vec<(usize, MergeId)>> = BTreeMap::new();
        for (mid, srcs) in &groups {
            let n = srcs.iter().filter(|s| s.rejected.is_none()).count();
            by_key
                .entry((mid.kind.clone(), mid.id.clone()))
                .or_default()
                .push((n, mid.clone()));
        }
        for cands in by_key.into_values() {
            let best = cands
                .iter()
                .enumerate()
                .max_by(|(i, a), (j, b)| a.0.cmp(&b.0).then(j.cmp(i)))
                .map(|(i, _)| i)
                .unwrap_or(0);
            let winner = cands[best].1.clone();
            for (i, (_, mid)) in cands.into_iter().enumerate() {
                if i != best {
                    merged.remove(&mid);
                    lost.entry(winner.clone()).or_default().push(mid);
                }
            }
        }
    }
    let mut info = MergeInfo::default();
    let mut jobs = Vec::new();
    for (mid, d) in merged {
        let mut e = entry(&mid, &groups[&mid]);
        for l in lost.get(&mid).into_iter().flatten() {
            e.dropped.push(entry(l, &groups[l]));
        }
        info.merges.push(e);
        jobs.push(d);
    }
    let now = crate::bench::common::now_secs();
    let info_job = JobData {
        spec: JobSpec {
            kind: "merge-info".into(),
            id: None,
            passive: None,
            props: vec![BTreeMap::new()],
        },
        period: (now, now),
        // Upstream's default sysinfo (its loader needs one).
        sysinfo: serde_json::to_value(JobSysInfo {
            bench_version: env!("CARGO_PKG_VERSION").to_string(),
            iocost: Some(Default::default()),
            swappiness: 60,
            ..JobSysInfo::default()
        })
        .map_err(|e| crate::Error::Input(e.to_string()))?,
        record: Some(serde_json::to_value(&info).map_err(|e| crate::Error::Input(e.to_string()))?),
        result: Some(serde_json::Value::Bool(true)),
    };
    jobs.insert(0, info_job);
    // As upstream, the result file holds the merge alone.
    let mut journal =
        Journal::open(result).map_err(|e| crate::Error::Input(format!("merge: {e}")))?;
    journal.jobs = jobs;
    journal
        .save()
        .map_err(|e| crate::Error::Input(format!("merge: {e}")))?;
    let mut out = String::new();
    crate::bench::job::format_job(&mut out, &journal.jobs[0], true);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_props_print_as_upstream() {
        assert_eq!(maj_min("2.2.5 release"), "2.2");
        assert_eq!(maj_min("1.10.3-g0123abc"), "1.10");
        assert_eq!(maj_min(""), "0.0");
        let g = |v: &[(&str, &str)]| -> BTreeMap<String, String> {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            format_props(&[
                g(&[("dither", ""), ("vrate-max", "125")]),
                g(&[("vrate", "50")])
            ]),
            "dither,vrate-max=125:vrate=50"
        );
    }

    /// Four distinct models, one far off in rbps: it is an outlier and the
    /// median of the other three is taken.
    #[test]
    fn an_outlier_model_is_rejected_and_the_median_taken() {
        let m = |rbps: u64, rs: u64, rr: u64, wbps: u64, ws: u64, wr: u64| IoCostModel {
            rbps: rbps << 20,
            rseqiops: rs,
            rrandiops: rr,
            wbps: wbps << 20,
            wseqiops: ws,
            wrandiops: wr,
        };
        let models: BTreeSet<IoCostModel> = [
            m(125, 280, 280, 125, 280, 280),
            m(122, 270, 269, 126, 284, 282),
            m(127, 288, 289, 122, 270, 260),
            m(160, 288, 289, 122, 300, 260),
        ]
        .into_iter()
        .collect();
        let (median, outliers) = merge_models(&models);
        assert_eq!(outliers.len(), 1);
        assert_eq!(outliers.iter().next().unwrap().rbps, 160 << 20);
        assert_eq!(median, m(125, 280, 280, 125, 280, 280));
        // Three or fewer: none is rejected.
        let three: BTreeSet<IoCostModel> = models.into_iter().take(3).collect();
        assert!(merge_models(&three).1.is_empty());
    }
}
