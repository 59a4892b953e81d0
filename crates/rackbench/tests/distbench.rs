//! Distbench through the binary: `check_test` on a good and a bad sequence,
//! upstream's flag forms, and the subcommands that are not implemented yet.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn rackbench(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rackbench"));
    c.current_dir(dir)
        .env("RACKBENCH_DB", dir.join("results.db"))
        .env_remove("RACKBENCH_JOBS_DIR")
        .stdin(Stdio::null());
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/distbench/test_builder_golden_configs")
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
    // The run is recorded like any other: the report says so.
    assert!(
        out.contains("\"valid\": true") || out.contains("\"valid\":true"),
        "{out}"
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
fn missing_file_and_unimplemented_subcommands_are_bad_input() {
    let d = tempfile::tempdir().unwrap();
    let o = check_test(d.path(), "--infile=/nonexistent/tests.config");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("/nonexistent/tests.config"),
        "{}",
        text(&o.stderr)
    );

    let o = rackbench(d.path())
        .args(["distbench", "run_tests", "--test_sequencer=localhost:10000"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("distbench subcommand 'run_tests' is not implemented yet"),
        "{}",
        text(&o.stderr)
    );
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
    // The same test as upstream's golden, apart from the label recording
    // the command line.
    let golden_text = std::fs::read_to_string(golden(name)).unwrap();
    let mut expected = distbench::textproto::parse_test_sequence(&golden_text, name).unwrap();
    expected.tests[0].attributes.insert(
        "config_label".into(),
        "rectangular:transport=<tcp_file".into(),
    );
    let got = distbench::textproto::parse_test_sequence(&written, "written").unwrap();
    assert_eq!(got, expected);

    let out = run(&["clique"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout)
            .starts_with("# produced by rackbench distbench test_builder clique\ntests {")
    );

    for bad in [
        &["bogus"][..],
        &["clique:nodes=3"],
        &["-s", "h:1", "-o", ".", "clique"],
    ] {
        let out = run(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
    }
}
