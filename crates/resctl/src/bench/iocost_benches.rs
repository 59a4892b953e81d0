//! The `iocost-qos` and `iocost-tune` benches: their system requirements
//! are declared, running iocost-qos is refused with the reason (io.cost
//! missing names the sysreq), iocost-tune solves on the journal's latest
//! iocost-qos result ([`super::tune`]), and upstream's iocost-qos results
//! are formatted by [`super::qos_format`]. Their specs are checked by
//! [`super::iocost_qos`].

use super::common::{Bench, Ctx, FormatArgs, Outcome};
use super::iocost_qos::{QOS_DOC, QosProps, TUNE_DOC};
use super::tune::{self, TuneJob, TuneResult, run_on, tune_rules};
use crate::journal::JobData;
use crate::spec::JobSpec;
use crate::sys::sysreqs::SysReq;

/// The iocost-tune result of `d`; an error names the field that does not
/// fit upstream's.
fn tune_result(d: &JobData) -> Result<TuneResult, String> {
    super::qos_format::read(
        d.result.as_ref().unwrap_or(&serde_json::Value::Null),
        "iocost-tune",
        "result",
    )
    .map_err(String::from)
}

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
        "MOF and aMOF along a ladder of io.cost QoS settings"
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
    fn check(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        QosProps::parse(spec).map(|_| ())
    }
    fn run(&self, spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
        super::qos_run::run(spec, ctx)
    }
    fn restudy(&self, d: &JobData) -> Option<Result<serde_json::Value, crate::Error>> {
        Some(super::qos_run::restudy(d))
    }
    fn format(&self, d: &JobData, full: bool) -> Result<String, crate::Error> {
        super::qos_format::format(d, full, 0)
    }
    fn format_rstat(&self, d: &JobData, full: bool, rstat: u8) -> Result<String, crate::Error> {
        super::qos_format::format(d, full, rstat)
    }
    fn check_format_props(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        super::qos_format::sub_full(spec).map(|_| ())
    }
    fn format_props(&self, d: &JobData, a: &FormatArgs) -> Result<(String, bool), crate::Error> {
        let sub = super::qos_format::sub_full(&JobSpec {
            props: a.props.to_vec(),
            ..d.spec.clone()
        })?;
        super::qos_format::format_sub(d, a.full, a.rstat, sub).map(|t| (t, false))
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
        "io.cost QoS solutions from the journal's iocost-qos result"
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
    fn check(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        tune_rules(spec).map(|_| ())
    }
    fn run(&self, spec: &JobSpec, ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
        let mut job = TuneJob::parse(spec)?;
        job.fit = ctx.opts.tune_fit.unwrap_or_default();
        // As upstream: the journal's latest iocost-qos result, or else a
        // nested iocost-qos run, which needs io.cost.
        let Some(qos) = ctx.qos.as_ref() else {
            let names: Vec<&str> = job.rules.iter().map(|r| r.name.as_str()).collect();
            return Err(crate::Error::Input(refuse(
                "iocost-tune",
                &format!(
                    "iocost-qos (the journal has no iocost-qos result to solve on) and solving its rules ({})",
                    names.join(", ")
                ),
                ctx,
            )));
        };
        eprintln!(
            "iocost-tune: solving on the journal's iocost-qos result ({})",
            qos.spec
        );
        let (rec, res, notes) = run_on(&job, qos)?;
        ctx.forward_sysinfo = Some(qos.sysinfo.clone());
        for n in notes {
            eprintln!("iocost-tune: {n}");
        }
        Ok(Outcome::Done(
            serde_json::to_value(&rec)
                .map_err(|e| e.to_string())
                .map_err(|e| crate::Error::Input(e.to_string()))?,
            serde_json::to_value(&res)
                .map_err(|e| e.to_string())
                .map_err(|e| crate::Error::Input(e.to_string()))?,
        ))
    }
    fn resolve(
        &self,
        d: &JobData,
        opts: &super::common::Options,
    ) -> Option<Result<(serde_json::Value, Option<serde_json::Value>), crate::Error>> {
        Some((|| {
            let mut job = TuneJob::parse(&d.spec)?;
            // The fit asked for, else the one the result was solved with.
            let mut rec: Option<tune::TuneRecord> = d
                .record
                .as_ref()
                .map(|r| super::qos_format::read(r, "iocost-tune", "record"))
                .transpose()?;
            job.fit = opts
                .tune_fit
                .or_else(|| rec.as_ref().map(|r| r.fit))
                .unwrap_or_default();
            let mut res: TuneResult =
                tune_result(d).map_err(|e| crate::Error::Input(e.to_string()))?;
            for n in tune::solve(&job, &mut res)? {
                eprintln!("iocost-tune: {n}");
            }
            res.remarks = tune::remarks(&job, &res);
            let res = serde_json::to_value(&res)
                .map_err(|e| e.to_string())
                .map_err(|e| crate::Error::Input(e.to_string()))?;
            let rec = match rec.as_mut() {
                Some(r) if r.fit != job.fit => {
                    r.fit = job.fit;
                    Some(
                        serde_json::to_value(&*r)
                            .map_err(|e| e.to_string())
                            .map_err(|e| crate::Error::Input(e.to_string()))?,
                    )
                }
                _ => None,
            };
            Ok((res, rec))
        })())
    }
    fn check_format_props(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        tune::format_props(spec).map(|_| ())
    }
    fn format_props(&self, d: &JobData, a: &FormatArgs) -> Result<(String, bool), crate::Error> {
        let f = tune::format_props(&JobSpec {
            props: a.props.to_vec(),
            ..d.spec.clone()
        })?;
        let job = TuneJob::parse(&d.spec)?;
        if let Some(pdf) = &f.pdf {
            let res: TuneResult = tune_result(d).map_err(|e| crate::Error::Input(e.to_string()))?;
            let path = super::tune_graph::pdf_path(pdf, a.result)?;
            let cover = format!("{}{}", a.head, tune::format(&job, &res));
            let si = crate::bench::knobs::JobSysInfo::from_json(&d.sysinfo)?;
            let model = si.sysreqs_report.unwrap_or_default().scr_dev_model;
            super::tune_graph::write_pdf(&path, &cover, &res, &model, f.pdf_keep)?;
            return Ok((
                format!("Formatted result into {:?}", path.display().to_string()),
                true,
            ));
        }
        if !(f.high_level || f.hwdb || f.hwdb_fwrev) {
            return self.format(d, a.full).map(|t| (t, false));
        }
        let res: TuneResult = tune_result(d).map_err(|e| crate::Error::Input(e.to_string()))?;
        if f.hwdb || f.hwdb_fwrev {
            let si = crate::bench::knobs::JobSysInfo::from_json(&d.sysinfo)?;
            let rep = si.sysreqs_report.unwrap_or_default();
            let fw = f.hwdb_fwrev.then_some(rep.scr_dev_fwrev.as_str());
            return Ok((tune::format_hwdb(&res, &rep.scr_dev_model, fw), true));
        }
        Ok((tune::format_high_level(&job, &res), true))
    }
    fn format(&self, d: &JobData, full: bool) -> Result<String, crate::Error> {
        let job = TuneJob::parse(&d.spec)?;
        let res: TuneResult = tune_result(d).map_err(|e| crate::Error::Input(e.to_string()))?;
        // Upstream draws the graphs in text under `format`.
        let mut out = if full {
            super::tune_graph::format_text(&res)
        } else {
            String::new()
        };
        out.push_str(&tune::format(&job, &res));
        Ok(out)
    }
    fn metrics(&self, _d: &JobData, _m: &mut super::common::JobMetrics) {}
}
