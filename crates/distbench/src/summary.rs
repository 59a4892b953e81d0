//! The human-readable summary Distbench prints after each test, and stores
//! in [`TestResult::log_summary`].
//!
//! [`summarize`] recomputes those lines from a test's logs, in the format
//! of upstream's current code (google/distbench 8a5cfae, whose "report
//! total samples in summaries" added the `Total samples:` line);
//! [`summarize_as`] with [`Layout::Release`] gives the format of the
//! release that produced the conformance results, without that line:
//!
//! ```text
//! RPC latency summary:
//!   client_server_rpc: N: 3631 min: 186971ns median: 202520ns 90%: 245751ns 99%: 308940ns 99.9%: 399060ns max: 517490ns
//! Communication summary:
//!   client/0 -> server/0: RPCs: 4631 (5.96 kQPS) Request: 0.9 MiB/s Response: 1169.2 MiB/s
//! Instance summary:
//!   client/0: Tx: 0.9 MiB/s, Rx:1169.2 MiB/s
//!   server/0: Tx: 1169.2 MiB/s, Rx:0.9 MiB/s
//! Global summary:
//!   Total samples: 4631
//!   Failed samples: 0
//!   Warmup samples: 1000
//!   Total time: 0.776s
//!   Total Tx: 908 MiB (1170.1 MiB/s), Total Nb RPCs: 4631 (5.96 kQPS)
//! ```
//!
//! The rules, as upstream applies them:
//!
//! - Only successful samples count as RPCs. Failed samples are only counted
//!   (`Failed samples`); they add no latency, bytes or time. `Total
//!   samples` counts both, warm-up ones included.
//! - Warm-up samples are counted (`Warmup samples`) and included in the RPC
//!   counts (`RPCs`, `Total Nb RPCs`), but their latencies, bytes and
//!   timestamps are ignored. This is why `N` can be smaller than `RPCs`.
//! - Latencies are grouped by RPC name (an RPC with only warm-up samples
//!   still gets its `N: 0` line). A percentile `p` of `N` sorted latencies
//!   is the element at index `floor(N * p)` (computed in `f64`).
//! - The total time is the longest span over client/server instance pairs,
//!   each span going from the pair's earliest sample start to its latest
//!   sample end (`start + latency`). Rates divide by it.
//! - A MiB is 2^20 bytes; `Total Tx` (request plus response bytes) prints
//!   its MiB count truncated, rates with one decimal, kQPS with two, the
//!   total time with three (rounded half to even on the exact binary value,
//!   like C's `printf`).
//! - Sections list RPC names, instance pairs and instances in byte order.
//!
//! When no sample gives a time span (no samples at all, or only failed or
//! warm-up ones), the summary is empty: the rates would be divisions by
//! zero. Newer upstream releases do the same; the one that produced our
//! results would have printed `inf` and `nan` rates instead.

use crate::proto::{RpcSample, TestResult};
use std::collections::BTreeMap;

/// Bytes in a MiB.
const MIB: i64 = 1 << 20;

/// Traffic from one client instance to one server instance.
#[derive(Debug, Default, Clone, Copy)]
struct PairTraffic {
    /// Successful RPCs, warm-up ones included.
    rpcs: i64,
    /// Request bytes of the successful, non-warm-up RPCs.
    request_bytes: i64,
    /// Response bytes of the successful, non-warm-up RPCs.
    response_bytes: i64,
}

/// Bytes one instance sent and received, over all its pairs.
#[derive(Debug, Default, Clone, Copy)]
struct InstanceTraffic {
    tx_bytes: i64,
    rx_bytes: i64,
}

/// The earliest start and latest end of a set of samples, in ns.
#[derive(Debug, Default, Clone, Copy)]
struct Span {
    bounds: Option<(i64, i64)>,
}

impl Span {
    fn add(&mut self, sample: &RpcSample) {
        let start = sample.start_timestamp_ns();
        let end = start.wrapping_add(sample.latency_ns());
        self.bounds = Some(match self.bounds {
            None => (start, end),
            Some((first, last)) => (first.min(start), last.max(end)),
        });
    }

    fn length_ns(&self) -> i64 {
        self.bounds
            .map_or(0, |(first, last)| last.wrapping_sub(first))
    }
}

/// Everything the summary lines are computed from.
#[derive(Debug, Default)]
struct Tally {
    /// Non-warm-up latencies by RPC name.
    latencies: BTreeMap<String, Vec<i64>>,
    /// Traffic by (client instance, server instance).
    pairs: BTreeMap<(String, String), PairTraffic>,
    /// The longest span of any pair, in ns.
    time_ns: i64,
    failed: i64,
    warmup: i64,
    /// Successful and failed samples, warm-up ones included.
    samples: i64,
}

impl Tally {
    fn of(result: &TestResult) -> Tally {
        let mut tally = Tally::default();
        let rpc_specs = result
            .traffic_config
            .as_ref()
            .map_or(&[][..], |c| &c.rpc_descriptions[..]);
        let Some(logs) = &result.service_logs else {
            return tally;
        };
        for (client, instance_log) in &logs.instance_logs {
            for (server, peer_log) in &instance_log.peer_logs {
                let mut traffic = PairTraffic::default();
                let mut span = Span::default();
                for (&rpc_index, rpc_log) in &peer_log.rpc_logs {
                    let latencies = tally
                        .latencies
                        .entry(rpc_name(rpc_specs, rpc_index))
                        .or_default();
                    tally.failed += len_i64(&rpc_log.failed_rpc_samples);
                    tally.samples += len_i64(&rpc_log.failed_rpc_samples)
                        + len_i64(&rpc_log.successful_rpc_samples);
                    traffic.rpcs += len_i64(&rpc_log.successful_rpc_samples);
                    for sample in &rpc_log.successful_rpc_samples {
                        if sample.warmup() {
                            tally.warmup += 1;
                            continue;
                        }
                        span.add(sample);
                        traffic.request_bytes =
                            traffic.request_bytes.wrapping_add(sample.request_size());
                        traffic.response_bytes =
                            traffic.response_bytes.wrapping_add(sample.response_size());
                        latencies.push(sample.latency_ns());
                    }
                }
                tally.time_ns = tally.time_ns.max(span.length_ns());
                tally
                    .pairs
                    .insert((client.clone(), server.clone()), traffic);
            }
        }
        tally
    }
}

/// The name of the RPC at `index` of the test's `rpc_descriptions`. A log
/// naming no described RPC (which upstream never writes) is shown as
/// `#index`.
fn rpc_name(specs: &[crate::proto::RpcSpec], index: i32) -> String {
    usize::try_from(index)
        .ok()
        .and_then(|i| specs.get(i))
        .map_or_else(|| format!("#{index}"), |spec| spec.name().to_string())
}

fn len_i64<T>(items: &[T]) -> i64 {
    i64::try_from(items.len()).unwrap_or(i64::MAX)
}

/// `N`, then (if any) min, median, 90%, 99%, 99.9% and max of `sorted`.
fn latency_line(name: &str, sorted: &[i64]) -> String {
    let n = sorted.len();
    let mut line = format!("  {name}: N: {n}");
    if let (Some(min), Some(max)) = (sorted.first(), sorted.last()) {
        // floor(N * p) < N for p < 1, so the index is always in range.
        let at = |p: f64| sorted[(n as f64 * p) as usize];
        line += &format!(
            " min: {min}ns median: {}ns 90%: {}ns 99%: {}ns 99.9%: {}ns max: {max}ns",
            at(0.5),
            at(0.9),
            at(0.99),
            at(0.999),
        );
    }
    line
}

/// `bytes` per second over `seconds`, in MiB/s.
fn mib_per_second(bytes: i64, seconds: f64) -> f64 {
    bytes as f64 / MIB as f64 / seconds
}

/// Which upstream's summary format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Upstream's current code: `Total samples:` first in the global
    /// summary.
    Head,
    /// The release that produced the conformance results (the golden
    /// `log_summary` lines): no `Total samples:` line.
    Release,
}

/// The summary lines of `result` in upstream's current format
/// ([`summarize_as`] with [`Layout::Head`]).
pub fn summarize(result: &TestResult) -> Vec<String> {
    summarize_as(result, Layout::Head)
}

/// The summary lines of `result`, computed from its traffic config (for RPC
/// names) and service logs like upstream Distbench does; the
/// `log_summary` already in `result` is ignored. See the module
/// documentation for the format and rules. Empty when no successful,
/// non-warm-up sample gives the test a duration.
pub fn summarize_as(result: &TestResult, layout: Layout) -> Vec<String> {
    let tally = Tally::of(result);
    if tally.time_ns == 0 {
        return Vec::new();
    }
    let seconds = tally.time_ns as f64 / 1e9;
    let mut lines = vec!["RPC latency summary:".to_string()];
    for (name, latencies) in &tally.latencies {
        let mut sorted = latencies.clone();
        sorted.sort_unstable();
        lines.push(latency_line(name, &sorted));
    }

    lines.push("Communication summary:".to_string());
    let mut instances: BTreeMap<&str, InstanceTraffic> = BTreeMap::new();
    let (mut total_rpcs, mut total_bytes) = (0_i64, 0_i64);
    for ((client, server), traffic) in &tally.pairs {
        lines.push(format!(
            "  {client} -> {server}: RPCs: {} ({:3.2} kQPS) Request: {:3.1} MiB/s Response: {:3.1} MiB/s",
            traffic.rpcs,
            traffic.rpcs as f64 / seconds / 1000.0,
            mib_per_second(traffic.request_bytes, seconds),
            mib_per_second(traffic.response_bytes, seconds),
        ));
        total_rpcs += traffic.rpcs;
        total_bytes = total_bytes
            .wrapping_add(traffic.request_bytes)
            .wrapping_add(traffic.response_bytes);
        let sender = instances.entry(client).or_default();
        sender.tx_bytes = sender.tx_bytes.wrapping_add(traffic.request_bytes);
        sender.rx_bytes = sender.rx_bytes.wrapping_add(traffic.response_bytes);
        let receiver = instances.entry(server).or_default();
        receiver.tx_bytes = receiver.tx_bytes.wrapping_add(traffic.response_bytes);
        receiver.rx_bytes = receiver.rx_bytes.wrapping_add(traffic.request_bytes);
    }

    lines.push("Instance summary:".to_string());
    for (name, traffic) in &instances {
        lines.push(format!(
            "  {name}: Tx: {:3.1} MiB/s, Rx:{:3.1} MiB/s",
            mib_per_second(traffic.tx_bytes, seconds),
            mib_per_second(traffic.rx_bytes, seconds),
        ));
    }

    lines.push("Global summary:".to_string());
    if layout == Layout::Head {
        lines.push(format!("  Total samples: {}", tally.samples));
    }
    lines.push(format!("  Failed samples: {}", tally.failed));
    lines.push(format!("  Warmup samples: {}", tally.warmup));
    lines.push(format!("  Total time: {seconds:3.3}s"));
    lines.push(format!(
        "  Total Tx: {} MiB ({:3.1} MiB/s), Total Nb RPCs: {total_rpcs} ({:3.2} kQPS)",
        total_bytes / MIB,
        mib_per_second(total_bytes, seconds),
        total_rpcs as f64 / 1000.0 / seconds,
    ));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        DistributedSystemDescription, PeerPerformanceLog, RpcPerformanceLog, RpcSpec, ServiceLogs,
        ServicePerformanceLog, TestSequenceResults,
    };
    use std::path::{Path, PathBuf};

    fn golden_root() -> PathBuf {
        testenv::conformance_root()
            .unwrap_or_default()
            .join("distbench/analysis_golden_results")
    }

    /// Every result file (`*.pb`, `*.pb.gz`) under `dir`, sorted.
    fn result_files(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                out.extend(result_files(&path));
            } else if name.ends_with(".pb") || name.ends_with(".pb.gz") {
                out.push(path);
            }
        }
        out.sort();
        out
    }

    /// Both line lists side by side, marking the lines that differ.
    fn diff(expected: &[String], actual: &[String]) -> String {
        let mut out = String::new();
        for i in 0..expected.len().max(actual.len()) {
            let (e, a) = (expected.get(i), actual.get(i));
            if e == a {
                out += &format!("  {:?}\n", e.unwrap());
            } else {
                out += &format!("- {e:?}\n+ {a:?}\n");
            }
        }
        out
    }

    #[test]
    fn matches_every_golden_log_summary() {
        testenv::conformance_or_return!("distbench/analysis_golden_results");
        let files = result_files(&golden_root());
        assert!(!files.is_empty(), "no golden result files");
        let mut checked = 0;
        let mut failures = Vec::new();
        for file in &files {
            let results: TestSequenceResults =
                crate::files::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for (i, result) in results.test_results.iter().enumerate() {
                assert!(
                    !result.log_summary.is_empty(),
                    "{} test {i}: no log_summary to compare with",
                    file.display()
                );
                let actual = summarize_as(result, Layout::Release);
                // The current format is the same with the total first in
                // the global summary.
                let mut head = result.log_summary.clone();
                if let Some(at) = head.iter().position(|l| l == "Global summary:") {
                    let total: usize = result
                        .service_logs
                        .iter()
                        .flat_map(|l| l.instance_logs.values())
                        .flat_map(|l| l.peer_logs.values())
                        .flat_map(|p| p.rpc_logs.values())
                        .map(|r| r.successful_rpc_samples.len() + r.failed_rpc_samples.len())
                        .sum();
                    head.insert(at + 1, format!("  Total samples: {total}"));
                }
                assert_eq!(summarize(result), head, "{}", file.display());
                if actual != result.log_summary {
                    failures.push(format!(
                        "{} test {i}:\n{}",
                        file.display(),
                        diff(&result.log_summary, &actual)
                    ));
                }
                checked += 1;
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(checked >= files.len());
    }

    fn sample(start: i64, latency: i64, request: i64, response: i64) -> RpcSample {
        RpcSample {
            start_timestamp_ns: Some(start),
            latency_ns: Some(latency),
            request_size: Some(request),
            response_size: Some(response),
            ..Default::default()
        }
    }

    fn warmup(mut s: RpcSample) -> RpcSample {
        s.warmup = Some(true);
        s
    }

    /// A result whose `rpcs` are `(client, server, rpc index, log)`.
    fn result(rpc_names: &[&str], rpcs: Vec<(&str, &str, i32, RpcPerformanceLog)>) -> TestResult {
        let mut logs = ServiceLogs::default();
        for (client, server, index, log) in rpcs {
            logs.instance_logs
                .entry(client.to_string())
                .or_insert_with(ServicePerformanceLog::default)
                .peer_logs
                .entry(server.to_string())
                .or_insert_with(PeerPerformanceLog::default)
                .rpc_logs
                .insert(index, log);
        }
        TestResult {
            traffic_config: Some(DistributedSystemDescription {
                rpc_descriptions: rpc_names
                    .iter()
                    .map(|n| RpcSpec {
                        name: Some(n.to_string()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            service_logs: Some(logs),
            ..Default::default()
        }
    }

    fn strings(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn warmup_samples_count_as_rpcs_but_add_no_latency_bytes_or_time() {
        let log = RpcPerformanceLog {
            successful_rpc_samples: vec![
                // Warm-up: huge sizes, early start and long latency, all ignored.
                warmup(sample(0, 9_000_000_000, 1 << 40, 1 << 40)),
                sample(1_000_000_000, 300, MIB, 3 * MIB),
                sample(1_000_000_100, 100, MIB, 3 * MIB),
                sample(1_500_000_000, 500_000_000, 2 * MIB, 2 * MIB),
            ],
            failed_rpc_samples: vec![],
        };
        let r = result(&["echo"], vec![("client/0", "server/0", 0, log)]);
        assert_eq!(
            summarize(&r),
            strings(&[
                "RPC latency summary:",
                "  echo: N: 3 min: 100ns median: 300ns 90%: 500000000ns 99%: 500000000ns \
                 99.9%: 500000000ns max: 500000000ns",
                "Communication summary:",
                "  client/0 -> server/0: RPCs: 4 (0.00 kQPS) Request: 4.0 MiB/s Response: 8.0 MiB/s",
                "Instance summary:",
                "  client/0: Tx: 4.0 MiB/s, Rx:8.0 MiB/s",
                "  server/0: Tx: 8.0 MiB/s, Rx:4.0 MiB/s",
                "Global summary:",
                "  Total samples: 4",
                "  Failed samples: 0",
                "  Warmup samples: 1",
                "  Total time: 1.000s",
                "  Total Tx: 12 MiB (12.0 MiB/s), Total Nb RPCs: 4 (0.00 kQPS)",
            ])
        );
    }

    #[test]
    fn failed_samples_are_only_counted() {
        let ok = RpcPerformanceLog {
            successful_rpc_samples: vec![sample(0, 2_000_000, 1000, 2000)],
            // Failed samples add no RPCs, bytes or time, even marked warm-up.
            failed_rpc_samples: vec![
                sample(0, 9_000_000_000, MIB, MIB),
                warmup(sample(0, 1, 1, 1)),
            ],
        };
        let only_failed = RpcPerformanceLog {
            successful_rpc_samples: vec![],
            failed_rpc_samples: vec![sample(5, 5, 5, 5)],
        };
        let r = result(
            &["a", "b"],
            vec![("c/0", "s/0", 0, ok), ("c/0", "s/1", 1, only_failed)],
        );
        assert_eq!(
            summarize(&r),
            strings(&[
                "RPC latency summary:",
                "  a: N: 1 min: 2000000ns median: 2000000ns 90%: 2000000ns 99%: 2000000ns \
                 99.9%: 2000000ns max: 2000000ns",
                "  b: N: 0",
                "Communication summary:",
                "  c/0 -> s/0: RPCs: 1 (0.50 kQPS) Request: 0.5 MiB/s Response: 1.0 MiB/s",
                "  c/0 -> s/1: RPCs: 0 (0.00 kQPS) Request: 0.0 MiB/s Response: 0.0 MiB/s",
                "Instance summary:",
                "  c/0: Tx: 0.5 MiB/s, Rx:1.0 MiB/s",
                "  s/0: Tx: 1.0 MiB/s, Rx:0.5 MiB/s",
                "  s/1: Tx: 0.0 MiB/s, Rx:0.0 MiB/s",
                "Global summary:",
                "  Total samples: 4",
                "  Failed samples: 3",
                "  Warmup samples: 0",
                "  Total time: 0.002s",
                "  Total Tx: 0 MiB (1.4 MiB/s), Total Nb RPCs: 1 (0.50 kQPS)",
            ])
        );
    }

    #[test]
    fn several_clients_and_servers_share_rpc_lines_and_instances() {
        // Two clients of one RPC, one of them also calling a second server;
        // the time is the longest pair span, not the overall one.
        let log = |start: i64, latencies: &[i64]| RpcPerformanceLog {
            successful_rpc_samples: latencies
                .iter()
                .map(|&l| sample(start, l, MIB, 0))
                .collect(),
            failed_rpc_samples: vec![],
        };
        let r = result(
            &["q"],
            vec![
                ("c/1", "s/0", 0, log(0, &[1_000_000_000, 5])),
                ("c/0", "s/0", 0, log(3_000_000_000, &[2, 4])),
                ("c/0", "s/1", 0, log(5_000_000_000, &[500_000_000, 3])),
            ],
        );
        assert_eq!(
            summarize(&r),
            strings(&[
                "RPC latency summary:",
                "  q: N: 6 min: 2ns median: 5ns 90%: 1000000000ns 99%: 1000000000ns \
                 99.9%: 1000000000ns max: 1000000000ns",
                "Communication summary:",
                "  c/0 -> s/0: RPCs: 2 (0.00 kQPS) Request: 2.0 MiB/s Response: 0.0 MiB/s",
                "  c/0 -> s/1: RPCs: 2 (0.00 kQPS) Request: 2.0 MiB/s Response: 0.0 MiB/s",
                "  c/1 -> s/0: RPCs: 2 (0.00 kQPS) Request: 2.0 MiB/s Response: 0.0 MiB/s",
                "Instance summary:",
                "  c/0: Tx: 4.0 MiB/s, Rx:0.0 MiB/s",
                "  c/1: Tx: 2.0 MiB/s, Rx:0.0 MiB/s",
                "  s/0: Tx: 0.0 MiB/s, Rx:4.0 MiB/s",
                "  s/1: Tx: 0.0 MiB/s, Rx:2.0 MiB/s",
                "Global summary:",
                "  Total samples: 6",
                "  Failed samples: 0",
                "  Warmup samples: 0",
                "  Total time: 1.000s",
                "  Total Tx: 6 MiB (6.0 MiB/s), Total Nb RPCs: 6 (0.01 kQPS)",
            ])
        );
    }

    #[test]
    fn percentiles_take_the_floor_of_n_times_p() {
        // 1000 samples: median index 500, 90% 900, 99% 990, 99.9% 999.
        let latencies: Vec<i64> = (1..=1000).rev().collect();
        let line = latency_line("x", &{
            let mut s = latencies.clone();
            s.sort_unstable();
            s
        });
        assert_eq!(
            line,
            "  x: N: 1000 min: 1ns median: 501ns 90%: 901ns 99%: 991ns 99.9%: 1000ns max: 1000ns"
        );
        assert_eq!(
            latency_line("y", &[7]),
            "  y: N: 1 min: 7ns median: 7ns 90%: 7ns 99%: 7ns 99.9%: 7ns max: 7ns"
        );
    }

    #[test]
    fn no_duration_gives_no_summary() {
        assert_eq!(summarize(&TestResult::default()), Vec::<String>::new());
        let nothing_timed = RpcPerformanceLog {
            successful_rpc_samples: vec![warmup(sample(0, 10, 1, 1))],
            failed_rpc_samples: vec![sample(0, 10, 1, 1)],
        };
        let r = result(&["q"], vec![("c/0", "s/0", 0, nothing_timed)]);
        assert_eq!(summarize(&r), Vec::<String>::new());
        let no_samples = result(
            &["q"],
            vec![("c/0", "s/0", 0, RpcPerformanceLog::default())],
        );
        assert_eq!(summarize(&no_samples), Vec::<String>::new());
    }
}
