//! A chart as the report page places it, shared by the report page
//! (`html`) and the workloads' own charts (`Workload::charts` and
//! `Workload::history_charts`), which the page calls; kept apart so they
//! need not import the page.

use chart::Chart;

/// Width of a chart on the page, in SVG user units.
pub const CHART_W: u32 = 760;
/// Height of a chart on the page.
pub const CHART_H: u32 = 360;

/// A chart of one kind, as placed on the page.
#[derive(Debug, Clone)]
pub struct PageChart {
    /// The `data-kind` of its figure: the page's own `ladder`,
    /// `ladder_qps`, `series_counts`, `series_latency` and `percentiles`,
    /// or one a workload draws (`hit_ratio`, or prefixed with its name).
    pub kind: &'static str,
    pub chart: Chart,
}

impl PageChart {
    /// Whether the chart shows anything a table could not: drawable
    /// points at two or more x values (one x is a number or two, not a
    /// chart).
    pub fn worth_drawing(&self) -> bool {
        let mut xs = (0..self.chart.series.len())
            .flat_map(|i| self.chart.drawable(i))
            .map(|(x, _)| x);
        match xs.next() {
            Some(first) => xs.any(|x| x != first),
            None => false,
        }
    }
}

/// The x axis's end for items drawn at x = 1..=n: one past the last, and
/// at least 6 so that the axis's ticks are whole numbers.
pub fn index_axis_end(n: usize) -> f64 {
    (n as f64 + 1.0).max(6.0)
}
