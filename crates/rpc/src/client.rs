//! Client channels and pools.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};
use tower::{Service, ServiceExt};

/// Connects one HTTP/2 channel to `addr` with TCP_NODELAY.
pub async fn connect(addr: SocketAddr) -> Result<Channel, tonic::transport::Error> {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("a socket address is a valid URI authority")
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
}

/// Connects `n` independent channels (one TCP connection each) to `addr`.
pub async fn connect_pool(
    addr: SocketAddr,
    n: usize,
) -> Result<Pool<Channel>, tonic::transport::Error> {
    let mut channels = Vec::with_capacity(n.max(1));
    for _ in 0..n.max(1) {
        channels.push(connect(addr).await?);
    }
    Ok(Pool::new(channels))
}

/// Round-robins calls over several services, e.g. several HTTP/2 connections,
/// so one connection's stream limit or single-threaded framing does not cap
/// the load generator.
pub struct Pool<S> {
    members: Arc<[S]>,
    next: Arc<AtomicUsize>,
}

impl<S> Clone for Pool<S> {
    fn clone(&self) -> Self {
        Pool {
            members: self.members.clone(),
            next: self.next.clone(),
        }
    }
}

impl<S> Pool<S> {
    /// A pool over `members` (at least one).
    pub fn new(members: Vec<S>) -> Self {
        assert!(!members.is_empty(), "a pool needs at least one member");
        Pool {
            members: members.into(),
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

impl<S, R> Service<R> for Pool<S>
where
    S: Service<R> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    R: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is awaited per call on the chosen member.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: R) -> Self::Future {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.members.len();
        let member = self.members[i].clone();
        Box::pin(async move { member.ready_oneshot().await?.call(req).await })
    }
}
