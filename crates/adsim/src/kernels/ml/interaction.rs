//! `Interaction` (ours): DLRM's dot-product feature interaction.
//!
//! Inputs: `dense`, a [`Tensor`] `batch x d` (the bottom MLP's output),
//! and `embeddings`, a [`Tensor`] `batch x (T * d)` (the pooled vectors
//! of T tables, as `Embedding` writes). For each sample the T + 1 vectors
//! (dense first) form a `(T + 1) x d` matrix Z; its Gram matrix Z Z^T is
//! one GEMM, and the output row is the dense vector followed by the
//! strict upper triangle of Z Z^T row by row ((0,1), (0,2), ..., (1,2),
//! ...): `d + (T + 1) T / 2` values, stored as a [`Tensor`] under
//! `output` when given.
//!
//! `batch`, `tables` and `dim`, when given, are checked against the
//! inputs (and make `work()` and the stand-alone run possible).

use super::linalg::{Pool, Tensor, gram};
use crate::Error;
use crate::kernels::{Fired, Kernel, Params, RequestObjs, Work};

pub struct Interaction {
    dense: String,
    embeddings: String,
    output: Option<String>,
    batch: Option<usize>,
    tables: Option<usize>,
    dim: Option<usize>,
    scratch: Pool<(Vec<f32>, Vec<f32>)>,
}

impl Interaction {
    pub fn new(p: &Params) -> Result<Interaction, Error> {
        let key = |k: &str| -> Result<Option<String>, String> {
            Ok(if p.has(k) {
                Some(p.str_or(k, "")?.to_string())
            } else {
                None
            })
        };
        let shape = |k: &str, max: usize| -> Result<Option<usize>, Error> {
            if !p.has(k) {
                return Ok(None);
            }
            let v = p.usize(k)?;
            if v == 0 || v > max {
                return Err(Error::Input(format!(
                    "Interaction params.{k}: {v}: expected 1..={max}"
                )));
            }
            Ok(Some(v))
        };
        let need = |k: &str| {
            key(k).map_err(Error::Input)?.ok_or_else(|| {
                Error::Input(format!(
                    "Interaction params.{k}: missing (a request object key)"
                ))
            })
        };
        Ok(Interaction {
            dense: need("dense")?,
            embeddings: need("embeddings")?,
            output: key("output").map_err(Error::Input)?,
            batch: shape("batch", 1 << 20)?,
            tables: shape("tables", 4096)?,
            dim: shape("dim", 1 << 16)?,
            scratch: Pool::default(),
        })
    }

    /// The shape the params promise, when all are given.
    pub fn shape(&self) -> Option<(usize, usize, usize)> {
        Some((self.batch?, self.tables?, self.dim?))
    }

    /// The interaction of `x` (batch x d) and `e` (batch x T*d).
    pub fn compute(&self, x: &Tensor, e: &Tensor) -> Result<Tensor, Error> {
        let (dk, ek) = (&self.dense, &self.embeddings);
        let (b, d) = (x.rows, x.cols);
        if e.rows != b {
            return Err(Error::Input(format!(
                "Interaction: request objects {dk:?} and {ek:?} have {b} and {} rows (one per sample in both)",
                e.rows
            )));
        }
        if d == 0 || e.cols == 0 || !e.cols.is_multiple_of(d) {
            return Err(Error::Input(format!(
                "Interaction: request object {ek:?} has {} columns, not a whole number of {dk:?}'s {d}-wide vectors",
                e.cols
            )));
        }
        let t = e.cols / d;
        for (k, want, got) in [
            ("batch", self.batch, b),
            ("tables", self.tables, t),
            ("dim", self.dim, d),
        ] {
            if let Some(w) = want
                && w != got
            {
                return Err(Error::Input(format!(
                    "Interaction params.{k}: {w}, but the inputs {dk:?} ({b} x {d}) and {ek:?} ({} x {}) give {got}",
                    e.rows, e.cols
                )));
            }
        }
        let r = t + 1;
        let width = d + r * t / 2;
        let mut out = vec![0.0f32; b * width];
        let (mut z, mut g) = self.scratch.take(|| (Vec::new(), Vec::new()));
        z.resize(r * d, 0.0);
        g.resize(r * r, 0.0);
        for (s, o) in out.chunks_exact_mut(width).enumerate() {
            let xs = x.row(s);
            z[..d].copy_from_slice(xs);
            z[d..].copy_from_slice(e.row(s));
            gram(&mut g, &z, r, d);
            o[..d].copy_from_slice(xs);
            let mut k = d;
            for i in 0..r {
                let n = r - i - 1;
                o[k..k + n].copy_from_slice(&g[i * r + i + 1..(i + 1) * r]);
                k += n;
            }
        }
        self.scratch.give((z, g));
        Tensor::new(b, width, out)
    }
}

impl Kernel for Interaction {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let x = rq.need::<Tensor>(&self.dense)?;
        let e = rq.need::<Tensor>(&self.embeddings)?;
        let out = self.compute(&x, &e)?;
        match &self.output {
            Some(k) => rq.put(k, out),
            None => {
                std::hint::black_box(&out);
            }
        }
        Ok(Fired::nothing())
    }

    /// The Gram matrices (when `batch`, `tables` and `dim` are given).
    fn work(&self) -> Work {
        match self.shape() {
            Some((b, t, d)) => Work {
                flops: 2.0 * (b * (t + 1) * (t + 1) * d) as f64,
                bytes: 4.0 * (b * (t + 1) * d) as f64,
            },
            None => Work::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    fn interaction(v: serde_json::Value) -> Result<Interaction, String> {
        let map = v.as_object().unwrap().clone();
        Interaction::new(&Params {
            kernel: "Interaction",
            map: &map,
        })
        .map_err(String::from)
    }

    #[test]
    fn pairwise_dots_follow_the_dense_vector() {
        let k = interaction(json!({"dense": "Rx", "embeddings": "Re", "output": "Ro",
                                   "batch": 3, "tables": 4, "dim": 5}))
        .unwrap();
        assert_eq!(k.work().flops, 2.0 * 3.0 * 25.0 * 5.0);
        let (b, t, d) = (3, 4, 5);
        let x: Vec<f32> = (0..b * d).map(|i| (i % 7) as f32 - 3.0).collect();
        let e: Vec<f32> = (0..b * t * d)
            .map(|i| ((i * 3) % 11) as f32 * 0.5 - 2.0)
            .collect();
        let rq = RequestObjs::new(Bytes::new());
        rq.put("Rx", Tensor::new(b, d, x.clone()).unwrap());
        rq.put("Re", Tensor::new(b, t * d, e.clone()).unwrap());
        k.fire(&rq, 0).unwrap();
        let o = rq.need::<Tensor>("Ro").unwrap();
        assert_eq!((o.rows, o.cols), (3, 5 + 10));
        for s in 0..b {
            // Vector v of sample s: the dense one, then table v - 1's.
            let vec_of = |v: usize| -> Vec<f32> {
                if v == 0 {
                    x[s * d..(s + 1) * d].to_vec()
                } else {
                    e[s * t * d + (v - 1) * d..s * t * d + v * d].to_vec()
                }
            };
            let mut want = vec_of(0);
            for i in 0..=t {
                for j in i + 1..=t {
                    want.push(vec_of(i).iter().zip(vec_of(j)).map(|(a, b)| a * b).sum());
                }
            }
            assert_eq!(o.row(s), &want[..], "sample {s}");
        }
    }

    #[test]
    fn mismatched_inputs_name_the_keys() {
        let k = interaction(json!({"dense": "Rx", "embeddings": "Re"})).unwrap();
        assert_eq!(k.work(), Work::default());
        let rq = RequestObjs::new(Bytes::new());
        let e = k.fire(&rq, 0).unwrap_err().to_string();
        assert!(e.contains("\"Rx\""), "{e}");
        rq.put("Rx", Tensor::zeros(2, 4));
        rq.put("Re", Tensor::zeros(3, 8));
        let e = k.fire(&rq, 0).unwrap_err().to_string();
        assert!(e.contains("\"Rx\" and \"Re\" have 2 and 3 rows"), "{e}");
        let e = k
            .compute(&Tensor::zeros(2, 4), &Tensor::zeros(2, 6))
            .unwrap_err();
        assert!(e.to_string().contains("\"Re\" has 6 columns"), "{e}");
        let k = interaction(json!({"dense": "Rx", "embeddings": "Re", "tables": 3})).unwrap();
        let e = k
            .compute(&Tensor::zeros(2, 4), &Tensor::zeros(2, 8))
            .unwrap_err();
        assert!(
            e.to_string().contains("params.tables: 3") && e.to_string().contains("give 2"),
            "{e}"
        );
        let e = interaction(json!({"dense": "Rx"})).err().unwrap();
        assert!(e.contains("Interaction params.embeddings: missing"), "{e}");
        // Without an output key the result is computed and dropped.
        let rq = RequestObjs::new(Bytes::new());
        rq.put("Rx", Tensor::zeros(2, 4));
        rq.put("Re", Tensor::zeros(2, 12));
        assert!(k.fire(&rq, 0).is_ok());
    }
}
