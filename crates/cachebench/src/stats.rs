//! What a CacheBench run counts: the cache's allocator counters and the
//! stressor's throughput counters, the inputs of the report text.

pub use crate::cache::{ApiLatency, PoolStats, Stats as CacheStats};

/// Operations the stressor issued and how they went, summed over threads.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Throughput {
    pub ops: u64,
    pub sets: u64,
    pub set_failures: u64,
    pub gets: u64,
    pub get_misses: u64,
    pub dels: u64,
    pub del_not_found: u64,
    pub add_chained: u64,
    pub add_chained_failures: u64,
    pub could_exist: u64,
    pub could_exist_false: u64,
    pub updates: u64,
    pub update_misses: u64,
    /// With checkConsistency: gets whose value was checked, and those that
    /// returned a value no set could have left there.
    pub consistency_checks: u64,
    pub inconsistencies: u64,
    /// Stressor threads that panicked (their counts are lost; the run
    /// fails).
    pub failed_threads: u64,
}

impl Throughput {
    /// Adds another thread's counters.
    pub fn add(&mut self, o: &Throughput) {
        self.ops += o.ops;
        self.sets += o.sets;
        self.set_failures += o.set_failures;
        self.gets += o.gets;
        self.get_misses += o.get_misses;
        self.dels += o.dels;
        self.del_not_found += o.del_not_found;
        self.add_chained += o.add_chained;
        self.add_chained_failures += o.add_chained_failures;
        self.could_exist += o.could_exist;
        self.could_exist_false += o.could_exist_false;
        self.updates += o.updates;
        self.update_misses += o.update_misses;
        self.consistency_checks += o.consistency_checks;
        self.inconsistencies += o.inconsistencies;
        self.failed_threads += o.failed_threads;
    }
}

/// Everything the end-of-run report shows.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunStats {
    pub cache: CacheStats,
    /// Fraction of the cache's memory each pool may use (its poolSizes).
    pub pool_fractions: Vec<f64>,
    pub throughput: Throughput,
    pub elapsed_secs: f64,
    /// With `--report_api_latency`.
    pub api_latency: Option<ApiLatency>,
}
