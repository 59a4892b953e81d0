//! Distbench through the binary: `check_test` on a good and a bad sequence,
//! upstream's flag forms, and traffic run by separate sequencer and node
//! manager processes (`run_tests`, a node manager killed mid-test,
//! `start_localhost`).
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

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
    let out = text(&o.stdout);
    assert!(
        out.contains("OK test 0: clique_sync_burst_10x4000x1024x1024-grpc_polling_inline"),
        "{out}"
    );
    // sweep1 holds several tests; each gets its line.
    assert!(out.contains("OK test 1: "), "{out}");
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
fn check_test_reports_every_error_and_exits_2() {
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
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
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
    assert!(!text(&o.stdout).contains("OK test"), "{}", text(&o.stdout));
}

#[test]
fn check_test_parse_error_names_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("typo.config");
    std::fs::write(&bad, "tests {\n  name: 't'\n  servces { name: 's' }\n}\n").unwrap();
    let o = check_test(d.path(), &format!("--infile={}", bad.display()));
    assert_eq!(o.status.code(), Some(2));
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
    let o = check_test(d.path(), "--infile=/nonexistent/tests.config");
    assert_eq!(o.status.code(), Some(2));
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

fn spawn(dir: &Path, args: &[&str]) -> Proc {
    Proc(
        rackbench(dir)
            .args(["--no-store", "--output-dir"])
            .arg(dir.join("reports"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
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
        &["distbench", "test_sequencer", &format!("--port={port}")],
    );
    let flag = format!("--test_sequencer={seq_addr}");
    let _n0 = spawn(d.path(), &["distbench", "node_manager", &flag]);
    let mut n1 = spawn(d.path(), &["distbench", "node_manager", &flag]);

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

    for bad in [
        &["bogus"][..],
        &["clique:nodes=3"],
        &["-s", "h:1", "clique"],
    ] {
        let out = run(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
    }
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
        ],
    );
    let flag = format!("--test_sequencer=127.0.0.1:{port}");
    let mut device_node = spawn(
        d.path(),
        &[
            "distbench",
            "node_manager",
            &flag,
            "--default_data_plane_device=lo",
        ],
    );
    build_config(
        d.path(),
        "cs.config",
        &["-t", "1", "client_server:parallel_queries=2"],
    );
    let mut config = std::fs::read_to_string(d.path().join("cs.config")).unwrap();
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
