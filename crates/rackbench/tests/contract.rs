//! The output contract: a direct benchmark command is the upstream tool.
//! It prints the tool's text, writes only the files it is asked for, and
//! leaves no report JSON on stdout, no `benchmark_metrics_*` folder and no
//! results-store row; `--report` opts in to all three.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A direct command in an empty directory, with a store outside it.
struct Clean {
    cwd: tempfile::TempDir,
    store: tempfile::TempDir,
}

impl Clean {
    fn new() -> Self {
        Clean {
            cwd: tempfile::tempdir().unwrap(),
            store: tempfile::tempdir().unwrap(),
        }
    }

    fn db(&self) -> PathBuf {
        self.store.path().join("results.db")
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_rackbench"));
        c.current_dir(self.cwd.path())
            .env_remove("RACKBENCH_REPORT")
            .env_remove("RACKBENCH_JOBS_DIR")
            .env("RACKBENCH_DB", self.db())
            .arg("--db")
            .arg(self.db())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// The names in the working directory.
    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.cwd.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// Rows in the results store (0 when it was never created).
    fn store_rows(&self) -> i64 {
        if !self.db().exists() {
            return 0;
        }
        let o = self.run(&["results", "list", "--limit", "1000"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        // A header line, then a line per row.
        text(&o.stdout).lines().skip(1).count() as i64
    }

    /// stdout has no report, the directory holds only `expect`, and the
    /// store has no row.
    fn assert_clean(&self, what: &str, o: &Output, expect: &[&str]) {
        let out = text(&o.stdout);
        assert!(
            !out.contains("\"benchmark_name\"") && !out.contains("\"run_id\""),
            "{what}: a report on stdout:\n{out}"
        );
        let files = self.files();
        assert!(
            files.iter().all(|f| !f.starts_with("benchmark_metrics_")),
            "{what}: {files:?}"
        );
        let mut want: Vec<String> = expect.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(files, want, "{what}: files in the working directory");
        assert!(!self.db().exists(), "{what}: the store was created");
    }

    fn write(&self, name: &str, content: &str) -> PathBuf {
        let p = self.cwd.path().join(name);
        std::fs::write(&p, content).unwrap();
        p
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const SMALL_CACHE: &str = r#"{"cache_config": {"cacheSizeMB": 128},
 "test_config": {"numOps": 2000, "numThreads": 1, "numKeys": 100,
   "keySizeRange": [8, 9], "keySizeRangeProbability": [1.0],
   "valSizeRange": [10, 20], "valSizeRangeProbability": [1.0], "getRatio": 1}}"#;

#[test]
fn cachebench_prints_its_results_and_nothing_else() {
    let c = Clean::new();
    c.write("small.json", SMALL_CACHE);
    let o = c.run(&["cachebench", "--json_test_config", "small.json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("== Test Results =="), "{out}");
    c.assert_clean("cachebench", &o, &["small.json"]);
}

#[test]
fn cachebench_under_its_own_name_is_the_same() {
    let c = Clean::new();
    c.write("small.json", SMALL_CACHE);
    let bin = tempfile::tempdir().unwrap();
    let alias = bin.path().join("cachebench");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_rackbench"), &alias).unwrap();
    let o = Command::new(&alias)
        .current_dir(c.cwd.path())
        .env_remove("RACKBENCH_REPORT")
        .env("RACKBENCH_DB", c.db())
        .args(["--json_test_config", "small.json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("== Test Results =="));
    c.assert_clean("cachebench alias", &o, &["small.json"]);
}

#[test]
fn distbench_helpers_write_only_what_they_are_asked_for() {
    let c = Clean::new();
    let o = c.run(&["distbench", "test_builder", "clique"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    c.assert_clean("test_builder", &o, &[]);
    // Its stdout is a config that check_test accepts.
    c.write("x.config", &text(&o.stdout));
    let o = c.run(&["distbench", "check_test", "--infile", "x.config"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    c.assert_clean("check_test", &o, &["x.config"]);
}

#[test]
fn resctl_doc_and_format_print_text_only() {
    let c = Clean::new();
    let o = c.run(&["resctl", "doc", "storage"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("storage:"),
        "{}",
        text(&o.stdout)
    );
    c.assert_clean("resctl doc", &o, &[]);
    c.write(
        "r.json",
        r#"[{"spec": {"kind": "hashd-params", "id": null, "passive": null, "props": [{}]},
            "period": [1, 2], "sysinfo": {}, "result": true,
            "record": {"hash_size": 1258291, "rps_max": 200, "mem_size": 268435456,
                       "mem_frac": 1.0, "chunk_pages": 25, "fake_cpu_load": false}}]"#,
    );
    let o = c.run(&["resctl", "-r", "r.json", "format"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("Result: hash_size=1.2M rps_max=200"),
        "{}",
        text(&o.stdout)
    );
    c.assert_clean("resctl format", &o, &["r.json"]);
}

#[test]
fn adsim_print_config_is_json() {
    let c = Clean::new();
    let o = c.run(&["adsim", "server", "--print-config"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["Kernels"].is_array(), "{v}");
    c.assert_clean("adsim --print-config", &o, &[]);
}

/// A failing direct command exits non-zero with its reason on stderr and
/// still writes nothing of the harness's.
#[test]
fn a_bad_direct_command_fails_cleanly() {
    let c = Clean::new();
    let o = c.run(&["cachebench", "--json_test_config", "missing.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("missing.json"),
        "{}",
        text(&o.stderr)
    );
    c.assert_clean("bad cachebench", &o, &[]);
    // A usage error is clap's text under one "error: " prefix.
    let o = c.run(&["distbench", "check_test", "x.config"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.starts_with("error: unexpected argument 'x.config'"),
        "{err}"
    );
    assert!(!err.contains("error: error:"), "{err}");
}

/// `--report` opts in: the report JSON on stdout, the metrics folder and a
/// store row.
#[test]
fn report_flag_adds_the_harness_report() {
    let c = Clean::new();
    c.write("small.json", SMALL_CACHE);
    let o = c.run(&["--report", "cachebench", "--json_test_config", "small.json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let report: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(report["benchmark_name"], "cachebench");
    assert!(report["metrics"]["ops"].as_u64().unwrap() > 0, "{report}");
    let dirs: Vec<String> = c
        .files()
        .into_iter()
        .filter(|f| f.starts_with("benchmark_metrics_"))
        .collect();
    assert_eq!(dirs.len(), 1, "{:?}", c.files());
    assert!(Path::new(&c.db()).exists());
    assert_eq!(c.store_rows(), 1);
}

/// Helper commands measure nothing: even with `--report` they print only
/// their own output, write no metrics folder and no store row, and say
/// on stderr that the flag had no effect.
#[test]
fn helpers_never_report_even_with_the_flag() {
    let c = Clean::new();
    let o = c.run(&["--report", "distbench", "test_builder", "clique"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("helper command"),
        "{}",
        text(&o.stderr)
    );
    c.assert_clean("--report test_builder", &o, &[]);
    c.write("x.config", &text(&o.stdout));
    let o = c.run(&[
        "--report",
        "distbench",
        "check_test",
        "--infile",
        "x.config",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    c.assert_clean("--report check_test", &o, &["x.config"]);
    let o = c.run(&["--report", "adsim", "server", "--print-config"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap();
    c.assert_clean("--report adsim --print-config", &o, &["x.config"]);
    let o = c.run(&["--report", "resctl", "--test", "doc", "storage"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("storage:"),
        "{}",
        text(&o.stdout)
    );
    c.assert_clean("--report resctl doc", &o, &["x.config"]);
}

/// The report JSON a run printed last on stdout, and the text before it.
fn split_report(out: &str) -> (String, serde_json::Value) {
    let (text, last) = match out.trim_end().rsplit_once('\n') {
        Some((t, l)) => (format!("{t}\n"), l),
        None => (String::new(), out.trim_end()),
    };
    (text, serde_json::from_str(last).unwrap())
}

/// A stored run prints its upstream text again, byte for byte what the run
/// printed from `== Test Results ==` on: for a job (`rackbench run`), and
/// for a direct command with `--report` on a hybrid cache, whose NVM
/// latency histograms go through the record too.
#[test]
fn results_show_text_reprints_a_stored_run() {
    let c = Clean::new();
    for (rows, argv) in [
        (1, vec!["run", "cachebench_mini"]),
        (
            2,
            vec![
                "--report",
                "cachebench",
                "--json_test_config",
                "builtin:hybrid_mini",
            ],
        ),
        // The older layout (thousands separators) is kept with the run.
        (
            3,
            vec![
                "--report",
                "cachebench",
                "--json_test_config",
                "builtin:dram_mini",
                "--output_layout",
                "legacy",
            ],
        ),
    ] {
        let o = c.run(&argv);
        assert!(o.status.success(), "{argv:?}: {}", text(&o.stderr));
        assert_eq!(c.store_rows(), rows, "{argv:?}: one store row per run");
        let (printed, report) = split_report(&text(&o.stdout));
        let run_id = report["run_id"].as_str().unwrap();
        // A job's text is on stderr (its stdout is the report only), up to
        // the harness's closing line; a direct command's is on stdout.
        let printed = if argv[0] == "run" {
            assert_eq!(printed, "", "a job's stdout is its report only");
            let err = text(&o.stderr);
            err[..err.find("reports in ").unwrap()].to_string()
        } else {
            printed
        };
        // The end of the run is printed once, by the harness, from the
        // record (`Workload::format_end`).
        assert_eq!(
            printed.matches("== Test Results ==").count(),
            1,
            "{printed}"
        );
        let from = printed.find("== Test Results ==").unwrap();
        let block = &printed[from..];
        if argv.contains(&"legacy") {
            assert!(block.contains("== Throughput for  =="), "{block}");
        }
        let o = c.run(&["results", "show", run_id, "--text"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(text(&o.stdout), block, "{argv:?}");
        // The JSON view carries the typed record.
        let o = c.run(&["results", "show", run_id]);
        let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(rows[0]["record"]["kind"], "cachebench", "{rows}");
        assert_eq!(rows[0]["record"]["version"], 2);
    }
    assert!(text(&c.run(&["results", "show", "nosuchrun", "--text"]).stderr).contains("no run"));
}

/// Distbench prints each test's summary, as upstream's run_tests does (on
/// stderr in a job, whose stdout is its report); a stored run prints the
/// same block again.
#[test]
fn results_show_text_reprints_distbench_summaries() {
    let c = Clean::new();
    let o = c.run(&["run", "distbench_mini"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (before, report) = split_report(&text(&o.stdout));
    assert_eq!(before, "", "a job's stdout is its report only");
    let printed = text(&o.stderr);
    let from = printed.find("Test summary:\n").unwrap();
    let len = printed[from..].find("\n\n").unwrap() + 2;
    let block = &printed[from..from + len];
    assert!(block.lines().count() > 2, "{block}");
    let o = c.run(&[
        "results",
        "show",
        report["run_id"].as_str().unwrap(),
        "--text",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), block);
}

/// A port free on both loopbacks; None on a host without ::1.
fn free_dual_port() -> Option<u16> {
    loop {
        let v6 = std::net::TcpListener::bind("[::1]:0").ok()?;
        let port = v6.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Some(port);
        }
    }
}

/// Every server rackbench starts on its default (loopback) address answers
/// at 127.0.0.1 and at ::1: Distbench's test sequencer and rpc_server, and
/// calibrate's server (AdSim's and FeedSim's have their own tests).
#[test]
fn loopback_servers_answer_on_both_addresses() {
    let c = Clean::new();
    let servers: Vec<(&str, Vec<String>)> = vec![
        (
            "distbench test_sequencer",
            vec!["distbench".into(), "test_sequencer".into()],
        ),
        (
            "distbench rpc_server",
            vec!["distbench".into(), "rpc_server".into()],
        ),
        ("calibrate serve", vec!["calibrate".into(), "serve".into()]),
    ];
    for (what, argv) in servers {
        let Some(port) = free_dual_port() else {
            testenv::skip("ipv6", "this host has no IPv6 loopback (::1) to listen on");
            return;
        };
        let mut args = argv.clone();
        if what.starts_with("calibrate") {
            args.extend(["--listen".into(), format!("127.0.0.1:{port}")]);
        } else {
            args.push(format!("--port={port}"));
        }
        let mut child = c.cmd().args(&args).stderr(Stdio::null()).spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none(),
                "{what} did not start on 127.0.0.1:{port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let v6 = std::net::TcpStream::connect(format!("[::1]:{port}"));
        let _ = child.kill();
        let _ = child.wait();
        if let Err(e) = v6 {
            panic!("{what} answers at 127.0.0.1:{port} but not at [::1]:{port}: {e}");
        }
    }
}
