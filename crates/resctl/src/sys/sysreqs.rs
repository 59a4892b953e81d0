//! Upstream resctl-bench's system requirements, checked (and, when
//! allowed, fixed) on this host.
//!
//! [`check`] returns a [`Report`] with a [`Status`] per requirement and a
//! [`Restore`] holding the old values of whatever it changed (IO scheduler,
//! `wbt_lat_usec`, swappiness). [`Restore::restore`] or dropping the
//! `Restore` puts them back.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cgroup::{BackendKind, Cgroups};
use super::sysinfo::{SysInfo, block_dev_of, dev_numbers, parse_scheduler, whole_disk};
use super::{Mount, mount_of, read_mounts, read_string, which, write_existing};

/// `statfs.f_type` of btrfs.
const BTRFS_SUPER_MAGIC: u64 = 0x9123_683E;

/// Upstream's requirement list, in upstream's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SysReq {
    /// cgroup2 with the cpu, memory and io controllers.
    Controllers,
    /// The cgroup2 freezer.
    Freezer,
    /// cgroup2 mounted with `memory_recursiveprot`.
    MemCgRecursiveProt,
    /// Inode shadow entries protected by memory.low (kernel 5.16+).
    MemShadowInodeProt,
    /// The io.cost controller.
    IoCost,
    /// An io.cost that reports `cost.usage` in io.stat.
    IoCostVer,
    /// No io.latency / io.low / io.max (or blkio throttle) configured.
    NoOtherIoControllers,
    /// Anon/file reclaim balance (`pgscan_anon` in /proc/vmstat).
    AnonBalance,
    /// The scratch directory is on btrfs.
    Btrfs,
    /// btrfs mounted with `discard=async` on SSDs.
    BtrfsAsyncDiscard,
    /// The scratch device is not an md or dm composite.
    NoCompositeStorage,
    /// The scratch device's IO scheduler is `none`.
    IoSched,
    /// Writeback throttling is off on the scratch device.
    NoWbt,
    /// All swap is on the scratch device.
    SwapOnScratch,
    /// Enough swap, and swappiness >= 60.
    Swap,
    /// The `oomd` binary.
    Oomd,
    /// No other userspace OOM killer running.
    NoSysOomd,
    /// Host-critical services in `hostcritical.slice`.
    HostCriticalServices,
    /// Basic dependencies (python3).
    DepsBase,
    /// Dependencies of iocost-coef-gen (findmnt, dd, fio, stdbuf).
    DepsIoCostCoefGen,
    /// Dependencies of the side workloads (stress).
    DepsSide,
    /// Dependencies of the linux build side workload.
    DepsLinuxBuild,
}

impl SysReq {
    /// Every requirement, in upstream's order.
    pub const ALL: [SysReq; 22] = [
        SysReq::Controllers,
        SysReq::Freezer,
        SysReq::MemCgRecursiveProt,
        SysReq::MemShadowInodeProt,
        SysReq::IoCost,
        SysReq::IoCostVer,
        SysReq::NoOtherIoControllers,
        SysReq::AnonBalance,
        SysReq::Btrfs,
        SysReq::BtrfsAsyncDiscard,
        SysReq::NoCompositeStorage,
        SysReq::IoSched,
        SysReq::NoWbt,
        SysReq::SwapOnScratch,
        SysReq::Swap,
        SysReq::Oomd,
        SysReq::NoSysOomd,
        SysReq::HostCriticalServices,
        SysReq::DepsBase,
        SysReq::DepsIoCostCoefGen,
        SysReq::DepsSide,
        SysReq::DepsLinuxBuild,
    ];

    /// The variant name, as serialized.
    pub fn name(&self) -> &'static str {
        match self {
            SysReq::Controllers => "Controllers",
            SysReq::Freezer => "Freezer",
            SysReq::MemCgRecursiveProt => "MemCgRecursiveProt",
            SysReq::MemShadowInodeProt => "MemShadowInodeProt",
            SysReq::IoCost => "IoCost",
            SysReq::IoCostVer => "IoCostVer",
            SysReq::NoOtherIoControllers => "NoOtherIoControllers",
            SysReq::AnonBalance => "AnonBalance",
            SysReq::Btrfs => "Btrfs",
            SysReq::BtrfsAsyncDiscard => "BtrfsAsyncDiscard",
            SysReq::NoCompositeStorage => "NoCompositeStorage",
            SysReq::IoSched => "IoSched",
            SysReq::NoWbt => "NoWbt",
            SysReq::SwapOnScratch => "SwapOnScratch",
            SysReq::Swap => "Swap",
            SysReq::Oomd => "Oomd",
            SysReq::NoSysOomd => "NoSysOomd",
            SysReq::HostCriticalServices => "HostCriticalServices",
            SysReq::DepsBase => "DepsBase",
            SysReq::DepsIoCostCoefGen => "DepsIoCostCoefGen",
            SysReq::DepsSide => "DepsSide",
            SysReq::DepsLinuxBuild => "DepsLinuxBuild",
        }
    }
}

/// The outcome of checking one requirement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Status {
    /// Met as found.
    Satisfied,
    /// Met after changing the system; the text says what changed.
    Fixed(String),
    /// Not met; each message says what is missing and how to fix it.
    Missed(Vec<String>),
}

/// What [`check`] looks at.
pub struct Check<'a> {
    /// The benchmark's scratch directory.
    pub scratch_dir: &'a Path,
    /// The host description ([`super::sysinfo::collect`]).
    pub sysinfo: &'a SysInfo,
    /// The probed cgroup backend.
    pub cgroups: &'a Cgroups,
    /// What [`check`] may change to meet requirements.
    pub fix: Fix,
}

/// What a job lets the requirement check change, as upstream's rd-agent
/// decides per job from what it enforces: the scratch device's IO
/// scheduler and writeback throttling only when IO control is enforced,
/// swappiness only when memory control is (a `passive=io` job measures the
/// device as found).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fix {
    /// IO scheduler `none`, wbt off.
    pub io: bool,
    /// swappiness raised to 60.
    pub mem: bool,
}

impl Fix {
    /// Changes nothing (`deps`).
    pub const NONE: Fix = Fix {
        io: false,
        mem: false,
    };
    /// Fixes everything it can.
    pub const ALL: Fix = Fix {
        io: true,
        mem: true,
    };

    /// What a job with these passive controls fixes (`None`: all
    /// enforced).
    pub fn for_passive(p: Option<&crate::spec::Passive>) -> Fix {
        match p {
            None => Fix::ALL,
            Some(p) => Fix {
                io: !p.io,
                mem: !p.mem,
            },
        }
    }
}

/// The status of each checked requirement.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// Requirement -> status.
    pub statuses: BTreeMap<SysReq, Status>,
}

impl Report {
    /// The requirements met as found.
    pub fn satisfied(&self) -> Vec<SysReq> {
        self.statuses
            .iter()
            .filter(|(_, s)| matches!(s, Status::Satisfied))
            .map(|(r, _)| *r)
            .collect()
    }

    /// The requirements not met, with their messages.
    pub fn missed(&self) -> BTreeMap<SysReq, Vec<String>> {
        self.statuses
            .iter()
            .filter_map(|(r, s)| match s {
                Status::Missed(m) => Some((*r, m.clone())),
                _ => None,
            })
            .collect()
    }

    /// The requirements met by changing the system, with what changed.
    pub fn fixed(&self) -> Vec<(SysReq, String)> {
        self.statuses
            .iter()
            .filter_map(|(r, s)| match s {
                Status::Fixed(m) => Some((*r, m.clone())),
                _ => None,
            })
            .collect()
    }
}

/// One value to write back.
#[derive(Debug, Clone)]
struct Undo {
    path: PathBuf,
    old: String,
    what: String,
}

/// The changes [`check`] made, undone by [`Restore::restore`] or on drop
/// (once).
#[derive(Debug, Default)]
pub struct Restore {
    undo: Vec<Undo>,
}

impl Restore {
    /// True when nothing needs restoring.
    pub fn is_empty(&self) -> bool {
        self.undo.is_empty()
    }

    /// Writes back the old values (latest change first), prints one line
    /// per value to stderr and returns those lines.
    pub fn restore(mut self) -> Vec<String> {
        self.undo_all(true)
    }

    /// [`Restore::restore`] without the lines: a check made only to read
    /// the statuses, undone at once.
    pub fn restore_quietly(mut self) {
        self.undo_all(false);
    }

    /// Writes `value` to the existing file `path` and records its old
    /// (trimmed) content, to be written back with the other changes.
    /// Returns the old value; `what` names the setting in the restore line.
    pub fn write(&mut self, path: &Path, value: &str, what: &str) -> Result<String, crate::Error> {
        let old = fs::read_to_string(path)
            .map_err(|e| crate::Error::Host(format!("cannot read {}: {e}", path.display())))?
            .trim()
            .to_string();
        write_existing(path, value)?;
        self.undo.push(Undo {
            path: path.to_path_buf(),
            old: old.clone(),
            what: what.to_string(),
        });
        Ok(old)
    }

    fn undo_all(&mut self, print: bool) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(u) = self.undo.pop() {
            let line = match write_existing(&u.path, &u.old) {
                Ok(()) => format!("restored {} to {}", u.what, u.old),
                Err(e) => format!("failed to restore {}: {e}", u.what),
            };
            if print || line.starts_with("failed") {
                eprintln!("{line}");
            }
            lines.push(line);
        }
        lines
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        self.undo_all(true);
    }
}

/// Checks `reqs` (fixing what it may when `c.fix`), returning the report
/// and the undo record.
pub fn check(reqs: &[SysReq], c: &Check) -> (Report, Restore) {
    let mounts = read_mounts().unwrap_or_default();
    let mut restore = Restore::default();
    let mut report = Report::default();
    for &req in reqs {
        let status = check_one(req, c, &mounts, &mut restore, &report);
        report.statuses.insert(req, status);
    }
    (report, restore)
}

fn missed(msg: impl Into<String>) -> Status {
    Status::Missed(vec![msg.into()])
}

fn from_misses(misses: Vec<String>, fixed: Vec<String>) -> Status {
    if !misses.is_empty() {
        Status::Missed(misses)
    } else if !fixed.is_empty() {
        Status::Fixed(fixed.join("; "))
    } else {
        Status::Satisfied
    }
}

fn check_one(
    req: SysReq,
    c: &Check,
    mounts: &[Mount],
    restore: &mut Restore,
    so_far: &Report,
) -> Status {
    let dev_dir =
        (!c.sysinfo.scr_dev.is_empty()).then(|| Path::new("/sys/block").join(&c.sysinfo.scr_dev));
    match req {
        SysReq::Controllers => check_controllers(c.cgroups),
        SysReq::Freezer => check_freezer(c),
        SysReq::MemCgRecursiveProt => check_recursive_prot(c.cgroups, mounts),
        SysReq::MemShadowInodeProt => {
            if version_at_least(&c.sysinfo.kernel_version, (5, 16)) {
                Status::Satisfied
            } else {
                missed(format!(
                    "inode shadow entries are not protected by memory.low on kernel {}: page cache of the protected workload can be reclaimed through inode reclaim; upgrade to Linux 5.16 or later",
                    c.sysinfo.kernel_version
                ))
            }
        }
        SysReq::IoCost => check_iocost(c.cgroups),
        SysReq::IoCostVer => check_iocost_ver(c, so_far),
        SysReq::NoOtherIoControllers => check_other_io(c.cgroups),
        SysReq::AnonBalance => match read_string(Path::new("/proc/vmstat")) {
            Ok(t)
                if t.lines()
                    .any(|l| l.split_whitespace().next() == Some("pgscan_anon")) =>
            {
                Status::Satisfied
            }
            Ok(_) => missed(
                "/proc/vmstat has no pgscan_anon: the kernel predates the anon/file reclaim balancing (Linux 5.8); upgrade the kernel",
            ),
            Err(e) => missed(e),
        },
        SysReq::Btrfs => check_btrfs(c, mounts),
        SysReq::BtrfsAsyncDiscard => check_async_discard(c, mounts),
        SysReq::NoCompositeStorage => {
            let d = &c.sysinfo.scr_dev;
            if d.starts_with("md") || d.starts_with("dm-") {
                missed(format!(
                    "the scratch dir {} is on the composite device {d} (md/dm): IO control and io.cost models need a plain disk; use a directory on a partition of a physical disk",
                    c.scratch_dir.display()
                ))
            } else {
                Status::Satisfied
            }
        }
        SysReq::IoSched => check_iosched(c, dev_dir.as_deref(), restore),
        SysReq::NoWbt => check_wbt(c, dev_dir.as_deref(), restore),
        SysReq::SwapOnScratch => check_swap_on_scratch(c.sysinfo),
        SysReq::Swap => check_swap(c, restore),
        SysReq::Oomd => match which("oomd") {
            Some(_) => Status::Satisfied,
            None => missed(
                "oomd is not on PATH: build and install it from https://github.com/facebookincubator/oomd",
            ),
        },
        SysReq::NoSysOomd => {
            let running = running_oom_killers();
            if running.is_empty() {
                Status::Satisfied
            } else {
                Status::Missed(
                    running
                        .into_iter()
                        .map(|(pid, name)| {
                            format!("{name} (pid {pid}) is running and may kill benchmark processes; stop it (e.g. systemctl stop {name})")
                        })
                        .collect(),
                )
            }
        }
        SysReq::HostCriticalServices => check_hostcritical(c.cgroups),
        SysReq::DepsBase => check_deps(&["python3"], "apt install python3"),
        SysReq::DepsIoCostCoefGen => check_deps(
            &["findmnt", "dd", "fio", "stdbuf"],
            "apt install fio util-linux coreutils",
        ),
        SysReq::DepsSide => check_deps(&["stress"], "apt install stress"),
        SysReq::DepsLinuxBuild => check_deps(
            &["gcc", "ld", "make", "bison", "flex", "pkg-config"],
            "apt install gcc binutils make bison flex pkg-config",
        ),
    }
}

fn check_controllers(cgs: &Cgroups) -> Status {
    match (cgs.kind(), cgs.v2_root()) {
        (BackendKind::Cgroup2, Some(root)) => {
            let path = root.join("cgroup.controllers");
            let have = fs::read_to_string(&path).unwrap_or_default();
            let lacking: Vec<&str> = ["cpu", "memory", "io"]
                .into_iter()
                .filter(|c| !have.split_whitespace().any(|h| h == *c))
                .collect();
            if lacking.is_empty() {
                Status::Satisfied
            } else {
                missed(format!(
                    "{} lacks {}: enable them in the kernel (CONFIG_MEMCG, CONFIG_CGROUP_SCHED, CONFIG_BLK_CGROUP) and make sure no cgroup1 hierarchy holds them",
                    path.display(),
                    lacking.join(", ")
                ))
            }
        }
        (BackendKind::Cgroup1, _) => missed(
            "cgroup2 with cpu, memory and io controllers is not mounted at /sys/fs/cgroup; the cgroup1 backend is used: no memory.low protection, no io.weight/io.cost",
        ),
        _ => missed(
            "no usable cgroups: mount cgroup2 at /sys/fs/cgroup (mount -t cgroup2 none /sys/fs/cgroup) with the cpu, memory and io controllers",
        ),
    }
}

/// The cgroup2 hierarchies known to the backend.
fn v2_roots(cgs: &Cgroups) -> Vec<&Path> {
    let mut v: Vec<&Path> = cgs.v2_root().into_iter().chain(cgs.psi_root()).collect();
    v.dedup();
    v
}

fn check_freezer(c: &Check) -> Status {
    let roots = v2_roots(c.cgroups);
    if roots.is_empty() {
        return missed(
            "no cgroup2 hierarchy: the cgroup2 freezer (cgroup.freeze) is unavailable; mount cgroup2 at /sys/fs/cgroup",
        );
    }
    let child_has_freeze = roots.iter().any(|r| {
        fs::read_dir(r)
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.path().join("cgroup.freeze").exists())
            })
            .unwrap_or(false)
    });
    if child_has_freeze || version_at_least(&c.sysinfo.kernel_version, (5, 2)) {
        Status::Satisfied
    } else {
        missed(format!(
            "no cgroup.freeze in the cgroups under {}: the cgroup2 freezer needs Linux 5.2 or later",
            roots[0].display()
        ))
    }
}

fn check_recursive_prot(cgs: &Cgroups, mounts: &[Mount]) -> Status {
    let Some(root) = cgs.v2_root().filter(|_| cgs.kind() == BackendKind::Cgroup2) else {
        return missed(
            "memory_recursiveprot needs the cgroup2 memory controller, which is not in use",
        );
    };
    match mounts
        .iter()
        .rev()
        .find(|m| m.fs_type == "cgroup2" && m.mount_point == root)
    {
        Some(m) if m.has_opt("memory_recursiveprot") => Status::Satisfied,
        _ => missed(format!(
            "cgroup2 at {0} is not mounted with memory_recursiveprot: run `mount -o remount,memory_recursiveprot {0}` (Linux 5.7+)",
            root.display()
        )),
    }
}

fn check_iocost(cgs: &Cgroups) -> Status {
    match cgs.v2_root().filter(|_| cgs.kind() == BackendKind::Cgroup2) {
        Some(root) if root.join("io.cost.qos").exists() => Status::Satisfied,
        Some(root) => missed(format!(
            "{} is missing: build the kernel with CONFIG_BLK_CGROUP_IOCOST=y",
            root.join("io.cost.qos").display()
        )),
        None => missed("io.cost needs cgroup2 with the io controller, which is not in use"),
    }
}

fn check_iocost_ver(c: &Check, so_far: &Report) -> Status {
    let cgs = c.cgroups;
    let iocost = match so_far.statuses.get(&SysReq::IoCost) {
        Some(s) => matches!(s, Status::Satisfied | Status::Fixed(_)),
        None => matches!(check_iocost(cgs), Status::Satisfied),
    };
    let Some(root) = cgs.v2_root().filter(|_| iocost) else {
        return missed("io.cost is not available, so its version cannot be checked");
    };
    let mut dirs = vec![root.to_path_buf()];
    if let Ok(rd) = fs::read_dir(root) {
        dirs.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
    }
    let has_usage = |dirs: &[PathBuf]| {
        dirs.iter()
            .any(|d| fs::read_to_string(d.join("io.stat")).is_ok_and(|t| t.contains("cost.usage")))
    };
    let mut found = has_usage(&dirs);
    // The kernel shows cost.usage only while io.cost is enabled on some
    // device. Upstream's rd-agent, enforcing IO control, enables it on the
    // scratch device before it looks; here it is enabled for the look and
    // the device's line written back at once.
    if !found && c.fix.io && c.sysinfo.scr_devnr != (0, 0) {
        let qos = root.join("io.cost.qos");
        let devnr = format!("{}:{}", c.sysinfo.scr_devnr.0, c.sysinfo.scr_devnr.1);
        let prev = fs::read_to_string(&qos).ok().and_then(|t| {
            t.lines()
                .find(|l| l.split_whitespace().next() == Some(devnr.as_str()))
                .map(str::to_string)
        });
        if let Some(prev) = prev
            && write_existing(&qos, &format!("{devnr} enable=1")).is_ok()
        {
            found = has_usage(&dirs);
            let back = super::iocost_restore_line(&prev, true);
            if let Err(e) = write_existing(&qos, &back) {
                eprintln!("failed to restore io.cost.qos of {devnr}: {e}");
            }
        }
    }
    if found {
        Status::Satisfied
    } else {
        missed(format!(
            "io.stat under {} has no cost.usage: io.cost is not enabled on any device or the kernel's io.cost is too old; enable it through {} (Linux 5.10+)",
            root.display(),
            root.join("io.cost.qos").display()
        ))
    }
}

/// Non-empty files named `names` in `root` and its sub-cgroups down to
/// `depth` levels, as "path: first line".
fn find_configured(root: &Path, names: &[&str], depth: usize, out: &mut Vec<String>) {
    for n in names {
        if let Ok(t) = fs::read_to_string(root.join(n))
            && let Some(line) = t.lines().map(str::trim).find(|l| !l.is_empty())
        {
            out.push(format!("{}: {line}", root.join(n).display()));
        }
    }
    if depth == 0 {
        return;
    }
    if let Ok(rd) = fs::read_dir(root) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                find_configured(&e.path(), names, depth - 1, out);
            }
        }
    }
}

fn check_other_io(cgs: &Cgroups) -> Status {
    let mut found = Vec::new();
    if let Some(root) = cgs.v2_root() {
        find_configured(root, &["io.latency", "io.low", "io.max"], 3, &mut found);
    }
    if let Some(blkio) = cgs.v1_root("blkio") {
        find_configured(
            blkio,
            &[
                "blkio.throttle.read_bps_device",
                "blkio.throttle.write_bps_device",
                "blkio.throttle.read_iops_device",
                "blkio.throttle.write_iops_device",
            ],
            3,
            &mut found,
        );
    }
    if found.is_empty() {
        Status::Satisfied
    } else {
        Status::Missed(
            found
                .into_iter()
                .map(|f| format!("another IO controller is configured ({f}); clear it so io.cost alone controls IO"))
                .collect(),
        )
    }
}

/// `statfs(2).f_type` of `path`.
fn fs_magic(path: &Path) -> Result<u64, String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{}: path contains a NUL byte", path.display()))?;
    // SAFETY: statfs is plain data; `c` is NUL-terminated and outlives the
    // call.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and lives past the call; `st` is writable.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(format!(
            "statfs {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(st.f_type as u64)
}

fn scratch_mount<'a>(c: &Check, mounts: &'a [Mount]) -> Option<&'a Mount> {
    let canon = fs::canonicalize(c.scratch_dir).ok()?;
    mount_of(mounts, &canon)
}

fn check_btrfs(c: &Check, mounts: &[Mount]) -> Status {
    match fs_magic(c.scratch_dir) {
        Ok(BTRFS_SUPER_MAGIC) => Status::Satisfied,
        Ok(_) => {
            let fs_type =
                scratch_mount(c, mounts).map_or("an unknown filesystem", |m| m.fs_type.as_str());
            missed(format!(
                "the scratch dir {} is on {fs_type}, not btrfs: use a directory on a btrfs filesystem (mkfs.btrfs on the test disk)",
                c.scratch_dir.display()
            ))
        }
        Err(e) => missed(e),
    }
}

fn check_async_discard(c: &Check, mounts: &[Mount]) -> Status {
    if !matches!(fs_magic(c.scratch_dir), Ok(BTRFS_SUPER_MAGIC)) {
        return missed(format!(
            "the scratch dir {} is not on btrfs, so btrfs discard=async does not apply",
            c.scratch_dir.display()
        ));
    }
    if c.sysinfo.scr_dev_rotational {
        return Status::Satisfied;
    }
    match scratch_mount(c, mounts) {
        Some(m) if m.has_opt("discard=async") => Status::Satisfied,
        Some(m) => missed(format!(
            "btrfs at {0} is not mounted with discard=async: run `mount -o remount,discard=async {0}`",
            m.mount_point.display()
        )),
        None => missed(format!(
            "no mount found for {} in /proc/self/mountinfo",
            c.scratch_dir.display()
        )),
    }
}

fn check_iosched(c: &Check, dev_dir: Option<&Path>, restore: &mut Restore) -> Status {
    let Some(path) = dev_dir.map(|d| d.join("queue/scheduler")) else {
        return Status::Satisfied;
    };
    let Ok(text) = fs::read_to_string(&path) else {
        return Status::Satisfied;
    };
    let cur = parse_scheduler(&text);
    if cur == "none" {
        return Status::Satisfied;
    }
    let how = format!("echo none > {}", path.display());
    if !c.fix.io {
        return missed(format!(
            "{} uses the {cur} IO scheduler; io.cost wants none: run `{how}`",
            c.sysinfo.scr_dev
        ));
    }
    match write_existing(&path, "none") {
        Ok(()) => {
            restore.undo.push(Undo {
                path: path.clone(),
                old: cur.clone(),
                what: format!("iosched of {}", c.sysinfo.scr_dev),
            });
            Status::Fixed(format!("iosched: {cur} -> none"))
        }
        Err(e) => missed(format!(
            "cannot switch the IO scheduler to none: {e}; run `{how}` as root"
        )),
    }
}

fn check_wbt(c: &Check, dev_dir: Option<&Path>, restore: &mut Restore) -> Status {
    let Some(path) = dev_dir.map(|d| d.join("queue/wbt_lat_usec")) else {
        return Status::Satisfied;
    };
    let Ok(text) = fs::read_to_string(&path) else {
        return Status::Satisfied;
    };
    let cur = text.trim().to_string();
    if cur == "0" {
        return Status::Satisfied;
    }
    let how = format!("echo 0 > {}", path.display());
    if !c.fix.io {
        return missed(format!(
            "writeback throttling is on for {} (wbt_lat_usec {cur}); it interferes with io.cost: run `{how}`",
            c.sysinfo.scr_dev
        ));
    }
    match write_existing(&path, "0") {
        Ok(()) => {
            restore.undo.push(Undo {
                path: path.clone(),
                old: cur.clone(),
                what: format!("wbt_lat_usec of {}", c.sysinfo.scr_dev),
            });
            Status::Fixed(format!("wbt_lat_usec: {cur} -> 0"))
        }
        Err(e) => missed(format!(
            "cannot disable writeback throttling: {e}; run `{how}` as root"
        )),
    }
}

/// One line of /proc/swaps.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SwapEntry {
    path: PathBuf,
    kind: String,
    size_bytes: u64,
}

/// Parses /proc/swaps (sizes are in KiB; paths escape spaces as `\040`).
fn parse_swaps(text: &str) -> Vec<SwapEntry> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 3 {
                return None;
            }
            Some(SwapEntry {
                path: PathBuf::from(super::unescape_octal(f[0])),
                kind: f[1].to_string(),
                size_bytes: f[2].parse::<u64>().ok()?.saturating_mul(1024),
            })
        })
        .collect()
}

/// The whole disk holding a swap entry.
fn swap_disk(e: &SwapEntry) -> Option<String> {
    let md = fs::metadata(&e.path).ok()?;
    if md.file_type().is_block_device() {
        whole_disk(dev_numbers(md.rdev())).map(|(n, _)| n)
    } else {
        block_dev_of(&e.path).ok().flatten().map(|(n, _)| n)
    }
}

fn check_swap_on_scratch(si: &SysInfo) -> Status {
    let swaps = match read_string(Path::new("/proc/swaps")) {
        Ok(t) => parse_swaps(&t),
        Err(e) => return missed(e),
    };
    if swaps.is_empty() {
        return missed(format!(
            "no swap: create a swap file on the scratch device{} and enable it with swapon",
            if si.scr_dev.is_empty() {
                String::new()
            } else {
                format!(" ({})", si.scr_dev)
            }
        ));
    }
    let off: Vec<String> = swaps
        .iter()
        .filter_map(|e| {
            let disk = swap_disk(e);
            (si.scr_dev.is_empty() || disk.as_deref() != Some(si.scr_dev.as_str())).then(|| {
                format!(
                    "swap {} ({}) is on {}, not on the scratch device {}: swapoff it and create swap on the scratch device",
                    e.path.display(),
                    e.kind,
                    disk.as_deref().unwrap_or("an unknown device"),
                    if si.scr_dev.is_empty() { "(none)" } else { si.scr_dev.as_str() }
                )
            })
        })
        .collect();
    from_misses(off, Vec::new())
}

const GIB: u64 = 1 << 30;

fn check_swap(c: &Check, restore: &mut Restore) -> Status {
    let si = c.sysinfo;
    let mut misses = Vec::new();
    let mut fixed = Vec::new();
    let want_total = (si.total_memory as f64 * 0.3) as u64;
    let want_free = want_total.min(31 * GIB);
    if si.total_swap < want_total {
        misses.push(format!(
            "swap is {:.1} GiB, less than 30% of memory ({:.1} GiB): add swap on the scratch device (fallocate + mkswap + swapon)",
            si.total_swap as f64 / GIB as f64,
            want_total as f64 / GIB as f64
        ));
    }
    if si.free_swap < want_free {
        misses.push(format!(
            "free swap is {:.1} GiB, less than {:.1} GiB: add swap or free some",
            si.free_swap as f64 / GIB as f64,
            want_free as f64 / GIB as f64
        ));
    }
    if si.swappiness < 60 {
        let path = Path::new("/proc/sys/vm/swappiness");
        let cur = fs::read_to_string(path)
            .map(|t| t.trim().to_string())
            .unwrap_or_else(|_| si.swappiness.to_string());
        if !c.fix.mem {
            misses.push(format!(
                "swappiness is {cur}, expected at least 60: run `echo 60 > {}`",
                path.display()
            ));
        } else {
            match write_existing(path, "60") {
                Ok(()) => {
                    restore.undo.push(Undo {
                        path: path.to_path_buf(),
                        old: cur.clone(),
                        what: "vm.swappiness".to_string(),
                    });
                    fixed.push(format!("swappiness: {cur} -> 60"));
                }
                Err(e) => misses.push(format!("cannot raise swappiness to 60: {e}")),
            }
        }
    }
    from_misses(misses, fixed)
}

fn running_oom_killers() -> Vec<(u32, String)> {
    let Ok(rd) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<(u32, String)> = rd
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let comm = fs::read_to_string(e.path().join("comm")).ok()?;
            let comm = comm.trim();
            matches!(comm, "oomd" | "systemd-oomd" | "earlyoom").then(|| (pid, comm.to_string()))
        })
        .collect();
    out.sort();
    out
}

fn check_hostcritical(cgs: &Cgroups) -> Status {
    if !Path::new("/run/systemd/system").exists() {
        return missed("no systemd: host-critical services cannot be placed in hostcritical.slice");
    }
    let roots = v2_roots(cgs);
    if roots.iter().any(|r| r.join("hostcritical.slice").is_dir()) {
        Status::Satisfied
    } else {
        missed(format!(
            "no hostcritical.slice in {}: create it with a systemd slice unit and move sshd, journald and other host-critical services into it",
            roots
                .first()
                .map_or("/sys/fs/cgroup".to_string(), |r| r.display().to_string())
        ))
    }
}

fn check_deps(progs: &[&str], install: &str) -> Status {
    let lacking: Vec<&str> = progs
        .iter()
        .copied()
        .filter(|p| which(p).is_none())
        .collect();
    if lacking.is_empty() {
        Status::Satisfied
    } else {
        missed(format!(
            "not on PATH: {}; try `{install}`",
            lacking.join(", ")
        ))
    }
}

/// Parses the leading "MAJOR.MINOR" of a kernel release like
/// `6.18.44-fc-v657`.
fn parse_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    Some((major, minor))
}

/// True when `release` is at least `want` (false if unparsable).
fn version_at_least(release: &str, want: (u32, u32)) -> bool {
    parse_version(release).is_some_and(|v| v >= want)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::sysinfo::collect;

    #[test]
    fn all_is_complete_and_named() {
        assert_eq!(SysReq::ALL.len(), 22);
        for r in SysReq::ALL {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.name()));
        }
        let mut sorted = SysReq::ALL.to_vec();
        sorted.sort();
        assert_eq!(sorted, SysReq::ALL.to_vec(), "ALL is in declaration order");
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("6.18.44-fc-v657"), Some((6, 18)));
        assert_eq!(parse_version("5.4.0-150-generic"), Some((5, 4)));
        assert_eq!(parse_version("5"), Some((5, 0)));
        assert_eq!(parse_version("x"), None);
        assert!(version_at_least("5.16.0", (5, 16)));
        assert!(version_at_least("6.1", (5, 16)));
        assert!(!version_at_least("5.15.90", (5, 16)));
        assert!(!version_at_least("4.19", (5, 2)));
        assert!(!version_at_least("", (5, 2)));
    }

    #[test]
    fn swaps_parse() {
        let t = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/nvme0n1p3                          partition\t8388604\t\t0\t\t-2\n/scratch/swap\\040file file 1024 0 -3\n";
        let s = parse_swaps(t);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].path, Path::new("/dev/nvme0n1p3"));
        assert_eq!(s[0].kind, "partition");
        assert_eq!(s[0].size_bytes, 8388604 * 1024);
        assert_eq!(s[1].path, Path::new("/scratch/swap file"));
        assert!(parse_swaps("Filename Type Size Used Priority\n").is_empty());
    }

    #[test]
    fn swap_thresholds() {
        let cgs = Cgroups::with_roots(BackendKind::None, None, BTreeMap::new(), None);
        let mut si = SysInfo {
            total_memory: 100 * GIB,
            total_swap: 30 * GIB,
            free_swap: 30 * GIB,
            swappiness: 60,
            ..SysInfo::default()
        };
        let mut restore = Restore::default();
        let c = |si: &SysInfo| {
            let chk = Check {
                scratch_dir: Path::new("/"),
                sysinfo: si,
                cgroups: &cgs,
                fix: Fix::NONE,
            };
            check_swap(&chk, &mut Restore::default())
        };
        assert_eq!(c(&si), Status::Satisfied);
        si.free_swap = 29 * GIB;
        assert!(matches!(c(&si), Status::Missed(m) if m.len() == 1 && m[0].contains("free swap")));
        si.total_memory = 200 * GIB; // 30% = 60 GiB, free needs only 31 GiB
        si.total_swap = 60 * GIB;
        si.free_swap = 31 * GIB;
        si.swappiness = 10;
        assert!(
            matches!(c(&si), Status::Missed(m) if m.len() == 1 && m[0].contains("swappiness is"))
        );
        assert!(restore.undo_all(true).is_empty());
    }

    #[test]
    fn configured_io_files_are_found() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::write(root.join("a/io.max"), "").unwrap();
        fs::write(root.join("a/b/io.latency"), "254:0 target=10000\n").unwrap();
        let cgs = Cgroups::with_roots(
            BackendKind::Cgroup2,
            Some(root.to_path_buf()),
            BTreeMap::new(),
            None,
        );
        match check_other_io(&cgs) {
            Status::Missed(m) => {
                assert_eq!(m.len(), 1);
                assert!(m[0].contains("a/b/io.latency: 254:0 target=10000"), "{m:?}");
            }
            s => panic!("expected Missed, got {s:?}"),
        }
    }

    #[test]
    fn restore_writes_back_once() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("knob");
        fs::write(&p, "0").unwrap();
        let r = Restore {
            undo: vec![Undo {
                path: p.clone(),
                old: "75000".to_string(),
                what: "knob".to_string(),
            }],
        };
        let lines = r.restore();
        assert_eq!(lines, vec!["restored knob to 75000".to_string()]);
        assert_eq!(fs::read_to_string(&p).unwrap(), "75000");
        fs::write(&p, "0").unwrap();
        {
            let _r = Restore {
                undo: vec![Undo {
                    path: p.clone(),
                    old: "1".to_string(),
                    what: "knob".to_string(),
                }],
            };
        }
        assert_eq!(fs::read_to_string(&p).unwrap(), "1", "drop restores");
    }

    fn host() -> (SysInfo, Cgroups) {
        let cgs = Cgroups::probe().unwrap();
        let si = collect(Path::new("/tmp"), cgs.kind()).unwrap();
        (si, cgs)
    }

    #[test]
    fn check_all_on_this_host() {
        let (si, cgs) = host();
        let c = Check {
            scratch_dir: Path::new("/tmp"),
            sysinfo: &si,
            cgroups: &cgs,
            fix: Fix::NONE,
        };
        let (report, restore) = check(&SysReq::ALL, &c);
        assert!(restore.is_empty(), "nothing changes without fix");
        for r in SysReq::ALL {
            eprintln!("{:>22}: {:?}", r.name(), report.statuses.get(&r));
            assert!(report.statuses.contains_key(&r), "{r:?}");
        }
        if cgs.kind() != BackendKind::Cgroup2 {
            assert!(report.missed().contains_key(&SysReq::Controllers));
        }
        if version_at_least(&si.kernel_version, (5, 8)) {
            assert!(report.satisfied().contains(&SysReq::AnonBalance));
        }
        if cgs.kind() == BackendKind::Cgroup1 {
            assert!(
                report.missed()[&SysReq::Controllers][0]
                    .starts_with("cgroup2 with cpu, memory and io")
            );
        }
    }

    #[test]
    fn fix_and_restore_wbt_and_iosched() {
        let (si, cgs) = host();
        if si.scr_dev.is_empty() {
            testenv::skip("blockdev", "/tmp is not on a block device");
            return;
        }
        let q = Path::new("/sys/block").join(&si.scr_dev).join("queue");
        let wbt = q.join("wbt_lat_usec");
        let sched = q.join("scheduler");
        let old_wbt = fs::read_to_string(&wbt).map(|s| s.trim().to_string());
        let old_sched = fs::read_to_string(&sched).map(|s| parse_scheduler(&s));
        let writable = |p: &Path| fs::OpenOptions::new().write(true).open(p).is_ok();
        if !writable(&wbt) && !writable(&sched) {
            testenv::skip(
                "blockdev",
                &format!("{} and {} are not writable", wbt.display(), sched.display()),
            );
            return;
        }
        // A job that leaves IO control passive (swappiness may still be
        // fixed) finds the device as it is and changes nothing on it.
        let passive_io = Check {
            scratch_dir: Path::new("/tmp"),
            sysinfo: &si,
            cgroups: &cgs,
            fix: Fix::for_passive(Some(&crate::spec::Passive::parse("io").unwrap())),
        };
        assert_eq!(
            passive_io.fix,
            Fix {
                io: false,
                mem: true
            }
        );
        let (report, restore) = check(&[SysReq::NoWbt, SysReq::IoSched], &passive_io);
        assert!(restore.is_empty(), "{report:?}");
        for (req, old, target) in [
            (SysReq::NoWbt, &old_wbt, "0"),
            (SysReq::IoSched, &old_sched, "none"),
        ] {
            if let Ok(old) = old
                && old != target
            {
                assert!(
                    matches!(&report.statuses[&req], Status::Missed(_)),
                    "{report:?}"
                );
            }
        }
        assert_eq!(
            fs::read_to_string(&wbt).map(|s| s.trim().to_string()).ok(),
            old_wbt.as_ref().ok().cloned()
        );
        let c = Check {
            scratch_dir: Path::new("/tmp"),
            sysinfo: &si,
            cgroups: &cgs,
            fix: Fix::ALL,
        };
        let (report, restore) = check(&[SysReq::NoWbt, SysReq::IoSched], &c);
        eprintln!("{report:?}");
        if let Ok(old) = &old_wbt
            && old != "0"
            && writable(&wbt)
        {
            assert_eq!(
                report.statuses[&SysReq::NoWbt],
                Status::Fixed(format!("wbt_lat_usec: {old} -> 0"))
            );
            assert_eq!(fs::read_to_string(&wbt).unwrap().trim(), "0");
        }
        if let Ok(old) = &old_sched
            && old != "none"
            && writable(&sched)
        {
            assert_eq!(
                report.statuses[&SysReq::IoSched],
                Status::Fixed(format!("iosched: {old} -> none"))
            );
            assert_eq!(
                parse_scheduler(&fs::read_to_string(&sched).unwrap()),
                "none"
            );
        }
        let lines = restore.restore();
        eprintln!("{lines:?}");
        if let Ok(old) = old_wbt {
            assert_eq!(fs::read_to_string(&wbt).unwrap().trim(), old);
        }
        if let Ok(old) = old_sched {
            assert_eq!(parse_scheduler(&fs::read_to_string(&sched).unwrap()), old);
        }
    }

    #[test]
    fn a_jobs_passive_controls_decide_what_is_fixed() {
        let p = |t: &str| Fix::for_passive(Some(&crate::spec::Passive::parse(t).unwrap()));
        assert_eq!(Fix::for_passive(None), Fix::ALL);
        assert_eq!(p("none"), Fix::ALL);
        assert_eq!(p("cpu"), Fix::ALL);
        assert_eq!(
            p("io"),
            Fix {
                io: false,
                mem: true
            }
        );
        assert_eq!(
            p("mem"),
            Fix {
                io: true,
                mem: false
            }
        );
        assert_eq!(p("all"), Fix::NONE);
    }

    #[test]
    fn restore_write_records_the_old_value_and_restores_latest_first() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("knob");
        fs::write(&p, "10\n").unwrap();
        let mut restore = Restore::default();
        assert_eq!(restore.write(&p, "20", "knob").unwrap(), "10");
        assert_eq!(restore.write(&p, "30", "knob").unwrap(), "20");
        assert_eq!(fs::read_to_string(&p).unwrap(), "30");
        let lines = restore.restore();
        assert_eq!(lines, vec!["restored knob to 20", "restored knob to 10"]);
        assert_eq!(fs::read_to_string(&p).unwrap(), "10");
        // A missing file is an error naming it, and nothing is recorded.
        let mut restore = Restore::default();
        let e = restore
            .write(&dir.path().join("nope"), "1", "nope")
            .unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        assert!(restore.is_empty());
    }
}
