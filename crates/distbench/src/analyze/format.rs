//! What each summary file holds: which RPC samples count, and how a list of
//! them is printed in each of upstream's four output formats.

use super::AnalyzeError;
use super::stats::{np_round2, percentile, python_float};
use crate::proto::RpcSample;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::str::FromStr;

/// The layout of every summary file (`--output_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// One `Request_size Latency_ns` line per RPC, in log order.
    #[default]
    Default,
    /// Per request size: count, min, 50/90/99/99.99th percentiles and max.
    Statistics,
    /// Per action iteration (from the RPC's trace context): the longest
    /// latency of the iteration.
    TraceContext,
    /// One `Request_size Latency_us` line per RPC, in log order, the
    /// latency in microseconds as Python prints `latency_ns / 1000`.
    Homa,
}

impl OutputFormat {
    /// Every format, by its flag value.
    pub const ALL: [OutputFormat; 4] = [
        OutputFormat::Default,
        OutputFormat::Statistics,
        OutputFormat::TraceContext,
        OutputFormat::Homa,
    ];

    /// The `--output_format` value naming this format.
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Default => "default",
            OutputFormat::Statistics => "statistics",
            OutputFormat::TraceContext => "trace_context",
            OutputFormat::Homa => "homa",
        }
    }
}

impl FromStr for OutputFormat {
    type Err = AnalyzeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OutputFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| AnalyzeError::UnknownFormat(s.to_string()))
    }
}

/// How to analyze: upstream's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    /// The layout of the summary files.
    pub format: OutputFormat,
    /// Leave out the header line of every file (upstream's `--supress_header`).
    pub suppress_header: bool,
    /// Count the RPCs of warm-up iterations too (upstream's
    /// `--consider_warmups`); by default they are left out.
    pub include_warmups: bool,
}

/// One RPC as a summary sees it: what it is grouped by (request size, or
/// action iteration in the trace-context format) and its latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Point {
    pub key: i64,
    pub latency_ns: i64,
}

/// Why a sample did or did not become a [`Point`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Selection {
    Used(Point),
    /// A warm-up RPC, and warm-ups are left out.
    Warmup,
    /// The trace-context format needs an action iteration the sample lacks.
    Untraced,
}

impl Options {
    /// Decides whether `sample` counts, and as what.
    pub(crate) fn select(&self, sample: &RpcSample) -> Selection {
        if sample.warmup() && !self.include_warmups {
            return Selection::Warmup;
        }
        let key = match self.format {
            OutputFormat::Default | OutputFormat::Statistics | OutputFormat::Homa => {
                sample.request_size()
            }
            // Upstream skips samples without a trace context (and would
            // fail on one with no action iteration; we skip those too).
            OutputFormat::TraceContext => match sample
                .trace_context
                .as_ref()
                .and_then(|t| t.action_iterations.first())
            {
                Some(&iteration) => iteration,
                None => return Selection::Untraced,
            },
        };
        Selection::Used(Point {
            key,
            latency_ns: sample.latency_ns(),
        })
    }

    /// The text of one summary file holding `points`.
    pub(crate) fn render(&self, points: &[Point]) -> String {
        let header = !self.suppress_header;
        match self.format {
            OutputFormat::Default => render_default(points, header),
            OutputFormat::Statistics => render_statistics(points, header),
            OutputFormat::TraceContext => render_trace_context(points, header),
            OutputFormat::Homa => render_homa(points, header),
        }
    }
}

fn render_default(points: &[Point], header: bool) -> String {
    let mut out = String::with_capacity(24 * (points.len() + 1));
    if header {
        out.push_str("Request_size    Latency_ns\n");
    }
    for p in points {
        // Writing into a String cannot fail.
        let _ = writeln!(out, "{:<15} {}", p.key, p.latency_ns);
    }
    out
}

fn render_homa(points: &[Point], header: bool) -> String {
    let mut out = String::with_capacity(24 * (points.len() + 1));
    if header {
        out.push_str("Request_size    Latency_us\n");
    }
    for p in points {
        let _ = writeln!(
            out,
            "{:<15} {}",
            p.key,
            python_float(p.latency_ns as f64 / 1000.0)
        );
    }
    out
}

/// The percentiles of the statistics format, with their column titles.
const PERCENTILES: [(&str, f64); 4] = [
    ("50%", 50.0),
    ("90%", 90.0),
    ("99%", 99.0),
    ("99.99%", 99.99),
];

fn render_statistics(points: &[Point], header: bool) -> String {
    let mut out = String::new();
    let mut columns: Vec<String> = Vec::with_capacity(8);
    if header {
        columns.extend(["Request_size", "N", "min"].map(String::from));
        columns.extend(PERCENTILES.map(|(title, _)| title.to_string()));
        columns.push("max".to_string());
        push_row(&mut out, &columns);
    }
    let mut by_size: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for p in points {
        by_size.entry(p.key).or_default().push(p.latency_ns);
    }
    for (size, mut latencies) in by_size {
        latencies.sort_unstable();
        // Each group holds at least the point that created it.
        let (Some(&min), Some(&max)) = (latencies.first(), latencies.last()) else {
            continue;
        };
        columns.clear();
        columns.extend([
            size.to_string(),
            latencies.len().to_string(),
            min.to_string(),
        ]);
        columns
            .extend(PERCENTILES.map(|(_, q)| python_float(np_round2(percentile(&latencies, q)))));
        columns.push(max.to_string());
        push_row(&mut out, &columns);
    }
    out
}

/// One statistics row: every column but the last left-aligned in 15
/// characters, separated by one space.
fn push_row(out: &mut String, columns: &[String]) {
    if let Some((last, rest)) = columns.split_last() {
        for c in rest {
            let _ = write!(out, "{c:<15} ");
        }
        let _ = writeln!(out, "{last}");
    }
}

fn render_trace_context(points: &[Point], header: bool) -> String {
    let mut longest: BTreeMap<i64, i64> = BTreeMap::new();
    for p in points {
        longest
            .entry(p.key)
            .and_modify(|l| *l = (*l).max(p.latency_ns))
            .or_insert(p.latency_ns);
    }
    let mut out = String::new();
    if header {
        out.push_str("Action_iteration Longest_latency\n");
    }
    for (iteration, latency) in longest {
        let _ = writeln!(out, "{iteration} {latency}");
    }
    out
}

#[cfg(test)]
mod homa_tests {
    use super::*;

    #[test]
    fn homa_prints_microseconds_as_python() {
        let points = [
            Point {
                key: 1024,
                latency_ns: 123_456,
            },
            Point {
                key: 16,
                latency_ns: 2_000_000,
            },
        ];
        assert_eq!(
            render_homa(&points, true),
            "Request_size    Latency_us\n1024            123.456\n16              2000.0\n"
        );
        assert_eq!("homa".parse::<OutputFormat>().unwrap(), OutputFormat::Homa);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::TraceContext;

    fn points(p: &[(i64, i64)]) -> Vec<Point> {
        p.iter()
            .map(|&(key, latency_ns)| Point { key, latency_ns })
            .collect()
    }

    #[test]
    fn formats_parse_by_name_only() {
        for f in OutputFormat::ALL {
            assert_eq!(f.name().parse::<OutputFormat>().unwrap(), f);
        }
        let err = "csv".parse::<OutputFormat>().unwrap_err().to_string();
        assert!(err.contains("--output_format 'csv'"), "{err}");
    }

    #[test]
    fn default_rows_keep_log_order() {
        let o = Options::default();
        assert_eq!(
            o.render(&points(&[(196, 30), (1234567890123456, 10)])),
            "Request_size    Latency_ns\n196             30\n1234567890123456 10\n"
        );
        let quiet = Options {
            suppress_header: true,
            ..o
        };
        assert_eq!(quiet.render(&[]), "");
    }

    #[test]
    fn statistics_group_by_size() {
        let o = Options {
            format: OutputFormat::Statistics,
            ..Options::default()
        };
        let text = o.render(&points(&[(2, 4), (1, 10), (2, 1), (2, 3), (2, 2)]));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("Request_size    N               min "));
        assert_eq!(
            lines[1],
            "1               1               10              10.0            10.0            10.0            10.0            10"
        );
        assert_eq!(
            lines[2],
            "2               4               1               2.5             3.7             3.97            4.0             4"
        );
    }

    #[test]
    fn trace_context_keeps_the_longest_per_iteration() {
        let o = Options {
            format: OutputFormat::TraceContext,
            suppress_header: true,
            ..Options::default()
        };
        let text = o.render(&points(&[(10, 5), (2, 7), (10, 9), (2, 1)]));
        assert_eq!(text, "2 7\n10 9\n");
    }

    #[test]
    fn selection_skips_warmups_and_untraced_samples() {
        let warm = RpcSample {
            request_size: Some(8),
            latency_ns: Some(100),
            warmup: Some(true),
            ..Default::default()
        };
        let o = Options::default();
        assert_eq!(o.select(&warm), Selection::Warmup);
        let all = Options {
            include_warmups: true,
            ..o
        };
        assert_eq!(
            all.select(&warm),
            Selection::Used(Point {
                key: 8,
                latency_ns: 100
            })
        );
        let trace = Options {
            format: OutputFormat::TraceContext,
            ..all
        };
        assert_eq!(trace.select(&warm), Selection::Untraced);
        let empty_trace = RpcSample {
            trace_context: Some(TraceContext::default()),
            ..warm.clone()
        };
        assert_eq!(trace.select(&empty_trace), Selection::Untraced);
        let traced = RpcSample {
            trace_context: Some(TraceContext {
                action_iterations: vec![3, 4],
                ..Default::default()
            }),
            ..warm
        };
        assert_eq!(
            trace.select(&traced),
            Selection::Used(Point {
                key: 3,
                latency_ns: 100
            })
        );
    }
}
