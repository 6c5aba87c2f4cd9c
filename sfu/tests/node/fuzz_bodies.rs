//! The node's fuzz bodies over their committed seed corpora and over the seeds made here, whole,
//! cut and flipped. `write_seeds` (ignored) writes the corpora to `fuzz/seeds/`:
//! `cargo test -p sfu --features fuzzing --test node -- --ignored write_seeds`.

#![cfg(feature = "fuzzing")]

use std::path::{Path, PathBuf};

use sfu::capture::{classify, udp_datagram, Capture, PayloadKind};
use sfu::fuzz::{self, record};
use sfu::node::auth::sign_hs256;
use sfu::node::srtp::{session, SrtpContext, SrtpProfile, SrtpSession, MAX_OVERHEAD};

type Seeds = Vec<(&'static str, Vec<u8>)>;

/// A target's name, its body and the seeds it starts from.
type Target = (&'static str, fn(&[u8]), fn() -> Seeds);

const TARGETS: [Target; 14] = [
    ("sdp_offer", fuzz::sdp_offer, sdp_offer_seeds),
    ("stun_binding", fuzz::stun_binding, stun_binding_seeds),
    ("auth_header", fuzz::auth_header, auth_header_seeds),
    ("srtp_unprotect", fuzz::srtp_unprotect, srtp_unprotect_seeds),
    ("node_core", fuzz::node_core, node_core_seeds),
    (
        "dtls_association",
        fuzz::dtls_association,
        dtls_association_seeds,
    ),
    ("dcep", fuzz::dcep, dcep_seeds),
    ("sctp_input", fuzz::sctp_input, sctp_input_seeds),
    ("tcp_framing", fuzz::tcp_framing, tcp_framing_seeds),
    ("relay_link", fuzz::relay_link, relay_link_seeds),
    ("room_part", fuzz::room_part, room_part_seeds),
    ("room_notice", fuzz::room_notice, room_notice_seeds),
    (
        "directory_entry",
        fuzz::directory_entry,
        directory_entry_seeds,
    ),
    (
        "trickle_fragment",
        fuzz::trickle_fragment,
        trickle_fragment_seeds,
    ),
];

/// A client's trickle fragment: a browser's with a candidate; an ICE restart's new
/// credentials alone; one that ends the candidates.
fn trickle_fragment_seeds() -> Seeds {
    vec![
        (
            "browser",
            b"a=ice-options:trickle ice2\r\nm=audio 9 RTP/AVP 0\r\na=mid:0\r\n\
              a=ice-ufrag:EsAw\r\na=ice-pwd:P2uYro0UCOQ4zxjKXaWCBui1\r\n\
              a=candidate:1 1 udp 2122260223 192.0.2.1 61764 typ host\r\n"
                .to_vec(),
        ),
        (
            "restart",
            b"a=ice-ufrag:N3wU\na=ice-pwd:aNewPasswordOf24Chars0000\n".to_vec(),
        ),
        ("end", b"a=end-of-candidates\r\n".to_vec()),
    ]
}

/// A node's directory entry of a room: two publishers; none; one with a field the reader
/// does not know of.
fn directory_entry_seeds() -> Seeds {
    vec![
        ("two", br#"{"epoch":7,"publishers":["ada","cam"]}"#.to_vec()),
        ("none", br#"{"epoch":0,"publishers":[]}"#.to_vec()),
        (
            "extra_field",
            br#"{"epoch":18446744073709551615,"publishers":["x"],"at":1}"#.to_vec(),
        ),
    ]
}

/// A node's notice of a room as Redis delivers it (channel, line break, payload), one whose
/// channel is another key's, and one whose payload holds a space.
fn room_notice_seeds() -> Seeds {
    vec![
        ("notice", b"strata:notice:call-1\nedge-1:8080".to_vec()),
        ("other_channel", b"strata:nodes\nedge-1".to_vec()),
        ("spaced_node", b"strata:notice:call\nedge 1".to_vec()),
    ]
}

/// A node's part of a room: a participant publishing AV1 with its layers, a data channel,
/// its candidate; the home's, with the room's speaker; a WHIP publisher of audio.
fn room_part_seeds() -> Seeds {
    let participant = r#"{"id":"00000000000000ab","name":"ada","kind":"participant","tracks":[{"id":3,"participant":"00000000000000ab","kind":"video","codec":"AV1","streams":1,"layers":[{"spatial":0,"temporal":0,"bps":120000}],"viewers":2}],"receiving":1,"channels":[{"participant":"00000000000000ab","label":"chat","ordered":false,"reliability":"max_retransmits","limit":3,"protocol":""}]}"#;
    let part = format!(
        r#"{{"participants":[{participant}],"viewers":1,"candidate":{{"participant":"00000000000000ab","level":80.5}},"speaker":null}}"#
    );
    let home = r#"{"participants":[],"viewers":0,"candidate":null,"speaker":"00000000000000ab"}"#;
    let whip = r#"{"participants":[{"id":"00000000000000cd","name":"cam","kind":"whip","tracks":[{"id":1,"participant":"00000000000000cd","kind":"audio","codec":"opus","streams":1,"layers":[],"viewers":0}],"receiving":0,"channels":[]}],"viewers":3,"candidate":null,"speaker":null}"#;
    vec![
        ("part", part.into_bytes()),
        ("home", home.as_bytes().to_vec()),
        ("whip", whip.as_bytes().to_vec()),
    ]
}

/// A relay request in its lifetime and one past it, an origin's answer of an AV1 track with
/// its RTX and DD, a compound of the link's own with an SCTP packet of its data association,
/// and the protocol of a channel across the link.
fn relay_link_seeds() -> Seeds {
    // An empty receiver report, then an SCTP packet's common header and an INIT's first bytes.
    let mut data = vec![0x80, 201, 0, 1, 0x53, 0x54, 0x4c, 0x45];
    let sctp = [
        0x13, 0x88, 0x13, 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 20, 0xAB,
    ];
    sfu::node::core::write_link_data(0x5354_4c45, &sctp, &mut data).expect("framed");
    let protocol = sfu::node::datachannel::relay::link_protocol(
        sfu::node::participant::ParticipantId(0xAB),
        "room",
    );
    let request = |at_ms: u64| {
        format!(
            r#"{{"room":"room","source":null,"relay":"10.0.0.2:50000","nonce":"00ff","at_ms":{at_ms}}}"#
        )
        .into_bytes()
    };
    let answer = r#"{"relay":"10.0.0.1:50000","nonce":"ab","name":"alice","tracks":[{"mid":"1","codec":"AV1","clock_rate":90000,"streams":[[161,162]],"dd_ext_id":11,"audio_level_ext_id":null,"fmtp":""}],"codecs":[{"codec":"AV1","fmtp":""}]}"#;
    // An edge's receiver report, then its APP packet `STDE` ending the data relay tagged 1.
    let data_ended = [
        0x80, 201, 0, 1, 0x53, 0x54, 0x4c, 0x45, 0x80, 204, 0, 2, 0, 0, 0, 1, b'S', b'T', b'D',
        b'E',
    ];
    let data_request = |extra: &str| {
        format!(
            r#"{{"room":"room","source":{extra},"relay":"10.0.0.2:50000","nonce":"00ff","at_ms":{},"kind":"data","node":"edge-1:8080"}}"#,
            fuzz::RELAY_NOW_MS
        )
        .into_bytes()
    };
    vec![
        ("request", request(fuzz::RELAY_NOW_MS)),
        ("stale_request", request(fuzz::RELAY_NOW_MS - 60_000)),
        ("data_request", data_request("null")),
        (
            "data_request_naming_a_publisher",
            data_request(r#""alice""#),
        ),
        ("data_ended", data_ended.to_vec()),
        ("answer", answer.as_bytes().to_vec()),
        ("data", data),
        ("protocol", protocol.into_bytes()),
    ]
}

/// A binding request and a media packet framed as ICE-TCP carries them, read whole and a
/// byte at a time; one of them split by a read of 5; a frame longer than the node takes.
fn tcp_framing_seeds() -> Seeds {
    let request = sfu::node::ice::binding_request("fuzz:browser", fuzz::STUN_PASSWORD, true)
        .expect("valid request");
    let mut stream = Vec::new();
    for frame in [&request[..], &[0x80, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]] {
        stream.extend_from_slice(&(frame.len() as u16).to_be_bytes());
        stream.extend_from_slice(frame);
    }
    let cut = |n: u8| [&[n][..], &stream].concat();
    vec![
        ("whole", cut(255)),
        ("bytewise", cut(1)),
        ("split", cut(5)),
        ("oversized", vec![7, 0xFF, 0xFF, 0, 0]),
    ]
}

/// A channel's open as Chromium sends it (`ordered: false, maxRetransmits: 3`, label `chat`,
/// protocol `json`), and the ack.
fn dcep_seeds() -> Seeds {
    let open = [
        0x03, 0x81, 0x01, 0x00, 0, 0, 0, 3, 0, 4, 0, 4, b'c', b'h', b'a', b't', b'j', b's', b'o',
        b'n',
    ];
    let reliable_unnamed = vec![0x03, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    vec![
        ("open_chat", open.to_vec()),
        ("ack", vec![0x02]),
        ("open_reliable_unnamed", reliable_unnamed),
    ]
}

/// An SCTP INIT (RFC 9260 section 3.3.2) from port 5000 to 5000, as a client's association
/// starts, with a bad checksum after it.
fn sctp_input_seeds() -> Seeds {
    let mut init = vec![0x13, 0x88, 0x13, 0x88, 0, 0, 0, 0, 0, 0, 0, 0];
    init.extend_from_slice(&[1, 0, 0, 20]);
    init.extend_from_slice(&[0x12, 0x34, 0x56, 0x78, 0, 2, 0, 0, 0, 0xFF, 0xFF, 0xFF]);
    init.extend_from_slice(&[0x9A, 0xBC, 0xDE, 0xF0]);
    let crc = crc32c(&init);
    init[8..12].copy_from_slice(&crc.to_le_bytes());
    let framed = |packets: &[&[u8]]| {
        packets
            .iter()
            .flat_map(|p| {
                (p.len() as u16)
                    .to_be_bytes()
                    .into_iter()
                    .chain(p.iter().copied())
            })
            .collect()
    };
    let mut corrupt = init.clone();
    corrupt[8] ^= 1;
    vec![
        ("init", framed(&[&init])),
        ("init_twice_then_corrupt", framed(&[&init, &init, &corrupt])),
        ("shorter_than_a_header", framed(&[&init[..7]])),
    ]
}

/// CRC-32C (Castagnoli), SCTP's checksum (RFC 9260 appendix B), bit by bit.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn seed_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target)
}

fn sdp_offer_seeds() -> Seeds {
    let fixture = |name| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("src/node/sdp/fixtures")
            .join(name);
        std::fs::read(path).expect("SDP fixture")
    };
    [
        "publisher_av1.sdp",
        "publisher_simulcast.sdp",
        "publisher_vp8.sdp",
        "viewer_recvonly.sdp",
    ]
    .into_iter()
    .map(|name| (name, fixture(name)))
    .collect()
}

fn stun_binding_seeds() -> Seeds {
    let request = |username: &str, password: &str, nominate| {
        sfu::node::ice::binding_request(username, password, nominate).expect("valid request")
    };
    vec![
        (
            "nominating",
            request("fuzz:browser", fuzz::STUN_PASSWORD, true),
        ),
        (
            "checking",
            request("fuzz:browser", fuzz::STUN_PASSWORD, false),
        ),
        (
            "wrong_password",
            request("fuzz:browser", "another password", true),
        ),
        (
            "no_colon",
            request("fuzzbrowser", fuzz::STUN_PASSWORD, false),
        ),
    ]
}

fn auth_header_seeds() -> Seeds {
    let jwt = |claims: &str| format!("Bearer {}", sign_hs256(fuzz::AUTH_SECRET, claims));
    let now = fuzz::AUTH_NOW;
    let headers = [
        ("static", format!("Bearer {}", fuzz::AUTH_TOKEN)),
        ("lowercase_scheme", format!("bearer  {} ", fuzz::AUTH_TOKEN)),
        ("publish", jwt(r#"{"room":"room","publish":true}"#)),
        (
            "any_room_in_time",
            jwt(&format!(
                r#"{{"room":"*","subscribe":true,"exp":{},"nbf":{}}}"#,
                now + 60,
                now - 60
            )),
        ),
        (
            "expired",
            jwt(&format!(r#"{{"room":"room","publish":true,"exp":{now}}}"#)),
        ),
        ("other_room", jwt(r#"{"room":"other","subscribe":true}"#)),
        (
            "unsigned",
            "Bearer eyJhbGciOiJub25lIn0.eyJyb29tIjoiKiJ9.".to_owned(),
        ),
        // What proxies append: a client, then proxies.
        (
            "forwarded_for",
            "198.51.100.9, 2001:db8::1, 10.0.0.2".to_owned(),
        ),
    ];
    headers
        .into_iter()
        .map(|(name, header)| (name, header.into_bytes()))
        .collect()
}

fn rtp(seq: u16, ssrc: u32, payload_len: usize) -> Vec<u8> {
    let mut packet = vec![0x90, 96];
    packet.extend_from_slice(&seq.to_be_bytes());
    packet.extend_from_slice(&(u32::from(seq) * 3000).to_be_bytes());
    packet.extend_from_slice(&ssrc.to_be_bytes());
    // A one-byte-header extension block with one element, as browsers send.
    packet.extend_from_slice(&[0xBE, 0xDE, 0, 1, 0x10, 0xAA, 0, 0]);
    packet.extend((0..payload_len).map(|i| i as u8));
    packet
}

/// A sender report without report blocks.
fn sender_report(ssrc: u32) -> Vec<u8> {
    let mut packet = vec![0x80, 200, 0, 6];
    packet.extend_from_slice(&ssrc.to_be_bytes());
    packet.extend((0..20).map(|i| i as u8));
    packet
}

/// Per profile: packets protected by the peer's side of the session, so they authenticate,
/// one replayed, and copies with a flipped tag byte and a cut tail.
fn srtp_unprotect_seeds() -> Seeds {
    let mut seeds = Vec::new();
    for (selector, profile) in [
        (0, SrtpProfile::AeadAes128Gcm),
        (1, SrtpProfile::Aes128CmHmacSha1_80),
        (2, SrtpProfile::AeadAes256Gcm),
    ] {
        assert_eq!(fuzz::srtp_profile(selector), profile);
        let mut peer = session(&fuzz::srtp_keys(profile).mirrored()).expect("valid keys");
        let first = protect(&mut peer, false, &rtp(1, 0x1234, 100));
        let records = [
            record(0, &first),
            record(0, &protect(&mut peer, false, &rtp(3, 0x1234, 40))),
            record(1, &protect(&mut peer, true, &sender_report(0x1234))),
            record(0, &first),
        ];
        seeds.push((
            ["gcm_stream", "cm_stream", "gcm256_stream"][usize::from(selector)],
            [vec![selector], records.concat()].concat(),
        ));
        let mut flipped = first.clone();
        *flipped.last_mut().expect("a tag") ^= 1;
        let cut = &first[..first.len() - 3];
        let broken = [record(0, &flipped), record(0, cut)].concat();
        seeds.push((
            ["gcm_broken", "cm_broken", "gcm256_broken"][usize::from(selector)],
            [vec![selector], broken].concat(),
        ));
    }
    seeds
}

fn protect(session: &mut SrtpSession, rtcp: bool, packet: &[u8]) -> Vec<u8> {
    let mut buf = packet.to_vec();
    buf.resize(packet.len() + MAX_OVERHEAD, 0);
    let result = if rtcp {
        session.protect_rtcp(&mut buf, packet.len())
    } else {
        session.protect_rtp(&mut buf, packet.len())
    };
    buf.truncate(result.expect("protects"));
    buf
}

/// A client stack's first flight: its ClientHello.
fn client_hello() -> Vec<u8> {
    sfu::node::dtls::client_hello(std::time::Instant::now())
}

/// `hello` as its client sends it again: the same record under the next record sequence number
/// (RFC 6347 §4.1; a copy under the same one is a replay, which the stack drops).
fn retransmitted(hello: &[u8]) -> Vec<u8> {
    let mut again = hello.to_vec();
    again[10] += 1;
    again
}

/// A plaintext handshake record holding all of a Certificate message (the client's second,
/// RFC 5246 §7.4.6) with one `len`-byte certificate.
fn certificate_record(len: usize) -> Vec<u8> {
    let u24 = |n: usize| (n as u32).to_be_bytes()[1..].to_vec();
    let body = [u24(len + 3), u24(len), vec![0x30; len]].concat();
    let header = [
        vec![11],
        u24(body.len()),
        vec![0, 1],
        u24(0),
        u24(body.len()),
    ]
    .concat();
    let mut record = vec![22, 0xFE, 0xFD, 0, 0, 0, 0, 0, 0, 0, 1];
    record.extend_from_slice(&((header.len() + body.len()) as u16).to_be_bytes());
    [record, header, body].concat()
}

/// A time record of `dtls_association`: `tenths` tenths of a second.
fn dtls_wait(tenths: u8) -> Vec<u8> {
    record(1 + 2 * tenths, &[])
}

/// A ClientHello alone, repeated after the node's first timer and left to the timeout,
/// followed by a certificate, and garbage after it.
fn dtls_association_seeds() -> Seeds {
    let first = client_hello();
    let hello = record(0, &first);
    let again = record(0, &retransmitted(&first));
    vec![
        ("client_hello", hello.clone()),
        (
            "retransmitted_until_the_timeout",
            [hello.clone(), dtls_wait(12), again, dtls_wait(100)].concat(),
        ),
        (
            "hello_then_certificate",
            [hello.clone(), record(0, &certificate_record(300))].concat(),
        ),
        (
            "hello_then_garbage",
            [hello, record(0, &[22, 0xFE, 0xFD]), record(0, &[0xAB; 64])].concat(),
        ),
        ("whole_handshake", whole_handshake(0)),
    ]
}

/// A client's every datagram of a whole handshake (its hellos, the second with the node's
/// cookie, and its certificate flight), each a record of `op`.
fn whole_handshake(op: u8) -> Vec<u8> {
    let flights = fuzz::dtls_client_flights();
    flights
        .iter()
        .flat_map(|datagram| record(op, datagram))
        .collect()
}

/// Whether `datagram` holds a handshake message of `kind` at the head of its first record.
fn opens_with_handshake(datagram: &[u8], kind: u8) -> bool {
    datagram.first() == Some(&22) && datagram.get(13) == Some(&kind)
}

/// The whole-handshake seed answers the node's cookie (constant under fuzzing): the node sends
/// its ServerHello flight, so the fuzzer starts past the cookie exchange, at the parsing of the
/// client's certificate flight.
#[test]
fn the_handshake_seed_gets_past_the_cookie() {
    const HELLO_VERIFY_REQUEST: u8 = 3;
    const SERVER_HELLO: u8 = 2;
    let flights = fuzz::dtls_client_flights();
    assert!(flights.len() >= 3, "hello, hello again, certificate flight");
    let sent = fuzz::dtls_association_sent(&whole_handshake(0));
    assert!(
        sent.iter()
            .any(|d| opens_with_handshake(d, HELLO_VERIFY_REQUEST)),
        "the cookie asked for"
    );
    assert!(
        sent.iter().any(|d| opens_with_handshake(d, SERVER_HELLO)),
        "the node's flight after the cookie: {} datagrams",
        sent.len()
    );
}

/// The real AV1 packets with a Dependency Descriptor, in capture order.
fn av1_packets() -> Vec<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/captures/jitsi_av1dd_packets.pcap");
    let file = std::fs::read(path).expect("the AV1 capture");
    Capture::open(&file)
        .expect("a capture")
        .flatten()
        .filter_map(|r| Some(udp_datagram(r.link_type, r.data).ok()?.payload.to_vec()))
        .filter(|p| classify(p) == PayloadKind::Rtp)
        .collect()
}

/// A `node_core` record letting `ms` milliseconds pass (in steps of 50).
fn wait(ms: u8) -> Vec<u8> {
    record(3 + 4 * (ms / 50), &[])
}

/// RTCP feedback (RFC 4585) from the viewer about its stream: generic NACK, then PLI.
fn viewer_feedback() -> Vec<Vec<u8>> {
    let media = fuzz::NODE_VIEWER_SSRC.to_be_bytes();
    let sender = 0x7777_u32.to_be_bytes();
    let nack = [&[0x81, 205, 0, 3][..], &sender, &media, &[0, 1, 0, 3]].concat();
    let pli = [&[0x81, 206, 0, 2][..], &sender, &media].concat();
    vec![nack, pli]
}

fn node_core_seeds() -> Seeds {
    let publisher = |p: &Vec<u8>| record(0, p);
    let packets = av1_packets();
    assert!(packets.len() >= 5, "the AV1 packets are there");
    let media: Vec<Vec<u8>> = packets.iter().map(publisher).collect();
    let feedback: Vec<Vec<u8>> = viewer_feedback().iter().map(|f| record(1, f)).collect();
    let sender_report = record(0, &sender_report(fuzz::ENGINE_SSRCS[0]));
    let keepalive = record(0, &fuzz::node_binding_request(0, true));
    let stranger_nominated = record(2, &fuzz::node_binding_request(1, true));
    let publisher_nominated = record(2, &fuzz::node_binding_request(0, true));
    let first = client_hello();
    let hello = record(0, &first);
    let again = record(0, &retransmitted(&first));
    vec![
        ("av1", [media.clone(), vec![wait(200)]].concat().concat()),
        (
            "av1_feedback",
            [
                media.clone(),
                vec![sender_report, wait(250)],
                feedback.clone(),
                vec![wait(100)],
            ]
            .concat()
            .concat(),
        ),
        (
            "keepalive_and_timeout",
            [
                vec![keepalive.clone(), wait(250), keepalive],
                media.clone(),
                vec![wait(250); 30],
            ]
            .concat()
            .concat(),
        ),
        (
            "viewer_moves",
            [
                vec![stranger_nominated, record(2, &packets[0])],
                media.clone(),
                feedback,
            ]
            .concat()
            .concat(),
        ),
        (
            "publisher_checked_elsewhere",
            [
                vec![publisher_nominated.clone(), record(2, &packets[0])],
                media.clone(),
                vec![wait(100), publisher_nominated],
            ]
            .concat()
            .concat(),
        ),
        (
            "dtls_hello_beside_media",
            [
                media.clone(),
                vec![hello, wait(250), wait(250), wait(250), wait(250), again],
            ]
            .concat()
            .concat(),
        ),
        (
            "dtls_handshake_beside_media",
            [media.concat(), whole_handshake(0)].concat(),
        ),
    ]
}

/// Runs `body` over every file of `dir`; returns how many there were.
fn run_dir(dir: &Path, body: fn(&[u8])) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut count = 0;
    for entry in entries {
        let path = entry.expect("entry").path();
        eprintln!("{}", path.display());
        body(&std::fs::read(path).expect("input"));
        count += 1;
    }
    count
}

#[test]
fn bodies_run_over_their_seed_corpora() {
    for (target, body, _) in TARGETS {
        assert!(run_dir(&seed_dir(target), body) >= 3, "{target}: seeds");
    }
}

/// The inputs the fuzzers found crashing, kept in `fuzz/regressions/<target>/`.
#[test]
fn bodies_run_over_their_regressions() {
    let regressions = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions");
    // A directory no target reads would keep its crashes out of the run.
    for entry in std::fs::read_dir(&regressions).expect("fuzz/regressions") {
        let name = entry.expect("entry").file_name();
        assert!(
            TARGETS.iter().any(|(target, ..)| name == *target),
            "{name:?} is no fuzz target"
        );
    }
    // A moved or emptied directory would otherwise make this pass with nothing run.
    let ran: usize = TARGETS
        .iter()
        .map(|(target, body, _)| run_dir(&regressions.join(target), *body))
        .sum();
    assert!(ran >= 1, "no regression input ran");
}

#[test]
fn bodies_run_over_cut_and_flipped_seeds() {
    for (_, body, seeds) in TARGETS {
        for (_, seed) in seeds() {
            body(&seed);
            for at in (0..seed.len()).step_by(seed.len() / 40 + 1) {
                body(&seed[..at]);
                let mut flipped = seed.clone();
                flipped[at] ^= 0xFF;
                body(&flipped);
            }
        }
    }
}

#[test]
fn node_seeds_reach_the_viewer_and_the_handshake() {
    for (name, seed) in node_core_seeds() {
        let sent = fuzz::node_core_sent(&seed);
        assert!(sent.rtp > 0, "{name}: {sent:?}");
        if name.starts_with("dtls") {
            // The node's cookie request, and again for the hello repeated a second later.
            assert!(sent.dtls >= 2, "{name}: {sent:?}");
        }
    }
}

#[test]
#[ignore = "writes the seed corpora; run by hand when the seeds change"]
fn write_seeds() {
    for (target, _, seeds) in TARGETS {
        let dir = seed_dir(target);
        std::fs::create_dir_all(&dir).expect("seed directory");
        for (name, seed) in seeds() {
            std::fs::write(dir.join(name), seed).expect("seed written");
        }
    }
}

#[test]
fn srtp_seeds_authenticate() {
    for (name, seed) in srtp_unprotect_seeds()
        .iter()
        .filter(|(n, _)| n.ends_with("stream"))
    {
        let mut ours = session(&fuzz::srtp_keys(fuzz::srtp_profile(seed[0]))).expect("keys");
        let (_, first) = fuzz::records(&seed[1..]).next().expect("a record");
        let mut buf = first.to_vec();
        assert!(ours.unprotect_rtp(&mut buf).is_ok(), "{name}");
    }
}
