//! Report-page charts of Distbench runs (the report page's): the traffic
//! between each pair of services, from the [`PairFigures`] the record
//! keeps per test (one per (client service, server service) pair, summed
//! over instances).
//!
//! Per test with pairs: `distbench_pairs`, the RPCs of each pair (pair k
//! at x = k, one legend entry per pair, named `client -> server`), and
//! `distbench_pair_latency`, each pair's p50 and p99 at the same x. The
//! busiest [`MAX_PAIRS`] pairs are drawn (the title says when there are
//! more), and the first [`MAX_TESTS`] tests of a run.

use chart::Chart;

use harness::page_chart::{CHART_H, CHART_W, PageChart};

use crate::metrics::PairFigures;
use crate::subcommands::{DistbenchRecord, TestRecord};

/// Pairs drawn per test (the legend's rows).
pub const MAX_PAIRS: usize = 12;
/// Tests of one run drawn.
pub const MAX_TESTS: usize = 4;

/// The charts of a run's record: a run of tests draws its pairs.
pub fn charts(r: &DistbenchRecord) -> Vec<PageChart> {
    match r {
        DistbenchRecord::RunTests(t) | DistbenchRecord::Localhost(t) => tests_charts(&t.tests),
        _ => Vec::new(),
    }
}

fn tests_charts(tests: &[TestRecord]) -> Vec<PageChart> {
    let mut out = Vec::new();
    for (i, test) in tests.iter().enumerate().take(MAX_TESTS) {
        let mut pairs: Vec<&PairFigures> = test.figures.pairs.iter().collect();
        if pairs.is_empty() {
            continue;
        }
        let name = if test.name.is_empty() {
            format!("test {}", i + 1)
        } else {
            format!("test {}", test.name)
        };
        let total = pairs.len();
        // The busiest first; by name among equals.
        pairs.sort_by(|a, b| {
            b.rpcs
                .cmp(&a.rpcs)
                .then_with(|| (&a.from, &a.to).cmp(&(&b.from, &b.to)))
        });
        pairs.truncate(MAX_PAIRS);
        let shown = if total > pairs.len() {
            format!(" (busiest {} of {total} pairs)", pairs.len())
        } else {
            String::new()
        };
        let mut rpcs = Chart::new(
            &format!("Distbench RPCs per service pair{shown}, {name}"),
            "pair #",
            "RPCs (successful, not warm-up)",
        )
        .size(CHART_W, CHART_H)
        .y_min(0.0)
        .x_range(0.0, harness::page_chart::index_axis_end(pairs.len()))
        .integer_x();
        let (mut p50, mut p99) = (Vec::new(), Vec::new());
        for (k, p) in pairs.iter().enumerate() {
            let x = k as f64 + 1.0;
            rpcs = rpcs.points(
                &format!("{x} {} -> {}", p.from, p.to),
                vec![(x, p.rpcs as f64)],
            );
            p50.extend(p.p50_us.map(|v| (x, v)));
            p99.extend(p.p99_us.map(|v| (x, v)));
        }
        out.push(PageChart {
            kind: "distbench_pairs",
            chart: rpcs,
        });
        if !p50.is_empty() || !p99.is_empty() {
            out.push(PageChart {
                kind: "distbench_pair_latency",
                chart: Chart::new(
                    &format!("Distbench latency per service pair (# as in RPCs), {name}"),
                    "pair #",
                    "us",
                )
                .size(CHART_W, CHART_H)
                .y_min(0.0)
                .x_range(0.0, harness::page_chart::index_axis_end(pairs.len()))
                .integer_x()
                .points("p50", p50)
                .points("p99", p99),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn run(tests: Vec<(&str, Vec<PairFigures>)>) -> DistbenchRecord {
        DistbenchRecord::RunTests(crate::subcommands::TestsRecord {
            tests_planned: tests.len(),
            tests: tests
                .into_iter()
                .map(|(name, pairs)| TestRecord {
                    name: name.into(),
                    summary: Vec::new(),
                    figures: crate::metrics::TestFigures {
                        pairs,
                        ..Default::default()
                    },
                })
                .collect(),
            error: None,
            interrupted: false,
            outfile: None,
            nodes: None,
        })
    }

    fn pair(from: &str, to: &str, rpcs: u64, p50: Option<f64>) -> PairFigures {
        PairFigures {
            from: from.into(),
            to: to.into(),
            rpcs,
            failed: 0,
            request_bytes: 196 * rpcs as i64,
            response_bytes: 1024 * rpcs as i64,
            p50_us: p50,
            p99_us: p50.map(|v| v * 3.0),
        }
    }

    #[test]
    fn pairs_are_drawn_per_test() {
        let c = charts(&run(vec![(
            "client_server",
            vec![
                pair("client", "server", 500, Some(80.0)),
                pair("lb", "root", 900, None),
            ],
        )]));
        let kinds: Vec<_> = c.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, ["distbench_pairs", "distbench_pair_latency"]);
        let rpcs = &c[0].chart;
        assert!(rpcs.title.contains("client_server"), "{}", rpcs.title);
        // Busiest first, one legend entry per pair.
        let names: Vec<_> = rpcs.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["1 lb -> root", "2 client -> server"]);
        assert_eq!(rpcs.series[0].points, [(1.0, 900.0)]);
        assert_eq!(rpcs.series[1].points, [(2.0, 500.0)]);
        // Only measured latencies: the pair without any has no point.
        let lat = &c[1].chart;
        assert_eq!(lat.series[0].points, [(2.0, 80.0)]);
        assert_eq!(lat.series[1].points, [(2.0, 240.0)]);
        assert!(c[0].chart.to_svg().contains("client -&gt; server"));
        // Whole pair numbers on the x axis.
        for c in &c {
            let l = c.chart.layout();
            assert!(
                l.x_tick_labels().iter().all(|t| !t.contains('.')),
                "{:?}",
                l.x_tick_labels()
            );
        }
    }

    #[test]
    fn big_cliques_are_bounded() {
        let pairs: Vec<PairFigures> = (0..20)
            .map(|i| pair(&format!("s{i}"), "t", i, Some(1.0)))
            .collect();
        let c = charts(&run(vec![("", pairs)]));
        assert_eq!(c[0].chart.series.len(), MAX_PAIRS);
        assert!(c[0].chart.title.contains("busiest 12 of 20 pairs"));
        assert!(c[0].chart.title.contains("test 1"));
        assert_eq!(c[0].chart.series[0].name, "1 s19 -> t");
    }

    #[test]
    fn nothing_without_pairs() {
        // Records kept before pairs were, and servers' runs.
        assert!(charts(&run(vec![("x", vec![])])).is_empty());
        let seq = DistbenchRecord::LocalhostServe {
            address: "127.0.0.1:1".into(),
            nodes: 2,
        };
        assert!(charts(&seq).is_empty());
        // A pair without latency: the RPC chart alone.
        let kinds: Vec<_> = charts(&run(vec![("", vec![pair("a", "b", 0, None)])]))
            .iter()
            .map(|c| c.kind)
            .collect();
        assert_eq!(kinds, ["distbench_pairs"]);
    }
}
