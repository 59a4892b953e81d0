//! `IBRun`: instruction-cache and iTLB pressure, through FeedSim's
//! generated functions (the `icache` crate): `nrounds` calls per fire, each
//! to a function drawn at random from the first `nmethods` of them (capped
//! at the number generated).

use super::{Fired, Kernel, Params, RequestObjs};
use std::sync::atomic::{AtomicU64, Ordering};

pub struct IbRun {
    rounds: u64,
    methods: usize,
    seed: AtomicU64,
    /// Keeps the checksums observable so the calls are not optimised away.
    sink: AtomicU64,
}

impl IbRun {
    pub fn new(p: &Params, fidx: usize) -> Result<Self, String> {
        let rounds = p.u64("nrounds")?;
        let methods = p.usize("nmethods")?.clamp(1, icache::FUNCTIONS);
        let k = IbRun {
            rounds,
            methods,
            seed: AtomicU64::new(0x1b_0000 + fidx as u64),
            sink: AtomicU64::new(0),
        };
        // Upstream warms up by running once at construction.
        k.sink.store(
            icache::run_within(rounds.min(100_000), 1, methods),
            Ordering::Relaxed,
        );
        Ok(k)
    }

    /// Functions the calls are spread over.
    pub fn methods(&self) -> usize {
        self.methods
    }
}

impl Kernel for IbRun {
    fn fire(&self, _rq: &RequestObjs, _part: usize) -> Result<Fired, String> {
        let seed = self.seed.fetch_add(0x9e37_79b9, Ordering::Relaxed);
        let x = icache::run_within(self.rounds, seed, self.methods);
        self.sink.fetch_xor(x, Ordering::Relaxed);
        Ok(Fired::nothing())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    #[test]
    fn spreads_calls_over_the_generated_functions() {
        let m = json!({"nrounds": 1000, "nmethods": 2_000_000})
            .as_object()
            .unwrap()
            .clone();
        let k = IbRun::new(
            &Params {
                kernel: "IBRun",
                map: &m,
            },
            0,
        )
        .unwrap();
        // Upstream's 2,000,000 methods are capped at what was generated.
        assert_eq!(k.methods(), icache::FUNCTIONS);
        let before = k.sink.load(Ordering::Relaxed);
        k.fire(&RequestObjs::new(Bytes::new()), 0).unwrap();
        assert_ne!(k.sink.load(Ordering::Relaxed), before);
    }
}
