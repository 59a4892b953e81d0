//! Protocol drivers: how an engine sends the generic RPC to a peer and
//! serves it. `grpc` (tonic over HTTP/2, one channel per peer) is the
//! default, as upstream's `default_protocol`.

use super::Engine;
use crate::proto::traffic_client::TrafficClient;
use crate::proto::traffic_server::{Traffic, TrafficServer};
use crate::proto::{GenericRequest, GenericResponse, ProtocolDriverOptions};
use bytes_util::zeros;
use futures::future::BoxFuture;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// Largest message either side accepts (payloads are at most a few MiB in
/// upstream's patterns; this leaves room).
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// The RPC stacks rackbench runs, by `protocol_name`.
pub const SUPPORTED: &[&str] = &["grpc"];

/// The protocol a service uses: its `protocol_driver_options_name`, else
/// the test's `default_protocol`. Errors name what is not supported.
pub fn protocol_of(
    options_name: Option<&str>,
    default_protocol: &str,
    options: &[ProtocolDriverOptions],
) -> Result<String, String> {
    let protocol = match options_name {
        None | Some("") => default_protocol.to_string(),
        Some(name) => {
            let o = options.iter().find(|o| o.name() == name).ok_or_else(|| {
                format!("protocol_driver_options_name: no protocol_driver_options named '{name}'")
            })?;
            o.protocol_name.clone().unwrap_or_else(|| default_protocol.to_string())
        }
    };
    if SUPPORTED.contains(&protocol.as_str()) {
        Ok(protocol)
    } else {
        Err(format!(
            "protocol '{protocol}' is not supported by rackbench (supported: {})",
            SUPPORTED.join(", ")
        ))
    }
}

/// The client side of one connection to one peer instance.
pub trait Peer: Send + Sync {
    /// Sends one request; the error is the transport's or the server's.
    fn call(&self, req: GenericRequest) -> BoxFuture<'static, Result<GenericResponse, String>>;
}

/// A gRPC connection to one peer.
pub struct GrpcPeer {
    client: TrafficClient<Channel>,
}

impl GrpcPeer {
    /// Connects to `addr` (TCP_NODELAY, 5 s connect timeout).
    pub async fn connect(addr: SocketAddr) -> Result<GrpcPeer, String> {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| format!("bad peer address {addr}: {e}"))?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        Ok(GrpcPeer {
            client: TrafficClient::new(channel)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        })
    }
}

impl Peer for GrpcPeer {
    fn call(&self, req: GenericRequest) -> BoxFuture<'static, Result<GenericResponse, String>> {
        let mut client = self.client.clone();
        Box::pin(async move {
            match client.generic_rpc(req).await {
                Ok(r) => Ok(r.into_inner()),
                Err(status) => Err(format!("{:?}: {}", status.code(), status.message())),
            }
        })
    }
}

/// The gRPC server side of one engine.
pub struct GrpcService {
    engine: Arc<Engine>,
}

/// The tonic service that hands every request to `engine`.
pub fn grpc_service(engine: Arc<Engine>) -> TrafficServer<GrpcService> {
    TrafficServer::new(GrpcService { engine })
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

#[tonic::async_trait]
impl Traffic for GrpcService {
    async fn generic_rpc(
        &self,
        request: tonic::Request<GenericRequest>,
    ) -> Result<tonic::Response<GenericResponse>, tonic::Status> {
        Ok(tonic::Response::new(
            self.engine.clone().handle(request.into_inner()).await,
        ))
    }
}

/// Zero-filled payloads without an allocation per RPC.
pub mod bytes_util {
    use prost::bytes::Bytes;

    static ZEROS: [u8; 1 << 20] = [0; 1 << 20];

    /// `n` zero bytes: a slice of a static buffer up to 1 MiB.
    pub fn zeros(n: usize) -> Bytes {
        if n <= ZEROS.len() {
            Bytes::from_static(&ZEROS[..n])
        } else {
            Bytes::from(vec![0u8; n])
        }
    }
}

/// Payload of `size` bytes (negative sizes are empty).
pub fn payload(size: i64) -> prost::bytes::Bytes {
    zeros(usize::try_from(size).unwrap_or(0))
}
