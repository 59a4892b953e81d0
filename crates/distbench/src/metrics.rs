//! Report metrics of Distbench results: per test and per RPC, the latency
//! percentiles (upstream's rule: `sorted[floor(N * p)]` over successful,
//! non-warm-up samples), counts, throughput and bandwidth over the test's
//! time (the longest client->server pair span, as upstream's summary).
//! RPC replay traces are counted apart, per trace ([`ReplayFigures`]):
//! upstream's summary leaves their samples out, and so do the figures
//! above.

use crate::proto::{RpcSample, TestResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Latency percentiles in microseconds (`null` when no sample counts).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyUs {
    pub min: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    #[serde(rename = "p99.9")]
    pub p99_9: Option<f64>,
    pub max: Option<f64>,
}

/// What one RPC (or all of a test's RPCs) measured, as the record keeps
/// it: the counts, the latency percentiles and the bytes moved by the
/// samples that count.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RpcFigures {
    pub samples: u64,
    pub failed: u64,
    pub warmup: u64,
    pub latency_us: LatencyUs,
    pub request_bytes: i64,
    pub response_bytes: i64,
}

/// What the replays of one RPC replay trace measured (rackbench's own
/// figure; upstream's summary does not read replay logs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayFigures {
    /// Replays that sent something (one log per instance and iteration).
    pub replays: u64,
    /// Successful RPCs of the replays that are not warm-up.
    pub samples: u64,
    /// Failed RPCs (an `error_index`), warm-up or not.
    pub failed: u64,
    /// Successful RPCs of warm-up replays.
    pub warmup: u64,
    /// Latencies of the `samples`.
    pub latency_us: LatencyUs,
}

/// The traffic from one service's instances to another's, summed over
/// instance pairs and RPCs (so a clique of N instances gives one pair, not
/// N x N): RPC counts, bytes and latency of the samples that count.
/// Services are the instance names' part before the first `/`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairFigures {
    /// The client's service.
    pub from: String,
    /// The server's service.
    pub to: String,
    /// Successful, non-warm-up RPCs.
    pub rpcs: u64,
    pub failed: u64,
    /// Request and response bytes of the `rpcs`.
    pub request_bytes: i64,
    pub response_bytes: i64,
    /// `null` when no RPC counts.
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// The node managers' resource usage over a test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeUsage {
    /// User plus system CPU seconds, summed over the nodes.
    pub cpu_secs: f64,
    /// The largest max RSS of a node (`None` when no node has a diff).
    pub max_rss_kib: Option<i64>,
}

/// What one test measured, as the record keeps it (the raw samples stay
/// in the results file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TestFigures {
    /// The longest client->server pair span of the counted samples.
    pub span_ns: i64,
    pub overall: RpcFigures,
    pub rpcs: BTreeMap<String, RpcFigures>,
    /// `iteration_count` of each activity config, summed over instances.
    pub activity_iterations: BTreeMap<String, i64>,
    /// `None` when the result has no resource usage logs.
    pub node_usage: Option<NodeUsage>,
    /// Why an instance's engine stopped its traffic early (its log's
    /// `engine_error_message`: an overload, cancel_traffic_when_done...),
    /// by instance.
    #[serde(default)]
    pub engine_errors: BTreeMap<String, String>,
    /// RPC replay traces, by trace name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replay: BTreeMap<String, ReplayFigures>,
    /// Traffic per (client service, server service) pair, in that order
    /// (absent from records kept before it was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<PairFigures>,
}

/// The report's metrics of one RPC (or of all).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcMetrics {
    pub samples: u64,
    pub failed: u64,
    pub warmup: u64,
    pub latency_us: LatencyUs,
    /// `null` when the test's time is 0.
    pub kqps: Option<f64>,
    pub request_mib_per_s: Option<f64>,
    pub response_mib_per_s: Option<f64>,
}

/// The report's metrics of one test (an entry of `tests`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestMetrics {
    pub name: String,
    pub total_time_secs: f64,
    pub overall: RpcMetrics,
    pub rpcs: BTreeMap<String, RpcMetrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activity_iterations: Option<BTreeMap<String, i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_cpu_secs: Option<f64>,
    /// Present with the usage logs; `null` inside when no node has a diff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_max_rss_kib: Option<Option<i64>>,
    /// `engine_error_message` by instance, when an engine stopped early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_errors: Option<BTreeMap<String, String>>,
    /// Only `true`: an engine stopped its traffic as overloaded
    /// (`RESOURCE_EXHAUSTED`, or told so by an overloaded peer); the
    /// figures cover the traffic until then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overloaded: Option<bool>,
    /// RPC replay traces, by trace name, when the test replayed any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<BTreeMap<String, ReplayFigures>>,
    /// Traffic per (client service, server service) pair; absent when no
    /// peer saw traffic (or the record predates it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<PairFigures>,
    pub log_summary: Vec<String>,
}

impl RpcFigures {
    /// The report's metrics over a test of `secs` seconds.
    pub fn metrics(&self, secs: f64) -> RpcMetrics {
        let rate = |x: f64| (secs > 0.0).then(|| x / secs);
        RpcMetrics {
            samples: self.samples,
            failed: self.failed,
            warmup: self.warmup,
            latency_us: self.latency_us.clone(),
            kqps: rate(self.samples as f64 / 1000.0),
            request_mib_per_s: rate(self.request_bytes as f64 / (1u64 << 20) as f64),
            response_mib_per_s: rate(self.response_bytes as f64 / (1u64 << 20) as f64),
        }
    }
}

impl TestFigures {
    /// Whether an engine stopped its traffic as overloaded.
    pub fn overloaded(&self) -> bool {
        self.engine_errors
            .values()
            .any(|e| e.contains("RESOURCE_EXHAUSTED"))
    }

    /// The test's time: the longest span, in seconds.
    pub fn secs(&self) -> f64 {
        self.span_ns as f64 / 1e9
    }

    /// The report's metrics of the test named `name` whose summary lines
    /// are `log_summary`.
    pub fn metrics(&self, name: &str, log_summary: &[String]) -> TestMetrics {
        let secs = self.secs();
        TestMetrics {
            name: name.to_string(),
            total_time_secs: secs,
            overall: self.overall.metrics(secs),
            rpcs: self
                .rpcs
                .iter()
                .map(|(k, v)| (k.clone(), v.metrics(secs)))
                .collect(),
            activity_iterations: (!self.activity_iterations.is_empty())
                .then(|| self.activity_iterations.clone()),
            node_cpu_secs: self.node_usage.as_ref().map(|u| u.cpu_secs),
            node_max_rss_kib: self.node_usage.as_ref().map(|u| u.max_rss_kib),
            engine_errors: (!self.engine_errors.is_empty()).then(|| self.engine_errors.clone()),
            overloaded: self.overloaded().then_some(true),
            replay: (!self.replay.is_empty()).then(|| self.replay.clone()),
            pairs: self.pairs.clone(),
            log_summary: log_summary.to_vec(),
        }
    }
}

/// The samples of one RPC (or of all) that count.
#[derive(Default)]
struct Acc {
    latencies: Vec<i64>,
    failed: u64,
    warmup: u64,
    request_bytes: i64,
    response_bytes: i64,
}

impl Acc {
    fn add_ok(&mut self, s: &RpcSample) {
        if s.warmup() {
            self.warmup += 1;
            return;
        }
        self.latencies.push(s.latency_ns());
        self.request_bytes += s.request_size();
        self.response_bytes += s.response_size();
    }

    fn figures(mut self) -> RpcFigures {
        self.latencies.sort_unstable();
        let n = self.latencies.len();
        let us = |ns: i64| ns as f64 / 1000.0;
        let pick = |p: f64| -> Option<f64> {
            if n == 0 {
                return None;
            }
            let i = ((n as f64) * p).floor() as usize;
            Some(us(self.latencies[i.min(n - 1)]))
        };
        RpcFigures {
            samples: n as u64,
            failed: self.failed,
            warmup: self.warmup,
            latency_us: LatencyUs {
                min: pick(0.0),
                p50: pick(0.5),
                p90: pick(0.9),
                p99: pick(0.99),
                p99_9: pick(0.999),
                max: self.latencies.last().map(|&l| us(l)),
            },
            request_bytes: self.request_bytes,
            response_bytes: self.response_bytes,
        }
    }
}

/// What one test result measured.
pub fn test_figures(r: &TestResult) -> TestFigures {
    let config = r.traffic_config.clone().unwrap_or_default();
    let rpc_name = |i: i32| {
        usize::try_from(i)
            .ok()
            .and_then(|i| config.rpc_descriptions.get(i))
            .map_or_else(|| format!("#{i}"), |d| d.name().to_string())
    };
    let mut per_rpc: BTreeMap<String, Acc> = BTreeMap::new();
    let mut per_pair: BTreeMap<(String, String), Acc> = BTreeMap::new();
    let mut all = Acc::default();
    let mut longest_span_ns: i64 = 0;
    let mut activities: BTreeMap<String, i64> = BTreeMap::new();
    let mut engine_errors = BTreeMap::new();
    let mut replays: BTreeMap<String, (u64, Acc)> = BTreeMap::new();
    if let Some(logs) = &r.service_logs {
        for (instance, log) in &logs.instance_logs {
            for replay in &log.replay_trace_logs {
                let (n, acc) = replays
                    .entry(replay.rpc_replay_trace_name().to_string())
                    .or_default();
                *n += 1;
                for s in replay.rpc_samples.values() {
                    if s.error_index() != 0 {
                        acc.failed += 1;
                    } else if replay.warmup() {
                        acc.warmup += 1;
                    } else {
                        acc.latencies.push(s.latency_ns());
                    }
                }
            }
            if let Some(e) = log.engine_error_message.as_ref().filter(|e| !e.is_empty()) {
                engine_errors.insert(instance.clone(), e.clone());
            }
            for (name, a) in &log.activity_logs {
                for metric in &a.activity_metrics {
                    if metric.name() == "iteration_count" {
                        *activities.entry(name.clone()).or_default() += metric.value_int();
                    }
                }
            }
            for (peer_name, peer) in &log.peer_logs {
                let (mut first, mut last) = (i64::MAX, i64::MIN);
                let pair = per_pair
                    .entry((service_of(instance), service_of(peer_name)))
                    .or_default();
                for (&rpc, l) in &peer.rpc_logs {
                    let acc = per_rpc.entry(rpc_name(rpc)).or_default();
                    pair.failed += l.failed_rpc_samples.len() as u64;
                    for s in &l.successful_rpc_samples {
                        acc.add_ok(s);
                        all.add_ok(s);
                        pair.add_ok(s);
                        if !s.warmup() {
                            first = first.min(s.start_timestamp_ns());
                            last = last.max(s.start_timestamp_ns() + s.latency_ns());
                        }
                    }
                    acc.failed += l.failed_rpc_samples.len() as u64;
                    all.failed += l.failed_rpc_samples.len() as u64;
                }
                if last > first {
                    longest_span_ns = longest_span_ns.max(last - first);
                }
            }
        }
    }
    let node_usage = r.resource_usage_logs.as_ref().map(|u| {
        let diffs = || {
            u.node_usages
                .values()
                .filter_map(|s| s.rusage_diff.as_ref())
        };
        NodeUsage {
            cpu_secs: diffs()
                .map(|d| d.user_cpu_time_seconds() + d.system_cpu_time_seconds())
                .sum(),
            max_rss_kib: diffs().map(|d| d.max_resident_set_size()).max(),
        }
    });
    TestFigures {
        span_ns: longest_span_ns,
        overall: all.figures(),
        rpcs: per_rpc.into_iter().map(|(k, a)| (k, a.figures())).collect(),
        activity_iterations: activities,
        node_usage,
        engine_errors,
        replay: replays
            .into_iter()
            .map(|(name, (replays, acc))| {
                let f = acc.figures();
                (
                    name,
                    ReplayFigures {
                        replays,
                        samples: f.samples,
                        failed: f.failed,
                        warmup: f.warmup,
                        latency_us: f.latency_us,
                    },
                )
            })
            .collect(),
        pairs: per_pair
            .into_iter()
            .filter(|(_, a)| !a.latencies.is_empty() || a.failed > 0 || a.warmup > 0)
            .map(|((from, to), a)| {
                let f = a.figures();
                PairFigures {
                    from,
                    to,
                    rpcs: f.samples,
                    failed: f.failed,
                    request_bytes: f.request_bytes,
                    response_bytes: f.response_bytes,
                    p50_us: f.latency_us.p50,
                    p99_us: f.latency_us.p99,
                }
            })
            .collect(),
    }
}

/// The service of an instance name (`client/0` -> `client`).
fn service_of(instance: &str) -> String {
    instance
        .split_once('/')
        .map_or(instance, |(s, _)| s)
        .to_string()
}

/// The name of a test result's test (empty without a traffic config).
pub fn test_name(r: &TestResult) -> String {
    r.traffic_config
        .as_ref()
        .map(|c| c.name().to_string())
        .unwrap_or_default()
}

/// The report's metrics of one test result.
pub fn test_metrics(r: &TestResult) -> TestMetrics {
    test_figures(r).metrics(&test_name(r), &r.log_summary)
}

/// Test results to derive metrics from, and the metrics the untyped
/// implementation derived from them before the typed one (the report must
/// not change).
#[cfg(test)]
pub(crate) mod fixtures {
    use crate::proto::*;

    pub(crate) fn sample(start: i64, lat: i64, warmup: bool) -> RpcSample {
        RpcSample {
            request_size: Some(100),
            response_size: Some(1 << 20),
            start_timestamp_ns: Some(start),
            latency_ns: Some(lat),
            warmup: warmup.then_some(true),
            ..Default::default()
        }
    }

    fn usage(user: f64, sys: f64, rss: i64) -> RUsageStats {
        RUsageStats {
            rusage_diff: Some(RUsage {
                user_cpu_time_seconds: Some(user),
                system_cpu_time_seconds: Some(sys),
                max_resident_set_size: Some(rss),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Two RPCs (one without a successful sample), warm-up, failures,
    /// activities and node usage.
    pub fn rich() -> TestResult {
        let mut ok: Vec<RpcSample> = (0..10)
            .map(|i| sample(i * 1_000_000, (i + 1) * 1500, false))
            .collect();
        ok.push(sample(0, 99_999_999, true));
        let mut peer = PeerPerformanceLog::default();
        peer.rpc_logs.insert(
            0,
            RpcPerformanceLog {
                successful_rpc_samples: ok,
                failed_rpc_samples: vec![sample(0, 1, false), sample(5, 1, false)],
            },
        );
        peer.rpc_logs.insert(
            1,
            RpcPerformanceLog {
                successful_rpc_samples: vec![],
                failed_rpc_samples: vec![sample(0, 1, false)],
            },
        );
        let mut spl = ServicePerformanceLog::default();
        spl.peer_logs.insert("server/0".into(), peer);
        spl.activity_logs.insert(
            "spin".into(),
            ActivityLog {
                activity_metrics: vec![ActivityMetric {
                    name: Some("iteration_count".into()),
                    value_int: Some(42),
                }],
            },
        );
        let mut logs = ServiceLogs::default();
        logs.instance_logs.insert("client/0".into(), spl);
        let mut u = ResourceUsageLogs::default();
        u.node_usages.insert("node0".into(), usage(1.25, 0.5, 2048));
        u.node_usages
            .insert("node1".into(), usage(0.125, 0.0625, 4096));
        TestResult {
            traffic_config: Some(DistributedSystemDescription {
                name: Some("rich".into()),
                rpc_descriptions: vec![
                    RpcSpec {
                        name: Some("q".into()),
                        ..Default::default()
                    },
                    RpcSpec {
                        name: Some("idle".into()),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            service_logs: Some(logs),
            resource_usage_logs: Some(u),
            log_summary: vec!["line one".into(), "line two".into()],
            ..Default::default()
        }
    }

    /// No samples at all; usage logs without a diff (`node_max_rss_kib`
    /// null).
    pub fn empty_usage() -> TestResult {
        TestResult {
            resource_usage_logs: Some(ResourceUsageLogs::default()),
            ..Default::default()
        }
    }

    pub const RICH: &str = r#"{"activity_iterations":{"spin":42},"log_summary":["line one","line two"],"name":"rich","node_cpu_secs":1.9375,"node_max_rss_kib":4096,"overall":{"failed":3,"kqps":1.1092623405435384,"latency_us":{"max":15.0,"min":1.5,"p50":9.0,"p90":15.0,"p99":15.0,"p99.9":15.0},"request_mib_per_s":0.10578750043330559,"response_mib_per_s":1109.2623405435386,"samples":10,"warmup":1},"rpcs":{"idle":{"failed":1,"kqps":0.0,"latency_us":{"max":null,"min":null,"p50":null,"p90":null,"p99":null,"p99.9":null},"request_mib_per_s":0.0,"response_mib_per_s":0.0,"samples":0,"warmup":0},"q":{"failed":2,"kqps":1.1092623405435384,"latency_us":{"max":15.0,"min":1.5,"p50":9.0,"p90":15.0,"p99":15.0,"p99.9":15.0},"request_mib_per_s":0.10578750043330559,"response_mib_per_s":1109.2623405435386,"samples":10,"warmup":1}},"total_time_secs":0.009015}"#;
    pub const EMPTY_USAGE: &str = r#"{"log_summary":[],"name":"","node_cpu_secs":-0.0,"node_max_rss_kib":null,"overall":{"failed":0,"kqps":null,"latency_us":{"max":null,"min":null,"p50":null,"p90":null,"p99":null,"p99.9":null},"request_mib_per_s":null,"response_mib_per_s":null,"samples":0,"warmup":0},"rpcs":{},"total_time_secs":0.0}"#;
    pub const BARE: &str = r#"{"log_summary":[],"name":"","overall":{"failed":0,"kqps":null,"latency_us":{"max":null,"min":null,"p50":null,"p90":null,"p99":null,"p99.9":null},"request_mib_per_s":null,"response_mib_per_s":null,"samples":0,"warmup":0},"rpcs":{},"total_time_secs":0.0}"#;
}

#[cfg(test)]
mod tests {
    use super::fixtures::sample;
    use super::*;
    use crate::proto::{
        DistributedSystemDescription, PeerPerformanceLog, RpcPerformanceLog, RpcSpec, ServiceLogs,
        ServicePerformanceLog,
    };

    #[test]
    fn percentiles_rates_and_warmup() {
        let mut ok: Vec<RpcSample> = (0..100)
            .map(|i| sample(i * 10_000_000, (i + 1) * 1000, false))
            .collect();
        ok.push(sample(0, 99_999_999, true));
        let log = RpcPerformanceLog {
            successful_rpc_samples: ok,
            failed_rpc_samples: vec![sample(0, 1, false)],
        };
        let mut peer = PeerPerformanceLog::default();
        peer.rpc_logs.insert(0, log);
        let mut spl = ServicePerformanceLog::default();
        spl.peer_logs.insert("server/0".into(), peer);
        let mut logs = ServiceLogs::default();
        logs.instance_logs.insert("client/0".into(), spl);
        let r = TestResult {
            traffic_config: Some(DistributedSystemDescription {
                name: Some("t".into()),
                rpc_descriptions: vec![RpcSpec {
                    name: Some("q".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            service_logs: Some(logs),
            ..Default::default()
        };
        let m = test_metrics(&r);
        let q = &m.rpcs["q"];
        assert_eq!(q.samples, 100);
        assert_eq!(q.warmup, 1);
        assert_eq!(q.failed, 1);
        // sorted[floor(100 * 0.5)] = the 51st latency, 51 us.
        assert_eq!(q.latency_us.p50, Some(51.0));
        assert_eq!(q.latency_us.p99, Some(100.0));
        assert_eq!(q.latency_us.min, Some(1.0));
        // Span: first start 0, last end 990 ms + 100 us.
        let secs = m.total_time_secs;
        assert!((secs - 0.9901).abs() < 1e-9, "{secs}");
        let mib = q.response_mib_per_s.unwrap();
        assert!((mib - 100.0 / secs).abs() < 1e-6, "{mib}");
    }

    #[test]
    fn typed_metrics_are_the_untyped_ones() {
        use super::fixtures::*;
        for (r, want) in [
            (rich(), RICH),
            (empty_usage(), EMPTY_USAGE),
            (TestResult::default(), BARE),
        ] {
            // Compared as text: serde_json's parser may round a float's
            // last digit, its printer does not.
            // `pairs` came later: the untyped implementation had none.
            let mut got = serde_json::to_value(test_metrics(&r)).unwrap();
            got.as_object_mut().unwrap().remove("pairs");
            assert_eq!(got.to_string(), want);
        }
        let m = test_metrics(&rich());
        assert_eq!(m.node_max_rss_kib, Some(Some(4096)));
        assert_eq!(m.rpcs["idle"].latency_us.p50, None);
        let v = serde_json::to_value(test_metrics(&TestResult::default())).unwrap();
        for absent in ["activity_iterations", "node_cpu_secs", "node_max_rss_kib"] {
            assert!(v.get(absent).is_none(), "{absent}: {v}");
        }
    }

    /// Replay samples are counted per trace, apart from the RPC figures
    /// (which upstream's summary derives from the peer logs only).
    #[test]
    fn replay_samples_count_per_trace() {
        use crate::proto::*;
        let replay = |warmup: bool, errors: &[i32]| RpcReplayTraceLog {
            rpc_replay_trace_name: Some("tr".into()),
            warmup: warmup.then_some(true),
            rpc_samples: errors
                .iter()
                .enumerate()
                .map(|(i, &e)| {
                    (
                        i as i32,
                        RpcSample {
                            start_timestamp_ns: Some(i as i64 * 1000),
                            latency_ns: Some((i as i64 + 1) * 1000),
                            error_index: (e != 0).then_some(e),
                            ..Default::default()
                        },
                    )
                })
                .collect(),
            ..Default::default()
        };
        let mut r = super::fixtures::rich();
        let logs = r.service_logs.as_mut().unwrap();
        let spl = ServicePerformanceLog {
            replay_trace_logs: vec![replay(false, &[0, 0, 1]), replay(true, &[0, 2])],
            ..Default::default()
        };
        logs.instance_logs.insert("replayer/0".into(), spl);
        let m = test_metrics(&r);
        let plain = test_metrics(&super::fixtures::rich());
        // The RPC figures do not change.
        assert_eq!(m.overall, plain.overall);
        assert_eq!(m.rpcs, plain.rpcs);
        assert_eq!(plain.replay, None);
        let tr = &m.replay.as_ref().unwrap()["tr"];
        assert_eq!((tr.replays, tr.samples, tr.failed, tr.warmup), (2, 2, 2, 1));
        assert_eq!(tr.latency_us.min, Some(1.0));
        assert_eq!(tr.latency_us.max, Some(2.0));
        let f = test_figures(&r);
        let back: TestFigures = serde_json::from_value(serde_json::to_value(&f).unwrap()).unwrap();
        assert_eq!(back, f);
    }

    /// Traffic is summed per (client service, server service) pair over
    /// instances and RPCs; a pair without traffic is left out.
    #[test]
    fn pairs_are_per_service_pair() {
        use super::fixtures::sample;
        use crate::proto::*;
        let m = test_metrics(&super::fixtures::rich());
        assert_eq!(m.pairs.len(), 1, "{:?}", m.pairs);
        let p = &m.pairs[0];
        assert_eq!((p.from.as_str(), p.to.as_str()), ("client", "server"));
        assert_eq!((p.rpcs, p.failed), (m.overall.samples, m.overall.failed));
        assert_eq!(p.p50_us, m.overall.latency_us.p50);
        assert_eq!(p.p99_us, m.overall.latency_us.p99);
        assert_eq!(p.response_bytes, 10 << 20);

        let peer = |n: i64| {
            let mut p = PeerPerformanceLog::default();
            p.rpc_logs.insert(
                0,
                RpcPerformanceLog {
                    successful_rpc_samples: (0..n).map(|i| sample(i, 1000, false)).collect(),
                    failed_rpc_samples: vec![],
                },
            );
            p
        };
        let mut logs = ServiceLogs::default();
        for (i, peers) in [
            ("a/0", vec![("b/0", 2), ("b/1", 3), ("a/1", 1)]),
            ("a/1", vec![("b/0", 4), ("c/0", 0)]),
        ] {
            let mut spl = ServicePerformanceLog::default();
            for (name, n) in peers {
                spl.peer_logs.insert(name.into(), peer(n));
            }
            logs.instance_logs.insert(i.into(), spl);
        }
        let r = TestResult {
            service_logs: Some(logs),
            ..Default::default()
        };
        let got: Vec<(String, String, u64)> = test_metrics(&r)
            .pairs
            .into_iter()
            .map(|p| (p.from, p.to, p.rpcs))
            .collect();
        let want = |a: &str, b: &str, n: u64| (a.to_string(), b.to_string(), n);
        assert_eq!(got, vec![want("a", "a", 1), want("a", "b", 9)]);
        let v = serde_json::to_value(test_metrics(&TestResult::default())).unwrap();
        assert!(v.get("pairs").is_none(), "{v}");
    }

    #[test]
    fn figures_round_trip_through_json() {
        let f = test_figures(&super::fixtures::rich());
        let back: TestFigures = serde_json::from_value(serde_json::to_value(&f).unwrap()).unwrap();
        assert_eq!(back, f);
    }
}
