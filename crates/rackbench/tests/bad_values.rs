//! Meaningless numbers (`-d 0`, `--workers 0`, negatives, NaN) are refused
//! while the arguments are parsed: exit 2, the flag named, nothing started.
//! Negative numbers are read as values, so `-d -5` is refused for what it
//! is, not taken for an unknown flag. Values with a meaning of their own
//! (`--num-instances -1`, `calibrate --workers 0`) still parse.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs the binary in an empty directory and returns its output and
/// whatever it left there.
fn run(args: &[&str]) -> (Output, Duration, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_rackbench"))
        .args(args)
        .current_dir(dir.path())
        .env("RACKBENCH_DB", dir.path().join("results.db"))
        .env_remove("RACKBENCH_REPORT")
        .env_remove("RACKBENCH_JOBS_DIR")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = t0.elapsed();
    let left = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    (out, took, left)
}

/// (arguments, the flag the message must name, what it must say)
const REFUSED: &[(&[&str], &str, &str)] = &[
    // FeedSim, `rackbench feedsim ...` (upstream run.sh's flags).
    (
        &["feedsim", "-d", "0"],
        "--duration",
        "must be a positive number of seconds",
    ),
    (
        &["feedsim", "-d", "-5"],
        "--duration",
        "must be a positive number of seconds",
    ),
    (&["feedsim", "-t", "0"], "--threads", "must be at least 1"),
    (&["feedsim", "-t", "-2"], "--threads", "must be at least 1"),
    (
        &["feedsim", "-c", "0"],
        "--cpu-threads",
        "must be at least 1",
    ),
    (
        &["feedsim", "-q", "0"],
        "--qps",
        "must be a positive number",
    ),
    (
        &["feedsim", "-q", "2,-3"],
        "--qps",
        "must be a positive number",
    ),
    (
        &["feedsim", "-q", "NaN"],
        "--qps",
        "expected a finite number",
    ),
    (
        &["feedsim", "-q", "inf"],
        "--qps",
        "expected a finite number",
    ),
    (&["feedsim", "-w", "-1"], "--warmup", "must not be negative"),
    (
        &["feedsim", "-i", "-1"],
        "--icache-iterations",
        "must not be negative",
    ),
    (
        &["feedsim", "--scale", "0"],
        "--scale",
        "must be from 1 to 40",
    ),
    (
        &["feedsim", "--scale", "64"],
        "--scale",
        "must be from 1 to 40",
    ),
    (
        &["feedsim", "--chase-entries", "0"],
        "--chase-entries",
        "must be at least 1",
    ),
    (
        &["feedsim", "--graph-subset", "0"],
        "--graph-subset",
        "must be at least 1",
    ),
    (
        &["feedsim", "--num-objects", "0"],
        "--num-objects",
        "must be at least 1",
    ),
    (
        &["feedsim", "--probe-secs", "0"],
        "--probe-secs",
        "must be a positive number of seconds",
    ),
    (
        &["feedsim", "--final-secs", "-1"],
        "--final-secs",
        "must be a positive number of seconds",
    ),
    (
        &["feedsim", "--tolerance", "0"],
        "--tolerance",
        "must be in (0, 0.5)",
    ),
    (
        &["feedsim", "--close-call", "-0.1"],
        "--close-call",
        "must be in [0, 1)",
    ),
    (
        &["feedsim", "--steady-tail", "1"],
        "--steady-tail",
        "must be in [0, 1)",
    ),
    (
        &["feedsim", "--warmup-steady", "NaN"],
        "--warmup-steady",
        "expected a finite number",
    ),
    (&["feedsim", "-p", "-1"], "--port", "invalid value '-1'"),
    (
        &["feedsim", "leaf", "-t", "0"],
        "--threads",
        "must be at least 1",
    ),
    // A recorded run (`--report`): refused before the store is opened.
    (
        &["--report", "feedsim", "-d", "0"],
        "--duration",
        "must be a positive number of seconds",
    ),
    // The same through a job: `rackbench run JOB -i '{var: value}'`.
    (
        &[
            "run",
            "feedsim_mini",
            "--dry-run",
            "-i",
            r#"{"duration": "0"}"#,
        ],
        "--duration",
        "must be a positive number of seconds",
    ),
    (
        &["run", "feedsim_mini", "-i", r#"{"duration": "-5"}"#],
        "--duration",
        "must be a positive number of seconds",
    ),
    // The same var as NAME=VALUE.
    (
        &["run", "feedsim_mini", "-i", "duration=-5"],
        "--duration",
        "must be a positive number of seconds",
    ),
    (
        &["run", "feedsim_mini", "-i", "duration"],
        "-i/--role-input",
        "NAME=VALUE pairs",
    ),
    // calibrate (`--workers 0` is its documented no-op server, so accepted).
    (
        &["calibrate", "--workers", "-1", "--quick"],
        "--workers",
        "must not be negative",
    ),
    (
        &["calibrate", "--service-time-ms", "-1"],
        "--service-time-ms",
        "must be a non-negative number of milliseconds",
    ),
    (
        &["calibrate", "--service-time-ms", "inf"],
        "--service-time-ms",
        "expected a finite number",
    ),
    (
        &["calibrate", "--probe-secs", "0"],
        "--probe-secs",
        "must be a positive number of seconds",
    ),
    (
        &["calibrate", "--warmup-secs", "-2"],
        "--warmup-secs",
        "must be a non-negative number of seconds",
    ),
    (
        &["calibrate", "--fixed-qps", "100,0"],
        "--fixed-qps",
        "must be a positive number",
    ),
    (
        &["calibrate", "--client-threads", "0"],
        "--client-threads",
        "must be at least 1",
    ),
    (
        &["calibrate", "--connections", "0"],
        "--connections",
        "must be at least 1",
    ),
    (
        &["calibrate", "--send-ahead-us", "2000000"],
        "--send-ahead-us",
        "must be at most 1000000",
    ),
    (
        &["calibrate", "--max-in-flight", "0"],
        "--max-in-flight",
        "must be at least 1",
    ),
    (
        &["calibrate", "--tolerance", "0.5"],
        "--tolerance",
        "must be in (0, 0.5)",
    ),
    (
        &["calibrate", "--stall-every-secs", "0", "--stall-secs", "1"],
        "--stall-every-secs",
        "must be a positive number of seconds",
    ),
    (
        &["calibrate", "serve", "--threads", "0"],
        "--threads",
        "must be at least 1",
    ),
    (
        &[
            "run",
            "calibrate_quick",
            "--dry-run",
            "-i",
            r#"{"workers": "-3"}"#,
        ],
        "--workers",
        "must not be negative",
    ),
    // AdSim client, server and kernel.
    (
        &["adsim", "client", "--workers", "0"],
        "--workers",
        "must be at least 1",
    ),
    (
        &["adsim", "client", "--workers", "-4"],
        "--workers",
        "must be at least 1",
    ),
    (
        &["adsim", "client", "--runtime", "0"],
        "--runtime",
        "must be a positive number of seconds",
    ),
    (
        &["adsim", "client", "--probe-secs", "-1"],
        "--probe-secs",
        "must be a positive number of seconds",
    ),
    (
        &["adsim", "client", "--latency", "0"],
        "--latency",
        "must be a positive number of milliseconds",
    ),
    (
        &["adsim", "client", "--latency", "-100"],
        "--latency",
        "must be a positive number of milliseconds",
    ),
    (
        &["adsim", "client", "--qps", "5,-1"],
        "--qps",
        "must be a positive number",
    ),
    (
        &["adsim", "client", "--qps-max", "NaN"],
        "--qps-max",
        "expected a finite number",
    ),
    (
        &["adsim", "client", "--connections", "0"],
        "--connections",
        "must be at least 1",
    ),
    (
        &["adsim", "client", "--ai-request-size-multiplier", "0"],
        "--ai-request-size-multiplier",
        "must be at least 1",
    ),
    (
        &["adsim", "client", "--timeout", "-1"],
        "--timeout",
        "must not be negative",
    ),
    (
        &["adsim", "server", "--scale", "0"],
        "--scale",
        "must be a positive number",
    ),
    (
        &["adsim", "server", "--init-threads", "0"],
        "--init-threads",
        "must be at least 1",
    ),
    (
        &["adsim", "kernel", "GEMM", "--threads", "0"],
        "--threads",
        "must be at least 1",
    ),
    (
        &["adsim", "kernel", "GEMM", "--seconds", "0"],
        "--seconds",
        "must be a positive number of seconds",
    ),
    (
        &[
            "run",
            "adsim",
            "-r",
            "client",
            "--dry-run",
            "-i",
            r#"{"server_ip": "::1", "num_workers": "0"}"#,
        ],
        "--workers",
        "must be at least 1",
    ),
];

#[test]
fn meaningless_numbers_are_refused_before_anything_runs() {
    let mut failures = Vec::new();
    for (args, flag, says) in REFUSED {
        let (out, took, left) = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut bad = Vec::new();
        if out.status.code() != Some(2) {
            bad.push(format!("exit {:?}, expected 2", out.status.code()));
        }
        if !stderr.contains(flag) {
            bad.push(format!("stderr does not name {flag}"));
        }
        if !stderr.contains(says) {
            bad.push(format!("stderr does not say {says:?}"));
        }
        if stderr.contains("unexpected argument") {
            bad.push("a negative number was taken for a flag".into());
        }
        if stderr.contains("panicked") {
            bad.push("panicked".into());
        }
        // Nothing started: no probe CSV, no metrics folder, no store, and
        // no search (each of these would take seconds at least).
        if !left.is_empty() {
            bad.push(format!("left files behind: {left:?}"));
        }
        if took > Duration::from_secs(5) {
            bad.push(format!("took {took:?}: something ran"));
        }
        if !bad.is_empty() {
            failures.push(format!(
                "rackbench {}: {}\n{stderr}",
                args.join(" "),
                bad.join("; ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Values with a meaning of their own parse (shown by a dry run, which
/// validates a job's arguments and runs nothing).
#[test]
fn meaningful_zeros_and_negatives_still_parse() {
    let cases: &[&[&str]] = &[
        // ceil(nproc/100) instances: the autoscale jobs' default.
        &[
            "run",
            "feedsim_autoscale",
            "--dry-run",
            "-i",
            r#"{"num_instances": "-1"}"#,
        ],
        &[
            "run",
            "feedsim_autoscale",
            "--dry-run",
            "-i",
            r#"{"num_instances": "0"}"#,
        ],
        // No warm-up, no I-cache pressure, no IO wait, no close-call extension.
        &[
            "run",
            "feedsim_default",
            "--dry-run",
            "-i",
            r#"{"extra_args": "-w 0 -i 0 --io-wait-ms 0 --extensions 0 --close-call 0 --steady-tail 0 --warmup-steady 0"}"#,
        ],
        // calibrate's no-op server, and a zero service time.
        &[
            "run",
            "calibrate_quick",
            "--dry-run",
            "-i",
            r#"{"workers": "0", "service_time_ms": "0"}"#,
        ],
        // adsim: no time limits, no wait for the server.
        &[
            "run",
            "adsim",
            "-r",
            "client",
            "--dry-run",
            "-i",
            r#"{"server_ip": "::1", "timeout": "0", "extra_args": "--wait-server 0"}"#,
        ],
        &[
            "run",
            "adsim",
            "-r",
            "server",
            "--dry-run",
            "-i",
            r#"{"timeout": "0"}"#,
        ],
    ];
    for args in cases {
        let (out, _, _) = run(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "rackbench {}:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
