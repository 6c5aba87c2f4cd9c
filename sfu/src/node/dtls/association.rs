//! One peer's DTLS 1.2 association, server side, sans-IO: datagrams and `now` in; datagrams,
//! a timer and events out. Built on the `dimpl` crate's state machine, with the node's rules
//! around it: the peer's certificate must match its SDP fingerprint before anything of ours
//! follows it, the handshake must finish within the node's timeout from its first record, and
//! the SRTP keys come out of the key export (RFC 5764 §4.2).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dimpl::{Dtls, Output};

use super::early_records::EarlyRecords;
use super::{
    expected_fingerprint, sha256, split_keying_material, DtlsCertificate, DtlsError, Side,
};
use crate::node::srtp::{SrtpKeys, SrtpProfile};

/// The longest datagram an association takes in, and the least buffer [`DtlsAssociation::
/// poll_output`] needs. Browsers keep DTLS datagrams near 1200 bytes; anything longer is
/// refused before the stack sees it, which bounds what a handshake message can grow to.
pub const DATAGRAM_LIMIT: usize = 1500;

/// The longest datagram an association sends: what browsers use, under IPv6's minimum MTU
/// with the IP and UDP headers.
pub const MTU: usize = 1200;

/// Datagrams the stack holds before refusing more (it drops them as handled; out-of-order
/// handshake fragments wait here).
const RECEIVE_QUEUE: usize = 16;

/// Records the stack holds to send (application data waits here between polls).
const SEND_QUEUE: usize = 64;

/// The handshake's buffer: the peer's certificate comes out of the stack whole, and can only
/// be as long as the datagrams queued to carry it.
const HANDSHAKE_BUFFER: usize = RECEIVE_QUEUE * DATAGRAM_LIMIT;

/// The first flight's retransmission timeout; it doubles per retry (RFC 6347 §4.2.4.1).
const FIRST_RTO: Duration = Duration::from_secs(1);

/// What every association of the node shares: its certificate, its handshake timeout and the
/// DTLS stack's configuration, built once (building it checks the crypto provider).
#[derive(Clone)]
pub struct DtlsConfig {
    stack: Arc<dimpl::Config>,
    certificate: dimpl::DtlsCertificate,
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
        let stack = dimpl::Config::builder()
            .mtu(MTU)
            .max_queue_rx(RECEIVE_QUEUE)
            .max_queue_tx(SEND_QUEUE)
            .require_client_certificate(true)
            // The cookie proves the client receives at its address (RFC 6347 §4.2.1); ICE's
            // checks proved that already, and the round trip would delay every session.
            .use_server_cookie(false)
            .flight_start_rto(FIRST_RTO)
            .flight_retries(retries_covering(handshake_timeout))
            .handshake_timeout(handshake_timeout)
            .build()
            .map_err(DtlsError::Protocol)?;
        Ok(Self {
            stack: Arc::new(stack),
            certificate: certificate.der.clone(),
            handshake_timeout,
        })
    }

    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }
}

/// Retransmissions of one flight, doubling from [`FIRST_RTO`], that it takes to span
/// `timeout` and a first RTO more (the stack jitters each by a quarter second): the
/// handshake's deadline, not the stack's retry count, ends a stalled handshake.
pub(super) fn retries_covering(timeout: Duration) -> usize {
    let mut spanned = FIRST_RTO;
    let mut rto = FIRST_RTO;
    let mut retries = 0;
    while spanned < timeout + FIRST_RTO && retries < 16 {
        rto *= 2;
        spanned += rto;
        retries += 1;
    }
    retries.max(1)
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
    dtls: Dtls,
    /// The peer's certificate's SHA-256 hash, from its SDP.
    expected: [u8; 32],
    timeout: Duration,
    /// When the stack asked to be woken.
    timer: Option<Instant>,
    phase: Phase,
    /// Where the stack's outputs land during the handshake, the peer's certificate among
    /// them ([`HANDSHAKE_BUFFER`]); released once connected.
    handshake_buffer: Vec<u8>,
}

impl std::fmt::Debug for DtlsAssociation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DtlsAssociation")
            .field("phase", &self.phase)
            .field("timer", &self.timer)
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

/// What the handshake has learnt so far.
#[derive(Debug)]
struct Handshake {
    deadline: Instant,
    /// The peer's certificate matched its fingerprint.
    verified: bool,
    /// The stack reported the handshake done.
    done: bool,
    keys: Option<SrtpKeys>,
    early: EarlyRecords,
}

/// One output of the stack, with what it wrote reduced to where it is in the buffer, so the
/// buffer's borrow ends here and the caller's output can take it whole.
enum Polled {
    Packet(std::ops::Range<usize>),
    ApplicationData(std::ops::Range<usize>),
    PeerCertificate([u8; 32]),
    Keys(Option<SrtpKeys>),
    Connected,
    CloseNotify,
    Timeout(Instant),
    BufferTooSmall(usize),
    Unknown,
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
        let dtls = Dtls::new_12(Arc::clone(&config.stack), config.certificate.clone(), now);
        let mut association = Self {
            dtls,
            expected,
            timeout: config.handshake_timeout,
            timer: None,
            phase: Phase::Handshake(Handshake {
                deadline: now + config.handshake_timeout,
                verified: false,
                done: false,
                keys: None,
                early: EarlyRecords::default(),
            }),
            handshake_buffer: vec![0; HANDSHAKE_BUFFER],
        };
        // The stack arms its timers and draws its random on its first timeout; a record must
        // not come first.
        association.handle_timeout(now);
        Ok(association)
    }

    /// One DTLS datagram from the peer. Refused (and to be counted by the caller) when the
    /// association has ended, the datagram is longer than [`DATAGRAM_LIMIT`] or repeats a
    /// record the handshake holds undecrypted (`early_records.rs`); a datagram the stack
    /// cannot use it drops itself, and a fatal one fails the association.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) -> Result<(), DtlsError> {
        if self.is_ended() {
            return Err(DtlsError::Ended);
        }
        if datagram.len() > DATAGRAM_LIMIT {
            return Err(DtlsError::DatagramTooLong(datagram.len()));
        }
        // The stack reads its clock from its last timeout: bring it to `now` first.
        self.handle_timeout(now);
        match &mut self.phase {
            Phase::Handshake(handshake) => handshake.early.admit(datagram)?,
            Phase::Connected | Phase::Closing => {}
            Phase::Failing(_) | Phase::Ended => return Ok(()),
        }
        if let Err(err) = self.dtls.handle_packet(datagram) {
            self.fail(DtlsError::Protocol(err));
        }
        Ok(())
    }

    /// When [`Self::handle_timeout`] is next due: a retransmission, the handshake's deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Handshake(handshake) => Some(
                self.timer
                    .map_or(handshake.deadline, |timer| timer.min(handshake.deadline)),
            ),
            Phase::Connected | Phase::Closing => self.timer,
            // Nothing more to time: a failure waits to be polled.
            Phase::Failing(_) | Phase::Ended => None,
        }
    }

    /// Retransmits what is due, and fails a handshake past its deadline.
    pub fn handle_timeout(&mut self, now: Instant) {
        match &self.phase {
            Phase::Handshake(handshake) if now >= handshake.deadline => {
                self.fail(DtlsError::Timeout(self.timeout));
                return;
            }
            Phase::Handshake(_) | Phase::Connected | Phase::Closing => {}
            Phase::Failing(_) | Phase::Ended => return,
        }
        if let Err(err) = self.dtls.handle_timeout(now) {
            let err = match err {
                // Its own timers ran out before ours (a timeout beyond its retries).
                dimpl::Error::Timeout(_) => DtlsError::Timeout(self.timeout),
                other => DtlsError::Protocol(other),
            };
            self.fail(err);
        }
    }

    /// The next output, written into `buf` when it is bytes; `None` once there is nothing
    /// more until the next input. `buf` must hold [`DATAGRAM_LIMIT`] bytes.
    pub fn poll_output<'a>(&mut self, buf: &'a mut [u8]) -> Option<DtlsOutput<'a>> {
        if buf.len() < DATAGRAM_LIMIT && !self.is_ended() {
            self.fail(DtlsError::BufferTooSmall(buf.len()));
        }
        loop {
            match std::mem::replace(&mut self.phase, Phase::Ended) {
                Phase::Failing(err) => return Some(DtlsOutput::Failed(err)),
                Phase::Ended => return None,
                phase => self.phase = phase,
            }
            let in_handshake = matches!(self.phase, Phase::Handshake(_));
            let polled = if in_handshake {
                poll(&mut self.dtls, &mut self.handshake_buffer)
            } else {
                poll(&mut self.dtls, buf)
            };
            match polled {
                Polled::Packet(range) if in_handshake => {
                    let len = range.len();
                    buf[..len].copy_from_slice(&self.handshake_buffer[range]);
                    return Some(DtlsOutput::Datagram(&buf[..len]));
                }
                Polled::Packet(range) => return Some(DtlsOutput::Datagram(&buf[range])),
                Polled::ApplicationData(range) if !in_handshake => {
                    return Some(DtlsOutput::ApplicationData(&buf[range]));
                }
                Polled::Timeout(at) => {
                    self.timer = Some(at);
                    return self.end_of_poll();
                }
                Polled::CloseNotify => {
                    self.phase = Phase::Ended;
                    return Some(DtlsOutput::Closed);
                }
                // Outputs fit `buf` and the handshake's buffer (see their sizes): the stack
                // asking for more is a bug, and would ask again on every poll.
                Polled::BufferTooSmall(needed) => self.fail(DtlsError::BufferTooSmall(needed)),
                other => {
                    if let Some(output) = self.handshake_step(other) {
                        return Some(output);
                    }
                }
            }
        }
    }

    /// Sends `data` (SCTP packets) to the peer once connected; the records come out of
    /// [`Self::poll_output`]. A failure of the stack fails the association, reported there.
    pub fn send_application_data(&mut self, data: &[u8]) -> Result<(), DtlsError> {
        match self.phase {
            Phase::Connected => {}
            Phase::Handshake(_) => return Err(DtlsError::NotConnected),
            Phase::Closing | Phase::Failing(_) | Phase::Ended => return Err(DtlsError::Ended),
        }
        self.dtls.send_application_data(data).map_err(|err| {
            self.fail(DtlsError::Protocol(err.clone()));
            DtlsError::Protocol(err)
        })
    }

    /// Ends the association: a connected one sends `close_notify` (poll it out), a handshake
    /// stops where it is.
    pub fn close(&mut self) {
        match self.phase {
            Phase::Connected => {
                self.phase = match self.dtls.close() {
                    Ok(()) => Phase::Closing,
                    Err(_) => Phase::Ended,
                };
            }
            Phase::Handshake(_) | Phase::Failing(_) => self.phase = Phase::Ended,
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

    fn fail(&mut self, err: DtlsError) {
        if !self.is_ended() {
            self.phase = Phase::Failing(err);
        }
        self.handshake_buffer = Vec::new();
    }

    /// Takes in what the stack reported during the handshake; the output to return, if any.
    fn handshake_step(&mut self, polled: Polled) -> Option<DtlsOutput<'static>> {
        let Phase::Handshake(handshake) = &mut self.phase else {
            // After the handshake the stack reports nothing of it again; what it might is
            // ignored rather than trusted.
            return None;
        };
        match polled {
            Polled::PeerCertificate(hash) if hash == self.expected => handshake.verified = true,
            Polled::PeerCertificate(_) => self.fail(DtlsError::FingerprintMismatch),
            Polled::Keys(Some(keys)) => handshake.keys = Some(keys),
            Polled::Keys(None) => self.fail(DtlsError::NoSrtpProfile),
            Polled::Connected => handshake.done = true,
            // Application data before the handshake's end is not the peer's yet.
            Polled::ApplicationData(_) | Polled::Unknown => {}
            Polled::Packet(_) | Polled::Timeout(_) | Polled::CloseNotify => {}
            Polled::BufferTooSmall(_) => {}
        }
        self.connect_when_ready()
    }

    /// The `Connected` output once the stack is done, the certificate matched and the keys
    /// are in; the handshake's buffer goes.
    fn connect_when_ready(&mut self) -> Option<DtlsOutput<'static>> {
        let Phase::Handshake(handshake) = &mut self.phase else {
            return None;
        };
        if !(handshake.done && handshake.verified) {
            return None;
        }
        let keys = handshake.keys.take()?;
        self.phase = Phase::Connected;
        self.handshake_buffer = Vec::new();
        Some(DtlsOutput::Connected(keys))
    }

    /// At the end of a poll cycle: a closing association has sent its `close_notify`, and a
    /// handshake the stack called done must have brought a verified certificate and keys.
    fn end_of_poll(&mut self) -> Option<DtlsOutput<'static>> {
        let handshake = match &self.phase {
            Phase::Closing => {
                self.phase = Phase::Ended;
                return None;
            }
            Phase::Handshake(handshake) if handshake.done => handshake,
            _ => return None,
        };
        let err = if !handshake.verified {
            DtlsError::NoCertificate
        } else {
            DtlsError::NoSrtpProfile
        };
        self.phase = Phase::Ended;
        self.handshake_buffer = Vec::new();
        Some(DtlsOutput::Failed(err))
    }
}

/// One output of the stack, polled into `buf`.
fn poll(dtls: &mut Dtls, buf: &mut [u8]) -> Polled {
    let start = buf.as_ptr() as usize;
    // Where in `buf` the stack wrote `bytes`.
    let at = |bytes: &[u8]| {
        let offset = (bytes.as_ptr() as usize).saturating_sub(start);
        offset..offset + bytes.len()
    };
    match dtls.poll_output(buf) {
        Output::Packet(bytes) => Polled::Packet(at(bytes)),
        Output::ApplicationData(bytes) => Polled::ApplicationData(at(bytes)),
        Output::PeerCert(der) => Polled::PeerCertificate(sha256(der)),
        Output::KeyingMaterial(material, profile) => Polled::Keys(
            srtp_profile(profile)
                .and_then(|profile| split_keying_material(profile, &material, Side::Server)),
        ),
        Output::Connected => Polled::Connected,
        Output::CloseNotify => Polled::CloseNotify,
        Output::Timeout(at) => Polled::Timeout(at),
        Output::BufferTooSmall { needed } => Polled::BufferTooSmall(needed),
        _ => Polled::Unknown,
    }
}

fn srtp_profile(profile: dimpl::SrtpProfile) -> Option<SrtpProfile> {
    match profile {
        dimpl::SrtpProfile::AEAD_AES_128_GCM => Some(SrtpProfile::AeadAes128Gcm),
        dimpl::SrtpProfile::AEAD_AES_256_GCM => Some(SrtpProfile::AeadAes256Gcm),
        dimpl::SrtpProfile::AES128_CM_SHA1_80 => Some(SrtpProfile::Aes128CmHmacSha1_80),
        _ => None,
    }
}
