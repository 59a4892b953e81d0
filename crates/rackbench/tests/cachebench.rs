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

#[test]
fn mini_job_prints_upstream_report_and_metrics() {
    let d = tempfile::tempdir().unwrap();
    let o = rackbench(d.path())
        .args(["run", "cachebench_mini"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for line in [
        "===JSON Config===",
        "Welcome to OSS version of cachebench",
        "Created 20,000 keys in 0.00 mins",
        "Generating 0.10M sampled accesses",
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
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("Total 3.20M ops to be run"), "{out}");
    assert!(out.contains("M ops completed. Hit Ratio"), "{out}");
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
        r#"{"cache_config": {"cacheSizeMB": 64}, "test_config": {"numOps": 10, "numThreads": 1, "numKeys": 10,
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
/// report, and the metrics sum them.
#[test]
fn multi_instance_configs_sum_their_instances() {
    let d = tempfile::tempdir().unwrap();
    let one = r#"{"cache_config": {"cacheSizeMB": 16}, "test_config": {"numOps": 5000, "numThreads": 1,
        "numKeys": 1000, "keySizeRange": [8, 16], "keySizeRangeProbability": [1.0],
        "valSizeRange": [100, 200], "valSizeRangeProbability": [1.0], "getRatio": 0.5, "setRatio": 0.5}}"#;
    let cfg = d.path().join("multi.json");
    std::fs::write(&cfg, format!("[{one}, {one}]")).unwrap();
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg(format!("--json_test_config={}", cfg.display()))
        .args(["--progress", "0", "--report_api_latency"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    // Each instance's report, then the aggregate.
    assert_eq!(out.matches("== Test Results ==").count(), 3, "{out}");
    let agg = out
        .split("== Aggregated over 2 instances ==")
        .nth(1)
        .unwrap();
    assert!(agg.contains("Total Ops : 0.01 million"), "{agg}");
    assert!(agg.contains("Fraction of pool 1 used"), "{agg}");
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
    let out = text(&o.stdout);
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
        r#"{"cache_config": {"cacheSizeMB": 64, "nvmCacheSizeMB": 1000000000, "navyBigHashSizePct": 0},
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
    assert!(o.status.success(), "{}", text(&o.stderr));
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
        r#"{"cache_config": {"cacheSizeMB": 64, "poolRebalanceIntervalSec": 1,
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
    assert!(o.status.success(), "{}", text(&o.stderr));
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
    assert!(o.status.success(), "{}", text(&o.stderr));
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
    assert!(log.contains("M ops completed. Hit Ratio"), "{log}");
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
    // The results close the file, as on stdout.
    let results = &out[out.find("== Test Results ==").unwrap()..];
    let results = &results[..results.trim_end().rfind('\n').unwrap() + 1];
    assert!(log.ends_with(results), "file:\n{log}\nstdout:\n{results}");
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
    let config = |mb: u64| {
        format!(
            r#"{{"cache_config": {{"cacheSizeMB": 16, "nvmCacheSizeMB": {mb}, "navyRegionSizeMB": 4,
                "navyBigHashSizePct": 0}},
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
    std::fs::write(&cfg, format!("[{}, {}]", config(16), config(16))).unwrap();
    let o = rackbench(d.path())
        .arg("cachebench")
        .arg("--json_test_config")
        .arg(&cfg)
        .args(["--progress", "0", "--nvm_cache_paths"])
        .arg(&shared)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    let files: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("NVM: 16 MiB on file ")?.split(", ").next())
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
