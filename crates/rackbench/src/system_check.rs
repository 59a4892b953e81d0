//! `rackbench system_check`: the host's checks, as lines or JSON.

use anyhow::Context;

/// `system-check`: the host's checks, as lines or JSON.
pub(crate) fn system_check(json: bool, root: &std::path::Path) -> anyhow::Result<()> {
    anyhow::ensure!(root.is_dir(), "--root {}: not a folder", root.display());
    let checks = harness::system_check::run(root);
    let text = if json {
        let warnings = checks
            .iter()
            .filter(|c| c.status == harness::system_check::Status::Warn)
            .count();
        let v = serde_json::json!({"checks": checks, "warnings": warnings});
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else {
        checks.iter().map(|c| c.line() + "\n").collect()
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(e).context("cannot write the system check");
    }
    Ok(())
}
