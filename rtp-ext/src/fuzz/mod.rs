//! Fuzz target bodies. `fuzz/` wraps each in three lines, and `tests/fuzz_seeds.rs` runs them
//! over the committed seed corpus, so a crash found by the fuzzer becomes an ordinary test.

mod codec;
mod dd;
mod rtp;

pub use codec::codec_payloads;
pub use dd::{dd_parse, dd_roundtrip};
pub use rtp::rtp_packet;
