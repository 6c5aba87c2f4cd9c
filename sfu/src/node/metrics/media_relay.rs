//! The media relay between nodes in `/metrics`: the relays this node sends and receives now,
//! and what they did.

use super::{counter, family, Family};
use std::net::SocketAddr;

use crate::node::core::{LinkQuality, PullReason, RelayCounters};

/// One worker's relays, or the node's summed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayFigures {
    /// Relays this node is the origin of.
    pub out: usize,
    /// Relays this node is the edge of.
    pub into: usize,
    /// Links toward edges.
    pub links_out: usize,
    /// Links from origins.
    pub links_in: usize,
    /// Links whose data channel association is up.
    pub data_links: usize,
    /// Relays of a room's data alone this node is the origin of, and the edge of.
    pub data_relays: (usize, usize),
    /// What they did.
    pub counters: RelayCounters,
    /// Each relay's link, by the edge's address, as the edge's reports show it.
    pub links: Vec<(SocketAddr, LinkQuality)>,
}

impl RelayFigures {
    /// Another worker's added.
    pub fn add(&mut self, other: &RelayFigures) {
        self.out += other.out;
        self.into += other.into;
        self.links_out += other.links_out;
        self.links_in += other.links_in;
        self.data_links += other.data_links;
        self.data_relays.0 += other.data_relays.0;
        self.data_relays.1 += other.data_relays.1;
        let (a, b) = (&mut self.counters, other.counters);
        a.started_out += b.started_out;
        a.started_in += b.started_in;
        a.rebound += b.rebound;
        a.ended_idle += b.ended_idle;
        a.links_lost += b.links_lost;
        a.packets_out += b.packets_out;
        a.resent += b.resent;
        a.resends_refused += b.resends_refused;
        a.keyframes_asked += b.keyframes_asked;
        for (a, b) in a.refused.iter_mut().zip(b.refused) {
            *a += b;
        }
        a.data_started_out += b.data_started_out;
        a.data_started_in += b.data_started_in;
        a.data_ended += b.data_ended;
        for (a, b) in a.pulls.iter_mut().zip(b.pulls) {
            *a += b;
        }
        a.pulls_dropped += b.pulls_dropped;
        a.changes_held += b.changes_held;
        self.links.extend_from_slice(&other.links);
    }

    pub(super) fn render(&self, out: &mut String) {
        let (name, kind) = ("media_relays", "gauge");
        let help = "Publishers relayed to another node (out) and from another node (in) now.";
        let samples = [
            ("{direction=\"out\"}", self.out as u64),
            ("{direction=\"in\"}", self.into as u64),
        ];
        family(out, Family { name, help, kind }, samples);
        let (name, help) = (
            "media_relay_links",
            "Relay links toward (out) and from (in) nodes.",
        );
        let samples = [
            ("{direction=\"out\"}", self.links_out as u64),
            ("{direction=\"in\"}", self.links_in as u64),
        ];
        family(out, Family { name, help, kind }, samples);
        let (name, help) = (
            "media_relay_data_links",
            "Relay links whose data channel association is up.",
        );
        family(
            out,
            Family { name, help, kind },
            [("", self.data_links as u64)],
        );
        let c = &self.counters;
        let (name, kind) = ("media_relays_refused_total", "counter");
        let help = "Relays refused, by reason: a link full, too many links, an SSRC taken.";
        let labels = RelayCounters::REFUSALS.map(|r| format!("{{reason=\"{r}\"}}"));
        let samples = labels.iter().map(String::as_str).zip(c.refused);
        family(out, Family { name, help, kind }, samples);
        let (name, kind) = ("media_relays_started_total", "counter");
        let help = "Relays started, to (out) and from (in) another node.";
        let samples = [
            ("{direction=\"out\"}", c.started_out),
            ("{direction=\"in\"}", c.started_in),
        ];
        family(out, Family { name, help, kind }, samples);
        let help = "Relays an edge renewed in place: streams bound to SSRCs their origin \
            learned since, its viewers going on.";
        counter(out, "media_relays_rebound_total", help, c.rebound);
        let help = "Relays an edge ended after its linger without a receiving session.";
        counter(out, "media_relays_ended_idle_total", help, c.ended_idle);
        let help = "Relay links lost: silent past the link timeout, with every relay on them.";
        counter(out, "media_relay_links_lost_total", help, c.links_lost);
        let help = "RTP packets sent on relay links, NACKed ones again included.";
        counter(out, "media_relay_packets_out_total", help, c.packets_out);
        let help = "RTP packets sent again on relay links for an edge's NACK.";
        counter(out, "media_relay_resent_total", help, c.resent);
        let help = "Sequence numbers an edge's NACK named that were not sent again: named \
            twice in one datagram, past a ring's worth of it, or sent again eight times already.";
        counter(
            out,
            "media_relay_resends_refused_total",
            help,
            c.resends_refused,
        );
        let help = "Keyframe requests (PLI, FIR) from edges passed to a publisher's throttle.";
        counter(
            out,
            "media_relay_keyframes_asked_total",
            help,
            c.keyframes_asked,
        );
        self.render_data_and_pulls(out);
        self.render_links(out);
    }

    /// The relays of rooms' data alone, and what the edge asked its node to pull.
    fn render_data_and_pulls(&self, out: &mut String) {
        let c = &self.counters;
        let (name, kind) = ("media_data_relays", "gauge");
        let help = "Relays of a room's data alone to another node (out) and from another \
            node (in) now.";
        let samples = [
            ("{direction=\"out\"}", self.data_relays.0 as u64),
            ("{direction=\"in\"}", self.data_relays.1 as u64),
        ];
        family(out, Family { name, help, kind }, samples);
        let (name, kind) = ("media_data_relays_started_total", "counter");
        let help = "Relays of a room's data alone started, to (out) and from (in) another node.";
        let samples = [
            ("{direction=\"out\"}", c.data_started_out),
            ("{direction=\"in\"}", c.data_started_in),
        ];
        family(out, Family { name, help, kind }, samples);
        let help = "Relays of a room's data an edge ended: nobody in the room on one side.";
        counter(out, "media_data_relays_ended_total", help, c.data_ended);
        let name = "media_relay_pulls_total";
        let help = "Pulls asked of the node, by why: a publisher in the room's state, a \
            changed track set, participants in the room's state, another node's request.";
        let labels = PullReason::LABELS.map(|r| format!("{{reason=\"{r}\"}}"));
        let samples = labels.iter().map(String::as_str).zip(c.pulls);
        family(out, Family { name, help, kind }, samples);
        let help = "Pulls the node's queue had no room for (asked again when next wanted).";
        counter(
            out,
            "media_relay_pulls_dropped_total",
            help,
            c.pulls_dropped,
        );
        let help = "Words that a relay's track set changed heard while its pull was asked.";
        counter(out, "media_relay_changes_held_total", help, c.changes_held);
    }

    /// Each link's loss and round trip, by the edge's address.
    fn render_links(&self, out: &mut String) {
        let per_link = |pick: fn(&LinkQuality) -> Option<u64>| {
            self.links
                .iter()
                .filter_map(move |(peer, q)| Some((format!("{{peer=\"{peer}\"}}"), pick(q)?)))
        };
        let (name, kind) = ("media_relay_link_loss_percent", "gauge");
        let help = "Packets lost toward an edge over its last report interval, in percent.";
        let loss = |q: &LinkQuality| q.fraction_lost.map(|f| u64::from(f) * 100 / 256);
        family(out, Family { name, help, kind }, per_link(loss));
        let name = "media_relay_link_round_trip_ms";
        let help = "The round trip to an edge, from a relayed sender report to its report of it.";
        let rtt = |q: &LinkQuality| q.round_trip.map(|d| d.as_millis() as u64);
        family(out, Family { name, help, kind }, per_link(rtt));
    }
}
