//! resctl through the binary: hashd on a small footprint with its params,
//! report and log files, live params reload, and bad input.

mod common;

use common::{rackbench, text};
use std::process::Stdio;
use std::time::Duration;

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
    // The refinement's fraction is what is saved.
    assert_eq!(probes.last().unwrap()["mem_frac"], p["mem_frac"]);
}

/// `--bench-mem` alone needs rps_max in the params file.
#[test]
fn hashd_bench_mem_needs_rps_max() {
    let d = tempfile::tempdir().unwrap();
    let o = rackbench(d.path())
        .args(["resctl", "hashd", "-t", "tf", "-s", "64M", "--bench-mem", "-p"])
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
