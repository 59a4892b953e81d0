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

/// What `format`/`summary` pass a bench beyond the job.
pub struct FormatArgs<'a> {
    /// `format` (true) or `summary`.
    pub full: bool,
    /// `format -R...`'s resource stat detail level.
    pub rstat: u8,
    /// The spec's format properties (`format iocost-tune:hwdb`).
    pub props: &'a [std::collections::BTreeMap<String, String>],
    /// The result file (`-r`): iocost-tune's pdf is named after it.
    pub result: &'a std::path::Path,
    /// The separator and header printed above the bench's text.
    pub head: &'a str,
}

/// What a bench is, as data (upstream's resctl-bench describes its
/// benches the same way): its kind, its texts and what it needs.
pub struct BenchInfo {
    /// The spec's kind (`hashd-params`, ...).
    pub kind: &'static str,
    /// One line for `doc` (empty: left out of the lists, as merge-info).
    pub about: &'static str,
    /// `doc KIND`: the spec's properties and what the bench does.
    pub doc: &'static str,
    /// Requirements the bench cannot do without (refused unless --force).
    pub hard: &'static [SysReq],
    /// Requirements it checks and can run without, degraded.
    pub soft: &'static [SysReq],
}

/// One bench kind: what it is ([`BenchInfo`]), and what `run` checks,
/// runs and formats.
pub trait Bench: Sync {
    /// What the bench is.
    fn info(&self) -> &'static BenchInfo;
    /// The spec's kind (`hashd-params`, ...).
    fn kind(&self) -> &'static str {
        self.info().kind
    }
    /// One line for `doc`.
    fn about(&self) -> &'static str {
        self.info().about
    }
    /// `doc KIND`: the spec's properties and what the bench does.
    fn doc(&self) -> &'static str {
        self.info().doc
    }
    /// Requirements the bench cannot do without (refused unless --force).
    fn hard(&self) -> &'static [SysReq] {
        self.info().hard
    }
    /// Requirements it checks and can run without, degraded.
    fn soft(&self) -> &'static [SysReq] {
        self.info().soft
    }
    /// Checks a spec's properties before anything runs.
    fn check(&self, spec: &JobSpec) -> Result<(), crate::Error>;
    /// Why a job of this kind can never be run (merge-info, which only
    /// `merge` writes): checked before the host or the journal is touched.
    fn refuse_run(&self) -> Option<&'static str> {
        None
    }
    /// Runs the job: records, then studies the record into the result.
    fn run(&self, spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error>;
    /// The job's text below the header (`full` for `format`, else
    /// `summary`).
    fn format(&self, d: &JobData, full: bool) -> Result<String, crate::Error>;
    /// `format -R...`: the text with `rstat` levels of extra resource
    /// stats. Benches without resource stat tables print [`Bench::format`].
    fn format_rstat(&self, d: &JobData, full: bool, rstat: u8) -> Result<String, crate::Error> {
        let _ = rstat;
        self.format(d, full)
    }
    /// Checks the spec words of `format`/`summary`: by default the run
    /// properties (benches with format properties of their own check
    /// those instead).
    fn check_format_props(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        self.check(spec)
    }
    /// The text with the spec's format properties (`props`), and whether
    /// it stands alone, without the separator and header (upstream's
    /// undecorated output: iocost-tune's `hwdb` and `high-level`). By
    /// default the properties only select the job.
    fn format_props(&self, d: &JobData, a: &FormatArgs) -> Result<(String, bool), crate::Error> {
        self.format_rstat(d, a.full, a.rstat).map(|t| (t, false))
    }
    /// The key figures of a completed job for the harness's metrics: the
    /// bench fills its own part of `m`.
    fn metrics(&self, d: &JobData, m: &mut JobMetrics);
    /// `study`: the job's result studied again from its record (after the
    /// study code changed, say). `None` when the bench's result is not
    /// studied from a record (its record is the result).
    fn restudy(&self, d: &JobData) -> Option<Result<Value, crate::Error>> {
        let _ = d;
        None
    }
    /// The spec kept with a completed job: `spec` with the defaults its
    /// run resolved written in where upstream requires them, so that
    /// upstream reads the result file (protection's mem-hog-tune sizes).
    /// By default the spec as given.
    fn spec_as_run(&self, spec: &JobSpec, record: &Value) -> JobSpec {
        let _ = record;
        spec.clone()
    }
    /// `solve`: the result made again by the solve step alone (from the
    /// result's own data), with the record when it changed too (the fit
    /// `--tune-fit` asks for); `None` for benches without one (upstream's
    /// default solve keeps the result).
    fn resolve(
        &self,
        d: &JobData,
        opts: &Options,
    ) -> Option<Result<(Value, Option<Value>), crate::Error>> {
        let _ = (d, opts);
        None
    }
}

/// `merge`'s own options (see merge.rs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MergeFlags {
    pub by_id: bool,
    pub ignore_versions: bool,
    pub ignore_sysreqs: bool,
    pub multiple: bool,
    /// `--tune-fit`: the line fits the merged result is solved with.
    pub fit: crate::bench::iocost_tune::fit::Fit,
}

/// The global options of the resctl-bench commands.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub result: Option<PathBuf>,
    /// `merge`'s own options.
    pub merge: MergeFlags,
    /// The scratch directory (test files, hashd's files, hog reports).
    pub dir: PathBuf,
    pub mem_profile: Option<String>,
    pub force: bool,
    /// Short runs for CI: small memory profile, short stabilisation and
    /// hog periods.
    pub test: bool,
    /// `-D/--dev`: the scratch device the user expects (`nvme0n1`,
    /// `/dev/` optional); `run` and `deps` refuse it unless it is the
    /// device holding `dir`.
    pub dev: Option<String>,
    /// `-l/--linux`: accepted for compatibility; no bench uses it.
    pub linux_tar: Option<PathBuf>,
    /// `-R/--rep-retention` seconds: accepted; rackbench keeps no
    /// rd-agent report files.
    pub rep_retention: Option<u64>,
    /// `-m/--mem-avail`: the memory available to the benches (bytes)
    /// instead of the kernel's MemAvailable.
    pub mem_avail: Option<u64>,
    /// `--mem-margin`: workload memory.low = share x (1 - margin) in
    /// protection (None: the memory profile's target).
    pub mem_margin: Option<f64>,
    /// `--hashd-size`: hashd's footprint override (bytes) for the benches
    /// that run hashd with the journal's knobs.
    pub hashd_size: Option<u64>,
    /// `--hashd-cpu-load fake|real` (None: keep the knobs').
    pub hashd_fake_cpu_load: Option<bool>,
    /// `--iocost-qos`: overrides of the IO cost QoS the benches enable.
    pub iocost_qos: Option<super::knobs::QosOvr>,
    /// `--iocost-from-sys`: the model and QoS from the cgroup2 root's
    /// io.cost.model/io.cost.qos instead of the journal's iocost-params.
    pub iocost_from_sys: bool,
    /// `--swappiness`: vm.swappiness for the run (restored after).
    pub swappiness: Option<u32>,
    /// `-v` count: more messages (hashd's detail lines, the settings).
    pub verbose: u8,
    /// `--logfile`: stderr is also written there.
    pub logfile: Option<PathBuf>,
    /// `format -R` count: extra resource stat detail.
    pub rstat: u8,
    /// `--systemd-timeout` seconds: accepted; no systemd units are used.
    pub systemd_timeout: Option<f64>,
    /// `--keep-reports`, `--clear-reports`: accepted; no rd-agent reports.
    pub keep_reports: bool,
    pub clear_reports: bool,
    /// `--force-shadow-inode-prot-test` (refused: no inode-steal test
    /// here) and `--skip-shadow-inode-prot-test` (MemShadowInodeProt
    /// assumed met, as upstream).
    pub force_shadow_inode_prot_test: bool,
    pub skip_shadow_inode_prot_test: bool,
    /// `--tune-fit upstream|corrected`: iocost-tune's line fits for `run`,
    /// `solve` and `merge` (None: upstream's, or for `solve` the fit the
    /// result records).
    pub tune_fit: Option<crate::bench::iocost_tune::fit::Fit>,
}

/// Saves a running job's record so far in the journal (a failure is the
/// host's: the journal was read when the job started).
pub type Checkpoint<'a> = dyn Fn(&Value) -> crate::Result<()> + 'a;

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
    /// The journal's latest completed iocost-qos job (iocost-tune solves
    /// on it).
    pub qos: Option<crate::journal::JobData>,
    /// Set by a job that measured nothing itself: the sysinfo its record
    /// describes (the job it worked on), kept instead of this host's.
    pub forward_sysinfo: Option<Value>,
    /// This job's earlier, incomplete entry in the journal (same kind and
    /// id): what a resumable bench (iocost-qos) picks up from.
    pub prev: Option<JobData>,
    /// Saves the job's record so far in the journal (iocost-qos after each
    /// QoS run), so that an interrupted job resumes from it.
    pub checkpoint: Option<&'a Checkpoint<'a>>,
    /// Set while a caller holds the scratch device's io.cost settings
    /// (iocost-qos applies each run's QoS itself): how, in words. Then
    /// protection leaves io.cost alone.
    pub iocost_managed: Option<String>,
}

/// How a job ended.
pub enum Outcome {
    /// record and result.
    Done(Value, Value),
    /// Stopped early (Ctrl-C, a dying child): what was recorded, why.
    Partial(Option<Value>, String),
}

/// Seconds since the epoch (0 if the clock is before it).
pub(crate) use harness::record::now_secs;

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
