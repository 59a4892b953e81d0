//! Command line, probing and metrics of the calibrate workload.

use crate::mdc;
use crate::proto::WorkRequest;
use crate::proto::calibrate_client::CalibrateClient;
use crate::server::{Service, Stall};
use anyhow::{Context, bail};
use clap::Parser;
use harness::{Outcome, Progress, Record, RunContext, Workload};
use load::csv::ProbeCsv;
use load::report::{Reporter, SearchRecord, final_line, searching_line, write_search};
use load::search::{Event, Search, run_fixed};
use load::{Arrival, SearchConfig, ServiceProber, SloTarget};
use serde_json::{Map, Value, json};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tonic::Request;

#[derive(Debug, Parser)]
#[command(
    name = "rackbench calibrate",
    about = "Search the max QPS of a server with a known M/D/c capacity and compare with the analytic value",
    disable_help_subcommand = true
)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    /// Service time of one request, milliseconds.
    #[arg(long, default_value_t = 10.0)]
    pub service_time_ms: f64,
    /// Server workers (requests served concurrently); 0 = reply at once.
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// Latency target, PERCENTILE:MS (avg|50p|90p|95p|99p|99.9p).
    #[arg(long, default_value = "99p:20")]
    pub target: SloTarget,
    /// Arrival process: poisson (the M in M/D/c), constant or burst:N.
    #[arg(long, default_value = "poisson")]
    pub arrival: Arrival,
    /// Relative tolerance at which the bisection stops.
    #[arg(long, default_value_t = 0.02)]
    pub tolerance: f64,
    /// Unthrottled warm-up before the peak probe, seconds.
    #[arg(long, default_value_t = 2.0)]
    pub warmup_secs: f64,
    /// Unthrottled peak probe, seconds.
    #[arg(long, default_value_t = 3.0)]
    pub peak_secs: f64,
    /// Each search probe, seconds (after its own 1 s warm-up).
    #[arg(long, default_value_t = 4.0)]
    pub probe_secs: f64,
    /// The confirming final run, seconds.
    #[arg(long, default_value_t = 15.0)]
    pub final_secs: f64,
    /// Short probes for smoke runs: 1 s warm-up/peak, 2 s probes, 4 s final.
    #[arg(long)]
    pub quick: bool,
    /// Fixed-QPS experiments instead of a search, e.g. 100,200,400.
    #[arg(long, value_delimiter = ',')]
    pub fixed_qps: Vec<f64>,
    /// Load generator threads (client cores).
    #[arg(long, default_value_t = 1)]
    pub client_threads: usize,
    /// HTTP/2 connections from the client.
    #[arg(long, default_value_t = 2)]
    pub connections: usize,
    /// Bound on requests in flight; beyond it requests count as dropped.
    #[arg(long, default_value_t = 20_000)]
    pub max_in_flight: usize,
    /// Seed of the arrival process.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Probe CSV (FeedSim's 15 columns); relative paths go to the metrics folder.
    #[arg(long, default_value = "calibrate_results.csv")]
    pub output: PathBuf,
    /// Drive an already running server (`rackbench calibrate serve`) instead
    /// of starting one; --service-time-ms and --workers must match it.
    #[arg(long)]
    pub server: Option<SocketAddr>,
    /// Make the server stall every this many seconds (with --stall-secs), to
    /// demonstrate coordinated omission.
    #[arg(long, requires = "stall_secs")]
    pub stall_every_secs: Option<f64>,
    /// Length of each stall, seconds.
    #[arg(long, requires = "stall_every_secs")]
    pub stall_secs: Option<f64>,
    /// Bytes in each request and reply payload.
    #[arg(long, default_value_t = 64)]
    pub payload_bytes: u32,
}

#[derive(Debug, clap::Subcommand)]
pub enum Cmd {
    /// Run only the server until Ctrl-C (for driving it with another client).
    Serve {
        /// Address to listen on: loopback by default (127.0.0.1 means both
        /// 127.0.0.1 and ::1).
        #[arg(long, default_value = "127.0.0.1:50051")]
        listen: SocketAddr,
        /// Server runtime threads.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
}

impl Args {
    fn check(&self) -> anyhow::Result<()> {
        if !(self.service_time_ms >= 0.0 && self.service_time_ms.is_finite()) {
            bail!("--service-time-ms must be a non-negative number of milliseconds");
        }
        if !(self.tolerance > 0.0 && self.tolerance < 0.5) {
            bail!("--tolerance must be in (0, 0.5), e.g. 0.02");
        }
        if self.client_threads == 0 || self.connections == 0 {
            bail!("--client-threads and --connections must be at least 1");
        }
        if let Some(q) = self.fixed_qps.iter().find(|q| !(**q > 0.0)) {
            bail!("--fixed-qps values must be positive, got {q}");
        }
        for (name, v) in [
            ("--warmup-secs", self.warmup_secs),
            ("--peak-secs", self.peak_secs),
            ("--probe-secs", self.probe_secs),
            ("--final-secs", self.final_secs),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                bail!("{name} must be a non-negative number of seconds");
            }
        }
        if let (Some(every), Some(len)) = (self.stall_every_secs, self.stall_secs)
            && !(every > 0.0 && len > 0.0 && len < every)
        {
            bail!("--stall-secs must be positive and shorter than --stall-every-secs");
        }
        Ok(())
    }

    fn stall(&self) -> Option<Stall> {
        match (self.stall_every_secs, self.stall_secs) {
            (Some(every), Some(len)) => Some(Stall {
                every: Duration::from_secs_f64(every),
                length: Duration::from_secs_f64(len),
                origin: std::time::Instant::now(),
            }),
            _ => None,
        }
    }

    fn search_config(&self) -> SearchConfig {
        let mut c = SearchConfig::new(self.target);
        c.arrival = self.arrival;
        c.tolerance = self.tolerance;
        let secs = Duration::from_secs_f64;
        if self.quick {
            c.warmup = secs(1.0);
            c.peak = secs(1.0);
            c.probe = secs(2.0);
            c.final_duration = secs(4.0);
        } else {
            c.warmup = secs(self.warmup_secs);
            c.peak = secs(self.peak_secs.max(0.5));
            c.probe = secs(self.probe_secs.max(0.5));
            c.final_duration = secs(self.final_secs.max(0.5));
        }
        c.probe_warmup = secs(1.0);
        // Enough in flight to saturate the workers without a deep queue.
        c.peak_concurrency = (self.workers * 4).clamp(8, 256);
        c
    }
}

/// The workload registered with the harness.
pub struct Calibrate;

impl Workload for Calibrate {
    fn name(&self) -> &'static str {
        "calibrate"
    }

    fn description(&self) -> &'static str {
        "SLO search against an M/D/c gRPC service with an analytic answer"
    }

    fn help(&self) -> String {
        use clap::CommandFactory;
        Args::command().render_long_help().to_string()
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        let a = parse(args)?;
        a.check()
    }

    fn format(&self, record: &Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        let r: CalibrateRecord = record.decode(self.name(), RECORD_VERSION)?;
        write_record(&r, out)?;
        Ok(())
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        let a = parse(args)?;
        a.check()?;
        match &a.cmd {
            Some(Cmd::Serve { listen, threads }) => serve(&a, *listen, *threads, ctx),
            None => search(&a, ctx),
        }
    }
}

fn parse(args: &[String]) -> anyhow::Result<Args> {
    let argv = std::iter::once("rackbench calibrate".to_string()).chain(args.iter().cloned());
    Args::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))
}

fn runtime(threads: usize, name: &str) -> anyhow::Result<tokio::runtime::Runtime> {
    rpc::runtime(threads, name).context("cannot start the tokio runtime")
}

fn serve(
    a: &Args,
    listen: SocketAddr,
    threads: usize,
    ctx: &RunContext,
) -> anyhow::Result<Outcome> {
    let rt = runtime(threads, "calib-server")?;
    let service = Service::new(
        a.workers,
        Duration::from_secs_f64(a.service_time_ms / 1000.0),
        a.stall(),
    );
    let stats = service.stats.clone();
    rt.block_on(async {
        let bound = rpc::server::bind_or_loopback(listen)?;
        let addr = bound.addr;
        let router = tonic::transport::Server::builder().add_service(service.into_server());
        let running = rpc::server::spawn(router, bound);
        eprintln!("calibrate server listening on {addr} ({} workers, {} ms service time); Ctrl-C stops it", a.workers, a.service_time_ms);
        while !ctx.cancel.is_stopped() && !running.is_finished() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        running.shutdown().await.context("server failed")?;
        anyhow::Ok(())
    })?;
    let (served, mean) = stats.snapshot();
    let mut m = Map::new();
    m.insert("requests_served".into(), json!(served));
    m.insert(
        "mean_service_ms".into(),
        json!(mean.map(|d| d.as_secs_f64() * 1000.0)),
    );
    Ok(Outcome {
        metrics: m,
        success: true,
        record: None,
    })
}

fn search(a: &Args, ctx: &RunContext) -> anyhow::Result<Outcome> {
    let service_s = a.service_time_ms / 1000.0;
    let q = a.target.percentile.quantile();
    let capacity = if a.workers > 0 && service_s > 0.0 {
        Some(mdc::Mdc::capacity(a.workers, service_s))
    } else {
        None
    };
    let analytic = match (capacity, q) {
        (Some(_), Some(q)) => Some(mdc::max_rate_for_target(
            a.workers,
            service_s,
            q,
            a.target.latency_ms / 1000.0,
        )?),
        _ => None,
    };
    let server_rt = runtime(1, "calib-server")?;
    let service = Service::new(a.workers, Duration::from_secs_f64(service_s), a.stall());
    let stats = service.stats.clone();
    let (addr, running) = match a.server {
        Some(addr) => (addr, None),
        None => {
            let _guard = server_rt.enter();
            let bound = rpc::server::bind_loopback(0)?;
            let addr = bound.addr;
            let router = tonic::transport::Server::builder().add_service(service.into_server());
            (addr, Some(Arc::new(rpc::server::spawn(router, bound))))
        }
    };
    let client_rt = runtime(a.client_threads, "calib-client")?;
    let pool = client_rt
        .block_on(rpc::client::connect_pool(addr, a.connections))
        .with_context(|| format!("cannot connect to the calibration server at {addr}"))?;
    let alive = running.clone();
    let client = CalibrateClient::new(pool).max_decoding_message_size(64 << 20);
    let svc = tower::service_fn(move |req: Request<WorkRequest>| {
        let mut c = client.clone();
        async move { c.work(req).await }
    });
    let payload = a.payload_bytes;
    let threads = a.client_threads;
    let prober = ServiceProber {
        svc,
        make: Arc::new(move |_| {
            Request::new(WorkRequest {
                payload: vec![0u8; payload as usize],
                reply_bytes: payload,
            })
        }),
        workers: Box::new(move |_| threads),
        max_in_flight: a.max_in_flight,
        drain: Duration::from_secs(2),
        seed: a.seed,
        stop: ctx.cancel.flag(),
        check: Box::new(move || match &alive {
            Some(r) if r.is_finished() => Err("the calibration server has stopped".into()),
            _ => Ok(()),
        }),
        // The M/D/c server drops nothing and holds no hidden backlog: the
        // drain after each probe lets its queue empty.
        settle: None,
    };
    let mut cfg = a.search_config();
    if !a.fixed_qps.is_empty() {
        // Fixed rates are run as given, without an unthrottled warm-up.
        cfg.warmup = Duration::ZERO;
    }
    let csv_path = ctx.output_path(&a.output);
    let csv = ProbeCsv::create(&csv_path)
        .with_context(|| format!("cannot create {}", csv_path.display()))?;
    let planned = if a.fixed_qps.is_empty() {
        cfg.planned()
    } else {
        (cfg.probe + cfg.probe_warmup) * a.fixed_qps.len() as u32
    };
    let progress = Progress::new("calibrate", planned);
    progress.println(&searching_line(&a.target));
    let println = |l: &str| progress.println(l);
    let phase = |l: &str| progress.phase(l);
    let mut reporter = Reporter::new(csv, &println, &phase);
    let mut on_event = |e: Event<'_>| reporter.handle(e);
    let outcome = client_rt.block_on(async {
        if a.fixed_qps.is_empty() {
            Search::new(cfg.clone(), prober, &mut on_event).run().await
        } else {
            run_fixed(
                cfg.clone(),
                prober,
                &a.fixed_qps,
                cfg.probe_warmup,
                cfg.probe,
                &mut on_event,
            )
            .await
        }
    });
    progress.finish();
    if let Some(e) = &reporter.csv_error {
        eprintln!(
            "warning: could not write every row to {}: {e}",
            csv_path.display()
        );
    }
    if let Some(r) = running
        && let Ok(r) = Arc::try_unwrap(r)
    {
        let _ = server_rt.block_on(r.shutdown());
    }
    let (served, mean_service) = stats.snapshot();

    let mut m = Map::new();
    m.insert(
        "target_percentile".into(),
        json!(a.target.percentile.label()),
    );
    m.insert("target_latency_msec".into(), json!(a.target.latency_ms));
    m.insert("arrival".into(), json!(a.arrival.to_string()));
    m.insert(
        "load_mode".into(),
        json!("open loop; latency measured from the intended start"),
    );
    m.insert("server_workers".into(), json!(a.workers));
    m.insert("service_time_ms".into(), json!(a.service_time_ms));
    m.insert("capacity_qps".into(), json!(capacity));
    m.insert("analytic_max_qps".into(), json!(analytic.map(round3)));
    m.insert("peak_qps".into(), json!(round3(outcome.peak_qps)));
    if a.server.is_none() {
        m.insert("server_requests".into(), json!(served));
        m.insert(
            "server_mean_service_ms".into(),
            json!(mean_service.map(|d| round3(d.as_secs_f64() * 1000.0))),
        );
        if let (Some(d), Some(q)) = (mean_service, q)
            && a.workers > 0
            && d.as_secs_f64() > 0.0
        {
            let eff = mdc::max_rate_for_target(
                a.workers,
                d.as_secs_f64(),
                q,
                a.target.latency_ms / 1000.0,
            )?;
            m.insert(
                "analytic_max_qps_at_measured_service_time".into(),
                json!(round3(eff)),
            );
        }
    }
    if let Some(f) = &outcome.final_probe {
        m.insert("final_requested_qps".into(), json!(round3(f.requested_qps)));
        m.insert("final_achieved_qps".into(), json!(round3(f.achieved_qps)));
        m.insert(
            "final_latency_msec".into(),
            json!(round3(f.target_value_ms)),
        );
        m.insert("final_latency".into(), serde_json::to_value(f.latency)?);
        progress.println(&final_line(f));
        if let Some(an) = analytic.filter(|x| *x > 0.0) {
            let ratio = f.requested_qps / an;
            m.insert("measured_to_analytic_ratio".into(), json!(round3(ratio)));
            eprintln!("{}", analytic_line(&a.target, f, an));
        }
    }
    if let Some(cap) = capacity {
        m.insert(
            "peak_to_capacity_ratio".into(),
            json!(round3(outcome.peak_qps / cap)),
        );
    }
    // The model's value of the target percentile at each probed rate, for
    // checking the measurement probe by probe.
    if let (Some(cap), Some(q)) = (capacity, q) {
        let per_probe: Vec<Value> = outcome
            .probes
            .iter()
            .filter(|p| p.requested_qps > 0.0 && p.requested_qps < cap)
            .map(|p| {
                let model = mdc::Mdc::new(a.workers, service_s, p.requested_qps)
                    .map(|m| round3(m.sojourn_quantile(q) * 1000.0))
                    .ok();
                json!({ "seq": p.seq, "requested_qps": p.requested_qps, "measured_ms": p.target_value_ms, "analytic_ms": model })
            })
            .collect();
        m.insert("analytic_latency_per_probe".into(), Value::Array(per_probe));
    }
    m.insert("search_success".into(), json!(outcome.success));
    if let Some(f) = &outcome.failure {
        progress.println(&load::report::failure_line(f));
        m.insert("search_failure".into(), json!(f));
    }
    m.insert("partial".into(), json!(outcome.interrupted));
    m.insert("probes".into(), serde_json::to_value(&outcome.probes)?);
    m.insert(
        "final_series".into(),
        serde_json::to_value(&outcome.final_series)?,
    );
    m.insert("probe_csv".into(), json!(csv_path.display().to_string()));
    m.insert("search".into(), search_settings(&cfg));
    let record = CalibrateRecord {
        search: SearchRecord {
            target: a.target,
            probes: outcome.probes.clone(),
            reported: outcome.final_probe.clone(),
            failure: outcome.failure.clone(),
        },
        analytic_max_qps: analytic.filter(|x| *x > 0.0),
    };
    Ok(Outcome {
        metrics: m,
        success: outcome.success,
        record: Some(Record::of("calibrate", RECORD_VERSION, &record)),
    })
}

/// The version of [`CalibrateRecord`]; raise it when its shape changes.
const RECORD_VERSION: u32 = 1;

/// What a calibrate search keeps with its stored run: the search and the
/// M/D/c model's maximum rate under the target.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CalibrateRecord {
    pub search: SearchRecord,
    pub analytic_max_qps: Option<f64>,
}

/// Our closing line: the measured rate against the model's.
fn analytic_line(t: &SloTarget, f: &load::search::ProbeRecord, analytic: f64) -> String {
    format!(
        "calibrate: max QPS meeting {} <= {} ms: measured {:.1}, M/D/c analytic {:.1}, ratio {:.3}",
        t.percentile.label(),
        t.latency_ms,
        f.requested_qps,
        analytic,
        f.requested_qps / analytic
    )
}

/// The text of a stored run: the search's lines, then the model line.
fn write_record(r: &CalibrateRecord, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    write_search(&r.search, out)?;
    if let (Some(f), Some(an)) = (&r.search.reported, r.analytic_max_qps) {
        writeln!(out, "{}", analytic_line(&r.search.target, f, an))?;
    }
    out.flush()
}

fn search_settings(c: &SearchConfig) -> Value {
    json!({
        "tolerance": c.tolerance,
        "min_completion": c.min_completion,
        "warmup_secs": c.warmup.as_secs_f64(),
        "peak_secs": c.peak.as_secs_f64(),
        "probe_secs": c.probe.as_secs_f64(),
        "probe_warmup_secs": c.probe_warmup.as_secs_f64(),
        "final_secs": c.final_duration.as_secs_f64(),
        "peak_concurrency": c.peak_concurrency,
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
