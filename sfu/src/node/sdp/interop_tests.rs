//! Offers as GStreamer's webrtcbin writes them (captured from GStreamer 1.22: an x264 H.264
//! publisher, and a VP8 + Opus publisher that offers before its encoders have caps, so
//! without `a=ssrc`), and the answers a client that is not a browser needs: refused sections
//! inactive inside the bundle, and the transport attributes in every section.

use std::io::Cursor;

use proptest::prelude::*;
use rtp_ext::codec::{Codec, MediaKind};
use rtp_ext::ext::{HeaderExtension, Mid};
use sdp::SessionDescription;

use super::*;

const GSTREAMER_H264: &str = include_str!("fixtures/gstreamer_h264.sdp");
const GSTREAMER_BEFORE_CAPS: &str = include_str!("fixtures/gstreamer_before_caps.sdp");

fn room(codec: Codec, fmtp: &str) -> RoomCodec {
    RoomCodec {
        codec,
        fmtp: fmtp.to_owned(),
    }
}

/// The video codecs a Chromium viewer is answered with while the room publishes `room`.
fn viewer_video(room: &[RoomCodec]) -> Result<Vec<u8>, String> {
    let plan = negotiate_viewer(&offer(VIEWER_RECVONLY), room).unwrap();
    match &plan.sections[1] {
        Section::Accepted(video) => Ok(payload_types(&video.codecs)),
        Section::Rejected { reason, .. } => Err(reason.clone()),
    }
}

/// Every section of an answer carries what webrtcbin reads from each: the fingerprint, the
/// ICE credentials and the DTLS role. The session does not carry the fingerprint: Debian's
/// GStreamer 1.22 (1.22.0-4+deb12u7) refuses an answer that has it at both levels.
fn assert_transport_everywhere(answer: &str) {
    let description = SessionDescription::unmarshal(&mut Cursor::new(answer.as_bytes())).unwrap();
    let has = |attributes: &[sdp::description::common::Attribute], key: &str| {
        attributes.iter().any(|a| a.key == key)
    };
    assert!(!has(&description.attributes, "fingerprint"), "{answer}");
    for media in &description.media_descriptions {
        for key in ["fingerprint", "ice-ufrag", "ice-pwd", "setup", "mid"] {
            assert!(
                has(&media.attributes, key),
                "{key} in every section: {answer}"
            );
        }
    }
}

#[test]
fn an_x264_publisher_keeps_its_profile_level_id() {
    let plan = negotiate_publisher(&offer(GSTREAMER_H264)).unwrap();
    let video = plan.sections[0].accepted().expect("H.264 accepted");
    assert_eq!(video.codec.fmtp_param("profile-level-id"), Some("42c01e"));
    let answer = publisher_answer(GSTREAMER_H264);
    let read = parse_description(&answer).unwrap();
    let codec = &section(&read, MediaKind::Video).codecs[0];
    assert_eq!(codec.fmtp_param("profile-level-id"), Some("42c01e"));
    assert_eq!(codec.fmtp_param("packetization-mode"), Some("1"));
    assert_transport_everywhere(&answer);
}

#[test]
fn a_browser_viewer_decodes_x264_constrained_baseline() {
    let x264 = room(
        Codec::H264,
        "packetization-mode=1;profile-level-id=42c01e;level-asymmetry-allowed=1",
    );
    // 106 is 42e01f in mode 1; 42001f is Baseline, not Constrained Baseline, and the mode 0
    // formats cannot take FU-A packets.
    assert_eq!(viewer_video(std::slice::from_ref(&x264)), Ok(vec![106]));
    let mode_0 = room(Codec::H264, "packetization-mode=0;profile-level-id=42e01f");
    assert_eq!(viewer_video(&[mode_0]), Ok(vec![106, 108]));
    let high = room(Codec::H264, "packetization-mode=1;profile-level-id=640c1f");
    let reason = viewer_video(&[high]).unwrap_err();
    assert_eq!(
        reason,
        "mid 1: no offered codec decodes the room's H264 \
         profile-level-id=640c1f;packetization-mode=1"
    );
}

#[test]
fn vp9_and_av1_viewers_are_matched_by_profile() {
    let vp9 = |profile: &str| room(Codec::Vp9, &format!("profile-id={profile}"));
    assert_eq!(viewer_video(&[vp9("0")]), Ok(vec![98]));
    assert_eq!(viewer_video(&[vp9("2")]), Ok(vec![100]));
    assert!(viewer_video(&[vp9("1")]).is_err());
    assert_eq!(viewer_video(&[room(Codec::Av1, "")]), Ok(vec![45]));
    let reason = viewer_video(&[room(Codec::Av1, "profile=1")]).unwrap_err();
    assert!(reason.ends_with("AV1 profile=1"), "{reason}");
}

#[test]
fn an_offer_before_caps_is_told_apart_by_payload_type() {
    let offer = offer(GSTREAMER_BEFORE_CAPS);
    assert!(offer.media.iter().all(|m| m.ssrcs.is_empty()));
    let plan = negotiate_publisher(&offer).unwrap();
    let accepted = accepted(&plan.sections);
    assert_eq!(accepted.len(), 2, "{plan:?}");
    for media in &accepted {
        let unsignaled = Demux::Unsignaled {
            by_mid: false,
            by_payload_type: true,
        };
        assert_eq!(media.demux, unsignaled, "{}", media.mid);
    }
    let answer = publisher_answer(GSTREAMER_BEFORE_CAPS);
    assert!(lines(&answer).contains(&"a=group:BUNDLE video0 audio1"));
    assert_transport_everywhere(&answer);
}

#[test]
fn an_offer_before_caps_is_told_apart_by_mid_when_payload_types_are_shared() {
    // Opus moved to the video's payload type 96: only the mid can tell the streams apart.
    let shared = crlf(GSTREAMER_BEFORE_CAPS)
        .replace("SAVPF 111", "SAVPF 96")
        .replace(":111 ", ":96 ");
    let error = negotiate_publisher(&parse_offer(&shared).unwrap()).unwrap_err();
    assert_eq!(
        error,
        SdpError::Unidentifiable {
            mid: "video0".to_owned(),
            payload_type: 96
        }
    );
    assert!(
        error.to_string().contains("cannot be told apart"),
        "{error}"
    );
    let with_mid = shared.replace("a=mid:", &format!("a=extmap:4 {}\r\na=mid:", Mid::URI));
    let plan = negotiate_publisher(&parse_offer(&with_mid).unwrap()).unwrap();
    for media in accepted(&plan.sections) {
        let by_mid = Demux::Unsignaled {
            by_mid: true,
            by_payload_type: false,
        };
        assert_eq!(media.demux, by_mid);
    }
}

#[test]
fn a_section_the_room_cannot_feed_stays_inactive_in_the_bundle_with_its_reason() {
    let mut offer = offer(VIEWER_RECVONLY);
    // The video section first, as webrtcbin's bundle tag: it must stay in the bundle.
    offer.media.swap(0, 1);
    offer.media[0].codecs.retain(|c| c.codec == Codec::Vp8);
    let x264 = room(Codec::H264, "packetization-mode=1;profile-level-id=42c01e");
    let plan = negotiate_viewer(&offer, &[x264, room(Codec::Opus, "")]).unwrap();
    assert_eq!(
        refusals(&plan.sections),
        ["mid 1: no offered codec decodes the room's H264 \
          profile-level-id=42c01e;packetization-mode=1"]
    );
    let media = AnswerMedia::for_viewer(&plan, |_| None);
    let answer = build_answer(&params(media, true));
    let lines = lines(&answer);
    assert!(lines.contains(&"a=group:BUNDLE 1 0"), "{answer}");
    assert!(
        lines.contains(&"m=video 9 UDP/TLS/RTP/SAVPF 96"),
        "{answer}"
    );
    let read = parse_offer(&answer).unwrap();
    assert_eq!(read.media[0].direction, Direction::Inactive);
    assert_eq!(read.media[1].direction, Direction::SendOnly);
    assert_transport_everywhere(&answer);
}

#[test]
fn sections_outside_the_bundle_keep_port_zero_and_the_transport() {
    let mut offer = offer(PUBLISHER_VP8);
    offer.bundle_mids.retain(|mid| mid != "0");
    let plan = negotiate_publisher(&offer).unwrap();
    let Section::Rejected { inactive, .. } = &plan.sections[0] else {
        panic!("outside the bundle: {plan:?}");
    };
    assert_eq!(inactive, &None);
    let answer = build_answer(&params(AnswerMedia::for_publisher(&plan), false));
    let read = parse_description(&answer).unwrap();
    assert!(read.media[0].rejected, "{answer}");
    assert!(lines(&answer).contains(&"a=group:BUNDLE 1"));
    assert_transport_everywhere(&answer);
}

/// A plan section: accepted, inactive or port 0.
fn section_strategy() -> impl Strategy<Value = u8> {
    0u8..3
}

proptest! {
    #[test]
    fn answers_with_refused_sections_read_back(kinds in proptest::collection::vec(section_strategy(), 1..5)) {
        let template = negotiate_publisher(&offer(PUBLISHER_VP8)).unwrap();
        let video = template.sections[1].accepted().unwrap().clone();
        let sections: Vec<Section<PublishedMedia>> = kinds
            .iter()
            .enumerate()
            .map(|(index, kind)| {
                let mid = index.to_string();
                let inactive = InactiveMedia { kind: MediaKind::Video, codec: video.codec.clone() };
                match kind {
                    0 => Section::Accepted(PublishedMedia { mid, ..video.clone() }),
                    _ => Section::Rejected {
                        mid: mid.clone(),
                        media_type: "video".to_owned(),
                        proto: "UDP/TLS/RTP/SAVPF".to_owned(),
                        formats: vec!["96".to_owned()],
                        inactive: (*kind == 1).then_some(inactive),
                        reason: format!("mid {mid}: refused"),
                    },
                }
            })
            .collect();
        let plan = PublisherPlan { extmap_allow_mixed: true, sections };
        let answer = build_answer(&params(AnswerMedia::for_publisher(&plan), true));
        let read = parse_description(&answer).unwrap();
        let bundled: Vec<String> = kinds
            .iter()
            .enumerate()
            .filter(|(_, kind)| **kind != 2)
            .map(|(index, _)| index.to_string())
            .collect();
        prop_assert_eq!(&read.bundle_mids, &bundled);
        for (kind, media) in kinds.iter().zip(&read.media) {
            prop_assert_eq!(media.rejected, *kind == 2);
            let direction = if *kind == 0 { Direction::RecvOnly } else { Direction::Inactive };
            prop_assert_eq!(media.direction, direction);
            if *kind != 2 {
                prop_assert_eq!(payload_types(&media.codecs), vec![video.codec.payload_type]);
            }
        }
        assert_transport_everywhere(&answer);
    }
}
