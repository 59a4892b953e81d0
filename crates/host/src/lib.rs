//! The host rackbench runs on: what a report records of it
//! ([`machine`]: CPU, memory, kernel, the CPUs this process may use) and
//! `system_check`'s review of its settings ([`system_check`]). Below the
//! harness (which re-exports both), so that tools reading the host need
//! neither jobs nor the results store.

pub mod error;
pub mod machine;
pub mod system_check;

pub use error::Error;
