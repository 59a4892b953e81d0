//! `Client` and `ClientLite`: the ad-ranking service's RPC fan-out to its
//! downstream services. Each fire sends one `Sim` RPC to every service in
//! `services`, all at once, and waits for every reply (upstream blocks the
//! firing thread the same way).
//!
//! The request body is, as `Shape`'s output, one of `str_vec_len` (1000)
//! pre-generated strings with sizes from the `quantiles`/`sizes` CDF when
//! `input` names an `H...` object (default `Hclient`), else the incoming
//! request itself. The kernel's output is two bytes per service, the first
//! and the last byte of its reply (one space for an empty reply), in
//! service order.
//!
//! - `Client` opens a new connection to each service for every RPC (TCP
//!   and HTTP/2 handshakes, plus TLS with `tls`) and closes it after the
//!   reply, on one I/O thread of its own.
//! - `ClientLite` connects to every service once, when it is built, and
//!   reuses those connections (HTTP/2 multiplexes concurrent fires), with
//!   one I/O thread per service.
//!
//! Upstream expects its downstreams to be running: `services` names them
//! (`rackbench adsim server` serves as one), nothing is started here.
//! `services` entries are `{"host": H, "port": P}` with at most one of `H`
//! and `P` an array (one service per element). Differences: gRPC instead
//! of thrift Rocket; `tls` (ours, default false) keeps TLS on for the whole
//! connection where upstream does a TLS handshake then continues in
//! plaintext (fizz's stop-TLS); a failed RPC fails the fire with the
//! service's address and the error (upstream logs it and returns a space).

use super::{Fired, HandleObjs, Kernel, Params, Rand, RequestObjs, Work, io::Shape};
use crate::Error;
use crate::proto::SimRequest;
use crate::proto::ad_sim_client::AdSimClient;
use bytes::{Bytes, BytesMut};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use tonic::transport::Channel;

/// Replies larger than this are refused by the gRPC client.
const MAX_REPLY: usize = 256 << 20;

/// One downstream service: its address and the name it was given.
#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    pub host: String,
    pub addr: SocketAddr,
}

/// Expands and resolves `services` (already checked by the config's
/// schema); errors name the entry.
pub fn services(p: &Params) -> Result<Vec<Service>, Error> {
    let list = p
        .map
        .get("services")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::Input(format!("{} params.services: missing", p.kernel)))?;
    let bad =
        |i: usize, what: &str| Error::Input(format!("{} params.services[{i}]: {what}", p.kernel));
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let (h, port) = match s.as_object() {
            Some(o) => (o.get("host"), o.get("port")),
            None => (None, None),
        };
        let (Some(h), Some(port)) = (h, port) else {
            return Err(bad(i, "expected an object with host and port"));
        };
        let as_port = |v: &Value| {
            v.as_u64()
                .filter(|n| (1..=65_535).contains(n))
                .map(|n| n as u16)
                .ok_or_else(|| bad(i, &format!("port {v}: expected 1-65535")))
        };
        let as_host = |v: &Value| {
            v.as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| bad(i, &format!("host {v}: expected a host name or address")))
        };
        let pairs: Vec<(String, u16)> = match (h, port) {
            (Value::Array(hs), p1) if !p1.is_array() => {
                let port = as_port(p1)?;
                hs.iter()
                    .map(|h| as_host(h).map(|h| (h, port)))
                    .collect::<Result<_, _>>()?
            }
            (h1, Value::Array(ps)) if !h1.is_array() => {
                let host = as_host(h1)?;
                ps.iter()
                    .map(|p| as_port(p).map(|p| (host.clone(), p)))
                    .collect::<Result<_, _>>()?
            }
            (h1, p1) if !h1.is_array() && !p1.is_array() => vec![(as_host(h1)?, as_port(p1)?)],
            _ => return Err(bad(i, "at most one of host and port may be an array")),
        };
        if pairs.is_empty() {
            return Err(bad(i, "an empty host or port array names no service"));
        }
        for (host, port) in pairs {
            let addr = crate::addr::resolve(&host, port)
                .map_err(|e| bad(i, &format!("host {host:?}: {e:#}")))?;
            out.push(Service { host, addr });
        }
    }
    if out.is_empty() {
        return Err(Error::Input(format!(
            "{} params.services: names no service (expected at least one)",
            p.kernel
        )));
    }
    Ok(out)
}

/// How connections are made: plaintext or TLS accepting any certificate
/// (as the AdSim client without `--ca`).
#[derive(Clone)]
enum Link {
    Plain,
    Tls(tokio_rustls::TlsConnector),
}

impl Link {
    async fn connect(&self, s: &Service) -> Result<Channel, String> {
        let r = match self {
            Link::Plain => rpc::client::connect(s.addr).await,
            Link::Tls(c) => crate::tls::connect(s.addr, &s.host, c).await,
        };
        r.map_err(|e| {
            format!(
                "cannot connect to the downstream service {} ({}): {}",
                s.host,
                s.addr,
                rpc::error_chain(&e)
            )
        })
    }
}

/// A tokio runtime owned by a kernel, shut down without blocking when the
/// kernel is dropped (possibly on an async thread).
struct Io(Option<tokio::runtime::Runtime>);

impl Io {
    fn new(threads: usize, name: &str) -> Result<Io, String> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name(name)
            .enable_all()
            .build()
            .map(|rt| Io(Some(rt)))
            .map_err(|e| format!("cannot start the kernel's I/O threads: {e}"))
    }

    /// Runs `fut` on the kernel's threads and waits for it on the calling
    /// thread (which may itself be an async worker: no nested runtime).
    fn run<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, String> {
        let rt = self
            .0
            .as_ref()
            .ok_or("the kernel's I/O threads are stopped")?;
        let (tx, rx) = mpsc::sync_channel(1);
        rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .map_err(|_| "the kernel's I/O task ended without a result".to_string())
    }
}

impl Drop for Io {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// What the kernel has done, for reporting.
#[derive(Default)]
struct Counters {
    fires: AtomicU64,
    rpcs: AtomicU64,
    connections: AtomicU64,
    sent: AtomicU64,
    received: AtomicU64,
}

/// Counts of a kernel's work so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub fires: u64,
    pub rpcs: u64,
    /// Connections opened (ClientLite: at build, one per service).
    pub connections: u64,
    /// Request and reply body bytes.
    pub sent: u64,
    pub received: u64,
}

/// The kernel: `Client` (`lite` false) or `ClientLite` (`lite` true).
pub struct RpcClient {
    body: Shape,
    services: Vec<Service>,
    link: Link,
    /// ClientLite's connections, one per service, in service order.
    channels: Option<Vec<Channel>>,
    io: Io,
    n: std::sync::Arc<Counters>,
}

impl RpcClient {
    pub fn new(p: &Params, h: &HandleObjs, rand: Rand, lite: bool) -> Result<Self, Error> {
        let services = services(p)?;
        let input = p.str_or("input", "Hclient")?;
        if input.starts_with('H') {
            for k in ["quantiles", "sizes"] {
                if !p.has(k) {
                    return Err(Error::Input(format!(
                        "{} params.{k}: missing: the request sizes come from quantiles and sizes when input ({input:?}) names a pre-generated H... object",
                        p.kernel
                    )));
                }
            }
        }
        // The request bodies are Shape's: the same params, default input
        // Hclient.
        let mut m = p.map.clone();
        m.insert("input".into(), Value::String(input.to_string()));
        let body = Shape::new(
            &Params {
                kernel: p.kernel,
                map: &m,
            },
            h,
            rand,
        )?;
        let link = if p.bool_or("tls", false)? {
            Link::Tls(
                crate::tls::client_connector(None)
                    .map_err(|e| Error::Input(format!("{} params.tls: {e:#}", p.kernel)))?,
            )
        } else {
            Link::Plain
        };
        let threads = if lite { services.len().min(64) } else { 1 };
        let io = Io::new(
            threads,
            if lite {
                "adsim-clientlite"
            } else {
                "adsim-client"
            },
        )
        .map_err(Error::Input)?;
        let n = std::sync::Arc::new(Counters::default());
        let channels = if lite {
            let (link, list) = (link.clone(), services.clone());
            let chans = io
                .run(async move {
                    let mut v = Vec::with_capacity(list.len());
                    for s in &list {
                        v.push(link.connect(s).await?);
                    }
                    Ok::<_, String>(v)
                })
                .map_err(Error::Input)?
                .map_err(Error::Input)?;
            n.connections
                .fetch_add(chans.len() as u64, Ordering::Relaxed);
            Some(chans)
        } else {
            None
        };
        Ok(RpcClient {
            body,
            services,
            link,
            channels,
            io,
            n,
        })
    }

    /// The services, expanded and resolved, in order.
    pub fn services(&self) -> &[Service] {
        &self.services
    }

    pub fn totals(&self) -> Totals {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Totals {
            fires: g(&self.n.fires),
            rpcs: g(&self.n.rpcs),
            connections: g(&self.n.connections),
            sent: g(&self.n.sent),
            received: g(&self.n.received),
        }
    }
}

/// One RPC: on `chan`, or on a new connection when `None`.
async fn call(
    link: Link,
    s: Service,
    chan: Option<Channel>,
    body: Bytes,
    n: std::sync::Arc<Counters>,
) -> Result<Bytes, String> {
    let chan = match chan {
        Some(c) => c,
        None => {
            let c = link.connect(&s).await?;
            n.connections.fetch_add(1, Ordering::Relaxed);
            c
        }
    };
    let sent = body.len() as u64;
    let mut c = AdSimClient::new(chan).max_decoding_message_size(MAX_REPLY);
    let reply = c
        .sim(SimRequest { request: body })
        .await
        .map_err(|e| {
            format!(
                "the downstream service {} ({}) failed the RPC: {}",
                s.host,
                s.addr,
                rpc::error_chain(&e)
            )
        })?
        .into_inner()
        .response;
    n.rpcs.fetch_add(1, Ordering::Relaxed);
    n.sent.fetch_add(sent, Ordering::Relaxed);
    n.received.fetch_add(reply.len() as u64, Ordering::Relaxed);
    Ok(reply)
}

/// Upstream's digest of one reply: its first and last byte, or a space
/// for an empty reply.
pub fn digest(reply: &[u8], out: &mut BytesMut) {
    match (reply.first(), reply.last()) {
        (Some(&a), Some(&b)) => out.extend_from_slice(&[a, b]),
        _ => out.extend_from_slice(b" "),
    }
}

impl Kernel for RpcClient {
    fn fire(&self, rq: &RequestObjs, _part: usize) -> Result<Fired, Error> {
        let body = self.body.fire(rq, 0)?.output;
        let calls: Vec<_> = self
            .services
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let chan = self.channels.as_ref().and_then(|c| c.get(i)).cloned();
                call(
                    self.link.clone(),
                    s.clone(),
                    chan,
                    body.clone(),
                    self.n.clone(),
                )
            })
            .collect();
        let replies = self
            .io
            .run(futures::future::join_all(calls))
            .map_err(Error::Host)?;
        let mut out = BytesMut::with_capacity(2 * replies.len());
        for r in replies {
            digest(&r.map_err(Error::Host)?, &mut out);
        }
        self.n.fires.fetch_add(1, Ordering::Relaxed);
        Ok(Fired::output(out.freeze()))
    }

    /// Bytes sent and received (request and reply bodies) per fire so far.
    fn work(&self) -> Work {
        let t = self.totals();
        Work {
            flops: 0.0,
            bytes: if t.fires == 0 {
                0.0
            } else {
                (t.sent + t.received) as f64 / t.fires as f64
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerConfig;
    use crate::server::{Engine, Service as SimService};
    use serde_json::json;
    use std::sync::Arc;

    /// A real AdSim server on 127.0.0.1 answering with 64-byte strings,
    /// counting the connections it accepts.
    struct Downstream {
        port: u16,
        engine: Arc<Engine>,
        accepted: Arc<AtomicU64>,
        _io: Io,
    }

    fn downstream() -> Downstream {
        let cfg = ServerConfig::from_json(
            r#"{"port": 1, "Kernels": [{"name": "Shape", "pool": "IOHandle",
                "params": {"input": "Hreply", "quantiles": [0, 1], "sizes": [64, 64]}}]}"#,
            "downstream.json",
        )
        .unwrap();
        let engine = Engine::new(cfg);
        engine.build(1, &|_, _| {}).unwrap();
        // Built without blocking on a runtime: tests may already run on one.
        let io = Io::new(1, "downstream").unwrap();
        let rt = io.0.as_ref().unwrap();
        let _in = rt.enter();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let port = std_listener.local_addr().unwrap().port();
        let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        let incoming = futures::stream::unfold((listener, count), |(l, count)| async move {
            let r = l.accept().await.map(|(s, _)| {
                count.fetch_add(1, Ordering::Relaxed);
                s
            });
            Some((r, (l, count)))
        });
        let svc = SimService(engine.clone()).into_server();
        rt.spawn(
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(incoming),
        );
        drop(_in);
        Downstream {
            port,
            engine,
            accepted,
            _io: io,
        }
    }

    fn kernel(name: &str, v: serde_json::Value) -> Result<RpcClient, String> {
        let m = v.as_object().unwrap().clone();
        let h = HandleObjs::new();
        let p = Params {
            kernel: name,
            map: &m,
        };
        RpcClient::new(&p, &h, Rand::new(&h, 1), name == "ClientLite").map_err(String::from)
    }

    fn fire_n(k: &RpcClient, n: usize) -> Vec<Bytes> {
        let rq = RequestObjs::new(Bytes::from_static(b"the request"));
        (0..n).map(|_| k.fire(&rq, 0).unwrap().output).collect()
    }

    #[test]
    fn client_sends_one_rpc_per_service_on_a_new_connection_each() {
        let d = downstream();
        let k = kernel(
            "Client",
            json!({"services": [{"host": "127.0.0.1", "port": [d.port, d.port, d.port]}],
                   "quantiles": [0, 1], "sizes": [100, 100]}),
        )
        .unwrap();
        assert_eq!(k.services().len(), 3);
        let outs = fire_n(&k, 4);
        // Two bytes per service: the reply's first and last characters.
        assert!(outs.iter().all(|o| o.len() == 6), "{outs:?}");
        let t = k.totals();
        assert_eq!(t.fires, 4);
        assert_eq!(t.rpcs, 12);
        assert_eq!(t.connections, 12);
        assert_eq!(t.sent, 12 * 100);
        assert_eq!(t.received, 12 * 64);
        assert_eq!(k.work().bytes, 3.0 * 164.0);
        assert_eq!(d.engine.status().requests, 12);
        assert_eq!(d.accepted.load(Ordering::Relaxed), 12);
    }

    #[test]
    fn client_lite_reuses_one_connection_per_service() {
        let d = downstream();
        let k = kernel(
            "ClientLite",
            json!({"services": [{"host": ["127.0.0.1", "127.0.0.1"], "port": d.port}],
                   "input": "Rbody"}),
        )
        .unwrap();
        assert_eq!(k.totals().connections, 2);
        // Echoing the request: 11 bytes out per RPC.
        let outs = fire_n(&k, 5);
        assert!(outs.iter().all(|o| o.len() == 4), "{outs:?}");
        let t = k.totals();
        assert_eq!((t.fires, t.rpcs, t.connections), (5, 10, 2));
        assert_eq!(t.sent, 10 * 11);
        assert_eq!(t.received, 10 * 64);
        assert_eq!(d.engine.status().requests, 10);
        assert_eq!(d.accepted.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn concurrent_fires_of_client_lite_all_complete() {
        let d = downstream();
        let k = kernel(
            "ClientLite",
            json!({"services": [{"host": "127.0.0.1", "port": d.port}],
                   "quantiles": [0, 1], "sizes": [10, 1000]}),
        )
        .unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| fire_n(&k, 10));
            }
        });
        assert_eq!(k.totals().rpcs, 40);
        assert_eq!(d.engine.status().requests, 40);
        assert_eq!(d.accepted.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_downstream_that_is_not_there_is_named() {
        // Bind then drop: a loopback port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let svc = json!({"services": [{"host": "127.0.0.1", "port": port}], "input": "Rx"});
        let e = kernel("ClientLite", svc.clone()).err().unwrap();
        assert!(e.contains(&format!("127.0.0.1:{port}")), "{e}");
        let k = kernel("Client", svc).unwrap();
        let rq = RequestObjs::new(Bytes::from_static(b"x"));
        let e = k.fire(&rq, 0).unwrap_err().to_string();
        assert!(e.contains(&format!("127.0.0.1:{port}")), "{e}");
    }

    #[test]
    fn bad_params_are_named() {
        let e = kernel(
            "Client",
            json!({"services": [{"host": "127.0.0.1", "port": 1}]}),
        )
        .err()
        .unwrap();
        assert!(e.contains("Client params.quantiles"), "{e}");
        let e = kernel(
            "Client",
            json!({"services": [{"host": ["a"], "port": [1]}], "input": "Rx"}),
        )
        .err()
        .unwrap();
        assert!(
            e.contains("params.services[0]") && e.contains("at most one"),
            "{e}"
        );
        let e = kernel(
            "Client",
            json!({"services": [{"host": "127.0.0.1", "port": 0}], "input": "Rx"}),
        )
        .err()
        .unwrap();
        assert!(
            e.contains("params.services[0]") && e.contains("port 0"),
            "{e}"
        );
    }

    #[test]
    fn the_schema_refuses_malformed_services() {
        for bad in [
            json!([]),
            json!("127.0.0.1:1"),
            json!([{"host": "h"}]),
            json!([{"host": "h", "port": 70000}]),
            json!([{"host": ["h"], "port": [1]}]),
            json!([{"host": "h", "port": 1, "extra": 2}]),
        ] {
            let doc = json!({"port": 1, "Kernels": [{"name": "ClientLite",
                "params": {"services": bad, "input": "Rx"}}]});
            let e = ServerConfig::from_json(&doc.to_string(), "t.json")
                .unwrap_err()
                .to_string();
            assert!(e.contains("Kernels[0] (ClientLite) params.services"), "{e}");
        }
    }

    #[tokio::test]
    async fn a_server_pipeline_fans_out_from_every_pool() {
        // IOHandle kernels fire inline on the server's async thread: the
        // wait for the replies must not need that thread.
        let d = downstream();
        let port = d.port;
        let cfg = ServerConfig::from_json(
            &json!({"port": 1, "num_app_logic_threads": 2, "Kernels": [
                {"name": "ClientLite", "pool": "IOHandle", "stage": 0,
                 "params": {"services": [{"host": "127.0.0.1", "port": port}], "input": "Rbody"}},
                {"name": "Client", "pool": "applicationLogic", "stage": 1, "fanout": 2,
                 "params": {"services": [{"host": "127.0.0.1", "port": port}],
                            "quantiles": [0, 1], "sizes": [8, 8]}}
            ]})
            .to_string(),
            "up.json",
        )
        .unwrap();
        let e = Engine::new(cfg);
        e.build(1, &|_, _| {}).unwrap();
        for _ in 0..3 {
            let out = e.handle(Bytes::from_static(b"abc")).await.unwrap();
            assert_eq!(out.len(), 2 + 2 * 2);
        }
        assert_eq!(e.status().failed, 0);
        assert_eq!(d.engine.status().requests, 3 * 3);
        // One lasting connection, then two new ones per request.
        assert_eq!(d.accepted.load(Ordering::Relaxed), 1 + 3 * 2);
    }

    #[test]
    fn digest_is_first_and_last_byte() {
        let mut b = BytesMut::new();
        digest(b"abc", &mut b);
        digest(b"", &mut b);
        digest(b"z", &mut b);
        assert_eq!(&b[..], b"ac zz");
    }
}
