//! Fixed-size thread pools whose tasks are awaited from async code: the
//! leaf's ranking, serialization, IO and pointer-chasing pools.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

type Task = Box<dyn FnOnce() + Send>;

/// A named pool of OS threads.
pub struct Pool {
    tx: mpsc::Sender<Task>,
    pub threads: usize,
}

impl Pool {
    /// Starts `threads` threads (at least one) named `name-i`.
    pub fn new(name: &str, threads: usize) -> Self {
        let threads = threads.max(1);
        let (tx, rx) = mpsc::channel::<Task>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
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
        Pool { tx, threads }
    }

    /// Runs `f` on the pool; the future resolves with its result.
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> oneshot::Receiver<T> {
        let (done, rx) = oneshot::channel();
        let _ = self.tx.send(Box::new(move || {
            let _ = done.send(f());
        }));
        rx
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
}
