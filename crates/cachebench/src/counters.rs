//! `printNvmCounters`: upstream's `== NVM Counters Map ==` block, navy's
//! counters by name (`name  :  value`, one a line), which its report prints
//! after the allocator stats. rackbench prints the counters its NVM engine
//! has under navy's names (sorted; upstream's map is unordered), values
//! written as C++'s `ostream` writes a double.

use crate::cache::NvmSide;

/// A double as C++'s default `ostream <<` writes it (`%g` with 6
/// significant digits: `12345`, `1.23457e+06`, `0.5`).
pub fn cpp_double(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if !v.is_finite() {
        return if v.is_nan() {
            "nan".into()
        } else if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let exp = v.abs().log10().floor() as i32;
    // Rounding to 6 digits may carry into the next power of ten.
    let rounded: f64 = format!("{v:.5e}").parse().unwrap_or(v);
    let exp = if rounded.abs() >= 10f64.powi(exp + 1) {
        exp + 1
    } else {
        exp
    };
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if (-4..6).contains(&exp) {
        let decimals = (5 - exp).max(0) as usize;
        trim(format!("{v:.decimals$}"))
    } else {
        let s = format!("{v:.5e}");
        let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        format!(
            "{}e{}{:02}",
            trim(mantissa.to_string()),
            if e < 0 { '-' } else { '+' },
            e.abs()
        )
    }
}

/// The counters of `nvm` under navy's names.
pub fn nvm_counters(nvm: &NvmSide) -> Vec<(String, f64)> {
    let e = &nvm.engine;
    let mut out: Vec<(String, f64)> = Vec::new();
    let mut put = |k: &str, v: u64| out.push((k.to_string(), v as f64));
    put(
        "navy_inserts",
        e.inserts + e.insert_errors + e.admission_rejects,
    );
    put("navy_succ_inserts", e.inserts);
    put("navy_rejected", e.admission_rejects);
    put("navy_lookups", e.lookups);
    put("navy_succ_lookups", e.hits);
    put("navy_removes", e.removes + e.removes_skipped);
    put("navy_device_bytes_read", e.device.bytes_read);
    put("navy_device_bytes_written", e.device.bytes_written);
    put("navy_device_read_errors", e.device.read_errors);
    put("navy_device_write_errors", e.device.write_errors);
    if let Some(b) = &e.small {
        put("navy_bh_items", b.items);
        put("navy_bh_succ_inserts", b.inserts);
        put("navy_bh_lookups", b.lookups);
        put("navy_bh_succ_lookups", b.hits);
        put("navy_bh_succ_removes", b.removes);
        put("navy_bh_evictions", b.evictions);
        put("navy_bh_checksum_errors", b.checksum_errors);
        put("navy_bh_logical_written", b.logical_bytes_written);
        put("navy_bh_physical_written", b.physical_bytes_written);
    }
    if let Some(r) = &e.large {
        put("navy_bc_items", r.items);
        put("navy_bc_succ_inserts", r.inserts);
        put("navy_bc_lookups", r.lookups);
        put("navy_bc_succ_lookups", r.hits);
        put("navy_bc_succ_removes", r.removes);
        put("navy_bc_evictions", r.evictions);
        put("navy_bc_reinsertions", r.reinsertions);
        put("navy_bc_reclaim", r.regions_reclaimed);
        put("navy_bc_lookup_value_checksum_errors", r.checksum_errors);
        put("navy_bc_logical_written", r.logical_bytes_written);
        put("navy_bc_physical_written", r.physical_bytes_written);
    }
    for (name, h) in [
        ("navy_device_read_latency_us", &e.device.read_latency_us),
        ("navy_device_write_latency_us", &e.device.write_latency_us),
    ] {
        if h.is_empty() {
            continue;
        }
        for (suffix, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
            out.push((format!("{name}_{suffix}"), h.value_at_quantile(q) as f64));
        }
        out.push((format!("{name}_max"), h.max() as f64));
        out.push((format!("{name}_avg"), h.mean()));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The `== NVM Counters Map ==` block.
pub fn nvm_counters_block(nvm: &NvmSide) -> String {
    let mut s = String::from("== NVM Counters Map ==\n");
    for (k, v) in nvm_counters(nvm) {
        s.push_str(&format!("{k}  :  {}\n", cpp_double(v)));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_cpp_streams_them() {
        for (v, want) in [
            (0.0, "0"),
            (12345.0, "12345"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (999999.5, "1e+06"),
            (0.5, "0.5"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (2.0 / 3.0, "0.666667"),
            (100.0, "100"),
        ] {
            assert_eq!(cpp_double(v), want, "{v}");
        }
    }

    #[test]
    fn counters_have_navys_names() {
        let mut side = NvmSide::default();
        side.engine.lookups = 10;
        side.engine.hits = 4;
        let block = nvm_counters_block(&side);
        assert!(block.starts_with("== NVM Counters Map ==\n"), "{block}");
        assert!(block.contains("navy_lookups  :  10\n"), "{block}");
        assert!(block.contains("navy_succ_lookups  :  4\n"), "{block}");
    }
}
