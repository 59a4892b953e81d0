//! benchpress' job files through the binary: `-j/--jobs FILE` (jobs.yml) and
//! `-b/--benchmarks FILE` (benchmarks.yml), written here in upstream's shape.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Upstream's jobs.yml shape: a list of jobs with benchmark, name,
/// description, args, vars, hooks, roles; a folded description as upstream's.
const JOBS: &str = r#"# jobs in benchpress' shape
- benchmark: calibrate
  name: yaml_fixed
  description: >
    Two short fixed-rate probes
    of the calibration service.
  args:
    - '--fixed-qps {rates}'
    - '--probe-secs 1'
    - '--service-time-ms 2'
    - '--workers 4'
    - '--target 99p:50'
    - '{extra_args}'
  vars:
    - 'rates=40,80'
    - 'extra_args='
  hooks:
    - hook: cpu-mpstat
      options:
        args:
          - '-u'
          - '1'
  tags:
    scope:
      - smoke

- name: feedsim_default
  benchmark: feedsim
  description: FeedSim as upstream's default job
  args:
    - '-p {port}'
    - '-o {output}'
  vars:
    - 'port=11222'
    - 'output=feedsim_results.txt'

- name: feedsim_autoscale
  benchmark: feedsim_autoscale
  description: FeedSim autoscaled
  args:
    - '-n {num_instances}'
    - '{extra_args}'
  vars:
    - 'num_instances=-1'
    - 'extra_args='

- benchmark: calibrate
  name: yaml_pair
  description: a job with roles
  roles:
    server:
      args:
        - '--workers {workers}'
      vars:
        - 'workers=4'
    client:
      args:
        - '--server {server_hostname}:1'
      vars:
        - 'server_hostname'
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn rackbench(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rackbench"))
        .current_dir(dir)
        .env("RACKBENCH_DB", dir.join("results.db"))
        .env_remove("RACKBENCH_JOBS_DIR")
        .env_remove("RACKBENCH_REPORT")
        .stdin(Stdio::null())
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A failure of bad input: exit 2 (as every bad-input error of the CLI), no panic.
fn bad_input(o: &Output) -> String {
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {e}");
    assert!(!e.contains("panicked"), "{e}");
    e
}

#[test]
fn list_and_info_show_the_yaml_jobs_instead_of_the_embedded_ones() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = write(dir.path(), "jobs.yml", JOBS);
    let o = rackbench(dir.path(), &["-j", &jobs, "list"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for name in [
        "yaml_fixed",
        "feedsim_default",
        "feedsim_autoscale",
        "yaml_pair",
    ] {
        assert!(out.contains(name), "{name} missing from:\n{out}");
    }
    // As benchpress' -j, the file replaces the default jobs.
    assert!(!out.contains("calibrate_quick"), "{out}");
    assert!(
        out.contains("Two short fixed-rate probes of the calibration service."),
        "{out}"
    );
    // The long spelling, and `list --tags` over the YAML tags.
    let o = rackbench(dir.path(), &["--jobs", &jobs, "list", "--tags", "smoke"]);
    let out = text(&o.stdout);
    assert!(
        out.contains("yaml_fixed") && !out.contains("yaml_pair"),
        "{out}"
    );

    // feedsim_autoscale is upstream's run-feedsim-multi.sh: its -n is
    // rackbench feedsim's --num-instances; its tags are upstream's
    // benchmarks.yml ones; its baseline is the one benchpress scores it by.
    let o = rackbench(dir.path(), &["-j", &jobs, "info", "feedsim_autoscale"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("benchmark:   feedsim "), "{out}");
    assert!(out.contains("--num-instances {num_instances}"), "{out}");
    assert!(out.contains("tags:        app, feed, cpu, memory"), "{out}");
    assert!(out.contains(&format!("defined in:  {jobs}")), "{out}");
    assert!(
        out.contains("score:       overall.final_achieved_qps / 57"),
        "{out}"
    );

    // Roles: each role's args and vars, and -r is required.
    let o = rackbench(
        dir.path(),
        &["-j", &jobs, "run", "yaml_pair", "-r", "client", "--dry-run"],
    );
    let e = text(&o.stderr);
    assert!(!o.status.success() && e.contains("server_hostname"), "{e}");
    let o = rackbench(
        dir.path(),
        &[
            "-j",
            &jobs,
            "run",
            "yaml_pair",
            "-r",
            "client",
            "-i",
            r#"{"server_hostname": "127.0.0.1"}"#,
            "--dry-run",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("--server 127.0.0.1:1"), "{out}");
}

#[test]
fn a_short_yaml_job_runs_and_reports_under_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = write(dir.path(), "jobs.yml", JOBS);
    // A benchmarks file in upstream's shape, with a benchmark rackbench
    // lacks (harmless while no job names it).
    let benchmarks = write(
        dir.path(),
        "benchmarks.yml",
        r#"calibrate:
  parser: calibrate
  install_script: ./packages/calibrate/install.sh
  path: ./benchmarks/calibrate/run.sh
  tags:
    component:
      - loadgen
  metrics:
    - final_achieved_qps
feedsim:
  parser: feedsim
  path: ./benchmarks/feedsim/run.sh
feedsim_autoscale:
  parser: feedsim_autoscale
  path: ./benchmarks/feedsim/run-feedsim-multi.sh
tao_bench:
  parser: tao_bench
  path: ./packages/tao_bench/run.py
  roles:
    - server
    - client
"#,
    );
    let out_dir = dir.path().join("out");
    let o = rackbench(
        dir.path(),
        &[
            "-b",
            &benchmarks,
            "-j",
            &jobs,
            "--no-store",
            "--output-dir",
            out_dir.to_str().unwrap(),
            "run",
            "yaml_fixed",
            "-i",
            r#"{"rates": "40"}"#,
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut reports: Vec<Value> = Vec::new();
    for d in std::fs::read_dir(&out_dir).unwrap().flatten() {
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            let n = f.file_name().to_string_lossy().to_string();
            if n.starts_with("yaml_fixed_metrics_") && n.ends_with(".json") {
                reports.push(
                    serde_json::from_str(&std::fs::read_to_string(f.path()).unwrap()).unwrap(),
                );
            }
        }
    }
    assert_eq!(reports.len(), 1, "{}", text(&o.stderr));
    let r = &reports[0];
    assert_eq!(r["benchmark_name"], "yaml_fixed");
    assert_eq!(r["success"], true);
    let args = r["benchmark_args"].to_string();
    assert!(args.contains("--fixed-qps 40"), "{args}");
    assert_eq!(
        r["benchmark_hooks"][0],
        "cpu-mpstat: {\"args\":[\"-u\",\"1\"]}"
    );
    assert!(
        r["metrics"]["final_achieved_qps"].as_f64().unwrap() > 0.0,
        "{}",
        r["metrics"]
    );
    // The benchmarks file's tags join the job's.
    let o = rackbench(
        dir.path(),
        &["-b", &benchmarks, "-j", &jobs, "info", "yaml_fixed"],
    );
    let out = text(&o.stdout);
    assert!(out.contains("tags:        smoke, loadgen"), "{out}");
}

#[test]
fn a_job_naming_a_benchmark_rackbench_lacks_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = write(
        dir.path(),
        "jobs.yml",
        &format!(
            "{JOBS}\n- benchmark: tao_bench\n  name: tao_bench_64g\n  description: Tao with 64 GB\n  roles:\n    server:\n      args:\n        - 'server'\n"
        ),
    );
    for cmd in [&["list"][..], &["run", "yaml_fixed", "--dry-run"]] {
        let mut args = vec!["-j", jobs.as_str()];
        args.extend_from_slice(cmd);
        let e = bad_input(&rackbench(dir.path(), &args));
        assert!(e.contains(&jobs), "names the file: {e}");
        assert!(e.contains("job 'tao_bench_64g'"), "names the job: {e}");
        assert!(
            e.contains("benchmark 'tao_bench'"),
            "names the benchmark: {e}"
        );
        assert!(
            e.contains("feedsim, feedsim_autoscale"),
            "lists what rackbench has: {e}"
        );
    }
    // A benchmark no benchmarks file defines.
    let benchmarks = write(dir.path(), "b.yml", "feedsim:\n  parser: feedsim\n");
    let e = bad_input(&rackbench(
        dir.path(),
        &["-b", &benchmarks, "-j", &jobs, "list"],
    ));
    assert!(
        e.contains("job 'yaml_fixed'")
            && e.contains("benchmark 'calibrate' is not defined in the benchmarks file"),
        "{e}"
    );
    // benchpress' alternative suite names.
    let e = bad_input(&rackbench(dir.path(), &["-b", "wdl", "-j", &jobs, "list"]));
    assert!(e.contains("wdl_bench"), "{e}");
}

#[test]
fn unknown_keys_and_bad_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = write(
        dir.path(),
        "typo.yml",
        "- name: t\n  benchmark: calibrate\n  description: d\n  arg:\n    - '--quick'\n",
    );
    let e = bad_input(&rackbench(dir.path(), &["-j", &jobs, "list"]));
    assert!(
        e.contains(&format!("{jobs}:4")) && e.contains("unknown key 'arg'"),
        "{e}"
    );
    // A benchpress key whose effect rackbench would not reproduce.
    let jobs = write(
        dir.path(),
        "tee.yml",
        "- name: t\n  benchmark: calibrate\n  description: d\n  tee_output: true\n",
    );
    let e = bad_input(&rackbench(dir.path(), &["-j", &jobs, "list"]));
    assert!(e.contains("'tee_output' is not supported"), "{e}");
    // In a benchmarks file too.
    let good = write(dir.path(), "jobs.yml", JOBS);
    let b = write(dir.path(), "b.yml", "calibrate:\n  parsr: calibrate\n");
    let e = bad_input(&rackbench(dir.path(), &["-b", &b, "-j", &good, "list"]));
    assert!(
        e.contains(&format!("{b}:2")) && e.contains("unknown key 'parsr'"),
        "{e}"
    );
    // -b alone has no jobs to apply to; a missing file is named.
    let b = write(dir.path(), "b2.yml", "calibrate:\n  parser: calibrate\n");
    let e = bad_input(&rackbench(dir.path(), &["-b", &b, "list"]));
    assert!(e.contains("-j"), "{e}");
    let e = bad_input(&rackbench(dir.path(), &["-j", "nope.yml", "list"]));
    assert!(e.contains("nope.yml"), "{e}");
    // Invalid YAML names the line.
    let bad = write(dir.path(), "bad.yml", "- name: t\n  args: [\n");
    let e = bad_input(&rackbench(dir.path(), &["-j", &bad, "list"]));
    assert!(e.contains("invalid YAML"), "{e}");
    // Upstream's -b/-j come before the command, as here.
    let e = bad_input(&rackbench(dir.path(), &["list", "-j", &good]));
    assert!(e.contains("-j"), "{e}");
}

/// `-b ai`: benchpress' AI suite by name (upstream's AdSim docs run
/// `benchpress -b ai run adsim_inference_a -r server`): rackbench's jobs
/// of that suite, AdSim's, and no others.
#[test]
fn the_ai_suite_by_name_selects_the_adsim_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let o = rackbench(dir.path(), &["-b", "ai", "list"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("adsim_inference_a"), "{out}");
    assert!(!out.contains("feedsim_default"), "{out}");
    assert!(!out.contains("calibrate_quick"), "{out}");
    let o = rackbench(dir.path(), &["-b", "ai", "info", "adsim_inference_a"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("role server"),
        "{}",
        text(&o.stdout)
    );
    // A job outside the suite is not found under it.
    let o = rackbench(dir.path(), &["-b", "ai", "info", "feedsim_default"]);
    assert!(!o.status.success());
}
