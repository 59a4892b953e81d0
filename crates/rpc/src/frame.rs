//! Multiplexed request/response frames over plain TCP: a lighter RPC
//! transport than gRPC (no HTTP/2, no per-call headers), for drivers that
//! want to measure the network and the service rather than the RPC stack.
//!
//! Every frame is `length: u32 LE | id: u64 LE | body`, `length` counting
//! the id and the body. A client sends requests with fresh ids over one
//! connection and matches responses by id, so many calls are in flight at
//! once and answers may come back in any order; the server runs a handler
//! per request concurrently. Writes are batched: a writer task flushes when
//! it has nothing more queued. TCP_NODELAY is set on both sides.

use bytes::{Buf, Bytes, BytesMut};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Largest frame accepted (a bad length is an error, not an allocation).
pub const MAX_FRAME: usize = 256 << 20;

/// What a server does with one request body.
pub type Handler = Arc<dyn Fn(Bytes) -> BoxFuture<'static, Bytes> + Send + Sync>;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection to {0} closed")]
    Closed(SocketAddr),
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: SocketAddr, source: io::Error },
}

async fn read_frame<R: AsyncReadExt + Unpin>(r: &mut R) -> io::Result<Option<(u64, Bytes)>> {
    let len = match r.read_u32_le().await {
        Ok(n) => n as usize,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    };
    if !(8..=MAX_FRAME).contains(&len) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame length {len} outside 8..={MAX_FRAME}"),
        ));
    }
    let mut buf = BytesMut::zeroed(len);
    r.read_exact(&mut buf).await?;
    let id = buf.get_u64_le();
    Ok(Some((id, buf.freeze())))
}

async fn write_frame<W: AsyncWriteExt + Unpin>(w: &mut W, id: u64, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len() + 8)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    w.write_u32_le(len).await?;
    w.write_u64_le(id).await?;
    w.write_all(body).await
}

/// Writes queued frames, flushing whenever the queue is empty.
async fn writer(
    mut w: BufWriter<tokio::net::tcp::OwnedWriteHalf>,
    mut rx: mpsc::UnboundedReceiver<(u64, Bytes)>,
) {
    while let Some((id, body)) = rx.recv().await {
        if write_frame(&mut w, id, &body).await.is_err() {
            return;
        }
        while let Ok((id, body)) = rx.try_recv() {
            if write_frame(&mut w, id, &body).await.is_err() {
                return;
            }
        }
        if w.flush().await.is_err() {
            return;
        }
    }
}

/// A running frame server.
pub struct FrameServer {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl FrameServer {
    /// Listens on `addr` (port 0 picks one) and serves every connection.
    /// Must run inside a tokio runtime.
    pub async fn bind(
        addr: SocketAddr,
        handler: Handler,
    ) -> Result<FrameServer, crate::server::BindError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| match source.kind() {
                io::ErrorKind::AddrInUse => crate::server::BindError::InUse { addr },
                _ => crate::server::BindError::Other { addr, source },
            })?;
        let actual = listener
            .local_addr()
            .map_err(|source| crate::server::BindError::Other { addr, source })?;
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve_connection(stream, handler.clone()));
            }
        });
        Ok(FrameServer { addr: actual, task })
    }

    /// Stops accepting connections (open ones end with their clients).
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for FrameServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_connection(stream: TcpStream, handler: Handler) {
    let (r, w) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(writer(BufWriter::new(w), rx));
    let mut r = BufReader::new(r);
    while let Ok(Some((id, body))) = read_frame(&mut r).await {
        let tx = tx.clone();
        let h = handler.clone();
        tokio::spawn(async move {
            let resp = h(body).await;
            let _ = tx.send((id, resp));
        });
    }
    drop(tx);
    let _ = writer.await;
}

type Pending = Arc<Mutex<Option<HashMap<u64, oneshot::Sender<Bytes>>>>>;

/// One connection carrying many concurrent calls.
pub struct FrameClient {
    addr: SocketAddr,
    next: AtomicU64,
    tx: mpsc::UnboundedSender<(u64, Bytes)>,
    pending: Pending,
    reader: JoinHandle<()>,
}

impl FrameClient {
    /// Connects to a [`FrameServer`].
    pub async fn connect(addr: SocketAddr) -> Result<FrameClient, FrameError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| FrameError::Connect { addr, source })?;
        let _ = stream.set_nodelay(true);
        let (r, w) = stream.into_split();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(writer(BufWriter::new(w), rx));
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let p = pending.clone();
        let reader = tokio::spawn(async move {
            let mut r = BufReader::new(r);
            while let Ok(Some((id, body))) = read_frame(&mut r).await {
                let waiter = p
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_mut()
                    .and_then(|m| m.remove(&id));
                if let Some(w) = waiter {
                    let _ = w.send(body);
                }
            }
            // The connection is gone: fail every waiting call, and the
            // ones that come later.
            p.lock().unwrap_or_else(|e| e.into_inner()).take();
        });
        Ok(FrameClient {
            addr,
            next: AtomicU64::new(0),
            tx,
            pending,
            reader,
        })
    }

    /// Sends `body` and waits for the response.
    pub fn call(
        &self,
        body: Bytes,
    ) -> impl std::future::Future<Output = Result<Bytes, FrameError>> + Send + 'static {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (otx, orx) = oneshot::channel();
        let registered = match self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            Some(m) => {
                m.insert(id, otx);
                true
            }
            None => false,
        };
        let sent = registered && self.tx.send((id, body)).is_ok();
        let addr = self.addr;
        async move {
            if !sent {
                return Err(FrameError::Closed(addr));
            }
            orx.await.map_err(|_| FrameError::Closed(addr))
        }
    }
}

impl Drop for FrameClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_calls_match_their_answers() {
        // The handler answers after a delay inversely related to the
        // request, so answers come back out of order.
        let handler: Handler = Arc::new(|body: Bytes| {
            Box::pin(async move {
                let n = body[0];
                tokio::time::sleep(Duration::from_millis(u64::from(50 - n))).await;
                let mut v = body.to_vec();
                v.push(n.wrapping_mul(3));
                Bytes::from(v)
            })
        });
        let server = FrameServer::bind("127.0.0.1:0".parse().unwrap(), handler)
            .await
            .unwrap();
        let client = FrameClient::connect(server.addr).await.unwrap();
        let calls: Vec<_> = (0..50u8)
            .map(|n| client.call(Bytes::from(vec![n; 1 + n as usize])))
            .collect();
        let answers = futures::future::join_all(calls).await;
        for (n, a) in answers.into_iter().enumerate() {
            let a = a.unwrap();
            assert_eq!(a.len(), n + 2);
            assert_eq!(a[a.len() - 1], (n as u8).wrapping_mul(3));
        }
        // A large body crosses in one piece.
        let big = client.call(Bytes::from(vec![1u8; 3 << 20])).await.unwrap();
        assert_eq!(big.len(), (3 << 20) + 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_server_fails_pending_and_later_calls() {
        let handler: Handler = Arc::new(|_b: Bytes| {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Bytes::new()
            })
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // A server that accepts one connection, reads a little, then drops it.
        let t = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut b = [0u8; 4];
            let _ = s.read_exact(&mut b).await;
        });
        drop(handler);
        let client = FrameClient::connect(addr).await.unwrap();
        let pending = client.call(Bytes::from_static(b"hello"));
        t.await.unwrap();
        let err = tokio::time::timeout(Duration::from_secs(5), pending)
            .await
            .unwrap()
            .unwrap_err();
        assert!(matches!(err, FrameError::Closed(_)), "{err}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(client.call(Bytes::from_static(b"again")).await.is_err());
        assert!(matches!(
            FrameClient::connect(addr).await,
            Err(FrameError::Connect { .. })
        ));
    }
}
