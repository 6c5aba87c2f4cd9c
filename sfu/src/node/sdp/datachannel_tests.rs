//! Data channel sections (RFC 8841): read from offers Chromium wrote, planned for a
//! participant (not for WHIP or WHEP), and answered with the node's SCTP port and limit and
//! nothing else of SCTP.

use super::*;

const CHROMIUM_DATA: &str = include_str!("fixtures/chromium_participant_datachannel.sdp");
const CHROMIUM_LATER: &str = include_str!("fixtures/chromium_datachannel_later.sdp");
/// The node's limit in these answers: not the offer's, so an echo would show.
const NODE_MAX: u64 = 131_072;

fn data_answer(plan: &ParticipantPlan) -> String {
    let media = AnswerMedia::for_participant(plan, NODE_MAX, |media| AnswerMedia::Inactive {
        mid: media.mid.clone(),
        media: InactiveMedia {
            kind: media.kind,
            codec: media.codecs[0].clone(),
        },
    });
    build_answer(&params(media, plan.extmap_allow_mixed))
}

/// The lines of the answer's section whose `a=mid` is `mid`, from its `m=` line.
fn section_lines<'a>(answer: &'a str, mid: &str) -> Vec<&'a str> {
    let sections: Vec<Vec<&str>> = answer
        .split("m=")
        .skip(1)
        .map(|s| s.lines().collect())
        .collect();
    sections
        .into_iter()
        .find(|lines| lines.contains(&format!("a=mid:{mid}").as_str()))
        .expect("the section")
}

#[test]
fn chromium_data_section_is_read_as_its_lines_say() {
    let offer = offer(CHROMIUM_DATA);
    let data = offer.media.iter().find(|m| m.sctp.is_some()).unwrap();
    assert_eq!((data.mid.as_str(), data.kind), ("2", None));
    assert_eq!(
        data.sctp,
        Some(SctpOffer {
            port: 5000,
            max_message_size: Some(262_144)
        })
    );
    assert!(offer
        .media
        .iter()
        .filter(|m| m.kind.is_some())
        .all(|m| m.sctp.is_none()));
}

#[test]
fn participant_data_section_is_answered_with_the_nodes_port_and_limit() {
    let plan = negotiate_participant(&offer(CHROMIUM_DATA)).unwrap();
    assert_eq!(plan.data().map(|d| d.mid.as_str()), Some("2"));
    let answer = data_answer(&plan);
    assert!(answer.contains("a=group:BUNDLE 0 1 2\r\n"), "{answer}");
    let lines = section_lines(&answer, "2");
    assert_eq!(lines[0], "application 9 UDP/DTLS/SCTP webrtc-datachannel");
    assert!(lines.contains(&"a=sctp-port:5000"), "{lines:?}");
    assert!(lines.contains(&"a=max-message-size:131072"), "{lines:?}");
    assert!(lines.contains(&"a=setup:passive"), "{lines:?}");
    // The section reads back as a data section with the node's values.
    let read = parse_description(&answer).unwrap();
    let sctp = read.media[2].sctp.unwrap();
    assert_eq!((sctp.port, sctp.max_message_size), (5000, Some(NODE_MAX)));
    assert!(!read.media[2].rejected);
}

#[test]
fn attributes_the_node_does_not_implement_are_not_echoed() {
    let text = crlf(CHROMIUM_DATA).replace(
        "a=sctp-port:5000\r\n",
        "a=sctp-port:5000\r\na=sctp-init:AQAAAAAAAAA\r\n",
    );
    let plan = negotiate_participant(&parse_offer(&text).unwrap()).unwrap();
    let answer = data_answer(&plan);
    assert!(!answer.contains("sctp-init"), "{answer}");
    assert!(!answer.contains("ice-options"), "{answer}");
}

#[test]
fn a_data_section_may_come_in_a_later_offer() {
    let later = offer(CHROMIUM_LATER);
    // The first offer of that session, as Chromium wrote it before the channel: the audio alone.
    let first_text: String = crlf(CHROMIUM_LATER)
        .split("m=application")
        .next()
        .unwrap()
        .replace("a=group:BUNDLE 0 1", "a=group:BUNDLE 0");
    let first = parse_offer(&first_text).unwrap();
    assert!(negotiate_participant(&first).unwrap().data().is_none());
    assert_eq!(
        OfferShape::of(&first).check_follows(&OfferShape::of(&later)),
        Ok(())
    );
    let plan = negotiate_participant(&later).unwrap();
    assert_eq!(plan.data().map(|d| d.mid.as_str()), Some("1"));
    let answer = data_answer(&plan);
    assert!(answer.contains("a=group:BUNDLE 0 1\r\n"), "{answer}");
}

#[test]
fn a_data_only_offer_is_served_and_a_second_data_section_refused() {
    let text = crlf(CHROMIUM_LATER);
    let data_only = parse_offer(
        &text
            .replace("a=group:BUNDLE 0 1", "a=group:BUNDLE 1")
            .replacen("m=audio 9", "m=audio 0", 1),
    )
    .unwrap();
    let plan = negotiate_participant(&data_only).unwrap();
    assert!(plan.data().is_some());

    let section = &text[text.find("m=application").unwrap()..];
    let twice = format!(
        "{}{}",
        text.replace("a=group:BUNDLE 0 1", "a=group:BUNDLE 0 1 2"),
        section.replace("a=mid:1", "a=mid:2")
    );
    let plan = negotiate_participant(&parse_offer(&twice).unwrap()).unwrap();
    assert_eq!(plan.data().map(|d| d.mid.as_str()), Some("1"));
    let refusal = plan.sections[2].refusal().unwrap();
    assert!(refusal.contains("second data channel"), "{refusal}");
}

#[test]
fn whip_and_whep_still_refuse_data_sections() {
    let offer = offer(CHROMIUM_DATA);
    let plan = negotiate_viewer(&offer, &[]).unwrap();
    let refusal = plan.sections[2].refusal().unwrap();
    assert!(
        refusal.contains("application is not forwarded"),
        "{refusal}"
    );
    let answer = build_answer(&params(AnswerMedia::for_viewer(&plan, |_| None), true));
    let lines = section_lines(&answer, "2");
    assert_eq!(lines[0], "application 0 UDP/DTLS/SCTP webrtc-datachannel");
    assert!(!answer.contains("sctp-port"), "{answer}");
}

#[test]
fn missing_and_odd_sctp_attributes() {
    let text = crlf(CHROMIUM_LATER);
    let bare = without_lines(&without_lines(&text, "a=sctp-port"), "a=max-message-size");
    let sctp = parse_offer(&bare).unwrap().media[1].sctp.unwrap();
    assert_eq!(
        (sctp.port, sctp.max_message_size),
        (DEFAULT_SCTP_PORT, Some(DEFAULT_MAX_MESSAGE_SIZE))
    );
    let unlimited = text.replace("a=max-message-size:262144", "a=max-message-size:0");
    let sctp = parse_offer(&unlimited).unwrap().media[1].sctp.unwrap();
    assert_eq!(sctp.max_message_size, None);
    let bad = text.replace("a=sctp-port:5000", "a=sctp-port:70000");
    assert!(matches!(
        parse_offer(&bad),
        Err(SdpError::BadAttribute {
            attribute: "sctp-port",
            ..
        })
    ));
}
