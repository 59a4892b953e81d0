//! The server configuration, in upstream AdSim's JSON schema:
//!
//! ```json
//! {"port": 10086, "num_req_handle_threads": 1, "num_io_handle_threads": 1,
//!  "num_app_logic_threads": 3, "num_req_local_threads": 2,
//!  "Kernels": [{"name": "GEMM", "pool": "applicationLogic", "stage": 4,
//!               "fanout": 6, "params": {"M": 360, "N": 120, "K": 600}}]}
//! ```
//!
//! Stages run in order; the kernels of one stage run concurrently, each
//! `fanout` times (instance `fidx` = 0..fanout; `{fidx}` in the names of
//! the objects a kernel reads and writes, such as `input` and `output`, is
//! replaced by it). A kernel without a stage (or
//! with -1) gets stages of its own after those that exist when it is read,
//! one per instance, as upstream does.
//!
//! Everything is checked when the file is read: malformed JSON is named by
//! file, line and column; unknown top-level keys, kernel names, pools and
//! params, and params of the wrong type, by file, kernel index and key.

use crate::Error;
use serde_json::{Map, Value};

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    /// Not JSON.
    #[error("{source_name}: line {line}, column {column}: {msg}")]
    Syntax {
        source_name: String,
        line: usize,
        column: usize,
        msg: String,
    },
    /// JSON, but not a configuration: `at` names the key
    /// (`Kernels[4] (GEMM) params.M`).
    #[error("{source_name}: {at}: {msg}")]
    Invalid {
        source_name: String,
        at: String,
        msg: String,
    },
}

/// The thread pool a kernel runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// `requestHandle`: the pool that receives requests.
    RequestHandle,
    /// `applicationLogic`: the large compute pool.
    ApplicationLogic,
    /// `IOHandle`: the IO pool.
    IoHandle,
    /// `defaultPool` (upstream's default) or `reqLocal`: a small pool of
    /// `num_req_local_threads` per request.
    RequestLocal,
}

impl Pool {
    /// The names accepted in `pool`.
    pub const NAMES: &'static [&'static str] = &[
        "requestHandle",
        "applicationLogic",
        "IOHandle",
        "defaultPool",
        "reqLocal",
    ];

    fn parse(s: &str) -> Option<Pool> {
        Some(match s {
            "requestHandle" => Pool::RequestHandle,
            "applicationLogic" => Pool::ApplicationLogic,
            "IOHandle" => Pool::IoHandle,
            "defaultPool" | "reqLocal" => Pool::RequestLocal,
            _ => return None,
        })
    }

    /// The name written back in a configuration.
    pub fn name(self) -> &'static str {
        match self {
            Pool::RequestHandle => "requestHandle",
            Pool::ApplicationLogic => "applicationLogic",
            Pool::IoHandle => "IOHandle",
            Pool::RequestLocal => "defaultPool",
        }
    }
}

/// What a kernel parameter holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    /// An integer >= 1.
    Pos,
    /// An integer >= 0.
    UInt,
    /// An integer, any sign (compression levels).
    Int,
    /// A number.
    Num,
    Bool,
    Str,
    /// A non-empty array of numbers.
    NumList,
    /// A non-empty array of integers >= 1.
    PosList,
    /// A comma-separated list in a string (upstream's `*_list` keys).
    Csv,
    /// One of the given strings.
    Choice(&'static [&'static str]),
    /// The `Client`/`ClientLite` downstream list: a non-empty array of
    /// `{"host": H, "port": P}` objects, `H` a string or a non-empty array
    /// of strings, `P` a port or a non-empty array of ports, at most one of
    /// the two an array.
    Services,
}

impl Ty {
    fn expected(self) -> String {
        match self {
            Ty::Pos => "an integer >= 1".into(),
            Ty::UInt => "an integer >= 0".into(),
            Ty::Int => "an integer".into(),
            Ty::Num => "a number".into(),
            Ty::Bool => "true or false".into(),
            Ty::Str => "a string".into(),
            Ty::NumList => "a non-empty array of numbers".into(),
            Ty::PosList => "a non-empty array of integers >= 1".into(),
            Ty::Csv => "a comma-separated list in a string, such as \"100000,200000\"".into(),
            Ty::Choice(c) => format!("one of {}", c.join(", ")),
            Ty::Services => "a non-empty array of {\"host\": H, \"port\": P} objects (H a host name or address, or a non-empty array of them; P a port 1-65535, or a non-empty array of ports; at most one of the two an array)".into(),
        }
    }

    fn accepts(self, v: &Value) -> bool {
        let pos = |v: &Value| v.as_u64().is_some_and(|n| n >= 1);
        match self {
            Ty::Pos => pos(v),
            Ty::UInt => v.as_u64().is_some(),
            Ty::Int => v.as_i64().is_some(),
            Ty::Num => v.is_number(),
            Ty::Bool => v.is_boolean(),
            Ty::Str => v.is_string(),
            Ty::NumList => v
                .as_array()
                .is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_number)),
            Ty::PosList => v
                .as_array()
                .is_some_and(|a| !a.is_empty() && a.iter().all(pos)),
            Ty::Csv => {
                v.as_str().is_some_and(|s| {
                    !s.is_empty() && s.split(',').all(|x| x.trim().parse::<f64>().is_ok())
                }) || v.is_number()
            }
            Ty::Choice(c) => v.as_str().is_some_and(|s| c.contains(&s)),
            Ty::Services => v.as_array().is_some_and(|a| {
                let port = |v: &Value| v.as_u64().is_some_and(|n| (1..=65_535).contains(&n));
                let host = |v: &Value| v.as_str().is_some_and(|s| !s.is_empty());
                let all = |v: &Value, f: &dyn Fn(&Value) -> bool| {
                    v.as_array()
                        .is_some_and(|a| !a.is_empty() && a.iter().all(f))
                };
                !a.is_empty()
                    && a.iter().all(|s| {
                        let Some(o) = s.as_object() else {
                            return false;
                        };
                        let (Some(h), Some(p)) = (o.get("host"), o.get("port")) else {
                            return false;
                        };
                        o.len() == 2
                            && match (h.is_array(), p.is_array()) {
                                (false, false) => host(h) && port(p),
                                (true, false) => all(h, &host) && port(p),
                                (false, true) => host(h) && all(p, &port),
                                (true, true) => false,
                            }
                    })
            }),
        }
    }
}

/// One parameter of a kernel.
struct P {
    key: &'static str,
    ty: Ty,
    required: bool,
}

const fn req(key: &'static str, ty: Ty) -> P {
    P {
        key,
        ty,
        required: true,
    }
}

const fn opt(key: &'static str, ty: Ty) -> P {
    P {
        key,
        ty,
        required: false,
    }
}

/// A kernel kind and its parameters.
struct KernelDef {
    name: &'static str,
    params: &'static [P],
}

const LATENCY_CDF: &[P] = &[
    req("quantiles", Ty::NumList),
    req("latencies", Ty::NumList),
    opt("ntimekeepers", Ty::Pos),
    opt("input", Ty::Str),
];
const CODEC: &[P] = &[
    req("compressor", Ty::Choice(&["zstd"])),
    req("level", Ty::Int),
    req("size", Ty::Pos),
    opt("input", Ty::Str),
    opt("output", Ty::Str),
];
const SERDE: &[P] = &[
    opt("req_vec_len", Ty::Pos),
    opt("req_unit_list_len", Ty::UInt),
    opt("unit_info_list_len", Ty::UInt),
    opt("unit_i32_list_len", Ty::UInt),
    opt("unit_list_map_size", Ty::UInt),
    opt("niters", Ty::Pos),
    opt("input", Ty::Str),
    opt("output", Ty::Str),
];

/// `Client` and `ClientLite`: the downstream services and, as `Shape`,
/// the request sizes (needed only with an `H...` input, checked by the
/// kernel); `tls` is ours.
const CLIENT: &[P] = &[
    req("services", Ty::Services),
    opt("quantiles", Ty::NumList),
    opt("sizes", Ty::NumList),
    opt("str_vec_len", Ty::Pos),
    opt("input", Ty::Str),
    opt("tls", Ty::Bool),
];

/// Every kernel kind, with its parameters (upstream's names).
const KERNELS: &[KernelDef] = &[
    KernelDef {
        name: "Echo",
        params: LATENCY_CDF,
    },
    KernelDef {
        name: "FakeIO",
        params: LATENCY_CDF,
    },
    KernelDef {
        name: "Delay",
        params: LATENCY_CDF,
    },
    KernelDef {
        name: "IBRun",
        params: &[req("nrounds", Ty::UInt), req("nmethods", Ty::Pos)],
    },
    KernelDef {
        name: "GEMM",
        params: &[
            req("M", Ty::Pos),
            req("N", Ty::Pos),
            req("K", Ty::Pos),
            opt("niters", Ty::Pos),
            opt("nthreads", Ty::UInt),
            opt("input", Ty::Str),
        ],
    },
    KernelDef {
        name: "Embedding",
        params: &[
            opt("requests_per_fire", Ty::Pos),
            opt("nthreads", Ty::UInt),
            opt("weighted", Ty::Bool),
            opt("pregenerated_req_num", Ty::Pos),
            opt(
                "weights_precision",
                Ty::Choice(&["int4", "int8", "fp16", "fp32"]),
            ),
            opt("output_dtype", Ty::Choice(&["fp16", "fp32"])),
            opt("pooling", Ty::Choice(&["sum", "mean", "none"])),
            opt("num_tables", Ty::Pos),
            opt("num_embeddings", Ty::Pos),
            opt("num_embeddings_list", Ty::Csv),
            opt("embedding_dim", Ty::Pos),
            opt("embedding_dim_list", Ty::Csv),
            opt("bag_size", Ty::Pos),
            opt("bag_size_list", Ty::Csv),
            opt("batch_size", Ty::Pos),
            opt("batch_size_list", Ty::Csv),
            opt("access_weight", Ty::Num),
            opt("access_weight_list", Ty::Csv),
            opt("input", Ty::Str),
            // Ours: the pooled batch x (tables * dim) output, and the
            // request's features (from Features) instead of pregenerated
            // requests.
            opt("output", Ty::Str),
            opt("indices_from", Ty::Str),
        ],
    },
    KernelDef {
        name: "DenseFP32",
        params: &[
            req("dims", Ty::PosList),
            opt("batch", Ty::Pos),
            opt("nweight_sets", Ty::Pos),
            opt("niters", Ty::Pos),
            opt("input", Ty::Str),
            // Ours: input and output tensors in the request objects,
            // activations, and the output as the response.
            opt("from", Ty::Str),
            opt("to", Ty::Str),
            opt("relu", Ty::Bool),
            opt("sigmoid_out", Ty::Bool),
            opt("respond", Ty::Bool),
        ],
    },
    // Ours (model_a): the request body as dense and sparse features.
    KernelDef {
        name: "Features",
        params: &[
            req("tables", Ty::Pos),
            req("rows", Ty::Pos),
            opt("batch", Ty::Pos),
            opt("dense_dim", Ty::Pos),
            opt("bag_size_min", Ty::UInt),
            opt("bag_size_max", Ty::Pos),
            opt("weighted", Ty::Bool),
            opt("dense_out", Ty::Str),
            opt("sparse_out", Ty::Str),
        ],
    },
    // Ours (model_a): DLRM's pairwise dot-product feature interaction.
    KernelDef {
        name: "Interaction",
        params: &[
            req("dense", Ty::Str),
            req("embeddings", Ty::Str),
            opt("output", Ty::Str),
            opt("batch", Ty::Pos),
            opt("tables", Ty::Pos),
            opt("dim", Ty::Pos),
        ],
    },
    KernelDef {
        name: "Compress",
        params: CODEC,
    },
    KernelDef {
        name: "Decompress",
        params: CODEC,
    },
    KernelDef {
        name: "Serialize",
        params: SERDE,
    },
    KernelDef {
        name: "Deserialize",
        params: SERDE,
    },
    KernelDef {
        name: "HashMap",
        params: &[
            req("runs", Ty::UInt),
            req("size", Ty::Pos),
            opt(
                "map_type",
                Ty::Choice(&["unord", "f14fast", "f14val", "f14node", "f14vec"]),
            ),
            opt("input", Ty::Str),
        ],
    },
    KernelDef {
        name: "DeepCopy",
        params: &[
            req("copy_len", Ty::Pos),
            opt("unit_vec_len", Ty::Pos),
            opt("i64_vec_len", Ty::UInt),
            opt("stri64_map_size", Ty::UInt),
            opt("stri64_hashtab_size", Ty::UInt),
            opt("input", Ty::Str),
            opt("output", Ty::Str),
        ],
    },
    KernelDef {
        name: "TensorDeser",
        params: &[
            req("requests_per_run", Ty::UInt),
            req("distribution_file", Ty::Str),
            opt("request_book_multiplier", Ty::Pos),
            opt("num_threads", Ty::UInt),
            opt("input", Ty::Str),
        ],
    },
    KernelDef {
        name: "ConcurrentHashMap",
        params: &[
            req("requests_per_run", Ty::UInt),
            req("distribution_file", Ty::Str),
            opt("request_book_multiplier", Ty::Pos),
            opt("num_threads", Ty::UInt),
            opt("input", Ty::Str),
        ],
    },
    KernelDef {
        name: "Rebatch",
        params: &[
            req("distribution_file", Ty::Str),
            opt("tensors_per_batch", Ty::UInt),
            opt("num_threads", Ty::UInt),
            opt("output_tensor_size", Ty::UInt),
            // Upstream's is a whole number of GiB; fractions are ours.
            opt("memory_pool_size_gb", Ty::Num),
            opt("prefetch_dist", Ty::Int),
            opt("num_pregenerated_batches", Ty::Pos),
            opt("input", Ty::Str),
        ],
    },
    KernelDef {
        name: "Client",
        params: CLIENT,
    },
    KernelDef {
        name: "ClientLite",
        params: CLIENT,
    },
    KernelDef {
        name: "Shape",
        params: &[
            req("quantiles", Ty::NumList),
            req("sizes", Ty::NumList),
            // Upstream's configs carry it; no kernel reads it.
            opt("x100_sizes", Ty::NumList),
            opt("str_vec_len", Ty::Pos),
            opt("input", Ty::Str),
        ],
    },
];

/// The kernel kinds, for messages and `--help`.
pub fn kernel_names() -> Vec<&'static str> {
    KERNELS.iter().map(|k| k.name).collect()
}

/// One entry of `Kernels`.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelEntry {
    pub name: String,
    pub pool: Pool,
    /// `None`: stages of its own after the existing ones (upstream's -1).
    pub stage: Option<usize>,
    pub fanout: usize,
    pub params: Map<String, Value>,
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub port: u16,
    pub num_req_handle_threads: usize,
    pub num_io_handle_threads: usize,
    pub num_app_logic_threads: usize,
    pub num_req_local_threads: usize,
    /// Upstream's thrift accept threads: accepted and kept, not used
    /// (connections are accepted by the runtime).
    pub num_thrift_accept_threads: usize,
    pub kernels: Vec<KernelEntry>,
}

/// The default port, used when the file has none.
pub const DEFAULT_PORT: u16 = 10086;

/// The numeric top-level keys (upstream's default, 8, when missing).
const THREAD_KEYS: &[&str] = &[
    "num_req_handle_threads",
    "num_io_handle_threads",
    "num_app_logic_threads",
    "num_req_local_threads",
    "num_thrift_accept_threads",
];

struct Ctx<'a> {
    source: &'a str,
}

impl Ctx<'_> {
    fn err(&self, at: impl Into<String>, msg: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            source_name: self.source.to_string(),
            at: at.into(),
            msg: msg.into(),
        }
    }

    fn parse_json(&self, text: &str) -> Result<Value, ConfigError> {
        serde_json::from_str(text).map_err(|e| ConfigError::Syntax {
            source_name: self.source.to_string(),
            line: e.line(),
            column: e.column(),
            msg: e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or("")
                .to_string(),
        })
    }

    /// Checks a kernel's name, pool, stage, fanout and params.
    fn kernel(&self, i: usize, v: &Value, allow_index: bool) -> Result<KernelEntry, ConfigError> {
        let at = format!("Kernels[{i}]");
        let o = v.as_object().ok_or_else(|| {
            self.err(
                &at,
                "expected an object with name, pool, stage, fanout, params",
            )
        })?;
        for k in o.keys() {
            let known = ["name", "pool", "stage", "fanout", "params"].contains(&k.as_str())
                || (allow_index && k == "index");
            if !known {
                return Err(self.err(
                    format!("{at}.{k}"),
                    "unknown key: expected name, pool, stage, fanout or params",
                ));
            }
        }
        let name = o.get("name").and_then(Value::as_str).ok_or_else(|| {
            self.err(
                format!("{at}.name"),
                "missing: every kernel needs a name (string)",
            )
        })?;
        let def = KERNELS.iter().find(|d| d.name == name).ok_or_else(|| {
            self.err(
                format!("{at}.name"),
                format!(
                    "unknown kernel {name:?}: expected one of {}",
                    kernel_names().join(", ")
                ),
            )
        })?;
        let at = format!("{at} ({name})");
        let pool = match o.get("pool") {
            None => Pool::RequestLocal,
            Some(p) => p.as_str().and_then(Pool::parse).ok_or_else(|| {
                self.err(
                    format!("{at}.pool"),
                    format!(
                        "unknown pool {p}: expected one of {}",
                        Pool::NAMES.join(", ")
                    ),
                )
            })?,
        };
        let stage = match o.get("stage") {
            None => None,
            Some(s) => match s.as_i64() {
                Some(-1) => None,
                Some(n) if (0..=10_000).contains(&n) => Some(n as usize),
                _ => {
                    return Err(self.err(
                        format!("{at}.stage"),
                        format!("{s}: expected a stage number 0..=10000, or -1 for stages of its own at the end"),
                    ));
                }
            },
        };
        let fanout = match o.get("fanout") {
            None => 1,
            Some(f) => match f.as_u64() {
                Some(n) if (1..=100_000).contains(&n) => n as usize,
                _ => {
                    return Err(self.err(
                        format!("{at}.fanout"),
                        format!("{f}: expected an integer 1..=100000"),
                    ));
                }
            },
        };
        let params = match o.get("params") {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(self.err(format!("{at}.params"), "expected an object")),
        };
        self.params(&at, def, &params)?;
        Ok(KernelEntry {
            name: name.to_string(),
            pool,
            stage,
            fanout,
            params,
        })
    }

    fn params(
        &self,
        at: &str,
        def: &KernelDef,
        params: &Map<String, Value>,
    ) -> Result<(), ConfigError> {
        for (k, v) in params {
            let p = def.params.iter().find(|p| p.key == k).ok_or_else(|| {
                self.err(
                    format!("{at} params.{k}"),
                    format!(
                        "unknown param of {}: expected one of {}",
                        def.name,
                        def.params
                            .iter()
                            .map(|p| p.key)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
            if !p.ty.accepts(v) {
                return Err(self.err(
                    format!("{at} params.{k}"),
                    format!("{v}: expected {}", p.ty.expected()),
                ));
            }
        }
        for p in def.params.iter().filter(|p| p.required) {
            if !params.contains_key(p.key) {
                return Err(self.err(
                    format!("{at} params.{}", p.key),
                    format!("missing: {} needs it ({})", def.name, p.ty.expected()),
                ));
            }
        }
        let len = |k: &str| params.get(k).and_then(Value::as_array).map(Vec::len);
        for (a, b) in [("quantiles", "latencies"), ("quantiles", "sizes")] {
            if let (Some(x), Some(y)) = (len(a), len(b))
                && x != y
            {
                return Err(self.err(
                    format!("{at} params.{b}"),
                    format!("{y} values for {x} quantiles: expected one value per quantile"),
                ));
            }
        }
        if let Some(q) = params.get("quantiles").and_then(Value::as_array)
            && q.iter()
                .any(|x| !(0.0..=1.0).contains(&x.as_f64().unwrap_or(-1.0)))
        {
            return Err(self.err(
                format!("{at} params.quantiles"),
                "expected fractions between 0 and 1",
            ));
        }
        if let (Some(lo), Some(hi)) = (
            params.get("bag_size_min").and_then(Value::as_u64),
            params.get("bag_size_max").and_then(Value::as_u64),
        ) && lo > hi
        {
            return Err(self.err(
                format!("{at} params.bag_size_min"),
                format!("{lo} is above bag_size_max {hi}"),
            ));
        }
        if let Some(d) = params.get("dims").and_then(Value::as_array)
            && d.len() < 2
        {
            return Err(self.err(
                format!("{at} params.dims"),
                "expected at least 2 layer sizes (input and output)",
            ));
        }
        Ok(())
    }
}

impl ServerConfig {
    /// Reads a configuration; `source` names it in errors (a file path).
    pub fn from_json(text: &str, source: &str) -> Result<ServerConfig, ConfigError> {
        let cx = Ctx { source };
        let v = cx.parse_json(text)?;
        let o = v.as_object().ok_or_else(|| {
            cx.err(
                "(top level)",
                "expected an object with port, thread counts and Kernels",
            )
        })?;
        let mut c = ServerConfig {
            port: DEFAULT_PORT,
            num_req_handle_threads: 8,
            num_io_handle_threads: 8,
            num_app_logic_threads: 8,
            num_req_local_threads: 8,
            num_thrift_accept_threads: 1,
            kernels: Vec::new(),
        };
        for (k, val) in o {
            match k.as_str() {
                "port" => {
                    c.port = val
                        .as_u64()
                        .and_then(|p| u16::try_from(p).ok())
                        .ok_or_else(|| {
                            cx.err("port", format!("{val}: expected a port number 0..=65535"))
                        })?;
                }
                "Kernels" => {
                    let a = val
                        .as_array()
                        .ok_or_else(|| cx.err("Kernels", "expected an array of kernels"))?;
                    for (i, kv) in a.iter().enumerate() {
                        c.kernels.push(cx.kernel(i, kv, false)?);
                    }
                }
                k if THREAD_KEYS.contains(&k) => {
                    let n = val
                        .as_u64()
                        .filter(|n| (1..=4096).contains(n))
                        .ok_or_else(|| {
                            cx.err(k, format!("{val}: expected a thread count 1..=4096"))
                        })?;
                    c.set_threads(k, n as usize);
                }
                _ => {
                    return Err(cx.err(
                        k.as_str(),
                        format!(
                            "unknown key: expected port, Kernels or one of {}",
                            THREAD_KEYS.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(c)
    }

    fn set_threads(&mut self, key: &str, n: usize) {
        match key {
            "num_req_handle_threads" => self.num_req_handle_threads = n,
            "num_io_handle_threads" => self.num_io_handle_threads = n,
            "num_app_logic_threads" => self.num_app_logic_threads = n,
            "num_req_local_threads" => self.num_req_local_threads = n,
            _ => self.num_thrift_accept_threads = n,
        }
    }

    /// A command-line override of a top-level field (`port` or a thread
    /// count), e.g. `--num_app_logic_threads 4`.
    pub fn set_field(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let cx = Ctx {
            source: "command line",
        };
        if key == "port" {
            self.port = value.parse().map_err(|_| {
                cx.err(
                    "--port",
                    format!("{value:?}: expected a port number 0..=65535"),
                )
            })?;
            return Ok(());
        }
        if !THREAD_KEYS.contains(&key) {
            return Err(cx.err(
                format!("--{key}"),
                format!(
                    "unknown field: expected port or one of {}",
                    THREAD_KEYS.join(", ")
                ),
            ));
        }
        let n = value
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=4096).contains(n))
            .ok_or_else(|| {
                cx.err(
                    format!("--{key}"),
                    format!("{value:?}: expected a thread count 1..=4096"),
                )
            })?;
        self.set_threads(key, n);
        Ok(())
    }

    /// Applies `--kernels JSON` edits, upstream's way: an array of objects;
    /// `{"index": i}` alone deletes kernel i; `{"index": i, ...}` replaces
    /// the given fields of kernel i; an object without an index (or with
    /// index = the number of kernels) appends a kernel. Indices refer to
    /// the kernels as they were before the edits.
    pub fn apply_kernel_edits(&mut self, json: &str) -> Result<(), ConfigError> {
        let cx = Ctx {
            source: "--kernels",
        };
        let v = cx.parse_json(json)?;
        let edits = v
            .as_array()
            .ok_or_else(|| cx.err("(top level)", "expected an array of kernel edits"))?;
        let n = self.kernels.len();
        let mut deleted = vec![false; n];
        let mut appended = Vec::new();
        for (e, edit) in edits.iter().enumerate() {
            let o = edit
                .as_object()
                .ok_or_else(|| cx.err(format!("[{e}]"), "expected an object"))?;
            let index = match o.get("index") {
                None => None,
                Some(i) => Some(
                    i.as_u64()
                        .map(|i| i as usize)
                        .filter(|i| *i <= n)
                        .ok_or_else(|| {
                            cx.err(
                                format!("[{e}].index"),
                                format!("{i}: expected a kernel index 0..={n}"),
                            )
                        })?,
                ),
            };
            match index {
                Some(i) if i < n && o.len() == 1 => deleted[i] = true,
                Some(i) if i < n => {
                    // The kernel with the edited fields, checked whole.
                    let mut merged = self.entry_value(i);
                    for (k, val) in o.iter().filter(|(k, _)| *k != "index") {
                        merged.insert(k.clone(), val.clone());
                    }
                    self.kernels[i] = cx.kernel(i, &Value::Object(merged), false)?;
                }
                _ => appended.push(cx.kernel(n + appended.len(), edit, true)?),
            }
        }
        let mut kept: Vec<KernelEntry> = std::mem::take(&mut self.kernels)
            .into_iter()
            .zip(deleted)
            .filter_map(|(k, d)| (!d).then_some(k))
            .collect();
        kept.extend(appended);
        self.kernels = kept;
        Ok(())
    }

    fn entry_value(&self, i: usize) -> Map<String, Value> {
        let k = &self.kernels[i];
        let mut m = Map::new();
        m.insert("name".into(), k.name.clone().into());
        m.insert("pool".into(), k.pool.name().into());
        m.insert("stage".into(), k.stage.map_or(Value::from(-1), Value::from));
        m.insert("fanout".into(), k.fanout.into());
        m.insert("params".into(), Value::Object(k.params.clone()));
        m
    }

    /// The configuration as JSON (what the server runs with).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("port".into(), self.port.into());
        m.insert(
            "num_req_handle_threads".into(),
            self.num_req_handle_threads.into(),
        );
        m.insert(
            "num_io_handle_threads".into(),
            self.num_io_handle_threads.into(),
        );
        m.insert(
            "num_app_logic_threads".into(),
            self.num_app_logic_threads.into(),
        );
        m.insert(
            "num_req_local_threads".into(),
            self.num_req_local_threads.into(),
        );
        m.insert(
            "num_thrift_accept_threads".into(),
            self.num_thrift_accept_threads.into(),
        );
        m.insert(
            "Kernels".into(),
            Value::Array(
                (0..self.kernels.len())
                    .map(|i| Value::Object(self.entry_value(i)))
                    .collect(),
            ),
        );
        Value::Object(m)
    }

    /// The stages and their kernel instances, in upstream's order.
    pub fn plan(&self) -> Plan {
        let mut stages: Vec<Vec<Instance>> = Vec::new();
        for (k, e) in self.kernels.iter().enumerate() {
            for fidx in 0..e.fanout {
                let s = match e.stage {
                    Some(s) => s,
                    None => stages.len(),
                };
                if stages.len() <= s {
                    stages.resize_with(s + 1, Vec::new);
                }
                let mut params = e.params.clone();
                for key in FIDX_KEYS {
                    if let Some(Value::String(v)) = params.get_mut(*key) {
                        *v = v.replace("{fidx}", &fidx.to_string());
                    }
                }
                stages[s].push(Instance {
                    kernel: k,
                    fidx,
                    params,
                });
            }
        }
        Plan { stages }
    }
}

/// Shape's response-size distribution in the `ads` preset: the sizes at
/// quantiles 0, 0.01, ..., 1 (upstream's ads config; up to about 948 KB).
const ADS_RESPONSE_SIZES: [u64; 101] = [
    1, 1, 1, 1, 1, 1, 1, 1705, 2374, 2422, 2958, 2811, 2522, 2136, 2130, 2030, 2427, 3183, 3888,
    5062, 6378, 9229, 10788, 11371, 11390, 11321, 11486, 11633, 11830, 12137, 13557, 15800, 23245,
    29758, 41319, 53895, 68653, 80780, 95212, 109401, 120835, 132684, 142362, 148211, 153302,
    157681, 160529, 163065, 166226, 169108, 171657, 173865, 175994, 177949, 179832, 182259, 185379,
    187888, 189237, 191987, 195404, 198976, 200698, 202358, 203846, 204169, 204165, 202529, 200133,
    197186, 192018, 189356, 185921, 182347, 177089, 174652, 170269, 167810, 165590, 163265, 161791,
    161661, 158209, 156940, 153617, 149655, 146036, 141880, 139160, 135021, 128921, 123605, 118921,
    112378, 103364, 91257, 80651, 63271, 43597, 12464, 948019,
];

/// The preset names.
pub const PRESETS: &[&str] = &["ads", "model_a"];

/// model_a's embedding tables.
pub const MODEL_A_TABLES: usize = 12;
/// model_a's embedding (and bottom-MLP output) width.
pub const MODEL_A_DIM: usize = 96;
/// model_a's samples per request.
pub const MODEL_A_BATCH: usize = 160;
/// model_a's dense features per sample.
pub const MODEL_A_DENSE: usize = 256;
/// model_a's rows per embedding table at scale 1.
pub const MODEL_A_ROWS: f64 = 1_000_000.0;

/// A named configuration for a host with `nproc` CPUs; `scale` multiplies
/// the embedding table rows (`model_a`; `ads` has no tables and ignores
/// it).
///
/// - `ads`: upstream's default ad-ranking pipeline. zstd Decompress x96
///   (60 KiB, level 4); Deserialize x6; Serialize x6; IBRun x4 (40,000
///   rounds); GEMM x6 (360x120x600); HashMap x5 (6000 entries, 988 runs);
///   zstd Compress x64 (72 KiB, level 4); a DeepCopy chain (fanout 10);
///   FakeIO (latency CDF 6 ms at q0 to 971 ms at q1); Shape echoing the
///   request and Shape drawing the response size from a CDF up to
///   ~948 KB. Pools: ceil(nproc/6) request, 1 IO, ceil(1.5 nproc) app
///   logic, 2 request-local.
/// - `model_a`: a DLRM-style ranking model scoring a batch of 160
///   candidates per request (see [`model_a`]).
pub fn preset(name: &str, nproc: usize, scale: f64) -> Result<ServerConfig, Error> {
    match name {
        "ads" => ads(nproc).map_err(Error::Input),
        "model_a" => model_a(nproc, scale),
        _ => Err(Error::Input(format!(
            "unknown preset {name:?}: expected one of {}",
            PRESETS.join(", ")
        ))),
    }
}

/// The `model_a` preset: a DLRM-style model, per request:
///
/// 0. `Features` (requestHandle): the request body, cut into 160
///    samples, becomes 160 x 256 dense features and, per table, one bag
///    of 1 to 5 indices per sample (hashed from the bytes).
/// 1. Concurrently, on applicationLogic: `Embedding`, 12 int8 tables of
///    dim 96 (1M rows each at scale 1: 12 x 1M x 104 B = 1.25 GB; rows =
///    round(1M x scale), at least 1), sum-pooling the request's bags into
///    160 x 1152, split in 2 parts (by samples); and the bottom MLP,
///    `DenseFP32` 256 -> 512 -> 256 -> 96 with ReLU.
/// 2. `Interaction`: per sample the 13 vectors' 78 pairwise dot products
///    after the 96 dense values: 160 x 174.
/// 3. The top MLP, `DenseFP32` 174 -> 1024 -> 1024 -> 512 -> 256 -> 1
///    (MLPerf DLRM's top MLP widths) with ReLU and a sigmoid out, whose
///    160 scores (little-endian f32, 640 bytes) are the response.
///
/// About 0.7 GFLOP per request (0.09 bottom MLP, 0.6 top MLP, 0.005
/// interaction; the ~5,800 embedding lookups are memory bound): about
/// 3.5 ms of CPU per request on one Zen 5 core at scale 1 (`adsim_ml
/// pipeline model_a`), the top MLP 2.6 ms of it. Switch the tables to
/// fp16 with
/// `--kernels '[{"index": 1, "params": {..., "weights_precision": "fp16"}}]'`.
/// Pools: ceil(nproc/2) request handling (Features), nproc application
/// logic (the model), 1 IO, 2 request-local.
pub fn model_a(nproc: usize, scale: f64) -> Result<ServerConfig, Error> {
    if !(scale.is_finite() && scale > 0.0) {
        return Err(Error::Input(format!(
            "model_a scale {scale}: expected a number above 0"
        )));
    }
    let rows = (MODEL_A_ROWS * scale)
        .round()
        .clamp(1.0, f64::from(u32::MAX)) as u64;
    let nproc = nproc.max(1);
    let (t, d, b) = (MODEL_A_TABLES, MODEL_A_DIM, MODEL_A_BATCH);
    let interaction = d + (t + 1) * t / 2;
    let text = serde_json::json!({
        "port": DEFAULT_PORT,
        "num_req_handle_threads": nproc.div_ceil(2),
        "num_io_handle_threads": 1,
        "num_app_logic_threads": nproc,
        "num_req_local_threads": 2,
        "num_thrift_accept_threads": 1,
        "Kernels": [
            {"name": "Features", "pool": "requestHandle", "stage": 0,
             "params": {"batch": b, "dense_dim": MODEL_A_DENSE, "tables": t, "rows": rows,
                        "bag_size_min": 1, "bag_size_max": 5,
                        "dense_out": "Rdense", "sparse_out": "Rsparse"}},
            {"name": "Embedding", "pool": "applicationLogic", "stage": 1,
             "params": {"num_tables": t, "num_embeddings": rows, "embedding_dim": d,
                        "bag_size": 3, "batch_size": b, "weights_precision": "int8",
                        "pooling": "sum", "nthreads": 2, "input": "Hmodel_a_tables",
                        "indices_from": "Rsparse", "output": "Rembedded"}},
            {"name": "DenseFP32", "pool": "applicationLogic", "stage": 1,
             "params": {"dims": [MODEL_A_DENSE, 512, 256, d], "batch": b, "relu": true,
                        "input": "Hmodel_a_bottom", "from": "Rdense", "to": "Rbottom"}},
            {"name": "Interaction", "pool": "applicationLogic", "stage": 2,
             "params": {"dense": "Rbottom", "embeddings": "Rembedded", "output": "Rinteraction",
                        "batch": b, "tables": t, "dim": d}},
            {"name": "DenseFP32", "pool": "applicationLogic", "stage": 3,
             "params": {"dims": [interaction, 1024, 1024, 512, 256, 1], "batch": b, "relu": true,
                        "sigmoid_out": true, "respond": true, "input": "Hmodel_a_top",
                        "from": "Rinteraction"}}
        ]
    });
    ServerConfig::from_json(&text.to_string(), "preset model_a")
        .map_err(|e| Error::Input(e.to_string()))
}

/// The `ads` preset (see [`preset`]).
fn ads(nproc: usize) -> Result<ServerConfig, String> {
    let nproc = nproc.max(1);
    let quantiles: Vec<Value> = (0..=100)
        .map(|i| Value::from(f64::from(i) / 100.0))
        .collect();
    let text = serde_json::json!({
        "port": DEFAULT_PORT,
        "num_req_handle_threads": nproc.div_ceil(6),
        "num_io_handle_threads": 1,
        "num_app_logic_threads": (nproc * 3).div_ceil(2),
        "num_req_local_threads": 2,
        "num_thrift_accept_threads": 1,
        "Kernels": [
            {"name": "Decompress", "pool": "requestHandle", "stage": 0, "fanout": 96,
             "params": {"input": "Hdecompress{fidx}", "output": "Rdecompressed{fidx}",
                        "compressor": "zstd", "level": 4, "size": 61440}},
            {"name": "Deserialize", "pool": "requestHandle", "stage": 1, "fanout": 6,
             "params": {"input": "Hdeserialize{fidx}", "output": "Rdeserialized{fidx}",
                        "req_vec_len": 64, "req_unit_list_len": 30, "unit_info_list_len": 16,
                        "unit_i32_list_len": 13, "unit_list_map_size": 6, "niters": 15}},
            {"name": "Serialize", "pool": "requestHandle", "stage": 2, "fanout": 6,
             "params": {"input": "Hserialize{fidx}", "output": "Rserialized{fidx}",
                        "req_vec_len": 256, "req_unit_list_len": 16, "unit_info_list_len": 142,
                        "unit_i32_list_len": 99, "unit_list_map_size": 139, "niters": 3}},
            {"name": "IBRun", "pool": "applicationLogic", "stage": 3, "fanout": 4,
             "params": {"nrounds": 40000, "nmethods": 2000000}},
            {"name": "GEMM", "pool": "applicationLogic", "stage": 4, "fanout": 6,
             "params": {"M": 360, "N": 120, "K": 600, "niters": 1, "nthreads": 36,
                        "input": "H45x60x600{fidx}"}},
            {"name": "HashMap", "pool": "applicationLogic", "stage": 5, "fanout": 5,
             "params": {"input": "f14vecmap{fidx}", "map_type": "f14vec", "runs": 988, "size": 6000}},
            {"name": "Compress", "pool": "requestHandle", "stage": 6, "fanout": 64,
             "params": {"input": "Hcompress{fidx}", "output": "Rcompressed{fidx}",
                        "compressor": "zstd", "level": 4, "size": 73728}},
            {"name": "DeepCopy", "pool": "applicationLogic", "stage": 7,
             "params": {"unit_vec_len": 65536, "copy_len": 36, "i64_vec_len": 20440,
                        "stri64_hashtab_size": 480, "stri64_map_size": 100,
                        "input": "Hdeepcopy", "output": "Rdeepcopy"}},
            {"name": "DeepCopy", "pool": "applicationLogic", "stage": 8, "fanout": 10,
             "params": {"copy_len": 36, "input": "Rdeepcopy", "output": "Rdeepcopy{fidx}"}},
            {"name": "DeepCopy", "pool": "applicationLogic", "stage": 9, "fanout": 10,
             "params": {"copy_len": 36, "input": "Rdeepcopy{fidx}", "output": "Rdeepcopy{fidx}"}},
            {"name": "DeepCopy", "pool": "applicationLogic", "stage": 10, "fanout": 10,
             "params": {"copy_len": 36, "input": "Rdeepcopy{fidx}", "output": "Rdeepcopy{fidx}"}},
            {"name": "DeepCopy", "pool": "applicationLogic", "stage": 11, "fanout": 10,
             "params": {"copy_len": 23, "input": "Rdeepcopy{fidx}", "output": "Rdeepcopy{fidx}"}},
            {"name": "DeepCopy", "pool": "applicationLogic", "stage": 12, "fanout": 10,
             "params": {"copy_len": 23, "input": "Rdeepcopy{fidx}", "output": "Rdeepcopy{fidx}"}},
            {"name": "FakeIO", "pool": "IOHandle", "stage": 25,
             "params": {"quantiles": [0, 0.1, 0.5, 0.95, 0.96, 0.97, 0.98, 0.99, 1],
                        "latencies": [6000, 100000, 250000, 500000, 501000, 502000, 503000, 504000, 971000],
                        "input": "Hsleep"}},
            {"name": "Shape", "pool": "IOHandle", "stage": 32,
             "params": {"input": "Rshape", "quantiles": [0, 1], "sizes": [1, 1]}},
            {"name": "Shape", "pool": "IOHandle", "stage": 32,
             "params": {"quantiles": quantiles, "sizes": ADS_RESPONSE_SIZES.to_vec()}}
        ]
    });
    ServerConfig::from_json(&text.to_string(), "preset ads").map_err(|e| e.to_string())
}

/// The params naming shared or request objects, where `{fidx}` is
/// replaced by the instance's index.
const FIDX_KEYS: &[&str] = &[
    "input",
    "output",
    "from",
    "to",
    "indices_from",
    "dense",
    "embeddings",
    "dense_out",
    "sparse_out",
];

/// One instance of a kernel: `fidx` of its fanout, with `{fidx}`
/// replaced in the names of the objects it reads and writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Index in [`ServerConfig::kernels`].
    pub kernel: usize,
    pub fidx: usize,
    pub params: Map<String, Value>,
}

/// The stages, run in order (a stage may be empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub stages: Vec<Vec<Instance>>,
}

impl Plan {
    /// Kernel instances per request.
    pub fn instances(&self) -> usize {
        self.stages.iter().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"{
  "port": 10090,
  "num_req_handle_threads": 2,
  "num_app_logic_threads": 3,
  "Kernels": [
    {"name": "GEMM", "pool": "applicationLogic", "stage": 1, "fanout": 2,
     "params": {"M": 8, "N": 4, "K": 16, "input": "Hgemm{fidx}"}},
    {"name": "Compress", "pool": "requestHandle", "stage": 0, "fanout": 3,
     "params": {"compressor": "zstd", "level": 4, "size": 4096,
                "input": "Hc{fidx}", "output": "Rc{fidx}"}},
    {"name": "Shape", "params": {"quantiles": [0, 1], "sizes": [10, 20]}}
  ]
}"#;

    fn err(text: &str) -> String {
        ServerConfig::from_json(text, "cfg.json")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_config_is_read_with_upstream_defaults() {
        let c = ServerConfig::from_json(SMALL, "cfg.json").unwrap();
        assert_eq!(c.port, 10090);
        assert_eq!((c.num_req_handle_threads, c.num_app_logic_threads), (2, 3));
        assert_eq!(c.num_io_handle_threads, 8, "upstream's default");
        assert_eq!(c.kernels.len(), 3);
        assert_eq!(c.kernels[2].pool, Pool::RequestLocal);
        assert_eq!(c.kernels[2].stage, None);
        // Back to JSON and in again: the same configuration.
        let again = ServerConfig::from_json(&c.to_value().to_string(), "x").unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn the_plan_orders_stages_and_substitutes_fidx() {
        let p = ServerConfig::from_json(SMALL, "cfg.json").unwrap().plan();
        // Compress x3 at stage 0, GEMM x2 at stage 1, Shape appended as 2.
        assert_eq!(
            p.stages.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![3, 2, 1]
        );
        assert_eq!(p.instances(), 6);
        let outs: Vec<&str> = p.stages[0]
            .iter()
            .map(|i| i.params["output"].as_str().unwrap())
            .collect();
        assert_eq!(outs, vec!["Rc0", "Rc1", "Rc2"]);
        assert_eq!(p.stages[1][1].params["input"], "Hgemm1");
        // Without a stage, each instance gets one of its own.
        let c = ServerConfig::from_json(
            r#"{"Kernels": [{"name": "Echo", "fanout": 2, "params": {"quantiles": [0], "latencies": [1]}}]}"#,
            "x",
        )
        .unwrap();
        assert_eq!(
            c.plan().stages.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![1, 1]
        );
    }

    #[test]
    fn malformed_json_names_the_line_and_column() {
        let e = err("{\n  \"port\": 10086,\n  \"Kernels\": [\n    {\"name\": \"GEMM\",}\n  ]\n}");
        assert!(e.starts_with("cfg.json: line 4, column 21: "), "{e}");
    }

    #[test]
    fn bad_configs_name_the_kernel_and_key() {
        let cases = [
            (
                r#"{"Kernels": [{"name": "GEMN"}]}"#,
                "Kernels[0].name: unknown kernel \"GEMN\"",
            ),
            (
                r#"{"Kernels": [{"name": "GEMM", "pool": "app", "params": {"M": 1, "N": 1, "K": 1}}]}"#,
                "Kernels[0] (GEMM).pool: unknown pool \"app\"",
            ),
            (
                r#"{"Kernels": [{"name": "GEMM", "params": {"M": 1, "N": 1, "K": 1, "Q": 2}}]}"#,
                "Kernels[0] (GEMM) params.Q: unknown param of GEMM",
            ),
            (
                r#"{"Kernels": [{"name": "GEMM", "params": {"M": "x", "N": 1, "K": 1}}]}"#,
                "Kernels[0] (GEMM) params.M: \"x\": expected an integer >= 1",
            ),
            (
                r#"{"Kernels": [{"name": "GEMM", "params": {"M": 1, "N": 1}}]}"#,
                "Kernels[0] (GEMM) params.K: missing",
            ),
            (
                r#"{"Kernels": [{"name": "Echo", "fanout": 0}]}"#,
                "Kernels[0] (Echo).fanout: 0",
            ),
            (
                r#"{"Kernels": [{"name": "FakeIO", "params": {"quantiles": [0, 1], "latencies": [5]}}]}"#,
                "params.latencies: 1 values for 2 quantiles",
            ),
            (
                r#"{"Kernels": [{"name": "Compress", "params": {"compressor": "lz4", "level": 1, "size": 9}}]}"#,
                "params.compressor: \"lz4\": expected one of zstd",
            ),
            (r#"{"prot": 1}"#, "cfg.json: prot: unknown key"),
            (
                r#"{"num_app_logic_threads": 0}"#,
                "num_app_logic_threads: 0: expected a thread count",
            ),
            (
                r#"{"Kernels": [{"nam": "Echo"}]}"#,
                "Kernels[0].nam: unknown key",
            ),
        ];
        for (text, want) in cases {
            let e = err(text);
            assert!(e.contains(want), "{text}\n  got: {e}\n  want: {want}");
        }
    }

    #[test]
    fn kernel_edits_replace_delete_and_append_as_upstream() {
        let mut c = ServerConfig::from_json(SMALL, "cfg.json").unwrap();
        c.apply_kernel_edits(
            r#"[{"index": 0, "fanout": 5, "params": {"M": 2, "N": 2, "K": 2}},
                {"index": 1},
                {"name": "Echo", "params": {"quantiles": [0, 1], "latencies": [1, 2]}}]"#,
        )
        .unwrap();
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, vec!["GEMM", "Shape", "Echo"]);
        assert_eq!(c.kernels[0].fanout, 5);
        assert_eq!(
            c.kernels[0].pool,
            Pool::ApplicationLogic,
            "fields not given are kept"
        );
        let e = c
            .apply_kernel_edits(r#"[{"index": 0, "params": {"M": 0, "N": 1, "K": 1}}]"#)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("--kernels: Kernels[0] (GEMM) params.M: 0"),
            "{e}"
        );
        let e = c.apply_kernel_edits(r#"[{"index": 9}]"#).unwrap_err();
        assert!(
            e.to_string()
                .contains("[0].index: 9: expected a kernel index 0..=3"),
            "{e}"
        );
    }

    #[test]
    fn the_ads_preset_is_upstreams_pipeline() {
        let c = preset("ads", 12, 1.0).unwrap();
        assert_eq!(
            (
                c.num_req_handle_threads,
                c.num_io_handle_threads,
                c.num_app_logic_threads,
                c.num_req_local_threads
            ),
            (2, 1, 18, 2)
        );
        let p = c.plan();
        assert_eq!(p.stages.len(), 33);
        let fan: Vec<usize> = p.stages.iter().map(Vec::len).collect();
        assert_eq!(&fan[..13], &[96, 6, 6, 4, 6, 5, 64, 1, 10, 10, 10, 10, 10]);
        assert!(fan[13..25].iter().all(|n| *n == 0));
        assert_eq!((fan[25], fan[32]), (1, 2));
        assert_eq!(p.instances(), 96 + 6 + 6 + 4 + 6 + 5 + 64 + 1 + 50 + 1 + 2);
        assert_eq!(p.stages[0][95].params["input"], "Hdecompress95");
        let shape = &c.kernels[15].params;
        assert_eq!(shape["sizes"].as_array().unwrap().len(), 101);
        assert_eq!(shape["sizes"][100], 948019);
        assert_eq!(preset("ads", 1, 1.0).unwrap().num_app_logic_threads, 2);
        assert!(
            preset("model_b", 2, 1.0)
                .unwrap_err()
                .to_string()
                .contains("expected one of ads, model_a")
        );
    }

    /// Runs a plan's kernels stage by stage on one thread for one request
    /// body (every part of every instance, in order) and returns the
    /// response.
    fn run_plan(c: &ServerConfig, body: &[u8]) -> Vec<u8> {
        use crate::kernels::{HandleObjs, RequestObjs, build};
        let h = HandleObjs::new();
        let plan = c.plan();
        let stages: Vec<Vec<_>> = plan
            .stages
            .iter()
            .map(|st| {
                st.iter()
                    .map(|i| build(&c.kernels[i.kernel].name, &i.params, i.fidx, &h).unwrap())
                    .collect()
            })
            .collect();
        let rq = RequestObjs::new(bytes::Bytes::copy_from_slice(body));
        let mut out = Vec::new();
        for st in &stages {
            for k in st {
                for part in 0..k.parts() {
                    out.extend_from_slice(&k.fire(&rq, part).unwrap().output);
                }
            }
        }
        out
    }

    #[test]
    fn model_a_scores_each_sample_from_the_request() {
        let c = preset("model_a", 8, 0.001).unwrap();
        assert_eq!(
            (
                c.num_req_handle_threads,
                c.num_app_logic_threads,
                c.num_io_handle_threads,
                c.num_req_local_threads
            ),
            (4, 8, 1, 2)
        );
        let p = c.plan();
        let names: Vec<Vec<&str>> = p
            .stages
            .iter()
            .map(|s| {
                s.iter()
                    .map(|i| c.kernels[i.kernel].name.as_str())
                    .collect()
            })
            .collect();
        assert_eq!(
            names,
            vec![
                vec!["Features"],
                vec!["Embedding", "DenseFP32"],
                vec!["Interaction"],
                vec!["DenseFP32"]
            ]
        );
        assert_eq!(c.kernels[1].params["num_embeddings"], 1000);
        assert_eq!(c.kernels[4].params["dims"][0], 96 + 78);
        assert_eq!(
            preset("model_a", 1, 1.0).unwrap().kernels[0].params["rows"],
            1_000_000
        );
        assert!(
            preset("model_a", 1, 0.0)
                .unwrap_err()
                .to_string()
                .contains("scale 0")
        );

        let body: Vec<u8> = (0..8000u32).map(|i| (i * 7919 % 251) as u8).collect();
        let scores = |body: &[u8]| -> Vec<f32> {
            let out = run_plan(&c, body);
            assert_eq!(out.len(), MODEL_A_BATCH * 4, "one f32 score per sample");
            out.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        };
        let a = scores(&body);
        assert!(a.iter().all(|&s| s > 0.0 && s < 1.0), "{a:?}");
        assert!(a.iter().any(|&s| s != a[0]), "samples differ");
        assert_eq!(scores(&body), a, "the same request scores the same");
        // Changing sample 0's bytes changes its score, and only its score.
        let mut other = body.clone();
        other[10] ^= 0x55;
        let b = scores(&other);
        assert_ne!(b[0], a[0]);
        assert_eq!(b[1..], a[1..]);
    }

    #[test]
    fn command_line_fields_are_checked() {
        let mut c = ServerConfig::from_json(SMALL, "cfg.json").unwrap();
        c.set_field("num_app_logic_threads", "12").unwrap();
        c.set_field("port", "7000").unwrap();
        assert_eq!((c.num_app_logic_threads, c.port), (12, 7000));
        assert!(
            c.set_field("num_app_threads", "1")
                .unwrap_err()
                .to_string()
                .contains("unknown field")
        );
        assert!(c.set_field("port", "99999").is_err());
    }
}
