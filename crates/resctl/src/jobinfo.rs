//! What benches learn about the host and hand to later benches: hashd's
//! parameters (from `hashd-params`), the IO cost model (from
//! `iocost-params`) and the memory profile, plus the per-job system info
//! kept in the journal (upstream's `sysinfo` layout, with our additions).
//! Below both the journal (which checks each job's `sysinfo` with it) and
//! the benches (`bench::knobs` re-exports it).

use crate::fmt::format_size;
use crate::sys::cgroup::BackendKind;
use crate::sys::sysreqs::SysReq;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// hashd's parameters found by `hashd-params` (upstream's HashdKnobs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HashdKnobs {
    /// Mean file bytes per request (file_size_mean).
    pub hash_size: u64,
    pub rps_max: u32,
    /// hashd's footprint size at mem_frac 1.0 (its `--size`).
    pub mem_size: u64,
    pub mem_frac: f64,
    pub chunk_pages: usize,
    pub fake_cpu_load: bool,
}

impl HashdKnobs {
    /// The memory hashd uses at these knobs.
    pub fn mem_actual(&self) -> u64 {
        (self.mem_size as f64 * self.mem_frac).ceil() as u64
    }
}

impl fmt::Display for HashdKnobs {
    /// `hash_size=1.2M rps_max=1029 mem_actual=16.1G chunk_pages=25`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "hash_size={} rps_max={} mem_actual={} chunk_pages={}{}",
            format_size(self.hash_size as f64),
            self.rps_max,
            format_size(self.mem_actual() as f64),
            self.chunk_pages,
            if self.fake_cpu_load {
                " fake_cpu_load"
            } else {
                ""
            }
        )
    }
}

/// The linear IO cost model (bytes and IOs a second).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(default)]
pub struct IoCostModel {
    pub rbps: u64,
    pub rseqiops: u64,
    pub rrandiops: u64,
    pub wbps: u64,
    pub wseqiops: u64,
    pub wrandiops: u64,
}

/// The IO cost QoS: latency targets (µs) at percentiles, vrate bounds (%).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IoCostQos {
    pub rpct: f64,
    pub rlat: u64,
    pub wpct: f64,
    pub wlat: u64,
    pub min: f64,
    pub max: f64,
}

/// What `iocost-params` found for a device.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoCostKnobs {
    /// "MAJ:MIN".
    pub devnr: String,
    pub model: IoCostModel,
    pub qos: IoCostQos,
}

impl IoCostKnobs {
    /// The two `iocost model:` lines and the `iocost QoS:` line, each
    /// line prefixed by `indent`.
    pub fn format_lines(&self, indent: &str) -> String {
        let m = &self.model;
        let q = &self.qos;
        format!(
            "{indent}iocost model: rbps={} rseqiops={} rrandiops={}\n\
             {indent}              wbps={} wseqiops={} wrandiops={}\n\
             {indent}iocost QoS: rpct={:.2} rlat={} wpct={:.2} wlat={} min={:.2} max={:.2}\n",
            m.rbps,
            m.rseqiops,
            m.rrandiops,
            m.wbps,
            m.wseqiops,
            m.wrandiops,
            q.rpct,
            q.rlat,
            q.wpct,
            q.wlat,
            q.min,
            q.max
        )
    }
}

/// A device's line of io.cost.model, as upstream's sysinfo keeps it: the
/// controller (`auto`/`user`), the model (`linear`) and its parameters
/// beside them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IoCostModelReport {
    pub ctrl: String,
    pub model: String,
    #[serde(flatten)]
    pub knobs: IoCostModel,
}

/// A device's line of io.cost.qos, as upstream's sysinfo keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IoCostQosReport {
    /// 1 when iocost is enabled on the device.
    pub enable: u32,
    pub ctrl: String,
    #[serde(flatten)]
    pub knobs: IoCostQos,
}

/// The iocost state of the scratch device when the job ran (upstream's
/// `sysinfo.iocost`): the mean vrate (percent) and the model and QoS in
/// force.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IoCostReport {
    pub vrate: f64,
    pub model: IoCostModelReport,
    pub qos: IoCostQosReport,
}

impl IoCostReport {
    /// True when iocost was enabled on the device.
    pub fn enabled(&self) -> bool {
        self.qos.enable > 0
    }

    /// The model and QoS as [`IoCostKnobs`] (for [`IoCostKnobs::format_lines`]).
    pub fn knobs(&self) -> IoCostKnobs {
        IoCostKnobs {
            devnr: String::new(),
            model: self.model.knobs.clone(),
            qos: self.qos.knobs.clone(),
        }
    }
}

/// Which controls were enforced (upstream's `EnforceConfig`, kept in the
/// `sysreqs_report`): `true` is enforced, `false` passive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EnforceConfig {
    pub crit_mem_prot: bool,
    pub cpu: bool,
    pub mem: bool,
    pub io: bool,
    pub fs: bool,
    pub oomd: bool,
}

impl Default for EnforceConfig {
    fn default() -> Self {
        EnforceConfig {
            crit_mem_prot: true,
            cpu: true,
            mem: true,
            io: true,
            fs: true,
            oomd: true,
        }
    }
}

impl EnforceConfig {
    /// What a job enforces with `passive=` set to `p` (None: everything),
    /// as upstream's rd-agent records it.
    pub fn from_passive(p: Option<&crate::spec::Passive>) -> EnforceConfig {
        match p {
            None => EnforceConfig::default(),
            Some(p) => EnforceConfig {
                crit_mem_prot: !p.crit_mem_prot,
                cpu: !p.cpu,
                mem: !p.mem,
                io: !p.io,
                fs: !p.fs,
                oomd: !p.oomd,
            },
        }
    }

    /// The `passive=` value it stands for (empty when all is enforced).
    pub fn to_passive_string(&self) -> String {
        crate::spec::Passive {
            crit_mem_prot: !self.crit_mem_prot,
            cpu: !self.cpu,
            mem: !self.mem,
            io: !self.io,
            fs: !self.fs,
            oomd: !self.oomd,
        }
        .to_passive_string()
    }
}

/// Upstream's default memory profile (GiB), the one results compare at.
pub const DFL_MEM_PROFILE: u32 = 16;

/// The memory profile: how much memory the benches size themselves for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemInfo {
    /// Profile in GiB (a power of two); 0 when off.
    pub profile: u32,
    /// Memory available for the workload.
    pub avail: u64,
    /// The workload's share (hashd runs as if the host had this much).
    pub share: u64,
    /// What the workload should end up using.
    pub target: u64,
}

const GIB: u64 = 1 << 30;

impl MemInfo {
    /// Upstream's profile sizing: share = p/2 GiB up to 4, 3p/4 GiB up to
    /// 16, p - 8 GiB beyond; target = share - min(share/8, 1 GiB).
    pub fn for_profile(profile: u32, avail: u64) -> MemInfo {
        let p = u64::from(profile);
        let share = if p <= 4 {
            p * GIB / 2
        } else if p <= 16 {
            p * GIB * 3 / 4
        } else {
            (p - 8) * GIB
        };
        MemInfo {
            profile,
            avail,
            share,
            target: share - (share / 8).min(GIB),
        }
    }

    /// The largest power-of-two profile whose share fits in `avail`
    /// (at least 1).
    pub fn auto_profile(avail: u64) -> u32 {
        let mut p = 1u32;
        while p < 1 << 16 && MemInfo::for_profile(p * 2, avail).share <= avail {
            p *= 2;
        }
        p
    }

    /// Parses `--mem-profile`: a power of two, or `off` (the whole memory
    /// is the share).
    pub fn parse(s: &str, avail: u64, total: u64) -> Result<MemInfo, crate::Error> {
        if s == "off" {
            return Ok(MemInfo {
                profile: 0,
                avail,
                share: total,
                target: total,
            });
        }
        match s.parse::<u32>() {
            Ok(p) if p.is_power_of_two() && p <= 1 << 16 => Ok(MemInfo::for_profile(p, avail)),
            _ => Err(crate::Error::Input(format!(
                "--mem-profile {s:?}: expected a power of two (GiB) such as 16, or `off`"
            ))),
        }
    }
}

/// The upstream `sysreqs_report`: what the system looked like when the job
/// ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SysReqsReport {
    pub satisfied: Vec<SysReq>,
    pub missed: BTreeMap<SysReq, Vec<String>>,
    pub kernel_version: String,
    pub agent_version: String,
    pub hashd_version: String,
    pub nr_cpus: usize,
    pub total_memory: u64,
    pub total_swap: u64,
    pub scr_dev: String,
    pub scr_devnr: (u32, u32),
    pub scr_dev_model: String,
    pub scr_dev_fwrev: String,
    pub scr_dev_size: u64,
    pub scr_dev_iosched: String,
    /// What was enforced (upstream writes it; ours may lack it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforce: Option<EnforceConfig>,
}

/// A job's `sysinfo` in the journal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct JobSysInfo {
    pub bench_version: String,
    /// The requirements the bench checks.
    pub sysreqs: Vec<SysReq>,
    /// Those it missed, with the reasons.
    pub sysreqs_missed: BTreeMap<SysReq, Vec<String>>,
    pub sysreqs_report: Option<SysReqsReport>,
    /// The iocost state of the scratch device (None: not recorded).
    pub iocost: Option<IoCostReport>,
    /// hashd's knobs when the job ran hashd.
    pub hashd: Option<HashdKnobs>,
    pub mem: MemInfo,
    pub swappiness: u32,
    pub zswap_enabled: bool,
    /// Ours: the cgroup backend the job ran on.
    pub cgroup_backend: Option<BackendKind>,
    /// Ours: how the result is weaker than upstream's, one line each
    /// (empty: not degraded).
    pub degraded: Vec<String>,
    /// Ours: system settings changed for the job (restored afterwards).
    pub fixed: Vec<String>,
    /// Ours: the `passive=` setting.
    pub passive: String,
}

impl JobSysInfo {
    /// Reads a job's `sysinfo`: upstream's layout, ours, or JSON `null`
    /// (nothing recorded). Anything else is an error naming the field that
    /// does not fit (`sysinfo.iocost.qos.enable: invalid type: ...`).
    pub fn from_json(v: &serde_json::Value) -> Result<JobSysInfo, crate::Error> {
        if v.is_null() {
            return Ok(JobSysInfo::default());
        }
        serde_json::from_value(v.clone())
            .map_err(|e| match locate_bad_field(v, &|x| x) {
                Some((path, msg)) => format!("sysinfo.{path}: {msg}"),
                None => format!("sysinfo: {e}"),
            })
            .map_err(crate::Error::Input)
    }
}

/// The first field of `v` that alone fails to read as a [`JobSysInfo`]
/// (each candidate is tried on its own inside `wrap`, which rebuilds the
/// enclosing objects), as (dotted path, serde's message). Nested objects
/// are searched too, as long as the nested error is not just another
/// field of the same object missing.
fn locate_bad_field(
    v: &serde_json::Value,
    wrap: &dyn Fn(serde_json::Value) -> serde_json::Value,
) -> Option<(String, String)> {
    let obj = v.as_object()?;
    for (k, sub) in obj {
        let mut one = serde_json::Map::new();
        one.insert(k.clone(), sub.clone());
        let Err(e) = serde_json::from_value::<JobSysInfo>(wrap(serde_json::Value::Object(one)))
        else {
            continue;
        };
        let key = k.clone();
        let inner = |x: serde_json::Value| {
            let mut m = serde_json::Map::new();
            m.insert(key.clone(), x);
            wrap(serde_json::Value::Object(m))
        };
        if let Some((p, m)) = locate_bad_field(sub, &inner)
            && !m.starts_with("missing field")
        {
            return Some((format!("{k}.{p}"), m));
        }
        return Some((k.clone(), e.to_string()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's `sysinfo`: `iocost` is an io.stat/io.cost.* report and
    /// `sysreqs_report` carries `enforce`; our own fields are absent.
    #[test]
    fn upstream_sysinfo_reads() {
        let v = serde_json::json!({
            "bench_version": "2.2.5 release",
            "sysreqs": ["IoCost"],
            "sysreqs_missed": {"Swap": ["no swap"]},
            "sysreqs_report": {
                "satisfied": ["IoCost"], "missed": {"Swap": ["no swap"]},
                "kernel_version": "5.12", "agent_version": "2.2.5", "hashd_version": "2.2.5",
                "nr_cpus": 4, "total_memory": 1024, "total_swap": 0,
                "scr_dev": "vda", "scr_devnr": [254, 0], "scr_dev_model": "m",
                "scr_dev_fwrev": "f", "scr_dev_size": 4096, "scr_dev_iosched": "none",
                "enforce": {"crit_mem_prot": true, "cpu": true, "mem": false,
                            "io": false, "fs": true, "oomd": true}
            },
            "iocost": {
                "vrate": 100.0,
                "model": {"ctrl": "user", "model": "linear", "rbps": 1, "rseqiops": 2,
                          "rrandiops": 3, "wbps": 4, "wseqiops": 5, "wrandiops": 6},
                "qos": {"enable": 1, "ctrl": "user", "rpct": 95.0, "rlat": 7,
                        "wpct": 95.0, "wlat": 8, "min": 60.0, "max": 100.0}
            },
            "hashd": null,
            "mem": {"profile": 0, "avail": 0, "share": 0, "target": 0},
            "swappiness": 60,
            "zswap_enabled": false
        });
        let si = JobSysInfo::from_json(&v).unwrap();
        let ioc = si.iocost.as_ref().unwrap();
        assert!(ioc.enabled());
        assert_eq!(ioc.model.knobs.wrandiops, 6);
        assert_eq!(ioc.qos.knobs.wlat, 8);
        assert_eq!(ioc.model.ctrl, "user");
        let rep = si.sysreqs_report.as_ref().unwrap();
        assert_eq!(rep.scr_devnr, (254, 0));
        assert_eq!(rep.enforce.as_ref().unwrap().to_passive_string(), "mem/io");
        assert_eq!(si.sysreqs_missed[&SysReq::Swap], vec!["no swap"]);
        assert_eq!(si.cgroup_backend, None);
        assert!(si.degraded.is_empty());
        assert_eq!(EnforceConfig::default().to_passive_string(), "");

        // Null is "nothing recorded"; a field of the wrong type is an
        // error naming it.
        assert_eq!(
            JobSysInfo::from_json(&serde_json::Value::Null).unwrap(),
            JobSysInfo::default()
        );
        let mut bad = v.clone();
        bad["iocost"]["qos"]["enable"] = serde_json::json!("yes");
        let e = JobSysInfo::from_json(&bad).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("sysinfo.iocost.qos.enable: invalid type"),
            "{e}"
        );
        let mut bad = v;
        bad["swappiness"] = serde_json::json!([60]);
        let e = JobSysInfo::from_json(&bad).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("sysinfo.swappiness: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn knobs_print_as_upstream() {
        let k = HashdKnobs {
            hash_size: 1258291,
            rps_max: 1029,
            mem_size: 48 << 30,
            mem_frac: 0.3354,
            chunk_pages: 25,
            fake_cpu_load: false,
        };
        assert_eq!(
            k.to_string(),
            "hash_size=1.2M rps_max=1029 mem_actual=16.1G chunk_pages=25"
        );
    }

    #[test]
    fn memory_profiles_size_as_upstream() {
        let m = MemInfo::for_profile(16, 0);
        assert_eq!(format_size(m.share as f64), "12.0G");
        assert_eq!(format_size(m.target as f64), "11.0G");
        assert_eq!(MemInfo::for_profile(2, 0).share, GIB);
        assert_eq!(MemInfo::for_profile(32, 0).share, 24 * GIB);
        assert_eq!(MemInfo::auto_profile(23 * GIB), 16);
        assert_eq!(MemInfo::auto_profile(GIB / 4), 1);
        assert!(
            MemInfo::parse("12", 0, 0)
                .unwrap_err()
                .to_string()
                .contains("power of two")
        );
        assert_eq!(MemInfo::parse("off", 5, 9).unwrap().share, 9);
    }

    #[test]
    fn iocost_lines_match_upstream() {
        let k = IoCostKnobs {
            devnr: "259:0".into(),
            model: IoCostModel {
                rbps: 1348822120,
                rseqiops: 235687,
                rrandiops: 218614,
                wbps: 601694170,
                wseqiops: 133453,
                wrandiops: 69308,
            },
            qos: IoCostQos {
                rpct: 95.0,
                rlat: 19562,
                wpct: 95.0,
                wlat: 65667,
                min: 60.0,
                max: 100.0,
            },
        };
        assert_eq!(
            k.format_lines(""),
            "iocost model: rbps=1348822120 rseqiops=235687 rrandiops=218614\n              wbps=601694170 wseqiops=133453 wrandiops=69308\niocost QoS: rpct=95.00 rlat=19562 wpct=95.00 wlat=65667 min=60.00 max=100.00\n"
        );
    }
}
