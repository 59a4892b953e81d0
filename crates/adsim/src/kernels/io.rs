//! Kernels that shape time and size rather than burn CPU: `FakeIO` (an
//! off-CPU wait drawn from a latency CDF; `Echo` is upstream's alias),
//! `Delay` (pads the request's latency towards end-to-end quantile
//! targets) and `Shape` (the response body: the request echoed, or a
//! pre-generated string whose size follows a CDF).

use super::{Fired, HandleObjs, Kernel, Params, Rand, RequestObjs, fit_quantiles, gen_string};
use crate::Error;
use bytes::Bytes;
use hdrhistogram::Histogram;
use rand::SeedableRng;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Entries of FakeIO's latency table (upstream's QUANTILE_LEN).
const LATENCY_TABLE: usize = 100_000;

/// Checks a CDF's two lists: same length (upstream silently used the
/// shorter; a mismatch is almost always a typo), quantiles in [0, 1],
/// values >= 0.
fn cdf(p: &Params, values_key: &str) -> Result<(Vec<f64>, Vec<f64>), String> {
    let q = p.f64_list("quantiles")?;
    let v = p.f64_list(values_key)?;
    if q.len() != v.len() {
        return Err(format!(
            "{} params.quantiles has {} values but params.{values_key} has {}: they must pair up",
            p.kernel,
            q.len(),
            v.len()
        ));
    }
    if let Some(x) = q.iter().find(|x| !(0.0..=1.0).contains(*x)) {
        return Err(format!(
            "{} params.quantiles: {x} is outside [0, 1]",
            p.kernel
        ));
    }
    if let Some(x) = v.iter().find(|x| **x < 0.0 || !x.is_finite()) {
        return Err(format!(
            "{} params.{values_key}: {x} is not a non-negative number",
            p.kernel
        ));
    }
    Ok((q, v))
}

/// `FakeIO` / `Echo`: waits, off CPU, for a latency drawn from the CDF in
/// `quantiles`/`latencies` (microseconds). The draw is the request's shared
/// random index, so several FakeIO kernels of one request wait alike.
pub struct FakeIo {
    table: Arc<Vec<u64>>,
    rand: Rand,
}

impl FakeIo {
    pub fn new(p: &Params, h: &HandleObjs, rand: Rand) -> Result<Self, Error> {
        let (q, lat) = cdf(p, "latencies").map_err(Error::Input)?;
        let input = p.str_or("input", "fakeio")?;
        let table = h.get_or_build(&format!("{input}.lat_arr"), || {
            Ok(fit_quantiles(&q, &lat, LATENCY_TABLE)
                .into_iter()
                .map(|x| x as u64)
                .collect::<Vec<u64>>())
        })?;
        Ok(FakeIo { table, rand })
    }

    /// The wait for a shared draw in `0..RAND_MAX`.
    pub fn latency_for(&self, draw: u32) -> Duration {
        Duration::from_micros(self.table[draw as usize % LATENCY_TABLE])
    }
}

impl Kernel for FakeIo {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let draw = rq.multiplier(|| self.rand.next());
        Ok(Fired::wait(self.latency_for(draw)))
    }
}

/// `Delay`: meant as the last kernel. It measures the request's latency so
/// far and sleeps up to the first target `latencies[i]` (microseconds) it
/// can still meet, skipping targets whose quantile `quantiles[i]` the
/// padded latencies it produced already reach, so the end-to-end
/// distribution approaches the targets from below.
pub struct Delay {
    quantiles: Vec<f64>,
    latencies: Vec<u64>,
    seen: Mutex<Histogram<u64>>,
}

impl Delay {
    pub fn new(p: &Params) -> Result<Self, Error> {
        let (q, lat) = cdf(p, "latencies").map_err(Error::Input)?;
        let seen = Histogram::new_with_bounds(1, 3_600_000_000, 3)
            .map_err(|e| Error::Input(format!("Delay: histogram: {e}")))?;
        Ok(Delay {
            quantiles: q,
            latencies: lat.into_iter().map(|x| x as u64).collect(),
            seen: Mutex::new(seen),
        })
    }

    /// The wait for a request that has taken `so_far_us` microseconds.
    pub fn wait_for(&self, so_far_us: u64) -> Duration {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.latencies.len();
        for i in 0..n {
            let target = self.latencies[i];
            if so_far_us > target {
                continue;
            }
            let est = if seen.is_empty() {
                0
            } else {
                seen.value_at_quantile(self.quantiles[i])
            };
            if target >= est && i + 1 < n {
                continue;
            }
            let _ = seen.record(target.max(1));
            return Duration::from_micros(target - so_far_us);
        }
        Duration::ZERO
    }
}

impl Kernel for Delay {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let so_far = rq.received.elapsed().as_micros() as u64 + 10;
        let d = self.wait_for(so_far);
        Ok(if d.is_zero() {
            Fired::nothing()
        } else {
            Fired::wait(d)
        })
    }
}

/// `Shape`: with an `H...` input (default `Hshape`), returns one of
/// `str_vec_len` pre-generated strings whose sizes follow the CDF in
/// `quantiles`/`sizes` (bytes); with any other input, returns the request
/// itself (an echo).
pub struct Shape {
    strings: Option<Arc<Vec<Bytes>>>,
    rand: Rand,
}

impl Shape {
    pub fn new(p: &Params, h: &HandleObjs, rand: Rand) -> Result<Self, Error> {
        let input = p.str_or("input", "Hshape")?;
        if !input.starts_with('H') {
            return Ok(Shape {
                strings: None,
                rand,
            });
        }
        let (q, sizes) = cdf(p, "sizes").map_err(Error::Input)?;
        let n = p.usize_or("str_vec_len", 1000)?;
        let strings = h.get_or_build(input, || {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5a4e);
            Ok(fit_quantiles(&q, &sizes, n)
                .into_iter()
                .map(|len| Bytes::from(gen_string(len as usize, &mut rng)))
                .collect::<Vec<Bytes>>())
        })?;
        Ok(Shape {
            strings: Some(strings),
            rand,
        })
    }

    /// Mean size of the pre-generated strings (0 when echoing).
    pub fn mean_size(&self) -> f64 {
        match &self.strings {
            Some(s) if !s.is_empty() => {
                s.iter().map(|b| b.len() as f64).sum::<f64>() / s.len() as f64
            }
            _ => 0.0,
        }
    }
}

impl Kernel for Shape {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        Ok(Fired::output(match &self.strings {
            Some(s) => s[self.rand.next() as usize % s.len()].clone(),
            None => rq.request.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn fakeio_waits_follow_the_cdf() {
        let h = HandleObjs::new();
        let m = params(json!({"quantiles": [0, 0.5, 1], "latencies": [1000, 2000, 10000]}));
        let p = Params {
            kernel: "FakeIO",
            map: &m,
        };
        let k = FakeIo::new(&p, &h, Rand::new(&h, 1)).unwrap();
        assert_eq!(k.latency_for(0), Duration::from_micros(1000));
        assert_eq!(k.latency_for(50_000), Duration::from_micros(2000));
        assert_eq!(k.latency_for(75_000), Duration::from_micros(6000));
        // One request draws once: every FakeIO of it waits the same.
        let rq = RequestObjs::new(Bytes::new());
        let a = k.fire(&rq, 0).unwrap().wait.unwrap();
        let b = k.fire(&rq, 0).unwrap().wait.unwrap();
        assert_eq!(a, b);
        // Across requests the median of the waits is near 2 ms.
        let mut w: Vec<Duration> = (0..2001)
            .map(|_| {
                k.fire(&RequestObjs::new(Bytes::new()), 0)
                    .unwrap()
                    .wait
                    .unwrap()
            })
            .collect();
        w.sort();
        let med = w[1000].as_micros() as f64;
        assert!((1800.0..2200.0).contains(&med), "median {med}");
    }

    #[test]
    fn cdf_lists_must_pair_up() {
        let h = HandleObjs::new();
        let m = params(json!({"quantiles": [0, 1], "latencies": [1, 2, 3]}));
        let e = FakeIo::new(
            &Params {
                kernel: "FakeIO",
                map: &m,
            },
            &h,
            Rand::new(&h, 0),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("params.latencies has 3"), "{e}");
        let m = params(json!({"quantiles": [0, 1.5], "sizes": [1, 2]}));
        let e = Shape::new(
            &Params {
                kernel: "Shape",
                map: &m,
            },
            &h,
            Rand::new(&h, 0),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("outside [0, 1]"), "{e}");
    }

    #[test]
    fn shape_echoes_or_draws_sized_strings() {
        let h = HandleObjs::new();
        let m = params(json!({"input": "Rshape", "quantiles": [0, 1], "sizes": [1, 1]}));
        let echo = Shape::new(
            &Params {
                kernel: "Shape",
                map: &m,
            },
            &h,
            Rand::new(&h, 0),
        )
        .unwrap();
        let rq = RequestObjs::new(Bytes::from_static(b"hello"));
        assert_eq!(&echo.fire(&rq, 0).unwrap().output[..], b"hello");

        let m =
            params(json!({"quantiles": [0, 0.5, 1], "sizes": [100, 100, 300], "str_vec_len": 100}));
        let s = Shape::new(
            &Params {
                kernel: "Shape",
                map: &m,
            },
            &h,
            Rand::new(&h, 0),
        )
        .unwrap();
        // Half the strings are 100 bytes, the rest rise linearly to 300.
        assert!((s.mean_size() - 149.0).abs() < 2.0, "{}", s.mean_size());
        let out = s.fire(&rq, 0).unwrap().output;
        assert!((100..=300).contains(&out.len()));
        assert!(out.iter().all(|c| super::super::ALPHABET.contains(c)));
    }

    #[test]
    fn delay_pads_up_to_the_next_target() {
        let m = params(json!({"quantiles": [0.5, 1.0], "latencies": [10000, 20000]}));
        let d = Delay::new(&Params {
            kernel: "Delay",
            map: &m,
        })
        .unwrap();
        // Nothing seen yet: the first target is already met by the
        // estimate (0), so the request is padded to the last one.
        assert_eq!(d.wait_for(5000), Duration::from_micros(15000));
        // A request past every target is not delayed.
        assert_eq!(d.wait_for(30000), Duration::ZERO);
        // A request between the targets goes to the last one.
        assert_eq!(d.wait_for(15000), Duration::from_micros(5000));
    }
}
