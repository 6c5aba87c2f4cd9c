//! The node's core with sessions set up as browsers set them up, written once for the tests,
//! the fuzz bodies and the benches: each session's ICE credentials, the binding request that
//! nominates its address, the keys its DTLS handshake would have exported, and the AV1
//! publisher and viewers most of them start from. Behind the `testing` feature (the crate's
//! own tests turn it on), so an embedder's build has none of it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

use rtp_ext::codec::Codec;
use selector::Layer;

use super::core::{NodeCore, MAX_DATAGRAM};
use super::peer::{
    IceCredentials, Join, PeerId, PublishedTrack, Publisher, RemoteIce, Viewer, ViewerCodec,
    ViewerMedia,
};
use super::remote::Remote;
use super::sdp::{
    negotiate_participant, parse_offer_within, random_ice_credentials, AnswerParams, Fingerprint,
    MAX_PARTICIPANT_SDP_LEN,
};
use super::signaling::{participant_answer, participant_offer};
use super::srtp::{session, SrtpContext, SrtpKeys, SrtpProfile, Unprotected};
use crate::engine::TrackConfig;

/// The AV1 payload type of [`av1_viewer`]; its RTX is the next one.
pub const AV1_PT: u8 = 45;
/// The Dependency Descriptor's extension id in [`av1_room`], both ways.
pub const DD_EXT: u8 = 11;

/// The ICE credentials of session `n`: each session's own, as the node makes up for its answer.
pub fn credentials(n: u32) -> IceCredentials {
    IceCredentials {
        local_ufrag: format!("ufrag{n}"),
        local_pwd: format!("password-of-session-{n:04}"),
    }
}

/// A binding request for the session of `ice`, as its browser sends one; `nominate` adds
/// USE-CANDIDATE, which makes the node take the address it came from.
pub fn binding_request(ice: &IceCredentials, nominate: bool) -> Vec<u8> {
    let username = format!("{}:browser", ice.local_ufrag);
    super::ice::binding_request(&username, &ice.local_pwd, nominate).expect("a valid request")
}

/// The browser's own ICE credentials beside the node's `ice`: what its offer named, and what
/// the node's checks of an address it moves to are signed with.
pub fn browser_ice(ice: &IceCredentials) -> RemoteIce {
    RemoteIce {
        ufrag: "browser".into(),
        pwd: format!("browser-{}", ice.local_pwd),
    }
}

/// A join to `room` as signaling makes one from an offer: the node's credentials `ice`, and
/// the browser's ([`browser_ice`]).
pub fn join(room: &str, ice: IceCredentials) -> Join {
    Join {
        remote_ice: Some(browser_ice(&ice)),
        ..Join::new(room, ice)
    }
}

/// The browser's answer to the node's `check` of an address session `ice` was nominated at:
/// the check's transaction, signed with the browser's password.
pub fn answer_check(check: &[u8], ice: &IceCredentials) -> Vec<u8> {
    let request = super::ice::BindingRequest::parse(check).expect("a binding request");
    let node = SocketAddr::from(([192, 0, 2, 9], 3478));
    let password = browser_ice(ice).pwd;
    request.answer(&password, node).expect("signed")
}

/// A join to `room` whose offer named the certificate `fingerprint` (`"sha-256 AB:CD:..."`):
/// the session's first DTLS record starts a handshake in the core.
pub fn join_with_fingerprint(room: &str, ice: IceCredentials, fingerprint: &str) -> Join {
    let (algorithm, value) = fingerprint.split_once(' ').expect("algorithm and value");
    Join {
        fingerprint: Some(Fingerprint {
            algorithm: algorithm.to_owned(),
            value: value.to_owned(),
        }),
        ..join(room, ice)
    }
}

/// A conference participant joined to `room` under `name` as signaling joins one: its offer
/// read and planned, the session added with the offer's fingerprint and fresh ICE
/// credentials, and the node's answer written (ICE lite, the one host candidate `node`, the
/// node's certificate `fingerprint` as `"sha-256 AB:CD:..."`). Why, when the offer or the join
/// is refused.
pub fn join_participant(
    core: &mut NodeCore,
    now: Instant,
    (room, name): (&str, &str),
    offer: &str,
    (fingerprint, node): (&str, SocketAddr),
) -> Result<(PeerId, String), String> {
    let offer = parse_offer_within(offer, MAX_PARTICIPANT_SDP_LEN).map_err(|e| e.to_string())?;
    let plan = negotiate_participant(&offer).map_err(|e| e.to_string())?;
    let participant = participant_offer(&plan, &offer).map_err(|e| e.to_string())?;
    let (local_ufrag, local_pwd) = random_ice_credentials();
    let ice = IceCredentials {
        local_ufrag,
        local_pwd,
    };
    let join = Join {
        name: Some(name.to_owned()),
        fingerprint: Some(offer.fingerprint.clone()),
        remote_ice: Some(RemoteIce {
            ufrag: offer.ice_ufrag.clone(),
            pwd: offer.ice_pwd.clone(),
        }),
        ..Join::new(room, ice)
    };
    let negotiated = core
        .add_participant(now, join, participant)
        .map_err(|e| e.to_string())?;
    let params = AnswerParams {
        ice_ufrag: negotiated.ice.local_ufrag.clone(),
        ice_pwd: negotiated.ice.local_pwd.clone(),
        fingerprint: fingerprint
            .split_once(' ')
            .map_or(fingerprint, |(_, hex)| hex)
            .to_owned(),
        candidates: vec![node],
        tcp_candidate: None,
        extmap_allow_mixed: plan.extmap_allow_mixed,
        video_fmtp_suffix: None,
        media: Vec::new(),
        origin: None,
    };
    let answer = participant_answer(&plan, &negotiated, room, params);
    Ok((negotiated.id, answer))
}

/// Connects session `id`: its nominating binding request from `at`, then `srtp` set, as a
/// finished DTLS handshake sets it. What the core sends in answer stays to be polled.
pub fn connect(
    core: &mut NodeCore,
    now: Instant,
    id: PeerId,
    ice: &IceCredentials,
    at: impl Into<Remote>,
    srtp: Box<dyn SrtpContext>,
) {
    core.handle_packet(now, at.into(), &binding_request(ice, true));
    core.set_srtp(id, srtp);
}

/// Keys as a DTLS handshake would export them under `profile`, different for each `session`
/// number: the node's side; [`SrtpKeys::mirrored`] gives the browser's.
pub fn keys(profile: SrtpProfile, session: u8) -> SrtpKeys {
    let bytes = |offset: u8, len: usize| {
        (0..len)
            .map(|i| session.wrapping_add(offset).wrapping_add(i as u8))
            .collect()
    };
    SrtpKeys {
        profile,
        local_key: bytes(1, profile.key_len()),
        local_salt: bytes(20, profile.salt_len()),
        remote_key: bytes(40, profile.key_len()),
        remote_salt: bytes(60, profile.salt_len()),
    }
}

/// An AV1 track of one stream under `ssrc`, its Dependency Descriptor as extension `dd_ext`.
pub fn av1_track(ssrc: u32, dd_ext: u8) -> TrackConfig {
    let mut config = TrackConfig::single(Codec::Av1, ssrc);
    config.dd_ext_id = Some(dd_ext);
    config
}

/// A publisher of `tracks`, without mids or codec parameters.
pub fn publisher(tracks: impl IntoIterator<Item = TrackConfig>) -> Publisher {
    Publisher {
        tracks: tracks
            .into_iter()
            .map(|config| PublishedTrack {
                mid: String::new(),
                config,
                id: None,
                origin: None,
                fmtp: String::new(),
            })
            .collect(),
        codecs: Vec::new(),
    }
}

/// A viewer of AV1 video alone under `ssrc` (RTX on the next SSRC), asking for `target`, with
/// the Dependency Descriptor as extension `dd_ext` or without it.
pub fn av1_viewer(ssrc: u32, dd_ext: Option<u8>, target: Layer) -> Viewer {
    Viewer {
        video: Some(ViewerMedia {
            ssrc,
            rtx_ssrc: ssrc + 1,
            codecs: vec![ViewerCodec {
                codec: Codec::Av1,
                payload_type: AV1_PT,
                rtx_payload_type: Some(AV1_PT + 1),
                fmtp: String::new(),
            }],
            dd_ext_id: dd_ext,
            two_byte_allowed: true,
            transport_cc_ext_id: None,
            down_track: None,
        }),
        audio: None,
        target,
        source: None,
    }
}

/// An AV1 room of real SRTP sessions: a publisher of [`av1_track`]`(ssrc, DD_EXT)` at
/// `addrs[0]`, and at each further address a viewer of every layer with the DD and video SSRC
/// `viewer_ssrc`. Session `i` (in the order of `addrs`) has
/// [`credentials`]`(i)` and AES-128-GCM [`keys`] of session `i`. What connecting sent is
/// polled and dropped.
pub fn av1_room(
    core: &mut NodeCore,
    now: Instant,
    ssrc: u32,
    viewer_ssrc: u32,
    addrs: &[SocketAddr],
) {
    for (n, &at) in addrs.iter().enumerate() {
        let ice = credentials(n as u32);
        let join = join("room", ice.clone());
        let id = if n == 0 {
            let publisher = publisher([av1_track(ssrc, DD_EXT)]);
            core.add_publisher(now, join, publisher)
                .expect("an empty node")
        } else {
            let viewer = av1_viewer(viewer_ssrc, Some(DD_EXT), Layer::MAX);
            core.add_viewer(now, join, viewer)
                .expect("room for the viewers")
        };
        let keys = keys(SrtpProfile::AeadAes128Gcm, n as u8);
        let srtp = Box::new(session(&keys).expect("valid keys"));
        connect(core, now, id, &ice, at, srtp);
    }
    let mut out = vec![0; MAX_DATAGRAM];
    while core.poll_datagram(&mut out).is_some() {}
}

/// A core on a clock the test moves, its sessions joined and connected as browsers would
/// (each with the next session number's [`credentials`], SRTP passed through: SRTP has its
/// own tests), and every datagram the core sent kept by destination.
#[derive(Debug)]
pub struct Harness {
    /// The core under test.
    pub core: NodeCore,
    /// The time every input carries; a test moves it.
    pub now: Instant,
    /// Datagrams the core sent, by destination.
    pub sent: HashMap<Remote, Vec<Vec<u8>>>,
    /// The session number the next join takes.
    next: u32,
}

impl Harness {
    /// A harness around `core`, with no session yet.
    pub fn new(core: NodeCore) -> Self {
        Self {
            core,
            now: Instant::now(),
            sent: HashMap::new(),
            next: 0,
        }
    }

    /// The credentials of the next session to join.
    pub fn next_credentials(&mut self) -> IceCredentials {
        self.next += 1;
        credentials(self.next)
    }

    /// A publisher joined to `room` and connected from `at`.
    pub fn publisher(&mut self, room: &str, publisher: Publisher, at: impl Into<Remote>) -> PeerId {
        self.join(room, at, |core, now, join| {
            core.add_publisher(now, join, publisher)
                .expect("free SSRCs")
        })
    }

    /// A viewer joined to `room` and connected from `at`.
    pub fn viewer(&mut self, room: &str, viewer: Viewer, at: impl Into<Remote>) -> PeerId {
        self.join(room, at, |core, now, join| {
            core.add_viewer(now, join, viewer)
                .expect("room for a viewer")
        })
    }

    /// The next session, joined to `room` by `add` and connected from `at`.
    fn join(
        &mut self,
        room: &str,
        at: impl Into<Remote>,
        add: impl FnOnce(&mut NodeCore, Instant, Join) -> PeerId,
    ) -> PeerId {
        let ice = self.next_credentials();
        let id = add(&mut self.core, self.now, join(room, ice.clone()));
        self.connect(id, &ice, at);
        id
    }

    /// Session `id` connected from `at`, SRTP passed through; what the core answered kept.
    pub fn connect(&mut self, id: PeerId, ice: &IceCredentials, at: impl Into<Remote>) {
        connect(&mut self.core, self.now, id, ice, at, Box::new(Unprotected));
        self.drain();
    }

    /// A datagram from `from` (or a frame of a TCP connection), and what the core sends for
    /// it kept.
    pub fn send(&mut self, from: impl Into<Remote>, datagram: &[u8]) {
        self.core.handle_packet(self.now, from.into(), datagram);
        self.drain();
    }

    /// What the media loop does on each input: the input, then whatever timer is due, and
    /// what the core sends for them kept.
    pub fn step(&mut self, from: SocketAddr, datagram: &[u8]) {
        self.core.handle_datagram(self.now, from, datagram);
        if self.core.poll_timeout().is_some_and(|at| at <= self.now) {
            self.core.handle_timeout(self.now);
        }
        self.drain();
    }

    /// Polls everything the core sends now into [`sent`](Self::sent).
    pub fn drain(&mut self) {
        let mut out = vec![0; MAX_DATAGRAM];
        while let Some((to, len)) = self.core.poll_datagram(&mut out) {
            self.sent.entry(to).or_default().push(out[..len].to_vec());
        }
    }

    /// The RTP packets sent to `to` (RTCP and STUN left out).
    pub fn media_to(&self, to: impl Into<Remote>) -> Vec<Vec<u8>> {
        self.sent
            .get(&to.into())
            .into_iter()
            .flatten()
            .filter(|d| d.first().is_some_and(|b| b & 0xC0 == 0x80))
            .filter(|d| d.get(1).is_some_and(|pt| !(192..=223).contains(pt)))
            .cloned()
            .collect()
    }
}
