//! Every fuzz target over its seeds (`seeds/<target>/`) and the inputs that
//! once crashed or hung it (`regressions/<target>/`), then over simple
//! mutations of each seed: none may panic, and each input must finish
//! well within the time a fuzzer allows it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// An input that takes longer than this is a hang (AFL++'s default limit
/// is 1 s; this leaves room for a slow, loaded machine).
const HANG: Duration = Duration::from_secs(20);

fn run(target: &rackbench_fuzz::Target, input: &[u8], label: &str) {
    let t = Instant::now();
    (target.run)(input);
    assert!(
        t.elapsed() < HANG,
        "{}: {label} took {:?}",
        target.name,
        t.elapsed()
    );
}

#[test]
fn every_target_has_seeds() {
    for t in rackbench_fuzz::TARGETS {
        let seeds = files(&root().join("seeds").join(t.name));
        assert!(!seeds.is_empty(), "no seeds for {}", t.name);
    }
    // No corpus directory without a target (a renamed target would leave
    // its regressions unrun).
    for kind in ["seeds", "regressions"] {
        let Ok(rd) = std::fs::read_dir(root().join(kind)) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            assert!(
                rackbench_fuzz::target(&name).is_some(),
                "{kind}/{name} is not a target"
            );
        }
    }
}

#[test]
fn seeds_and_regressions_run_clean() {
    for t in rackbench_fuzz::TARGETS {
        for kind in ["seeds", "regressions"] {
            for f in files(&root().join(kind).join(t.name)) {
                let data = std::fs::read(&f).unwrap();
                run(t, &data, &f.display().to_string());
            }
        }
    }
}

/// A small deterministic mutation pass (bit flips, truncations, byte
/// insertions, chunk duplication) over every seed, so a regression in
/// error handling is caught without AFL++ installed.
#[test]
fn mutated_seeds_run_clean() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // xorshift64*: deterministic, no dependency needed for a test.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for t in rackbench_fuzz::TARGETS {
        for f in files(&root().join("seeds").join(t.name)) {
            let seed = std::fs::read(&f).unwrap();
            for round in 0..150 {
                let mut m = seed.clone();
                let len = m.len().max(1) as u64;
                match round % 5 {
                    0 if !m.is_empty() => {
                        let i = (next() % len) as usize;
                        m[i] ^= 1 << (next() % 8);
                    }
                    1 => m.truncate((next() % len) as usize),
                    2 => {
                        let i = (next() % len) as usize;
                        let b = b"\0\n\"{}[],:=#-9 e\xff"[(next() % 16) as usize];
                        m.insert(i.min(m.len()), b);
                    }
                    3 if !m.is_empty() => {
                        let a = (next() % len) as usize;
                        let b = (a + (next() % 64) as usize).min(m.len());
                        let chunk = m[a..b].to_vec();
                        m.splice(a..a, chunk);
                    }
                    _ => {
                        let i = (next() % len) as usize;
                        let digits = b"99999999999999999999";
                        m.splice(i.min(m.len())..i.min(m.len()), digits.iter().copied());
                    }
                }
                run(t, &m, &format!("{} mutation {round}", f.display()));
            }
        }
    }
}
