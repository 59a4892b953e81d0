//! The load core and the lean gRPC client alone, for profiling the
//! client's cost per request (`perf record`, `strace -c`, callgrind)
//! without the rest of the binary: what `rackbench calibrate --fixed-qps
//! RATE --arrival constant --client-threads 1` runs against a calibrate
//! server, minus the harness.
//!
//! `cargo run --release -p rpc --example paced -- 127.0.0.1:50051 5000 10`
//! (address, rate (0: closed loop, 64 in flight), seconds, arrival
//! process (constant, poisson, burst:N; default constant)) prints the
//! achieved rate, p99 and this process's CPU time per completed request.

use load::{Arrival, RunConfig};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr: std::net::SocketAddr = args
        .first()
        .map_or("127.0.0.1:50051", String::as_str)
        .parse()?;
    let rate: f64 = args.get(1).map_or(Ok(5000.0), |s| s.parse())?;
    let secs: f64 = args.get(2).map_or(Ok(10.0), |s| s.parse())?;
    let arrival: Arrival = args.get(3).map_or(Ok(Arrival::Constant), |s| s.parse())?;
    let rt = if std::env::var_os("PACED_CURRENT_THREAD").is_some() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        rpc::runtime(1, "paced")?
    };
    // WorkRequest{payload: 64 zero bytes, reply_bytes: 64}, encoded by hand.
    let mut msg = vec![0x0A, 64];
    msg.extend_from_slice(&[0u8; 64]);
    msg.extend_from_slice(&[0x10, 64]);
    let body = rpc::unary::frame(&msg);
    let client = rt.block_on(rpc::unary::UnaryClient::connect(
        addr,
        2,
        "/rackbench.calibrate.Calibrate/Work",
    ))?;
    let mut cfg = if rate > 0.0 {
        RunConfig::open(rate, arrival, Duration::from_secs_f64(secs))
    } else {
        RunConfig::closed(64, Duration::from_secs_f64(secs))
    };
    cfg.warmup = Duration::from_secs(1);
    let cpu0 = rpc::procstat::proc_self().1;
    let r = rt.block_on(load::run(
        client,
        move |_| body.clone(),
        &cfg,
        Arc::new(AtomicBool::new(false)),
    ));
    let cpu = rpc::procstat::proc_self().1 - cpu0;
    let done = r.recorder.ok as f64 * (1.0 + 1.0 / secs);
    println!(
        "achieved {:.0}/s of {:.0} scheduled in {:.1} s, p99 {:.3} ms, errors {}; CPU {:.3} s: {:.1} us per request (warm-up included)",
        r.achieved_qps(),
        r.recorder.scheduled as f64 / secs,
        secs,
        r.recorder.summary().p99_ms,
        r.recorder.errors,
        cpu,
        cpu / done * 1e6
    );
    Ok(())
}
