//! The protection benchmark: how well hashd, the latency-sensitive
//! workload, keeps its throughput and latency while a memory hog runs next
//! to it (upstream's `mem-hog` scenario).
//!
//! - [`study`]: the recorded samples and runs, and the study that turns them
//!   into results (isolation, latency impact, work conservation, resource
//!   statistics, IO latency), including the combined summary;
//! - [`format`](mod@format): the text output, laid out like upstream's.

pub mod format;
pub mod run;
pub mod study;
