//! The storage device under the NVM cache: memory, or one or more files or
//! block devices striped RAID-0, read and written in whole blocks through
//! [`BlockIo`].
//!
//! # Backings
//!
//! Each entry of `nvmCachePaths` is one of
//! - a **directory**: a file `nvmcache_<pid>_<random>/navy_cache` is
//!   created inside (CacheLib's layout: a fresh subdirectory per device,
//!   so several devices, e.g. the instances of one run, can share the
//!   directory) and removed with its subdirectory when the [`Device`] is
//!   dropped (or when opening fails part-way);
//! - a **regular file**: used as is, created if missing (its parent
//!   directory must exist), grown to its share, never removed;
//! - a **block device**: used as is; its size (`BLKGETSIZE64`) must cover
//!   its share and its logical block size (`BLKSSZGET`) must divide the
//!   block size.
//!
//! With no paths the caller uses [`Device::memory`], as CacheLib does.
//!
//! # Layout
//!
//! With `n` paths, device offset `o` lives on path `(o / stripe) % n` at
//! `((o / stripe) / n) * stripe + o % stripe`: stripe units go round-robin
//! over the paths. Each path's share is `size / n` rounded down to a
//! multiple of the stripe (the device is `n` shares); with one path there
//! is no striping and the size is only rounded down to the block size. A
//! request crossing stripe boundaries is split into per-path pieces, done
//! one after the other with positional I/O (`pread`/`pwrite`), so the
//! device is shared by threads without locks.
//!
//! # Choices
//!
//! - **O_DIRECT** by default, so results measure the device and not the
//!   page cache. A filesystem refusing it (EINVAL at open, or `statx`
//!   reporting no or incompatible direct-I/O alignment) is an error with
//!   [`DirectIo::Require`] and a fallback to buffered I/O plus a warning
//!   with [`DirectIo::Prefer`].
//! - **Space is reserved up front** with `fallocate` so the benchmark does
//!   not hit ENOSPC half-way; the free space (`fstatvfs`) is checked first,
//!   so a cache too large for the filesystem is refused without filling
//!   the disk. Without `fallocate` support the file is extended with
//!   `set_len` (sparse) and a warning.
//! - **Statistics**: counters are relaxed atomics; the latency histograms
//!   (microseconds per `read_at`/`write_at` call, successful calls only)
//!   are sharded over a few mutexes picked per thread, so concurrent I/O
//!   rarely contends. Requests rejected by [`check_request`] (caller bugs)
//!   are not counted; failed device I/O counts in `read_errors` /
//!   `write_errors` only.
//! - **I/O errors** keep the original [`io::ErrorKind`] (so ENOSPC is
//!   [`io::ErrorKind::StorageFull`]) and carry context: their message names
//!   the operation, path, file offset and device offset, and their
//!   [`std::error::Error::source`] is the original `io::Error`, which keeps
//!   the raw OS error (28 for ENOSPC). Print them with the whole chain
//!   (`{:#}` with anyhow); test for a full disk with [`is_disk_full`].
//! - **Memory**: one zeroed allocation per 1 MiB chunk (lazily backed by
//!   the kernel), each chunk behind its own `RwLock`, so I/O to different
//!   places does not serialize.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;

use super::io::{ALIGN, BlockIo, check_request};

/// Bytes per lock of the memory device.
const MEM_CHUNK: usize = 1 << 20;

/// `_IOR(0x12, 114, size_t)`: the size of a block device in bytes.
const BLKGETSIZE64: u64 = ioc_read(0x12, 114, std::mem::size_of::<usize>() as u64);

/// The `_IOR` ioctl number (the direction bits differ by architecture).
const fn ioc_read(ty: u64, nr: u64, size: u64) -> u64 {
    #[cfg(any(
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "powerpc",
        target_arch = "powerpc64",
        target_arch = "sparc",
        target_arch = "sparc64"
    ))]
    let dir = 2u64 << 29;
    #[cfg(not(any(
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "powerpc",
        target_arch = "powerpc64",
        target_arch = "sparc",
        target_arch = "sparc64"
    )))]
    let dir = 2u64 << 30;
    dir | (size << 16) | (ty << 8) | nr
}

/// How the device is opened.
#[derive(Debug, Clone)]
pub struct DeviceOptions {
    /// Bytes wanted in total (`nvmCacheSizeMB` × 2^20 × the number of
    /// paths, CacheLib's size per path); rounded down to whole stripes per
    /// path (whole blocks with one path).
    pub size: u64,
    /// The I/O unit (`navyBlockSize`): a power of two, at least 512.
    pub block_size: u32,
    /// The RAID-0 stripe unit when there are several paths; a multiple of
    /// `block_size`. Ignored with one path and for memory.
    pub stripe_size: u64,
    /// Whether O_DIRECT is required or only preferred.
    pub direct_io: DirectIo,
}

/// Whether the device must bypass the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectIo {
    /// O_DIRECT or an error.
    Require,
    /// O_DIRECT where the filesystem allows it, else buffered I/O and a
    /// warning.
    Prefer,
}

/// Why the device could not be set up. Every message names the path (or
/// "memory device") and says what was expected.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error(
        "no NVM cache path given: expected at least one directory, file or block device (the in-memory device needs none)"
    )]
    NoPaths,
    #[error(
        "{target}: navyBlockSize {block_size} is invalid: expected a power of two of at least 512 bytes"
    )]
    BlockSize { target: String, block_size: u32 },
    #[error(
        "{target}: stripe size {stripe_size} is invalid: expected a non-zero multiple of navyBlockSize {block_size}"
    )]
    StripeSize {
        target: String,
        stripe_size: u64,
        block_size: u32,
    },
    #[error(
        "{target}: NVM cache size of {size} bytes is too small: expected at least {needed} bytes ({why})"
    )]
    SizeTooSmall {
        target: String,
        size: u64,
        needed: u64,
        why: String,
    },
    #[error("memory device: cannot allocate {size} bytes: expected that much free memory")]
    OutOfMemory { size: u64 },
    #[error("{}: the parent directory {} does not exist: expected a directory, a regular file or a block device, or a new file in an existing directory", .path.display(), .parent.display())]
    MissingParent { path: PathBuf, parent: PathBuf },
    #[error("{} is a {kind}: expected a directory, a regular file or a block device", .path.display())]
    UnsupportedType { path: PathBuf, kind: &'static str },
    #[error("{} is given twice (the same file as {}): expected distinct files or devices", .path.display(), .other.display())]
    Duplicate { path: PathBuf, other: PathBuf },
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        action: String,
        #[source]
        source: io::Error,
    },
    #[error("{}: O_DIRECT is required but not usable there ({reason}): expected a filesystem or block device that supports O_DIRECT; with buffered I/O the results measure the page cache, not the device", .path.display())]
    DirectUnsupported { path: PathBuf, reason: String },
    #[error("device too small: {} needs {needs} bytes, the filesystem has {free} free", .path.display())]
    NoSpace {
        path: PathBuf,
        needs: u64,
        free: u64,
    },
    #[error("device too small: {} has {has} bytes, expected at least {needs} (its share of the NVM cache)", .path.display())]
    BlockDeviceTooSmall { path: PathBuf, has: u64, needs: u64 },
    #[error("{}: logical block size {logical} does not divide navyBlockSize {block_size}: expected navyBlockSize to be a multiple of it", .path.display())]
    LogicalBlock {
        path: PathBuf,
        logical: u64,
        block_size: u32,
    },
}

impl From<DeviceError> for crate::Error {
    /// A failed or too small device, missing memory or O_DIRECT are the
    /// host's; a path or size the config names wrongly is the user's.
    fn from(e: DeviceError) -> Self {
        match e {
            DeviceError::OutOfMemory { .. }
            | DeviceError::Io { .. }
            | DeviceError::DirectUnsupported { .. }
            | DeviceError::NoSpace { .. }
            | DeviceError::BlockDeviceTooSmall { .. } => crate::Error::Host(e.to_string()),
            DeviceError::NoPaths
            | DeviceError::BlockSize { .. }
            | DeviceError::StripeSize { .. }
            | DeviceError::SizeTooSmall { .. }
            | DeviceError::MissingParent { .. }
            | DeviceError::UnsupportedType { .. }
            | DeviceError::Duplicate { .. }
            | DeviceError::LogicalBlock { .. } => crate::Error::Input(e.to_string()),
        }
    }
}

/// A snapshot of the device's activity.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DeviceStats {
    /// Successful `read_at` calls.
    pub reads: u64,
    /// Successful `write_at` calls.
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// `read_at` calls that failed in the device.
    pub read_errors: u64,
    /// `write_at` calls that failed in the device.
    pub write_errors: u64,
    /// Microseconds per successful `read_at` call over the last minute
    /// (upstream's sliding window, see [`crate::latency`]): what the text
    /// prints.
    #[serde(with = "crate::latency::serde_histogram")]
    pub read_latency_us: Histogram<u64>,
    /// Microseconds per successful `write_at` call over the last minute.
    #[serde(with = "crate::latency::serde_histogram")]
    pub write_latency_us: Histogram<u64>,
    /// The same over the whole run (for per-interval figures).
    #[serde(with = "crate::latency::serde_histogram", default = "new_histogram")]
    pub read_latency_total_us: Histogram<u64>,
    #[serde(with = "crate::latency::serde_histogram", default = "new_histogram")]
    pub write_latency_total_us: Histogram<u64>,
}

fn new_histogram() -> Histogram<u64> {
    crate::latency::histogram()
}

impl Default for DeviceStats {
    fn default() -> DeviceStats {
        DeviceStats {
            reads: 0,
            writes: 0,
            bytes_read: 0,
            bytes_written: 0,
            read_errors: 0,
            write_errors: 0,
            read_latency_us: new_histogram(),
            write_latency_us: new_histogram(),
            read_latency_total_us: new_histogram(),
            write_latency_total_us: new_histogram(),
        }
    }
}

/// Whether an I/O error from the device means the disk (or quota) is full:
/// ENOSPC/EDQUOT, seen through the context added by [`Device`].
pub fn is_disk_full(e: &io::Error) -> bool {
    if matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    ) {
        return true;
    }
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(ioe) = err.downcast_ref::<io::Error>()
            && matches!(ioe.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// The context added to an I/O error; its source is the original error.
#[derive(Debug)]
struct IoContext {
    op: &'static str,
    len: usize,
    path: PathBuf,
    file_offset: u64,
    device_offset: u64,
    source: io::Error,
}

impl fmt::Display for IoContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} bytes at offset {} of {} (device offset {}) failed",
            self.op,
            self.len,
            self.file_offset,
            self.path.display(),
            self.device_offset
        )
    }
}

impl std::error::Error for IoContext {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Wraps `source` with context, keeping its kind.
fn io_context(
    source: io::Error,
    op: &'static str,
    path: &Path,
    file_offset: u64,
    device_offset: u64,
    len: usize,
) -> io::Error {
    io::Error::new(
        source.kind(),
        IoContext {
            op,
            len,
            path: path.to_path_buf(),
            file_offset,
            device_offset,
            source,
        },
    )
}

#[derive(Default)]
struct OpCounters {
    ops: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
}

struct Counters {
    read: OpCounters,
    write: OpCounters,
    read_latency: crate::latency::Recorder,
    write_latency: crate::latency::Recorder,
}

impl Counters {
    fn new() -> Counters {
        Counters {
            read: OpCounters::default(),
            write: OpCounters::default(),
            read_latency: crate::latency::Recorder::new(),
            write_latency: crate::latency::Recorder::new(),
        }
    }

    fn finish<T>(&self, write: bool, len: usize, start: Instant, r: &io::Result<T>) {
        let (c, lat) = if write {
            (&self.write, &self.write_latency)
        } else {
            (&self.read, &self.read_latency)
        };
        if r.is_ok() {
            lat.record_since(start);
            c.ops.fetch_add(1, Ordering::Relaxed);
            c.bytes.fetch_add(len as u64, Ordering::Relaxed);
        } else {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Memory in chunks, each behind its own lock.
struct MemStore {
    chunks: Box<[RwLock<Box<[u8]>>]>,
}

/// `len` zero bytes, or `None` when the allocator refuses.
fn zeroed_box(len: usize) -> Option<Box<[u8]>> {
    if len == 0 {
        return Some(Box::default());
    }
    let layout = std::alloc::Layout::array::<u8>(len).ok()?;
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return None;
    }
    // SAFETY: p points to len initialized (zero) bytes allocated with the
    // layout of a [u8; len], which is what Box<[u8]> frees.
    Some(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) })
}

impl MemStore {
    fn new(size: u64) -> Option<MemStore> {
        let size = usize::try_from(size).ok()?;
        let mut chunks = Vec::new();
        chunks.try_reserve_exact(size.div_ceil(MEM_CHUNK)).ok()?;
        let mut left = size;
        while left > 0 {
            let n = left.min(MEM_CHUNK);
            chunks.push(RwLock::new(zeroed_box(n)?));
            left -= n;
        }
        Some(MemStore {
            chunks: chunks.into_boxed_slice(),
        })
    }

    /// Calls `f(chunk index, range in the chunk, range in the request)`.
    fn pieces(offset: u64, len: usize, mut f: impl FnMut(usize, Range<usize>, Range<usize>)) {
        let mut done = 0;
        while done < len {
            // The offset is below size, which fits in usize.
            let o = offset as usize + done;
            let (c, within) = (o / MEM_CHUNK, o % MEM_CHUNK);
            let take = (MEM_CHUNK - within).min(len - done);
            f(c, within..within + take, done..done + take);
            done += take;
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) {
        Self::pieces(offset, buf.len(), |c, src, dst| {
            let chunk = self.chunks[c].read().unwrap_or_else(|e| e.into_inner());
            buf[dst].copy_from_slice(&chunk[src]);
        });
    }

    fn write(&self, offset: u64, buf: &[u8]) {
        Self::pieces(offset, buf.len(), |c, dst, src| {
            let mut chunk = self.chunks[c].write().unwrap_or_else(|e| e.into_inner());
            chunk[dst].copy_from_slice(&buf[src]);
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Created by us in a fresh subdirectory of a directory; the file and
    /// its subdirectory are removed on drop.
    CreatedFile,
    File,
    BlockDevice,
}

/// One path of a striped device.
struct Backing {
    file: File,
    path: PathBuf,
    kind: Kind,
    direct: bool,
}

impl Drop for Backing {
    fn drop(&mut self) {
        if self.kind == Kind::CreatedFile {
            let _ = fs::remove_file(&self.path);
            if let Some(sub) = self.path.parent() {
                let _ = fs::remove_dir(sub);
            }
        }
    }
}

enum Store {
    Memory(MemStore),
    Files(Vec<Backing>),
}

/// The NVM cache's storage: memory, or files / block devices striped
/// RAID-0. See the module documentation.
pub struct Device {
    size: u64,
    block_size: u32,
    /// The stripe unit; the whole device with one path.
    stripe: u64,
    store: Store,
    stats: Counters,
    /// Fault injection for tests of the disk-full path: writes fail with
    /// ENOSPC once this many bytes were written
    /// (`RACKBENCH_FAULT_NVM_WRITE_LIMIT`).
    write_limit: Option<u64>,
}

/// The environment variable that makes a device "fill up" after that many
/// bytes written (to exercise the disk-full handling end to end).
pub const FAULT_WRITE_LIMIT_ENV: &str = "RACKBENCH_FAULT_NVM_WRITE_LIMIT";

fn fault_write_limit() -> Option<u64> {
    std::env::var(FAULT_WRITE_LIMIT_ENV)
        .ok()?
        .trim()
        .parse()
        .ok()
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({})", self.describe())
    }
}

fn check_block_size(target: &str, block_size: u32) -> Result<(), DeviceError> {
    if block_size < 512 || !block_size.is_power_of_two() {
        return Err(DeviceError::BlockSize {
            target: target.to_string(),
            block_size,
        });
    }
    Ok(())
}

/// `16 MiB`, `4 KiB`, `1000 bytes`.
fn fmt_bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (unit, name) in UNITS {
        if n >= unit && n.is_multiple_of(unit) {
            return format!("{} {name}", n / unit);
        }
    }
    format!("{n} bytes")
}

#[cfg(test)]
thread_local! {
    /// Makes O_DIRECT opens fail with EINVAL, as tmpfs did before Linux 6.6.
    static REFUSE_DIRECT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Create {
    No,
    IfMissing,
    New,
}

fn open_raw(path: &Path, create: Create, direct: bool) -> io::Result<File> {
    #[cfg(test)]
    if direct && REFUSE_DIRECT.with(|r| r.get()) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    match create {
        Create::No => {}
        Create::IfMissing => {
            o.create(true).truncate(false);
        }
        Create::New => {
            o.create_new(true);
        }
    }
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

fn io_error(path: &Path, action: impl Into<String>, source: io::Error) -> DeviceError {
    DeviceError::Io {
        path: path.to_path_buf(),
        action: action.into(),
        source,
    }
}

fn buffered_warning(path: &Path, reason: &str) -> String {
    format!(
        "{}: O_DIRECT is not usable there ({reason}); using buffered I/O, so results measure the page cache, not the device",
        path.display()
    )
}

/// Opens `path` read-write, with O_DIRECT when the filesystem allows it.
/// Returns the file and whether it is O_DIRECT.
fn open_file(
    path: &Path,
    create: Create,
    mode: DirectIo,
    warnings: &mut Vec<String>,
) -> Result<(File, bool), DeviceError> {
    match open_raw(path, create, true) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let reason = "opening it with O_DIRECT fails with EINVAL";
            if mode == DirectIo::Require {
                return Err(DeviceError::DirectUnsupported {
                    path: path.to_path_buf(),
                    reason: reason.to_string(),
                });
            }
            // The refused open may have created the file already.
            let create = if create == Create::New {
                Create::IfMissing
            } else {
                create
            };
            let f = open_raw(path, create, false)
                .map_err(|e| io_error(path, "open (read-write)", e))?;
            warnings.push(buffered_warning(path, reason));
            Ok((f, false))
        }
        Err(e) => Err(io_error(path, "open (read-write, O_DIRECT)", e)),
    }
}

/// The direct-I/O alignment `statx` reports for an open file: (memory,
/// offset), or `None` when the kernel or filesystem does not say.
fn dio_alignment(file: &File) -> Option<(u32, u32)> {
    // SAFETY: statx fills the zeroed struct; the empty path with
    // AT_EMPTY_PATH refers to the descriptor itself.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid statx to fill; the path is a static C string.
    let r = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut st,
        )
    };
    if r != 0 || st.stx_mask & libc::STATX_DIOALIGN == 0 {
        return None;
    }
    Some((st.stx_dio_mem_align, st.stx_dio_offset_align))
}

/// Free bytes for unprivileged users on the filesystem holding `file`.
fn free_bytes(file: &File) -> io::Result<u64> {
    // SAFETY: fstatvfs fills the zeroed struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open for the borrow of `file`; `st` is writable.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // the field types differ by platform
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

impl Backing {
    /// Opens one path and makes it hold `share` bytes.
    fn open(
        path: &Path,
        share: u64,
        opts: &DeviceOptions,
        warnings: &mut Vec<String>,
    ) -> Result<Backing, DeviceError> {
        let b = match fs::metadata(path) {
            Ok(m) if m.is_dir() => Backing::create_in_dir(path, opts, warnings)?,
            Ok(m) if m.is_file() => {
                let (file, direct) = open_file(path, Create::No, opts.direct_io, warnings)?;
                Backing {
                    file,
                    path: path.to_path_buf(),
                    kind: Kind::File,
                    direct,
                }
            }
            Ok(m) if m.file_type().is_block_device() => {
                let (file, direct) = open_file(path, Create::No, opts.direct_io, warnings)?;
                Backing {
                    file,
                    path: path.to_path_buf(),
                    kind: Kind::BlockDevice,
                    direct,
                }
            }
            Ok(m) => {
                let t = m.file_type();
                let kind = if t.is_char_device() {
                    "character device"
                } else if t.is_fifo() {
                    "FIFO"
                } else if t.is_socket() {
                    "socket"
                } else {
                    "special file"
                };
                return Err(DeviceError::UnsupportedType {
                    path: path.to_path_buf(),
                    kind,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let parent = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                if !parent.is_dir() {
                    return Err(DeviceError::MissingParent {
                        path: path.to_path_buf(),
                        parent: parent.to_path_buf(),
                    });
                }
                let (file, direct) = open_file(path, Create::IfMissing, opts.direct_io, warnings)?;
                Backing {
                    file,
                    path: path.to_path_buf(),
                    kind: Kind::File,
                    direct,
                }
            }
            Err(e) => return Err(io_error(path, "inspect", e)),
        };
        let b = if b.direct && b.kind != Kind::BlockDevice {
            b.check_dio_alignment(opts, warnings)?
        } else {
            b
        };
        match b.kind {
            Kind::BlockDevice => b.check_block_device(share, opts.block_size)?,
            Kind::File | Kind::CreatedFile => b.reserve(share, warnings)?,
        }
        Ok(b)
    }

    /// Creates `DIR/nvmcache_<pid>_<random>/navy_cache`, CacheLib's
    /// layout: each device (each instance of a run, each run) gets a
    /// subdirectory of its own, so several can share `DIR`.
    fn create_in_dir(
        dir: &Path,
        opts: &DeviceOptions,
        warnings: &mut Vec<String>,
    ) -> Result<Backing, DeviceError> {
        let dir = fs::canonicalize(dir).map_err(|e| io_error(dir, "resolve the directory", e))?;
        let sub = loop {
            let sub = dir.join(format!(
                "nvmcache_{}_{}",
                std::process::id(),
                rand::random::<u32>()
            ));
            match fs::create_dir(&sub) {
                Ok(()) => break sub,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_error(&sub, "create the directory", e)),
            }
        };
        let path = sub.join("navy_cache");
        let (file, direct) = match open_file(&path, Create::New, opts.direct_io, warnings) {
            Ok(x) => x,
            Err(e) => {
                // A refused O_DIRECT open may have created it.
                let _ = fs::remove_file(&path);
                let _ = fs::remove_dir(&sub);
                return Err(e);
            }
        };
        Ok(Backing {
            file,
            path,
            kind: Kind::CreatedFile,
            direct,
        })
    }

    /// Falls back to buffered I/O (or fails) when the filesystem reports a
    /// direct-I/O alignment the cache cannot meet.
    fn check_dio_alignment(
        self,
        opts: &DeviceOptions,
        warnings: &mut Vec<String>,
    ) -> Result<Backing, DeviceError> {
        let Some((mem, off)) = dio_alignment(&self.file) else {
            return Ok(self);
        };
        let bs = opts.block_size;
        let reason = if off == 0 {
            "the filesystem reports no direct I/O support for it".to_string()
        } else if !bs.is_multiple_of(off) {
            format!(
                "it needs offsets aligned to {off} bytes and navyBlockSize {bs} is not a multiple of that"
            )
        } else if mem as usize > ALIGN.min(bs as usize) {
            format!("it needs buffers aligned to {mem} bytes")
        } else {
            return Ok(self);
        };
        if opts.direct_io == DirectIo::Require {
            return Err(DeviceError::DirectUnsupported {
                path: self.path.clone(),
                reason,
            });
        }
        let file = open_raw(&self.path, Create::No, false)
            .map_err(|e| io_error(&self.path, "open (read-write)", e))?;
        warnings.push(buffered_warning(&self.path, &reason));
        let mut b = self;
        b.file = file;
        b.direct = false;
        Ok(b)
    }

    fn check_block_device(&self, share: u64, block_size: u32) -> Result<(), DeviceError> {
        let fd = self.file.as_raw_fd();
        let mut size: u64 = 0;
        // SAFETY: BLKGETSIZE64 writes a u64.
        if unsafe { libc::ioctl(fd, BLKGETSIZE64 as libc::Ioctl, &mut size as *mut u64) } != 0 {
            return Err(io_error(
                &self.path,
                "read the size (BLKGETSIZE64) of",
                io::Error::last_os_error(),
            ));
        }
        if size < share {
            return Err(DeviceError::BlockDeviceTooSmall {
                path: self.path.clone(),
                has: size,
                needs: share,
            });
        }
        let mut logical: libc::c_int = 0;
        // SAFETY: BLKSSZGET writes an int.
        if unsafe { libc::ioctl(fd, libc::BLKSSZGET, &mut logical as *mut libc::c_int) } != 0 {
            return Err(io_error(
                &self.path,
                "read the logical block size (BLKSSZGET) of",
                io::Error::last_os_error(),
            ));
        }
        let logical = u64::try_from(logical).unwrap_or(0);
        if logical == 0 || !u64::from(block_size).is_multiple_of(logical) {
            return Err(DeviceError::LogicalBlock {
                path: self.path.clone(),
                logical,
                block_size,
            });
        }
        Ok(())
    }

    /// Allocates `share` bytes of the file up front.
    fn reserve(&self, share: u64, warnings: &mut Vec<String>) -> Result<(), DeviceError> {
        let md = self
            .file
            .metadata()
            .map_err(|e| io_error(&self.path, "stat", e))?;
        let allocated = md.blocks().saturating_mul(512);
        let needs = share.saturating_sub(allocated);
        let free = free_bytes(&self.file)
            .map_err(|e| io_error(&self.path, "read the free space (statvfs) of", e))?;
        let no_space = |free| DeviceError::NoSpace {
            path: self.path.clone(),
            needs,
            free,
        };
        if needs > free {
            return Err(no_space(free));
        }
        let len = libc::off_t::try_from(share).map_err(|_| no_space(free))?;
        loop {
            // SAFETY: plain syscall on our descriptor.
            if unsafe { libc::fallocate(self.file.as_raw_fd(), 0, 0, len) } == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ENOSPC) => return Err(no_space(free_bytes(&self.file).unwrap_or(free))),
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => {
                    if md.len() < share {
                        self.file.set_len(share).map_err(|e| {
                            io_error(&self.path, format!("extend to {share} bytes"), e)
                        })?;
                    }
                    warnings.push(format!(
                        "{}: the filesystem cannot reserve space (no fallocate); the file is sparse and writes may fail with ENOSPC later",
                        self.path.display()
                    ));
                    return Ok(());
                }
                _ => {
                    return Err(io_error(
                        &self.path,
                        format!("reserve {share} bytes (fallocate) in"),
                        e,
                    ));
                }
            }
        }
    }
}

impl Device {
    /// An in-memory device of `opts.size` bytes rounded down to the block
    /// size (used when `nvmCachePaths` is empty, as CacheLib does).
    pub fn memory(opts: &DeviceOptions) -> Result<Device, DeviceError> {
        let target = "memory device";
        check_block_size(target, opts.block_size)?;
        let bs = u64::from(opts.block_size);
        let size = opts.size / bs * bs;
        if size == 0 {
            return Err(DeviceError::SizeTooSmall {
                target: target.to_string(),
                size: opts.size,
                needed: bs,
                why: "one block".to_string(),
            });
        }
        let mem = MemStore::new(size).ok_or(DeviceError::OutOfMemory { size })?;
        Ok(Device {
            size,
            block_size: opts.block_size,
            stripe: size,
            store: Store::Memory(mem),
            stats: Counters::new(),
            write_limit: fault_write_limit(),
        })
    }

    /// Opens `nvmCachePaths` (directories, regular files or block devices;
    /// several are striped RAID-0, see the module documentation). Returns
    /// the device and warnings for the caller to print.
    pub fn open(
        paths: &[PathBuf],
        opts: &DeviceOptions,
    ) -> Result<(Device, Vec<String>), DeviceError> {
        if paths.is_empty() {
            return Err(DeviceError::NoPaths);
        }
        let target = paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        check_block_size(&target, opts.block_size)?;
        let bs = u64::from(opts.block_size);
        let n = paths.len() as u64;
        let (stripe, share) = if n == 1 {
            let share = opts.size / bs * bs;
            if share == 0 {
                return Err(DeviceError::SizeTooSmall {
                    target,
                    size: opts.size,
                    needed: bs,
                    why: "one block".to_string(),
                });
            }
            (share, share)
        } else {
            let stripe = opts.stripe_size;
            if stripe == 0 || !stripe.is_multiple_of(bs) {
                return Err(DeviceError::StripeSize {
                    target,
                    stripe_size: stripe,
                    block_size: opts.block_size,
                });
            }
            let share = opts.size / n / stripe * stripe;
            if share == 0 {
                return Err(DeviceError::SizeTooSmall {
                    target,
                    size: opts.size,
                    needed: stripe.saturating_mul(n),
                    why: format!("one {stripe}-byte stripe on each of the {n} paths"),
                });
            }
            (stripe, share)
        };
        let size = share * n;
        let mut warnings = Vec::new();
        let mut backings: Vec<Backing> = Vec::with_capacity(paths.len());
        for p in paths {
            let b = Backing::open(p, share, opts, &mut warnings)?;
            let md = b
                .file
                .metadata()
                .map_err(|e| io_error(&b.path, "stat", e))?;
            for prev in &backings {
                let pm = prev
                    .file
                    .metadata()
                    .map_err(|e| io_error(&prev.path, "stat", e))?;
                if pm.dev() == md.dev() && pm.ino() == md.ino() {
                    return Err(DeviceError::Duplicate {
                        path: b.path.clone(),
                        other: prev.path.clone(),
                    });
                }
            }
            backings.push(b);
        }
        if size < opts.size {
            warnings.push(format!(
                "{target}: NVM cache size {} rounded down to {size} bytes ({} per path)",
                opts.size, share
            ));
        }
        Ok((
            Device {
                size,
                block_size: opts.block_size,
                stripe,
                store: Store::Files(backings),
                stats: Counters::new(),
                write_limit: fault_write_limit(),
            },
            warnings,
        ))
    }

    /// A snapshot of the statistics.
    pub fn stats(&self) -> DeviceStats {
        let s = &self.stats;
        DeviceStats {
            reads: s.read.ops.load(Ordering::Relaxed),
            writes: s.write.ops.load(Ordering::Relaxed),
            bytes_read: s.read.bytes.load(Ordering::Relaxed),
            bytes_written: s.write.bytes.load(Ordering::Relaxed),
            read_errors: s.read.errors.load(Ordering::Relaxed),
            write_errors: s.write.errors.load(Ordering::Relaxed),
            read_latency_us: s.read_latency.window(),
            write_latency_us: s.write_latency.window(),
            read_latency_total_us: s.read_latency.total(),
            write_latency_total_us: s.write_latency.total(),
        }
    }

    /// Zeroes the statistics (e.g. after a warm-up).
    pub fn reset_stats(&self) {
        let s = &self.stats;
        for c in [&s.read, &s.write] {
            c.ops.store(0, Ordering::Relaxed);
            c.bytes.store(0, Ordering::Relaxed);
            c.errors.store(0, Ordering::Relaxed);
        }
        s.read_latency.reset();
        s.write_latency.reset();
    }

    /// What the device is, e.g. "2 files striped (16 MiB stripes), 1 GiB,
    /// O_DIRECT" or "memory, 64 MiB".
    pub fn describe(&self) -> String {
        let Store::Files(b) = &self.store else {
            return format!("memory, {}", fmt_bytes(self.size));
        };
        let direct = b.iter().filter(|b| b.direct).count();
        let io = if direct == b.len() {
            "O_DIRECT".to_string()
        } else if direct == 0 {
            "buffered".to_string()
        } else {
            format!(
                "O_DIRECT on {direct} of {} paths, buffered on the rest",
                b.len()
            )
        };
        let what = if let [one] = &b[..] {
            let kind = if one.kind == Kind::BlockDevice {
                "block device"
            } else {
                "file"
            };
            format!("{kind} {}", one.path.display())
        } else {
            let devices = b.iter().filter(|b| b.kind == Kind::BlockDevice).count();
            let files = b.len() - devices;
            let list = match (files, devices) {
                (f, 0) => format!("{f} files"),
                (0, d) => format!("{d} block devices"),
                (f, d) => format!("{d} block device(s) + {f} file(s)"),
            };
            format!("{list} striped ({} stripes)", fmt_bytes(self.stripe))
        };
        format!("{what}, {}, {io}", fmt_bytes(self.size))
    }

    /// Whether every path uses O_DIRECT (false for memory).
    pub fn direct(&self) -> bool {
        match &self.store {
            Store::Memory(_) => false,
            Store::Files(b) => b.iter().all(|b| b.direct),
        }
    }

    /// The files and block devices behind the device, in stripe order
    /// (for a directory, the file created in it); empty for memory.
    pub fn backing_paths(&self) -> Vec<PathBuf> {
        match &self.store {
            Store::Memory(_) => Vec::new(),
            Store::Files(b) => b.iter().map(|b| b.path.clone()).collect(),
        }
    }

    /// Calls `op(path, file offset, range of the request)` for each
    /// per-path piece of `[offset, offset + len)`.
    fn striped(
        &self,
        backings: &[Backing],
        offset: u64,
        len: usize,
        mut op: impl FnMut(&Backing, u64, Range<usize>) -> io::Result<()>,
    ) -> io::Result<()> {
        let n = backings.len() as u64;
        let mut done = 0;
        while done < len {
            let o = offset + done as u64;
            let (stripe_no, within) = (o / self.stripe, o % self.stripe);
            let b = &backings[(stripe_no % n) as usize];
            let local = stripe_no / n * self.stripe + within;
            // At most len - done, so it fits in usize.
            let take = (self.stripe - within).min((len - done) as u64) as usize;
            op(b, local, done..done + take)?;
            done += take;
        }
        Ok(())
    }
}

impl BlockIo for Device {
    fn size(&self) -> u64 {
        self.size
    }

    fn block_size(&self) -> u32 {
        self.block_size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_request(self, offset, buf.len(), buf.as_ptr())?;
        let start = Instant::now();
        let len = buf.len();
        let r = match &self.store {
            Store::Memory(m) => {
                m.read(offset, buf);
                Ok(())
            }
            Store::Files(b) => self.striped(b, offset, len, |b, local, range| {
                let piece = range.len();
                b.file
                    .read_exact_at(&mut buf[range.clone()], local)
                    .map_err(|e| {
                        io_context(
                            e,
                            "read",
                            &b.path,
                            local,
                            offset + range.start as u64,
                            piece,
                        )
                    })
            }),
        };
        self.stats.finish(false, len, start, &r);
        r
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        check_request(self, offset, buf.len(), buf.as_ptr())?;
        if let Some(limit) = self.write_limit
            && self.stats.write.bytes.load(Ordering::Relaxed) + buf.len() as u64 > limit
        {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!(
                    "write of {} bytes at offset {offset} of {}: No space left on device \
                     (injected by {FAULT_WRITE_LIMIT_ENV}={limit})",
                    buf.len(),
                    self.describe()
                ),
            ));
        }
        let start = Instant::now();
        let r = match &self.store {
            Store::Memory(m) => {
                m.write(offset, buf);
                Ok(())
            }
            Store::Files(b) => self.striped(b, offset, buf.len(), |b, local, range| {
                let piece = range.len();
                b.file
                    .write_all_at(&buf[range.clone()], local)
                    .map_err(|e| {
                        io_context(
                            e,
                            "write",
                            &b.path,
                            local,
                            offset + range.start as u64,
                            piece,
                        )
                    })
            }),
        };
        self.stats.finish(true, buf.len(), start, &r);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvm::io::AlignedBuf;
    use std::sync::Arc;

    fn opts(size: u64, block_size: u32, stripe_size: u64) -> DeviceOptions {
        DeviceOptions {
            size,
            block_size,
            stripe_size,
            direct_io: DirectIo::Prefer,
        }
    }

    /// An aligned buffer of `len` bytes where byte i is `seed + i / 512 + i`.
    fn pattern(len: usize, seed: u8) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(len);
        for (i, x) in b.iter_mut().enumerate() {
            *x = seed.wrapping_add((i / 512) as u8).wrapping_add(i as u8);
        }
        b
    }

    fn read(dev: &Device, offset: u64, len: usize) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(len);
        dev.read_at(offset, &mut b).unwrap();
        b
    }

    fn file_bytes(path: &Path, offset: u64, len: usize) -> Vec<u8> {
        let f = File::open(path).unwrap();
        let mut v = vec![0; len];
        f.read_exact_at(&mut v, offset).unwrap();
        v
    }

    #[test]
    fn device_is_send_sync() {
        fn check<T: Send + Sync + BlockIo>() {}
        check::<Device>();
    }

    #[test]
    fn memory_round_trip_and_stats() {
        // 3 MiB + 3 blocks (rounded down from + 100): 4 chunks, the last short.
        let size = 3 * MEM_CHUNK as u64 + 3 * 4096;
        let dev = Device::memory(&opts(size + 100, 4096, 0)).unwrap();
        assert_eq!(dev.size(), size);
        assert_eq!(dev.block_size(), 4096);
        assert!(!dev.direct());
        assert_eq!(dev.describe(), format!("memory, {}", fmt_bytes(size)));
        assert!(dev.backing_paths().is_empty());

        // Across a chunk boundary, and into the short last chunk.
        let a = pattern(8192, 1);
        dev.write_at(MEM_CHUNK as u64 - 4096, &a).unwrap();
        let b = pattern(3 * 4096, 9);
        dev.write_at(3 * MEM_CHUNK as u64, &b).unwrap();
        assert_eq!(&read(&dev, MEM_CHUNK as u64 - 4096, 8192)[..], &a[..]);
        assert_eq!(&read(&dev, 3 * MEM_CHUNK as u64, 3 * 4096)[..], &b[..]);
        // Half of the first write, and untouched memory is zero.
        assert_eq!(&read(&dev, MEM_CHUNK as u64, 4096)[..], &a[4096..]);
        assert!(read(&dev, 0, 4096).iter().all(|&x| x == 0));

        let s = dev.stats();
        assert_eq!((s.writes, s.bytes_written), (2, 8192 + 3 * 4096));
        assert_eq!((s.reads, s.bytes_read), (4, 8192 + 3 * 4096 + 4096 + 4096));
        assert_eq!(s.write_latency_us.len(), 2);
        assert_eq!(s.read_latency_us.len(), 4);
        assert_eq!((s.read_errors, s.write_errors), (0, 0));

        // Rejected requests are errors but not device activity.
        assert!(dev.write_at(100, &a).is_err());
        assert!(dev.write_at(size, &a).is_err());
        let s = dev.stats();
        assert_eq!((s.writes, s.write_errors), (2, 0));

        dev.reset_stats();
        let s = dev.stats();
        assert_eq!((s.reads, s.writes, s.bytes_read), (0, 0, 0));
        assert_eq!(s.read_latency_us.len(), 0);
    }

    #[test]
    fn memory_concurrent_writers() {
        let dev = Arc::new(Device::memory(&opts(4 << 20, 4096, 0)).unwrap());
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let dev = Arc::clone(&dev);
                std::thread::spawn(move || {
                    for i in 0..64u64 {
                        let off = (i * 4 + u64::from(t)) * 16384;
                        dev.write_at(off, &pattern(16384, t * 64 + i as u8))
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for t in 0..4u8 {
            for i in 0..64u64 {
                let off = (i * 4 + u64::from(t)) * 16384;
                assert_eq!(
                    &read(&dev, off, 16384)[..],
                    &pattern(16384, t * 64 + i as u8)[..]
                );
            }
        }
        let s = dev.stats();
        assert_eq!(s.writes, 256);
        assert_eq!(s.write_latency_us.len(), 256);
    }

    #[test]
    fn memory_errors_name_the_memory_device() {
        let e = Device::memory(&opts(0, 4096, 0)).unwrap_err().to_string();
        assert!(
            e.contains("memory device") && e.contains("too small"),
            "{e}"
        );
        let e = Device::memory(&opts(1 << 20, 1000, 0))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("memory device") && e.contains("power of two"),
            "{e}"
        );
    }

    #[test]
    fn file_in_a_directory_round_trip_and_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let size = 1 << 20;
        let (dev, warnings) =
            Device::open(&[dir.path().to_path_buf()], &opts(size, 4096, 0)).unwrap();
        // CacheLib's layout: DIR/nvmcache_<pid>_<random>/navy_cache.
        let expected = dev.backing_paths()[0].clone();
        let sub = expected.parent().unwrap().to_path_buf();
        assert_eq!(sub.parent().unwrap(), fs::canonicalize(dir.path()).unwrap());
        assert_eq!(expected.file_name().unwrap(), "navy_cache");
        let name = sub.file_name().unwrap().to_string_lossy().into_owned();
        let rest = name
            .strip_prefix(&format!("nvmcache_{}_", std::process::id()))
            .unwrap_or_else(|| panic!("{name}"));
        assert!(rest.parse::<u32>().is_ok(), "{name}");
        assert!(expected.is_file());
        // Space reserved up front.
        let md = fs::metadata(&expected).unwrap();
        assert!(md.len() >= size && md.blocks() * 512 >= size, "{md:?}");
        assert_eq!(dev.size(), size);
        if dev.direct() {
            assert!(warnings.is_empty(), "{warnings:?}");
        } else {
            assert!(
                warnings.iter().any(|w| w.contains("page cache")),
                "{warnings:?}"
            );
        }
        assert!(
            dev.describe()
                .starts_with(&format!("file {}, 1 MiB, ", expected.display()))
        );

        let writes = [
            (0u64, 4096usize, 1u8),
            (5 * 4096, 3 * 4096, 2),
            (size - 4096, 4096, 3),
        ];
        for &(off, len, seed) in &writes {
            dev.write_at(off, &pattern(len, seed)).unwrap();
        }
        for &(off, len, seed) in &writes {
            assert_eq!(&read(&dev, off, len)[..], &pattern(len, seed)[..]);
            assert_eq!(file_bytes(&expected, off, len), &pattern(len, seed)[..]);
        }
        assert!(read(&dev, 4096, 4096).iter().all(|&x| x == 0));
        let s = dev.stats();
        assert_eq!((s.writes, s.bytes_written), (3, 5 * 4096));
        assert_eq!((s.reads, s.bytes_read), (4, 6 * 4096));
        assert_eq!(s.write_latency_us.len(), 3);

        // A second device in the same directory (another instance of the
        // run) gets a subdirectory of its own, as upstream.
        let (other, _) = Device::open(&[dir.path().to_path_buf()], &opts(size, 4096, 0)).unwrap();
        let other_file = other.backing_paths()[0].clone();
        assert_ne!(other_file, expected);
        assert!(other_file.is_file() && expected.is_file());
        drop(other);
        assert!(!other_file.exists() && !other_file.parent().unwrap().exists());
        assert!(expected.is_file());

        drop(dev);
        assert!(!expected.exists(), "the created file is removed on drop");
        assert!(!sub.exists(), "and its subdirectory");
        assert!(dir.path().is_dir(), "the directory itself stays");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn regular_file_is_used_as_is_and_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        // A missing file in an existing directory is created.
        let path = dir.path().join("cache.img");
        let (dev, _) =
            Device::open(std::slice::from_ref(&path), &opts(256 * 1024 + 100, 512, 0)).unwrap();
        assert_eq!(dev.size(), 256 * 1024, "rounded down to the block size");
        assert_eq!(dev.block_size(), 512);
        assert_eq!(fs::metadata(&path).unwrap().len(), 256 * 1024);
        dev.write_at(4096, &pattern(4096, 7)).unwrap();
        drop(dev);
        assert!(path.is_file(), "a file path given directly is not removed");
        assert_eq!(file_bytes(&path, 4096, 4096), &pattern(4096, 7)[..]);

        // An existing file keeps its contents and grows to its share.
        let old = dir.path().join("old.img");
        fs::write(&old, vec![0xab; 8192]).unwrap();
        let (dev, _) = Device::open(std::slice::from_ref(&old), &opts(64 * 1024, 4096, 0)).unwrap();
        assert!(read(&dev, 4096, 4096).iter().all(|&x| x == 0xab));
        assert!(read(&dev, 8192, 4096).iter().all(|&x| x == 0));
        assert_eq!(fs::metadata(&old).unwrap().len(), 64 * 1024);
        drop(dev);
        assert!(old.is_file());
    }

    /// Where device offset `o` lives with `n` paths and stripe `s`: (path, offset).
    fn expected_place(o: u64, n: u64, s: u64) -> (usize, u64) {
        let unit = o / s;
        ((unit % n) as usize, unit / n * s + o % s)
    }

    #[test]
    fn raid0_over_three_files() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = (0..3)
            .map(|i| dir.path().join(format!("p{i}.img")))
            .collect();
        let stripe = 16 * 1024;
        // Four stripes per path; the extra bytes are dropped with a warning.
        let (dev, warnings) =
            Device::open(&paths, &opts(3 * 4 * stripe + 5000, 4096, stripe)).unwrap();
        assert_eq!(dev.size(), 3 * 4 * stripe);
        assert!(
            warnings.iter().any(|w| w.contains("rounded down")),
            "{warnings:?}"
        );
        assert_eq!(dev.backing_paths(), paths);
        assert!(
            dev.describe()
                .starts_with("3 files striped (16 KiB stripes), 192 KiB, "),
            "{}",
            dev.describe()
        );
        for p in &paths {
            assert_eq!(fs::metadata(p).unwrap().len(), 4 * stripe);
        }

        // From 2 blocks before the end of stripe 0 over stripes 1..3 into stripe 3:
        // pieces on paths 0, 1, 2 and 0 again.
        let offset = stripe - 8192;
        let len = (3 * stripe + 8192) as usize;
        let data = pattern(len, 42);
        dev.write_at(offset, &data).unwrap();
        let files: Vec<Vec<u8>> = paths.iter().map(|p| fs::read(p).unwrap()).collect();
        for (i, &byte) in data.iter().enumerate() {
            let (p, at) = expected_place(offset + i as u64, 3, stripe);
            assert_eq!(
                files[p][at as usize],
                byte,
                "device offset {}",
                offset + i as u64
            );
        }
        // The pieces by hand: 8 KiB to path 0 at [8K,16K), 16 KiB to path 1 at
        // [0,16K), 16 KiB to path 2 at [0,16K), 16 KiB to path 0 at [16K,32K).
        assert!(files[0][8192..16384] == data[..8192]);
        assert!(files[1][..16384] == data[8192..24576]);
        assert!(files[2][..16384] == data[24576..40960]);
        assert!(files[0][16384..32768] == data[40960..]);
        assert!(files[0][..8192].iter().all(|&x| x == 0));
        assert!(files[0][32768..].iter().all(|&x| x == 0));
        assert!(files[1][16384..].iter().all(|&x| x == 0));
        assert!(files[2][16384..].iter().all(|&x| x == 0));

        // Back through the device, whole and in other splits.
        assert_eq!(&read(&dev, offset, len)[..], &data[..]);
        let all = read(&dev, 0, dev.size() as usize);
        assert_eq!(&all[offset as usize..offset as usize + len], &data[..]);
        assert!(all[..offset as usize].iter().all(|&x| x == 0));
        assert!(all[offset as usize + len..].iter().all(|&x| x == 0));
        assert_eq!(&read(&dev, stripe, 4096)[..], &data[8192..8192 + 4096]);

        // The last block of the device is the last block of path 2.
        let last = dev.size() - 4096;
        dev.write_at(last, &pattern(4096, 5)).unwrap();
        assert_eq!(
            file_bytes(&paths[2], 4 * stripe - 4096, 4096),
            &pattern(4096, 5)[..]
        );
        let s = dev.stats();
        assert_eq!((s.writes, s.bytes_written), (2, len as u64 + 4096));
        assert_eq!(s.reads, 3);
    }

    /// A loop device over a file, detached on drop.
    struct LoopDev {
        dev: PathBuf,
    }

    impl LoopDev {
        /// Attaches a loop device of `size` bytes with `sector` logical
        /// blocks; None (with the reason printed) where the host cannot,
        /// unless RACKBENCH_REQUIRE_LOOP is set (CI), which makes it fail.
        fn attach(dir: &Path, name: &str, size: u64, sector: u32) -> Option<LoopDev> {
            let backing = dir.join(name);
            File::create(&backing).unwrap().set_len(size).unwrap();
            let out = std::process::Command::new("losetup")
                .args(["--find", "--show", "--sector-size", &sector.to_string()])
                .arg(&backing)
                .output();
            let why = match out {
                Ok(o) if o.status.success() => {
                    let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
                    return Some(LoopDev { dev: dev.into() });
                }
                Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                Err(e) => format!("losetup: {e}"),
            };
            testenv::skip("loop", &format!("no loop device ({why})"));
            None
        }
    }

    impl Drop for LoopDev {
        fn drop(&mut self) {
            let _ = std::process::Command::new("losetup")
                .arg("-d")
                .arg(&self.dev)
                .status();
        }
    }

    #[test]
    fn block_devices_striped_with_o_direct_and_their_limits() {
        let dir = tempfile::tempdir().unwrap();
        let stripe = 1 << 20;
        let Some(a) = LoopDev::attach(dir.path(), "a.img", 8 * stripe, 512) else {
            return;
        };
        let Some(b) = LoopDev::attach(dir.path(), "b.img", 8 * stripe, 512) else {
            return;
        };
        let paths = vec![a.dev.clone(), b.dev.clone()];
        let (dev, warnings) = Device::open(&paths, &opts(16 * stripe, 4096, stripe)).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(dev.size(), 16 * stripe);
        assert!(dev.direct(), "block devices take O_DIRECT");
        assert!(dev.describe().ends_with("O_DIRECT"), "{}", dev.describe());
        assert!(
            dev.describe().starts_with("2 block devices striped"),
            "{}",
            dev.describe()
        );
        // Across the stripe boundary: the halves land on both devices.
        let data = pattern(2 * 4096, 9);
        dev.write_at(stripe - 4096, &data).unwrap();
        assert_eq!(&read(&dev, stripe - 4096, data.len())[..], &data[..]);
        drop(dev);
        assert_eq!(file_bytes(&a.dev, stripe - 4096, 4096), &data[..4096]);
        assert_eq!(file_bytes(&b.dev, 0, 4096), &data[4096..]);
        // Block devices are used as they are, never removed.
        assert!(a.dev.exists() && b.dev.exists());

        // More than the devices hold: refused naming the device and sizes.
        let e = Device::open(&paths, &opts(32 * stripe, 4096, stripe))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(&a.dev.display().to_string()), "{e}");

        // A 4 KiB-sector device cannot take 512-byte blocks.
        let Some(c) = LoopDev::attach(dir.path(), "c.img", 8 * stripe, 4096) else {
            return;
        };
        let e = Device::open(std::slice::from_ref(&c.dev), &opts(4 * stripe, 512, stripe))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("logical block size 4096 does not divide navyBlockSize 512"),
            "{e}"
        );
        let (dev, _) = Device::open(
            std::slice::from_ref(&c.dev),
            &opts(4 * stripe, 4096, stripe),
        )
        .unwrap();
        dev.write_at(0, &pattern(4096, 1)).unwrap();
        assert_eq!(&read(&dev, 0, 4096)[..], &pattern(4096, 1)[..]);
    }

    #[test]
    fn raid0_over_two_directories() {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let paths: Vec<PathBuf> = dirs.iter().map(|d| d.path().to_path_buf()).collect();
        let stripe = 8192;
        let (dev, _) = Device::open(&paths, &opts(4 * stripe, 512, stripe)).unwrap();
        let files = dev.backing_paths();
        assert_eq!(files.len(), 2);
        for (f, d) in files.iter().zip(&dirs) {
            assert_eq!(
                f.parent().unwrap().parent().unwrap(),
                fs::canonicalize(d.path()).unwrap()
            );
            assert!(f.ends_with("navy_cache"), "{}", f.display());
        }
        let data = pattern(3 * stripe as usize, 3);
        dev.write_at(stripe / 2, &data).unwrap();
        for (p, path) in files.iter().enumerate() {
            let f = fs::read(path).unwrap();
            assert_eq!(f.len() as u64, 2 * stripe);
            for (i, &byte) in data.iter().enumerate() {
                let (q, at) = expected_place(stripe / 2 + i as u64, 2, stripe);
                if q == p {
                    assert_eq!(f[at as usize], byte);
                }
            }
        }
        assert_eq!(&read(&dev, stripe / 2, data.len())[..], &data[..]);
        drop(dev);
        assert!(files.iter().all(|f| !f.exists()));
        for d in &dirs {
            assert_eq!(fs::read_dir(d.path()).unwrap().count(), 0);
        }
    }

    #[test]
    fn concurrent_file_io() {
        let dir = tempfile::tempdir().unwrap();
        let paths = vec![dir.path().join("a"), dir.path().join("b")];
        let (dev, _) = Device::open(&paths, &opts(4 << 20, 4096, 65536)).unwrap();
        let dev = Arc::new(dev);
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let dev = Arc::clone(&dev);
                std::thread::spawn(move || {
                    for i in 0..16u64 {
                        let off = (t * 16 + i) * 65536 - if t + i > 0 { 4096 } else { 0 };
                        dev.write_at(off, &pattern(8192, (t * 16 + i) as u8))
                            .unwrap();
                        assert_eq!(
                            &read(&dev, off, 8192)[..],
                            &pattern(8192, (t * 16 + i) as u8)[..]
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = dev.stats();
        assert_eq!((s.writes, s.reads), (64, 64));
        assert_eq!(s.read_latency_us.len() + s.write_latency_us.len(), 128);
    }

    #[test]
    fn configuration_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.img");
        let name = p.display().to_string();
        let one = std::slice::from_ref(&p);
        let err =
            |paths: &[PathBuf], o: DeviceOptions| Device::open(paths, &o).unwrap_err().to_string();

        let e = err(one, opts(0, 4096, 0));
        assert!(e.contains(&name) && e.contains("too small"), "{e}");
        let e = err(one, opts(1 << 20, 1000, 0));
        assert!(e.contains(&name) && e.contains("power of two"), "{e}");
        let e = err(one, opts(1 << 20, 256, 0));
        assert!(e.contains(&name) && e.contains("at least 512"), "{e}");
        assert!(!p.exists(), "nothing created on a configuration error");

        let two = vec![dir.path().join("x"), dir.path().join("y")];
        let e = err(&two, opts(1 << 20, 4096, 5000));
        assert!(e.contains("x") && e.contains("stripe size 5000"), "{e}");
        let e = err(&two, opts(65536, 4096, 65536));
        assert!(
            e.contains(&two[1].display().to_string()) && e.contains("too small"),
            "{e}"
        );
        assert!(e.contains("131072"), "needs one stripe per path: {e}");

        assert!(matches!(
            Device::open(&[], &opts(1 << 20, 4096, 0)),
            Err(DeviceError::NoPaths)
        ));
    }

    #[test]
    fn path_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(1 << 20, 4096, 0);

        // Missing parent directory.
        let p = dir.path().join("missing").join("sub").join("cache.img");
        let e = Device::open(std::slice::from_ref(&p), &o).unwrap_err();
        assert!(matches!(e, DeviceError::MissingParent { .. }), "{e}");
        let e = e.to_string();
        assert!(
            e.contains(&p.display().to_string()) && e.contains("does not exist"),
            "{e}"
        );
        assert!(!dir.path().join("missing").exists());

        // Below a regular file: cannot even be inspected.
        let f = dir.path().join("plain");
        fs::write(&f, b"x").unwrap();
        let p = f.join("cache.img");
        let e = Device::open(std::slice::from_ref(&p), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&p.display().to_string()), "{e}");

        // A socket cannot be opened as a file.
        let sock = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = Device::open(std::slice::from_ref(&sock), &o)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&sock.display().to_string()) && e.contains("socket"),
            "{e}"
        );

        // Nor a character device.
        let null = PathBuf::from("/dev/null");
        let e = Device::open(std::slice::from_ref(&null), &o)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/null") && e.contains("character device"),
            "{e}"
        );

        // A file without permission (root bypasses permissions).
        let ro = dir.path().join("locked.img");
        fs::write(&ro, vec![0; 4096]).unwrap();
        fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o400)).unwrap();
        // SAFETY: plain getter.
        if unsafe { libc::geteuid() } != 0 {
            let e = Device::open(std::slice::from_ref(&ro), &o).unwrap_err();
            assert!(matches!(e, DeviceError::Io { .. }), "{e}");
            let e = e.to_string();
            assert!(
                e.contains(&ro.display().to_string()) && e.contains("open"),
                "{e}"
            );
        } else {
            eprintln!("running as root: skipping the permission-denied open");
        }

        // The same file twice.
        let a = dir.path().join("a.img");
        let e = Device::open(&[a.clone(), a.clone()], &opts(1 << 20, 4096, 65536)).unwrap_err();
        assert!(matches!(e, DeviceError::Duplicate { .. }), "{e}");
        assert!(e.to_string().contains(&a.display().to_string()));
    }

    #[test]
    fn a_partly_opened_device_removes_what_it_created() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("missing").join("x.img");
        let e = Device::open(
            &[dir.path().to_path_buf(), bad],
            &opts(1 << 20, 4096, 65536),
        )
        .unwrap_err();
        assert!(matches!(e, DeviceError::MissingParent { .. }), "{e}");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            0,
            "the file created in the directory is gone"
        );
    }

    #[test]
    fn prefer_direct_io_works_either_way() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.img");
        let (dev, warnings) =
            Device::open(std::slice::from_ref(&p), &opts(1 << 20, 4096, 0)).unwrap();
        eprintln!("temp dir device: {}", dev.describe());
        if dev.direct() {
            assert!(dev.describe().ends_with("O_DIRECT"), "{}", dev.describe());
            assert!(warnings.is_empty(), "{warnings:?}");
        } else {
            assert!(dev.describe().ends_with("buffered"), "{}", dev.describe());
            assert!(
                warnings
                    .iter()
                    .any(|w| w.contains(&p.display().to_string()) && w.contains("page cache")),
                "{warnings:?}"
            );
        }
        dev.write_at(8192, &pattern(4096, 1)).unwrap();
        assert_eq!(&read(&dev, 8192, 4096)[..], &pattern(4096, 1)[..]);
    }

    #[test]
    fn refused_direct_io_is_an_error_or_a_fallback() {
        // Simulates a filesystem refusing O_DIRECT at open (tmpfs before Linux 6.6).
        REFUSE_DIRECT.with(|r| r.set(true));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.img");
        let mut o = opts(1 << 20, 4096, 0);
        o.direct_io = DirectIo::Require;
        let e = Device::open(std::slice::from_ref(&p), &o).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, DeviceError::DirectUnsupported { .. }), "{msg}");
        assert!(
            msg.contains("O_DIRECT") && msg.contains(&p.display().to_string()),
            "{msg}"
        );
        // Nothing left behind in a directory either.
        let e = Device::open(&[dir.path().to_path_buf()], &o).unwrap_err();
        assert!(e.to_string().contains("O_DIRECT"), "{e}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);

        o.direct_io = DirectIo::Prefer;
        let (dev, warnings) = Device::open(std::slice::from_ref(&p), &o).unwrap();
        assert!(!dev.direct());
        assert!(dev.describe().ends_with("buffered"), "{}", dev.describe());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains(&p.display().to_string()) && warnings[0].contains("page cache")
        );
        dev.write_at(0, &pattern(4096, 2)).unwrap();
        assert_eq!(&read(&dev, 0, 4096)[..], &pattern(4096, 2)[..]);
        drop(dev);

        // In a directory the fallback creates the file too.
        let (dev, warnings) = Device::open(&[dir.path().to_path_buf()], &o).unwrap();
        assert!(!dev.direct() && warnings.len() == 1);
        assert!(dev.backing_paths()[0].is_file());
        REFUSE_DIRECT.with(|r| r.set(false));
    }

    #[test]
    fn tmpfs_direct_io() {
        let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
        let shm_is_tmpfs = mounts.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 2 && f[1] == "/dev/shm" && f[2] == "tmpfs"
        });
        if !shm_is_tmpfs {
            testenv::skip("shm", "/dev/shm is not a tmpfs");
            return;
        }
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let probe = dir.path().join("probe");
        let refused = match open_raw(&probe, Create::IfMissing, true) {
            Ok(_) => false,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => true,
            Err(e) => panic!("{}: {e}", probe.display()),
        };
        let _ = fs::remove_file(&probe);
        let p = dir.path().join("t.img");
        let mut o = opts(1 << 20, 4096, 0);
        o.direct_io = DirectIo::Require;
        let required = Device::open(std::slice::from_ref(&p), &o);
        o.direct_io = DirectIo::Prefer;
        if refused {
            let e = required.unwrap_err().to_string();
            assert!(
                e.contains("O_DIRECT") && e.contains(&p.display().to_string()),
                "{e}"
            );
            let (dev, warnings) = Device::open(std::slice::from_ref(&p), &o).unwrap();
            assert!(!dev.direct());
            assert!(
                warnings.iter().any(|w| w.contains("page cache")),
                "{warnings:?}"
            );
        } else {
            // tmpfs supports O_DIRECT since Linux 6.6.
            eprintln!("tmpfs accepts O_DIRECT on this kernel: checking that Require works there");
            let (dev, warnings) = required.unwrap();
            assert!(dev.direct() && warnings.is_empty(), "{warnings:?}");
            dev.write_at(4096, &pattern(4096, 4)).unwrap();
            assert_eq!(&read(&dev, 4096, 4096)[..], &pattern(4096, 4)[..]);
        }
    }

    #[test]
    fn larger_than_the_filesystem_is_too_small() {
        let dir = tempfile::tempdir().unwrap();
        let free = free_bytes(&File::open(dir.path()).unwrap()).unwrap();
        // Well beyond the free space, so concurrent activity cannot make it fit.
        let size = free + (free / 2).max(1 << 30);
        let e = Device::open(&[dir.path().to_path_buf()], &opts(size, 4096, 0)).unwrap_err();
        assert!(matches!(e, DeviceError::NoSpace { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("too small") && msg.contains(&dir.path().display().to_string()),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("needs {} bytes", size / 4096 * 4096)),
            "{msg}"
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            0,
            "the created file is removed"
        );

        let p = dir.path().join("big.img");
        let e = Device::open(std::slice::from_ref(&p), &opts(size, 4096, 0))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("too small") && e.contains(&p.display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn io_errors_keep_their_kind_and_name_the_place() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("short.img");
        let (dev, _) = Device::open(std::slice::from_ref(&p), &opts(1 << 20, 4096, 0)).unwrap();
        // Shrink the file behind the device's back: reads past its end fail.
        OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(8192)
            .unwrap();
        let mut b = AlignedBuf::zeroed(4096);
        let e = dev.read_at(65536, &mut b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let msg = e.to_string();
        assert!(
            msg.contains(&p.display().to_string()) && msg.contains("offset 65536"),
            "{msg}"
        );
        assert!(!is_disk_full(&e));
        let s = dev.stats();
        assert_eq!((s.reads, s.read_errors), (0, 1));
        assert_eq!(s.read_latency_us.len(), 0);

        // ENOSPC keeps its kind, and the original error is the source.
        let e = io_context(
            io::Error::from_raw_os_error(libc::ENOSPC),
            "write",
            &p,
            4096,
            12288,
            4096,
        );
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        assert!(is_disk_full(&e));
        let src = std::error::Error::source(&e).unwrap();
        assert_eq!(
            src.downcast_ref::<io::Error>().unwrap().raw_os_error(),
            Some(libc::ENOSPC)
        );
        let msg = e.to_string();
        assert!(
            msg.contains("write of 4096 bytes at offset 4096")
                && msg.contains("device offset 12288"),
            "{msg}"
        );
        assert!(msg.contains(&p.display().to_string()), "{msg}");
    }

    #[test]
    fn formats_sizes() {
        assert_eq!(fmt_bytes(16 << 20), "16 MiB");
        assert_eq!(fmt_bytes(3 << 30), "3 GiB");
        assert_eq!(fmt_bytes(4096), "4 KiB");
        assert_eq!(fmt_bytes(1000), "1000 bytes");
        assert_eq!(
            BLKGETSIZE64,
            if cfg!(target_pointer_width = "64") {
                0x8008_1272
            } else {
                0x8004_1272
            }
        );
    }
}
