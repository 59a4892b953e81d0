//! Serving tonic routers: loopback by default, TCP_NODELAY on every accepted
//! connection (without it, Nagle's algorithm and delayed ACKs put the p99 of
//! small RPCs on loopback around 40 ms), graceful shutdown.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use thiserror::Error;
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

/// A bound listening socket, ready to serve.
pub struct Bound {
    incoming: TcpIncoming,
    /// The actual address (the port is filled in when 0 was asked for).
    pub addr: SocketAddr,
}

/// Binds `addr` (port 0 picks a free port). Must run inside a tokio runtime.
pub fn bind(addr: SocketAddr) -> Result<Bound, BindError> {
    let incoming = TcpIncoming::bind(addr).map_err(|source| match source.kind() {
        io::ErrorKind::AddrInUse => BindError::InUse { addr },
        _ => BindError::Other { addr, source },
    })?;
    let actual = incoming
        .local_addr()
        .map_err(|source| BindError::Other { addr, source })?;
    Ok(Bound {
        incoming: incoming.with_nodelay(Some(true)),
        addr: actual,
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
