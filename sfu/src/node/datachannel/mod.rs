//! WebRTC data channels between a room's participants: SCTP (RFC 8261) over each participant's
//! DTLS association, channels opened in band (DCEP, RFC 8832), and every channel a participant
//! opens relayed to the others as a channel the node opens toward each of them (RFC 8831), with
//! no envelope of the node's own, so any WebRTC client takes part.
//!
//! - [`dcep`]: the node's own DCEP parser and writer.
//! - [`sctp`]: one participant's SCTP association, behind the node's own small interface;
//!   [`screen`], what of its packets the stack is not given; `held.rs`, what the stack holds
//!   of the peer's DATA, followed so that it stays bounded.
//! - [`relay`]: a room's channels and what each message becomes for each receiver, other
//!   nodes' associations on the media relay's links among its members (`relay_nodes.rs`);
//!   `backlog.rs`, what waits toward each receiver.

mod backlog;
pub mod dcep;
mod held;
pub mod relay;
pub mod screen;
pub mod sctp;

use serde::Deserialize;

/// The data channel settings (`[data_channels]` in the configuration file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataChannelConfig {
    /// The largest message the node takes and relays, announced as the answer's
    /// `a=max-message-size` (RFC 8841 section 6).
    pub max_message_size: u64,
    /// What one receiver's relayed channel may hold that it has not taken yet. A reliable
    /// channel past it is closed toward that receiver (the drop counted), so a receiver that
    /// does not keep up never slows the sender or the others; a lossy one drops its oldest.
    pub backlog_bytes: usize,
    /// Channels one participant may have open at once; a further one is closed at once.
    pub channels_per_participant: usize,
    /// Messages one participant may send per second, over all its channels.
    pub messages_per_second: u32,
    /// Bytes one participant may send per second, over all its channels.
    pub bytes_per_second: u64,
}

impl Default for DataChannelConfig {
    fn default() -> Self {
        Self {
            max_message_size: 256 * 1024,
            backlog_bytes: 1024 * 1024,
            channels_per_participant: 64,
            messages_per_second: 1_000,
            bytes_per_second: 4 * 1024 * 1024,
        }
    }
}
