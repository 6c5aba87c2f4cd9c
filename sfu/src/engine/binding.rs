//! Streams whose SSRCs the signaling did not give, told apart by what their packets carry:
//! simulcast encodings by their RTP stream id (RFC 8852), a bundled section without
//! `a=ssrc` lines by its mid (RFC 8843 section 9.2) or, failing that, by a payload type no
//! other section uses. The transport binds such a stream's SSRC from the first packet so
//! named, and again when the publisher restarts the stream under a new SSRC. Simulcast streams
//! whose SSRCs the signaling announced beside their rids, without saying which rid each is
//! (`a=ssrc` lines and `a=ssrc-group:FID` pairs), are bound by rid all the same, and the pair
//! of the SSRC so bound comes with it: a stream's RTX then needs no repaired rid of its own.

use std::time::{Duration, Instant};

use rtp_ext::ext::{HeaderExtension, Mid, RepairedRtpStreamId, RtpStreamId};
use rtp_ext::rtp::RtpPacket;
use smallvec::SmallVec;

use super::track::{StreamConfig, TrackConfig};

/// How a track's streams are named in its packets when the signaling gave no SSRCs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StreamIds {
    /// The signaling gave every stream's SSRC.
    #[default]
    Signaled,
    /// Simulcast by RTP stream id: one rid per stream, in the order of
    /// [`TrackConfig::streams`] (lowest layer first). Retransmissions carry the repaired rid.
    Rids {
        /// The rids, one per stream.
        rids: SmallVec<[String; 4]>,
        /// Local id of the RTP stream id extension.
        rid_ext: u8,
        /// Local id of the repaired RTP stream id extension, if negotiated.
        repaired_rid_ext: Option<u8>,
        /// Media and RTX SSRC pairs the signaling announced beside the rids, in no known
        /// order of rids: the packets' rids say which stream each pair is.
        announced: SmallVec<[StreamConfig; 4]>,
    },
    /// One stream, named by the mid it carries or by its payload types.
    Unsignaled {
        /// The section's mid and the local id of the mid extension, if negotiated.
        mid: Option<(String, u8)>,
        /// No other section of the bundle uses these payload types: a packet without a mid
        /// is claimed by its payload type.
        by_payload_type: bool,
        /// The media payload type.
        payload_type: u8,
        /// The RTX payload type (RFC 4588), if negotiated.
        rtx_payload_type: Option<u8>,
    },
}

impl StreamIds {
    /// Whether some stream takes its SSRC from its packets.
    pub fn binds(&self) -> bool {
        *self != Self::Signaled
    }
}

/// Which stream of `config` a packet names, and whether as its repair (RTX) stream.
pub(super) fn claim(config: &TrackConfig, packet: &RtpPacket<'_>) -> Option<(usize, bool)> {
    match &config.stream_ids {
        StreamIds::Signaled => None,
        StreamIds::Rids {
            rids,
            rid_ext,
            repaired_rid_ext,
            ..
        } => {
            let (rid, repair) = match read::<RtpStreamId>(packet, Some(*rid_ext)) {
                Some(RtpStreamId(rid)) => (rid, false),
                None => (
                    read::<RepairedRtpStreamId>(packet, *repaired_rid_ext)?.0,
                    true,
                ),
            };
            let index = rids.iter().position(|r| r == rid)?;
            Some((index, repair))
        }
        StreamIds::Unsignaled {
            mid,
            by_payload_type,
            payload_type,
            rtx_payload_type,
        } => {
            let pt = packet.fields().payload_type;
            let repair = Some(pt) == *rtx_payload_type;
            if pt != *payload_type && !repair {
                return None;
            }
            let carried = mid
                .as_ref()
                .and_then(|(_, ext)| read::<Mid>(packet, Some(*ext)));
            let ours = match (carried, mid) {
                (Some(Mid(carried)), Some((own, _))) => carried == own,
                _ => *by_payload_type,
            };
            ours.then_some((0, repair))
        }
    }
}

/// The stream's SSRCs once `ssrc` is bound to it: with its announced partner, if the
/// signaling paired it with one.
pub(super) fn bound(
    ids: &StreamIds,
    stream: StreamConfig,
    ssrc: u32,
    repair: bool,
) -> StreamConfig {
    if let Some(pair) = announced_pair(ids, ssrc, repair) {
        return pair;
    }
    if repair {
        StreamConfig {
            rtx_ssrc: Some(ssrc),
            ..stream
        }
    } else {
        StreamConfig { ssrc, ..stream }
    }
}

/// The announced media and RTX pair `ssrc` belongs to, as media or as repair.
fn announced_pair(ids: &StreamIds, ssrc: u32, repair: bool) -> Option<StreamConfig> {
    let StreamIds::Rids { announced, .. } = ids else {
        return None;
    };
    announced.iter().copied().find(|pair| {
        if repair {
            pair.rtx_ssrc == Some(ssrc)
        } else {
            pair.ssrc == ssrc
        }
    })
}

fn read<'a, E: HeaderExtension<'a>>(packet: &RtpPacket<'a>, id: Option<u8>) -> Option<E> {
    E::parse(packet.extension(id?)?).ok()
}

/// How soon a stream bound from its packets may be bound again, to other SSRCs: a sender
/// restarts a stream under a new SSRC now and then (a renegotiation, an encoder restarted),
/// not from one packet to the next, and each new SSRC starts the stream's reception afresh.
/// A packet that would rebind it sooner is not taken (the SSRC stays unknown).
pub const REBIND_HOLD: Duration = Duration::from_secs(1);

/// When each stream of a track was last bound again to other SSRCs, to hold it to one
/// rebinding per [`REBIND_HOLD`].
#[derive(Debug, Default)]
pub(super) struct Rebinds {
    at: SmallVec<[Option<Instant>; 4]>,
}

impl Rebinds {
    /// Whether stream `index`, bound to `old`, may be bound to `new` at `now`; noted if so. A
    /// first binding (nothing bound yet, or an RTX SSRC learned) always may.
    pub fn allow(
        &mut self,
        now: Instant,
        index: usize,
        old: StreamConfig,
        new: StreamConfig,
    ) -> bool {
        let replaced = (old.ssrc != 0 && old.ssrc != new.ssrc)
            || old.rtx_ssrc.is_some_and(|rtx| Some(rtx) != new.rtx_ssrc);
        if !replaced {
            return true;
        }
        if self.at.len() <= index {
            self.at.resize(index + 1, None);
        }
        let last = &mut self.at[index];
        if last.is_some_and(|at| now.saturating_duration_since(at) < REBIND_HOLD) {
            return false;
        }
        *last = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use rtp_ext::codec::Codec;

    use super::*;

    const RID: u8 = 10;
    const RRID: u8 = 11;
    const MID: u8 = 12;

    /// An RTP header with one one-byte-form extension element (RFC 8285 section 4.2).
    fn packet_with(payload_type: u8, ext: u8, value: &str) -> Vec<u8> {
        let mut element = vec![(ext << 4) | (value.len() as u8 - 1)];
        element.extend_from_slice(value.as_bytes());
        element.resize(element.len().div_ceil(4) * 4, 0);
        let words = (element.len() / 4) as u16;
        let mut packet = vec![0x90, payload_type, 0, 1, 0, 0, 0, 2, 0, 0, 0xAA, 0xAA];
        packet.extend_from_slice(&[0xBE, 0xDE]);
        packet.extend_from_slice(&words.to_be_bytes());
        packet.extend_from_slice(&element);
        packet.push(0xAB);
        packet
    }

    fn claims(config: &TrackConfig, packet: &[u8]) -> Option<(usize, bool)> {
        claim(config, &RtpPacket::parse(packet).expect("rtp"))
    }

    #[test]
    fn rid_and_repaired_rid_name_media_and_rtx_streams() {
        let mut config = TrackConfig::single(Codec::Vp8, 0);
        config.stream_ids = StreamIds::Rids {
            rids: ["q", "f"].into_iter().map(String::from).collect(),
            rid_ext: RID,
            repaired_rid_ext: Some(RRID),
            announced: SmallVec::new(),
        };
        assert_eq!(
            claims(&config, &packet_with(96, RID, "f")),
            Some((1, false))
        );
        assert_eq!(
            claims(&config, &packet_with(97, RRID, "q")),
            Some((0, true))
        );
        assert_eq!(
            claims(&config, &packet_with(96, RID, "h")),
            None,
            "no such rid"
        );
        assert_eq!(
            claims(&config, &packet_with(96, MID, "f")),
            None,
            "not a rid"
        );
    }

    /// A section without `a=ssrc` lines: video on payload type 96 (RTX 97), mid "v".
    fn unsignaled(by_payload_type: bool) -> TrackConfig {
        let mut config = TrackConfig::single(Codec::Vp8, 0);
        config.stream_ids = StreamIds::Unsignaled {
            mid: Some(("v".into(), MID)),
            by_payload_type,
            payload_type: 96,
            rtx_payload_type: Some(97),
        };
        config
    }

    #[test]
    fn a_stream_without_ssrc_is_named_by_mid_or_unique_payload_type() {
        let by_mid_only = unsignaled(false);
        assert_eq!(
            claims(&by_mid_only, &packet_with(96, MID, "v")),
            Some((0, false))
        );
        assert_eq!(
            claims(&by_mid_only, &packet_with(97, MID, "v")),
            Some((0, true))
        );
        assert_eq!(
            claims(&by_mid_only, &packet_with(96, MID, "a")),
            None,
            "another mid"
        );
        assert_eq!(
            claims(&by_mid_only, &packet_with(96, RID, "x")),
            None,
            "no mid"
        );
        let by_payload_type = unsignaled(true);
        assert_eq!(
            claims(&by_payload_type, &packet_with(96, RID, "x")),
            Some((0, false))
        );
        assert_eq!(
            claims(&by_payload_type, &packet_with(96, MID, "a")),
            None,
            "mid wins"
        );
        assert_eq!(claims(&by_payload_type, &packet_with(111, RID, "x")), None);
    }

    #[test]
    fn binding_keeps_the_other_ssrc() {
        let stream = StreamConfig {
            ssrc: 1,
            rtx_ssrc: Some(2),
        };
        let ids = StreamIds::Signaled;
        assert_eq!(bound(&ids, stream, 5, true).rtx_ssrc, Some(5));
        assert_eq!(bound(&ids, stream, 5, true).ssrc, 1);
        assert_eq!(bound(&ids, stream, 6, false).ssrc, 6);
        assert_eq!(bound(&ids, stream, 6, false).rtx_ssrc, Some(2));
    }

    #[test]
    fn an_announced_pair_is_bound_whole_by_either_of_its_ssrcs() {
        let pair = |ssrc, rtx| StreamConfig {
            ssrc,
            rtx_ssrc: Some(rtx),
        };
        let ids = StreamIds::Rids {
            rids: ["q", "h"].into_iter().map(String::from).collect(),
            rid_ext: RID,
            repaired_rid_ext: Some(RRID),
            announced: [pair(10, 11), pair(20, 21)].into_iter().collect(),
        };
        let unbound = StreamConfig {
            ssrc: 0,
            rtx_ssrc: None,
        };
        assert_eq!(bound(&ids, unbound, 20, false), pair(20, 21));
        assert_eq!(bound(&ids, unbound, 11, true), pair(10, 11));
        assert_eq!(
            bound(&ids, unbound, 21, false),
            StreamConfig {
                ssrc: 21,
                rtx_ssrc: None
            },
            "an RTX SSRC carrying a rid is not its pair's media"
        );
        assert_eq!(bound(&ids, unbound, 30, false).ssrc, 30, "not announced");
    }
}
