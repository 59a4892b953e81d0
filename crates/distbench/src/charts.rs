//! Report-page charts of Distbench runs (the report page's): the traffic
//! between each pair of services, from the `pairs` the distbench crate
//! stores per test (`tests[i].pairs`: `from`, `to`, `rpcs`, `failed`,
//! `request_bytes`, `response_bytes`, `p50_us`, `p99_us`; one entry per
//! (client service, server service) pair, summed over instances).
//!
//! Per test with pairs: `distbench_pairs`, the RPCs of each pair (pair k
//! at x = k, one legend entry per pair, named `client -> server`), and
//! `distbench_pair_latency`, each pair's p50 and p99 at the same x. The
//! busiest [`MAX_PAIRS`] pairs are drawn (the title says when there are
//! more), and the first [`MAX_TESTS`] tests of a run.

use chart::Chart;
use serde_json::Value;

use harness::page_chart::{CHART_H, CHART_W, PageChart};
use harness::store::RunRow;

/// Pairs drawn per test (the legend's rows).
pub const MAX_PAIRS: usize = 12;
/// Tests of one run drawn.
pub const MAX_TESTS: usize = 4;

/// One pair as stored.
struct Pair {
    from: String,
    to: String,
    rpcs: f64,
    p50: Option<f64>,
    p99: Option<f64>,
}

fn pairs_of(test: &Value) -> Vec<Pair> {
    let Some(list) = test.get("pairs").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|p| {
            Some(Pair {
                from: p.get("from")?.as_str()?.to_string(),
                to: p.get("to")?.as_str()?.to_string(),
                rpcs: p.get("rpcs")?.as_f64()?,
                p50: p.get("p50_us").and_then(Value::as_f64),
                p99: p.get("p99_us").and_then(Value::as_f64),
            })
        })
        .collect()
}

/// The charts this workload's stored metrics allow.
pub fn charts(row: &RunRow) -> Vec<PageChart> {
    if row.benchmark != "distbench" {
        return Vec::new();
    }
    let Some(tests) = row.metrics.get("tests").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, test) in tests.iter().enumerate().take(MAX_TESTS) {
        let mut pairs = pairs_of(test);
        if pairs.is_empty() {
            continue;
        }
        let name = match test.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => format!("test {n}"),
            _ => format!("test {}", i + 1),
        };
        let total = pairs.len();
        // The busiest first; by name among equals.
        pairs.sort_by(|a, b| {
            b.rpcs
                .total_cmp(&a.rpcs)
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
            rpcs = rpcs.points(&format!("{x} {} -> {}", p.from, p.to), vec![(x, p.rpcs)]);
            p50.extend(p.p50.map(|v| (x, v)));
            p99.extend(p.p99.map(|v| (x, v)));
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
    use serde_json::json;

    fn row(bench: &str, metrics: Value) -> RunRow {
        RunRow::from_metrics("distbench_mini", bench, metrics)
    }

    fn pair(from: &str, to: &str, rpcs: u64, p50: Option<f64>) -> Value {
        json!({"from": from, "to": to, "rpcs": rpcs, "failed": 0,
               "request_bytes": 196 * rpcs, "response_bytes": 1024 * rpcs,
               "p50_us": p50, "p99_us": p50.map(|v| v * 3.0)})
    }

    #[test]
    fn pairs_are_drawn_per_test() {
        let m = json!({"tests": [{"name": "client_server", "pairs": [
            pair("client", "server", 500, Some(80.0)),
            pair("lb", "root", 900, None),
        ]}]});
        let c = charts(&row("distbench", m));
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
        let pairs: Vec<Value> = (0..20)
            .map(|i| pair(&format!("s{i}"), "t", i, Some(1.0)))
            .collect();
        let c = charts(&row(
            "distbench",
            json!({"tests": [{"name": "", "pairs": pairs}]}),
        ));
        assert_eq!(c[0].chart.series.len(), MAX_PAIRS);
        assert!(c[0].chart.title.contains("busiest 12 of 20 pairs"));
        assert!(c[0].chart.title.contains("test 1"));
        assert_eq!(c[0].chart.series[0].name, "1 s19 -> t");
    }

    #[test]
    fn nothing_without_pairs() {
        // Records kept before pairs were, servers' runs, other benchmarks.
        for (bench, m) in [
            ("distbench", json!({"tests": [{"name": "x", "rpcs": {}}]})),
            ("distbench", json!({"registered_nodes": 2})),
            ("distbench", json!({"tests": [{"pairs": [{"from": "a"}]}]})),
            (
                "feedsim",
                json!({"tests": [{"pairs": [pair("a", "b", 1, None)]}]}),
            ),
        ] {
            assert!(charts(&row(bench, m.clone())).is_empty(), "{m}");
        }
        // A pair without latency: the RPC chart alone.
        let m = json!({"tests": [{"pairs": [pair("a", "b", 0, None)]}]});
        let kinds: Vec<_> = charts(&row("distbench", m))
            .iter()
            .map(|c| c.kind)
            .collect();
        assert_eq!(kinds, ["distbench_pairs"]);
    }
}
