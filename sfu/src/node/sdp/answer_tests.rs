//! Answers written: the transport, the codecs and streams each side gets, read back with the
//! SDP crate and with our parser, for hand-made plans and generated ones.

use proptest::prelude::*;

use super::*;

#[test]
fn publisher_answer_has_the_transport_and_the_av1_codec() {
    let answer = publisher_answer(PUBLISHER_AV1);
    let lines = lines(&answer);
    for expected in [
        "v=0",
        "s=-",
        "t=0 0",
        "a=group:BUNDLE 0 1",
        "a=ice-lite",
        "a=extmap-allow-mixed",
        "a=msid-semantic: WMS *",
        "m=video 9 UDP/TLS/RTP/SAVPF 45 46",
        "c=IN IP4 0.0.0.0",
        "a=setup:passive",
        "a=recvonly",
        "a=rtcp-mux",
        "a=rtcp-rsize",
        &format!("a=fingerprint:sha-256 {OUR_FINGERPRINT}"),
        &format!("a=extmap:{DD_ID} {}", dd::URI),
        "a=rtpmap:45 AV1/90000",
        "a=fmtp:45 level-idx=5;profile=0;tier=0;x-google-min-bitrate=2500;x-google-start-bitrate=2500",
        "a=rtpmap:46 rtx/90000",
        "a=fmtp:46 apt=45",
        "a=rtcp-fb:45 nack pli",
        "a=candidate:1 1 udp 2130706431 127.0.0.1 40000 typ host",
        "a=candidate:2 1 udp 2130706430 ::1 40001 typ host",
        "a=candidate:3 1 tcp 2124414975 127.0.0.1 40000 typ host tcptype passive",
        "a=end-of-candidates",
        "m=audio 9 UDP/TLS/RTP/SAVPF 111",
        "a=fmtp:111 minptime=10;useinbandfec=1",
    ] {
        assert!(lines.contains(&expected), "{expected} missing from\n{answer}");
    }
    assert!(lines[1].starts_with("o=- ") && lines[1].ends_with(" 2 IN IP4 127.0.0.1"));
    assert!(answer.ends_with("\r\n"));
    // The passive TCP candidate follows the UDP ones, as its priority does.
    let at = |line: &str| lines.iter().position(|l| l.starts_with(line));
    assert!(at("a=candidate:2 1 udp") < at("a=candidate:3 1 tcp"));
    assert!(at("a=candidate:3 1 tcp") < at("a=end-of-candidates"));
}

#[test]
fn publisher_answer_reads_back_with_the_sdp_crate() {
    let answer = publisher_answer(PUBLISHER_AV1);
    let description =
        sdp::SessionDescription::unmarshal(&mut Cursor::new(answer.as_bytes())).unwrap();
    let [audio, video] = &description.media_descriptions[..] else {
        panic!("two sections: {answer}");
    };
    assert_eq!(audio.media_name.formats, ["111"]);
    assert_eq!(video.media_name.formats, ["45", "46"]);
    assert!(audio.has_attribute("recvonly") && video.has_attribute("recvonly"));
    assert_eq!(video.attribute("mid"), Some(Some("1")));
    assert!(description.has_attribute("ice-lite"));
}

#[test]
fn simulcast_answer_receives_the_rids() {
    let answer = publisher_answer(PUBLISHER_SIMULCAST);
    for expected in [
        "a=rid:q recv",
        "a=rid:h recv",
        "a=rid:f recv",
        "a=simulcast:recv q;h;f",
    ] {
        assert!(
            lines(&answer).contains(&expected),
            "{expected} missing from\n{answer}"
        );
    }
    let read = parse_description(&answer).unwrap();
    assert_eq!(section(&read, MediaKind::Video).recv_rids, ["q", "h", "f"]);
}

#[test]
fn viewer_answer_announces_the_stream_with_its_rtx() {
    let plan = negotiate_viewer(
        &offer(VIEWER_RECVONLY),
        &[RoomCodec {
            codec: Codec::Vp8,
            fmtp: String::new(),
        }],
    )
    .unwrap();
    let media = AnswerMedia::for_viewer(&plan, |media| {
        (media.kind == MediaKind::Video).then(|| SendSource {
            ssrc: 1111,
            rtx_ssrc: Some(2222),
            cname: "strata".to_owned(),
            stream_id: "room".to_owned(),
            track_id: "video".to_owned(),
        })
    });
    let answer = build_answer(&params(media, plan.extmap_allow_mixed));
    for expected in [
        "a=sendonly",
        "a=msid:room video",
        "a=ssrc-group:FID 1111 2222",
        "a=ssrc:1111 cname:strata",
        "a=ssrc:2222 cname:strata",
        "a=ssrc:2222 msid:room video",
        "a=rtpmap:96 VP8/90000",
        "a=fmtp:96 x-google-min-bitrate=2500;x-google-start-bitrate=2500",
    ] {
        let present = lines(&answer).contains(&expected);
        // The bitrate pin is for publishers only.
        assert_eq!(
            present,
            !expected.starts_with("a=fmtp:96"),
            "{expected} in\n{answer}"
        );
    }
    let read = parse_description(&answer).unwrap();
    let video = section(&read, MediaKind::Video);
    assert_eq!(video.direction, Direction::SendOnly);
    assert_eq!(
        video.ssrcs,
        [SsrcInfo {
            ssrc: 1111,
            rtx_ssrc: Some(2222),
            cname: Some("strata".to_owned()),
            msid: Some("room video".to_owned()),
        }]
    );
    assert!(
        section(&read, MediaKind::Audio).ssrcs.is_empty(),
        "no audio source yet"
    );
}

#[test]
fn rtx_ssrc_is_left_out_when_the_viewer_has_no_rtx() {
    let plan = negotiate_viewer(&offer(VIEWER_RECVONLY), &[]).unwrap();
    let media = AnswerMedia::for_viewer(&plan, |_| {
        Some(SendSource {
            ssrc: 1111,
            rtx_ssrc: Some(2222),
            cname: "strata".to_owned(),
            stream_id: "room".to_owned(),
            track_id: "track".to_owned(),
        })
    });
    let answer = build_answer(&params(media, false));
    let read = parse_description(&answer).unwrap();
    let audio = section(&read, MediaKind::Audio);
    assert_eq!(
        audio.codecs[0].rtx_payload_type, None,
        "Opus is offered without RTX"
    );
    assert_eq!(audio.ssrcs[0].rtx_ssrc, None, "{answer}");
    let video = section(&read, MediaKind::Video);
    assert_eq!(video.ssrcs[0].rtx_ssrc, Some(2222));
}

#[test]
fn refused_sections_are_answered_inactive_inside_bundle() {
    let mut offer = offer(PUBLISHER_VP8);
    offer.media[0].direction = Direction::Inactive;
    let plan = negotiate_publisher(&offer).unwrap();
    let answer = build_answer(&params(AnswerMedia::for_publisher(&plan), false));
    let lines = lines(&answer);
    assert!(
        lines.contains(&"m=audio 9 UDP/TLS/RTP/SAVPF 111"),
        "{answer}"
    );
    assert!(lines.contains(&"a=group:BUNDLE 0 1"));
    assert!(!lines.contains(&"a=extmap-allow-mixed"));
    let read = parse_description(&answer).unwrap();
    assert!(!read.media[0].rejected && !read.media[1].rejected);
    assert_eq!(read.media[0].mid, "0");
    assert_eq!(read.media[0].direction, Direction::Inactive);
    assert_eq!(payload_types(&read.media[0].codecs), [111]);
}

#[test]
fn ice_credentials_are_random_ice_chars() {
    let (ufrag, pwd) = random_ice_credentials();
    assert_eq!((ufrag.len(), pwd.len()), (8, 24));
    assert!(ufrag
        .bytes()
        .chain(pwd.bytes())
        .all(|b| ICE_CHARS.contains(&b)));
    assert_ne!(random_ice_credentials().1, pwd);
}

/// The header extensions a generated plan draws from.
const URIS: [&str; 7] = [
    dd::URI,
    "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time",
    TWCC_URI,
    "urn:ietf:params:rtp-hdrext:sdes:mid",
    "urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id",
    "urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id",
    "urn:ietf:params:rtp-hdrext:ssrc-audio-level",
];

fn codec_strategy() -> impl Strategy<Value = OfferedCodec> {
    let codec = prop_oneof![
        Just((Codec::Vp8, "")),
        Just((Codec::Vp9, "profile-id=0")),
        Just((Codec::Av1, "level-idx=5;profile=0;tier=0")),
        Just((Codec::H264, "packetization-mode=1;profile-level-id=42e01f")),
        Just((Codec::Opus, "minptime=10;useinbandfec=1")),
    ];
    (codec, 96u8..128, proptest::option::of(0u8..96)).prop_map(|((codec, fmtp), pt, rtx)| {
        let audio = codec.kind() == MediaKind::Audio;
        OfferedCodec {
            payload_type: pt,
            codec,
            clock_rate: if audio { 48_000 } else { 90_000 },
            channels: audio.then_some(2),
            fmtp: fmtp.to_owned(),
            rtx_payload_type: rtx,
            feedback: vec!["nack".to_owned(), "transport-cc".to_owned()],
        }
    })
}

fn published_strategy() -> impl Strategy<Value = PublishedMedia> {
    let ids = Just((1u8..=14).collect::<Vec<_>>()).prop_shuffle();
    let uris = proptest::sample::subsequence(URIS.to_vec(), 0..=URIS.len());
    let rids = proptest::sample::subsequence(vec!["q", "h", "f"], 0..=3);
    (codec_strategy(), ids, uris, rids).prop_map(|(codec, ids, uris, rids)| PublishedMedia {
        mid: String::new(),
        kind: codec.codec.kind(),
        codec,
        extensions: uris
            .iter()
            .zip(ids)
            .map(|(uri, id)| Extmap {
                id,
                uri: (*uri).to_owned(),
            })
            .collect(),
        ssrcs: Vec::new(),
        demux: if rids.is_empty() {
            Demux::Ssrc
        } else {
            Demux::Rid
        },
        rids: rids.iter().map(|r| (*r).to_owned()).collect(),
    })
}

proptest! {
    #[test]
    fn answers_read_back(mut media in proptest::collection::vec(published_strategy(), 1..4)) {
        for (index, section) in media.iter_mut().enumerate() {
            section.mid = index.to_string();
        }
        let plan = PublisherPlan {
            extmap_allow_mixed: true,
            sections: media.iter().cloned().map(Section::Accepted).collect(),
        };
        let answer = build_answer(&params(AnswerMedia::for_publisher(&plan), true));
        let read = parse_offer(&answer).unwrap();
        prop_assert_eq!(read.bundle_mids.len(), media.len());
        prop_assert_eq!(read.media.len(), media.len());
        for (sent, read) in media.iter().zip(&read.media) {
            prop_assert_eq!(&read.mid, &sent.mid);
            prop_assert_eq!(read.direction, Direction::RecvOnly);
            prop_assert_eq!(&read.extensions, &sent.extensions);
            prop_assert_eq!(&read.recv_rids, &sent.rids);
            let [codec] = &read.codecs[..] else {
                return Err(TestCaseError::fail(format!("one codec in {answer}")));
            };
            prop_assert_eq!(codec.payload_type, sent.codec.payload_type);
            prop_assert_eq!(codec.rtx_payload_type, sent.codec.rtx_payload_type);
            prop_assert_eq!(codec.codec, sent.codec.codec);
            prop_assert_eq!(&codec.feedback, &sent.codec.feedback);
        }
    }
}
