//! The `calibrate` workload's entry point: the `Workload` implementation
//! and the dispatch of its command line to the drive.

use crate::cli::{Args, Cmd};
use crate::drive::{search, serve};
use crate::metrics::{marks_of, search_metrics, serve_metrics};
use crate::printer::{model_lines, served_line, write_record, write_serve};
use crate::record::{CalibrateRecord, RECORD_VERSION};
use clap::Parser;
use harness::{Outcome, Record, RunContext, Workload};
use load::report::final_line;

/// The workload registered with the harness.
pub struct Calibrate;

/// What a calibrate run answers, first: the measured max QPS at the
/// latency target, the M/D/c model's, and their ratio.
static HEADLINES: &[direction::Headline] = &[
    direction::headline("final_achieved_qps", "max QPS at target", "QPS"),
    direction::headline("analytic_max_qps", "M/D/c max QPS", "QPS"),
    direction::headline("measured_to_analytic_ratio", "measured / analytic", ""),
    direction::headline("final_latency_msec", "latency at target", "ms"),
];

impl Workload for Calibrate {
    fn headlines(&self) -> &'static [direction::Headline] {
        HEADLINES
    }

    fn directions(&self) -> &'static [&'static [direction::Rule]] {
        // The search's figures are all calibrate measures; the model's
        // values and the settings are neutral.
        static TABLES: &[&[direction::Rule]] = &[load::directions::SEARCH];
        TABLES
    }

    fn name(&self) -> &'static str {
        "calibrate"
    }

    fn description(&self) -> &'static str {
        "SLO search against an M/D/c gRPC service with an analytic answer"
    }

    fn upstream(&self) -> &'static str {
        "no upstream tool: rackbench's own check of its load generator"
    }

    fn help(&self) -> String {
        use clap::CommandFactory;
        Args::command().render_long_help().to_string()
    }

    fn command(&self) -> Option<clap::Command> {
        use clap::CommandFactory;
        Some(Args::command())
    }

    fn subcommand_help(&self, args: &[String]) -> Option<String> {
        use clap::CommandFactory;
        let name = args.iter().find(|a| !a.starts_with('-'))?;
        let mut cmd = Args::command();
        // Built, so the subcommand's usage names `rackbench calibrate serve`.
        cmd.build();
        let sub = cmd.find_subcommand_mut(name)?;
        Some(sub.render_long_help().to_string())
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        let a = parse(args)?;
        a.check()
    }

    fn format(&self, record: &Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        match record.decode::<CalibrateRecord>(self.name(), RECORD_VERSION)? {
            CalibrateRecord::Search(r) => write_record(&r, out)?,
            CalibrateRecord::Serve(r) => write_serve(&r, out)?,
        }
        Ok(())
    }

    /// All on stderr (calibrate is ours; stdout is left to a job's
    /// report): a search's final line, failure and model lines; what a
    /// server served.
    fn format_end(
        &self,
        record: &Record,
        _out: &mut dyn std::io::Write,
        diag: &mut dyn std::io::Write,
    ) -> anyhow::Result<()> {
        match record.decode::<CalibrateRecord>(self.name(), RECORD_VERSION)? {
            CalibrateRecord::Search(r) => {
                if let Some(f) = &r.search.reported {
                    writeln!(diag, "{}", final_line(f))?;
                }
                if let Some(f) = &r.search.failure {
                    writeln!(diag, "{}", load::report::failure_line(f))?;
                }
                for line in model_lines(&r) {
                    writeln!(diag, "{line}")?;
                }
            }
            CalibrateRecord::Serve(r) => writeln!(diag, "{}", served_line(&r))?,
        }
        Ok(())
    }

    fn metrics(
        &self,
        record: &Record,
    ) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
        match record.decode::<CalibrateRecord>(self.name(), RECORD_VERSION)? {
            CalibrateRecord::Search(r) => harness::record::metrics_map(&search_metrics(&r)?),
            CalibrateRecord::Serve(r) => harness::record::metrics_map(&serve_metrics(&r)),
        }
    }

    fn marks(&self, record: &Record) -> Vec<String> {
        match record.decode::<CalibrateRecord>(self.name(), RECORD_VERSION) {
            Ok(CalibrateRecord::Search(r)) => marks_of(&r),
            _ => Vec::new(),
        }
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        let a = parse(args)?;
        a.check()?;
        match &a.cmd {
            Some(Cmd::Serve { listen, threads }) => serve(&a, *listen, *threads, ctx),
            None => search(&a, ctx),
        }
    }
}

fn parse(args: &[String]) -> anyhow::Result<Args> {
    let argv = std::iter::once("rackbench calibrate".to_string()).chain(args.iter().cloned());
    Args::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::ClientKind;
    use crate::drive::OVERHEAD_POINTS;
    use crate::mdc;
    use crate::printer::overhead_line;
    use crate::record::{OverheadRecord, SearchRun, SearchSettings, ServeRecord, ServerStats};
    use load::Percentile;
    use load::recorder::SecondSummary;
    use load::report::{SearchRecord, round3};
    use load::search::Phase;
    use load::{LatencySummary, ProbeRecord, SloTarget};
    use std::time::Duration;

    fn probe(seq: usize, phase: Phase, requested: f64, p99: f64) -> ProbeRecord {
        ProbeRecord {
            seq,
            phase,
            mode: "open:poisson".into(),
            requested_qps: requested,
            duration_secs: 4.0,
            total_queries: 1000,
            scheduled: 1000,
            errors: 0,
            dropped: 0,
            unfinished: 0,
            achieved_qps: requested * 0.99876,
            total_bytes_rx: 64_000,
            total_bytes_tx: 64_000,
            latency: LatencySummary {
                count: 1000,
                p99_ms: p99,
                ..LatencySummary::default()
            },
            target_value_ms: p99,
            passed: true,
            verdict: "ok".into(),
            extensions: 0,
            settle_secs: 0.0,
            start_unix_ms: 1,
            end_unix_ms: 2,
            interval: None,
            from_send_ms: None,
        }
    }

    fn search_run() -> SearchRun {
        let target = SloTarget {
            percentile: Percentile::P99,
            latency_ms: 20.0,
        };
        let analytic = mdc::max_rate_for_target(8, 0.01, 0.99, 0.02).unwrap();
        SearchRun {
            search: SearchRecord {
                target,
                probes: vec![
                    probe(1, Phase::Peak, 0.0, 30.0),
                    probe(2, Phase::Bisect, 500.0, 15.0),
                    probe(3, Phase::Final, 480.0, 14.5),
                ],
                reported: Some(probe(3, Phase::Final, 480.0, 14.5)),
                failure: None,
            },
            analytic_max_qps: Some(analytic),
            arrival: "poisson".into(),
            server_workers: 8,
            service_time_ms: 10.0,
            peak_qps: 790.12345,
            success: true,
            interrupted: false,
            final_series: vec![SecondSummary {
                second: 0,
                completed: 480,
                errors: 0,
                p50_ms: 10.1,
                p99_ms: 14.0,
                max_ms: 16.0,
            }],
            probe_csv: "calibrate_results.csv".into(),
            settings: SearchSettings {
                tolerance: 0.02,
                min_completion: 0.99,
                warmup_secs: 2.0,
                peak_secs: 3.0,
                probe_secs: 4.0,
                probe_warmup_secs: 1.0,
                final_secs: 15.0,
                peak_concurrency: 32,
                client: Some(ClientKind::H2),
                send_ahead_us: None,
            },
            own_server: Some(ServerStats {
                requests: 12345,
                mean_service: Some(Duration::from_micros(10_050)),
            }),
            overhead: None,
            host: None,
        }
    }

    #[test]
    fn a_ratio_or_a_host_outside_what_calibrate_vouches_for_is_marked() {
        let look = |share: f64| load::hostspeed::HostLook {
            cpu_unit_us: 1000.0,
            memory_unit_us: 2000.0,
            cpu_share: share,
            unix_ms: 0,
        };
        // At the analytic rate, on a quiet host: no mark.
        let mut r = search_run();
        let an = r.analytic_max_qps.unwrap();
        if let Some(p) = r.search.reported.as_mut() {
            p.requested_qps = an * 0.98;
        }
        r.host = Some(load::hostspeed::HostCheck {
            before: look(0.99),
            after: look(0.97),
        });
        assert!(marks_of(&r).is_empty(), "{:?}", marks_of(&r));
        let m = metrics_of(CalibrateRecord::Search(Box::new(r.clone())));
        assert_eq!(m["host_check"]["before"]["cpu_share"], 0.99);
        assert_eq!(m["host_check"]["change_pct"], 0.0);
        let rec = Record::of(
            "calibrate",
            RECORD_VERSION,
            &CalibrateRecord::Search(Box::new(r.clone())),
        );
        assert!(Calibrate.marks(&rec).is_empty());
        // A ratio of 0.13 (the loaded run) on a busy host, its
        // bisection having passed 500 QPS: all three named.
        if let Some(p) = r.search.reported.as_mut() {
            p.requested_qps = an * 0.13;
        }
        r.host = Some(load::hostspeed::HostCheck {
            before: look(0.45),
            after: look(0.97),
        });
        let rec = Record::of(
            "calibrate",
            RECORD_VERSION,
            &CalibrateRecord::Search(Box::new(r)),
        );
        let marks = Calibrate.marks(&rec);
        assert_eq!(marks.len(), 3, "{marks:?}");
        assert!(
            marks[0].starts_with("host busy before the run: a thread got 45% of a core"),
            "{marks:?}"
        );
        assert!(
            marks[1].starts_with("search unsteady: its result 80.4 QPS is 84% below 500.0 QPS"),
            "{marks:?}"
        );
        assert!(
            marks[2].starts_with("measured/model ratio 0.130 (")
                && marks[2].contains("is outside 0.90-1.10, what calibrate vouches for"),
            "{marks:?}"
        );
    }

    #[test]
    fn overhead_quantiles_index_by_the_records_own_point_count() {
        let rec = |n: usize| OverheadRecord {
            requested_qps: 80.0,
            duration_secs: 3.0,
            replies: 240,
            errors: 0,
            service_ms: 10.0,
            service_measured: true,
            quantiles_ms: (0..n).map(|i| i as f64).collect(),
        };
        let hundred = rec(100);
        assert_eq!(hundred.quantile(0.5), 50.0);
        assert_eq!(hundred.quantile(0.99), 99.0);
        assert_eq!(hundred.quantile(1.0), 99.0);
        // A record with another point count reads its own slots.
        let ten = rec(10);
        assert_eq!(ten.quantile(0.5), 5.0);
        assert_eq!(ten.quantile(0.99), 9.0);
        assert_eq!(ten.quantile(0.0), 0.0);
        assert!(rec(0).quantile(0.5).is_nan());
        let line = overhead_line(&ten);
        assert!(line.contains("median 5.000 ms, 99p 9.000 ms"), "{line}");
    }

    #[test]
    fn the_measured_overhead_gives_a_second_model_value() {
        let mut r = search_run();
        // A constant 1 ms overhead at the measured 10.05 ms service time is
        // the model at 10.05 ms with the target lowered by 1 ms.
        r.overhead = Some(OverheadRecord {
            requested_qps: 80.0,
            duration_secs: 3.0,
            replies: 240,
            errors: 0,
            service_ms: 10.05,
            service_measured: true,
            quantiles_ms: vec![1.0; OVERHEAD_POINTS],
        });
        let expect = mdc::max_rate_for_target(8, 0.01005, 0.99, 0.019).unwrap();
        let m = metrics_of(CalibrateRecord::Search(Box::new(r.clone())));
        let with = m["analytic_max_qps_with_overhead"].as_f64().unwrap();
        assert!((with - expect).abs() < 0.05, "{with} vs {expect}");
        let pure = m["analytic_max_qps_at_measured_service_time"]
            .as_f64()
            .unwrap();
        assert!(with < pure - 10.0, "{with} vs {pure}");
        assert_eq!(
            m["measured_to_model_with_overhead_ratio"],
            round3(480.0 / with)
        );
        assert_eq!(m["overhead_ms"]["median"], 1.0);
        assert_eq!(m["overhead_ms"]["p99"], 1.0);
        assert_eq!(m["overhead_ms"]["replies"].as_u64(), Some(240));
        // Per probe, the model with overhead is 1 ms above the model at
        // the measured service time.
        let per = m["analytic_latency_per_probe"].as_array().unwrap();
        let at = mdc::Mdc::new(8, 0.01005, 500.0)
            .unwrap()
            .sojourn_quantile(0.99)
            * 1000.0;
        let w = per[0]["with_overhead_ms"].as_f64().unwrap();
        assert!((w - at - 1.0).abs() < 0.01, "{w} vs {at} + 1");
        // Both model lines are printed, the overhead one last.
        let text = text_of(CalibrateRecord::Search(Box::new(r)));
        let last = text.lines().last().unwrap();
        assert!(
            last.starts_with("calibrate: M/D/c with the measured service time 10.050 ms and overhead (median 1.000 ms)"),
            "{text}"
        );
        // Without an overhead probe none of these keys appear.
        let m = metrics_of(CalibrateRecord::Search(Box::new(search_run())));
        for k in [
            "analytic_max_qps_with_overhead",
            "measured_to_model_with_overhead_ratio",
            "overhead_ms",
        ] {
            assert!(!m.contains_key(k), "{k}");
        }
        assert!(
            m["analytic_latency_per_probe"][0]
                .get("with_overhead_ms")
                .is_none()
        );
    }

    fn metrics_of(r: CalibrateRecord) -> serde_json::Map<String, serde_json::Value> {
        let rec = Record::of("calibrate", RECORD_VERSION, &r);
        // As stored and read back.
        let rec: Record = serde_json::from_str(&serde_json::to_string(&rec).unwrap()).unwrap();
        Calibrate.metrics(&rec).unwrap()
    }

    fn text_of(r: CalibrateRecord) -> String {
        let mut out = Vec::new();
        Calibrate
            .format(&Record::of("calibrate", RECORD_VERSION, &r), &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn search_metrics_come_from_the_record() {
        let r = search_run();
        let analytic = r.analytic_max_qps.unwrap();
        let m = metrics_of(CalibrateRecord::Search(Box::new(r)));
        assert_eq!(m["target_percentile"], "99p");
        assert_eq!(m["target_latency_msec"], 20.0);
        assert_eq!(m["arrival"], "poisson");
        assert_eq!(
            m["load_mode"],
            "open loop; latency measured from the intended start"
        );
        assert_eq!(m["server_workers"].as_u64(), Some(8));
        assert_eq!(m["service_time_ms"], 10.0);
        assert_eq!(m["capacity_qps"], 800.0);
        assert_eq!(m["analytic_max_qps"], round3(analytic));
        assert_eq!(m["peak_qps"], 790.123);
        assert_eq!(m["server_requests"].as_u64(), Some(12345));
        assert_eq!(m["server_mean_service_ms"], 10.05);
        // A longer measured service time: a lower model rate.
        let eff = m["analytic_max_qps_at_measured_service_time"]
            .as_f64()
            .unwrap();
        assert!(eff > 0.0 && eff < analytic, "{eff} vs {analytic}");
        assert_eq!(m["final_requested_qps"], 480.0);
        assert_eq!(m["final_achieved_qps"], round3(480.0 * 0.99876));
        assert_eq!(m["final_latency_msec"], 14.5);
        assert_eq!(m["final_latency"]["p99_ms"], 14.5);
        assert_eq!(m["final_latency"]["count"].as_u64(), Some(1000));
        assert_eq!(m["measured_to_analytic_ratio"], round3(480.0 / analytic));
        assert_eq!(m["peak_to_capacity_ratio"], round3(790.12345 / 800.0));
        // The unthrottled peak has no model value; the rate-driven probes do.
        let per = m["analytic_latency_per_probe"].as_array().unwrap();
        assert_eq!(per.len(), 2);
        assert_eq!(per[0]["seq"].as_u64(), Some(2));
        assert_eq!(per[0]["requested_qps"], 500.0);
        assert_eq!(per[0]["measured_ms"], 15.0);
        assert!(per[0]["analytic_ms"].as_f64().unwrap() >= 10.0);
        assert_eq!(m["search_success"], true);
        assert!(!m.contains_key("search_failure"));
        assert_eq!(m["partial"], false);
        assert_eq!(m["probes"].as_array().unwrap().len(), 3);
        assert_eq!(m["probes"][2]["phase"], "final");
        assert_eq!(m["final_series"][0]["completed"].as_u64(), Some(480));
        assert_eq!(m["probe_csv"], "calibrate_results.csv");
        assert_eq!(m["search"]["tolerance"], 0.02);
        assert_eq!(m["search"]["peak_concurrency"].as_u64(), Some(32));
        assert_eq!(m["search"]["final_secs"], 15.0);
        assert_eq!(m["search"]["client"], "h2");
        // The search's lines, then the model line.
        let text = text_of(CalibrateRecord::Search(Box::new(search_run())));
        assert!(
            text.lines()
                .last()
                .unwrap()
                .starts_with("calibrate: max QPS meeting 99p <= 20 ms: measured 480.0"),
            "{text}"
        );
    }

    #[test]
    fn a_search_without_a_result_or_a_model_leaves_those_keys_out() {
        let mut r = search_run();
        r.server_workers = 0;
        r.analytic_max_qps = None;
        r.search.reported = None;
        r.search.failure = Some("no rate met the target".into());
        r.success = false;
        r.interrupted = true;
        r.own_server = None;
        let m = metrics_of(CalibrateRecord::Search(Box::new(r)));
        assert!(m["capacity_qps"].is_null());
        assert!(m["analytic_max_qps"].is_null());
        for absent in [
            "server_requests",
            "server_mean_service_ms",
            "analytic_max_qps_at_measured_service_time",
            "final_requested_qps",
            "final_achieved_qps",
            "final_latency_msec",
            "final_latency",
            "measured_to_analytic_ratio",
            "peak_to_capacity_ratio",
            "analytic_latency_per_probe",
        ] {
            assert!(!m.contains_key(absent), "{absent}: {m:?}");
        }
        assert_eq!(m["search_success"], false);
        assert_eq!(m["search_failure"], "no rate met the target");
        assert_eq!(m["partial"], true);
        // The built-in server that served nothing: the key, null.
        let mut r = search_run();
        r.own_server = Some(ServerStats {
            requests: 0,
            mean_service: None,
        });
        let m = metrics_of(CalibrateRecord::Search(Box::new(r)));
        assert_eq!(m["server_requests"].as_u64(), Some(0));
        assert!(m["server_mean_service_ms"].is_null());
        assert!(!m.contains_key("analytic_max_qps_at_measured_service_time"));
    }

    #[test]
    fn serve_metrics_come_from_the_record() {
        let r = ServeRecord {
            address: "127.0.0.1:50051".into(),
            workers: 8,
            service_time_ms: 10.0,
            requests_served: 42,
            mean_service: Some(Duration::from_micros(10_250)),
        };
        let m = metrics_of(CalibrateRecord::Serve(r.clone()));
        assert_eq!(m.len(), 2);
        assert_eq!(m["requests_served"].as_u64(), Some(42));
        assert_eq!(m["mean_service_ms"], 10.25);
        assert_eq!(
            text_of(CalibrateRecord::Serve(r.clone())),
            "calibrate server listening on 127.0.0.1:50051 (8 workers, 10 ms service time); Ctrl-C stops it\n\
             calibrate server: served 42 requests, mean service time 10.250 ms\n"
        );
        let m = metrics_of(CalibrateRecord::Serve(ServeRecord {
            requests_served: 0,
            mean_service: None,
            ..r
        }));
        assert_eq!(m["requests_served"].as_u64(), Some(0));
        assert!(m["mean_service_ms"].is_null());
    }
}
