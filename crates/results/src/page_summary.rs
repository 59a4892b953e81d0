//! The answer first, at the top of the report page, as result viewers
//! show a test across systems (OpenBenchmarking.org's result pages are
//! the model):
//!
//! - a **summary table**, one row per job and host: how many runs
//!   (failed and host-marked ones counted apart), each of the workload's
//!   headline figures ([`crate::runner::Workload::headlines`]) as `mean ±
//!   sd (min … max, n runs)` over the successful iterations (the same text
//!   as `run` prints on a terminal), the first figure's trend over time
//!   (a sparkline, oldest to newest) and the trust marks;
//! - per job run on two or more hosts, a **bar chart across hosts** of its
//!   first headline figure that has a better direction: the mean with a ±
//!   one standard deviation whisker, and the change against the reference
//!   host;
//! - per job, a **trend panel**: its first headline figure with a
//!   direction over time, one line per host (the fleet's view: which host
//!   moved, and when);
//! - with two or more hosts, the **geometric mean** of each host's
//!   relative performance against the reference host over the jobs both
//!   ran (each job's ratio oriented so that above 1 is better).
//!
//! The reference host is the one with the most successful runs in the
//! selection (then by name), as the default pair of the host comparisons.

use std::collections::BTreeMap;
use std::fmt::Write;

use chart::{BarChart, Chart};
use direction::{Better, Headline};
use html_escape::{encode_double_quoted_attribute as attr, encode_text as esc};

use crate::answer;
use crate::shown::Shown;
use crate::store::RunRow;

/// One job on one host.
struct Cell<'a> {
    job: &'a str,
    host: &'a str,
    runs: usize,
    failed: usize,
    /// Runs carrying host-trust marks, and the marks' texts (each once).
    marked: usize,
    marks: Vec<String>,
    /// Per headline, the values of the successful runs, oldest first.
    figures: Vec<(&'static Headline, Vec<f64>)>,
    last: u64,
}

/// The headline a job's bars, trend and geometric-mean ratio use: the first
/// one with a better direction.
type Lead = (&'static Headline, Better);

/// Which way is better, as a chart's subtitle says it.
fn better_word(b: Better) -> &'static str {
    if b == Better::Lower {
        "lower"
    } else {
        "higher"
    }
}

/// Each job's [`Lead`], for the jobs whose workload has one.
fn leads<'a>(rows: &[&'a RunRow], workloads: &dyn Shown) -> BTreeMap<&'a str, Lead> {
    let bench: BTreeMap<&str, &str> = rows
        .iter()
        .map(|r| (r.job.as_str(), r.benchmark.as_str()))
        .collect();
    bench
        .into_iter()
        .filter_map(|(job, b)| Some((job, leading(b, workloads)?)))
        .collect()
}

fn leading(benchmark: &str, workloads: &dyn Shown) -> Option<Lead> {
    let tables = workloads.tables(benchmark);
    workloads.headlines(benchmark).iter().find_map(|h| {
        let b = direction::better_in(tables, h.key);
        (b != Better::Neutral).then_some((h, b))
    })
}

fn cells<'a>(rows: &[&'a RunRow], workloads: &dyn Shown) -> Vec<Cell<'a>> {
    let mut by: BTreeMap<(&str, &str), Vec<&RunRow>> = BTreeMap::new();
    for r in rows {
        by.entry((r.job.as_str(), r.hostname.as_str()))
            .or_default()
            .push(r);
    }
    by.into_iter()
        .map(|((job, host), mut rs)| {
            rs.sort_by_key(|r| (r.timestamp, r.id));
            let headlines = rs
                .first()
                .map_or(&[][..], |r| workloads.headlines(&r.benchmark));
            let mut marks: Vec<String> = Vec::new();
            let mut marked = 0;
            for r in &rs {
                let m = crate::marks::of(&r.metrics);
                marked += usize::from(!m.is_empty());
                for x in m {
                    if !marks.contains(&x) {
                        marks.push(x);
                    }
                }
            }
            let figures = headlines
                .iter()
                .map(|h| {
                    let xs: Vec<f64> = rs
                        .iter()
                        .filter(|r| r.success)
                        .filter_map(|r| answer::value_at(r.metrics.as_object()?, h.key))
                        .filter(|v| v.is_finite())
                        .collect();
                    (h, xs)
                })
                .filter(|(_, xs)| !xs.is_empty())
                .collect();
            Cell {
                job,
                host,
                runs: rs.len(),
                failed: rs.iter().filter(|r| !r.success).count(),
                marked,
                marks,
                figures,
                last: rs.last().map_or(0, |r| r.timestamp),
            }
        })
        .collect()
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// The reference host: the most successful runs, then by name.
fn reference<'a>(rows: &[&'a RunRow]) -> Option<&'a str> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        *count.entry(r.hostname.as_str()).or_default() += usize::from(r.success);
    }
    count
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
        .map(|(h, _)| h)
}

/// `host`'s mean over the reference's for one job's leading figure,
/// oriented so that above 1 is better; `None` when either is not positive.
fn ratio(host: f64, reference: f64, better: Better) -> Option<f64> {
    if !(host > 0.0 && reference > 0.0) {
        return None;
    }
    Some(match better {
        Better::Lower => reference / host,
        _ => host / reference,
    })
}

fn pct(r: f64) -> String {
    let p = (r - 1.0) * 100.0;
    if p.abs() < 0.05 {
        "same as".to_string()
    } else {
        format!("{p:+.1}% vs")
    }
}

/// The summary table's row for `c`.
fn table_row(out: &mut String, c: &Cell) {
    let runs = {
        let mut s = format!("{}", c.runs);
        if c.failed > 0 {
            let _ = write!(s, r#", <span class="failed">{} failed</span>"#, c.failed);
        }
        s
    };
    let figures: Vec<String> = c
        .figures
        .iter()
        .map(|(h, xs)| {
            format!(
                r#"<div class="fig"><span class="label">{}</span> {}</div>"#,
                esc(h.label),
                esc(&answer::figure(h, xs))
            )
        })
        .collect();
    let trend = c
        .figures
        .first()
        .and_then(|(h, xs)| {
            let first = xs.first()?;
            let last = xs.last()?;
            let label = format!(
                "{}, oldest to newest ({} runs): {} → {}",
                h.label,
                xs.len(),
                answer::with_unit(*first, h.unit),
                answer::with_unit(*last, h.unit)
            );
            chart::sparkline(xs, 120, 28, &label)
        })
        .unwrap_or_default();
    let marks = if c.marks.is_empty() {
        String::new()
    } else {
        format!(
            r#"<details class="marks"><summary class="marked">{} of {} marked</summary><ul class="marks">{}</ul></details>"#,
            c.marked,
            c.runs,
            c.marks
                .iter()
                .map(|m| format!("<li>{}</li>", esc(m)))
                .collect::<String>()
        )
    };
    let _ = writeln!(
        out,
        r#"<tr class="f cell" data-job="{}" data-host="{}" data-ts="{}"><th>{}</th><td>{}</td><td class="num">{runs}</td><td class="figures">{}</td><td class="trend">{trend}</td><td>{marks}</td></tr>"#,
        attr(c.job),
        attr(c.host),
        c.last,
        esc(c.job),
        esc(c.host),
        if figures.is_empty() {
            "<span class=\"none\">no successful run</span>".to_string()
        } else {
            figures.concat()
        },
    );
}

/// One job's bars across hosts, best first; `None` under two hosts with
/// a figure.
fn job_bars(job: &str, cells: &[&Cell], lead: Lead, reference: Option<&str>) -> Option<BarChart> {
    let (h, better) = lead;
    let mut hosts: Vec<(&str, Vec<f64>)> = cells
        .iter()
        .filter_map(|c| {
            let xs = c.figures.iter().find(|(f, _)| f.key == h.key)?.1.clone();
            Some((c.host, xs))
        })
        .collect();
    if hosts.len() < 2 {
        return None;
    }
    hosts.sort_by(|a, b| {
        let (ma, mb) = (mean(&a.1), mean(&b.1));
        match better {
            Better::Lower => ma.total_cmp(&mb),
            _ => mb.total_cmp(&ma),
        }
        .then(a.0.cmp(b.0))
    });
    let ref_host = reference
        .filter(|r| hosts.iter().any(|(h, _)| h == r))
        .unwrap_or(hosts[0].0);
    let ref_mean = hosts
        .iter()
        .find(|(h, _)| *h == ref_host)
        .map_or(f64::NAN, |(_, xs)| mean(xs));
    let word = better_word(better);
    let mut chart = BarChart::new(
        &format!("{job}: {}", h.label),
        &format!(
            "{word} is better; bar: mean, whisker: ± one standard deviation over the host's successful runs"
        ),
    );
    for (host, xs) in &hosts {
        let s = crate::stats::Summary::of(xs)?;
        let sd = s.stdev.unwrap_or(0.0);
        let mut text = if xs.len() > 1 {
            format!(
                "{} ± {} ({} runs)",
                answer::with_unit(s.mean, h.unit),
                answer::number(sd),
                xs.len()
            )
        } else {
            format!("{} (1 run)", answer::with_unit(s.mean, h.unit))
        };
        if *host == ref_host {
            text.push_str(", reference");
        } else if let Some(r) = ratio(s.mean, ref_mean, better) {
            let change = (s.mean / ref_mean - 1.0) * 100.0;
            let verdict = if (r - 1.0).abs() < 0.0005 {
                "same"
            } else if r > 1.0 {
                "better"
            } else {
                "worse"
            };
            let _ = write!(text, ", {change:+.1}% ({verdict}) vs {ref_host}");
        }
        chart = chart.bar(
            host,
            s.mean,
            (xs.len() > 1).then_some((s.mean - sd, s.mean + sd)),
            &text,
        );
    }
    Some(chart)
}

/// Each host's geometric mean of its ratios against the reference over the
/// jobs both ran: (host, geomean, jobs).
fn geomeans(
    cells: &[Cell],
    leads: &BTreeMap<&str, Lead>,
    reference: &str,
) -> Vec<(String, f64, usize)> {
    let mut logs: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for c in cells.iter().filter(|c| c.host != reference) {
        let Some(lead) = leads.get(c.job) else {
            continue;
        };
        let value = |cell: &Cell| {
            cell.figures
                .iter()
                .find(|(f, _)| f.key == lead.0.key)
                .map(|(_, xs)| mean(xs))
        };
        let Some(rc) = cells.iter().find(|r| r.job == c.job && r.host == reference) else {
            continue;
        };
        if let (Some(v), Some(rv)) = (value(c), value(rc))
            && let Some(r) = ratio(v, rv, lead.1)
        {
            logs.entry(c.host).or_default().push(r.ln());
        }
    }
    logs.into_iter()
        .map(|(h, ls)| (h.to_string(), mean(&ls).exp(), ls.len()))
        .collect()
}

/// The first of `rows`' timestamps, and how the trend's x axis reads.
fn time_axis(rows: &[&RunRow]) -> (u64, String, f64) {
    let first = rows.iter().map(|r| r.timestamp).min().unwrap_or(0);
    let last = rows.iter().map(|r| r.timestamp).max().unwrap_or(0);
    let day = jiff::Timestamp::from_second(first as i64)
        .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default();
    // The unit that keeps the axis's numbers readable for the span.
    let (name, secs) = match last - first {
        0..=120 => ("seconds", 1.0),
        121..=7200 => ("minutes", 60.0),
        7201..=259_200 => ("hours", 3600.0),
        _ => ("days", 86_400.0),
    };
    (first, format!("{name} since {day}"), secs)
}

/// One job's trend: its leading figure per successful run (of
/// `job_rows`) over time since `axis`'s start, one line per host; `None`
/// with fewer than two points in time.
fn job_trend(
    job: &str,
    job_rows: &[&RunRow],
    axis: &(u64, String, f64),
    lead: Lead,
) -> Option<crate::page_chart::PageChart> {
    let (h, better) = lead;
    let (first, x_label, unit) = axis;
    let mut by_host: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for r in job_rows.iter().filter(|r| r.success) {
        if let Some(v) = r
            .metrics
            .as_object()
            .and_then(|m| answer::value_at(m, h.key))
        {
            let x = (r.timestamp.saturating_sub(*first)) as f64 / unit;
            by_host.entry(r.hostname.as_str()).or_default().push((x, v));
        }
    }
    let word = better_word(better);
    let mut c = Chart::new(
        &format!("{job}: {} over time ({word} is better)", h.label),
        x_label,
        h.unit,
    )
    .size(crate::page_chart::CHART_W, crate::page_chart::CHART_H);
    for (host, mut pts) in by_host {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        c = c.series(host, pts);
    }
    let pc = crate::page_chart::PageChart {
        kind: "trend",
        chart: c,
    };
    pc.worth_drawing().then_some(pc)
}

/// The summary part of the page (see the module documentation).
pub fn summary(out: &mut String, rows: &[&RunRow], workloads: &dyn Shown) {
    out.push_str("<h2 id=\"summary\">Summary</h2>\n");
    if rows.is_empty() {
        out.push_str("<p>No runs in this selection.</p>\n");
        return;
    }
    let cells = cells(rows, workloads);
    let leads = leads(rows, workloads);
    let reference = reference(rows);
    let hosts: std::collections::BTreeSet<&str> = cells.iter().map(|c| c.host).collect();
    if hosts.len() >= 2
        && let Some(r) = reference
    {
        let g = geomeans(&cells, &leads, r);
        if !g.is_empty() {
            let mut chart = BarChart::new(
                &format!("Relative performance against {r}, geometric mean over jobs"),
                "above 1 is better; per job its first headline figure with a direction, mean over runs",
            );
            chart.reference = Some(1.0);
            chart = chart.bar(r, 1.0, None, "1.000 (reference)");
            let mut g = g;
            g.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            for (h, v, n) in &g {
                chart = chart.bar(
                    h,
                    *v,
                    None,
                    &format!(
                        "{v:.3} ({} {r}, over {n} job{})",
                        pct(*v),
                        if *n == 1 { "" } else { "s" }
                    ),
                );
            }
            let _ = writeln!(
                out,
                r#"<figure class="chart" data-kind="geomean">{}</figure>"#,
                chart.to_svg()
            );
        }
    }
    out.push_str(
        "<table id=\"summary-table\"><thead><tr><th>job</th><th>host</th><th>runs</th>\
         <th>headline figures (mean ± sd over successful runs)</th><th>trend</th><th>marks</th></tr></thead><tbody>\n",
    );
    for c in &cells {
        table_row(out, c);
    }
    out.push_str("</tbody></table>\n");
    let mut jobs: BTreeMap<&str, Vec<&Cell>> = BTreeMap::new();
    for c in &cells {
        jobs.entry(c.job).or_default().push(c);
    }
    let mut any = false;
    for (job, cs) in jobs {
        let Some(&lead) = leads.get(job) else {
            continue;
        };
        let Some(chart) = job_bars(job, &cs, lead, reference) else {
            continue;
        };
        if !any {
            out.push_str("<div id=\"host-bars\">\n");
            any = true;
        }
        let _ = writeln!(
            out,
            r#"<figure class="chart f" data-kind="host_bars" data-job="{}">{}</figure>"#,
            attr(job),
            chart.to_svg()
        );
    }
    if any {
        out.push_str("</div>\n");
    }
    let axis = time_axis(rows);
    let mut job_rows: BTreeMap<&str, Vec<&RunRow>> = BTreeMap::new();
    for r in rows {
        job_rows.entry(r.job.as_str()).or_default().push(*r);
    }
    let mut trends = Vec::new();
    for (job, rs) in &job_rows {
        let Some(&lead) = leads.get(job) else {
            continue;
        };
        if let Some(t) = job_trend(job, rs, &axis, lead) {
            trends.push((*job, t));
        }
    }
    if !trends.is_empty() {
        out.push_str("<div id=\"trends\">\n");
        for (job, t) in trends {
            let _ = writeln!(
                out,
                r#"<figure class="chart f" data-kind="trend" data-job="{}">{}</figure>"#,
                attr(job),
                t.chart.to_svg()
            );
        }
        out.push_str("</div>\n");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::page_chart::PageChart;
    use crate::record::Record;
    use direction::{Directions, Rule, Sense, headline, rule};
    use serde_json::json;

    /// A workload with a throughput (higher is better) and a latency
    /// (lower is better) headline.
    struct Toy;

    static RULES: &[Rule] = &[
        rule("qps", Better::Higher, Sense::Speed, "throughput"),
        rule("p99_ms", Better::Lower, Sense::Speed, "latency"),
    ];
    static TABLES: &[&[Rule]] = &[RULES];
    static HEADLINES: &[Headline] = &[
        headline("qps", "throughput", "QPS"),
        headline("p99_ms", "p99", "ms"),
    ];

    impl Directions for Toy {
        fn tables(&self, b: &str) -> &'static [&'static [Rule]] {
            if b == "toy" { TABLES } else { &[] }
        }
    }

    impl Shown for Toy {
        fn headlines(&self, b: &str) -> &'static [Headline] {
            if b == "toy" { HEADLINES } else { &[] }
        }
        fn percentiles_title(&self, _: &str) -> &'static str {
            crate::shown::DEFAULT_PERCENTILES_TITLE
        }
        fn charts(&self, _: &str, _: &Record) -> Vec<PageChart> {
            Vec::new()
        }
        fn history_charts(&self, _: &str, _: &str, _: &[&RunRow]) -> Vec<PageChart> {
            Vec::new()
        }
    }

    fn registry() -> Toy {
        Toy
    }

    fn row(id: i64, job: &str, host: &str, qps: f64, p99: f64) -> RunRow {
        let mut r = RunRow::from_metrics(job, "toy", json!({"qps": qps, "p99_ms": p99}));
        r.id = id;
        r.hostname = host.into();
        r.timestamp += id as u64;
        r
    }

    #[test]
    fn the_summary_gives_figures_bars_and_geomean() {
        let mut rows = Vec::new();
        // Host a: 3 runs of each job; host b: 2, 10% faster on j1 and
        // half as fast on j2: geomean sqrt(1.1 * 0.5).
        for i in 0..3 {
            rows.push(row(i, "j1", "a", 100.0 + i as f64 - 1.0, 5.0));
            rows.push(row(10 + i, "j2", "a", 50.0, 4.0));
        }
        for i in 0..2 {
            rows.push(row(20 + i, "j1", "b", 110.0, 5.0));
            rows.push(row(30 + i, "j2", "b", 25.0, 2.0));
        }
        let mut failed = row(40, "j1", "b", 1.0, 1.0);
        failed.success = false;
        rows.push(failed);
        let refs: Vec<&RunRow> = rows.iter().collect();
        let mut out = String::new();
        summary(&mut out, &refs, &registry());
        // The table: one row per job and host, figures over successful runs.
        assert_eq!(out.matches(r#"<tr class="f cell" data-job="#).count(), 4);
        assert!(
            out.contains("100.0 QPS ± 1.0  (99.0 … 101.0, 3 runs)"),
            "{out}"
        );
        assert!(out.contains(r#"<span class="failed">1 failed</span>"#));
        // The trends (a sparkline needs two values; every cell has them).
        assert!(out.contains(r#"<svg class="spark""#));
        // Bars per job across hosts, best first, with the change against
        // the reference host (a: more successful runs).
        assert_eq!(out.matches(r#"data-kind="host_bars""#).count(), 2);
        let j1 = out.split(r#"data-job="j1"><svg"#).nth(1).unwrap();
        let (b_at, a_at) = (j1.find(">b</text>").unwrap(), j1.find(">a</text>").unwrap());
        assert!(b_at < a_at, "the better host first");
        assert!(j1.contains("+10.0% (better) vs a"), "{j1}");
        let j2 = out.split(r#"data-job="j2"><svg"#).nth(1).unwrap();
        assert!(
            j2.contains("higher is better") && j2.contains("-50.0% (worse) vs a"),
            "{j2}"
        );
        // A trend per job, a line per host.
        assert_eq!(out.matches(r#"data-kind="trend""#).count(), 2);
        let t = out
            .split(r#"data-kind="trend" data-job="j1""#)
            .nth(1)
            .unwrap();
        assert!(t.contains("j1: throughput over time (higher is better)"));
        assert!(t.contains("seconds since"));
        // The geometric mean: sqrt(1.1 * 0.5) = 0.742.
        let g = out.split(r#"data-kind="geomean""#).nth(1).unwrap();
        assert!(g.contains("0.742 (-25.8% vs a, over 2 jobs)"), "{g}");
    }

    #[test]
    fn ratios_are_oriented_so_that_above_one_is_better() {
        assert_eq!(ratio(110.0, 100.0, Better::Higher), Some(1.1));
        assert_eq!(ratio(2.0, 4.0, Better::Lower), Some(2.0));
        assert_eq!(ratio(0.0, 4.0, Better::Lower), None);
    }

    #[test]
    fn one_host_has_no_bars_or_geomean() {
        let rows = [row(1, "j1", "a", 100.0, 5.0), row(2, "j1", "a", 102.0, 5.0)];
        let refs: Vec<&RunRow> = rows.iter().collect();
        let mut out = String::new();
        summary(&mut out, &refs, &registry());
        assert!(out.contains("summary-table"));
        assert!(!out.contains("host_bars") && !out.contains("geomean"));
        // One host's two runs still trend.
        assert!(out.contains(r#"data-kind="trend""#));
        let mut out = String::new();
        summary(&mut out, &[], &registry());
        assert!(out.contains("No runs"));
    }
}
