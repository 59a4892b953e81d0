//! What a person reads after `run` on a terminal: per job, its headline
//! figures (each workload's [`direction::Headline`]s) with their spread
//! over the job's iterations, whether the result can be trusted (failures,
//! interruptions, host-trust marks) and where the reports are. hyperfine's
//! summary is the model: the answer with its spread, then the details'
//! whereabouts. At most [`MAX_LINES`] lines a job, 100 columns wide.
//!
//! When stdout is not a terminal (or with `--json`), `run` prints
//! benchpress' report JSON instead, and nothing else, on stdout.

use std::path::PathBuf;

use serde_json::{Map, Value};

/// The most lines one job's summary takes.
pub const MAX_LINES: usize = 15;
/// The widest line of a summary.
pub const WIDTH: usize = 100;

/// One iteration of a job, as the runner ended it.
#[derive(Debug, Clone)]
pub struct Iteration {
    /// The report's metrics (with `error`, `interrupted`, `timed_out` and
    /// the marks where the runner added them).
    pub metrics: Map<String, Value>,
    pub success: bool,
    /// Wall time of the benchmark and its hooks.
    pub secs: f64,
    /// The report file written for it, if it was written.
    pub report: Option<PathBuf>,
}

/// A job's iterations so far, summarised when the job ends (or is
/// interrupted).
#[derive(Debug, Clone)]
pub struct JobRuns {
    pub job: String,
    /// The job's benchmark, whose headlines are shown.
    pub benchmark: String,
    pub iterations: Vec<Iteration>,
}

/// The value at a dotted `key` of flattened metrics, if it is a number.
pub fn value_at(metrics: &Map<String, Value>, key: &str) -> Option<f64> {
    let mut parts = key.split('.');
    let mut v = metrics.get(parts.next()?)?;
    for p in parts {
        v = v.get(p)?;
    }
    v.as_f64()
}

/// The headlines `metrics` has a number for, in the workload's order.
pub fn figures<'h>(
    headlines: &'h [direction::Headline],
    metrics: &Map<String, Value>,
) -> Vec<(&'h direction::Headline, f64)> {
    headlines
        .iter()
        .filter_map(|h| value_at(metrics, h.key).map(|v| (h, v)))
        .collect()
}

/// A duration as a person reads it: `12.3 s`, `4m05s`, `2h10m`.
pub fn duration(secs: f64) -> String {
    if secs < 60.0 {
        format!("{secs:.1} s")
    } else if secs < 3600.0 {
        format!("{}m{:02}s", (secs / 60.0) as u64, (secs % 60.0) as u64)
    } else {
        format!(
            "{}h{:02}m",
            (secs / 3600.0) as u64,
            ((secs % 3600.0) / 60.0) as u64
        )
    }
}

/// A number as a person reads it: four significant digits at most, no
/// exponent below 10^12, thousands not separated (as the upstream tools
/// print them).
pub fn number(v: f64) -> String {
    number_like(v, v)
}

/// `v` with as many decimals as [`number`] gives `like` (a spread and a
/// range printed as precisely as their mean).
fn number_like(v: f64, like: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = like.abs();
    let decimals = if a == 0.0 || a >= 1000.0 {
        0
    } else if a >= 100.0 {
        1
    } else if a >= 10.0 {
        2
    } else if a >= 1.0 {
        3
    } else {
        // 0.0123 -> 4 decimals, 0.000123 -> 6: three significant digits.
        (2 - a.log10().floor() as i32).clamp(3, 9) as usize
    };
    format!("{v:.decimals$}")
}

/// A value with its headline's unit (`4.000 QPS`, `69.36%`, `1.500 GiB`).
pub fn with_unit(v: f64, unit: &str) -> String {
    match unit {
        "" => number(v),
        "%" => format!("{}%", number(v)),
        "B" | "B/s" => bytes(v, unit),
        u => format!("{} {u}", number(v)),
    }
}

/// Bytes in binary units (`1.50 GiB`, `512 MiB/s`).
fn bytes(v: f64, unit: &str) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = v;
    let mut i = 0;
    while x.abs() >= 1024.0 && i + 1 < UNITS.len() {
        x /= 1024.0;
        i += 1;
    }
    let rate = if unit == "B/s" { "/s" } else { "" };
    format!("{} {}{rate}", number(x), UNITS[i])
}

/// Mean and sample standard deviation.
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// One headline figure over the successful iterations that report it:
/// the value for one, `mean ± sd (min … max, n runs)` for several.
pub fn figure(h: &direction::Headline, xs: &[f64]) -> String {
    if xs.len() == 1 {
        return with_unit(xs[0], h.unit);
    }
    let (mean, sd) = mean_sd(xs);
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(
        "{} ± {}  ({} … {}, {} runs)",
        with_unit(mean, h.unit),
        number_like(sd, mean),
        number_like(min, mean),
        number_like(max, mean),
        xs.len()
    )
}

fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// `s` cut to `width` characters, an ellipsis marking the cut.
pub fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The job's status word(s): `ok`, `FAILED`, `INTERRUPTED`, `TIMED OUT`,
/// or counts of each over several iterations; ", MARKED" when any
/// iteration's result carries a host-trust mark.
fn status(runs: &[Iteration]) -> String {
    let mut ok = 0;
    let mut failed = 0;
    let mut interrupted = 0;
    let mut timed_out = 0;
    for r in runs {
        let flag = |k: &str| r.metrics.get(k).and_then(Value::as_bool) == Some(true);
        if flag("interrupted") {
            interrupted += 1;
        } else if flag("timed_out") {
            timed_out += 1;
        } else if r.success {
            ok += 1;
        } else {
            failed += 1;
        }
    }
    let marked = runs
        .iter()
        .any(|r| r.metrics.contains_key(crate::marks::KEY));
    let mut parts = Vec::new();
    if runs.len() == 1 {
        parts.push(
            match (ok, failed, interrupted) {
                (1, _, _) => "ok",
                (_, 1, _) => "FAILED",
                (_, _, 1) => "INTERRUPTED",
                _ => "TIMED OUT",
            }
            .to_string(),
        );
    } else {
        for (n, word) in [
            (ok, "ok"),
            (failed, "failed"),
            (interrupted, "interrupted"),
            (timed_out, "timed out"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {word}"));
            }
        }
    }
    if marked {
        parts.push("MARKED".into());
    }
    parts.join(", ")
}

/// The summary of one job: a status line, its headline figures, its
/// errors and marks (each once), and where its reports are.
pub fn render(runs: &JobRuns, headlines: &[direction::Headline]) -> String {
    let its = &runs.iterations;
    let secs: f64 = its.iter().map(|i| i.secs).sum();
    let mut lines = vec![fit(
        &format!(
            "{}: {} ({} run{}, {})",
            runs.job,
            status(its),
            its.len(),
            if its.len() == 1 { "" } else { "s" },
            duration(secs)
        ),
        WIDTH,
    )];
    let measured: Vec<&Iteration> = its.iter().filter(|i| i.success).collect();
    let rows: Vec<(String, String)> = headlines
        .iter()
        .filter_map(|h| {
            let xs: Vec<f64> = measured
                .iter()
                .filter_map(|i| value_at(&i.metrics, h.key))
                .collect();
            (!xs.is_empty()).then(|| (h.label.to_string(), figure(h, &xs)))
        })
        .take(6)
        .collect();
    let label_w = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    for (label, value) in rows {
        lines.push(fit(&format!("  {label:<label_w$}  {value}"), WIDTH));
    }
    let notes = notes(its);
    let room = MAX_LINES - lines.len() - 1;
    let shown = if notes.len() > room {
        room - 1
    } else {
        notes.len()
    };
    for n in &notes[..shown] {
        lines.push(fit(&format!("  {n}"), WIDTH));
    }
    if notes.len() > shown {
        lines.push(format!(
            "  ({} more notes in the report{})",
            notes.len() - shown,
            if its.len() == 1 { "" } else { "s" }
        ));
    }
    let reports: Vec<&PathBuf> = its.iter().filter_map(|i| i.report.as_ref()).collect();
    match reports.as_slice() {
        [] => lines.push("  no report written".into()),
        [one] => lines.push(format!("  report: {}", one.display())),
        [first, ..] => lines.push(format!(
            "  reports: {} ({})",
            first
                .with_file_name(format!("{}_metrics_*.json", runs.job))
                .display(),
            reports.len()
        )),
    }
    lines.join("\n") + "\n"
}

/// The errors and host-trust marks of the iterations, each kind once: a
/// note whose words before its first `:` recur in several iterations (a
/// mark with each run's own figures) is shown once, with the first run's
/// figures and how many runs it concerns.
fn notes(its: &[Iteration]) -> Vec<String> {
    let mut found: Vec<(String, String, usize)> = Vec::new();
    for i in its {
        let mut mine: Vec<String> = text_of(i.metrics.get("error"))
            .map(|e| format!("error: {e}"))
            .into_iter()
            .collect();
        if let Some(Value::Array(marks)) = i.metrics.get(crate::marks::KEY) {
            mine.extend(
                marks
                    .iter()
                    .filter_map(|m| text_of(Some(m)))
                    .map(|m| format!("marked: {m}")),
            );
        }
        let mut counted = std::collections::HashSet::new();
        for n in mine {
            let head = match n.splitn(3, ':').collect::<Vec<_>>().as_slice() {
                [kind, what, _] => format!("{kind}:{what}"),
                _ => n.clone(),
            };
            match found.iter_mut().find(|(h, _, _)| *h == head) {
                Some((_, _, count)) => {
                    if counted.insert(head) {
                        *count += 1;
                    }
                }
                None => {
                    counted.insert(head.clone());
                    found.push((head, n, 1));
                }
            }
        }
    }
    found
        .into_iter()
        .map(|(_, text, count)| match (its.len(), count) {
            (1, _) => text,
            (n, c) => match text.split_once(": ") {
                Some((kind, rest)) => format!("{kind} ({c} of {n} runs): {rest}"),
                None => text,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    static H: &[direction::Headline] = &[
        direction::headline("final_achieved_qps", "QPS at the target", "QPS"),
        direction::headline("lat.p99_ms", "p99", "ms"),
        direction::headline("absent", "never shown", ""),
        direction::headline("bytes", "footprint", "B"),
    ];

    fn it(m: Value, success: bool) -> Iteration {
        Iteration {
            metrics: m.as_object().cloned().unwrap_or_default(),
            success,
            secs: 12.0,
            report: Some(PathBuf::from(
                "./benchmark_metrics_x/j_metrics_1_iter_None.json",
            )),
        }
    }

    #[test]
    fn one_run() {
        let r = JobRuns {
            job: "feedsim_mini".into(),
            benchmark: "feedsim".into(),
            iterations: vec![it(
                json!({"final_achieved_qps": 4.0, "lat": {"p99_ms": 244.735}, "bytes": 1610612736u64}),
                true,
            )],
        };
        assert_eq!(
            render(&r, H),
            "feedsim_mini: ok (1 run, 12.0 s)\n  \
             QPS at the target  4.000 QPS\n  \
             p99                244.7 ms\n  \
             footprint          1.500 GiB\n  \
             report: ./benchmark_metrics_x/j_metrics_1_iter_None.json\n"
        );
    }

    #[test]
    fn spread_over_successful_runs_and_notes_once() {
        let marked =
            |us: u32| json!({"final_achieved_qps": 10.0, "marks": [format!("host busy: {us} us")]});
        let r = JobRuns {
            job: "j".into(),
            benchmark: "b".into(),
            iterations: vec![
                it(json!({"final_achieved_qps": 8.0}), true),
                it(marked(7), true),
                it(marked(9), true),
                it(json!({"final_achieved_qps": 99.0, "error": "boom"}), false),
            ],
        };
        let text = render(&r, H);
        assert!(
            text.starts_with("j: 3 ok, 1 failed, MARKED (4 runs, 48.0 s)\n"),
            "{text}"
        );
        // 8, 10, 10: mean 9.333, sd 1.155; the failed run's 99 is left out.
        assert!(
            text.contains("QPS at the target  9.333 QPS ± 1.155  (8.000 … 10.000, 3 runs)"),
            "{text}"
        );
        assert!(
            text.contains("  marked (2 of 4 runs): host busy: 7 us\n"),
            "{text}"
        );
        assert!(text.contains("  error (1 of 4 runs): boom\n"), "{text}");
        assert!(
            text.ends_with("  reports: ./benchmark_metrics_x/j_metrics_*.json (4)\n"),
            "{text}"
        );
    }

    #[test]
    fn interrupted_and_long_notes_fit() {
        let marks: Vec<String> = (0..40)
            .map(|i| format!("mark {i} {}", "x".repeat(200)))
            .collect();
        let r = JobRuns {
            job: "j".into(),
            benchmark: "b".into(),
            iterations: vec![it(json!({"interrupted": true, "marks": marks}), false)],
        };
        let text = render(&r, H);
        assert!(text.starts_with("j: INTERRUPTED, MARKED (1 run"), "{text}");
        assert!(text.lines().count() <= MAX_LINES, "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        assert!(text.contains("more notes in the report)\n"), "{text}");
    }

    #[test]
    fn numbers() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(0.13), "0.130");
        assert_eq!(number(0.000123), "0.000123");
        assert_eq!(number(678.54), "678.5");
        assert_eq!(number(165725.27), "165725");
        assert_eq!(with_unit(69.359, "%"), "69.36%");
        assert_eq!(with_unit(3.0 * 1024.0 * 1024.0, "B/s"), "3.000 MiB/s");
        assert_eq!(duration(75.0), "1m15s");
    }
}
