//! `rackbench report html` over a store filled by the mini jobs, rendered
//! in headless Chromium, and `rackbench serve` on 127.0.0.1 and ::1.
//!
//! The harness has no hostname override, so the second host is made by
//! copying the store's rows with SQL under the hostname `fake-host-b`
//! (its CacheBench throughput lowered by a fifth).
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
    // The copy's CacheBench throughput is 20% lower, so that its bars
    // across hosts differ.
    let n = conn
        .execute(
            "UPDATE runs SET metrics = json_set(metrics, '$.ops_per_sec', \
             json_extract(metrics, '$.ops_per_sec') * 0.8) \
             WHERE hostname = 'fake-host-b' AND job = 'cachebench_mini'",
            [],
        )
        .unwrap();
    assert_eq!(n, 2, "cachebench_mini rows of the copy");
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
    summary_is_on_the_first_screen(&out, dir.path());
    host_bars_have_error_bars(&html, dir.path());
    markers_are_whole_and_ticks_whole(&html, dir.path());
    eprintln!(
        "screenshot: {} (chromium took {:?})",
        shot.display(),
        t0.elapsed()
    );
}

/// A screenshot, as 8-bit RGB rows.
struct Shot {
    w: usize,
    h: usize,
    rgb: Vec<u8>,
}

impl Shot {
    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.w + x) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Whether pixel (x, y) is `c`, give or take the screenshot's colour
    /// conversion (a unit or two per channel).
    fn is(&self, x: usize, y: usize, c: [u8; 3]) -> bool {
        self.at(x, y).iter().zip(c).all(|(a, b)| a.abs_diff(b) <= 4)
    }
}

/// Headless Chromium with a `w` x `h` window at one device pixel per CSS
/// pixel, no scroll bars.
fn chromium_at(w: u32, h: u32) -> Command {
    let mut c = Command::new("chromium");
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ])
    .arg(format!("--window-size={w},{h}"));
    c
}

/// `page` (a file) drawn by headless Chromium in a `w` x `h` window.
fn shoot(page: &Path, png: &Path, w: u32, h: u32) -> Shot {
    let st = chromium_at(w, h)
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).unwrap();
    let step = match info.color_type {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        c => panic!("screenshot colour type {c:?}"),
    };
    let rgb = buf[..info.buffer_size()]
        .chunks(step)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    Shot {
        w: info.width as usize,
        h: info.height as usize,
        rgb,
    }
}

/// The first `<svg ...>...</svg>` (with what it nests) of the figure whose
/// `data-kind` is `kind`, alone on a page with no margin, so that the
/// SVG's units are the screenshot's pixels.
fn figure_page(html: &str, kind: &str, dir: &Path) -> (PathBuf, String) {
    let at = html
        .find(&format!(r#"data-kind="{kind}""#))
        .unwrap_or_else(|| panic!("no {kind} figure on the page"));
    let rest = &html[at..];
    let start = rest.find("<svg").unwrap();
    let end = rest.find("</figure>").unwrap();
    let svg = rest[start..end].to_string();
    let page = dir.join(format!("{kind}.html"));
    std::fs::write(
        &page,
        format!("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>body{{margin:0}}svg{{display:block}}</style></head><body>{svg}</body></html>"),
    )
    .unwrap();
    (page, svg)
}

/// The number in attribute `name` of the tag starting `tag`.
fn num_attr(tag: &str, name: &str) -> f64 {
    let tag = format!(" {tag}");
    let k = format!(" {name}=\"");
    let at = tag.find(&k).unwrap_or_else(|| panic!("no {name} in {tag}")) + k.len();
    tag[at..].split('"').next().unwrap().parse().unwrap()
}

fn color_attr(tag: &str) -> [u8; 3] {
    let at = tag.find("fill=\"#").unwrap() + 7;
    let h = &tag[at..at + 6];
    let c = |i: usize| u8::from_str_radix(&h[i..i + 2], 16).unwrap();
    [c(0), c(2), c(4)]
}

/// The summary table, with the headline figures, is on the first screen
/// of the page: Chromium's layout puts it there (its box read back from
/// the page) and the screenshot shows its header and text there.
fn summary_is_on_the_first_screen(page: &Path, dir: &Path) {
    let html = std::fs::read_to_string(page).unwrap();
    let probe = dir.join("summary_probe.html");
    std::fs::write(
        &probe,
        html.replace(
            "</body>",
            "<script>var r=document.getElementById('summary-table').getBoundingClientRect();\
             document.body.setAttribute('data-box',[r.left,r.top,r.right,r.bottom].map(Math.round).join(','));</script></body>",
        ),
    )
    .unwrap();
    let dom = chromium_at(1280, 1000)
        .arg("--dump-dom")
        .arg(format!("file://{}", probe.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    let b = dom
        .split("data-box=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let b: Vec<usize> = b.split(',').map(|v| v.parse().unwrap()).collect();
    assert!(b[1] < 700, "the summary table starts at y = {} px", b[1]);
    // Headline figures in it: a label and a figure with its spread.
    let table = &html[html.find(r#"<table id="summary-table">"#).unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    for want in ["throughput", "hit ratio", " ± ", "QPS at target", "runs)"] {
        assert!(table.contains(want), "summary table without {want:?}");
    }
    let shot = shoot(&probe, &dir.join("summary.png"), 1280, 1000);
    // Its header row (#f3f3f3) and dark text inside its box.
    let (x0, y0, x1, y1) = (b[0], b[1], b[2].min(shot.w - 1), b[3].min(shot.h - 1));
    assert!(
        (x0..x1).any(|x| shot.is(x, y0 + 4, [0xf3, 0xf3, 0xf3])),
        "no header row at the table's top in the screenshot"
    );
    let dark = (y0..y1)
        .flat_map(|y| (x0..x1).map(move |x| (x, y)))
        .filter(|&(x, y)| shot.at(x, y).iter().all(|c| *c < 90))
        .count();
    assert!(
        dark > 2000,
        "{dark} dark (text) pixels in the summary table"
    );
}

/// Per job across the two hosts: bars of different lengths in their
/// colours, each with a whisker whose two ends are drawn.
fn host_bars_have_error_bars(html: &str, dir: &Path) {
    let (page, svg) = figure_page(html, "host_bars", dir);
    let w = num_attr(&svg, "width") as u32;
    let h = num_attr(&svg, "height") as u32;
    let shot = shoot(&page, &dir.join("host_bars.png"), w, h);
    let bars: Vec<&str> = svg.split(r#"<rect class="bar-fill""#).skip(1).collect();
    let whiskers: Vec<&str> = svg.split(r#"<g class="whisker""#).skip(1).collect();
    assert_eq!(bars.len(), 2, "{svg}");
    assert_eq!(whiskers.len(), 2, "two runs a host: a whisker each\n{svg}");
    let mut lengths = Vec::new();
    for (bar, whisker) in bars.iter().zip(&whiskers) {
        let (x, y, bw) = (
            num_attr(bar, "x"),
            num_attr(bar, "y"),
            num_attr(bar, "width"),
        );
        let fill = color_attr(bar);
        let mid = (y + 8.0) as usize;
        let body = ((x + bw / 2.0) as usize, mid);
        assert!(
            shot.is(body.0, body.1, fill),
            "bar body {:?}",
            shot.at(body.0, body.1)
        );
        // The bar's drawn length: its colour's run along its lowest row,
        // under the whisker's end caps.
        let drawn = (x as usize..shot.w)
            .filter(|&px| shot.is(px, (y + 15.0) as usize, fill))
            .count();
        assert!(
            (drawn as f64 - bw).abs() <= 2.0,
            "bar drawn {drawn} px, {bw} wide"
        );
        lengths.push(drawn);
        let line = &whisker[whisker.find("<line").unwrap()..];
        for end in [num_attr(line, "x1"), num_attr(line, "x2")] {
            let px = shot.at(end.round() as usize, mid);
            assert!(px.iter().all(|c| *c < 110), "whisker end at {end}: {px:?}");
        }
    }
    // The copy's throughput is 0.8 of the original's: so are the bars.
    let ratio = lengths[1] as f64 / lengths[0] as f64;
    assert!((ratio - 0.8).abs() < 0.02, "bars {lengths:?}");
}

/// The ladder's QPS chart: every marker inside the plot area and whole
/// (its four corners drawn in its colour), the x axis ticked at whole
/// probe numbers, one tick mark per label.
fn markers_are_whole_and_ticks_whole(html: &str, dir: &Path) {
    let (page, svg) = figure_page(html, "ladder_qps", dir);
    let w = num_attr(&svg, "width") as u32;
    let h = num_attr(&svg, "height") as u32;
    let shot = shoot(&page, &dir.join("ladder_qps.png"), w, h);
    let inner = &svg[svg.find("<svg x=").unwrap()..];
    let (l, t) = (num_attr(inner, "x") as usize, num_attr(inner, "y") as usize);
    let (r, b) = (
        l + num_attr(inner, "width") as usize - 1,
        t + num_attr(inner, "height") as usize - 1,
    );
    let colors = [[0x1f, 0x77, 0xb4], [0xff, 0x7f, 0x0e]];
    let mut markers = 0;
    for group in inner.split(r#"<g class="series""#).skip(1) {
        let group = &group[..group.find("</g>").unwrap()];
        for m in group.split("<rect ").skip(1) {
            let (x, y) = (num_attr(m, "x"), num_attr(m, "y"));
            let (mw, mh) = (num_attr(m, "width"), num_attr(m, "height"));
            let (x0, y0) = (x.round() as usize, y.round() as usize);
            let (x1, y1) = ((x + mw).round() as usize - 1, (y + mh).round() as usize - 1);
            assert!(
                x0 > l && x1 < r && y0 > t && y1 < b,
                "marker {x0},{y0}..{x1},{y1} outside the plot {l},{t}..{r},{b}"
            );
            // A pixel in from each corner is a marker's colour (the
            // edges are stroked, half a pixel; where markers overlap the
            // colours blend, so: a colour, not the white, grey or black
            // of the background, grid and frame that a cut marker shows).
            for (cx, cy) in [
                (x0 + 1, y0 + 1),
                (x1 - 1, y0 + 1),
                (x0 + 1, y1 - 1),
                (x1 - 1, y1 - 1),
            ] {
                let px = shot.at(cx, cy);
                let spread = px.iter().max().unwrap() - px.iter().min().unwrap();
                assert!(spread >= 30, "marker corner {cx},{cy} drawn {px:?}");
            }
            markers += 1;
        }
    }
    assert!(markers >= 2, "{markers} markers");
    // No marker colour outside the plot area.
    for y in 0..shot.h {
        for x in 0..shot.w {
            if (x <= l || x >= r || y <= t || y >= b) && colors.iter().any(|c| shot.is(x, y, *c)) {
                // The legend's swatches are the only other place.
                assert!(x > r, "marker colour at {x},{y}, outside the plot");
            }
        }
    }
    // The x tick labels (text under the plot, above the axis label) are
    // whole numbers, and the screenshot has one tick mark per label.
    let labels: Vec<String> = svg
        .split("<text ")
        .skip(1)
        .filter(|t| {
            // Under the plot (a y label's baseline can be a few pixels
            // below it), above the axis label.
            let y = num_attr(t, "y") as usize;
            y > b + 8 && y <= b + 22
        })
        .map(|t| t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()].to_string())
        .collect();
    assert!(labels.len() >= 2, "{labels:?}");
    for l in &labels {
        assert!(l.parse::<i64>().is_ok(), "x tick label {l:?}");
    }
    let row = b + 3;
    let ticks = (l..=r)
        .filter(|&x| {
            shot.at(x, row).iter().all(|c| *c < 80) && !shot.at(x - 1, row).iter().all(|c| *c < 80)
        })
        .count();
    assert_eq!(
        ticks,
        labels.len(),
        "tick marks under the plot vs labels {labels:?}"
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
