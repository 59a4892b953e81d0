//! The compute kernels a request runs through, and what they share.
//!
//! A kernel is built once per configured instance (one per `fanout` index)
//! from its checked params, then fired once per request. Kernels share data
//! through two maps, as upstream does:
//!
//! - [`HandleObjs`]: built at start-up and shared by every request (keys
//!   conventionally start with `H`); instances naming the same `input`
//!   share one object, built by whichever comes first.
//! - [`RequestObjs`]: one per request, written by earlier stages and read by
//!   later ones (keys start with `R`). The first write of a key wins, later
//!   writes are ignored (upstream's insert semantics).
//!
//! Off-CPU waits ([`Fired::wait`]) are not slept on the kernel's thread:
//! the server awaits them on its timer, like upstream's futures sleep.

use crate::Error;
pub mod bench;
pub mod codec;
pub mod concurrent_hash_map;
pub mod data;
pub mod downstream;
pub mod ibrun;
pub mod io;
pub mod ml;
pub mod rebatch;
pub mod serde;
pub mod tensordeser;

use bytes::Bytes;
use serde_json::{Map, Value};
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

type Obj = Arc<dyn Any + Send + Sync>;

/// Entries of the shared random cycle (upstream's `rand_max`).
pub const RAND_MAX: u32 = 262_144;

/// Data built at start-up and shared by all requests.
#[derive(Default)]
pub struct HandleObjs {
    /// One cell per key, locked only while that key's object is built, so
    /// kernels with different inputs build in parallel at start-up.
    map: Mutex<HashMap<String, Arc<Mutex<Option<Obj>>>>>,
    /// The shared random cycle: `cycle[i]` is the successor of `i` in one
    /// random permutation cycle over 0..RAND_MAX.
    cycle: OnceLock<Arc<[u32]>>,
}

impl HandleObjs {
    pub fn new() -> Self {
        Self::default()
    }

    /// The object under `key`, built by `make` when nobody built it yet.
    /// A key already holding another type is an error naming both.
    pub fn get_or_build<T: Any + Send + Sync>(
        &self,
        key: &str,
        make: impl FnOnce() -> Result<T, Error>,
    ) -> Result<Arc<T>, Error> {
        let cell = {
            let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
            m.entry(key.to_string()).or_default().clone()
        };
        let mut slot = cell.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(o) = slot.as_ref() {
            return o.clone().downcast::<T>().map_err(|_| {
                Error::Input(format!(
                    "shared input {key:?} is already used by a kernel of another kind (expected {})",
                    std::any::type_name::<T>()
                ))
            });
        }
        let v = Arc::new(make()?);
        *slot = Some(v.clone());
        Ok(v)
    }

    /// The shared random cycle (built on first use, seeded so every server
    /// start draws the same sequences).
    pub fn cycle(&self) -> Arc<[u32]> {
        self.cycle
            .get_or_init(|| {
                use rand::SeedableRng;
                use rand::seq::SliceRandom;
                let mut order: Vec<u32> = (0..RAND_MAX).collect();
                order.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(0x5eed_ad51));
                let mut next = vec![0u32; RAND_MAX as usize];
                for i in 0..order.len() {
                    next[order[i] as usize] = order[(i + 1) % order.len()];
                }
                next.into()
            })
            .clone()
    }
}

/// Data of one request.
pub struct RequestObjs {
    /// The request body as received.
    pub request: Bytes,
    /// When the server received it.
    pub received: Instant,
    map: Mutex<HashMap<String, Obj>>,
    /// One random draw shared by every kernel of the request that asks for
    /// it (upstream's "multiplier": FakeIO's latency index).
    multiplier: OnceLock<u32>,
}

impl RequestObjs {
    pub fn new(request: Bytes) -> Self {
        RequestObjs {
            request,
            received: Instant::now(),
            map: Mutex::new(HashMap::new()),
            multiplier: OnceLock::new(),
        }
    }

    /// Stores `v` under `key` unless the key is already set (the first
    /// write wins).
    pub fn put<T: Any + Send + Sync>(&self, key: &str, v: T) {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(key.to_string()).or_insert_with(|| Arc::new(v));
    }

    /// The object under `key`, if one of type `T` was stored.
    pub fn get<T: Any + Send + Sync>(&self, key: &str) -> Option<Arc<T>> {
        let m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        m.get(key).cloned().and_then(|o| o.downcast::<T>().ok())
    }

    /// Like [`RequestObjs::get`], but a missing or mistyped key is an error
    /// naming it (a kernel reads an output no earlier stage wrote).
    pub fn need<T: Any + Send + Sync>(&self, key: &str) -> Result<Arc<T>, Error> {
        self.get(key).ok_or_else(|| {
            Error::Input(format!(
                "request object {key:?} was not written by an earlier stage (or holds another kind of data)"
            ))
        })
    }

    /// The request's shared draw, made by `draw` on first use.
    pub fn multiplier(&self, draw: impl FnOnce() -> u32) -> u32 {
        *self.multiplier.get_or_init(draw)
    }
}

/// What one firing produced.
#[derive(Debug, Default)]
pub struct Fired {
    /// Appended to the response (most kernels return nothing).
    pub output: Bytes,
    /// An off-CPU wait the server performs after the kernel returns.
    pub wait: Option<Duration>,
}

impl Fired {
    pub fn nothing() -> Self {
        Fired::default()
    }

    pub fn output(b: Bytes) -> Self {
        Fired {
            output: b,
            wait: None,
        }
    }

    pub fn wait(d: Duration) -> Self {
        Fired {
            output: Bytes::new(),
            wait: Some(d),
        }
    }
}

/// Work done by one firing, for reporting kernel throughput.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Work {
    /// Floating-point (or integer multiply-add) operations.
    pub flops: f64,
    /// Bytes processed (compressed, copied, looked up).
    pub bytes: f64,
}

/// A configured kernel instance.
pub trait Kernel: Send + Sync {
    /// Runs once for a request. `part` is in `0..self.parts()`: kernels
    /// that split into sub-tasks (GEMM with `nthreads`) are fired once per
    /// part, concurrently on their pool, and the outputs concatenated.
    fn fire(&self, rq: &RequestObjs, part: usize) -> Result<Fired, Error>;

    /// Sub-tasks per request (1 unless the kernel splits).
    fn parts(&self) -> usize {
        1
    }

    /// The work of one part's firing, when it has a natural measure.
    fn work(&self) -> Work {
        Work::default()
    }
}

/// A per-instance cursor into the shared random cycle (upstream's
/// `get_rand`): each call follows one link, a dependent load that also
/// costs what upstream's does. Concurrent fires of one instance may read
/// the same value; that is harmless.
pub struct Rand {
    cycle: Arc<[u32]>,
    at: AtomicU32,
}

impl Rand {
    pub fn new(h: &HandleObjs, start: u32) -> Self {
        Rand {
            cycle: h.cycle(),
            at: AtomicU32::new(start % RAND_MAX),
        }
    }

    /// The next value, in `0..RAND_MAX`.
    pub fn next(&self) -> u32 {
        let v = self.cycle[self.at.load(Ordering::Relaxed) as usize];
        self.at.store(v, Ordering::Relaxed);
        v
    }
}

/// Typed access to a kernel's params (already checked by the config, so
/// these only fill defaults; a wrong type still gives an error, never a
/// panic).
pub struct Params<'a> {
    pub kernel: &'a str,
    pub map: &'a Map<String, Value>,
}

impl<'a> Params<'a> {
    fn bad(&self, key: &str, what: &str) -> Error {
        Error::Input(format!("{} params.{key}: expected {what}", self.kernel))
    }

    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    pub fn u64_or(&self, key: &str, default: u64) -> Result<u64, Error> {
        match self.map.get(key) {
            None => Ok(default),
            Some(v) => v.as_u64().ok_or_else(|| self.bad(key, "an integer >= 0")),
        }
    }

    pub fn u64(&self, key: &str) -> Result<u64, Error> {
        match self.map.get(key) {
            None => Err(Error::Input(format!(
                "{} params.{key}: missing",
                self.kernel
            ))),
            Some(v) => v.as_u64().ok_or_else(|| self.bad(key, "an integer >= 0")),
        }
    }

    pub fn usize_or(&self, key: &str, default: usize) -> Result<usize, Error> {
        self.u64_or(key, default as u64).map(|v| v as usize)
    }

    pub fn usize(&self, key: &str) -> Result<usize, Error> {
        self.u64(key).map(|v| v as usize)
    }

    pub fn i64(&self, key: &str) -> Result<i64, Error> {
        match self.map.get(key) {
            None => Err(Error::Input(format!(
                "{} params.{key}: missing",
                self.kernel
            ))),
            Some(v) => v.as_i64().ok_or_else(|| self.bad(key, "an integer")),
        }
    }

    pub fn f64_or(&self, key: &str, default: f64) -> Result<f64, Error> {
        match self.map.get(key) {
            None => Ok(default),
            Some(v) => v.as_f64().ok_or_else(|| self.bad(key, "a number")),
        }
    }

    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool, Error> {
        match self.map.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| self.bad(key, "true or false")),
        }
    }

    pub fn str_or(&self, key: &str, default: &'a str) -> Result<&'a str, Error> {
        match self.map.get(key) {
            None => Ok(default),
            Some(v) => v.as_str().ok_or_else(|| self.bad(key, "a string")),
        }
    }

    pub fn f64_list(&self, key: &str) -> Result<Vec<f64>, Error> {
        let a = self
            .map
            .get(key)
            .and_then(Value::as_array)
            .ok_or_else(|| self.bad(key, "an array of numbers"))?;
        a.iter()
            .map(|v| {
                v.as_f64()
                    .ok_or_else(|| self.bad(key, "an array of numbers"))
            })
            .collect()
    }

    pub fn usize_list(&self, key: &str) -> Result<Vec<usize>, Error> {
        let a = self
            .map
            .get(key)
            .and_then(Value::as_array)
            .ok_or_else(|| self.bad(key, "an array of integers"))?;
        a.iter()
            .map(|v| {
                v.as_u64()
                    .map(|n| n as usize)
                    .ok_or_else(|| self.bad(key, "an array of integers >= 0"))
            })
            .collect()
    }

    /// A per-table value: `key_list` (a comma-separated string or one
    /// number) when present, else `key`, else `default`; as floats.
    pub fn per_table(&self, key: &str, default: f64) -> Result<Vec<f64>, Error> {
        let list_key = format!("{key}_list");
        match self.map.get(&list_key) {
            Some(Value::String(s)) => s
                .split(',')
                .map(|x| {
                    x.trim()
                        .parse::<f64>()
                        .map_err(|_| self.bad(&list_key, "comma-separated numbers"))
                })
                .collect(),
            Some(v) => v
                .as_f64()
                .map(|x| vec![x])
                .ok_or_else(|| self.bad(&list_key, "comma-separated numbers in a string")),
            None => Ok(vec![self.f64_or(key, default)?]),
        }
    }
}

/// Upstream's inverse-CDF table: `len` entries where entry `i` is the value
/// at quantile `i / len`, linear between the given points. `quantiles` are
/// in [0, 1]; both lists are sorted independently first, as upstream does,
/// and the shorter length is used.
pub fn fit_quantiles(quantiles: &[f64], targets: &[f64], len: usize) -> Vec<f64> {
    let n = quantiles.len().min(targets.len());
    let mut q: Vec<f64> = quantiles[..n].iter().map(|x| x * len as f64).collect();
    let mut t: Vec<f64> = targets[..n].to_vec();
    q.sort_by(f64::total_cmp);
    t.sort_by(f64::total_cmp);
    let mut out = vec![0.0; len];
    if n == 0 {
        return out;
    }
    for (i, o) in out.iter_mut().enumerate() {
        let x = i as f64;
        *o = if x < q[0] {
            t[0] * (x / q[0])
        } else if x >= q[n - 1] {
            t[n - 1]
        } else {
            let k = q.partition_point(|&qq| qq <= x);
            let (q0, q1, t0, t1) = (q[k - 1], q[k], t[k - 1], t[k]);
            if q1 > q0 {
                t0 + (t1 - t0) * (x - q0) / (q1 - q0)
            } else {
                t1
            }
        };
    }
    out
}

/// Part `part` of `0..parts` of `total` items, as upstream splits work
/// over threads: equal shares of `total / parts`, the last part taking the
/// remainder.
pub fn part_range(total: usize, parts: usize, part: usize) -> (usize, usize) {
    let parts = parts.max(1);
    let per = total / parts;
    let from = (part * per).min(total);
    let to = if part + 1 >= parts {
        total
    } else {
        (from + per).min(total)
    };
    (from, to)
}

/// The text of the file a kernel's param `key` names, or an error naming
/// the kernel, the param and the path.
pub fn read_param_file(kernel: &str, key: &str, path: &str) -> Result<String, Error> {
    std::fs::read_to_string(path)
        .map_err(|e| Error::Input(format!("{kernel} params.{key}: cannot read {path:?}: {e}")))
}

/// Upstream's string alphabet for generated payloads.
pub const ALPHABET: &[u8] =
    b"0123456789 ,.!:'\"@#$%&*ABCEDFGHIJKLMNOPQRSTUVWXYZabcedfghijklmnopqrstuvwxyz";

/// `len` random characters from [`ALPHABET`].
pub fn gen_string(len: usize, rng: &mut impl rand::Rng) -> Vec<u8> {
    (0..len)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())])
        .collect()
}

/// Builds one kernel instance of kind `name` from its params.
pub fn build(
    name: &str,
    params: &Map<String, Value>,
    fidx: usize,
    h: &HandleObjs,
) -> Result<Box<dyn Kernel>, Error> {
    let p = Params {
        kernel: name,
        map: params,
    };
    // Each instance starts its random walk at a different point.
    let rand = Rand::new(h, (fidx as u32).wrapping_mul(2_654_435_761));
    Ok(match name {
        "Echo" | "FakeIO" => Box::new(io::FakeIo::new(&p, h, rand)?),
        "Delay" => Box::new(io::Delay::new(&p)?),
        "Shape" => Box::new(io::Shape::new(&p, h, rand)?),
        "IBRun" => Box::new(ibrun::IbRun::new(&p, fidx)?),
        "Compress" => Box::new(codec::Compress::new(&p, h, rand)?),
        "Decompress" => Box::new(codec::Decompress::new(&p, h, rand)?),
        "Serialize" => Box::new(serde::Serialize::new(&p, h, rand)?),
        "Deserialize" => Box::new(serde::Deserialize::new(&p, h, rand)?),
        "HashMap" => Box::new(data::HashMapKernel::new(&p, h)?),
        "DeepCopy" => Box::new(data::DeepCopy::new(&p, h, rand)?),
        "TensorDeser" => Box::new(tensordeser::TensorDeser::new(&p, h, fidx)?),
        "ConcurrentHashMap" => Box::new(concurrent_hash_map::ConcurrentHashMap::new(&p, h, fidx)?),
        "Rebatch" => Box::new(rebatch::Rebatch::new(&p, h, fidx)?),
        "Client" => Box::new(downstream::RpcClient::new(&p, h, rand, false)?),
        "ClientLite" => Box::new(downstream::RpcClient::new(&p, h, rand, true)?),
        "GEMM" | "Embedding" | "DenseFP32" | "Interaction" | "Features" => {
            ml::build(name, &p, h, rand)?
        }
        other => return Err(Error::Input(format!("unknown kernel {other:?}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_random_cycle_is_one_cycle_over_every_value() {
        let h = HandleObjs::new();
        let r = Rand::new(&h, 0);
        let mut seen = vec![false; RAND_MAX as usize];
        for _ in 0..RAND_MAX {
            let v = r.next() as usize;
            assert!(!seen[v], "value {v} repeated before the cycle closed");
            seen[v] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn request_objects_keep_the_first_write() {
        let rq = RequestObjs::new(Bytes::from_static(b"x"));
        rq.put("Ra", 1u32);
        rq.put("Ra", 2u32);
        assert_eq!(*rq.get::<u32>("Ra").unwrap(), 1);
        assert!(rq.get::<u64>("Ra").is_none());
        let e = rq.need::<u32>("Rb").unwrap_err();
        assert!(e.to_string().contains("\"Rb\""), "{e}");
        assert_eq!(rq.multiplier(|| 7), 7);
        assert_eq!(rq.multiplier(|| 9), 7);
    }

    #[test]
    fn handle_objects_are_shared_by_key_and_checked_by_type() {
        let h = HandleObjs::new();
        let a = h.get_or_build("Hx", || Ok(vec![1u8, 2])).unwrap();
        let b = h.get_or_build("Hx", || Ok(vec![9u8])).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let e = h.get_or_build("Hx", || Ok(3u64)).unwrap_err();
        assert!(e.to_string().contains("\"Hx\""), "{e}");
    }

    #[test]
    fn different_keys_build_at_the_same_time() {
        // A's build waits for B's to start: with one lock for every key
        // B could not start and A would time out.
        let h = HandleObjs::new();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let h = &h;
            let a = s.spawn(move || {
                h.get_or_build("Ha", move || {
                    rx.recv_timeout(std::time::Duration::from_secs(10))
                        .map(|_| 1u8)
                        .map_err(|_| Error::Host("B never started building".to_string()))
                })
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            let b = h.get_or_build("Hb", || {
                let _ = tx.send(());
                Ok(2u8)
            });
            assert_eq!(*b.unwrap(), 2);
            assert_eq!(*a.join().unwrap().unwrap(), 1);
        });
    }

    #[test]
    fn quantile_table_interpolates_between_points() {
        // 0 -> 6000, 0.1 -> 100000, 1 -> 971000 over 100 entries.
        let t = fit_quantiles(&[0.0, 0.1, 1.0], &[6000.0, 100_000.0, 971_000.0], 100);
        assert_eq!(t[0], 6000.0);
        assert!((t[5] - 53_000.0).abs() < 1e-6, "{}", t[5]);
        assert_eq!(t[10], 100_000.0);
        assert!((t[55] - (100_000.0 + 871_000.0 * 0.5)).abs() < 1e-6);
        // Unsorted inputs are sorted independently.
        let u = fit_quantiles(&[1.0, 0.0], &[10.0, 20.0], 4);
        assert_eq!(u, vec![10.0, 12.5, 15.0, 17.5]);
    }
}
