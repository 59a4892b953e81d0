//! Shared gRPC plumbing for every rackbench workload. Each workload's
//! protos and their generated code live in its own crate.
//!
//! - [`server`]: binding listeners (loopback by default) and serving tonic
//!   routers with TCP_NODELAY on every accepted connection.
//! - [`client`]: connecting channels with TCP_NODELAY and spreading requests
//!   over several HTTP/2 connections ([`client::Pool`]).
//! - [`pool`]: fixed thread pools whose tasks are awaited from async code.
//! - [`procstat`]: process and thread CPU time and memory.
//! - [`unary`]: a unary gRPC client on the h2 crate, and the gRPC checks of
//!   a reply; [`lean`]: the same calls with HTTP/2 framing of our own, the
//!   load generators' client.
//! - [`frame`]: multiplexed request/response frames over plain TCP, a
//!   lighter transport than gRPC.

pub mod client;
pub mod frame;
mod hpack;
pub mod lean;
pub mod pool;
pub mod procstat;
mod rxstamp;
pub mod server;
pub mod unary;

/// An error and its sources, `a: b: c`, skipping a source whose text the
/// line already holds (tonic's own text is often just "transport error",
/// and the useful part is a few sources down).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// A multi-threaded tokio runtime with `threads` workers (at least one),
/// timers and IO enabled: what servers and load generators here run on.
/// Its error says what failed ("cannot start the tokio runtime: ..."), so
/// callers pass it on as it is.
pub fn runtime(threads: usize, name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    started(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name(name),
    )
}

/// A load generator's runtime on `threads` client cores. One thread is a
/// current-thread runtime: the driver's workers, the connections' tasks and
/// the caller's `block_on` share the calling thread, so a reply that wakes
/// a worker is no wake-up of another thread (measured against a
/// multi-thread runtime of one worker, `bench/loadgen_capacity.py`: 13-19%
/// less client CPU per request at 2k and 5k req/s, closed loop 1.17x
/// against 0.97x h2load's, one round each). More threads are [`runtime`].
pub fn client_runtime(threads: usize, name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    if threads > 1 {
        return runtime(threads, name);
    }
    started(&mut tokio::runtime::Builder::new_current_thread())
}

/// Builds the runtime with timers and IO; its error says what failed.
fn started(b: &mut tokio::runtime::Builder) -> std::io::Result<tokio::runtime::Runtime> {
    b.enable_all()
        .build()
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot start the tokio runtime: {e}")))
}
