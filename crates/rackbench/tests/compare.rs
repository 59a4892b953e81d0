//! `rackbench results compare` on a store of constructed runs with known
//! answers: a known shift (faster, and lower latency), equal means, a
//! single run a side (noise cannot be judged, runs suggested from the
//! store's history), sides chosen by run ids, host and date, and `--json`.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use harness::store::{RunRow, Store};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// 2026-06-01 00:00:00 UTC.
const JUNE: u64 = 1_780_272_000;

/// Small zero-mean noise, the same size on both sides.
const NOISE: [f64; 5] = [-1.2, 0.4, 0.9, -0.3, 0.2];
const NOISE2: [f64; 5] = [0.7, -0.9, 0.1, 0.5, -0.4];

struct Db {
    dir: tempfile::TempDir,
    store: Store,
}

impl Db {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("results.db")).unwrap();
        Db { dir, store }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("results.db")
    }

    /// Records one invocation `run_id` of job `job` on `host` at `ts`: an
    /// iteration per entry of `metrics`.
    fn add(&self, run_id: &str, job: &str, host: &str, ts: u64, metrics: &[Value]) {
        for (i, m) in metrics.iter().enumerate() {
            self.store
                .record(&RunRow {
                    id: 0,
                    run_id: run_id.into(),
                    job: job.into(),
                    // The benchmark is the job name up to its first `_`.
                    benchmark: job.split('_').next().unwrap_or(job).into(),
                    role: None,
                    iteration: i as u32 + 1,
                    timestamp: ts + i as u64,
                    success: true,
                    hostname: host.into(),
                    args: vec!["--fixed-qps".into(), "100".into()],
                    machine: json!({ "hostname": host }),
                    metrics: m.clone(),
                    report_path: None,
                    artifacts_dir: None,
                    record: None,
                    duration_secs: None,
                })
                .unwrap();
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_rackbench"))
            .current_dir(self.dir.path())
            .env_remove("RACKBENCH_DB")
            .env_remove("RACKBENCH_JOBS_DIR")
            .arg("--db")
            .arg(self.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// stdout of a command that must succeed.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }
}

/// Five runs: QPS `qps` and p99 `p99_ms` plus noise, two threads.
fn five(qps: f64, p99_ms: f64, noise: &[f64; 5]) -> Vec<Value> {
    noise
        .iter()
        .map(|n| {
            json!({
                "final_achieved_qps": qps + n,
                "final_latency": {"p99_ms": p99_ms + n / 10.0},
                "threads": {"serving": 2},
            })
        })
        .collect()
}

/// The table line of `metric` (the tables start at the first header).
fn line<'a>(out: &'a str, metric: &str) -> &'a str {
    let tables = &out[out
        .find("  METRIC ")
        .unwrap_or_else(|| panic!("no table in:\n{out}"))..];
    tables
        .lines()
        .find(|l| l.starts_with("  ") && l.split_whitespace().next() == Some(metric))
        .unwrap_or_else(|| panic!("no line for {metric} in:\n{out}"))
}

#[test]
fn a_known_shift_by_run_ids_with_direction_words_and_json() {
    let db = Db::new();
    // B is 10% faster: 110 QPS against 100, p99 18 ms against 20.
    db.add(
        "aaaa0001",
        "calibrate",
        "h1",
        JUNE,
        &five(100.0, 20.0, &NOISE),
    );
    db.add(
        "bbbb0001",
        "calibrate",
        "h1",
        JUNE + 100,
        &five(110.0, 18.0, &NOISE2),
    );
    let out = db.ok(&["results", "compare", "aaaa0001", "bbbb0001"]);
    assert!(
        out.starts_with(
            "A: run aaaa0001: 5 run(s) of 1 invocation(s) on h1\nB: run bbbb0001: 5 run(s) of 1 invocation(s) on h1\n"
        ),
        "{out}"
    );
    // Whether anything differs comes first; then per job its results.
    assert!(
        out.contains("\nB differs from A in 2 of 2 results: calibrate final_"),
        "{out}"
    );
    assert!(out.contains("\ncalibrate (5 vs 5 runs)\n"), "{out}");
    let qps = line(&out, "final_achieved_qps");
    // Mean ± relative stdev (0.7969 of 100), the change, its interval.
    assert!(qps.contains(" 100 ±0.80% "), "{qps}");
    assert!(qps.contains(" +10.0%  +8."), "{qps}");
    assert!(qps.ends_with(" faster"), "{qps}");
    let p99 = line(&out, "final_latency.p99_ms");
    assert!(p99.contains(" -10.0%  -"), "{p99}");
    assert!(p99.ends_with(" faster"), "{p99}");
    // A setting the same on both sides is not a result: counted, not shown.
    assert!(!out.contains("threads.serving"), "{out}");
    assert!(
        out.contains("1 settings and counts (metrics with no better direction) are the same"),
        "{out}"
    );
    // The verdict sentence is in the legend once, not on each row; lines
    // fit 100 columns.
    assert_eq!(out.matches("within noise:").count(), 1, "{out}");
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");

    // Swapped: B slower, latency higher.
    let out = db.ok(&["results", "compare", "bbbb0001", "aaaa0001"]);
    let qps = line(&out, "final_achieved_qps");
    assert!(qps.contains(" -9.1% ") && qps.ends_with(" slower"), "{qps}");
    let p99 = line(&out, "final_latency.p99_ms");
    assert!(
        p99.contains(" +11.1% ") && p99.ends_with(" slower"),
        "{p99}"
    );

    // The same comparison as JSON.
    let j: Value =
        serde_json::from_str(&db.ok(&["results", "compare", "aaaa0001", "bbbb0001", "--json"]))
            .unwrap();
    assert_eq!(j["a"]["runs"], 5);
    assert_eq!(j["b"]["hosts"], json!(["h1"]));
    let m = j["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "final_achieved_qps")
        .unwrap();
    assert_eq!(m["better"], "higher");
    assert_eq!(
        m["verdict"],
        json!({"kind": "significant", "change": "higher", "judgement": "better"})
    );
    assert!((m["change_pct"].as_f64().unwrap() - 10.0).abs() < 1e-9);
    let ci = m["welch"]["change_pct_ci"].as_array().unwrap();
    let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
    assert!(lo < 10.0 && 10.0 < hi, "{ci:?}");
    assert_eq!(m["a"]["n"], 5);
    assert!(
        m["text"]
            .as_str()
            .unwrap()
            .starts_with("B is 10.0% higher, faster")
    );
}

#[test]
fn equal_means_by_host_and_by_date() {
    let db = Db::new();
    // The same machine's speed on two hosts; h2 also has later, faster runs.
    db.add(
        "host0001",
        "calibrate",
        "h1",
        JUNE - 1000,
        &five(100.0, 20.0, &NOISE),
    );
    db.add(
        "host0002",
        "calibrate",
        "h2",
        JUNE - 900,
        &five(100.0, 20.0, &NOISE2),
    );
    db.add(
        "host0003",
        "calibrate",
        "h2",
        JUNE + 50,
        &five(120.0, 20.0, &NOISE),
    );
    // Another job on both hosts: --job leaves it out.
    db.add(
        "other001",
        "cachebench_mini",
        "h1",
        JUNE - 800,
        &[json!({"ops_per_sec": 5.0})],
    );
    db.add(
        "other002",
        "cachebench_mini",
        "h2",
        JUNE - 700,
        &[json!({"ops_per_sec": 6.0})],
    );

    let out = db.ok(&[
        "results",
        "compare",
        "--job",
        "calibrate",
        "--a-host",
        "h1",
        "--b-host",
        "h2",
        "--a-until",
        "2026-06-01",
    ]);
    assert!(
        out.contains("B: job calibrate, host h2: 10 run(s) of 2 invocation(s) on h2"),
        "{out}"
    );
    // h2 with all its runs is not the same as h1: 110 against 100 on
    // average, but noisier (two groups).
    let qps = line(&out, "final_achieved_qps");
    assert!(
        qps.contains(" +10.0% ") && qps.ends_with(" faster"),
        "{out}"
    );
    // Up to June only: equal means.
    let out = db.ok(&[
        "results",
        "compare",
        "--job",
        "calibrate",
        "--a-host",
        "h1",
        "--b-host",
        "h2",
        "--a-until",
        "2026-06-01",
        "--b-until",
        "2026-06-01",
    ]);
    let qps = line(&out, "final_achieved_qps");
    assert!(qps.ends_with(" within noise"), "{qps}");
    assert!(out.contains("\ncalibrate (5 vs 5 runs)\n"), "{out}");
    assert!(
        out.contains(
            "\nNo result differs between A and B (2 results compared at 95% confidence).\n"
        ),
        "{out}"
    );
    assert!(!out.contains("cachebench_mini"), "{out}");

    // By date on one host: h2 before June against h2 from June on.
    let out = db.ok(&[
        "results",
        "compare",
        "--job",
        "calibrate",
        "--host",
        "h2",
        "--a-until",
        "2026-06-01",
        "--b-since",
        "2026-06-01",
    ]);
    assert!(
        out.contains("A: job calibrate, host h2, until 2026-06-01: 5 run(s)"),
        "{out}"
    );
    let qps = line(&out, "final_achieved_qps");
    assert!(
        qps.contains(" +20.0% ") && qps.ends_with(" faster"),
        "{out}"
    );

    // Without --job, by host: both jobs.
    let out = db.ok(&[
        "results",
        "compare",
        "--a-host",
        "h1",
        "--b-host",
        "h2",
        "--b-since",
        "2026-05-01",
        "--b-until",
        "2026-06-01",
    ]);
    // One run a side: the noise is unknown and no history tells it.
    assert!(out.contains("\ncachebench_mini (1 vs 1 runs)\n"), "{out}");
    assert!(line(&out, "ops_per_sec").ends_with(" ? runs"), "{out}");
    assert!(out.contains("\ncalibrate (5 vs 5 runs)\n"), "{out}");
}

#[test]
fn one_run_a_side_says_noise_cannot_be_judged_and_suggests_runs() {
    let db = Db::new();
    let one = |qps: f64| vec![json!({ "final_achieved_qps": qps })];
    db.add("single01", "calibrate", "h1", JUNE, &one(100.0));
    db.add("single02", "calibrate", "h1", JUNE + 10, &one(104.0));
    let out = db.ok(&["results", "compare", "single01", "single02"]);
    let qps = line(&out, "final_achieved_qps");
    assert!(
        qps.contains(" 100  104  +4.0% ") && qps.ends_with(" ? runs"),
        "{out}"
    );
    assert!(
        out.contains("No result differs between A and B (1 result compared"),
        "{out}"
    );
    let text = |args: &[&str]| -> String {
        let j: Value = serde_json::from_str(&db.ok(args)).unwrap();
        j["metrics"][0]["text"].as_str().unwrap().to_string()
    };
    assert_eq!(
        text(&["results", "compare", "single01", "single02", "--json"]),
        "noise cannot be judged with 1 vs 1 runs: B is 4.0% higher; no repeated runs of the job on these hosts tell the noise: run each side at least 5 times (`rackbench run calibrate -n 5`)"
    );
    // History: an earlier invocation of 2 runs with stdev 4 (96 ± 2.83),
    // and one on another host that does not count.
    let d = 8.0f64.sqrt();
    db.add(
        "hist0001",
        "calibrate",
        "h1",
        JUNE - 100,
        &[
            json!({ "final_achieved_qps": 96.0 - d }),
            json!({ "final_achieved_qps": 96.0 + d }),
        ],
    );
    db.add(
        "hist0002",
        "calibrate",
        "h9",
        JUNE - 50,
        &[
            json!({ "final_achieved_qps": 1.0 }),
            json!({ "final_achieved_qps": 900.0 }),
        ],
    );
    let out = db.ok(&["results", "compare", "single01", "single02"]);
    // A difference of 4 with stdev 4: 17 runs per side (R's power.t.test
    // gives 16.7 for an effect of 1 sd at 5% and 80% power).
    assert!(
        line(&out, "final_achieved_qps").ends_with(" ? ~17 runs"),
        "{out}"
    );
    assert_eq!(
        text(&["results", "compare", "single01", "single02", "--json"]),
        "noise cannot be judged with 1 vs 1 runs: B is 4.0% higher; about 17 runs per side would resolve a difference this size at 95% confidence with 80% power (stdev 4.0% of A's mean, pooled over 2 other runs of the job on these hosts)"
    );
    let j: Value =
        serde_json::from_str(&db.ok(&["results", "compare", "single01", "single02", "--json"]))
            .unwrap();
    let v = &j["metrics"][0]["verdict"];
    assert_eq!(v["kind"], "noise_unknown");
    assert_eq!(v["suggestion"]["runs_per_side"], 17);
    assert_eq!(v["suggestion"]["noise"]["runs"], 2);
    assert_eq!(j["metrics"][0]["welch"], Value::Null);
}

#[test]
fn bad_selections_are_clear_errors() {
    let db = Db::new();
    db.add(
        "aaaa0001",
        "calibrate",
        "h1",
        JUNE,
        &five(100.0, 20.0, &NOISE),
    );
    let err = |args: &[&str]| {
        let o = db.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        String::from_utf8(o.stderr).unwrap()
    };
    let e = err(&["results", "compare", "aaaa0001", "ffffffff"]);
    assert!(e.contains("no run with id 'ffffffff'"), "{e}");
    let e = err(&["results", "compare", "--job", "calibrate", "--a-host", "h1"]);
    assert!(e.contains("side B selects no runs of its own"), "{e}");
    let e = err(&["results", "compare", "aaaa0001", "aaaa0001"]);
    assert!(e.contains("the sides overlap: 5 run(s)"), "{e}");
    let e = err(&["results", "compare", "--a-host", "h1", "--b-host", "nohost"]);
    assert!(e.contains("side B (host nohost) holds no run"), "{e}");
    let e = err(&["results", "compare", "--a-host", "h1", "--b-since", "June"]);
    assert!(e.contains("--b-since: 'June' is not a date"), "{e}");
}
