//! Offers read: what each line of a browser's offer becomes, the forms browsers do not write,
//! and what is not SDP; no input makes the parser panic.

use proptest::prelude::*;

use super::*;

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
}

const CHROMIUM_PUBLISHER: &str = include_str!("fixtures/chromium156_publisher_av1_l3t3.sdp");
const CHROMIUM_SIMULCAST: &str = include_str!("fixtures/chromium156_publisher_simulcast.sdp");
const CHROMIUM_VIEWER: &str = include_str!("fixtures/chromium156_viewer_recvonly.sdp");

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
