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

/// `rackbench results compare`: the two sides, a row per metric with each
/// side's mean ± stdev (runs), the change and the verdict, then how many
/// metrics differ and the notes.
pub fn compare(c: &Comparison) -> String {
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
    let side = |m: &stats::Summary| match m.stdev {
        Some(sd) => format!(
            "{} ± {} (n={})",
            compare::fmt_num(m.mean),
            compare::fmt_num(sd),
            m.n
        ),
        None => format!("{} (n={})", compare::fmt_num(m.mean), m.n),
    };
    let body: Vec<Vec<String>> = c
        .metrics
        .iter()
        .map(|m| {
            vec![
                match &m.role {
                    Some(r) => format!("{} (role {r})", m.job),
                    None => m.job.clone(),
                },
                m.metric.clone(),
                side(&m.a),
                side(&m.b),
                m.change_pct
                    .map(|p| format!("{p:+.2}%"))
                    .unwrap_or_else(|| "n/a".into()),
                m.text.clone(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "JOB",
            "METRIC",
            "A MEAN ± SD",
            "B MEAN ± SD",
            "CHANGE",
            "VERDICT",
        ],
        &body,
    ));
    let differing: Vec<&str> = c.differing().map(|m| m.metric.as_str()).collect();
    let _ = writeln!(
        out,
        "differing: {} of {} metrics{}",
        differing.len(),
        c.metrics.len(),
        if differing.is_empty() || differing.len() > 10 {
            String::new()
        } else {
            format!(" ({})", differing.join(", "))
        }
    );
    for n in &c.notes {
        let _ = writeln!(out, "note: {n}");
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
