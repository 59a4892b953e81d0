//! Cgroup backends: cgroup2, cgroup1, or none.
//!
//! Upstream resctl-bench needs cgroup2 with the cpu, memory and io
//! controllers. Many hosts (this project's CI among them) only have cgroup1
//! controllers, sometimes next to a controller-less cgroup2 mount that still
//! offers per-cgroup pressure (PSI) files. [`Cgroups::probe`] finds what the
//! host has; [`Cgroup`] applies controls as well as the backend allows and
//! says, through [`Applied`], what was done instead when it cannot.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Mount, read_mounts, read_u64, write_existing};

/// Environment variable forcing a backend: `cgroup2`, `cgroup1` or `none`.
pub const BACKEND_ENV: &str = "RACKBENCH_CGROUP_BACKEND";

/// The cgroup1 controllers a [`Cgroup`] is created in.
const V1_CONTROLLERS: [&str; 4] = ["memory", "cpu", "cpuacct", "blkio"];

/// Which cgroup interface controls are applied through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Unified hierarchy with the cpu and memory (and ideally io) controllers.
    Cgroup2,
    /// Legacy per-controller hierarchies.
    Cgroup1,
    /// No usable cgroups: nothing is isolated.
    #[default]
    None,
}

impl BackendKind {
    /// The name used in [`BACKEND_ENV`] and in serialized form.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cgroup2 => "cgroup2",
            BackendKind::Cgroup1 => "cgroup1",
            BackendKind::None => "none",
        }
    }
}

/// What happened to a requested control.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// Applied as asked.
    Done,
    /// Something weaker was done instead; the text says what and why.
    Degraded(String),
    /// Nothing was done; the text says why.
    Unsupported(String),
}

/// The probed host: which backend and where its hierarchies are mounted.
#[derive(Debug, Clone)]
pub struct Cgroups {
    kind: BackendKind,
    v2_root: Option<PathBuf>,
    v1_roots: BTreeMap<String, PathBuf>,
    psi_root: Option<PathBuf>,
}

/// What [`Cgroups::probe`] found in the mount table, before choosing.
#[derive(Debug, Default)]
struct Found {
    /// A writable cgroup2 mount with cpu and memory enabled in its subtree.
    v2_usable: Option<PathBuf>,
    /// Why the first cgroup2 mount is not usable as the backend.
    v2_why_not: Option<String>,
    /// A cgroup2 mount whose cgroups have pressure files.
    psi: Option<PathBuf>,
    /// Writable cgroup1 controller mounts.
    v1: BTreeMap<String, PathBuf>,
}

fn controllers_of(dir: &Path) -> BTreeSet<String> {
    fs::read_to_string(dir.join("cgroup.controllers"))
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn subtree_of(dir: &Path) -> BTreeSet<String> {
    fs::read_to_string(dir.join("cgroup.subtree_control"))
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn is_writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// True when the root of a cgroup2 hierarchy or one of its children has a
/// `memory.pressure` file (the root lacks it on some kernels).
fn has_pressure_files(root: &Path) -> bool {
    if root.join("memory.pressure").exists() {
        return true;
    }
    let Ok(rd) = fs::read_dir(root) else {
        return false;
    };
    rd.flatten()
        .any(|e| e.path().is_dir() && e.path().join("memory.pressure").exists())
}

/// Enables `ctrls` in `dir/cgroup.subtree_control` one by one where the
/// controller is available; returns (controller, error) for those that
/// could not be enabled.
fn enable_subtree(dir: &Path, ctrls: &[&str]) -> Vec<(String, String)> {
    let avail = controllers_of(dir);
    let enabled = subtree_of(dir);
    let mut failed = Vec::new();
    for c in ctrls {
        if enabled.contains(*c) || !avail.contains(*c) {
            continue;
        }
        if let Err(e) = write_existing(&dir.join("cgroup.subtree_control"), &format!("+{c}")) {
            failed.push((c.to_string(), e.to_string()));
        }
    }
    failed
}

fn join_errors(failed: &[(String, String)]) -> String {
    failed
        .iter()
        .map(|(_, e)| e.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

fn scan_mounts(mounts: &[Mount]) -> Found {
    let mut found = Found::default();
    for m in mounts {
        match m.fs_type.as_str() {
            "cgroup2" => {
                let root = &m.mount_point;
                if found.psi.is_none() && has_pressure_files(root) {
                    found.psi = Some(root.clone());
                }
                if found.v2_usable.is_some() {
                    continue;
                }
                let avail = controllers_of(root);
                let why = if !m.is_rw() || !is_writable(root) {
                    Some(format!("cgroup2 at {} is not writable", root.display()))
                } else if !(avail.contains("memory") && avail.contains("cpu")) {
                    Some(format!(
                        "{} lists {:?}, expected memory and cpu",
                        root.join("cgroup.controllers").display(),
                        avail
                            .iter()
                            .map(String::as_str)
                            .collect::<Vec<_>>()
                            .join(" ")
                    ))
                } else {
                    let failed = enable_subtree(root, &["memory", "cpu"]);
                    (!failed.is_empty()).then(|| join_errors(&failed))
                };
                match why {
                    None => found.v2_usable = Some(root.clone()),
                    Some(w) => {
                        found.v2_why_not.get_or_insert(w);
                    }
                }
            }
            "cgroup" if m.is_rw() && is_writable(&m.mount_point) => {
                for opt in &m.super_opts {
                    if matches!(
                        opt.as_str(),
                        "memory" | "cpu" | "cpuacct" | "blkio" | "cpuset" | "pids" | "freezer"
                    ) {
                        found
                            .v1
                            .entry(opt.clone())
                            .or_insert_with(|| m.mount_point.clone());
                    }
                }
            }
            _ => {}
        }
    }
    found
}

impl Cgroups {
    /// Probes the host through `/proc/self/mountinfo`.
    ///
    /// Cgroup2 when a writable cgroup2 mount lists memory and cpu in
    /// `cgroup.controllers` and they can be enabled in its subtree; else
    /// Cgroup1 when writable cgroup1 `memory` and `cpu` hierarchies are
    /// mounted; else None. [`BACKEND_ENV`] forces a backend (an error if the
    /// host does not have it). A cgroup2 mount whose cgroups have
    /// `memory.pressure`, even without controllers, is remembered as the PSI
    /// hierarchy.
    pub fn probe() -> Result<Cgroups, crate::Error> {
        let forced = match std::env::var(BACKEND_ENV) {
            Ok(v) => match v.trim() {
                "cgroup2" => Some(BackendKind::Cgroup2),
                "cgroup1" => Some(BackendKind::Cgroup1),
                "none" => Some(BackendKind::None),
                "" => None,
                other => {
                    return Err(crate::Error::Input(format!(
                        "{BACKEND_ENV}={other:?}: expected cgroup2, cgroup1 or none"
                    )));
                }
            },
            Err(_) => None,
        };
        let mounts = read_mounts()?;
        Self::from_found(scan_mounts(&mounts), forced).map_err(crate::Error::Host)
    }

    fn from_found(found: Found, forced: Option<BackendKind>) -> Result<Cgroups, String> {
        let v1_ok = found.v1.contains_key("memory") && found.v1.contains_key("cpu");
        let kind = match forced {
            Some(BackendKind::Cgroup2) if found.v2_usable.is_none() => {
                return Err(format!(
                    "{BACKEND_ENV}=cgroup2 but no usable cgroup2 hierarchy: {}",
                    found
                        .v2_why_not
                        .as_deref()
                        .unwrap_or("no cgroup2 mount in /proc/self/mountinfo")
                ));
            }
            Some(BackendKind::Cgroup1) if !v1_ok => {
                return Err(format!(
                    "{BACKEND_ENV}=cgroup1 but no writable cgroup1 memory and cpu hierarchies are mounted (found: {:?})",
                    found.v1.keys().collect::<Vec<_>>()
                ));
            }
            Some(k) => k,
            None if found.v2_usable.is_some() => BackendKind::Cgroup2,
            None if v1_ok => BackendKind::Cgroup1,
            None => BackendKind::None,
        };
        Ok(match kind {
            BackendKind::Cgroup2 => {
                let root = found.v2_usable;
                // The cgroup2 hierarchy carries its own pressure files.
                let psi = root.clone().filter(|r| has_pressure_files(r));
                Cgroups::with_roots(kind, root, BTreeMap::new(), psi)
            }
            BackendKind::Cgroup1 => {
                let v1 = found
                    .v1
                    .into_iter()
                    .filter(|(c, _)| V1_CONTROLLERS.contains(&c.as_str()))
                    .collect();
                Cgroups::with_roots(kind, None, v1, found.psi)
            }
            BackendKind::None => Cgroups::with_roots(kind, None, BTreeMap::new(), None),
        })
    }

    /// Explicit roots, no probing (for tests on fake trees). `v1_roots`
    /// maps a cgroup1 controller name to its mount point.
    pub fn with_roots(
        kind: BackendKind,
        v2_root: Option<PathBuf>,
        v1_roots: BTreeMap<String, PathBuf>,
        psi_root: Option<PathBuf>,
    ) -> Cgroups {
        Cgroups {
            kind,
            v2_root,
            v1_roots,
            psi_root,
        }
    }

    /// The backend in use.
    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    /// True when per-cgroup pressure (PSI) files are available.
    pub fn psi_available(&self) -> bool {
        self.psi_root.is_some()
    }

    /// The cgroup2 hierarchy used for controls (Cgroup2 backend only).
    pub fn v2_root(&self) -> Option<&Path> {
        self.v2_root.as_deref()
    }

    /// The cgroup1 mount of `controller`, if used.
    pub fn v1_root(&self, controller: &str) -> Option<&Path> {
        self.v1_roots.get(controller).map(PathBuf::as_path)
    }

    /// The cgroup2 hierarchy read for pressure stats (the same as
    /// [`Cgroups::v2_root`] on Cgroup2).
    pub fn psi_root(&self) -> Option<&Path> {
        self.psi_root.as_deref()
    }

    /// What this backend cannot do, one human-readable line each.
    pub fn limitations(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self.kind {
            BackendKind::Cgroup2 => {
                if let Some(root) = &self.v2_root {
                    if !controllers_of(root).contains("io") {
                        out.push(format!(
                            "io.weight: no io controller in {}: io is not isolated",
                            root.join("cgroup.controllers").display()
                        ));
                    }
                    if !root.join("io.cost.qos").exists() {
                        out.push(format!(
                            "io.cost: {} is missing (kernel without CONFIG_BLK_CGROUP_IOCOST)",
                            root.join("io.cost.qos").display()
                        ));
                    }
                }
                if self.psi_root.is_none() {
                    out.push("psi: no pressure files in the cgroup2 hierarchy".to_string());
                }
            }
            BackendKind::Cgroup1 => {
                out.push(
                    "memory.low: no memory protection in cgroup1; the workload is protected by capping the others with memory.limit_in_bytes"
                        .to_string(),
                );
                out.push(
                    "memory.high: emulated with memory.soft_limit_in_bytes, which only applies under global memory pressure"
                        .to_string(),
                );
                match self.v1_roots.get("blkio") {
                    None => out.push(
                        "io: no cgroup1 blkio hierarchy mounted: no io weights and no per-cgroup io stats"
                            .to_string(),
                    ),
                    Some(b) if b.join("blkio.weight").exists() => {}
                    Some(b) if b.join("blkio.bfq.io_service_bytes").exists() => out.push(
                        "io.weight: set as blkio.bfq.weight, which only acts on devices using the bfq scheduler"
                            .to_string(),
                    ),
                    Some(_) => out.push(
                        "io.weight: blkio.weight needs the BFQ scheduler, not available".to_string(),
                    ),
                }
                out.push("io.cost: needs cgroup2".to_string());
                if self.psi_root.is_none() {
                    out.push(
                        "psi: no cgroup2 hierarchy with pressure files: only system-wide pressure"
                            .to_string(),
                    );
                }
            }
            BackendKind::None => {
                out.push("no cgroups: nothing is isolated, only whole-system stats".to_string());
            }
        }
        out
    }

    /// Creates (or reuses) the cgroup at relative path `rel` (like
    /// `rackbench-1234/workload`) in every relevant hierarchy: the cgroup2
    /// root (enabling memory, cpu and io in the ancestors' subtrees where
    /// available), the cgroup1 memory, cpu, cpuacct and blkio hierarchies,
    /// and the PSI hierarchy if separate. The handle removes the
    /// directories it created when dropped.
    /// Removes the `rackbench-<pid>` trees of processes that no longer
    /// exist (a run killed before it could clean up) under every root. A
    /// tree whose pid lives (another run, or a process that took the pid)
    /// is left alone.
    pub fn remove_stale(&self) {
        let roots = self.v2_root.iter().chain(self.v1_roots.values());
        for root in roots {
            let Ok(rd) = fs::read_dir(root) else { continue };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = name
                    .strip_prefix("rackbench-")
                    .and_then(|p| p.parse::<u32>().ok())
                else {
                    continue;
                };
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    remove_tree(&e.path());
                }
            }
        }
    }

    pub fn create(&self, rel: &str) -> Result<Cgroup, crate::Error> {
        let rel_path = Path::new(rel);
        let valid = !rel.is_empty()
            && rel_path
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !valid {
            return Err(crate::Error::Input(format!(
                "cgroup path {rel:?}: expected a relative path like \"rackbench-1/workload\" without \"..\""
            )));
        }
        let mut cg = Cgroup {
            rel: rel.to_string(),
            kind: self.kind,
            v2: None,
            v1: BTreeMap::new(),
            psi: None,
            created: Vec::new(),
        };
        if self.kind == BackendKind::None {
            return Ok(cg);
        }
        self.remove_stale();
        if let Some(root) = &self.v2_root {
            let dir = make_dirs(root, rel_path, &mut cg.created).map_err(crate::Error::Host)?;
            // Enable controllers from the root down to the leaf's parent.
            let mut parent = root.clone();
            for comp in rel_path.components() {
                let failed = enable_subtree(&parent, &["memory", "cpu", "io"]);
                // Without io the cgroup is still useful (see limitations()).
                let essential: Vec<_> = failed.into_iter().filter(|(c, _)| c != "io").collect();
                if !essential.is_empty() {
                    return Err(crate::Error::Host(join_errors(&essential)));
                }
                parent.push(comp);
            }
            cg.v2 = Some(dir);
        }
        let mut by_root: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
        for (ctrl, root) in &self.v1_roots {
            if !V1_CONTROLLERS.contains(&ctrl.as_str()) {
                continue;
            }
            // Co-mounted controllers (cpu,cpuacct) share one directory.
            let dir = match by_root.get(root) {
                Some(d) => d.clone(),
                None => {
                    let d =
                        make_dirs(root, rel_path, &mut cg.created).map_err(crate::Error::Host)?;
                    by_root.insert(root.clone(), d.clone());
                    d
                }
            };
            cg.v1.insert(ctrl.clone(), dir);
        }
        if let Some(psi) = &self.psi_root
            && Some(psi) != self.v2_root.as_ref()
        {
            cg.psi = Some(make_dirs(psi, rel_path, &mut cg.created).map_err(crate::Error::Host)?);
        }
        Ok(cg)
    }

    /// Whole-system stats in [`CgStat`] form: cgroup2 root files where
    /// present, else `/proc/stat` for cpu, `/proc/meminfo` (MemTotal -
    /// MemAvailable) for memory, `/proc/diskstats` summed over whole disks
    /// for io, and `/proc/pressure/*` for pressure.
    pub fn root_stat(&self) -> CgStat {
        let v2_roots: Vec<&PathBuf> = self.v2_root.iter().chain(self.psi_root.iter()).collect();
        let mut st = CgStat::default();
        if let Some(cpu) = v2_roots
            .iter()
            .find_map(|r| fs::read_to_string(r.join("cpu.stat")).ok())
        {
            let kv = parse_flat_keyed(&cpu);
            st.cpu_usage = kv.get("usage_usec").map(|v| *v as f64 / 1e6);
            st.cpu_sys = kv.get("system_usec").map(|v| *v as f64 / 1e6);
        }
        if st.cpu_usage.is_none()
            && let Ok(text) = fs::read_to_string("/proc/stat")
            && let Some((usage, sys)) = parse_proc_stat_cpu(&text, clk_tck())
        {
            st.cpu_usage = Some(usage);
            st.cpu_sys = Some(sys);
        }
        st.mem_bytes = v2_roots
            .iter()
            .find_map(|r| read_u64(&r.join("memory.current")).ok())
            .or_else(|| {
                fs::read_to_string("/proc/meminfo")
                    .ok()
                    .and_then(|t| parse_meminfo_used(&t))
            });
        let v2_io = v2_roots
            .iter()
            .find_map(|r| fs::read_to_string(r.join("io.stat")).ok())
            .map(|t| parse_io_stat_full(&t));
        if let Some(s) = &v2_io {
            st.io_cost_usage = s.cost_usage_us.map(|us| us as f64 / 1e6);
            st.io_cost_vrate = s.cost_vrate;
        }
        let io = v2_io.map(|s| (s.rbytes, s.wbytes)).or_else(|| {
            fs::read_to_string("/proc/diskstats")
                .ok()
                .map(|t| parse_diskstats(&t, is_whole_disk))
        });
        if let Some((r, w)) = io {
            st.io_rbytes = Some(r);
            st.io_wbytes = Some(w);
        }
        st.psi = read_psi(Path::new("/proc/pressure"), "")
            .or_else(|| v2_roots.iter().find_map(|r| read_psi(r, ".pressure")));
        st
    }
}

/// Creates `root/rel` and any missing ancestors, recording in `created`
/// each directory this call made (outermost first).
fn make_dirs(root: &Path, rel: &Path, created: &mut Vec<PathBuf>) -> Result<PathBuf, String> {
    if !root.is_dir() {
        return Err(format!(
            "cgroup hierarchy {} is not a directory",
            root.display()
        ));
    }
    let mut dir = root.to_path_buf();
    for comp in rel.components() {
        dir.push(comp);
        match fs::create_dir(&dir) {
            Ok(()) => created.push(dir.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => return Err(format!("cannot create cgroup {}: {e}", dir.display())),
        }
    }
    Ok(dir)
}

/// A cgroup, present in every hierarchy of the backend. Dropping it
/// removes the directories [`Cgroups::create`] made.
#[derive(Debug)]
pub struct Cgroup {
    rel: String,
    kind: BackendKind,
    v2: Option<PathBuf>,
    v1: BTreeMap<String, PathBuf>,
    psi: Option<PathBuf>,
    created: Vec<PathBuf>,
}

fn not_in(what: &str) -> Applied {
    Applied::Unsupported(format!("no cgroups: {what} cannot be applied"))
}

fn write_applied(path: &Path, value: &str, ok: Applied) -> Applied {
    match write_existing(path, value) {
        Ok(()) => ok,
        Err(e) => Applied::Unsupported(e.to_string()),
    }
}

impl Cgroup {
    /// The path relative to the hierarchy roots.
    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// Every distinct directory of this cgroup.
    fn dirs(&self) -> Vec<&PathBuf> {
        let mut dirs: Vec<&PathBuf> = self
            .v2
            .iter()
            .chain(self.v1.values())
            .chain(self.psi.iter())
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// The `cgroup.procs` file of every hierarchy of this cgroup (empty
    /// without cgroups). A child can join the cgroup before it execs by
    /// writing `0` to each.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs()
            .into_iter()
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    /// Moves process `pid` into this cgroup in every hierarchy.
    pub fn add_pid(&self, pid: u32) -> Result<(), crate::Error> {
        if self.kind == BackendKind::None {
            return Err(crate::Error::Host(format!(
                "no cgroups: cannot move pid {pid} into {}",
                self.rel
            )));
        }
        for dir in self.dirs() {
            write_existing(&dir.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// The processes in this cgroup (in any of its hierarchies), sorted.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = BTreeSet::new();
        for dir in self.dirs() {
            pids.extend(read_pids(dir));
        }
        pids.into_iter().collect()
    }

    /// Memory protection: cgroup2 `memory.low`; cgroup1 has none.
    pub fn set_mem_low(&self, bytes: u64) -> Applied {
        match (self.kind, &self.v2) {
            (BackendKind::Cgroup2, Some(d)) => {
                write_applied(&d.join("memory.low"), &limit_v2(bytes), Applied::Done)
            }
            (BackendKind::Cgroup1, _) => Applied::Unsupported(
                "cgroup1 has no memory protection (memory.low); cap the other cgroups with memory.limit_in_bytes instead"
                    .to_string(),
            ),
            _ => not_in("memory.low"),
        }
    }

    /// Hard limit: cgroup2 `memory.max`; cgroup1 `memory.limit_in_bytes`
    /// (`memory.memsw.limit_in_bytes` is left alone). `u64::MAX` means no
    /// limit.
    pub fn set_mem_max(&self, bytes: u64) -> Applied {
        match self.kind {
            BackendKind::Cgroup2 => match &self.v2 {
                Some(d) => write_applied(&d.join("memory.max"), &limit_v2(bytes), Applied::Done),
                None => not_in("memory.max"),
            },
            BackendKind::Cgroup1 => match self.v1.get("memory") {
                Some(d) => write_applied(
                    &d.join("memory.limit_in_bytes"),
                    &limit_v1(bytes),
                    Applied::Done,
                ),
                None => Applied::Unsupported("no cgroup1 memory hierarchy".to_string()),
            },
            BackendKind::None => not_in("memory.max"),
        }
    }

    /// Soft limit: cgroup2 `memory.high`; cgroup1
    /// `memory.soft_limit_in_bytes`, which is weaker ([`Applied::Degraded`]).
    pub fn set_mem_high(&self, bytes: u64) -> Applied {
        match self.kind {
            BackendKind::Cgroup2 => match &self.v2 {
                Some(d) => write_applied(&d.join("memory.high"), &limit_v2(bytes), Applied::Done),
                None => not_in("memory.high"),
            },
            BackendKind::Cgroup1 => match self.v1.get("memory") {
                Some(d) => write_applied(
                    &d.join("memory.soft_limit_in_bytes"),
                    &limit_v1(bytes),
                    Applied::Degraded(
                        "memory.high set as memory.soft_limit_in_bytes: soft_limit_in_bytes only applies under global pressure"
                            .to_string(),
                    ),
                ),
                None => Applied::Unsupported("no cgroup1 memory hierarchy".to_string()),
            },
            BackendKind::None => not_in("memory.high"),
        }
    }

    /// CPU weight (1..=10000, default 100): cgroup2 `cpu.weight`; cgroup1
    /// `cpu.shares` = weight * 1024 / 100. Out-of-range weights are clamped
    /// ([`Applied::Degraded`]).
    pub fn set_cpu_weight(&self, weight: u32) -> Applied {
        let w = weight.clamp(1, 10000);
        let ok = clamped_result("cpu weight", weight, w);
        match self.kind {
            BackendKind::Cgroup2 => match &self.v2 {
                Some(d) => write_applied(&d.join("cpu.weight"), &w.to_string(), ok),
                None => not_in("cpu.weight"),
            },
            BackendKind::Cgroup1 => match self.v1.get("cpu") {
                Some(d) => {
                    // The kernel's minimum is 2 shares.
                    let shares = (u64::from(w) * 1024 / 100).max(2);
                    write_applied(&d.join("cpu.shares"), &shares.to_string(), ok)
                }
                None => Applied::Unsupported("no cgroup1 cpu hierarchy".to_string()),
            },
            BackendKind::None => not_in("cpu.weight"),
        }
    }

    /// IO weight: cgroup2 `io.weight` ("default N", 1..=10000); cgroup1
    /// `blkio.weight` (10..=1000) or `blkio.bfq.weight` (1..=1000) when the
    /// file exists. Out-of-range weights are clamped ([`Applied::Degraded`]).
    pub fn set_io_weight(&self, weight: u32) -> Applied {
        match self.kind {
            BackendKind::Cgroup2 => match &self.v2 {
                Some(d) => {
                    let path = d.join("io.weight");
                    if !path.exists() {
                        return Applied::Unsupported(format!(
                            "{} is missing: the io controller is not enabled",
                            path.display()
                        ));
                    }
                    let w = weight.clamp(1, 10000);
                    write_applied(
                        &path,
                        &format!("default {w}"),
                        clamped_result("io weight", weight, w),
                    )
                }
                None => not_in("io.weight"),
            },
            BackendKind::Cgroup1 => {
                let Some(d) = self.v1.get("blkio") else {
                    return Applied::Unsupported("no cgroup1 blkio hierarchy".to_string());
                };
                let (path, lo) = if d.join("blkio.weight").exists() {
                    (d.join("blkio.weight"), 10)
                } else if d.join("blkio.bfq.weight").exists() {
                    (d.join("blkio.bfq.weight"), 1)
                } else {
                    return Applied::Unsupported(format!(
                        "neither blkio.weight nor blkio.bfq.weight exists in {}: blkio.weight needs the BFQ scheduler",
                        d.display()
                    ));
                };
                let w = weight.clamp(lo, 1000);
                write_applied(
                    &path,
                    &w.to_string(),
                    clamped_result("io weight", weight, w),
                )
            }
            BackendKind::None => not_in("io.weight"),
        }
    }

    /// IO bandwidth limits on one device (`MAJ:MIN`), bytes a second;
    /// `None` lifts that direction's limit: cgroup2 `io.max`
    /// (`MAJ:MIN rbps=N wbps=max`); cgroup1 `blkio.throttle.read_bps_device`
    /// and `blkio.throttle.write_bps_device` (`MAJ:MIN N`, 0 = no limit).
    pub fn set_io_max(&self, devnr: &str, rbps: Option<u64>, wbps: Option<u64>) -> Applied {
        let v2 = |v: Option<u64>| v.map_or("max".to_string(), |n| n.to_string());
        match self.kind {
            BackendKind::Cgroup2 => match &self.v2 {
                Some(d) => {
                    let path = d.join("io.max");
                    if !path.exists() {
                        return Applied::Unsupported(format!(
                            "{} is missing: the io controller is not enabled",
                            path.display()
                        ));
                    }
                    write_applied(
                        &path,
                        &format!("{devnr} rbps={} wbps={}", v2(rbps), v2(wbps)),
                        Applied::Done,
                    )
                }
                None => not_in("io.max"),
            },
            BackendKind::Cgroup1 => {
                let Some(d) = self.v1.get("blkio") else {
                    return Applied::Unsupported("no cgroup1 blkio hierarchy".to_string());
                };
                for (file, v) in [
                    ("blkio.throttle.read_bps_device", rbps),
                    ("blkio.throttle.write_bps_device", wbps),
                ] {
                    let r = write_applied(
                        &d.join(file),
                        &format!("{devnr} {}", v.unwrap_or(0)),
                        Applied::Done,
                    );
                    if r != Applied::Done {
                        return r;
                    }
                }
                Applied::Done
            }
            BackendKind::None => not_in("io.max"),
        }
    }

    /// Current cumulative counters; those the backend cannot provide are
    /// `None`.
    pub fn stat(&self) -> CgStat {
        let mut st = CgStat::default();
        let cpu_v2 = self
            .v2
            .iter()
            .chain(self.psi.iter())
            .find_map(|d| fs::read_to_string(d.join("cpu.stat")).ok());
        if let Some(d) = self.v1.get("cpuacct") {
            st.cpu_usage = read_u64(&d.join("cpuacct.usage"))
                .ok()
                .map(|ns| ns as f64 / 1e9);
            st.cpu_sys = fs::read_to_string(d.join("cpuacct.stat"))
                .ok()
                .and_then(|t| parse_flat_keyed(&t).get("system").copied())
                .map(|ticks| ticks as f64 / clk_tck());
        }
        if st.cpu_usage.is_none()
            && let Some(t) = cpu_v2
        {
            let kv = parse_flat_keyed(&t);
            st.cpu_usage = kv.get("usage_usec").map(|v| *v as f64 / 1e6);
            st.cpu_sys = kv.get("system_usec").map(|v| *v as f64 / 1e6);
        }
        st.mem_bytes = match (&self.v2, self.v1.get("memory")) {
            (Some(d), _) => read_u64(&d.join("memory.current")).ok(),
            (None, Some(d)) => read_u64(&d.join("memory.usage_in_bytes")).ok(),
            _ => None,
        };
        let io = match (&self.v2, self.v1.get("blkio")) {
            (Some(d), _) => fs::read_to_string(d.join("io.stat")).ok().map(|t| {
                let s = parse_io_stat_full(&t);
                st.io_cost_usage = s.cost_usage_us.map(|us| us as f64 / 1e6);
                (s.rbytes, s.wbytes)
            }),
            (None, Some(d)) => [
                "blkio.throttle.io_service_bytes_recursive",
                "blkio.io_service_bytes_recursive",
                "blkio.bfq.io_service_bytes_recursive",
                "blkio.throttle.io_service_bytes",
                "blkio.io_service_bytes",
            ]
            .iter()
            .find_map(|f| fs::read_to_string(d.join(f)).ok())
            .map(|t| parse_blkio_bytes(&t)),
            _ => None,
        };
        if let Some((r, w)) = io {
            st.io_rbytes = Some(r);
            st.io_wbytes = Some(w);
        }
        st.psi = self
            .v2
            .iter()
            .chain(self.psi.iter())
            .find_map(|d| read_psi(d, ".pressure"));
        st
    }

    /// Sends SIGKILL to every process in the cgroup, repeating until it is
    /// empty or 2 s have passed.
    pub fn kill_all(&self) {
        if let Some(d) = &self.v2 {
            // cgroup.kill (Linux 5.14+) kills atomically, forks included.
            let _ = write_existing(&d.join("cgroup.kill"), "1");
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let pids = self.pids();
            if pids.is_empty() || Instant::now() >= deadline {
                break;
            }
            for pid in pids {
                if let Ok(p) = libc::pid_t::try_from(pid) {
                    // SAFETY: kill(2) has no memory-safety preconditions.
                    unsafe {
                        libc::kill(p, libc::SIGKILL);
                    }
                }
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// OOM kills in this cgroup: cgroup2 `memory.events` `oom_kill`, cgroup1
    /// `memory.oom_control` `oom_kill`; `None` when unknown.
    pub fn oom_kills(&self) -> Option<u64> {
        let (dir, file) = match (&self.v2, self.v1.get("memory")) {
            (Some(d), _) => (d, "memory.events"),
            (None, Some(d)) => (d, "memory.oom_control"),
            _ => return None,
        };
        let text = fs::read_to_string(dir.join(file)).ok()?;
        parse_flat_keyed(&text).get("oom_kill").copied()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let roots: BTreeSet<&PathBuf> = self.dirs().into_iter().collect();
        for dir in roots {
            remove_tree(dir);
        }
        // Then the ancestors this handle made, innermost first; rmdir fails
        // (harmlessly) while another cgroup still lives under one.
        for dir in self.created.iter().rev() {
            if dir.exists() {
                let _ = fs::remove_dir(dir);
            }
        }
    }
}

fn read_pids(dir: &Path) -> Vec<u32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| {
            t.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes a cgroup directory and its sub-cgroups, children first, moving
/// remaining processes to the parent (or, when the parent refuses as
/// cgroup2's no-internal-process rule may make it, to the topmost ancestor
/// holding a `cgroup.procs`). Errors are ignored.
fn remove_tree(dir: &Path) {
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                remove_tree(&e.path());
            }
        }
    }
    let pids = read_pids(dir);
    if !pids.is_empty() {
        let top = dir
            .ancestors()
            .skip(1)
            .take_while(|a| a.join("cgroup.procs").exists())
            .last();
        for pid in pids {
            let s = pid.to_string();
            let moved = dir
                .parent()
                .is_some_and(|p| write_existing(&p.join("cgroup.procs"), &s).is_ok());
            if !moved && let Some(t) = top {
                let _ = write_existing(&t.join("cgroup.procs"), &s);
            }
        }
    }
    // Exiting tasks may keep the cgroup busy for a while (a hashd freeing
    // gigabytes on a loaded host): up to 5 s.
    for _ in 0..250 {
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                thread::sleep(Duration::from_millis(20));
            }
            Err(_) => return,
        }
    }
}

fn clamped_result(what: &str, asked: u32, used: u32) -> Applied {
    if asked == used {
        Applied::Done
    } else {
        Applied::Degraded(format!("{what} {asked} out of range, clamped to {used}"))
    }
}

fn limit_v2(bytes: u64) -> String {
    if bytes == u64::MAX {
        "max".to_string()
    } else {
        bytes.to_string()
    }
}

fn limit_v1(bytes: u64) -> String {
    if bytes == u64::MAX {
        "-1".to_string()
    } else {
        bytes.to_string()
    }
}

/// `sysconf(_SC_CLK_TCK)`, the unit of cpuacct.stat and /proc/stat.
fn clk_tck() -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// Cumulative counters of a cgroup (or of the whole system).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CgStat {
    /// CPU time in seconds (cgroup2 `cpu.stat` usage_usec; cgroup1
    /// `cpuacct.usage`).
    pub cpu_usage: Option<f64>,
    /// System CPU time in seconds (cgroup2 system_usec; cgroup1
    /// `cpuacct.stat` system ticks).
    pub cpu_sys: Option<f64>,
    /// Memory charged (cgroup2 `memory.current`; cgroup1
    /// `memory.usage_in_bytes`).
    pub mem_bytes: Option<u64>,
    /// Bytes read, summed over devices.
    pub io_rbytes: Option<u64>,
    /// Bytes written, summed over devices.
    pub io_wbytes: Option<u64>,
    /// iocost's cumulative IO usage in seconds (cgroup2 io.stat
    /// `cost.usage`, µs, summed over devices); `None` where io.cost is off
    /// or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_cost_usage: Option<f64>,
    /// iocost's vrate in percent (`cost.vrate` of the root's io.stat, the
    /// first device that has one); `None` elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_cost_vrate: Option<f64>,
    /// Pressure stall totals.
    pub psi: Option<Psi>,
}

/// Cumulative pressure stall time in seconds (the `total=` fields).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Psi {
    /// Time some tasks stalled on CPU.
    pub cpu_some: f64,
    /// Time some tasks stalled on memory.
    pub mem_some: f64,
    /// Time all non-idle tasks stalled on memory.
    pub mem_full: f64,
    /// Time some tasks stalled on IO.
    pub io_some: f64,
    /// Time all non-idle tasks stalled on IO.
    pub io_full: f64,
}

/// Parses "key value" lines (cpu.stat, memory.events, memory.oom_control,
/// cpuacct.stat); lines that do not fit are skipped.
fn parse_flat_keyed(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let k = it.next()?;
            let v = it.next()?.parse().ok()?;
            Some((k.to_string(), v))
        })
        .collect()
}

/// Parses a pressure file: the `total=` of the `some` and `full` lines, in
/// seconds.
fn parse_pressure(text: &str) -> (f64, f64) {
    let mut some = 0.0;
    let mut full = 0.0;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let kind = it.next();
        let total = it
            .find_map(|f| f.strip_prefix("total="))
            .and_then(|v| v.parse::<u64>().ok());
        match (kind, total) {
            (Some("some"), Some(t)) => some = t as f64 / 1e6,
            (Some("full"), Some(t)) => full = t as f64 / 1e6,
            _ => {}
        }
    }
    (some, full)
}

/// Reads `{cpu,memory,io}{suffix}` in `dir`; `None` without a memory file.
fn read_psi(dir: &Path, suffix: &str) -> Option<Psi> {
    let read = |name: &str| fs::read_to_string(dir.join(format!("{name}{suffix}"))).ok();
    let (mem_some, mem_full) = parse_pressure(&read("memory")?);
    let (cpu_some, _) = read("cpu").map(|t| parse_pressure(&t)).unwrap_or_default();
    let (io_some, io_full) = read("io").map(|t| parse_pressure(&t)).unwrap_or_default();
    Some(Psi {
        cpu_some,
        mem_some,
        mem_full,
        io_some,
        io_full,
    })
}

/// Sums `rbytes=` and `wbytes=` over the devices of a cgroup2 io.stat.
/// What a cgroup2 io.stat holds, summed over its device lines.
#[derive(Debug, Clone, Default, PartialEq)]
struct IoStatSums {
    rbytes: u64,
    wbytes: u64,
    /// `cost.usage` (µs) summed over the lines that have one.
    cost_usage_us: Option<u64>,
    /// The first `cost.vrate` (percent), only in the root's io.stat.
    cost_vrate: Option<f64>,
}

fn parse_io_stat_full(text: &str) -> IoStatSums {
    let mut s = IoStatSums::default();
    for field in text.split_whitespace() {
        let Some((k, v)) = field.split_once('=') else {
            continue;
        };
        match k {
            "rbytes" => s.rbytes = s.rbytes.saturating_add(v.parse().unwrap_or(0)),
            "wbytes" => s.wbytes = s.wbytes.saturating_add(v.parse().unwrap_or(0)),
            "cost.usage" => {
                if let Ok(us) = v.parse::<u64>() {
                    s.cost_usage_us = Some(s.cost_usage_us.unwrap_or(0).saturating_add(us));
                }
            }
            "cost.vrate" if s.cost_vrate.is_none() => {
                s.cost_vrate = v.parse::<f64>().ok().filter(|x| x.is_finite());
            }
            _ => {}
        }
    }
    s
}

/// Sums the `MAJ:MIN Read N` and `MAJ:MIN Write N` lines of a cgroup1
/// blkio bytes file (the `Total` line is skipped).
fn parse_blkio_bytes(text: &str) -> (u64, u64) {
    let (mut r, mut w) = (0u64, 0u64);
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let [dev, op, v] = f[..]
            && dev.contains(':')
            && let Ok(v) = v.parse::<u64>()
        {
            match op {
                "Read" => r = r.saturating_add(v),
                "Write" => w = w.saturating_add(v),
                _ => {}
            }
        }
    }
    (r, w)
}

/// Seconds of busy and of system CPU time of the whole machine from a
/// /proc/stat text (`hz` ticks per second).
fn parse_proc_stat_cpu(text: &str, hz: f64) -> Option<(f64, f64)> {
    let all = harness::machine::parse_proc_stat(text).remove("all")?;
    Some((all.busy() as f64 / hz, all.system() as f64 / hz))
}

/// MemTotal - MemAvailable from /proc/meminfo, in bytes.
fn parse_meminfo_used(text: &str) -> Option<u64> {
    let kv = harness::machine::parse_meminfo(text);
    Some(kv.get("MemTotal")?.saturating_sub(*kv.get("MemAvailable")?))
}

/// A whole, non-stacked, non-virtual disk: listed in /sys/block, not a
/// loop/ram/zram device, and not built on other devices (dm, md).
fn is_whole_disk(name: &str) -> bool {
    if ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)) {
        return false;
    }
    let dir = Path::new("/sys/block").join(name);
    if !dir.exists() {
        return false;
    }
    fs::read_dir(dir.join("slaves"))
        .map(|mut rd| rd.next().is_none())
        .unwrap_or(true)
}

/// Sums bytes read and written (sectors × 512) over the devices of a
/// /proc/diskstats text for which `whole` holds.
fn parse_diskstats(text: &str, whole: impl Fn(&str) -> bool) -> (u64, u64) {
    super::disk_lines(text)
        .filter(|d| whole(&d.name))
        .fold((0u64, 0u64), |(r, w), d| {
            (
                r.saturating_add(d.sectors_read.saturating_mul(512)),
                w.saturating_add(d.sectors_written.saturating_mul(512)),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn touch(dir: &Path, name: &str, content: &str) {
        fs::write(dir.join(name), content).unwrap();
    }

    fn read(dir: &Path, name: &str) -> String {
        fs::read_to_string(dir.join(name)).unwrap()
    }

    /// The trees of dead runs (`rackbench-<pid>` with no such process) go,
    /// with what is under them; a live pid's tree and other names stay.
    #[test]
    fn stale_run_trees_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        let dead = mem.join("rackbench-4194305/hashd-params");
        let live = mem.join(format!("rackbench-{}/w", std::process::id()));
        let other = mem.join("rackbench-notapid");
        for d in [&dead, &live, &other] {
            fs::create_dir_all(d).unwrap();
        }
        // 4194305 is above Linux's largest pid_max (2^22): never alive.
        let cg = Cgroups::with_roots(
            BackendKind::Cgroup1,
            None,
            BTreeMap::from([("memory".to_string(), mem.clone())]),
            None,
        );
        cg.remove_stale();
        assert!(!mem.join("rackbench-4194305").exists());
        assert!(live.exists() && other.exists());
    }

    /// A fake cgroup2 tree: `root` and `root/t/a` with stat files.
    fn fake_v2() -> (tempfile::TempDir, Cgroups) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("v2");
        fs::create_dir_all(root.join("t/a")).unwrap();
        touch(&root, "cgroup.controllers", "cpuset cpu io memory pids\n");
        touch(&root, "cgroup.subtree_control", "");
        touch(&root.join("t"), "cgroup.controllers", "cpu io memory\n");
        touch(&root.join("t"), "cgroup.subtree_control", "");
        let a = root.join("t/a");
        for f in [
            "cgroup.procs",
            "memory.low",
            "memory.max",
            "memory.high",
            "cpu.weight",
            "io.weight",
            "io.max",
        ] {
            touch(&a, f, "");
        }
        touch(
            &a,
            "cpu.stat",
            "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 0\n",
        );
        touch(&a, "memory.current", "1048576\n");
        touch(
            &a,
            "io.stat",
            "254:0 rbytes=1000 wbytes=2000 rios=1 wios=2 dbytes=0 dios=0\n8:0 rbytes=10 wbytes=20 rios=1 wios=1 dbytes=0 dios=0 cost.usage=5\n",
        );
        touch(
            &a,
            "memory.pressure",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=500000\n",
        );
        touch(
            &a,
            "cpu.pressure",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=3000000\n",
        );
        touch(
            &a,
            "io.pressure",
            "some avg10=1.00 avg60=0.00 avg300=0.00 total=4000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=2000000\n",
        );
        touch(
            &a,
            "memory.events",
            "low 0\nhigh 3\nmax 1\noom 2\noom_kill 2\n",
        );
        let cgs = Cgroups::with_roots(
            BackendKind::Cgroup2,
            Some(root.clone()),
            BTreeMap::new(),
            Some(root),
        );
        (tmp, cgs)
    }

    /// A fake cgroup1 layout with cpu,cpuacct co-mounted, plus a separate
    /// PSI hierarchy.
    fn fake_v1(with_bfq: bool) -> (tempfile::TempDir, Cgroups) {
        let tmp = tempfile::tempdir().unwrap();
        let mut roots = BTreeMap::new();
        let cpu = tmp.path().join("cpu,cpuacct");
        for (ctrl, dir) in [
            ("memory", tmp.path().join("memory")),
            ("cpu", cpu.clone()),
            ("cpuacct", cpu.clone()),
            ("blkio", tmp.path().join("blkio")),
        ] {
            fs::create_dir_all(dir.join("t/a")).unwrap();
            touch(&dir.join("t/a"), "cgroup.procs", "");
            roots.insert(ctrl.to_string(), dir);
        }
        let psi = tmp.path().join("unified");
        fs::create_dir_all(psi.join("t/a")).unwrap();
        touch(&psi.join("t/a"), "cgroup.procs", "");
        touch(
            &psi.join("t/a"),
            "memory.pressure",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=2000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n",
        );
        touch(
            &psi.join("t/a"),
            "cpu.stat",
            "usage_usec 9000000\nsystem_usec 1000000\n",
        );
        let mem = tmp.path().join("memory/t/a");
        for f in ["memory.limit_in_bytes", "memory.soft_limit_in_bytes"] {
            touch(&mem, f, "9223372036854771712\n");
        }
        touch(&mem, "memory.usage_in_bytes", "4096\n");
        touch(
            &mem,
            "memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n",
        );
        touch(&cpu.join("t/a"), "cpu.shares", "1024\n");
        touch(&cpu.join("t/a"), "cpuacct.usage", "1500000000\n");
        touch(
            &cpu.join("t/a"),
            "cpuacct.stat",
            &format!("user 100\nsystem {}\n", clk_tck() as u64 * 2),
        );
        let blk = tmp.path().join("blkio/t/a");
        touch(
            &blk,
            "blkio.throttle.io_service_bytes_recursive",
            "254:0 Read 4096\n254:0 Write 8192\n254:0 Sync 0\n254:0 Async 12288\n254:0 Discard 0\n254:0 Total 12288\n7:0 Read 100\n7:0 Write 0\nTotal 12388\n",
        );
        if with_bfq {
            touch(&blk, "blkio.bfq.weight", "100\n");
        }
        touch(&blk, "blkio.throttle.read_bps_device", "");
        touch(&blk, "blkio.throttle.write_bps_device", "");
        let cgs = Cgroups::with_roots(BackendKind::Cgroup1, None, roots, Some(psi));
        (tmp, cgs)
    }

    #[test]
    fn v2_stats_parse() {
        let (_tmp, cgs) = fake_v2();
        let cg = cgs.create("t/a").unwrap();
        let st = cg.stat();
        assert_eq!(st.cpu_usage, Some(2.5));
        assert_eq!(st.cpu_sys, Some(0.5));
        assert_eq!(st.mem_bytes, Some(1 << 20));
        assert_eq!((st.io_rbytes, st.io_wbytes), (Some(1010), Some(2020)));
        assert_eq!(
            st.psi,
            Some(Psi {
                cpu_some: 3.0,
                mem_some: 1.5,
                mem_full: 0.5,
                io_some: 4.0,
                io_full: 2.0
            })
        );
        assert_eq!(cg.oom_kills(), Some(2));
    }

    #[test]
    fn v2_create_enables_controllers_and_sets_controls() {
        let (tmp, cgs) = fake_v2();
        let cg = cgs.create("t/a").unwrap();
        let root = tmp.path().join("v2");
        // Writes to fake files replace them; each ancestor got the last one.
        assert_eq!(read(&root, "cgroup.subtree_control"), "+io");
        assert_eq!(read(&root.join("t"), "cgroup.subtree_control"), "+io");
        let a = root.join("t/a");
        assert_eq!(cg.set_mem_low(1 << 30), Applied::Done);
        assert_eq!(read(&a, "memory.low"), "1073741824");
        assert_eq!(cg.set_mem_max(u64::MAX), Applied::Done);
        assert_eq!(read(&a, "memory.max"), "max");
        assert_eq!(cg.set_mem_high(123), Applied::Done);
        assert_eq!(read(&a, "memory.high"), "123");
        assert_eq!(cg.set_cpu_weight(250), Applied::Done);
        assert_eq!(read(&a, "cpu.weight"), "250");
        assert!(matches!(cg.set_cpu_weight(0), Applied::Degraded(_)));
        assert_eq!(read(&a, "cpu.weight"), "1");
        assert_eq!(cg.set_io_weight(50), Applied::Done);
        assert_eq!(read(&a, "io.weight"), "default 50");
        assert_eq!(cg.set_io_max("254:0", Some(1 << 20), None), Applied::Done);
        assert_eq!(read(&a, "io.max"), "254:0 rbps=1048576 wbps=max");
        cg.add_pid(4321).unwrap();
        assert_eq!(read(&a, "cgroup.procs"), "4321");
        assert_eq!(cg.pids(), vec![4321]);
        fs::remove_file(a.join("io.weight")).unwrap();
        assert!(matches!(cg.set_io_weight(50), Applied::Unsupported(m) if m.contains("io.weight")));
    }

    #[test]
    fn v1_stats_parse() {
        let (_tmp, cgs) = fake_v1(true);
        let cg = cgs.create("t/a").unwrap();
        let st = cg.stat();
        assert_eq!(st.cpu_usage, Some(1.5));
        assert_eq!(st.cpu_sys, Some(2.0));
        assert_eq!(st.mem_bytes, Some(4096));
        assert_eq!((st.io_rbytes, st.io_wbytes), (Some(4196), Some(8192)));
        let psi = st.psi.unwrap();
        assert_eq!((psi.mem_some, psi.mem_full, psi.cpu_some), (2.0, 1.0, 0.0));
        assert_eq!(cg.oom_kills(), Some(7));
    }

    #[test]
    fn v1_controls() {
        let (tmp, cgs) = fake_v1(true);
        let cg = cgs.create("t/a").unwrap();
        let mem = tmp.path().join("memory/t/a");
        assert!(matches!(cg.set_mem_low(1), Applied::Unsupported(_)));
        assert_eq!(cg.set_mem_max(256 << 20), Applied::Done);
        assert_eq!(read(&mem, "memory.limit_in_bytes"), "268435456");
        assert_eq!(cg.set_mem_max(u64::MAX), Applied::Done);
        assert_eq!(read(&mem, "memory.limit_in_bytes"), "-1");
        assert!(
            matches!(cg.set_mem_high(1 << 20), Applied::Degraded(m) if m.contains("soft_limit_in_bytes only applies under global pressure"))
        );
        assert_eq!(read(&mem, "memory.soft_limit_in_bytes"), "1048576");
        assert_eq!(cg.set_cpu_weight(50), Applied::Done);
        assert_eq!(
            read(&tmp.path().join("cpu,cpuacct/t/a"), "cpu.shares"),
            "512"
        );
        assert_eq!(cg.set_io_weight(300), Applied::Done);
        assert_eq!(
            read(&tmp.path().join("blkio/t/a"), "blkio.bfq.weight"),
            "300"
        );
        assert_eq!(cg.set_io_max("254:0", None, Some(2 << 20)), Applied::Done);
        let blk = tmp.path().join("blkio/t/a");
        assert_eq!(read(&blk, "blkio.throttle.read_bps_device"), "254:0 0");
        assert_eq!(
            read(&blk, "blkio.throttle.write_bps_device"),
            "254:0 2097152"
        );
        cg.add_pid(77).unwrap();
        for d in ["memory", "cpu,cpuacct", "blkio", "unified"] {
            assert_eq!(
                read(&tmp.path().join(d).join("t/a"), "cgroup.procs"),
                "77",
                "{d}"
            );
        }
        assert_eq!(cg.pids(), vec![77]);

        let (_tmp, cgs) = fake_v1(false);
        let cg = cgs.create("t/a").unwrap();
        assert!(matches!(cg.set_io_weight(100), Applied::Unsupported(m) if m.contains("BFQ")));
    }

    #[test]
    fn none_backend_is_unsupported() {
        let cgs = Cgroups::with_roots(BackendKind::None, None, BTreeMap::new(), None);
        assert!(!cgs.psi_available());
        assert_eq!(
            cgs.limitations(),
            vec!["no cgroups: nothing is isolated, only whole-system stats"]
        );
        let cg = cgs.create("x/y").unwrap();
        assert!(matches!(cg.set_mem_max(1), Applied::Unsupported(_)));
        assert!(matches!(cg.set_cpu_weight(100), Applied::Unsupported(_)));
        assert!(cg.add_pid(1).is_err());
        assert_eq!(cg.stat(), CgStat::default());
        assert_eq!(cg.oom_kills(), None);
        assert!(cgs.create("../x").is_err());
        assert!(cgs.create("/abs").is_err());
    }

    #[test]
    fn limitations_describe_v1() {
        let (_tmp, cgs) = fake_v1(false);
        let l = cgs.limitations();
        assert!(
            l.iter()
                .any(|s| s.starts_with("memory.low: no memory protection in cgroup1"))
        );
        assert!(
            l.iter()
                .any(|s| s == "io.weight: blkio.weight needs the BFQ scheduler, not available")
        );
        assert!(l.iter().any(|s| s == "io.cost: needs cgroup2"));
    }

    #[test]
    fn create_reuses_and_drop_removes_created_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        fs::create_dir(root.join("keep")).unwrap();
        let mut roots = BTreeMap::new();
        roots.insert("memory".to_string(), root.clone());
        let cgs = Cgroups::with_roots(BackendKind::Cgroup1, None, roots, None);
        let cg = cgs.create("keep/new/leaf").unwrap();
        assert!(root.join("keep/new/leaf").is_dir());
        drop(cg);
        assert!(!root.join("keep/new").exists());
        assert!(
            root.join("keep").is_dir(),
            "a pre-existing dir is left alone"
        );
    }

    #[test]
    fn flat_and_misc_parsers() {
        assert_eq!(parse_pressure("garbage\n"), (0.0, 0.0));
        assert_eq!(parse_io_stat_full(""), IoStatSums::default());
        // A 6.1 root with iocost on (the guest's): vrate and usage read.
        let root = "254:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0 cost.vrate=87.50 cost.usage=1500 cost.wait=0 cost.indebt=0 cost.indelay=0\n7:0 rbytes=1 wbytes=1 rios=1 wios=1 dbytes=0 dios=0\n";
        let s = parse_io_stat_full(root);
        assert_eq!((s.rbytes, s.wbytes), (4097, 8193));
        assert_eq!(s.cost_usage_us, Some(1500));
        assert_eq!(s.cost_vrate, Some(87.5));
        let plain = parse_io_stat_full("254:0 rbytes=1 wbytes=2 rios=1 wios=1\n");
        assert_eq!((plain.cost_usage_us, plain.cost_vrate), (None, None));
        assert_eq!(parse_blkio_bytes("Total 0\n"), (0, 0));
        let ps = "cpu  100 20 30 1000 50 6 4 2 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(parse_proc_stat_cpu(ps, 100.0), Some((1.62, 0.3)));
        let mi = "MemTotal:       1000 kB\nMemFree: 10 kB\nMemAvailable:    400 kB\n";
        assert_eq!(parse_meminfo_used(mi), Some(600 * 1024));
        let ds = "   7       0 loop0 1 0 8 0 1 0 8 0 0 0 0\n 254 0 vda 1 0 10 0 1 0 20 0 0 0 0\n 254 1 vda1 1 0 10 0 1 0 20 0 0 0 0\n";
        assert_eq!(parse_diskstats(ds, |n| n == "vda"), (5120, 10240));
    }

    #[test]
    fn scan_finds_v1_and_psi() {
        let tmp = tempfile::tempdir().unwrap();
        let (mem, cpu, uni) = (
            tmp.path().join("memory"),
            tmp.path().join("cpu"),
            tmp.path().join("unified"),
        );
        for d in [&mem, &cpu, &uni] {
            fs::create_dir(d).unwrap();
        }
        touch(&uni, "cgroup.controllers", "");
        touch(&uni, "memory.pressure", "some total=0\n");
        let text = format!(
            "32 31 0:29 / {} rw,relatime - cgroup cgroup rw,cpu\n35 31 0:32 / {} rw - cgroup cgroup rw,memory\n41 31 0:38 / {} rw - cgroup2 cgroup2 rw\n",
            cpu.display(),
            mem.display(),
            uni.display()
        );
        let found = scan_mounts(&super::super::parse_mountinfo(&text));
        assert!(found.v2_usable.is_none());
        assert!(
            found
                .v2_why_not
                .as_deref()
                .unwrap_or("")
                .contains("expected memory and cpu")
        );
        let cgs = Cgroups::from_found(found, None).unwrap();
        assert_eq!(cgs.kind(), BackendKind::Cgroup1);
        assert!(cgs.psi_available());
        assert_eq!(cgs.v1_root("memory"), Some(mem.as_path()));

        let scan = || scan_mounts(&super::super::parse_mountinfo(&text));
        let e = Cgroups::from_found(scan(), Some(BackendKind::Cgroup2)).unwrap_err();
        assert!(e.contains(BACKEND_ENV), "{e}");
        let forced = Cgroups::from_found(scan(), Some(BackendKind::None)).unwrap();
        assert_eq!(forced.kind(), BackendKind::None);
        assert!(!forced.psi_available());
        let forced = Cgroups::from_found(scan(), Some(BackendKind::Cgroup1)).unwrap();
        assert_eq!(forced.kind(), BackendKind::Cgroup1);

        // Without a writable v1 memory hierarchy there is no backend.
        let only_cpu = format!("32 31 0:29 / {} rw - cgroup cgroup rw,cpu\n", cpu.display());
        let found = scan_mounts(&super::super::parse_mountinfo(&only_cpu));
        assert!(Cgroups::from_found(found, Some(BackendKind::Cgroup1)).is_err());
        let found = scan_mounts(&super::super::parse_mountinfo(&only_cpu));
        assert_eq!(
            Cgroups::from_found(found, None).unwrap().kind(),
            BackendKind::None
        );
    }

    /// Whether the real-host test can run; otherwise why not.
    fn real_host_skip_reason() -> Option<String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Some("not root".to_string());
        }
        let mounts = match super::super::read_mounts() {
            Ok(m) => m,
            Err(e) => return Some(e.to_string()),
        };
        let found = scan_mounts(&mounts);
        if !found.v1.contains_key("memory") {
            return Some("no writable cgroup1 memory hierarchy".to_string());
        }
        None
    }

    #[test]
    fn real_host_cgroup1() {
        if let Some(why) = real_host_skip_reason() {
            testenv::skip("cgroup", &why);
            return;
        }
        let cgs = Cgroups::probe().unwrap();
        if std::env::var(BACKEND_ENV).is_err() {
            let found = scan_mounts(&super::super::read_mounts().unwrap());
            if found.v2_usable.is_none() {
                assert_eq!(cgs.kind(), BackendKind::Cgroup1);
                assert_eq!(cgs.psi_available(), found.psi.is_some());
            }
        }
        eprintln!(
            "backend {:?}, limitations: {:#?}",
            cgs.kind(),
            cgs.limitations()
        );
        if cgs.kind() == BackendKind::None {
            testenv::skip("cgroup", &format!("{BACKEND_ENV} forces no cgroups"));
            return;
        }
        let top = format!("rackbench-test-{}", std::process::id());
        let rel = format!("{top}/a");
        let mem_root = cgs.v1_root("memory").map(Path::to_path_buf);
        let cg = cgs.create(&rel).unwrap();
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        cg.add_pid(child.id()).unwrap();
        assert!(cg.pids().contains(&child.id()));
        if cgs.kind() == BackendKind::Cgroup1 {
            assert!(cgs.psi_available());
            let mem_dir = mem_root.clone().unwrap().join(&rel);
            let procs = fs::read_to_string(mem_dir.join("cgroup.procs")).unwrap();
            assert!(
                procs.lines().any(|l| l == child.id().to_string()),
                "{procs}"
            );
            assert_eq!(cg.set_mem_max(256 << 20), Applied::Done);
            assert_eq!(
                read_u64(&mem_dir.join("memory.limit_in_bytes")).unwrap(),
                256 << 20
            );
            // A write limit on a whole disk, read back from blkio.
            let disk = fs::read_dir("/sys/block").ok().and_then(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| !e.file_name().to_string_lossy().starts_with("loop"))
                    .find_map(|e| fs::read_to_string(e.path().join("dev")).ok())
            });
            if let (Some(dev), Some(blk)) = (disk, cgs.v1_root("blkio")) {
                let dev = dev.trim();
                assert_eq!(cg.set_io_max(dev, None, Some(50 << 20)), Applied::Done);
                let w = fs::read_to_string(blk.join(&rel).join("blkio.throttle.write_bps_device"))
                    .unwrap();
                assert!(w.contains(&format!("{dev} {}", 50u64 << 20)), "{w}");
            }
        }
        let st = cg.stat();
        eprintln!("{st:?}");
        assert!(
            st.cpu_usage.is_some() && st.mem_bytes.is_some() && st.psi.is_some(),
            "{st:?}"
        );
        let root = cgs.root_stat();
        eprintln!("root: {root:?}");
        assert!(root.cpu_usage.is_some() && root.mem_bytes.is_some() && root.io_rbytes.is_some());
        cg.kill_all();
        let _ = child.wait();
        assert!(cg.pids().is_empty());
        drop(cg);
        if let Some(m) = mem_root {
            assert!(!m.join(&top).exists());
        }
        if let Some(p) = cgs.psi_root() {
            assert!(!p.join(&top).exists());
        }
    }
}
