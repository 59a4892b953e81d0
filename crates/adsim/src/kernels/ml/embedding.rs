//! `Embedding`: pooled lookups in embedding tables (upstream's
//! table-batched embedding-bag kernel).
//!
//! Tables are built at start-up, `num_embeddings x embedding_dim` each,
//! from seeded random rows, in `weights_precision`:
//! - `fp32`, `fp16`: values in U(-0.1, 0.1);
//! - `int8`: fbgemm's fused 8-bit row-wise layout: `dim` bytes then an f32
//!   scale and an f32 bias per row, value = q * scale + bias;
//! - `int4`: the same with two values per byte (low nibble first).
//!
//! Quantised rows hold random codes and a per-row scale (so values span
//! about -0.1..0.1). Rows are converted to f32 on the fly while pooled.
//!
//! Without `indices_from`, as upstream: `pregenerated_req_num` requests
//! are made at start-up (each for one table, picked by `access_weight`,
//! with `batch_size` bags of `bag_size` indices drawn uniformly, and
//! weights in 0.9..1.1 when `weighted`); a firing looks up
//! `requests_per_fire` of them. With `nthreads` > 0 the firing is split
//! into that many parts, each running `requests_per_fire` requests from
//! its own slice of the pool. Ours cycles through the pool from firing to
//! firing (upstream starts over at the same request each time).
//!
//! Our extensions:
//! - `input`: a label under which instances share their tables (same
//!   table shapes and precision required); without it each instance
//!   builds its own, as upstream.
//! - `indices_from`: a request object holding [`SparseFeatures`] (one
//!   bag list per table, as `Features` writes), looked up instead of the
//!   pregenerated requests; the parts split the batch's samples.
//! - `output`: a request object to store the pooled [`Tensor`] under,
//!   `batch x (tables * dim)` (table t's vector of sample b at columns
//!   t*dim..). From pregenerated requests, every requested table's pooled
//!   bags are added into its columns (tables need one `batch_size`).
//!   `pooling: "none"` (the looked-up rows themselves, unpooled) has no
//!   such output.
//!
//! `output_dtype: "fp16"` rounds the pooled values to half precision.

use super::linalg::{Bags, Pool, SparseFeatures, Tensor};
use crate::Error;
use crate::kernels::{Fired, HandleObjs, Kernel, Params, RequestObjs, Work};
use half::f16;
use half::slice::HalfFloatSliceExt;
use rand::{Rng, RngCore, SeedableRng};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Fp32,
    Fp16,
    Int8,
    Int4,
}

impl Precision {
    fn parse(s: &str) -> Result<Precision, String> {
        Ok(match s {
            "fp32" => Precision::Fp32,
            "fp16" => Precision::Fp16,
            "int8" => Precision::Int8,
            "int4" => Precision::Int4,
            other => {
                return Err(format!(
                    "Embedding params.weights_precision: {other:?}: expected one of int4, int8, fp16, fp32"
                ));
            }
        })
    }

    /// Bytes of one row of `dim` values (with the scale and bias).
    fn row_bytes(self, dim: usize) -> usize {
        match self {
            Precision::Fp32 => 4 * dim,
            Precision::Fp16 => 2 * dim,
            Precision::Int8 => dim + 8,
            Precision::Int4 => dim.div_ceil(2) + 8,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pooling {
    Sum,
    Mean,
    None,
}

enum Rows {
    F32(Vec<f32>),
    F16(Vec<f16>),
    /// int8/int4 codes then scale and bias (f32, little-endian) per row.
    Fused(Vec<u8>),
}

/// One embedding table.
pub struct Table {
    pub rows: usize,
    pub dim: usize,
    pub precision: Precision,
    /// Code bytes per row (fused layouts).
    qbytes: usize,
    /// Elements of `data` per row.
    stride: usize,
    data: Rows,
}

impl Table {
    fn build(rows: usize, dim: usize, precision: Precision, seed: u64) -> Table {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let n = rows * dim;
        let (qbytes, stride, data) = match precision {
            Precision::Fp32 => {
                let mut v = vec![0f32; n];
                advise_huge_pages(&mut v);
                v.iter_mut()
                    .for_each(|x| *x = rng.random_range(-0.1f32..0.1));
                (0, dim, Rows::F32(v))
            }
            Precision::Fp16 => {
                let mut v = vec![f16::ZERO; n];
                advise_huge_pages(&mut v);
                let mut buf = vec![0f32; dim];
                for row in v.chunks_exact_mut(dim) {
                    buf.iter_mut()
                        .for_each(|x| *x = rng.random_range(-0.1f32..0.1));
                    row.convert_from_f32_slice(&buf);
                }
                (0, dim, Rows::F16(v))
            }
            Precision::Int8 | Precision::Int4 => {
                let (q, levels) = if precision == Precision::Int8 {
                    (dim, 255.0)
                } else {
                    (dim.div_ceil(2), 15.0)
                };
                let stride = q + 8;
                let mut v = vec![0u8; rows * stride];
                advise_huge_pages(&mut v);
                rng.fill_bytes(&mut v);
                for row in v.chunks_exact_mut(stride) {
                    // Values q * scale + bias span -f/10..f/10.
                    let f = rng.random_range(0.5f32..1.0);
                    let scale = 0.2 * f / levels;
                    row[q..q + 4].copy_from_slice(&scale.to_le_bytes());
                    row[q + 4..].copy_from_slice(&(-0.1 * f).to_le_bytes());
                }
                (q, stride, Rows::Fused(v))
            }
        };
        Table {
            rows,
            dim,
            precision,
            qbytes,
            stride,
            data,
        }
    }

    /// Row `i` as f32 (for tests and checks; the kernel converts while
    /// pooling).
    pub fn row(&self, i: usize) -> Vec<f32> {
        let mut acc = vec![0.0; self.dim];
        let mut tmp = vec![0.0; self.dim];
        let b = self.add_row::<false>(i, 1.0, &mut acc, &mut tmp);
        acc.iter_mut().for_each(|x| *x += b);
        acc
    }

    /// `acc += w * row(i)`, except that a fused row's bias term `w *
    /// bias`, the same for every element, is returned for the caller to
    /// add once per bag.
    #[inline(always)]
    fn add_row<const FMA: bool>(&self, i: usize, w: f32, acc: &mut [f32], tmp: &mut [f32]) -> f32 {
        let d = self.dim;
        let acc = &mut acc[..d];
        match &self.data {
            Rows::F32(v) => {
                axpy::<FMA>(acc, &v[i * d..(i + 1) * d], w);
                0.0
            }
            Rows::F16(v) => {
                let tmp = &mut tmp[..d];
                v[i * d..(i + 1) * d].convert_to_f32_slice(tmp);
                axpy::<FMA>(acc, tmp, w);
                0.0
            }
            Rows::Fused(v) => {
                let row = &v[i * self.stride..(i + 1) * self.stride];
                let (q, sb) = row.split_at(self.qbytes);
                let scale = f32::from_le_bytes([sb[0], sb[1], sb[2], sb[3]]);
                let bias = f32::from_le_bytes([sb[4], sb[5], sb[6], sb[7]]);
                let a = w * scale;
                if self.precision == Precision::Int8 {
                    for (o, &x) in acc.iter_mut().zip(q) {
                        *o = fma::<FMA>(f32::from(x), a, *o);
                    }
                } else {
                    let (pairs, odd) = acc.split_at_mut(d & !1);
                    for (o, &x) in pairs.chunks_exact_mut(2).zip(q) {
                        o[0] = fma::<FMA>(f32::from(x & 15), a, o[0]);
                        o[1] = fma::<FMA>(f32::from(x >> 4), a, o[1]);
                    }
                    if let Some(o) = odd.first_mut() {
                        *o = fma::<FMA>(f32::from(q[d / 2] & 15), a, *o);
                    }
                }
                w * bias
            }
        }
    }

    /// Asks for row `i`'s cache lines ahead of use.
    #[inline(always)]
    fn prefetch(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let (base, bytes) = match &self.data {
                Rows::F32(v) => (v.as_ptr().cast::<u8>(), 4 * self.stride),
                Rows::F16(v) => (v.as_ptr().cast::<u8>(), 2 * self.stride),
                Rows::Fused(v) => (v.as_ptr(), self.stride),
            };
            let start = base.wrapping_add(i * bytes);
            let mut off = 0;
            while off < bytes {
                // SAFETY: a prefetch is a hint: it never faults and
                // reads nothing into the program's state; `i` is in
                // range, so the addresses are inside the table.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(off).cast::<i8>()) };
                off += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }

    /// Memory the table takes.
    pub fn bytes(&self) -> usize {
        self.rows * self.precision.row_bytes(self.dim)
    }
}

/// Asks the kernel to back `v` with transparent huge pages (before it is
/// first written): lookups land on random rows of large tables, and with
/// 4 KiB pages nearly every one misses the TLB. A hint: refused or not,
/// the table works the same.
fn advise_huge_pages<T>(v: &mut [T]) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = (v.as_mut_ptr() as usize).next_multiple_of(PAGE);
        let end = (v.as_mut_ptr() as usize + std::mem::size_of_val(v)) & !(PAGE - 1);
        if end > start + (2 << 20) {
            // SAFETY: the range is inside `v`'s allocation and page
            // aligned; MADV_HUGEPAGE changes no contents.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
}

#[inline(always)]
fn fma<const FMA: bool>(x: f32, a: f32, acc: f32) -> f32 {
    if FMA { x.mul_add(a, acc) } else { x * a + acc }
}

#[inline(always)]
fn axpy<const FMA: bool>(acc: &mut [f32], x: &[f32], w: f32) {
    for (o, &v) in acc.iter_mut().zip(x) {
        *o = fma::<FMA>(v, w, *o);
    }
}

/// Rows ahead whose lines are prefetched.
const PREFETCH: usize = 8;

/// Per-firing scratch of one table row.
struct Scratch {
    acc: Vec<f32>,
    tmp: Vec<f32>,
    half: Vec<f16>,
}

/// A firing's buffers.
struct Bufs {
    s: Scratch,
    /// Outputs that are computed but not kept.
    out: Vec<f32>,
}

/// Pools bags `lo..hi` of one table into rows of `out`: sample `b`'s
/// vector at `out[(b - lo) * stride + col..][..dim]` (added to it with
/// `add`); with pooling none, lookup `p` (counted from bag `lo`'s first)
/// at `out[p * stride + col..]`.
struct Job<'a> {
    table: &'a Table,
    bags: &'a Bags,
    lo: usize,
    hi: usize,
    out: &'a mut [f32],
    stride: usize,
    col: usize,
    add: bool,
}

/// The kernel's fixed settings for pooling.
#[derive(Clone, Copy)]
struct Mode {
    pooling: Pooling,
    half_out: bool,
    weighted: bool,
}

#[inline(always)]
fn run_job<const FMA: bool>(mode: Mode, j: Job, s: &mut Scratch) -> Result<(), String> {
    let t = j.table;
    let d = t.dim;
    let (acc, tmp) = (&mut s.acc[..d], &mut s.tmp[..d]);
    let first = j.bags.offsets[j.lo] as usize;
    let end = j.bags.offsets[j.hi] as usize;
    let idx = &j.bags.indices;
    let weights = if mode.weighted {
        j.bags.weights.as_deref()
    } else {
        None
    };
    if let Some(&bad) = idx[first..end].iter().find(|&&i| i as usize >= t.rows) {
        return Err(format!(
            "Embedding: index {bad} is out of range for a table of {} rows",
            t.rows
        ));
    }
    for b in j.lo..j.hi {
        let (p0, p1) = (j.bags.offsets[b] as usize, j.bags.offsets[b + 1] as usize);
        let mut bias = 0.0;
        if mode.pooling != Pooling::None {
            acc.fill(0.0);
        }
        for p in p0..p1 {
            if let Some(&ahead) = idx.get(p + PREFETCH)
                && p + PREFETCH < end
            {
                t.prefetch(ahead as usize);
            }
            let w = weights.map_or(1.0, |w| w[p]);
            if mode.pooling == Pooling::None {
                acc.fill(0.0);
                let bias = t.add_row::<FMA>(idx[p] as usize, w, acc, tmp);
                let at = (p - first) * j.stride + j.col;
                finish(
                    mode,
                    acc,
                    bias,
                    1.0,
                    &mut s.half,
                    &mut j.out[at..at + d],
                    j.add,
                );
            } else {
                bias += t.add_row::<FMA>(idx[p] as usize, w, acc, tmp);
            }
        }
        if mode.pooling != Pooling::None {
            let n = p1 - p0;
            let scale = if mode.pooling == Pooling::Mean && n > 0 {
                1.0 / n as f32
            } else {
                1.0
            };
            let at = (b - j.lo) * j.stride + j.col;
            finish(
                mode,
                acc,
                bias,
                scale,
                &mut s.half,
                &mut j.out[at..at + d],
                j.add,
            );
        }
    }
    Ok(())
}

/// `dst (+)= (acc + bias) * scale`, rounded through fp16 when asked.
#[inline(always)]
fn finish(
    mode: Mode,
    acc: &mut [f32],
    bias: f32,
    scale: f32,
    half: &mut [f16],
    dst: &mut [f32],
    add: bool,
) {
    for x in acc.iter_mut() {
        *x = (*x + bias) * scale;
    }
    if mode.half_out {
        let h = &mut half[..acc.len()];
        h.convert_from_f32_slice(acc);
        h.convert_to_f32_slice(acc);
    }
    if add {
        dst.iter_mut().zip(acc.iter()).for_each(|(o, x)| *o += x);
    } else {
        dst.copy_from_slice(acc);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn run_job_avx2(mode: Mode, j: Job, s: &mut Scratch) -> Result<(), String> {
    run_job::<true>(mode, j, s)
}

fn dispatch(mode: Mode, j: Job, s: &mut Scratch) -> Result<(), String> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { run_job_avx2(mode, j, s) };
    }
    run_job::<false>(mode, j, s)
}

/// One table's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    pub rows: usize,
    pub dim: usize,
    pub bag: usize,
    pub batch: usize,
    pub weight: f64,
}

/// The checked params.
pub struct Config {
    pub specs: Vec<Spec>,
    pub precision: Precision,
    pooling: Pooling,
    half_out: bool,
    pub weighted: bool,
    pub requests_per_fire: usize,
    pub nthreads: usize,
    pub pregenerated: usize,
    pub input: Option<String>,
    pub output: Option<String>,
    pub indices_from: Option<String>,
}

const LIST_KEYS: [(&str, f64); 5] = [
    ("num_embeddings", 100_000.0),
    ("embedding_dim", 128.0),
    ("bag_size", 20.0),
    ("batch_size", 512.0),
    ("access_weight", 1.0),
];

impl Config {
    pub fn parse(p: &Params) -> Result<Config, Error> {
        let mut lists = Vec::new();
        for (key, default) in LIST_KEYS {
            lists.push(p.per_table(key, default)?);
        }
        let n = lists.iter().map(Vec::len).max().unwrap_or(1);
        if lists.iter().any(|l| l.len() != 1 && l.len() != n) {
            let sizes: Vec<String> = LIST_KEYS
                .iter()
                .zip(&lists)
                .map(|((k, _), l)| format!("{k}: {}", l.len()))
                .collect();
            return Err(Error::Input(format!(
                "Embedding params.*_list: the per-table lists disagree ({}): each needs {n} values or 1",
                sizes.join(", ")
            )));
        }
        let n = if n == 1 {
            p.usize_or("num_tables", 1)?
        } else {
            n
        };
        if n == 0 || n > 4096 {
            return Err(Error::Input(format!(
                "Embedding params.num_tables: {n}: expected 1..=4096"
            )));
        }
        let int = |k: usize, t: usize, max: f64| -> Result<usize, Error> {
            let l = &lists[k];
            let v = l[if l.len() == 1 { 0 } else { t }];
            if v.fract() != 0.0 || !(1.0..=max).contains(&v) {
                let key = LIST_KEYS[k].0;
                return Err(Error::Input(format!(
                    "Embedding params.{key}(_list): {v} for table {t}: expected an integer 1..={max}"
                )));
            }
            Ok(v as usize)
        };
        let mut specs = Vec::with_capacity(n);
        for t in 0..n {
            let w = lists[4][if lists[4].len() == 1 { 0 } else { t }];
            if !(w >= 0.0 && w.is_finite()) {
                return Err(Error::Input(format!(
                    "Embedding params.access_weight(_list): {w} for table {t}: expected a number >= 0"
                )));
            }
            specs.push(Spec {
                rows: int(0, t, u32::MAX as f64)?,
                dim: int(1, t, 65536.0)?,
                bag: int(2, t, 65536.0)?,
                batch: int(3, t, (1 << 20) as f64)?,
                weight: w,
            });
        }
        if specs.iter().map(|s| s.weight).sum::<f64>() <= 0.0 {
            return Err(Error::Input(
                "Embedding params.access_weight(_list): every weight is 0".into(),
            ));
        }
        let pooling = match p.str_or("pooling", "sum")? {
            "sum" => Pooling::Sum,
            "mean" => Pooling::Mean,
            "none" => Pooling::None,
            other => {
                return Err(Error::Input(format!(
                    "Embedding params.pooling: {other:?}: expected one of sum, mean, none"
                )));
            }
        };
        let half_out = match p.str_or("output_dtype", "fp32")? {
            "fp32" => false,
            "fp16" => true,
            other => {
                return Err(Error::Input(format!(
                    "Embedding params.output_dtype: {other:?}: expected fp16 or fp32"
                )));
            }
        };
        let key = |k: &str| -> Result<Option<String>, String> {
            Ok(if p.has(k) {
                Some(p.str_or(k, "")?.to_string())
            } else {
                None
            })
        };
        let c = Config {
            specs,
            precision: Precision::parse(p.str_or("weights_precision", "int4")?)
                .map_err(Error::Input)?,
            pooling,
            half_out,
            weighted: p.bool_or("weighted", false)?,
            requests_per_fire: p.usize_or("requests_per_fire", 1)?,
            nthreads: p.usize_or("nthreads", 0)?,
            pregenerated: p.usize_or("pregenerated_req_num", 10_000)?,
            input: key("input").map_err(Error::Input)?,
            output: key("output").map_err(Error::Input)?,
            indices_from: key("indices_from").map_err(Error::Input)?,
        };
        let parts = c.nthreads.max(1);
        if c.nthreads > 4096 {
            return Err(Error::Input(format!(
                "Embedding params.nthreads: {}: expected 0..=4096",
                c.nthreads
            )));
        }
        if c.requests_per_fire == 0 || c.requests_per_fire > 1 << 20 {
            return Err(Error::Input(format!(
                "Embedding params.requests_per_fire: {}: expected 1..=1048576",
                c.requests_per_fire
            )));
        }
        if c.output.is_some() && c.pooling == Pooling::None {
            return Err(Error::Input(
                "Embedding params.output: pooling \"none\" has no batch x (tables * dim) output; use sum or mean"
                    .into(),
            ));
        }
        if c.indices_from.is_some() {
            if p.has("requests_per_fire") && c.requests_per_fire != 1 {
                return Err(Error::Input(format!(
                    "Embedding params.requests_per_fire: {}: with indices_from each firing looks up the request's own batch once",
                    c.requests_per_fire
                )));
            }
        } else {
            if c.pregenerated < parts || c.pregenerated > 1 << 24 {
                return Err(Error::Input(format!(
                    "Embedding params.pregenerated_req_num: {}: expected {parts}..=16777216 (at least one per thread)",
                    c.pregenerated
                )));
            }
            if c.output.is_some() && c.specs.iter().any(|s| s.batch != c.specs[0].batch) {
                return Err(Error::Input(
                    "Embedding params.batch_size_list: output needs one batch_size for every table"
                        .into(),
                ));
            }
        }
        Ok(c)
    }

    /// Columns of the output: the tables' dims added up.
    pub fn width(&self) -> usize {
        self.specs.iter().map(|s| s.dim).sum()
    }

    fn table_bytes(&self) -> usize {
        self.specs
            .iter()
            .map(|s| s.rows.saturating_mul(self.precision.row_bytes(s.dim)))
            .fold(0, usize::saturating_add)
    }

    /// Expected indices of one pregenerated request.
    fn mean_lookups(&self) -> f64 {
        let total: f64 = self.specs.iter().map(|s| s.weight).sum();
        self.specs
            .iter()
            .map(|s| s.weight / total * (s.batch * s.bag) as f64)
            .sum()
    }

    /// Synthetic sparse features for `indices_from` (uniform indices,
    /// `bag_size` per bag, `batch_size` of table 0 bags), for running the
    /// kernel alone.
    pub fn synthetic_features(&self, seed: u64) -> SparseFeatures {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let batch = self.specs[0].batch;
        let tables = self
            .specs
            .iter()
            .map(|s| random_bags(&mut rng, s, batch, self.weighted))
            .collect();
        SparseFeatures { batch, tables }
    }
}

fn random_bags(rng: &mut impl Rng, s: &Spec, batch: usize, weighted: bool) -> Bags {
    let n = batch * s.bag;
    Bags {
        offsets: (0..=batch).map(|b| (b * s.bag) as u32).collect(),
        indices: (0..n).map(|_| rng.random_range(0..s.rows as u32)).collect(),
        weights: weighted.then(|| (0..n).map(|_| rng.random_range(0.9f32..1.1)).collect()),
    }
}

/// The tables of one kernel (or one shared `input` label).
pub struct Tables {
    specs: Vec<(usize, usize)>,
    precision: Precision,
    pub tables: Vec<Table>,
}

impl Tables {
    /// Memory the tables take.
    pub fn bytes(&self) -> usize {
        self.tables.iter().map(Table::bytes).sum()
    }

    /// Builds the tables on up to one thread per CPU; table `t` is seeded
    /// with `42 + t` whatever the threads.
    fn build(c: &Config) -> Tables {
        let n = c.specs.len();
        let workers = std::thread::available_parallelism()
            .map_or(1, |v| v.get())
            .min(n);
        let next = AtomicUsize::new(0);
        let mut built: Vec<(usize, Table)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    s.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let t = next.fetch_add(1, Ordering::Relaxed);
                            if t >= n {
                                break mine;
                            }
                            let sp = c.specs[t];
                            mine.push((
                                t,
                                Table::build(sp.rows, sp.dim, c.precision, 42 + t as u64),
                            ));
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        built.sort_by_key(|(t, _)| *t);
        Tables {
            specs: c.specs.iter().map(|s| (s.rows, s.dim)).collect(),
            precision: c.precision,
            tables: built.into_iter().map(|(_, t)| t).collect(),
        }
    }
}

enum Source {
    /// Upstream's: (table, bags) requests, each part's slice of them, and
    /// each part's cursor.
    Pregenerated {
        requests: Vec<(usize, Bags)>,
        cursors: Vec<AtomicUsize>,
    },
    /// Our extension: the request's features.
    Request(String),
}

/// What parts of one firing have finished: `(first row, block)` per part.
type Assembly = Mutex<Vec<Option<(usize, Vec<f32>)>>>;

pub struct Embedding {
    cfg: Config,
    tables: Arc<Tables>,
    source: Source,
    parts: usize,
    /// Column of each table's vectors in the output.
    cols: Vec<usize>,
    scratch: Pool<Bufs>,
}

/// Physical memory, when known.
fn host_memory() -> Option<usize> {
    // SAFETY: sysconf only reads system values.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && size > 0).then(|| pages as usize * size as usize)
}

impl Embedding {
    pub fn new(p: &Params, h: &HandleObjs) -> Result<Embedding, Error> {
        let cfg = Config::parse(p)?;
        let parts = cfg.nthreads.max(1);
        let pregen_bytes = if cfg.indices_from.is_none() {
            (cfg.pregenerated as f64 * cfg.mean_lookups() * if cfg.weighted { 8.0 } else { 4.0 })
                as usize
        } else {
            0
        };
        let need = cfg.table_bytes().saturating_add(pregen_bytes);
        if let Some(mem) = host_memory()
            && need > mem / 10 * 8
        {
            return Err(Error::Input(format!(
                "Embedding: the tables and pregenerated requests need {:.2} GB, more than 80% of this host's {:.2} GB (lower num_embeddings or pregenerated_req_num)",
                need as f64 / 1e9,
                mem as f64 / 1e9
            )));
        }
        let tables = match &cfg.input {
            Some(label) => {
                let t = h.get_or_build(label, || Ok(Tables::build(&cfg)))?;
                let mine: Vec<(usize, usize)> = cfg.specs.iter().map(|s| (s.rows, s.dim)).collect();
                if t.specs != mine || t.precision != cfg.precision {
                    return Err(Error::Input(format!(
                        "Embedding params.input {label:?}: the shared tables are {:?} {:?} (rows, dim), this kernel's are {:?} {mine:?} (use another input label)",
                        t.precision, t.specs, cfg.precision
                    )));
                }
                t
            }
            None => Arc::new(Tables::build(&cfg)),
        };
        let source = match &cfg.indices_from {
            Some(k) => Source::Request(k.clone()),
            None => Source::Pregenerated {
                requests: pregenerate(&cfg),
                cursors: (0..parts).map(|_| AtomicUsize::new(0)).collect(),
            },
        };
        let cols = cfg
            .specs
            .iter()
            .scan(0, |at, s| {
                let c = *at;
                *at += s.dim;
                Some(c)
            })
            .collect();
        Ok(Embedding {
            cfg,
            tables,
            source,
            parts,
            cols,
            scratch: Pool::default(),
        })
    }

    fn mode(&self) -> Mode {
        Mode {
            pooling: self.cfg.pooling,
            half_out: self.cfg.half_out,
            weighted: self.cfg.weighted,
        }
    }

    fn new_bufs(&self) -> Bufs {
        let d = self.cfg.specs.iter().map(|s| s.dim).max().unwrap_or(1);
        Bufs {
            s: Scratch {
                acc: vec![0.0; d],
                tmp: vec![0.0; d],
                half: vec![f16::ZERO; d],
            },
            out: Vec::new(),
        }
    }

    /// Part `part` of a firing from the pregenerated requests; returns
    /// its output block (batch x width, added into the whole) when there
    /// is an output.
    fn fire_pregenerated(
        &self,
        requests: &[(usize, Bags)],
        cursors: &[AtomicUsize],
        part: usize,
        bufs: &mut Bufs,
    ) -> Result<Option<Vec<f32>>, Error> {
        let n = requests.len();
        let (lo, hi) = (part * n / self.parts, (part + 1) * n / self.parts);
        let rpf = self.cfg.requests_per_fire;
        let start = cursors[part].fetch_add(rpf, Ordering::Relaxed);
        let width = self.cfg.width();
        let mut block = self
            .cfg
            .output
            .as_ref()
            .map(|_| vec![0.0; self.cfg.specs[0].batch * width]);
        let Bufs { s, out } = bufs;
        for r in 0..rpf {
            let (t, bags) = &requests[lo + (start + r) % (hi - lo)];
            let table = &self.tables.tables[*t];
            let nb = bags.offsets.len() - 1;
            let job = match &mut block {
                Some(block) => Job {
                    table,
                    bags,
                    lo: 0,
                    hi: nb,
                    out: block,
                    stride: width,
                    col: self.cols[*t],
                    add: true,
                },
                None => {
                    let rows = if self.cfg.pooling == Pooling::None {
                        bags.indices.len()
                    } else {
                        nb
                    };
                    out.resize(rows * table.dim, 0.0);
                    Job {
                        table,
                        bags,
                        lo: 0,
                        hi: nb,
                        out,
                        stride: table.dim,
                        col: 0,
                        add: false,
                    }
                }
            };
            dispatch(self.mode(), job, s).map_err(Error::Input)?;
        }
        Ok(block)
    }

    /// Part `part` of a firing from the request's features; returns the
    /// batch, the first row of its block and the block (its samples x
    /// width) when there is an output.
    fn fire_request(
        &self,
        rq: &RequestObjs,
        key: &str,
        part: usize,
        bufs: &mut Bufs,
    ) -> Result<Option<(usize, usize, Vec<f32>)>, Error> {
        let sf = rq.need::<SparseFeatures>(key)?;
        let tables = &self.tables.tables;
        if sf.tables.len() != tables.len() {
            return Err(Error::Input(format!(
                "Embedding: request object {key:?} has bags for {} tables, the kernel has {} tables",
                sf.tables.len(),
                tables.len()
            )));
        }
        for (t, bags) in sf.tables.iter().enumerate() {
            let what = format!("Embedding: request object {key:?} table {t}");
            let nb = bags.check(&what)?;
            if nb != sf.batch {
                return Err(Error::Input(format!(
                    "{what}: {nb} bags for a batch of {}",
                    sf.batch
                )));
            }
            if self.cfg.weighted && bags.weights.is_none() {
                return Err(Error::Input(format!(
                    "{what}: no weights, and the kernel is weighted (Features needs weighted: true)"
                )));
            }
        }
        let (lo, hi) = (
            part * sf.batch / self.parts,
            (part + 1) * sf.batch / self.parts,
        );
        let width = self.cfg.width();
        let mut block = self
            .cfg
            .output
            .as_ref()
            .map(|_| vec![0.0; (hi - lo) * width]);
        let Bufs { s, out } = bufs;
        for (t, (table, bags)) in tables.iter().zip(&sf.tables).enumerate() {
            let job = match &mut block {
                Some(block) => Job {
                    table,
                    bags,
                    lo,
                    hi,
                    out: block,
                    stride: width,
                    col: self.cols[t],
                    add: false,
                },
                None => {
                    let rows = if self.cfg.pooling == Pooling::None {
                        (bags.offsets[hi] - bags.offsets[lo]) as usize
                    } else {
                        hi - lo
                    };
                    out.resize(rows * table.dim, 0.0);
                    Job {
                        table,
                        bags,
                        lo,
                        hi,
                        out,
                        stride: table.dim,
                        col: 0,
                        add: false,
                    }
                }
            };
            dispatch(self.mode(), job, s)
                .map_err(|e| Error::Input(format!("{e} (request object {key:?} table {t})")))?;
        }
        Ok(block.map(|b| (sf.batch, lo, b)))
    }

    /// Stores the output: at once with one part; else the last part to
    /// finish joins the blocks (row blocks of the request's batch, or
    /// partial sums over the whole batch from pregenerated requests) and
    /// stores it.
    fn deliver(
        &self,
        rq: &RequestObjs,
        key: &str,
        part: usize,
        batch: usize,
        row: usize,
        block: Vec<f32>,
    ) -> Result<(), Error> {
        let width = self.cfg.width();
        if self.parts == 1 {
            rq.put(key, Tensor::new(batch, width, block)?);
            return Ok(());
        }
        let akey = format!("{key}#parts");
        rq.put(&akey, Assembly::new(vec![None; self.parts]));
        let asm = rq.need::<Assembly>(&akey)?;
        let done = {
            let mut slots = asm.lock().unwrap_or_else(|e| e.into_inner());
            slots[part] = Some((row, block));
            if slots.iter().all(Option::is_some) {
                Some(std::mem::replace(&mut *slots, vec![None; self.parts]))
            } else {
                None
            }
        };
        if let Some(blocks) = done {
            let mut blocks: Vec<(usize, Vec<f32>)> = blocks.into_iter().flatten().collect();
            blocks.sort_by_key(|(row, _)| *row);
            let all = if matches!(self.source, Source::Request(_)) {
                // Row blocks, in order: concatenated.
                let mut data = Vec::with_capacity(batch * width);
                blocks.iter().for_each(|(_, b)| data.extend_from_slice(b));
                Tensor::new(batch, width, data)?
            } else {
                // Whole-batch partial sums: added up.
                let mut all = Tensor::zeros(batch, width);
                for (row, b) in &blocks {
                    let dst = &mut all.data[row * width..row * width + b.len()];
                    dst.iter_mut().zip(b).for_each(|(o, x)| *o += x);
                }
                all
            };
            rq.put(key, all);
        }
        Ok(())
    }

    /// The shared tables.
    pub fn tables(&self) -> &Arc<Tables> {
        &self.tables
    }
}

impl Kernel for Embedding {
    fn fire(&self, rq: &RequestObjs, part: usize) -> Result<Fired, Error> {
        let part = part % self.parts;
        let mut bufs = self.scratch.take(|| self.new_bufs());
        let res = match &self.source {
            Source::Pregenerated { requests, cursors } => self
                .fire_pregenerated(requests, cursors, part, &mut bufs)
                .map(|b| b.map(|b| (self.cfg.specs[0].batch, 0, b))),
            Source::Request(key) => self.fire_request(rq, key, part, &mut bufs),
        };
        std::hint::black_box(&bufs.out);
        self.scratch.give(bufs);
        if let (Some((batch, row, block)), Some(key)) = (res?, &self.cfg.output) {
            self.deliver(rq, key, part, batch, row, block)?;
        }
        Ok(Fired::nothing())
    }

    fn parts(&self) -> usize {
        self.parts
    }

    /// Expected work of one part: a multiply-add per looked-up value.
    fn work(&self) -> Work {
        let c = &self.cfg;
        let (values, bytes) = if c.indices_from.is_some() {
            let v: f64 = c
                .specs
                .iter()
                .map(|s| (s.batch * s.bag * s.dim) as f64)
                .sum();
            let b: f64 = c
                .specs
                .iter()
                .map(|s| (s.batch * s.bag * c.precision.row_bytes(s.dim)) as f64)
                .sum();
            (v / self.parts as f64, b / self.parts as f64)
        } else {
            let total: f64 = c.specs.iter().map(|s| s.weight).sum();
            let per = |f: &dyn Fn(&Spec) -> f64| -> f64 {
                c.specs.iter().map(|s| s.weight / total * f(s)).sum::<f64>()
                    * c.requests_per_fire as f64
            };
            (
                per(&|s| (s.batch * s.bag * s.dim) as f64),
                per(&|s| (s.batch * s.bag * c.precision.row_bytes(s.dim)) as f64),
            )
        };
        Work {
            flops: 2.0 * values,
            bytes,
        }
    }
}

/// Upstream's request pool: each request picks a table by access weight
/// and holds `batch_size` bags of `bag_size` uniform indices (seed 42).
fn pregenerate(c: &Config) -> Vec<(usize, Bags)> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
    let total: f64 = c.specs.iter().map(|s| s.weight).sum();
    let mut cum = Vec::with_capacity(c.specs.len());
    let mut at = 0.0;
    for s in &c.specs {
        at += s.weight / total;
        cum.push(at);
    }
    (0..c.pregenerated)
        .map(|_| {
            let u: f64 = rng.random();
            let t = cum.partition_point(|&x| x <= u).min(c.specs.len() - 1);
            let s = &c.specs[t];
            (t, random_bags(&mut rng, s, s.batch, c.weighted))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Rand;
    use bytes::Bytes;
    use serde_json::json;

    fn emb(h: &HandleObjs, v: serde_json::Value) -> Result<Embedding, String> {
        let map = v.as_object().unwrap().clone();
        let _ = Rand::new(h, 0);
        Embedding::new(
            &Params {
                kernel: "Embedding",
                map: &map,
            },
            h,
        )
        .map_err(String::from)
    }

    /// Row `i` of a table, dequantised independently of the kernel.
    fn reference_row(t: &Table, i: usize) -> Vec<f32> {
        let d = t.dim;
        match &t.data {
            Rows::F32(v) => v[i * d..(i + 1) * d].to_vec(),
            Rows::F16(v) => v[i * d..(i + 1) * d].iter().map(|h| h.to_f32()).collect(),
            Rows::Fused(v) => {
                let row = &v[i * t.stride..(i + 1) * t.stride];
                let q = t.qbytes;
                let scale = f32::from_le_bytes(row[q..q + 4].try_into().unwrap());
                let bias = f32::from_le_bytes(row[q + 4..q + 8].try_into().unwrap());
                (0..d)
                    .map(|j| {
                        let code = if t.precision == Precision::Int8 {
                            row[j]
                        } else if j % 2 == 0 {
                            row[j / 2] & 15
                        } else {
                            row[j / 2] >> 4
                        };
                        f32::from(code) * scale + bias
                    })
                    .collect()
            }
        }
    }

    /// The pooled vector of one bag.
    fn reference_bag(t: &Table, idx: &[u32], w: Option<&[f32]>, mean: bool) -> Vec<f32> {
        let mut acc = vec![0.0f32; t.dim];
        for (k, &i) in idx.iter().enumerate() {
            let wk = w.map_or(1.0, |w| w[k]);
            for (a, v) in acc.iter_mut().zip(reference_row(t, i as usize)) {
                *a += wk * v;
            }
        }
        if mean && !idx.is_empty() {
            acc.iter_mut().for_each(|a| *a /= idx.len() as f32);
        }
        acc
    }

    fn sparse(tables: usize, batch: usize, rows: u32, weighted: bool) -> SparseFeatures {
        let tables = (0..tables)
            .map(|t| {
                // Bag b of table t holds b % 4 indices (empty bags too).
                let mut offsets = vec![0u32];
                let mut indices = Vec::new();
                for b in 0..batch {
                    for j in 0..b % 4 {
                        indices.push(((b * 7 + j * 13 + t * 5) as u32) % rows);
                    }
                    offsets.push(indices.len() as u32);
                }
                let n = indices.len();
                Bags {
                    offsets,
                    indices,
                    weights: weighted.then(|| (0..n).map(|k| 0.5 + k as f32 * 0.1).collect()),
                }
            })
            .collect();
        SparseFeatures { batch, tables }
    }

    fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= 1e-5 + 1e-5 * y.abs(), "at {i}: {x} vs {y}");
        }
    }

    #[test]
    fn every_precision_pools_the_rows_it_stores() {
        for prec in ["fp32", "fp16", "int8", "int4"] {
            for (pooling, weighted) in [("sum", false), ("mean", false), ("sum", true)] {
                let h = HandleObjs::new();
                // Two tables of different dims (one odd, for int4).
                let k = emb(
                    &h,
                    json!({"weights_precision": prec, "pooling": pooling, "weighted": weighted,
                           "num_embeddings_list": "40,30", "embedding_dim_list": "16,7",
                           "indices_from": "Rs", "output": "Ro"}),
                )
                .unwrap();
                let sf = sparse(2, 9, 30, weighted);
                let rq = RequestObjs::new(Bytes::new());
                rq.put("Rs", sf.clone());
                k.fire(&rq, 0).unwrap();
                let out = rq.need::<Tensor>("Ro").unwrap();
                assert_eq!((out.rows, out.cols), (9, 23));
                let tabs = &k.tables.tables;
                assert_eq!((tabs[0].dim, tabs[1].dim, tabs[1].rows), (16, 7, 30));
                for b in 0..9 {
                    let mut want = Vec::new();
                    for (t, tab) in tabs.iter().enumerate() {
                        let (idx, w) = sf.tables[t].bag(b);
                        want.extend(reference_bag(tab, idx, w, pooling == "mean"));
                    }
                    close(out.row(b), &want);
                }
                // Rows hold values spread over about -0.1..0.1.
                let r = reference_row(&tabs[0], 3);
                assert!(r.iter().all(|v| v.abs() <= 0.1001), "{prec}: {r:?}");
                assert!(r.iter().any(|&v| v != r[0]), "{prec}");
                assert_ne!(reference_row(&tabs[0], 4), r, "{prec}");
                close(&tabs[0].row(3), &r);
            }
        }
    }

    #[test]
    fn parts_split_the_batch_and_fp16_output_rounds() {
        let h = HandleObjs::new();
        let base = json!({"weights_precision": "int8", "num_tables": 3, "num_embeddings": 64,
                          "embedding_dim": 8, "indices_from": "Rs", "output": "Ro", "input": "Ht",
                          "output_dtype": "fp16"});
        let one = emb(&h, base.clone()).unwrap();
        let mut p3 = base.clone();
        p3["nthreads"] = json!(3);
        let three = emb(&h, p3).unwrap();
        assert!(
            Arc::ptr_eq(&one.tables, &three.tables),
            "shared by input label"
        );
        assert_eq!(three.parts(), 3);
        let sf = sparse(3, 10, 64, false);
        let (rq1, rq3) = (
            RequestObjs::new(Bytes::new()),
            RequestObjs::new(Bytes::new()),
        );
        rq1.put("Rs", sf.clone());
        rq3.put("Rs", sf);
        one.fire(&rq1, 0).unwrap();
        for part in [2, 0] {
            three.fire(&rq3, part).unwrap();
            assert!(
                rq3.get::<Tensor>("Ro").is_none(),
                "not before every part ran"
            );
        }
        three.fire(&rq3, 1).unwrap();
        let (a, b) = (
            rq1.need::<Tensor>("Ro").unwrap(),
            rq3.need::<Tensor>("Ro").unwrap(),
        );
        assert_eq!(a, b);
        assert!(a.data.iter().any(|&v| v != 0.0));
        for &v in &a.data {
            assert_eq!(f16::from_f32(v).to_f32(), v, "rounded to fp16");
        }
    }

    #[test]
    fn pregenerated_requests_follow_access_weights_and_cycle() {
        let h = HandleObjs::new();
        let k = emb(
            &h,
            json!({"weights_precision": "fp32", "num_tables": 3, "access_weight_list": "1,0,2",
                   "num_embeddings": 50, "embedding_dim": 4, "bag_size": 3, "batch_size": 5,
                   "pregenerated_req_num": 6, "requests_per_fire": 2, "weighted": true,
                   "output": "Ro"}),
        )
        .unwrap();
        let Source::Pregenerated { requests, .. } = &k.source else {
            panic!("pregenerated")
        };
        assert_eq!(requests.len(), 6);
        assert!(
            requests.iter().all(|(t, _)| *t != 1),
            "table 1 has weight 0"
        );
        for (_, b) in requests {
            assert_eq!(b.check("r").unwrap(), 5);
            assert_eq!(b.indices.len(), 15);
            assert!(
                b.weights
                    .as_ref()
                    .unwrap()
                    .iter()
                    .all(|w| (0.9..1.1).contains(w))
            );
        }
        let tabs = &k.tables.tables;
        let mut seen = Vec::new();
        for fire in 0..4 {
            let rq = RequestObjs::new(Bytes::new());
            k.fire(&rq, 0).unwrap();
            let out = rq.need::<Tensor>("Ro").unwrap();
            assert_eq!((out.rows, out.cols), (5, 12));
            // Requests 2f, 2f+1 (mod 6), added into their tables' columns.
            let mut want = vec![0.0f32; 60];
            for r in [(2 * fire) % 6, (2 * fire + 1) % 6] {
                let (t, bags) = &requests[r];
                for b in 0..5 {
                    let (idx, w) = bags.bag(b);
                    let v = reference_bag(&tabs[*t], idx, w, false);
                    for (j, x) in v.iter().enumerate() {
                        want[b * 12 + t * 4 + j] += x;
                    }
                }
            }
            close(&out.data, &want);
            let table1 = out
                .data
                .iter()
                .enumerate()
                .filter(|(i, _)| (4..8).contains(&(i % 12)));
            assert!(
                table1.clone().all(|(_, &v)| v == 0.0),
                "table 1 is never requested"
            );
            assert!(out.data.iter().filter(|&&v| v != 0.0).count() >= 20);
            seen.push(out.data.clone());
        }
        assert_ne!(seen[0], seen[1], "each firing takes the next requests");
        assert_eq!(seen[0], seen[3], "and the pool cycles");
        assert_eq!(k.work().flops, 2.0 * 2.0 * 5.0 * 3.0 * 4.0);
    }

    #[test]
    fn pooling_none_keeps_every_row() {
        let h = HandleObjs::new();
        let k = emb(
            &h,
            json!({"weights_precision": "int4", "pooling": "none", "num_embeddings": 20,
                   "embedding_dim": 6, "indices_from": "Rs"}),
        )
        .unwrap();
        let sf = sparse(1, 7, 20, false);
        let rq = RequestObjs::new(Bytes::new());
        rq.put("Rs", sf.clone());
        let mut bufs = k.new_bufs();
        assert!(k.fire_request(&rq, "Rs", 0, &mut bufs).unwrap().is_none());
        let want: Vec<f32> = sf.tables[0]
            .indices
            .iter()
            .flat_map(|&i| reference_row(&k.tables.tables[0], i as usize))
            .collect();
        close(&bufs.out, &want);
        assert!(k.fire(&rq, 0).is_ok());
        // Pregenerated, unpooled, several parts.
        let k = emb(
            &h,
            json!({"pooling": "none", "num_embeddings": 20, "embedding_dim": 6,
                               "batch_size": 3, "bag_size": 2, "pregenerated_req_num": 4,
                               "nthreads": 2}),
        )
        .unwrap();
        for part in 0..2 {
            k.fire(&rq, part).unwrap();
        }
    }

    #[test]
    fn bad_params_and_inputs_are_named() {
        let h = HandleObjs::new();
        let e = emb(
            &h,
            json!({"num_embeddings_list": "10,20,30", "bag_size_list": "1,2"}),
        )
        .err()
        .unwrap();
        assert!(
            e.contains("num_embeddings: 3") && e.contains("bag_size: 2"),
            "{e}"
        );
        let e = emb(&h, json!({"embedding_dim_list": "4,0"})).err().unwrap();
        assert!(
            e.contains("params.embedding_dim(_list): 0 for table 1"),
            "{e}"
        );
        let e = emb(&h, json!({"access_weight_list": "0,0"})).err().unwrap();
        assert!(e.contains("every weight is 0"), "{e}");
        let e = emb(&h, json!({"pooling": "none", "output": "Ro"}))
            .err()
            .unwrap();
        assert!(e.contains("params.output"), "{e}");
        let e = emb(&h, json!({"pregenerated_req_num": 2, "nthreads": 4}))
            .err()
            .unwrap();
        assert!(e.contains("params.pregenerated_req_num: 2"), "{e}");
        let e = emb(
            &h,
            json!({"batch_size_list": "2,3", "output": "Ro", "num_embeddings": 9}),
        )
        .err()
        .unwrap();
        assert!(e.contains("one batch_size"), "{e}");
        let e = emb(&h, json!({"num_embeddings": 1_000_000_000_000u64}))
            .err()
            .unwrap();
        assert!(e.contains("params.num_embeddings(_list)"), "{e}");
        let e = emb(&h, json!({"num_tables": 64, "num_embeddings": 4_000_000_000u64, "weights_precision": "fp32"}))
            .err()
            .unwrap();
        assert!(e.contains("more than 80% of this host"), "{e}");
        // Shared tables must match.
        emb(&h, json!({"num_embeddings": 10, "embedding_dim": 4, "input": "Hx", "pregenerated_req_num": 1})).unwrap();
        let e = emb(&h, json!({"num_embeddings": 10, "embedding_dim": 8, "input": "Hx", "pregenerated_req_num": 1}))
            .err()
            .unwrap();
        assert!(e.contains("params.input \"Hx\""), "{e}");
        // Request inputs.
        let k = emb(
            &h,
            json!({"num_tables": 2, "num_embeddings": 10, "embedding_dim": 4,
                               "indices_from": "Rs", "weighted": true}),
        )
        .unwrap();
        let rq = RequestObjs::new(Bytes::new());
        assert!(k.fire(&rq, 0).unwrap_err().to_string().contains("\"Rs\""));
        rq.put("Rs", sparse(3, 4, 10, true));
        let e = k.fire(&rq, 0).unwrap_err().to_string();
        assert!(
            e.contains("\"Rs\" has bags for 3 tables, the kernel has 2"),
            "{e}"
        );
        let rq = RequestObjs::new(Bytes::new());
        rq.put("Rs", sparse(2, 4, 10, false));
        let e = k.fire(&rq, 0).unwrap_err().to_string();
        assert!(e.contains("no weights"), "{e}");
        let rq = RequestObjs::new(Bytes::new());
        rq.put("Rs", sparse(2, 6, 11, true));
        let e = k.fire(&rq, 0).unwrap_err().to_string();
        assert!(
            e.contains("index 10 is out of range") && e.contains("\"Rs\" table 0"),
            "{e}"
        );
    }
}
