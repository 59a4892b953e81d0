//! Kernels over in-memory data structures: `HashMap` (string-keyed lookups
//! in one of several hash table layouts) and `DeepCopy` (copying units of
//! vectors, ordered maps and hash maps).

use super::{Fired, HandleObjs, Kernel, Params, Rand, RequestObjs, Work};
use crate::Error;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::Arc;

/// Bob Jenkins' reversible 32-bit mix (upstream's key scrambler).
pub fn jenkins_rev_mix32(mut k: u32) -> u32 {
    k = k.wrapping_add(k << 12);
    k ^= k >> 22;
    k = k.wrapping_add(k << 4);
    k ^= k >> 9;
    k = k.wrapping_add(k << 10);
    k ^= k >> 2;
    k = k.wrapping_add(k << 7);
    k = k.wrapping_add(k << 12);
    k
}

/// The `i`-th key: the decimal string of a scrambled index.
pub fn key(i: u32) -> String {
    jenkins_rev_mix32(i ^ 0x619a_bc7e).to_string()
}

/// A fast non-cryptographic string hasher (FNV-1a over 8-byte words with a
/// final mix), standing in for F14's default hasher.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0 ^ 0xcbf2_9ce4_8422_2325;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            h = (h ^ u64::from_le_bytes(c.try_into().unwrap_or_default()))
                .wrapping_mul(0x1000_0000_01b3);
        }
        for &b in chunks.remainder() {
            h = (h ^ u64::from(b)).wrapping_mul(0x1000_0000_01b3);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }
}

type Fast = BuildHasherDefault<FastHasher>;

/// The table layouts of `map_type`.
enum Table {
    /// `unord`: std's table with SipHash (a slower, DoS-resistant hash).
    Unord(HashMap<String, u8>),
    /// `f14fast` / `f14val`: values inline in a SwissTable with a fast hash.
    Inline(hashbrown::HashMap<String, u8, Fast>),
    /// `f14node`: each entry boxed separately (one more pointer chase).
    #[allow(clippy::box_collection)]
    Node(hashbrown::HashMap<Box<String>, Box<u8>, Fast>),
    /// `f14vec`: entries in a dense vector, the table holding indices.
    Vector {
        entries: Vec<(String, u8)>,
        index: hashbrown::HashTable<u32>,
    },
}

impl Table {
    fn build(kind: &str, size: usize) -> Result<Table, String> {
        let items = (0..size as u32).map(|i| (key(i), (i.wrapping_mul(3)) as u8));
        Ok(match kind {
            "unord" => Table::Unord(items.collect()),
            "f14fast" | "f14val" => Table::Inline(items.collect()),
            "f14node" => Table::Node(items.map(|(k, v)| (Box::new(k), Box::new(v))).collect()),
            "f14vec" => {
                let entries: Vec<(String, u8)> = items.collect();
                let mut index = hashbrown::HashTable::with_capacity(entries.len());
                let hb = Fast::default();
                for (i, (k, _)) in entries.iter().enumerate() {
                    index.insert_unique(hb.hash_one(k), i as u32, |&j| {
                        hb.hash_one(&entries[j as usize].0)
                    });
                }
                Table::Vector { entries, index }
            }
            other => return Err(format!("HashMap params.map_type: unknown layout {other:?}")),
        })
    }

    fn get(&self, k: &str) -> Option<u8> {
        match self {
            Table::Unord(m) => m.get(k).copied(),
            Table::Inline(m) => m.get(k).copied(),
            Table::Node(m) => m.get(&k.to_string()).map(|v| **v),
            Table::Vector { entries, index } => {
                let h = Fast::default().hash_one(k);
                index
                    .find(h, |&j| entries[j as usize].0 == k)
                    .map(|&j| entries[j as usize].1)
            }
        }
    }
}

/// `HashMap`: `runs` passes, each looking up every other key of a
/// `size`-entry table (every lookup hits).
pub struct HashMapKernel {
    table: Arc<Table>,
    keys: Arc<Vec<String>>,
    runs: usize,
}

impl HashMapKernel {
    pub fn new(p: &Params, h: &HandleObjs) -> Result<Self, Error> {
        let size = p.usize("size")?;
        let runs = p.usize("runs")?;
        let kind = p.str_or("map_type", "f14val")?;
        let input = p.str_or("input", "Hhashmap")?;
        let table = h.get_or_build(&format!("{input}.{kind}.{size}"), || {
            Table::build(kind, size).map_err(Error::Input)
        })?;
        let keys = h.get_or_build(&format!("hashmap.keys.{size}"), || {
            Ok((0..size as u32)
                .step_by(2)
                .map(key)
                .collect::<Vec<String>>())
        })?;
        Ok(HashMapKernel { table, keys, runs })
    }
}

impl Kernel for HashMapKernel {
    fn fire(&self, _rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let mut x = 0u8;
        let mut missing = 0usize;
        for _ in 0..self.runs {
            for k in self.keys.iter() {
                match self.table.get(k) {
                    Some(v) => x ^= v,
                    None => missing += 1,
                }
            }
        }
        std::hint::black_box(x);
        if missing > 0 {
            return Err(Error::Host(format!(
                "HashMap: {missing} lookups of inserted keys missed"
            )));
        }
        Ok(Fired::nothing())
    }

    fn work(&self) -> Work {
        Work {
            flops: 0.0,
            bytes: (self.runs * self.keys.len()) as f64,
        }
    }
}

/// One unit DeepCopy copies.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CopyUnit {
    pub i64_vec: Vec<i64>,
    pub stri64_map: BTreeMap<String, i64>,
    pub stri64_hashtab: HashMap<String, i64>,
}

impl CopyUnit {
    /// A deep copy, the hash map reserved up front (as upstream does).
    fn deep_copy(&self) -> CopyUnit {
        let mut hashtab = HashMap::with_capacity(self.stri64_hashtab.len());
        for (k, v) in &self.stri64_hashtab {
            hashtab.insert(k.clone(), *v);
        }
        CopyUnit {
            i64_vec: self.i64_vec.clone(),
            stri64_map: self.stri64_map.clone(),
            stri64_hashtab: hashtab,
        }
    }
}

/// `DeepCopy`: copies `copy_len` consecutive units (from a random start,
/// wrapping) of its input into a new vector stored under `output`. An
/// `H...` input is built at start-up with `unit_vec_len` units of
/// `i64_vec_len` values and maps of `stri64_map_size` /
/// `stri64_hashtab_size` entries; any other input is an earlier stage's
/// output.
pub struct DeepCopy {
    copy_len: usize,
    input: String,
    output: String,
    shared: Option<Arc<Vec<CopyUnit>>>,
    rand: Rand,
    unit_bytes: f64,
}

impl DeepCopy {
    pub fn new(p: &Params, h: &HandleObjs, rand: Rand) -> Result<Self, Error> {
        let copy_len = p.usize("copy_len")?;
        let input = p.str_or("input", "Hdeepcopy")?.to_string();
        let output = p.str_or("output", "Rdeepcopy")?.to_string();
        let (shared, unit_bytes) = if input.starts_with('H') {
            let units = p.usize_or("unit_vec_len", 1024)?;
            let ints = p.usize_or("i64_vec_len", 64)?;
            let map = p.usize_or("stri64_map_size", 0)?;
            let tab = p.usize_or("stri64_hashtab_size", 0)?;
            let v = h.get_or_build(&input, || {
                Ok((0..units)
                    .map(|_| CopyUnit {
                        i64_vec: (0..ints).map(|_| i64::from(rand.next())).collect(),
                        stri64_map: (0..map as u32)
                            .map(|i| (key(i), i64::from(rand.next())))
                            .collect(),
                        stri64_hashtab: (0..tab as u32)
                            .map(|i| (key(i), i64::from(rand.next())))
                            .collect(),
                    })
                    .collect::<Vec<CopyUnit>>())
            })?;
            if v.is_empty() {
                return Err(Error::Input(format!(
                    "DeepCopy params.unit_vec_len: input {input:?} has no units"
                )));
            }
            let b = (ints * 8 + (map + tab) * 24) as f64;
            (Some(v), b)
        } else {
            (None, 0.0)
        };
        Ok(DeepCopy {
            copy_len,
            input,
            output,
            shared,
            rand,
            unit_bytes,
        })
    }
}

impl Kernel for DeepCopy {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let held;
        let src: &[CopyUnit] = match &self.shared {
            Some(v) => v,
            None => {
                held = rq.need::<Vec<CopyUnit>>(&self.input)?;
                &held
            }
        };
        if src.is_empty() {
            return Err(Error::Input(format!(
                "DeepCopy: input {:?} holds no units",
                self.input
            )));
        }
        let start = self.rand.next() as usize;
        let out: Vec<CopyUnit> = (0..self.copy_len)
            .map(|i| src[(start + i) % src.len()].deep_copy())
            .collect();
        rq.put(&self.output, out);
        Ok(Fired::nothing())
    }

    fn work(&self) -> Work {
        Work {
            flops: 0.0,
            bytes: self.unit_bytes * self.copy_len as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    #[test]
    fn jenkins_mix_is_a_bijection_on_a_sample() {
        assert_eq!(jenkins_rev_mix32(0), 0);
        let mut v: Vec<u32> = (0..10_000).map(jenkins_rev_mix32).collect();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), 10_000);
    }

    #[test]
    fn every_layout_finds_every_key() {
        for kind in ["unord", "f14fast", "f14val", "f14node", "f14vec"] {
            let t = Table::build(kind, 500).unwrap();
            for i in 0..500u32 {
                assert_eq!(
                    t.get(&key(i)),
                    Some(i.wrapping_mul(3) as u8),
                    "{kind} key {i}"
                );
            }
            assert_eq!(t.get("not a key"), None, "{kind}");
        }
        let h = HandleObjs::new();
        let m = json!({"runs": 3, "size": 100, "map_type": "f14vec"});
        let k = HashMapKernel::new(
            &Params {
                kernel: "HashMap",
                map: m.as_object().unwrap(),
            },
            &h,
        )
        .unwrap();
        k.fire(&RequestObjs::new(Bytes::new()), 0).unwrap();
        assert_eq!(k.work().bytes, 150.0);
    }

    #[test]
    fn deep_copy_chain_copies_units_through_request_objects() {
        let h = HandleObjs::new();
        let first = json!({"copy_len": 4, "unit_vec_len": 16, "i64_vec_len": 8,
                           "stri64_map_size": 3, "stri64_hashtab_size": 5});
        let a = DeepCopy::new(
            &Params {
                kernel: "DeepCopy",
                map: first.as_object().unwrap(),
            },
            &h,
            Rand::new(&h, 0),
        )
        .unwrap();
        let next = json!({"copy_len": 2, "input": "Rdeepcopy", "output": "Rdeepcopy0"});
        let b = DeepCopy::new(
            &Params {
                kernel: "DeepCopy",
                map: next.as_object().unwrap(),
            },
            &h,
            Rand::new(&h, 5),
        )
        .unwrap();
        let rq = RequestObjs::new(Bytes::new());
        a.fire(&rq, 0).unwrap();
        b.fire(&rq, 0).unwrap();
        let src = a.shared.as_ref().unwrap();
        let one = rq.get::<Vec<CopyUnit>>("Rdeepcopy").unwrap();
        let two = rq.get::<Vec<CopyUnit>>("Rdeepcopy0").unwrap();
        assert_eq!(one.len(), 4);
        assert_eq!(two.len(), 2);
        assert!(
            one.iter()
                .all(|u| src.contains(u) && u.i64_vec.len() == 8 && u.stri64_hashtab.len() == 5)
        );
        assert!(two.iter().all(|u| one.contains(u)));
    }
}
