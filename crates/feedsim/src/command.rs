//! The `feedsim` workload: `rackbench feedsim leaf` serves, `rackbench
//! feedsim` (upstream run.sh) starts a leaf process, waits until it reports
//! ready, and searches for the highest rate meeting the latency target.

use crate::cli::{DriverArgs, LeafArgs};
use crate::drive::run_driver;
use crate::printer::{speed_warning, write_record};
use crate::record::{FeedSimRecord, InstanceResult, RECORD_VERSION};
use crate::serve::run_leaf;
use crate::setup::check_driver;
use clap::Parser;
use harness::{Outcome, Record, RunContext, Workload};
use load::report::{failure_line, final_line};
use serde_json::{Map, Value};

pub struct FeedSim;

fn parse<T: Parser>(name: &str, args: &[String]) -> anyhow::Result<T> {
    T::try_parse_from(std::iter::once(name.to_string()).chain(args.iter().cloned()))
        .map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))
}

enum Parsed {
    Leaf(LeafArgs),
    Driver(Box<DriverArgs>),
}

fn parse_any(args: &[String]) -> anyhow::Result<Parsed> {
    match args.first().map(String::as_str) {
        Some("leaf") => Ok(Parsed::Leaf(parse("rackbench feedsim leaf", &args[1..])?)),
        _ => Ok(Parsed::Driver(Box::new(parse("rackbench feedsim", args)?))),
    }
}

impl Workload for FeedSim {
    fn headlines(&self) -> &'static [direction::Headline] {
        crate::directions::HEADLINES
    }

    fn directions(&self) -> &'static [&'static [direction::Rule]] {
        crate::directions::TABLES
    }

    fn benchpress(&self) -> &'static [harness::benchpress_yaml::Upstream] {
        crate::benchpress::BENCHPRESS
    }
    fn name(&self) -> &'static str {
        "feedsim"
    }

    fn description(&self) -> &'static str {
        "FeedSim ranking leaf: max QPS with p95 <= 500 ms"
    }

    fn upstream(&self) -> &'static str {
        "DCPerf's FeedSim (run.sh and LeafNodeRank)"
    }

    fn help(&self) -> String {
        use clap::CommandFactory;
        format!(
            "{}\n\n{}",
            DriverArgs::command().render_long_help(),
            LeafArgs::command().render_help()
        )
    }

    fn command(&self) -> Option<clap::Command> {
        use clap::CommandFactory;
        Some(DriverArgs::command().subcommand(LeafArgs::command().name("leaf")))
    }

    fn subcommand_help(&self, args: &[String]) -> Option<String> {
        use clap::CommandFactory;
        (args.first()? == "leaf").then(|| LeafArgs::command().render_long_help().to_string())
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        match parse_any(args)? {
            Parsed::Leaf(a) => a
                .shape
                .threads(1, false)
                .map(|_| ())
                .map_err(anyhow::Error::msg),
            Parsed::Driver(a) => check_driver(&a),
        }
    }

    fn leftovers(&self) -> Vec<std::path::PathBuf> {
        // A direct run keeps its leaf's log in the temp folder, named by
        // the leaf's port: a log whose port still has a listener may be a
        // running leaf's, and is kept.
        let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let port: u16 = name
                    .strip_prefix("feedsim_leaf_")?
                    .strip_suffix(".log")?
                    .parse()
                    .ok()?;
                std::net::TcpListener::bind((rpc::server::LOOPBACK, port))
                    .is_ok()
                    .then(|| e.path())
            })
            .collect()
    }

    fn format(&self, record: &Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        let r: FeedSimRecord = record.decode(self.name(), RECORD_VERSION)?;
        write_record(&r, out)?;
        Ok(())
    }

    /// A search's final line (run.sh's last), and our diagnostic of a
    /// failed one on stderr; autoscale's summary lines. A leaf said it was
    /// ready when it was.
    fn format_end(
        &self,
        record: &Record,
        out: &mut dyn std::io::Write,
        diag: &mut dyn std::io::Write,
    ) -> anyhow::Result<()> {
        match record.decode::<FeedSimRecord>(self.name(), RECORD_VERSION)? {
            FeedSimRecord::Leaf(_) => {}
            FeedSimRecord::Search(s) => {
                if let Some(f) = &s.instance.outcome.final_probe {
                    writeln!(out, "{}", final_line(f))?;
                }
                if let Some(f) = &s.instance.outcome.failure {
                    writeln!(diag, "{}", failure_line(f))?;
                }
            }
            FeedSimRecord::Autoscale(a) => {
                for line in a.lines() {
                    writeln!(out, "{line}")?;
                }
            }
        }
        Ok(())
    }

    fn metrics(&self, record: &Record) -> anyhow::Result<Map<String, Value>> {
        let r: FeedSimRecord = record.decode(self.name(), RECORD_VERSION)?;
        harness::record::metrics_map(&r.metrics())
    }

    /// A search whose host changed speed (the sampler's drift) or was busy
    /// at its start or end (the sampler's looks), or whose result lies far
    /// below what its own probes passed ([`load::search::unsteady`]), is
    /// marked.
    fn marks(&self, record: &Record) -> Vec<String> {
        let (speed, unsteady) = match record.decode::<FeedSimRecord>(self.name(), RECORD_VERSION) {
            Ok(FeedSimRecord::Search(s)) => {
                let o = &s.instance.outcome;
                let mark = load::search::unsteady(&o.probes, o.final_probe.as_ref());
                (s.host_speed, mark.into_iter().collect())
            }
            Ok(FeedSimRecord::Autoscale(a)) => {
                let marks = a
                    .instances
                    .iter()
                    .filter_map(|i| match &i.result {
                        InstanceResult::Ran(r) => load::search::unsteady(
                            &r.outcome.probes,
                            r.outcome.final_probe.as_ref(),
                        )
                        .map(|m| format!("{}{m}", i.label)),
                        InstanceResult::Failed(_) => None,
                    })
                    .collect();
                (a.host_speed, marks)
            }
            _ => (None, Vec::new()),
        };
        let mut out: Vec<String> = speed_warning(speed.as_ref()).into_iter().collect();
        if let Some(c) = speed.and_then(|h| h.check) {
            out.extend(c.concerns());
        }
        out.extend(unsteady);
        out
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        match parse_any(args)? {
            Parsed::Leaf(a) => run_leaf(&a, ctx),
            Parsed::Driver(a) => {
                check_driver(&a)?;
                run_driver(&a, ctx)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{THREADS, instance, probe, target};
    use crate::metrics::{BASELINE_QPS, FeedSimMetrics};
    use crate::record::{
        AutoscaleInstance, AutoscaleRun, InstanceRecord, InstanceResult, LeafRecord, Rerun,
        SearchRun,
    };
    use load::Arrival;
    use load::hostspeed::HostSpeed;
    use load::report::round3;
    use load::search::{Phase, SearchOutcome};

    /// The record through `Record::of`, as stored, and back to metrics.
    fn stored_metrics(r: &FeedSimRecord) -> Map<String, Value> {
        let rec = Record::of("feedsim", RECORD_VERSION, r);
        let text = serde_json::to_string(&rec).unwrap();
        let back: Record = serde_json::from_str(&text).unwrap();
        FeedSim.metrics(&back).unwrap()
    }

    #[test]
    fn leaf_metrics_come_from_its_record() {
        let r = FeedSimRecord::Leaf(LeafRecord {
            addr: "127.0.0.1:11222".into(),
            threads: THREADS,
            build_seconds: 3.25,
            dataset_bytes: 64 << 20,
            rss_bytes: 80 << 20,
            cpu_seconds: 7.5,
        });
        let FeedSimMetrics::Leaf(typed) = r.metrics() else {
            panic!("not the leaf's metrics")
        };
        assert_eq!(typed.dataset_bytes, 64 << 20);
        let m = stored_metrics(&r);
        assert_eq!(m.len(), 4, "{m:?}");
        assert_eq!(m["build_seconds"], 3.25);
        assert_eq!(m["dataset_bytes"].as_u64(), Some(64 << 20));
        assert_eq!(m["rss_bytes"].as_u64(), Some(80 << 20));
        assert_eq!(m["cpu_seconds"], 7.5);
        let mut out = Vec::new();
        FeedSim
            .format(&Record::of("feedsim", RECORD_VERSION, &r), &mut out)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "leaf: datasets built in 3.2 s (64 MiB); ready on 127.0.0.1:11222\n"
        );
    }

    /// A single-instance search run of `instance`.
    fn search_run(instance: InstanceRecord) -> FeedSimRecord {
        FeedSimRecord::Search(Box::new(SearchRun {
            target: target(),
            arrival: Arrival::Poisson,
            compat_driver_threads: None,
            driver_threads: None,
            threads: THREADS,
            instance,
            host_speed: None,
        }))
    }

    #[test]
    fn search_metrics_come_from_its_record() {
        let r = search_run(instance(Some(probe(
            Phase::Final,
            11.4,
            11.4,
            420.1234,
            true,
        ))));
        let FeedSimMetrics::Search(typed) = r.metrics() else {
            panic!("not a search's metrics")
        };
        assert_eq!(typed.score, Some(0.2));
        assert_eq!(
            typed
                .instance
                .reported
                .as_ref()
                .map(|f| f.final_achieved_qps),
            Some(11.4)
        );
        let leaf = typed.instance.leaf.as_ref().unwrap();
        assert_eq!(leaf.leaf_requests, 100);
        assert_eq!(leaf.leaf_cpu_ms_per_request, Some(100.0));
        assert_eq!(leaf.driver_cpu_ms_per_request, Some(5.0));
        assert_eq!(leaf.driver_to_leaf_cpu_ratio, Some(0.05));

        let m = stored_metrics(&r);
        assert_eq!(m["target_percentile"], "95p");
        assert_eq!(m["target_latency_msec"], 500.0);
        assert_eq!(
            m["load_mode"],
            "open loop, poisson arrivals; latency from the intended start"
        );
        assert_eq!(
            m["threads"],
            serde_json::json!({"serving": 2, "ranking": 1, "srv_io": 1, "io": 4, "pointer_chase": 8})
        );
        assert_eq!(m["score"], 0.2);
        assert_eq!(m["final_requested_qps"], 11.4);
        assert_eq!(m["final_latency_msec"], 420.123);
        assert_eq!(m["final_latency"]["p95_ms"], 420.1234);
        assert_eq!(m["peak_qps"], 20.123);
        assert_eq!(m["leaf_requests"].as_u64(), Some(100));
        assert_eq!(m["leaf_skipped_tasks"].as_u64(), Some(0));
        assert_eq!(m["leaf_cpu_seconds"], 10.0);
        assert_eq!(m["leaf_rss_bytes"].as_u64(), Some(300 << 20));
        assert_eq!(m["leaf_huge_pages_advised"], true);
        assert_eq!(m["thp_mode"], "madvise");
        assert_eq!(m["leaf_serving_model"], "blocking");
        assert_eq!(m["leaf_step_cpu_ms_per_request"]["ranking"], 60.0);
        assert_eq!(m["driver_cpu_ms_per_request"], 5.0);
        assert_eq!(m["success"], true);
        assert_eq!(m["partial"], false);
        assert_eq!(m["probes"].as_array().unwrap().len(), 2);
        assert_eq!(m["probes"][1]["phase"], "final");
        assert_eq!(m["final_series"][0]["completed"].as_u64(), Some(12));
        assert_eq!(m["csv"], "/tmp/feedsim_results.txt");
        for absent in [
            "failure",
            "leaf_log",
            "host_speed",
            "host_speed_unstable",
            "rerun_qps",
            "rerun_met_target",
            "search_final",
            "rerun_probes",
            "spawned_instances",
            "mode",
        ] {
            assert!(!m.contains_key(absent), "{absent}: {m:?}");
        }
        let mut out = Vec::new();
        FeedSim
            .format(&Record::of("feedsim", RECORD_VERSION, &r), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("Searching for QPS where 95p latency <= 500 msec\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "final requested_qps = 11.40, measured_qps = 11.40, latency = 420.123\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn an_interrupted_search_without_a_result_or_leaf_status() {
        let mut run = instance(None);
        run.outcome.interrupted = true;
        run.outcome.failure = Some("interrupted".into());
        run.status_after = None;
        run.leaf_log = Some("/tmp/feedsim_leaf_11222.log".into());
        let speed = |drift_pct: f64| load::hostspeed::UnitStats {
            samples: 3,
            unit_us_min: 100.0,
            unit_us_median: 110.0,
            unit_us_max: 130.0,
            drift_pct,
        };
        let r = FeedSimRecord::Search(Box::new(SearchRun {
            target: target(),
            arrival: Arrival::Constant,
            compat_driver_threads: None,
            driver_threads: None,
            threads: THREADS,
            instance: run,
            host_speed: Some(HostSpeed {
                cpu: speed(25.0),
                memory: speed(5.0),
                drift_pct: 25.0,
                check: None,
            }),
        }));
        let m = stored_metrics(&r);
        assert_eq!(m["success"], false);
        assert_eq!(m["partial"], true);
        assert_eq!(m["failure"], "interrupted");
        assert_eq!(m["leaf_log"], "/tmp/feedsim_leaf_11222.log");
        assert_eq!(m["host_speed"]["drift_pct"], 25.0);
        assert_eq!(m["host_speed"]["cpu"]["samples"].as_u64(), Some(3));
        assert_eq!(m["host_speed_unstable"], true);
        for absent in [
            "score",
            "final_requested_qps",
            "final_achieved_qps",
            "final_latency",
            "leaf_requests",
            "leaf_rss_bytes",
            "leaf_cpu_ms_per_request",
            "driver_cpu_ms_per_request",
        ] {
            assert!(!m.contains_key(absent), "{absent}: {m:?}");
        }
    }

    fn autoscale(first: InstanceRecord, second: InstanceResult) -> FeedSimRecord {
        let inst = |i: usize, result: InstanceResult| AutoscaleInstance {
            label: format!("instance {}: ", i + 1),
            port: 21212 + i as u16,
            cpus: vec![2 * i, 2 * i + 1],
            threads: THREADS,
            result,
        };
        FeedSimRecord::Autoscale(Box::new(AutoscaleRun {
            target: target(),
            arrival: Arrival::Constant,
            compat_driver_threads: None,
            driver_threads: None,
            instances: vec![
                inst(0, InstanceResult::Ran(Box::new(first))),
                inst(1, second),
            ],
            driver_cpu_seconds: 2.0,
            host_speed: None,
            stopped: false,
            fixed_qps: false,
        }))
    }

    #[test]
    fn autoscale_metrics_come_from_its_record() {
        let r = autoscale(
            instance(Some(probe(Phase::Final, 10.0, 9.5, 400.0, true))),
            InstanceResult::Failed("the leaf process exited".into()),
        );
        let FeedSimMetrics::Autoscale(typed) = r.metrics() else {
            panic!("not autoscale's metrics")
        };
        assert_eq!(typed.spawned_instances, "2");
        assert_eq!(typed.successful_instances, 1);
        assert!(!typed.success);
        let m = stored_metrics(&r);
        // Typed as upstream's autoscale JSON: strings, and integers.
        assert_eq!(m["spawned_instances"], "2");
        assert_eq!(m["successful_instances"].as_u64(), Some(1));
        assert_eq!(m["target_latency_msec"], "500");
        assert_eq!(m["is_fixed_qps"].as_u64(), Some(0));
        // The failed instance counts as 0 in min_qps.
        assert_eq!(m["min_qps"], 0.0);
        assert_eq!(m["max_qps"], 9.5);
        assert_eq!(m["success"], false);
        assert_eq!(m["partial"], false);
        assert_eq!(m["rerun_at_fixed_qps"], Value::Null);
        assert_eq!(m["overall"]["final_requested_qps"], 10.0);
        assert_eq!(m["overall"]["final_achieved_qps"], 9.5);
        assert_eq!(m["overall"]["average_latency_msec"], 400.0);
        assert_eq!(m["score"], round3(9.5 / BASELINE_QPS));
        assert_eq!(m["driver_cpu_ms_per_request"], 20.0);
        assert_eq!(m["leaf_cpu_ms_per_request"], 100.0);
        assert_eq!(m["driver_to_leaf_cpu_ratio"], 0.2);
        assert_eq!(m["target_percentile"], "95p");
        let (a, b) = (&m["1"], &m["2"]);
        assert_eq!(a["port"].as_u64(), Some(21212));
        assert_eq!(a["cpus"], "0-1");
        assert_eq!(a["threads"]["srv_io"].as_u64(), Some(1));
        assert_eq!(a["final_achieved_qps"], 9.5);
        assert_eq!(a["success"], true);
        assert_eq!(a["leaf_cpu_ms_per_request"], 100.0);
        // The driver's CPU is the whole process's: only in the sums.
        assert!(a.get("driver_cpu_ms_per_request").is_none(), "{a}");
        assert!(a.get("rerun_qps").is_none(), "{a}");
        assert_eq!(b["port"].as_u64(), Some(21213));
        assert_eq!(b["cpus"], "2-3");
        assert_eq!(b["success"], false);
        assert_eq!(b["failure"], "the leaf process exited");
        assert!(b.get("probes").is_none(), "{b}");
        assert!(!m.contains_key("host_speed"));
        let mut out = Vec::new();
        FeedSim
            .format(&Record::of("feedsim", RECORD_VERSION, &r), &mut out)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "instance 1: final requested_qps = 10.00, measured_qps = 9.50, latency = 400.000\n\
             overall: 1 of 2 instance(s) succeeded; requested_qps = 10.00, measured_qps = 9.50, average latency = 400.000\n\
             {\n  \"1\": {\n    \"final_requested_qps\": 10,\n    \"final_achieved_qps\": 9.5,\n    \"final_latency_msec\": 400\n  },\n\
             \x20 \"overall\": {\n    \"final_requested_qps\": 10,\n    \"final_achieved_qps\": 9.5,\n    \"average_latency_msec\": 400\n  },\n\
             \x20 \"target_percentile\": \"95p\",\n  \"target_latency_msec\": \"500\",\n  \"spawned_instances\": \"2\",\n\
             \x20 \"successful_instances\": 1,\n  \"min_qps\": 0,\n  \"max_qps\": 9.5,\n  \"is_fixed_qps\": 0\n}\n"
        );
    }

    #[test]
    fn an_autoscale_rerun_reports_the_rerun_and_the_search_final() {
        let rerun = |q: f64, achieved: f64| Rerun {
            qps: q,
            outcome: SearchOutcome {
                probes: vec![probe(Phase::Fixed, q, achieved, 450.0, achieved > 10.0)],
                final_probe: None,
                final_series: Vec::new(),
                peak_qps: 0.0,
                success: true,
                interrupted: false,
                failure: None,
            },
        };
        let mut first = instance(Some(probe(Phase::Final, 12.0, 12.0, 300.0, true)));
        first.rerun = Some(rerun(12.0, 11.5));
        let mut second = instance(Some(probe(Phase::Final, 8.0, 8.0, 350.0, true)));
        second.rerun = Some(rerun(12.0, 9.0));
        let r = autoscale(first, InstanceResult::Ran(Box::new(second)));
        let m = stored_metrics(&r);
        assert_eq!(m["rerun_at_fixed_qps"], 12.0);
        assert_eq!(m["successful_instances"].as_u64(), Some(2));
        assert_eq!(m["success"], true);
        assert_eq!(m["overall"]["final_achieved_qps"], 20.5);
        // Over the reported (rerun) results.
        assert_eq!(m["min_qps"], 9.0);
        assert_eq!(m["max_qps"], 11.5);
        let (a, b) = (&m["1"], &m["2"]);
        assert_eq!(a["rerun_qps"], 12.0);
        assert_eq!(a["rerun_met_target"], true);
        assert_eq!(a["final_achieved_qps"], 11.5);
        assert_eq!(a["search_final"]["final_achieved_qps"], 12.0);
        assert_eq!(a["rerun_probes"].as_array().unwrap().len(), 1);
        assert_eq!(b["rerun_met_target"], false);
        assert_eq!(b["final_achieved_qps"], 9.0);
        assert_eq!(b["search_final"]["final_latency_msec"], 350.0);
        // As upstream's last object, which is the rerun's (run with -q).
        assert_eq!(m["is_fixed_qps"].as_u64(), Some(1));
        // The text: the search's object, upstream's rerun line, the
        // rerun's object (the one upstream's parser reads, last).
        let FeedSimRecord::Autoscale(a) = &r else {
            unreachable!()
        };
        let text = a.lines().join("\n");
        let objects: Vec<&str> = text.matches("\"is_fixed_qps\": ").collect();
        assert_eq!(objects.len(), 2, "{text}");
        assert!(
            text.contains("\"is_fixed_qps\": 0\n}\nDetected unstable run - rerunning with fixed QPS at 12...\n{"),
            "{text}"
        );
        assert!(text.ends_with("\"is_fixed_qps\": 1\n}"), "{text}");
        assert!(text.contains("\"final_achieved_qps\": 20.5,"), "{text}");
    }

    #[test]
    fn a_result_far_below_what_the_search_passed_is_marked() {
        // The bisection passed 14 QPS; a final at 13.5 is within 10% of
        // it, one at 11 is not.
        let searched = |final_qps: f64| {
            let mut run = instance(Some(probe(Phase::Final, final_qps, final_qps, 400.0, true)));
            run.outcome.probes = vec![
                probe(Phase::Bisect, 14.0, 14.0, 380.0, true),
                probe(Phase::Bisect, 15.0, 14.6, 900.0, false),
                probe(Phase::Final, final_qps, final_qps, 400.0, true),
            ];
            run
        };
        let search = |run: InstanceRecord| {
            FeedSim.marks(&Record::of("feedsim", RECORD_VERSION, &search_run(run)))
        };
        assert!(search(searched(13.5)).is_empty());
        let marks = search(searched(11.0));
        assert_eq!(marks.len(), 1, "{marks:?}");
        assert!(
            marks[0].starts_with("search unsteady: its result 11.0 QPS is 21% below 14.0 QPS"),
            "{marks:?}"
        );
        // Autoscale names the instance whose search it was.
        let r = autoscale(
            searched(13.5),
            InstanceResult::Ran(Box::new(searched(11.0))),
        );
        let marks = FeedSim.marks(&Record::of("feedsim", RECORD_VERSION, &r));
        assert_eq!(marks.len(), 1, "{marks:?}");
        assert!(
            marks[0].starts_with("instance 2: search unsteady: its result 11.0 QPS"),
            "{marks:?}"
        );
    }

    #[test]
    fn autoscale_min_and_max_qps_span_the_instances() {
        let r = autoscale(
            instance(Some(probe(Phase::Final, 10.0, 9.5, 400.0, true))),
            InstanceResult::Ran(Box::new(instance(Some(probe(
                Phase::Final,
                7.0,
                6.25,
                300.0,
                true,
            ))))),
        );
        let m = stored_metrics(&r);
        assert_eq!(m["successful_instances"].as_u64(), Some(2));
        assert_eq!(m["min_qps"], 6.25);
        assert_eq!(m["max_qps"], 9.5);
        // An instance that ran but found no result counts as 0 too.
        let r = autoscale(
            instance(Some(probe(Phase::Final, 10.0, 9.5, 400.0, true))),
            InstanceResult::Ran(Box::new(instance(None))),
        );
        let m = stored_metrics(&r);
        assert_eq!(m["successful_instances"].as_u64(), Some(1));
        assert_eq!(m["min_qps"], 0.0);
        assert_eq!(m["max_qps"], 9.5);
        // None with a result: both 0.
        let r = autoscale(
            instance(None),
            InstanceResult::Failed("the leaf process exited".into()),
        );
        let m = stored_metrics(&r);
        assert_eq!(m["min_qps"], 0.0);
        assert_eq!(m["max_qps"], 0.0);
    }

    #[test]
    fn a_record_of_another_version_is_refused() {
        let mut rec = Record::of(
            "feedsim",
            RECORD_VERSION,
            &autoscale(instance(None), InstanceResult::Failed("no leaf".into())),
        );
        rec.version = 1;
        assert!(FeedSim.metrics(&rec).is_err());
    }
}
