//! The engine's RTCP layer: every kind both ways against the `rtcp` crate, its properties, its
//! fuzz body, and its allocation counts.

#[path = "../common/alloc_counter.rs"]
mod alloc_counter;

mod allocs;
mod fuzz;
mod items;
mod props;
mod wire;
