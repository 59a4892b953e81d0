//! The Kubernetes manifests of `deploy/k8s/`, exercised: rendered by
//! `deploy/k8s/render.sh` with a real image name and node count, then every
//! pod they describe is run as a container on this host. A pod is a network
//! namespace with its own address on a bridge (the pod network), its own
//! /etc/hosts (the cluster DNS name of the sequencer's Service, through `ip
//! netns exec`'s /etc/netns/NS/ files) and its own UTS namespace (the pod
//! name as hostname). Each runs the image's ENTRYPOINT (read from
//! `deploy/Dockerfile`) with the container's `args`, `$(VAR)` taken from the
//! pod's fieldRef environment, exactly as the kubelet would. A test
//! sequence is then sent the way the docs say, `run_tests` exec'd in the
//! sequencer's pod, and the results must show every node manager pod used,
//! by its pod name and pod IP.
//!
//! Needs root, `ip` and `unshare`; otherwise it says so on stderr and
//! returns, unless `RACKBENCH_REQUIRE_NETNS=1`.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
mod common;

use common::netns::{Proc, build_net};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use yaml_rust2::{Yaml, YamlLoader};

const IMAGE: &str = "registry.example/rackbench:1.2";
const NODES: usize = 3;
/// The third octet of the pod network (10.213.TAG.0/24).
const TAG: u8 = 9;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn render(nodes: &str, kind: &str) -> std::process::Output {
    Command::new("bash")
        .arg(repo().join("deploy/k8s/render.sh"))
        .args([IMAGE, nodes, kind])
        .output()
        .unwrap()
}

/// The rendered manifests, one YAML document each.
fn rendered(kind: &str, nodes: usize) -> Vec<Yaml> {
    let o = render(&nodes.to_string(), kind);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    YamlLoader::load_from_str(&String::from_utf8(o.stdout).unwrap()).unwrap()
}

/// The document of kind `kind`.
fn of_kind<'a>(docs: &'a [Yaml], kind: &str) -> &'a Yaml {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("no {kind} in the manifests"))
}

/// The one container of a workload's pod template.
fn container(workload: &Yaml) -> &Yaml {
    let containers = workload["spec"]["template"]["spec"]["containers"]
        .as_vec()
        .unwrap();
    assert_eq!(containers.len(), 1);
    &containers[0]
}

/// The image's ENTRYPOINT (exec form) from deploy/Dockerfile.
fn entrypoint() -> Vec<String> {
    let dockerfile = std::fs::read_to_string(repo().join("deploy/Dockerfile")).unwrap();
    let line = dockerfile
        .lines()
        .rfind(|l| l.starts_with("ENTRYPOINT "))
        .expect("an ENTRYPOINT");
    serde_json::from_str(line.trim_start_matches("ENTRYPOINT ")).unwrap()
}

/// A container's args with `$(VAR)` replaced from `env`, as the kubelet
/// expands them.
fn expand(container: &Yaml, env: &[(String, String)]) -> Vec<String> {
    container["args"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|a| {
            let mut a = a.as_str().unwrap().to_string();
            for (k, v) in env {
                a = a.replace(&format!("$({k})"), v);
            }
            assert!(!a.contains("$("), "unexpanded variable in {a}");
            a
        })
        .collect()
}

/// The fieldRef environment of a container: variable -> field path.
fn field_refs(container: &Yaml) -> Vec<(String, String)> {
    container["env"]
        .as_vec()
        .map(|env| {
            env.iter()
                .map(|e| {
                    (
                        e["name"].as_str().unwrap().to_string(),
                        e["valueFrom"]["fieldRef"]["fieldPath"]
                            .as_str()
                            .unwrap()
                            .to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A pod: its namespace's /etc files, and the command of its container.
struct Pod {
    ns: String,
    name: String,
}

impl Pod {
    /// Writes the pod's /etc/hosts (loopback, itself, and the sequencer's
    /// Service name) where `ip netns exec` mounts it.
    fn new(ns: &str, name: &str, ip: &str, sequencer_ip: &str) -> Pod {
        let etc = Path::new("/etc/netns").join(ns);
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(
            etc.join("hosts"),
            format!(
                "127.0.0.1 localhost\n::1 localhost\n{ip} {name}\n{sequencer_ip} distbench-sequencer\n"
            ),
        )
        .unwrap();
        Pod {
            ns: ns.to_string(),
            name: name.to_string(),
        }
    }

    /// `argv` (the entrypoint, then the args) in the pod: its network and
    /// mount namespaces, a new UTS namespace named after the pod.
    fn command(&self, dir: &Path, argv: &[String]) -> Command {
        let (program, rest) = argv.split_first().unwrap();
        // The image's `rackbench` is the binary under test.
        assert_eq!(program, "rackbench");
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns, "unshare", "--uts", "--"])
            .args(["sh", "-c", "hostname \"$0\" && exec \"$@\"", &self.name])
            .arg(env!("CARGO_BIN_EXE_rackbench"))
            .args(rest)
            .current_dir(dir)
            .env("RACKBENCH_DB", dir.join("results.db"))
            .env_remove("RACKBENCH_REPORT")
            .stdin(Stdio::null());
        c
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(&self.ns));
    }
}

#[test]
fn render_fills_in_the_image_and_node_count_and_refuses_bad_values() {
    let docs = rendered("statefulset", NODES);
    let sequencer = of_kind(&docs, "Deployment");
    let managers = of_kind(&docs, "StatefulSet");
    assert_eq!(managers["spec"]["replicas"].as_i64(), Some(NODES as i64));
    assert_eq!(sequencer["spec"]["replicas"].as_i64(), Some(1));
    for w in [sequencer, managers] {
        assert_eq!(container(w)["image"].as_str(), Some(IMAGE));
    }
    // The DaemonSet variant runs the same command on every node.
    let daemon = rendered("daemonset", 0);
    let ds = of_kind(&daemon, "DaemonSet");
    assert_eq!(container(ds)["image"].as_str(), Some(IMAGE));
    assert_eq!(container(ds)["args"], container(managers)["args"]);
    for (nodes, kind) in [
        ("0", "statefulset"),
        ("x", "statefulset"),
        ("2", "daemonset"),
    ] {
        let o = render(nodes, kind);
        assert_eq!(o.status.code(), Some(2), "{nodes} {kind}");
        assert!(!o.stderr.is_empty());
    }
}

#[test]
fn manifests_run_as_pods_and_carry_a_test() {
    if !common::netns::available("manifests_run_as_pods_and_carry_a_test") {
        return;
    }
    if Command::new("unshare").arg("--version").output().is_err() {
        testenv::skip(
            "netns",
            "manifests_run_as_pods_and_carry_a_test: no unshare(1)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let docs = rendered("statefulset", NODES);
    let entry = entrypoint();
    let seq_container = container(of_kind(&docs, "Deployment"));
    let mgr_set = of_kind(&docs, "StatefulSet");
    let mgr_container = container(mgr_set);
    let replicas = usize::try_from(mgr_set["spec"]["replicas"].as_i64().unwrap()).unwrap();
    let set_name = mgr_set["metadata"]["name"].as_str().unwrap();

    // Spoke 0: the sequencer's pod; 1..=replicas: the node managers'.
    let net = build_net(TAG, 1 + replicas).unwrap();
    let ip_of = |i: usize| format!("10.213.{TAG}.{}", i + 1);
    let seq_pod = Pod::new(
        &net.spokes[0],
        "distbench-sequencer-0",
        &ip_of(0),
        &ip_of(0),
    );
    let argv: Vec<String> = entry
        .iter()
        .cloned()
        .chain(expand(seq_container, &[]))
        .collect();
    let _sequencer = Proc(
        seq_pod
            .command(d, &argv)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut pods = Vec::new();
    let mut managers = Vec::new();
    for i in 0..replicas {
        let name = format!("{set_name}-{i}");
        let pod = Pod::new(&net.spokes[i + 1], &name, &ip_of(i + 1), &ip_of(0));
        let env: Vec<(String, String)> = field_refs(mgr_container)
            .into_iter()
            .map(|(var, path)| {
                let value = match path.as_str() {
                    "status.podIP" => ip_of(i + 1),
                    "spec.nodeName" => format!("k8s-node-{i}"),
                    other => panic!("a fieldRef this test does not provide: {other}"),
                };
                (var, value)
            })
            .collect();
        let argv: Vec<String> = entry
            .iter()
            .cloned()
            .chain(expand(mgr_container, &env))
            .collect();
        managers.push(Proc(
            pod.command(d, &argv)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        ));
        pods.push(pod);
    }

    // `kubectl exec deploy/distbench-sequencer -- rackbench --no-store
    // distbench run_tests --test_sequencer=localhost:10000 --infile ...`
    // One client and one server per remaining node, spread by k8s_node.
    let config = d.join("spread.config");
    std::fs::write(
        &config,
        format!(
            "tests {{\n  name: 'spread'\n  services {{ name: 'client' count: 1 }}\n  \
             services {{ name: 'server' count: {} }}\n  \
             rpc_descriptions {{ name: 'q' client: 'client' server: 'server' }}\n  \
             action_lists {{ name: 'client' action_names: 'send' }}\n  \
             actions {{ name: 'send' rpc_name: 'q' iterations {{ max_iteration_count: 10 }} }}\n  \
             action_lists {{ name: 'q' }}\n}}\n",
            replicas - 1
        ),
    )
    .unwrap();
    let outfile = d.join("spread.pb");
    let run: Vec<String> = entry
        .iter()
        .cloned()
        .chain(
            [
                "distbench",
                "run_tests",
                "--test_sequencer=localhost:10000",
                "--outfile",
            ]
            .map(String::from),
        )
        .chain([outfile.display().to_string(), "--infile".into()])
        .chain([config.display().to_string()])
        .collect();
    // The node managers register within a few seconds.
    let deadline = Instant::now() + Duration::from_secs(60);
    let results = loop {
        let o = seq_pod.command(d, &run).output().unwrap();
        if o.status.success() {
            break distbench::files::read::<distbench::proto::TestSequenceResults>(&outfile)
                .unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "run_tests never succeeded:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let t = &results.test_results[0];
    let placement = &t.placement.as_ref().unwrap().service_endpoints;
    assert_eq!(placement.len(), replicas);
    // Every instance in its own pod: the pod's hostname and IP, and the
    // node's k8s_node attribute from spec.nodeName.
    let mut hosts: Vec<&str> = placement.values().map(|e| e.hostname()).collect();
    hosts.sort_unstable();
    let want: Vec<String> = (0..replicas).map(|i| format!("{set_name}-{i}")).collect();
    assert_eq!(hosts, want);
    for e in placement.values() {
        let i: usize = e.hostname().rsplit('-').next().unwrap().parse().unwrap();
        assert!(
            e.endpoint_address().contains(&ip_of(i + 1)),
            "{} at {}",
            e.hostname(),
            e.endpoint_address()
        );
        assert!(
            e.attributes
                .iter()
                .any(|a| a.name() == "k8s_node" && a.value() == format!("k8s-node-{i}")),
            "{:?}",
            e.attributes
        );
    }
    let log = &t.service_logs.as_ref().unwrap().instance_logs["client/0"];
    let sent: usize = log
        .peer_logs
        .values()
        .flat_map(|p| p.rpc_logs.values())
        .map(|l| l.successful_rpc_samples.len())
        .sum();
    assert_eq!(sent, 10 * (replicas - 1));
    drop(managers);
    drop(pods);
}
