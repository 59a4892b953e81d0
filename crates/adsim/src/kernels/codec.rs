//! `Compress` and `Decompress`: zstd at a level over `size`-byte buffers.
//!
//! With an `H...` input the data is built at start-up: `size / 8` 64-bit
//! values from the random cycle (each below 2^18, so the data compresses
//! well, as upstream's does). Decompress keeps the compressed form and
//! decompresses it into a fresh buffer on every fire; Compress compresses
//! the buffer into a fresh one. Outputs go to the request object `output`
//! (compressed outputs also store their size under `output.size_`), so a
//! later stage can read them. A non-`H` input reads an earlier stage's
//! output instead (Compress: any byte buffer; Decompress: a compressed one).

use super::{Fired, HandleObjs, Kernel, Params, Rand, RequestObjs, Work};
use crate::Error;
use std::sync::Arc;

/// Bytes a kernel compresses or decompresses, shared by instances with
/// the same input name.
struct Source {
    plain: Vec<u8>,
    compressed: Vec<u8>,
}

fn source(
    p: &Params,
    h: &HandleObjs,
    rand: &Rand,
    input: &str,
    level: i32,
) -> Result<Arc<Source>, Error> {
    let size = p.usize("size")?;
    h.get_or_build(input, || {
        let mut plain = Vec::with_capacity(size);
        for _ in 0..size / 8 {
            plain.extend_from_slice(&u64::from(rand.next()).to_le_bytes());
        }
        plain.resize(size, 0);
        let compressed = zstd::bulk::compress(&plain, level)
            .map_err(|e| Error::Host(format!("{}: zstd level {level}: {e}", p.kernel)))?;
        Ok(Source { plain, compressed })
    })
}

fn level(p: &Params) -> Result<i32, String> {
    let l = p.i64("level")?;
    let range = zstd::compression_level_range();
    if !range.contains(&(l as i32)) || l != i64::from(l as i32) {
        return Err(format!(
            "{} params.level: {l} is outside zstd's levels {}..={}",
            p.kernel,
            range.start(),
            range.end()
        ));
    }
    Ok(l as i32)
}

/// A compressed buffer in the request objects.
pub struct Compressed {
    pub data: Vec<u8>,
    pub plain_len: usize,
}

pub struct Compress {
    level: i32,
    size: usize,
    input: String,
    output: String,
    shared: Option<Arc<Source>>,
}

impl Compress {
    pub fn new(p: &Params, h: &HandleObjs, rand: Rand) -> Result<Self, Error> {
        let level = level(p).map_err(Error::Input)?;
        let input = p.str_or("input", "Hcompress")?.to_string();
        let shared = if input.starts_with('H') {
            Some(source(p, h, &rand, &input, level)?)
        } else {
            None
        };
        Ok(Compress {
            level,
            size: p.usize("size")?,
            output: p.str_or("output", "Rcompressed")?.to_string(),
            input,
            shared,
        })
    }
}

impl Kernel for Compress {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let held;
        let plain: &[u8] = match &self.shared {
            Some(s) => &s.plain,
            None => {
                held = rq.need::<Vec<u8>>(&self.input)?;
                &held
            }
        };
        let data = zstd::bulk::compress(plain, self.level)
            .map_err(|e| Error::Host(format!("Compress: {e}")))?;
        rq.put(&format!("{}.size_", self.output), data.len());
        rq.put(
            &self.output,
            Compressed {
                data,
                plain_len: plain.len(),
            },
        );
        Ok(Fired::nothing())
    }

    fn work(&self) -> Work {
        Work {
            flops: 0.0,
            bytes: self.size as f64,
        }
    }
}

pub struct Decompress {
    size: usize,
    input: String,
    output: String,
    shared: Option<Arc<Source>>,
}

impl Decompress {
    pub fn new(p: &Params, h: &HandleObjs, rand: Rand) -> Result<Self, Error> {
        let level = level(p).map_err(Error::Input)?;
        let input = p.str_or("input", "Hdecompress")?.to_string();
        let shared = if input.starts_with('H') {
            Some(source(p, h, &rand, &input, level)?)
        } else {
            None
        };
        Ok(Decompress {
            size: p.usize("size")?,
            output: p.str_or("output", "Rdecompressed")?.to_string(),
            input,
            shared,
        })
    }
}

impl Kernel for Decompress {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let out = match &self.shared {
            Some(s) => zstd::bulk::decompress(&s.compressed, s.plain.len()),
            None => {
                let c = rq.need::<Compressed>(&self.input)?;
                zstd::bulk::decompress(&c.data, c.plain_len)
            }
        }
        .map_err(|e| Error::Host(format!("Decompress: {e}")))?;
        rq.put(&self.output, out);
        Ok(Fired::nothing())
    }

    fn work(&self) -> Work {
        Work {
            flops: 0.0,
            bytes: self.size as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    #[test]
    fn compress_then_decompress_through_request_objects() {
        let h = HandleObjs::new();
        let mc = json!({"compressor": "zstd", "level": 4, "size": 61440, "output": "Rc"});
        let mc = mc.as_object().unwrap();
        let c = Compress::new(
            &Params {
                kernel: "Compress",
                map: mc,
            },
            &h,
            Rand::new(&h, 0),
        )
        .unwrap();
        let md =
            json!({"compressor": "zstd", "level": 4, "size": 61440, "input": "Rc", "output": "Rd"});
        let md = md.as_object().unwrap();
        let d = Decompress::new(
            &Params {
                kernel: "Decompress",
                map: md,
            },
            &h,
            Rand::new(&h, 0),
        )
        .unwrap();
        let rq = RequestObjs::new(Bytes::new());
        c.fire(&rq, 0).unwrap();
        let comp = rq.get::<Compressed>("Rc").unwrap();
        // Values below 2^18 in 8-byte words compress well.
        assert!(comp.data.len() < 61440 / 2, "{}", comp.data.len());
        assert_eq!(*rq.get::<usize>("Rc.size_").unwrap(), comp.data.len());
        d.fire(&rq, 0).unwrap();
        let plain = rq.get::<Vec<u8>>("Rd").unwrap();
        let src = h
            .get_or_build::<Source>("Hcompress", || Err(Error::Input("missing".into())))
            .unwrap();
        assert_eq!(&plain[..], &src.plain[..]);
    }

    #[test]
    fn decompress_of_shared_data_and_bad_levels() {
        let h = HandleObjs::new();
        let m = json!({"compressor": "zstd", "level": 4, "size": 4096});
        let m = m.as_object().unwrap();
        let d = Decompress::new(
            &Params {
                kernel: "Decompress",
                map: m,
            },
            &h,
            Rand::new(&h, 0),
        )
        .unwrap();
        let rq = RequestObjs::new(Bytes::new());
        d.fire(&rq, 0).unwrap();
        assert_eq!(rq.get::<Vec<u8>>("Rdecompressed").unwrap().len(), 4096);
        let m = json!({"compressor": "zstd", "level": 99, "size": 4096});
        let e = Decompress::new(
            &Params {
                kernel: "Decompress",
                map: m.as_object().unwrap(),
            },
            &h,
            Rand::new(&h, 0),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("params.level: 99"), "{e}");
        // Reading an output nobody wrote names it.
        let m = json!({"compressor": "zstd", "level": 1, "size": 10, "input": "Rnone"});
        let d = Decompress::new(
            &Params {
                kernel: "Decompress",
                map: m.as_object().unwrap(),
            },
            &h,
            Rand::new(&h, 0),
        )
        .unwrap();
        let e = d.fire(&rq, 0).unwrap_err().to_string();
        assert!(e.contains("\"Rnone\""), "{e}");
    }
}
