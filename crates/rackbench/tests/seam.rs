//! The seam between the workloads and the harness: what the report page
//! shows of each workload's runs comes from the workload (through the
//! registry the binary builds), and the harness's own code names none of
//! the workloads' metric keys.

use harness::html::{PageOptions, page};
use harness::store::RunRow;
use serde_json::{Value, json};
use std::path::Path;

/// The workloads, as the binary registers them (the binary's own list).
#[path = "../src/registry.rs"]
mod registry;
use registry::registry;

fn row(id: i64, job: &str, bench: &str, host: &str, metrics: Value) -> RunRow {
    RunRow {
        id,
        run_id: format!("r{id}"),
        timestamp: 1_795_000_000 + id as u64 * 60,
        hostname: host.into(),
        args: vec!["--x".into(), "a b".into()],
        machine: json!({"hostname": host, "cpu": {"model": "<Fake & CPU>"}}),
        ..RunRow::from_metrics(job, bench, metrics)
    }
}

/// A search's metrics with a ladder of probes and a final series (shared
/// with the harness's page tests).
fn ladder_metrics() -> Value {
    serde_json::from_str(include_str!("../../results/testdata/ladder_metrics.json"))
        .expect("ladder_metrics.json")
}

#[test]
fn page_has_filters_runs_and_a_chart_per_kind() {
    let rows = vec![
        row(1, "calibrate_quick", "calibrate", "h1", ladder_metrics()),
        row(
            2,
            "cachebench_mini",
            "cachebench",
            "h1",
            json!({"hit_ratio_pct": 67.0, "ram_hit_ratio_pct": 67.0,
            "hooks": {"cpu-mpstat": {"avg_busy_pct": 41.5}},
            "nvm": {"hit_ratio_pct": 30.0, "device_read_latency_us": {"p50": 80, "p90": 120, "p99": 300, "p999": 900, "max": 1000}}}),
        ),
        // A second CacheBench run: a chart across runs needs two (one
        // point is a number, and the page does not draw it).
        row(
            4,
            "cachebench_mini",
            "cachebench",
            "h1",
            json!({"hit_ratio_pct": 69.0, "ram_hit_ratio_pct": 69.0}),
        ),
        row(
            3,
            "distbench_mini",
            "distbench",
            "h2",
            json!({"tests": [{"name": "t1",
            "rpcs": {"client_server_rpc": {"latency_us": {"p50": 700.0, "p90": 900.0, "p99": 2000.0, "p99.9": 3000.0}}}}]}),
        ),
    ];
    let html = page(
        &rows,
        &PageOptions {
            title: "T".into(),
            ..Default::default()
        },
        &registry(),
    );
    for id in [
        "f-job",
        "f-host",
        "f-since",
        "f-until",
        "runs",
        "data-report-ready",
    ] {
        assert!(html.contains(id), "{id}");
    }
    // Every job and host is a filter option, every run a table row.
    for v in [
        "calibrate_quick",
        "cachebench_mini",
        "distbench_mini",
        "h1",
        "h2",
    ] {
        assert!(html.contains(&format!(r#"<option value="{v}">"#)), "{v}");
    }
    assert_eq!(html.matches(r#"<tr class="f" data-job"#).count(), 4);
    // Hook outputs have their own block, not the metrics table.
    assert_eq!(html.matches("Hook outputs (cpu-mpstat)").count(), 1);
    let hooks_at = html.find("Hook outputs").unwrap();
    let value_at = html.find("cpu-mpstat.avg_busy_pct").unwrap();
    assert!(value_at > hooks_at);
    for kind in [
        "ladder",
        "ladder_qps",
        "series_counts",
        "series_latency",
        "percentiles",
        "hit_ratio",
    ] {
        assert!(html.contains(&format!(r#"data-kind="{kind}""#)), "{kind}");
    }
    assert!(html.contains("Distbench latency per RPC"));
    assert!(html.contains("client_server_rpc"));
    assert!(html.contains("nvm.device_read_latency_us"));
    // Self-contained: nothing loaded from elsewhere.
    assert!(!html.contains("src=\"http"), "external source");
    assert!(!html.contains("href=\"http"), "external link");
    // Every metric is listed, flattened.
    assert!(html.contains("<th>probes[3].target_value_ms</th>"));
    assert!(html.contains("<th>final_latency.p999_ms</th>"));
    // No comparison: each job ran on one host.
    assert!(html.contains("No job in this selection was run on two hosts"));
    assert!(!html.contains("refresh"));
    let served = page(
        &rows,
        &PageOptions {
            refresh_secs: Some(7),
            ..Default::default()
        },
        &registry(),
    );
    assert!(served.contains(r#"<meta http-equiv="refresh" content="7">"#));
    // With the store's version the page polls it instead and reloads only
    // when it changed.
    let polled = page(
        &rows,
        &PageOptions {
            refresh_secs: Some(7),
            store_version: Some("3.9".into()),
            ..Default::default()
        },
        &registry(),
    );
    assert!(!polled.contains("http-equiv"));
    assert!(
        polled.contains(r#"v.trim()!=="3.9")location.reload()"#),
        "no poll"
    );
    assert!(polled.contains("},7000);</script>"), "no poll");
}

/// The harness's product code (each file up to its test module), by file:
/// the harness and the crates split off it (results, host).
fn harness_sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).expect("harness sources") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("source");
                // Comments (job file examples in docs) are not code.
                let product = text
                    .split("#[cfg(test)]")
                    .next()
                    .unwrap_or("")
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push((p.display().to_string(), product));
            }
        }
    }
    let mut out = Vec::new();
    for krate in ["harness", "results", "host"] {
        walk(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(krate)
                .join("src"),
            &mut out,
        );
    }
    assert!(out.len() > 20, "harness sources not found");
    out
}

/// The harness names none of the workloads' metric keys (the literal
/// segments of every pattern in their direction tables) and branches on
/// no workload's name: directions and charts reach it through the
/// `Workload` trait. The benchpress adapter is the one exception for
/// names: upstream's job files and DCPerf's score pools name benchmarks,
/// and it maps them.
#[test]
fn the_harness_names_no_workload_metric() {
    let reg = registry();
    let mut keys = std::collections::BTreeSet::new();
    for w in reg.iter() {
        let tables = w.directions();
        assert!(!tables.is_empty(), "{} states no directions", w.name());
        for r in tables.iter().flat_map(|t| t.iter()) {
            // A key's literal segments that name a metric (`hit_ratio_pct`;
            // not `server` or `p*`).
            for seg in r.pattern.split('.') {
                if !seg.contains('*') && seg.contains('_') {
                    keys.insert(seg.to_string());
                }
            }
        }
    }
    assert!(keys.contains("final_achieved_qps") && keys.contains("hit_ratio_pct"));
    let names: Vec<&str> = reg.names();
    // score.rs holds DCPerf's own table of the benchmarks it scores (benchpress'
    // BASELINES), whose "feedsim" is DCPerf's name, not a workload's.
    let allowed_names = ["score.rs"];
    let mut found = Vec::new();
    for (file, code) in harness_sources() {
        for k in &keys {
            if code.contains(&format!("\"{k}\"")) {
                found.push(format!("{file}: metric key \"{k}\""));
            }
        }
        if allowed_names.iter().any(|a| file.ends_with(a)) {
            continue;
        }
        for n in &names {
            if code.contains(&format!("\"{n}\"")) {
                found.push(format!("{file}: workload name \"{n}\""));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Every stored metric a real run reports gets the direction its
/// workload states: the tables are the workloads', and a metric the
/// harness has never heard of is still judged.
#[test]
fn compare_judges_by_the_workloads_tables() {
    let reg = registry();
    let t = |bench: &str, key: &str| {
        let w = reg.get(bench).expect("registered");
        harness::direction::better_in(w.directions(), key)
    };
    use harness::direction::Better::{Higher, Lower, Neutral};
    assert_eq!(t("feedsim", "final_achieved_qps"), Higher);
    assert_eq!(t("calibrate", "final_latency.p99_ms"), Lower);
    assert_eq!(t("calibrate", "analytic_max_qps"), Neutral);
    assert_eq!(t("adsim", "fires_per_s"), Higher);
    assert_eq!(t("distbench", "p99_latency_us"), Lower);
    assert_eq!(t("cachebench", "nvm.device_read_latency_us.p99"), Lower);
    assert_eq!(t("resctl", "protection_isol_pct"), Higher);
    // A key of another workload is neutral here: tables do not leak.
    assert_eq!(t("resctl", "hit_ratio_pct"), Neutral);
}
