//! A leaner gRPC unary client: HTTP/2 framing written here for the one
//! thing a load generator does (unary calls of one method), HPACK decoding
//! from `loona-hpack`.
//!
//! Why not the h2 crate ([`crate::unary`]): measured on one client core
//! against h2load (`bench/loadgen_capacity.py`, issue 47), the h2 crate's
//! general stream machinery (per-stream state behind a shared lock, a
//! `Request`/`HeaderMap` per call, HPACK encoding per call, a task wake-up
//! per stream event) and the allocations it makes were most of the client's
//! user-space CPU per request. Here a connection is one task that owns its
//! socket: a call is queued with its reply channel, the task writes every
//! queued call's frames in one write (header blocks from [`crate::hpack`]:
//! after a connection's first request, its fields are named by their index
//! in the server's table), reads every frame the socket has, and completes
//! each stream on its trailers.
//!
//! HTTP/2 as RFC 9113 asks of a client: the preface and SETTINGS (and their
//! ACK), PING replies, both directions' flow control (send windows from the
//! peer's SETTINGS and WINDOW_UPDATEs, receive windows replenished at half),
//! the peer's MAX_CONCURRENT_STREAMS (calls past it wait their turn) and
//! MAX_FRAME_SIZE, CONTINUATION, padding, RST_STREAM and GOAWAY. gRPC's
//! conventions are [`crate::unary`]'s, and so are its errors.

use crate::hpack::{Encoder, RequestHead};
use crate::unary::{H2Settings, Reply, UnaryError, message, status_bytes};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::task::AtomicWaker;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// RFC 9113's defaults, until the peer's SETTINGS say otherwise.
const DEFAULT_WINDOW: i64 = 65_535;
const DEFAULT_FRAME: usize = 16_384;
const MAX_WINDOW: i64 = (1 << 31) - 1;

// Frame types and flags (RFC 9113 section 6).
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// RST_STREAM's CANCEL code: the stream's reply came before its request
/// was all sent.
const CANCEL: u32 = 0x8;

/// A pool of lean HTTP/2 connections to one server calling one method;
/// each call goes to the connection with the fewest calls in flight, as
/// [`crate::unary::UnaryClient`] does. Cloning is cheap.
#[derive(Clone)]
pub struct LeanClient {
    inner: Arc<Inner>,
}

struct Inner {
    conns: Arc<[Conn]>,
    authority: String,
    /// The request's header fields, encoded by each connection.
    head: Arc<RequestHead>,
}

struct Conn {
    shared: Arc<Shared>,
    in_flight: Arc<AtomicUsize>,
    /// Wakes the connection's task when the last handle goes.
    _handle: Handle,
}

/// What callers and a connection's task share: the calls not yet taken.
struct Shared {
    queue: Mutex<Queue>,
    waker: AtomicWaker,
}

#[derive(Default)]
struct Queue {
    calls: Vec<Call>,
    /// Set once the connection has failed or closed: later calls fail so.
    closed: Option<UnaryError>,
    /// Every client handle is gone.
    dropped: bool,
}

struct Handle(Arc<Shared>);

impl Drop for Handle {
    fn drop(&mut self) {
        lock(&self.0.queue).dropped = true;
        self.0.waker.wake();
    }
}

struct Call {
    head: Arc<RequestHead>,
    body: Bytes,
    reply: oneshot::Sender<Result<Reply, UnaryError>>,
}

/// The queue's lock; a panic while holding it cannot leave it half-changed
/// (pushes and swaps only), so a poisoned lock is used as it is.
fn lock(m: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl LeanClient {
    /// Opens `connections` TCP connections (TCP_NODELAY) to `addr` for the
    /// method at `path`, with [`H2Settings::default`].
    pub async fn connect(
        addr: SocketAddr,
        connections: usize,
        path: &str,
    ) -> Result<Self, UnaryError> {
        Self::connect_with(addr, connections, path, H2Settings::default()).await
    }

    /// [`LeanClient::connect`] with the given HTTP/2 settings. Each
    /// connection's task runs on the current tokio runtime.
    pub async fn connect_with(
        addr: SocketAddr,
        connections: usize,
        path: &str,
        settings: H2Settings,
    ) -> Result<Self, UnaryError> {
        check_path(path)?;
        let mut conns = Vec::with_capacity(connections.max(1));
        for _ in 0..connections.max(1) {
            let tcp = crate::unary::connect_tcp(addr).await?;
            crate::rxstamp::enable(&tcp);
            let shared = Arc::new(Shared {
                queue: Mutex::new(Queue::default()),
                waker: AtomicWaker::new(),
            });
            let mut task = Task::new(tcp, shared.clone(), settings);
            tokio::spawn(async move { std::future::poll_fn(|cx| task.poll(cx)).await });
            conns.push(Conn {
                _handle: Handle(shared.clone()),
                shared,
                in_flight: Arc::new(AtomicUsize::new(0)),
            });
        }
        let authority = addr.to_string();
        Ok(LeanClient {
            inner: Arc::new(Inner {
                head: Arc::new(RequestHead::new(&authority, path)),
                authority,
                conns: conns.into(),
            }),
        })
    }

    /// The same connections, calling the method at `path` instead.
    pub fn with_path(&self, path: &str) -> Result<Self, UnaryError> {
        check_path(path)?;
        Ok(LeanClient {
            inner: Arc::new(Inner {
                conns: self.inner.conns.clone(),
                head: Arc::new(RequestHead::new(&self.inner.authority, path)),
                authority: self.inner.authority.clone(),
            }),
        })
    }

    /// Connections in the pool.
    pub fn connections(&self) -> usize {
        self.inner.conns.len()
    }

    /// One unary call with a framed request ([`crate::unary::frame`]).
    pub fn call(&self, request: Bytes) -> impl Future<Output = Result<Reply, UnaryError>> + use<> {
        let inner = &*self.inner;
        let (conn, busy) = crate::unary::least_busy(&inner.conns, |c| &c.in_flight);
        let (tx, rx) = oneshot::channel();
        let refused = {
            let mut q = lock(&conn.shared.queue);
            match &q.closed {
                Some(e) => Some(e.clone()),
                None => {
                    q.calls.push(Call {
                        head: inner.head.clone(),
                        body: request,
                        reply: tx,
                    });
                    None
                }
            }
        };
        if refused.is_none() {
            conn.shared.waker.wake();
        }
        async move {
            let _busy = busy;
            if let Some(e) = refused {
                return Err(e);
            }
            rx.await.unwrap_or_else(|_| {
                Err(UnaryError::Transport("the connection's task ended".into()))
            })
        }
    }
}

impl tower::Service<Bytes> for LeanClient {
    type Response = Reply;
    type Error = UnaryError;
    type Future = futures::future::BoxFuture<'static, Result<Reply, UnaryError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Bytes) -> Self::Future {
        Box::pin(LeanClient::call(self, req))
    }
}

fn check_path(path: &str) -> Result<(), UnaryError> {
    // The path goes on the wire as written: a bad one is refused here, as
    // the h2 client's URI parser does.
    if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b >= 0x7f) {
        return Err(UnaryError::Transport(format!(
            "bad method path {path:?}: expected /package.Service/Method"
        )));
    }
    Ok(())
}

fn put_head(b: &mut BytesMut, len: usize, kind: u8, flags: u8, stream: u32) {
    b.put_uint(len as u64, 3);
    b.put_u8(kind);
    b.put_u8(flags);
    b.put_u32(stream);
}

/// One stream in flight.
struct Stream {
    reply: Option<oneshot::Sender<Result<Reply, UnaryError>>>,
    /// The request's body not yet sent (flow control).
    unsent: Bytes,
    send_window: i64,
    got_headers: bool,
    first: Option<Bytes>,
    rest: Option<BytesMut>,
    recv_unacked: u32,
}

/// What a header block says, of what a unary call reads. The values every
/// successful call carries (`200`, `0`) are kept without an allocation.
#[derive(Default)]
struct Fields {
    status: Option<Cow<'static, [u8]>>,
    grpc_status: Option<Cow<'static, [u8]>>,
    grpc_message: Option<Vec<u8>>,
}

/// `value`, borrowed from `usual` when it is that.
fn kept(value: Cow<'_, [u8]>, usual: &'static [u8]) -> Cow<'static, [u8]> {
    if *value == *usual {
        Cow::Borrowed(usual)
    } else {
        Cow::Owned(value.into_owned())
    }
}

/// A connection's task: its socket, its streams and both directions' state.
struct Task {
    io: TcpStream,
    shared: Arc<Shared>,
    rbuf: BytesMut,
    /// When the last read's bytes arrived (the kernel's stamp): replies
    /// completed by that read end there.
    arrived: Option<std::time::Instant>,
    wbuf: BytesMut,
    hpack: loona_hpack::Decoder<'static>,
    /// Request header blocks, and the one being written.
    encoder: Encoder,
    block: BytesMut,
    streams: HashMap<u32, Stream>,
    waiting: VecDeque<Call>,
    /// Streams with body left and no window to send it.
    blocked: Vec<u32>,
    next_id: u32,
    conn_send_window: i64,
    peer_stream_window: i64,
    peer_max_frame: usize,
    peer_max_streams: usize,
    /// Our limits: the largest frame we accept and our receive windows.
    max_frame: usize,
    stream_window: u32,
    conn_window: u32,
    conn_recv_unacked: u32,
    /// A header block continued in CONTINUATION frames: stream, block, END_STREAM.
    continued: Option<(u32, BytesMut, bool)>,
    goaway: bool,
}

impl Task {
    fn new(io: TcpStream, shared: Arc<Shared>, s: H2Settings) -> Self {
        let max_frame = s.max_frame.map_or(DEFAULT_FRAME, |f| f as usize);
        let mut wbuf = BytesMut::with_capacity(64 * 1024);
        wbuf.put_slice(PREFACE);
        let n = if s.max_frame.is_some() { 3 } else { 2 };
        put_head(&mut wbuf, 6 * n, SETTINGS, 0, 0);
        wbuf.put_u16(0x2); // ENABLE_PUSH
        wbuf.put_u32(0);
        wbuf.put_u16(0x4); // INITIAL_WINDOW_SIZE
        wbuf.put_u32(s.stream_window);
        if let Some(f) = s.max_frame {
            wbuf.put_u16(0x5); // MAX_FRAME_SIZE
            wbuf.put_u32(f);
        }
        let grow = i64::from(s.connection_window) - DEFAULT_WINDOW;
        if grow > 0 {
            put_head(&mut wbuf, 4, WINDOW_UPDATE, 0, 0);
            wbuf.put_u32(grow as u32);
        }
        Task {
            io,
            shared,
            rbuf: BytesMut::with_capacity(64 * 1024),
            arrived: None,
            wbuf,
            hpack: loona_hpack::Decoder::new(),
            encoder: Encoder::new(),
            block: BytesMut::with_capacity(256),
            streams: HashMap::new(),
            waiting: VecDeque::new(),
            blocked: Vec::new(),
            next_id: 1,
            conn_send_window: DEFAULT_WINDOW,
            peer_stream_window: DEFAULT_WINDOW,
            peer_max_frame: DEFAULT_FRAME,
            peer_max_streams: usize::MAX,
            max_frame,
            stream_window: s.stream_window,
            conn_window: s.connection_window.max(DEFAULT_WINDOW as u32),
            conn_recv_unacked: 0,
            continued: None,
            goaway: false,
        }
    }

    /// Runs until the connection fails or every handle is gone and no call
    /// is in flight.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // Rounds before yielding to the runtime's other tasks.
        for _ in 0..32 {
            self.shared.waker.register(cx.waker());
            let dropped = {
                let mut q = lock(&self.shared.queue);
                self.waiting.extend(q.calls.drain(..));
                q.dropped
            };
            self.start_waiting();
            if dropped && self.streams.is_empty() && self.waiting.is_empty() {
                return Poll::Ready(());
            }
            if let Err(e) = self.flush(cx) {
                self.fail(e);
                return Poll::Ready(());
            }
            match self.read(cx) {
                Poll::Ready(Ok(())) => continue,
                Poll::Ready(Err(e)) => {
                    self.fail(e);
                    return Poll::Ready(());
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Writes what is buffered, until the socket takes no more.
    fn flush(&mut self, cx: &mut Context<'_>) -> Result<(), UnaryError> {
        while !self.wbuf.is_empty() {
            match self.io.poll_write_ready(cx) {
                Poll::Pending => return Ok(()),
                Poll::Ready(Err(e)) => return Err(transport("writing", e)),
                Poll::Ready(Ok(())) => match self.io.try_write(&self.wbuf) {
                    Ok(0) => return Err(UnaryError::Transport("the socket took no bytes".into())),
                    Ok(n) => self.wbuf.advance(n),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(transport("writing", e)),
                },
            }
        }
        Ok(())
    }

    /// Reads what the socket has and handles every whole frame in it.
    fn read(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), UnaryError>> {
        loop {
            match self.io.poll_read_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(transport("reading", e))),
                Poll::Ready(Ok(())) => {}
            }
            self.rbuf.reserve(self.room_wanted());
            let (io, rbuf) = (&self.io, &mut self.rbuf);
            let read = io.try_io(tokio::io::Interest::READABLE, || {
                crate::rxstamp::recv(io, rbuf)
            });
            match read.map(|(n, at)| {
                self.arrived = at;
                n
            }) {
                Ok(0) => {
                    return Poll::Ready(Err(UnaryError::Transport(
                        "the server closed the connection".into(),
                    )));
                }
                Ok(_) => return Poll::Ready(self.frames()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(transport("reading", e))),
            }
        }
    }

    /// Room to ask of the read buffer: what the frame begun in it still
    /// needs, and at least 16 KiB. Not the largest frame allowed: with
    /// replies still holding parts of the buffer, reserving a 1 MiB frame's
    /// room on every read would allocate a new megabyte each time.
    fn room_wanted(&self) -> usize {
        let need = match &self.rbuf[..] {
            [a, b, c, ..] => (usize::from(*a) << 16 | usize::from(*b) << 8 | usize::from(*c)) + 9,
            _ => 0,
        };
        need.saturating_sub(self.rbuf.len()).max(16 * 1024)
    }

    /// Starts the calls that wait, as far as the peer's stream limit allows.
    fn start_waiting(&mut self) {
        while self.streams.len() < self.peer_max_streams {
            let Some(call) = self.waiting.pop_front() else {
                return;
            };
            if self.goaway || self.next_id > MAX_WINDOW as u32 {
                let _ = call.reply.send(Err(UnaryError::Transport(
                    "the connection takes no new streams".into(),
                )));
                continue;
            }
            let id = self.next_id;
            self.next_id += 2;
            self.block.clear();
            self.encoder.encode(&call.head, &mut self.block);
            let mut block = &self.block[..];
            let mut kind = HEADERS;
            loop {
                let n = block.len().min(self.peer_max_frame);
                let last = n == block.len();
                put_head(
                    &mut self.wbuf,
                    n,
                    kind,
                    if last { END_HEADERS } else { 0 },
                    id,
                );
                self.wbuf.put_slice(&block[..n]);
                block = &block[n..];
                kind = CONTINUATION;
                if last {
                    break;
                }
            }
            self.streams.insert(
                id,
                Stream {
                    reply: Some(call.reply),
                    unsent: call.body,
                    send_window: self.peer_stream_window,
                    got_headers: false,
                    first: None,
                    rest: None,
                    recv_unacked: 0,
                },
            );
            self.send_body(id);
        }
    }

    /// Sends as much of a stream's body as the windows allow; what is left
    /// waits for a WINDOW_UPDATE.
    fn send_body(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        loop {
            let room = self.conn_send_window.min(s.send_window).max(0) as usize;
            let n = s.unsent.len().min(room).min(self.peer_max_frame);
            if n == 0 && !s.unsent.is_empty() {
                if !self.blocked.contains(&id) {
                    self.blocked.push(id);
                }
                return;
            }
            let last = n == s.unsent.len();
            put_head(
                &mut self.wbuf,
                n,
                DATA,
                if last { END_STREAM } else { 0 },
                id,
            );
            self.wbuf.put_slice(&s.unsent[..n]);
            s.unsent.advance(n);
            s.send_window -= n as i64;
            self.conn_send_window -= n as i64;
            if last {
                return;
            }
        }
    }

    fn unblock(&mut self) {
        for id in std::mem::take(&mut self.blocked) {
            self.send_body(id);
        }
    }

    /// Handles every whole frame in the read buffer.
    fn frames(&mut self) -> Result<(), UnaryError> {
        while self.rbuf.len() >= 9 {
            let len = (usize::from(self.rbuf[0]) << 16)
                | (usize::from(self.rbuf[1]) << 8)
                | usize::from(self.rbuf[2]);
            if len > self.max_frame {
                return Err(protocol(format!(
                    "a frame of {len} bytes, more than the {} the client accepts",
                    self.max_frame
                )));
            }
            if self.rbuf.len() < 9 + len {
                return Ok(());
            }
            let mut head = self.rbuf.split_to(9);
            let payload = self.rbuf.split_to(len).freeze();
            head.advance(3);
            let kind = head.get_u8();
            let flags = head.get_u8();
            let id = head.get_u32() & 0x7fff_ffff;
            if let Some((cid, _, _)) = &self.continued
                && (kind != CONTINUATION || *cid != id)
            {
                return Err(protocol("a header block interrupted before its end"));
            }
            self.frame(kind, flags, id, payload)?;
        }
        Ok(())
    }

    fn frame(&mut self, kind: u8, flags: u8, id: u32, mut p: Bytes) -> Result<(), UnaryError> {
        match kind {
            DATA => self.data(flags, id, p)?,
            HEADERS => {
                let mut block = unpad(p, flags)?;
                if flags & PRIORITY != 0 {
                    if block.len() < 5 {
                        return Err(protocol("a HEADERS frame shorter than its priority"));
                    }
                    block.advance(5);
                }
                let end = flags & END_STREAM != 0;
                if flags & END_HEADERS != 0 {
                    self.headers(id, &block, end)?;
                } else {
                    self.continued = Some((id, BytesMut::from(&block[..]), end));
                }
            }
            CONTINUATION => {
                let Some((cid, mut block, end)) = self.continued.take() else {
                    return Err(protocol("CONTINUATION without a header block"));
                };
                block.put_slice(&p);
                if flags & END_HEADERS != 0 {
                    self.headers(cid, &block, end)?;
                } else {
                    self.continued = Some((cid, block, end));
                }
            }
            RST_STREAM => {
                if p.len() != 4 {
                    return Err(protocol("RST_STREAM not 4 bytes long"));
                }
                let code = p.get_u32();
                self.finish(
                    id,
                    Err(UnaryError::Transport(format!(
                        "stream reset by the server: {}",
                        reason(code)
                    ))),
                );
            }
            SETTINGS if flags & ACK == 0 => self.settings(p)?,
            PING if flags & ACK == 0 => {
                if p.len() != 8 {
                    return Err(protocol("PING not 8 bytes long"));
                }
                put_head(&mut self.wbuf, 8, PING, ACK, 0);
                self.wbuf.put_slice(&p);
            }
            GOAWAY => {
                if p.len() < 8 {
                    return Err(protocol("GOAWAY shorter than 8 bytes"));
                }
                let last = p.get_u32() & 0x7fff_ffff;
                let code = p.get_u32();
                self.goaway = true;
                let why = format!(
                    "the server closed the connection (GOAWAY, {}{})",
                    reason(code),
                    if p.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", String::from_utf8_lossy(&p))
                    }
                );
                let gone: Vec<u32> = self.streams.keys().copied().filter(|&i| i > last).collect();
                for i in gone {
                    self.finish(i, Err(UnaryError::Transport(why.clone())));
                }
                lock(&self.shared.queue).closed = Some(UnaryError::Transport(why));
            }
            WINDOW_UPDATE => {
                if p.len() != 4 {
                    return Err(protocol("WINDOW_UPDATE not 4 bytes long"));
                }
                let inc = i64::from(p.get_u32() & 0x7fff_ffff);
                if id == 0 {
                    self.conn_send_window += inc;
                    if self.conn_send_window > MAX_WINDOW {
                        return Err(protocol("the connection's send window above 2^31-1"));
                    }
                } else if let Some(s) = self.streams.get_mut(&id) {
                    s.send_window += inc;
                }
                self.unblock();
            }
            PUSH_PROMISE => return Err(protocol("PUSH_PROMISE, though push was disabled")),
            _ => {} // PRIORITY and unknown types are ignored (RFC 9113 section 5.5).
        }
        Ok(())
    }

    /// A DATA frame: counted against both receive windows (replenished at
    /// half), its content added to its stream's message.
    fn data(&mut self, flags: u8, id: u32, p: Bytes) -> Result<(), UnaryError> {
        let len = p.len() as u32;
        self.conn_recv_unacked += len;
        if self.conn_recv_unacked >= self.conn_window / 2 {
            put_head(&mut self.wbuf, 4, WINDOW_UPDATE, 0, 0);
            self.wbuf.put_u32(self.conn_recv_unacked);
            self.conn_recv_unacked = 0;
        }
        let data = unpad(p, flags)?;
        let end = flags & END_STREAM != 0;
        let Some(s) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        if !s.got_headers {
            return Err(protocol("DATA before the response's headers"));
        }
        match (&mut s.first, &mut s.rest) {
            (None, _) => s.first = Some(data),
            (Some(f), None) => {
                let mut b = BytesMut::with_capacity(f.len() + data.len());
                b.put_slice(f);
                b.put_slice(&data);
                s.rest = Some(b);
            }
            (Some(_), Some(b)) => b.put_slice(&data),
        }
        if end {
            self.finish(
                id,
                Err(UnaryError::Malformed(
                    "no trailers (grpc-status) after the message",
                )),
            );
        } else {
            s.recv_unacked += len;
            if s.recv_unacked >= self.stream_window / 2 {
                put_head(&mut self.wbuf, 4, WINDOW_UPDATE, 0, id);
                self.wbuf.put_u32(s.recv_unacked);
                s.recv_unacked = 0;
            }
        }
        Ok(())
    }

    /// The peer's SETTINGS: its stream limit, initial stream window (every
    /// open stream's send window moves by the change) and frame size.
    fn settings(&mut self, mut p: Bytes) -> Result<(), UnaryError> {
        if !p.len().is_multiple_of(6) {
            return Err(protocol("SETTINGS not a multiple of 6 bytes long"));
        }
        while p.has_remaining() {
            let key = p.get_u16();
            let v = p.get_u32();
            match key {
                0x1 => self.encoder.peer_limit(v),
                0x3 => self.peer_max_streams = v as usize,
                0x4 => {
                    if i64::from(v) > MAX_WINDOW {
                        return Err(protocol("INITIAL_WINDOW_SIZE above 2^31-1"));
                    }
                    let delta = i64::from(v) - self.peer_stream_window;
                    self.peer_stream_window = i64::from(v);
                    for s in self.streams.values_mut() {
                        s.send_window += delta;
                    }
                }
                0x5 => {
                    if !(16_384..=16_777_215).contains(&v) {
                        return Err(protocol("MAX_FRAME_SIZE out of range"));
                    }
                    self.peer_max_frame = v as usize;
                }
                _ => {}
            }
        }
        put_head(&mut self.wbuf, 0, SETTINGS, ACK, 0);
        self.unblock();
        Ok(())
    }

    /// A whole header block of stream `id`: the response's headers, or its
    /// trailers.
    fn headers(&mut self, id: u32, block: &[u8], end: bool) -> Result<(), UnaryError> {
        // Every block is decoded, a stream's or not: each may change the
        // decoder's table.
        let mut f = Fields::default();
        self.hpack
            .decode_with_cb(block, |name, value| match &name[..] {
                b":status" => f.status = Some(kept(value, b"200")),
                b"grpc-status" => f.grpc_status = Some(kept(value, b"0")),
                b"grpc-message" => f.grpc_message = Some(value.into_owned()),
                _ => {}
            })
            .map_err(|e| protocol(format!("a header block HPACK cannot decode: {e}")))?;
        let Some(s) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        let result =
            if !s.got_headers {
                match f.status.as_deref() {
                    Some(b"200") => {}
                    Some(code) => {
                        let code = std::str::from_utf8(code)
                            .ok()
                            .and_then(|c| c.parse().ok())
                            .unwrap_or(0);
                        self.finish(id, Err(UnaryError::Http(code)));
                        return Ok(());
                    }
                    None => return Err(protocol("a response without :status")),
                }
                match f.grpc_status {
                    // A trailers-only response carries the status in the headers.
                    Some(code) => status_bytes(&code, f.grpc_message.as_deref())
                        .and(Err(UnaryError::Malformed("no message in the reply"))),
                    None if end => Err(UnaryError::Malformed(
                        "no trailers (grpc-status) after the message",
                    )),
                    None => {
                        s.got_headers = true;
                        return Ok(());
                    }
                }
            } else {
                match f.grpc_status {
                    None => Err(UnaryError::Malformed("no grpc-status in the trailers")),
                    Some(code) => status_bytes(&code, f.grpc_message.as_deref()).and_then(|()| {
                        match (s.first.take(), s.rest.take()) {
                            (_, Some(b)) => message(b.freeze()),
                            (Some(f), None) => message(f),
                            (None, None) => Err(UnaryError::Malformed("no message in the reply")),
                        }
                    }),
                }
            };
        self.finish(id, result);
        Ok(())
    }

    /// Ends stream `id` with `result`; a request body still unsent is
    /// cancelled.
    fn finish(&mut self, id: u32, result: Result<Reply, UnaryError>) {
        let Some(mut s) = self.streams.remove(&id) else {
            return;
        };
        if !s.unsent.is_empty() {
            self.blocked.retain(|&b| b != id);
            put_head(&mut self.wbuf, 4, RST_STREAM, 0, id);
            self.wbuf.put_u32(CANCEL);
        }
        if let Some(r) = s.reply.take() {
            let _ = r.send(result.map(|reply| Reply {
                arrived: self.arrived,
                ..reply
            }));
        }
    }

    /// The connection is gone: every call in flight, waiting or queued
    /// fails with `e`, and so does every later one.
    fn fail(&mut self, e: UnaryError) {
        let queued = {
            let mut q = lock(&self.shared.queue);
            q.closed.get_or_insert_with(|| e.clone());
            std::mem::take(&mut q.calls)
        };
        for (_, mut s) in self.streams.drain() {
            if let Some(r) = s.reply.take() {
                let _ = r.send(Err(e.clone()));
            }
        }
        for c in self.waiting.drain(..).chain(queued) {
            let _ = c.reply.send(Err(e.clone()));
        }
    }
}

/// A frame's payload without its padding (the PADDED flag's length byte
/// and the padding after the content).
fn unpad(mut p: Bytes, flags: u8) -> Result<Bytes, UnaryError> {
    if flags & PADDED == 0 {
        return Ok(p);
    }
    if p.is_empty() {
        return Err(protocol("a padded frame without its pad length"));
    }
    let pad = usize::from(p.get_u8());
    if pad > p.len() {
        return Err(protocol("padding longer than the frame"));
    }
    p.truncate(p.len() - pad);
    Ok(p)
}

fn protocol(what: impl Into<String>) -> UnaryError {
    UnaryError::Transport(format!("HTTP/2 protocol error: {}", what.into()))
}

fn transport(doing: &str, e: std::io::Error) -> UnaryError {
    UnaryError::Transport(format!("{doing} the connection: {e}"))
}

/// An HTTP/2 error code's name (RFC 9113 section 7).
fn reason(code: u32) -> String {
    let name = match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => return format!("error code {code:#x}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_is_removed_and_bad_padding_refused() {
        let p = Bytes::from_static(&[2, b'a', b'b', 0, 0]);
        assert_eq!(&unpad(p, PADDED).unwrap()[..], b"ab");
        assert!(unpad(Bytes::from_static(&[9, b'a']), PADDED).is_err());
        assert!(unpad(Bytes::new(), PADDED).is_err());
    }
}
