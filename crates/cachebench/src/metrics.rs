//! The report's metrics of a CacheBench run, derived from its record
//! ([`CacheBenchRecord`]): typed, so tests and callers read them by field;
//! the harness flattens [`CacheBenchMetrics`] into the report's JSON.

use crate::cache::NvmSide;
use crate::record::{CacheBenchRecord, IntervalPoint};
use crate::stats::RunStats;
use serde::Serialize;

/// The metrics of a whole run: one instance's figures, or with several the
/// sums over all of them (rates over the longest instance's time) and each
/// instance's own under `instances`.
#[derive(Debug, Clone, Serialize)]
pub struct CacheBenchMetrics {
    #[serde(flatten)]
    pub run: RunMetrics,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instances: Option<Vec<RunMetrics>>,
    /// Our charts of the progress samples (a job's run only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub charts: Option<Vec<String>>,
    /// The run over time: one point per progress interval (at most
    /// [`crate::record::MAX_SERIES_POINTS`]; see [`crate::record::series`]),
    /// all instances together. Absent without progress intervals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<IntervalPoint>>,
    /// Present (true) when Ctrl-C stopped the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by_timeout_seconds: Option<u64>,
    /// rackbench's own: seconds from the command's start until every
    /// instance had begun its first operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_op_secs: Option<f64>,
    /// Why the run failed: inconsistent reads, failed stressor threads, or
    /// an NVM device error (in that order of precedence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One instance's (or the sums') figures. A ratio over nothing is `null`.
#[derive(Debug, Clone, Serialize)]
pub struct RunMetrics {
    pub ops: u64,
    pub ops_per_sec: f64,
    pub gets_per_sec: f64,
    pub sets_per_sec: f64,
    pub dels_per_sec: f64,
    /// Gets answered by either tier, as upstream's overall hit ratio.
    pub hit_ratio_pct: Option<f64>,
    pub ram_hit_ratio_pct: Option<f64>,
    pub get_miss_pct: Option<f64>,
    pub set_success_pct: Option<f64>,
    pub consistency_checks: u64,
    pub inconsistencies: u64,
    pub items_in_ram: u64,
    pub ram_evictions: u64,
    pub nvm: Option<NvmMetrics>,
    pub elapsed_secs: f64,
    /// With `--report_api_latency`.
    pub api_latency_ns: Option<ApiLatencyMetrics>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ApiLatencyMetrics {
    pub get: Option<Quantiles>,
    pub set: Option<Quantiles>,
}

/// A latency distribution's count and percentiles, in its histogram's unit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quantiles {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// The NVM tier's figures.
#[derive(Debug, Clone, Serialize)]
pub struct NvmMetrics {
    pub gets: u64,
    pub hit_ratio_pct: Option<f64>,
    pub coalesced_gets: u64,
    pub puts: u64,
    pub put_errors: u64,
    pub aborted_puts: u64,
    pub admission_rejects: u64,
    pub admission_probability: f64,
    pub rejects_clean: u64,
    pub rejects_expiry: u64,
    pub rejects_retention: u64,
    pub deletes: u64,
    pub items: u64,
    pub evictions: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub logical_bytes_written: u64,
    pub app_write_amplification: Option<f64>,
    /// NAND bytes written (the `writeAmpDeviceList` drives' own count,
    /// read through nvme-cli as upstream) / `bytes_written`; `null` when
    /// the drives were not read.
    pub nand_bytes_written: Option<u64>,
    pub device_write_amplification: Option<f64>,
    /// Device I/O latency, µs per device read and write call: upstream's
    /// `NVM Read  Latency` and `NVM Write Latency` (navy's
    /// `navy_device_read_latency_us` / `navy_device_write_latency_us`), the
    /// figures the text prints.
    pub device_read_latency_us: Option<Quantiles>,
    pub device_write_latency_us: Option<Quantiles>,
    /// rackbench's own: µs per NVM engine lookup and per engine insert
    /// (index, Bloom filter and device I/O together; a lookup the Bloom
    /// filter answers takes no I/O). Upstream has no such figure; it is
    /// not printed in the text.
    pub engine_lookup_latency_us: Option<Quantiles>,
    pub engine_insert_latency_us: Option<Quantiles>,
    pub region_engine: Option<RegionEngineMetrics>,
    pub bucket_engine: Option<BucketEngineMetrics>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RegionEngineMetrics {
    pub items: u64,
    pub evictions: u64,
    pub reinsertions: u64,
    pub regions_reclaimed: u64,
    pub checksum_errors: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BucketEngineMetrics {
    pub items: u64,
    pub evictions: u64,
    pub bloom_rejects: u64,
    pub checksum_errors: u64,
}

/// The metrics of a recorded run.
pub fn of_record(r: &CacheBenchRecord) -> CacheBenchMetrics {
    let total = r
        .aggregated
        .as_ref()
        .or_else(|| r.instances.first().map(|i| &i.stats));
    let run = total
        .map(run_metrics)
        .unwrap_or_else(|| run_metrics(&RunStats::default()));
    let instances = (r.instances.len() > 1)
        .then(|| r.instances.iter().map(|i| run_metrics(&i.stats)).collect());
    let (inconsistencies, failed_threads) = total.map_or((0, 0), |t| {
        (t.throughput.inconsistencies, t.throughput.failed_threads)
    });
    let error = if inconsistencies > 0 || failed_threads > 0 {
        Some(if failed_threads > 0 && inconsistencies == 0 {
            format!("{failed_threads} stressor thread(s) failed")
        } else {
            format!("{inconsistencies} values read were inconsistent with the sets")
        })
    } else {
        r.nvm_failure.clone()
    };
    CacheBenchMetrics {
        run,
        instances,
        charts: (!r.charts.is_empty()).then(|| r.charts.clone()),
        series: (!r.series.is_empty()).then(|| r.series.clone()),
        interrupted: r.interrupted.then_some(true),
        stopped_by_timeout_seconds: r.stopped_by_timeout_seconds,
        first_op_secs: r.first_op_secs,
        error,
    }
}

fn pct(a: u64, b: u64) -> Option<f64> {
    (b != 0).then(|| 100.0 * a as f64 / b as f64)
}

fn run_metrics(s: &RunStats) -> RunMetrics {
    let t = &s.throughput;
    let secs = s.elapsed_secs.max(1e-9);
    RunMetrics {
        ops: t.ops,
        ops_per_sec: t.ops as f64 / secs,
        gets_per_sec: t.gets as f64 / secs,
        sets_per_sec: t.sets as f64 / secs,
        dels_per_sec: t.dels as f64 / secs,
        hit_ratio_pct: match s.cache.nvm.as_ref().map(|n| &n.counters) {
            Some(n) if n.nvm_gets > 0 => pct(s.cache.gets - n.nvm_get_misses, s.cache.gets),
            _ => pct(s.cache.hits, s.cache.gets),
        },
        ram_hit_ratio_pct: pct(s.cache.hits, s.cache.gets),
        get_miss_pct: pct(t.get_misses, t.gets),
        set_success_pct: pct(t.sets - t.set_failures, t.sets),
        consistency_checks: t.consistency_checks,
        inconsistencies: t.inconsistencies,
        items_in_ram: s.cache.pools.iter().map(|p| p.items).sum(),
        ram_evictions: s.cache.pools.iter().map(|p| p.evictions).sum(),
        nvm: s.cache.nvm.as_ref().map(nvm_metrics),
        elapsed_secs: s.elapsed_secs,
        api_latency_ns: s.api_latency.as_ref().map(|l| ApiLatencyMetrics {
            get: quantiles(Some(&l.get)),
            set: quantiles(Some(&l.set)),
        }),
    }
}

fn quantiles(h: Option<&hdrhistogram::Histogram<u64>>) -> Option<Quantiles> {
    let h = h.filter(|h| !h.is_empty())?;
    Some(Quantiles {
        count: h.len(),
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    })
}

fn nvm_metrics(n: &NvmSide) -> NvmMetrics {
    let c = &n.counters;
    let e = &n.engine;
    let d = &e.device;
    let logical = e.logical_bytes_written();
    NvmMetrics {
        gets: c.nvm_gets,
        hit_ratio_pct: pct(c.nvm_gets - c.nvm_get_misses, c.nvm_gets),
        coalesced_gets: c.coalesced,
        puts: c.puts,
        put_errors: c.put_errors,
        aborted_puts: c.aborts_from_del,
        admission_rejects: e.admission_rejects,
        admission_probability: e.admission_probability,
        rejects_clean: c.rejects_clean,
        rejects_expiry: c.rejects_expiry,
        rejects_retention: c.rejects_retention,
        deletes: c.nvm_deletes,
        items: e.items(),
        evictions: e.evictions(),
        bytes_read: d.bytes_read,
        bytes_written: d.bytes_written,
        logical_bytes_written: logical,
        app_write_amplification: (logical != 0).then(|| d.bytes_written as f64 / logical as f64),
        nand_bytes_written: n.nand_bytes_written,
        device_write_amplification: n
            .nand_bytes_written
            .filter(|_| d.bytes_written > 0)
            .map(|nand| nand as f64 / d.bytes_written as f64),
        device_read_latency_us: quantiles(Some(&d.read_latency_us)),
        device_write_latency_us: quantiles(Some(&d.write_latency_us)),
        engine_lookup_latency_us: quantiles(e.read_latency_us.as_ref()),
        engine_insert_latency_us: quantiles(e.write_latency_us.as_ref()),
        region_engine: e.large.as_ref().map(|l| RegionEngineMetrics {
            items: l.items,
            evictions: l.evictions,
            reinsertions: l.reinsertions,
            regions_reclaimed: l.regions_reclaimed,
            checksum_errors: l.checksum_errors,
        }),
        bucket_engine: e.small.as_ref().map(|s| BucketEngineMetrics {
            items: s.items,
            evictions: s.evictions,
            bloom_rejects: s.bloom_rejects,
            checksum_errors: s.checksum_errors,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::InstanceRecord;

    fn stats(ops: u64, gets: u64, hits: u64, secs: f64) -> RunStats {
        let mut s = RunStats::default();
        s.throughput.ops = ops;
        s.throughput.gets = gets;
        s.cache.gets = gets;
        s.cache.hits = hits;
        s.elapsed_secs = secs;
        s
    }

    fn record(instances: Vec<RunStats>) -> CacheBenchRecord {
        let aggregated = (instances.len() > 1).then(|| {
            let mut t = RunStats::default();
            for s in &instances {
                t.throughput.add(&s.throughput);
                t.cache.gets += s.cache.gets;
                t.cache.hits += s.cache.hits;
                t.elapsed_secs = t.elapsed_secs.max(s.elapsed_secs);
            }
            t
        });
        CacheBenchRecord {
            instances: instances
                .into_iter()
                .map(|stats| InstanceRecord {
                    stats,
                    failures: Vec::new(),
                    generator: None,
                    print_nvm_counters: false,
                })
                .collect(),
            aggregated,
            charts: Vec::new(),
            series: Vec::new(),
            interrupted: false,
            stopped_by_timeout_seconds: None,
            nvm_failure: None,
            layout: Default::default(),
            first_op_secs: None,
            reports_in_stats_files: false,
        }
    }

    #[test]
    fn one_instance_gives_its_own_figures_and_no_optional_keys() {
        let m = of_record(&record(vec![stats(1000, 400, 300, 2.0)]));
        assert_eq!(m.run.ops, 1000);
        assert_eq!(m.run.ops_per_sec, 500.0);
        assert_eq!(m.run.hit_ratio_pct, Some(75.0));
        assert!(m.run.nvm.is_none());
        let flat = harness::record::metrics_map(&m).unwrap();
        for absent in [
            "instances",
            "charts",
            "series",
            "interrupted",
            "stopped_by_timeout_seconds",
            "error",
        ] {
            assert!(!flat.contains_key(absent), "{absent} in {flat:?}");
        }
        // Present but null: a ratio over no operations, and no NVM tier.
        assert!(flat["get_miss_pct"].is_number());
        assert!(flat["set_success_pct"].is_null());
        assert!(flat["nvm"].is_null());
    }

    #[test]
    fn several_instances_give_the_sums_and_each_instance() {
        let m = of_record(&record(vec![
            stats(1000, 100, 50, 2.0),
            stats(3000, 100, 100, 4.0),
        ]));
        assert_eq!(m.run.ops, 4000);
        assert_eq!(m.run.ops_per_sec, 1000.0, "rates over the longest instance");
        assert_eq!(m.run.hit_ratio_pct, Some(75.0));
        let each = m.instances.expect("each instance's figures");
        assert_eq!(each.len(), 2);
        assert_eq!(each[1].ops_per_sec, 750.0);
    }

    #[test]
    fn the_failure_named_is_the_one_that_happened() {
        let mut r = record(vec![stats(10, 0, 0, 1.0)]);
        r.nvm_failure = Some("read failed".into());
        r.interrupted = true;
        r.stopped_by_timeout_seconds = Some(5);
        let m = of_record(&r);
        assert_eq!(m.error.as_deref(), Some("read failed"));
        assert_eq!(m.interrupted, Some(true));
        assert_eq!(m.stopped_by_timeout_seconds, Some(5));

        r.instances[0].stats.throughput.failed_threads = 2;
        let m = of_record(&r);
        assert_eq!(m.error.as_deref(), Some("2 stressor thread(s) failed"));

        r.instances[0].stats.throughput.inconsistencies = 3;
        let m = of_record(&r);
        assert_eq!(
            m.error.as_deref(),
            Some("3 values read were inconsistent with the sets")
        );
    }

    #[test]
    fn the_workload_derives_the_metrics_from_a_stored_record() {
        use harness::Workload;
        let r = record(vec![stats(1000, 400, 300, 2.0)]);
        let stored = harness::Record::of("cachebench", 2, &r);
        let back: harness::Record =
            serde_json::from_str(&serde_json::to_string(&stored).unwrap()).unwrap();
        let m = crate::CacheBench.metrics(&back).unwrap();
        assert_eq!(m["ops_per_sec"], 500.0);
        assert_eq!(m["hit_ratio_pct"], 75.0);
        let old = harness::Record { version: 1, ..back };
        assert!(crate::CacheBench.metrics(&old).is_err());
    }

    #[test]
    fn the_series_goes_through_the_stored_record_into_the_metrics() {
        use harness::Workload;
        let mut r = record(vec![stats(1000, 400, 300, 2.0)]);
        let point = |t: f64| crate::record::IntervalPoint {
            elapsed_secs: t,
            ops_per_sec: 500.0,
            hit_ratio_pct: Some(75.0),
            ram_hit_ratio_pct: Some(50.0),
            nvm_hit_ratio_pct: Some(50.0),
            nvm_read_p50_us: Some(4.0),
            nvm_read_p99_us: Some(9.0),
            nvm_write_p50_us: None,
            nvm_write_p99_us: None,
        };
        r.series = vec![point(1.0), point(2.0)];
        let stored = harness::Record::of("cachebench", 2, &r);
        let back: harness::Record =
            serde_json::from_str(&serde_json::to_string(&stored).unwrap()).unwrap();
        let m = crate::CacheBench.metrics(&back).unwrap();
        let series = m["series"].as_array().unwrap();
        assert_eq!(series.len(), 2);
        assert_eq!(series[1]["elapsed_secs"], 2.0);
        assert_eq!(series[0]["nvm_read_p99_us"], 9.0);
        assert!(series[0].get("nvm_write_p50_us").is_none(), "{m:?}");
        // A record stored before the series was kept reads back without one.
        let mut old = serde_json::to_value(&stored).unwrap();
        let body = old["data"].as_object_mut().unwrap();
        assert!(body.remove("series").is_some());
        let old: harness::Record = serde_json::from_value(old).unwrap();
        assert!(
            !crate::CacheBench
                .metrics(&old)
                .unwrap()
                .contains_key("series")
        );
    }
}
