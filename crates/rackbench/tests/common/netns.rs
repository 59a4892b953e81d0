//! Network namespaces for the multi-host tests: a bridge namespace and
//! spoke namespaces joined to it by veth pairs, so traffic between spokes
//! crosses separate network stacks. Needs root and `ip` (iproute2).
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};

pub fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

/// The namespaces and links of one test; deleted on drop.
pub struct Net {
    pub hub: String,
    pub spokes: Vec<String>,
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.spokes.iter().chain(std::iter::once(&self.hub)) {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// A bridge namespace and `n` spoke namespaces with 10.213.<tag>.(i+1)/24.
pub fn build_net(tag: u8, n: usize) -> Result<Net, String> {
    let pid = std::process::id();
    let hub = format!("rb-hub-{pid}");
    let mut net = Net {
        hub: hub.clone(),
        spokes: Vec::new(),
    };
    ip(&["netns", "add", &hub])?;
    ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
    ip(&["-n", &hub, "link", "set", "br0", "up"])?;
    for i in 0..n {
        let ns = format!("rb-{pid}-{i}");
        ip(&["netns", "add", &ns])?;
        net.spokes.push(ns.clone());
        let (a, b) = (format!("rbv{i}a"), format!("rbv{i}b"));
        ip(&[
            "-n", &ns, "link", "add", &a, "type", "veth", "peer", "name", &b, "netns", &hub,
        ])?;
        ip(&["-n", &hub, "link", "set", &b, "master", "br0"])?;
        ip(&["-n", &hub, "link", "set", &b, "up"])?;
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("10.213.{tag}.{}/24", i + 1),
            "dev",
            &a,
        ])?;
        ip(&["-n", &ns, "link", "set", &a, "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
    }
    Ok(net)
}

pub struct Proc(pub std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn in_ns(ns: &str, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_rackbench")])
        .args(["--no-store", "--output-dir"])
        .arg(dir.join("reports"))
        .args(args)
        .current_dir(dir)
        .env("RACKBENCH_DB", dir.join("results.db"))
        .env("RACKBENCH_REPORT", "1")
        .stdin(Stdio::null());
    c
}

pub fn prerequisites() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    ip(&["netns", "list"]).map_err(|e| format!("iproute2 unusable: {e}"))
}

/// Whether namespaces can be made; when not, `Err(why)`. With
/// `RACKBENCH_REQUIRE_NETNS=1` (set by `.ci/run` as root) a missing
/// prerequisite panics instead, so CI cannot skip the test silently.
pub fn available(test: &str) -> bool {
    match prerequisites() {
        Ok(()) => true,
        Err(why) => {
            testenv::skip(
                "netns",
                &format!("{test}: network namespaces cannot be made: {why}"),
            );
            false
        }
    }
}
