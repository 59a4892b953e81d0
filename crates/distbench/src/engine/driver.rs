//! Protocol drivers: how an engine sends the generic RPC to a peer and
//! serves it, chosen by `protocol_name`. `grpc` (gRPC over HTTP/2, one
//! connection per peer: tonic's server, the lean unary client of
//! [`rpc::unary`] on h2) is the default, as upstream's `default_protocol`;
//! `tcp` carries the same messages as multiplexed frames over one plain TCP
//! connection per peer ([`rpc::frame`]), without HTTP/2's costs.

use super::Engine;
use crate::Error;
use crate::proto::connection_setup_server::{ConnectionSetup, ConnectionSetupServer};
use crate::proto::traffic_server::{Traffic, TrafficServer};
use crate::proto::{
    ConnectRequest, ConnectResponse, GenericRequestResponse, ProtocolDriverOptions, ServerAddress,
};
use bytes_util::zeros;
use futures::future::BoxFuture;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Largest message either side accepts (payloads are at most a few MiB in
/// upstream's patterns; this leaves room).
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// HTTP/2 flow-control windows and frame size of the grpc driver. hyper's
/// defaults (64 KiB windows, 16 KiB frames) make a 256 KiB response wait
/// for several window updates; gRPC's C++ core (upstream's stack) grows its
/// windows by BDP probing to megabytes. Fixed large windows do the same
/// without the probing.
pub const STREAM_WINDOW: u32 = 4 << 20;
pub const CONNECTION_WINDOW: u32 = 16 << 20;
pub const MAX_FRAME: u32 = 1 << 20;

/// The RPC stacks rackbench runs, by `protocol_name`.
pub const SUPPORTED: &[&str] = &["grpc", "tcp"];

/// An RPC stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    Tcp,
}

/// The protocol driver options of a service: those it names in
/// `protocol_driver_options_name`, or, when it names none, those called
/// `default_protocol_driver_options` (as upstream), if any.
pub fn options_of<'a>(
    options_name: Option<&str>,
    options: &'a [ProtocolDriverOptions],
) -> Result<Option<&'a ProtocolDriverOptions>, Error> {
    match options_name {
        None | Some("") => Ok(options
            .iter()
            .find(|o| o.name() == "default_protocol_driver_options")),
        Some(name) => options
            .iter()
            .find(|o| o.name() == name)
            .map(Some)
            .ok_or_else(|| {
                Error::Input(format!(
                    "protocol_driver_options_name: no protocol_driver_options named '{name}'"
                ))
            }),
    }
}

/// The protocol a service uses: its options' `protocol_name`, else the
/// test's `default_protocol`. Errors name what is not supported.
pub fn protocol_of(
    options: Option<&ProtocolDriverOptions>,
    default_protocol: &str,
) -> Result<Protocol, Error> {
    let protocol = options
        .and_then(|o| o.protocol_name.clone())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| default_protocol.to_string());
    match protocol.as_str() {
        "grpc" => Ok(Protocol::Grpc),
        "tcp" => Ok(Protocol::Tcp),
        _ => Err(Error::Input(format!(
            "protocol '{protocol}' is not supported by rackbench (supported: {})",
            SUPPORTED.join(", ")
        ))),
    }
}

/// The client side of one connection to one peer instance.
pub trait Peer: Send + Sync {
    /// Sends one request; the error is the transport's or the server's
    /// ([`Error::Host`]), or a request too large to send ([`Error::Input`]).
    fn call(
        &self,
        req: GenericRequestResponse,
    ) -> BoxFuture<'static, Result<GenericRequestResponse, Error>>;
}

/// The generic RPC's method path.
const GENERIC_RPC: &str = "/distbench.Traffic/GenericRpc";
/// The handshake's method path (upstream's engine service).
const SETUP_CONNECTION: &str = "/distbench.ConnectionSetup/SetupConnection";
/// How long the handshake may take (upstream's deadline).
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);

fn h2_settings() -> rpc::unary::H2Settings {
    rpc::unary::H2Settings {
        stream_window: STREAM_WINDOW,
        connection_window: CONNECTION_WINDOW,
        max_frame: Some(MAX_FRAME),
    }
}

/// Asks the instance whose endpoint `client` is connected to where it
/// serves its traffic (upstream's `SetupConnection`; its answer, for the
/// gRPC driver, is a serialized `ServerAddress`).
async fn setup_connection(
    client: &rpc::lean::LeanClient,
    endpoint: SocketAddr,
) -> Result<SocketAddr, String> {
    use prost::Message;
    let req = ConnectRequest {
        initiator_info: Some(Vec::new()),
    };
    let reply = tokio::time::timeout(SETUP_TIMEOUT, client.call(rpc::unary::frame_message(&req)))
        .await
        .map_err(|_| format!("SetupConnection at {endpoint}: no answer within 60 s"))?
        .map_err(|e| format!("SetupConnection at {endpoint}: {}", grpc_error(e)))?;
    let resp: ConnectResponse = reply
        .decode()
        .map_err(|e| format!("SetupConnection at {endpoint}: bad answer: {e}"))?;
    let addr = ServerAddress::decode(resp.responder_info())
        .map_err(|e| format!("SetupConnection at {endpoint}: bad ServerAddress: {e}"))?;
    addr.socket_address()
        .parse::<SocketAddr>()
        .or_else(|_| {
            addr.ip_address()
                .parse::<std::net::IpAddr>()
                .map(|ip| SocketAddr::new(ip, u16::try_from(addr.port()).unwrap_or(0)))
        })
        .map_err(|_| {
            format!(
                "SetupConnection at {endpoint}: the peer serves at '{}', which is not ip:port",
                addr.socket_address()
            )
        })
}

/// The `ServerAddress` of a server at `addr`, as upstream's gRPC driver
/// describes its own.
pub fn server_address(addr: SocketAddr) -> ServerAddress {
    ServerAddress {
        ip_address: Some(addr.ip().to_string()),
        port: Some(i32::from(addr.port())),
        socket_address: Some(addr.to_string()),
    }
}

/// A gRPC connection to one peer, through [`rpc::lean::LeanClient`]:
/// each call encodes and frames its request and sends it with HTTP/2
/// framing of our own, without tonic's per-call tower stack (issue 26
/// measured that stack at ~45% of a load generator's client time) or the h2
/// crate's stream machinery (issue 47).
pub struct GrpcPeer {
    client: rpc::lean::LeanClient,
}

impl GrpcPeer {
    /// Connects to the instance whose endpoint is `endpoint`: the
    /// handshake there, then its traffic address (the same connection
    /// when that is the endpoint itself). TCP_NODELAY, 5 s connect timeout.
    pub async fn connect(endpoint: SocketAddr) -> Result<GrpcPeer, Error> {
        let setup =
            rpc::lean::LeanClient::connect_with(endpoint, 1, SETUP_CONNECTION, h2_settings())
                .await
                .map_err(|e| Error::Host(format!("cannot connect to {endpoint}: {e}")))?;
        let data = setup_connection(&setup, endpoint)
            .await
            .map_err(Error::Host)?;
        let client = if data == endpoint {
            setup.with_path(GENERIC_RPC)
        } else {
            drop(setup);
            rpc::lean::LeanClient::connect_with(data, 1, GENERIC_RPC, h2_settings()).await
        }
        .map_err(|e| Error::Host(format!("cannot connect to {data}: {e}")))?;
        Ok(GrpcPeer { client })
    }
}

/// A failed call as tonic's client named it: `Code: message`.
fn grpc_error(e: rpc::unary::UnaryError) -> String {
    use rpc::unary::UnaryError;
    match e {
        UnaryError::Status { code, message } => {
            format!("{:?}: {message}", tonic::Code::from(code as i32))
        }
        UnaryError::Transport(_) => format!("{:?}: {e}", tonic::Code::Unavailable),
        UnaryError::Http(_) => format!("{:?}: {e}", tonic::Code::Unknown),
        UnaryError::Malformed(_) => format!("{:?}: {e}", tonic::Code::Internal),
    }
}

impl Peer for GrpcPeer {
    fn call(
        &self,
        req: GenericRequestResponse,
    ) -> BoxFuture<'static, Result<GenericRequestResponse, Error>> {
        let body = rpc::unary::frame_message(&req);
        if body.len() > MAX_MESSAGE_BYTES + rpc::unary::PREFIX {
            let n = body.len() - rpc::unary::PREFIX;
            return Box::pin(async move {
                Err(Error::Input(format!(
                    "{:?}: request of {n} bytes is over the {MAX_MESSAGE_BYTES}-byte limit",
                    tonic::Code::OutOfRange
                )))
            });
        }
        let call = self.client.call(body);
        Box::pin(async move {
            let reply = call.await.map_err(|e| Error::Host(grpc_error(e)))?;
            reply
                .decode::<GenericRequestResponse>()
                .map_err(|e| Error::Host(format!("{:?}: bad response: {e}", tonic::Code::Internal)))
        })
    }
}

pub use rpc::error_chain;

/// A plain-TCP connection to one peer.
pub struct TcpPeer {
    client: rpc::frame::FrameClient,
}

impl TcpPeer {
    /// Connects to the instance whose endpoint is `endpoint`: the
    /// handshake there, then its frame server (5 s timeout).
    pub async fn connect(endpoint: SocketAddr) -> Result<TcpPeer, Error> {
        let setup =
            rpc::lean::LeanClient::connect_with(endpoint, 1, SETUP_CONNECTION, h2_settings())
                .await
                .map_err(|e| Error::Host(format!("cannot connect to {endpoint}: {e}")))?;
        let addr = setup_connection(&setup, endpoint)
            .await
            .map_err(Error::Host)?;
        drop(setup);
        match tokio::time::timeout(
            Duration::from_secs(5),
            rpc::frame::FrameClient::connect(addr),
        )
        .await
        {
            Ok(Ok(client)) => Ok(TcpPeer { client }),
            Ok(Err(e)) => Err(Error::Host(e.to_string())),
            Err(_) => Err(Error::Host(format!("cannot connect to {addr}: timed out"))),
        }
    }
}

impl Peer for TcpPeer {
    fn call(
        &self,
        req: GenericRequestResponse,
    ) -> BoxFuture<'static, Result<GenericRequestResponse, Error>> {
        use prost::Message;
        let call = self.client.call(req.encode_to_vec().into());
        Box::pin(async move {
            let body = call
                .await
                .map_err(|e| Error::Host(format!("Unavailable: {e}")))?;
            GenericRequestResponse::decode(body)
                .map_err(|e| Error::Host(format!("bad response frame: {e}")))
        })
    }
}

/// Connects to the peer instance whose endpoint is `addr`, serving
/// `protocol`.
pub async fn connect(protocol: Protocol, addr: SocketAddr) -> Result<Arc<dyn Peer>, Error> {
    Ok(match protocol {
        Protocol::Grpc => Arc::new(GrpcPeer::connect(addr).await?),
        Protocol::Tcp => Arc::new(TcpPeer::connect(addr).await?),
    })
}

/// The server builder of the engines' gRPC servers: large windows and
/// frames; and the accept queue's limit on streams the client reset
/// before they were accepted is raised far past h2's 20, so a client
/// abandoning many queued RPCs at once (Ctrl-C under overload) does not
/// make the server drop the whole connection ("too_many_resets").
fn grpc_builder() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME)
        .http2_max_pending_accept_reset_streams(Some(1 << 20))
}

/// Answers the handshake with where the instance serves its traffic.
struct Setup {
    data: SocketAddr,
}

#[tonic::async_trait]
impl ConnectionSetup for Setup {
    async fn setup_connection(
        &self,
        _request: tonic::Request<ConnectRequest>,
    ) -> Result<tonic::Response<ConnectResponse>, tonic::Status> {
        use prost::Message;
        Ok(tonic::Response::new(ConnectResponse {
            responder_info: Some(server_address(self.data).encode_to_vec()),
        }))
    }
}

/// A server for one engine, whichever its protocol.
enum Server {
    Grpc(rpc::server::Running),
    Tcp(rpc::frame::FrameServer),
}

impl Server {
    /// Serves `engine`'s traffic on `addr` (port 0 picks one) with its
    /// protocol; the handshake too when `setup` is given (gRPC only).
    async fn start(
        engine: Arc<Engine>,
        protocol: Protocol,
        addr: SocketAddr,
    ) -> Result<Server, String> {
        match protocol {
            Protocol::Grpc => {
                let bound = rpc::server::bind_or_loopback(addr).map_err(|e| e.to_string())?;
                let router = grpc_builder().add_service(grpc_service(engine)?);
                Ok(Server::Grpc(rpc::server::spawn(router, bound)))
            }
            Protocol::Tcp => {
                let handler: rpc::frame::Handler = Arc::new(move |body| {
                    use prost::Message;
                    let engine = engine.clone();
                    Box::pin(async move {
                        let resp = match GenericRequestResponse::decode(body) {
                            Ok(req) => engine.handle(req).await,
                            Err(e) => GenericRequestResponse {
                                error_message: Some(format!("bad request frame: {e}")),
                                ..Default::default()
                            },
                        };
                        resp.encode_to_vec().into()
                    })
                });
                rpc::frame::FrameServer::bind(addr, handler)
                    .await
                    .map(Server::Tcp)
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// The address it listens on.
    fn addr(&self) -> SocketAddr {
        match self {
            Server::Grpc(r) => r.addr,
            Server::Tcp(f) => f.addr,
        }
    }

    async fn shutdown(self) {
        match self {
            Server::Grpc(r) => {
                let _ = r.shutdown().await;
            }
            Server::Tcp(f) => f.stop(),
        }
    }
}

/// Whether a listener on `listen` also serves `data` (an address of
/// this host): the same address, every interface of a family that covers
/// it (`::` is dual-stack), or the default loopback (both loopbacks).
fn covers(listen: IpAddr, data: IpAddr) -> bool {
    listen == data
        || (listen.is_unspecified() && (listen.is_ipv6() || data.is_ipv4()))
        || (listen == rpc::server::LOOPBACK && data.is_loopback())
}

/// One engine's servers, as upstream's engine has them: the endpoint the
/// placement advertises, which answers the handshake
/// (`ConnectionSetup.SetupConnection`) with the address of its traffic
/// server; one listener for both when it can.
pub struct Serving {
    servers: Vec<Server>,
    /// What the placement advertises (the handshake's address).
    pub endpoint: SocketAddr,
    /// Where the traffic is served.
    pub data: SocketAddr,
}

impl Serving {
    /// Serves `engine`: the handshake on `listen` (port 0 picks one),
    /// advertised as `advertise`, and its traffic with its protocol on
    /// `data_ip` (on the same listener when `listen` covers it).
    pub async fn start(
        engine: Arc<Engine>,
        protocol: Protocol,
        listen: IpAddr,
        advertise: IpAddr,
        data_ip: IpAddr,
    ) -> Result<Serving, Error> {
        if protocol == Protocol::Grpc && covers(listen, data_ip) {
            let bound = rpc::server::bind_or_loopback(SocketAddr::new(listen, 0))
                .map_err(|e| Error::Host(e.to_string()))?;
            let port = bound.addr.port();
            let data = SocketAddr::new(data_ip, port);
            let router = grpc_builder()
                .add_service(grpc_service(engine)?)
                .add_service(ConnectionSetupServer::new(Setup { data }));
            return Ok(Serving {
                servers: vec![Server::Grpc(rpc::server::spawn(router, bound))],
                endpoint: SocketAddr::new(advertise, port),
                data,
            });
        }
        let traffic = Server::start(engine, protocol, SocketAddr::new(data_ip, 0))
            .await
            .map_err(Error::Host)?;
        let data = traffic.addr();
        let bound = match rpc::server::bind_or_loopback(SocketAddr::new(listen, 0)) {
            Ok(b) => b,
            Err(e) => {
                traffic.shutdown().await;
                return Err(Error::Host(e.to_string()));
            }
        };
        let port = bound.addr.port();
        let router = grpc_builder().add_service(ConnectionSetupServer::new(Setup { data }));
        Ok(Serving {
            servers: vec![traffic, Server::Grpc(rpc::server::spawn(router, bound))],
            endpoint: SocketAddr::new(advertise, port),
            data,
        })
    }

    /// Stops serving (gRPC lets calls in flight finish).
    pub async fn shutdown(self) {
        for s in self.servers {
            s.shutdown().await;
        }
    }
}

/// How a gRPC server runs its handlers: upstream's `server_type` and
/// thread pool (`threadpool_size`, `threadpool_type`).
///
/// In upstream's C++ driver an `inline` server runs the handler on the
/// thread that received the RPC, and `handoff` and `polling` servers hand it
/// to a pool whose threads block while the handler waits for the RPCs it
/// sends. rackbench's handlers are futures, so a blocked thread has no
/// equivalent; what the variants change, and what is reproduced here, is
/// (1) the hand-off itself: the handler runs on the instance's own pool of
/// `threadpool_size` threads (one per CPU by default), not on the thread
/// that read the request, and (2) the pool's limit: a `simple` pool runs at
/// most `threadpool_size` handlers at once and queues the rest (an
/// `elastic` one grows past its size, so it has no limit), and `null` runs
/// each handler on a thread of its own, created for it.
pub enum Handoff {
    Inline,
    Pool {
        pool: PoolRuntime,
        /// `simple`: at most `threadpool_size` handlers at once.
        limit: Option<Arc<tokio::sync::Semaphore>>,
    },
    ThreadPerRpc {
        pool: PoolRuntime,
    },
}

/// A server instance's own tokio runtime, stopped without blocking when
/// the server goes (it may be dropped inside another runtime).
pub struct PoolRuntime(Option<tokio::runtime::Runtime>);

impl PoolRuntime {
    fn new(name: &str, threads: usize) -> Result<PoolRuntime, String> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name(format!("{name}-pool"))
            .enable_all()
            .build()
            .map(|rt| PoolRuntime(Some(rt)))
            .map_err(|e| format!("cannot start the handler thread pool of {name}: {e}"))
    }

    fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.0.as_ref().map(tokio::runtime::Runtime::handle)
    }
}

impl Drop for PoolRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl Handoff {
    /// The hand-off `engine`'s service asks for (inline for the tcp driver).
    pub fn of(engine: &Engine) -> Result<Handoff, Error> {
        use crate::check::protocol::{ServerType, ThreadpoolType};
        let info = &engine.tables.services[engine.service];
        let Some(v) = &info.grpc else {
            return Ok(Handoff::Inline);
        };
        if v.server_type == ServerType::Inline {
            return Ok(Handoff::Inline);
        }
        let threads = match v.threadpool_size {
            Some(n) => usize::try_from(n).unwrap_or(1),
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let name = info
            .instances
            .get(engine.instance)
            .map_or("instance", String::as_str);
        Ok(match v.threadpool_type {
            ThreadpoolType::Elastic => Handoff::Pool {
                pool: PoolRuntime::new(name, threads).map_err(Error::Host)?,
                limit: None,
            },
            ThreadpoolType::Simple => Handoff::Pool {
                pool: PoolRuntime::new(name, threads).map_err(Error::Host)?,
                limit: Some(Arc::new(tokio::sync::Semaphore::new(threads))),
            },
            ThreadpoolType::Null => Handoff::ThreadPerRpc {
                pool: PoolRuntime::new(name, 1).map_err(Error::Host)?,
            },
        })
    }

    /// Runs `engine`'s handler for `req` as this hand-off says.
    pub async fn handle(
        &self,
        engine: Arc<Engine>,
        req: GenericRequestResponse,
    ) -> Result<GenericRequestResponse, Error> {
        match self {
            Handoff::Inline => Ok(engine.handle(req).await),
            Handoff::Pool { pool, limit } => {
                let permit =
                    match limit {
                        Some(s) => Some(s.clone().acquire_owned().await.map_err(|_| {
                            Error::Host("the handler pool is shut down".to_string())
                        })?),
                        None => None,
                    };
                let handle = pool
                    .handle()
                    .ok_or_else(|| Error::Host("the handler pool is shut down".into()))?;
                handle
                    .spawn(async move {
                        let r = engine.handle(req).await;
                        drop(permit);
                        r
                    })
                    .await
                    .map_err(|e| Error::Host(format!("the handler failed: {e}")))
            }
            Handoff::ThreadPerRpc { pool } => {
                let handle = pool
                    .handle()
                    .ok_or_else(|| Error::Host("the handler pool is shut down".into()))?
                    .clone();
                let (tx, rx) = tokio::sync::oneshot::channel();
                std::thread::Builder::new()
                    .name("rpc-handler".into())
                    .spawn(move || {
                        let _ = tx.send(handle.block_on(engine.handle(req)));
                    })
                    .map_err(|e| Error::Host(format!("cannot start a handler thread: {e}")))?;
                rx.await
                    .map_err(|_| Error::Host("the handler thread died".to_string()))
            }
        }
    }
}

/// The gRPC server side of one engine.
pub struct GrpcService {
    engine: Arc<Engine>,
    handoff: Handoff,
}

/// The tonic service that hands every request to `engine`, as its service's
/// `server_type` asks.
pub fn grpc_service(engine: Arc<Engine>) -> Result<TrafficServer<GrpcService>, Error> {
    let handoff = Handoff::of(&engine)?;
    Ok(TrafficServer::new(GrpcService { engine, handoff })
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES))
}

#[tonic::async_trait]
impl Traffic for GrpcService {
    async fn generic_rpc(
        &self,
        request: tonic::Request<GenericRequestResponse>,
    ) -> Result<tonic::Response<GenericRequestResponse>, tonic::Status> {
        self.handoff
            .handle(self.engine.clone(), request.into_inner())
            .await
            .map(tonic::Response::new)
            .map_err(tonic::Status::internal)
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

/// The padding that makes a message whose other fields encode to `base`
/// bytes `target` bytes long in all (the payload is field 1: a tag byte, a
/// length varint, the bytes), as upstream sizes its messages. `None` when
/// even an empty payload would not fit. Where the varint grows by a byte
/// at a boundary, the message comes out one byte short of `target`.
pub fn padding_for(base: usize, target: i64) -> Option<usize> {
    let target = usize::try_from(target).ok()?;
    let room = target.checked_sub(base + 1)?;
    // n + len(varint(n)) <= room, as large as possible.
    let mut n = room.checked_sub(1)?;
    while n + prost::encoding::encoded_len_varint(n as u64) > room {
        n -= 1;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn padding_makes_the_whole_message_the_target_size() {
        for target in [
            16i64,
            32,
            100,
            129,
            130,
            196,
            1024,
            16_384,
            262_144,
            1 << 20,
        ] {
            let mut req = GenericRequestResponse {
                rpc_index: Some(3),
                warmup: Some(true),
                ..Default::default()
            };
            req.payload = padding_for(req.encoded_len(), target).map(|n| payload(n as i64));
            let len = req.encoded_len() as i64;
            // Exact, or one short where the length varint grows.
            assert!(len == target || len == target - 1, "target {target}: {len}");
        }
        // Too small for any payload: none.
        assert_eq!(padding_for(10, 5), None);
        assert_eq!(padding_for(10, -1), None);
        assert_eq!(padding_for(4, 6), Some(0));
    }
}
