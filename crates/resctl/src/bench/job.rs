//! The resctl-bench commands: `run`, `format`, `summary`, `deps` and
//! `doc`, over the result journal.
//!
//! `run SPEC...` opens the journal (refusing a file that is not one),
//! checks every spec before anything runs, prints the summary of specs
//! already completed (matched by kind, id and properties, `apply` and
//! `commit` aside, as upstream) and runs the others in
//! order. The system is probed once: system info, the cgroup backend and
//! the requirements of the pending benches. A bench declares which
//! requirements it cannot do without (missed ones refuse the run unless
//! `--force`) and which it can degrade without (the result says so in the
//! header and in the JSON). Each job is saved when it starts and when it
//! ends, atomically; an interrupted or failed job keeps what it recorded,
//! without a result, so the next run redoes it.

use super::common::now_secs;
pub use super::common::{Ctx, Options, Outcome};
use super::knobs::{HashdKnobs, JobSysInfo, MemInfo, SysReqsReport};
pub use super::registry::{BENCHES, bench};
use crate::clock::Local;
use crate::journal::{JobData, Journal};
use crate::spec::{self, JobSpec};
use crate::sys::cgroup::Cgroups;
use crate::sys::sysinfo::{self, SysInfo};
use crate::sys::sysreqs::{self, Check, Status, SysReq};
use harness::Cancel;
use std::collections::{BTreeMap, BTreeSet};
use std::time::UNIX_EPOCH;

/// Parses and checks a spec, naming it in the error.
pub fn parse_spec(text: &str) -> Result<JobSpec, String> {
    let s = spec::parse(text).map_err(|e| e.to_string())?;
    let b = bench(&s.kind).map_err(|e| format!("job spec {text:?}: {e}"))?;
    b.check(&s).map_err(|e| format!("job spec {text:?}: {e}"))?;
    Ok(s)
}

/// The latest completed result of `kind` in the journal, parsed.
fn latest<T: serde::de::DeserializeOwned>(j: &Journal, kind: &str) -> Option<T> {
    j.jobs
        .iter()
        .rev()
        .filter(|d| d.spec.kind == kind && d.is_completed())
        .find_map(|d| {
            d.record
                .clone()
                .and_then(|r| serde_json::from_value(r).ok())
        })
}

fn run_job(spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, String> {
    bench(&spec.kind)?.run(spec, ctx)
}

/// Formats one job (a header and the bench's text), as `format` (`full`)
/// or `summary` print it.
pub fn format_job(out: &mut String, d: &JobData, full: bool) {
    out.push_str(&"=".repeat(90));
    out.push_str("\n\n");
    match JobSysInfo::from_json(&d.sysinfo) {
        Ok(si) => format_header(out, d, &si),
        Err(e) => {
            // Journal::open refuses such a file; a JobData built elsewhere
            // still says so instead of printing no system info.
            format_header(out, d, &JobSysInfo::default());
            out.push_str(&format!("(cannot read the system info: {e})\n\n"));
        }
    }
    let body = bench(&d.spec.kind).and_then(|b| b.format(d, full));
    match body {
        Ok(b) => out.push_str(&b),
        Err(e) => out.push_str(&format!("(cannot format this result: {e})\n")),
    }
    out.push('\n');
}

/// The header: `[KIND VERSION result] "ID" DATE TIME - TIME`, System info, IO info,
/// hashd params, missed requirements and (ours) how the result is
/// degraded.
pub fn format_header(out: &mut String, d: &JobData, si: &JobSysInfo) {
    use crate::fmt::format_size as fs;
    let start = Local::at(UNIX_EPOCH + std::time::Duration::from_secs(d.period.0));
    let end = Local::at(UNIX_EPOCH + std::time::Duration::from_secs(d.period.1));
    out.push_str(&format!(
        "[{} {} result] ",
        d.spec.kind,
        env!("CARGO_PKG_VERSION")
    ));
    if let Some(id) = &d.spec.id {
        out.push_str(&format!("\"{id}\" "));
    }
    out.push_str(&format!("{} - {}", start.date_time(), end.time()));
    if !d.is_completed() {
        out.push_str(" (incomplete)");
    }
    out.push_str("\n\n");
    if let Some(r) = &si.sysreqs_report {
        out.push_str(&format!(
            "System info: kernel={:?}\n             nr_cpus={} memory={} swap={} swappiness={}{}\n",
            r.kernel_version,
            r.nr_cpus,
            fs(r.total_memory as f64),
            fs(r.total_swap as f64),
            si.swappiness,
            if si.zswap_enabled { " zswap" } else { "" }
        ));
        if si.mem.profile > 0 {
            out.push_str(&format!(
                "             mem_profile={} (avail={} share={} target={})\n",
                si.mem.profile,
                fs(si.mem.avail as f64),
                fs(si.mem.share as f64),
                fs(si.mem.target as f64)
            ));
        }
        let passive = if si.passive.is_empty() {
            r.enforce
                .as_ref()
                .map(|e| e.to_passive_string())
                .unwrap_or_default()
        } else {
            si.passive.clone()
        };
        if !passive.is_empty() {
            out.push_str(&format!("             passive={passive}\n"));
        }
        out.push('\n');
        let on = |b: bool| if b { "on" } else { "off" };
        let iocost_on = si.iocost.as_ref().is_some_and(|r| r.enabled());
        out.push_str(&format!(
            "IO info: dev={}({}:{}) model=\"{}\" firmware =\"{}\" size={}\n         iosched={} wbt={} iocost={} other={}\n",
            r.scr_dev,
            r.scr_devnr.0,
            r.scr_devnr.1,
            r.scr_dev_model,
            r.scr_dev_fwrev,
            fs(r.scr_dev_size as f64),
            r.scr_dev_iosched,
            on(si.sysreqs_missed.contains_key(&SysReq::NoWbt)),
            on(iocost_on),
            on(si.sysreqs_missed.contains_key(&SysReq::NoOtherIoControllers)),
        ));
        if let Some(ioc) = si.iocost.as_ref().filter(|r| r.enabled()) {
            out.push_str(&ioc.knobs().format_lines("         "));
        }
        out.push('\n');
    }
    if let Some(h) = &si.hashd {
        out.push_str(&format!("hashd params: {h}\n\n"));
    }
    if !si.sysreqs_missed.is_empty() {
        let names: Vec<&str> = si.sysreqs_missed.keys().map(|r| r.name()).collect();
        out.push_str(&format!("Missed sysreqs: {}\n", names.join(", ")));
        for msgs in si.sysreqs_missed.values() {
            for m in msgs {
                out.push_str(&format!("    * {m}\n"));
            }
        }
        out.push('\n');
    }
    if !si.degraded.is_empty() || si.cgroup_backend.is_some() {
        if let Some(b) = si.cgroup_backend {
            out.push_str(&format!(
                "Cgroups: {}\n",
                serde_json::to_value(b)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            ));
        }
        for (i, l) in si.degraded.iter().enumerate() {
            let lead = if i == 0 { "Degraded: " } else { "          " };
            out.push_str(&format!("{lead}{l}\n"));
        }
        out.push('\n');
    }
}

/// The probed host: system info, cgroups and requirement statuses.
struct Host {
    sysinfo: SysInfo,
    cgroups: Cgroups,
    statuses: BTreeMap<SysReq, Status>,
    _restore: sysreqs::Restore,
}

fn probe(opts: &Options, reqs: &[SysReq], fix: bool) -> Result<Host, String> {
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
    Ok(Host {
        sysinfo,
        cgroups,
        statuses: report.statuses,
        _restore: restore,
    })
}

fn sysreqs_report(h: &Host) -> SysReqsReport {
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

fn missed(statuses: &BTreeMap<SysReq, Status>) -> BTreeMap<SysReq, Vec<String>> {
    statuses
        .iter()
        .filter_map(|(r, st)| match st {
            Status::Missed(m) => Some((*r, m.clone())),
            _ => None,
        })
        .collect()
}

fn opts_dir_check(opts: &Options) -> Result<(), String> {
    if !opts.dir.is_dir() {
        return Err(format!(
            "scratch directory {} does not exist or is not a directory: create it or pass another --dir",
            opts.dir.display()
        ));
    }
    Ok(())
}

fn memory(opts: &Options, si: &SysInfo) -> Result<MemInfo, String> {
    let avail = harness::machine::mem_available().unwrap_or(si.total_memory);
    match (&opts.mem_profile, opts.test) {
        (Some(p), _) => MemInfo::parse(p, avail, si.total_memory),
        (None, true) => Ok(MemInfo::for_profile(1, avail)),
        (None, false) => Ok(MemInfo::for_profile(MemInfo::auto_profile(avail), avail)),
    }
}

/// Prints a job's summary and keeps the job for the run's record.
fn print_summary(d: &JobData, printed: &mut Vec<JobData>) {
    print!("{}", summary_text(std::slice::from_ref(d)));
    printed.push(d.clone());
}

/// The summaries `run` prints, job by job (also a stored run's text).
pub fn summary_text(jobs: &[JobData]) -> String {
    let mut out = String::new();
    for d in jobs {
        format_job(&mut out, d, false);
    }
    out
}

/// `run SPEC...`. Returns false when a job failed or was interrupted;
/// `printed` gets each job whose summary was printed, in order.
pub fn cmd_run(
    opts: &Options,
    specs: &[String],
    cancel: &Cancel,
    printed: &mut Vec<JobData>,
) -> Result<bool, String> {
    let result = opts
        .result
        .as_ref()
        .ok_or("run: no result file: expected -r/--result FILE (JSON, or .json.gz)")?;
    if specs.is_empty() {
        return Err("run: no job spec: expected KIND[:k=v,...]... (see `doc`)".into());
    }
    let specs: Vec<JobSpec> = specs
        .iter()
        .map(|s| parse_spec(s))
        .collect::<Result<_, _>>()?;
    let mut journal = Journal::open(result).map_err(|e| e.to_string())?;
    opts_dir_check(opts)?;

    let mut pending = Vec::new();
    let mut seen = BTreeSet::new();
    for s in specs {
        if !seen.insert((s.kind.clone(), s.id.clone())) {
            return Err(format!(
                "job {s} is given twice: give each job of a kind its own id= "
            ));
        }
        match journal.find_compatible(&s) {
            Some(i) => {
                eprintln!("{s}: already completed in {}, skipping", result.display());
                print_summary(&journal.jobs[i], printed);
            }
            None => {
                if journal.find_completed(&s.kind, s.id.as_deref()).is_some() {
                    eprintln!(
                        "{s}: {} holds a result of this job with other properties; running it again",
                        result.display()
                    );
                }
                pending.push(s)
            }
        }
    }
    if pending.is_empty() {
        return Ok(true);
    }
    // protection needs hashd's knobs: find them first when the journal
    // has none (upstream runs hashd-params nested).
    let have_knobs = latest::<HashdKnobs>(&journal, "hashd-params").is_some()
        || pending.iter().any(|s| s.kind == "hashd-params");
    if !have_knobs && pending.iter().any(|s| s.kind == "protection") {
        eprintln!("protection needs hashd-params: running it first");
        pending.insert(0, parse_spec("hashd-params")?);
    }
    let mut reqs = BTreeSet::new();
    for s in &pending {
        let b = bench(&s.kind)?;
        reqs.extend(b.hard().iter().chain(b.soft()).copied());
    }
    let reqs: Vec<SysReq> = reqs.into_iter().collect();
    let fix = pending.iter().all(|s| {
        s.passive
            .as_deref()
            .and_then(|p| spec::Passive::parse(p).ok())
            .is_none_or(|p| !p.io && !p.mem)
    });
    let host = probe(opts, &reqs, fix)?;
    let all_missed = missed(&host.statuses);
    let mut hard_missed = Vec::new();
    for s in &pending {
        for r in bench(&s.kind)?.hard() {
            if let Some(m) = all_missed.get(r) {
                hard_missed.push(format!("{s}: {}: {}", r.name(), m.join("; ")));
            }
        }
    }
    if !hard_missed.is_empty() {
        let list = hard_missed.join("\n  ");
        if !opts.force {
            return Err(format!(
                "Failed {} system requirements, use --force to ignore:\n  {list}",
                hard_missed.len()
            ));
        }
        eprintln!("warning: running without these requirements (--force):\n  {list}");
    }
    for (r, st) in &host.statuses {
        if let Status::Fixed(what) = st {
            eprintln!("sysreq {}: fixed: {what} (restored on exit)", r.name());
        }
    }
    let mem = memory(opts, &host.sysinfo)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;

    let mut ok = true;
    for s in pending {
        if cancel.is_stopped() {
            ok = false;
            break;
        }
        let b = bench(&s.kind)?;
        let job_missed: BTreeMap<SysReq, Vec<String>> = all_missed
            .iter()
            .filter(|(r, _)| b.hard().contains(r) || b.soft().contains(r))
            .map(|(r, m)| (*r, m.clone()))
            .collect();
        let soft_missed: Vec<&str> = job_missed
            .keys()
            .filter(|r| b.soft().contains(r))
            .map(|r| r.name())
            .collect();
        let mut degraded = Vec::new();
        if !soft_missed.is_empty() {
            degraded.push(format!(
                "ran without {} of its {} sysreqs (missed above)",
                soft_missed.len(),
                b.hard().len() + b.soft().len()
            ));
        }
        if s.kind == "protection" {
            degraded.extend(host.cgroups.limitations());
        }
        let mut ctx = Ctx {
            opts,
            cancel,
            sysinfo: &host.sysinfo,
            cgroups: &host.cgroups,
            mem,
            hashd: latest(&journal, "hashd-params"),
            iocost: latest(&journal, "iocost-params"),
            exe: exe.clone(),
            used_hashd: None,
        };
        let mut si = JobSysInfo {
            bench_version: env!("CARGO_PKG_VERSION").to_string(),
            sysreqs: b.hard().iter().chain(b.soft()).copied().collect(),
            sysreqs_missed: job_missed,
            sysreqs_report: Some(sysreqs_report(&host)),
            iocost: None,
            hashd: None,
            mem,
            swappiness: host.sysinfo.swappiness,
            zswap_enabled: host.sysinfo.zswap_enabled,
            cgroup_backend: Some(host.cgroups.kind()),
            degraded,
            fixed: host
                .statuses
                .iter()
                .filter_map(|(r, st)| match st {
                    Status::Fixed(w) => Some(format!("{}: {w}", r.name())),
                    _ => None,
                })
                .collect(),
            passive: s
                .passive
                .as_deref()
                .and_then(|p| spec::Passive::parse(p).ok())
                .map(|p| p.to_passive_string())
                .unwrap_or_default(),
        };
        let start = now_secs();
        let mut data = JobData {
            spec: s.clone(),
            period: (start, start),
            sysinfo: serde_json::to_value(&si).map_err(|e| e.to_string())?,
            record: None,
            result: None,
        };
        journal.upsert(data.clone());
        journal.save().map_err(|e| e.to_string())?;
        eprintln!("{s}: running");
        let outcome = run_job(&s, &mut ctx);
        data.period.1 = now_secs();
        si.hashd = ctx.used_hashd.take();
        data.sysinfo = serde_json::to_value(&si).map_err(|e| e.to_string())?;
        match outcome {
            Ok(Outcome::Done(record, result)) => {
                data.record = Some(record);
                data.result = Some(result);
                journal.upsert(data.clone());
                journal.save().map_err(|e| e.to_string())?;
                print_summary(&data, printed);
            }
            Ok(Outcome::Partial(record, why)) => {
                data.record = record;
                journal.upsert(data);
                journal.save().map_err(|e| e.to_string())?;
                eprintln!(
                    "{s}: stopped: {why}; what it recorded is kept in {} (incomplete; a re-run redoes it)",
                    result.display()
                );
                ok = false;
                break;
            }
            Err(e) => {
                journal.upsert(data);
                journal.save().map_err(|e| e.to_string())?;
                eprintln!("{s}: failed: {e}");
                ok = false;
                break;
            }
        }
    }
    Ok(ok)
}

/// `format`/`summary [SPEC...]`: every completed job, or those matching
/// the specs' kind and id.
pub fn cmd_format(opts: &Options, specs: &[String], full: bool) -> Result<String, String> {
    let result = opts
        .result
        .as_ref()
        .ok_or("no result file: expected -r/--result FILE")?;
    if !result.exists() {
        return Err(format!("result file {} does not exist", result.display()));
    }
    let journal = Journal::open(result).map_err(|e| e.to_string())?;
    let mut out = String::new();
    if specs.is_empty() {
        for d in &journal.jobs {
            format_job(&mut out, d, full);
        }
        return Ok(out);
    }
    for text in specs {
        let s = parse_spec(text)?;
        let d = journal
            .jobs
            .iter()
            .find(|d| d.spec.kind == s.kind && d.spec.id == s.id)
            .ok_or_else(|| format!("No matching result for {text}"))?;
        format_job(&mut out, d, full);
    }
    Ok(out)
}

/// `deps`: every requirement, satisfied or missed, on this host.
pub fn cmd_deps(opts: &Options) -> Result<String, String> {
    opts_dir_check(opts)?;
    let host = probe(opts, &SysReq::ALL, false)?;
    let ok: Vec<&str> = host
        .statuses
        .iter()
        .filter(|(_, s)| !matches!(s, Status::Missed(_)))
        .map(|(r, _)| r.name())
        .collect();
    let mut out = format!(
        "Satisfied sysreqs ({}/{}): {}\n",
        ok.len(),
        host.statuses.len(),
        ok.join(" ")
    );
    let m = missed(&host.statuses);
    if !m.is_empty() {
        out.push_str(&format!(
            "Missed sysreqs ({}/{}): {}\n",
            m.len(),
            host.statuses.len(),
            m.keys().map(|r| r.name()).collect::<Vec<_>>().join(" ")
        ));
        for (r, msgs) in &m {
            for msg in msgs {
                out.push_str(&format!("    * {}: {msg}\n", r.name()));
            }
        }
    }
    out.push_str(&format!("Cgroup backend: {:?}\n", host.cgroups.kind()));
    for l in host.cgroups.limitations() {
        out.push_str(&format!("    * {l}\n"));
    }
    out.push_str(
        "\nWhat each bench needs (hard: refused without, unless --force; soft: runs degraded):\n",
    );
    for b in BENCHES {
        let names = |v: &[SysReq]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.iter().map(|r| r.name()).collect::<Vec<_>>().join(" ")
            }
        };
        out.push_str(&format!(
            "  {}: hard: {}; soft: {}\n",
            b.kind(),
            names(b.hard()),
            names(b.soft())
        ));
    }
    Ok(out)
}

/// The latest completed job of each kind in the journal, in the order of
/// [`BENCHES`]: what the harness's metrics are derived from.
pub fn latest_completed(j: &Journal) -> Vec<JobData> {
    BENCHES
        .iter()
        .filter_map(|b| {
            j.jobs
                .iter()
                .rev()
                .find(|d| d.spec.kind == b.kind() && d.is_completed())
                .cloned()
        })
        .collect()
}

/// The harness's metrics: the key figures of the latest completed job of
/// each kind (`hashd_rps_max`, `protection_isol_pct`, ...), from `jobs`
/// (as [`latest_completed`] picks them).
pub fn metrics(jobs: &[JobData]) -> super::common::JobMetrics {
    let mut m = super::common::JobMetrics::default();
    for b in BENCHES {
        if let Some(d) = jobs
            .iter()
            .rev()
            .find(|d| d.spec.kind == b.kind() && d.is_completed())
        {
            b.metrics(d, &mut m);
        }
    }
    m
}
