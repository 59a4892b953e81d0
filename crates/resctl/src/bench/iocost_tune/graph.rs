//! iocost-tune's graphs: one per fitted figure, against vrate, with
//! upstream's axes and labels (`Grapher` in upstream's iocost_tune/graph.rs):
//! the y range per figure (MOF and aMOF from 1, or a tenth of their spread
//! below the lowest value; isolation, work-csv and the other percentages
//! 0-100; latencies 0 up, in ms), 110% of the highest value on top, the x
//! axis 0 to 110% of the widest fitted vrate, the x label with the fitted
//! range, the lines' min/max (or mean), the hinges and the error, and the
//! y label `MOF@PROFILE`, `isol-PCT` or the selector.
//!
//! `format` draws them in text as upstream does (the fitted line sampled at
//! 80 points as squares, the rejected points as crosses, the data as
//! circles, on an 80x24 face), character for character: the layout of
//! upstream's plotting crate is reproduced by [`crate::bench::iocost_tune::textplot`].
//!
//! `format iocost-tune:pdf[=PATH]` writes upstream's pdf: a cover page
//! with the header, solutions and remarks in monospace, then the graphs
//! (the fitted lines joined, the data and the rejected points as markers)
//! six to a letter page, the latency graphs of one time percentile kept
//! together as upstream groups them. Upstream renders it with
//! ImageMagick's `convert`/`montage` and ghostscript; here headless
//! Chromium prints one HTML page of the text and the SVG graphs, the same
//! browser the report pages are checked with.

use crate::bench::iocost_tune::fit::DataSeries;
use crate::bench::iocost_tune::{DataSel, TuneResult};
use chart::Chart;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The face of a text graph, in cells (upstream's page size).
pub const TEXT_SIZE: (u32, u32) = (80, 24);

/// The heading upstream prints over the text graphs.
pub const GRAPHS_HEADING: &str =
    "Graphs (square: fitted line, circle: data points, cross: rejected)";

/// The widest vrate range any figure was fitted over (upstream's
/// `vrate_range`): the lowest start and the highest end.
pub fn vrate_range(res: &TuneResult) -> (f64, f64) {
    res.data.values().fold((f64::MAX, 0.0), |acc, s| {
        (s.lines.range.0.min(acc.0), s.lines.range.1.max(acc.1))
    })
}

/// The y range's low end and the scale of `sel`'s values (latencies are
/// stored in seconds and drawn in ms).
fn y_min_scale(sel: &DataSel, val_min: f64, val_max: f64) -> (f64, f64) {
    match sel {
        DataSel::Mof | DataSel::Amof => {
            let ymin = if val_min >= 1.0 {
                1.0
            } else {
                val_min - (val_max - val_min) / 10.0
            };
            (ymin, 1.0)
        }
        DataSel::AmofDelta => (0.0, 1.0),
        DataSel::Isol
        | DataSel::IsolPct(_)
        | DataSel::IsolMean
        | DataSel::LatImp
        | DataSel::WorkCsv
        | DataSel::Missing => (0.0, 100.0),
        DataSel::RLat(..) | DataSel::WLat(..) => (0.0, 1000.0),
    }
}

/// The x label: the fitted range, the lines' values, hinges and error.
pub fn x_label(series: &DataSeries, yscale: f64) -> String {
    let range = series.lines.range;
    let mut l = format!("vrate {:.1}-{:.1} (", range.0, range.1);
    let (min, max) = series.lines.min_max();
    if min == max {
        l += &format!("mean={:.3}", min * yscale);
    } else {
        l += &format!("min={:.3} max={:.3}", min * yscale, max * yscale);
    }
    let points = &series.lines.points;
    if points.len() > 2 {
        let infls: Vec<String> = points[1..points.len() - 1]
            .iter()
            .map(|p| format!("{:.1}", p.x))
            .collect();
        l += &format!(" infls={}", infls.join(","));
    }
    l += &format!(" err={:.3})", series.error * yscale);
    l
}

/// The y label: MOF, aMOF and aMOF-delta at the memory profile, isol at
/// its percentile, the others by their selector.
pub fn y_label(sel: &DataSel, res: &TuneResult) -> String {
    match sel {
        DataSel::Mof | DataSel::Amof | DataSel::AmofDelta => {
            format!("{sel}@{}", res.mem_profile)
        }
        DataSel::Isol => format!("isol-{}", res.isol_pct),
        sel => sel.to_string(),
    }
}

/// `sel`'s graph: the fitted line sampled at `samples` points across the
/// x range (from where the fit starts), the rejected points and the data,
/// in that order, on upstream's ranges and labels.
pub fn graph(sel: &DataSel, series: &DataSeries, res: &TuneResult, samples: u32) -> Chart {
    let (val_min, val_max) = series
        .data
        .iter()
        .chain(&series.outliers)
        .fold((f64::MAX, 0.0_f64), |acc, p| {
            (acc.0.min(p.y), acc.1.max(p.y))
        });
    let (ymin, yscale) = y_min_scale(sel, val_min, val_max);
    let ymax = (val_max * 1.1).max(ymin + 0.000001);
    let range = series.lines.range;
    let fitted: Vec<(f64, f64)> = (0..samples)
        .map(|i| range.1 / samples as f64 * i as f64)
        .filter(|&v| v >= range.0)
        .map(|v| (v, series.lines.eval(v) * yscale))
        .collect();
    let scaled = |pts: &[crate::bench::iocost_tune::fit::DataPoint]| -> Vec<(f64, f64)> {
        pts.iter().map(|p| (p.x, p.y * yscale)).collect()
    };
    Chart::new("", &x_label(series, yscale), &y_label(sel, res))
        .x_range(0.0, (vrate_range(res).1 * 1.1).max(0.000001))
        .y_range(ymin * yscale, ymax * yscale)
        .points("fitted line", fitted)
        .mark('■')
        .points("rejected", scaled(&series.outliers))
        .mark('×')
        .points("data points", scaled(&series.data))
        .mark('●')
}

/// Upstream's label text: `<`, `>`, `&`, `'` and `"` escaped as XML (it
/// escapes them for its SVGs and passes the same labels to its text
/// graphs).
fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&#38;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            c => out.push(c),
        }
    }
    out
}

/// `sel`'s text graph as upstream prints it ([`graph`]'s ranges, labels
/// and points, laid out by [`crate::bench::iocost_tune::textplot`]).
fn text_graph(sel: &DataSel, series: &DataSeries, res: &TuneResult) -> Result<String, String> {
    let g = graph(sel, series, res, TEXT_SIZE.0);
    let plot = crate::bench::iocost_tune::textplot::TextPlot {
        x_range: (g.x_min.unwrap_or(0.0), g.x_max.unwrap_or(0.0)),
        y_range: (g.y_min.unwrap_or(0.0), g.y_max.unwrap_or(0.0)),
        x_label: escape_xml(&g.x_label),
        y_label: escape_xml(&g.y_label),
        series: g
            .series
            .iter()
            .map(|s| (s.points.clone(), s.mark.unwrap_or('●')))
            .collect(),
    };
    plot.render(TEXT_SIZE.0, TEXT_SIZE.1)
        .map_err(|e| format!("graph {sel}: {e}"))
}

/// Upstream's `Graphs` section of `format`: the heading, then each
/// figure's text graph and a blank line. A figure that cannot be drawn
/// (an empty range) says why in its place.
pub fn format_text(res: &TuneResult) -> String {
    let mut out = crate::fmt::custom_underline(GRAPHS_HEADING, '=');
    out.push('\n');
    for (sel, series) in &res.data {
        match text_graph(sel, series, res) {
            Ok(t) => out.push_str(&t),
            Err(e) => out.push_str(&format!("({e})")),
        }
        out.push_str("\n\n");
    }
    out
}

/// The graphs on a pdf page (upstream's 2x3 montage).
pub const PER_PAGE: usize = 6;

/// Whether `a` and `b` may share a pdf page group (upstream's
/// `same_group`): the latencies of one direction and time percentile
/// together, every other figure together.
fn same_group(a: &DataSel, b: &DataSel) -> bool {
    match (a, b) {
        (DataSel::RLat(_, ta), DataSel::RLat(_, tb)) => ta == tb,
        (DataSel::WLat(_, ta), DataSel::WLat(_, tb)) => ta == tb,
        (DataSel::RLat(..) | DataSel::WLat(..), _) | (_, DataSel::RLat(..) | DataSel::WLat(..)) => {
            false
        }
        _ => true,
    }
}

/// The pdf's pages of graphs: the figures in order, split into groups
/// ([`same_group`]), a group joining the previous one when it fits in the
/// previous one's last, unfilled page; each group starts a page.
pub fn pages(sels: &[DataSel]) -> Vec<Vec<DataSel>> {
    let mut groups: Vec<Vec<DataSel>> = Vec::new();
    for sel in sels {
        match groups.last_mut() {
            Some(g) if g.last().is_some_and(|l| same_group(l, sel)) => g.push(sel.clone()),
            _ => groups.push(vec![sel.clone()]),
        }
    }
    let mut merged: Vec<Vec<DataSel>> = Vec::new();
    for mut g in groups {
        match merged.last_mut() {
            Some(last) => {
                let space = PER_PAGE - last.len() % PER_PAGE;
                if space < PER_PAGE && space >= g.len() {
                    last.append(&mut g);
                } else {
                    merged.push(g);
                }
            }
            None => merged.push(g),
        }
    }
    merged
        .into_iter()
        .flat_map(|g| {
            g.chunks(PER_PAGE)
                .map(<[DataSel]>::to_vec)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `sel`'s graph for the pdf: the fitted lines joined through their
/// hinges, the data and the rejected points as markers, 576x468 pixels
/// (upstream's), the device model after the y label.
pub fn svg_graph(sel: &DataSel, series: &DataSeries, res: &TuneResult, model: &str) -> Chart {
    let mut g = graph(sel, series, res, 0);
    let yscale = y_min_scale(sel, 0.0, 0.0).1;
    if !model.trim().is_empty() {
        g.y_label = format!("{} ({})", g.y_label, model.trim());
    }
    let mut fitted = chart::Series::new(
        "fitted line",
        series
            .lines
            .points
            .iter()
            .map(|p| (p.x, p.y * yscale))
            .collect(),
    );
    fitted.style = chart::Style::Line;
    g.series[0] = fitted;
    g.size(576, 468)
}

/// Where `pdf=VALUE` writes: VALUE, or without one the result file's name
/// with `.pdf` for its extension, in the current directory (upstream's
/// default).
pub fn pdf_path(value: &str, result: &Path) -> Result<PathBuf, crate::Error> {
    if !value.is_empty() {
        return Ok(PathBuf::from(value));
    }
    let stem = result
        .file_stem()
        .ok_or_else(|| {
            format!("pdf: cannot name a pdf after the result file {result:?}: give pdf=PATH")
        })
        .map_err(crate::Error::Input)?;
    let mut name = stem.to_os_string();
    name.push(".pdf");
    Ok(PathBuf::from(name))
}

/// The headless browser that prints the pdf: `RACKBENCH_CHROMIUM`, or the
/// first of chromium, chromium-browser, google-chrome and
/// google-chrome-stable on the PATH.
fn chromium() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("RACKBENCH_CHROMIUM").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let names = [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ];
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(format!(
        "pdf: no headless browser to print it with: none of {} is on the PATH (apt-get install chromium, or set RACKBENCH_CHROMIUM)",
        names.join(", ")
    ))
}

/// How long Chromium may take to print the pdf.
const PRINT_TIMEOUT: Duration = Duration::from_secs(120);

/// `text` escaped for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes the pdf to `path` (atomically): the `cover` text on the first
/// page(s), then the graphs. With `keep`, its sources (the HTML page and
/// each graph's SVG, named as upstream's `iocost-tune-SEL.svg`) stay in
/// the current directory, as upstream's `pdf-keep` keeps its own.
pub fn write_pdf(
    path: &Path,
    cover: &str,
    res: &TuneResult,
    model: &str,
    keep: bool,
) -> Result<(), crate::Error> {
    let tmp = tempfile::Builder::new()
        .prefix("rackbench-iocost-tune-")
        .tempdir()
        .map_err(|e| crate::Error::Host(format!("pdf: cannot make a temporary directory: {e}")))?;
    let src = if keep {
        PathBuf::from(".")
    } else {
        tmp.path().to_path_buf()
    };
    let io = |what: &Path, e: std::io::Error| format!("pdf: {}: {e}", what.display());

    let mut html = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>iocost-tune</title><style>\n\
         @page { size: letter; margin: 0.4in; }\n\
         body { margin: 0; }\n\
         pre { font-family: monospace; font-size: 6.5pt; margin: 0; white-space: pre; }\n\
         .graphs { break-before: page; display: grid; grid-template-columns: 1fr 1fr; \
         grid-template-rows: repeat(3, 3.3in); gap: 0; }\n\
         .graphs img { width: 100%; height: 100%; object-fit: contain; }\n\
         </style></head><body>\n<pre>",
    );
    html.push_str(&escape(cover));
    html.push_str("</pre>\n");
    let sels: Vec<DataSel> = res.data.keys().cloned().collect();
    for page in pages(&sels) {
        html.push_str("<div class=\"graphs\">\n");
        for sel in page {
            let Some(series) = res.data.get(&sel) else {
                continue;
            };
            let name = format!("iocost-tune-{sel}.svg");
            let file = src.join(&name);
            std::fs::write(&file, svg_graph(&sel, series, res, model).to_svg())
                .map_err(|e| io(&file, e))
                .map_err(crate::Error::Host)?;
            html.push_str(&format!("<img src=\"{}\">\n", escape(&name)));
        }
        html.push_str("</div>\n");
    }
    html.push_str("</body></html>\n");
    let page = src.join("iocost-tune-graphs.html");
    std::fs::write(&page, html)
        .map_err(|e| io(&page, e))
        .map_err(crate::Error::Host)?;
    let page = std::fs::canonicalize(&page)
        .map_err(|e| io(&page, e))
        .map_err(crate::Error::Host)?;

    let printed = tmp.path().join("printed.pdf");
    let err_log = tmp.path().join("chromium.err");
    let browser = chromium().map_err(crate::Error::Host)?;
    let mut child = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-pdf-header-footer",
        ])
        .arg(format!(
            "--user-data-dir={}",
            tmp.path().join("profile").display()
        ))
        .arg(format!("--print-to-pdf={}", printed.display()))
        // The absolute path, not a file:// URL: the browser escapes it
        // (a directory with a space, `#` or `%` in its name).
        .arg(&page)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(&err_log)
                .map_err(|e| io(&err_log, e))
                .map_err(crate::Error::Host)?,
        ))
        .spawn()
        .map_err(|e| crate::Error::Host(format!("pdf: cannot start {}: {e}", browser.display())))?;
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if t0.elapsed() < PRINT_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(crate::Error::Host(format!(
                    "pdf: {} did not print within {} s",
                    browser.display(),
                    PRINT_TIMEOUT.as_secs()
                )));
            }
            Err(e) => {
                return Err(crate::Error::Host(format!(
                    "pdf: waiting for {}: {e}",
                    browser.display()
                )));
            }
        }
    };
    let err = std::fs::read_to_string(&err_log).unwrap_or_default();
    let bytes = std::fs::read(&printed).unwrap_or_default();
    if !status.success() || !bytes.starts_with(b"%PDF-") {
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(crate::Error::Host(format!(
            "pdf: {} did not print {} ({status}): {last}",
            browser.display(),
            page.display()
        )));
    }
    let mut f = atomic_write_file::AtomicWriteFile::open(path)
        .map_err(|e| io(path, e))
        .map_err(crate::Error::Host)?;
    std::io::Write::write_all(&mut f, &bytes)
        .map_err(|e| io(path, e))
        .map_err(crate::Error::Host)?;
    f.commit()
        .map_err(|e| io(path, e))
        .map_err(crate::Error::Host)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::bench::iocost_tune::fit::{DataLines, DataPoint};

    fn result(sel: DataSel, series: DataSeries) -> TuneResult {
        let mut r: TuneResult = serde_json::from_value(serde_json::json!({
            "base_model": {"rbps": 1, "rseqiops": 1, "rrandiops": 1,
                           "wbps": 1, "wseqiops": 1, "wrandiops": 1},
            "base_qos": {"min": 1.0, "max": 1.0},
            "mem_profile": 16,
            "isol_pct": "01",
            "isol_thr": 0.9,
            "data": {},
            "solutions": {},
            "remarks": []
        }))
        .unwrap();
        r.data.insert(sel, series);
        r
    }

    fn knee() -> DataSeries {
        DataSeries {
            data: (1..=20)
                .map(|i| {
                    let x = 5.0 * i as f64;
                    DataPoint::new(x, if x < 50.0 { 1.0 + x / 100.0 } else { 1.5 })
                })
                .collect(),
            outliers: vec![DataPoint::new(30.0, 1.9)],
            lines: DataLines {
                range: (5.0, 100.0),
                points: vec![
                    DataPoint::new(5.0, 1.05),
                    DataPoint::new(50.0, 1.5),
                    DataPoint::new(100.0, 1.5),
                ],
                hinges: None,
            },
            error: 0.0123,
            v21: false,
        }
    }

    #[test]
    fn labels_and_ranges_are_upstreams() {
        let r = result(DataSel::Mof, knee());
        let g = graph(&DataSel::Mof, &r.data[&DataSel::Mof], &r, 80);
        assert_eq!(
            g.x_label,
            "vrate 5.0-100.0 (min=1.050 max=1.500 infls=50.0 err=0.012)"
        );
        assert_eq!(g.y_label, "MOF@16");
        // x from 0 to 110% of the fitted end; y from 1 (all values >= 1) to
        // 110% of the highest value, the outlier included.
        assert_eq!((g.x_min, g.x_max), (Some(0.0), Some(110.00000000000001)));
        assert_eq!(g.y_min, Some(1.0));
        assert!((g.y_max.unwrap() - 2.09).abs() < 1e-9);
        // The fitted line is sampled at vrate 100/80*i from the fit's start.
        let fitted = &g.series[0].points;
        assert_eq!(fitted[0].0, 5.0);
        assert_eq!(fitted.len(), 80 - 4);
        assert!((fitted.last().unwrap().1 - 1.5).abs() < 1e-9);
        assert_eq!(g.series[1].points, vec![(30.0, 1.9)]);
        assert_eq!(g.series[2].points.len(), 20);

        // A latency is drawn in ms from 0; a flat line prints its mean.
        let mut s = knee();
        s.lines.points = vec![DataPoint::new(5.0, 0.002), DataPoint::new(100.0, 0.002)];
        let sel = DataSel::RLat("99".into(), "mean".into());
        let r = result(sel.clone(), s);
        let g = graph(&sel, &r.data[&sel], &r, 80);
        assert_eq!(g.x_label, "vrate 5.0-100.0 (mean=2.000 err=12.300)");
        assert_eq!(g.y_label, "rlat-99-mean");
        assert_eq!(g.y_min, Some(0.0));
        assert!((g.series[0].points[0].1 - 2.0).abs() < 1e-9);
        // isol is labelled with its percentile and drawn in percent.
        let r = result(DataSel::Isol, knee());
        let g = graph(&DataSel::Isol, &r.data[&DataSel::Isol], &r, 80);
        assert_eq!(g.y_label, "isol-01");
        assert_eq!(g.y_min, Some(0.0));
        assert!((g.series[2].points[0].1 - 105.0).abs() < 1e-9);
    }

    #[test]
    fn text_section_has_the_heading_and_a_graph_per_figure() {
        let mut r = result(DataSel::Mof, knee());
        r.data.insert(DataSel::Isol, knee());
        let t = format_text(&r);
        assert!(t.starts_with(&format!(
            "{GRAPHS_HEADING}\n{}\n",
            "=".repeat(GRAPHS_HEADING.len())
        )));
        // Upstream's layout: each graph 24 face rows, the axis, its ticks,
        // values and label, then a blank line; the y label down the left.
        // Past the heading and its underline.
        let body = t.split_once('\n').unwrap().1.split_once('\n').unwrap().1;
        let graphs: Vec<&str> = body
            .split("\n\n")
            .map(|g| g.trim_start_matches('\n'))
            .filter(|g| !g.is_empty())
            .collect();
        assert_eq!(graphs.len(), 2, "{t}");
        for (g, label) in graphs.iter().zip(["MOF@16", "isol-01"]) {
            let lines: Vec<&str> = g.lines().collect();
            assert_eq!(lines.len(), 28, "{g}");
            let face: Vec<&&str> = lines.iter().take_while(|l| !l.contains("+-")).collect();
            assert_eq!(face.len(), 24, "{g}");
            let down: String = lines.iter().filter_map(|l| l.chars().nth(1)).collect();
            assert_eq!(down.trim(), label, "{g}");
            assert!(lines[27].contains("vrate 5.0-100.0 ("), "{g}");
        }
        // Every mark of the data and the outlier is drawn in each graph.
        assert!(t.contains('×') && t.contains('●') && t.contains('■'));
    }

    #[test]
    fn pdf_pages_group_figures_as_upstream() {
        let lat = |r: bool, l: &str, t: &str| {
            if r {
                DataSel::RLat(l.into(), t.into())
            } else {
                DataSel::WLat(l.into(), t.into())
            }
        };
        // Four plain figures, then two read latencies of one time
        // percentile: they fit in the first page's free places.
        let sels = vec![
            DataSel::Mof,
            DataSel::Amof,
            DataSel::Isol,
            DataSel::LatImp,
            lat(true, "50", "mean"),
            lat(true, "99", "mean"),
            lat(true, "50", "99"),
            lat(true, "99", "99"),
            lat(true, "100", "99"),
            lat(false, "50", "99"),
        ];
        let p = pages(&sels);
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].len(), 6);
        assert_eq!(p[0][4], lat(true, "50", "mean"));
        // The next group (3 of p99) does not fit in a full page: its own;
        // the write latency is another group, and fits beside it.
        assert_eq!(p[1].len(), 4);
        assert_eq!(p[1][3], lat(false, "50", "99"));
        // More than six of one group take more pages.
        let many: Vec<DataSel> = (0..8).map(|_| DataSel::Mof).collect();
        let p = pages(&many);
        assert_eq!(p.iter().map(Vec::len).collect::<Vec<_>>(), vec![6, 2]);
        assert!(pages(&[]).is_empty());
    }

    #[test]
    fn pdf_is_named_after_the_result_file_unless_given() {
        assert_eq!(
            pdf_path("", Path::new("/x/y/bench.json")).unwrap(),
            PathBuf::from("bench.pdf")
        );
        assert_eq!(
            pdf_path("out/g.pdf", Path::new("r.json")).unwrap(),
            PathBuf::from("out/g.pdf")
        );
        let e = pdf_path("", Path::new("/")).unwrap_err();
        assert!(e.to_string().contains("give pdf=PATH"), "{e}");
    }

    #[test]
    fn svg_graph_joins_the_fitted_lines_and_names_the_device() {
        let r = result(DataSel::Mof, knee());
        let g = svg_graph(&DataSel::Mof, &r.data[&DataSel::Mof], &r, " WDC SN720 ");
        assert_eq!(g.y_label, "MOF@16 (WDC SN720)");
        assert_eq!(g.series[0].style, chart::Style::Line);
        assert_eq!(
            g.series[0].points,
            vec![(5.0, 1.05), (50.0, 1.5), (100.0, 1.5)]
        );
        assert_eq!((g.width, g.height), (576, 468));
        assert!(g.to_svg().contains("MOF@16 (WDC SN720)"));
    }
}
