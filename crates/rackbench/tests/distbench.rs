//! Distbench through the binary: `check_test` on a good and a bad sequence,
//! upstream's flag forms, and traffic run by separate sequencer and node
//! manager processes (`run_tests`, a node manager killed mid-test,
//! `start_localhost`), and `analyze`'s stdout.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn rackbench(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rackbench"));
    c.current_dir(dir)
        .env("RACKBENCH_DB", dir.join("results.db"))
        .env("RACKBENCH_REPORT", "1")
        .env_remove("RACKBENCH_JOBS_DIR")
        .stdin(Stdio::null());
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn golden(name: &str) -> PathBuf {
    testenv::conformance_root()
        .unwrap_or_default()
        .join("distbench/test_builder_golden_configs")
        .join(name)
}

fn check_test(dir: &Path, infile: &str) -> Output {
    rackbench(dir)
        .args(["distbench", "check_test", infile])
        .output()
        .unwrap()
}

#[test]
fn check_test_accepts_a_golden_config() {
    testenv::conformance_or_return!("distbench/test_builder_golden_configs");
    let d = tempfile::tempdir().unwrap();
    let cfg = golden("sweep1.config");
    let o = check_test(d.path(), &format!("--infile={}", cfg.display()));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    // Upstream's stdout: its Result line alone.
    assert_eq!(
        out,
        format!("\nResult: {} parsed successfully.\n\n", cfg.display())
    );
    assert!(
        err.contains("OK test 0: clique_sync_burst_10x4000x1024x1024-grpc_polling_inline"),
        "{err}"
    );
    // sweep1 holds several tests; each gets its line.
    assert!(err.contains("OK test 1: "), "{err}");
    // check_test is a helper: its lines and nothing else, even though the
    // tests' helper asks for reports (RACKBENCH_REPORT=1).
    assert!(!out.contains("\"run_id\""), "{out}");
    assert!(
        text(&o.stderr).contains("helper command"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn check_test_reports_every_error_and_exits_1() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.config");
    std::fs::write(
        &bad,
        "tests {\n  name: 'broken'\n  services { name: 'client' count: 1 }\n  \
         rpc_descriptions { name: 'q' client: 'client' server: 'srv' fanout_filter: 'ring_w' }\n  \
         action_lists { name: 'client' action_names: 'go' }\n  \
         actions { name: 'go' rpc_name: 'q' iterations { open_loop_interval_distribution: 'poisson' } }\n}\n",
    )
    .unwrap();
    // The space-separated flag form.
    let o = rackbench(d.path())
        .args(["distbench", "check_test", "--infile"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    for want in [
        "check_test found 4 problems",
        "test 0 'broken': rpc_descriptions 'q': server: unknown service 'srv'",
        "fanout_filter: unknown fanout_filter 'ring_w'",
        "no action list is named 'q'",
        "test 0 'broken': actions 'go': iterations.open_loop_interval_distribution: unknown distribution 'poisson'",
    ] {
        assert!(err.contains(want), "missing '{want}' in:\n{err}");
    }
    assert!(!text(&o.stdout).contains("Result:"), "{}", text(&o.stdout));
}

#[test]
fn check_test_parse_error_names_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("typo.config");
    std::fs::write(&bad, "tests {\n  name: 't'\n  servces { name: 's' }\n}\n").unwrap();
    let o = check_test(d.path(), &format!("--infile={}", bad.display()));
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "{}:3:3: unknown field 'servces' in distbench.DistributedSystemDescription (did you mean 'services'?)",
            bad.display()
        )),
        "{err}"
    );
}

#[test]
fn missing_file_and_bad_flags_are_bad_input() {
    let d = tempfile::tempdir().unwrap();
    // check_test's result is the check: a file it cannot read exits 1, as
    // upstream's ("Error reading test sequence").
    let o = check_test(d.path(), "--infile=/nonexistent/tests.config");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("/nonexistent/tests.config"),
        "{}",
        text(&o.stderr)
    );

    // A missing sequence file, node attributes that are not NAME=VALUE, an
    // unknown network device, a bad duration.
    for args in [
        &[
            "distbench",
            "run_tests",
            "--test_sequencer=localhost:10000",
            "--infile=/nonexistent.config",
        ][..],
        &[
            "distbench",
            "node_manager",
            "--test_sequencer=localhost:1",
            "rack",
        ],
        &[
            "distbench",
            "node_manager",
            "--test_sequencer=localhost:1",
            "--default_data_plane_device=nosuch0",
        ],
        &[
            "distbench",
            "run_tests",
            "--test_sequencer=localhost:1",
            "--max_test_duration=soon",
        ],
    ] {
        let o = rackbench(d.path()).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
    }
    let o = rackbench(d.path())
        .args([
            "distbench",
            "node_manager",
            "--test_sequencer=localhost:1",
            "--default_data_plane_device=nosuch0",
        ])
        .output()
        .unwrap();
    assert!(
        text(&o.stderr).contains("network interface 'nosuch0' not found"),
        "{}",
        text(&o.stderr)
    );
    // No sequencer there: run_tests fails (1) and says where it looked.
    let o = rackbench(d.path())
        .args([
            "--no-store",
            "distbench",
            "run_tests",
            &format!("--test_sequencer=127.0.0.1:{}", free_port()),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("cannot reach the test sequencer at 127.0.0.1:"),
        "{}",
        text(&o.stderr)
    );
}

/// A free loopback port (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills the child when dropped, so no process outlives a failed test.
struct Proc(std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a sequencer or node manager and returns once it says it is ready
/// on stderr: the sequencer's "listening" line (or, with local nodes, their
/// registration line), a node manager's "registered" line. Waiting on the
/// process's own words rather than a retry budget keeps the tests right on a
/// loaded machine, where starting the binary alone can take seconds.
fn spawn(dir: &Path, args: &[&str]) -> Proc {
    use std::io::BufRead;
    let marker = if args.contains(&"test_sequencer") {
        if args
            .iter()
            .any(|a| a.strip_prefix("--local_nodes=").is_some_and(|n| n != "0"))
        {
            "local node managers registered"
        } else {
            "test_sequencer listening on"
        }
    } else {
        "registered with"
    };
    let mut child = rackbench(dir)
        .args(["--no-store", "--output-dir"])
        .arg(dir.join("reports"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let proc = Proc(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Every line is read to the end, so the child never blocks on a
        // full pipe; the lines go to the test until it stops listening.
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let ready = line.contains(marker);
                seen.push(line);
                if ready {
                    return proc;
                }
            }
            Err(e) => panic!(
                "{args:?} never said {marker:?} ({e}); its stderr:\n{}",
                seen.join("\n")
            ),
        }
    }
}

/// Writes the one config test_builder makes from `args` to `dir/name`.
fn build_config(dir: &Path, name: &str, args: &[&str]) {
    let out = dir.join(format!("{name}.d"));
    std::fs::create_dir_all(&out).unwrap();
    let o = rackbench(dir)
        .args(["--no-store", "--output-dir"])
        .arg(dir.join("reports"))
        .args(["distbench", "test_builder", "-o"])
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let file = std::fs::read_dir(&out)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::rename(file, dir.join(name)).unwrap();
}

/// A sequencer and two node managers as separate processes; run_tests
/// sends a test built by test_builder and saves the result proto.
#[test]
fn run_tests_over_separate_processes_and_a_node_that_dies() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let seq_addr = format!("127.0.0.1:{port}");
    let _sequencer = spawn(
        d.path(),
        &[
            "distbench",
            "test_sequencer",
            &format!("--port={port}"),
            "--bind=127.0.0.1",
        ],
    );
    let flag = format!("--test_sequencer={seq_addr}");
    // --port=0: upstream's default port, 10000, is shared by every mode;
    // --bind keeps the traffic on loopback.
    let node = [
        "distbench",
        "node_manager",
        &flag,
        "--port=0",
        "--bind=127.0.0.1",
    ];
    let _n0 = spawn(d.path(), &node);
    let mut n1 = spawn(d.path(), &node);

    build_config(
        d.path(),
        "cs.config",
        &["-t", "2", "client_server:parallel_queries=8"],
    );

    // The node managers register within a second or two; run_tests is
    // retried until both are there (a placement error names the shortfall).
    let out = d.path().join("results.pb");
    let mut o = None;
    for _ in 0..40 {
        let r = rackbench(d.path())
            .args(["--no-store", "--output-dir"])
            .arg(d.path().join("reports"))
            .args([
                "distbench",
                "run_tests",
                &flag,
                "--infile=cs.config",
                "--binary_output",
            ])
            .arg(format!("--outfile={}", out.display()))
            .output()
            .unwrap();
        if r.status.success() || !text(&r.stderr).contains("placement") {
            o = Some(r);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let o = o.expect("the node managers never registered");
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The summary on stdout, as upstream's run_tests prints it.
    let stdout = text(&o.stdout);
    assert!(stdout.starts_with("Test summary:\n"), "{stdout}");
    assert!(stdout.contains("RPC latency summary:"), "{stdout}");
    assert!(stdout.contains("client/0 -> server/0: RPCs:"), "{stdout}");
    let results: distbench::proto::TestSequenceResults = distbench::files::read(&out).unwrap();
    let log = &results.test_results[0]
        .service_logs
        .as_ref()
        .unwrap()
        .instance_logs["client/0"];
    let n = log.peer_logs["server/0"].rpc_logs[&0]
        .successful_rpc_samples
        .len();
    assert!(n > 50, "{n} RPCs");

    // Kill a node manager in the middle of the second test of a sequence
    // (1 s, then 30 s): the run fails within seconds, naming the node,
    // run_tests exits non-zero, and the outfile written after the first
    // test is intact and holds it.
    build_config(d.path(), "short.config", &["-t", "1", "client_server"]);
    build_config(
        d.path(),
        "long.config",
        &["-t", "30", "client_server:parallel_queries=2"],
    );
    let two = [
        std::fs::read_to_string(d.path().join("short.config")).unwrap(),
        std::fs::read_to_string(d.path().join("long.config")).unwrap(),
    ]
    .concat();
    std::fs::write(d.path().join("two.config"), two).unwrap();
    let partial = d.path().join("partial.pb");
    let run = rackbench(d.path())
        .args(["distbench", "run_tests", &flag, "--infile=two.config"])
        .arg("--binary_output")
        .arg(format!("--outfile={}", partial.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !partial.exists() && t0.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(partial.exists(), "the first test never finished");
    std::thread::sleep(std::time::Duration::from_secs(1));
    n1.0.kill().unwrap();
    let t0 = std::time::Instant::now();
    let o = run.wait_with_output().unwrap();
    assert!(
        t0.elapsed().as_secs() < 20,
        "run_tests took {:?} after the kill: {}",
        t0.elapsed(),
        text(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("node manager node") && err.contains("died"),
        "{err}"
    );
    let saved: distbench::proto::TestSequenceResults = distbench::files::read(&partial).unwrap();
    assert_eq!(saved.test_results.len(), 1, "only the first test completed");
    assert!(saved.test_results[0].service_logs.is_some());
}

/// `start_localhost` with a generated test: the report's metrics.
/// client_server counts its first 1000 RPCs as warm-up (upstream
/// test_builder's value), so a 1 s test on a slow or busy machine may
/// measure none; the test then runs again for as long as the rate it just
/// saw needs for 2000 more RPCs.
#[test]
fn start_localhost_runs_a_pattern() {
    let d = tempfile::tempdir().unwrap();
    let run = |secs: u64| {
        let o = rackbench(d.path())
            .args(["--no-store", "--output-dir"])
            .arg(d.path().join("reports"))
            .args([
                "distbench",
                "start_localhost",
                "-n",
                "2",
                "--port=0",
                "-t",
                &secs.to_string(),
                "--pattern",
                "client_server:parallel_queries=4",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        // The Test summary blocks, then the report on the last line.
        let out = text(&o.stdout);
        assert!(out.starts_with("Test summary:\n"), "{out}");
        let last = out.trim_end().lines().last().unwrap_or_default();
        let report: serde_json::Value = serde_json::from_str(last).unwrap();
        report["metrics"].clone()
    };
    let mut m = run(1);
    let overall = &m["tests"][0]["overall"];
    let (samples, warmup) = (
        overall["samples"].as_u64().unwrap(),
        overall["warmup"].as_u64().unwrap(),
    );
    assert!(samples + warmup > 0, "no RPC at all: {m}");
    if samples < 100 {
        let per_sec = (samples + warmup) as f64;
        let secs = (3000.0 / per_sec).ceil().clamp(2.0, 60.0) as u64;
        eprintln!("{per_sec:.0} RPCs/s, {warmup} of them warm-up: running {secs} s");
        m = run(secs);
    }
    assert_eq!(m["tests_completed"], 1);
    assert!(m["rpcs"].as_u64().unwrap() > 100, "{m}");
    assert!(m["p99_latency_us"].as_f64().unwrap() > 0.0, "{m}");
    assert!(
        m["tests"][0]["rpcs"]["client_server_rpc"]["response_mib_per_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let outfile = m["outfile"].as_str().unwrap();
    let r: distbench::proto::TestSequenceResults =
        distbench::files::read(Path::new(outfile)).unwrap();
    assert_eq!(r.test_results.len(), 1);
}

/// `test_builder` through the binary: files with `-o`, the config on stdout
/// without it, and exit status 2 for bad input.
#[test]
fn test_builder_writes_configs_and_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let run = |a: &[&str]| {
        rackbench(dir.path())
            .args(["--no-store", "--output-dir"])
            .arg(dir.path().join("reports"))
            .args(["distbench", "test_builder"])
            .args(a)
            .output()
            .unwrap()
    };
    std::fs::write(dir.path().join("tcp_file"), "tcp\n").unwrap();
    let out = run(&["-o", ".", "rectangular:transport=<tcp_file"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let name = "rectangular_ring_x_sync_burst_5x3x100000x1024x1024-grpc_polling_inline_tcp.config";
    let written = std::fs::read_to_string(dir.path().join(name)).unwrap();
    assert!(written.starts_with("# produced by rackbench distbench test_builder -o . "));
    let got = distbench::textproto::parse_test_sequence(&written, "written").unwrap();
    assert_eq!(
        got.tests[0].attributes["config_label"],
        "rectangular:transport=<tcp_file"
    );
    // The same test as upstream's golden, apart from the label recording
    // the command line (where the conformance data is here).
    if let Some(golden) =
        testenv::conformance(&format!("distbench/test_builder_golden_configs/{name}"))
    {
        let golden_text = std::fs::read_to_string(golden).unwrap();
        let mut expected = distbench::textproto::parse_test_sequence(&golden_text, name).unwrap();
        expected.tests[0].attributes.insert(
            "config_label".into(),
            "rectangular:transport=<tcp_file".into(),
        );
        assert_eq!(got, expected);
    }

    let out = run(&["clique"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout)
            .starts_with("# produced by rackbench distbench test_builder clique\ntests {")
    );
    // All of stdout is the config (no report after it, although the tests'
    // helper asks for reports): it parses whole.
    let all = distbench::textproto::parse_test_sequence(&text(&out.stdout), "stdout").unwrap();
    assert_eq!(all.tests.len(), 1);

    for bad in [&["bogus"][..], &["-s", "h:1", "clique"]] {
        let out = run(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
    }
    // A parameter the pattern does not use is kept, as upstream keeps it,
    // and named on stderr.
    let out = run(&["clique:nodes=3"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("key: \"nodes\""),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("unknown parameter 'nodes'"),
        "{}",
        text(&out.stderr)
    );
}

/// `analyze` through the binary: upstream's stdout (its empty summaries
/// under the output folder as given, then its sample counts, a sample
/// counted once per summary including it), then rackbench's own line.
#[test]
fn analyze_prints_upstreams_lines_then_ours() {
    use distbench::proto::{
        DistributedSystemDescription, PeerPerformanceLog, RpcPerformanceLog, RpcSample, RpcSpec,
        ServiceLogs, ServicePerformanceLog, ServiceSpec, TestResult, TestSequenceResults,
    };
    let dir = tempfile::tempdir().unwrap();
    // client/0 sent two RPCs to server/0 (one of a warm-up) and none to
    // server/1.
    let service = |name: &str, count| ServiceSpec {
        name: Some(name.into()),
        count: Some(count),
        ..Default::default()
    };
    let sample = |warmup| RpcSample {
        request_size: Some(16),
        latency_ns: Some(2000),
        warmup: Some(warmup),
        ..Default::default()
    };
    let peer = PeerPerformanceLog {
        rpc_logs: [(
            0,
            RpcPerformanceLog {
                successful_rpc_samples: vec![sample(true), sample(false)],
                failed_rpc_samples: vec![],
            },
        )]
        .into(),
    };
    let results = TestSequenceResults {
        test_results: vec![TestResult {
            traffic_config: Some(DistributedSystemDescription {
                services: vec![service("client", 1), service("server", 2)],
                rpc_descriptions: vec![RpcSpec {
                    name: Some("q".into()),
                    client: vec!["client".into()],
                    server: Some("server".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            service_logs: Some(ServiceLogs {
                instance_logs: [(
                    "client/0".to_string(),
                    ServicePerformanceLog {
                        peer_logs: [("server/0".to_string(), peer)].into(),
                        ..Default::default()
                    },
                )]
                .into(),
            }),
            ..Default::default()
        }],
    };
    let input = dir.path().join("r.pb");
    distbench::files::write(&input, &results, distbench::files::Encoding::Binary).unwrap();

    let o = rackbench(dir.path())
        .args(["--no-store", "--output-dir"])
        .arg(dir.path().join("reports"))
        .args(["distbench", "analyze", "--input_file"])
        .arg(&input)
        .args(["--output_directory", "tree"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    // 2 samples in 7 summaries (test, client, client instance, service,
    // RPC, pair, overall); the warm-up one likewise.
    assert_eq!(
        lines[..4],
        [
            "Empty output tree/test_0/client/0/server/1/pairwise_summary.txt skipped...",
            "Total samples:  14",
            "Warmup samples:  7",
            "Skipped samples:  7",
        ],
        "{stdout}"
    );
    assert_eq!(lines.len(), 5, "{stdout}");
    let ours = lines[4];
    assert!(
        ours.starts_with("rackbench: wrote 7 files for 1 test into "),
        "{ours}"
    );
    assert!(
        ours.ends_with(
            " (default format); 1 of 2 RPC samples summarized, each counted once (1 warm-up, left out)"
        ),
        "{ours}"
    );
    // The tree is where our line says (relative to the working folder).
    let written = ours
        .trim_start_matches("rackbench: wrote 7 files for 1 test into ")
        .split(" (default format)")
        .next()
        .unwrap();
    let written = dir.path().join(written);
    let summary = std::fs::read_to_string(written.join("overall_summary.txt"))
        .unwrap_or_else(|e| panic!("{}: {e}", written.display()));
    assert_eq!(
        summary,
        "Request_size    Latency_ns\n16              2000\n"
    );
    assert!(written.join("test_0/client/0/server").is_dir());
    assert!(!written.join("test_0/client/0/server/1").exists());
    // Upstream's lines are on stdout only.
    assert!(
        !text(&o.stderr).contains("Total samples"),
        "{}",
        text(&o.stderr)
    );
}

/// Upstream's scripts: `test_sequencer --local_nodes`, a node manager named
/// by its network device, run_tests reading the sequence from standard
/// input with `--max_test_duration`, and `shutdown_after_tests` stopping
/// the node managers and the sequencer.
#[test]
fn upstream_style_local_nodes_stdin_and_shutdown_after_tests() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut sequencer = spawn(
        d.path(),
        &[
            "distbench",
            "test_sequencer",
            &format!("--port={port}"),
            "--local_nodes=2",
            "--bind=127.0.0.1",
        ],
    );
    let flag = format!("--test_sequencer=127.0.0.1:{port}");
    let mut device_node = spawn(
        d.path(),
        &[
            "distbench",
            "node_manager",
            &flag,
            "--port=0",
            "--control_plane_device=lo",
            "--default_data_plane_device=lo",
        ],
    );
    build_config(
        d.path(),
        "cs.config",
        &["-t", "1", "client_server:parallel_queries=2"],
    );
    // test_builder's 1000 warm-up RPCs can fill the whole second on a loaded
    // machine, and warm-up RPCs are left out of the summary checked below.
    let config = std::fs::read_to_string(d.path().join("cs.config")).unwrap();
    assert!(config.contains("warmup_iterations: 1000"), "{config}");
    let mut config = config.replace("warmup_iterations: 1000", "warmup_iterations: 10");
    config.push_str("tests_setting { shutdown_after_tests: true }\n");
    let mut o = None;
    for _ in 0..40 {
        let mut child = rackbench(d.path())
            .args(["--no-store", "--output-dir"])
            .arg(d.path().join("reports"))
            .args(["distbench", "run_tests", &flag, "--max_test_duration=60s"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(config.as_bytes())
            .unwrap();
        let r = child.wait_with_output().unwrap();
        if r.status.success() || !text(&r.stderr).contains("cannot reach") {
            o = Some(r);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let o = o.expect("the sequencer never came up");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("client/0 -> server/0: RPCs:"),
        "{}",
        text(&o.stdout)
    );
    // Everything stops by itself.
    for (what, p) in [
        ("sequencer", &mut sequencer),
        ("node manager", &mut device_node),
    ] {
        let t0 = std::time::Instant::now();
        loop {
            if let Some(status) = p.0.try_wait().unwrap() {
                assert!(status.success(), "{what} exited with {status}");
                break;
            }
            assert!(t0.elapsed().as_secs() < 15, "the {what} is still running");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// `test_builder -s`: the configs are written, each test runs on the
/// sequencer and its results land in DIR/<test_name>.pb.gz; a second run
/// skips the tests whose results exist.
#[test]
fn test_builder_runs_tests_on_a_sequencer() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let _sequencer = spawn(
        d.path(),
        &[
            "distbench",
            "test_sequencer",
            &format!("--port={port}"),
            "--local_nodes=3",
            "--bind=127.0.0.1",
        ],
    );
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let run = || {
        rackbench(d.path())
            .args(["--no-store", "--output-dir"])
            .arg(d.path().join("reports"))
            .args([
                "distbench",
                "test_builder",
                "-s",
                &format!("127.0.0.1:{port}"),
                "-t",
                "1",
                "-o",
            ])
            .arg(&out)
            .args(["client_server:parallel_queries=2", "clique:node_count=3"])
            .output()
            .unwrap()
    };
    let mut o = run();
    for _ in 0..40 {
        if o.status.success() || !text(&o.stderr).contains("cannot reach") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
        o = run();
    }
    assert!(o.status.success(), "{}", text(&o.stderr));
    for name in [
        "client_server_1x1x2-grpc_polling_inline",
        "clique_sync_burst_3x16000x1024x1024-grpc_polling_inline",
    ] {
        assert!(
            out.join(format!("{name}.config")).is_file(),
            "{name}.config"
        );
        let r: distbench::proto::TestSequenceResults =
            distbench::files::read(&out.join(format!("{name}.pb.gz"))).unwrap();
        assert_eq!(r.test_results.len(), 1);
        assert_eq!(
            r.test_results[0].traffic_config.as_ref().unwrap().name(),
            name
        );
    }
    let again = run();
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(
        text(&again.stderr).matches("exists, skipping").count(),
        2,
        "{}",
        text(&again.stderr)
    );
}

/// Ctrl-C during a start_localhost test: the traffic is cancelled, the test
/// ends with what it measured, the results file is written and the report
/// says interrupted (exit 130).
#[test]
fn ctrl_c_keeps_the_partial_test() {
    let d = tempfile::tempdir().unwrap();
    let child = rackbench(d.path())
        .args(["--output-dir"])
        .arg(d.path().join("reports"))
        .args([
            "--no-store",
            "distbench",
            "start_localhost",
            "-n",
            "2",
            "--port=0",
            "-t",
            "30",
            "--pattern",
            "client_server:parallel_queries=2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let t0 = std::time::Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(t0.elapsed().as_secs() < 15, "took {:?}", t0.elapsed());
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let report: serde_json::Value =
        serde_json::from_str(out.trim().lines().last().unwrap()).unwrap();
    let m = &report["metrics"];
    assert_eq!(report["success"], false);
    assert_eq!(m["interrupted"], true, "{m}");
    assert_eq!(m["tests_completed"], 1, "{m}");
    let r: distbench::proto::TestSequenceResults =
        distbench::files::read(Path::new(m["outfile"].as_str().unwrap())).unwrap();
    assert_eq!(r.test_results.len(), 1);
}

/// An overloaded test (more RPCs pending than `overload_limits` allows)
/// ends early but completes, as upstream's: the results file and the Test
/// summary are written, the client's log carries the engine's error, the
/// RPCs it had sent are waited for (successful samples, none failed), the
/// run exits 0, and the report flags the overload.
#[test]
fn overloaded_test_completes_with_its_results() {
    let d = tempfile::tempdir().unwrap();
    let config = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../distbench/tests/fixtures/overload_pending.config");
    let outfile = d.path().join("overload.pb");
    let o = rackbench(d.path())
        .args(["--no-store", "--output-dir"])
        .arg(d.path().join("reports"))
        .args([
            "distbench",
            "start_localhost",
            "-n",
            "2",
            "--port=0",
            "--infile",
        ])
        .arg(&config)
        .arg("--outfile")
        .arg(&outfile)
        .output()
        .unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(out.starts_with("Test summary:\n"), "{out}");
    assert!(
        err.contains("c/0 stopped its traffic early: RESOURCE_EXHAUSTED: Too many RPCs pending"),
        "{err}"
    );
    let report: serde_json::Value =
        serde_json::from_str(out.trim_end().lines().last().unwrap()).unwrap();
    let t = &report["metrics"]["tests"][0];
    assert_eq!(report["success"], true, "{report}");
    assert_eq!(t["overloaded"], true, "{t}");
    assert_eq!(
        t["engine_errors"]["c/0"],
        "RESOURCE_EXHAUSTED: Too many RPCs pending"
    );
    assert_eq!(t["overall"]["failed"], 0, "{t}");
    assert!(t["overall"]["samples"].as_u64().unwrap() >= 150, "{t}");
    let r: distbench::proto::TestSequenceResults = distbench::files::read(&outfile).unwrap();
    let log = &r.test_results[0]
        .service_logs
        .as_ref()
        .unwrap()
        .instance_logs["c/0"];
    assert_eq!(
        log.engine_error_message(),
        "RESOURCE_EXHAUSTED: Too many RPCs pending"
    );
}

/// Two services, client and server: what the node-placement tests run.
const CLIENT_SERVER: &str = r#"tests {
  name: 'cs'
  services { name: 'client' count: 1 }
  services { name: 'server' count: 2 }
  rpc_descriptions { name: 'q' client: 'client' server: 'server' }
  action_lists { name: 'client' action_names: 'send' }
  actions { name: 'send' rpc_name: 'q' iterations { max_iteration_count: 20 } }
  action_lists { name: 'q' }
}
"#;

/// The text results before upstream's closing `Result:` line (or the whole
/// text), parsed.
fn results_of(text_results: &str) -> distbench::proto::TestSequenceResults {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("r.txt");
    std::fs::write(&f, text_results).unwrap();
    distbench::files::read(&f).unwrap()
}

/// `test_preview` runs the sequence on one in-process node manager with
/// every instance bundled on node0, prints the results as text on stdout
/// and then upstream's "Result: Preview for F was successful." line.
#[test]
fn test_preview_runs_every_instance_on_one_node() {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("cs.config");
    std::fs::write(&config, CLIENT_SERVER).unwrap();
    let o = rackbench(d.path())
        .args(["distbench", "test_preview", "--infile"])
        .arg(&config)
        .env_remove("RACKBENCH_REPORT")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let tail = format!(
        "\nResult: Preview for {} was successful.\n\n",
        config.display()
    );
    assert!(out.ends_with(&tail), "{out}");
    let r = results_of(&out[..out.len() - tail.len()]);
    let t = &r.test_results[0];
    // The three instances on node0, the only node.
    let bundles = &t.traffic_config.as_ref().unwrap().node_service_bundles;
    assert_eq!(
        bundles["node0"].services,
        ["client/0", "server/0", "server/1"]
    );
    let usage = &t.resource_usage_logs.as_ref().unwrap().node_usages;
    assert_eq!(usage.keys().collect::<Vec<_>>(), ["node0"]);
    let log = &t.service_logs.as_ref().unwrap().instance_logs["client/0"];
    let sent: usize = log
        .peer_logs
        .values()
        .map(|p| p.rpc_logs[&0].successful_rpc_samples.len())
        .sum();
    assert_eq!(sent, 40, "20 iterations fanned out to 2 servers");
}

/// upstream's absl command lines through the binary: `help` and
/// `--helpfull`; flags before the mode; an upstream flag the mode does not
/// read, accepted and named; `--noflag`; `test_preview --outfile=""`
/// printing, with `keep_instance_log: false` clearing the logs; a compound
/// duration; a failed run_tests leaving no results file.
#[test]
fn absl_command_lines_as_upstream() {
    let d = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        rackbench(d.path())
            .arg("distbench")
            .args(args)
            .env_remove("RACKBENCH_REPORT")
            .output()
            .unwrap()
    };
    let o = run(&["help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(text(&o.stdout).starts_with("Usage: rackbench distbench MODE"));
    let o = run(&["--helpfull"]);
    assert_eq!(o.status.code(), Some(1), "absl's help flags exit 1");
    assert!(text(&o.stdout).contains("--max_test_duration"));

    let config = d.path().join("cs.config");
    std::fs::write(
        &config,
        format!("{CLIENT_SERVER}tests_setting {{ keep_instance_log: false }}\n"),
    )
    .unwrap();
    let infile = format!("--infile={}", config.display());
    let o = run(&[&infile, "check_test", "--port=7"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("parsed successfully"));
    assert!(
        text(&o.stderr).contains("--port=7 has no effect in this mode"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&["test_preview", &infile, "--outfile=", "--nobinary_output"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let results = results_of(out.split("\nResult: Preview").next().unwrap());
    let t = &results.test_results[0];
    assert!(
        t.service_logs
            .as_ref()
            .is_none_or(|l| l.instance_logs.is_empty())
    );
    assert!(
        t.log_summary
            .iter()
            .any(|l| l.starts_with("  Total samples: "))
    );

    let outfile = d.path().join("never.pb");
    let o = run(&[
        "run_tests",
        &infile,
        "--test_sequencer=127.0.0.1:1",
        "--max_test_duration=1h30m",
        &format!("--outfile={}", outfile.display()),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        !outfile.exists(),
        "a failed run_tests wrote {}",
        outfile.display()
    );
}

/// Upstream's node manager arguments: `nodeN` asks for node id N, and
/// `--service_address` is where the sequencer dials it. A test bundled on
/// node1 runs only if the one node manager got that id. run_tests writes the
/// results in text on stdout by default, after the Test summary.
#[test]
fn node_manager_preassigned_id_and_service_address() {
    let d = tempfile::tempdir().unwrap();
    let (seq_port, node_port) = (free_port(), free_port());
    let _seq = spawn(
        d.path(),
        &[
            "distbench",
            "test_sequencer",
            &format!("--port={seq_port}"),
            "--bind=127.0.0.1",
        ],
    );
    let flag = format!("--test_sequencer=127.0.0.1:{seq_port}");
    let _node = spawn(
        d.path(),
        &[
            "distbench",
            "node_manager",
            &flag,
            &format!("--port={node_port}"),
            &format!("--service_address=ipv4:///127.0.0.1:{node_port}"),
            "--bind=127.0.0.1",
            "node1",
            "rack=a",
        ],
    );
    let config = d.path().join("bundled.config");
    std::fs::write(
        &config,
        CLIENT_SERVER.replace(
            "  action_lists { name: 'q' }\n",
            "  action_lists { name: 'q' }\n  node_service_bundles { key: 'node1' value { services: 'client/0' services: 'server/0' services: 'server/1' } }\n",
        ),
    )
    .unwrap();
    // The node manager registers within a second or two.
    let mut last = String::new();
    for _ in 0..40 {
        let o = rackbench(d.path())
            .args(["distbench", "run_tests", &flag, "--infile"])
            .arg(&config)
            .env_remove("RACKBENCH_REPORT")
            .output()
            .unwrap();
        if o.status.success() {
            let out = text(&o.stdout);
            let results = out
                .strip_prefix("Test summary:\n")
                .and_then(|rest| rest.split_once("\n\n"))
                .map(|(_, results)| results)
                .unwrap_or_else(|| panic!("no Test summary first: {out}"));
            let r = results_of(results);
            let t = &r.test_results[0];
            let usage = &t.resource_usage_logs.as_ref().unwrap().node_usages;
            assert_eq!(usage.keys().collect::<Vec<_>>(), ["node1"]);
            let placed = &t.placement.as_ref().unwrap().service_endpoints;
            assert_eq!(placed.len(), 3);
            return;
        }
        last = text(&o.stderr);
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    panic!("run_tests never succeeded: {last}");
}

/// `rackbench run distbench_mini` into a store, then the report page: the
/// stored metrics have the client -> server traffic and the page draws it
/// (`distbench_pairs`).
#[test]
fn distbench_mini_report_page_lists_per_pair_traffic() {
    let d = tempfile::tempdir().unwrap();
    let o = rackbench(d.path())
        .arg("--output-dir")
        .arg(d.path().join("reports"))
        .args(["run", "distbench_mini"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let last = out.trim_end().lines().last().unwrap_or_default();
    let report: serde_json::Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("no report on the last line ({e}):\n{out}"));
    let m = &report["metrics"];
    let pairs = m["tests"][0]["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1, "{m}");
    let p = &pairs[0];
    assert_eq!(
        (p["from"].as_str(), p["to"].as_str()),
        (Some("client"), Some("server")),
        "{p}"
    );
    // Every counted RPC of this one-pair test is the pair's.
    assert_eq!(p["rpcs"], m["tests"][0]["overall"]["samples"], "{m}");
    assert_eq!(p["failed"], m["tests"][0]["overall"]["failed"], "{m}");

    // One pair is one point: the page lists its figures and draws no
    // chart of it (the charts of several pairs: distbench's charts.rs).
    let html = common::report_page(rackbench(d.path()), d.path());
    assert!(
        !html.contains(r#"data-kind="distbench_pairs""#),
        "a chart of one point"
    );
    assert!(
        html.contains("<th>tests[0].pairs[0].rpcs</th>"),
        "no pair figures"
    );
}
