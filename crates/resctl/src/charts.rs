//! Report-page charts of resctl-bench runs (the report page's), from the
//! typed figures of the latest completed job of each kind in a run's
//! result file ([`JobMetrics`], as its metrics report them):
//!
//! - `resctl_protection`: per memory-hog scenario
//!   ([`ProtectionScenarioMetrics`]), scenario k at x = k, the isolation,
//!   latency impact, work conservation and failed time in percent; a
//!   result without per-scenario figures (one upstream wrote) gets the
//!   combined figures alone.
//! - `resctl_storage`: each loop's memory offloading factor (loops kept in
//!   the mean apart from retried ones) and the job's;
//! - `resctl_storage_search`: each loop's memory-size search (the rate
//!   hashd served at each footprint fraction tried), when probes are kept.

use chart::Chart;

use harness::compare::fmt_num;
use harness::page_chart::{CHART_H, CHART_W, PageChart};

use crate::bench::metrics::{
    JobMetrics, ProtectionMetrics, ProtectionScenarioMetrics, StorageMetrics,
};

/// Loops whose memory-size search is drawn (one legend row each).
pub const MAX_SEARCH_LOOPS: usize = 10;

/// Named point series of a chart.
type NamedSeries<'a> = Vec<(&'a str, Vec<(f64, f64)>)>;

/// A figure of a scenario.
type ScenarioFigure = fn(&ProtectionScenarioMetrics) -> Option<f64>;

/// The charts of a run's jobs.
pub fn charts(m: &JobMetrics) -> Vec<PageChart> {
    let mut out = Vec::new();
    out.extend(m.protection.as_ref().map(protection));
    out.extend(m.storage.as_ref().map(storage).unwrap_or_default());
    out
}

/// Isolation, latency impact, work conservation and failed time per
/// scenario.
fn protection(m: &ProtectionMetrics) -> PageChart {
    let scenarios = &m.protection_scenarios;
    // (name, figure of a scenario, the combined figure)
    let figures: [(&str, ScenarioFigure, Option<f64>); 6] = [
        (
            "isolation mean",
            |s| s.isol_pct,
            Some(m.protection_isol_pct),
        ),
        (
            "isolation p05",
            |s| s.isol_p05_pct,
            Some(m.protection_isol_p05_pct),
        ),
        (
            "latency impact mean",
            |s| s.lat_imp_pct,
            Some(m.protection_lat_imp_pct),
        ),
        ("latency impact p95", |s| s.lat_imp_p95_pct, None),
        (
            "work conservation",
            |s| Some(s.work_csv_pct),
            Some(m.protection_work_csv_pct),
        ),
        ("failed time", |s| Some(s.fail_pct), None),
    ];
    let (title, x_label, series): (String, &str, NamedSeries) = if scenarios.is_empty() {
        // Only the combined figures are kept.
        let series = figures
            .iter()
            .filter_map(|(name, _, combined)| Some((*name, vec![(1.0, (*combined)?)])))
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
                if let Some(l) = s.load {
                    t.push_str(&format!(" load {}", fmt_num(l)));
                }
                if let Some(sp) = &s.speed {
                    t.push_str(&format!(" hog {sp}"));
                }
                if let Some(n) = s.loops {
                    t.push_str(&format!(" x{}", fmt_num(f64::from(n))));
                }
                t
            })
            .collect();
        let title = format!(
            "resctl protection per mem-hog scenario: {} (combined isolation {}%)",
            what.join(", "),
            fmt_num(m.protection_isol_pct)
        );
        let series = figures
            .iter()
            .map(|(name, figure, _)| {
                let pts = scenarios
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| Some((i as f64 + 1.0, figure(s)?)))
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
    PageChart {
        kind: "resctl_protection",
        chart: c,
    }
}

/// The offloading factor per loop, and each loop's memory-size search.
fn storage(m: &StorageMetrics) -> Vec<PageChart> {
    let mean = m.storage_mof;
    let loops = &m.storage_loops;
    let (mut used, mut retried) = (Vec::new(), Vec::new());
    for (i, l) in loops.iter().enumerate() {
        let Some(mof) = l.mof else {
            continue;
        };
        let p = (i as f64 + 1.0, mof);
        if l.used {
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
        let pts: Vec<(f64, f64)> = l.probes.iter().map(|p| (p.mem_frac, p.rps)).collect();
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
    use crate::bench::metrics::{StorageLoopMetrics, StorageProbeMetrics};

    fn kinds(c: &[PageChart]) -> Vec<&'static str> {
        c.iter().map(|c| c.kind).collect()
    }

    fn scenario(load: f64, isol: f64) -> ProtectionScenarioMetrics {
        ProtectionScenarioMetrics {
            load: Some(load),
            speed: Some("2x".into()),
            loops: Some(2),
            isol_pct: Some(isol),
            isol_p05_pct: Some(isol - 20.0),
            lat_imp_pct: Some(12.5),
            lat_imp_p95_pct: Some(40.0),
            work_csv_pct: 100.0,
            fail_pct: 0.0,
        }
    }

    fn protection_of(scenarios: Vec<ProtectionScenarioMetrics>) -> JobMetrics {
        JobMetrics {
            protection: Some(ProtectionMetrics {
                protection_isol_pct: 85.0,
                protection_isol_p05_pct: 60.0,
                protection_lat_imp_pct: 12.5,
                protection_work_csv_pct: 100.0,
                protection_scenarios: scenarios,
            }),
            ..Default::default()
        }
    }

    fn storage_of(loops: Vec<StorageLoopMetrics>) -> JobMetrics {
        JobMetrics {
            storage: Some(StorageMetrics {
                storage_mof: 1.5,
                storage_mem_usage_bytes: 1e9,
                storage_mem_size_bytes: 1.5e9,
                storage_rbps_final: 0.0,
                storage_wbps_final: 0.0,
                storage_loops: loops,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn protection_per_scenario() {
        let c = charts(&protection_of(vec![
            scenario(1.0, 80.0),
            scenario(0.8, 90.0),
        ]));
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
        let c = charts(&protection_of(vec![]));
        assert_eq!(kinds(&c), ["resctl_protection"]);
        let ch = &c[0].chart;
        assert!(ch.title.contains("not stored"));
        assert_eq!(ch.series.len(), 4);
        assert_eq!(ch.series[0].points, [(1.0, 85.0)]);
    }

    #[test]
    fn storage_per_loop_and_search() {
        let probe = |f: f64, r: f64| StorageProbeMetrics {
            stage: "bisect".into(),
            mem_frac: f,
            rps: r,
        };
        let l = |used: bool, mof: f64, probes: Vec<StorageProbeMetrics>| StorageLoopMetrics {
            used,
            mof: Some(mof),
            mem_usage_bytes: 10,
            mem_size_bytes: 14,
            mem_frac: 0.7,
            probes,
        };
        let c = charts(&storage_of(vec![
            l(true, 1.4, vec![probe(1.0, 300.0), probe(0.5, 1000.0)]),
            l(false, 3.0, vec![]),
            l(true, 1.6, vec![probe(0.8, 990.0)]),
        ]));
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
        // A hashd-params-only run.
        let hashd = JobMetrics {
            hashd_params: Some(crate::bench::metrics::HashdParamsMetrics {
                hashd_rps_max: 1000,
                hashd_mem_frac: 0.5,
                hashd_mem_actual_bytes: 1,
            }),
            ..Default::default()
        };
        assert!(charts(&hashd).is_empty());
        assert!(charts(&JobMetrics::default()).is_empty());
        // A scenario without samples (no figures): only what was measured.
        let c = charts(&protection_of(vec![ProtectionScenarioMetrics {
            isol_pct: None,
            isol_p05_pct: None,
            lat_imp_pct: None,
            lat_imp_p95_pct: None,
            ..scenario(1.0, 0.0)
        }]));
        let names: Vec<_> = c[0].chart.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["work conservation", "failed time"]);
        // Storage without loops: the job's factor alone, no search.
        let c = charts(&storage_of(vec![]));
        assert_eq!(kinds(&c), ["resctl_storage"]);
        assert!(
            c[0].chart
                .title
                .contains("1.5 (per-loop figures not stored)")
        );
    }
}
