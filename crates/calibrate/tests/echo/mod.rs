//! The echo server the loopback tests call: a reply of the size asked for.
// Each test file that includes this module uses a part of it.
#![allow(dead_code)]

use calibrate::proto::calibrate_server::{Calibrate, CalibrateServer};
use calibrate::proto::{WorkReply, WorkRequest};
use std::net::SocketAddr;
use tonic::{Request, Response, Status};

pub struct Echo;

/// A reply size the echo server refuses with INVALID_ARGUMENT.
pub const REFUSED: usize = 4_000_000;

#[tonic::async_trait]
impl Calibrate for Echo {
    async fn work(&self, r: Request<WorkRequest>) -> Result<Response<WorkReply>, Status> {
        let n = r.into_inner().reply_bytes as usize;
        if n == REFUSED {
            return Err(Status::invalid_argument("100% refused"));
        }
        Ok(Response::new(WorkReply {
            payload: vec![7; n],
            queue_us: 0,
            service_us: 0,
        }))
    }
}

/// The echo server on a loopback port.
pub fn start() -> (rpc::server::Running, SocketAddr) {
    start_with(tonic::transport::Server::builder())
}

/// The echo server with the given server settings.
pub fn start_with(mut b: tonic::transport::Server) -> (rpc::server::Running, SocketAddr) {
    let bound = rpc::server::bind(SocketAddr::new(rpc::server::LOOPBACK, 0)).unwrap();
    assert!(bound.addr.ip().is_loopback());
    let addr = bound.addr;
    let router = b.add_service(CalibrateServer::new(Echo).max_decoding_message_size(64 << 20));
    (rpc::server::spawn(router, bound), addr)
}
