//! Deterministic Dependency Descriptor streams for the standard scalability modes, for tests
//! and benchmarks.
//!
//! Each [`ScalabilityMode`] is a table of frames (`pattern.rs`): per temporal unit and spatial
//! layer, which reference buffers a frame reads and writes, which chains it is part of and its
//! decode target indications, for a keyframe temporal unit and the cycle repeated after it.
//! Frame diffs, chain diffs and the template structure
//! ([`ScalabilityMode::template_structure`]) follow from replaying that table, and for `L1T3`,
//! `L3T3`, `L3T3_KEY`, `L2T2_KEY_SHIFT` and `S3T3` equal the structures of real browser keyframes.
//! [`StreamGenerator`] turns the table into RTP packets with their descriptors and the truth a
//! test needs: absolute referenced frame numbers and decode target membership.
//!
//! Decode target `d` is `spatial_id * temporal_layers + temporal_id`. Which switches between
//! decode targets need a keyframe (`docs/dd-forwarding-rules.md`, section 4):
//! - `L1T1`, `L1T3`: one spatial layer; temporal switches are always free (on a switch
//!   indication).
//! - `L2T2`, `L3T3` (full SVC): from spatial layer `a` to `b` without a keyframe iff `a >= b`;
//!   going up needs the keyframe, since upper layers reference their own earlier frames.
//! - `L3T3_KEY` (K-SVC), `S3T3` (simulcast), `L2T2_KEY_SHIFT`: without a keyframe iff `a == b`;
//!   after the keyframe each spatial layer references only itself.
//!
//! Temporal switches within one spatial layer never need a keyframe in any mode.

mod encoder;
mod generator;
mod mode;
mod pattern;
mod rng;
mod structure;

pub use encoder::{References, MAX_REFERENCES};
pub use generator::{GeneratedPacket, GeneratorConfig, StreamGenerator, TIMESTAMP_STEP};
pub use mode::ScalabilityMode;
pub use rng::SeededRng;
