//! Protocol drivers: their parameters, the protocol alias that names them in
//! test names, and the `protocol_driver_options` they produce.

use super::Error;
use super::params::{Kind, Params, Spec};
use crate::proto::{NamedSetting, ProtocolDriverOptions};

/// A protocol driver test_builder knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// gRPC, with its client and server threading models.
    Grpc,
    /// Homa, the datacenter transport.
    Homa,
    /// Mercury (HPC RPC over libfabric).
    Mercury,
}

/// Every driver, in the order help lists them.
pub const ALL: [Protocol; 3] = [Protocol::Grpc, Protocol::Homa, Protocol::Mercury];

/// The name of the options every generated test's services use.
pub const OPTIONS_NAME: &str = "default_protocol_driver_options";

const THREADPOOL_TYPE: Spec = Spec {
    name: "threadpool_type",
    default: "",
    kind: Kind::Choice(&["simple", "elastic", "null"]),
    help: "server thread pool; empty for the driver's default",
};

const THREADPOOL_SIZE: Spec = Spec {
    name: "threadpool_size",
    default: "0",
    kind: Kind::Int { min: 0 },
    help: "server threads; 0 for one per CPU",
};

const GRPC: &[Spec] = &[
    Spec {
        name: "client_type",
        default: "polling",
        kind: Kind::Choice(&["callback", "polling"]),
        help: "gRPC client model",
    },
    Spec {
        name: "server_type",
        default: "inline",
        kind: Kind::Choice(&["handoff", "inline", "polling"]),
        help: "gRPC server model (thread pool settings apply unless inline)",
    },
    THREADPOOL_TYPE,
    THREADPOOL_SIZE,
    Spec {
        name: "transport",
        default: "",
        kind: Kind::Choice(&["tcp", "homa"]),
        help: "transport under gRPC; empty for the default",
    },
];

const HOMA: &[Spec] = &[
    THREADPOOL_TYPE,
    THREADPOOL_SIZE,
    Spec {
        name: "client_threads",
        default: "1",
        kind: Kind::Int { min: 1 },
        help: "threads polling for RPC responses",
    },
    Spec {
        name: "server_threads",
        default: "1",
        kind: Kind::Int { min: 1 },
        help: "threads polling for RPC requests",
    },
    Spec {
        name: "nocopy",
        default: "1",
        kind: Kind::Int { min: 0 },
        help: "1 to avoid copying messages into linear buffers",
    },
    Spec {
        name: "ping_pong",
        default: "0",
        kind: Kind::Int { min: 0 },
        help: "1 to skip the RPC handler and echo each request as its response",
    },
];

const MERCURY: &[Spec] = &[
    THREADPOOL_TYPE,
    THREADPOOL_SIZE,
    Spec {
        name: "transport",
        default: "ofi+tcp",
        kind: Kind::Text,
        help: "Mercury transport: ofi+tcp, or any init string passed as is",
    },
];

impl Protocol {
    /// The driver's name in configuration strings and attributes.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::Homa => "homa",
            Protocol::Mercury => "mercury",
        }
    }

    /// The driver named `name`, if any.
    pub fn from_name(name: &str) -> Option<Protocol> {
        ALL.into_iter().find(|p| p.name() == name)
    }

    /// The driver's parameters.
    pub fn specs(self) -> &'static [Spec] {
        match self {
            Protocol::Grpc => GRPC,
            Protocol::Homa => HOMA,
            Protocol::Mercury => MERCURY,
        }
    }

    /// Sets `protocol_driver` and `protocol_alias` in `p` (whose defaults
    /// are applied) and returns the driver options.
    pub fn build(self, p: &mut Params) -> Result<ProtocolDriverOptions, Error> {
        let mut opts = ProtocolDriverOptions {
            name: Some(OPTIONS_NAME.into()),
            protocol_name: Some(self.name().into()),
            ..Default::default()
        };
        let ip_version = p.get("ip_version").map(str::to_string);
        let ip_suffix = ip_version
            .as_deref()
            .map(|v| format!("_ipv{v}"))
            .unwrap_or_default();
        if let Some(v) = &ip_version {
            opts.ip_version = Some(if v == "6" { 6 } else { 4 });
        }
        let pool_type = p.text("threadpool_type").to_string();
        let pool_size = p.int("threadpool_size")?;
        let mut server = Vec::new();
        let alias = match self {
            Protocol::Grpc => {
                let client_type = p.text("client_type").to_string();
                let server_type = p.text("server_type").to_string();
                let mut alias = format!("grpc_{client_type}_{server_type}{ip_suffix}");
                server.push(text_setting("server_type", &server_type));
                // Thread pools only serve handlers handed off the I/O threads.
                if server_type != "inline" {
                    if !pool_type.is_empty() {
                        alias.push_str(&format!("_{pool_type}"));
                        server.push(text_setting("threadpool_type", &pool_type));
                    }
                    if pool_size != 0 {
                        alias.push_str(&format!("_{pool_size}"));
                        server.push(int_setting("threadpool_size", pool_size));
                    }
                }
                let transport = p.text("transport").to_string();
                if !transport.is_empty() {
                    alias.push_str(&format!("_{transport}"));
                    server.push(text_setting("transport", &transport));
                }
                opts.client_settings = vec![text_setting("client_type", &client_type)];
                alias
            }
            Protocol::Mercury => {
                let transport = p.text("transport").to_string();
                let init = if transport == "ofi+tcp" {
                    "ofi+tcp://__SERVER_IP__".to_string()
                } else {
                    transport.clone()
                };
                let mut alias = format!("mercury_{transport}{ip_suffix}");
                server.push(text_setting("hg_init_info_string", &init));
                if !pool_type.is_empty() {
                    alias.push_str(&format!("_{pool_type}"));
                    server.push(text_setting("threadpool_type", &pool_type));
                }
                if pool_size != 0 {
                    alias.push_str(&format!("_{pool_size}"));
                    server.push(int_setting("threadpool_size", pool_size));
                }
                alias
            }
            Protocol::Homa => {
                let client_threads = p.int("client_threads")?;
                let server_threads = p.int("server_threads")?;
                let nocopy = p.int("nocopy")?;
                let ping_pong = p.int("ping_pong")?;
                let mode = if ping_pong != 0 {
                    "_pingpong"
                } else if nocopy != 0 {
                    "_nocopy"
                } else {
                    ""
                };
                let mut alias =
                    format!("homa{mode}{ip_suffix}_{server_threads}x{client_threads}x{pool_size}");
                if !pool_type.is_empty() {
                    alias.push_str(&format!("_{pool_type}"));
                    server.push(text_setting("threadpool_type", &pool_type));
                }
                if pool_size != 0 {
                    server.push(int_setting("threadpool_size", pool_size));
                }
                server.push(int_setting("server_threads", server_threads));
                server.push(int_setting("client_threads", client_threads));
                server.push(int_setting("nocopy", nocopy));
                server.push(int_setting("ping_pong", ping_pong));
                alias
            }
        };
        opts.server_settings = server;
        p.set("protocol_driver", self.name());
        p.set("protocol_alias", alias);
        Ok(opts)
    }
}

fn text_setting(name: &str, value: &str) -> NamedSetting {
    NamedSetting {
        name: Some(name.into()),
        string_value: Some(value.into()),
        int64_value: None,
    }
}

fn int_setting(name: &str, value: i64) -> NamedSetting {
    NamedSetting {
        name: Some(name.into()),
        string_value: None,
        int64_value: Some(value),
    }
}
