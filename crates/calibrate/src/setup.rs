//! From the flags to what runs: the search's configuration, the stalls,
//! the built-in server, the overhead probe's plan, the planned duration
//! and the search's prober over either client.

//! From the flags to what runs: the search's configuration, the stalls,
//! the built-in server, the overhead probe's plan, the planned duration
//! and the search's prober over either client.

use crate::cli::Args;
use crate::server::{Service, Stall};
use harness::RunContext;
use load::{SearchConfig, ServiceProber};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

impl Args {
    pub(crate) fn stall(&self) -> Option<Stall> {
        match (self.stall_every_secs, self.stall_secs) {
            (Some(every), Some(len)) => Some(Stall {
                every: Duration::from_secs_f64(every),
                length: Duration::from_secs_f64(len),
                origin: std::time::Instant::now(),
            }),
            _ => None,
        }
    }

    /// The wake-up coalescing window the driver uses for `--arrival`.
    pub(crate) fn effective_send_ahead_us(&self) -> u64 {
        self.send_ahead_us
            .unwrap_or_else(|| load::driver::default_send_ahead(self.arrival).as_micros() as u64)
    }

    pub(crate) fn search_config(&self) -> SearchConfig {
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

/// Starts the calibration server on a loopback port of `rt`.
pub(crate) fn start_server(
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
pub(crate) fn overhead_plan(
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
pub(crate) fn planned_duration(a: &Args, cfg: &SearchConfig, overhead: bool) -> Duration {
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
pub(crate) const WORK_PATH: &str = "/rackbench.calibrate.Calibrate/Work";

pub(crate) type CheckFn = Box<dyn FnMut() -> Result<(), load::Error> + Send>;

/// The search's prober over one client (the lean h2 client or tonic's).
pub(crate) fn prober<S, F>(
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
        send_ahead: a.send_ahead_us.map(Duration::from_micros),
        seed: a.seed,
        stop: ctx.cancel.flag(),
        check,
        // The M/D/c server drops nothing and holds no hidden backlog: the
        // drain after each probe lets its queue empty.
        settle: None,
    }
}

/// The overhead probe's plan: its rate and the server's totals to read.
pub(crate) struct OverheadPlan {
    pub(crate) rate: f64,
    pub(crate) nominal_service_ms: f64,
    pub(crate) stats: Option<Arc<crate::server::Stats>>,
}

/// The overhead probe's load, a fraction of the queue's capacity.
pub(crate) const OVERHEAD_LOAD: f64 = 0.1;
