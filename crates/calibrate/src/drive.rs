//! The runs: `calibrate serve` until stopped, and a search (or fixed
//! rates, or the peak alone) after the overhead probe, made into the
//! record.

//! The runs: `calibrate serve` until stopped, and a search (or fixed
//! rates, or the peak alone) after the overhead probe, made into the
//! record.

use crate::cli::{Args, ClientKind};
use crate::mdc;
use crate::printer::listening_line;
use crate::proto::WorkRequest;
use crate::proto::calibrate_client::CalibrateClient;
use crate::record::{
    CalibrateRecord, OverheadRecord, RECORD_VERSION, SearchRun, SearchSettings, ServeRecord,
    ServerStats,
};
use crate::server::Service;
use crate::setup::{
    CheckFn, OverheadPlan, WORK_PATH, overhead_plan, planned_duration, prober, start_server,
};
use anyhow::Context;
use harness::{Outcome, Progress, Record, RunContext};
use load::csv::ProbeCsv;
use load::report::round3;
use load::report::{Reporter, SearchRecord, searching_line};
use load::search::{Event, Search, run_fixed};
use load::{Arrival, Prober, SearchConfig, SearchOutcome};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tonic::Request;

pub(crate) fn serve(
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

pub(crate) fn search(a: &Args, ctx: &RunContext) -> anyhow::Result<Outcome> {
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
    let client_rt = rpc::client_runtime(a.client_threads, "calib-client")?;
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
        ClientKind::H2 | ClientKind::Lean => {
            let cannot = || format!("cannot connect to the calibration server at {addr}");
            // The request is encoded once; each call sends the same bytes.
            let body = rpc::unary::frame_message(&request);
            let make = move |_| body.clone();
            let (n, path) = (a.connections, WORK_PATH);
            if a.client == ClientKind::Lean {
                let client = client_rt.block_on(rpc::lean::LeanClient::connect(addr, n, path));
                let p = prober(a, ctx, client.with_context(cannot)?, make, check);
                client_rt.block_on(drive(p, a, &cfg, overhead_plan, &mut on_event))
            } else {
                let client = client_rt.block_on(rpc::unary::UnaryClient::connect(addr, n, path));
                let p = prober(a, ctx, client.with_context(cannot)?, make, check);
                client_rt.block_on(drive(p, a, &cfg, overhead_plan, &mut on_event))
            }
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
    // The client's connections close with its runtime (a current-thread
    // one runs their tasks only inside its block_on), so the server's
    // graceful shutdown below does not wait for them.
    drop(client_rt);
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
            send_ahead_us: Some(a.effective_send_ahead_us()),
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

/// How many equally likely values describe the measured overhead.
pub(crate) const OVERHEAD_POINTS: usize = 100;
