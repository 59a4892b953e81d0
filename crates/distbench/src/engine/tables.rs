//! A test's traffic description compiled into index tables: services, RPCs,
//! action lists and their actions refer to each other by index, so the
//! engine never looks a name up while traffic runs.
//!
//! Defaults are upstream's (google/distbench 8a5cfae; the test table in
//! `tests/checks.rs` lists each): 16 B requests and 32 B responses for RPCs
//! without a payload or whose payload has neither `size` nor
//! `size_distribution_name`, one iteration per action without `iterations`,
//! unlimited iterations with them, one in flight, `constant` open-loop
//! spacing, no tracing, fan-out to `all`, every RPC sample kept, delays
//! slept unless the list (or else the test) asks to spin, at most 1000
//! handlers at once, a million RPCs pending.
//!
//! Multi-server channels ([`ChannelInfo`]) and RPC replay traces
//! ([`TraceInfo`]) are compiled here too; `check_test` has refused what
//! upstream refuses or aborts on ([`crate::check::channels`],
//! [`crate::check::replay`]).

use super::dist::Sampler;
use super::fanout::Fanout;
use crate::Error;
use crate::check::protocol::{self, Driver, GrpcVariant};
use crate::check::replay::{dependency, merged_records, waits_for_prior};
use crate::proto::rpc_replay_trace_record::TimingMode;
use crate::proto::{ConstraintList, DistributedSystemDescription, ServiceSpec, action};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub use crate::check::activity::Activity;
pub use crate::check::channels::Policy;

/// A service: its grid and instance names.
#[derive(Debug, Clone)]
pub struct ServiceInfo {
    pub name: String,
    pub spec: ServiceSpec,
    /// Instance names in index order (`svc/i`, or `svc/x/y[/z]` on grids).
    pub instances: Vec<String>,
    /// The RPC stack its instances serve (and are reached) with.
    pub protocol: super::driver::Protocol,
    /// The gRPC threading its protocol driver options ask for (`None` for
    /// the tcp driver). rackbench's grpc driver does not apply it yet;
    /// `check_test` warns when it differs from upstream's default.
    pub grpc: Option<GrpcVariant>,
    /// `ip_version` (4 or 6; 0 = the node's own) and `netdev_name` of its
    /// protocol driver options: which address the instances listen on.
    pub ip_version: i32,
    pub netdev: Option<String>,
    /// Its `multi_server_channels`, in order; empty when no client sends
    /// to the service (upstream builds no channel then).
    pub channels: Vec<ChannelInfo>,
}

/// A multi-server channel of a service: which instances it spreads RPCs
/// over and how.
#[derive(Debug, Clone)]
pub struct ChannelInfo {
    pub name: String,
    pub policy: Policy,
    /// `selected_instances` (all instances of the service).
    pub selected: Vec<usize>,
    /// Instances whose endpoint attributes satisfy these are members too;
    /// known once the peers are introduced.
    pub constraints: Option<ConstraintList>,
}

/// When a replayed RPC starts: `timing_ns` after this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// The test's traffic start (upstream's: the start time the sequencer
    /// sends plus 1 s); also for records of the prior-RPC modes with no
    /// dependency on this instance, and for `UNKNOWN`.
    TrafficStart,
    /// The start of this replay of the trace.
    TraceStart,
    /// The start of the last of its dependencies to start.
    PriorStart,
    /// The end of the last of its dependencies to end.
    PriorEnd,
}

/// Where a replayed RPC goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayTarget {
    /// This instance of the trace's server.
    Instance(usize),
    /// Through this channel of the trace's server (an index into its
    /// [`ServiceInfo::channels`]).
    Channel(usize),
}

/// One record of a replay trace, merged with the trace's defaults.
#[derive(Debug, Clone)]
pub struct ReplayRecord {
    pub timing_ns: i64,
    pub timing: Timing,
    /// The records it waits for (earlier indices), as `prior_rpc_distances`
    /// name them.
    pub deps: Vec<usize>,
    /// Replayed only by this client instance (`None`: by every instance).
    pub client_instance: Option<i32>,
    pub target: ReplayTarget,
    /// Whole-message sizes, as upstream pads them.
    pub request_size: i64,
    pub response_size: i64,
}

/// An RPC replay trace.
#[derive(Debug, Clone)]
pub struct TraceInfo {
    pub name: String,
    pub client: usize,
    pub server: usize,
    pub records: Vec<ReplayRecord>,
}

/// Where a payload size comes from.
#[derive(Debug, Clone, Copy)]
pub enum Size {
    Fixed(i64),
    /// Index into [`Tables::size_dists`].
    Dist(usize),
}

/// An RPC of `rpc_descriptions`, by index.
#[derive(Debug, Clone)]
pub struct RpcInfo {
    pub name: String,
    pub clients: Vec<usize>,
    pub server: usize,
    pub request: Size,
    pub response: Size,
    /// The joint request/response (or single size) distribution.
    pub joint: Option<Sampler>,
    pub fanout: Fanout,
    pub tracing_interval: i32,
    /// The server's handler: the action list named after the RPC.
    pub handler: usize,
    /// Its `multi_server_channel_name`: an index into the server's
    /// [`ServiceInfo::channels`]. The RPC then goes through the channel
    /// and `fanout` is not used.
    pub channel: Option<usize>,
}

/// How an open-loop action spaces its iterations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OpenLoop {
    Constant(Duration),
    Exponential(Duration),
    /// Iterations at multiples of the period in Unix time, on every
    /// instance at once.
    SyncBurst(Duration),
    /// As `SyncBurst`, instance i of n offset by i/n of the period.
    SyncBurstSpread(Duration),
}

/// An action's `iterations`.
#[derive(Debug, Clone, Copy)]
pub struct IterSpec {
    pub max_count: Option<i64>,
    pub max_duration: Option<Duration>,
    pub parallel: i64,
    pub open_loop: Option<OpenLoop>,
    pub warmup_iterations: i64,
    /// Iterations started this soon after the action's start are warm-up.
    pub warmup: Option<Duration>,
}

/// What an action does each iteration.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Rpc(usize),
    List(usize),
    Activity(usize),
    /// Replays this trace of [`Tables::traces`].
    Replay(usize),
    /// Only sets the response size of the list's RPC (response override).
    Nothing,
}

/// One action as used in one list.
#[derive(Debug, Clone)]
pub struct ActionInfo {
    pub name: String,
    /// Indices of the dependencies within the same list.
    pub deps: Vec<usize>,
    pub kind: Kind,
    pub iterations: Option<IterSpec>,
    pub send_response_when_done: bool,
    pub cancel_traffic_when_done: bool,
    pub predicates: Vec<String>,
    /// Index into [`Tables::delay_dists`].
    pub delay: Option<usize>,
    /// Indices into [`Tables::size_dists`].
    pub request_override: Option<usize>,
    pub response_override: Option<usize>,
}

/// An action list.
#[derive(Debug, Clone)]
pub struct ListInfo {
    pub name: String,
    pub actions: Vec<ActionInfo>,
    /// Reservoir size for RPC samples per invocation (0 keeps all).
    pub max_rpc_samples: usize,
    pub predicate_probabilities: Vec<(String, f32)>,
    /// Whether the delays of its actions busy-wait: the list's
    /// `delay_actions_by_spinning`, else the test's.
    pub delay_by_spinning: bool,
}

/// The working state of one activity for one run of an action, as upstream
/// allocates it when the action starts: the arrays are allocated (and the
/// data cache array filled) once, and each [`ActivityState::iterate`] does
/// only the work of one iteration.
#[derive(Debug)]
pub struct ActivityState {
    activity: Activity,
    /// `ConsumeCpu`'s array (refilled with random values each iteration),
    /// or `PolluteDataCache`'s (0, 1, 2, ... then incremented), as 32-bit
    /// integers like upstream's `int`.
    array: Vec<u32>,
    rng: rand::rngs::SmallRng,
}

impl ActivityState {
    /// Allocates what `activity` works on.
    pub fn new(activity: &Activity) -> ActivityState {
        let array = match *activity {
            Activity::ConsumeCpu { array_size } => vec![0; array_size],
            Activity::PolluteDataCache { array_size, .. } => {
                (0..array_size).map(|i| i as u32).collect()
            }
            _ => Vec::new(),
        };
        ActivityState {
            activity: activity.clone(),
            array,
            rng: rand::rngs::SmallRng::from_os_rng(),
        }
    }

    /// One iteration; returns a value computed from the work so that it
    /// cannot be optimised away. `SleepFor` sleeps the calling thread:
    /// an async caller should sleep itself instead.
    pub fn iterate(&mut self) -> u64 {
        match self.activity {
            Activity::ConsumeCpu { .. } => {
                for v in self.array.iter_mut() {
                    *v = self.rng.random();
                }
                self.array.sort_unstable();
                self.array
                    .iter()
                    .fold(0u64, |s, &x| s.wrapping_add(u64::from(x)))
            }
            Activity::PolluteDataCache { reads, .. } => {
                let n = self.array.len();
                if n == 0 {
                    return 0;
                }
                let mut sum = 0u64;
                for _ in 0..reads {
                    let i = self.rng.random_range(0..n);
                    sum = sum.wrapping_add(u64::from(self.array[i]));
                    self.array[i] = self.array[i].wrapping_add(1);
                }
                std::hint::black_box(sum)
            }
            Activity::PolluteInstructionCache { calls } => icache::run_spread(
                calls as u64,
                self.rng.random(),
                crate::check::activity::POLLUTED_FUNCTIONS,
            ),
            Activity::SleepFor { duration } => {
                std::thread::sleep(duration);
                0
            }
            Activity::SpinFor { duration } => {
                let end = Instant::now() + duration;
                let mut spins = 0u64;
                while Instant::now() < end {
                    spins = std::hint::black_box(spins.wrapping_add(1));
                }
                spins
            }
        }
    }
}

/// Message sizes of an RPC without request or response payload names (as
/// upstream).
pub const DEFAULT_REQUEST_SIZE: i64 = 16;
pub const DEFAULT_RESPONSE_SIZE: i64 = 32;

/// Pending RPCs per instance past which its traffic is cancelled as
/// overloaded, when the test sets no `overload_limits.max_pending_rpcs`:
/// upstream's default. A pending RPC costs rackbench a few KiB (its
/// request, HTTP/2 stream and the server's handler), so on a small host
/// memory can run out first; a test studying overload sets a lower limit.
pub const DEFAULT_MAX_PENDING_RPCS: i64 = 1_000_000;

/// Upstream's default `overload_limits.max_threads`.
pub const DEFAULT_MAX_THREADS: i64 = 1000;

/// The compiled test.
#[derive(Debug, Clone)]
pub struct Tables {
    pub services: Vec<ServiceInfo>,
    pub service_index: HashMap<String, usize>,
    pub rpcs: Vec<RpcInfo>,
    pub lists: Vec<ListInfo>,
    pub list_index: HashMap<String, usize>,
    pub size_dists: Vec<Sampler>,
    pub delay_dists: Vec<Sampler>,
    pub activities: Vec<(String, Activity)>,
    pub traces: Vec<TraceInfo>,
    /// The test's `delay_actions_by_spinning`; each list has its own in
    /// [`ListInfo::delay_by_spinning`] (which an engine should use).
    pub delay_by_spinning: bool,
    pub max_pending_rpcs: i64,
    /// Handlers (RPCs whose action list has actions) an instance may run at
    /// once: `overload_limits.max_threads` (1000).
    pub max_threads: i64,
}

impl Tables {
    /// Compiles a test that passed `check_test`. Errors name what the
    /// engine cannot run (and what it expected), e.g. a protocol.
    pub fn new(t: &DistributedSystemDescription) -> Result<Tables, Error> {
        let (services, service_index) = compile_services(t).map_err(Error::Input)?;
        let service = |name: &str, what: &str| lookup_service(&service_index, name, what);
        let (size_dists, size_index) =
            compile_samplers(&t.size_distribution_configs).map_err(Error::Input)?;
        let (delay_dists, delay_index) =
            compile_samplers(&t.delay_distribution_configs).map_err(Error::Input)?;
        let payload_sizes = compile_payload_sizes(t, &size_index).map_err(Error::Input)?;

        let mut list_index = HashMap::new();
        for (i, l) in t.action_lists.iter().enumerate() {
            list_index.insert(l.name().to_string(), i);
        }
        let (rpcs, rpc_index) = compile_rpcs(t, &services, &service, &payload_sizes, &list_index)
            .map_err(Error::Input)?;

        let mut traces = Vec::new();
        let mut trace_index = HashMap::new();
        for tr in &t.rpc_replay_traces {
            trace_index.insert(tr.name().to_string(), traces.len());
            traces.push(trace_info(tr, &services, &service).map_err(Error::Input)?);
        }

        let mut activities = Vec::new();
        let mut activity_index = HashMap::new();
        for a in &t.activity_configs {
            activity_index.insert(a.name().to_string(), activities.len());
            let activity = crate::check::activity::parse(a)
                .map_err(|e| Error::Input(format!("activity config '{}': {e}", a.name())))?;
            activities.push((a.name().to_string(), activity));
        }

        let names = Names {
            actions: t.actions.iter().map(|a| (a.name(), a)).collect(),
            rpc: &rpc_index,
            list: &list_index,
            activity: &activity_index,
            trace: &trace_index,
            delay: &delay_index,
            payload_sizes: &payload_sizes,
        };
        let mut lists = Vec::new();
        for l in &t.action_lists {
            lists.push(compile_list(t, l, &names).map_err(Error::Input)?);
        }
        let max_pending_rpcs = t
            .overload_limits
            .as_ref()
            .and_then(|o| o.max_pending_rpcs)
            .unwrap_or(DEFAULT_MAX_PENDING_RPCS);
        Ok(Tables {
            services,
            service_index,
            rpcs,
            lists,
            list_index,
            size_dists,
            delay_dists,
            activities,
            traces,
            delay_by_spinning: t.delay_actions_by_spinning(),
            max_pending_rpcs,
            max_threads: t
                .overload_limits
                .as_ref()
                .map_or(DEFAULT_MAX_THREADS, |o| o.max_threads()),
        })
    }
}

/// A service's index by name, or an error naming `what` refers to it.
fn lookup_service(index: &HashMap<String, usize>, name: &str, what: &str) -> Result<usize, String> {
    index
        .get(name)
        .copied()
        .ok_or_else(|| format!("{what}: unknown service '{name}'"))
}

/// Compiles the test's services (and their channels) with their index by
/// name.
fn compile_services(
    t: &DistributedSystemDescription,
) -> Result<(Vec<ServiceInfo>, HashMap<String, usize>), String> {
    let mut services = Vec::new();
    let mut service_index = HashMap::new();
    let dependent = crate::check::channels::dependent_services(t);
    for s in &t.services {
        service_index.insert(s.name().to_string(), services.len());
        let resolved = protocol::resolve(s, t)
            .map_err(|e| format!("service '{}': {}: {}", s.name(), e.location, e.message))?;
        let options = resolved.options;
        let (protocol, grpc) = match resolved.driver {
            Driver::Grpc(v) => (super::driver::Protocol::Grpc, Some(v)),
            Driver::Tcp => (super::driver::Protocol::Tcp, None),
        };
        let ip_version = options.map_or(0, |o| o.ip_version());
        if ![0, 4, 6].contains(&ip_version) {
            return Err(format!(
                "protocol_driver_options '{}': ip_version must be 4 or 6, got {ip_version}",
                options.map_or("", |o| o.name())
            ));
        }
        let instances = crate::placement::instance_names(s);
        let channels = if dependent.contains(s.name()) {
            compile_channels(s, instances.len())?
        } else {
            Vec::new()
        };
        services.push(ServiceInfo {
            name: s.name().to_string(),
            spec: s.clone(),
            instances,
            protocol,
            grpc,
            ip_version,
            netdev: options
                .and_then(|o| o.netdev_name.clone())
                .filter(|n| !n.is_empty()),
            channels,
        });
    }
    Ok((services, service_index))
}

/// Compiles the `multi_server_channels` of service `s` (of `instances`
/// instances).
fn compile_channels(s: &ServiceSpec, instances: usize) -> Result<Vec<ChannelInfo>, String> {
    let mut channels = Vec::new();
    for ch in &s.multi_server_channels {
        let what = format!(
            "service '{}': multi_server_channels '{}'",
            s.name(),
            ch.name()
        );
        let (policy, _) =
            crate::check::channels::settings(ch).map_err(|e| format!("{what}: {e}"))?;
        let mut selected = Vec::new();
        for &i in &ch.selected_instances {
            match usize::try_from(i) {
                Ok(i) if i < instances => selected.push(i),
                _ => {
                    return Err(format!(
                        "{what}: selected_instances {i} is out of range for the service"
                    ));
                }
            }
        }
        if selected.is_empty() && ch.constraints.is_none() {
            return Err(format!(
                "{what}: no selected_instances and no constraints: the channel has \
                 no member"
            ));
        }
        channels.push(ChannelInfo {
            name: ch.name().to_string(),
            policy,
            selected,
            constraints: ch.constraints.clone(),
        });
    }
    Ok(channels)
}

/// Compiles distributions with their index by name.
fn compile_samplers(
    configs: &[crate::proto::DistributionConfig],
) -> Result<(Vec<Sampler>, HashMap<String, usize>), String> {
    let mut dists = Vec::new();
    let mut index = HashMap::new();
    for d in configs {
        index.insert(d.name().to_string(), dists.len());
        dists.push(Sampler::new(d)?);
    }
    Ok((dists, index))
}

/// A payload's size: its distribution, else its fixed size, else (neither
/// given) `None`, the RPC's default, as upstream.
fn compile_payload_sizes(
    t: &DistributedSystemDescription,
    size_index: &HashMap<String, usize>,
) -> Result<HashMap<String, Option<Size>>, String> {
    let mut payload_sizes: HashMap<String, Option<Size>> = HashMap::new();
    for p in &t.payload_descriptions {
        let size = match (&p.size_distribution_name, p.size) {
            (Some(d), _) => Some(Size::Dist(*size_index.get(d.as_str()).ok_or_else(
                || {
                    format!(
                        "payload '{}': size_distribution_name: unknown size distribution '{d}'",
                        p.name()
                    )
                },
            )?)),
            (None, Some(size)) => Some(Size::Fixed(size)),
            (None, None) => None,
        };
        payload_sizes.insert(p.name().to_string(), size);
    }
    Ok(payload_sizes)
}

/// Compiles the test's RPCs with their index by name.
fn compile_rpcs(
    t: &DistributedSystemDescription,
    services: &[ServiceInfo],
    service: &dyn Fn(&str, &str) -> Result<usize, String>,
    payload_sizes: &HashMap<String, Option<Size>>,
    list_index: &HashMap<String, usize>,
) -> Result<(Vec<RpcInfo>, HashMap<String, usize>), String> {
    let joint: HashMap<&str, &crate::proto::DistributionConfig> = t
        .distribution_config
        .iter()
        .map(|d| (d.name(), d))
        .collect();
    // An unknown payload name gets the default too, as upstream
    // (check_test says so).
    let payload = |name: Option<&String>, default: i64| -> Size {
        name.and_then(|n| payload_sizes.get(n.as_str()).copied().flatten())
            .unwrap_or(Size::Fixed(default))
    };
    let mut rpc_index = HashMap::new();
    let mut rpcs = Vec::new();
    for r in &t.rpc_descriptions {
        let what = format!("rpc '{}'", r.name());
        let mut clients = Vec::new();
        for c in &r.client {
            clients.push(service(c, &format!("{what}: client"))?);
        }
        let joint = match &r.distribution_config_name {
            None => None,
            Some(n) => Some(Sampler::new(joint.get(n.as_str()).ok_or_else(|| {
                format!("{what}: distribution_config_name: unknown distribution '{n}'")
            })?)?),
        };
        let server = service(r.server(), &format!("{what}: server"))?;
        let channel = match &r.multi_server_channel_name {
            None => None,
            Some(ch) => Some(
                services[server]
                    .channels
                    .iter()
                    .position(|c| &c.name == ch)
                    .ok_or_else(|| {
                        format!(
                            "{what}: multi_server_channel_name: service '{}' has no \
                             multi_server_channels named '{ch}'",
                            r.server()
                        )
                    })?,
            ),
        };
        rpc_index.insert(r.name().to_string(), rpcs.len());
        rpcs.push(RpcInfo {
            name: r.name().to_string(),
            clients,
            server,
            request: payload(r.request_payload_name.as_ref(), DEFAULT_REQUEST_SIZE),
            response: payload(r.response_payload_name.as_ref(), DEFAULT_RESPONSE_SIZE),
            joint,
            fanout: Fanout::parse(r.fanout_filter())
                .map_err(|e| format!("{what}: fanout_filter: {e}"))?,
            tracing_interval: r.tracing_interval(),
            handler: *list_index.get(r.name()).ok_or_else(|| {
                format!(
                    "{what}: no action list is named '{}' (its server handler)",
                    r.name()
                )
            })?,
            channel,
        });
    }
    Ok((rpcs, rpc_index))
}

/// What an action list's actions refer to by name.
struct Names<'a> {
    actions: HashMap<&'a str, &'a crate::proto::Action>,
    rpc: &'a HashMap<String, usize>,
    list: &'a HashMap<String, usize>,
    activity: &'a HashMap<String, usize>,
    trace: &'a HashMap<String, usize>,
    delay: &'a HashMap<String, usize>,
    payload_sizes: &'a HashMap<String, Option<Size>>,
}

/// Compiles action list `l`.
fn compile_list(
    t: &DistributedSystemDescription,
    l: &crate::proto::ActionList,
    names: &Names,
) -> Result<ListInfo, String> {
    let lwhat = format!("action list '{}'", l.name());
    let position: HashMap<&str, usize> = l
        .action_names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut list_actions = Vec::new();
    for name in &l.action_names {
        let what = format!("{lwhat}: action '{name}'");
        let a = names
            .actions
            .get(name.as_str())
            .ok_or_else(|| format!("{lwhat}: unknown action '{name}'"))?;
        let mut deps = Vec::new();
        for d in &a.dependencies {
            match position.get(d.as_str()) {
                Some(&i) if i < list_actions.len() => deps.push(i),
                _ => {
                    return Err(format!(
                        "{what}: dependency '{d}' is not an earlier action of the list"
                    ));
                }
            }
        }
        list_actions.push(compile_action(name, a, deps, &what, names)?);
    }
    Ok(ListInfo {
        name: l.name().to_string(),
        actions: list_actions,
        max_rpc_samples: usize::try_from(l.max_rpc_samples()).unwrap_or(0),
        predicate_probabilities: l
            .predicate_probabilities
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        delay_by_spinning: l
            .delay_actions_by_spinning
            .unwrap_or(t.delay_actions_by_spinning()),
    })
}

/// Compiles action `a` (named `name`, with dependencies `deps`) of a list;
/// `what` names it in errors.
fn compile_action(
    name: &str,
    a: &crate::proto::Action,
    deps: Vec<usize>,
    what: &str,
    names: &Names,
) -> Result<ActionInfo, String> {
    let kind = match &a.action {
        Some(action::Action::RpcName(r)) => Kind::Rpc(
            *names
                .rpc
                .get(r.as_str())
                .ok_or_else(|| format!("{what}: unknown rpc '{r}'"))?,
        ),
        Some(action::Action::ActionListName(n)) => Kind::List(
            *names
                .list
                .get(n.as_str())
                .ok_or_else(|| format!("{what}: unknown action list '{n}'"))?,
        ),
        Some(action::Action::ActivityConfigName(n)) => Kind::Activity(
            *names
                .activity
                .get(n.as_str())
                .ok_or_else(|| format!("{what}: unknown activity config '{n}'"))?,
        ),
        Some(action::Action::RpcReplayTraceName(n)) => Kind::Replay(
            *names
                .trace
                .get(n.as_str())
                .ok_or_else(|| format!("{what}: unknown rpc replay trace '{n}'"))?,
        ),
        None if a.response_payload_override.is_some() => Kind::Nothing,
        None => {
            return Err(format!(
                "{what}: needs one of rpc_name, action_list_name, activity_config_name"
            ));
        }
    };
    // An override names a payload: its size distribution.
    let size_ref = |n: &Option<String>, field: &str| -> Result<Option<usize>, String> {
        match n {
            None => Ok(None),
            Some(n) => match names.payload_sizes.get(n.as_str()) {
                Some(Some(Size::Dist(d))) => Ok(Some(*d)),
                Some(_) => Err(format!(
                    "{what}: {field}: payload '{n}' has no size_distribution_name"
                )),
                None => Err(format!("{what}: {field}: unknown payload '{n}'")),
            },
        }
    };
    Ok(ActionInfo {
        name: name.to_string(),
        deps,
        kind,
        iterations: a
            .iterations
            .as_ref()
            .map(|it| iter_spec(it, what))
            .transpose()?,
        send_response_when_done: a.send_response_when_done(),
        cancel_traffic_when_done: a.cancel_traffic_when_done(),
        predicates: a.predicates.clone(),
        delay: match &a.delay_distribution_name {
            None => None,
            Some(n) => Some(*names.delay.get(n.as_str()).ok_or_else(|| {
                format!("{what}: delay_distribution_name: unknown delay distribution '{n}'")
            })?),
        },
        request_override: size_ref(&a.request_payload_override, "request_payload_override")?,
        response_override: size_ref(&a.response_payload_override, "response_payload_override")?,
    })
}

impl Tables {
    /// Instance `instance` of service `service` numbered among all the
    /// test's instances, services in order: upstream's trace id of the
    /// instance (`EnumerateServiceInstanceIds`), which trace contexts
    /// carry as `engine_ids`.
    pub fn instance_id(&self, service: usize, instance: usize) -> i64 {
        let before: usize = self.services[..service]
            .iter()
            .map(|s| s.instances.len())
            .sum();
        (before + instance) as i64
    }
}

/// Compiles a replay trace (whose services are in `services`).
fn trace_info(
    tr: &crate::proto::RpcReplayTrace,
    services: &[ServiceInfo],
    service: &dyn Fn(&str, &str) -> Result<usize, String>,
) -> Result<TraceInfo, String> {
    let what = format!("rpc replay trace '{}'", tr.name());
    let client = service(tr.client(), &format!("{what}: client"))?;
    let server = service(tr.server(), &format!("{what}: server"))?;
    let mut channels = Vec::new();
    for n in &tr.multiserver_channel_names {
        channels.push(
            services[server]
                .channels
                .iter()
                .position(|c| &c.name == n)
                .ok_or_else(|| {
                    format!(
                        "{what}: multiserver_channel_names: service '{}' has no \
                         multi_server_channels named '{n}'",
                        tr.server()
                    )
                })?,
        );
    }
    let mut records = Vec::new();
    for (i, r) in merged_records(tr).iter().enumerate() {
        let at = format!("{what}: records[{i}]");
        let timing = match r.timing_mode() {
            TimingMode::RelativeToTraceStart => Timing::TraceStart,
            TimingMode::RelativeToPriorRpcStart => Timing::PriorStart,
            TimingMode::RelativeToPriorRpcEnd => Timing::PriorEnd,
            TimingMode::RelativeToTrafficStart | TimingMode::Unknown => Timing::TrafficStart,
        };
        if !r.prior_rpc_distances.is_empty() && !waits_for_prior(r.timing_mode()) {
            return Err(format!(
                "{at}: prior_rpc_distances need timing_mode RELATIVE_TO_PRIOR_RPC_START or \
                 RELATIVE_TO_PRIOR_RPC_END"
            ));
        }
        let mut deps = Vec::new();
        for &d in &r.prior_rpc_distances {
            deps.push(
                dependency(i, d).ok_or_else(|| {
                    format!("{at}: prior_rpc_distances {d} names no earlier record")
                })?,
            );
        }
        let target = match r.multi_server_channel_name_index {
            Some(m) => ReplayTarget::Channel(
                usize::try_from(m)
                    .ok()
                    .and_then(|m| channels.get(m).copied())
                    .ok_or_else(|| {
                        format!("{at}: multi_server_channel_name_index {m} is out of range")
                    })?,
            ),
            None => ReplayTarget::Instance(
                usize::try_from(r.server_instance())
                    .ok()
                    .filter(|&s| s < services[server].instances.len())
                    .ok_or_else(|| {
                        format!(
                            "{at}: server_instance {} is not an instance of the server",
                            r.server_instance()
                        )
                    })?,
            ),
        };
        records.push(ReplayRecord {
            timing_ns: r.timing_ns(),
            timing,
            deps,
            client_instance: r.client_instance,
            target,
            request_size: i64::from(r.request_size().max(0)),
            response_size: i64::from(r.response_size().max(0)),
        });
    }
    Ok(TraceInfo {
        name: tr.name().to_string(),
        client,
        server,
        records,
    })
}

fn iter_spec(it: &crate::proto::Iterations, what: &str) -> Result<IterSpec, String> {
    let open_loop = match it.open_loop_interval_ns {
        None => None,
        Some(ns) if ns <= 0 => {
            return Err(format!(
                "{what}: iterations.open_loop_interval_ns must be positive, got {ns}"
            ));
        }
        Some(ns) => {
            let period = Duration::from_nanos(ns as u64);
            Some(match it.open_loop_interval_distribution() {
                "constant" | "" => OpenLoop::Constant(period),
                "exponential" => OpenLoop::Exponential(period),
                "sync_burst" => OpenLoop::SyncBurst(period),
                "sync_burst_spread" => OpenLoop::SyncBurstSpread(period),
                other => {
                    return Err(format!(
                        "{what}: unknown open_loop_interval_distribution '{other}' \
                         (expected constant, exponential, sync_burst or sync_burst_spread)"
                    ));
                }
            })
        }
    };
    if open_loop.is_none() {
        if it.max_parallel_iterations() < 1 {
            return Err(format!(
                "{what}: iterations.max_parallel_iterations must be at least 1, got {}",
                it.max_parallel_iterations()
            ));
        }
        if let Some(n) = it.max_iteration_count
            && n < 1
        {
            return Err(format!(
                "{what}: iterations.max_iteration_count must be at least 1, got {n}"
            ));
        }
    }
    Ok(IterSpec {
        max_count: it.max_iteration_count.map(i64::from),
        max_duration: it
            .max_duration_us
            .map(|us| Duration::from_micros(us.max(0) as u64)),
        parallel: it.max_parallel_iterations(),
        open_loop,
        warmup_iterations: it.warmup_iterations(),
        warmup: it
            .warmup_ns
            .filter(|ns| *ns > 0)
            .map(|ns| Duration::from_nanos(ns as u64)),
    })
}
