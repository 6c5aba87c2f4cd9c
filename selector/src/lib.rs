//! Per-subscriber layer selection: decides, for each packet of a published stream, whether a
//! subscriber gets it, with which marker bit, and with which rewritten Dependency Descriptor.
//! One selector per subscriber track, kept under that subscriber's forwarder lock.
//!
//! The rules every selector keeps (`docs/dd-forwarding-rules.md`):
//! - A frame is decided once, at its first packet seen, and every later packet and
//!   retransmission of it gets the same answer.
//! - A frame is forwarded only if it is part of the decode target being forwarded and no frame
//!   it references was dropped for this subscriber. A reference not seen yet may still arrive
//!   (retransmission), so it does not block.
//! - Switching up happens only at a switch point of the new target whose chain is intact;
//!   switching to a target whose every frame the subscriber already gets happens at once. A
//!   switch takes effect at a frame boundary. A late packet from before the last switch that
//!   was never decided is dropped.
//! - A target the publisher stopped sending is left at once for the best one still active.
//! - A keyframe is requested only for the target the subscriber wants, and only when waiting
//!   for a switch point cannot reach it (its chain lost a frame for good, or nothing is
//!   forwarded yet).
//! - The marker is set on the last packet of the highest forwarded spatial layer of each
//!   temporal unit; the DD's active decode targets bitmask tells the subscriber what it can
//!   decode, on every forwarded packet.
//!
//! Modules:
//! - [`dd`]: selection on the Dependency Descriptor (any codec that carries it).
//! - [`simulcast`]: the stream choice among a publisher's simulcast streams.
//! - [`passthrough`]: audio and single-layer video.
//! - [`scalability`]: generated Dependency Descriptor streams of the standard scalability modes.
//! - [`vp8`]: temporal layer selection and index rewriting on the VP8 payload descriptor.
//! - [`vp9`]: selection on the VP9 payload descriptor, for VP9 without a Dependency Descriptor.

pub mod dd;
mod history;
mod layer;
pub mod passthrough;
pub mod scalability;
mod selection;
pub mod simulcast;
mod unwrap;
pub mod vp8;
pub mod vp9;

pub use history::HISTORY_FRAMES;
pub use layer::{Layer, LayerLimits};
pub use selection::{KeyframeRequests, Selection, RETRY_AFTER_PACKETS};
pub use unwrap::Unwrapper;
