//! The sans-IO association against the `dtls` crate's client, in memory on a paused clock
//! (`test_pair.rs`), and its contract on its own.

use std::time::{Duration, Instant};

use dtls::conn::DTLSConn;
use dtls::extension::extension_use_srtp::SrtpProtectionProfile;

use super::association::flight_interval;
use super::test_pair::{Command, Event, Link, Pair, Running, ALL_PROFILES};
use super::*;
use crate::node::srtp::{session, SrtpContext, MAX_OVERHEAD};

/// Waits for the association's next event.
async fn next_event(running: &mut Running) -> Event {
    running
        .events
        .recv()
        .await
        .expect("the association's task reports")
}

/// A handshake that must succeed: the client's keys, the association's, the client's end.
async fn handshake(pair: Pair) -> (SrtpKeys, SrtpKeys, DTLSConn, Running) {
    let mut running = pair.start();
    let server = match running.events.recv().await {
        Some(Event::Connected(keys)) => keys,
        other => {
            // A client that never completes would retransmit on the paused clock for ever.
            let client = tokio::time::timeout(Duration::from_secs(120), &mut running.client)
                .await
                .map(|client| client.map(|client| client.err()));
            panic!("the association did not connect: {other:?}, the client: {client:?}")
        }
    };
    let (conn, client) = (&mut running.client)
        .await
        .expect("the client task")
        .expect("the client connects");
    (client, server, conn, running)
}

/// Keys that protect on one side and unprotect on the other, both ways.
pub(super) fn assert_keys_work(ours: &SrtpKeys, theirs: &SrtpKeys) {
    for (from, to) in [(ours, theirs), (theirs, ours)] {
        let mut from = session(from).expect("usable keys");
        let mut to = session(to).expect("usable keys");
        let packet = [0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9, 1, 2, 3, 4];
        let mut buf = packet.to_vec();
        buf.resize(packet.len() + MAX_OVERHEAD, 0);
        let len = from.protect_rtp(&mut buf, packet.len()).expect("protects");
        buf.truncate(len);
        assert_eq!(to.unprotect_rtp(&mut buf), Ok(packet.len()));
        assert_eq!(buf[..packet.len()], packet);
    }
}

#[tokio::test(start_paused = true)]
async fn both_sides_export_the_same_keys_under_each_profile() {
    let offers = [
        (ALL_PROFILES.to_vec(), SrtpProfile::AeadAes256Gcm),
        (ALL_PROFILES[1..].to_vec(), SrtpProfile::AeadAes128Gcm),
        // The stack takes the client's first offer the node makes.
        (
            vec![ALL_PROFILES[2], ALL_PROFILES[1]],
            SrtpProfile::Aes128CmHmacSha1_80,
        ),
        (ALL_PROFILES[2..].to_vec(), SrtpProfile::Aes128CmHmacSha1_80),
    ];
    for (offer, expected) in offers {
        let pair = Pair {
            profiles: offer,
            ..Pair::new()
        };
        let (client, server, _conn, _running) = handshake(pair).await;
        assert_eq!(server.profile, expected);
        assert_eq!(client, server.mirrored());
        assert_eq!(server.local_key.len(), expected.key_len());
        assert_eq!(server.local_salt.len(), expected.salt_len());
        assert_ne!(server.local_key, server.remote_key);
        assert_keys_work(&server, &client);
    }
}

#[tokio::test(start_paused = true)]
async fn lost_and_reordered_flights_are_recovered() {
    let (mut lost, mut reordered) = ((0, 0), (0, 0));
    for seed in 1..=8 {
        let pair = Pair {
            up: Link::lossy(seed, 25, 25),
            down: Link::lossy(seed + 100, 25, 25),
            // Long enough that only a broken recovery runs out of it.
            timeout: Duration::from_secs(60),
            ..Pair::new()
        };
        let (client, server, _conn, running) = handshake(pair).await;
        assert_eq!(client, server.mirrored(), "seed {seed}");
        drop(running.commands);
        let counts = running.server.await.expect("the association's task");
        lost.0 += counts.client_to_server.0;
        reordered.0 += counts.client_to_server.1;
        lost.1 += counts.server_to_client.0;
        reordered.1 += counts.server_to_client.1;
    }
    // The network did its worst both ways.
    assert!(lost.0 > 0 && lost.1 > 0, "lost {lost:?}");
    assert!(
        reordered.0 > 0 && reordered.1 > 0,
        "reordered {reordered:?}"
    );
}

/// The handshake connects with the client's datagrams through `up`, the node's through a
/// link that loses its second (its flight after the cookie exchange), and the association
/// sent that flight again on its timer.
async fn connects_by_the_timer(up: Link) {
    let pair = Pair {
        up,
        down: Link::blackout(|index| index == 1),
        ..Pair::new()
    };
    let (client, server, _conn, running) = handshake(pair).await;
    assert_eq!(client, server.mirrored());
    drop(running.commands);
    let counts = running.server.await.expect("the association's task");
    assert!(counts.sent_on_timeout > 0, "{counts:?}");
}

#[tokio::test(start_paused = true)]
async fn the_association_retransmits_its_flight_on_its_timer() {
    // What the client sends after its second datagram is lost for the next four: only the
    // association's timer can bring the flight again.
    connects_by_the_timer(Link::blackout(|index| (2..6).contains(&index))).await;
}

#[tokio::test(start_paused = true)]
async fn a_lost_answer_comes_again_on_the_timer_while_the_client_repeats_its_hello() {
    // The client's repeats of its hello with the cookie arrive: the association keeps them
    // from the stack, whose timer sends the answer again.
    connects_by_the_timer(Link::perfect()).await;
}

#[tokio::test(start_paused = true)]
async fn a_stalled_peer_fails_at_the_timeout() {
    let timeout = Duration::from_millis(3_500);
    let pair = Pair {
        // The client's first flight arrives twice (the second time with the node's cookie),
        // then nothing more.
        up: Link::blackout(|index| index > 1),
        timeout,
        ..Pair::new()
    };
    let mut running = pair.start();
    match next_event(&mut running).await {
        Event::Failed(DtlsError::Timeout(t), since) => {
            assert_eq!(t, timeout);
            assert_eq!(since, timeout, "at its deadline, from the first record");
        }
        other => panic!("{other:?}"),
    }
    let counts = running.server.await.expect("the association's task");
    // It answered, and retransmitted while waiting.
    assert!(counts.sent_on_timeout > 0, "{counts:?}");
}

#[tokio::test(start_paused = true)]
async fn a_certificate_not_matching_the_sdp_fingerprint_is_refused() {
    let other = DtlsCertificate::generate().expect("certificate");
    let pair = Pair {
        sdp_fingerprint: other.fingerprint(),
        ..Pair::new()
    };
    let mut running = pair.start();
    match next_event(&mut running).await {
        Event::Failed(DtlsError::FingerprintMismatch, _) => {}
        other => panic!("{other:?}"),
    }
    // Refused before the node's last flight: the client never finishes.
    let client = tokio::time::timeout(Duration::from_secs(60), &mut running.client).await;
    assert!(!matches!(client, Ok(Ok(Ok(_)))), "the client connected");
    assert!(running.events.recv().await.is_none(), "nothing after");
}

#[tokio::test(start_paused = true)]
async fn application_data_flows_both_ways_after_connect() {
    let (_, _, client, mut running) = handshake(Pair::new()).await;
    let messages: Vec<Vec<u8>> = vec![b"one".to_vec(), vec![7; 1100], b"three".to_vec()];
    for message in &messages {
        running
            .commands
            .send(Command::Send(message.clone()))
            .expect("the association's task");
        let mut buf = vec![0; 2048];
        let n = client.read(&mut buf, None).await.expect("the client reads");
        assert_eq!(&buf[..n], &message[..]);

        client
            .write(message, None)
            .await
            .expect("the client writes");
        match next_event(&mut running).await {
            Event::ApplicationData(data) => assert_eq!(&data, message),
            other => panic!("{other:?}"),
        }
    }
    // The client's close_notify ends the association.
    client.close().await.expect("closes");
    assert!(matches!(next_event(&mut running).await, Event::Closed));
}

#[tokio::test(start_paused = true)]
async fn closing_sends_close_notify() {
    let (_, _, client, running) = handshake(Pair::new()).await;
    running
        .commands
        .send(Command::Close)
        .expect("the association's task");
    let mut buf = vec![0; 2048];
    assert!(client.read(&mut buf, None).await.is_err(), "closed");
    let counts = running
        .server
        .await
        .expect("the task ends with the association");
    assert!(counts.sent > 0);
}

#[tokio::test(start_paused = true)]
async fn garbage_datagrams_do_not_stop_a_handshake() {
    let garbage: [&[u8]; 6] = [
        b"",
        &[22],
        &[22, 254, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF],
        &[20, 254, 253, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 1],
        &[23, 254, 253, 0, 1, 0, 0, 0, 0, 0, 7, 0, 4, 1, 2, 3, 4],
        &[0xAB; 1400],
    ];
    let mut running = Pair::new().start();
    for datagram in garbage {
        let _ = running.commands.send(Command::Datagram(datagram.to_vec()));
    }
    let server = match next_event(&mut running).await {
        Event::Connected(keys) => keys,
        other => panic!("{other:?}"),
    };
    let (client, keys) = (&mut running.client)
        .await
        .expect("the client task")
        .expect("connected");
    assert_eq!(keys, server.mirrored());
    // After the handshake too: the association reads them and stays up.
    for datagram in garbage {
        let _ = running.commands.send(Command::Datagram(datagram.to_vec()));
    }
    client.write(b"still here", None).await.expect("writes");
    match next_event(&mut running).await {
        Event::ApplicationData(data) => assert_eq!(data, b"still here"),
        other => panic!("{other:?}"),
    }
}

/// A fresh association and its first outputs, without a peer.
fn lone(now: Instant) -> DtlsAssociation {
    let node = DtlsCertificate::generate().expect("certificate");
    let config = DtlsConfig::new(&node, HANDSHAKE_TIMEOUT).expect("configuration");
    let fingerprint = node.fingerprint();
    let (algorithm, value) = fingerprint.split_once(' ').expect("a fingerprint");
    DtlsAssociation::new(now, &config, (algorithm, value)).expect("an association")
}

#[test]
fn the_contract_refuses_misuse_with_errors() {
    let now = Instant::now();
    let mut association = lone(now);
    assert!(matches!(
        association.send_application_data(b"early"),
        Err(DtlsError::NotConnected)
    ));
    let long = vec![22; DATAGRAM_LIMIT + 1];
    assert!(matches!(
        association.handle_datagram(now, &long),
        Err(DtlsError::DatagramTooLong(n)) if n == DATAGRAM_LIMIT + 1
    ));
    assert_eq!(
        association.poll_timeout(),
        Some(now + HANDSHAKE_TIMEOUT),
        "no flight out yet: the deadline"
    );
    let mut small = vec![0; 100];
    assert!(matches!(
        association.poll_output(&mut small),
        Some(DtlsOutput::Failed(DtlsError::BufferTooSmall(100)))
    ));
    assert!(association.poll_output(&mut small).is_none());
    assert!(association.is_ended());
    assert!(matches!(
        association.handle_datagram(now, &[22]),
        Err(DtlsError::Ended)
    ));
    assert_eq!(association.poll_timeout(), None);
}

#[test]
fn a_bad_sdp_fingerprint_refuses_the_association() {
    let node = DtlsCertificate::generate().expect("certificate");
    let config = DtlsConfig::new(&node, HANDSHAKE_TIMEOUT).expect("configuration");
    let now = Instant::now();
    let sha1 = DtlsAssociation::new(now, &config, ("sha-1", "AB:CD"));
    assert!(matches!(sha1, Err(DtlsError::UnsupportedFingerprint(_))));
    let short = DtlsAssociation::new(now, &config, ("sha-256", "AB:CD"));
    assert!(matches!(short, Err(DtlsError::MalformedFingerprint)));
}

#[test]
fn closing_during_the_handshake_ends_it() {
    let mut association = lone(Instant::now());
    association.close();
    assert!(association.is_ended());
    assert!(association.poll_output(&mut [0; DATAGRAM_LIMIT]).is_none());
}

#[test]
fn retransmissions_span_the_timeout() {
    // The stack's 7 retransmissions and its giving up after them: 8 intervals.
    assert_eq!(
        flight_interval(Duration::from_secs(10)),
        Duration::from_millis(1_250)
    );
    assert_eq!(
        flight_interval(Duration::from_secs(16)),
        Duration::from_secs(2)
    );
    assert_eq!(
        flight_interval(Duration::from_millis(100)),
        Duration::from_secs(1)
    );
}

#[test]
fn the_client_profiles_the_tests_offer_are_all_the_node_knows() {
    for profile in ALL_PROFILES {
        assert!(test_client::srtp_profile(profile).is_some(), "{profile:?}");
    }
    assert!(test_client::srtp_profile(SrtpProtectionProfile::Unsupported).is_none());
}

/// A plaintext (epoch 0) handshake record carrying one fragment of message `msg_type`, number
/// `message_seq`, `length` long, from `offset` (RFC 6347 §4.1, §4.2.2).
fn handshake_record(
    record_seq: u64,
    (msg_type, message_seq, length): (u8, u16, usize),
    offset: usize,
    fragment: &[u8],
) -> Vec<u8> {
    let u24 = |n: usize| (n as u32).to_be_bytes()[1..].to_vec();
    let mut record = vec![22, 0xFE, 0xFD, 0, 0];
    record.extend_from_slice(&record_seq.to_be_bytes()[2..]);
    record.extend_from_slice(&((12 + fragment.len()) as u16).to_be_bytes());
    record.push(msg_type);
    record.extend(u24(length));
    record.extend_from_slice(&message_seq.to_be_bytes());
    record.extend(u24(offset));
    record.extend(u24(fragment.len()));
    record.extend_from_slice(fragment);
    record
}

/// A handshake takes in so many bytes and refuses more (the stack would reassemble 2 MB of
/// fragments); records that are not whole are refused before the stack sees them.
#[test]
fn a_handshake_takes_in_bounded_bytes_of_whole_records() {
    let now = Instant::now();
    let mut association = lone(now);
    association
        .handle_datagram(now, &client_hello(now))
        .expect("taken");
    let mut buf = vec![0; DATAGRAM_LIMIT];
    let mut flight = 0;
    while let Some(output) = association.poll_output(&mut buf) {
        assert!(matches!(output, DtlsOutput::Datagram(d) if d.len() <= MTU));
        flight += 1;
    }
    assert!(flight > 0, "the node's first flight");
    for cut in [
        &[22, 0xFE, 0xFD][..],
        &handshake_record(1, (11, 1, 9), 0, b"abc")[..20],
    ] {
        assert!(matches!(
            association.handle_datagram(now, cut),
            Err(DtlsError::MalformedDatagram)
        ));
    }

    // Certificate (11), the client's second message, one fragment per full datagram, never
    // complete.
    let per_datagram = DATAGRAM_LIMIT - 13 - 12;
    let length = 1 << 20;
    let mut refused = None;
    for i in 0..100 {
        let fragment = vec![0x30; per_datagram];
        let record = handshake_record(1 + i as u64, (11, 1, length), i * per_datagram, &fragment);
        assert_eq!(record.len(), DATAGRAM_LIMIT);
        if let Err(err) = association.handle_datagram(now, &record) {
            refused = Some((i, err));
            break;
        }
    }
    let (taken, err) = refused.expect("refused at last");
    assert!(matches!(err, DtlsError::HandshakeTooLong), "{err:?}");
    assert!((40..50).contains(&taken), "{taken} datagrams taken");
    while let Some(output) = association.poll_output(&mut buf) {
        assert!(matches!(output, DtlsOutput::Datagram(_)), "{output:?}");
    }
    assert!(!association.is_ended());
}

/// A record of a later epoch the stack cannot decrypt yet, twice (a duplicated datagram): the
/// stack would assert on the copy (fuzzing found it); the association refuses it instead.
#[test]
fn a_repeated_record_of_a_later_epoch_is_refused_during_the_handshake() {
    let now = Instant::now();
    let mut association = lone(now);
    association
        .handle_datagram(now, &client_hello(now))
        .expect("taken");
    let mut buf = vec![0; DATAGRAM_LIMIT];
    while association.poll_output(&mut buf).is_some() {}
    let mut finished = vec![22, 0xFE, 0xFD, 0, 1, 0, 0, 0, 0, 0, 0, 0, 40];
    finished.extend_from_slice(&[0x5A; 40]);
    association
        .handle_datagram(now, &finished)
        .expect("taken once");
    assert!(matches!(
        association.handle_datagram(now, &finished),
        Err(DtlsError::DuplicateRecord)
    ));
    while let Some(output) = association.poll_output(&mut buf) {
        assert!(matches!(output, DtlsOutput::Datagram(_)), "{output:?}");
    }
    assert!(!association.is_ended());
}
