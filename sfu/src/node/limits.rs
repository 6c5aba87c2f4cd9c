//! What one node holds at most, and how a refusal reads: every limit a client can run into
//! answers with its status, a `Retry-After` where waiting helps, and a reason.

use serde::Deserialize;

use super::srtp::DEFAULT_STREAMS;

/// The node's limits (settings `[limits]`); each has a default that fits a 2-core node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Sessions (publishers and viewers) on the node.
    pub sessions: usize,
    /// Sessions in one room.
    pub sessions_per_room: usize,
    /// Conference participants in one room: each receives every other's tracks, so a room's
    /// cost grows with the square of this.
    pub participants_per_room: usize,
    /// Sessions created from one client (an IPv4 address, an IPv6 /64: see
    /// [`ClientKey`](super::client_key::ClientKey)) and still alive.
    pub sessions_per_client: usize,
    /// Sessions whose ICE and DTLS have not completed yet: what a flood of offers that never
    /// connect costs is bounded by this.
    pub handshakes: usize,
    /// Of [`handshakes`](Self::handshakes), what one client may hold: a few clients cannot
    /// take every place and keep everyone else from connecting.
    pub handshakes_per_client: usize,
    /// Sessions one client may open per second (a second's worth at once); past it 429,
    /// checked before the offer is read. 0: no limit.
    pub joins_per_client_per_second: u32,
    /// m-sections in one offer.
    pub sections_per_offer: usize,
    /// m-sections in one conference participant's offer: two for each other participant's
    /// audio and video, and its own.
    pub sections_per_participant_offer: usize,
    /// Sending m-sections (published tracks) in one offer.
    pub tracks_per_offer: usize,
    /// Bytes of a room name (which may hold only `A-Z a-z 0-9 - _ .`, so that it round-trips
    /// through the resource URL unchanged).
    pub room_name_bytes: usize,
    /// HTTP connections open at once; past it new connections wait in the listen backlog
    /// until one closes.
    pub http_connections: usize,
    /// HTTP connections open from one client (not counted for a trusted proxy's): one client
    /// cannot hold every connection and keep everyone else's signaling waiting.
    pub http_connections_per_client: usize,
    /// ICE-TCP connections open from one client (the node as a whole holds as many as it
    /// holds `sessions`).
    pub tcp_connections_per_client: usize,
    /// Offers a conference participant may send per second after its first (renegotiations;
    /// as many may come at once); past it 429. 0: no limit.
    pub offers_per_second: u32,
    /// SSRCs a session's SRTP keeps replay state for, in each of RTP and RTCP; a packet under
    /// one more is dropped (`srtp_streams`). Each SSRC whose packet authenticates holds about
    /// 150 bytes for the session's life, and the peer picks them.
    pub srtp_streams_per_session: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            // A viewer costs tens of KB and a publisher's track a few hundred: these keep a
            // full node within a few hundred MB.
            sessions: 2000,
            sessions_per_room: 1000,
            participants_per_room: 50,
            sessions_per_client: 100,
            handshakes: 200,
            // A handshake takes a round trip or a few: even a network of many users behind one
            // address, all joining the same minute, holds a handful at once.
            handshakes_per_client: 20,
            // A page that opens many players at once fits in a second's worth.
            joins_per_client_per_second: 20,
            sections_per_offer: 16,
            sections_per_participant_offer: 128,
            tracks_per_offer: 6,
            room_name_bytes: 64,
            http_connections: 1000,
            // A browser holds a few per origin, plus a participant's event stream: a network
            // of a hundred users behind one address fits.
            http_connections_per_client: 200,
            // A browser opens one or two per session it starts over TCP: a client with
            // several tabs fits, a client holding hundreds open does not.
            tcp_connections_per_client: 20,
            // A page offers again when its room changes, which the node asks for once per
            // change however many come: a few a second even in a busy room. Reading a large
            // room's offer costs milliseconds, so a client may not make the node do it more.
            offers_per_second: 5,
            // A browser sends under a handful; a conference participant's receiver reports
            // may come under one SSRC per receiving m-section (128 by default).
            srtp_streams_per_session: DEFAULT_STREAMS,
        }
    }
}

/// A capacity limit a new session ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The node holds [`Limits::sessions`] sessions (the number).
    #[error("the node has its maximum of {0} sessions")]
    NodeFull(usize),
    /// The room holds [`Limits::sessions_per_room`] sessions.
    #[error("the room has its maximum of {0} sessions")]
    RoomFull(usize),
    /// The client address holds [`Limits::sessions_per_client`] live sessions.
    #[error("this client has its maximum of {0} sessions")]
    ClientFull(usize),
    /// [`Limits::handshakes`] sessions have not connected yet: a flood of offers that never
    /// connect is held to this.
    #[error("{0} sessions are connecting already; try again shortly")]
    Handshakes(usize),
    /// The client holds [`Limits::handshakes_per_client`] sessions not connected yet.
    #[error("this client has {0} sessions connecting already; try again shortly")]
    ClientHandshakes(usize),
    /// The client opened [`Limits::joins_per_client_per_second`] sessions this second.
    #[error("this client opens more than {0} sessions a second; try again shortly")]
    ClientRate(u32),
    /// The room has [`Limits::participants_per_room`] publishing sessions.
    #[error("the room has its maximum of {0} participants")]
    ParticipantsFull(usize),
}

impl LimitError {
    /// 429 when the client itself holds too much, 503 when the node or room is full.
    pub fn status(self) -> u16 {
        match self {
            Self::ClientFull(_) | Self::ClientHandshakes(_) | Self::ClientRate(_) => 429,
            Self::NodeFull(_)
            | Self::RoomFull(_)
            | Self::Handshakes(_)
            | Self::ParticipantsFull(_) => 503,
        }
    }

    /// Seconds after which trying again may succeed: handshakes end within seconds, sessions
    /// last longer.
    pub fn retry_after(self) -> u32 {
        match self {
            Self::Handshakes(_) | Self::ClientHandshakes(_) => 2,
            // A token comes back within a second at any rate.
            Self::ClientRate(_) => 1,
            Self::ClientFull(_) => 10,
            Self::NodeFull(_) | Self::RoomFull(_) | Self::ParticipantsFull(_) => 30,
        }
    }

    /// The refusal's name as the `reason` label of `/metrics` has it.
    pub fn label(self) -> &'static str {
        match self {
            Self::NodeFull(_) => "node_full",
            Self::RoomFull(_) => "room_full",
            Self::ClientFull(_) => "client_full",
            Self::Handshakes(_) => "handshakes",
            Self::ParticipantsFull(_) => "participants_full",
            Self::ClientHandshakes(_) => "client_handshakes",
            Self::ClientRate(_) => "client_rate",
        }
    }

    /// Every [`label`](Self::label), in [`index`](Self::index) order: the counters' array.
    pub const LABELS: [&'static str; 7] = [
        "node_full",
        "room_full",
        "client_full",
        "handshakes",
        "participants_full",
        "client_handshakes",
        "client_rate",
    ];

    /// The refusal's slot in an array of counters, one per kind.
    pub fn index(self) -> usize {
        match self {
            Self::NodeFull(_) => 0,
            Self::RoomFull(_) => 1,
            Self::ClientFull(_) => 2,
            Self::Handshakes(_) => 3,
            Self::ParticipantsFull(_) => 4,
            Self::ClientHandshakes(_) => 5,
            Self::ClientRate(_) => 6,
        }
    }
}

/// Why a room name is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RoomNameError {
    /// The path names an empty room.
    #[error("a room name must not be empty")]
    Empty,
    /// The name is longer than [`Limits::room_name_bytes`] (the number).
    #[error("a room name has at most {0} bytes")]
    TooLong(usize),
    /// A character outside `A-Z a-z 0-9 - _ .`, which could not round-trip through the resource
    /// URL unchanged.
    #[error("a room name may hold only A-Z, a-z, 0-9, '-', '_' and '.'")]
    BadCharacter,
}

impl Limits {
    /// A room name that reads back the same from its resource URL: unreserved characters
    /// only (RFC 3986 section 2.3, less `~`), so no percent-encoding is ever needed.
    pub fn check_room_name(&self, name: &str) -> Result<(), RoomNameError> {
        if name.is_empty() {
            return Err(RoomNameError::Empty);
        }
        if name.len() > self.room_name_bytes {
            return Err(RoomNameError::TooLong(self.room_name_bytes));
        }
        let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
        if !name.bytes().all(allowed) || name == "." || name == ".." {
            return Err(RoomNameError::BadCharacter);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_names_round_trip_or_are_refused() {
        let limits = Limits::default();
        for good in ["room", "a-b_c.d", "A1", &"x".repeat(64)] {
            assert_eq!(limits.check_room_name(good), Ok(()), "{good}");
        }
        assert_eq!(limits.check_room_name(""), Err(RoomNameError::Empty));
        assert_eq!(
            limits.check_room_name(&"x".repeat(65)),
            Err(RoomNameError::TooLong(64))
        );
        for bad in ["a/b", "a%2Fb", "a b", "é", "..", ".", "a?b", "a#b"] {
            assert_eq!(
                limits.check_room_name(bad),
                Err(RoomNameError::BadCharacter),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_client_over_its_share_is_told_429_and_a_full_node_503() {
        for over in [
            LimitError::ClientFull(1),
            LimitError::ClientHandshakes(1),
            LimitError::ClientRate(1),
        ] {
            assert_eq!(over.status(), 429);
            assert!(over.retry_after() > 0);
            assert_eq!(LimitError::LABELS[over.index()], over.label());
        }
        for full in [
            LimitError::NodeFull(1),
            LimitError::RoomFull(1),
            LimitError::Handshakes(1),
        ] {
            assert_eq!(full.status(), 503);
            assert!(full.retry_after() > 0);
            assert_eq!(LimitError::LABELS[full.index()], full.label());
        }
    }
}
