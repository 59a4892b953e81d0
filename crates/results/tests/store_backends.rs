//! The same store tests against both backends: a SQLite file and a real
//! PostgreSQL server (started by testenv; skipped, visibly, when
//! PostgreSQL is not installed).
#![allow(clippy::unwrap_used)]

use results::record::Record;
use results::store::{RunFilter, RunRow, Store};
use serde_json::json;

fn row(run_id: &str, job: &str, host: &str, ts: u64, ok: bool) -> RunRow {
    RunRow {
        id: 0,
        run_id: run_id.into(),
        job: job.into(),
        benchmark: "calibrate".into(),
        role: None,
        iteration: 1,
        timestamp: ts,
        success: ok,
        hostname: host.into(),
        args: vec!["-x".into(), "a b".into()],
        machine: json!({"hostname": host, "cpus": 2}),
        metrics: json!({"final_achieved_qps": 10.5, "nested": {"p99_ms": 2.0}, "history": [1, 2]}),
        report_path: None,
        artifacts_dir: Some("d".into()),
        record: None,
        duration_secs: Some(12.345),
    }
}

/// Records, reads back by run id, recent and successes.
fn records_and_reads_back(s: &Store) {
    let mut a = row("aaaaaaaa", "j", "h", 1, true);
    a.role = Some("server".into());
    a.iteration = 3;
    a.record = Some(Record::of("calibrate", 1, &json!({"qps": 3})));
    let id_a = s.record(&a).unwrap();
    let id_b = s.record(&row("bbbbbbbb", "j", "h", 2, false)).unwrap();
    assert!(id_b > id_a);
    let got = s.by_run_id("aaaaaaaa").unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0], RunRow { id: id_a, ..a });
    assert_eq!(s.successes("j", None).unwrap().len(), 1);
    assert_eq!(s.successes("j", Some(0)).unwrap().len(), 0);
    assert_eq!(s.recent(10).unwrap()[0].run_id, "bbbbbbbb");
    assert_eq!(s.recent(1).unwrap().len(), 1);
    assert!(s.has_run("bbbbbbbb").unwrap());
    assert!(!s.has_run("cccccccc").unwrap());
}

/// Each filter kind of `select`, alone and combined.
fn selects_with_each_filter(s: &Store) {
    for (run, job, host, ts, ok) in [
        ("r1", "j", "h1", 100, true),
        ("r1", "k", "h1", 100, true),
        ("r2", "j", "h2", 200, true),
        ("r3", "j", "h2", 300, false),
    ] {
        s.record(&row(run, job, host, ts, ok)).unwrap();
    }
    let ids = |f: RunFilter| {
        s.select(&f)
            .unwrap()
            .iter()
            .map(|r| format!("{}/{}", r.run_id, r.job))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(RunFilter::default()).len(), 4);
    let f = RunFilter::default;
    assert_eq!(
        ids(RunFilter {
            run_ids: vec!["r2".into(), "r3".into()],
            ..f()
        }),
        ["r2/j", "r3/j"]
    );
    assert_eq!(
        ids(RunFilter {
            jobs: vec!["k".into()],
            ..f()
        }),
        ["r1/k"]
    );
    assert_eq!(
        ids(RunFilter {
            hosts: vec!["h2".into()],
            ..f()
        }),
        ["r2/j", "r3/j"]
    );
    assert_eq!(
        ids(RunFilter {
            since: Some(200),
            ..f()
        }),
        ["r2/j", "r3/j"]
    );
    assert_eq!(
        ids(RunFilter {
            until: Some(200),
            ..f()
        }),
        ["r1/j", "r1/k"]
    );
    assert_eq!(
        ids(RunFilter {
            success_only: true,
            ..f()
        }),
        ["r1/j", "r1/k", "r2/j"]
    );
    assert_eq!(
        ids(RunFilter {
            jobs: vec!["j".into()],
            success_only: true,
            since: Some(150),
            ..f()
        }),
        ["r2/j"]
    );
    assert_eq!(
        ids(RunFilter {
            run_ids: vec!["r1".into(), "r3".into()],
            until: Some(300),
            ..f()
        }),
        ["r1/j", "r1/k"]
    );
}

/// `push_to` copies every row once; a second push copies nothing.
fn pushes_once(from: &Store, to: &Store) {
    let mut a = row("pushpush", "j", "h", 5, true);
    from.record(&a).unwrap();
    a.role = Some("client".into());
    from.record(&a).unwrap();
    a.iteration = 2;
    from.record(&a).unwrap();
    let n = from.push_to(to).unwrap();
    assert_eq!((n.pushed, n.skipped), (3, 0));
    let n = from.push_to(to).unwrap();
    assert_eq!((n.pushed, n.skipped), (0, 3));
    let strip = |rows: Vec<RunRow>| {
        rows.into_iter()
            .map(|r| RunRow { id: 0, ..r })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        strip(to.by_run_id("pushpush").unwrap()),
        strip(from.by_run_id("pushpush").unwrap())
    );
}

fn sqlite(dir: &tempfile::TempDir, name: &str) -> Store {
    Store::open(&dir.path().join(name)).unwrap()
}

#[test]
fn sqlite_backend() {
    let d = tempfile::tempdir().unwrap();
    records_and_reads_back(&sqlite(&d, "a.db"));
    selects_with_each_filter(&sqlite(&d, "b.db"));
    pushes_once(&sqlite(&d, "c.db"), &sqlite(&d, "d.db"));
    assert!(!sqlite(&d, "a.db").is_postgres());
}

/// The same tests on a real PostgreSQL server, each in its own database;
/// then the same run recorded in both reads back identically, and the
/// schema is made once however often the store is opened.
#[test]
fn postgres_backend() {
    let Some(pg) = testenv::Postgres::start() else {
        return;
    };
    let open = |name: &str| Store::open(std::path::Path::new(&pg.create_db(name))).unwrap();
    let s = open("records");
    assert!(s.is_postgres());
    records_and_reads_back(&s);
    selects_with_each_filter(&open("selects"));
    pushes_once(&open("pushfrom"), &open("pushto"));
    // SQLite to PostgreSQL and back.
    let d = tempfile::tempdir().unwrap();
    pushes_once(&sqlite(&d, "local.db"), &open("fleet"));
    pushes_once(&open("fleet2"), &sqlite(&d, "back.db"));

    let lite = sqlite(&d, "same.db");
    let post = open("same");
    let mut r = row("samesame", "j", "h", u64::from(u32::MAX) + 7, true);
    r.role = Some("leaf".into());
    r.report_path = Some("/tmp/r.json".into());
    r.record = Some(Record::of(
        "calibrate",
        1,
        &json!({"qps": 3.25, "x": [1, "y"]}),
    ));
    assert_eq!(lite.record(&r).unwrap(), post.record(&r).unwrap());
    let from_lite = lite.by_run_id("samesame").unwrap();
    assert_eq!(from_lite, post.by_run_id("samesame").unwrap());
    assert_eq!(from_lite[0].record, r.record);
    assert_eq!(
        lite.select(&RunFilter::default()).unwrap(),
        post.select(&RunFilter::default()).unwrap()
    );
    drop(post);
    let again = Store::open(std::path::Path::new(&pg.db_url("same"))).unwrap();
    assert_eq!(again.by_run_id("samesame").unwrap(), from_lite);
}

#[test]
fn postgres_errors_name_the_url_without_its_password() {
    let Some(pg) = testenv::Postgres::start() else {
        return;
    };
    let url = pg
        .db_url("nosuchdb")
        .replace("postgres@", "postgres:s3cret@");
    let e = Store::open(std::path::Path::new(&url))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("nosuchdb"), "{e}");
    assert!(e.contains("cannot connect"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
    let e = Store::open(std::path::Path::new("postgres://u:pw@127.0.0.1:notaport/x"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("postgres://u@127.0.0.1:notaport/x"), "{e}");
    assert!(!e.contains("pw"), "{e}");
}

#[test]
fn urls_are_redacted() {
    use results::store::redact_url;
    assert_eq!(
        redact_url("postgres://u:p@h:5/db?password=x&sslmode=disable"),
        "postgres://u@h:5/db?sslmode=disable"
    );
    assert_eq!(redact_url("postgresql://h/db"), "postgresql://h/db");
    assert!(results::store::is_postgres_url("postgresql://h/db"));
    assert!(!results::store::is_postgres_url("/var/lib/postgres://x"));
}

/// `n` distinct runs (two jobs, both roles, several iterations) in a new
/// SQLite store at `path`.
fn many_runs(path: &std::path::Path, n: usize) {
    let s = Store::open(path).unwrap();
    for i in 0..n {
        let mut r = row(&format!("run{:05}", i / 8), ["j", "k"][i % 2], "h", 7, true);
        r.role = (i % 4 >= 2).then(|| "client".to_string());
        r.iteration = u32::try_from(i % 8 / 4 + 1).unwrap();
        s.record(&r).unwrap();
    }
}

/// Two pushes of the same store at once, each from its own connection:
/// every run lands once and the counts add up.
fn concurrent_pushes_copy_once(source: &std::path::Path, target: &str, n: usize) {
    let barrier = std::sync::Barrier::new(2);
    let counts: Vec<_> = std::thread::scope(|sc| {
        let pushes: Vec<_> = (0..2)
            .map(|_| {
                sc.spawn(|| {
                    let from = Store::open(source).unwrap();
                    let to = Store::open(std::path::Path::new(target)).unwrap();
                    barrier.wait();
                    from.push_to(&to).unwrap()
                })
            })
            .collect();
        pushes.into_iter().map(|p| p.join().unwrap()).collect()
    });
    assert_eq!(counts[0].pushed + counts[1].pushed, n, "{counts:?}");
    assert_eq!(counts[0].skipped + counts[1].skipped, n, "{counts:?}");
    let to = Store::open(std::path::Path::new(target)).unwrap();
    let rows = to.select(&RunFilter::default()).unwrap();
    assert_eq!(rows.len(), n);
    let mut identities: Vec<_> = rows
        .iter()
        .map(|r| (r.run_id.clone(), r.job.clone(), r.role.clone(), r.iteration))
        .collect();
    identities.sort();
    identities.dedup();
    assert_eq!(identities.len(), n);
    // And again, one after the other: nothing new.
    let n2 = Store::open(source).unwrap().push_to(&to).unwrap();
    assert_eq!((n2.pushed, n2.skipped), (0, n));
}

#[test]
fn sqlite_concurrent_pushes_copy_each_run_once() {
    let d = tempfile::tempdir().unwrap();
    let source = d.path().join("local.db");
    many_runs(&source, 1200);
    let target = d.path().join("fleet.db");
    concurrent_pushes_copy_once(&source, &target.to_string_lossy(), 1200);
}

#[test]
fn postgres_concurrent_pushes_copy_each_run_once() {
    let Some(pg) = testenv::Postgres::start() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let source = d.path().join("local.db");
    many_runs(&source, 1200);
    concurrent_pushes_copy_once(&source, &pg.create_db("fleet"), 1200);
}

/// The table as rackbench made it before runs had a unique identity (and
/// before durations were kept).
const OLD_SCHEMA: &str = "
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, job TEXT NOT NULL,
    benchmark TEXT NOT NULL, role TEXT, iteration INTEGER NOT NULL,
    timestamp INTEGER NOT NULL, success INTEGER NOT NULL, hostname TEXT NOT NULL,
    args TEXT NOT NULL, machine TEXT NOT NULL, metrics TEXT NOT NULL,
    report_path TEXT, artifacts_dir TEXT, record TEXT
);
CREATE INDEX runs_run_id ON runs(run_id);
CREATE INDEX runs_job ON runs(job, timestamp);
";

/// Rows of an old store: `dupdup01` three times (no role), `dupdup02`
/// twice (role `client`), `single03` once, and `dupdup01` iteration 2 (a
/// different run); `qps` tells the copies apart.
const OLD_ROWS: [(&str, Option<&str>, i64, f64); 7] = [
    ("dupdup01", None, 1, 1.0),
    ("dupdup02", Some("client"), 1, 2.0),
    ("dupdup01", None, 1, 3.0),
    ("single03", None, 1, 4.0),
    ("dupdup02", Some("client"), 1, 5.0),
    ("dupdup01", None, 1, 6.0),
    ("dupdup01", None, 2, 7.0),
];

/// After the migration: the first copy of each run, the others gone, and
/// the store refuses a new copy (push skips it).
fn check_migrated(s: &Store) {
    let rows = s.select(&RunFilter::default()).unwrap();
    let got: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.run_id.as_str(),
                r.iteration,
                r.metrics["final_achieved_qps"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("dupdup01", 1, 1.0),
            ("dupdup02", 1, 2.0),
            ("single03", 1, 4.0),
            ("dupdup01", 2, 7.0)
        ]
    );
    // The column added for durations reads NULL for the old rows.
    assert!(rows.iter().all(|r| r.duration_secs.is_none()), "{rows:?}");
    let mut again = rows[0].clone();
    again.metrics = json!({"final_achieved_qps": 99.0});
    let e = s.record(&again).err().unwrap().to_string();
    assert!(e.to_lowercase().contains("unique"), "{e}");
    let d = tempfile::tempdir().unwrap();
    let from = sqlite(&d, "from.db");
    from.record(&again).unwrap();
    let n = from.push_to(s).unwrap();
    assert_eq!((n.pushed, n.skipped), (0, 1));
}

#[test]
fn sqlite_store_with_duplicate_runs_is_migrated() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("old.db");
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch(OLD_SCHEMA).unwrap();
    for (run_id, role, iteration, qps) in OLD_ROWS {
        c.execute(
            "INSERT INTO runs (run_id, job, benchmark, role, iteration, timestamp, success, hostname, args, machine, metrics)
             VALUES (?1, 'j', 'calibrate', ?2, ?3, 100, 1, 'h', '[]', '{}', ?4)",
            rusqlite::params![run_id, role, iteration, json!({"final_achieved_qps": qps}).to_string()],
        )
        .unwrap();
    }
    drop(c);
    check_migrated(&Store::open(&path).unwrap());
    // Opening again (index present) changes nothing.
    check_migrated(&Store::open(&path).unwrap());
}

#[test]
fn postgres_store_with_duplicate_runs_is_migrated() {
    let Some(pg) = testenv::Postgres::start() else {
        return;
    };
    let url = pg.create_db("old");
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(
        &OLD_SCHEMA
            .replace(
                "INTEGER PRIMARY KEY AUTOINCREMENT",
                "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
            )
            .replace("INTEGER", "BIGINT"),
    )
    .unwrap();
    for (run_id, role, iteration, qps) in OLD_ROWS {
        c.execute(
            "INSERT INTO runs (run_id, job, benchmark, role, iteration, timestamp, success, hostname, args, machine, metrics)
             VALUES ($1, 'j', 'calibrate', $2, $3, 100, 1, 'h', '[]', '{}', $4)",
            &[&run_id, &role, &iteration, &json!({"final_achieved_qps": qps}).to_string()],
        )
        .unwrap();
    }
    drop(c);
    let path = std::path::Path::new(&url);
    check_migrated(&Store::open(path).unwrap());
    check_migrated(&Store::open(path).unwrap());
}

/// A server that takes TCP connections over TLS only: `require`,
/// `verify-ca` and `verify-full` (with its CA) reach it and round-trip a
/// run; plain connections are refused; the wrong CA fails as a
/// certificate error.
#[test]
fn postgres_over_tls() {
    let Some(pg) = testenv::Postgres::start_tls() else {
        return;
    };
    let url = pg.create_db("tls");
    let ca = pg.ca_file().unwrap().to_string_lossy().into_owned();
    let open = |query: &str| Store::open(std::path::Path::new(&format!("{url}?{query}")));

    let s = open("sslmode=require").unwrap();
    let mut r = row("tlstls01", "j", "h", 42, true);
    r.record = Some(Record::of("calibrate", 1, &json!({"qps": 3})));
    let id = s.record(&r).unwrap();
    drop(s);
    let verified = open(&format!("sslmode=verify-full&sslrootcert={ca}")).unwrap();
    assert_eq!(
        verified.by_run_id("tlstls01").unwrap(),
        [RunRow { id, ..r.clone() }]
    );
    let s = open(&format!("sslmode=verify-ca&sslrootcert={ca}")).unwrap();
    assert_eq!(s.by_run_id("tlstls01").unwrap().len(), 1);
    assert_eq!(
        open("sslmode=prefer")
            .unwrap()
            .by_run_id("tlstls01")
            .unwrap()
            .len(),
        1
    );

    // Plain TCP is refused by this server (hostssl only).
    for plain in [url.clone(), format!("{url}?sslmode=disable")] {
        let e = Store::open(std::path::Path::new(&plain))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("cannot connect"), "{e}");
    }

    // Another CA: the server's certificate is not signed by it.
    let d = tempfile::tempdir().unwrap();
    let wrong = d.path().join("other-ca.pem");
    std::fs::write(&wrong, testenv::self_signed_cert(&["127.0.0.1"]).0).unwrap();
    let e = Store::open(std::path::Path::new(&format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        url.replace("postgres@", "postgres:s3cret@"),
        wrong.display()
    )))
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("TLS") && e.contains("certificate"), "{e}");
    assert!(e.contains("other-ca.pem"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
    // verify-full needs a CA; a file that holds none is named.
    let empty = d.path().join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let e = open(&format!(
        "sslmode=verify-full&sslrootcert={}",
        empty.display()
    ))
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("empty.pem") && e.contains("no PEM certificate"),
        "{e}"
    );
}

#[test]
fn an_unknown_sslmode_is_refused_naming_the_accepted_ones() {
    let e = Store::open(std::path::Path::new(
        "postgres://u:s3cret@127.0.0.1:1/db?sslmode=verify_full",
    ))
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("'verify_full'"), "{e}");
    assert!(
        e.contains("disable, prefer, require, verify-ca, verify-full"),
        "{e}"
    );
    assert!(!e.contains("s3cret"), "{e}");
}
