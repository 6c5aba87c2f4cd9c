//! What an offer may list: each section's payload types, sources and rids within their
//! bounds (each is looked through per line, so more would cost the node per line squared),
//! a payload type or a feedback line listed again read once, mids unique, and a BUNDLE group
//! no longer than the media.

use super::*;

/// The VP8 fixture with its video `m=` line's formats replaced by `formats`.
fn with_video_formats(formats: &str) -> String {
    let text = crlf(PUBLISHER_VP8);
    let start = text
        .find("m=video 9 UDP/TLS/RTP/SAVPF ")
        .expect("a video section");
    let end = start + text[start..].find("\r\n").expect("a line end");
    format!(
        "{}m=video 9 UDP/TLS/RTP/SAVPF {formats}{}",
        &text[..start],
        &text[end..]
    )
}

/// The VP8 fixture with `lines` added after the video section's `a=mid`.
fn with_video_lines(lines: &str) -> String {
    crlf(PUBLISHER_VP8).replacen("a=mid:1\r\n", &format!("a=mid:1\r\n{lines}"), 1)
}

#[test]
fn a_payload_type_listed_again_is_one_codec_and_its_lines_are_copied_once() {
    // One payload type listed 127 times, with a long format parameter line: read once.
    let long = "x".repeat(30_000);
    let formats = vec!["96"; 127].join(" ");
    let text = with_video_formats(&formats).replacen(
        "a=rtpmap:96 VP8/90000\r\n",
        &format!("a=rtpmap:96 VP8/90000\r\na=fmtp:96 x={long}\r\n"),
        1,
    );
    assert!(text.len() < MAX_SDP_LEN);
    let offer = parse_offer(&text).expect("read");
    let video = section(&offer, MediaKind::Video);
    assert_eq!(payload_types(&video.codecs), [96]);
    let copied: usize = video.codecs.iter().map(|c| c.fmtp.len()).sum();
    assert!(
        copied < text.len(),
        "{copied} bytes of fmtp from an offer of {}",
        text.len()
    );
}

#[test]
fn more_formats_than_payload_types_are_refused() {
    let formats = vec!["96"; MAX_FORMATS + 1].join(" ");
    let refused = parse_offer(&with_video_formats(&formats)).unwrap_err();
    assert_eq!(
        refused,
        SdpError::TooMany {
            section: 1,
            what: "formats on its m= line",
            limit: MAX_FORMATS
        }
    );
    assert!(refused
        .to_string()
        .starts_with("media section 1: more than 128"));
}

#[test]
fn feedback_lines_are_read_once_and_only_those_the_node_takes_part_in() {
    let many: String = (0..1_500)
        .map(|i| format!("a=rtcp-fb:* x-{i}\r\na=rtcp-fb:* nack\r\n"))
        .collect();
    let offer = parse_offer(&with_video_lines(&many)).expect("read");
    let video = section(&offer, MediaKind::Video);
    for codec in &video.codecs {
        assert!(codec.feedback.len() <= 5, "{:?}", codec.feedback);
        let nacks = codec.feedback.iter().filter(|f| *f == "nack").count();
        assert_eq!(nacks, 1);
    }
}

#[test]
fn sources_and_rids_past_their_bounds_are_refused() {
    let sources: String = (0..=MAX_SSRCS as u32)
        .map(|ssrc| format!("a=ssrc:{} cname:x\r\n", 10 + ssrc))
        .collect();
    let refused = parse_offer(&with_video_lines(&sources)).unwrap_err();
    assert!(matches!(
        refused,
        SdpError::TooMany {
            section: 1,
            what: "sources",
            ..
        }
    ));
    // As many FID groups, each naming a new source.
    let groups: String = (0..=MAX_SSRCS as u32)
        .map(|i| format!("a=ssrc-group:FID {} {}\r\n", 1_000 + i, 2_000 + i))
        .collect();
    let refused = parse_offer(&with_video_lines(&groups)).unwrap_err();
    assert!(matches!(
        refused,
        SdpError::TooMany {
            what: "sources",
            ..
        }
    ));
    let rids: String = (0..=MAX_RIDS)
        .map(|i| format!("a=rid:r{i} send\r\n"))
        .collect();
    let refused = parse_offer(&with_video_lines(&rids)).unwrap_err();
    assert!(matches!(
        refused,
        SdpError::TooMany {
            what: "send rids",
            ..
        }
    ));
    // At the bounds, read.
    let at_bound: String = (0..MAX_RIDS)
        .map(|i| format!("a=rid:r{i} recv\r\n"))
        .collect();
    let offer = parse_offer(&with_video_lines(&at_bound)).expect("read");
    assert_eq!(section(&offer, MediaKind::Video).recv_rids.len(), MAX_RIDS);
}

#[test]
fn a_stream_the_simulcast_line_lists_again_is_one_stream() {
    let lines = "a=rid:h send\r\na=rid:l send\r\na=simulcast:send h;l;h;l;h\r\n";
    let offer = parse_offer(&with_video_lines(lines)).expect("read");
    assert_eq!(section(&offer, MediaKind::Video).send_rids, ["h", "l"]);
}

#[test]
fn a_mid_named_twice_and_a_bundle_longer_than_the_media_are_refused() {
    let text = crlf(PUBLISHER_VP8).replacen("a=mid:1\r\n", "a=mid:0\r\n", 1);
    assert_eq!(
        parse_offer(&text.replace("BUNDLE 0 1", "BUNDLE 0")).unwrap_err(),
        SdpError::DuplicateMid("0".to_owned())
    );
    let text = crlf(PUBLISHER_VP8).replace("BUNDLE 0 1", "BUNDLE 0 1 2");
    assert_eq!(
        parse_offer(&text).unwrap_err(),
        SdpError::BundleTooLong {
            mids: 3,
            sections: 2
        }
    );
}
