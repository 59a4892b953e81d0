//! Helpers shared by the integration tests that run the binary.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
pub mod netns;

use std::path::Path;
use std::process::{Command, Stdio};

/// The binary in `dir` with a private results store, the embedded jobs,
/// reports under `dir/reports` and no stdin.
pub fn rackbench(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rackbench"));
    c.current_dir(dir)
        .env("RACKBENCH_DB", dir.join("results.db"))
        .env("RACKBENCH_REPORT", "1")
        .env_remove("RACKBENCH_JOBS_DIR")
        .args(["--no-store", "--output-dir"])
        .arg(dir.join("reports"))
        .stdin(Stdio::null());
    c
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
