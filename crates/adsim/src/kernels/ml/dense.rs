//! `DenseFP32`: an f32 MLP forward pass, a chain of GEMMs of `batch`
//! activation rows through layers `dims[l] x dims[l + 1]`.
//!
//! As upstream: no bias; the weights are drawn from U(-0.05, 0.05) by one
//! generator seeded with 1, set by set and layer by layer, so they depend
//! only on `dims` and `nweight_sets`; instances naming the same `input`
//! share them (and must agree on `dims` and `nweight_sets`); each of the
//! `niters` passes uses weight set `rand % nweight_sets`; the input is the
//! constant 0.01 and there is no activation.
//!
//! Our extensions, for model pipelines:
//! - `from`: a request object holding a [`Tensor`] of `batch x dims[0]`,
//!   used as the input instead of the constant.
//! - `to`: a request object to store the output [`Tensor`]
//!   (`batch x dims[last]`, of the last pass) under.
//! - `relu` (false): ReLU after every layer but the last.
//! - `sigmoid_out` (false): the logistic function after the last layer.
//! - `respond` (false): the output is also the kernel's response bytes
//!   (little-endian f32, row by row).

use super::linalg::{Pool, Tensor, f32_le_bytes, matmul, relu, sigmoid};
use crate::Error;
use crate::kernels::{Fired, HandleObjs, Kernel, Params, Rand, RequestObjs, Work};
use bytes::Bytes;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// Weight sets for one `input` label: `sets[s][l]` is `dims[l] x
/// dims[l + 1]`, row-major.
pub struct DenseWeights {
    pub dims: Vec<usize>,
    pub sets: Vec<Vec<Vec<f32>>>,
}

impl DenseWeights {
    fn new(dims: &[usize], nsets: usize) -> DenseWeights {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let sets = (0..nsets)
            .map(|_| {
                dims.windows(2)
                    .map(|w| {
                        (0..w[0] * w[1])
                            .map(|_| rng.random_range(-0.05f32..0.05))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        DenseWeights {
            dims: dims.to_vec(),
            sets,
        }
    }
}

pub struct DenseFp32 {
    weights: Arc<DenseWeights>,
    batch: usize,
    niters: usize,
    from: Option<String>,
    to: Option<String>,
    relu: bool,
    sigmoid_out: bool,
    respond: bool,
    /// The constant input (when there is no `from`).
    constant: Vec<f32>,
    /// Two activation buffers per concurrent firing.
    scratch: Pool<[Vec<f32>; 2]>,
    rand: Rand,
}

impl DenseFp32 {
    pub fn new(p: &Params, h: &HandleObjs, rand: Rand) -> Result<DenseFp32, Error> {
        let dims = p.usize_list("dims")?;
        if dims.len() < 2 {
            return Err(Error::Input(format!(
                "DenseFP32 params.dims: {dims:?}: expected at least 2 layer sizes (input and output)"
            )));
        }
        if let Some(d) = dims.iter().find(|&&d| d == 0 || d > 1 << 16) {
            return Err(Error::Input(format!(
                "DenseFP32 params.dims: {d}: expected sizes 1..=65536"
            )));
        }
        let batch = p.usize_or("batch", 64)?;
        let nsets = p.usize_or("nweight_sets", 1)?;
        let niters = p.usize_or("niters", 1)?;
        for (key, v) in [
            ("batch", batch),
            ("nweight_sets", nsets),
            ("niters", niters),
        ] {
            if v == 0 || v > 1 << 20 {
                return Err(Error::Input(format!(
                    "DenseFP32 params.{key}: {v}: expected 1..=1048576"
                )));
            }
        }
        let per_set: usize = dims.windows(2).map(|w| w[0] * w[1]).sum();
        if per_set.saturating_mul(nsets) > 1 << 30 {
            return Err(Error::Input(format!(
                "DenseFP32 params.nweight_sets: {nsets} sets of {per_set} weights is too large"
            )));
        }
        let widest = *dims.iter().max().unwrap_or(&1);
        if batch.saturating_mul(widest) > 1 << 28 {
            return Err(Error::Input(format!(
                "DenseFP32 params.batch: {batch} rows of {widest} is too large"
            )));
        }
        let label = p.str_or("input", "densefp32")?;
        let weights = h.get_or_build(label, || Ok(DenseWeights::new(&dims, nsets)))?;
        if weights.dims != dims || weights.sets.len() != nsets {
            return Err(Error::Input(format!(
                "DenseFP32 params.input {label:?}: the shared weights have dims {:?} and nweight_sets {}, this kernel has dims {dims:?} and nweight_sets {nsets} (use another input label)",
                weights.dims,
                weights.sets.len()
            )));
        }
        let key = |k: &str| -> Result<Option<String>, String> {
            Ok(if p.has(k) {
                Some(p.str_or(k, "")?.to_string())
            } else {
                None
            })
        };
        let from = key("from").map_err(Error::Input)?;
        Ok(DenseFp32 {
            constant: if from.is_some() {
                Vec::new()
            } else {
                vec![0.01; batch * dims[0]]
            },
            weights,
            batch,
            niters,
            from,
            to: key("to").map_err(Error::Input)?,
            relu: p.bool_or("relu", false)?,
            sigmoid_out: p.bool_or("sigmoid_out", false)?,
            respond: p.bool_or("respond", false)?,
            scratch: Pool::default(),
            rand,
        })
    }

    /// `niters` passes over `input`; returns which scratch buffer holds
    /// the output.
    fn forward(&self, input: &[f32], bufs: &mut [Vec<f32>; 2]) -> usize {
        let dims = &self.weights.dims;
        let layers = dims.len() - 1;
        let nsets = self.weights.sets.len();
        let mut last = 0;
        for _ in 0..self.niters {
            let set = if nsets > 1 {
                &self.weights.sets[self.rand.next() as usize % nsets]
            } else {
                &self.weights.sets[0]
            };
            for l in 0..layers {
                let (n, k) = (dims[l + 1], dims[l]);
                let out_i = l % 2;
                let [b0, b1] = bufs;
                let (out, prev) = if out_i == 0 { (b0, &*b1) } else { (b1, &*b0) };
                let x = if l == 0 {
                    input
                } else {
                    &prev[..self.batch * k]
                };
                let out = &mut out[..self.batch * n];
                matmul(out, x, &set[l], self.batch, n, k);
                if l + 1 < layers {
                    if self.relu {
                        relu(out);
                    }
                } else if self.sigmoid_out {
                    sigmoid(out);
                }
                last = out_i;
            }
        }
        last
    }
}

impl Kernel for DenseFp32 {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let dims = &self.weights.dims;
        let from = match &self.from {
            None => None,
            Some(key) => {
                let t = rq.need::<Tensor>(key)?;
                if (t.rows, t.cols) != (self.batch, dims[0]) {
                    return Err(Error::Input(format!(
                        "DenseFP32: request object {key:?} is {} x {}, expected batch x dims[0] = {} x {}",
                        t.rows, t.cols, self.batch, dims[0]
                    )));
                }
                Some(t)
            }
        };
        let input: &[f32] = from.as_ref().map_or(&self.constant, |t| &t.data);
        let widest = *dims.iter().max().unwrap_or(&1);
        let mut bufs = self.scratch.take(|| {
            [
                vec![0.0; self.batch * widest],
                vec![0.0; self.batch * widest],
            ]
        });
        let at = self.forward(input, &mut bufs);
        let out = &bufs[at][..self.batch * dims[dims.len() - 1]];
        let fired = if self.respond {
            Fired::output(Bytes::from(f32_le_bytes(out)))
        } else {
            std::hint::black_box(out);
            Fired::nothing()
        };
        if let Some(key) = &self.to {
            rq.put(
                key,
                Tensor::new(self.batch, dims[dims.len() - 1], out.to_vec())?,
            );
        }
        self.scratch.give(bufs);
        Ok(fired)
    }

    fn work(&self) -> Work {
        let d = &self.weights.dims;
        let macs: usize = d.windows(2).map(|w| w[0] * w[1]).sum();
        Work {
            flops: 2.0 * (self.batch * macs * self.niters) as f64,
            bytes: 4.0 * (macs * self.niters) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::linalg::tests::{close, naive};
    use super::*;
    use serde_json::json;

    fn dense(h: &HandleObjs, v: serde_json::Value) -> Result<DenseFp32, String> {
        let map = v.as_object().unwrap().clone();
        let p = Params {
            kernel: "DenseFP32",
            map: &map,
        };
        DenseFp32::new(&p, h, Rand::new(h, 3)).map_err(String::from)
    }

    /// The reference forward pass over weight set `s`.
    fn reference(
        w: &DenseWeights,
        s: usize,
        x: &[f32],
        batch: usize,
        relu_: bool,
        sig: bool,
    ) -> Vec<f32> {
        let mut x = x.to_vec();
        let n = w.dims.len() - 1;
        for l in 0..n {
            x = naive(&x, &w.sets[s][l], batch, w.dims[l + 1], w.dims[l]);
            if l + 1 < n && relu_ {
                x.iter_mut().for_each(|v| *v = v.max(0.0));
            }
        }
        if sig {
            x.iter_mut().for_each(|v| *v = 1.0 / (1.0 + (-*v).exp()));
        }
        x
    }

    #[test]
    fn the_upstream_pass_multiplies_the_constant_input() {
        let h = HandleObjs::new();
        let d = dense(
            &h,
            json!({"dims": [8, 16, 4], "batch": 3, "niters": 2, "to": "Rout"}),
        )
        .unwrap();
        assert_eq!(d.work().flops, 2.0 * 3.0 * (8.0 * 16.0 + 16.0 * 4.0) * 2.0);
        let w = &d.weights;
        assert!(w.sets[0][0].iter().all(|v| v.abs() <= 0.05));
        assert!(w.sets[0][0].iter().any(|&v| v != w.sets[0][0][0]));
        let rq = RequestObjs::new(Bytes::new());
        assert!(d.fire(&rq, 0).unwrap().output.is_empty());
        let out = rq.need::<Tensor>("Rout").unwrap();
        assert_eq!((out.rows, out.cols), (3, 4));
        close(
            &out.data,
            &reference(w, 0, &[0.01; 24], 3, false, false),
            1e-5,
        );
        // No activation: negative outputs survive.
        assert!(out.data.iter().any(|&v| v < 0.0));
    }

    #[test]
    fn extensions_read_and_write_request_tensors_with_activations() {
        let h = HandleObjs::new();
        let d = dense(
            &h,
            json!({"dims": [5, 12, 7, 2], "batch": 4, "nweight_sets": 3, "relu": true,
                   "sigmoid_out": true, "from": "Rin", "to": "Rout", "respond": true, "input": "Hmlp"}),
        )
        .unwrap();
        assert_eq!(d.weights.sets.len(), 3);
        let x: Vec<f32> = (0..20).map(|i| (i as f32 - 9.5) * 0.3).collect();
        let rq = RequestObjs::new(Bytes::new());
        rq.put("Rin", Tensor::new(4, 5, x.clone()).unwrap());
        let fired = d.fire(&rq, 0).unwrap();
        let out = rq.need::<Tensor>("Rout").unwrap();
        assert_eq!((out.rows, out.cols), (4, 2));
        assert_eq!(
            fired.output.to_vec(),
            out.to_le_bytes(),
            "the response is the output"
        );
        assert!(out.data.iter().all(|&v| v > 0.0 && v < 1.0));
        // The output is one of the weight sets' results (the set drawn).
        let matches: Vec<usize> = (0..3)
            .filter(|&s| {
                let r = reference(&d.weights, s, &x, 4, true, true);
                r.iter().zip(&out.data).all(|(a, b)| (a - b).abs() < 1e-5)
            })
            .collect();
        assert_eq!(matches.len(), 1, "{matches:?}");
        // ReLU matters: without it the result differs.
        let s = matches[0];
        let plain = reference(&d.weights, s, &x, 4, false, true);
        assert!(
            plain
                .iter()
                .zip(&out.data)
                .any(|(a, b)| (a - b).abs() > 1e-6)
        );
    }

    #[test]
    fn shapes_and_shared_weights_are_checked() {
        let h = HandleObjs::new();
        let a = dense(&h, json!({"dims": [4, 3], "from": "Rx", "batch": 2})).unwrap();
        let b = dense(&h, json!({"dims": [4, 3], "batch": 7})).unwrap();
        assert!(Arc::ptr_eq(&a.weights, &b.weights), "same default label");
        let e = dense(&h, json!({"dims": [4, 5]})).err().unwrap();
        assert!(
            e.contains("\"densefp32\"") && e.contains("[4, 3]") && e.contains("[4, 5]"),
            "{e}"
        );
        let e = dense(&h, json!({"dims": [4, 3], "nweight_sets": 2}))
            .err()
            .unwrap();
        assert!(
            e.contains("nweight_sets 1") && e.contains("nweight_sets 2"),
            "{e}"
        );
        let e = dense(&h, json!({"dims": [4]})).err().unwrap();
        assert!(e.contains("params.dims") && e.contains("at least 2"), "{e}");
        let e = dense(&h, json!({"dims": [4, 0], "input": "x"}))
            .err()
            .unwrap();
        assert!(e.contains("params.dims: 0"), "{e}");
        let rq = RequestObjs::new(Bytes::new());
        let e = a.fire(&rq, 0).unwrap_err().to_string();
        assert!(e.contains("\"Rx\""), "{e}");
        rq.put("Rx", Tensor::zeros(2, 5));
        let e = a.fire(&rq, 0).unwrap_err().to_string();
        assert!(
            e.contains("\"Rx\" is 2 x 5, expected batch x dims[0] = 2 x 4"),
            "{e}"
        );
    }
}
