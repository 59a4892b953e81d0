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
    // benchpress' global flags (-u run id, -t timestamp), several hooks
    // after one -k with their options by name (upstream's perf hook README
    // examples: topdown's is_zen4, mpstat's interval).
    let o = rackbench(
        dir.path(),
        &[
            "-b",
            &benchmarks,
            "-j",
            &jobs,
            "-u",
            "bp000001",
            "-t",
            "1700000123",
            "--no-store",
            "--output-dir",
            out_dir.to_str().unwrap(),
            "run",
            "yaml_fixed",
            "-i",
            r#"{"rates": "40"}"#,
            "-k",
            "perf",
            "shell",
            "-a",
            r#"{"perf": {"topdown": {"is_zen4": true}, "mpstat": {"interval": 1}, "memstat": {"interval": 1}, "netstat": {"interval": 1}}, "shell": {"after": "echo ran > shell_ran.txt"}}"#,
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    // benchpress' names: the folder of -u, the report `_iter_None` (no -i),
    // the per-run link, the results history under -r (default: results
    // under the output folder).
    let run_dir = out_dir.join("benchmark_metrics_bp000001");
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(run_dir.join("yaml_fixed_metrics_1700000123_iter_None.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(report["run_id"], "bp000001");
    assert_eq!(report["timestamp"], 1_700_000_123);
    let hooks = report["benchmark_hooks"].to_string();
    assert!(
        hooks.contains("perf: ") && hooks.contains("shell: "),
        "{hooks}"
    );
    let perf = &report["metrics"]["hooks"]["perf"];
    assert!(
        perf["monitors"]["unsupported"]["topdown"]
            .as_str()
            .is_some(),
        "{perf}"
    );
    assert!(run_dir.join("mpstat.csv").exists(), "{perf}");
    assert!(
        std::fs::read_to_string(run_dir.join("mpstat.csv"))
            .unwrap()
            .starts_with("index,timestamp,%gnice,%guest,%idle,")
    );
    assert!(dir.path().join("shell_ran.txt").exists());
    let link = std::fs::read_dir(&out_dir)
        .unwrap()
        .flatten()
        .find(|e| e.file_type().unwrap().is_symlink())
        .unwrap();
    let name = link.file_name().to_string_lossy().to_string();
    assert!(
        name.starts_with("benchmark_metrics_yaml_fixed_timestamp:") && name.ends_with("_bp000001"),
        "{name}"
    );
    assert_eq!(
        std::fs::read_link(link.path()).unwrap(),
        Path::new("benchmark_metrics_bp000001")
    );
    let history: Vec<_> = std::fs::read_dir(out_dir.join("results/yaml_fixed"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(history.len(), 1);
    let h: Value =
        serde_json::from_str(&std::fs::read_to_string(history[0].path()).unwrap()).unwrap();
    assert_eq!(h["job"], "yaml_fixed");
    assert_eq!(h["config"]["uuid"], "bp000001");
    assert!(
        h["metrics"]["final_achieved_qps"].as_f64().unwrap() > 0.0,
        "{h}"
    );
    assert!(h["timestamp"].as_str().unwrap().ends_with('Z'), "{h}");
    // -i names the iteration; -o replaces the job's args; -r moves the
    // history; -s adds benchpress' background script to every job.
    let results = dir.path().join("hist");
    let o = rackbench(
        dir.path(),
        &[
            "-j",
            &jobs,
            "-i",
            "3",
            "-r",
            results.to_str().unwrap(),
            "-u",
            "bp000002",
            "-o",
            "yaml_fixed: --fixed-qps 30 --probe-secs 1 --service-time-ms 2 --workers 4 --target 99p:50",
            "--no-store",
            "--output-dir",
            out_dir.to_str().unwrap(),
            "run",
            "yaml_fixed",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let f = std::fs::read_dir(out_dir.join("benchmark_metrics_bp000002"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .find(|n| n.starts_with("yaml_fixed_metrics_"))
        .unwrap();
    assert!(f.ends_with("_iter_3.json"), "{f}");
    assert!(results.join("yaml_fixed").is_dir());
    let o = rackbench(
        dir.path(),
        &[
            "-j",
            &jobs,
            "-s",
            "./bg.sh",
            "-d",
            "5",
            "run",
            "yaml_fixed",
            "--dry-run",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains(
            r#"hook: user-script: {"background_mode":{"duration":"5"},"hook_path":"./bg.sh"}"#
        ),
        "{}",
        text(&o.stdout)
    );
    let o = rackbench(dir.path(), &["-j", &jobs, "-o", "yaml_pair: --x 1", "list"]);
    assert!(bad_input(&o).contains("has roles"));
    let mut reports: Vec<Value> = Vec::new();
    for d in std::fs::read_dir(&out_dir).unwrap().flatten() {
        // The first run's folder (benchpress' per-run links name the
        // same folders).
        if !d.file_type().unwrap().is_dir() || d.file_name() != "benchmark_metrics_bp000001" {
            continue;
        }
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

/// A job of a benchmark rackbench lacks, in upstream's stock shape (roles,
/// `tee_output`, upstream's hooks): listed, marked, and refused by name
/// when run, by itself or through its tag.
const UPSTREAM_ONLY: &str = r#"
- benchmark: tao_bench
  name: tao_bench_64g
  description: Tao with 64 GB
  tee_output: true
  roles:
    server:
      args:
        - 'server'
  hooks:
    - hook: copymove
      options:
        is_move: true
        after:
          - 'benchmarks/tao_bench/perf.data'
  tags:
    scope: [smoke]
"#;

#[test]
fn a_job_naming_a_benchmark_rackbench_lacks_is_listed_and_refused_when_run() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = write(dir.path(), "jobs.yml", &format!("{JOBS}{UPSTREAM_ONLY}"));
    let o = rackbench(dir.path(), &["-j", &jobs, "list"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.starts_with("tao_bench_64g"))
        .unwrap();
    assert!(row.contains("tao_bench (not in rackbench)"), "{out}");
    assert!(row.contains("Tao with 64 GB"), "{out}");
    // The jobs rackbench runs are there as before.
    assert!(out.contains("yaml_fixed"), "{out}");
    let o = rackbench(dir.path(), &["-j", &jobs, "run", "yaml_fixed", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Running it, alone or through a tag it carries, is bad input naming
    // the job, the file and line, its benchmark and what rackbench has.
    for cmd in [
        &["run", "tao_bench_64g", "-r", "server"][..],
        &["run", "smoke", "--dry-run"],
        &["info", "tao_bench_64g"],
    ] {
        let mut args = vec!["-j", jobs.as_str()];
        args.extend_from_slice(cmd);
        let e = bad_input(&rackbench(dir.path(), &args));
        assert!(e.contains(&format!("{jobs}:")), "names the file: {e}");
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
    // A benchmark a given benchmarks file does not define is still an
    // error, as benchpress fails on it.
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
    // install reports per job, and says which cannot run here.
    let o = rackbench(
        dir.path(),
        &["-j", &jobs, "install", "yaml_fixed", "tao_bench_64g"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("Benchmark for yaml_fixed: calibrate is built into rackbench"),
        "{out}"
    );
    assert!(out.contains("Arguments of yaml_fixed: valid"), "{out}");
    assert!(
        out.contains("Tool cpu-mpstat: /proc/stat readable"),
        "{out}"
    );
    assert!(
        out.contains("Benchmark for tao_bench_64g cannot be installed"),
        "{out}"
    );
    // clean removes the per-run links whose folder is gone, and keeps the
    // others.
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("benchmark_metrics_keep0001")).unwrap();
    for (link, to) in [
        (
            "benchmark_metrics_yaml_fixed_timestamp:20260101_0000_gone0001",
            "benchmark_metrics_gone0001",
        ),
        (
            "benchmark_metrics_yaml_fixed_timestamp:20260101_0000_keep0001",
            "benchmark_metrics_keep0001",
        ),
    ] {
        std::os::unix::fs::symlink(to, out.join(link)).unwrap();
    }
    let o = rackbench(
        dir.path(),
        &[
            "-j",
            &jobs,
            "--output-dir",
            out.to_str().unwrap(),
            "clean",
            "smoke",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let said = text(&o.stdout);
    assert!(
        said.contains("gone0001 (its metrics folder is gone)"),
        "{said}"
    );
    assert!(
        said.contains("Job tao_bench_64g is not one rackbench runs"),
        "{said}"
    );
    let left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.iter().all(|n| !n.contains("gone0001")), "{left:?}");
    let o = rackbench(dir.path(), &["-j", &jobs, "install", "yaml_pair"]);
    assert!(o.status.success(), "{}", text(&o.stdout));
    assert!(
        text(&o.stdout).contains("var 'server_hostname' has no default"),
        "{}",
        text(&o.stdout)
    );
}

/// Upstream's own stock files from a DCPerf checkout (RACKBENCH_DCPERF):
/// `jobs.yml`, the other `jobs_*.yml` and their benchmarks files load whole, `list` shows
/// every job, and a job of a benchmark rackbench lacks exits 2 naming it.
#[test]
fn dcperf_stock_job_files_load_whole() {
    let Some(root) = std::env::var_os("RACKBENCH_DCPERF").map(std::path::PathBuf::from) else {
        testenv::skip(
            "dcperf",
            "RACKBENCH_DCPERF names no DCPerf checkout (its benchpress/config files are read from there)",
        );
        return;
    };
    let cfg = root.join("benchpress/config");
    let dir = tempfile::tempdir().unwrap();
    let names = |text: &str| -> Vec<String> {
        let docs = yaml_rust2::YamlLoader::load_from_str(text).unwrap();
        docs[0]
            .as_vec()
            .unwrap()
            .iter()
            .map(|j| j["name"].as_str().unwrap().to_string())
            .collect()
    };
    // jobs.yml with and without its benchmarks.yml, and every other stock
    // jobs file the checkout has (jobs_ai.yml, jobs_wdl.yml: they vary by
    // DCPerf version) with its own benchmarks file where there is one.
    let mut files: Vec<(String, Option<std::path::PathBuf>)> = vec![
        ("jobs.yml".into(), Some(cfg.join("benchmarks.yml"))),
        ("jobs.yml".into(), None),
    ];
    let mut others: Vec<String> = std::fs::read_dir(&cfg)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("jobs_") && n.ends_with(".yml"))
        .collect();
    others.sort();
    assert!(
        !others.is_empty(),
        "{}: no jobs_*.yml beside jobs.yml",
        cfg.display()
    );
    for n in others {
        let b = cfg.join(n.replacen("jobs_", "benchmarks_", 1));
        files.push((n, b.exists().then_some(b)));
    }
    for (file, benchmarks) in &files {
        let jobs = cfg.join(file);
        let text_in = std::fs::read_to_string(&jobs).unwrap();
        let mut args = vec!["-j", jobs.to_str().unwrap()];
        if let Some(b) = benchmarks {
            args.extend(["-b", b.to_str().unwrap()]);
        }
        args.push("list");
        let o = rackbench(dir.path(), &args);
        assert!(o.status.success(), "{file}: {}", text(&o.stderr));
        let out = text(&o.stdout);
        let rows: Vec<&str> = out.lines().skip(1).collect();
        let all = names(&text_in);
        assert_eq!(rows.len(), all.len(), "{file}: every job listed:\n{out}");
        for n in &all {
            assert!(
                rows.iter().any(|r| r.split_whitespace().next() == Some(n)),
                "{file}: {n} missing:\n{out}"
            );
        }
        // The first job rackbench cannot run, run: exit 2 naming it.
        let row = rows
            .iter()
            .find(|r| r.contains("(not in rackbench)"))
            .unwrap();
        let name = row.split_whitespace().next().unwrap();
        let mut args = vec!["-j", jobs.to_str().unwrap(), "run", name, "--dry-run"];
        if let Some(b) = benchmarks {
            args.splice(2..2, ["-b", b.to_str().unwrap()]);
        }
        let e = bad_input(&rackbench(dir.path(), &args));
        assert!(e.contains(&format!("job '{name}'")), "{e}");
    }
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
