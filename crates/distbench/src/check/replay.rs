//! RPC replay traces (`rpc_replay_traces`, run by actions with
//! `rpc_replay_trace_name`), checked as upstream's `ValidateRpcReplayTrace`
//! (google/distbench 8a5cfae, distbench_utils.cc) and for what upstream's
//! engine aborts or hangs on when the trace runs:
//!
//! * a trace names its `client` and `server` services;
//! * each record is the trace's `defaults` merged with the record (proto
//!   merge: the record's fields win, `prior_rpc_distances` are the
//!   defaults' followed by the record's); its `server_instance` must be an
//!   instance of the server and its `client_instance` one of the client
//!   (upstream's check lets the count itself through, one past the last
//!   instance, and then aborts on such a server index);
//! * `prior_rpc_distances` d of record i names record i - 1 - d, which must
//!   exist, and only mean something with `timing_mode`
//!   `RELATIVE_TO_PRIOR_RPC_START` or `RELATIVE_TO_PRIOR_RPC_END` (with the
//!   other modes upstream's engine waits for the record forever);
//! * `multi_server_channel_name_index` indexes the trace's
//!   `multiserver_channel_names`, each a channel of the server;
//! * the service that runs the action must be the trace's client (upstream
//!   aborts otherwise).
//!
//! Warned about: `server_processing_time_ns`, which upstream's replay never
//! sends to the server (so the server answers at once, here too), and
//! `rpc_class`, which nothing reads.

use super::{Checker, Kind, Names};
use crate::proto::rpc_replay_trace_record::TimingMode;
use crate::proto::{DistributedSystemDescription, RpcReplayTrace, RpcReplayTraceRecord, action};
use std::collections::{BTreeMap, BTreeSet};

/// Record `record` of a trace with `defaults`, as upstream's engine reads
/// it (`defaults.MergeFrom(record)`).
pub fn merged_record(
    defaults: Option<&RpcReplayTraceRecord>,
    record: &RpcReplayTraceRecord,
) -> RpcReplayTraceRecord {
    let Some(d) = defaults else {
        return record.clone();
    };
    RpcReplayTraceRecord {
        timing_ns: record.timing_ns.or(d.timing_ns),
        timing_mode: record.timing_mode.or(d.timing_mode),
        prior_rpc_distances: d
            .prior_rpc_distances
            .iter()
            .chain(&record.prior_rpc_distances)
            .copied()
            .collect(),
        rpc_class: record.rpc_class.or(d.rpc_class),
        client_instance: record.client_instance.or(d.client_instance),
        server_instance: record.server_instance.or(d.server_instance),
        multi_server_channel_name_index: record
            .multi_server_channel_name_index
            .or(d.multi_server_channel_name_index),
        request_size: record.request_size.or(d.request_size),
        response_size: record.response_size.or(d.response_size),
        server_processing_time_ns: record
            .server_processing_time_ns
            .or(d.server_processing_time_ns),
    }
}

/// Every record of `trace`, merged with its defaults.
pub fn merged_records(trace: &RpcReplayTrace) -> Vec<RpcReplayTraceRecord> {
    trace
        .records
        .iter()
        .map(|r| merged_record(trace.defaults.as_ref(), r))
        .collect()
}

/// The index of the record that distance `d` of record `i` names, if any.
pub fn dependency(i: usize, d: i32) -> Option<usize> {
    let d = usize::try_from(d).ok()?;
    i.checked_sub(1)?.checked_sub(d)
}

/// Whether a record waits for earlier ones in this timing mode.
pub fn waits_for_prior(mode: TimingMode) -> bool {
    matches!(
        mode,
        TimingMode::RelativeToPriorRpcStart | TimingMode::RelativeToPriorRpcEnd
    )
}

/// The services that may run each action list: the list named after a
/// service runs on it, the list named after an RPC on the RPC's server, and
/// a list run by an action (`action_list_name`) wherever that action's list
/// runs.
pub fn list_runners(test: &DistributedSystemDescription) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut runners: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for s in &test.services {
        runners.entry(s.name()).or_default().insert(s.name());
    }
    for r in &test.rpc_descriptions {
        runners.entry(r.name()).or_default().insert(r.server());
    }
    let nested: Vec<(&str, &str)> = test
        .action_lists
        .iter()
        .flat_map(|l| {
            l.action_names.iter().filter_map(move |a| {
                test.actions
                    .iter()
                    .find(|x| x.name() == a)
                    .and_then(|x| match &x.action {
                        Some(action::Action::ActionListName(n)) => Some((l.name(), n.as_str())),
                        _ => None,
                    })
            })
        })
        .collect();
    loop {
        let mut changed = false;
        for &(outer, inner) in &nested {
            let add: Vec<&str> = runners
                .get(outer)
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default();
            let set = runners.entry(inner).or_default();
            for s in add {
                changed |= set.insert(s);
            }
        }
        if !changed {
            return runners;
        }
    }
}

impl Checker<'_> {
    /// Every trace, and every action that replays one.
    pub(super) fn replay_traces(&mut self) {
        let t = self.test;
        let services = self.services_names();
        for trace in &t.rpc_replay_traces {
            let loc = format!("rpc_replay_traces '{}'", trace.name());
            let mut sizes = [None, None];
            for (k, (field, name)) in [("client", &trace.client), ("server", &trace.server)]
                .into_iter()
                .enumerate()
            {
                match name {
                    None => self.report(
                        Kind::BadField,
                        &loc,
                        format!("{field}: a replay trace must name its {field} service"),
                    ),
                    Some(n) => {
                        self.reference(&services, "service", &loc, field, n);
                        sizes[k] = t
                            .services
                            .iter()
                            .find(|s| s.name() == n)
                            .map(crate::placement::instance_count);
                    }
                }
            }
            let server = t.services.iter().find(|s| s.name() == trace.server());
            if let Some(server) = server {
                let channels = Names::of(&server.multi_server_channels, |c| c.name());
                for n in &trace.multiserver_channel_names {
                    self.reference(
                        &channels,
                        "multi_server_channel of the server",
                        &loc,
                        "multiserver_channel_names",
                        n,
                    );
                }
            }
            self.records(&loc, trace, sizes[0], sizes[1]);
        }
        self.replay_actions();
    }

    fn records(
        &mut self,
        loc: &str,
        trace: &RpcReplayTrace,
        client_size: Option<usize>,
        server_size: Option<usize>,
    ) {
        let records = merged_records(trace);
        let channels = trace.multiserver_channel_names.len();
        let in_range = |v: i32, size: usize| usize::try_from(v).is_ok_and(|v| v < size);
        let mut processing_time = trace
            .defaults
            .as_ref()
            .is_some_and(|d| d.server_processing_time_ns.is_some());
        let mut rpc_class = trace
            .defaults
            .as_ref()
            .is_some_and(|d| d.rpc_class.is_some());
        for (i, r) in records.iter().enumerate() {
            let at = format!("records[{i}]");
            processing_time |= r.server_processing_time_ns.is_some();
            rpc_class |= r.rpc_class.is_some();
            if let Some(size) = server_size
                && !in_range(r.server_instance(), size)
            {
                self.report(
                    Kind::BadField,
                    loc,
                    format!(
                        "{at}: server_instance {} is not an instance of the server (0 to {}; \
                         upstream: server index too large)",
                        r.server_instance(),
                        size.saturating_sub(1)
                    ),
                );
            }
            if let (Some(size), Some(c)) = (client_size, r.client_instance)
                && !in_range(c, size)
            {
                self.report(
                    Kind::BadField,
                    loc,
                    format!(
                        "{at}: client_instance {c} is not an instance of the client (0 to {}; \
                         upstream: client index too large)",
                        size.saturating_sub(1)
                    ),
                );
            }
            if let Some(m) = r.multi_server_channel_name_index
                && !in_range(m, channels)
            {
                self.report(
                    Kind::BadField,
                    loc,
                    format!(
                        "{at}: multi_server_channel_name_index {m} does not index the trace's \
                         {channels} multiserver_channel_names"
                    ),
                );
            }
            for (field, v) in [
                ("request_size", r.request_size),
                ("response_size", r.response_size),
            ] {
                if let Some(v) = v
                    && v < 0
                {
                    self.report(
                        Kind::BadField,
                        loc,
                        format!("{at}: {field} must not be negative, got {v}"),
                    );
                }
            }
            if r.prior_rpc_distances.is_empty() {
                continue;
            }
            if !waits_for_prior(r.timing_mode()) {
                self.report(
                    Kind::BadField,
                    loc,
                    format!(
                        "{at}: prior_rpc_distances need timing_mode RELATIVE_TO_PRIOR_RPC_START \
                         or RELATIVE_TO_PRIOR_RPC_END, not {} (upstream's engine would wait for \
                         this record forever)",
                        r.timing_mode().as_str_name()
                    ),
                );
            }
            for &d in &r.prior_rpc_distances {
                let Some(j) = dependency(i, d) else {
                    self.report(
                        Kind::BadField,
                        loc,
                        format!(
                            "{at}: prior_rpc_distances {d} names no earlier record (distance d \
                             of record i is record i - 1 - d)"
                        ),
                    );
                    continue;
                };
                if let Some(c) = records[j].client_instance
                    && r.client_instance != Some(c)
                {
                    self.report(
                        Kind::NotApplied,
                        loc,
                        format!(
                            "{at}: prior_rpc_distances {d} names records[{j}], which only \
                             client_instance {c} replays: other instances ignore this \
                             dependency (as upstream)"
                        ),
                    );
                }
            }
        }
        if processing_time {
            self.report(
                Kind::NotApplied,
                loc,
                "server_processing_time_ns: ignored: upstream's replay never sends it to the \
                 server, which answers at once (here too)",
            );
        }
        if rpc_class {
            self.report(
                Kind::NotApplied,
                loc,
                "rpc_class: ignored (upstream ignores it too)",
            );
        }
    }

    /// Actions replaying a trace run on its client service.
    fn replay_actions(&mut self) {
        let t = self.test;
        let runners = list_runners(t);
        for l in &t.action_lists {
            let Some(services) = runners.get(l.name()) else {
                continue;
            };
            for name in &l.action_names {
                let Some(a) = t.actions.iter().find(|a| a.name() == name) else {
                    continue;
                };
                let Some(action::Action::RpcReplayTraceName(n)) = &a.action else {
                    continue;
                };
                let Some(trace) = t.rpc_replay_traces.iter().find(|r| r.name() == n) else {
                    continue;
                };
                let Some(client) = &trace.client else {
                    continue;
                };
                for s in services {
                    if s != client {
                        self.report(
                            Kind::BadField,
                            format!("actions '{name}'"),
                            format!(
                                "rpc_replay_trace_name '{n}': the trace's client is '{client}', \
                                 but action list '{}' runs on service '{s}' (upstream aborts: \
                                 calling RPC replay trace from wrong client)",
                                l.name()
                            ),
                        );
                    }
                }
            }
        }
    }
}
