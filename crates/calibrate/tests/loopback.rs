//! rpc's gRPC plumbing (servers, client pools) over real loopback sockets,
//! with the calibration service as the service under test.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use calibrate::proto::calibrate_client::CalibrateClient;
use calibrate::proto::calibrate_server::CalibrateServer;
use calibrate::proto::{WorkReply, WorkRequest};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

mod echo;
use echo::{Echo, REFUSED, start};

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

/// The load generator's lean h2 client (rpc::unary) against a tonic server:
/// concurrent calls over several connections get their own replies (the
/// message decodes to what the server sent, sized as on the wire).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unary_client_round_trips_concurrent_calls() {
    let (server, addr) = start();
    let client = rpc::unary::UnaryClient::connect(addr, 3, "/rackbench.calibrate.Calibrate/Work")
        .await
        .unwrap();
    assert_eq!(client.connections(), 3);
    let mut tasks = Vec::new();
    for i in 0..60u32 {
        let c = client.clone();
        // Sizes past h2's 16 KiB frame exercise replies in several DATA frames.
        let n = i * 1000;
        let body = rpc::unary::frame_message(&WorkRequest {
            payload: vec![1; 10],
            reply_bytes: n,
        });
        tasks.push(tokio::spawn(async move { (n, c.call(body).await) }));
    }
    for t in tasks {
        let (n, r) = t.await.unwrap();
        let r = r.unwrap();
        let reply: WorkReply = r.decode().unwrap();
        assert_eq!(reply.payload.len(), n as usize);
        assert!(reply.payload.iter().all(|b| *b == 7));
        assert_eq!(
            load::WireSize::wire_size(&r),
            prost::Message::encoded_len(&reply) as u64 + 5
        );
    }
    server.shutdown().await.unwrap();
}

/// A gRPC error is an error, with its code and (percent-decoded) message:
/// from the handler (status in the trailers-only response) and for a method
/// the server does not have; a port nobody listens on is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unary_client_reports_grpc_statuses_and_dead_servers() {
    let (server, addr) = start();
    let client = rpc::unary::UnaryClient::connect(addr, 1, "/rackbench.calibrate.Calibrate/Work")
        .await
        .unwrap();
    let refused = rpc::unary::frame_message(&WorkRequest {
        payload: vec![],
        reply_bytes: REFUSED as u32,
    });
    match client.call(refused).await {
        Err(rpc::unary::UnaryError::Status { code, message }) => {
            assert_eq!(code, 3, "INVALID_ARGUMENT");
            assert_eq!(message, "100% refused");
        }
        other => panic!("expected a gRPC status, got {other:?}"),
    }
    let missing = rpc::unary::UnaryClient::connect(addr, 1, "/rackbench.calibrate.Calibrate/Nope")
        .await
        .unwrap();
    let e = missing
        .call(rpc::unary::frame_message(&WorkRequest::default()))
        .await
        .unwrap_err();
    assert!(
        matches!(e, rpc::unary::UnaryError::Status { code: 12, .. }),
        "UNIMPLEMENTED expected: {e}"
    );
    server.shutdown().await.unwrap();
    // The port is free again: connecting names the address.
    let e = rpc::unary::UnaryClient::connect(addr, 1, "/x/y")
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&addr.to_string()), "{e}");
}
