//! What machine a run happened on, read from procfs and sysfs (no lscpu, no
//! sysstat, nothing to install).

use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

fn read(path: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// benchpress' `machines[0]` block.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MachineInfo {
    pub cpu_architecture: String,
    pub cpu_model: String,
    pub hostname: String,
    pub kernel_version: String,
    /// "N KiB".
    pub mem_total_kib: String,
    /// Online logical CPUs, as a string (benchpress' type).
    pub num_logical_cpus: String,
    /// CPUs in this process' affinity mask.
    pub num_cpus_usable: usize,
    pub os_distro: String,
    pub os_release_name: String,
    pub threads_per_core: usize,
}

struct Uname {
    machine: String,
    nodename: String,
    release: String,
}

fn uname() -> Uname {
    match nix::sys::utsname::uname() {
        Ok(u) => {
            let field = |f: &std::ffi::OsStr| f.to_string_lossy().into_owned();
            Uname {
                machine: field(u.machine()),
                nodename: field(u.nodename()),
                release: field(u.release()),
            }
        }
        Err(_) => Uname {
            machine: std::env::consts::ARCH.to_string(),
            nodename: read("/proc/sys/kernel/hostname").unwrap_or_default(),
            release: read("/proc/sys/kernel/osrelease").unwrap_or_default(),
        },
    }
}

/// `key: value` lines of /proc/cpuinfo for the first processor.
fn cpuinfo_first() -> BTreeMap<String, String> {
    let text = read("/proc/cpuinfo").unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            out.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    out
}

fn os_release() -> BTreeMap<String, String> {
    let text = read("/etc/os-release")
        .or_else(|| read("/usr/lib/os-release"))
        .unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            (
                k.to_string(),
                v.trim_matches('"').trim_matches('\'').to_string(),
            )
        })
        .collect()
}

/// /proc/meminfo in KiB, under /proc's own names (which the report keeps).
fn meminfo() -> BTreeMap<String, u64> {
    parse_meminfo(&read("/proc/meminfo").unwrap_or_default())
        .into_iter()
        .map(|(k, v)| (k, v / 1024))
        .collect()
}

/// Ticks (USER_HZ) of one `cpu` line of /proc/stat: user nice system idle
/// iowait irq softirq steal guest guest_nice (a field an older kernel does
/// not write reads 0).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTicks(pub [u64; 10]);

impl CpuTicks {
    /// Ticks not idle or waiting: user, nice, system, irq, softirq, steal
    /// (user and nice already include guest time).
    pub fn busy(&self) -> u64 {
        let t = &self.0;
        t[0] + t[1] + t[2] + t[5] + t[6] + t[7]
    }

    pub fn system(&self) -> u64 {
        self.0[2]
    }
}

/// The `cpu*` lines of /proc/stat by name (`all` for the total line,
/// `cpu0`, `cpu1`, ... as the kernel names them, so an offline CPU leaves
/// a gap rather than shifting the others). The one parser of it: the
/// `cpu-mpstat` hook and resctl-bench's system stats read it. Kept over
/// procfs-core's `KernelStats`, which numbers the CPUs by position and
/// needs every other line of the file.
pub fn parse_proc_stat(text: &str) -> BTreeMap<String, CpuTicks> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("cpu")) {
        let mut it = line.split_whitespace();
        let name = match it.next().unwrap_or_default() {
            "cpu" => "all".to_string(),
            n => n.to_string(),
        };
        let mut t = [0u64; 10];
        for (slot, v) in t.iter_mut().zip(it) {
            *slot = v.parse().unwrap_or(0);
        }
        out.insert(name, CpuTicks(t));
    }
    out
}

/// /proc/meminfo text as name -> bytes (`kB` values are multiplied out).
/// The one parser of it: resctl-bench's system info reads it too.
pub fn parse_meminfo(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, rest) = l.split_once(':')?;
            let mut it = rest.split_whitespace();
            let v: u64 = it.next()?.parse().ok()?;
            let mult = if it.next() == Some("kB") { 1024 } else { 1 };
            Some((k.trim().to_string(), v.saturating_mul(mult)))
        })
        .collect()
}

/// Parses a CPU list like `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(a) = part.parse() {
                    out.push(a);
                }
            }
        }
    }
    out
}

fn online_cpus() -> Vec<usize> {
    read("/sys/devices/system/cpu/online")
        .map(|s| parse_cpu_list(&s))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1))
                .collect()
        })
}

/// CPUs this process may run on (its affinity mask).
pub fn usable_cpus() -> usize {
    match affinity() {
        Some(v) if !v.is_empty() => v.len(),
        _ => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
    }
}

/// The CPUs this process may run on (its affinity mask), ascending.
pub fn usable_cpu_list() -> Vec<usize> {
    match affinity() {
        Some(v) if !v.is_empty() => v,
        _ => online_cpus(),
    }
}

/// This process's affinity mask, or None when it cannot be read.
fn affinity() -> Option<Vec<usize>> {
    use nix::sched::{CpuSet, sched_getaffinity};
    let set = sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    Some(
        (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
    )
}

/// The running kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    uname().release
}

/// Groups `cpus` into physical cores (same package and core id, read from
/// `sys_cpu`/cpuN/topology), each core's logical CPUs ascending, cores
/// ordered by their first CPU. A CPU without topology files is its own core.
pub fn physical_cores_from(sys_cpu: &Path, cpus: &[usize]) -> Vec<Vec<usize>> {
    let mut by_core: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for &c in cpus {
        let topo = sys_cpu.join(format!("cpu{c}/topology"));
        let pkg = read(topo.join("physical_package_id")).unwrap_or_default();
        let core = read(topo.join("core_id")).unwrap_or_else(|| format!("cpu{c}"));
        by_core.entry((pkg, core)).or_default().push(c);
    }
    let mut cores: Vec<Vec<usize>> = by_core.into_values().collect();
    for c in &mut cores {
        c.sort_unstable();
    }
    cores.sort_by_key(|c| c[0]);
    cores
}

/// The physical cores of the CPUs this process may use.
pub fn usable_physical_cores() -> Vec<Vec<usize>> {
    physical_cores_from(Path::new("/sys/devices/system/cpu"), &usable_cpu_list())
}

/// Splits physical cores evenly over `n` groups in order (the first
/// `cores mod n` groups get one more core); each group lists the logical
/// CPUs of its cores (SMT siblings included). `None` when there are fewer
/// cores than groups.
pub fn split_cores(cores: &[Vec<usize>], n: usize) -> Option<Vec<Vec<usize>>> {
    if n == 0 || cores.len() < n {
        return None;
    }
    let (base, extra) = (cores.len() / n, cores.len() % n);
    let mut it = cores.iter();
    Some(
        (0..n)
            .map(|i| {
                let take = base + usize::from(i < extra);
                let mut cpus: Vec<usize> = it.by_ref().take(take).flatten().copied().collect();
                cpus.sort_unstable();
                cpus
            })
            .collect(),
    )
}

/// Formats CPUs as a list like `0-3,8`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

fn threads_per_core() -> usize {
    read("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
        .map(|s| parse_cpu_list(&s).len())
        .filter(|n| *n > 0)
        .unwrap_or(1)
}

/// One cache level as lscpu summarises it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheSummary {
    /// "L1d", "L1i", "L2", "L3".
    pub name: String,
    pub size_per_instance_bytes: u64,
    pub instances: usize,
}

impl CacheSummary {
    /// lscpu's wording: total size and instance count, e.g. "6 MiB (192 instances)".
    pub fn lscpu(&self) -> String {
        let total = self.size_per_instance_bytes * self.instances as u64;
        let plural = if self.instances == 1 {
            "instance"
        } else {
            "instances"
        };
        format!("{} ({} {plural})", human_size(total), self.instances)
    }
}

/// Sizes in lscpu's style: binary units, one decimal only when needed.
/// Memory the kernel says can be allocated without swapping
/// (`MemAvailable` of /proc/meminfo), in bytes.
pub fn mem_available() -> Option<u64> {
    meminfo_bytes("MemAvailable")
}

/// A /proc/meminfo field (e.g. `MemTotal`) in bytes.
pub fn meminfo_bytes(field: &str) -> Option<u64> {
    meminfo().get(field).map(|kib| kib * 1024)
}

pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    let rounded = (v * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 {
        format!("{} {}", rounded as u64, UNITS[u])
    } else {
        format!("{rounded:.1} {}", UNITS[u])
    }
}

fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix('K') {
        (n, 1024)
    } else if let Some(n) = s.strip_suffix('M') {
        (n, 1024 * 1024)
    } else if let Some(n) = s.strip_suffix('G') {
        (n, 1024 * 1024 * 1024)
    } else {
        (s, 1)
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

/// Caches from `/sys/devices/system/cpu/cpu*/cache/index*`, instances counted
/// as distinct `shared_cpu_list`s, as lscpu does.
pub fn caches_from(sys_cpu: &Path) -> Vec<CacheSummary> {
    // (name) -> (size, set of sharing lists)
    let mut by_name: BTreeMap<String, (u64, BTreeSet<String>)> = BTreeMap::new();
    let Ok(entries) = fs::read_dir(sys_cpu) else {
        return Vec::new();
    };
    for e in entries.flatten() {
        let fname = e.file_name().to_string_lossy().to_string();
        if !(fname.starts_with("cpu")
            && fname[3..].chars().all(|c| c.is_ascii_digit())
            && fname.len() > 3)
        {
            continue;
        }
        let Ok(idx) = fs::read_dir(e.path().join("cache")) else {
            continue;
        };
        for i in idx.flatten() {
            let p = i.path();
            if !i.file_name().to_string_lossy().starts_with("index") {
                continue;
            }
            let (Some(level), Some(kind), Some(size)) = (
                read(p.join("level")),
                read(p.join("type")),
                read(p.join("size")),
            ) else {
                continue;
            };
            let name = match kind.as_str() {
                "Data" => format!("L{level}d"),
                "Instruction" => format!("L{level}i"),
                _ => format!("L{level}"),
            };
            let shared = read(p.join("shared_cpu_list")).unwrap_or_else(|| fname.clone());
            let size = parse_cache_size(&size).unwrap_or(0);
            let entry = by_name.entry(name).or_insert((size, BTreeSet::new()));
            entry.1.insert(shared);
        }
    }
    by_name
        .into_iter()
        .map(|(name, (size, sets))| CacheSummary {
            name,
            size_per_instance_bytes: size,
            instances: sets.len(),
        })
        .collect()
}

/// The report's `metadata` block: `L1d cache` .. `L3 cache` in lscpu wording.
pub fn cache_metadata() -> BTreeMap<String, String> {
    caches_from(Path::new("/sys/devices/system/cpu"))
        .into_iter()
        .map(|c| (format!("{} cache", c.name), c.lscpu()))
        .collect()
}

impl MachineInfo {
    /// Reads this machine.
    pub fn collect() -> Self {
        let u = uname();
        let cpu = cpuinfo_first();
        let os = os_release();
        let mem = meminfo();
        let model = cpu
            .get("model name")
            .or_else(|| cpu.get("Model"))
            .or_else(|| cpu.get("CPU part"))
            .cloned()
            .unwrap_or_else(|| "unknown".into());
        MachineInfo {
            cpu_architecture: u.machine,
            cpu_model: model,
            hostname: u.nodename,
            kernel_version: u.release,
            mem_total_kib: format!("{} KiB", mem.get("MemTotal").copied().unwrap_or(0)),
            num_logical_cpus: online_cpus().len().to_string(),
            num_cpus_usable: usable_cpus(),
            os_distro: os.get("ID").cloned().unwrap_or_else(|| "unknown".into()),
            os_release_name: os
                .get("PRETTY_NAME")
                .or_else(|| os.get("NAME"))
                .cloned()
                .unwrap_or_else(|| "unknown".into()),
            threads_per_core: threads_per_core(),
        }
    }
}

fn dir_names(p: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The full specification written beside each report (`machine_specs.json`):
/// CPU identity and flags, topology, caches, memory, NUMA, OS, kernel command
/// line and tunables, block devices and network interfaces.
pub fn full_specs() -> Value {
    let info = MachineInfo::collect();
    let cpu = cpuinfo_first();
    let online = online_cpus();
    let mut sockets = BTreeSet::new();
    let mut cores = BTreeSet::new();
    for c in &online {
        let base = format!("/sys/devices/system/cpu/cpu{c}/topology");
        let pkg = read(format!("{base}/physical_package_id")).unwrap_or_default();
        let core = read(format!("{base}/core_id")).unwrap_or_default();
        sockets.insert(pkg.clone());
        cores.insert((pkg, core));
    }
    let numa: Map<String, Value> = dir_names("/sys/devices/system/node")
        .into_iter()
        .filter(|n| n.starts_with("node"))
        .map(|n| {
            let cpus = read(format!("/sys/devices/system/node/{n}/cpulist")).unwrap_or_default();
            (n, json!({ "cpus": cpus }))
        })
        .collect();
    let disks: Map<String, Value> = dir_names("/sys/block")
        .into_iter()
        .filter(|d| !d.starts_with("loop") && !d.starts_with("ram"))
        .map(|d| {
            let base = format!("/sys/block/{d}");
            let sectors: u64 = read(format!("{base}/size"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            (
                d.clone(),
                json!({
                    "size_bytes": sectors * 512,
                    "rotational": read(format!("{base}/queue/rotational")) == Some("1".into()),
                    "model": read(format!("{base}/device/model")),
                    "scheduler": read(format!("{base}/queue/scheduler")),
                    "logical_block_size": read(format!("{base}/queue/logical_block_size")),
                }),
            )
        })
        .collect();
    let nics: Map<String, Value> = dir_names("/sys/class/net")
        .into_iter()
        .map(|n| {
            let base = format!("/sys/class/net/{n}");
            let driver = fs::read_link(format!("{base}/device/driver"))
                .ok()
                .and_then(|p| p.file_name().map(|f| f.to_string_lossy().to_string()));
            (
                n,
                json!({
                    "mtu": read(format!("{base}/mtu")),
                    "speed_mbps": read(format!("{base}/speed")),
                    "operstate": read(format!("{base}/operstate")),
                    "driver": driver,
                }),
            )
        })
        .collect();
    let caches: Vec<Value> = caches_from(Path::new("/sys/devices/system/cpu"))
        .into_iter()
        .map(|c| json!({ "name": c.name, "size_per_instance_bytes": c.size_per_instance_bytes, "instances": c.instances, "lscpu": c.lscpu() }))
        .collect();
    json!({
        "machine": info,
        "cpu": {
            "vendor": cpu.get("vendor_id"),
            "family": cpu.get("cpu family"),
            "model": cpu.get("model"),
            "stepping": cpu.get("stepping"),
            "microcode": cpu.get("microcode"),
            "mhz": cpu.get("cpu MHz"),
            "flags": cpu.get("flags").map(|f| f.split_whitespace().collect::<Vec<_>>()),
            "online": read("/sys/devices/system/cpu/online"),
            "sockets": sockets.len(),
            "cores": cores.len(),
            "governor": read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            "max_khz": read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"),
        },
        "caches": caches,
        "memory_kib": meminfo(),
        "numa_nodes": numa,
        "os_release": os_release(),
        "kernel": {
            "release": info.kernel_version,
            "cmdline": read("/proc/cmdline"),
            "transparent_hugepage": read("/sys/kernel/mm/transparent_hugepage/enabled"),
            "swappiness": read("/proc/sys/vm/swappiness"),
        },
        "block_devices": disks,
        "network_interfaces": nics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
    }

    #[test]
    fn lscpu_wording() {
        let c = CacheSummary {
            name: "L1d".into(),
            size_per_instance_bytes: 32 * 1024,
            instances: 192,
        };
        assert_eq!(c.lscpu(), "6 MiB (192 instances)");
        let c = CacheSummary {
            name: "L3".into(),
            size_per_instance_bytes: 32 << 20,
            instances: 1,
        };
        assert_eq!(c.lscpu(), "32 MiB (1 instance)");
        assert_eq!(human_size(1280 * 1024 * 2), "2.5 MiB");
        assert_eq!(human_size(48 * 1024 * 2), "96 KiB");
    }

    #[test]
    fn caches_from_a_fake_sysfs_tree() {
        let d = tempfile::tempdir().unwrap();
        for cpu in 0..4 {
            for (i, (level, kind, size, shared)) in [
                ("1", "Data", "48K", format!("{cpu}")),
                (
                    "2",
                    "Unified",
                    "1024K",
                    format!("{}-{}", cpu / 2 * 2, cpu / 2 * 2 + 1),
                ),
                ("3", "Unified", "32768K", "0-3".to_string()),
            ]
            .into_iter()
            .enumerate()
            {
                let p = d.path().join(format!("cpu{cpu}/cache/index{i}"));
                fs::create_dir_all(&p).unwrap();
                fs::write(p.join("level"), level).unwrap();
                fs::write(p.join("type"), kind).unwrap();
                fs::write(p.join("size"), size).unwrap();
                fs::write(p.join("shared_cpu_list"), shared).unwrap();
            }
        }
        let c = caches_from(d.path());
        let by: BTreeMap<_, _> = c.iter().map(|c| (c.name.as_str(), c.lscpu())).collect();
        assert_eq!(by["L1d"], "192 KiB (4 instances)");
        assert_eq!(by["L2"], "2 MiB (2 instances)");
        assert_eq!(by["L3"], "32 MiB (1 instance)");
    }

    #[test]
    fn cores_group_smt_siblings_and_split_evenly() {
        // 6 cores x 2 threads, siblings numbered c and c + 6 as on many x86 hosts.
        let d = tempfile::tempdir().unwrap();
        for cpu in 0..12 {
            let p = d.path().join(format!("cpu{cpu}/topology"));
            fs::create_dir_all(&p).unwrap();
            fs::write(p.join("physical_package_id"), "0").unwrap();
            fs::write(p.join("core_id"), format!("{}", cpu % 6)).unwrap();
        }
        let all: Vec<usize> = (0..12).collect();
        let cores = physical_cores_from(d.path(), &all);
        assert_eq!(cores.len(), 6);
        assert_eq!(cores[0], vec![0, 6]);
        assert_eq!(cores[5], vec![5, 11]);
        let groups = split_cores(&cores, 4).unwrap();
        // 6 cores over 4 instances: the first two get 2 cores, the others 1.
        assert_eq!(groups[0], vec![0, 1, 6, 7]);
        assert_eq!(groups[1], vec![2, 3, 8, 9]);
        assert_eq!(groups[2], vec![4, 10]);
        assert_eq!(groups[3], vec![5, 11]);
        assert!(split_cores(&cores, 7).is_none());
        assert!(split_cores(&cores, 0).is_none());
        // Only the usable CPUs count.
        let some = physical_cores_from(d.path(), &[0, 1, 6]);
        assert_eq!(some, vec![vec![0, 6], vec![1]]);
        assert_eq!(format_cpu_list(&groups[0]), "0-1,6-7");
        assert_eq!(format_cpu_list(&[3, 1, 2, 9]), "1-3,9");
        assert_eq!(parse_cpu_list(&format_cpu_list(&groups[1])), groups[1]);
    }

    #[test]
    fn this_hosts_usable_cpus_form_cores() {
        let cpus = usable_cpu_list();
        assert_eq!(cpus.len(), usable_cpus());
        let cores = usable_physical_cores();
        let mut flat: Vec<usize> = cores.iter().flatten().copied().collect();
        flat.sort_unstable();
        assert_eq!(flat, cpus);
    }

    /// On a host with lscpu, our wording must equal its own.
    #[test]
    fn agrees_with_lscpu_when_installed() {
        let Ok(out) = std::process::Command::new("lscpu")
            .env("LC_ALL", "C")
            .output()
        else {
            eprintln!("lscpu not installed; the fake-sysfs test covers the format");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let ours = cache_metadata();
        for line in text.lines() {
            if let Some((k, v)) = line.split_once(':')
                && let Some(mine) = ours.get(k.trim())
            {
                assert_eq!(mine, v.trim(), "{k}");
            }
        }
    }

    #[test]
    fn collects_this_machine() {
        let m = MachineInfo::collect();
        assert!(m.mem_total_kib.ends_with(" KiB"));
        assert!(m.num_cpus_usable >= 1);
        assert!(m.num_logical_cpus.parse::<usize>().unwrap() >= m.num_cpus_usable);
        assert!(!m.hostname.is_empty());
        let full = full_specs();
        assert!(full["cpu"]["cores"].as_u64().unwrap() >= 1);
    }
}
