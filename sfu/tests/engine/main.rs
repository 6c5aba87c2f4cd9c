//! The engine's tests, one module per behaviour: forwarding, layers and their selection,
//! congestion control and pacing, per-transport SSRCs, driven over `sfu::sim`'s seeded
//! network or by hand where a test needs one packet at a time; and the bandwidth estimators
//! alone, with their allocation counts.

#[path = "../common/alloc_counter.rs"]
mod alloc_counter;
#[path = "../common/mod.rs"]
mod common;

mod allocation;
mod bwe;
mod capacity;
mod estimator_allocs;
mod estimators;
mod forwarding;
mod layer_rates;
mod network;
mod pacing;
mod publisher_remb;
mod simulcast_pause;
mod transports;
mod twcc_viewer;
