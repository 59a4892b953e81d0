//! The AdSim client: open-loop Poisson load from the load core against an
//! AdSim server, the load core's SLO search for the highest rate whose
//! latency percentile meets the target, upstream's per-probe CSV and the
//! report metrics.
//!
//! Request bodies: one random string per listed size, generated once (as
//! upstream's load generator does); each request picks one of the 100
//! uniformly (a size listed twice is twice as likely).

use crate::addr::resolve;
use crate::cli::{ClientArgs, Mode};
use crate::proto::ad_sim_client::AdSimClient;
use crate::proto::{SimRequest, StatusReply, StatusRequest};
use anyhow::{Context, bail};
use bytes::Bytes;
use harness::{Progress, RunContext};
use load::report::{probe_line, round3, searching_line};
use load::search::{Event, Search, SearchOutcome, run_fixed};
use load::{ProbeRecord, SearchConfig, ServiceProber, SloTarget};
use rand::SeedableRng;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tonic::Request;
use tonic::transport::Channel;

/// Default-mode request sizes, bytes (ad-serving requests, ~21 KB to 2.2 MB).
pub const REQUEST_SIZES: [u64; 100] = [
    21102, 24046, 26718, 29396, 31428, 33406, 35250, 37347, 39302, 40635, 42162, 43776, 45231,
    46550, 47941, 49375, 50490, 51753, 52789, 54042, 55129, 56060, 57210, 58453, 59665, 60732,
    61951, 63153, 64345, 65565, 66788, 67846, 68939, 70263, 71538, 72658, 74003, 75320, 77021,
    78416, 80017, 81649, 83231, 84890, 86338, 87779, 89549, 91274, 92716, 94312, 96249, 98685,
    100195, 102476, 104590, 106565, 108892, 112220, 115426, 118539, 121885, 125940, 129406, 133907,
    138907, 144358, 150643, 157272, 164905, 173752, 181697, 190219, 199184, 208782, 216714, 226552,
    234955, 242400, 250273, 258056, 264527, 274102, 282639, 291434, 302631, 314295, 326790, 338368,
    351672, 365455, 378563, 392808, 408717, 428298, 453281, 482706, 517475, 566604, 655912,
    2205630,
];

/// Ai-mode request sizes, bytes before the multiplier (inference requests,
/// 4 B to ~317 KB at multiplier 1).
pub const AI_REQUEST_SIZES: [u64; 100] = [
    4, 8, 928, 1040, 1200, 1340, 2040, 2272, 2400, 2520, 2812, 2868, 2892, 2964, 3216, 3460, 3520,
    5120, 6780, 8160, 8288, 12264, 14892, 21024, 21120, 26496, 28032, 28032, 28032, 28032, 28032,
    28032, 28032, 28160, 28160, 28160, 28160, 28160, 30720, 31580, 35836, 37544, 38400, 38400,
    46120, 46348, 48484, 50270, 53212, 62900, 76800, 76800, 76800, 76800, 87752, 109680, 144132,
    146240, 146240, 146240, 146240, 146240, 146240, 146240, 146240, 146240, 146240, 146240, 146240,
    146240, 146240, 146240, 188460, 194108, 197552, 199160, 199980, 202692, 206676, 209172, 209756,
    212456, 214116, 214960, 215384, 275052, 278592, 280852, 283968, 287156, 287808, 291532, 293000,
    294112, 297472, 305160, 305336, 311672, 315932, 317208,
];

/// The CSV header (upstream qps_search.sh's columns).
pub const CSV_HEADER: &str = "seq,runtime,requested_qps,achieved_qps,target_latency_quantile,target_latency_usec,achieved_latency_usec";

/// The request sizes of a mode.
pub fn request_sizes(mode: Mode, multiplier: u64) -> Vec<u64> {
    match mode {
        Mode::Default => REQUEST_SIZES.to_vec(),
        Mode::Ai => AI_REQUEST_SIZES.iter().map(|s| s * multiplier).collect(),
    }
}

/// One random body per size.
pub fn request_bodies(sizes: &[u64], seed: u64) -> Vec<Bytes> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ 0xad51_u64);
    sizes
        .iter()
        .map(|&n| Bytes::from(crate::kernels::gen_string(n as usize, &mut rng)))
        .collect()
}

/// A CSV row for a probe.
pub fn csv_row(seq: usize, p: &ProbeRecord, quantile: &str, target_ms: f64) -> String {
    format!(
        "{seq},{:.0},{:.3},{:.3},{quantile},{:.0},{:.0}",
        p.duration_secs,
        p.requested_qps,
        p.achieved_qps,
        target_ms * 1000.0,
        p.target_value_ms * 1000.0
    )
}

/// The CSV's closing row, upstream qps_search.sh's six columns
/// `seq,qps_opt,final_qps,quantile,target_usec,latency_usec`: the reported
/// rate, the achieved QPS of the last probe run (as upstream, whose
/// `final_qps` is the last measurement's throughput; here that is the
/// final run at the reported rate when there is one) and the reported
/// rate's latency. None when no rate met the target: upstream's parser
/// reads the last line, and a closing row of zeros would read as a success
/// at 0 QPS and 0 ms; without it the parser reads a probe row (or the
/// header) and says `success: false`, as after upstream's search is killed.
fn last_row(
    seq: usize,
    reported: Option<&ProbeRecord>,
    last: Option<&ProbeRecord>,
    quantile: &str,
    target_ms: f64,
) -> Option<String> {
    let target = target_ms * 1000.0;
    reported.map(|p| {
        format!(
            "{},{:.3},{:.3},{quantile},{target:.0},{:.0}",
            seq + 1,
            p.requested_qps,
            last.map_or(p.achieved_qps, |l| l.achieved_qps),
            p.target_value_ms * 1000.0
        )
    })
}

/// What an AdSim client search keeps with its stored run: the target,
/// every probe, the reported one, how the search ended, the CSV's path and
/// the server's counters before and after (the report's metrics are derived
/// from it by [`client_metrics`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ClientRecord {
    /// The target percentile as the CSV writes it (`P95`).
    pub quantile: String,
    pub target_latency_ms: f64,
    pub probes: Vec<ProbeRecord>,
    /// The final run that met the target, if one did.
    pub reported: Option<ProbeRecord>,
    /// The unthrottled peak rate.
    pub peak_qps: f64,
    /// Whether the search found a rate meeting the target.
    pub success: bool,
    /// Stopped (Ctrl-C, the job's timeout or --timeout): the probes so far.
    pub interrupted: bool,
    /// Why the search ended without a result.
    pub failure: Option<String>,
    /// The CSV written (as the report names it).
    pub csv: String,
    /// The client process's CPU time over the search.
    pub client_cpu_seconds: f64,
    /// The server's counters once it was ready, and after the search (absent
    /// when it no longer answered).
    pub server_before: Option<ServerStatus>,
    pub server_after: Option<ServerStatus>,
    /// The host before and after the search (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<load::hostspeed::HostCheck>,
}

/// The server's counters as its status RPC reported them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerStatus {
    pub requests: u64,
    pub failed: u64,
    pub rss_bytes: u64,
    pub cpu_seconds: f64,
    pub init_seconds: f64,
    pub kernels: Vec<KernelCounters>,
}

/// One configured kernel's counters on the server.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KernelCounters {
    pub index: u32,
    pub name: String,
    pub fired: u64,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub flops: f64,
}

impl From<&StatusReply> for ServerStatus {
    fn from(s: &StatusReply) -> Self {
        ServerStatus {
            requests: s.requests,
            failed: s.failed,
            rss_bytes: s.rss_bytes,
            cpu_seconds: s.cpu_seconds,
            init_seconds: s.init_seconds,
            kernels: s
                .kernels
                .iter()
                .map(|k| KernelCounters {
                    index: k.index,
                    name: k.name.clone(),
                    fired: k.fired,
                    cpu_seconds: k.cpu_seconds,
                    wall_seconds: k.wall_seconds,
                    flops: k.flops,
                })
                .collect(),
        }
    }
}

/// The report's metrics of a client run.
#[derive(Debug, serde::Serialize)]
pub struct ClientMetrics<'a> {
    /// The reported rate, or 0 when no rate met the target.
    pub final_requested_qps: f64,
    pub final_achieved_qps: f64,
    /// `null` when no rate met the target.
    pub final_latency_msec: Option<f64>,
    pub average_latency_msec: Option<f64>,
    pub success: bool,
    pub target_latency_msec: f64,
    pub target_latency_percentile: &'a str,
    pub peak_qps: f64,
    /// The number of probes (their records are under `search`).
    pub probes: usize,
    pub interrupted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<&'a str>,
    pub csv: &'a str,
    pub client_cpu_seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerStatusMetrics<'a>>,
    pub search: &'a [ProbeRecord],
    /// The host before and after the search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_check: Option<load::hostspeed::HostCheckMetrics>,
}

/// The server's side of the client run: the counters' change over it.
#[derive(Debug, serde::Serialize)]
pub struct ServerStatusMetrics<'a> {
    pub requests: u64,
    pub failed: u64,
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub init_seconds: f64,
    pub kernels: Vec<KernelStatusMetrics<'a>>,
}

/// One kernel's fires and cost per fire over the client run.
#[derive(Debug, serde::Serialize)]
pub struct KernelStatusMetrics<'a> {
    pub index: u32,
    pub name: &'a str,
    pub fired: u64,
    pub cpu_usec_per_fire: f64,
    pub wall_usec_per_fire: f64,
    pub gflops_per_cpu_second: f64,
}

/// The report's metrics of a client run, from its record.
pub fn client_metrics(r: &ClientRecord) -> ClientMetrics<'_> {
    let reported = r.reported.as_ref();
    ClientMetrics {
        final_requested_qps: round3(reported.map_or(0.0, |p| p.requested_qps)),
        final_achieved_qps: round3(reported.map_or(0.0, |p| p.achieved_qps)),
        final_latency_msec: reported.map(|p| round3(p.target_value_ms)),
        average_latency_msec: reported.map(|p| round3(p.latency.avg_ms)),
        success: r.success,
        target_latency_msec: r.target_latency_ms,
        target_latency_percentile: &r.quantile,
        peak_qps: round3(r.peak_qps),
        probes: r.probes.len(),
        interrupted: r.interrupted,
        failure: r.failure.as_deref(),
        csv: &r.csv,
        client_cpu_seconds: round3(r.client_cpu_seconds),
        server: match (&r.server_before, &r.server_after) {
            (Some(b), Some(a)) => Some(server_status_metrics(b, a)),
            _ => None,
        },
        search: &r.probes,
        host_check: r.host.map(|h| h.metrics()),
    }
}

/// The CSV the client printed: the header, a row per rate-driven probe
/// (the unthrottled warm-up and peak are not upstream measurements), and
/// the closing row.
pub fn write_record(r: &ClientRecord, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "{CSV_HEADER}")?;
    let mut seq = 0;
    let mut last = None;
    for p in r.probes.iter().filter(|p| p.requested_qps > 0.0) {
        seq += 1;
        writeln!(out, "{}", csv_row(seq, p, &r.quantile, r.target_latency_ms))?;
        last = Some(p);
    }
    if let Some(row) = last_row(
        seq,
        r.reported.as_ref(),
        last,
        &r.quantile,
        r.target_latency_ms,
    ) {
        writeln!(out, "{row}")?;
    }
    out.flush()
}

async fn status(c: &mut AdSimClient<Channel>) -> Result<StatusReply, tonic::Status> {
    c.status(Request::new(StatusRequest {}))
        .await
        .map(tonic::Response::into_inner)
}

/// How the client reaches the server: plain HTTP/2 or over TLS.
#[derive(Clone)]
enum Link {
    Plain,
    Tls {
        connector: tokio_rustls::TlsConnector,
        name: String,
    },
}

impl Link {
    async fn connect(&self, addr: SocketAddr) -> Result<Channel, tonic::transport::Error> {
        match self {
            Link::Plain => rpc::client::connect(addr).await,
            Link::Tls { connector, name } => crate::tls::connect(addr, name, connector).await,
        }
    }

    fn describe(&self) -> &'static str {
        match self {
            Link::Plain => "plaintext (no --tls)",
            Link::Tls { .. } => "TLS (--tls)",
        }
    }
}

/// True when nothing listens at the address (yet).
fn refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        cur = c.source();
    }
    rpc::error_chain(e).contains("Connection refused")
}

/// Connects and waits until the server has built its kernels. A server
/// that accepts connections but cannot complete the handshake (one side
/// uses TLS, the other not) is an error after a few tries, not a wait.
async fn wait_ready(
    link: &Link,
    addr: SocketAddr,
    wait: Duration,
    stop: &AtomicBool,
    progress: &Progress,
) -> anyhow::Result<(AdSimClient<Channel>, StatusReply)> {
    let t0 = Instant::now();
    let mut said = false;
    let mut handshake_failures = 0;
    let mut last: String;
    loop {
        if stop.load(Ordering::Relaxed) {
            bail!("stopped while waiting for the server at {addr}");
        }
        match link.connect(addr).await {
            Ok(ch) => {
                let mut c = AdSimClient::new(ch).max_decoding_message_size(256 << 20);
                match status(&mut c).await {
                    Ok(s) if s.ready => return Ok((c, s)),
                    Ok(_) => last = "it is still initialising its kernels".into(),
                    Err(e) => {
                        handshake_failures += 1;
                        last = format!("its status RPC failed: {}", rpc::error_chain(&e));
                    }
                }
            }
            Err(e) => {
                last = rpc::error_chain(&e);
                if !refused(&e) {
                    handshake_failures += 1;
                }
            }
        }
        if handshake_failures >= 3 {
            bail!(
                "cannot talk to the AdSim server at {addr}: {last}. Something accepts connections there but does not answer AdSim over {}: is the server using --tls while this client is not, or the other way round?",
                link.describe()
            );
        }
        if t0.elapsed() > wait {
            bail!(
                "the AdSim server at {addr} was not ready within {} s ({last}); is `rackbench adsim server` running there, on that port?",
                wait.as_secs()
            );
        }
        if !said {
            progress.phase(&format!("waiting for the server at {addr} ({last})"));
            said = true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn search_config(a: &ClientArgs, target: SloTarget) -> SearchConfig {
    let secs = Duration::from_secs_f64;
    let mut c = SearchConfig::new(target);
    c.arrival = load::Arrival::Poisson;
    if a.quick {
        c.warmup = secs(1.0);
        c.peak = secs(2.0);
        c.probe = secs(a.probe_secs.min(2.0));
        c.probe_warmup = secs(0.5);
        c.final_duration = secs((a.runtime as f64).min(4.0));
        c.tolerance = 0.05;
    } else {
        c.warmup = secs(5.0);
        c.peak = secs(5.0);
        c.probe = secs(a.probe_secs);
        c.probe_warmup = secs(1.0);
        c.final_duration = secs(a.runtime as f64);
        c.tolerance = 0.03;
        c.borderline = 0.1;
        c.max_extensions = 1;
    }
    if let Some(q) = a.qps_min {
        c.min_qps = q;
    } else {
        c.min_qps = 0.5;
    }
    c.max_qps = a.qps_max;
    // The unthrottled probes keep one request per worker in flight: AdSim
    // requests take hundreds of milliseconds, and a deep closed loop would
    // only queue them past the probe's end.
    c.peak_concurrency = a.workers.clamp(2, 1000);
    c
}

/// Runs the client: waits for the server, searches, writes the CSV and
/// returns the run's record.
/// Runs the client; its record says whether it met the target.
pub fn run(a: &ClientArgs, ctx: &RunContext) -> anyhow::Result<ClientRecord> {
    let (percentile, quantile, latency_ms) = a.target().map_err(anyhow::Error::msg)?;
    if a.workers == 0 {
        bail!("--workers must be at least 1");
    }
    if let Some(q) = a.qps.iter().find(|q| !(q.is_finite() && **q > 0.0)) {
        bail!("--qps {q}: expected positive rates");
    }
    if let (Some(lo), Some(hi)) = (a.qps_min, a.qps_max)
        && lo > hi
    {
        bail!("--qps-min {lo} is above --qps-max {hi}");
    }
    let addr = resolve(&a.server, a.port)?;
    let target = SloTarget {
        percentile,
        latency_ms,
    };
    let cfg = search_config(a, target);
    let progress = Progress::new("adsim client", cfg.planned());
    let stop = Arc::new(AtomicBool::new(false));
    let timed_out = Arc::new(AtomicBool::new(false));
    // Ctrl-C, the job's timeout or --timeout stop the search; probes so far are kept.
    let watcher = {
        let (stop, timed_out, cancel) = (stop.clone(), timed_out.clone(), ctx.cancel.clone());
        let deadline = (a.timeout > 0).then(|| Instant::now() + Duration::from_secs(a.timeout));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if cancel.is_stopped() {
                    stop.store(true, Ordering::Relaxed);
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    timed_out.store(true, Ordering::Relaxed);
                    stop.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    // The host before the search and after it: a busy or changing host
    // marks the result (see `AdSim::marks`).
    let host = load::hostspeed::HostChecker::start();
    let r = drive(
        a,
        ctx,
        addr,
        cfg,
        &progress,
        stop.clone(),
        (&quantile, latency_ms),
    );
    stop.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    let host = host.finish();
    progress.finish();
    let (outcome, before, after, csv_path, client_cpu) = r?;
    let record = ClientRecord {
        quantile: quantile.to_string(),
        target_latency_ms: latency_ms,
        probes: outcome.probes,
        reported: outcome.final_probe.filter(|_| outcome.success),
        peak_qps: outcome.peak_qps,
        success: outcome.success,
        interrupted: outcome.interrupted,
        failure: outcome.failure,
        csv: csv_path.display().to_string(),
        client_cpu_seconds: client_cpu,
        server_before: before.as_ref().map(ServerStatus::from),
        server_after: after.as_ref().map(ServerStatus::from),
        host: Some(host),
    };
    Ok(record)
}

type Driven = (
    SearchOutcome,
    Option<StatusReply>,
    Option<StatusReply>,
    PathBuf,
    f64,
);

fn drive(
    a: &ClientArgs,
    ctx: &RunContext,
    addr: SocketAddr,
    cfg: SearchConfig,
    progress: &Progress,
    stop: Arc<AtomicBool>,
    (quantile, latency_ms): (&str, f64),
) -> anyhow::Result<Driven> {
    let rt = rpc::runtime(a.client_threads, "adsim-client")?;
    let link = if a.tls {
        Link::Tls {
            connector: crate::tls::client_connector(a.ca.as_deref())?,
            name: a.server.clone(),
        }
    } else {
        Link::Plain
    };
    let (mut client, before) = rt.block_on(wait_ready(
        &link,
        addr,
        Duration::from_secs(a.wait_server),
        &stop,
        progress,
    ))?;
    let pool = rt
        .block_on(async {
            let mut channels = Vec::new();
            for _ in 0..a.connections.max(1) {
                channels.push(link.connect(addr).await?);
            }
            Ok::<_, tonic::transport::Error>(rpc::client::Pool::new(channels))
        })
        .with_context(|| format!("cannot connect to the AdSim server at {addr}"))?;
    let sim = AdSimClient::new(pool)
        .max_decoding_message_size(256 << 20)
        .max_encoding_message_size(256 << 20);
    let svc = tower::service_fn(move |req: Request<SimRequest>| {
        let mut c = sim.clone();
        async move { c.sim(req).await }
    });
    let sizes = request_sizes(a.mode, a.ai_request_size_multiplier);
    let bodies = Arc::new(request_bodies(&sizes, a.seed));
    let seed = a.seed;
    let make = Arc::new(move |n: u64| {
        // A cheap mix of the request number picks the body uniformly.
        let mut x = n.wrapping_add(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 29;
        Request::new(SimRequest {
            request: bodies[(x % bodies.len() as u64) as usize].clone(),
        })
    });
    let settle_client = client.clone();
    let settle = load::prober::until_idle(
        move || {
            let mut c = settle_client.clone();
            async move {
                status(&mut c).await.map(|s| s.in_flight).map_err(|e| {
                    load::Error::Host(format!("the server stopped answering: {}", e.message()))
                })
            }
        },
        Duration::from_secs(60),
    );
    let drain = Duration::from_secs_f64((2.0 * latency_ms / 1000.0).max(2.0));
    let workers = a.workers;
    let mut prober = ServiceProber {
        svc,
        make,
        workers: Box::new(move |_| workers),
        max_in_flight: 1000,
        drain,
        send_ahead: None,
        seed: a.seed,
        stop: stop.clone(),
        check: Box::new(|| Ok(())),
        settle: Some(settle),
    };
    let csv_path = ctx.output_path(&a.output);
    let mut csv = CsvOut::create(&csv_path)?;
    progress.println(&searching_line(&cfg.target));
    progress.println(&format!(
        "adsim client: {} workers, Poisson arrivals, {} request sizes {}..{} bytes, server {addr} (kernels ready in {:.1} s)",
        a.workers,
        sizes.len(),
        sizes.iter().min().unwrap_or(&0),
        sizes.iter().max().unwrap_or(&0),
        before.init_seconds
    ));
    let cpu0 = rpc::procstat::proc_self().1;
    let mut seq = 0usize;
    let mut last_probe: Option<ProbeRecord> = None;
    let mut on_event = |e: Event<'_>| match e {
        Event::Start {
            phase,
            requested_qps,
            duration,
            extension,
        } => progress.phase(&load::report::phase_line(
            phase,
            requested_qps,
            duration,
            extension,
        )),
        Event::Done(p) => {
            progress.println(&probe_line(p));
            // The CSV has the rate-driven probes (upstream's measurements);
            // the unthrottled warm-up and peak are in the report only.
            if p.requested_qps > 0.0 {
                seq += 1;
                csv.row(&csv_row(seq, p, quantile, latency_ms));
                last_probe = Some(p.clone());
            }
        }
    };
    let outcome = if a.qps.is_empty() {
        rt.block_on(Search::new(cfg, &mut prober, &mut on_event).run())
    } else {
        // Fixed rates warm up at their own rate only, so the server's
        // counters cover just the rates asked for.
        let mut cfg = cfg;
        cfg.warmup = Duration::ZERO;
        let (w, d) = (cfg.probe_warmup, cfg.final_duration);
        rt.block_on(run_fixed(cfg, &mut prober, &a.qps, w, d, &mut on_event))
    };
    let client_cpu = rpc::procstat::proc_self().1 - cpu0;
    // The closing line: the reported rate; none when no rate met the target.
    let reported = outcome.final_probe.as_ref().filter(|_| outcome.success);
    if let Some(row) = last_row(seq, reported, last_probe.as_ref(), quantile, latency_ms) {
        csv.row(&row);
    }
    if let Some(e) = csv.error.take() {
        progress.println(&format!(
            "adsim client: cannot write {}: {e}",
            csv_path.display()
        ));
    }
    match &outcome.failure {
        Some(why) if !outcome.interrupted => progress.println(&format!(
            "adsim client: the search ended without a result: {why}"
        )),
        _ => {}
    }
    let after = rt.block_on(status(&mut client)).ok();
    Ok((outcome, Some(before), after, csv_path, client_cpu))
}

/// The CSV, on stdout and in a file, each row flushed as it is written.
struct CsvOut {
    file: Option<std::fs::File>,
    error: Option<std::io::Error>,
}

impl CsvOut {
    fn create(path: &Path) -> anyhow::Result<CsvOut> {
        if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut c = CsvOut {
            file: Some(file),
            error: None,
        };
        c.row(CSV_HEADER);
        Ok(c)
    }

    fn row(&mut self, line: &str) {
        println!("{line}");
        let _ = std::io::stdout().flush();
        if let Some(f) = self.file.as_mut()
            && let Err(e) = writeln!(f, "{line}").and_then(|_| f.flush())
        {
            self.error.get_or_insert(e);
            self.file = None;
        }
    }
}

/// The server's side of the final run: per-kernel fires and CPU per fire
/// over the whole client run, the server's CPU and memory.
fn server_status_metrics<'a>(
    before: &ServerStatus,
    after: &'a ServerStatus,
) -> ServerStatusMetrics<'a> {
    let kernels = after
        .kernels
        .iter()
        .map(|k| {
            let b = before.kernels.iter().find(|x| x.index == k.index);
            let fired = k.fired - b.map_or(0, |x| x.fired);
            let cpu = k.cpu_seconds - b.map_or(0.0, |x| x.cpu_seconds);
            let wall = k.wall_seconds - b.map_or(0.0, |x| x.wall_seconds);
            let flops = k.flops - b.map_or(0.0, |x| x.flops);
            let per = |v: f64| {
                if fired > 0 {
                    v / fired as f64 * 1e6
                } else {
                    0.0
                }
            };
            KernelStatusMetrics {
                index: k.index,
                name: &k.name,
                fired,
                cpu_usec_per_fire: round3(per(cpu)),
                wall_usec_per_fire: round3(per(wall)),
                gflops_per_cpu_second: if cpu > 0.0 { flops / cpu / 1e9 } else { 0.0 },
            }
        })
        .collect();
    ServerStatusMetrics {
        requests: after.requests - before.requests,
        failed: after.failed - before.failed,
        cpu_seconds: after.cpu_seconds - before.cpu_seconds,
        rss_bytes: after.rss_bytes,
        init_seconds: after.init_seconds,
        kernels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use load::Percentile;

    #[test]
    fn size_lists_span_upstreams_ranges() {
        let d = request_sizes(Mode::Default, 20);
        assert_eq!(d.len(), 100);
        assert_eq!((d[0], d[99]), (21102, 2_205_630));
        let ai = request_sizes(Mode::Ai, 6);
        assert_eq!(ai.len(), 100);
        assert_eq!((ai[0], ai[99]), (24, 317_208 * 6));
        let bodies = request_bodies(&[3, 5], 1);
        assert_eq!(
            bodies.iter().map(Bytes::len).collect::<Vec<_>>(),
            vec![3, 5]
        );
    }

    #[test]
    fn ai_mode_defaults_to_p99_under_100_ms() {
        use clap::Parser;
        let a = ClientArgs::try_parse_from(["c", "--mode", "ai"]).unwrap();
        assert_eq!(a.target().unwrap(), (Percentile::P99, "P99".into(), 100.0));
        let a = ClientArgs::try_parse_from(["c"]).unwrap();
        assert_eq!(a.target().unwrap(), (Percentile::P95, "P95".into(), 989.0));
        let a = ClientArgs::try_parse_from(["c", "--criteria", "p99.9", "--latency", "5"]).unwrap();
        assert_eq!(a.target().unwrap(), (Percentile::P999, "P99.9".into(), 5.0));
        let a = ClientArgs::try_parse_from(["c", "--criteria", "P97"]).unwrap();
        assert!(a.target().unwrap_err().to_string().contains("P97"));
    }
}
