//! FeedSim end to end through the binary: the mini job, bad flags, a port in
//! use, a leaf that dies mid-run, a dataset too big for memory.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn rackbench(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rackbench"));
    c.current_dir(dir)
        .env("RACKBENCH_DB", dir.join("results.db"))
        .env_remove("RACKBENCH_JOBS_DIR")
        .stdin(Stdio::null());
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Small leaf sizes so the tests run in seconds.
const SMALL: &[&str] = &[
    "--scale",
    "14",
    "--chase-entries",
    "100000",
    "--graph-subset",
    "20000",
    "-i",
    "20000",
    "--num-objects",
    "100",
];

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn mini_job_reports_fixed_rates_and_leaf_costs() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let o = rackbench(d.path())
        .args([
            "run",
            "feedsim_mini",
            "-i",
            &format!("{{\"port\": {port}, \"qps\": \"2,4\", \"duration\": 3}}"),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("Searching for QPS where 95p latency <= 500 msec"),
        "{err}"
    );
    assert!(
        err.contains("requested_qps = 2.00, measured_qps = 2.00, latency = "),
        "{err}"
    );
    assert!(err.contains("final requested_qps = 4.00"), "{err}");
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = &r["metrics"];
    assert_eq!(r["benchmark_name"], "feedsim_mini");
    assert_eq!(m["target_percentile"], "95p");
    assert_eq!(m["target_latency_msec"], 500.0);
    assert_eq!(m["final_requested_qps"], 4.0);
    let lat = m["final_latency_msec"].as_f64().unwrap();
    // At least the 200 ms simulated IO wait, far below the target.
    assert!((200.0..500.0).contains(&lat), "{lat}");
    assert!(
        (m["score"].as_f64().unwrap() - m["final_achieved_qps"].as_f64().unwrap() / 57.0).abs()
            < 1e-3
    );
    assert!(m["leaf_cpu_ms_per_request"].as_f64().unwrap() > 0.0);
    assert!(m["leaf_rss_bytes"].as_u64().unwrap() > 1 << 20);
    // Warm-up + two fixed rates, each a row of the 15-column CSV.
    let csv = std::fs::read_to_string(
        m["csv"]
            .as_str()
            .unwrap()
            .replace("./", &format!("{}/", d.path().display())),
    )
    .unwrap();
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv.lines().all(|l| l.split(',').count() == 15));
}

#[test]
fn bad_flags_are_errors() {
    let d = tempfile::tempdir().unwrap();
    let o = rackbench(d.path())
        .args(["feedsim", "--frobnicate"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--frobnicate"), "{}", stderr(&o));
    let o = rackbench(d.path())
        .args(["feedsim", "-s", "95x:500"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown percentile"), "{}", stderr(&o));
    let o = rackbench(d.path())
        .args(["feedsim", "-q", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("-q values must be positive"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn port_in_use_is_named() {
    let d = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let o = rackbench(d.path())
        .args(["feedsim", "-p", &port, "-q", "1", "-d", "2", "-w", "1"])
        .args(SMALL)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains(&format!("port {port} is already in use")), "{e}");
}

#[test]
fn a_dataset_too_big_for_memory_is_refused_with_its_size() {
    let d = tempfile::tempdir().unwrap();
    let o = rackbench(d.path())
        .args(["feedsim", "-t", "64", "--scale", "28", "-q", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("datasets need") && e.contains("GiB") && e.contains("lower -t or --scale"),
        "{e}"
    );
}

#[test]
fn a_leaf_that_dies_mid_run_ends_it_with_the_rows_so_far() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let child = rackbench(d.path())
        .args(["feedsim", "-p", &port, "-q", "2,2,2", "-d", "3", "-w", "1"])
        .args(SMALL)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the first fixed probe has finished, then kill the leaf
    // (only the leaf: found by its command line and port).
    let t = Instant::now();
    let csv_path = loop {
        let found = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("benchmark_metrics_")
            })
            .map(|e| e.path().join("feedsim_results.txt"))
            .find(|p| {
                std::fs::read_to_string(p)
                    .map(|s| s.lines().count() >= 3)
                    .unwrap_or(false)
            });
        if let Some(p) = found {
            break p;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no probe finished");
        std::thread::sleep(Duration::from_millis(100));
    };
    let pk = Command::new("pkill")
        .args(["-KILL", "-f", &format!("feedsim leaf --port {port}")])
        .status()
        .unwrap();
    assert!(pk.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("the leaf process exited"), "{e}");
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["success"], false);
    assert!(
        r["metrics"]["failure"]
            .as_str()
            .unwrap()
            .contains("the leaf process exited"),
        "{r}"
    );
    let rows = std::fs::read_to_string(csv_path).unwrap().lines().count();
    assert!(rows >= 3, "CSV rows so far kept: {rows}");
}
