//! What the origin keeps of each relay's last packets to answer the edge's NACKs, and the
//! bounds on answering them. An edge's NACK names sequence numbers, up to 17 a pair and
//! hundreds of pairs a datagram, the same one as often as it likes: each datagram has at most
//! a ring's worth of them answered, each once, and each packet is sent again at most
//! [`MAX_RESENDS`] times in all, as toward a viewer; the rest are counted.

use std::collections::VecDeque;

use bytes::Bytes;

use super::relay::RESEND_RING;
use crate::engine::MAX_RESENDS;

/// Sequence numbers one datagram from an edge may have answered: as many as a relay keeps
/// packets (more cannot all be found).
pub(super) const MAX_ASKED: usize = RESEND_RING;

/// A relay's last [`RESEND_RING`] packets sent, each with its SSRC and sequence number (read
/// once, as it was kept) and the times it was sent again.
#[derive(Debug, Default)]
pub(super) struct ResendRing {
    kept: VecDeque<Kept>,
}

#[derive(Debug)]
struct Kept {
    id: Option<(u32, u16)>,
    packet: Bytes,
    resends: u8,
}

/// What answering an edge's NACKs did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Answered {
    /// Packets queued to be sent again.
    pub resent: u64,
    /// Sequence numbers not answered: named again in the same datagram, past
    /// [`MAX_ASKED`] of it, or of a packet already sent again [`MAX_RESENDS`] times.
    pub refused: u64,
}

impl ResendRing {
    /// Keeps `packet`, forgetting the oldest past [`RESEND_RING`].
    pub fn push(&mut self, packet: Bytes) {
        if self.kept.len() == RESEND_RING {
            self.kept.pop_front();
        }
        self.kept.push_back(Kept {
            id: rtp_id(&packet),
            packet,
            resends: 0,
        });
    }

    /// Gives `resend` each kept packet `asked` names (sorted, each once) that may still be
    /// sent again, oldest first.
    pub fn answer(&mut self, asked: &[(u32, u16)], mut resend: impl FnMut(Bytes)) -> Answered {
        let mut answered = Answered::default();
        for kept in &mut self.kept {
            if kept.id.is_none_or(|id| asked.binary_search(&id).is_err()) {
                continue;
            }
            if kept.resends >= MAX_RESENDS {
                answered.refused += 1;
                continue;
            }
            kept.resends += 1;
            answered.resent += 1;
            resend(kept.packet.clone());
        }
        answered
    }
}

/// The sequence numbers an edge's datagram asked for, each once and at most [`MAX_ASKED`]:
/// sorted for [`ResendRing::answer`]; returns how many were not kept.
pub(super) fn dedup_asked(asked: &mut Vec<(u32, u16)>) -> u64 {
    let named = asked.len();
    asked.sort_unstable();
    asked.dedup();
    asked.truncate(MAX_ASKED);
    (named - asked.len()) as u64
}

/// An RTP packet's SSRC and sequence number.
pub(super) fn rtp_id(packet: &[u8]) -> Option<(u32, u16)> {
    let seq = u16::from_be_bytes(packet.get(2..4)?.try_into().ok()?);
    let ssrc = u32::from_be_bytes(packet.get(8..12)?.try_into().ok()?);
    Some((ssrc, seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(ssrc: u32, seq: u16) -> Bytes {
        let mut packet = vec![0x80, 96];
        packet.extend_from_slice(&seq.to_be_bytes());
        packet.extend_from_slice(&[0; 4]);
        packet.extend_from_slice(&ssrc.to_be_bytes());
        Bytes::from(packet)
    }

    #[test]
    fn a_packet_is_sent_again_at_most_max_resends_times() {
        let mut ring = ResendRing::default();
        for seq in 0..10 {
            ring.push(packet(7, seq));
        }
        let mut sent = Vec::new();
        let mut totals = Answered::default();
        for _ in 0..MAX_RESENDS + 3 {
            let answered = ring.answer(&[(7, 3), (7, 5)], |p| sent.push(p));
            totals.resent += answered.resent;
            totals.refused += answered.refused;
        }
        let resends = u64::from(MAX_RESENDS);
        assert_eq!(
            totals,
            Answered {
                resent: 2 * resends,
                refused: 2 * 3
            }
        );
        assert!(sent
            .iter()
            .all(|p| rtp_id(p) == Some((7, 3)) || rtp_id(p) == Some((7, 5))));
    }

    #[test]
    fn the_ring_forgets_the_oldest_and_other_ssrcs_are_not_matched() {
        let mut ring = ResendRing::default();
        for seq in 0..RESEND_RING as u16 + 2 {
            ring.push(packet(7, seq));
        }
        let mut sent = Vec::new();
        let answered = ring.answer(&[(7, 0), (7, 1), (7, 2), (8, 2)], |p| sent.push(p));
        assert_eq!(
            answered,
            Answered {
                resent: 1,
                refused: 0
            }
        );
        assert_eq!(rtp_id(&sent[0]), Some((7, 2)));
    }

    #[test]
    fn a_datagram_s_asks_are_kept_once_each_and_at_most_max_asked() {
        let mut asked = vec![(7, 5), (7, 5), (7, 1), (7, 5)];
        assert_eq!(dedup_asked(&mut asked), 2);
        assert_eq!(asked, [(7, 1), (7, 5)]);
        let mut asked: Vec<(u32, u16)> = (0..MAX_ASKED as u16 + 40).map(|s| (7, s)).collect();
        assert_eq!(dedup_asked(&mut asked), 40);
        assert_eq!(asked.len(), MAX_ASKED);
    }
}
