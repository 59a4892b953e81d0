//! CacheBench through the binary: a built-in config, an upstream config cut
//! short by --timeout_seconds, the `cachebench` alias, bad input, and the
//! NVM tier on a real directory (with a disk that fills up).
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

mod common;

use common::{rackbench, text};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn upstream(name: &str) -> PathBuf {
    testenv::conformance_root()
        .unwrap_or_default()
        .join("cachebench/test_configs")
        .join(name)
}

fn report(o: &Output) -> serde_json::Value {
    let out = text(&o.stdout);
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

/// A run that `--timeout_seconds` stopped, as upstream's: the report says
/// so, each instance's runner says `Test aborted.` on stderr, and the run
/// exits 1 (upstream's `Failed.`).
fn stopped_by_timeout(o: &std::process::Output) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("Test aborted."), "{err}");
    assert!(
        report(o)["metrics"]["stopped_by_timeout_seconds"].as_u64() > Some(0),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn mini_job_prints_upstream_report_and_metrics() {
    let d = tempfile::tempdir().unwrap();
    let o = rackbench(d.path())
        .args(["run", "cachebench_mini"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    // A job's stdout is its report alone (one JSON line, for `| jq`);
    // CacheBench's own text is on stderr.
    let stdout = text(&o.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let out = text(&o.stderr);
    for line in [
        "===JSON Config===",
        "Welcome to OSS version of cachebench",
        "Created 20000 keys in 0.00 mins",
        "Generating 0.05M sampled accesses",
        "Generated access patterns in ",
        "Total 0.10M ops to be run",
        "== Test Results ==",
        "== Allocator Stats ==",
        "Items in RAM  : ",
        "Fraction of pool 1 used : ",
        "Total Ops : 0.10 million",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
    let r = report(&o);
    let m = &r["metrics"];
    assert_eq!(m["ops"], 100_000);
    assert!(m["ops_per_sec"].as_f64().unwrap() > 1000.0, "{m}");
    // Lookaside: a get miss stores the key, so hits follow.
    let hit = m["hit_ratio_pct"].as_f64().unwrap();
    assert!(hit > 10.0 && hit < 100.0, "{m}");
    assert!(m["items_in_ram"].as_u64().unwrap() > 1000, "{m}");
}

#[test]
fn upstream_config_cut_short_and_alias() {
    testenv::conformance_or_return!("cachebench/test_configs");
    let d = tempfile::tempdir().unwrap();
    // CacheLib's simple_test.json: 32 threads x 100k ops over 512 MB.
    let cfg = upstream("simple_test.json");
    let alias = d.path().join("cachebench");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_rackbench"), &alias).unwrap();
    // Invoked as `cachebench`, the arguments are CacheBench's own (the
    // report goes under the current folder).
    let o = Command::new(&alias)
        .current_dir(d.path())
        .env("RACKBENCH_DB", d.path().join("results.db"))
        .env("RACKBENCH_REPORT", "1")
        .stdin(Stdio::null())
        .arg(format!("--json_test_config={}", cfg.display()))
        .args(["--timeout_seconds", "2", "--progress", "1"])
        .output()
        .unwrap();
    stopped_by_timeout(&o);
    let out = text(&o.stdout);
    assert!(out.contains("Total 3.20M ops to be run"), "{out}");
    assert!(out.contains("Instance   0: "), "{out}");
    assert!(
        out.contains("items evicted from nvm cache. Hit Ratio"),
        "{out}"
    );
    let r = report(&o);
    assert_eq!(r["benchmark_name"], "cachebench");
    assert_eq!(r["metrics"]["stopped_by_timeout_seconds"], 2);
    assert!(r["metrics"]["ops"].as_u64().unwrap() < 3_200_000);
}

#[test]
fn bad_configs_are_refused_with_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.json");
    std::fs::write(&bad, "{\n  \"cache_config\": {\n  \"test_config\": {}\n}\n").unwrap();
    // A setting upstream has and we refuse by name (our own file, and
    // upstream's where the conformance data is here).
    let enc = d.path().join("navy-with-encryption.json");
    std::fs::write(
        &enc,
        r#"{"cache_config": {"cacheSizeMB": 64, "nvmCacheSizeMB": 64, "navyEncryption": true},
           "test_config": {"numOps": 10, "numThreads": 1, "numKeys": 10}}"#,
    )
    .unwrap();
    let mut cases = vec![
        (
            vec![format!("--json_test_config={}", bad.display())],
            "bad.json:".to_string(),
        ),
        (
            vec![format!("--json_test_config={}", enc.display())],
            "navyEncryption".to_string(),
        ),
        (
            vec!["--json_test_config=builtin:nope".to_string()],
            "no built-in config 'nope'".to_string(),
        ),
        (
            vec!["--json_test_config=/no/such.json".to_string()],
            "cannot read /no/such.json".to_string(),
        ),
    ];
    // Upstream's defaults for the sizes are 0: a config without them is
    // refused, naming the key.
    let body = r#""keySizeRange": [8, 9], "keySizeRangeProbability": [1.0], "valSizeRange": [10, 20],
           "valSizeRangeProbability": [1.0], "getRatio": 1"#;
    for (name, cache, test, want) in [
        (
            "no_size",
            "",
            r#""numOps": 10, "numThreads": 1, "numKeys": 10,"#,
            "cacheSizeMB is 0",
        ),
        (
            "no_threads",
            r#""cacheSizeMB": 16"#,
            r#""numOps": 10, "numKeys": 10,"#,
            "numThreads is 0",
        ),
        (
            "no_keys",
            r#""cacheSizeMB": 16"#,
            r#""numOps": 10, "numThreads": 1,"#,
            "numKeys is 0",
        ),
    ] {
        let f = d.path().join(format!("{name}.json"));
        std::fs::write(
            &f,
            format!(r#"{{"cache_config": {{{cache}}}, "test_config": {{{test} {body}}}}}"#),
        )
        .unwrap();
        cases.push((
            vec![format!("--json_test_config={}", f.display())],
            want.to_string(),
        ));
    }
    if let Some(nvm) =
        testenv::conformance("cachebench/test_configs/consistency/navy-with-encryption.json")
    {
        cases.push((
            vec![format!("--json_test_config={}", nvm.display())],
            "navyEncryption".to_string(),
        ));
    }
    for (args, want) in cases {
        let o = rackbench(d.path())
            .arg("cachebench")
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(&want),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    // A misspelled key: a warning, or an error with --strict.
    let typo = d.path().join("typo.json");
    std::fs::write(
        &typo,
        r#"{"cache_config": {"cacheSizeMB": 128}, "test_config": {"numOps": 10, "numThreads": 1, "numKeys": 10,
           "keySizeRange": [8, 9], "keySizeRangeProbability": [1.0], "valSizeRange": [10, 20],
           "valSizeRangeProbability": [1.0], "getRatio": 1, "numOp": 5}}"#,
    )
    .unwrap();
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!("--json_test_config={}", typo.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("unknown key 'numOp' (did you mean 'numOps'?)"),
        "{}",
        text(&o.stderr)
    );
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!("--json_test_config={}", typo.display()))
        .arg("--strict")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

/// CacheLib's kvcache trace replay config runs (its CSV traces beside it).
#[test]
fn upstream_trace_replay_runs() {
    testenv::conformance_or_return!("cachebench/test_configs");
    let d = tempfile::tempdir().unwrap();
    let cfg = upstream("trace_replay/kvcache/config_kvtrace.json");
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!("--json_test_config={}", cfg.display()))
        .args(["--progress", "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let m = &report(&o)["metrics"];
    // 198 trace lines, op_count repeats included.
    assert!(m["ops"].as_u64().unwrap() > 198, "{m}");
    assert!(m["gets_per_sec"].as_f64().unwrap() > 0.0, "{m}");
    assert!(text(&o.stdout).contains("Cache Gets    : "));
}

/// A top-level array runs its instances at the same time: each prints its
/// report (on stdout, without a stats file), then upstream's aggregate of
/// them, and the metrics sum them.
#[test]
fn multi_instance_configs_sum_their_instances() {
    let d = tempfile::tempdir().unwrap();
    let one = r#"{"cache_config": {"cacheSizeMB": 16, "allocSizes": [256]}, "test_config": {"numOps": 5000, "numThreads": 1,
        "numKeys": 1000, "keySizeRange": [8, 16], "keySizeRangeProbability": [1.0],
        "valSizeRange": [100, 200], "valSizeRangeProbability": [1.0], "getRatio": 0.5, "setRatio": 0.5}}"#;
    let cfg = d.path().join("multi.json");
    std::fs::write(&cfg, format!("[{one}, {one}]")).unwrap();
    // As upstream: several instances need --progress_stats_file.
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!("--json_test_config={}", cfg.display()))
        .args(["--progress", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains(
            "\nError: --progress_stats_file must be specified when running multiple instances \
             (numInstances=2)\n"
        ),
        "{out}"
    );
    assert!(!out.contains("Welcome to"), "{out}");
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!("--json_test_config={}", cfg.display()))
        .args(["--progress", "0", "--report_api_latency"])
        .arg("--progress_stats_file")
        .arg(d.path().join("stats.log"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    // Each instance's report in its own stats file, then the aggregate on
    // stdout.
    assert!(out.contains("Running 2 cachebench instance(s)\n"), "{out}");
    assert_eq!(out.matches("Total 0.01M ops to be run").count(), 2, "{out}");
    assert_eq!(out.matches("== Test Results ==").count(), 0, "{out}");
    for i in 0..2 {
        let log = std::fs::read_to_string(d.path().join(format!("stats_{i}.log"))).unwrap();
        assert_eq!(log.matches("== Test Results ==").count(), 1, "{log}");
    }
    let agg = out
        .split("== Aggregated Stats Across 2 Instances ==\n")
        .nth(1)
        .unwrap();
    assert!(agg.contains("Total Ops : 0.01 million"), "{agg}");
    assert!(!agg.contains("Fraction of pool"), "{agg}");
    // --report_api_latency: every get and set of both instances timed.
    let lat = &report(&o)["metrics"]["api_latency_ns"];
    assert!(lat["get"]["p50"].as_u64().unwrap() > 0, "{lat}");
    assert_eq!(
        lat["get"]["count"].as_u64().unwrap() + lat["set"]["count"].as_u64().unwrap(),
        10_000,
        "{lat}"
    );
    let m = &report(&o)["metrics"];
    assert_eq!(m["ops"], 10_000);
    assert_eq!(m["instances"].as_array().unwrap().len(), 2);
    assert_eq!(m["instances"][0]["ops"], 5000);
}

/// DRAM + NVM on a directory: the NVM lines and figures are there, the
/// consistency checker found nothing, and the NVM file is gone afterwards.
#[test]
fn hybrid_cache_on_a_directory() {
    let d = tempfile::tempdir().unwrap();
    let nvm_dir = d.path().join("nvm");
    std::fs::create_dir(&nvm_dir).unwrap();
    let o = rackbench(d.path())
        .args(["run", "cachebench_hybrid_mini", "-i"])
        .arg(
            serde_json::json!({
                "extra_args": format!(
                    "--nvm_cache_paths {} --progress_stats_file stats.log",
                    nvm_dir.display()
                )
            })
            .to_string(),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    // A job's text is on stderr.
    let out = text(&o.stderr);
    for line in [
        "Items in NVM  : ",
        "RAM Hit Ratio : ",
        "NVM Hit Ratio : ",
        "NVM Read  Latency    p99      : ",
        "NVM Write Latency    p100     : ",
        "NVM bytes written (physical)  : ",
        "NVM Gets      : ",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
    assert!(
        text(&o.stderr).contains("NVM: 128 MiB on "),
        "{}",
        text(&o.stderr)
    );
    let m = &report(&o)["metrics"];
    assert_eq!(m["inconsistencies"], 0, "{m}");
    assert!(m["consistency_checks"].as_u64().unwrap() > 1000, "{m}");
    let nvm = &m["nvm"];
    assert!(nvm["hit_ratio_pct"].as_f64().unwrap() > 1.0, "{nvm}");
    assert!(nvm["bytes_written"].as_u64().unwrap() > 4 << 20, "{nvm}");
    assert!(nvm["bucket_engine"]["items"].as_u64().unwrap() > 0, "{nvm}");
    assert!(nvm["region_engine"]["items"].as_u64().unwrap() > 0, "{nvm}");
    assert!(
        nvm["device_read_latency_us"]["p99"].as_u64().is_some(),
        "{nvm}"
    );
    assert_eq!(
        std::fs::read_dir(&nvm_dir).unwrap().count(),
        0,
        "the NVM file created in the directory was left behind"
    );
    // Charts and extract_latency-style tables beside the stats file.
    let charts: Vec<PathBuf> = m["charts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| PathBuf::from(p.as_str().unwrap()))
        .collect();
    let names: Vec<String> = charts
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "stats_throughput.png",
        "stats_hit_ratio.png",
        "stats_read_latency.tsv",
        "stats_read_latency.png",
        "stats_write_latency.tsv",
        "stats_write_latency.png",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    let stats_dir = charts[0].parent().unwrap();
    let log = std::fs::read_to_string(stats_dir.join("stats.log")).unwrap();
    assert!(log.contains("NVM Read  Latency    p99"), "{log}");
    let tsv = std::fs::read_to_string(stats_dir.join("stats_read_latency.tsv")).unwrap();
    let mut lines = tsv.lines();
    assert!(lines.next().unwrap().starts_with("time  p50us"), "{tsv}");
    assert!(lines.next().unwrap().starts_with("1 "), "{tsv}");
    let png = std::fs::read(stats_dir.join("stats_read_latency.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");
}

/// A loop device over a file, detached on drop (None with the reason
/// printed where the host has none, unless RACKBENCH_REQUIRE_LOOP is set).
struct LoopDev(PathBuf);

impl LoopDev {
    fn attach(backing: &Path, size: u64) -> Option<LoopDev> {
        std::fs::File::create(backing)
            .unwrap()
            .set_len(size)
            .unwrap();
        LoopDev::attach_existing(backing)
    }

    fn attach_existing(backing: &Path) -> Option<LoopDev> {
        let why = match Command::new("losetup")
            .args(["--find", "--show"])
            .arg(backing)
            .output()
        {
            Ok(o) if o.status.success() => {
                return Some(LoopDev(text(&o.stdout).trim().into()));
            }
            Ok(o) => text(&o.stderr),
            Err(e) => e.to_string(),
        };
        testenv::skip("loop", &format!("no loop device ({why})"));
        None
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.0).status();
    }
}

/// The NVM tier on two raw block devices striped RAID-0 (loop devices):
/// O_DIRECT, items written and read back, the devices left in place.
#[test]
fn hybrid_cache_on_two_block_devices() {
    let d = tempfile::tempdir().unwrap();
    // nvmCacheSizeMB (128) is per path, as CacheLib's.
    let Some(a) = LoopDev::attach(&d.path().join("a.img"), 130 << 20) else {
        return;
    };
    let Some(b) = LoopDev::attach(&d.path().join("b.img"), 130 << 20) else {
        return;
    };
    let o = rackbench(d.path())
        .args(["run", "cachebench_hybrid_mini", "-i"])
        .arg(
            serde_json::json!({
                "extra_args": format!(
                    "--nvm_cache_paths {},{} --require_direct_io",
                    a.0.display(),
                    b.0.display()
                )
            })
            .to_string(),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("NVM: 256 MiB on 2 block devices striped"),
        "{err}"
    );
    let m = &report(&o)["metrics"];
    assert_eq!(m["inconsistencies"], 0, "{m}");
    let nvm = &m["nvm"];
    assert!(nvm["bytes_written"].as_u64().unwrap() > 4 << 20, "{nvm}");
    assert!(nvm["hit_ratio_pct"].as_f64().unwrap() > 1.0, "{nvm}");
    assert!(a.0.exists() && b.0.exists());
}

/// The device fills up mid-run (injected ENOSPC after 12 MiB): the run
/// stops, says why, prints the stats so far and fails.
#[test]
fn a_full_nvm_device_fails_the_run_with_the_stats_so_far() {
    let d = tempfile::tempdir().unwrap();
    let o = rackbench(d.path())
        .env("RACKBENCH_FAULT_NVM_WRITE_LIMIT", (12u64 << 20).to_string())
        .args([
            "cachebench",
            "--json_test_config",
            "builtin:hybrid_mini",
            "--nvm_cache_paths",
        ])
        .arg(d.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("the NVM device is full"), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let out = text(&o.stdout);
    assert!(out.contains("== Test Results =="), "{out}");
    assert!(out.contains("NVM error. the NVM device is full"), "{out}");
    let r = report(&o);
    assert_eq!(r["success"], false);
    assert!(
        r["metrics"]["error"].as_str().unwrap().contains("full"),
        "{}",
        r["metrics"]
    );
    assert!(r["metrics"]["ops"].as_u64().unwrap() > 0);
}

/// An NVM cache larger than the filesystem is refused before the run, with
/// the path and the sizes.
#[test]
fn an_nvm_path_too_small_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("big.json");
    std::fs::write(
        &cfg,
        r#"{"cache_config": {"cacheSizeMB": 128, "nvmCacheSizeMB": 1000000000, "navyBigHashSizePct": 0},
           "test_config": {"numOps": 10, "numThreads": 1, "numKeys": 10,
           "keySizeRange": [8, 9], "keySizeRangeProbability": [1.0], "valSizeRange": [10, 20],
           "valSizeRangeProbability": [1.0], "getRatio": 1}}"#,
    )
    .unwrap();
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!("--json_test_config={}", cfg.display()))
        .arg("--nvm_cache_paths")
        .arg(d.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("too small"), "{err}");
    assert!(err.contains(&d.path().display().to_string()), "{err}");
    // In memory (no path), the same size is refused against available memory.
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!("--json_test_config={}", cfg.display()))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("memory is available"),
        "{}",
        text(&o.stderr)
    );
}

/// Upstream's NVM stress config with chained items (16 threads, both NVM
/// engines), cut short, on a directory of ours: chains are added and the
/// run passes.
#[test]
fn upstream_navy_config_with_chained_items_runs() {
    testenv::conformance_or_return!("cachebench/test_configs");
    let d = tempfile::tempdir().unwrap();
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!(
            "--json_test_config={}",
            upstream("feature_stress/navy/default.json").display()
        ))
        .arg("--nvm_cache_paths")
        .arg(d.path())
        .args(["--timeout_seconds", "3", "--progress", "1"])
        .output()
        .unwrap();
    stopped_by_timeout(&o);
    let out = text(&o.stdout);
    assert!(out.contains("addChained:"), "{out}");
    assert!(out.contains("NVM Hit Ratio"), "{out}");
    let m = &report(&o)["metrics"];
    assert!(m["nvm"]["puts"].as_u64().unwrap() > 0, "{m}");
}

/// Pool rebalancing releases slabs every second (moving items where their
/// class has room) and upstream's `Released N slabs` lines report it.
#[test]
fn pool_rebalancing_releases_slabs() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("rebalance.json");
    std::fs::write(
        &cfg,
        r#"{"cache_config": {"cacheSizeMB": 128, "poolRebalanceIntervalSec": 1,
            "moveOnSlabRelease": true, "rebalanceStrategy": "random", "rebalanceMinSlabs": 1},
           "test_config": {"numOps": 100000000, "numThreads": 2, "numKeys": 200000,
           "keySizeRange": [8, 16], "keySizeRangeProbability": [1.0],
           "valSizeRange": [100, 1000, 10000], "valSizeRangeProbability": [0.5, 0.5],
           "getRatio": 0.6, "setRatio": 0.35, "delRatio": 0.05, "checkConsistency": true}}"#,
    )
    .unwrap();
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!("--json_test_config={}", cfg.display()))
        .args(["--timeout_seconds", "4", "--progress", "0"])
        .output()
        .unwrap();
    stopped_by_timeout(&o);
    let out = text(&o.stdout);
    let released = out
        .lines()
        .find_map(|l| l.strip_prefix("Released ")?.strip_suffix(" slabs"))
        .unwrap_or_else(|| panic!("no Released line in\n{out}"));
    assert!(
        released.replace(',', "").parse::<u64>().unwrap() >= 2,
        "{out}"
    );
    assert!(out.contains("  Moves     : attempts: "), "{out}");
    assert!(out.contains("  Evictions : attempts: "), "{out}");
    assert_eq!(report(&o)["metrics"]["inconsistencies"], 0);
}

/// CacheBench killed (SIGKILL) mid-run: the progress stats file holds every
/// block written so far, each complete (the file is written block by block,
/// never half a line).
#[test]
fn a_run_killed_mid_way_leaves_complete_progress_stats() {
    let d = tempfile::tempdir().unwrap();
    let stats = d.path().join("stats.log");
    // dram_mini with more operations than any machine does in 120 s.
    let config = d.path().join("long.json");
    let mini = include_str!("../../cachebench/configs/dram_mini.json");
    std::fs::write(
        &config,
        mini.replace("\"numOps\" : 50000", "\"numOps\" : 50000000000"),
    )
    .unwrap();
    let mut child = rackbench(d.path())
        .arg("cachebench")
        .arg("--json_test_config")
        .arg(&config)
        .args(["--timeout_seconds", "120", "--progress", "1"])
        .arg("--progress_stats_file")
        .arg(&stats)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let blocks = |s: &str| s.matches("== Throughput Stats ==").count();
    let t0 = std::time::Instant::now();
    while blocks(&std::fs::read_to_string(&stats).unwrap_or_default()) < 3 {
        assert!(
            t0.elapsed().as_secs() < 60,
            "no progress written in 60 s: {:?}",
            std::fs::read_to_string(&stats)
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "cachebench ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let k = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    let s = std::fs::read_to_string(&stats).unwrap();
    assert!(s.ends_with('\n'), "a half-written line: {s:?}");
    assert!(blocks(&s) >= 3, "{s}");
    // Every block is whole: the header and its throughput line.
    for block in s.split("== Throughput Stats ==").skip(1) {
        assert!(block.contains("Total Ops"), "a partial block: {block:?}");
    }
}

/// The figure a `NAME  pNN : V us` line of the text prints.
fn latency_line(out: &str, cat: &str, pct: &str) -> f64 {
    out.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(cat)?.trim_start();
            let rest = rest.strip_prefix(pct)?.trim_start().strip_prefix(':')?;
            rest.trim().strip_suffix(" us")?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no {cat} {pct} line in\n{out}"))
}

/// The filesystem type of `p` (`stat -f`), e.g. `ext2/ext3`, `tmpfs`.
fn fs_type(p: &Path) -> String {
    let o = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(p)
        .output()
        .unwrap();
    text(&o.stdout).trim().to_string()
}

/// `NVM Read  Latency` / `NVM Write Latency` are the device's I/O latency,
/// as upstream prints navy's `navy_device_read/write_latency_us` there: on
/// a file, each percentile the text prints equals the report's
/// `nvm.device_read_latency_us` / `device_write_latency_us`, and with
/// O_DIRECT on a disk a read takes at least a microsecond (an engine lookup
/// the Bloom filter answers takes none, which is what the lines showed
/// before).
#[test]
fn nvm_latency_lines_are_the_device_latency_on_a_file() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("navy.img");
    let o = rackbench(d.path())
        .args([
            "cachebench",
            "--json_test_config",
            "builtin:hybrid_mini",
            "--progress",
            "0",
            "--nvm_cache_paths",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let nvm = &report(&o)["metrics"]["nvm"];
    for (cat, key) in [
        ("NVM Read  Latency", "device_read_latency_us"),
        ("NVM Write Latency", "device_write_latency_us"),
    ] {
        let q = &nvm[key];
        assert!(q["count"].as_u64().unwrap() > 100, "{key}: {q}");
        for pct in ["p50", "p90", "p99", "p999"] {
            assert_eq!(
                latency_line(&out, cat, pct),
                q[pct].as_f64().unwrap(),
                "{cat} {pct} against {key}: {q}\n{out}"
            );
        }
        let max = q["max"].as_f64().unwrap();
        let p100 = latency_line(&out, cat, "p100");
        assert!(
            (p100 - max).abs() <= max / 500.0,
            "{cat} p100 {p100} vs max {max}"
        );
    }
    // The engine's own timings stay in the report, under their own names.
    assert!(
        nvm["engine_lookup_latency_us"]["count"].as_u64().unwrap() > 0,
        "{nvm}"
    );
    let err = text(&o.stderr);
    let fs = fs_type(d.path());
    if err.contains("O_DIRECT") && !err.contains("buffered") && !fs.contains("tmpfs") {
        let p50 = latency_line(&out, "NVM Read  Latency", "p50");
        assert!(p50 >= 1.0, "an O_DIRECT read on {fs} took {p50} us\n{out}");
    } else {
        testenv::skip(
            "odirect",
            &format!("no O_DIRECT on a disk here ({fs}): the read-time floor is not checked"),
        );
    }
}

/// `--progress_stats_file` as upstream's ProgressTracker and Runner write
/// it: appended to (an earlier run's lines stay), `=== Starting new run ===`
/// first, every interval's throughput block with the operations so far, the
/// progress lines there and not on stdout, and the end-of-run results
/// appended last, the same text as on stdout (so `tail -n 50 FILE` shows
/// them).
#[test]
fn progress_stats_file_is_appended_with_operations_and_the_results() {
    let d = tempfile::tempdir().unwrap();
    let stats = d.path().join("stats.log");
    std::fs::write(&stats, "an earlier run's last line\n").unwrap();
    let config = d.path().join("long.json");
    let mini = include_str!("../../cachebench/configs/dram_mini.json");
    std::fs::write(
        &config,
        mini.replace("\"numOps\" : 50000", "\"numOps\" : 50000000000"),
    )
    .unwrap();
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg("--json_test_config")
        .arg(&config)
        .args(["--timeout_seconds", "3", "--progress", "1"])
        .arg("--progress_stats_file")
        .arg(&stats)
        .output()
        .unwrap();
    stopped_by_timeout(&o);
    let out = text(&o.stdout);
    assert!(
        !out.contains("ops completed"),
        "progress lines on stdout:\n{out}"
    );
    let log = std::fs::read_to_string(&stats).unwrap();
    assert!(
        log.starts_with("an earlier run's last line\n=== Starting new run ===\n"),
        "{log}"
    );
    assert!(log.contains("Instance   0: "), "{log}");
    assert!(log.contains("M ops completed. "), "{log}");
    let blocks: Vec<&str> = log.split("== Throughput Stats ==\n").skip(1).collect();
    assert!(blocks.len() >= 2, "{log}");
    for b in &blocks {
        let sets: u64 = b
            .lines()
            .find_map(|l| l.strip_prefix("Total sets: "))
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap();
        assert!(sets > 0, "a throughput block without operations: {b}");
        assert!(
            !b.starts_with("Total Ops : 0.00 million\nTotal sets: 0\n"),
            "{b}"
        );
    }
    let last_ops: f64 = blocks[blocks.len() - 1]
        .lines()
        .find_map(|l| l.strip_prefix("Total Ops : ")?.strip_suffix(" million"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(last_ops > 0.0, "{log}");
    // The results close the file, as on stdout (where upstream's main
    // then prints `Failed.`: the timeout aborted the run).
    let results = &out[out.find("== Test Results ==").unwrap()..];
    let (results, closing) = results.split_once("\nFailed.\n").unwrap();
    assert_eq!(
        closing.lines().count(),
        1,
        "only the report JSON follows: {closing}"
    );
    assert!(
        log.ends_with(&format!("{results}\n")),
        "file:\n{log}\nstdout:\n{results}"
    );
    let tail: Vec<&str> = log.lines().rev().take(50).collect();
    assert!(tail.contains(&"== Test Results =="), "{log}");
}

/// `nvmCacheSizeMB` is per path, as CacheLib's `setRaidFiles(paths, size)`:
/// two paths of N MB hold about as many items as one path of 2N MB (the
/// same workload, filling NVM), where splitting N over the paths held half.
/// And two instances of a run share one directory, each in its own
/// subdirectory (`nvmcache_<pid>_<random>/navy_cache`), removed at the end.
#[test]
fn nvm_cache_size_is_per_path() {
    let d = tempfile::tempdir().unwrap();
    // One allocation class for every item: which classes win DRAM's slabs
    // depends on thread interleaving, and with several the DRAM evictions
    // (so the items NVM gets) came in two sizes from run to run.
    let config = |mb: u64| {
        format!(
            r#"{{"cache_config": {{"cacheSizeMB": 16, "nvmCacheSizeMB": {mb}, "navyRegionSizeMB": 4,
                "navyBigHashSizePct": 0, "allocSizes": [4200]}},
               "test_config": {{"numOps": 40000, "numThreads": 2, "numKeys": 200000,
               "keySizeRange": [8, 16], "keySizeRangeProbability": [1.0],
               "valSizeRange": [1000, 4000], "valSizeRangeProbability": [1.0],
               "setRatio": 1.0}}}}"#
        )
    };
    let run = |cfg: &str, paths: &str| -> (u64, String) {
        let file = d.path().join("c.json");
        std::fs::write(&file, cfg).unwrap();
        let o = rackbench(d.path())
            .arg("cachebench")
            .arg("--json_test_config")
            .arg(&file)
            .args(["--progress", "0", "--nvm_cache_paths", paths])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        let items = report(&o)["metrics"]["nvm"]["items"].as_u64().unwrap();
        (items, text(&o.stderr))
    };
    let one = d.path().join("one.img").display().to_string();
    let two = format!(
        "{},{}",
        d.path().join("a.img").display(),
        d.path().join("b.img").display()
    );
    let (items_one, err) = run(&config(64), &one);
    assert!(err.contains("NVM: 64 MiB on file "), "{err}");
    let (items_two, err) = run(&config(32), &two);
    assert!(err.contains("NVM: 64 MiB on 2 files striped"), "{err}");
    assert_eq!(
        std::fs::metadata(d.path().join("a.img")).unwrap().len(),
        32 << 20
    );
    let ratio = items_two as f64 / items_one as f64;
    assert!(
        (0.85..1.18).contains(&ratio),
        "two paths of 32 MB hold {items_two} items, one of 64 MB {items_one}"
    );

    // Two instances on one directory.
    let shared = d.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let cfg = d.path().join("two.json");
    // 17 MB: four 4 MiB regions after navy's metadata (0.5% of the device).
    std::fs::write(&cfg, format!("[{}, {}]", config(17), config(17))).unwrap();
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg("--json_test_config")
        .arg(&cfg)
        .args(["--progress", "0", "--progress_stats_file", "stats.log"])
        .arg("--nvm_cache_paths")
        .arg(&shared)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    let files: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("NVM: 17 MiB on file ")?.split(", ").next())
        .collect();
    assert_eq!(files.len(), 2, "{err}");
    assert_ne!(files[0], files[1]);
    for f in &files {
        let f = Path::new(f);
        assert_eq!(f.file_name().unwrap(), "navy_cache");
        assert!(
            f.parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("nvmcache_"),
            "{}",
            f.display()
        );
    }
    assert_eq!(
        std::fs::read_dir(&shared).unwrap().count(),
        0,
        "left behind"
    );
}

// ---------------------------------------------------------------------------
// --output_layout (rackbench's flag): upstream's current text and the older
// one, with thousands separators, that results from before 2026 use.

/// The integer after `label` on the first line that starts with it, and
/// that number as printed.
fn printed_int(text: &str, label: &str) -> (u64, String) {
    let raw = text
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label:?} line in\n{text}"))
        .trim()
        .to_string();
    (raw.replace(',', "").parse().unwrap(), raw)
}

/// The same short run in both layouts. `current` (the default) is upstream
/// today: plain integers, `Instance   0:` progress lines in the stats file
/// only, which starts with `=== Starting new run ===` and ends with the
/// results, `== Throughput Stats ==`, `Finished!` (`Failed.` here: the timeout aborts the run). `legacy` is upstream
/// until January 2026: `Items in RAM  : 12,345`, progress lines without the
/// instance and on stdout too, no header and no results in the stats file,
/// `== Throughput for  ==`, no closing line. A top-level array with a
/// stats file writes `<stem>_<i><ext>` per instance, each with its report,
/// and stdout gets `== Aggregated Stats Across 2 Instances ==`.
#[test]
fn output_layouts_current_and_legacy() {
    let d = tempfile::tempdir().unwrap();
    let mini = include_str!("../../cachebench/configs/dram_mini.json");
    let long = mini.replace("\"numOps\" : 50000", "\"numOps\" : 50000000000");
    assert_ne!(long, mini);
    std::fs::write(d.path().join("long.json"), &long).unwrap();
    let run = |config: &str, stats: &str, layout: Option<&str>| {
        let mut c = rackbench(d.path());
        c.args(["cachebench", "--json_test_config", config])
            .args(["--timeout_seconds", "2", "--progress", "1"])
            .arg("--progress_stats_file")
            .arg(d.path().join(stats));
        if let Some(l) = layout {
            c.args(["--output_layout", l]);
        }
        let o = c.output().unwrap();
        stopped_by_timeout(&o);
        let out = text(&o.stdout);
        // Upstream's text, without the report JSON on the last line.
        let out = out.trim_end().rsplit_once('\n').unwrap().0.to_string() + "\n";
        let log = std::fs::read_to_string(d.path().join(stats)).unwrap();
        (out, log)
    };

    let (out, log) = run("long.json", "current.log", None);
    let (items, raw) = printed_int(&out, "Items in RAM  : ");
    assert!(items >= 1000, "{out}");
    assert_eq!(raw, items.to_string(), "no separators: {out}");
    assert!(out.contains("Created 20000 keys in "), "{out}");
    assert!(out.contains("\n== Throughput Stats ==\n"), "{out}");
    assert!(!out.contains("Throughput for"), "{out}");
    assert!(out.ends_with("\nFailed.\n"), "{out}");
    assert!(!out.contains("ops completed"), "progress on stdout: {out}");
    assert!(
        log.starts_with("=== Starting new run ===\nInstance   0: "),
        "{log}"
    );
    let line = log.lines().nth(1).unwrap();
    assert!(
        line.contains("M ops completed. ") && line.ends_with("%)."),
        "{line}"
    );
    let (_, raw) = printed_int(&log, "Total sets: ");
    assert!(!raw.contains(','), "{log}");
    assert!(log.contains("== Test Results =="), "{log}");
    // `--output_layout current` is the default.
    let (explicit, _) = run("long.json", "current2.log", Some("current"));
    assert!(
        explicit.contains("\n== Throughput Stats ==\n"),
        "{explicit}"
    );

    let (out, log) = run("long.json", "legacy.log", Some("legacy"));
    let (items, raw) = printed_int(&out, "Items in RAM  : ");
    assert!(items >= 1000, "{out}");
    assert!(raw.contains(','), "separators: {out}");
    assert!(raw.split(',').skip(1).all(|g| g.len() == 3), "{raw}");
    assert!(out.contains("Created 20,000 keys in "), "{out}");
    assert!(out.contains("\n== Throughput for  ==\n"), "{out}");
    assert!(!out.contains("== Throughput Stats =="), "{out}");
    assert!(
        !out.contains("Finished!") && !out.contains("Failed.") && !out.contains("Instance "),
        "{out}"
    );
    let progress = out
        .lines()
        .find(|l| l.contains("M ops completed. "))
        .unwrap_or_else(|| panic!("no progress line on stdout: {out}"));
    assert!(
        progress.as_bytes()[2] == b':' && progress.ends_with("%)."),
        "{progress}"
    );
    assert!(log.starts_with(&format!("{progress}\n")), "{log}");
    assert!(!log.contains("=== Starting new run ==="), "{log}");
    assert!(!log.contains("== Test Results =="), "{log}");
    let (sets, raw) = printed_int(&log, "Total sets: ");
    assert!(sets < 1000 || raw.contains(','), "{log}");

    // Two instances with a stats file: one file each, the aggregate on
    // stdout.
    let one = long.lines().filter(|l| !l.trim_start().starts_with("//"));
    let one: String = one.collect::<Vec<_>>().join("\n");
    std::fs::write(d.path().join("two.json"), format!("[{one}, {one}]")).unwrap();
    let mut c = rackbench(d.path());
    let o = c
        .args(["cachebench", "--json_test_config", "two.json"])
        .args(["--timeout_seconds", "2", "--progress", "1"])
        .arg("--progress_stats_file")
        .arg(d.path().join("multi.log"))
        .output()
        .unwrap();
    stopped_by_timeout(&o);
    let out = text(&o.stdout);
    assert!(
        out.contains("\nRunning 2 cachebench instance(s)\n"),
        "{out}"
    );
    assert!(!out.contains("== Test Results =="), "{out}");
    let agg = out
        .split("\n== Aggregated Stats Across 2 Instances ==\n== Allocator Stats ==\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no aggregate: {out}"));
    assert!(
        agg.contains("\n== Throughput ==\nTotal Duration: "),
        "{agg}"
    );
    assert!(
        agg.contains("\nNOTE: we can't combine latency counters"),
        "{agg}"
    );
    assert!(agg.contains("\nFailed.\n"), "{agg}");
    assert!(!d.path().join("multi.log").exists());
    let mut items = 0;
    for i in 0..2 {
        let log = std::fs::read_to_string(d.path().join(format!("multi_{i}.log"))).unwrap();
        assert!(
            log.starts_with(&format!("=== Starting new run ===\nInstance   {i}: ")),
            "{log}"
        );
        assert_eq!(log.matches("== Test Results ==").count(), 1, "{log}");
        let report = log.split("== Test Results ==").nth(1).unwrap();
        items += printed_int(report, "Items in RAM  : ").0;
    }
    assert_eq!(printed_int(agg, "Items in RAM  : ").0, items, "{agg}");
}

/// What rackbench does with one of upstream's test configs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Runs (shrunk) to its report.
    Ran,
    /// Converts its trace to a binary trace and ends (`binaryFileName`).
    Converted,
    /// Refused before it runs (exit 2), the message naming this.
    Refused(&'static str),
}

/// Every config under upstream's `test_configs/` and what rackbench does
/// with it. The same table is in docs/cachebench.md.
const UPSTREAM_CONFIGS: &[(&str, Expect)] = {
    use Expect::{Converted, Ran, Refused};
    &[
        ("consistency/chained-items-stress-moving.json", Ran),
        ("consistency/chained-items-stress-no-moving.json", Ran),
        ("consistency/navy-with-deletes-inmem-buf.json", Ran),
        (
            "consistency/navy-with-deletes-stack-alloc-inmem-buf.json",
            Ran,
        ),
        (
            "consistency/navy-with-deletes-with-truncated-alloc-size.json",
            Ran,
        ),
        ("consistency/navy-with-deletes.json", Ran),
        (
            "consistency/navy-with-encryption-inmem-buf.json",
            Refused("navyEncryption"),
        ),
        (
            "consistency/navy-with-encryption.json",
            Refused("navyEncryption"),
        ),
        ("consistency/navy-with-reinsertion-inmem-buf.json", Ran),
        (
            "consistency/navy-with-reinsertion-multiple-clean-threads.json",
            Ran,
        ),
        ("consistency/navy-with-reinsertion.json", Ran),
        ("consistency/navy.json", Ran),
        ("consistency/ram-with-deletes.json", Ran),
        ("consistency/ram.json", Ran),
        ("feature_stress/could_exist.json", Ran),
        ("feature_stress/dram_cache.json", Ran),
        ("feature_stress/dynamic_refresh_time.json", Ran),
        ("feature_stress/event_tracker_dram_navy.json", Ran),
        ("feature_stress/free_list.json", Ran),
        (
            "feature_stress/item_destructor/dram.json",
            Refused("enableItemDestructorCheck"),
        ),
        (
            "feature_stress/item_destructor/navy.json",
            Refused("enableItemDestructorCheck"),
        ),
        (
            "feature_stress/item_destructor/navy_bighash.json",
            Refused("enableItemDestructorCheck"),
        ),
        ("feature_stress/navy/arenas.json", Refused("navyArenas")),
        ("feature_stress/navy/async_io.json", Ran),
        ("feature_stress/navy/bc_fifo.json", Ran),
        ("feature_stress/navy/bh.json", Refused("less than one")),
        ("feature_stress/navy/default.json", Ran),
        ("feature_stress/slab_release/chained_items.json", Ran),
        ("feature_stress/slab_release/chained_items_moving.json", Ran),
        ("feature_stress/slab_release/default.json", Ran),
        ("feature_stress/slab_release/moving.json", Ran),
        ("hit_ratio/cdn/config.json", Ran),
        ("hit_ratio/graph_cache_follower_assocs/config.json", Ran),
        ("hit_ratio/graph_cache_follower_fbobj/config.json", Ran),
        ("hit_ratio/graph_cache_leader_assocs/config.json", Ran),
        ("hit_ratio/graph_cache_leader_fbobj/config.json", Ran),
        ("hit_ratio/kvcache_reg/config.json", Ran),
        ("huge_pages/hugepage_none.json", Ran),
        ("huge_pages/hugepage_posix.json", Ran),
        ("huge_pages/hugepage_sysv.json", Ran),
        ("huge_pages/hugepage_tmp.json", Ran),
        (
            "integration_tests/cachelib_map.json",
            Refused("name 'cachelib_map'"),
        ),
        (
            "integration_tests/cachelib_map_asan.json",
            Refused("name 'cachelib_map'"),
        ),
        (
            "integration_tests/cachelib_range_map.json",
            Refused("name 'cachelib_range_map'"),
        ),
        (
            "integration_tests/cachelib_range_map_asan.json",
            Refused("name 'cachelib_range_map'"),
        ),
        (
            "integration_tests/fast_shutdown.json",
            Refused("name 'fast_shutdown'"),
        ),
        (
            "integration_tests/high_refcount.json",
            Refused("name 'high_refcount'"),
        ),
        ("integration_tests/navy_async.json", Ran),
        ("integration_tests/navy_async_sync_comp.json", Ran),
        (
            "integration_tests/object_cache.json",
            Refused("name 'object_cache'"),
        ),
        ("large_cache_test/config.json", Ran),
        ("simple_multi_instance_test.json", Ran),
        ("simple_test.json", Ran),
        ("simple_test_with_persistence.json", Ran),
        ("simple_tiers_test.json", Ran),
        ("ssd_perf/flat_kvcache_reg/config.json", Ran),
        ("ssd_perf/graph_cache_leader/config.json", Ran),
        (
            "ssd_perf/graph_cache_leader/graph_cache_1inst_1000M.json",
            Ran,
        ),
        (
            "ssd_perf/graph_cache_leader/graph_cache_2inst_1000M.json",
            Ran,
        ),
        (
            "ssd_perf/graph_cache_leader/graph_cache_3inst_1000M.json",
            Ran,
        ),
        (
            "ssd_perf/graph_cache_leader/graph_cache_4inst_1000M.json",
            Ran,
        ),
        (
            "ssd_perf/graph_cache_leader/graph_cache_5inst_1000M.json",
            Ran,
        ),
        ("ssd_perf/kvcache_l2_reg/config.json", Ran),
        ("ssd_perf/kvcache_l2_wc/config.json", Ran),
        ("ssd_perf/kvcache_l2_wc/kvcache_l2_wc_1inst_100M.json", Ran),
        ("ssd_perf/kvcache_l2_wc/kvcache_l2_wc_2inst_100M.json", Ran),
        ("ssd_perf/kvcache_l2_wc/kvcache_l2_wc_3inst_100M.json", Ran),
        ("ssd_perf/kvcache_l2_wc/kvcache_l2_wc_4inst_100M.json", Ran),
        ("ssd_perf/kvcache_l2_wc/kvcache_l2_wc_5inst_100M.json", Ran),
        (
            "throughput/miss-workload/hybrid_cache_get_throughput_all_misses.json",
            Ran,
        ),
        (
            "throughput/miss-workload/hybrid_cache_only_block_cache_get_throughput_all_misses.json",
            Ran,
        ),
        (
            "throughput/miss-workload/ram_cache_get_throughput_all_misses.json",
            Ran,
        ),
        (
            "throughput/navy_block_cache/navy_small_size_class.json",
            Ran,
        ),
        (
            "throughput/navy_block_cache/navy_small_stacked_alloc.json",
            Ran,
        ),
        (
            "throughput/navy_block_cache/navy_small_stacked_alloc_and_in_mem_buffer.json",
            Ran,
        ),
        (
            "throughput/navy_block_cache/navy_small_stacked_alloc_and_in_mem_buffer_throttled.json",
            Ran,
        ),
        (
            "throughput/same_value_get_throughput_high_contention.json",
            Ran,
        ),
        (
            "throughput/same_value_get_throughput_high_contention_try_lock.json",
            Ran,
        ),
        (
            "throughput/same_value_get_throughput_test_20_pools.json",
            Ran,
        ),
        (
            "throughput/same_value_get_throughput_test_single_pool.json",
            Ran,
        ),
        ("throughput/simple_lone_get_throughput.json", Ran),
        ("throughput/simple_navy_delete_throughput.json", Ran),
        ("throughput/simple_online_throughput.json", Ran),
        ("throughput/simple_ram_cache_delete_throughput.json", Ran),
        ("throughput/simple_set_throughput.json", Ran),
        (
            "throughput/simple_set_throughput_with_chained_items.json",
            Ran,
        ),
        (
            "throughput/simple_trace_throughput.json",
            Refused("test.trace cannot be read"),
        ),
        ("throughput/small_cache_chained_items.json", Ran),
        ("throughput/uniform_values_get_throughput_test.json", Ran),
        (
            "throughput/uniform_values_get_throughput_test_flash_component.json",
            Refused("name 'cache_component'"),
        ),
        (
            "throughput/uniform_values_get_throughput_test_ram_component.json",
            Refused("name 'cache_component'"),
        ),
        (
            "throughput/uniform_values_get_throughput_test_single_pool.json",
            Ran,
        ),
        ("trace_replay/block_chunk/config_block.json", Ran),
        ("trace_replay/kvcache/config_kvtrace.json", Ran),
        (
            "trace_replay/kvcache/config_kvtrace_gen_binary.json",
            Converted,
        ),
        (
            "trace_replay/kvcache/config_kvtrace_replay_binary.json",
            Ran,
        ),
    ]
};

/// Upstream's configs under `dir` (a config has cache_config or
/// test_config; the popularity and size files beside them do not).
fn upstream_configs(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            upstream_configs(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p).unwrap();
            let v: serde_json::Value =
                serde_json::from_str(&cachebench::config::strip(&text)).unwrap();
            let is_config = |o: &serde_json::Value| {
                o.get("cache_config").is_some() || o.get("test_config").is_some()
            };
            let config = match &v {
                serde_json::Value::Array(a) => a.iter().any(is_config),
                o => is_config(o),
            };
            if config {
                out.push(p);
            }
        }
    }
}

/// An upstream config cut down to run in a moment: at most 64 MB of DRAM (more
/// where a pool would lack a slab per allocation class: see [`grown`])
/// and of NVM (on `nvm_dir`, in 1 MiB regions, at most 4 clean ones and
/// 4 MB of metadata), 500 operations on at most 4 threads, 2,000 keys,
/// 1 us pauses; files named in it are read from `config_dir`. Every other
/// key is left as upstream wrote it.
fn shrunk(config: &Path, config_dir: &Path, nvm_dir: &Path) -> serde_json::Value {
    use serde_json::{Value, json};
    let text = std::fs::read_to_string(config).unwrap();
    let mut v: Value = serde_json::from_str(&cachebench::config::strip(&text)).unwrap();
    let cap = |o: &mut serde_json::Map<String, Value>, k: &str, max: u64| {
        if let Some(x) = o.get(k).and_then(Value::as_u64) {
            o.insert(k.to_string(), json!(x.min(max)));
        }
    };
    let instances: Vec<&mut Value> = match &mut v {
        Value::Array(a) => a.iter_mut().collect(),
        o => vec![o],
    };
    for i in instances {
        let i = i.as_object_mut().unwrap();
        if let Some(c) = i.get_mut("cache_config").and_then(Value::as_object_mut) {
            cap(c, "cacheSizeMB", 64);
            if c.get("nvmCacheSizeMB").and_then(Value::as_u64).unwrap_or(0) > 0 {
                cap(c, "nvmCacheSizeMB", 64);
                cap(c, "nvmCacheMetadataSizeMB", 4);
                c.insert("navyRegionSizeMB".into(), json!(1));
                c.insert(
                    "navyCleanRegions".into(),
                    json!(
                        c.get("navyCleanRegions")
                            .and_then(Value::as_u64)
                            .unwrap_or(1)
                            .min(4)
                    ),
                );
                c.insert("nvmCachePaths".into(), json!([nvm_dir]));
            }
        }
        if let Some(t) = i.get_mut("test_config").and_then(Value::as_object_mut) {
            cap(t, "numOps", 500);
            cap(t, "numThreads", 4);
            cap(t, "numKeys", 2000);
            cap(t, "opDelayNs", 1000);
            t.entry("configPath").or_insert(json!(config_dir));
        }
    }
    v
}

/// `config` (shrunk from upstream's `file`) with more DRAM when `stderr`
/// says a pool has less than a slab per allocation class and upstream's
/// file asked for more than the shrunk size: the cacheSizeMB the message's
/// figures call for, capped at upstream's. None otherwise.
fn grown(file: &Path, config: &serde_json::Value, stderr: &str) -> Option<serde_json::Value> {
    use serde_json::{Value, json};
    let line = stderr
        .lines()
        .find(|l| l.contains("cannot have at least one slab for each allocation class"))?;
    let figure = |after: &str| -> Option<f64> {
        let (head, _) = line.split_once(after)?;
        head.rsplit(' ').next()?.parse().ok()
    };
    let (required, given) = (figure(" bytes required")?, figure(" bytes given")?);
    let original: Value = serde_json::from_str(&cachebench::config::strip(
        &std::fs::read_to_string(file).ok()?,
    ))
    .ok()?;
    let mut config = config.clone();
    let pairs: Vec<(&mut Value, &Value)> = match (&mut config, &original) {
        (Value::Array(a), Value::Array(b)) => a.iter_mut().zip(b.iter()).collect(),
        (a, b) => vec![(a, b)],
    };
    let mut changed = false;
    for (c, o) in pairs {
        let size = |v: &Value| v["cache_config"]["cacheSizeMB"].as_u64();
        let (Some(now), Some(asked)) = (size(c), size(o)) else {
            continue;
        };
        // Pools divide cacheSizeMB less its header slab.
        let needed = (((now - 4) as f64) * required / given.max(1.0)).ceil() as u64 + 8;
        let to = needed.min(asked);
        if to > now {
            c["cache_config"]["cacheSizeMB"] = json!(to);
            changed = true;
        }
    }
    changed.then_some(config)
}

/// Every config under upstream's `test_configs/` either runs shrunk (its
/// report printed, nothing unknown) or is refused before running, the
/// message naming what is not supported, as the table above says: a file
/// that newly runs, newly fails, or is new makes this test fail. The
/// trace replay folders are copied first, so that the binary trace
/// upstream's `config_kvtrace_gen_binary.json` writes lands in the copy,
/// where `config_kvtrace_replay_binary.json` replays it.
#[test]
fn every_upstream_config_runs_shrunk_or_is_refused_by_name() {
    testenv::conformance_or_return!("cachebench/test_configs");
    let root = upstream("");
    let mut found = Vec::new();
    upstream_configs(&root, &mut found);
    let mut found: Vec<String> = found
        .iter()
        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    found.sort();
    let listed: Vec<String> = UPSTREAM_CONFIGS
        .iter()
        .map(|(f, _)| f.to_string())
        .collect();
    assert_eq!(found, listed, "the table and upstream's configs differ");
    let d = tempfile::tempdir().unwrap();
    let nvm = d.path().join("nvm");
    std::fs::create_dir(&nvm).unwrap();
    let mut copies: std::collections::BTreeMap<PathBuf, PathBuf> = Default::default();
    let mut wrong = Vec::new();
    for (name, expect) in UPSTREAM_CONFIGS {
        let file = root.join(name);
        let mut dir = file.parent().unwrap().to_path_buf();
        let has_trace = std::fs::read_dir(&dir)
            .unwrap()
            .any(|e| e.unwrap().path().extension().is_some_and(|x| x == "csv"));
        if has_trace {
            let n = copies.len();
            dir = copies
                .entry(dir.clone())
                .or_insert_with(|| {
                    let to = d.path().join(format!("copy{n}"));
                    std::fs::create_dir(&to).unwrap();
                    for e in std::fs::read_dir(&dir).unwrap() {
                        let p = e.unwrap().path();
                        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
                    }
                    to
                })
                .clone();
        }
        let cfg = d.path().join("config.json");
        let mut config = shrunk(&file, &dir, &nvm);
        let mut tries = 0;
        let o = loop {
            std::fs::write(&cfg, config.to_string()).unwrap();
            let mut c = rackbench(d.path());
            c.arg("cachebench")
                .arg("--json_test_config")
                .arg(&cfg)
                .args(["--progress", "0", "--timeout_seconds", "60"]);
            // Several instances need a stats file each (upstream's rule).
            if config.is_array() {
                c.args(["--progress_stats_file", "stats.log"]);
            }
            let o = c.output().unwrap();
            tries += 1;
            // CacheBench wants a slab per allocation class in every pool:
            // a cache shrunk below that gets the DRAM it needs (never more
            // than upstream's file asked for) and runs again.
            match grown(&file, &config, &text(&o.stderr)) {
                Some(c) if tries < 4 => config = c,
                _ => break o,
            }
        };
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        let got = match (o.status.code(), expect) {
            (Some(0), Expect::Ran)
                if out.contains("== Test Results ==")
                    || (config.is_array() && out.contains("== Aggregated Stats Across ")) =>
            {
                *expect
            }
            (Some(0), Expect::Converted) if !out.contains("== Test Results ==") => *expect,
            (Some(2), Expect::Refused(why)) if err.contains(why) => *expect,
            _ => {
                wrong.push(format!(
                    "{name}: expected {expect:?}, exit {:?}\n{}",
                    o.status.code(),
                    err.lines().last().unwrap_or_default()
                ));
                continue;
            }
        };
        // Nothing unknown: every key of upstream's files is known.
        assert!(!err.contains("unknown key"), "{name}: {err}");
        if got == Expect::Ran && name.contains("trace_replay/kvcache/config_kvtrace.json") {
            assert!(
                out.contains("== KVReplayGenerator Stats ==\nTotal Processed Samples: 0.00 million (parse error: 0)\n"),
                "{out}"
            );
        }
        if name.ends_with("config_kvtrace_replay_binary.json") {
            assert!(out.contains("== BinaryKVReplayGenerator Stats =="), "{out}");
            assert!(report(&o)["metrics"]["ops"].as_u64().unwrap() > 0);
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Keys that change what a run does take effect: `printNvmCounters` prints
/// navy's counters map after the allocator stats, `checkNvmCacheWarmUp`
/// reports the first NVM eviction, and in a replay `op_count` repeats a
/// line unless `ignoreOpCount` (CacheLib's kvcache traces: 198 lines).
#[test]
fn upstream_keys_take_effect() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("hybrid.json");
    std::fs::write(
        &cfg,
        r#"{"cache_config": {"cacheSizeMB": 16, "nvmCacheSizeMB": 64, "navyRegionSizeMB": 4,
            "printNvmCounters": true, "allocSizes": [1024, 4200]},
           "test_config": {"numOps": 30000, "numThreads": 2, "numKeys": 50000,
           "keySizeRange": [8, 16], "keySizeRangeProbability": [1.0],
           "valSizeRange": [500, 4000], "valSizeRangeProbability": [1.0],
           "getRatio": 0.5, "setRatio": 0.5, "checkNvmCacheWarmUp": true,
           "ttlSecsRange": [3600, 7200], "ttlSecsRangeProbability": [1.0]}}"#,
    )
    .unwrap();
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg("--json_test_config")
        .arg(&cfg)
        .args(["--progress", "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let map = out
        .find("== NVM Counters Map ==\n")
        .unwrap_or_else(|| panic!("{out}"));
    assert!(map < out.find("== Throughput").unwrap(), "{out}");
    assert!(out[map..].contains("\nnavy_bc_items  :  "), "{out}");
    assert!(
        out[map..].contains("\nnavy_device_bytes_written  :  "),
        "{out}"
    );
    assert!(
        text(&o.stderr).contains("NVM cache has been warmed up"),
        "{}",
        text(&o.stderr)
    );
    testenv::conformance_or_return!("cachebench/test_configs");
    let traces = upstream("trace_replay/kvcache");
    let ops = |ignore: bool| {
        let cfg = d.path().join("replay.json");
        std::fs::write(
            &cfg,
            format!(
                r#"{{"cache_config": {{"cacheSizeMB": 128}},
                   "test_config": {{"generator": "replay", "numOps": 100000, "numThreads": 3,
                   "ignoreOpCount": {ignore}, "configPath": "{}",
                   "traceFileNames": ["kv_traces_1.csv", "kv_traces_2.csv"]}}}}"#,
                traces.display()
            ),
        )
        .unwrap();
        let o = rackbench(d.path())
            .arg("cachebench")
            .arg("--json_test_config")
            .arg(&cfg)
            .args(["--progress", "0"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(
            text(&o.stdout).contains("Total Processed Samples: 0.00 million (parse error: 0)"),
            "{}",
            text(&o.stdout)
        );
        report(&o)["metrics"]["ops"].as_u64().unwrap()
    };
    assert_eq!(ops(true), 198);
    assert!(ops(false) > 198);
}

/// A hybrid run's over-time figures reach the store and the report page:
/// the stored metrics have a `series` of progress intervals (hit ratios,
/// NVM device latency) and `report html` draws them. The run is held to 3 s
/// by --timeout_seconds over far more operations than any machine does in
/// that time, so it has three 1 s intervals however fast the machine is.
#[test]
fn hybrid_series_is_stored_and_charted_on_the_report_page() {
    let d = tempfile::tempdir().unwrap();
    let nvm_dir = d.path().join("nvm");
    std::fs::create_dir(&nvm_dir).unwrap();
    let config = d.path().join("hybrid_long.json");
    let mini = include_str!("../../cachebench/configs/hybrid_mini.json");
    assert!(mini.contains("\"numOps\" : 100000,"));
    std::fs::write(
        &config,
        mini.replace("\"numOps\" : 100000,", "\"numOps\" : 50000000000,"),
    )
    .unwrap();
    let o = common::rackbench_stored(d.path())
        .args(["run", "cachebench_hybrid", "-i"])
        .arg(
            serde_json::json!({
                "config": config.display().to_string(),
                "nvm_path": nvm_dir.display().to_string(),
                "progress": "1",
                "extra_args": "--timeout_seconds 3",
            })
            .to_string(),
        )
        .output()
        .unwrap();
    // Stopped by the timeout, as upstream: exit 1, and the run is stored.
    stopped_by_timeout(&o);
    let run_id = common::run_id_of(&text(&o.stdout));
    let show = rackbench(d.path())
        .args(["results", "show", &run_id])
        .output()
        .unwrap();
    assert!(show.status.success(), "{}", text(&show.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let m = &rows[0]["metrics"];
    let series = m["series"].as_array().unwrap_or_else(|| panic!("{m}"));
    assert!(series.len() >= 2, "{series:?}");
    let mut last_t = 0.0;
    for p in series {
        let t = p["elapsed_secs"].as_f64().unwrap();
        assert!(t > last_t, "{series:?}");
        last_t = t;
        assert!(p["ops_per_sec"].as_f64().unwrap() > 0.0, "{p}");
        for key in ["hit_ratio_pct", "ram_hit_ratio_pct", "nvm_hit_ratio_pct"] {
            let v = p[key].as_f64().unwrap_or_else(|| panic!("{key} in {p}"));
            assert!((0.0..=100.0).contains(&v), "{p}");
        }
        // The NVM tier holds more than RAM: lookups go to the device.
        assert!(p["nvm_read_p99_us"].as_f64().is_some(), "{p}");
    }
    assert!(last_t <= m["elapsed_secs"].as_f64().unwrap() + 1.0, "{m}");

    let html = common::report_page(rackbench(d.path()), d.path());
    for kind in ["cachebench_hit_ratio_time", "cachebench_nvm_latency_time"] {
        assert!(
            html.contains(&format!(r#"data-kind="{kind}""#)),
            "no {kind} chart"
        );
    }
    assert!(html.contains("NVM device latency per progress interval"));
}

/// A block device's (major, minor).
fn dev_numbers(p: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let r = std::fs::metadata(p).unwrap().rdev();
    (
        ((r >> 8) & 0xfff) | ((r >> 32) & !0xfff),
        (r & 0xff) | ((r >> 12) & !0xff),
    )
}

/// A cgroup v1 blkio group, removed on drop (None with the reason printed
/// where the host has no writable blkio hierarchy, unless
/// RACKBENCH_REQUIRE_BLKIO is set).
struct BlkioGroup(PathBuf);

impl BlkioGroup {
    fn create(name: &str) -> Option<BlkioGroup> {
        let root = Path::new("/sys/fs/cgroup/blkio");
        let dir = root.join(format!("{name}-{}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) if dir.join("blkio.throttle.read_iops_device").exists() => Some(BlkioGroup(dir)),
            Ok(()) => {
                let _ = std::fs::remove_dir(&dir);
                testenv::skip("blkio", "the blkio hierarchy has no throttle files");
                None
            }
            Err(e) => {
                testenv::skip(
                    "blkio",
                    &format!(
                        "no writable cgroup v1 blkio hierarchy at {}: {e}",
                        root.display()
                    ),
                );
                None
            }
        }
    }

    /// Reads of `dev` by the group's processes: at most `iops` per second.
    fn throttle_reads(&self, dev: &Path, iops: u32) {
        let (ma, mi) = dev_numbers(dev);
        std::fs::write(
            self.0.join("blkio.throttle.read_iops_device"),
            format!("{ma}:{mi} {iops}"),
        )
        .unwrap();
    }

    /// `cmd` run inside the group (through `sh`, which joins it and execs),
    /// with `prefix` (e.g. `chrt`) before it.
    fn command(&self, prefix: &[&str], cmd: &Command) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "echo $$ > '{}' && exec \"$@\"",
                self.0.join("cgroup.procs").display()
            ))
            .arg("sh")
            .args(prefix)
            .arg(cmd.get_program())
            .args(cmd.get_args())
            .stdin(Stdio::null());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        if let Some(d) = cmd.get_current_dir() {
            c.current_dir(d);
        }
        c
    }
}

impl Drop for BlkioGroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A tracefs instance recording one block device's request issues and
/// completions (block_rq_issue, block_rq_complete), removed on drop (None
/// with the reason printed where tracefs cannot be used, unless
/// RACKBENCH_REQUIRE_TRACEFS is set).
struct BlockTrace(PathBuf);

impl BlockTrace {
    fn start(dev: &Path) -> Option<BlockTrace> {
        let base = Path::new("/sys/kernel/tracing");
        if !base.join("instances").exists() {
            let _ = Command::new("mount")
                .args(["-t", "tracefs", "nodev"])
                .arg(base)
                .status();
        }
        let dir = base
            .join("instances")
            .join(format!("rackbench-cachebench-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&dir) {
            testenv::skip("tracefs", &format!("no tracefs instance ({e})"));
            return None;
        }
        let (ma, mi) = dev_numbers(dev);
        let t = BlockTrace(dir);
        for ev in ["block_rq_issue", "block_rq_complete"] {
            let e = t.0.join("events/block").join(ev);
            // The kernel's dev_t: major << 20 | minor.
            std::fs::write(e.join("filter"), format!("dev == {}", (ma << 20) | mi)).unwrap();
            std::fs::write(e.join("enable"), "1").unwrap();
        }
        Some(t)
    }

    /// Milliseconds from issue to completion of each read request.
    fn read_latencies_ms(&self) -> Vec<f64> {
        let trace = std::fs::read_to_string(self.0.join("trace")).unwrap();
        let mut issued: std::collections::HashMap<String, std::collections::VecDeque<f64>> =
            Default::default();
        let mut out = Vec::new();
        for line in trace.lines().filter(|l| !l.starts_with('#')) {
            let Some((head, rest)) = line
                .split_once(" block_rq_issue: ")
                .map(|(h, r)| (h, (true, r)))
                .or_else(|| {
                    line.split_once(" block_rq_complete: ")
                        .map(|(h, r)| (h, (false, r)))
                })
            else {
                continue;
            };
            let (issue, rest) = rest;
            let at: f64 = head
                .trim_end()
                .trim_end_matches(':')
                .rsplit(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let f: Vec<&str> = rest.split_whitespace().collect();
            if !f[1].contains('R') {
                continue;
            }
            let Some(plus) = f.iter().position(|x| *x == "+") else {
                continue;
            };
            let sector = f[plus - 1].to_string();
            if issue {
                issued.entry(sector).or_default().push_back(at);
            } else if let Some(t0) = issued.get_mut(&sector).and_then(|q| q.pop_front()) {
                out.push((at - t0) * 1000.0);
            }
        }
        out
    }
}

impl Drop for BlockTrace {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("events/block/enable"), "0");
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A loop device over `backing` (a file or another block device) with
/// direct I/O to its backing, detached on drop.
fn loop_over(backing: &Path) -> Option<LoopDev> {
    let why = match Command::new("losetup")
        .args(["--find", "--show", "--direct-io=on"])
        .arg(backing)
        .output()
    {
        Ok(o) if o.status.success() => return Some(LoopDev(text(&o.stdout).trim().into())),
        Ok(o) => text(&o.stderr),
        Err(e) => e.to_string(),
    };
    testenv::skip("loop", &format!("no loop device ({why})"));
    None
}

/// The value at quantile `q` of sorted `v` (nearest rank).
fn at_quantile(v: &[f64], q: f64) -> f64 {
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// `NVM Read  Latency` on a slow device is the device's latency: the NVM
/// tier on a loop device whose reads wait in a blkio throttle (on the
/// loop device below it, so the wait is inside the upper device's
/// requests), the device's own per-request times from the block
/// tracepoints, and every printed percentile within 10% of the device's
/// (or 0.5 ms, for reads the throttle let through at once; a percentile
/// may fall one request either side). blk-throttle dispatches in 100 ms
/// slices: at 10 reads/s every read waits about 100 ms; at 100 reads/s
/// they average 10 ms, ten at once and then a wait.
#[test]
fn nvm_read_latency_is_the_slow_devices_own() {
    for (iops, secs) in [(10u32, 7u64), (100, 5)] {
        let d = tempfile::tempdir().unwrap();
        let img = d.path().join("slow.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let Some(lower) = LoopDev::attach_existing(&img) else {
            return;
        };
        let Some(upper) = loop_over(&lower.0) else {
            return;
        };
        let Some(group) = BlkioGroup::create("rackbench-slow-nvm") else {
            return;
        };
        let Some(trace) = BlockTrace::start(&upper.0) else {
            return;
        };
        group.throttle_reads(&lower.0, iops);
        let cfg = d.path().join("slow.json");
        std::fs::write(
            &cfg,
            serde_json::json!({
                "cache_config": {"cacheSizeMB": 16, "allocSizes": [9000],
                    "nvmCacheSizeMB": 48, "navyBigHashSizePct": 0, "navyRegionSizeMB": 1},
                "test_config": {"numOps": 100_000_000u64, "numThreads": 1, "numKeys": 3000,
                    "keySizeRange": [8, 16], "keySizeRangeProbability": [1.0],
                    "valSizeRange": [6000, 8000], "valSizeRangeProbability": [1.0],
                    "getRatio": 1.0, "enableLookaside": true}
            })
            .to_string(),
        )
        .unwrap();
        let mut run = rackbench(d.path());
        run.arg("cachebench")
            .arg(format!("--json_test_config={}", cfg.display()))
            .args([
                "--progress",
                "0",
                "--require_direct_io",
                "--timeout_seconds",
            ])
            .arg(secs.to_string())
            .arg("--nvm_cache_paths")
            .arg(&upper.0);
        // Real-time priority, so that a thread whose read completed runs at
        // once on a busy host (its time would otherwise include the wait
        // for a CPU, which the device's does not).
        let o = group
            .command(&["chrt", "--fifo", "10"], &run)
            .output()
            .unwrap();
        let out = text(&o.stdout);
        assert!(
            out.contains("== Test Results =="),
            "{}\n{out}",
            text(&o.stderr)
        );
        let mut dev = trace.read_latencies_ms();
        dev.sort_by(f64::total_cmp);
        let reads = report(&o)["metrics"]["nvm"]["device_read_latency_us"]["count"]
            .as_u64()
            .unwrap();
        assert!(dev.len() >= 20, "{iops}/s: {} device reads", dev.len());
        // The same reads (give or take a probe of the new device by
        // another process).
        assert!(
            (reads as usize).abs_diff(dev.len()) <= 2 + dev.len() / 50,
            "rackbench's {reads} reads against the device's {}",
            dev.len()
        );
        let mean = dev.iter().sum::<f64>() / dev.len() as f64;
        let want = 1000.0 / f64::from(iops);
        assert!(
            mean > want * 0.5 && mean < want * 1.3 && dev[dev.len() - 1] > 50.0,
            "{iops}/s: the device's reads took {mean:.1} ms on average, at most {:.1} ms",
            dev[dev.len() - 1]
        );
        let n = dev.len() as f64;
        for (pct, q) in [
            ("p50", 0.5),
            ("p90", 0.9),
            ("p99", 0.99),
            ("p999", 0.999),
            ("p100", 1.0),
        ] {
            let ours = latency_line(&out, "NVM Read  Latency", pct) / 1000.0;
            let (lo, hi) = (
                at_quantile(&dev, (q - 1.0 / n).max(0.0)),
                at_quantile(&dev, (q + 1.0 / n).min(1.0)),
            );
            eprintln!(
                "{iops} reads/s {pct}: printed {ours:.3} ms, the device's {:.3} ms ({} reads)",
                at_quantile(&dev, q),
                dev.len()
            );
            let slack = |v: f64| (v * 0.1).max(0.5);
            assert!(
                ours >= lo - slack(lo) && ours <= hi + slack(hi),
                "{iops}/s {pct}: printed {ours:.3} ms, the device's {lo:.3}..{hi:.3} ms\n{out}"
            );
        }
        if iops == 10 {
            // Every read waited about a slice: the figures are the wait, not
            // a clamp (they printed 2 us).
            assert!(
                latency_line(&out, "NVM Read  Latency", "p50") > 80_000.0,
                "{out}"
            );
        }
    }
}

/// `--timeout_seconds` and Ctrl-C end a paced run at once: with upstream's
/// `opDelayNs` pauses (here 3 s after every operation) and with
/// `opRatePerSec` (one operation per second over 4 threads), a 1 s timeout
/// ends the run within about a second, where the stop flag was only seen
/// between pauses (minutes) before.
#[test]
fn timeout_ends_a_paced_run_at_once() {
    let d = tempfile::tempdir().unwrap();
    for (name, pacing) in [
        ("delay", r#""opDelayNs": 3000000000, "opDelayBatch": 1"#),
        ("rate", r#""opRatePerSec": 1"#),
    ] {
        let cfg = d.path().join(format!("{name}.json"));
        std::fs::write(
            &cfg,
            format!(
                r#"{{"cache_config": {{"cacheSizeMB": 128}},
                   "test_config": {{"numOps": 1000, "numThreads": 4, "numKeys": 100,
                   "keySizeRange": [8, 9], "keySizeRangeProbability": [1.0],
                   "valSizeRange": [10, 20], "valSizeRangeProbability": [1.0],
                   "getRatio": 1, {pacing}}}}}"#
            ),
        )
        .unwrap();
        let t0 = std::time::Instant::now();
        let o = rackbench(d.path())
            .arg("cachebench")
            .arg(format!("--json_test_config={}", cfg.display()))
            .args(["--progress", "0", "--timeout_seconds", "1"])
            .output()
            .unwrap();
        let took = t0.elapsed().as_secs_f64();
        stopped_by_timeout(&o);
        assert!(took < 4.0, "{name}: a 1 s timeout took {took:.1} s");
        // Ctrl-C, likewise: the run ends within a second of the signal.
        let stats = d.path().join(format!("{name}.log"));
        let child = rackbench(d.path())
            .arg("cachebench")
            .arg(format!("--json_test_config={}", cfg.display()))
            .args(["--progress", "0", "--progress_stats_file"])
            .arg(&stats)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The stats file's header is written as the run starts.
        let t = std::time::Instant::now();
        while std::fs::metadata(&stats).map_or(0, |m| m.len()) == 0 {
            assert!(t.elapsed().as_secs() < 60, "{name}: the run never started");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let t = std::time::Instant::now();
        let o = child.wait_with_output().unwrap();
        let took = t.elapsed().as_secs_f64();
        assert_eq!(
            o.status.code(),
            Some(130),
            "{name}: {}\n{}",
            text(&o.stderr),
            text(&o.stdout)
        );
        assert_eq!(report(&o)["metrics"]["interrupted"], true);
        assert!(took < 1.0, "{name}: Ctrl-C took {took:.2} s to end the run");
    }
}

/// `piecewise-replay` on a CDN trace in upstream's format (written here):
/// objects of 1 KB to 300 KB, each requested twice, so the second pass is
/// served from the cache piece by piece; the stats block as upstream's.
/// And `block-replay` on a block trace in upstream's format: chunked gets
/// and puts, with its own block.
#[test]
fn piecewise_and_block_replays_run_with_their_stats() {
    let d = tempfile::tempdir().unwrap();
    let mut trace = String::from(
        "timestamp,cacheKey,OpType,objectSize,responseSize,responseHeaderSize,rangeStart,rangeEnd,TTL,SamplingRate,cache_hit,item_value\n",
    );
    for pass in 0..2 {
        for i in 0..40u64 {
            let size = 1000 + i * 7500;
            trace.push_str(&format!(
                "{},obj{i},1,{size},{},200,-1,-1,3600,1,{pass},\n",
                1_700_000_000_000u64 + pass * 1000 + i,
                size + 200
            ));
        }
    }
    std::fs::write(d.path().join("cdn.csv"), trace).unwrap();
    std::fs::write(
        d.path().join("piecewise.json"),
        r#"{"cache_config": {"cacheSizeMB": 256},
            "test_config": {"generator": "piecewise-replay", "numOps": 100000, "numThreads": 1,
                            "traceFileName": "cdn.csv"}}"#,
    )
    .unwrap();
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!(
            "--json_test_config={}",
            d.path().join("piecewise.json").display()
        ))
        .args(["--progress", "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    testenv::assert_lines_in_order(
        "== Throughput Stats ==\n\n== PieceWiseReplayGenerator Stats ==\n= Overall stats =\n\
         Total Processed Samples: 0.00 million\n= Benchmark stats =\n= Request Latency =\nFinished!",
        &out,
    );
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in\n{out}"))
            .to_string()
    };
    // 80 requests, the second 40 whole hits: 50% of objects.
    let objects = line("objectGet   :");
    assert!(objects.contains("objectGet   :         80,"), "{objects}");
    assert!(
        objects.contains("success :  50.00%, full success:  50.00%"),
        "{objects}"
    );
    assert!(line("getBodyBytes:").contains("GB/s, success : "), "{out}");
    assert!(line("Total Request Latency p50").ends_with(" us"), "{out}");

    // block-replay: 8 requests of 300 KB at offset 0 of one block (3
    // chunks of 128 KB each), then the same again, the file read twice.
    let mut trace = String::from(
        "op_time,block_id,block_id_size,io_size,io_offset,user_name,user_namespace,op_name,op_count,host_name,rs_shard_id\n",
    );
    for pass in 0..2 {
        for b in 0..8 {
            trace.push_str(&format!(
                "{},blk{b},10,300000,0,1,2,getChunkData.Permanent,1,3,5\n",
                1702511878 + pass
            ));
        }
    }
    std::fs::write(d.path().join("block.csv"), trace).unwrap();
    std::fs::write(
        d.path().join("block.json"),
        r#"{"cache_config": {"cacheSizeMB": 256},
            "test_config": {"generator": "block-replay", "numOps": 100000, "numThreads": 2,
                            "traceFileNames": ["block.csv", "block.csv"]}}"#,
    )
    .unwrap();
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!(
            "--json_test_config={}",
            d.path().join("block.json").display()
        ))
        .args(["--progress", "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("== BlockChunkReplayGenerator Stats =="),
        "{out}"
    );
    assert!(!out.contains("getBodyBytes"), "{out}");
    // 32 requests (the file twice) of 8 keys: a key's first request misses
    // and stores its 3 chunks, the other 24 are whole hits. (As upstream,
    // a first request counts as a partial hit: its first chunk's miss is
    // recorded as "the chunk before", none.)
    let objects = out
        .lines()
        .find(|l| l.starts_with("objectGet   :"))
        .unwrap();
    assert!(objects.contains("objectGet   :         32,"), "{objects}");
    assert!(
        objects.contains("success : 100.00%, full success:  75.00%"),
        "{objects}"
    );
}
