//! One hashd request and the worker threads that run them.
//!
//! A request reads file pages (through the page cache), touches anonymous
//! pages, hashes what it read with SHA1, and sleeps a third of its sleep
//! after each phase; its latency runs from when it was dispatched to when
//! it completes. Workers are threads made on demand (a sleeping request
//! holds its thread, as in rd-hashd), reused, and ended after 60 s idle.

use super::anon::AnonArea;
use super::dist::{ClampedNormal, rel_to_page};
use super::testfiles::TestFiles;
use rand::{Rng, SeedableRng};
use sha1::{Digest, Sha1};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const PAGE: usize = 4096;
const IDLE_EXIT: Duration = Duration::from_secs(60);

/// What requests share, rebuilt when the params change.
#[derive(Debug, Clone)]
pub struct Shape {
    pub chunk_pages: usize,
    /// Pages of test files in the footprint.
    pub file_pages: u64,
    pub file_addr: ClampedNormal,
    pub file_write_frac: f64,
    /// Pages of the anonymous area a chunk may start at.
    pub anon_pages: u64,
    pub anon_addr: ClampedNormal,
    pub anon_write_frac: f64,
    pub cpu_ratio: f64,
    /// Sleep this long per byte instead of hashing (0: hash).
    pub fake_secs_per_byte: f64,
}

/// One request.
#[derive(Debug, Clone)]
pub struct Request {
    pub dispatched: Instant,
    pub file_chunks: usize,
    pub anon_chunks: usize,
    pub sleep: f64,
    pub file_addr_frac: f64,
    pub anon_addr_frac: f64,
    pub shape: Arc<Shape>,
}

/// A finished request.
#[derive(Debug, Clone)]
pub struct Completion {
    pub latency: f64,
    pub digest: [u8; 20],
    /// Bytes read from files and anonymous memory.
    pub bytes: usize,
    /// An I/O error ends the run.
    pub error: Option<String>,
}

/// Hashes `buf` `cpu_ratio` times: whole passes, then the remaining share
/// of it.
pub fn hash(buf: &mut Vec<u8>, cpu_ratio: f64) -> [u8; 20] {
    let mut h = Sha1::new();
    let mut repeat = cpu_ratio;
    while repeat > 0.01 {
        if repeat < 0.99 {
            let n = (buf.len() as f64 * repeat).round() as usize;
            buf.truncate(n);
            repeat = 0.0;
        } else {
            repeat -= 1.0;
        }
        h.update(&buf[..]);
    }
    h.finalize().into()
}

/// Runs one request on this thread.
pub fn run_request<R: Rng>(
    req: &Request,
    files: &TestFiles,
    anon: &AnonArea,
    buf: &mut Vec<u8>,
    rng: &mut R,
) -> Completion {
    let s = &req.shape;
    let chunk = s.chunk_pages * PAGE;
    buf.clear();
    let third = Duration::from_secs_f64((req.sleep / 3.0).max(0.0));
    // 1. Files.
    for _ in 0..req.file_chunks {
        let rel = s.file_addr.sample(rng) * req.file_addr_frac;
        let page = rel_to_page(rel, s.file_pages);
        if let Err(e) = files.read_pages(page, chunk, buf) {
            return failed(req, format!("reading test file page {page}: {e}"));
        }
        if s.file_write_frac > 0.0
            && rng.random::<f64>() <= s.file_write_frac
            && let Err(e) = files.write_page(page)
        {
            return failed(req, format!("writing test file page {page}: {e}"));
        }
    }
    std::thread::sleep(third);
    // 2. Anonymous memory.
    for _ in 0..req.anon_chunks {
        let rel = s.anon_addr.sample(rng) * req.anon_addr_frac;
        let first = rel_to_page(rel, s.anon_pages) as usize;
        let write = s.anon_write_frac > 0.0 && rng.random::<f64>() <= s.anon_write_frac;
        for p in first..first + s.chunk_pages {
            anon.touch(p, write, buf, rng);
        }
    }
    std::thread::sleep(third);
    // 3. Hash.
    let bytes = buf.len();
    let digest = if s.fake_secs_per_byte > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(
            bytes as f64 * s.cpu_ratio * s.fake_secs_per_byte,
        ));
        [0; 20]
    } else {
        hash(buf, s.cpu_ratio)
    };
    std::thread::sleep(third);
    Completion {
        latency: req.dispatched.elapsed().as_secs_f64(),
        digest,
        bytes,
        error: None,
    }
}

fn failed(req: &Request, error: String) -> Completion {
    Completion {
        latency: req.dispatched.elapsed().as_secs_f64(),
        digest: [0; 20],
        bytes: 0,
        error: Some(error),
    }
}

struct Queue {
    jobs: VecDeque<Request>,
    idle: usize,
    workers: usize,
    stop: bool,
}

/// Worker threads fed through one queue.
pub struct Pool {
    q: Arc<(Mutex<Queue>, Condvar)>,
    files: Arc<TestFiles>,
    anon: Arc<AnonArea>,
    done: Sender<Completion>,
    stopping: Arc<AtomicBool>,
}

impl Pool {
    pub fn new(files: Arc<TestFiles>, anon: Arc<AnonArea>, done: Sender<Completion>) -> Pool {
        Pool {
            q: Arc::new((
                Mutex::new(Queue {
                    jobs: VecDeque::new(),
                    idle: 0,
                    workers: 0,
                    stop: false,
                }),
                Condvar::new(),
            )),
            files,
            anon,
            done,
            stopping: Arc::new(AtomicBool::new(false)),
        }
    }

    /// (workers, idle workers).
    pub fn workers(&self) -> (usize, usize) {
        let q = self.q.0.lock().unwrap_or_else(|e| e.into_inner());
        (q.workers, q.idle)
    }

    /// Queues a request, starting a worker when none is free for it.
    pub fn submit(&self, req: Request) {
        let (lock, cv) = &*self.q;
        let mut q = lock.lock().unwrap_or_else(|e| e.into_inner());
        q.jobs.push_back(req);
        if q.idle >= q.jobs.len() {
            cv.notify_one();
            return;
        }
        q.workers += 1;
        drop(q);
        let q = self.q.clone();
        let files = self.files.clone();
        let anon = self.anon.clone();
        let done = self.done.clone();
        let spawned = std::thread::Builder::new()
            .name("hashd-worker".into())
            .spawn(move || worker(q, files, anon, done));
        if spawned.is_err() {
            // Out of threads: the queued request waits for a free worker.
            let mut q = self.q.0.lock().unwrap_or_else(|e| e.into_inner());
            q.workers -= 1;
        }
    }

    /// Stops the workers once the queue is empty (requests in flight
    /// finish).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let (lock, cv) = &*self.q;
        lock.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        cv.notify_all();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop();
    }
}

fn worker(
    q: Arc<(Mutex<Queue>, Condvar)>,
    files: Arc<TestFiles>,
    anon: Arc<AnonArea>,
    done: Sender<Completion>,
) {
    let mut rng = rand::rngs::SmallRng::from_os_rng();
    let mut buf = Vec::new();
    let (lock, cv) = &*q;
    loop {
        let req = {
            let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(r) = g.jobs.pop_front() {
                    break Some(r);
                }
                if g.stop {
                    break None;
                }
                g.idle += 1;
                let (ng, t) = cv
                    .wait_timeout(g, IDLE_EXIT)
                    .unwrap_or_else(|e| e.into_inner());
                g = ng;
                g.idle -= 1;
                if t.timed_out() && g.jobs.is_empty() {
                    break None;
                }
            }
        };
        let Some(req) = req else {
            let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
            g.workers -= 1;
            return;
        };
        let c = run_request(&req, &files, &anon, &mut buf, &mut rng);
        if done.send(c).is_err() {
            let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
            g.workers -= 1;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashing_covers_cpu_ratio_of_the_bytes() {
        let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let mut b = data.clone();
        let d = hash(&mut b, 0.93);
        assert_eq!(b.len(), 930);
        let want: [u8; 20] = Sha1::digest(&data[..930]).into();
        assert_eq!(d, want);
        // 1.5: one whole pass then half, fed to the same hash.
        let mut b = data.clone();
        let d = hash(&mut b, 1.5);
        let mut h = Sha1::new();
        h.update(&data);
        h.update(&data[..500]);
        assert_eq!(d, <[u8; 20]>::from(h.finalize()));
    }
}
