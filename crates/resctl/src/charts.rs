//! Report-page charts of resctl-bench runs (the report page's), from the
//! figures the resctl crate stores for the latest completed job of each
//! kind in a run's result file:
//!
//! - `resctl_protection`: per memory-hog scenario (`protection_scenarios`:
//!   `load`, `speed`, `loops`, `isol_pct`, `isol_p05_pct`, `lat_imp_pct`,
//!   `lat_imp_p95_pct`, `work_csv_pct`, `fail_pct`), scenario k at x = k,
//!   the isolation, latency impact, work conservation and failed time in
//!   percent; runs stored before the per-scenario figures were get the
//!   combined figures (`protection_isol_pct`, ...) alone.
//! - `resctl_storage`: each loop's memory offloading factor
//!   (`storage_loops[i].mof`; loops kept in the mean apart from retried
//!   ones) and the job's (`storage_mof`);
//! - `resctl_storage_search`: each loop's memory-size search
//!   (`storage_loops[i].probes`: the rate hashd served at each footprint
//!   fraction tried), when probes are stored.

use chart::Chart;
use serde_json::Value;

use harness::compare::fmt_num;
use harness::page_chart::{CHART_H, CHART_W, PageChart};
use harness::store::RunRow;

/// Loops whose memory-size search is drawn (one legend row each).
pub const MAX_SEARCH_LOOPS: usize = 10;

/// Named point series of a chart.
type NamedSeries<'a> = Vec<(&'a str, Vec<(f64, f64)>)>;

fn f64_of(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

/// The charts this workload's stored metrics allow.
pub fn charts(row: &RunRow) -> Vec<PageChart> {
    if row.benchmark != "resctl" {
        return Vec::new();
    }
    let mut out = Vec::new();
    out.extend(protection(&row.metrics));
    out.extend(storage(&row.metrics));
    out
}

/// Isolation, latency impact, work conservation and failed time per
/// scenario.
fn protection(m: &Value) -> Option<PageChart> {
    let scenarios: Vec<&Value> = m
        .get("protection_scenarios")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    // (name, key in a scenario, key of the combined figure)
    let figures = [
        ("isolation mean", "isol_pct", "protection_isol_pct"),
        ("isolation p05", "isol_p05_pct", "protection_isol_p05_pct"),
        (
            "latency impact mean",
            "lat_imp_pct",
            "protection_lat_imp_pct",
        ),
        ("latency impact p95", "lat_imp_p95_pct", ""),
        (
            "work conservation",
            "work_csv_pct",
            "protection_work_csv_pct",
        ),
        ("failed time", "fail_pct", ""),
    ];
    let (title, x_label, series): (String, &str, NamedSeries) = if scenarios.is_empty() {
        // Only the combined figures are stored.
        f64_of(m, "protection_isol_pct")?;
        let series = figures
            .iter()
            .filter(|(_, _, key)| !key.is_empty())
            .map(|(name, _, key)| {
                (
                    *name,
                    f64_of(m, key).map(|v| (1.0, v)).into_iter().collect(),
                )
            })
            .collect();
        (
            "resctl protection: combined scenarios (per-scenario figures not stored)".into(),
            "combined",
            series,
        )
    } else {
        let what: Vec<String> = scenarios
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut t = format!("{}", i + 1);
                if let Some(l) = f64_of(s, "load") {
                    t.push_str(&format!(" load {}", fmt_num(l)));
                }
                if let Some(sp) = s.get("speed").and_then(Value::as_str) {
                    t.push_str(&format!(" hog {sp}"));
                }
                if let Some(n) = f64_of(s, "loops") {
                    t.push_str(&format!(" x{}", fmt_num(n)));
                }
                t
            })
            .collect();
        let mut title = format!(
            "resctl protection per mem-hog scenario: {}",
            what.join(", ")
        );
        if let Some(c) = f64_of(m, "protection_isol_pct") {
            title.push_str(&format!(" (combined isolation {}%)", fmt_num(c)));
        }
        let series = figures
            .iter()
            .map(|(name, key, _)| {
                let pts = scenarios
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| Some((i as f64 + 1.0, f64_of(s, key)?)))
                    .collect();
                (*name, pts)
            })
            .collect();
        (title, "scenario #", series)
    };
    let mut c = Chart::new(&title, x_label, "%")
        .size(CHART_W, CHART_H)
        .y_min(0.0)
        .x_range(
            0.0,
            harness::page_chart::index_axis_end(scenarios.len().max(1)),
        )
        .integer_x();
    for (name, pts) in series {
        if !pts.is_empty() {
            c = c.points(name, pts);
        }
    }
    Some(PageChart {
        kind: "resctl_protection",
        chart: c,
    })
}

/// The offloading factor per loop, and each loop's memory-size search.
fn storage(m: &Value) -> Vec<PageChart> {
    let Some(mean) = f64_of(m, "storage_mof") else {
        return Vec::new();
    };
    let loops: Vec<&Value> = m
        .get("storage_loops")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let (mut used, mut retried) = (Vec::new(), Vec::new());
    for (i, l) in loops.iter().enumerate() {
        let Some(mof) = f64_of(l, "mof") else {
            continue;
        };
        let p = (i as f64 + 1.0, mof);
        if l.get("used").and_then(Value::as_bool).unwrap_or(true) {
            used.push(p);
        } else {
            retried.push(p);
        }
    }
    let n = loops.len().max(1) as f64;
    let title = if loops.is_empty() {
        format!(
            "resctl storage: memory offloading factor {} (per-loop figures not stored)",
            fmt_num(mean)
        )
    } else {
        format!(
            "resctl storage: memory offloading factor per loop (mean of kept loops {})",
            fmt_num(mean)
        )
    };
    let mof = Chart::new(&title, "loop #", "footprint / memory used")
        .size(CHART_W, CHART_H)
        .y_min(0.0)
        .x_range(0.0, harness::page_chart::index_axis_end(loops.len()))
        .integer_x()
        .points("kept loop", used)
        .points("retried loop", retried)
        .series("mean", vec![(0.5, mean), (n + 0.5, mean)]);
    let mut out = vec![PageChart {
        kind: "resctl_storage",
        chart: mof,
    }];
    let mut search = Chart::new(
        "resctl storage: memory-size search of each loop (rate hashd served per footprint tried)",
        "footprint (fraction of hashd's full size)",
        "rps",
    )
    .size(CHART_W, CHART_H)
    .y_min(0.0);
    let mut any = false;
    for (i, l) in loops.iter().enumerate().take(MAX_SEARCH_LOOPS) {
        let pts: Vec<(f64, f64)> = l
            .get("probes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| Some((f64_of(p, "mem_frac")?, f64_of(p, "rps")?)))
            .collect();
        if !pts.is_empty() {
            any = true;
            search = search.points(&format!("loop {}", i + 1), pts);
        }
    }
    if any {
        out.push(PageChart {
            kind: "resctl_storage_search",
            chart: search,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn row(bench: &str, metrics: Value) -> RunRow {
        RunRow::from_metrics("resctl_protection", bench, metrics)
    }

    fn kinds(c: &[PageChart]) -> Vec<&'static str> {
        c.iter().map(|c| c.kind).collect()
    }

    fn scenario(load: f64, isol: f64) -> Value {
        json!({"load": load, "speed": "2x", "loops": 2, "isol_pct": isol,
               "isol_p05_pct": isol - 20.0, "lat_imp_pct": 12.5,
               "lat_imp_p95_pct": 40.0, "work_csv_pct": 100.0, "fail_pct": 0.0})
    }

    #[test]
    fn protection_per_scenario() {
        let m = json!({"protection_isol_pct": 85.0, "protection_isol_p05_pct": 60.0,
                       "protection_lat_imp_pct": 12.5, "protection_work_csv_pct": 100.0,
                       "protection_scenarios": [scenario(1.0, 80.0), scenario(0.8, 90.0)]});
        let c = charts(&row("resctl", m));
        assert_eq!(kinds(&c), ["resctl_protection"]);
        let ch = &c[0].chart;
        assert!(
            ch.title
                .contains("1 load 1 hog 2x x2, 2 load 0.8 hog 2x x2"),
            "{}",
            ch.title
        );
        assert!(ch.title.contains("combined isolation 85%"), "{}", ch.title);
        let isol = ch
            .series
            .iter()
            .find(|s| s.name == "isolation mean")
            .unwrap();
        assert_eq!(isol.points, [(1.0, 80.0), (2.0, 90.0)]);
        let p95 = ch
            .series
            .iter()
            .find(|s| s.name == "latency impact p95")
            .unwrap();
        assert_eq!(p95.points, [(1.0, 40.0), (2.0, 40.0)]);
        assert_eq!(ch.series.len(), 6);
        assert!(ch.to_svg().contains("work conservation"));
        // Whole scenario numbers on the x axis.
        let l = ch.layout();
        assert!(
            l.x_tick_labels().iter().all(|t| !t.contains('.')),
            "{:?}",
            l.x_tick_labels()
        );
    }

    #[test]
    fn protection_combined_only() {
        let m = json!({"protection_isol_pct": 85.0, "protection_isol_p05_pct": 60.0,
                       "protection_lat_imp_pct": 12.5, "protection_work_csv_pct": 100.0});
        let c = charts(&row("resctl", m));
        assert_eq!(kinds(&c), ["resctl_protection"]);
        let ch = &c[0].chart;
        assert!(ch.title.contains("not stored"));
        assert_eq!(ch.series.len(), 4);
        assert_eq!(ch.series[0].points, [(1.0, 85.0)]);
    }

    #[test]
    fn storage_per_loop_and_search() {
        let probe = |f: f64, r: f64| json!({"stage": "bisect", "mem_frac": f, "rps": r});
        let m = json!({"storage_mof": 1.5, "storage_mem_usage_bytes": 1e9,
        "storage_loops": [
            {"used": true, "mof": 1.4, "mem_usage_bytes": 10, "mem_size_bytes": 14,
             "mem_frac": 0.7, "probes": [probe(1.0, 300.0), probe(0.5, 1000.0)]},
            {"used": false, "mof": 3.0, "mem_usage_bytes": 1, "mem_size_bytes": 3,
             "mem_frac": 0.3, "probes": []},
            {"used": true, "mof": 1.6, "mem_usage_bytes": 10, "mem_size_bytes": 16,
             "mem_frac": 0.8, "probes": [probe(0.8, 990.0)]},
        ]});
        let c = charts(&row("resctl", m));
        assert_eq!(kinds(&c), ["resctl_storage", "resctl_storage_search"]);
        let mof = &c[0].chart;
        assert_eq!(mof.series[0].points, [(1.0, 1.4), (3.0, 1.6)]);
        assert_eq!(mof.series[1].points, [(2.0, 3.0)]);
        assert_eq!(mof.series[2].points, [(0.5, 1.5), (3.5, 1.5)]);
        let s = &c[1].chart;
        let names: Vec<_> = s.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["loop 1", "loop 3"]);
        assert_eq!(s.series[0].points, [(1.0, 300.0), (0.5, 1000.0)]);
    }

    #[test]
    fn absent_figures_draw_nothing() {
        // A hashd-params-only run, a hashd run, other benchmarks.
        for (bench, m) in [
            (
                "resctl",
                json!({"hashd_rps_max": 1000, "hashd_mem_frac": 0.5}),
            ),
            ("resctl", json!({"rps": 100.0, "lat_p99_ms": 70.0})),
            ("resctl", json!({})),
            (
                "cachebench",
                json!({"storage_mof": 1.2, "protection_isol_pct": 80.0}),
            ),
        ] {
            assert!(charts(&row(bench, m.clone())).is_empty(), "{m}");
        }
        // A scenario without samples (null figures): only what was measured.
        let m = json!({"protection_isol_pct": 0.0, "protection_scenarios": [
            {"load": 1.0, "speed": "2x", "loops": 1, "isol_pct": null, "isol_p05_pct": null,
             "lat_imp_pct": null, "lat_imp_p95_pct": null, "work_csv_pct": 100.0, "fail_pct": 0.0}]});
        let c = charts(&row("resctl", m));
        let names: Vec<_> = c[0].chart.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["work conservation", "failed time"]);
        // Storage without loops: the job's factor alone, no search.
        let c = charts(&row("resctl", json!({"storage_mof": 1.2})));
        assert_eq!(kinds(&c), ["resctl_storage"]);
        assert!(
            c[0].chart
                .title
                .contains("1.2 (per-loop figures not stored)")
        );
    }
}
