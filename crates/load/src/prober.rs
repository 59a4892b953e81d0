//! A [`Prober`] over any `tower::Service`: each probe is one driver run.

use crate::driver::{self, Mode, RunConfig, RunResult};
use crate::search::Prober;
use crate::wire::WireSize;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tower::Service;

/// Probes `svc` with requests from `make`.
pub struct ServiceProber<S, F> {
    pub svc: S,
    pub make: Arc<F>,
    /// Driver workers (independent streams) for a mode.
    pub workers: Box<dyn Fn(Mode) -> usize + Send>,
    pub max_in_flight: usize,
    /// How long to wait for replies after a probe's window.
    pub drain: Duration,
    /// The open loop's wake-up coalescing window (`RunConfig::send_ahead`);
    /// `None` takes the arrival process' default.
    pub send_ahead: Option<Duration>,
    /// Seed of the first probe; each probe uses the next.
    pub seed: u64,
    pub stop: Arc<AtomicBool>,
    /// Called before each probe: an `Err` (the server died) ends the search.
    pub check: Box<dyn FnMut() -> Result<(), crate::Error> + Send>,
    /// Waits until the server is idle (see [`Prober::settle`]); `None` does
    /// not wait.
    pub settle: Option<SettleFn>,
}

/// A server-specific wait for idleness, returning how long it took.
pub type SettleFn =
    Box<dyn FnMut() -> Pin<Box<dyn Future<Output = Result<Duration, crate::Error>> + Send>> + Send>;

/// A [`SettleFn`] that asks the server how many requests it has in flight
/// (`in_flight`, e.g. a status RPC) every 50 ms until none are, or until
/// `limit` has passed; an `Err` from `in_flight` (the server stopped
/// answering) ends the search.
pub fn until_idle<F, Fut>(in_flight: F, limit: Duration) -> SettleFn
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<u64, crate::Error>> + Send + 'static,
{
    let in_flight = Arc::new(in_flight);
    Box::new(move || {
        let in_flight = in_flight.clone();
        Box::pin(async move {
            let t = std::time::Instant::now();
            loop {
                if in_flight().await? == 0 || t.elapsed() > limit {
                    return Ok(t.elapsed());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    })
}

impl<S, R, F> Prober for ServiceProber<S, F>
where
    S: Service<R> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Response: WireSize + Send + 'static,
    S::Error: Display + Send + 'static,
    R: WireSize + Send + 'static,
    F: Fn(u64) -> R + Send + Sync + 'static,
{
    async fn probe(
        &mut self,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> Result<RunResult, crate::Error> {
        (self.check)()?;
        let cfg = RunConfig {
            mode,
            warmup,
            duration,
            workers: (self.workers)(mode).max(1),
            max_in_flight: self.max_in_flight,
            drain: self.drain,
            seed: self.seed,
            send_ahead: match (self.send_ahead, mode) {
                (Some(ahead), _) => ahead,
                (None, Mode::Open { arrival, .. }) => crate::driver::default_send_ahead(arrival),
                (None, _) => Duration::ZERO,
            },
        };
        self.seed = self.seed.wrapping_add(1);
        let make = self.make.clone();
        let r = driver::run(self.svc.clone(), move |n| make(n), &cfg, self.stop.clone()).await;
        if r.recorder.ok == 0 && r.recorder.errors > 0 && !r.interrupted {
            (self.check)()?;
            let why = r.recorder.first_error.clone().unwrap_or_default();
            return Err(crate::Error::Host(format!("every request failed: {why}")));
        }
        Ok(r)
    }

    async fn settle(&mut self) -> Result<Duration, crate::Error> {
        match self.settle.as_mut() {
            Some(f) => f().await,
            None => Ok(Duration::ZERO),
        }
    }
}
