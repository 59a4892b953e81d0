//! Which protocol driver a service gets, and with which settings, resolved
//! as upstream's node manager and driver allocator do (google/distbench
//! `distbench_node_manager.cc`, `protocol_driver_allocator.cc`,
//! `protocol_driver_grpc.cc`, checked at 8a5cfae). `check_test` and the
//! engine's tables both call [`resolve`].
//!
//! # Options
//!
//! A service's options are those named by its `protocol_driver_options_name`
//! (an empty name is an error), else the first entry named
//! `default_protocol_driver_options` (or unnamed), else none. The protocol
//! is their `protocol_name`, else the test's `default_protocol` (`grpc`).
//!
//! # Protocols
//!
//! `grpc` and `grpc_async_callback` are upstream's gRPC driver; `tcp` is
//! rackbench's own (the same messages as frames over plain TCP; it reads no
//! settings, and any given are reported as ignored); `homa`,
//! `mercury`, `double_barrel` and `composable_rpc_counter` are upstream
//! drivers rackbench does not have ([`Severity::Unsupported`]). Any other
//! name is an alias: the options of that name are used instead, up to 4
//! levels deep.
//!
//! # gRPC settings
//!
//! | setting | values | default |
//! |---|---|---|
//! | client `client_type` | `polling`, `callback` | `polling` (`callback` when the options are named `grpc_async`) |
//! | server `server_type` | `inline`, `handoff`, `polling` | `inline` (`handoff` for `grpc_async`) |
//! | server `threadpool_size` | at least 1 | one per CPU; read by `handoff` and `polling` servers only |
//! | server `threadpool_type` | `elastic` (or empty), `simple`, `null` | `elastic`; `mercury` needs Mercury |
//! | server `transport` | `tcp`, `homa` | `tcp`; `homa` needs the Homa kernel module |
//!
//! Upstream hands every server setting to gRPC as a channel argument too, so
//! any other server setting is a gRPC core option, which tonic does not
//! have: it is refused. Client settings other than `client_type` are read by
//! nobody upstream; they are reported as ignored.
//!
//! rackbench's gRPC driver is tonic on the node's tokio runtime: client
//! completions and server handlers run as tasks on one worker thread per
//! CPU, whatever the variant. A variant other than upstream's default, or
//! threading settings given explicitly, are therefore reported as not
//! reproduced ([`Severity::Warning`]); [`GrpcVariant`] carries them for an
//! engine that implements them.

use crate::proto::{
    DistributedSystemDescription, NamedSetting, ProtocolDriverOptions, ServiceSpec,
};

/// How bad a protocol problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Upstream refuses it too (a bad value, an unknown alias).
    Invalid,
    /// Upstream runs it, rackbench cannot.
    Unsupported,
    /// It runs, but not the way the setting asks (or the setting is
    /// ignored, as upstream ignores it).
    Warning,
}

/// One problem of a service's protocol driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverProblem {
    pub severity: Severity,
    /// What holds the offending field: `protocol_driver_options 'NAME'`,
    /// `default_protocol`, or `services 'NAME'`.
    pub location: String,
    pub message: String,
}

/// gRPC's client side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientType {
    /// One thread polls the completion queue and runs the callbacks.
    Polling,
    /// gRPC's callback API: callbacks run on gRPC's own threads.
    Callback,
}

/// gRPC's server side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerType {
    /// The handler runs on the thread that received the RPC.
    Inline,
    /// The handler is handed to a thread pool.
    Handoff,
    /// An asynchronous server polling its completion queue, handlers on a
    /// thread pool.
    Polling,
}

/// Upstream's thread pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadpoolType {
    /// Grows past its size when every thread is busy (`elastic` or empty).
    Elastic,
    /// A fixed number of threads.
    Simple,
    /// Runs each task on a thread of its own.
    Null,
}

/// The gRPC driver's threading, as the options ask for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcVariant {
    pub client_type: ClientType,
    pub server_type: ServerType,
    /// Threads of a `handoff` or `polling` server's pool; `None` for one per
    /// CPU (upstream's default) and for `inline` servers (no pool).
    pub threadpool_size: Option<i64>,
    pub threadpool_type: ThreadpoolType,
}

impl Default for GrpcVariant {
    fn default() -> Self {
        GrpcVariant {
            client_type: ClientType::Polling,
            server_type: ServerType::Inline,
            threadpool_size: None,
            threadpool_type: ThreadpoolType::Elastic,
        }
    }
}

/// The driver rackbench runs for a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Driver {
    Grpc(GrpcVariant),
    /// rackbench's plain-TCP framing (not an upstream driver).
    Tcp,
}

/// A service's resolved protocol driver.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved<'a> {
    /// The options the driver gets, after aliases (`None`: defaults only).
    pub options: Option<&'a ProtocolDriverOptions>,
    /// The protocol name it runs (`grpc`, `grpc_async_callback` or `tcp`).
    pub protocol: String,
    pub driver: Driver,
    /// Warnings (never errors) about settings it does not apply.
    pub warnings: Vec<DriverProblem>,
}

/// Upstream's drivers that rackbench does not have, and why.
const MISSING: [(&str, &str); 4] = [
    (
        "homa",
        "the Homa transport needs the Homa kernel module and upstream's homa driver, which \
         rackbench does not have (upstream refuses it too unless built with homa)",
    ),
    (
        "mercury",
        "the Mercury RPC library is not part of rackbench (upstream refuses it too unless built \
         with mercury)",
    ),
    (
        "double_barrel",
        "upstream's double_barrel test driver (two drivers behind one) is not implemented",
    ),
    (
        "composable_rpc_counter",
        "upstream's composable_rpc_counter test driver is not implemented",
    ),
];

/// The protocol names rackbench runs.
pub const RUNS: [&str; 3] = ["grpc", "grpc_async_callback", "tcp"];

/// How deep protocol aliases may nest (upstream's limit).
pub const MAX_ALIAS_DEPTH: usize = 4;

fn options_location(o: Option<&ProtocolDriverOptions>) -> String {
    match o {
        Some(o) => format!("protocol_driver_options '{}'", o.name()),
        None => "default_protocol".into(),
    }
}

fn problem(
    severity: Severity,
    location: impl Into<String>,
    message: impl Into<String>,
) -> DriverProblem {
    DriverProblem {
        severity,
        location: location.into(),
        message: message.into(),
    }
}

/// The options upstream resolves the alias `name` to: the first entry of
/// that name, or for the empty name the first unnamed one or the one named
/// `default_protocol_driver_options`.
fn alias<'a>(
    name: &str,
    options: &'a [ProtocolDriverOptions],
) -> Option<&'a ProtocolDriverOptions> {
    options.iter().find(|o| {
        o.name() == name || (name.is_empty() && o.name() == "default_protocol_driver_options")
    })
}

/// Resolves the driver of `service` in `test`; the error is the first
/// problem that stops it (invalid or unsupported).
pub fn resolve<'a>(
    service: &ServiceSpec,
    test: &'a DistributedSystemDescription,
) -> Result<Resolved<'a>, DriverProblem> {
    let all = &test.protocol_driver_options;
    let mut options = match service.protocol_driver_options_name.as_deref() {
        Some("") => {
            return Err(problem(
                Severity::Invalid,
                format!("services '{}'", service.name()),
                "protocol_driver_options_name: an empty name cannot be specified",
            ));
        }
        Some(name) => Some(all.iter().find(|o| o.name() == name).ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|o| o.name()).collect();
            problem(
                Severity::Invalid,
                format!("services '{}'", service.name()),
                format!(
                    "protocol_driver_options_name: unknown protocol_driver_options '{name}' ({})",
                    if names.is_empty() {
                        "none is defined".to_string()
                    } else {
                        format!("defined: {}", names.join(", "))
                    }
                ),
            )
        })?),
        None => alias("", all),
    };
    let mut protocol = match options.and_then(|o| o.protocol_name.as_deref()) {
        Some(p) => p.to_string(),
        None => test.default_protocol().to_string(),
    };
    let mut depth = 0;
    loop {
        let location = options_location(options);
        if RUNS.contains(&protocol.as_str()) {
            break;
        }
        if let Some((_, why)) = MISSING.iter().find(|(name, _)| *name == protocol) {
            return Err(problem(
                Severity::Unsupported,
                location,
                format!("protocol '{protocol}' is not supported by rackbench: {why}"),
            ));
        }
        depth += 1;
        if depth == MAX_ALIAS_DEPTH {
            return Err(problem(
                Severity::Invalid,
                location,
                format!(
                    "protocol_name '{protocol}': protocol aliases nest deeper than \
                     {MAX_ALIAS_DEPTH} levels"
                ),
            ));
        }
        let Some(target) = alias(&protocol, all) else {
            return Err(problem(
                Severity::Invalid,
                location,
                format!(
                    "protocol '{protocol}' is neither a protocol driver ({}, {}) nor the name of \
                     protocol_driver_options to use instead",
                    RUNS.join(", "),
                    MISSING.map(|(n, _)| n).join(", ")
                ),
            ));
        };
        options = Some(target);
        protocol = target.protocol_name().to_string();
    }
    let location = options_location(options);
    let mut warnings = Vec::new();
    let driver = if protocol == "tcp" {
        if let Some(o) = options {
            let given: Vec<String> = o
                .server_settings
                .iter()
                .chain(&o.client_settings)
                .map(describe)
                .collect();
            if !given.is_empty() {
                warnings.push(problem(
                    Severity::Warning,
                    location,
                    format!(
                        "{} ignored: rackbench's tcp driver reads no settings",
                        given.join(", ")
                    ),
                ));
            }
        }
        Driver::Tcp
    } else {
        Driver::Grpc(grpc_variant(options, &location, &mut warnings)?)
    };
    Ok(Resolved {
        options,
        protocol,
        driver,
        warnings,
    })
}

/// A string setting: its value, or `None` when absent.
fn string<'s>(
    settings: &'s [NamedSetting],
    side: &str,
    name: &str,
    location: &str,
) -> Result<Option<&'s str>, DriverProblem> {
    match settings.iter().find(|s| s.name() == name) {
        None => Ok(None),
        Some(s) => s.string_value.as_deref().map(Some).ok_or_else(|| {
            problem(
                Severity::Invalid,
                location,
                format!("{side}_settings '{name}': needs a string_value"),
            )
        }),
    }
}

const SERVER_SETTINGS: [&str; 4] = [
    "server_type",
    "threadpool_size",
    "threadpool_type",
    "transport",
];

fn grpc_variant(
    options: Option<&ProtocolDriverOptions>,
    location: &str,
    warnings: &mut Vec<DriverProblem>,
) -> Result<GrpcVariant, DriverProblem> {
    let Some(o) = options else {
        return Ok(GrpcVariant::default());
    };
    let invalid = |m: String| problem(Severity::Invalid, location, m);
    let is_async = o.name() == "grpc_async";
    let server = &o.server_settings;
    let client = &o.client_settings;

    let client_type = match string(client, "client", "client_type", location)? {
        None if is_async => ClientType::Callback,
        None | Some("polling") => ClientType::Polling,
        Some("callback") => ClientType::Callback,
        Some(other) => {
            return Err(invalid(format!(
                "client_settings 'client_type': '{other}' is not a gRPC client type (polling, \
                 callback)"
            )));
        }
    };
    let server_type = match string(server, "server", "server_type", location)? {
        None if is_async => ServerType::Handoff,
        None | Some("inline") => ServerType::Inline,
        Some("handoff") => ServerType::Handoff,
        Some("polling") => ServerType::Polling,
        Some(other) => {
            return Err(invalid(format!(
                "server_settings 'server_type': '{other}' is not a gRPC server type (inline, \
                 handoff, polling)"
            )));
        }
    };
    check_transport(server, location)?;
    let pooled = server_type != ServerType::Inline;
    let (threadpool_size, threadpool_type) = threadpool(server, pooled, location)?;
    if let Some(s) = server.iter().find(|s| !SERVER_SETTINGS.contains(&s.name())) {
        return Err(problem(
            Severity::Unsupported,
            location,
            format!(
                "server_settings '{}': upstream passes server settings it does not read to gRPC \
                 as channel arguments; rackbench's grpc driver (tonic) has no gRPC core channel \
                 arguments (it reads {})",
                s.name(),
                SERVER_SETTINGS.join(", ")
            ),
        ));
    }
    ignored_setting_warnings(client, server, pooled, location, warnings);
    let variant = GrpcVariant {
        client_type,
        server_type,
        threadpool_size,
        threadpool_type,
    };
    client_type_warning(client, &variant, location, warnings);
    Ok(variant)
}

/// `server_settings 'transport'`: only tcp runs here.
fn check_transport(server: &[NamedSetting], location: &str) -> Result<(), DriverProblem> {
    let invalid = |m: String| problem(Severity::Invalid, location, m);
    match string(server, "server", "transport", location)? {
        None | Some("tcp") => {}
        Some("homa") => {
            return Err(problem(
                Severity::Unsupported,
                location,
                "server_settings 'transport': gRPC over 'homa' is not supported by rackbench: \
                 it needs the Homa kernel module and grpc_homa (upstream refuses it too unless \
                 built with homa); only 'tcp' runs here",
            ));
        }
        Some(other) => {
            return Err(invalid(format!(
                "server_settings 'transport': unknown transport '{other}' (tcp, homa)"
            )));
        }
    }
    Ok(())
}

/// The thread pool of a server (`pooled`: a handoff or polling one):
/// `threadpool_size` and `threadpool_type`.
fn threadpool(
    server: &[NamedSetting],
    pooled: bool,
    location: &str,
) -> Result<(Option<i64>, ThreadpoolType), DriverProblem> {
    let invalid = |m: String| problem(Severity::Invalid, location, m);
    let size_setting = server.iter().find(|s| s.name() == "threadpool_size");
    let type_setting = string(server, "server", "threadpool_type", location)?;
    let mut threadpool_size = None;
    let mut threadpool_type = ThreadpoolType::Elastic;
    if pooled {
        if let Some(s) = size_setting {
            match s.int64_value {
                Some(n) if n >= 1 => threadpool_size = Some(n),
                Some(n) => {
                    return Err(invalid(format!(
                        "server_settings 'threadpool_size': must be positive, got {n}"
                    )));
                }
                None => {
                    return Err(invalid(
                        "server_settings 'threadpool_size': needs an int64_value".into(),
                    ));
                }
            }
        }
        threadpool_type = match type_setting {
            None | Some("") | Some("elastic") => ThreadpoolType::Elastic,
            Some("simple") => ThreadpoolType::Simple,
            Some("null") => ThreadpoolType::Null,
            Some("mercury") => {
                return Err(problem(
                    Severity::Unsupported,
                    location,
                    "server_settings 'threadpool_type': 'mercury' needs the Mercury library, \
                     which rackbench does not have",
                ));
            }
            Some(other) => {
                return Err(invalid(format!(
                    "server_settings 'threadpool_type': unknown thread pool '{other}' (elastic, \
                     simple, null)"
                )));
            }
        };
    }
    Ok((threadpool_size, threadpool_type))
}

/// Warns about the client settings and (for an inline server) the thread
/// pool settings the grpc driver ignores, as upstream does.
fn ignored_setting_warnings(
    client: &[NamedSetting],
    server: &[NamedSetting],
    pooled: bool,
    location: &str,
    warnings: &mut Vec<DriverProblem>,
) {
    for s in client.iter().filter(|s| s.name() != "client_type") {
        warnings.push(problem(
            Severity::Warning,
            location,
            format!(
                "client_settings '{}' is ignored: the grpc driver reads only client_type \
                 (upstream ignores it too)",
                s.name()
            ),
        ));
    }
    if !pooled {
        for name in ["threadpool_size", "threadpool_type"] {
            if server.iter().any(|s| s.name() == name) {
                warnings.push(problem(
                    Severity::Warning,
                    location,
                    format!(
                        "server_settings '{name}' is ignored: only handoff and polling servers \
                         have a thread pool (upstream ignores it too)"
                    ),
                ));
            }
        }
    }
}

/// Warns that the client's threading (`client_type`) is not reproduced.
fn client_type_warning(
    client: &[NamedSetting],
    variant: &GrpcVariant,
    location: &str,
    warnings: &mut Vec<DriverProblem>,
) {
    // server_type and the thread pool are reproduced by the driver
    // (engine::driver::Handoff); the client's threading is not.
    if variant.client_type != ClientType::Polling
        || client.iter().any(|s| s.name() == "client_type")
    {
        let what = match client.iter().find(|s| s.name() == "client_type") {
            Some(s) => format!("{} is", describe(s)),
            None => {
                "the options named 'grpc_async' ask for client_type 'callback', which is".into()
            }
        };
        warnings.push(problem(
            Severity::Warning,
            location,
            format!(
                "{what} not reproduced: rackbench's grpc client (a unary client on h2) completes RPCs as tasks \
                 on the node's tokio workers (one per CPU) whatever the client type; the \
                 server's server_type and thread pool are reproduced"
            ),
        ));
    }
}

fn describe(s: &NamedSetting) -> String {
    match (&s.string_value, s.int64_value) {
        (Some(v), _) => format!("{} '{v}'", s.name()),
        (None, Some(v)) => format!("{} {v}", s.name()),
        (None, None) => s.name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(name: &str, value: Result<&str, i64>) -> NamedSetting {
        NamedSetting {
            name: Some(name.into()),
            string_value: value.ok().map(str::to_string),
            int64_value: value.err(),
        }
    }

    fn options(
        name: &str,
        protocol: Option<&str>,
        server: &[(&str, Result<&str, i64>)],
        client: &[(&str, Result<&str, i64>)],
    ) -> ProtocolDriverOptions {
        ProtocolDriverOptions {
            name: Some(name.into()),
            protocol_name: protocol.map(str::to_string),
            server_settings: server.iter().map(|(n, v)| setting(n, *v)).collect(),
            client_settings: client.iter().map(|(n, v)| setting(n, *v)).collect(),
            ..Default::default()
        }
    }

    fn test_with(opts: Vec<ProtocolDriverOptions>) -> DistributedSystemDescription {
        DistributedSystemDescription {
            protocol_driver_options: opts,
            ..Default::default()
        }
    }

    fn service(opts: Option<&str>) -> ServiceSpec {
        ServiceSpec {
            name: Some("s".into()),
            protocol_driver_options_name: opts.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_and_variants() {
        let t = test_with(vec![]);
        let r = resolve(&service(None), &t).unwrap();
        assert_eq!(r.driver, Driver::Grpc(GrpcVariant::default()));
        assert!(r.warnings.is_empty());

        let t = test_with(vec![options(
            "default_protocol_driver_options",
            Some("grpc"),
            &[("server_type", Ok("handoff")), ("threadpool_size", Err(8))],
            &[("client_type", Ok("callback"))],
        )]);
        let r = resolve(&service(None), &t).unwrap();
        assert_eq!(
            r.driver,
            Driver::Grpc(GrpcVariant {
                client_type: ClientType::Callback,
                server_type: ServerType::Handoff,
                threadpool_size: Some(8),
                threadpool_type: ThreadpoolType::Elastic,
            })
        );
        assert_eq!(r.warnings.len(), 1);
        assert!(
            r.warnings[0]
                .message
                .starts_with("client_type 'callback' is not reproduced"),
            "{:?}",
            r.warnings
        );

        // Options named grpc_async default to callback and handoff.
        let t = test_with(vec![options("grpc_async", Some("grpc"), &[], &[])]);
        let r = resolve(&service(Some("grpc_async")), &t).unwrap();
        let Driver::Grpc(v) = r.driver else { panic!() };
        assert_eq!(
            (v.client_type, v.server_type),
            (ClientType::Callback, ServerType::Handoff)
        );
        assert_eq!(r.warnings.len(), 1);
        assert!(
            r.warnings[0]
                .message
                .contains("'grpc_async' ask for client_type 'callback'")
        );

        // A server variant alone is reproduced: no warning.
        let t = test_with(vec![options(
            "o",
            Some("grpc"),
            &[
                ("server_type", Ok("handoff")),
                ("threadpool_type", Ok("simple")),
            ],
            &[],
        )]);
        assert!(
            resolve(&service(Some("o")), &t)
                .unwrap()
                .warnings
                .is_empty()
        );
    }

    #[test]
    fn aliases_are_followed() {
        let t = test_with(vec![
            options("a", Some("b"), &[], &[]),
            options(
                "b",
                Some("grpc_async_callback"),
                &[("server_type", Ok("polling"))],
                &[],
            ),
        ]);
        let r = resolve(&service(Some("a")), &t).unwrap();
        assert_eq!(r.options.unwrap().name(), "b");
        assert_eq!(r.protocol, "grpc_async_callback");
        let t = test_with(vec![options("loop", Some("loop"), &[], &[])]);
        let e = resolve(&service(Some("loop")), &t).unwrap_err();
        assert_eq!(e.severity, Severity::Invalid);
        assert!(e.message.contains("nest deeper than 4"), "{e:?}");
        let t = test_with(vec![options("x", Some("quic"), &[], &[])]);
        let e = resolve(&service(Some("x")), &t).unwrap_err();
        assert!(e.message.starts_with("protocol 'quic' is neither"), "{e:?}");
    }

    #[test]
    fn unsupported_and_invalid_settings() {
        let run = |server: &[(&str, Result<&str, i64>)], client: &[(&str, Result<&str, i64>)]| {
            let t = test_with(vec![options("o", Some("grpc"), server, client)]);
            resolve(&service(Some("o")), &t).map(|r| r.warnings)
        };
        let e = run(&[("transport", Ok("homa"))], &[]).unwrap_err();
        assert_eq!(e.severity, Severity::Unsupported);
        assert_eq!(e.location, "protocol_driver_options 'o'");
        assert!(e.message.contains("'homa'"), "{e:?}");
        let e = run(&[("grpc.max_concurrent_streams", Err(4))], &[]).unwrap_err();
        assert_eq!(e.severity, Severity::Unsupported);
        assert!(
            e.message
                .starts_with("server_settings 'grpc.max_concurrent_streams'")
        );
        for (server, client, text) in [
            (
                &[("server_type", Ok("fast"))][..],
                &[][..],
                "'fast' is not a gRPC server type",
            ),
            (
                &[],
                &[("client_type", Ok("async"))],
                "'async' is not a gRPC client type",
            ),
            (&[("transport", Ok("udp"))], &[], "unknown transport 'udp'"),
            (
                &[("server_type", Err(1))],
                &[],
                "'server_type': needs a string_value",
            ),
            (
                &[("server_type", Ok("handoff")), ("threadpool_size", Err(0))],
                &[],
                "must be positive, got 0",
            ),
            (
                &[
                    ("server_type", Ok("polling")),
                    ("threadpool_type", Ok("big")),
                ],
                &[],
                "unknown thread pool 'big'",
            ),
        ] {
            let e = run(server, client).unwrap_err();
            assert_eq!(e.severity, Severity::Invalid, "{text}");
            assert!(e.message.contains(text), "{text}: {e:?}");
        }
        // A pool size with an inline server is ignored, as upstream.
        let w = run(&[("threadpool_size", Err(0))], &[("verbose", Err(1))]).unwrap();
        assert_eq!(w.len(), 2, "{w:?}");
        let t = test_with(vec![]);
        let e = resolve(
            &service(None),
            &DistributedSystemDescription {
                default_protocol: Some("mercury".into()),
                ..t
            },
        )
        .unwrap_err();
        assert_eq!(e.location, "default_protocol");
        assert!(
            e.message
                .starts_with("protocol 'mercury' is not supported by rackbench")
        );
        // rackbench's tcp driver ignores settings, saying so.
        let t = test_with(vec![options(
            "o",
            Some("tcp"),
            &[("server_type", Ok("inline"))],
            &[],
        )]);
        let r = resolve(&service(Some("o")), &t).unwrap();
        assert_eq!(r.driver, Driver::Tcp);
        assert_eq!(
            r.warnings[0].message,
            "server_type 'inline' ignored: rackbench's tcp driver reads no settings"
        );
    }
}
