//! The `feedsim` workload: `rackbench feedsim leaf` serves, `rackbench
//! feedsim` (upstream run.sh) starts a leaf process, waits until it reports
//! ready, and searches for the highest rate meeting the latency target.

use crate::cli::{AUTOSCALE_BASE_PORT, DEFAULT_PORT, DriverArgs, LeafArgs, ShapeArgs, Threads};
use crate::dataset::Shape;
use crate::leaf::{LeafConfig, LeafService, LeafState, proc_self};
use crate::proto::leaf_client::LeafClient;
use crate::proto::{RankRequest, StatusReply, StatusRequest};
use anyhow::{Context, bail};
use clap::Parser;
use harness::{Outcome, Progress, Record, RunContext, Workload};
use load::csv::ProbeCsv;
use load::gate::Gate;
use load::hostspeed::{HostSpeed, SpeedSampler};
use load::report::{
    Reporter, SearchRecord, failure_line, final_line, searching_line, write_search,
};
use load::search::{Event, Phase, Search, SearchOutcome, run_fixed};
use load::{Mode, Percentile, ProbeRecord, SearchConfig, ServiceProber, SloTarget};
use rand::RngCore;
use rand::SeedableRng;
use serde_json::{Map, Value, json};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Request;

/// Upstream's baseline: score = final_achieved_qps / 57.
pub const BASELINE_QPS: f64 = 57.0;
/// Longest wait for the leaf to become idle between probes.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
/// Bytes of random payload in each request.
pub const REQUEST_BYTES: usize = 3000;

pub struct FeedSim;

fn parse<T: Parser>(name: &str, args: &[String]) -> anyhow::Result<T> {
    T::try_parse_from(std::iter::once(name.to_string()).chain(args.iter().cloned()))
        .map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))
}

enum Parsed {
    Leaf(LeafArgs),
    Driver(Box<DriverArgs>),
}

fn parse_any(args: &[String]) -> anyhow::Result<Parsed> {
    match args.first().map(String::as_str) {
        Some("leaf") => Ok(Parsed::Leaf(parse("rackbench feedsim leaf", &args[1..])?)),
        _ => Ok(Parsed::Driver(Box::new(parse("rackbench feedsim", args)?))),
    }
}

impl Workload for FeedSim {
    fn name(&self) -> &'static str {
        "feedsim"
    }

    fn description(&self) -> &'static str {
        "FeedSim ranking leaf: max QPS with p95 <= 500 ms"
    }

    fn help(&self) -> String {
        use clap::CommandFactory;
        format!(
            "{}\n\n{}",
            DriverArgs::command().render_long_help(),
            LeafArgs::command().render_help()
        )
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        match parse_any(args)? {
            Parsed::Leaf(a) => a
                .shape
                .threads(1, false)
                .map(|_| ())
                .map_err(anyhow::Error::msg),
            Parsed::Driver(a) => check_driver(&a),
        }
    }

    fn format(&self, record: &Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        let r: FeedSimRecord = record.decode(self.name(), RECORD_VERSION)?;
        write_record(&r, out)?;
        Ok(())
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        match parse_any(args)? {
            Parsed::Leaf(a) => run_leaf(&a, ctx),
            Parsed::Driver(a) => {
                check_driver(&a)?;
                run_driver(&a, ctx)
            }
        }
    }
}

fn check_driver(a: &DriverArgs) -> anyhow::Result<()> {
    a.shape.threads(1, false).map_err(anyhow::Error::msg)?;
    a.shape.target_from_s().map_err(anyhow::Error::msg)?;
    if let Some(q) = a.qps.iter().find(|q| q.is_nan() || **q <= 0.0) {
        bail!("-q values must be positive, got {q}");
    }
    if !(a.tolerance > 0.0 && a.tolerance < 0.5) {
        bail!("--tolerance must be in (0, 0.5)");
    }
    if !(0.0..1.0).contains(&a.close_call) {
        bail!("--close-call must be in [0, 1), got {}", a.close_call);
    }
    if !(0.0..1.0).contains(&a.steady_tail) {
        bail!("--steady-tail must be in [0, 1), got {}", a.steady_tail);
    }
    if !(0.0..1.0).contains(&a.warmup_steady) {
        bail!("--warmup-steady must be in [0, 1), got {}", a.warmup_steady);
    }
    Ok(())
}

/// Logical CPUs usable and whether SMT is on.
fn topology() -> (usize, bool) {
    (
        harness::machine::usable_cpus(),
        harness::machine::MachineInfo::collect().threads_per_core > 1,
    )
}

fn leaf_config(s: &ShapeArgs, t: Threads) -> LeafConfig {
    LeafConfig {
        serving_threads: t.serving,
        ranking_threads: t.ranking,
        ser_threads: t.ser,
        shape: Shape {
            scale: s.scale,
            chase_entries: s.chase_entries,
            huge_pages: !s.no_huge_pages,
            ..Shape::default()
        },
        graph_subset: s.graph_subset,
        num_objects: s.num_objects,
        icache_iterations: s.icache_iterations,
        io_wait: Duration::from_millis(s.io_wait_ms),
        seed: s.seed,
        ..LeafConfig::default()
    }
}

/// Refuses a dataset that does not fit in available memory.
fn check_memory(cfg: &LeafConfig, instances: usize) -> anyhow::Result<()> {
    check_bytes(
        cfg.dataset_bytes() as u64 * instances as u64,
        &format!(
            "{} serving threads x {:.0} MiB at scale {}",
            cfg.serving_threads,
            cfg.shape.bytes() as f64 / (1u64 << 20) as f64,
            cfg.shape.scale
        ),
    )
}

/// Refuses `need` bytes of datasets (made of `what`) when they do not fit
/// in 90% of the available memory.
fn check_bytes(need: u64, what: &str) -> anyhow::Result<()> {
    if let Some(avail) = harness::machine::mem_available()
        && need > avail / 10 * 9
    {
        bail!(
            "the leaf's datasets need {:.1} GiB ({what}), but only {:.1} GiB of memory is available; lower -t or --scale",
            need as f64 / (1u64 << 30) as f64,
            avail as f64 / (1u64 << 30) as f64
        );
    }
    Ok(())
}

fn runtime(threads: usize, name: &str) -> anyhow::Result<tokio::runtime::Runtime> {
    rpc::runtime(threads, name).context("cannot start the tokio runtime")
}

fn run_leaf(a: &LeafArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    let (nproc, smt) = topology();
    let t = a.shape.threads(nproc, smt).map_err(anyhow::Error::msg)?;
    let cfg = leaf_config(&a.shape, t);
    check_memory(&cfg, 1)?;
    let rt = runtime(2, "leaf-grpc")?;
    let state = LeafState::new(cfg.clone());
    let running = {
        let _g = rt.enter();
        let bound = match a.bind {
            Some(ip) => rpc::server::bind(SocketAddr::new(ip, a.port))?,
            None => rpc::server::bind_loopback(a.port)?,
        };
        let router = tonic::transport::Server::builder()
            .add_service(LeafService(state.clone()).into_server());
        rpc::server::spawn(router, bound)
    };
    eprintln!(
        "leaf: building {} datasets ({:.0} MiB each: 2^{} nodes x {} edges, {} chase entries) with threads -t {} -c {} -s {}",
        cfg.serving_threads,
        cfg.shape.bytes() as f64 / (1u64 << 20) as f64,
        cfg.shape.scale,
        cfg.shape.degree,
        cfg.shape.chase_entries,
        t.serving,
        t.ranking,
        t.ser
    );
    let took = state.build(&|done, total| eprintln!("leaf: dataset {done}/{total} built"));
    eprintln!(
        "leaf: datasets built in {:.1} s ({:.0} MiB); ready on {}",
        took.as_secs_f64(),
        state.dataset_bytes() as f64 / (1u64 << 20) as f64,
        running.addr
    );
    while !ctx.cancel.is_stopped() && !running.is_finished() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let failed = running.is_finished();
    let _ = rt.block_on(running.shutdown());
    let (rss, cpu) = proc_self();
    let mut m = Map::new();
    m.insert("build_seconds".into(), json!(took.as_secs_f64()));
    m.insert("dataset_bytes".into(), json!(state.dataset_bytes()));
    m.insert("rss_bytes".into(), json!(rss));
    m.insert("cpu_seconds".into(), json!(cpu));
    if failed {
        bail!("the leaf's server stopped unexpectedly");
    }
    Ok(Outcome {
        metrics: m,
        success: true,
        record: None,
    })
}

/// The leaf process this driver started; stopped (only it) on drop.
struct LeafProcess {
    child: Child,
    log: std::path::PathBuf,
}

impl LeafProcess {
    fn spawn(
        shape: &ShapeArgs,
        t: Threads,
        port: u16,
        cpus: Option<&[usize]>,
        ctx: &RunContext,
    ) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the rackbench executable")?;
        // The leaf's log is one of the harness's artifacts; a direct run
        // (which writes only upstream's files) keeps it in the temp folder.
        let log = ctx
            .artifacts
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join(format!("feedsim_leaf_{port}.log"));
        let out = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut cmd = Command::new(exe);
        cmd.args([
            "feedsim",
            "leaf",
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args(shape.to_leaf_args(t))
        .env_remove("RACKBENCH_REPORT")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
        let cpus: Option<Vec<usize>> = cpus.map(<[usize]>::to_vec);
        // SAFETY: between fork and exec only async-signal-safe calls are
        // made: prctl and sched_setaffinity on a prepared set.
        unsafe {
            use std::os::unix::process::CommandExt;
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if let Some(c) = &cpus {
                for &cpu in c {
                    libc::CPU_SET(cpu, &mut set);
                }
            }
            let pin = cpus.is_some();
            cmd.pre_exec(move || {
                // The leaf dies with its driver, never outlives it.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                if pin
                    && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().context("cannot start the leaf process")?;
        Ok(LeafProcess { child, log })
    }

    /// Why the leaf is not running, if it is not.
    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "the leaf process exited ({status}); its log {}:\n{}",
                self.log.display(),
                tail(&self.log, 12)
            )),
            _ => None,
        }
    }
}

impl Drop for LeafProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(15) {
                if self.child.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

async fn status(
    client: &mut LeafClient<tonic::transport::Channel>,
) -> Result<StatusReply, tonic::Status> {
    client
        .status(StatusRequest {})
        .await
        .map(|r| r.into_inner())
}

/// Waits until the leaf at `addr` reports ready (no fixed sleep).
async fn wait_ready(
    addr: SocketAddr,
    leaf: &mut Option<LeafProcess>,
    ctx: &RunContext,
    println: &dyn Fn(&str),
    phase: &dyn Fn(&str),
) -> anyhow::Result<LeafClient<tonic::transport::Channel>> {
    let t = Instant::now();
    let mut last_note = Instant::now();
    loop {
        if let Some(p) = leaf.as_mut()
            && let Some(why) = p.exited()
        {
            bail!("{why}");
        }
        if ctx.cancel.is_stopped() {
            bail!("interrupted while waiting for the leaf");
        }
        // Each attempt is bounded: something else listening on the port may
        // accept the connection and never answer.
        let attempt = tokio::time::timeout(Duration::from_secs(2), async {
            let mut c = LeafClient::new(rpc::client::connect(addr).await.ok()?);
            let s = status(&mut c).await.ok()?;
            Some((c, s))
        });
        if let Ok(Some((c, s))) = attempt.await
            && s.ready
        {
            println(&format!(
                "leaf ready after {:.1} s (datasets built in {:.1} s, {:.0} MiB)",
                t.elapsed().as_secs_f64(),
                s.build_seconds,
                s.dataset_bytes as f64 / (1u64 << 20) as f64
            ));
            return Ok(c);
        }
        if last_note.elapsed() > Duration::from_secs(10) {
            phase(&format!(
                "waiting for the leaf to build its datasets ({:.0} s)",
                t.elapsed().as_secs_f64()
            ));
            last_note = Instant::now();
        }
        if t.elapsed() > Duration::from_secs(900) {
            bail!("the leaf at {addr} did not become ready within 15 minutes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn cpu_seconds_self() -> f64 {
    proc_self().1
}

/// One leaf and its driver.
struct Instance {
    /// 0-based; reported as `id + 1`.
    id: usize,
    port: u16,
    cpus: Option<Vec<usize>>,
    threads: Threads,
    csv: PathBuf,
    /// Prefix of this instance's lines: empty alone, `instance 2: ` in autoscale.
    label: String,
}

/// Where parallel instances line up: before their final runs, and after
/// them to decide together whether to rerun at a fixed rate.
struct Rendezvous {
    before_final: Arc<Gate<()>>,
    after_final: Arc<Gate<Option<(f64, f64)>>>,
}

impl Rendezvous {
    fn leave(&self, id: usize) {
        self.before_final.leave(id);
        self.after_final.leave(id);
    }
}

/// Everything one instance measured.
struct InstanceRun {
    outcome: SearchOutcome,
    /// The fixed-rate rerun (autoscale, when instances diverged): rate and result.
    rerun: Option<(f64, SearchOutcome)>,
    status_before: Option<StatusReply>,
    status_after: Option<StatusReply>,
    /// Process CPU seconds of the driver over the run (meaningful alone).
    driver_cpu: f64,
    csv_path: PathBuf,
    csv_error: Option<String>,
    leaf_log: Option<PathBuf>,
}

/// The fixed rate every instance reruns at when the slowest instance's
/// final achieved QPS is under 80% of the fastest's: the highest requested
/// rate. `finals` holds each instance's (requested, achieved) final, `None`
/// for instances without one.
pub fn rerun_rate(finals: &[Option<(f64, f64)>]) -> Option<f64> {
    let got: Vec<(f64, f64)> = finals.iter().flatten().copied().collect();
    if got.len() < 2 {
        return None;
    }
    let max_ach = got.iter().map(|x| x.1).fold(f64::MIN, f64::max);
    let min_ach = got.iter().map(|x| x.1).fold(f64::MAX, f64::min);
    (min_ach < 0.8 * max_ach).then(|| got.iter().map(|x| x.0).fold(f64::MIN, f64::max))
}

fn target_of(a: &DriverArgs) -> anyhow::Result<SloTarget> {
    Ok(a.target
        .or(a.shape.target_from_s().map_err(anyhow::Error::msg)?)
        .unwrap_or(SloTarget {
            percentile: Percentile::P95,
            latency_ms: 500.0,
        }))
}

fn search_config(a: &DriverArgs, target: SloTarget, t: Threads) -> SearchConfig {
    let secs = Duration::from_secs_f64;
    let mut c = SearchConfig::new(target);
    c.arrival = a.arrival;
    c.tolerance = a.tolerance;
    c.warmup = if a.quick {
        secs(2.0)
    } else {
        secs(a.warmup as f64)
    };
    c.warmup_steady = if a.quick { 0.0 } else { a.warmup_steady };
    c.peak = if a.quick { secs(3.0) } else { secs(10.0) };
    // The closed-loop peak (enough requests in flight to saturate) is a
    // close upper estimate of the open-loop knee (the default runs'
    // knees: 83-93% of it), so bracket around it in small steps rather
    // than halving and bisecting the whole factor of 2 back up.
    c.bracket_up = 1.25;
    c.bracket_down = 0.8;
    // 30 s probes: at 85-95% utilisation a 20 s probe often passes before
    // the queue builds up, and the longer final run then fails.
    c.probe = secs(a.probe_secs.unwrap_or(if a.quick { 4.0 } else { 30.0 }));
    c.probe_warmup = if a.quick { secs(1.0) } else { secs(3.0) };
    c.final_duration = secs(a.final_secs.unwrap_or(if a.quick { 8.0 } else { 60.0 }));
    c.min_qps = 0.2;
    c.borderline = a.close_call;
    c.max_extensions = a.extensions;
    // A final that just misses (p95 within --close-call above the target,
    // or only its tail misses) runs another 60 s and is judged on the
    // whole: one VM hiccup near the end of a 60 s window otherwise fails a
    // sustainable rate and costs a whole step down and another final. Only
    // one final per search is extended, which keeps a search that steps
    // down through three finals under 8 minutes here.
    c.extended_finals = 1;
    c.steady_tail = a.steady_tail;
    // Finals step down to rates a probe passed, in smaller steps than the
    // default's: allow one more before giving up.
    c.final_attempts = 4;
    // Requests spend the IO wait off-CPU: keep enough in flight to saturate.
    c.peak_concurrency = (t.serving * 8).clamp(16, 2048);
    c
}

fn planned(a: &DriverArgs, c: &SearchConfig) -> Duration {
    if a.qps.is_empty() {
        c.planned()
    } else {
        c.warmup + Duration::from_secs_f64(a.duration as f64 + 3.0) * a.qps.len() as u32
    }
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
) -> anyhow::Result<InstanceRun> {
    let t = inst.threads;
    let (addr, mut leaf) = match &a.leaf {
        Some(hp) => {
            let addr: SocketAddr = hp.parse().with_context(|| {
                format!("--leaf '{hp}' is not HOST:PORT (an IP address and a port)")
            })?;
            (addr, None)
        }
        None => {
            let addr = SocketAddr::new(rpc::server::LOOPBACK, inst.port);
            let p = LeafProcess::spawn(&a.shape, t, inst.port, inst.cpus.as_deref(), ctx)?;
            (addr, Some(p))
        }
    };
    let label = inst.label.clone();
    let println = |l: &str| progress.println(&format!("{label}{l}"));
    let phase = |l: &str| progress.phase(&format!("{label}{l}"));
    let rt = runtime(1, "feedsim-driver")?;
    let mut client = rt.block_on(wait_ready(addr, &mut leaf, ctx, &println, &phase))?;
    let pool = rt
        .block_on(rpc::client::connect_pool(addr, 2))
        .with_context(|| format!("cannot connect to the leaf at {addr}"))?;
    let rank_client = LeafClient::new(pool).max_decoding_message_size(64 << 20);
    let svc = tower::service_fn(move |req: Request<RankRequest>| {
        let mut c = rank_client.clone();
        async move { c.rank(req).await }
    });
    // Instances draw different request streams.
    let seed = a.shape.seed.wrapping_add(inst.id as u64 * 1_000_003);
    let make = Arc::new(move |n: u64| {
        let mut rng =
            rand::rngs::SmallRng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9).wrapping_add(n));
        let mut payload = vec![0u8; REQUEST_BYTES];
        rng.fill_bytes(&mut payload);
        Request::new(RankRequest {
            payload,
            seed: rng.next_u64(),
        })
    });
    let auto = a.auto_workers;
    let leaf_log = leaf.as_ref().map(|l| l.log.clone());
    // Shared with the prober's liveness check; this scope keeps the leaf alive
    // until the metrics are collected, then dropping it stops the leaf.
    let leaf = Arc::new(std::sync::Mutex::new(leaf));
    let leaf_cell = leaf.clone();
    let search_cfg = search_config(a, target, t);
    // Before each probe, wait until the leaf has no request in flight: the
    // requests an overloaded probe gave up on are cancelled and their queued
    // work skipped, and the next probe starts from an idle leaf.
    let settle_client = client.clone();
    let settle = load::prober::until_idle(
        move || {
            let mut c = settle_client.clone();
            async move {
                status(&mut c)
                    .await
                    .map(|s| s.in_flight)
                    .map_err(|e| format!("the leaf stopped answering its status RPC: {e}"))
            }
        },
        SETTLE_LIMIT,
    );
    let drain = Duration::from_secs_f64((2.0 * target.latency_ms / 1000.0).max(2.0));
    let stop = ctx.cancel.flag();
    let mut prober = ServiceProber {
        svc,
        make,
        workers: Box::new(move |mode| match (auto, mode) {
            (true, Mode::Open { rate, .. }) => ((rate / 100.0).ceil() as usize).clamp(1, 16),
            _ => 1,
        }),
        max_in_flight: 100_000,
        drain,
        seed,
        stop: stop.clone(),
        check: Box::new(move || {
            let mut g = leaf_cell.lock().unwrap_or_else(|e| e.into_inner());
            match g.as_mut().and_then(|l| l.exited()) {
                Some(why) => Err(why),
                None => Ok(()),
            }
        }),
        settle: Some(settle),
    };
    let csv_path = ctx.output_path(&inst.csv);
    let csv = ProbeCsv::create(&csv_path)
        .with_context(|| format!("cannot create {}", csv_path.display()))?;
    let status_before = rt.block_on(status(&mut client)).ok();
    let cpu_before = cpu_seconds_self();
    let mut reporter = Reporter::new(csv, &println, &phase);
    let mut on_event = |e: Event<'_>| reporter.handle(e);
    let outcome = rt.block_on(async {
        if a.qps.is_empty() {
            let search = Search::new(search_cfg.clone(), &mut prober, &mut on_event);
            let search = match rv {
                Some(rv) => {
                    let (gate, id, stop) = (rv.before_final.clone(), inst.id, stop.clone());
                    search.before_final(move || {
                        gate.arrive(id, (), &stop).map(|_| ()).map_err(|_| {
                            "interrupted while waiting for the other instances".to_string()
                        })
                    })
                }
                None => search,
            };
            search.run().await
        } else {
            let d = Duration::from_secs_f64(a.duration as f64);
            let w = search_cfg.probe_warmup;
            run_fixed(search_cfg.clone(), &mut prober, &a.qps, w, d, &mut on_event).await
        }
    });
    let mut rerun = None;
    if let Some(rv) = rv {
        rv.before_final.leave(inst.id);
        let mine = outcome
            .final_probe
            .as_ref()
            .map(|f| (f.requested_qps, f.achieved_qps));
        let decided = if outcome.interrupted {
            None
        } else {
            rv.after_final.arrive(inst.id, mine, &stop).ok()
        };
        let all: Vec<Option<(f64, f64)>> =
            decided.unwrap_or_default().into_iter().flatten().collect();
        if let Some(q) = rerun_rate(&all) {
            println(&format!(
                "the slowest instance reached under 80% of the fastest's QPS: rerunning every instance at {q:.2} QPS (the highest requested)"
            ));
            let mut cfg = search_cfg.clone();
            cfg.warmup = Duration::ZERO;
            let (w, d) = (cfg.probe_warmup, cfg.final_duration);
            let r = rt.block_on(run_fixed(cfg, &mut prober, &[q], w, d, &mut on_event));
            rerun = Some((q, r));
        }
        rv.after_final.leave(inst.id);
    }
    let driver_cpu = cpu_seconds_self() - cpu_before;
    let status_after = rt.block_on(status(&mut client)).ok();
    drop(leaf);
    Ok(InstanceRun {
        outcome,
        rerun,
        status_before,
        status_after,
        driver_cpu,
        csv_path,
        csv_error: reporter.csv_error.as_ref().map(|e| e.to_string()),
        leaf_log,
    })
}

/// The probe an instance reports as its result: the rerun's when there was
/// one (whether or not it met the target), else the search's final.
fn reported_probe(r: &InstanceRun) -> Option<&ProbeRecord> {
    match &r.rerun {
        Some((_, o)) => o.probes.iter().rev().find(|p| p.phase == Phase::Fixed),
        None => r.outcome.final_probe.as_ref(),
    }
}

/// The metrics of one instance (the whole report of a single-instance run).
fn instance_metrics(r: &InstanceRun, with_driver_cpu: bool) -> anyhow::Result<Map<String, Value>> {
    let mut m = Map::new();
    if let Some(f) = reported_probe(r) {
        m.insert("final_requested_qps".into(), json!(round3(f.requested_qps)));
        m.insert("final_achieved_qps".into(), json!(round3(f.achieved_qps)));
        m.insert(
            "final_latency_msec".into(),
            json!(round3(f.target_value_ms)),
        );
        m.insert("final_latency".into(), serde_json::to_value(f.latency)?);
    }
    if let Some((q, o)) = &r.rerun {
        let passed = reported_probe(r).is_some_and(|p| p.passed);
        m.insert("rerun_qps".into(), json!(round3(*q)));
        m.insert("rerun_met_target".into(), json!(passed));
        if let Some(f) = &r.outcome.final_probe {
            m.insert(
                "search_final".into(),
                json!({
                    "final_requested_qps": round3(f.requested_qps),
                    "final_achieved_qps": round3(f.achieved_qps),
                    "final_latency_msec": round3(f.target_value_ms),
                }),
            );
        }
        m.insert("rerun_probes".into(), serde_json::to_value(&o.probes)?);
    }
    m.insert("peak_qps".into(), json!(round3(r.outcome.peak_qps)));
    if let (Some(b), Some(e)) = (&r.status_before, &r.status_after) {
        let reqs = e.requests.saturating_sub(b.requests);
        m.insert("leaf_rss_bytes".into(), json!(e.rss_bytes));
        m.insert("leaf_build_seconds".into(), json!(e.build_seconds));
        m.insert("leaf_anon_huge_bytes".into(), json!(e.anon_huge_bytes));
        m.insert(
            "leaf_huge_pages_advised".into(),
            json!(e.huge_pages_advised),
        );
        m.insert("thp_mode".into(), json!(e.thp_mode));
        m.insert("leaf_requests".into(), json!(reqs));
        m.insert(
            "leaf_skipped_tasks".into(),
            json!(e.skipped_tasks.saturating_sub(b.skipped_tasks)),
        );
        m.insert(
            "leaf_cpu_seconds".into(),
            json!(round3(e.cpu_seconds - b.cpu_seconds)),
        );
        if reqs > 0 {
            let leaf_ms = (e.cpu_seconds - b.cpu_seconds) / reqs as f64 * 1000.0;
            m.insert("leaf_cpu_ms_per_request".into(), json!(round3(leaf_ms)));
            let steps: Map<String, Value> = e
                .steps
                .iter()
                .map(|s| {
                    let before = b
                        .steps
                        .iter()
                        .find(|x| x.step == s.step)
                        .map_or(0.0, |x| x.cpu_seconds);
                    let ms = (s.cpu_seconds - before) / reqs as f64 * 1000.0;
                    (s.step.clone(), json!(round3(ms)))
                })
                .collect();
            m.insert("leaf_step_cpu_ms_per_request".into(), Value::Object(steps));
            if with_driver_cpu {
                let drv_ms = r.driver_cpu / reqs as f64 * 1000.0;
                m.insert("driver_cpu_ms_per_request".into(), json!(round3(drv_ms)));
                if leaf_ms > 0.0 {
                    m.insert(
                        "driver_to_leaf_cpu_ratio".into(),
                        json!(round3(drv_ms / leaf_ms)),
                    );
                }
            }
        }
    }
    let success = r.outcome.success && reported_probe(r).is_some();
    m.insert("success".into(), json!(success));
    if let Some(f) = &r.outcome.failure {
        m.insert("failure".into(), json!(f));
    }
    m.insert("probes".into(), serde_json::to_value(&r.outcome.probes)?);
    m.insert(
        "final_series".into(),
        serde_json::to_value(&r.outcome.final_series)?,
    );
    m.insert("csv".into(), json!(r.csv_path.display().to_string()));
    if let Some(l) = &r.leaf_log {
        m.insert("leaf_log".into(), json!(l.display().to_string()));
    }
    Ok(m)
}

fn common_metrics(a: &DriverArgs, target: SloTarget) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("target_percentile".into(), json!(target.percentile.label()));
    m.insert("target_latency_msec".into(), json!(target.latency_ms));
    m.insert(
        "load_mode".into(),
        json!(format!(
            "open loop, {} arrivals; latency from the intended start",
            a.arrival
        )),
    );
    m
}

/// How often the host's speed is sampled during a run.
const SPEED_EVERY: Duration = Duration::from_secs(5);
/// Host speed drift past which a result is flagged as not comparable.
const SPEED_DRIFT_WARN_PCT: f64 = 10.0;

/// Adds `host_speed` to the metrics and warns when the machine's speed
/// changed during the run.
fn host_speed_metrics(m: &mut Map<String, Value>, speed: Option<HostSpeed>, line: &dyn Fn(&str)) {
    let Some(h) = speed else { return };
    m.insert("host_speed".into(), json!(h));
    let unstable = h.drift_pct > SPEED_DRIFT_WARN_PCT;
    m.insert("host_speed_unstable".into(), json!(unstable));
    if unstable {
        line(&format!(
            "warning: this machine's speed changed during the run: a fixed unit of integer work took {:.0} to {:.0} us, one of dependent memory loads {:.0} to {:.0} us (spread {:.0}% > {SPEED_DRIFT_WARN_PCT:.0}%); results from this run are not comparable to that precision",
            h.cpu.unit_us_min,
            h.cpu.unit_us_max,
            h.memory.unit_us_min,
            h.memory.unit_us_max,
            h.drift_pct
        ));
    }
}

fn threads_json(t: Threads) -> Value {
    json!({ "serving": t.serving, "ranking": t.ranking, "srv_io": t.ser, "io": 4, "pointer_chase": 8 })
}

fn run_driver(a: &DriverArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
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
        csv: a.output.clone(),
        label: String::new(),
    };
    let progress = Progress::new("feedsim", Duration::from_secs(60));
    progress.set_total(planned(a, &search_config(a, target, t)));
    progress.println(&searching_line(&target));
    let speed = SpeedSampler::start(SPEED_EVERY);
    let run = drive_instance(a, &inst, target, ctx, &progress, None);
    let speed = speed.finish();
    progress.finish();
    let run = run?;
    if let Some(e) = &run.csv_error {
        eprintln!(
            "warning: could not write every row to {}: {e}",
            run.csv_path.display()
        );
    }
    let mut m = common_metrics(a, target);
    m.insert("threads".into(), threads_json(t));
    if let Some(f) = run.outcome.final_probe.as_ref() {
        progress.println(&final_line(f));
        m.insert("score".into(), json!(round3(f.achieved_qps / BASELINE_QPS)));
    }
    if let Some(f) = &run.outcome.failure {
        progress.println(&failure_line(f));
    }
    let record = FeedSimRecord::Search(Box::new(SearchRecord {
        target,
        probes: run.outcome.probes.clone(),
        reported: run.outcome.final_probe.clone(),
        failure: run.outcome.failure.clone(),
    }));
    m.extend(instance_metrics(&run, true)?);
    host_speed_metrics(&mut m, speed, &|l| progress.println(l));
    m.insert("partial".into(), json!(run.outcome.interrupted));
    Ok(Outcome {
        metrics: m,
        success: run.outcome.success,
        record: Some(Record::of("feedsim", RECORD_VERSION, &record)),
    })
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
    let stem = a
        .output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = a
        .output
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let mut instances = Vec::with_capacity(n);
    let mut total = 0usize;
    for (i, cpus) in groups.into_iter().enumerate() {
        let t = a
            .shape
            .threads(cpus.len(), smt)
            .map_err(anyhow::Error::msg)?;
        total += leaf_config(&a.shape, t).dataset_bytes();
        instances.push(Instance {
            id: i,
            port: base + i as u16,
            cpus: Some(cpus),
            threads: t,
            csv: a.output.with_file_name(format!("{stem}_{}{ext}", i + 1)),
            label: if n > 1 {
                format!("instance {}: ", i + 1)
            } else {
                String::new()
            },
        });
    }
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
    progress.println(&searching_line(&target));
    let rv = Rendezvous {
        before_final: Gate::new(n),
        after_final: Gate::new(n),
    };
    let cpu_before = cpu_seconds_self();
    let speed = SpeedSampler::start(SPEED_EVERY);
    let runs: Vec<anyhow::Result<InstanceRun>> = std::thread::scope(|s| {
        let handles: Vec<_> = instances
            .iter()
            .map(|inst| {
                let (rv, progress) = (&rv, &progress);
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
    });
    let speed = speed.finish();
    let driver_cpu = cpu_seconds_self() - cpu_before;
    progress.finish();

    let mut m = common_metrics(a, target);
    host_speed_metrics(&mut m, speed, &|l| progress.println(l));
    let (mut leaf_cpu, mut leaf_reqs) = (0.0, 0u64);
    let mut rerun = None;
    let mut interrupted = ctx.cancel.is_stopped();
    let mut finals = Vec::new();
    for (inst, run) in instances.iter().zip(&runs) {
        let mut im = Map::new();
        im.insert("port".into(), json!(inst.port));
        im.insert(
            "cpus".into(),
            json!(harness::machine::format_cpu_list(
                inst.cpus.as_deref().unwrap_or(&[])
            )),
        );
        im.insert("threads".into(), threads_json(inst.threads));
        match run {
            Ok(r) => {
                if let Some(e) = &r.csv_error {
                    eprintln!(
                        "warning: could not write every row to {}: {e}",
                        r.csv_path.display()
                    );
                }
                interrupted |= r.outcome.interrupted;
                im.extend(instance_metrics(r, false)?);
                if let Some(f) = reported_probe(r).filter(|_| r.outcome.success) {
                    finals.push(InstanceFinal {
                        label: inst.label.clone(),
                        reported: f.clone(),
                    });
                }
                if let Some((q, _)) = &r.rerun {
                    rerun = Some(*q);
                }
                if let (Some(b), Some(e)) = (&r.status_before, &r.status_after) {
                    leaf_cpu += e.cpu_seconds - b.cpu_seconds;
                    leaf_reqs += e.requests.saturating_sub(b.requests);
                }
            }
            Err(e) => {
                im.insert("success".into(), json!(false));
                im.insert("failure".into(), json!(format!("{e:#}")));
            }
        }
        m.insert((inst.id + 1).to_string(), Value::Object(im));
    }
    let ok = finals.len();
    let (sum_req, sum_ach, avg_lat) = overall(&finals);
    m.insert(
        "overall".into(),
        json!({
            "final_requested_qps": round3(sum_req),
            "final_achieved_qps": round3(sum_ach),
            "average_latency_msec": round3(avg_lat),
        }),
    );
    m.insert("spawned_instances".into(), json!(n));
    m.insert("successful_instances".into(), json!(ok));
    m.insert("score".into(), json!(round3(sum_ach / BASELINE_QPS)));
    m.insert("rerun_at_fixed_qps".into(), json!(rerun.map(round3)));
    if leaf_reqs > 0 {
        let drv_ms = driver_cpu / leaf_reqs as f64 * 1000.0;
        let leaf_ms = leaf_cpu / leaf_reqs as f64 * 1000.0;
        m.insert("driver_cpu_ms_per_request".into(), json!(round3(drv_ms)));
        m.insert("leaf_cpu_ms_per_request".into(), json!(round3(leaf_ms)));
        if leaf_ms > 0.0 {
            m.insert(
                "driver_to_leaf_cpu_ratio".into(),
                json!(round3(drv_ms / leaf_ms)),
            );
        }
    }
    let record = FeedSimRecord::Autoscale { spawned: n, finals };
    for line in record_lines(&record) {
        progress.println(&line);
    }
    let success = ok == n && !interrupted;
    m.insert("success".into(), json!(success));
    m.insert("partial".into(), json!(interrupted));
    Ok(Outcome {
        metrics: m,
        success,
        record: Some(Record::of("feedsim", RECORD_VERSION, &record)),
    })
}

/// The version of [`FeedSimRecord`]; raise it when its shape changes.
const RECORD_VERSION: u32 = 1;

/// What a FeedSim driver run keeps with its stored run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum FeedSimRecord {
    /// One leaf searched: every probe and the result.
    Search(Box<SearchRecord>),
    /// `--num-instances`: the result of each instance that succeeded.
    Autoscale {
        spawned: usize,
        finals: Vec<InstanceFinal>,
    },
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct InstanceFinal {
    /// The instance's line prefix (`[instance 2] `).
    pub label: String,
    pub reported: load::search::ProbeRecord,
}

/// The successful instances' summed requested and achieved QPS and their
/// mean latency (0 without any).
fn overall(finals: &[InstanceFinal]) -> (f64, f64, f64) {
    let sum_req = finals.iter().map(|f| f.reported.requested_qps).sum();
    let sum_ach = finals.iter().map(|f| f.reported.achieved_qps).sum();
    let avg_lat = if finals.is_empty() {
        0.0
    } else {
        finals
            .iter()
            .map(|f| f.reported.target_value_ms)
            .sum::<f64>()
            / finals.len() as f64
    };
    (sum_req, sum_ach, avg_lat)
}

/// An autoscale run's closing lines: each successful instance's final line
/// and the overall sums.
fn record_lines(r: &FeedSimRecord) -> Vec<String> {
    let FeedSimRecord::Autoscale { spawned, finals } = r else {
        return Vec::new();
    };
    let mut lines: Vec<String> = finals
        .iter()
        .map(|f| format!("{}{}", f.label, final_line(&f.reported)))
        .collect();
    let (sum_req, sum_ach, avg_lat) = overall(finals);
    lines.push(format!(
        "overall: {} of {spawned} instance(s) succeeded; requested_qps = {sum_req:.2}, measured_qps = {sum_ach:.2}, average latency = {avg_lat:.3}",
        finals.len()
    ));
    lines
}

/// The text of a stored run.
pub fn write_record(r: &FeedSimRecord, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    match r {
        FeedSimRecord::Search(s) => write_search(s, out)?,
        FeedSimRecord::Autoscale { .. } => {
            for line in record_lines(r) {
                writeln!(out, "{line}")?;
            }
        }
    }
    out.flush()
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rerun_only_when_the_slowest_is_under_80_percent_of_the_fastest() {
        // 7.9 < 0.8 x 10: rerun at the highest requested rate.
        let f = [Some((10.5, 10.0)), Some((8.0, 7.9)), None];
        assert_eq!(rerun_rate(&f), Some(10.5));
        // 8.0 is exactly 80%: no rerun.
        assert_eq!(rerun_rate(&[Some((10.0, 10.0)), Some((8.2, 8.0))]), None);
        // One result (or none) has nothing to compare with.
        assert_eq!(rerun_rate(&[Some((10.0, 10.0)), None]), None);
        assert_eq!(rerun_rate(&[]), None);
    }
}
