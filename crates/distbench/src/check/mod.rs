//! `check_test`: everything upstream Distbench refuses in a test before it
//! runs (it builds an engine for each service and stops at the first error),
//! reported all at once, each naming the test, the service, RPC, action or
//! list concerned and the offending field.

pub mod distribution;
pub mod fanout;

use crate::proto::{DistributedSystemDescription, TestSequence, action};
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

/// Checks a sequence; the error lists every problem, one per line, after
/// `LABEL: check_test found N problems:`.
pub fn validate(seq: &TestSequence, label: &str) -> Result<(), String> {
    let problems = check_sequence(seq);
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
    Err(out)
}

/// Checks every test of a sequence.
pub fn check_sequence(seq: &TestSequence) -> Vec<Problem> {
    seq.tests
        .iter()
        .enumerate()
        .flat_map(|(i, t)| check_test(i, t))
        .collect()
}

/// Upstream's open-loop interval distributions.
pub const OPEN_LOOP_DISTRIBUTIONS: [&str; 4] =
    ["constant", "exponential", "sync_burst", "sync_burst_spread"];

/// Checks one test; `index` is its place in the sequence.
pub fn check_test(index: usize, test: &DistributedSystemDescription) -> Vec<Problem> {
    let mut c = Checker {
        test,
        index,
        problems: Vec::new(),
    };
    c.duplicates();
    c.services();
    c.payloads();
    c.distributions();
    c.rpcs();
    c.action_lists();
    c.actions();
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

    /// Names, grid sizes and counts, protocol options of services; bundles.
    fn services(&mut self) {
        let options = Names::of(&self.test.protocol_driver_options, |o| o.name());
        for (i, s) in self.test.services.iter().enumerate() {
            let loc = format!("services[{i}] '{}'", s.name());
            if s.name().is_empty() {
                self.report(Kind::BadField, &loc, "name: a service needs a name");
            }
            for msg in grid_problems(s) {
                self.report(Kind::BadField, &loc, msg);
            }
            if let Some(o) = &s.protocol_driver_options_name {
                self.reference(
                    &options,
                    "protocol_driver_options",
                    &loc,
                    "protocol_driver_options_name",
                    o,
                );
            }
        }
        let services = self.services_names();
        for (bundle, b) in &self.test.node_service_bundles {
            let loc = format!("node_service_bundles '{bundle}'");
            for s in &b.services {
                self.reference(&services, "service", &loc, "services", s);
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
            if let Some(p) = &r.request_payload_name {
                self.reference(&payloads, "payload", &loc, "request_payload_name", p);
            }
            if let Some(p) = &r.response_payload_name {
                self.reference(&payloads, "payload", &loc, "response_payload_name", p);
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
        let sizes = self.size_distribution_names();
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
                Some(action::Action::RpcReplayTraceName(r)) => self.reference(
                    &traces,
                    "rpc replay trace",
                    &loc,
                    "rpc_replay_trace_name",
                    r,
                ),
                None => {}
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
            if let Some(d) = &a.request_payload_override {
                self.reference(
                    &sizes,
                    "size distribution",
                    &loc,
                    "request_payload_override",
                    d,
                );
            }
            if let Some(d) = &a.response_payload_override {
                self.reference(
                    &sizes,
                    "size distribution",
                    &loc,
                    "response_payload_override",
                    d,
                );
            }
            if let Some(dist) = a
                .iterations
                .as_ref()
                .and_then(|i| i.open_loop_interval_distribution.as_deref())
                && !OPEN_LOOP_DISTRIBUTIONS.contains(&dist)
            {
                self.report(
                    Kind::BadOpenLoopDistribution,
                    &loc,
                    format!(
                        "iterations.open_loop_interval_distribution: unknown distribution '{dist}' (valid: {})",
                        OPEN_LOOP_DISTRIBUTIONS.join(", ")
                    ),
                );
            }
        }
    }
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
