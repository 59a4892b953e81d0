//! Distbench across hosts, started with upstream's multi-host command
//! lines unchanged: a sequencer (`test_sequencer --port=10000`) in one
//! network namespace and two node managers (`node_manager
//! --test_sequencer=HOST:10000 --port=9999`) in two others, each namespace
//! its own host: its own address on a bridge (veth pairs to a hub
//! namespace), its own host name (a UTS namespace) that the others resolve
//! through their hosts files, as hosts on a network do. No flag names an
//! address or device: the node managers listen on every interface and
//! register as upstream's do (`dns:///HOSTNAME:9999`), and their instances
//! advertise their host's primary address. A client/server test and a
//! fan-out test (one client, two servers on the other host) cross the
//! namespaces; every endpoint is its node's own address.
//!
//! Needs root and `ip` (iproute2) and `unshare` (util-linux). Without them
//! the test says so on stderr and returns, unless
//! `RACKBENCH_REQUIRE_NETNS=1` (set by `.ci/run` when it runs as root),
//! which turns a missing prerequisite into a failure.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
mod common;

use common::netns::{Proc, build_net};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `rackbench ARGS` in namespace `ns`, as host `host`.
fn on_host(ns: &str, host: &str, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, "unshare", "--uts", "sh", "-c"])
        .arg("hostname \"$0\" && exec \"$@\"")
        .arg(host)
        .arg(env!("CARGO_BIN_EXE_rackbench"))
        .args(["--no-store", "--output-dir"])
        .arg(dir.join("reports"))
        .args(args)
        .current_dir(dir)
        .env("RACKBENCH_DB", dir.join("results.db"))
        .env("RACKBENCH_REPORT", "1")
        .stdin(Stdio::null());
    c
}

/// The hosts files of the namespaces (`ip netns exec` mounts
/// `/etc/netns/NS/hosts` over `/etc/hosts`); removed on drop.
struct Hosts(Vec<std::path::PathBuf>);

impl Drop for Hosts {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

const TAG: u8 = 7;
const HOSTS: [&str; 3] = ["rb-seq", "rb-node-a", "rb-node-b"];

fn ip_of(i: usize) -> String {
    format!("10.213.{TAG}.{}", i + 1)
}

#[test]
fn upstream_command_lines_across_network_namespaces() {
    if !common::netns::available("upstream_command_lines_across_network_namespaces") {
        return;
    }
    if Command::new("unshare").arg("--help").output().is_err() {
        testenv::skip(
            "netns",
            "upstream_command_lines_across_network_namespaces: unshare (util-linux) is missing",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let net = build_net(TAG, 3).unwrap();
    let mut table = String::from("127.0.0.1 localhost\n::1 localhost\n");
    for (i, h) in HOSTS.iter().enumerate() {
        table.push_str(&format!("{} {h}\n", ip_of(i)));
    }
    let mut hosts = Hosts(Vec::new());
    for ns in &net.spokes {
        let etc = Path::new("/etc/netns").join(ns);
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(etc.join("hosts"), &table).unwrap();
        hosts.0.push(etc);
    }

    let log = |name: &str| std::fs::File::create(d.join(name)).unwrap();
    let _sequencer = Proc(
        on_host(
            &net.spokes[0],
            HOSTS[0],
            d,
            &["distbench", "test_sequencer", "--port=10000"],
        )
        .stdout(Stdio::null())
        .stderr(log("sequencer.log"))
        .spawn()
        .unwrap(),
    );
    let seq = format!("--test_sequencer={}:10000", HOSTS[0]);
    let mut nodes = Vec::new();
    for (i, (ns, host)) in net.spokes.iter().zip(HOSTS).enumerate().skip(1) {
        nodes.push(Proc(
            on_host(
                ns,
                host,
                d,
                &["distbench", "node_manager", &seq, "--port=9999"],
            )
            .stdout(Stdio::null())
            .stderr(log(&format!("node{i}.log")))
            .spawn()
            .unwrap(),
        ));
    }

    // Client/server (one instance per node) and a fan-out: the client on
    // one node, both servers on the other.
    let config = "
tests {
  name: 'client_server'
  services { name: 'client' count: 1 }
  services { name: 'server' count: 1 }
  rpc_descriptions { name: 'q' client: 'client' server: 'server' }
  action_lists { name: 'client' action_names: 'send' }
  actions { name: 'send' rpc_name: 'q'
    iterations { max_duration_us: 1000000 open_loop_interval_ns: 10000000 } }
  action_lists { name: 'q' }
}
tests {
  name: 'fan_out'
  services { name: 'client' count: 1 }
  services { name: 'server' count: 2 }
  rpc_descriptions { name: 'q' client: 'client' server: 'server' fanout_filter: 'all' }
  action_lists { name: 'client' action_names: 'send' }
  actions { name: 'send' rpc_name: 'q'
    iterations { max_duration_us: 1000000 open_loop_interval_ns: 10000000 } }
  action_lists { name: 'q' }
  node_service_bundles { key: 'node0' value { services: 'client/0' } }
  node_service_bundles { key: 'node1' value { services: 'server/0' services: 'server/1' } }
}
";
    std::fs::write(d.join("tests.config"), config).unwrap();

    let out = d.join("results.pb");
    let mut result = None;
    for _ in 0..60 {
        let o = on_host(
            &net.spokes[0],
            HOSTS[0],
            d,
            &[
                "distbench",
                "run_tests",
                "--test_sequencer=localhost:10000",
                "--infile=tests.config",
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
    let logs = || {
        ["sequencer.log", "node1.log", "node2.log"]
            .iter()
            .map(|f| {
                format!(
                    "{f}:\n{}",
                    std::fs::read_to_string(d.join(f)).unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (status, err) =
        result.unwrap_or_else(|| panic!("the node managers never registered\n{}", logs()));
    assert!(status.success(), "{err}\n{}", logs());

    let results: distbench::proto::TestSequenceResults = distbench::files::read(&out).unwrap();
    assert_eq!(results.test_results.len(), 2);
    let node_ips = [ip_of(1), ip_of(2)];
    for r in &results.test_results {
        let name = r.traffic_config.as_ref().unwrap().name().to_string();
        // Every instance's endpoint is its node's own address: no
        // loopback, not the sequencer's host.
        let placement = r.placement.as_ref().unwrap();
        let host_of = |instance: &str| {
            let ep = placement.service_endpoints[instance].endpoint_address();
            let ip = ep.rsplit_once(':').unwrap().0.to_string();
            assert!(node_ips.contains(&ip), "{name}: {instance} at {ep}");
            ip
        };
        let client = host_of("client/0");
        let servers: Vec<String> = placement
            .service_endpoints
            .keys()
            .filter(|k| k.starts_with("server/"))
            .map(|k| host_of(k))
            .collect();
        assert!(
            servers.iter().all(|s| *s != client),
            "{name}: a server on the client's host"
        );
        let logs = &r.service_logs.as_ref().unwrap().instance_logs;
        let client_log = &logs["client/0"];
        assert_eq!(client_log.peer_logs.len(), servers.len(), "{name}");
        for (peer, p) in &client_log.peer_logs {
            for l in p.rpc_logs.values() {
                assert!(l.failed_rpc_samples.is_empty(), "{name} -> {peer}");
                assert!(
                    l.successful_rpc_samples.len() > 50,
                    "{name} -> {peer}: {}",
                    l.successful_rpc_samples.len()
                );
            }
        }
        assert!(
            r.log_summary.iter().any(|l| l == "Communication summary:"),
            "{name}: {:?}",
            r.log_summary
        );
    }
    drop(nodes);
    drop(net);
    drop(hosts);
}
