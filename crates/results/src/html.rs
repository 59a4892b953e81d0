//! The report page (`rackbench report html`, `rackbench serve`): one
//! self-contained HTML document over a set of stored runs.
//!
//! Nothing is fetched: styles, the filter script and the charts (inline
//! SVG drawn by the `chart` crate) are all in the page, so it works
//! offline and can be mailed or archived as one file. The page holds:
//!
//! - the answer first ([`crate::page_summary`]): a summary table per job
//!   and host with the headline figures, their spread and trend and the
//!   trust marks, per job a bar chart across hosts with error bars and the
//!   change against the reference host, and the geometric mean of each
//!   host's relative performance over the jobs;
//! - a runs table, filterable by job, host and date with a few lines of
//!   inline script (the filter state is kept in the URL's `#...`);
//! - for each job run on two or more hosts, the comparison of the two hosts
//!   with the most runs ([`crate::compare`], the verdicts of `rackbench
//!   results compare`);
//! - for each of the newest [`MAX_DETAILED`] runs: machine, arguments, every stored metric (the metrics
//!   JSON flattened) and the charts its metrics allow: the SLO search
//!   ladder (`probes`: each probe's percentile against the target, pass or
//!   fail, and requested against achieved QPS), the per-second series of
//!   the final run (`final_series`), latency percentiles (any object with
//!   `p50`/`p99`/... keys), and what its workload draws of it
//!   ([`crate::runner::Workload::charts`]); and per job, what its workload
//!   draws across its runs ([`crate::runner::Workload::history_charts`]).
//!
//! All text from the store is escaped (`html-escape`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use chart::Chart;
use html_escape::{encode_double_quoted_attribute as attr, encode_text as esc};
use serde_json::Value;

use crate::compare::{self, Comparison, SideRows, Verdict, fmt_num};
pub use crate::page_chart::{CHART_H, CHART_W, PageChart};
use crate::shown::Shown;
use crate::store::RunRow;
use direction::Directions;

/// How the page is made.
#[derive(Debug, Clone, Default)]
pub struct PageOptions {
    /// The page title.
    pub title: String,
    /// How the runs were selected (shown under the title).
    pub selection: String,
    /// Reload the page every this many seconds (`rackbench serve`); with
    /// `store_version`, check every this many seconds and reload only when
    /// the store changed.
    pub refresh_secs: Option<u32>,
    /// The store's [`crate::store::Store::version`] the page was made
    /// from: the page asks the server's `version` for the current one and
    /// reloads when it differs.
    pub store_version: Option<String>,
    /// When the page was made, Unix seconds.
    pub generated_at: u64,
    /// A comparison the caller selected the sides of, shown first.
    pub requested: Option<RequestedComparison>,
}

/// Percentile series found in a run's metrics, per unit: (name, points).
type Found = BTreeMap<&'static str, Vec<(String, Vec<(f64, f64)>)>>;
/// The CSS class of a run's result: failed, marked (see [`crate::marks`]) or ok.
fn result_class(r: &RunRow) -> &'static str {
    if !r.success {
        "failed"
    } else if crate::marks::of(&r.metrics).is_empty() {
        "ok"
    } else {
        "marked"
    }
}

fn when(ts: u64) -> String {
    match jiff::Timestamp::from_second(ts as i64) {
        Ok(t) => t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
        Err(_) => format!("@{ts}"),
    }
}

fn day(ts: u64) -> String {
    match jiff::Timestamp::from_second(ts as i64) {
        Ok(t) => t.strftime("%Y-%m-%d").to_string(),
        Err(_) => String::new(),
    }
}

/// `(path, value)` of every scalar in `v`, objects as `a.b`, arrays as
/// `a[0]`; nulls are kept (as `null`).
pub fn flatten(v: &Value) -> Vec<(String, String)> {
    fn walk(v: &Value, path: String, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(x, p, out);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, format!("{path}[{i}]"), out);
                }
            }
            Value::String(s) => out.push((path, s.clone())),
            other => out.push((path, other.to_string())),
        }
    }
    let mut out = Vec::new();
    walk(v, String::new(), &mut out);
    out
}

fn f64_of(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

/// The charts a run's metrics allow (see the module documentation).
pub fn run_charts(row: &RunRow, workloads: &dyn Shown) -> Vec<PageChart> {
    let m = &row.metrics;
    let mut out = Vec::new();
    if let Some(probes) = m.get("probes").and_then(Value::as_array)
        && !probes.is_empty()
    {
        out.extend(ladder(m, probes));
    }
    if let Some(series) = m.get("final_series").and_then(Value::as_array)
        && !series.is_empty()
    {
        out.extend(per_second(series));
    }
    out.extend(percentiles(
        row,
        workloads.percentiles_title(&row.benchmark),
    ));
    if let Some(r) = &row.record {
        out.extend(workloads.charts(&row.benchmark, r));
    }
    out.retain(PageChart::worth_drawing);
    out
}

/// Colours of the ladder's points: what passed green, what failed red,
/// the final run dark green or dark red by its own verdict, unthrottled
/// probes grey.
const PASS: [u8; 3] = [44, 160, 44];
const FAIL: [u8; 3] = [214, 39, 40];
const FINAL_PASS: [u8; 3] = [0, 90, 30];
const FINAL_FAIL: [u8; 3] = [130, 0, 0];
const UNTHROTTLED: [u8; 3] = [127, 127, 127];

/// The SLO search: each probe's percentile against the target, and its
/// requested and achieved QPS. Runs at fixed rates (every probe `fixed`
/// or `final`: nothing was searched) are titled as such.
fn ladder(m: &Value, probes: &[Value]) -> Vec<PageChart> {
    let target = f64_of(m, "target_latency_msec");
    let pct = m
        .get("target_percentile")
        .and_then(Value::as_str)
        .unwrap_or("percentile")
        .to_string();
    let (mut pass, mut fail, mut fin_pass, mut fin_fail, mut unthrottled) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut requested, mut achieved) = (vec![], vec![]);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut searched = false;
    for (i, p) in probes.iter().enumerate() {
        let req = f64_of(p, "requested_qps").unwrap_or(0.0);
        let ach = f64_of(p, "achieved_qps").unwrap_or(f64::NAN);
        let lat = f64_of(p, "target_value_ms").unwrap_or(f64::NAN);
        let seq = f64_of(p, "seq").unwrap_or(i as f64);
        let phase = p.get("phase").and_then(Value::as_str).unwrap_or("");
        let passed = p.get("passed").and_then(Value::as_bool).unwrap_or(false);
        searched |= !matches!(phase, "fixed" | "final");
        achieved.push((seq, ach));
        let x = if req > 0.0 {
            requested.push((seq, req));
            req
        } else {
            ach
        };
        if x.is_finite() {
            lo = lo.min(x);
            hi = hi.max(x);
        }
        let point = (x, lat);
        match (req > 0.0, phase == "final", passed) {
            (false, _, _) => unthrottled.push(point),
            (true, true, true) => fin_pass.push(point),
            (true, true, false) => fin_fail.push(point),
            (true, false, true) => pass.push(point),
            (true, false, false) => fail.push(point),
        }
    }
    let what = if searched {
        "SLO search"
    } else {
        "Fixed-rate runs"
    };
    let per = if searched { "each probe" } else { "each run" };
    let title = match target {
        Some(t) => format!("{what}: {pct} latency of {per} vs target {} ms", fmt_num(t)),
        None => format!("{what}: {pct} latency of {per}"),
    };
    let mut c = Chart::new(&title, "QPS (requested; achieved for unthrottled)", "ms")
        .size(CHART_W, CHART_H)
        .y_min(0.0);
    for (name, pts, color) in [
        ("met target", pass, PASS),
        ("missed target", fail, FAIL),
        ("final run, met target", fin_pass, FINAL_PASS),
        ("final run, missed target", fin_fail, FINAL_FAIL),
        ("unthrottled", unthrottled, UNTHROTTLED),
    ] {
        if !pts.is_empty() {
            c = c.points(name, pts).color(color);
        }
    }
    if let Some(t) = target
        && lo.is_finite()
    {
        c = c
            .series("target", vec![(lo, t), (hi, t)])
            .color([90, 90, 90]);
    }
    let q = Chart::new(
        &format!("{what}: requested vs achieved QPS"),
        if searched { "probe #" } else { "run #" },
        "QPS",
    )
    .size(CHART_W, CHART_H)
    .y_min(0.0)
    .integer_x()
    .points("requested", requested)
    .points("achieved", achieved);
    vec![
        PageChart {
            kind: "ladder",
            chart: c,
        },
        PageChart {
            kind: "ladder_qps",
            chart: q,
        },
    ]
}

/// The seconds of a per-second series worth drawing: the seconds at
/// either edge with under half the median's replies (over the seconds
/// with any) are cut off (the run
/// started, warmed up or ended within them), so that the lines do not fall
/// to 0 at both edges; and whether any was cut.
fn whole_seconds(series: &[Value]) -> (&[Value], bool) {
    let done: Vec<f64> = series
        .iter()
        .map(|s| f64_of(s, "completed").unwrap_or(0.0) + f64_of(s, "errors").unwrap_or(0.0))
        .collect();
    if done.len() < 3 {
        return (series, false);
    }
    // The median of the seconds with replies: stalls do not lower it.
    let mut sorted: Vec<f64> = done.iter().copied().filter(|d| *d > 0.0).collect();
    if sorted.is_empty() {
        return (series, false);
    }
    sorted.sort_by(f64::total_cmp);
    let half = sorted[sorted.len() / 2] / 2.0;
    let a = done.iter().position(|d| *d >= half).unwrap_or(0);
    let b = done
        .iter()
        .rposition(|d| *d >= half)
        .map_or(done.len(), |i| i + 1);
    if a >= b {
        return (series, false);
    }
    (&series[a..b], b - a < series.len())
}

/// The final run's per-second completions and errors, and p50/p99.
fn per_second(series: &[Value]) -> Vec<PageChart> {
    let (series, cut) = whole_seconds(series);
    let x_label = if cut {
        "s (a partial first or last second is not drawn)"
    } else {
        "s"
    };
    // A second without a successful reply has no latency (its stored 0
    // is no measurement): the latency lines skip it.
    let col = |key: &str| -> Vec<(f64, f64)> {
        series
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let t = f64_of(s, "second").unwrap_or(i as f64);
                let v = f64_of(s, key)?;
                let unmeasured = key.ends_with("_ms") && f64_of(s, "completed") == Some(0.0);
                Some((t, if unmeasured { f64::NAN } else { v }))
            })
            .collect()
    };
    let mut out = vec![PageChart {
        kind: "series_counts",
        chart: Chart::new(
            "Final run, per second: completions and errors",
            x_label,
            "per second",
        )
        .size(CHART_W, CHART_H)
        .y_min(0.0)
        .integer_x()
        .series("completed", col("completed"))
        .series("errors", col("errors")),
    }];
    let (p50, p99) = (col("p50_ms"), col("p99_ms"));
    if !p50.is_empty() || !p99.is_empty() {
        out.push(PageChart {
            kind: "series_latency",
            chart: Chart::new("Final run, per second: latency", x_label, "ms")
                .size(CHART_W, CHART_H)
                .y_min(0.0)
                .integer_x()
                .series("p50", p50)
                .series("p99", p99),
        });
    }
    out
}

/// `p50` -> 50, `p999_ms` -> 99.9, `p99.9` -> 99.9; `None` for other keys.
fn percentile_of(key: &str) -> Option<(f64, Option<&'static str>)> {
    let (key, unit) = split_unit(key);
    let digits = key.strip_prefix('p')?;
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let text = if !digits.contains('.') && digits.len() > 2 {
        format!("{}.{}", &digits[..2], &digits[2..])
    } else {
        digits.to_string()
    };
    let p: f64 = text.parse().ok()?;
    (p > 0.0 && p < 100.0).then_some((p, unit))
}

fn split_unit(key: &str) -> (&str, Option<&'static str>) {
    for u in ["ms", "us", "ns"] {
        if let Some(k) = key.strip_suffix(&format!("_{u}")[..]) {
            return (k, Some(unit_name(u)));
        }
    }
    (key, None)
}

fn unit_name(u: &str) -> &'static str {
    match u {
        "ms" => "ms",
        "us" => "µs",
        _ => "ns",
    }
}

/// The unit a key's name gives its values (`latency_us`, `api_latency_ns`).
fn unit_of_key(key: &str) -> Option<&'static str> {
    split_unit(key).1
}

/// Every object with two or more percentile keys, as one series each,
/// charted per unit: x is the number of nines (1 = p90, 2 = p99).
fn percentiles(row: &RunRow, title: &str) -> Vec<PageChart> {
    // Per unit: (series name, points).
    let mut found: Found = BTreeMap::new();
    fn walk(v: &Value, path: &str, unit: Option<&'static str>, found: &mut Found) {
        match v {
            Value::Object(m) => {
                let mut pts = Vec::new();
                let mut own_unit = None;
                for (k, x) in m {
                    if let (Some((p, u)), Some(y)) = (percentile_of(k), x.as_f64()) {
                        pts.push((-(1.0 - p / 100.0).log10(), y));
                        own_unit = own_unit.or(u);
                    }
                }
                if pts.len() >= 2
                    && let Some(u) = own_unit.or(unit)
                {
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let name = if path.is_empty() { "latency" } else { path };
                    found.entry(u).or_default().push((name.to_string(), pts));
                }
                for (k, x) in m {
                    // The ladder and the per-second series have their own charts.
                    if matches!(
                        k.as_str(),
                        "probes" | "final_series" | "analytic_latency_per_probe"
                    ) {
                        continue;
                    }
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(x, &p, unit_of_key(k).or(unit), found);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    let name = x
                        .get("name")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| i.to_string());
                    walk(x, &format!("{path}[{name}]"), unit, found);
                }
            }
            _ => {}
        }
    }
    walk(&row.metrics, "", None, &mut found);
    found
        .into_iter()
        .map(|(unit, series)| {
            let mut c = Chart::new(
                &format!("{title}, {unit}"),
                "nines (0.3 = p50, 1 = p90, 2 = p99, 3 = p99.9)",
                unit,
            )
            .size(CHART_W, CHART_H)
            .log_y();
            for (name, pts) in series {
                c = c.series(&name, pts);
            }
            PageChart {
                kind: "percentiles",
                chart: c,
            }
        })
        .collect()
}

/// The charts across a job's runs, drawn by the job's workload.
pub fn job_charts(job: &str, rows: &[&RunRow], workloads: &dyn Shown) -> Vec<PageChart> {
    let Some(first) = rows.first() else {
        return Vec::new();
    };
    let mut out = workloads.history_charts(&first.benchmark, job, rows);
    out.retain(PageChart::worth_drawing);
    out
}

/// Hosts per job offered for comparison on the page: the ones with the
/// most successful runs. Every ordered pair of them is compared (30 pairs
/// at most), so the page stays small on a big fleet.
pub const MAX_COMPARED_HOSTS: usize = 6;

/// Runs per side of a host comparison on the page: each host's newest
/// successful and failed runs of the job, up to this many. More add
/// nothing a person could see in a verdict (the means' intervals are
/// already narrow), and a fleet's store holds thousands a host.
pub const MAX_SIDE_RUNS: usize = 100;

/// One host-against-host comparison of a job.
#[derive(Debug, Clone)]
pub struct HostComparison {
    pub job: String,
    pub a_host: String,
    pub b_host: String,
    /// The pair shown before the reader picks hosts: the two hosts with the
    /// most successful runs (then by name), A the one with more.
    pub default: bool,
    pub result: Result<Comparison, String>,
}

/// A comparison asked for by the caller (`report html --a-host ...`).
#[derive(Debug, Clone)]
pub struct RequestedComparison {
    /// How the two sides were selected, as the reader should see it.
    pub what: String,
    pub result: Result<Comparison, String>,
}

/// For each job run on two or more hosts: every ordered pair of its
/// [`MAX_COMPARED_HOSTS`] most-run hosts compared, A against B (the page
/// lets the reader pick the pair; `default` marks the one shown first),
/// each side the host's newest [`MAX_SIDE_RUNS`] runs of the job.
pub fn comparisons(rows: &[&RunRow], directions: &dyn Directions) -> Vec<HostComparison> {
    let mut jobs: BTreeMap<&str, Vec<&RunRow>> = BTreeMap::new();
    for r in rows {
        jobs.entry(r.job.as_str()).or_default().push(*r);
    }
    let mut out = Vec::new();
    for (job, rs) in jobs {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &rs {
            *count.entry(r.hostname.as_str()).or_default() += usize::from(r.success);
        }
        if count.len() < 2 {
            continue;
        }
        let mut hosts: Vec<(&str, usize)> = count.into_iter().collect();
        hosts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        hosts.truncate(MAX_COMPARED_HOSTS);
        let side = |host: &str| {
            let mut rows: Vec<&RunRow> =
                rs.iter().filter(|r| r.hostname == host).copied().collect();
            let all = rows.len();
            rows.sort_by(|a, b| b.timestamp.cmp(&a.timestamp).then(b.id.cmp(&a.id)));
            rows.truncate(MAX_SIDE_RUNS);
            SideRows {
                selection: if all > rows.len() {
                    format!(
                        "host {host}, job {job}, its newest {} of {all} runs",
                        rows.len()
                    )
                } else {
                    format!("host {host}, job {job}")
                },
                rows: rows.into_iter().cloned().collect(),
            }
        };
        let sides: BTreeMap<&str, SideRows> = hosts.iter().map(|(h, _)| (*h, side(h))).collect();
        // The noise of a one-run side is pooled from the other runs of
        // the sides' hosts: their newest runs are enough.
        let history: Vec<RunRow> = sides
            .values()
            .flat_map(|s| s.rows.iter().cloned())
            .collect();
        for (i, (a, _)) in hosts.iter().enumerate() {
            for (j, (b, _)) in hosts.iter().enumerate() {
                if i == j {
                    continue;
                }
                let result = compare::compare(&sides[a], &sides[b], &history, directions)
                    .map_err(|e| e.to_string());
                out.push(HostComparison {
                    job: job.to_string(),
                    a_host: a.to_string(),
                    b_host: b.to_string(),
                    default: i == 0 && j == 1,
                    result,
                });
            }
        }
    }
    out
}

const STYLE: &str = "
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ddd;padding:2px 8px;text-align:left;vertical-align:top;font-size:.9em}
th{background:#f3f3f3}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37}.failed{color:#c62828;font-weight:bold}.marked{color:#b26a00;font-weight:bold}
.better{background:#e6f4ea}.worse{background:#fdecea}.exact{background:#fff8e1}
#filters{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #eee}
#filters label{margin-right:1em}
figure.chart{display:inline-block;margin:.5em 1em .5em 0}
figure.chart svg{max-width:100%;height:auto;border:1px solid #eee}
code{background:#f6f6f6;padding:1px 3px;word-break:break-all}
section.run{margin-bottom:2em}
details{margin:.3em 0}
td.figures .fig{white-space:nowrap}.fig .label{color:#555}
td.trend svg{display:block}#summary-table td:nth-child(2){white-space:nowrap}
#summary-table details.marks{max-width:32em}ul.marks{margin:.2em 0;padding-left:1.2em}
figure.chart svg.bars{border:1px solid #eee}
";

const SCRIPT: &str = r#"
(function () {
  var f = {
    job: document.getElementById('f-job'),
    host: document.getElementById('f-host'),
    since: document.getElementById('f-since'),
    until: document.getElementById('f-until'),
    a: document.getElementById('cmp-a'),
    b: document.getElementById('cmp-b')
  };
  Object.keys(f).forEach(function (k) { if (!f[k]) delete f[k]; });
  function pairs() {
    var a = f.a ? f.a.value : '', b = f.b ? f.b.value : '';
    document.querySelectorAll('.cmpjob').forEach(function (g) {
      var n = 0;
      g.querySelectorAll('.cmp').forEach(function (e) {
        var d = e.dataset;
        var show = (!a && !b) ? d.default === '1' :
          ((!a || d.a === a) && (!b || d.b === b));
        e.hidden = !show;
        if (show) n++;
      });
      g.querySelector('.nopair').hidden = n > 0;
    });
  }
  function day(v, add) {
    if (!v) return add ? Infinity : -Infinity;
    var t = Date.parse(v + 'T00:00:00Z') / 1000;
    return isNaN(t) ? (add ? Infinity : -Infinity) : t + add;
  }
  function apply(save) {
    var job = f.job.value, host = f.host.value;
    var since = day(f.since.value, 0), until = day(f.until.value, 86400);
    var shown = 0;
    document.querySelectorAll('.f').forEach(function (e) {
      var d = e.dataset;
      var ok = (!job || d.job === undefined || d.job === job) &&
        (!host || d.host === undefined || d.host === host) &&
        (d.ts === undefined || (+d.ts >= since && +d.ts < until));
      e.hidden = !ok;
      if (ok && e.tagName === 'TR' && e.closest('#runs')) shown++;
    });
    document.getElementById('shown').textContent = String(shown);
    pairs();
    if (save) {
      var q = new URLSearchParams();
      Object.keys(f).forEach(function (k) { if (f[k].value) q.set(k, f[k].value); });
      try { history.replaceState(null, '', '#' + q.toString()); } catch (e) { /* file: URLs may refuse */ }
    }
  }
  var h = location.hash.slice(1);
  if (h.indexOf('=') >= 0) {
    var q = new URLSearchParams(h);
    Object.keys(f).forEach(function (k) { if (q.has(k)) f[k].value = q.get(k); });
  }
  Object.keys(f).forEach(function (k) {
    f[k].addEventListener('change', function () { apply(true); });
    f[k].addEventListener('input', function () { apply(true); });
  });
  document.getElementById('f-reset').addEventListener('click', function () {
    Object.keys(f).forEach(function (k) { f[k].value = ''; });
    apply(true);
  });
  apply(false);
  document.body.setAttribute('data-report-ready', '1');
})();
"#;

fn figure(out: &mut String, c: &PageChart) {
    let _ = writeln!(
        out,
        r#"<figure class="chart" data-kind="{}">{}</figure>"#,
        c.kind,
        c.chart.to_svg(),
    );
}

fn kv_table(out: &mut String, rows: &[(String, String)]) {
    out.push_str("<table class=\"kv\"><tbody>\n");
    for (k, v) in rows {
        let num = v.parse::<f64>().is_ok();
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td{}>{}</td></tr>",
            esc(k),
            if num { r#" class="num""# } else { "" },
            esc(v)
        );
    }
    out.push_str("</tbody></table>\n");
}

fn filter_attrs(job: Option<&str>, host: Option<&str>, ts: Option<u64>) -> String {
    let mut s = String::from(r#" class="f""#);
    if let Some(j) = job {
        let _ = write!(s, r#" data-job="{}""#, attr(j));
    }
    if let Some(h) = host {
        let _ = write!(s, r#" data-host="{}""#, attr(h));
    }
    if let Some(t) = ts {
        let _ = write!(s, r#" data-ts="{t}""#);
    }
    s
}

fn options(out: &mut String, id: &str, label: &str, values: &BTreeSet<&str>) {
    let _ = write!(
        out,
        r#"<label>{label} <select id="{id}"><option value="">all</option>"#
    );
    for v in values {
        let _ = write!(out, r#"<option value="{}">{}</option>"#, attr(v), esc(v));
    }
    out.push_str("</select></label>\n");
}

/// One comparison's sides, verdict table and notes (its caller opens and
/// closes the element around it).
fn comparison_body(out: &mut String, result: &Result<Comparison, String>) {
    match result {
        Err(e) => {
            let _ = writeln!(
                out,
                r#"<p class="verdict-error">Not compared: {}</p>"#,
                esc(e)
            );
        }
        Ok(c) => {
            let _ = writeln!(
                out,
                "<p>A: {} ({} runs) &nbsp; B: {} ({} runs). {} of {} metrics differ.</p>",
                esc(&c.a.selection),
                c.a.runs,
                esc(&c.b.selection),
                c.b.runs,
                c.differing().count(),
                c.metrics.len()
            );
            out.push_str(
                "<table class=\"verdicts\"><thead><tr><th>metric</th><th>A mean</th><th>A sd</th>\
                 <th>B mean</th><th>B sd</th><th>change</th><th>verdict</th></tr></thead><tbody>\n",
            );
            for m in &c.metrics {
                let class = match &m.verdict {
                    Verdict::Significant { judgement, .. } => match judgement {
                        Some(compare::Judgement::Better) => "better",
                        Some(compare::Judgement::Worse) => "worse",
                        None => "exact",
                    },
                    _ => "",
                };
                let name = match &m.role {
                    Some(r) => format!("{} (role {r})", m.metric),
                    None => m.metric.clone(),
                };
                let sd = |s: &crate::stats::Summary| s.stdev.map(fmt_num).unwrap_or_default();
                let _ = writeln!(
                    out,
                    r#"<tr class="{class}"><th>{}</th><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="verdict">{}</td></tr>"#,
                    esc(&name),
                    fmt_num(m.a.mean),
                    sd(&m.a),
                    fmt_num(m.b.mean),
                    sd(&m.b),
                    m.change_pct
                        .map(|p| format!("{}%", fmt_num(p)))
                        .unwrap_or_default(),
                    esc(&m.text)
                );
            }
            out.push_str("</tbody></table>\n");
            for n in &c.notes {
                let _ = writeln!(out, r#"<p class="note">{}</p>"#, esc(n));
            }
        }
    }
}

/// The comparisons part of the page: the requested one, then per job its
/// host pairs, one shown at a time (the A/B host choosers pick it).
fn comparisons_html(
    out: &mut String,
    rows: &[&RunRow],
    requested: Option<&RequestedComparison>,
    directions: &dyn Directions,
) {
    if let Some(r) = requested {
        out.push_str("<h2 id=\"requested\">Requested comparison</h2>\n");
        let _ = writeln!(
            out,
            r#"<section class="comparison requested"><p>{}</p>"#,
            esc(&r.what)
        );
        comparison_body(out, &r.result);
        out.push_str("</section>\n");
    }
    let comps = comparisons(rows, directions);
    out.push_str("<h2 id=\"comparisons\">Host comparisons</h2>\n");
    if comps.is_empty() {
        out.push_str("<p>No job in this selection was run on two hosts.</p>\n");
        return;
    }
    let hosts: BTreeSet<&str> = comps
        .iter()
        .flat_map(|c| [c.a_host.as_str(), c.b_host.as_str()])
        .collect();
    out.push_str("<p id=\"cmp-choose\">");
    options(out, "cmp-a", "A host", &hosts);
    options(out, "cmp-b", "B host", &hosts);
    let _ = writeln!(
        out,
        "(none chosen: per job its two most-run hosts; at most {MAX_COMPARED_HOSTS} hosts per job are compared)</p>"
    );
    let mut by_job: BTreeMap<&str, Vec<&HostComparison>> = BTreeMap::new();
    for c in &comps {
        by_job.entry(c.job.as_str()).or_default().push(c);
    }
    for (job, cs) in by_job {
        let _ = writeln!(
            out,
            r#"<div class="cmpjob f" data-job="{}"><h3>{}</h3>"#,
            attr(job),
            esc(job)
        );
        for c in cs {
            let _ = writeln!(
                out,
                r#"<section class="comparison cmp" data-a="{}" data-b="{}"{}{}><h4>{} (A) against {} (B)</h4>"#,
                attr(&c.a_host),
                attr(&c.b_host),
                if c.default {
                    r#" data-default="1""#
                } else {
                    ""
                },
                if c.default { "" } else { " hidden" },
                esc(&c.a_host),
                esc(&c.b_host)
            );
            comparison_body(out, &c.result);
            out.push_str("</section>\n");
        }
        out.push_str(
            "<p class=\"nopair\" hidden>The chosen hosts have not both run this job.</p></div>\n",
        );
    }
}

/// The filters over the runs: job, host and date range.
fn filters(out: &mut String, rows: &[&RunRow]) {
    let jobs: BTreeSet<&str> = rows.iter().map(|r| r.job.as_str()).collect();
    let hosts: BTreeSet<&str> = rows.iter().map(|r| r.hostname.as_str()).collect();
    out.push_str("<div id=\"filters\">");
    options(out, "f-job", "Job", &jobs);
    options(out, "f-host", "Host", &hosts);
    let (first, last) = (
        rows.last().map(|r| day(r.timestamp)).unwrap_or_default(),
        rows.first().map(|r| day(r.timestamp)).unwrap_or_default(),
    );
    let _ = write!(
        out,
        r#"<label>From <input type="date" id="f-since" min="{first}" max="{last}"></label><label>to <input type="date" id="f-until" min="{first}" max="{last}"></label><button type="button" id="f-reset">all</button> <span id="shown">{}</span> runs shown</div>"#,
        rows.len()
    );
    out.push('\n');
}

/// Runs shown in detail (charts, metrics, machine), newest first: a
/// fleet's store of thousands of runs keeps its summary, table and
/// comparisons whole, and a page that loads in seconds.
pub const MAX_DETAILED: usize = 200;

/// The runs table, newest first; runs beyond [`MAX_DETAILED`] are not
/// linked.
fn runs_table(out: &mut String, rows: &[&RunRow]) {
    out.push_str("<h2 id=\"runs-heading\">Runs</h2>\n<table id=\"runs\"><thead><tr><th>run</th><th>job</th><th>role</th><th>iter</th><th>when</th><th>host</th><th>result</th></tr></thead><tbody>\n");
    for (i, r) in rows.iter().enumerate() {
        let run = if i < MAX_DETAILED {
            format!(r##"<a href="#run-{}">{}</a>"##, r.id, esc(&r.run_id))
        } else {
            esc(&r.run_id).to_string()
        };
        let _ = writeln!(
            out,
            r##"<tr{}><td>{run}</td><td>{}</td><td>{}</td><td class="num">{}</td><td>{}</td><td>{}</td><td class="{}">{}</td></tr>"##,
            filter_attrs(Some(&r.job), Some(&r.hostname), Some(r.timestamp)),
            esc(&r.job),
            esc(r.role.as_deref().unwrap_or("")),
            r.iteration,
            when(r.timestamp),
            esc(&r.hostname),
            result_class(r),
            crate::marks::result_text(r.success, &r.metrics),
        );
    }
    out.push_str("</tbody></table>\n");
}

/// Each job's charts across its runs.
fn across_runs(out: &mut String, rows: &[&RunRow], workloads: &dyn Shown) {
    let mut by_job: BTreeMap<&str, Vec<&RunRow>> = BTreeMap::new();
    for r in rows {
        by_job.entry(r.job.as_str()).or_default().push(r);
    }
    let job_figs: Vec<(&str, Vec<PageChart>)> = by_job
        .iter()
        .map(|(j, rs)| (*j, job_charts(j, rs, workloads)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    if !job_figs.is_empty() {
        out.push_str("<h2 id=\"jobs\">Across runs</h2>\n");
        for (job, charts) in &job_figs {
            let _ = writeln!(out, "<div{}>", filter_attrs(Some(job), None, None));
            for c in charts {
                figure(out, c);
            }
            out.push_str("</div>\n");
        }
    }
}

/// One run's section: its heading, marks, args, charts, metrics, hook
/// outputs and machine.
fn run_details(out: &mut String, r: &RunRow, workloads: &dyn Shown) {
    let _ = writeln!(
        out,
        r#"<section id="run-{}"{}>"#,
        r.id,
        filter_attrs(Some(&r.job), Some(&r.hostname), Some(r.timestamp))
            .replace(r#"class="f""#, r#"class="run f""#)
    );
    let _ = writeln!(
        out,
        r#"<h3>{} &middot; run {} iteration {}{} &middot; {} &middot; {} &middot; <span class="{}">{}</span></h3>"#,
        esc(&r.job),
        esc(&r.run_id),
        r.iteration,
        r.role
            .as_deref()
            .map(|x| format!(" role {}", esc(x)))
            .unwrap_or_default(),
        esc(&r.hostname),
        when(r.timestamp),
        result_class(r),
        crate::marks::result_text(r.success, &r.metrics),
    );
    let marks = crate::marks::of(&r.metrics);
    if !marks.is_empty() {
        out.push_str("<ul class=\"marks\">");
        for m in &marks {
            let _ = write!(out, "<li>marked: {}</li>", esc(m));
        }
        out.push_str("</ul>\n");
    }
    let args = shell_words::join(&r.args);
    let _ = writeln!(
        out,
        "<p>{} <code class=\"args\">{}</code></p>",
        esc(&r.benchmark),
        esc(&args)
    );
    for c in run_charts(r, workloads) {
        figure(out, &c);
    }
    // The hooks' outputs (`metrics.hooks`, by hook name) apart from the
    // workload's metrics.
    let mut workload = r.metrics.clone();
    let hooks = workload
        .as_object_mut()
        .and_then(|m| m.remove("hooks"))
        .filter(|h| h.as_object().is_some_and(|o| !o.is_empty()));
    let metrics = flatten(&workload);
    let _ = writeln!(
        out,
        "<details class=\"metrics\"><summary>Metrics ({} values)</summary>",
        metrics.len()
    );
    kv_table(out, &metrics);
    out.push_str("</details>\n");
    if let Some(h) = hooks {
        let names: Vec<&str> = h
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<details class=\"hooks\"><summary>Hook outputs ({})</summary>",
            esc(&names.join(", "))
        );
        kv_table(out, &flatten(&h));
        out.push_str("</details>\n");
    }
    let machine = flatten(&r.machine);
    let _ = writeln!(
        out,
        "<details class=\"machine\"><summary>Machine ({} values)</summary>",
        machine.len()
    );
    kv_table(out, &machine);
    out.push_str("</details>\n</section>\n");
}

/// The page over `rows` (any order; shown newest first).
pub fn page(rows: &[RunRow], opts: &PageOptions, workloads: &dyn Shown) -> String {
    let mut rows: Vec<&RunRow> = rows.iter().collect();
    rows.sort_by(|a, b| b.timestamp.cmp(&a.timestamp).then(b.id.cmp(&a.id)));
    let title = if opts.title.is_empty() {
        "rackbench report"
    } else {
        &opts.title
    };
    let mut out = String::with_capacity(64 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    out.push_str(r#"<meta name="viewport" content="width=device-width, initial-scale=1">"#);
    out.push('\n');
    match (opts.refresh_secs, &opts.store_version) {
        // A few bytes every s seconds; the page itself only when a run
        // was recorded.
        (Some(s), Some(v)) => {
            let _ = writeln!(
                out,
                "<script>setInterval(function(){{fetch('version',{{cache:'no-store'}}).then(function(r){{return r.ok?r.text():null}}).then(function(v){{if(v!==null&&v.trim()!=={v})location.reload()}}).catch(function(){{}})}},{ms});</script>",
                v = serde_json::to_string(v).unwrap_or_default(),
                ms = u64::from(s) * 1000
            );
        }
        (Some(s), None) => {
            let _ = writeln!(out, r#"<meta http-equiv="refresh" content="{s}">"#);
        }
        (None, _) => {}
    }
    let _ = writeln!(
        out,
        "<title>{}</title>\n<style>{STYLE}</style></head>",
        esc(title)
    );
    let _ = writeln!(out, "<body>\n<h1>{}</h1>", esc(title));
    let _ = writeln!(
        out,
        "<p>{} runs ({}), generated {}.{}</p>",
        rows.len(),
        esc(if opts.selection.is_empty() {
            "all runs"
        } else {
            &opts.selection
        }),
        when(opts.generated_at),
        match (opts.refresh_secs, &opts.store_version) {
            (Some(s), Some(_)) =>
                format!(" The page reloads when a run is recorded (checked every {s} s)."),
            (Some(s), None) => format!(" The page reloads every {s} s."),
            (None, _) => String::new(),
        }
    );

    filters(&mut out, &rows);

    crate::page_summary::summary(&mut out, &rows, workloads);

    runs_table(&mut out, &rows);

    comparisons_html(&mut out, &rows, opts.requested.as_ref(), workloads);

    across_runs(&mut out, &rows, workloads);

    out.push_str("<h2 id=\"details\">Run details</h2>\n");
    if rows.len() > MAX_DETAILED {
        let _ = writeln!(
            out,
            "<p class=\"note\">The newest {MAX_DETAILED} of {} runs in detail; select fewer \
             (<code>--job</code>, <code>--host</code>, <code>--since</code>) to see the others'.</p>",
            rows.len()
        );
    }
    for r in rows.iter().take(MAX_DETAILED) {
        run_details(&mut out, r, workloads);
    }
    let _ = writeln!(out, "<script>{SCRIPT}</script>\n</body></html>");
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn row(id: i64, job: &str, bench: &str, host: &str, metrics: Value) -> RunRow {
        RunRow {
            id,
            run_id: format!("r{id}"),
            job: job.into(),
            benchmark: bench.into(),
            role: None,
            iteration: 1,
            timestamp: 1_795_000_000 + id as u64 * 60,
            success: true,
            hostname: host.into(),
            args: vec!["--x".into(), "a b".into()],
            machine: json!({"hostname": host, "cpu": {"model": "<Fake & CPU>"}}),
            metrics,
            report_path: None,
            artifacts_dir: None,
            record: None,
            duration_secs: None,
        }
    }

    /// A search's metrics with a ladder of probes (the final one at
    /// 19 ms against a 20 ms target) and a final series.
    fn ladder_metrics() -> Value {
        serde_json::from_str(include_str!("../testdata/ladder_metrics.json"))
            .expect("ladder_metrics.json")
    }

    #[test]
    fn percentile_keys() {
        assert_eq!(percentile_of("p50"), Some((50.0, None)));
        assert_eq!(percentile_of("p999_ms"), Some((99.9, Some("ms"))));
        assert_eq!(percentile_of("p99.9"), Some((99.9, None)));
        assert_eq!(percentile_of("p9999_us"), Some((99.99, Some("µs"))));
        assert_eq!(percentile_of("peak_qps"), None);
        assert_eq!(percentile_of("p"), None);
        assert_eq!(percentile_of("max_ms"), None);
    }

    #[test]
    fn text_from_the_store_is_escaped() {
        let mut r = row(
            1,
            "job<script>alert(1)</script>",
            "calibrate",
            "h\"1&",
            json!({"note": "<b>x</b>", "v": 1.5}),
        );
        r.args.push("<img src=x onerror=alert(2)>".into());
        let html = page(&[r], &PageOptions::default(), &crate::shown::NoWorkloads);
        assert!(!html.contains("<script>alert(1)"), "job name not escaped");
        assert!(html.contains("job&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!html.contains("<img src=x"), "args not escaped");
        assert!(!html.contains("<b>x</b>"));
        assert!(html.contains("&lt;b&gt;x&lt;/b&gt;"));
        assert!(html.contains(r#"data-host="h&quot;1&amp;""#), "{html}");
        assert!(html.contains("&lt;Fake &amp; CPU&gt;"));
        // Exactly one script element: the page's own.
        assert_eq!(html.matches("<script").count(), 1);
    }

    #[test]
    fn ladder_points_are_split_by_outcome() {
        let r = row(1, "c", "calibrate", "h", ladder_metrics());
        let charts = run_charts(&r, &crate::shown::NoWorkloads);
        let l = &charts.iter().find(|c| c.kind == "ladder").unwrap().chart;
        let series = |n: &str| {
            l.series
                .iter()
                .find(|s| s.name == n)
                .unwrap()
                .points
                .clone()
        };
        assert_eq!(series("met target"), vec![(200.0, 15.0)]);
        assert_eq!(series("missed target"), vec![(400.0, 34.0)]);
        assert_eq!(series("final run, met target"), vec![(250.0, 19.0)]);
        assert_eq!(series("unthrottled"), vec![(800.0, 45.0)]);
        assert_eq!(series("target"), vec![(200.0, 20.0), (800.0, 20.0)]);
        assert!(
            l.title.contains("99p") && l.title.contains("20 ms"),
            "{}",
            l.title
        );
        // A run without probes or percentiles has no charts.
        assert!(
            run_charts(
                &row(2, "x", "x", "h", json!({"ops": 3})),
                &crate::shown::NoWorkloads
            )
            .is_empty()
        );
    }

    #[test]
    fn partial_seconds_at_the_edges_are_not_drawn() {
        let sec = |i: u64, done: u64, p50: f64| json!({"second": i, "completed": done, "errors": 0, "p50_ms": p50, "p99_ms": p50});
        let series = vec![
            sec(0, 0, 0.0),
            sec(1, 10, 3.0),
            sec(2, 100, 2.0),
            sec(3, 0, 0.0),
            sec(4, 100, 2.0),
            sec(5, 100, 2.0),
            sec(6, 30, 2.5),
        ];
        let charts = per_second(&series);
        let counts = &charts[0].chart;
        let done = &counts.series[0].points;
        // Seconds 2..=5 drawn: the stall at 3 is real and stays.
        assert_eq!(
            done.iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![2.0, 3.0, 4.0, 5.0]
        );
        assert!(counts.x_label.contains("partial"), "{}", counts.x_label);
        assert!(counts.x_integer);
        // No latency where nothing completed.
        let p50 = &charts[1].chart.series[0].points;
        assert!(p50[1].1.is_nan() && p50[0].1 == 2.0);
        // Whole series keep every second and say nothing.
        let whole = vec![sec(0, 100, 1.0), sec(1, 100, 1.0), sec(2, 90, 1.0)];
        assert_eq!(per_second(&whole)[0].chart.x_label, "s");
    }

    #[test]
    fn fixed_rate_runs_and_failed_finals_are_drawn_as_such() {
        let m = json!({"target_latency_msec": 20.0, "target_percentile": "99p", "probes": [
            {"seq": 0, "phase": "fixed", "requested_qps": 100.0, "achieved_qps": 100.0,
             "target_value_ms": 5.0, "passed": true},
            {"seq": 1, "phase": "final", "requested_qps": 200.0, "achieved_qps": 150.0,
             "target_value_ms": 50.0, "passed": false}]});
        let r = row(1, "c", "calibrate", "h", m);
        let charts = run_charts(&r, &crate::shown::NoWorkloads);
        let l = &charts.iter().find(|c| c.kind == "ladder").unwrap().chart;
        assert!(l.title.starts_with("Fixed-rate runs"), "{}", l.title);
        let i = l
            .series
            .iter()
            .position(|s| s.name == "final run, missed target")
            .unwrap();
        assert_eq!(l.series_color(i), FINAL_FAIL);
        assert!(l.series.iter().all(|s| s.name != "final run, met target"));
        let q = &charts
            .iter()
            .find(|c| c.kind == "ladder_qps")
            .unwrap()
            .chart;
        assert!(q.x_integer && q.x_label == "run #");
        // A single probe is one x: no chart at all.
        let one = json!({"probes": [{"seq": 0, "phase": "fixed", "requested_qps": 100.0,
            "achieved_qps": 100.0, "target_value_ms": 5.0, "passed": true}]});
        assert!(
            run_charts(
                &row(2, "c", "calibrate", "h", one),
                &crate::shown::NoWorkloads
            )
            .is_empty()
        );
    }

    #[test]
    fn two_hosts_are_compared_with_a_verdict() {
        let mut rows = Vec::new();
        for i in 0..3 {
            rows.push(row(
                i,
                "calibrate_quick",
                "calibrate",
                "h1",
                json!({"peak_qps": 800.0 + i as f64}),
            ));
            rows.push(row(
                10 + i,
                "calibrate_quick",
                "calibrate",
                "h2",
                json!({"peak_qps": 900.0 + i as f64}),
            ));
        }
        rows.push(row(
            20,
            "calibrate_quick",
            "calibrate",
            "h3",
            json!({"peak_qps": 1.0}),
        ));
        // Three hosts: every ordered pair, the two most-run hosts first.
        let refs: Vec<&RunRow> = rows.iter().collect();
        let comps = comparisons(&refs, &crate::shown::NoWorkloads);
        assert_eq!(comps.len(), 6);
        let defaults: Vec<&HostComparison> = comps.iter().filter(|c| c.default).collect();
        assert_eq!(defaults.len(), 1);
        let d = defaults[0];
        assert_eq!((d.a_host.as_str(), d.b_host.as_str()), ("h1", "h2"));
        let c = d.result.as_ref().unwrap();
        assert!(c.a.selection.contains("h1") && c.b.selection.contains("h2"));
        // The reversed pair is there too, with the opposite change.
        let rev = comps
            .iter()
            .find(|c| c.a_host == "h2" && c.b_host == "h1")
            .unwrap()
            .result
            .as_ref()
            .unwrap();
        let (fwd, back) = (
            c.metrics[0].change_pct.unwrap(),
            rev.metrics[0].change_pct.unwrap(),
        );
        assert!(fwd > 0.0 && back < 0.0, "{fwd} {back}");
        // h3 has one run: comparing it cannot judge noise, and says so.
        assert!(comps.iter().any(|c| c.a_host == "h3"));
        let html = page(&rows, &PageOptions::default(), &crate::shown::NoWorkloads);
        assert!(html.contains(r#"<div class="cmpjob f" data-job="calibrate_quick">"#));
        assert!(html.contains(
            r#"<section class="comparison cmp" data-a="h1" data-b="h2" data-default="1">"#
        ));
        assert!(
            html.contains(r#"<section class="comparison cmp" data-a="h2" data-b="h1" hidden>"#)
        );
        assert!(html.contains(r#"id="cmp-a""#) && html.contains(r#"id="cmp-b""#));
        assert!(html.contains(r#"<td class="verdict">"#));
        let m = &c.metrics[0];
        assert!(html.contains(&*esc(&m.text).to_string()), "{}", m.text);
        assert!(!html.contains("Requested comparison"));
        // A requested comparison comes first.
        let html = page(
            &rows,
            &PageOptions {
                requested: Some(RequestedComparison {
                    what: "A: host h3; B: host h1".into(),
                    result: Err("side A has no successful run".into()),
                }),
                ..Default::default()
            },
            &crate::shown::NoWorkloads,
        );
        let (req, hosts) = (
            html.find("Requested comparison").unwrap(),
            html.find("Host comparisons").unwrap(),
        );
        assert!(req < hosts);
        assert!(html.contains("A: host h3; B: host h1"));
    }

    #[test]
    fn hosts_compared_per_job_are_capped() {
        let mut rows = Vec::new();
        for h in 0..9 {
            for i in 0..(2 + h) {
                rows.push(row(
                    (h * 100 + i) as i64,
                    "j",
                    "calibrate",
                    &format!("h{h}"),
                    json!({"peak_qps": 100.0 + (h * 10 + i) as f64}),
                ));
            }
        }
        let refs: Vec<&RunRow> = rows.iter().collect();
        let comps = comparisons(&refs, &crate::shown::NoWorkloads);
        assert_eq!(comps.len(), MAX_COMPARED_HOSTS * (MAX_COMPARED_HOSTS - 1));
        // The most-run hosts are the ones kept.
        assert!(comps.iter().all(|c| c.a_host != "h0" && c.b_host != "h0"));
        let d = comps.iter().find(|c| c.default).unwrap();
        assert_eq!((d.a_host.as_str(), d.b_host.as_str()), ("h8", "h7"));
    }
}
