//! Serving tonic routers: loopback by default, TCP_NODELAY on every accepted
//! connection (without it, Nagle's algorithm and delayed ACKs put the p99 of
//! small RPCs on loopback around 40 ms), graceful shutdown.

use futures::Stream;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use thiserror::Error;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::server::{Router, TcpIncoming};

/// The address servers bind to unless told otherwise.
pub const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A listener could not be opened.
#[derive(Debug, Error)]
pub enum BindError {
    #[error("cannot listen on {addr}: port {} is already in use (pick another port or stop the process using it)", addr.port())]
    InUse { addr: SocketAddr },
    #[error("cannot listen on {addr}: {source}")]
    Other { addr: SocketAddr, source: io::Error },
}

/// Accepted connections of one or more listeners.
type Incoming = std::pin::Pin<Box<dyn Stream<Item = io::Result<TcpStream>> + Send>>;

/// Bound listening sockets, ready to serve.
pub struct Bound {
    incoming: Incoming,
    /// The actual address (the port is filled in when 0 was asked for);
    /// for [`bind_loopback`], the IPv4 one.
    pub addr: SocketAddr,
    /// Every address listened on.
    pub addrs: Vec<SocketAddr>,
}

fn listen(addr: SocketAddr) -> Result<(TcpIncoming, SocketAddr), BindError> {
    let incoming = TcpIncoming::bind(addr).map_err(|source| match source.kind() {
        io::ErrorKind::AddrInUse => BindError::InUse { addr },
        _ => BindError::Other { addr, source },
    })?;
    let actual = incoming
        .local_addr()
        .map_err(|source| BindError::Other { addr, source })?;
    Ok((incoming.with_nodelay(Some(true)), actual))
}

/// Binds both loopback addresses, 127.0.0.1 and ::1, on one port (0 picks
/// a port free on both), so that clients reach the server whichever
/// `localhost` they resolve. Where the host has no IPv6 loopback the
/// server listens on 127.0.0.1 alone. Must run inside a tokio runtime.
pub fn bind_loopback(port: u16) -> Result<Bound, BindError> {
    let v6 = |p: u16| SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), p);
    // A free IPv4 port may be taken on ::1: try a few when the port is ours
    // to pick.
    let tries = if port == 0 { 8 } else { 1 };
    let mut last = None;
    for _ in 0..tries {
        let (a, addr) = listen(SocketAddr::new(LOOPBACK, port))?;
        match listen(v6(addr.port())) {
            Ok((b, addr6)) => {
                return Ok(Bound {
                    incoming: Box::pin(futures::stream::select(a, b)),
                    addr,
                    addrs: vec![addr, addr6],
                });
            }
            Err(BindError::Other { source, .. })
                if source.kind() == io::ErrorKind::AddrNotAvailable =>
            {
                return Ok(Bound {
                    incoming: Box::pin(a),
                    addr,
                    addrs: vec![addr],
                });
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(BindError::InUse { addr: v6(port) }))
}

/// Binds `addr`, except that the default loopback (127.0.0.1) means both
/// loopbacks, as [`bind_loopback`]: a server told to listen on loopback
/// answers whichever `localhost` its clients resolve. Any other address
/// (`::1`, `0.0.0.0`, a NIC's) is bound alone. Must run inside a tokio
/// runtime.
pub fn bind_or_loopback(addr: SocketAddr) -> Result<Bound, BindError> {
    if addr.ip() == LOOPBACK {
        bind_loopback(addr.port())
    } else {
        bind(addr)
    }
}

/// Binds `addr` (port 0 picks a free port). Must run inside a tokio runtime.
pub fn bind(addr: SocketAddr) -> Result<Bound, BindError> {
    let (incoming, actual) = listen(addr)?;
    Ok(Bound {
        incoming: Box::pin(incoming),
        addr: actual,
        addrs: vec![actual],
    })
}

/// A server running in the background.
pub struct Running {
    pub addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    handle: JoinHandle<Result<(), tonic::transport::Error>>,
}

/// Serves `router` on `bound` in a background task.
pub fn spawn(router: Router, bound: Bound) -> Running {
    let (tx, rx) = oneshot::channel::<()>();
    let handle = tokio::spawn(router.serve_with_incoming_shutdown(bound.incoming, async {
        let _ = rx.await;
    }));
    Running {
        addr: bound.addr,
        shutdown: Some(tx),
        handle,
    }
}

impl Running {
    /// Stops accepting, lets in-flight calls finish, and waits for the end.
    pub async fn shutdown(mut self) -> Result<(), tonic::transport::Error> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match (&mut self.handle).await {
            Ok(r) => r,
            Err(_) => Ok(()),
        }
    }

    /// True once the serving task has ended (it failed or was shut down).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
