//! Report metrics of Distbench results: per test and per RPC, the latency
//! percentiles (upstream's rule: `sorted[floor(N * p)]` over successful,
//! non-warm-up samples), counts, throughput and bandwidth over the test's
//! time (the longest client->server pair span, as upstream's summary).

use crate::proto::{RpcSample, TestResult};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

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

    fn json(&mut self, secs: f64) -> Value {
        self.latencies.sort_unstable();
        let n = self.latencies.len();
        let pick = |p: f64| -> Value {
            if n == 0 {
                return Value::Null;
            }
            let i = ((n as f64) * p).floor() as usize;
            json!(self.latencies[i.min(n - 1)] as f64 / 1000.0)
        };
        let rate = |x: f64| {
            if secs > 0.0 {
                json!(x / secs)
            } else {
                Value::Null
            }
        };
        json!({
            "samples": n,
            "failed": self.failed,
            "warmup": self.warmup,
            "latency_us": {
                "min": pick(0.0), "p50": pick(0.5), "p90": pick(0.9),
                "p99": pick(0.99), "p99.9": pick(0.999),
                "max": if n == 0 { Value::Null } else { json!(self.latencies[n - 1] as f64 / 1000.0) },
            },
            "kqps": rate(n as f64 / 1000.0),
            "request_mib_per_s": rate(self.request_bytes as f64 / (1u64 << 20) as f64),
            "response_mib_per_s": rate(self.response_bytes as f64 / (1u64 << 20) as f64),
        })
    }
}

/// Metrics of one test result.
pub fn test_metrics(r: &TestResult) -> Map<String, Value> {
    let config = r.traffic_config.clone().unwrap_or_default();
    let rpc_name = |i: i32| {
        usize::try_from(i)
            .ok()
            .and_then(|i| config.rpc_descriptions.get(i))
            .map_or_else(|| format!("#{i}"), |d| d.name().to_string())
    };
    let mut per_rpc: BTreeMap<String, Acc> = BTreeMap::new();
    let mut all = Acc::default();
    let mut longest_span_ns: i64 = 0;
    let mut activities: BTreeMap<String, i64> = BTreeMap::new();
    if let Some(logs) = &r.service_logs {
        for log in logs.instance_logs.values() {
            for (name, a) in &log.activity_logs {
                for metric in &a.activity_metrics {
                    if metric.name() == "iteration_count" {
                        *activities.entry(name.clone()).or_default() += metric.value_int();
                    }
                }
            }
            for peer in log.peer_logs.values() {
                let (mut first, mut last) = (i64::MAX, i64::MIN);
                for (&rpc, l) in &peer.rpc_logs {
                    let acc = per_rpc.entry(rpc_name(rpc)).or_default();
                    for s in &l.successful_rpc_samples {
                        acc.add_ok(s);
                        all.add_ok(s);
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
    let secs = longest_span_ns as f64 / 1e9;
    let mut m = Map::new();
    m.insert("name".into(), json!(config.name()));
    m.insert("total_time_secs".into(), json!(secs));
    m.insert("overall".into(), all.json(secs));
    let mut rpcs = Map::new();
    for (name, mut acc) in per_rpc {
        rpcs.insert(name, acc.json(secs));
    }
    m.insert("rpcs".into(), Value::Object(rpcs));
    if !activities.is_empty() {
        m.insert("activity_iterations".into(), json!(activities));
    }
    if let Some(u) = &r.resource_usage_logs {
        let cpu: f64 = u
            .node_usages
            .values()
            .filter_map(|s| s.rusage_diff.as_ref())
            .map(|d| d.user_cpu_time_seconds() + d.system_cpu_time_seconds())
            .sum();
        m.insert("node_cpu_secs".into(), json!(cpu));
        let rss = u
            .node_usages
            .values()
            .filter_map(|s| s.rusage_diff.as_ref())
            .map(|d| d.max_resident_set_size())
            .max();
        m.insert("node_max_rss_kib".into(), json!(rss));
    }
    m.insert("log_summary".into(), json!(r.log_summary));
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        DistributedSystemDescription, PeerPerformanceLog, RpcPerformanceLog, RpcSpec, ServiceLogs,
        ServicePerformanceLog,
    };

    fn sample(start: i64, lat: i64, warmup: bool) -> RpcSample {
        RpcSample {
            request_size: Some(100),
            response_size: Some(1 << 20),
            start_timestamp_ns: Some(start),
            latency_ns: Some(lat),
            warmup: warmup.then_some(true),
            ..Default::default()
        }
    }

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
        let q = &m["rpcs"]["q"];
        assert_eq!(q["samples"], 100);
        assert_eq!(q["warmup"], 1);
        assert_eq!(q["failed"], 1);
        // sorted[floor(100 * 0.5)] = the 51st latency, 51 us.
        assert_eq!(q["latency_us"]["p50"], 51.0);
        assert_eq!(q["latency_us"]["p99"], 100.0);
        assert_eq!(q["latency_us"]["min"], 1.0);
        // Span: first start 0, last end 990 ms + 100 us.
        let secs = m["total_time_secs"].as_f64().unwrap();
        assert!((secs - 0.9901).abs() < 1e-9, "{secs}");
        let mib = q["response_mib_per_s"].as_f64().unwrap();
        assert!((mib - 100.0 / secs).abs() < 1e-6, "{mib}");
    }
}
