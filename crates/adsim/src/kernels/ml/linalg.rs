//! The data the ML kernels pass each other through [`RequestObjs`]
//! (dense [`Tensor`]s and [`SparseFeatures`]), the safe wrappers over the
//! `gemm` crate's f32 kernels, and a small buffer pool.
//!
//! [`RequestObjs`]: crate::kernels::RequestObjs

use crate::Error;
use std::sync::Mutex;

/// A dense row-major f32 matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub rows: usize,
    pub cols: usize,
    /// `rows * cols` values, row by row.
    pub data: Vec<f32>,
}

impl Tensor {
    /// A `rows x cols` tensor over `data`; the length must match.
    pub fn new(rows: usize, cols: usize, data: Vec<f32>) -> Result<Tensor, Error> {
        if rows.checked_mul(cols) != Some(data.len()) {
            return Err(Error::Input(format!(
                "a {rows} x {cols} tensor needs {} values, got {}",
                rows.saturating_mul(cols),
                data.len()
            )));
        }
        Ok(Tensor { rows, cols, data })
    }

    pub fn zeros(rows: usize, cols: usize) -> Tensor {
        Tensor {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// The values as little-endian f32 bytes, row by row.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        f32_le_bytes(&self.data)
    }
}

/// `v` as little-endian f32 bytes.
pub fn f32_le_bytes(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// The bags of one table for a batch: bag `b` looks up
/// `indices[offsets[b]..offsets[b + 1]]` (with `weights` at the same
/// positions when the bags are weighted).
#[derive(Debug, Clone, PartialEq)]
pub struct Bags {
    /// `batch + 1` non-decreasing positions into `indices`, from 0 to
    /// `indices.len()`.
    pub offsets: Vec<u32>,
    pub indices: Vec<u32>,
    pub weights: Option<Vec<f32>>,
}

impl Bags {
    /// The bag count, after checking that the offsets and weights fit the
    /// indices (`what` names the data in errors).
    pub fn check(&self, what: &str) -> Result<usize, Error> {
        let n = self.indices.len();
        let ok = self.offsets.first() == Some(&0)
            && self.offsets.last().map(|&o| o as usize) == Some(n)
            && self.offsets.windows(2).all(|w| w[0] <= w[1]);
        if !ok {
            return Err(Error::Input(format!(
                "{what}: the bag offsets do not run from 0 up to the {n} indices"
            )));
        }
        if let Some(w) = &self.weights
            && w.len() != n
        {
            return Err(Error::Input(format!(
                "{what}: {} weights for {n} indices",
                w.len()
            )));
        }
        Ok(self.offsets.len() - 1)
    }

    /// Bag `b`'s indices and weights.
    pub fn bag(&self, b: usize) -> (&[u32], Option<&[f32]>) {
        let (lo, hi) = (self.offsets[b] as usize, self.offsets[b + 1] as usize);
        (
            &self.indices[lo..hi],
            self.weights.as_ref().map(|w| &w[lo..hi]),
        )
    }
}

/// Sparse features of a batch: per embedding table, one bag per sample
/// (what `Features` writes and `Embedding` reads with `indices_from`).
#[derive(Debug, Clone, PartialEq)]
pub struct SparseFeatures {
    pub batch: usize,
    pub tables: Vec<Bags>,
}

/// `c = a * b` with `c` row-major (m x n), `a` row-major (m x k) and `b`
/// (k x n) read with row stride `b_rs` and column stride `b_cs`, on the
/// calling thread.
fn gemm_f32(
    c: &mut [f32],
    a: &[f32],
    b: &[f32],
    (m, n, k): (usize, usize, usize),
    (b_rs, b_cs): (usize, usize),
) {
    if m == 0 || n == 0 {
        return;
    }
    let b_extent = if k == 0 {
        0
    } else {
        (k - 1) * b_rs + (n - 1) * b_cs + 1
    };
    assert!(
        a.len() >= m * k && b.len() >= b_extent && c.len() >= m * n,
        "gemm: buffers too small for {m} x {n} x {k}"
    );
    // SAFETY: the assert keeps every access, with these strides, inside the
    // three slices; `c` is borrowed mutably so it does not alias `a` or `b`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            b_cs as isize,
            b_rs as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// `c = a * b` for row-major `a` (m x k), `b` (k x n) and `c` (m x n), on
/// the calling thread.
pub fn matmul(c: &mut [f32], a: &[f32], b: &[f32], m: usize, n: usize, k: usize) {
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "matmul: buffers too small for {m} x {n} x {k}"
    );
    gemm_f32(c, a, b, (m, n, k), (n, 1));
}

/// The Gram matrix `g = z * z^T` of the `r` rows of length `d` in `z`
/// (row-major), into `g` (r x r, row-major).
pub fn gram(g: &mut [f32], z: &[f32], r: usize, d: usize) {
    assert!(
        z.len() >= r * d && g.len() >= r * r,
        "gram: buffers too small for {r} rows of {d}"
    );
    // The right-hand side is `z` read transposed: element (p, j) at j * d + p.
    gemm_f32(g, z, z, (r, r, d), (1, d));
}

/// Free objects for reuse across firings (output and scratch buffers), so
/// concurrent firings each own theirs and none is allocated per firing
/// once the pool is warm.
pub struct Pool<T> {
    free: Mutex<Vec<T>>,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            free: Mutex::new(Vec::new()),
        }
    }
}

impl<T> Pool<T> {
    /// A free object, or a new one from `make`.
    pub fn take(&self, make: impl FnOnce() -> T) -> T {
        let got = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        got.unwrap_or_else(make)
    }

    /// Returns an object for reuse.
    pub fn give(&self, v: T) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(v);
    }
}

/// ReLU in place.
pub fn relu(v: &mut [f32]) {
    for x in v {
        *x = x.max(0.0);
    }
}

/// The logistic function in place.
pub fn sigmoid(v: &mut [f32]) {
    for x in v {
        *x = 1.0 / (1.0 + (-*x).exp());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The naive reference product.
    pub fn naive(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
        let mut c = vec![0.0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    pub fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= tol * (1.0 + y.abs()), "at {i}: {x} vs {y}");
        }
    }

    #[test]
    fn matmul_and_gram_match_the_naive_products() {
        let (m, n, k) = (7, 5, 11);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 9) as f32 - 4.0).collect();
        let mut c = vec![f32::NAN; m * n];
        matmul(&mut c, &a, &b, m, n, k);
        assert_eq!(c, naive(&a, &b, m, n, k), "small integers multiply exactly");
        // z z^T against the product with an explicit transpose.
        let (r, d) = (4, 6);
        let z: Vec<f32> = (0..r * d).map(|i| (i % 5) as f32 * 0.5 - 1.0).collect();
        let zt: Vec<f32> = (0..d * r).map(|i| z[(i % r) * d + i / r]).collect();
        let mut g = vec![0.0; r * r];
        gram(&mut g, &z, r, d);
        assert_eq!(g, naive(&z, &zt, r, r, d));
        for i in 0..r {
            for j in 0..r {
                assert_eq!(g[i * r + j], g[j * r + i]);
            }
        }
    }

    #[test]
    fn tensors_and_bags_check_their_shapes() {
        assert!(Tensor::new(2, 3, vec![0.0; 6]).is_ok());
        let e = Tensor::new(2, 3, vec![0.0; 5]).unwrap_err();
        assert!(
            e.to_string().contains("2 x 3 tensor needs 6 values, got 5"),
            "{e}"
        );
        let t = Tensor::new(2, 2, vec![1.0, 2.0, 3.0, -1.5]).unwrap();
        assert_eq!(t.row(1), &[3.0, -1.5]);
        assert_eq!(&t.to_le_bytes()[12..], &(-1.5f32).to_le_bytes());
        let bags = Bags {
            offsets: vec![0, 2, 2, 3],
            indices: vec![5, 6, 7],
            weights: None,
        };
        assert_eq!(bags.check("t").unwrap(), 3);
        assert_eq!(bags.bag(1).0, &[] as &[u32]);
        assert_eq!(bags.bag(2).0, &[7]);
        let bad = Bags {
            offsets: vec![0, 2, 1, 3],
            ..bags.clone()
        };
        assert!(bad.check("t").unwrap_err().to_string().contains("offsets"));
        let bad = Bags {
            weights: Some(vec![1.0]),
            ..bags
        };
        assert!(
            bad.check("t")
                .unwrap_err()
                .to_string()
                .contains("1 weights for 3 indices")
        );
    }

    #[test]
    fn activations_and_the_pool() {
        let mut v = vec![-1.0, 0.5, 0.0];
        relu(&mut v);
        assert_eq!(v, [0.0, 0.5, 0.0]);
        let mut s = vec![0.0, 40.0, -40.0];
        sigmoid(&mut s);
        assert_eq!(s[0], 0.5);
        assert!(s[1] > 0.999 && s[1] <= 1.0 && s[2] < 1e-6);
        let p: Pool<Vec<f32>> = Pool::default();
        let mut a = p.take(|| vec![0.0; 4]);
        a[0] = 9.0;
        p.give(a);
        assert_eq!(p.take(Vec::new)[0], 9.0, "a returned buffer is reused");
        assert!(p.take(Vec::new).is_empty(), "an empty pool makes a new one");
    }
}
