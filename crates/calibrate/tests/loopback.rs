//! rpc's gRPC plumbing (servers, client pools) over real loopback sockets,
//! with the calibration service as the service under test.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use calibrate::proto::calibrate_client::CalibrateClient;
use calibrate::proto::calibrate_server::{Calibrate, CalibrateServer};
use calibrate::proto::{WorkReply, WorkRequest};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};

struct Echo;

#[tonic::async_trait]
impl Calibrate for Echo {
    async fn work(&self, r: Request<WorkRequest>) -> Result<Response<WorkReply>, Status> {
        let n = r.into_inner().reply_bytes as usize;
        Ok(Response::new(WorkReply {
            payload: vec![7; n],
            queue_us: 0,
            service_us: 0,
        }))
    }
}

fn start() -> (rpc::server::Running, SocketAddr) {
    let bound = rpc::server::bind(SocketAddr::new(rpc::server::LOOPBACK, 0)).unwrap();
    assert!(bound.addr.ip().is_loopback());
    let addr = bound.addr;
    let router = tonic::transport::Server::builder().add_service(CalibrateServer::new(Echo));
    (rpc::server::spawn(router, bound), addr)
}

/// Without TCP_NODELAY, Nagle's algorithm and delayed ACKs hold small
/// responses back ~40 ms on loopback; with it a sequential RPC takes well
/// under a millisecond. A p99 bound far above the healthy figure and below
/// the Nagle stall catches a server or client that loses the option.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_small_rpcs_do_not_wait_for_delayed_acks() {
    let (server, addr) = start();
    let mut client = CalibrateClient::new(rpc::client::connect(addr).await.unwrap());
    let mut lat = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        let r = client
            .work(WorkRequest {
                payload: vec![1; 100],
                reply_bytes: 200,
            })
            .await
            .unwrap();
        assert_eq!(r.get_ref().payload.len(), 200);
        lat.push(t.elapsed());
    }
    lat.sort();
    let p99 = lat[lat.len() * 99 / 100];
    assert!(
        p99 < Duration::from_millis(20),
        "p99 {p99:?}: TCP_NODELAY lost?"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn pool_spreads_calls_over_connections() {
    let (server, addr) = start();
    let pool = rpc::client::connect_pool(addr, 3).await.unwrap();
    assert_eq!(pool.len(), 3);
    let client = CalibrateClient::new(pool);
    let mut tasks = Vec::new();
    for i in 0..30u32 {
        let mut c = client.clone();
        tasks.push(tokio::spawn(async move {
            c.work(WorkRequest {
                payload: vec![],
                reply_bytes: i,
            })
            .await
        }));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        assert_eq!(t.await.unwrap().unwrap().get_ref().payload.len(), i);
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_port_in_use_is_named() {
    let (server, addr) = start();
    let e = rpc::server::bind(addr).err().unwrap().to_string();
    assert!(
        e.contains(&addr.port().to_string()) && e.contains("already in use"),
        "{e}"
    );
    server.shutdown().await.unwrap();
}

/// `bind_loopback` serves one port on 127.0.0.1 and ::1 (where the host has
/// an IPv6 loopback): an RPC through each address is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_loopback_answers_on_both_addresses() {
    let bound = rpc::server::bind_loopback(0).unwrap();
    let port = bound.addr.port();
    assert_eq!(bound.addr, SocketAddr::from(([127, 0, 0, 1], port)));
    let has_v6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    let addrs = bound.addrs.clone();
    assert_eq!(addrs.len(), if has_v6 { 2 } else { 1 }, "{addrs:?}");
    assert!(
        addrs
            .iter()
            .all(|a| a.port() == port && a.ip().is_loopback())
    );
    let router = tonic::transport::Server::builder().add_service(CalibrateServer::new(Echo));
    let server = rpc::server::spawn(router, bound);
    for a in addrs {
        let mut c = CalibrateClient::new(rpc::client::connect(a).await.unwrap());
        c.work(WorkRequest::default()).await.unwrap();
    }
    server.shutdown().await.unwrap();
}
