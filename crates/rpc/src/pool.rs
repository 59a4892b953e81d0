//! Fixed-size thread pools whose tasks are awaited from async code:
//! FeedSim's ranking, serialization, IO and pointer-chasing pools, AdSim's
//! request-handling and application-logic pools.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

type Task = Box<dyn FnOnce() + Send>;

/// A named pool of OS threads.
pub struct Pool {
    tx: mpsc::Sender<Task>,
    pub threads: usize,
    skipped: Arc<AtomicU64>,
}

impl Pool {
    /// Starts `threads` threads (at least one) named `name-i`.
    pub fn new(name: &str, threads: usize) -> Self {
        Self::with_init(name, threads, || {})
    }

    /// As [`Pool::new`], each thread first running `init` (e.g. to set a
    /// per-thread attribute such as its timer slack).
    pub fn with_init(name: &str, threads: usize, init: impl Fn() + Send + Sync + 'static) -> Self {
        let threads = threads.max(1);
        let init = Arc::new(init);
        let (tx, rx) = mpsc::channel::<Task>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = rx.clone();
            let init = init.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    init();
                    loop {
                        let task = match rx.lock() {
                            Ok(g) => g.recv(),
                            Err(_) => return,
                        };
                        match task {
                            Ok(t) => t(),
                            Err(_) => return,
                        }
                    }
                })
                .expect("spawning a pool thread");
        }
        Pool {
            tx,
            threads,
            skipped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Runs `f` on the pool; the future resolves with its result. When the
    /// future is dropped before the task starts (the request was cancelled:
    /// the client gave up on it), the task is skipped instead of burning
    /// CPU that later requests would queue behind.
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> oneshot::Receiver<T> {
        let (done, rx) = oneshot::channel();
        let skipped = self.skipped.clone();
        let _ = self.tx.send(Box::new(move || {
            if done.is_closed() {
                skipped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let _ = done.send(f());
        }));
        rx
    }

    /// Tasks skipped because nobody waited for them any more.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Runs `n` tasks `f(0)..f(n-1)` and waits for all their results.
    pub async fn fan_out<T: Send + 'static>(
        &self,
        n: usize,
        f: impl Fn(usize) -> T + Send + Sync + 'static,
    ) -> Result<Vec<T>, oneshot::error::RecvError> {
        let f = Arc::new(f);
        let rxs: Vec<_> = (0..n)
            .map(|i| {
                let f = f.clone();
                self.run(move || f(i))
            })
            .collect();
        let mut out = Vec::with_capacity(n);
        for rx in rxs {
            out.push(rx.await?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fan_out_runs_on_the_pool() {
        let p = Pool::new("t", 3);
        let names = p
            .fan_out(6, |i| {
                (
                    i * 2,
                    std::thread::current().name().unwrap_or("").to_string(),
                )
            })
            .await
            .unwrap();
        assert_eq!(
            names.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![0, 2, 4, 6, 8, 10]
        );
        assert!(names.iter().all(|(_, n)| n.starts_with("t-")));
    }

    #[tokio::test]
    async fn tasks_of_a_dropped_future_are_skipped() {
        let p = Pool::new("s", 1);
        let ran = Arc::new(AtomicU64::new(0));
        // Occupy the only thread, then queue work and drop its future.
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let blocker = p.run(move || {
            let _ = wait.recv();
        });
        let r = ran.clone();
        let mut queued = Box::pin(p.fan_out(3, move |_| {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        // Polled until its tasks are queued (it cannot finish: the thread is busy).
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), &mut queued).await;
        assert!(waited.is_err());
        drop(queued);
        go.send(()).unwrap();
        blocker.await.unwrap();
        // A task queued after the skipped ones still runs.
        let r = ran.clone();
        p.run(move || r.fetch_add(10, Ordering::SeqCst))
            .await
            .unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 10);
        assert_eq!(p.skipped(), 3);
    }
}
