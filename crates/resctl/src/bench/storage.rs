//! The `storage` bench; what it does, for users, is [`DOC`].

use super::job::{Ctx, Outcome};
use crate::journal::JobData;
use crate::spec::{JobSpec, check_keys};

/// What `doc storage` prints.
pub const DOC: &str = "\
storage: the memory offloading factor (how much larger than the
memory it uses hashd's footprint can be at full rate, thanks to swap).

The measurement needs swap on the scratch device: without it the
footprint beyond memory cannot be offloaded at all and the factor is 1
by construction, which says nothing about the storage. So the bench
refuses with the reason when the host has no swap, even with --force.
On hosts with swap the measurement itself is not built yet and the
bench says so.
";

const KEYS: &[&str] = &[
    "apply",
    "commit",
    "loops",
    "rps-max",
    "hash-size",
    "chunk-pages",
    "log-bps",
    "mem-avail-err-max",
    "mem-avail-inner-retries",
    "mem-avail-outer-retries",
];

/// Checks a spec's keys and numbers.
pub fn check_spec(spec: &JobSpec) -> Result<(), String> {
    check_keys(spec, 0, KEYS).map_err(|e| e.to_string())?;
    if spec.props.len() > 1 {
        return Err("multiple property sets not supported".into());
    }
    for (k, v) in spec.props.first().into_iter().flatten() {
        let ok = match k.as_str() {
            "loops"
            | "rps-max"
            | "chunk-pages"
            | "mem-avail-inner-retries"
            | "mem-avail-outer-retries" => v.parse::<u32>().is_ok(),
            "mem-avail-err-max" => v.parse::<f64>().is_ok_and(|f| f > 0.0),
            "hash-size" | "log-bps" => crate::fmt::parse_size(v).is_ok(),
            _ => matches!(v.as_str(), "" | "true" | "false" | "1" | "0"),
        };
        if !ok {
            return Err(format!("property {k}={v:?}: not a valid value"));
        }
    }
    Ok(())
}

/// Refuses without swap; otherwise says the measurement is not built.
pub fn run(_spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, String> {
    let si = ctx.sysinfo;
    if si.total_swap == 0 {
        return Err(
            "storage measures how much of hashd's footprint swap can offload, and this host has no swap: \
             add swap on the scratch device (e.g. a swap file: fallocate, mkswap, swapon) and run again"
                .into(),
        );
    }
    Err("storage: the memory offloading measurement is not built yet in rackbench".into())
}

/// No result can exist yet; an entry is printed as recorded.
pub fn format(d: &JobData, _full: bool) -> Result<String, String> {
    Ok(format!(
        "(no storage result{})\n",
        if d.is_completed() { "" } else { ": incomplete" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse;

    #[test]
    fn keys_and_values_are_checked() {
        assert!(check_spec(&parse("storage:loops=3,hash-size=1M").unwrap()).is_ok());
        assert!(
            check_spec(&parse("storage:lops=3").unwrap())
                .unwrap_err()
                .contains("loops")
        );
        assert!(check_spec(&parse("storage:loops=x").unwrap()).is_err());
    }
}
