//! `rackbench resctl hashd`'s command line against rd-hashd's: the flags
//! its help lists, the single-CPU bench, `--clear-testfiles` clearing
//! before preparing, the bench values given on the command line, the
//! rotational override, `-v`/`--logfile`, and bad values refused naming
//! the flag. Runs are small (128M footprint) and short.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

mod common;

use common::{rackbench, text};
use std::path::Path;

/// The params file without its comment lines.
fn params_json(p: &Path) -> serde_json::Value {
    let t = std::fs::read_to_string(p).unwrap();
    serde_json::from_str(
        &t.lines()
            .filter(|l| !l.starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap()
}

/// The metrics object printed as the last stdout line.
fn metrics(stdout: &[u8]) -> serde_json::Value {
    let out = text(stdout);
    let m: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    m["metrics"].clone()
}

#[test]
fn help_lists_upstreams_flags() {
    let d = tempfile::tempdir().unwrap();
    let o = rackbench(d.path())
        .args(["resctl", "hashd", "--help"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let help = text(&o.stdout);
    for flag in [
        "--bench-cpu-single",
        "--bench-fake-cpu-load",
        "--bench-hash-size <SIZE>",
        "--bench-chunk-pages <PAGES>",
        "--bench-rps-max <RPS>",
        "--bench-log-bps <BPS>",
        "--bench-file-frac <FRAC>",
        "--bench-preload-cache <SIZE>",
        "-R, --rotational <BOOL>",
        "--total-swap <SIZE>",
        "--total-memory <SIZE>",
        "--nr-cpus <NR>",
        "-v...",
        "--logfile <FILE>",
        "--clear-testfiles",
        "--bench-grain <FACTOR>",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    assert!(
        help.contains("Clear the test files before preparing them"),
        "{help}"
    );
}

/// `--bench-cpu-single --bench-test`: the hashing is timed, then one
/// request at a time the hash size is steered to a 15 ms latency; the
/// found hash size and chunk_pages are reported and saved, and no
/// rps_max search runs.
#[test]
fn bench_cpu_single_runs_the_single_cpu_bench() {
    let d = tempfile::tempdir().unwrap();
    let params = d.path().join("params.json");
    let report = d.path().join("report.json");
    std::fs::write(&params, "{\n  \"rps_max\": 321\n}\n").unwrap();
    let o = rackbench(d.path())
        .args(["resctl", "hashd", "-t", "tf", "-s", "128M", "-i", "0"])
        .args(["--bench-cpu-single", "--bench-test", "-p"])
        .arg(&params)
        .arg("-r")
        .arg(&report)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("time_hash: 16.0M hashed"), "{err}");
    assert!(
        err.contains("[ Single cpu bench: round 1/2, hash size "),
        "{err}"
    );
    assert!(err.contains("Latency: "), "{err}");
    assert!(err.contains("[ Single cpu result: hash size "), "{err}");
    // Neither the rps_max nor the memory search ran.
    assert!(!err.contains("Bench results:"), "{err}");
    assert!(!err.contains("mem-up"), "{err}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["phase"], "BenchCpuSingle", "{r}");
    // One request at a time.
    assert!(r["concurrency_max"].as_f64().unwrap() <= 1.0, "{r}");
    let p = params_json(&params);
    let m = metrics(&o.stdout);
    assert_eq!(m["hash_size"], p["file_size_mean"], "{m}");
    assert_eq!(m["chunk_pages"], p["chunk_pages"], "{m}");
    assert!(m["hash_size_converged"].is_boolean(), "{m}");
    assert_ne!(p["file_size_mean"], 1_258_291, "the default was kept: {p}");
    assert_eq!(p["rps_max"], 321, "the other params are kept: {p}");
    assert!(m.get("rps_max_converged").is_none(), "{m}");
}

/// Given the hash size, chunk_pages and log rate, the single-CPU bench has
/// nothing to search: they are saved as given.
#[test]
fn given_bench_values_are_saved_as_given() {
    let d = tempfile::tempdir().unwrap();
    let params = d.path().join("params.json");
    let o = rackbench(d.path())
        .args(["resctl", "hashd", "-t", "tf", "-s", "128M", "-i", "0"])
        .args(["--bench-cpu-single", "--bench-hash-size", "2M"])
        .args(["--bench-chunk-pages", "7", "--bench-log-bps", "3M", "-p"])
        .arg(&params)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("Single cpu bench: round"), "{err}");
    assert!(
        err.contains("[ Single cpu result: hash size 2.0M, anon access 4.6M, chunk 7 pages ]"),
        "{err}"
    );
    let p = params_json(&params);
    assert_eq!(p["file_size_mean"], 2 << 20, "{p}");
    assert_eq!(p["chunk_pages"], 7, "{p}");
    assert_eq!(p["log_bps"], 3 << 20, "{p}");

    // --bench-cpu with --bench-rps-max: rps_max as given, no search.
    let o = rackbench(d.path())
        .args(["resctl", "hashd", "-t", "tf", "-s", "128M", "-i", "0"])
        .args(["--bench-cpu", "--bench-rps-max", "123", "-p"])
        .arg(&params)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("] lat:"), "{err}");
    assert!(err.contains("rps 123"), "{err}");
    let p = params_json(&params);
    assert_eq!(p["rps_max"], 123, "{p}");
    assert_eq!(p["chunk_pages"], 7, "{p}");
}

/// `--clear-testfiles` removes the test files, then they are prepared
/// afresh and hashd runs (upstream's meaning; not "clear and exit").
#[test]
fn clear_testfiles_clears_before_preparing() {
    let d = tempfile::tempdir().unwrap();
    let base = ["resctl", "hashd", "-t", "tf", "-s", "128M", "-i", "0"];
    let o = rackbench(d.path())
        .args(base)
        .arg("--prepare")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let first = d.path().join("tf/rdh-0000/rdh-0000000");
    assert!(first.exists());
    // A stray test file folder goes too.
    std::fs::create_dir_all(d.path().join("tf/rdh-0001")).unwrap();
    let o = rackbench(d.path())
        .args(base)
        .args(["--clear-testfiles", "--duration", "2"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let clearing = err.find("Clearing ").expect(&err);
    let populating = err.find("Populating ").expect(&err);
    assert!(clearing < populating, "{err}");
    assert!(err.contains("removed 2 test file folders"), "{err}");
    assert!(err.contains("testfiles: 1 created, 0 reused"), "{err}");
    assert!(err.contains("Starting hasher"), "{err}");
    assert!(!d.path().join("tf/rdh-0001").exists());
    assert!(first.exists());
    let m = metrics(&o.stdout);
    assert_eq!(m["testfiles_created"], 1, "{m}");
    assert!(m["periods"].as_u64().unwrap() >= 1, "{m}");
    // Without it, the files are reused.
    let o = rackbench(d.path())
        .args(base)
        .arg("--prepare")
        .output()
        .unwrap();
    assert!(
        text(&o.stderr).contains("testfiles: 0 created, 1 reused"),
        "{}",
        text(&o.stderr)
    );
}

/// `-R` overrides the rotational detection (the report says which mode
/// ran); `-v` adds detail to the status line and `--logfile` keeps the
/// messages and status lines.
#[test]
fn rotational_verbosity_and_logfile() {
    let d = tempfile::tempdir().unwrap();
    let report = d.path().join("report.json");
    let logfile = d.path().join("hashd.log");
    for (r, want) in [("true", true), ("false", false)] {
        let o = rackbench(d.path())
            .args(["resctl", "hashd", "-t", "tf", "-s", "128M", "-i", "1"])
            .args(["--duration", "2", "-v", "-R", r, "--logfile"])
            .arg(&logfile)
            .arg("-r")
            .arg(&report)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        let rep: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        assert_eq!(rep["rotational"], want, "{rep}");
        let out = text(&o.stdout);
        let status = out.lines().find(|l| l.starts_with("p50:")).expect(&out);
        assert!(
            status.contains(" infl:") && status.contains(" workers:"),
            "{status}"
        );
    }
    let log = std::fs::read_to_string(&logfile).unwrap();
    assert_eq!(log.matches("Starting hasher").count(), 2, "{log}");
    assert!(log.contains("] p50:"), "{log}");
}

#[test]
fn bad_values_are_refused_naming_the_flag() {
    let d = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--bench", "--bench-rps-max", "fast"], "--bench-rps-max"),
        (
            &["--bench", "--bench-chunk-pages", "-3"],
            "--bench-chunk-pages",
        ),
        (
            &["--bench", "--bench-hash-size", "lots"],
            "--bench-hash-size",
        ),
        (&["--bench", "--bench-log-bps", "1Q"], "--bench-log-bps"),
        (&["--bench", "--bench-file-frac=-0.5"], "--bench-file-frac"),
        (
            &["--bench", "--bench-preload-cache", "x"],
            "--bench-preload-cache",
        ),
        (&["--bench-grain", "0"], "--bench-grain"),
        (&["-R", "maybe"], "--rotational"),
        (&["--total-swap", "much"], "--total-swap"),
        (&["-v", "--nr-cpus", "two"], "--nr-cpus"),
        // Settings of a bench that does not run are refused, not ignored.
        (
            &["--bench-fake-cpu-load"],
            "--bench-fake-cpu-load: only used by",
        ),
        (
            &["--bench-cpu", "--bench-file-frac", "0.3"],
            "--bench-file-frac: only used by",
        ),
        (
            &["--bench-hash-size", "1M"],
            "--bench-hash-size: only used by",
        ),
        (
            &["--bench-cpu-single", "--bench-rps-max", "9"],
            "--bench-rps-max: only used by",
        ),
        (&["--prepare", "--bench"], "--prepare"),
    ];
    for (args, want) in cases {
        let o = rackbench(d.path())
            .args(["resctl", "hashd", "-t", "tf", "-s", "64M"])
            .args(*args)
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{args:?} was accepted: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // Nothing was prepared for any of them.
    assert!(!d.path().join("tf").exists());
}
