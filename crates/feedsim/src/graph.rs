//! The ranking graph: a random directed graph in CSR form (in-edges, so
//! PageRank can pull), with per-node PageRank state.
//!
//! Scores and contributions are f32 values kept in `AtomicU32` cells:
//! concurrent requests on the same serving thread's graph read and write them
//! as upstream's leaf does, without a data race (relaxed atomics compile to
//! plain loads and stores on x86 and ARM).

use crate::hugemem::filled;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU32, Ordering};

/// PageRank damping factor.
pub const DAMPING: f32 = 0.85;

pub struct Graph {
    pub nodes: usize,
    /// `in_offsets[v]..in_offsets[v + 1]` index `in_edges` for node `v`.
    in_offsets: Vec<u64>,
    in_edges: Vec<u32>,
    out_degree: Vec<u32>,
    scores: Vec<AtomicU32>,
    contrib: Vec<AtomicU32>,
}

fn f32_cell(v: f32) -> AtomicU32 {
    AtomicU32::new(v.to_bits())
}

impl Graph {
    /// `2^scale` nodes and `degree * nodes` uniformly random edges, built in
    /// two passes over the same random stream (count, then fill) so no edge
    /// list is held in memory. With `huge` the arrays requests read are
    /// advised onto huge pages ([`crate::hugemem`]).
    pub fn random(scale: u32, degree: u32, seed: u64, huge: bool) -> Self {
        let nodes = 1usize << scale;
        let edges = nodes * degree as usize;
        let mut in_degree = vec![0u32; nodes];
        let mut out_degree = filled(nodes, huge, |_| 0u32);
        let mask = (nodes - 1) as u64;
        let mut rng = SmallRng::seed_from_u64(seed);
        for _ in 0..edges {
            let r: u64 = rng.random();
            let (src, dst) = ((r & mask) as usize, ((r >> 32) & mask) as usize);
            out_degree[src] += 1;
            in_degree[dst] += 1;
        }
        let mut acc = 0u64;
        let in_offsets = filled(nodes + 1, huge, |i| {
            if i > 0 {
                acc += u64::from(in_degree[i - 1]);
            }
            acc
        });
        drop(in_degree);
        let mut fill: Vec<u64> = in_offsets[..nodes].to_vec();
        let mut in_edges = filled(edges, huge, |_| 0u32);
        let mut rng = SmallRng::seed_from_u64(seed);
        for _ in 0..edges {
            let r: u64 = rng.random();
            let (src, dst) = ((r & mask) as u32, ((r >> 32) & mask) as usize);
            in_edges[fill[dst] as usize] = src;
            fill[dst] += 1;
        }
        let init = 1.0 / nodes as f32;
        Graph {
            nodes,
            in_offsets,
            in_edges,
            out_degree,
            scores: filled(nodes, huge, |_| f32_cell(init)),
            contrib: filled(nodes, huge, |_| f32_cell(0.0)),
        }
    }

    /// Bytes of the graph and its state.
    pub fn bytes(&self) -> usize {
        self.in_offsets.len() * 8
            + self.in_edges.len() * 4
            + self.out_degree.len() * 4
            + self.nodes * 8
    }

    /// Bytes `random(scale, degree)` will allocate, before building it.
    pub fn planned_bytes(scale: u32, degree: u32) -> usize {
        let n = 1usize << scale;
        (n + 1) * 8 + n * degree as usize * 4 + n * 4 + n * 8 + n * 4 // + in-degree scratch
    }

    pub fn edges(&self) -> usize {
        self.in_edges.len()
    }

    /// Out-contributions `score / out_degree` for `count` nodes from `start`
    /// (wrapping).
    pub fn contributions(&self, start: usize, count: usize) {
        for i in 0..count {
            let u = (start + i) % self.nodes;
            let s = f32::from_bits(self.scores[u].load(Ordering::Relaxed));
            let d = self.out_degree[u].max(1) as f32;
            self.contrib[u].store((s / d).to_bits(), Ordering::Relaxed);
        }
    }

    /// One pull-style PageRank iteration over `count` nodes from `start`;
    /// returns the sum of the new scores.
    pub fn pull(&self, start: usize, count: usize) -> f64 {
        let base = (1.0 - DAMPING) / self.nodes as f32;
        let mut total = 0.0f64;
        for i in 0..count {
            let v = (start + i) % self.nodes;
            let (a, b) = (self.in_offsets[v] as usize, self.in_offsets[v + 1] as usize);
            let mut sum = 0.0f32;
            for &u in &self.in_edges[a..b] {
                sum += f32::from_bits(self.contrib[u as usize].load(Ordering::Relaxed));
            }
            let s = base + DAMPING * sum;
            self.scores[v].store(s.to_bits(), Ordering::Relaxed);
            total += f64::from(s);
        }
        total
    }

    pub fn in_degree(&self, v: usize) -> usize {
        (self.in_offsets[v + 1] - self.in_offsets[v]) as usize
    }

    pub fn out_degree(&self, v: usize) -> u32 {
        self.out_degree[v]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_is_consistent() {
        let g = Graph::random(10, 16, 3, false);
        assert_eq!(g.nodes, 1024);
        assert_eq!(g.edges(), 1024 * 16);
        let ins: usize = (0..g.nodes).map(|v| g.in_degree(v)).sum();
        let outs: u64 = (0..g.nodes).map(|v| u64::from(g.out_degree(v))).sum();
        assert_eq!(ins, g.edges());
        assert_eq!(outs as usize, g.edges());
        assert!(g.bytes() <= Graph::planned_bytes(10, 16));
    }

    #[test]
    fn full_iterations_keep_rank_mass() {
        // Full-graph iterations of PageRank keep the total near 1 (mass of
        // dangling nodes, rare at degree 16, leaks a little).
        let g = Graph::random(12, 16, 9, true);
        let mut total = 0.0;
        for _ in 0..5 {
            g.contributions(0, g.nodes);
            total = g.pull(0, g.nodes);
        }
        assert!((total - 1.0).abs() < 0.01, "{total}");
    }
}
