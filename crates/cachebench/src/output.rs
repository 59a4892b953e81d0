//! CacheBench report text (being written).
