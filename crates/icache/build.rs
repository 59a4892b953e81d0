//! Generates FeedSim's i-cache buster: `FUNCTIONS` (100,000, upstream's
//! `kNumICacheBusterMethods` and `ICACHEBUSTER_NUM_METHODS`) distinct
//! functions with empty bodies, as upstream's generator writes them
//! (`void ICBMethod_N() { }`). Built with upstream's `-O3`, each of those is
//! a lone return instruction in its own 16-byte aligned slot (GCC 12 on
//! x86-64, checked with `objdump`), so the 100,000 occupy 1.6 MB of text,
//! four to a 64-byte line, and a call to one is nearly always an L1i miss.
//!
//! Route chosen: assembly, not Rust functions. On x86_64 and aarch64 with
//! ELF or Mach-O objects this script writes `icache_gen.s` for
//! `global_asm!`: one hidden symbol at the start of a 64-byte aligned block
//! of `FUNCTIONS` slots, each a `ret` padded to 16 bytes by `.rept`, so
//! function `i` is at `base + 16 * i` and no table of addresses is needed.
//! The crate then builds in 1 to 2 s from a touched `build.rs` (dev and
//! release, 2 cores), where rustc and LLVM took 100 s for the 100,000 Rust
//! functions of the fallback below (dev) and 48 s for the earlier 16,384
//! functions of 28 integer operations (dev and release alike). It also
//! gives exactly upstream's code shape, which Rust functions cannot:
//! rustc -O gives identical empty functions one shared address (checked
//! with rustc 1.95), so every Rust body has to differ and be larger than a
//! bare `ret`.
//!
//! Other targets (or `ICACHE_RUST_FALLBACK=1`, for testing the fallback on
//! a host that has the assembly route) get `icache_gen.rs` instead: 100,000
//! `#[inline(never)] extern "C"` functions whose bodies differ only in the
//! constant they pass to `black_box` (small bodies that rustc keeps
//! distinct), and a table of their addresses. That build is slow; it exists
//! so the crate still compiles everywhere.
// A build script that cannot do its work should stop the build with the
// reason; unwrap does exactly that.
#![allow(clippy::unwrap_used)]

use std::fmt::Write;

/// Upstream's `kNumICacheBusterMethods` (LeafNodeRank.cc) and
/// `ICACHEBUSTER_NUM_METHODS` (search/CMakeLists.txt).
const FUNCTIONS: usize = 100_000;
/// Bytes between consecutive functions on the assembly route: GCC's
/// function alignment at `-O3` on x86-64.
const SLOT: usize = 16;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=ICACHE_RUST_FALLBACK");
    println!("cargo::rustc-check-cfg=cfg(icache_asm)");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap();
    let vendor = std::env::var("CARGO_CFG_TARGET_VENDOR").unwrap_or_default();
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let forced = std::env::var("ICACHE_RUST_FALLBACK").is_ok_and(|v| v == "1");
    let asm_arch = arch == "x86_64" || arch == "aarch64";
    let macho = vendor == "apple";
    let elf = !macho && !matches!(os.as_str(), "windows" | "uefi" | "none");

    let mut rs = String::new();
    writeln!(
        rs,
        "/// Number of generated functions (upstream's `kNumICacheBusterMethods`).\n\
         pub const FUNCTIONS: usize = {FUNCTIONS};"
    )
    .unwrap();
    if asm_arch && (elf || macho) && !forced {
        println!("cargo:rustc-cfg=icache_asm");
        writeln!(
            rs,
            "/// Bytes from one generated function to the next.\npub const SLOT: usize = {SLOT};"
        )
        .unwrap();
        std::fs::write(out.join("icache_gen.s"), assembly(&arch, macho)).unwrap();
    } else {
        fallback(&mut rs);
    }
    std::fs::write(out.join("icache_gen.rs"), rs).unwrap();
}

/// The functions as assembly: a hidden global symbol, then `FUNCTIONS`
/// slots of one `ret` each, padded to `SLOT` bytes.
fn assembly(arch: &str, macho: bool) -> String {
    let align = SLOT.trailing_zeros();
    let mut s = String::new();
    if macho {
        // Mach-O: C symbols carry a leading underscore; rustc adds it to the
        // `link_name` on the Rust side too.
        s.push_str(
            "    .pushsection __TEXT,__text,regular,pure_instructions\n\
             \x20   .p2align 6\n\
             \x20   .globl _rackbench_icache_base\n\
             \x20   .private_extern _rackbench_icache_base\n\
             _rackbench_icache_base:\n",
        );
    } else {
        // `%progbits`: `@` starts a comment in some ARM assembler dialects.
        let progbits = if arch == "x86_64" {
            "@progbits"
        } else {
            "%progbits"
        };
        let function = if arch == "x86_64" {
            "@function"
        } else {
            "%function"
        };
        writeln!(
            s,
            "    .pushsection .text.rackbench_icache,\"ax\",{progbits}\n\
             \x20   .p2align 6\n\
             \x20   .globl rackbench_icache_base\n\
             \x20   .hidden rackbench_icache_base\n\
             \x20   .type rackbench_icache_base,{function}\n\
             \x20   .size rackbench_icache_base,{}\n\
             rackbench_icache_base:",
            FUNCTIONS * SLOT
        )
        .unwrap();
    }
    writeln!(
        s,
        "    .rept {FUNCTIONS}\n\
         \x20   ret\n\
         \x20   .p2align {align}\n\
         \x20   .endr\n\
         \x20   .popsection"
    )
    .unwrap();
    s
}

/// The portable route: distinct Rust functions and a table of them.
fn fallback(rs: &mut String) {
    rs.reserve(FUNCTIONS * 120);
    for i in 0..FUNCTIONS {
        writeln!(
            rs,
            "#[inline(never)]\nextern \"C\" fn f{i}() {{\n    core::hint::black_box({i}u32);\n}}"
        )
        .unwrap();
    }
    writeln!(
        rs,
        "/// Every generated function, by index.\n\
         pub static TABLE: [extern \"C\" fn(); FUNCTIONS] = ["
    )
    .unwrap();
    for i in 0..FUNCTIONS {
        writeln!(rs, "    f{i},").unwrap();
    }
    writeln!(rs, "];").unwrap();
}
