//! Command line, probing and metrics of the calibrate workload.

use crate::mdc;
use crate::proto::WorkRequest;
use crate::proto::calibrate_client::CalibrateClient;
use crate::server::{Service, Stall};
use anyhow::{Context, bail};
use clap::Parser;
use harness::argcheck::{
    at_least_one, fraction, non_negative_ms, non_negative_secs, positive_rate, positive_secs,
    search_tolerance, whole,
};
use harness::{Outcome, Progress, Record, RunContext, Workload};
use load::csv::ProbeCsv;
use load::recorder::SecondSummary;
use load::report::round3;
use load::report::{Reporter, SearchRecord, final_line, searching_line, write_search};
use load::search::{Event, Search, run_fixed};
use load::{Arrival, ProbeRecord, Prober, SearchConfig, SearchOutcome, ServiceProber, SloTarget};
use serde::{Deserialize, Serialize};
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
    #[arg(long, default_value_t = 10.0, allow_negative_numbers = true, value_parser = non_negative_ms)]
    pub service_time_ms: f64,
    /// Server workers (requests served concurrently); 0 = reply at once.
    #[arg(long, default_value_t = 8, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub workers: usize,
    /// Latency target, PERCENTILE:MS (avg|50p|90p|95p|99p|99.9p).
    #[arg(long, default_value = "95p:20")]
    pub target: SloTarget,
    /// Arrival process: poisson (the M in M/D/c), constant or burst:N.
    #[arg(long, default_value = "poisson")]
    pub arrival: Arrival,
    /// Relative tolerance at which the bisection stops.
    #[arg(long, default_value_t = 0.01, allow_negative_numbers = true, value_parser = search_tolerance)]
    pub tolerance: f64,
    /// Unthrottled warm-up before the peak probe, seconds.
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true, value_parser = non_negative_secs)]
    pub warmup_secs: f64,
    /// Unthrottled peak probe, seconds.
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true, value_parser = positive_secs)]
    pub peak_secs: f64,
    /// Each search probe, seconds (after its own 1 s warm-up).
    #[arg(long, default_value_t = 4.0, allow_negative_numbers = true, value_parser = positive_secs)]
    pub probe_secs: f64,
    /// The confirming final run, seconds.
    #[arg(long, default_value_t = 15.0, allow_negative_numbers = true, value_parser = positive_secs)]
    pub final_secs: f64,
    /// Short probes for smoke runs: 1 s warm-up/peak, 2 s probes, 4 s final,
    /// a 1 s overhead probe, close calls extended once at most.
    #[arg(long)]
    pub quick: bool,
    /// Fixed-QPS experiments instead of a search, e.g. 100,200,400.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true, value_parser = positive_rate)]
    pub fixed_qps: Vec<f64>,
    /// Load generator threads (client cores).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub client_threads: usize,
    /// HTTP/2 connections from the client.
    #[arg(long, default_value_t = 2, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub connections: usize,
    /// Bound on requests in flight; beyond it requests count as dropped.
    #[arg(long, default_value_t = 20_000, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub max_in_flight: usize,
    /// Seed of the arrival process.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = whole::<u64>)]
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
    #[arg(long, requires = "stall_secs", allow_negative_numbers = true, value_parser = positive_secs)]
    pub stall_every_secs: Option<f64>,
    /// Length of each stall, seconds.
    #[arg(long, requires = "stall_every_secs", allow_negative_numbers = true, value_parser = positive_secs)]
    pub stall_secs: Option<f64>,
    /// The load generator's gRPC client: h2 (a lean unary client on the h2
    /// crate, the request encoded once) or tonic (tonic's generated client,
    /// slower per call; kept to compare).
    #[arg(long, value_enum, default_value_t = ClientKind::H2)]
    pub client: ClientKind,
    /// Confidence of the interval the search judges close calls and the
    /// final run with (0 = off: every probe judged on its point estimate,
    /// as FeedSim does).
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true, value_parser = fraction)]
    pub confidence: f64,
    /// How many times a close call (or a final run) may be extended by
    /// another probe while its interval cannot tell it from the target.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub extensions: usize,
    /// The overhead probe: seconds at 10% of capacity before the search,
    /// where the queue is almost never waited on, measuring the chain's
    /// own time (latency minus the service time) for the model; 0 = none.
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true, value_parser = non_negative_secs)]
    pub overhead_secs: f64,
    /// Bytes in each request and reply payload.
    #[arg(long, default_value_t = 64, allow_negative_numbers = true, value_parser = whole::<u32>)]
    pub payload_bytes: u32,
    /// Measure only the unthrottled (closed-loop) peak: the warm-up and
    /// the peak probe, no search.
    #[arg(long, conflicts_with = "fixed_qps")]
    pub peak_only: bool,
    /// Requests in flight in the unthrottled warm-up and peak probes
    /// (default: 4 per server worker, 8 to 256).
    #[arg(long, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub peak_concurrency: Option<usize>,
}

/// Which gRPC client drives the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    H2,
    Tonic,
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
        #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
        threads: usize,
    },
}

// Value parsers: a meaningless number is refused while parsing, so clap's
// message names the flag ("invalid value '0' for '--workers <WORKERS>':
// must be at least 1") and nothing starts. Numeric flags also take
// `allow_negative_numbers`, so `--workers -5` is read as a value and refused
// here instead of being taken for an unknown flag.

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

    /// Seconds of the overhead probe (`--quick` keeps it to 1 s).
    fn overhead_secs(&self) -> f64 {
        if self.quick {
            self.overhead_secs.min(1.0)
        } else {
            self.overhead_secs
        }
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
        c.confidence = self.confidence;
        if self.confidence > 0.0 {
            // Smoke runs extend a close call once at most.
            c.max_extensions = if self.quick {
                self.extensions.min(1)
            } else {
                self.extensions
            };
            // One more final window at most: finals are long already.
            c.extended_finals = 1;
        }
        // Enough in flight to saturate the workers without a deep queue.
        c.peak_concurrency = self
            .peak_concurrency
            .unwrap_or((self.workers * 4).clamp(8, 256));
        c
    }
}

/// The workload registered with the harness.
pub struct Calibrate;

/// What a calibrate run answers, first: the measured max QPS at the
/// latency target, the M/D/c model's, and their ratio.
static HEADLINES: &[direction::Headline] = &[
    direction::headline("final_achieved_qps", "max QPS at target", "QPS"),
    direction::headline("analytic_max_qps", "M/D/c max QPS", "QPS"),
    direction::headline("measured_to_analytic_ratio", "measured / analytic", ""),
    direction::headline("final_latency_msec", "latency at target", "ms"),
];

impl Workload for Calibrate {
    fn headlines(&self) -> &'static [direction::Headline] {
        HEADLINES
    }

    fn directions(&self) -> &'static [&'static [direction::Rule]] {
        // The search's figures are all calibrate measures; the model's
        // values and the settings are neutral.
        static TABLES: &[&[direction::Rule]] = &[load::directions::SEARCH];
        TABLES
    }

    fn name(&self) -> &'static str {
        "calibrate"
    }

    fn description(&self) -> &'static str {
        "SLO search against an M/D/c gRPC service with an analytic answer"
    }

    fn upstream(&self) -> &'static str {
        "no upstream tool: rackbench's own check of its load generator"
    }

    fn help(&self) -> String {
        use clap::CommandFactory;
        Args::command().render_long_help().to_string()
    }

    fn command(&self) -> Option<clap::Command> {
        use clap::CommandFactory;
        Some(Args::command())
    }

    fn subcommand_help(&self, args: &[String]) -> Option<String> {
        use clap::CommandFactory;
        let name = args.iter().find(|a| !a.starts_with('-'))?;
        let mut cmd = Args::command();
        // Built, so the subcommand's usage names `rackbench calibrate serve`.
        cmd.build();
        let sub = cmd.find_subcommand_mut(name)?;
        Some(sub.render_long_help().to_string())
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        let a = parse(args)?;
        a.check()
    }

    fn format(&self, record: &Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        match record.decode::<CalibrateRecord>(self.name(), RECORD_VERSION)? {
            CalibrateRecord::Search(r) => write_record(&r, out)?,
            CalibrateRecord::Serve(r) => write_serve(&r, out)?,
        }
        Ok(())
    }

    /// All on stderr (calibrate is ours; stdout is left to a job's
    /// report): a search's final line, failure and model lines; what a
    /// server served.
    fn format_end(
        &self,
        record: &Record,
        _out: &mut dyn std::io::Write,
        diag: &mut dyn std::io::Write,
    ) -> anyhow::Result<()> {
        match record.decode::<CalibrateRecord>(self.name(), RECORD_VERSION)? {
            CalibrateRecord::Search(r) => {
                if let Some(f) = &r.search.reported {
                    writeln!(diag, "{}", final_line(f))?;
                }
                if let Some(f) = &r.search.failure {
                    writeln!(diag, "{}", load::report::failure_line(f))?;
                }
                for line in model_lines(&r) {
                    writeln!(diag, "{line}")?;
                }
            }
            CalibrateRecord::Serve(r) => writeln!(diag, "{}", served_line(&r))?,
        }
        Ok(())
    }

    fn metrics(
        &self,
        record: &Record,
    ) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
        match record.decode::<CalibrateRecord>(self.name(), RECORD_VERSION)? {
            CalibrateRecord::Search(r) => harness::record::metrics_map(&search_metrics(&r)?),
            CalibrateRecord::Serve(r) => harness::record::metrics_map(&serve_metrics(&r)),
        }
    }

    fn marks(&self, record: &Record) -> Vec<String> {
        match record.decode::<CalibrateRecord>(self.name(), RECORD_VERSION) {
            Ok(CalibrateRecord::Search(r)) => marks_of(&r),
            _ => Vec::new(),
        }
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

fn serve(
    a: &Args,
    listen: SocketAddr,
    threads: usize,
    ctx: &RunContext,
) -> anyhow::Result<Outcome> {
    let rt = rpc::runtime(threads, "calib-server")?;
    let service = Service::new(
        a.workers,
        Duration::from_secs_f64(a.service_time_ms / 1000.0),
        a.stall(),
    );
    let stats = service.stats.clone();
    let address = rt.block_on(async {
        let bound = rpc::server::bind_or_loopback(listen)?;
        let addr = bound.addr;
        let router = tonic::transport::Server::builder().add_service(service.into_server());
        let running = rpc::server::spawn(router, bound);
        eprintln!(
            "{}",
            listening_line(&addr.to_string(), a.workers, a.service_time_ms)
        );
        while !ctx.cancel.is_stopped() && !running.is_finished() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        running.shutdown().await.context("server failed")?;
        anyhow::Ok(addr)
    })?;
    let (served, mean) = stats.snapshot();
    let record = ServeRecord {
        address: address.to_string(),
        workers: a.workers,
        service_time_ms: a.service_time_ms,
        requests_served: served,
        mean_service: mean,
    };
    Ok(Outcome::measured(
        true,
        Record::of("calibrate", RECORD_VERSION, &CalibrateRecord::Serve(record)),
    ))
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
    // The host before the run (and after it, below): whether it was busy
    // or changed speed, which the result cannot be trusted through.
    let host = load::hostspeed::HostChecker::start();
    let server_rt = rpc::runtime(1, "calib-server")?;
    let service = Service::new(a.workers, Duration::from_secs_f64(service_s), a.stall());
    let stats = service.stats.clone();
    let (addr, running) = match a.server {
        Some(addr) => (addr, None),
        None => {
            let (addr, running) = start_server(&server_rt, service)?;
            (addr, Some(running))
        }
    };
    let client_rt = rpc::runtime(a.client_threads, "calib-client")?;
    let alive = running.clone();
    let check: CheckFn = Box::new(move || match &alive {
        Some(r) if r.is_finished() => Err(load::Error::Host(
            "the calibration server has stopped".into(),
        )),
        _ => Ok(()),
    });
    let request = WorkRequest {
        payload: vec![0u8; a.payload_bytes as usize],
        reply_bytes: a.payload_bytes,
    };
    let mut cfg = a.search_config();
    if !a.fixed_qps.is_empty() {
        // Fixed rates are run as given, without an unthrottled warm-up.
        cfg.warmup = Duration::ZERO;
    }
    let csv_path = ctx.output_path(&a.output);
    let csv = ProbeCsv::create(&csv_path)
        .with_context(|| format!("cannot create {}", csv_path.display()))?;
    // The overhead probe runs before a search whose model has a value to
    // correct (not before fixed rates: those have no maximum to compare).
    let overhead_plan = overhead_plan(a, capacity, analytic, &stats);
    let planned = planned_duration(a, &cfg, overhead_plan.is_some());
    let progress = Progress::new("calibrate", planned);
    progress.println(&searching_line(&a.target));
    let println = |l: &str| progress.println(l);
    let phase = |l: &str, d| progress.phase_for(l, d);
    let mut reporter = Reporter::new(csv, &println, &phase);
    let mut on_event = |e: Event<'_>| reporter.handle(e);
    let (overhead, outcome) = match a.client {
        ClientKind::H2 => {
            let client = client_rt
                .block_on(rpc::unary::UnaryClient::connect(
                    addr,
                    a.connections,
                    WORK_PATH,
                ))
                .with_context(|| format!("cannot connect to the calibration server at {addr}"))?;
            // The request is encoded once; each call sends the same bytes.
            let body = rpc::unary::frame_message(&request);
            let p = prober(a, ctx, client, move |_| body.clone(), check);
            client_rt.block_on(drive(p, a, &cfg, overhead_plan, &mut on_event))
        }
        ClientKind::Tonic => {
            let pool = client_rt
                .block_on(rpc::client::connect_pool(addr, a.connections))
                .with_context(|| format!("cannot connect to the calibration server at {addr}"))?;
            let client = CalibrateClient::new(pool).max_decoding_message_size(64 << 20);
            let svc = tower::service_fn(move |req: Request<WorkRequest>| {
                let mut c = client.clone();
                async move { c.work(req).await }
            });
            let p = prober(a, ctx, svc, move |_| Request::new(request.clone()), check);
            client_rt.block_on(drive(p, a, &cfg, overhead_plan, &mut on_event))
        }
    };
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
    let host = host.finish();
    let record = SearchRun {
        search: SearchRecord {
            target: a.target,
            probes: outcome.probes,
            reported: outcome.final_probe,
            failure: outcome.failure,
        },
        analytic_max_qps: analytic,
        arrival: a.arrival.to_string(),
        server_workers: a.workers,
        service_time_ms: a.service_time_ms,
        peak_qps: outcome.peak_qps,
        success: outcome.success,
        interrupted: outcome.interrupted,
        final_series: outcome.final_series,
        probe_csv: csv_path.display().to_string(),
        settings: SearchSettings {
            client: Some(a.client),
            ..SearchSettings::of(&cfg)
        },
        own_server: a.server.is_none().then_some(ServerStats {
            requests: served,
            mean_service,
        }),
        overhead,
        host: Some(host),
    };
    Ok(Outcome::measured(
        record.success,
        Record::of(
            "calibrate",
            RECORD_VERSION,
            &CalibrateRecord::Search(Box::new(record)),
        ),
    ))
}

/// Starts the calibration server on a loopback port of `rt`.
fn start_server(
    rt: &tokio::runtime::Runtime,
    service: Service,
) -> anyhow::Result<(SocketAddr, Arc<rpc::server::Running>)> {
    let _guard = rt.enter();
    let bound = rpc::server::bind_loopback(0)?;
    let addr = bound.addr;
    let router = tonic::transport::Server::builder().add_service(service.into_server());
    Ok((addr, Arc::new(rpc::server::spawn(router, bound))))
}

/// The overhead probe runs before a search whose model has a value to
/// correct (not before fixed rates: those have no maximum to compare).
fn overhead_plan(
    a: &Args,
    capacity: Option<f64>,
    analytic: Option<f64>,
    stats: &Arc<crate::server::Stats>,
) -> Option<OverheadPlan> {
    match (capacity, analytic) {
        (Some(cap), Some(_))
            if a.overhead_secs() > 0.0 && a.fixed_qps.is_empty() && !a.peak_only =>
        {
            Some(OverheadPlan {
                rate: cap * OVERHEAD_LOAD,
                nominal_service_ms: a.service_time_ms,
                stats: a.server.is_none().then(|| stats.clone()),
            })
        }
        _ => None,
    }
}

/// How long the run is planned to take (`overhead`: with the overhead
/// probe), for the progress line.
fn planned_duration(a: &Args, cfg: &SearchConfig, overhead: bool) -> Duration {
    (if a.peak_only {
        cfg.warmup + cfg.peak
    } else if a.fixed_qps.is_empty() {
        cfg.planned()
    } else {
        (cfg.probe + cfg.probe_warmup) * a.fixed_qps.len() as u32
    }) + if overhead {
        Duration::from_secs_f64(a.overhead_secs() + 0.5)
    } else {
        Duration::ZERO
    }
}

/// The Calibrate service's one method, as gRPC names it on the wire.
const WORK_PATH: &str = "/rackbench.calibrate.Calibrate/Work";

type CheckFn = Box<dyn FnMut() -> Result<(), load::Error> + Send>;

/// The search's prober over one client (the lean h2 client or tonic's).
fn prober<S, F>(
    a: &Args,
    ctx: &RunContext,
    svc: S,
    make: F,
    check: CheckFn,
) -> ServiceProber<S, F> {
    let threads = a.client_threads;
    ServiceProber {
        svc,
        make: Arc::new(make),
        workers: Box::new(move |_| threads),
        max_in_flight: a.max_in_flight,
        drain: Duration::from_secs(2),
        seed: a.seed,
        stop: ctx.cancel.flag(),
        check,
        // The M/D/c server drops nothing and holds no hidden backlog: the
        // drain after each probe lets its queue empty.
        settle: None,
    }
}

/// The overhead probe's plan: its rate and the server's totals to read.
struct OverheadPlan {
    rate: f64,
    nominal_service_ms: f64,
    stats: Option<Arc<crate::server::Stats>>,
}

/// Runs the overhead probe (see [`OverheadRecord`]); `Err` is a fault, as
/// in the search.
async fn measure_overhead<P: Prober>(
    prober: &mut P,
    plan: &OverheadPlan,
    secs: f64,
) -> Result<Option<OverheadRecord>, String> {
    let before = plan.stats.as_ref().map(|s| s.totals());
    let mode = load::Mode::Open {
        rate: plan.rate,
        arrival: Arrival::Poisson,
    };
    let r = prober
        .probe(
            mode,
            Duration::from_millis(500),
            Duration::from_secs_f64(secs),
        )
        .await?;
    if r.interrupted || r.recorder.ok == 0 {
        return Ok(None);
    }
    // The server's mean service time over the probe (its warm-up included).
    let measured = match (before, plan.stats.as_ref().map(|s| s.totals())) {
        (Some((n0, ns0)), Some((n1, ns1))) if n1 > n0 => {
            Some((ns1 - ns0) as f64 / (n1 - n0) as f64 / 1e6)
        }
        _ => None,
    };
    let service_ms = measured.unwrap_or(plan.nominal_service_ms);
    let h = &r.recorder.latency;
    let quantiles_ms = (0..OVERHEAD_POINTS)
        .map(|i| {
            let q = (i as f64 + 0.5) / OVERHEAD_POINTS as f64;
            round3(h.value_at_quantile(q) as f64 / 1000.0 - service_ms)
        })
        .collect();
    Ok(Some(OverheadRecord {
        requested_qps: plan.rate,
        duration_secs: r.window.as_secs_f64(),
        replies: r.recorder.ok,
        errors: r.recorder.errors,
        service_ms: round3(service_ms),
        service_measured: measured.is_some(),
        quantiles_ms,
    }))
}

/// The overhead probe's load, a fraction of the queue's capacity.
const OVERHEAD_LOAD: f64 = 0.1;

/// `overhead: median 0.412 ms, 99p 1.020 ms (latency minus the server's
/// 10.055 ms service time, 240 replies at 80 QPS over 3 s)`.
fn overhead_line(o: &OverheadRecord) -> String {
    format!(
        "overhead: median {:.3} ms, 99p {:.3} ms (latency minus the {} {:.3} ms service time, {} replies at {:.0} QPS over {:.0} s)",
        o.quantile(0.5),
        o.quantile(0.99),
        if o.service_measured {
            "server's measured"
        } else {
            "nominal"
        },
        o.service_ms,
        o.replies,
        o.requested_qps,
        o.duration_secs
    )
}

/// How many equally likely values describe the measured overhead.
const OVERHEAD_POINTS: usize = 100;

/// The search, or the fixed rates when given, after the overhead probe
/// when one is planned.
async fn drive<P: Prober>(
    mut prober: P,
    a: &Args,
    cfg: &SearchConfig,
    overhead: Option<OverheadPlan>,
    on_event: &mut dyn FnMut(Event<'_>),
) -> (Option<OverheadRecord>, SearchOutcome) {
    let measured = match &overhead {
        Some(plan) => match measure_overhead(&mut prober, plan, a.overhead_secs()).await {
            Ok(m) => m,
            Err(why) => {
                let out = SearchOutcome {
                    failure: Some(format!("the overhead probe failed: {why}")),
                    ..SearchOutcome::default()
                };
                return (None, out);
            }
        },
        None => None,
    };
    (measured, run_search(prober, a, cfg, on_event).await)
}

async fn run_search<P: Prober>(
    prober: P,
    a: &Args,
    cfg: &SearchConfig,
    on_event: &mut dyn FnMut(Event<'_>),
) -> SearchOutcome {
    if a.peak_only {
        load::search::run_peak(cfg.clone(), prober, on_event).await
    } else if a.fixed_qps.is_empty() {
        Search::new(cfg.clone(), prober, on_event).run().await
    } else {
        run_fixed(
            cfg.clone(),
            prober,
            &a.fixed_qps,
            cfg.probe_warmup,
            cfg.probe,
            on_event,
        )
        .await
    }
}

/// The version of [`CalibrateRecord`]; raise it when its shape changes.
const RECORD_VERSION: u32 = 2;

/// What a calibrate run keeps with its stored run, by command.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum CalibrateRecord {
    /// The search (or fixed rates) against the M/D/c server.
    Search(Box<SearchRun>),
    /// `calibrate serve`: the server alone until stopped.
    Serve(ServeRecord),
}

/// A calibrate search: the search, the queue it ran against, the M/D/c
/// model's maximum rate under the target and what the server measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchRun {
    pub search: SearchRecord,
    /// The model's maximum rate under the target (`None` without workers, a
    /// service time or a percentile target; 0 when the target is below the
    /// service time).
    pub analytic_max_qps: Option<f64>,
    /// The arrival process (`poisson`, `constant`, `burst:N`).
    pub arrival: String,
    pub server_workers: usize,
    pub service_time_ms: f64,
    pub peak_qps: f64,
    pub success: bool,
    /// Stopped before the search ended: the probes so far.
    pub interrupted: bool,
    /// The final run, second by second.
    pub final_series: Vec<SecondSummary>,
    /// The probe CSV written (as the report names it).
    pub probe_csv: String,
    pub settings: SearchSettings,
    /// The built-in server's figures; `None` when driving a `--server`.
    pub own_server: Option<ServerStats>,
    /// The overhead probe, when one ran (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<OverheadRecord>,
    /// The host before and after the run (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<load::hostspeed::HostCheck>,
}

/// How far from 1 the measured/model ratio may be for calibrate to vouch
/// for a result (its runs on a quiet host stay within 3%).
pub const RATIO_VOUCHED: f64 = 0.10;

/// Why a calibrate result cannot be trusted: the host checks' concerns,
/// and a measured/model ratio further than [`RATIO_VOUCHED`] from 1 (the
/// model with the measured service time and overhead when the overhead
/// probe ran, else the pure M/D/c value).
pub fn marks_of(r: &SearchRun) -> Vec<String> {
    let mut out = r.host.map(|h| h.concerns()).unwrap_or_default();
    let Some(f) = &r.search.reported else {
        return out;
    };
    let model = match model_with_overhead(r).filter(|m| m.max_qps > 0.0) {
        Some(m) => Some((
            m.max_qps,
            "the M/D/c model with the measured service time and overhead",
        )),
        None => r
            .analytic_max_qps
            .filter(|x| *x > 0.0)
            .map(|an| (an, "the M/D/c analytic value")),
    };
    if let Some((max, what)) = model {
        let ratio = f.requested_qps / max;
        if (ratio - 1.0).abs() > RATIO_VOUCHED {
            out.push(format!(
                "measured/model ratio {ratio:.3} ({:.1} QPS against {max:.1} from {what}) is outside {:.2}-{:.2}, what calibrate vouches for: the chain or the host, not the queue, set the result",
                f.requested_qps,
                1.0 - RATIO_VOUCHED,
                1.0 + RATIO_VOUCHED
            ));
        }
    }
    out
}

/// The chain's own time, measured before the search at 10% of the queue's
/// capacity, where a request almost never waits (M/D/c's chance of waiting
/// there is below 1e-4 for 8 workers): each reply's latency minus the
/// service time is what the client, the two gRPC stacks, the loopback and
/// the scheduler add. The model with overhead adds it to the queue's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverheadRecord {
    pub requested_qps: f64,
    pub duration_secs: f64,
    pub replies: u64,
    pub errors: u64,
    /// The service time subtracted, ms: the built-in server's mean over the
    /// probe (`service_measured`), else the nominal `--service-time-ms`.
    pub service_ms: f64,
    pub service_measured: bool,
    /// Latency minus that service time at the quantiles 0.005, 0.015, ...,
    /// 0.995, ms: equally likely values of the overhead.
    pub quantiles_ms: Vec<f64>,
}

impl OverheadRecord {
    /// The overhead at quantile `q` (0..1), ms: the equally likely value
    /// whose slot holds `q`, indexed by this record's own point count (NaN
    /// for a record without points).
    pub fn quantile(&self, q: f64) -> f64 {
        let n = self.quantiles_ms.len();
        let i = ((q.clamp(0.0, 1.0) * n as f64) as usize).min(n.saturating_sub(1));
        self.quantiles_ms.get(i).copied().unwrap_or(f64::NAN)
    }
}

/// The search's settings (the report's `search` object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchSettings {
    pub tolerance: f64,
    pub min_completion: f64,
    pub warmup_secs: f64,
    pub peak_secs: f64,
    pub probe_secs: f64,
    pub probe_warmup_secs: f64,
    pub final_secs: f64,
    pub peak_concurrency: usize,
    /// The load generator's gRPC client (absent in records from before
    /// there was a choice: those used tonic's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientKind>,
}

impl SearchSettings {
    fn of(c: &SearchConfig) -> Self {
        SearchSettings {
            tolerance: c.tolerance,
            min_completion: c.min_completion,
            warmup_secs: c.warmup.as_secs_f64(),
            peak_secs: c.peak.as_secs_f64(),
            probe_secs: c.probe.as_secs_f64(),
            probe_warmup_secs: c.probe_warmup.as_secs_f64(),
            final_secs: c.final_duration.as_secs_f64(),
            peak_concurrency: c.peak_concurrency,
            client: None,
        }
    }
}

/// What the built-in server counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    pub requests: u64,
    pub mean_service: Option<Duration>,
}

/// `calibrate serve`: where it listened, its queue and what it served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeRecord {
    pub address: String,
    pub workers: usize,
    pub service_time_ms: f64,
    pub requests_served: u64,
    pub mean_service: Option<Duration>,
}

/// The report's metrics of `calibrate serve`.
#[derive(Debug, Serialize)]
pub struct ServeMetrics {
    pub requests_served: u64,
    /// `null` when nothing was served.
    pub mean_service_ms: Option<f64>,
}

/// The report's metrics of `calibrate serve`, from its record.
pub fn serve_metrics(r: &ServeRecord) -> ServeMetrics {
    ServeMetrics {
        requests_served: r.requests_served,
        mean_service_ms: r.mean_service.map(|d| d.as_secs_f64() * 1000.0),
    }
}

/// The report's metrics of a calibrate search.
#[derive(Debug, Serialize)]
pub struct SearchMetrics<'a> {
    pub target_percentile: &'static str,
    pub target_latency_msec: f64,
    pub arrival: &'a str,
    pub load_mode: &'static str,
    pub server_workers: usize,
    pub service_time_ms: f64,
    /// `null` without workers or a service time.
    pub capacity_qps: Option<f64>,
    /// `null` without a model value.
    pub analytic_max_qps: Option<f64>,
    pub peak_qps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_requests: Option<u64>,
    /// Present with the built-in server; `null` when it served nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_mean_service_ms: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analytic_max_qps_at_measured_service_time: Option<f64>,
    #[serde(flatten)]
    pub reported: Option<load::report::FinalMetrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_to_analytic_ratio: Option<f64>,
    /// The overhead probe's overhead (latency minus service time), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead_ms: Option<OverheadSummary>,
    /// The model at the measured service time plus the measured overhead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analytic_max_qps_with_overhead: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_to_model_with_overhead_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_to_capacity_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analytic_latency_per_probe: Option<Vec<ProbeModel>>,
    pub search_success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_failure: Option<&'a str>,
    pub partial: bool,
    pub probes: &'a [ProbeRecord],
    pub final_series: &'a [SecondSummary],
    pub probe_csv: &'a str,
    pub search: &'a SearchSettings,
    /// The host before and after the run, with the change between them
    /// in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_check: Option<load::hostspeed::HostCheckMetrics>,
}

/// The overhead probe's figures in the report.
#[derive(Debug, Serialize)]
pub struct OverheadSummary {
    pub median: f64,
    pub p99: f64,
    pub mean: f64,
    pub requested_qps: f64,
    pub replies: u64,
    pub duration_secs: f64,
}

/// The model's value of the target percentile at a probed rate, next to
/// the measured one.
#[derive(Debug, Serialize)]
pub struct ProbeModel {
    pub seq: usize,
    pub requested_qps: f64,
    pub measured_ms: f64,
    /// `null` where the model has no value.
    pub analytic_ms: Option<f64>,
    /// With the measured service time and overhead (absent without an
    /// overhead probe).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub with_overhead_ms: Option<f64>,
}

/// The report's metrics of a calibrate search, from its record: the
/// measurement next to the M/D/c model's values.
pub fn search_metrics(r: &SearchRun) -> anyhow::Result<SearchMetrics<'_>> {
    let target = &r.search.target;
    let workers = r.server_workers;
    let service_s = r.service_time_ms / 1000.0;
    let q = target.percentile.quantile();
    let capacity = (workers > 0 && service_s > 0.0).then(|| mdc::Mdc::capacity(workers, service_s));
    let mut m = SearchMetrics {
        target_percentile: target.percentile.label(),
        target_latency_msec: target.latency_ms,
        arrival: &r.arrival,
        load_mode: "open loop; latency measured from the intended start",
        server_workers: workers,
        service_time_ms: r.service_time_ms,
        capacity_qps: capacity,
        analytic_max_qps: r.analytic_max_qps.map(round3),
        peak_qps: round3(r.peak_qps),
        server_requests: None,
        server_mean_service_ms: None,
        analytic_max_qps_at_measured_service_time: None,
        reported: None,
        measured_to_analytic_ratio: None,
        overhead_ms: r.overhead.as_ref().map(|o| OverheadSummary {
            median: o.quantile(0.5),
            p99: o.quantile(0.99),
            mean: round3(o.quantiles_ms.iter().sum::<f64>() / o.quantiles_ms.len().max(1) as f64),
            requested_qps: round3(o.requested_qps),
            replies: o.replies,
            duration_secs: round3(o.duration_secs),
        }),
        analytic_max_qps_with_overhead: None,
        measured_to_model_with_overhead_ratio: None,
        peak_to_capacity_ratio: capacity.map(|cap| round3(r.peak_qps / cap)),
        analytic_latency_per_probe: None,
        search_success: r.success,
        search_failure: r.search.failure.as_deref(),
        partial: r.interrupted,
        probes: &r.search.probes,
        final_series: &r.final_series,
        probe_csv: &r.probe_csv,
        search: &r.settings,
        host_check: r.host.map(|h| h.metrics()),
    };
    if let Some(s) = &r.own_server {
        m.server_requests = Some(s.requests);
        m.server_mean_service_ms = Some(s.mean_service.map(|d| round3(d.as_secs_f64() * 1000.0)));
        if let (Some(d), Some(q)) = (s.mean_service, q)
            && workers > 0
            && d.as_secs_f64() > 0.0
        {
            let eff =
                mdc::max_rate_for_target(workers, d.as_secs_f64(), q, target.latency_ms / 1000.0)?;
            m.analytic_max_qps_at_measured_service_time = Some(round3(eff));
        }
    }
    if let Some(f) = &r.search.reported {
        m.reported = Some(load::report::FinalMetrics::of(f));
        m.measured_to_analytic_ratio = r
            .analytic_max_qps
            .filter(|x| *x > 0.0)
            .map(|an| round3(f.requested_qps / an));
    }
    let with = model_with_overhead(r);
    if let Some(w) = with {
        m.analytic_max_qps_with_overhead = Some(round3(w.max_qps));
        if let Some(f) = r.search.reported.as_ref().filter(|_| w.max_qps > 0.0) {
            m.measured_to_model_with_overhead_ratio = Some(round3(f.requested_qps / w.max_qps));
        }
    }
    let overhead: Option<Vec<f64>> = r
        .overhead
        .as_ref()
        .filter(|_| with.is_some())
        .map(|o| o.quantiles_ms.iter().map(|ms| ms / 1000.0).collect());
    // The model's value of the target percentile at each probed rate, for
    // checking the measurement probe by probe.
    if let (Some(cap), Some(q)) = (capacity, q) {
        m.analytic_latency_per_probe = Some(
            r.search
                .probes
                .iter()
                .filter(|p| p.requested_qps > 0.0 && p.requested_qps < cap)
                .map(|p| ProbeModel {
                    seq: p.seq,
                    requested_qps: p.requested_qps,
                    measured_ms: p.target_value_ms,
                    analytic_ms: mdc::Mdc::new(workers, service_s, p.requested_qps)
                        .map(|m| round3(m.sojourn_quantile(q) * 1000.0))
                        .ok(),
                    with_overhead_ms: with.zip(overhead.as_ref()).and_then(|(w, o)| {
                        mdc::Mdc::new(workers, w.service_ms / 1000.0, p.requested_qps)
                            .map(|m| round3(m.sojourn_quantile_with(q, o) * 1000.0))
                            .ok()
                    }),
                })
                .collect(),
        );
    }
    Ok(m)
}

/// The line `calibrate serve` prints once it listens.
fn listening_line(address: &str, workers: usize, service_time_ms: f64) -> String {
    format!(
        "calibrate server listening on {address} ({workers} workers, {service_time_ms} ms service time); Ctrl-C stops it"
    )
}

/// The line `calibrate serve` prints when it stops.
fn served_line(r: &ServeRecord) -> String {
    match r.mean_service {
        Some(d) => format!(
            "calibrate server: served {} requests, mean service time {:.3} ms",
            r.requests_served,
            d.as_secs_f64() * 1000.0
        ),
        None => format!("calibrate server: served {} requests", r.requests_served),
    }
}

/// The text of a stored `calibrate serve` run: its lines.
fn write_serve(r: &ServeRecord, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{}",
        listening_line(&r.address, r.workers, r.service_time_ms)
    )?;
    writeln!(out, "{}", served_line(r))?;
    out.flush()
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

/// The lines under a search: the overhead probe's, and with a result the
/// pure M/D/c value and the value with the measured service time and
/// overhead when the overhead probe ran.
fn model_lines(r: &SearchRun) -> Vec<String> {
    let mut out: Vec<String> = r.overhead.iter().map(overhead_line).collect();
    let Some(f) = &r.search.reported else {
        return out;
    };
    if let Some(an) = r.analytic_max_qps.filter(|x| *x > 0.0) {
        out.push(analytic_line(&r.search.target, f, an));
    }
    if let Some(m) = model_with_overhead(r).filter(|m| m.max_qps > 0.0) {
        out.push(format!(
            "calibrate: M/D/c with the measured service time {:.3} ms and overhead (median {:.3} ms): {:.1}, ratio {:.3}",
            m.service_ms,
            m.median_overhead_ms,
            m.max_qps,
            f.requested_qps / m.max_qps
        ));
    }
    out
}

/// The model with what the run measured about the chain.
#[derive(Debug, Clone, Copy)]
struct ModelWithOverhead {
    max_qps: f64,
    service_ms: f64,
    median_overhead_ms: f64,
}

/// The M/D/c model at the server's measured mean service time (the nominal
/// one with `--server`) plus the overhead probe's measured overhead, when
/// that probe ran and the target is a percentile.
fn model_with_overhead(r: &SearchRun) -> Option<ModelWithOverhead> {
    let o = r.overhead.as_ref().filter(|o| !o.quantiles_ms.is_empty())?;
    let q = r.search.target.percentile.quantile()?;
    let service_ms = r
        .own_server
        .as_ref()
        .and_then(|s| s.mean_service)
        .map_or(r.service_time_ms, |d| d.as_secs_f64() * 1000.0);
    let overhead: Vec<f64> = o.quantiles_ms.iter().map(|ms| ms / 1000.0).collect();
    let max_qps = mdc::max_rate_for_target_with(
        r.server_workers,
        service_ms / 1000.0,
        q,
        r.search.target.latency_ms / 1000.0,
        &overhead,
    )
    .ok()?;
    Some(ModelWithOverhead {
        max_qps,
        service_ms,
        median_overhead_ms: o.quantile(0.5),
    })
}

/// The text of a stored search: the search's lines, then the model lines.
fn write_record(r: &SearchRun, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    write_search(&r.search, out)?;
    for line in model_lines(r) {
        writeln!(out, "{line}")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use load::LatencySummary;
    use load::Percentile;
    use load::search::Phase;

    fn probe(seq: usize, phase: Phase, requested: f64, p99: f64) -> ProbeRecord {
        ProbeRecord {
            seq,
            phase,
            mode: "open:poisson".into(),
            requested_qps: requested,
            duration_secs: 4.0,
            total_queries: 1000,
            scheduled: 1000,
            errors: 0,
            dropped: 0,
            unfinished: 0,
            achieved_qps: requested * 0.99876,
            total_bytes_rx: 64_000,
            total_bytes_tx: 64_000,
            latency: LatencySummary {
                count: 1000,
                p99_ms: p99,
                ..LatencySummary::default()
            },
            target_value_ms: p99,
            passed: true,
            verdict: "ok".into(),
            extensions: 0,
            settle_secs: 0.0,
            start_unix_ms: 1,
            end_unix_ms: 2,
            interval: None,
        }
    }

    fn search_run() -> SearchRun {
        let target = SloTarget {
            percentile: Percentile::P99,
            latency_ms: 20.0,
        };
        let analytic = mdc::max_rate_for_target(8, 0.01, 0.99, 0.02).unwrap();
        SearchRun {
            search: SearchRecord {
                target,
                probes: vec![
                    probe(1, Phase::Peak, 0.0, 30.0),
                    probe(2, Phase::Bisect, 500.0, 15.0),
                    probe(3, Phase::Final, 480.0, 14.5),
                ],
                reported: Some(probe(3, Phase::Final, 480.0, 14.5)),
                failure: None,
            },
            analytic_max_qps: Some(analytic),
            arrival: "poisson".into(),
            server_workers: 8,
            service_time_ms: 10.0,
            peak_qps: 790.12345,
            success: true,
            interrupted: false,
            final_series: vec![SecondSummary {
                second: 0,
                completed: 480,
                errors: 0,
                p50_ms: 10.1,
                p99_ms: 14.0,
                max_ms: 16.0,
            }],
            probe_csv: "calibrate_results.csv".into(),
            settings: SearchSettings {
                tolerance: 0.02,
                min_completion: 0.99,
                warmup_secs: 2.0,
                peak_secs: 3.0,
                probe_secs: 4.0,
                probe_warmup_secs: 1.0,
                final_secs: 15.0,
                peak_concurrency: 32,
                client: Some(ClientKind::H2),
            },
            own_server: Some(ServerStats {
                requests: 12345,
                mean_service: Some(Duration::from_micros(10_050)),
            }),
            overhead: None,
            host: None,
        }
    }

    #[test]
    fn a_ratio_or_a_host_outside_what_calibrate_vouches_for_is_marked() {
        let look = |share: f64| load::hostspeed::HostLook {
            cpu_unit_us: 1000.0,
            memory_unit_us: 2000.0,
            cpu_share: share,
            unix_ms: 0,
        };
        // At the analytic rate, on a quiet host: no mark.
        let mut r = search_run();
        let an = r.analytic_max_qps.unwrap();
        if let Some(p) = r.search.reported.as_mut() {
            p.requested_qps = an * 0.98;
        }
        r.host = Some(load::hostspeed::HostCheck {
            before: look(0.99),
            after: look(0.97),
        });
        assert!(marks_of(&r).is_empty(), "{:?}", marks_of(&r));
        let m = metrics_of(CalibrateRecord::Search(Box::new(r.clone())));
        assert_eq!(m["host_check"]["before"]["cpu_share"], 0.99);
        assert_eq!(m["host_check"]["change_pct"], 0.0);
        let rec = Record::of(
            "calibrate",
            RECORD_VERSION,
            &CalibrateRecord::Search(Box::new(r.clone())),
        );
        assert!(Calibrate.marks(&rec).is_empty());
        // A ratio of 0.13 (the loaded run) and a busy host: both named.
        if let Some(p) = r.search.reported.as_mut() {
            p.requested_qps = an * 0.13;
        }
        r.host = Some(load::hostspeed::HostCheck {
            before: look(0.45),
            after: look(0.97),
        });
        let rec = Record::of(
            "calibrate",
            RECORD_VERSION,
            &CalibrateRecord::Search(Box::new(r)),
        );
        let marks = Calibrate.marks(&rec);
        assert_eq!(marks.len(), 2, "{marks:?}");
        assert!(
            marks[0].starts_with("host busy before the run: a thread got 45% of a core"),
            "{marks:?}"
        );
        assert!(
            marks[1].starts_with("measured/model ratio 0.130 (")
                && marks[1].contains("is outside 0.90-1.10, what calibrate vouches for"),
            "{marks:?}"
        );
    }

    #[test]
    fn overhead_quantiles_index_by_the_records_own_point_count() {
        let rec = |n: usize| OverheadRecord {
            requested_qps: 80.0,
            duration_secs: 3.0,
            replies: 240,
            errors: 0,
            service_ms: 10.0,
            service_measured: true,
            quantiles_ms: (0..n).map(|i| i as f64).collect(),
        };
        let hundred = rec(100);
        assert_eq!(hundred.quantile(0.5), 50.0);
        assert_eq!(hundred.quantile(0.99), 99.0);
        assert_eq!(hundred.quantile(1.0), 99.0);
        // A record with another point count reads its own slots.
        let ten = rec(10);
        assert_eq!(ten.quantile(0.5), 5.0);
        assert_eq!(ten.quantile(0.99), 9.0);
        assert_eq!(ten.quantile(0.0), 0.0);
        assert!(rec(0).quantile(0.5).is_nan());
        let line = overhead_line(&ten);
        assert!(line.contains("median 5.000 ms, 99p 9.000 ms"), "{line}");
    }

    #[test]
    fn the_measured_overhead_gives_a_second_model_value() {
        let mut r = search_run();
        // A constant 1 ms overhead at the measured 10.05 ms service time is
        // the model at 10.05 ms with the target lowered by 1 ms.
        r.overhead = Some(OverheadRecord {
            requested_qps: 80.0,
            duration_secs: 3.0,
            replies: 240,
            errors: 0,
            service_ms: 10.05,
            service_measured: true,
            quantiles_ms: vec![1.0; OVERHEAD_POINTS],
        });
        let expect = mdc::max_rate_for_target(8, 0.01005, 0.99, 0.019).unwrap();
        let m = metrics_of(CalibrateRecord::Search(Box::new(r.clone())));
        let with = m["analytic_max_qps_with_overhead"].as_f64().unwrap();
        assert!((with - expect).abs() < 0.05, "{with} vs {expect}");
        let pure = m["analytic_max_qps_at_measured_service_time"]
            .as_f64()
            .unwrap();
        assert!(with < pure - 10.0, "{with} vs {pure}");
        assert_eq!(
            m["measured_to_model_with_overhead_ratio"],
            round3(480.0 / with)
        );
        assert_eq!(m["overhead_ms"]["median"], 1.0);
        assert_eq!(m["overhead_ms"]["p99"], 1.0);
        assert_eq!(m["overhead_ms"]["replies"].as_u64(), Some(240));
        // Per probe, the model with overhead is 1 ms above the model at
        // the measured service time.
        let per = m["analytic_latency_per_probe"].as_array().unwrap();
        let at = mdc::Mdc::new(8, 0.01005, 500.0)
            .unwrap()
            .sojourn_quantile(0.99)
            * 1000.0;
        let w = per[0]["with_overhead_ms"].as_f64().unwrap();
        assert!((w - at - 1.0).abs() < 0.01, "{w} vs {at} + 1");
        // Both model lines are printed, the overhead one last.
        let text = text_of(CalibrateRecord::Search(Box::new(r)));
        let last = text.lines().last().unwrap();
        assert!(
            last.starts_with("calibrate: M/D/c with the measured service time 10.050 ms and overhead (median 1.000 ms)"),
            "{text}"
        );
        // Without an overhead probe none of these keys appear.
        let m = metrics_of(CalibrateRecord::Search(Box::new(search_run())));
        for k in [
            "analytic_max_qps_with_overhead",
            "measured_to_model_with_overhead_ratio",
            "overhead_ms",
        ] {
            assert!(!m.contains_key(k), "{k}");
        }
        assert!(
            m["analytic_latency_per_probe"][0]
                .get("with_overhead_ms")
                .is_none()
        );
    }

    fn metrics_of(r: CalibrateRecord) -> serde_json::Map<String, serde_json::Value> {
        let rec = Record::of("calibrate", RECORD_VERSION, &r);
        // As stored and read back.
        let rec: Record = serde_json::from_str(&serde_json::to_string(&rec).unwrap()).unwrap();
        Calibrate.metrics(&rec).unwrap()
    }

    fn text_of(r: CalibrateRecord) -> String {
        let mut out = Vec::new();
        Calibrate
            .format(&Record::of("calibrate", RECORD_VERSION, &r), &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn search_metrics_come_from_the_record() {
        let r = search_run();
        let analytic = r.analytic_max_qps.unwrap();
        let m = metrics_of(CalibrateRecord::Search(Box::new(r)));
        assert_eq!(m["target_percentile"], "99p");
        assert_eq!(m["target_latency_msec"], 20.0);
        assert_eq!(m["arrival"], "poisson");
        assert_eq!(
            m["load_mode"],
            "open loop; latency measured from the intended start"
        );
        assert_eq!(m["server_workers"].as_u64(), Some(8));
        assert_eq!(m["service_time_ms"], 10.0);
        assert_eq!(m["capacity_qps"], 800.0);
        assert_eq!(m["analytic_max_qps"], round3(analytic));
        assert_eq!(m["peak_qps"], 790.123);
        assert_eq!(m["server_requests"].as_u64(), Some(12345));
        assert_eq!(m["server_mean_service_ms"], 10.05);
        // A longer measured service time: a lower model rate.
        let eff = m["analytic_max_qps_at_measured_service_time"]
            .as_f64()
            .unwrap();
        assert!(eff > 0.0 && eff < analytic, "{eff} vs {analytic}");
        assert_eq!(m["final_requested_qps"], 480.0);
        assert_eq!(m["final_achieved_qps"], round3(480.0 * 0.99876));
        assert_eq!(m["final_latency_msec"], 14.5);
        assert_eq!(m["final_latency"]["p99_ms"], 14.5);
        assert_eq!(m["final_latency"]["count"].as_u64(), Some(1000));
        assert_eq!(m["measured_to_analytic_ratio"], round3(480.0 / analytic));
        assert_eq!(m["peak_to_capacity_ratio"], round3(790.12345 / 800.0));
        // The unthrottled peak has no model value; the rate-driven probes do.
        let per = m["analytic_latency_per_probe"].as_array().unwrap();
        assert_eq!(per.len(), 2);
        assert_eq!(per[0]["seq"].as_u64(), Some(2));
        assert_eq!(per[0]["requested_qps"], 500.0);
        assert_eq!(per[0]["measured_ms"], 15.0);
        assert!(per[0]["analytic_ms"].as_f64().unwrap() >= 10.0);
        assert_eq!(m["search_success"], true);
        assert!(!m.contains_key("search_failure"));
        assert_eq!(m["partial"], false);
        assert_eq!(m["probes"].as_array().unwrap().len(), 3);
        assert_eq!(m["probes"][2]["phase"], "final");
        assert_eq!(m["final_series"][0]["completed"].as_u64(), Some(480));
        assert_eq!(m["probe_csv"], "calibrate_results.csv");
        assert_eq!(m["search"]["tolerance"], 0.02);
        assert_eq!(m["search"]["peak_concurrency"].as_u64(), Some(32));
        assert_eq!(m["search"]["final_secs"], 15.0);
        assert_eq!(m["search"]["client"], "h2");
        // The search's lines, then the model line.
        let text = text_of(CalibrateRecord::Search(Box::new(search_run())));
        assert!(
            text.lines()
                .last()
                .unwrap()
                .starts_with("calibrate: max QPS meeting 99p <= 20 ms: measured 480.0"),
            "{text}"
        );
    }

    #[test]
    fn a_search_without_a_result_or_a_model_leaves_those_keys_out() {
        let mut r = search_run();
        r.server_workers = 0;
        r.analytic_max_qps = None;
        r.search.reported = None;
        r.search.failure = Some("no rate met the target".into());
        r.success = false;
        r.interrupted = true;
        r.own_server = None;
        let m = metrics_of(CalibrateRecord::Search(Box::new(r)));
        assert!(m["capacity_qps"].is_null());
        assert!(m["analytic_max_qps"].is_null());
        for absent in [
            "server_requests",
            "server_mean_service_ms",
            "analytic_max_qps_at_measured_service_time",
            "final_requested_qps",
            "final_achieved_qps",
            "final_latency_msec",
            "final_latency",
            "measured_to_analytic_ratio",
            "peak_to_capacity_ratio",
            "analytic_latency_per_probe",
        ] {
            assert!(!m.contains_key(absent), "{absent}: {m:?}");
        }
        assert_eq!(m["search_success"], false);
        assert_eq!(m["search_failure"], "no rate met the target");
        assert_eq!(m["partial"], true);
        // The built-in server that served nothing: the key, null.
        let mut r = search_run();
        r.own_server = Some(ServerStats {
            requests: 0,
            mean_service: None,
        });
        let m = metrics_of(CalibrateRecord::Search(Box::new(r)));
        assert_eq!(m["server_requests"].as_u64(), Some(0));
        assert!(m["server_mean_service_ms"].is_null());
        assert!(!m.contains_key("analytic_max_qps_at_measured_service_time"));
    }

    #[test]
    fn serve_metrics_come_from_the_record() {
        let r = ServeRecord {
            address: "127.0.0.1:50051".into(),
            workers: 8,
            service_time_ms: 10.0,
            requests_served: 42,
            mean_service: Some(Duration::from_micros(10_250)),
        };
        let m = metrics_of(CalibrateRecord::Serve(r.clone()));
        assert_eq!(m.len(), 2);
        assert_eq!(m["requests_served"].as_u64(), Some(42));
        assert_eq!(m["mean_service_ms"], 10.25);
        assert_eq!(
            text_of(CalibrateRecord::Serve(r.clone())),
            "calibrate server listening on 127.0.0.1:50051 (8 workers, 10 ms service time); Ctrl-C stops it\n\
             calibrate server: served 42 requests, mean service time 10.250 ms\n"
        );
        let m = metrics_of(CalibrateRecord::Serve(ServeRecord {
            requests_served: 0,
            mean_service: None,
            ..r
        }));
        assert_eq!(m["requests_served"].as_u64(), Some(0));
        assert!(m["mean_service_ms"].is_null());
    }
}
