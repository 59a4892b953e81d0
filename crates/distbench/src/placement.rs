//! Placement: which node manager runs which service instance, and what the
//! instances are called.
//!
//! This is the test sequencer's job in Distbench, done before any node is
//! configured. Everything here is pure: it takes a test and the registered
//! node managers and returns the assignment, or an error that says what
//! could not be placed and why.
//!
//! # Instance names
//!
//! A service without `x_size` has `count` instances named `svc/0`,
//! `svc/1`, ... A service with sizes lives on a grid and its instances are
//! named by their coordinates, with as many as the sizes given: `svc/x`
//! (only `x_size`), `svc/x/y` (`x_size` and `y_size`), `svc/x/y/z` (all
//! three). The linear index of an instance is `x + y*X + z*X*Y`, so `x`
//! varies fastest. A `z_size` without a `y_size` is ignored (the test
//! checker reports it), and with sizes the instance count is their product
//! whatever `count` says (the checker reports a mismatch too).
//!
//! Every instance also carries grid attributes that constraints on server
//! instances can test (see [`instance_attributes`]): `index` for 1-D names,
//! `x_index` and `y_index` for 2-D ones, plus `z_index` for 3-D ones.
//!
//! # Placement
//!
//! [`place`] follows the test sequencer, in three passes over the instances
//! in service order then index order:
//!
//! 1. `node_service_bundles`: each key is the exact alias of a node manager
//!    (no globs), which runs every listed instance (exact instance names) and
//!    nothing else.
//! 2. `service_constraints`: keys are instance names; a key containing `*`
//!    is a shell glob in which `*`, `?` and `[...]` never match `/` (so
//!    `rect/0/*` means the instances whose x is 0). An exact key always wins
//!    over a glob; between two globs matching the same instance the later key
//!    (in key order) wins. Each constrained instance goes to the first idle
//!    node, in alias order, whose attributes satisfy its [`ConstraintList`]
//!    (see [`satisfies`]), and that node is no longer idle.
//! 3. Every other instance gets an idle node of its own, in alias order.
//!
//! Alias order is the byte order of the aliases, as the sequencer keeps its
//! idle nodes in a sorted set of strings: `node10` comes before `node2`.
//!
//! One deviation: upstream places a bundled instance that also has a
//! service constraint a second time, on a node that satisfies the
//! constraint (running it twice); here the bundle alone decides.

use crate::proto::constraint::Relation;
use crate::proto::{
    Constraint, ConstraintList, ConstraintSet, DistributedSystemDescription, ServiceSpec,
};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A registered node manager, as placement sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// The alias the test sequencer gave it at registration: `node0`,
    /// `node1`, ... (its node id after `node`).
    pub alias: String,
    /// The `name=value` attributes it registered with (`rack=A`), which
    /// service constraints test.
    pub attributes: BTreeMap<String, String>,
}

impl Node {
    /// A node called `alias`, without attributes.
    pub fn new(alias: impl Into<String>) -> Self {
        Node {
            alias: alias.into(),
            attributes: BTreeMap::new(),
        }
    }

    /// The node with id `id`, aliased `node{id}` as the test sequencer
    /// names it.
    pub fn numbered(id: usize) -> Self {
        Node::new(format!("node{id}"))
    }

    /// This node with one more attribute (replacing one of the same name).
    pub fn with_attribute(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.insert(name.into(), value.into());
        self
    }
}

/// The result of placement: every node alias, mapped to the instance names
/// it runs (sorted; empty for idle nodes).
pub type Placement = BTreeMap<String, Vec<String>>;

/// Why a test could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// The test has no services at all.
    #[error("no services defined: a test needs at least one service to place on the node managers")]
    NoServices,
    /// Two services produce the same instance name.
    #[error(
        "service instance '{instance}' is defined twice: service names must be unique in a test"
    )]
    DuplicateInstance {
        /// The instance name seen twice.
        instance: String,
    },
    /// Two nodes were given with the same alias.
    #[error("node manager alias '{alias}' is registered twice")]
    DuplicateNode {
        /// The repeated alias.
        alias: String,
    },
    /// A bundle lists a name that is no instance of the test.
    #[error(
        "node_service_bundles '{node}': service instance '{instance}' was not found; expected an \
         instance of the test's services, named SERVICE/INDEX or SERVICE/X/Y[/Z] on a grid{}",
        hint(.example)
    )]
    BundleUnknownInstance {
        /// The bundle's node alias.
        node: String,
        /// The name that matched no instance.
        instance: String,
        /// An instance name of the same service, if the service exists.
        example: Option<String>,
    },
    /// An instance is listed in two bundles (or twice in one).
    #[error(
        "node_service_bundles '{node}': service instance '{instance}' is already placed on \
         '{placed_on}'; an instance can be bundled only once"
    )]
    BundleInstanceAlreadyPlaced {
        /// The bundle's node alias.
        node: String,
        /// The instance listed again.
        instance: String,
        /// Where an earlier bundle put it.
        placed_on: String,
    },
    /// A bundle names a node manager that is not registered.
    #[error(
        "node_service_bundles: node '{node}' was not found among the {} registered node \
         managers{}",
        registered.len(),
        listing(registered)
    )]
    BundleUnknownNode {
        /// The bundle key.
        node: String,
        /// The registered aliases, in alias order.
        registered: Vec<String>,
    },
    /// No idle node satisfies an instance's constraints.
    #[error(
        "service instance '{instance}' couldn't be placed: none of the {idle} idle node managers \
         (of {total} registered) satisfies its service_constraints"
    )]
    ConstraintUnsatisfied {
        /// The constrained instance.
        instance: String,
        /// Idle nodes left when it was its turn.
        idle: usize,
        /// Registered nodes.
        total: usize,
    },
    /// More instances are left than idle nodes.
    #[error(
        "no idle node for placement of services: {}; {needed} service instances needed a node \
         manager of their own but only {idle} of {total} registered were idle",
        unplaced.join(", ")
    )]
    OutOfNodes {
        /// The instances that got no node, in placement order.
        unplaced: Vec<String>,
        /// Instances that needed an idle node in the last pass.
        needed: usize,
        /// Idle nodes left for that pass.
        idle: usize,
        /// Registered nodes.
        total: usize,
    },
}

fn hint(example: &Option<String>) -> String {
    example
        .as_ref()
        .map(|e| format!(" (such as '{e}')"))
        .unwrap_or_default()
}

fn listing(aliases: &[String]) -> String {
    const SHOWN: usize = 8;
    match aliases {
        [] => String::new(),
        _ if aliases.len() <= SHOWN => format!(" ({})", aliases.join(", ")),
        _ => format!(
            " ({}, ..., {})",
            aliases[..SHOWN - 1].join(", "),
            aliases[aliases.len() - 1]
        ),
    }
}

/// How many coordinates the instance names of `service` have: 1 without
/// sizes or with `x_size` alone, 2 with `x_size` and `y_size`, 3 with all
/// three.
pub fn dimensions(service: &ServiceSpec) -> usize {
    match (service.x_size, service.y_size, service.z_size) {
        (Some(_), Some(_), Some(_)) => 3,
        (Some(_), Some(_), None) => 2,
        _ => 1,
    }
}

/// The grid extent `(X, Y, Z)` of `service`: `(count, 1, 1)` without sizes,
/// sizes not in use count as 1. Values are as given (possibly not positive).
fn extent(service: &ServiceSpec) -> (i64, i64, i64) {
    let x = match service.x_size {
        Some(x) => i64::from(x),
        None => i64::from(service.count()),
    };
    match dimensions(service) {
        1 => (x, 1, 1),
        2 => (x, i64::from(service.y_size()), 1),
        _ => (x, i64::from(service.y_size()), i64::from(service.z_size())),
    }
}

/// The number of instances of `service`: the product of its sizes on a grid,
/// `count` otherwise (0 when that is not positive).
pub fn instance_count(service: &ServiceSpec) -> usize {
    let (x, y, z) = extent(service);
    if x <= 0 || y <= 0 || z <= 0 {
        return 0;
    }
    usize::try_from(x * y * z).unwrap_or(0)
}

/// The grid coordinates `(x, y, z)` of the instance with linear index
/// `index`: `x = index % X`, `y = index / X % Y`, `z = index / X / Y`, with
/// coordinates the service does not have left at 0; `(index, 0, 0)` for a
/// service without sizes.
pub fn grid_coords(service: &ServiceSpec, index: usize) -> (i32, i32, i32) {
    let i = i64::try_from(index).unwrap_or(i64::MAX);
    let narrow = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
    if service.x_size.is_none() {
        return (narrow(i), 0, 0);
    }
    let (x, y, _) = extent(service);
    let (x, y) = (x.max(1), y.max(1));
    match dimensions(service) {
        1 => (narrow(i % x), 0, 0),
        2 => (narrow(i % x), narrow(i / x % y), 0),
        _ => (narrow(i % x), narrow(i / x % y), narrow(i / x / y)),
    }
}

/// The linear index of the instance at `coords`, or `None` when they lie
/// outside the grid (including a non-zero coordinate the service does not
/// have).
pub fn grid_index(service: &ServiceSpec, coords: (i32, i32, i32)) -> Option<usize> {
    let (x, y, z) = extent(service);
    let (cx, cy, cz) = (
        i64::from(coords.0),
        i64::from(coords.1),
        i64::from(coords.2),
    );
    let inside = |c: i64, size: i64| (0..size).contains(&c);
    if !(inside(cx, x) && inside(cy, y) && inside(cz, z)) {
        return None;
    }
    usize::try_from(cx + cy * x + cz * x * y).ok()
}

/// The name of instance `index` of `service`: `svc/i`, or `svc/x/y` and
/// `svc/x/y/z` on 2-D and 3-D grids.
pub fn instance_name(service: &ServiceSpec, index: usize) -> String {
    let (x, y, z) = grid_coords(service, index);
    match dimensions(service) {
        1 => format!("{}/{x}", service.name()),
        2 => format!("{}/{x}/{y}", service.name()),
        _ => format!("{}/{x}/{y}/{z}", service.name()),
    }
}

/// Every instance name of `service`, in index order.
pub fn instance_names(service: &ServiceSpec) -> Vec<String> {
    (0..instance_count(service))
        .map(|i| instance_name(service, i))
        .collect()
}

/// The index of the instance of `service` called `instance_name`, or `None`
/// if no instance has exactly that name (wrong service, number of
/// coordinates, range, or spelling such as leading zeros).
pub fn instance_index(service: &ServiceSpec, instance_name: &str) -> Option<usize> {
    let rest = instance_name
        .strip_prefix(service.name())?
        .strip_prefix('/')?;
    let parts: Vec<&str> = rest.split('/').collect();
    if parts.len() != dimensions(service) {
        return None;
    }
    let mut coords = [0i32; 3];
    for (c, part) in coords.iter_mut().zip(&parts) {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *c = part.parse().ok()?;
    }
    let index = grid_index(service, (coords[0], coords[1], coords[2]))?;
    (index < instance_count(service) && self::instance_name(service, index) == instance_name)
        .then_some(index)
}

/// The grid attributes of instance `index` of `service`, which node
/// managers add to the instance's own attributes: `index` for 1-D names,
/// `x_index` and `y_index` for 2-D and 3-D ones, `z_index` for 3-D ones.
pub fn instance_attributes(service: &ServiceSpec, index: usize) -> BTreeMap<String, String> {
    let (x, y, z) = grid_coords(service, index);
    let mut out = BTreeMap::new();
    match dimensions(service) {
        1 => {
            out.insert("index".to_string(), x.to_string());
        }
        dims => {
            out.insert("x_index".to_string(), x.to_string());
            out.insert("y_index".to_string(), y.to_string());
            if dims == 3 {
                out.insert("z_index".to_string(), z.to_string());
            }
        }
    }
    out
}

/// Whether `attributes` satisfy `list`: every constraint set of the list
/// holds (AND; an empty list always holds), a set holds when any of its
/// constraints holds (OR; an empty set never holds), and a constraint holds
/// when the attribute it names exists and any of its values is in the
/// relation with it (OR again, even for the `NOT_EQUAL` relations).
///
/// String values support `EQUAL` and `NOT_EQUAL`; integer values are
/// compared with the attribute read as an integer (a non-integer never
/// matches), and `MODULO_EQUAL` / `MODULO_NOT_EQUAL` compare
/// `attribute % modulus` (truncated, as in C) with the value, a zero or
/// missing modulus never matching. `UNKNOWN` never holds.
pub fn satisfies(list: &ConstraintList, attributes: &BTreeMap<String, String>) -> bool {
    list.constraint_sets
        .iter()
        .all(|set| set_holds(set, attributes))
}

fn set_holds(set: &ConstraintSet, attributes: &BTreeMap<String, String>) -> bool {
    set.constraints
        .iter()
        .any(|c| constraint_holds(c, attributes))
}

fn constraint_holds(constraint: &Constraint, attributes: &BTreeMap<String, String>) -> bool {
    let Some(value) = attributes.get(constraint.attribute_name()) else {
        return false;
    };
    let relation = constraint.relation();
    let strings = constraint.string_values.iter().any(|s| match relation {
        Relation::Equal => value == s,
        Relation::NotEqual => value != s,
        _ => false,
    });
    if strings {
        return true;
    }
    let Ok(number) = value.trim().parse::<i64>() else {
        return false;
    };
    let modulo = || match constraint.modulus {
        Some(m) => number.checked_rem(m),
        None => None,
    };
    constraint.int64_values.iter().any(|&v| match relation {
        Relation::Equal => number == v,
        Relation::NotEqual => number != v,
        Relation::ModuloEqual => modulo() == Some(v),
        Relation::ModuloNotEqual => modulo().is_some_and(|r| r != v),
        Relation::Unknown => false,
    })
}

/// The order in which placement visits nodes: upstream's sequencer keeps
/// idle nodes in a `std::set<std::string>`, so it is the byte order of the
/// aliases (`node10` < `node2`).
fn alias_order(a: &str, b: &str) -> Ordering {
    a.as_bytes().cmp(b.as_bytes())
}

/// Shell-style matching of `name` against `pattern` as `fnmatch` does with
/// `FNM_PATHNAME`: `*` is any run of characters, `?` one character, `[...]`
/// (with `!` or `^` negation and `a-z` ranges) one of a set, none of them
/// matching `/`; `\` quotes the next character.
fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    glob_at(&p, &n)
}

fn glob_at(p: &[char], n: &[char]) -> bool {
    let Some((&first, rest)) = p.split_first() else {
        return n.is_empty();
    };
    match first {
        '*' => {
            // Any run without '/', shortest first.
            let mut taken = 0;
            loop {
                if glob_at(rest, &n[taken..]) {
                    return true;
                }
                match n.get(taken) {
                    Some(&c) if c != '/' => taken += 1,
                    _ => return false,
                }
            }
        }
        '?' => matches!(n.first(), Some(&c) if c != '/') && glob_at(rest, &n[1..]),
        '[' => match bracket(rest) {
            Some((set, after)) => match n.first() {
                Some(&c) if c != '/' && set.contains(c) => glob_at(after, &n[1..]),
                _ => false,
            },
            // No closing ']': the '[' is an ordinary character.
            None => n.first() == Some(&'[') && glob_at(rest, &n[1..]),
        },
        '\\' => match rest.split_first() {
            Some((&quoted, after)) => n.first() == Some(&quoted) && glob_at(after, &n[1..]),
            None => n.first() == Some(&'\\') && glob_at(rest, &n[1..]),
        },
        c => n.first() == Some(&c) && glob_at(rest, &n[1..]),
    }
}

/// A bracket expression's characters, parsed from just after its `[`.
struct CharSet {
    negated: bool,
    ranges: Vec<(char, char)>,
}

impl CharSet {
    fn contains(&self, c: char) -> bool {
        self.ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&c)) != self.negated
    }
}

/// Parses a bracket expression body; returns the set and the pattern after
/// its `]`, or `None` when it is not closed.
fn bracket(p: &[char]) -> Option<(CharSet, &[char])> {
    let mut i = 0;
    let negated = matches!(p.first(), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let mut c = *p.get(i)?;
        if c == ']' && !first {
            return Some((CharSet { negated, ranges }, &p[i + 1..]));
        }
        first = false;
        if c == '\\' {
            i += 1;
            c = *p.get(i)?;
        }
        i += 1;
        let mut hi = c;
        if p.get(i) == Some(&'-') && p.get(i + 1).is_some_and(|&e| e != ']') {
            hi = p[i + 1];
            if hi == '\\' {
                hi = *p.get(i + 2)?;
                i += 1;
            }
            i += 2;
        }
        ranges.push((c, hi));
    }
}

/// Places every service instance of `test` on `nodes` as Distbench's test
/// sequencer does (see the module documentation for the rules): bundles,
/// then constrained instances, then one instance per idle node in alias
/// order.
///
/// The result has an entry for every node, empty for those left idle.
pub fn place(
    test: &DistributedSystemDescription,
    nodes: &[Node],
) -> Result<Placement, PlacementError> {
    if test.services.is_empty() {
        return Err(PlacementError::NoServices);
    }
    let mut all: Vec<String> = Vec::new();
    let mut known: HashSet<String> = HashSet::new();
    for service in &test.services {
        for name in instance_names(service) {
            if !known.insert(name.clone()) {
                return Err(PlacementError::DuplicateInstance { instance: name });
            }
            all.push(name);
        }
    }

    let mut order: Vec<&Node> = nodes.iter().collect();
    order.sort_by(|a, b| alias_order(&a.alias, &b.alias));
    if let Some(pair) = order.windows(2).find(|w| w[0].alias == w[1].alias) {
        return Err(PlacementError::DuplicateNode {
            alias: pair[0].alias.clone(),
        });
    }
    let total = order.len();
    let mut idle = vec![true; total];
    let mut placement: Placement = order
        .iter()
        .map(|n| (n.alias.clone(), Vec::new()))
        .collect();
    // Instance -> alias of the node it was placed on.
    let mut placed: HashMap<String, String> = HashMap::new();

    // 1. Bundles: exact node aliases, exact instance names.
    for (node, bundle) in &test.node_service_bundles {
        for instance in &bundle.services {
            if let Some(on) = placed.get(instance) {
                return Err(PlacementError::BundleInstanceAlreadyPlaced {
                    node: node.clone(),
                    instance: instance.clone(),
                    placed_on: on.clone(),
                });
            }
            if !known.contains(instance) {
                return Err(PlacementError::BundleUnknownInstance {
                    node: node.clone(),
                    instance: instance.clone(),
                    example: example_for(test, instance),
                });
            }
            placed.insert(instance.clone(), node.clone());
        }
        let Some(at) = order.iter().position(|n| n.alias == *node) else {
            return Err(PlacementError::BundleUnknownNode {
                node: node.clone(),
                registered: order.iter().map(|n| n.alias.clone()).collect(),
            });
        };
        idle[at] = false;
    }

    // 2. Constrained instances, first fitting idle node in alias order.
    let constraints = constraints_by_instance(test, &all);
    for instance in &all {
        let Some(list) = constraints.get(instance.as_str()) else {
            continue;
        };
        if placed.contains_key(instance) {
            // Bundled explicitly: the bundle decides.
            continue;
        }
        let fit = (0..total).find(|&i| idle[i] && satisfies(list, &order[i].attributes));
        let Some(at) = fit else {
            return Err(PlacementError::ConstraintUnsatisfied {
                instance: instance.clone(),
                idle: idle.iter().filter(|&&b| b).count(),
                total,
            });
        };
        idle[at] = false;
        placed.insert(instance.clone(), order[at].alias.clone());
    }

    // 3. Everything else, one per idle node in alias order.
    let remaining: Vec<&String> = all.iter().filter(|i| !placed.contains_key(*i)).collect();
    let free: Vec<usize> = (0..total).filter(|&i| idle[i]).collect();
    if remaining.len() > free.len() {
        return Err(PlacementError::OutOfNodes {
            unplaced: remaining[free.len()..]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            needed: remaining.len(),
            idle: free.len(),
            total,
        });
    }
    for (instance, &at) in remaining.into_iter().zip(&free) {
        placed.insert(instance.clone(), order[at].alias.clone());
    }

    for (instance, node) in placed {
        placement.entry(node).or_default().push(instance);
    }
    for instances in placement.values_mut() {
        instances.sort();
    }
    Ok(placement)
}

/// The constraint list of each instance of `all` that has one. An exact key
/// always wins over a glob; between globs the later key wins. Exact keys
/// naming no instance are ignored, as upstream does.
fn constraints_by_instance<'a, 't>(
    test: &'t DistributedSystemDescription,
    all: &'a [String],
) -> HashMap<&'a str, &'t ConstraintList> {
    let mut out: HashMap<&'a str, &'t ConstraintList> = HashMap::new();
    for (key, list) in &test.service_constraints {
        if key.contains('*') {
            let matching = all.iter().filter(|i| {
                glob_match(key, i) && !test.service_constraints.contains_key(i.as_str())
            });
            for instance in matching {
                out.insert(instance.as_str(), list);
            }
        } else if let Some(instance) = all.iter().find(|i| *i == key) {
            out.insert(instance.as_str(), list);
        }
    }
    out
}

/// A name of an instance of the service `instance` seems to refer to, to
/// show in an error.
fn example_for(test: &DistributedSystemDescription, instance: &str) -> Option<String> {
    let service = instance.split('/').next().unwrap_or(instance);
    test.services
        .iter()
        .find(|s| s.name() == service)
        .filter(|s| instance_count(s) > 0)
        .map(|s| instance_name(s, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{ServiceBundle, TestSequence};
    use std::path::Path;

    fn service(name: &str, count: i32) -> ServiceSpec {
        ServiceSpec {
            name: Some(name.into()),
            count: Some(count),
            ..Default::default()
        }
    }

    fn grid(name: &str, x: i32, y: Option<i32>, z: Option<i32>) -> ServiceSpec {
        ServiceSpec {
            name: Some(name.into()),
            x_size: Some(x),
            y_size: y,
            z_size: z,
            ..Default::default()
        }
    }

    fn test_of(services: Vec<ServiceSpec>) -> DistributedSystemDescription {
        DistributedSystemDescription {
            services,
            ..Default::default()
        }
    }

    fn nodes(n: usize) -> Vec<Node> {
        (0..n).map(Node::numbered).collect()
    }

    fn constraint(attribute: &str, relation: Relation) -> Constraint {
        Constraint {
            attribute_name: Some(attribute.into()),
            relation: Some(relation as i32),
            ..Default::default()
        }
    }

    fn strings(attribute: &str, relation: Relation, values: &[&str]) -> Constraint {
        Constraint {
            string_values: values.iter().map(|v| v.to_string()).collect(),
            ..constraint(attribute, relation)
        }
    }

    fn ints(
        attribute: &str,
        relation: Relation,
        values: &[i64],
        modulus: Option<i64>,
    ) -> Constraint {
        Constraint {
            int64_values: values.to_vec(),
            modulus,
            ..constraint(attribute, relation)
        }
    }

    /// A list of sets, each set a list of constraints.
    fn list(sets: Vec<Vec<Constraint>>) -> ConstraintList {
        ConstraintList {
            constraint_sets: sets
                .into_iter()
                .map(|constraints| ConstraintSet { constraints })
                .collect(),
        }
    }

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn on<'p>(p: &'p Placement, node: &str) -> Vec<&'p str> {
        p[node].iter().map(String::as_str).collect()
    }

    #[test]
    fn one_dimensional_names() {
        let s = service("client", 3);
        assert_eq!(instance_names(&s), ["client/0", "client/1", "client/2"]);
        assert_eq!(instance_index(&s, "client/2"), Some(2));
        for bad in [
            "client/3",
            "client/01",
            "client/-1",
            "client/",
            "client",
            "clients/1",
            "client/1/0",
        ] {
            assert_eq!(instance_index(&s, bad), None, "{bad}");
        }
        assert_eq!(grid_coords(&s, 2), (2, 0, 0));
        assert_eq!(instance_attributes(&s, 2), attrs(&[("index", "2")]));
        assert!(instance_names(&service("none", 0)).is_empty());
        assert!(instance_names(&service("negative", -2)).is_empty());
        // x_size alone is a 1-D grid, whatever count says.
        let line = ServiceSpec {
            count: Some(99),
            ..grid("line", 4, None, None)
        };
        assert_eq!(
            instance_names(&line),
            ["line/0", "line/1", "line/2", "line/3"]
        );
        assert_eq!(dimensions(&line), 1);
    }

    #[test]
    fn two_dimensional_names_vary_x_fastest() {
        let s = grid("2dclique", 3, Some(2), None);
        assert_eq!(
            instance_names(&s),
            [
                "2dclique/0/0",
                "2dclique/1/0",
                "2dclique/2/0",
                "2dclique/0/1",
                "2dclique/1/1",
                "2dclique/2/1"
            ]
        );
        assert_eq!(grid_coords(&s, 4), (1, 1, 0));
        assert_eq!(grid_index(&s, (2, 1, 0)), Some(5));
        assert_eq!(grid_index(&s, (3, 0, 0)), None);
        assert_eq!(grid_index(&s, (0, 0, 1)), None);
        assert_eq!(instance_index(&s, "2dclique/2/1"), Some(5));
        for bad in [
            "2dclique/3/0",
            "2dclique/0/2",
            "2dclique/1",
            "2dclique/0/0/0",
            "2dclique/00/1",
        ] {
            assert_eq!(instance_index(&s, bad), None, "{bad}");
        }
        assert_eq!(
            instance_attributes(&s, 4),
            attrs(&[("x_index", "1"), ("y_index", "1")])
        );
        // z_size without y_size is ignored.
        let s = grid("flat", 2, None, Some(5));
        assert_eq!(instance_names(&s), ["flat/0", "flat/1"]);
    }

    #[test]
    fn three_dimensional_names() {
        let s = grid("cube", 2, Some(3), Some(2));
        let names = instance_names(&s);
        assert_eq!(names.len(), 12);
        assert_eq!(names[0], "cube/0/0/0");
        assert_eq!(names[1], "cube/1/0/0");
        assert_eq!(names[2], "cube/0/1/0");
        assert_eq!(names[6], "cube/0/0/1");
        assert_eq!(names[11], "cube/1/2/1");
        assert_eq!(grid_coords(&s, 9), (1, 1, 1));
        for (i, name) in names.iter().enumerate() {
            assert_eq!(instance_index(&s, name), Some(i));
            let c = grid_coords(&s, i);
            assert_eq!(grid_index(&s, c), Some(i));
        }
        assert_eq!(
            instance_attributes(&s, 9),
            attrs(&[("x_index", "1"), ("y_index", "1"), ("z_index", "1")])
        );
        // Explicit sizes of 1 still count as coordinates.
        assert_eq!(instance_names(&grid("c", 1, Some(1), Some(1))), ["c/0/0/0"]);
    }

    #[test]
    fn client_server_takes_one_node_each() {
        let test = test_of(vec![service("client", 1), service("server", 1)]);
        let p = place(&test, &nodes(2)).unwrap();
        assert_eq!(on(&p, "node0"), ["client/0"]);
        assert_eq!(on(&p, "node1"), ["server/0"]);
        // Spare nodes are listed, idle.
        let p = place(&test, &nodes(3)).unwrap();
        assert!(p["node2"].is_empty());
    }

    #[test]
    fn running_out_of_nodes_names_what_is_left() {
        let test = test_of(vec![service("client", 1), service("server", 3)]);
        let err = place(&test, &nodes(2)).unwrap_err();
        assert_eq!(
            err,
            PlacementError::OutOfNodes {
                unplaced: vec!["server/1".into(), "server/2".into()],
                needed: 4,
                idle: 2,
                total: 2,
            }
        );
        assert_eq!(
            err.to_string(),
            "no idle node for placement of services: server/1, server/2; 4 service instances \
             needed a node manager of their own but only 2 of 2 registered were idle"
        );
        assert_eq!(
            place(&test_of(vec![]), &nodes(2)),
            Err(PlacementError::NoServices)
        );
    }

    /// Upstream visits idle nodes in string order: past ten nodes,
    /// `node10` and `node11` come before `node2`.
    #[test]
    fn aliases_sort_as_strings_as_upstream() {
        let test = test_of(vec![service("clique", 11)]);
        let mut shuffled = nodes(12);
        shuffled.reverse();
        shuffled.swap(0, 5);
        let p = place(&test, &shuffled).unwrap();
        let order = [
            "node0", "node1", "node10", "node11", "node2", "node3", "node4", "node5", "node6",
            "node7", "node8",
        ];
        for (i, node) in order.iter().enumerate() {
            assert_eq!(on(&p, node), [format!("clique/{i}")], "{node}");
        }
        assert!(p["node9"].is_empty());
        let mut aliases = vec!["node10", "node2", "node9", "node1", "node0", "node100"];
        aliases.sort_by(|a, b| alias_order(a, b));
        assert_eq!(
            aliases,
            ["node0", "node1", "node10", "node100", "node2", "node9"]
        );
    }

    #[test]
    fn bundles_share_a_node_and_reserve_it() {
        let mut test = test_of(vec![service("client", 1), service("server", 2)]);
        test.node_service_bundles.insert(
            "node1".into(),
            ServiceBundle {
                services: vec!["server/1".into(), "client/0".into()],
            },
        );
        let p = place(&test, &nodes(3)).unwrap();
        assert_eq!(on(&p, "node1"), ["client/0", "server/1"]);
        assert_eq!(on(&p, "node0"), ["server/0"]);
        assert!(p["node2"].is_empty());
        // With the bundle, two nodes suffice for three instances.
        assert!(place(&test, &nodes(2)).is_ok());
    }

    #[test]
    fn bundle_errors() {
        let base = test_of(vec![service("client", 1), service("server", 2)]);
        let with = |bundles: &[(&str, &[&str])]| {
            let mut t = base.clone();
            for (node, services) in bundles {
                t.node_service_bundles.insert(
                    node.to_string(),
                    ServiceBundle {
                        services: services.iter().map(|s| s.to_string()).collect(),
                    },
                );
            }
            place(&t, &nodes(3)).unwrap_err()
        };
        let err = with(&[("node0", &["server/2"])]);
        assert_eq!(
            err.to_string(),
            "node_service_bundles 'node0': service instance 'server/2' was not found; expected an \
             instance of the test's services, named SERVICE/INDEX or SERVICE/X/Y[/Z] on a grid \
             (such as 'server/0')"
        );
        let err = with(&[("node0", &["server/1"]), ("node1", &["server/1"])]);
        assert!(matches!(
            err,
            PlacementError::BundleInstanceAlreadyPlaced { ref placed_on, .. } if placed_on == "node0"
        ));
        let err = with(&[("node7", &["client/0"])]);
        assert_eq!(
            err.to_string(),
            "node_service_bundles: node 'node7' was not found among the 3 registered node \
             managers (node0, node1, node2)"
        );
    }

    /// Upstream's AttributeBasedPlacement test: rack A holds the first
    /// client and server.
    #[test]
    fn equal_constraints_pick_matching_nodes() {
        let mut test = test_of(vec![service("client", 2), service("server", 2)]);
        let rack_a = list(vec![vec![strings("rack", Relation::Equal, &["A"])]]);
        test.service_constraints
            .insert("server/0".into(), rack_a.clone());
        test.service_constraints.insert("client/0".into(), rack_a);
        let racks = |r: &[&str]| -> Vec<Node> {
            r.iter()
                .enumerate()
                .map(|(i, rack)| Node::numbered(i).with_attribute("rack", *rack))
                .collect()
        };
        let p = place(&test, &racks(&["A", "A", "B", "B"])).unwrap();
        assert_eq!(on(&p, "node0"), ["client/0"]);
        assert_eq!(on(&p, "node1"), ["server/0"]);
        assert_eq!(on(&p, "node2"), ["client/1"]);
        assert_eq!(on(&p, "node3"), ["server/1"]);
        // Constrained instances skip unfit nodes, which stay for the rest.
        let p = place(&test, &racks(&["B", "A", "B", "A"])).unwrap();
        assert_eq!(on(&p, "node1"), ["client/0"]);
        assert_eq!(on(&p, "node3"), ["server/0"]);
        assert_eq!(on(&p, "node0"), ["client/1"]);
        assert_eq!(on(&p, "node2"), ["server/1"]);

        let err = place(&test, &racks(&["A", "B", "B", "B"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "service instance 'server/0' couldn't be placed: none of the 3 idle node managers \
             (of 4 registered) satisfies its service_constraints"
        );
    }

    #[test]
    fn constraint_relations() {
        let node = attrs(&[("rack", "B"), ("slot", "7"), ("name", "x")]);
        let holds = |c: Constraint| satisfies(&list(vec![vec![c]]), &node);
        assert!(holds(strings("rack", Relation::Equal, &["A", "B"])));
        assert!(!holds(strings("rack", Relation::Equal, &["A"])));
        assert!(holds(strings("rack", Relation::NotEqual, &["A"])));
        assert!(!holds(strings("rack", Relation::NotEqual, &["B"])));
        // Values are ORed, so NOT_EQUAL with two values holds for any value.
        assert!(holds(strings("rack", Relation::NotEqual, &["A", "B"])));
        assert!(!holds(strings("rack", Relation::ModuloEqual, &["B"])));
        assert!(holds(ints("slot", Relation::Equal, &[3, 7], None)));
        assert!(!holds(ints("slot", Relation::NotEqual, &[7], None)));
        assert!(holds(ints("slot", Relation::ModuloEqual, &[1], Some(2))));
        assert!(holds(ints("slot", Relation::ModuloEqual, &[3], Some(4))));
        assert!(!holds(ints("slot", Relation::ModuloEqual, &[0], Some(2))));
        assert!(holds(ints("slot", Relation::ModuloNotEqual, &[0], Some(2))));
        assert!(!holds(ints(
            "slot",
            Relation::ModuloNotEqual,
            &[1],
            Some(2)
        )));
        assert!(!holds(ints("slot", Relation::ModuloEqual, &[0], Some(0))));
        assert!(!holds(ints("slot", Relation::ModuloEqual, &[1], None)));
        assert!(!holds(ints("name", Relation::NotEqual, &[1], None)));
        assert!(!holds(strings("rack", Relation::Unknown, &["B"])));
        // A missing attribute fails even NOT_EQUAL.
        assert!(!holds(strings("row", Relation::NotEqual, &["1"])));
        // Sets are ANDed, constraints within a set ORed.
        let either = vec![
            strings("rack", Relation::Equal, &["A"]),
            ints("slot", Relation::Equal, &[7], None),
        ];
        assert!(satisfies(&list(vec![either.clone()]), &node));
        let both = vec![either, vec![strings("rack", Relation::Equal, &["A"])]];
        assert!(!satisfies(&list(both), &node));
        assert!(satisfies(&list(vec![]), &node));
        assert!(!satisfies(&list(vec![vec![]]), &node));
    }

    #[test]
    fn modulo_constraints_spread_a_service() {
        let mut test = test_of(vec![service("even", 2), service("odd", 2)]);
        let parity = |r| {
            list(vec![vec![ints(
                "slot",
                Relation::ModuloEqual,
                &[r],
                Some(2),
            )]])
        };
        test.service_constraints.insert("even/*".into(), parity(0));
        test.service_constraints.insert("odd/*".into(), parity(1));
        let racks: Vec<Node> = (0..4)
            .map(|i| Node::numbered(i).with_attribute("slot", (10 + i).to_string()))
            .collect();
        let p = place(&test, &racks).unwrap();
        assert_eq!(on(&p, "node0"), ["even/0"]);
        assert_eq!(on(&p, "node2"), ["even/1"]);
        assert_eq!(on(&p, "node1"), ["odd/0"]);
        assert_eq!(on(&p, "node3"), ["odd/1"]);
        let mut test = test.clone();
        test.service_constraints.insert(
            "odd/*".into(),
            list(vec![vec![ints(
                "slot",
                Relation::ModuloNotEqual,
                &[0],
                Some(2),
            )]]),
        );
        assert_eq!(place(&test, &racks).unwrap(), p);
    }

    #[test]
    fn glob_keys_stop_at_slashes_and_yield_to_exact_keys() {
        assert!(glob_match("rect/0/*", "rect/0/2"));
        assert!(!glob_match("rect/0/*", "rect/1/2"));
        assert!(!glob_match("rect*", "rect/0"));
        assert!(glob_match("*/*", "rect/0"));
        assert!(glob_match("r?ct/[0-2]/[!3]", "rect/2/1"));
        assert!(!glob_match("r?ct/[0-2]/[!3]", "rect/2/3"));
        assert!(!glob_match("a?b", "a/b"));
        assert!(glob_match("a\\*/*", "a*/1"));
        assert!(glob_match("[/", "[/"));

        let mut test = test_of(vec![grid("rect", 2, Some(2), None)]);
        let slice = |s: &str| list(vec![vec![strings("slice", Relation::Equal, &[s])]]);
        test.service_constraints
            .insert("rect/*/0".into(), slice("0"));
        test.service_constraints
            .insert("rect/*/1".into(), slice("1"));
        test.service_constraints
            .insert("rect/1/1".into(), slice("2"));
        // Keys that name no instance are ignored.
        test.service_constraints
            .insert("ghost/0".into(), slice("9"));
        let racks: Vec<Node> = ["1", "0", "2", "1", "0"]
            .iter()
            .enumerate()
            .map(|(i, s)| Node::numbered(i).with_attribute("slice", *s))
            .collect();
        let p = place(&test, &racks).unwrap();
        assert_eq!(on(&p, "node1"), ["rect/0/0"]);
        assert_eq!(on(&p, "node4"), ["rect/1/0"]);
        assert_eq!(on(&p, "node0"), ["rect/0/1"]);
        assert_eq!(on(&p, "node2"), ["rect/1/1"]);
        assert!(p["node3"].is_empty());
    }

    #[test]
    fn bundled_instances_ignore_their_constraints() {
        let mut test = test_of(vec![service("s", 2)]);
        test.service_constraints.insert(
            "s/*".into(),
            list(vec![vec![strings("rack", Relation::Equal, &["A"])]]),
        );
        test.node_service_bundles.insert(
            "node1".into(),
            ServiceBundle {
                services: vec!["s/0".into()],
            },
        );
        let racks = vec![
            Node::numbered(0).with_attribute("rack", "A"),
            Node::numbered(1).with_attribute("rack", "B"),
        ];
        let p = place(&test, &racks).unwrap();
        assert_eq!(on(&p, "node1"), ["s/0"]);
        assert_eq!(on(&p, "node0"), ["s/1"]);
    }

    #[test]
    fn duplicates_are_refused() {
        let test = test_of(vec![service("s", 1), service("s", 2)]);
        assert_eq!(
            place(&test, &nodes(3)).unwrap_err().to_string(),
            "service instance 's/0' is defined twice: service names must be unique in a test"
        );
        let test = test_of(vec![service("s", 1)]);
        let twice = vec![Node::numbered(0), Node::numbered(0)];
        assert_eq!(
            place(&test, &twice),
            Err(PlacementError::DuplicateNode {
                alias: "node0".into()
            })
        );
    }

    fn golden(dir: &Path, name: &str) -> TestSequence {
        crate::files::read::<TestSequence>(&dir.join(name)).unwrap()
    }

    /// Places `test` on exactly as many nodes as it has instances and
    /// checks each instance lands on exactly one node. Tests with service
    /// constraints get nodes with a `slice` attribute alternating 0 and 1,
    /// as upstream's `constraints_in_a_file` example expects.
    fn places_everything_once(test: &DistributedSystemDescription, label: &str) -> Placement {
        let all: Vec<String> = test.services.iter().flat_map(instance_names).collect();
        assert!(!all.is_empty(), "{label}");
        let racks = |n: usize| -> Vec<Node> {
            (0..n)
                .map(|i| match test.service_constraints.is_empty() {
                    true => Node::numbered(i),
                    false => Node::numbered(i).with_attribute("slice", (i % 2).to_string()),
                })
                .collect()
        };
        let p = place(test, &racks(all.len())).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert!(p.values().all(|v| v.len() == 1), "{label}: {p:?}");
        let mut seen: Vec<&String> = p.values().flatten().collect();
        seen.sort();
        let mut expected: Vec<&String> = all.iter().collect();
        expected.sort();
        assert_eq!(seen, expected, "{label}");
        assert!(
            matches!(
                place(test, &racks(all.len() - 1)),
                Err(PlacementError::OutOfNodes { .. })
            ),
            "{label}"
        );
        p
    }

    #[test]
    fn golden_configs_place_every_instance_once() {
        let dir = testenv::conformance_or_return!("distbench/test_builder_golden_configs");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "config"))
            .collect();
        files.sort();
        assert!(files.len() > 40);
        let mut tests = 0;
        for path in &files {
            let sequence = crate::files::read::<TestSequence>(path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for test in &sequence.tests {
                places_everything_once(test, &path.display().to_string());
                tests += 1;
            }
        }
        assert!(tests >= files.len());

        let rect = golden(
            &dir,
            "rectangular_ring_x_sync_burst_5x3x100000x1024x1024-grpc_polling_inline.config",
        );
        let names = instance_names(&rect.tests[0].services[0]);
        assert_eq!(names.len(), 15);
        assert_eq!(names[..2], ["rectangular/0/0", "rectangular/1/0"]);
        assert_eq!(names[14], "rectangular/4/2");
    }

    /// The one golden config with service constraints: x=0 instances on
    /// slice 0, x=1 instances on slice 1, the rest anywhere.
    #[test]
    fn golden_same_y_config_honours_its_constraints() {
        let dir = testenv::conformance_or_return!("distbench/test_builder_golden_configs");
        let name = "rectangular_same_y_sync_burst_5x2x100000x1024x1024-grpc_polling_inline.config";
        let test = golden(&dir, name).tests.remove(0);
        assert_eq!(test.service_constraints.len(), 2);
        let p = places_everything_once(&test, name);
        assert_eq!(on(&p, "node0"), ["rectangular/0/0"]);
        assert_eq!(on(&p, "node1"), ["rectangular/1/0"]);
        assert_eq!(on(&p, "node2"), ["rectangular/0/1"]);
        assert_eq!(on(&p, "node3"), ["rectangular/1/1"]);
        assert_eq!(on(&p, "node4"), ["rectangular/2/0"]);
        assert_eq!(on(&p, "node9"), ["rectangular/4/1"]);
        // Without slice attributes nothing fits.
        assert_eq!(
            place(&test, &nodes(10)).unwrap_err().to_string(),
            "service instance 'rectangular/0/0' couldn't be placed: none of the 10 idle node \
             managers (of 10 registered) satisfies its service_constraints"
        );
    }

    /// The rectangular pattern with the constraints of upstream's
    /// `constraints_in_a_file` example: `rectangular/0/*` on slice 0,
    /// `rectangular/1/*` on slice 1.
    #[test]
    fn golden_rectangular_with_slice_constraints() {
        let dir = testenv::conformance_or_return!("distbench/test_builder_golden_configs");
        let mut test = golden(
            &dir,
            "rectangular_ring_x_sync_burst_5x3x100000x1024x1024-grpc_polling_inline.config",
        )
        .tests
        .remove(0);
        let snippet = std::fs::read_to_string(dir.join("constraints_in_a_file")).unwrap();
        assert!(snippet.contains("rectangular/0/*") && snippet.contains("rectangular/1/*"));
        for slice in ["0", "1"] {
            test.service_constraints.insert(
                format!("rectangular/{slice}/*"),
                list(vec![vec![strings("slice", Relation::Equal, &[slice])]]),
            );
        }
        // 15 nodes: the first nine without a slice, then three per slice.
        let racks: Vec<Node> = (0..15)
            .map(|i| match i {
                9..=11 => Node::numbered(i).with_attribute("slice", "0"),
                12..=14 => Node::numbered(i).with_attribute("slice", "1"),
                _ => Node::numbered(i),
            })
            .collect();
        let p = place(&test, &racks).unwrap();
        for (node, instance) in [
            // Slice 0 nodes in string order: node10, node11, node9.
            ("node10", "rectangular/0/0"),
            ("node11", "rectangular/0/1"),
            ("node9", "rectangular/0/2"),
            ("node12", "rectangular/1/0"),
            ("node13", "rectangular/1/1"),
            ("node14", "rectangular/1/2"),
            ("node0", "rectangular/2/0"),
            ("node8", "rectangular/4/2"),
        ] {
            assert_eq!(on(&p, node), [instance], "{node}");
        }
        // Only two nodes of slice 1: the third x=1 instance cannot go.
        let short: Vec<Node> = racks.into_iter().take(14).collect();
        assert_eq!(
            place(&test, &short).unwrap_err(),
            PlacementError::ConstraintUnsatisfied {
                instance: "rectangular/1/2".into(),
                idle: 9,
                total: 14,
            }
        );
    }
}
