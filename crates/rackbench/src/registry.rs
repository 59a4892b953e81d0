//! The workloads compiled into the binary, in the order `--help` lists
//! them. Its own file so that the seam test (`tests/seam.rs`) includes
//! this very list instead of a copy of it.

use harness::Registry;

pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(Box::new(calibrate::Calibrate));
    r.register(Box::new(feedsim::FeedSim));
    r.register(Box::new(adsim::AdSim));
    r.register(Box::new(distbench::Distbench));
    r.register(Box::new(cachebench::CacheBench));
    r.register(Box::new(resctl::Resctl));
    r
}
