//! The `feedsim` workload: `rackbench feedsim leaf` serves, `rackbench
//! feedsim` (upstream run.sh) starts a leaf process, waits until it reports
//! ready, and searches for the highest rate meeting the latency target.

use crate::cli::{DriverArgs, LeafArgs, ShapeArgs, Threads};
use crate::dataset::Shape;
use crate::leaf::{LeafConfig, LeafService, LeafState, proc_self};
use anyhow::{Context, bail};
use clap::Parser;
use harness::{Outcome, Progress, RunContext, Workload};
use load::csv::ProbeCsv;
use load::report::{Reporter, final_line, searching_line};
use load::search::{Event, Search, run_fixed};
use load::{Mode, Percentile, SearchConfig, ServiceProber, SloTarget};
use rand::RngCore;
use rand::SeedableRng;
use rpc::proto::feedsim::leaf_client::LeafClient;
use rpc::proto::feedsim::{RankRequest, StatusReply, StatusRequest};
use serde_json::{Map, json};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Request;

/// Upstream's baseline: score = final_achieved_qps / 57.
pub const BASELINE_QPS: f64 = 57.0;
/// Bytes of random payload in each request.
pub const REQUEST_BYTES: usize = 3000;

pub struct FeedSim;

fn parse<T: Parser>(name: &str, args: &[String]) -> anyhow::Result<T> {
    T::try_parse_from(std::iter::once(name.to_string()).chain(args.iter().cloned()))
        .map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))
}

enum Parsed {
    Leaf(LeafArgs),
    Driver(DriverArgs),
}

fn parse_any(args: &[String]) -> anyhow::Result<Parsed> {
    match args.first().map(String::as_str) {
        Some("leaf") => Ok(Parsed::Leaf(parse("rackbench feedsim leaf", &args[1..])?)),
        _ => Ok(Parsed::Driver(parse("rackbench feedsim", args)?)),
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

fn mem_available() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemAvailable:")
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .map(|kib| kib * 1024)
        })
}

/// Refuses a dataset that does not fit in available memory.
fn check_memory(cfg: &LeafConfig) -> anyhow::Result<()> {
    let need = cfg.dataset_bytes() as u64;
    if let Some(avail) = mem_available()
        && need > avail / 10 * 9
    {
        bail!(
            "the leaf's datasets need {:.1} GiB ({} serving threads x {:.0} MiB at scale {}), but only {:.1} GiB of memory is available; lower -t or --scale",
            need as f64 / (1u64 << 30) as f64,
            cfg.serving_threads,
            cfg.shape.bytes() as f64 / (1u64 << 20) as f64,
            cfg.shape.scale,
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
    check_memory(&cfg)?;
    let rt = runtime(2, "leaf-grpc")?;
    let state = LeafState::new(cfg.clone());
    let addr = SocketAddr::new(a.bind, a.port);
    let running = {
        let _g = rt.enter();
        let bound = rpc::server::bind(addr)?;
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
    })
}

/// The leaf process this driver started; stopped (only it) on drop.
struct LeafProcess {
    child: Child,
    log: std::path::PathBuf,
}

impl LeafProcess {
    fn spawn(a: &DriverArgs, t: Threads, ctx: &RunContext) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the rackbench executable")?;
        let log = ctx.out_dir.join(format!("feedsim_leaf_{}.log", a.port));
        let out = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut cmd = Command::new(exe);
        cmd.arg("--no-store")
            .arg("--output-dir")
            .arg(ctx.out_dir.join(format!("leaf_{}", a.port)))
            .args([
                "feedsim",
                "leaf",
                "--port",
                &a.port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args(a.shape.to_leaf_args(t))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
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
    progress: &Progress,
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
            progress.println(&format!(
                "leaf ready after {:.1} s (datasets built in {:.1} s, {:.0} MiB)",
                t.elapsed().as_secs_f64(),
                s.build_seconds,
                s.dataset_bytes as f64 / (1u64 << 20) as f64
            ));
            return Ok(c);
        }
        if last_note.elapsed() > Duration::from_secs(10) {
            progress.phase(&format!(
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

fn run_driver(a: &DriverArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    let (nproc, smt) = topology();
    let t = a.shape.threads(nproc, smt).map_err(anyhow::Error::msg)?;
    let target = a
        .target
        .or(a.shape.target_from_s().map_err(anyhow::Error::msg)?)
        .unwrap_or(SloTarget {
            percentile: Percentile::P95,
            latency_ms: 500.0,
        });
    let cfg_leaf = leaf_config(&a.shape, t);
    let (addr, mut leaf) = match &a.leaf {
        Some(hp) => {
            let addr: SocketAddr = hp.parse().with_context(|| {
                format!("--leaf '{hp}' is not HOST:PORT (an IP address and a port)")
            })?;
            (addr, None)
        }
        None => {
            check_memory(&cfg_leaf)?;
            let addr = SocketAddr::new(rpc::server::LOOPBACK, a.port);
            (addr, Some(LeafProcess::spawn(a, t, ctx)?))
        }
    };
    let rt = runtime(1, "feedsim-driver")?;
    let progress = Progress::new("feedsim", Duration::from_secs(60));
    let mut client = rt.block_on(wait_ready(addr, &mut leaf, ctx, &progress))?;
    let pool = rt
        .block_on(rpc::client::connect_pool(addr, 2))
        .with_context(|| format!("cannot connect to the leaf at {addr}"))?;
    let rank_client = LeafClient::new(pool).max_decoding_message_size(64 << 20);
    let svc = tower::service_fn(move |req: Request<RankRequest>| {
        let mut c = rank_client.clone();
        async move { c.rank(req).await }
    });
    let seed = a.shape.seed;
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
    let mut search_cfg = SearchConfig::new(target);
    search_cfg.arrival = a.arrival;
    search_cfg.tolerance = a.tolerance;
    let secs = Duration::from_secs_f64;
    search_cfg.warmup = if a.quick {
        secs(2.0)
    } else {
        secs(a.warmup as f64)
    };
    search_cfg.peak = if a.quick { secs(3.0) } else { secs(10.0) };
    search_cfg.probe = secs(a.probe_secs.unwrap_or(if a.quick { 4.0 } else { 20.0 }));
    search_cfg.probe_warmup = if a.quick { secs(1.0) } else { secs(3.0) };
    search_cfg.final_duration = secs(a.final_secs.unwrap_or(if a.quick { 8.0 } else { 60.0 }));
    search_cfg.min_qps = 0.2;
    // Requests spend the IO wait off-CPU: keep enough in flight to saturate.
    search_cfg.peak_concurrency = (t.serving * 8).clamp(16, 2048);
    let drain = secs((2.0 * target.latency_ms / 1000.0).max(2.0));
    let prober = ServiceProber {
        svc,
        make,
        workers: Box::new(move |mode| match (auto, mode) {
            (true, Mode::Open { rate, .. }) => ((rate / 100.0).ceil() as usize).clamp(1, 16),
            _ => 1,
        }),
        max_in_flight: 100_000,
        drain,
        seed,
        stop: ctx.cancel.flag(),
        check: Box::new(move || {
            let mut g = leaf_cell.lock().unwrap_or_else(|e| e.into_inner());
            match g.as_mut().and_then(|l| l.exited()) {
                Some(why) => Err(why),
                None => Ok(()),
            }
        }),
    };
    let csv_path = ctx.output_path(&a.output);
    let csv = ProbeCsv::create(&csv_path)
        .with_context(|| format!("cannot create {}", csv_path.display()))?;
    let planned = if a.qps.is_empty() {
        search_cfg.planned()
    } else {
        search_cfg.warmup + secs(a.duration as f64 + 3.0) * a.qps.len() as u32
    };
    progress.set_total(planned);
    let line = |s: &str| {
        progress.println(s);
    };
    line(&searching_line(&target));
    let status_before = rt.block_on(status(&mut client)).ok();
    let cpu_before = cpu_seconds_self();
    let println = |l: &str| progress.println(l);
    let phase = |l: &str| progress.phase(l);
    let mut reporter = Reporter::new(csv, &println, &phase);
    let mut on_event = |e: Event<'_>| reporter.handle(e);
    let outcome = rt.block_on(async {
        if a.qps.is_empty() {
            Search::new(search_cfg.clone(), prober, &mut on_event)
                .run()
                .await
        } else {
            let d = secs(a.duration as f64);
            run_fixed(
                search_cfg.clone(),
                prober,
                &a.qps,
                search_cfg.probe_warmup,
                d,
                &mut on_event,
            )
            .await
        }
    });
    let cpu_driver = cpu_seconds_self() - cpu_before;
    let status_after = rt.block_on(status(&mut client)).ok();
    drop(leaf);
    progress.finish();
    if let Some(e) = &reporter.csv_error {
        eprintln!(
            "warning: could not write every row to {}: {e}",
            csv_path.display()
        );
    }

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
    m.insert("threads".into(), json!({ "serving": t.serving, "ranking": t.ranking, "srv_io": t.ser, "io": 4, "pointer_chase": 8 }));
    if let Some(f) = &outcome.final_probe {
        line(&final_line(f));
        m.insert("final_requested_qps".into(), json!(round3(f.requested_qps)));
        m.insert("final_achieved_qps".into(), json!(round3(f.achieved_qps)));
        m.insert(
            "final_latency_msec".into(),
            json!(round3(f.target_value_ms)),
        );
        m.insert("final_latency".into(), serde_json::to_value(f.latency)?);
        m.insert("score".into(), json!(round3(f.achieved_qps / BASELINE_QPS)));
    }
    m.insert("peak_qps".into(), json!(round3(outcome.peak_qps)));
    if let (Some(b), Some(e)) = (&status_before, &status_after) {
        let reqs = e.requests.saturating_sub(b.requests);
        m.insert("leaf_rss_bytes".into(), json!(e.rss_bytes));
        m.insert("leaf_build_seconds".into(), json!(e.build_seconds));
        m.insert("leaf_requests".into(), json!(reqs));
        if reqs > 0 {
            let leaf_ms = (e.cpu_seconds - b.cpu_seconds) / reqs as f64 * 1000.0;
            let drv_ms = cpu_driver / reqs as f64 * 1000.0;
            m.insert("leaf_cpu_ms_per_request".into(), json!(round3(leaf_ms)));
            m.insert("driver_cpu_ms_per_request".into(), json!(round3(drv_ms)));
            if leaf_ms > 0.0 {
                m.insert(
                    "driver_to_leaf_cpu_ratio".into(),
                    json!(round3(drv_ms / leaf_ms)),
                );
            }
        }
    }
    m.insert("success".into(), json!(outcome.success));
    if let Some(f) = &outcome.failure {
        m.insert("failure".into(), json!(f));
        line(&format!("search ended without a result: {f}"));
    }
    m.insert("partial".into(), json!(outcome.interrupted));
    m.insert("probes".into(), serde_json::to_value(&outcome.probes)?);
    m.insert(
        "final_series".into(),
        serde_json::to_value(&outcome.final_series)?,
    );
    m.insert("csv".into(), json!(csv_path.display().to_string()));
    if let Some(l) = leaf_log {
        m.insert("leaf_log".into(), json!(l.display().to_string()));
    }
    Ok(Outcome {
        metrics: m,
        success: outcome.success,
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
