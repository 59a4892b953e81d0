//! Dataset arrays advised onto transparent huge pages.
//!
//! The ranking graph and the pointer-chasing permutation are read at random
//! over tens of megabytes, so with 4 KiB pages nearly every access also
//! misses the TLB, and how many of the arrays' pages the kernel happens to
//! back with 2 MiB pages (THP `always`, or khugepaged later) decides a large
//! part of a request's cost. On this project's VM the ranking step alone
//! measured 61 to 91 ms per request across process runs with 4 KiB pages and
//! 55 to 61 ms with huge pages. Advising the arrays before they are first
//! written makes the backing the same in every run, on hosts whose THP mode
//! is `always` or `madvise`; with `never` the advice does nothing, and the
//! leaf reports how much of its memory ended up on huge pages either way.

use std::mem::size_of;

/// Size of a transparent huge page on the hosts this runs on (x86-64 and
/// arm64 with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// A vector of `len` values `f(0)..f(len - 1)`, its memory advised onto huge
/// pages before it is first written when `huge` is set.
pub fn filled<T>(len: usize, huge: bool, f: impl FnMut(usize) -> T) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    if huge {
        advise(v.as_ptr() as usize, len * size_of::<T>());
    }
    v.extend((0..len).map(f));
    v
}

/// Advises the whole huge pages inside `[addr, addr + bytes)`; returns the
/// bytes advised (0 when the range holds no whole huge page or the kernel
/// refused, as it does without THP support).
pub fn advise(addr: usize, bytes: usize) -> usize {
    let start = addr.next_multiple_of(HUGE_PAGE);
    let end = (addr + bytes) / HUGE_PAGE * HUGE_PAGE;
    if end <= start {
        return 0;
    }
    // SAFETY: madvise only changes how the kernel backs the pages of a range
    // this process owns (the vector's allocation); it does not touch data.
    let rc = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    if rc == 0 { end - start } else { 0 }
}

/// The host's THP mode (`always`, `madvise` or `never`), if it has THP.
pub fn thp_mode() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = s.find('[')?;
    let end = s[start..].find(']')? + start;
    Some(s[start + 1..end].to_string())
}

/// Anonymous memory of this process on huge pages, in bytes
/// (`AnonHugePages` of /proc/self/smaps_rollup).
pub fn anon_huge_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    parse_anon_huge(&s)
}

fn parse_anon_huge(smaps: &str) -> Option<u64> {
    let line = smaps.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_holds_the_values() {
        let v = filled(1000, true, |i| i as u32 * 3);
        assert_eq!(v.len(), 1000);
        assert_eq!(v[999], 2997);
        assert!(filled::<u64>(0, true, |_| 1).is_empty());
    }

    #[test]
    fn advice_covers_whole_huge_pages_only() {
        // A range smaller than a huge page, or straddling one boundary, has
        // no whole huge page inside.
        assert_eq!(advise(4096, 4096), 0);
        assert_eq!(advise(HUGE_PAGE - 4096, 8192), 0);
    }

    #[test]
    fn a_large_array_is_advised_and_backed_by_huge_pages_when_thp_allows() {
        let bytes = 64 << 20;
        let v = filled(bytes / 8, true, |i| i as u64);
        let advised_from = (v.as_ptr() as usize).next_multiple_of(HUGE_PAGE);
        let advised = (v.as_ptr() as usize + bytes) / HUGE_PAGE * HUGE_PAGE - advised_from;
        assert!(advised >= bytes - 2 * HUGE_PAGE);
        let mode = thp_mode();
        let huge = anon_huge_bytes();
        if matches!(mode.as_deref(), Some("always" | "madvise")) {
            // The kernel may fall back to small pages when it cannot find
            // free 2 MiB blocks, but with 24 GiB mostly free it finds some.
            let huge = huge.expect("smaps_rollup readable");
            assert!(
                huge >= HUGE_PAGE as u64,
                "{huge} bytes on huge pages ({mode:?})"
            );
        }
        assert_eq!(v[bytes / 8 - 1], (bytes / 8 - 1) as u64);
    }

    #[test]
    fn parses_smaps_rollup() {
        let s = "Rss:  1000 kB\nAnonHugePages:   4096 kB\nShmemPmdMapped: 0 kB\n";
        assert_eq!(parse_anon_huge(s), Some(4096 * 1024));
        assert_eq!(parse_anon_huge("Rss: 1 kB\n"), None);
    }
}
