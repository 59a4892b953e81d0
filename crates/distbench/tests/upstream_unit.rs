//! Upstream's own unit tests, run on rackbench: every test config of
//! google/distbench's `distbench_test_sequencer_test.cc`, `fanout_test.cc`
//! and `replay_test.cc` (and the active ones of `activity_test.cc`), with
//! the facts each of its assertions checks, extracted as data into
//! `tests/fixtures/upstream_unit_tests.toml` (Apache-2.0, as upstream; see
//! its header). Each runs through a sequencer and node managers in this
//! process, as upstream's `DistBenchTester` runs them: real gRPC between
//! the instances, as many node managers as the test needs, or one for the
//! tests upstream runs on a single node manager; the placement tests call
//! the placement alone, as upstream calls its constraint solver.
//!
//! Upstream's `Overload` test runs ten times, all of whose runs must hold,
//! and `overload_never_succeeds_without_the_handler` checks over many
//! random overloads that no successful sample is shorter than the handler's
//! own sleep.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use distbench::cluster::LocalCluster;
use distbench::proto::{
    RpcPerformanceLog, RpcSample, ServicePerformanceLog, TestResult, TestSequence,
    TestSequenceResults,
};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The extracted tests.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Suite {
    source: String,
    test: Vec<UnitTest>,
}

/// One upstream test: its config and the facts it asserts.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UnitTest {
    /// `file.cc:TestName`.
    name: String,
    /// `tester` (as many node managers as needed), `single` (every
    /// instance bundled on one node manager) or `placement` (upstream's
    /// constraint solver alone, on `nodes`).
    run: String,
    /// The test sequence, textproto.
    config: String,
    /// Runs that must all hold (default 1).
    #[serde(default)]
    runs: Option<usize>,
    /// Ours, not upstream's: a long test, started first so that the
    /// others run beside it.
    #[serde(default)]
    start_first: bool,
    /// The run must fail (upstream asserts a non-OK status).
    #[serde(default)]
    fails: bool,
    /// `placement`: the nodes and their attributes.
    #[serde(default)]
    nodes: BTreeMap<String, BTreeMap<String, String>>,
    /// `placement`: the instances each node must get, one of each list
    /// (a one-element list: exactly that one).
    #[serde(default)]
    placed: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    check: Vec<Check>,
}

/// An inclusive range, or one value.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
enum Range {
    Exact(i64),
    Between([i64; 2]),
}

impl Range {
    fn holds(self, v: i64) -> bool {
        match self {
            Range::Exact(x) => v == x,
            Range::Between([lo, hi]) => lo <= v && v <= hi,
        }
    }
}

/// One assertion of a test, on the results of its (first) test. Selectors
/// `log`, `peer` and `rpc` pick an instance log, one of its peer logs and
/// one of its RPC logs; every other field is a fact checked there.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Check {
    log: Option<String>,
    peer: Option<String>,
    rpc: Option<i32>,
    /// Results: test results returned.
    test_results: Option<usize>,
    /// Results: instance logs.
    instance_logs: Option<usize>,
    /// Every instance log: entries of its error dictionary.
    every_log_errors: Option<usize>,
    /// `log_summary[line]` holds `N: n`, with n in the range.
    summary_n: Option<(usize, Range)>,
    /// Log: its peer logs.
    peer_logs: Option<usize>,
    /// Log: peers it must not have.
    no_peers: Option<Vec<String>>,
    /// Log: successful samples of every peer's first RPC log.
    each_peer_successful: Option<Range>,
    /// Log: the successful samples of these peers' RPC logs add up to.
    sum_successful: Option<(Vec<String>, i64)>,
    /// Log: `engine_error_message`.
    engine_error: Option<String>,
    /// Log: its error dictionary.
    errors: Option<Vec<String>>,
    /// Log: activity config, metric and value of its activity log.
    activity: Option<(String, String, i64)>,
    /// Log: replay trace logs, each with these samples and this mask of
    /// record indices.
    replay_logs: Option<usize>,
    replay_samples: Option<usize>,
    replay_index_mask: Option<u64>,
    /// Peer: its RPC logs.
    rpc_logs: Option<usize>,
    /// Peer: the key of its only RPC log.
    rpc_key: Option<i32>,
    /// RPC log: sample counts.
    successful: Option<Range>,
    failed: Option<Range>,
    /// RPC log: successful warm-up samples.
    warmup: Option<Range>,
    /// RPC log: `error_index` of the first failed sample.
    first_failed_error: Option<i32>,
    /// RPC log: latest start minus earliest start of the successful ones.
    start_spread_ns: Option<Range>,
    /// RPC log: every request (response) size is one of these.
    request_sizes: Option<Vec<i64>>,
    response_sizes: Option<Vec<i64>>,
    /// RPC log: samples in each of the four (request > 1000, response >
    /// 1000) bins, at least.
    size_bins_min: Option<i64>,
    /// RPC log: every request (response) size is a non-zero multiple.
    request_multiple_of: Option<i64>,
    response_multiple_of: Option<i64>,
    request_equals_response: Option<bool>,
    /// RPC log: every sample's trace context.
    trace: Option<Trace>,
    /// RPC log: no sample has a trace context.
    untraced: Option<bool>,
    /// Results: which (client instance, server instance) pairs sent RPCs,
    /// on 3x3x3 grids.
    fanout: Option<Fanout>,
}

/// Facts about every sample's trace context.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Trace {
    /// Entries of each of its six lists.
    depth: usize,
    /// `list.index = value`.
    #[serde(default)]
    equal: BTreeMap<String, i64>,
    /// `list.index / divide` over the samples covers 0..count (a bit mask).
    #[serde(default)]
    cover: Vec<Cover>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cover {
    field: String,
    #[serde(default = "one")]
    divide: i64,
    count: u32,
}

fn one() -> i64 {
    1
}

/// Which grid instances `from` sends to instance `to`: all of these hold.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fanout {
    from: String,
    to: String,
    /// `to` differs from `from` (same index).
    #[serde(default)]
    not_self: bool,
    /// `to` is `from` (same index).
    #[serde(default)]
    only_self: bool,
    /// Axes on which both have the same coordinate.
    #[serde(default)]
    same: Vec<String>,
    /// On this axis, `to` is `from` + 1 modulo 3 (reversed, `from` is `to`
    /// + 1, when `from`'s coordinate on `reverse_if_odd` is odd).
    step: Option<String>,
    reverse_if_odd: Option<String>,
    /// `from`'s coordinate on `step` is below this.
    step_below: Option<i64>,
}

fn suite() -> Suite {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream_unit_tests.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The node managers upstream's tester starts for `seq`: per test, its
/// instances less the bundled ones plus one per bundle; the most of any.
fn nodes_needed(seq: &TestSequence) -> usize {
    seq.tests
        .iter()
        .map(|t| {
            let all: usize = t
                .services
                .iter()
                .map(|s| distbench::placement::instance_names(s).len())
                .sum();
            let bundled: usize = t
                .node_service_bundles
                .values()
                .map(|b| b.services.len())
                .sum();
            all - bundled + t.node_service_bundles.len()
        })
        .max()
        .unwrap_or(0)
        .max(1)
}

/// Runs `seq` as upstream's tester does: on `nodes_needed` node managers,
/// or all on one (`single`). `Err` is the sequence's failure.
async fn run_sequence(seq: &TestSequence, single: bool) -> Result<TestSequenceResults, String> {
    let seq = if single {
        distbench::subcommands::preview_sequence(seq.clone())
    } else {
        seq.clone()
    };
    // The sequencer validates as upstream's does before anything runs.
    distbench::check::validate(&seq, "the test").map_err(|e| e.to_string())?;
    let n = if single { 1 } else { nodes_needed(&seq) };
    let c = LocalCluster::start(n, 0).await?;
    let r = c.sequencer.sequencer.run_sequence(&seq).await;
    c.stop().await;
    r.map_err(|e| e.message)
}

fn sample_log<'a>(r: &'a TestResult, c: &Check) -> Result<Option<&'a RpcPerformanceLog>, String> {
    let (Some(log), Some(peer), Some(rpc)) = (&c.log, &c.peer, c.rpc) else {
        return Ok(None);
    };
    let l = instance_log(r, log)?;
    let p = l
        .peer_logs
        .get(peer)
        .ok_or_else(|| format!("{log} has no peer log {peer}"))?;
    p.rpc_logs
        .get(&rpc)
        .map(Some)
        .ok_or_else(|| format!("{log} -> {peer} has no rpc log {rpc}"))
}

fn instance_log<'a>(r: &'a TestResult, name: &str) -> Result<&'a ServicePerformanceLog, String> {
    r.service_logs
        .as_ref()
        .and_then(|l| l.instance_logs.get(name))
        .ok_or_else(|| format!("no instance log {name}"))
}

fn expect(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what()) }
}

fn range(what: &str, r: Option<Range>, v: i64) -> Result<(), String> {
    match r {
        Some(r) if !r.holds(v) => Err(format!("{what}: {v}, expected {r:?}")),
        _ => Ok(()),
    }
}

/// `engine_ids.0` of a trace context.
fn trace_field(s: &RpcSample, field: &str) -> Result<i64, String> {
    let t = s
        .trace_context
        .as_ref()
        .ok_or("a sample has no trace context")?;
    let (list, index) = field
        .split_once('.')
        .ok_or_else(|| format!("bad trace field '{field}'"))?;
    let index: usize = index
        .parse()
        .map_err(|_| format!("bad trace field '{field}'"))?;
    let values = match list {
        "engine_ids" => &t.engine_ids,
        "actionlist_invocations" => &t.actionlist_invocations,
        "actionlist_indices" => &t.actionlist_indices,
        "action_indices" => &t.action_indices,
        "action_iterations" => &t.action_iterations,
        "fanout_index" => &t.fanout_index,
        other => return Err(format!("bad trace list '{other}'")),
    };
    values
        .get(index)
        .copied()
        .ok_or_else(|| format!("{field}: the trace has {} entries", values.len()))
}

/// The grid index of `svc/x/y/z`.
fn grid(name: &str) -> [i64; 3] {
    let mut out = [0; 3];
    for (i, v) in name.split('/').skip(1).take(3).enumerate() {
        out[i] = v.parse().unwrap();
    }
    out
}

fn axis(a: &str) -> usize {
    match a {
        "x" => 0,
        "y" => 1,
        "z" => 2,
        _ => panic!("bad axis {a}"),
    }
}

impl Fanout {
    /// Whether `from` sends to `to`, as the assertion states it.
    fn expected(&self, from: [i64; 3], to: [i64; 3]) -> bool {
        if self.not_self && from == to {
            return false;
        }
        if self.only_self && from != to {
            return false;
        }
        if self.same.iter().any(|a| from[axis(a)] != to[axis(a)]) {
            return false;
        }
        if let Some(a) = &self.step {
            let k = axis(a);
            let reverse = self
                .reverse_if_odd
                .as_ref()
                .is_some_and(|r| from[axis(r)] & 1 == 1);
            let ok = if reverse {
                (to[k] + 1) % 3 == from[k]
            } else {
                (from[k] + 1) % 3 == to[k]
            };
            if !ok || self.step_below.is_some_and(|b| from[k] >= b) {
                return false;
            }
        }
        true
    }
}

fn check(r: &TestResult, results: &TestSequenceResults, c: &Check) -> Result<(), String> {
    if let Some(n) = c.test_results {
        expect(results.test_results.len() == n, || {
            format!("{} test results, expected {n}", results.test_results.len())
        })?;
    }
    let logs = r
        .service_logs
        .as_ref()
        .map(|l| &l.instance_logs)
        .cloned()
        .unwrap_or_default();
    if let Some(n) = c.instance_logs {
        expect(logs.len() == n, || {
            format!(
                "{} instance logs ({:?}), expected {n}",
                logs.len(),
                logs.keys().collect::<Vec<_>>()
            )
        })?;
    }
    if let Some(n) = c.every_log_errors {
        for (name, l) in &logs {
            let got = l
                .error_dictionary
                .as_ref()
                .map_or(0, |d| d.error_message.len());
            expect(got == n, || {
                format!("{name}: {got} error dictionary entries, expected {n}")
            })?;
        }
    }
    if let Some((line, n)) = c.summary_n {
        let text = r
            .log_summary
            .get(line)
            .ok_or_else(|| format!("no log_summary line {line}: {:?}", r.log_summary))?;
        let v: i64 = text
            .split("N: ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| format!("no N in '{text}'"))?;
        range("log_summary N", Some(n), v)?;
    }
    if let Some(f) = &c.fanout {
        let mut seen = BTreeSet::new();
        for (name, l) in &logs {
            for peer in l.peer_logs.keys() {
                seen.insert((grid(name), grid(peer)));
            }
        }
        let mut wrong = Vec::new();
        for i in 0..27 {
            for j in 0..27 {
                let from = [i / 9, i / 3 % 3, i % 3];
                let to = [j / 9, j / 3 % 3, j % 3];
                if seen.contains(&(from, to)) != f.expected(from, to) {
                    wrong.push(format!("{}{from:?} -> {}{to:?}", f.from, f.to));
                }
            }
        }
        expect(wrong.is_empty(), || {
            format!(
                "{} pairs not as expected: {:?}",
                wrong.len(),
                &wrong[..wrong.len().min(8)]
            )
        })?;
    }
    let Some(name) = &c.log else {
        return Ok(());
    };
    let l = instance_log(r, name)?;
    if let Some(n) = c.peer_logs {
        expect(l.peer_logs.len() == n, || {
            format!(
                "{name}: {} peer logs ({:?}), expected {n}",
                l.peer_logs.len(),
                l.peer_logs.keys().collect::<Vec<_>>()
            )
        })?;
    }
    if let Some(no) = &c.no_peers {
        for p in no {
            expect(!l.peer_logs.contains_key(p), || {
                format!("{name} has a peer log {p}")
            })?;
        }
    }
    let first_rpc = |p: &distbench::proto::PeerPerformanceLog| {
        p.rpc_logs
            .values()
            .next()
            .map_or(0, |r| r.successful_rpc_samples.len() as i64)
    };
    if let Some(rg) = c.each_peer_successful {
        for (p, log) in &l.peer_logs {
            range(
                &format!("{name} -> {p} successful"),
                Some(rg),
                first_rpc(log),
            )?;
        }
    }
    if let Some((peers, total)) = &c.sum_successful {
        let sum: i64 = peers
            .iter()
            .map(|p| l.peer_logs.get(p).map_or(0, first_rpc))
            .sum();
        expect(sum == *total, || {
            format!("{name}: {peers:?} sent {sum}, expected {total}")
        })?;
    }
    if let Some(e) = &c.engine_error {
        expect(l.engine_error_message() == e, || {
            format!(
                "{name}: engine_error_message '{}', expected '{e}'",
                l.engine_error_message()
            )
        })?;
    }
    if let Some(e) = &c.errors {
        let got = l
            .error_dictionary
            .as_ref()
            .map(|d| d.error_message.clone())
            .unwrap_or_default();
        expect(&got == e, || {
            format!("{name}: error dictionary {got:?}, expected {e:?}")
        })?;
    }
    if let Some((config, metric, value)) = &c.activity {
        let got = l
            .activity_logs
            .get(config)
            .and_then(|a| a.activity_metrics.iter().find(|m| m.name() == metric))
            .map(|m| m.value_int());
        expect(got == Some(*value), || {
            format!("{name}: activity {config} {metric} = {got:?}, expected {value}")
        })?;
    }
    if let Some(n) = c.replay_logs {
        expect(l.replay_trace_logs.len() == n, || {
            format!(
                "{name}: {} replay trace logs, expected {n}",
                l.replay_trace_logs.len()
            )
        })?;
    }
    for t in &l.replay_trace_logs {
        if let Some(n) = c.replay_samples {
            expect(t.rpc_samples.len() == n, || {
                format!(
                    "{name}: a replay log has {} samples, expected {n}",
                    t.rpc_samples.len()
                )
            })?;
        }
        if let Some(m) = c.replay_index_mask {
            let mask = t.rpc_samples.keys().fold(0u64, |m, k| m | 1 << k);
            expect(mask == m, || {
                format!("{name}: replay index mask {mask}, expected {m}")
            })?;
        }
    }
    let Some(peer) = &c.peer else {
        return Ok(());
    };
    let p = l
        .peer_logs
        .get(peer)
        .ok_or_else(|| format!("{name} has no peer log {peer}"))?;
    if let Some(n) = c.rpc_logs {
        expect(p.rpc_logs.len() == n, || {
            format!(
                "{name} -> {peer}: {} rpc logs, expected {n}",
                p.rpc_logs.len()
            )
        })?;
    }
    if let Some(k) = c.rpc_key {
        expect(p.rpc_logs.keys().next() == Some(&k), || {
            format!(
                "{name} -> {peer}: rpc log keys {:?}, expected {k}",
                p.rpc_logs.keys()
            )
        })?;
    }
    let Some(rl) = sample_log(r, c)? else {
        return Ok(());
    };
    let at = format!("{name} -> {peer} rpc {}", c.rpc.unwrap_or_default());
    let ok = &rl.successful_rpc_samples;
    range(&format!("{at}: successful"), c.successful, ok.len() as i64)?;
    range(
        &format!("{at}: failed"),
        c.failed,
        rl.failed_rpc_samples.len() as i64,
    )?;
    range(
        &format!("{at}: warm-up"),
        c.warmup,
        ok.iter().filter(|s| s.warmup()).count() as i64,
    )?;
    if let Some(e) = c.first_failed_error {
        let got = rl.failed_rpc_samples.first().map(RpcSample::error_index);
        expect(got == Some(e), || {
            format!("{at}: first failed error_index {got:?}, expected {e}")
        })?;
    }
    if let Some(rg) = c.start_spread_ns {
        let starts: Vec<i64> = ok.iter().map(RpcSample::start_timestamp_ns).collect();
        let spread = starts.iter().max().unwrap_or(&0) - starts.iter().min().unwrap_or(&0);
        range(&format!("{at}: start spread ns"), Some(rg), spread)?;
    }
    for s in ok {
        let (q, a) = (s.request_size(), s.response_size());
        if let Some(v) = &c.request_sizes {
            expect(v.contains(&q), || {
                format!("{at}: request size {q}, expected one of {v:?}")
            })?;
        }
        if let Some(v) = &c.response_sizes {
            expect(v.contains(&a), || {
                format!("{at}: response size {a}, expected one of {v:?}")
            })?;
        }
        if let Some(m) = c.request_multiple_of {
            expect(q != 0 && q % m == 0, || {
                format!("{at}: request size {q} is no multiple of {m}")
            })?;
        }
        if let Some(m) = c.response_multiple_of {
            expect(a != 0 && a % m == 0, || {
                format!("{at}: response size {a} is no multiple of {m}")
            })?;
        }
        if c.request_equals_response == Some(true) {
            expect(q == a, || {
                format!("{at}: request size {q} != response size {a}")
            })?;
        }
        if c.untraced == Some(true) {
            expect(s.trace_context.is_none(), || {
                format!("{at}: a sample has a trace context")
            })?;
        }
        if let Some(t) = &c.trace {
            let tc = s
                .trace_context
                .as_ref()
                .ok_or_else(|| format!("{at}: untraced sample"))?;
            for (list, len) in [
                ("engine_ids", tc.engine_ids.len()),
                ("actionlist_invocations", tc.actionlist_invocations.len()),
                ("actionlist_indices", tc.actionlist_indices.len()),
                ("action_indices", tc.action_indices.len()),
                ("action_iterations", tc.action_iterations.len()),
                ("fanout_index", tc.fanout_index.len()),
            ] {
                expect(len == t.depth, || {
                    format!("{at}: {list} has {len} entries, expected {}", t.depth)
                })?;
            }
            for (field, want) in &t.equal {
                let got = trace_field(s, field)?;
                expect(got == *want, || {
                    format!("{at}: {field} = {got}, expected {want}")
                })?;
            }
        }
    }
    if let Some(n) = c.size_bins_min {
        let mut bins = [[0i64; 2]; 2];
        for s in ok {
            bins[usize::from(s.request_size() > 1000)][usize::from(s.response_size() > 1000)] += 1;
        }
        expect(bins.iter().flatten().all(|b| *b > n - 1), || {
            format!("{at}: size bins {bins:?}, expected each at least {n}")
        })?;
    }
    if let Some(t) = &c.trace {
        for cover in &t.cover {
            let mut mask = 0u64;
            for s in ok {
                let v = trace_field(s, &cover.field)? / cover.divide;
                mask |= 1u64 << v;
            }
            let want = (1u64 << cover.count) - 1;
            expect(mask == want, || {
                format!(
                    "{at}: {} / {} covers mask {mask:#x}, expected {want:#x}",
                    cover.field, cover.divide
                )
            })?;
        }
    }
    Ok(())
}

/// Runs one upstream test once; `Err` says which fact did not hold.
async fn run_one(t: &UnitTest) -> Result<(), String> {
    let seq = distbench::textproto::parse_test_sequence(&t.config, &t.name)
        .map_err(|e| format!("config: {e}"))?;
    if t.run == "placement" {
        let nodes: Vec<distbench::placement::Node> = t
            .nodes
            .iter()
            .map(|(alias, attributes)| distbench::placement::Node {
                alias: alias.clone(),
                attributes: attributes.clone(),
            })
            .collect();
        let placed = distbench::placement::place(&seq.tests[0], &nodes);
        return match (placed, t.fails) {
            (Err(_), true) => Ok(()),
            (Ok(p), true) => Err(format!("placed, expected a failure: {p:?}")),
            (Err(e), false) => Err(format!("placement failed: {e}")),
            (Ok(p), false) => {
                for (node, allowed) in &t.placed {
                    let got = p.get(node).cloned().unwrap_or_default();
                    expect(got.len() == 1 && allowed.contains(&got[0]), || {
                        format!("{node} got {got:?}, expected one of {allowed:?}")
                    })?;
                }
                Ok(())
            }
        };
    }
    let results = run_sequence(&seq, t.run == "single").await;
    let results = match (results, t.fails) {
        (Err(_), true) => return Ok(()),
        (Ok(_), true) => return Err("ran, expected a failure".into()),
        (Err(e), false) => return Err(format!("failed: {e}")),
        (Ok(r), false) => r,
    };
    let empty = TestResult::default();
    let r = results.test_results.first().unwrap_or(&empty);
    for c in &t.check {
        check(r, &results, c)?;
    }
    Ok(())
}

/// Run `i` of test `t`: `None` when every fact held.
async fn run_numbered(t: &UnitTest, i: usize) -> Option<String> {
    let started = std::time::Instant::now();
    let r = run_one(t).await;
    let secs = started.elapsed().as_secs_f64();
    if secs > 3.0 {
        eprintln!("{} (run {}): {secs:.1} s", t.name, i + 1);
    }
    r.err().map(|e| format!("{} (run {}): {e}", t.name, i + 1))
}

/// Every extracted test with every assertion; the Overload test 10 times.
/// The tests run a few at a time; each failure names the test and fact.
#[test]
fn upstream_unit_tests_hold() {
    let suite = suite();
    assert!(suite.source.contains("google/distbench"));
    let names: BTreeSet<&str> = suite.test.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), suite.test.len(), "duplicate test names");
    let runs: Vec<(&UnitTest, usize)> = suite
        .test
        .iter()
        .flat_map(|t| (0..t.runs.unwrap_or(1)).map(move |i| (t, i)))
        .collect();
    let started = std::time::Instant::now();
    let failures: Vec<String> = rt().block_on(async {
        use futures::StreamExt;
        // The Overload runs mostly sleep (their handlers, 10 s): all at
        // once; the others a few at a time.
        type Run<'a> = &'a (&'a UnitTest, usize);
        let (sleepy, mut busy): (Vec<Run>, Vec<Run>) =
            runs.iter().partition(|(t, _)| t.runs.unwrap_or(1) > 1);
        busy.sort_by_key(|(t, _)| !t.start_first);
        let sleepy = futures::future::join_all(sleepy.iter().map(|&&(t, i)| run_numbered(t, i)));
        let busy = futures::stream::iter(busy.iter().map(|&&(t, i)| run_numbered(t, i)))
            .buffer_unordered(3)
            .collect::<Vec<_>>();
        let (a, b) = tokio::join!(sleepy, busy);
        a.into_iter().chain(b).flatten().collect()
    });
    eprintln!(
        "{} upstream unit tests ({} runs) in {:.1} s",
        suite.test.len(),
        runs.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n{}",
        failures.len(),
        runs.len(),
        failures.join("\n")
    );
}

/// The overload of upstream's `Overload` test, many times with random
/// limits and loads: a server must never answer success for a handler it
/// did not run, so no successful sample is shorter than the handler's
/// sleep; every RPC sent is accounted for (waited for, as upstream).
#[test]
fn overload_never_succeeds_without_the_handler() {
    use rand::{Rng, SeedableRng};
    let seed: u64 = std::env::var("RACKBENCH_OVERLOAD_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("overload property: seed {seed} (RACKBENCH_OVERLOAD_SEED reruns it)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    const SLEEP_US: i64 = 200_000;
    let cases: Vec<(i64, i64, i64, String)> = (0..16)
        .map(|_| {
            let threads = rng.random_range(1..=8);
            let parallel = rng.random_range(2..=150);
            let pending = rng.random_range(1..=200);
            let server = ["handoff", "inline", "polling"][rng.random_range(0..3)].to_string();
            (threads, parallel, pending, server)
        })
        .collect();
    let failures: Vec<String> =
        rt().block_on(async {
            let runs = cases.iter().map(|(threads, parallel, pending, server)| async move {
            let config = format!(
                "tests {{
  overload_limits {{ max_threads: {threads} max_pending_rpcs: {pending} }}
  protocol_driver_options {{
    name: 'default_protocol_driver_options'
    protocol_name: 'grpc'
    server_settings {{ name: 'server_type' string_value: '{server}' }}
  }}
  services {{ name: 'client' count: 1 }}
  services {{ name: 'server' count: 1 }}
  action_lists {{ name: 'client' action_names: 'q' }}
  actions {{ name: 'q' rpc_name: 'r'
    iterations {{ max_iteration_count: {n} max_parallel_iterations: {parallel} }} }}
  rpc_descriptions {{ name: 'r' client: 'client' server: 'server' }}
  action_lists {{ name: 'r' action_names: 'sleep' }}
  actions {{ name: 'sleep' activity_config_name: 'nap' }}
  activity_configs {{ name: 'nap'
    activity_settings {{ name: 'activity_func' string_value: 'SleepFor' }}
    activity_settings {{ name: 'duration_us' int64_value: {SLEEP_US} }} }}
}}",
                n = parallel * 2
            );
            let what = format!(
                "max_threads {threads}, max_pending_rpcs {pending}, {parallel} in parallel, \
                 server_type {server}"
            );
            let seq = distbench::textproto::parse_test_sequence(&config, "overload").unwrap();
            match run_sequence(&seq, false).await {
                Err(e) => Some(format!("{what}: {e}")),
                Ok(r) => {
                    let r = &r.test_results[0];
                    let log = &r.service_logs.as_ref().unwrap().instance_logs;
                    let Some(client) = log.get("client/0") else {
                        return Some(format!("{what}: no client log"));
                    };
                    let mut samples = 0;
                    for peer in client.peer_logs.values() {
                        for l in peer.rpc_logs.values() {
                            samples += l.successful_rpc_samples.len() + l.failed_rpc_samples.len();
                            if let Some(s) = l
                                .successful_rpc_samples
                                .iter()
                                .find(|s| s.latency_ns() < SLEEP_US * 1000)
                            {
                                return Some(format!(
                                    "{what}: a successful sample of {} ns, shorter than the \
                                     handler's {SLEEP_US} us sleep",
                                    s.latency_ns()
                                ));
                            }
                        }
                    }
                    // Every RPC started is a sample: none is abandoned.
                    (samples < *parallel as usize)
                        .then(|| format!("{what}: {samples} samples of {parallel} sent at once"))
                }
            }
        });
            futures::future::join_all(runs)
                .await
                .into_iter()
                .flatten()
                .collect()
        });
    assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
}
