//! Multi-server channels (`ServiceSpec.multi_server_channels`) as
//! upstream's engine sets them up (google/distbench 8a5cfae,
//! `DistBenchEngine::ConnectToPeers` and the grpc driver's
//! `SetupMultiServerChannel`):
//!
//! * a client sets up the channels of every service it sends RPCs to (or
//!   replays a trace to), its "dependent" services; channels of other
//!   services are never built, and never checked;
//! * a channel's members are its `selected_instances` (each must be an
//!   instance of the service) and every instance whose endpoint attributes
//!   (its node's attributes, then `index` or `x_index`, `y_index`,
//!   `z_index`) satisfy `constraints`, when given; no member at all is an
//!   error (`No matching constraints, and no selected_instances field`);
//! * `channel_settings` are read for `policy` only: the gRPC load-balancing
//!   policy, `round_robin` by default. rackbench picks the instance itself
//!   over its connection to each member: `round_robin` cycles through the
//!   members (in instance order, starting at a random one, as gRPC's
//!   policy), `pick_first` sends everything to the first member. Other
//!   policies (gRPC's `grpclb`, `ring_hash`, ...) are refused by name.
//!
//! An RPC with `multi_server_channel_name` sends one RPC per iteration
//! through the channel of its server service (its `fanout_filter` is not
//! read), and the sample goes under the instance that answered.

use super::{Checker, Kind};
use crate::Error;
use crate::proto::{DistributedSystemDescription, MultiServerChannel};
use std::collections::BTreeSet;

/// How a channel picks the instance of each RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// One member after the other.
    RoundRobin,
    /// Always the first member.
    PickFirst,
}

/// The policies rackbench's channels have.
pub const POLICIES: [&str; 2] = ["round_robin", "pick_first"];

/// A channel's `channel_settings`, read as upstream reads them: the first
/// `policy` with a string value (one with an `int64_value` is skipped, as
/// upstream logs and skips it), `round_robin` without one. `Err` names a
/// policy rackbench does not have. The second value lists the settings
/// that nothing reads, for warnings.
pub fn settings(ch: &MultiServerChannel) -> Result<(Policy, Vec<String>), Error> {
    let mut ignored = Vec::new();
    let mut policy: Option<&str> = None;
    for s in &ch.channel_settings {
        match s.name.as_deref() {
            None | Some("") => ignored.push("a channel setting without a name".to_string()),
            Some("policy") => {
                if s.int64_value.is_some() {
                    ignored.push("'policy' with an int64_value (it must be a string)".into());
                } else if let (None, Some(v)) = (policy, s.string_value.as_deref()) {
                    policy = Some(v);
                }
            }
            Some(other) => ignored.push(format!("'{other}'")),
        }
    }
    let policy = match policy.unwrap_or("round_robin") {
        "round_robin" => Policy::RoundRobin,
        "pick_first" => Policy::PickFirst,
        other => {
            return Err(Error::Input(format!(
                "channel_settings 'policy': '{other}' is not supported by rackbench (it has {}; \
                 upstream hands the name to gRPC core)",
                POLICIES.join(", ")
            )));
        }
    };
    Ok((policy, ignored))
}

/// The services whose channels some client sets up: the servers of RPCs
/// and of replay traces.
pub fn dependent_services(test: &DistributedSystemDescription) -> BTreeSet<&str> {
    test.rpc_descriptions
        .iter()
        .filter(|r| !r.client.is_empty())
        .map(|r| r.server())
        .chain(
            test.rpc_replay_traces
                .iter()
                .filter(|t| t.client.is_some())
                .map(|t| t.server()),
        )
        .collect()
}

impl Checker<'_> {
    /// The channels of every dependent service: instances in range, some
    /// member, a policy rackbench has; unread settings are warned about.
    pub(super) fn channels(&mut self) {
        let t = self.test;
        let dependent = dependent_services(t);
        for s in &t.services {
            if !dependent.contains(s.name()) {
                continue;
            }
            let loc = format!("services '{}'", s.name());
            let count = crate::placement::instance_count(s);
            for ch in &s.multi_server_channels {
                let what = format!("multi_server_channels '{}'", ch.name());
                for &i in &ch.selected_instances {
                    if usize::try_from(i).map_or(true, |i| i >= count) {
                        self.report(
                            Kind::BadField,
                            &loc,
                            format!(
                                "{what}: selected_instances {i} is out of range for the service \
                                 (instances 0 to {}; upstream: selected_instances out of range \
                                 for service)",
                                count.saturating_sub(1)
                            ),
                        );
                    }
                }
                if ch.selected_instances.is_empty() && ch.constraints.is_none() {
                    self.report(
                        Kind::BadField,
                        &loc,
                        format!(
                            "{what}: the channel has no member: give selected_instances or \
                             constraints (upstream: No matching constraints, and no \
                             selected_instances field)"
                        ),
                    );
                }
                match settings(ch) {
                    Err(e) => self.report(Kind::Unsupported, &loc, format!("{what}: {e}")),
                    Ok((_, ignored)) => {
                        for i in ignored {
                            self.report(
                                Kind::NotApplied,
                                &loc,
                                format!(
                                    "{what}: channel_settings {i}: ignored (upstream reads only \
                                     a string 'policy')"
                                ),
                            );
                        }
                    }
                }
            }
        }
    }
}
