//! One serving thread's data, built at start-up: the ranking graph, the
//! pointer-chasing permutation and a block of incompressible bytes.

use crate::graph::Graph;
use crate::hugemem::filled;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngCore, SeedableRng};

/// Sizes of a dataset.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// The graph has `2^scale` nodes.
    pub scale: u32,
    pub degree: u32,
    /// Entries of the pointer-chasing permutation (u64 each).
    pub chase_entries: usize,
    pub random_bytes: usize,
    /// Advise the graph and the permutation onto huge pages.
    pub huge_pages: bool,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            scale: 21,
            degree: 16,
            chase_entries: 10_000_000,
            random_bytes: 3 << 20,
            huge_pages: true,
        }
    }
}

impl Shape {
    /// Bytes one dataset needs while it is built (its peak).
    pub fn bytes(&self) -> usize {
        Graph::planned_bytes(self.scale, self.degree) + self.chase_entries * 8 + self.random_bytes
    }
}

pub struct Dataset {
    pub graph: Graph,
    /// A random permutation: `chase[i]` is the next index to visit.
    pub chase: Vec<u64>,
    pub random: Vec<u8>,
}

impl Dataset {
    pub fn build(shape: Shape, seed: u64) -> Self {
        let graph = Graph::random(shape.scale, shape.degree, seed, shape.huge_pages);
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x5EED);
        let mut chase = filled(shape.chase_entries, shape.huge_pages, |i| i as u64);
        chase.shuffle(&mut rng);
        let mut random = vec![0u8; shape.random_bytes];
        rng.fill_bytes(&mut random);
        Dataset {
            graph,
            chase,
            random,
        }
    }

    pub fn bytes(&self) -> usize {
        self.graph.bytes() + self.chase.len() * 8 + self.random.len()
    }

    /// `loads` dependent loads through the permutation from `start`.
    pub fn chase(&self, start: u64, loads: usize) -> u64 {
        if self.chase.is_empty() {
            return 0;
        }
        let mut i = start % self.chase.len() as u64;
        for _ in 0..loads {
            i = self.chase[i as usize];
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_dataset() {
        let s = Shape {
            scale: 8,
            degree: 4,
            chase_entries: 1000,
            random_bytes: 4096,
            huge_pages: false,
        };
        let d = Dataset::build(s, 1);
        assert!(d.bytes() <= s.bytes());
        let mut sorted = d.chase.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<u64>>());
        // Dependent loads follow the permutation.
        assert_eq!(d.chase(5, 2), d.chase[d.chase[5] as usize]);
    }
}
