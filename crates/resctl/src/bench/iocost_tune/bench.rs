//! The `iocost-tune` bench: it solves on the journal's latest iocost-qos
//! result ([`super`]) and needs of the host what iocost-qos does.

use crate::bench::common::{Bench, BenchInfo, Ctx, FormatArgs, Outcome};
use crate::bench::iocost_qos::TUNE_DOC;
use crate::bench::iocost_qos::bench::{HARD, SOFT};
use crate::bench::iocost_tune::{self, TuneJob, TuneResult, run_on, tune_rules};
use crate::journal::JobData;
use crate::spec::JobSpec;

/// The iocost-tune result of `d`; an error names the field that does not
/// fit upstream's.
fn tune_result(d: &JobData) -> Result<TuneResult, String> {
    crate::bench::iocost_qos::format::read(
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

static INFO: BenchInfo = BenchInfo {
    kind: "iocost-tune",
    about: "io.cost QoS solutions from the journal's iocost-qos result",
    doc: TUNE_DOC,
    hard: HARD,
    soft: SOFT,
};

/// The `iocost-tune` bench.
pub struct IoCostTuneBench;

impl Bench for IoCostTuneBench {
    fn info(&self) -> &'static BenchInfo {
        &INFO
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
        opts: &crate::bench::common::Options,
    ) -> Option<Result<(serde_json::Value, Option<serde_json::Value>), crate::Error>> {
        Some((|| {
            let mut job = TuneJob::parse(&d.spec)?;
            // The fit asked for, else the one the result was solved with.
            let mut rec: Option<iocost_tune::TuneRecord> = d
                .record
                .as_ref()
                .map(|r| crate::bench::iocost_qos::format::read(r, "iocost-tune", "record"))
                .transpose()?;
            job.fit = opts
                .tune_fit
                .or_else(|| rec.as_ref().map(|r| r.fit))
                .unwrap_or_default();
            let mut res: TuneResult =
                tune_result(d).map_err(|e| crate::Error::Input(e.to_string()))?;
            for n in iocost_tune::solve(&job, &mut res)? {
                eprintln!("iocost-tune: {n}");
            }
            res.remarks = iocost_tune::remarks(&job, &res);
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
        iocost_tune::format_props(spec).map(|_| ())
    }
    fn format_props(&self, d: &JobData, a: &FormatArgs) -> Result<(String, bool), crate::Error> {
        let f = iocost_tune::format_props(&JobSpec {
            props: a.props.to_vec(),
            ..d.spec.clone()
        })?;
        let job = TuneJob::parse(&d.spec)?;
        if let Some(pdf) = &f.pdf {
            let res: TuneResult = tune_result(d).map_err(|e| crate::Error::Input(e.to_string()))?;
            let path = crate::bench::iocost_tune::graph::pdf_path(pdf, a.result)?;
            let cover = format!("{}{}", a.head, iocost_tune::format(&job, &res));
            let si = crate::bench::knobs::JobSysInfo::from_json(&d.sysinfo)?;
            let model = si.sysreqs_report.unwrap_or_default().scr_dev_model;
            crate::bench::iocost_tune::graph::write_pdf(&path, &cover, &res, &model, f.pdf_keep)?;
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
            return Ok((iocost_tune::format_hwdb(&res, &rep.scr_dev_model, fw), true));
        }
        Ok((iocost_tune::format_high_level(&job, &res), true))
    }
    fn format(&self, d: &JobData, full: bool) -> Result<String, crate::Error> {
        let job = TuneJob::parse(&d.spec)?;
        let res: TuneResult = tune_result(d).map_err(|e| crate::Error::Input(e.to_string()))?;
        // Upstream draws the graphs in text under `format`.
        let mut out = if full {
            crate::bench::iocost_tune::graph::format_text(&res)
        } else {
            String::new()
        };
        out.push_str(&iocost_tune::format(&job, &res));
        Ok(out)
    }
    fn metrics(&self, _d: &JobData, _m: &mut crate::bench::common::JobMetrics) {}
}
