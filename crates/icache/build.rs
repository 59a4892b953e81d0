//! Generates the instruction-cache pressure functions: `FUNCTIONS` distinct
//! `#[inline(never)]` functions of `OPS` integer operations each, chosen and
//! parameterised by a fixed pseudo-random sequence, so every body is
//! different code. 16,384 functions of ~30 operations occupy about 2 MiB of
//! text: larger than a typical L2 and far larger than L1i, so a random call
//! sequence misses in the instruction cache as FeedSim intends, while the
//! release build of the crate stays well under a minute.
// A build script that cannot do its work should stop the build with the
// reason; unwrap does exactly that.
#![allow(clippy::unwrap_used)]

use std::fmt::Write;

const FUNCTIONS: usize = 16_384;
const OPS: usize = 28;

fn main() {
    let mut s: u64 = 0x243F_6A88_85A3_08D3;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut out = String::with_capacity(FUNCTIONS * 1200);
    writeln!(
        out,
        "/// Number of generated functions.\npub const FUNCTIONS: usize = {FUNCTIONS};"
    )
    .unwrap();
    for i in 0..FUNCTIONS {
        writeln!(out, "#[inline(never)]\nfn f{i}(mut x: u64) -> u64 {{").unwrap();
        for _ in 0..OPS {
            let c = next();
            let line = match c % 6 {
                0 => format!("    x = x.wrapping_add({:#x});", c >> 3),
                1 => format!("    x ^= {:#x};", c.rotate_left(17)),
                2 => format!("    x = x.rotate_left({});", 1 + (c >> 8) % 63),
                3 => format!("    x = x.wrapping_mul({:#x});", (c >> 1) | 1),
                4 => format!("    x ^= x >> {};", 1 + (c >> 8) % 61),
                _ => format!("    x = x.wrapping_sub(x << {});", 1 + (c >> 8) % 13),
            };
            writeln!(out, "{line}").unwrap();
        }
        writeln!(out, "    x\n}}").unwrap();
    }
    writeln!(out, "/// Every generated function, for random dispatch.\npub static TABLE: [fn(u64) -> u64; FUNCTIONS] = [").unwrap();
    for i in 0..FUNCTIONS {
        writeln!(out, "    f{i},").unwrap();
    }
    writeln!(out, "];").unwrap();
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("icache_gen.rs");
    std::fs::write(dest, out).unwrap();
    println!("cargo:rerun-if-changed=build.rs");
}
