//! The `iocost-qos` bench: what it needs of the host (also iocost-tune's),
//! its run ([`super::run`]) and formatting ([`super::format`]); its spec
//! is checked by [`super::QosProps`].

use crate::bench::common::{Bench, BenchInfo, Ctx, FormatArgs, Outcome};
use crate::bench::iocost_qos::{QOS_DOC, QosProps};
use crate::journal::JobData;
use crate::spec::JobSpec;
use crate::sys::sysreqs::SysReq;

/// What both benches cannot do without: the io controller and io.cost.
pub(crate) const HARD: &[SysReq] = &[SysReq::Controllers, SysReq::IoCost];
/// What their sub-benches (storage, protection) would check.
pub(crate) const SOFT: &[SysReq] = &[
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

static INFO: BenchInfo = BenchInfo {
    kind: "iocost-qos",
    about: "MOF and aMOF along a ladder of io.cost QoS settings",
    doc: QOS_DOC,
    hard: HARD,
    soft: SOFT,
};

/// The `iocost-qos` bench.
pub struct IoCostQosBench;

impl Bench for IoCostQosBench {
    fn info(&self) -> &'static BenchInfo {
        &INFO
    }
    fn check(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        QosProps::parse(spec).map(|_| ())
    }
    fn run(&self, spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
        crate::bench::iocost_qos::run::run(spec, ctx)
    }
    fn restudy(&self, d: &JobData) -> Option<Result<serde_json::Value, crate::Error>> {
        Some(crate::bench::iocost_qos::run::restudy(d))
    }
    fn format(&self, d: &JobData, full: bool) -> Result<String, crate::Error> {
        crate::bench::iocost_qos::format::format(d, full, 0)
    }
    fn format_rstat(&self, d: &JobData, full: bool, rstat: u8) -> Result<String, crate::Error> {
        crate::bench::iocost_qos::format::format(d, full, rstat)
    }
    fn check_format_props(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        crate::bench::iocost_qos::format::sub_full(spec).map(|_| ())
    }
    fn format_props(&self, d: &JobData, a: &FormatArgs) -> Result<(String, bool), crate::Error> {
        let sub = crate::bench::iocost_qos::format::sub_full(&JobSpec {
            props: a.props.to_vec(),
            ..d.spec.clone()
        })?;
        crate::bench::iocost_qos::format::format_sub(d, a.full, a.rstat, sub).map(|t| (t, false))
    }
    fn metrics(&self, _d: &JobData, _m: &mut crate::bench::common::JobMetrics) {}
}
