//! Text rendering of the catalogue, the results store and scores for the
//! command line.

use crate::compare::{self, Comparison};
use crate::job::{Catalogue, Job};
use crate::runner::Registry;
use crate::score::{JobScore, Overall, PoolScore};
use crate::stats;
use crate::store::RunRow;
use std::fmt::Write;

/// Pads cells into aligned columns.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(header.to_vec(), &mut out);
    for r in rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

/// `rackbench list`: jobs, optionally only those with any of `tags`.
pub fn list(cat: &Catalogue, tags: &[String]) -> String {
    let wanted = |t: &[String]| tags.is_empty() || t.iter().any(|t| tags.contains(t));
    let mut rows: Vec<Vec<String>> = cat
        .iter()
        .filter(|j| wanted(&j.tags))
        .map(|j| {
            vec![
                j.name.clone(),
                j.benchmark.clone(),
                j.tags.join(","),
                j.description.clone(),
            ]
        })
        .chain(cat.unrunnable().filter(|j| wanted(&j.tags)).map(|j| {
            vec![
                j.name.clone(),
                format!("{} (not in rackbench)", j.benchmark),
                j.tags.join(","),
                j.description.replace('\n', " ").trim().to_string(),
            ]
        }))
        .collect();
    rows.sort_by(|a, b| a[0].cmp(&b[0]));
    table(&["JOB", "BENCHMARK", "TAGS", "DESCRIPTION"], &rows)
}

/// `rackbench info JOB`.
pub fn info(job: &Job, reg: &Registry) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "job:         {}", job.name);
    let _ = writeln!(
        s,
        "benchmark:   {}{}",
        job.benchmark,
        reg.get(&job.benchmark)
            .map(|w| format!(" ({})", w.description()))
            .unwrap_or_else(|| " (not in this binary)".into())
    );
    let _ = writeln!(s, "description: {}", job.description);
    let _ = writeln!(s, "defined in:  {}", job.source.display());
    if !job.tags.is_empty() {
        let _ = writeln!(s, "tags:        {}", job.tags.join(", "));
    }
    let _ = writeln!(s, "args:        {}", job.args.join(" "));
    if !job.vars.is_empty() {
        let _ = writeln!(s, "vars:");
        for v in &job.vars {
            let _ = writeln!(s, "  {v}");
        }
    }
    for h in &job.hooks {
        let _ = writeln!(s, "hook:        {}", h.describe());
    }
    if let Some(t) = job.timeout {
        let _ = writeln!(s, "timeout:     {} s", t.as_secs());
    }
    if let Some(b) = &job.baseline {
        let _ = writeln!(s, "score:       {} / {}", b.metric, b.value);
    }
    for r in &job.roles {
        let _ = writeln!(s, "role {}:", r.name);
        let _ = writeln!(s, "  args: {}", r.args.join(" "));
        for v in &r.vars {
            let _ = writeln!(s, "  var:  {v}");
        }
    }
    s
}

fn when(ts: u64) -> String {
    // UTC, the same on every host.
    match jiff::Timestamp::from_second(ts as i64) {
        Ok(t) => t.strftime("%Y-%m-%d %H:%M:%S").to_string(),
        Err(_) => format!("@{ts}"),
    }
}

/// The first headline figures of a stored run, `label value` each, as
/// `results list` shows them; empty for a failed run or a benchmark with
/// no headline in its metrics.
fn headline_text(r: &RunRow, reg: &Registry) -> String {
    let Some(metrics) = r.metrics.as_object().filter(|_| r.success) else {
        return String::new();
    };
    let headlines = reg.get(&r.benchmark).map_or(&[][..], |w| w.headlines());
    let parts: Vec<String> = crate::answer::figures(headlines, metrics)
        .into_iter()
        .take(2)
        .map(|(h, v)| format!("{} {}", h.label, crate::answer::with_unit(v, h.unit)))
        .collect();
    crate::answer::fit(&parts.join(", "), 40)
}

/// `rackbench results list`: per run its result, when it ended, how long it
/// took and its headline figures.
pub fn runs(rows: &[RunRow], reg: &Registry) -> String {
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.run_id.clone(),
                r.job.clone(),
                r.iteration.to_string(),
                when(r.timestamp).chars().take(16).collect(),
                r.duration_secs.map_or("-".into(), crate::answer::duration),
                crate::marks::result_text(r.success, &r.metrics),
                headline_text(r, reg),
                r.hostname.clone(),
            ]
        })
        .collect();
    table(
        &[
            "RUN_ID",
            "JOB",
            "ITER",
            "ENDED (UTC)",
            "TOOK",
            "RESULT",
            "FIGURES",
            "HOST",
        ],
        &body,
    )
}

/// `rackbench results list --json`: the same runs as objects, each
/// headline figure with its metric key, label, value and unit.
pub fn runs_json(rows: &[RunRow], reg: &Registry) -> serde_json::Value {
    let runs: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let headlines = reg.get(&r.benchmark).map_or(&[][..], |w| w.headlines());
            let figures: Vec<serde_json::Value> = match r.metrics.as_object() {
                Some(m) if r.success => crate::answer::figures(headlines, m)
                    .into_iter()
                    .map(|(h, v)| {
                        serde_json::json!({"key": h.key, "label": h.label, "value": v, "unit": h.unit})
                    })
                    .collect(),
                _ => Vec::new(),
            };
            serde_json::json!({
                "run_id": r.run_id,
                "job": r.job,
                "benchmark": r.benchmark,
                "role": r.role,
                "iteration": r.iteration,
                "timestamp": r.timestamp,
                "duration_secs": r.duration_secs,
                "success": r.success,
                "marks": crate::marks::of(&r.metrics),
                "hostname": r.hostname,
                "figures": figures,
            })
        })
        .collect();
    serde_json::Value::Array(runs)
}

/// The widest metric name `results compare` prints whole.
const METRIC_WIDTH: usize = 30;

/// `s` cut in the middle to `width` characters (a metric's leaf and its
/// root both stay readable).
fn cut_middle(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_string();
    }
    let head = (width - 1) / 2;
    let tail = width - 1 - head;
    let chars: Vec<char> = s.chars().collect();
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[n - tail..]);
    out
}

/// Whether a compared metric moved beyond its noise (or exactly).
fn differs(m: &compare::MetricComparison) -> bool {
    use compare::{Change, Verdict};
    matches!(
        m.verdict,
        Verdict::Significant { .. }
            | Verdict::NoNoise {
                change: Change::Higher | Change::Lower,
                ..
            }
    )
}

/// The verdict column: a word the legend explains.
fn verdict_word(m: &compare::MetricComparison) -> String {
    use compare::{Change, Judgement, Verdict};
    let moved = |change: &Change, judgement: &Option<Judgement>| {
        let (good, bad) = m.sense.words();
        match (judgement, change) {
            (Some(Judgement::Better), _) => good.to_string(),
            (Some(Judgement::Worse), _) => bad.to_string(),
            (None, Change::Higher) => "higher".into(),
            (None, Change::Lower) => "lower".into(),
            (None, Change::Same) => "identical".into(),
        }
    };
    match &m.verdict {
        Verdict::Significant { change, judgement } => moved(change, judgement),
        Verdict::NotSignificant => "within noise".into(),
        Verdict::NoNoise {
            change: Change::Same,
            ..
        } => "identical".into(),
        Verdict::NoNoise { change, judgement } => format!("{}, exact", moved(change, judgement)),
        Verdict::NoiseUnknown { suggestion } => match suggestion.runs_per_side {
            Some(n) => format!("? ~{n} runs"),
            None => "? runs".into(),
        },
    }
}

/// A side's value: the mean, and its spread relative to it (two
/// significant digits).
fn side_value(m: &stats::Summary) -> String {
    let mean = compare::fmt_num(m.mean);
    match m.stdev {
        Some(0.0) => format!("{mean} ±0"),
        Some(sd) if m.mean != 0.0 => {
            let pct = sd / m.mean.abs() * 100.0;
            let decimals = if pct >= 10.0 {
                0
            } else if pct >= 1.0 {
                1
            } else {
                2
            };
            format!("{mean} ±{pct:.decimals$}%")
        }
        Some(sd) => format!("{mean} ±{}", compare::fmt_num(sd)),
        None => mean,
    }
}

/// A bound of a change's interval: one decimal below 10%, none above.
fn signed_pct(x: f64) -> String {
    if x.abs() >= 10.0 {
        format!("{x:+.0}")
    } else {
        format!("{x:+.1}")
    }
}

/// `text` wrapped to 100 columns, its continuation lines indented.
fn wrapped(text: &str) -> String {
    let opts = textwrap::Options::new(100).subsequent_indent("  ");
    textwrap::fill(text, opts) + "\n"
}

/// Rows of one job in reading order: what differs first, by the size of
/// its change, then what stayed within its noise, then the identical.
fn ordered(rows: &mut [&compare::MetricComparison]) {
    use compare::{Change, Verdict};
    let rank = |m: &compare::MetricComparison| match &m.verdict {
        _ if differs(m) => 0,
        Verdict::NoiseUnknown { .. } => 1,
        Verdict::NotSignificant => 2,
        Verdict::NoNoise {
            change: Change::Same,
            ..
        }
        | Verdict::NoNoise { .. }
        | Verdict::Significant { .. } => 3,
    };
    rows.sort_by(|x, y| {
        rank(x).cmp(&rank(y)).then(
            y.change_pct
                .map_or(0.0, f64::abs)
                .total_cmp(&x.change_pct.map_or(0.0, f64::abs)),
        )
    });
}

const COMPARE_LEGEND: &str = "\
legend: A, B: the mean over the side's runs ± their standard deviation, relative to
  the mean. CHANGE: (B - A) / |A|. 95% CI: the interval of that change (Fieller's),
  from Welch's t-test at 5%. VERDICT: faster, slower, better, worse (by the
  metric's definition) or higher, lower: a significant difference; within noise:
  none at this noise; identical: every run gave the same value; exact: no run
  varied, so the change is exact; ? ~N runs: a side has one run, so the noise is
  unknown: about N runs a side would resolve a difference this size (? runs: no
  history tells the noise; run each side at least 5 times).";

/// `rackbench results compare`: whether anything differs, first; then per
/// job its results (metrics with a better direction), what changed most
/// first; settings and counts that differ, once, as a warning; the legend;
/// the notes. Lines fit 100 columns (metric names are cut in the middle);
/// `--json` has every metric with its verdict sentence.
pub fn compare(c: &Comparison) -> String {
    use direction::Better;
    let mut out = String::new();
    for (name, s) in [("A", &c.a), ("B", &c.b)] {
        let failed = if s.failed_runs > 0 {
            format!(", {} failed left out", s.failed_runs)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{name}: {}: {} run(s) of {} invocation(s) on {}{failed}",
            s.selection,
            s.runs,
            s.run_ids.len(),
            s.hosts.join(", ")
        );
    }
    let unit = |m: &compare::MetricComparison| match &m.role {
        Some(r) => format!("{} (role {r})", m.job),
        None => m.job.clone(),
    };
    let results: Vec<&compare::MetricComparison> = c
        .metrics
        .iter()
        .filter(|m| m.better != Better::Neutral)
        .collect();
    let mut moved: Vec<&compare::MetricComparison> =
        results.iter().copied().filter(|m| differs(m)).collect();
    ordered(&mut moved);
    if moved.is_empty() {
        let _ = writeln!(
            out,
            "\nNo result differs between A and B ({} result{} compared at {:.0}% confidence).",
            results.len(),
            if results.len() == 1 { "" } else { "s" },
            c.level * 100.0
        );
    } else {
        let top: Vec<String> = moved
            .iter()
            .take(3)
            .map(|m| {
                format!(
                    "{} {} {} ({})",
                    unit(m),
                    m.metric,
                    m.change_pct.map_or("n/a".into(), |p| format!("{p:+.1}%")),
                    verdict_word(m)
                )
            })
            .collect();
        out.push('\n');
        out.push_str(&wrapped(&format!(
            "B differs from A in {} of {} results: {}{}",
            moved.len(),
            results.len(),
            top.join(", "),
            if moved.len() > 3 { ", ..." } else { "" }
        )));
    }
    let mut units: Vec<String> = Vec::new();
    for m in &c.metrics {
        if !units.contains(&unit(m)) {
            units.push(unit(m));
        }
    }
    let mut hidden = 0;
    let mut neutral_moved: Vec<String> = Vec::new();
    for u in &units {
        let mut rows: Vec<&compare::MetricComparison> =
            results.iter().copied().filter(|m| unit(m) == *u).collect();
        for m in c
            .metrics
            .iter()
            .filter(|m| unit(m) == *u && m.better == Better::Neutral)
        {
            if differs(m) {
                neutral_moved.push(format!(
                    "{u} {} {} -> {}",
                    m.metric,
                    compare::fmt_num(m.a.mean),
                    compare::fmt_num(m.b.mean)
                ));
            } else {
                hidden += 1;
            }
        }
        if rows.is_empty() {
            continue;
        }
        ordered(&mut rows);
        let (na, nb) = (rows[0].a.n, rows[0].b.n);
        let _ = writeln!(out, "\n{u} ({na} vs {nb} runs)");
        let body: Vec<Vec<String>> = rows
            .iter()
            .map(|m| {
                vec![
                    format!("  {}", cut_middle(&m.metric, METRIC_WIDTH)),
                    side_value(&m.a),
                    side_value(&m.b),
                    m.change_pct.map_or("n/a".into(), |p| format!("{p:+.1}%")),
                    m.welch
                        .as_ref()
                        .and_then(|w| w.change_pct_ci)
                        .map_or(String::new(), |(lo, hi)| {
                            format!("{}..{}%", signed_pct(lo), signed_pct(hi))
                        }),
                    verdict_word(m),
                ]
            })
            .collect();
        out.push_str(&table(
            &["  METRIC", "A", "B", "CHANGE", "95% CI", "VERDICT"],
            &body,
        ));
    }
    out.push('\n');
    for d in &c.settings {
        let role = d
            .role
            .as_ref()
            .map_or(String::new(), |r| format!(" (role {r})"));
        out.push_str(&wrapped(&format!(
            "warning: not like for like: {}{role} ran with other arguments: A `{}`, B `{}`",
            d.job,
            d.a.join("`, `"),
            d.b.join("`, `")
        )));
    }
    if !neutral_moved.is_empty() {
        out.push_str(&wrapped(&format!(
            "warning: not like for like: settings or counts differ: {}",
            neutral_moved.join(", ")
        )));
    }
    if hidden > 0 {
        out.push_str(&wrapped(&format!(
            "{hidden} settings and counts (metrics with no better direction) are the same on both sides and not shown; --json has every metric"
        )));
    }
    let _ = writeln!(out, "{COMPARE_LEGEND}");
    for n in &c.notes {
        out.push_str(&wrapped(&format!("note: {n}")));
    }
    out
}

/// `rackbench report score`.
/// `report score`: benchpress' lines (per benchmark, then the DCPerf
/// score), then rackbench's per-job detail, labelled as ours.
pub fn scores(
    scores: &[JobScore],
    pools: &[PoolScore],
    missing: &[String],
    overall: Option<&Overall>,
) -> String {
    let mut out = crate::score::upstream_text(pools, overall);
    if pools.is_empty() {
        out.push_str("no benchmark has a score\n");
    }
    let dcperf_named: Vec<&str> = pools
        .iter()
        .filter(|p| !p.excluded && crate::score::DCPERF_BENCHMARKS.contains(&p.benchmark.as_str()))
        .map(|p| p.benchmark.as_str())
        .collect();
    if !dcperf_named.is_empty() {
        let _ = writeln!(
            out,
            "rackbench: {} measured by rackbench's own workload against DCPerf's baseline: rackbench's score, not measured against DCPerf's binaries (docs/feedsim.md)",
            dcperf_named.join(", ")
        );
    }
    for p in pools.iter().filter(|p| p.excluded) {
        let _ = writeln!(
            out,
            "rackbench: {} is not in the DCPerf score (it checks the measuring chain, not the machine)",
            p.benchmark
        );
    }
    if let Some(o) = overall
        && o.kind == "partial geomean"
    {
        let _ = writeln!(
            out,
            "rackbench: {} benchmark(s) scored; benchpress calls the geometric mean \"overall\" from {} on",
            o.benchmarks,
            crate::score::OVERALL_MIN_BENCHMARKS
        );
    }
    let body: Vec<Vec<String>> = scores
        .iter()
        .map(|s| {
            vec![
                s.job.clone(),
                s.pool.clone(),
                s.runs.to_string(),
                format!("{:.4}", s.score),
                format!("{:.2}%", s.stdev_pct),
                format!("{} / {}", s.metric, fmt_cell(s.baseline)),
            ]
        })
        .collect();
    if !body.is_empty() {
        out.push_str("\nrackbench: per job\n");
        out.push_str(&table(
            &[
                "JOB",
                "BENCHMARK",
                "RUNS",
                "SCORE",
                "STDEV",
                "METRIC / BASELINE",
            ],
            &body,
        ));
    }
    for m in missing {
        let _ = writeln!(out, "{m}");
    }
    out
}

/// A table cell's number: whole numbers without decimals, others with 4
/// (unlike `compare::fmt_num`'s 4 significant digits).
fn fmt_cell(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_tables() {
        assert_eq!(when(0), "1970-01-01 00:00:00");
        assert_eq!(when(1_700_000_000), "2023-11-14 22:13:20");
        let t = table(&["A", "BB"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, "A    BB\nxxx  y\n");
    }
}
