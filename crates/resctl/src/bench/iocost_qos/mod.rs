//! The specs of the `iocost-qos` and `iocost-tune` benches, checked in
//! full (upstream's properties, values and the vrate ladder), and their
//! `doc` texts. The benches themselves (system requirements, the refusal
//! to run, formatting) are in `bench.rs` here and in `iocost_tune/bench.rs`. What they
//! measure, for users, is [`QOS_DOC`] and [`TUNE_DOC`].

pub mod bench;
pub mod format;
pub mod run;

pub use crate::bench::knobs::QosOvr;
use crate::bench::knobs::{QOS_OVR_KEYS, round2_as_printed};
use crate::fmt::parse_frac;
use crate::spec::{JobSpec, SpecError};
use std::collections::BTreeMap;

/// What `doc iocost-qos` prints.
pub const QOS_DOC: &str = "\
iocost-qos: how well the scratch device serves a memory-offloaded,
protected workload as io.cost throttles it harder and harder.

Status in rackbench: runs as upstream's, on a host whose cgroup2 has
the io controller and io.cost (elsewhere it is refused naming the missed
sysreqs Controllers and IoCost, even with --force; on a cgroup1 host,
deploy/cgroup2-guest.sh boots a cgroup2 guest). Each run's QoS is
written to the scratch device's io.cost.qos (the baseline writes
enable=0) and the device's settings are restored when the job ends. The
vrate (root io.stat cost.vrate) and the per-IO latency (block
tracepoints, or /proc/diskstats means) are sampled every second of each
run, where upstream reads rd-agent's reports. Each finished run is saved
in the result file at once; `run` again resumes an interrupted ladder.
Results made by upstream's resctl-bench are formatted as upstream
prints them. With --test, an iocost-tune without an iocost-qos result
nests iocost-qos:dither,vrate-max=125,vrate-intvs=4,storage-base-loops=1
(upstream's default has 25 rungs).

What upstream runs. One run per QoS setting, in ladder order. Each run
is a storage bench (the MOF, below) followed by protection's
mem-hog-tune scenario at load 1.0 (the aMOF). Run [00] always has
iocost off and is the baseline the others are compared with. Each
later run starts from the QoS parameters of the journal's
iocost-params result and overrides some of them.

The default ladder pins vrate (min = max) at 100, 80, 60, 40 and 20
percent: with no explicit QoS groups and vrate-intvs unset, five
intervals below vrate-max. With vrate-min = 0 the ladder starts one
interval above 0 (max/intvs ... max); with vrate-min > 0 both ends are
included (intvs - 1 steps between them). No rung goes below 1%.
Rungs that would throttle the device below what it needs to run at
all are skipped unless ignore-min-perf is set. Results already in the
journal for the same rung, memory profile and iocost-params model are
reused, so a long ladder can be completed across several runs.

Spec: iocost-qos[:GROUP1][:QOS]...

First group:
  vrate-min=F (0)   lowest vrate of the ladder, percent.
  vrate-max=F (100) highest vrate of the ladder; vrate-min < vrate-max.
  vrate-intvs=N (0; 5 when no QOS group is given) number of rungs.
  dither[=F]        shifts the whole ladder by a random offset (at most
                    half an interval, or F) so repeated coarse runs
                    sample different vrates; upstream reuses the
                    offset of a previous result with dither.
  storage-base-loops=N (3) storage loops of the baseline run.
  storage-loops=N (1)      storage loops of every QoS run.
  storage-KEY=V     passes KEY=V to every storage sub-bench (KEY is one
                    of storage's properties: rps-max, hash-size, ...).
  isol-pct=P (05)   the isolation percentile mem-hog-tune judges; one of
                    00 01 05 10 25 50 75 90 95 99 100. (Upstream's doc
                    says 01; its code uses 05.)
  isol-thr=FRAC (0.9) the isolation that percentile must reach.
  retries=N (1)     how often a failed storage sub-bench is retried.
  allow-fail=BOOL (false) skip a QoS run whose storage fails instead of
                    ending the bench.
  ignore-min-perf[=BOOL] (false) run rungs that would otherwise be
                    skipped as too slow.
Global options, not properties, choose the memory profile
(--mem-profile); there is no profile ladder.

Each later group is one QoS run, applied over the base QoS:
  rpct=F, wpct=F    read/write completion-latency percentile io.cost
                    watches (0: that direction does not steer vrate).
  rlat=N, wlat=N    the latency (µs) above which that percentile marks
                    the device saturated and vrate is lowered.
  min=F, max=F      vrate bounds, percent of the model (100: the model
                    as measured); min = max pins vrate.
  vrate=F           shorthand for min=F,max=F.

What the numbers mean (per run):
  vrate distribution  how far io.cost actually scaled the model during
                      the run (p00 ... p100, mean, stdev).
  MOF     memory offloading factor, from storage: hashd's footprint
          over the memory it was left, at the largest footprint the
          device could keep within the latency target; printed as
          MOF=F@PROFILE(Rx), R being the ratio to the baseline's MOF.
  aMOF    adjusted MOF, from mem-hog-tune: the same factor at the
          largest footprint that could also be protected from the hog
          (probed from storage's size down to just below the memory
          share); never above MOF. FAIL: no probed size was protected.
  isol-PP the chosen isolation percentile of the final mem-hog-tune
          probe: hashd's request rate under the hog over its target.
  lat-imp hashd's latency rise over its baseline, mean:stdev.
  work_csv share of the IO capacity the throttled hog left unused that
          others still used (work conservation).
  missing share of hashd's requests not served (storage).
The summary adds the read and write latency tables: per run, each
percentile's mean:stdev/max over the run's one-second windows.
";

/// What `doc iocost-tune` prints.
pub const TUNE_DOC: &str = "\
iocost-tune: turns an iocost-qos result into io.cost QoS settings.

Status in rackbench: it solves on the journal's latest completed
iocost-qos result (rackbench's or upstream's); without one, iocost-qos
runs first, nested, as upstream.
Its system requirements are iocost-qos' (as upstream), so a host
without io.cost needs --force even to solve. `format` draws each
figure's graph in text, as upstream (rackbench's own text charts, so the
cells and ticks differ from upstream's plotlib); `format
iocost-tune:pdf[=PATH]` writes upstream's pdf (cover page, then the
graphs six to a page; printed by headless Chromium where upstream uses
ImageMagick and ghostscript), `pdf-keep` keeping its sources in the
current directory; `format iocost-tune:hwdb` (or hwdb-fwrev, high-level)
prints upstream's hwdb entry (or summary) alone. `solve SPEC` runs the solve step again on a stored
result; `merge SOURCE...` pools the points of several files' results
(see docs/resctl.md). Two places follow upstream's comments, not its code: the
one-peak check (aMOF) compares values, and a slope next to a flat part
is fitted to the points between its hinges; the write-latency remark
judges write means.

What upstream does. It reads the journal's latest iocost-qos result
(running iocost-qos:dither,vrate-max=125.0,vrate-intvs=25 first when
there is none), plots each metric against vrate, fits a curve through
the noisy points (flat, rising, then flat again: the two bends are the
left and right inflection points), and solves QoS rules against the
fitted curves.

Metrics (data selectors), against vrate:
  mof         memory offloading factor (see doc iocost-qos).
  amof        adjusted MOF: the factor that can also be protected.
  amof-delta  MOF minus aMOF: how far a footprint sized to saturate the
              device is from one that can be protected.
  isol, isol-mean, isol-PP (PP a percentile, or max)
              isolation: hashd's rps under the hog over its target;
              below isol-thr (0.9) even the smallest probe failed.
  lat-imp     hashd's latency rise over the baseline, as a fraction.
  work-csv    IO capacity left by the throttled hog that others used.
  missing     share of hashd's requests not served.
  rlat-L[-T], wlat-L[-T]
              read/write completion latency: percentile L (00 ... 100
              or max) of each second, and percentile T (or mean, the
              default, or max) of those over the run.
By default mof, amof, amof-delta, isol, lat-imp, work-csv and the p50
and p99 latencies (mean, p99 and max over time) are plotted.

Spec: iocost-tune[:GROUP1][:RULE]...
First group: scale-min=FRAC (1%), scale-max=FRAC (100%): the vrate
range the solutions may use (0 < scale-min < scale-max); and any data
selector above, without a value, to add its graph.
Each later group is a solution rule: name=NAME and one target:
  mof=max, amof=max, amof=max-vrate, amof-delta=min,
  isolated-bandwidth, rlat-L=Q or wlat-L=Q (Q: q1 ... q4, a quarter of
  that latency's spread, or LO-HI fractions), or vrate=LO-HI with
  optional rpct=P, wpct=P.
Without rules, the default solutions:
  naive               the model at 100%, throttled down to 75% by p99
                      read/write latency;
  bandwidth           the highest vrate at which hashd stays isolated
                      (isol at or above the threshold);
  isolated-bandwidth  the vrate, between isolation and bandwidth, with
                      the largest protectable footprint (aMOF);
  isolation           the highest vrate with the smallest aMOF-delta:
                      sizing for saturation comes closest to sizing for
                      protection;
  rlat-99-q1 ... q4   each a quarter of the p99 read latency's spread,
                      q1 from 100% vrate down to its 75% point, and on.
";

const QOS_KEYS: &[&str] = &[
    "vrate-min",
    "vrate-max",
    "vrate-intvs",
    "dither",
    "storage-base-loops",
    "storage-loops",
    "isol-pct",
    "isol-thr",
    "retries",
    "allow-fail",
    "ignore-min-perf",
];

/// The isolation percentiles protection's study reports.
use crate::bench::protection::study::PCT_KEYS as ISOL_PCTS;

/// The closest of `allowed` to `key`: within an edit distance of 2, or
/// else one that contains `key` (or is contained in it), nearest first.
pub fn closest<'a>(key: &str, allowed: &[&'a str]) -> Option<&'a str> {
    crate::spec::closest(key, allowed).or_else(|| {
        allowed
            .iter()
            .filter(|a| key.len() >= 3 && (a.contains(key) || key.contains(**a)))
            .min_by_key(|a| strsim::levenshtein(key, a))
            .copied()
    })
}

/// The error for an unknown property key of group `group` (0-based),
/// naming the closest allowed key.
pub fn unknown_key(spec: &JobSpec, group: usize, key: &str, allowed: &[&str]) -> String {
    let mut expected = format!("expected one of {}", allowed.join(", "));
    if let Some(s) = closest(key, allowed) {
        expected.push_str(&format!("; did you mean \"{s}\"?"));
    }
    SpecError::UnknownKey {
        spec: spec.to_string(),
        kind: spec.kind.clone(),
        key: key.to_string(),
        group_nr: group + 1,
        expected,
    }
    .to_string()
}

fn num<T: std::str::FromStr>(group: usize, k: &str, v: &str, what: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("group {}: {k}={v:?}: expected {what}", group + 1))
}

fn boolean(group: usize, k: &str, v: &str) -> Result<bool, String> {
    match v {
        "" | "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!(
            "group {}: {k}={v:?}: expected true or false",
            group + 1
        )),
    }
}

/// The properties of an `iocost-qos` spec, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct QosProps {
    pub vrate_min: f64,
    pub vrate_max: f64,
    pub vrate_intvs: u32,
    /// `dither` given; `Some(F)` with a distance.
    pub dither: Option<Option<f64>>,
    pub storage_base_loops: u32,
    pub storage_loops: u32,
    /// `storage-KEY=V`, passed on to each storage sub-bench.
    pub storage: BTreeMap<String, String>,
    pub isol_pct: String,
    pub isol_thr: f64,
    pub retries: u32,
    pub allow_fail: bool,
    pub ignore_min_perf: bool,
    /// The explicit QoS groups (the second group on).
    pub groups: Vec<QosOvr>,
}

impl QosProps {
    /// Checks every property of `spec`.
    pub fn parse(spec: &JobSpec) -> Result<QosProps, crate::Error> {
        let mut p = QosProps {
            vrate_min: 0.0,
            vrate_max: 100.0,
            vrate_intvs: 0,
            dither: None,
            storage_base_loops: 3,
            storage_loops: 1,
            storage: BTreeMap::new(),
            isol_pct: "05".into(),
            isol_thr: 0.9,
            retries: 1,
            allow_fail: false,
            ignore_min_perf: false,
            groups: Vec::new(),
        };
        let storage_keys: Vec<String> = crate::bench::storage::KEYS
            .iter()
            .filter(|k| !matches!(**k, "apply" | "commit" | "loops"))
            .map(|k| format!("storage-{k}"))
            .collect();
        let mut allowed: Vec<&str> = QOS_KEYS.to_vec();
        allowed.extend(storage_keys.iter().map(String::as_str));
        for (k, v) in spec.props.first().into_iter().flatten() {
            let g = 0;
            match k.as_str() {
                "vrate-min" => {
                    p.vrate_min = num(g, k, v, "a number (percent)").map_err(crate::Error::Input)?
                }
                "vrate-max" => {
                    p.vrate_max = num(g, k, v, "a number (percent)").map_err(crate::Error::Input)?
                }
                "vrate-intvs" => {
                    p.vrate_intvs = num(g, k, v, "a count").map_err(crate::Error::Input)?
                }
                "dither" => {
                    p.dither = Some(if v.is_empty() {
                        None
                    } else {
                        Some(
                            num(g, k, v, "a distance in percent, or no value")
                                .map_err(crate::Error::Input)?,
                        )
                    })
                }
                "storage-base-loops" => {
                    p.storage_base_loops = num(g, k, v, "a count").map_err(crate::Error::Input)?
                }
                "storage-loops" => {
                    p.storage_loops = num(g, k, v, "a count").map_err(crate::Error::Input)?
                }
                "isol-pct" => {
                    if !ISOL_PCTS.contains(&v.as_str()) {
                        return Err(crate::Error::Input(format!(
                            "group 1: isol-pct={v:?}: expected one of {}",
                            ISOL_PCTS.join(" ")
                        )));
                    }
                    p.isol_pct = v.clone();
                }
                "isol-thr" => {
                    p.isol_thr = parse_frac(v)
                        .map_err(|e| crate::Error::Input(format!("group 1: isol-thr: {e}")))?
                }
                "retries" => p.retries = num(g, k, v, "a count").map_err(crate::Error::Input)?,
                "allow-fail" => p.allow_fail = boolean(g, k, v).map_err(crate::Error::Input)?,
                "ignore-min-perf" => {
                    p.ignore_min_perf = boolean(g, k, v).map_err(crate::Error::Input)?
                }
                k if storage_keys.iter().any(|s| s == k) => {
                    p.storage
                        .insert(k.trim_start_matches("storage-").to_string(), v.clone());
                }
                k => return Err(crate::Error::Input(unknown_key(spec, 0, k, &allowed))),
            }
        }
        let finite = |x: f64| x.is_finite() && x >= 0.0;
        if !finite(p.vrate_min) || !finite(p.vrate_max) || p.vrate_min >= p.vrate_max {
            return Err(crate::Error::Input(format!(
                "invalid vrate range [{}, {}]: expected 0 <= vrate-min < vrate-max",
                p.vrate_min, p.vrate_max
            )));
        }
        if p.vrate_min > 0.0 && p.vrate_intvs == 1 {
            return Err(crate::Error::Input(
                "vrate-intvs=1 with vrate-min > 0: expected at least 2 intervals to span [vrate-min, vrate-max]"
                    .into(),
            ));
        }
        for (i, g) in spec.props.iter().enumerate().skip(1) {
            let mut o = QosOvr::default();
            for (k, v) in g {
                match o.set_key(k, v) {
                    Ok(true) => {}
                    Ok(false) => {
                        return Err(crate::Error::Input(unknown_key(spec, i, k, QOS_OVR_KEYS)));
                    }
                    Err(e) => {
                        return Err(crate::Error::Input(format!(
                            "group {}: {k}={v:?}: {e}",
                            i + 1
                        )));
                    }
                }
            }
            if let (Some(a), Some(b)) = (o.min, o.max)
                && a > b
            {
                return Err(crate::Error::Input(format!(
                    "group {}: min={a} is above max={b}: expected min <= max",
                    i + 1
                )));
            }
            p.groups.push(o);
        }
        Ok(p)
    }

    /// The ladder's interval (percent) and the shift a random dither
    /// starts from (half an interval down when vrate-min is 0), as
    /// upstream draws the dither: uniform in +-interval/2, plus the shift.
    pub fn click(&self) -> (f64, f64) {
        let intvs = if self.groups.is_empty() && self.vrate_intvs == 0 {
            5
        } else {
            self.vrate_intvs
        };
        if intvs == 0 {
            return (0.0, 0.0);
        }
        if self.vrate_min == 0.0 {
            let c = self.vrate_max / f64::from(intvs);
            (c, -c / 2.0)
        } else {
            (
                (self.vrate_max - self.vrate_min) / f64::from(intvs.max(2) - 1),
                0.0,
            )
        }
    }

    /// The runs in order: iocost off, the explicit groups, then the vrate
    /// ladder shifted by `dither_offset` (0 without dither; upstream
    /// draws it at random).
    pub fn ladder(&self, dither_offset: f64) -> Vec<QosOvr> {
        let mut runs = vec![QosOvr {
            off: true,
            ..Default::default()
        }];
        runs.extend(self.groups.iter().cloned());
        let intvs = if self.groups.is_empty() && self.vrate_intvs == 0 {
            5
        } else {
            self.vrate_intvs
        };
        if intvs == 0 {
            return runs;
        }
        let (mut lo, mut hi) = (self.vrate_min, self.vrate_max);
        let click = if lo == 0.0 {
            let c = hi / f64::from(intvs);
            lo = c;
            c
        } else {
            (hi - lo) / f64::from(intvs - 1)
        };
        if self.dither.is_some() {
            lo += dither_offset;
            hi += dither_offset;
        }
        lo = lo.max(1.0);
        let mut v = hi;
        // At most intvs + 1 rungs, whatever rounding does.
        for _ in 0..=intvs {
            if v <= lo - 0.001 {
                break;
            }
            let r = round2_as_printed(v);
            runs.push(QosOvr {
                min: Some(r),
                max: Some(r),
                ..Default::default()
            });
            v -= click;
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::spec::parse;

    fn vrates(spec: &str) -> Vec<Option<f64>> {
        let p = QosProps::parse(&parse(spec).unwrap()).unwrap();
        p.ladder(0.0).iter().map(|o| o.min).collect()
    }

    #[test]
    fn default_ladder_is_off_then_100_to_20() {
        assert_eq!(
            vrates("iocost-qos"),
            vec![
                None,
                Some(100.0),
                Some(80.0),
                Some(60.0),
                Some(40.0),
                Some(20.0)
            ]
        );
        assert!(
            QosProps::parse(&parse("iocost-qos").unwrap())
                .unwrap()
                .ladder(0.0)[0]
                .off
        );
    }

    #[test]
    fn ladder_with_min_includes_both_ends() {
        assert_eq!(
            vrates("iocost-qos:vrate-min=5,vrate-max=10,vrate-intvs=6"),
            vec![
                None,
                Some(10.0),
                Some(9.0),
                Some(8.0),
                Some(7.0),
                Some(6.0),
                Some(5.0)
            ]
        );
    }

    #[test]
    fn explicit_groups_replace_the_default_ladder() {
        let p = QosProps::parse(&parse("iocost-qos::min=75,max=75:vrate=50").unwrap()).unwrap();
        let l = p.ladder(0.0);
        assert_eq!(l.len(), 3);
        assert_eq!(l[1].max, Some(75.0));
        assert_eq!((l[2].min, l[2].max), (Some(50.0), Some(50.0)));
        assert_eq!(l[2].to_string(), "min=50.00 max=50.00");
    }

    #[test]
    fn dither_shifts_the_ladder_and_floors_at_one() {
        let p = QosProps::parse(&parse("iocost-qos:dither=2").unwrap()).unwrap();
        assert_eq!(p.dither, Some(Some(2.0)));
        let l: Vec<_> = p.ladder(-19.5).iter().filter_map(|o| o.min).collect();
        assert_eq!(l, vec![80.5, 60.5, 40.5, 20.5]);
        // Without dither the offset is ignored.
        let p = QosProps::parse(&parse("iocost-qos").unwrap()).unwrap();
        assert_eq!(p.ladder(-19.5).len(), 6);
    }

    #[test]
    fn qos_props_are_checked() {
        let p = QosProps::parse(
            &parse("iocost-qos:storage-base-loops=1,storage-loops=2,isol-pct=01,isol-thr=85%,retries=0,allow-fail=true,ignore-min-perf,storage-rps-max=500").unwrap(),
        )
        .unwrap();
        assert_eq!((p.storage_base_loops, p.storage_loops), (1, 2));
        assert_eq!(p.isol_pct, "01");
        assert!((p.isol_thr - 0.85).abs() < 1e-9);
        assert!(p.allow_fail && p.ignore_min_perf);
        assert_eq!(p.storage.get("rps-max").map(String::as_str), Some("500"));

        let e = |s: &str| QosProps::parse(&parse(s).unwrap()).unwrap_err();
        assert!(
            e("iocost-qos:base-loops=1")
                .to_string()
                .contains("did you mean \"storage-base-loops\"")
        );
        assert!(
            e("iocost-qos:loops=1")
                .to_string()
                .contains("did you mean \"storage-loops\"")
        );
        assert!(
            e("iocost-qos:vrate-mx=50")
                .to_string()
                .contains("did you mean \"vrate-max\"")
        );
        let m = e("iocost-qos:mem-profile-ladder=1");
        assert!(
            m.to_string()
                .contains("unknown property key \"mem-profile-ladder\""),
            "{m}"
        );
        assert!(m.to_string().contains("expected one of vrate-min"), "{m}");
        assert!(
            e("iocost-qos:vrate-min=50,vrate-max=40")
                .to_string()
                .contains("invalid vrate range")
        );
        assert!(e("iocost-qos:isol-pct=3").to_string().contains("isol-pct"));
        assert!(
            e("iocost-qos:storage-bogus=1")
                .to_string()
                .contains("\"storage-bogus\"")
        );
        assert!(
            e("iocost-qos::rlatt=5")
                .to_string()
                .contains("did you mean \"rlat\"")
        );
        assert!(
            e("iocost-qos::min=80,max=60")
                .to_string()
                .contains("min=80 is above max=60")
        );
        assert!(
            e("iocost-qos:vrate-intvs=x")
                .to_string()
                .contains("vrate-intvs=\"x\": expected a count")
        );
    }

    #[test]
    fn closest_prefers_edit_distance_then_containment() {
        assert_eq!(closest("vrate-mn", QOS_KEYS), Some("vrate-min"));
        assert_eq!(closest("base-loops", QOS_KEYS), Some("storage-base-loops"));
        assert_eq!(closest("xyz", QOS_KEYS), None);
    }
}
