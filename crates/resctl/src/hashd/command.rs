//! `rackbench resctl hashd`: rd-hashd's command line. The entry point
//! and thin dispatch: `cli` parses, `setup` readies the engine, `drive`
//! runs it, and `render` prints the record (`record`).

use super::drive::{Drive, DriveStart};
use super::engine::Hashd;
use super::log::HashLog;
use super::setup::{Ctx, StartParams};
use crate::fmt::format_size;
use harness::Cancel;
use std::path::Path;

pub use super::cli::{HashdArgs, help, parse};
pub use super::record::{
    BenchRecord, BenchResult, HashdMetrics, HashdRecord, HashdSummary, MemResult, ProbeMetrics,
    ProbeRecord, SingleResult,
};

/// How `rackbench resctl hashd ARGS` ended.
#[derive(Debug, Clone, PartialEq)]
// One value per run, moved once: boxing the record would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum HashdEnd {
    /// `--prepare-config` or `--prepare`: files written, nothing measured.
    Helper,
    /// A run: its record, and whether it succeeded (neither stopped nor
    /// failed).
    Measured(HashdRecord, bool),
}

/// True when `argv` (after `hashd`) asks for one of hashd's helper
/// commands, which measure nothing.
pub fn is_helper(argv: &[String]) -> bool {
    parse(argv).is_ok_and(|a| a.prepare_config || a.prepare || a.version)
}

/// Runs `rackbench resctl hashd ARGS`.
pub fn run(argv: &[String], cancel: &Cancel) -> anyhow::Result<HashdEnd> {
    let a = parse(argv)?;
    if a.version {
        // As upstream's clap prints it.
        println!("rd-hashd {}", crate::full_version());
        return Ok(HashdEnd::Helper);
    }
    let (ctx, start) = Ctx::setup(&a)?;
    let StartParams {
        file: params_file,
        params,
        mut base,
    } = start;
    let Some((files, prepared)) = ctx.prepare_files()? else {
        return Ok(HashdEnd::Helper);
    };
    let single_size = ctx.single_start_size(&files, &mut base)?;
    let start_params = ctx.start_params(&base, &params, single_size);
    let mut log = match &ctx.args.log_dir {
        Some(d) => Some(
            HashLog::start(
                Path::new(d),
                1 << 30,
                ctx.args.log_size,
                start_params.log_padding(),
            )
            .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    let preload_files = files.clone();
    let mut hashd = Hashd::new(ctx.args.clone(), start_params.clone(), files, ctx.nr_cpus)
        .map_err(anyhow::Error::msg)?;
    let (file, anon) = super::engine::footprint(&ctx.args, hashd.files.size(), &start_params);
    ctx.out.say(&format!(
        "Starting hasher (maxcon={} lat={:.1}ms rps={} file={} anon={})",
        start_params.concurrency_max,
        start_params.lat_target * 1000.0,
        start_params.rps_target,
        format_size(file as f64),
        format_size(anon as f64)
    ));
    let mut drive = Drive::new(
        &ctx,
        cancel,
        DriveStart {
            base,
            params_file,
            padding: log.as_ref().map(|l| l.padding_handle()),
            preload_files,
            single_size,
            period: start_params.control_period,
        },
        &mut hashd,
    )?;
    let result = hashd.run(
        &mut |c| {
            if let Some(l) = log.as_mut() {
                l.log(c.digest, c.latency);
            }
        },
        &mut |s| drive.tick(s),
    );
    let dropped = log.as_ref().map(|l| l.dropped).unwrap_or(0);
    if let Some(l) = log.take() {
        l.finish().map_err(anyhow::Error::msg)?;
    }
    if let Some(e) = drive.report_error.take() {
        anyhow::bail!(e);
    }
    let record = drive.record(
        &params,
        hashd.files.size(),
        result.map_err(String::from),
        &prepared,
        dropped,
    )?;
    let success = record.success();
    Ok(HashdEnd::Measured(record, success))
}
