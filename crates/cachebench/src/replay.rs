//! Replaying CacheLib's key-value trace CSVs (`generator: replay`).
//!
//! The header names the columns: `key`, `op` and `size` are required;
//! `op_count`, `key_size`, `ttl` and `op_time` are used when present, other
//! columns are ignored. Ops: `GET`/`GET_LEASE`, `SET`/`SET_LEASE`,
//! `DELETE`. A key shorter than its `key_size` is padded to it. With
//! `ampFactor` k every line becomes k requests whose keys get a 4-digit
//! suffix (`0000` ...), so one trace stands for a k-times larger key space.
//! `op_count` repeats a request (with `repeatOpCount`). A key always goes
//! to the same thread (by hash), so per-key order is kept. Lines that do
//! not parse are counted and skipped, not fatal.

use std::path::Path;

/// A replayed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayOp {
    Get,
    Set,
    Delete,
}

/// One request of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub key: Vec<u8>,
    pub op: ReplayOp,
    pub size: u32,
    pub ttl_secs: u32,
    /// How many times in a row (op_count, at least 1).
    pub count: u32,
}

/// A trace split over the threads.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub per_thread: Vec<Vec<Request>>,
    pub lines: u64,
    pub parse_errors: u64,
}

/// How to read the trace.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub threads: usize,
    pub amp_factor: u32,
    pub repeat_op_count: bool,
    /// Data lines skipped at the start of the trace (`fastForwardCount`).
    pub fast_forward: u64,
}

fn thread_of(key: &[u8], threads: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % threads.max(1) as u64) as usize
}

/// The longest key CacheLib stores (`KAllocation::kKeyMaxLen`).
pub const MAX_KEY_LEN: usize = 255;

/// Reads the trace files in order. A line that cannot be parsed (unknown
/// op, bad number, empty key, a key longer than [`MAX_KEY_LEN`] with its
/// `key_size` padding) is counted in `parse_errors` and skipped.
pub fn load(files: &[impl AsRef<Path>], opts: &ReplayOptions) -> Result<Trace, String> {
    let mut trace = Trace {
        per_thread: vec![Vec::new(); opts.threads.max(1)],
        ..Trace::default()
    };
    let mut skipped = 0u64;
    for f in files {
        let f = f.as_ref();
        let text = std::fs::read_to_string(f)
            .map_err(|e| format!("cannot read trace {}: {e}", f.display()))?;
        let mut lines = text.lines();
        let header = lines
            .next()
            .ok_or_else(|| format!("{}: empty trace (a header line is required)", f.display()))?;
        let cols: Vec<&str> = header.split(',').map(str::trim).collect();
        let col = |name: &str| cols.iter().position(|c| *c == name);
        let (Some(k), Some(o), Some(s)) = (col("key"), col("op"), col("size")) else {
            return Err(format!(
                "{}: the header must name the columns key, op and size (found: {header})",
                f.display()
            ));
        };
        let (count_col, key_size_col, ttl_col) = (col("op_count"), col("key_size"), col("ttl"));
        for line in lines {
            if line.trim().is_empty() {
                continue;
            }
            if skipped < opts.fast_forward {
                skipped += 1;
                continue;
            }
            trace.lines += 1;
            let fields: Vec<&str> = line.split(',').collect();
            let get = |i: usize| fields.get(i).map(|x| x.trim());
            let parsed = (|| {
                let op = match get(o)? {
                    "GET" | "GET_LEASE" => ReplayOp::Get,
                    "SET" | "SET_LEASE" => ReplayOp::Set,
                    "DELETE" => ReplayOp::Delete,
                    _ => return None,
                };
                let mut key = get(k)?.as_bytes().to_vec();
                if key.is_empty() {
                    return None;
                }
                let size: u32 = get(s)?.parse().ok()?;
                let count: u32 = match count_col {
                    Some(c) if opts.repeat_op_count => get(c)?.parse::<u32>().ok()?.max(1),
                    _ => 1,
                };
                let ttl: u32 = match ttl_col {
                    Some(c) => get(c)?.parse().ok()?,
                    None => 0,
                };
                // CacheLib's keys are at most 255 bytes (an 8-bit length);
                // a longer key, or padding to one, is a bad line, not an
                // allocation of whatever size the trace asks for.
                if let Some(c) = key_size_col {
                    let want: usize = get(c)?.parse().ok()?;
                    if want > MAX_KEY_LEN {
                        return None;
                    }
                    if key.len() < want {
                        key.resize(want, b'0');
                    }
                }
                if key.len() > MAX_KEY_LEN {
                    return None;
                }
                Some((key, op, size, count, ttl))
            })();
            let Some((key, op, size, count, ttl)) = parsed else {
                trace.parse_errors += 1;
                continue;
            };
            let amp = opts.amp_factor.max(1);
            for a in 0..amp {
                let mut key = key.clone();
                if amp > 1 {
                    key.extend_from_slice(format!("{a:04}").as_bytes());
                }
                let t = thread_of(&key, opts.threads);
                trace.per_thread[t].push(Request {
                    key,
                    op,
                    size,
                    ttl_secs: ttl,
                    count,
                });
            }
        }
    }
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(name: &str) -> std::path::PathBuf {
        testenv::conformance_root()
            .unwrap_or_default()
            .join("cachebench/test_configs/trace_replay/kvcache")
            .join(name)
    }

    #[test]
    fn upstream_traces_parse() {
        testenv::conformance_or_return!("cachebench/test_configs/trace_replay/kvcache");
        let mut opts = ReplayOptions {
            threads: 4,
            amp_factor: 1,
            repeat_op_count: true,
            fast_forward: 0,
        };
        let t = load(
            &[upstream("kv_traces_1.csv"), upstream("kv_traces_2.csv")],
            &opts,
        )
        .unwrap();
        assert_eq!(t.lines, 198);
        assert_eq!(t.parse_errors, 0);
        let all: Vec<&Request> = t.per_thread.iter().flatten().collect();
        assert_eq!(all.len(), 198);
        // key_size pads the key: the first line's key is 16 characters, its
        // key_size 48.
        assert!(
            all.iter()
                .any(|r| r.key.len() == 48 && r.key.starts_with(b"82131353f9ddc8c6"))
        );
        assert!(all.iter().any(|r| r.count == 3));
        // Every request of a key is on one thread.
        for (i, reqs) in t.per_thread.iter().enumerate() {
            for r in reqs {
                assert_eq!(thread_of(&r.key, 4), i);
            }
        }
        // Fast-forwarding skips lines across the files.
        opts.fast_forward = 150;
        let t = load(
            &[upstream("kv_traces_1.csv"), upstream("kv_traces_2.csv")],
            &opts,
        )
        .unwrap();
        assert_eq!(t.lines, 48);
    }

    /// key_size pads up to CacheLib's 255-byte keys; a line asking for
    /// more (or with a longer key) is a bad line, not a huge allocation
    /// (found by the cachebench_trace fuzz target).
    #[test]
    fn key_size_beyond_the_key_limit_is_a_bad_line() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("t.csv");
        let long = "k".repeat(256);
        std::fs::write(
            &f,
            format!(
                "key,op,size,key_size\na,GET,1,255\nb,GET,1,256\nc,GET,1,99999999999999\n{long},GET,1,0\n"
            ),
        )
        .unwrap();
        let opts = ReplayOptions {
            threads: 1,
            amp_factor: 1,
            repeat_op_count: true,
            fast_forward: 0,
        };
        let t = load(&[&f], &opts).unwrap();
        assert_eq!((t.lines, t.parse_errors), (4, 3));
        assert_eq!(t.per_thread[0][0].key.len(), MAX_KEY_LEN);
    }

    #[test]
    fn amp_factor_bad_lines_and_headers() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("t.csv");
        std::fs::write(
            &f,
            "op,key,size\nGET,a,10\nSET_LEASE,b,20\nFROB,c,1\nDELETE,d\nGET,e,x\n",
        )
        .unwrap();
        let opts = ReplayOptions {
            threads: 2,
            amp_factor: 3,
            repeat_op_count: true,
            fast_forward: 0,
        };
        let t = load(&[&f], &opts).unwrap();
        assert_eq!((t.lines, t.parse_errors), (5, 3));
        let mut keys: Vec<Vec<u8>> = t
            .per_thread
            .iter()
            .flatten()
            .map(|r| r.key.clone())
            .collect();
        keys.sort();
        assert_eq!(keys.len(), 6);
        assert_eq!(keys[0], b"a0000");
        assert_eq!(keys[5], b"b0002");
        std::fs::write(&f, "op,key\nGET,a\n").unwrap();
        assert!(load(&[&f], &opts).unwrap_err().contains("key, op and size"));
        assert!(
            load(&[d.path().join("none.csv")], &opts)
                .unwrap_err()
                .contains("cannot read trace")
        );
    }
}
