//! Report-page charts (the report page's); filled in by its owner.

use crate::page_chart::PageChart;
use crate::store::RunRow;

/// The charts this workload's stored metrics allow.
pub fn charts(_row: &RunRow) -> Vec<PageChart> {
    Vec::new()
}
