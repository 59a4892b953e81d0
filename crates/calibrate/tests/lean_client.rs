//! rpc::lean, the load generator's HTTP/2 client of its own framing,
//! against a real tonic server over loopback sockets: replies, gRPC
//! statuses, both directions' flow control at sizes past every window and
//! frame, the server's stream limit, and a server that goes away.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

mod echo;

use calibrate::proto::{WorkReply, WorkRequest};
use echo::{REFUSED, start, start_with};
use rpc::lean::LeanClient;
use rpc::unary::{H2Settings, UnaryError, frame_message};
use std::time::{Duration, Instant};

const WORK: &str = "/rackbench.calibrate.Calibrate/Work";

fn request(payload: usize, reply: u32) -> bytes::Bytes {
    frame_message(&WorkRequest {
        payload: vec![1; payload],
        reply_bytes: reply,
    })
}

/// Calls `n` times at once and checks each reply is its own call's.
async fn round_trips(client: &LeanClient, n: u32, payload: usize, step: u32) {
    let mut tasks = Vec::new();
    for i in 0..n {
        let c = client.clone();
        let size = i * step;
        let body = request(payload, size);
        tasks.push(tokio::spawn(async move {
            let sent = Instant::now();
            let r = c.call(body).await;
            (size, sent, r, Instant::now())
        }));
    }
    let mut stamped = 0;
    for t in tasks {
        let (size, sent, r, got) = t.await.unwrap();
        let r = r.unwrap();
        // The kernel stamped the reply's arrival, between send and hand-over
        // (it turns stamping on in deferred work, so a fresh process's
        // first segments can come unstamped: those end when read).
        if let Some(arrived) = r.arrived {
            stamped += 1;
            assert!(
                arrived + Duration::from_millis(1) >= sent && arrived <= got,
                "arrival stamp {:?} after the send, hand-over {:?} after it",
                arrived.checked_duration_since(sent),
                got.checked_duration_since(arrived)
            );
        }
        let reply: WorkReply = r.decode().unwrap();
        assert_eq!(reply.payload.len(), size as usize);
        assert!(reply.payload.iter().all(|b| *b == 7));
        assert_eq!(
            load::WireSize::wire_size(&r),
            prost::Message::encoded_len(&reply) as u64 + 5
        );
    }
    assert!(stamped > 0, "none of {n} replies carried a receive stamp");
}

/// Concurrent calls over several connections get their own replies,
/// including replies in several DATA frames (past 16 KiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_get_their_own_replies() {
    let (server, addr) = start();
    let client = LeanClient::connect(addr, 3, WORK).await.unwrap();
    assert_eq!(client.connections(), 3);
    round_trips(&client, 60, 10, 1000).await;
    server.shutdown().await.unwrap();
}

/// Requests and replies of megabytes against 64 KiB windows on both sides:
/// the client waits for the server's WINDOW_UPDATEs before sending more, and
/// sends its own as it reads, so nothing stalls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_control_carries_megabytes_both_ways_through_small_windows() {
    let (server, addr) = start_with(
        tonic::transport::Server::builder()
            .initial_stream_window_size(Some(65_535))
            .initial_connection_window_size(Some(65_535)),
    );
    let small = H2Settings {
        stream_window: 65_535,
        connection_window: 65_535,
        max_frame: None,
    };
    let client = LeanClient::connect_with(addr, 1, WORK, small)
        .await
        .unwrap();
    let run = round_trips(&client, 6, 3 << 20, 700_000);
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("a call stalled: flow control lost a window");
    server.shutdown().await.unwrap();
}

/// Frames of up to 1 MiB (Distbench's setting), each read over several
/// reads of the socket, arrive whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_larger_than_a_read_arrive_whole() {
    let (server, addr) = start_with(tonic::transport::Server::builder().max_frame_size(1 << 20));
    let big = H2Settings {
        stream_window: 4 << 20,
        connection_window: 8 << 20,
        max_frame: Some(1 << 20),
    };
    let client = LeanClient::connect_with(addr, 1, WORK, big).await.unwrap();
    let run = round_trips(&client, 8, 1 << 20, 500_000);
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap();
    server.shutdown().await.unwrap();
}

/// Requests of megabytes under windows wide enough that the socket, not
/// flow control, limits the client: writes find the socket full and wait
/// for room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_wait_for_room_in_a_full_socket() {
    let (server, addr) = start_with(
        tonic::transport::Server::builder()
            .initial_stream_window_size(Some(32 << 20))
            .initial_connection_window_size(Some(256 << 20))
            .max_frame_size(1 << 20),
    );
    let wide = H2Settings {
        stream_window: 4 << 20,
        connection_window: 8 << 20,
        max_frame: Some(1 << 20),
    };
    let client = LeanClient::connect_with(addr, 1, WORK, wide).await.unwrap();
    // The server's windows arrive in its SETTINGS; let them land first.
    client.call(request(1, 1)).await.unwrap();
    let run = round_trips(&client, 24, 8 << 20, 1000);
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("a write never found room again");
    server.shutdown().await.unwrap();
}

/// More calls at once than the server's stream limit: the rest wait for a
/// stream to close, none is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_servers_stream_limit_wait_their_turn() {
    let (server, addr) = start_with(tonic::transport::Server::builder().max_concurrent_streams(4));
    let client = LeanClient::connect(addr, 1, WORK).await.unwrap();
    // The limit arrives in the server's SETTINGS; let it land first.
    client.call(request(1, 1)).await.unwrap();
    let run = round_trips(&client, 200, 1, 10);
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap();
    server.shutdown().await.unwrap();
}

/// gRPC errors are errors with their code and percent-decoded message: a
/// handler's status and a method the server lacks (both trailers-only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_statuses_are_errors() {
    let (server, addr) = start();
    let client = LeanClient::connect(addr, 1, WORK).await.unwrap();
    match client.call(request(0, REFUSED as u32)).await {
        Err(UnaryError::Status { code, message }) => {
            assert_eq!(code, 3, "INVALID_ARGUMENT");
            assert_eq!(message, "100% refused");
        }
        other => panic!("expected a gRPC status, got {other:?}"),
    }
    let missing = client
        .with_path("/rackbench.calibrate.Calibrate/Nope")
        .unwrap();
    let e = missing.call(request(0, 0)).await.unwrap_err();
    assert!(
        matches!(e, UnaryError::Status { code: 12, .. }),
        "UNIMPLEMENTED expected: {e}"
    );
    // The connection still serves the right method after both. Both paths
    // are in the server's HPACK table by now, so each call below names its
    // :path by an index that the other path's entry has shifted.
    client.call(request(0, 5)).await.unwrap();
    for _ in 0..2 {
        let e = missing.call(request(0, 0)).await.unwrap_err();
        assert!(matches!(e, UnaryError::Status { code: 12, .. }), "{e}");
        client.call(request(0, 5)).await.unwrap();
    }
    server.shutdown().await.unwrap();
}

/// A server that goes away fails the calls after it, at once, and a port
/// nobody listens on is named; a bad method path is refused before any
/// connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_goes_away_fails_calls_instead_of_hanging() {
    let (server, addr) = start();
    let client = LeanClient::connect(addr, 2, WORK).await.unwrap();
    client.call(request(0, 1)).await.unwrap();
    server.shutdown().await.unwrap();
    for _ in 0..4 {
        let r = tokio::time::timeout(Duration::from_secs(10), client.call(request(0, 1)))
            .await
            .expect("a call to a closed server hung");
        assert!(matches!(r, Err(UnaryError::Transport(_))), "{r:?}");
    }
    let e = LeanClient::connect(addr, 1, WORK)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&addr.to_string()), "{e}");
    let e = LeanClient::connect(addr, 1, "no-slash")
        .await
        .err()
        .unwrap();
    assert!(e.to_string().contains("bad method path"), "{e}");
}
