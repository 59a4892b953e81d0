//! resctl through the binary: hashd on a small footprint with its params,
//! report and log files, live params reload, and bad input.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

mod common;

use common::{assert_reprints, rackbench, rackbench_stored, run_id_of, text};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn hashd_runs_writes_its_files_and_reloads_params() {
    let d = tempfile::tempdir().unwrap();
    let params = d.path().join("params.json");
    let report = d.path().join("report.json");
    let child = rackbench(d.path())
        .args(["resctl", "hashd", "-t"])
        .arg(d.path().join("tf"))
        .args(["-s", "256M", "-i", "1", "--duration", "8", "-p"])
        .arg(&params)
        .arg("-r")
        .arg(&report)
        .arg("-l")
        .arg(d.path().join("log"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the run has started, change a param.
    for _ in 0..200 {
        if report.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(report.exists(), "no report written");
    let p = std::fs::read_to_string(&params).unwrap();
    assert!(p.starts_with("// "), "{p}");
    std::fs::write(
        &params,
        p.replace("\"rps_target\": 65536", "\"rps_target\": 40"),
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(err.contains("Populating "), "{err}");
    assert!(err.contains("Reloaded params file"), "{err}");
    let status: Vec<&str> = out.lines().filter(|l| l.starts_with("p50:")).collect();
    assert!(status.len() >= 5, "{out}");
    assert!(
        status[0].contains(" rps:") && status[0].contains(" con:"),
        "{out}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["phase"], "Running");
    assert!(r["lat"]["p95"].is_number(), "{r}");
    let log = std::fs::read_to_string(d.path().join("log/rd-hashd.log")).unwrap();
    let first = log.lines().next().unwrap();
    assert_eq!(first.split(' ').nth(2).unwrap().len(), 40, "{first}");
    let m: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let m = &m["metrics"];
    assert!(m["nr_done"].as_u64().unwrap() > 20, "{m}");
    assert_eq!(m["testfiles_created"], 2, "{m}");
    // Test files exist in rd-hashd's layout.
    assert!(d.path().join("tf/rdh-0000/rdh-0000001").exists());
}

#[test]
fn hashd_bad_input_is_refused_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let o = rackbench(d.path())
        .args(["resctl", "hashd", "-s", "64M"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("expected -t/--testfiles DIR"),
        "{}",
        text(&o.stderr)
    );

    let params = d.path().join("params.json");
    std::fs::write(&params, "{\n  \"lat_targt\": 0.05\n}\n").unwrap();
    let o = rackbench(d.path())
        .args([
            "resctl",
            "hashd",
            "-t",
            "tf",
            "-s",
            "64M",
            "--duration",
            "1",
            "-p",
        ])
        .arg(&params)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("params.json:2:"), "{err}");
    assert!(err.contains("lat_targt"), "{err}");

    let o = rackbench(d.path())
        .args(["resctl", "hashd", "-t", "tf", "-s", "lots"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("-s/--size"), "{}", text(&o.stderr));
}

/// `--bench-test`: the rps_max search then the memory search through the
/// binary (short windows, at most two rps_max rounds, one memory probe per
/// stage): the results are saved in the params file with the other params
/// kept.
#[test]
fn hashd_bench_saves_rps_max() {
    let d = tempfile::tempdir().unwrap();
    let params = d.path().join("params.json");
    std::fs::write(&params, "{\n  \"chunk_pages\": 20\n}\n").unwrap();
    let o = rackbench(d.path())
        .args(["resctl", "hashd", "-t"])
        .arg(d.path().join("tf"))
        .args(["-s", "128M", "-i", "0", "--bench-test", "-p"])
        .arg(&params)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("Bench results: memory "), "{err}");
    assert!(err.contains("/3] lat:"), "{err}");
    assert!(err.contains("mem-up mem_frac=1.000: rps "), "{err}");
    assert!(err.contains("mem-refine mem_frac="), "{err}");
    let p = std::fs::read_to_string(&params).unwrap();
    let p: serde_json::Value = serde_json::from_str(
        &p.lines()
            .filter(|l| !l.starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    assert!(p["rps_max"].as_u64().unwrap() > 0, "{p}");
    assert_eq!(p["chunk_pages"], 20, "the other params are kept");
    assert_eq!(
        p["rps_target"], 65536,
        "the bench's own settings are not saved"
    );
    let out = text(&o.stdout);
    let m: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(m["metrics"]["rps_max"], p["rps_max"]);
    assert_eq!(m["metrics"]["mem_frac"], p["mem_frac"]);
    let probes = m["metrics"]["mem_probes"].as_array().unwrap();
    assert_eq!(probes.last().unwrap()["stage"], "mem-refine", "{probes:?}");
    // A refinement that fit is what is saved; one that missed (a slow or
    // loaded machine) ends the test-mode search at the largest fraction
    // seen to fit, or the refinement's floor.
    let last = probes.last().unwrap();
    let saved = p["mem_frac"].as_f64().unwrap();
    let rps_max = p["rps_max"].as_f64().unwrap();
    let err = (last["rps"].as_f64().unwrap() - rps_max) / rps_max;
    if err >= -0.075 {
        assert_eq!(last["mem_frac"], p["mem_frac"], "{probes:?}");
    } else {
        // Not the missed refinement's own fraction, unless an earlier probe
        // fit at that same fraction (mem-up at 1.0, then a refinement at
        // 1.0 that missed on a loaded machine).
        assert!(saved > 0.0 && saved <= 1.0, "{p}");
        let fit_at_saved = probes[..probes.len() - 1]
            .iter()
            .any(|x| x["mem_frac"].as_f64() == Some(saved));
        assert!(
            last["mem_frac"].as_f64() != Some(saved) || fit_at_saved,
            "{probes:?}"
        );
    }
}

/// `--bench-mem` alone needs rps_max in the params file.
#[test]
fn hashd_bench_mem_needs_rps_max() {
    let d = tempfile::tempdir().unwrap();
    let o = rackbench(d.path())
        .args([
            "resctl",
            "hashd",
            "-t",
            "tf",
            "-s",
            "64M",
            "--bench-mem",
            "-p",
        ])
        .arg(d.path().join("params.json"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("--bench-mem needs rps_max"),
        "{}",
        text(&o.stderr)
    );
}

/// True when this process may create cgroup1/cgroup2 groups (root and a
/// writable memory hierarchy); with RACKBENCH_REQUIRE_CGROUP=1 a host
/// without them fails the test instead of skipping it.
fn cgroups_writable() -> bool {
    // SAFETY: getuid has no preconditions.
    let root = unsafe { libc::getuid() } == 0;
    let ok = root
        && (std::path::Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists()
            || std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
                .is_ok_and(|c| c.contains("memory")));
    if !ok {
        testenv::skip(
            "cgroup",
            "needs root and a writable memory cgroup hierarchy",
        );
    }
    ok
}

/// Held by the tests that add swap or need the host without it.
static SWAP_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A swap file, enabled while this lives.
struct SwapFile(std::path::PathBuf);

impl SwapFile {
    /// `size` bytes in `dir`; `None` (the test skips) when swapon is not
    /// allowed here, unless RACKBENCH_REQUIRE_SWAPON=1.
    fn enable(dir: &std::path::Path, size: u64) -> Option<SwapFile> {
        let path = dir.join("swap");
        let f = std::fs::File::create(&path).unwrap();
        // A swap file needs its blocks allocated; fallocate does it without
        // writing (zeros written here would still be flushing to the disk
        // while the bench measures it).
        // SAFETY: fallocate on a file descriptor we own.
        let r = unsafe {
            libc::fallocate(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
                0,
                size as libc::off_t,
            )
        };
        assert_eq!(
            r,
            0,
            "fallocate {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
        drop(f);
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let ok = |cmd: &str| {
            std::process::Command::new(cmd)
                .arg(&path)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if ok("mkswap") && ok("swapon") {
            return Some(SwapFile(path));
        }
        testenv::skip(
            "swapon",
            &format!("mkswap/swapon failed on {}", path.display()),
        );
        None
    }
}

impl Drop for SwapFile {
    fn drop(&mut self) {
        let _ = std::process::Command::new("swapoff").arg(&self.0).status();
    }
}

/// True when the host has no swap of its own (tests add theirs under
/// SWAP_LOCK, which the caller holds).
fn host_without_swap() -> bool {
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    let none = swaps.lines().skip(1).all(|l| l.trim().is_empty());
    if !none {
        testenv::skip("noswap", "the host has swap of its own (/proc/swaps)");
    }
    none
}

/// hashd-params holds hashd to a memory limit on its own cgroup. On a host
/// without swap and said to have 1G (`--mem-avail 1G`, profile 1: share
/// 512M), the limit is 1G less 128M of slack (not the 448M target, which
/// would only get hashd killed): while the bench runs, hashd is in
/// `rackbench-PID/hashd-params` under that limit; the bench completes and
/// the cgroup is gone afterwards.
#[test]
fn resctl_bench_hashd_params_holds_hashd_to_its_memory_limit() {
    if !cgroups_writable() {
        return;
    }
    let _swap = SWAP_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !host_without_swap() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let result = d.path().join("result.json");
    // rps-max given: only the memory search runs.
    let mut child = resctl_test_run(
        d.path(),
        &result,
        &["--mem-avail", "1G"],
        "hashd-params:rps-max=20",
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let pid = child.id();
    let groups = [
        format!("/sys/fs/cgroup/memory/rackbench-{pid}"),
        format!("/sys/fs/cgroup/rackbench-{pid}"),
    ];
    // hashd in the cgroup, and the cgroup's limit, as seen while it runs.
    let mut seen = None;
    while child.try_wait().unwrap().is_none() && seen.is_none() {
        for g in &groups {
            let dir = std::path::Path::new(g).join("hashd-params");
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            let limit = std::fs::read_to_string(dir.join("memory.limit_in_bytes"))
                .or_else(|_| std::fs::read_to_string(dir.join("memory.max")))
                .unwrap_or_default();
            // What runs there: the child's command line (read now, while
            // it lives).
            let cmdline = procs
                .split_whitespace()
                .filter_map(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .collect::<Vec<_>>()
                .join("\n");
            if !cmdline.is_empty() && !limit.trim().is_empty() {
                seen = Some((cmdline, limit.trim().to_string()));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let (cmdline, limit) = seen.unwrap_or_else(|| panic!("hashd never seen in its cgroup\n{err}"));
    assert_eq!(limit, (896u64 << 20).to_string(), "{err}");
    assert!(
        cmdline.contains(" hashd ") && cmdline.contains("--bench-mem"),
        "{cmdline}"
    );
    assert!(
        err.contains("hashd-params: hashd held to 896M (no swap, so not the profile's target"),
        "{err}"
    );
    for g in &groups {
        assert!(!std::path::Path::new(g).exists(), "cgroup left: {g}");
    }
    assert_eq!(journal(&result)[0]["record"]["rps_max"], 20);
}

/// storage in `--test` form with a 1.5G swap file beside the scratch
/// directory: hashd, held to the 1G profile's 512M share by its cgroup,
/// runs its memory search twice at a fixed rate with fake CPU load (half
/// of what a first loop measured it serving here); the
/// footprint it sustains is larger than its memory (swap took the rest),
/// the factor is size over usage, and the text has the offloading line.
#[test]
fn resctl_bench_storage_measures_offloading_with_a_swap_file() {
    if !cgroups_writable() {
        return;
    }
    let _swap = SWAP_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let Some(_swapfile) = SwapFile::enable(d.path(), 1536 << 20) else {
        return;
    };
    // The rate comes from this machine: one loop at a rate hashd may not
    // reach here measures what it serves under the share (with fake CPU
    // load the rate is bounded by paging to the scratch device); the
    // measured run asks for half of that, so hashd can hold a footprint
    // beyond its memory at it.
    let probe = d.path().join("probe.json");
    let o = resctl_test_run(
        d.path(),
        &probe,
        &["--mem-profile", "1"],
        "storage:loops=1,rps-max=60",
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let served = journal(&probe)[0]["record"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["probes"].as_array().unwrap().iter())
        .filter_map(|p| p["rps"].as_f64())
        .fold(0.0f64, f64::max);
    assert!(served > 0.0, "hashd served nothing in the probe run");
    let rps = ((served / 2.0).floor() as u64).max(1);
    eprintln!("storage: hashd served {served:.1} rps under the share here; the run asks {rps}");
    let result = d.path().join("result.json");
    let spec = format!("storage:loops=2,rps-max={rps}");
    let o = resctl_test_run(d.path(), &result, &["--mem-profile", "1"], &spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = o.id();
    let o = o.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let j = journal(&result);
    assert_eq!(j.len(), 1, "{j:?}");
    let rec = &j[0]["record"];
    let share = rec["mem_share"].as_u64().unwrap();
    assert_eq!(share, 512 << 20);
    let runs = rec["runs"].as_array().unwrap();
    let kept: Vec<_> = runs.iter().filter(|r| r["used"] == true).collect();
    assert_eq!(kept.len(), 2, "{rec}");
    for r in &kept {
        let (usage, size) = (r["usage"].as_u64().unwrap(), r["size"].as_u64().unwrap());
        // The cgroup held hashd near its share, and the footprint it
        // served went beyond it.
        assert!(
            usage <= share + (share / 10) && usage >= share - share / 10,
            "{r}"
        );
        assert!(size >= share, "{r}");
        // hashd served requests in each probe of its search.
        let probes = r["probes"].as_array().unwrap();
        assert!(!probes.is_empty(), "{r}");
        assert!(
            probes.iter().all(|p| p["rps"].as_f64().unwrap() > 0.0),
            "{r}"
        );
    }
    assert!(
        runs.iter().any(|r| r["swap_peak"].as_u64().unwrap() > 0),
        "{rec}"
    );
    let res = &j[0]["result"];
    let f = res["mem_offload_factor"].as_f64().unwrap();
    let expect = res["mem_size_mean"].as_f64().unwrap() / res["mem_usage_mean"].as_f64().unwrap();
    assert!(f >= 1.0 && (f - expect).abs() < 1e-9, "{res}");
    let out = text(&o.stdout);
    assert!(
        out.contains(&format!("[storage {} result] ", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    assert!(
        out.contains(&format!("Memory offloading: factor={f:.3}@1 ")),
        "{out}"
    );
    assert!(out.contains("fake_cpu_load"), "{out}");
    // Upstream's line with two loops, and the root's tables in `format`.
    assert!(
        out.contains(" usage/stdev=") && out.contains(" missing="),
        "{out}"
    );
    assert!(
        runs.iter().all(|r| r["samples"].as_u64().unwrap() > 0),
        "{rec}"
    );
    let f = rackbench(d.path())
        .args(["resctl", "-r"])
        .arg(&result)
        .args(["format", "storage"])
        .output()
        .unwrap();
    let full = text(&f.stdout);
    assert!(full.contains("Resource stat:\n\n[ALL] "), "{full}");
    assert!(full.contains("\n[FINAL] "), "{full}");
    let cpu = full
        .lines()
        .find(|l| l.starts_with("cpu% "))
        .unwrap_or_default()
        .to_string();
    assert!(
        !cpu.trim_start_matches("cpu%").trim().starts_with("- "),
        "{full}"
    );
    let left: Vec<String> = std::fs::read_dir("/sys/fs/cgroup/memory")
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n == &format!("rackbench-{pid}"))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `rackbench resctl --test [EXTRA] -d DIR -r RESULT run SPEC`, in DIR.
fn resctl_test_run(
    dir: &std::path::Path,
    result: &std::path::Path,
    extra: &[&str],
    spec: &str,
) -> Command {
    let mut c = rackbench_stored(dir);
    c.args(["resctl", "--test"])
        .args(extra)
        .arg("-d")
        .arg(dir)
        .arg("-r")
        .arg(result)
        .args(["run", spec]);
    c
}

fn journal(p: &std::path::Path) -> Vec<serde_json::Value> {
    serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(p).unwrap())
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The whole protection path in `--test` form: hashd-params runs first by
/// itself, hashd runs in workload.slice, the hog in system.slice with a
/// 96M cap so that the kernel kills it; the scenario ends, the results are
/// kept, the text has upstream's sections, a re-run skips both jobs, the
/// resctl_mini job on the same journal stores the figures the report page
/// draws, and the cgroups are gone afterwards.
#[test]
fn resctl_bench_protection_runs_end_to_end() {
    if !cgroups_writable() {
        return;
    }
    // The hog must meet its cap without swap (the storage test adds some).
    let _swap = SWAP_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let result = d.path().join("result.json");
    let run = || {
        resctl_test_run(
            d.path(),
            &result,
            &[],
            // resctl_mini's spec, so the job below finds both jobs done.
            "protection::scenario=mem-hog,loops=1",
        )
        .env("RACKBENCH_RESCTL_HOG_CAP", "96M")
        .output()
        .unwrap()
    };
    let o = run();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("protection needs hashd-params: running it first"),
        "{err}"
    );
    let j = journal(&result);
    assert_eq!(j.len(), 2, "{j:?}");
    assert_eq!(j[0]["spec"]["kind"], "hashd-params");
    assert!(j[0]["record"]["rps_max"].as_u64().unwrap() > 0);
    assert_eq!(j[1]["spec"]["kind"], "protection");
    let run0 = &j[1]["record"]["scenarios"][0]["runs"][0];
    assert!(
        run0["end"]
            .as_str()
            .unwrap()
            .contains("killed by the kernel (OOM"),
        "{run0}"
    );
    assert!(j[1]["sysinfo"]["cgroup_backend"].as_str().is_some());
    // IO latency per IO from the block tracepoints: each second with IO
    // has upstream's latency percentiles, not only a mean.
    let controls: Vec<&str> = j[1]["record"]["controls"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.as_str())
        .collect();
    if controls
        .iter()
        .any(|c| c.starts_with("IO latency: per IO from the block tracepoints"))
    {
        let mut seconds_with_io = 0;
        for s in j[1]["record"]["samples"][0].as_array().unwrap() {
            for dir in s["iolat"].as_array().into_iter().flatten() {
                if dir.as_object().is_some_and(|m| !m.is_empty()) {
                    seconds_with_io += 1;
                    let (p50, p99, max) = (
                        dir["50"].as_f64().unwrap(),
                        dir["99"].as_f64().unwrap(),
                        dir["100"].as_f64().unwrap(),
                    );
                    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{dir}");
                }
            }
        }
        eprintln!("seconds with traced IO: {seconds_with_io}");
    } else {
        testenv::skip("tracefs", &format!("no per-IO latency: {controls:?}"));
    }
    let isol = j[1]["result"]["combined"]["isol"]["mean"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&isol), "{isol}");
    let out = text(&o.stdout);
    assert!(
        out.contains(&format!(
            "[protection {} result] ",
            env!("CARGO_PKG_VERSION")
        )),
        "{out}"
    );
    assert!(
        out.contains("Memory Hog Summary\n=================="),
        "{out}"
    );
    assert!(out.contains("\nResult: isol="), "{out}");
    assert!(out.contains("hashd params: hash_size="), "{out}");
    // The stored run prints both summaries again.
    assert_reprints(d.path(), &run_id_of(&out), &out);

    // Everything is done: a re-run prints the summaries and runs nothing.
    let o = run();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("already completed"), "{err}");
    assert!(!err.contains("waiting for hashd"), "{err}");
    assert_eq!(journal(&result), j, "the journal is unchanged");

    // The full format has the scenario, its tables and how the hog ended.
    let o = rackbench(d.path())
        .args(["resctl", "-r"])
        .arg(&result)
        .args(["format", "protection"])
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains("Scenario 1/1 - Memory Hog"), "{out}");
    assert!(out.contains("Params: loops=1 load=1 speed=2x"), "{out}");
    assert!(out.contains("Hog ends: killed by the kernel"), "{out}");
    assert!(out.contains("Slice resource stat:"), "{out}");
    assert!(out.contains("[WORKLOAD]"), "{out}");
    assert!(
        !out.contains("hashd-params result"),
        "only the matching job"
    );

    // `rackbench run resctl_mini` on the same journal stores the finished
    // jobs' figures without running them again (its spec is the one above),
    // and the report page draws them (`resctl_protection`).
    let vars = serde_json::json!({
        "result_file": result,
        "scratch": d.path(),
    });
    let o = rackbench_stored(d.path())
        .args(["run", "resctl_mini", "-i", &vars.to_string()])
        .env("RACKBENCH_RESCTL_HOG_CAP", "96M")
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("already completed"), "{err}");
    let out = text(&o.stdout);
    let last = out.trim_end().lines().last().unwrap_or_default();
    let report: serde_json::Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("no report on the last line ({e}):\n{out}"));
    let m = &report["metrics"];
    let s = m["protection_scenarios"].as_array().unwrap();
    assert_eq!(s.len(), 1, "{m}");
    assert_eq!(
        (s[0]["load"].as_f64(), s[0]["loops"].as_u64()),
        (Some(1.0), Some(1)),
        "{m}"
    );
    assert_eq!(s[0]["speed"], "2x", "{m}");
    // One scenario: its isolation is the combined one (which reads 0 when
    // no sample measured it; the scenario's is then null).
    match s[0]["isol_pct"].as_f64() {
        Some(isol) => assert_eq!(Some(isol), m["protection_isol_pct"].as_f64(), "{m}"),
        None => assert_eq!(m["protection_isol_pct"].as_f64(), Some(0.0), "{m}"),
    }
    assert_eq!(s[0]["work_csv_pct"], m["protection_work_csv_pct"], "{m}");

    // One scenario is one x: the page lists its figures and draws no
    // chart of it (the charts of several: resctl's charts.rs).
    let html = common::report_page(rackbench_stored(d.path()), d.path());
    assert!(
        !html.contains(r#"data-kind="resctl_protection""#),
        "a chart of one scenario"
    );
    assert!(
        html.contains("<th>protection_scenarios[0].load</th>"),
        "no scenario figures"
    );

    // The bench's cgroups are removed: none is left of a process that has
    // ended (tests running beside this one have theirs while they run).
    let left: Vec<_> = std::fs::read_dir("/sys/fs/cgroup/memory")
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.strip_prefix("rackbench-")
                        .and_then(|p| p.parse::<u32>().ok())
                        .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// hashd killed (SIGKILL) mid-run fails the job with the reason; the journal keeps
/// the completed hashd-params and the incomplete protection entry. The
/// run is passive for memory and IO, which its controls say.
#[test]
fn resctl_bench_fails_cleanly_when_hashd_dies() {
    if !cgroups_writable() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let result = d.path().join("result.json.gz");
    let knobs = r#"[{"spec": {"kind": "hashd-params", "id": null, "passive": null, "props": [{}]},
        "period": [1, 2], "sysinfo": {}, "result": true,
        "record": {"hash_size": 1258291, "rps_max": 200, "mem_size": 268435456,
                   "mem_frac": 1.0, "chunk_pages": 25, "fake_cpu_load": false}}]"#;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, knobs.as_bytes()).unwrap();
    std::fs::write(&result, gz.finish().unwrap()).unwrap();
    let run = resctl_test_run(
        d.path(),
        &result,
        &[],
        "protection:passive=mem/io:scenario=mem-hog,loops=1",
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Once hashd runs (found by its test files under our directory), give
    // it 3 s, then SIGKILL it.
    let pattern = format!("hashd -t {}", d.path().display());
    let t0 = Instant::now();
    let pid = loop {
        let o = Command::new("pgrep")
            .args(["-f", &pattern])
            .output()
            .unwrap();
        let pids = text(&o.stdout);
        if let Some(p) = pids.split_whitespace().next() {
            break p.to_string();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "hashd never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_secs(3));
    let k = Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    assert!(k.success());
    let t1 = Instant::now();
    let o = run.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(
        t1.elapsed() < Duration::from_secs(60),
        "the bench took {:?} to stop after hashd was killed: {err}",
        t1.elapsed()
    );
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("stopped: hashd exited"), "{err}");
    assert!(err.contains("signal: 9"), "{err}");
    // passive=mem/io: hashd unprotected, the hog held only below the
    // whole memory, IO control untouched.
    assert!(
        err.contains("passive=mem: workload memory.low not set"),
        "{err}"
    );
    assert!(err.contains("hog safety cap="), "{err}");
    assert!(err.contains("passive=io: IO control left"), "{err}");
    let mut s = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&result).unwrap()),
        &mut s,
    )
    .unwrap();
    let j: Vec<serde_json::Value> = serde_json::from_str(&s).unwrap();
    assert_eq!(j.len(), 2);
    assert_eq!(j[0]["record"]["rps_max"], 200, "the finished job is kept");
    assert!(j[1]["result"].is_null(), "{}", j[1]);
    assert_eq!(j[1]["spec"]["kind"], "protection");
}

/// Bad input: each refused with a message naming the problem, and a
/// result file that is not a journal is left untouched.
#[test]
fn resctl_bench_refuses_bad_input() {
    let d = tempfile::tempdir().unwrap();
    let res = d.path().join("r.json");
    let go = |args: &[&str]| {
        let o = rackbench(d.path())
            .args(["resctl", "-d"])
            .arg(d.path())
            .arg("-r")
            .arg(&res)
            .args(args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        text(&o.stderr)
    };
    assert!(go(&["run", "protektion"]).contains("unknown bench kind \"protektion\""));
    let e = go(&["run", "protection::scenario=mem-hog,lod=1"]);
    assert!(
        e.contains("lod") && e.contains("did you mean \"load\""),
        "{e}"
    );
    assert!(go(&["run", "hashd-params:rps-max=fast"]).contains("rps-max=\"fast\""));
    assert!(go(&["run", "protection::scenario=mem-hog,speed=9x"]).contains("9x"));
    assert!(go(&["run"]).contains("no job spec"));
    assert!(go(&["frobnicate"]).contains("unknown command \"frobnicate\""));
    // Upstream's global options: a misspelled one names the right one; an
    // args file and a bad value are refused by name.
    let e = go(&["--mem-avial", "3G", "run", "hashd-params"]);
    assert!(e.contains("--mem-avail"), "{e}");
    let args = d.path().join("args.json");
    std::fs::write(&args, "{\"mem_proflie\": 4}").unwrap();
    let e = go(&["-a", args.to_str().unwrap(), "run", "hashd-params"]);
    assert!(
        e.contains("-a/--args") && e.contains("args.json") && e.contains("\"mem_profile\""),
        "{e}"
    );
    // A format that fails saves nothing (upstream saves after printing).
    let fresh = d.path().join("fresh.json");
    let e = go(&["-a", fresh.to_str().unwrap(), "summary", "storage"]);
    assert!(e.contains("does not exist"), "{e}");
    assert!(!fresh.exists(), "a failed summary created the args file");
    assert!(go(&["--swappiness", "300", "run", "hashd-params"]).contains("--swappiness \"300\""));
    // solve needs the jobs named, merge its source files; study's
    // -R/--reports has nothing to read.
    assert!(go(&["solve"]).contains("no job spec"));
    assert!(go(&["merge"]).contains("merge: no source file"));
    assert!(go(&["study", "-R", "rep.d", "storage"]).contains("keeps no report files"));
    // A job file's misspelled key is named with the entry and the closest.
    let jobs = d.path().join("jobs.json");
    std::fs::write(
        &jobs,
        r#"{"job_specs": [{"kind": "storage", "prop": [{}]}]}"#,
    )
    .unwrap();
    let e = go(&["run", "-f", jobs.to_str().unwrap()]);
    assert!(
        e.contains("jobs.json") && e.contains("job_specs[0]") && e.contains("\"props\""),
        "{e}"
    );
    // --logfile: the error that ends the command (once its command line
    // is valid) is in the log too.
    let log = d.path().join("resctl.log");
    let e = go(&["--logfile", log.to_str().unwrap(), "summary"]);
    assert!(e.contains("does not exist"), "{e}");
    let l = std::fs::read_to_string(&log).unwrap();
    assert!(l.contains("r.json does not exist"), "{l}");

    std::fs::write(&res, "{\"not\": \"a journal\"}").unwrap();
    let e = go(&["run", "hashd-params"]);
    assert!(e.contains("refusing to use") && e.contains("r.json"), "{e}");
    assert_eq!(
        std::fs::read_to_string(&res).unwrap(),
        "{\"not\": \"a journal\"}"
    );

    std::fs::remove_file(&res).unwrap();
    let o = rackbench(d.path())
        .args(["resctl", "-d"])
        .arg(d.path().join("missing"))
        .arg("-r")
        .arg(&res)
        .args(["run", "hashd-params"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("scratch directory") && text(&o.stderr).contains("missing"),
        "{}",
        text(&o.stderr)
    );
    assert!(!res.exists(), "nothing is written on bad input");

    let o = rackbench(d.path())
        .args(["resctl", "doc", "protection"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        text(&o.stdout).contains("memory hog"),
        "{}",
        text(&o.stdout)
    );
}

/// iocost-params with fio (`--test`: 3 s runs on a 256M file): the six
/// model numbers and the QoS latencies are positive, and where the host
/// has no io.cost files the record says why it was not applied. The first
/// job comes from an upstream-shaped job file (`run --file=FILE`) and is
/// `passive=io`; the second, enforcing IO, shows the per-job fix decision.
#[test]
fn resctl_bench_iocost_params_measures_with_fio() {
    let has_fio = std::process::Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_fio {
        testenv::skip("fio", "fio is not installed");
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let result = d.path().join("r.json");
    let jobs = d.path().join("jobs.json");
    std::fs::write(
        &jobs,
        "// upstream's args file shape\n{\"mem_profile\": 16, \"job_specs\": \
         [{\"kind\": \"iocost-params\", \"id\": \"found\", \"passive\": \"io\", \"props\": [{}]}]}\n",
    )
    .unwrap();
    let mut c = resctl_test_run(
        d.path(),
        &result,
        &[],
        &format!("--file={}", jobs.display()),
    );
    c.arg("iocost-params:id=fixed");
    let o = c.output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let j = journal(&result);
    assert_eq!(j.len(), 2, "{j:?}");
    // The fix decision is per job, as upstream's rd-agent makes it from
    // the job's passive controls: the `passive=io` job measures the
    // scratch device as found (its IO scheduler and wbt untouched), and
    // the next one, enforcing IO, is checked again and fixes them.
    let again = err
        .find("system requirements checked again for its passive controls")
        .unwrap_or_else(|| panic!("no second check: {err}"));
    let (found, fixed) = (&j[0]["sysinfo"], &j[1]["sysinfo"]);
    // The second job's check changed what the first one left as found:
    // each change is announced after the second check, never before it.
    let fixed_io: Vec<&str> = fixed["fixed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .filter(|f| f.starts_with("IoSched") || f.starts_with("NoWbt"))
        .collect();
    for f in &fixed_io {
        let req = f.split(':').next().unwrap();
        let line = format!("sysreq {req}: fixed");
        assert!(err[again..].contains(&line), "{req}: {err}");
        assert!(!err[..again].contains(&line), "{req}: {err}");
    }
    let first_fixed = found["fixed"].as_array().unwrap();
    assert!(
        !first_fixed.iter().any(|f| f
            .as_str()
            .is_some_and(|f| f.starts_with("IoSched") || f.starts_with("NoWbt"))),
        "the passive=io job changed the device: {found}"
    );
    eprintln!("fixed for the second job only: {fixed_io:?}");

    let r = &j[0]["record"];
    for k in [
        "rbps",
        "rseqiops",
        "rrandiops",
        "wbps",
        "wseqiops",
        "wrandiops",
    ] {
        assert!(r["model"][k].as_u64().unwrap() > 0, "{k}: {r}");
    }
    assert!(r["qos"]["rlat"].as_u64().unwrap() > 0, "{r}");
    assert!(r["qos"]["wlat"].as_u64().unwrap() > 0, "{r}");
    let applied = r["applied"].as_str().unwrap();
    if !std::path::Path::new("/sys/fs/cgroup/io.cost.model").exists() {
        assert!(applied.starts_with("not applied: "), "{applied}");
    }
    assert!(text(&o.stdout).contains("iocost model: rbps="));
    assert!(
        !d.path().join("iocost-coef-fio.testfile").exists(),
        "the fio file is removed"
    );
    // pack: STEM.tar.gz in the current directory, holding the result file.
    let o = rackbench(d.path())
        .args(["resctl", "-r"])
        .arg(&result)
        .arg("pack")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("Creating \"r.tar.gz\" containing the following report periods"),
        "{}",
        text(&o.stderr)
    );
    let list = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(d.path().join("r.tar.gz"))
        .output()
        .unwrap();
    assert_eq!(text(&list.stdout).trim(), "r.json");
    // -a/--args: created with the summary's spec, which a later summary
    // without specs reuses.
    let args = d.path().join("args.json");
    let summary = |words: &[&str]| {
        let o = rackbench(d.path())
            .args(["resctl", "-a"])
            .arg(&args)
            .arg("-r")
            .arg(&result)
            .args(words)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    let first = summary(&["summary", "iocost-params:id=fixed"]);
    assert!(first.contains("iocost model: rbps="), "{first}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&args).unwrap()).unwrap();
    assert_eq!(saved["mode"], "Summary", "{saved}");
    assert_eq!(saved["job_specs"][0]["kind"], "iocost-params", "{saved}");
    assert_eq!(saved["job_specs"][0]["id"], "fixed", "{saved}");
    assert_eq!(summary(&["summary"]), first);
}

/// `--bench-mem --bench-test` runs only the short memory search: the
/// params file's rps_max is kept.
#[test]
fn hashd_short_memory_search_keeps_rps_max() {
    let d = tempfile::tempdir().unwrap();
    let params = d.path().join("params.json");
    std::fs::write(&params, "{\n  \"rps_max\": 150\n}\n").unwrap();
    let o = rackbench(d.path())
        .args(["resctl", "hashd", "-t"])
        .arg(d.path().join("tf"))
        .args(["-s", "128M", "-i", "0", "--bench-mem", "--bench-test", "-p"])
        .arg(&params)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    // No rps_max search ran before the memory search.
    assert!(!err.contains("searching the memory footprint"), "{err}");
    assert!(err.contains("mem-refine mem_frac="), "{err}");
    assert!(err.contains("rps 150"), "{err}");
    let p = std::fs::read_to_string(&params).unwrap();
    assert!(p.contains("\"rps_max\": 150"), "{p}");
}

/// The storage figures as the resctl crate derives them from a stored
/// job (no swap file or minutes of hashd needed) draw the report page's
/// storage charts.
#[test]
fn resctl_storage_metrics_draw_the_storage_charts() {
    use resctl::bench::common::{Bench, JobMetrics};
    use resctl::bench::storage::{LoopRecord, StorageBench, StorageRecord, study};
    let probes = serde_json::json!([
        {"stage": "bisect", "mem_frac": 1.0, "rps": 400.0, "end": "slow"},
        {"stage": "bisect", "mem_frac": 0.6, "rps": 1000.0, "end": "ok"},
    ]);
    let lp = |usage: u64, size: u64, used: bool| LoopRecord {
        usage,
        size,
        mem_frac: size as f64 / 2000.0,
        probes: probes.clone(),
        used,
        ..Default::default()
    };
    let rec = StorageRecord {
        runs: vec![
            lp(1000, 1200, true),
            lp(100, 1000, false),
            lp(1000, 1400, true),
        ],
        ..Default::default()
    };
    let d = resctl::journal::JobData {
        spec: resctl::spec::parse("storage").unwrap(),
        period: (1, 2),
        sysinfo: serde_json::Value::Null,
        record: Some(serde_json::to_value(&rec).unwrap()),
        result: Some(serde_json::to_value(study(&rec)).unwrap()),
    };
    let mut jm = JobMetrics::default();
    StorageBench.metrics(&d, &mut jm);
    let metrics = harness::record::metrics_map(&jm).unwrap();
    let mut row = harness::store::RunRow::from_metrics(
        "resctl_storage",
        "resctl",
        serde_json::Value::Object(metrics),
    );
    // The charts come from the stored record of a `run` that completed
    // the job.
    row.record = Some(harness::Record {
        kind: "resctl".into(),
        version: 2,
        data: serde_json::json!({"mode": "run", "jobs": [&d], "result_file": null,
                                 "completed": [&d]}),
    });
    let mut workloads = harness::Registry::new();
    workloads.register(Box::new(resctl::Resctl));
    let charts = harness::html::run_charts(&row, &workloads);
    let kinds: Vec<_> = charts.iter().map(|c| c.kind).collect();
    assert!(kinds.contains(&"resctl_storage"), "{kinds:?}");
    assert!(kinds.contains(&"resctl_storage_search"), "{kinds:?}");
    let mof = &charts
        .iter()
        .find(|c| c.kind == "resctl_storage")
        .unwrap()
        .chart;
    // Kept loops 1.2 and 1.4 (mean 1.3), the retried one apart.
    assert_eq!(mof.series[0].points, [(1.0, 1.2), (3.0, 1.4)]);
    assert_eq!(mof.series[1].points, [(2.0, 10.0)]);
    assert!(
        mof.title.contains("mean of kept loops 1.3"),
        "{}",
        mof.title
    );
}

/// protection's mem-hog-tune in `--test` form: hashd-params first, then
/// two probes of hashd's footprint (from its footprint down) against a
/// hog capped at 640M (a few seconds at --test's rate, so that isolation
/// is measured); the record keeps each probe's size and isolation,
/// the final size (if any) is a probe that reached the threshold, and the
/// summary says what was found.
#[test]
fn protection_mem_hog_tune_probes_footprints_under_test() {
    if !cgroups_writable() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let result = d.path().join("r.json");
    let o = rackbench(d.path())
        .args(["resctl", "--test", "-d"])
        .arg(d.path())
        .arg("-r")
        .arg(&result)
        .args(["run", "protection::scenario=mem-hog-tune"])
        .env("RACKBENCH_RESCTL_HOG_CAP", "640M")
        .output()
        .unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(err.contains("probing hashd footprint"), "{err}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    let prot = j
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["spec"]["kind"] == "protection")
        .unwrap();
    let t = &prot["record"]["tunes"][0];
    let probes = t["probes"].as_array().unwrap();
    assert!((1..=2).contains(&probes.len()), "{t}");
    let max = t["size_max"].as_u64().unwrap();
    let min = t["size_min"].as_u64().unwrap();
    assert!(min <= max && max > 0, "{t}");
    assert_eq!(probes[0][0].as_u64().unwrap(), max, "{t}");
    for p in probes {
        // Judged: the hog ran for whole seconds under hashd.
        let isol = p[1].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&isol), "{t}");
    }
    let last = probes.last().unwrap();
    match t["final_size"].as_u64() {
        Some(sz) => {
            assert_eq!(sz, last[0].as_u64().unwrap(), "{t}");
            assert!(last[1].as_f64().unwrap() >= 0.9, "{t}");
            assert!(
                out.contains("can be protected at isol-05 >= 90.00%"),
                "{out}"
            );
        }
        None => {
            assert_eq!(probes.len(), 2, "{t}");
            assert!(probes.iter().all(|p| p[1].as_f64().unwrap() < 0.9), "{t}");
            assert!(
                out.contains("Failed to find size to keep isol-05 above 90.00%"),
                "{out}"
            );
        }
    }
    // Only the final probe's hog run is kept, as upstream.
    assert_eq!(
        prot["record"]["scenarios"][0]["runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(out.contains("Scenario 1/1 - Memory Hog Tuning"), "{out}");
    assert!(out.contains("Probes (ours, size:isol-05): "), "{out}");
    // Only a mem-hog scenario makes the combined summary, as upstream.
    assert!(!out.contains("Memory Hog Summary"), "{out}");
}
