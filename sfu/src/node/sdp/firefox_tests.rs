//! An offer Firefox ESR 153 wrote (`fixtures/PROVENANCE.md`): simulcast by rid, with every
//! stream's SSRCs announced too (`a=ssrc` lines and an `a=ssrc-group:FID` per stream), which
//! Chromium leaves out. Each expectation is read off the offer's own lines.

use rtp_ext::codec::MediaKind;

use super::*;

const FIREFOX_SIMULCAST: &str = include_str!("fixtures/firefox153_publisher_simulcast.sdp");

/// The media and RTX SSRCs of the offer's `a=ssrc-group:FID` lines.
fn fid_pairs(text: &str) -> Vec<(u32, Option<u32>)> {
    video_lines(text, "a=ssrc-group:FID ")
        .map(|pair| {
            let (media, rtx) = pair.split_once(' ').unwrap();
            (media.parse().unwrap(), Some(rtx.parse().unwrap()))
        })
        .collect()
}

#[test]
fn a_simulcast_offer_with_ssrcs_too_is_told_apart_by_rid() {
    let text = FIREFOX_SIMULCAST;
    let read = offer(text);
    let video = section(&read, MediaKind::Video);
    let rids: Vec<&str> = video_lines(text, "a=rid:")
        .map(|l| l.strip_suffix(" send").unwrap())
        .collect();
    assert_eq!(rids.len(), 3, "{text}");
    assert_eq!(video.send_rids, rids);
    let pairs: Vec<(u32, Option<u32>)> = video.ssrcs.iter().map(|s| (s.ssrc, s.rtx_ssrc)).collect();
    assert_eq!(pairs, fid_pairs(text), "one announced pair per stream");
    let plan = negotiate_publisher(&read).unwrap();
    let video = accepted(&plan.sections)
        .into_iter()
        .find(|m| m.kind == MediaKind::Video)
        .unwrap();
    assert_eq!(video.demux, Demux::Rid, "not the first SSRC alone");
    assert_eq!(video.rids, rids);
    assert_eq!(video.ssrcs.len(), 3, "kept to pair each stream's RTX");
    let answer = publisher_answer(text);
    assert!(answer.contains("a=simulcast:recv q;h;f"), "{answer}");
}
