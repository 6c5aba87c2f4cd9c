//! Whose fault an engine error is, so a host can count each kind apart and answer it: drop and
//! count what a peer sent, fix (or log loudly) what the host itself got wrong, size up or
//! shed load where a limit was reached. Every error type of the engine sorts its variants here,
//! in one place, so the sorting reads as a whole.

use std::fmt;

use super::down_track::WriteError;
use super::receiver::ReceiveError;
use super::router::RouterError;
use super::rtcp::{Full, ParseError, WriteError as RtcpWriteError};

/// Whose fault an engine error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The peer's bytes: malformed, unknown, duplicated or unreadable packets from the
    /// network. Expected from hostile or lossy peers: drop, count, go on.
    Peer,
    /// The host's misuse of the API: an identifier it never got or already removed, a buffer
    /// too small, a packet kind that cannot be written. A bug in the embedding.
    Host,
    /// A bound reached: a window, a history or an inline list the engine keeps bounded, or a
    /// field the wire format cannot grow. Neither side's bug; persistent counts mean a limit
    /// to raise or load to shed.
    Limit,
}

impl Fault {
    /// A short lowercase name, for metric labels and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Peer => "peer",
            Self::Host => "host",
            Self::Limit => "limit",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RouterError {
    /// Every router error is a call the host should not have made.
    pub fn fault(&self) -> Fault {
        match self {
            Self::UnknownTransport
            | Self::UnknownTrack
            | Self::UnknownDownTrack
            | Self::SsrcInUse
            | Self::UnknownStream => Fault::Host,
        }
    }
}

impl ReceiveError {
    /// Whose fault the error is.
    pub fn fault(&self) -> Fault {
        match self {
            Self::Malformed(_)
            | Self::UnknownSsrc
            | Self::BadRtx
            | Self::Padding
            | Self::Duplicate
            | Self::UnreadableDd { .. } => Fault::Peer,
            // The host named a transport it never added or already removed.
            Self::UnknownTransport => Fault::Host,
            // The receive window is bounded (`RECEIVE_RING` packets).
            Self::OutOfWindow => Fault::Limit,
        }
    }
}

impl WriteError {
    /// Whose fault the error is.
    #[cfg_attr(
        not(any(test, feature = "internal")),
        expect(dead_code, reason = "used by tests and through the internal API only")
    )]
    pub fn fault(&self) -> Fault {
        match self {
            // The host's buffer, or the extensions it negotiated for this subscriber.
            Self::Rewrite => Fault::Host,
            // The send history is bounded (`SEND_HISTORY` packets).
            Self::NotRemembered => Fault::Limit,
        }
    }
}

impl ParseError {
    /// Whose fault the error is.
    pub fn fault(&self) -> Fault {
        match self {
            Self::Truncated | Self::BadVersion | Self::BadLength | Self::BadPadding => Fault::Peer,
            // Valid RTCP, but more entries than the inline lists hold.
            Self::TooManyEntries => Fault::Limit,
        }
    }
}

impl RtcpWriteError {
    /// Whose fault the error is.
    pub fn fault(&self) -> Fault {
        match self {
            Self::BufferTooShort | Self::Unwritable | Self::NotAReport => Fault::Host,
            // What the wire's fields can carry.
            Self::OutOfRange | Self::TooManyEntries => Fault::Limit,
        }
    }
}

impl Full {
    /// An inline list is full: always a limit.
    pub fn fault(&self) -> Fault {
        Fault::Limit
    }
}

#[cfg(test)]
mod tests {
    use rtp_ext::rtp::ParseError as RtpParseError;

    use super::*;

    /// Every variant of every engine error, with the fault it is sorted under. The matches in
    /// `fault()` are exhaustive, so a new variant fails to compile until it is sorted; this
    /// pins the sorting and checks every message is short, lowercase and set.
    #[test]
    fn every_variant_is_sorted_and_displayed() {
        // Each error once as a value for its message, once for its fault; all are `Copy`.
        macro_rules! sorted {
            ($($error:expr => $fault:ident),* $(,)?) => {
                [$((Box::new($error) as Box<dyn std::error::Error>, $error.fault(), Fault::$fault)),*]
            };
        }
        let errors = sorted![
            RouterError::UnknownTransport => Host,
            RouterError::UnknownTrack => Host,
            RouterError::UnknownDownTrack => Host,
            RouterError::SsrcInUse => Host,
            RouterError::UnknownStream => Host,
            ReceiveError::Malformed(RtpParseError::TooShort) => Peer,
            ReceiveError::UnknownSsrc => Peer,
            ReceiveError::UnknownTransport => Host,
            ReceiveError::BadRtx => Peer,
            ReceiveError::Padding => Peer,
            ReceiveError::Duplicate => Peer,
            ReceiveError::OutOfWindow => Limit,
            ReceiveError::UnreadableDd { stream: 1 } => Peer,
            WriteError::Rewrite => Host,
            WriteError::NotRemembered => Limit,
            ParseError::Truncated => Peer,
            ParseError::BadVersion => Peer,
            ParseError::BadLength => Peer,
            ParseError::BadPadding => Peer,
            ParseError::TooManyEntries => Limit,
            RtcpWriteError::BufferTooShort => Host,
            RtcpWriteError::OutOfRange => Limit,
            RtcpWriteError::Unwritable => Host,
            RtcpWriteError::NotAReport => Host,
            RtcpWriteError::TooManyEntries => Limit,
            Full => Limit,
        ];
        for (error, fault, expected) in errors {
            let message = error.to_string();
            assert_eq!(fault, expected, "{message}");
            assert!(!message.is_empty() && message.len() < 80, "{message}");
            assert_eq!(message, message.to_lowercase(), "lowercase: {message}");
        }
        assert_eq!(
            [Fault::Peer, Fault::Host, Fault::Limit].map(|f| f.to_string()),
            ["peer", "host", "limit"]
        );
    }
}
