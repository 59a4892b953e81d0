//! What the tests need from the host, in one place.
//!
//! * **Upstream conformance data** (CacheLib configs and traces, Distbench
//!   golden configs and results, resctl-bench outputs) is not part of the
//!   repository. It is found through one setting, `RACKBENCH_CONFORMANCE`
//!   (a directory), which defaults to `../shared/conformance` beside the
//!   workspace when that exists. A test that needs it and does not find it
//!   is skipped, visibly.
//! * **Skips are visible and counted.** [`skip`] writes one line,
//!   `rackbench-test skipped [KIND] TEST: WHY`, straight to the process's
//!   stderr (not through the test harness's capture, so `cargo test` shows
//!   it for a passing test), and appends it to the file named by
//!   `RACKBENCH_SKIP_LOG` when set, so that `.ci/run` can list them.
//!   When `RACKBENCH_REQUIRE_<KIND>=1` the skip is a failure instead:
//!   `.ci/run` sets it for every environment it provides.
//!
//! This crate is a dev-dependency only; nothing in it runs in the product.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable that names the conformance directory.
pub const CONFORMANCE_ENV: &str = "RACKBENCH_CONFORMANCE";

/// The environment variable of the file that collects skip lines.
pub const SKIP_LOG_ENV: &str = "RACKBENCH_SKIP_LOG";

/// `RACKBENCH_REQUIRE_<KIND>`: set to 1, a skip of that kind fails.
pub fn require_var(kind: &str) -> String {
    format!("RACKBENCH_REQUIRE_{}", kind.to_ascii_uppercase())
}

/// True when `RACKBENCH_REQUIRE_<KIND>=1`.
pub fn required(kind: &str) -> bool {
    std::env::var(require_var(kind)).as_deref() == Ok("1")
}

/// The current test's name (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_string()
}

/// Reports that the current test cannot run here because `why`, and
/// returns so the caller can `return`. Panics instead (failing the test)
/// when `RACKBENCH_REQUIRE_<KIND>=1`.
pub fn skip(kind: &str, why: &str) {
    let kind = kind.to_ascii_uppercase();
    if required(&kind) {
        panic!("{}=1 but this test cannot run: {why}", require_var(&kind));
    }
    let line = format!("rackbench-test skipped [{kind}] {}: {why}\n", test_name());
    // std::io::stderr() is not redirected by libtest's output capture
    // (only the print macros are), so the line shows for a passing test.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    if let Some(log) = std::env::var_os(SKIP_LOG_ENV)
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// The conformance directory, if there is one: `RACKBENCH_CONFORMANCE`
/// when set (it must then exist), else `../shared/conformance` beside the
/// workspace.
pub fn conformance_root() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(CONFORMANCE_ENV) {
        let dir = PathBuf::from(dir);
        return dir.is_dir().then_some(dir);
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance");
    dir.is_dir().then_some(dir)
}

/// `rel` under the conformance directory, or `None` after a visible skip
/// (kind `CONFORMANCE`) when the directory or `rel` in it is absent.
pub fn conformance(rel: &str) -> Option<PathBuf> {
    let Some(root) = conformance_root() else {
        skip(
            "conformance",
            &format!(
                "no upstream conformance data (set {CONFORMANCE_ENV}, or put shared/conformance beside the workspace)"
            ),
        );
        return None;
    };
    let path = root.join(rel);
    if path.exists() {
        return Some(path);
    }
    skip(
        "conformance",
        &format!("{} is not in the conformance data", path.display()),
    );
    None
}

/// `let dir = conformance_or_return!("distbench/x");`: the path, or a
/// visible skip and a return from the calling test.
#[macro_export]
macro_rules! conformance_or_return {
    ($rel:expr) => {
        match $crate::conformance($rel) {
            Some(p) => p,
            None => return,
        }
    };
}

/// `rackbench results show RUN_ID --text` of the store `db`: its stdout
/// (the run's upstream text, printed again from its stored record). Panics
/// with the command's stderr when it fails.
pub fn results_text(rackbench: &Path, db: &Path, run_id: &str) -> String {
    let o = std::process::Command::new(rackbench)
        .arg("--db")
        .arg(db)
        .args(["results", "show", run_id, "--text"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", rackbench.display()));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "results show {run_id} --text failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

/// Asserts that `text` is not empty and that each of its lines appears in
/// `live`, in the same order (other lines may sit between them): what a
/// stored run reprints is what the run printed.
pub fn assert_lines_in_order(text: &str, live: &str) {
    assert!(!text.trim().is_empty(), "nothing reprinted");
    let mut rest = live.lines();
    for want in text.lines() {
        assert!(
            rest.any(|l| l == want),
            "line {want:?} of the reprinted text is not in the run's output (in order):\n{live}\n--- reprinted:\n{text}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_var_is_upper_case() {
        assert_eq!(require_var("netns"), "RACKBENCH_REQUIRE_NETNS");
    }
}
