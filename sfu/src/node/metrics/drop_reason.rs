//! Why a datagram or a packet was dropped: every reason the node and the engine count, each
//! with its `/metrics` label.

use crate::engine::ReceiveError;
use crate::node::srtp::SrtpError;

/// Why the node or the engine dropped a datagram or a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Not STUN, and from an address no session was nominated at.
    UnknownSource,
    /// A first byte no RFC 7983 range of ours claims.
    NotWebRtc,
    /// STUN that is not a valid binding request for one of our sessions.
    BadStun,
    /// SRTP before the session's DTLS handshake finished.
    NoKeys,
    /// SRTP or SRTCP that failed authentication or replay protection (or failed to encrypt).
    SrtpRejected,
    /// SRTP or SRTCP under a new SSRC when the session keeps replay state for as many as it
    /// may (`srtp_streams_per_session`): refused before decryption.
    SrtpStreams,
    /// RTP from a viewer.
    NotAPublisher,
    /// RTP under an SSRC the sending session did not announce or bind (a simulcast stream
    /// before its rid is read, another session's SSRC), or too short to name one; or a relayed
    /// publisher's RTCP under an SSRC none of its streams has, not relayed.
    UnknownSsrc,
    /// RTP whose header, extensions or payload descriptor did not parse.
    MalformedRtp,
    /// A retransmission (RTX) too short for its original sequence number.
    BadRtx,
    /// Padding alone on a repair stream: a sender's bandwidth probe, absorbed once the
    /// transport's feedback has counted it. Expected from browsers.
    Padding,
    /// A packet the engine holds already: a retransmission of one that arrived after all, or
    /// a copy; or a peer's DTLS hello its session's association answered already. Expected
    /// under loss.
    Duplicate,
    /// A packet older than the receive window, or a jump so far the stream restarted.
    OutOfWindow,
    /// A packet whose Dependency Descriptor cannot be read yet (its keyframe's structure has
    /// not arrived): NACKed, and taken when it comes again.
    UnreadableDd,
    /// The node handed the engine something it does not know: a bug, logged.
    Internal,
    /// A packet for a session not connected yet (no nominated address or no keys).
    NotConnected,
    /// A datagram the socket would not take (send buffer full).
    SendFailed,
    /// A packet to send longer than the buffer it is written into
    /// ([`MAX_DATAGRAM`](crate::node::core::MAX_DATAGRAM)).
    TooLong,
    /// A datagram for a worker whose queue from the socket's reader was full (that worker
    /// fell behind).
    HandoffFull,
    /// A participant's event stream that fell behind (its client did not read it): closed,
    /// counted once.
    EventStreamBehind,
    /// A DTLS datagram the session's association refused: too long, a repeat of a record the
    /// handshake holds, after the association ended, or from a session whose offer named no
    /// certificate fingerprint.
    BadDtls,
    /// Application data (SCTP) on the DTLS association of a session whose offer had no data
    /// channel section.
    DataChannel,
    /// Data channel messages a receiver's reliable relayed channel held past its backlog: the
    /// channel toward it closed, these messages with it (and those sent on the channel after).
    DataBacklog,
    /// A lossy data channel's oldest messages, dropped toward a receiver to stay within its
    /// backlog.
    DataLossyOldest,
    /// Data channel messages past their sender's messages or bytes per second.
    DataRate,
    /// Data channel messages larger than a receiver takes (its `a=max-message-size`).
    DataTooLarge,
    /// Data channels past their participant's limit: closed as they opened.
    DataChannelLimit,
    /// Data channels whose label and protocol together are longer than the relay takes
    /// ([`MAX_CHANNEL_NAME`](crate::node::datachannel::relay::MAX_CHANNEL_NAME)): closed as they
    /// opened.
    DataChannelName,
    /// A participant's SCTP association that sent on more streams than it may hold
    /// ([`MAX_PEER_STREAMS`](crate::node::datachannel::sctp::MAX_PEER_STREAMS)): ended, its
    /// channels closed.
    DataStreams,
    /// A participant's SCTP association whose peer left more DATA unfinished or unread than
    /// any message needs (fragments of messages never whole, ordered messages behind a gap;
    /// see `node/datachannel/held.rs`): ended, its channels closed.
    DataUnfinished,
    /// Data channel messages on a stream that is not a channel the participant opened in band
    /// (one negotiated out of band, or a channel the node opened toward it): not relayed.
    DataNoChannel,
    /// Data channel messages whose PPID is neither a string's nor a binary's (RFC 8831 section
    /// 8) nor DCEP's: not WebRTC messages, not relayed.
    DataUnknownPpid,
    /// A data channel another node opened on a relay link whose protocol names no
    /// participant and room (`p<id>:<room>`): closed as it opened.
    DataLinkChannel,
    /// An SCTP packet on a relay link (an RTCP APP packet `STDC`) whose framing does not
    /// read: its padding longer than its data.
    DataLinkMalformed,
    /// An SCTP packet the association did not take (see
    /// [`SctpRefusal`](crate::node::datachannel::screen::SctpRefusal)): a DATA chunk with no
    /// user data, an INIT to an association that has one, DATA too far past what the stack
    /// has, any packet of a peer that left too much unfinished, or a packet the stack does not
    /// read.
    DataSctp,
    /// A DCEP message the association left unanswered: an open on a stream in use, an ack
    /// for nothing, one that does not read, or an open whose ack could not be written.
    DataDcep,
    /// A packet for a TCP connection whose send queue was full: its peer reads slower than
    /// it is sent.
    TcpQueueFull,
    /// A packet for a TCP connection that has closed.
    TcpClosed,
    /// SRTCP from another node's relay link that authenticated and did not parse as RTCP.
    MalformedRtcp,
}

impl DropReason {
    pub(super) const ALL: [DropReason; 39] = [
        Self::UnknownSource,
        Self::NotWebRtc,
        Self::BadStun,
        Self::NoKeys,
        Self::SrtpRejected,
        Self::SrtpStreams,
        Self::NotAPublisher,
        Self::UnknownSsrc,
        Self::MalformedRtp,
        Self::BadRtx,
        Self::Padding,
        Self::Duplicate,
        Self::OutOfWindow,
        Self::UnreadableDd,
        Self::Internal,
        Self::NotConnected,
        Self::SendFailed,
        Self::TooLong,
        Self::HandoffFull,
        Self::EventStreamBehind,
        Self::BadDtls,
        Self::DataChannel,
        Self::DataBacklog,
        Self::DataLossyOldest,
        Self::DataRate,
        Self::DataTooLarge,
        Self::DataChannelLimit,
        Self::DataChannelName,
        Self::DataStreams,
        Self::DataUnfinished,
        Self::DataNoChannel,
        Self::DataUnknownPpid,
        Self::DataLinkChannel,
        Self::DataLinkMalformed,
        Self::DataSctp,
        Self::DataDcep,
        Self::TcpQueueFull,
        Self::TcpClosed,
        Self::MalformedRtcp,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            Self::UnknownSource => "unknown_source",
            Self::NotWebRtc => "not_webrtc",
            Self::BadStun => "bad_stun",
            Self::NoKeys => "no_keys",
            Self::SrtpRejected => "srtp_rejected",
            Self::SrtpStreams => "srtp_streams",
            Self::NotAPublisher => "not_a_publisher",
            Self::UnknownSsrc => "unknown_ssrc",
            Self::MalformedRtp => "malformed_rtp",
            Self::BadRtx => "bad_rtx",
            Self::Padding => "padding",
            Self::Duplicate => "duplicate",
            Self::OutOfWindow => "out_of_window",
            Self::UnreadableDd => "unreadable_dd",
            Self::Internal => "internal",
            Self::NotConnected => "not_connected",
            Self::SendFailed => "send_failed",
            Self::TooLong => "too_long",
            Self::HandoffFull => "handoff_full",
            Self::EventStreamBehind => "event_stream_behind",
            Self::BadDtls => "bad_dtls",
            Self::DataChannel => "data_channel",
            Self::DataBacklog => "data_backlog",
            Self::DataLossyOldest => "data_lossy_oldest",
            Self::DataRate => "data_rate",
            Self::DataTooLarge => "data_too_large",
            Self::DataChannelLimit => "data_channel_limit",
            Self::DataChannelName => "data_channel_name",
            Self::DataStreams => "data_streams",
            Self::DataUnfinished => "data_unfinished",
            Self::DataNoChannel => "data_no_channel",
            Self::DataUnknownPpid => "data_unknown_ppid",
            Self::DataLinkChannel => "data_link_channel",
            Self::DataLinkMalformed => "data_link_malformed",
            Self::DataSctp => "data_sctp",
            Self::DataDcep => "data_dcep",
            Self::TcpQueueFull => "tcp_queue_full",
            Self::TcpClosed => "tcp_closed",
            Self::MalformedRtcp => "malformed_rtcp",
        }
    }

    /// The reason a packet SRTP refused to unprotect is dropped for.
    pub fn of_srtp(error: SrtpError) -> Self {
        match error {
            SrtpError::TooManyStreams => Self::SrtpStreams,
            _ => Self::SrtpRejected,
        }
    }

    /// The reason the engine refused a publisher's packet for.
    pub fn of_receive(error: ReceiveError) -> Self {
        match error {
            ReceiveError::Malformed(_) => Self::MalformedRtp,
            ReceiveError::UnknownSsrc => Self::UnknownSsrc,
            ReceiveError::BadRtx => Self::BadRtx,
            ReceiveError::Padding => Self::Padding,
            ReceiveError::Duplicate => Self::Duplicate,
            ReceiveError::OutOfWindow => Self::OutOfWindow,
            ReceiveError::UnreadableDd { .. } => Self::UnreadableDd,
            ReceiveError::UnknownTransport => Self::Internal,
        }
    }
}
