//! `rackbench results push`: a machine's runs copied to a fleet's store (a
//! real PostgreSQL server, or another SQLite file) once, however often it
//! is pushed; `--db postgres://...` and RACKBENCH_DB=postgres://... read
//! them there.
#![allow(clippy::unwrap_used)]

use harness::store::{RunRow, Store};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn rackbench(args: &[&str], env_db: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rackbench"));
    c.args(args)
        .env_remove("RACKBENCH_DB")
        .env_remove("RACKBENCH_JOBS_DIR")
        .stdin(Stdio::null());
    if let Some(db) = env_db {
        c.env("RACKBENCH_DB", db);
    }
    c.output().unwrap()
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// A local store with two runs (three rows).
fn local(dir: &Path) -> String {
    let path = dir.join("local.db");
    let s = Store::open(&path).unwrap();
    for (run_id, iteration) in [("pusha001", 1), ("pusha001", 2), ("pushb002", 1)] {
        s.record(&RunRow {
            id: 0,
            run_id: run_id.into(),
            job: "calibrate_fixed".into(),
            benchmark: "calibrate".into(),
            role: None,
            iteration,
            timestamp: 1_780_272_000 + u64::from(iteration),
            success: true,
            hostname: "node7".into(),
            args: vec!["--fixed-qps".into(), "100".into()],
            machine: json!({"hostname": "node7"}),
            metrics: json!({"final_achieved_qps": 99.5}),
            report_path: None,
            artifacts_dir: None,
            record: None,
            duration_secs: None,
        })
        .unwrap();
    }
    path.to_string_lossy().into_owned()
}

fn pushes_once_to(target: &str, dir: &Path) {
    let db = local(dir);
    let out = ok(rackbench(
        &["--db", &db, "results", "push", "--to", target],
        None,
    ));
    assert_eq!(out, "pushed 3 runs, skipped 0 already there\n");
    let out = ok(rackbench(&["results", "push", "--to", target], Some(&db)));
    assert_eq!(out, "pushed 0 runs, skipped 3 already there\n");
    let list = ok(rackbench(&["--db", target, "results", "list"], None));
    assert!(
        list.contains("pusha001") && list.contains("pushb002"),
        "{list}"
    );
    let show = ok(rackbench(&["results", "show", "pusha001"], Some(target)));
    let rows: serde_json::Value = serde_json::from_str(&show).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2, "{show}");
    assert_eq!(rows[1]["metrics"]["final_achieved_qps"], 99.5);
}

#[test]
fn push_to_postgres_copies_once() {
    let Some(pg) = testenv::Postgres::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    pushes_once_to(&pg.create_db("fleet"), dir.path());

    // `run` records straight into PostgreSQL (RACKBENCH_DB=postgres://...):
    // a job that fails fast (its server is unreachable) still makes a row.
    let url = pg.create_db("direct");
    std::fs::write(
        dir.path().join("t.toml"),
        "[[job]]\nname = \"unreachable\"\nbenchmark = \"calibrate\"\ndescription = \"x\"\nargs = [\"--server 127.0.0.1:1\", \"--fixed-qps 10\", \"--probe-secs 1\"]\n",
    )
    .unwrap();
    let o = rackbench(
        &[
            "--jobs-dir",
            &dir.path().to_string_lossy(),
            "--output-dir",
            &dir.path().to_string_lossy(),
            "run",
            "unreachable",
        ],
        Some(&url),
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows = Store::open(Path::new(&url)).unwrap().recent(10).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].job.as_str(), rows[0].success),
        ("unreachable", false)
    );
}

#[test]
fn push_to_another_sqlite_file_copies_once() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("fleet.db");
    pushes_once_to(&target.to_string_lossy(), dir.path());
}

#[test]
fn an_unreachable_postgres_is_a_clear_error_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let db = local(dir.path());
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://u:hunter2@127.0.0.1:{port}/fleet");
    let o = rackbench(&["--db", &db, "results", "push", "--to", &url], None);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("postgres://u@127.0.0.1:{port}/fleet")),
        "{err}"
    );
    assert!(err.contains("cannot connect"), "{err}");
    // The cause and the part of the URL to fix.
    assert!(err.contains("Connection refused"), "{err}");
    assert!(
        err.contains(&format!("the URL's host and port: 127.0.0.1:{port}")),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
}

/// A database or role the server does not have: its own message and the
/// part of the URL that names it.
#[test]
fn a_wrong_database_or_role_names_the_servers_message() {
    let Some(pg) = testenv::Postgres::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = local(dir.path());
    let url = pg.db_url("nosuchdb");
    let o = rackbench(&["--db", &db, "results", "push", "--to", &url], None);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(r#"the server says: FATAL database "nosuchdb" does not exist (the URL's database 'nosuchdb')"#),
        "{err}"
    );
    let url = pg
        .create_db("fleet")
        .replace("postgres://postgres@", "postgres://nobody:pw@");
    let o = rackbench(&["--db", &db, "results", "push", "--to", &url], None);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(r#"role "nobody" does not exist (the URL's user 'nobody')"#),
        "{err}"
    );
    assert!(!err.contains(":pw@"), "{err}");
}

/// `pushed N runs, skipped M already there` as (N, M).
fn counts(out: &str) -> (usize, usize) {
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(words.len(), 7, "{out}");
    assert_eq!(
        (words[0], words[2], words[3]),
        ("pushed", "runs,", "skipped")
    );
    (words[1].parse().unwrap(), words[4].parse().unwrap())
}

/// Two `results push` of the same machine's store running at once into
/// one PostgreSQL store copy each run once, and their counts add up.
#[test]
fn concurrent_pushes_to_postgres_copy_each_run_once() {
    let Some(pg) = testenv::Postgres::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("many.db");
    let s = Store::open(&db).unwrap();
    let n = 600;
    for i in 0..n {
        s.record(&RunRow {
            id: 0,
            run_id: format!("many{:04}", i / 3),
            job: "calibrate_fixed".into(),
            benchmark: "calibrate".into(),
            role: None,
            iteration: u32::try_from(i % 3 + 1).unwrap(),
            timestamp: 1_780_272_000,
            success: true,
            hostname: "node7".into(),
            args: vec![],
            machine: json!({"hostname": "node7"}),
            metrics: json!({"final_achieved_qps": 99.5}),
            report_path: None,
            artifacts_dir: None,
            record: None,
            duration_secs: None,
        })
        .unwrap();
    }
    drop(s);
    let target = pg.create_db("fleet");
    let db = db.to_string_lossy().into_owned();
    let outs: Vec<(usize, usize)> = std::thread::scope(|sc| {
        let pushes: Vec<_> = (0..2)
            .map(|_| {
                sc.spawn(|| {
                    counts(&ok(rackbench(
                        &["--db", &db, "results", "push", "--to", &target],
                        None,
                    )))
                })
            })
            .collect();
        pushes.into_iter().map(|p| p.join().unwrap()).collect()
    });
    assert_eq!(outs[0].0 + outs[1].0, n, "{outs:?}");
    assert_eq!(outs[0].1 + outs[1].1, n, "{outs:?}");
    let rows = Store::open(Path::new(&target))
        .unwrap()
        .select(&Default::default())
        .unwrap();
    assert_eq!(rows.len(), n);
    let mut ids: Vec<_> = rows.iter().map(|r| (&r.run_id, r.iteration)).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n);
}
