//! hashd's test files: `size x file_max_frac` bytes of random data in
//! 32 MiB files, 4096 to a folder (`rdh-0000/rdh-0000000`, ... as
//! rd-hashd names them), read through the page cache by requests.
//!
//! Each 512-byte block holds random words followed by zero words, the zero
//! share being the compressibility; the first 8 bytes of a file hold the
//! compressibility (an f64) so a later run reuses files that match.

use super::params::TESTFILE_UNIT;
use rand::{Rng, SeedableRng};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const PER_DIR: u64 = 4096;

/// The test files of one directory.
pub struct TestFiles {
    dir: PathBuf,
    nr_files: u64,
    comp: f64,
    open: Vec<OnceLock<File>>,
}

/// How [`TestFiles::prepare`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Prepared {
    pub created: u64,
    pub reused: u64,
}

impl TestFiles {
    /// `total` bytes of files in `dir` (rounded up to whole files).
    pub fn new(dir: &Path, total: u64, comp: f64) -> TestFiles {
        let nr_files = total.div_ceil(TESTFILE_UNIT).max(1);
        TestFiles {
            dir: dir.to_path_buf(),
            nr_files,
            comp: comp.clamp(0.0, 1.0),
            open: (0..nr_files).map(|_| OnceLock::new()).collect(),
        }
    }

    pub fn nr_files(&self) -> u64 {
        self.nr_files
    }

    /// Total bytes.
    pub fn size(&self) -> u64 {
        self.nr_files * TESTFILE_UNIT
    }

    /// Path of file `i`.
    pub fn path(&self, i: u64) -> PathBuf {
        self.dir
            .join(format!("rdh-{:04x}", i / PER_DIR))
            .join(format!("rdh-{i:07x}"))
    }

    fn matches(&self, path: &Path) -> bool {
        let Ok(f) = File::open(path) else {
            return false;
        };
        let Ok(md) = f.metadata() else {
            return false;
        };
        let mut head = [0u8; 8];
        md.is_file()
            && md.len() == TESTFILE_UNIT
            && f.read_exact_at(&mut head, 0).is_ok()
            && f64::from_le_bytes(head) == self.comp
    }

    /// Creates the files that are missing or do not match (size and
    /// compressibility), reusing the rest; `progress(done, total)` bytes
    /// after each file.
    pub fn prepare(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<Prepared, crate::Error> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| {
                format!(
                    "{}: cannot create the test file directory: {e}",
                    self.dir.display()
                )
            })
            .map_err(crate::Error::Host)?;
        let mut rng = rand::rngs::SmallRng::from_os_rng();
        let mut buf = vec![0u8; 1 << 20];
        let mut out = Prepared::default();
        for i in 0..self.nr_files {
            let path = self.path(i);
            if self.matches(&path) {
                out.reused += 1;
            } else {
                if i % PER_DIR == 0 || !path.parent().is_some_and(|p| p.exists()) {
                    let parent = path.parent().expect("a file in a folder");
                    std::fs::create_dir_all(parent).map_err(|e| {
                        crate::Error::Host(format!("{}: cannot create: {e}", parent.display()))
                    })?;
                }
                self.create(&path, &mut rng, &mut buf).map_err(|e| {
                    crate::Error::Host(format!("{}: cannot write a test file: {e}", path.display()))
                })?;
                out.created += 1;
            }
            progress((i + 1) * TESTFILE_UNIT, self.size());
        }
        Ok(out)
    }

    fn create(
        &self,
        path: &Path,
        rng: &mut rand::rngs::SmallRng,
        buf: &mut [u8],
    ) -> std::io::Result<()> {
        let _ = std::fs::remove_file(path);
        let mut f = File::create(path)?;
        let mut written = 0;
        while written < TESTFILE_UNIT {
            fill_random(buf, self.comp, rng);
            if written == 0 {
                buf[..8].copy_from_slice(&self.comp.to_le_bytes());
            }
            f.write_all(buf)?;
            written += buf.len() as u64;
        }
        f.sync_all()
    }

    /// Drops the files from the page cache (a cold start, as rd-hashd does
    /// after preparing unless told to keep the cache).
    pub fn drop_cache(&self) {
        for i in 0..self.nr_files {
            if let Ok(f) = File::open(self.path(i)) {
                use std::os::fd::AsRawFd;
                // SAFETY: a valid descriptor; advice only.
                unsafe {
                    libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
                }
            }
        }
    }

    fn file(&self, i: u64) -> std::io::Result<&File> {
        if let Some(f) = self.open[i as usize].get() {
            return Ok(f);
        }
        let f = File::open(self.path(i))?;
        Ok(self.open[i as usize].get_or_init(|| f))
    }

    /// Reads up to `len` bytes from page `page` of the whole set (pages run
    /// through the files in order), stopping at the end of its file, and
    /// appends them to `out`; returns the bytes read.
    pub fn read_pages(&self, page: u64, len: usize, out: &mut Vec<u8>) -> std::io::Result<usize> {
        let per_file = TESTFILE_UNIT / 4096;
        let (i, off) = (page / per_file, (page % per_file) * 4096);
        if i >= self.nr_files {
            return Ok(0);
        }
        let len = len.min((TESTFILE_UNIT - off) as usize);
        let start = out.len();
        out.resize(start + len, 0);
        let f = self.file(i)?;
        f.read_exact_at(&mut out[start..], off)?;
        Ok(len)
    }

    /// Bumps the first word of page `page` (a file write).
    pub fn write_page(&self, page: u64) -> std::io::Result<()> {
        let per_file = TESTFILE_UNIT / 4096;
        let (i, off) = (page / per_file, (page % per_file) * 4096);
        let path = self.path(i);
        let f = File::options().read(true).write(true).open(path)?;
        let mut w = [0u8; 8];
        f.read_exact_at(&mut w, off)?;
        let v = u64::from_le_bytes(w).wrapping_add(1);
        f.write_all_at(&v.to_le_bytes(), off)
    }

    /// Pulls the first `size` bytes' worth of whole files into the page
    /// cache, one byte a page, the last file first (the hottest pages are
    /// read last); `progress(done, total)` bytes after each file.
    pub fn preload(&self, size: u64, progress: &mut dyn FnMut(u64, u64)) -> std::io::Result<u64> {
        let n = (size / TESTFILE_UNIT).min(self.nr_files);
        let mut b = [0u8; 1];
        for (done, i) in (0..n).rev().enumerate() {
            let f = self.file(i)?;
            for page in 0..TESTFILE_UNIT / 4096 {
                f.read_exact_at(&mut b, page * 4096)?;
            }
            progress((done as u64 + 1) * TESTFILE_UNIT, n * TESTFILE_UNIT);
        }
        Ok(n * TESTFILE_UNIT)
    }

    /// Removes files named like test files from the directory.
    pub fn clear(dir: &Path) -> std::io::Result<u64> {
        let mut n = 0;
        let Ok(rd) = std::fs::read_dir(dir) else {
            return Ok(0);
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let hex = name.strip_prefix("rdh-").unwrap_or("");
            if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) {
                std::fs::remove_dir_all(e.path())?;
                n += 1;
            }
        }
        Ok(n)
    }
}

/// Whether the block device holding `path` (a file or folder; a block
/// device node itself when `node`) is rotational, from sysfs; false when
/// unknown.
pub fn is_rotational(path: &Path, node: bool) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(md) = std::fs::metadata(path) else {
        return false;
    };
    let dev = if node { md.rdev() } else { md.dev() };
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let base = format!("/sys/dev/block/{major}:{minor}");
    // A partition's queue is its disk's.
    [
        format!("{base}/queue/rotational"),
        format!("{base}/../queue/rotational"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok())
    .is_some_and(|v| v.trim() == "1")
}

/// Whether any active swap device (or the device a swap file is on) is
/// rotational.
pub fn is_swap_rotational() -> bool {
    let Ok(swaps) = std::fs::read_to_string("/proc/swaps") else {
        return false;
    };
    swaps.lines().skip(1).any(|l| {
        let mut w = l.split_whitespace();
        match (w.next(), w.next()) {
            (Some(name), Some(kind)) => is_rotational(Path::new(name), kind == "partition"),
            _ => false,
        }
    })
}

/// Fills `buf` with test data: in each 512-byte block, the first
/// (1 - comp) share of the 64 words random, the rest zero.
pub fn fill_random<R: Rng>(buf: &mut [u8], comp: f64, rng: &mut R) {
    let random_words = ((64.0 * (1.0 - comp.clamp(0.0, 1.0))).floor() as usize).min(64);
    for block in buf.chunks_mut(512) {
        let cut = (random_words * 8).min(block.len());
        rng.fill(&mut block[..cut]);
        block[cut..].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_reads_whole_files_up_to_the_size() {
        let d = tempfile::tempdir().unwrap();
        let tf = TestFiles::new(d.path(), 2 * TESTFILE_UNIT, 0.0);
        tf.prepare(&mut |_, _| {}).unwrap();
        let mut seen = Vec::new();
        let n = tf
            .preload(5 * TESTFILE_UNIT, &mut |d, t| seen.push((d, t)))
            .unwrap();
        assert_eq!(n, 2 * TESTFILE_UNIT);
        assert_eq!(seen.last(), Some(&(2 * TESTFILE_UNIT, 2 * TESTFILE_UNIT)));
        assert_eq!(tf.preload(TESTFILE_UNIT - 1, &mut |_, _| {}).unwrap(), 0);
    }

    #[test]
    fn files_are_laid_out_reused_and_read_by_page() {
        let d = tempfile::tempdir().unwrap();
        let tf = TestFiles::new(d.path(), 2 * TESTFILE_UNIT + 1, 0.5);
        assert_eq!(tf.nr_files(), 3);
        assert_eq!(tf.path(0), d.path().join("rdh-0000/rdh-0000000"));
        assert_eq!(tf.path(4097), d.path().join("rdh-0001/rdh-0001001"));
        let mut seen = Vec::new();
        let p = tf
            .prepare(&mut |done, total| seen.push((done, total)))
            .unwrap();
        assert_eq!(
            p,
            Prepared {
                created: 3,
                reused: 0
            }
        );
        assert_eq!(seen.last(), Some(&(3 * TESTFILE_UNIT, 3 * TESTFILE_UNIT)));
        // Half of each block is zeros.
        let data = std::fs::read(tf.path(1)).unwrap();
        assert_eq!(data.len() as u64, TESTFILE_UNIT);
        assert_eq!(f64::from_le_bytes(data[..8].try_into().unwrap()), 0.5);
        assert!(data[512 + 256..1024].iter().all(|&b| b == 0));
        assert!(data[512..512 + 256].iter().any(|&b| b != 0));
        // The same compressibility reuses; another recreates.
        assert_eq!(tf.prepare(&mut |_, _| {}).unwrap().reused, 3);
        let other = TestFiles::new(d.path(), 2 * TESTFILE_UNIT, 0.0);
        assert_eq!(other.prepare(&mut |_, _| {}).unwrap().created, 2);
        // A chunk is cut at the end of its file.
        let last_page = TESTFILE_UNIT / 4096 - 1;
        let mut out = Vec::new();
        assert_eq!(other.read_pages(last_page, 8192, &mut out).unwrap(), 4096);
        assert_eq!(
            other.read_pages(last_page + 1, 8192, &mut out).unwrap(),
            8192
        );
        let f1 = std::fs::read(other.path(1)).unwrap();
        assert_eq!(&out[4096..], &f1[..8192]);
        other.write_page(last_page + 1).unwrap();
        let after = std::fs::read(other.path(1)).unwrap();
        assert_eq!(
            u64::from_le_bytes(after[..8].try_into().unwrap()),
            u64::from_le_bytes(f1[..8].try_into().unwrap()).wrapping_add(1)
        );
        assert_eq!(TestFiles::clear(d.path()).unwrap(), 1);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
