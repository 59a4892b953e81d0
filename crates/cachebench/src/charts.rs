//! Report-page charts of CacheBench runs (the report page's): the run over
//! time, from the record's [`IntervalPoint`] series (one point per
//! progress interval, all instances together, at most 300; a figure the
//! interval did not measure is absent).
//!
//! - `cachebench_hit_ratio_time`: the overall hit ratio per interval and,
//!   with NVM, the RAM and NVM hit ratios (as the PNG chart the run draws);
//! - `cachebench_nvm_latency_time`: the NVM device's read (and write) p50
//!   and p99 per interval, on a log axis (the device histograms count whole
//!   µs; a 0, under 1 µs, is drawn at 1).
//!
//! Each chart only when the series has its figures; nothing for runs
//! without a series (`--progress 0`, runs stored before it was kept).
//!
//! Across a job's runs, `hit_ratio`: each run's overall, RAM and NVM hit
//! ratio, per host ([`history`]).

use std::collections::BTreeMap;

use chart::Chart;
use serde_json::Value;

use harness::page_chart::{CHART_H, CHART_W, PageChart};
use harness::store::RunRow;

use crate::record::{CacheBenchRecord, IntervalPoint};

/// Points per series name, per host.
type HostSeries<'a> = BTreeMap<&'a str, BTreeMap<&'a str, Vec<(f64, f64)>>>;

/// A figure of a progress interval, when it measured it.
type Figure = fn(&IntervalPoint) -> Option<f64>;

/// `(elapsed_secs, figure)` of every point that has the figure.
fn column(series: &[IntervalPoint], figure: Figure) -> Vec<(f64, f64)> {
    series
        .iter()
        .filter_map(|p| Some((p.elapsed_secs, figure(p)?)))
        .collect()
}

/// The charts of a run's record.
pub fn charts(r: &CacheBenchRecord) -> Vec<PageChart> {
    let series = &r.series;
    let mut out = Vec::new();
    let overall = column(series, |p| p.hit_ratio_pct);
    let nvm_hits = column(series, |p| p.nvm_hit_ratio_pct);
    if !overall.is_empty() {
        let mut c = Chart::new(
            "CacheBench hit ratio per progress interval",
            "s since the start",
            "hit ratio (%)",
        )
        .size(CHART_W, CHART_H)
        .y_range(0.0, 100.0)
        .series("overall", overall);
        // DRAM only, the RAM ratio is the overall one.
        if !nvm_hits.is_empty() {
            c = c
                .series("RAM", column(series, |p| p.ram_hit_ratio_pct))
                .series("NVM", nvm_hits);
        }
        out.push(PageChart {
            kind: "cachebench_hit_ratio_time",
            chart: c,
        });
    }
    let figures: [(&str, Figure); 4] = [
        ("read p50", |p| p.nvm_read_p50_us),
        ("read p99", |p| p.nvm_read_p99_us),
        ("write p50", |p| p.nvm_write_p50_us),
        ("write p99", |p| p.nvm_write_p99_us),
    ];
    let latency: Vec<(&str, Vec<(f64, f64)>)> = figures
        .into_iter()
        .map(|(name, figure)| {
            let pts = column(series, figure)
                .into_iter()
                .map(|(t, v)| (t, v.max(1.0)))
                .collect();
            (name, pts)
        })
        .filter(|(_, pts): &(&str, Vec<(f64, f64)>)| !pts.is_empty())
        .collect();
    if !latency.is_empty() {
        let mut c = Chart::new(
            "CacheBench NVM device latency per progress interval",
            "s since the start",
            "µs (log)",
        )
        .size(CHART_W, CHART_H)
        .log_y();
        for (name, pts) in latency {
            c = c.series(name, pts);
        }
        out.push(PageChart {
            kind: "cachebench_nvm_latency_time",
            chart: c,
        });
    }
    out
}

/// Per job, charts across its runs: CacheBench's hit ratios.
pub fn history(job: &str, rows: &[&RunRow]) -> Vec<PageChart> {
    let mut sorted: Vec<&&RunRow> = rows.iter().filter(|r| r.success).collect();
    sorted.sort_by_key(|r| (r.timestamp, r.id));
    let mut by_host: HostSeries<'_> = BTreeMap::new();
    for (i, r) in sorted.iter().enumerate() {
        let x = (i + 1) as f64;
        for (name, v) in [
            ("hit ratio", r.metrics.get("hit_ratio_pct")),
            ("RAM", r.metrics.get("ram_hit_ratio_pct")),
            (
                "NVM",
                r.metrics.get("nvm").and_then(|n| n.get("hit_ratio_pct")),
            ),
        ] {
            if let Some(y) = v.and_then(Value::as_f64) {
                by_host
                    .entry(r.hostname.as_str())
                    .or_default()
                    .entry(name)
                    .or_default()
                    .push((x, y));
            }
        }
    }
    if by_host.is_empty() {
        return Vec::new();
    }
    let mut c = Chart::new(
        &format!("{job}: hit ratio per run"),
        "run # (oldest first)",
        "%",
    )
    .size(CHART_W, CHART_H)
    .integer_x()
    .y_range(0.0, 100.0);
    let hosts = by_host.len();
    for (host, series) in by_host {
        for (name, pts) in series {
            let label = if hosts > 1 {
                format!("{name} ({host})")
            } else {
                name.to_string()
            };
            c = c.points(&label, pts);
        }
    }
    vec![PageChart {
        kind: "hit_ratio",
        chart: c,
    }]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn record(series: Vec<IntervalPoint>) -> CacheBenchRecord {
        CacheBenchRecord {
            instances: Vec::new(),
            aggregated: None,
            charts: Vec::new(),
            series,
            interrupted: false,
            stopped_by_timeout_seconds: None,
            nvm_failure: None,
            layout: Default::default(),
            first_op_secs: None,
            reports_in_stats_files: false,
        }
    }

    fn dram_point(t: f64, hit: Option<f64>) -> IntervalPoint {
        IntervalPoint {
            elapsed_secs: t,
            ops_per_sec: 1.0e5,
            hit_ratio_pct: hit,
            ram_hit_ratio_pct: hit,
            nvm_hit_ratio_pct: None,
            nvm_read_p50_us: None,
            nvm_read_p99_us: None,
            nvm_write_p50_us: None,
            nvm_write_p99_us: None,
        }
    }

    fn hybrid_point(t: f64) -> IntervalPoint {
        IntervalPoint {
            ops_per_sec: 30000.0,
            hit_ratio_pct: Some(28.0),
            ram_hit_ratio_pct: Some(11.0),
            nvm_hit_ratio_pct: Some(19.0),
            nvm_read_p50_us: Some(1.0),
            nvm_read_p99_us: Some(6.0),
            nvm_write_p50_us: Some(0.0),
            nvm_write_p99_us: Some(17.0),
            ..dram_point(t, None)
        }
    }

    fn kinds(c: &[PageChart]) -> Vec<&'static str> {
        c.iter().map(|c| c.kind).collect()
    }

    #[test]
    fn a_hybrid_series_gives_both_charts() {
        // An interval without writes: no write points there.
        let last = IntervalPoint {
            nvm_write_p50_us: None,
            nvm_write_p99_us: None,
            ..hybrid_point(3.0)
        };
        let c = charts(&record(vec![hybrid_point(1.0), hybrid_point(2.0), last]));
        assert_eq!(
            kinds(&c),
            ["cachebench_hit_ratio_time", "cachebench_nvm_latency_time"]
        );
        let hit = &c[0].chart;
        let names: Vec<_> = hit.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["overall", "RAM", "NVM"]);
        assert_eq!(
            hit.series[0].points,
            [(1.0, 28.0), (2.0, 28.0), (3.0, 28.0)]
        );
        assert_eq!(hit.series[2].points[1], (2.0, 19.0));
        assert_eq!((hit.y_min, hit.y_max), (Some(0.0), Some(100.0)));
        let lat = &c[1].chart;
        let names: Vec<_> = lat.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["read p50", "read p99", "write p50", "write p99"]);
        assert_eq!(lat.series[1].points, [(1.0, 6.0), (2.0, 6.0), (3.0, 6.0)]);
        // Under 1 µs is drawn at 1 on the log axis; absent stays absent.
        assert_eq!(lat.series[2].points, [(1.0, 1.0), (2.0, 1.0)]);
        assert_eq!(lat.y_scale, chart::Scale::Log10);
        for c in &c {
            assert_eq!((c.chart.width, c.chart.height), (CHART_W, CHART_H));
            assert!(c.chart.to_svg().contains("<svg"));
        }
    }

    #[test]
    fn dram_only_gives_the_overall_hit_ratio_alone() {
        let c = charts(&record(vec![
            dram_point(1.0, Some(41.0)),
            dram_point(2.0, Some(42.0)),
        ]));
        assert_eq!(kinds(&c), ["cachebench_hit_ratio_time"]);
        let names: Vec<_> = c[0].chart.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["overall"]);
        assert_eq!(c[0].chart.series[0].points, [(1.0, 41.0), (2.0, 42.0)]);
    }

    #[test]
    fn nothing_without_a_series() {
        // Stored before the series was kept, or --progress 0; points
        // without figures (intervals without gets).
        for series in [vec![], vec![dram_point(1.0, None)]] {
            assert!(charts(&record(series.clone())).is_empty(), "{series:?}");
        }
    }

    #[test]
    fn history_draws_each_runs_hit_ratios() {
        let rows = [
            RunRow::from_metrics(
                "cachebench_mini",
                "cachebench",
                json!({"hit_ratio_pct": 67.0, "ram_hit_ratio_pct": 67.0,
                "nvm": {"hit_ratio_pct": 30.0}}),
            ),
            RunRow::from_metrics(
                "cachebench_mini",
                "cachebench",
                json!({"hit_ratio_pct": 70.0, "ram_hit_ratio_pct": 60.0}),
            ),
        ];
        let refs: Vec<&RunRow> = rows.iter().collect();
        let charts = history("cachebench_mini", &refs);
        assert_eq!(charts.len(), 1);
        assert_eq!(charts[0].kind, "hit_ratio");
        let names: Vec<&str> = charts[0]
            .chart
            .series
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, ["NVM", "RAM", "hit ratio"]);
        assert!(history("j", &[]).is_empty());
    }
}
