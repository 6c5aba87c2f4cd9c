//! Offers for WHIP and WHEP (hand-made in Chromium's form, three Chromium 156 wrote and one
//! Firefox ESR 153 wrote: see `fixtures/PROVENANCE.md`), the plans made from them and the
//! answers written, read back both with the SDP crate and with [`parse_description`].

use std::io::Cursor;
use std::net::SocketAddr;

use proptest::prelude::*;
use rtp_ext::codec::{Codec, MediaKind};
use rtp_ext::dd;

use super::*;

#[path = "firefox_tests.rs"]
mod firefox;
#[path = "interop_tests.rs"]
mod interop;

const PUBLISHER_VP8: &str = include_str!("fixtures/publisher_vp8.sdp");
const PUBLISHER_AV1: &str = include_str!("fixtures/publisher_av1.sdp");
const PUBLISHER_SIMULCAST: &str = include_str!("fixtures/publisher_simulcast.sdp");
const VIEWER_RECVONLY: &str = include_str!("fixtures/viewer_recvonly.sdp");

const DD_ID: u8 = 9;
const TWCC_URI: &str = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01";
const VIDEO_SSRC: u32 = 2_831_756_498;
const VIDEO_RTX_SSRC: u32 = 3_126_541_231;
const CNAME: &str = "Lq3n8zX2Yb9mT0pA";
const OUR_FINGERPRINT: &str = "AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99";

/// The fixture with CRLF line ends, as a browser sends it.
fn crlf(fixture: &str) -> String {
    fixture.replace("\r\n", "\n").replace('\n', "\r\n")
}

fn offer(fixture: &str) -> Offer {
    parse_offer(&crlf(fixture)).unwrap()
}

fn section(offer: &Offer, kind: MediaKind) -> &OfferedMedia {
    offer.media.iter().find(|m| m.kind == Some(kind)).unwrap()
}

fn payload_types(codecs: &[OfferedCodec]) -> Vec<u8> {
    codecs.iter().map(|c| c.payload_type).collect()
}

fn without_lines(fixture: &str, prefix: &str) -> String {
    crlf(fixture)
        .split_inclusive("\r\n")
        .filter(|line| !line.starts_with(prefix))
        .collect()
}

fn accepted<T: Clone>(sections: &[Section<T>]) -> Vec<T> {
    sections
        .iter()
        .filter_map(|s| s.accepted().cloned())
        .collect()
}

fn params(media: Vec<AnswerMedia>, extmap_allow_mixed: bool) -> AnswerParams {
    let (ice_ufrag, ice_pwd) = random_ice_credentials();
    AnswerParams {
        ice_ufrag,
        ice_pwd,
        fingerprint: OUR_FINGERPRINT.to_owned(),
        candidates: vec![
            "127.0.0.1:40000".parse().unwrap(),
            "[::1]:40001".parse::<SocketAddr>().unwrap(),
        ],
        extmap_allow_mixed,
        video_fmtp_suffix: Some("x-google-min-bitrate=2500;x-google-start-bitrate=2500".to_owned()),
        media,
        origin: None,
    }
}

fn publisher_answer(fixture: &str) -> String {
    let plan = negotiate_publisher(&offer(fixture)).unwrap();
    build_answer(&params(
        AnswerMedia::for_publisher(&plan),
        plan.extmap_allow_mixed,
    ))
}

fn lines(sdp: &str) -> Vec<&str> {
    sdp.lines().collect()
}

#[test]
fn publisher_offer_reads_session_and_audio() {
    let offer = offer(PUBLISHER_VP8);
    assert_eq!(offer.ice_ufrag, "Wz3v");
    assert_eq!(offer.ice_pwd, "0Yb2ZC1nK7dEJtX6wqVwXbKh");
    assert_eq!(offer.fingerprint.algorithm, "sha-256");
    assert!(offer.fingerprint.value.starts_with("9C:5E:41"));
    assert!(offer.extmap_allow_mixed);
    assert_eq!(offer.bundle_mids, ["0", "1"]);
    assert_eq!(offer.media.len(), 2);

    let audio = section(&offer, MediaKind::Audio);
    assert_eq!(audio.mid, "0");
    assert_eq!(audio.direction, Direction::SendOnly);
    assert!(!audio.rejected);
    // red, CN and telephone-event are not codecs the node knows.
    assert_eq!(payload_types(&audio.codecs), [111, 9, 0, 8]);
    let opus = &audio.codecs[0];
    assert_eq!(opus.codec, Codec::Opus);
    assert_eq!((opus.clock_rate, opus.channels), (48_000, Some(2)));
    assert_eq!(opus.fmtp, "minptime=10;useinbandfec=1");
    assert_eq!(opus.feedback, ["transport-cc"]);
    assert_eq!(opus.rtx_payload_type, None);
    assert_eq!(audio.extensions.len(), 4);
    assert_eq!(audio.ssrcs.len(), 1);
    assert_eq!(audio.ssrcs[0].ssrc, 1_502_939_553);
    assert_eq!(audio.ssrcs[0].cname.as_deref(), Some(CNAME));
}

#[test]
fn publisher_offer_reads_video_codecs_extensions_and_ssrcs() {
    let offer = offer(PUBLISHER_VP8);
    let video = section(&offer, MediaKind::Video);
    assert_eq!(video.direction, Direction::SendOnly);
    // RTX, RED, ulpfec and flexfec are left out; the m= line's order is kept.
    assert_eq!(
        payload_types(&video.codecs),
        [96, 102, 104, 106, 108, 127, 39, 45, 98, 100, 112]
    );
    let rtx: Vec<Option<u8>> = video.codecs.iter().map(|c| c.rtx_payload_type).collect();
    assert_eq!(rtx[..3], [Some(97), Some(103), Some(105)]);
    let vp9 = video.codecs.iter().find(|c| c.payload_type == 98).unwrap();
    assert_eq!(
        (vp9.codec, vp9.fmtp_param("profile-id")),
        (Codec::Vp9, Some("0"))
    );
    assert_eq!(vp9.rtx_payload_type, Some(99));
    let av1 = video.codecs.iter().find(|c| c.codec == Codec::Av1).unwrap();
    assert_eq!((av1.payload_type, av1.rtx_payload_type), (45, Some(46)));
    let h264 = video.codecs.iter().find(|c| c.payload_type == 106).unwrap();
    assert_eq!(h264.fmtp_param("profile-level-id"), Some("42e01f"));
    assert_eq!(h264.fmtp_param("packetization-mode"), Some("1"));
    assert_eq!(
        video.codecs[0].feedback,
        ["goog-remb", "transport-cc", "ccm fir", "nack", "nack pli"]
    );
    assert_eq!(video.extensions.len(), 12);
    assert!(video.extensions.contains(&Extmap {
        id: DD_ID,
        uri: dd::URI.to_owned()
    }));
    assert_eq!(
        video.ssrcs,
        [SsrcInfo {
            ssrc: VIDEO_SSRC,
            rtx_ssrc: Some(VIDEO_RTX_SSRC),
            cname: Some(CNAME.to_owned()),
            msid: Some(
                "b1f6c7a0-5d2e-4f3a-9c8b-7e6d5c4b3a21 8c7b6a59-4e3d-4c2b-a190-fedcba987654"
                    .to_owned()
            ),
        }]
    );
    assert!(video.send_rids.is_empty());
}

#[test]
fn simulcast_offer_reads_rids_without_ssrcs() {
    let offer = offer(PUBLISHER_SIMULCAST);
    let video = section(&offer, MediaKind::Video);
    assert_eq!(video.send_rids, ["q", "h", "f"]);
    assert!(video.recv_rids.is_empty());
    assert!(video.ssrcs.is_empty());
}

#[test]
fn simulcast_order_comes_from_the_simulcast_line_without_paused_streams() {
    let text =
        crlf(PUBLISHER_SIMULCAST).replace("a=simulcast:send q;h;f", "a=simulcast:send f,h;~h;q");
    let offer = parse_offer(&text).unwrap();
    assert_eq!(section(&offer, MediaKind::Video).send_rids, ["f", "q"]);
}

#[test]
fn viewer_offer_is_recvonly_without_sources() {
    let offer = offer(VIEWER_RECVONLY);
    for media in &offer.media {
        assert_eq!(media.direction, Direction::RecvOnly);
        assert!(media.ssrcs.is_empty());
    }
}

#[test]
fn written_forms_chromium_does_not_use_are_read() {
    let text = without_lines(PUBLISHER_VP8, "a=sendonly")
        .replace("a=extmap:9 ", "a=extmap:9/sendonly ")
        .replacen("m=audio 9 ", "m=audio 0 ", 1)
        .replacen("a=mid:0\r\n", "a=mid:0\r\na=bundle-only\r\n", 1);
    let offer = parse_offer(&text).unwrap();
    assert!(
        offer
            .media
            .iter()
            .all(|m| m.direction == Direction::SendRecv),
        "sendrecv without a direction attribute"
    );
    let video = section(&offer, MediaKind::Video);
    assert!(video.extensions.contains(&Extmap {
        id: DD_ID,
        uri: dd::URI.to_owned()
    }));
    assert!(
        !offer.media[0].rejected,
        "port 0 with bundle-only is not a refusal"
    );
}

#[test]
fn line_ends_do_not_matter() {
    assert_eq!(parse_offer(PUBLISHER_AV1).unwrap(), offer(PUBLISHER_AV1));
}

#[test]
fn session_level_credentials_and_fingerprint_are_accepted() {
    let media_level = offer(PUBLISHER_VP8);
    let moved = without_lines(PUBLISHER_VP8, "a=ice-").replace(
        "a=group:BUNDLE 0 1\r\n",
        "a=group:BUNDLE 0 1\r\na=ice-ufrag:Sess\r\na=ice-pwd:sessionpasswordsessionpw\r\n",
    );
    let moved = without_lines(&moved, "a=fingerprint")
        .replace("a=group:", "a=fingerprint:sha-256 01:02\r\na=group:");
    let session_level = parse_offer(&moved).unwrap();
    assert_eq!(session_level.ice_ufrag, "Sess");
    assert_eq!(session_level.ice_pwd, "sessionpasswordsessionpw");
    assert_eq!(session_level.fingerprint.value, "01:02");
    assert_eq!(session_level.media, media_level.media);
}

#[test]
fn malformed_offers_say_what_is_wrong() {
    let cases = [
        ("hello".to_owned(), SdpError::NotSdp(1)),
        (
            "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\n\r\ns=-".to_owned(),
            SdpError::NotSdp(3),
        ),
        (
            without_lines(PUBLISHER_VP8, "a=ice-ufrag"),
            SdpError::NoIceUfrag,
        ),
        (
            without_lines(PUBLISHER_VP8, "a=ice-pwd"),
            SdpError::NoIcePwd,
        ),
        (
            without_lines(PUBLISHER_VP8, "a=fingerprint"),
            SdpError::NoFingerprint,
        ),
        (without_lines(PUBLISHER_VP8, "a=group"), SdpError::NoBundle),
        (without_lines(PUBLISHER_VP8, "a=mid"), SdpError::NoMid(0)),
        (
            "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=ice-ufrag:x\r\n".to_owned(),
            SdpError::NoMedia,
        ),
        (
            crlf(PUBLISHER_VP8).replace("a=extmap:4 ", "a=extmap:0 "),
            SdpError::BadAttribute {
                attribute: "extmap",
                value: "0 urn:ietf:params:rtp-hdrext:sdes:mid".to_owned(),
            },
        ),
        (
            crlf(PUBLISHER_VP8).replace("a=rtpmap:96 VP8/90000", "a=rtpmap:96 VP8"),
            SdpError::BadAttribute {
                attribute: "rtpmap",
                value: "96 VP8".to_owned(),
            },
        ),
    ];
    for (text, error) in cases {
        assert_eq!(parse_offer(&text), Err(error));
    }
    assert_eq!(
        SdpError::NotSdp(3).to_string(),
        "not SDP: line 3",
        "the reason is the HTTP 400 body"
    );
}

#[test]
fn out_of_order_lines_are_not_sdp() {
    let text = crlf(PUBLISHER_VP8).replacen("s=-\r\n", "", 1);
    let error = parse_offer(&text).unwrap_err();
    assert!(matches!(error, SdpError::Syntax(_)));
    assert!(error.to_string().starts_with("not SDP: "), "{error}");
}

#[test]
fn bodies_above_64_kib_are_refused() {
    let padding = "a=x-padding:0123456789abcdef\r\n".repeat(MAX_SDP_LEN / 30);
    let text = crlf(PUBLISHER_VP8) + &padding;
    let too_large = SdpError::TooLarge {
        len: text.len(),
        limit: MAX_SDP_LEN,
    };
    assert_eq!(parse_offer(&text), Err(too_large));
    assert_eq!(
        SdpError::TooLarge {
            len: 70_000,
            limit: MAX_SDP_LEN
        }
        .to_string(),
        "SDP of 70000 bytes is above the limit of 65536 bytes"
    );
    // A participant's offer may be larger, up to its own limit.
    assert!(parse_offer_within(&text, MAX_PARTICIPANT_SDP_LEN).is_ok());
}

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
    let mut offer = offer(PUBLISHER_VP8);
    offer.media[1].codecs[0]
        .feedback
        .push("ack rpsi".to_owned());
    let plan = negotiate_publisher(&offer).unwrap();
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
        "a=end-of-candidates",
        "m=audio 9 UDP/TLS/RTP/SAVPF 111",
        "a=fmtp:111 minptime=10;useinbandfec=1",
    ] {
        assert!(lines.contains(&expected), "{expected} missing from\n{answer}");
    }
    assert!(lines[1].starts_with("o=- ") && lines[1].ends_with(" 2 IN IP4 127.0.0.1"));
    assert!(answer.ends_with("\r\n"));
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
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = parse_offer(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn damaged_offers_never_panic(at in 0usize..6000, cut in 0usize..64, insert in "[ -~\r\n]{0,40}") {
        let mut text = crlf(PUBLISHER_SIMULCAST);
        let at = at.min(text.len());
        let end = (at + cut).min(text.len());
        text.replace_range(at..end, &insert);
        let _ = parse_offer(&text);
    }

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

const CHROMIUM_PUBLISHER: &str = include_str!("fixtures/chromium156_publisher_av1_l3t3.sdp");
const CHROMIUM_SIMULCAST: &str = include_str!("fixtures/chromium156_publisher_simulcast.sdp");
const CHROMIUM_VIEWER: &str = include_str!("fixtures/chromium156_viewer_recvonly.sdp");

/// The values after `prefix` on the lines of the video section of `sdp` that start with it.
fn video_lines<'a>(sdp: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> {
    sdp.lines()
        .skip_while(|l| !l.starts_with("m=video"))
        .filter_map(move |l| l.strip_prefix(prefix))
}

/// Offers Chromium 156 wrote (fixtures/PROVENANCE.md). Each expectation is read off the
/// offer's own lines, so what the parser makes of them is checked against the browser's text.
#[test]
fn offers_chromium_wrote_are_read_as_their_lines_say() {
    let text = CHROMIUM_PUBLISHER;
    let publisher = offer(text);
    let video = section(&publisher, MediaKind::Video);
    assert_eq!(video.direction, Direction::SendOnly);
    let dd_id: Vec<u8> = video_lines(text, "a=extmap:")
        .filter_map(|l| l.strip_suffix(&format!(" {}", dd::URI)))
        .map(|id| id.parse().unwrap())
        .collect();
    assert_eq!(dd_id.len(), 1, "one DD extmap in the offer");
    assert!(video.extensions.contains(&Extmap {
        id: dd_id[0],
        uri: dd::URI.to_owned()
    }));
    // The m= line's media codecs, in its order: its RTX, RED and FEC formats are left out.
    let m_line = video_lines(text, "m=video 9 UDP/TLS/RTP/SAVPF ")
        .next()
        .unwrap();
    let codec_of = |pt: &str| {
        video_lines(text, &format!("a=rtpmap:{pt} "))
            .next()
            .map(|name| name.split('/').next().unwrap().to_owned())
    };
    let media: Vec<u8> = m_line
        .split(' ')
        .filter(|pt| {
            codec_of(pt).is_some_and(|c| ["VP8", "VP9", "AV1", "H264"].contains(&c.as_str()))
        })
        .map(|pt| pt.parse().unwrap())
        .collect();
    assert_eq!(payload_types(&video.codecs), media);
    let plan = negotiate_publisher(&publisher).unwrap();
    assert!(plan.extmap_allow_mixed, "{text}");
    let video = &accepted(&plan.sections)[1];
    assert_eq!(
        video.codec.payload_type, media[0],
        "the first the browser lists"
    );
    assert_eq!(video.extension_id(dd::URI), Some(dd_id[0]));

    let rids: Vec<&str> = video_lines(CHROMIUM_SIMULCAST, "a=rid:")
        .map(|l| l.strip_suffix(" send").unwrap())
        .collect();
    let simulcast = offer(CHROMIUM_SIMULCAST);
    let video = section(&simulcast, MediaKind::Video);
    assert_eq!(video.send_rids, rids);
    assert!(video.ssrcs.is_empty());

    // A recvonly offer names no sources and, as design/browser-tests.md says, no DD.
    assert!(!CHROMIUM_VIEWER.contains(dd::URI));
    let viewer = offer(CHROMIUM_VIEWER);
    for media in &viewer.media {
        assert_eq!(media.direction, Direction::RecvOnly);
        assert!(media.ssrcs.is_empty());
    }
    assert!(negotiate_viewer(&viewer, &[]).is_ok());
}
