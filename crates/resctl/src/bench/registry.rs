//! The bench kinds `run`, `format`, `doc` and `deps` know, in one list.

use super::common::Bench;
use super::hashd_params::HashdParamsBench;
use super::iocost_params::IoCostParamsBench;
use super::iocost_qos::bench::IoCostQosBench;
use super::iocost_tune::bench::IoCostTuneBench;
use super::merge_info::MergeInfoBench;
use super::protection::run::ProtectionBench;
use super::storage::StorageBench;

/// Every bench, in the order `doc` lists them (those with an empty
/// `about`, merge-info, are left out of the lists, as upstream).
pub const BENCHES: &[&dyn Bench] = &[
    &HashdParamsBench,
    &IoCostParamsBench,
    &IoCostQosBench,
    &IoCostTuneBench,
    &ProtectionBench,
    &StorageBench,
    &MergeInfoBench,
];

/// The bench of `kind`, or an error listing the kinds.
pub fn bench(kind: &str) -> Result<&'static dyn Bench, crate::Error> {
    BENCHES
        .iter()
        .copied()
        .find(|b| b.kind() == kind)
        .ok_or_else(|| {
            format!(
                "unknown bench kind {kind:?}: expected one of {}",
                listed().map(|b| b.kind()).collect::<Vec<_>>().join(", ")
            )
        })
        .map_err(crate::Error::Input)
}

/// The benches the lists show: all but those with an empty `about`.
pub fn listed() -> impl Iterator<Item = &'static dyn Bench> {
    BENCHES.iter().copied().filter(|b| !b.about().is_empty())
}
