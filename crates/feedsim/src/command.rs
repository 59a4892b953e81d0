//! The `feedsim` workload: `rackbench feedsim leaf` serves, `rackbench
//! feedsim` (upstream run.sh) starts a leaf process, waits until it reports
//! ready, and searches for the highest rate meeting the latency target.

use crate::cli::{
    AUTOSCALE_BASE_PORT, COMPAT_CONNECTIONS, DEFAULT_PORT, DriverArgs, DriverModel, LeafArgs,
    ShapeArgs, Threads, auto_driver_threads, default_driver_threads, fixed_qps_driver_threads,
};
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
use load::search::{Event, Phase, Prober, Search, SearchOutcome, run_fixed};
use load::{Arrival, Mode, Percentile, ProbeRecord, SearchConfig, ServiceProber, SloTarget};
use rand::RngCore;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
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
    fn headlines(&self) -> &'static [direction::Headline] {
        crate::directions::HEADLINES
    }

    fn directions(&self) -> &'static [&'static [direction::Rule]] {
        crate::directions::TABLES
    }

    fn benchpress(&self) -> &'static [harness::benchpress_yaml::Upstream] {
        crate::benchpress::BENCHPRESS
    }
    fn name(&self) -> &'static str {
        "feedsim"
    }

    fn description(&self) -> &'static str {
        "FeedSim ranking leaf: max QPS with p95 <= 500 ms"
    }

    fn upstream(&self) -> &'static str {
        "DCPerf's FeedSim (run.sh and LeafNodeRank)"
    }

    fn help(&self) -> String {
        use clap::CommandFactory;
        format!(
            "{}\n\n{}",
            DriverArgs::command().render_long_help(),
            LeafArgs::command().render_help()
        )
    }

    fn command(&self) -> Option<clap::Command> {
        use clap::CommandFactory;
        Some(DriverArgs::command().subcommand(LeafArgs::command().name("leaf")))
    }

    fn subcommand_help(&self, args: &[String]) -> Option<String> {
        use clap::CommandFactory;
        (args.first()? == "leaf").then(|| LeafArgs::command().render_long_help().to_string())
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

    fn leftovers(&self) -> Vec<std::path::PathBuf> {
        // A direct run keeps its leaf's log in the temp folder, named by
        // the leaf's port: a log whose port still has a listener may be a
        // running leaf's, and is kept.
        let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let port: u16 = name
                    .strip_prefix("feedsim_leaf_")?
                    .strip_suffix(".log")?
                    .parse()
                    .ok()?;
                std::net::TcpListener::bind((rpc::server::LOOPBACK, port))
                    .is_ok()
                    .then(|| e.path())
            })
            .collect()
    }

    fn format(&self, record: &Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        let r: FeedSimRecord = record.decode(self.name(), RECORD_VERSION)?;
        write_record(&r, out)?;
        Ok(())
    }

    /// A search's final line (run.sh's last), and our diagnostic of a
    /// failed one on stderr; autoscale's summary lines. A leaf said it was
    /// ready when it was.
    fn format_end(
        &self,
        record: &Record,
        out: &mut dyn std::io::Write,
        diag: &mut dyn std::io::Write,
    ) -> anyhow::Result<()> {
        match record.decode::<FeedSimRecord>(self.name(), RECORD_VERSION)? {
            FeedSimRecord::Leaf(_) => {}
            FeedSimRecord::Search(s) => {
                if let Some(f) = &s.instance.outcome.final_probe {
                    writeln!(out, "{}", final_line(f))?;
                }
                if let Some(f) = &s.instance.outcome.failure {
                    writeln!(diag, "{}", failure_line(f))?;
                }
            }
            FeedSimRecord::Autoscale(a) => {
                for line in a.lines() {
                    writeln!(out, "{line}")?;
                }
            }
        }
        Ok(())
    }

    fn metrics(&self, record: &Record) -> anyhow::Result<Map<String, Value>> {
        let r: FeedSimRecord = record.decode(self.name(), RECORD_VERSION)?;
        harness::record::metrics_map(&r.metrics())
    }

    /// A search whose host changed speed (the sampler's drift) or was busy
    /// at its start or end (the sampler's looks) is marked.
    fn marks(&self, record: &Record) -> Vec<String> {
        let speed = match record.decode::<FeedSimRecord>(self.name(), RECORD_VERSION) {
            Ok(FeedSimRecord::Search(s)) => s.host_speed,
            Ok(FeedSimRecord::Autoscale(a)) => a.host_speed,
            _ => None,
        };
        let mut out: Vec<String> = speed_warning(speed.as_ref()).into_iter().collect();
        if let Some(c) = speed.and_then(|h| h.check) {
            out.extend(c.concerns());
        }
        out
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
        serving_model: s.serving_model,
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
    let mut record = LeafRecord {
        addr: running.addr.to_string(),
        threads: t,
        build_seconds: took.as_secs_f64(),
        dataset_bytes: state.dataset_bytes() as u64,
        rss_bytes: 0,
        cpu_seconds: 0.0,
    };
    eprintln!("{}", ready_line(&record));
    while !ctx.cancel.is_stopped() && !running.is_finished() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let failed = running.is_finished();
    let _ = rt.block_on(running.shutdown());
    (record.rss_bytes, record.cpu_seconds) = proc_self();
    if failed {
        bail!("the leaf's server stopped unexpectedly");
    }
    Ok(Outcome::measured(
        true,
        Record::of("feedsim", RECORD_VERSION, &FeedSimRecord::Leaf(record)),
    ))
}

/// The leaf's line once its datasets are built (the last it prints).
fn ready_line(r: &LeafRecord) -> String {
    format!(
        "leaf: datasets built in {:.1} s ({:.0} MiB); ready on {}",
        r.build_seconds,
        r.dataset_bytes as f64 / (1u64 << 20) as f64,
        r.addr
    )
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
    // A leaf started elsewhere (`--leaf`) must at least accept a
    // connection: nothing listening there fails now, as upstream's driver
    // does, rather than after the wait for a leaf building its datasets.
    if leaf.is_none() {
        match tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
            .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => bail!(
                "cannot connect to the leaf at {addr}: {e} (is `rackbench feedsim leaf -p {}` running there?)",
                addr.port()
            ),
            Err(_) => bail!("cannot connect to the leaf at {addr}: no answer within 5 s"),
        }
    }
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
    /// Threads of the closed-compat driver (run.sh's sizing for this
    /// instance's CPUs: see [`compat_threads`]).
    driver_threads: usize,
    /// Threads of the driver's runtime (`-l`, default 1).
    runtime_threads: usize,
    csv: PathBuf,
    /// Prefix of this instance's lines: empty alone, `instance 2: ` in autoscale.
    label: String,
    /// Autoscale: the instance's output lines also go to this file
    /// (upstream's `feedsim-multi-inst-<i>.log`), and a rerun's CSV and
    /// lines to these (upstream's `fixqps-` names).
    log: Option<PathBuf>,
    rerun_files: Option<(PathBuf, PathBuf)>,
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

/// The search's probes as the chosen driver runs them: unchanged for the
/// open-loop driver; for `--driver closed-compat`, DCPerf's DriverNodeRank
/// (threads x 4 connections at depth 1): a rate becomes
/// [`Mode::Capped`] with that many slots, an unthrottled run keeps that
/// many requests in flight.
struct DriverProber<P> {
    inner: P,
    /// Closed-compat: (driver threads, -a scaling by rate).
    compat: Option<(usize, bool)>,
}

impl<P> DriverProber<P> {
    fn map(&self, mode: Mode) -> Mode {
        let Some((threads, auto)) = self.compat else {
            return mode;
        };
        match mode {
            Mode::Open { rate, arrival } | Mode::Capped { rate, arrival, .. } => {
                let t = if auto {
                    auto_driver_threads(Some(rate), threads)
                } else {
                    threads
                };
                Mode::Capped {
                    rate,
                    arrival,
                    slots: t * COMPAT_CONNECTIONS,
                }
            }
            Mode::Closed { .. } => Mode::Closed {
                concurrency: threads * COMPAT_CONNECTIONS,
            },
        }
    }
}

impl<P: Prober> Prober for DriverProber<P> {
    async fn probe(
        &mut self,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> Result<load::RunResult, load::Error> {
        let mode = self.map(mode);
        self.inner.probe(mode, warmup, duration).await
    }

    async fn settle(&mut self) -> Result<Duration, load::Error> {
        self.inner.settle().await
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

/// The leaf's Rank RPC as a tower service over `pool`.
fn rank_service(
    pool: rpc::client::Pool<tonic::transport::Channel>,
) -> impl tower::Service<
    Request<RankRequest>,
    Response = tonic::Response<crate::proto::RankReply>,
    Error = tonic::Status,
    Future = impl std::future::Future<
        Output = Result<tonic::Response<crate::proto::RankReply>, tonic::Status>,
    > + Send,
> + Clone
+ Send
+ 'static {
    let rank_client = LeafClient::new(pool).max_decoding_message_size(64 << 20);
    tower::service_fn(move |req: Request<RankRequest>| {
        let mut c = rank_client.clone();
        async move { c.rank(req).await }
    })
}

/// Everything one instance measured (the whole run of a single-instance
/// search).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstanceRecord {
    /// The search (or the fixed rates) and its result.
    pub outcome: SearchOutcome,
    /// The fixed-rate rerun (autoscale, when instances diverged).
    pub rerun: Option<Rerun>,
    /// The leaf's status before the first probe and after the last.
    pub status_before: Option<LeafStatus>,
    pub status_after: Option<LeafStatus>,
    /// Process CPU seconds of the driver over the run (meaningful alone).
    pub driver_cpu_seconds: f64,
    /// The probe CSV written.
    pub csv: String,
    /// Why some of its rows could not be written.
    pub csv_error: Option<String>,
    /// The log of the leaf process this driver started.
    pub leaf_log: Option<String>,
}

/// Every instance run again at one fixed rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rerun {
    pub qps: f64,
    pub outcome: SearchOutcome,
}

/// The leaf's answer to its status RPC (the driver's copy of
/// [`StatusReply`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeafStatus {
    pub ready: bool,
    pub rss_bytes: u64,
    /// CPU time (user + system) of the leaf process.
    pub cpu_seconds: f64,
    pub requests: u64,
    pub build_seconds: f64,
    pub serving_threads: u32,
    pub dataset_bytes: u64,
    /// Thread CPU seconds of each pipeline step since start.
    pub steps: Vec<StepCpuSeconds>,
    pub in_flight: u64,
    pub skipped_tasks: u64,
    pub anon_huge_bytes: u64,
    pub thp_mode: String,
    pub huge_pages_advised: bool,
    pub serving_model: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepCpuSeconds {
    pub step: String,
    pub cpu_seconds: f64,
}

impl From<StatusReply> for LeafStatus {
    fn from(s: StatusReply) -> Self {
        LeafStatus {
            ready: s.ready,
            rss_bytes: s.rss_bytes,
            cpu_seconds: s.cpu_seconds,
            requests: s.requests,
            build_seconds: s.build_seconds,
            serving_threads: s.serving_threads,
            dataset_bytes: s.dataset_bytes,
            steps: s
                .steps
                .into_iter()
                .map(|x| StepCpuSeconds {
                    step: x.step,
                    cpu_seconds: x.cpu_seconds,
                })
                .collect(),
            in_flight: s.in_flight,
            skipped_tasks: s.skipped_tasks,
            anon_huge_bytes: s.anon_huge_bytes,
            thp_mode: s.thp_mode,
            huge_pages_advised: s.huge_pages_advised,
            serving_model: s.serving_model,
        }
    }
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

/// Request `n` of the stream seeded with `seed`.
fn request_maker(seed: u64) -> Arc<impl Fn(u64) -> Request<RankRequest> + Send + Sync + 'static> {
    Arc::new(move |n: u64| {
        let mut rng =
            rand::rngs::SmallRng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9).wrapping_add(n));
        let mut payload = vec![0u8; REQUEST_BYTES];
        rng.fill_bytes(&mut payload);
        Request::new(RankRequest {
            payload,
            seed: rng.next_u64(),
        })
    })
}

/// Driver workers for a mode (`auto`: `-a`, by rate).
fn driver_workers(auto: bool) -> Box<dyn Fn(Mode) -> usize + Send> {
    Box::new(move |mode| match (auto, mode) {
        // Closed-compat: one worker per driver thread.
        (_, Mode::Capped { slots, .. }) => slots / COMPAT_CONNECTIONS,
        (true, Mode::Open { rate, .. }) => ((rate / 100.0).ceil() as usize).clamp(1, 16),
        _ => 1,
    })
}

/// The prober's liveness check: fails once the leaf process exited.
fn leaf_alive_check(
    leaf: Arc<std::sync::Mutex<Option<LeafProcess>>>,
) -> Box<dyn FnMut() -> Result<(), load::Error> + Send> {
    Box::new(move || {
        let mut g = leaf.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut().and_then(|l| l.exited()) {
            Some(why) => Err(load::Error::Host(why)),
            None => Ok(()),
        }
    })
}

/// Before each probe, wait until the leaf has no request in flight: the
/// requests an overloaded probe gave up on are cancelled and their queued
/// work skipped, and the next probe starts from an idle leaf.
fn settle_on_idle_leaf(client: LeafClient<tonic::transport::Channel>) -> load::prober::SettleFn {
    load::prober::until_idle(
        move || {
            let mut c = client.clone();
            async move {
                status(&mut c).await.map(|s| s.in_flight).map_err(|e| {
                    load::Error::Host(format!("the leaf stopped answering its status RPC: {e}"))
                })
            }
        },
        SETTLE_LIMIT,
    )
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
/// [`fixed_target_met`]).
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

/// Whether every fixed-rate probe of `probes` met the target; `None` when
/// there is none (a search).
pub fn fixed_target_met(probes: &[ProbeRecord]) -> Option<bool> {
    let mut fixed = probes.iter().filter(|p| p.phase == Phase::Fixed).peekable();
    fixed.peek()?;
    Some(fixed.all(|p| p.passed))
}

impl InstanceRecord {
    /// The probe the instance reports as its result: the rerun's when there
    /// was one (whether or not it met the target), else the search's final.
    pub fn reported_probe(&self) -> Option<&ProbeRecord> {
        match &self.rerun {
            Some(r) => r
                .outcome
                .probes
                .iter()
                .rev()
                .find(|p| p.phase == Phase::Fixed),
            None => self.outcome.final_probe.as_ref(),
        }
    }
}

/// How often the host's speed is sampled during a run.
const SPEED_EVERY: Duration = Duration::from_secs(5);
/// Host speed drift past which a result is flagged as not comparable.
pub(crate) const SPEED_DRIFT_WARN_PCT: f64 = 10.0;

/// The mark of a run during which the machine's speed changed.
fn speed_warning(speed: Option<&HostSpeed>) -> Option<String> {
    let h = speed.filter(|h| h.drift_pct > SPEED_DRIFT_WARN_PCT)?;
    Some(format!(
        "this machine's speed changed during the run: a fixed unit of integer work took {:.0} to {:.0} us, one of dependent memory loads {:.0} to {:.0} us (spread {:.0}% > {SPEED_DRIFT_WARN_PCT:.0}%); results from this run are not comparable to that precision",
        h.cpu.unit_us_min,
        h.cpu.unit_us_max,
        h.memory.unit_us_min,
        h.memory.unit_us_max,
        h.drift_pct
    ))
}

/// The closed-compat driver's threads for an instance on `nproc` CPUs, as
/// run.sh sizes DriverNodeRank: with `-q`, min(last rate / 4, DRIVER_THREADS)
/// (DRIVER_THREADS: -l, or its default); a search with `-a` leaves it to
/// search_qps.sh, whose cap is max(round(nproc/5), 4) whatever -l says;
/// else DRIVER_THREADS.
fn compat_threads(a: &DriverArgs, nproc: usize, smt: bool) -> usize {
    let dt = a
        .driver_threads
        .unwrap_or_else(|| default_driver_threads(nproc, smt));
    if !a.qps.is_empty() {
        fixed_qps_driver_threads(&a.qps, dt)
    } else if a.auto_workers {
        default_driver_threads(nproc, true)
    } else {
        dt
    }
}

fn run_driver(a: &DriverArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
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

/// Autoscale's instances, one per CPU group (`smt`: the cores have
/// siblings), on ports from `base`, and the bytes of all their datasets.
fn autoscale_instances(
    a: &DriverArgs,
    groups: Vec<Vec<usize>>,
    smt: bool,
    base: u16,
) -> anyhow::Result<(Vec<Instance>, usize)> {
    let n = groups.len();
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
    let fixqps = if a.qps.is_empty() { "" } else { "fixqps-" };
    let mut instances = Vec::with_capacity(n);
    let mut total = 0usize;
    for (i, cpus) in groups.into_iter().enumerate() {
        let t = a
            .shape
            .threads(cpus.len(), smt)
            .map_err(anyhow::Error::msg)?;
        total += leaf_config(&a.shape, t).dataset_bytes();
        let driver_threads = compat_threads(a, cpus.len(), smt);
        instances.push(Instance {
            id: i,
            port: base + i as u16,
            cpus: Some(cpus),
            threads: t,
            driver_threads,
            runtime_threads: a.driver_threads.unwrap_or(1),
            // run-feedsim-multi.sh's names: `fixqps-` before the instance
            // number when the rates are fixed (-q, and its rerun).
            csv: a
                .output
                .with_file_name(format!("{stem}_{fixqps}{}{ext}", i + 1)),
            label: if n > 1 {
                format!("instance {}: ", i + 1)
            } else {
                String::new()
            },
            log: Some(PathBuf::from(format!(
                "feedsim-multi-inst-{fixqps}{}.log",
                i + 1
            ))),
            rerun_files: Some((
                a.output
                    .with_file_name(format!("{stem}_fixqps-{}{ext}", i + 1)),
                PathBuf::from(format!("feedsim-multi-inst-fixqps-{}.log", i + 1)),
            )),
        });
    }
    Ok((instances, total))
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

/// The version of [`FeedSimRecord`]; raise it when its shape changes.
pub const RECORD_VERSION: u32 = 2;

/// What a FeedSim run keeps with its stored run: everything its report's
/// metrics are computed from ([`FeedSimRecord::metrics`]) and its text
/// printed from ([`write_record`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum FeedSimRecord {
    /// `rackbench feedsim leaf`: the server, until it was stopped.
    Leaf(LeafRecord),
    /// One leaf searched (or run at fixed rates).
    Search(Box<SearchRun>),
    /// `--num-instances`: several leaves searched in parallel.
    Autoscale(Box<AutoscaleRun>),
}

/// A leaf server's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeafRecord {
    /// The address it served on.
    pub addr: String,
    pub threads: Threads,
    /// How long building its datasets took.
    pub build_seconds: f64,
    pub dataset_bytes: u64,
    /// The process's resident memory and CPU time when it stopped.
    pub rss_bytes: u64,
    pub cpu_seconds: f64,
}

/// A single-instance driver run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchRun {
    pub target: SloTarget,
    /// The open-loop arrival process.
    pub arrival: Arrival,
    /// `--driver closed-compat`: its threads (4 connections each).
    #[serde(default)]
    pub compat_driver_threads: Option<usize>,
    /// The driver's threads (`-l`; absent in records made before it).
    #[serde(default)]
    pub driver_threads: Option<usize>,
    /// The leaf's threads.
    pub threads: Threads,
    pub instance: InstanceRecord,
    /// The host's speed over the run, when it was sampled.
    pub host_speed: Option<HostSpeed>,
}

/// An autoscale run: each instance and the driver process's CPU time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AutoscaleRun {
    pub target: SloTarget,
    pub arrival: Arrival,
    /// `--driver closed-compat`: the first instance's driver threads.
    #[serde(default)]
    pub compat_driver_threads: Option<usize>,
    /// Each instance's driver threads (`-l`).
    #[serde(default)]
    pub driver_threads: Option<usize>,
    /// In order: the report names instance i `i + 1`.
    pub instances: Vec<AutoscaleInstance>,
    /// Process CPU seconds of the driver over the whole run.
    pub driver_cpu_seconds: f64,
    pub host_speed: Option<HostSpeed>,
    /// True when the run was stopped (Ctrl-C or the job's timeout).
    pub stopped: bool,
    /// Fixed rates (`-q`) instead of searches.
    #[serde(default)]
    pub fixed_qps: bool,
}

/// One instance of an autoscale run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AutoscaleInstance {
    /// The instance's line prefix (`instance 2: `; empty alone).
    pub label: String,
    pub port: u16,
    /// The CPUs it was pinned to.
    pub cpus: Vec<usize>,
    pub threads: Threads,
    pub result: InstanceResult,
}

/// What an instance measured, or why it failed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceResult {
    Ran(Box<InstanceRecord>),
    Failed(String),
}

/// A successful instance's reported result.
#[derive(Debug, Clone)]
pub struct InstanceFinal<'a> {
    /// The instance's line prefix (`instance 2: `).
    pub label: &'a str,
    pub reported: &'a ProbeRecord,
}

impl AutoscaleRun {
    /// The instances that succeeded and their reported results.
    pub fn finals(&self) -> Vec<InstanceFinal<'_>> {
        self.instances
            .iter()
            .filter_map(|i| match &i.result {
                InstanceResult::Ran(r) if r.outcome.success => {
                    r.reported_probe().map(|p| InstanceFinal {
                        label: &i.label,
                        reported: p,
                    })
                }
                _ => None,
            })
            .collect()
    }

    /// True when the run, or any instance's search, was interrupted.
    pub fn partial(&self) -> bool {
        self.stopped
            || self.instances.iter().any(|i| match &i.result {
                InstanceResult::Ran(r) => r.outcome.interrupted,
                InstanceResult::Failed(_) => false,
            })
    }

    /// Every instance succeeded and nothing was interrupted.
    pub fn success(&self) -> bool {
        self.finals().len() == self.instances.len() && !self.partial()
    }

    /// The closing lines: each successful instance's final line and the
    /// overall sums (ours), then run-feedsim-multi.sh's JSON object (as
    /// jq prints it, the object upstream's feedsim_autoscale parser reads:
    /// the last one on stdout). After a rerun, as upstream, the search's
    /// object, the rerun line and the rerun's object (`is_fixed_qps` 1).
    pub fn lines(&self) -> Vec<String> {
        let finals = self.finals();
        let mut lines: Vec<String> = finals
            .iter()
            .map(|f| format!("{}{}", f.label, final_line(f.reported)))
            .collect();
        let (sum_req, sum_ach, avg_lat) = overall(&finals);
        lines.push(format!(
            "overall: {} of {} instance(s) succeeded; requested_qps = {sum_req:.2}, measured_qps = {sum_ach:.2}, average latency = {avg_lat:.3}",
            finals.len(),
            self.instances.len()
        ));
        let numbered = |pick: &dyn Fn(&InstanceRecord) -> Option<&ProbeRecord>| {
            self.instances
                .iter()
                .enumerate()
                .filter_map(|(i, inst)| match &inst.result {
                    InstanceResult::Ran(r) => pick(r).map(|p| (i + 1, p)),
                    InstanceResult::Failed(_) => None,
                })
                .collect::<Vec<_>>()
        };
        let rerun = self.instances.iter().find_map(|i| match &i.result {
            InstanceResult::Ran(r) => r.rerun.as_ref().map(|x| x.qps),
            InstanceResult::Failed(_) => None,
        });
        let spawned = self.instances.len();
        if let Some(q) = rerun {
            let search =
                numbered(&|r| r.outcome.final_probe.as_ref().filter(|_| r.outcome.success));
            lines.extend(upstream_summary(&self.target, spawned, &search, false));
            lines.push(format!(
                "Detected unstable run - rerunning with fixed QPS at {}...",
                q.trunc()
            ));
        }
        let reported = numbered(&|r| r.reported_probe().filter(|_| r.outcome.success));
        lines.extend(upstream_summary(
            &self.target,
            spawned,
            &reported,
            self.fixed_qps || rerun.is_some(),
        ));
        lines
    }
}

/// A number as jq prints it after rounding to `decimals`: the shortest
/// form (`23.4`, `0`).
fn jq_number(x: f64, decimals: i32) -> String {
    let m = 10f64.powi(decimals);
    let v = (x * m).round() / m;
    if v == 0.0 { "0".into() } else { format!("{v}") }
}

/// run-feedsim-multi.sh's closing object over the instances with a final
/// line (numbered from one), in jq's layout: per instance its final
/// figures (the values of its final line), the sums and mean latency (two
/// decimals, as its bc), the target, the instance counts, the lowest (0
/// when an instance has none) and highest achieved QPS, and whether the
/// rates were fixed.
fn upstream_summary(
    target: &SloTarget,
    spawned: usize,
    finals: &[(usize, &ProbeRecord)],
    fixed: bool,
) -> Vec<String> {
    let mut out = vec!["{".to_string()];
    for (i, p) in finals {
        out.push(format!("  \"{i}\": {{"));
        out.push(format!(
            "    \"final_requested_qps\": {},",
            jq_number(p.requested_qps, 2)
        ));
        out.push(format!(
            "    \"final_achieved_qps\": {},",
            jq_number(p.achieved_qps, 2)
        ));
        out.push(format!(
            "    \"final_latency_msec\": {}",
            jq_number(p.target_value_ms, 3)
        ));
        out.push("  },".into());
    }
    let req: f64 = finals.iter().map(|(_, p)| round2(p.requested_qps)).sum();
    let ach: f64 = finals.iter().map(|(_, p)| round2(p.achieved_qps)).sum();
    let avg = if finals.is_empty() {
        0.0
    } else {
        // bc's scale=2 truncates.
        let mean = finals
            .iter()
            .map(|(_, p)| (p.target_value_ms * 1000.0).round() / 1000.0)
            .sum::<f64>()
            / finals.len() as f64;
        (mean * 100.0).trunc() / 100.0
    };
    let achieved: Vec<f64> = finals.iter().map(|(_, p)| round2(p.achieved_qps)).collect();
    let max = achieved.iter().copied().fold(0.0, f64::max);
    let min = if finals.len() < spawned || finals.is_empty() {
        0.0
    } else {
        achieved.iter().copied().fold(f64::INFINITY, f64::min)
    };
    out.push("  \"overall\": {".into());
    out.push(format!(
        "    \"final_requested_qps\": {},",
        jq_number(req, 2)
    ));
    out.push(format!(
        "    \"final_achieved_qps\": {},",
        jq_number(ach, 2)
    ));
    out.push(format!(
        "    \"average_latency_msec\": {}",
        jq_number(avg, 2)
    ));
    out.push("  },".into());
    out.push(format!(
        "  \"target_percentile\": \"{}\",",
        target.percentile.label()
    ));
    out.push(format!(
        "  \"target_latency_msec\": \"{}\",",
        target.latency_ms
    ));
    out.push(format!("  \"spawned_instances\": \"{spawned}\","));
    out.push(format!("  \"successful_instances\": {},", finals.len()));
    out.push(format!("  \"min_qps\": {},", jq_number(min, 2)));
    out.push(format!("  \"max_qps\": {},", jq_number(max, 2)));
    out.push(format!("  \"is_fixed_qps\": {}", u8::from(fixed)));
    out.push("}".into());
    out
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The successful instances' summed requested and achieved QPS and their
/// mean latency (0 without any).
pub(crate) fn overall(finals: &[InstanceFinal<'_>]) -> (f64, f64, f64) {
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

/// The text of a stored run.
pub fn write_record(r: &FeedSimRecord, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    match r {
        FeedSimRecord::Leaf(l) => writeln!(out, "{}", ready_line(l))?,
        FeedSimRecord::Search(s) => {
            let o = &s.instance.outcome;
            write_search(
                &SearchRecord {
                    target: s.target,
                    probes: o.probes.clone(),
                    reported: o.final_probe.clone(),
                    failure: o.failure.clone(),
                },
                out,
            )?
        }
        FeedSimRecord::Autoscale(a) => {
            for line in a.lines() {
                writeln!(out, "{line}")?;
            }
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::FeedSimMetrics;
    use load::LatencySummary;
    use load::recorder::SecondSummary;
    use load::report::round3;

    #[test]
    fn closed_compat_threads_are_sized_as_run_sh_sizes_them() {
        let args = |a: &[&str]| DriverArgs::try_parse_from(["feedsim"].iter().chain(a)).unwrap();
        // 2 CPUs without SMT: DRIVER_THREADS = max(round(2/4), 4) = 4.
        // A search uses them all; -q 2 min(2/4, 4) = 1 (4 connections,
        // where 16 were used before), -q 16 four, the last of a list.
        assert_eq!(compat_threads(&args(&[]), 2, false), 4);
        assert_eq!(compat_threads(&args(&["-q", "2"]), 2, false), 1);
        assert_eq!(compat_threads(&args(&["-q", "16"]), 2, false), 4);
        assert_eq!(compat_threads(&args(&["-q", "16,6"]), 2, false), 1);
        // -l is DRIVER_THREADS; -q is still min(rate/4, it).
        assert_eq!(compat_threads(&args(&["-l", "8"]), 2, false), 8);
        assert_eq!(compat_threads(&args(&["-l", "8", "-q", "40"]), 2, false), 8);
        assert_eq!(compat_threads(&args(&["-l", "2", "-q", "40"]), 2, false), 2);
        // -a in a search: search_qps.sh's cap max(round(nproc/5), 4),
        // whatever -l says; -a with -q: the -q sizing.
        assert_eq!(compat_threads(&args(&["-a", "-l", "9"]), 40, true), 8);
        assert_eq!(compat_threads(&args(&["-a", "-q", "8"]), 40, true), 2);
    }

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

    fn probe(phase: Phase, requested: f64, achieved: f64, p95: f64, passed: bool) -> ProbeRecord {
        ProbeRecord {
            seq: 0,
            phase,
            mode: "open:constant".into(),
            requested_qps: requested,
            duration_secs: 10.0,
            total_queries: (achieved * 10.0) as u64,
            scheduled: (requested * 10.0) as u64,
            errors: 0,
            dropped: 0,
            unfinished: 0,
            achieved_qps: achieved,
            total_bytes_rx: 1000,
            total_bytes_tx: 3000,
            latency: LatencySummary {
                count: 10,
                p95_ms: p95,
                ..LatencySummary::default()
            },
            target_value_ms: p95,
            passed,
            verdict: if passed {
                "ok".into()
            } else {
                "too slow".into()
            },
            extensions: 0,
            settle_secs: 0.0,
            start_unix_ms: 1,
            end_unix_ms: 2,
            interval: None,
        }
    }

    fn outcome(final_probe: Option<ProbeRecord>, interrupted: bool) -> SearchOutcome {
        let mut probes = vec![probe(Phase::Peak, 0.0, 20.0, 900.0, true)];
        probes.extend(final_probe.clone());
        SearchOutcome {
            probes,
            success: final_probe.is_some(),
            final_series: vec![SecondSummary {
                second: 1,
                completed: 12,
                errors: 0,
                p50_ms: 100.0,
                p99_ms: 400.0,
                max_ms: 450.0,
            }],
            final_probe,
            peak_qps: 20.12345,
            interrupted,
            failure: None,
        }
    }

    fn status(requests: u64, cpu: f64, ranking: f64) -> LeafStatus {
        LeafStatus {
            ready: true,
            rss_bytes: 300 << 20,
            cpu_seconds: cpu,
            requests,
            build_seconds: 4.5,
            serving_threads: 2,
            dataset_bytes: 200 << 20,
            steps: vec![StepCpuSeconds {
                step: "ranking".into(),
                cpu_seconds: ranking,
            }],
            in_flight: 0,
            skipped_tasks: 3,
            anon_huge_bytes: 1 << 21,
            thp_mode: "madvise".into(),
            huge_pages_advised: true,
            serving_model: "blocking".into(),
        }
    }

    fn instance(final_probe: Option<ProbeRecord>) -> InstanceRecord {
        InstanceRecord {
            outcome: outcome(final_probe, false),
            rerun: None,
            status_before: Some(status(10, 1.0, 0.5)),
            status_after: Some(status(110, 11.0, 6.5)),
            driver_cpu_seconds: 0.5,
            csv: "/tmp/feedsim_results.txt".into(),
            csv_error: None,
            leaf_log: None,
        }
    }

    const THREADS: Threads = Threads {
        serving: 2,
        ranking: 1,
        ser: 1,
    };

    fn target() -> SloTarget {
        SloTarget {
            percentile: Percentile::P95,
            latency_ms: 500.0,
        }
    }

    /// The record through `Record::of`, as stored, and back to metrics.
    fn stored_metrics(r: &FeedSimRecord) -> Map<String, Value> {
        let rec = Record::of("feedsim", RECORD_VERSION, r);
        let text = serde_json::to_string(&rec).unwrap();
        let back: Record = serde_json::from_str(&text).unwrap();
        FeedSim.metrics(&back).unwrap()
    }

    #[test]
    fn leaf_metrics_come_from_its_record() {
        let r = FeedSimRecord::Leaf(LeafRecord {
            addr: "127.0.0.1:11222".into(),
            threads: THREADS,
            build_seconds: 3.25,
            dataset_bytes: 64 << 20,
            rss_bytes: 80 << 20,
            cpu_seconds: 7.5,
        });
        let FeedSimMetrics::Leaf(typed) = r.metrics() else {
            panic!("not the leaf's metrics")
        };
        assert_eq!(typed.dataset_bytes, 64 << 20);
        let m = stored_metrics(&r);
        assert_eq!(m.len(), 4, "{m:?}");
        assert_eq!(m["build_seconds"], 3.25);
        assert_eq!(m["dataset_bytes"].as_u64(), Some(64 << 20));
        assert_eq!(m["rss_bytes"].as_u64(), Some(80 << 20));
        assert_eq!(m["cpu_seconds"], 7.5);
        let mut out = Vec::new();
        FeedSim
            .format(&Record::of("feedsim", RECORD_VERSION, &r), &mut out)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "leaf: datasets built in 3.2 s (64 MiB); ready on 127.0.0.1:11222\n"
        );
    }

    #[test]
    fn search_metrics_come_from_its_record() {
        let r = FeedSimRecord::Search(Box::new(SearchRun {
            target: target(),
            arrival: Arrival::Poisson,
            compat_driver_threads: None,
            driver_threads: None,
            threads: THREADS,
            instance: instance(Some(probe(Phase::Final, 11.4, 11.4, 420.1234, true))),
            host_speed: None,
        }));
        let FeedSimMetrics::Search(typed) = r.metrics() else {
            panic!("not a search's metrics")
        };
        assert_eq!(typed.score, Some(0.2));
        assert_eq!(
            typed
                .instance
                .reported
                .as_ref()
                .map(|f| f.final_achieved_qps),
            Some(11.4)
        );
        let leaf = typed.instance.leaf.as_ref().unwrap();
        assert_eq!(leaf.leaf_requests, 100);
        assert_eq!(leaf.leaf_cpu_ms_per_request, Some(100.0));
        assert_eq!(leaf.driver_cpu_ms_per_request, Some(5.0));
        assert_eq!(leaf.driver_to_leaf_cpu_ratio, Some(0.05));

        let m = stored_metrics(&r);
        assert_eq!(m["target_percentile"], "95p");
        assert_eq!(m["target_latency_msec"], 500.0);
        assert_eq!(
            m["load_mode"],
            "open loop, poisson arrivals; latency from the intended start"
        );
        assert_eq!(
            m["threads"],
            serde_json::json!({"serving": 2, "ranking": 1, "srv_io": 1, "io": 4, "pointer_chase": 8})
        );
        assert_eq!(m["score"], 0.2);
        assert_eq!(m["final_requested_qps"], 11.4);
        assert_eq!(m["final_latency_msec"], 420.123);
        assert_eq!(m["final_latency"]["p95_ms"], 420.1234);
        assert_eq!(m["peak_qps"], 20.123);
        assert_eq!(m["leaf_requests"].as_u64(), Some(100));
        assert_eq!(m["leaf_skipped_tasks"].as_u64(), Some(0));
        assert_eq!(m["leaf_cpu_seconds"], 10.0);
        assert_eq!(m["leaf_rss_bytes"].as_u64(), Some(300 << 20));
        assert_eq!(m["leaf_huge_pages_advised"], true);
        assert_eq!(m["thp_mode"], "madvise");
        assert_eq!(m["leaf_serving_model"], "blocking");
        assert_eq!(m["leaf_step_cpu_ms_per_request"]["ranking"], 60.0);
        assert_eq!(m["driver_cpu_ms_per_request"], 5.0);
        assert_eq!(m["success"], true);
        assert_eq!(m["partial"], false);
        assert_eq!(m["probes"].as_array().unwrap().len(), 2);
        assert_eq!(m["probes"][1]["phase"], "final");
        assert_eq!(m["final_series"][0]["completed"].as_u64(), Some(12));
        assert_eq!(m["csv"], "/tmp/feedsim_results.txt");
        for absent in [
            "failure",
            "leaf_log",
            "host_speed",
            "host_speed_unstable",
            "rerun_qps",
            "rerun_met_target",
            "search_final",
            "rerun_probes",
            "spawned_instances",
            "mode",
        ] {
            assert!(!m.contains_key(absent), "{absent}: {m:?}");
        }
        let mut out = Vec::new();
        FeedSim
            .format(&Record::of("feedsim", RECORD_VERSION, &r), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("Searching for QPS where 95p latency <= 500 msec\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "final requested_qps = 11.40, measured_qps = 11.40, latency = 420.123\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn an_interrupted_search_without_a_result_or_leaf_status() {
        let mut run = instance(None);
        run.outcome.interrupted = true;
        run.outcome.failure = Some("interrupted".into());
        run.status_after = None;
        run.leaf_log = Some("/tmp/feedsim_leaf_11222.log".into());
        let speed = |drift_pct: f64| load::hostspeed::UnitStats {
            samples: 3,
            unit_us_min: 100.0,
            unit_us_median: 110.0,
            unit_us_max: 130.0,
            drift_pct,
        };
        let r = FeedSimRecord::Search(Box::new(SearchRun {
            target: target(),
            arrival: Arrival::Constant,
            compat_driver_threads: None,
            driver_threads: None,
            threads: THREADS,
            instance: run,
            host_speed: Some(HostSpeed {
                cpu: speed(25.0),
                memory: speed(5.0),
                drift_pct: 25.0,
                check: None,
            }),
        }));
        let m = stored_metrics(&r);
        assert_eq!(m["success"], false);
        assert_eq!(m["partial"], true);
        assert_eq!(m["failure"], "interrupted");
        assert_eq!(m["leaf_log"], "/tmp/feedsim_leaf_11222.log");
        assert_eq!(m["host_speed"]["drift_pct"], 25.0);
        assert_eq!(m["host_speed"]["cpu"]["samples"].as_u64(), Some(3));
        assert_eq!(m["host_speed_unstable"], true);
        for absent in [
            "score",
            "final_requested_qps",
            "final_achieved_qps",
            "final_latency",
            "leaf_requests",
            "leaf_rss_bytes",
            "leaf_cpu_ms_per_request",
            "driver_cpu_ms_per_request",
        ] {
            assert!(!m.contains_key(absent), "{absent}: {m:?}");
        }
    }

    fn autoscale(first: InstanceRecord, second: InstanceResult) -> FeedSimRecord {
        let inst = |i: usize, result: InstanceResult| AutoscaleInstance {
            label: format!("instance {}: ", i + 1),
            port: 21212 + i as u16,
            cpus: vec![2 * i, 2 * i + 1],
            threads: THREADS,
            result,
        };
        FeedSimRecord::Autoscale(Box::new(AutoscaleRun {
            target: target(),
            arrival: Arrival::Constant,
            compat_driver_threads: None,
            driver_threads: None,
            instances: vec![
                inst(0, InstanceResult::Ran(Box::new(first))),
                inst(1, second),
            ],
            driver_cpu_seconds: 2.0,
            host_speed: None,
            stopped: false,
            fixed_qps: false,
        }))
    }

    #[test]
    fn autoscale_metrics_come_from_its_record() {
        let r = autoscale(
            instance(Some(probe(Phase::Final, 10.0, 9.5, 400.0, true))),
            InstanceResult::Failed("the leaf process exited".into()),
        );
        let FeedSimMetrics::Autoscale(typed) = r.metrics() else {
            panic!("not autoscale's metrics")
        };
        assert_eq!(typed.spawned_instances, "2");
        assert_eq!(typed.successful_instances, 1);
        assert!(!typed.success);
        let m = stored_metrics(&r);
        // Typed as upstream's autoscale JSON: strings, and integers.
        assert_eq!(m["spawned_instances"], "2");
        assert_eq!(m["successful_instances"].as_u64(), Some(1));
        assert_eq!(m["target_latency_msec"], "500");
        assert_eq!(m["is_fixed_qps"].as_u64(), Some(0));
        // The failed instance counts as 0 in min_qps.
        assert_eq!(m["min_qps"], 0.0);
        assert_eq!(m["max_qps"], 9.5);
        assert_eq!(m["success"], false);
        assert_eq!(m["partial"], false);
        assert_eq!(m["rerun_at_fixed_qps"], Value::Null);
        assert_eq!(m["overall"]["final_requested_qps"], 10.0);
        assert_eq!(m["overall"]["final_achieved_qps"], 9.5);
        assert_eq!(m["overall"]["average_latency_msec"], 400.0);
        assert_eq!(m["score"], round3(9.5 / BASELINE_QPS));
        assert_eq!(m["driver_cpu_ms_per_request"], 20.0);
        assert_eq!(m["leaf_cpu_ms_per_request"], 100.0);
        assert_eq!(m["driver_to_leaf_cpu_ratio"], 0.2);
        assert_eq!(m["target_percentile"], "95p");
        let (a, b) = (&m["1"], &m["2"]);
        assert_eq!(a["port"].as_u64(), Some(21212));
        assert_eq!(a["cpus"], "0-1");
        assert_eq!(a["threads"]["srv_io"].as_u64(), Some(1));
        assert_eq!(a["final_achieved_qps"], 9.5);
        assert_eq!(a["success"], true);
        assert_eq!(a["leaf_cpu_ms_per_request"], 100.0);
        // The driver's CPU is the whole process's: only in the sums.
        assert!(a.get("driver_cpu_ms_per_request").is_none(), "{a}");
        assert!(a.get("rerun_qps").is_none(), "{a}");
        assert_eq!(b["port"].as_u64(), Some(21213));
        assert_eq!(b["cpus"], "2-3");
        assert_eq!(b["success"], false);
        assert_eq!(b["failure"], "the leaf process exited");
        assert!(b.get("probes").is_none(), "{b}");
        assert!(!m.contains_key("host_speed"));
        let mut out = Vec::new();
        FeedSim
            .format(&Record::of("feedsim", RECORD_VERSION, &r), &mut out)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "instance 1: final requested_qps = 10.00, measured_qps = 9.50, latency = 400.000\n\
             overall: 1 of 2 instance(s) succeeded; requested_qps = 10.00, measured_qps = 9.50, average latency = 400.000\n\
             {\n  \"1\": {\n    \"final_requested_qps\": 10,\n    \"final_achieved_qps\": 9.5,\n    \"final_latency_msec\": 400\n  },\n\
             \x20 \"overall\": {\n    \"final_requested_qps\": 10,\n    \"final_achieved_qps\": 9.5,\n    \"average_latency_msec\": 400\n  },\n\
             \x20 \"target_percentile\": \"95p\",\n  \"target_latency_msec\": \"500\",\n  \"spawned_instances\": \"2\",\n\
             \x20 \"successful_instances\": 1,\n  \"min_qps\": 0,\n  \"max_qps\": 9.5,\n  \"is_fixed_qps\": 0\n}\n"
        );
    }

    #[test]
    fn an_autoscale_rerun_reports_the_rerun_and_the_search_final() {
        let rerun = |q: f64, achieved: f64| Rerun {
            qps: q,
            outcome: SearchOutcome {
                probes: vec![probe(Phase::Fixed, q, achieved, 450.0, achieved > 10.0)],
                final_probe: None,
                final_series: Vec::new(),
                peak_qps: 0.0,
                success: true,
                interrupted: false,
                failure: None,
            },
        };
        let mut first = instance(Some(probe(Phase::Final, 12.0, 12.0, 300.0, true)));
        first.rerun = Some(rerun(12.0, 11.5));
        let mut second = instance(Some(probe(Phase::Final, 8.0, 8.0, 350.0, true)));
        second.rerun = Some(rerun(12.0, 9.0));
        let r = autoscale(first, InstanceResult::Ran(Box::new(second)));
        let m = stored_metrics(&r);
        assert_eq!(m["rerun_at_fixed_qps"], 12.0);
        assert_eq!(m["successful_instances"].as_u64(), Some(2));
        assert_eq!(m["success"], true);
        assert_eq!(m["overall"]["final_achieved_qps"], 20.5);
        // Over the reported (rerun) results.
        assert_eq!(m["min_qps"], 9.0);
        assert_eq!(m["max_qps"], 11.5);
        let (a, b) = (&m["1"], &m["2"]);
        assert_eq!(a["rerun_qps"], 12.0);
        assert_eq!(a["rerun_met_target"], true);
        assert_eq!(a["final_achieved_qps"], 11.5);
        assert_eq!(a["search_final"]["final_achieved_qps"], 12.0);
        assert_eq!(a["rerun_probes"].as_array().unwrap().len(), 1);
        assert_eq!(b["rerun_met_target"], false);
        assert_eq!(b["final_achieved_qps"], 9.0);
        assert_eq!(b["search_final"]["final_latency_msec"], 350.0);
        // As upstream's last object, which is the rerun's (run with -q).
        assert_eq!(m["is_fixed_qps"].as_u64(), Some(1));
        // The text: the search's object, upstream's rerun line, the
        // rerun's object (the one upstream's parser reads, last).
        let FeedSimRecord::Autoscale(a) = &r else {
            unreachable!()
        };
        let text = a.lines().join("\n");
        let objects: Vec<&str> = text.matches("\"is_fixed_qps\": ").collect();
        assert_eq!(objects.len(), 2, "{text}");
        assert!(
            text.contains("\"is_fixed_qps\": 0\n}\nDetected unstable run - rerunning with fixed QPS at 12...\n{"),
            "{text}"
        );
        assert!(text.ends_with("\"is_fixed_qps\": 1\n}"), "{text}");
        assert!(text.contains("\"final_achieved_qps\": 20.5,"), "{text}");
    }

    #[test]
    fn autoscale_min_and_max_qps_span_the_instances() {
        let r = autoscale(
            instance(Some(probe(Phase::Final, 10.0, 9.5, 400.0, true))),
            InstanceResult::Ran(Box::new(instance(Some(probe(
                Phase::Final,
                7.0,
                6.25,
                300.0,
                true,
            ))))),
        );
        let m = stored_metrics(&r);
        assert_eq!(m["successful_instances"].as_u64(), Some(2));
        assert_eq!(m["min_qps"], 6.25);
        assert_eq!(m["max_qps"], 9.5);
        // An instance that ran but found no result counts as 0 too.
        let r = autoscale(
            instance(Some(probe(Phase::Final, 10.0, 9.5, 400.0, true))),
            InstanceResult::Ran(Box::new(instance(None))),
        );
        let m = stored_metrics(&r);
        assert_eq!(m["successful_instances"].as_u64(), Some(1));
        assert_eq!(m["min_qps"], 0.0);
        assert_eq!(m["max_qps"], 9.5);
        // None with a result: both 0.
        let r = autoscale(
            instance(None),
            InstanceResult::Failed("the leaf process exited".into()),
        );
        let m = stored_metrics(&r);
        assert_eq!(m["min_qps"], 0.0);
        assert_eq!(m["max_qps"], 0.0);
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

    #[test]
    fn a_record_of_another_version_is_refused() {
        let mut rec = Record::of(
            "feedsim",
            RECORD_VERSION,
            &autoscale(instance(None), InstanceResult::Failed("no leaf".into())),
        );
        rec.version = 1;
        assert!(FeedSim.metrics(&rec).is_err());
    }
}
