//! `Serialize` and `Deserialize`: protobuf encoding and decoding of nested
//! request structures (upstream's Serialize.thrift shapes: requests holding
//! units holding lists, maps of lists and small records).
//!
//! At start-up `req_vec_len` units and `req_vec_len` requests are built from
//! the random cycle, each request holding `req_unit_list_len` copies of
//! random units. Serialize encodes `niters` random requests into one buffer
//! (stored under `output`, readable by a later Compress); Deserialize
//! decodes one pre-encoded request `niters` times (the last result is
//! stored under `output`).

use super::{Fired, HandleObjs, Kernel, Params, Rand, RequestObjs};
use crate::Error;
use crate::proto::{I32List, SerializableInfo, SerializableReq, SerializableUnit};
use prost::Message;
use std::sync::Arc;

/// The shapes of the generated requests.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Shape {
    req_vec_len: usize,
    req_unit_list_len: usize,
    unit_info_list_len: usize,
    unit_i32_list_len: usize,
    unit_list_map_size: usize,
}

impl Shape {
    fn from(p: &Params) -> Result<Self, String> {
        Ok(Shape {
            req_vec_len: p.usize_or("req_vec_len", 512)?.max(1),
            req_unit_list_len: p.usize_or("req_unit_list_len", 10)?,
            unit_info_list_len: p.usize_or("unit_info_list_len", 23)?,
            unit_i32_list_len: p.usize_or("unit_i32_list_len", 17)?,
            unit_list_map_size: p.usize_or("unit_list_map_size", 19)?,
        })
    }
}

/// Generated requests and their encodings.
struct Corpus {
    shape: Shape,
    reqs: Vec<SerializableReq>,
    encoded: Vec<Vec<u8>>,
}

fn corpus(p: &Params, h: &HandleObjs, rand: &Rand, input: &str) -> Result<Arc<Corpus>, String> {
    let shape = Shape::from(p)?;
    let c = h.get_or_build(input, || {
        let r = || rand.next() as i32;
        let i32s = |n: usize| (0..n).map(|_| r()).collect::<Vec<i32>>();
        let units: Vec<SerializableUnit> = (0..shape.req_vec_len)
            .map(|_| SerializableUnit {
                map_of_list: (0..shape.unit_list_map_size)
                    .map(|_| {
                        (
                            r(),
                            I32List {
                                values: i32s(shape.unit_i32_list_len),
                            },
                        )
                    })
                    .collect(),
                list_of_info: (0..shape.unit_info_list_len)
                    .map(|_| {
                        let v = r();
                        SerializableInfo {
                            var_bool: v % 2 == 0,
                            var_i32: v,
                            var_double: f64::from(v) * std::f64::consts::PI,
                        }
                    })
                    .collect(),
                list_of_i32: i32s(shape.unit_i32_list_len),
            })
            .collect();
        let reqs: Vec<SerializableReq> = (0..shape.req_vec_len)
            .map(|_| SerializableReq {
                var_i64: i64::from(r()),
                list_of_unit: (0..shape.req_unit_list_len)
                    .map(|_| units[r() as usize % units.len()].clone())
                    .collect(),
            })
            .collect();
        let encoded = reqs.iter().map(Message::encode_to_vec).collect();
        Ok(Corpus {
            shape,
            reqs,
            encoded,
        })
    })?;
    if c.shape != shape {
        return Err(format!(
            "{}: input {input:?} is shared with a kernel that generated different shapes ({:?}); give it another input name",
            p.kernel, c.shape
        ));
    }
    Ok(c)
}

pub struct Serialize {
    corpus: Arc<Corpus>,
    niters: usize,
    output: String,
    rand: Rand,
}

impl Serialize {
    pub fn new(p: &Params, h: &HandleObjs, rand: Rand) -> Result<Self, Error> {
        let input = p.str_or("input", "Hserializable_req_list")?;
        Ok(Serialize {
            corpus: corpus(p, h, &rand, input).map_err(Error::Input)?,
            niters: p.usize_or("niters", 1)?,
            output: p.str_or("output", "Rserialized_req")?.to_string(),
            rand,
        })
    }
}

impl Kernel for Serialize {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let mut buf = Vec::new();
        for _ in 0..self.niters {
            let req = &self.corpus.reqs[self.rand.next() as usize % self.corpus.reqs.len()];
            req.encode(&mut buf)
                .map_err(|e| Error::Host(format!("Serialize: {e}")))?;
        }
        rq.put(&self.output, buf);
        Ok(Fired::nothing())
    }
}

pub struct Deserialize {
    corpus: Arc<Corpus>,
    niters: usize,
    output: String,
    rand: Rand,
}

impl Deserialize {
    pub fn new(p: &Params, h: &HandleObjs, rand: Rand) -> Result<Self, Error> {
        let input = p.str_or("input", "Hdeserialize")?;
        Ok(Deserialize {
            corpus: corpus(p, h, &rand, input).map_err(Error::Input)?,
            niters: p.usize_or("niters", 1)?,
            output: p.str_or("output", "Rdeserialized")?.to_string(),
            rand,
        })
    }
}

impl Kernel for Deserialize {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let bytes = &self.corpus.encoded[self.rand.next() as usize % self.corpus.encoded.len()];
        let mut last = None;
        for _ in 0..self.niters {
            last = Some(
                SerializableReq::decode(&bytes[..])
                    .map_err(|e| Error::Host(format!("Deserialize: {e}")))?,
            );
        }
        if let Some(r) = last {
            rq.put(&self.output, r);
        }
        Ok(Fired::nothing())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Kernel;
    use bytes::Bytes;
    use serde_json::json;

    #[test]
    fn serialized_requests_decode_back_to_the_generated_ones() {
        let h = HandleObjs::new();
        let m = json!({"req_vec_len": 8, "req_unit_list_len": 3, "unit_info_list_len": 4,
                       "unit_i32_list_len": 5, "unit_list_map_size": 2, "niters": 2, "input": "Hs"});
        let m = m.as_object().unwrap();
        let s = Serialize::new(
            &Params {
                kernel: "Serialize",
                map: m,
            },
            &h,
            Rand::new(&h, 3),
        )
        .unwrap();
        let rq = RequestObjs::new(Bytes::new());
        s.fire(&rq, 0).unwrap();
        let buf = rq.get::<Vec<u8>>("Rserialized_req").unwrap();
        // Two requests back to back decode as one merged message: their
        // units appended.
        let whole = SerializableReq::decode(&buf[..]).unwrap();
        assert_eq!(whole.list_of_unit.len(), 6);
        assert_eq!(whole.list_of_unit[0].list_of_info.len(), 4);
        assert_eq!(whole.list_of_unit[0].list_of_i32.len(), 5);

        let d = Deserialize::new(
            &Params {
                kernel: "Deserialize",
                map: m,
            },
            &h,
            Rand::new(&h, 3),
        )
        .unwrap();
        d.fire(&rq, 0).unwrap();
        let got = rq.get::<SerializableReq>("Rdeserialized").unwrap();
        assert!(s.corpus.reqs.contains(&got));
        assert!(Arc::ptr_eq(&s.corpus, &d.corpus));
    }

    #[test]
    fn one_input_name_cannot_mean_two_shapes() {
        let h = HandleObjs::new();
        let a = json!({"req_vec_len": 4, "input": "Hx"});
        let b = json!({"req_vec_len": 5, "input": "Hx"});
        Serialize::new(
            &Params {
                kernel: "Serialize",
                map: a.as_object().unwrap(),
            },
            &h,
            Rand::new(&h, 0),
        )
        .unwrap();
        let e = Serialize::new(
            &Params {
                kernel: "Serialize",
                map: b.as_object().unwrap(),
            },
            &h,
            Rand::new(&h, 0),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("\"Hx\""), "{e}");
    }
}
