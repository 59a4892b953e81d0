//! FeedSim: the leaf of a news-feed ranking service.
//!
//! [`leaf`] is the server: per-request graph ranking ([`graph`]),
//! instruction-cache pressure ([`icache`]), compression, serialization
//! ([`story`]), pointer chasing over per-thread data ([`dataset`]) and an
//! off-CPU wait, on fixed thread pools ([`pool`]).

pub mod dataset;
pub mod graph;
pub mod icache;
pub mod leaf;
pub mod pool;
pub mod story;
