//! What resctl-bench prints under "System info" and "IO info": kernel,
//! CPUs, memory, swap, and the device holding the scratch directory.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::cgroup::BackendKind;
use super::{mount_of, read_mounts, read_string, read_u64};
use harness::machine::parse_meminfo;

/// The host description stored with each job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SysInfo {
    /// `uname -r`.
    pub kernel_version: String,
    /// CPUs this process may run on.
    pub nr_cpus: usize,
    /// MemTotal in bytes.
    pub total_memory: u64,
    /// SwapTotal in bytes.
    pub total_swap: u64,
    /// SwapFree in bytes.
    pub free_swap: u64,
    /// `/proc/sys/vm/swappiness`.
    pub swappiness: u32,
    /// `/sys/module/zswap/parameters/enabled` is `Y`.
    pub zswap_enabled: bool,
    /// The whole disk holding the scratch directory (`vda`, `nvme0n1`,
    /// `dm-0`); empty when it is on no block device (tmpfs, overlay).
    pub scr_dev: String,
    /// Its (major, minor).
    pub scr_devnr: (u32, u32),
    /// `/sys/block/DEV/device/model`, trimmed; empty if absent.
    pub scr_dev_model: String,
    /// `/sys/block/DEV/device/firmware_rev` or `.../rev`; empty if absent.
    pub scr_dev_fwrev: String,
    /// Size in bytes.
    pub scr_dev_size: u64,
    /// The active IO scheduler; `none` if there is no choice.
    pub scr_dev_iosched: String,
    /// True for spinning disks.
    pub scr_dev_rotational: bool,
    /// Writeback throttling target latency, if the device has the knob.
    pub scr_dev_wbt_usec: Option<u64>,
    /// The cgroup backend in use.
    pub cgroup_backend: BackendKind,
}

/// Collects [`SysInfo`] for `scratch_dir`; an error names the file that
/// could not be read (or the scratch dir if it does not exist).
pub fn collect(scratch_dir: &Path, backend: BackendKind) -> Result<SysInfo, crate::Error> {
    if !scratch_dir.is_dir() {
        return Err(crate::Error::Host(format!(
            "scratch directory {} does not exist or is not a directory",
            scratch_dir.display()
        )));
    }
    let meminfo = parse_meminfo(&read_string(Path::new("/proc/meminfo"))?);
    let mem = |k: &str| {
        meminfo
            .get(k)
            .copied()
            .ok_or_else(|| format!("/proc/meminfo: expected a {k} line"))
    };
    let swappiness_path = Path::new("/proc/sys/vm/swappiness");
    let swappiness = u32::try_from(read_u64(swappiness_path)?).map_err(|_| {
        crate::Error::Host(format!("{}: value out of range", swappiness_path.display()))
    })?;
    let mut si = SysInfo {
        kernel_version: harness::machine::kernel_release(),
        nr_cpus: harness::machine::usable_cpus(),
        total_memory: mem("MemTotal").map_err(crate::Error::Host)?,
        total_swap: mem("SwapTotal").map_err(crate::Error::Host)?,
        free_swap: mem("SwapFree").map_err(crate::Error::Host)?,
        swappiness,
        zswap_enabled: fs::read_to_string("/sys/module/zswap/parameters/enabled")
            .map(|s| s.trim() == "Y")
            .unwrap_or(false),
        cgroup_backend: backend,
        ..SysInfo::default()
    };
    if let Some((name, devnr)) = block_dev_of(scratch_dir)? {
        let dir = Path::new("/sys/block").join(&name);
        let text = |rel: &str| {
            fs::read_to_string(dir.join(rel))
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        si.scr_dev_model = text("device/model");
        si.scr_dev_fwrev = match text("device/firmware_rev") {
            s if s.is_empty() => text("device/rev"),
            s => s,
        };
        si.scr_dev_size = read_u64(&dir.join("size"))
            .map(|s| s.saturating_mul(512))
            .unwrap_or(0);
        si.scr_dev_iosched = fs::read_to_string(dir.join("queue/scheduler"))
            .map(|t| parse_scheduler(&t))
            .unwrap_or_else(|_| "none".to_string());
        si.scr_dev_rotational = text("queue/rotational") == "1";
        si.scr_dev_wbt_usec = read_u64(&dir.join("queue/wbt_lat_usec")).ok();
        si.scr_dev = name;
        si.scr_devnr = devnr;
    }
    Ok(si)
}

/// A whole disk: its name in /sys/block (`vda`) and (major, minor).
pub type Disk = (String, (u32, u32));

/// Splits a Linux `dev_t` into (major, minor).
pub fn dev_numbers(dev: u64) -> (u32, u32) {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0xff);
    (major as u32, minor as u32)
}

/// The whole disk a block device belongs to: itself, or its parent when it
/// is a partition. `None` when `/sys/dev/block/MAJ:MIN` does not exist.
pub fn whole_disk(devnr: (u32, u32)) -> Option<Disk> {
    let link = Path::new("/sys/dev/block").join(format!("{}:{}", devnr.0, devnr.1));
    let mut dir = fs::canonicalize(link).ok()?;
    if dir.join("partition").exists() {
        dir = dir.parent()?.to_path_buf();
    }
    let name = dir.file_name()?.to_string_lossy().into_owned();
    let nr = fs::read_to_string(dir.join("dev"))
        .ok()
        .and_then(|t| {
            let (a, b) = t.trim().split_once(':')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .unwrap_or(devnr);
    Some((name, nr))
}

/// The whole disk holding `path` as (name, (major, minor)), or `None` when
/// the filesystem has no block device (tmpfs, overlay, ...). Filesystems
/// with anonymous device numbers (btrfs) are resolved through the mount
/// source in `/proc/self/mountinfo`.
pub fn block_dev_of(path: &Path) -> Result<Option<Disk>, crate::Error> {
    let md = fs::metadata(path)
        .map_err(|e| crate::Error::Host(format!("cannot stat {}: {e}", path.display())))?;
    let devnr = dev_numbers(md.dev());
    if devnr.0 != 0 {
        return Ok(whole_disk(devnr));
    }
    let canon = fs::canonicalize(path)
        .map_err(|e| crate::Error::Host(format!("cannot resolve {}: {e}", path.display())))?;
    let mounts = read_mounts()?;
    let Some(m) = mount_of(&mounts, &canon) else {
        return Ok(None);
    };
    if !m.source.starts_with("/dev/") {
        return Ok(None);
    }
    match fs::metadata(&m.source) {
        Ok(src) if src.file_type().is_block_device() => Ok(whole_disk(dev_numbers(src.rdev()))),
        _ => Ok(None),
    }
}

/// The active scheduler in a `queue/scheduler` file: the `[bracketed]`
/// entry, or the only entry, else `none`.
pub fn parse_scheduler(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    if let Some(w) = words
        .iter()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
    {
        return w.to_string();
    }
    match words[..] {
        [only] => only.to_string(),
        _ => "none".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_brackets() {
        assert_eq!(
            parse_scheduler("none [mq-deadline] kyber bfq \n"),
            "mq-deadline"
        );
        assert_eq!(parse_scheduler("[none] mq-deadline\n"), "none");
        assert_eq!(parse_scheduler("none\n"), "none");
        assert_eq!(parse_scheduler(""), "none");
    }

    #[test]
    fn dev_number_split() {
        // makedev(254, 0) and makedev(259, 65536 + 3).
        assert_eq!(dev_numbers(254 << 8), (254, 0));
        let dev = ((259u64 & 0xfff) << 8) | (3 & 0xff) | ((65539u64 & !0xff) << 12);
        assert_eq!(dev_numbers(dev), (259, 65539));
    }

    #[test]
    fn collect_on_this_host() {
        for dir in ["/tmp", "/"] {
            let si = collect(Path::new(dir), BackendKind::None).unwrap();
            eprintln!("{dir}: {si:?}");
            assert!(si.nr_cpus >= 1);
            assert!(si.total_memory > 0);
            assert!(!si.kernel_version.is_empty());
            assert!(si.free_swap <= si.total_swap);
            if !si.scr_dev.is_empty() {
                assert!(Path::new("/sys/block").join(&si.scr_dev).exists());
                assert!(!si.scr_dev_iosched.is_empty());
            }
        }
        let root_dev = dev_numbers(fs::metadata("/").unwrap().dev());
        let found = block_dev_of(Path::new("/")).unwrap();
        if root_dev.0 != 0 {
            let (name, _) = found.expect("/ is on a block device");
            assert!(Path::new("/sys/block").join(name).exists());
        }
    }

    #[test]
    fn collect_names_missing_dir() {
        let e = collect(Path::new("/no/such/scratch"), BackendKind::None).unwrap_err();
        assert!(e.to_string().contains("/no/such/scratch"), "{e}");
    }

    #[test]
    fn tmpfs_has_no_device() {
        // /dev/shm is tmpfs on most hosts; skip quietly otherwise.
        let p = Path::new("/dev/shm");
        if p.is_dir() && dev_numbers(fs::metadata(p).unwrap().dev()).0 == 0 {
            let si = collect(p, BackendKind::None).unwrap();
            assert_eq!(si.scr_dev, "");
            assert_eq!(si.scr_dev_size, 0);
        }
    }
}
