//! The `hashd-params` bench; what it does, for users, is [`DOC`].

use super::common::{Bench, BenchInfo, Ctx, Outcome};
use super::knobs::{HashdKnobs, MemInfo};
use crate::bench::metrics::HashdParamsMetrics;
use crate::fmt::{format_size, parse_size};
use crate::hashd::params::{self, Params};
use crate::journal::JobData;
use crate::spec::{JobSpec, check_keys};
use crate::sys::cgroup::{Applied, BackendKind, Cgroup};
use crate::sys::sysreqs::SysReq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What `doc hashd-params` prints.
pub const DOC: &str = "\
hashd-params: hashd's rps_max and memory footprint on this host.

hashd runs as a child (rackbench resctl hashd --bench) sized for the
memory profile's share (--total-memory SHARE, so its footprint at
mem_frac 1.0 is 4 x share) with its files in DIR/hashd/. The knobs it
saves in its params file are the record:
hash_size=1.2M rps_max=1029 mem_actual=16.1G chunk_pages=25.

hashd runs in its own memory cgroup under a hard limit. With swap, the
limit is the profile's target (share - min(share/8, 1G)): the memory
upstream's balloon leaves its hashd benches, without the balloon
pinning the rest of the host. Without swap, nothing can be offloaded
and that limit would only kill hashd, so the limit is the memory
available less the same slack: a memory search larger than the host
kills hashd, not another process. stderr says which.

Properties: rps-max=N (skip the rps_max search), hash-size=SIZE,
chunk-pages=N, log-bps=SIZE (the hash log's rate at rps_max),
fake-cpu-load (sleep instead of hashing), and upstream's apply and
commit (accepted; the knobs are always kept in the journal, where
later benches find them).
";

const KEYS: &[&str] = &[
    "apply",
    "commit",
    "fake-cpu-load",
    "rps-max",
    "hash-size",
    "chunk-pages",
    "log-bps",
];

/// The properties, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Props {
    pub rps_max: Option<u32>,
    pub hash_size: Option<u64>,
    pub chunk_pages: Option<usize>,
    pub log_bps: u64,
    pub fake_cpu_load: bool,
}

fn num<T: std::str::FromStr>(k: &str, v: &str, what: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("property {k}={v:?}: expected {what}"))
}

/// Parses the first property group.
pub fn props(spec: &JobSpec) -> Result<Props, crate::Error> {
    check_keys(spec, 0, KEYS).map_err(|e| crate::Error::Input(e.to_string()))?;
    if spec.props.len() > 1 {
        return Err(crate::Error::Input(
            "multiple property sets not supported".into(),
        ));
    }
    let mut p = Props {
        log_bps: Params::default().log_bps,
        ..Props::default()
    };
    for (k, v) in spec.props.first().into_iter().flatten() {
        match k.as_str() {
            "rps-max" => {
                let r = num::<u32>(k, v, "a request rate > 0").map_err(crate::Error::Input)?;
                if r == 0 {
                    return Err(crate::Error::Input(format!(
                        "property {k}={v:?}: expected a request rate > 0"
                    )));
                }
                p.rps_max = Some(r);
            }
            "hash-size" => {
                let s =
                    parse_size(v).map_err(|e| crate::Error::Input(format!("property {k}: {e}")))?;
                if s < 4096 {
                    return Err(crate::Error::Input(format!(
                        "property {k}={v:?}: expected at least 4K"
                    )));
                }
                p.hash_size = Some(s);
            }
            "chunk-pages" => {
                let n = num::<usize>(k, v, "a page count > 0").map_err(crate::Error::Input)?;
                if n == 0 {
                    return Err(crate::Error::Input(format!(
                        "property {k}={v:?}: expected a page count > 0"
                    )));
                }
                p.chunk_pages = Some(n);
            }
            "log-bps" => {
                p.log_bps =
                    parse_size(v).map_err(|e| crate::Error::Input(format!("property {k}: {e}")))?
            }
            "fake-cpu-load" => p.fake_cpu_load = flag(k, v).map_err(crate::Error::Input)?,
            _ => {
                flag(k, v).map_err(crate::Error::Input)?;
            }
        }
    }
    Ok(p)
}

/// A boolean property: bare, `true`/`false`, `1`/`0`.
fn flag(k: &str, v: &str) -> Result<bool, String> {
    match v {
        "" | "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!("property {k}={v:?}: expected true or false")),
    }
}

/// Checks a spec.
pub fn check_spec(spec: &JobSpec) -> Result<(), crate::Error> {
    props(spec).map(|_| ())
}

/// hashd's files in the scratch directory.
pub struct HashdFiles {
    pub dir: PathBuf,
    pub testfiles: PathBuf,
    pub params: PathBuf,
    pub report: PathBuf,
    pub args: PathBuf,
}

impl HashdFiles {
    pub fn new(scratch: &Path) -> Result<HashdFiles, crate::Error> {
        let dir = scratch.join("hashd");
        std::fs::create_dir_all(&dir)
            .map_err(|e| crate::Error::Host(format!("cannot create {}: {e}", dir.display())))?;
        Ok(HashdFiles {
            testfiles: dir.join("testfiles"),
            params: dir.join("params.json"),
            report: dir.join("report.json"),
            args: dir.join("args.json"),
            dir,
        })
    }
}

/// Starts `rackbench resctl hashd` with `files` and `extra` options, sized
/// for `share` bytes of memory, inside `cg` when given. stdout (status
/// lines, then the run's metrics as one JSON line) is piped when `capture`
/// and dropped otherwise; stderr goes to ours.
pub fn spawn_hashd_in(
    ctx: &Ctx,
    files: &HashdFiles,
    share: u64,
    extra: &[&str],
    cg: Option<&Cgroup>,
    capture: bool,
) -> Result<Child, crate::Error> {
    let mut cmd = Command::new(&ctx.exe);
    cmd.arg(crate::CHILD_CMD)
        .arg("hashd")
        .arg("-t")
        .arg(&files.testfiles)
        .arg("-p")
        .arg(&files.params)
        .arg("-r")
        .arg(&files.report)
        .arg("--total-memory")
        .arg(share.to_string())
        .args(["-i", "0"])
        .args(extra)
        // -v: hashd's status lines carry its detail too.
        .args((ctx.opts.verbose > 0).then(|| format!("-{}", "v".repeat(ctx.opts.verbose.into()))))
        .stdin(Stdio::null())
        .stdout(if capture {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    super::common::spawn_in(cmd, cg)
        .map_err(|e| crate::Error::Host(format!("cannot start hashd ({}): {e}", ctx.exe.display())))
}

/// hashd as a child: dies with the bench.
pub struct HashdChild(pub Child);

impl HashdChild {
    pub fn check(&mut self) -> Result<(), crate::Error> {
        match self.0.try_wait() {
            Ok(Some(st)) => Err(crate::Error::Input(format!("hashd exited ({st})"))),
            Ok(None) => Ok(()),
            Err(e) => Err(crate::Error::Input(format!("hashd: {e}"))),
        }
    }
}

impl Drop for HashdChild {
    fn drop(&mut self) {
        stop_child(&mut self.0);
    }
}

/// SIGINT, up to 5 s to exit, then SIGKILL.
pub fn stop_child(c: &mut Child) {
    if let Ok(Some(_)) = c.try_wait() {
        return;
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = c.kill();
    let _ = c.wait();
}

/// A JSON file, or `None` when it is missing or malformed (a report
/// being replaced).
pub fn read_json<T: serde::de::DeserializeOwned>(p: &Path) -> Option<T> {
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
}

/// Runs the bench.
pub fn run(spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
    let p = props(spec)?;
    let files = HashdFiles::new(&ctx.opts.dir)?;
    let mut params = Params {
        log_bps: p.log_bps,
        fake_cpu_load: p.fake_cpu_load,
        ..Params::default()
    };
    if let Some(h) = p.hash_size {
        params.file_size_mean = h as usize;
    }
    if let Some(c) = p.chunk_pages {
        params.chunk_pages = c;
    }
    if let Some(r) = p.rps_max {
        params.rps_max = r;
    }
    params::save_params(&files.params, &params)?;
    // Given rps_max, only the memory search runs.
    let bench = if p.rps_max.is_some() {
        "--bench-mem"
    } else {
        "--bench"
    };
    let mut extra = vec![bench];
    if ctx.opts.test {
        extra.push("--bench-test");
    }
    let share = ctx.mem.share;
    eprintln!(
        "hashd-params: hashd {bench} sized for {} (footprint {} at mem_frac 1.0)",
        format_size(share as f64),
        format_size(4.0 * share as f64)
    );
    let cg = confine(ctx).map_err(crate::Error::Host)?;
    let mut child = spawn_hashd_in(ctx, &files, share, &extra, cg.as_ref(), false)?;
    let status = child
        .wait()
        .map_err(|e| crate::Error::Host(format!("waiting for hashd: {e}")))?;
    if ctx.cancel.is_stopped() {
        return Ok(Outcome::Partial(None, "interrupted".into()));
    }
    if !status.success() {
        let oom = cg.as_ref().and_then(Cgroup::oom_kills).unwrap_or(0);
        if oom > 0 {
            return Err(crate::Error::Host(format!(
                "hashd {bench} was killed by the kernel's OOM killer in its cgroup ({oom} kill(s)) \
                 under its memory limit (above): its memory search needs more memory or swap \
                 on the scratch device"
            )));
        }
        return Err(crate::Error::Host(format!(
            "hashd {bench} failed ({status}); its messages are above"
        )));
    }
    let saved = params::load_params(&files.params)?;
    if saved.rps_max == 0 {
        return Err(crate::Error::Host(format!(
            "hashd {bench} left rps_max 0 in {}",
            files.params.display()
        )));
    }
    let knobs = HashdKnobs {
        hash_size: saved.file_size_mean as u64,
        rps_max: saved.rps_max,
        mem_size: 4 * share,
        mem_frac: saved.mem_frac,
        chunk_pages: saved.chunk_pages,
        fake_cpu_load: saved.fake_cpu_load,
    };
    let record = serde_json::to_value(&knobs).map_err(|e| crate::Error::Host(e.to_string()))?;
    Ok(Outcome::Done(record, json!(true)))
}

/// The cgroup hashd runs in, under a hard limit (cgroup2 memory.max,
/// cgroup1 memory.limit_in_bytes).
///
/// With swap, the limit is the memory profile's target (share less
/// upstream's slack, min(share/8, 1G)). Upstream runs its hashd benches
/// beside a balloon that leaves the host that much memory; a limit on
/// hashd's own cgroup gives hashd the same memory without pinning the rest
/// of the host's, and confines an OOM kill to hashd.
///
/// Without swap, nothing of hashd's anonymous memory can be offloaded, so
/// a limit at the target would only kill hashd (its footprint at mem_frac
/// 1.0 is 4 x share): the limit is then the memory available less the same
/// slack, which keeps an oversized memory search from waking the global
/// OOM killer. Both are said on stderr. `None` without a memory cgroup or
/// with `--mem-profile off`.
fn confine(ctx: &Ctx) -> Result<Option<Cgroup>, String> {
    if ctx.mem.profile == 0 {
        eprintln!("hashd-params: --mem-profile off: hashd runs without a memory limit");
        return Ok(None);
    }
    if ctx.cgroups.kind() == BackendKind::None {
        eprintln!(
            "hashd-params: no cgroup backend (see `resctl doc cgroups`): hashd runs without \
             a memory limit, and on a host with less than {} free its memory search may wake \
             the global OOM killer",
            format_size(4.0 * ctx.mem.share as f64)
        );
        return Ok(None);
    }
    let (limit, what) = limit_for(&ctx.mem, ctx.sysinfo.total_swap);
    let cg = ctx
        .cgroups
        .create(&format!("rackbench-{}/hashd-params", std::process::id()))?;
    match cg.set_mem_max(limit) {
        Applied::Done => {
            eprintln!(
                "hashd-params: hashd held to {} ({what}; memory limit, {})",
                format_size(limit as f64),
                ctx.cgroups.kind().name()
            );
            Ok(Some(cg))
        }
        Applied::Degraded(w) | Applied::Unsupported(w) => {
            eprintln!(
                "hashd-params: hashd runs without a memory limit: cannot hold it to {}: {w}",
                format_size(limit as f64)
            );
            Ok(None)
        }
    }
}

/// The limit [`confine`] sets and why: the profile's target with swap, the
/// memory available less min(avail/8, 1G) without.
fn limit_for(mem: &MemInfo, total_swap: u64) -> (u64, &'static str) {
    if total_swap > 0 {
        (mem.target, "the memory profile's target")
    } else {
        (
            mem.avail - (mem.avail / 8).min(1 << 30),
            "no swap, so not the profile's target, which would only get hashd killed: \
             the memory available less slack, so that only hashd can be OOM-killed",
        )
    }
}

/// A blank line and `Result: KNOBS`, as upstream 2.1 and later print it
/// (2.0's `Params: log_bps=` line is gone; the spec keeps `log-bps`).
pub fn format(d: &JobData, _full: bool) -> Result<String, crate::Error> {
    let knobs: HashdKnobs = serde_json::from_value(d.record.clone().unwrap_or(Value::Null))
        .map_err(|e| crate::Error::Input(format!("the record is not hashd knobs: {e}")))?;
    Ok(format!("\nResult: {knobs}\n"))
}

/// The hashd-params bench.
pub struct HashdParamsBench;

static INFO: BenchInfo = BenchInfo {
    kind: "hashd-params",
    about: "hashd's rps_max and memory footprint on this host",
    doc: DOC,
    hard: &[],
    soft: &[
        SysReq::MemShadowInodeProt,
        SysReq::AnonBalance,
        SysReq::SwapOnScratch,
        SysReq::Swap,
        SysReq::HostCriticalServices,
    ],
};

impl Bench for HashdParamsBench {
    fn info(&self) -> &'static BenchInfo {
        &INFO
    }
    fn check(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        check_spec(spec)
    }
    fn run(&self, spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
        run(spec, ctx)
    }
    fn format(&self, d: &JobData, full: bool) -> Result<String, crate::Error> {
        format(d, full)
    }
    fn metrics(&self, d: &JobData, m: &mut super::common::JobMetrics) {
        let Some(k) = d
            .record
            .clone()
            .and_then(|r| serde_json::from_value::<HashdKnobs>(r).ok())
        else {
            return;
        };
        m.hashd_params = Some(HashdParamsMetrics {
            hashd_rps_max: k.rps_max,
            hashd_mem_frac: k.mem_frac,
            hashd_mem_actual_bytes: k.mem_actual(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse;

    #[test]
    fn hashd_is_held_to_the_target_with_swap_and_to_the_host_without() {
        const G: u64 = 1 << 30;
        // Profile 16 on 20G: share 12G, target 11G.
        let m = MemInfo::for_profile(16, 20 * G);
        let (l, why) = limit_for(&m, 4 * G);
        assert_eq!(l, 11 * G);
        assert!(why.contains("target"), "{why}");
        let (l, why) = limit_for(&m, 0);
        assert_eq!(l, 19 * G);
        assert!(why.starts_with("no swap"), "{why}");
        // A small host: avail/8 is the slack.
        let m = MemInfo::for_profile(1, 4 * G);
        assert_eq!(limit_for(&m, G).0, 448 << 20);
        assert_eq!(limit_for(&m, 0).0, 3 * G + G / 2);
    }

    #[test]
    fn properties_are_checked() {
        let p = props(&parse("hashd-params:rps-max=900,hash-size=1M,log-bps=2M").unwrap()).unwrap();
        assert_eq!(p.rps_max, Some(900));
        assert_eq!(p.hash_size, Some(1 << 20));
        assert_eq!(p.log_bps, 2 << 20);
        let e = props(&parse("hashd-params:rps-mx=9").unwrap()).unwrap_err();
        assert!(
            e.to_string().contains("rps-mx") && e.to_string().contains("rps-max"),
            "{e}"
        );
        let e = props(&parse("hashd-params:rps-max=lots").unwrap()).unwrap_err();
        assert!(e.to_string().contains("rps-max=\"lots\""), "{e}");
        let e = props(&parse("hashd-params:chunk-pages=0").unwrap()).unwrap_err();
        assert!(e.to_string().contains("chunk-pages"), "{e}");
        let e = props(&parse("hashd-params:fake-cpu-load=maybe").unwrap()).unwrap_err();
        assert!(e.to_string().contains("true or false"), "{e}");
        assert!(props(&parse("hashd-params::x=1").unwrap()).is_err());
    }

    #[test]
    fn the_result_prints_as_upstream() {
        let d = JobData {
            spec: parse("hashd-params").unwrap(),
            period: (0, 0),
            sysinfo: Value::Null,
            record: Some(
                json!({"hash_size": 1258291, "rps_max": 1029, "mem_size": 51539607552u64,
                                 "mem_frac": 0.3354, "chunk_pages": 25, "fake_cpu_load": false}),
            ),
            result: Some(json!(true)),
        };
        assert_eq!(
            format(&d, false).unwrap(),
            "\nResult: hash_size=1.2M rps_max=1029 mem_actual=16.1G chunk_pages=25\n"
        );
    }
}
