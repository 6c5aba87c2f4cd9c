//! A publisher as its offer describes it: the engine's configuration of each accepted
//! section (its streams, how they are told apart, its header extensions and feedback).

use rtp_ext::dd;
use rtp_ext::ext::{
    AbsSendTime, AudioLevel, HeaderExtension, Mid, RepairedRtpStreamId, RtpStreamId,
    TransportSequenceNumber,
};
use smallvec::SmallVec;

use super::SignalError;
use crate::engine::{PublisherRemb, StreamConfig, StreamIds, TrackConfig, TransportCc};
use crate::node::peer::{PublishedTrack, Publisher};
use crate::node::sdp::{Demux, Extmap, PublishedMedia};

fn extension_id(extensions: &[Extmap], uri: &str) -> Option<u8> {
    extensions.iter().find(|e| e.uri == uri).map(|e| e.id)
}
/// The engine's view of a publisher's accepted sections.
pub(super) fn publisher_of(accepted: &[&PublishedMedia]) -> Result<Publisher, SignalError> {
    let mut publisher = Publisher::default();
    for media in accepted {
        let ext = |uri| extension_id(&media.extensions, uri);
        let config = TrackConfig {
            codec: media.codec.codec,
            clock_rate: media.codec.clock_rate,
            streams: streams_of(media)?,
            dd_ext_id: ext(dd::URI),
            audio_level_ext_id: ext(AudioLevel::URI),
            transport_cc: ext(TransportSequenceNumber::URI).map(|ext_id| TransportCc { ext_id }),
            remb: remb_of(media),
            stream_ids: stream_ids_of(media),
        };
        publisher.tracks.push(PublishedTrack {
            mid: media.mid.clone(),
            config,
            id: None,
            origin: None,
            fmtp: media.codec.fmtp.clone(),
        });
    }
    Ok(publisher)
}

/// REMB toward a publisher that estimates nothing itself: it negotiated `goog-remb` and the
/// abs-send-time extension, and not transport-wide CC.
fn remb_of(media: &PublishedMedia) -> Option<PublisherRemb> {
    let ext = |uri| extension_id(&media.extensions, uri);
    let remb = media.codec.feedback.iter().any(|f| f == "goog-remb");
    let twcc = ext(TransportSequenceNumber::URI).is_some();
    let abs_send_time_ext_id = ext(AbsSendTime::URI).filter(|_| remb && !twcc)?;
    Some(PublisherRemb {
        abs_send_time_ext_id,
    })
}

/// The SSRCs the offer gave; for streams named by rid or mid, placeholders the engine
/// replaces when a stream's first packet shows its SSRC.
fn streams_of(media: &PublishedMedia) -> Result<SmallVec<[StreamConfig; 4]>, SignalError> {
    if media.rids.len() > 4 {
        return Err(SignalError::BadBody("at most four simulcast streams"));
    }
    let placeholder = StreamConfig {
        ssrc: 0,
        rtx_ssrc: None,
    };
    Ok(match (media.demux, media.ssrcs.first()) {
        (Demux::Ssrc, Some(first)) => SmallVec::from_slice(&[StreamConfig {
            ssrc: first.ssrc,
            rtx_ssrc: first.rtx_ssrc,
        }]),
        (Demux::Rid, _) => media.rids.iter().map(|_| placeholder).collect(),
        _ => SmallVec::from_slice(&[placeholder]),
    })
}

/// How the engine tells the section's streams apart when the offer gave no SSRCs, or gave
/// them beside rids.
fn stream_ids_of(media: &PublishedMedia) -> StreamIds {
    let ext = |uri| extension_id(&media.extensions, uri);
    match media.demux {
        Demux::Ssrc => StreamIds::Signaled,
        // Negotiation refuses a simulcast section without the rid extension.
        Demux::Rid => match ext(RtpStreamId::URI) {
            Some(rid_ext) => StreamIds::Rids {
                rids: media.rids.iter().cloned().collect(),
                rid_ext,
                repaired_rid_ext: ext(RepairedRtpStreamId::URI),
                announced: media
                    .ssrcs
                    .iter()
                    .map(|s| StreamConfig {
                        ssrc: s.ssrc,
                        rtx_ssrc: s.rtx_ssrc,
                    })
                    .collect(),
            },
            None => StreamIds::Signaled,
        },
        Demux::Unsignaled {
            by_mid,
            by_payload_type,
        } => StreamIds::Unsignaled {
            mid: ext(Mid::URI)
                .filter(|_| by_mid)
                .map(|id| (media.mid.clone(), id)),
            by_payload_type,
            payload_type: media.codec.payload_type,
            rtx_payload_type: media.codec.rtx_payload_type,
        },
    }
}

#[cfg(test)]
mod tests {
    use rtp_ext::codec::MediaKind;

    use super::*;
    use crate::node::sdp;

    const PUBLISHER_VP8: &str = include_str!("../sdp/fixtures/publisher_vp8.sdp");
    const FIREFOX_SIMULCAST: &str =
        include_str!("../sdp/fixtures/firefox153_publisher_simulcast.sdp");

    /// The video track the node publishes for the VP8 fixture with the lines starting with
    /// any of `cut` taken out.
    fn video_track(cut: &[&str]) -> TrackConfig {
        video_track_of(PUBLISHER_VP8, cut)
    }

    fn video_track_of(fixture: &str, cut: &[&str]) -> TrackConfig {
        let text: String = fixture
            .lines()
            .filter(|line| !cut.iter().any(|prefix| line.starts_with(prefix)))
            .map(|line| format!("{line}\r\n"))
            .collect();
        let offer = sdp::parse_offer(&text).expect("a browser's offer");
        let plan = sdp::negotiate_publisher(&offer).expect("served");
        let accepted: Vec<&PublishedMedia> =
            plan.sections.iter().filter_map(|s| s.accepted()).collect();
        let publisher = publisher_of(&accepted).expect("served");
        let video = publisher
            .tracks
            .into_iter()
            .find(|t| t.config.codec.kind() == MediaKind::Video);
        video.expect("a video track").config
    }

    #[test]
    fn a_publisher_gets_remb_only_when_it_negotiated_remb_without_transport_wide_cc() {
        let both = video_track(&[]);
        assert_eq!(both.transport_cc, Some(TransportCc { ext_id: 3 }));
        assert_eq!(both.remb, None);
        let twcc = "a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc";
        let remb_only = video_track(&[twcc, "a=rtcp-fb:96 transport-cc"]);
        assert_eq!(remb_only.transport_cc, None);
        assert_eq!(
            remb_only.remb,
            Some(PublisherRemb {
                abs_send_time_ext_id: 2
            })
        );
        let neither = video_track(&[twcc, "a=rtcp-fb:96 goog-remb"]);
        assert_eq!((neither.transport_cc, neither.remb), (None, None));
        let no_send_time = video_track(&[
            twcc,
            "a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs",
        ]);
        assert_eq!(no_send_time.remb, None);
    }

    /// Firefox announces each simulcast stream's SSRCs beside its rid: the track still has a
    /// stream per rid, bound by rid, and each announced RTX SSRC comes with its media SSRC.
    #[test]
    fn a_simulcast_offer_with_ssrcs_publishes_a_stream_per_rid() {
        let track = video_track_of(FIREFOX_SIMULCAST, &[]);
        assert_eq!(track.streams.len(), 3);
        let StreamIds::Rids {
            rids, announced, ..
        } = &track.stream_ids
        else {
            panic!("bound by rid: {:?}", track.stream_ids);
        };
        assert_eq!(rids.as_slice(), ["q", "h", "f"]);
        let fids: Vec<StreamConfig> = FIREFOX_SIMULCAST
            .lines()
            .filter_map(|l| l.strip_prefix("a=ssrc-group:FID "))
            .map(|pair| {
                let (ssrc, rtx) = pair.split_once(' ').expect("two SSRCs");
                StreamConfig {
                    ssrc: ssrc.parse().expect("an SSRC"),
                    rtx_ssrc: Some(rtx.parse().expect("an SSRC")),
                }
            })
            .collect();
        assert_eq!(announced.as_slice(), fids.as_slice());
    }
}
