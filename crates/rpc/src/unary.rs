//! A lean gRPC unary client for load generation, on `h2` directly.
//!
//! tonic's client sends each call through a tower stack (a `Buffer` task
//! with its semaphore, origin and user-agent layers, hyper's dispatcher and
//! body types) before it reaches h2, and decodes each reply into a message.
//! Measured on one client core against a no-op server (issue 26,
//! `bench/loadgen_capacity.py`), that stack held rackbench's load generator
//! to ~0.6x h2load's rate. This client keeps what a load generator needs
//! and nothing else: the request is a gRPC-framed message encoded once
//! ([`frame`]) and sent as a refcounted `Bytes` per call; the reply's frame is
//! checked (one uncompressed message, its length as the prefix says) and its
//! gRPC status read from the trailers (or a trailers-only response), so a
//! failed call is an error as with tonic; the message is not decoded unless
//! the caller does.
//!
//! HTTP/2 itself (framing, HPACK, flow control, stream limits) stays in h2,
//! the crate tonic's hyper uses; only the gRPC conventions of a unary call
//! (RFC-less but specified in grpc/doc/PROTOCOL-HTTP2.md: `POST`,
//! `content-type: application/grpc`, `te: trailers`, the 5-byte message
//! prefix, `grpc-status`/`grpc-message`) are written here.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

/// The gRPC message prefix: a compression flag byte and a 4-byte length.
pub const PREFIX: usize = 5;

/// Frames an encoded protobuf message as one gRPC message (uncompressed).
pub fn frame(message: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(PREFIX + message.len());
    b.put_u8(0);
    b.put_u32(message.len() as u32);
    b.put_slice(message);
    b.freeze()
}

/// Encodes and frames a prost message, straight into one buffer of the
/// exact size (one allocation per call, no copy).
pub fn frame_message<M: prost::Message>(m: &M) -> Bytes {
    let len = m.encoded_len();
    let mut b = BytesMut::with_capacity(PREFIX + len);
    b.put_u8(0);
    b.put_u32(len as u32);
    // encode's one error is a buffer without room; BytesMut grows (and
    // has exactly encoded_len() reserved), so it cannot happen.
    let encoded = m.encode(&mut b);
    debug_assert!(encoded.is_ok());
    b.freeze()
}

/// Why a call failed.
#[derive(Debug, Clone)]
pub enum UnaryError {
    /// The connection or stream failed (h2's error, as text).
    Transport(String),
    /// The server answered with a non-200 HTTP status.
    Http(u16),
    /// The server answered with a gRPC status other than OK.
    Status { code: u32, message: String },
    /// The reply was not one well-formed gRPC message.
    Malformed(&'static str),
}

impl fmt::Display for UnaryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnaryError::Transport(e) => write!(f, "transport error: {e}"),
            UnaryError::Http(s) => write!(f, "HTTP status {s} (expected 200)"),
            UnaryError::Status { code, message } => {
                write!(f, "gRPC status {code}")?;
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            UnaryError::Malformed(why) => write!(f, "malformed gRPC reply: {why}"),
        }
    }
}

impl std::error::Error for UnaryError {}

impl From<h2::Error> for UnaryError {
    fn from(e: h2::Error) -> Self {
        UnaryError::Transport(e.to_string())
    }
}

/// A successful reply: the message (prefix removed) and its size on the wire.
#[derive(Debug, Clone)]
pub struct Reply {
    pub message: Bytes,
    /// When its last bytes reached this host, by the kernel's receive
    /// timestamp (the lean client's replies; `None` from the
    /// h2 client or where the socket gave none).
    pub arrived: Option<std::time::Instant>,
}

impl Reply {
    /// Decodes the message.
    pub fn decode<M: prost::Message + Default>(&self) -> Result<M, prost::DecodeError> {
        M::decode(self.message.clone())
    }

    /// Bytes of the reply's gRPC message, prefix included.
    pub fn wire_len(&self) -> u64 {
        (self.message.len() + PREFIX) as u64
    }
}

/// HTTP/2 settings of a client's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Settings {
    /// Initial flow-control window of each stream, bytes.
    pub stream_window: u32,
    /// Initial flow-control window of the connection, bytes.
    pub connection_window: u32,
    /// Largest frame the client accepts (`None`: h2's default, 16 KiB).
    pub max_frame: Option<u32>,
}

impl Default for H2Settings {
    /// Window sizes as hyper's HTTP/2 client defaults (what tonic's channel
    /// uses), so replies of any size flow as they did through tonic.
    fn default() -> Self {
        H2Settings {
            stream_window: 2 * 1024 * 1024,
            connection_window: 5 * 1024 * 1024,
            max_frame: None,
        }
    }
}

/// A pool of HTTP/2 connections to one server calling one method; each
/// call goes to the connection with the fewest calls in flight (the first
/// of equals). Cloning is cheap (shared handles).
///
/// Not round-robin: in a closed loop the call that replaces a completed one
/// then goes out on the connection the reply came in on, so a burst of
/// replies on one connection is answered by one write on that connection
/// (as h2load does), where round-robin spread it over every connection, one
/// write each (measured: ~1 `writev` per request against h2load's 0.43). In
/// an open loop it balances the connections by their load.
#[derive(Clone)]
pub struct UnaryClient {
    /// Shared by every clone: a load generator clones the client per call.
    inner: Arc<Inner>,
}

struct Inner {
    /// Shared with clients made by [`UnaryClient::with_path`].
    conns: Arc<[Conn]>,
    uri: http::Uri,
    /// The request headers, built once (cloning them is one allocation,
    /// parsing them per call was measurable).
    headers: http::HeaderMap,
}

impl UnaryClient {
    /// Opens `connections` TCP connections (TCP_NODELAY) to `addr` for the
    /// method at `path` (`/package.Service/Method`). Each connection's h2
    /// task runs on the current tokio runtime.
    pub async fn connect(
        addr: SocketAddr,
        connections: usize,
        path: &str,
    ) -> Result<Self, UnaryError> {
        Self::connect_with(addr, connections, path, H2Settings::default()).await
    }

    /// [`UnaryClient::connect`] with the given HTTP/2 settings.
    pub async fn connect_with(
        addr: SocketAddr,
        connections: usize,
        path: &str,
        settings: H2Settings,
    ) -> Result<Self, UnaryError> {
        let uri = http::Uri::builder()
            .scheme("http")
            .authority(addr.to_string())
            .path_and_query(path)
            .build()
            .map_err(|e| UnaryError::Transport(format!("bad method path {path:?}: {e}")))?;
        let mut conns = Vec::with_capacity(connections.max(1));
        for _ in 0..connections.max(1) {
            let tcp = connect_tcp(addr).await?;
            let mut builder = h2::client::Builder::new();
            builder
                .initial_window_size(settings.stream_window)
                .initial_connection_window_size(settings.connection_window);
            if let Some(f) = settings.max_frame {
                builder.max_frame_size(f);
            }
            let (send, conn) = builder.handshake::<_, Bytes>(tcp).await?;
            tokio::spawn(async move {
                // The connection ends when every handle is dropped or the
                // peer goes away; calls in flight then fail with its error.
                let _ = conn.await;
            });
            conns.push(Conn {
                send,
                in_flight: Arc::new(AtomicUsize::new(0)),
            });
        }
        let mut headers = http::HeaderMap::with_capacity(2);
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/grpc"),
        );
        headers.insert(http::header::TE, http::HeaderValue::from_static("trailers"));
        Ok(UnaryClient {
            inner: Arc::new(Inner {
                conns: conns.into(),
                uri,
                headers,
            }),
        })
    }

    /// The same connections, calling the method at `path` instead (another
    /// method of the same server, without connecting again).
    pub fn with_path(&self, path: &str) -> Result<Self, UnaryError> {
        let mut parts = self.inner.uri.clone().into_parts();
        parts.path_and_query = Some(
            path.parse()
                .map_err(|e| UnaryError::Transport(format!("bad method path {path:?}: {e}")))?,
        );
        let uri = http::Uri::from_parts(parts)
            .map_err(|e| UnaryError::Transport(format!("bad method path {path:?}: {e}")))?;
        Ok(UnaryClient {
            inner: Arc::new(Inner {
                conns: self.inner.conns.clone(),
                uri,
                headers: self.inner.headers.clone(),
            }),
        })
    }

    /// Connections in the pool.
    pub fn connections(&self) -> usize {
        self.inner.conns.len()
    }

    /// One unary call with a framed request ([`frame`]).
    pub fn call(&self, request: Bytes) -> impl Future<Output = Result<Reply, UnaryError>> + use<> {
        let inner = &*self.inner;
        let (conn, busy) = least_busy(&inner.conns, |c| &c.in_flight);
        let send = conn.send.clone();
        let mut req = http::Request::new(());
        *req.method_mut() = http::Method::POST;
        *req.uri_mut() = inner.uri.clone();
        *req.headers_mut() = inner.headers.clone();
        async move {
            let _busy = busy;
            call(send, req, request).await
        }
    }
}

/// A TCP connection to `addr` with TCP_NODELAY, in at most 5 s; the error
/// names the address.
pub(crate) async fn connect_tcp(addr: SocketAddr) -> Result<tokio::net::TcpStream, UnaryError> {
    let tcp = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| UnaryError::Transport(format!("connecting to {addr} timed out")))?
        .map_err(|e| UnaryError::Transport(format!("cannot connect to {addr}: {e}")))?;
    tcp.set_nodelay(true)
        .map_err(|e| UnaryError::Transport(e.to_string()))?;
    Ok(tcp)
}

/// One connection of the pool and its calls in flight.
struct Conn {
    send: h2::client::SendRequest<Bytes>,
    in_flight: Arc<AtomicUsize>,
}

/// Counts a call in flight on its connection until it ends or is dropped.
pub(crate) struct Busy(Arc<AtomicUsize>);

/// The connection with the fewest calls in flight (the first of equals;
/// `conns` is never empty), its count raised until the guard drops.
pub(crate) fn least_busy<C>(
    conns: &[C],
    in_flight: impl Fn(&C) -> &Arc<AtomicUsize>,
) -> (&C, Busy) {
    let conn = conns
        .iter()
        .min_by_key(|c| in_flight(c).load(Ordering::Relaxed))
        .unwrap_or(&conns[0]);
    (conn, Busy::new(in_flight(conn)))
}

impl Busy {
    fn new(n: &Arc<AtomicUsize>) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        Busy(n.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn call(
    send: h2::client::SendRequest<Bytes>,
    req: http::Request<()>,
    request: Bytes,
) -> Result<Reply, UnaryError> {
    // A cloned handle has no pending stream of its own, so this is ready at
    // once unless the connection is gone; past the server's stream limit h2
    // queues the stream until one closes.
    let mut send = send.ready().await?;
    let (response, mut stream) = send.send_request(req, false)?;
    // The server may answer from the headers alone (a trailers-only
    // status such as UNIMPLEMENTED) and close the stream before the body
    // goes out, the connection task running on another thread: sending
    // then fails with "inactive stream", and the server's answer stands.
    let sent = stream.send_data(request, true);
    let (head, mut body) = match (response.await, sent) {
        (Ok(r), _) => r.into_parts(),
        (Err(_), Err(e)) | (Err(e), Ok(())) => return Err(e.into()),
    };
    if head.status != http::StatusCode::OK {
        return Err(UnaryError::Http(head.status.as_u16()));
    }
    // A trailers-only response carries the status in the headers.
    if let Some(code) = head.headers.get("grpc-status") {
        status(code, head.headers.get("grpc-message"))?;
        return Err(UnaryError::Malformed("no message in the reply"));
    }
    let mut first: Option<Bytes> = None;
    let mut rest: Option<BytesMut> = None;
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        match (&mut first, &mut rest) {
            (None, _) => first = Some(chunk),
            (Some(f), None) => {
                let mut b = BytesMut::with_capacity(f.len() + chunk.len());
                b.put_slice(f);
                b.put_slice(&chunk);
                rest = Some(b);
            }
            (Some(_), Some(b)) => b.put_slice(&chunk),
        }
    }
    let trailers = body.trailers().await?;
    let Some(trailers) = trailers else {
        return Err(UnaryError::Malformed(
            "no trailers (grpc-status) after the message",
        ));
    };
    match trailers.get("grpc-status") {
        Some(code) => status(code, trailers.get("grpc-message"))?,
        None => return Err(UnaryError::Malformed("no grpc-status in the trailers")),
    }
    let data = match (first, rest) {
        (_, Some(b)) => b.freeze(),
        (Some(f), None) => f,
        (None, None) => return Err(UnaryError::Malformed("no message in the reply")),
    };
    message(data)
}

/// The reply's one gRPC message: uncompressed, its length as its prefix says.
pub(crate) fn message(mut data: Bytes) -> Result<Reply, UnaryError> {
    if data.len() < PREFIX {
        return Err(UnaryError::Malformed(
            "shorter than the 5-byte message prefix",
        ));
    }
    let compressed = data.get_u8();
    let len = data.get_u32() as usize;
    if compressed != 0 {
        return Err(UnaryError::Malformed(
            "compressed message (no compression was offered)",
        ));
    }
    if len != data.len() {
        return Err(UnaryError::Malformed(
            "message length differs from its prefix (or more than one message)",
        ));
    }
    Ok(Reply {
        message: data,
        arrived: None,
    })
}

/// OK, or the status as an error.
fn status(code: &http::HeaderValue, message: Option<&http::HeaderValue>) -> Result<(), UnaryError> {
    status_bytes(code.as_bytes(), message.map(|m| m.as_bytes()))
}

/// [`status`] from the header values' bytes.
pub(crate) fn status_bytes(code: &[u8], message: Option<&[u8]>) -> Result<(), UnaryError> {
    let code: u32 = std::str::from_utf8(code)
        .ok()
        .and_then(|c| c.trim().parse().ok())
        .ok_or(UnaryError::Malformed("grpc-status is not a number"))?;
    if code == 0 {
        return Ok(());
    }
    let message = message
        .and_then(|m| std::str::from_utf8(m).ok())
        .map(percent_decode)
        .unwrap_or_default();
    Err(UnaryError::Status { code, message })
}

/// grpc-message is percent-encoded (PROTOCOL-HTTP2.md); decoded leniently,
/// a bad escape kept as written.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

impl load::wire::WireSize for Reply {
    fn wire_size(&self) -> u64 {
        self.wire_len()
    }

    fn arrived(&self) -> Option<std::time::Instant> {
        self.arrived
    }
}

impl tower::Service<Bytes> for UnaryClient {
    type Response = Reply;
    type Error = UnaryError;
    type Future = futures::future::BoxFuture<'static, Result<Reply, UnaryError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Bytes) -> Self::Future {
        Box::pin(UnaryClient::call(self, req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_the_prefix() {
        let f = frame(b"abc");
        assert_eq!(&f[..], &[0, 0, 0, 0, 3, b'a', b'b', b'c']);
    }

    #[test]
    fn frame_message_is_the_prefix_and_the_encoding() {
        // Any prost message: a string field, and the empty message.
        let m = String::from("hello");
        let f = frame_message(&m);
        assert_eq!(&f[..], &frame(&prost::Message::encode_to_vec(&m))[..]);
        assert_eq!(f.len(), PREFIX + 7);
        assert_eq!(&frame_message(&String::new())[..], &[0, 0, 0, 0, 0]);
    }

    #[test]
    fn grpc_message_is_percent_decoded() {
        assert_eq!(percent_decode("a%20b%zz%"), "a b%zz%");
        assert_eq!(percent_decode("plain"), "plain");
    }
}
