//! What benches learn about the host and hand to later benches: hashd's
//! parameters (from `hashd-params`), the IO cost model (from
//! `iocost-params`) and the memory profile, plus the per-job system info
//! kept in the journal (upstream's `sysinfo` layout, with our additions).
//!
//! The records themselves sit below the journal in [`crate::jobinfo`]
//! (re-exported here); this module adds the QoS overrides.

use serde::{Deserialize, Serialize};

pub use crate::jobinfo::{
    DFL_MEM_PROFILE, EnforceConfig, HashdKnobs, IoCostKnobs, IoCostModel, IoCostModelReport,
    IoCostQos, IoCostQosReport, IoCostReport, JobSysInfo, MemInfo, SysReqsReport,
};

/// Upstream's QoS override keys (`--iocost-qos`, iocost-qos' QoS groups).
pub const QOS_OVR_KEYS: &[&str] = &["rpct", "rlat", "wpct", "wlat", "min", "max", "vrate"];

/// One QoS run of the ladder: `off` (the baseline) or overrides of the
/// base QoS (`None`: keep the base value). Upstream's `IoCostQoSOvr` in
/// its results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QosOvr {
    pub off: bool,
    pub rpct: Option<f64>,
    pub rlat: Option<u64>,
    pub wpct: Option<f64>,
    pub wlat: Option<u64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl QosOvr {
    /// Sets upstream's QoS override `k` (rpct, rlat, wpct, wlat, min, max,
    /// or vrate for both min and max) from `v`: percentages rounded to two
    /// decimals as io.cost.qos takes them, latencies in µs. `Ok(false)`
    /// when `k` is not one of them; the error says what was expected.
    pub fn set_key(&mut self, k: &str, v: &str) -> Result<bool, crate::Error> {
        let pct = || {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .map(round2_as_printed)
                .ok_or_else(|| "expected a non-negative number (percent)".to_string())
        };
        let lat = || {
            v.trim()
                .parse::<u64>()
                .map_err(|_| "expected a latency in µs".to_string())
        };
        match k {
            "rpct" => self.rpct = Some(pct().map_err(crate::Error::Input)?),
            "wpct" => self.wpct = Some(pct().map_err(crate::Error::Input)?),
            "rlat" => self.rlat = Some(lat().map_err(crate::Error::Input)?),
            "wlat" => self.wlat = Some(lat().map_err(crate::Error::Input)?),
            "min" => self.min = Some(pct().map_err(crate::Error::Input)?),
            "max" => self.max = Some(pct().map_err(crate::Error::Input)?),
            "vrate" => {
                let x = pct().map_err(crate::Error::Input)?;
                self.min = Some(x);
                self.max = Some(x);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `--iocost-qos K=V,...` (upstream's global override; unknown keys,
    /// which upstream skips, are refused).
    pub fn parse_overrides(text: &str) -> Result<QosOvr, crate::Error> {
        let mut o = QosOvr::default();
        for tok in text.split(',').filter(|t| !t.is_empty()) {
            let (k, v) = tok.split_once('=').unwrap_or((tok, ""));
            match o.set_key(k, v) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(crate::Error::Input(format!(
                        "--iocost-qos: unknown key {k:?}: expected {}",
                        QOS_OVR_KEYS.join(", ")
                    )));
                }
                Err(e) => return Err(crate::Error::Input(format!("--iocost-qos {k}={v:?}: {e}"))),
            }
        }
        Ok(o)
    }

    /// True when nothing is overridden (and iocost is not turned off).
    pub fn is_empty(&self) -> bool {
        *self == QosOvr::default()
    }

    /// `qos` with the overrides applied.
    pub fn apply(&self, qos: &IoCostQos) -> IoCostQos {
        IoCostQos {
            rpct: self.rpct.unwrap_or(qos.rpct),
            rlat: self.rlat.unwrap_or(qos.rlat),
            wpct: self.wpct.unwrap_or(qos.wpct),
            wlat: self.wlat.unwrap_or(qos.wlat),
            min: self.min.unwrap_or(qos.min),
            max: self.max.unwrap_or(qos.max),
        }
    }
}

impl std::fmt::Display for QosOvr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.off {
            return write!(f, "iocost=off");
        }
        let mut parts = Vec::new();
        if let Some(v) = self.rpct {
            parts.push(format!("rpct={v:.2}"));
        }
        if let Some(v) = self.rlat {
            parts.push(format!("rlat={v}"));
        }
        if let Some(v) = self.wpct {
            parts.push(format!("wpct={v:.2}"));
        }
        if let Some(v) = self.wlat {
            parts.push(format!("wlat={v}"));
        }
        if let Some(v) = self.min {
            parts.push(format!("min={v:.2}"));
        }
        if let Some(v) = self.max {
            parts.push(format!("max={v:.2}"));
        }
        if parts.is_empty() {
            write!(f, "base QoS")
        } else {
            write!(f, "{}", parts.join(" "))
        }
    }
}

/// Rounded to two decimals, as io.cost.qos takes them: printed with two
/// decimals and read back, as upstream rounds them (the exact value is
/// rounded, half to even, where `(v * 100).round() / 100` rounds `v * 100`:
/// 8.125 is 8.12, not 8.13, and 2.675, stored just below, 2.67, not 2.68).
pub fn round2_as_printed(v: f64) -> f64 {
    format!("{v:.2}").parse().unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's rounding: print with two decimals, read back.
    #[test]
    fn round2_rounds_as_upstream_prints() {
        assert_eq!(round2_as_printed(8.125), 8.12);
        assert_eq!(round2_as_printed(2.675), 2.67);
        assert_eq!(round2_as_printed(0.375), 0.38);
        assert_eq!(round2_as_printed(97.4349), 97.43);
        assert_eq!(round2_as_printed(-1.234), -1.23);
        assert!(round2_as_printed(f64::NAN).is_nan());
    }
}
