//! `rackbench feedsim leaf`: builds the leaf's datasets and serves until
//! stopped.

use crate::cli::LeafArgs;
use crate::leaf::{LeafService, LeafState, proc_self};
use crate::printer::ready_line;
use crate::record::{FeedSimRecord, LeafRecord, RECORD_VERSION};
use crate::setup::{check_memory, leaf_config, topology};
use anyhow::bail;
use harness::{Outcome, Record, RunContext};
use std::net::SocketAddr;
use std::time::Duration;

pub(crate) fn run_leaf(a: &LeafArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    let (nproc, smt) = topology();
    let t = a.shape.threads(nproc, smt).map_err(anyhow::Error::msg)?;
    let cfg = leaf_config(&a.shape, t);
    check_memory(&cfg, 1)?;
    let rt = rpc::runtime(2, "leaf-grpc")?;
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
