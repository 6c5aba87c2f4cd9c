//! A session's DTLS handshake through the core, against an independent client stack, on
//! tokio's paused clock: the records leave through the core's one output path, its timers are
//! the core's, and the handshake's end connects or removes the session.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtls::conn::DTLSConn;
use selector::Layer;
use tokio::sync::mpsc;

use super::{NodeCore, MAX_DATAGRAM};
use crate::capture::{classify, PayloadKind};
use crate::engine::RouterConfig;
use crate::node::dtls::test_client::{client_certificate, export_keys, ChannelConn, ClientError};
use crate::node::dtls::test_pair::{client_config, sleep_until, Clock, ALL_PROFILES};
use crate::node::dtls::{DtlsCertificate, DtlsConfig, Side};
use crate::node::limits::Limits;
use crate::node::metrics::DropReason;
use crate::node::peer::{IceCredentials, PeerId, Viewer};
use crate::node::srtp::{self, SrtpContext, SrtpKeys, MAX_OVERHEAD};
use crate::node::testing::{binding_request, join_with_fingerprint};

const CLIENT: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 40000);
const TIMEOUT: Duration = Duration::from_secs(10);
const UFRAG: &str = "nodeufrg";
const PWD: &str = "a-password-of-24-chars!!";
/// The SSRCs a session's SRTP keeps state for in these cores: few, so a test reaches them.
const SRTP_STREAMS: usize = 4;

/// A node with one viewer session whose offer named `fingerprint`, at [`CLIENT`] after its
/// ICE check.
fn node_with_session(
    node: &DtlsCertificate,
    fingerprint: &str,
    clock: &Clock,
) -> (NodeCore, PeerId) {
    let config = DtlsConfig::new(node, TIMEOUT).expect("a configuration");
    let limits = Limits {
        srtp_streams_per_session: SRTP_STREAMS,
        ..Limits::default()
    };
    let mut core = NodeCore::new(RouterConfig::default(), Duration::from_secs(60))
        .with_dtls(config)
        .with_limits(limits);
    let ice = IceCredentials {
        local_ufrag: UFRAG.into(),
        local_pwd: PWD.into(),
    };
    let join = join_with_fingerprint("room", ice.clone(), fingerprint);
    let viewer = Viewer {
        video: None,
        audio: None,
        target: Layer::MAX,
        source: None,
    };
    let id = core.add_viewer(clock.now(), join, viewer).expect("room");
    core.handle_datagram(clock.now(), CLIENT, &binding_request(&ice, true));
    (core, id)
}

/// What the core did with the session by the time the client finished or the core ended it.
struct Outcome {
    /// The client's end of the handshake; `None` when the core ended the session first.
    client: Option<Result<(DTLSConn, SrtpKeys), ClientError>>,
    /// DTLS records the core sent the client.
    records: usize,
    /// From the first record the core took in until the client finished or the core ended
    /// the session.
    took: Duration,
    core: NodeCore,
    id: PeerId,
}

/// Runs the client against the core until the client's handshake ends or the core ends the
/// session; `deliver` says which of the client's datagrams (by index) reach the core, and
/// `answer` which of the core's reach the client.
async fn handshake(
    client_cert: &DtlsCertificate,
    sdp_fingerprint: &str,
    deliver: impl Fn(usize) -> bool,
    answer: fn(usize) -> bool,
) -> Outcome {
    let node = DtlsCertificate::generate().expect("a certificate");
    let clock = Clock::start();
    let (mut core, id) = node_with_session(&node, sdp_fingerprint, &clock);
    let (to_core, mut from_client) = mpsc::unbounded_channel::<Bytes>();
    let (to_client, client_inbound) = mpsc::channel(256);
    let conn = ChannelConn::new(client_inbound, Box::new(move |d| drop(to_core.send(d))));
    let config = client_config(
        client_certificate(client_cert),
        &node,
        ALL_PROFILES.to_vec(),
    );
    let mut client = tokio::spawn(async move {
        let dtls = DTLSConn::new(Arc::new(conn), config, true, None)
            .await
            .map_err(ClientError::Handshake)?;
        let keys = export_keys(&dtls, Side::Client).await?;
        Ok((dtls, keys))
    });
    let (mut records, mut sent) = (0, 0);
    let mut first = None;
    let mut out = vec![0; MAX_DATAGRAM];
    while core.peer(id).is_some() {
        while let Some((to, len)) = core.poll_datagram(&mut out) {
            if classify(&out[..len]) == PayloadKind::Dtls {
                assert_eq!(to, CLIENT);
                if answer(records) {
                    let _ = to_client.try_send(Bytes::copy_from_slice(&out[..len]));
                }
                records += 1;
            }
        }
        let wake = core.poll_timeout().map(|at| clock.tokio_instant(at));
        tokio::select! {
            done = &mut client => {
                let client = Some(done.expect("the client's task"));
                let took = clock.now() - first.unwrap_or(clock.now());
                return Outcome { client, records, took, core, id };
            }
            Some(datagram) = from_client.recv() => {
                if deliver(sent) {
                    first = first.or(Some(clock.now()));
                    core.handle_datagram(clock.now(), CLIENT, &datagram);
                }
                sent += 1;
            }
            () = sleep_until(wake) => core.handle_timeout(clock.now()),
        }
    }
    client.abort();
    Outcome {
        client: None,
        records,
        took: clock.now() - first.unwrap_or(clock.now()),
        core,
        id,
    }
}

fn removed(core: &mut NodeCore) -> Vec<PeerId> {
    std::iter::from_fn(|| core.poll_removed()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_handshake_through_the_core_connects_the_session_with_matching_keys() {
    let client_cert = DtlsCertificate::generate().expect("a certificate");
    let mut outcome = handshake(&client_cert, &client_cert.fingerprint(), |_| true, |_| true).await;
    let (_, client_keys) = outcome
        .client
        .expect("the client finished")
        .expect("the client connected");
    assert!(
        outcome.records >= 2,
        "the node's flights: {}",
        outcome.records
    );
    let peer = outcome.core.peer(outcome.id).expect("the session lives");
    assert!(peer.srtp.is_some(), "the session has its keys");
    let snapshot = outcome.core.snapshot();
    assert_eq!((snapshot.connecting, snapshot.node.dtls_failures), (0, 0));
    assert!(removed(&mut outcome.core).is_empty());
    // What the client protects with its keys, the node's session unprotects; a forgery it
    // refuses.
    let mut client = srtp::session(&client_keys).expect("the client's keys");
    let mut packet = receiver_report(&mut client, 0x1234);
    let now = Instant::now();
    outcome.core.handle_datagram(now, CLIENT, &packet);
    let rejected = |core: &NodeCore| core.snapshot().node.dropped(DropReason::SrtpRejected);
    assert_eq!(rejected(&outcome.core), 0);
    let last = packet.len() - 1;
    packet[last] ^= 1;
    outcome.core.handle_datagram(now, CLIENT, &packet);
    assert_eq!(rejected(&outcome.core), 1);
}

/// A receiver report (no blocks) from `ssrc`, protected by the client's session.
fn receiver_report(client: &mut dyn SrtpContext, ssrc: u32) -> Vec<u8> {
    let mut report = vec![0x80, 201, 0, 1];
    report.extend_from_slice(&ssrc.to_be_bytes());
    let plain = report.len();
    report.resize(plain + MAX_OVERHEAD, 0);
    let len = client.protect_rtcp(&mut report, plain).expect("protected");
    report.truncate(len);
    report
}

/// A session connected through the core, and the client's SRTP under its keys.
async fn connected() -> (Outcome, srtp::SrtpSession) {
    let outcome = connects_despite(|_| true, |_| true).await;
    let Some(Ok((_, keys))) = &outcome.client else {
        unreachable!("connects_despite saw it connect");
    };
    let client = srtp::session(keys).expect("the client's keys");
    (outcome, client)
}

#[tokio::test(start_paused = true)]
async fn ssrcs_past_the_session_s_limit_are_dropped_by_reason_and_the_kept_ones_still_go() {
    let (mut outcome, mut client) = connected().await;
    let dropped = |core: &NodeCore, reason| core.snapshot().node.dropped(reason);
    let now = Instant::now();
    for ssrc in 1..=SRTP_STREAMS as u32 + 2 {
        let report = receiver_report(&mut client, ssrc);
        outcome.core.handle_datagram(now, CLIENT, &report);
    }
    assert_eq!(dropped(&outcome.core, DropReason::SrtpStreams), 2);
    // The SSRCs kept still authenticate, each packet once.
    let again = receiver_report(&mut client, 1);
    outcome.core.handle_datagram(now, CLIENT, &again);
    assert_eq!(dropped(&outcome.core, DropReason::SrtpRejected), 0);
    outcome.core.handle_datagram(now, CLIENT, &again);
    assert_eq!(
        dropped(&outcome.core, DropReason::SrtpRejected),
        1,
        "a replay"
    );
    assert_eq!(dropped(&outcome.core, DropReason::SrtpStreams), 2);
}

/// A handshake whose datagrams `deliver` and `answer` pick (as in [`handshake`]) that must
/// connect the session all the same.
async fn connects_despite(deliver: fn(usize) -> bool, answer: fn(usize) -> bool) -> Outcome {
    let client_cert = DtlsCertificate::generate().expect("a certificate");
    let outcome = handshake(&client_cert, &client_cert.fingerprint(), deliver, answer).await;
    assert!(
        matches!(outcome.client, Some(Ok(_))),
        "{:?}",
        outcome.client.map(|c| c.err())
    );
    assert!(outcome
        .core
        .peer(outcome.id)
        .is_some_and(|p| p.srtp.is_some()));
    outcome
}

#[tokio::test(start_paused = true)]
async fn lost_client_flights_are_recovered_by_retransmission() {
    // The client's first hello and its second flight's first try are lost.
    connects_despite(|n| n != 0 && n != 1, |_| true).await;
}

#[tokio::test(start_paused = true)]
async fn a_lost_answer_comes_again_and_the_repeated_hello_counts_as_a_duplicate() {
    // The node's second datagram, its answer to the hello with the cookie, is lost: the client
    // repeats that hello before the node's timer sends the answer again.
    let outcome = connects_despite(|_| true, |n| n != 1).await;
    let node = outcome.core.snapshot().node;
    assert!(node.dropped(DropReason::Duplicate) > 0);
    assert_eq!(
        (node.dropped(DropReason::BadDtls), node.dtls_failures),
        (0, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_certificate_not_matching_the_offer_ends_the_session() {
    let client_cert = DtlsCertificate::generate().expect("a certificate");
    let other = DtlsCertificate::generate().expect("a certificate");
    let mut outcome = handshake(&client_cert, &other.fingerprint(), |_| true, |_| true).await;
    assert!(
        !matches!(outcome.client, Some(Ok(_))),
        "the client connected"
    );
    assert!(outcome.core.peer(outcome.id).is_none());
    assert_eq!(removed(&mut outcome.core), vec![outcome.id]);
    assert_eq!(outcome.core.snapshot().node.dtls_failures, 1);
}

#[tokio::test(start_paused = true)]
async fn a_stalled_handshake_ends_the_session_at_the_dtls_timeout() {
    let client_cert = DtlsCertificate::generate().expect("a certificate");
    // The client's first `delivered` datagrams reach the core, then none. After its first
    // hello the node asks for a cookie, statelessly and once: repeating the hello is the
    // client's part (RFC 6347 §4.2.1). After the hello with the cookie the node has a flight
    // out, which it repeats on the core's timer.
    for (delivered, least_records) in [(1, 1), (2, 4)] {
        let fingerprint = client_cert.fingerprint();
        let mut outcome = handshake(&client_cert, &fingerprint, |n| n < delivered, |_| true).await;
        assert!(outcome.client.is_none(), "the core ended the session first");
        let took = outcome.took;
        assert!(
            took >= TIMEOUT && took < TIMEOUT + Duration::from_secs(1),
            "{delivered}: {took:?}"
        );
        // The cookie request and, once there is one, the flight and its retransmissions.
        assert!(
            outcome.records >= least_records,
            "{delivered}: {}",
            outcome.records
        );
        assert_eq!(removed(&mut outcome.core), vec![outcome.id]);
        assert_eq!(outcome.core.snapshot().node.dtls_failures, 1);
    }
}

/// After the handshake the stack still takes handshake records (a peer repeats its final
/// flight when the node's was lost) and keeps every fragment of a message it does not wait
/// for, unencrypted ones from anyone at the peer's address: the association takes them in as
/// many bytes as a handshake, then drops them (counted), and the session goes on.
#[tokio::test(start_paused = true)]
async fn handshake_records_after_the_handshake_are_bounded_and_the_session_goes_on() {
    let (mut outcome, mut client) = connected().await;
    let now = Instant::now();
    let bad_dtls = |core: &NodeCore| core.snapshot().node.dropped(DropReason::BadDtls);
    let before = bad_dtls(&outcome.core);
    // Empty fragments of Finished messages the stack is not waiting for: 60 records of 25
    // bytes a datagram, each under a new record sequence number.
    let mut record_seq = 1_000u64;
    let mut flood = |message_seq: u16| {
        let mut datagram = Vec::new();
        for _ in 0..60 {
            datagram.extend_from_slice(&[22, 0xFE, 0xFD, 0, 0]);
            datagram.extend_from_slice(&record_seq.to_be_bytes()[2..]);
            datagram.extend_from_slice(&12u16.to_be_bytes());
            datagram.extend_from_slice(&[20, 0, 0, 0]);
            datagram.extend_from_slice(&(message_seq + 100).to_be_bytes());
            datagram.extend_from_slice(&[0; 6]);
            record_seq += 1;
        }
        datagram
    };
    let mut taken = 0;
    for message_seq in 0..200u16 {
        outcome
            .core
            .handle_datagram(now, CLIENT, &flood(message_seq));
        if bad_dtls(&outcome.core) > before {
            break;
        }
        taken += 1;
    }
    assert!((40..50).contains(&taken), "{taken} datagrams taken");
    outcome.core.handle_datagram(now, CLIENT, &flood(1_000));
    assert_eq!(
        bad_dtls(&outcome.core),
        before + 2,
        "each one past the bound"
    );
    assert!(outcome
        .core
        .peer(outcome.id)
        .is_some_and(|p| p.srtp.is_some()));
    let report = receiver_report(&mut client, 9);
    outcome.core.handle_datagram(now, CLIENT, &report);
    assert_eq!(
        outcome
            .core
            .snapshot()
            .node
            .dropped(DropReason::SrtpRejected),
        0
    );
}
