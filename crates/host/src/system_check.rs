//! `rackbench system_check`: the machine settings that change what these
//! benchmarks measure, each reported as pass or warn with what was found and
//! what is advised.
//!
//! The checks follow benchpress' `system_check` where it applies to a Linux
//! host without root tools (Kernel Version, SELinux Status, Open Files
//! Limit, THP Status, NUMA Nodes, CXL, Boost Status, SMT, BIOS Version and
//! Release Date), plus the CPU frequency governor, swap and cgroups. Every
//! file is read under a root directory (`/` on a real machine) so tests can
//! fake /sys and /proc. Nothing here fails the command: a setting that cannot
//! be read is reported as such.

use procfs_core::FromBufRead;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// The check's name (benchpress' where it has one, e.g. "THP Status").
    pub name: &'static str,
    pub status: Status,
    /// What was found on the machine.
    pub found: String,
    /// What to do about it ("none" when nothing).
    pub advice: String,
}

impl Check {
    fn new(
        name: &'static str,
        status: Status,
        found: impl Into<String>,
        advice: impl Into<String>,
    ) -> Self {
        Check {
            name,
            status,
            found: found.into(),
            advice: advice.into(),
        }
    }

    /// The one-line form: `pass  NAME: FOUND; advice: ADVICE`.
    pub fn line(&self) -> String {
        format!(
            "{}  {}: {}; advice: {}",
            self.status.as_str(),
            self.name,
            self.found,
            self.advice
        )
    }
}

const NONE: &str = "none";

/// The machine under `root` (`/` for this machine).
struct Root(PathBuf);

impl Root {
    fn path(&self, p: &str) -> PathBuf {
        self.0.join(p.trim_start_matches('/'))
    }
    /// A file's trimmed text, or None when it cannot be read.
    fn read(&self, p: &str) -> Option<String> {
        std::fs::read_to_string(self.path(p))
            .ok()
            .map(|s| s.trim().to_string())
    }
    /// The names of the entries of a folder that match `keep`, sorted.
    fn entries(&self, p: &str, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path(p))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| keep(n))
                    .collect()
            })
            .unwrap_or_default();
        v.sort_by_key(|n| numeric_suffix(n));
        v
    }
}

fn numeric_suffix(name: &str) -> (u64, String) {
    let digits: String = name.chars().filter(|c| c.is_ascii_digit()).collect();
    (digits.parse().unwrap_or(0), name.to_string())
}

/// `cpuN` folder names.
fn is_cpu_dir(n: &str) -> bool {
    n.strip_prefix("cpu")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Runs every check on the machine under `root`.
pub fn run(root: &Path) -> Vec<Check> {
    let r = Root(root.to_path_buf());
    vec![
        kernel_version(&r),
        selinux(&r),
        open_files(&r),
        thp(&r),
        governor(&r),
        boost(&r),
        smt(&r),
        numa(&r),
        cxl(&r),
        swap(&r),
        cgroups(&r),
        bios(&r, "BIOS Version", "bios_version"),
        bios(&r, "BIOS Release Date", "bios_date"),
    ]
}

fn kernel_version(r: &Root) -> Check {
    match r.read("/proc/sys/kernel/osrelease") {
        Some(v) => Check::new("Kernel Version", Status::Pass, v, NONE),
        None => Check::new(
            "Kernel Version",
            Status::Warn,
            "/proc/sys/kernel/osrelease unreadable",
            "is /proc mounted?",
        ),
    }
}

fn selinux(r: &Root) -> Check {
    const N: &str = "SELinux Status";
    match r.read("/sys/fs/selinux/enforce").as_deref() {
        None => Check::new(N, Status::Pass, "Disabled", NONE),
        Some("0") => Check::new(
            N,
            Status::Warn,
            "Permissive",
            "disable SELinux for benchmark runs (benchpress flags anything but Disabled)",
        ),
        Some(v) => Check::new(
            N,
            Status::Warn,
            format!("Enforcing (enforce={v})"),
            "disable SELinux for benchmark runs (benchpress flags anything but Disabled)",
        ),
    }
}

/// The soft "Max open files" of /proc/self/limits: Some(None) for unlimited.
pub fn parse_open_files(limits: &str) -> Option<Option<u64>> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        return Some(None);
    }
    soft.parse().ok().map(Some)
}

fn open_files(r: &Root) -> Check {
    const N: &str = "Open Files Limit";
    let advice = "raise it to at least 65535 (ulimit -n 65535, or LimitNOFILE= for a service): servers and load generators hold many connections";
    match r
        .read("/proc/self/limits")
        .as_deref()
        .and_then(parse_open_files)
    {
        Some(None) => Check::new(N, Status::Pass, "unlimited", NONE),
        Some(Some(n)) if n >= 65535 => Check::new(N, Status::Pass, n.to_string(), NONE),
        Some(Some(n)) => Check::new(N, Status::Warn, format!("{n} (below 65535)"), advice),
        None => Check::new(
            N,
            Status::Warn,
            "/proc/self/limits has no readable 'Max open files'",
            advice,
        ),
    }
}

/// The bracketed choice of a sysfs selector such as `always [madvise] never`.
pub fn selected(text: &str) -> Option<&str> {
    let a = text.find('[')?;
    let b = text[a..].find(']')?;
    Some(&text[a + 1..a + b])
}

fn thp(r: &Root) -> Check {
    const N: &str = "THP Status";
    const P: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
    match r.read(P) {
        None => Check::new(
            N,
            Status::Warn,
            format!("{P} absent (kernel without transparent huge pages)"),
            "compare only with machines that also lack THP",
        ),
        Some(t) => match selected(&t) {
            Some(v @ ("always" | "madvise")) => Check::new(
                N,
                Status::Pass,
                v,
                "keep the same setting on machines you compare: it changes memory-bound results",
            ),
            Some(v) => Check::new(
                N,
                Status::Warn,
                v,
                format!(
                    "THP is off; enable it (echo madvise > {P}) or compare only with machines also at '{v}'"
                ),
            ),
            None => Check::new(
                N,
                Status::Warn,
                format!("cannot read the selection from '{t}'"),
                format!("expected e.g. 'always [madvise] never' in {P}"),
            ),
        },
    }
}

fn governor(r: &Root) -> Check {
    const N: &str = "CPU Governor";
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let cpus = r.entries("/sys/devices/system/cpu", is_cpu_dir);
    for c in &cpus {
        if let Some(g) = r.read(&format!(
            "/sys/devices/system/cpu/{c}/cpufreq/scaling_governor"
        )) {
            *counts.entry(g).or_default() += 1;
        }
    }
    if counts.is_empty() {
        return Check::new(
            N,
            Status::Warn,
            "no cpufreq scaling_governor (no cpufreq driver, e.g. a VM): the frequency policy is the host's or the firmware's",
            "on a VM, ask for a host with a fixed or performance policy; on bare metal load a cpufreq driver",
        );
    }
    let with: usize = counts.values().sum();
    let found = counts
        .iter()
        .map(|(g, n)| format!("{g} on {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let found = format!("{found} of {} CPUs", cpus.len().max(with));
    if counts.len() == 1 && counts.contains_key("performance") {
        Check::new(N, Status::Pass, found, NONE)
    } else {
        Check::new(
            N,
            Status::Warn,
            found,
            "set the performance governor for stable results (cpupower frequency-set -g performance)",
        )
    }
}

fn boost(r: &Root) -> Check {
    const N: &str = "Boost Status";
    let advice = "enable turbo/boost in the BIOS or sysfs (benchpress flags it disabled), or compare only with machines also without it";
    if let Some(v) = r.read("/sys/devices/system/cpu/intel_pstate/no_turbo") {
        return if v == "1" {
            Check::new(
                N,
                Status::Warn,
                "Disabled (intel_pstate no_turbo=1)",
                advice,
            )
        } else {
            Check::new(
                N,
                Status::Pass,
                format!("Enabled (intel_pstate no_turbo={v})"),
                NONE,
            )
        };
    }
    match r.read("/sys/devices/system/cpu/cpufreq/boost") {
        Some(v) if v == "0" => Check::new(N, Status::Warn, "Disabled (cpufreq boost=0)", advice),
        Some(v) => Check::new(
            N,
            Status::Pass,
            format!("Enabled (cpufreq boost={v})"),
            NONE,
        ),
        None => Check::new(
            N,
            Status::Warn,
            "not exposed (no intel_pstate/no_turbo nor cpufreq/boost, e.g. a VM)",
            "turbo is decided by the host or firmware; check it there",
        ),
    }
}

fn smt(r: &Root) -> Check {
    const N: &str = "SMT";
    let advice = "keep it the same on machines you compare: per-thread throughput depends on it";
    if let Some(c) = r.read("/sys/devices/system/cpu/smt/control") {
        let state = match c.as_str() {
            "on" => "Enabled",
            "off" | "forceoff" => "Disabled",
            "notsupported" | "notimplemented" => "Not supported",
            _ => "",
        };
        if !state.is_empty() {
            return Check::new(
                N,
                Status::Pass,
                format!("{state} (smt/control={c})"),
                advice,
            );
        }
    }
    match r.read("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list") {
        Some(s) => {
            let on = s.contains(',') || s.contains('-');
            Check::new(
                N,
                Status::Pass,
                format!(
                    "{} (cpu0 thread siblings {s})",
                    if on { "Enabled" } else { "Disabled" }
                ),
                advice,
            )
        }
        None => Check::new(
            N,
            Status::Warn,
            "cannot tell: no smt/control nor cpu0 thread_siblings_list",
            advice,
        ),
    }
}

fn nodes(r: &Root) -> Vec<String> {
    r.entries("/sys/devices/system/node", |n| {
        n.strip_prefix("node")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    })
}

fn numa(r: &Root) -> Check {
    match nodes(r).len() {
        0 => Check::new(
            "NUMA Nodes",
            Status::Pass,
            "1 (no /sys/devices/system/node)",
            NONE,
        ),
        1 => Check::new("NUMA Nodes", Status::Pass, "1", NONE),
        n => Check::new(
            "NUMA Nodes",
            Status::Pass,
            n.to_string(),
            "pin servers and clients to nodes (numactl) for repeatable results",
        ),
    }
}

fn cxl(r: &Root) -> Check {
    // As benchpress: nodes without CPUs are memory expanders (CXL).
    let memory_only: Vec<String> = nodes(r)
        .into_iter()
        .filter(|n| {
            r.read(&format!("/sys/devices/system/node/{n}/cpulist"))
                .is_some_and(|l| l.is_empty())
        })
        .collect();
    if memory_only.is_empty() {
        Check::new("CXL", Status::Pass, "Not Present", NONE)
    } else {
        Check::new(
            "CXL",
            Status::Pass,
            format!("Present (memory-only nodes: {})", memory_only.join(", ")),
            "bind memory with numactl so runs use the memory you mean to measure",
        )
    }
}

/// The active swap areas of /proc/swaps: (name, size in KiB).
pub fn parse_swaps(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let size = f.get(2)?.parse().ok()?;
            Some((f.first()?.to_string(), size))
        })
        .collect()
}

fn swap(r: &Root) -> Check {
    const N: &str = "Swap";
    match r.read("/proc/swaps") {
        None => Check::new(
            N,
            Status::Warn,
            "/proc/swaps unreadable",
            "is /proc mounted?",
        ),
        Some(t) => {
            let s = parse_swaps(&t);
            if s.is_empty() {
                Check::new(N, Status::Pass, "none active", NONE)
            } else {
                let kib: u64 = s.iter().map(|x| x.1).sum();
                let names: Vec<&str> = s.iter().map(|x| x.0.as_str()).collect();
                Check::new(
                    N,
                    Status::Warn,
                    format!("{} MiB on {}", kib / 1024, names.join(", ")),
                    "swapping during a run changes latencies: swapoff -a for runs, or check that vmstat's si/so stay 0",
                )
            }
        }
    }
}

/// What the mounts and /proc/cgroups say about cgroups.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Cgroups {
    /// Mount points of cgroup2 file systems.
    pub v2: Vec<String>,
    /// Controllers in use by cgroup v1 hierarchies.
    pub v1_controllers: Vec<String>,
    /// The controllers of the first cgroup2 mount (cgroup.controllers).
    pub v2_controllers: Vec<String>,
}

/// Reads cgroup mounts from /proc/mounts and v1 controllers from
/// /proc/cgroups (hierarchy id not 0 and enabled). Text these files do
/// not hold as the kernel writes them is the host's error.
pub fn parse_cgroups(mounts: &str, proc_cgroups: Option<&str>) -> Result<Cgroups, crate::Error> {
    let entries = Vec::<procfs_core::MountEntry>::from_buf_read(mounts.as_bytes())
        .map_err(|e| crate::Error::Host(format!("/proc/mounts: {e}")))?;
    let mut c = Cgroups {
        v2: entries
            .iter()
            .filter(|m| m.fs_vfstype == "cgroup2")
            .map(|m| m.fs_file.clone())
            .collect(),
        ..Cgroups::default()
    };
    let v1_mounted = entries.iter().any(|m| m.fs_vfstype == "cgroup");
    if let (true, Some(t)) = (v1_mounted, proc_cgroups) {
        let ctl = procfs_core::CGroupControllers::from_buf_read(t.as_bytes())
            .map_err(|e| crate::Error::Host(format!("/proc/cgroups: {e}")))?;
        c.v1_controllers = ctl
            .0
            .into_iter()
            .filter(|x| x.enabled && x.hierarchy != 0)
            .map(|x| x.name)
            .collect();
    }
    Ok(c)
}

fn cgroups(r: &Root) -> Check {
    const N: &str = "cgroups";
    let Some(mounts) = r.read("/proc/mounts") else {
        return Check::new(
            N,
            Status::Warn,
            "/proc/mounts unreadable",
            "is /proc mounted?",
        );
    };
    let mut c = match parse_cgroups(&mounts, r.read("/proc/cgroups").as_deref()) {
        Ok(c) => c,
        Err(e) => {
            return Check::new(
                N,
                Status::Warn,
                e.to_string(),
                "cannot tell the cgroup setup",
            );
        }
    };
    if let Some(m) = c.v2.first() {
        c.v2_controllers = r
            .read(&format!("{m}/cgroup.controllers"))
            .map(|t| t.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
    }
    let need = ["cpu", "io", "memory"];
    let missing: Vec<&str> = need
        .iter()
        .copied()
        .filter(|n| !c.v2_controllers.iter().any(|x| x == n))
        .collect();
    let v2 = match c.v2.first() {
        Some(m) => format!(
            "cgroup2 at {m} (controllers: {})",
            c.v2_controllers.join(" ")
        ),
        None => "no cgroup2 mount".to_string(),
    };
    let v1 = if c.v1_controllers.is_empty() {
        String::new()
    } else {
        format!(", cgroup v1 controllers: {}", c.v1_controllers.join(" "))
    };
    let found = format!("{v2}{v1}");
    if c.v2.is_empty() {
        Check::new(
            N,
            Status::Warn,
            found,
            "resctl-bench needs cgroup v2: boot with systemd.unified_cgroup_hierarchy=1",
        )
    } else if !missing.is_empty() {
        Check::new(
            N,
            Status::Warn,
            found,
            format!(
                "resctl-bench needs the cpu, io and memory controllers on cgroup v2; missing: {}",
                missing.join(" ")
            ),
        )
    } else if !c.v1_controllers.is_empty() {
        Check::new(
            N,
            Status::Warn,
            found,
            "hybrid setup: controllers bound to v1 are not available to v2; use the unified hierarchy",
        )
    } else {
        Check::new(N, Status::Pass, found, NONE)
    }
}

fn bios(r: &Root, name: &'static str, file: &str) -> Check {
    match r.read(&format!("/sys/class/dmi/id/{file}")) {
        Some(v) if !v.is_empty() => Check::new(name, Status::Pass, v, NONE),
        _ => Check::new(
            name,
            Status::Pass,
            format!("not exposed (/sys/class/dmi/id/{file})"),
            NONE,
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A fake machine: (path, contents) pairs under a temporary root.
    fn machine(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (p, t) in files {
            let f = d.path().join(p.trim_start_matches('/'));
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, t).unwrap();
        }
        d
    }

    fn find<'a>(c: &'a [Check], name: &str) -> &'a Check {
        c.iter().find(|c| c.name == name).unwrap()
    }

    const MOUNTS_V2: &str = "proc /proc proc rw,nosuid 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec 0 0\n";

    #[test]
    fn a_well_set_machine_passes() {
        let d = machine(&[
            ("/proc/sys/kernel/osrelease", "6.8.0-45-generic\n"),
            (
                "/proc/self/limits",
                "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1048576              1048576              files     \n",
            ),
            (
                "/sys/kernel/mm/transparent_hugepage/enabled",
                "always [madvise] never\n",
            ),
            (
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "performance\n",
            ),
            (
                "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
                "performance\n",
            ),
            ("/sys/devices/system/cpu/intel_pstate/no_turbo", "0\n"),
            ("/sys/devices/system/cpu/smt/control", "on\n"),
            ("/sys/devices/system/node/node0/cpulist", "0-1\n"),
            (
                "/proc/swaps",
                "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
            ),
            ("/proc/mounts", MOUNTS_V2),
            (
                "/sys/fs/cgroup/cgroup.controllers",
                "cpuset cpu io memory hugetlb pids\n",
            ),
            ("/sys/class/dmi/id/bios_version", "1.2.3\n"),
        ]);
        let c = run(d.path());
        for x in &c {
            assert_eq!(x.status, Status::Pass, "{}", x.line());
        }
        assert_eq!(find(&c, "Kernel Version").found, "6.8.0-45-generic");
        assert_eq!(find(&c, "THP Status").found, "madvise");
        assert_eq!(find(&c, "CPU Governor").found, "performance on 2 of 2 CPUs");
        assert_eq!(find(&c, "Open Files Limit").found, "1048576");
        assert!(find(&c, "SMT").found.starts_with("Enabled"));
        assert!(find(&c, "Boost Status").found.starts_with("Enabled"));
        assert_eq!(find(&c, "SELinux Status").found, "Disabled");
        assert_eq!(find(&c, "CXL").found, "Not Present");
        assert_eq!(find(&c, "BIOS Version").found, "1.2.3");
    }

    #[test]
    fn a_badly_set_machine_warns_with_what_and_advice() {
        let d = machine(&[
            (
                "/proc/self/limits",
                "Max open files            1024                 524288               files     \n",
            ),
            (
                "/sys/kernel/mm/transparent_hugepage/enabled",
                "always madvise [never]\n",
            ),
            (
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "powersave\n",
            ),
            (
                "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
                "performance\n",
            ),
            ("/sys/devices/system/cpu/cpu2/online", "1\n"),
            ("/sys/devices/system/cpu/cpufreq/boost", "0\n"),
            ("/sys/fs/selinux/enforce", "1\n"),
            (
                "/sys/devices/system/cpu/cpu0/topology/thread_siblings_list",
                "0,4\n",
            ),
            ("/sys/devices/system/node/node0/cpulist", "0-3\n"),
            ("/sys/devices/system/node/node1/cpulist", "\n"),
            (
                "/proc/swaps",
                "Filename\tType\tSize\tUsed\tPriority\n/swap.img                               file\t\t4194300\t\t0\t\t-2\n",
            ),
            (
                "/proc/mounts",
                "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n",
            ),
            (
                "/proc/cgroups",
                "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t3\t1\t1\nmemory\t0\t1\t1\n",
            ),
        ]);
        let c = run(d.path());
        let warn = |n: &str| {
            let x = find(&c, n);
            assert_eq!(x.status, Status::Warn, "{}", x.line());
            assert_ne!(x.advice, NONE, "{}", x.line());
            x
        };
        assert_eq!(warn("Open Files Limit").found, "1024 (below 65535)");
        assert_eq!(warn("THP Status").found, "never");
        assert_eq!(
            warn("CPU Governor").found,
            "performance on 1, powersave on 1 of 3 CPUs"
        );
        assert_eq!(warn("Boost Status").found, "Disabled (cpufreq boost=0)");
        assert!(warn("SELinux Status").found.starts_with("Enforcing"));
        assert_eq!(warn("Swap").found, "4095 MiB on /swap.img");
        assert_eq!(
            warn("cgroups").found,
            "no cgroup2 mount, cgroup v1 controllers: cpu"
        );
        assert!(
            find(&c, "SMT")
                .found
                .starts_with("Enabled (cpu0 thread siblings 0,4)")
        );
        assert_eq!(find(&c, "NUMA Nodes").found, "2");
        assert_eq!(find(&c, "CXL").found, "Present (memory-only nodes: node1)");
        // The kernel version is missing from this fake /proc.
        warn("Kernel Version");
    }

    #[test]
    fn absent_cpufreq_and_boost_are_said() {
        let d = machine(&[("/sys/devices/system/cpu/cpu0/online", "1\n")]);
        let c = run(d.path());
        assert!(find(&c, "CPU Governor").found.contains("no cpufreq"));
        assert!(find(&c, "Boost Status").found.starts_with("not exposed"));
        assert!(find(&c, "SMT").found.starts_with("cannot tell"));
        assert_eq!(find(&c, "BIOS Release Date").status, Status::Pass);
    }

    #[test]
    fn cgroup2_missing_controllers_warns() {
        let d = machine(&[
            ("/proc/mounts", MOUNTS_V2),
            ("/sys/fs/cgroup/cgroup.controllers", "cpu pids\n"),
        ]);
        let x = cgroups(&Root(d.path().into()));
        assert_eq!(x.status, Status::Warn);
        assert!(x.advice.ends_with("missing: io memory"), "{}", x.line());
    }

    #[test]
    fn parsers() {
        assert_eq!(selected("always [madvise] never"), Some("madvise"));
        assert_eq!(selected("always madvise never"), None);
        assert_eq!(
            parse_open_files(
                "Max open files            unlimited            unlimited            files"
            ),
            Some(None)
        );
        assert_eq!(parse_open_files("Max processes 10 10 processes"), None);
        assert_eq!(
            parse_swaps("Filename Type Size Used Priority\n/dev/sda2 partition 1024 0 -2\n"),
            vec![("/dev/sda2".to_string(), 1024)]
        );
        assert!(parse_cgroups("garbage\n", None).is_err());
        assert_eq!(
            parse_cgroups(MOUNTS_V2, None).unwrap().v2,
            vec!["/sys/fs/cgroup".to_string()]
        );
    }

    #[test]
    fn lines_have_one_shape() {
        let x = Check::new("SMT", Status::Warn, "a", "b");
        assert_eq!(x.line(), "warn  SMT: a; advice: b");
    }
}
