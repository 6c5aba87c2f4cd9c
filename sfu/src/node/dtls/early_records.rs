//! Records of a later epoch that arrive before the DTLS stack can decrypt them. The stack
//! queues them undecrypted for later, without bound, and a hostile peer could fill that queue
//! with copies. Until the handshake is done the association lets each such record through
//! once, and only so many; afterwards the stack's own replay window drops copies. Also the
//! framing the stack needs of a datagram, checked before it sees one, and the hellos that tell
//! a peer's repeated first flight.

use super::DtlsError;

/// Later-epoch records a handshake lets through: a client sends one or two (its Finished,
/// maybe early application data), and retransmits them under new sequence numbers.
const CAPACITY: usize = 32;

/// The DTLS record header (RFC 6347 §4.1): type, version, epoch, sequence number, length.
const HEADER_LEN: usize = 13;

/// The handshake record's content type, and the two hellos' message types (RFC 5246 §6.2.1,
/// §7.4), the first byte of a handshake record's body.
const HANDSHAKE: u8 = 22;
const CLIENT_HELLO: u8 = 1;
const SERVER_HELLO: u8 = 2;

/// The (epoch, sequence number) of the later-epoch records let through so far.
#[derive(Debug, Default)]
pub(super) struct EarlyRecords {
    seen: Vec<(u16, u64)>,
}

impl EarlyRecords {
    /// Whether `datagram` may go to the stack: none of its later-epoch records went before,
    /// and they fit the bound. The ones it carries are remembered.
    pub fn admit(&mut self, datagram: &[u8]) -> Result<(), DtlsError> {
        let mut count = 0;
        for id in later_epoch_records(datagram) {
            if self.seen.contains(&id) {
                return Err(DtlsError::DuplicateRecord);
            }
            count += 1;
        }
        if self.seen.len() + count > CAPACITY {
            return Err(DtlsError::TooManyEarlyRecords);
        }
        self.seen.extend(later_epoch_records(datagram));
        Ok(())
    }
}

/// Whether `datagram` is a sequence of whole records, each longer than its header, as the stack
/// splits it (it takes anything else as an error of the association).
pub(super) fn is_well_framed(datagram: &[u8]) -> bool {
    let mut rest = datagram;
    while !rest.is_empty() {
        let Some(header) = rest.get(..HEADER_LEN).filter(|_| rest.len() > HEADER_LEN) else {
            return false;
        };
        let length = usize::from(u16::from_be_bytes([header[11], header[12]]));
        let Some(next) = rest.get(HEADER_LEN + length..) else {
            return false;
        };
        rest = next;
    }
    true
}

/// The bytes of `datagram`'s handshake records, headers included: what a repeat of the peer's
/// final flight costs after the handshake.
pub(super) fn handshake_bytes(datagram: &[u8]) -> usize {
    records(datagram)
        .filter(|record| record.content_type == HANDSHAKE)
        .map(|record| HEADER_LEN + record.body.len())
        .sum()
}

/// Whether `datagram` carries the node's ServerHello: the stack has answered the peer's hello.
pub(super) fn has_server_hello(datagram: &[u8]) -> bool {
    records(datagram).any(|record| record.hello() == Some(SERVER_HELLO))
}

/// Whether `datagram` is ClientHello records and nothing else.
pub(super) fn is_client_hello(datagram: &[u8]) -> bool {
    let mut records = records(datagram).peekable();
    records.peek().is_some() && records.all(|record| record.hello() == Some(CLIENT_HELLO))
}

/// One record of a datagram.
struct Record<'a> {
    content_type: u8,
    epoch: u16,
    sequence: u64,
    body: &'a [u8],
}

impl Record<'_> {
    /// The message type of an unencrypted handshake record (epoch 0): its body's first byte.
    fn hello(&self) -> Option<u8> {
        let clear_handshake = self.content_type == HANDSHAKE && self.epoch == 0;
        self.body.first().copied().filter(|_| clear_handshake)
    }
}

/// The records of `datagram`, walking record lengths as the stack does; a record cut short
/// ends the walk (the stack drops the datagram).
fn records(mut datagram: &[u8]) -> impl Iterator<Item = Record<'_>> {
    std::iter::from_fn(move || {
        let header = datagram.get(..HEADER_LEN)?;
        let length = usize::from(u16::from_be_bytes([header[11], header[12]]));
        let mut sequence = [0u8; 8];
        sequence[2..].copy_from_slice(&header[5..11]);
        let record = Record {
            content_type: header[0],
            epoch: u16::from_be_bytes([header[3], header[4]]),
            sequence: u64::from_be_bytes(sequence),
            body: datagram.get(HEADER_LEN..HEADER_LEN + length)?,
        };
        datagram = &datagram[HEADER_LEN + length..];
        Some(record)
    })
}

/// The (epoch, sequence number) of each record past epoch 0 in `datagram`.
fn later_epoch_records(datagram: &[u8]) -> impl Iterator<Item = (u16, u64)> + '_ {
    records(datagram)
        .filter(|record| record.epoch != 0)
        .map(|record| (record.epoch, record.sequence))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn record(epoch: u16, sequence: u64, body: &[u8]) -> Vec<u8> {
        typed_record(23, epoch, sequence, body)
    }

    fn typed_record(content_type: u8, epoch: u16, sequence: u64, body: &[u8]) -> Vec<u8> {
        let mut record = vec![content_type, 0xFE, 0xFD];
        record.extend_from_slice(&epoch.to_be_bytes());
        record.extend_from_slice(&sequence.to_be_bytes()[2..]);
        record.extend_from_slice(&(body.len() as u16).to_be_bytes());
        record.extend_from_slice(body);
        record
    }

    #[test]
    fn a_later_epoch_record_goes_through_once() {
        let mut early = EarlyRecords::default();
        let finished = [record(0, 4, b"ccs"), record(1, 0, &[9; 40])].concat();
        assert!(early.admit(&finished).is_ok());
        assert!(matches!(
            early.admit(&finished),
            Err(DtlsError::DuplicateRecord)
        ));
        // Alone too, and in another datagram's company.
        let alone = record(1, 0, &[7; 40]);
        assert!(early.admit(&alone).is_err());
        let with_other = [record(1, 1, b"new"), record(1, 0, b"old")].concat();
        assert!(early.admit(&with_other).is_err());
        // A retransmission carries new sequence numbers; epoch 0 copies are the stack's to
        // handle.
        assert!(early.admit(&record(1, 2, &[9; 40])).is_ok());
        assert!(early.admit(&finished[..19]).is_ok());
        assert!(early.admit(&finished[..19]).is_ok());
    }

    #[test]
    fn the_hellos_are_told_by_their_clear_handshake_records() {
        let hello = |epoch, message_type| typed_record(HANDSHAKE, epoch, 1, &[message_type, 0]);
        let client = hello(0, CLIENT_HELLO);
        assert!(is_client_hello(&client));
        assert!(is_client_hello(&[client.clone(), client.clone()].concat()));
        assert!(!has_server_hello(&client));
        // With anything else beside it, encrypted, or of another type, it is not.
        assert!(!is_client_hello(
            &[client.clone(), record(0, 2, b"x")].concat()
        ));
        assert!(!is_client_hello(&hello(1, CLIENT_HELLO)));
        assert!(!is_client_hello(&hello(0, SERVER_HELLO)));
        assert!(!is_client_hello(&typed_record(HANDSHAKE, 0, 1, &[])));
        assert!(!is_client_hello(&[]));
        let flight = [hello(0, SERVER_HELLO), hello(0, 11)].concat();
        assert!(has_server_hello(&flight));
        assert!(!has_server_hello(&hello(1, SERVER_HELLO)));
    }

    #[test]
    fn the_walk_follows_lengths_and_stops_at_a_cut() {
        let datagram = [record(2, 7, b"ab"), record(0, 1, b"c"), record(3, 9, b"")].concat();
        let ids: Vec<_> = later_epoch_records(&datagram).collect();
        assert_eq!(ids, [(2, 7), (3, 9)]);
        let cut = &datagram[..datagram.len() - 1];
        assert_eq!(later_epoch_records(cut).collect::<Vec<_>>(), [(2, 7)]);
        assert_eq!(later_epoch_records(&[]).count(), 0);
    }

    #[test]
    fn the_records_let_through_are_bounded() {
        let mut early = EarlyRecords::default();
        for sequence in 0..CAPACITY as u64 {
            assert!(early.admit(&record(1, sequence, b"x")).is_ok());
        }
        let one_more = record(1, CAPACITY as u64, b"x");
        assert!(matches!(
            early.admit(&one_more),
            Err(DtlsError::TooManyEarlyRecords)
        ));
        // Epoch 0 still goes through.
        assert!(early.admit(&record(0, 99, b"x")).is_ok());
    }

    proptest! {
        #[test]
        fn arbitrary_datagrams_never_panic_and_never_pass_twice(
            datagram in prop::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut early = EarlyRecords::default();
            let first = early.admit(&datagram);
            let again = early.admit(&datagram);
            let later = later_epoch_records(&datagram).count();
            if first.is_ok() && later > 0 {
                prop_assert!(again.is_err());
            }
        }
    }
}
