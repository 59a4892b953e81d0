//! Distbench across hosts: a sequencer and three node managers, each in its
//! own network namespace joined by veth pairs to a bridge in a fourth, so
//! every RPC crosses a real (virtual) network between separate network
//! stacks. Runs a client_server and a clique test over them.
//!
//! Needs root and `ip` (iproute2). Without them the test says so on stderr
//! and returns, unless `RACKBENCH_REQUIRE_NETNS=1` (set by `.ci/run` when
//! it runs as root), which turns a missing prerequisite into a failure.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
mod common;

use common::netns::{Proc, build_net, in_ns};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn client_server_and_clique_across_network_namespaces() {
    if !common::netns::available("client_server_and_clique_across_network_namespaces") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Spoke 0: the sequencer; spokes 1..=3: node managers.
    let net = build_net(7, 4).unwrap();
    let seq_ip = "10.213.7.1";
    let _sequencer = Proc(
        in_ns(
            &net.spokes[0],
            d,
            &[
                "distbench",
                "test_sequencer",
                "--bind",
                seq_ip,
                "--port",
                "10000",
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let mut nodes = Vec::new();
    for i in 1..=3 {
        let me = format!("10.213.7.{}", i + 1);
        nodes.push(Proc(
            in_ns(
                &net.spokes[i],
                d,
                &[
                    "distbench",
                    "node_manager",
                    &format!("--test_sequencer={seq_ip}:10000"),
                    "--bind",
                    &me,
                    "--data_plane_address",
                    &me,
                    &format!("spoke={i}"),
                ],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        ));
    }

    // Two tests in one sequence: client_server needs two nodes, the clique
    // all three.
    let mut text = String::new();
    for pattern in [
        "client_server:parallel_queries=4",
        "clique:node_count=3:rpc_interval_us=20000",
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_rackbench"))
            .args(["--no-store", "--output-dir"])
            .arg(d.join("reports"))
            .args(["distbench", "test_builder", "-t", "2", "-o"])
            .arg(d)
            .arg(pattern)
            .env("RACKBENCH_DB", d.join("results.db"))
            .env("RACKBENCH_REPORT", "1")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    for entry in std::fs::read_dir(d).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "config") {
            text.push_str(&std::fs::read_to_string(&p).unwrap());
        }
    }
    std::fs::write(d.join("both.config"), text).unwrap();

    let out = d.join("results.pb");
    let mut result = None;
    for _ in 0..60 {
        let o = in_ns(
            &net.spokes[0],
            d,
            &[
                "distbench",
                "run_tests",
                &format!("--test_sequencer={seq_ip}:10000"),
                "--infile=both.config",
                "--binary_output",
                &format!("--outfile={}", out.display()),
            ],
        )
        .output()
        .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        if o.status.success() || !(err.contains("placement") || err.contains("cannot reach")) {
            result = Some((o.status, err));
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let (status, err) = result.expect("the node managers never registered");
    assert!(status.success(), "{err}");

    let results: distbench::proto::TestSequenceResults = distbench::files::read(&out).unwrap();
    assert_eq!(results.test_results.len(), 2);
    for r in &results.test_results {
        // Every instance listens on its own namespace's address.
        let placement = r.placement.as_ref().unwrap();
        for (name, ep) in &placement.service_endpoints {
            assert!(
                ep.endpoint_address().starts_with("10.213.7."),
                "{name}: {ep:?}"
            );
            assert!(
                !ep.endpoint_address().starts_with(seq_ip),
                "{name} on the sequencer's host"
            );
        }
        let logs = &r.service_logs.as_ref().unwrap().instance_logs;
        let mut pairs = 0;
        let mut measured = 0;
        for log in logs.values() {
            for peer in log.peer_logs.values() {
                for l in peer.rpc_logs.values() {
                    assert!(l.failed_rpc_samples.is_empty());
                    assert!(
                        l.successful_rpc_samples.len() > 50,
                        "{}",
                        l.successful_rpc_samples.len()
                    );
                    measured += l
                        .successful_rpc_samples
                        .iter()
                        .filter(|s| !s.warmup())
                        .count();
                    pairs += 1;
                }
            }
        }
        let want = if r
            .traffic_config
            .as_ref()
            .unwrap()
            .name()
            .starts_with("clique")
        {
            6
        } else {
            1
        };
        assert_eq!(pairs, want, "{}", r.traffic_config.as_ref().unwrap().name());
        // Upstream's summary needs samples past the warm-up (a slow build
        // can spend all 2 s of client_server warming up).
        if measured > 0 {
            assert!(
                r.log_summary.iter().any(|l| l == "Communication summary:"),
                "{:?}",
                r.log_summary
            );
        }
    }
    drop(nodes);
    drop(net);
}
