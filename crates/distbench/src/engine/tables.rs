//! A test's traffic description compiled into index tables: services, RPCs,
//! action lists and their actions refer to each other by index, so the
//! engine never looks a name up while traffic runs.

use super::dist::Sampler;
use super::fanout::Fanout;
use crate::proto::{DistributedSystemDescription, ServiceSpec, action};
use std::collections::HashMap;
use std::time::Duration;

/// A service: its grid and instance names.
#[derive(Debug, Clone)]
pub struct ServiceInfo {
    pub name: String,
    pub spec: ServiceSpec,
    /// Instance names in index order (`svc/i`, or `svc/x/y[/z]` on grids).
    pub instances: Vec<String>,
    /// The RPC stack its instances serve (and are reached) with.
    pub protocol: super::driver::Protocol,
    /// `ip_version` (4 or 6; 0 = the node's own) and `netdev_name` of its
    /// protocol driver options: which address the instances listen on.
    pub ip_version: i32,
    pub netdev: Option<String>,
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
}

/// A CPU or memory activity (`activity_configs`).
#[derive(Debug, Clone)]
pub enum Activity {
    /// Sorts an array of `array_size` random integers.
    ConsumeCpu { array_size: usize },
    /// Reads and increments random elements of an `array_size` array.
    PolluteDataCache { array_size: usize, reads: usize },
    /// Calls `calls` of the thousands of generated functions of
    /// [`icache`] in a random walk.
    PolluteInstructionCache { calls: usize },
    /// Sleeps (off CPU) for `duration`.
    SleepFor { duration: Duration },
    /// Busy-waits (on CPU) for `duration`.
    SpinFor { duration: Duration },
}

/// Message sizes of an RPC without request or response payload names (as
/// upstream).
pub const DEFAULT_REQUEST_SIZE: i64 = 16;
pub const DEFAULT_RESPONSE_SIZE: i64 = 32;

/// Pending RPCs per instance past which its traffic is cancelled as
/// overloaded, when the test sets no `overload_limits.max_pending_rpcs`.
/// Upstream's default is 1,000,000; a pending RPC costs rackbench a few KiB
/// (its request, HTTP/2 stream and the server's handler), so a million of
/// them per instance exhausts memory long before: an overloaded test fails
/// with "Too many RPCs pending" instead.
pub const DEFAULT_MAX_PENDING_RPCS: i64 = 20_000;

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
    pub delay_by_spinning: bool,
    pub max_pending_rpcs: i64,
    /// Handlers (RPCs whose action list has actions) an instance may run at
    /// once: `overload_limits.max_threads` (1000).
    pub max_threads: i64,
}

impl Tables {
    /// Compiles a test that passed `check_test`. Errors name what the
    /// engine cannot run (and what it expected), e.g. RPC replay traces.
    pub fn new(t: &DistributedSystemDescription) -> Result<Tables, String> {
        let mut services = Vec::new();
        let mut service_index = HashMap::new();
        for s in &t.services {
            service_index.insert(s.name().to_string(), services.len());
            let options = super::driver::options_of(
                s.protocol_driver_options_name.as_deref(),
                &t.protocol_driver_options,
            )
            .map_err(|e| format!("service '{}': {e}", s.name()))?;
            let protocol = super::driver::protocol_of(options, t.default_protocol())
                .map_err(|e| format!("service '{}': {e}", s.name()))?;
            let ip_version = options.map_or(0, |o| o.ip_version());
            if ![0, 4, 6].contains(&ip_version) {
                return Err(format!(
                    "protocol_driver_options '{}': ip_version must be 4 or 6, got {ip_version}",
                    options.map_or("", |o| o.name())
                ));
            }
            services.push(ServiceInfo {
                name: s.name().to_string(),
                spec: s.clone(),
                instances: crate::placement::instance_names(s),
                protocol,
                ip_version,
                netdev: options
                    .and_then(|o| o.netdev_name.clone())
                    .filter(|n| !n.is_empty()),
            });
        }
        let service = |name: &str, what: &str| {
            service_index
                .get(name)
                .copied()
                .ok_or_else(|| format!("{what}: unknown service '{name}'"))
        };

        let mut size_dists = Vec::new();
        let mut size_index = HashMap::new();
        for d in &t.size_distribution_configs {
            size_index.insert(d.name().to_string(), size_dists.len());
            size_dists.push(Sampler::new(d)?);
        }
        let mut delay_dists = Vec::new();
        let mut delay_index = HashMap::new();
        for d in &t.delay_distribution_configs {
            delay_index.insert(d.name().to_string(), delay_dists.len());
            delay_dists.push(Sampler::new(d)?);
        }
        let joint: HashMap<&str, &crate::proto::DistributionConfig> = t
            .distribution_config
            .iter()
            .map(|d| (d.name(), d))
            .collect();

        let mut payload_sizes = HashMap::new();
        for p in &t.payload_descriptions {
            let size = match (&p.size_distribution_name, p.size) {
                (Some(d), _) => Size::Dist(*size_index.get(d.as_str()).ok_or_else(|| {
                    format!(
                        "payload '{}': size_distribution_name: unknown size distribution '{d}'",
                        p.name()
                    )
                })?),
                (None, size) => Size::Fixed(i64::from(size.unwrap_or(0))),
            };
            payload_sizes.insert(p.name().to_string(), size);
        }
        let payload = |name: Option<&String>, default: i64, what: &str| -> Result<Size, String> {
            match name {
                None => Ok(Size::Fixed(default)),
                Some(n) => payload_sizes
                    .get(n.as_str())
                    .copied()
                    .ok_or_else(|| format!("{what}: unknown payload '{n}'")),
            }
        };

        let mut list_index = HashMap::new();
        for (i, l) in t.action_lists.iter().enumerate() {
            list_index.insert(l.name().to_string(), i);
        }
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
            rpc_index.insert(r.name().to_string(), rpcs.len());
            rpcs.push(RpcInfo {
                name: r.name().to_string(),
                clients,
                server: service(r.server(), &format!("{what}: server"))?,
                request: payload(r.request_payload_name.as_ref(), DEFAULT_REQUEST_SIZE, &what)?,
                response: payload(
                    r.response_payload_name.as_ref(),
                    DEFAULT_RESPONSE_SIZE,
                    &what,
                )?,
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
            });
            if r.multi_server_channel_name.is_some() {
                return Err(format!(
                    "{what}: multi_server_channel_name is not supported by rackbench's engine yet"
                ));
            }
        }

        let mut activities = Vec::new();
        let mut activity_index = HashMap::new();
        for a in &t.activity_configs {
            activity_index.insert(a.name().to_string(), activities.len());
            activities.push((a.name().to_string(), compile_activity(a)?));
        }

        let actions: HashMap<&str, &crate::proto::Action> =
            t.actions.iter().map(|a| (a.name(), a)).collect();
        let mut lists = Vec::new();
        for l in &t.action_lists {
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
                let a = actions
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
                let kind = match &a.action {
                    Some(action::Action::RpcName(r)) => Kind::Rpc(
                        *rpc_index
                            .get(r.as_str())
                            .ok_or_else(|| format!("{what}: unknown rpc '{r}'"))?,
                    ),
                    Some(action::Action::ActionListName(n)) => Kind::List(
                        *list_index
                            .get(n.as_str())
                            .ok_or_else(|| format!("{what}: unknown action list '{n}'"))?,
                    ),
                    Some(action::Action::ActivityConfigName(n)) => Kind::Activity(
                        *activity_index
                            .get(n.as_str())
                            .ok_or_else(|| format!("{what}: unknown activity config '{n}'"))?,
                    ),
                    Some(action::Action::RpcReplayTraceName(n)) => {
                        return Err(format!(
                            "{what}: rpc_replay_trace_name '{n}': RPC replay traces are not \
                             supported by rackbench's engine yet"
                        ));
                    }
                    None if a.response_payload_override.is_some() => Kind::Nothing,
                    None => {
                        return Err(format!(
                            "{what}: needs one of rpc_name, action_list_name, activity_config_name"
                        ));
                    }
                };
                let size_ref = |n: &Option<String>, field: &str| -> Result<Option<usize>, String> {
                    match n {
                        None => Ok(None),
                        Some(n) => size_index
                            .get(n.as_str())
                            .copied()
                            .map(Some)
                            .ok_or_else(|| {
                                format!("{what}: {field}: unknown size distribution '{n}'")
                            }),
                    }
                };
                list_actions.push(ActionInfo {
                    name: name.clone(),
                    deps,
                    kind,
                    iterations: a
                        .iterations
                        .as_ref()
                        .map(|it| iter_spec(it, &what))
                        .transpose()?,
                    send_response_when_done: a.send_response_when_done(),
                    cancel_traffic_when_done: a.cancel_traffic_when_done(),
                    predicates: a.predicates.clone(),
                    delay: match &a.delay_distribution_name {
                        None => None,
                        Some(n) => Some(*delay_index.get(n.as_str()).ok_or_else(|| {
                            format!(
                                "{what}: delay_distribution_name: unknown delay distribution '{n}'"
                            )
                        })?),
                    },
                    request_override: size_ref(
                        &a.request_payload_override,
                        "request_payload_override",
                    )?,
                    response_override: size_ref(
                        &a.response_payload_override,
                        "response_payload_override",
                    )?,
                });
            }
            lists.push(ListInfo {
                name: l.name().to_string(),
                actions: list_actions,
                max_rpc_samples: usize::try_from(l.max_rpc_samples()).unwrap_or(0),
                predicate_probabilities: l
                    .predicate_probabilities
                    .iter()
                    .map(|(k, v)| (k.clone(), *v))
                    .collect(),
            });
        }
        if !t.rpc_replay_traces.is_empty() && lists.is_empty() {
            return Err("rpc_replay_traces are not supported by rackbench's engine yet".into());
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
            delay_by_spinning: t.delay_actions_by_spinning(),
            max_pending_rpcs,
            max_threads: t.overload_limits.as_ref().map_or(1000, |o| o.max_threads()),
        })
    }
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
                "constant" => OpenLoop::Constant(period),
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
    Ok(IterSpec {
        max_count: it.max_iteration_count.map(i64::from),
        max_duration: it
            .max_duration_us
            .map(|us| Duration::from_micros(us.max(0) as u64)),
        parallel: it.max_parallel_iterations().max(1),
        open_loop,
        warmup_iterations: it.warmup_iterations(),
        warmup: it
            .warmup_ns
            .filter(|ns| *ns > 0)
            .map(|ns| Duration::from_nanos(ns as u64)),
    })
}

fn compile_activity(a: &crate::proto::ActivityConfig) -> Result<Activity, String> {
    let what = format!("activity config '{}'", a.name());
    let setting = |name: &str| a.activity_settings.iter().find(|s| s.name() == name);
    let int = |name: &str, default: i64| -> Result<usize, String> {
        let v = setting(name).and_then(|s| s.int64_value).unwrap_or(default);
        if v < 1 {
            return Err(format!(
                "{what}: {name} must be a positive integer, got {v}"
            ));
        }
        usize::try_from(v).map_err(|_| format!("{what}: {name} is too large: {v}"))
    };
    let known = [
        "activity_func",
        "array_size",
        "array_reads_per_iteration",
        "function_invocations_per_iteration",
        "duration_us",
    ];
    for s in &a.activity_settings {
        if !known.contains(&s.name()) {
            return Err(format!(
                "{what}: unknown activity setting '{}' (known: {})",
                s.name(),
                known.join(", ")
            ));
        }
    }
    let duration = || -> Result<Duration, String> {
        match setting("duration_us").and_then(|s| s.int64_value) {
            Some(us) if us >= 0 => Ok(Duration::from_micros(us as u64)),
            Some(us) => Err(format!(
                "{what}: duration_us must not be negative, got {us}"
            )),
            None => Err(format!("{what}: needs a duration_us setting")),
        }
    };
    match setting("activity_func").map(|s| s.string_value()) {
        Some("ConsumeCpu") => Ok(Activity::ConsumeCpu {
            array_size: int("array_size", 1000)?,
        }),
        Some("PolluteDataCache") => Ok(Activity::PolluteDataCache {
            array_size: int("array_size", 1000)?,
            reads: int("array_reads_per_iteration", 1000)?,
        }),
        Some("PolluteInstructionCache") => Ok(Activity::PolluteInstructionCache {
            calls: int("function_invocations_per_iteration", 1000)?,
        }),
        Some("SleepFor") => Ok(Activity::SleepFor {
            duration: duration()?,
        }),
        Some("SpinFor") => Ok(Activity::SpinFor {
            duration: duration()?,
        }),
        Some(other) => Err(format!(
            "{what}: activity_func '{other}' is not supported (supported: ConsumeCpu, \
             PolluteDataCache, PolluteInstructionCache, SleepFor, SpinFor)"
        )),
        None => Err(format!("{what}: needs an activity_func setting")),
    }
}
