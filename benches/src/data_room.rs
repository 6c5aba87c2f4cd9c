//! Conference participants on one node core, in memory: each an independent WebRTC client
//! (its ICE, DTLS, SCTP and DCEP share no code with the node's) joined through the node's own
//! offer and answer, the datagrams between them and the core carried on a clock the room
//! moves. For the data channel tests: a participant's delivery can be held (a receiver that
//! does not keep up) or thinned by a seeded loss.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use selector::scalability::SeededRng;
use sfu::engine::RouterConfig;
use sfu::node::core::{NodeCore, MAX_DATAGRAM};
use sfu::node::datachannel::DataChannelConfig;
use sfu::node::dtls::{DtlsCertificate, DtlsConfig};
use sfu::node::participant::ParticipantId;
use sfu::node::peer::PeerId;
use sfu::node::testing::join_participant;
use str0m::channel::{ChannelConfig, ChannelId};
use str0m::crypto::from_feature_flags;
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc, RtcConfig};

/// The node's address.
const NODE: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)),
    5000,
);
/// The longest the room's clock moves in one step: timers further out are served later.
const MAX_STEP: Duration = Duration::from_millis(50);

/// One participant: its WebRTC state and what it saw.
pub struct Member {
    pub rtc: Rtc,
    pub addr: SocketAddr,
    /// Its session on the node.
    pub id: PeerId,
    /// The channels it opened, in the order asked.
    pub own: Vec<ChannelId>,
    /// Channels that opened (its own and the node's), with their label.
    pub opened: Vec<(ChannelId, String)>,
    /// Messages received: channel, binary, bytes.
    pub messages: Vec<(ChannelId, bool, Vec<u8>)>,
    /// Channels that closed.
    pub closed: Vec<ChannelId>,
    pub connected: bool,
    /// Datagrams from the node are held while set (a receiver that does not read).
    pub held: bool,
    /// Datagrams from the node dropped per million, from a seeded generator.
    loss: Option<(SeededRng, u64)>,
    inbox: VecDeque<Vec<u8>>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("addr", &self.addr)
            .field("id", &self.id)
            .field("opened", &self.opened)
            .field("messages", &self.messages.len())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl Member {
    /// Drops `percent` of the datagrams the node sends it, drawn from `seed`.
    pub fn set_loss(&mut self, percent: u64, seed: u64) {
        self.loss = Some((SeededRng(seed), percent * 10_000));
    }

    /// The channel the node opened toward it with `protocol` and `label`.
    pub fn channel_named(&mut self, label: &str, protocol: &str) -> Option<ChannelId> {
        let ids: Vec<ChannelId> = self.opened.iter().map(|(id, _)| *id).collect();
        ids.into_iter().find(|&id| {
            self.rtc
                .channel(id)
                .and_then(|c| c.config().cloned())
                .is_some_and(|c| c.label == label && c.protocol == protocol)
        })
    }

    /// The messages received on `channel`.
    pub fn messages_on(&self, channel: ChannelId) -> Vec<&(ChannelId, bool, Vec<u8>)> {
        self.messages
            .iter()
            .filter(|(c, ..)| *c == channel)
            .collect()
    }

    /// Writes a message on `channel`; whether the client took it (its buffer has room).
    pub fn write(&mut self, channel: ChannelId, binary: bool, data: &[u8]) -> bool {
        self.rtc
            .channel(channel)
            .and_then(|mut c| c.write(binary, data).ok())
            .unwrap_or(false)
    }
}

/// A node core and its participants, in memory.
#[derive(Debug)]
pub struct DataRoom {
    pub core: NodeCore,
    pub now: Instant,
    pub members: Vec<Member>,
    fingerprint: String,
    buf: Vec<u8>,
}

impl DataRoom {
    /// A core with a DTLS certificate and these data channel settings, no participant yet.
    pub fn new(config: DataChannelConfig) -> Self {
        let certificate = DtlsCertificate::generate().expect("a certificate");
        let dtls = DtlsConfig::new(&certificate, Duration::from_secs(10)).expect("DTLS config");
        let core = NodeCore::new(RouterConfig::default(), Duration::from_secs(60))
            .with_dtls(dtls)
            .with_data_channels(config);
        Self {
            core,
            now: Instant::now(),
            members: Vec::new(),
            fingerprint: certificate.fingerprint(),
            buf: vec![0; MAX_DATAGRAM],
        }
    }

    /// A participant of `room` named `name` whose offer carries `channels` (at least one, so
    /// the offer has its data section); its index.
    pub fn join(&mut self, room: &str, name: &str, channels: &[ChannelConfig]) -> usize {
        self.join_announcing(room, name, channels, None)
    }

    /// [`join`](Self::join), its offer announcing `max_message_size` as the largest message
    /// it takes in place of its client's own (a smaller one, which the client does not
    /// enforce on what it receives).
    pub fn join_announcing(
        &mut self,
        room: &str,
        name: &str,
        channels: &[ChannelConfig],
        max_message_size: Option<u64>,
    ) -> usize {
        let n = self.members.len() as u8 + 1;
        let addr = SocketAddr::from(([10, 0, 1, n], 40_000));
        let mut rtc = RtcConfig::new()
            .set_crypto_provider(Arc::new(from_feature_flags()))
            // Room for a message of the node's largest size in the client's send buffer.
            .set_sctp_max_buffered_amount(1024 * 1024)
            .build(self.now);
        rtc.add_local_candidate(Candidate::host(addr, "udp").expect("a host candidate"));
        let mut api = rtc.sdp_api();
        let own: Vec<ChannelId> = channels
            .iter()
            .map(|c| api.add_channel_with_config(c.clone()))
            .collect();
        let (offer, pending) = api.apply().expect("an offer");
        let mut offer = offer.to_sdp_string();
        if let Some(max) = max_message_size {
            offer = offer
                .split_inclusive("\r\n")
                .map(|line| {
                    if line.starts_with("a=max-message-size:") {
                        format!("a=max-message-size:{max}\r\n")
                    } else {
                        line.to_owned()
                    }
                })
                .collect();
        }
        let (id, answer) = join_participant(
            &mut self.core,
            self.now,
            (room, name),
            &offer,
            (&self.fingerprint, NODE),
        )
        .expect("joined");
        let answer = str0m::change::SdpAnswer::from_sdp_string(&answer).expect("an answer");
        rtc.sdp_api()
            .accept_answer(pending, answer)
            .expect("answer accepted");
        self.members.push(Member {
            rtc,
            addr,
            id,
            own,
            opened: Vec::new(),
            messages: Vec::new(),
            closed: Vec::new(),
            connected: false,
            held: false,
            loss: None,
            inbox: VecDeque::new(),
        });
        self.members.len() - 1
    }

    /// Moves every datagram until none is in flight, then the clock to the next timer (at most
    /// `MAX_STEP` on) and serves the timers due.
    pub fn step(&mut self) {
        for _ in 0..10_000 {
            if !self.exchange() {
                break;
            }
        }
        let (core, now) = (&mut self.core, self.now);
        let clients: Vec<Instant> = self
            .members
            .iter_mut()
            .filter_map(|m| drain(m, core, now))
            .collect();
        let next = clients
            .into_iter()
            .chain(self.core.poll_timeout())
            .min()
            .unwrap_or(self.now + MAX_STEP);
        self.now = next.clamp(self.now + Duration::from_micros(100), self.now + MAX_STEP);
        self.core.handle_timeout(self.now);
        for member in &mut self.members {
            let _ = member.rtc.handle_input(Input::Timeout(self.now));
        }
    }

    /// Steps until `done` holds or `max_steps` pass; whether it held.
    pub fn run_until(&mut self, max_steps: usize, mut done: impl FnMut(&mut Self) -> bool) -> bool {
        for _ in 0..max_steps {
            if done(self) {
                return true;
            }
            self.step();
        }
        done(self)
    }

    /// The id the room knows participant `member` by (the protocol of its relayed channels
    /// names it).
    pub fn public(&self, member: usize) -> ParticipantId {
        let peer = self.core.peer(self.members[member].id).expect("a session");
        peer.identity.as_ref().expect("a participant").public
    }

    /// Takes a participant's session off the node, as a DELETE would.
    pub fn leave(&mut self, member: usize) {
        let id = self.members[member].id;
        self.core.remove_peer(id).expect("a session");
        self.members[member].held = true;
    }

    /// One round: each client's output to the core, the core's to the clients. Whether
    /// anything moved.
    fn exchange(&mut self) -> bool {
        let mut moved = false;
        for member in &mut self.members {
            moved |= drain(member, &mut self.core, self.now).is_none();
        }
        while let Some((to, len)) = self.core.poll_datagram(&mut self.buf) {
            let Some(member) = self.members.iter_mut().find(|m| to == m.addr) else {
                continue;
            };
            let lost = member.loss.as_mut().is_some_and(|(rng, per_million)| {
                member.connected && rng.below(1_000_000) < *per_million
            });
            if !member.held && !lost {
                member.inbox.push_back(self.buf[..len].to_vec());
            }
        }
        for member in &mut self.members {
            while let Some(datagram) = member.inbox.pop_front() {
                moved = true;
                let Ok(contents) = datagram.as_slice().try_into() else {
                    continue;
                };
                let receive = Receive {
                    proto: Protocol::Udp,
                    source: NODE,
                    destination: member.addr,
                    contents,
                };
                let _ = member.rtc.handle_input(Input::Receive(self.now, receive));
            }
        }
        moved
    }
}

/// Hands everything `member`'s client has to the core and records its events; when it then
/// waits, the time it wants to be woken at (`None` when it sent something).
fn drain(member: &mut Member, core: &mut NodeCore, now: Instant) -> Option<Instant> {
    let mut sent = false;
    loop {
        match member.rtc.poll_output() {
            Ok(Output::Timeout(at)) => return (!sent).then_some(at),
            Ok(Output::Transmit(t)) => {
                sent = true;
                core.handle_datagram(now, member.addr, &t.contents);
            }
            Ok(Output::Event(event)) => match event {
                Event::Connected => member.connected = true,
                Event::ChannelOpen(id, label) => member.opened.push((id, label)),
                Event::ChannelData(data) => member.messages.push((data.id, data.binary, data.data)),
                Event::ChannelClose(id) => member.closed.push(id),
                _ => {}
            },
            Err(_) => return None,
        }
    }
}
