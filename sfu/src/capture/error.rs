//! Why a capture file, or a frame in it, cannot be read: what was wrong, in a few words.

use std::fmt;

use super::link::LinkType;

/// Why a capture file cannot be read further. All are faults of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureError {
    /// The file ends inside its file header (pcap) or first block header (pcapng).
    TruncatedHeader,
    /// The first bytes are neither a pcap magic number nor a pcapng section header block.
    BadMagic,
    /// A pcapng section header's byte-order magic is neither 0x1A2B3C4D nor its reverse.
    BadByteOrderMagic,
    /// A major version this reader does not know (pcap 2, pcapng 1).
    UnsupportedVersion,
    /// The file ends inside a pcap record header.
    TruncatedRecord,
    /// A pcap record's captured length runs past the end of the file.
    RecordPastEnd,
    /// A packet is longer than its file's or interface's snapshot length.
    SnapLenExceeded,
    /// The file ends inside a pcapng block header.
    TruncatedBlock,
    /// A pcapng block length is under 12 bytes, not a multiple of 4, or too short for the
    /// block's fixed fields.
    BadBlockLength,
    /// A pcapng block length runs past the end of the file.
    BlockPastEnd,
    /// A pcapng block's trailing length differs from its leading one.
    BlockLengthMismatch,
    /// A pcapng packet's captured length runs past the end of its block.
    PacketPastBlock,
    /// A pcapng packet names an interface no description block defined.
    UnknownInterface,
    /// A pcapng option runs past the end of its block.
    OptionPastBlock,
    /// An `if_tsresol` finer than the timestamp can hold.
    BadTimestampResolution,
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TruncatedHeader => "file too short for a capture header",
            Self::BadMagic => "not a pcap or pcapng file (unknown magic number)",
            Self::BadByteOrderMagic => "pcapng section header with a bad byte-order magic",
            Self::UnsupportedVersion => "unsupported capture file version",
            Self::TruncatedRecord => "file ends inside a pcap record header",
            Self::RecordPastEnd => "pcap record past the end of the file",
            Self::SnapLenExceeded => "packet longer than the snapshot length",
            Self::TruncatedBlock => "file ends inside a pcapng block header",
            Self::BadBlockLength => "pcapng block length invalid for its block",
            Self::BlockPastEnd => "pcapng block past the end of the file",
            Self::BlockLengthMismatch => "pcapng block trailing length differs from its header",
            Self::PacketPastBlock => "pcapng packet past the end of its block",
            Self::UnknownInterface => "pcapng packet on an undefined interface",
            Self::OptionPastBlock => "pcapng option past the end of its block",
            Self::BadTimestampResolution => "pcapng timestamp resolution out of range",
        })
    }
}

impl std::error::Error for CaptureError {}

/// Why a captured frame yields no UDP payload. Some frames are simply not ours to read (other
/// protocols, fragments); the rest are malformed, see [`LinkError::is_malformed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkError {
    /// A link-layer header type this reader does not decode.
    UnsupportedLinkType(LinkType),
    /// The frame carries neither IPv4 nor IPv6.
    NotIp,
    /// The IP packet carries another protocol than UDP.
    NotUdp,
    /// An IP fragment: only whole datagrams are read.
    Fragment,
    /// The frame ends inside a link, IP or UDP header, or before the length they announce.
    Truncated,
    /// An IP header whose version or length fields contradict each other.
    BadIpHeader,
    /// A UDP length under the 8-byte header.
    BadUdpLength,
}

impl LinkError {
    /// Whether the frame is broken, rather than well formed but not a UDP datagram.
    pub fn is_malformed(self) -> bool {
        matches!(
            self,
            Self::Truncated | Self::BadIpHeader | Self::BadUdpLength
        )
    }
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsupportedLinkType(t) => write!(f, "unsupported link type {}", t.0),
            Self::NotIp => f.write_str("not ip"),
            Self::NotUdp => f.write_str("not udp"),
            Self::Fragment => f.write_str("ip fragment"),
            Self::Truncated => f.write_str("frame truncated"),
            Self::BadIpHeader => f.write_str("bad ip header"),
            Self::BadUdpLength => f.write_str("bad udp length"),
        }
    }
}

impl std::error::Error for LinkError {}
