//! The ML kernels: `GEMM`, `DenseFP32` and `Embedding` (upstream's) and
//! `Features` and `Interaction` (ours, for the DLRM-style `model_a`).
//!
//! Dense math goes through the `gemm` crate (f32, AVX-512/AVX2 kernels
//! chosen at run time, on the calling thread: parallelism comes from the
//! server's pools and from kernel parts); embedding-bag pooling is a
//! gather-and-add loop over f32 rows, converting fp16/int8/int4 rows on
//! the fly. Kernels pass [`Tensor`]s and [`SparseFeatures`] to each other
//! through the request objects; see each module for params.

use crate::Error;
mod dense;
mod embedding;
mod features;
mod interaction;
mod linalg;
mod matmul;

pub use dense::{DenseFp32, DenseWeights};
pub use embedding::{Embedding, Precision, Table, Tables};
pub use features::{Features, hash_bytes};
pub use interaction::Interaction;
pub use linalg::{Bags, Pool, SparseFeatures, Tensor, gram, matmul};
pub use matmul::{Gemm, GemmInputs};

use super::{HandleObjs, Kernel, Params, Rand, RequestObjs};
use rand::{Rng, SeedableRng};

/// Builds an ML kernel of kind `name`.
pub fn build(name: &str, p: &Params, h: &HandleObjs, rand: Rand) -> Result<Box<dyn Kernel>, Error> {
    Ok(match name {
        "GEMM" => Box::new(Gemm::new(p, h, rand)?),
        "DenseFP32" => Box::new(DenseFp32::new(p, h, rand)?),
        "Embedding" => Box::new(Embedding::new(p, h)?),
        "Features" => Box::new(Features::new(p)?),
        "Interaction" => Box::new(Interaction::new(p)?),
        other => return Err(Error::Input(format!("unknown ML kernel {other:?}"))),
    })
}

/// How many distinct requests' inputs a stand-alone run of kernel `name`
/// should cycle through to behave as in a server: `Embedding` looking up
/// the request's features would find one request's rows in the cache
/// from the second firing on, so it gets 64 sets of indices (tables are
/// far larger than the caches, 64 requests' rows mostly are too); other
/// kernels work on inputs just written by the stage before, in cache.
pub fn input_variety(name: &str, p: &Params) -> usize {
    if name == "Embedding" && p.has("indices_from") {
        64
    } else {
        1
    }
}

/// Writes synthetic versions of the request objects an ML kernel of kind
/// `name` reads (random data of the shapes its params give, drawn from
/// `seed`), so it can run alone (`kernels::bench`). Kernels that read none
/// are left as they are; `Features` reads the request body.
pub fn prepare_inputs(name: &str, p: &Params, rq: &RequestObjs, seed: u64) -> Result<(), Error> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut random = |rows: usize, cols: usize| {
        let data = (0..rows * cols)
            .map(|_| rng.random_range(-1.0f32..1.0))
            .collect();
        Tensor { rows, cols, data }
    };
    match name {
        "DenseFP32" if p.has("from") => {
            let dims = p.usize_list("dims")?;
            let batch = p.usize_or("batch", 64)?;
            let d0 = dims.first().copied().unwrap_or(0);
            rq.put(p.str_or("from", "")?, random(batch, d0));
        }
        "Embedding" if p.has("indices_from") => {
            let c = embedding::Config::parse(p)?;
            if c.specs.iter().any(|s| s.batch != c.specs[0].batch) {
                return Err(Error::Input("Embedding params.batch_size_list: a stand-alone run with indices_from needs one batch_size for every table".into()));
            }
            rq.put(p.str_or("indices_from", "")?, c.synthetic_features(seed));
        }
        "Interaction" => {
            let k = Interaction::new(p)?;
            let (b, t, d) = k.shape().ok_or_else(|| {
                Error::Input(
                    "Interaction: a stand-alone run needs params batch, tables and dim to make its inputs"
                        .into(),
                )
            })?;
            rq.put(p.str_or("dense", "")?, random(b, d));
            rq.put(p.str_or("embeddings", "")?, random(b, t * d));
        }
        _ => {}
    }
    Ok(())
}
