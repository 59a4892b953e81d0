//! Helpers shared by the integration tests that run the binary.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
pub mod netns;

use std::path::Path;
use std::process::{Command, Stdio};

/// The binary in `dir` with a private results store, the embedded jobs,
/// reports under `dir/reports` and no stdin.
#[allow(dead_code)]
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

/// As [`rackbench`], recording runs in `dir/results.db` (for tests that
/// read a run back from the store).
#[allow(dead_code)]
pub fn rackbench_stored(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rackbench"));
    c.current_dir(dir)
        .env("RACKBENCH_DB", dir.join("results.db"))
        .env("RACKBENCH_REPORT", "1")
        .env_remove("RACKBENCH_JOBS_DIR")
        .arg("--output-dir")
        .arg(dir.join("reports"))
        .stdin(Stdio::null());
    c
}

/// The run id of the report JSON a run printed last on stdout.
#[allow(dead_code)]
pub fn run_id_of(stdout: &str) -> String {
    let last = stdout.trim_end().lines().last().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("the last stdout line is not a report ({e}):\n{stdout}"));
    v["run_id"].as_str().unwrap().to_string()
}

/// Asserts that `rackbench results show RUN --text` reprints lines the run
/// printed on `live`, in order.
#[allow(dead_code)]
pub fn assert_reprints(dir: &Path, run_id: &str, live: &str) {
    let text = testenv::results_text(
        Path::new(env!("CARGO_BIN_EXE_rackbench")),
        &dir.join("results.db"),
        run_id,
    );
    testenv::assert_lines_in_order(&text, live);
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `cmd report html` (cmd: a rackbench command set up with its store) into
/// `dir`: the page's text, after checking the command succeeded.
#[allow(dead_code)]
pub fn report_page(mut cmd: Command, dir: &Path) -> String {
    let page = dir.join("report.html");
    let o = cmd
        .args(["report", "html", "--out"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    std::fs::read_to_string(&page).unwrap()
}
