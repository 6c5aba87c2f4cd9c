//! Offers for WHIP and WHEP (hand-made in Chromium's form, three Chromium 156 wrote and one
//! Firefox ESR 153 wrote: see `fixtures/PROVENANCE.md`), the plans made from them and the
//! answers written, read back both with the SDP crate and with [`parse_description`]: the
//! fixtures and helpers here, the tests in a module each for offers, negotiation and answers.

use std::io::Cursor;
use std::net::SocketAddr;

use rtp_ext::codec::{Codec, MediaKind};
use rtp_ext::dd;

use super::*;

#[path = "answer_tests.rs"]
mod answers;
#[path = "datachannel_tests.rs"]
mod datachannel;
#[path = "firefox_tests.rs"]
mod firefox;
#[path = "interop_tests.rs"]
mod interop;
#[path = "limits_tests.rs"]
mod limits;
#[path = "negotiate_tests.rs"]
mod negotiation;
#[path = "offer_tests.rs"]
mod offers;

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
        tcp_candidate: Some("127.0.0.1:40000".parse().unwrap()),
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

/// The values after `prefix` on the lines of the video section of `sdp` that start with it.
fn video_lines<'a>(sdp: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> {
    sdp.lines()
        .skip_while(|l| !l.starts_with("m=video"))
        .filter_map(move |l| l.strip_prefix(prefix))
}
