//! The block I/O interface the NVM engines write through, and the aligned
//! buffers O_DIRECT needs.
//!
//! Engines address a [`BlockIo`] in whole blocks: offsets and lengths are
//! multiples of [`BlockIo::block_size`] and buffers start on an
//! [`ALIGN`]-byte boundary, so the same engine code runs on a file or a raw
//! device opened with O_DIRECT and on the in-memory device.

use std::io;
use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

/// Alignment of every I/O buffer (covers 512 B and 4 KiB logical blocks).
pub const ALIGN: usize = 4096;

/// A device (or a slice of one) read and written in whole blocks.
pub trait BlockIo: Send + Sync {
    /// Usable bytes.
    fn size(&self) -> u64;
    /// The I/O unit: offsets and lengths are multiples of it.
    fn block_size(&self) -> u32;
    /// Fills `buf` from `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `buf` at `offset`.
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()>;
}

/// A zeroed heap buffer starting on an [`ALIGN`] boundary.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer owns its memory exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: &AlignedBuf gives only shared reads of its bytes, like &Vec<u8>.
unsafe impl Sync for AlignedBuf {}

/// Buffers of at least this size are aligned for (and advised to use)
/// 2 MiB huge pages.
const HUGE: usize = 2 << 20;

impl AlignedBuf {
    fn layout(len: usize) -> std::alloc::Layout {
        let align = if len >= HUGE { HUGE } else { ALIGN };
        std::alloc::Layout::from_size_align(len, align).expect("buffer layout")
    }

    /// `len` zero bytes (`len` may be 0).
    pub fn zeroed(len: usize) -> AlignedBuf {
        if len == 0 {
            return AlignedBuf {
                ptr: std::ptr::NonNull::dangling(),
                len: 0,
            };
        }
        let layout = Self::layout(len);
        // SAFETY: layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(ptr) = std::ptr::NonNull::new(p) else {
            std::alloc::handle_alloc_error(layout)
        };
        if len >= HUGE {
            // Region buffers: transparent huge pages make pinning them for
            // O_DIRECT writes (and copying into them) cheaper. Advice only.
            // SAFETY: the range is the allocation we own.
            unsafe {
                libc::madvise(p.cast(), len, libc::MADV_HUGEPAGE);
            }
        }
        AlignedBuf { ptr, len }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len > 0 {
            let layout =
                std::alloc::Layout::from_size_align(self.len, ALIGN).expect("buffer layout");
            // SAFETY: allocated in `zeroed` with this layout.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

/// Checks the block rules of a request against a device.
pub fn check_request(io: &dyn BlockIo, offset: u64, len: usize, ptr: *const u8) -> io::Result<()> {
    let bs = u64::from(io.block_size());
    if !offset.is_multiple_of(bs) || !(len as u64).is_multiple_of(bs) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("I/O at offset {offset}, {len} bytes: not a multiple of the {bs}-byte block"),
        ));
    }
    if offset + len as u64 > io.size() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "I/O at offset {offset}, {len} bytes: past the end of the {}-byte device",
                io.size()
            ),
        ));
    }
    if !(ptr as usize).is_multiple_of(ALIGN) && len > 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("I/O buffer not aligned to {ALIGN} bytes"),
        ));
    }
    Ok(())
}

/// A window `[base, base + len)` of another device, so each engine
/// addresses its own part from 0.
pub struct Window<D: BlockIo + ?Sized> {
    pub dev: std::sync::Arc<D>,
    pub base: u64,
    pub len: u64,
}

impl<D: BlockIo + ?Sized> BlockIo for Window<D> {
    fn size(&self) -> u64 {
        self.len
    }
    fn block_size(&self) -> u32 {
        self.dev.block_size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_request(self, offset, buf.len(), buf.as_ptr())?;
        self.dev.read_at(self.base + offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        check_request(self, offset, buf.len(), buf.as_ptr())?;
        self.dev.write_at(self.base + offset, buf)
    }
}

/// A simple in-memory device for engine tests (the product's in-memory
/// device, with statistics, is in `device`).
pub struct MemIo {
    data: Mutex<Vec<u8>>,
    block: u32,
}

impl MemIo {
    pub fn new(size: u64, block: u32) -> MemIo {
        MemIo {
            data: Mutex::new(vec![0; size as usize]),
            block,
        }
    }
}

impl BlockIo for MemIo {
    fn size(&self) -> u64 {
        self.data.lock().unwrap_or_else(|e| e.into_inner()).len() as u64
    }
    fn block_size(&self) -> u32 {
        self.block
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_request(self, offset, buf.len(), buf.as_ptr())?;
        let d = self.data.lock().unwrap_or_else(|e| e.into_inner());
        buf.copy_from_slice(&d[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        check_request(self, offset, buf.len(), buf.as_ptr())?;
        let mut d = self.data.lock().unwrap_or_else(|e| e.into_inner());
        d[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_and_block_rules() {
        let b = AlignedBuf::zeroed(8192);
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        assert!(b.iter().all(|&x| x == 0));
        let io = MemIo::new(16384, 4096);
        let mut w = AlignedBuf::zeroed(4096);
        w[0] = 7;
        io.write_at(4096, &w).unwrap();
        let mut r = AlignedBuf::zeroed(4096);
        io.read_at(4096, &mut r).unwrap();
        assert_eq!(r[0], 7);
        assert!(io.write_at(100, &w).is_err(), "unaligned offset");
        assert!(io.write_at(16384, &w).is_err(), "past the end");
        let win = Window {
            dev: std::sync::Arc::new(io),
            base: 4096,
            len: 8192,
        };
        let mut r2 = AlignedBuf::zeroed(4096);
        win.read_at(0, &mut r2).unwrap();
        assert_eq!(r2[0], 7);
        assert!(win.read_at(8192, &mut r2).is_err());
    }
}
