//! `check_test`: everything upstream Distbench refuses in a test before it
//! runs (it builds an engine for each service and stops at the first error;
//! its sequencer and node managers refuse bad bundles and protocol driver
//! settings when the test starts), reported all at once, each naming the
//! test, the service, RPC, action or list concerned and the offending field.
//!
//! Three severities (see [`Kind::severity`]): what upstream refuses
//! ([`check_test`], [`check_sequence`]); what upstream runs but rackbench
//! cannot, such as the homa and mercury drivers ([`unsupported`]); and what
//! runs, but not quite as the config asks, such as gRPC threading variants
//! ([`warnings`]). [`validate`], behind the `check_test` command and every
//! run, refuses the first two.

use crate::Error;
pub mod activity;
pub mod channels;
pub mod distribution;
pub mod fanout;
pub mod protocol;
pub mod replay;

use crate::proto::{DistributedSystemDescription, ServiceSpec, TestSequence, action};
use distribution::Use;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

/// Reads a sequence (textproto, binary or gzip) and checks it; every problem
/// becomes one line of the error.
pub fn load_checked(path: &Path) -> anyhow::Result<TestSequence> {
    let seq: TestSequence = crate::files::read(path)?;
    if seq.tests.is_empty() {
        anyhow::bail!("{}: the test sequence has no tests", path.display());
    }
    validate(&seq, &path.display().to_string()).map_err(anyhow::Error::msg)?;
    Ok(seq)
}

/// The kind of a problem, for callers that sort or count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A name (action, RPC, service, payload, distribution, ...) that nothing
    /// defines.
    UnknownReference,
    /// A dependency that is not an earlier action of the same action list.
    BadDependency,
    /// An RPC without the action list of the same name (its server handler).
    MissingHandler,
    /// Two definitions with the same name.
    Duplicate,
    /// A `fanout_filter` that upstream does not know.
    BadFanoutFilter,
    /// An `open_loop_interval_distribution` that upstream does not know.
    BadOpenLoopDistribution,
    /// A distribution that is not a valid PMF or CDF for its use.
    BadDistribution,
    /// A required field is missing or out of range.
    BadField,
    /// An `activity_configs` entry upstream refuses (unknown
    /// `activity_func`, a setting out of range).
    BadActivity,
    /// Protocol driver options upstream refuses (a bad `server_type`, an
    /// alias that names nothing, ...).
    BadProtocolDriver,
    /// Something upstream runs that rackbench cannot: the homa, mercury and
    /// test drivers, gRPC over Homa, gRPC channel arguments, load-balancing
    /// policies of multi-server channels other than round_robin and
    /// pick_first.
    Unsupported,
    /// Something that runs, but not as the setting asks (a gRPC threading
    /// variant), or a setting that nothing reads (upstream ignores it too).
    NotApplied,
}

/// How serious a [`Kind`] of problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Upstream refuses the test too.
    Invalid,
    /// Upstream runs it; rackbench refuses it, naming what it lacks.
    Unsupported,
    /// Runs, with a warning.
    Warning,
}

impl Kind {
    /// How serious a problem of this kind is.
    pub fn severity(self) -> Severity {
        match self {
            Kind::Unsupported => Severity::Unsupported,
            Kind::NotApplied => Severity::Warning,
            _ => Severity::Invalid,
        }
    }
}

/// One problem of one test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub kind: Kind,
    /// Index of the test in the sequence.
    pub test_index: usize,
    /// The test's `name` (empty when unnamed).
    pub test_name: String,
    /// What holds the offending field, e.g. `action 'run_queries'`.
    pub location: String,
    /// The offending field and what is wrong with it.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "test {}", self.test_index)?;
        if !self.test_name.is_empty() {
            write!(f, " '{}'", self.test_name)?;
        }
        write!(f, ": {}: {}", self.location, self.message)
    }
}

/// Checks a sequence for what upstream refuses and what rackbench cannot
/// run; the error lists every problem, one per line, after `LABEL:
/// check_test found N problems:`. Warnings are not errors: see
/// [`sequence_warnings`].
pub fn validate(seq: &TestSequence, label: &str) -> Result<(), Error> {
    let (warnings, problems): (Vec<Problem>, Vec<Problem>) = seq
        .tests
        .iter()
        .enumerate()
        .flat_map(|(i, t)| all_problems(i, t))
        .partition(|p| p.kind.severity() == Severity::Warning);
    print_warnings(label, &warnings);
    if problems.is_empty() {
        return Ok(());
    }
    let mut out = format!(
        "{label}: check_test found {} problem{}:",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for p in &problems {
        out.push_str(&format!("\n  {p}"));
    }
    Err(Error::Input(out))
}

/// Checks every test of a sequence for what upstream refuses.
pub fn check_sequence(seq: &TestSequence) -> Vec<Problem> {
    seq.tests
        .iter()
        .enumerate()
        .flat_map(|(i, t)| check_test(i, t))
        .collect()
}

/// Prints each warning on stderr once per process (a sequence is checked
/// when a job is validated and again when it runs).
/// Each warning once per process, whichever check finds it first (a
/// sequence generated and then run in one process is checked twice: as
/// the generated tests, then by the sequencer).
fn print_warnings(label: &str, warnings: &[Problem]) {
    static PRINTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut printed = PRINTED.lock().unwrap_or_else(|e| e.into_inner());
    for w in warnings {
        let text = w.to_string();
        if !printed.contains(&text) {
            eprintln!("{label}: warning: {text}");
            printed.push(text);
        }
    }
}

/// The warnings of every test of a sequence.
pub fn sequence_warnings(seq: &TestSequence) -> Vec<Problem> {
    seq.tests
        .iter()
        .enumerate()
        .flat_map(|(i, t)| warnings(i, t))
        .collect()
}

/// Upstream's open-loop interval distributions (an empty one is
/// `constant`).
pub const OPEN_LOOP_DISTRIBUTIONS: [&str; 4] =
    ["constant", "exponential", "sync_burst", "sync_burst_spread"];

/// What upstream refuses in one test; `index` is its place in the
/// sequence.
pub fn check_test(index: usize, test: &DistributedSystemDescription) -> Vec<Problem> {
    of_severity(index, test, Severity::Invalid)
}

/// What upstream runs in one test but rackbench cannot.
pub fn unsupported(index: usize, test: &DistributedSystemDescription) -> Vec<Problem> {
    of_severity(index, test, Severity::Unsupported)
}

/// What runs in one test, but not as its config asks (or is ignored).
pub fn warnings(index: usize, test: &DistributedSystemDescription) -> Vec<Problem> {
    of_severity(index, test, Severity::Warning)
}

fn of_severity(index: usize, test: &DistributedSystemDescription, s: Severity) -> Vec<Problem> {
    all_problems(index, test)
        .into_iter()
        .filter(|p| p.kind.severity() == s)
        .collect()
}

/// Every problem of one test, whatever its severity.
fn all_problems(index: usize, test: &DistributedSystemDescription) -> Vec<Problem> {
    let mut c = Checker {
        test,
        index,
        problems: Vec::new(),
    };
    c.duplicates();
    c.services();
    c.bundles();
    c.protocol_drivers();
    c.overload_and_attributes();
    c.payloads();
    c.distributions();
    c.rpcs();
    c.channels();
    c.replay_traces();
    c.action_lists();
    c.actions();
    c.activities();
    c.problems
}

/// Names defined in one section, for lookups and for hints in messages.
struct Names<'a>(BTreeSet<&'a str>);

impl<'a> Names<'a> {
    fn of<T>(items: &'a [T], name: impl Fn(&'a T) -> &'a str) -> Self {
        Names(items.iter().map(name).collect())
    }

    fn has(&self, name: &str) -> bool {
        self.0.contains(name)
    }

    /// ` (defined: a, b, c)`, or ` (none is defined)`.
    fn hint(&self) -> String {
        const SHOWN: usize = 8;
        if self.0.is_empty() {
            return " (none is defined)".into();
        }
        let mut list: Vec<&str> = self.0.iter().copied().take(SHOWN).collect();
        if self.0.len() > SHOWN {
            list.push("...");
        }
        format!(" (defined: {})", list.join(", "))
    }
}

struct Checker<'a> {
    test: &'a DistributedSystemDescription,
    index: usize,
    problems: Vec<Problem>,
}

impl<'a> Checker<'a> {
    fn report(&mut self, kind: Kind, location: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            kind,
            test_index: self.index,
            test_name: self.test.name().to_string(),
            location: location.into(),
            message: message.into(),
        });
    }

    /// Reports `name` in `field` of `location` when `names` lacks it.
    fn reference(
        &mut self,
        names: &Names<'_>,
        what: &str,
        location: &str,
        field: &str,
        name: &str,
    ) {
        if !names.has(name) {
            let hint = names.hint();
            self.report(
                Kind::UnknownReference,
                location,
                format!("{field}: unknown {what} '{name}'{hint}"),
            );
        }
    }

    fn services_names(&self) -> Names<'a> {
        Names::of(&self.test.services, |s| s.name())
    }

    fn rpc_names(&self) -> Names<'a> {
        Names::of(&self.test.rpc_descriptions, |r| r.name())
    }

    fn size_distribution_names(&self) -> Names<'a> {
        Names::of(&self.test.size_distribution_configs, |d| d.name())
    }

    /// Every section's names must be unique.
    fn duplicates(&mut self) {
        let t = self.test;
        let sections: [(&str, Vec<&str>); 10] = [
            ("services", t.services.iter().map(|s| s.name()).collect()),
            (
                "rpc_descriptions",
                t.rpc_descriptions.iter().map(|r| r.name()).collect(),
            ),
            ("actions", t.actions.iter().map(|a| a.name()).collect()),
            (
                "action_lists",
                t.action_lists.iter().map(|l| l.name()).collect(),
            ),
            (
                "payload_descriptions",
                t.payload_descriptions.iter().map(|p| p.name()).collect(),
            ),
            (
                "distribution_config",
                t.distribution_config.iter().map(|d| d.name()).collect(),
            ),
            (
                "delay_distribution_configs",
                t.delay_distribution_configs
                    .iter()
                    .map(|d| d.name())
                    .collect(),
            ),
            (
                "size_distribution_configs",
                t.size_distribution_configs
                    .iter()
                    .map(|d| d.name())
                    .collect(),
            ),
            (
                "activity_configs",
                t.activity_configs.iter().map(|a| a.name()).collect(),
            ),
            (
                "rpc_replay_traces",
                t.rpc_replay_traces.iter().map(|r| r.name()).collect(),
            ),
        ];
        for (section, names) in sections {
            let mut first: BTreeMap<&str, usize> = BTreeMap::new();
            for (i, name) in names.into_iter().enumerate() {
                if let Some(&j) = first.get(name) {
                    self.report(
                        Kind::Duplicate,
                        format!("{section}[{i}]"),
                        format!("name: '{name}' is already defined by {section}[{j}]"),
                    );
                } else {
                    first.insert(name, i);
                }
            }
        }
    }

    /// Names, grid sizes and counts of services.
    fn services(&mut self) {
        for (i, s) in self.test.services.iter().enumerate() {
            let loc = format!("services[{i}] '{}'", s.name());
            if s.name().is_empty() {
                self.report(Kind::BadField, &loc, "name: a service needs a name");
            }
            for msg in grid_problems(s) {
                self.report(Kind::BadField, &loc, msg);
            }
        }
    }

    /// `node_service_bundles`, as the test sequencer places them: each key
    /// is a node manager's alias (`node` and its node id, as the sequencer
    /// names them), each entry a service instance (`SERVICE/INDEX`, or
    /// `SERVICE/X/Y[/Z]` on a grid), bundled once.
    fn bundles(&mut self) {
        let t = self.test;
        let mut bundled: BTreeMap<&str, &str> = BTreeMap::new();
        for (node, bundle) in &t.node_service_bundles {
            let loc = format!("node_service_bundles '{node}'");
            if !is_node_alias(node) {
                self.report(
                    Kind::BadField,
                    &loc,
                    format!(
                        "key: '{node}' is not a node manager alias: the test sequencer names \
                         node managers node0, node1, ... after their node ids"
                    ),
                );
            }
            for (i, entry) in bundle.services.iter().enumerate() {
                let field = format!("services[{i}]");
                if let Some(msg) = bundle_entry_problem(&t.services, entry) {
                    self.report(Kind::UnknownReference, &loc, format!("{field}: {msg}"));
                    continue;
                }
                if let Some(&first) = bundled.get(entry.as_str()) {
                    self.report(
                        Kind::Duplicate,
                        &loc,
                        format!(
                            "{field}: service instance '{entry}' is already bundled on \
                             '{first}'; an instance can be bundled only once"
                        ),
                    );
                } else {
                    bundled.insert(entry, node);
                }
            }
        }
    }

    /// Each service's protocol driver, resolved as upstream's node manager
    /// does: bad options, drivers rackbench does not have, and settings it
    /// does not apply. Problems shared by several services are reported
    /// once.
    fn protocol_drivers(&mut self) {
        let mut seen = BTreeSet::new();
        for s in &self.test.services {
            let found = match protocol::resolve(s, self.test) {
                Ok(r) => r.warnings,
                Err(e) => vec![e],
            };
            for p in found {
                if !seen.insert((p.location.clone(), p.message.clone())) {
                    continue;
                }
                let kind = match p.severity {
                    protocol::Severity::Invalid => Kind::BadProtocolDriver,
                    protocol::Severity::Unsupported => Kind::Unsupported,
                    protocol::Severity::Warning => Kind::NotApplied,
                };
                self.report(kind, p.location, p.message);
            }
        }
    }

    /// `overload_limits` and the `test_timeout` attribute, which upstream's
    /// node managers and sequencer refuse when the test starts.
    fn overload_and_attributes(&mut self) {
        let t = self.test;
        if let Some(o) = &t.overload_limits
            && o.max_threads() <= 0
        {
            self.report(
                Kind::BadField,
                "overload_limits",
                format!("max_threads: must be positive, got {}", o.max_threads()),
            );
        }
        if let Some(v) = t.attributes.get("test_timeout")
            && v.trim().trim_start_matches('+').parse::<i64>().is_err()
        {
            self.report(
                Kind::BadField,
                "attributes",
                format!("test_timeout: '{v}' is not an integer number of seconds"),
            );
        }
    }

    /// Every activity config, read as the engine reads it.
    fn activities(&mut self) {
        for a in &self.test.activity_configs {
            let loc = format!("activity_configs '{}'", a.name());
            match activity::parse(a) {
                Err(e) => self.report(Kind::BadActivity, &loc, e),
                Ok(_) => {
                    for s in activity::ignored_settings(a) {
                        self.report(
                            Kind::NotApplied,
                            &loc,
                            format!("{s} (upstream reads it the same way)"),
                        );
                    }
                }
            }
        }
    }

    fn payloads(&mut self) {
        let sizes = self.size_distribution_names();
        for p in &self.test.payload_descriptions {
            if let Some(d) = &p.size_distribution_name {
                let loc = format!("payload_descriptions '{}'", p.name());
                self.reference(
                    &sizes,
                    "size distribution",
                    &loc,
                    "size_distribution_name",
                    d,
                );
            }
        }
    }

    fn distributions(&mut self) {
        let t = self.test;
        let sections = [
            ("distribution_config", &t.distribution_config, Use::Size),
            (
                "delay_distribution_configs",
                &t.delay_distribution_configs,
                Use::Delay,
            ),
            (
                "size_distribution_configs",
                &t.size_distribution_configs,
                Use::Size,
            ),
        ];
        for (section, configs, usage) in sections {
            for d in configs {
                let loc = format!("{section} '{}'", d.name());
                for msg in distribution::check(d, usage) {
                    self.report(Kind::BadDistribution, &loc, msg);
                }
            }
        }
    }

    /// Clients, server, payloads, distribution, channel, fan-out and the
    /// handler action list of every RPC.
    fn rpcs(&mut self) {
        let t = self.test;
        let services = self.services_names();
        let payloads = Names::of(&t.payload_descriptions, |p| p.name());
        let rpc_distributions = Names::of(&t.distribution_config, |d| d.name());
        let lists = Names::of(&t.action_lists, |l| l.name());
        for r in &t.rpc_descriptions {
            let loc = format!("rpc_descriptions '{}'", r.name());
            if r.client.is_empty() {
                self.report(
                    Kind::BadField,
                    &loc,
                    "client: an RPC needs at least one client service",
                );
            }
            for c in &r.client {
                self.reference(&services, "service", &loc, "client", c);
            }
            if r.server().is_empty() {
                self.report(
                    Kind::BadField,
                    &loc,
                    "server: an RPC needs a server service",
                );
            } else {
                self.reference(&services, "service", &loc, "server", r.server());
            }
            // A payload name nothing defines gets the default size, as
            // upstream (which only logs it): said, not refused.
            for (field, name, default) in [
                ("request_payload_name", &r.request_payload_name, 16),
                ("response_payload_name", &r.response_payload_name, 32),
            ] {
                if let Some(p) = name
                    && !payloads.has(p)
                {
                    let hint = payloads.hint();
                    self.report(
                        Kind::NotApplied,
                        &loc,
                        format!(
                            "{field}: no payload '{p}' is defined{hint}: the default {default} B \
                             applies, as upstream"
                        ),
                    );
                }
            }
            if let Some(d) = &r.distribution_config_name {
                self.reference(
                    &rpc_distributions,
                    "distribution",
                    &loc,
                    "distribution_config_name",
                    d,
                );
            }
            if let Some(ch) = &r.multi_server_channel_name {
                let server = t.services.iter().find(|s| s.name() == r.server());
                if let Some(server) = server {
                    let channels = Names::of(&server.multi_server_channels, |c| c.name());
                    self.reference(
                        &channels,
                        "multi_server_channel of the server",
                        &loc,
                        "multi_server_channel_name",
                        ch,
                    );
                }
                if !matches!(r.fanout_filter(), "" | "all") {
                    self.report(
                        Kind::NotApplied,
                        &loc,
                        format!(
                            "fanout_filter '{}': ignored: an RPC through multi_server_channel \
                             '{ch}' goes to the one instance the channel picks (upstream \
                             ignores it too)",
                            r.fanout_filter()
                        ),
                    );
                }
            }
            if let Err(e) = fanout::check(r.fanout_filter()) {
                self.report(Kind::BadFanoutFilter, &loc, format!("fanout_filter: {e}"));
            }
            if !lists.has(r.name()) {
                self.report(
                    Kind::MissingHandler,
                    &loc,
                    format!(
                        "no action list is named '{}': every RPC needs one as its server \
                         handler (add `action_lists {{ name: '{}' }}`; an empty list replies at once)",
                        r.name(),
                        r.name()
                    ),
                );
            }
        }
    }

    /// The actions of each list exist, and depend only on earlier ones.
    fn action_lists(&mut self) {
        let actions = Names::of(&self.test.actions, |a| a.name());
        for l in &self.test.action_lists {
            let loc = format!("action_lists '{}'", l.name());
            for a in &l.action_names {
                self.reference(&actions, "action", &loc, "action_names", a);
            }
            for (pos, name) in l.action_names.iter().enumerate() {
                let Some(action) = self.test.actions.iter().find(|a| a.name() == name) else {
                    continue;
                };
                for dep in &action.dependencies {
                    let at = l.action_names.iter().position(|n| n == dep);
                    let problem = match at {
                        Some(d) if d < pos => continue,
                        Some(d) => format!(
                            "dependency '{dep}' of action '{name}' must be an earlier action of the \
                             list: it is action_names[{d}], '{name}' is action_names[{pos}]"
                        ),
                        None => format!(
                            "dependency '{dep}' of action '{name}' is not an action of this list"
                        ),
                    };
                    self.report(Kind::BadDependency, &loc, problem);
                }
            }
        }
    }

    /// What each action runs, its distributions and its iterations.
    fn actions(&mut self) {
        let t = self.test;
        let rpcs = self.rpc_names();
        let lists = Names::of(&t.action_lists, |l| l.name());
        let activities = Names::of(&t.activity_configs, |a| a.name());
        let traces = Names::of(&t.rpc_replay_traces, |r| r.name());
        let delays = Names::of(&t.delay_distribution_configs, |d| d.name());
        let payloads = Names::of(&t.payload_descriptions, |p| p.name());
        for a in &t.actions {
            let loc = format!("actions '{}'", a.name());
            match &a.action {
                Some(action::Action::RpcName(r)) => {
                    self.reference(&rpcs, "rpc", &loc, "rpc_name", r)
                }
                Some(action::Action::ActionListName(l)) => {
                    self.reference(&lists, "action list", &loc, "action_list_name", l)
                }
                Some(action::Action::ActivityConfigName(c)) => self.reference(
                    &activities,
                    "activity config",
                    &loc,
                    "activity_config_name",
                    c,
                ),
                Some(action::Action::RpcReplayTraceName(r)) => {
                    self.reference(
                        &traces,
                        "rpc replay trace",
                        &loc,
                        "rpc_replay_trace_name",
                        r,
                    );
                }
                None if a.response_payload_override.is_some() => {}
                None => self.report(
                    Kind::BadField,
                    &loc,
                    "needs one of rpc_name, action_list_name, activity_config_name, \
                     rpc_replay_trace_name (or only a response_payload_override)",
                ),
            }
            if let Some(d) = &a.delay_distribution_name {
                self.reference(
                    &delays,
                    "delay distribution",
                    &loc,
                    "delay_distribution_name",
                    d,
                );
            }
            // An override names a payload, whose size distribution gives
            // the size (upstream takes the size from nothing else: a
            // payload with only a fixed size is refused, as upstream's
            // "Unknown size distribution").
            for (field, name) in [
                ("request_payload_override", &a.request_payload_override),
                ("response_payload_override", &a.response_payload_override),
            ] {
                let Some(p) = name else { continue };
                match t.payload_descriptions.iter().find(|d| d.name() == p) {
                    None => self.reference(&payloads, "payload", &loc, field, p),
                    Some(d) if d.size_distribution_name.is_none() => self.report(
                        Kind::BadField,
                        &loc,
                        format!(
                            "{field}: payload '{p}' has no size_distribution_name; an override's \
                             size comes from its payload's size distribution (upstream: Unknown \
                             size distribution:{p})"
                        ),
                    ),
                    Some(_) => {}
                }
            }
            if let Some(it) = &a.iterations {
                self.iterations(&loc, it);
            }
        }
    }

    /// An action's `iterations`: a known open-loop distribution (empty
    /// means constant, as upstream), a positive open-loop interval, and a
    /// closed loop that starts at least one iteration (upstream starts none
    /// and the action never finishes).
    fn iterations(&mut self, loc: &str, it: &crate::proto::Iterations) {
        let dist = it.open_loop_interval_distribution();
        if !dist.is_empty() && !OPEN_LOOP_DISTRIBUTIONS.contains(&dist) {
            self.report(
                Kind::BadOpenLoopDistribution,
                loc,
                format!(
                    "iterations.open_loop_interval_distribution: unknown distribution '{dist}' (valid: {})",
                    OPEN_LOOP_DISTRIBUTIONS.join(", ")
                ),
            );
        }
        match it.open_loop_interval_ns {
            Some(ns) if ns <= 0 => self.report(
                Kind::Unsupported,
                loc,
                format!("iterations.open_loop_interval_ns: must be positive here, got {ns}"),
            ),
            Some(_) => {}
            None => {
                if it.max_parallel_iterations() < 1 {
                    self.report(
                        Kind::BadField,
                        loc,
                        format!(
                            "iterations.max_parallel_iterations: must be at least 1, got {} \
                             (no iteration would start and the action would never finish)",
                            it.max_parallel_iterations()
                        ),
                    );
                }
                if let Some(n) = it.max_iteration_count
                    && n < 1
                {
                    self.report(
                        Kind::BadField,
                        loc,
                        format!(
                            "iterations.max_iteration_count: must be at least 1, got {n} (no \
                             iteration would start and the action would never finish)"
                        ),
                    );
                }
            }
        }
    }
}

/// Whether `key` is an alias the test sequencer gives a node manager:
/// `node` and a node id in decimal, without leading zeros.
pub fn is_node_alias(key: &str) -> bool {
    key.strip_prefix("node").is_some_and(|id| {
        !id.is_empty()
            && id.bytes().all(|b| b.is_ascii_digit())
            && (id == "0" || !id.starts_with('0'))
            && id.parse::<u32>().is_ok()
    })
}

/// What is wrong with `entry` as an entry of a bundle, if anything: it must
/// name one instance of one of `services`.
fn bundle_entry_problem(services: &[ServiceSpec], entry: &str) -> Option<String> {
    if services
        .iter()
        .any(|s| crate::placement::instance_index(s, entry).is_some())
    {
        return None;
    }
    let first_and_last = |s: &ServiceSpec| {
        let names = crate::placement::instance_names(s);
        match (names.first(), names.last()) {
            (Some(a), Some(b)) if a != b => format!("{a} .. {b}"),
            (Some(a), _) => a.clone(),
            _ => "none".to_string(),
        }
    };
    if let Some(s) = services.iter().find(|s| s.name() == entry) {
        return Some(format!(
            "'{entry}' is a service, not a service instance: bundles list instances ({})",
            first_and_last(s)
        ));
    }
    let service = entry.split('/').next().unwrap_or(entry);
    // The longest service name that prefixes the entry.
    let owner = services
        .iter()
        .filter(|s| {
            entry
                .strip_prefix(s.name())
                .is_some_and(|rest| rest.starts_with('/'))
        })
        .max_by_key(|s| s.name().len());
    Some(match owner {
        Some(s) => format!(
            "'{entry}' is not an instance of service '{}' (its instances: {})",
            s.name(),
            first_and_last(s)
        ),
        None => format!(
            "unknown service instance '{entry}': no service is named '{service}' (instances are \
             named SERVICE/INDEX, or SERVICE/X/Y[/Z] on a grid)"
        ),
    })
}

/// Upstream's rules for x/y/z sizes and count: sizes are positive, y needs
/// x, z needs y, and a count given with sizes equals their product.
fn grid_problems(s: &crate::proto::ServiceSpec) -> Vec<String> {
    let mut out = Vec::new();
    for (field, v) in [
        ("x_size", s.x_size),
        ("y_size", s.y_size),
        ("z_size", s.z_size),
    ] {
        if let Some(v) = v
            && v <= 0
        {
            out.push(format!("{field}: must be positive, got {v}"));
        }
    }
    if s.y_size.is_some() && s.x_size.is_none() {
        out.push("y_size: cannot be given without x_size".into());
    }
    if s.z_size.is_some() && s.y_size.is_none() {
        out.push("z_size: cannot be given without x_size and y_size".into());
    }
    if let (Some(count), Some(x)) = (s.count, s.x_size) {
        let product =
            i64::from(x) * i64::from(s.y_size.unwrap_or(1)) * i64::from(s.z_size.unwrap_or(1));
        if i64::from(count) != product && out.is_empty() {
            out.push(format!(
                "count: {count} does not match x_size * y_size * z_size = {product}"
            ));
        }
    }
    if s.x_size.is_none() && s.count.is_some_and(|c| c < 0) {
        out.push(format!("count: must not be negative, got {}", s.count()));
    }
    out
}
