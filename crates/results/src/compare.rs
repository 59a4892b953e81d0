//! Comparing two sets of runs, A and B, metric by metric, with an honest
//! verdict on each difference (`rackbench results compare`; a page can
//! render the same [`Comparison`]).
//!
//! Each side is a set of stored runs: one or several invocations, the
//! iterations of `rackbench run -n`, a host's or a period's runs. Runs of
//! the same job (and role) on both sides are compared; each successful run
//! is one sample of each numeric metric it reports. Per metric:
//!
//! - each side's mean and sample standard deviation;
//! - with 2 or more runs a side: Welch's t-test of equal means, the
//!   relative difference (B - A) / |A| with its 95% interval (Fieller's,
//!   see [`crate::stats`]) and a verdict: "B is 11.8% higher, faster (95%
//!   CI 8.9..14.6%, Welch t-test p=0.002, 5 vs 5 runs)" or "no significant
//!   difference at this noise (...)". Better and worse come from the
//!   metric's definition ([`crate::direction`]); a metric without one gets
//!   no judgement;
//! - with a single run on a side: that noise cannot be judged, and how
//!   many runs per side would resolve the observed difference at 95%
//!   confidence with 80% power, given the noise the store has seen for the
//!   job and metric on those hosts (the pooled standard deviation within
//!   groups of other runs with the same host and arguments, and within a
//!   side that has several runs); without such history, what to run.

use crate::stats::{self, Summary, Welch};
use crate::store::{RunRow, flatten_numbers};
use direction::{Better, Directions, Sense};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The confidence level of the intervals and the test (5% significance).
pub const LEVEL: f64 = 0.95;
/// The power the suggested run counts aim at.
pub const POWER: f64 = 0.8;
/// Run counts above this are reported as "more than".
pub const MAX_SUGGESTED_RUNS: u32 = 1000;
/// What to suggest when nothing tells the noise.
pub const DEFAULT_RUNS: u32 = 5;

/// One side as selected: its description and its rows (failed ones
/// included; they are counted and left out).
#[derive(Debug, Clone)]
pub struct SideRows {
    pub selection: String,
    pub rows: Vec<RunRow>,
}

/// A side of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideInfo {
    /// How it was selected (`run 1a2b3c4d`, `host h1, job j`, ...).
    pub selection: String,
    /// Successful runs used.
    pub runs: usize,
    /// Failed runs the selection held, left out.
    pub failed_runs: usize,
    pub run_ids: Vec<String>,
    pub hosts: Vec<String>,
}

/// Which way B moved from A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Higher,
    Lower,
    Same,
}

/// Whether a change is for the better, by the metric's definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Judgement {
    Better,
    Worse,
}

/// The noise a run-count suggestion assumes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Noise {
    /// The pooled standard deviation of the metric.
    pub stdev: f64,
    /// Runs it was estimated from.
    pub runs: usize,
    /// Of those, runs outside the comparison (the store's history).
    pub history_runs: usize,
}

/// What to run when a side has a single run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suggestion {
    /// `None` when neither the store's history nor the sides tell it.
    pub noise: Option<Noise>,
    /// Runs per side that would resolve the observed difference at 95%
    /// confidence with 80% power; `None` without a noise estimate, without
    /// a difference, or when more than [`MAX_SUGGESTED_RUNS`] would be
    /// needed.
    pub runs_per_side: Option<u32>,
}

/// The verdict on one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// Welch's test rejects equal means at 5%.
    Significant {
        change: Change,
        judgement: Option<Judgement>,
    },
    /// It does not: the difference is within the noise.
    NotSignificant,
    /// Several runs a side and not one varies: the difference (or its
    /// absence) is exact.
    NoNoise {
        change: Change,
        judgement: Option<Judgement>,
    },
    /// A side has a single run.
    NoiseUnknown { suggestion: Suggestion },
}

/// One metric of one job, compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    pub job: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub metric: String,
    pub better: Better,
    /// How a change of it reads ("faster" or "better"); not serialised.
    #[serde(skip)]
    pub sense: Sense,
    pub a: Summary,
    pub b: Summary,
    /// (mean B - mean A) / |mean A| in percent; `None` when mean A is 0.
    pub change_pct: Option<f64>,
    /// The test, with 2 or more runs a side and some noise.
    pub welch: Option<Welch>,
    pub verdict: Verdict,
    /// The verdict in words.
    pub text: String,
}

/// Two sides compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub a: SideInfo,
    pub b: SideInfo,
    pub level: f64,
    pub metrics: Vec<MetricComparison>,
    /// The jobs whose runs on the two sides had different arguments: the
    /// runs are not like for like.
    pub settings: Vec<SettingsDiff>,
    /// What was left out, and how to read many verdicts at once.
    pub notes: Vec<String>,
}

/// A job (and role) whose runs' arguments differ between the sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettingsDiff {
    pub job: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The distinct argument lines of side A's runs (shell-quoted).
    pub a: Vec<String>,
    pub b: Vec<String>,
}

impl Comparison {
    /// The metrics whose difference is significant (or exact).
    pub fn differing(&self) -> impl Iterator<Item = &MetricComparison> {
        self.metrics.iter().filter(|m| {
            matches!(
                m.verdict,
                Verdict::Significant { .. }
                    | Verdict::NoNoise {
                        change: Change::Higher | Change::Lower,
                        ..
                    }
            )
        })
    }
}

/// Why two sides cannot be compared.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    #[error("side {side} ({selection}) holds no run")]
    Empty { side: char, selection: String },
    #[error("side {side} ({selection}) holds no successful run ({failed} failed)")]
    OnlyFailed {
        side: char,
        selection: String,
        failed: usize,
    },
    #[error(
        "the sides overlap: {count} run(s) are in both A and B (e.g. run {example}); select disjoint sets"
    )]
    Overlap { count: usize, example: String },
    #[error(
        "A and B share no job with numeric metrics (A: {a_jobs}; B: {b_jobs}); compare runs of the same job"
    )]
    NoCommonJob { a_jobs: String, b_jobs: String },
}

/// A job and role (the unit compared).
type Unit = (String, Option<String>);

fn unit_name(u: &Unit) -> String {
    match &u.1 {
        Some(r) => format!("{} (role {r})", u.0),
        None => u.0.clone(),
    }
}

fn by_unit(rows: &[&RunRow]) -> BTreeMap<Unit, Vec<RunRow>> {
    let mut m: BTreeMap<Unit, Vec<RunRow>> = BTreeMap::new();
    for r in rows {
        m.entry((r.job.clone(), r.role.clone()))
            .or_default()
            .push((*r).clone());
    }
    m
}

/// The jobs of `a` and `b` that a comparison would look up history for:
/// those with a single run on a side. The caller fetches their successful
/// runs (`Store::select`) and hands them to [`compare`].
pub fn jobs_needing_history(a: &[RunRow], b: &[RunRow]) -> Vec<String> {
    let count = |rows: &[RunRow]| {
        let mut m: BTreeMap<Unit, usize> = BTreeMap::new();
        for r in rows.iter().filter(|r| r.success) {
            *m.entry((r.job.clone(), r.role.clone())).or_default() += 1;
        }
        m
    };
    let (ca, cb) = (count(a), count(b));
    let mut jobs: BTreeSet<String> = BTreeSet::new();
    for (u, na) in &ca {
        if let Some(nb) = cb.get(u)
            && (*na < 2 || *nb < 2)
        {
            jobs.insert(u.0.clone());
        }
    }
    jobs.into_iter().collect()
}

/// A point in time for a side's `--a-since` and the like, in Unix seconds:
/// `YYYY-MM-DD` (midnight UTC), `YYYY-MM-DD HH:MM[:SS]` or
/// `YYYY-MM-DDTHH:MM[:SS]` (UTC, as `results list` prints times), or an
/// RFC 3339 time with its offset.
pub fn parse_when(text: &str) -> Result<u64, crate::Error> {
    let t = text.trim();
    let utc = jiff::tz::TimeZone::UTC;
    let ts = if let Ok(ts) = t.parse::<jiff::Timestamp>() {
        Some(ts)
    } else if let Ok(dt) = t.parse::<jiff::civil::DateTime>() {
        utc.to_timestamp(dt).ok()
    } else if let Ok(d) = t.parse::<jiff::civil::Date>() {
        utc.to_timestamp(d.at(0, 0, 0, 0)).ok()
    } else {
        None
    };
    match ts.map(|ts| ts.as_second()) {
        Some(s) if s >= 0 => Ok(s as u64),
        Some(_) => Err(crate::Error::Input(format!(
            "'{text}' is before 1970, when no run was recorded"
        ))),
        None => Err(crate::Error::Input(format!(
            "'{text}' is not a date or time: use YYYY-MM-DD, 'YYYY-MM-DD HH:MM[:SS]' (UTC) or an RFC 3339 time such as 2026-05-01T12:00:00+02:00"
        ))),
    }
}

/// Keeps the newest `n` rows (by store order) of each job and role.
pub fn newest_per_job(rows: Vec<RunRow>, n: usize) -> Vec<RunRow> {
    let mut seen: BTreeMap<Unit, usize> = BTreeMap::new();
    let mut sorted = rows;
    sorted.sort_by_key(|r| std::cmp::Reverse(r.id));
    let mut kept: Vec<RunRow> = sorted
        .into_iter()
        .filter(|r| {
            let c = seen.entry((r.job.clone(), r.role.clone())).or_default();
            *c += 1;
            *c <= n
        })
        .collect();
    kept.sort_by_key(|r| r.id);
    kept
}

fn side_info(s: &SideRows, ok: &[&RunRow]) -> SideInfo {
    let set = |f: fn(&RunRow) -> &String| {
        ok.iter()
            .map(|r| f(r).clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    SideInfo {
        selection: s.selection.clone(),
        runs: ok.len(),
        failed_runs: s.rows.len() - ok.len(),
        run_ids: set(|r| &r.run_id),
        hosts: set(|r| &r.hostname),
    }
}

/// Compares A with B. `history` holds stored runs of the compared jobs
/// (any, typically every successful run of [`jobs_needing_history`]); the
/// noise for a single-run side is estimated from those on the sides'
/// hosts, the compared runs themselves left out.
pub fn compare(
    a: &SideRows,
    b: &SideRows,
    history: &[RunRow],
    directions: &dyn Directions,
) -> Result<Comparison, CompareError> {
    let mut ok = Vec::new();
    for (side, s) in [('A', a), ('B', b)] {
        if s.rows.is_empty() {
            return Err(CompareError::Empty {
                side,
                selection: s.selection.clone(),
            });
        }
        let good: Vec<&RunRow> = s.rows.iter().filter(|r| r.success).collect();
        if good.is_empty() {
            return Err(CompareError::OnlyFailed {
                side,
                selection: s.selection.clone(),
                failed: s.rows.len(),
            });
        }
        ok.push(good);
    }
    let (ok_a, ok_b) = (&ok[0], &ok[1]);
    let ids_a: BTreeSet<i64> = a.rows.iter().map(|r| r.id).collect();
    let both: Vec<&RunRow> = b.rows.iter().filter(|r| ids_a.contains(&r.id)).collect();
    if let Some(first) = both.first() {
        return Err(CompareError::Overlap {
            count: both.len(),
            example: format!("{} job {}", first.run_id, first.job),
        });
    }
    let compared: BTreeSet<i64> = a.rows.iter().chain(&b.rows).map(|r| r.id).collect();
    let (ua, ub) = (by_unit(ok_a), by_unit(ok_b));
    // The history's successful runs, flattened once, when a verdict needs
    // its noise (a side with one run).
    let history_flat: std::cell::OnceCell<Vec<(&RunRow, BTreeMap<String, f64>)>> =
        std::cell::OnceCell::new();
    let mut metrics = Vec::new();
    let mut settings = Vec::new();
    let mut notes = Vec::new();
    for (unit, rows_a) in &ua {
        let Some(rows_b) = ub.get(unit) else {
            continue;
        };
        let (va, vb) = (values(rows_a), values(rows_b));
        let tables = rows_a
            .first()
            .map_or(&[][..], |r| directions.tables(&r.benchmark));
        let argv = |rows: &[RunRow]| -> BTreeSet<String> {
            rows.iter().map(|r| shell_words::join(&r.args)).collect()
        };
        let (args_a, args_b) = (argv(rows_a), argv(rows_b));
        if args_a != args_b {
            settings.push(SettingsDiff {
                job: unit.0.clone(),
                role: unit.1.clone(),
                a: args_a.into_iter().collect(),
                b: args_b.into_iter().collect(),
            });
        }
        for (metric, xa) in &va {
            let Some(xb) = vb.get(metric) else { continue };
            let (Some(sa), Some(sb)) = (Summary::of(xa), Summary::of(xb)) else {
                continue;
            };
            let noise = || {
                let flat = history_flat.get_or_init(|| {
                    history
                        .iter()
                        .filter(|r| r.success)
                        .map(|r| (r, flatten_numbers(&r.metrics)))
                        .collect()
                });
                let sides = [va.get(metric), vb.get(metric)].map(|v| v.map_or(&[][..], |v| &v[..]));
                pooled_noise(unit, metric, rows_a, rows_b, sides, flat, &compared)
            };
            metrics.push(judge(unit, metric, tables, sa, sb, noise));
        }
    }
    let names =
        |u: &BTreeMap<Unit, Vec<RunRow>>| u.keys().map(unit_name).collect::<Vec<_>>().join(", ");
    if metrics.is_empty() {
        return Err(CompareError::NoCommonJob {
            a_jobs: names(&ua),
            b_jobs: names(&ub),
        });
    }
    for (side, mine, other) in [('A', &ua, &ub), ('B', &ub, &ua)] {
        let only: Vec<String> = mine
            .keys()
            .filter(|u| !other.contains_key(*u))
            .map(unit_name)
            .collect();
        if !only.is_empty() {
            notes.push(format!("only in {side}, not compared: {}", only.join(", ")));
        }
    }
    for (side, s, good) in [('A', a, ok_a), ('B', b, ok_b)] {
        let failed = s.rows.len() - good.len();
        if failed > 0 {
            notes.push(format!("{failed} failed run(s) of side {side} left out"));
        }
    }
    let tested = metrics.iter().filter(|m| m.welch.is_some()).count();
    if tested >= 10 {
        notes.push(format!(
            "{tested} metrics were tested at 5%: about {} of them would show a significant difference by chance alone, so weigh the metrics that matter for the job first",
            (tested as f64 * (1.0 - LEVEL)).round().max(1.0)
        ));
    }
    Ok(Comparison {
        a: side_info(a, ok_a),
        b: side_info(b, ok_b),
        level: LEVEL,
        metrics,
        settings,
        notes,
    })
}

/// Each numeric metric's values over `rows` (a row without it adds none).
fn values(rows: &[RunRow]) -> BTreeMap<String, Vec<f64>> {
    let mut m: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in rows {
        for (k, v) in flatten_numbers(&r.metrics) {
            m.entry(k).or_default().push(v);
        }
    }
    m
}

/// The pooled within-group standard deviation of `metric`: groups are
/// the history's other successful runs of the unit on the sides' hosts,
/// by host and arguments, and each side with 2 or more runs (`sides`: the
/// sides' values of it). `history` is flattened already, successful runs
/// only.
fn pooled_noise(
    unit: &Unit,
    metric: &str,
    rows_a: &[RunRow],
    rows_b: &[RunRow],
    sides: [&[f64]; 2],
    history: &[(&RunRow, BTreeMap<String, f64>)],
    compared: &BTreeSet<i64>,
) -> Option<Noise> {
    let hosts: BTreeSet<&str> = rows_a
        .iter()
        .chain(rows_b)
        .map(|r| r.hostname.as_str())
        .collect();
    let mut groups: BTreeMap<(&str, &[String]), Vec<f64>> = BTreeMap::new();
    let mut seen: BTreeSet<i64> = BTreeSet::new();
    for (r, flat) in history {
        if r.job != unit.0
            || r.role != unit.1
            || !hosts.contains(r.hostname.as_str())
            || compared.contains(&r.id)
            || !seen.insert(r.id)
        {
            continue;
        }
        if let Some(v) = flat.get(metric) {
            groups
                .entry((r.hostname.as_str(), &r.args[..]))
                .or_default()
                .push(*v);
        }
    }
    let mut sum_sq = 0.0;
    let mut dof = 0usize;
    let mut runs = 0usize;
    let mut history_runs = 0usize;
    for (vals, from_history) in groups
        .values()
        .map(|v| (&v[..], true))
        .chain(sides.iter().map(|v| (*v, false)))
    {
        let Some(s) = Summary::of(vals) else { continue };
        let Some(sd) = s.stdev else { continue };
        sum_sq += sd * sd * (s.n - 1) as f64;
        dof += s.n - 1;
        runs += s.n;
        if from_history {
            history_runs += s.n;
        }
    }
    (dof > 0).then(|| Noise {
        stdev: (sum_sq / dof as f64).sqrt(),
        runs,
        history_runs,
    })
}

fn change_of(diff: f64) -> Change {
    if diff > 0.0 {
        Change::Higher
    } else if diff < 0.0 {
        Change::Lower
    } else {
        Change::Same
    }
}

fn judgement(better: Better, change: Change) -> Option<Judgement> {
    match (better, change) {
        (_, Change::Same) | (Better::Neutral, _) => None,
        (Better::Higher, Change::Higher) | (Better::Lower, Change::Lower) => {
            Some(Judgement::Better)
        }
        _ => Some(Judgement::Worse),
    }
}

fn judge(
    unit: &Unit,
    metric: &str,
    tables: &[&[direction::Rule]],
    a: Summary,
    b: Summary,
    noise: impl FnOnce() -> Option<Noise>,
) -> MetricComparison {
    let rule = direction::rule_in(tables, metric);
    let better = rule.map_or(Better::Neutral, |r| r.better);
    let sense = rule.map_or(Sense::Quality, |r| r.sense);
    let diff = b.mean - a.mean;
    let change = change_of(diff);
    let change_pct = (a.mean != 0.0).then(|| diff / a.mean.abs() * 100.0);
    let welch = stats::welch(&a, &b, LEVEL);
    let verdict = if a.n < 2 || b.n < 2 {
        let noise = noise();
        let runs_per_side = match &noise {
            Some(n) if diff != 0.0 => stats::runs_per_side(
                if n.stdev > 0.0 {
                    diff / n.stdev
                } else {
                    f64::INFINITY
                },
                1.0 - LEVEL,
                POWER,
                MAX_SUGGESTED_RUNS,
            ),
            _ => None,
        };
        Verdict::NoiseUnknown {
            suggestion: Suggestion {
                noise,
                runs_per_side,
            },
        }
    } else {
        match &welch {
            Some(w) if w.p < 1.0 - LEVEL => Verdict::Significant {
                change,
                judgement: judgement(better, change),
            },
            Some(_) => Verdict::NotSignificant,
            // Both sides have 2+ runs, so no test means no variance.
            None => Verdict::NoNoise {
                change,
                judgement: judgement(better, change),
            },
        }
    };
    let mut m = MetricComparison {
        job: unit.0.clone(),
        role: unit.1.clone(),
        metric: metric.to_string(),
        better,
        sense,
        a,
        b,
        change_pct,
        welch,
        verdict,
        text: String::new(),
    };
    m.text = verdict_text(&m);
    m
}

/// A number with about 4 significant digits, trailing zeros dropped.
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return "0".into();
    }
    let mag = x.abs().log10().floor() as i32;
    let decimals = (3 - mag).clamp(0, 6) as usize;
    let s = format!("{x:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" { "0".into() } else { s }
}

/// A percentage: one decimal, two below 1%.
pub fn fmt_pct(x: f64) -> String {
    if x.abs() < 1.0 && x != 0.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.1}")
    }
}

/// A p-value: `p<0.001`, else three decimals below 0.1 and two above,
/// with more where rounding would move it across 0.05 (a significant
/// 0.04996 prints as 0.04996, not 0.050).
pub fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        return "p<0.001".into();
    }
    let first = if p < 0.1 { 3 } else { 2 };
    for decimals in first..=8 {
        let s = format!("{p:.decimals$}");
        if s.parse::<f64>().is_ok_and(|r| (r < 0.05) == (p < 0.05)) {
            return format!("p={s}");
        }
    }
    format!("p={p}")
}

/// "B is 11.8% higher, faster" (without the parenthesis).
fn moved(m: &MetricComparison, change: Change, judgement: Option<Judgement>) -> String {
    let dir = match change {
        Change::Higher => "higher",
        Change::Lower => "lower",
        Change::Same => "the same",
    };
    let size = match (change, m.change_pct) {
        (Change::Same, _) => String::new(),
        (_, Some(p)) => format!("{}% ", fmt_pct(p.abs())),
        (_, None) => String::new(),
    };
    let by = match (change, m.change_pct) {
        (Change::Higher | Change::Lower, None) => {
            format!(
                " by {} (A's mean is 0)",
                fmt_num((m.b.mean - m.a.mean).abs())
            )
        }
        _ => String::new(),
    };
    let words = m.sense;
    let judged = match judgement {
        Some(Judgement::Better) => format!(", {}", words.words().0),
        Some(Judgement::Worse) => format!(", {}", words.words().1),
        None => String::new(),
    };
    format!("B is {size}{dir}{by}{judged}")
}

/// "95% CI 8.9..14.6%, Welch t-test p=0.002".
fn test_words(m: &MetricComparison, w: &Welch) -> String {
    let level = format!("{:.0}%", w.level * 100.0);
    let ci = match (m.change_pct, w.change_pct_ci) {
        (Some(_), Some((lo, hi))) => format!("{level} CI {}..{}%", fmt_pct(lo), fmt_pct(hi)),
        (Some(_), None) => {
            format!("{level} CI of the change unbounded: A's mean is within its noise of 0")
        }
        (None, _) => format!(
            "{level} CI of B - A {}..{}",
            fmt_num(w.diff_ci.0),
            fmt_num(w.diff_ci.1)
        ),
    };
    format!("{ci}, Welch t-test {}", fmt_p(w.p))
}

fn runs_words(m: &MetricComparison) -> String {
    format!("{} vs {} runs", m.a.n, m.b.n)
}

/// The verdict of `m` in words.
pub fn verdict_text(m: &MetricComparison) -> String {
    match (&m.verdict, &m.welch) {
        (Verdict::Significant { change, judgement }, Some(w)) => format!(
            "{} ({}, {})",
            moved(m, *change, *judgement),
            test_words(m, w),
            runs_words(m)
        ),
        (Verdict::NotSignificant, Some(w)) => {
            let shift = match change_of(m.b.mean - m.a.mean) {
                Change::Same => "equal means".to_string(),
                change => moved(m, change, None).replacen("B is ", "B ", 1),
            };
            format!(
                "no significant difference at this noise ({shift}, {}, {})",
                test_words(m, w),
                runs_words(m)
            )
        }
        (
            Verdict::NoNoise {
                change: Change::Same,
                ..
            },
            _,
        ) => format!(
            "no difference: every run gave {} ({})",
            fmt_num(m.a.mean),
            runs_words(m)
        ),
        (Verdict::NoNoise { change, judgement }, _) => format!(
            "{}: every run of each side gave the same value ({} vs {}, {}), so no test is needed",
            moved(m, *change, *judgement),
            fmt_num(m.a.mean),
            fmt_num(m.b.mean),
            runs_words(m)
        ),
        (Verdict::NoiseUnknown { suggestion }, _) => {
            let change = change_of(m.b.mean - m.a.mean);
            let shift = if change == Change::Same {
                "B equals A".to_string()
            } else {
                moved(m, change, None)
            };
            format!(
                "noise cannot be judged with {}: {shift}; {}",
                runs_words(m),
                suggestion_text(m, suggestion, change)
            )
        }
        // A verdict of a test without its numbers is never made.
        (Verdict::Significant { .. } | Verdict::NotSignificant, None) => {
            "no test could be made".into()
        }
    }
}

fn suggestion_text(m: &MetricComparison, s: &Suggestion, change: Change) -> String {
    let run_more = format!(
        "run each side at least {DEFAULT_RUNS} times (`rackbench run {} -n {DEFAULT_RUNS}`)",
        m.job
    );
    let Some(noise) = &s.noise else {
        return format!("no repeated runs of the job on these hosts tell the noise: {run_more}");
    };
    let sd = if m.a.mean != 0.0 {
        format!(
            "{}% of A's mean",
            fmt_pct(noise.stdev / m.a.mean.abs() * 100.0)
        )
    } else {
        fmt_num(noise.stdev)
    };
    let source = if noise.history_runs == noise.runs {
        format!("{} other runs of the job on these hosts", noise.runs)
    } else if noise.history_runs == 0 {
        format!("the {} runs of the side with several", noise.runs)
    } else {
        format!(
            "{} runs: {} other ones on these hosts and the side with several",
            noise.runs, noise.history_runs
        )
    };
    let seen = format!("stdev {sd}, pooled over {source}");
    match (change, s.runs_per_side) {
        (Change::Same, _) => format!("{run_more} to measure the noise ({seen})"),
        (_, Some(n)) => format!(
            "about {n} runs per side would resolve a difference this size at {:.0}% confidence with {:.0}% power ({seen})",
            LEVEL * 100.0,
            POWER * 100.0
        ),
        (_, None) => format!(
            "more than {MAX_SUGGESTED_RUNS} runs per side would be needed to resolve a difference this size: it is far below the noise ({seen})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use direction::{Rule, rule};
    use serde_json::json;

    /// The directions of the metrics these tests compare.
    struct TestDirections;

    impl Directions for TestDirections {
        fn tables(&self, _benchmark: &str) -> &'static [&'static [Rule]] {
            static RULES: &[Rule] = &[
                rule("final_achieved_qps", Better::Higher, Sense::Speed, "rate"),
                rule("**.*_ms", Better::Lower, Sense::Speed, "latency"),
                rule("ops_per_sec", Better::Higher, Sense::Speed, "rate"),
                rule("failed_rpcs", Better::Lower, Sense::Quality, "failures"),
            ];
            static TABLES: &[&[Rule]] = &[RULES];
            TABLES
        }
    }

    /// [`super::compare`] with the tests' directions.
    fn compare(a: &SideRows, b: &SideRows, history: &[RunRow]) -> Result<Comparison, CompareError> {
        super::compare(a, b, history, &TestDirections)
    }

    /// A successful row of job `job` on `host` with `metrics`.
    fn run(id: i64, run_id: &str, job: &str, host: &str, metrics: serde_json::Value) -> RunRow {
        RunRow {
            id,
            run_id: run_id.into(),
            job: job.into(),
            benchmark: "bench".into(),
            role: None,
            iteration: 1,
            timestamp: 1_700_000_000 + id as u64,
            success: true,
            hostname: host.into(),
            args: vec![],
            machine: json!({}),
            metrics,
            report_path: None,
            artifacts_dir: None,
            record: None,
            duration_secs: None,
        }
    }

    /// A side of rows with `key` taking `values`, ids from `first_id`.
    fn side(first_id: i64, run_id: &str, host: &str, key: &str, values: &[f64]) -> SideRows {
        SideRows {
            selection: format!("run {run_id}"),
            rows: values
                .iter()
                .enumerate()
                .map(|(i, v)| run(first_id + i as i64, run_id, "j", host, json!({ key: v })))
                .collect(),
        }
    }

    fn one(c: &Comparison, metric: &str) -> MetricComparison {
        c.metrics
            .iter()
            .find(|m| m.metric == metric)
            .unwrap()
            .clone()
    }

    const NOISE: [f64; 5] = [-1.2, 0.4, 0.9, -0.3, 0.2];

    #[test]
    fn equal_means_are_no_significant_difference() {
        let a: Vec<f64> = NOISE.iter().map(|n| 100.0 + n).collect();
        // The same true mean, other noise of the same size.
        let b: Vec<f64> = [0.7, -0.9, 0.1, 0.5, -0.4]
            .iter()
            .map(|n| 100.0 + n)
            .collect();
        let c = compare(
            &side(1, "aaaa", "h", "final_achieved_qps", &a),
            &side(10, "bbbb", "h", "final_achieved_qps", &b),
            &[],
        )
        .unwrap();
        let m = one(&c, "final_achieved_qps");
        assert_eq!(m.verdict, Verdict::NotSignificant);
        let w = m.welch.as_ref().unwrap();
        assert!(w.p > 0.9, "{w:?}");
        let (lo, hi) = w.change_pct_ci.unwrap();
        assert!(lo < 0.0 && hi > 0.0, "{lo} {hi}");
        assert!(
            m.text
                .starts_with("no significant difference at this noise ("),
            "{}",
            m.text
        );
        assert!(m.text.contains("Welch t-test p=") && m.text.ends_with("5 vs 5 runs)"));
        assert!(
            !m.text.contains("faster") && !m.text.contains("slower"),
            "{}",
            m.text
        );
        assert_eq!(c.differing().count(), 0);
    }

    #[test]
    fn a_known_shift_is_significant_with_the_right_direction_and_interval() {
        // B is A + 10%: 110 against 100, with small noise on both sides.
        let a: Vec<f64> = NOISE.iter().map(|n| 100.0 + n).collect();
        let b: Vec<f64> = NOISE.iter().rev().map(|n| 110.0 + n).collect();
        let c = compare(
            &side(1, "aaaa", "h", "final_achieved_qps", &a),
            &side(10, "bbbb", "h", "final_achieved_qps", &b),
            &[],
        )
        .unwrap();
        let m = one(&c, "final_achieved_qps");
        assert_eq!(
            m.verdict,
            Verdict::Significant {
                change: Change::Higher,
                judgement: Some(Judgement::Better)
            }
        );
        assert!((m.change_pct.unwrap() - 10.0).abs() < 1e-9);
        let w = m.welch.as_ref().unwrap();
        assert!(w.p < 1e-6, "{w:?}");
        let (lo, hi) = w.change_pct_ci.unwrap();
        assert!(lo < 10.0 && 10.0 < hi && lo > 8.0 && hi < 12.0, "{lo} {hi}");
        assert!(
            m.text.starts_with("B is 10.0% higher, faster (95% CI "),
            "{}",
            m.text
        );
        assert!(
            m.text.ends_with("Welch t-test p<0.001, 5 vs 5 runs)"),
            "{}",
            m.text
        );
        // The other way round: B slower.
        let c = compare(
            &side(1, "aaaa", "h", "final_achieved_qps", &b),
            &side(10, "bbbb", "h", "final_achieved_qps", &a),
            &[],
        )
        .unwrap();
        let m = one(&c, "final_achieved_qps");
        assert!(
            m.text.starts_with("B is 9.1% lower, slower (95% CI -"),
            "{}",
            m.text
        );
    }

    #[test]
    fn lower_latency_is_faster_and_a_neutral_metric_is_not_judged() {
        let a: Vec<f64> = NOISE.iter().map(|n| 20.0 + n / 10.0).collect();
        let b: Vec<f64> = NOISE.iter().map(|n| 18.0 + n / 10.0).collect();
        let rows = |first: i64, id: &str, v: &[f64]| SideRows {
            selection: format!("run {id}"),
            rows: v
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    run(
                        first + i as i64,
                        id,
                        "j",
                        "h",
                        json!({"final_latency": {"p99_ms": x}, "rss_bytes": x * 1e6}),
                    )
                })
                .collect(),
        };
        let c = compare(&rows(1, "aaaa", &a), &rows(10, "bbbb", &b), &[]).unwrap();
        let lat = one(&c, "final_latency.p99_ms");
        assert_eq!(lat.better, Better::Lower);
        assert_eq!(
            lat.verdict,
            Verdict::Significant {
                change: Change::Lower,
                judgement: Some(Judgement::Better)
            }
        );
        assert!(
            lat.text.starts_with("B is 10.0% lower, faster ("),
            "{}",
            lat.text
        );
        let rss = one(&c, "rss_bytes");
        assert_eq!(rss.better, Better::Neutral);
        assert!(
            rss.text.starts_with("B is 10.0% lower (95% CI"),
            "{}",
            rss.text
        );
        // Higher latency is slower.
        let c = compare(&rows(1, "aaaa", &b), &rows(10, "bbbb", &a), &[]).unwrap();
        let lat = one(&c, "final_latency.p99_ms");
        assert!(
            lat.text.starts_with("B is 11.1% higher, slower ("),
            "{}",
            lat.text
        );
    }

    #[test]
    fn one_run_a_side_cannot_judge_noise_and_suggests_runs_from_history() {
        let a = side(1, "aaaa", "h", "final_achieved_qps", &[100.0]);
        let b = side(2, "bbbb", "h", "final_achieved_qps", &[104.0]);
        // Without history: what to run.
        let c = compare(&a, &b, &[]).unwrap();
        let m = one(&c, "final_achieved_qps");
        assert_eq!(
            m.verdict,
            Verdict::NoiseUnknown {
                suggestion: Suggestion {
                    noise: None,
                    runs_per_side: None
                }
            }
        );
        assert_eq!(
            m.text,
            "noise cannot be judged with 1 vs 1 runs: B is 4.0% higher; no repeated runs of the job on these hosts tell the noise: run each side at least 5 times (`rackbench run j -n 5`)"
        );
        // History on the host: two earlier invocations of 2 runs, stdev 4
        // each (values m ± 2.828...); another host's runs and the compared
        // runs themselves do not count.
        let d = 8.0f64.sqrt();
        let mut history = vec![
            run(20, "h1", "j", "h", json!({"final_achieved_qps": 90.0 - d})),
            run(21, "h1", "j", "h", json!({"final_achieved_qps": 90.0 + d})),
            run(22, "h2", "j", "h", json!({"final_achieved_qps": 95.0 - d})),
            run(23, "h2", "j", "h", json!({"final_achieved_qps": 95.0 + d})),
            run(24, "x", "j", "other", json!({"final_achieved_qps": 1.0})),
            run(25, "x", "j", "other", json!({"final_achieved_qps": 500.0})),
            run(26, "y", "k", "h", json!({"final_achieved_qps": 1.0})),
            run(27, "y", "k", "h", json!({"final_achieved_qps": 500.0})),
        ];
        // Differing args: a group of their own.
        history[2].args = vec!["--other".into()];
        history[3].args = vec!["--other".into()];
        history.extend(a.rows.iter().cloned());
        history.extend(b.rows.iter().cloned());
        let c = compare(&a, &b, &history).unwrap();
        let m = one(&c, "final_achieved_qps");
        let Verdict::NoiseUnknown { suggestion } = &m.verdict else {
            panic!("{:?}", m.verdict)
        };
        let noise = suggestion.noise.as_ref().unwrap();
        assert!((noise.stdev - 4.0).abs() < 1e-9, "{noise:?}");
        assert_eq!((noise.runs, noise.history_runs), (4, 4));
        // A difference of 4 with stdev 4: effect 1, 17 runs per side
        // (R's power.t.test: 16.7).
        assert_eq!(suggestion.runs_per_side, Some(17));
        assert!(
            m.text.ends_with(
                "about 17 runs per side would resolve a difference this size at 95% confidence with 80% power (stdev 4.0% of A's mean, pooled over 4 other runs of the job on these hosts)"
            ),
            "{}",
            m.text
        );
        assert_eq!(jobs_needing_history(&a.rows, &b.rows), ["j"]);
    }

    #[test]
    fn one_run_against_several_uses_the_several_for_the_noise() {
        let a = side(1, "aaaa", "h", "kqps", &[10.0]);
        let b = side(2, "bbbb", "h", "kqps", &[12.0, 14.0, 16.0]);
        let c = compare(&a, &b, &[]).unwrap();
        let m = one(&c, "kqps");
        let Verdict::NoiseUnknown { suggestion } = &m.verdict else {
            panic!("{:?}", m.verdict)
        };
        let noise = suggestion.noise.as_ref().unwrap();
        assert_eq!((noise.stdev, noise.runs, noise.history_runs), (2.0, 3, 0));
        // Difference 4, stdev 2: effect 2, 6 runs (power.t.test: 5.09).
        assert_eq!(suggestion.runs_per_side, Some(6));
        assert!(
            m.text.starts_with(
                "noise cannot be judged with 1 vs 3 runs: B is 40.0% higher; about 6 runs per side"
            ),
            "{}",
            m.text
        );
    }

    #[test]
    fn identical_runs_and_exact_differences() {
        let c = compare(
            &side(1, "aaaa", "h", "tests_planned", &[3.0, 3.0]),
            &side(10, "bbbb", "h", "tests_planned", &[3.0, 3.0, 3.0]),
            &[],
        )
        .unwrap();
        let m = one(&c, "tests_planned");
        assert_eq!(m.text, "no difference: every run gave 3 (2 vs 3 runs)");
        let c = compare(
            &side(1, "aaaa", "h", "ops_per_sec", &[100.0, 100.0]),
            &side(10, "bbbb", "h", "ops_per_sec", &[90.0, 90.0]),
            &[],
        )
        .unwrap();
        let m = one(&c, "ops_per_sec");
        assert_eq!(
            m.text,
            "B is 10.0% lower, slower: every run of each side gave the same value (100 vs 90, 2 vs 2 runs), so no test is needed"
        );
        assert_eq!(c.differing().count(), 1);
        // 1 vs 1 with the same value.
        let c = compare(
            &side(1, "aaaa", "h", "ops_per_sec", &[100.0]),
            &side(10, "bbbb", "h", "ops_per_sec", &[100.0]),
            &[],
        )
        .unwrap();
        assert!(
            one(&c, "ops_per_sec").text.starts_with(
                "noise cannot be judged with 1 vs 1 runs: B equals A; no repeated runs"
            ),
            "{}",
            one(&c, "ops_per_sec").text
        );
    }

    #[test]
    fn a_zero_mean_a_gives_the_absolute_difference() {
        let c = compare(
            &side(1, "aaaa", "h", "failed_rpcs", &[0.0, 0.0, 0.0]),
            &side(10, "bbbb", "h", "failed_rpcs", &[5.0, 6.0, 7.0]),
            &[],
        )
        .unwrap();
        let m = one(&c, "failed_rpcs");
        assert_eq!(m.change_pct, None);
        assert!(
            m.text
                .starts_with("B is higher by 6 (A's mean is 0), worse (95% CI of B - A "),
            "{}",
            m.text
        );
    }

    #[test]
    fn sides_failures_overlap_and_unmatched_jobs() {
        let a = side(1, "aaaa", "h", "kqps", &[1.0, 2.0]);
        let mut b = side(10, "bbbb", "h", "kqps", &[1.0, 2.0, 3.0]);
        b.rows[2].success = false;
        b.rows
            .push(run(20, "bbbb", "other", "h", json!({"kqps": 1.0})));
        let c = compare(&a, &b, &[]).unwrap();
        assert_eq!(c.b.runs, 3);
        assert_eq!(c.b.failed_runs, 1);
        assert_eq!(one(&c, "kqps").b.n, 2);
        assert_eq!(
            c.notes,
            [
                "only in B, not compared: other",
                "1 failed run(s) of side B left out"
            ]
        );
        let e = compare(&a, &a, &[]).unwrap_err();
        assert!(e.to_string().contains("overlap"), "{e}");
        let e = compare(&a, &side(10, "bbbb", "h", "x", &[]), &[]).unwrap_err();
        assert!(matches!(e, CompareError::Empty { side: 'B', .. }), "{e}");
        let mut f = side(10, "bbbb", "h", "kqps", &[1.0]);
        f.rows[0].success = false;
        let e = compare(&a, &f, &[]).unwrap_err();
        assert!(
            e.to_string().contains("no successful run (1 failed)"),
            "{e}"
        );
        let mut other = side(10, "bbbb", "h", "kqps", &[1.0]);
        other.rows[0].job = "k".into();
        let e = compare(&a, &other, &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "A and B share no job with numeric metrics (A: j; B: k); compare runs of the same job"
        );
    }

    #[test]
    fn many_metrics_carry_a_multiple_comparisons_note() {
        let metrics = |base: f64, i: usize| {
            let m: serde_json::Map<String, serde_json::Value> = (0..12)
                .map(|k| (format!("m{k:02}"), json!(base + NOISE[i] + k as f64)))
                .collect();
            serde_json::Value::Object(m)
        };
        let mk = |first: i64, id: &str, base: f64| SideRows {
            selection: id.into(),
            rows: (0..5)
                .map(|i| run(first + i as i64, id, "j", "h", metrics(base, i)))
                .collect(),
        };
        let c = compare(&mk(1, "a", 100.0), &mk(10, "b", 100.0), &[]).unwrap();
        assert_eq!(c.metrics.len(), 12);
        assert!(
            c.notes[0].starts_with("12 metrics were tested at 5%: about 1 of them"),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn newest_per_job_keeps_the_last_n() {
        let rows: Vec<RunRow> = (1..=5)
            .map(|i| run(i, "r", if i % 2 == 0 { "j" } else { "k" }, "h", json!({})))
            .collect();
        let kept: Vec<i64> = newest_per_job(rows, 1).iter().map(|r| r.id).collect();
        assert_eq!(kept, [4, 5]);
    }

    #[test]
    fn dates() {
        assert_eq!(parse_when("2023-11-14"), Ok(1_699_920_000));
        assert_eq!(parse_when("2023-11-14 22:13:20"), Ok(1_700_000_000));
        assert_eq!(parse_when("2023-11-14T22:13"), Ok(1_699_999_980));
        assert_eq!(parse_when("2023-11-15T00:13:20+02:00"), Ok(1_700_000_000));
        let e = parse_when("yesterday").unwrap_err().to_string();
        assert!(
            e.contains("'yesterday' is not a date") && e.contains("YYYY-MM-DD"),
            "{e}"
        );
        assert!(
            parse_when("1969-12-31")
                .unwrap_err()
                .to_string()
                .contains("before 1970")
        );
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_num(269772.0596), "269772");
        assert_eq!(fmt_num(1234.5678), "1235");
        assert_eq!(fmt_num(0.41712), "0.4171");
        assert_eq!(fmt_num(100.0), "100");
        assert_eq!(fmt_num(-2.5), "-2.5");
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_pct(11.83), "11.8");
        assert_eq!(fmt_pct(0.4), "0.40");
        assert_eq!(fmt_p(0.0021), "p=0.002");
        assert_eq!(fmt_p(0.04996), "p=0.04996");
        assert_eq!(fmt_p(0.0502), "p=0.050");
        assert_eq!(fmt_p(0.71), "p=0.71");
        assert_eq!(fmt_p(0.0001), "p<0.001");
    }
}
