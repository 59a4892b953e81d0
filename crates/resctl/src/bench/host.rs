//! The host a `run` probes once: system info, the cgroup backend, the
//! requirement checks and what they fixed, `--swappiness`, the memory
//! profile and the scratch device; below the commands in `job.rs`.

use super::common::Options;
use super::knobs::{DFL_MEM_PROFILE, HashdKnobs, MemInfo, SysReqsReport};
use crate::spec::{self, JobSpec};
use crate::sys::cgroup::Cgroups;
use crate::sys::sysinfo::{self, SysInfo};
use crate::sys::sysreqs::{self, Check, Fix, Status, SysReq};
use std::collections::BTreeMap;
use std::path::Path;

/// What a job's requirement check may change: by its passive controls.
pub(crate) fn job_fix(s: &JobSpec) -> Fix {
    let p = s
        .passive
        .as_deref()
        .and_then(|p| spec::Passive::parse(p).ok());
    Fix::for_passive(p.as_ref())
}

/// Prints what the requirement check changed.
pub(crate) fn announce_fixes(host: &Host) {
    for (r, st) in &host.statuses {
        if let Status::Fixed(what) = st {
            eprintln!("sysreq {}: fixed: {what} (restored on exit)", r.name());
        }
    }
}

/// `--swappiness`: applied after the requirement checks (which may raise
/// swappiness to 60) and joining the host's undo record, so it is written
/// back first, being the latest change.
pub(crate) fn apply_swappiness(opts: &Options, host: &mut Host) -> Result<(), String> {
    if let Some(v) = opts.swappiness {
        let old = host
            .restore
            .write(Path::new(SWAPPINESS), &v.to_string(), "vm.swappiness")
            .map_err(|e| format!("--swappiness {v}: {e}"))?;
        eprintln!("vm.swappiness: {old} -> {v} for this run (--swappiness; restored on exit)");
    }
    Ok(())
}

/// The probed host: system info, cgroups and requirement statuses.
pub(crate) struct Host {
    pub(crate) sysinfo: SysInfo,
    pub(crate) cgroups: Cgroups,
    pub(crate) statuses: BTreeMap<SysReq, Status>,
    pub(crate) restore: sysreqs::Restore,
}

pub(crate) fn probe(opts: &Options, reqs: &[SysReq], fix: Fix) -> Result<Host, String> {
    let cgroups = Cgroups::probe()?;
    let sysinfo = sysinfo::collect(&opts.dir, cgroups.kind())?;
    let (report, restore) = sysreqs::check(
        reqs,
        &Check {
            scratch_dir: &opts.dir,
            sysinfo: &sysinfo,
            cgroups: &cgroups,
            fix,
        },
    );
    let mut statuses = report.statuses;
    shadow_inode_options(opts, &sysinfo, &mut statuses)?;
    Ok(Host {
        sysinfo,
        cgroups,
        statuses,
        restore,
    })
}

/// Where a kernel without its version's fix says it has the inode shadow
/// protection anyway, as upstream reads it.
const SHADOW_INODE_MARKER: &str = "/sys/module/inode/parameters/__SHADOW_INODE_PROT_MARKER__";

/// Upstream's shadow inode flags. Upstream assumes the protection on a
/// kernel that has it (5.15 and later, an `fbk` build, or the marker
/// parameter) and otherwise runs an inode-steal test;
/// `--skip-shadow-inode-prot-test` assumes it without looking, and
/// `--force-shadow-inode-prot-test` runs the test even then. rackbench has
/// no inode-steal test: the skip flag marks the requirement met (saying
/// why), the force flag is refused, and the marker counts as upstream's.
pub(crate) fn shadow_inode_options(
    opts: &Options,
    si: &SysInfo,
    statuses: &mut BTreeMap<SysReq, Status>,
) -> Result<(), String> {
    if opts.force_shadow_inode_prot_test {
        return Err(
            "--force-shadow-inode-prot-test: rackbench has no inode-steal test to run; \
             MemShadowInodeProt is judged from the kernel (see `doc shadow-inode`): drop the flag"
                .into(),
        );
    }
    let Some(st) = statuses.get_mut(&SysReq::MemShadowInodeProt) else {
        return Ok(());
    };
    if !matches!(st, Status::Missed(_)) {
        return Ok(());
    }
    let fbk = si
        .kernel_version
        .split_once('-')
        .is_some_and(|(_, tag)| tag.contains("fbk"));
    if opts.skip_shadow_inode_prot_test {
        *st = Status::Fixed(
            "assumed met: --skip-shadow-inode-prot-test (as upstream, without testing)".into(),
        );
    } else if fbk || std::path::Path::new(SHADOW_INODE_MARKER).exists() {
        *st = Status::Satisfied;
    }
    Ok(())
}

pub(crate) fn sysreqs_report(h: &Host) -> SysReqsReport {
    let s = &h.sysinfo;
    SysReqsReport {
        satisfied: h
            .statuses
            .iter()
            .filter(|(_, st)| !matches!(st, Status::Missed(_)))
            .map(|(r, _)| *r)
            .collect(),
        missed: missed(&h.statuses),
        kernel_version: s.kernel_version.clone(),
        agent_version: String::new(),
        hashd_version: env!("CARGO_PKG_VERSION").to_string(),
        nr_cpus: s.nr_cpus,
        total_memory: s.total_memory,
        total_swap: s.total_swap,
        scr_dev: s.scr_dev.clone(),
        scr_devnr: s.scr_devnr,
        scr_dev_model: s.scr_dev_model.clone(),
        scr_dev_fwrev: s.scr_dev_fwrev.clone(),
        scr_dev_size: s.scr_dev_size,
        scr_dev_iosched: s.scr_dev_iosched.clone(),
        enforce: None,
    }
}

pub(crate) fn missed(statuses: &BTreeMap<SysReq, Status>) -> BTreeMap<SysReq, Vec<String>> {
    statuses
        .iter()
        .filter_map(|(r, st)| match st {
            Status::Missed(m) => Some((*r, m.clone())),
            _ => None,
        })
        .collect()
}

pub(crate) fn opts_dir_check(opts: &Options) -> Result<(), String> {
    if !opts.dir.is_dir() {
        return Err(format!(
            "scratch directory {} does not exist or is not a directory: create it or pass another --dir",
            opts.dir.display()
        ));
    }
    Ok(())
}

pub(crate) fn memory(opts: &Options, si: &SysInfo) -> Result<MemInfo, String> {
    let m = mem_info(opts, harness::machine::mem_available(), si.total_memory)?;
    if let Some(n) = mem_profile_note(opts, &m) {
        eprintln!("warning: {n}");
    } else if opts.mem_profile.is_some() && m.profile != DFL_MEM_PROFILE && !opts.test {
        // Upstream's warning for a profile given on the command line.
        eprintln!(
            "warning: non-standard mem-profile {} requested, the result won't be directly \
             comparable (upstream's default is {DFL_MEM_PROFILE})",
            if m.profile == 0 {
                "off".to_string()
            } else {
                m.profile.to_string()
            }
        );
    }
    Ok(m)
}

/// Why the memory profile is not upstream's default 16 though none was
/// asked for: the host cannot hold its share. Printed on stderr and kept
/// in each job's `degraded` lines, since such results are not comparable
/// with the @16 results users compare against.
pub fn mem_profile_note(opts: &Options, m: &MemInfo) -> Option<String> {
    if opts.mem_profile.is_some() || opts.test || m.profile == DFL_MEM_PROFILE {
        return None;
    }
    let dfl = MemInfo::for_profile(DFL_MEM_PROFILE, m.avail);
    Some(format!(
        "mem-profile {DFL_MEM_PROFILE} (upstream's default) does not fit: its share {} is more than \
         the {} available; ran at mem-profile {} instead, not directly comparable with results \
         @{DFL_MEM_PROFILE} (-M/--mem-profile N picks a profile)",
        crate::fmt::format_size(dfl.share as f64),
        crate::fmt::format_size(m.avail as f64),
        m.profile
    ))
}

/// The memory sizing: the available memory is `-m/--mem-avail` when
/// given (upstream's override of its own estimate), else the kernel's
/// MemAvailable (`probed`), else the total; the profile is
/// `--mem-profile` (refused, as upstream, when its share is more than
/// the available memory), 1 with `--test`, else upstream's 16, or the
/// largest that fits when 16 does not ([`mem_profile_note`] says so).
pub fn mem_info(opts: &Options, probed: Option<u64>, total: u64) -> Result<MemInfo, crate::Error> {
    let avail = match opts.mem_avail {
        Some(a) if total > 0 && a > total => {
            return Err(crate::Error::Input(format!(
                "-m/--mem-avail {}: more than the host's memory ({})",
                crate::fmt::format_size(a as f64),
                crate::fmt::format_size(total as f64)
            )));
        }
        Some(a) => a,
        None => probed.unwrap_or(total),
    };
    match (&opts.mem_profile, opts.test) {
        (Some(p), _) => {
            let m = MemInfo::parse(p, avail, total)?;
            if m.profile > 0 && m.share > avail {
                return Err(crate::Error::Input(format!(
                    "-M/--mem-profile {}: the available memory {} is too small for its share {}; \
                     use a lower mem-profile (or -m/--mem-avail)",
                    m.profile,
                    crate::fmt::format_size(avail as f64),
                    crate::fmt::format_size(m.share as f64)
                )));
            }
            Ok(m)
        }
        (None, true) => Ok(MemInfo::for_profile(1, avail)),
        (None, false) => {
            let dfl = MemInfo::for_profile(DFL_MEM_PROFILE, avail);
            if dfl.share <= avail {
                Ok(dfl)
            } else {
                Ok(MemInfo::for_profile(MemInfo::auto_profile(avail), avail))
            }
        }
    }
}

/// `--hashd-size` and `--hashd-cpu-load` applied to the knobs a bench
/// runs hashd with (upstream overrides its bench file's knobs the same
/// way). hashd's size at mem_frac 1.0 is 4 x the share here, so the
/// footprint is set through mem_frac and a size above it is refused.
pub fn override_hashd(k: &mut HashdKnobs, opts: &Options, share: u64) -> Result<(), crate::Error> {
    if let Some(size) = opts.hashd_size {
        let mem_size = share.saturating_mul(4);
        if size > mem_size {
            return Err(crate::Error::Input(format!(
                "--hashd-size {}: more than hashd's size at this memory profile ({}, 4 x the share): \
                 pick a larger --mem-profile or a smaller size",
                crate::fmt::format_size(size as f64),
                crate::fmt::format_size(mem_size as f64)
            )));
        }
        k.mem_size = mem_size;
        k.mem_frac = size as f64 / mem_size as f64;
    }
    if let Some(fake) = opts.hashd_fake_cpu_load {
        k.fake_cpu_load = fake;
    }
    Ok(())
}

/// `-D/--dev`: rackbench's scratch device is the disk holding `--dir`
/// (its test files and fio's go there), so the option is accepted only
/// when it names that disk or one of its partitions.
pub fn check_dev(dev: Option<&str>, dir: &Path, scr_dev: &str) -> Result<(), crate::Error> {
    let Some(d) = dev else {
        return Ok(());
    };
    let want = d.strip_prefix("/dev/").unwrap_or(d);
    let is_part = !scr_dev.is_empty()
        && !want.is_empty()
        && Path::new("/sys/block").join(scr_dev).join(want).is_dir();
    if want == scr_dev || is_part {
        return Ok(());
    }
    Err(crate::Error::Input(format!(
        "-D/--dev {d}: the scratch device is the disk holding --dir {} ({}); rackbench cannot \
         bench another device: pass a --dir on {want} instead",
        dir.display(),
        if scr_dev.is_empty() {
            "unknown"
        } else {
            scr_dev
        }
    )))
}

const SWAPPINESS: &str = "/proc/sys/vm/swappiness";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn missed_shadow() -> BTreeMap<SysReq, Status> {
        BTreeMap::from([(
            SysReq::MemShadowInodeProt,
            Status::Missed(vec!["old kernel".into()]),
        )])
    }

    #[test]
    fn shadow_inode_flags_as_upstream() {
        let old = SysInfo {
            kernel_version: "5.10.0-20-amd64".into(),
            ..SysInfo::default()
        };
        // Without a flag a missed requirement stays missed.
        let mut st = missed_shadow();
        shadow_inode_options(&Options::default(), &old, &mut st).unwrap();
        assert!(matches!(st[&SysReq::MemShadowInodeProt], Status::Missed(_)));
        // --skip: assumed met, and the status says so.
        let skip = Options {
            skip_shadow_inode_prot_test: true,
            ..Options::default()
        };
        let mut st = missed_shadow();
        shadow_inode_options(&skip, &old, &mut st).unwrap();
        match &st[&SysReq::MemShadowInodeProt] {
            Status::Fixed(why) => assert!(why.contains("--skip-shadow-inode-prot-test"), "{why}"),
            other => panic!("{other:?}"),
        }
        // An fbk kernel has it, as upstream assumes.
        let fbk = SysInfo {
            kernel_version: "5.12.0-0_fbk3_1234".into(),
            ..SysInfo::default()
        };
        let mut st = missed_shadow();
        shadow_inode_options(&Options::default(), &fbk, &mut st).unwrap();
        assert_eq!(st[&SysReq::MemShadowInodeProt], Status::Satisfied);
        // --force: there is no test to force.
        let force = Options {
            force_shadow_inode_prot_test: true,
            ..Options::default()
        };
        let e = shadow_inode_options(&force, &old, &mut missed_shadow()).unwrap_err();
        assert!(e.starts_with("--force-shadow-inode-prot-test: "), "{e}");
    }
}
