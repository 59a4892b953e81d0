//! End-to-end tests through the `rackbench` binary: bad input, the report and
//! the results store, hooks, timeouts and Ctrl-C.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn jobs(&self, files: &[(&str, &[u8])]) -> PathBuf {
        let d = self.path().join("jobs");
        std::fs::create_dir_all(&d).unwrap();
        for (name, text) in files {
            std::fs::write(d.join(name), text).unwrap();
        }
        d
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_rackbench"));
        c.current_dir(self.path())
            .env("RACKBENCH_DB", self.path().join("results.db"))
            .env("RACKBENCH_REPORT", "1")
            .env_remove("RACKBENCH_JOBS_DIR")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    fn reports(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for d in std::fs::read_dir(self.path()).unwrap().flatten() {
            // benchpress' per-run links name the same folders.
            if !d
                .file_name()
                .to_string_lossy()
                .starts_with("benchmark_metrics_")
                || d.file_type().unwrap().is_symlink()
            {
                continue;
            }
            for f in std::fs::read_dir(d.path()).unwrap().flatten() {
                let n = f.file_name().to_string_lossy().to_string();
                if n.contains("_metrics_") && n.ends_with(".json") {
                    out.push(
                        serde_json::from_str(&std::fs::read_to_string(f.path()).unwrap()).unwrap(),
                    );
                }
            }
        }
        out
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn no_panic(o: &Output) {
    let e = stderr(o);
    assert!(!e.contains("panicked"), "panic: {e}");
}

const JOBS: &str = r#"
[[job]]
name = "fixed"
benchmark = "calibrate"
description = "two fixed rates"
args = ["--fixed-qps {rates}", "--probe-secs 1", "--service-time-ms 2", "--workers 4", "--target 99p:50", "{extra}"]
vars = ["rates=50,100", "extra="]
hooks = [{ hook = "cpu-mpstat", options = { interval_secs = 0.5 } }]
baseline = { metric = "final_achieved_qps", value = 100 }

[[job]]
name = "pair"
benchmark = "calibrate"
args = ["--server {server_ip}:1"]
vars = ["server_ip"]
[[job.roles]]
role = "client"
args = []
[[job.roles]]
role = "server"
args = []
vars = ["server_ip=127.0.0.1"]

[[job]]
name = "needs"
benchmark = "calibrate"
args = ["--seed {seed}"]
vars = ["seed"]

[[job]]
name = "slow"
benchmark = "calibrate"
args = ["--fixed-qps 50", "--probe-secs 60", "--service-time-ms 1", "--workers 2"]
timeout = 2

[[job]]
name = "broken"
benchmark = "calibrate"
description = "cannot reach its server; hooks must still run after"
args = ["--server 127.0.0.1:1", "--fixed-qps 10", "--probe-secs 1"]
hooks = [{ hook = "shell", options = { before = "touch before.txt", after = "touch \"$RACKBENCH_OUT_DIR/after.txt\"" } }]
"#;

#[test]
fn unknown_job_is_a_clear_error() {
    let env = Env::new();
    let o = env.run(&["run", "calibrat"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("unknown job 'calibrat'") && e.contains("did you mean calibrate"),
        "{e}"
    );
    no_panic(&o);
}

#[test]
fn bad_role_input_json() {
    let env = Env::new();
    let o = env.run(&["run", "calibrate", "-i", "{workers: 4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("-i/--role-input is not valid JSON"),
        "{}",
        stderr(&o)
    );
    let o = env.run(&["run", "calibrate", "-i", "[1]"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("must be a JSON object"));
    no_panic(&o);
    // A negative or zero -n says what -n takes, not clap's `-- -1` tip.
    for n in ["-1", "0"] {
        let o = env.run(&["run", "calibrate_quick", "-n", n]);
        assert_eq!(o.status.code(), Some(2));
        let err = stderr(&o);
        assert!(
            err.contains(&format!("invalid value '{n}' for '--iterations")),
            "{err}"
        );
        assert!(!err.contains("-- -1"), "{err}");
    }
    // A key no job of the run declares is refused, naming the closest var.
    let o = env.run(&["run", "calibrate_quick", "-i", r#"{"sed": 2}"#]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains(
            "input var 'sed' is used by no job of this run (calibrate_quick): did you mean 'seed'?"
        ),
        "{err}"
    );
    assert!(env.reports().is_empty());
    // A key one job of the run declares is only a warning for the others.
    let o = env.run(&[
        "run",
        "calibrate_quick",
        "feedsim_mini",
        "--dry-run",
        "-i",
        r#"{"seed": 2}"#,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // A value the benchmark refuses names its var, not the whole argv.
    let o = env.run(&["run", "calibrate_quick", "-i", r#"{"workers": "many"}"#]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains(
            "job 'calibrate_quick': var 'workers' = 'many': invalid value 'many' for '--workers"
        ),
        "{err}"
    );
    assert!(
        !err.contains("--help") && !err.contains("\"--seed\""),
        "{err}"
    );
}

#[test]
fn missing_required_var_names_job_role_and_var() {
    let env = Env::new();
    let jobs = env.jobs(&[("t.toml", JOBS.as_bytes())]);
    let j = jobs.to_str().unwrap();
    let o = env.run(&["--jobs-dir", j, "run", "needs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("job 'needs' requires var 'seed'"),
        "{}",
        stderr(&o)
    );
    let o = env.run(&["--jobs-dir", j, "run", "pair", "-r", "client"]);
    assert!(
        stderr(&o).contains("job 'pair' (role 'client') requires var 'server_ip'"),
        "{}",
        stderr(&o)
    );
    no_panic(&o);
}

#[test]
fn roles_are_checked() {
    let env = Env::new();
    let jobs = env.jobs(&[("t.toml", JOBS.as_bytes())]);
    let j = jobs.to_str().unwrap();
    let o = env.run(&["--jobs-dir", j, "run", "pair", "-r", "proxy"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("has no role 'proxy'; its roles are: client, server"),
        "{}",
        stderr(&o)
    );
    let o = env.run(&["--jobs-dir", j, "run", "pair"]);
    assert!(
        stderr(&o).contains("choose one with -r ROLE"),
        "{}",
        stderr(&o)
    );
    let o = env.run(&["--jobs-dir", j, "run", "fixed", "-r", "client"]);
    assert!(
        stderr(&o).contains("job 'fixed' has no roles"),
        "{}",
        stderr(&o)
    );
    // Dry run shows the resolved argv of a role.
    let o = env.run(&["--jobs-dir", j, "run", "pair", "-r", "server", "--dry-run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("argv: --server 127.0.0.1:1"));
}

#[test]
fn invalid_toml_names_file_and_line() {
    let env = Env::new();
    let jobs = env.jobs(&[(
        "bad.toml",
        b"[[job]]\nname = \"x\"\nbenchmark = \"calibrate\"\nargs = [\"a\",\n",
    )]);
    let o = env.run(&["--jobs-dir", jobs.to_str().unwrap(), "list"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("bad.toml") && e.contains("line"), "{e}");
    no_panic(&o);
}

#[test]
fn unreadable_job_files_and_folders() {
    let env = Env::new();
    let jobs = env.jobs(&[("latin1.toml", b"[[job]]\nname = \"caf\xe9\"\n")]);
    let o = env.run(&["--jobs-dir", jobs.to_str().unwrap(), "list"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("cannot read job file") && e.contains("latin1.toml"),
        "{e}"
    );
    let o = env.run(&["--jobs-dir", "/nonexistent/jobs", "list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/jobs"));
    no_panic(&o);
}

#[test]
fn unknown_hook_and_bad_benchmark_args_fail_before_running() {
    let env = Env::new();
    let o = env.run(&["run", "calibrate", "-k", "mpstat"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown hook 'mpstat'"),
        "{}",
        stderr(&o)
    );
    let o = env.run(&["run", "calibrate", "-i", "{\"target\": \"97p:10\"}"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown percentile '97p'"),
        "{}",
        stderr(&o)
    );
    assert!(env.reports().is_empty());
}

#[test]
fn reports_store_compare_and_score() {
    let env = Env::new();
    let jobs = env.jobs(&[("t.toml", JOBS.as_bytes())]);
    let j = jobs.to_str().unwrap();
    let o = env.run(&["--jobs-dir", j, "run", "fixed", "-n", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let reports = env.reports();
    assert_eq!(reports.len(), 2);
    let r = &reports[0];
    assert_eq!(r["benchmark_name"], "fixed");
    assert_eq!(r["success"], true);
    assert_eq!(r["run_id"].as_str().unwrap().len(), 8);
    assert_eq!(r["run_id"], reports[1]["run_id"]);
    assert_eq!(
        r["benchmark_hooks"][0],
        "cpu-mpstat: {\"interval_secs\":0.5}"
    );
    assert!(
        r["metadata"]["L1d cache"]
            .as_str()
            .unwrap()
            .contains("instance")
    );
    // benchpress' job.args: one string per template after substitution,
    // the empty `{extra}` kept.
    assert_eq!(
        r["benchmark_args"],
        serde_json::json!([
            "--fixed-qps 50,100",
            "--probe-secs 1",
            "--service-time-ms 2",
            "--workers 4",
            "--target 99p:50",
            ""
        ])
    );
    let m = &r["metrics"];
    assert_eq!(m["probes"].as_array().unwrap().len(), 2);
    assert!(m["final_achieved_qps"].as_f64().unwrap() > 90.0);
    assert!(m["hooks"]["cpu-mpstat"]["samples"].as_u64().unwrap() >= 2);
    // The probe CSV is FeedSim's 15 columns, one row per probe.
    let dir = env.path().join(format!(
        "benchmark_metrics_{}",
        r["run_id"].as_str().unwrap()
    ));
    let csv = std::fs::read_to_string(dir.join("calibrate_results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3);
    assert!(csv.lines().all(|l| l.split(',').count() == 15));
    assert!(dir.join("machine_specs.json").exists());

    // A second invocation to compare with.
    let o = env.run(&["--jobs-dir", j, "run", "fixed", "-i", "{\"rates\": \"60\"}"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let live = stderr(&o);
    let list = env.run(&["results", "list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert_eq!(
        text.lines().filter(|l| l.contains("fixed")).count(),
        3,
        "{text}"
    );
    // Each run's duration and its headline figure (calibrate's measured
    // max QPS, which the report has), and the same as JSON.
    let newest = text.lines().nth(1).unwrap();
    assert!(newest.contains(" s  ok"), "{text}");
    let json = env.run(&["results", "list", "--json", "--limit", "1"]);
    let runs: Value = serde_json::from_slice(&json.stdout).unwrap();
    let run = &runs[0];
    assert!(run["duration_secs"].as_f64().unwrap() > 0.5, "{run}");
    let fig = &run["figures"][0];
    assert_eq!(fig["key"], "final_achieved_qps", "{run}");
    assert_eq!(fig["unit"], "QPS", "{run}");
    assert!(fig["value"].as_f64().unwrap() > 0.0, "{run}");
    assert!(
        newest.contains("max QPS at target ") && newest.contains(" QPS"),
        "{newest}"
    );
    let ids: Vec<String> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    let (newer, older) = (&ids[0], &ids[ids.len() - 1]);
    let cmp = env.run(&["results", "compare", older, newer]);
    assert!(cmp.status.success(), "{}", stderr(&cmp));
    let ctext = String::from_utf8_lossy(&cmp.stdout);
    assert!(
        ctext.contains("final_requested_qps") && ctext.contains('%'),
        "{ctext}"
    );
    // The second invocation ran other rates: said once, as a warning.
    assert!(
        ctext.contains(
            "warning: not like for like: fixed ran with other arguments: A `--fixed-qps 50,100"
        ),
        "{ctext}"
    );
    assert!(ctext.contains("B `--fixed-qps 60"), "{ctext}");
    let show = env.run(&["results", "show", newer]);
    let rows: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    // --text: the run's lines again, from its stored record.
    let show = env.run(&["results", "show", newer, "--text"]);
    assert!(show.status.success(), "{}", stderr(&show));
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(shown.contains("requested_qps = 60.00"), "{shown}");
    testenv::assert_lines_in_order(&shown, &live);
    let missing = env.run(&["results", "show", "ffffffff"]);
    assert_eq!(missing.status.code(), Some(2));

    // As benchpress: the latest run by default, every run with --all;
    // calibrate is scored but never counts in the DCPerf score.
    let score = env.run(&["--jobs-dir", j, "report", "score", "fixed", "--json"]);
    assert!(score.status.success(), "{}", stderr(&score));
    let s: Value = serde_json::from_slice(&score.stdout).unwrap();
    assert_eq!(s["jobs"][0]["runs"], 1, "{s}");
    assert_eq!(s["jobs"][0]["pool"], "calibrate", "{s}");
    assert!(s["overall"].is_null(), "{s}");
    let score = env.run(&[
        "--jobs-dir",
        j,
        "report",
        "score",
        "fixed",
        "--all",
        "--json",
    ]);
    let s: Value = serde_json::from_slice(&score.stdout).unwrap();
    assert_eq!(s["jobs"][0]["runs"], 3);
    let sc = s["benchmarks"][0]["score"].as_f64().unwrap();
    assert!(sc > 0.5 && sc < 1.1, "{sc}");
    assert_eq!(s["benchmarks"][0]["excluded"], true);
    let text = env.run(&["--jobs-dir", j, "report", "score", "fixed", "--all"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.starts_with(&format!(
            "calibrate: {sc:.3}, median of 3 data points, stdev "
        )),
        "{text}"
    );
    assert!(text.contains("rackbench: calibrate is not in the DCPerf score"));
    assert!(!text.contains("DCPerf partial geomean"), "{text}");
    // A failed run after them: benchpress never saves a failed run in its
    // history, so its report keeps scoring the last successful one.
    let latest = |args: &[&str]| -> Value {
        let o = env.run(args);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let before = latest(&["--jobs-dir", j, "report", "score", "fixed", "--json"]);
    {
        let store = harness::store::Store::open(&env.path().join("results.db")).unwrap();
        let mut row = store.by_run_id(newer).unwrap().remove(0);
        row.id = 0;
        row.run_id = "failed01".into();
        row.timestamp += 60;
        row.success = false;
        row.metrics = serde_json::json!({"error": "the job failed"});
        store.record(&row).unwrap();
    }
    let after = latest(&["--jobs-dir", j, "report", "score", "fixed", "--json"]);
    assert_eq!(after["jobs"][0]["runs"], 1, "{after}");
    assert_eq!(
        after["jobs"][0]["score"], before["jobs"][0]["score"],
        "{after}"
    );

    // benchpress' report stdout / json_file: the latest run's metrics with
    // run_id and timestamp (every run, newest first, with --all).
    let o = env.run(&["--jobs-dir", j, "report", "stdout", "fixed"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["run_id"].as_str(), Some(newer.as_str()));
    assert!(lines[0]["timestamp"].as_u64().is_some());
    assert!(lines[0]["final_requested_qps"].as_f64().is_some());
    let o = env.run(&["--jobs-dir", j, "report", "stdout", "fixed", "--all"]);
    let all: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0], lines[0]);
    assert_eq!(all[2]["run_id"].as_str(), Some(older.as_str()));
    // benchpress' own order, `report JOB... REPORTER [--all]`, is the same.
    let o = env.run(&["--jobs-dir", j, "report", "fixed", "stdout", "--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let same: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(same, all);
    let o = env.run(&["--jobs-dir", j, "report", "fixed", "nosuch"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = env.run(&["--jobs-dir", j, "report", "json_file", "fixed"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // `run` wrote the job's benchpress-named system specs, which benchpress'
    // json_file would overwrite with the metrics: kept, the metrics beside.
    let path = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let ts = lines[0]["timestamp"].as_u64().unwrap();
    assert!(
        path.ends_with(&format!(
            "benchmark_metrics_{newer}/fixed_history_metrics_{ts}.json"
        )),
        "{path}"
    );
    assert!(
        stderr(&o).contains("holds the run's system specs"),
        "{}",
        stderr(&o)
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(env.path().join(&path)).unwrap()).unwrap();
    assert_eq!(written, lines[0]);
    let specs_file = env.path().join(format!(
        "benchmark_metrics_{newer}/fixed_system_specs_{ts}.json"
    ));
    let specs: Value = serde_json::from_str(&std::fs::read_to_string(specs_file).unwrap()).unwrap();
    for k in [
        "cpu_topology",
        "os_kernel",
        "memory",
        "os-release",
        "kernel_params",
    ] {
        assert!(specs.get(k).is_some(), "{k}");
    }
    assert_eq!(specs["run_id"].as_str(), Some(newer.as_str()));
    assert_eq!(specs["timestamp"].as_u64(), Some(ts));
    // Without the run's folder, the name is benchpress'.
    std::fs::remove_dir_all(env.path().join(format!("benchmark_metrics_{newer}"))).unwrap();
    let o = env.run(&["--jobs-dir", j, "report", "json_file", "fixed"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let path = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(
        path.ends_with(&format!(
            "benchmark_metrics_{newer}/fixed_system_specs_{ts}.json"
        )),
        "{path}"
    );
}

#[test]
fn hooks_run_after_a_failed_job() {
    let env = Env::new();
    let jobs = env.jobs(&[("t.toml", JOBS.as_bytes())]);
    let o = env.run(&["--jobs-dir", jobs.to_str().unwrap(), "run", "broken"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let r = &env.reports()[0];
    assert_eq!(r["success"], false);
    assert!(
        r["metrics"]["error"]
            .as_str()
            .unwrap()
            .contains("127.0.0.1:1"),
        "{r}"
    );
    let dir = env.path().join(format!(
        "benchmark_metrics_{}",
        r["run_id"].as_str().unwrap()
    ));
    assert!(dir.join("after.txt").exists(), "after-hook did not run");
    assert!(env.path().join("before.txt").exists());
    no_panic(&o);
}

#[test]
fn timeout_stops_the_job_and_marks_it() {
    let env = Env::new();
    let jobs = env.jobs(&[("t.toml", JOBS.as_bytes())]);
    let t = Instant::now();
    let o = env.run(&["--jobs-dir", jobs.to_str().unwrap(), "run", "slow"]);
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(o.status.code(), Some(1));
    let r = &env.reports()[0];
    assert_eq!(r["success"], false);
    assert_eq!(r["metrics"]["timed_out"], true);
    assert!(
        r["metrics"]["error"]
            .as_str()
            .unwrap()
            .contains("timed out after 2 s")
    );
}

#[test]
fn ctrl_c_saves_partial_results() {
    let env = Env::new();
    let child = env
        .cmd()
        .args([
            "calibrate",
            "--fixed-qps",
            "100",
            "--probe-secs",
            "60",
            "--service-time-ms",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt 3 s into the probe (its setup takes longer on a busy host):
    // the probe's progress line says when it starts.
    let mut child = child;
    let err = child.stderr.take().unwrap();
    let (started, seen) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains("fixed 100.00 QPS") {
                let _ = started.send(());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let _ = seen.recv_timeout(Duration::from_secs(120));
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let t = Instant::now();
    let o = child.wait_with_output().unwrap();
    let err = reader.join().unwrap();
    assert!(t.elapsed() < Duration::from_secs(15));
    assert_eq!(o.status.code(), Some(130), "{err}");
    let r = &env.reports()[0];
    assert_eq!(r["success"], false);
    assert_eq!(r["metrics"]["interrupted"], true);
    assert_eq!(r["metrics"]["partial"], true);
    let p = &r["metrics"]["probes"][0];
    assert!(p["total_queries"].as_u64().unwrap() > 50, "{p}");
    // Recorded in the store as unsuccessful.
    let list = env.run(&["results", "list"]);
    assert!(String::from_utf8_lossy(&list.stdout).contains("FAILED"));
}

#[test]
fn help_and_unknown_commands() {
    let env = Env::new();
    let o = env.run(&["calibrate", "--help"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("--service-time-ms"));
    let o = env.run(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown command 'frobnicate':"),
        "{}",
        stderr(&o)
    );
    // A near miss is named; the list holds every visible command.
    let o = env.run(&["rn"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("unknown command 'rn' (did you mean 'run'?)"),
        "{err}"
    );
    for c in [
        "serve",
        "completions",
        "system_check",
        "man",
        "install",
        "clean",
    ] {
        assert!(err.contains(&format!(" {c},")), "{c} missing: {err}");
    }
    let o = env.run(&["cachbench"]);
    assert!(
        stderr(&o).contains("(did you mean 'cachebench'?)"),
        "{}",
        stderr(&o)
    );
    for argv in [
        &["calibrate", "--no-such-flag"][..],
        &["adsim", "client", "--no-such-flag"],
        &["feedsim", "--no-such-flag"],
        &["cachebench", "--no-such-flag"],
        &["resctl", "hashd", "--no-such-flag"],
    ] {
        let o = env.run(argv);
        assert_eq!(o.status.code(), Some(2), "{argv:?}");
        let err = stderr(&o);
        assert!(err.contains("--no-such-flag"), "{err}");
        assert!(
            err.starts_with("error: ") && !err.contains("error: error:"),
            "{err}"
        );
    }
}

/// A benchmark command given no arguments reaches the benchmark (which
/// says what it needs) instead of panicking in the argument parser.
#[test]
fn benchmark_commands_without_arguments_do_not_panic() {
    let env = Env::new();
    for (argv, says) in [
        ("distbench", "needs a subcommand"),
        ("adsim", "needs a command"),
        ("cachebench", "--json_test_config"),
        ("resctl", "no command"),
    ] {
        let o = env.run(&[argv]);
        let err = stderr(&o);
        assert!(!o.status.success(), "{argv}: {err}");
        assert!(!err.contains("panicked"), "{argv}: {err}");
        assert!(err.contains(says), "{argv}: {err}");
    }
}

/// `rackbench --help` lists the benchmark commands with the tool each
/// replaces; `help BENCHMARK` is the benchmark's own usage; `--version`
/// names the commit and profile.
#[test]
fn top_level_help_lists_the_benchmarks_and_version_names_the_build() {
    let env = Env::new();
    let o = env.run(&["--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let help = String::from_utf8_lossy(&o.stdout).to_string();
    for (name, upstream) in [
        ("cachebench", "CacheLib"),
        ("distbench", "google/distbench"),
        ("resctl", "resctl-demo"),
        ("adsim", "DCPerf's AdSim"),
        ("feedsim", "DCPerf's FeedSim"),
        ("calibrate", "rackbench's own"),
    ] {
        let line = help
            .lines()
            .skip_while(|l| !l.trim_start().starts_with(&format!("{name} ")))
            .take(4)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(line.contains(upstream), "{name}: {line:?} in\n{help}");
    }
    for name in [
        "cachebench",
        "distbench",
        "resctl",
        "adsim",
        "feedsim",
        "calibrate",
    ] {
        let a = env.run(&["help", name]);
        let b = env.run(&[name, "--help"]);
        assert!(a.status.success() && b.status.success(), "{name}");
        assert_eq!(a.stdout, b.stdout, "{name}");
        assert!(!a.stdout.is_empty(), "{name}");
    }
    // A subcommand's --help is that subcommand's usage, not the tool's.
    for (argv, has, lacks) in [
        (
            &["distbench", "test_builder", "--help"][..],
            "test_builder",
            "start_localhost",
        ),
        (
            &["distbench", "check_test", "--help"],
            "check_test",
            "test_builder",
        ),
        (
            &["resctl", "hashd", "--help"],
            "rackbench resctl hashd",
            "mem-hog",
        ),
        (&["resctl", "mem-hog", "--help"], "--wbps", "hashd"),
        (
            &["calibrate", "serve", "--help"],
            "rackbench calibrate serve",
            "--service-time-ms",
        ),
        (
            &["adsim", "client", "--help"],
            "rackbench adsim client",
            "rackbench adsim server",
        ),
        (
            &["feedsim", "leaf", "--help"],
            "rackbench feedsim leaf",
            "--num-instances",
        ),
    ] {
        let o = env.run(argv);
        let t = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(o.status.success(), "{argv:?}: {}", stderr(&o));
        assert!(t.contains(has), "{argv:?} lacks {has:?}:\n{t}");
        assert!(!t.contains(lacks), "{argv:?} has {lacks:?}:\n{t}");
    }
    let o = env.run(&["--version"]);
    let v = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success());
    assert!(v.starts_with("rackbench "), "{v}");
    assert!(v.contains("(commit ") && v.contains(" build)"), "{v}");
    assert!(v.contains("debug") || v.contains("release"), "{v}");
}

/// Completion scripts for bash (sourced by bash), zsh and fish, and the man
/// pages, one per command, benchmarks included.
#[test]
fn completions_and_man_pages() {
    let env = Env::new();
    let o = env.run(&["completions", "bash"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let script = env.path().join("rackbench.bash");
    std::fs::write(&script, &o.stdout).unwrap();
    let b = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source '{}' && complete -p rackbench",
            script.display()
        ))
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", stderr(&b));
    assert!(String::from_utf8_lossy(&b.stdout).contains("_rackbench"));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(text.contains("cachebench") && text.contains("distbench"));
    // bash completes job names, roles and hooks from the catalogue.
    let complete = |words: &str| {
        let o = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source '{}'; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
                 _rackbench rackbench \"${{COMP_WORDS[-1]}}\" \"${{COMP_WORDS[-2]}}\"; \
                 printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let got = complete("rackbench run calib");
    assert!(got.lines().any(|l| l == "calibrate_quick"), "{got}");
    assert!(got.lines().all(|l| l.starts_with("calib")), "{got}");
    let got = complete("rackbench info feedsim_m");
    assert!(got.lines().any(|l| l == "feedsim_mini"), "{got}");
    let got = complete("rackbench run adsim -r s");
    assert!(got.lines().any(|l| l == "server"), "{got}");
    let got = complete("rackbench run calibrate -k cpu");
    assert!(got.lines().any(|l| l == "cpu-mpstat"), "{got}");
    let got = complete("rackbench run feedsim_mini -i dur");
    assert!(got.lines().any(|l| l == "duration="), "{got}");
    // A benchmark's own flags and subcommands, from its parser.
    for (words, want) in [
        ("rackbench cachebench --json_t", "--json_test_config"),
        ("rackbench distbench test_s", "test_sequencer"),
        ("rackbench distbench node_manager --p", "--port"),
        ("rackbench adsim cl", "client"),
        ("rackbench feedsim --num-i", "--num-instances"),
        ("rackbench calibrate --fixed", "--fixed-qps"),
    ] {
        let got = complete(words);
        assert!(got.lines().any(|l| l == want), "{words}: {got}");
    }
    for shell in ["zsh", "fish"] {
        let o = env.run(&["completions", shell]);
        assert!(o.status.success() && !o.stdout.is_empty(), "{shell}");
    }
    let o = env.run(&["completions", "tcsh-nope"]);
    assert_eq!(o.status.code(), Some(2));
    // No folder: one page on stdout, nothing written.
    let o = env.run(&["man"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = String::from_utf8_lossy(&o.stdout);
    assert!(
        page.contains(".TH") && page.contains("system_check"),
        "{page}"
    );
    assert!(!env.path().join("rackbench.1").exists());
    let o = env.run(&["man", "pages"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for page in [
        "rackbench.1",
        "rackbench-run.1",
        "rackbench-cachebench.1",
        "rackbench-resctl.1",
    ] {
        let p = env.path().join("pages").join(page);
        let t = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(t.starts_with(".ie") || t.contains(".TH"), "{page}");
    }
    let cb = std::fs::read_to_string(env.path().join("pages/rackbench-cachebench.1")).unwrap();
    assert!(
        cb.contains("json_test_config"),
        "the benchmark's own usage is in its page"
    );
}

/// Every embedded job's arguments validate (`--dry-run`): a job file that
/// names a flag its workload does not take fails here, not on a user's run.
#[test]
fn every_embedded_job_validates() {
    let env = Env::new();
    let o = env.run(&["list"]);
    assert!(o.status.success());
    let listing = String::from_utf8_lossy(&o.stdout).into_owned();
    let jobs: Vec<&str> = listing
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(jobs.len() >= 11, "{jobs:?}");
    // benchpress' FeedSim jobs are all there.
    for j in [
        "feedsim_default",
        "feedsim_autoscale",
        "feedsim_autoscale_arm",
    ] {
        assert!(jobs.contains(&j), "{j} not listed: {jobs:?}");
    }
    for job in jobs {
        let o = env.run(&["run", job, "--dry-run"]);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        // A job with roles is checked role by role (with the one var
        // roles here require).
        if let Some(rest) = err.split("has roles (").nth(1) {
            let roles: Vec<&str> = rest.split(')').next().unwrap_or("").split(", ").collect();
            assert!(roles.len() >= 2, "{job}: {err}");
            for role in roles {
                let o = env.run(&[
                    "run",
                    job,
                    "-r",
                    role,
                    "-i",
                    r#"{"server_ip": "::1"}"#,
                    "--dry-run",
                ]);
                assert!(
                    o.status.success(),
                    "{job} -r {role}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            continue;
        }
        assert!(o.status.success(), "{job}: {err}");
    }
}

#[test]
fn a_job_named_twice_is_refused() {
    let env = Env::new();
    let o = env.run(&["run", "calibrate_quick", "calibrate_quick"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("job 'calibrate_quick' is named more than once")
            && stderr(&o).contains("-n N"),
        "{}",
        stderr(&o)
    );
    no_panic(&o);
}

#[test]
fn disable_hooks_runs_none_but_lists_them() {
    let env = Env::new();
    let jobs = env.jobs(&[("t.toml", JOBS.as_bytes())]);
    let o = env.run(&[
        "--jobs-dir",
        jobs.to_str().unwrap(),
        "run",
        "broken",
        "--disable-hooks",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Hooks globally disabled as requested"),
        "{}",
        stderr(&o)
    );
    assert!(!env.path().join("before.txt").exists(), "a hook ran");
    let r = &env.reports()[0];
    assert!(
        r["benchmark_hooks"][0]
            .as_str()
            .unwrap()
            .starts_with("shell: "),
        "{r}"
    );
    assert!(r["metrics"].get("hooks").is_none(), "{r}");
    no_panic(&o);
}

#[test]
fn hook_args_give_the_k_hooks_their_options() {
    let env = Env::new();
    let jobs = env.jobs(&[("t.toml", JOBS.as_bytes())]);
    let j = jobs.to_str().unwrap();
    // benchpress' spellings: --role_input, --hooks, -a.
    let o = env.run(&[
        "--jobs-dir",
        j,
        "run",
        "broken",
        "--role_input",
        "{}",
        "--hooks",
        "cpu-mpstat",
        "-a",
        r#"{"cpu-mpstat": {"interval_secs": 0.5}}"#,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let r = &env.reports()[0];
    let hooks: Vec<&str> = r["benchmark_hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert!(
        hooks
            .iter()
            .any(|h| h.starts_with("cpu-mpstat: ") && h.contains("0.5")),
        "{hooks:?}"
    );
    // Options for a hook not given with -k, and options given twice, are
    // refused before anything runs.
    for (args, want) in [
        (
            vec!["-a", r#"{"perf": {}}"#],
            "names hook 'perf', which is not given with -k",
        ),
        (
            vec![
                "-k",
                r#"cpu-mpstat:{"interval_secs": 1}"#,
                "-a",
                r#"{"cpu-mpstat": {"interval_secs": 2}}"#,
            ],
            "give them once",
        ),
        (vec!["-a", "[1]"], "must be a JSON object"),
    ] {
        let mut a = vec!["--jobs-dir", j, "run", "broken"];
        a.extend(args);
        let o = env.run(&a);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(want), "{}", stderr(&o));
        no_panic(&o);
    }
}

#[test]
fn machine_specs_carry_benchpress_system_spec_blocks() {
    let env = Env::new();
    let jobs = env.jobs(&[("t.toml", JOBS.as_bytes())]);
    let j = jobs.to_str().unwrap();
    let o = env.run(&["--jobs-dir", j, "run", "fixed", "-i", r#"{"rates": "50"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    let reports = env.reports();
    let dir = env.path().join(format!(
        "benchmark_metrics_{}",
        reports[0]["run_id"].as_str().unwrap()
    ));
    let specs: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("machine_specs.json")).unwrap())
            .unwrap();
    // dmidecode: the parsed tables, or why they could not be read.
    let dmi = specs["dmidecode"].as_object().unwrap();
    assert!(
        dmi.contains_key("_unavailable") || dmi.values().all(Value::is_array),
        "{dmi:?}"
    );
    // sys_packages: a list of strings (empty on an unknown distribution),
    // or why the package query failed.
    let pk = &specs["sys_packages"];
    assert!(
        pk.as_array()
            .is_some_and(|a| a.iter().all(Value::is_string))
            || pk["_unavailable"].is_string(),
        "{pk}"
    );
    // kernel_params: sysctl names to values, read from /proc/sys.
    let kp = specs["kernel_params"].as_object().unwrap();
    if std::path::Path::new("/proc/sys/kernel/ostype").exists() {
        assert_eq!(kp["kernel.ostype"], "Linux");
        assert!(kp.values().all(Value::is_string));
    }
}

/// benchpress' non-object hooks from the command line: cpu-limit (a hex
/// mask), result (a list of files copied as <job>_<name>), file (paths made
/// before and removed after) and user-script (a background script); the
/// report has each one's summary. A bad mask stops the run before any job.
#[test]
fn benchpress_cpu_limit_result_file_and_user_script_hooks() {
    let env = Env::new();
    let jobs = env.jobs(&[("t.toml", JOBS.as_bytes())]);
    let j = jobs.to_str().unwrap();
    let src = env.path().join("app.log");
    std::fs::write(&src, "from the app\n").unwrap();
    let made = env.path().join("scratch-dir");
    let script = env.path().join("watch.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"watching $*\"\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let result = format!("result:[{}]", serde_json::json!(src));
    let file = format!(
        "file:[{}]",
        serde_json::json!({"type": "dir", "path": made})
    );
    let user = format!(
        "user-script:{}",
        serde_json::json!({"hook_path": script, "args": ["-i", "1"], "background_mode": {"duration": 5}})
    );
    let o = env.run(&[
        "--jobs-dir",
        j,
        "run",
        "fixed",
        "-i",
        r#"{"rates": "50"}"#,
        "-k",
        r#"cpu-limit:"1""#,
        "-k",
        &result,
        "-k",
        &file,
        "-k",
        &user,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = &env.reports()[0];
    let h = &r["metrics"]["hooks"];
    assert_eq!(h["cpu-limit"]["cpus"], serde_json::json!([0]), "{h}");
    assert_eq!(
        h["result"]["copied"],
        serde_json::json!(["fixed_app.log"]),
        "{h}"
    );
    assert_eq!(h["file"]["deleted"].as_array().unwrap().len(), 1, "{h}");
    assert!(
        !made.exists(),
        "the hook's directory is removed after the job"
    );
    assert_eq!(h["user-script"]["interrupted_after_job"], true, "{h}");
    let dir = env.path().join(format!(
        "benchmark_metrics_{}",
        r["run_id"].as_str().unwrap()
    ));
    assert_eq!(
        std::fs::read_to_string(dir.join("fixed_app.log")).unwrap(),
        "from the app\n"
    );
    let out = std::fs::read_to_string(dir.join("fixed_watch_hook_output_1")).unwrap();
    assert!(out.contains("watching -i 1 -a sleep 5"), "{out}");

    // A mask that is not hex is refused before anything runs.
    let o = env.run(&["--jobs-dir", j, "run", "fixed", "-k", r#"cpu-limit:"zz""#]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not a valid CPU mask"),
        "{}",
        stderr(&o)
    );
    no_panic(&o);
}

/// `run` on a terminal prints a short summary per job (status, headline
/// figures with their spread over iterations, where the reports are) and
/// no JSON; the job's own text goes to stderr. stdout is a real terminal:
/// util-linux's `script` runs the command on a pseudo-terminal.
#[test]
fn run_on_a_terminal_prints_a_summary_not_json() {
    let env = Env::new();
    if Command::new("script").arg("--version").output().is_err() {
        testenv::skip(
            "script",
            "util-linux's script (a pseudo-terminal) is not installed",
        );
        return;
    }
    let bin = env!("CARGO_BIN_EXE_rackbench");
    let o = Command::new("script")
        .current_dir(env.path())
        .env("RACKBENCH_DB", env.path().join("results.db"))
        .env_remove("RACKBENCH_JOBS_DIR")
        .args([
            "-qec",
            &format!("{bin} run cachebench_mini -n 2 2>stderr.txt"),
            "/dev/null",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = std::fs::read_to_string(env.path().join("stderr.txt")).unwrap_or_default();
    assert!(o.status.success(), "{err}");
    let out = String::from_utf8_lossy(&o.stdout).replace("\r\n", "\n");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("cachebench_mini: 2 ok (2 runs, "),
        "{out}"
    );
    assert!(
        lines[1].starts_with("  throughput  ") && lines[1].contains(" ops/s ± "),
        "{out}"
    );
    assert!(lines[1].ends_with(", 2 runs)"), "{out}");
    assert!(
        lines[2].starts_with("  hit ratio   ") && lines[2].contains("% ± "),
        "{out}"
    );
    assert!(
        lines[3].starts_with("  reports: ./benchmark_metrics_")
            && lines[3].ends_with("/cachebench_mini_metrics_*.json (2)"),
        "{out}"
    );
    assert_eq!(lines.len(), 4, "{out}");
    // The reports the summary points at exist; the text is on stderr.
    assert_eq!(env.reports().len(), 2);
    assert!(err.contains("== Test Results =="), "{err}");
    assert!(
        err.contains("running job cachebench_mini (iteration 2)"),
        "{err}"
    );
}
