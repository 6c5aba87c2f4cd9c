//! Offers negotiated: what a publisher and a viewer are given of what they offered.

use super::*;

#[test]
fn publisher_gets_opus_and_the_first_supported_video_codec() {
    let plan = negotiate_publisher(&offer(PUBLISHER_VP8)).unwrap();
    assert!(plan.extmap_allow_mixed);
    let [audio, video] = &accepted(&plan.sections)[..] else {
        panic!("two sections accepted: {plan:?}");
    };
    assert_eq!(
        (audio.kind, audio.codec.codec, audio.codec.payload_type),
        (MediaKind::Audio, Codec::Opus, 111)
    );
    assert_eq!(video.codec.codec, Codec::Vp8);
    assert_eq!(
        (video.codec.payload_type, video.codec.rtx_payload_type),
        (96, Some(97))
    );
    let ids: Vec<u8> = video.extensions.iter().map(|e| e.id).collect();
    assert_eq!(
        ids,
        [2, 3, 4, 10, 11, DD_ID],
        "toffset, orientation and timing dropped"
    );
    assert_eq!(video.ssrcs[0].rtx_ssrc, Some(VIDEO_RTX_SSRC));
    assert_eq!(video.extension_id(dd::URI), Some(DD_ID));

    let av1 = negotiate_publisher(&offer(PUBLISHER_AV1)).unwrap();
    let video = &accepted(&av1.sections)[1];
    assert_eq!(
        (video.codec.codec, video.codec.payload_type),
        (Codec::Av1, 45)
    );
}

#[test]
fn publisher_feedback_is_cut_to_what_the_engine_uses() {
    // Feedback the engine has no part in, and a line written twice.
    let text = PUBLISHER_VP8.replacen(
        "a=rtcp-fb:96 goog-remb",
        "a=rtcp-fb:96 ack rpsi\na=rtcp-fb:* nack\na=rtcp-fb:96 goog-remb",
        1,
    );
    assert_ne!(text, PUBLISHER_VP8, "the fixture has the line");
    let plan = negotiate_publisher(&offer(&text)).unwrap();
    let video = &accepted(&plan.sections)[1];
    assert_eq!(video.codec.feedback.len(), 5);
    assert!(!video.codec.feedback.iter().any(|f| f == "ack rpsi"));
}

#[test]
fn unsupported_video_rejects_only_its_section() {
    let mut offer = offer(PUBLISHER_VP8);
    offer.media[1].codecs.retain(|c| c.codec == Codec::H264);
    for codec in &mut offer.media[1].codecs {
        codec.fmtp = "packetization-mode=2;profile-level-id=42e01f".to_owned();
    }
    let plan = negotiate_publisher(&offer).unwrap();
    assert!(plan.sections[0].accepted().is_some());
    let Section::Rejected {
        mid,
        reason,
        inactive,
        ..
    } = &plan.sections[1]
    else {
        panic!("H.264 packetization-mode=2 only: {:?}", plan.sections[1]);
    };
    assert_eq!(mid, "1");
    assert!(reason.contains("no supported codec"), "{reason}");
    let inactive = inactive
        .as_ref()
        .expect("a bundled video section stays inactive");
    assert_eq!(inactive.codec.codec, Codec::H264);
    assert!(inactive.codec.feedback.is_empty() && inactive.codec.rtx_payload_type.is_none());
}

#[test]
fn a_publisher_offer_that_sends_nothing_fails() {
    let error = negotiate_publisher(&offer(VIEWER_RECVONLY)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "no usable media: mid 0: recvonly, nothing to receive; mid 1: recvonly, nothing to receive"
    );
}

#[test]
fn sections_outside_bundle_or_refused_are_rejected() {
    let mut offer = offer(PUBLISHER_VP8);
    offer.bundle_mids.retain(|mid| mid != "1");
    offer.media[0].rejected = true;
    let error = negotiate_publisher(&offer).unwrap_err();
    assert_eq!(
        error,
        SdpError::NoUsableMedia("mid 0: port 0; mid 1: not in the BUNDLE group".to_owned())
    );
}

#[test]
fn viewer_of_an_empty_room_keeps_every_supported_codec() {
    let plan = negotiate_viewer(&offer(VIEWER_RECVONLY), &[]).unwrap();
    assert!(plan.extmap_allow_mixed);
    let [audio, video] = &accepted(&plan.sections)[..] else {
        panic!("two sections accepted: {plan:?}");
    };
    assert_eq!(payload_types(&audio.codecs), [111]);
    // Every VP9 profile, and H.264 in both packetization modes, in the offer's order.
    assert_eq!(
        payload_types(&video.codecs),
        [96, 102, 104, 106, 108, 127, 39, 45, 98, 100, 112]
    );
    assert_eq!(video.dependency_descriptor_id, Some(DD_ID));
    assert_eq!(video.transport_cc_id, Some(3));
    assert!(video.transport_cc_feedback && video.remb_feedback);
    assert!(
        !video.extensions.iter().any(|e| e.uri.contains("stream-id")),
        "no RIDs toward a viewer"
    );
    assert!(!audio.remb_feedback && audio.transport_cc_feedback);
}

#[test]
fn viewer_gets_the_rooms_codec_with_its_own_payload_types() {
    let room = |codec, fmtp: &str| RoomCodec {
        codec,
        fmtp: fmtp.to_owned(),
    };
    let cases = [
        (room(Codec::Vp9, "profile-id=0"), 98, 99),
        (room(Codec::Av1, ""), 45, 46),
        (
            room(Codec::H264, "packetization-mode=1;profile-level-id=42E01F"),
            106,
            107,
        ),
        (
            room(Codec::H264, "profile-level-id=42001f;packetization-mode=1"),
            102,
            103,
        ),
        (
            room(Codec::H264, "profile-level-id=640028;packetization-mode=1"),
            112,
            113,
        ),
    ];
    for (published, payload_type, rtx) in cases {
        let plan =
            negotiate_viewer(&offer(VIEWER_RECVONLY), std::slice::from_ref(&published)).unwrap();
        let Some(video) = plan.sections[1].accepted() else {
            panic!("{published:?}: {:?}", plan.sections[1]);
        };
        let codec = video.codec().unwrap();
        assert_eq!(
            (
                video.codecs.len(),
                codec.payload_type,
                codec.rtx_payload_type
            ),
            (1, payload_type, Some(rtx)),
            "{published:?}"
        );
    }
}

#[test]
fn viewer_without_the_rooms_codec_gets_no_video() {
    let room = [RoomCodec {
        codec: Codec::H264,
        fmtp: "profile-level-id=f4001f;packetization-mode=1".to_owned(),
    }];
    let plan = negotiate_viewer(&offer(VIEWER_RECVONLY), &room).unwrap();
    assert!(plan.sections[0].accepted().is_some(), "audio still served");
    assert!(
        matches!(&plan.sections[1], Section::Rejected { reason, .. } if reason.contains("room"))
    );
    assert!(matches!(
        negotiate_viewer(&offer(PUBLISHER_VP8), &[]),
        Err(SdpError::NoUsableMedia(_))
    ));
}
