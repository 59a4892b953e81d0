//! A chart as the report page places it, shared by the report page (`html`) and the
//! per-workload chart modules (`html_cachebench`, `html_distbench`,
//! `html_resctl`), which the page calls; kept apart so they need not import
//! the page.

use chart::Chart;

/// Width of a chart on the page, in SVG user units.
pub const CHART_W: u32 = 760;
/// Height of a chart on the page.
pub const CHART_H: u32 = 360;

/// A chart of one kind, as placed on the page.
#[derive(Debug, Clone)]
pub struct PageChart {
    /// The `data-kind` of its figure: `ladder`, `ladder_qps`,
    /// `series_counts`, `series_latency`, `percentiles`, `hit_ratio`,
    /// `cachebench_hit_ratio_time`, `cachebench_nvm_latency_time`,
    /// `distbench_pairs`, `distbench_pair_latency`, `resctl_protection`,
    /// `resctl_storage`, `resctl_storage_search`.
    pub kind: &'static str,
    pub chart: Chart,
}
