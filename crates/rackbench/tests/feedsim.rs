//! FeedSim end to end through the binary: the mini job, bad flags, a port in
//! use, a leaf that dies mid-run, Ctrl-C, a dataset too big for memory.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn rackbench(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rackbench"));
    c.current_dir(dir)
        .env("RACKBENCH_DB", dir.join("results.db"))
        .env("RACKBENCH_REPORT", "1")
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

/// A run's stdout: upstream's lines, then the report JSON on the last line.
fn report(o: &std::process::Output) -> (String, Value) {
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let (text, last) = match out.trim_end().rsplit_once('\n') {
        Some((t, l)) => (format!("{t}\n"), l.to_string()),
        None => (String::new(), out.trim_end().to_string()),
    };
    let v = serde_json::from_str(&last)
        .unwrap_or_else(|e| panic!("the last line of stdout is not the report ({e}): {out}"));
    (text, v)
}

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
    // A job's stdout is its report only; upstream's lines, as run.sh
    // prints them, are on stderr (after the harness's "running job" line).
    let (before, r) = report(&o);
    assert_eq!(before, "", "stdout carries the report only");
    let out = stderr(&o);
    assert!(
        out.contains("\nSearching for QPS where 95p latency <= 500 msec\n"),
        "{out}"
    );
    assert!(
        out.contains("requested_qps = 2.00, measured_qps = 2.00, latency = "),
        "{out}"
    );
    assert_eq!(
        out.matches("final requested_qps = 4.00").count(),
        1,
        "{out}"
    );
    // The stored run prints the search's lines again.
    let text = testenv::results_text(
        Path::new(env!("CARGO_BIN_EXE_rackbench")),
        &d.path().join("results.db"),
        r["run_id"].as_str().unwrap(),
    );
    testenv::assert_lines_in_order(&text, &out);
    assert!(text.contains("final requested_qps = 4.00"), "{text}");
    let m = &r["metrics"];
    assert_eq!(r["benchmark_name"], "feedsim_mini");
    assert_eq!(m["target_percentile"], "95p");
    assert_eq!(m["target_latency_msec"], 500.0);
    assert_eq!(m["final_requested_qps"], 4.0);
    assert_eq!(m["target_met"], true);
    let lat = m["final_latency_msec"].as_f64().unwrap();
    // At least the 200 ms simulated IO wait, far below the target.
    assert!((200.0..500.0).contains(&lat), "{lat}");
    assert!(
        (m["score"].as_f64().unwrap() - m["final_achieved_qps"].as_f64().unwrap() / 57.0).abs()
            < 1e-3
    );
    assert!(m["leaf_cpu_ms_per_request"].as_f64().unwrap() > 0.0);
    assert!(m["leaf_rss_bytes"].as_u64().unwrap() > 1 << 20);
    // The datasets were advised onto huge pages; how much the kernel gave
    // depends on the host's THP mode, which the report names.
    assert_eq!(m["leaf_huge_pages_advised"], true);
    assert!(m["leaf_anon_huge_bytes"].as_u64().is_some());
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .ok()
        .and_then(|s| Some(s[s.find('[')? + 1..s.find(']')?].to_string()))
        .unwrap_or_default();
    assert_eq!(m["thp_mode"], thp.as_str());
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

/// A rate that misses the target is still measured and reported, as
/// upstream's fixed-QPS runs are: `final_*` of the last rate, exit 0, the
/// verdict apart (`passed` per rate, `target_met`).
#[test]
fn fixed_rates_that_miss_the_target_are_reported_and_succeed() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    // Every request waits at least the simulated 200 ms IO: a 50 ms p95
    // target cannot be met.
    let o = rackbench(d.path())
        .args(["feedsim", "-p", &port, "-q", "2,3", "-d", "2", "-w", "1"])
        .args(["--target", "95p:50"])
        .args(SMALL)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (out, r) = report(&o);
    assert!(out.contains("final requested_qps = 3.00"), "{out}");
    assert!(!out.contains("search ended without a result"), "{out}");
    let m = &r["metrics"];
    assert_eq!(r["success"], true);
    assert_eq!(m["success"], true);
    assert_eq!(m["target_met"], false);
    assert_eq!(m["final_requested_qps"], 3.0);
    assert!(m["final_latency_msec"].as_f64().unwrap() > 50.0, "{m}");
    assert!(m["score"].as_f64().unwrap() > 0.0, "{m}");
    let fixed: Vec<_> = m["probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["phase"] == "fixed")
        .map(|p| {
            (
                p["requested_qps"].as_f64().unwrap(),
                p["passed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(fixed, [(2.0, false), (3.0, false)]);
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
        stderr(&o).contains("invalid value '0' for '--qps <QPS>': must be a positive number"),
        "{}",
        stderr(&o)
    );
    let o = rackbench(d.path())
        .args(["feedsim", "--steady-tail", "1.5"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains("invalid value '1.5' for '--steady-tail <STEADY_TAIL>': must be in [0, 1)"),
        "{}",
        stderr(&o)
    );
    // run.sh's -l (and its newer spelling) takes at least one thread.
    for flag in ["-l", "--driver-threads", "--num-driver-threads"] {
        let o = rackbench(d.path())
            .args(["feedsim", flag, "0", "-q", "1"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("must be at least 1"), "{}", stderr(&o));
    }
    let o = rackbench(d.path())
        .args(["feedsim", "--driver", "closed", "-q", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("closed-compat"), "{}", stderr(&o));
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
    let child = spawn_fixed_rates(d.path(), &port, "2,2,2", "3");
    // Wait until the first fixed probe has finished, then kill the leaf
    // (only the leaf: found by its command line and port).
    let csv_path = wait_for_csv_rows(d.path(), 3);
    let pk = Command::new("pkill")
        .args(["-KILL", "-f", &format!("feedsim leaf --port {port}")])
        .status()
        .unwrap();
    assert!(pk.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("the leaf process exited"), "{e}");
    let r: Value = report(&o).1;
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

/// `rackbench feedsim` on the small dataset at fixed rates `qps`, `secs`
/// each after a 1 s warm-up, its output piped.
fn spawn_fixed_rates(dir: &Path, port: &str, qps: &str, secs: &str) -> std::process::Child {
    rackbench(dir)
        .args(["feedsim", "-p", port, "-q", qps, "-d", secs, "-w", "1"])
        .args(SMALL)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The CSV of the run in `dir`, once it has at least `rows` lines.
fn wait_for_csv_rows(dir: &Path, rows: usize) -> std::path::PathBuf {
    let t = Instant::now();
    loop {
        let found = std::fs::read_dir(dir)
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
                    .map(|s| s.lines().count() >= rows)
                    .unwrap_or(false)
            });
        if let Some(p) = found {
            return p;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no CSV with {rows} rows"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Ctrl-C during a fixed-rate run: the run stops within seconds, exits 130,
/// reports the interrupted probe as partial and unsuccessful, keeps the
/// CSV rows so far, and leaves no leaf process behind.
#[test]
fn ctrl_c_stops_the_run_with_partial_results_and_no_leaf_left() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let child = spawn_fixed_rates(d.path(), &port, "3,3", "60");
    // Header and the warm-up's row: the first 60 s fixed run has begun;
    // past its 3 s unmeasured lead-in, its window is a few seconds old.
    let csv = wait_for_csv_rows(d.path(), 2);
    std::thread::sleep(Duration::from_secs(8));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let t = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let r: Value = report(&o).1;
    assert_eq!(r["success"], false);
    assert_eq!(r["metrics"]["interrupted"], true, "{r}");
    assert_eq!(r["metrics"]["partial"], true, "{r}");
    let probes = r["metrics"]["probes"].as_array().unwrap();
    let last = probes.last().unwrap();
    assert_eq!(last["phase"], "fixed", "{last}");
    assert_eq!(last["passed"], false, "{last}");
    assert!(last["total_queries"].as_u64().unwrap() >= 6, "{last}");
    assert!(last["duration_secs"].as_f64().unwrap() >= 2.0, "{last}");
    assert!(std::fs::read_to_string(csv).unwrap().lines().count() >= 2);
    // The leaf went with the driver.
    let t = Instant::now();
    while Command::new("pgrep")
        .args(["-f", &format!("feedsim leaf --port {port}")])
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success()
    {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the leaf outlived the driver"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Two autoscale instances on this host's two cores: each pinned to its own
/// core, searched in parallel, lined up before their final runs, reported
/// per instance and summed.
#[test]
fn autoscale_runs_pinned_instances_and_sums_them() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        testenv::skip(
            "cores",
            &format!("autoscale with 2 instances needs 2 CPUs, this host has {cores}"),
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = format!(
        "--quick --probe-secs 2 --final-secs 3 --tolerance 0.25 -w 1 {}",
        SMALL.join(" ")
    );
    let o = rackbench(d.path())
        .env("RACKBENCH_PLAIN_PROGRESS", "1")
        .args([
            "run",
            "feedsim_autoscale",
            "-i",
            &format!("{{\"num_instances\": 2, \"port\": {port}, \"extra_args\": \"{extra}\"}}"),
        ])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("autoscale: 2 instance(s)"), "{err}");
    // The job's text is on stderr; stdout is the report only.
    let (before, r) = report(&o);
    assert_eq!(before, "", "stdout carries the report only");
    let out = err.clone();
    let text = testenv::results_text(
        Path::new(env!("CARGO_BIN_EXE_rackbench")),
        &d.path().join("results.db"),
        r["run_id"].as_str().unwrap(),
    );
    testenv::assert_lines_in_order(&text, &out);
    assert!(
        text.contains("overall: 2 of 2 instance(s) succeeded"),
        "{text}"
    );
    let m = &r["metrics"];
    assert_eq!(m["spawned_instances"], "2");
    assert_eq!(m["successful_instances"], 2);
    let (a, b) = (&m["1"], &m["2"]);
    assert_eq!(a["port"], port);
    assert_eq!(b["port"], port + 1);
    assert_ne!(a["cpus"], b["cpus"]);
    let sum = a["final_achieved_qps"].as_f64().unwrap() + b["final_achieved_qps"].as_f64().unwrap();
    let overall = m["overall"]["final_achieved_qps"].as_f64().unwrap();
    assert!((overall - sum).abs() < 0.01, "{overall} vs {sum}");
    assert!(overall > 0.0);
    let avg = (a["final_latency_msec"].as_f64().unwrap()
        + b["final_latency_msec"].as_f64().unwrap())
        / 2.0;
    assert!((m["overall"]["average_latency_msec"].as_f64().unwrap() - avg).abs() < 0.01);
    assert!((m["score"].as_f64().unwrap() - overall / 57.0).abs() < 0.01);
    // The instances lined up before their final runs: every final run
    // started after every other probe of both instances ended.
    let probes = |inst: &Value, fin: bool| -> Vec<(u64, u64)> {
        inst["probes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| (p["phase"] == "final") == fin)
            .map(|p| {
                (
                    p["start_unix_ms"].as_u64().unwrap(),
                    p["end_unix_ms"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let last_search_end = [a, b]
        .iter()
        .flat_map(|i| probes(i, false))
        .map(|p| p.1)
        .max()
        .unwrap();
    let first_final_start = [a, b]
        .iter()
        .flat_map(|i| probes(i, true))
        .map(|p| p.0)
        .min()
        .unwrap();
    assert!(
        first_final_start >= last_search_end,
        "{first_final_start} < {last_search_end}"
    );
    let dir = d.path().join(format!(
        "benchmark_metrics_{}",
        r["run_id"].as_str().unwrap()
    ));
    for i in 1..=2 {
        assert!(dir.join(format!("feedsim_results_{i}.txt")).exists());
        // run-feedsim-multi.sh's per-instance log, with its final line.
        let log = std::fs::read_to_string(dir.join(format!("feedsim-multi-inst-{i}.log"))).unwrap();
        assert!(
            log.starts_with("Searching for QPS where 95p latency <= 500 msec\n"),
            "{log}"
        );
        assert!(log.contains("final requested_qps = "), "{log}");
    }
    // Upstream's feedsim_autoscale parser reads the last `{` .. `}` block
    // of the benchmark's output (the lines before the report): it must be
    // upstream's object with the report's sums.
    let lines: Vec<&str> = out.lines().collect();
    let close = lines.iter().rposition(|l| l.starts_with('}')).unwrap();
    let open = lines[..close]
        .iter()
        .rposition(|l| l.starts_with('{'))
        .unwrap();
    let obj: Value = serde_json::from_str(&lines[open..=close].join("\n")).unwrap();
    // Upstream sums the printed (two-decimal) figures.
    assert!(
        (obj["overall"]["final_achieved_qps"].as_f64().unwrap() - overall).abs() <= 0.02,
        "{obj} vs {overall}"
    );
    assert_eq!(obj["spawned_instances"], "2");
    assert_eq!(obj["successful_instances"], 2);
    // run-feedsim-multi.sh reruns at a fixed rate when the instances'
    // searches ended far apart (a busy 2-core host can do that): then the
    // last object is the rerun's, marked fixed, after the rerun line.
    let rerun = out.contains("Detected unstable run - rerunning with fixed QPS at ");
    assert_eq!(obj["is_fixed_qps"], u8::from(rerun), "{out}");
    if rerun {
        let line = lines
            .iter()
            .position(|l| l.starts_with("Detected unstable run"))
            .unwrap();
        assert!(line < open, "{out}");
    }
    assert_eq!(obj["target_percentile"], "95p");
    assert_eq!(obj["target_latency_msec"], "500");
    assert!(
        obj["1"]["final_latency_msec"].as_f64().unwrap() > 0.0,
        "{obj}"
    );
}

/// One instance that cannot start (its port is taken) does not stop the other.
#[test]
fn autoscale_instance_failure_leaves_the_others_running() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        testenv::skip(
            "cores",
            &format!("autoscale with 2 instances needs 2 CPUs, this host has {cores}"),
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // Two adjacent ports with the second one taken.
    let (port, _busy) = loop {
        let p = free_port();
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", p + 1)) {
            break (p, l);
        }
    };
    let o = rackbench(d.path())
        .env("RACKBENCH_PLAIN_PROGRESS", "1")
        .args(["feedsim", "--num-instances", "2", "-p", &port.to_string()])
        .args(["-q", "2", "-d", "2", "-w", "1"])
        .args(SMALL)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let r: Value = report(&o).1;
    let m = &r["metrics"];
    assert_eq!(r["success"], false);
    assert_eq!(m["spawned_instances"], "2");
    assert_eq!(m["successful_instances"], 1);
    assert_eq!(m["1"]["final_achieved_qps"], 2.0);
    let why = m["2"]["failure"].as_str().unwrap();
    assert!(
        why.contains(&format!("port {} is already in use", port + 1)),
        "{why}"
    );
    assert_eq!(m["overall"]["final_achieved_qps"], 2.0);
}

/// `DCPERF_PERF_RECORD=1`, as DCPerf's search_qps.sh: a single `-q` rate
/// is profiled system-wide (`perf record -a -g -- sleep 5`) into
/// `perf.data` in the run's metrics folder; without perf the run goes on
/// and says why there is no profile.
#[test]
fn dcperf_perf_record_profiles_the_final_rate() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let o = rackbench(d.path())
        .args(["feedsim", "-p", &port, "-q", "2", "-d", "4", "-w", "1"])
        .args(SMALL)
        .env("DCPERF_PERF_RECORD", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("DCPERF_PERF_RECORD: perf record -a -g for 5 s into "),
        "{err}"
    );
    if err.contains("cannot run perf") || err.contains("perf record exited with") {
        eprintln!("perf cannot record here: checked that the run still succeeds and says so");
        return;
    }
    let data: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("perf.data"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(data.len(), 1, "no perf.data in the metrics folder: {err}");
    // Without the variable, no profile.
    let o = rackbench(d.path())
        .args(["feedsim", "-p", &port, "-q", "2", "-d", "2", "-w", "1"])
        .args(SMALL)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("DCPERF_PERF_RECORD"), "{}", stderr(&o));
}

/// The fixed probe of a direct run's report.
fn fixed_probe(m: &Value) -> Value {
    m["probes"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|p| p["phase"] == "fixed")
        .unwrap()
        .clone()
}

/// Upstream's serving model (the default): a serving thread holds each
/// request through its 200 ms IO wait, so one serving thread answers at
/// most 5 requests a second whatever the CPU; ours (`async`) holds no
/// thread through the wait and keeps up with the same rate.
#[test]
fn the_blocking_leaf_serves_at_most_one_request_per_serving_thread() {
    let run = |model: &str| {
        let d = tempfile::tempdir().unwrap();
        let port = free_port().to_string();
        let o = rackbench(d.path())
            .args([
                "feedsim", "-p", &port, "-t", "1", "-q", "8", "-d", "3", "-w", "1",
            ])
            .args(["--serving-model", model])
            .args(SMALL)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let m = report(&o).1["metrics"].clone();
        assert_eq!(m["leaf_serving_model"], model);
        fixed_probe(&m)
    };
    let blocking = run("blocking");
    // 8/s asked of one thread that holds each request >= 200 ms.
    let done = blocking["total_queries"].as_f64().unwrap();
    let secs = blocking["duration_secs"].as_f64().unwrap();
    assert!(
        done / secs <= 5.5,
        "blocking leaf answered {done} in {secs} s"
    );
    assert_eq!(blocking["passed"], false, "{blocking}");
    let asynch = run("async");
    assert_eq!(asynch["passed"], true, "{asynch}");
    assert!(asynch["achieved_qps"].as_f64().unwrap() > 7.0, "{asynch}");
}

/// `--driver closed-compat` is DCPerf's driver: threads x 4 connections at
/// depth 1, latency from the send, QPS counted from sends. One driver
/// thread keeps at most 4 requests out, so against a blocking leaf of 2
/// serving threads (each request >= 200 ms) the sends stay under the leaf's
/// 10/s and the latency stays near 4 requests' worth of service, where the
/// open loop at the same rate charges the growing backlog.
#[test]
fn closed_compat_driver_caps_outstanding_requests_and_counts_sends() {
    let run = |driver: &str| {
        let d = tempfile::tempdir().unwrap();
        let port = free_port().to_string();
        let o = rackbench(d.path())
            .args([
                "feedsim", "-p", &port, "-t", "2", "-q", "15", "-d", "4", "-w", "1",
            ])
            .args(["--driver", driver])
            // run.sh's -l: closed-compat, one thread of 4 connections; the
            // open loop, its driver's threads (upstream's -l 4 line).
            .args(if driver == "closed-compat" {
                &["-l", "1"][..]
            } else {
                &["-l", "4"][..]
            })
            .args(SMALL)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        report(&o).1["metrics"].clone()
    };
    let m = run("closed-compat");
    assert_eq!(m["driver_threads"], 1, "{m}");
    assert!(
        m["load_mode"]
            .as_str()
            .unwrap()
            .starts_with("closed-compat (DCPerf's driver): 1 threads x 4 connections"),
        "{m}"
    );
    let p = fixed_probe(&m);
    assert_eq!(p["mode"], "capped:constant:4");
    let secs = p["duration_secs"].as_f64().unwrap();
    let sent = p["scheduled"].as_f64().unwrap();
    // QPS from sends, as upstream's driver counts them.
    assert!(
        (p["achieved_qps"].as_f64().unwrap() - sent / secs).abs() < 0.01,
        "{p}"
    );
    // Sends wait for a free slot: two serving threads of >= 200 ms allow
    // 10/s, plus the 4 slots' worth sent at the window's start.
    assert!(sent <= 10.0 * secs + 4.0, "{p}");
    assert_eq!(p["requested_qps"], 15.0);
    // The open loop at 15/s charges the backlog: far higher latency.
    let open = run("open");
    // `rackbench feedsim -l 4`: the driver ran 4 threads.
    assert_eq!(open["driver_threads"], 4, "{open}");
    let open = fixed_probe(&open);
    assert_eq!(open["mode"], "open:constant");
    let (c95, o95) = (
        p["latency"]["p95_ms"].as_f64().unwrap(),
        open["latency"]["p95_ms"].as_f64().unwrap(),
    );
    assert!(
        o95 > 1.5 * c95,
        "open p95 {o95} ms vs closed-compat {c95} ms"
    );
}

/// As run-feedsim-multi.sh: an instance without a result counts as 0 in
/// min_qps, so the others rerun at the highest requested rate + 1
/// (truncated), each on a fresh leaf.
#[test]
fn autoscale_reruns_on_fresh_leaves_when_an_instance_has_no_result() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        testenv::skip(
            "cores",
            &format!("autoscale with 2 instances needs 2 CPUs, this host has {cores}"),
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (port, _busy) = loop {
        let p = free_port();
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", p + 1)) {
            break (p, l);
        }
    };
    let o = rackbench(d.path())
        .env("RACKBENCH_PLAIN_PROGRESS", "1")
        .args(["feedsim", "--num-instances", "2", "-p", &port.to_string()])
        .args([
            "--quick",
            "--probe-secs",
            "2",
            "--final-secs",
            "2",
            "-w",
            "1",
        ])
        .args(["--tolerance", "0.25"])
        .args(SMALL)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("rerunning every instance with a fresh leaf"),
        "{err}"
    );
    // The fresh leaf built its datasets again.
    assert_eq!(
        err.matches("instance 1: leaf ready after").count(),
        2,
        "{err}"
    );
    let r = report(&o).1;
    let m = &r["metrics"];
    let first = &m["1"];
    let highest = first["search_final"]["final_requested_qps"]
        .as_f64()
        .unwrap();
    let rate = m["rerun_at_fixed_qps"].as_f64().unwrap();
    assert_eq!(rate, (highest + 1.0).trunc(), "{m}");
    assert_eq!(first["rerun_qps"].as_f64().unwrap(), rate);
    assert_eq!(m["min_qps"], 0.0);
    // As upstream's last object, the rerun's (its script run with -q).
    assert_eq!(m["is_fixed_qps"], 1, "{m}");
    // The rerun's rows and lines under upstream's fixqps- names (with
    // --report, in the run's metrics folder).
    let dir = d.path().join(format!(
        "benchmark_metrics_{}",
        r["run_id"].as_str().unwrap()
    ));
    let rows = std::fs::read_to_string(dir.join("feedsim_results_fixqps-1.txt")).unwrap();
    let last = rows
        .lines()
        .last()
        .unwrap()
        .split(',')
        .nth(2)
        .unwrap()
        .to_string();
    assert_eq!(last, format!("{rate:.2}"), "the rate's row last: {rows}");
    let log = std::fs::read_to_string(dir.join("feedsim-multi-inst-fixqps-1.log")).unwrap();
    assert!(
        log.contains(&format!("final requested_qps = {rate:.2}")),
        "{log}"
    );
    assert!(dir.join("feedsim-multi-inst-1.log").exists());
}

/// `--leaf` pointed where nothing listens fails at once, naming why.
#[test]
fn a_leaf_address_without_a_leaf_fails_at_once() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let t = Instant::now();
    let o = rackbench(d.path())
        .args(["feedsim", "--leaf", &format!("127.0.0.1:{port}"), "-q", "1"])
        .args(["-d", "1", "-w", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("cannot connect to the leaf at 127.0.0.1:{port}")),
        "{}",
        stderr(&o)
    );
    // Not the 15 minutes a leaf building its datasets is given.
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
}
