//! `rackbench report html` over a store filled by the mini jobs, rendered
//! in headless Chromium, and `rackbench serve` on 127.0.0.1 and ::1.
//!
//! The harness has no hostname override, so the second host is made by
//! copying the store's rows with SQL under the hostname `fake-host-b`.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn rackbench(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rackbench"));
    c.arg("--db").arg(db);
    c
}

fn fill_store(dir: &Path) -> PathBuf {
    // Two runs of each mini job. calibrate_quick (about 30 s a run, mostly
    // waiting) goes beside the others into a store of its own, whose rows
    // are then copied over: the page only needs the rows, and the two
    // halves take about as long.
    let db = dir.join("r.db");
    let cal_db = dir.join("calibrate.db");
    let run = |db: &Path, out: &str, jobs: &[&str]| {
        let out = dir.join(out);
        std::fs::create_dir_all(&out).unwrap();
        rackbench(db)
            .arg("--output-dir")
            .arg(out)
            .args(["run", "-n", "2"])
            .args(jobs)
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut cal = run(&cal_db, "calibrate", &["calibrate_quick"]);
    let mut rest = run(
        &db,
        "rest",
        &["feedsim_mini", "distbench_mini", "cachebench_mini"],
    );
    // A failed probe search still records its run; the rows matter here.
    let _ = rest.wait().unwrap();
    let _ = cal.wait().unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let cols: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('runs') WHERE name NOT IN ('id', 'hostname')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let cols = cols.join(", ");
    conn.execute("ATTACH DATABASE ?1 AS cal", [cal_db.to_str().unwrap()])
        .unwrap();
    let n = conn
        .execute(
            &format!("INSERT INTO runs ({cols}, hostname) SELECT {cols}, hostname FROM cal.runs"),
            [],
        )
        .unwrap();
    assert_eq!(n, 2, "calibrate_quick runs copied");
    conn.execute("DETACH DATABASE cal", []).unwrap();
    let n = conn
        .execute(
            &format!("INSERT INTO runs ({cols}, hostname) SELECT {cols}, 'fake-host-b' FROM runs"),
            [],
        )
        .unwrap();
    assert!(n >= 8, "{n} rows copied");
    db
}

#[test]
fn report_html_is_self_contained_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    let db = fill_store(dir.path());
    let out = dir.path().join("report.html");
    let st = rackbench(&db)
        .args(["report", "html", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let html = std::fs::read_to_string(&out).unwrap();
    for bad in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
        "@import",
    ] {
        assert!(!html.contains(bad), "external reference {bad}");
    }
    assert!(html.contains(r#"<table id="runs">"#));
    assert!(html.contains(r#"data-kind="ladder""#));
    assert!(
        html.contains(r#"<td class="verdict">"#),
        "no comparison verdict"
    );
    assert!(html.contains("fake-host-b"));
    let local: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT hostname FROM runs WHERE hostname != 'fake-host-b' LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    // Per job both orders of the pair are on the page, the one with more
    // runs (here equal: by name) shown first.
    for (a, b) in [
        (local.as_str(), "fake-host-b"),
        ("fake-host-b", local.as_str()),
    ] {
        assert!(
            html.contains(&format!(
                r#"class="comparison cmp" data-a="{a}" data-b="{b}""#
            )),
            "no {a} against {b}"
        );
    }

    // A requested comparison: side A on the copy, side B on this host.
    let req = dir.path().join("requested.html");
    let o = rackbench(&db)
        .args([
            "report",
            "html",
            "--job",
            "calibrate_quick",
            "--a-host",
            "fake-host-b",
            "--b-host",
        ])
        .arg(&local)
        .arg("--out")
        .arg(&req)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&req).unwrap();
    let at = page.find("Requested comparison").unwrap();
    assert!(
        page[at..]
            .contains("A: job calibrate_quick, host fake-host-b; B: job calibrate_quick, host ")
    );
    assert!(at < page.find("Host comparisons").unwrap());
    // One side alone is refused, naming the missing side.
    let o = rackbench(&db)
        .args(["report", "html", "--a-host", "fake-host-b", "--out"])
        .arg(dir.path().join("none.html"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("side B selects no runs of its own: give --b-run"),
        "{err}"
    );

    if Command::new("chromium").arg("--version").output().is_err() {
        testenv::skip(
            "CHROMIUM",
            "chromium is not installed (apt-get install chromium)",
        );
        return;
    }
    let t0 = Instant::now();
    let url = format!("file://{}", out.display());
    let dom = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(&url)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&dom.stderr);
    assert!(!err.contains("CONSOLE"), "console output: {err}");
    assert!(!err.contains("Uncaught"), "script error: {err}");
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains(r#"data-report-ready="1""#),
        "the page's script did not run"
    );
    // The host choosers, kept in the URL: the reverse of the default pair
    // shows that pair and hides the default one.
    let def = html
        .split(r#"<section class="comparison cmp" data-a=""#)
        .skip(1)
        .find(|s| s.contains(r#"data-default="1""#))
        .unwrap();
    let (da, rest) = def.split_once('"').unwrap();
    let db_ = rest.split('"').nth(1).unwrap();
    let chosen = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("{url}#a={db_}&b={da}"))
        .output()
        .unwrap();
    let chosen = String::from_utf8_lossy(&chosen.stdout);
    assert!(
        chosen.contains(&format!(
            r#"class="comparison cmp" data-a="{db_}" data-b="{da}">"#
        )),
        "the chosen pair is not shown"
    );
    assert!(
        chosen.contains(&format!(
            r#"class="comparison cmp" data-a="{da}" data-b="{db_}" data-default="1" hidden="">"#
        )),
        "the default pair is still shown"
    );
    // Cargo's scratch folder for integration tests: wherever the target
    // directory is (CARGO_TARGET_DIR included).
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report_html_screenshot.png");
    let st = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1280,2400",
        ])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
    eprintln!(
        "screenshot: {} (chromium took {:?})",
        shot.display(),
        t0.elapsed()
    );
}

fn get(addr: &str) -> String {
    request(addr, "/", "")
}

/// The whole answer (status, headers, body) to GET `path` with `headers`
/// (each ending in CRLF).
fn request(addr: &str, path: &str, headers: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n{headers}\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

#[test]
fn serve_answers_on_both_loopbacks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("empty.db");
    let mut child = rackbench(&db)
        .args(["serve", "--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut addrs = Vec::new();
    for _ in 0..2 {
        let l = lines.next().unwrap().unwrap();
        addrs.push(
            l.strip_prefix("listening on http://")
                .unwrap()
                .trim_end_matches('/')
                .to_string(),
        );
    }
    assert!(addrs[0].starts_with("127.0.0.1:"), "{addrs:?}");
    assert!(addrs[1].starts_with("[::1]:"), "{addrs:?}");
    // `--port 0` picks one port for both addresses.
    let port = |a: &str| a.rsplit(':').next().unwrap().to_string();
    assert_eq!(port(&addrs[0]), port(&addrs[1]), "{addrs:?}");
    for a in &addrs {
        let r = get(a);
        assert!(r.starts_with("HTTP/1.") && r.contains(" 200 "), "{r}");
        assert!(r.contains(r#"<table id="runs">"#));
        // The page asks for the store's version and reloads when it
        // changes; the same page is not sent twice.
        assert!(r.contains("fetch('version'"), "{r}");
        let v = request(a, "/version", "");
        assert!(v.contains(" 200 "), "{v}");
        let token = v.rsplit("\r\n\r\n").next().unwrap().to_string();
        assert_eq!(token, "0.0", "{v}");
        assert!(r.contains(&format!("ETag: \"{token}\"")), "{r}");
        let again = request(a, "/", &format!("If-None-Match: \"{token}\"\r\n"));
        assert!(again.contains(" 304 "), "{again}");
        assert!(!again.contains("<table"), "{again}");
    }
    // Ctrl-C stops it with 130, as every other command.
    // SAFETY: plain syscall on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "serve ignored SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "{status:?}");
}
