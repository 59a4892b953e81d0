//! The NVM (flash) tier, CacheLib's "navy": items evicted from DRAM go to a
//! log-structured region engine (large items) or a set-associative bucket
//! engine (small items) on a file, raw device or memory.

pub mod io;
pub mod region;
