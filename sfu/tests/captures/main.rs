//! The real browser captures in `../shared/captures/`: read and checked against what is
//! recorded of them, replayed through the selectors, and fed to the crate's fuzz bodies.

#[path = "../common/mod.rs"]
mod common;

// Runs `sfu inspect`, built only with the node.
#[cfg(feature = "node")]
mod conformance;
mod fuzz_seeds;
mod selection;
