//! The `iocost-qos` and `iocost-tune` benches: their system requirements
//! are declared, running them is refused with the reason (io.cost missing
//! names the sysreq), and upstream's iocost-qos results are formatted by
//! [`super::qos_format`]. Their specs are checked by [`super::iocost_qos`].

use super::common::{Bench, Ctx, Outcome};
use super::iocost_qos::{QOS_DOC, QosProps, TUNE_DOC};
use super::tune::tune_rules;
use crate::journal::JobData;
use crate::spec::JobSpec;
use crate::sys::sysreqs::SysReq;

/// Why `run` cannot go on, on this host: io.cost missing names the
/// sysreq; otherwise running is not implemented yet.
fn refuse(kind: &str, what: &str, ctx: &Ctx) -> String {
    let qos = ctx
        .cgroups
        .v2_root()
        .map(|r| r.join("io.cost.qos"))
        .filter(|p| p.exists());
    match qos {
        None => format!(
            "{kind}: sysreq IoCost missed (no io.cost.qos in a cgroup2 root with the io controller): \
             {kind} cannot run without io.cost, even with --force"
        ),
        Some(p) => format!(
            "{kind}: {} exists, but running {what} is not implemented yet in rackbench",
            p.display()
        ),
    }
}

/// What both benches cannot do without: the io controller and io.cost.
const HARD: &[SysReq] = &[SysReq::Controllers, SysReq::IoCost];
/// What their sub-benches (storage, protection) would check.
const SOFT: &[SysReq] = &[
    SysReq::Freezer,
    SysReq::MemCgRecursiveProt,
    SysReq::MemShadowInodeProt,
    SysReq::IoCostVer,
    SysReq::NoOtherIoControllers,
    SysReq::AnonBalance,
    SysReq::Btrfs,
    SysReq::BtrfsAsyncDiscard,
    SysReq::NoCompositeStorage,
    SysReq::IoSched,
    SysReq::NoWbt,
    SysReq::SwapOnScratch,
    SysReq::Swap,
    SysReq::Oomd,
    SysReq::NoSysOomd,
    SysReq::HostCriticalServices,
];

/// The `iocost-qos` bench.
pub struct IoCostQosBench;

impl Bench for IoCostQosBench {
    fn kind(&self) -> &'static str {
        "iocost-qos"
    }
    fn about(&self) -> &'static str {
        "MOF and aMOF along a ladder of io.cost QoS settings (spec checked, upstream's results formatted; running not implemented yet)"
    }
    fn doc(&self) -> &'static str {
        QOS_DOC
    }
    fn hard(&self) -> &'static [SysReq] {
        HARD
    }
    fn soft(&self) -> &'static [SysReq] {
        SOFT
    }
    fn check(&self, spec: &JobSpec) -> Result<(), String> {
        QosProps::parse(spec).map(|_| ())
    }
    fn run(&self, spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, String> {
        let p = QosProps::parse(spec)?;
        let runs: Vec<String> = p.ladder(0.0).iter().map(|o| o.to_string()).collect();
        Err(refuse(
            "iocost-qos",
            &format!("its {} QoS runs ({})", runs.len(), runs.join("; ")),
            ctx,
        ))
    }
    fn format(&self, d: &JobData, full: bool) -> Result<String, String> {
        super::qos_format::format(d, full, 0)
    }
    fn format_rstat(&self, d: &JobData, full: bool, rstat: u8) -> Result<String, String> {
        super::qos_format::format(d, full, rstat)
    }
    fn metrics(&self, _d: &JobData, _m: &mut super::common::JobMetrics) {}
}

/// The `iocost-tune` bench.
pub struct IoCostTuneBench;

impl Bench for IoCostTuneBench {
    fn kind(&self) -> &'static str {
        "iocost-tune"
    }
    fn about(&self) -> &'static str {
        "io.cost QoS solutions from an iocost-qos result (spec checked; running not implemented yet)"
    }
    fn doc(&self) -> &'static str {
        TUNE_DOC
    }
    fn hard(&self) -> &'static [SysReq] {
        HARD
    }
    fn soft(&self) -> &'static [SysReq] {
        SOFT
    }
    fn check(&self, spec: &JobSpec) -> Result<(), String> {
        tune_rules(spec).map(|_| ())
    }
    fn run(&self, spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, String> {
        let rules = tune_rules(spec)?;
        Err(refuse(
            "iocost-tune",
            &format!("iocost-qos and solving its rules ({})", rules.join(", ")),
            ctx,
        ))
    }
    fn format(&self, _d: &JobData, _full: bool) -> Result<String, String> {
        Err("formatting iocost-tune results is not implemented yet".into())
    }
    fn metrics(&self, _d: &JobData, _m: &mut super::common::JobMetrics) {}
}
