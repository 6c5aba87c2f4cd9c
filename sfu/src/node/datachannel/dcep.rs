//! The Data Channel Establishment Protocol (RFC 8832): the DATA_CHANNEL_OPEN a channel's opener
//! sends on its stream first, and the DATA_CHANNEL_ACK the other side answers it with. Read
//! from any bytes without panicking; written exactly as read.

/// DATA_CHANNEL_OPEN's message type (RFC 8832 section 8.2.1).
const OPEN: u8 = 0x03;
/// DATA_CHANNEL_ACK's message type.
const ACK: u8 = 0x02;
/// The fixed part of DATA_CHANNEL_OPEN, before its label and protocol (section 5.1).
const OPEN_HEADER: usize = 12;
/// The bit of the channel type that makes a channel unordered.
const UNORDERED: u8 = 0x80;

/// Why bytes are not a DCEP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DcepError {
    /// No bytes.
    #[error("an empty DCEP message")]
    Empty,
    /// A message type other than OPEN (0x03) or ACK (0x02).
    #[error("unknown DCEP message type {0:#04x}")]
    UnknownType(u8),
    /// A channel type RFC 8832 section 8.2.2 does not name.
    #[error("unknown data channel type {0:#04x}")]
    UnknownChannelType(u8),
    /// Fewer bytes than the header and the label and protocol lengths it gives.
    #[error("a DCEP message shorter than its lengths say")]
    Truncated,
    /// More bytes than the message's lengths account for.
    #[error("bytes after the DCEP message")]
    TrailingBytes,
    /// A label or protocol that is not UTF-8 (RFC 8832 section 5.1 requires it).
    #[error("a label or protocol that is not UTF-8")]
    NotUtf8,
    /// A label or protocol longer than its 16-bit length field can say.
    #[error("a label or protocol longer than 65535 bytes")]
    TooLong,
}

/// How a channel delivers (RFC 8831 section 6.4): the SCTP partial reliability it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// Every message, retransmitted until it arrives.
    Reliable,
    /// A message is retransmitted at most this many times.
    MaxRetransmits(u32),
    /// A message is retransmitted for at most this many milliseconds.
    MaxLifetimeMs(u32),
}

/// A DCEP message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dcep {
    /// DATA_CHANNEL_OPEN: what the channel is.
    Open(ChannelParams),
    /// DATA_CHANNEL_ACK.
    Ack,
}

/// A channel as DATA_CHANNEL_OPEN describes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChannelParams {
    /// Messages may arrive out of order.
    pub unordered: bool,
    /// Its partial reliability.
    pub reliability: Reliability,
    /// Its priority (RFC 8831 section 6.4; the node relays it as given).
    pub priority: u16,
    /// Its label.
    pub label: String,
    /// Its subprotocol.
    pub protocol: String,
}

impl Dcep {
    /// Reads one DCEP message (a whole SCTP message of PPID 50).
    pub fn parse(bytes: &[u8]) -> Result<Self, DcepError> {
        let (&kind, _) = bytes.split_first().ok_or(DcepError::Empty)?;
        match kind {
            ACK if bytes.len() == 1 => Ok(Self::Ack),
            ACK => Err(DcepError::TrailingBytes),
            OPEN => parse_open(bytes).map(Self::Open),
            other => Err(DcepError::UnknownType(other)),
        }
    }

    /// The message's bytes, appended to `out`.
    pub fn write(&self, out: &mut Vec<u8>) -> Result<(), DcepError> {
        let Self::Open(open) = self else {
            out.push(ACK);
            return Ok(());
        };
        let label = u16::try_from(open.label.len()).map_err(|_| DcepError::TooLong)?;
        let protocol = u16::try_from(open.protocol.len()).map_err(|_| DcepError::TooLong)?;
        let (base, parameter) = match open.reliability {
            Reliability::Reliable => (0x00, 0),
            Reliability::MaxRetransmits(n) => (0x01, n),
            Reliability::MaxLifetimeMs(ms) => (0x02, ms),
        };
        let unordered = if open.unordered { UNORDERED } else { 0 };
        out.push(OPEN);
        out.push(base | unordered);
        out.extend_from_slice(&open.priority.to_be_bytes());
        out.extend_from_slice(&parameter.to_be_bytes());
        out.extend_from_slice(&label.to_be_bytes());
        out.extend_from_slice(&protocol.to_be_bytes());
        out.extend_from_slice(open.label.as_bytes());
        out.extend_from_slice(open.protocol.as_bytes());
        Ok(())
    }
}

fn parse_open(bytes: &[u8]) -> Result<ChannelParams, DcepError> {
    let header = bytes.get(..OPEN_HEADER).ok_or(DcepError::Truncated)?;
    let be16 = |at: usize| usize::from(u16::from_be_bytes([header[at], header[at + 1]]));
    let channel_type = header[1];
    let priority = u16::from_be_bytes([header[2], header[3]]);
    let parameter = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    let (label_len, protocol_len) = (be16(8), be16(10));
    let reliability = match channel_type & !UNORDERED {
        0x00 => Reliability::Reliable,
        0x01 => Reliability::MaxRetransmits(parameter),
        0x02 => Reliability::MaxLifetimeMs(parameter),
        _ => return Err(DcepError::UnknownChannelType(channel_type)),
    };
    let rest = &bytes[OPEN_HEADER..];
    if rest.len() < label_len + protocol_len {
        return Err(DcepError::Truncated);
    }
    if rest.len() > label_len + protocol_len {
        return Err(DcepError::TrailingBytes);
    }
    let (label, protocol) = rest.split_at(label_len);
    let text = |b: &[u8]| {
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| DcepError::NotUtf8)
    };
    Ok(ChannelParams {
        unordered: channel_type & UNORDERED != 0,
        reliability,
        priority,
        label: text(label)?,
        protocol: text(protocol)?,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A channel Chromium opens with `createDataChannel("chat", {ordered: false,
    /// maxRetransmits: 3, protocol: "json"})`, as RFC 8832 section 5.1 lays it out.
    const CHAT_OPEN: [u8; 20] = [
        0x03, 0x81, 0x01, 0x00, 0, 0, 0, 3, 0, 4, 0, 4, b'c', b'h', b'a', b't', b'j', b's', b'o',
        b'n',
    ];

    #[test]
    fn reads_an_open_and_writes_it_back() {
        let open = Dcep::parse(&CHAT_OPEN).unwrap();
        let Dcep::Open(params) = &open else {
            panic!("an open");
        };
        assert!(params.unordered);
        assert_eq!(params.reliability, Reliability::MaxRetransmits(3));
        assert_eq!(params.priority, 256);
        assert_eq!(
            (params.label.as_str(), params.protocol.as_str()),
            ("chat", "json")
        );
        let mut out = Vec::new();
        open.write(&mut out).unwrap();
        assert_eq!(out, CHAT_OPEN);
    }

    #[test]
    fn refuses_what_is_not_dcep() {
        assert_eq!(Dcep::parse(&[]), Err(DcepError::Empty));
        assert_eq!(Dcep::parse(&[0x02, 0]), Err(DcepError::TrailingBytes));
        assert_eq!(Dcep::parse(&[0x04]), Err(DcepError::UnknownType(4)));
        assert_eq!(Dcep::parse(&CHAT_OPEN[..19]), Err(DcepError::Truncated));
        let mut longer = CHAT_OPEN.to_vec();
        longer.push(b'!');
        assert_eq!(Dcep::parse(&longer), Err(DcepError::TrailingBytes));
        let mut bad_type = CHAT_OPEN;
        bad_type[1] = 0x03;
        assert_eq!(
            Dcep::parse(&bad_type),
            Err(DcepError::UnknownChannelType(3))
        );
        let mut not_utf8 = CHAT_OPEN;
        not_utf8[12] = 0xFF;
        assert_eq!(Dcep::parse(&not_utf8), Err(DcepError::NotUtf8));
        assert_eq!(Dcep::parse(&[0x02]), Ok(Dcep::Ack));
    }

    fn reliability() -> impl Strategy<Value = Reliability> {
        prop_oneof![
            Just(Reliability::Reliable),
            any::<u32>().prop_map(Reliability::MaxRetransmits),
            any::<u32>().prop_map(Reliability::MaxLifetimeMs),
        ]
    }

    proptest! {
        #[test]
        fn every_message_reads_back_as_written(
            unordered: bool,
            reliability in reliability(),
            priority: u16,
            label in ".{0,40}",
            protocol in ".{0,20}",
            ack: bool,
        ) {
            let message = if ack {
                Dcep::Ack
            } else {
                Dcep::Open(ChannelParams { unordered, reliability, priority, label, protocol })
            };
            let mut bytes = Vec::new();
            message.write(&mut bytes).unwrap();
            prop_assert_eq!(Dcep::parse(&bytes), Ok(message));
        }

        #[test]
        fn any_bytes_parse_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            // A reliable channel's parameter is ignored (RFC 8832 section 5.1), so what is
            // written back reads as the same message rather than as the same bytes.
            if let Ok(message) = Dcep::parse(&bytes) {
                let mut again = Vec::new();
                message.write(&mut again).unwrap();
                prop_assert_eq!(Dcep::parse(&again), Ok(message));
            }
        }
    }
}
