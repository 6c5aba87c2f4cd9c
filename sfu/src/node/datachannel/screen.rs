//! A look at an SCTP packet's chunks (RFC 9260 section 3) before the stack has it, for what
//! the stack would take in but must not be given. A DATA chunk with no user data (RFC 9260
//! section 6.2 says to abort on one): the stack would keep it until its message is whole, with
//! each chunk it adds a walk of those it holds, while its window counts only user data. And
//! an INIT to an end that has its association (or to a client's end, which takes none: the
//! stack would panic on it): the node restarts no association.

pub(super) const DATA: u8 = 0;
const INIT: u8 = 1;
/// A DATA chunk's header and fixed fields before its user data.
const DATA_HEADER: usize = 16;
/// The common header before the chunks.
const COMMON_HEADER: usize = 12;

/// Why a packet is not given to the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SctpRefusal {
    /// A DATA chunk with no user data.
    #[error("a DATA chunk with no user data")]
    EmptyData,
    /// An INIT to an end that takes none.
    #[error("an INIT to an association that has one")]
    Init,
    /// DATA further past what the stack has than the node takes (see `held.rs`).
    #[error("DATA past the TSNs the node takes ahead")]
    Window,
    /// The peer left more DATA unfinished or unread than any message needs: its association
    /// is ended.
    #[error("more DATA left unfinished than any message needs")]
    Unfinished,
    /// A packet the stack did not read (too short, a bad checksum, for no association).
    #[error("a packet the SCTP stack did not read")]
    Unread,
}

/// Whether the stack may have `packet`: `takes_init`, whether this end takes an INIT now.
pub fn screen(packet: &[u8], takes_init: bool) -> Result<(), SctpRefusal> {
    if packet.len() < COMMON_HEADER {
        return Err(SctpRefusal::Unread);
    }
    for (kind, _, chunk) in chunks(packet) {
        let length = chunk.len();
        match kind {
            // Shorter than its fixed fields: the stack refuses it whole.
            DATA if length < DATA_HEADER => return Err(SctpRefusal::Unread),
            DATA if length == DATA_HEADER => return Err(SctpRefusal::EmptyData),
            INIT if !takes_init => return Err(SctpRefusal::Init),
            _ => {}
        }
    }
    Ok(())
}

/// Each chunk of an SCTP packet: its type, its flags and the chunk as long as its length says
/// (its header included, its padding not), as far as they are in the packet. Chunks are
/// padded to four bytes; one shorter than its header ends the walk.
pub(super) fn chunks(packet: &[u8]) -> impl Iterator<Item = (u8, u8, &[u8])> {
    let mut rest = packet.get(COMMON_HEADER..).unwrap_or(&[]);
    std::iter::from_fn(move || {
        let header = rest.get(..4)?;
        let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
        let chunk = (
            header[0],
            header[1],
            rest.get(..length.max(4)).unwrap_or(rest),
        );
        rest = rest.get(length.max(4).next_multiple_of(4)..).unwrap_or(&[]);
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet of one chunk of `kind`, `flags` and `value` bytes after its header.
    fn packet(kind: u8, flags: u8, value: usize) -> Vec<u8> {
        let mut packet = vec![0; COMMON_HEADER];
        let length = u16::try_from(4 + value).expect("short");
        packet.extend([kind, flags]);
        packet.extend(length.to_be_bytes());
        packet.resize(packet.len() + value.next_multiple_of(4), 0);
        packet
    }

    #[test]
    fn data_chunks_carry_user_data() {
        let screened = |p: &[u8]| screen(p, false);
        assert_eq!(
            screened(&packet(DATA, 0x03, 12)),
            Err(SctpRefusal::EmptyData)
        );
        assert_eq!(screened(&packet(DATA, 0x03, 8)), Err(SctpRefusal::Unread));
        // One byte, whole or any fragment: taken.
        for flags in [0x03, 0x02, 0x00, 0x01] {
            assert_eq!(screened(&packet(DATA, flags, 13)), Ok(()));
        }
        // The refusal is found past other chunks, bundled (a SACK first).
        let mut bundled = packet(3, 0, 12);
        bundled.extend_from_slice(&packet(DATA, 0x03, 12)[COMMON_HEADER..]);
        assert_eq!(screened(&bundled), Err(SctpRefusal::EmptyData));
        assert_eq!(screened(&[0; 11]), Err(SctpRefusal::Unread));
    }

    #[test]
    fn an_init_is_taken_only_where_the_end_takes_one() {
        let init = packet(INIT, 0, 16);
        assert_eq!(screen(&init, true), Ok(()));
        assert_eq!(screen(&init, false), Err(SctpRefusal::Init));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_screened_without_a_panic(bytes in proptest::collection::vec(0u8.., 0..256)) {
            let _ = screen(&bytes, bytes.len() % 2 == 0);
        }
    }
}
