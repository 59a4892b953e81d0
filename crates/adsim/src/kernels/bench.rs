//! Runs one kernel alone: built from its params with its own
//! [`HandleObjs`], fired back to back on `threads` OS threads for a set
//! time (the CLI's `rackbench adsim kernel NAME --params JSON`).
//!
//! Each thread owns [`RequestObjs`] made before the run (a body of
//! [`REQUEST_BYTES`] random characters, plus synthetic inputs for kernels
//! that read request objects, from [`ml::prepare_inputs`]: one request,
//! or [`ml::input_variety`] of them cycled, so that embedding lookups are
//! not all cache hits) and fires the kernel's parts round-robin, starting
//! at its own index, moving to its next request after a round. A "fire"
//! below is one part's firing; its work is the kernel's `work()`. Request
//! objects keep their first write, so later outputs into one are
//! dropped; what is measured is the kernel's own cost.

use super::{HandleObjs, Params, RequestObjs, build, gen_string, ml};
use crate::Error;
use bytes::Bytes;
use rand::SeedableRng;
use serde_json::{Map, Value};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The request body each thread fires with.
pub const REQUEST_BYTES: usize = 4096;

/// The result of a stand-alone run.
#[derive(Debug, Clone, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
pub struct Standalone {
    pub kernel: String,
    pub threads: usize,
    /// The kernel's parts per request.
    pub parts: usize,
    /// Wall time of the timed run.
    pub seconds: f64,
    /// Part firings done by all threads.
    pub fires: u64,
    pub fires_per_s: f64,
    /// Work of one firing (`Kernel::work`).
    pub flops_per_fire: f64,
    pub bytes_per_fire: f64,
    /// Work rate over the run, in 1e9 flops per second.
    pub gflops: f64,
    /// Mean wall time of one firing.
    pub wall_s_per_fire: f64,
    /// Mean thread CPU time of one firing.
    pub cpu_s_per_fire: f64,
    /// Time to build the kernel (tables, weights, pregenerated data).
    pub build_s: f64,
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    Duration::from_nanos(rpc::procstat::thread_cpu_ns())
}

/// Per-thread totals.
#[derive(Default)]
struct Tally {
    fires: u64,
    /// Summed over the fires.
    wall: Duration,
    cpu: Duration,
    /// From the thread's start to its last fire's end.
    elapsed: Duration,
}

/// Builds kernel `name` and fires it on `threads` threads for `seconds`.
pub fn standalone(
    name: &str,
    params: &Map<String, Value>,
    threads: usize,
    seconds: f64,
) -> Result<Standalone, Error> {
    standalone_with_body(name, params, threads, seconds, REQUEST_BYTES)
}

/// [`standalone`] with request bodies of `body_bytes` (kernels that read
/// the body, such as `Features` and echoing `Shape`, cost in proportion).
pub fn standalone_with_body(
    name: &str,
    params: &Map<String, Value>,
    threads: usize,
    seconds: f64,
    body_bytes: usize,
) -> Result<Standalone, Error> {
    if threads == 0 || threads > 4096 {
        return Err(Error::Input(format!(
            "threads: {threads}: expected 1..=4096"
        )));
    }
    if !(seconds > 0.0 && seconds <= 86_400.0) {
        return Err(Error::Input(format!(
            "seconds: {seconds}: expected more than 0, at most a day"
        )));
    }
    let h = HandleObjs::new();
    let t0 = Instant::now();
    let kernel = build(name, params, 0, &h)?;
    let build_s = t0.elapsed().as_secs_f64();
    let p = Params {
        kernel: name,
        map: params,
    };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
    let body = Bytes::from(gen_string(body_bytes, &mut rng));
    let variety = ml::input_variety(name, &p);
    let rqs = (0..threads)
        .map(|t| {
            (0..variety)
                .map(|i| {
                    let rq = RequestObjs::new(body.clone());
                    ml::prepare_inputs(name, &p, &rq, (t * variety + i) as u64)?;
                    Ok(rq)
                })
                .collect::<Result<Vec<_>, String>>()
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(Error::Input)?;
    let parts = kernel.parts().max(1);
    // Every thread warms up (one firing of each part) before the clock
    // starts.
    let barrier = Barrier::new(threads + 1);
    let run = Duration::from_secs_f64(seconds);
    let kernel = &*kernel;
    let tallies = std::thread::scope(|s| {
        let handles: Vec<_> = rqs
            .iter()
            .enumerate()
            .map(|(t, mine)| {
                let barrier = &barrier;
                s.spawn(move || -> Result<Tally, String> {
                    let warm = (0..parts).try_for_each(|p| kernel.fire(&mine[0], p).map(drop));
                    barrier.wait();
                    warm?;
                    let start = Instant::now();
                    let deadline = start + run;
                    let cpu0 = thread_cpu();
                    let mut tally = Tally::default();
                    let first = t % parts;
                    let (mut part, mut at) = (first, 0);
                    loop {
                        let f0 = Instant::now();
                        kernel.fire(&mine[at], part)?;
                        let f1 = Instant::now();
                        tally.fires += 1;
                        tally.wall += f1 - f0;
                        part = (part + 1) % parts;
                        if part == first {
                            at = (at + 1) % mine.len();
                        }
                        if f1 >= deadline {
                            break;
                        }
                    }
                    tally.cpu = thread_cpu().saturating_sub(cpu0);
                    tally.elapsed = start.elapsed();
                    Ok(tally)
                })
            })
            .collect();
        barrier.wait();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a bench thread panicked".into()))
            })
            .collect::<Vec<Result<Tally, String>>>()
    });
    // The run lasted as long as its longest thread (each timed its own:
    // this thread may be scheduled after the workers start).
    let mut total = Tally::default();
    let mut wall = Duration::ZERO;
    for t in tallies {
        let t = t.map_err(Error::Input)?;
        total.fires += t.fires;
        total.wall += t.wall;
        total.cpu += t.cpu;
        wall = wall.max(t.elapsed);
    }
    let secs = wall.as_secs_f64();
    let work = kernel.work();
    let fires = total.fires.max(1) as f64;
    Ok(Standalone {
        kernel: name.to_string(),
        threads,
        parts,
        seconds: secs,
        fires: total.fires,
        fires_per_s: total.fires as f64 / secs,
        flops_per_fire: work.flops,
        bytes_per_fire: work.bytes,
        gflops: work.flops * total.fires as f64 / secs / 1e9,
        wall_s_per_fire: total.wall.as_secs_f64() / fires,
        cpu_s_per_fire: total.cpu.as_secs_f64() / fires,
        build_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_gemm_runs_on_every_thread_and_reports_its_rate() {
        let p = params(json!({"M": 16, "N": 8, "K": 32, "nthreads": 3}));
        let r = standalone("GEMM", &p, 2, 0.05).unwrap();
        assert_eq!((r.kernel.as_str(), r.threads, r.parts), ("GEMM", 2, 3));
        assert!(r.fires >= 2, "{r:?}");
        assert!(r.seconds >= 0.05 && r.seconds < 5.0, "{r:?}");
        assert_eq!(r.flops_per_fire, 2.0 * 16.0 * 8.0 * 32.0);
        let rate = r.fires as f64 / r.seconds;
        assert!((r.fires_per_s - rate).abs() < 1e-6 * rate);
        assert!((r.gflops - rate * r.flops_per_fire / 1e9).abs() < 1e-6 * r.gflops.max(1e-9));
        assert!(
            r.wall_s_per_fire > 0.0 && r.wall_s_per_fire <= r.seconds * 2.0 / r.fires as f64 + 1e-3
        );
        assert!(
            r.cpu_s_per_fire > 0.0 && r.cpu_s_per_fire <= r.wall_s_per_fire * 1.5 + 1e-4,
            "{r:?}"
        );
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["kernel"], "GEMM");
        assert!(j["gflops"].as_f64().unwrap() > 0.0);
    }

    #[test]
    fn kernels_reading_request_objects_get_synthetic_inputs() {
        let cases = [
            (
                "Interaction",
                json!({"dense": "Rx", "embeddings": "Re", "output": "Ro",
                                   "batch": 4, "tables": 3, "dim": 8}),
            ),
            (
                "DenseFP32",
                json!({"dims": [8, 4], "batch": 4, "from": "Rin", "relu": true}),
            ),
            (
                "Embedding",
                json!({"num_tables": 2, "num_embeddings": 50, "embedding_dim": 8,
                                 "batch_size": 4, "bag_size": 2, "weights_precision": "int8",
                                 "indices_from": "Rs", "output": "Ro", "nthreads": 2}),
            ),
            (
                "Features",
                json!({"tables": 2, "rows": 10, "batch": 4, "dense_dim": 8}),
            ),
        ];
        for (name, p) in cases {
            let r = standalone(name, &params(p), 1, 0.02).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(r.fires >= 1, "{name}: {r:?}");
        }
    }

    #[test]
    fn bad_runs_are_errors() {
        let p = params(json!({"dense": "Rx", "embeddings": "Re"}));
        let e = standalone("Interaction", &p, 1, 0.01).unwrap_err();
        assert!(
            e.to_string().contains("needs params batch, tables and dim"),
            "{e}"
        );
        let e = standalone("GEMM", &params(json!({"M": 1})), 1, 0.01).unwrap_err();
        assert!(e.to_string().contains("GEMM params.N: missing"), "{e}");
        assert!(
            standalone("GEMM", &Map::new(), 0, 0.01)
                .unwrap_err()
                .to_string()
                .contains("threads: 0")
        );
        assert!(
            standalone("GEMM", &Map::new(), 1, 0.0)
                .unwrap_err()
                .to_string()
                .contains("seconds")
        );
        // The synthetic input is what the kernel reads.
        let p = params(json!({"dims": [8, 4], "from": "Rin", "batch": 2}));
        let rq = RequestObjs::new(Bytes::new());
        ml::prepare_inputs(
            "DenseFP32",
            &Params {
                kernel: "DenseFP32",
                map: &p,
            },
            &rq,
            1,
        )
        .unwrap();
        assert_eq!(rq.need::<ml::Tensor>("Rin").unwrap().cols, 8);
    }
}
