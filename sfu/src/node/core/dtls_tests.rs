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
use crate::node::ice::binding_request;
use crate::node::metrics::DropReason;
use crate::node::peer::{IceCredentials, Join, PeerId, Viewer};
use crate::node::sdp::Fingerprint;
use crate::node::srtp::{self, SrtpContext, SrtpKeys, MAX_OVERHEAD};

const CLIENT: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 40000);
const TIMEOUT: Duration = Duration::from_secs(10);
const UFRAG: &str = "nodeufrg";
const PWD: &str = "a-password-of-24-chars!!";

/// A node with one viewer session whose offer named `fingerprint`, at [`CLIENT`] after its
/// ICE check.
fn node_with_session(
    node: &DtlsCertificate,
    fingerprint: &str,
    clock: &Clock,
) -> (NodeCore, PeerId) {
    let config = DtlsConfig::new(node, TIMEOUT).expect("a configuration");
    let mut core =
        NodeCore::new(RouterConfig::default(), Duration::from_secs(60)).with_dtls(config);
    let (algorithm, value) = fingerprint.split_once(' ').expect("algorithm and value");
    let mut join = Join::new(
        "room",
        IceCredentials {
            local_ufrag: UFRAG.into(),
            local_pwd: PWD.into(),
        },
    );
    join.fingerprint = Some(Fingerprint {
        algorithm: algorithm.into(),
        value: value.into(),
    });
    let viewer = Viewer {
        video: None,
        audio: None,
        target: Layer::MAX,
        source: None,
    };
    let id = core.add_viewer(clock.now(), join, viewer).expect("room");
    let check = binding_request(&format!("{UFRAG}:client"), PWD, true).expect("a request");
    core.handle_datagram(clock.now(), CLIENT, &check);
    (core, id)
}

/// What the core did with the session by the time the client finished or the core ended it.
struct Outcome {
    /// The client's end of the handshake; `None` when the core ended the session first.
    client: Option<Result<(DTLSConn, SrtpKeys), ClientError>>,
    /// DTLS records the core sent the client.
    records: usize,
    core: NodeCore,
    id: PeerId,
}

/// Runs the client against the core until the client's handshake ends or the core ends the
/// session; `deliver` says which of the client's records (by index) reach the core.
async fn handshake(
    client_cert: &DtlsCertificate,
    sdp_fingerprint: &str,
    deliver: fn(usize) -> bool,
) -> Outcome {
    let node = DtlsCertificate::generate().expect("a certificate");
    let clock = Clock::start();
    let (mut core, id) = node_with_session(&node, sdp_fingerprint, &clock);
    let (to_core, mut from_client) = mpsc::unbounded_channel::<Bytes>();
    let (to_client, client_inbound) = mpsc::channel(256);
    let conn = ChannelConn::new(client_inbound, Box::new(move |d| drop(to_core.send(d))));
    let config = client_config(client_certificate(client_cert), &node, ALL_PROFILES.to_vec());
    let mut client = tokio::spawn(async move {
        let dtls = DTLSConn::new(Arc::new(conn), config, true, None)
            .await
            .map_err(ClientError::Handshake)?;
        let keys = export_keys(&dtls, Side::Client).await?;
        Ok((dtls, keys))
    });
    let (mut records, mut sent) = (0, 0);
    let mut out = vec![0; MAX_DATAGRAM];
    while core.peer(id).is_some() {
        while let Some((to, len)) = core.poll_datagram(&mut out) {
            if classify(&out[..len]) == PayloadKind::Dtls {
                assert_eq!(to, CLIENT);
                records += 1;
                let _ = to_client.try_send(Bytes::copy_from_slice(&out[..len]));
            }
        }
        let wake = core.poll_timeout().map(|at| clock.tokio_instant(at));
        tokio::select! {
            done = &mut client => {
                let client = Some(done.expect("the client's task"));
                return Outcome { client, records, core, id };
            }
            Some(datagram) = from_client.recv() => {
                if deliver(sent) {
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
    let mut outcome = handshake(&client_cert, &client_cert.fingerprint(), |_| true).await;
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
    let receiver_report = [0x80, 201, 0, 1, 0, 0, 0x12, 0x34];
    let mut packet = receiver_report.to_vec();
    packet.resize(receiver_report.len() + MAX_OVERHEAD, 0);
    let len = client
        .protect_rtcp(&mut packet, receiver_report.len())
        .expect("protected");
    packet.truncate(len);
    let now = Instant::now();
    outcome.core.handle_datagram(now, CLIENT, &packet);
    let rejected = |core: &NodeCore| core.snapshot().node.dropped(DropReason::SrtpRejected);
    assert_eq!(rejected(&outcome.core), 0);
    let last = packet.len() - 1;
    packet[last] ^= 1;
    outcome.core.handle_datagram(now, CLIENT, &packet);
    assert_eq!(rejected(&outcome.core), 1);
}

#[tokio::test(start_paused = true)]
async fn lost_client_flights_are_recovered_by_retransmission() {
    let client_cert = DtlsCertificate::generate().expect("a certificate");
    // The client's first hello and its second flight's first try are lost.
    let outcome = handshake(&client_cert, &client_cert.fingerprint(), |n| {
        n != 0 && n != 1
    })
    .await;
    assert!(
        matches!(outcome.client, Some(Ok(_))),
        "{:?}",
        outcome.client.map(|c| c.err())
    );
    assert!(outcome
        .core
        .peer(outcome.id)
        .is_some_and(|p| p.srtp.is_some()));
}

#[tokio::test(start_paused = true)]
async fn a_certificate_not_matching_the_offer_ends_the_session() {
    let client_cert = DtlsCertificate::generate().expect("a certificate");
    let other = DtlsCertificate::generate().expect("a certificate");
    let mut outcome = handshake(&client_cert, &other.fingerprint(), |_| true).await;
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
    let node = DtlsCertificate::generate().expect("a certificate");
    let clock = Clock::start();
    let (mut core, id) = node_with_session(&node, &client_cert.fingerprint(), &clock);
    // A client hello, then silence: taken from a client that stops after its first flight.
    let (to_core, mut from_client) = mpsc::unbounded_channel::<Bytes>();
    let (_to_client, client_inbound) = mpsc::channel(1);
    let conn = ChannelConn::new(client_inbound, Box::new(move |d| drop(to_core.send(d))));
    let config = client_config(client_certificate(&client_cert), &node, ALL_PROFILES.to_vec());
    let client = tokio::spawn(DTLSConn::new(Arc::new(conn), config, true, None));
    let hello = from_client.recv().await.expect("a client hello");
    client.abort();
    let started = clock.now();
    core.handle_datagram(started, CLIENT, &hello);
    let mut records = 0;
    let mut out = vec![0; MAX_DATAGRAM];
    while core.peer(id).is_some() {
        while let Some((_, len)) = core.poll_datagram(&mut out) {
            records += usize::from(classify(&out[..len]) == PayloadKind::Dtls);
        }
        let at = core
            .poll_timeout()
            .expect("a timer while the handshake runs");
        tokio::time::sleep_until(clock.tokio_instant(at)).await;
        core.handle_timeout(clock.now());
    }
    let ended = clock.now() - started;
    assert!(
        ended >= TIMEOUT && ended < TIMEOUT + Duration::from_secs(1),
        "{ended:?}"
    );
    // The first flight, then its retransmissions on the core's timer.
    assert!(records >= 3, "{records}");
    assert_eq!(core.snapshot().node.dtls_failures, 1);
}
