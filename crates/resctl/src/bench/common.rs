//! What every bench gets and implements: the commands' options, the
//! context a running job uses, how a job ends, and the [`Bench`] trait that
//! the registry lists.

use super::knobs::{HashdKnobs, IoCostKnobs, MemInfo};
pub use super::metrics::JobMetrics;
use crate::journal::JobData;
use crate::spec::JobSpec;
use crate::sys::cgroup::Cgroups;
use crate::sys::sysinfo::SysInfo;
use crate::sys::sysreqs::SysReq;
use harness::Cancel;
use serde_json::Value;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// One bench kind: what `run` checks, runs and formats.
pub trait Bench: Sync {
    /// The spec's kind (`hashd-params`, ...).
    fn kind(&self) -> &'static str;
    /// One line for `doc`.
    fn about(&self) -> &'static str;
    /// `doc KIND`: the spec's properties and what the bench does.
    fn doc(&self) -> &'static str;
    /// Requirements the bench cannot do without (refused unless --force).
    fn hard(&self) -> &'static [SysReq];
    /// Requirements it checks and can run without, degraded.
    fn soft(&self) -> &'static [SysReq];
    /// Checks a spec's properties before anything runs.
    fn check(&self, spec: &JobSpec) -> Result<(), String>;
    /// Runs the job: records, then studies the record into the result.
    fn run(&self, spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, String>;
    /// The job's text below the header (`full` for `format`, else
    /// `summary`).
    fn format(&self, d: &JobData, full: bool) -> Result<String, String>;
    /// The key figures of a completed job for the harness's metrics: the
    /// bench fills its own part of `m`.
    fn metrics(&self, d: &JobData, m: &mut JobMetrics);
}

/// The global options of the resctl-bench commands.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub result: Option<PathBuf>,
    /// The scratch directory (test files, hashd's files, hog reports).
    pub dir: PathBuf,
    pub mem_profile: Option<String>,
    pub force: bool,
    /// Short runs for CI: small memory profile, short stabilisation and
    /// hog periods.
    pub test: bool,
}

/// What a running job can use.
pub struct Ctx<'a> {
    pub opts: &'a Options,
    pub cancel: &'a Cancel,
    pub sysinfo: &'a SysInfo,
    pub cgroups: &'a Cgroups,
    pub mem: MemInfo,
    /// The journal's hashd knobs (latest hashd-params result).
    pub hashd: Option<HashdKnobs>,
    /// The journal's IO cost model (latest iocost-params result).
    pub iocost: Option<IoCostKnobs>,
    /// The binary, to start hashd and the hog as children.
    pub exe: PathBuf,
    /// Set by the job: the hashd knobs it ran with (goes to sysinfo).
    pub used_hashd: Option<HashdKnobs>,
}

/// How a job ended.
pub enum Outcome {
    /// record and result.
    Done(Value, Value),
    /// Stopped early (Ctrl-C, a dying child): what was recorded, why.
    Partial(Option<Value>, String),
}

/// Seconds since the epoch (0 if the clock is before it).
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Starts `cmd` inside `cg`: the child writes 0 to each `cgroup.procs`
/// before exec, so everything it allocates is charged there.
pub fn spawn_in(
    mut cmd: std::process::Command,
    cg: Option<&crate::sys::cgroup::Cgroup>,
) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let files: Vec<std::ffi::CString> = cg
        .map(|c| c.procs_files())
        .unwrap_or_default()
        .iter()
        .filter_map(|p| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok())
        .collect();
    // SAFETY: between fork and exec the closure only calls open, write and
    // close on strings prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            for f in &files {
                let fd = libc::open(f.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let r = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                if r != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd.spawn()
}
