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

/// How long any one external command of the system specs may take.
const SPEC_COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs `program args`, bounded by `timeout`; its stdout, or why not.
fn run_bounded(
    program: &str,
    args: &[&str],
    timeout: std::time::Duration,
) -> Result<String, String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{program} did not finish within {}s",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for {program}: {e}")),
        }
    };
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    if !status.success() {
        let err = String::from_utf8_lossy(&err);
        return Err(format!("{program} failed ({status}): {}", err.trim()));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// dmidecode's DMI type names (benchpress' table).
fn dmi_type_name(t: u32) -> Option<&'static str> {
    const NAMES: [&str; 43] = [
        "BIOS",
        "System",
        "Baseboard",
        "Chassis",
        "Processor",
        "Memory Controller",
        "Memory Module",
        "Cache",
        "Port Connector",
        "System Slots",
        "On Board Devices",
        "OEM Strings",
        "System Configuration Options",
        "BIOS Language",
        "Group Associations",
        "System Event Log",
        "Physical Memory Array",
        "Memory Device",
        "32-bit Memory Error",
        "Memory Array Mapped Address",
        "Memory Device Mapped Address",
        "Built-in Pointing Device",
        "Portable Battery",
        "System Reset",
        "Hardware Security",
        "System Power Controls",
        "Voltage Probe",
        "Cooling Device",
        "Temperature Probe",
        "Electrical Current Probe",
        "Out-of-band Remote Access",
        "Boot Integrity Services",
        "System Boot",
        "64-bit Memory Error",
        "Management Device",
        "Management Device Component",
        "Management Device Threshold Data",
        "Memory Channel",
        "IPMI Device",
        "Power Supply",
        "Additional Information",
        "Onboard Devices Extended Information",
        "Management Controller Host Interface",
    ];
    NAMES.get(usize::try_from(t).ok()?).copied()
}

/// The DMI type of a `Handle 0x0000, DMI type 0, 26 bytes` line.
fn dmi_handle_type(line: &str) -> Option<u32> {
    let rest = line.strip_prefix("Handle")?;
    let (_, after) = rest.split_once(", DMI type ")?;
    let (t, bytes) = after.split_once(',')?;
    bytes
        .trim()
        .strip_suffix("bytes")?
        .trim()
        .parse::<u32>()
        .ok()?;
    t.trim().parse().ok()
}

/// A `\tKey: value` line as benchpress splits it (at the last `:` followed
/// by white space and a value).
fn dmi_key_value(line: &str) -> Option<(String, String)> {
    let body = line.strip_prefix('\t')?;
    let mut idx = body.len();
    while let Some(i) = body[..idx].rfind(':') {
        let after = &body[i + 1..];
        let value = after.trim_start();
        if i > 0 && after.len() > value.len() && !value.is_empty() {
            return Some((body[..i].to_string(), value.to_string()));
        }
        idx = i;
    }
    None
}

/// `dmidecode` output as benchpress shapes it: each DMI type name to a list
/// of its records, a record being `_title` (the line after the handle),
/// `Key: value` fields, and `Key:` followed by doubly indented lines as a
/// list. Handles of a type outside 0..=42 and records of no fields are left
/// out.
pub fn parse_dmidecode(text: &str) -> Map<String, Value> {
    let mut out: Map<String, Value> = Map::new();
    let text = text.replace("\r\n", "\n");
    for record in text.split("\n\n") {
        let lines: Vec<&str> = record.lines().collect();
        if lines.len() <= 2 {
            continue;
        }
        let Some(name) = dmi_handle_type(lines[0]).and_then(dmi_type_name) else {
            continue;
        };
        let mut rec = Map::new();
        rec.insert("_title".into(), Value::String(lines[1].to_string()));
        let mut list: Option<(String, Vec<Value>)> = None;
        for line in &lines[2..] {
            if list.is_some() {
                if let Some(item) = line.strip_prefix("\t\t") {
                    if let Some((_, items)) = list.as_mut() {
                        items.push(Value::String(item.trim().to_string()));
                    }
                    continue;
                }
                if let Some((k, items)) = list.take() {
                    rec.insert(k, Value::Array(items));
                }
            }
            if let Some((k, v)) = dmi_key_value(line) {
                rec.insert(k, Value::String(v));
            } else if let Some(k) = line
                .strip_prefix('\t')
                .and_then(|l| l.strip_suffix(':'))
                .filter(|k| !k.is_empty() && !k.starts_with('\t'))
            {
                list = Some((k.trim().to_string(), vec![]));
            }
        }
        if let Some((k, items)) = list.take() {
            rec.insert(k, Value::Array(items));
        }
        if let Value::Array(a) = out
            .entry(name.to_string())
            .or_insert_with(|| Value::Array(vec![]))
        {
            a.push(Value::Object(rec));
        }
    }
    out
}

/// benchpress' `dmidecode` block, or `{"_unavailable": why}` when
/// dmidecode is not installed, not permitted (it needs root) or fails.
fn dmidecode() -> Value {
    match run_bounded("dmidecode", &[], SPEC_COMMAND_TIMEOUT) {
        Ok(text) => Value::Object(parse_dmidecode(&text)),
        Err(why) => json!({ "_unavailable": why }),
    }
}

/// The package manager benchpress asks for an os-release `ID`.
pub fn package_query_for(os_id: &str) -> Option<(&'static str, &'static [&'static str])> {
    match os_id.to_lowercase().as_str() {
        "centos" | "rhel" | "fedora" => Some(("rpm", &["-qa"])),
        "ubuntu" | "debian" => Some((
            "dpkg-query",
            &[
                "--show",
                "--showformat",
                "${Package}-${Version}.${Architecture}\n",
            ],
        )),
        _ => None,
    }
}

/// One package a line (`name-version.arch` from dpkg-query's format above,
/// `rpm -qa`'s own NVRA), trimmed; blank lines dropped.
pub fn parse_package_list(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// benchpress' `sys_packages`: a list of strings; empty on a distribution
/// it does not know; `{"_unavailable": why}` when the query fails.
fn sys_packages(os_id: &str) -> Value {
    match package_query_for(os_id) {
        None => json!([]),
        Some((program, args)) => match run_bounded(program, args, SPEC_COMMAND_TIMEOUT) {
            Ok(text) => json!(parse_package_list(&text)),
            Err(why) => json!({ "_unavailable": why }),
        },
    }
}

/// Bounds on the /proc/sys walk (it is a few thousand files on a busy host).
const SYSCTL_MAX_ENTRIES: usize = 100_000;

/// Every readable file under `root` (a /proc/sys tree) as `sysctl -a`
/// names and prints it: the path with `/` as `.` (a `.` inside a name
/// as `/`), the value with its trailing newline removed; of a value of
/// several lines the last one, as benchpress' parse of `sysctl -a` keeps.
/// Unreadable and write-only entries are skipped, as are the deprecated
/// `base_reachable_time` and `retrans_time`, which `sysctl -a` hides.
pub fn kernel_params_from(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    let started = std::time::Instant::now();
    while let Some(dir) = stack.pop() {
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for entry in rd.flatten() {
            if out.len() >= SYSCTL_MAX_ENTRIES || started.elapsed() > SPEC_COMMAND_TIMEOUT {
                return out;
            }
            let path = entry.path();
            let Ok(ft) = entry.file_type() else { continue };
            if ft.is_dir() {
                stack.push(path);
                continue;
            }
            // `sysctl -a` leaves out the deprecated neighbour timers (their
            // `_ms` twins stay).
            let leaf = entry.file_name();
            if !ft.is_file() || leaf == "base_reachable_time" || leaf == "retrans_time" {
                continue;
            }
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            let key = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().replace('.', "/"))
                .collect::<Vec<_>>()
                .join(".");
            let Ok(bytes) = fs::read(&path) else { continue };
            let text = String::from_utf8_lossy(&bytes);
            let value = text
                .trim_end_matches('\n')
                .lines()
                .last()
                .unwrap_or("")
                .trim()
                .to_string();
            out.insert(key, value);
        }
    }
    out
}

/// The full specification written beside each report (`machine_specs.json`):
/// CPU identity and flags, topology, caches, memory, NUMA, OS, kernel command
/// line and tunables, block devices and network interfaces.
pub fn full_specs() -> Value {
    let info = MachineInfo::collect();
    let os = os_release();
    let os_id = os.get("ID").cloned();
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
        "os_release": os,
        "kernel": {
            "release": info.kernel_version,
            "cmdline": read("/proc/cmdline"),
            "transparent_hugepage": read("/sys/kernel/mm/transparent_hugepage/enabled"),
            "swappiness": read("/proc/sys/vm/swappiness"),
        },
        "block_devices": disks,
        "network_interfaces": nics,
        "dmidecode": dmidecode(),
        "sys_packages": sys_packages(os_id.as_deref().unwrap_or("")),
        "kernel_params": kernel_params_from(Path::new("/proc/sys")),
    })
}

/// `lscpu`'s `Name: value` lines as benchpress' get_cpu_topology keeps
/// them (`Flags` split into a list; the value cut at a second colon, as its
/// split does).
pub fn parse_lscpu(text: &str) -> Map<String, Value> {
    let mut out = Map::new();
    for line in text.lines() {
        let mut parts = line.split(':');
        let (Some(k), Some(v)) = (parts.next(), parts.next()) else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        let value = if k == "Flags" {
            json!(v.split(' ').collect::<Vec<_>>())
        } else {
            json!(v)
        };
        out.insert(k.to_string(), value);
    }
    out
}

/// /proc/meminfo as benchpress' get_cpu_memory_data: values as text, the
/// unit written `KiB`.
pub fn parse_meminfo_text(text: &str) -> Map<String, Value> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| {
            let v = v.trim();
            let v = match v.split_once(' ') {
                Some((n, _unit)) => format!("{n} KiB"),
                None => v.to_string(),
            };
            (k.trim().to_string(), json!(v))
        })
        .collect()
}

/// The machine as benchpress' `run` writes it next to each job's metrics,
/// in `<job>_system_specs_<timestamp>.json`: cpu_topology (lscpu), os_kernel
/// (uname), kernel_cmdline, dmidecode, sys_packages, kernel_params, memory,
/// hardware (`lshw -json`, `{}` without it, as benchpress) and os-release.
/// The caller adds `run_id` and `timestamp`. The blocks `full` (from
/// [`full_specs`]) already holds are taken from it, not collected again.
pub fn benchpress_system_specs(full: &Value) -> Map<String, Value> {
    let os: Map<String, Value> = os_release()
        .into_iter()
        .map(|(k, v)| (k.to_lowercase(), json!(v)))
        .collect();
    let os_id = os
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_lowercase();
    let uts = nix::sys::utsname::uname().ok();
    let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uts.as_ref()
            .map(|u| f(u).to_string_lossy().to_string())
            .unwrap_or_default()
    };
    let cmdline = read("/proc/cmdline")
        .map(|c| {
            shell_words::split(&c)
                .unwrap_or_else(|_| c.split_whitespace().map(str::to_string).collect())
        })
        .unwrap_or_default();
    let cpu_topology = run_bounded("lscpu", &[], SPEC_COMMAND_TIMEOUT)
        .map(|t| parse_lscpu(&t))
        .unwrap_or_default();
    let hardware = run_bounded("lshw", &["-json"], SPEC_COMMAND_TIMEOUT)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .unwrap_or_else(|| json!({}));
    let mut m = Map::new();
    m.insert("cpu_topology".into(), Value::Object(cpu_topology));
    m.insert(
        "os_kernel".into(),
        json!({
            "sys_name": field(|u| u.sysname()),
            "node_name": field(|u| u.nodename()),
            "kernel_release": field(|u| u.release()),
            "version": field(|u| u.version()),
            "machine": field(|u| u.machine()),
        }),
    );
    m.insert("kernel_cmdline".into(), json!(cmdline));
    let reuse =
        |key: &str, collect: &dyn Fn() -> Value| full.get(key).cloned().unwrap_or_else(collect);
    m.insert("dmidecode".into(), reuse("dmidecode", &dmidecode));
    m.insert(
        "sys_packages".into(),
        reuse("sys_packages", &|| sys_packages(&os_id)),
    );
    m.insert(
        "kernel_params".into(),
        reuse("kernel_params", &|| {
            json!(kernel_params_from(Path::new("/proc/sys")))
        }),
    );
    m.insert(
        "memory".into(),
        Value::Object(parse_meminfo_text(
            &read("/proc/meminfo").unwrap_or_default(),
        )),
    );
    m.insert("hardware".into(), hardware);
    m.insert("os-release".into(), Value::Object(os));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lscpu_and_meminfo_are_shaped_as_benchpress() {
        let l = parse_lscpu(
            "Architecture:            x86_64\nCPU(s):                  2\nModel name:              Some CPU @ 2.0GHz\nFlags:                   fpu vme sse\nL1d cache:               64 KiB (2 instances)\n",
        );
        assert_eq!(l["CPU(s)"], "2");
        assert_eq!(l["Model name"], "Some CPU @ 2.0GHz");
        assert_eq!(l["Flags"], json!(["fpu", "vme", "sse"]));
        assert_eq!(l["L1d cache"], "64 KiB (2 instances)");
        let m = parse_meminfo_text("MemTotal:       24607612 kB\nHugePages_Total:       0\n");
        assert_eq!(m["MemTotal"], "24607612 KiB");
        assert_eq!(m["HugePages_Total"], "0");
        let s = benchpress_system_specs(&Value::Null);
        for k in [
            "cpu_topology",
            "os_kernel",
            "kernel_cmdline",
            "dmidecode",
            "sys_packages",
            "kernel_params",
            "memory",
            "hardware",
            "os-release",
        ] {
            assert!(s.contains_key(k), "{k}");
        }
        assert_eq!(s["os_kernel"]["sys_name"], "Linux");
        assert!(s["memory"]["MemTotal"].as_str().unwrap().ends_with(" KiB"));
    }

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
    fn dmidecode_output_is_shaped_as_benchpress() {
        let text = "# dmidecode 3.4\nGetting SMBIOS data from sysfs.\nSMBIOS 3.0.0 present.\n\n\
Handle 0x0000, DMI type 0, 26 bytes\n\
BIOS Information\n\
\tVendor: American Megatrends Inc.\n\
\tVersion: 1.2: beta\n\
\tCharacteristics:\n\
\t\tPCI is supported\n\
\t\tBIOS is upgradeable\n\
\tBIOS Revision: 5.14\n\
\n\
Handle 0x0001, DMI type 17, 84 bytes\n\
Memory Device\n\
\tSize: 16 GB\n\
\tLocator: DIMM_A1\n\
\n\
Handle 0x0002, DMI type 17, 84 bytes\n\
Memory Device\n\
\tSize: No Module Installed\n\
\tFlags:\n\
\t\tNone\n\
\n\
Handle 0x0003, DMI type 200, 4 bytes\n\
OEM-specific Type\n\
\tHeader and Data:\n\
\n\
Handle 0x0004, DMI type 127, 4 bytes\n\
End Of Table\n";
        let v = Value::Object(parse_dmidecode(text));
        assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
        let bios = &v["BIOS"][0];
        assert_eq!(bios["_title"], "BIOS Information");
        assert_eq!(bios["Vendor"], "American Megatrends Inc.");
        // Split at the last `: `, as benchpress' greedy pattern does.
        assert_eq!(bios["Version: 1.2"], "beta");
        assert_eq!(
            bios["Characteristics"],
            json!(["PCI is supported", "BIOS is upgradeable"])
        );
        // The field after a list is kept.
        assert_eq!(bios["BIOS Revision"], "5.14");
        let mem = v["Memory Device"].as_array().unwrap();
        assert_eq!(mem.len(), 2);
        assert_eq!(mem[0]["Locator"], "DIMM_A1");
        // A list closing the record is kept.
        assert_eq!(mem[1]["Flags"], json!(["None"]));
        assert!(parse_dmidecode("").is_empty());
        assert!(parse_dmidecode("Handle garbage\nx\n\ty: z\n").is_empty());
    }

    #[test]
    fn packages_are_queried_as_benchpress_picks_by_os_id() {
        assert_eq!(package_query_for("debian").unwrap().0, "dpkg-query");
        assert_eq!(package_query_for("Ubuntu").unwrap().0, "dpkg-query");
        assert_eq!(package_query_for("rhel").unwrap(), ("rpm", &["-qa"][..]));
        assert_eq!(package_query_for("centos").unwrap().0, "rpm");
        assert_eq!(package_query_for("fedora").unwrap().0, "rpm");
        assert!(package_query_for("arch").is_none());
        assert!(package_query_for("").is_none());
        let dpkg = package_query_for("debian").unwrap().1;
        assert_eq!(dpkg[2], "${Package}-${Version}.${Architecture}\n");
        assert_eq!(
            parse_package_list(
                "adduser-3.134.all\nbash-5.2.15-2+b7.amd64\n\n  zlib1g-1:1.2.13.dfsg-1.amd64 \n"
            ),
            [
                "adduser-3.134.all",
                "bash-5.2.15-2+b7.amd64",
                "zlib1g-1:1.2.13.dfsg-1.amd64"
            ]
        );
        assert!(parse_package_list("").is_empty());
    }

    #[test]
    fn kernel_params_from_a_fake_proc_sys_tree() {
        let d = std::env::temp_dir().join(format!("rb-sysctl-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(d.join("net/ipv4/conf/eth0.100")).unwrap();
        fs::create_dir_all(d.join("kernel")).unwrap();
        fs::write(d.join("kernel/ostype"), "Linux\n").unwrap();
        fs::write(d.join("net/ipv4/tcp_rmem"), "4096\t131072\t6291456\n").unwrap();
        fs::write(d.join("net/ipv4/conf/eth0.100/forwarding"), "0\n").unwrap();
        fs::write(d.join("kernel/multi"), "first\nlast\n").unwrap();
        fs::write(d.join("kernel/empty"), "").unwrap();
        fs::create_dir_all(d.join("net/ipv4/neigh/lo")).unwrap();
        fs::write(d.join("net/ipv4/neigh/lo/retrans_time"), "100\n").unwrap();
        fs::write(d.join("net/ipv4/neigh/lo/retrans_time_ms"), "1000\n").unwrap();
        let p = kernel_params_from(&d);
        assert_eq!(p["kernel.ostype"], "Linux");
        assert_eq!(p["net.ipv4.tcp_rmem"], "4096\t131072\t6291456");
        assert_eq!(p["net.ipv4.conf.eth0/100.forwarding"], "0");
        assert_eq!(p["kernel.multi"], "last");
        assert_eq!(p["kernel.empty"], "");
        assert_eq!(p["net.ipv4.neigh.lo.retrans_time_ms"], "1000");
        assert!(!p.contains_key("net.ipv4.neigh.lo.retrans_time"));
        assert_eq!(p.len(), 6);
        assert!(kernel_params_from(&d.join("missing")).is_empty());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn bounded_commands_time_out_and_report_failures() {
        let t = std::time::Duration::from_millis(300);
        let start = std::time::Instant::now();
        let e = run_bounded("sleep", &["5"], t).unwrap_err();
        assert!(e.contains("did not finish"), "{e}");
        assert!(start.elapsed() < std::time::Duration::from_secs(4));
        assert!(run_bounded("false", &[], t).unwrap_err().contains("failed"));
        assert!(
            run_bounded("rackbench-no-such-program", &[], t)
                .unwrap_err()
                .contains("cannot run")
        );
        assert_eq!(run_bounded("echo", &["hi"], t).unwrap(), "hi\n");
    }

    #[test]
    fn kernel_params_agree_with_sysctl_when_installed() {
        let Ok(out) = std::process::Command::new("sysctl").arg("-a").output() else {
            eprintln!("sysctl not installed; skipping the comparison");
            return;
        };
        let ours = kernel_params_from(Path::new("/proc/sys"));
        let text = String::from_utf8_lossy(&out.stdout);
        let mut compared = 0;
        for key in [
            "kernel.ostype",
            "kernel.osrelease",
            "vm.overcommit_memory",
            "kernel.pid_max",
        ] {
            let line = text.lines().find(|l| l.starts_with(&format!("{key} = ")));
            if let (Some(line), Some(mine)) = (line, ours.get(key)) {
                assert_eq!(line.split_once(" = ").unwrap().1.trim(), mine, "{key}");
                compared += 1;
            }
        }
        assert!(compared > 0, "no key compared");
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
        assert!(full["dmidecode"].is_object());
        assert!(full["sys_packages"].is_array() || full["sys_packages"].is_object());
        assert!(full["kernel_params"].is_object());
    }
}
