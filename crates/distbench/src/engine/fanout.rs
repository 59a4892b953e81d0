//! Fan-out filters at run time: which server instances one send of an RPC
//! reaches.
//!
//! The rules follow upstream Distbench's engine:
//!
//! * Services are grids. Instance `i` of a grid of sizes `X × Y × Z` sits at
//!   `x = i % X`, `y = (i / X) % Y`, `z = i / (X * Y)`, and the instance at
//!   `(x, y, z)` is `x + y * X + z * X * Y`.
//! * When client and server are the same service, the client never sends to
//!   itself: it is removed from whatever the filter picks, and a service of a
//!   single instance sends nothing at all.
//! * `all` / `""`: every server instance. `same_x`, `same_yz`, ...: the
//!   server instances whose named coordinates equal the client's.
//! * `ring_x`: the next instance along x (`x + 1`, wrapping), same y and z;
//!   likewise for y and z. The client's coordinates are taken modulo the
//!   server's sizes, so rings between grids of different sizes are defined.
//! * `alternating_ring_x`: like `ring_x`, but clients on an odd y row go the
//!   other way (`x - 1`). `alternating_ring_y` and `alternating_ring_z` both
//!   alternate on the parity of the client's **x** (as upstream does).
//! * `linear_x{D}`: the instance at `x + D`, same y and z, with no wrapping:
//!   nothing when that falls outside the server grid (also when the client's
//!   y or z does not exist in the server grid).
//! * `random` (alias `random_single`): one instance drawn uniformly among the
//!   allowed ones.
//! * `round_robin`: one instance per send, cycling through the allowed ones;
//!   the cursor is per client instance and per RPC ([`FanoutState`]).
//! * `stochastic{p1:n1,p2:n2,...}`: draw `u` uniform in `[0, 1)`, take the
//!   first pair whose cumulative probability reaches `u` (none: 0 targets),
//!   then send to that many distinct instances drawn at random (capped by the
//!   number of allowed instances).
//!
//! Order of the targets (which matters for who is hit first in a burst):
//! within one service they are sorted starting just after the client and
//! wrapping (`self + 1, self + 2, ..., self - 1`); between services they are
//! shuffled; `stochastic` targets are already in random order.
//!
//! Choice where upstream has no defined behaviour: for `same_*`, a client
//! coordinate that does not exist in a (smaller) server grid selects nothing.
//!
//! Where upstream's newest engine has an evident bug (its `stochastic` list of
//! candidates is built empty, so every pick becomes instance 0), this module
//! implements the evident intent: distinct random instances.

use crate::Error;
use rand::Rng;
use rand::seq::SliceRandom;

/// The sizes of a service grid (each at least 1 for a real service).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Grid {
    /// Size along x.
    pub x: usize,
    /// Size along y.
    pub y: usize,
    /// Size along z.
    pub z: usize,
}

impl Grid {
    /// A grid of the given sizes.
    pub fn new(x: usize, y: usize, z: usize) -> Grid {
        Grid { x, y, z }
    }

    /// A one-dimensional service of `count` instances (`count × 1 × 1`).
    pub fn line(count: usize) -> Grid {
        Grid {
            x: count,
            y: 1,
            z: 1,
        }
    }

    /// Number of instances in the grid.
    pub fn len(&self) -> usize {
        self.x * self.y * self.z
    }

    /// True when the grid has no instance.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Coordinates `(x, y, z)` of instance `index`.
    pub fn coords(&self, index: usize) -> (usize, usize, usize) {
        let x = self.x.max(1);
        let y = self.y.max(1);
        (index % x, (index / x) % y, index / (x * y))
    }

    /// Instance index at `(x, y, z)`, or `None` when outside the grid.
    pub fn index(&self, x: usize, y: usize, z: usize) -> Option<usize> {
        (x < self.x && y < self.y && z < self.z).then(|| x + self.x * (y + self.y * z))
    }
}

/// A grid axis, for the ring and linear filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Axis {
    /// The x axis.
    X,
    /// The y axis.
    Y,
    /// The z axis.
    Z,
}

/// A parsed `fanout_filter`.
#[derive(Debug, Clone, PartialEq)]
pub enum Fanout {
    /// `all` or `""`: every server instance.
    All,
    /// `random` / `random_single`: one uniformly random instance.
    Random,
    /// `round_robin`: one instance per send, cycling.
    RoundRobin,
    /// `same_x`, `same_xy`, ...: the instances sharing the flagged
    /// coordinates with the client (at least one flag is set).
    Same {
        /// Keep the client's x.
        x: bool,
        /// Keep the client's y.
        y: bool,
        /// Keep the client's z.
        z: bool,
    },
    /// `ring_x`/`ring_y`/`ring_z`: the next instance along the axis, wrapping.
    Ring(Axis),
    /// `alternating_ring_*`: a ring whose direction depends on the parity of
    /// another coordinate of the client (y for the x ring, x otherwise).
    AlternatingRing(Axis),
    /// `linear_x{D}` ...: the instance `D` steps along the axis, no wrapping.
    Linear(Axis, i64),
    /// `stochastic{p:n,...}`: `(probability, count)` pairs in order.
    Stochastic(Vec<(f64, usize)>),
}

impl Fanout {
    /// Parses a `fanout_filter`; the error says what is wrong with it (the
    /// same messages as [`crate::check::fanout::check`]).
    pub fn parse(filter: &str) -> Result<Fanout, Error> {
        crate::check::fanout::check(filter)?;
        let same = |x, y, z| Fanout::Same { x, y, z };
        let plain = match filter {
            "" | "all" => Some(Fanout::All),
            "random" | "random_single" => Some(Fanout::Random),
            "round_robin" => Some(Fanout::RoundRobin),
            "same_x" => Some(same(true, false, false)),
            "same_y" => Some(same(false, true, false)),
            "same_z" => Some(same(false, false, true)),
            "same_xy" => Some(same(true, true, false)),
            "same_xz" => Some(same(true, false, true)),
            "same_yz" => Some(same(false, true, true)),
            "same_xyz" => Some(same(true, true, true)),
            "ring_x" => Some(Fanout::Ring(Axis::X)),
            "ring_y" => Some(Fanout::Ring(Axis::Y)),
            "ring_z" => Some(Fanout::Ring(Axis::Z)),
            "alternating_ring_x" => Some(Fanout::AlternatingRing(Axis::X)),
            "alternating_ring_y" => Some(Fanout::AlternatingRing(Axis::Y)),
            "alternating_ring_z" => Some(Fanout::AlternatingRing(Axis::Z)),
            _ => None,
        };
        if let Some(f) = plain {
            return Ok(f);
        }
        // `check` accepted it, so it is `name{params}` with valid params.
        let bad = || Error::Input(format!("unparsable fanout_filter '{filter}'"));
        let (name, rest) = filter.split_once('{').ok_or_else(bad)?;
        let params = rest.strip_suffix('}').ok_or_else(bad)?;
        let axis = match name {
            "linear_x" => Axis::X,
            "linear_y" => Axis::Y,
            "linear_z" => Axis::Z,
            "stochastic" => {
                let mut pairs = Vec::new();
                for pair in params.split(',') {
                    let (p, n) = pair.split_once(':').ok_or_else(bad)?;
                    let p = p.trim().parse::<f64>().map_err(|_| bad())?;
                    let n = n.trim().parse::<usize>().map_err(|_| bad())?;
                    pairs.push((p, n));
                }
                return Ok(Fanout::Stochastic(pairs));
            }
            _ => return Err(bad()),
        };
        let distance = params.trim().parse::<i64>().map_err(|_| bad())?;
        Ok(Fanout::Linear(axis, distance))
    }

    /// Whether one send may reach more than one instance (so a fan-out and
    /// its bookkeeping are needed).
    pub fn is_multi(&self) -> bool {
        match self {
            Fanout::All => true,
            Fanout::Same { x, y, z } => !(*x && *y && *z),
            Fanout::Stochastic(pairs) => pairs.iter().any(|&(p, n)| p > 0.0 && n > 1),
            Fanout::Random
            | Fanout::RoundRobin
            | Fanout::Ring(_)
            | Fanout::AlternatingRing(_)
            | Fanout::Linear(..) => false,
        }
    }
}

/// Per-(client instance, RPC) mutable state of a fan-out: the round-robin
/// cursor. Start each client instance with [`FanoutState::default`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FanoutState {
    /// Number of sends made so far (upstream's per-RPC send counter).
    sends: u64,
}

/// The server instance indices one send reaches, in sending order.
///
/// `client_index` is the client's own instance index in `client_grid`;
/// `same_service` is true when client and server are the same service (the
/// client is then never among the targets). Allocates; see [`fill_targets`]
/// to reuse a buffer.
pub fn targets(
    f: &Fanout,
    client_index: usize,
    client_grid: Grid,
    server_grid: Grid,
    same_service: bool,
    state: &mut FanoutState,
    rng: &mut impl Rng,
) -> Vec<usize> {
    let mut out = Vec::new();
    fill_targets(
        f,
        client_index,
        client_grid,
        server_grid,
        same_service,
        state,
        rng,
        &mut out,
    );
    out
}

/// Like [`targets`], but writes into `out` (cleared first) so that a caller
/// sending many RPCs can reuse one buffer.
#[allow(clippy::too_many_arguments)]
pub fn fill_targets(
    f: &Fanout,
    client_index: usize,
    client_grid: Grid,
    server_grid: Grid,
    same_service: bool,
    state: &mut FanoutState,
    rng: &mut impl Rng,
    out: &mut Vec<usize>,
) {
    out.clear();
    let n = server_grid.len();
    // Within one service the client is excluded: with one instance there is
    // nobody else, and with `n` instances there are `n - 1` candidates.
    let exclude = same_service.then_some(client_index);
    if n == 0 || (exclude.is_some() && n == 1) {
        return;
    }
    let (cx, cy, cz) = client_grid.coords(client_index);
    match f {
        Fanout::All => grid_targets(server_grid, None, None, None, out),
        Fanout::Same { x, y, z } => {
            let fixed = |on: bool, c: usize| on.then_some(c);
            grid_targets(
                server_grid,
                fixed(*x, cx),
                fixed(*y, cy),
                fixed(*z, cz),
                out,
            );
        }
        Fanout::Ring(axis) => out.push(ring_target(server_grid, (cx, cy, cz), *axis, true)),
        Fanout::AlternatingRing(axis) => {
            let parity = match axis {
                Axis::X => cy,
                Axis::Y | Axis::Z => cx,
            };
            out.push(ring_target(
                server_grid,
                (cx, cy, cz),
                *axis,
                parity % 2 == 0,
            ));
        }
        Fanout::Linear(axis, d) => out.extend(linear_target(server_grid, (cx, cy, cz), *axis, *d)),
        Fanout::Random => {
            let t = match exclude {
                // Draw among n - 1 slots; the client's own slot stands for
                // the last instance.
                Some(me) => match rng.random_range(0..n - 1) {
                    t if t == me => n - 1,
                    t => t,
                },
                None => rng.random_range(0..n),
            };
            out.push(t);
        }
        Fanout::RoundRobin => {
            let t = match exclude {
                Some(me) => match cursor(state.sends, n - 1) {
                    t if t == me => n - 1,
                    t => t,
                },
                None => cursor(state.sends, n),
            };
            out.push(t);
        }
        Fanout::Stochastic(pairs) => {
            let u: f64 = rng.random();
            let mut cumulative = 0.0;
            let count = pairs
                .iter()
                .find(|&&(p, _)| {
                    cumulative += p;
                    u <= cumulative
                })
                .map_or(0, |&(_, count)| count);
            out.extend((0..n).filter(|&t| Some(t) != exclude));
            let count = count.min(out.len());
            // Partial Fisher–Yates: the first `count` become a uniform
            // random sample, in random order.
            for i in 0..count {
                let j = rng.random_range(i..out.len());
                out.swap(i, j);
            }
            out.truncate(count);
        }
    }
    if !matches!(f, Fanout::Stochastic(_)) {
        if let Some(me) = exclude {
            out.retain(|&t| t != me);
            // Each instance starts with its successor so that a burst does
            // not hit instance 0 first from every client.
            out.sort_unstable_by_key(|&t| (t + n - me % n) % n);
        } else {
            out.shuffle(rng);
        }
    }
    state.sends = state.sends.wrapping_add(1);
}

/// `sends % len` without overflow surprises.
fn cursor(sends: u64, len: usize) -> usize {
    // `len` fits in u64 and the remainder is below `len`.
    (sends % len as u64) as usize
}

/// The instance `d` steps along `axis` from `(x, y, z)` in `grid`, or `None`
/// when that (or any of the client's other coordinates) is outside the grid.
fn linear_target(
    grid: Grid,
    (x, y, z): (usize, usize, usize),
    axis: Axis,
    d: i64,
) -> Option<usize> {
    let shift = |c: usize, on: bool| -> Option<usize> {
        if on {
            usize::try_from(i64::try_from(c).ok()?.checked_add(d)?).ok()
        } else {
            Some(c)
        }
    };
    grid.index(
        shift(x, axis == Axis::X)?,
        shift(y, axis == Axis::Y)?,
        shift(z, axis == Axis::Z)?,
    )
}

/// Every instance of `grid` whose coordinates equal the fixed ones; a fixed
/// coordinate outside the grid selects nothing.
fn grid_targets(
    grid: Grid,
    x: Option<usize>,
    y: Option<usize>,
    z: Option<usize>,
    out: &mut Vec<usize>,
) {
    let range = |fixed: Option<usize>, size: usize| match fixed {
        Some(c) if c < size => c..c + 1,
        Some(_) => 0..0,
        None => 0..size,
    };
    let (xs, ys, zs) = (range(x, grid.x), range(y, grid.y), range(z, grid.z));
    out.reserve(xs.len() * ys.len() * zs.len());
    for k in zs {
        for j in ys.clone() {
            for i in xs.clone() {
                out.push(i + grid.x * (j + grid.y * k));
            }
        }
    }
}

/// The neighbour of `(x, y, z)` one step along `axis` (forward or backward),
/// with every coordinate taken modulo the server grid's sizes.
fn ring_target(grid: Grid, (x, y, z): (usize, usize, usize), axis: Axis, forward: bool) -> usize {
    let step = |c: usize, size: usize, on: bool| {
        let c = c % size;
        match (on, forward) {
            (false, _) => c,
            (true, true) => (c + 1) % size,
            (true, false) => (c + size - 1) % size,
        }
    };
    let x = step(x, grid.x, axis == Axis::X);
    let y = step(y, grid.y, axis == Axis::Y);
    let z = step(z, grid.z, axis == Axis::Z);
    x + grid.x * (y + grid.y * z)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use std::collections::BTreeSet;

    const G333: Grid = Grid { x: 3, y: 3, z: 3 };

    fn rng() -> StdRng {
        StdRng::seed_from_u64(0x5eed)
    }

    /// Targets as a set, for deterministic filters.
    fn set(f: &str, client: usize, cg: Grid, sg: Grid, same: bool) -> BTreeSet<usize> {
        let f = Fanout::parse(f).unwrap();
        let mut st = FanoutState::default();
        let v = targets(&f, client, cg, sg, same, &mut st, &mut rng());
        let s: BTreeSet<usize> = v.iter().copied().collect();
        assert_eq!(s.len(), v.len(), "duplicate targets: {v:?}");
        s
    }

    fn idx(g: Grid, x: usize, y: usize, z: usize) -> usize {
        g.index(x, y, z).unwrap()
    }

    /// Checks a filter on a 3x3x3 clique against a predicate on coordinates,
    /// like upstream's fanout test (every client, every server).
    fn check_clique(
        filter: &str,
        same: bool,
        want: impl Fn((usize, usize, usize), (usize, usize, usize)) -> bool,
    ) {
        for c in 0..27 {
            let got = set(filter, c, G333, G333, same);
            let expected: BTreeSet<usize> = (0..27)
                .filter(|&s| want(G333.coords(c), G333.coords(s)))
                .collect();
            assert_eq!(got, expected, "{filter}: client {c} {:?}", G333.coords(c));
        }
    }

    #[test]
    fn grid_coordinates() {
        let g = Grid::new(4, 3, 2);
        assert_eq!(g.len(), 24);
        assert_eq!(g.coords(0), (0, 0, 0));
        assert_eq!(g.coords(5), (1, 1, 0));
        assert_eq!(g.coords(23), (3, 2, 1));
        for i in 0..24 {
            let (x, y, z) = g.coords(i);
            assert_eq!(g.index(x, y, z), Some(i));
        }
        assert_eq!(g.index(4, 0, 0), None);
        assert_eq!(Grid::line(5), Grid::new(5, 1, 1));
    }

    #[test]
    fn parse_forms() {
        assert_eq!(Fanout::parse(""), Ok(Fanout::All));
        assert_eq!(Fanout::parse("all"), Ok(Fanout::All));
        assert_eq!(Fanout::parse("random_single"), Ok(Fanout::Random));
        assert_eq!(
            Fanout::parse("same_xz"),
            Ok(Fanout::Same {
                x: true,
                y: false,
                z: true
            })
        );
        assert_eq!(
            Fanout::parse("alternating_ring_y"),
            Ok(Fanout::AlternatingRing(Axis::Y))
        );
        assert_eq!(
            Fanout::parse("linear_z{-2}"),
            Ok(Fanout::Linear(Axis::Z, -2))
        );
        assert_eq!(
            Fanout::parse("stochastic{0.7:1, 0.3:4}"),
            Ok(Fanout::Stochastic(vec![(0.7, 1), (0.3, 4)]))
        );
        assert!(
            Fanout::parse("ring_w")
                .unwrap_err()
                .to_string()
                .contains("unknown fanout_filter")
        );
        assert!(
            Fanout::parse("stochastic{2:1}")
                .unwrap_err()
                .to_string()
                .contains("between 0 and 1")
        );
    }

    #[test]
    fn multi() {
        for (f, m) in [
            ("all", true),
            ("same_x", true),
            ("same_xyz", false),
            ("random", false),
            ("round_robin", false),
            ("ring_x", false),
            ("linear_y{1}", false),
            ("stochastic{1:1}", false),
            ("stochastic{0.5:1,0.5:3}", true),
        ] {
            assert_eq!(Fanout::parse(f).unwrap().is_multi(), m, "{f}");
        }
    }

    #[test]
    fn all_between_services_and_within_one() {
        let g = Grid::line(5);
        assert_eq!(set("all", 2, Grid::line(1), g, false), (0..5).collect());
        assert_eq!(set("", 2, g, g, false), (0..5).collect());
        // A clique does not send to itself.
        assert_eq!(set("all", 2, g, g, true), [0, 1, 3, 4].into());
        check_clique("all", true, |a, b| a != b);
        // A one-instance service talking to itself sends nothing.
        assert!(set("all", 0, Grid::line(1), Grid::line(1), true).is_empty());
    }

    #[test]
    fn all_order_within_a_service_starts_after_the_client() {
        let g = Grid::line(5);
        let f = Fanout::All;
        let v = targets(&f, 2, g, g, true, &mut FanoutState::default(), &mut rng());
        assert_eq!(v, [3, 4, 0, 1]);
    }

    #[test]
    fn same_on_a_3d_clique() {
        check_clique("same_x", true, |a, b| a != b && a.0 == b.0);
        check_clique("same_y", true, |a, b| a != b && a.1 == b.1);
        check_clique("same_z", true, |a, b| a != b && a.2 == b.2);
        check_clique("same_xy", true, |a, b| a != b && a.0 == b.0 && a.1 == b.1);
        check_clique("same_xz", true, |a, b| a != b && a.0 == b.0 && a.2 == b.2);
        check_clique("same_yz", true, |a, b| a != b && a.1 == b.1 && a.2 == b.2);
        // Within one service same_xyz is only the client itself: nothing.
        check_clique("same_xyz", true, |_, _| false);
        // Between two services it is the instance at the same coordinates.
        check_clique("same_xyz", false, |a, b| a == b);
    }

    #[test]
    fn same_by_hand_on_a_2d_grid() {
        // 4 x 3 grid; client 6 is at (2, 1).
        let g = Grid::new(4, 3, 1);
        assert_eq!(set("same_x", 6, g, g, true), [2, 10].into());
        assert_eq!(set("same_y", 6, g, g, true), [4, 5, 7].into());
        assert_eq!(set("same_x", 6, g, g, false), [2, 6, 10].into());
        assert_eq!(
            set("same_z", 6, g, g, true),
            (0..12).filter(|&i| i != 6).collect()
        );
    }

    #[test]
    fn same_between_grids_of_different_sizes() {
        // Client (2, 1) of a 4x3 grid; server 3x2x2.
        let cg = Grid::new(4, 3, 1);
        let sg = Grid::new(3, 2, 2);
        // x = 2 column: (2, y, z) for y < 2, z < 2.
        assert_eq!(set("same_x", 6, cg, sg, false), [2, 5, 8, 11].into());
        // Client (3, 2) has no x = 3 column in the server: nothing.
        assert!(set("same_x", 11, cg, sg, false).is_empty());
        assert!(set("same_xy", 11, cg, sg, false).is_empty());
        // But same_z only needs z = 0.
        assert_eq!(set("same_z", 11, cg, sg, false), (0..6).collect());
    }

    #[test]
    fn rings_on_a_3d_clique() {
        check_clique("ring_x", true, |a, b| {
            a.1 == b.1 && a.2 == b.2 && (a.0 + 1) % 3 == b.0
        });
        check_clique("ring_y", true, |a, b| {
            a.0 == b.0 && a.2 == b.2 && (a.1 + 1) % 3 == b.1
        });
        check_clique("ring_z", true, |a, b| {
            a.0 == b.0 && a.1 == b.1 && (a.2 + 1) % 3 == b.2
        });
    }

    #[test]
    fn alternating_rings_on_a_3d_clique() {
        // x ring: odd y goes backwards.
        check_clique("alternating_ring_x", true, |a, b| {
            a.1 == b.1
                && a.2 == b.2
                && if a.1 % 2 == 1 {
                    (b.0 + 1) % 3 == a.0
                } else {
                    (a.0 + 1) % 3 == b.0
                }
        });
        // y ring: odd x goes backwards.
        check_clique("alternating_ring_y", true, |a, b| {
            a.0 == b.0
                && a.2 == b.2
                && if a.0 % 2 == 1 {
                    (b.1 + 1) % 3 == a.1
                } else {
                    (a.1 + 1) % 3 == b.1
                }
        });
        // z ring: also odd x (not y) goes backwards, as upstream.
        check_clique("alternating_ring_z", true, |a, b| {
            a.0 == b.0
                && a.1 == b.1
                && if a.0 % 2 == 1 {
                    (b.2 + 1) % 3 == a.2
                } else {
                    (a.2 + 1) % 3 == b.2
                }
        });
    }

    #[test]
    fn rings_by_hand_on_a_2d_grid() {
        // 4 x 2 grid: row 0 = 0 1 2 3, row 1 = 4 5 6 7.
        let g = Grid::new(4, 2, 1);
        assert_eq!(set("ring_x", 3, g, g, true), [0].into());
        assert_eq!(set("ring_x", 5, g, g, true), [6].into());
        assert_eq!(set("ring_y", 5, g, g, true), [1].into());
        // Row 1 is odd: backwards.
        assert_eq!(set("alternating_ring_x", 4, g, g, true), [7].into());
        assert_eq!(set("alternating_ring_x", 0, g, g, true), [1].into());
        // Column 1 is odd: backwards along y (wrapping over 2 rows).
        assert_eq!(set("alternating_ring_y", 1, g, g, true), [5].into());
        // A ring along an axis of size 1 lands on the client itself: nothing.
        assert!(set("ring_z", 5, g, g, true).is_empty());
        // ... but between services it is the instance at the same place.
        assert_eq!(set("ring_z", 5, g, g, false), [5].into());
    }

    #[test]
    fn rings_between_grids_of_different_sizes() {
        // Client (3, 1) of a 4x2 grid, server 2x2: x wraps to 3 % 2 = 1.
        let cg = Grid::new(4, 2, 1);
        let sg = Grid::new(2, 2, 1);
        assert_eq!(set("ring_x", 7, cg, sg, false), [idx(sg, 0, 1, 0)].into());
        assert_eq!(set("ring_y", 7, cg, sg, false), [idx(sg, 1, 0, 0)].into());
    }

    #[test]
    fn linear_on_a_3d_clique() {
        check_clique("linear_x{1}", true, |a, b| {
            a.1 == b.1 && a.2 == b.2 && a.0 + 1 == b.0
        });
        check_clique("linear_y{1}", true, |a, b| {
            a.0 == b.0 && a.2 == b.2 && a.1 + 1 == b.1
        });
        check_clique("linear_z{1}", true, |a, b| {
            a.0 == b.0 && a.1 == b.1 && a.2 + 1 == b.2
        });
        check_clique("linear_x{-2}", true, |a, b| {
            a.1 == b.1 && a.2 == b.2 && a.0 == b.0 + 2
        });
        check_clique("linear_y{5}", true, |_, _| false);
        // Distance 0 within one service is the client itself.
        check_clique("linear_z{0}", true, |_, _| false);
        check_clique("linear_z{0}", false, |a, b| a == b);
    }

    #[test]
    fn linear_by_hand_and_between_grids() {
        let g = Grid::new(4, 3, 1);
        assert_eq!(set("linear_x{2}", 5, g, g, true), [7].into());
        assert!(set("linear_x{3}", 5, g, g, true).is_empty());
        assert_eq!(set("linear_y{-1}", 5, g, g, true), [1].into());
        // Server 2x2: client (1, 2) has no row 2 in the server, so even a
        // step along x finds nothing; (1, 1) + x 0 is instance 3.
        let sg = Grid::new(2, 2, 1);
        assert!(set("linear_x{0}", 9, g, sg, false).is_empty());
        assert_eq!(set("linear_x{0}", 5, g, sg, false), [3].into());
        assert_eq!(set("linear_y{-1}", 5, g, sg, false), [1].into());
    }

    #[test]
    fn random_stays_in_range_and_covers_everything() {
        let f = Fanout::Random;
        let g = Grid::line(6);
        let mut st = FanoutState::default();
        let mut r = rng();
        let mut seen = [0usize; 6];
        for _ in 0..6000 {
            let v = targets(&f, 2, Grid::line(1), g, false, &mut st, &mut r);
            assert_eq!(v.len(), 1);
            seen[v[0]] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");

        // Within one service: never the client, every other one.
        let mut seen = [0usize; 6];
        for _ in 0..5000 {
            let v = targets(&f, 2, g, g, true, &mut st, &mut r);
            assert_eq!(v.len(), 1);
            seen[v[0]] += 1;
        }
        assert_eq!(seen[2], 0);
        assert!(
            seen.iter()
                .enumerate()
                .all(|(i, &c)| i == 2 || (800..1200).contains(&c)),
            "{seen:?}"
        );
        assert!(targets(&f, 0, Grid::line(1), Grid::line(1), true, &mut st, &mut r).is_empty());
    }

    #[test]
    fn round_robin_cycles_per_client() {
        let f = Fanout::RoundRobin;
        let g = Grid::line(4);
        let mut r = rng();
        let mut st = FanoutState::default();
        let got: Vec<usize> = (0..9)
            .flat_map(|_| targets(&f, 0, Grid::line(1), g, false, &mut st, &mut r))
            .collect();
        assert_eq!(got, [0, 1, 2, 3, 0, 1, 2, 3, 0]);
        // Like upstream's test: 1024 sends hit each of 4 servers 256 times.
        let mut counts = [0usize; 4];
        let mut st = FanoutState::default();
        for _ in 0..1024 {
            counts[targets(&f, 0, Grid::line(1), g, false, &mut st, &mut r)[0]] += 1;
        }
        assert_eq!(counts, [256; 4]);
        // Within one service, client 1 skips itself (its slot maps to 3).
        let mut st = FanoutState::default();
        let got: Vec<usize> = (0..6)
            .flat_map(|_| targets(&f, 1, g, g, true, &mut st, &mut r))
            .collect();
        assert_eq!(got, [0, 3, 2, 0, 3, 2]);
        // Each client has its own cursor.
        let mut other = FanoutState::default();
        assert_eq!(targets(&f, 3, g, g, true, &mut other, &mut r), [0]);
    }

    #[test]
    fn stochastic_proportions() {
        let f = Fanout::parse("stochastic{0.7:1,0.3:4}").unwrap();
        let g = Grid::line(5);
        let mut st = FanoutState::default();
        let mut r = rng();
        let (mut ones, mut fours, mut total) = (0usize, 0usize, 0usize);
        let mut per_server = [0usize; 5];
        for _ in 0..10_000 {
            let v = targets(&f, 0, Grid::line(1), g, false, &mut st, &mut r);
            let distinct: BTreeSet<usize> = v.iter().copied().collect();
            assert_eq!(distinct.len(), v.len(), "{v:?}");
            match v.len() {
                1 => ones += 1,
                4 => fours += 1,
                n => panic!("unexpected count {n}"),
            }
            total += v.len();
            for t in v {
                per_server[t] += 1;
            }
        }
        assert!((6700..7300).contains(&ones), "{ones}");
        assert!((2700..3300).contains(&fours), "{fours}");
        // Expected 1.9 RPCs per send (upstream accepts 1500..2300 per 1000).
        assert!((18_000..20_000).contains(&total), "{total}");
        // Spread evenly: ~3800 each.
        assert!(
            per_server.iter().all(|&c| (3400..4200).contains(&c)),
            "{per_server:?}"
        );
    }

    #[test]
    fn stochastic_edges() {
        let mut st = FanoutState::default();
        let mut r = rng();
        let g = Grid::line(4);
        // More than there are: capped, and never the client itself.
        let f = Fanout::parse("stochastic{1:10}").unwrap();
        let v = targets(&f, 2, g, g, true, &mut st, &mut r);
        assert_eq!(v.iter().copied().collect::<BTreeSet<_>>(), [0, 1, 3].into());
        // Probabilities summing below 1 leave the rest as zero targets.
        let f = Fanout::parse("stochastic{0.25:2}").unwrap();
        let empty = (0..4000)
            .filter(|_| targets(&f, 0, Grid::line(1), g, false, &mut st, &mut r).is_empty())
            .count();
        assert!((2700..3300).contains(&empty), "{empty}");
        let f = Fanout::parse("stochastic{1:0}").unwrap();
        assert!(targets(&f, 0, Grid::line(1), g, false, &mut st, &mut r).is_empty());
    }

    #[test]
    fn fill_targets_reuses_the_buffer() {
        let f = Fanout::All;
        let g = Grid::line(3);
        let mut out = vec![99; 10];
        let mut st = FanoutState::default();
        fill_targets(&f, 0, g, g, true, &mut st, &mut rng(), &mut out);
        assert_eq!(out, [1, 2]);
    }
}
