//! The driver's runs: one instance searched (or run at fixed rates), or
//! autoscale's instances in parallel, lined up before their finals and
//! for the rerun at a fixed rate.

use crate::cli::{AUTOSCALE_BASE_PORT, COMPAT_CONNECTIONS, DEFAULT_PORT, DriverArgs, DriverModel};
use crate::leaf::proc_self;
use crate::leaf_process::{LeafProcess, status, wait_ready};
use crate::prober::{
    DriverProber, driver_workers, leaf_alive_check, rank_service, request_maker,
    settle_on_idle_leaf,
};
use crate::proto::leaf_client::LeafClient;
use crate::record::{
    AutoscaleInstance, AutoscaleRun, FeedSimRecord, InstanceRecord, InstanceResult, LeafStatus,
    RECORD_VERSION, Rerun, SearchRun,
};
use crate::setup::{
    Instance, autoscale_instances, check_bytes, check_memory, compat_threads, leaf_config, planned,
    search_config, target_of, topology,
};
use anyhow::{Context, bail};
use harness::{Outcome, Progress, Record, RunContext};
use load::csv::ProbeCsv;
use load::gate::Gate;
use load::hostspeed::SpeedSampler;
use load::report::{Reporter, final_line, searching_line};
use load::search::{Event, Phase, Prober, Search, SearchOutcome, run_fixed};
use load::{ProbeRecord, SearchConfig, ServiceProber, SloTarget};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the host's speed is sampled during a run.
const SPEED_EVERY: Duration = Duration::from_secs(5);

pub(crate) fn run_driver(a: &DriverArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    if a.driver == DriverModel::ClosedCompat
        && a.auto_workers
        && a.qps.is_empty()
        && a.driver_threads.is_some()
    {
        eprintln!(
            "warning: -l/--driver-threads does not size a search with -a: as upstream's search_qps.sh, the threads follow the rate (min(rate/4, max(round(nproc/5), 4)))"
        );
    }
    if let Some(n) = a.num_instances {
        return run_autoscale(a, ctx, n);
    }
    let (nproc, smt) = topology();
    let t = a.shape.threads(nproc, smt).map_err(anyhow::Error::msg)?;
    let target = target_of(a)?;
    let cpus = match &a.leaf_cpus {
        Some(list) => {
            let v = harness::machine::parse_cpu_list(list);
            if v.is_empty() {
                bail!("--leaf-cpus '{list}' is not a CPU list like 0-3,8");
            }
            Some(v)
        }
        None => None,
    };
    if a.leaf.is_none() {
        check_memory(&leaf_config(&a.shape, t), 1)?;
    }
    let inst = Instance {
        id: 0,
        port: a.port.unwrap_or(DEFAULT_PORT),
        cpus,
        threads: t,
        driver_threads: compat_threads(a, nproc, smt),
        runtime_threads: a.driver_threads.unwrap_or(1),
        csv: a.output.clone(),
        label: String::new(),
        log: None,
        rerun_files: None,
    };
    let progress = Progress::new("feedsim", Duration::from_secs(60));
    progress.set_total(planned(a, &search_config(a, target, t)));
    progress.output(&searching_line(&target));
    let speed = SpeedSampler::start(SPEED_EVERY);
    let run = drive_instance(a, &inst, target, ctx, &progress, None);
    let speed = speed.finish();
    progress.finish();
    let run = run?;
    if let Some(e) = &run.csv_error {
        eprintln!("warning: could not write every row to {}: {e}", run.csv);
    }
    let success = run.outcome.success;
    let record = FeedSimRecord::Search(Box::new(SearchRun {
        target,
        arrival: a.arrival,
        compat_driver_threads: (a.driver == DriverModel::ClosedCompat)
            .then_some(inst.driver_threads),
        driver_threads: Some(inst.runtime_threads),
        threads: t,
        instance: run,
        host_speed: speed,
    }));
    Ok(Outcome::measured(
        success,
        Record::of("feedsim", RECORD_VERSION, &record),
    ))
}

/// `feedsim_autoscale`: several pinned leaf instances searched in parallel.
fn run_autoscale(a: &DriverArgs, ctx: &RunContext, requested: i64) -> anyhow::Result<Outcome> {
    if a.leaf.is_some() {
        bail!("--num-instances starts its own leaves; it cannot be combined with --leaf");
    }
    if a.leaf_cpus.is_some() {
        bail!("--num-instances pins each instance itself; it cannot be combined with --leaf-cpus");
    }
    let cores = harness::machine::usable_physical_cores();
    let logical: usize = cores.iter().map(Vec::len).sum();
    let n = crate::cli::instances_for(requested, logical);
    let groups = harness::machine::split_cores(&cores, n).ok_or_else(|| {
        anyhow::anyhow!(
            "--num-instances {n} needs at least {n} physical cores; this process may use {}",
            cores.len()
        )
    })?;
    let smt = cores.iter().any(|c| c.len() > 1);
    let base = a.port.unwrap_or(AUTOSCALE_BASE_PORT);
    if usize::from(base) + n - 1 > usize::from(u16::MAX) {
        bail!(
            "ports {base}..{} do not fit under 65535",
            usize::from(base) + n - 1
        );
    }
    let target = target_of(a)?;
    let (instances, total) = autoscale_instances(a, groups, smt, base)?;
    check_bytes(total as u64, &format!("{n} instances"))?;
    let progress = Progress::new("feedsim", Duration::from_secs(60));
    progress.set_total(planned(a, &search_config(a, target, instances[0].threads)));
    progress.println(&format!(
        "autoscale: {n} instance(s) on {} physical cores: {}",
        cores.len(),
        instances
            .iter()
            .map(|i| format!(
                "{} on CPUs {} (port {})",
                i.id + 1,
                harness::machine::format_cpu_list(i.cpus.as_deref().unwrap_or(&[])),
                i.port
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    progress.output(&searching_line(&target));
    let rv = Rendezvous::new(n);
    let cpu_before = cpu_seconds_self();
    let speed = SpeedSampler::start(SPEED_EVERY);
    let runs = drive_instances(a, &instances, target, ctx, &progress, &rv);
    let speed = speed.finish();
    let driver_cpu = cpu_seconds_self() - cpu_before;
    progress.finish();
    let stopped = ctx.cancel.is_stopped();
    let first_driver_threads = instances.first().map(|i| i.driver_threads);
    let instances = instances
        .into_iter()
        .zip(runs)
        .map(|(inst, run)| {
            if let Ok(r) = &run
                && let Some(e) = &r.csv_error
            {
                eprintln!("warning: could not write every row to {}: {e}", r.csv);
            }
            AutoscaleInstance {
                label: inst.label,
                port: inst.port,
                cpus: inst.cpus.unwrap_or_default(),
                threads: inst.threads,
                result: match run {
                    Ok(r) => InstanceResult::Ran(Box::new(r)),
                    Err(e) => InstanceResult::Failed(format!("{e:#}")),
                },
            }
        })
        .collect();
    let record = AutoscaleRun {
        target,
        arrival: a.arrival,
        compat_driver_threads: (a.driver == DriverModel::ClosedCompat)
            .then_some(first_driver_threads)
            .flatten(),
        driver_threads: Some(a.driver_threads.unwrap_or(1)),
        instances,
        driver_cpu_seconds: driver_cpu,
        host_speed: speed,
        stopped,
        fixed_qps: !a.qps.is_empty(),
    };
    let success = record.success();
    Ok(Outcome::measured(
        success,
        Record::of(
            "feedsim",
            RECORD_VERSION,
            &FeedSimRecord::Autoscale(Box::new(record)),
        ),
    ))
}

/// Drives every instance on its own thread; each leaves the rendezvous
/// when done, failed or not, so that none waits for it.
fn drive_instances(
    a: &DriverArgs,
    instances: &[Instance],
    target: SloTarget,
    ctx: &RunContext,
    progress: &Progress,
    rv: &Rendezvous,
) -> Vec<anyhow::Result<InstanceRecord>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = instances
            .iter()
            .map(|inst| {
                s.spawn(move || {
                    let r = drive_instance(a, inst, target, ctx, progress, Some(rv));
                    // Failed or not, never leave the others waiting.
                    rv.leave(inst.id);
                    if let Err(e) = &r {
                        progress.println(&format!("{}failed: {e:#}", inst.label));
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(anyhow::anyhow!("the instance's driver thread panicked"))
                })
            })
            .collect()
    })
}

/// Starts (or reaches) one leaf, waits until it is ready, searches (or runs
/// the fixed rates), and with a rendezvous lines up with the other
/// instances before the final run and for the rerun decision.
fn drive_instance(
    a: &DriverArgs,
    inst: &Instance,
    target: SloTarget,
    ctx: &RunContext,
    progress: &Progress,
    rv: Option<&Rendezvous>,
) -> anyhow::Result<InstanceRecord> {
    let t = inst.threads;
    let (addr, mut leaf) = start_leaf(a, inst, ctx)?;
    let label = inst.label.clone();
    let println = |l: &str| progress.println(&format!("{label}{l}"));
    let log = InstanceLog::default();
    if let Some(p) = &inst.log {
        log.open(&ctx.output_path(p))?;
        log.line(&searching_line(&target));
    }
    // The search's lines are upstream's output: stdout, as run.sh prints
    // them (and, in autoscale, the instance's log, as upstream's
    // run-feedsim-multi.sh keeps each run.sh's output).
    let output = |l: &str| {
        log.line(l);
        progress.output(&format!("{label}{l}"))
    };
    let phase = |l: &str| progress.phase(&format!("{label}{l}"));
    let probe_phase = |l: &str, d| progress.phase_for(&format!("{label}{l}"), d);
    let rt = driver_runtime(inst, rv)?;
    let mut client = rt.block_on(wait_ready(addr, &mut leaf, ctx, &println, &phase))?;
    let compat = a.driver == DriverModel::ClosedCompat;
    // Closed-compat: one connection per slot (threads x 4, depth 1).
    let connections = if compat {
        inst.driver_threads * COMPAT_CONNECTIONS
    } else {
        2
    };
    let connect = |rt: &tokio::runtime::Runtime| {
        rt.block_on(rpc::client::connect_pool(addr, connections))
            .with_context(|| format!("cannot connect to the leaf at {addr}"))
    };
    let svc = rank_service(connect(&rt)?);
    // Instances draw different request streams.
    let seed = a.shape.seed.wrapping_add(inst.id as u64 * 1_000_003);
    let auto = a.auto_workers;
    // run.sh sizes its driver by rate only in a search with -a (its -q
    // runs are sized once, by the rate: see `compat_threads`).
    let compat_auto = auto && a.qps.is_empty();
    let leaf_log = leaf.as_ref().map(|l| l.log.display().to_string());
    // Shared with the prober's liveness check; this scope keeps the leaf alive
    // until the metrics are collected, then dropping it stops the leaf.
    let leaf = Arc::new(std::sync::Mutex::new(leaf));
    let search_cfg = search_config(a, target, t);
    let drain = Duration::from_secs_f64((2.0 * target.latency_ms / 1000.0).max(2.0));
    let stop = ctx.cancel.flag();
    let prober = ServiceProber {
        svc,
        make: request_maker(seed),
        workers: driver_workers(auto),
        max_in_flight: 100_000,
        drain,
        send_ahead: None,
        seed,
        stop: stop.clone(),
        check: leaf_alive_check(leaf.clone()),
        settle: Some(settle_on_idle_leaf(client.clone())),
    };
    let mut prober = DriverProber {
        inner: prober,
        compat: compat.then_some((inst.driver_threads, compat_auto)),
    };
    let csv_path = ctx.output_path(&inst.csv);
    let csv = ProbeCsv::create(&csv_path)
        .with_context(|| format!("cannot create {}", csv_path.display()))?;
    let status_before = rt.block_on(status(&mut client)).ok().map(LeafStatus::from);
    let cpu_before = cpu_seconds_self();
    let reporter = std::cell::RefCell::new(Reporter::new(csv, &output, &probe_phase));
    let mut perf = crate::perf_record::requested()
        .then(|| crate::perf_record::PerfRecord::new(ctx.out_dir.clone(), a.qps.len() == 1));
    let mut on_event = |e: Event<'_>| {
        if let Some(p) = perf.as_mut() {
            p.observe(&e);
        }
        reporter.borrow_mut().handle(e)
    };
    let outcome = rt.block_on(search_or_fixed(
        a,
        inst.id,
        rv,
        &search_cfg,
        &mut prober,
        &mut on_event,
        &stop,
    ));
    // The instance's log ends as run.sh's output does: with its final line.
    if let Some(f) = &outcome.final_probe {
        log.line(&final_line(f));
    }
    let mut rerun = None;
    // The leaf figures cover the search's leaf (a rerun starts fresh ones).
    let mut status_after = None;
    if let Some(rv) = rv {
        if let Some(q) = rerun_decision(rv, inst.id, a, &outcome, &stop) {
            println(&format!(
                "the slowest instance reached under 80% of the fastest's QPS (an instance without a result counts as 0): rerunning every instance with a fresh leaf at {q:.2} QPS (the highest requested, plus 1, truncated)"
            ));
            status_after = rt.block_on(status(&mut client)).ok().map(LeafStatus::from);
            // As upstream reruns the whole command: fresh leaves, their
            // datasets built again, and the usual warm-up.
            if a.leaf.is_none() {
                client = respawn_leaf(a, inst, ctx, &leaf, addr, &rt, &println, &phase)?;
                prober.inner.svc = rank_service(connect(&rt)?);
            }
            let lined_up = rv.before_rerun.arrive(inst.id, (), &stop).is_ok();
            // As upstream's rerun (run with -q): its CSV and log get the
            // fixqps- names.
            if let Some(files) = &inst.rerun_files {
                open_rerun_files(files, ctx, &reporter, &log, &println);
                log.line(&searching_line(&target));
            }
            if lined_up {
                let cfg = search_cfg.clone();
                let (w, d) = (cfg.probe_warmup, cfg.final_duration);
                let r = rt.block_on(run_fixed(cfg, &mut prober, &[q], w, d, &mut on_event));
                if let Some(f) = r.probes.iter().rev().find(|p| p.phase == Phase::Fixed) {
                    log.line(&final_line(f));
                }
                rerun = Some(Rerun { qps: q, outcome: r });
            }
            rv.before_rerun.leave(inst.id);
        }
        rv.after_final.leave(inst.id);
        rv.before_rerun.leave(inst.id);
    }
    let driver_cpu_seconds = cpu_seconds_self() - cpu_before;
    if status_after.is_none() {
        status_after = rt.block_on(status(&mut client)).ok().map(LeafStatus::from);
    }
    drop(leaf);
    Ok(InstanceRecord {
        outcome,
        rerun,
        status_before,
        status_after,
        driver_cpu_seconds,
        csv: csv_path.display().to_string(),
        csv_error: reporter.borrow().csv_error.as_ref().map(|e| e.to_string()),
        leaf_log,
    })
}

fn cpu_seconds_self() -> f64 {
    proc_self().1
}

/// An instance's log file (autoscale), written line by line as its output
/// is printed; swapped for the rerun's.
#[derive(Default)]
struct InstanceLog(std::sync::Mutex<Option<std::io::BufWriter<std::fs::File>>>);

impl InstanceLog {
    fn open(&self, path: &std::path::Path) -> anyhow::Result<()> {
        let f = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::io::BufWriter::new(f));
        Ok(())
    }

    fn line(&self, l: &str) {
        use std::io::Write;
        if let Some(w) = self.0.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            // A log that cannot be written is not worth stopping the run.
            let _ = writeln!(w, "{l}").and_then(|()| w.flush());
        }
    }
}

/// Where parallel instances line up: before their final runs, and after
/// them to decide together whether to rerun at a fixed rate.
struct Rendezvous {
    before_final: Arc<Gate<()>>,
    after_final: Arc<Gate<Option<(f64, f64)>>>,
    /// Fresh leaves ready, before the rerun's fixed rate.
    before_rerun: Arc<Gate<()>>,
}

impl Rendezvous {
    fn new(n: usize) -> Self {
        Rendezvous {
            before_final: Gate::new(n),
            after_final: Gate::new(n),
            before_rerun: Gate::new(n),
        }
    }

    fn leave(&self, id: usize) {
        self.before_final.leave(id);
        self.after_final.leave(id);
        self.before_rerun.leave(id);
    }
}

/// Pins the calling thread to `cpus` (the autoscale driver shares its
/// instance's CPUs, as run.sh runs under the instance's taskset).
fn pin_current_thread(cpus: &[usize]) -> nix::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    for &c in cpus {
        set.set(c)?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
}

/// The leaf an instance drives: `--leaf`'s address, or a leaf process
/// started here on the instance's port and CPUs.
fn start_leaf(
    a: &DriverArgs,
    inst: &Instance,
    ctx: &RunContext,
) -> anyhow::Result<(SocketAddr, Option<LeafProcess>)> {
    match &a.leaf {
        Some(hp) => {
            let addr: SocketAddr = hp.parse().with_context(|| {
                format!("--leaf '{hp}' is not HOST:PORT (an IP address and a port)")
            })?;
            Ok((addr, None))
        }
        None => {
            let addr = SocketAddr::new(rpc::server::LOOPBACK, inst.port);
            let p =
                LeafProcess::spawn(&a.shape, inst.threads, inst.port, inst.cpus.as_deref(), ctx)?;
            Ok((addr, Some(p)))
        }
    }
}

/// The driver's runtime. Autoscale: the driver runs on its instance's
/// CPUs, as run.sh does under the instance's taskset.
fn driver_runtime(
    inst: &Instance,
    rv: Option<&Rendezvous>,
) -> anyhow::Result<tokio::runtime::Runtime> {
    let pin = rv.and(inst.cpus.clone());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(inst.runtime_threads)
        .thread_name("feedsim-driver")
        .enable_all()
        .on_thread_start(move || {
            if let Some(c) = &pin
                && let Err(e) = pin_current_thread(c)
            {
                eprintln!("warning: cannot pin the driver to CPUs {c:?}: {e}");
            }
        })
        .build()
        .context("cannot start the tokio runtime")
}

/// The search, or `-q`'s fixed rates; with a rendezvous, the search lines
/// up with the other instances before its final run.
async fn search_or_fixed<P: Prober>(
    a: &DriverArgs,
    id: usize,
    rv: Option<&Rendezvous>,
    search_cfg: &SearchConfig,
    prober: &mut P,
    on_event: &mut dyn FnMut(Event<'_>),
    stop: &Arc<std::sync::atomic::AtomicBool>,
) -> SearchOutcome {
    if a.qps.is_empty() {
        let search = Search::new(search_cfg.clone(), prober, on_event);
        let search = match rv {
            Some(rv) => {
                let (gate, stop) = (rv.before_final.clone(), stop.clone());
                search.before_final(move || {
                    gate.arrive(id, (), &stop).map(|_| ()).map_err(|_| {
                        load::Error::Stopped(
                            "interrupted while waiting for the other instances".to_string(),
                        )
                    })
                })
            }
            None => search,
        };
        search.run().await
    } else {
        let d = Duration::from_secs_f64(a.duration as f64);
        let w = search_cfg.probe_warmup;
        let out = run_fixed(search_cfg.clone(), prober, &a.qps, w, d, on_event).await;
        fixed_outcome(out, a.qps.len())
    }
}

/// Autoscale, after the final run: lines up with the other instances and
/// returns the rate every instance reruns at when they diverged.
fn rerun_decision(
    rv: &Rendezvous,
    id: usize,
    a: &DriverArgs,
    outcome: &SearchOutcome,
    stop: &Arc<std::sync::atomic::AtomicBool>,
) -> Option<f64> {
    rv.before_final.leave(id);
    let mine = outcome
        .final_probe
        .as_ref()
        .map(|f| (f.requested_qps, f.achieved_qps));
    // Only a search is rerun, as upstream (never fixed rates).
    let decided = if outcome.interrupted || !a.qps.is_empty() {
        None
    } else {
        rv.after_final.arrive(id, mine, stop).ok()
    };
    // An instance that left (its driver failed) had no final either.
    let all: Vec<Option<(f64, f64)>> = decided
        .unwrap_or_default()
        .into_iter()
        .map(Option::flatten)
        .collect();
    rerun_rate(&all)
}

/// The fixed rate every instance reruns at when the slowest instance's
/// final achieved QPS is under 80% of the fastest's: the highest requested
/// rate. `finals` holds each instance's (requested, achieved) final, `None`
/// for instances without one.
pub fn rerun_rate(finals: &[Option<(f64, f64)>]) -> Option<f64> {
    if finals.len() < 2 {
        return None;
    }
    // As run.sh's analysis: an instance without a final counts as 0 in
    // min_qps; max_qps and the highest requested rate come from the others.
    let got: Vec<(f64, f64)> = finals.iter().flatten().copied().collect();
    let max_ach = got.iter().map(|x| x.1).fold(0.0, f64::max);
    let min_ach = if got.len() < finals.len() {
        0.0
    } else {
        got.iter().map(|x| x.1).fold(f64::MAX, f64::min)
    };
    let max_req = got.iter().map(|x| x.0).fold(0.0, f64::max);
    // `echo "(max_req_qps + 1) / 1" | bc`: integer division truncates.
    (min_ach < 0.8 * max_ach).then(|| (max_req + 1.0).trunc())
}

/// Replaces the instance's leaf with a fresh one (its datasets built
/// again) and waits until it is ready.
#[allow(clippy::too_many_arguments)]
fn respawn_leaf(
    a: &DriverArgs,
    inst: &Instance,
    ctx: &RunContext,
    leaf: &std::sync::Mutex<Option<LeafProcess>>,
    addr: SocketAddr,
    rt: &tokio::runtime::Runtime,
    println: &dyn Fn(&str),
    phase: &dyn Fn(&str),
) -> anyhow::Result<LeafClient<tonic::transport::Channel>> {
    let mut g = leaf.lock().unwrap_or_else(|e| e.into_inner());
    *g = None;
    *g = Some(LeafProcess::spawn(
        &a.shape,
        inst.threads,
        inst.port,
        inst.cpus.as_deref(),
        ctx,
    )?);
    rt.block_on(wait_ready(addr, &mut g, ctx, println, phase))
}

/// Points the reporter and the instance's log at the rerun's files (`csv`,
/// `lines`); a file that cannot be created is warned about.
fn open_rerun_files(
    (csv, lines): &(PathBuf, PathBuf),
    ctx: &RunContext,
    reporter: &std::cell::RefCell<Reporter<'_>>,
    log: &InstanceLog,
    println: &dyn Fn(&str),
) {
    let csv = ctx.output_path(csv);
    match ProbeCsv::create(&csv) {
        Ok(c) => reporter.borrow_mut().set_csv(c),
        Err(e) => println(&format!(
            "warning: cannot create {}: {e}; the rerun's rows go to the search's CSV",
            csv.display()
        )),
    }
    if let Err(e) = log.open(&ctx.output_path(lines)) {
        println(&format!("warning: {e:#}"));
    }
}

/// A fixed-rate run (`-q`) reported as upstream does: each rate's figures
/// whether or not it met the target, the `final` result being the last rate
/// run, and success when every rate was measured (completed with replies);
/// whether each met the target stays in its probe's `passed` (see
/// [`fixed_target_met`](crate::record::fixed_target_met)).
pub fn fixed_outcome(mut out: SearchOutcome, rates: usize) -> SearchOutcome {
    // A probe cut short by Ctrl-C (the last one filed) is no result.
    let whole = out.probes.len() - usize::from(out.interrupted && !out.probes.is_empty());
    let fixed: Vec<&ProbeRecord> = out.probes[..whole]
        .iter()
        .filter(|p| p.phase == Phase::Fixed)
        .collect();
    let measured = fixed.len() == rates && fixed.iter().all(|p| p.total_queries > 0);
    out.final_probe = fixed.last().map(|p| (*p).clone());
    out.success = rates > 0 && measured && out.failure.is_none() && !out.interrupted;
    if out.failure.is_none() && !measured {
        out.failure = Some(match fixed.iter().find(|p| p.total_queries == 0) {
            Some(p) => format!(
                "no reply was measured at {:.2} QPS ({} errors, {} dropped)",
                p.requested_qps, p.errors, p.dropped
            ),
            None => format!("{} of {rates} rate(s) were run", fixed.len()),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{instance, probe};
    use crate::record::fixed_target_met;

    #[test]
    fn rerun_only_when_the_slowest_is_under_80_percent_of_the_fastest() {
        // 7.9 < 0.8 x 10: rerun at the highest requested rate + 1,
        // truncated (run.sh's `(max_req_qps + 1) / 1` in bc).
        let f = [Some((10.5, 10.0)), Some((8.0, 7.9))];
        assert_eq!(rerun_rate(&f), Some(11.0));
        // 8.0 is exactly 80%: no rerun.
        assert_eq!(rerun_rate(&[Some((10.0, 10.0)), Some((8.2, 8.0))]), None);
        // An instance without a result counts as 0: rerun.
        assert_eq!(rerun_rate(&[Some((10.0, 10.0)), None]), Some(11.0));
        assert_eq!(
            rerun_rate(&[Some((9.0, 9.0)), Some((9.2, 9.1)), None]),
            Some(10.0)
        );
        // No result at all (0 < 0.8 x 0 is false), or a single instance.
        assert_eq!(rerun_rate(&[None, None]), None);
        assert_eq!(rerun_rate(&[Some((10.0, 2.0))]), None);
        assert_eq!(rerun_rate(&[]), None);
    }

    fn fixed_run(probes: Vec<ProbeRecord>, failure: Option<&str>) -> SearchOutcome {
        SearchOutcome {
            probes,
            final_probe: None,
            final_series: Vec::new(),
            peak_qps: 0.0,
            success: false,
            interrupted: false,
            failure: failure.map(String::from),
        }
    }

    #[test]
    fn a_fixed_run_reports_its_last_rate_and_succeeds_when_every_rate_was_measured() {
        let warm = probe(Phase::Warmup, 0.0, 20.0, 300.0, true);
        let low = probe(Phase::Fixed, 4.0, 4.0, 350.0, true);
        let high = probe(Phase::Fixed, 9.0, 8.5, 720.0, false);
        // The second rate missed the target: still measured and reported.
        let out = fixed_outcome(fixed_run(vec![warm.clone(), low.clone(), high], None), 2);
        assert!(out.success, "{:?}", out.failure);
        assert_eq!(out.failure, None);
        let f = out.final_probe.as_ref().unwrap();
        assert_eq!((f.requested_qps, f.achieved_qps), (9.0, 8.5));
        assert_eq!(fixed_target_met(&out.probes), Some(false));
        // The last rate is reported even when an earlier one was higher.
        let top = probe(Phase::Fixed, 12.0, 11.0, 900.0, false);
        let out = fixed_outcome(fixed_run(vec![warm.clone(), top, low.clone()], None), 2);
        assert!(out.success);
        assert_eq!(out.final_probe.as_ref().unwrap().requested_qps, 4.0);
        // All met: target_met; a search has no such flag.
        assert_eq!(fixed_target_met(&[warm.clone(), low.clone()]), Some(true));
        assert_eq!(fixed_target_met(std::slice::from_ref(&warm)), None);
        // A rate that could not be measured fails the run, and the rates
        // measured before it are still reported.
        let out = fixed_outcome(
            fixed_run(vec![warm.clone(), low.clone()], Some("the leaf exited")),
            2,
        );
        assert!(!out.success);
        assert_eq!(out.failure.as_deref(), Some("the leaf exited"));
        assert_eq!(out.final_probe.as_ref().unwrap().requested_qps, 4.0);
        let mut dead = probe(Phase::Fixed, 6.0, 0.0, 0.0, false);
        dead.errors = 60;
        let out = fixed_outcome(fixed_run(vec![warm, low, dead], None), 2);
        assert!(!out.success);
        assert!(
            out.failure
                .as_deref()
                .unwrap()
                .contains("no reply was measured at 6.00 QPS (60 errors"),
            "{:?}",
            out.failure
        );
        // A rate cut short by Ctrl-C is not reported.
        let mut cut = fixed_run(
            vec![
                probe(Phase::Fixed, 4.0, 4.0, 350.0, true),
                probe(Phase::Fixed, 5.0, 5.0, 360.0, false),
            ],
            Some("interrupted"),
        );
        cut.interrupted = true;
        let out = fixed_outcome(cut, 2);
        assert!(!out.success);
        assert_eq!(out.final_probe.as_ref().unwrap().requested_qps, 4.0);
    }

    #[test]
    fn a_fixed_run_reports_every_rate_and_the_verdict_apart() {
        let mut rec = instance(None);
        rec.outcome = fixed_outcome(
            fixed_run(
                vec![
                    probe(Phase::Fixed, 4.0, 4.0, 350.0, true),
                    probe(Phase::Fixed, 9.0, 8.5, 720.0, false),
                ],
                None,
            ),
            2,
        );
        let m = serde_json::to_value(crate::metrics::InstanceMetrics::of(&rec, false)).unwrap();
        assert_eq!(m["success"], true);
        assert_eq!(m["target_met"], false);
        assert_eq!(m["final_requested_qps"], 9.0);
        assert_eq!(m["final_achieved_qps"], 8.5);
        assert_eq!(m["final_latency_msec"], 720.0);
        let passed: Vec<_> = m["probes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["requested_qps"].as_f64().unwrap(),
                    p["passed"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(passed, [(4.0, true), (9.0, false)]);
    }
}
