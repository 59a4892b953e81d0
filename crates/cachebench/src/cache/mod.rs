//! The cache engine, written here because it is the product: CacheLib's
//! layout of DRAM into slabs, pools and allocation classes, its eviction
//! containers (LRU with insertion point and refresh time, 2Q) and its
//! chained hash index; and the hybrid layer that puts the NVM tier
//! ([`crate::nvm`]) behind DRAM.

pub mod classes;
pub mod dram;
pub mod hybrid;
pub mod mm;
pub mod stats;

pub use classes::{AllocClasses, SLAB_SIZE};
pub use dram::{
    AllocError, DramCache, DramConfig, Evicted, Footprint, Rebalance, RebalanceConfig, SetMode,
};
pub use hybrid::{Cache, HybridOptions};
pub use mm::{Policy, Refresh};
pub use stats::{ApiLatency, HybridCounters, NvmSide, PoolStats, ReleaseStats, Stats};
