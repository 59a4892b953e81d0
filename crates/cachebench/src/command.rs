//! `rackbench cachebench --json_test_config FILE` (or a binary named
//! `cachebench`): loads CacheLib's config, builds the cache and the
//! workload, runs the stressor with progress lines and prints upstream's
//! report, then hands the figures to the harness.

use crate::cli::{Args, parse};
use crate::drive::{
    Drive, Eta, add_instances, append_reports, first_op_secs, open_stats_files, write_charts,
};
use crate::output;
use crate::record::CacheBenchRecord;
use crate::render::{aborted, record_passed, write_closing, write_record};
use crate::setup::{
    Setup, check_generator, dram_config, load, nvm_config, rebalance_config, setup_instance, spec,
};
use crate::stressor::Progress;
use harness::{Outcome, Record, RunContext, Workload};
use serde_json::{Map, Value};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The `cachebench` benchmark.
pub struct CacheBench;

/// The version of [`CacheBenchRecord`]; raise it when the record's shape
/// changes.
const RECORD_VERSION: u32 = 2;

impl Workload for CacheBench {
    fn headlines(&self) -> &'static [direction::Headline] {
        crate::directions::HEADLINES
    }

    fn directions(&self) -> &'static [&'static [direction::Rule]] {
        crate::directions::TABLES
    }

    fn charts(&self, record: &Record) -> Vec<harness::page_chart::PageChart> {
        match record.decode::<CacheBenchRecord>(self.name(), RECORD_VERSION) {
            Ok(r) => crate::charts::charts(&r),
            Err(_) => Vec::new(),
        }
    }

    fn history_charts(
        &self,
        job: &str,
        runs: &[&harness::store::RunRow],
    ) -> Vec<harness::page_chart::PageChart> {
        crate::charts::history(job, runs)
    }

    fn name(&self) -> &'static str {
        "cachebench"
    }

    fn description(&self) -> &'static str {
        "CacheBench: a CacheLib-style DRAM + NVM (flash) cache under CacheLib's synthetic and replayed workloads"
    }

    fn upstream(&self) -> &'static str {
        "CacheLib's cachebench"
    }

    fn help(&self) -> String {
        use clap::CommandFactory;
        Args::command().render_long_help().to_string()
    }

    fn command(&self) -> Option<clap::Command> {
        use clap::CommandFactory;
        Some(Args::command())
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        let a = parse(args)?;
        let loaded = load(&a)?;
        for c in &loaded.instances {
            check_generator(c)?;
            if c.test.generator == "replay" && c.test.replay.binary_file_name.is_some() {
                // Converting a trace builds no cache (as upstream).
                continue;
            }
            dram_config(c)?;
            nvm_config(c, a.require_direct_io)?;
            rebalance_config(c)?;
            if !matches!(
                c.test.generator.as_str(),
                "replay" | "binary-replay" | "piecewise-replay" | "block-replay"
            ) {
                spec(c)?;
            }
        }
        Ok(())
    }

    fn format(&self, record: &Record, out: &mut dyn Write) -> anyhow::Result<()> {
        let r: CacheBenchRecord = record.decode(self.name(), RECORD_VERSION)?;
        // In the layout the run printed (the current one for runs stored
        // before the record kept it).
        write_record(&r, r.layout, out)?;
        Ok(())
    }

    /// Upstream's Runner says "Test aborted." on stderr once per instance
    /// when the run was stopped; stdout gets the instances' reports (or,
    /// when they went to their stats files, only what follows them).
    fn format_end(
        &self,
        record: &Record,
        out: &mut dyn Write,
        diag: &mut dyn Write,
    ) -> anyhow::Result<()> {
        let r: CacheBenchRecord = record.decode(self.name(), RECORD_VERSION)?;
        if aborted(&r) {
            for _ in &r.instances {
                writeln!(diag, "Test aborted.")?;
            }
            diag.flush()?;
        }
        if r.reports_in_stats_files {
            write_closing(&r, r.layout.style(r.instances.len()), out)?;
        } else {
            write_record(&r, r.layout, out)?;
        }
        Ok(())
    }

    fn metrics(&self, record: &Record) -> anyhow::Result<Map<String, Value>> {
        let r: CacheBenchRecord = record.decode(self.name(), RECORD_VERSION)?;
        harness::record::metrics_map(&crate::metrics::of_record(&r))
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        let began = Instant::now();
        let a = parse(args)?;
        let loaded = load(&a)?;
        for w in &loaded.warnings {
            eprintln!("warning: {w}");
        }
        let st = a.output_layout.style(loaded.instances.len());
        let mut out = std::io::stdout();
        write!(out, "{}", output::config_echo(&loaded.text))?;
        // As upstream's main: several instances need a stats file each
        // (their progress would interleave on stdout); checked after the
        // config's echo, before the welcome line, and the run ends with 1.
        if loaded.instances.len() > 1 && a.progress_stats_file.is_none() {
            writeln!(
                out,
                "Error: --progress_stats_file must be specified when running multiple \
                 instances (numInstances={})",
                loaded.instances.len()
            )?;
            return Ok(Outcome::helper(false));
        }
        writeln!(out, "{}", output::WELCOME)?;
        let mut instances = Vec::new();
        for c in &loaded.instances {
            match setup_instance(c, &a, st, &mut out)? {
                Setup::Ready(i) => instances.push(*i),
                Setup::WroteTrace => return Ok(Outcome::helper(true)),
            }
        }
        // Upstream's main announces several instances, then each
        // instance's stressor prints its own total as it starts.
        if instances.len() > 1 {
            write!(out, "{}", output::running_instances(instances.len()))?;
        }
        let mut total_ops = 0;
        for i in &instances {
            let ops = i.options.threads as u64 * i.options.ops_per_thread;
            total_ops += ops;
            write!(out, "{}", output::ops_to_be_run(st, ops))?;
        }
        out.flush()?;

        let stop = AtomicBool::new(false);
        let progress: Vec<Progress> = instances.iter().map(|_| Progress::default()).collect();
        let started = Instant::now();
        let mut stats_files = open_stats_files(&a, ctx, instances.len(), st)?;
        let nvm_failure: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
        let drive = Drive {
            instances: &instances,
            progress: &progress,
            stop: &stop,
            done: AtomicBool::new(false),
            nvm_failure: &nvm_failure,
            ctx,
            a: &a,
            st,
            started,
            eta: Eta::new(total_ops),
        };
        let (results, samples) = drive.run(&mut stats_files);
        drive.eta.bar.finish();
        let nvm_failure = nvm_failure.into_inner().unwrap_or_else(|e| e.into_inner());
        let timed_out =
            stop.load(Ordering::Relaxed) && !ctx.cancel.is_stopped() && nvm_failure.is_none();
        let charts = write_charts(&a, ctx, &samples);
        let mut record = CacheBenchRecord {
            instances: Vec::new(),
            aggregated: None,
            charts,
            series: crate::record::series(&samples),
            interrupted: ctx.cancel.is_stopped(),
            stopped_by_timeout_seconds: timed_out.then_some(a.timeout_seconds),
            nvm_failure: nvm_failure.clone(),
            layout: a.output_layout,
            first_op_secs: first_op_secs(&progress, began),
            reports_in_stats_files: instances.len() > 1 && a.progress_stats_file.is_some(),
        };
        add_instances(&mut record, &instances, results);
        append_reports(&record, st, &mut stats_files);
        Ok(Outcome::measured(
            record_passed(&record),
            Record::of(self.name(), RECORD_VERSION, &record),
        ))
    }
}
