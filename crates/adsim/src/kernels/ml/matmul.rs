//! `GEMM`: upstream's matrix-multiply kernel, in f32.
//!
//! Upstream multiplies u8 x i8 matrices with fbgemm; ours multiplies f32
//! matrices with the `gemm` crate (AVX-512/AVX2 kernels picked at run
//! time). A (M x K) and B (K x N) hold upstream's value ranges (A in
//! 0..=5, B in -4..=4, drawn from the shared random cycle), so every
//! product is exact in f32. Instances naming the same `input` share A and
//! B. Each of the `max(nthreads, 1)` parts computes C = A B `niters`
//! times into a C buffer of its own, taken from a pool.

use super::linalg::{Pool, matmul};
use crate::Error;
use crate::kernels::{Fired, HandleObjs, Kernel, Params, Rand, RequestObjs, Work};
use std::sync::Arc;

/// The shared A and B of one `input` label.
pub struct GemmInputs {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
}

pub struct Gemm {
    inputs: Arc<GemmInputs>,
    niters: usize,
    parts: usize,
    out: Pool<Vec<f32>>,
}

impl Gemm {
    pub fn new(p: &Params, h: &HandleObjs, rand: Rand) -> Result<Gemm, Error> {
        let (m, n, k) = (p.usize("M")?, p.usize("N")?, p.usize("K")?);
        for (key, v) in [("M", m), ("N", n), ("K", k)] {
            if v == 0 || v > 1 << 20 {
                return Err(Error::Input(format!(
                    "GEMM params.{key}: {v}: expected 1..=1048576"
                )));
            }
        }
        if m.saturating_mul(k)
            .max(k.saturating_mul(n))
            .max(m.saturating_mul(n))
            > 1 << 28
        {
            return Err(Error::Input(format!(
                "GEMM params.M/N/K: {m} x {n} x {k}: a matrix over 2^28 elements is too large"
            )));
        }
        let niters = p.usize_or("niters", 1)?.max(1);
        let parts = p.usize_or("nthreads", 0)?.max(1);
        let label = p.str_or("input", "Hfbgemm")?;
        let inputs = h.get_or_build(label, || {
            let a = (0..m * k).map(|_| (rand.next() % 6) as f32).collect();
            let b = (0..k * n).map(|_| (rand.next() % 9) as f32 - 4.0).collect();
            Ok(GemmInputs { m, n, k, a, b })
        })?;
        if (inputs.m, inputs.n, inputs.k) != (m, n, k) {
            return Err(Error::Input(format!(
                "GEMM params.input {label:?}: shared with a GEMM of {} x {} x {}, this one is {m} x {n} x {k} (use another input label)",
                inputs.m, inputs.n, inputs.k
            )));
        }
        Ok(Gemm {
            inputs,
            niters,
            parts,
            out: Pool::default(),
        })
    }

    /// One part's work: `niters` products into `c`.
    fn run(&self, c: &mut [f32]) {
        let i = &self.inputs;
        for _ in 0..self.niters {
            matmul(c, &i.a, &i.b, i.m, i.n, i.k);
            std::hint::black_box(&mut *c);
        }
    }
}

impl Kernel for Gemm {
    fn fire(&self, _rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let mut c = self.out.take(|| vec![0.0; self.inputs.m * self.inputs.n]);
        self.run(&mut c);
        self.out.give(c);
        Ok(Fired::nothing())
    }

    fn parts(&self) -> usize {
        self.parts
    }

    fn work(&self) -> Work {
        let i = &self.inputs;
        Work {
            flops: 2.0 * (i.m * i.n * i.k * self.niters) as f64,
            bytes: 4.0 * (i.m * i.k + i.k * i.n + i.m * i.n) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::linalg::tests::naive;
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    fn gemm(h: &HandleObjs, v: serde_json::Value, fidx: u32) -> Result<Gemm, String> {
        let map = v.as_object().unwrap().clone();
        let p = Params {
            kernel: "GEMM",
            map: &map,
        };
        Gemm::new(&p, h, Rand::new(h, fidx)).map_err(String::from)
    }

    #[test]
    fn gemm_computes_the_exact_product_of_shared_inputs() {
        let h = HandleObjs::new();
        let g = gemm(
            &h,
            json!({"M": 9, "N": 7, "K": 33, "nthreads": 3, "niters": 2, "input": "Hg"}),
            0,
        )
        .unwrap();
        assert_eq!(g.parts(), 3);
        assert_eq!(g.work().flops, 2.0 * 9.0 * 7.0 * 33.0 * 2.0);
        let i = &g.inputs;
        assert!(
            i.a.iter()
                .all(|&x| (0.0..=5.0).contains(&x) && x.fract() == 0.0)
        );
        assert!(i.b.iter().all(|&x| (-4.0..=4.0).contains(&x)));
        assert!(i.a.iter().any(|&x| x != i.a[0]), "A is not constant");
        let mut c = vec![f32::NAN; 9 * 7];
        g.run(&mut c);
        assert_eq!(c, naive(&i.a, &i.b, 9, 7, 33));
        let rq = RequestObjs::new(Bytes::new());
        for part in 0..3 {
            assert!(g.fire(&rq, part).unwrap().output.is_empty());
        }
        // Another instance with the same label shares A and B; another
        // label gets its own.
        let g2 = gemm(&h, json!({"M": 9, "N": 7, "K": 33, "input": "Hg"}), 5).unwrap();
        assert!(Arc::ptr_eq(&g.inputs, &g2.inputs));
        assert_eq!(g2.parts(), 1);
        let g3 = gemm(&h, json!({"M": 9, "N": 7, "K": 33, "input": "Hother"}), 5).unwrap();
        assert!(!Arc::ptr_eq(&g.inputs, &g3.inputs));
        // A different shape under the same label is an error.
        let e = gemm(&h, json!({"M": 9, "N": 8, "K": 33, "input": "Hg"}), 1)
            .err()
            .unwrap();
        assert!(e.contains("\"Hg\"") && e.contains("9 x 7 x 33"), "{e}");
        let e = gemm(&h, json!({"M": 0, "N": 8, "K": 33}), 1).err().unwrap();
        assert!(e.contains("GEMM params.M"), "{e}");
        let e = gemm(&h, json!({"M": 4, "K": 33}), 1).err().unwrap();
        assert!(e.contains("GEMM params.N: missing"), "{e}");
    }
}
