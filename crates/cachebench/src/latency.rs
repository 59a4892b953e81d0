//! Latency recording for the NVM tier: every value is kept (histograms
//! that grow to the largest value seen, so a 100 ms or a one-hour device
//! read is recorded as it was), both over the whole run and over a sliding
//! window of the last [`WINDOW_SECS`] seconds.
//!
//! Upstream's figures (`navy_device_read_latency_us`, `navy_bc_*_latency_us`)
//! come from CacheLib's `PercentileStats`, a sliding-window quantile
//! estimator of 60 windows of one second each (`kDefaultWindowSize` = 1 s
//! and folly's default of 60 windows): what cachebench prints at any time,
//! and at the end of the run, covers about the last minute. [`Recorder`]
//! keeps the same window exactly (3 significant digits) plus the whole run
//! (for rackbench's per-interval charts and the report JSON's counts).
//!
//! Recording takes one of a few sharded mutexes (picked per thread); the
//! current second's values go to the shard's own histogram, which moves
//! into the shared ring of one-second histograms when its second is over.

use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Seconds the window covers (upstream's 60 one-second windows).
pub const WINDOW_SECS: u64 = 60;
const SHARDS: usize = 8;

/// An empty histogram that grows to hold any value (3 significant digits).
pub fn histogram() -> Histogram<u64> {
    // Starts small and resizes on `record` (never `saturating_record`,
    // whose clamp would cap values at the initial range).
    Histogram::new(3).expect("3 significant figures is valid")
}

/// Records `v` (0 counts as 1), growing `h` as needed.
pub fn record(h: &mut Histogram<u64>, v: u64) {
    let v = v.max(1);
    if h.record(v).is_err() {
        // Only a histogram that cannot resize refuses; clamp there.
        h.saturating_record(v);
    }
}

/// Adds `src` into `dst`, growing `dst` as needed.
pub fn add(dst: &mut Histogram<u64>, src: &Histogram<u64>) {
    if dst.add(src).is_err() {
        for v in src.iter_recorded() {
            let _ = dst.record_n(v.value_iterated_to(), v.count_at_value());
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Shard {
    total: Histogram<u64>,
    /// Values of second `sec` (since the recorder's start).
    current: Histogram<u64>,
    sec: u64,
}

/// One-second histograms of the window, slot `sec % WINDOW_SECS`.
struct Ring {
    slots: Vec<(u64, Histogram<u64>)>,
}

impl Ring {
    fn put(&mut self, sec: u64, h: &Histogram<u64>) {
        let slot = &mut self.slots[(sec % WINDOW_SECS) as usize];
        if slot.0 > sec {
            // The slot already holds a second a whole window later.
            return;
        }
        if slot.0 < sec {
            slot.0 = sec;
            slot.1.reset();
        }
        add(&mut slot.1, h);
    }
}

/// A latency recorder: the whole run and the last [`WINDOW_SECS`] seconds.
pub struct Recorder {
    start: Instant,
    shards: Box<[Mutex<Shard>]>,
    ring: Mutex<Ring>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            start: Instant::now(),
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        total: histogram(),
                        current: histogram(),
                        sec: 0,
                    })
                })
                .collect(),
            ring: Mutex::new(Ring {
                slots: (0..WINDOW_SECS).map(|_| (0, histogram())).collect(),
            }),
        }
    }

    fn shard(&self) -> &Mutex<Shard> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed);
        }
        &self.shards[SHARD.with(|s| *s) % SHARDS]
    }

    fn now_sec(&self) -> u64 {
        self.start.elapsed().as_secs()
    }

    /// Records one value.
    pub fn record(&self, v: u64) {
        self.record_at(v, self.now_sec());
    }

    /// Records the time since `since` in microseconds.
    pub fn record_since(&self, since: Instant) {
        self.record(u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX));
    }

    fn record_at(&self, v: u64, sec: u64) {
        let mut s = lock(self.shard());
        if s.sec != sec {
            if !s.current.is_empty() {
                lock(&self.ring).put(s.sec, &s.current);
                s.current.reset();
            }
            s.sec = sec;
        }
        record(&mut s.current, v);
        record(&mut s.total, v);
    }

    /// Everything recorded.
    pub fn total(&self) -> Histogram<u64> {
        let mut all = histogram();
        for s in self.shards.iter() {
            add(&mut all, &lock(s).total);
        }
        all
    }

    /// What was recorded in the last [`WINDOW_SECS`] seconds (the current
    /// second and the 59 before it).
    pub fn window(&self) -> Histogram<u64> {
        self.window_at(self.now_sec())
    }

    fn window_at(&self, now: u64) -> Histogram<u64> {
        let first = (now + 1).saturating_sub(WINDOW_SECS);
        let mut all = histogram();
        for s in self.shards.iter() {
            let s = lock(s);
            if s.sec >= first {
                add(&mut all, &s.current);
            }
        }
        for (sec, h) in &lock(&self.ring).slots {
            if *sec >= first && !h.is_empty() {
                add(&mut all, h);
            }
        }
        all
    }

    /// Forgets everything.
    pub fn reset(&self) {
        for s in self.shards.iter() {
            let mut s = lock(s);
            s.total.reset();
            s.current.reset();
        }
        for (_, h) in lock(&self.ring).slots.iter_mut() {
            h.reset();
        }
    }
}

/// The region engine's API latencies over the last minute, microseconds
/// (upstream's `navy_bc_insert_latency_us`, `navy_bc_lookup_latency_us`,
/// `navy_bc_remove_latency_us`: BlockCache's insert, lookup and remove
/// calls, whole).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OpLatency {
    #[serde(with = "crate::latency::serde_histogram")]
    pub insert: Histogram<u64>,
    #[serde(with = "crate::latency::serde_histogram")]
    pub lookup: Histogram<u64>,
    #[serde(with = "crate::latency::serde_histogram")]
    pub remove: Histogram<u64>,
}

/// Serde for hdrhistogram's histograms, which have none of their own: the
/// bounds and each recorded bucket as a (value, count) pair. Recording the
/// pairs again fills the same buckets, so every percentile, the min, max and
/// mean read back exactly as they were. (hdrhistogram's own V2 encoding is
/// binary; a record is JSON that a reader can inspect.)
pub mod serde_histogram {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Values far above the histogram's starting range are recorded as
    /// they are (a 111 ms read is not 2 µs), up to an hour and beyond.
    #[test]
    fn large_values_are_kept() {
        let r = Recorder::new();
        for v in [2, 10_000, 111_000, 3_600_000_000] {
            r.record(v);
        }
        let t = r.total();
        assert_eq!(t.len(), 4);
        assert_eq!(t.min(), 2);
        assert!(t.equivalent(t.max(), 3_600_000_000), "{}", t.max());
        assert!(t.equivalent(t.value_at_quantile(0.6), 111_000));
        assert_eq!(r.window().len(), 4);
    }

    /// The window holds the last 60 seconds only; the total everything.
    #[test]
    fn window_slides() {
        let r = Recorder::new();
        for sec in 0..200u64 {
            // One value per second: the second's number.
            r.record_at(sec + 1, sec);
        }
        let w = r.window_at(199);
        assert_eq!(w.len(), 60);
        assert_eq!(w.min(), 141);
        assert_eq!(w.max(), 200);
        assert_eq!(r.total().len(), 200);
        // Nothing recorded for a minute: the window is empty.
        assert!(r.window_at(300).is_empty());
        // From several threads (shards).
        let r = Recorder::new();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let r = &r;
                s.spawn(move || {
                    for sec in 0..100u64 {
                        r.record_at(1000 + t, sec);
                    }
                });
            }
        });
        assert_eq!(r.window_at(99).len(), 240);
        assert_eq!(r.total().len(), 400);
    }
}
