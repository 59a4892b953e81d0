//! CacheLib's JSON test configs (being written).
