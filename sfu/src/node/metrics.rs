//! What the node counts, and `/metrics` in the Prometheus text exposition format.

use std::fmt::Write;

use super::limits::LimitError;

/// Why the node dropped a datagram or a packet before the engine saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Not STUN, and from an address no session was nominated at.
    UnknownSource,
    /// A first byte no RFC 7983 range of ours claims.
    NotWebRtc,
    /// STUN that is not a valid binding request for one of our sessions.
    BadStun,
    /// SRTP before the session's DTLS handshake finished.
    NoKeys,
    /// SRTP or SRTCP that failed authentication or replay protection (or failed to encrypt).
    SrtpRejected,
    /// RTP from a viewer.
    NotAPublisher,
    /// RTP under an SSRC the sending session did not announce or bind (a simulcast stream
    /// before its rid is read, another session's SSRC), or too short to name one. What the
    /// engine's receivers refuse is counted as `engine`.
    UnknownSsrc,
    /// A packet for a session not connected yet (no nominated address or no keys).
    NotConnected,
    /// A datagram the socket would not take (send buffer full).
    SendFailed,
}

impl DropReason {
    const ALL: [DropReason; 9] = [
        Self::UnknownSource,
        Self::NotWebRtc,
        Self::BadStun,
        Self::NoKeys,
        Self::SrtpRejected,
        Self::NotAPublisher,
        Self::UnknownSsrc,
        Self::NotConnected,
        Self::SendFailed,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::UnknownSource => "unknown_source",
            Self::NotWebRtc => "not_webrtc",
            Self::BadStun => "bad_stun",
            Self::NoKeys => "no_keys",
            Self::SrtpRejected => "srtp_rejected",
            Self::NotAPublisher => "not_a_publisher",
            Self::UnknownSsrc => "unknown_ssrc",
            Self::NotConnected => "not_connected",
            Self::SendFailed => "send_failed",
        }
    }
}

/// The node's own counters (the engine keeps its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCounters {
    pub datagrams_in: u64,
    pub bytes_in: u64,
    pub rtp_out: u64,
    pub bytes_out: u64,
    /// The engine's events, by kind: a viewer's layer changed; a viewer's receiver sent a
    /// bandwidth estimate (REMB); allocation capped a viewer's layer to fit its estimate.
    pub layer_changes: u64,
    pub bandwidth_estimates: u64,
    pub layer_allocations: u64,
    dropped: [u64; DropReason::ALL.len()],
    refused: [u64; LimitError::LABELS.len()],
}

impl NodeCounters {
    pub fn refuse(&mut self, limit: LimitError) {
        self.refused[limit.index()] += 1;
    }

    pub fn refused(&self, limit: LimitError) -> u64 {
        self.refused[limit.index()]
    }

    pub fn drop(&mut self, reason: DropReason) {
        self.dropped[reason as usize] += 1;
    }

    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason as usize]
    }
}

/// Everything `/metrics` shows, gathered from the node and the engine in one pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub rooms: usize,
    pub publishers: usize,
    pub viewers: usize,
    /// Sessions whose ICE and DTLS have not completed.
    pub connecting: usize,
    pub tracks: usize,
    pub subscriptions: usize,
    pub node: NodeCounters,
    pub rtp_in: u64,
    /// Dropped by the engine's receivers (malformed, duplicate, unreadable DD, ...).
    pub engine_dropped_in: u64,
    pub bad_rtcp: u64,
    pub nacks_sent: u64,
    pub retransmissions: u64,
    pub keyframes_asked: u64,
    pub keyframe_requests_sent: u64,
}

struct Family<'a> {
    name: &'a str,
    help: &'a str,
    kind: &'a str,
}

fn family(out: &mut String, f: Family<'_>, samples: &[(&str, u64)]) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "# HELP strata_{} {}", f.name, f.help);
    let _ = writeln!(out, "# TYPE strata_{} {}", f.name, f.kind);
    for (labels, value) in samples {
        let _ = writeln!(out, "strata_{}{labels} {value}", f.name);
    }
}

/// A counter family with one sample per reason.
fn by_reason<'a>(
    out: &mut String,
    name: &str,
    help: &str,
    reasons: impl IntoIterator<Item = (&'a str, u64)>,
) {
    let labelled: Vec<(String, u64)> = reasons
        .into_iter()
        .map(|(reason, value)| (format!("{{reason=\"{reason}\"}}"), value))
        .collect();
    let samples: Vec<(&str, u64)> = labelled.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    let kind = "counter";
    family(out, Family { name, help, kind }, &samples);
}

fn gauge(out: &mut String, name: &str, help: &str, value: usize) {
    let kind = "gauge";
    family(out, Family { name, help, kind }, &[("", value as u64)]);
}

fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let kind = "counter";
    family(out, Family { name, help, kind }, &[("", value)]);
}

impl Snapshot {
    pub fn render(&self) -> String {
        let mut out = String::new();
        gauge(&mut out, "rooms", "Rooms with a session.", self.rooms);
        gauge(&mut out, "publishers", "WHIP sessions.", self.publishers);
        gauge(&mut out, "subscribers", "WHEP sessions.", self.viewers);
        let connecting = "Sessions whose ICE and DTLS have not completed.";
        gauge(&mut out, "sessions_connecting", connecting, self.connecting);
        gauge(&mut out, "tracks", "Published tracks.", self.tracks);
        let subs = "Subscriptions (one per viewer track).";
        gauge(&mut out, "subscriptions", subs, self.subscriptions);
        let n = &self.node;
        counter(
            &mut out,
            "datagrams_in_total",
            "UDP datagrams received.",
            n.datagrams_in,
        );
        counter(
            &mut out,
            "bytes_in_total",
            "UDP bytes received.",
            n.bytes_in,
        );
        counter(
            &mut out,
            "packets_in_total",
            "RTP packets given to the engine.",
            self.rtp_in,
        );
        counter(
            &mut out,
            "packets_out_total",
            "RTP packets sent.",
            n.rtp_out,
        );
        counter(&mut out, "bytes_out_total", "UDP bytes sent.", n.bytes_out);
        let layers = "Changes of the layer a viewer receives.";
        counter(&mut out, "layer_changes_total", layers, n.layer_changes);
        let estimates = "Bandwidth estimates (REMB) from viewers.";
        counter(
            &mut out,
            "bandwidth_estimates_total",
            estimates,
            n.bandwidth_estimates,
        );
        let allocations = "Layer caps set to fit a viewer's bandwidth estimate.";
        counter(
            &mut out,
            "layer_allocations_total",
            allocations,
            n.layer_allocations,
        );
        let drops = DropReason::ALL.iter().map(|&r| (r.label(), n.dropped(r)));
        let engine = [
            ("engine", self.engine_dropped_in),
            ("bad_rtcp", self.bad_rtcp),
        ];
        let help = "Packets dropped, by reason.";
        by_reason(&mut out, "dropped_total", help, drops.chain(engine));
        let refused = LimitError::LABELS.iter().copied().zip(n.refused);
        let help = "New sessions refused at a limit, by limit.";
        by_reason(&mut out, "sessions_refused_total", help, refused);
        let nacks = "NACKs sent to publishers.";
        counter(&mut out, "nacks_sent_total", nacks, self.nacks_sent);
        let rtx = "Packets retransmitted to subscribers on their NACKs.";
        counter(&mut out, "retransmissions_total", rtx, self.retransmissions);
        let asked = "Keyframes asked for (subscriber PLI/FIR and layer switches).";
        counter(
            &mut out,
            "keyframes_asked_total",
            asked,
            self.keyframes_asked,
        );
        let sent = "Keyframe requests (PLI or FIR) sent to publishers.";
        counter(
            &mut out,
            "keyframe_requests_sent_total",
            sent,
            self.keyframe_requests_sent,
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, series: &str) -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn every_series_is_typed_and_carries_its_value() {
        let mut node = NodeCounters::default();
        node.drop(DropReason::SrtpRejected);
        node.drop(DropReason::SrtpRejected);
        node.rtp_out = 41;
        let snapshot = Snapshot {
            rooms: 2,
            tracks: 3,
            node,
            keyframe_requests_sent: 5,
            ..Snapshot::default()
        };
        let text = snapshot.render();
        assert_eq!(value(&text, "strata_rooms"), Some(2));
        assert_eq!(value(&text, "strata_tracks"), Some(3));
        assert_eq!(value(&text, "strata_packets_out_total"), Some(41));
        let srtp = "strata_dropped_total{reason=\"srtp_rejected\"}";
        assert_eq!(value(&text, srtp), Some(2));
        assert_eq!(value(&text, "strata_keyframe_requests_sent_total"), Some(5));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().expect("a name");
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} has a TYPE line"
            );
        }
    }
}
