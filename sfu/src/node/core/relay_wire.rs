//! The datagrams of the media relay's links (see `relay.rs`): what an origin sends (its
//! publishers' packets and sender reports, NACKed packets again), what an edge sends back
//! (its engine's reports, NACKs, PLIs and FIRs), both ends' keepalives and BYEs, and the
//! demultiplexing of all of it by SSRC among the relays of a link.
//!
//! Two nodes that relay each other's publishers hold two links between the same addresses.
//! Media on them only goes one way (origin to edge); RTCP goes both, and each end's own RTCP
//! (keepalives, BYEs) starts with a receiver report under its side's link SSRC, so a compound
//! from an origin is told from one from an edge by its first SSRC: the origin's link SSRC or
//! an SSRC of a relay in, or else the edge's.

use std::time::{Duration, Instant};

use bytes::Bytes;
use smallvec::SmallVec;

use super::relay::{RelayOut, KEEPALIVE, LINGER, LINK_TIMEOUT, REPORTS_KEPT, TICK};
use super::relay_resend::{dedup_asked, rtp_id};
use super::NodeCore;
use crate::capture::{classify, PayloadKind};
use crate::engine::rtcp::{parse_compound, RtcpFeedback};
use crate::engine::TransportId;
use crate::node::metrics::{DropReason, NodeCounters};
use crate::node::peer::PeerId;
use crate::node::remote::Remote;
use crate::node::srtp::{SrtpContext, MAX_OVERHEAD};

/// The SSRC an origin's own RTCP on a link (keepalives, BYEs) is sent under.
const ORIGIN_SSRC: u32 = 0x5354_4c4f;
/// The SSRC an edge's own RTCP on a link is sent under.
const EDGE_SSRC: u32 = 0x5354_4c45;
/// RTCP packet types (RFC 3550 section 12.1).
const RTCP_RR: u8 = 201;
const RTCP_BYE: u8 = 203;
pub(super) const RTCP_APP: u8 = 204;
/// The name of the APP packet an origin tells a relay's changed track set with.
const CHANGED: [u8; 4] = *b"STRC";
/// The name of the APP packet an edge ends a relay of a room's data with.
const DATA_ENDED: [u8; 4] = *b"STDE";

/// What an end of a link says of one relay after its keepalive.
#[derive(Debug, Clone, Copy)]
enum Signal {
    /// The relay with this SSRC ends (an RTCP BYE).
    Bye(u32),
    /// The relay with this tag has a changed track set (`STRC`).
    Changed(u32),
    /// The relay of a room's data with this tag ends (`STDE`).
    DataEnded(u32),
}

/// What an edge asked of the origin in one RTCP packet.
enum Ask {
    Keyframe(u32),
    /// A report block: its SSRC, fraction lost, last SR, delay since it.
    Report(u32, u8, u32, u32),
    /// A BYE: the relay with this SSRC ends.
    Bye(u32),
}

impl NodeCore {
    /// Whether datagrams from `from` are a link's.
    pub(super) fn is_link(&self, from: Remote) -> bool {
        let relays = &self.media_relays;
        (!relays.outs.is_empty() || !relays.ins.is_empty())
            && (relays.outs.contains_key(&from) || relays.ins.contains_key(&from))
    }

    /// A datagram from the other end of a link: media from an origin, RTCP from either.
    pub(super) fn handle_from_link(&mut self, now: Instant, from: Remote, data: &[u8]) {
        match classify(data) {
            PayloadKind::Rtp => self.handle_from_origin_rtp(now, from, data),
            PayloadKind::Rtcp if self.is_from_origin(from, data) => {
                self.handle_from_origin_rtcp(now, from, data);
            }
            PayloadKind::Rtcp => self.handle_from_edge(now, from, data),
            _ => self.counters.drop(DropReason::NotWebRtc),
        }
    }

    /// Whether an RTCP compound from `from` is on the link in (from an origin): see the
    /// module's doc.
    fn is_from_origin(&self, from: Remote, data: &[u8]) -> bool {
        let Some(link) = self.media_relays.ins.get(&from) else {
            return false;
        };
        let sender = data
            .get(4..8)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        !self.media_relays.outs.contains_key(&from)
            || sender.is_some_and(|s| s == ORIGIN_SSRC || link.by_ssrc.contains_key(&s))
    }

    /// A relayed packet: into the engine as its relay-in's.
    fn handle_from_origin_rtp(&mut self, now: Instant, from: Remote, data: &[u8]) {
        let Some(link) = self.media_relays.ins.get_mut(&from) else {
            self.counters.drop(DropReason::NotAPublisher);
            return;
        };
        let mut packet = data.to_vec();
        match link.srtp.unprotect_rtp(&mut packet) {
            Ok(len) => packet.truncate(len),
            Err(refused) => {
                self.counters.drop(DropReason::of_srtp(refused));
                return;
            }
        }
        link.heard = now;
        let owner = rtp_id(&packet).and_then(|(ssrc, _)| link.by_ssrc.get(&ssrc));
        let Some(transport) = owner.and_then(|id| self.peers.get(id)).map(|p| p.transport) else {
            self.counters.drop(DropReason::UnknownSsrc);
            return;
        };
        if let Err(refused) = self.router.handle_rtp(now, transport, Bytes::from(packet)) {
            self.counters.drop(DropReason::of_receive(refused));
        }
    }

    /// An origin's RTCP: a BYE ends the relays it names; a relayed publisher's reports go to
    /// its relay-in's engine transport; a keepalive only keeps the link.
    fn handle_from_origin_rtcp(&mut self, now: Instant, from: Remote, data: &[u8]) {
        let Some(link) = self.media_relays.ins.get_mut(&from) else {
            return;
        };
        let srtp = link.srtp.as_mut();
        let Some(len) = unprotect_rtcp(srtp, &mut self.plain, data, &mut self.counters) else {
            return;
        };
        link.heard = now;
        let association = link.data;
        self.data_from_link(now, association, len);
        let Some(link) = self.media_relays.ins.get_mut(&from) else {
            return;
        };
        let compound = &self.plain[..len];
        let ended: Vec<PeerId> = bye_ssrcs(compound)
            .iter()
            .filter_map(|ssrc| link.by_ssrc.get(ssrc).copied())
            .collect();
        if !ended.is_empty() {
            // Off the link first: the origin ended them, no BYE goes back.
            for id in &ended {
                link.relays.remove(id);
                link.by_ssrc.retain(|_, p| p != id);
            }
            for id in ended {
                tracing::info!(peer = %id, "the origin ended its relay");
                let _ = self.remove_peer(id);
            }
            return;
        }
        let mut renew = Vec::new();
        for tag in changed_tags(compound) {
            match link.by_tag.get(&tag) {
                Some(&id) if link.changed.insert(id) => renew.push(id),
                // A pull of it is asked already: the origin says so at every keepalive.
                Some(_) => self.media_relays.counters.changes_held += 1,
                None => {}
            }
        }
        let sender = compound
            .get(4..8)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let owner = sender.and_then(|s| link.by_ssrc.get(&s));
        if let Some(transport) = owner.and_then(|id| self.peers.get(id)).map(|p| p.transport) {
            let _ = self.router.handle_rtcp(now, transport, &self.plain[..len]);
        }
        for id in renew {
            self.pull_changed(id);
        }
    }

    /// A datagram from a relay's edge: SRTCP (its NACKs, keyframe requests, reports,
    /// keepalives, BYEs) or nothing.
    fn handle_from_edge(&mut self, now: Instant, from: Remote, data: &[u8]) {
        let Some(link) = self.media_relays.outs.get_mut(&from) else {
            self.counters.drop(DropReason::UnknownSource);
            return;
        };
        let srtp = link.srtp.as_mut();
        let Some(len) = unprotect_rtcp(srtp, &mut self.plain, data, &mut self.counters) else {
            return;
        };
        link.heard = now;
        let association = link.data;
        self.data_from_link(now, association, len);
        let compound = &self.plain[..len];
        let ended = data_ended_tags(compound);
        let mut asks: Vec<Ask> = bye_ssrcs(compound).into_iter().map(Ask::Bye).collect();
        let mut resends: Vec<(u32, u16)> = Vec::new();
        let parsed = parse_compound(compound, |item| match item {
            RtcpFeedback::Pli(pli) => asks.push(Ask::Keyframe(pli.media_ssrc)),
            RtcpFeedback::Fir(fir) => {
                asks.extend(fir.entries.iter().map(|e| Ask::Keyframe(e.ssrc)));
            }
            RtcpFeedback::Nack(nack) => {
                let ssrc = nack.media_ssrc;
                resends.extend(nack.pairs.lost().map(|seq| (ssrc, seq)));
            }
            RtcpFeedback::ReceiverReport(report) => {
                asks.extend(report.blocks.iter().map(|b| {
                    Ask::Report(b.ssrc, b.fraction_lost, b.last_sr, b.delay_since_last_sr)
                }));
            }
            _ => {}
        });
        if parsed.is_err() {
            self.counters.drop(DropReason::MalformedRtcp);
            return;
        }
        for ask in asks {
            self.answer_edge(now, from, ask);
        }
        self.resend_to_edge(from, resends);
        for tag in ended {
            tracing::info!(?from, tag, "the edge ended a relay of a room's data");
            self.end_data_out(from, tag);
        }
    }

    fn answer_edge(&mut self, now: Instant, from: Remote, ask: Ask) {
        if let Ask::Bye(ssrc) = ask {
            tracing::info!(?from, ssrc, "the edge ended a relay");
            self.end_relay_out(from, |r| r.ssrcs.contains(&ssrc), false);
            return;
        }
        let Some(link) = self.media_relays.outs.get_mut(&from) else {
            return;
        };
        let of = |ssrc: u32| move |r: &&mut RelayOut| r.ssrcs.contains(&ssrc);
        match ask {
            Ask::Report(ssrc, fraction_lost, last_sr, delay) => {
                let Some(relay) = link.relays.iter_mut().find(of(ssrc)) else {
                    return;
                };
                let quality = &mut link.quality;
                quality.fraction_lost = Some(fraction_lost);
                let sent = relay.reports.iter().find(|(ntp, _)| *ntp == last_sr);
                if let Some(&(_, at)) = sent.filter(|_| last_sr != 0) {
                    // The delay is in 65536ths of a second.
                    let held = Duration::from_micros(u64::from(delay) * 1_000_000 / 65_536);
                    quality.round_trip = now.saturating_duration_since(at).checked_sub(held);
                }
            }
            Ask::Keyframe(ssrc) => {
                let Some(relay) = link.relays.iter_mut().find(of(ssrc)) else {
                    return;
                };
                let Some(track) = self.router.ssrc_track(relay.transport, ssrc) else {
                    return;
                };
                if self.router.request_keyframe_of(now, track, ssrc).is_ok() {
                    self.media_relays.counters.keyframes_asked += 1;
                }
            }
            Ask::Bye(_) => {}
        }
    }

    /// The packets an edge's NACKs named (`asked`, one datagram's) sent again, within the
    /// bounds of [`relay_resend`](super::relay_resend).
    fn resend_to_edge(&mut self, from: Remote, mut asked: Vec<(u32, u16)>) {
        let relays = &mut self.media_relays;
        relays.counters.resends_refused += dedup_asked(&mut asked);
        let Some(link) = relays.outs.get_mut(&from) else {
            return;
        };
        let of_asked = |r: &&mut RelayOut| asked.iter().any(|(ssrc, _)| r.ssrcs.contains(ssrc));
        for relay in link.relays.iter_mut().filter(of_asked) {
            let queue = &mut relays.queue;
            let answered = relay
                .sent
                .answer(&asked, |packet| queue.push_back((from, packet)));
            relays.counters.resent += answered.resent;
            relays.counters.resends_refused += answered.refused;
        }
    }

    /// A packet the engine took from the publisher on `transport` goes out on its links.
    pub(super) fn relay_packet(&mut self, transport: TransportId, packet: &Bytes) {
        for (&to, link) in self.media_relays.outs.iter_mut() {
            for relay in link.relays.iter_mut().filter(|r| r.transport == transport) {
                relay.sent.push(packet.clone());
                self.media_relays.queue.push_back((to, packet.clone()));
            }
        }
    }

    /// The publisher's RTCP (its sender reports, which the edge's receivers align simulcast
    /// streams and report by) goes out on its links as it came, protected at once: one
    /// compound packet a second or so.
    pub(super) fn relay_rtcp(&mut self, now: Instant, transport: TransportId, compound: &[u8]) {
        let mut sent_report = None;
        let _ = parse_compound(compound, |item| {
            if let RtcpFeedback::SenderReport(report) = item {
                sent_report = Some((report.ntp_time >> 16) as u32);
            }
        });
        // What the edge reads is the publisher's sender reports, under its streams' SSRCs;
        // the link's SRTCP keeps an index per SSRC it sends under, so nothing else goes.
        let sender = compound
            .get(4..8)
            .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]));
        let mut buf = Vec::with_capacity(compound.len() + MAX_OVERHEAD);
        for (&to, link) in self.media_relays.outs.iter_mut() {
            let Some(relay) = link.relays.iter_mut().find(|r| r.transport == transport) else {
                continue;
            };
            if !sender.is_some_and(|ssrc| relay.ssrcs.contains(&ssrc)) {
                self.counters.drop(DropReason::UnknownSsrc);
                continue;
            }
            if let Some(ntp) = sent_report {
                if relay.reports.len() == REPORTS_KEPT {
                    relay.reports.pop_front();
                }
                relay.reports.push_back((ntp, now));
            }
            buf.clear();
            buf.extend_from_slice(compound);
            buf.resize(compound.len() + MAX_OVERHEAD, 0);
            match link.srtp.protect_rtcp(&mut buf, compound.len()) {
                Ok(len) => self.handshake_out.push_back((to, buf[..len].to_vec())),
                Err(_) => self.counters.drop(DropReason::SrtpRejected),
            }
        }
    }

    /// The decrypted packet to be relayed, when the publisher on `transport` has links.
    pub(super) fn wants_relay(&self, transport: TransportId) -> bool {
        let outs = &self.media_relays.outs;
        !outs.is_empty()
            && outs
                .values()
                .any(|l| l.relays.iter().any(|r| r.transport == transport))
    }

    /// The next packet for a link, protected in `out`.
    pub(super) fn poll_relayed(&mut self, out: &mut [u8]) -> Option<(Remote, usize)> {
        while let Some((to, packet)) = self.media_relays.queue.pop_front() {
            let Some(link) = self.media_relays.outs.get_mut(&to) else {
                continue;
            };
            let len = packet.len();
            let fits = len + MAX_OVERHEAD <= out.len();
            let Some(slot) = out.get_mut(..len).filter(|_| fits) else {
                self.counters.drop(DropReason::TooLong);
                continue;
            };
            slot.copy_from_slice(&packet);
            match link.srtp.protect_rtp(out, len) {
                Ok(protected) => {
                    self.counters.bytes_out += protected as u64;
                    self.media_relays.counters.packets_out += 1;
                    return Some((to, protected));
                }
                Err(_) => self.counters.drop(DropReason::SrtpRejected),
            }
        }
        None
    }

    /// What the engine sends relay-in `id` (its reports, NACKs, PLIs), protected in `out`
    /// under its link's keys: `None` when `id` is no relay-in, else where it goes.
    pub(super) fn protect_on_link(
        &mut self,
        id: PeerId,
        rtcp: bool,
        out: &mut [u8],
        len: usize,
    ) -> Option<Option<(Remote, usize)>> {
        let from = *self.media_relays.in_peers.get(&id)?;
        let link = self.media_relays.ins.get_mut(&from);
        let protected = link.filter(|_| rtcp).map(|l| l.srtp.protect_rtcp(out, len));
        Some(match protected {
            Some(Ok(protected)) => {
                self.counters.bytes_out += protected as u64;
                Some((from, protected))
            }
            _ => {
                self.counters.drop(DropReason::SrtpRejected);
                None
            }
        })
    }

    /// The links' keepalives, lost links, and relays nobody receives any more.
    pub(super) fn handle_relay_timeouts(&mut self, now: Instant) {
        if self.media_relays.next_tick.is_none_or(|at| at > now) {
            return;
        }
        self.media_relays.next_tick = Some(now + TICK);
        let silent = |heard: Instant| now.saturating_duration_since(heard) > LINK_TIMEOUT;
        let lost: Vec<Remote> = self
            .media_relays
            .outs
            .iter()
            .filter(|(_, l)| silent(l.heard))
            .map(|(&to, _)| to)
            .collect();
        for to in lost {
            tracing::warn!(?to, "a relay link went silent");
            self.remove_link_out(to);
            self.media_relays.counters.links_lost += 1;
        }
        let due: Vec<Remote> = self
            .media_relays
            .outs
            .iter_mut()
            .filter(|(_, l)| l.next_keepalive <= now)
            .map(|(&to, l)| {
                l.next_keepalive = now + KEEPALIVE;
                to
            })
            .collect();
        for to in due {
            self.send_link_rtcp(to, true, None);
            self.announce_changes(to);
        }
        let ins: Vec<Remote> = self.media_relays.ins.keys().copied().collect();
        for from in ins {
            self.check_link_in(now, from);
        }
    }

    fn check_link_in(&mut self, now: Instant, from: Remote) {
        let Some(link) = self.media_relays.ins.get(&from) else {
            return;
        };
        if now.saturating_duration_since(link.heard) > LINK_TIMEOUT {
            tracing::warn!(?from, "a relay link went silent");
            self.media_relays.counters.links_lost += 1;
            self.end_link_in(from);
            return;
        }
        let (heard, relays) = (link.heard, link.relays.keys().copied().collect::<Vec<_>>());
        for id in relays {
            self.check_relay_in(now, from, id, heard);
        }
        self.check_data_in(now, from);
        let Some(link) = self.media_relays.ins.get_mut(&from) else {
            return;
        };
        if link.next_keepalive <= now {
            link.next_keepalive = now + KEEPALIVE;
            self.send_link_rtcp(from, false, None);
        }
    }

    /// A relay-in lives while its link does, and lingers once its room has nobody to
    /// receive it.
    fn check_relay_in(&mut self, now: Instant, from: Remote, id: PeerId, heard: Instant) {
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        peer.last_seen = heard;
        let wanted = self
            .rooms
            .get(&peer.room)
            .is_some_and(|r| !r.viewers.is_empty() || !r.participants.is_empty());
        let Some(idle) = self
            .media_relays
            .ins
            .get_mut(&from)
            .and_then(|l| l.relays.get_mut(&id))
        else {
            return;
        };
        if wanted {
            *idle = None;
        } else if now.saturating_duration_since(*idle.get_or_insert(now)) >= LINGER {
            tracing::info!(peer = %id, "nobody receives a relay any more");
            self.media_relays.counters.ended_idle += 1;
            // Its BYE goes as it leaves its link.
            let _ = self.remove_peer(id);
        }
    }

    /// A BYE of the relay `ssrc` names, from the origin's end or the edge's.
    pub(super) fn send_bye(&mut self, to: Remote, origin: bool, ssrc: u32) {
        self.send_link_rtcp(to, origin, Some(Signal::Bye(ssrc)));
    }

    /// The origin's word that the track set of the relay tagged `tag` changed: the edge
    /// asks for it again.
    pub(super) fn send_changed(&mut self, to: Remote, tag: u32) {
        self.send_link_rtcp(to, true, Some(Signal::Changed(tag)));
    }

    /// The edge's word that the relay of a room's data tagged `tag` on the link from `from`
    /// ends.
    pub(super) fn send_data_ended(&mut self, from: Remote, tag: u32) {
        self.send_link_rtcp(from, false, Some(Signal::DataEnded(tag)));
    }

    /// The link's own RTCP: an empty receiver report under this end's link SSRC (a
    /// keepalive), and a BYE or an APP packet of one relay after it, protected at once under
    /// the link's keys and sent with the handshakes.
    fn send_link_rtcp(&mut self, to: Remote, origin: bool, then: Option<Signal>) {
        let mut packet = self.link_compound(origin);
        let app = |tag: u32, name: &[u8; 4], packet: &mut Vec<u8>| {
            let mut app = link_rtcp(RTCP_APP, 0, tag);
            app[3] = 2;
            packet.extend_from_slice(&app);
            packet.extend_from_slice(name);
        };
        match then {
            Some(Signal::Bye(ssrc)) => packet.extend_from_slice(&link_rtcp(RTCP_BYE, 1, ssrc)),
            Some(Signal::Changed(tag)) => app(tag, &CHANGED, &mut packet),
            Some(Signal::DataEnded(tag)) => app(tag, &DATA_ENDED, &mut packet),
            None => {}
        }
        self.send_on_link(to, origin, packet);
    }

    /// The SSRC of this end's own RTCP on a link: the origin's or the edge's.
    pub(super) fn link_ssrc(&self, origin: bool) -> u32 {
        match origin {
            true => ORIGIN_SSRC,
            false => EDGE_SSRC,
        }
    }

    /// A compound of this end's own on a link: its empty receiver report first, which tells
    /// the two links between the same addresses apart.
    pub(super) fn link_compound(&self, origin: bool) -> Vec<u8> {
        link_rtcp(RTCP_RR, 0, self.link_ssrc(origin)).to_vec()
    }

    /// `packet`, a compound of this end's own, protected at once under the keys of the link
    /// to `to` (toward an edge when `origin`) and sent with the handshakes.
    pub(super) fn send_on_link(&mut self, to: Remote, origin: bool, mut packet: Vec<u8>) {
        let relays = &mut self.media_relays;
        let srtp = match origin {
            true => relays.outs.get_mut(&to).map(|l| &mut l.srtp),
            false => relays.ins.get_mut(&to).map(|l| &mut l.srtp),
        };
        let len = packet.len();
        packet.resize(len + MAX_OVERHEAD, 0);
        match srtp.map(|s| s.protect_rtcp(&mut packet, len)) {
            Some(Ok(len)) => {
                packet.truncate(len);
                self.handshake_out.push_back((to, packet));
            }
            _ => self.counters.drop(DropReason::SrtpRejected),
        }
    }
}

/// `data` unprotected under `srtp` into `plain`: its length, or nothing (counted) when it
/// does not authenticate.
fn unprotect_rtcp(
    srtp: &mut dyn SrtpContext,
    plain: &mut Vec<u8>,
    data: &[u8],
    counters: &mut NodeCounters,
) -> Option<usize> {
    plain.clear();
    plain.extend_from_slice(data);
    match srtp.unprotect_rtcp(plain) {
        Ok(len) => Some(len),
        Err(refused) => {
            counters.drop(DropReason::of_srtp(refused));
            None
        }
    }
}

/// An RTCP header with no body past one SSRC: a receiver report without blocks (of its
/// sender), or a BYE of that SSRC.
pub(super) fn link_rtcp(packet_type: u8, count: u8, ssrc: u32) -> [u8; 8] {
    let ssrc = ssrc.to_be_bytes();
    [
        0x80 | count,
        packet_type,
        0,
        1,
        ssrc[0],
        ssrc[1],
        ssrc[2],
        ssrc[3],
    ]
}

/// The packets of a compound RTCP packet, each as long as its header says; those past a bad
/// length are not read.
pub(super) fn rtcp_packets(compound: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = compound;
    std::iter::from_fn(move || {
        let header = rest.get(..4)?;
        let len = (usize::from(u16::from_be_bytes([header[2], header[3]])) + 1) * 4;
        let packet = rest.get(..len)?;
        rest = &rest[len..];
        Some(packet)
    })
}

/// The SSRCs the BYEs of a compound RTCP packet name (RFC 3550 section 6.6), as many as its
/// bytes hold.
pub fn bye_ssrcs(compound: &[u8]) -> SmallVec<[u32; 4]> {
    let mut named = SmallVec::new();
    for packet in rtcp_packets(compound).filter(|p| p[1] == RTCP_BYE) {
        let count = usize::from(packet[0] & 0x1f);
        let ssrcs = packet[4..].chunks_exact(4).take(count);
        named.extend(ssrcs.map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])));
    }
    named
}

/// The relays' tags the link's "changed" APP packets of a compound name (RFC 3550 section
/// 6.7: in the SSRC's place, then the name): relays whose publisher's track set changed.
pub fn changed_tags(compound: &[u8]) -> SmallVec<[u32; 4]> {
    app_tags(compound, CHANGED)
}

/// The tags of the relays of rooms' data an edge's `STDE` APP packets of a compound name: the
/// relays it ends.
pub fn data_ended_tags(compound: &[u8]) -> SmallVec<[u32; 4]> {
    app_tags(compound, DATA_ENDED)
}

/// The relays' tags the APP packets named `name` of a compound name, in the SSRC's place.
fn app_tags(compound: &[u8], name: [u8; 4]) -> SmallVec<[u32; 4]> {
    let apps = rtcp_packets(compound).filter(|p| p[1] == RTCP_APP);
    apps.filter(|p| p.get(8..12) == Some(name.as_slice()))
        .map(|p| u32::from_be_bytes([p[4], p[5], p[6], p[7]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bye_names_its_ssrcs_and_a_short_one_names_what_it_holds() {
        let mut compound = link_rtcp(RTCP_RR, 0, 1).to_vec();
        compound.extend_from_slice(&link_rtcp(RTCP_BYE, 1, 7));
        assert_eq!(bye_ssrcs(&compound).as_slice(), &[7]);
        // A count past the packet's length names what is there.
        let mut short = link_rtcp(RTCP_BYE, 3, 9).to_vec();
        short.extend_from_slice(&[0, 0, 0, 5]);
        short[3] = 2;
        assert_eq!(bye_ssrcs(&short).as_slice(), &[9, 5]);
        assert!(bye_ssrcs(&[0x81, RTCP_BYE, 0, 9, 0, 0]).is_empty());
        assert!(bye_ssrcs(&[]).is_empty());
    }

    #[test]
    fn a_changed_app_packet_names_its_relay_and_another_app_nothing() {
        let mut compound = link_rtcp(RTCP_RR, 0, 1).to_vec();
        let mut app = link_rtcp(RTCP_APP, 0, 0xA1);
        app[3] = 2;
        compound.extend_from_slice(&app);
        compound.extend_from_slice(&CHANGED);
        assert_eq!(changed_tags(&compound).as_slice(), &[0xA1]);
        assert!(data_ended_tags(&compound).is_empty(), "not an end");
        let other = compound.len() - 4;
        compound[other..].copy_from_slice(&DATA_ENDED);
        assert_eq!(data_ended_tags(&compound).as_slice(), &[0xA1]);
        assert!(changed_tags(&compound).is_empty());
        compound[other..].copy_from_slice(b"XXXX");
        assert!(changed_tags(&compound).is_empty());
        assert!(data_ended_tags(&compound).is_empty());
    }

    proptest::proptest! {
        /// Whatever the bytes, the reader neither panics nor names more SSRCs than they hold.
        #[test]
        fn any_bytes_read_without_panic(bytes in proptest::collection::vec(0u8.., 0..256)) {
            proptest::prop_assert!(bye_ssrcs(&bytes).len() <= bytes.len() / 4);
            proptest::prop_assert!(changed_tags(&bytes).len() <= bytes.len() / 12);
            proptest::prop_assert!(data_ended_tags(&bytes).len() <= bytes.len() / 12);
        }
    }
}
