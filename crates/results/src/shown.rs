//! What the results side needs to know of the workloads to show their
//! runs: which way is better for each metric ([`direction::Directions`]),
//! their headline figures and the charts each draws. The harness's
//! registry of workloads implements it, so that this crate (the store,
//! comparisons and the page) depends on no workload and not on the code
//! that runs them.

use direction::{Directions, Headline};

use crate::page_chart::PageChart;
use crate::record::Record;
use crate::store::RunRow;

/// The workloads' part in showing their stored runs, by benchmark name;
/// a benchmark it does not know has no headlines, the default title and
/// no charts of its own.
pub trait Shown: Directions {
    /// The figures that answer what a run of `benchmark` measured, in the
    /// order a person reads them.
    fn headlines(&self, benchmark: &str) -> &'static [Headline];
    /// The title of the page's chart of the percentiles in a run's
    /// metrics.
    fn percentiles_title(&self, benchmark: &str) -> &'static str;
    /// What the page draws of one stored run, from its record.
    fn charts(&self, benchmark: &str, record: &Record) -> Vec<PageChart>;
    /// What the page draws across the stored runs of `job`.
    fn history_charts(&self, benchmark: &str, job: &str, runs: &[&RunRow]) -> Vec<PageChart>;
}

/// No workload at all: every run is shown by its metrics alone.
pub struct NoWorkloads;

impl Directions for NoWorkloads {
    fn tables(&self, _: &str) -> &'static [&'static [direction::Rule]] {
        &[]
    }
}

impl Shown for NoWorkloads {
    fn headlines(&self, _: &str) -> &'static [Headline] {
        &[]
    }
    fn percentiles_title(&self, _: &str) -> &'static str {
        DEFAULT_PERCENTILES_TITLE
    }
    fn charts(&self, _: &str, _: &Record) -> Vec<PageChart> {
        Vec::new()
    }
    fn history_charts(&self, _: &str, _: &str, _: &[&RunRow]) -> Vec<PageChart> {
        Vec::new()
    }
}

/// The percentile chart's title where the workload names none.
pub const DEFAULT_PERCENTILES_TITLE: &str = "Latency percentiles";
