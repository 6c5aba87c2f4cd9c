//! The router between its peers: one uplink and one downlink per transport, a clock that jumps
//! from one thing due to the next, and the host loop the router documents.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use selector::scalability::SeededRng;

use super::link::{Link, LinkConfig, LinkCounters};
use crate::engine::rtcp::WriteError;
use crate::engine::{
    DownTrackId, Event, ReceiveError, Router, RouterConfig, RouterError, RtcpTarget, TransportId,
};

/// The largest datagram the router writes: an Ethernet MTU.
pub(super) const MTU: usize = 1500;

/// Misuse of the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The transport was not added through [`Network::add_transport`].
    #[error("transport not on the network")]
    UnknownTransport,
    /// An RTCP item a peer was to send could not be written.
    #[error("RTCP not written: {0}")]
    Rtcp(#[from] WriteError),
}

/// Which way along a transport's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the peer to the router.
    Up,
    /// From the router to the peer.
    Down,
}

/// What arrives at a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// An RTP packet of one of the peer's subscriptions.
    Media {
        /// The subscription it was sent for.
        down_track: DownTrackId,
        /// Whether it was sent as a retransmission.
        retransmission: bool,
        /// The whole packet, header and payload.
        packet: Bytes,
    },
    /// An RTCP datagram.
    Rtcp {
        /// Whom the router addressed it to.
        to: RtcpTarget,
        /// The datagram.
        datagram: Bytes,
    },
}

/// Something that arrived at a peer, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// When it arrived.
    pub at: Instant,
    /// What arrived.
    pub delivery: Delivery,
}

/// An input the router refused when it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// An RTP packet, and why.
    Rtp {
        /// When it arrived.
        at: Instant,
        /// The transport it came on.
        transport: TransportId,
        /// Why the router refused it.
        error: ReceiveError,
    },
    /// An RTCP datagram, and why.
    Rtcp {
        /// When it arrived.
        at: Instant,
        /// The transport it came on.
        transport: TransportId,
        /// Why the router refused it.
        error: RouterError,
    },
}

/// What the network did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetworkCounters {
    /// Steps taken: instants at which something was due.
    pub steps: u64,
    /// Calls to the router's `handle_timeout`.
    pub timeouts: u64,
    /// Times the router still reported a timeout due right after `handle_timeout` ran at that
    /// instant with no input since: a timer that does not move. The network goes on to the
    /// next thing due rather than spin; a correct router keeps this at zero.
    pub stale_timeouts: u64,
    /// Outputs for a transport with no links (one added to the router directly): dropped.
    pub unrouted: u64,
}

/// What travels up a transport's uplink.
#[derive(Debug, Clone)]
enum Upward {
    Rtp(Bytes),
    Rtcp(Bytes),
}

impl Upward {
    fn len(&self) -> usize {
        match self {
            Upward::Rtp(b) | Upward::Rtcp(b) => b.len(),
        }
    }
}

/// One transport's share: its two links and what arrived at its peer.
#[derive(Debug)]
struct Peer {
    up: Link<Upward>,
    down: Link<Delivery>,
    arrived: Vec<Arrival>,
}

/// A router, its transports' links and the simulated clock.
///
/// # Example
/// A publisher and a viewer whose downlink takes 30 ms:
/// ```
/// use std::time::{Duration, Instant};
/// use bytes::Bytes;
/// use rtp_ext::codec::Codec;
/// use selector::LayerLimits;
/// use sfu::engine::{DownTrackConfig, RouterConfig, TrackConfig};
/// use sfu::sim::{Delivery, LinkConfig, Network};
///
/// let start = Instant::now();
/// let mut network = Network::new(RouterConfig::default(), start, 7);
/// let publisher = network.add_transport(LinkConfig::default(), LinkConfig::default());
/// let viewer = network.add_transport(
///     LinkConfig::default(),
///     LinkConfig::delayed(Duration::from_millis(30)),
/// );
/// network.with_router(|router| {
///     let track = router.publish(publisher, TrackConfig::single(Codec::Opus, 0x1111))?;
///     let config = DownTrackConfig::new(0x2222, 111);
///     router.subscribe(viewer, track, config, LayerLimits::default())
/// })?;
///
/// // An Opus packet: RTP version 2, payload type 111, sequence 1, timestamp 960.
/// let mut packet = vec![0x80, 111, 0, 1, 0, 0, 0x03, 0xc0, 0, 0, 0x11, 0x11];
/// packet.extend_from_slice(&[0xfc, 0xff, 0xfe]);
/// network.send_rtp(publisher, Bytes::from(packet))?;
/// network.run_until(start + Duration::from_secs(2));
///
/// let arrival = network.take_arrivals(viewer).remove(0);
/// assert_eq!(arrival.at, start + Duration::from_millis(30));
/// assert!(matches!(arrival.delivery, Delivery::Media { .. }));
/// // Reports at 0, 1 and 2 s: the clock jumped from one to the next.
/// assert!(network.counters().steps < 10);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Network {
    router: Router,
    now: Instant,
    start: Instant,
    /// Seeds of the links, drawn in the order transports are added.
    seeds: SeededRng,
    /// By transport: iterated in a fixed order, so that one seed gives one run.
    peers: BTreeMap<TransportId, Peer>,
    /// Packets to enter an uplink later, by time then by the order they were scheduled in.
    scheduled: BTreeMap<(Instant, u64), (TransportId, Upward)>,
    serial: u64,
    events: Vec<(Instant, Event)>,
    refused: Vec<Refusal>,
    /// The instant `handle_timeout` last ran at, while no input has come since: a timeout
    /// reported due again then is stale.
    timed_out_at: Option<Instant>,
    counters: NetworkCounters,
    buf: Box<[u8; MTU]>,
}

impl Network {
    /// A router with `config` and no transports, its clock at `start`; every link's
    /// randomness comes from `seed`.
    pub fn new(config: RouterConfig, start: Instant, seed: u64) -> Self {
        Self {
            router: Router::new(config),
            now: start,
            start,
            seeds: SeededRng(seed),
            peers: BTreeMap::new(),
            scheduled: BTreeMap::new(),
            serial: 0,
            events: Vec::new(),
            refused: Vec::new(),
            timed_out_at: None,
            counters: NetworkCounters::default(),
            buf: Box::new([0; MTU]),
        }
    }

    /// A new transport on the router with its uplink and downlink.
    pub fn add_transport(&mut self, up: LinkConfig, down: LinkConfig) -> TransportId {
        let transport = self.router.add_transport();
        let peer = Peer {
            up: Link::new(up, self.seeds.next_u64()),
            down: Link::new(down, self.seeds.next_u64()),
            arrived: Vec::new(),
        };
        self.peers.insert(transport, peer);
        transport
    }

    /// Removes a transport from the router (with everything it had there) and from the
    /// network: what its links still carried is lost, and what the router sends it after is
    /// counted as [`unrouted`](NetworkCounters::unrouted).
    pub fn remove_transport(&mut self, transport: TransportId) -> Result<(), RouterError> {
        let removed = self.with_router(|router| router.remove_transport(transport));
        self.peers.remove(&transport);
        removed
    }

    /// The router, for queries.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Calls into the router (publish, subscribe, set limits...), then drains what the call
    /// raised, as the host loop does after an API call.
    pub fn with_router<R>(&mut self, call: impl FnOnce(&mut Router) -> R) -> R {
        let result = call(&mut self.router);
        self.timed_out_at = None;
        self.drain();
        self.deliver_down();
        result
    }

    /// The router, leaving the network: a bench primes a router with a session on the network,
    /// then measures the bare calls into it.
    pub fn into_router(self) -> Router {
        self.router
    }

    /// The simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The time the network started at.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Sends an RTP packet up `transport`'s uplink now.
    pub fn send_rtp(&mut self, transport: TransportId, packet: Bytes) -> Result<(), SimError> {
        self.send_rtp_at(self.now, transport, packet)
    }

    /// Sends an RTCP datagram up `transport`'s uplink now.
    pub fn send_rtcp(&mut self, transport: TransportId, datagram: Bytes) -> Result<(), SimError> {
        self.send_rtcp_at(self.now, transport, datagram)
    }

    /// Schedules an RTP packet to enter `transport`'s uplink at `at` (now, if that is past).
    pub fn send_rtp_at(
        &mut self,
        at: Instant,
        transport: TransportId,
        packet: Bytes,
    ) -> Result<(), SimError> {
        self.schedule(at, transport, Upward::Rtp(packet))
    }

    /// Schedules an RTCP datagram to enter `transport`'s uplink at `at` (now, if that is past).
    pub fn send_rtcp_at(
        &mut self,
        at: Instant,
        transport: TransportId,
        datagram: Bytes,
    ) -> Result<(), SimError> {
        self.schedule(at, transport, Upward::Rtcp(datagram))
    }

    fn schedule(
        &mut self,
        at: Instant,
        transport: TransportId,
        up: Upward,
    ) -> Result<(), SimError> {
        if !self.peers.contains_key(&transport) {
            return Err(SimError::UnknownTransport);
        }
        self.serial += 1;
        self.scheduled
            .insert((at.max(self.now), self.serial), (transport, up));
        Ok(())
    }

    /// Takes what arrived at `transport`'s peer so far, in order of arrival; nothing for a
    /// transport not on the network.
    pub fn take_arrivals(&mut self, transport: TransportId) -> Vec<Arrival> {
        self.peers
            .get_mut(&transport)
            .map(|p| std::mem::take(&mut p.arrived))
            .unwrap_or_default()
    }

    /// Takes the router's events so far, each with the time it was polled.
    pub fn take_events(&mut self) -> Vec<(Instant, Event)> {
        std::mem::take(&mut self.events)
    }

    /// Takes the inputs the router refused so far.
    pub fn take_refused(&mut self) -> Vec<Refusal> {
        std::mem::take(&mut self.refused)
    }

    /// What the network did so far.
    pub fn counters(&self) -> NetworkCounters {
        self.counters
    }

    /// What one of `transport`'s links did so far.
    pub fn link_counters(
        &self,
        transport: TransportId,
        direction: Direction,
    ) -> Option<LinkCounters> {
        let peer = self.peers.get(&transport)?;
        Some(match direction {
            Direction::Up => peer.up.counters(),
            Direction::Down => peer.down.counters(),
        })
    }

    /// The settings of one of `transport`'s links, to change for what is sent from now on.
    pub fn link_config_mut(
        &mut self,
        transport: TransportId,
        direction: Direction,
    ) -> Option<&mut LinkConfig> {
        let peer = self.peers.get_mut(&transport)?;
        Some(match direction {
            Direction::Up => peer.up.config_mut(),
            Direction::Down => peer.down.config_mut(),
        })
    }

    /// When something is next due: a delivery, a scheduled packet or the router's timeout.
    pub fn next_event(&self) -> Option<Instant> {
        let links = self
            .peers
            .values()
            .flat_map(|p| [p.up.next_arrival(), p.down.next_arrival()]);
        let scheduled = self.scheduled.keys().next().map(|&(at, _)| at);
        links
            .chain([scheduled, self.router_timeout()])
            .flatten()
            .min()
    }

    /// The router's timeout, unless it is stale (see [`NetworkCounters::stale_timeouts`]); a
    /// time already past (after an API call) is due now.
    fn router_timeout(&self) -> Option<Instant> {
        let at = self.router.poll_timeout()?;
        if self.timed_out_at == Some(self.now) && at <= self.now {
            return None;
        }
        Some(at.max(self.now))
    }

    /// Moves the clock to the next thing due, if that is by `limit`, and does everything due
    /// then: scheduled packets enter their uplinks, arrivals at the router are handled (each
    /// followed by the drain), then the router's timeout if due, and arrivals at peers are
    /// kept for them. Returns false, with the clock at `limit`, if nothing is due by then.
    pub fn step(&mut self, limit: Instant) -> bool {
        let Some(at) = self.next_event().filter(|&at| at <= limit) else {
            self.now = self.now.max(limit);
            return false;
        };
        self.now = self.now.max(at);
        self.counters.steps += 1;
        let now = self.now;
        while let Some(entry) = self.scheduled.first_entry().filter(|e| e.key().0 <= now) {
            let (transport, up) = entry.remove();
            if let Some(peer) = self.peers.get_mut(&transport) {
                peer.up.send(now, up.len(), up);
            }
        }
        self.deliver_up();
        if self.router_timeout().is_some_and(|at| at <= now) {
            self.router.handle_timeout(now);
            self.counters.timeouts += 1;
            self.timed_out_at = Some(now);
            self.drain();
            if self.router.poll_timeout().is_some_and(|at| at <= now) {
                self.counters.stale_timeouts += 1;
            }
        }
        self.deliver_down();
        true
    }

    /// Steps until `until`; the clock is then at `until`.
    pub fn run_until(&mut self, until: Instant) {
        while self.step(until) {}
    }

    /// Hands the router everything arrived on the uplinks by now, each followed by the drain.
    /// Arrivals at one instant are handled transport by transport.
    fn deliver_up(&mut self) {
        let now = self.now;
        let transports: Vec<TransportId> = self.peers.keys().copied().collect();
        for transport in transports {
            while let Some((_, up)) = self
                .peers
                .get_mut(&transport)
                .and_then(|peer| peer.up.pop_arrival(now))
            {
                self.timed_out_at = None;
                match up {
                    Upward::Rtp(packet) => {
                        if let Err(error) = self.router.handle_rtp(now, transport, packet) {
                            self.refused.push(Refusal::Rtp {
                                at: now,
                                transport,
                                error,
                            });
                        }
                    }
                    Upward::Rtcp(datagram) => {
                        if let Err(error) = self.router.handle_rtcp(now, transport, &datagram) {
                            self.refused.push(Refusal::Rtcp {
                                at: now,
                                transport,
                                error,
                            });
                        }
                    }
                }
                self.drain();
            }
        }
    }

    /// The host loop's drain, in the router's order: media, then RTCP, then events. What goes
    /// out enters the downlink of the transport it names.
    fn drain(&mut self) {
        let now = self.now;
        while let Some(out) = self.router.poll_transmit(&mut self.buf[..]) {
            let mut packet = Vec::with_capacity(out.transmit.len + out.transmit.payload.len());
            packet.extend_from_slice(&self.buf[..out.transmit.len]);
            packet.extend_from_slice(&out.transmit.payload);
            let delivery = Delivery::Media {
                down_track: out.down_track,
                retransmission: out.transmit.retransmission,
                packet: Bytes::from(packet),
            };
            self.send_down(out.transport, delivery);
        }
        while let Some(rtcp) = self.router.poll_rtcp(&mut self.buf[..]) {
            let delivery = Delivery::Rtcp {
                to: rtcp.to,
                datagram: Bytes::copy_from_slice(&self.buf[..rtcp.len]),
            };
            self.send_down(rtcp.transport, delivery);
        }
        while let Some(event) = self.router.poll_event() {
            self.events.push((now, event));
        }
    }

    fn send_down(&mut self, transport: TransportId, delivery: Delivery) {
        let Some(peer) = self.peers.get_mut(&transport) else {
            self.counters.unrouted += 1;
            return;
        };
        let size = match &delivery {
            Delivery::Media { packet, .. } => packet.len(),
            Delivery::Rtcp { datagram, .. } => datagram.len(),
        };
        peer.down.send(self.now, size, delivery);
    }

    /// Keeps what arrived on the downlinks by now for the peers.
    fn deliver_down(&mut self) {
        let now = self.now;
        for peer in self.peers.values_mut() {
            while let Some((at, delivery)) = peer.down.pop_arrival(now) {
                peer.arrived.push(Arrival { at, delivery });
            }
        }
    }
}

#[cfg(test)]
#[path = "network_tests.rs"]
mod tests;
