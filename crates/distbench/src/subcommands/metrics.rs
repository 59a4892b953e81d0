//! The report's metrics of a subcommand's run, derived from its record.

use super::record::{DistbenchRecord, TestsRecord};
use crate::metrics;

/// The report's metrics of a run of tests: one entry per test, and the
/// first test's overall numbers at the top for jobs of one test.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TestsMetrics {
    #[serde(flatten)]
    pub first: Option<FirstTestMetrics>,
    pub tests_planned: usize,
    pub tests_completed: usize,
    pub tests: Vec<metrics::TestMetrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Only `true`, when interrupted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outfile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
}

/// The first test's overall figures, at the top of the metrics.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FirstTestMetrics {
    /// Successful, non-warm-up RPCs.
    pub rpcs: u64,
    pub kqps: Option<f64>,
    pub p50_latency_us: Option<f64>,
    pub p99_latency_us: Option<f64>,
    pub response_mib_per_s: Option<f64>,
    pub failed_rpcs: u64,
}

/// The report's metrics of a `test_sequencer` run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SequencerMetrics {
    pub registered_nodes: usize,
}

/// The report's metrics of a `node_manager` run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NodeManagerMetrics {
    pub node_alias: String,
    pub shutdown_by_sequencer: bool,
}

/// The servers without figures of their own (`rpc_server`,
/// `start_localhost` without tests): no metrics.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NoMetrics {}

/// The report's metrics of a run, by subcommand.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum DistbenchMetrics {
    Tests(TestsMetrics),
    Sequencer(SequencerMetrics),
    NodeManager(NodeManagerMetrics),
    None(NoMetrics),
}

impl TestsRecord {
    /// The report's metrics of the run.
    pub fn metrics(&self) -> TestsMetrics {
        let tests: Vec<metrics::TestMetrics> = self
            .tests
            .iter()
            .map(|t| t.figures.metrics(&t.name, &t.summary))
            .collect();
        let first = tests.first().map(|t| FirstTestMetrics {
            rpcs: t.overall.samples,
            kqps: t.overall.kqps,
            p50_latency_us: t.overall.latency_us.p50,
            p99_latency_us: t.overall.latency_us.p99,
            response_mib_per_s: t.overall.response_mib_per_s,
            failed_rpcs: t.overall.failed,
        });
        TestsMetrics {
            first,
            tests_planned: self.tests_planned,
            tests_completed: tests.len(),
            tests,
            error: self.error.clone(),
            interrupted: self.interrupted.then_some(true),
            outfile: self.outfile.clone(),
            nodes: self.nodes,
        }
    }
}

/// The report's metrics of a run, derived from its record.
pub fn run_metrics(r: &DistbenchRecord) -> DistbenchMetrics {
    match r {
        DistbenchRecord::RunTests(t) | DistbenchRecord::Localhost(t) => {
            DistbenchMetrics::Tests(t.metrics())
        }
        DistbenchRecord::Sequencer(s) => DistbenchMetrics::Sequencer(SequencerMetrics {
            registered_nodes: s.registered_nodes,
        }),
        DistbenchRecord::NodeManager(n) => DistbenchMetrics::NodeManager(NodeManagerMetrics {
            node_alias: n.node_alias.clone(),
            shutdown_by_sequencer: n.shutdown_by_sequencer,
        }),
        DistbenchRecord::LocalhostServe { .. } | DistbenchRecord::RpcServer { .. } => {
            DistbenchMetrics::None(NoMetrics {})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::{NodeManagerRecord, RECORD_VERSION, SequencerRecord, tests_record};
    use super::super::render::write_record;
    use super::*;
    use crate::metrics::fixtures::{empty_usage, rich};
    use crate::proto::TestSequenceResults;
    use harness::{Record, Workload};
    use serde_json::Value;
    use std::path::Path;

    /// The report's metrics of `r` as the harness derives them: through the
    /// stored record and the workload's `metrics`.
    fn derived(r: &DistbenchRecord) -> serde_json::Map<String, Value> {
        let rec = Record::of("distbench", RECORD_VERSION, r);
        let text = serde_json::to_string(&rec).unwrap();
        let back: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(
            &back
                .decode::<DistbenchRecord>("distbench", RECORD_VERSION)
                .unwrap(),
            r
        );
        crate::Distbench.metrics(&rec).unwrap()
    }

    /// The metrics the untyped implementation gave for the same results.
    const TWO_TESTS_INTERRUPTED: &str = r#"{"error":"boom","failed_rpcs":3,"interrupted":true,"kqps":1.1092623405435384,"p50_latency_us":9.0,"p99_latency_us":15.0,"response_mib_per_s":1109.2623405435386,"rpcs":10,"tests":[{"activity_iterations":{"spin":42},"log_summary":["line one","line two"],"name":"rich","node_cpu_secs":1.9375,"node_max_rss_kib":4096,"overall":{"failed":3,"kqps":1.1092623405435384,"latency_us":{"max":15.0,"min":1.5,"p50":9.0,"p90":15.0,"p99":15.0,"p99.9":15.0},"request_mib_per_s":0.10578750043330559,"response_mib_per_s":1109.2623405435386,"samples":10,"warmup":1},"rpcs":{"idle":{"failed":1,"kqps":0.0,"latency_us":{"max":null,"min":null,"p50":null,"p90":null,"p99":null,"p99.9":null},"request_mib_per_s":0.0,"response_mib_per_s":0.0,"samples":0,"warmup":0},"q":{"failed":2,"kqps":1.1092623405435384,"latency_us":{"max":15.0,"min":1.5,"p50":9.0,"p90":15.0,"p99":15.0,"p99.9":15.0},"request_mib_per_s":0.10578750043330559,"response_mib_per_s":1109.2623405435386,"samples":10,"warmup":1}},"total_time_secs":0.009015},{"log_summary":[],"name":"","node_cpu_secs":-0.0,"node_max_rss_kib":null,"overall":{"failed":0,"kqps":null,"latency_us":{"max":null,"min":null,"p50":null,"p90":null,"p99":null,"p99.9":null},"request_mib_per_s":null,"response_mib_per_s":null,"samples":0,"warmup":0},"rpcs":{},"total_time_secs":0.0}],"tests_completed":2,"tests_planned":3}"#;
    const NO_TEST: &str = r#"{"tests":[],"tests_completed":0,"tests_planned":0}"#;

    #[test]
    fn run_tests_metrics_are_derived_from_the_record() {
        let results = TestSequenceResults {
            test_results: vec![rich(), empty_usage()],
        };
        let r = tests_record(&results, 3, Some("boom".into()), true, None, None);
        assert!(!r.success());
        let mut m = derived(&DistbenchRecord::RunTests(r.clone()));
        // The per-pair traffic came later (the untyped metrics had none):
        // the first test's, through the record.
        let pairs = m["tests"][0].as_object_mut().unwrap().remove("pairs");
        assert_eq!(
            pairs.unwrap().to_string(),
            r#"[{"failed":3,"from":"client","p50_us":9.0,"p99_us":15.0,"request_bytes":1000,"response_bytes":10485760,"rpcs":10,"to":"server"}]"#
        );
        // Compared as text: serde_json's parser may round a float's last
        // digit, its printer does not.
        assert_eq!(Value::Object(m).to_string(), TWO_TESTS_INTERRUPTED);
        // Typed: the first test's figures at the top.
        let t = r.metrics();
        let first = t.first.as_ref().unwrap();
        assert_eq!((first.rpcs, first.failed_rpcs), (10, 3));
        assert_eq!(first.p50_latency_us, Some(9.0));
        assert_eq!(t.tests_completed, 2);
        assert_eq!(t.interrupted, Some(true));

        let none = tests_record(&TestSequenceResults::default(), 0, None, false, None, None);
        assert!(none.success());
        let m = derived(&DistbenchRecord::RunTests(none));
        assert_eq!(Value::Object(m.clone()).to_string(), NO_TEST);
        for absent in ["rpcs", "kqps", "error", "interrupted", "outfile", "nodes"] {
            assert!(!m.contains_key(absent), "{absent}: {m:?}");
        }
    }

    #[test]
    fn start_localhost_metrics_carry_outfile_and_nodes() {
        let results = TestSequenceResults {
            test_results: vec![rich()],
        };
        let r = tests_record(
            &results,
            1,
            None,
            false,
            Some(Path::new("/m/distbench_results.pb")),
            Some(2),
        );
        assert!(r.success());
        let m = derived(&DistbenchRecord::Localhost(r));
        assert_eq!(m["outfile"], "/m/distbench_results.pb");
        assert_eq!(m["nodes"], 2);
        assert_eq!(m["rpcs"], 10);
        assert_eq!(m["tests_completed"], 1);
        assert!(m["kqps"].is_f64());
        assert_eq!(m["tests"][0]["name"], "rich");
        assert_eq!(m["tests"][0]["activity_iterations"]["spin"], 42);
        assert!(!m.contains_key("interrupted") && !m.contains_key("error"));
        let mut text = Vec::new();
        crate::Distbench
            .format(
                &Record::of(
                    "distbench",
                    RECORD_VERSION,
                    &DistbenchRecord::Localhost(tests_record(&results, 1, None, false, None, None)),
                ),
                &mut text,
            )
            .unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "Test summary:\nline one\nline two\n\n"
        );
    }

    #[test]
    fn server_metrics_are_derived_from_the_record() {
        let m = derived(&DistbenchRecord::Sequencer(SequencerRecord {
            address: "127.0.0.1:10000".into(),
            local_nodes: 0,
            registered_nodes: 3,
        }));
        assert_eq!(Value::Object(m), serde_json::json!({"registered_nodes": 3}));
        let m = derived(&DistbenchRecord::NodeManager(NodeManagerRecord {
            node_alias: "node1".into(),
            test_sequencer: "127.0.0.1:10000".into(),
            control_address: "127.0.0.1:4242".into(),
            shutdown_by_sequencer: true,
        }));
        assert_eq!(
            Value::Object(m),
            serde_json::json!({"node_alias": "node1", "shutdown_by_sequencer": true})
        );
        for r in [
            DistbenchRecord::RpcServer {
                address: "127.0.0.1:10086".into(),
                response_size: 32,
            },
            DistbenchRecord::LocalhostServe {
                address: "127.0.0.1:10000".into(),
                nodes: 2,
            },
        ] {
            assert!(derived(&r).is_empty(), "{r:?}");
        }
        let mut text = Vec::new();
        write_record(
            &DistbenchRecord::RpcServer {
                address: "127.0.0.1:10086".into(),
                response_size: 32,
            },
            &mut text,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "rpc_server: distbench.Traffic/GenericRpc on 127.0.0.1:10086 (rpc_index 0, 32 B responses)\n"
        );
    }

    #[test]
    fn an_older_record_is_refused() {
        let rec = Record {
            kind: "distbench".into(),
            version: 1,
            data: serde_json::json!({"tests_planned": 0, "tests": []}),
        };
        let e = crate::Distbench.metrics(&rec).unwrap_err().to_string();
        assert!(e.contains("an older rackbench"), "{e}");
    }
}
