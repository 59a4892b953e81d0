//! Report-page charts (see [`crate::html`]); filled in by its owner.

use crate::html::PageChart;
use crate::store::RunRow;

/// The charts this workload's stored metrics allow.
pub fn charts(_row: &RunRow) -> Vec<PageChart> {
    Vec::new()
}
