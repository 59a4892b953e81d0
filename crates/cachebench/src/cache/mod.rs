//! The cache engine, written here because it is the product: CacheLib's
//! layout of DRAM into slabs, pools and allocation classes, its eviction
//! containers (LRU with insertion point and refresh time, 2Q) and its
//! chained hash index. The SSD (NVM) tier is not built yet.

pub mod classes;
pub mod dram;
pub mod mm;

pub use classes::{AllocClasses, SLAB_SIZE};
pub use dram::{AllocError, DramCache, DramConfig, Footprint, PoolStats, Stats};
pub use mm::{Policy, Refresh};
