//! The bench kinds `run`, `format`, `doc` and `deps` know, in one list.

use super::common::Bench;
use super::hashd_params::HashdParamsBench;
use super::iocost_params::IoCostParamsBench;
use super::iocost_qos::{IoCostQosBench, IoCostTuneBench};
use super::protection::run::ProtectionBench;
use super::storage::StorageBench;

/// Every bench, in the order `doc` lists them.
pub const BENCHES: &[&dyn Bench] = &[
    &HashdParamsBench,
    &IoCostParamsBench,
    &IoCostQosBench,
    &IoCostTuneBench,
    &ProtectionBench,
    &StorageBench,
];

/// The bench of `kind`, or an error listing the kinds.
pub fn bench(kind: &str) -> Result<&'static dyn Bench, String> {
    BENCHES
        .iter()
        .copied()
        .find(|b| b.kind() == kind)
        .ok_or_else(|| {
            format!(
                "unknown bench kind {kind:?}: expected one of {}",
                BENCHES
                    .iter()
                    .map(|b| b.kind())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}
