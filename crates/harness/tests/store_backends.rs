//! The same store tests against both backends: a SQLite file and a real
//! PostgreSQL server (started by testenv; skipped, visibly, when
//! PostgreSQL is not installed).
#![allow(clippy::unwrap_used)]

use harness::record::Record;
use harness::store::{RunFilter, RunRow, Store};
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
    use harness::store::redact_url;
    assert_eq!(
        redact_url("postgres://u:p@h:5/db?password=x&sslmode=disable"),
        "postgres://u@h:5/db?sslmode=disable"
    );
    assert_eq!(redact_url("postgresql://h/db"), "postgresql://h/db");
    assert!(harness::store::is_postgres_url("postgresql://h/db"));
    assert!(!harness::store::is_postgres_url("/var/lib/postgres://x"));
}
