//! The host: cgroup backends, system information and upstream
//! resctl-bench's system requirements.
//!
//! - [`cgroup`]: creating cgroups, applying controls and reading their stats
//!   on a cgroup2 host, a cgroup1 host, or a host without cgroups;
//! - [`sysinfo`]: kernel, CPUs, memory, swap and the scratch device;
//! - [`sysreqs`]: checking (and optionally fixing) the requirements upstream
//!   lists, with an undo record for whatever was changed.
//!
//! The helpers here (file reading with path-naming errors, `mountinfo`
//! parsing, `PATH` lookup) are shared by the three.

pub mod cgroup;
pub mod iotrace;
pub mod sysinfo;
pub mod sysreqs;

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where the kernel lists the mounts of the calling process.
pub const MOUNTINFO: &str = "/proc/self/mountinfo";

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The mount id.
    pub id: u32,
    /// The id of the parent mount.
    pub parent_id: u32,
    /// `st_dev` of the mounted filesystem as (major, minor).
    pub dev: (u32, u32),
    /// The directory of the filesystem that forms the root of this mount.
    pub root: PathBuf,
    /// Where it is mounted, relative to the process's root.
    pub mount_point: PathBuf,
    /// Per-mount options (`rw`, `relatime`, ...).
    pub mount_opts: Vec<String>,
    /// The filesystem type (`ext4`, `cgroup2`, ...).
    pub fs_type: String,
    /// The mount source (`/dev/vda`, `cgroup`, ...).
    pub source: String,
    /// Per-superblock options (for cgroup1: the controllers).
    pub super_opts: Vec<String>,
}

impl Mount {
    /// True when `opt` (e.g. `memory_recursiveprot`, `discard=async`)
    /// appears among the mount or superblock options.
    pub fn has_opt(&self, opt: &str) -> bool {
        self.mount_opts
            .iter()
            .chain(&self.super_opts)
            .any(|o| o == opt)
    }

    /// True when mounted read-write.
    pub fn is_rw(&self) -> bool {
        !self.mount_opts.iter().any(|o| o == "ro") && !self.super_opts.iter().any(|o| o == "ro")
    }
}

/// Undoes the octal escapes (`\040` for a space, ...) the kernel uses in
/// mountinfo paths.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if let Ok(v) = u8::try_from(v) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn split_opts(s: &str) -> Vec<String> {
    s.split(',')
        .filter(|o| !o.is_empty())
        .map(str::to_string)
        .collect()
}

/// Parses the text of a `mountinfo` file. Malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines().filter_map(parse_mountinfo_line).collect()
}

fn parse_mountinfo_line(line: &str) -> Option<Mount> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    // The optional fields end at a lone "-"; at least 6 fields precede it.
    let sep = fields.iter().position(|f| *f == "-")?;
    if sep < 6 || fields.len() < sep + 3 {
        return None;
    }
    let (maj, min) = fields[2].split_once(':')?;
    Some(Mount {
        id: fields[0].parse().ok()?,
        parent_id: fields[1].parse().ok()?,
        dev: (maj.parse().ok()?, min.parse().ok()?),
        root: PathBuf::from(unescape_octal(fields[3])),
        mount_point: PathBuf::from(unescape_octal(fields[4])),
        mount_opts: split_opts(fields[5]),
        fs_type: fields[sep + 1].to_string(),
        source: unescape_octal(fields[sep + 2]),
        super_opts: fields
            .get(sep + 3)
            .map(|s| split_opts(s))
            .unwrap_or_default(),
    })
}

/// Reads and parses [`MOUNTINFO`].
pub fn read_mounts() -> Result<Vec<Mount>, crate::Error> {
    read_string(Path::new(MOUNTINFO)).map(|t| parse_mountinfo(&t))
}

/// The mount holding `path` (which should be canonical): the one with the
/// longest mount point that is a prefix of it; among mounts stacked on the
/// same point, the last one listed (the visible one).
pub fn mount_of<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    let mut best: Option<&Mount> = None;
    for m in mounts.iter().filter(|m| path.starts_with(&m.mount_point)) {
        let longer =
            best.is_none_or(|b| m.mount_point.as_os_str().len() >= b.mount_point.as_os_str().len());
        if longer {
            best = Some(m);
        }
    }
    best
}

/// Reads a whole file as text; the error names the file.
pub fn read_string(path: &Path) -> Result<String, crate::Error> {
    fs::read_to_string(path)
        .map_err(|e| crate::Error::Host(format!("cannot read {}: {e}", path.display())))
}

/// Reads a file holding one unsigned integer; the error names the file and
/// says what was expected.
pub fn read_u64(path: &Path) -> Result<u64, crate::Error> {
    let text = read_string(path)?;
    text.trim()
        .parse()
        .map_err(|_| {
            format!(
                "{}: expected an unsigned integer, found {:?}",
                path.display(),
                text.trim()
            )
        })
        .map_err(crate::Error::Host)
}

/// Writes `value` to an existing file (sysfs, procfs, cgroupfs) in one
/// `write(2)`, like `echo -n value > path` but without creating it; the
/// error names the file and the value.
pub fn write_existing(path: &Path, value: &str) -> Result<(), crate::Error> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| {
            crate::Error::Host(format!("cannot open {} for writing: {e}", path.display()))
        })?;
    f.write_all(value.as_bytes()).map_err(|e| {
        crate::Error::Host(format!("cannot write {value:?} to {}: {e}", path.display()))
    })
}

/// Cumulative counters of one disk from `/proc/diskstats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    pub reads: u64,
    pub read_sectors: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub write_sectors: u64,
    pub write_ms: u64,
}

/// The device lines of a `/proc/diskstats` text, parsed by procfs-core (a
/// line it cannot read, which the kernel does not write, is skipped rather
/// than losing the others).
pub fn disk_lines(text: &str) -> impl Iterator<Item = procfs_core::DiskStat> + '_ {
    text.lines()
        .filter_map(|l| procfs_core::DiskStat::from_line(l).ok())
}

/// The counters of `dev` (a name such as `vda`) in a `/proc/diskstats`
/// text.
pub fn parse_diskstats(text: &str, dev: &str) -> Option<DiskStats> {
    disk_lines(text).find(|d| d.name == dev).map(|d| DiskStats {
        reads: d.reads,
        read_sectors: d.sectors_read,
        read_ms: d.time_reading,
        writes: d.writes,
        write_sectors: d.sectors_written,
        write_ms: d.time_writing,
    })
}

/// The counters of `dev` now; `None` when it is not listed.
pub fn diskstats(dev: &str) -> Option<DiskStats> {
    parse_diskstats(&fs::read_to_string("/proc/diskstats").ok()?, dev)
}

/// Finds an executable file called `name` in the directories of `$PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|p| {
            fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// The line that puts `prev` (a line of io.cost.model or io.cost.qos)
/// back: kernel-chosen (`ctrl=auto`) parameters are restored by asking for
/// auto again, as writing them back would make them user parameters.
pub fn iocost_restore_line(prev: &str, qos: bool) -> String {
    let mut it = prev.split_whitespace();
    let dev = it.next().unwrap_or("");
    if !prev.split_whitespace().any(|t| t == "ctrl=auto") {
        return prev.trim().to_string();
    }
    if qos {
        let enable = prev
            .split_whitespace()
            .find(|t| t.starts_with("enable="))
            .unwrap_or("enable=0");
        format!("{dev} {enable} ctrl=auto")
    } else {
        format!("{dev} ctrl=auto")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diskstats_fields() {
        let text = " 254       0 vda 1000 5 80000 400 2000 7 160000 900 0 1200 1300\n 254       1 vda1 1 0 8 1 0 0 0 0 0 1 1\n";
        let d = parse_diskstats(text, "vda").unwrap();
        assert_eq!(
            d,
            DiskStats {
                reads: 1000,
                read_sectors: 80000,
                read_ms: 400,
                writes: 2000,
                write_sectors: 160000,
                write_ms: 900,
            }
        );
        assert_eq!(parse_diskstats(text, "vda1").unwrap().reads, 1);
        assert_eq!(parse_diskstats(text, "sda"), None);
    }

    const FIXTURE: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:7 master:2 - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
50 27 0:40 /sub /mnt/with\\040space ro,relatime - btrfs /dev/sdb1 ro,ssd,discard=async
garbage line
";

    #[test]
    fn mountinfo_parses_fields_and_optional_tags() {
        let m = parse_mountinfo(FIXTURE);
        assert_eq!(m.len(), 7);
        assert_eq!(m[1].dev, (254, 0));
        assert_eq!(m[1].fs_type, "ext4");
        assert_eq!(m[1].source, "/dev/vda");
        assert!(m[1].has_opt("discard"));
        let mem = &m[4];
        assert_eq!(mem.mount_point, Path::new("/sys/fs/cgroup/memory"));
        assert_eq!(mem.fs_type, "cgroup");
        assert_eq!(mem.super_opts, vec!["rw", "memory"]);
        assert!(m[5].has_opt("memory_recursiveprot"));
        let b = &m[6];
        assert_eq!(b.mount_point, Path::new("/mnt/with space"));
        assert_eq!(b.root, Path::new("/sub"));
        assert!(!b.is_rw());
        assert!(b.has_opt("discard=async"));
    }

    #[test]
    fn mount_of_picks_longest_prefix() {
        let m = parse_mountinfo(FIXTURE);
        let got = mount_of(&m, Path::new("/sys/fs/cgroup/memory/foo")).map(|m| m.id);
        assert_eq!(got, Some(35));
        assert_eq!(mount_of(&m, Path::new("/tmp/x")).map(|m| m.id), Some(27));
        // "/sys/fs/cgroup/cpuacct" must not match "/sys/fs/cgroup/cpu".
        assert_eq!(
            mount_of(&m, Path::new("/sys/fs/cgroup/cpuacct")).map(|m| m.id),
            Some(31)
        );
    }

    #[test]
    fn read_helpers_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v");
        fs::write(&p, "abc\n").unwrap();
        let e = read_u64(&p).unwrap_err();
        assert!(
            e.to_string().contains(&p.display().to_string())
                && e.to_string().contains("unsigned integer"),
            "{e}"
        );
        let e = read_string(&dir.path().join("missing")).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        let e = write_existing(&dir.path().join("missing"), "1").unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        fs::write(&p, "").unwrap();
        write_existing(&p, "42").unwrap();
        assert_eq!(read_u64(&p).unwrap(), 42);
    }

    #[test]
    fn which_finds_sh() {
        assert!(which("sh").is_some());
        assert!(which("no-such-program-rackbench").is_none());
    }
}
