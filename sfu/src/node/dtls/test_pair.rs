//! A [`DtlsAssociation`] and an independent client (the `dtls` crate's async stack) in memory,
//! with a network between them that loses and reorders datagrams from a seeded RNG. It runs
//! on tokio's paused clock, which only moves when every task waits: the association's `now`
//! is read from it, so timers, retransmissions and timeouts play out the same on every run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtls::config::{Config, ExtendedMasterSecretType};
use dtls::conn::DTLSConn;
use dtls::crypto::Certificate;
use dtls::extension::extension_use_srtp::SrtpProtectionProfile;
use tokio::sync::mpsc;

use super::test_client::{client_certificate, export_keys, fingerprint, ChannelConn, ClientError};
use super::{sha256, DtlsAssociation, DtlsCertificate, DtlsConfig, DtlsError, DtlsOutput, Side};
use super::{DATAGRAM_LIMIT, HANDSHAKE_TIMEOUT};
use crate::node::srtp::SrtpKeys;

/// Every profile the client can offer, in the order browsers offer the AEAD ones.
pub(crate) const ALL_PROFILES: [SrtpProtectionProfile; 3] = [
    SrtpProtectionProfile::Srtp_Aead_Aes_256_Gcm,
    SrtpProtectionProfile::Srtp_Aead_Aes_128_Gcm,
    SrtpProtectionProfile::Srtp_Aes128_Cm_Hmac_Sha1_80,
];

/// One direction of the network: each datagram is lost with `loss_percent`, or held back
/// and delivered after the next one with `reorder_percent`.
#[derive(Debug, Clone)]
pub(super) struct Link {
    rng: u64,
    pub loss_percent: u64,
    pub reorder_percent: u64,
    held: Option<Bytes>,
    /// Lose everything while this returns true for the datagram's index.
    blackout: fn(usize) -> bool,
    passed: usize,
    pub lost: usize,
    pub reordered: usize,
}

impl Link {
    pub fn perfect() -> Self {
        Self::lossy(0, 0, 0)
    }

    pub fn lossy(seed: u64, loss_percent: u64, reorder_percent: u64) -> Self {
        Self {
            // Never zero: xorshift would stay there.
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            loss_percent,
            reorder_percent,
            held: None,
            blackout: |_| false,
            passed: 0,
            lost: 0,
            reordered: 0,
        }
    }

    /// A perfect link that loses the datagrams whose index `blackout` picks.
    pub fn blackout(blackout: fn(usize) -> bool) -> Self {
        Self {
            blackout,
            ..Self::perfect()
        }
    }

    /// What arrives, in order, when `datagram` is sent.
    fn pass(&mut self, datagram: Bytes) -> Vec<Bytes> {
        let index = self.passed;
        self.passed += 1;
        if (self.blackout)(index) || self.roll() < self.loss_percent {
            self.lost += 1;
            return Vec::new();
        }
        if self.held.is_none() && self.roll() < self.reorder_percent {
            self.reordered += 1;
            self.held = Some(datagram);
            return Vec::new();
        }
        std::iter::once(datagram).chain(self.held.take()).collect()
    }

    /// 0 to 99.
    fn roll(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % 100
    }
}

/// What the association reported, with the time since it was created.
#[derive(Debug)]
pub(super) enum Event {
    Connected(SrtpKeys),
    ApplicationData(Vec<u8>),
    Closed,
    Failed(DtlsError, Duration),
}

/// What the test asks of the association's task.
#[derive(Debug)]
pub(super) enum Command {
    Send(Vec<u8>),
    Close,
    Datagram(Vec<u8>),
}

/// How the association's task fared, once it stopped.
#[derive(Debug, Default)]
pub(super) struct Counts {
    /// Datagrams it sent.
    pub sent: usize,
    /// Of those, sent from a timeout: retransmissions.
    pub sent_on_timeout: usize,
    pub client_to_server: (usize, usize),
    pub server_to_client: (usize, usize),
}

/// The two ends, before the handshake.
pub(super) struct Pair {
    pub node: DtlsCertificate,
    pub client_cert: Certificate,
    /// What the association is told the client's fingerprint is.
    pub sdp_fingerprint: String,
    pub timeout: Duration,
    pub up: Link,
    pub down: Link,
    pub profiles: Vec<SrtpProtectionProfile>,
}

/// The running pair: the client's handshake to await, the association's events and commands.
pub(super) struct Running {
    pub client: tokio::task::JoinHandle<Result<(DTLSConn, SrtpKeys), ClientError>>,
    pub events: mpsc::UnboundedReceiver<Event>,
    pub commands: mpsc::UnboundedSender<Command>,
    pub server: tokio::task::JoinHandle<Counts>,
}

impl Pair {
    pub fn new() -> Self {
        let client_cert = client_certificate(&DtlsCertificate::generate().expect("certificate"));
        Self {
            node: DtlsCertificate::generate().expect("certificate"),
            sdp_fingerprint: fingerprint(&client_cert),
            client_cert,
            timeout: HANDSHAKE_TIMEOUT,
            up: Link::perfect(),
            down: Link::perfect(),
            profiles: ALL_PROFILES.to_vec(),
        }
    }

    /// Starts both ends: the client sends its first flight, and the association is created
    /// when it arrives.
    pub fn start(self) -> Running {
        let (to_server, from_client) = mpsc::unbounded_channel::<Bytes>();
        let (to_client, client_inbound) = mpsc::channel(256);
        let conn = ChannelConn::new(
            client_inbound,
            Box::new(move |datagram| {
                let _ = to_server.send(datagram);
            }),
        );
        let config = client_config(self.client_cert.clone(), &self.node, self.profiles.clone());
        let client = tokio::spawn(async move {
            let dtls = DTLSConn::new(Arc::new(conn), config, true, None)
                .await
                .map_err(ClientError::Handshake)?;
            let keys = export_keys(&dtls, Side::Client).await?;
            Ok((dtls, keys))
        });
        let (events_tx, events) = mpsc::unbounded_channel();
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let server = tokio::spawn(serve(self, from_client, to_client, events_tx, commands_rx));
        Running {
            client,
            events,
            commands,
            server,
        }
    }
}

pub(crate) fn client_config(
    cert: Certificate,
    node: &DtlsCertificate,
    profiles: Vec<SrtpProtectionProfile>,
) -> Config {
    let node_hash = sha256(node.der());
    Config {
        certificates: vec![cert],
        srtp_protection_profiles: profiles,
        extended_master_secret: ExtendedMasterSecretType::Require,
        // As a browser does: the node's certificate is trusted for its SDP fingerprint.
        insecure_skip_verify: true,
        verify_peer_certificate: Some(Arc::new(move |certs: &[Vec<u8>], _| match certs.first() {
            Some(der) if sha256(der) == node_hash => Ok(()),
            _ => Err(dtls::Error::ErrInvalidCertificate),
        })),
        server_name: "strata".to_owned(),
        ..Config::default()
    }
}

/// The node's side: the association created on the client's first datagram, then fed the
/// network's datagrams, its timer and the test's commands until it ends or the test goes.
async fn serve(
    mut pair: Pair,
    mut from_client: mpsc::UnboundedReceiver<Bytes>,
    to_client: mpsc::Sender<Bytes>,
    events: mpsc::UnboundedSender<Event>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) -> Counts {
    let clock = Clock::start();
    let config = DtlsConfig::new(&pair.node, pair.timeout).expect("a configuration");
    let mut counts = Counts::default();
    let Some(first) = from_client.recv().await else {
        return counts;
    };
    let created = clock.now();
    let (algorithm, value) = pair.sdp_fingerprint.split_once(' ').expect("a fingerprint");
    let mut association =
        DtlsAssociation::new(created, &config, (algorithm, value)).expect("the association");
    let mut arrived: Vec<Bytes> = pair.up.pass(first);
    let mut buf = vec![0; DATAGRAM_LIMIT];
    let mut on_timeout = false;
    // A client that gave up stops sending; the association runs on to its own end.
    let mut client_gone = false;
    loop {
        for datagram in arrived.drain(..) {
            let _ = association.handle_datagram(clock.now(), &datagram);
        }
        while let Some(output) = association.poll_output(&mut buf) {
            let since = clock.now() - created;
            match output {
                DtlsOutput::Datagram(datagram) => {
                    counts.sent += 1;
                    counts.sent_on_timeout += usize::from(on_timeout);
                    for datagram in pair.down.pass(Bytes::copy_from_slice(datagram)) {
                        let _ = to_client.try_send(datagram);
                    }
                }
                DtlsOutput::Connected(keys) => {
                    let _ = events.send(Event::Connected(keys));
                }
                DtlsOutput::ApplicationData(data) => {
                    let _ = events.send(Event::ApplicationData(data.to_vec()));
                }
                DtlsOutput::Closed => {
                    let _ = events.send(Event::Closed);
                }
                DtlsOutput::Failed(err) => {
                    let _ = events.send(Event::Failed(err, since));
                }
            }
        }
        on_timeout = false;
        if association.is_ended() {
            break;
        }
        let wake = association.poll_timeout().map(|at| clock.tokio_instant(at));
        tokio::select! {
            datagram = from_client.recv(), if !client_gone => match datagram {
                Some(datagram) => arrived = pair.up.pass(datagram),
                None => client_gone = true,
            },
            command = commands.recv() => match command {
                Some(Command::Send(data)) => {
                    let _ = association.send_application_data(&data);
                }
                Some(Command::Close) => association.close(),
                Some(Command::Datagram(datagram)) => arrived = vec![Bytes::from(datagram)],
                None => break,
            },
            () = sleep_until(wake) => {
                association.handle_timeout(clock.now());
                on_timeout = true;
            }
        }
    }
    counts.client_to_server = (pair.up.lost, pair.up.reordered);
    counts.server_to_client = (pair.down.lost, pair.down.reordered);
    counts
}

pub(crate) async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The association's clock: a fixed `Instant` moved on by tokio's (paused) clock.
pub(crate) struct Clock {
    base: Instant,
    tokio_base: tokio::time::Instant,
}

impl Clock {
    pub(crate) fn start() -> Self {
        Self {
            base: Instant::now(),
            tokio_base: tokio::time::Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Instant {
        self.base + self.tokio_base.elapsed()
    }

    pub(crate) fn tokio_instant(&self, at: Instant) -> tokio::time::Instant {
        self.tokio_base + at.saturating_duration_since(self.base)
    }
}
