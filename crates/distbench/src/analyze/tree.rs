//! The folder tree of one results file: which summary goes where.
//!
//! For every test `i`, under `test_i/`:
//!
//! ```text
//! test_summary.txt                      every RPC of the test
//! CLIENT/client_summary.txt             every RPC sent by instances of service CLIENT
//! CLIENT/I/client_instance_summary.txt  every RPC sent by instance CLIENT/I
//! CLIENT/I/SERVER/service_summary.txt   ... to instances of service SERVER
//! CLIENT/I/SERVER/J/pairwise_summary.txt ... to instance SERVER/J
//! CLIENT/I/SERVER/J/RPC.txt             ... of the RPC named RPC
//! ```
//!
//! plus `overall_summary.txt` at the top with every RPC of every test.
//! CLIENT and SERVER are the services that are clients and servers of some
//! RPC description; instance names `I`, `J` are `0..count`, or `x/y[/z]`
//! for services with `x_size`/`y_size`/`z_size`.
//!
//! The concatenation order and upstream's quirks are kept, because they
//! decide the bytes of the default format:
//!
//! - summaries concatenate instances and peers in sorted (string) order of
//!   their log keys and RPCs in order of their index;
//! - a file whose summary is empty is not written (and a folder left empty
//!   is not created) but reported, in the order the summaries are made,
//!   except `overall_summary.txt`, which always is written;
//! - client and service summaries match log keys by the text before their
//!   last `/`, so multidimensional services (`svc/1/2`) never match and get
//!   no `client_summary.txt` or `service_summary.txt`.

use super::format::{Options, Point, Selection};
use super::output::{Builder, Summary, Tally};
use super::{ResultProblem, SampleCounts};
use crate::proto::{DistributedSystemDescription, PeerPerformanceLog, ServiceSpec, TestResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One list of successful samples of the logs (one RPC from one client
/// instance to one peer): the points selected from it, and the tally of
/// its samples that every summary including it adds to upstream's counts.
#[derive(Debug, Default)]
struct RpcList {
    points: Vec<Point>,
    tally: Tally,
}

/// The lists of one client instance: peer instance -> RPC index -> list,
/// in the sorted order of the logs.
type InstanceLists<'a> = BTreeMap<&'a str, BTreeMap<i32, RpcList>>;

/// One test's logs, with every sample already selected once.
struct TestView<'a> {
    /// Client instance -> its lists.
    instances: BTreeMap<&'a str, InstanceLists<'a>>,
}

/// The service part of an instance or peer name: the text before the last
/// `/` (all of it when there is none), as upstream compares them.
fn service_of(instance: &str) -> &str {
    instance
        .rsplit_once('/')
        .map_or(instance, |(service, _)| service)
}

impl<'a> TestView<'a> {
    fn new(test: &'a TestResult, opts: &Options, counts: &mut SampleCounts) -> Self {
        let mut instances = BTreeMap::new();
        let Some(logs) = &test.service_logs else {
            return TestView { instances };
        };
        for (instance, log) in &logs.instance_logs {
            let peers = log
                .peer_logs
                .iter()
                .map(|(peer, peer_log)| (peer.as_str(), select_peer(peer_log, opts, counts)))
                .collect();
            instances.insert(instance.as_str(), peers);
        }
        TestView { instances }
    }

    /// One RPC from a client instance to a peer instance.
    fn rpc(&self, instance: &str, peer: &str, rpc_index: i32) -> Summary {
        let mut out = Summary::default();
        if let Some(list) = self
            .instances
            .get(instance)
            .and_then(|peers| peers.get(peer))
            .and_then(|rpcs| rpcs.get(&rpc_index))
        {
            out.extend(&list.points, list.tally);
        }
        out
    }

    /// Every RPC from a client instance to one peer instance.
    fn pair(&self, instance: &str, peer: &str) -> Summary {
        let mut out = Summary::default();
        if let Some(rpcs) = self.instances.get(instance).and_then(|p| p.get(peer)) {
            rpcs.values()
                .for_each(|list| out.extend(&list.points, list.tally));
        }
        out
    }

    /// Every RPC from a client instance to peers whose service is `service`
    /// (all peers when `service` is `None`).
    fn instance(&self, instance: &str, service: Option<&str>, out: &mut Summary) {
        let Some(peers) = self.instances.get(instance) else {
            return;
        };
        for (peer, rpcs) in peers {
            if service.is_none_or(|s| service_of(peer) == s) {
                rpcs.values()
                    .for_each(|list| out.extend(&list.points, list.tally));
            }
        }
    }

    /// Every RPC sent by instances whose service is `client` (every
    /// instance when `client` is `None`).
    fn clients(&self, client: Option<&str>) -> Summary {
        let mut out = Summary::default();
        for instance in self.instances.keys() {
            if client.is_none_or(|c| service_of(instance) == c) {
                self.instance(instance, None, &mut out);
            }
        }
        out
    }
}

/// Selects the points of a peer's lists, counting each sample once in
/// `counts` and tallying each list for upstream's counts.
fn select_peer(
    log: &PeerPerformanceLog,
    opts: &Options,
    counts: &mut SampleCounts,
) -> BTreeMap<i32, RpcList> {
    log.rpc_logs
        .iter()
        .map(|(&index, rpc_log)| {
            let samples = &rpc_log.successful_rpc_samples;
            let mut list = RpcList {
                points: Vec::with_capacity(samples.len()),
                tally: Tally::default(),
            };
            for sample in samples {
                list.tally.samples += 1;
                if sample.warmup() {
                    list.tally.warmup += 1;
                }
                match opts.select(sample) {
                    Selection::Used(p) => list.points.push(p),
                    Selection::Warmup => {}
                    Selection::Untraced => counts.untraced += 1,
                }
            }
            counts.total += list.tally.samples;
            counts.warmup += list.tally.warmup;
            (index, list)
        })
        .collect()
}

/// The instance names of a service, as its log keys spell them after
/// `SERVICE/`.
fn instance_names(spec: &ServiceSpec) -> Vec<String> {
    let range = |n: Option<i32>| 0..n.unwrap_or(0).max(0);
    match (spec.x_size, spec.y_size, spec.z_size) {
        (None, _, _) => range(Some(spec.count())).map(|i| i.to_string()).collect(),
        (x, None, _) => range(x).map(|i| i.to_string()).collect(),
        (x, y, None) => range(x)
            .flat_map(|i| range(y).map(move |j| format!("{i}/{j}")))
            .collect(),
        (x, y, z) => range(x)
            .flat_map(|i| range(y).flat_map(move |j| range(z).map(move |k| format!("{i}/{j}/{k}"))))
            .collect(),
    }
}

/// A name from the results that becomes one path component: it must not be
/// empty, `.`, `..` or contain a separator, so nothing lands outside the
/// output folder.
fn component<'n>(test: usize, what: &'static str, name: &'n str) -> Result<&'n str, ResultProblem> {
    let bad = name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']);
    if bad {
        return Err(ResultProblem::UnsafeName {
            test,
            what,
            name: name.to_string(),
        });
    }
    Ok(name)
}

/// The services of a test's traffic config that its RPCs use.
struct Roles<'c> {
    /// Service name -> instance names (a later spec of the same name wins).
    instances: BTreeMap<&'c str, Vec<String>>,
    /// Client services, in order of first appearance.
    clients: Vec<&'c str>,
    /// Server services, in order of first appearance.
    servers: Vec<&'c str>,
    /// RPC names by index.
    rpc_names: Vec<&'c str>,
}

impl<'c> Roles<'c> {
    fn new(config: &'c DistributedSystemDescription) -> Self {
        let mut roles = Roles {
            instances: config
                .services
                .iter()
                .map(|s| (s.name(), instance_names(s)))
                .collect(),
            clients: Vec::new(),
            servers: Vec::new(),
            rpc_names: Vec::new(),
        };
        for rpc in &config.rpc_descriptions {
            // Upstream's tool knew one client per RPC; every one counts here.
            for client in &rpc.client {
                if !roles.clients.contains(&client.as_str()) {
                    roles.clients.push(client);
                }
            }
            if !roles.servers.contains(&rpc.server()) {
                roles.servers.push(rpc.server());
            }
            roles.rpc_names.push(rpc.name());
        }
        roles
    }

    fn instances_of(&self, test: usize, service: &str) -> Result<&[String], ResultProblem> {
        self.instances
            .get(service)
            .map(Vec::as_slice)
            .ok_or_else(|| ResultProblem::UnknownService {
                test,
                service: service.to_string(),
            })
    }
}

/// Adds the tree of test number `index` to `out`, and returns the test's
/// summary (every point of the test, for the overall summary).
///
/// The summaries are made in upstream's order, which decides the order of
/// its `Empty output` lines: the test, then for each client service the
/// client, and for each of its instances the instance, then for each server
/// service the service, and for each of its instances the RPCs and the pair.
/// Client and server services come in order of first appearance in the RPC
/// descriptions (upstream's order varies from run to run: it walks Python
/// sets).
pub(crate) fn add_test(
    out: &mut Builder,
    index: usize,
    test: &TestResult,
) -> Result<Summary, ResultProblem> {
    let opts = out.opts;
    let view = TestView::new(test, &opts, &mut out.counts);
    let default_config = DistributedSystemDescription::default();
    let roles = Roles::new(test.traffic_config.as_ref().unwrap_or(&default_config));
    let dir = PathBuf::from(format!("test_{index}"));

    let everything = view.clients(None);
    out.add_summary(dir.join("test_summary.txt"), &everything);
    for &client in &roles.clients {
        let client_dir = dir.join(component(index, "client service name", client)?);
        out.add_summary(
            client_dir.join("client_summary.txt"),
            &view.clients(Some(client)),
        );
        for instance in roles.instances_of(index, client)? {
            let client_instance = format!("{client}/{instance}");
            let instance_dir = client_dir.join(instance);
            let mut summary = Summary::default();
            view.instance(&client_instance, None, &mut summary);
            out.add_summary(instance_dir.join("client_instance_summary.txt"), &summary);
            for &server in &roles.servers {
                let at = Pair {
                    test: index,
                    client_instance: &client_instance,
                    instance_dir: &instance_dir,
                };
                add_server(out, &view, &roles, &at, server)?;
            }
        }
    }
    Ok(everything)
}

/// Where a `SERVER/` folder goes: under which client instance's folder.
struct Pair<'p> {
    test: usize,
    client_instance: &'p str,
    instance_dir: &'p Path,
}

/// The `SERVER/` folder under a client instance's folder.
fn add_server(
    out: &mut Builder,
    view: &TestView<'_>,
    roles: &Roles<'_>,
    at: &Pair<'_>,
    server: &str,
) -> Result<(), ResultProblem> {
    let Pair {
        test,
        client_instance,
        instance_dir,
    } = *at;
    let server_dir = instance_dir.join(component(test, "server service name", server)?);
    let mut summary = Summary::default();
    view.instance(client_instance, Some(server), &mut summary);
    out.add_summary(server_dir.join("service_summary.txt"), &summary);
    for server_instance in roles.instances_of(test, server)? {
        let peer = format!("{server}/{server_instance}");
        let pair_dir = server_dir.join(server_instance);
        let rpc_indices: Vec<i32> = view
            .instances
            .get(client_instance)
            .and_then(|peers| peers.get(peer.as_str()))
            .map(|rpcs| rpcs.keys().copied().collect())
            .unwrap_or_default();
        for rpc_index in rpc_indices {
            let name = usize::try_from(rpc_index)
                .ok()
                .and_then(|i| roles.rpc_names.get(i))
                .ok_or_else(|| ResultProblem::RpcIndex {
                    test,
                    client: client_instance.to_string(),
                    peer: peer.clone(),
                    index: rpc_index,
                    count: roles.rpc_names.len(),
                })?;
            let name = component(test, "RPC name", name)?;
            out.add_summary(
                pair_dir.join(format!("{name}.txt")),
                &view.rpc(client_instance, &peer, rpc_index),
            );
        }
        out.add_summary(
            pair_dir.join("pairwise_summary.txt"),
            &view.pair(client_instance, &peer),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_split_at_the_last_slash() {
        assert_eq!(service_of("client/0"), "client");
        assert_eq!(service_of("2dclique/1/2"), "2dclique/1");
        assert_eq!(service_of("plain"), "plain");
    }

    #[test]
    fn instance_names_follow_the_dimensions() {
        let spec = |count, x, y, z| ServiceSpec {
            count,
            x_size: x,
            y_size: y,
            z_size: z,
            ..Default::default()
        };
        assert_eq!(instance_names(&spec(Some(2), None, None, None)), ["0", "1"]);
        assert!(instance_names(&spec(None, None, None, None)).is_empty());
        assert_eq!(
            instance_names(&spec(Some(9), Some(3), None, None)),
            ["0", "1", "2"]
        );
        assert_eq!(
            instance_names(&spec(None, Some(2), Some(2), None)),
            ["0/0", "0/1", "1/0", "1/1"]
        );
        assert_eq!(
            instance_names(&spec(None, Some(1), Some(2), Some(2))),
            ["0/0/0", "0/0/1", "0/1/0", "0/1/1"]
        );
        // Upstream ignores z_size when y_size is absent.
        assert_eq!(
            instance_names(&spec(None, Some(2), None, Some(5))),
            ["0", "1"]
        );
        assert!(instance_names(&spec(Some(-3), None, None, None)).is_empty());
    }

    #[test]
    fn path_components_cannot_escape() {
        for bad in ["", ".", "..", "a/b", "a\\b", "nul\0"] {
            assert!(component(0, "RPC name", bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            component(0, "RPC name", "client_server_rpc").unwrap(),
            "client_server_rpc"
        );
    }
}
