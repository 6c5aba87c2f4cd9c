//! A conference room's participants as browsers would be, for the core's tests: each offers
//! in SDP and applies the node's answers through the SDP parser, renegotiates when asked, sends
//! audio with its level, and the core's events and datagrams are collected per participant.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rtp_ext::codec::MediaKind;
use rtp_ext::rtp::RtpPacket;
use sfu::engine::RouterConfig;
use sfu::node::core::{CoreError, Negotiated, NodeCore, Resource, MAX_DATAGRAM};
use sfu::node::limits::Limits;
use sfu::node::participant::ParticipantId;
use sfu::node::peer::{IceCredentials, Join, Kind, PeerId};
use sfu::node::sdp::{
    negotiate_participant, parse_description, parse_offer, AnswerParams, Direction,
};
use sfu::node::session_events::SessionEvent;
use sfu::node::signaling::{participant_answer, participant_offer};
use sfu::node::srtp::Unprotected;
use sfu::node::testing;

pub const ROOM: &str = "call";
pub const FINGERPRINT: &str =
    "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89";

/// What a participant sends in one of its sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Send {
    Vp8(u32),
    Av1(u32),
    Opus(u32),
}

#[derive(Debug, Clone)]
pub enum Section {
    Send {
        mid: u32,
        what: Send,
    },
    Receive {
        mid: u32,
        kind: MediaKind,
    },
    /// A sending section whose track the participant stopped.
    Stopped {
        mid: u32,
        kind: MediaKind,
    },
}

/// A browser's side of one participant: its sections, its offers, what its answers said.
#[derive(Debug)]
pub struct Client {
    pub name: String,
    pub n: u32,
    pub sections: Vec<Section>,
    pub next_mid: u32,
    /// The core's session, once joined.
    pub id: Option<PeerId>,
    pub public: Option<ParticipantId>,
    pub version: u64,
    /// Per receiving section's mid, the track the last answer put in it: its msid's track id,
    /// its stream id and SSRC.
    pub receiving: BTreeMap<String, (String, String, u32)>,
}

impl Client {
    pub fn new(n: u32, sends: &[Send]) -> Self {
        let mut client = Self {
            name: format!("participant {n}"),
            n,
            sections: Vec::new(),
            next_mid: 0,
            id: None,
            public: None,
            version: 0,
            receiving: BTreeMap::new(),
        };
        for &what in sends {
            let mid = client.mid();
            client.sections.push(Section::Send { mid, what });
        }
        client
    }

    pub fn mid(&mut self) -> u32 {
        self.next_mid += 1;
        self.next_mid - 1
    }

    /// Adds receiving sections until it has `audio` and `video` of them, as a page adds
    /// transceivers when told to renegotiate.
    pub fn ensure(&mut self, audio: usize, video: usize) {
        for (kind, wanted) in [(MediaKind::Audio, audio), (MediaKind::Video, video)] {
            let have = self
                .sections
                .iter()
                .filter(|s| matches!(s, Section::Receive { kind: k, .. } if *k == kind))
                .count();
            for _ in have..wanted {
                let mid = self.mid();
                self.sections.push(Section::Receive { mid, kind });
            }
        }
    }

    pub fn ice(&self) -> (String, String) {
        (
            format!("cli{:04}", self.n),
            format!("client-password-{:08}", self.n),
        )
    }

    pub fn offer(&self) -> String {
        let (ufrag, pwd) = self.ice();
        let mids: Vec<String> = self
            .sections
            .iter()
            .map(|s| section_mid(s).to_string())
            .collect();
        let mut sdp = format!(
            "v=0\r\no=- 1234 {} IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE {}\r\n\
             a=extmap-allow-mixed\r\na=msid-semantic: WMS\r\n",
            self.version + 2,
            mids.join(" ")
        );
        for section in &self.sections {
            sdp += &media_section(section, &ufrag, &pwd, self.n);
        }
        sdp
    }

    /// Takes the node's answer: what each receiving section carries now.
    pub fn apply(&mut self, answer: &str, negotiated: &Negotiated) {
        let answer = parse_description(answer).expect("the node's answer parses");
        self.id = Some(negotiated.id);
        self.public = Some(negotiated.public);
        self.version = negotiated.origin.1;
        self.receiving.clear();
        for media in &answer.media {
            let is_receiving = self
                .sections
                .iter()
                .any(|s| matches!(s, Section::Receive { mid, .. } if mid.to_string() == media.mid));
            if !is_receiving {
                continue;
            }
            match media.direction {
                Direction::SendOnly => {
                    let source = media
                        .ssrcs
                        .first()
                        .expect("a sending section names its SSRC");
                    let msid = source.msid.clone().expect("and its stream");
                    let (stream, track) = msid.split_once(' ').expect("stream and track");
                    self.receiving.insert(
                        media.mid.clone(),
                        (track.to_owned(), stream.to_owned(), source.ssrc),
                    );
                }
                Direction::Inactive => {}
                other => panic!("a receiving section answered {other:?}"),
            }
        }
    }

    /// The tracks its answer says it receives, as `t<id>`.
    pub fn received_tracks(&self) -> BTreeSet<String> {
        self.receiving.values().map(|(t, _, _)| t.clone()).collect()
    }
}

pub fn section_mid(section: &Section) -> u32 {
    match section {
        Section::Send { mid, .. } | Section::Receive { mid, .. } | Section::Stopped { mid, .. } => {
            *mid
        }
    }
}

pub fn media_section(section: &Section, ufrag: &str, pwd: &str, n: u32) -> String {
    let transport = format!(
        "c=IN IP4 0.0.0.0\r\na=ice-ufrag:{ufrag}\r\na=ice-pwd:{pwd}\r\n\
         a=fingerprint:sha-256 {FINGERPRINT}\r\na=setup:actpass\r\n"
    );
    let (kind, mid, direction, sources) = match section {
        Section::Send { mid, what } => {
            let ssrc = match what {
                Send::Vp8(s) | Send::Av1(s) | Send::Opus(s) => *s,
            };
            let kind = if matches!(what, Send::Opus(_)) {
                MediaKind::Audio
            } else {
                MediaKind::Video
            };
            let first = match what {
                Send::Av1(_) => "45",
                _ => "96",
            };
            let sources = format!("a=msid:s{n} t{ssrc}\r\na=ssrc:{ssrc} cname:c{n}\r\n");
            (
                kind,
                *mid,
                "sendonly\r\n".to_owned(),
                Some((first, sources)),
            )
        }
        Section::Receive { mid, kind } => (*kind, *mid, "recvonly\r\n".to_owned(), None),
        Section::Stopped { mid, kind } => (*kind, *mid, "inactive\r\n".to_owned(), None),
    };
    match kind {
        MediaKind::Audio => format!(
            "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\n{transport}a=mid:{mid}\r\n\
             a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r\n\
             a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r\n\
             a={direction}a=rtcp-mux\r\na=rtpmap:111 opus/48000/2\r\na=rtcp-fb:111 transport-cc\r\n\
             a=fmtp:111 minptime=10;useinbandfec=1\r\n{}",
            sources.map(|(_, s)| s).unwrap_or_default()
        ),
        MediaKind::Video => {
            let order = match sources.as_ref().map(|(first, _)| *first) {
                Some("45") => "45 46 96 97",
                _ => "96 97 45 46",
            };
            format!(
                "m=video 9 UDP/TLS/RTP/SAVPF {order}\r\n{transport}a=mid:{mid}\r\n\
                 a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r\n\
                 a=extmap:9 https://aomediacodec.github.io/av1-rtp-spec/#dependency-descriptor-rtp-header-extension\r\n\
                 a={direction}a=rtcp-mux\r\na=rtcp-rsize\r\n\
                 a=rtpmap:96 VP8/90000\r\na=rtcp-fb:96 nack\r\na=rtcp-fb:96 nack pli\r\n\
                 a=rtcp-fb:96 transport-cc\r\na=rtpmap:97 rtx/90000\r\na=fmtp:97 apt=96\r\n\
                 a=rtpmap:45 AV1/90000\r\na=rtcp-fb:45 nack\r\na=rtcp-fb:45 nack pli\r\n\
                 a=rtcp-fb:45 transport-cc\r\na=rtpmap:46 rtx/90000\r\na=fmtp:46 apt=45\r\n{}",
                sources.map(|(_, s)| s).unwrap_or_default()
            )
        }
    }
}

/// The core and the clients of one room, the core's events delivered as a page would take
/// them.
pub struct Conference {
    pub core: NodeCore,
    pub start: Instant,
    pub now: Instant,
    pub clients: BTreeMap<u32, Client>,
    /// Events each participant got, by its client.
    pub events: BTreeMap<u32, Vec<SessionEvent>>,
}

pub fn answer_params() -> AnswerParams {
    AnswerParams {
        ice_ufrag: String::new(),
        ice_pwd: String::new(),
        fingerprint: FINGERPRINT.to_owned(),
        candidates: vec![SocketAddr::from(([127, 0, 0, 1], 50000))],
        tcp_candidate: None,
        extmap_allow_mixed: true,
        video_fmtp_suffix: None,
        media: Vec::new(),
        origin: None,
    }
}

impl Conference {
    pub fn new(limits: Limits) -> Self {
        Self::with_core(
            NodeCore::new(RouterConfig::default(), Duration::from_secs(30)).with_limits(limits),
        )
    }

    pub fn with_core(core: NodeCore) -> Self {
        let now = Instant::now();
        Self {
            core,
            start: now,
            now,
            clients: BTreeMap::new(),
            events: BTreeMap::new(),
        }
    }

    /// A participant joins with its offer and applies the answer.
    pub fn join(&mut self, mut client: Client) -> Result<u32, CoreError> {
        let text = client.offer();
        let offer = parse_offer(&text).expect("the client's offer parses");
        let plan = negotiate_participant(&offer).expect("served");
        let participant = participant_offer(&plan, &offer).expect("served");
        let (ufrag, pwd) = (
            format!("node{:04}", client.n),
            format!("node-password-{:010}", client.n),
        );
        let join = Join {
            name: Some(client.name.clone()),
            fingerprint: Some(offer.fingerprint.clone()),
            ..Join::new(
                ROOM,
                IceCredentials {
                    local_ufrag: ufrag,
                    local_pwd: pwd,
                },
            )
        };
        let negotiated = self.core.add_participant(self.now, join, participant)?;
        let answer = participant_answer(&plan, &negotiated, ROOM, answer_params());
        client.apply(&answer, &negotiated);
        let n = client.n;
        self.clients.insert(n, client);
        Ok(n)
    }

    pub fn resource(&self, n: u32) -> Resource {
        Resource {
            kind: Kind::Participant,
            room: ROOM.to_owned(),
            id: self.clients[&n].id.expect("joined"),
            owner: None,
        }
    }

    /// The participant offers again (after adding what it was asked for).
    pub fn renegotiate(&mut self, n: u32) -> Result<(), CoreError> {
        let client = self.clients.get_mut(&n).expect("a client");
        let text = client.offer();
        let offer = parse_offer(&text).expect("the client's offer parses");
        let plan = negotiate_participant(&offer).expect("served");
        let participant = participant_offer(&plan, &offer).expect("served");
        let id = self.core.resource(&self.resource(n))?;
        let version = Some(self.clients[&n].version);
        let negotiated = self.core.renegotiate(self.now, id, version, participant)?;
        let answer = participant_answer(&plan, &negotiated, ROOM, answer_params());
        self.clients
            .get_mut(&n)
            .expect("a client")
            .apply(&answer, &negotiated);
        Ok(())
    }

    pub fn addr(n: u32) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 6000 + n as u16))
    }

    /// ICE and DTLS done for participant `n`, at its own address.
    pub fn connect(&mut self, n: u32) {
        let id = self.clients[&n].id.expect("joined");
        let ice = self.core.peer(id).expect("a session").ice.clone();
        let srtp = Box::new(Unprotected);
        testing::connect(&mut self.core, self.now, id, &ice, Self::addr(n), srtp);
    }

    /// Everything the core sends now, by destination: the RTP packets' SSRCs.
    pub fn sent(&mut self) -> BTreeMap<SocketAddr, Vec<u32>> {
        let mut buf = vec![0; MAX_DATAGRAM];
        let mut sent: BTreeMap<SocketAddr, Vec<u32>> = BTreeMap::new();
        while let Some((to, len)) = self.core.poll_datagram(&mut buf) {
            let out = &buf[..len];
            if let Ok(packet) = RtpPacket::parse(out) {
                if !(192..=223).contains(&out[1]) {
                    // Every participant here is bound over UDP.
                    sent.entry(to.addr())
                        .or_default()
                        .push(packet.fields().ssrc);
                }
            }
        }
        sent
    }

    pub fn leave(&mut self, n: u32) {
        let client = self.clients.remove(&n).expect("a client");
        self.core
            .remove_peer(client.id.expect("joined"))
            .expect("a session");
    }

    /// Delivers the core's events; every participant asked to renegotiate does, until none
    /// is asked.
    pub fn settle(&mut self) {
        for _ in 0..100 {
            let mut asked = Vec::new();
            while let Some((id, event)) = self.core.poll_session_event() {
                let Some((&n, client)) = self.clients.iter_mut().find(|(_, c)| c.id == Some(id))
                else {
                    panic!("an event for a session that left: {event:?}");
                };
                if let SessionEvent::Renegotiate(wanted) = &event {
                    client.ensure(wanted.audio, wanted.video);
                    asked.push(n);
                }
                self.events.entry(n).or_default().push(event);
            }
            if asked.is_empty() {
                return;
            }
            for n in asked {
                self.renegotiate(n)
                    .expect("a renegotiation that follows the session");
            }
        }
        panic!("renegotiation does not settle");
    }

    /// Every track the others publish, as `t<id>`, and its owner's stream id.
    pub fn expected_for(&self, n: u32) -> BTreeSet<String> {
        let mut expected = BTreeSet::new();
        for (&other, client) in &self.clients {
            if other == n {
                continue;
            }
            let id = client.id.expect("joined");
            let Some(peer) = self.core.peer(id) else {
                continue;
            };
            for track in peer.role.publisher().into_iter().flat_map(|p| &p.tracks) {
                expected.insert(format!("t{}", track.id.expect("published").0));
            }
        }
        expected
    }

    pub fn check_everyone_receives_the_others(&self) {
        for (&n, client) in &self.clients {
            assert_eq!(
                client.received_tracks(),
                self.expected_for(n),
                "participant {n} receives exactly the others' tracks"
            );
            for (track, stream, _) in client.receiving.values() {
                let owner = self
                    .clients
                    .values()
                    .find(|c| format!("p{}", c.public.expect("joined")) == *stream)
                    .unwrap_or_else(|| panic!("{track} is named after a participant in the room"));
                assert_ne!(owner.n, n, "not its own track");
            }
        }
    }
}

pub fn sends(n: u32) -> Vec<Send> {
    let ssrc = 1000 * n;
    match n % 3 {
        0 => vec![Send::Opus(ssrc), Send::Av1(ssrc + 1)],
        1 => vec![Send::Opus(ssrc), Send::Vp8(ssrc + 1)],
        _ => vec![Send::Vp8(ssrc + 1)],
    }
}

/// An Opus packet from participant `n` at `dbov` (RFC 6464: 0 the loudest, 127 silence).
pub fn opus(n: u32, seq: u16, dbov: u8) -> Vec<u8> {
    let mut p = vec![0x90, 111];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&(u32::from(seq) * 960).to_be_bytes());
    p.extend_from_slice(&(1000 * n).to_be_bytes());
    // One-byte extensions: the audio level (id 1) with its voice bit.
    p.extend_from_slice(&[0xBE, 0xDE, 0, 1, 0x10, 0x80 | dbov, 0, 0]);
    p.extend_from_slice(&[0xFC; 40]);
    p
}

impl Conference {
    /// 20 ms of audio from each participant at its level, for `span`; the core's timers
    /// run as they come due. Returns the SSRCs each address was sent.
    pub fn speak(
        &mut self,
        span: Duration,
        levels: &[(u32, u8)],
    ) -> BTreeMap<SocketAddr, Vec<u32>> {
        let mut sent: BTreeMap<SocketAddr, Vec<u32>> = BTreeMap::new();
        let end = self.now + span;
        while self.now < end {
            self.now += Duration::from_millis(20);
            for &(n, dbov) in levels {
                let seq = (self.now.duration_since(self.start).as_millis() / 20) as u16;
                self.core
                    .handle_datagram(self.now, Self::addr(n), &opus(n, seq, dbov));
            }
            self.core.handle_timeout(self.now);
            for (to, ssrcs) in self.sent() {
                sent.entry(to).or_default().extend(ssrcs);
            }
        }
        sent
    }

    /// The dominant speaker events participant `n` got so far, with the name of each.
    pub fn speakers_heard(&self, n: u32) -> Vec<String> {
        self.events[&n]
            .iter()
            .filter_map(|e| match e {
                SessionEvent::DominantSpeaker { participant } => self
                    .clients
                    .values()
                    .find(|c| c.public == Some(*participant))
                    .map(|c| c.name.clone()),
                _ => None,
            })
            .collect()
    }
}

/// Participants 1, 3 and 4 (each with a microphone) joined and connected.
pub fn speaking_room(core: NodeCore) -> Conference {
    let mut c = Conference::with_core(core);
    for n in [1, 3, 4] {
        c.join(Client::new(n, &sends(n))).expect("room");
    }
    c.settle();
    for n in [1, 3, 4] {
        c.connect(n);
    }
    c.sent();
    c
}
