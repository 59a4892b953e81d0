//! iocost-tune's solving: from an iocost-qos result, each figure as a
//! function of vrate ([`DataSel`] → [`DataSeries`], fitted by
//! [`crate::bench::iocost_tune::fit`]), then the QoS solutions its rules ask for
//! ([`QosTarget`]): the vrate at which MOF stops rising, where aMOF is
//! largest, where aMOF-delta is smallest, or a quarter of the p99 read
//! latency's spread, each as an io.cost model scaled to that vrate and a
//! QoS. The definitions are upstream's (resctl-bench's iocost-tune); the
//! serialized shapes are too, so that upstream's iocost-tune results read.

pub mod bench;
pub mod fit;
pub mod fit21;
pub mod graph;
pub mod textplot;

use crate::bench::iocost_qos::format::{
    QosRecord, QosRecordRun, QosResult, QosResultRun, final_probe_of,
};
use crate::bench::iocost_qos::{closest, unknown_key};
use crate::bench::iocost_tune::fit::{DataLines, DataPoint, DataSeries, Fit, Shape};
use crate::bench::knobs::{IoCostModel, IoCostQos, round2_as_printed};
use crate::bench::protection::study::MemHogResult;
use crate::bench::storage::reports_missing;
use crate::fmt::{custom_underline, format_duration, format_pct, parse_frac};
use crate::spec::JobSpec;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Latency percentiles of the `rlat-L-T` selectors.
use crate::bench::protection::study::IOLAT_LAT_PCTS as LAT_PCTS;
/// Isolation percentiles a selector may name (the hog result's keys).
use crate::bench::protection::study::PCT_KEYS as ISOL_PCTS;
/// Time percentiles of the `rlat-L-T` selectors (with `mean` and `stdev`).
pub const TIME_PCTS: &[&str] = &[
    "00", "01", "05", "10", "25", "50", "75", "90", "95", "99", "99.9", "100", "mean", "stdev",
];
/// The plain selectors.
pub const PLAIN_SELS: &[&str] = &[
    "mof",
    "amof",
    "amof-delta",
    "isol",
    "isol-mean",
    "lat-imp",
    "work-csv",
    "missing",
];

/// One figure of the iocost-qos runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataSel {
    /// Memory offloading factor (storage).
    Mof,
    /// Adjusted MOF (the protected footprint).
    Amof,
    /// MOF - aMOF.
    AmofDelta,
    /// The isolation percentile protection judged.
    Isol,
    /// Another isolation percentile.
    IsolPct(String),
    IsolMean,
    LatImp,
    WorkCsv,
    /// Share of missing reports.
    Missing,
    /// Read latency: latency percentile, time percentile.
    RLat(String, String),
    WLat(String, String),
}

impl DataSel {
    /// Parses a selector: `mof`, `amof`, `amof-delta`, `isol`, `isol-PCT`
    /// (or `isol-max`), `isol-mean`, `lat-imp`, `work-csv`, `missing`,
    /// `rlat-LAT[-TIME]` or `wlat-LAT[-TIME]` (LAT or TIME `max` is 100;
    /// TIME defaults to `mean`). Case does not matter.
    pub fn parse(sel: &str) -> Result<DataSel, crate::Error> {
        let s = sel.to_lowercase();
        match s.as_str() {
            "mof" => return Ok(DataSel::Mof),
            "amof" => return Ok(DataSel::Amof),
            "amof-delta" => return Ok(DataSel::AmofDelta),
            "isol" => return Ok(DataSel::Isol),
            "isol-mean" => return Ok(DataSel::IsolMean),
            "lat-imp" => return Ok(DataSel::LatImp),
            "work-csv" => return Ok(DataSel::WorkCsv),
            "missing" => return Ok(DataSel::Missing),
            _ => {}
        }
        if let Some(p) = s.strip_prefix("isol-") {
            let p = if p == "max" { "100" } else { p };
            if ISOL_PCTS.contains(&p) {
                return Ok(DataSel::IsolPct(p.to_string()));
            }
            return Err(crate::Error::Input(format!(
                "isolation percentile {p:?}: expected max or one of {}",
                ISOL_PCTS.join(" ")
            )));
        }
        let (read, rest) = match (s.strip_prefix("rlat-"), s.strip_prefix("wlat-")) {
            (Some(r), _) => (true, r),
            (_, Some(r)) => (false, r),
            _ => {
                return Err(crate::Error::Input(format!(
                    "unknown data selector {sel:?}: expected {}, isol-PCT, rlat-LAT[-TIME] or wlat-LAT[-TIME]",
                    PLAIN_SELS.join(", ")
                )));
            }
        };
        let mut parts = rest.split('-');
        let lat = parts.next().unwrap_or("");
        let time = parts.next().unwrap_or("mean");
        if parts.next().is_some() {
            return Err(crate::Error::Input(format!(
                "data selector {sel:?}: expected rlat-LAT[-TIME]"
            )));
        }
        let lat = if lat == "max" { "100" } else { lat };
        if !LAT_PCTS.contains(&lat) {
            return Err(crate::Error::Input(format!(
                "latency percentile {lat:?} in {sel:?}: expected max or one of {}",
                LAT_PCTS.join(" ")
            )));
        }
        let time = if time == "max" { "100" } else { time };
        if !TIME_PCTS.contains(&time) {
            return Err(crate::Error::Input(format!(
                "time percentile {time:?} in {sel:?}: expected max or one of {}",
                TIME_PCTS.join(" ")
            )));
        }
        let (lat, time) = (lat.to_string(), time.to_string());
        Ok(if read {
            DataSel::RLat(lat, time)
        } else {
            DataSel::WLat(lat, time)
        })
    }

    /// How the figure is fitted: its shape, whether outliers are rejected
    /// (latencies), and whether points past where isolation fails are set
    /// aside (aMOF and aMOF-delta).
    fn fit_opts(&self) -> (Shape, bool, bool) {
        match self {
            DataSel::Mof | DataSel::LatImp | DataSel::Missing => (Shape::Inc, false, false),
            DataSel::Amof => (Shape::SinglePeak, false, true),
            DataSel::AmofDelta => (Shape::Inc, false, true),
            DataSel::Isol | DataSel::IsolPct(_) | DataSel::IsolMean => (Shape::Dec, false, false),
            DataSel::WorkCsv => (Shape::Any, false, false),
            DataSel::RLat(..) | DataSel::WLat(..) => (Shape::Inc, true, false),
        }
    }

    /// 2.1's `fit_lines_opts`: as 2.2's, but aMOF rises (2.2 fits it
    /// with one peak).
    fn fit_opts21(&self) -> (Shape, bool, bool) {
        match self {
            DataSel::Amof => (Shape::Inc, false, true),
            _ => self.fit_opts(),
        }
    }

    /// Sort position: the kind, then for percentiles (time, latency).
    fn pos(&self) -> (u32, Option<(&str, &str)>) {
        match self {
            DataSel::Mof => (0, None),
            // Before aMOF, which is filtered by it.
            DataSel::Isol => (1, Some(("NONE", "NONE"))),
            DataSel::Amof => (2, None),
            DataSel::AmofDelta => (3, None),
            DataSel::IsolPct(p) => (4, Some((p, "NONE"))),
            DataSel::IsolMean => (5, None),
            DataSel::LatImp => (6, None),
            DataSel::WorkCsv => (7, None),
            DataSel::Missing => (8, None),
            DataSel::RLat(l, t) => (9, Some((l, t))),
            DataSel::WLat(l, t) => (10, Some((l, t))),
        }
    }

    /// The figure of one iocost-qos run; `None` when the run has none (no
    /// protected size was found). A key the result lacks is an error.
    pub fn select(
        &self,
        i: usize,
        resr: &QosResultRun,
        hog: Option<&MemHogResult>,
        isol_pct: &str,
    ) -> Result<Option<f64>, crate::Error> {
        let key = |m: &BTreeMap<String, f64>, k: &str, what: &str| {
            m.get(k)
                .copied()
                .ok_or_else(|| format!("run {i:02}: the result's {what} has no {k:?}"))
        };
        let lat = |dir: usize, l: &str, t: &str| {
            resr.stor.iolat[dir]
                .get(l)
                .and_then(|m| m.get(t))
                .copied()
                .ok_or_else(|| {
                    format!(
                        "run {i:02}: the storage result's {} latency has no [{l:?}][{t:?}]",
                        if dir == 0 { "read" } else { "write" }
                    )
                })
        };
        Ok(match self {
            DataSel::Mof => Some(resr.stor.mem_offload_factor),
            DataSel::Amof => resr.adjusted_mem_offload_factor,
            DataSel::AmofDelta => resr.adjusted_mem_offload_delta,
            DataSel::Isol => hog
                .map(|h| key(&h.isol, isol_pct, "isol"))
                .transpose()
                .map_err(crate::Error::Input)?,
            DataSel::IsolPct(p) => hog
                .map(|h| key(&h.isol, p, "isol"))
                .transpose()
                .map_err(crate::Error::Input)?,
            DataSel::IsolMean => Some(match hog {
                Some(h) => key(&h.isol, "mean", "isol").map_err(crate::Error::Input)?,
                None => 0.0,
            }),
            DataSel::LatImp => hog
                .map(|h| key(&h.lat_imp, "mean", "lat_imp"))
                .transpose()
                .map_err(crate::Error::Input)?,
            DataSel::WorkCsv => hog.map(|h| h.work_csv),
            DataSel::Missing => Some(reports_missing(resr.nr_reports)),
            DataSel::RLat(l, t) => Some(lat(0, l, t).map_err(crate::Error::Input)?),
            DataSel::WLat(l, t) => Some(lat(1, l, t).map_err(crate::Error::Input)?),
        })
    }
}

/// Percentile keys in order, `mean` first.
fn cmp_pct(a: &str, b: &str) -> Ordering {
    match (a, b) {
        _ if a == b => Ordering::Equal,
        ("mean", _) => Ordering::Less,
        (_, "mean") => Ordering::Greater,
        _ => {
            let p = |s: &str| s.parse::<f64>().unwrap_or(f64::MAX);
            p(a).total_cmp(&p(b))
        }
    }
}

impl Ord for DataSel {
    fn cmp(&self, other: &Self) -> Ordering {
        let ((pa, ka), (pb, kb)) = (self.pos(), other.pos());
        match (pa == pb, ka, kb) {
            (true, Some((la, ta)), Some((lb, tb))) => cmp_pct(ta, tb).then(cmp_pct(la, lb)),
            _ => pa.cmp(&pb),
        }
    }
}

impl PartialOrd for DataSel {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for DataSel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataSel::Mof => write!(f, "MOF"),
            DataSel::Amof => write!(f, "aMOF"),
            DataSel::AmofDelta => write!(f, "aMOF-delta"),
            DataSel::Isol => write!(f, "isol"),
            DataSel::IsolPct(p) => write!(f, "isol-{p}"),
            DataSel::IsolMean => write!(f, "isol-mean"),
            DataSel::LatImp => write!(f, "lat-imp"),
            DataSel::WorkCsv => write!(f, "work-csv"),
            DataSel::Missing => write!(f, "missing"),
            DataSel::RLat(l, t) => write!(f, "rlat-{l}-{t}"),
            DataSel::WLat(l, t) => write!(f, "wlat-{l}-{t}"),
        }
    }
}

// A selector is a map key in upstream's result: written as its text.
impl Serialize for DataSel {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for DataSel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        DataSel::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// What a QoS rule solves for. The variant names are upstream's, as its
/// results store them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum QosTarget {
    /// vrate between the two bounds; the latency targets at the upper one
    /// for the read and write percentiles given.
    VrateRange((f64, f64), (Option<String>, Option<String>)),
    /// The lowest vrate at which MOF is highest.
    #[serde(rename = "MOFMax")]
    MofMax,
    /// The lowest vrate at which aMOF is highest.
    #[serde(rename = "AMOFMax")]
    AmofMax,
    /// The highest vrate with an aMOF.
    #[serde(rename = "AMOFMaxVrate")]
    AmofMaxVrate,
    /// The highest vrate at which aMOF-delta is lowest.
    #[serde(rename = "AMOFDeltaMin")]
    AmofDeltaMin,
    /// The highest vrate at which aMOF is highest, between the isolation
    /// and bandwidth solutions.
    IsolatedBandwidth,
    /// A latency percentile's mean between two fractions of its spread.
    LatRange(DataSel, (f64, f64)),
}

impl Default for QosTarget {
    fn default() -> QosTarget {
        QosTarget::VrateRange((75.0, 100.0), (Some("99".into()), Some("99".into())))
    }
}

impl std::fmt::Display for QosTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QosTarget::VrateRange((lo, hi), (r, w)) => {
                write!(f, "vrate={lo}-{hi}")?;
                if let Some(r) = r {
                    write!(f, ", rpct={r}")?;
                }
                if let Some(w) = w {
                    write!(f, ", wpct={w}")?;
                }
                Ok(())
            }
            QosTarget::MofMax => write!(f, "MOF=max"),
            QosTarget::AmofMax => write!(f, "aMOF=max"),
            QosTarget::AmofMaxVrate => write!(f, "aMOF=max-vrate"),
            QosTarget::AmofDeltaMin => write!(f, "aMOF-delta=min"),
            QosTarget::IsolatedBandwidth => {
                write!(f, "(aMOF=right-max).clamp(isolation, bandwidth)")
            }
            QosTarget::LatRange(sel, (lo, hi)) => match sel {
                DataSel::RLat(l, _) => write!(f, "rlat-{l}={lo}-{hi}"),
                DataSel::WLat(l, _) => write!(f, "wlat-{l}={lo}-{hi}"),
                other => write!(f, "{other}={lo}-{hi}"),
            },
        }
    }
}

fn range_of(
    v: &str,
    what: &str,
    parse: impl Fn(&str) -> Result<f64, String>,
) -> Result<(f64, f64), String> {
    let (a, b) = v
        .split_once('-')
        .ok_or_else(|| format!("{what} {v:?}: expected LOW-HIGH"))?;
    Ok((parse(a)?, parse(b)?))
}

impl QosTarget {
    /// A rule's target from its properties (`name` taken out): none (the
    /// default vrate range 75-100 at p99), `vrate=LO-HI[,rpct=P][,wpct=P]`,
    /// `mof=max`, `amof=max|max-vrate`, `amof-delta=min`,
    /// `isolated-bandwidth`, or `rlat-P=q1..q4|LO-HI` (`wlat-P` alike).
    pub fn parse(mut props: BTreeMap<String, String>) -> Result<QosTarget, crate::Error> {
        if props.is_empty() {
            return Ok(QosTarget::default());
        }
        if let Some(v) = props.remove("vrate") {
            let num = |s: &str| {
                s.trim()
                    .parse::<f64>()
                    .map_err(|_| format!("vrate range {v:?}: {s:?} is not a number"))
            };
            let (lo, hi) = range_of(&v, "vrate range", num).map_err(crate::Error::Input)?;
            if lo <= 0.0 || lo > hi {
                return Err(crate::Error::Input(format!(
                    "vrate range {v:?}: expected 0 < LOW <= HIGH"
                )));
            }
            // The default target's percentiles, p99 read and write.
            let mut pcts = (Some("99".to_string()), Some("99".to_string()));
            for (k, p) in props {
                let p = (p.parse::<f64>().ok() != Some(0.0)).then_some(p);
                match k.as_str() {
                    "rpct" => pcts.0 = p,
                    "wpct" => pcts.1 = p,
                    k => {
                        let hint = closest(k, &["rpct", "wpct"])
                            .map(|s| format!("; did you mean \"{s}\"?"))
                            .unwrap_or_default();
                        return Err(crate::Error::Input(format!(
                            "vrate target option {k:?}: expected rpct or wpct{hint}"
                        )));
                    }
                }
            }
            return Ok(QosTarget::VrateRange((lo, hi), pcts));
        }
        if props.len() != 1 {
            return Err(crate::Error::Input(format!(
                "{} targets given ({}): expected exactly one per rule",
                props.len(),
                props.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        let Some((k, v)) = props.into_iter().next() else {
            return Ok(QosTarget::default());
        };
        let (k, v) = (k.to_lowercase(), v.to_lowercase());
        if k == "isolated-bandwidth" {
            return Ok(QosTarget::IsolatedBandwidth);
        }
        let sel = DataSel::parse(&k)?;
        let bad = |want: &str| Err(format!("{k}={v:?}: expected {want}"));
        match &sel {
            DataSel::Mof => match v.as_str() {
                "max" => Ok(QosTarget::MofMax),
                _ => bad("max").map_err(crate::Error::Input),
            },
            DataSel::Amof => match v.as_str() {
                "max" => Ok(QosTarget::AmofMax),
                "max-vrate" => Ok(QosTarget::AmofMaxVrate),
                _ => bad("max or max-vrate").map_err(crate::Error::Input),
            },
            DataSel::AmofDelta => match v.as_str() {
                "min" => Ok(QosTarget::AmofDeltaMin),
                _ => bad("min").map_err(crate::Error::Input),
            },
            DataSel::RLat(_, t) | DataSel::WLat(_, t) => {
                if t != "mean" {
                    return Err(crate::Error::Input(format!(
                        "{k}: a latency target takes the mean over time (rlat-P, not rlat-P-{t})"
                    )));
                }
                let r = match v.as_str() {
                    "q1" => (0.75, 1.0),
                    "q2" => (0.5, 0.75),
                    "q3" => (0.25, 0.5),
                    "q4" => (0.0, 0.25),
                    _ => {
                        let r = range_of(&v, &k, |s| parse_frac(s).map_err(String::from))
                            .map_err(crate::Error::Input)?;
                        if r.0 < 0.0 || r.0 > r.1 || r.1 > 1.0 {
                            return bad("q1..q4 or LOW-HIGH fractions with 0 <= LOW <= HIGH <= 1")
                                .map_err(crate::Error::Input);
                        }
                        r
                    }
                };
                Ok(QosTarget::LatRange(sel.clone(), r))
            }
            _ => Err(crate::Error::Input(format!(
                "{k}: not a rule target: expected mof, amof, amof-delta, isolated-bandwidth, rlat-P, wlat-P or vrate"
            ))),
        }
    }

    /// The figures the target needs.
    pub fn sels(&self) -> Vec<DataSel> {
        let lat = |r: bool, p: &str| {
            if r {
                DataSel::RLat(p.into(), "mean".into())
            } else {
                DataSel::WLat(p.into(), "mean".into())
            }
        };
        match self {
            QosTarget::VrateRange(_, (r, w)) => r
                .iter()
                .map(|p| lat(true, p))
                .chain(w.iter().map(|p| lat(false, p)))
                .collect(),
            QosTarget::MofMax => vec![DataSel::Mof, DataSel::LatImp],
            QosTarget::AmofMax => vec![DataSel::Amof, DataSel::LatImp],
            QosTarget::AmofMaxVrate => vec![DataSel::Amof],
            QosTarget::AmofDeltaMin => vec![DataSel::AmofDelta],
            QosTarget::IsolatedBandwidth => {
                vec![DataSel::LatImp, DataSel::Amof, DataSel::AmofDelta]
            }
            QosTarget::LatRange(sel, _) => vec![sel.clone()],
        }
    }
}

/// The x of point `idx`, moved by `margin` (a fraction of x) toward the
/// flat side when one side of it is flat and the other a slope, so that a
/// solution does not sit on the edge of a steep slope.
fn x_with_margin(dl: &DataLines, idx: usize, margin: f64) -> f64 {
    let p = &dl.points;
    let (x, y) = (p[idx].x, p[idx].y);
    if margin == 0.0 || idx == 0 || idx + 1 >= p.len() {
        return x;
    }
    if p[idx - 1].y != y && p[idx + 1].y == y {
        (x * (1.0 + margin)).min(dl.range.1)
    } else if p[idx - 1].y == y && p[idx + 1].y != y {
        (x * (1.0 - margin)).max(dl.range.0)
    } else {
        x
    }
}

/// Where on `ds`'s lines, within `range`, the value is lowest or highest:
/// the first or last such point. A flat line gives `flat` (the range's
/// upper end unless told otherwise).
fn find(
    ds: &DataSeries,
    range: (f64, f64),
    margin: f64,
    highest: bool,
    last: bool,
    flat: Option<f64>,
) -> Option<f64> {
    let dl = ds.lines.clamped(range).ok()??;
    let (min, max) = dl.min_max();
    if min == max {
        return Some(clamp(flat.unwrap_or(dl.range.1), dl.range));
    }
    let want = if highest { max } else { min };
    let idx = if last {
        dl.points.iter().rposition(|p| p.y == want)?
    } else {
        dl.points.iter().position(|p| p.y == want)?
    };
    Some(x_with_margin(&dl, idx, margin))
}

/// The lowest vrate with the highest value (a flat line: `flat`, or the
/// lower end).
fn min_vrate_at_max(ds: &DataSeries, r: (f64, f64), m: f64, flat: Option<f64>) -> Option<f64> {
    let dl = ds.lines.clamped(r).ok()??;
    find(ds, r, m, true, false, Some(flat.unwrap_or(dl.range.0)))
}

/// The highest vrate with the lowest value.
fn max_vrate_at_min(ds: &DataSeries, r: (f64, f64), m: f64) -> Option<f64> {
    find(ds, r, m, false, true, None)
}

/// The lowest vrate with the lowest value.
fn min_vrate_at_min(ds: &DataSeries, r: (f64, f64), m: f64) -> Option<f64> {
    find(ds, r, m, false, false, None)
}

/// The highest vrate with the highest value.
fn max_vrate_at_max(ds: &DataSeries, r: (f64, f64), m: f64) -> Option<f64> {
    find(ds, r, m, true, true, None)
}

/// `v` held within `(lo, hi)`; unlike `f64::clamp` it does not panic on a
/// reversed range or NaN (ranges can come from a result file).
pub fn clamp(v: f64, (lo, hi): (f64, f64)) -> f64 {
    v.max(lo).min(hi)
}

/// Microseconds, rounded, of a latency in seconds.
fn usecs(secs: f64) -> u64 {
    (secs * 1_000_000.0).round() as u64
}

impl QosTarget {
    /// The QoS and the vrate this target asks for on `data`, within the
    /// vrate range `scale` (percent); `None` when the data has no answer.
    /// A figure the target needs but `data` lacks is an error.
    pub fn solve(
        &self,
        data: &BTreeMap<DataSel, DataSeries>,
        scale: (f64, f64),
    ) -> Result<Option<(IoCostQos, f64)>, crate::Error> {
        let ds = |sel: &DataSel| {
            data.get(sel)
                .ok_or_else(|| crate::Error::Input(format!("the data series {sel} is missing")))
        };
        // Near a steep, noisy MOF slope, a solution is moved toward the
        // flat side in proportion to the slope times MOF's relative error
        // (x 800, at most 10%), as upstream.
        let mof = ds(&DataSel::Mof)?;
        let margin = match (
            max_vrate_at_min(mof, mof.lines.range, 0.0),
            min_vrate_at_max(mof, mof.lines.range, 0.0, None),
        ) {
            (Some(a), Some(b)) if a != b => {
                let (ya, yb) = (mof.lines.eval(a), mof.lines.eval(b));
                ((yb - ya) / (b - a) * (mof.error / yb) * 800.0).min(0.1)
            }
            _ => 0.0,
        };
        let r99 = &ds(&DataSel::RLat("99".into(), "mean".into()))?.lines;
        let w99 = &ds(&DataSel::WLat("99".into(), "mean".into()))?.lines;
        // A fixed vrate: no percentiles steer it, but the latencies set
        // iocost's period.
        let fixed = |v: f64| {
            (
                IoCostQos {
                    rpct: 0.0,
                    rlat: usecs(r99.eval(v)),
                    wpct: 0.0,
                    wlat: usecs(w99.eval(v)),
                    min: v,
                    max: v,
                },
                v,
            )
        };
        let clamped_end = |sel: &DataSel| -> Result<Option<f64>, crate::Error> {
            let clamped = ds(sel)?.lines.clamped(scale)?;
            Ok(clamped.map(|c| c.range.1))
        };
        Ok(match self {
            QosTarget::VrateRange((lo, hi), (rp, wp)) => {
                let at = |p: &Option<String>, read: bool| -> Result<(f64, u64), crate::Error> {
                    let Some(p) = p else { return Ok((0.0, 0)) };
                    let sel = if read {
                        DataSel::RLat(p.clone(), "mean".into())
                    } else {
                        DataSel::WLat(p.clone(), "mean".into())
                    };
                    let pct = p.parse::<f64>().map_err(|_| {
                        crate::Error::Input(format!("percentile {p:?}: expected a number"))
                    })?;
                    Ok((pct, usecs(ds(&sel)?.lines.eval(*hi))))
                };
                let (rpct, rlat) = at(rp, true)?;
                let (wpct, wlat) = at(wp, false)?;
                Some((
                    IoCostQos {
                        rpct,
                        rlat,
                        wpct,
                        wlat,
                        min: *lo,
                        max: *hi,
                    },
                    *hi,
                ))
            }
            QosTarget::MofMax | QosTarget::AmofMax => {
                let sel = if *self == QosTarget::MofMax {
                    DataSel::Mof
                } else {
                    DataSel::Amof
                };
                // A flat figure: the highest vrate where the latency
                // impact is lowest.
                let flat = max_vrate_at_min(ds(&DataSel::LatImp)?, scale, margin);
                min_vrate_at_max(ds(&sel)?, scale, margin, flat).map(fixed)
            }
            QosTarget::AmofMaxVrate => clamped_end(&DataSel::Amof)?.map(fixed),
            QosTarget::IsolatedBandwidth => {
                match (
                    max_vrate_at_min(ds(&DataSel::AmofDelta)?, scale, margin),
                    clamped_end(&DataSel::Amof)?,
                ) {
                    (Some(lo), Some(hi)) => max_vrate_at_max(ds(&DataSel::Amof)?, scale, margin)
                        .map(|v| fixed(clamp(v, (lo, hi)))),
                    _ => None,
                }
            }
            QosTarget::AmofDeltaMin => {
                max_vrate_at_min(ds(&DataSel::AmofDelta)?, scale, margin).map(fixed)
            }
            QosTarget::LatRange(sel, (flo, fhi)) => {
                let s = ds(sel)?;
                match (
                    max_vrate_at_min(s, scale, 0.0),
                    min_vrate_at_max(s, scale, 0.0, None),
                ) {
                    (Some(l), Some(r)) if l < r => {
                        let d = r - l;
                        let range = (l + d * flo, if *fhi < 1.0 { l + d * fhi } else { scale.1 });
                        let target = usecs(s.lines.eval(range.1));
                        let pct = match sel {
                            DataSel::RLat(p, _) | DataSel::WLat(p, _) => {
                                p.parse::<f64>().unwrap_or(0.0)
                            }
                            _ => 0.0,
                        };
                        let read = matches!(sel, DataSel::RLat(..));
                        Some((
                            IoCostQos {
                                rpct: if read { pct } else { 0.0 },
                                rlat: if read { target } else { 0 },
                                wpct: if read { 0.0 } else { pct },
                                wlat: if read { 0 } else { target },
                                min: range.0,
                                max: range.1,
                            },
                            range.1,
                        ))
                    }
                    _ => None,
                }
            }
        })
    }
}

impl QosTarget {
    /// [`QosTarget::solve`] as upstream 2.1 did it, on 2.1's lines (one
    /// slope between two flat parts): the lowest vrate at the highest
    /// value is the upper hinge (moved by the margin), the highest at the
    /// lowest the lower hinge, and a flat line has no slope to solve on;
    /// isolated-bandwidth is the highest vrate at the lowest latency
    /// impact, clamped between the isolation and bandwidth solutions.
    pub fn solve_v21(
        &self,
        data: &BTreeMap<DataSel, DataSeries>,
        scale: (f64, f64),
    ) -> Result<Option<(IoCostQos, f64)>, crate::Error> {
        use crate::bench::iocost_tune::fit21::clamped;
        let ds = |sel: &DataSel| {
            data.get(sel)
                .ok_or_else(|| format!("the data series {sel} is missing"))
        };
        let hinges = |dl: &DataLines| dl.hinges.unwrap_or_default();
        let mof = ds(&DataSel::Mof).map_err(crate::Error::Input)?;
        let margin = {
            let max = hinges(&mof.lines).1.y;
            if max == 0.0 {
                0.0
            } else {
                (mof.lines.slope_v21() * (mof.error / max) * 800.0).min(0.1)
            }
        };
        // The lowest vrate at the highest value; flat: `flat` or the start.
        let min_at_max = |s: &DataSeries, flat: Option<f64>| {
            clamped(&s.lines, scale.0, scale.1).map(|(dl, l, r)| {
                if l.y < r.y {
                    (r.x * (1.0 + margin)).min(scale.1)
                } else {
                    clamp(flat.unwrap_or(dl.range.0), dl.range)
                }
            })
        };
        // The highest vrate at the lowest value; flat: the end.
        let max_at_min = |s: &DataSeries| {
            clamped(&s.lines, scale.0, scale.1).map(|(dl, l, r)| {
                if l.y < r.y {
                    (l.x * (1.0 - margin)).max(scale.0)
                } else {
                    dl.range.1
                }
            })
        };
        let r99 = &ds(&DataSel::RLat("99".into(), "mean".into()))
            .map_err(crate::Error::Input)?
            .lines;
        let w99 = &ds(&DataSel::WLat("99".into(), "mean".into()))
            .map_err(crate::Error::Input)?
            .lines;
        let fixed = |v: f64| {
            (
                IoCostQos {
                    rpct: 0.0,
                    rlat: usecs(r99.eval(v)),
                    wpct: 0.0,
                    wlat: usecs(w99.eval(v)),
                    min: v,
                    max: v,
                },
                v,
            )
        };
        let end = |sel: &DataSel| -> Result<Option<f64>, String> {
            Ok(clamped(&ds(sel)?.lines, scale.0, scale.1).map(|(dl, _, _)| dl.range.1))
        };
        Ok(match self {
            QosTarget::VrateRange(..) => return self.solve(data, scale),
            QosTarget::MofMax | QosTarget::AmofMax => {
                let sel = if *self == QosTarget::MofMax {
                    DataSel::Mof
                } else {
                    DataSel::Amof
                };
                let flat = max_at_min(ds(&DataSel::LatImp).map_err(crate::Error::Input)?);
                min_at_max(ds(&sel).map_err(crate::Error::Input)?, flat).map(fixed)
            }
            QosTarget::AmofMaxVrate => end(&DataSel::Amof).map_err(crate::Error::Input)?.map(fixed),
            QosTarget::IsolatedBandwidth => {
                match (
                    max_at_min(ds(&DataSel::AmofDelta).map_err(crate::Error::Input)?),
                    end(&DataSel::Amof).map_err(crate::Error::Input)?,
                ) {
                    (Some(lo), Some(hi)) => {
                        max_at_min(ds(&DataSel::LatImp).map_err(crate::Error::Input)?)
                            .map(|v| fixed(clamp(v, (lo, hi))))
                    }
                    _ => None,
                }
            }
            QosTarget::AmofDeltaMin => {
                max_at_min(ds(&DataSel::AmofDelta).map_err(crate::Error::Input)?).map(fixed)
            }
            QosTarget::LatRange(sel, (flo, fhi)) => {
                let Some((dl, l, r)) = clamped(
                    &ds(sel).map_err(crate::Error::Input)?.lines,
                    scale.0,
                    scale.1,
                ) else {
                    return Ok(None);
                };
                if l.y == r.y {
                    return Ok(None);
                }
                let d = r.x - l.x;
                let range = (
                    l.x + d * flo,
                    if *fhi < 1.0 { l.x + d * fhi } else { scale.1 },
                );
                let target = usecs(dl.eval(range.1));
                let pct = match sel {
                    DataSel::RLat(p, _) | DataSel::WLat(p, _) => p.parse::<f64>().unwrap_or(0.0),
                    _ => 0.0,
                };
                let read = matches!(sel, DataSel::RLat(..));
                Some((
                    IoCostQos {
                        rpct: if read { pct } else { 0.0 },
                        rlat: if read { target } else { 0 },
                        wpct: if read { 0.0 } else { pct },
                        wlat: if read { 0 } else { target },
                        min: range.0,
                        max: range.1,
                    },
                    range.1,
                ))
            }
        })
    }
}

/// A rule: its name and target.
#[derive(Debug, Clone, PartialEq)]
pub struct QosRule {
    pub name: String,
    pub target: QosTarget,
}

/// The default rules, as upstream: naive, bandwidth, isolated-bandwidth,
/// isolation and the four quarters of the p99 read latency.
pub fn default_rules() -> Vec<QosRule> {
    let rule = |name: &str, target: QosTarget| QosRule {
        name: name.into(),
        target,
    };
    let mut r = vec![
        rule("naive", QosTarget::default()),
        rule("bandwidth", QosTarget::AmofMaxVrate),
        rule("isolated-bandwidth", QosTarget::IsolatedBandwidth),
        rule("isolation", QosTarget::AmofDeltaMin),
    ];
    for (q, range) in [
        (1, (0.75, 1.0)),
        (2, (0.5, 0.75)),
        (3, (0.25, 0.5)),
        (4, (0.0, 0.25)),
    ] {
        r.push(rule(
            &format!("rlat-99-q{q}"),
            QosTarget::LatRange(DataSel::RLat("99".into(), "mean".into()), range),
        ));
    }
    r
}

/// The iocost-qos spec upstream's iocost-tune runs when the journal has no
/// iocost-qos result (upstream writes vrate-max from the number 125.0,
/// which prints as `125`), and whose properties make `dfl_qos` true.
pub const DFL_QOS_SPEC: &str = "iocost-qos:dither,vrate-max=125,vrate-intvs=25";

/// An iocost-tune spec, checked: the vrate range solutions may use
/// (percent), the figures to fit and the rules; and the line fits to make
/// (upstream's by default; not a spec property, so that upstream reads
/// the spec).
#[derive(Debug, Clone, PartialEq)]
pub struct TuneJob {
    pub scale: (f64, f64),
    pub sels: BTreeSet<DataSel>,
    pub rules: Vec<QosRule>,
    pub fit: Fit,
    /// Upstream 2.1's `gran`: the hinge step of its fits (2.2 has none).
    pub gran: f64,
}

impl TuneJob {
    /// Parses `spec`: the first group's `scale-min`/`scale-max` (fractions)
    /// and extra data selectors (no value), then one rule per group
    /// (`name=NAME` and a [`QosTarget`]); no rule groups, the defaults.
    pub fn parse(spec: &JobSpec) -> Result<TuneJob, crate::Error> {
        let mut sels: BTreeSet<DataSel> = [
            "mof",
            "amof",
            "amof-delta",
            "isol",
            "lat-imp",
            "work-csv",
            "rlat-50-mean",
            "rlat-99-mean",
            "rlat-50-99",
            "rlat-99-99",
            "rlat-50-100",
            "rlat-100-100",
            "wlat-50-mean",
            "wlat-99-mean",
            "wlat-50-99",
            "wlat-99-99",
            "wlat-50-100",
            "wlat-100-100",
        ]
        .iter()
        .filter_map(|s| DataSel::parse(s).ok())
        .collect();
        let mut scale = (1.0, 100.0);
        let mut gran = crate::bench::iocost_tune::fit21::DFL_GRAN;
        for (k, v) in spec.props.first().into_iter().flatten() {
            match k.as_str() {
                // 2.1's, kept for its results (2.2 refuses it).
                "gran" => {
                    gran = v.parse::<f64>().ok().filter(|g| *g > 0.0).ok_or_else(|| {
                        crate::Error::Input(format!("group 1: gran={v:?}: expected a step > 0"))
                    })?
                }
                "scale-min" => {
                    scale.0 = parse_frac(v)
                        .map_err(|e| crate::Error::Input(format!("group 1: scale-min: {e}")))?
                        * 100.0
                }
                "scale-max" => {
                    scale.1 = parse_frac(v)
                        .map_err(|e| crate::Error::Input(format!("group 1: scale-max: {e}")))?
                        * 100.0
                }
                k => {
                    let sel = DataSel::parse(k)
                        .map_err(|e| {
                            let mut allowed = vec!["scale-min", "scale-max"];
                            allowed.extend(PLAIN_SELS);
                            format!("{}; {e}", unknown_key(spec, 0, k, &allowed))
                        })
                        .map_err(crate::Error::Input)?;
                    if !v.is_empty() {
                        return Err(crate::Error::Input(format!(
                            "group 1: data selector {k:?} takes no value, given {v:?}"
                        )));
                    }
                    sels.insert(sel);
                }
            }
        }
        if scale.0 <= 0.0 || scale.0 >= scale.1 {
            return Err(crate::Error::Input(format!(
                "scale-min={} scale-max={}: expected 0 < scale-min < scale-max",
                scale.0 / 100.0,
                scale.1 / 100.0
            )));
        }
        let mut rules = Vec::new();
        for (i, g) in spec.props.iter().enumerate().skip(1) {
            let mut g = g.clone();
            let name = g.remove("name").filter(|n| !n.is_empty()).ok_or_else(|| {
                crate::Error::Input(format!("group {}: each rule needs name=NAME", i + 1))
            })?;
            let target = QosTarget::parse(g).map_err(|e| {
                crate::Error::Input(format!("group {} (rule {name:?}): {e}", i + 1))
            })?;
            rules.push(QosRule { name, target });
        }
        if rules.is_empty() {
            rules = default_rules();
        }
        for r in &rules {
            sels.extend(r.target.sels());
        }
        Ok(TuneJob {
            scale,
            sels,
            rules,
            fit: Fit::Upstream,
            gran,
        })
    }
}

/// The rule names of an `iocost-tune` spec, checked in full.
pub fn tune_rules(spec: &JobSpec) -> Result<Vec<String>, crate::Error> {
    Ok(TuneJob::parse(spec)?
        .rules
        .into_iter()
        .map(|r| r.name)
        .collect())
}

/// One solution: the target, the model scaled to the solution's vrate and
/// the QoS (min and max relative to the scaled model), with the figures at
/// that vrate. Upstream's `QoSSolution`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QosSolution {
    pub target: QosTarget,
    pub model: IoCostModel,
    pub qos: IoCostQos,
    pub scale_factor: f64,
    pub mem_profile: u32,
    pub mem_offload_factor: f64,
    pub adjusted_mem_offload_factor: f64,
    pub adjusted_mem_offload_delta: f64,
    pub isol: f64,
    pub rlat: BTreeMap<String, BTreeMap<String, f64>>,
    pub wlat: BTreeMap<String, BTreeMap<String, f64>>,
}

/// The latency cells a solution keeps: (latency, time) percentiles.
const SOLUTION_LATS: &[(&str, &str)] = &[
    ("50", "mean"),
    ("50", "99"),
    ("50", "100"),
    ("99", "mean"),
    ("99", "99"),
    ("100", "100"),
];

/// Upstream's iocost-tune result: the iocost-qos base, the fitted figures,
/// the solutions and remarks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TuneResult {
    pub base_model: IoCostModel,
    pub base_qos: IoCostQos,
    pub mem_profile: u32,
    pub isol_pct: String,
    pub isol_thr: f64,
    pub data: BTreeMap<DataSel, DataSeries>,
    pub solutions: BTreeMap<String, QosSolution>,
    pub remarks: Vec<String>,
}

impl TuneResult {
    /// Written by upstream 2.1: its series are 2.1's.
    pub fn is_v21(&self) -> bool {
        !self.data.is_empty() && self.data.values().all(|s| s.v21)
    }
}

/// The pure-vrate QoS of a run (min = max, nothing else overridden), its x.
fn run_vrate(recr: &QosRecordRun) -> Option<f64> {
    let o = &recr.ovr;
    match (o.off, o.rpct, o.rlat, o.wpct, o.wlat, o.min, o.max) {
        (false, None, None, None, None, Some(a), Some(b)) if a == b => Some(a),
        _ => None,
    }
}

/// Collects `job`'s figures from an iocost-qos record and result: one
/// point per pure-vrate run. The isolation percentile and threshold are
/// the runs' protection's.
pub fn study(job: &TuneJob, rec: &QosRecord, res: &QosResult) -> Result<TuneResult, crate::Error> {
    let base_model: IoCostModel = serde_json::from_value(rec.base_model.clone())
        .map_err(|e| crate::Error::Input(format!("the iocost-qos record's base_model: {e}")))?;
    let (isol_pct, isol_thr) = rec
        .runs
        .first()
        .and_then(Option::as_ref)
        .and_then(|r| crate::bench::iocost_qos::format::tune_params(&r.prot))
        .unwrap_or_else(|| ("05".to_string(), 0.9));
    let mut points: BTreeMap<DataSel, Vec<DataPoint>> = BTreeMap::new();
    let recs = rec
        .runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().map(|r| (i, r)));
    for ((i, recr), resr) in recs.zip(res.runs.iter().flatten()) {
        let Some(x) = run_vrate(recr) else { continue };
        let hog = final_probe_of(&resr.prot)
            .map_err(|e| crate::Error::Input(format!("run {i:02}: {e}")))?;
        for sel in &job.sels {
            if let Some(y) = sel.select(i, resr, hog.as_ref(), &isol_pct)? {
                points
                    .entry(sel.clone())
                    .or_default()
                    .push(DataPoint::new(x, y));
            }
        }
    }
    let data = job
        .sels
        .iter()
        .map(|sel| {
            let mut data = points.remove(sel).unwrap_or_default();
            data.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
            (
                sel.clone(),
                DataSeries {
                    data,
                    ..DataSeries::default()
                },
            )
        })
        .collect();
    Ok(TuneResult {
        base_model,
        base_qos: rec.base_qos.clone(),
        mem_profile: rec.mem_profile,
        isol_pct,
        isol_thr,
        data,
        solutions: BTreeMap::new(),
        remarks: Vec::new(),
    })
}

/// Fits one figure. aMOF and aMOF-delta leave out the vrates past where
/// the fitted isolation falls below the threshold (their lines are then
/// extended to that vrate); latencies drop outliers and are fitted again.
/// The error counts the set-aside points too, so that it shows how noisy
/// the device was.
fn solve_series(
    sel: &DataSel,
    s: &mut DataSeries,
    isol: Option<&DataSeries>,
    isol_thr: f64,
    fit: Fit,
) -> Result<(), String> {
    let (shape, outliers, by_isol) = sel.fit_opts();
    let mut fill_to = None;
    if by_isol {
        let is = isol.ok_or_else(|| format!("solving {sel} needs the isol series"))?;
        let r = is.lines.range;
        if let (Some(lx), Some(rx)) = (max_vrate_at_max(is, r, 0.0), min_vrate_at_min(is, r, 0.0)) {
            let (ly, ry) = (is.lines.eval(lx), is.lines.eval(rx));
            let slope = if lx < rx { (ry - ly) / (rx - lx) } else { 0.0 };
            if slope != 0.0 && ry < isol_thr {
                let x = clamp(rx - (ry - isol_thr) / slope, r);
                s.filter_beyond(x);
                fill_to = Some(x);
            }
        }
    }
    s.fit_lines(shape, fit);
    if let Some(x) = fill_to {
        s.lines = s.lines.with_range((s.lines.range.0, x))?;
    }
    if outliers {
        s.filter_outliers();
        let range = s.lines.range;
        s.fit_lines(shape, fit);
        s.lines = s.lines.with_range(range)?;
    }
    s.error = DataSeries::error_of(s.data.iter().chain(s.outliers.iter()), &s.lines);
    Ok(())
}

/// [`solve_series`] as upstream 2.1 did it: aMOF and aMOF-delta cut where
/// 2.1's isolation line (its slope) falls below the threshold, their
/// lines moved out to the cut; latencies drop outliers and are fitted
/// again over the first fit's range.
fn solve_series_v21(
    job: &TuneJob,
    sel: &DataSel,
    s: &mut DataSeries,
    isol: Option<&DataSeries>,
    isol_thr: f64,
) -> Result<(), String> {
    let (shape, outliers, by_isol) = sel.fit_opts21();
    let mut fill_to = None;
    if by_isol {
        let dl = &isol
            .ok_or_else(|| format!("solving {sel} needs the isol series"))?
            .lines;
        let slope = dl.slope_v21();
        if let Some((_, right)) = dl.hinges
            && slope != 0.0
            && right.y < isol_thr
        {
            let x = clamp(right.x - (right.y - isol_thr) / slope, dl.range);
            s.filter_beyond(x);
            fill_to = Some(x);
        }
    }
    crate::bench::iocost_tune::fit21::fit_lines(s, job.gran, shape);
    if let Some(x) = fill_to {
        crate::bench::iocost_tune::fit21::fill_vrate_range(s, (s.lines.range.0, x));
    }
    if outliers {
        s.filter_outliers();
        let range = s.lines.range;
        crate::bench::iocost_tune::fit21::fit_lines(s, job.gran, shape);
        crate::bench::iocost_tune::fit21::fill_vrate_range(s, range);
    }
    s.error = DataSeries::error_of(s.data.iter().chain(s.outliers.iter()), &s.lines);
    Ok(())
}

/// The model scaled by `f`, each value rounded.
fn scale_model(m: &IoCostModel, f: f64) -> IoCostModel {
    let s = |v: u64| (v as f64 * f).round() as u64;
    IoCostModel {
        rbps: s(m.rbps),
        rseqiops: s(m.rseqiops),
        rrandiops: s(m.rrandiops),
        wbps: s(m.wbps),
        wseqiops: s(m.wseqiops),
        wrandiops: s(m.wrandiops),
    }
}

/// Fits every figure (isolation first: aMOF's fit depends on it) and
/// solves `job`'s rules. A rule that cannot be solved is left out, with
/// the reason in the returned notes; one without an answer is left out.
///
/// A result upstream 2.1 wrote ([`TuneResult::is_v21`]) is fitted and
/// solved with 2.1's code ([`crate::bench::iocost_tune::fit21`]), as 2.1 solved it, unless
/// the fit asked for is [`Fit::Corrected`]: then its series become 2.2's
/// and are fitted as such.
pub fn solve(job: &TuneJob, res: &mut TuneResult) -> Result<Vec<String>, crate::Error> {
    let v21 = res.is_v21() && job.fit.is_upstream();
    for s in res.data.values_mut() {
        s.v21 = v21;
        s.reset();
    }
    res.solutions.clear();
    let mut isol = res.data.remove(&DataSel::Isol);
    if let Some(s) = isol.as_mut() {
        if v21 {
            solve_series_v21(job, &DataSel::Isol, s, None, 0.0).map_err(crate::Error::Input)?;
        } else {
            solve_series(&DataSel::Isol, s, None, 0.0, job.fit).map_err(crate::Error::Input)?;
        }
    }
    for (sel, s) in res.data.iter_mut() {
        if v21 {
            solve_series_v21(job, sel, s, isol.as_ref(), res.isol_thr)
                .map_err(crate::Error::Input)?;
        } else {
            solve_series(sel, s, isol.as_ref(), res.isol_thr, job.fit)
                .map_err(crate::Error::Input)?;
        }
    }
    if let Some(s) = isol {
        res.data.insert(DataSel::Isol, s);
    }
    let mut notes = Vec::new();
    for rule in &job.rules {
        let solved = if v21 {
            rule.target.solve_v21(&res.data, job.scale)
        } else {
            rule.target.solve(&res.data, job.scale)
        };
        let (mut qos, vrate) = match solved {
            Ok(Some(v)) => v,
            Ok(None) => continue,
            Err(e) => {
                notes.push(format!(
                    "rule {:?} ({}) not solved: {e}",
                    rule.name, rule.target
                ));
                continue;
            }
        };
        let f = vrate / 100.0;
        qos.min = round2_as_printed(qos.min / f);
        qos.max = round2_as_printed(qos.max / f);
        qos.rpct = round2_as_printed(qos.rpct);
        qos.wpct = round2_as_printed(qos.wpct);
        let at = |sel: DataSel| res.data.get(&sel).map_or(0.0, |s| s.lines.eval(vrate));
        let lat = |read: bool| {
            let mut m: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
            for (l, t) in SOLUTION_LATS {
                let sel = if read {
                    DataSel::RLat(l.to_string(), t.to_string())
                } else {
                    DataSel::WLat(l.to_string(), t.to_string())
                };
                m.entry(l.to_string())
                    .or_default()
                    .insert(t.to_string(), at(sel));
            }
            m
        };
        res.solutions.insert(
            rule.name.clone(),
            QosSolution {
                target: rule.target.clone(),
                model: scale_model(&res.base_model, f),
                qos,
                scale_factor: f,
                mem_profile: res.mem_profile,
                mem_offload_factor: at(DataSel::Mof),
                adjusted_mem_offload_factor: at(DataSel::Amof),
                adjusted_mem_offload_delta: at(DataSel::AmofDelta),
                isol: at(DataSel::Isol),
                rlat: lat(true),
                wlat: lat(false),
            },
        );
    }
    Ok(notes)
}

/// Remarks on one direction's latencies within the solutions' vrate range:
/// flat means (throttling cannot steer them), p99 spikes of 500 ms or
/// more every 100 s, tails of a second or more. As upstream's code, the
/// write remark judges the read means with [`Fit::Upstream`]; the write
/// means with [`Fit::Corrected`]. A series the result lacks gives
/// upstream's `rlat-99-99 and/or rlat-100-100 unavailable.`.
fn remark_on_lat(job: &TuneJob, res: &TuneResult, read: bool) -> Vec<String> {
    let rw = if read { "read" } else { "write" };
    let sel = |read: bool, l: &str, t: &str| {
        if read {
            DataSel::RLat(l.into(), t.into())
        } else {
            DataSel::WLat(l.into(), t.into())
        }
    };
    let means_read = read || job.fit.is_upstream();
    let sels = [
        sel(means_read, "50", "mean"),
        sel(means_read, "99", "mean"),
        sel(read, "99", "99"),
        sel(read, "100", "100"),
    ];
    let series: Option<Vec<&DataSeries>> = sels.iter().map(|s| res.data.get(s)).collect();
    let Some(series) = series else {
        let l = if read { "rlat" } else { "wlat" };
        return vec![format!("{l}-99-99 and/or {l}-100-100 unavailable.")];
    };
    // Upstream 2.1's lines: its clamp, flat when the hinges are level,
    // the lower hinge's value for the minimum.
    let v21 = series.iter().all(|s| s.v21);
    let lines: Option<Vec<DataLines>> = series
        .iter()
        .map(|s| {
            if v21 {
                crate::bench::iocost_tune::fit21::clamped(&s.lines, job.scale.0, job.scale.1)
                    .map(|c| c.0)
            } else {
                s.lines.clamped(job.scale).ok()?
            }
        })
        .collect();
    let Some(lines) = lines else {
        return vec![format!("Insufficient {rw} latencies data.")];
    };
    let min = |l: &DataLines| match l.hinges {
        Some((left, _)) if v21 => left.y,
        _ => l.min_max().0,
    };
    let mut out = Vec::new();
    let flat = |l: &DataLines| match l.hinges {
        Some((a, b)) if v21 => a.y == b.y,
        _ => {
            let (a, b) = l.min_max();
            a == b
        }
    };
    if flat(&lines[0]) && flat(&lines[1]) {
        out.push(format!(
            "Mean {rw} latencies cannot be modulated with throttling."
        ));
    }
    let p99 = min(&lines[2]);
    if p99 >= 0.5 {
        out.push(format!(
            "Minimum p99 {rw} latencies spike above {} every 100s.",
            format_duration(p99)
        ));
    }
    let tail = min(&lines[3]);
    if tail >= 1.0 {
        out.push(format!(
            "Minimum {rw} tail latencies spike above {}.",
            format_duration(tail)
        ));
    }
    out
}

/// Upstream's remarks: on the read and write latencies, and on the
/// solutions whose protectable size is 5% or more below the supportable
/// one.
pub fn remarks(job: &TuneJob, res: &TuneResult) -> Vec<String> {
    let mut out = remark_on_lat(job, res, true);
    out.extend(remark_on_lat(job, res, false));
    for (name, sol) in &res.solutions {
        if matches!(
            sol.target,
            QosTarget::AmofMaxVrate | QosTarget::AmofDeltaMin | QosTarget::IsolatedBandwidth
        ) {
            let err = sol.adjusted_mem_offload_delta / sol.mem_offload_factor;
            if err >= 0.05 {
                out.push(format!(
                    "{name}: Isolatable memory size is {}% < supportable, sizing may be difficult.",
                    format_pct(err)
                ));
            }
        }
    }
    out
}

/// One solution's lines after its rule names.
fn format_solution(out: &mut String, sol: &QosSolution, isol_pct: &str) {
    let _ = writeln!(
        out,
        "  info: scale={}% MOF={:.3}@{} aMOF={:.3} aMOF-delta={:.3} isol-{}={}%",
        format_pct(sol.scale_factor),
        sol.mem_offload_factor,
        sol.mem_profile,
        sol.adjusted_mem_offload_factor,
        sol.adjusted_mem_offload_delta,
        isol_pct,
        format_pct(sol.isol)
    );
    for (name, lat) in [("rlat", &sol.rlat), ("wlat", &sol.wlat)] {
        out.push_str(&format!("  {name}:"));
        for (l, t) in SOLUTION_LATS {
            let v = lat.get(*l).and_then(|m| m.get(*t)).copied().unwrap_or(0.0);
            let _ = write!(out, " {l}-{t}={:>5}", format_duration(v));
        }
        out.push('\n');
    }
    let m = &sol.model;
    let _ = writeln!(
        out,
        "  model: rbps={} rseqiops={} rrandiops={} wbps={} wseqiops={} wrandiops={}",
        m.rbps, m.rseqiops, m.rrandiops, m.wbps, m.wseqiops, m.wrandiops
    );
    let q = &sol.qos;
    let _ = writeln!(
        out,
        "  qos: rpct={:.2} rlat={} wpct={:.2} wlat={} min={:.2} max={:.2}",
        q.rpct, q.rlat, q.wpct, q.wlat, q.min, q.max
    );
}

/// Two solutions alike but for their targets.
fn same_solution(a: &QosSolution, b: &QosSolution) -> bool {
    QosSolution {
        target: QosTarget::default(),
        ..a.clone()
    } == QosSolution {
        target: QosTarget::default(),
        ..b.clone()
    }
}

/// The text of an iocost-tune result, as upstream's `format` prints it
/// without its graphs (graph.rs draws those): `Solutions` (consecutive
/// rules with the same solution share it, their names padded to the
/// group's widest; a rule without one says `NO SOLUTION`) and `Remarks`.
pub fn format(job: &TuneJob, res: &TuneResult) -> String {
    let mut out = String::new();
    if !job.rules.is_empty() {
        out.push_str(&custom_underline("Solutions", '='));
        out.push('\n');
        let mut group: Vec<&QosRule> = Vec::new();
        let mut prev: Option<&QosSolution> = None;
        let flush = |out: &mut String, group: &mut Vec<&QosRule>, prev: Option<&QosSolution>| {
            if group.is_empty() {
                return;
            }
            // Names padded to the widest of the group, as upstream.
            let width = group.iter().map(|r| r.name.len()).max().unwrap_or(0);
            for r in group.iter() {
                let _ = writeln!(out, "[{:<width$}] {}", r.name, r.target);
            }
            match prev {
                Some(sol) => format_solution(out, sol, &res.isol_pct),
                None => out.push_str("  NO SOLUTION\n"),
            }
            out.push('\n');
            group.clear();
        };
        for rule in &job.rules {
            let sol = res.solutions.get(&rule.name);
            let same = match (sol, prev) {
                (None, None) => true,
                (Some(a), Some(b)) => same_solution(a, b),
                _ => false,
            };
            if !group.is_empty() && !same {
                flush(&mut out, &mut group, prev);
            }
            group.push(rule);
            prev = sol;
        }
        flush(&mut out, &mut group, prev);
    }
    if !res.remarks.is_empty() {
        out.push_str(&custom_underline("Remarks", '='));
        out.push('\n');
        for r in &res.remarks {
            let _ = writeln!(out, "* {r}");
        }
    }
    out
}

/// iocost-tune's format properties (`format iocost-tune:hwdb`).
pub const FORMAT_KEYS: &[&str] = &["pdf", "pdf-keep", "high-level", "hwdb", "hwdb-fwrev"];

/// The format properties given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TuneFormat {
    pub high_level: bool,
    pub hwdb: bool,
    /// hwdb matching this firmware revision only.
    pub hwdb_fwrev: bool,
    /// `pdf[=PATH]`: the pdf to write (empty: named after the result file).
    pub pdf: Option<String>,
    /// `pdf-keep`: keep the pdf's sources in the current directory.
    pub pdf_keep: bool,
}

/// Checks a `format`/`summary` spec's properties: upstream's format
/// properties. `pdf` does not go with `high-level`, `hwdb` or `hwdb-fwrev`
/// (upstream refuses the first two and ignores `pdf` with the third).
pub fn format_props(spec: &JobSpec) -> Result<TuneFormat, crate::Error> {
    if spec.props.len() > 1 {
        return Err(crate::Error::Input(
            "format takes one group of format properties (no rule groups)".into(),
        ));
    }
    let mut f = TuneFormat::default();
    for (k, v) in spec.props.first().into_iter().flatten() {
        if k == "pdf" {
            f.pdf = Some(v.clone());
            continue;
        }
        let on = match v.as_str() {
            "" | "true" => true,
            "false" => false,
            _ => {
                return Err(crate::Error::Input(format!(
                    "format property {k}={v:?}: expected true or false"
                )));
            }
        };
        match k.as_str() {
            "high-level" => f.high_level = on,
            "hwdb" => f.hwdb = on,
            "hwdb-fwrev" => f.hwdb_fwrev = on,
            "pdf-keep" => f.pdf_keep = on,
            k => {
                let hint = closest(k, FORMAT_KEYS)
                    .map(|s| format!("; did you mean \"{s}\"?"))
                    .unwrap_or_default();
                return Err(crate::Error::Input(format!(
                    "unknown format property {k:?}: expected one of {}{hint}",
                    FORMAT_KEYS.join(", ")
                )));
            }
        }
    }
    if f.pdf.is_some() && (f.high_level || f.hwdb || f.hwdb_fwrev) {
        return Err(crate::Error::Input(
            "format properties pdf and high-level/hwdb/hwdb-fwrev are incompatible with each other"
                .into(),
        ));
    }
    Ok(f)
}

/// `N points, MOF=[min,max], aMOF=[min,max]` over the solutions.
fn datapoints_summary(res: &TuneResult) -> String {
    let n = res
        .data
        .get(&DataSel::Mof)
        .map_or(0, |s| s.data.len() + s.outliers.len());
    let range = |f: fn(&QosSolution) -> f64| {
        let v: Vec<f64> = res.solutions.values().map(f).collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if v.is_empty() {
            "-,-".to_string()
        } else {
            format!("{lo:.3},{hi:.3}")
        }
    };
    format!(
        "{n} points, MOF=[{}], aMOF=[{}]",
        range(|s| s.mem_offload_factor),
        range(|s| s.adjusted_mem_offload_factor)
    )
}

/// Upstream's `high-level` text: the data summary, the base model and each
/// rule's scale. (Upstream prints the model's sizes cut to one character
/// by a `{:.1}` on a string; here they are whole.)
pub fn format_high_level(job: &TuneJob, res: &TuneResult) -> String {
    let mut out = String::from("[iocost-tune result]\n\n");
    let _ = writeln!(out, "{}", datapoints_summary(res));
    let m = &res.base_model;
    let size = |v: u64| crate::fmt::format_size(v as f64);
    let _ = writeln!(
        out,
        "base model: rbps={} rseqiops={} rrandiops={} wbps={} wseqiops={} wrandiops={}",
        size(m.rbps),
        size(m.rseqiops),
        size(m.rrandiops),
        size(m.wbps),
        size(m.wseqiops),
        size(m.wrandiops)
    );
    let mut sols = Vec::new();
    for r in &job.rules {
        match res.solutions.get(&r.name) {
            Some(s) => sols.push(format!("{}={}%", r.name, format_pct(s.scale_factor))),
            None => {
                let _ = writeln!(out, "Solution {} not found...", r.name);
                break;
            }
        }
    }
    if sols.len() < 4 {
        let _ = writeln!(out, "solutions : {}", sols.join(" "));
    } else {
        let _ = writeln!(out, "solutions : {}", sols[..4].join(" "));
        let _ = writeln!(out, "            {}", sols[4..].join(" "));
    }
    out
}

/// The default solutions a hwdb entry lists, in order.
const HWDB_SOLUTIONS: &[&str] = &["isolation", "isolated-bandwidth", "bandwidth", "naive"];

/// Upstream's `hwdb` text: a systemd hwdb entry for the device model (and
/// firmware with `fwrev`) with the available default solutions and the
/// rlat ones as IOCOST_MODEL_*/IOCOST_QOS_* properties.
pub fn format_hwdb(res: &TuneResult, model: &str, fwrev: Option<&str>) -> String {
    let mut out = format!("# {}\n", datapoints_summary(res));
    let _ = writeln!(out, "block:*:name:{model}:fwrev:{}:", fwrev.unwrap_or("*"));
    let mut sols: Vec<(&str, &QosSolution)> = HWDB_SOLUTIONS
        .iter()
        .filter_map(|n| res.solutions.get(*n).map(|s| (*n, s)))
        .collect();
    let names: Vec<&str> = sols.iter().map(|(n, _)| *n).collect();
    let _ = write!(out, "  IOCOST_SOLUTIONS={}", names.join(" "));
    sols.extend(
        res.solutions
            .iter()
            .filter(|(n, _)| n.starts_with("rlat"))
            .map(|(n, s)| (n.as_str(), s)),
    );
    for (name, s) in sols {
        let n = name.to_uppercase().replace('-', "_");
        let (m, q) = (&s.model, &s.qos);
        let _ = write!(
            out,
            "\n  IOCOST_MODEL_{n}=rbps={} rseqiops={} rrandiops={} wbps={} wseqiops={} wrandiops={}\n",
            m.rbps, m.rseqiops, m.rrandiops, m.wbps, m.wseqiops, m.wrandiops
        );
        let _ = write!(
            out,
            "  IOCOST_QOS_{n}=rpct={:.2} rlat={} wpct={:.2} wlat={} min={:.2} max={:.2}",
            q.rpct, q.rlat, q.wpct, q.wlat, q.min, q.max
        );
    }
    out.push('\n');
    out
}

/// What iocost-tune records: the iocost-qos job's properties, whether
/// they were upstream's default iocost-qos spec ([`DFL_QOS_SPEC`]), and
/// (ours, only when it is not upstream's) the line fits the result was
/// solved with. Upstream reads the record and passes over `fit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TuneRecord {
    pub qos_props: Vec<BTreeMap<String, String>>,
    pub dfl_qos: bool,
    #[serde(default, skip_serializing_if = "Fit::is_upstream")]
    pub fit: Fit,
}

/// Runs iocost-tune on a completed iocost-qos job: the record, and the
/// result (figures fitted, rules solved, remarks). Rules that could not be
/// solved are returned as notes.
pub fn run_on(
    job: &TuneJob,
    qos: &crate::journal::JobData,
) -> Result<(TuneRecord, TuneResult, Vec<String>), crate::Error> {
    let rec: QosRecord = crate::bench::iocost_qos::format::read(
        qos.record.as_ref().unwrap_or(&serde_json::Value::Null),
        "iocost-qos",
        "record",
    )?;
    let res: QosResult = match &qos.result {
        Some(r) if !r.is_null() => {
            crate::bench::iocost_qos::format::read(r, "iocost-qos", "result")?
        }
        _ => {
            return Err(crate::Error::Input(
                "the iocost-qos job has no result".into(),
            ));
        }
    };
    if rec.runs.is_empty() {
        return Err(crate::Error::Input(
            "the iocost-qos result has no runs".into(),
        ));
    }
    let mut tres = study(job, &rec, &res)?;
    let notes = solve(job, &mut tres)?;
    tres.remarks = remarks(job, &tres);
    let dfl = crate::spec::parse(DFL_QOS_SPEC)
        .map(|d| d.props == qos.spec.props)
        .unwrap_or(false);
    Ok((
        TuneRecord {
            qos_props: qos.spec.props.clone(),
            dfl_qos: dfl,
            fit: job.fit,
        },
        tres,
        notes,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::spec::parse;

    #[test]
    fn tune_rules_are_checked() {
        let r = |s: &str| tune_rules(&parse(s).unwrap());
        assert_eq!(r("iocost-tune").unwrap().len(), 8);
        assert_eq!(
            r("iocost-tune:mof,rlat-99-99,isol-01:name=a,amof=max-vrate:name=b,rlat-99=q2:name=c,vrate=0.5-1.0,rpct=95")
                .unwrap(),
            vec!["a", "b", "c"]
        );
        assert!(
            r("iocost-tune::amof=max")
                .unwrap_err()
                .to_string()
                .contains("needs name")
        );
        assert!(
            r("iocost-tune:scale-min=0")
                .unwrap_err()
                .to_string()
                .contains("scale-min")
        );
        assert!(
            r("iocost-tune:amoff")
                .unwrap_err()
                .to_string()
                .contains("did you mean \"amof\"")
        );
        assert!(
            r("iocost-tune:mof=1")
                .unwrap_err()
                .to_string()
                .contains("takes no value")
        );
        assert!(
            r("iocost-tune:rlat-98")
                .unwrap_err()
                .to_string()
                .contains("latency percentile")
        );
        assert!(
            r("iocost-tune::name=a,mof=min")
                .unwrap_err()
                .to_string()
                .contains("expected max")
        );
        assert!(
            r("iocost-tune::name=a,rlat-99-99=q1")
                .unwrap_err()
                .to_string()
                .contains("mean over time")
        );
        assert!(
            r("iocost-tune::name=a,mof=max,amof=max")
                .unwrap_err()
                .to_string()
                .contains("exactly one")
        );
    }

    /// The doc example's iocost-qos entry: only its vrate run (60) gives
    /// points; the baseline (iocost off) and the skipped run do not.
    #[test]
    fn study_collects_one_point_per_vrate_run() {
        let d = crate::bench::iocost_qos::format::tests::journal_entry();
        let rec: QosRecord = serde_json::from_value(d.record.unwrap()).unwrap();
        let res: QosResult = serde_json::from_value(d.result.unwrap()).unwrap();
        let job = TuneJob::parse(&parse("iocost-tune:isol-mean").unwrap()).unwrap();
        let r = study(&job, &rec, &res).unwrap();
        assert_eq!((r.isol_pct.as_str(), r.isol_thr), ("01", 0.9));
        assert_eq!(r.mem_profile, 16);
        assert_eq!(r.base_model.wrandiops, 6);
        let pts = |sel: &str| r.data[&DataSel::parse(sel).unwrap()].data.clone();
        assert_eq!(pts("mof"), vec![DataPoint::new(60.0, 1.451)]);
        assert_eq!(pts("amof"), vec![DataPoint::new(60.0, 1.451)]);
        assert_eq!(pts("isol"), vec![DataPoint::new(60.0, 0.97453)]);
        assert_eq!(pts("isol-mean"), vec![DataPoint::new(60.0, 0.97453)]);
        assert_eq!(pts("lat-imp"), vec![DataPoint::new(60.0, 0.0079)]);
        assert_eq!(pts("rlat-99-mean"), vec![DataPoint::new(60.0, 2.8e-3)]);
        assert_eq!(pts("wlat-50-100"), vec![DataPoint::new(60.0, 315.0 * 1e-6)]);
        // A latency cell the result lacks is named.
        let job = TuneJob::parse(&parse("iocost-tune:rlat-95-mean").unwrap()).unwrap();
        let e = study(&job, &rec, &res).unwrap_err();
        assert!(
            e.to_string()
                .contains("run 01: the storage result's read latency has no [\"95\"][\"mean\"]"),
            "{e}"
        );
    }

    /// A series of `f` over vrate 5..=125.
    fn series(f: impl Fn(f64) -> f64) -> DataSeries {
        DataSeries {
            data: (1..=25)
                .map(|i| DataPoint::new(5.0 * f64::from(i), f(5.0 * f64::from(i))))
                .collect(),
            ..DataSeries::default()
        }
    }

    /// A device whose MOF stops rising at vrate 60, whose aMOF peaks
    /// between 50 and 80, whose isolation fails past 110 and whose
    /// latencies rise with vrate: the default rules' solutions.
    #[test]
    fn default_rules_solve_on_a_typical_device() {
        let job = TuneJob::parse(&parse("iocost-tune").unwrap()).unwrap();
        let mof = |x: f64| if x < 60.0 { 1.0 + x * 0.01 } else { 1.6 };
        let amof = |x: f64| {
            if x < 50.0 {
                1.0 + x * 0.008
            } else if x < 80.0 {
                1.4
            } else {
                (1.4 - (x - 80.0) * 0.01).max(0.5)
            }
        };
        let mut data = BTreeMap::new();
        for sel in &job.sels {
            let s = match sel {
                DataSel::Mof => series(mof),
                DataSel::Amof => series(amof),
                DataSel::AmofDelta => series(|x| mof(x) - amof(x) + 0.01),
                DataSel::Isol => series(|x| {
                    if x < 90.0 {
                        0.98
                    } else {
                        0.98 - (x - 90.0) * 0.004
                    }
                }),
                DataSel::LatImp => series(|x| 0.02 + x * 0.0005),
                DataSel::WorkCsv => series(|_| 0.8),
                DataSel::RLat(l, _) | DataSel::WLat(l, _) => {
                    let base = if l == "50" { 200e-6 } else { 2e-3 };
                    series(move |x| base * (1.0 + x / 50.0))
                }
                _ => series(|_| 1.0),
            };
            data.insert(sel.clone(), s);
        }
        let mut res = TuneResult {
            base_model: IoCostModel {
                rbps: 1000,
                rseqiops: 100,
                rrandiops: 100,
                wbps: 500,
                wseqiops: 50,
                wrandiops: 50,
            },
            mem_profile: 16,
            isol_pct: "01".into(),
            isol_thr: 0.9,
            data,
            ..TuneResult::default()
        };
        let notes = solve(&job, &mut res).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        let names: Vec<&str> = res.solutions.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "bandwidth",
                "isolated-bandwidth",
                "isolation",
                "naive",
                "rlat-99-q1",
                "rlat-99-q2",
                "rlat-99-q3",
                "rlat-99-q4"
            ]
        );
        // naive: the model as measured, vrate 75-100 steered by p99.
        let n = &res.solutions["naive"];
        assert_eq!((n.scale_factor, n.qos.min, n.qos.max), (1.0, 75.0, 100.0));
        assert_eq!((n.qos.rpct, n.qos.wpct), (99.0, 99.0));
        assert_eq!(
            n.qos.rlat,
            usecs(
                res.data[&DataSel::RLat("99".into(), "mean".into())]
                    .lines
                    .eval(100.0)
            )
        );
        assert_eq!(n.model, res.base_model);
        // bandwidth: the highest vrate with an aMOF, within scale-max.
        let b = &res.solutions["bandwidth"];
        assert_eq!(b.scale_factor, 1.0);
        // Fixed-vrate solutions scale the model and pin the QoS at 100.
        for name in ["bandwidth", "isolated-bandwidth", "isolation"] {
            let s = &res.solutions[name];
            assert_eq!(
                (s.qos.min, s.qos.max, s.qos.rpct, s.qos.wpct),
                (100.0, 100.0, 0.0, 0.0),
                "{name}"
            );
            assert!(
                s.scale_factor > 0.0 && s.scale_factor <= 1.0,
                "{name}: {s:?}"
            );
            assert_eq!(
                s.model.rbps,
                (1000.0 * s.scale_factor).round() as u64,
                "{name}"
            );
        }
        // aMOF's fit stops where isolation falls below 0.9 (vrate 110).
        let a = &res.data[&DataSel::Amof];
        assert!((a.lines.range.1 - 110.0).abs() < 2.0, "{:?}", a.lines);
        assert!(a.outliers.iter().all(|p| p.x > 105.0), "{:?}", a.outliers);
        // isolated-bandwidth lies between isolation and bandwidth.
        let ib = res.solutions["isolated-bandwidth"].scale_factor;
        let iso = res.solutions["isolation"].scale_factor;
        assert!(
            iso <= ib && ib <= 1.0,
            "isolation {iso}, isolated-bandwidth {ib}"
        );
        // The quarters of the p99 read latency's spread, from the top.
        let q: Vec<(f64, f64)> = (1..=4)
            .map(|i| {
                let s = &res.solutions[&format!("rlat-99-q{i}")];
                (s.qos.min * s.scale_factor, s.qos.max * s.scale_factor)
            })
            .collect();
        assert!((q[0].1 - 100.0).abs() < 0.01, "{q:?}");
        for w in q.windows(2) {
            assert!((w[0].0 - w[1].1).abs() < 0.02, "{q:?}");
        }
        assert!(q[3].0 >= 1.0 && q[3].0 <= 6.0, "{q:?}");
        // The figures at the solution's vrate.
        let s = &res.solutions["isolation"];
        let v = s.scale_factor * 100.0;
        assert_eq!(s.mem_offload_factor, res.data[&DataSel::Mof].lines.eval(v));
        assert_eq!(
            s.rlat["99"]["mean"],
            res.data[&DataSel::RLat("99".into(), "mean".into())]
                .lines
                .eval(v)
        );
        // Upstream's serialized result reads back as written.
        let back: TuneResult = serde_json::from_value(serde_json::to_value(&res).unwrap()).unwrap();
        assert_eq!(back, res);
        let j = serde_json::to_value(&res).unwrap();
        assert!(j["data"].get("rlat-99-mean").is_some(), "{j}");
        assert_eq!(j["solutions"]["bandwidth"]["target"], "AMOFMaxVrate");
        assert_eq!(
            j["solutions"]["rlat-99-q1"]["target"]["LatRange"][0],
            "rlat-99-mean"
        );
    }

    /// A rule whose figure is missing from the data is reported, not
    /// solved; the others still are.
    #[test]
    fn a_rule_without_its_data_is_reported() {
        let job = TuneJob::parse(&parse("iocost-tune").unwrap()).unwrap();
        let mut res = TuneResult::default();
        let notes = solve(&job, &mut res).unwrap();
        assert_eq!(notes.len(), 8, "{notes:?}");
        assert!(
            notes[0].contains("the data series MOF is missing"),
            "{notes:?}"
        );
        assert!(res.solutions.is_empty());
    }

    #[test]
    fn format_props_take_a_pdf_path_and_refuse_mixed_outputs() {
        let f = |t: &str| format_props(&parse(t).unwrap());
        assert_eq!(f("iocost-tune:pdf").unwrap().pdf.as_deref(), Some(""));
        let p = f("iocost-tune:pdf=out/g.pdf,pdf-keep").unwrap();
        assert_eq!(p.pdf.as_deref(), Some("out/g.pdf"));
        assert!(p.pdf_keep);
        assert!(!f("iocost-tune:pdf-keep=false").unwrap().pdf_keep);
        for bad in [
            "iocost-tune:pdf,hwdb",
            "iocost-tune:pdf,high-level",
            "iocost-tune:pdf,hwdb-fwrev",
        ] {
            let e = f(bad).unwrap_err();
            assert!(e.to_string().contains("incompatible"), "{bad}: {e}");
        }
        let e = f("iocost-tune:pdf-kep").unwrap_err();
        assert!(e.to_string().contains("did you mean \"pdf-keep\""), "{e}");
        let e = f("iocost-tune:pdf-keep=maybe").unwrap_err();
        assert!(e.to_string().contains("expected true or false"), "{e}");
    }
}
