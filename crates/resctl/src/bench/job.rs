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

use super::common::{Bench, now_secs};
pub use super::common::{Ctx, FormatArgs, Options, Outcome};
use super::host::{
    Host, announce_fixes, apply_swappiness, job_fix, memory, missed, opts_dir_check, probe,
    sysreqs_report,
};
pub use super::host::{check_dev, mem_info, mem_profile_note, override_hashd};
use super::iocost_params::iocost_report_now;
pub use super::iocost_params::{iocost_knobs_from_sys, iocost_report};
use super::knobs::{EnforceConfig, HashdKnobs, IoCostKnobs, JobSysInfo, MemInfo, SysReqsReport};
pub use super::registry::{BENCHES, bench, listed};
use crate::clock::Local;
use crate::journal::{JobData, Journal};
use crate::spec::{self, JobSpec};
use crate::sys::cgroup::Cgroups;
use crate::sys::sysreqs::{Fix, Status, SysReq};
use harness::Cancel;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// Parses and checks a spec, naming it in the error.
pub fn parse_spec(text: &str) -> Result<JobSpec, crate::Error> {
    let s = spec::parse(text).map_err(|e| crate::Error::Input(e.to_string()))?;
    let b = bench(&s.kind).map_err(|e| crate::Error::Input(format!("job spec {text:?}: {e}")))?;
    b.check(&s)
        .map_err(|e| crate::Error::Input(format!("job spec {text:?}: {e}")))?;
    Ok(s)
}

/// Parses a `format`/`summary` spec: its properties are the bench's
/// format properties where it has them ([`Bench::check_format_props`]).
pub fn parse_format_spec(text: &str) -> Result<JobSpec, crate::Error> {
    let s = spec::parse(text).map_err(|e| crate::Error::Input(e.to_string()))?;
    let b = bench(&s.kind).map_err(|e| crate::Error::Input(format!("job spec {text:?}: {e}")))?;
    b.check_format_props(&s)
        .map_err(|e| crate::Error::Input(format!("job spec {text:?}: {e}")))?;
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
    bench(&spec.kind)?.run(spec, ctx).map_err(String::from)
}

/// Formats one job (a header and the bench's text), as `format` (`full`)
/// or `summary` print it.
pub fn format_job(out: &mut String, d: &JobData, full: bool) {
    format_job_rstat(out, d, full, 0);
}

/// [`format_job`] with `format -R...`'s resource stat detail level.
pub fn format_job_rstat(out: &mut String, d: &JobData, full: bool, rstat: u8) {
    // Without format properties nothing fails or is named after the file.
    let _ = format_job_props(out, d, full, rstat, &[], Path::new(""));
}

/// [`format_job_rstat`] with the spec's format properties (`props`) and
/// the result file they may name outputs after: a bench's undecorated
/// text (iocost-tune's `hwdb`) stands alone, without the separator and
/// header. With format properties given, a failure is the command's error
/// (what they asked for was not made); without, it is printed in place of
/// the job's text.
pub fn format_job_props(
    out: &mut String,
    d: &JobData,
    full: bool,
    rstat: u8,
    props: &[BTreeMap<String, String>],
    result: &Path,
) -> Result<(), crate::Error> {
    let mut head = "=".repeat(90);
    head.push_str("\n\n");
    let sysinfo_err = match JobSysInfo::from_json(&d.sysinfo) {
        Ok(si) => {
            format_header(&mut head, d, &si);
            None
        }
        Err(e) => {
            // Journal::open refuses such a file; a JobData built elsewhere
            // still says so instead of printing no system info.
            format_header(&mut head, d, &JobSysInfo::default());
            Some(e)
        }
    };
    let args = FormatArgs {
        full,
        rstat,
        props,
        result,
        head: &head,
    };
    let body = bench(&d.spec.kind).and_then(|b| b.format_props(d, &args));
    match body {
        Ok((text, true)) => {
            out.push_str(&text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
            return Ok(());
        }
        Err(e) if props.iter().any(|p| !p.is_empty()) => {
            return Err(crate::Error::Input(format!("{}: {e}", d.spec.kind)));
        }
        _ => {}
    }
    out.push_str(&head);
    if let Some(e) = sysinfo_err {
        out.push_str(&format!("(cannot read the system info: {e})\n\n"));
    }
    match body {
        Ok((b, _)) => out.push_str(&b),
        Err(e) => out.push_str(&format!("(cannot format this result: {e})\n")),
    }
    out.push('\n');
    Ok(())
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

/// The cgroup2 root with io.cost, or why `what` cannot be honoured.
fn iocost_root(cgroups: &Cgroups, what: &str) -> Result<PathBuf, String> {
    let root = cgroups.v2_root().ok_or_else(|| {
        format!(
            "{what}: this host has no cgroup2 hierarchy with the io controller, so iocost \
             cannot be configured and the option would change nothing: drop it"
        )
    })?;
    let qos = root.join("io.cost.qos");
    if !qos.exists() {
        return Err(format!(
            "{what}: {} is missing (kernel without iocost), so the option would change \
             nothing: drop it",
            qos.display()
        ));
    }
    Ok(root.to_path_buf())
}

/// The iocost-qos run upstream's iocost-tune nests when the journal has
/// none (upstream's `DFL_QOS_SPEC`).
pub const DFL_QOS_SPEC: &str = "iocost-qos:dither,vrate-max=125,vrate-intvs=25";
/// The same with `--test`: 4 rungs over the same range, one base storage
/// loop (ours: upstream's --test keeps the 25 rungs).
pub const TEST_QOS_SPEC: &str =
    "iocost-qos:dither,vrate-max=125,vrate-intvs=4,storage-base-loops=1";

/// The jobs protection needs first, as upstream runs them nested: its
/// hashd knobs (hashd-params) when the journal (`have_knobs`) and the run
/// have none, and the hog's rate, iocost-params' write bandwidth, when
/// neither has a model (`have_model`) and --iocost-from-sys is not given.
/// With --test, or where fio is missing (`fio`), the hog's rate is assumed
/// instead and the returned lines say so. Returns what to tell the user.
fn add_nested(
    pending: &mut Vec<JobSpec>,
    have_knobs: bool,
    have_model: bool,
    have_qos: bool,
    iocost_here: bool,
    opts: &Options,
    fio: fn() -> bool,
) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let pending_kind = |p: &Vec<JobSpec>, k: &str| p.iter().any(|s| s.kind == k);
    // iocost-tune solves on the journal's iocost-qos result; without one
    // upstream runs its default iocost-qos first, nested.
    if let Some(t) = pending.iter().position(|s| s.kind == "iocost-tune")
        && !have_qos
        && !pending[..t].iter().any(|s| s.kind == "iocost-qos")
    {
        let spec = if opts.test {
            TEST_QOS_SPEC
        } else {
            DFL_QOS_SPEC
        };
        lines.push(format!(
            "iocost-tune: iocost-qos run not specified, running the following: {spec}{}",
            if opts.test {
                " (--test: 4 rungs where upstream's default has 25, one base storage loop)"
            } else {
                ""
            }
        ));
        pending.insert(t, parse_spec(spec)?);
    }
    // iocost-qos applies its QoS over iocost-params' model (upstream runs
    // iocost-params nested when there is none).
    // Where the host has no io.cost, iocost-qos stops at once (even with
    // --force), so nothing is run for it first.
    if let Some(q) = pending.iter().position(|s| s.kind == "iocost-qos")
        && iocost_here
        && !have_model
        && !opts.iocost_from_sys
        && !pending[..q].iter().any(|s| s.kind == "iocost-params")
    {
        lines.push(
            "iocost-qos needs the device's IO cost model: running iocost-params first".into(),
        );
        pending.insert(q, parse_spec("iocost-params")?);
    }
    if !pending.iter().any(|s| s.kind == "protection") {
        return Ok(lines);
    }
    let mut first = Vec::new();
    if !have_model && !opts.iocost_from_sys && !pending_kind(pending, "iocost-params") {
        if opts.test {
            lines.push(
                "note: protection without an iocost-params result: with --test the hog's rate is assumed, not measured"
                    .to_string(),
            );
        } else if !fio() {
            lines.push(
                "note: protection without an iocost-params result, and fio (which iocost-params runs) \
                 is not installed: the hog's rate is assumed, not measured"
                    .to_string(),
            );
        } else {
            lines.push(
                "protection measures the hog's rate with iocost-params: running it first"
                    .to_string(),
            );
            first.push(parse_spec("iocost-params")?);
        }
    }
    if !have_knobs && !pending_kind(pending, "hashd-params") {
        lines.push("protection needs hashd-params: running it first".to_string());
        first.push(parse_spec("hashd-params")?);
    }
    pending.splice(0..0, first);
    Ok(lines)
}

/// True when `fio --version` runs.
fn has_fio() -> bool {
    std::process::Command::new("fio")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
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
) -> Result<bool, crate::Error> {
    let result = opts.result.as_ref().ok_or_else(|| {
        crate::Error::Input(
            "run: no result file: expected -r/--result FILE (JSON, or .json.gz)".into(),
        )
    })?;
    let specs = run_specs(specs).map_err(crate::Error::Input)?;
    let mut journal = Journal::open(result).map_err(|e| crate::Error::Input(e.to_string()))?;
    opts_dir_check(opts).map_err(crate::Error::Input)?;
    note_unused_flags(opts);
    let mut pending =
        pending_jobs(&journal, specs, result, printed).map_err(crate::Error::Input)?;
    if pending.is_empty() {
        return Ok(true);
    }
    add_nested_jobs(&journal, &mut pending, opts).map_err(crate::Error::Input)?;
    let reqs = job_reqs(&pending).map_err(crate::Error::Input)?;
    // What each job lets the check change (upstream's rd-agent decides
    // per job from its passive controls). With more than one kind among
    // the jobs, each kind is checked and undone first, so that every job's
    // hard requirements are judged before anything runs.
    let fixes: Vec<Fix> = pending.iter().map(job_fix).collect();
    let mut statuses_by_fix: Vec<(Fix, BTreeMap<SysReq, Status>)> = Vec::new();
    if fixes.iter().any(|f| *f != fixes[0]) {
        for f in &fixes {
            if statuses_by_fix.iter().all(|(g, _)| g != f) {
                let h = probe(opts, &reqs, *f).map_err(crate::Error::Host)?;
                statuses_by_fix.push((*f, h.statuses));
                h.restore.restore_quietly();
            }
        }
    }
    let mut host = probe(opts, &reqs, fixes[0]).map_err(crate::Error::Host)?;
    if statuses_by_fix.is_empty() {
        statuses_by_fix.push((fixes[0], host.statuses.clone()));
    }
    check_dev(opts.dev.as_deref(), &opts.dir, &host.sysinfo.scr_dev)?;
    let sys_iocost =
        check_iocost_flags(opts, &host, &journal, &pending).map_err(crate::Error::Host)?;
    check_hard_reqs(opts, &pending, &fixes, &statuses_by_fix).map_err(crate::Error::Host)?;
    announce_fixes(&host);
    let mem = memory(opts, &host.sysinfo).map_err(crate::Error::Host)?;
    // A --hashd-size that cannot fit is refused before anything runs.
    override_hashd(&mut HashdKnobs::default(), opts, mem.share)?;
    print_memory(opts, &mem);
    // Applied after the requirement checks (which may raise swappiness to
    // 60), restored before them on the way out.
    // `--swappiness` joins the host's undo record, so it is written back
    // (first, being the latest change) with the sysreq fixes on exit.
    apply_swappiness(opts, &mut host).map_err(crate::Error::Host)?;
    let exe = std::env::current_exe()
        .map_err(|e| crate::Error::Host(format!("cannot find this binary: {e}")))?;
    let mut runner = JobRunner {
        opts,
        cancel,
        result,
        reqs,
        host_fix: fixes[0],
        host,
        sys_iocost,
        mem,
        exe,
    };
    for (s, fix) in pending.into_iter().zip(fixes) {
        if cancel.is_stopped()
            || !runner
                .run(&mut journal, s, fix, printed)
                .map_err(crate::Error::Host)?
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The job specs of `run`, parsed; a kind that can never run is refused
/// before anything changes.
fn run_specs(specs: &[String]) -> Result<Vec<JobSpec>, String> {
    if specs.is_empty() {
        return Err("run: no job spec: expected KIND[:k=v,...]... (see `doc`)".into());
    }
    let specs: Vec<JobSpec> = specs
        .iter()
        .map(|s| parse_spec(s))
        .collect::<Result<_, _>>()?;
    for s in &specs {
        if let Some(why) = bench(&s.kind)?.refuse_run() {
            return Err(format!("{s}: {why}"));
        }
    }
    Ok(specs)
}

/// Notes for upstream's flags that change nothing here.
fn note_unused_flags(opts: &Options) {
    if opts.linux_tar.is_some() {
        eprintln!(
            "note: -l/--linux: no bench uses a kernel tarball (upstream hands it to rd-agent \
             only for benches that ask for it, and none does); it changes nothing"
        );
    }
    if opts.rep_retention.is_some() || opts.keep_reports || opts.clear_reports {
        eprintln!(
            "note: -R/--rep-retention, --keep-reports, --clear-reports: rackbench keeps no \
             rd-agent report files; they change nothing"
        );
    }
    if opts.systemd_timeout.is_some() {
        eprintln!(
            "note: --systemd-timeout: rackbench starts its children itself, not as systemd \
             units; it changes nothing"
        );
    }
}

/// The jobs still to run: those the journal holds completed with the
/// same properties are skipped (their summaries printed).
fn pending_jobs(
    journal: &Journal,
    specs: Vec<JobSpec>,
    result: &Path,
    printed: &mut Vec<JobData>,
) -> Result<Vec<JobSpec>, String> {
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
    Ok(pending)
}

/// Adds the jobs the pending ones need first (and says so).
fn add_nested_jobs(
    journal: &Journal,
    pending: &mut Vec<JobSpec>,
    opts: &Options,
) -> Result<(), String> {
    let have_knobs = latest::<HashdKnobs>(journal, "hashd-params").is_some();
    let have_model = latest::<IoCostKnobs>(journal, "iocost-params").is_some();
    let have_qos = journal
        .jobs
        .iter()
        .any(|d| d.spec.kind == "iocost-qos" && d.is_completed());
    let iocost_here = Cgroups::probe()
        .ok()
        .and_then(|c| c.v2_root().map(|r| r.join("io.cost.qos").exists()))
        .unwrap_or(false);
    for line in add_nested(
        pending,
        have_knobs,
        have_model,
        have_qos,
        iocost_here,
        opts,
        has_fio,
    )? {
        eprintln!("{line}");
    }
    Ok(())
}

/// The system requirements checked for the pending jobs.
fn job_reqs(pending: &[JobSpec]) -> Result<Vec<SysReq>, String> {
    let mut reqs = BTreeSet::new();
    for s in pending {
        let b = bench(&s.kind)?;
        reqs.extend(b.hard().iter().chain(b.soft()).copied());
    }
    // What upstream's rd-agent changes for every job that enforces the
    // control, whatever the bench: the scratch device's IO scheduler and
    // wbt, and swappiness. Checked for every job; only the bench's own
    // requirements count as missed in its result.
    reqs.extend([SysReq::IoSched, SysReq::NoWbt, SysReq::Swap]);
    Ok(reqs.into_iter().collect())
}

/// --iocost-from-sys / --iocost-qos: refused where iocost cannot be
/// configured; the model and QoS they give reach protection, the bench
/// that enables iocost. The model read from the host, with
/// --iocost-from-sys.
fn check_iocost_flags(
    opts: &Options,
    host: &Host,
    journal: &Journal,
    pending: &[JobSpec],
) -> Result<Option<IoCostKnobs>, String> {
    let runs_protection = pending.iter().any(|s| s.kind == "protection");
    let sys_iocost = if opts.iocost_from_sys {
        let root = iocost_root(&host.cgroups, "--iocost-from-sys")?;
        let read = |name: &str| {
            std::fs::read_to_string(root.join(name)).map_err(|e| {
                format!(
                    "--iocost-from-sys: cannot read {}: {e}",
                    root.join(name).display()
                )
            })
        };
        let (d0, d1) = host.sysinfo.scr_devnr;
        Some(iocost_knobs_from_sys(
            &read("io.cost.model")?,
            &read("io.cost.qos")?,
            &format!("{d0}:{d1}"),
        )?)
    } else {
        None
    };
    if let Some(o) = &opts.iocost_qos {
        iocost_root(&host.cgroups, "--iocost-qos")?;
        let have_model = sys_iocost.is_some()
            || latest::<IoCostKnobs>(journal, "iocost-params").is_some()
            || pending.iter().any(|s| s.kind == "iocost-params");
        if !have_model {
            return Err(
                "--iocost-qos: no IO cost model to apply the QoS with: run iocost-params first or add --iocost-from-sys"
                    .into(),
            );
        }
        if opts.verbose > 0 {
            eprintln!("--iocost-qos: {o:?}");
        }
    }
    if (opts.iocost_from_sys || opts.iocost_qos.is_some()) && !runs_protection {
        eprintln!(
            "note: --iocost-from-sys/--iocost-qos: only protection enables iocost; no pending job uses them"
        );
    }
    if (opts.hashd_size.is_some() || opts.hashd_fake_cpu_load.is_some()) && !runs_protection {
        eprintln!(
            "note: --hashd-size/--hashd-cpu-load: only protection runs hashd with the saved knobs \
             (hashd-params searches them, storage sizes hashd itself); no pending job uses them"
        );
    }
    Ok(sys_iocost)
}

/// Refuses (without --force) jobs whose hard requirements are missed.
fn check_hard_reqs(
    opts: &Options,
    pending: &[JobSpec],
    fixes: &[Fix],
    statuses_by_fix: &[(Fix, BTreeMap<SysReq, Status>)],
) -> Result<(), String> {
    let statuses_of = |f: Fix| {
        statuses_by_fix
            .iter()
            .find(|(g, _)| *g == f)
            .map(|(_, st)| st.clone())
            .unwrap_or_default()
    };
    let mut hard_missed = Vec::new();
    for (s, f) in pending.iter().zip(fixes) {
        let job_missed = missed(&statuses_of(*f));
        for r in bench(&s.kind)?.hard() {
            if let Some(m) = job_missed.get(r) {
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
    Ok(())
}

/// The memory profile, with -v.
fn print_memory(opts: &Options, mem: &MemInfo) {
    if opts.verbose > 0 {
        eprintln!(
            "memory: profile {} avail {} share {} target {}{}",
            mem.profile,
            crate::fmt::format_size(mem.avail as f64),
            crate::fmt::format_size(mem.share as f64),
            crate::fmt::format_size(mem.target as f64),
            match opts.mem_margin {
                Some(m) => format!(
                    ", workload memory.low {} (--mem-margin {:.1}%)",
                    crate::fmt::format_size(mem.share as f64 * (1.0 - m).max(0.0)),
                    m * 100.0
                ),
                None => String::new(),
            }
        );
    }
}

/// Runs the pending jobs one by one, on the host as checked for each.
struct JobRunner<'a> {
    opts: &'a Options,
    cancel: &'a Cancel,
    result: &'a Path,
    reqs: Vec<SysReq>,
    host: Host,
    /// What `host`'s check was allowed to change.
    host_fix: Fix,
    sys_iocost: Option<IoCostKnobs>,
    mem: MemInfo,
    exe: PathBuf,
}

impl JobRunner<'_> {
    /// Runs one job and records it; false when it failed or stopped (the
    /// run ends there).
    fn run(
        &mut self,
        journal: &mut Journal,
        s: JobSpec,
        fix: Fix,
        printed: &mut Vec<JobData>,
    ) -> Result<bool, String> {
        let (opts, result) = (self.opts, self.result);
        if fix != self.host_fix {
            // The previous job's changes are undone and this job's made.
            std::mem::take(&mut self.host.restore).restore();
            self.host = probe(opts, &self.reqs, fix)?;
            self.host_fix = fix;
            eprintln!("{s}: system requirements checked again for its passive controls");
            announce_fixes(&self.host);
            apply_swappiness(opts, &mut self.host)?;
        }
        let b = bench(&s.kind)?;
        let host = &self.host;
        let mut ctx = self.job_ctx(journal, &s)?;
        let mut si = self.job_sysinfo(&s, b)?;
        let start = now_secs();
        // This job's latest earlier entry (incomplete, or completed with
        // other properties): a resumable bench picks up its record, and an
        // incomplete one's record is kept until the job records more.
        ctx.prev = journal
            .jobs
            .iter()
            .rev()
            .find(|d| d.same_job(&s.kind, s.id.as_deref()))
            .cloned();
        let mut data = JobData {
            spec: s.clone(),
            period: (start, start),
            sysinfo: serde_json::to_value(&si).map_err(|e| e.to_string())?,
            record: ctx
                .prev
                .as_ref()
                .filter(|d| !d.is_completed())
                .and_then(|d| d.record.clone()),
            result: None,
        };
        journal.upsert(data.clone());
        journal.save().map_err(|e| e.to_string())?;
        // A bench's record so far, saved in the journal file as the job's
        // incomplete entry (iocost-qos after each QoS run); the last one
        // stays the job's record if it then fails or is interrupted.
        let checkpointed: std::cell::RefCell<Option<serde_json::Value>> = Default::default();
        let template = data.clone();
        let checkpoint = |rec: &serde_json::Value| -> crate::Result<()> {
            let host = |e: crate::journal::JournalError| crate::Error::Host(e.to_string());
            let mut j = Journal::open(result).map_err(host)?;
            let mut d = template.clone();
            d.record = Some(rec.clone());
            d.period.1 = now_secs();
            j.upsert(d);
            j.save().map_err(host)?;
            *checkpointed.borrow_mut() = Some(rec.clone());
            Ok(())
        };
        ctx.checkpoint = Some(&checkpoint);
        eprintln!("{s}: running");
        let outcome = run_job(&s, &mut ctx);
        ctx.checkpoint = None;
        if let Some(rec) = checkpointed.borrow_mut().take() {
            data.record = Some(rec);
        }
        data.period.1 = now_secs();
        si.hashd = ctx.used_hashd.take();
        // The device's iocost state as the job leaves it (iocost-params and
        // protection apply theirs).
        si.iocost = Some(iocost_report_now(&host.cgroups, host.sysinfo.scr_devnr));
        data.sysinfo = match ctx.forward_sysinfo.take() {
            // As upstream: a job that only worked on another job's data
            // (iocost-tune on an iocost-qos result) carries that job's
            // sysinfo, the host and device that were measured.
            Some(v) => v,
            None => serde_json::to_value(&si).map_err(|e| e.to_string())?,
        };
        record_outcome(journal, data, outcome, b, result, printed)
    }

    /// The bench's context for job `s`: the host, the memory profile and
    /// the journal's knobs with the flags' overrides.
    fn job_ctx(&self, journal: &Journal, s: &JobSpec) -> Result<Ctx<'_>, String> {
        let (opts, host) = (self.opts, &self.host);
        let mut hashd: Option<HashdKnobs> = latest(journal, "hashd-params");
        if let Some(k) = hashd.as_mut() {
            override_hashd(k, opts, self.mem.share)?;
        }
        let mut iocost: Option<IoCostKnobs> = match &self.sys_iocost {
            Some(k) => Some(k.clone()),
            None => latest(journal, "iocost-params"),
        };
        if let (Some(o), Some(k)) = (&opts.iocost_qos, iocost.as_mut()) {
            k.qos = o.apply(&k.qos);
        }
        Ok(Ctx {
            opts,
            cancel: self.cancel,
            sysinfo: &host.sysinfo,
            cgroups: &host.cgroups,
            mem: self.mem,
            hashd,
            iocost,
            exe: self.exe.clone(),
            used_hashd: None,
            // Only iocost-tune solves on it; a ladder's job is large.
            qos: (s.kind == "iocost-tune")
                .then(|| {
                    journal
                        .jobs
                        .iter()
                        .rev()
                        .find(|d| d.spec.kind == "iocost-qos" && d.is_completed())
                        .cloned()
                })
                .flatten(),
            forward_sysinfo: None,
            prev: None,
            checkpoint: None,
            iocost_managed: None,
        })
    }

    /// Job `s`'s sysinfo: the requirements it missed, what the check
    /// fixed, and what ran degraded.
    fn job_sysinfo(&self, s: &JobSpec, b: &dyn Bench) -> Result<JobSysInfo, String> {
        let (opts, host, mem) = (self.opts, &self.host, self.mem);
        let job_missed: BTreeMap<SysReq, Vec<String>> = missed(&host.statuses)
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
        degraded.extend(mem_profile_note(opts, &mem));
        Ok(JobSysInfo {
            bench_version: env!("CARGO_PKG_VERSION").to_string(),
            sysreqs: b.hard().iter().chain(b.soft()).copied().collect(),
            sysreqs_missed: job_missed,
            sysreqs_report: Some(SysReqsReport {
                // Upstream requires it: what the job enforced.
                enforce: Some(EnforceConfig::from_passive(
                    s.passive
                        .as_deref()
                        .and_then(|p| spec::Passive::parse(p).ok())
                        .as_ref(),
                )),
                ..sysreqs_report(host)
            }),
            iocost: None,
            hashd: None,
            mem,
            swappiness: opts.swappiness.unwrap_or(host.sysinfo.swappiness),
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
        })
    }
}

/// Records a job's outcome in the journal; false when it failed or
/// stopped.
fn record_outcome(
    journal: &mut Journal,
    mut data: JobData,
    outcome: Result<Outcome, String>,
    b: &dyn Bench,
    result: &Path,
    printed: &mut Vec<JobData>,
) -> Result<bool, String> {
    let s = data.spec.clone();
    match outcome {
        Ok(Outcome::Done(record, result)) => {
            data.spec = b.spec_as_run(&data.spec, &record);
            data.record = Some(record);
            data.result = Some(result);
            journal.upsert(data.clone());
            journal.save().map_err(|e| e.to_string())?;
            print_summary(&data, printed);
            Ok(true)
        }
        Ok(Outcome::Partial(record, why)) => {
            if record.is_some() {
                data.record = record;
            }
            journal.upsert(data);
            journal.save().map_err(|e| e.to_string())?;
            eprintln!(
                "{s}: stopped: {why}; what it recorded is kept in {} (incomplete; a re-run redoes it)",
                result.display()
            );
            Ok(false)
        }
        Err(e) => {
            journal.upsert(data);
            journal.save().map_err(|e| e.to_string())?;
            eprintln!("{s}: failed: {e}");
            Ok(false)
        }
    }
}

/// `format`/`summary [SPEC...]`: every completed job, or those matching
/// the specs' kind and id.
pub fn cmd_format(opts: &Options, specs: &[String], full: bool) -> Result<String, crate::Error> {
    let result = opts
        .result
        .as_ref()
        .ok_or_else(|| crate::Error::Input("no result file: expected -r/--result FILE".into()))?;
    if !result.exists() {
        return Err(crate::Error::Input(format!(
            "result file {} does not exist",
            result.display()
        )));
    }
    let mut journal = Journal::open(result).map_err(|e| crate::Error::Input(e.to_string()))?;
    // The numbers as upstream reads them, so that every printed figure
    // rounds as upstream's does (a value one unit in the last place off can
    // print 99.82 for 99.81); nothing is written back.
    for d in &mut journal.jobs {
        for v in [&mut d.record, &mut d.result].into_iter().flatten() {
            crate::journal::upstream_floats(v);
        }
        crate::journal::upstream_floats(&mut d.sysinfo);
    }
    let mut out = String::new();
    if specs.is_empty() {
        for d in &journal.jobs {
            format_job_rstat(&mut out, d, full, opts.rstat);
        }
        return Ok(out);
    }
    for text in specs {
        let s = parse_format_spec(text)?;
        let d = journal
            .jobs
            .iter()
            .find(|d| d.spec.kind == s.kind && d.spec.id == s.id)
            .ok_or_else(|| crate::Error::Input(format!("No matching result for {text}")))?;
        format_job_props(&mut out, d, full, opts.rstat, &s.props, result)?;
    }
    Ok(out)
}

/// `study SPEC...`: each matching job's result studied again from its
/// record, the journal saved (atomically) and the summaries printed. As
/// upstream, the jobs must be complete; a job whose bench keeps no record
/// to study is left as it is, with a note on stderr. `solve SPEC...`
/// (`solve`) is the same with the solve step only: iocost-tune's fits and
/// solutions made again from its result's data; other kinds have no solve
/// step and are kept as they are.
pub fn cmd_study(opts: &Options, specs: &[String], solve: bool) -> Result<String, crate::Error> {
    let verb = if solve { "solve" } else { "study" };
    let result = opts
        .result
        .as_ref()
        .ok_or_else(|| crate::Error::Input("no result file: expected -r/--result FILE".into()))?;
    if specs.is_empty() {
        return Err(crate::Error::Input(format!(
            "{verb}: no job spec: expected KIND[:id=ID]... (as upstream, {verb} needs the jobs named)"
        )));
    }
    if !result.exists() {
        return Err(crate::Error::Input(format!(
            "result file {} does not exist",
            result.display()
        )));
    }
    let mut journal = Journal::open(result).map_err(|e| crate::Error::Input(e.to_string()))?;
    let mut out = String::new();
    let mut changed = false;
    for text in specs {
        let s = parse_spec(text)?;
        let i = journal
            .jobs
            .iter()
            .position(|d| d.spec.kind == s.kind && d.spec.id == s.id)
            .ok_or_else(|| crate::Error::Input(format!("No matching result for {text}")))?;
        let d = &journal.jobs[i];
        if !d.is_completed() {
            return Err(crate::Error::Input(format!(
                "{}: not complete; {verb} needs completed jobs (run it first)",
                d.spec
            )));
        }
        let b = bench(&s.kind)?;
        let (again, how) = if solve {
            (b.resolve(d, opts), "solved again from its data")
        } else {
            (
                b.restudy(d).map(|r| r.map(|res| (res, None))),
                "studied again from its record",
            )
        };
        match again {
            None if solve => eprintln!(
                "{}: nothing to solve: {} has no solve step, kept as it is",
                d.spec, s.kind
            ),
            None => eprintln!(
                "{}: nothing to study: its result is its record, kept as it is",
                d.spec
            ),
            Some(r) => {
                let (res, rec) =
                    r.map_err(|e| crate::Error::Input(format!("{}: cannot {verb}: {e}", d.spec)))?;
                let rec_changed = rec.is_some() && rec.as_ref() != d.record.as_ref();
                if Some(&res) != d.result.as_ref() || rec_changed {
                    eprintln!("{}: result {how}: changed", d.spec);
                    changed = true;
                } else {
                    eprintln!("{}: result {how}: unchanged", d.spec);
                }
                journal.jobs[i].result = Some(res);
                if let Some(rec) = rec {
                    journal.jobs[i].record = Some(rec);
                }
            }
        }
        out.push_str(&summary_text(std::slice::from_ref(&journal.jobs[i])));
    }
    if changed {
        journal
            .save()
            .map_err(|e| crate::Error::Input(e.to_string()))?;
    }
    Ok(out)
}

/// `deps`: every requirement, satisfied or missed, on this host.
pub fn cmd_deps(opts: &Options) -> Result<String, crate::Error> {
    opts_dir_check(opts).map_err(crate::Error::Input)?;
    let host = probe(opts, &SysReq::ALL, Fix::NONE).map_err(crate::Error::Input)?;
    check_dev(opts.dev.as_deref(), &opts.dir, &host.sysinfo.scr_dev)?;
    // As upstream: every requirement but DepsLinuxBuild (no bench needs a
    // kernel build), satisfied ones on the first line, then the missed ones
    // with what to do.
    let counted = |r: &SysReq| *r != SysReq::DepsLinuxBuild;
    let ok: Vec<&str> = host
        .statuses
        .iter()
        .filter(|(r, s)| counted(r) && !matches!(s, Status::Missed(_)))
        .map(|(r, _)| r.name())
        .collect();
    let mut out = format!(
        "Satisfied sysreqs ({}/{}):{}\n",
        ok.len(),
        host.statuses.keys().filter(|r| counted(r)).count(),
        ok.iter().map(|n| format!(" {n}")).collect::<String>()
    );
    let m: BTreeMap<SysReq, Vec<String>> = missed(&host.statuses)
        .into_iter()
        .filter(|(r, _)| counted(r))
        .collect();
    if !m.is_empty() {
        out.push_str(&format!(
            "\nMissed sysreqs: {}\n",
            m.keys().map(|r| r.name()).collect::<Vec<_>>().join(", ")
        ));
        for msgs in m.values() {
            for msg in msgs {
                out.push_str(&format!("    * {msg}\n"));
            }
        }
    }
    out.push('\n');
    out.push_str(&format!("Cgroup backend: {:?}\n", host.cgroups.kind()));
    for l in host.cgroups.limitations() {
        out.push_str(&format!("    * {l}\n"));
    }
    out.push_str(
        "\nWhat each bench needs (hard: refused without, unless --force; soft: runs degraded):\n",
    );
    for b in listed() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn study_restudies_results_from_records_and_saves_them() {
        use crate::bench::storage::{LoopRecord, StorageRecord};
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("r.json");
        let mut j = Journal::open(&path).unwrap();
        let g = 1u64 << 30;
        let rec = StorageRecord {
            loops: 1,
            runs: vec![LoopRecord {
                usage: 2 * g,
                size: 3 * g,
                used: true,
                ..LoopRecord::default()
            }],
            ..StorageRecord::default()
        };
        let job =
            |kind: &str, record: serde_json::Value, result: Option<serde_json::Value>| JobData {
                spec: parse_spec(kind).unwrap(),
                period: (1, 2),
                sysinfo: serde_json::Value::Null,
                record: Some(record),
                result,
            };
        // A stale result: the factor the record gives is 1.5.
        j.upsert(job(
            "storage",
            serde_json::to_value(&rec).unwrap(),
            Some(
                serde_json::json!({"mem_offload_factor": 9.0, "mem_usage_mean": 0.0,
                "mem_usage_stdev": 0.0, "mem_size_mean": 0.0, "mem_size_stdev": 0.0,
                "rbps_all": 0.0, "wbps_all": 0.0, "rbps_final": 0.0, "wbps_final": 0.0,
                "read_lat_mean": null, "write_lat_mean": null, "swap_peak": 0,
                "swap_full": false}),
            ),
        ));
        j.upsert(job(
            "hashd-params",
            serde_json::json!({}),
            Some(serde_json::json!(true)),
        ));
        j.upsert(job("iocost-params", serde_json::json!({}), None));
        j.save().unwrap();
        let opts = Options {
            result: Some(path.clone()),
            ..Options::default()
        };
        let out = cmd_study(&opts, &["storage".into(), "hashd-params".into()], false).unwrap();
        assert!(out.contains("factor=1.500"), "{out}");
        let back = Journal::open(&path).unwrap();
        assert_eq!(
            back.jobs[0].result.as_ref().unwrap()["mem_offload_factor"],
            1.5
        );
        assert_eq!(back.jobs[1].result, Some(serde_json::json!(true)));
        // Incomplete, absent, or no spec: refused.
        assert!(
            cmd_study(&opts, &["iocost-params".into()], false)
                .unwrap_err()
                .to_string()
                .contains("not complete")
        );
        assert!(
            cmd_study(&opts, &["protection".into()], false)
                .unwrap_err()
                .to_string()
                .contains("No matching result")
        );
        assert!(
            cmd_study(&opts, &[], false)
                .unwrap_err()
                .to_string()
                .contains("no job spec")
        );
    }

    #[test]
    fn protection_runs_iocost_params_and_hashd_params_first_as_upstream() {
        let kinds = |p: &[JobSpec]| p.iter().map(|s| s.kind.clone()).collect::<Vec<_>>();
        let run = |specs: &[&str], knobs: bool, model: bool, opts: &Options, fio: fn() -> bool| {
            let mut p: Vec<JobSpec> = specs.iter().map(|s| parse_spec(s).unwrap()).collect();
            let lines = add_nested(&mut p, knobs, model, false, true, opts, fio).unwrap();
            (kinds(&p), lines)
        };
        let opts = Options::default();
        let (k, _) = run(&["protection"], false, false, &opts, || true);
        assert_eq!(k, ["iocost-params", "hashd-params", "protection"]);
        // Nothing missing, or nothing needing them: nothing added.
        assert_eq!(
            run(&["protection"], true, true, &opts, || true).0,
            ["protection"]
        );
        assert_eq!(
            run(&["storage"], false, false, &opts, || true).0,
            ["storage"]
        );
        // Given in the run already: kept where the user put them.
        let (k, _) = run(&["protection", "iocost-params"], true, false, &opts, || {
            true
        });
        assert_eq!(k, ["protection", "iocost-params"]);
        // No fio, --test or --iocost-from-sys: the rate is assumed, said so
        // (the first two) and hashd-params still runs first.
        let (k, l) = run(&["protection"], false, false, &opts, || false);
        assert_eq!(k, ["hashd-params", "protection"]);
        assert!(l[0].contains("fio") && l[0].contains("assumed"), "{l:?}");
        let test = Options {
            test: true,
            ..Options::default()
        };
        let (k, l) = run(&["protection"], true, false, &test, || true);
        assert_eq!(k, ["protection"]);
        assert!(l[0].contains("--test"), "{l:?}");
        let sys = Options {
            iocost_from_sys: true,
            ..Options::default()
        };
        let (k, l) = run(&["protection"], true, false, &sys, || true);
        assert_eq!((k, l.len()), (vec!["protection".to_string()], 0));
    }
}
