//! `IBRun`: instruction-cache and iTLB pressure, as upstream's AdSim
//! `ICacheBuster` (its `gen_icache_buster.py`, run by its CMake file with
//! 1,800,000 methods): [`METHODS`] distinct functions with one body, each
//! reading three unsigned ints, adding them and writing one back:
//! `tmp = *a0 + *a1 + *a2; if tmp % 2 { *a0 = tmp >> 1 } else if tmp % 3 {
//! *a1 = tmp - 1 } else { *a2 = tmp }`. One buster serves the process:
//! the methods are walked in a shuffled order (shuffled once), the call at
//! position `i` getting `&arr0[i], &arr1[i], &arr2[i]` of three arrays
//! filled with `i % 2`, `i % 3`, `i % 5`, and a cursor shared by every
//! `IBRun` kernel carries on from one fire to the next, wrapping around. A
//! fire makes `nrounds` calls; `nmethods` is, as upstream, the number of
//! calls made once when the kernel is built (its warm-up), not a bound on
//! the spread: every fire walks all 1,800,000.
//!
//! Where the code comes from. Upstream compiles the generated C++ (192
//! files, 1.8 M functions, tens of MB of text) into its server. Here the
//! functions are written at run time, when the first `IBRun` kernel is
//! built, into an anonymous mapping that is then made executable (never
//! writable and executable at once): the body's 37 bytes of x86-64 code in
//! a 48-byte slot per method (GCC's 16-byte function alignment), 82 MiB,
//! written in 0.85 s by a debug build on this (loaded) 2-core VM.
//! Generating them at build time instead would add those 82 MiB to every
//! binary that links this crate, and the assembling to every build: GNU
//! `as` on the same 1.8 M bodies (a `.rept`) took 62 s and 750 MB of memory
//! here (see `docs/adsim.md`). On targets other than
//! x86-64 (or where the kernel forbids executable anonymous memory) the
//! kernel falls back to FeedSim's 100,000 generated empty functions (the
//! `icache` crate), and says so in the server's log and the kernel's
//! `methods` count.
//!
//! Differences: upstream's cursor is a plain field read and written by
//! every thread at once (a data race: concurrent fires may run the same
//! methods); here a fire claims the next `nrounds` positions atomically,
//! so concurrent fires walk different methods. The shuffle's seed is fixed
//! (upstream seeds from the clock).

use super::{Fired, Kernel, Params, RequestObjs};
use crate::Error;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Upstream's `NUM_METHODS` (its icache_buster/CMakeLists.txt).
pub const METHODS: usize = 1_800_000;

/// The generated methods: code, walk order, data and the shared cursor.
struct Buster {
    /// Start of the executable mapping (`METHODS` slots of [`SLOT`] bytes).
    code: *const u8,
    /// Method number at each position of the walk.
    order: Box<[u32]>,
    /// The three arrays the methods read and write. Only the generated
    /// code touches them (through raw pointers), never a Rust reference
    /// after they are filled.
    arrays: [*mut u32; 3],
    cursor: AtomicUsize,
}

// SAFETY: the code mapping is read-only and executable after it is built;
// the arrays are reached only through raw pointers handed to the generated
// code, which tolerates concurrent access to a slot the way upstream's
// racy C++ does (a lost update changes which branch a later call takes,
// never memory safety: every access stays inside the arrays).
unsafe impl Send for Buster {}
// SAFETY: as above; the only shared mutable state Rust sees is the atomic
// cursor.
unsafe impl Sync for Buster {}

/// x86-64 machine code of one method (System V: the three pointers in rdi,
/// rsi, rdx), written out by hand:
///
/// ```text
///  0: 8b 07              mov  eax, [rdi]
///  2: 03 06              add  eax, [rsi]
///  4: 03 02              add  eax, [rdx]
///  6: a8 01              test al, 1
///  8: 75 16              jnz  32            ; odd: *a0 = tmp >> 1
/// 10: 69 c8 ab aa aa aa  imul ecx, eax, 0xaaaaaaab
/// 16: 81 f9 55 55 55 55  cmp  ecx, 0x55555555
/// 22: 76 05              jbe  29            ; tmp % 3 == 0: *a2 = tmp
/// 24: ff c8              dec  eax
/// 26: 89 06              mov  [rsi], eax    ; *a1 = tmp - 1
/// 28: c3                 ret
/// 29: 89 02              mov  [rdx], eax
/// 31: c3                 ret
/// 32: d1 e8              shr  eax, 1
/// 34: 89 07              mov  [rdi], eax
/// 36: c3                 ret
/// ```
///
/// (`x * 0xaaaaaaab <= 0x55555555` modulo 2^32 is `x % 3 == 0` for
/// unsigned 32-bit `x`: 0xaaaaaaab is 3's inverse.)
#[cfg(target_arch = "x86_64")]
const BODY: [u8; 37] = [
    0x8b, 0x07, 0x03, 0x06, 0x03, 0x02, 0xa8, 0x01, 0x75, 0x16, 0x69, 0xc8, 0xab, 0xaa, 0xaa, 0xaa,
    0x81, 0xf9, 0x55, 0x55, 0x55, 0x55, 0x76, 0x05, 0xff, 0xc8, 0x89, 0x06, 0xc3, 0x89, 0x02, 0xc3,
    0xd1, 0xe8, 0x89, 0x07, 0xc3,
];

/// Bytes from one method to the next: the body rounded up to GCC's
/// 16-byte function alignment (padding: `int3`).
const SLOT: usize = 48;

type Method = unsafe extern "C" fn(*mut u32, *mut u32, *mut u32);

/// The reference semantics of one method (the generated code's, for
/// tests).
#[cfg(test)]
fn method_ref(a: &mut [u32; 3]) {
    let tmp = a[0].wrapping_add(a[1]).wrapping_add(a[2]);
    if !tmp.is_multiple_of(2) {
        a[0] = tmp >> 1;
    } else if !tmp.is_multiple_of(3) {
        a[1] = tmp.wrapping_sub(1);
    } else {
        a[2] = tmp;
    }
}

#[cfg(target_arch = "x86_64")]
fn map_code() -> Result<*const u8, String> {
    const _: () = assert!(BODY.len() <= SLOT);
    let len = METHODS * SLOT;
    // SAFETY: an anonymous private mapping of `len` bytes; the result is
    // checked before use.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!(
            "cannot map {} MB for the generated methods: {}",
            len >> 20,
            std::io::Error::last_os_error()
        ));
    }
    let p = p.cast::<u8>();
    {
        // SAFETY: `p` is a fresh writable mapping of `len` bytes that
        // nothing else refers to yet.
        let mem = unsafe { std::slice::from_raw_parts_mut(p, len) };
        for slot in mem.chunks_exact_mut(SLOT) {
            slot[..BODY.len()].copy_from_slice(&BODY);
            slot[BODY.len()..].fill(0xcc);
        }
    }
    // SAFETY: `p..p+len` is the mapping made above; from here on it is
    // read-only and executable (x86 needs no instruction cache flush for
    // code written before it is first run).
    if unsafe { libc::mprotect(p.cast(), len, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
        let e = std::io::Error::last_os_error();
        // SAFETY: unmapping the mapping made above, which nothing uses.
        unsafe { libc::munmap(p.cast(), len) };
        return Err(format!(
            "cannot make the generated methods executable: {e} (a kernel policy forbidding executable anonymous memory?)"
        ));
    }
    Ok(p)
}

#[cfg(not(target_arch = "x86_64"))]
fn map_code() -> Result<*const u8, String> {
    Err(format!(
        "the generated methods are written as x86-64 code, and this is {}",
        std::env::consts::ARCH
    ))
}

/// The shuffled walk (Fisher-Yates, fixed xorshift seed).
fn shuffled(n: usize) -> Box<[u32]> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..n).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        order.swap(i, (s % (i as u64 + 1)) as usize);
    }
    order.into_boxed_slice()
}

impl Buster {
    fn build() -> Result<Buster, String> {
        let code = map_code()?;
        let fill = |m: u32| -> *mut u32 {
            let v: Vec<u32> = (0..METHODS as u32).map(|i| i % m).collect();
            Box::into_raw(v.into_boxed_slice()).cast::<u32>()
        };
        Ok(Buster {
            code,
            order: shuffled(METHODS),
            arrays: [fill(2), fill(3), fill(5)],
            cursor: AtomicUsize::new(0),
        })
    }

    /// Makes `rounds` calls from the next claimed positions.
    fn run(&self, rounds: u64) {
        let rounds = rounds as usize;
        let start = self.cursor.fetch_add(rounds, Ordering::Relaxed) % METHODS;
        let mut at = start;
        for _ in 0..rounds {
            let m = self.order[at] as usize;
            // SAFETY: `m < METHODS`, so `code + m * SLOT` is the entry of a
            // complete method in the executable mapping; it follows the C
            // calling convention and only reads and writes the three u32s
            // it is given, which are inside the arrays (`at < METHODS`).
            unsafe {
                let f: Method = std::mem::transmute::<*const u8, Method>(self.code.add(m * SLOT));
                f(
                    self.arrays[0].add(at),
                    self.arrays[1].add(at),
                    self.arrays[2].add(at),
                );
            }
            at += 1;
            if at == METHODS {
                at = 0;
            }
        }
    }
}

/// The process's buster, built by the first `IBRun` kernel, or why it
/// could not be (then FeedSim's functions stand in).
fn buster() -> &'static Result<Buster, String> {
    static B: OnceLock<Result<Buster, String>> = OnceLock::new();
    B.get_or_init(|| {
        let t = std::time::Instant::now();
        let b = Buster::build();
        match &b {
            Ok(_) => eprintln!(
                "adsim: IBRun's {METHODS} methods generated in {:.2} s ({} MB of code)",
                t.elapsed().as_secs_f64(),
                (METHODS * SLOT) >> 20
            ),
            Err(why) => eprintln!(
                "adsim: IBRun cannot generate upstream's methods ({why}); FeedSim's {} generated functions stand in",
                icache::FUNCTIONS
            ),
        }
        b
    })
}

pub struct IbRun {
    rounds: u64,
    /// Fallback only: a seed per fire.
    seed: AtomicU64,
    /// Keeps the fallback's checksums observable.
    sink: AtomicU64,
}

impl IbRun {
    pub fn new(p: &Params, fidx: usize) -> Result<Self, Error> {
        let rounds = p.u64("nrounds")?;
        let warmup = p.u64("nmethods")?;
        let k = IbRun {
            rounds,
            seed: AtomicU64::new(0x1b_0000 + fidx as u64),
            sink: AtomicU64::new(0),
        };
        // Upstream's constructor: `ibrun(nmethods)`, so that the buster is
        // built and its methods warmed up.
        k.calls(warmup);
        Ok(k)
    }

    fn calls(&self, n: u64) {
        match buster() {
            Ok(b) => b.run(n),
            Err(_) => {
                let seed = self.seed.fetch_add(0x9e37_79b9, Ordering::Relaxed);
                let x = icache::run(n, seed);
                self.sink.fetch_xor(x, Ordering::Relaxed);
            }
        }
    }

    /// Functions the calls are spread over: upstream's 1,800,000, or
    /// FeedSim's 100,000 where they cannot be generated.
    pub fn methods(&self) -> usize {
        match buster() {
            Ok(_) => METHODS,
            Err(_) => icache::FUNCTIONS,
        }
    }
}

impl Kernel for IbRun {
    fn fire(&self, _rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        self.calls(self.rounds);
        Ok(Fired::nothing())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn generated_methods_compute_upstreams_body() {
        let b = buster().as_ref().unwrap();
        // Each branch of the body, run through a generated method and the
        // reference: odd sums, even sums not divisible by 3, multiples of 6,
        // and a sum that wraps.
        for (k, input) in [
            [1u32, 0, 0],
            [2, 2, 0],
            [3, 3, 0],
            [6, 0, 6],
            [u32::MAX, 2, 1],
            [0, 0, 0],
        ]
        .into_iter()
        .enumerate()
        {
            let mut got = input;
            let mut want = input;
            method_ref(&mut want);
            let m = [0, 1, METHODS / 2, METHODS - 1, 12_345, 999_999][k];
            // SAFETY: `m < METHODS` names a generated method; it writes
            // only through the three pointers, which point into `got`.
            unsafe {
                let f: Method = std::mem::transmute::<*const u8, Method>(b.code.add(m * SLOT));
                let p = got.as_mut_ptr();
                f(p, p.add(1), p.add(2));
            }
            assert_eq!(got, want, "input {input:?} through method {m}");
        }
    }

    #[test]
    fn the_walk_is_a_permutation_of_all_methods() {
        let o = shuffled(METHODS);
        let mut seen = vec![false; METHODS];
        for &m in o.iter() {
            assert!(!std::mem::replace(&mut seen[m as usize], true));
        }
        assert!(
            o.iter()
                .take(1000)
                .enumerate()
                .any(|(i, &m)| i != m as usize)
        );
    }

    #[test]
    fn fires_walk_upstreams_count_from_a_shared_cursor() {
        let m = json!({"nrounds": 1000, "nmethods": 2000})
            .as_object()
            .unwrap()
            .clone();
        let params = Params {
            kernel: "IBRun",
            map: &m,
        };
        let k = IbRun::new(&params, 0).unwrap();
        let k2 = IbRun::new(&params, 1).unwrap();
        if cfg!(target_arch = "x86_64") {
            assert_eq!(k.methods(), METHODS);
            let b = buster().as_ref().unwrap();
            let before = b.cursor.load(Ordering::Relaxed);
            k.fire(&RequestObjs::new(Bytes::new()), 0).unwrap();
            k2.fire(&RequestObjs::new(Bytes::new()), 0).unwrap();
            // Both kernels carry on from one cursor, nrounds per fire
            // (other tests in this binary may fire too: at least 2000).
            assert!(b.cursor.load(Ordering::Relaxed) >= before + 2000);
        } else {
            assert_eq!(k.methods(), icache::FUNCTIONS);
        }
    }
}
