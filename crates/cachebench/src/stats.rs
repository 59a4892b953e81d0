//! What a CacheBench run counts: the cache's allocator counters and the
//! stressor's throughput counters, the inputs of the report text.

pub use crate::cache::{PoolStats, Stats as CacheStats};

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

/// Latency of the cache's API calls (`--report_api_latency`), nanoseconds,
/// over the last minute (upstream's sliding window): `get` is upstream's
/// find (`Cache Find API latency`: every lookup of the stressor's gets,
/// lone gets, updates, onlySetIfMiss sets and addChained parents), `set`
/// its allocate (`Cache Allocate API latency`: every allocation, with the
/// eviction it makes, promotions from NVM included).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ApiLatency {
    #[serde(with = "histogram")]
    pub get: hdrhistogram::Histogram<u64>,
    #[serde(with = "histogram")]
    pub set: hdrhistogram::Histogram<u64>,
}

impl Default for ApiLatency {
    fn default() -> Self {
        ApiLatency {
            get: crate::latency::histogram(),
            set: crate::latency::histogram(),
        }
    }
}

impl PartialEq for ApiLatency {
    fn eq(&self, o: &Self) -> bool {
        self.get.len() == o.get.len() && self.set.len() == o.set.len()
    }
}

impl ApiLatency {
    /// Adds another thread's histograms.
    pub fn add(&mut self, o: &ApiLatency) {
        crate::latency::add(&mut self.get, &o.get);
        crate::latency::add(&mut self.set, &o.set);
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

/// Serde for hdrhistogram's histograms, which have none of their own: the
/// bounds and each recorded bucket as a (value, count) pair. Recording the
/// pairs again fills the same buckets, so every percentile, the min, max and
/// mean read back exactly as they were. (hdrhistogram's own V2 encoding is
/// binary; a record is JSON that a reader can inspect.)
pub mod histogram {
    use hdrhistogram::Histogram;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Repr {
        low: u64,
        high: u64,
        sigfig: u8,
        auto_resize: bool,
        /// (highest value of the bucket, count) for each non-empty bucket.
        counts: Vec<(u64, u64)>,
    }

    fn repr(h: &Histogram<u64>) -> Repr {
        Repr {
            low: h.low(),
            high: h.high(),
            sigfig: h.sigfig(),
            auto_resize: h.is_auto_resize(),
            counts: h
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        }
    }

    fn build<E: serde::de::Error>(r: Repr) -> Result<Histogram<u64>, E> {
        let mut h = Histogram::new_with_bounds(r.low, r.high, r.sigfig)
            .map_err(|e| E::custom(format!("histogram bounds: {e:?}")))?;
        h.auto(r.auto_resize);
        for (v, n) in r.counts {
            h.record_n(v, n)
                .map_err(|e| E::custom(format!("histogram value {v}: {e:?}")))?;
        }
        Ok(h)
    }

    pub fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        repr(h).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        build(Repr::deserialize(d)?)
    }

    /// The same for an optional histogram.
    pub mod option {
        use super::*;

        pub fn serialize<S: Serializer>(
            h: &Option<Histogram<u64>>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            h.as_ref().map(repr).serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Histogram<u64>>, D::Error> {
            Option::<Repr>::deserialize(d)?.map(build).transpose()
        }
    }
}
