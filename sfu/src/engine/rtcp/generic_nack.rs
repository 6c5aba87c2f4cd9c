//! Generic NACK (RFC 4585 section 6.2.1): lost RTP sequence numbers as (PID, BLP) pairs.

use super::inline_list::{Full, InlineList};

/// Pairs one NACK carries here. 64 pairs name up to 1088 packets, more than any retransmission
/// buffer holds; a longer loss list goes out as several NACKs.
pub const MAX_NACK_PAIRS: usize = 64;

/// Sequence numbers one pair covers: the PID and the 16 after it in the BLP bitmask.
pub const NACK_PAIR_SPAN: u16 = 17;

/// A generic NACK: the media sender should retransmit the packets it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nack {
    /// Who asks.
    pub sender_ssrc: u32,
    /// The media sender asked to retransmit.
    pub media_ssrc: u32,
    /// The lost packets, as packet id and bitmask pairs.
    pub pairs: NackPairs,
}

/// One lost packet (PID) and a bitmask of the 16 following it (BLP, bit i for PID + i + 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NackPair {
    /// Packet id: the first lost sequence number.
    pub pid: u16,
    /// Bitmask of lost packets: bit i set means `pid + i + 1` was lost too.
    pub blp: u16,
}

/// The (PID, BLP) pairs of one NACK, inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NackPairs(InlineList<NackPair, MAX_NACK_PAIRS>);

impl NackPairs {
    /// The pairs as they go on the wire.
    pub fn pairs(&self) -> &[NackPair] {
        &self.0
    }

    /// Adds a pair as read from the wire, or fails when the list is full.
    pub fn push_pair(&mut self, pair: NackPair) -> Result<(), Full> {
        self.0.push(pair)
    }

    /// Marks `seq` lost. Fed in RTP order (each number after the previous, modulo 2^16), the
    /// pairs come out minimal: a new pair starts only at a number the last one cannot reach.
    /// Out of order input still packs correctly, only into more pairs. Fails when a new pair is
    /// needed and the list is full: send this NACK and start another.
    pub fn push(&mut self, seq: u16) -> Result<(), Full> {
        if let Some(last) = self.0.last_mut() {
            let offset = seq.wrapping_sub(last.pid);
            if offset == 0 {
                return Ok(());
            }
            if offset < NACK_PAIR_SPAN {
                last.blp |= 1 << (offset - 1);
                return Ok(());
            }
        }
        self.0.push(NackPair { pid: seq, blp: 0 })
    }

    /// Every sequence number the pairs name, pair by pair in RTP order.
    pub fn lost(&self) -> impl Iterator<Item = u16> + '_ {
        self.0.iter().flat_map(|pair| {
            let following = (0..16u16)
                .filter(move |bit| pair.blp & (1 << bit) != 0)
                .map(move |bit| pair.pid.wrapping_add(bit + 1));
            std::iter::once(pair.pid).chain(following)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(lost: &[u16]) -> NackPairs {
        let mut pairs = NackPairs::default();
        for &seq in lost {
            pairs.push(seq).unwrap();
        }
        pairs
    }

    #[test]
    fn one_pair_spans_seventeen() {
        let lost: Vec<u16> = (100..117).collect();
        let pairs = pack(&lost);
        assert_eq!(
            pairs.pairs(),
            &[NackPair {
                pid: 100,
                blp: 0xFFFF
            }]
        );
        assert_eq!(pairs.lost().collect::<Vec<_>>(), lost);
    }

    #[test]
    fn eighteenth_starts_a_pair() {
        let pairs = pack(&[100, 116, 117, 133]);
        let expected = [
            NackPair {
                pid: 100,
                blp: 0x8000,
            },
            NackPair {
                pid: 117,
                blp: 0x8000,
            },
        ];
        assert_eq!(pairs.pairs(), &expected);
    }

    #[test]
    fn across_the_wrap() {
        let pairs = pack(&[65534, 65535, 0, 3]);
        assert_eq!(
            pairs.pairs(),
            &[NackPair {
                pid: 65534,
                blp: 0b10011
            }]
        );
        assert_eq!(pairs.lost().collect::<Vec<_>>(), [65534, 65535, 0, 3]);
    }

    #[test]
    fn duplicates_and_disorder_stay_correct() {
        let pairs = pack(&[10, 10, 12, 5, 11]);
        let mut lost: Vec<u16> = pairs.lost().collect();
        lost.sort_unstable();
        assert_eq!(lost, [5, 10, 11, 12]);
    }

    #[test]
    fn full_list_refuses_a_new_pair_but_extends_the_last() {
        let mut pairs = NackPairs::default();
        for i in 0..MAX_NACK_PAIRS as u16 {
            pairs.push(i * 100).unwrap();
        }
        let last = (MAX_NACK_PAIRS as u16 - 1) * 100;
        assert_eq!(pairs.push(last + 16), Ok(()));
        assert_eq!(pairs.push(last + 17), Err(Full));
        assert_eq!(pairs.pairs().len(), MAX_NACK_PAIRS);
    }
}
