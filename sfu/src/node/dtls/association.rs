//! One peer's DTLS 1.2 association, server side, sans-IO: datagrams and `now` in; datagrams,
//! a timer and events out. Built on the `rtc-dtls` crate's state machine, with the node's rules
//! around it: the peer's certificate must match its SDP fingerprint before anything of ours
//! follows it, the handshake must finish within the node's timeout from its first record, and
//! the SRTP keys come out of the key export (RFC 5764 §4.2).
//!
//! The stack allocates per record: each datagram in is copied into a `BytesMut` and split into
//! records, and each record out is built in a `Vec` and handed over as a `BytesMut`. That is fine
//! here: DTLS carries the handshake and SCTP (which the node opens no channel for), never media.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use rtc_dtls::config::{ClientAuthType, ConfigBuilder, HandshakeConfig};
use rtc_dtls::endpoint::{Endpoint, EndpointEvent};
use rtc_dtls::extension::extension_use_srtp::SrtpProtectionProfile;
use rtc_shared::error::Error as StackError;
use rtc_shared::TransportProtocol;

use super::early_records::{
    handshake_bytes, has_server_hello, is_client_hello, is_well_framed, EarlyRecords,
};
use super::{
    expected_fingerprint, sha256, split_keying_material, DtlsCertificate, DtlsError, Side,
};
use crate::node::srtp::{SrtpKeys, SrtpProfile};

/// The longest datagram an association takes in, and the least buffer [`DtlsAssociation::
/// poll_output`] needs. Browsers keep DTLS datagrams near 1200 bytes; anything longer is
/// refused before the stack sees it.
pub const DATAGRAM_LIMIT: usize = 1500;

/// The longest datagram an association sends: what browsers use, under IPv6's minimum MTU
/// with the IP and UDP headers.
pub const MTU: usize = 1200;

/// The stack splits a handshake message into fragments of its MTU and then adds the record
/// header (13 bytes) and the fragment's header (12): told this, its datagrams stay in [`MTU`].
const STACK_MTU: usize = MTU - 13 - 12;

/// The most a peer may send through [`DtlsAssociation::send_application_data`] at once: one
/// record of it, with any suite's overhead (at most 64 bytes), stays in [`DATAGRAM_LIMIT`].
const APPLICATION_DATA_LIMIT: usize = MTU;

/// The record bytes a handshake takes in before refusing more: a client's flights, a chain of
/// certificates and retransmissions fit many times over; the stack would reassemble up to
/// 2 MB of fragments.
const HANDSHAKE_BYTES: usize = 64 * 1024;

/// The shortest retransmission interval (RFC 6347 §4.2.4.1's initial timeout).
const FIRST_RTO: Duration = Duration::from_secs(1);

/// Retransmissions of one flight the stack makes before it gives up (its own fixed count; its
/// interval does not grow).
const STACK_RETRANSMITS: u32 = 7;

/// The RFC 5764 §4.2 exporter label for the SRTP keys.
const SRTP_EXPORTER_LABEL: &str = "EXTRACTOR-dtls_srtp";

/// The SRTP profiles the node offers, AES-GCM first. The stack picks the first of the
/// client's offers that is in this list (the client's order decides among them).
const PROFILES: [SrtpProtectionProfile; 3] = [
    SrtpProtectionProfile::Srtp_Aead_Aes_128_Gcm,
    SrtpProtectionProfile::Srtp_Aead_Aes_256_Gcm,
    SrtpProtectionProfile::Srtp_Aes128_Cm_Hmac_Sha1_80,
];

/// The addresses the stack's endpoint is told: it keys its one connection by the peer's, and
/// the core owns the real ones.
const LOCAL: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
const PEER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 1);

/// What every association of the node shares: its certificate, its handshake timeout and the
/// DTLS stack's configuration, checked once (each association adds its peer's fingerprint).
#[derive(Clone)]
pub struct DtlsConfig {
    stack: ConfigBuilder,
    handshake_timeout: Duration,
}

impl std::fmt::Debug for DtlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DtlsConfig")
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl DtlsConfig {
    /// The node's associations' configuration: `certificate` for every peer, and the time a
    /// handshake has from its first record (`dtls_timeout_ms`).
    pub fn new(
        certificate: &DtlsCertificate,
        handshake_timeout: Duration,
    ) -> Result<Self, DtlsError> {
        let stack = ConfigBuilder::default()
            .with_crypto_provider(Arc::clone(&certificate.provider))
            .with_certificates(vec![certificate.stack.clone()])
            .with_srtp_protection_profiles(PROFILES.to_vec())
            // Any certificate, RSA or ECDSA: its fingerprint is what is checked.
            .with_client_auth(ClientAuthType::RequireAnyClientCert)
            // No chain to verify (the server's side of it would otherwise generate a throwaway
            // root certificate for every association it builds).
            .with_insecure_skip_verify(true)
            .with_flight_interval(flight_interval(handshake_timeout))
            .with_mtu(STACK_MTU);
        let config = Self {
            stack,
            handshake_timeout,
        };
        config.for_peer([0; 32]).map_err(DtlsError::Protocol)?;
        Ok(config)
    }

    /// How long a handshake may take from the session's first record before the session ends.
    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }

    /// The stack's configuration for the peer whose certificate hashes to `expected`: the
    /// check runs when its CertificateVerify is in, before the node's last flight, and a
    /// mismatch ends the handshake there.
    fn for_peer(&self, expected: [u8; 32]) -> Result<HandshakeConfig, StackError> {
        self.stack
            .clone()
            .with_verify_peer_certificate(Some(Arc::new(move |certificates: &[Vec<u8>], _| {
                match certificates.first() {
                    Some(der) if sha256(der) == expected => Ok(()),
                    _ => Err(StackError::ErrFingerprintMismatch),
                }
            })))
            .build(false, None)
    }
}

/// The stack's retransmission interval: it retransmits at a fixed interval a fixed number of
/// times, so the interval stretches until those span `timeout` and the handshake's deadline,
/// not the stack, ends a stalled handshake.
pub(super) fn flight_interval(timeout: Duration) -> Duration {
    (timeout / (STACK_RETRANSMITS + 1)).max(FIRST_RTO)
}

/// What an association has for its caller, in the order it happened.
#[derive(Debug)]
pub enum DtlsOutput<'a> {
    /// A datagram for the peer, at the start of the caller's buffer.
    Datagram(&'a [u8]),
    /// The handshake is done, the peer's certificate matched its fingerprint: the SRTP keys,
    /// ours to protect what we send, the peer's to unprotect what it sends.
    Connected(SrtpKeys),
    /// Plaintext the peer sent (SCTP packets), at the start of the caller's buffer.
    ApplicationData(&'a [u8]),
    /// The peer closed the association (`close_notify`). Nothing follows.
    Closed,
    /// The association failed. Nothing follows.
    Failed(DtlsError),
}

/// One peer's DTLS association, the node always the server (`a=setup:passive`).
///
/// Create it on the peer's first DTLS record: its handshake timeout counts from `now` then.
/// Feed it the peer's DTLS datagrams ([`Self::handle_datagram`]) and the timer it asks for
/// ([`Self::poll_timeout`], [`Self::handle_timeout`]). After each of those, and after
/// [`Self::send_application_data`] or [`Self::close`], call [`Self::poll_output`] until it
/// returns `None`: datagrams go to the peer, [`DtlsOutput::Connected`] carries the SRTP keys,
/// and the timer may have moved. Once it reports [`DtlsOutput::Closed`] or
/// [`DtlsOutput::Failed`] the association does nothing more and can be dropped.
pub struct DtlsAssociation {
    /// The stack's endpoint, holding the one connection with [`PEER`].
    endpoint: Endpoint,
    /// The peer's certificate's SHA-256 hash, from its SDP.
    expected: [u8; 32],
    timeout: Duration,
    /// The latest `now` an input brought, to stamp what [`Self::close`] queues.
    now: Instant,
    phase: Phase,
    /// Handshake record bytes taken in since the handshake ended ([`HANDSHAKE_BYTES`]).
    repeated: usize,
    /// What the stack reported, for after the datagrams it queued alongside.
    events: VecDeque<Event>,
}

impl std::fmt::Debug for DtlsAssociation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DtlsAssociation")
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
enum Phase {
    Handshake(Handshake),
    Connected,
    /// We sent `close_notify`: what is queued still goes out, then nothing.
    Closing,
    /// To report once, then [`Phase::Ended`].
    Failing(DtlsError),
    Ended,
}

#[derive(Debug)]
struct Handshake {
    deadline: Instant,
    early: EarlyRecords,
    /// Record bytes taken in so far ([`HANDSHAKE_BYTES`]).
    taken: usize,
    /// The stack sent its ServerHello: it has the peer's hello and waits for its next flight.
    answered: bool,
}

#[derive(Debug)]
enum Event {
    Connected(SrtpKeys),
    ApplicationData(BytesMut),
    Closed,
}

impl DtlsAssociation {
    /// An association with the peer whose SDP `a=fingerprint` is `remote_fingerprint` (hash
    /// algorithm, hex value), its handshake starting `now`.
    pub fn new(
        now: Instant,
        config: &DtlsConfig,
        remote_fingerprint: (&str, &str),
    ) -> Result<Self, DtlsError> {
        let expected = expected_fingerprint(remote_fingerprint)?;
        let stack = config.for_peer(expected).map_err(DtlsError::Protocol)?;
        Ok(Self {
            endpoint: Endpoint::new(LOCAL, TransportProtocol::UDP, Some(Arc::new(stack))),
            expected,
            timeout: config.handshake_timeout,
            now,
            phase: Phase::Handshake(Handshake {
                deadline: now + config.handshake_timeout,
                early: EarlyRecords::default(),
                taken: 0,
                answered: false,
            }),
            repeated: 0,
            events: VecDeque::new(),
        })
    }

    /// One DTLS datagram from the peer. Refused (and to be counted by the caller) when the
    /// association has ended, the datagram is longer than [`DATAGRAM_LIMIT`], is not whole
    /// records, repeats a record the handshake holds undecrypted (`early_records.rs`), repeats
    /// the hello the stack answered, or brings the handshake past its bytes; a record the stack
    /// cannot use it drops itself, and a fatal one fails the association.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) -> Result<(), DtlsError> {
        if self.is_ended() {
            return Err(DtlsError::Ended);
        }
        if datagram.len() > DATAGRAM_LIMIT {
            return Err(DtlsError::DatagramTooLong(datagram.len()));
        }
        // The stack takes a datagram it cannot split into records as an error, which would
        // end the association: such a datagram is only dropped.
        if !is_well_framed(datagram) {
            return Err(DtlsError::MalformedDatagram);
        }
        // A handshake past its deadline fails first.
        self.handle_timeout(now);
        match &mut self.phase {
            Phase::Handshake(handshake) => {
                // The peer repeats its hello when the answer was lost. The stack would take it
                // as the start of the flight it waits for, stop its retransmission timer, and
                // never send the answer again; kept from it, the timer sends the answer again.
                if handshake.answered && is_client_hello(datagram) {
                    return Err(DtlsError::RepeatedHello);
                }
                if handshake.taken + datagram.len() > HANDSHAKE_BYTES {
                    return Err(DtlsError::HandshakeTooLong);
                }
                handshake.early.admit(datagram)?;
                handshake.taken += datagram.len();
            }
            // A genuine peer repeats its final flight when ours was lost (RFC 6347 §4.2.4),
            // so the stack takes handshake records for the association's life, and keeps
            // every fragment of a message it is not waiting for (unencrypted ones from anyone
            // who can send from the peer's address): they are charged as the handshake's were.
            Phase::Connected | Phase::Closing => {
                let repeated = self.repeated + handshake_bytes(datagram);
                if repeated > HANDSHAKE_BYTES {
                    return Err(DtlsError::HandshakeTooLong);
                }
                self.repeated = repeated;
            }
            Phase::Failing(_) | Phase::Ended => return Ok(()),
        }
        match self
            .endpoint
            .read(now, PEER, None, BytesMut::from(datagram))
        {
            Ok(events) => events.into_iter().for_each(|event| self.take(event)),
            Err(err) => self.fail(stack_error(err)),
        }
        Ok(())
    }

    /// When [`Self::handle_timeout`] is next due: a retransmission, the handshake's deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let timer = self.endpoint.poll_timeout(&PEER);
        match &self.phase {
            Phase::Handshake(handshake) => {
                Some(timer.map_or(handshake.deadline, |timer| timer.min(handshake.deadline)))
            }
            Phase::Connected | Phase::Closing => timer,
            // Nothing more to time: a failure waits to be polled.
            Phase::Failing(_) | Phase::Ended => None,
        }
    }

    /// Retransmits what is due, and fails a handshake past its deadline.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        let in_handshake = match &self.phase {
            Phase::Handshake(handshake) if now >= handshake.deadline => {
                self.fail(DtlsError::Timeout(self.timeout));
                return;
            }
            Phase::Handshake(_) => true,
            Phase::Connected | Phase::Closing => false,
            Phase::Failing(_) | Phase::Ended => return,
        };
        match self.endpoint.handle_timeout(PEER, now) {
            // No connection before the first record, none after closing.
            Ok(()) | Err(StackError::InvalidRemoteAddress(_)) => {}
            // Its retransmissions ran out before our deadline (it gives up this way).
            Err(StackError::ErrInvalidFsmTransition) if in_handshake => {
                self.fail(DtlsError::Timeout(self.timeout));
            }
            Err(err) => self.fail(stack_error(err)),
        }
    }

    /// The next output, written into `buf` when it is bytes; `None` once there is nothing
    /// more until the next input. `buf` must hold [`DATAGRAM_LIMIT`] bytes.
    pub fn poll_output<'a>(&mut self, buf: &'a mut [u8]) -> Option<DtlsOutput<'a>> {
        if buf.len() < DATAGRAM_LIMIT && !self.is_ended() {
            self.fail(DtlsError::BufferTooSmall(buf.len()));
        }
        match std::mem::replace(&mut self.phase, Phase::Ended) {
            Phase::Failing(err) => return Some(DtlsOutput::Failed(err)),
            Phase::Ended => return None,
            phase => self.phase = phase,
        }
        if let Some(transmit) = self.endpoint.poll_transmit() {
            if let Phase::Handshake(handshake) = &mut self.phase {
                handshake.answered |= has_server_hello(&transmit.message);
            }
            return Some(match copy_into(buf, &transmit.message) {
                Ok(datagram) => DtlsOutput::Datagram(datagram),
                Err(err) => self.fail_now(err),
            });
        }
        match self.events.pop_front() {
            Some(Event::Connected(keys)) => Some(DtlsOutput::Connected(keys)),
            Some(Event::ApplicationData(data)) => Some(match copy_into(buf, &data) {
                Ok(data) => DtlsOutput::ApplicationData(data),
                Err(err) => self.fail_now(err),
            }),
            Some(Event::Closed) => {
                self.phase = Phase::Ended;
                Some(DtlsOutput::Closed)
            }
            None => {
                if matches!(self.phase, Phase::Closing) {
                    self.phase = Phase::Ended;
                }
                None
            }
        }
    }

    /// Sends `data` (SCTP packets, at most [`MTU`] bytes) to the peer once connected; the
    /// records come out of [`Self::poll_output`]. A failure of the stack ends the association
    /// ([`DtlsError::Ended`] here), the stack's error reported there.
    pub fn send_application_data(&mut self, data: &[u8]) -> Result<(), DtlsError> {
        match self.phase {
            Phase::Connected => {}
            Phase::Handshake(_) => return Err(DtlsError::NotConnected),
            Phase::Closing | Phase::Failing(_) | Phase::Ended => return Err(DtlsError::Ended),
        }
        if data.len() > APPLICATION_DATA_LIMIT {
            return Err(DtlsError::DatagramTooLong(data.len()));
        }
        self.endpoint.write(self.now, PEER, data).map_err(|err| {
            self.fail(DtlsError::Protocol(err));
            DtlsError::Ended
        })
    }

    /// Ends the association: a connected one sends `close_notify` (poll it out), a handshake
    /// stops where it is.
    pub fn close(&mut self) {
        match self.phase {
            Phase::Connected => {
                // The endpoint queues the alert and forgets the connection.
                let _ = self.endpoint.stop(self.now, PEER);
                self.phase = Phase::Closing;
            }
            Phase::Handshake(_) | Phase::Failing(_) => {
                self.discard_pending();
                self.phase = Phase::Ended;
            }
            Phase::Closing | Phase::Ended => {}
        }
    }

    /// The handshake is done and the keys were handed out.
    pub fn is_connected(&self) -> bool {
        matches!(self.phase, Phase::Connected)
    }

    /// Nothing more will come out, nor go in.
    pub fn is_ended(&self) -> bool {
        matches!(self.phase, Phase::Ended)
    }

    /// Fails the association: nothing it queued goes out, the failure is reported next.
    fn fail(&mut self, err: DtlsError) {
        if !self.is_ended() {
            self.phase = Phase::Failing(err);
        }
        self.discard_pending();
    }

    /// Fails the association and reports it now.
    fn fail_now(&mut self, err: DtlsError) -> DtlsOutput<'static> {
        self.phase = Phase::Ended;
        self.discard_pending();
        DtlsOutput::Failed(err)
    }

    fn discard_pending(&mut self) {
        self.events.clear();
        while self.endpoint.poll_transmit().is_some() {}
    }

    /// Takes in what the stack reported.
    fn take(&mut self, event: EndpointEvent) {
        match event {
            EndpointEvent::HandshakeComplete => match self.connect() {
                Ok(keys) => {
                    self.phase = Phase::Connected;
                    self.events.push_back(Event::Connected(keys));
                }
                Err(err) => self.fail(err),
            },
            EndpointEvent::ApplicationData(data) if self.is_connected() => {
                self.events.push_back(Event::ApplicationData(data));
            }
            EndpointEvent::PeerClosed => self.events.push_back(Event::Closed),
            // Nothing else is the peer's before the handshake's end.
            _ => {}
        }
    }

    /// At the handshake's end: the peer's certificate checked again (the stack ran the check
    /// when it came, as its CertificateVerify was in), the profile agreed, the keys exported.
    fn connect(&self) -> Result<SrtpKeys, DtlsError> {
        let state = self
            .endpoint
            .get_connection_state(PEER)
            .ok_or(DtlsError::NotConnected)?;
        match state.peer_certificates.first() {
            Some(der) if sha256(der) == self.expected => {}
            Some(_) => return Err(DtlsError::FingerprintMismatch),
            None => return Err(DtlsError::NoCertificate),
        }
        let profile =
            srtp_profile(state.srtp_protection_profile()).ok_or(DtlsError::NoSrtpProfile)?;
        let length = 2 * (profile.key_len() + profile.salt_len());
        let material = state
            .export_keying_material(SRTP_EXPORTER_LABEL, &[], length)
            .map_err(DtlsError::Protocol)?;
        split_keying_material(profile, material.as_ref(), Side::Server)
            .ok_or(DtlsError::NoSrtpProfile)
    }
}

/// `bytes` at the start of `buf`, when they fit.
fn copy_into<'a>(buf: &'a mut [u8], bytes: &[u8]) -> Result<&'a [u8], DtlsError> {
    let out = buf
        .get_mut(..bytes.len())
        .ok_or(DtlsError::BufferTooSmall(bytes.len()))?;
    out.copy_from_slice(bytes);
    Ok(out)
}

/// The node's error for what ended the stack's handshake.
fn stack_error(err: StackError) -> DtlsError {
    match err {
        StackError::ErrFingerprintMismatch => DtlsError::FingerprintMismatch,
        StackError::ErrClientCertificateRequired
        | StackError::ErrCertificateVerifyNoCertificate => DtlsError::NoCertificate,
        StackError::ErrServerNoMatchingSrtpProfile => DtlsError::NoSrtpProfile,
        other => DtlsError::Protocol(other),
    }
}

pub(super) fn srtp_profile(profile: SrtpProtectionProfile) -> Option<SrtpProfile> {
    match profile {
        SrtpProtectionProfile::Srtp_Aead_Aes_128_Gcm => Some(SrtpProfile::AeadAes128Gcm),
        SrtpProtectionProfile::Srtp_Aead_Aes_256_Gcm => Some(SrtpProfile::AeadAes256Gcm),
        SrtpProtectionProfile::Srtp_Aes128_Cm_Hmac_Sha1_80 => {
            Some(SrtpProfile::Aes128CmHmacSha1_80)
        }
        _ => None,
    }
}
