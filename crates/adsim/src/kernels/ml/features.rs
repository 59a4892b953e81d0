//! `Features` (ours, for model_a): turns the request body into a batch of
//! model inputs, so the work depends on the request's content and grows
//! with its size.
//!
//! The body is cut into `batch` equal segments (sample `b` gets bytes
//! `b*len/batch..(b+1)*len/batch`), and each segment is hashed whole. From
//! sample `b`'s hash and bytes:
//! - dense features: `dense_dim` values, the segment's bytes (cycled)
//!   XORed with a stream drawn from the hash, mapped to -1..1 (v / 127.5 -
//!   1), stored as a `batch x dense_dim` [`Tensor`] under `dense_out`;
//! - sparse features: per table, a bag of `bag_size_min..=bag_size_max`
//!   indices in `0..rows` (and weights in 0.5..1.5 when `weighted`), all
//!   drawn from the hash, stored as [`SparseFeatures`] under `sparse_out`.
//!
//! Params: `batch` (160), `dense_dim` (256), `tables`, `rows` (per table),
//! `bag_size_min` (1), `bag_size_max` (5), `weighted` (false),
//! `dense_out`, `sparse_out` (each stored only when given).

use super::linalg::{Bags, SparseFeatures, Tensor};
use crate::Error;
use crate::kernels::{Fired, Kernel, Params, RequestObjs, Work};

pub struct Features {
    batch: usize,
    dense_dim: usize,
    tables: usize,
    rows: u64,
    bag_min: usize,
    bag_max: usize,
    weighted: bool,
    dense_out: Option<String>,
    sparse_out: Option<String>,
}

/// splitmix64's finaliser.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A 64-bit hash of `bytes`, 8 bytes a step.
pub fn hash_bytes(bytes: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(29) ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    h = (h.rotate_left(29) ^ u64::from_le_bytes(tail)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    mix(h ^ bytes.len() as u64)
}

/// `x` scaled into `0..n` (the high half of the 128-bit product).
#[inline]
fn below(x: u64, n: u64) -> u64 {
    ((u128::from(x) * u128::from(n)) >> 64) as u64
}

impl Features {
    pub fn new(p: &Params) -> Result<Features, Error> {
        let batch = p.usize_or("batch", 160)?;
        let dense_dim = p.usize_or("dense_dim", 256)?;
        let tables = p.usize("tables")?;
        let rows = p.u64("rows")?;
        let bag_min = p.usize_or("bag_size_min", 1)?;
        let bag_max = p.usize_or("bag_size_max", 5)?;
        for (key, v, max) in [
            ("batch", batch, 1 << 20),
            ("dense_dim", dense_dim, 1 << 16),
            ("tables", tables, 4096),
        ] {
            if v == 0 || v > max {
                return Err(Error::Input(format!(
                    "Features params.{key}: {v}: expected 1..={max}"
                )));
            }
        }
        if rows == 0 || rows > u64::from(u32::MAX) {
            return Err(Error::Input(format!(
                "Features params.rows: {rows}: expected 1..={}",
                u32::MAX
            )));
        }
        if bag_min > bag_max || bag_max > 1 << 16 {
            return Err(Error::Input(format!(
                "Features params.bag_size_min/bag_size_max: {bag_min}..={bag_max}: expected min <= max <= 65536"
            )));
        }
        if batch * dense_dim > 1 << 28 || batch * tables * bag_max > 1 << 30 {
            return Err(Error::Input(format!(
                "Features params.batch: {batch} samples of {dense_dim} dense values and {tables} bags of up to {bag_max} is too large"
            )));
        }
        let key = |k: &str| -> Result<Option<String>, String> {
            Ok(if p.has(k) {
                Some(p.str_or(k, "")?.to_string())
            } else {
                None
            })
        };
        Ok(Features {
            batch,
            dense_dim,
            tables,
            rows,
            bag_min,
            bag_max,
            weighted: p.bool_or("weighted", false)?,
            dense_out: key("dense_out").map_err(Error::Input)?,
            sparse_out: key("sparse_out").map_err(Error::Input)?,
        })
    }

    /// The dense and sparse features of a request body.
    pub fn extract(&self, body: &[u8]) -> (Tensor, SparseFeatures) {
        let (n, d) = (self.batch, self.dense_dim);
        let mut dense = vec![0.0f32; n * d];
        let mut bags: Vec<Bags> = (0..self.tables)
            .map(|_| Bags {
                offsets: Vec::with_capacity(n + 1),
                indices: Vec::with_capacity(n * (self.bag_min + self.bag_max) / 2),
                weights: self.weighted.then(Vec::new),
            })
            .collect();
        let span = (self.bag_max - self.bag_min + 1) as u64;
        for (b, row) in dense.chunks_exact_mut(d).enumerate() {
            let seg = &body[b * body.len() / n..(b + 1) * body.len() / n];
            let h = hash_bytes(seg, mix(b as u64 + 1));
            let mut at = 0;
            for (c, chunk) in row.chunks_mut(8).enumerate() {
                let r = mix(h ^ (c as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F));
                for (k, o) in chunk.iter_mut().enumerate() {
                    let byte = match seg.get(at) {
                        Some(&v) => v,
                        None => {
                            at = 0;
                            seg.first().copied().unwrap_or(0)
                        }
                    };
                    at += 1;
                    let v = byte ^ (r >> (8 * k)) as u8;
                    *o = f32::from(v) / 127.5 - 1.0;
                }
            }
            for (t, tb) in bags.iter_mut().enumerate() {
                let s = mix(h ^ (t as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
                let len = self.bag_min + (s % span) as usize;
                tb.offsets.push(tb.indices.len() as u32);
                for j in 0..len {
                    let x = mix(s.wrapping_add(j as u64 + 1));
                    tb.indices.push(below(x, self.rows) as u32);
                    if let Some(w) = &mut tb.weights {
                        w.push(0.5 + (x & 0xFF_FFFF) as f32 / 16_777_216.0);
                    }
                }
            }
        }
        for tb in &mut bags {
            tb.offsets.push(tb.indices.len() as u32);
        }
        (
            Tensor {
                rows: n,
                cols: d,
                data: dense,
            },
            SparseFeatures {
                batch: n,
                tables: bags,
            },
        )
    }
}

impl Kernel for Features {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let (dense, sparse) = self.extract(&rq.request);
        match &self.dense_out {
            Some(k) => rq.put(k, dense),
            None => {
                std::hint::black_box(&dense);
            }
        }
        match &self.sparse_out {
            Some(k) => rq.put(k, sparse),
            None => {
                std::hint::black_box(&sparse);
            }
        }
        Ok(Fired::nothing())
    }

    /// The features made (the request's own bytes are not known here).
    fn work(&self) -> Work {
        let mean_bag = (self.bag_min + self.bag_max) as f64 / 2.0;
        Work {
            flops: 0.0,
            bytes: (self.batch * self.dense_dim * 4) as f64
                + self.batch as f64
                    * self.tables as f64
                    * mean_bag
                    * if self.weighted { 8.0 } else { 4.0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    fn features(v: serde_json::Value) -> Result<Features, String> {
        let map = v.as_object().unwrap().clone();
        Features::new(&Params {
            kernel: "Features",
            map: &map,
        })
        .map_err(String::from)
    }

    #[test]
    fn features_come_from_the_request_bytes() {
        let f = features(json!({"batch": 6, "dense_dim": 10, "tables": 3, "rows": 50,
                                "bag_size_min": 1, "bag_size_max": 4, "weighted": true,
                                "dense_out": "Rd", "sparse_out": "Rs"}))
        .unwrap();
        let body: Vec<u8> = (0..600u32).map(|i| (i * 31 % 251) as u8).collect();
        let rq = RequestObjs::new(Bytes::from(body.clone()));
        f.fire(&rq, 0).unwrap();
        let d = rq.need::<Tensor>("Rd").unwrap();
        let s = rq.need::<SparseFeatures>("Rs").unwrap();
        assert_eq!((d.rows, d.cols), (6, 10));
        assert!(d.data.iter().all(|v| (-1.0..=1.0).contains(v)));
        assert_eq!((s.batch, s.tables.len()), (6, 3));
        let mut lens = Vec::new();
        for t in &s.tables {
            assert_eq!(t.check("t").unwrap(), 6);
            assert!(t.indices.iter().all(|&i| i < 50));
            assert!(
                t.weights
                    .as_ref()
                    .unwrap()
                    .iter()
                    .all(|w| (0.5..1.5).contains(w))
            );
            lens.extend(t.offsets.windows(2).map(|w| w[1] - w[0]));
        }
        assert!(lens.iter().all(|l| (1..=4).contains(l)));
        assert!(
            lens.iter().any(|&l| l != lens[0]),
            "bag sizes vary: {lens:?}"
        );
        // Deterministic, and each sample depends on its own segment only.
        let (d2, s2) = f.extract(&body);
        assert_eq!((&d2, &s2), (&*d, &*s));
        let mut other = body.clone();
        other[599] ^= 1; // in sample 5's segment
        let (d3, s3) = f.extract(&other);
        assert_eq!(d3.data[..50], d.data[..50]);
        assert_ne!(d3.row(5), d.row(5));
        assert_eq!(s3.tables[0].bag(0), s.tables[0].bag(0));
        assert!((0..3).any(|t| s3.tables[t].bag(5) != s.tables[t].bag(5)));
        // A short body (fewer bytes than samples) still gives features.
        let (d4, s4) = f.extract(b"ab");
        assert_eq!(d4.data.len(), 60);
        assert_eq!(s4.tables[2].check("t").unwrap(), 6);
        let (d5, _) = f.extract(b"");
        assert!(d5.data.iter().any(|&v| v != d5.data[0]));
    }

    #[test]
    fn the_hash_covers_every_byte_and_bad_params_are_named() {
        let a = vec![7u8; 1000];
        let h = hash_bytes(&a, 1);
        for i in [0, 500, 993, 999] {
            let mut b = a.clone();
            b[i] = 8;
            assert_ne!(hash_bytes(&b, 1), h, "byte {i}");
        }
        assert_ne!(hash_bytes(&a[..999], 1), h);
        assert_ne!(hash_bytes(&a, 2), h);
        let e = features(json!({"tables": 2, "rows": 9, "bag_size_min": 4, "bag_size_max": 2}))
            .err()
            .unwrap();
        assert!(
            e.contains("Features params.bag_size_min/bag_size_max: 4..=2"),
            "{e}"
        );
        let e = features(json!({"tables": 2})).err().unwrap();
        assert!(e.contains("Features params.rows: missing"), "{e}");
        let e = features(json!({"tables": 0, "rows": 3})).err().unwrap();
        assert!(e.contains("Features params.tables: 0"), "{e}");
    }
}
